"""Gradient semantics of the elementwise ops: ties, kinks, power's special cases,
broadcasting, and second derivatives through ``backward(create_graph=True)``."""

import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck

RNG = np.random.default_rng(99)


def t(a, requires_grad=False, dtype=None):
    return tg.tensor(np.asarray(a, dtype=dtype), requires_grad=requires_grad)


def grads(f, *arrays):
    """d sum(f(*xs)) / d xs, as numpy arrays (None for an input that got no gradient)."""
    xs = [t(a, requires_grad=True) for a in arrays]
    out = f(*xs)
    out.backward(tg.ones(out.shape))
    return [None if x.grad is None else x.grad.numpy() for x in xs]


def first_derivative(f):
    """x -> d sum(f(x)) / dx, itself differentiable (so gradcheck of it checks f'')."""
    def df(x):
        with tg.enable_grad():
            leaf = x if x.requires_grad else x.detach().requires_grad_()
            out = f(leaf)
            out.backward(tg.ones(out.shape), create_graph=True)
            g, leaf.grad = leaf.grad, None
        return g
    return df


@pytest.fixture
def no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# ---------------------------------------------------------------------------------------
# maximum / minimum
# ---------------------------------------------------------------------------------------

def test_maximum_splits_the_gradient_evenly_at_ties():
    gx, gy = grads(tg.maximum, [1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(gx, [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(gy, [1.0, 0.5, 0.0])


def test_minimum_splits_the_gradient_evenly_at_ties():
    gx, gy = grads(tg.minimum, [1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(gx, [1.0, 0.5, 0.0])
    np.testing.assert_array_equal(gy, [0.0, 0.5, 1.0])


def test_maximum_of_a_tensor_with_itself_passes_the_whole_gradient():
    (gx,) = grads(lambda x: tg.maximum(x, x) * 3.0, [1.0, -2.0])
    np.testing.assert_array_equal(gx, [3.0, 3.0])


def test_maximum_with_a_scalar_tie_gets_half():
    (gx,) = grads(lambda x: tg.maximum(x, 0.0), [-1.0, 0.0, 1.0])
    np.testing.assert_array_equal(gx, [0.0, 0.5, 1.0])


def test_nan_in_maximum_or_minimum_sends_the_gradient_to_both_inputs():
    for f in (tg.maximum, tg.minimum):
        gx, gy = grads(f, [np.nan, 1.0], [0.0, 2.0])
        np.testing.assert_array_equal(gx[0], 1.0)
        np.testing.assert_array_equal(gy[0], 1.0)


def test_tie_rule_agrees_with_central_differences():
    a = np.array([0.5, -1.0, 2.0])
    x = t(a, requires_grad=True)
    y = t([0.5, 0.0, 2.0], requires_grad=True)
    assert gradcheck(tg.maximum, (x, y))
    assert gradcheck(tg.minimum, (x, y))


def test_broadcast_ties_sum_back_to_the_broadcast_input():
    gx, gy = grads(tg.maximum, [[1.0, 2.0], [3.0, 0.0]], [2.0])
    np.testing.assert_array_equal(gx, [[0.0, 0.5], [1.0, 0.0]])
    np.testing.assert_array_equal(gy, [2.5])


# ---------------------------------------------------------------------------------------
# power
# ---------------------------------------------------------------------------------------

def test_power_gradients_for_base_and_exponent():
    a, b = RNG.uniform(0.5, 2.0, (3, 4)), RNG.uniform(-1.0, 2.0, (4,))
    gx, gy = grads(tg.power, a, b)
    np.testing.assert_allclose(gx, b * a ** (b - 1))
    np.testing.assert_allclose(gy, (a ** b * np.log(a)).sum(axis=0))


def test_power_exponent_gradient_is_zero_at_a_zero_base_with_nonnegative_exponent(no_warnings):
    gx, gy = grads(tg.power, [0.0, 0.0, 0.0, 2.0], [0.0, 1.0, 2.5, 3.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0, 0.0, 8 * np.log(2.0)])
    np.testing.assert_array_equal(gx, [0.0, 1.0, 0.0, 12.0])


def test_power_exponent_gradient_with_a_python_base():
    (gy,) = grads(lambda y: 3.0 ** y, [0.5, 2.0])
    np.testing.assert_allclose(gy, 3.0 ** np.array([0.5, 2.0]) * np.log(3.0))
    (gy,) = grads(lambda y: 0.0 ** y, [0.5, 2.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0])


def test_power_with_a_zero_exponent_has_zero_gradient_everywhere(no_warnings):
    (gx,) = grads(lambda x: x ** 0, [0.0, -1.5, 2.0])
    np.testing.assert_array_equal(gx, [0.0, 0.0, 0.0])
    (gx,) = grads(lambda x: x ** t([0.0, 0.0, 2.0]), [0.0, -1.5, 2.0])
    np.testing.assert_array_equal(gx, [0.0, 0.0, 4.0])


def test_power_skips_the_exponent_gradient_when_the_exponent_wants_none(no_warnings):
    # log of a negative base would warn and give nan if the exponent rule ran
    exponent = t([2.0, 3.0])
    gx, = grads(lambda x: x ** exponent, [-2.0, -1.0])
    np.testing.assert_array_equal(gx, [-4.0, 3.0])
    assert exponent.grad is None


def test_outputs_of_rules_that_do_not_read_ans_can_be_updated_in_place():
    x, y = t([1.0, 2.0], requires_grad=True), t([3.0, 4.0], requires_grad=True)
    outs = [x ** 2, x ** y, x * y, x / y, x - y, tg.maximum(x, y), tg.sin(x), tg.square(x)]
    total = None
    for out in outs:
        out += 1.0
        total = out if total is None else total + out
    total.backward(tg.ones(2))
    assert x.grad is not None and y.grad is not None


def test_outputs_of_rules_that_read_ans_refuse_in_place_updates():
    x = t([1.0, 2.0], requires_grad=True)
    out = tg.exp(x)
    out += 1.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation: the output of 'exp'"):
        out.backward(tg.ones(2))


def test_power_exponent_gradient_of_a_negative_base_is_nan_like_pytorch():
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _, gy = grads(tg.power, [-2.0], [2.0])
    assert np.isnan(gy).all()


# ---------------------------------------------------------------------------------------
# Kinks: relu, abs, sign, clip; and sqrt, divide, where
# ---------------------------------------------------------------------------------------

def test_relu_gradient_is_zero_at_and_below_zero():
    (gx,) = grads(tg.relu, [-2.0, -0.0, 0.0, 1e-300, 3.0])
    np.testing.assert_array_equal(gx, [0.0, 0.0, 0.0, 1.0, 1.0])


def test_abs_gradient_is_the_sign_and_zero_at_zero():
    (gx,) = grads(tg.abs, [-2.0, 0.0, 3.0])
    np.testing.assert_array_equal(gx, [-1.0, 0.0, 1.0])


def test_sign_has_a_zero_gradient_not_none():
    (gx,) = grads(lambda x: tg.sign(x) * 5.0, [-2.0, 0.5])
    np.testing.assert_array_equal(gx, [0.0, 0.0])


def test_clip_gradient_passes_inside_the_bounds_inclusive():
    a = [-2.0, -1.0, 0.0, 1.0, 2.0]
    (gx,) = grads(lambda x: tg.clip(x, -1.0, 1.0), a)
    np.testing.assert_array_equal(gx, [0.0, 1.0, 1.0, 1.0, 0.0])
    (gx,) = grads(lambda x: tg.clip(x, a_max=0.0), a)
    np.testing.assert_array_equal(gx, [1.0, 1.0, 1.0, 0.0, 0.0])
    (gx,) = grads(lambda x: tg.clip(x, a_min=0.0), a)
    np.testing.assert_array_equal(gx, [0.0, 0.0, 1.0, 1.0, 1.0])
    (gx,) = grads(lambda x: tg.clip(x, None, None), a)
    np.testing.assert_array_equal(gx, np.ones(5))


def test_clip_with_array_bounds():
    (gx,) = grads(lambda x: tg.clip(x, np.array([-1.0, 0.5, 0.0]), 1.0), [0.0, 0.0, 3.0])
    np.testing.assert_array_equal(gx, [1.0, 0.0, 0.0])


def test_sqrt_gradient_is_half_over_the_result():
    a = np.array([0.25, 1.0, 9.0])
    (gx,) = grads(tg.sqrt, a)
    np.testing.assert_allclose(gx, 1 / (2 * np.sqrt(a)))


def test_divide_gradients():
    a, b = RNG.standard_normal((3, 4)), RNG.uniform(0.5, 2.0, (3, 1))
    gx, gy = grads(tg.divide, a, b)
    np.testing.assert_allclose(gx, np.broadcast_to(1 / b, (3, 4)))
    np.testing.assert_allclose(gy, (-a / b ** 2).sum(axis=1, keepdims=True))


def test_where_routes_the_gradient_by_the_condition():
    c = np.array([[True, False, True]])
    x = t([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    y = t([10.0, 20.0, 30.0], requires_grad=True)
    for cond in (c, t(c)):
        x.grad = y.grad = None
        tg.where(cond, x, y).backward(tg.ones((2, 3)))
        np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(c, (2, 3)) * 1.0)
        np.testing.assert_array_equal(y.grad.numpy(), [0.0, 2.0, 0.0])


def test_where_gives_a_float_condition_no_gradient():
    cond = t([1.0, 0.0], requires_grad=True)
    x, y = t([1.0, 2.0], requires_grad=True), t([3.0, 4.0], requires_grad=True)
    out = tg.where(cond, x, y)
    out.backward(tg.ones(2))
    assert cond.grad is None
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0])


# ---------------------------------------------------------------------------------------
# Broadcasting
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["subtract", "multiply", "divide", "power", "maximum", "minimum"])
@pytest.mark.parametrize("shapes", [((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((1,), (2, 3))])
def test_broadcast_gradients_come_back_in_each_input_shape(name, shapes):
    a, b = RNG.uniform(0.5, 2.0, shapes[0]), RNG.uniform(0.5, 2.0, shapes[1])
    x, y = t(a, requires_grad=True), t(b, requires_grad=True)
    out = getattr(tg, name)(x, y)
    assert out.shape == np.broadcast_shapes(a.shape, b.shape)
    out.backward(tg.ones(out.shape))
    assert x.grad.shape == a.shape and y.grad.shape == b.shape
    assert gradcheck(getattr(tg, name), (x, y))


def test_subtract_broadcast_gradient_values():
    gx, gy = grads(tg.subtract, np.ones((2, 1, 3)), np.ones((4, 1)))
    np.testing.assert_array_equal(gx, np.full((2, 1, 3), 4.0))
    np.testing.assert_array_equal(gy, np.full((4, 1), -6.0))


def test_python_scalar_operands_get_no_gradient_and_cost_no_rule():
    x = t([1.0, 2.0], requires_grad=True)
    for out in (x * 2.0, 2.0 * x, x - 1.0, 1.0 - x, x / 2.0, 2.0 / x, x ** 2.0, 2.0 ** x,
                tg.maximum(x, 1.5), tg.where(x > 1.5, x, 0.0), tg.where(x > 1.5, 0.0, x)):
        assert [e for e in out.grad_fn.next_functions if e[0] is not None] == [(x, 0)]


# ---------------------------------------------------------------------------------------
# Second derivatives (backward(create_graph=True))
# ---------------------------------------------------------------------------------------

def test_second_derivative_of_sin_is_minus_sin():
    a = np.array([0.3, -1.2, 2.0])
    x = t(a, requires_grad=True)
    tg.sin(x).backward(tg.ones(3), create_graph=True)
    g = x.grad
    assert g.requires_grad
    np.testing.assert_allclose(g.numpy(), np.cos(a))
    x.grad = None
    g.backward(tg.ones(3))
    np.testing.assert_allclose(x.grad.numpy(), -np.sin(a))


def test_second_derivatives_of_exp_tanh_sigmoid_and_power():
    a = np.array([0.3, -1.2, 1.7])
    checks = [
        (tg.exp, np.exp(a)),
        (tg.tanh, -2 * np.tanh(a) * (1 - np.tanh(a) ** 2)),
        (tg.sigmoid, (s := 1 / (1 + np.exp(-a))) * (1 - s) * (1 - 2 * s)),
        (lambda x: x ** 3, 6 * a),
        (lambda x: 1.0 / x, 2 / a ** 3),
        (tg.square, np.full(3, 2.0)),
    ]
    for f, expected in checks:
        x = t(a, requires_grad=True)
        g = first_derivative(f)(x)
        g.backward(tg.ones(3))
        np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


UNARY_TWICE = {
    "exp": tg.exp, "log": tg.log, "sqrt": tg.sqrt, "sin": tg.sin, "cos": tg.cos,
    "tanh": tg.tanh, "sigmoid": tg.sigmoid, "square": tg.square, "negative": tg.negative,
    "abs": tg.abs, "relu": tg.relu, "clip": lambda x: tg.clip(x, 0.6, 1.5),
    "x ** 2.5": lambda x: x ** 2.5, "2.5 ** x": lambda x: 2.5 ** x, "x ** x": lambda x: x ** x,
    "x / (x + 1)": lambda x: x / (x + 1.0), "x * exp(x)": lambda x: x * tg.exp(x),
    "maximum(x, sin x)": lambda x: tg.maximum(x, tg.sin(x) * 2.0),
    "where(x > 1, x ** 3, cos x)": lambda x: tg.where(x > 1.0, x ** 3, tg.cos(x)),
}


@pytest.mark.parametrize("f", UNARY_TWICE.values(), ids=UNARY_TWICE.keys())
def test_second_derivative_matches_finite_differences(f):
    x = t(RNG.uniform(0.5, 2.0, (5,)), requires_grad=True)
    assert gradcheck(first_derivative(f), x)


def test_mixed_second_derivatives_of_binary_ops_are_symmetric():
    a, b = RNG.uniform(0.5, 2.0, (3,)), RNG.uniform(0.5, 2.0, (3,))
    for f in (tg.multiply, tg.divide, tg.power):
        x, y = t(a, requires_grad=True), t(b, requires_grad=True)
        f(x, y).backward(tg.ones(3), create_graph=True)
        gx, gy = x.grad, y.grad
        x.grad = y.grad = None
        gx.backward(tg.ones(3), retain_graph=True)
        d_dy_dfdx = y.grad.numpy()
        x.grad = y.grad = None
        gy.backward(tg.ones(3))
        np.testing.assert_allclose(d_dy_dfdx, x.grad.numpy(), rtol=1e-12)


def test_piecewise_linear_ops_have_constant_first_derivatives():
    a, b = RNG.standard_normal(3), RNG.standard_normal(3)
    for f in (tg.maximum, tg.minimum, tg.subtract, lambda x, y: tg.where(x > 0, x, y)):
        x, y = t(a, requires_grad=True), t(b, requires_grad=True)
        f(x, y).backward(tg.ones(3), create_graph=True)
        assert not x.grad.requires_grad and not y.grad.requires_grad
