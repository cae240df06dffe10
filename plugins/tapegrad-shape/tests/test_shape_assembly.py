"""Selection and assembly (module ``assembly``) against NumPy: block, broadcast_arrays,
choose, compress, delete, diagflat, extract, insert, meshgrid, partition, piecewise,
resize, rot90, select, trim_zeros, unstack -- values, dtypes and argument forms, the
gradients the contract kit's samples cannot reach (nested blocks, real trimming, ties in
partition, NaN-free piecewise), and the errors. The contract kit runs over every one in
tests/test_contract.py."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck, gradgradcheck, run_doctests

RNG = np.random.default_rng(11)


def T(a, requires_grad=False):
    return tg.tensor(np.asarray(a), requires_grad=requires_grad)


def same(got, want):
    """got (a tensor, or a tuple of them) equals NumPy's want, dtype and shape included."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        return
    g = got.numpy()
    want = np.asarray(want)
    assert (g.shape, g.dtype) == (want.shape, want.dtype), (g.shape, g.dtype, want.dtype)
    np.testing.assert_array_equal(g, want)


# -- block --------------------------------------------------------------------------------

def test_block_matches_numpy_for_nested_lists_and_mixed_ndims():
    a, b = RNG.normal(size=(2, 2)), RNG.normal(size=(2, 1))
    c, d = RNG.normal(size=(1, 2)), RNG.normal(size=(1, 1))
    same(tg.block([[T(a), T(b)], [T(c), T(d)]]), np.block([[a, b], [c, d]]))
    v = RNG.normal(size=3)
    same(tg.block([T(v), 1.0, T(v)]), np.block([v, 1.0, v]))
    same(tg.block([[T(v)], [T(v)]]), np.block([[v], [v]]))              # 1-d blocks as rows
    e = RNG.normal(size=(2, 2, 2))
    same(tg.block([[[T(e), T(e)]]]), np.block([[[e, e]]]))
    same(tg.block(T(a)), np.block(a))
    same(tg.block([T(a.astype(np.float32)), T(b.astype(np.float32))]),
         np.block([a.astype(np.float32), b.astype(np.float32)]))


def test_block_gradient_of_nested_blocks():
    xs = [T(RNG.normal(size=s), True) for s in ((2, 2), (2, 1), (1, 2), (1, 1))]
    f = lambda a, b, c, d: tg.block([[a, b], [c, d]]) * tg.arange(9.0).reshape(3, 3)  # noqa: E731
    assert gradcheck(f, xs) and gradgradcheck(f, xs)


def test_block_errors_are_numpys():
    with pytest.raises(TypeError, match=r"block: arrays\[1\] is a tuple"):
        tg.block([T([1.0]), (T([1.0]),)])
    with pytest.raises(ValueError, match="block: lists cannot be empty"):
        tg.block([[], [T([1.0])]])
    with pytest.raises(ValueError, match="block: list depths are mismatched"):
        tg.block([[T([1.0])], T([1.0])])


# -- broadcast_arrays, meshgrid, unstack -------------------------------------------------

def test_broadcast_arrays_matches_numpy_and_keeps_inputs_of_the_common_shape():
    a, b = RNG.normal(size=(2, 1)), RNG.normal(size=3)
    same(tg.broadcast_arrays(T(a), T(b)), np.broadcast_arrays(a, b))
    x = T(np.ones((2, 3)))
    assert tg.broadcast_arrays(x, T(b))[0] is x
    with pytest.raises(ValueError, match="broadcast_arrays"):
        tg.broadcast_arrays(T(np.ones(2)), T(np.ones(3)))


def test_broadcast_arrays_gradient_sums_back():
    a = T(RNG.normal(size=(2, 1)), True)
    x, y = tg.broadcast_arrays(a, T(np.ones(3)))
    (x * tg.arange(6.0).reshape(2, 3)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[3.0], [12.0]])


@pytest.mark.parametrize("kwargs", [{}, {"indexing": "ij"}, {"sparse": True},
                                    {"sparse": True, "indexing": "ij"}, {"copy": False}])
