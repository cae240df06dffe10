"""Each op against NumPy, its methods, its gradients (first and second order) and its
errors."""

import collections

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import check_jvp, gradcheck

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4))
B = rng.standard_normal((2, 3, 4))


def leaf(a):
    return tg.tensor(a, requires_grad=True)


def close(t, expected):
    assert isinstance(t, tg.Tensor)
    got = t.numpy()
    expected = np.asarray(expected)
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------
# Values against NumPy
# ---------------------------------------------------------------------------------------

AXES = [dict(), dict(axis=0), dict(axis=-1), dict(axis=(0, 2)), dict(axis=(-1, 0)),
        dict(axis=1, keepdims=True), dict(keepdims=True), dict(axis=(0, 1, 2), keepdims=True)]


@pytest.mark.parametrize("kw", AXES, ids=repr)
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "var", "std", "prod"])
def test_reductions_match_numpy(name, kw):
    close(getattr(tg, name)(leaf(B), **kw), getattr(np, name)(B, **kw))


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "var", "prod"])
def test_reductions_keep_float32(name):
    a = A.astype(np.float32)
    assert getattr(tg, name)(tg.tensor(a), axis=0).dtype == np.float32


def test_var_and_std_take_ddof():
    close(tg.var(leaf(A), axis=1, ddof=1), np.var(A, axis=1, ddof=1))
    close(tg.std(leaf(A), ddof=1, keepdims=True), np.std(A, ddof=1, keepdims=True))


def test_sum_and_mean_take_dtype():
    a = A.astype(np.float32)
    close(tg.sum(tg.tensor(a), dtype=np.float64), np.sum(a, dtype=np.float64))
    close(tg.mean(tg.tensor(a), 0, dtype=np.float64), np.mean(a, 0, dtype=np.float64))


def test_prod_handles_zeros_and_integers():
    z = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 1.0], [1.0, 4.0, 5.0]])
    np.testing.assert_allclose(tg.prod(tg.tensor(z), axis=1).numpy(), np.prod(z, axis=1))
    close(tg.prod(tg.tensor(np.arange(1, 7, dtype=np.int32))), np.prod(np.arange(1, 7, dtype=np.int32)))
    close(tg.prod(tg.zeros((3, 0)), axis=1), np.ones(3))


@pytest.mark.parametrize("kw", [dict(), dict(axis=0), dict(axis=-1), dict(axis=1, keepdims=True)], ids=repr)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_match_numpy(name, kw):
    out = getattr(tg, name)(leaf(A), **kw)
    close(out, getattr(np, name)(A, **kw))
    assert not out.requires_grad


@pytest.mark.parametrize("shape", [(4, 3), (2, -1), (-1,), (1, 12, 1), 12])
def test_reshape_matches_numpy(shape):
    close(tg.reshape(leaf(A), shape), np.reshape(A, shape))


@pytest.mark.parametrize("axes", [None, (1, 0, 2), (2, 0, 1), (-1, 0, 1)])
def test_transpose_matches_numpy(axes):
    close(tg.transpose(leaf(B), axes), np.transpose(B, axes))


@pytest.mark.parametrize("fn, args", [
    ("flatten", ()), ("ravel", ()), ("squeeze", ()), ("squeeze", (0,)), ("squeeze", ((0, -1),)),
    ("expand_dims", (0,)), ("expand_dims", (-1,)), ("expand_dims", ((0, 4),)),
    ("swapaxes", (0, 1)), ("swapaxes", (-1, 1)), ("moveaxis", (0, -1)),
    ("moveaxis", ((0, 1), (-1, 0))), ("copy", ()),
], ids=str)
def test_shape_functions_match_numpy(fn, args):
    a = rng.standard_normal((1, 3, 1)) if fn == "squeeze" else A.reshape(1, 3, 4)
    expected = a.flatten() if fn == "flatten" else getattr(np, fn)(a, *args)
    close(getattr(tg, fn)(leaf(a), *args), expected)


MASK = A > 0
INDEXES = [
    1, -1, (1, 2), slice(1, None), (slice(None), 0), (Ellipsis, 1), (None, 1, slice(None, None, -1)),
    np.array([0, 2, 0]), (slice(1, None), np.array([0, 0])), (np.array([0, 2]), np.array([3, 3])),
    MASK, np.array([True, False, True]), (np.array([True, False, True]), np.array([1, 3])),
    (np.array([[0, 1], [2, 2]]), slice(None, 2)),
]


