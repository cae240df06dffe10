"""vmap batching rules of tapegrad-linalg's ops: which ops have one (a lost rule shows),
and for the hot ones vmap with other in/out axes and nested vmap against a Python loop.

tg.vmap lives in tapegrad-higher, which is not a test dependency of this plugin: the
helper `vmap` below opens batch levels with tapegrad._batching directly (as the contract
kit does)."""

import itertools
import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _batching, _engine
from tapegrad._engine import run_backward

WITH_RULES = {"matmul"}


@pytest.fixture(autouse=True)
def no_fallback_for_ruled_ops():
    """An op of WITH_RULES that went through the loop fallback (one call per example)
    fails the test. (Other plugins' ops, the reshapes and transposes of a nested vmap,
    may still fall back: their rules are not this plugin's.)"""
    _batching._warned.clear()       # the fallback warns once per op and process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", _batching.BatchingFallbackWarning)
        yield
    fell_back = {str(w.message).split("'")[1] for w in caught
                 if issubclass(w.category, _batching.BatchingFallbackWarning)}
    assert not fell_back & WITH_RULES, sorted(fell_back & WITH_RULES)




def vmap(f, in_axes, out_axis=0):
    """f mapped over axis in_axes[i] of argument i (None: shared), the mapped axis of the
    result at out_axis: tg.vmap's semantics with the engine's batch levels."""
    def mapped(*args):
        size = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
        level = _batching.enter(size)
        try:
            logical = [a if ax is None else _batching.wrap(_front(tg.asarray(a), ax), level)
                       for a, ax in zip(args, in_axes)]
            out = f(*logical)
        finally:
            _batching.exit(level)
        phys, batched = _batching.physical(out, level)
        assert batched
        return phys if out_axis == 0 else tg.moveaxis(phys, 0, out_axis)
    return mapped


def _front(a, axis):
    return a if axis == 0 else tg.moveaxis(a, axis, 0)


def loop(f, in_axes, out_axis=0):
    """The reference: f once per example, stacked."""
    def looped(*args):
        size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
        outs = [f(*[a if ax is None else np.take(np.asarray(a), i, axis=ax)
                    for a, ax in zip(args, in_axes)]) for i in range(size)]
        return np.stack([np.asarray(o.numpy() if hasattr(o, "numpy") else o) for o in outs],
                        axis=out_axis)
    return looped


def rand(*shape, seed=0):
    return np.random.default_rng(seed + 31 * len(shape) + sum(shape)).standard_normal(shape)


def test_ops_with_batching_rules():
    table = _engine.ops_table()
    have = {n for n, op in table.items() if op.plugin == "tapegrad-linalg" and op.batch is not None}
    assert WITH_RULES <= have, sorted(WITH_RULES - have)


# ---------------------------------------------------------------------------------------
# matmul: every rank combination, either operand batched alone or both
# ---------------------------------------------------------------------------------------

# logical shapes (x, y) of valid products: 1-d, 2-d, stacks, broadcast batch axes
MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
    ((2, 2, 3), (2, 3, 4)), ((2, 1, 2, 3), (5, 3, 4)), ((2, 3, 4), (4,)), ((4,), (2, 4, 3)),
    ((2, 3, 4), (4, 2)), ((3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 2)),
]
B = 4


@pytest.mark.parametrize("xs,ys", MATMUL_SHAPES)
@pytest.mark.parametrize("which", ["both", "x", "y"])
def test_matmul_vmap_equals_loop(xs, ys, which):
    in_axes = {"both": (0, 0), "x": (0, None), "y": (None, 0)}[which]
    x = rand(B, *xs) if in_axes[0] == 0 else rand(*xs)
    y = rand(B, *ys, seed=1) if in_axes[1] == 0 else rand(*ys, seed=1)
    got = vmap(tg.matmul, in_axes)(x, y).numpy()
    want = loop(np.matmul, in_axes)(x, y)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs,ys", [((2, 3), (3,)), ((3,), (3, 4)), ((2, 3, 4), (4, 2)),
                                   ((3,), (3,))])
def test_matmul_other_axes(xs, ys):
    # x mapped along its last axis, y along its first, the result's mapped axis last
    x = rand(*xs, B)
    y = rand(B, *ys, seed=1)
    in_axes = (len(xs), 0)
    out_axis = len(np.matmul(rand(*xs), rand(*ys)).shape)
    got = vmap(tg.matmul, in_axes, out_axis)(x, y).numpy()
    want = loop(np.matmul, in_axes, out_axis)(x, y)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs,ys", [((2, 3), (3,)), ((3,), (3,)), ((2, 3), (3, 4)),
                                   ((3,), (2, 3, 4))])
@pytest.mark.parametrize("outer,inner", list(itertools.product(
    [(0, 0), (0, None), (None, 0)], repeat=2)))
def test_matmul_nested_vmap(xs, ys, outer, inner):
    # shapes: axis 0 for the outer map (size 2), the inner map next (size B)
    def make(shape, seed, o, i):
        return rand(*((2,) if o == 0 else ()), *((B,) if i == 0 else ()), *shape, seed=seed)
    x, y = make(xs, 0, outer[0], inner[0]), make(ys, 1, outer[1], inner[1])
    # the inner map's axis of an argument is axis 0 of what the outer map hands on
    inner_axes = tuple(None if i is None else 0 for i in inner)
    got = vmap(vmap(tg.matmul, inner_axes), outer)(x, y).numpy()
    want = loop(loop(np.matmul, inner_axes), outer)(x, y)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs,ys", MATMUL_SHAPES[:6])
def test_matmul_per_example_gradients(xs, ys):
    # the gradient inside vmap (per example) against per-example backward passes
    x, y = rand(B, *xs), rand(*ys, seed=1)
    level = _batching.enter(B)
    try:
        xl = _batching.wrap(tg.tensor(x), level).requires_grad_(True)
        yl = tg.tensor(y, requires_grad=True)
        out = tg.sum(tg.matmul(xl, yl) ** 2)
        seed = _batching.wrap(tg.ones(B), level)
        gx, = run_backward((out,), (seed,), None, False, (xl,), True)
    finally:
        _batching.exit(level)
    got = _batching.physical(gx, level)[0].numpy()
    for i in range(B):
        xi = tg.tensor(x[i], requires_grad=True)
        tg.sum(tg.matmul(xi, tg.tensor(y)) ** 2).backward()
        np.testing.assert_allclose(got[i], xi.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_matmul_under_vmap_refuses_bad_shapes():
    with pytest.raises(ValueError, match="matmul: inner dimensions differ"):
        vmap(tg.matmul, (0, None))(rand(B, 2, 3), rand(4, 2))
    with pytest.raises(ValueError, match="matmul: 0-d operands"):
        vmap(tg.matmul, (0, None))(rand(B), rand(3))