def test_meshgrid_matches_numpy(kwargs):
    x, y, z = RNG.normal(size=3), RNG.normal(size=2), RNG.normal(size=(2, 2))
    same(tg.meshgrid(T(x), T(y), **kwargs), np.meshgrid(x, y, **kwargs))
    same(tg.meshgrid(T(x), T(y), T(z), **kwargs), np.meshgrid(x, y, z, **kwargs))
    same(tg.meshgrid(T(x), **kwargs), np.meshgrid(x, **kwargs))
    assert tg.meshgrid() == np.meshgrid() == ()


def test_meshgrid_gradient_and_bad_indexing():
    x = T(RNG.normal(size=3), True)
    X, Y = tg.meshgrid(x, T(np.ones(2)))
    X.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="meshgrid: valid values for `indexing`"):
        tg.meshgrid(x, indexing="xx")


def test_unstack_matches_numpy_and_refuses_scalars():
    a = RNG.normal(size=(2, 3, 4))
    for axis in (0, 1, -1):
        same(tg.unstack(T(a), axis=axis), np.unstack(a, axis=axis))
    with pytest.raises(ValueError, match="unstack: input array must be at least 1-d"):
        tg.unstack(T(1.0))
    with pytest.raises(np.exceptions.AxisError, match="unstack"):
        tg.unstack(T(a), axis=3)


# -- diagflat, resize, rot90 -------------------------------------------------------------

def test_diagflat_matches_numpy():
    v = RNG.normal(size=(2, 2))
    for k in (0, 1, -2):
        same(tg.diagflat(T(v), k), np.diagflat(v, k))
    same(tg.diagflat(T([1, 2])), np.diagflat([1, 2]))


def test_resize_matches_numpy():
    a = RNG.normal(size=(2, 3))
    for shape in ((3, 4), 4, (2, 3), (0,), (1, 1), (7,)):
        same(tg.resize(T(a), shape), np.resize(a, shape))
    same(tg.resize(T(np.zeros(0)), (2, 2)), np.resize(np.zeros(0), (2, 2)))
    with pytest.raises(ValueError, match="resize: all elements of `new_shape` must be non-neg"):
        tg.resize(T(a), (2, -1))


def test_resize_gradient_sums_repeats():
    x = T([1.0, 2.0, 3.0], True)
    tg.resize(x, (2, 4)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 2.0])


def test_rot90_matches_numpy():
    a = RNG.normal(size=(2, 3, 4))
    for k in range(-5, 6):
        for axes in ((0, 1), (1, 0), (2, 0), (-1, 1), (0, -2)):
            same(tg.rot90(T(a), k, axes), np.rot90(a, k, axes))


def test_rot90_errors_are_numpys():
    x = T(np.ones((2, 3)))
    with pytest.raises(ValueError, match="rot90: len\\(axes\\) must be 2"):
        tg.rot90(x, 1, (0, 1, 2))
    with pytest.raises(ValueError, match="rot90: axes must be different"):
        tg.rot90(x, 1, (0, -2))
    with pytest.raises(ValueError, match="rot90: axes=\\(0, 3\\) out of range"):
        tg.rot90(x, 1, (0, 3))


# -- choose, compress, extract, select ---------------------------------------------------

def test_choose_matches_numpy_in_every_mode_and_form():
    choices = RNG.normal(size=(3, 4))
    same(tg.choose([0, 2, 1, 0], T(choices)), np.choose([0, 2, 1, 0], choices))
    same(tg.choose(T(np.array([2, 0])), [T(choices[:, :2][0]), T(choices[1, :2]), 7.0]),
         np.choose([2, 0], [choices[0, :2], choices[1, :2], 7.0]))
    idx = np.array([[0], [2], [1]])                               # broadcasts with the choices
    same(tg.choose(idx, T(choices)), np.choose(idx, choices))
    for mode in ("wrap", "clip"):
        same(tg.choose([5, -1, 3, 1], T(choices), mode=mode),
             np.choose([5, -1, 3, 1], choices, mode=mode))