@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_getitem_matches_numpy(index):
    close(leaf(A)[index], A[index])


def test_getitem_accepts_tensors_and_lists_as_indexes():
    close(leaf(A)[tg.tensor([2, 0, 0])], A[[2, 0, 0]])
    close(leaf(A)[[0, 0], [1, 2]], A[[0, 0], [1, 2]])
    x = leaf(A)
    close(x[x > 0], A[A > 0])


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_concatenate_matches_numpy(axis):
    a, b = A, rng.standard_normal((3, 4))
    close(tg.concatenate([leaf(a), leaf(b)], axis=axis), np.concatenate([a, b], axis=axis))


def test_concatenate_mixes_tensors_and_arrays_of_other_lengths():
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 5))
    close(tg.concatenate((leaf(a), b), 1), np.concatenate((a, b), 1))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stack_matches_numpy(axis):
    a, b = A, rng.standard_normal((3, 4))
    close(tg.stack([leaf(a), leaf(b)], axis=axis), np.stack([a, b], axis=axis))


@pytest.mark.parametrize("sections, axis", [(3, 0), ([1, 2], 0), ([2], 1), (2, -1), ([0, 5], 1)])
def test_split_matches_numpy(sections, axis):
    got = tg.split(leaf(A), sections, axis=axis)
    expected = np.split(A, sections, axis=axis)
    assert isinstance(got, list) and len(got) == len(expected)
    for g, e in zip(got, expected):
        close(g, e)


def test_numpy_functions_dispatch_to_the_ops():
    t = leaf(A)
    for out, expected in [(np.sum(t, axis=0), np.sum(A, axis=0)), (np.mean(t), np.mean(A)),
                          (np.max(t, axis=1), np.max(A, axis=1)),
                          (np.reshape(t, (4, 3)), np.reshape(A, (4, 3))),
                          (np.transpose(t), A.T), (np.concatenate([t, t]), np.concatenate([A, A])),
                          (np.var(t, ddof=1), np.var(A, ddof=1))]:
        assert out.requires_grad
        close(out, expected)


# ---------------------------------------------------------------------------------------
# Methods
# ---------------------------------------------------------------------------------------

def test_methods_follow_numpy():
    t = leaf(A)
    close(t.sum(0), A.sum(0))
    close(t.sum(axis=1, keepdims=True), A.sum(axis=1, keepdims=True))
    close(t.mean(), A.mean())
    close(t.max(1), A.max(1))
    close(t.min(), A.min())
    close(t.var(ddof=1), A.var(ddof=1))
    close(t.prod(0), A.prod(0))
    close(t.argmax(1), A.argmax(1))
    close(t.flatten(), A.flatten())
    close(t.copy(), A.copy())
    close(t.swapaxes(0, 1), A.swapaxes(0, 1))
    close(leaf(A[None]).squeeze(0), A)


def test_reshape_method_takes_ints_a_tuple_or_minus_one():
    t = leaf(A)
    close(t.reshape(2, 6), A.reshape(2, 6))
    close(t.reshape((2, 6)), A.reshape((2, 6)))
    close(t.reshape([6, -1]), A.reshape([6, -1]))
    close(t.reshape(-1), A.reshape(-1))
    close(t.reshape(shape=(12,)), A.reshape(12))


def test_transpose_method_and_T():
    t = leaf(B)
    close(t.T, B.T)
    close(t.transpose(), B.transpose())
    close(t.transpose(1, 0, 2), B.transpose(1, 0, 2))
    close(t.transpose((1, 0, 2)), B.transpose((1, 0, 2)))
    close(t.transpose(None), B.transpose(None))


def test_indexing_method():
    close(leaf(A)[1:, [0, 0]], A[1:, [0, 0]])


def test_clone_copies_like_copy():
    x = leaf(A)
    c = x.clone()
    close(c, A)
    assert tg.clone is tg.copy
    c.sum().backward()
    close(x.grad, np.ones_like(A))


def test_copy_shares_no_storage_and_views_share_the_version():
    x = tg.tensor(A)
    c, v = x.copy(), x.reshape(12)
    with tg.no_grad():
        x[0, 0] = 100.0
    assert c.numpy()[0, 0] == A[0, 0]
    assert v.numpy()[0] == 100.0
    assert v._version == x._version == 1


