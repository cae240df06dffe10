"""Fusion recipes (Note: [fusion recipes] in _compile.pyx; docs/compile.md): a kernel
with `fused_as` (the backward ops of sin, cos, tanh, sigmoid) is recorded as one step,
which a fused replay expands into the recipe's ufunc calls. What must hold:

- compiled chains through those ops equal eager bit for bit (NaN-ness where NaN),
  forward and backward, fused and with fuse=False, float32 and float64, on special
  values; and against NumPy's closed-form gradient computed independently;
- the recording holds the backward op's step (not the composite's three), and the fused
  step runs the recipe's ufuncs;
- a recipe that does not check out (bad operands, not ufuncs) or a call it does not cover
  (broadcast inputs) is a plain kernel step, with eager's result;
- a third-party op's kernel with a recipe fuses too; double backward inside a compiled
  function still matches eager.

References: eager calls, NumPy expressions of the derivatives, and the kernels' own
results (for recipes written here).
"""

import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _engine
from tapegrad.testing import Sample


def _same(a, b):
    a = a.numpy() if isinstance(a, tg.Tensor) else np.asarray(a)
    b = b.numpy() if isinstance(b, tg.Tensor) else np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    nan = np.isnan(b)
    np.testing.assert_array_equal(np.isnan(a), nan)
    np.testing.assert_array_equal(a[~nan].view(np.uint8), b[~nan].view(np.uint8))


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with np.errstate(all="ignore"):
            yield


def _compiled_equals_eager(f, arguments, fuse=True):
    """tg.compile(f) called on each tuple of `arguments` (arrays) equals f, output and
    gradients bit for bit; returns the compiled function."""
    compiled = tg.compile(f, fuse=fuse)
    for arrays in arguments:
        eager_args = [tg.tensor(a, requires_grad=True) for a in arrays]
        compiled_args = [tg.tensor(a, requires_grad=True) for a in arrays]
        le, lc = f(*eager_args), compiled(*compiled_args)
        le.backward()
        lc.backward()
        _same(lc, le)
        for c, e in zip(compiled_args, eager_args):
            _same(c.grad, e.grad)
    return compiled


def _values(dtype, shift):
    v = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -7.5, 20.0, -20.0, 1e-3, np.nan, np.inf,
                  -np.inf, float(np.finfo(dtype).tiny), 1e30, 2.5], dtype)
    return v + dtype(shift)


def _chain(x):
    y = tg.sigmoid(tg.tanh(tg.cos(tg.sin(x) * 1.5) + 0.25))
    return (y * y).sum()