def test_choose_gradient_goes_to_the_chosen_entries():
    c = T(np.zeros((2, 3)), True)
    tg.choose([1, 0, 1], c).backward(T([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(c.grad.numpy(), [[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]])


def test_choose_errors():
    c = T(np.ones((2, 3)))
    with pytest.raises(ValueError, match="choose: invalid entry in choice array"):
        tg.choose([0, 2, 1], c)
    with pytest.raises(ValueError, match="choose: clipmode must be one of"):
        tg.choose([0, 1, 1], c, mode="nearest")
    with pytest.raises(TypeError, match="choose: a must hold integer indices"):
        tg.choose([0.5, 1.0, 0.0], c)
    with pytest.raises(TypeError, match="choose: out= is not supported"):
        tg.choose([0, 1, 0], c, out=np.empty(3))


def test_compress_and_extract_match_numpy():
    a = RNG.normal(size=(3, 4))
    same(tg.compress([True, False, True], T(a), axis=0),
         np.compress([True, False, True], a, axis=0))
    same(tg.compress([0, 1], T(a), axis=1), np.compress([0, 1], a, axis=1))       # shorter
    same(tg.compress([1, 0, 0, 1, 1], T(a)), np.compress([1, 0, 0, 1, 1], a))    # flattened
    same(tg.compress([1, 0, 1, 0], T(np.arange(3))), np.compress([1, 0, 1, 0], np.arange(3)))
    cond = a > 0
    same(tg.extract(cond, T(a)), np.extract(cond, a))
    same(tg.extract(T(cond), T(a)), np.extract(cond, a))
    same(tg.extract([0, 1, 0, 2], T(a)), np.extract([0, 1, 0, 2], a))            # nonzero counts


def test_compress_and_extract_errors():
    with pytest.raises(IndexError, match="compress: index 3 is out of bounds"):
        tg.compress([0, 1, 1, 1], T(np.arange(3.0)))
    with pytest.raises(ValueError, match="compress: condition must be a 1-d array"):
        tg.compress(np.ones((2, 2)), T(np.arange(4.0)))
    with pytest.raises(IndexError, match="extract: index 3 is out of bounds"):
        tg.extract([0, 0, 0, 1], T(np.arange(3.0)))


def test_select_matches_numpy_values_and_dtypes():
    x = RNG.normal(size=(3, 4))
    conds, choices = [x < -0.5, x > 0.5], [x * 2, x ** 2]
    same(tg.select([T(c) for c in conds], [T(c) for c in choices]), np.select(conds, choices))
    same(tg.select(conds, [T(c) for c in choices], default=-1.0),
         np.select(conds, choices, default=-1.0))
    x32 = x.astype(np.float32)
    same(tg.select(conds, [T(x32), T(x32)]), np.select(conds, [x32, x32]))        # float32 kept
    same(tg.select(conds, [T(x32), 2.5]), np.select(conds, [x32, 2.5]))          # float64
    same(tg.select([x[0] > 0], [T(np.arange(4))]), np.select([x[0] > 0], [np.arange(4)]))
    row = RNG.normal(size=4)
    same(tg.select([x > 0], [T(row)], T(np.zeros((3, 1)))),
         np.select([x > 0], [row], np.zeros((3, 1))))


def test_select_gradient_to_choices_and_default():
    x = T(RNG.normal(size=5), True)
    d = T(np.zeros(5), True)
    cond = x.numpy() > 0
    tg.select([cond], [x * 3], d).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.where(cond, 3.0, 0.0))
    np.testing.assert_array_equal(d.grad.numpy(), np.where(cond, 0.0, 1.0))


def test_select_errors():
    with pytest.raises(ValueError, match="select: list of cases must be same length"):
        tg.select([np.array([True])], [T([1.0]), T([2.0])])
    with pytest.raises(ValueError, match="select with an empty condition list"):
        tg.select([], [])
    with pytest.raises(TypeError, match="select: invalid entry 0 in condlist: should be boolean"):
        tg.select([np.array([1, 0])], [T([1.0, 2.0])])


# -- piecewise ------------------------------------------------------------------------

def test_piecewise_matches_numpy():
    x = RNG.normal(size=(3, 4))
    conds = [x < 0, x > 0.5]
    funcs = [lambda v: v * 2, lambda v: v ** 2]        # work on tensors and arrays alike
    same(tg.piecewise(T(x), conds, funcs), np.piecewise(x, conds, funcs))
    same(tg.piecewise(T(x), conds, [1.5, lambda v: v + 1, -2.0]),
         np.piecewise(x, conds, [1.5, lambda v: v + 1, -2.0]))                   # default
    v = RNG.normal(size=5)
    same(tg.piecewise(T(v), v > 0, [lambda t: t * 3]), np.piecewise(v, v > 0, [lambda t: t * 3]))
    same(tg.piecewise(T(v), [v > 0, v > 0.5], [lambda t, k: t * k, lambda t, k: -t], 4.0),
         np.piecewise(v, [v > 0, v > 0.5], [lambda t, k: t * k, lambda t, k: -t], 4.0))
    i = np.array([-2, 0, 3])
    same(tg.piecewise(T(i), [i < 0], [lambda t: t * 1.5, 7]),
         np.piecewise(i, [i < 0], [lambda t: t * 1.5, 7]))                      # x's dtype
    same(tg.piecewise(T(2.0), [True], [lambda t: t + 1]),
         np.piecewise(2.0, [True], [lambda t: t + 1]))


def test_piecewise_calls_each_function_on_its_own_entries_so_no_nan_reaches_the_gradient():
    x = T([-4.0, 0.25, 9.0], True)
    y = tg.piecewise(x, [x.numpy() < 0, x.numpy() >= 0], [lambda v: -v, tg.sqrt])
    np.testing.assert_array_equal(y.numpy(), [4.0, 0.5, 3.0])
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [-1.0, 1.0, 1 / 6])
    f = lambda t: tg.piecewise(t, [t.numpy() < 0], [lambda v: v * v, tg.exp])  # noqa: E731
    x2 = T(RNG.normal(size=6), True)
    assert gradcheck(f, [x2]) and gradgradcheck(f, [x2])


def test_piecewise_errors():
    x = T(np.ones(3))
    with pytest.raises(ValueError, match="piecewise: with 2 condition\\(s\\), either 2 or 3"):
        tg.piecewise(x, [np.ones(3, bool), np.zeros(3, bool)], [1.0])
    with pytest.raises(ValueError, match="piecewise: condition of shape \\(2,\\) does not match"):
        tg.piecewise(x, [np.ones(2, bool)], [1.0])


# -- delete, insert ---------------------------------------------------------------------

@pytest.mark.parametrize("obj,axis", [(1, None), (-1, 0), ([0, 2], 1), (slice(None, None, 2), 0),
                                      (np.array([True, False, True]), 0), ([], 1),
                                      (np.array([0, 0, 3]), None), (slice(1, 3), -1)])
def test_delete_matches_numpy(obj, axis):
    a = RNG.normal(size=(3, 4))
    same(tg.delete(T(a), obj, axis), np.delete(a, obj, axis))


def test_delete_gradient_and_errors():
    x = T(np.arange(6.0).reshape(2, 3), True)
    tg.delete(x, 1, axis=1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]])
    with pytest.raises(IndexError, match="delete: index 5 is out of bounds"):
        tg.delete(T(np.arange(3.0)), 5)
    with pytest.raises(np.exceptions.AxisError, match="delete"):
        tg.delete(T(np.arange(3.0)), 0, axis=1)
    with pytest.raises(IndexError, match="delete"):
        tg.delete(T(np.arange(3.0)), np.array([0.5]))


