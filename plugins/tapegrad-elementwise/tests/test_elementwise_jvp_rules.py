"""Forward-mode (JVP) rules of tapegrad-elementwise: every op with a VJP has one; the
contract kit checks each against finite differences and against its VJP (transposes of
one linear map); and, where the kit's samples are weak, hand tests against central
finite differences of the op itself along one direction: a tangent on one input only
(the other None), broadcasting, ties, the nan and 0 conventions the VJPs document,
keyword and positional parameters.

These tests use only tapegrad and this plugin (no tapegrad-shape: no .sum())."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing

PLUGIN = "tapegrad-elementwise"

# Ops of this plugin with a VJP but, on purpose, no JVP rule (with the reason). Empty.
NO_JVP = {}


def _ops():
    return {name: op for name, op in tg.registry().ops.items() if op.plugin == PLUGIN}


DIFFERENTIABLE = sorted(name for name, op in _ops().items() if op.vjp is not None)


def rule(name):
    return tg.registry().ops[name].jvp


def check_jvp(name, inputs, tangents):
    """The op's tangent in forward mode (tg.jvp's path: the engine calls the rule) against
    central differences along the tangents (None: that input does not move)."""
    return tapegrad.testing.check_jvp(tg.registry().ops[name], inputs, tangents,
                                      rtol=1e-6, atol=1e-8)


def apply_rule(name, inputs, tangents, **params):
    """The op's JVP rule at `inputs`, with numpy tangents (None stays None)."""
    xs = [tg.tensor(x) if isinstance(x, np.ndarray) else x for x in inputs]
    ts = tuple(None if t is None else tg.tensor(t) for t in tangents)
    op = tg.registry().ops[name]
    ans = op(*xs, **params)
    got = rule(name)(ts, ans, *xs, **params)
    assert isinstance(got, tg.Tensor), f"{name}: the rule returned {type(got).__name__}"
    return np.broadcast_to(got.numpy(), ans.shape)


RNG = np.random.default_rng(3)


def normal(*shape):
    return RNG.standard_normal(shape)


def positive(*shape):
    return RNG.uniform(0.5, 2.0, shape)


# ---------------------------------------------------------------------------------------
# Coverage and the contract kit
# ---------------------------------------------------------------------------------------

def test_every_differentiable_op_has_a_jvp_rule():
    missing = sorted(n for n in DIFFERENTIABLE if rule(n) is None and n not in NO_JVP)
    assert missing == []
    assert len(DIFFERENTIABLE) > 60            # the table was really read


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_contract_kit_checks_the_jvp_rule(name, contract_reports):
    checks = contract_reports[name].checks
    if name == "complex":
        # real inputs, a complex result: only the complex checks apply (tapegrad/_complex_kit.py)
        assert "complex128 JVP rule vs finite differences" in checks
        assert "complex JVP rule is the transpose of the VJP rule" in checks
        return
    assert "float64 JVP rule vs finite differences" in checks
    assert "JVP rule is the transpose of the VJP rule" in checks
    assert "float64 JVP rule differentiable (reverse over forward)" in checks


# ---------------------------------------------------------------------------------------
# One tangent at a time (the kit gives every input one), with broadcasting
# ---------------------------------------------------------------------------------------

BINARY = [
    ("subtract", normal, normal), ("multiply", normal, normal), ("divide", normal, positive),
    ("power", positive, normal), ("maximum", normal, normal), ("minimum", normal, normal),
    ("arctan2", positive, normal), ("hypot", normal, normal), ("logaddexp", normal, normal),
    ("fmax", normal, normal), ("remainder", lambda *s: 0.3 + 0.1 * normal(*s),
                                lambda *s: np.full(s, 2.0)),
]


