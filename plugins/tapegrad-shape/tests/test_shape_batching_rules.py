"""vmap's batching rules of the shape ops: which ops have one (so a lost rule shows), and
the hot ones (reductions, reshape, transpose, getitem, setitem, concatenate, stack, take)
against a Python loop over the examples, with in_axes/out_axes other than 0, nested, and
differentiated per example (reverse mode inside the vmap).

tg.vmap lives in tapegrad-higher, which is not a dependency of this plugin:
tapegrad.testing.vmap_call drives the core's batch levels directly, as the contract kit
does.
The references are NumPy (values) and the op called once per example (gradients).
"""

import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _batching
from tapegrad.testing import assert_same, batching_fallbacks, grad_of, loop_call, vmap_call

RNG = np.random.default_rng(7)


@pytest.fixture
def fallbacks():
    """The names of the ops vmap ran once per example (the loop fallback) in a test."""
    with batching_fallbacks() as seen:
        yield seen


# ---------------------------------------------------------------------------------------
# Which ops have rules
# ---------------------------------------------------------------------------------------

def test_every_op_of_the_plugin_has_a_batching_rule():
    mine = {name: op for name, op in tg.registry().ops.items() if op.plugin == "tapegrad-shape"}
    assert {"sum", "mean", "max", "min", "reshape", "transpose", "getitem", "setitem",
            "concatenate", "stack", "take", "take_along_axis", "convolve"} <= set(mine)
    assert [name for name, op in mine.items() if op.batch is None] == []


def test_reductions_use_the_reduce_kind_and_argmax_its_own_rule():
    table = tg.registry().ops
    for name in ("sum", "mean", "max", "min"):
        assert table[name].batch == "reduce", name
    # argmax's axis=None is an index into the flattened example: not the "reduce" kind
    assert callable(table["argmax"].batch) and callable(table["argmin"].batch)


# ---------------------------------------------------------------------------------------
# Reductions and shapes, against NumPy per example
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("params", [{}, {"axis": 0}, {"axis": -1, "keepdims": True},
                                    {"axis": (0, 2)}, {"keepdims": True}])
def test_reductions_with_in_axes_and_out_axes(name, params, fallbacks):
    x = RNG.standard_normal((3, 5, 4, 2))       # in_axes=1: 5 examples of (3, 4, 2)
    got = vmap_call(lambda v: getattr(tg, name)(v, **params), in_axes=1, out_axes=-1)(x)
    assert_same(got, loop_call(lambda v: getattr(np, name)(v, **params), in_axes=1, out_axes=-1)(x))
    assert fallbacks == []


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("params", [{}, {"axis": 1}, {"axis": -1, "keepdims": True},
                                    {"keepdims": True}])
def test_argmax_and_argmin_index_each_example(name, params, fallbacks):
    x = RNG.standard_normal((4, 3, 5))
    got = vmap_call(lambda v: getattr(tg, name)(v, **params))(x)
    assert_same(got, loop_call(lambda v: getattr(np, name)(v, **params))(x))
    assert fallbacks == []


@pytest.mark.parametrize("shape", [(6,), (-1,), (2, -1), (3, 1, 2), -1])
def test_reshape_of_each_example(shape, fallbacks):
    x = RNG.standard_normal((2, 3, 4))           # in_axes=2: examples (2, 3)
    got = vmap_call(lambda v: tg.reshape(v, shape), in_axes=2)(x)
    assert_same(got, loop_call(lambda v: np.reshape(v, shape), in_axes=2)(x))
    assert fallbacks == []


def test_reshape_resolves_minus_one_from_the_example_for_an_empty_batch():
    x = np.zeros((0, 2, 3))
    got = vmap_call(lambda v: tg.reshape(v, (-1,)))(x)
    assert got.shape == (0, 6)


@pytest.mark.parametrize("axes", [None, (1, 0, 2), (-1, 0, 1), (2, 1, 0)])
def test_transpose_of_each_example(axes, fallbacks):
    x = RNG.standard_normal((2, 3, 5, 4))        # in_axes=2: examples (2, 3, 4)
    got = vmap_call(lambda v: tg.transpose(v, axes), in_axes=2, out_axes=1)(x)
    assert_same(got, loop_call(lambda v: np.transpose(v, axes), in_axes=2, out_axes=1)(x))
    assert fallbacks == []


# ---------------------------------------------------------------------------------------
# Indexing
# ---------------------------------------------------------------------------------------

