"""tg.scipy.special: values and dtypes against scipy.special, gradients against SciPy's
own derivative functions and closed forms, the conventions at the edges, the errors."""

import math

import numpy as np
import pytest
import scipy.special as sp
import tapegrad as tg

S = tg.scipy.special


def grad(fn, *xs, which=0):
    ts = [tg.tensor(np.asarray(x, dtype=float), requires_grad=True) for x in xs]
    fn(*ts).sum().backward()
    return ts[which].grad.numpy()


GRID = np.array([-30.0, -8.0, -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.5, 7.0, 30.0])
POS = np.array([1e-3, 0.1, 0.5, 1.0, 2.5, 7.0, 30.0])
PROB = np.array([0.0, 1e-6, 0.1, 0.5, 0.9, 1 - 1e-6, 1.0])
UNARY_DOMAIN = {"gammaln": POS, "digamma": POS, "gamma": POS, "erfinv": 2 * PROB - 1,
                "erfcinv": 2 * PROB, "logit": PROB, "ndtri": PROB, "entr": GRID}


@pytest.mark.parametrize("name", ["gammaln", "digamma", "gamma", "erf", "erfc", "erfinv",
                                  "erfcinv", "expit", "logit", "ndtr", "log_ndtr", "ndtri",
                                  "i0", "i1", "i0e", "i1e", "entr"])
def test_unary_values_and_dtypes_are_scipys(name):
    x = UNARY_DOMAIN.get(name, GRID)
    with np.errstate(all="ignore"):
        want = getattr(sp, name)(x)
        got = getattr(S, name)(tg.tensor(x)).numpy()
        np.testing.assert_array_equal(got, want)
        x32 = x.astype(np.float32)
        got32 = getattr(S, name)(tg.tensor(x32))
        assert got32.dtype == np.float32
        np.testing.assert_array_equal(got32.numpy(), getattr(sp, name)(x32))


@pytest.mark.parametrize("name", ["beta", "betaln", "xlogy", "xlog1py", "rel_entr", "kl_div"])
def test_binary_values_broadcast_as_scipy(name):
    x = np.array([[0.0], [0.5], [2.0]])
    y = np.array([0.0, 0.3, 1.0, 4.0])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(getattr(S, name)(tg.tensor(x), tg.tensor(y)).numpy(),
                                      getattr(sp, name)(x, y))
    out = getattr(S, name)(tg.tensor(np.float32([0.5, 2.0])), 1.5)
    assert out.dtype == np.float32        # a Python number does not promote (NumPy's rule)


@pytest.mark.parametrize("name,n", [("polygamma", np.array([0, 1, 3])), ("jn", np.array([-1, 0, 2])),
                                    ("yn", np.array([0, 1, 4])), ("iv", np.array([-0.5, 0.0, 2.5]))])
def test_order_functions_match_scipy_and_keep_float32(name, n):
    x = np.array([[0.5], [1.5], [4.0]])
    np.testing.assert_array_equal(getattr(S, name)(n, tg.tensor(x)).numpy(),
                                  getattr(sp, name)(n, x))
    out = getattr(S, name)(n, tg.tensor(x.astype(np.float32)))
    assert out.dtype == np.float32        # the order never decides the dtype
    np.testing.assert_allclose(out.numpy(), getattr(sp, name)(n, x), rtol=1e-5)


# ---------------------------------------------------------------------------------------
# Gradients against SciPy's derivative functions (independent references)
# ---------------------------------------------------------------------------------------

X = np.array([0.3, 1.0, 2.7, 6.0])


def test_gamma_family_derivatives():
    np.testing.assert_allclose(grad(S.gammaln, X), sp.digamma(X), rtol=1e-13)
    np.testing.assert_allclose(grad(S.digamma, X), sp.polygamma(1, X), rtol=1e-13)
    np.testing.assert_allclose(grad(lambda x: S.polygamma(2, x), X), sp.polygamma(3, X),
                               rtol=1e-13)
    np.testing.assert_allclose(grad(S.gamma, X), sp.gamma(X) * sp.digamma(X), rtol=1e-13)


