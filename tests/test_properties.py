"""Property tests (hypothesis): every binary elementwise op and every reduction, on
random shapes, dtypes, axes and values, against NumPy and central finite differences.

The contract kit checks each op on the few samples its plugin wrote; these tests draw
new cases every time:

- binary ops: mutually broadcastable shapes (0 to 3 dimensions, 0-d included), each input
  float32 or float64 independently, or one side a Python number;
- reductions (sum, mean, max, min, var, prod, logsumexp): shapes of 0 to 3 dimensions, an
  axis that is None, an int (negative too) or a tuple of axes, and keepdims.

For each: the forward value, shape and dtype match NumPy's (dtype promotion included, a
Python number never widens a float32); the gradient matches finite differences
(``tapegrad.testing.gradcheck``, in float64); and in float32 the result and the
gradients stay float32 and agree with the float64 ones. Values are drawn away from
points where a derivative does not exist or is not what finite differences measure:
ties for maximum/minimum/max/min, zero for a divisor, non-positive bases for power.

Settings: the default profile is deterministic (``derandomize=True``, so a CI run never
fails on a case the previous run did not draw) and small enough for the file to take a
few seconds. ``TAPEGRAD_HYPOTHESIS=explore`` draws many more, random, cases.
"""

import os

import numpy as np
import pytest
import tapegrad as tg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tapegrad.testing import gradcheck

if os.environ.get("TAPEGRAD_HYPOTHESIS") == "explore":
    PROPERTY = settings(max_examples=400, deadline=None, database=None,
                        suppress_health_check=[HealthCheck.too_slow])
else:
    PROPERTY = settings(max_examples=60, deadline=None, database=None, derandomize=True,
                        suppress_health_check=[HealthCheck.too_slow])

DTYPES = st.sampled_from([np.float32, np.float64])


# ---------------------------------------------------------------------------------------
# Values: each strategy gives float64 elements; a draw is cast to its dtype afterwards
# ---------------------------------------------------------------------------------------

def _uniform(lo, hi):
    """Floats in [lo, hi] on a grid of 1/64: exact in float32, so the float32 and float64
    runs see the same inputs, and hypothesis cannot shrink them onto a boundary."""
    return st.integers(int(lo * 64), int(hi * 64)).map(lambda k: k / 64)


ANY = _uniform(-3, 3)
POSITIVE = _uniform(0.5, 2)                                  # log, sqrt, a power's base
NONZERO = st.tuples(st.sampled_from([-1.0, 1.0]), _uniform(0.5, 3)).map(lambda p: p[0] * p[1])
EXPONENT = _uniform(-2, 2.5)
# NOTE: maximum/minimum have no derivative where x == y. Drawing x on a grid shifted by
# 0.1 from y's keeps every pair at least 0.1 apart, far beyond the finite-difference step.
GRID_X = st.integers(-6, 6).map(lambda k: 0.5 * k + 0.1)
GRID_Y = st.integers(-6, 6).map(lambda k: 0.5 * k)
# NOTE: remainder, fmod and floor_divide jump where x / y is an integer. A dividend whose
# fraction lies in [7/64, 57/64] over a divisor of ±1, ±2 or ±4 keeps x / y at least
# 7/256 away from every integer (and both exact in float32).
DIVIDEND = st.tuples(st.integers(-3, 2), st.integers(7, 57)).map(lambda p: p[0] + p[1] / 64)
DIVISOR = st.sampled_from([-4.0, -2.0, -1.0, 1.0, 2.0, 4.0])

# name -> (values of x, values of y). Every differentiable binary elementwise op of the
# core and tapegrad-elementwise must be here (test_every_binary_elementwise_op_is_covered).
BINARY = {
    "add": (ANY, ANY),
    "subtract": (ANY, ANY),
    "multiply": (ANY, ANY),
    "divide": (ANY, NONZERO),
    "power": (POSITIVE, EXPONENT),
    "maximum": (GRID_X, GRID_Y),
    "minimum": (GRID_X, GRID_Y),
    "fmax": (GRID_X, GRID_Y),
    "fmin": (GRID_X, GRID_Y),
    "arctan2": (NONZERO, ANY),          # it jumps by 2 pi across x == 0, y < 0
    "hypot": (ANY, NONZERO),
    "logaddexp": (ANY, ANY),
    "logaddexp2": (ANY, ANY),
    "remainder": (DIVIDEND, DIVISOR),
    "fmod": (DIVIDEND, DIVISOR),
    "floor_divide": (DIVIDEND, DIVISOR),
    "copysign": (ANY, NONZERO),
    "heaviside": (NONZERO, ANY),
}
# Ops of other installed plugins that are binary and elementwise (the plugin template's
# logaddexp is tapegrad-elementwise's now).
OPTIONAL_BINARY: dict = {}


def _binary_ops():
    ops = dict(BINARY)
    ops.update({k: v for k, v in OPTIONAL_BINARY.items() if k in tg.registry().ops})
    return sorted(ops.items())


@st.composite
def binary_case(draw, x_values, y_values):
    """(x, y, float64 x, float64 y): arrays of broadcastable shapes, or one side a number."""
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                    max_side=4))
    x_shape, y_shape = shapes.input_shapes
    x = draw(hnp.arrays(np.float64, x_shape, elements=x_values))
    y = draw(hnp.arrays(np.float64, y_shape, elements=y_values))
    side = draw(st.sampled_from(["arrays", "arrays", "x is a number", "y is a number"]))
    dx, dy = draw(DTYPES), draw(DTYPES)
    if side == "x is a number":
        x = float(x.reshape(-1)[0]) if x.size else draw(x_values)
    elif side == "y is a number":
        y = float(y.reshape(-1)[0]) if y.size else draw(y_values)
    cast = lambda a, d: a.astype(d) if isinstance(a, np.ndarray) else a
    return cast(x, dx), cast(y, dy)