IDX = np.array([2, 0, 2])
INDEXES = [
    1, -1, slice(1, None), (Ellipsis, 0), (None, slice(None, None, -1)),
    IDX,                                            # advanced, first axis
    (slice(None), IDX),                             # advanced after a slice: consecutive
    (IDX, slice(None), np.array([1, 0, 3])),        # separated: its axes go first
    (0, slice(None), IDX),                          # an int beside an array is advanced
    (IDX, Ellipsis, np.array([0, 1, 1])),           # Ellipsis separates too
    (IDX, None, np.array([0, 1, 1])),               # so does None
    (np.array([[0, 1], [2, 2]]), slice(1, 3), np.array([[3], [1]])),   # broadcast 2-D
    (np.array(1), slice(None), IDX),                # a 0-d array indexes as an int
    RNG.standard_normal((3, 4, 4)) > 0,             # a full mask
    (slice(None), np.array([True, False, True, True])),
    (np.array([True, False, True]), slice(None), 2),
    True,                                           # a scalar bool: left to the loop
]


@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_getitem_of_each_example_matches_numpy(index, fallbacks):
    x = RNG.standard_normal((3, 4, 6, 4))        # in_axes=2: examples (3, 4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _batching.BatchingFallbackWarning)   # for True
        got = vmap_call(lambda v: v[index], in_axes=2)(x)
    assert_same(got, loop_call(lambda v: v[index], in_axes=2)(x))
    assert fallbacks == ([] if index is not True else ["getitem"])


@pytest.mark.parametrize("index", INDEXES[:13], ids=repr)
def test_per_example_gradient_of_getitem(index, fallbacks):
    # reverse mode inside the vmap: getitem's VJP (_getitem_grad) runs batched
    x = RNG.standard_normal((5, 3, 4, 4))
    w = RNG.standard_normal((5,) + np.zeros((3, 4, 4))[index].shape)

    def per_example_grad(v, u):
        v = v.requires_grad_(True) if not v.requires_grad else v
        out = v[index]
        g = grad_of(out, v, u)
        return g

    got = vmap_call(lambda v, u: per_example_grad(v, u))(x, w)
    want = np.stack([np.add.at(z := np.zeros((3, 4, 4)), index, w[i]) or z
                     for i in range(5)])
    assert_same(got, want)
    assert fallbacks == []


SET_CASES = [
    (1, (4, 4)), ((slice(None), 0), (3, 4)), (IDX, (1, 4)),
    ((IDX, slice(None), np.array([1, 0, 3])), (3, 4)),      # separated advanced indices
    ((0, slice(None), np.array([1, 2])), ()),               # a scalar value
    (RNG.standard_normal((3, 4, 4)) > 0, (1,)),
    (0, (1, 1, 4, 4)),                                      # extra leading unit axes
]


@pytest.mark.parametrize("index,value_shape", SET_CASES, ids=repr)
@pytest.mark.parametrize("which", ["both", "x", "value"])
def test_setitem_of_each_example(index, value_shape, which, fallbacks):
    x = RNG.standard_normal((5, 3, 4, 4))
    value = RNG.standard_normal((5,) + value_shape)
    axes = {"both": (0, 0), "x": (0, None), "value": (None, 0)}[which]
    x_in = x if which != "value" else x[0]
    v_in = value if which != "x" else value[0]

    def np_set(a, v):
        a = np.array(a)
        a[index] = v
        return a

    got = vmap_call(lambda a, v: tg.setitem(a, v, index=index), in_axes=axes)(x_in, v_in)
    assert_same(got, loop_call(np_set, in_axes=axes)(x_in, v_in))
    assert fallbacks == []


def test_a_batched_tensor_inside_an_index_is_refused_not_read_as_zeros():
    # (its array is vmap's placeholder, which NumPy's indexing read as zeros, silently)
    x = tg.tensor(np.arange(5.0))
    idx = np.array([[1, 2], [3, 4], [0, 0]])
    for f in (lambda i: x[i, None], lambda i: x[..., i] * 2):
        with pytest.raises(RuntimeError, match="vmap: .* batched tensor .*tg.take"):
            vmap_call(f)(idx)
    with pytest.raises(RuntimeError, match="vmap: .*batched tensor"):
        vmap_call(lambda i: tg.setitem(x, 1.0, index=i))(idx)      # the index as given
    with pytest.raises(RuntimeError, match="vmap.*batched tensor"):
        vmap_call(lambda v, i: v[i, 0])(np.ones((3, 5, 2)), idx)


def test_an_integer_index_tensor_alone_indexes_per_example():
    # x[i] with i batched is take(x, i, axis=0): per-example indices, NumPy's semantics
    x = RNG.standard_normal((3, 5, 2))
    idx = np.array([[1, -2], [3, 4], [0, 0]])
    assert_same(vmap_call(lambda v, i: v[i])(x, idx),
                loop_call(lambda v, i: v[i])(x, idx))
    table = RNG.standard_normal((5, 2))
    assert_same(vmap_call(lambda i: tg.tensor(table)[i])(idx),
                loop_call(lambda i: table[i])(idx))
    with pytest.raises(RuntimeError, match="vmap.*batched tensor"):
        vmap_call(lambda v, m: v[m])(x, RNG.random((3, 5)) > 0.5)   # a mask: refused


