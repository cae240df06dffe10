"""The elementwise plugin: registration, values against NumPy, operators, dtypes, errors.

Gradient semantics (ties, kinks, power, second derivatives) are in
test_elementwise_gradients.py.
"""

import subprocess
import sys
import warnings
from importlib import metadata

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_elementwise
from tapegrad_elementwise import ops

RNG = np.random.default_rng(1234)
CORE_OPS = ("add", "sum_to_shape", "broadcast_to", "astype", "zeros_like", "ones_like")
NON_DIFFERENTIABLE = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
                      "logical_and", "logical_or", "logical_not", "isnan", "isinf", "isfinite",
                      "signbit")


def t(a, requires_grad=False, dtype=None):
    return tg.tensor(np.asarray(a, dtype=dtype), requires_grad=requires_grad)


# ---------------------------------------------------------------------------------------
# Registration and the op contract
# ---------------------------------------------------------------------------------------

def test_contract_kit_passes_for_every_op(contract_reports):
    reports = list(contract_reports.values())
    assert {r.name for r in reports} == set(tapegrad_elementwise.OPS + tapegrad_elementwise.FUNCTIONS)


def test_every_op_is_registered_by_this_plugin_and_core_ops_are_not_redefined():
    table = tg.registry().ops
    plugin = table["exp"].plugin
    for name in tapegrad_elementwise.OPS:
        assert table[name].plugin == plugin, name
        assert getattr(tg, name) is table[name]
        assert table[name].doc, f"{name} has no doc="
    for name in CORE_OPS:
        assert table[name].plugin == "tapegrad"


def test_non_differentiable_ops_have_no_rule():
    table = tg.registry().ops
    for name in NON_DIFFERENTIABLE:
        assert table[name].vjp is None
        assert not table[name].is_differentiable(0)


def test_entry_point_resolves_to_the_ops_module():
    eps = [ep for ep in metadata.entry_points(group="tapegrad") if ep.name == "elementwise"]
    if not eps:
        pytest.skip("tapegrad-elementwise is not installed (no entry point to resolve)")
    (ep,) = eps
    assert ep.value == "tapegrad_elementwise.ops"
    assert ep.load() is ops
    assert "tapegrad-elementwise" in tg.registry().plugins


def test_importing_the_ops_module_first_still_registers_every_op():
    if not any(ep.name == "elementwise" for ep in metadata.entry_points(group="tapegrad")):
        pytest.skip("tapegrad-elementwise is not installed (tapegrad would not load it)")
    code = ("import tapegrad_elementwise.ops, tapegrad as tg, tapegrad_elementwise as te; "
            "assert not tg.registry().failed, tg.registry().failed; "
            "missing = set(te.OPS) - set(tg.registry().ops); assert not missing, missing")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_methods_are_bound_except_where():
    x = t([0.5, -2.0])
    np.testing.assert_allclose(x.exp().numpy(), np.exp([0.5, -2.0]))
    np.testing.assert_allclose(x.clip(-1.0, 1.0).numpy(), [0.5, -1.0])
    np.testing.assert_allclose(x.maximum(0.0).numpy(), [0.5, 0.0])
    assert not hasattr(x, "where")


# ---------------------------------------------------------------------------------------
# Forward values against NumPy
# ---------------------------------------------------------------------------------------

def _pos(*shape):
    return RNG.uniform(0.5, 2.0, shape)


def _any(*shape):
    return RNG.standard_normal(shape)


UNARY = [
    ("negative", np.negative, _any), ("exp", np.exp, _any), ("log", np.log, _pos),
    ("sqrt", np.sqrt, _pos), ("abs", np.abs, _any), ("tanh", np.tanh, _any),
    ("sin", np.sin, _any), ("cos", np.cos, _any), ("sign", np.sign, _any),
    ("square", np.square, _any), ("relu", lambda a: np.maximum(a, 0), _any),
    ("sigmoid", lambda a: 1 / (1 + np.exp(-a)), _any), ("logical_not", np.logical_not, _any),
]
BINARY = [
    ("subtract", np.subtract, _any), ("multiply", np.multiply, _any),
    ("divide", np.divide, _pos), ("power", np.power, _pos), ("maximum", np.maximum, _any),
    ("minimum", np.minimum, _any), ("equal", np.equal, lambda *s: RNG.integers(0, 2, s) * 1.0),
    ("not_equal", np.not_equal, _any), ("less", np.less, _any),
    ("less_equal", np.less_equal, _any), ("greater", np.greater, _any),
    ("greater_equal", np.greater_equal, _any), ("logical_and", np.logical_and, _any),
    ("logical_or", np.logical_or, _any),
]