def test_bessel_derivatives_match_scipys_ivp_jvp_yvp():
    x = np.array([0.4, 1.3, 3.0, 8.0])
    for v in (0.0, 1.5, -0.5, 3.0):
        np.testing.assert_allclose(grad(lambda t: S.iv(v, t), x), sp.ivp(v, x), rtol=1e-12)
    for n in (0, 1, 4):
        np.testing.assert_allclose(grad(lambda t: S.jn(n, t), x), sp.jvp(n, x), rtol=1e-12)
        np.testing.assert_allclose(grad(lambda t: S.yn(n, t), x), sp.yvp(n, x), rtol=1e-12)
    np.testing.assert_allclose(grad(S.i0, x), sp.ivp(0, x), rtol=1e-12)
    np.testing.assert_allclose(grad(S.i1, x), sp.ivp(1, x), rtol=1e-12)
    for sign in (1, -1):
        xs = sign * x
        np.testing.assert_allclose(grad(S.i0e, xs), sp.ivp(0, xs) * np.exp(-x)
                                   - np.sign(xs) * sp.i0e(xs), rtol=1e-12)
        np.testing.assert_allclose(grad(S.i1e, xs), sp.ivp(1, xs) * np.exp(-x)
                                   - np.sign(xs) * sp.i1e(xs), rtol=1e-12)


def test_bessel_limits_at_zero():
    assert grad(S.i1, [0.0])[0] == 0.5                   # i1'(0) = 1/2
    assert grad(S.i1e, [0.0])[0] == 0.5
    assert grad(S.i0e, [0.0])[0] == 0.0                  # the kink of |x|: sign(0) = 0
    x = tg.tensor([0.0], requires_grad=True)
    S.i0(x).sum().backward(create_graph=True)            # i0''(0) = i1'(0) = 1/2
    g, x.grad = x.grad, None
    g.sum().backward()
    assert x.grad.item() == 0.5


def test_error_function_derivatives():
    x = np.array([-2.0, -0.1, 0.0, 0.7, 3.0])
    phi = np.exp(-x * x / 2) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(grad(S.erf, x), 2 / np.sqrt(np.pi) * np.exp(-x * x), rtol=1e-14)
    np.testing.assert_allclose(grad(S.erfc, x), -2 / np.sqrt(np.pi) * np.exp(-x * x), rtol=1e-14)
    np.testing.assert_allclose(grad(S.ndtr, x), phi, rtol=1e-14)
    np.testing.assert_allclose(grad(S.log_ndtr, x), phi / sp.ndtr(x), rtol=1e-12)
    p = np.array([0.01, 0.3, 0.5, 0.95])
    np.testing.assert_allclose(grad(S.ndtri, p), np.sqrt(2 * np.pi) * np.exp(sp.ndtri(p) ** 2 / 2),
                               rtol=1e-12)
    u = 2 * p - 1
    np.testing.assert_allclose(grad(S.erfinv, u), np.sqrt(np.pi) / 2 * np.exp(sp.erfinv(u) ** 2),
                               rtol=1e-12)


def test_log_ndtr_gradient_is_finite_far_in_the_left_tail():
    g = grad(S.log_ndtr, [-40.0, -300.0])
    # d/dx log Phi(x) ~ -x for x -> -inf (the inverse Mills ratio).
    np.testing.assert_allclose(g, [40.02498, 300.00333], rtol=1e-5)


def test_expit_and_logit_derivatives():
    x = np.array([-40.0, -1.0, 0.0, 2.0, 40.0])
    np.testing.assert_allclose(grad(S.expit, x), sp.expit(x) * sp.expit(-x), rtol=1e-14)
    p = np.array([0.1, 0.5, 0.8])
    np.testing.assert_allclose(grad(S.logit, p), 1 / (p * (1 - p)), rtol=1e-14)


# ---------------------------------------------------------------------------------------
# xlogy & co.: PyTorch's conventions at x == 0
# ---------------------------------------------------------------------------------------

def test_xlogy_gradients_at_x_zero_follow_pytorch():
    x, y = [0.0, 0.0, 0.0, 2.0], [0.0, 3.0, -1.0, 3.0]
    np.testing.assert_array_equal(S.xlogy(tg.tensor(x), tg.tensor(y)).numpy(),
                                  sp.xlogy(x, y))
    gx = grad(S.xlogy, x, y, which=0)
    gy = grad(S.xlogy, x, y, which=1)
    np.testing.assert_allclose(gx, [0.0, math.log(3.0), 0.0, math.log(3.0)])
    np.testing.assert_allclose(gy, [0.0, 0.0, 0.0, 2 / 3])


def test_xlog1py_gradients_at_x_zero_follow_pytorch():
    x, y = [0.0, 0.0, 2.0], [-1.0, 2.0, 2.0]
    np.testing.assert_allclose(grad(S.xlog1py, x, y, which=0), [0.0, math.log(3.0), math.log(3.0)])
    np.testing.assert_allclose(grad(S.xlog1py, x, y, which=1), [0.0, 0.0, 2 / 3])