def test_take_with_different_indices_per_example(fallbacks):
    x = RNG.standard_normal((4, 3, 5))
    idx = RNG.integers(-5, 5, (4, 2, 3))
    for axis in (None, 0, 1, -1):
        for mode in ("raise", "wrap", "clip"):
            i = idx if mode != "raise" else idx % 3
            got = vmap_call(lambda v, j: tg.take(v, j, axis=axis, mode=mode))(x, i)
            assert_same(got, loop_call(lambda v, j: np.take(v, j, axis=axis, mode=mode))(x, i))
            # one array for all examples, the indices per example
            got = vmap_call(lambda v, j: tg.take(v, j, axis=axis, mode=mode),
                            in_axes=(None, 0))(x[0], i)
            assert_same(got, loop_call(lambda v, j: np.take(v, j, axis=axis, mode=mode),
                                       in_axes=(None, 0))(x[0], i))
    assert fallbacks == []


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_per_example_gradient_of_take_with_indices_per_example(axis, fallbacks):
    # take's VJP (_take_grad) with different indices per example: a scatter-add each
    x = RNG.standard_normal((4, 3, 5))
    idx = RNG.integers(-4, 7, (4, 2, 2))          # mode="wrap": out of range on purpose
    out_shape = np.take(x[0], idx[0], axis=axis, mode="wrap").shape
    u = RNG.standard_normal((4,) + out_shape)

    def per_example_grad(v, j, cot):
        v = v.requires_grad_(True)
        return grad_of(tg.take(v, j, axis=axis, mode="wrap"), v, cot)

    def grad_np(v, j, cot):
        out = np.zeros(v.size if axis is None else v.shape)
        lead = 0 if axis is None else axis % v.ndim
        np.add.at(out, (slice(None),) * lead + (j % out.shape[lead],), cot)
        return out.reshape(v.shape)

    assert_same(vmap_call(per_example_grad)(x, idx, u), loop_call(grad_np)(x, idx, u))
    assert fallbacks == []


@pytest.mark.filterwarnings("ignore::tapegrad._batching.BatchingFallbackWarning")
@pytest.mark.parametrize("axes", [2, 1, ([1, 0], [0, 2]), 0])
def test_tensordot_of_two_batched_inputs(axes, fallbacks):
    a = RNG.standard_normal((5, 3, 4))          # 5 examples of (3, 4)
    # b's contracted axes match a's: 4 with 4, 3 with 3
    b_example = {2: (3, 4), 1: (4, 2), 0: (2, 3)}[axes] if isinstance(axes, int) else (4, 2, 3)
    b = RNG.standard_normal((5,) + b_example)
    got = vmap_call(lambda p, q: tg.tensordot(p, q, axes=axes))(a, b)
    assert_same(got, loop_call(lambda p, q: np.tensordot(p, q, axes=axes))(a, b))
    # a batched matmul where tapegrad-linalg is installed (not a dependency), else a loop
    assert fallbacks == ([] if "matmul" in tg.registry().ops else ["tensordot"])


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("lengths", [(7, 3), (3, 7), (4, 4), (1, 5)])
@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0)])
def test_convolve_of_each_example_and_its_gradient(mode, lengths, in_axes, fallbacks):
    n, m = lengths
    a = RNG.standard_normal((4, n) if in_axes[0] == 0 else (n,))
    v = RNG.standard_normal((4, m) if in_axes[1] == 0 else (m,))
    got = vmap_call(lambda p, q: tg.convolve(p, q, mode), in_axes=in_axes)(a, v)
    assert_same(got, loop_call(lambda p, q: np.convolve(p, q, mode), in_axes=in_axes)(a, v))
    if in_axes[0] == 0:                            # per-example gradients in a
        u = RNG.standard_normal(got.shape)

        def per_example_grad(p, q, cot):
            p = p.requires_grad_(True)
            return grad_of(tg.convolve(p, q, mode), p, cot)

        def grad_np(p, q, cot):                  # the Jacobian, column by column
            jac = np.stack([np.convolve(e, q, mode) for e in np.eye(n)], axis=1)
            return cot @ jac

        axes = in_axes + (0,)
        assert_same(vmap_call(per_example_grad, in_axes=axes)(a, v, u),
                    loop_call(grad_np, in_axes=axes)(a, v, u))
    assert fallbacks == []


