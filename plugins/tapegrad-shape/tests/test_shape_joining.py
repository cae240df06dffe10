"""append, the stacks, array_split and the directional splits, atleast_nd and tg.r_/tg.c_:
values and dtypes against NumPy, gradients (the contract kit checks the registered
functions' samples; r_/c_ are checked here), argument forms and bad input."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_shape.joining as joining
from tapegrad.testing import run_doctests

RNG = np.random.default_rng(11)


def r(*shape):
    return RNG.standard_normal(shape)


def same(t, expected):
    expected = np.asarray(expected)
    got = np.asarray(t)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got, expected)
    np.testing.assert_array_equal(got, expected)


def leaves(*arrays):
    return [tg.tensor(a, requires_grad=True) for a in arrays]


def test_docstring_examples_run():
    result = run_doctests(joining)
    assert result.failed == 0 and result.attempted > 10


# ---------------------------------------------------------------------------------------
# append
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("arr,values,axis", [
    (r(2, 3), r(4), None), (r(2, 3), r(1, 3), 0), (r(2, 3), r(2, 2), 1),
    (r(2, 3), r(2, 2), -1), (np.array(1.5), r(2), None), (r(3), [1, 2], None),
])
def test_append_matches_numpy(arr, values, axis):
    same(tg.append(arr, values, axis=axis), np.append(arr, values, axis=axis))


def test_append_promotes_as_numpy():
    f32 = np.ones(3, np.float32)
    same(tg.append(tg.tensor(f32), 1.5), np.append(f32, 1.5))          # float64, as NumPy
    same(tg.append(tg.tensor(f32), np.float32([2])), np.append(f32, np.float32([2])))
    same(tg.append(np.arange(3), [4, 5]), np.append(np.arange(3), [4, 5]))


def test_append_gradient_reaches_both_inputs():
    a, v = leaves(r(2, 2), r(3))
    (tg.append(a, v) * tg.arange(7.0)).sum().backward()
    same(a.grad, np.arange(4.0).reshape(2, 2))
    same(v.grad, np.arange(4.0, 7.0))


def test_append_with_an_axis_needs_matching_dimensions():
    with pytest.raises(ValueError, match="concatenate.*dimensions"):
        tg.append(tg.ones((2, 3)), tg.ones(3), axis=0)


# ---------------------------------------------------------------------------------------
# the stacks
# ---------------------------------------------------------------------------------------

STACK_CASES = [
    [r(3), r(3)], [r(2, 3), r(3), r(1, 3)], [r(2, 3, 2), r(1, 3, 2)], [np.array(1.0), np.array(2.0)],
    [r(2, 1), r(2, 3)], [r(3), r(2)], [1.0, r(2)],
]


@pytest.mark.parametrize("name", ["vstack", "hstack", "dstack", "column_stack", "row_stack"])
@pytest.mark.parametrize("case", range(len(STACK_CASES)))
def test_stacks_match_numpy(name, case):
    arrays = STACK_CASES[case]
    ref = np.vstack if name == "row_stack" else getattr(np, name)
    try:
        expected = ref(arrays)
    except ValueError:
        with pytest.raises(ValueError):
            getattr(tg, name)([tg.asarray(a) for a in arrays])
        return
    same(getattr(tg, name)([tg.asarray(a) for a in arrays]), expected)
    same(getattr(tg, name)(tuple(arrays)), expected)       # array-likes and tuples


def test_row_stack_is_vstack_without_numpys_deprecation_warning(recwarn):
    a, b = r(2), r(2)
    same(tg.row_stack([a, b]), np.vstack([a, b]))
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


def test_a_tensor_is_stacked_as_the_sequence_of_its_rows():
    x = r(3, 2)
    same(tg.vstack(tg.tensor(x)), np.vstack(x))
    same(tg.hstack(tg.tensor(x)), np.hstack(x))
    same(tg.column_stack(tg.tensor(x)), np.column_stack(x))


def test_stack_dtype_and_casting_follow_numpy():
    a, b = np.arange(3), np.ones(3)
    same(tg.vstack([a, b], dtype=np.float32), np.vstack([a, b], dtype=np.float32))
    same(tg.hstack([a, a], dtype=np.float64), np.hstack([a, a], dtype=np.float64))
    with pytest.raises(TypeError, match="vstack: cannot cast .*float64 to int64.*same_kind"):
        tg.vstack([a, b], dtype=np.int64)
    with pytest.raises(TypeError, match="hstack: cannot cast"):
        tg.hstack([a, b], casting="no")
    with pytest.raises(ValueError, match="casting must be one of"):
        tg.vstack([a, b], casting="sometimes")


def test_stack_gradients_flow_back_to_each_input():
    a, b = leaves(r(3), r(3))
    w = r(3, 2)
    (tg.column_stack([a, b]) * w).sum().backward()
    same(a.grad, w[:, 0])
    same(b.grad, w[:, 1])
    a, b = leaves(r(2, 3), r(2, 3))
    w = r(2, 3, 2)
    (tg.dstack([a, b]) * w).sum().backward()
    same(b.grad, w[..., 1])


@pytest.mark.parametrize("name", ["vstack", "hstack", "dstack", "column_stack", "row_stack"])
def test_stacks_refuse_what_numpy_refuses(name):
    f = getattr(tg, name)
    with pytest.raises(TypeError, match=f"{name}: arrays to stack must be passed as a sequence"):
        f(t for t in [tg.ones(2), tg.ones(2)])
    with pytest.raises(ValueError, match=f"{name}: need at least one array"):
        f([])
    with pytest.raises(TypeError, match=f"{name}: a 0-d tensor is not a sequence"):
        f(tg.tensor(1.0))
    with pytest.raises(ValueError, match="concatenate"):
        f([tg.ones((2, 3)), tg.ones((3, 2))])


def test_joining_functions_are_not_tensor_methods():
    # NumPy's ndarray has none of them.
    for name in ("append", "vstack", "hstack", "dstack", "column_stack", "row_stack",
                 "array_split", "hsplit", "vsplit", "dsplit", "atleast_1d"):
        assert not hasattr(tg.Tensor, name), name


# ---------------------------------------------------------------------------------------
# array_split and the directional splits
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,sections,axis", [
    ((7, 2), 3, 0), ((7, 2), 7, 0), ((7, 2), 9, 0), ((2, 5), [1, 3], 1), ((2, 5), [3, 1], -1),
    ((2, 5), [2, 9], 1), ((4,), 1, 0), ((0, 3), 2, 0),
])
def test_array_split_matches_numpy(shape, sections, axis):
    x = r(*shape)
    got = tg.array_split(x, sections, axis=axis)
    expected = np.array_split(x, sections, axis=axis)
    assert isinstance(got, list) and len(got) == len(expected)
    for g, e in zip(got, expected):
        same(g, e)


@pytest.mark.parametrize("name,shape,sections", [
    ("hsplit", (2, 4), 2), ("hsplit", (6,), [2, 3]), ("hsplit", (2, 4, 3), [1]),
    ("vsplit", (4, 2), [1]), ("vsplit", (4, 2, 3), 2), ("dsplit", (1, 2, 4), 2),
    ("dsplit", (2, 2, 6), [1, 4]),
])
def test_directional_splits_match_numpy(name, shape, sections):
    x = r(*shape)
    got = getattr(tg, name)(tg.tensor(x), sections)
    expected = getattr(np, name)(x, sections)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        same(g, e)


def test_array_split_gradient_reaches_every_part():
    x = tg.tensor(r(5), requires_grad=True)
    parts = tg.array_split(x, 3)
    (parts[0].sum() * 1 + parts[1].sum() * 2 + parts[2].sum() * 3).backward()
    same(x.grad, [1.0, 1.0, 2.0, 2.0, 3.0])


def test_splits_refuse_bad_input():
    with pytest.raises(ValueError, match="array_split: the number of sections must be larger than 0"):
        tg.array_split(tg.ones(3), 0)
    with pytest.raises(np.exceptions.AxisError, match="array_split"):
        tg.array_split(tg.ones(3), 2, axis=1)
    with pytest.raises(ValueError, match="hsplit only works on tensors of 1 or more"):
        tg.hsplit(tg.tensor(1.0), 1)
    with pytest.raises(ValueError, match=r"vsplit only works on tensors of 2 or more dimensions, got shape \(3,\)"):
        tg.vsplit(tg.ones(3), 1)
    with pytest.raises(ValueError, match="dsplit only works on tensors of 3 or more"):
        tg.dsplit(tg.ones((2, 2)), 1)
    with pytest.raises(ValueError, match="do not divide into 3 equal sections"):
        tg.hsplit(tg.ones((2, 4)), 3)


# ---------------------------------------------------------------------------------------
# atleast_1d / 2d / 3d
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["atleast_1d", "atleast_2d", "atleast_3d"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4), (1, 2, 3, 4)])
def test_atleast_matches_numpy(name, shape):
    x = r(*shape) if shape else np.array(2.5)
    same(getattr(tg, name)(tg.tensor(x)), getattr(np, name)(x))


@pytest.mark.parametrize("name", ["atleast_1d", "atleast_2d", "atleast_3d"])
def test_atleast_of_several_arguments_is_a_tuple_and_of_numbers_a_tensor(name):
    got = getattr(tg, name)(1.0, r(3), tg.ones((2, 2)))
    expected = getattr(np, name)(1.0, r(3), np.ones((2, 2)))
    assert isinstance(got, tuple) and len(got) == 3
    assert [g.shape for g in got] == [e.shape for e in expected]
    assert getattr(tg, name)() == getattr(np, name)() == ()


def test_atleast_3d_gradient_is_the_reshaped_gradient():
    x = tg.tensor(r(3), requires_grad=True)
    w = r(1, 3, 1)
    (tg.atleast_3d(x) * w).sum().backward()
    same(x.grad, w.reshape(3))


# ---------------------------------------------------------------------------------------
# tg.r_ and tg.c_
# ---------------------------------------------------------------------------------------

A, B, M = r(3), r(2), r(2, 3)


@pytest.mark.parametrize("key", [
    (A, B), (A, 2.0, B), (A,), (slice(0, 5),), (slice(1, 7, 2), A), (slice(-1, 1, 5j),),
    (A, slice(0, 3), 4), ("0,2", A, M), ("1,2", A, A), ("0,2,0", A, A), ("1,2,0", A, A),
    ("0,3,1", M), ("0,3,-2", M), ("-1", M, M), ("0", M, M), ([1.5, 2.5], A), (True, 2, 3),
    (np.float32(1.0), np.ones(2, np.float32)), (1, np.ones(2, np.float32)),
    ("0,2", slice(0, 3), slice(3, 6)), ("0,2,0", slice(0, 3)),
])
def test_r_matches_numpy(key):
    tkey = tuple(tg.tensor(k) if isinstance(k, np.ndarray) else k for k in key)
    same(tg.r_[tkey if len(tkey) > 1 else tkey[0]], np.r_[key if len(key) > 1 else key[0]])


@pytest.mark.parametrize("key", [(A, A), (M.T, A), (np.ones(1), 1.0), (M, M)])
def test_c_matches_numpy(key):
    tkey = tuple(tg.tensor(k) if isinstance(k, np.ndarray) else k for k in key)
    same(tg.c_[tkey], np.c_[key])


@pytest.mark.parametrize("key", [(A, 2.0, B), ("0,2", A, M), ("0,2,0", A, A), ("1,2,0", A, A),
                                 ("0,3,-2", M)])
def test_r_is_differentiable_to_second_order(key):
    positions = [i for i, k in enumerate(key) if isinstance(k, np.ndarray)]
    inputs = [tg.tensor(key[i], requires_grad=True) for i in positions]

    def f(*ts):
        items = list(key)
        for i, t in zip(positions, ts):
            items[i] = t
        return tg.r_[tuple(items)] ** 2

    assert tg.gradcheck(f, inputs) and tg.gradgradcheck(f, inputs)


def test_c_is_differentiable_to_second_order():
    a, m = tg.tensor(A, requires_grad=True), tg.tensor(M.T, requires_grad=True)
    f = lambda a, m: tg.c_[m, a] ** 2         # noqa: E731
    assert tg.gradcheck(f, (a, m)) and tg.gradgradcheck(f, (a, m))


def test_r_and_c_refuse_what_they_do_not_support():
    with pytest.raises(ValueError, match=r"r_: the directive 'r' makes an np.matrix"):
        tg.r_["r", A, A]
    with pytest.raises(ValueError, match=r"c_: the directive 'c' makes an np.matrix"):
        tg.c_["c", A]
    with pytest.raises(ValueError, match="r_: unknown special directive 'x'"):
        tg.r_["x", A]
    with pytest.raises(ValueError, match="r_: unknown special directive '0,1,2,3'"):
        tg.r_["0,1,2,3", A]
    with pytest.raises(ValueError, match="r_: special directives must be the first entry"):
        tg.r_[A, "0", A]
    with pytest.raises(ValueError, match="r_: a slice needs a stop value"):
        tg.r_[3:]
    with pytest.raises(ValueError, match="r_: nothing to concatenate"):
        tg.r_["0"]
    with pytest.raises(ValueError, match="r_: concatenate: .*dimensions"):
        tg.r_[A, M]


def test_r_and_c_are_public_and_listed_for_the_install_hint():
    from tapegrad._plugins import KNOWN_PROVIDERS
    assert repr(tg.r_) == "tg.r_" and repr(tg.c_) == "tg.c_"
    for name in ("r_", "c_", "append", "vstack", "array_split", "atleast_3d"):
        assert KNOWN_PROVIDERS[name] == "tapegrad-shape"