def _program(compiled):
    (program,) = compiled.programs()      # (one signature, recorded once)
    return program


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_chains_through_recipe_ops_equal_eager(dtype, fuse):
    compiled = _compiled_equals_eager(_chain, [(_values(dtype, call),) for call in range(3)],
                                      fuse=fuse)
    program = _program(compiled)
    names = [st.describe()[1] for st in program.backward]
    for op in ("sin_backward", "cos_backward", "tanh_backward", "sigmoid_backward"):
        assert names.count(op) == 1
    if fuse:
        (kernel,) = [st.fn for st in program.backward_run if st.describe()[0] == "fused"]
        # the recipes' calls: sigmoid's and tanh's subtract, cos's negative and sin,
        # sin's cos (the rest are multiplies)
        assert (kernel.names.count("subtract"), kernel.names.count("negative"),
                kernel.names.count("sin"), kernel.names.count("cos")) == (2, 1, 1, 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_fused_recipe_gradient_equals_numpys_closed_form(dtype):
    def f(x):
        return tg.tanh(tg.sin(x)).sum()

    compiled = tg.compile(f)
    x0 = np.linspace(-3.0, 3.0, 40).astype(dtype)
    for _ in range(2):
        x = tg.tensor(x0, requires_grad=True)
        compiled(x).backward()
    s = np.sin(x0)
    t = np.tanh(s)
    # tanh's gradient g * (1 - t*t) with g = 1, then sin's: that times cos(x)
    g1 = np.multiply(np.ones_like(x0), np.subtract(np.array(1, dtype), np.multiply(t, t)))
    expected = np.multiply(g1, np.cos(x0))
    _same(x.grad, expected)
    assert any(d[0] == "fused" for d in _program(compiled).describe(fused=True)["backward"])


def _install(installed, name, kernel, fused_as):
    X = np.linspace(-1.0, 1.0, 6)
    if fused_as is not None:
        kernel.fused_as = fused_as
    op = _engine.Op(name, "tests", {"cpu": kernel}, lambda g, ans, x: (g * 2.0,),
                    lambda tangents, ans, x: tangents[0] * 2.0,
                    1, False, (), None, False, True, [Sample(X)], "", None, True)
    _engine.install_op(op)
    installed.append(name)
    return op


def test_a_third_party_kernel_with_a_recipe_is_fused_and_equals_eager(installed):
    def kernel(x):                  # (x + x) * x, written as its recipe says
        return np.multiply(np.add(x, x), x)

    op = _install(installed, "_recipe_ok", kernel,
                  ((np.add, (0, 0)), (np.multiply, (1, 0))))

    def f(x):
        return tg.sin(op(tg.sin(x))).sum()

    compiled = _compiled_equals_eager(f, [(np.linspace(-2.0, 2.0, 9) + call,) for call in range(3)])
    fused = [what for kind, what in _program(compiled).describe(fused=True)["forward"]
             if kind == "fused"]
    assert fused == ["4 ops: sin,add,multiply,sin"]


@pytest.mark.parametrize("bad", [
    ((np.add, (0, 5)),),                        # an operand that names nothing
    ((np.add, (0, "x")),),                      # not an int or a float
    ((np.add, (0,)),),                          # the wrong number of operands
    ((lambda a, b: a + b, (0, 0)),),            # not a ufunc
    "not a tuple",
    (),
])
def test_a_recipe_that_does_not_check_out_leaves_a_plain_kernel_step(installed, bad):
    def kernel(x):
        return np.multiply(np.add(x, x), x)

    op = _install(installed, f"_recipe_bad_{abs(hash(str(bad)))}", kernel, bad)

    def f(x):
        return tg.sin(op(tg.sin(x))).sum()

    compiled = _compiled_equals_eager(f, [(np.linspace(-2.0, 2.0, 9) + call,) for call in range(2)])
    forward = _program(compiled).describe(fused=True)["forward"]
    assert ("kernel", "kernel") in forward     # the op's own step, not fused


def test_broadcast_inputs_take_the_plain_kernel_and_equal_eager(installed):
    def kernel(x, y):
        return np.multiply(np.add(x, y), y)

    X = np.linspace(-1.0, 1.0, 6)
    kernel.fused_as = ((np.add, (0, 1)), (np.multiply, (2, 1)))
    op = _engine.Op("_recipe_binary", "tests", {"cpu": kernel},
                    lambda g, ans, x, y: (g * y, g * (x + 2 * y)), None,
                    2, False, (), None, False, True, [Sample(X, X)], "", None, True)
    _engine.install_op(op)
    installed.append("_recipe_binary")

    def f(x, y):
        return tg.sin(op(tg.sin(x), tg.sin(y))).sum()

    compiled = _compiled_equals_eager(
        f, [(np.linspace(-1.0, 1.0, 8) + call, np.array(0.5 + call)) for call in range(2)])
    forward = _program(compiled).describe(fused=True)["forward"]
    assert ("kernel", "kernel") in forward


def test_double_backward_inside_a_compiled_function_equals_eager():
    def f(x):
        (g,) = tg.grad(tg.tanh(tg.sin(x)).sum(), x, create_graph=True)
        return (g * g).sum()

    compiled = _compiled_equals_eager(
        f, [(np.linspace(-2.0, 2.0, 11) + 0.1 * call,) for call in range(3)])