@pytest.mark.parametrize("obj,values,axis", [
    (1, 5.0, None), ([1, 3], [10.0, 20.0], None), (1, [[1.0], [2.0], [3.0]], 1),
    (1, [1.0, 2.0, 3.0], 1), ([1], [[1.0], [2.0], [3.0]], 1), (0, [9.0, 8.0, 7.0, 6.0], 0),
    (slice(0, 4, 2), 0.5, 1), ([2, 2], [[1.0] * 4, [2.0] * 4], 0), (-1, [[4.0, 5.0, 6.0, 7.0]], 0),
    (np.array([4, 0]), [[1.0, 2.0]], 1)])
def test_insert_matches_numpy(obj, values, axis):
    a = RNG.normal(size=(3, 4))
    same(tg.insert(T(a), obj, T(np.asarray(values)), axis), np.insert(a, obj, values, axis))
    same(tg.insert(T(a), obj, values, axis), np.insert(a, obj, values, axis))


def test_insert_casts_values_to_arrs_dtype_and_takes_empty_arrays():
    i = np.arange(4)
    same(tg.insert(T(i), 1, 2.7), np.insert(i, 1, 2.7))
    a32 = np.ones(3, np.float32)
    same(tg.insert(T(a32), 0, T(np.array([2.0]))), np.insert(a32, 0, [2.0]))
    same(tg.insert(T(np.zeros(0)), 0, T([1.0, 2.0])), np.insert(np.zeros(0), 0, [1.0, 2.0]))
    same(tg.insert(T(np.ones(2)), [], T(np.zeros(0))), np.insert(np.ones(2), [], np.zeros(0)))


