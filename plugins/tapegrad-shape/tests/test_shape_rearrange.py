"""The ops of tapegrad_shape.rearrange: values, dtypes and argument forms against NumPy,
gradients against finite differences and against Jacobians built with NumPy itself, the
cases the contract kit does not reach (zeros in cumprod, ties in sort, repeated indices,
duplicate writes), method forms, and errors."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing
from tapegrad.testing import run_doctests
from tapegrad_shape import rearrange

RNG = np.random.default_rng(14)


def rand(*shape):
    return RNG.standard_normal(shape)


def leaf(a):
    return tg.tensor(np.array(a, dtype=np.float64), requires_grad=True)


def grad_of(f, a, g=None):
    """The gradient of sum(f(x) * g) at x = a (g random by default), and g."""
    x = leaf(a)
    y = f(x)
    g = RNG.standard_normal(y.shape) if g is None else np.asarray(g, dtype=np.float64)
    y.backward(tg.tensor(g))
    return x.grad.numpy(), g


def numpy_vjp(np_f, a, g):
    """J^T g for a function that is linear in a, with J built by NumPy from unit inputs:
    an independent reference for the gradients of the copying ops."""
    a = np.asarray(a, dtype=np.float64)
    out = np.zeros(a.size)
    for k in range(a.size):
        e = np.zeros(a.size)
        e[k] = 1.0
        out[k] = np.sum(np.asarray(np_f(e.reshape(a.shape))) * g)
    return out.reshape(a.shape)


# ---------------------------------------------------------------------------------------
# Values, argument forms and linear gradients against NumPy
# ---------------------------------------------------------------------------------------

A = rand(3, 4)
B = rand(2, 3, 4)
V = rand(5)

# (name, tapegrad call, NumPy call, input): the gradient is checked against NumPy's J^T g
# for each (all these are linear in their input).
LINEAR = [
    ("cumsum", lambda x: tg.cumsum(x), lambda x: np.cumsum(x), A),
    ("cumsum axis 0", lambda x: tg.cumsum(x, 0), lambda x: np.cumsum(x, 0), A),
    ("cumsum axis -1", lambda x: x.cumsum(axis=-1), lambda x: np.cumsum(x, axis=-1), B),
    ("roll", lambda x: tg.roll(x, 3), lambda x: np.roll(x, 3), A),
    ("roll axis", lambda x: tg.roll(x, -1, axis=1), lambda x: np.roll(x, -1, axis=1), A),
    ("roll tuple", lambda x: tg.roll(x, (1, -2), axis=(0, 2)),
     lambda x: np.roll(x, (1, -2), axis=(0, 2)), B),
    ("roll broadcast shift", lambda x: tg.roll(x, (1, 2), axis=0),
     lambda x: np.roll(x, (1, 2), axis=0), A),
    ("flip", lambda x: tg.flip(x), lambda x: np.flip(x), B),
    ("flip axis", lambda x: tg.flip(x, 1), lambda x: np.flip(x, 1), B),
    ("flip tuple", lambda x: tg.flip(x, (0, -1)), lambda x: np.flip(x, (0, -1)), B),
    ("fliplr", tg.fliplr, np.fliplr, A),
    ("flipud", tg.flipud, np.flipud, V),
    ("repeat int", lambda x: tg.repeat(x, 2), lambda x: np.repeat(x, 2), A),
    ("repeat axis", lambda x: x.repeat(3, axis=1), lambda x: np.repeat(x, 3, axis=1), A),
    ("repeat array", lambda x: tg.repeat(x, [2, 0, 1], axis=0),
     lambda x: np.repeat(x, [2, 0, 1], axis=0), A),
    ("repeat array flat", lambda x: tg.repeat(x, np.arange(5)), lambda x: np.repeat(x, np.arange(5)), V),
    ("repeat zero", lambda x: tg.repeat(x, 0, axis=1), lambda x: np.repeat(x, 0, axis=1), A),
    ("tile", lambda x: tg.tile(x, 2), lambda x: np.tile(x, 2), A),
    ("tile longer reps", lambda x: tg.tile(x, (2, 1, 3)), lambda x: np.tile(x, (2, 1, 3)), A),
    ("tile shorter reps", lambda x: tg.tile(x, (2, 1)), lambda x: np.tile(x, (2, 1)), B),
    ("take flat", lambda x: tg.take(x, [0, 11, 5, 5]), lambda x: np.take(x, [0, 11, 5, 5]), A),
    ("take axis", lambda x: x.take(np.array([[3, 0], [3, 3]]), axis=1),
     lambda x: np.take(x, np.array([[3, 0], [3, 3]]), axis=1), A),
    ("take scalar", lambda x: tg.take(x, -1, axis=0), lambda x: np.take(x, -1, axis=0), A),
    ("take wrap", lambda x: tg.take(x, [7, -9, 2], axis=1, mode="wrap"),
     lambda x: np.take(x, [7, -9, 2], axis=1, mode="wrap"), A),
    ("take clip", lambda x: tg.take(x, [7, -9, 2], mode="clip"),
     lambda x: np.take(x, [7, -9, 2], mode="clip"), A),
    ("take_along_axis", lambda x: tg.take_along_axis(x, np.array([[0, 0], [3, 1], [2, 2]]), 1),
     lambda x: np.take_along_axis(x, np.array([[0, 0], [3, 1], [2, 2]]), 1), A),
    ("take_along_axis broadcast", lambda x: tg.take_along_axis(x, np.array([[2, 2, 0, 1]]), axis=0),
     lambda x: np.take_along_axis(x, np.array([[2, 2, 0, 1]]), axis=0), A),
    ("take_along_axis None", lambda x: tg.take_along_axis(x, np.array([11, 0, 0]), None),
     lambda x: np.take_along_axis(x, np.array([11, 0, 0]), None), A),
    ("diagonal", lambda x: x.diagonal(), lambda x: np.diagonal(x), A),
    ("diagonal offset", lambda x: tg.diagonal(x, 2), lambda x: np.diagonal(x, 2), A),
    ("diagonal axes", lambda x: tg.diagonal(x, -1, axis1=2, axis2=1),
     lambda x: np.diagonal(x, -1, axis1=2, axis2=1), B),
    ("diagonal empty", lambda x: tg.diagonal(x, 7), lambda x: np.diagonal(x, 7), A),
    ("trace", lambda x: x.trace(), lambda x: np.trace(x), A),
    ("trace axes", lambda x: tg.trace(x, 1, axis1=0, axis2=2), lambda x: np.trace(x, 1, 0, 2), B),
    ("diag 1-d", lambda x: tg.diag(x), lambda x: np.diag(x), V),
    ("diag 1-d k", lambda x: tg.diag(x, -2), lambda x: np.diag(x, -2), V),
    ("diag 2-d k", lambda x: tg.diag(x, 1), lambda x: np.diag(x, 1), A),
    ("tril", tg.tril, np.tril, A),
    ("tril k", lambda x: tg.tril(x, k=-1), lambda x: np.tril(x, k=-1), B),
    ("triu k", lambda x: tg.triu(x, 2), lambda x: np.triu(x, 2), A),
    ("triu 1-d", tg.triu, np.triu, V),
    ("pad constant", lambda x: tg.pad(x, 2, constant_values=0), lambda x: np.pad(x, 2), A),
]

PAD_WIDTHS = [2, (2,), ((1,),), (1, 3), ((1, 3),), ((0, 2), (3, 1)), np.array([[1, 0], [0, 2]]),
              [[1], [2]], ((0, 0), (0, 0))]
PAD_MODES = ["constant", "edge", "reflect", "symmetric", "wrap"]


@pytest.mark.parametrize("name,f,np_f,a", LINEAR, ids=[c[0] for c in LINEAR])
def test_linear_ops_match_numpy_in_value_and_gradient(name, f, np_f, a):
    with tg.no_grad():
        np.testing.assert_allclose(f(tg.tensor(a)).numpy(), np_f(a), rtol=1e-12, atol=1e-12)
    grad, g = grad_of(f, a)
    np.testing.assert_allclose(grad, numpy_vjp(np_f, a, g), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", PAD_MODES)
@pytest.mark.parametrize("width", PAD_WIDTHS, ids=repr)
def test_pad_every_width_form_and_mode(width, mode):
    a = rand(3, 4)
    np.testing.assert_array_equal(tg.pad(tg.tensor(a), width, mode).numpy(), np.pad(a, width, mode))
    grad, g = grad_of(lambda x: tg.pad(x, width, mode=mode), a)
    np.testing.assert_allclose(grad, numpy_vjp(lambda e: np.pad(e, width, mode), a, g), atol=1e-12)


@pytest.mark.parametrize("mode", ["reflect", "symmetric", "wrap", "edge"])
def test_pad_wider_than_the_axis_repeats_as_numpy(mode):
    a = rand(2, 3)
    width = ((5, 7), (8, 4))
    np.testing.assert_array_equal(tg.pad(tg.tensor(a), width, mode).numpy(), np.pad(a, width, mode))
    grad, g = grad_of(lambda x: tg.pad(x, width, mode), a)
    np.testing.assert_allclose(grad, numpy_vjp(lambda e: np.pad(e, width, mode), a, g), atol=1e-12)


def test_pad_constant_values_forms_and_dtype():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    for cv in (1.5, (1, 2), ((1, 2), (3, 4))):
        out = tg.pad(tg.tensor(a), 1, constant_values=cv)
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out.numpy(), np.pad(a, 1, constant_values=cv))
    # The constants get no gradient and do not move the input's gradient.
    grad, g = grad_of(lambda x: tg.pad(x, ((1, 2), (0, 1)), constant_values=7.0), a)
    np.testing.assert_array_equal(grad, g[1:3, 0:3])
    ints = np.arange(4, dtype=np.int32)
    assert tg.pad(tg.tensor(ints), 1, mode="wrap").dtype == np.int32


def test_tensordot_every_axes_form():
    cases = [(rand(2, 3, 4), rand(3, 4, 5), 2), (rand(2, 3), rand(3, 4), 1),
             (rand(2, 3), rand(4, 5), 0), (rand(3, 2), rand(4, 3), (0, 1)),
             (rand(2, 3, 4), rand(4, 2, 3), ([1, 2], [2, 0])),
             (rand(2, 3, 4), rand(4, 3), ((-1, -2), (0, 1))), (rand(3), rand(3), 1),
             (rand(2, 3), rand(2, 3), [[0, 1], [0, 1]])]
    for a, b, axes in cases:
        np.testing.assert_allclose(tg.tensordot(a, b, axes).numpy(), np.tensordot(a, b, axes))
        x, y = leaf(a), leaf(b)
        assert tg.gradcheck(lambda x, y: tg.tensordot(x, y, axes=axes), (x, y))


def test_outer_inner_kron_match_numpy_with_gradients():
    pairs = {
        "outer": [(rand(3), rand(4)), (rand(2, 2), rand(3, 1))],
        "inner": [(rand(3), rand(3)), (rand(2, 3), rand(4, 3)), (rand(2, 3), np.array(2.0)),
                  (np.array(3.0), rand(2)), (rand(2, 1, 3), rand(2, 3))],
        "kron": [(rand(2, 2), rand(3, 2)), (rand(3), rand(2, 2)), (rand(2, 1, 2), rand(3)),
                 (np.array(2.0), rand(2))],
    }
    for name, cases in pairs.items():
        for a, b in cases:
            np.testing.assert_allclose(getattr(tg, name)(a, b).numpy(), getattr(np, name)(a, b),
                                       rtol=1e-12)
            assert tg.gradgradcheck(getattr(tg, name), (leaf(a), leaf(b)))


def test_integer_results_follow_numpy():
    i32 = np.arange(1, 7, dtype=np.int32).reshape(2, 3)
    for f, np_f in [(tg.cumsum, np.cumsum), (tg.cumprod, np.cumprod),
                    (lambda x: tg.cumsum(x, axis=0, dtype=np.float32),
                     lambda x: np.cumsum(x, axis=0, dtype=np.float32)),
                    (tg.sort, np.sort), (tg.argsort, np.argsort), (tg.trace, np.trace),
                    (lambda x: tg.repeat(x, 2), lambda x: np.repeat(x, 2)),
                    (lambda x: tg.tile(x, 2), lambda x: np.tile(x, 2)),
                    (lambda x: tg.roll(x, 1), lambda x: np.roll(x, 1)),
                    (tg.tril, np.tril), (tg.diagonal, np.diagonal), (tg.diag, np.diag),
                    (lambda x: tg.outer(x, x), lambda x: np.outer(x, x)),
                    (lambda x: tg.kron(x, x), lambda x: np.kron(x, x)),
                    (lambda x: tg.tensordot(x, x, ([1], [1])),
                     lambda x: np.tensordot(x, x, ([1], [1])))]:
        got, want = f(tg.tensor(i32)).numpy(), np_f(i32)
        assert got.dtype == want.dtype, (f, got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want)
    mask = np.array([[True, False, True], [True, True, False]])
    assert tg.triu(tg.tensor(mask)).dtype == np.bool_
    np.testing.assert_array_equal(tg.triu(tg.tensor(mask)).numpy(), np.triu(mask))
    assert tg.argsort(tg.tensor([3.0, 1.0])).dtype == np.int64


def test_float32_stays_float32_with_its_gradient():
    for f in (tg.cumsum, tg.cumprod, tg.sort, tg.diag, tg.flip, lambda x: tg.pad(x, 1, "reflect"),
              lambda x: tg.take(x, [0, 0]), lambda x: tg.tensordot(x, x, 2), tg.tril):
        x = tg.tensor(rand(3, 3).astype(np.float32), requires_grad=True)
        y = f(x)
        assert y.dtype == np.float32
        y.sum().backward()
        assert x.grad.dtype == np.float32


# ---------------------------------------------------------------------------------------
# Scans: cumprod with zeros, axis=None, dtype=
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("a,axis", [
    (np.array([1.5, 0.0, 2.0, -0.7]), None),
    (np.array([0.0, 0.0, 2.0, 0.0, 1.3]), None),                       # repeated zeros
    (np.array([0.0, 0.0, 0.0]), 0),                                    # all zeros
    (np.array([[0.5, 0.0, 0.0, 2.0], [0.0, -0.8, 1.1, 1.3], [1.2, 1.0, 1.4, 0.0]]), 1),
    (np.array([[0.5, 0.0], [0.0, 0.0], [1.2, 0.0]]), 0),
    (np.array([[0.5, 0.0], [0.0, 3.0]]), None),
])
def test_cumprod_gradient_is_exact_with_zeros(a, axis):
    x = leaf(a)
    np.testing.assert_allclose(tg.cumprod(x, axis).numpy(), np.cumprod(a, axis))
    assert tg.gradcheck(lambda x: tg.cumprod(x, axis=axis), x)
    assert tg.gradgradcheck(lambda x: tg.cumprod(x, axis=axis), x)
    # The exact gradient of the last running product: the product of the other entries.
    flat = a.reshape(-1) if axis is None else np.moveaxis(a, axis, -1)
    grad, _ = grad_of(lambda x: tg.cumprod(x, axis), a, g=_last_only(np.cumprod(a, axis), axis))
    grad = grad.reshape(-1) if axis is None else np.moveaxis(grad, axis, -1)
    others = np.stack([np.prod(np.delete(flat, j, axis=-1), axis=-1)
                       for j in range(flat.shape[-1])], axis=-1)
    np.testing.assert_allclose(grad, others)


def _last_only(ans, axis):
    g = np.zeros(ans.shape)
    if axis is None:
        g[-1] = 1.0
    else:
        g[(slice(None),) * axis + (-1,)] = 1.0
    return g


def test_cumsum_and_cumprod_methods_and_dtype():
    a = rand(2, 3)
    x = tg.tensor(a)
    np.testing.assert_allclose(x.cumsum().numpy(), a.cumsum())
    np.testing.assert_allclose(x.cumprod(1).numpy(), a.cumprod(1))
    np.testing.assert_allclose(x.cumsum(0, np.float32).numpy(), a.cumsum(0, dtype=np.float32))
    x32 = tg.tensor(a.astype(np.float32), requires_grad=True)
    y = tg.cumsum(x32, dtype=np.float64)
    assert y.dtype == np.float64
    y.sum().backward()
    assert x32.grad.dtype == np.float32
    np.testing.assert_allclose(x32.grad.numpy(), np.arange(6, 0, -1).reshape(2, 3))


# ---------------------------------------------------------------------------------------
# Sorting
# ---------------------------------------------------------------------------------------

def test_sort_values_and_kinds_as_numpy():
    a = rand(3, 5)
    for kw in ({}, {"axis": 0}, {"axis": None}, {"kind": "mergesort"}, {"kind": "heapsort"},
               {"stable": True}, {"axis": -1, "kind": "quicksort"}):
        np.testing.assert_array_equal(tg.sort(a, **kw).numpy(), np.sort(a, **kw))
        np.testing.assert_array_equal(tg.argsort(a, **kw).numpy(), np.argsort(a, **kw))
    nan = np.array([2.0, np.nan, -1.0])
    np.testing.assert_array_equal(tg.sort(nan).numpy(), np.sort(nan))


def test_sort_gradient_of_ties_goes_where_the_stable_sort_put_each():
    a = np.array([2.0, 1.0, 2.0, 1.0, 2.0])
    g = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    grad, _ = grad_of(tg.sort, a, g)
    expected = np.zeros(5)
    expected[np.argsort(a, kind="stable")] = g          # [1, 3, 0, 2, 4]
    np.testing.assert_array_equal(grad, expected)
    np.testing.assert_array_equal(grad, [30.0, 10.0, 40.0, 20.0, 50.0])
    # Along an axis, and flattened.
    a2 = np.array([[1.0, 1.0, 0.0], [3.0, 2.0, 3.0]])
    g2 = np.arange(6.0).reshape(2, 3)
    grad2, _ = grad_of(lambda x: tg.sort(x, axis=1, kind="quicksort"), a2, g2)
    np.testing.assert_array_equal(grad2, [[1.0, 2.0, 0.0], [4.0, 3.0, 5.0]])
    grad3, _ = grad_of(lambda x: tg.sort(x, axis=None), a2, np.arange(6.0))
    expected3 = np.zeros(6)
    expected3[np.argsort(a2, axis=None, kind="stable")] = np.arange(6.0)
    np.testing.assert_array_equal(grad3, expected3.reshape(2, 3))


def test_sort_second_order_and_no_method():
    x = leaf(rand(3, 4))
    assert tg.gradgradcheck(lambda x: tg.sort(x * x, axis=0), x)
    assert not hasattr(x, "sort")          # ndarray.sort sorts in place; tg.sort returns
    idx = x.argsort(axis=0)                 # ndarray.argsort exists: so does the method
    assert not idx.requires_grad and idx.dtype == np.int64
    np.testing.assert_array_equal(idx.numpy(), np.argsort(x.numpy(), axis=0))


# ---------------------------------------------------------------------------------------
# Gathers: repeated indices, put_along_axis
# ---------------------------------------------------------------------------------------

def test_repeated_indices_accumulate():
    grad, _ = grad_of(lambda x: tg.take(x, [1, 1, 1, 0]), [1.0, 2.0, 3.0], np.ones(4))
    np.testing.assert_array_equal(grad, [1.0, 3.0, 0.0])
    idx = np.array([[0, 0, 0], [2, 1, 2]])
    grad, _ = grad_of(lambda x: tg.take_along_axis(x, idx, axis=1), np.ones((2, 3)), np.ones((2, 3)))
    np.testing.assert_array_equal(grad, [[3.0, 0.0, 0.0], [0.0, 1.0, 2.0]])
    x = leaf(rand(3, 4))
    assert tg.gradgradcheck(lambda x: tg.take(x * x, [[0, 0], [5, 11]]), x)
    assert tg.gradgradcheck(lambda x: tg.take_along_axis(x * x, np.array([[0, 0, 3]]), axis=1), x)


def test_put_along_axis_is_functional_and_matches_numpy():
    a = rand(3, 4)
    idx = np.array([[0, 2], [3, 1], [1, 0]])
    vals = rand(3, 2)
    x = tg.tensor(a)
    out = tg.put_along_axis(x, idx, vals, axis=1)
    expected = a.copy()
    np.put_along_axis(expected, idx, vals, axis=1)
    np.testing.assert_array_equal(out.numpy(), expected)
    np.testing.assert_array_equal(x.numpy(), a)                      # arr is not modified
    for indices, values, axis in [(np.array([[1], [0], [3]]), 9.0, 1),
                                  (np.array([[2, 0, 1, 1]]), rand(1, 4), 0),
                                  (np.array([11, 0, 4]), rand(3), None)]:
        expected = a.copy()
        np.put_along_axis(expected, indices, values, axis)
        np.testing.assert_array_equal(tg.put_along_axis(a, indices, values, axis).numpy(), expected)


def test_put_along_axis_gradients():
    a, vals = rand(3, 4), rand(3, 1)
    idx = np.array([[0], [3], [1]])
    x, v = leaf(a), leaf(vals)
    g = rand(3, 4)
    tg.put_along_axis(x, idx, v, 1).backward(tg.tensor(g))
    expected = g.copy()
    expected[np.arange(3), idx[:, 0]] = 0.0
    np.testing.assert_array_equal(x.grad.numpy(), expected)           # zero where written
    np.testing.assert_array_equal(v.grad.numpy(), g[np.arange(3), idx[:, 0]][:, None])
    # values broadcast along the axis: its gradient sums the positions it was written to
    w = leaf(rand(1))
    tg.put_along_axis(a, np.array([[0, 2], [1, 3], [2, 0]]), w, axis=1).backward(tg.tensor(g))
    np.testing.assert_allclose(w.grad.numpy(), [g[0, 0] + g[0, 2] + g[1, 1] + g[1, 3] + g[2, 2] + g[2, 0]])
    assert tg.gradgradcheck(lambda x, v: tg.put_along_axis(x * x, idx, v * v, 1), (leaf(a), leaf(vals)))


def test_put_along_axis_duplicates_follow_numpy_without_grad_and_are_refused_with_it():
    a = np.zeros((2, 3))
    idx = np.array([[1, 1], [0, 2]])
    vals = np.array([[1.0, 2.0], [3.0, 4.0]])
    expected = a.copy()
    np.put_along_axis(expected, idx, vals, 1)
    np.testing.assert_array_equal(tg.put_along_axis(a, idx, vals, 1).numpy(), expected)
    x = tg.tensor(a, requires_grad=True)                # arr's gradient is well defined
    tg.put_along_axis(x, idx, vals, 1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    with pytest.raises(ValueError, match="put_along_axis: indices write some position more than once"):
        tg.put_along_axis(a, idx, leaf(vals), 1)
    with pytest.raises(ValueError, match="more than once"):
        tg.put_along_axis(a, np.array([[0], [0]]), leaf(rand(2, 1)), 0)
    with pytest.raises(ValueError, match="more than once"):
        tg.put_along_axis(a, np.array([1, -5]), leaf([1.0, 2.0]), None)   # -5 is 1 of 6
    with pytest.raises(ValueError, match="more than once"):         # a list of tensors
        v = leaf([1.0, 2.0])
        tg.put_along_axis(a, np.array([1, 1]), [v[0], v[1]], None)
    with pytest.raises(IndexError, match="put_along_axis"):         # out of bounds first
        tg.put_along_axis(a, np.array([[0, 3]]), leaf(rand(1, 2)), 1)
    with tg.no_grad():
        tg.put_along_axis(a, idx, leaf(vals), 1)
    tg.put_along_axis(a, idx, leaf(vals).detach(), 1)


def test_put_along_axis_refuses_duplicates_whose_values_carry_a_forward_mode_tangent():
    a = np.zeros((2, 3))
    v, tv = rand(2, 2), rand(2, 2)
    for idx in (np.array([[1, 1], [0, 2]]), tg.tensor([[1, 1], [0, 2]])):   # array, tensor
        with pytest.raises(ValueError, match="put_along_axis: indices write some position "
                                             "more than once.*values carries a forward-mode "
                                             "tangent"):
            tapegrad.testing.check_jvp(lambda v: tg.put_along_axis(a, idx, v, 1), v, tv)
    # unique indices: the tangent is where the values land (finite differences of NumPy's)
    idx = np.array([[1, 0], [0, 2]])

    def f_numpy(v):
        out = a.copy()
        np.put_along_axis(out, idx, v, 1)
        return out
    tapegrad.testing.check_jvp(lambda v: tg.put_along_axis(a, idx, v, 1), v, tv,
                               reference=f_numpy, atol=1e-8, rtol=1e-7)


def test_numpy_put_along_axis_on_a_tensor_is_refused():
    t = tg.zeros((2, 3))
    with pytest.raises(TypeError, match="in place.*tg.put_along_axis"):
        np.put_along_axis(t, np.array([[0], [1]]), 1.0, axis=1)


def test_numpy_functions_dispatch_to_these_ops():
    x = leaf(rand(3, 3))
    for np_f, tg_f in [(np.cumsum, tg.cumsum), (np.sort, tg.sort), (np.trace, tg.trace),
                       (np.flip, tg.flip), (np.tril, tg.tril), (np.diagonal, tg.diagonal)]:
        y = np_f(x)
        assert isinstance(y, tg.Tensor) and y.requires_grad
        np.testing.assert_array_equal(y.numpy(), tg_f(x).numpy())
    assert isinstance(np.pad(x, 1), tg.Tensor)
    assert isinstance(np.tensordot(x, x), tg.Tensor)


def test_methods_where_ndarray_has_them():
    a = rand(3, 3)
    x = tg.tensor(a)
    np.testing.assert_array_equal(x.repeat(2, axis=0).numpy(), a.repeat(2, axis=0))
    np.testing.assert_array_equal(x.take([0, 4]).numpy(), a.take([0, 4]))
    np.testing.assert_array_equal(x.trace(1).numpy(), a.trace(1))
    np.testing.assert_array_equal(x.diagonal(-1).numpy(), a.diagonal(-1))
    np.testing.assert_array_equal(x.argsort(axis=None).numpy(), a.argsort(axis=None))
    for name in ("sort", "roll", "pad", "tile", "flip", "tensordot", "take_along_axis",
                 "put_along_axis", "tril", "outer"):
        assert not hasattr(x, name), name


def test_diag_builds_and_reads_diagonals_with_gradients():
    v = leaf([1.0, 2.0, 3.0])
    m = tg.diag(v, k=-1)
    np.testing.assert_array_equal(m.numpy(), np.diag([1.0, 2.0, 3.0], k=-1))
    assert tg.gradgradcheck(lambda v: tg.diag(v * v, 2), v)
    assert tg.gradgradcheck(lambda x: tg.diag(x * x, -1), leaf(rand(3, 4)))
    grad, _ = grad_of(lambda x: tg.trace(x, offset=-1), np.ones((3, 3)), 1.0)
    np.testing.assert_array_equal(grad, np.eye(3, k=-1))


# ---------------------------------------------------------------------------------------
# Errors: NumPy's exception types, naming the op
# ---------------------------------------------------------------------------------------

X = np.ones((2, 3))

ERRORS = [
    (lambda: tg.tensordot(X, X, 1), ValueError, "tensordot"),
    (lambda: tg.tensordot(X, X, axes=((0, 1), (0,))), ValueError, "tensordot"),
    (lambda: tg.inner(X, np.ones((2, 2))), ValueError, "inner: the last axes"),
    (lambda: tg.cumsum(X, axis=2), np.exceptions.AxisError, "cumsum: axis 2 is out of bounds"),
    (lambda: tg.cumprod(X, axis=(0, 1)), TypeError, "cumprod"),
    (lambda: tg.sort(X, order="f"), ValueError, "sort: order= names fields"),
    (lambda: tg.argsort(X, axis=-3), np.exceptions.AxisError, "argsort"),
    (lambda: tg.sort(X, kind="bogus"), ValueError, "sort"),
    (lambda: tg.take(X, [6]), IndexError, "take: index 6 is out of bounds"),
    (lambda: tg.take(X, [1], mode="nearest"), ValueError, "take"),
    (lambda: tg.take(X, [0.5]), TypeError, "take"),
    (lambda: tg.take_along_axis(X, np.array([0, 1]), axis=1), ValueError, "take_along_axis"),
    (lambda: tg.take_along_axis(X, np.array([[0.5]]), axis=1), IndexError, "take_along_axis"),
    (lambda: tg.take_along_axis(X, np.array([[3]]), axis=1), IndexError, "take_along_axis"),
    (lambda: tg.put_along_axis(X, np.array([[0.5]]), 1.0, 1), TypeError, "put_along_axis: indices must be an integer"),
    (lambda: tg.put_along_axis(X, np.array([0]), 1.0, 1), ValueError, "put_along_axis: indices .* same number"),
    (lambda: tg.put_along_axis(X, np.array([[0]]), 1.0, None), ValueError, "put_along_axis: with axis=None"),
    (lambda: tg.put_along_axis(X, np.array([[0]]), 1.0, 2), np.exceptions.AxisError, "put_along_axis: axis 2"),
    (lambda: tg.roll(X), TypeError, "roll"),
    (lambda: tg.roll(X, 1, axis=2), np.exceptions.AxisError, "roll"),
    (lambda: tg.repeat(X, -1), ValueError, "repeat"),
    (lambda: tg.repeat(X, [1, 2], axis=1), ValueError, "repeat"),
    (lambda: tg.tile(X, -1), ValueError, "tile"),
    (lambda: tg.pad(X, 1, mode="mean"), ValueError, "pad: mode 'mean' is not supported"),
    (lambda: tg.pad(X, 1, mode=np.pad), ValueError, "pad: mode .* is not supported"),
    (lambda: tg.pad(X, -1), ValueError, "pad: pad_width must not be negative"),
    (lambda: tg.pad(X, 1.5), TypeError, "pad: pad_width must be of integral type"),
    (lambda: tg.pad(X, ((1, 2), (3, 4), (5, 6))), ValueError, "pad: pad_width of shape"),
    (lambda: tg.pad(X, 1, mode="reflect", reflect_type="odd"), ValueError, "pad: reflect_type"),
    (lambda: tg.pad(X, 1, mode="edge", constant_values=3), ValueError, "pad: unsupported keyword"),
    (lambda: tg.pad(np.ones((0, 3)), 1, mode="edge"), ValueError, "pad"),
    (lambda: tg.diagonal(np.ones(3)), ValueError, "diagonal: needs a tensor of at least 2"),
    (lambda: tg.diagonal(X, 0, 1, -1), ValueError, "diagonal: axis1 and axis2 cannot be the same"),
    (lambda: tg.diagonal(X, 0, 0, 2), np.exceptions.AxisError, "diagonal: axis 2 is out of bounds"),
    (lambda: tg.diagonal(X, 0.5), TypeError, "diagonal: offset must be an int"),
    (lambda: tg.trace(np.ones(3)), ValueError, "trace: needs a tensor of at least 2"),
    (lambda: tg.diag(np.ones((2, 2, 2))), ValueError, "diag: input must be 1-d or 2-d"),
    (lambda: tg.tril(np.float64(1.0)), ValueError, "tril: needs a tensor of at least 1"),
    (lambda: tg.triu(X, k=1.5), TypeError, "triu: k must be an int"),
    (lambda: tg.flip(X, 2), np.exceptions.AxisError, "flip: axis 2 is out of bounds"),
    (lambda: tg.fliplr(np.ones(3)), ValueError, "fliplr: needs a tensor of at least 2"),
    (lambda: tg.flipud(np.float64(1.0)), ValueError, "flipud: needs a tensor of at least 1"),
]


@pytest.mark.parametrize("call,exc,match", ERRORS, ids=[m for _c, _e, m in ERRORS])
def test_bad_input_raises_naming_the_op(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_axis_errors_are_numpy_axis_errors_in_compositions():
    with pytest.raises(np.exceptions.AxisError):
        tg.flip(X, -3)
    with pytest.raises(np.exceptions.AxisError):
        tg.diagonal(X, axis1=5)


# ---------------------------------------------------------------------------------------
# The module as a whole
# ---------------------------------------------------------------------------------------

def test_every_op_of_the_module_keeps_the_contract():
    names = ("cumsum cumprod sort argsort take_along_axis _take_along_axis_grad "
             "_put_along_axis put_along_axis take _take_grad roll flip fliplr flipud repeat "
             "tile pad tensordot outer inner kron diagonal trace diag tril triu").split()
    for name in names:
        assert tapegrad.testing.check_op(name).checks, name
    ops = tg.registry().ops
    for name in ("cumsum", "sort", "take_along_axis", "roll", "repeat", "tile", "pad"):
        assert "jvp_rule" in tapegrad.testing.capabilities(name)     # linear: cheap JVPs
        assert ops[name].plugin == "tapegrad-shape" and ops[name].doc


def test_pad_arguments_normalises_every_form():
    assert rearrange.pad_arguments(2, 3) == ((3, 3), (3, 3))
    assert rearrange.pad_arguments(2, (1, 2)) == ((1, 2), (1, 2))
    assert rearrange.pad_arguments(2, [[1], [2]]) == ((1, 1), (2, 2))
    assert rearrange.pad_arguments(2, ((1, 2), (3, 4)), "wrap") == ((1, 2), (3, 4))
    assert rearrange.pad_arguments(0, 2) == ()


def test_docstring_examples_run():
    result = run_doctests(rearrange)
    assert result.attempted > 20
    assert result.failed == 0