@pytest.mark.parametrize("name,draw_x,draw_y", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("which", [0, 1])
def test_binary_rule_with_one_tangent_matches_finite_differences(name, draw_x, draw_y, which):
    x, y = draw_x(3, 1), draw_y(4)              # broadcast to (3, 4)
    tangents = [normal(3, 1), None] if which == 0 else [None, normal(4)]
    check_jvp(name, [x, y], tangents)


BACKWARD_OPS = ["relu_backward", "tanh_backward", "sigmoid_backward", "sqrt_backward",
                "abs_backward", "square_backward", "sin_backward", "cos_backward"]


@pytest.mark.parametrize("name", BACKWARD_OPS)
@pytest.mark.parametrize("which", [0, 1])
def test_backward_op_rule_with_one_tangent_matches_finite_differences(name, which):
    # (g, second input) in the forward's range: ans of tanh/sigmoid in (0.05, 0.95), of
    # sqrt positive, relu's and abs's away from their kink at 0.
    g = normal(3, 4)
    second = RNG.uniform(0.05, 0.95, (4,)) * RNG.choice([-1.0, 1.0], 4)
    if name in ("sqrt_backward", "sigmoid_backward"):
        second = np.abs(second)
    tangents = [normal(3, 4), None] if which == 0 else [None, normal(4)]
    check_jvp(name, [g, second], tangents)


def test_no_tangent_at_all_gives_zeros_not_an_error():
    x, y = tg.tensor(positive(3)), tg.tensor(positive(3))
    for name in ("multiply", "divide", "power", "maximum", "subtract", "hypot",
                 "tanh_backward", "relu_backward"):
        op = tg.registry().ops[name]
        ans = op(x, y)
        got = rule(name)((None, None), ans, x, y)
        np.testing.assert_array_equal(np.broadcast_to(got.numpy(), ans.shape), 0.0)


def test_rules_do_not_ask_needs_grad():
    # In forward mode a tangent may come on an input that does not require grad (and
    # the kit runs rules on inputs that do): here none do, and the tangents still count.
    x, y = positive(3), positive(3)
    tx, ty = normal(3), normal(3)
    for name in ("multiply", "divide", "power", "maximum", "minimum", "subtract"):
        check_jvp(name, [x, y], [tx, ty])


# ---------------------------------------------------------------------------------------
# The conventions where the derivative does not exist: the same as the VJPs'
# ---------------------------------------------------------------------------------------

def test_relu_tangent_is_zero_at_nan_and_at_zero_as_its_gradient():
    x = np.array([np.nan, 0.0, -0.0, -1.0, 2.0])
    t = np.array([1.0, 1.0, 1.0, 1.0, 3.0])
    got = apply_rule("relu", [x], [t])
    np.testing.assert_array_equal(got, [0.0, 0.0, 0.0, 0.0, 3.0])
    xt = tg.tensor(x, requires_grad=True)
    tg.relu(xt).backward(tg.tensor(t))
    np.testing.assert_array_equal(got, xt.grad.numpy())


def test_maximum_and_minimum_split_the_tangent_at_ties():
    # A central difference across a tie measures (tx + ty) / 2, the rule's value there.
    x = np.array([1.0, 2.0, -0.5])
    y = np.array([1.0, 0.0, -0.5])
    tx, ty = np.array([3.0, 1.0, -2.0]), np.array([1.0, 5.0, 4.0])
    for name in ("maximum", "minimum"):
        got = check_jvp(name, [x, y], [tx, ty])
        assert got[0] == 2.0 and got[2] == 1.0
        np.testing.assert_array_equal(apply_rule(name, [x, y], [tx, ty]), got)   # the rule


def test_maximum_passes_both_tangents_at_nan_as_its_gradient_does():
    x, y = np.array([np.nan, 1.0]), np.array([2.0, np.nan])
    got = apply_rule("maximum", [x, y], [np.array([1.0, 10.0]), np.array([100.0, 1000.0])])
    np.testing.assert_array_equal(got, [101.0, 1010.0])


def test_power_tangent_at_zero_base_and_zero_exponent_is_finite():
    x, y = np.array([0.0, 0.0, 2.0]), np.array([0.0, 2.0, 0.0])
    with np.errstate(all="raise"):               # no 0 * inf or log(0) on the way
        got = apply_rule("power", [x, y], [np.ones(3), np.ones(3)])
    np.testing.assert_array_equal(got, [0.0, 0.0, np.log(2.0)])
    ones = [np.ones(2), None]
    np.testing.assert_array_equal(apply_rule("power", [np.array([0.0, 3.0]), 0], ones), 0.0)
    np.testing.assert_allclose(apply_rule("power", [np.array([0.5, 3.0]), 3], ones), [0.75, 27.0])


def test_abs_and_sign_tangents():
    x = np.array([-2.0, 0.0, 3.0])
    np.testing.assert_array_equal(apply_rule("abs", [x], [np.array([5.0, 5.0, 5.0])]),
                                  [-5.0, 0.0, 5.0])
    np.testing.assert_array_equal(apply_rule("sign", [x], [np.ones(3)]), 0.0)


def test_where_tangent_with_a_scalar_branch_and_one_tangent():
    cond = np.array([[True], [False]])
    x, y = normal(3), 0.5
    tx = normal(3)
    got = apply_rule("where", [cond, x, y], [None, tx, None])
    np.testing.assert_array_equal(got, np.where(cond, tx, 0.0))
    got = apply_rule("where", [cond, x, normal(2, 3)], [None, None, np.ones((2, 3))])
    np.testing.assert_array_equal(got, np.where(cond, 0.0, np.ones((2, 3))))


def test_where_tangent_keeps_float32():
    cond = tg.tensor(np.array([True, False]))
    x = tg.tensor(np.array([1.0, 2.0], np.float32))
    t = tg.tensor(np.array([3.0, 4.0], np.float32))
    out = rule("where")((None, t, None), tg.where(cond, x, 0.0), cond, x, 0.0)
    assert out.dtype == np.float32


@pytest.mark.parametrize("bounds", [dict(a_min=-0.5, a_max=0.5), dict(a_max=0.3),
                                    dict(a_min=-1.0), dict()])
def test_clip_tangent_passes_inside_the_bounds_included(bounds):
    x = np.array([-2.0, -1.0, -0.5, 0.0, 0.3, 0.5, 2.0])
    t = np.arange(1.0, 8.0)
    lo, hi = bounds.get("a_min", -np.inf), bounds.get("a_max", np.inf)
    got = apply_rule("clip", [x], [t], **bounds)
    np.testing.assert_array_equal(got, np.where((x >= lo) & (x <= hi), t, 0.0))


def test_clip_rule_takes_positional_bounds():
    x, t = np.array([-2.0, 0.1, 2.0]), np.array([1.0, 2.0, 3.0])
    xs, ts = tg.tensor(x), tg.tensor(t)
    ans = tg.clip(xs, -1.0, 1.0)
    got = rule("clip")((ts,), ans, xs, -1.0, 1.0)
    np.testing.assert_array_equal(got.numpy(), [0.0, 2.0, 0.0])


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "sqrt", "sin", "cos", "square", "exp",
                                  "log", "relu", "abs"])