def test_entropy_gradients():
    x, y = np.array([0.5, 1.0, 2.0]), np.array([1.5, 1.0, 0.5])
    np.testing.assert_allclose(grad(S.entr, x), -np.log(x) - 1)
    with np.errstate(divide="ignore"):
        assert grad(S.entr, [0.0])[0] == np.inf           # as torch.special.entr
    np.testing.assert_allclose(grad(S.rel_entr, x, y), np.log(x / y) + 1)
    np.testing.assert_allclose(grad(S.rel_entr, x, y, which=1), -x / y)
    np.testing.assert_allclose(grad(S.kl_div, x, y), np.log(x / y))
    np.testing.assert_allclose(grad(S.kl_div, x, y, which=1), 1 - x / y)
    assert grad(S.kl_div, [0.0], [2.0], which=1)[0] == 1.0
    assert grad(S.kl_div, [0.0], [2.0])[0] == -np.inf     # the one-sided limit


# ---------------------------------------------------------------------------------------
# logsumexp, softmax, log_softmax: SciPy's signatures
# ---------------------------------------------------------------------------------------

A = np.array([[1.0, -2.0, 0.5], [1000.0, 1000.0, -np.inf]])


def test_softmax_and_log_softmax_default_to_all_entries_like_scipy():
    a = A[:1]
    np.testing.assert_allclose(S.softmax(tg.tensor(np.tile(a, (2, 1)))).numpy(),
                               sp.softmax(np.tile(a, (2, 1))), rtol=1e-15)
    assert S.softmax(tg.tensor(np.tile(a, (2, 1)))).numpy().sum() == pytest.approx(1.0)
    for axis in (0, 1, -1, (0, 1)):
        np.testing.assert_allclose(S.softmax(tg.tensor(A), axis=axis).numpy(),
                                   sp.softmax(A, axis=axis), rtol=1e-15)
        np.testing.assert_allclose(S.log_softmax(tg.tensor(A), axis=axis).numpy(),
                                   sp.log_softmax(A, axis=axis), rtol=1e-15)


def test_logsumexp_matches_scipy_with_axis_b_and_keepdims():
    b = np.array([0.5, 2.0, 1.0])
    cases = [{}, {"axis": 1}, {"axis": 0, "keepdims": True}, {"axis": (0, 1)}, {"axis": -1}]
    for kw in cases:
        np.testing.assert_allclose(S.logsumexp(tg.tensor(A), **kw).numpy(),
                                   sp.logsumexp(A, **kw), rtol=1e-15)
        np.testing.assert_allclose(S.logsumexp(tg.tensor(A), b=tg.tensor(b), **kw).numpy(),
                                   sp.logsumexp(A, b=b, **kw), rtol=1e-15)
    assert S.logsumexp(tg.tensor(np.float32([1, 2]))).dtype == np.float32


def test_logsumexp_gradients_in_a_and_b():
    a, b = np.array([0.1, -1.0, 2.0]), np.array([0.5, 2.0, 1.5])
    w = b * np.exp(a) / np.sum(b * np.exp(a))
    np.testing.assert_allclose(grad(lambda x, y: S.logsumexp(x, b=y), a, b), w, rtol=1e-14)
    np.testing.assert_allclose(grad(lambda x, y: S.logsumexp(x, b=y), a, b, which=1), w / b,
                               rtol=1e-14)


def test_logsumexp_refuses_return_sign():
    with pytest.raises(ValueError, match="logsumexp: return_sign=True is not supported"):
        S.logsumexp(tg.tensor([1.0]), return_sign=True)


def test_bad_axis_is_an_axis_error_naming_the_op():
    # NumPy's AxisError, kept as itself; tapegrad names the op.
    with pytest.raises(np.exceptions.AxisError, match="scipy_special_softmax: axis 2 is out of bounds"):
        S.softmax(tg.tensor(A), axis=2)
    x = tg.tensor(A[:1, :2], requires_grad=True)
    with pytest.raises(np.exceptions.AxisError, match=r"scipy_special_logsumexp: .*axis 3.*shape \(1, 2\)"):
        S.logsumexp(x, axis=3)


def test_non_numeric_input_is_a_type_error():
    with pytest.raises(TypeError):
        S.gammaln("a")


def test_shapes_that_do_not_broadcast_are_a_value_error_naming_the_op():
    with pytest.raises(ValueError, match=r"xlogy.*\(2,\).*\(3,\)"):
        S.xlogy(tg.ones(2), tg.ones(3))
    with pytest.raises(ValueError, match=r"jn.*\(2,\).*\(3,\)"):
        S.jn(np.array([0, 1]), tg.ones(3))
