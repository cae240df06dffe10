"""vmap's batching rules of the elementwise ops: every op has one (so a lost rule shows),
and the ops of an MLP layer and of elementwise chains, vmapped, equal a Python loop over
the examples (NumPy as the reference): non-default in_axes/out_axes, unbatched operands,
Python scalars, nested levels, float32, and per-example gradients (reverse mode inside
the vmap, which runs the VJP rules and the backward ops batched).

tg.vmap lives in tapegrad-higher and moving axes needs tapegrad-shape, neither of them a
dependency of this plugin: tapegrad.testing.vmap_call drives the core's batch levels
directly and moves the axes of NumPy arguments and plain results with NumPy. The
shapes are chosen so that no rule needs to pad an input with unit axes (that reshape is
tapegrad-shape's; tests/test_shape_batching_rules.py there covers the padding, clip's
array bounds included).
"""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_elementwise
from tapegrad.testing import assert_same, batching_fallbacks, grad_of, loop_call, vmap_call

RNG = np.random.default_rng(11)


@pytest.fixture
def fallbacks():
    """The names of the ops vmap ran once per example (the loop fallback) in a test."""
    with batching_fallbacks() as seen:
        yield seen


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


# ---------------------------------------------------------------------------------------
# Which ops have rules
# ---------------------------------------------------------------------------------------

def test_every_op_of_the_plugin_has_a_batching_rule():
    table = tg.registry().ops
    assert len(tapegrad_elementwise.OPS) > 70
    for name in tapegrad_elementwise.OPS:
        expected = "elementwise" if name != "clip" else table["clip"].batch
        assert table[name].batch == expected, name
    # clip's bounds are parameters, not inputs: its own rule broadcasts x against them
    assert callable(table["clip"].batch)


# ---------------------------------------------------------------------------------------
# An MLP layer and elementwise chains, against a NumPy loop
# ---------------------------------------------------------------------------------------

def test_an_mlp_layer_with_in_axes_and_out_axes(fallbacks):
    x = RNG.standard_normal((3, 6, 4))          # in_axes=1: 6 examples of (3, 4)
    w = RNG.standard_normal((4,))               # shared weights, broadcast
    b = RNG.standard_normal((6, 3, 4))          # a bias per example

    def layer(v, u, c):
        h = tg.tanh(v * u + c)
        return tg.relu(h) - 0.5 * tg.sigmoid(h) + tg.maximum(h, 0.1) / tg.exp(-h)

    def layer_np(v, u, c):
        h = np.tanh(v * u + c)
        return np.maximum(h, 0) - 0.5 * _sigmoid(h) + np.maximum(h, 0.1) / np.exp(-h)

    got = vmap_call(layer, in_axes=(1, None, 0), out_axes=2)(x, w, b)
    assert_same(got, loop_call(layer_np, in_axes=(1, None, 0), out_axes=2)(x, w, b))
    assert fallbacks == []


CHAINS = [
    ("where", lambda v, u: tg.where(v > u, v, u * 2.0),
     lambda v, u: np.where(v > u, v, u * 2.0)),
    ("clip", lambda v, u: tg.clip(v * u, -0.3, 0.4), lambda v, u: np.clip(v * u, -0.3, 0.4)),
    ("minimum", lambda v, u: tg.minimum(v, u) ** 2, lambda v, u: np.minimum(v, u) ** 2),
    ("log", lambda v, u: tg.log(tg.abs(v) + 1.0) * tg.sqrt(u * u),
     lambda v, u: np.log(np.abs(v) + 1.0) * np.sqrt(u * u)),
    ("trig", lambda v, u: tg.sin(v) * tg.cos(u) + tg.arctan2(v, u),
     lambda v, u: np.sin(v) * np.cos(u) + np.arctan2(v, u)),
    ("rounding", lambda v, u: tg.floor(v * 3) + tg.remainder(v, 0.7) - tg.sign(u),
     lambda v, u: np.floor(v * 3) + np.remainder(v, 0.7) - np.sign(u)),
    ("comparison", lambda v, u: tg.logical_and(v < u, tg.isfinite(v)),
     lambda v, u: np.logical_and(v < u, np.isfinite(v))),
    ("scalars", lambda v, u: 2.0 - v / 3 + tg.power(tg.abs(u), 1.5),
     lambda v, u: 2.0 - v / 3 + np.power(np.abs(u), 1.5)),
]