def test_insert_gradient_reaches_arr_and_values():
    a, v = T(np.ones((2, 3)), True), T(np.ones(2), True)
    out = tg.insert(a, 1, v, axis=1)
    (out * tg.arange(8.0).reshape(2, 4)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[0.0, 2.0, 3.0], [4.0, 6.0, 7.0]])
    np.testing.assert_array_equal(v.grad.numpy(), [1.0, 5.0])
    a2, v2 = T(RNG.normal(size=4), True), T(RNG.normal(size=1), True)
    f = lambda x, y: tg.insert(x, [0, 2, 4], y) ** 2  # noqa: E731   (values broadcast 1 -> 3)
    assert gradcheck(f, [a2, v2]) and gradgradcheck(f, [a2, v2])


def test_insert_errors_are_numpys():
    with pytest.raises(IndexError, match="insert: index 9 is out of bounds"):
        tg.insert(T(np.ones(3)), 9, 1.0)
    with pytest.raises(ValueError, match="insert"):
        tg.insert(T(np.ones((2, 3))), 1, T(np.ones(4)), axis=1)


# -- trim_zeros, partition ----------------------------------------------------------------

@pytest.mark.parametrize("trim", ["fb", "f", "b", "BF"])
def test_trim_zeros_matches_numpy(trim):
    v = np.array([0.0, 0.0, 1.5, 0.0, -2.0, 0.0])
    same(tg.trim_zeros(T(v), trim), np.trim_zeros(v, trim))
    m = np.zeros((4, 5))
    m[1:3, 2:4] = RNG.normal(size=(2, 2))
    for axis in (None, 0, 1, -1, (0, 1)):
        same(tg.trim_zeros(T(m), trim, axis=axis), np.trim_zeros(m, trim, axis=axis))
    same(tg.trim_zeros(T(np.zeros(3)), trim), np.trim_zeros(np.zeros(3), trim))
    same(tg.trim_zeros(T(np.zeros((2, 2))), trim), np.trim_zeros(np.zeros((2, 2)), trim))


def test_trim_zeros_gradient_through_constant_zeros():
    # The zeros are constants here, so moving an input never changes which are trimmed.
    pad = tg.zeros(2)
    f = lambda v: tg.trim_zeros(tg.concatenate([pad, v, pad])) ** 2  # noqa: E731
    v = T(RNG.normal(size=3) + 3.0, True)
    assert f(v).shape == (3,)
    assert gradcheck(f, [v]) and gradgradcheck(f, [v])


def test_trim_zeros_bad_trim():
    with pytest.raises(ValueError, match="trim_zeros: unexpected character"):
        tg.trim_zeros(T([0.0, 1.0]), "x")


@pytest.mark.parametrize("kth,axis", [(2, -1), ([0, 3], -1), (1, 0), (5, None), (-1, 1),
                                      (np.array([1, 2]), -1)])
def test_partition_matches_numpys_arrangement(kth, axis):
    a = RNG.normal(size=(3, 6))
    same(tg.partition(T(a), kth, axis), np.partition(a, kth, axis))
    ties = np.array([[3.0, 1.0, 3.0, 1.0, 2.0, 3.0], [np.nan, 0.5, 0.5, -1.0, np.nan, 0.0],
                     [1.0] * 6])
    same(tg.partition(T(ties), kth, axis), np.partition(ties, kth, axis))