@pytest.mark.parametrize("name, ref, draw", UNARY, ids=[u[0] for u in UNARY])
def test_unary_values_match_numpy(name, ref, draw):
    a = draw(3, 4)
    out = getattr(tg, name)(t(a))
    assert isinstance(out, tg.Tensor)
    np.testing.assert_allclose(out.numpy(), ref(a), rtol=1e-12)
    assert out.dtype == ref(a).dtype


@pytest.mark.parametrize("name, ref, draw", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1))])
def test_binary_values_match_numpy_with_broadcasting(name, ref, draw, shapes):
    a, b = draw(*shapes[0]), draw(*shapes[1])
    out = getattr(tg, name)(t(a), t(b))
    np.testing.assert_allclose(out.numpy(), ref(a, b), rtol=1e-12)
    assert out.shape == ref(a, b).shape and out.dtype == ref(a, b).dtype


@pytest.mark.parametrize("name, ref, draw", BINARY, ids=[b[0] for b in BINARY])
def test_binary_ops_take_python_scalars_on_either_side(name, ref, draw):
    a = draw(5)
    np.testing.assert_allclose(getattr(tg, name)(t(a), 1.5).numpy(), ref(a, 1.5))
    np.testing.assert_allclose(getattr(tg, name)(1.5, t(a)).numpy(), ref(1.5, a))


def test_clip_matches_numpy():
    a = _any(4, 5) * 2
    np.testing.assert_allclose(tg.clip(t(a), -0.5, 0.7).numpy(), np.clip(a, -0.5, 0.7))
    np.testing.assert_allclose(tg.clip(t(a), a_max=0.2).numpy(), np.clip(a, None, 0.2))
    np.testing.assert_allclose(tg.clip(t(a), a_min=0.1).numpy(), np.clip(a, 0.1, None))
    bounds = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(tg.clip(t(a), bounds, 1.5).numpy(), np.clip(a, bounds, 1.5))


def test_where_matches_numpy_for_bool_tensor_array_and_list_conditions():
    c = RNG.random((3, 4)) < 0.5
    a, b = _any(3, 4), _any(4)
    expected = np.where(c, a, b)
    for cond in (c, t(c), c.tolist()):
        np.testing.assert_array_equal(tg.where(cond, t(a), t(b)).numpy(), expected)
    np.testing.assert_array_equal(tg.where(t(c), t(a), 0.0).numpy(), np.where(c, a, 0.0))


def test_sigmoid_is_stable_for_large_inputs():
    a = np.array([-1000.0, -50.0, -1.0, 0.0, 1.0, 50.0, 1000.0])
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        x = t(a, requires_grad=True)
        out = tg.sigmoid(x)
        out.backward(tg.ones(a.shape))
    s = out.numpy()
    assert s[0] == 0.0 and s[-1] == 1.0 and s[3] == 0.5
    np.testing.assert_allclose(s[1:-1], 1 / (1 + np.exp(-a[1:-1])), rtol=1e-14)
    assert np.all(np.isfinite(x.grad.numpy()))
    big32 = tg.sigmoid(t([-200.0, 200.0], dtype=np.float32))
    assert big32.dtype == np.float32 and big32.tolist() == [0.0, 1.0]