def test_functions_that_numpy_has_no_method_for_are_not_methods():
    for name in ("concatenate", "stack", "split", "expand_dims", "moveaxis", "getitem", "setitem"):
        assert not hasattr(tg.Tensor, name), name


# ---------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------

def test_repeated_indices_accumulate():
    x = leaf(np.arange(4.0))
    x[np.array([0, 0, 3, 0])].sum().backward()
    close(x.grad, [3.0, 0.0, 0.0, 1.0])


def test_repeated_indices_accumulate_with_slices_and_weights():
    x = leaf(A)
    y = x[1:, [0, 0, 2]]                         # shape (2, 3)
    y.backward(tg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    expected = np.zeros_like(A)
    expected[1, 0], expected[1, 2], expected[2, 0], expected[2, 2] = 3.0, 3.0, 9.0, 6.0
    close(x.grad, expected)


def test_bool_mask_gradient():
    x = leaf(A)
    x[x > 0].sum().backward()
    close(x.grad, (A > 0).astype(np.float64))


def test_max_splits_the_gradient_among_ties():
    x = leaf([1.0, 3.0, 3.0])
    x.max().backward()
    close(x.grad, [0.0, 0.5, 0.5])


def test_min_splits_ties_along_an_axis():
    x = leaf([[2.0, 2.0, 5.0], [1.0, 4.0, 1.0]])
    x.min(axis=1).sum().backward()
    close(x.grad, [[0.5, 0.5, 0.0], [0.5, 0.0, 0.5]])
    y = leaf([[1.0, 1.0, 1.0]])
    y.max(axis=-1, keepdims=True).backward(tg.tensor([[3.0]]))
    close(y.grad, [[1.0, 1.0, 1.0]])


def test_prod_gradient_is_exact_at_zeros():
    x = leaf([[2.0, 0.0, 3.0], [0.0, 0.0, 1.0], [1.0, 4.0, 5.0]])
    x.prod(axis=1).sum().backward()
    close(x.grad, [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [20.0, 5.0, 4.0]])


@pytest.mark.parametrize("sections", [3, [1, 4]])
def test_split_gradient(sections):
    x = leaf(rng.standard_normal((6, 2)))
    assert gradcheck(lambda t: tg.split(t, sections), x)
    parts = tg.split(x, sections)
    tg.backward(parts[:1], [tg.ones(parts[0].shape)])   # only the first part is used
    assert x.grad.numpy()[parts[0].shape[0]:].sum() == 0.0


def test_stack_and_concatenate_send_each_input_its_slice():
    a, b = leaf(A), leaf(A * 2)
    s = tg.stack([a, b], axis=1)                 # (3, 2, 4)
    s.backward(tg.tensor(np.broadcast_to(np.array([1.0, 2.0])[None, :, None], (3, 2, 4)).copy()))
    close(a.grad, np.ones_like(A))
    close(b.grad, 2 * np.ones_like(A))
    a.grad = b.grad = None
    tg.concatenate([a, b], axis=None).backward(tg.tensor(np.arange(24.0)))
    close(a.grad, np.arange(12.0).reshape(3, 4))
    close(b.grad, np.arange(12.0, 24.0).reshape(3, 4))


# -- setitem ------------------------------------------------------------------------------

def test_setitem_through_the_graph_zeroes_the_overwritten_gradient():
    x = leaf(A)
    y = x * 1
    y[0] = 5.0
    close(y, np.concatenate([np.full((1, 4), 5.0), A[1:]]))
    assert y.grad_fn.name == "setitem"
    y.sum().backward()
    expected = np.ones_like(A)
    expected[0] = 0.0
    close(x.grad, expected)


def test_setitem_sends_the_value_its_slice_of_the_gradient():
    x, v = leaf(A), leaf(np.array([10.0, 20.0, 30.0, 40.0]))
    y = x * 1
    y[np.array([0, 2])] = v                      # v broadcast to (2, 4)
    w = rng.standard_normal(A.shape)
    (y * tg.tensor(w)).sum().backward()
    close(v.grad, w[[0, 2]].sum(axis=0))
    expected = w.copy()
    expected[[0, 2]] = 0.0
    close(x.grad, expected)


def test_setitem_into_a_constant_tensor_records_the_value():
    v = leaf([1.0, 2.0])
    y = tg.zeros(4)
    y[1:3] = v
    assert y.requires_grad
    (y * tg.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    close(v.grad, [2.0, 3.0])


def test_setitem_gradients_pass_gradcheck():
    x, v = leaf(A), leaf(rng.standard_normal((2,)))

    def f(x, v):
        y = x * 1
        y[x.detach() > 0.5] = 0.0
        y[1, 1:3] = v * v
        return y * y

    assert gradcheck(f, (x, v))


def test_setitem_on_a_leaf_that_requires_grad_raises():
    x = leaf(A)
    with pytest.raises(RuntimeError, match="leaf"):
        x[0] = 1.0
    with tg.no_grad():
        x[0] = 1.0
    assert x.numpy()[0, 0] == 1.0


def test_setitem_after_saving_is_detected():
    x = leaf(A)
    y = x * 1
    s = (y * y).sum()                            # multiply saved y
    y[0] = 0.0
    with pytest.raises(RuntimeError, match="in-place"):
        s.backward()


# -- setitem with an index that writes one position twice -------------------------------
# NumPy keeps one of the writes without promising which, so the derivative with respect
# to the value is refused (reverse and forward mode); that of x is defined (0 there).

REPEATING_INDEXES = [
    [1, 1],
    np.array([0, 2, 0]),
    (np.array([1, 1]), np.array([0, 0])),
    (slice(None), [3, 3]),
    (np.array([[0], [0]]), np.array([1, 2])),          # broadcast: (0, 1), (0, 2) twice
    ((0, 0), (1, 1)),                                    # tuples inside the index
]


def _written_value_shape(index):
    return np.zeros(A.shape)[index].shape


@pytest.mark.parametrize("index", REPEATING_INDEXES, ids=repr)
def test_setitem_refuses_the_gradient_of_a_value_written_twice_to_one_position(index):
    for v in (leaf(rng.standard_normal(_written_value_shape(index))), leaf(2.0)):
        y = leaf(A) * 1
        y[index] = v
        with pytest.raises(ValueError, match=r"setitem \(x\[index\] = value\): indices write "
                                             r"some position more than once.*value requires grad"):
            y.sum().backward()


@pytest.mark.parametrize("index", REPEATING_INDEXES, ids=repr)
def test_setitem_refuses_the_tangent_of_a_value_written_twice_to_one_position(index):
    shape = _written_value_shape(index)

    def f(v):
        y = tg.tensor(A) * 1
        y[index] = v
        return y
    v, tv = rng.standard_normal(shape), rng.standard_normal(shape)
    with pytest.raises(ValueError, match="setitem.*more than once.*value carries a "
                                         "forward-mode tangent"):
        check_jvp(f, v, tv)


@pytest.mark.parametrize("index", REPEATING_INDEXES, ids=repr)
def test_setitem_with_a_repeating_index_still_differentiates_x(index):
    value = tg.tensor(rng.standard_normal(_written_value_shape(index)))   # a constant

    def f(x):
        y = x * 1
        y[index] = value
        return y * x
    assert gradcheck(f, (leaf(A),))

    def f_numpy(x):
        y = x.copy()
        y[index] = value.numpy()
        return y * x
    check_jvp(f, A, rng.standard_normal(A.shape), reference=f_numpy, atol=1e-8, rtol=1e-7)
    with tg.no_grad():                                    # no derivative: NumPy's writes
        y = tg.tensor(A)
        y[index] = leaf(value.numpy())
    expected = A.copy()
    expected[index] = value.numpy()
    close(y, expected)


@pytest.mark.parametrize("index", [[2, 0], (np.array([1, 2]), np.array([0, 3])),
                                   (slice(None), [3, 1]), np.array([[0], [2]])], ids=repr)
def test_setitem_with_an_advanced_index_that_picks_each_position_once_differentiates_value(index):
    shape = _written_value_shape(index)

    def f(x, v):
        y = x * 1
        y[index] = v * v
        return y * x
    assert gradcheck(f, (leaf(A), leaf(rng.standard_normal(shape))))

    def f_numpy(x, v):
        y = x.copy()
        y[index] = v * v
        return y * x
    for tangents in ((None, rng.standard_normal(shape)),
                     (rng.standard_normal(A.shape), rng.standard_normal(shape))):
        check_jvp(f, (A, rng.standard_normal(shape)), tangents, reference=f_numpy, atol=1e-8,
                  rtol=1e-7)


# -- second derivatives --------------------------------------------------------------------

def _gradient_of(f):
    """x -> df/dx as a differentiable function of x (backward with create_graph=True)."""
    def grad_fn(x):
        with tg.enable_grad():
            xr = x if x.requires_grad else x.detach().requires_grad_()
            saved, xr.grad = xr.grad, None
            f(xr).backward(create_graph=True)
            g, xr.grad = xr.grad, saved
        return g
    return grad_fn


def _setitem_then_square(x):
    y = x * 1
    y[0] = x[1] * x[2]
    y[np.array([2, 2]), 1:3] = 0.5
    return (y ** 2).sum()


SECOND_ORDER = {
    "setitem": _setitem_then_square,
    "split": lambda x: sum((p ** 3).sum() for p in tg.split(x, [1, 3], axis=1)),
    "sum": lambda x: tg.sum(x ** 3, axis=1).sum(),
    "sum_keepdims": lambda x: (tg.sum(x, 0, keepdims=True) ** 2).sum(),
    "mean": lambda x: tg.mean(x * x * x),
    "getitem_repeated": lambda x: (x[[0, 0, 2], 1:] ** 3).sum(),
    "getitem_basic": lambda x: (x[1] * x[2]).sum(),
    "max": lambda x: (tg.max(x, axis=0) ** 2).sum(),
    "var": lambda x: tg.var(x, axis=1).sum(),
    "prod": lambda x: tg.prod(x, axis=1).sum(),
    "reshape_transpose": lambda x: (x.reshape(4, 3).T ** 3).sum(),
    "concatenate": lambda x: (tg.concatenate([x, x * x], axis=1) ** 2).sum(),
    "stack": lambda x: (tg.stack([x, x * x]) ** 2).sum(),
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_second_derivatives_pass_gradcheck(name):
    x = leaf(A)
    assert gradcheck(_gradient_of(SECOND_ORDER[name]), x)


def test_second_derivative_through_sum_and_getitem():
    x = leaf([1.0, 2.0, 3.0])
    (x[[0, 0, 2]] ** 3).sum().backward(create_graph=True)
    g = x.grad
    close(g, [6.0, 0.0, 27.0])                   # 3 * count * x**2
    x.grad = None
    g.sum().backward()
    close(x.grad, [12.0, 0.0, 18.0])             # 6 * count * x


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------

def test_bad_reshape_names_the_op_and_the_shapes():
    with pytest.raises(ValueError, match=r"reshape.*\(5, ?2\).*\(3, 4\)"):
        leaf(A).reshape(5, 2)


@pytest.mark.parametrize("call", [
    lambda t: tg.sum(t, axis=2), lambda t: t.mean(-3), lambda t: t.max(axis=(0, 5)),
    lambda t: tg.var(t, axis=2), lambda t: tg.std(t, axis=-3), lambda t: tg.prod(t, axis=2), lambda t: tg.squeeze(t, 3),
    lambda t: tg.expand_dims(t, 4), lambda t: tg.swapaxes(t, 0, 2),
    lambda t: tg.moveaxis(t, 0, 2), lambda t: tg.transpose(t, (0, 2)),
    lambda t: tg.concatenate([t, t], axis=2), lambda t: tg.stack([t, t], axis=4),
    lambda t: tg.split(t, 2, axis=3),
], ids=["sum", "mean", "max", "var", "std", "prod", "squeeze", "expand_dims", "swapaxes", "moveaxis",
        "transpose", "concatenate", "stack", "split"])
def test_axis_out_of_range_names_the_op(call, request):
    name = request.node.callspec.id
    with pytest.raises(np.exceptions.AxisError, match=name):
        call(leaf(A))


def test_concatenate_shape_mismatch_names_the_shapes():
    with pytest.raises(ValueError, match=r"concatenate.*\(3, 4\).*\(2, 3\)"):
        tg.concatenate([leaf(A), tg.ones((2, 3))], axis=0)


def test_stack_shape_mismatch():
    with pytest.raises(ValueError, match="stack"):
        tg.stack([leaf(A), tg.ones((4, 3))])


def test_empty_concatenate():
    with pytest.raises(ValueError, match="concatenate"):
        tg.concatenate([])


def test_index_out_of_bounds_names_getitem():
    with pytest.raises(IndexError, match="getitem"):
        leaf(A)[3]
    with pytest.raises(IndexError, match="getitem"):
        leaf(A)[:, np.array([0, 4])]


def test_uneven_split_and_bad_squeeze_explain_themselves():
    with pytest.raises(ValueError, match="split.*equal"):
        tg.split(leaf(A), 2, axis=0)
    with pytest.raises(ValueError, match="squeeze.*length"):
        tg.squeeze(leaf(A), 0)
    with pytest.raises(ValueError, match="moveaxis"):
        tg.moveaxis(leaf(B), (0, 1), 2)


def test_reductions_take_only_axis_positionally():
    # np.sum's third positional argument is dtype, not keepdims: refuse it rather than guess.
    with pytest.raises(TypeError, match="sum"):
        tg.sum(leaf(A), 0, True)
    with pytest.raises(TypeError, match="max"):
        leaf(A).max(0, None, True)


def test_max_of_an_empty_tensor():
    with pytest.raises(ValueError, match="max"):
        tg.max(tg.zeros((0, 3)))


@pytest.mark.parametrize("data, kwargs", [
    ([3.0], {}),                                   # one element
    (np.full((3, 1), 2.0), {"axis": 1}),           # a length-1 axis
    ([[1.5, 1.5, 1.5]], {"axis": 1, "ddof": 1}),   # equal entries: std is 0, not smooth
], ids=["one-element", "length-1-axis", "equal-entries"])
def test_std_gradient_is_zero_where_std_is_zero(data, kwargs):
    # std is 0 there; torch.std's gradient is 0, sqrt's 1/(2*0) must not make it nan.
    x = tg.tensor(data, requires_grad=True)
    y = tg.std(x, **kwargs)
    assert np.all(y.numpy() == 0)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(np.shape(data)))


def test_std_second_derivative_over_one_element_is_zero():
    # backward(create_graph=True), not tg.grad: this package's tests run without tapegrad-higher
    x = tg.tensor([3.0], requires_grad=True)
    tg.std(x).backward(create_graph=True)
    g, x.grad = x.grad, None
    assert g.tolist() == [0.0]
    if g.requires_grad:
        g.sum().backward()
        assert x.grad is None or x.grad.tolist() == [0.0]


@pytest.mark.parametrize("kwargs", [{}, {"axis": 1}, {"axis": 0, "ddof": 1}, {"axis": 1, "keepdims": True}])
def test_std_gradient_and_second_derivative_match_finite_differences(kwargs):
    a = tg.tensor(np.random.default_rng(5).standard_normal((3, 4)), requires_grad=True)
    assert tg.gradcheck(lambda x: tg.std(x, **kwargs), (a,))
    assert tg.gradgradcheck(lambda x: tg.std(x, **kwargs), (a,))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_std_keeps_nan_and_inf_of_numpy():
    if True:
        np.testing.assert_array_equal(tg.std(tg.tensor([1.0, np.nan])).numpy(), np.nan)
        np.testing.assert_array_equal(tg.std(tg.tensor([2.0]), ddof=1).numpy(),
                                      np.std(np.array([2.0]), ddof=1))


# Every index form NumPy accepts, many with a repeated element: the gradient of
# sum(w * x[index]) must equal np.add.at of w into zeros (repeats accumulate).
C = rng.standard_normal((3, 4, 5))
_Pair = collections.namedtuple("_Pair", "i j")
GRAD_INDEXES = [
    ((0, 0), (1, 1)),                         # tuples inside the index are int arrays
    ((0, 0, 1),),
    (0, 0, 1),                                # a plain tuple: basic indexing
    ([0, 0], [1, 1]),
    [[0, 0], [1, 1]],                         # a nested list: one 2-d int array
    (np.array([0, 0]), (1, 1)),
    ((-1, -1), slice(None), (0, 0)),
    (slice(None), (1, 1, 1)),
    (Ellipsis, (0, 0)),
    (None, (0, 0)),
    ([True, False, True], (1, 1)),            # a bool list is a mask
    ((True, False, True),),
    ([[0, 0], [1, 1]], 0),
    (((0, 0), (2, 2)), slice(1, 3)),
    (range(2), [3, 3]),
    (np.array([[0, 0]]), np.int64(1)),
    np.array([2, 2, 0]),
    [2, 2, 0],
    (2, [1, 1], slice(None, None, -2)),
    (slice(1, None), [0, 0], [4, 4]),
    (np.array([1, 1]), slice(None), np.array([0, 0])),   # advanced axes split by a slice
    (True, 0, (1, 1)),
    _Pair((0, 0), (1, 1)),                    # a namedtuple is a tuple index
]


def _numpy_index(index):
    """The index with tapegrad tensors replaced by their arrays (for NumPy)."""
    if isinstance(index, tg.Tensor):
        return index.numpy()
    if isinstance(index, tuple):
        return tuple(_numpy_index(i) for i in index)
    return index


@pytest.mark.parametrize("index", GRAD_INDEXES + [
    (tg.tensor([0, 0]), (1, 1)), tg.tensor([1, 1, 2]), (slice(None), tg.tensor([[3, 3]]))],
    ids=repr)
def test_getitem_gradient_accumulates_repeats_for_every_index_form(index):
    w = np.random.default_rng(1).standard_normal(np.shape(C[_numpy_index(index)]))
    expected = np.zeros_like(C)
    np.add.at(expected, _numpy_index(index), w)      # the slow obviously-correct reference
    x = leaf(C)
    y = x[index]
    np.testing.assert_array_equal(y.numpy(), C[_numpy_index(index)])
    (y * tg.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-15, atol=0)
    if not any(isinstance(i, tg.Tensor) for i in (index if isinstance(index, tuple) else (index,))):
        x.grad = None      # the op called directly, without Tensor.__getitem__
        (tg.getitem(x, index=index) * tg.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-15, atol=0)


@pytest.mark.parametrize("index", [((0, 0), (1, 1)), (slice(None), (1, 1, 3)), [[2, 2], [0, 1]]], ids=repr)
def test_getitem_gradient_with_tuple_indexes_matches_finite_differences(index):
    assert gradcheck(lambda v: v[index] * v[index], (leaf(C),))
    assert tg.gradgradcheck(lambda v: v[index] * v[index], (leaf(C),))


# A Python list of tensors as an op's input is built as NumPy would build the array,
# with tg.stack, so its tensors keep their graph (np.asarray would silently drop it).
X2 = rng.standard_normal(3)


@pytest.mark.parametrize("f, ref", [
    (lambda x: tg.mean([x, x + 2]), lambda x: np.mean([x, x + 2])),
    (lambda x: tg.sum([x, x * x], axis=0), lambda x: np.sum([x, x * x], axis=0)),
    (lambda x: tg.exp([x, x]), lambda x: np.exp([x, x])),
    (lambda x: tg.asarray([x, 2 * x]), lambda x: np.asarray([x, 2 * x])),
    (lambda x: tg.var([[x, x + 1], [x * x, x]], axis=1), lambda x: np.var([[x, x + 1], [x * x, x]], axis=1)),
    (lambda x: x + [x, x], lambda x: x + np.asarray([x, x])),
    (lambda x: tg.multiply((x, [1.0, 2.0, 3.0]), x), lambda x: np.multiply((x, [1.0, 2.0, 3.0]), x)),
    (lambda x: tg.stack([x, [x[0], x[1], 1.0]]), lambda x: np.stack([x, [x[0], x[1], 1.0]])),
    (lambda x: tg.asarray([x[0], x[2]], dtype=np.float32), lambda x: np.asarray([x[0], x[2]], np.float32)),
], ids=["mean", "sum", "exp", "asarray", "var-nested", "operator", "tuple", "stack-inner-list", "asarray-dtype"])
def test_list_of_tensors_keeps_the_graph(f, ref):
    x = leaf(X2)
    y = f(x)
    expected = ref(X2)
    assert y.requires_grad and y.dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6)
    if y.dtype == np.float64:
        assert gradcheck(f, (leaf(X2),))
        assert tg.gradgradcheck(f, (leaf(X2),))
    else:
        y.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 1.0])


def test_mean_of_list_of_tensors_has_the_right_gradient():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    tg.mean([x, x + 2]).backward()            # mean of 4 values, x in 2 of them each
    np.testing.assert_array_equal(x.grad.numpy(), [0.5, 0.5])


def test_a_list_nested_deeper_than_numpy_allows_is_a_clear_error():
    deep = [1.0]
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(ValueError, match="maximum number of dimension"):   # NumPy's own
        tg.exp(deep)
