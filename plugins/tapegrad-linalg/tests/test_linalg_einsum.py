"""einsum: values against NumPy for every kind of subscript string, gradients of every
operand (diagonals, labels only one operand has, broadcasting), second derivatives, errors."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck

RNG = np.random.default_rng(11)


def rand(shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def leaf(a):
    return tg.tensor(a, requires_grad=True)


# (subscripts, operand shapes)
CASES = [
    ("ij,jk->ik", (2, 3), (3, 4)),
    ("ij,jk", (2, 3), (3, 4)),                      # implicit output "ik"
    ("ii->", (3, 3)),                               # trace
    ("ii", (3, 3)),                                 # implicit trace
    ("ii->i", (3, 3)),                              # diagonal
    ("ij->ji", (2, 3)),
    ("ji", (2, 3)),                                 # implicit "ij": a transpose
    ("bij,bjk->bik", (2, 2, 3), (2, 3, 2)),
    ("i,i->", (3,), (3,)),
    ("i,i", (3,), (3,)),
    ("i,j->ij", (2,), (3,)),
    ("i,j", (2,), (3,)),
    ("ijk,jl->ikl", (2, 3, 2), (3, 4)),
    ("ij,jk,kl->il", (2, 3), (3, 2), (2, 4)),
    ("ij,jk,kl,lm->mi", (2, 3), (3, 2), (2, 4), (4, 2)),
    ("ij->", (2, 3)),
    ("ij->i", (2, 3)),
    ("ij->j", (2, 3)),
    ("iij->ij", (3, 3, 2)),
    ("iji->j", (2, 3, 2)),
    ("iii->i", (2, 2, 2)),
    ("iijj->ij", (2, 2, 3, 3)),
    ("ii,i->i", (3, 3), (3,)),
    ("ii,ij->j", (3, 3), (3, 2)),
    ("ij,ij->ij", (2, 3), (2, 3)),
    ("ij,ij->", (2, 3), (2, 3)),
    ("ij,kl->ijkl", (2, 3), (2, 2)),
    ("ij,j->ij", (2, 3), (1,)),                     # length-1 axis broadcasts
    ("ij,jk->ik", (2, 1), (3, 4)),                  # ... also a contracted one
    ("ii,i->i", (1, 1), (3,)),                      # ... also a diagonal
    ("Ba,aC", (2, 3), (3, 4)),                      # implicit: upper case first, "BC"
    ("bA", (2, 3)),                                 # implicit "Ab"
    (" i j , j k -> k i ", (2, 3), (3, 4)),         # spaces are ignored
    ("i,->i", (3,), ()),                            # 0-d operand
    (",->", (), ()),
    ("ij,jk->ik", (20, 30), (30, 16)),              # big enough for the BLAS path
    ("ab,bc,cd->ad", (16, 16), (16, 16), (16, 16)),
]
IDS = [c[0].replace(" ", "_") for c in CASES]


def operands(case, dtype=np.float64):
    return [rand(s, dtype) if s else np.asarray(rand((), dtype)) for s in case[1:]]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_match_numpy(case, dtype):
    arrays = operands(case, dtype)
    out = tg.einsum(case[0], *[leaf(a) for a in arrays])
    expected = np.einsum(case[0], *arrays)
    assert out.shape == expected.shape
    assert out.dtype == expected.dtype
    assert out.requires_grad
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(out.numpy(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", [c for c in CASES if max(map(len, c[1:])) <= 3
                                  and sum(np.prod(s) for s in c[1:]) < 200],
                         ids=[i for i, c in zip(IDS, CASES) if max(map(len, c[1:])) <= 3
                              and sum(np.prod(s) for s in c[1:]) < 200])
def test_every_operand_gets_a_gradient_that_matches_finite_differences(case):
    xs = [leaf(a) for a in operands(case)]
    assert gradcheck(lambda *xs: tg.einsum(case[0], *xs), xs)
    out = tg.einsum(case[0], *xs)
    out.backward(tg.ones(out.shape))
    for x in xs:
        assert x.grad is not None and x.grad.shape == x.shape and x.grad.dtype == x.dtype


def test_big_operands_take_the_blas_path_with_the_same_gradients():
    a, b = rand((20, 30)), rand((30, 16))
    x, y = leaf(a), leaf(b)
    out = tg.einsum("ij,jk->ik", x, y)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-12)
    g = rand((20, 16))
    out.backward(tg.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), g @ b.T, rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), a.T @ g, rtol=1e-12)


def test_the_gradient_of_a_trace_is_the_identity_times_g():
    x = leaf(rand((3, 3)))
    (tg.einsum("ii", x) * 2.5).backward()
    np.testing.assert_array_equal(x.grad.numpy(), 2.5 * np.eye(3))


def test_the_gradient_of_a_diagonal_is_zero_off_it():
    x = leaf(rand((3, 3, 2)))
    g = rand((3, 2))
    tg.einsum("iij->ij", x).backward(tg.tensor(g))
    expected = np.zeros((3, 3, 2))
    expected[np.arange(3), np.arange(3)] = g
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_a_label_only_one_operand_has_broadcasts_its_gradient():
    x = leaf(rand((2, 3)))
    g = rand(2)
    tg.einsum("ij->i", x).backward(tg.tensor(g))
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat(g[:, None], 3, axis=1))


def test_a_broadcast_length_one_axis_gets_the_summed_gradient():
    a, b = rand((2, 3)), rand(1)
    x, y = leaf(a), leaf(b)
    tg.einsum("ij,j->ij", x, y).sum().backward()
    assert y.grad.shape == (1,)
    np.testing.assert_allclose(y.grad.numpy(), [a.sum()], rtol=1e-12)


def test_operands_may_be_arrays_lists_and_numbers():
    a = rand(3)
    x = leaf(a)
    out = tg.einsum("i,i,->", x, [1.0, 2.0, 3.0], 2.0)
    np.testing.assert_allclose(out.numpy(), 2.0 * a @ [1.0, 2.0, 3.0], rtol=1e-12)
    out.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_integer_operands_are_constants():
    x = leaf(rand(3))
    out = tg.einsum("i,i->", x, tg.tensor(np.arange(3)))
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 2.0])
    assert tg.einsum("ij->j", tg.tensor(np.arange(6).reshape(2, 3))).dtype == np.int64


def test_numpy_einsum_dispatches_to_tapegrad():
    a = rand((2, 3))
    out = np.einsum("ij->j", leaf(a))
    assert isinstance(out, tg.Tensor) and out.requires_grad
    np.testing.assert_allclose(out.numpy(), a.sum(0))


def test_a_transposing_einsum_is_a_view_that_refuses_in_place_writes_in_a_graph():
    # np.einsum("ij->ji", a) shares a's memory; writing into it must not silently change
    # a value the graph saved.
    h = tg.tanh(leaf(rand((2, 3))))
    y = tg.einsum("ij->ji", h)
    with pytest.raises(RuntimeError):
        y += 1.0


# ---------------------------------------------------------------------------------------
# Second derivatives
# ---------------------------------------------------------------------------------------

SECOND = ["ij,jk->ik", "ii,i->i", "ij,j->i", "i,j->ij", "ij,jk,kl->il", "iij,j->i"]
SECOND_SHAPES = {"ij,jk->ik": [(2, 3), (3, 2)], "ii,i->i": [(3, 3), (3,)],
                 "ij,j->i": [(2, 3), (3,)], "i,j->ij": [(2,), (3,)],
                 "ij,jk,kl->il": [(2, 2), (2, 3), (3, 2)], "iij,j->i": [(2, 2, 3), (3,)]}


@pytest.mark.parametrize("subscripts", SECOND)
def test_second_derivatives_match_finite_differences(subscripts):
    arrays = [rand(s) for s in SECOND_SHAPES[subscripts]]
    out_shape = np.einsum(subscripts, *arrays).shape
    g = tg.tensor(rand(out_shape))

    def first_grad(*xs):
        # the gradient of operand 0, as a function of every operand (the others enter it
        # directly, operand 0 only through the square)
        with tg.enable_grad():
            x0 = xs[0] if xs[0].requires_grad else xs[0].detach().requires_grad_()
            y = tg.einsum(subscripts, x0 * x0, *xs[1:])
            saved, x0.grad = x0.grad, None
            y.backward(g, create_graph=True)
            gx, x0.grad = x0.grad, saved
        return gx

    assert gradcheck(first_grad, [leaf(a) for a in arrays])


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("subscripts, shapes, message", [
    ("...ijk", [(2, 3)], "name 3 besides the ellipsis"),
    ("i..", [(2, 3)], r"an ellipsis is exactly '\.\.\.'"),
    ("...i->i", [(2, 3)], "has no '...' but the operands' ellipses cover 1 axes"),
    ("ij,jk->ik", [(2, 3), (4, 5)], r"label 'j' has length 3 in operand 0 \(shape \(2, 3\)\) and 4"),
    ("ij,jk", [(2, 3)], "name 2 operand"),
    ("ij", [(2, 3), (3,)], "name 1 operand"),
    ("ijk", [(2, 3)], "operand 0 has 2 dimension"),
    ("ii", [(2, 3)], "repeats label 'i'"),
    ("ij->ii", [(2, 3)], "names a label more than once"),
    ("ij->k", [(2, 3)], "output label 'k' is in no operand"),
    ("i1", [(2, 3)], "invalid subscript '1'"),
    ("i->i->i", [(2,)], "'->' once"),
    ("i-", [(2,)], "'->' once"),
    ("i>", [(2,)], "'->' once"),
    ("i->i,i", [(2,)], "one term"),
])
def test_bad_subscripts_raise_a_value_error_naming_einsum_and_the_shapes(subscripts, shapes, message):
    with pytest.raises(ValueError, match=message) as info:
        tg.einsum(subscripts, *[tg.ones(s) for s in shapes])
    text = str(info.value)
    assert text.startswith("einsum: ")
    assert repr(subscripts) in text
    for s in shapes:
        assert str(s) in text


def test_numpy_rejects_what_einsum_rejects():
    # the error cases above are errors in NumPy too
    for subscripts, shapes in [("ij,jk->ik", [(2, 3), (4, 5)]), ("ij->ii", [(2, 3)]),
                               ("...ijk", [(2, 3)]), ("...i->i", [(2, 3)]),
                               ("ii", [(2, 3)]), ("i->i->i", [(2,)])]:
        with pytest.raises(ValueError):
            np.einsum(subscripts, *[np.ones(s) for s in shapes])


def test_subscripts_must_be_a_string():
    with pytest.raises(TypeError, match="einsum: subscripts must be a string"):
        tg.einsum(3, tg.ones(2))


def test_einsum_needs_an_operand():
    with pytest.raises(ValueError, match="einsum: needs at least one operand"):
        tg.einsum("i")


def test_the_op_checks_its_subscripts_too():
    with pytest.raises(ValueError, match=r"_einsum: .*an ellipsis is exactly"):
        tg._einsum(tg.ones(2), subscripts="..")