@pytest.mark.parametrize("name,f,f_np", CHAINS, ids=[c[0] for c in CHAINS])
@pytest.mark.parametrize("in_axes", [(0, 0), (1, None), (None, 2)])
def test_elementwise_chains_match_a_loop(name, f, f_np, in_axes, fallbacks):
    x = RNG.standard_normal((4, 5, 3))
    y = RNG.standard_normal((4, 5, 3))
    if in_axes[1] is None:
        y = y[:, 0]                                  # (4, 3): each example is (4, 3) too
    if in_axes[0] is None:
        x = x[..., 0]
    got = vmap_call(f, in_axes=in_axes)(x, y)
    assert_same(got, loop_call(f_np, in_axes=in_axes)(x, y))
    assert fallbacks == []


def test_zero_dimensional_examples_and_float32(fallbacks):
    x = RNG.standard_normal(7).astype(np.float32)   # 7 examples of shape ()
    got = vmap_call(lambda v: tg.tanh(v) * 2 + tg.square(v))(x)
    assert_same(got, np.stack([np.tanh(v) * 2 + np.square(v) for v in x]), rtol=1e-6)
    assert fallbacks == []


def test_nested_vmap_matches_a_double_loop(fallbacks):
    x = RNG.standard_normal((3, 5, 4))
    y = RNG.standard_normal((3, 5, 4))

    def f(v, u):
        return tg.where(v > 0, tg.exp(-v * u), tg.log1p(u * u)) - tg.relu(u)

    def f_np(v, u):
        return np.where(v > 0, np.exp(-v * u), np.log1p(u * u)) - np.maximum(u, 0)

    got = vmap_call(vmap_call(f), out_axes=1)(x, y)
    want = np.stack([np.stack([f_np(x[i, j], y[i, j]) for j in range(5)])
                     for i in range(3)], axis=1)
    assert_same(got, want)
    assert fallbacks == []


# ---------------------------------------------------------------------------------------
# Per-example gradients: the VJP rules (and the backward ops) run batched
# ---------------------------------------------------------------------------------------

def test_per_example_gradients_of_a_layer(fallbacks):
    x = RNG.standard_normal((6, 3, 4))
    u = RNG.standard_normal((6, 3, 4))           # a cotangent per example
    w = RNG.standard_normal((4,))

    def per_example_grad(v, cot):
        v = v.requires_grad_(True)
        h = v * w
        out = tg.tanh(h) + tg.relu(h) * tg.sigmoid(v) + tg.sin(v) - tg.sqrt(tg.abs(v) + 1.0)
        g = grad_of(out, v, cot)
        return g

    def grad_np(v, cot):
        h = v * w
        s = _sigmoid(v)
        dv = ((1 - np.tanh(h) ** 2) * w + (h > 0) * w * s + np.maximum(h, 0) * s * (1 - s)
              + np.cos(v) - np.sign(v) / (2 * np.sqrt(np.abs(v) + 1.0)))
        return cot * dv

    got = vmap_call(per_example_grad)(x, u)
    assert_same(got, loop_call(grad_np)(x, u))
    assert fallbacks == []


def test_per_example_gradients_through_maximum_and_where_with_shared_operands(fallbacks):
    x = RNG.standard_normal((5, 4))
    y = RNG.standard_normal((4,))                # not mapped: the same for every example
    u = RNG.standard_normal((5, 4))

    def per_example_grad(v, other, cot):
        v = v.requires_grad_(True)
        out = tg.where(v > 0.2, tg.maximum(v, other) * 3.0, v * other)
        g = grad_of(out, v, cot)
        return g

    def grad_np(v, other, cot):
        pick = np.where(v > other, 1.0, np.where(v == other, 0.5, 0.0))
        return cot * np.where(v > 0.2, 3.0 * pick, other)

    got = vmap_call(per_example_grad, in_axes=(0, None, 0))(x, y, u)
    assert_same(got, loop_call(grad_np, in_axes=(0, None, 0))(x, y, u))
    assert fallbacks == []