def test_nan_propagates_through_maximum_and_minimum_like_numpy():
    a, b = np.array([np.nan, 1.0]), np.array([0.0, np.nan])
    np.testing.assert_array_equal(tg.maximum(t(a), t(b)).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal(tg.minimum(t(a), t(b)).numpy(), np.minimum(a, b))


# ---------------------------------------------------------------------------------------
# Operators
# ---------------------------------------------------------------------------------------

def test_arithmetic_operators_dispatch_to_the_ops():
    a, b = _pos(3, 4), _pos(4)
    x, y = t(a, requires_grad=True), t(b, requires_grad=True)
    cases = [
        (x - y, a - b, "subtract"), (2.0 - x, 2.0 - a, "subtract"), (x * y, a * b, "multiply"),
        (3 * x, 3 * a, "multiply"), (x / y, a / b, "divide"), (1.0 / x, 1.0 / a, "divide"),
        (x ** 2, a ** 2, "power"), (2 ** x, 2 ** a, "power"), (x ** y, a ** b, "power"),
        (-x, -a, "negative"), (abs(-x), a, "abs"),
    ]
    for out, expected, op in cases:
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)
        assert out.requires_grad
        assert out.grad_fn.name == op


def test_reflected_operator_gradients():
    a = _pos(3)
    x = t(a, requires_grad=True)
    (2.0 - x).backward(tg.ones(3))
    np.testing.assert_allclose(x.grad.numpy(), -np.ones(3))
    x.grad = None
    (2 ** x).backward(tg.ones(3))
    np.testing.assert_allclose(x.grad.numpy(), 2 ** a * np.log(2))
    x.grad = None
    (1.0 / x).backward(tg.ones(3))
    np.testing.assert_allclose(x.grad.numpy(), -1 / a ** 2)
    x.grad = None
    (x ** 2).backward(tg.ones(3))
    np.testing.assert_allclose(x.grad.numpy(), 2 * a)


@pytest.mark.parametrize("op, ref", [
    (lambda x, y: x < y, np.less), (lambda x, y: x <= y, np.less_equal),
    (lambda x, y: x > y, np.greater), (lambda x, y: x >= y, np.greater_equal),
    (lambda x, y: x == y, np.equal), (lambda x, y: x != y, np.not_equal),
])
def test_comparison_operators_return_bool_tensors_without_grad(op, ref):
    a, b = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0])
    x, y = t(a, requires_grad=True), t(b, requires_grad=True)
    for out, expected in ((op(x, y), ref(a, b)), (op(x, 2.0), ref(a, 2.0)),
                          (op(2.0, x), ref(2.0, a))):
        assert isinstance(out, tg.Tensor)
        assert out.dtype == np.bool_
        assert not out.requires_grad and out.grad_fn is None
        np.testing.assert_array_equal(out.numpy(), expected)