def test_partition_gradient_follows_the_values_with_ties_as_a_stable_sort():
    x = T([3.0, 1.0, 3.0, 2.0], True)
    out = tg.partition(x, 3)
    np.testing.assert_array_equal(out.numpy(), np.partition(x.numpy(), 3))
    out.backward(T([1.0, 10.0, 100.0, 1000.0]))
    # every entry's gradient is g at the position its value went to; of the tied 3's the
    # first (a stable sort's order) gets the earlier position 2, the second position 3
    g = x.grad.numpy()
    assert sorted(g.tolist()) == [1.0, 10.0, 100.0, 1000.0]
    assert g[0] == 100.0 and g[2] == 1000.0
    y = T(RNG.permutation(np.linspace(-1, 1, 8)).reshape(2, 4), True)
    f = lambda t: tg.partition(t, [1, 2], axis=1) * tg.arange(8.0).reshape(2, 4)  # noqa: E731
    assert gradcheck(f, [y]) and gradgradcheck(f, [y])


def test_partition_errors():
    with pytest.raises(ValueError, match="partition: kth\\(=5\\) out of bounds \\(3\\)"):
        tg.partition(T(np.arange(3.0)), 5)
    with pytest.raises(ValueError, match="partition: order= names fields"):
        tg.partition(T(np.arange(3.0)), 1, order="x")
    with pytest.raises(np.exceptions.AxisError, match="partition"):
        tg.partition(T(np.arange(3.0)), 1, axis=1)


def test_docstring_examples_run():
    from tapegrad_shape import assembly
    result = run_doctests(assembly)
    assert result.attempted > 0 and result.failed == 0


# -- under tg.compile: positions read from tensor values are never baked in ---------------

@pytest.mark.parametrize("f,args1,args2", [
    (lambda x: tg.partition(x, 1), ([3.0, 1.0, 2.0],), ([1.0, 3.0, 2.0],)),
    (lambda x: tg.trim_zeros(x), ([0.0, 1.0, 2.0],), ([1.0, 2.0, 0.0],)),
    (lambda x, c: tg.compress(c, x), ([1.0, 2.0, 3.0], [True, False, False]),
     ([1.0, 2.0, 3.0], [False, False, True])),
    (lambda x, c: tg.extract(c, x), ([1.0, 2.0, 3.0], [True, False, False]),
     ([1.0, 2.0, 3.0], [False, True, False])),
    (lambda x, a: tg.choose(a, x), ([[1.0, 2.0], [3.0, 4.0]], [0, 1]),
     ([[1.0, 2.0], [3.0, 4.0]], [1, 0])),
    (lambda x, c: tg.piecewise(x, [c], [lambda v: v * 2]), ([1.0, 2.0], [True, False]),
     ([1.0, 2.0], [False, True])),
    (lambda x, i: tg.delete(x, i), ([1.0, 2.0, 3.0], [0]), ([1.0, 2.0, 3.0], [2])),
    (lambda x, c: tg.select([c], [x]), ([1.0, 2.0], [True, False]), ([1.0, 2.0], [False, True])),
])
@pytest.mark.filterwarnings("ignore::tapegrad.CompileWarning")   # trim_zeros returns a view
def test_compiled_calls_see_new_positions(f, args1, args2):
    compiled = tg.compile(f)
    for args in (args1, args2, args1):
        tensors = [T(a) for a in args]
        same(compiled(*tensors), f(*tensors).numpy())


def test_choose_compress_and_mT_method_forms_are_ndarrays():
    idx = np.array([0, 2, 1, 0])
    choices = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(tg.tensor(idx).choose(tg.tensor(choices)).numpy(),
                                  idx.choose(choices))
    x = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(tg.tensor(x).compress([True, False, True], axis=0).numpy(),
                                  x.compress([True, False, True], axis=0))
    a = np.arange(24.0).reshape(2, 3, 4)
    t = tg.tensor(a, requires_grad=True)
    np.testing.assert_array_equal(t.mT.numpy(), a.mT)
    (t.mT * tg.tensor(a.mT)).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), a)
    with pytest.raises(ValueError, match="ndim < 2"):
        tg.ones(3).mT