def test_activation_tangent_is_the_same_bits_as_its_gradient(name):
    # The JVP of a diagonal op runs the VJP's code (its backward op where there is a
    # kernel), so the two modes agree exactly, not only to rounding.
    x = positive(3, 4)
    t = normal(3, 4)
    got = apply_rule(name, [x], [t])
    xt = tg.tensor(x, requires_grad=True)
    getattr(tg, name)(xt).backward(tg.tensor(t))
    np.testing.assert_array_equal(got, xt.grad.numpy())


# forward op, the NumPy derivative f'(x), whether its backward op reads ans (else x), and
# a domain away from kinks (relu's and abs's derivatives are piecewise constant there).
FORWARD_OVER_REVERSE = {
    "tanh_backward": ("tanh", lambda x: 1 - np.tanh(x) ** 2, True, normal),
    "sigmoid_backward": ("sigmoid", lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2, True, normal),
    "sqrt_backward": ("sqrt", lambda x: 0.5 / np.sqrt(x), True, positive),
    "relu_backward": ("relu", lambda x: (x > 0).astype(float), True, positive),
    "abs_backward": ("abs", np.sign, False, positive),
    "square_backward": ("square", lambda x: 2 * x, False, normal),
    "sin_backward": ("sin", np.cos, False, normal),
    "cos_backward": ("cos", lambda x: -np.sin(x), False, normal),
}


@pytest.mark.parametrize("name", sorted(FORWARD_OVER_REVERSE))
def test_forward_over_reverse_hessian_vector_product_through_the_backward_op(name):
    # The Hessian-vector product of sum(w * f(x)) the way forward over reverse computes
    # it: the gradient is backward_op(w, ans or x); its tangent along v (ans's tangent
    # from f's own JVP rule) is H v. Against central differences of the NumPy gradient
    # w * f'(x).
    forward, fprime, reads_ans, draw = FORWARD_OVER_REVERSE[name]
    x, w, v = draw(6), normal(6), normal(6)
    xs = tg.tensor(x)
    ans = getattr(tg, forward)(xs)
    second = ans if reads_ans else xs
    tsecond = rule(forward)((tg.tensor(v),), ans, xs) if reads_ans else tg.tensor(v)
    got = rule(name)((None, tsecond), tg.registry().ops[name](tg.tensor(w), second),
                     tg.tensor(w), second)
    eps = 1e-6
    want = (w * fprime(x + eps * v) - w * fprime(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(np.broadcast_to(got.numpy(), (6,)), want, rtol=1e-6, atol=1e-9)