def _leaf(a, dtype=None):
    """A leaf that requires grad for an array; a Python number stays a number."""
    if not isinstance(a, np.ndarray):
        return a
    return tg.tensor(a if dtype is None else a.astype(dtype), requires_grad=True)


def _check_binary(name, x, y):
    op = getattr(tg, name)
    ref = getattr(np, name)(x, y)
    tx, ty = _leaf(x), _leaf(y)
    out = op(tx, ty)
    # Forward: NumPy's value, shape and dtype (NEP 50: a Python number is weak).
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype, ref.dtype)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6 if ref.dtype == np.float32 else 1e-12)

    # Gradients: finite differences in float64 ...
    x64, y64 = _leaf(x, np.float64), _leaf(y, np.float64)
    assert gradcheck(op, (x64, y64))
    # ... and in the inputs' own dtypes, the same gradients, each in its input's dtype.
    g = np.random.default_rng(0).standard_normal(ref.shape)
    out.backward(tg.tensor(g.astype(ref.dtype)))
    op(x64, y64).backward(tg.tensor(g))
    single = any(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in (x, y))
    tol = 1e-4 if single else 1e-10
    for t, t64 in ((tx, x64), (ty, y64)):
        if isinstance(t, tg.Tensor):
            assert t.grad.shape == t.shape and t.grad.dtype == t.dtype
            np.testing.assert_allclose(t.grad.numpy(), t64.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,values", _binary_ops(), ids=[n for n, _ in _binary_ops()])
def test_binary_elementwise_op_matches_numpy_and_finite_differences(name, values):
    @PROPERTY
    @given(case=binary_case(*values))
    def check(case):
        _check_binary(name, *case)

    check()


def test_every_binary_elementwise_op_is_covered():
    table = tg.registry().ops
    # (the backward ops, relu_backward(g, ans) and the like, are gradients, not NumPy
    # functions: test_elementwise_backward_ops.py checks them against their composites)
    binary = {name for name, op in table.items()
              if op.plugin in ("tapegrad", "tapegrad-elementwise") and op.nin == 2
              and op.vjp is not None and not name.endswith("_backward")
              and name != "complex"}     # real parts -> complex: the complex kit checks it
    assert binary == set(BINARY), f"add property-test values for {binary - set(BINARY)}"


# ---------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------

def _logsumexp_ref(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


REDUCTIONS = {
    "sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "var": np.var,
    "prod": np.prod, "logsumexp": _logsumexp_ref,
}


@st.composite
def axis_for(draw, ndim):
    """None, an int in [-ndim, ndim) or a tuple of distinct axes (any of them negative)."""
    kind = draw(st.sampled_from(["none", "int", "tuple"] if ndim else ["none", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)) if ndim else []
    return tuple(a - ndim if draw(st.booleans()) else a for a in axes)


@st.composite
def reduction_case(draw, name):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
    size = int(np.prod(shape))
    if name in ("max", "min"):
        # NOTE: distinct values (a permutation of a grid 0.25 apart): no ties, where the
        # gradient is split and finite differences measure something else.
        perm = draw(st.permutations(range(size)))
        x = (np.array(perm, dtype=np.float64) * 0.25 - 2.0).reshape(shape)
    elif name == "prod":
        x = draw(hnp.arrays(np.float64, shape, elements=NONZERO.map(lambda v: v / 2)))
    else:
        x = draw(hnp.arrays(np.float64, shape, elements=ANY))
    axis = draw(axis_for(len(shape)))
    kwargs = {"keepdims": draw(st.booleans())}
    if name == "var" and draw(st.booleans()):
        reduced = size if axis is None else int(np.prod([shape[a] for a in np.atleast_1d(axis)]))
        if reduced > 1:
            kwargs["ddof"] = 1
    return x.astype(draw(DTYPES)), axis, kwargs


def _check_reduction(name, x, axis, kwargs):
    op = getattr(tg, name)
    ref = np.asarray(REDUCTIONS[name](x, axis=axis, **kwargs))
    t = tg.tensor(x, requires_grad=True)
    out = op(t, axis, **kwargs)
    assert out.shape == ref.shape and out.dtype == x.dtype, (out.shape, ref.shape, out.dtype)
    tol = 1e-5 if x.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol)

    t64 = tg.tensor(x.astype(np.float64), requires_grad=True)
    assert gradcheck(lambda v: op(v, axis, **kwargs), t64)
    g = np.random.default_rng(0).standard_normal(ref.shape)
    out.backward(tg.tensor(g.astype(x.dtype)))
    op(t64, axis, **kwargs).backward(tg.tensor(g))
    assert t.grad.shape == x.shape and t.grad.dtype == x.dtype
    np.testing.assert_allclose(t.grad.numpy(), t64.grad.numpy(), rtol=10 * tol, atol=10 * tol)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_matches_numpy_and_finite_differences(name):
    @PROPERTY
    @given(case=reduction_case(name))
    def check(case):
        _check_reduction(name, *case)

    check()