# ---------------------------------------------------------------------------------------
# Joining
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_concatenate_mixes_batched_and_unbatched_inputs(axis, fallbacks):
    a = RNG.standard_normal((2, 3, 4))           # in_axes=1: examples (2, 4)
    b = RNG.standard_normal((2, 4))              # shared by every example
    c = RNG.standard_normal((3, 2, 4))
    got = vmap_call(lambda p, q, r: tg.concatenate([p, q, r], axis=axis),
                    in_axes=(1, None, 0), out_axes=1)(a, b, c)
    want = loop_call(lambda p, q, r: np.concatenate([p, q, r], axis=axis),
                     in_axes=(1, None, 0), out_axes=1)(a, b, c)
    assert_same(got, want)
    assert fallbacks == []


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_stack_mixes_batched_and_unbatched_inputs(axis, fallbacks):
    a = RNG.standard_normal((3, 2, 4))
    b = RNG.standard_normal((2, 4))
    got = vmap_call(lambda p, q: tg.stack([p, q, p], axis=axis), in_axes=(0, None))(a, b)
    assert_same(got, loop_call(lambda p, q: np.stack([p, q, p], axis=axis),
                               in_axes=(0, None))(a, b))
    assert fallbacks == []


def test_per_example_gradients_through_concatenate_and_stack(fallbacks):
    # (the contract kit does not check the VJP inside vmap of sequence-input ops)
    a = RNG.standard_normal((4, 2, 3))
    w = RNG.standard_normal((2, 6))

    def loss(p):
        p = p.requires_grad_(True)
        joined = tg.concatenate([p, p * 2.0], axis=1)
        out = tg.sum(tg.stack([joined, joined * w], axis=0)[1] * joined)
        g = grad_of(out, p, tg.ones_like(out))
        return g

    got = vmap_call(loss)(a)
    # d/dp sum(w * j * j), j = [p, 2p]: 2 w j dj/dp
    want = np.stack([2 * w[:, :3] * p + 2 * (2 * w[:, 3:] * 2 * p) for p in a])
    assert_same(got, want)
    assert fallbacks == []


# ---------------------------------------------------------------------------------------
# Nested vmap, and the clip bound that broadcasts against the example
# ---------------------------------------------------------------------------------------

def test_nested_vmap_of_an_mlp_like_chain_matches_a_double_loop(fallbacks):
    x = RNG.standard_normal((3, 4, 5, 2))       # outer over axis 0, inner over axis 1
    w = RNG.standard_normal((2, 5))

    def f(v):                                   # v: (5, 2)
        h = tg.maximum(v * w.T, 0.0)
        s = tg.concatenate([tg.sum(h, axis=0), tg.max(h, axis=1)], axis=0)
        return tg.stack([s[1:], tg.mean(h.T, axis=1)[0] + s[:-1]])

    def f_np(v):
        h = np.maximum(v * w.T, 0.0)
        s = np.concatenate([np.sum(h, axis=0), np.max(h, axis=1)], axis=0)
        return np.stack([s[1:], np.mean(h.T, axis=1)[0] + s[:-1]])

    got = vmap_call(vmap_call(f, in_axes=0), in_axes=0, out_axes=2)(x)
    want = np.moveaxis(np.stack([np.stack([f_np(x[i, j]) for j in range(4)])
                                 for i in range(3)]), 0, 2)
    assert_same(got, want)
    assert fallbacks == []


def test_nested_vmap_with_the_inner_level_over_an_unbatched_argument(fallbacks):
    x = RNG.standard_normal((3, 4))              # outer: 3 examples of (4,)
    y = RNG.standard_normal((5, 4))              # inner: 5 examples, the same for all
    got = vmap_call(lambda a: vmap_call(lambda b: tg.reshape(a * b, (2, 2))[:, 1])(y))(x)
    want = np.stack([np.stack([(a * b).reshape(2, 2)[:, 1] for b in y]) for a in x])
    assert_same(got, want)
    assert fallbacks == []


def test_clip_with_a_bound_of_more_axes_than_the_example():
    # (tapegrad-elementwise's rule; its pad needs this plugin's reshape, so it is here)
    x = RNG.standard_normal((2, 3))              # 2 examples of (3,)
    lo = np.array([[-0.5, 0.0, 0.2], [-1.0, -0.1, 0.3]])   # (2, 3): broadcasts to (2, 3)
    got = vmap_call(lambda v: tg.clip(v, lo, 1.0))(x)
    assert_same(got, np.stack([np.clip(v, lo, 1.0) for v in x]))


def test_rules_do_not_warn_of_the_loop_fallback():
    x = RNG.standard_normal((3, 2, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", _batching.BatchingFallbackWarning)
        vmap_call(lambda v: tg.sum(tg.concatenate([v[:, ::-1], v.T.reshape(2, 4)]), axis=0))(x)