def test_comparisons_cannot_be_backpropagated():
    x = t([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        (x < 1.5).backward(tg.ones(2, dtype=bool))


def test_logical_ops_on_comparisons_build_masks():
    x = t([-2.0, 0.5, 3.0], requires_grad=True)
    inside = tg.logical_and(x > -1.0, x < 1.0)
    assert inside.tolist() == [False, True, False] and not inside.requires_grad
    assert tg.logical_or(x < -1.0, x > 1.0).tolist() == [True, False, True]
    assert tg.logical_not(inside).tolist() == [True, False, True]


# ---------------------------------------------------------------------------------------
# Dtypes
# ---------------------------------------------------------------------------------------

FLOAT32_WITH_SCALARS = [
    ("x * 2.5", lambda x: x * 2.5), ("2.5 * x", lambda x: 2.5 * x),
    ("x - 1.5", lambda x: x - 1.5), ("2.0 - x", lambda x: 2.0 - x),
    ("x / 3.0", lambda x: x / 3.0), ("1.0 / x", lambda x: 1.0 / x),
    ("x ** 2", lambda x: x ** 2), ("x ** 0.5", lambda x: x ** 0.5), ("2 ** x", lambda x: 2 ** x),
    ("maximum(x, 0.0)", lambda x: tg.maximum(x, 0.0)),
    ("minimum(1.0, x)", lambda x: tg.minimum(1.0, x)),
    ("clip(x, -0.5, 0.5)", lambda x: tg.clip(x, -0.5, 0.5)),
    ("where(c, x, 0.0)", lambda x: tg.where(x > 1.0, x, 0.0)),
    ("where(c, 1.0, x)", lambda x: tg.where(x > 1.0, 1.0, x)),
    ("sigmoid", tg.sigmoid), ("relu", tg.relu), ("sqrt", tg.sqrt), ("log", tg.log),
    ("exp", tg.exp), ("tanh", tg.tanh), ("abs", tg.abs), ("sign", tg.sign),
    ("square", tg.square), ("sin", tg.sin), ("cos", tg.cos), ("negative", tg.negative),
]


@pytest.mark.parametrize("expr, f", FLOAT32_WITH_SCALARS, ids=[c[0] for c in FLOAT32_WITH_SCALARS])
def test_float32_stays_float32_with_python_scalars(expr, f):
    x = t(_pos(3, 4), requires_grad=True, dtype=np.float32)
    out = f(x)
    assert out.dtype == np.float32, expr
    out.backward(tg.ones(out.shape, dtype=np.float32))
    assert x.grad.dtype == np.float32


def test_second_derivative_stays_float32():
    x = t(_pos(4), requires_grad=True, dtype=np.float32)
    y = tg.tanh(x) * x ** 3
    y.backward(tg.ones(4, dtype=np.float32), create_graph=True)
    g = x.grad
    assert g.dtype == np.float32 and g.requires_grad
    x.grad = None
    g.backward(tg.ones(4, dtype=np.float32))
    assert x.grad.dtype == np.float32


# The rules themselves keep g's dtype (the engine's final cast to the input's dtype would
# otherwise hide a float64 mask doubling the work and memory of a float32 backward).
RULES_KEEP_G_DTYPE = [
    ("relu", lambda x: (x,)), ("clip", lambda x: (x, -0.5, 0.5)), ("sigmoid", lambda x: (x,)),
    ("tanh", lambda x: (x,)), ("sqrt", lambda x: (x,)), ("abs", lambda x: (x,)),
    ("sign", lambda x: (x,)), ("maximum", lambda x: (x, 1.0)), ("minimum", lambda x: (x, x)),
    ("where", lambda x: (x > 1.0, x, 0.0)), ("power", lambda x: (x, 2.0)),
    ("power", lambda x: (2.0, x)), ("power", lambda x: (x, x)), ("divide", lambda x: (1.0, x)),
    ("multiply", lambda x: (x, 2.0)), ("subtract", lambda x: (x, x)), ("square", lambda x: (x,)),
]


@pytest.mark.parametrize("name, args", RULES_KEEP_G_DTYPE, ids=[r[0] for r in RULES_KEEP_G_DTYPE])
def test_gradient_rules_keep_the_dtype_of_g(name, args):
    op = tg.registry().ops[name]
    x = t(_pos(3, 4), requires_grad=True, dtype=np.float32)
    inputs = args(x)
    params = {}
    if name == "clip":
        inputs, params = inputs[:1], {"a_min": inputs[1], "a_max": inputs[2]}
    ans = op(*inputs, **params)
    g = tg.ones(ans.shape, dtype=np.float32)
    grads = op.vjp(g, ans, *inputs, **params)
    assert any(gi is not None for gi in grads)
    for gi in grads:
        if gi is not None:
            assert gi.dtype == np.float32, (name, gi.dtype)


def test_mixed_dtypes_follow_numpy_promotion():
    a32 = t(_pos(3), requires_grad=True, dtype=np.float32)
    b64 = t(_pos(3), requires_grad=True)
    out = a32 * b64
    assert out.dtype == np.result_type(np.float32, np.float64) == np.float64
    out.backward(tg.ones(3))
    assert a32.grad.dtype == np.float32 and b64.grad.dtype == np.float64
    np.testing.assert_allclose(a32.grad.numpy(), b64.numpy(), rtol=1e-6)
    i = t(np.array([1, 2, 3], dtype=np.int32))
    assert (i * a32).dtype == np.result_type(np.int32, np.float32)
    assert (i - 1).dtype == np.int32 and (i / 2).dtype == np.float64
    assert tg.exp(i).dtype == np.exp(np.array([1], np.int32)).dtype
    assert tg.maximum(i, 0).dtype == np.int32


def test_numpy_scalar_operands_follow_numpy_rules():
    x = t(_pos(3), dtype=np.float32)
    assert (x * np.float32(2)).dtype == (np.ones(3, np.float32) * np.float32(2)).dtype
    assert (x * np.float64(2)).dtype == (np.ones(3, np.float32) * np.float64(2)).dtype


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["subtract", "multiply", "divide", "power", "maximum",
                                  "minimum", "less", "equal", "logical_and"])
def test_shape_mismatch_names_the_op_and_both_shapes(name):
    with pytest.raises(ValueError) as info:
        getattr(tg, name)(t(_pos(3, 4)), t(_pos(5)))
    msg = str(info.value)
    assert msg.startswith(name + ":")
    assert "(3, 4)" in msg and "(5,)" in msg


def test_shape_mismatch_in_operators_and_where():
    with pytest.raises(ValueError, match=r"subtract:.*\(2, 3\).*\(4,\)"):
        t(_pos(2, 3)) - t(_pos(4))
    with pytest.raises(ValueError, match=r"where:.*\(2, 3\).*\(3,\).*\(4,\)"):
        tg.where(np.ones((2, 3), bool), t(_pos(3)), t(_pos(4)))


def test_clear_errors_for_bad_inputs():
    with pytest.raises(ValueError, match="power:.*negative integer powers"):
        t(np.array([2, 3])) ** -1
    with pytest.raises(TypeError, match="negative"):
        -t(np.array([True, False]))
    with pytest.raises(TypeError, match="multiply: input 1 must be a tensor, array or number"):
        tg.multiply(t([1.0]), "two")
    with pytest.raises(TypeError, match="exp"):
        tg.exp(t([1.0]), 2, 3)
    with pytest.raises(TypeError, match="where"):
        tg.where(t([True]), t([1.0]))


def test_clip_takes_tensor_bounds_that_need_no_grad():
    # Used to recurse without end (np.clip on a Tensor bound dispatched back to tg.clip).
    a = _any(4, 5) * 2
    lo, hi = np.linspace(-1, 0, 5), 0.5
    x = tg.tensor(a, requires_grad=True)
    np.testing.assert_array_equal(tg.clip(x, a_min=tg.tensor(lo)).numpy(), np.clip(a, lo, None))
    np.testing.assert_array_equal(x.clip(tg.tensor(lo), tg.tensor(hi)).numpy(), np.clip(a, lo, hi))
    np.testing.assert_array_equal(np.clip(x, tg.tensor(lo), hi).numpy(), np.clip(a, lo, hi))
    x.grad = None
    tg.clip(x, tg.tensor(lo), hi).backward(tg.ones(a.shape))    # sum() is tapegrad-shape's
    np.testing.assert_array_equal(x.grad.numpy(), ((a >= lo) & (a <= hi)).astype(float))
    assert tg.gradcheck(lambda v: tg.clip(v, tg.tensor(lo), hi), (tg.tensor(a, requires_grad=True),))


@pytest.mark.parametrize("call", [
    lambda x, b: tg.clip(x, a_min=b), lambda x, b: x.clip(None, b), lambda x, b: np.clip(x, b, 2.0)],
    ids=["tg.clip", "method", "np.clip"])
def test_clip_refuses_a_tensor_bound_that_requires_grad(call):
    x = tg.tensor([0.0, 1.0, 2.0], requires_grad=True)
    b = tg.tensor([0.5, 0.5, 0.5], requires_grad=True)
    with pytest.raises(TypeError, match="clip: keyword argument 'a_m..' is a tensor that requires grad"):
        call(x, b)
    with tg.no_grad():
        np.testing.assert_array_equal(call(x, b).numpy(), call(x.numpy(), b.numpy()))


def test_a_complex_result_of_an_input_that_requires_grad_is_differentiated():
    # It used to cut the graph silently (x + abs(x * (1+1j)) had gradient 1 instead of
    # 2.414), then raised; with complex ops (issue 18) it is differentiated.
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x + tg.abs(x * (1 + 1j))).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 1 + np.sqrt(2)))
    assert x.grad.dtype == np.float64
