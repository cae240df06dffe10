"""The activations of tapegrad-nn, with ``torch.nn.functional``'s names and arguments.

gelu, silu, softplus and logsigmoid are ops (one kernel, one rule: cheaper than the 4-6
ops of their compositions, and numerically delicate); the piecewise ones (elu, selu, celu,
leaky_relu, prelu, hardtanh, relu6, hardsigmoid, hardswish) and mish, softsign,
tanhshrink, glu, softmin are compositions of tapegrad ops, so their first and second
derivatives come from the ops they are made of.

Kinks: every piecewise function picks PyTorch's derivative at its break points (each
doc says which). They are written ``where(x > 0, x, f(x))`` so the branch whose
derivative PyTorch uses at the break is the one selected there.

NOTE: the branch a ``where`` does not select still runs, and its gradient is
``0 * f'(x)``: an ``exp`` overflowing there would give ``0 * inf = nan``. Every
exponential branch is therefore fed a "safe" input (``where(x > 0, 0, x)``).

Vocabulary as everywhere: ``g`` the gradient flowing in, ``ans`` the forward result,
``x`` the input.

>>> import tapegrad as tg
>>> x = tg.tensor([-1., 0., 2.], requires_grad=True)
>>> [round(v, 4) for v in tg.gelu(x).tolist()]
[-0.1587, 0.0, 1.9545]
>>> tg.nn.functional.leaky_relu(x, 0.1).tolist()
[-0.1, 0.0, 2.0]
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import tapegrad as tg

from ._dtype_check import check_float_operands

# The public names (tg.<name> and tg.nn.functional.<name>).
NAMES = ("gelu", "silu", "mish", "elu", "selu", "celu", "leaky_relu", "prelu", "relu6",
         "hardtanh", "hardsigmoid", "hardswish", "softplus", "softsign", "logsigmoid",
         "log_sigmoid", "tanhshrink", "glu", "softmin")

_SQRT1_2 = math.sqrt(0.5)              # Python floats: weak scalars, float32 stays float32
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715
# SELU's constants, as PyTorch's (Klambauer et al. 2017).
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

def _erf(x):
    """erf, elementwise: scipy.special.erf where scipy is installed, else math.erf per
    element (~50 ns each), with the same values. NOTE: scipy is optional (not a dependency
    of tapegrad-nn) and imported on the first call, not at import: scipy.special adds
    ~110 ms to ``import tapegrad``. The first call replaces this function by the one it
    found."""
    global _erf
    try:
        from scipy.special import erf
    except ImportError:
        each = np.frompyfunc(math.erf, 1, 1)

        def erf(x):
            return np.asarray(each(x), dtype=x.dtype)
    _erf = erf
    return erf(x)


# Eigen's float32 erf (also XLA's): x P(x^2) / Q(x^2) on x clipped to [-4, 4] (erf is 1
# to float32 precision beyond), within ~1 ulp of the true value for every float32.
_ERF32_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
            -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
            -1.60960333262415e-02)
_ERF32_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
            -7.37332916720468e-03, -1.42647390514189e-02)


def _erf_fresh(x):
    """erf(x) as a fresh array of x's dtype.

    NOTE: scipy's erf (and the math.erf fallback) compute float32 in double, one element
    at a time: ~15-35 ns per element, 20x a tanh, which made exact gelu the slowest op of
    an MLP. float32 therefore uses the rational approximation above (vectorised, a few
    ns per element); float64 keeps scipy's full-precision erf."""
    if x.dtype != np.float32:
        return np.asarray(_erf(x))
    # NOTE: evaluated in float64 and rounded once: in float32 arithmetic the Horner steps
    # add up to ~7 ulp near |erf| = 1, which 1 + erf(x) then exposes for x << 0.
    z = np.clip(x, -4.0, 4.0, dtype=np.float64)
    z2 = np.multiply(z, z, out=np.empty_like(z))
    p = np.full_like(z, _ERF32_P[0])
    for c in _ERF32_P[1:]:
        p *= z2
        p += c
    p *= z
    q = np.full_like(z, _ERF32_Q[0])
    for c in _ERF32_Q[1:]:
        q *= z2
        q += c
    p /= q
    return p.astype(np.float32)


def _float(x, name):
    x = np.asarray(x)
    if x.dtype.kind != "f":
        raise TypeError(f"{name}: input must be floating point, got {x.dtype}")
    return x


def _number(v, op, arg):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{op}: {arg} must be a real number, got {v!r}")
    return float(v)


def _safe_negative(x):
    """x where x <= 0, 0 elsewhere: the input of an exponential branch (no overflow in the
    branch a where does not select, see the module's NOTE)."""
    return tg.where(x > 0, 0.0, x)


# ---------------------------------------------------------------------------------------
# Ops: kernels and rules
# ---------------------------------------------------------------------------------------

def _normal_cdf_kernel(x):
    x = _float(x, "_normal_cdf")
    return 0.5 * (1.0 + _erf(x * _SQRT1_2))


def _normal_cdf_vjp(g, ans, x):
    return (g * (_INV_SQRT_2PI * tg.exp(-0.5 * (x * x))),)


# NOTE: the unary ops below are elementwise, so their Jacobian is diagonal and the VJP
# applied to the tangent IS the JVP (the same masks, the same NaN/inf behaviour, the same
# device fallbacks); _unary_jvp says so once.

def _unary_jvp(vjp, t, ans, x, *params, **kwparams):
    """The tangent of an elementwise one-input op from its VJP (diagonal Jacobian)."""
    if t[0] is None:
        return tg.zeros_like(ans)
    return vjp(t[0], ans, x, *params, **kwparams)[0]


def _normal_cdf_jvp(t, ans, x):
    return _unary_jvp(_normal_cdf_vjp, t, ans, x)


def _check_approximate(approximate):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


# Note: [gelu's fused kernels]
# gelu is hot in transformer MLPs (W8: a (16, 64, 512) activation per block), so both its
# forward and its backward are ONE kernel each, written with in-place NumPy ufuncs on one
# or two scratch buffers, instead of the ~12 dispatched tensor ops (each allocating its
# full-size result) that the closed-form derivative costs as a composition. The backward
# is its own op, ``_gelu_backward(g, x)`` = g * gelu'(x); ITS rule (used only by second
# and higher derivatives) is composed of tensor ops: gelu''(x) below, and
# _gelu_backward again for the g input.

def _tanh_argument(x):
    """A fresh buffer holding u = sqrt(2/pi) (x + 0.044715 x^3) = x (c + c a x^2)."""
    # NOTE: out= buffers throughout, so a 0-d x stays an array (x * x would be a NumPy
    # scalar, which in-place ufuncs with out= refuse).
    u = np.multiply(x, x, out=np.empty_like(x))
    u *= _SQRT_2_OVER_PI * _GELU_C
    u += _SQRT_2_OVER_PI
    u *= x
    return u


def _gelu_kernel(x, approximate="none"):
    _check_approximate(approximate)
    x = _float(x, "gelu")
    if approximate == "tanh":
        u = _tanh_argument(x)
        out = np.tanh(u, out=u)                         # x/2 (1 + tanh(u))
    else:
        out = _erf_fresh(x * _SQRT1_2)            # x/2 (1 + erf(x / sqrt(2)))
    out += 1.0
    out *= x
    out *= 0.5
    return out


def _gelu_derivative_array(x, approximate):
    """gelu'(x) as a fresh array (x a floating ndarray)."""
    if approximate == "tanh":
        # gelu'(x) = (1 + t)/2 + h (1 - t^2) with t = tanh(u), h = x u' / 2 and
        # u' = c (1 + 3 a x^2); written as 1/2 + h + t (1/2 - h t): 3 buffers, no more.
        t = _tanh_argument(x)
        np.tanh(t, out=t)
        h = np.multiply(x, x, out=np.empty_like(x))
        h *= 1.5 * _SQRT_2_OVER_PI * _GELU_C            # c (1 + 3 a x^2) / 2
        h += 0.5 * _SQRT_2_OVER_PI
        h *= x
        d = np.multiply(h, t, out=np.empty_like(x))
        np.subtract(0.5, d, out=d)
        d *= t
        d += h
        d += 0.5
        return d
    # gelu'(x) = Phi(x) + x phi(x), Phi(x) = (1 + erf(x / sqrt(2))) / 2.
    e = np.multiply(x, x, out=np.empty_like(x))
    e *= -0.5
    np.exp(e, out=e)
    e *= x
    e *= _INV_SQRT_2PI
    d = _erf_fresh(x * _SQRT1_2)
    d += 1.0
    d *= 0.5
    d += e
    return d


def _gelu_backward_kernel(g, x, approximate="none"):
    _check_approximate(approximate)
    x = _float(x, "_gelu_backward")
    g = np.asarray(g)
    d = _gelu_derivative_array(x, approximate)
    if d.shape == g.shape and np.result_type(d, g) == d.dtype:
        d *= g                                          # d is fresh: in place
        return d
    return d * g                                        # broadcasting or promotion


def _gelu_second_derivative(x, approximate):
    """gelu''(x) as tensor ops (differentiable again: third and higher orders)."""
    if approximate == "tanh":
        # With u, u' as above, u'' = 6 c a x and t' = (1 - t^2) u':
        # gelu'' = (1 - t^2) (u' + x/2 (u'' - 2 t u'^2)).
        x2 = x * x
        t = tg.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x2 * x))
        du = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_C * x2)
        d2u = (6.0 * _SQRT_2_OVER_PI * _GELU_C) * x
        return (1.0 - t * t) * (du + 0.5 * x * (d2u - 2.0 * t * du * du))
    # d/dx (Phi + x phi) = 2 phi - x^2 phi = phi (2 - x^2).
    x2 = x * x
    return (_INV_SQRT_2PI * tg.exp(-0.5 * x2)) * (2.0 - x2)


def _gelu_vjp(g, ans, x, approximate="none"):
    return (tg._gelu_backward(g, x, approximate=approximate),)


def _gelu_jvp(t, ans, x, approximate="none"):
    return _unary_jvp(_gelu_vjp, t, ans, x, approximate)


def _gelu_backward_vjp(gg, ans, g, x, approximate="none"):
    # ans = g * gelu'(x): d/dg = gelu'(x), d/dx = g * gelu''(x).
    return (tg._gelu_backward(gg, x, approximate=approximate) if tg.needs_grad(g) else None,
            gg * g * _gelu_second_derivative(x, approximate) if tg.needs_grad(x) else None)


def _sum_terms(terms, like):
    """The sum of a JVP's terms that exist (None: that input has no tangent; each term
    broadcasts to the output); zeros of `like` (the output) when none does. Shared by
    the JVP rules of every module of tapegrad-nn."""
    terms = [v for v in terms if v is not None]
    if not terms:
        return tg.zeros_like(like)
    total = terms[0]
    for v in terms[1:]:
        total = total + v
    return total


def _gelu_backward_jvp(t, ans, g, x, approximate="none"):
    # ans = g * gelu'(x): tangent gelu'(x) tg + g gelu''(x) tx (each broadcasts to ans).
    tg_, tx = t[0], t[1]
    return _sum_terms([
        tg._gelu_backward(tg_, x, approximate=approximate) if tg_ is not None else None,
        g * tx * _gelu_second_derivative(x, approximate) if tx is not None else None], ans)


def _silu_kernel(x):
    x = _float(x, "silu")
    # x * sigmoid(x) = x / (1 + exp(-x)), written without overflow for x << 0.
    e = np.exp(-np.abs(x))
    return x * np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


# Note: [silu_backward and softplus_backward]
# silu's and softplus's gradients are one op each (as relu's, tanh's, sigmoid's in
# tapegrad-elementwise: see its Note: [backward ops]), instead of the 6 and 7 dispatched
# ops of their compositions. Their kernels compute, with NumPy's own ufuncs in the same
# order, into one buffer, the very numbers the compositions did (bit for bit: the
# sigmoid is tg.sigmoid's own kernel); their rules, in tapegrad ops, give the second
# derivatives. Where the gradient's device has no kernel for them (cuda) the composition
# runs, as before.

def _sigmoid_array(x):
    """tg.sigmoid's kernel on an array: the same numbers the composition used."""
    return tg.sigmoid.kernels["cpu"](x)


_BACKWARD_OPS = {}          # name -> Op (registered below)


def _silu_vjp(g, ans, x):
    op = _BACKWARD_OPS["silu_backward"]
    if g.device.name in op.kernels:
        return (op(g, x),)
    s = tg.sigmoid(x)
    return (g * (s * (1.0 + x * (1.0 - s))),)


def _silu_jvp(t, ans, x):
    return _unary_jvp(_silu_vjp, t, ans, x)


def _silu_backward_kernel(g, x):
    # g * (s * (1 + x * (1 - s))), s = sigmoid(x), step by step into one buffer
    s = _sigmoid_array(x)
    t = np.subtract(1.0, s)
    if not (isinstance(t, np.ndarray) and t.dtype == np.result_type(g, x, s)
            and t.shape == np.broadcast_shapes(np.shape(g), t.shape)):
        return g * (s * (1.0 + x * (1.0 - s)))      # (mixed dtypes or shapes: no buffer)
    np.multiply(x, t, out=t)
    np.add(1.0, t, out=t)
    np.multiply(s, t, out=t)
    return np.multiply(g, t, out=t)


def _silu_backward_vjp(gg, out, g, x):
    # out = g silu'(x), silu'(x) = s (1 + x (1 - s)); silu''(x) = s (1 - s) (2 + x (1 - 2 s))
    gx = None
    if tg.needs_grad(x):
        s = tg.sigmoid(x)
        gx = gg * g * (s * (1.0 - s) * (2.0 + x * (1.0 - 2.0 * s)))
    return (tg.silu_backward(gg, x) if tg.needs_grad(g) else None, gx)


def _silu_backward_jvp(t, ans, g, x):
    # ans = g silu'(x): tangent silu'(x) tg + g silu''(x) tx, silu'' as in the VJP above.
    tg_, tx = t[0], t[1]
    gx = None
    if tx is not None:
        s = tg.sigmoid(x)
        gx = g * tx * (s * (1.0 - s) * (2.0 + x * (1.0 - 2.0 * s)))
    return _sum_terms([tg.silu_backward(tg_, x) if tg_ is not None else None, gx], ans)


def _softplus_kernel(x, beta=1.0, threshold=20.0):
    beta = _number(beta, "softplus", "beta")
    _number(threshold, "softplus", "threshold")
    if beta == 0:
        raise ValueError("softplus: beta must not be 0")
    x = _float(x, "softplus")
    bx = x * beta
    # NOTE: logaddexp(0, z) is log(1 + exp(z)) without overflow; above the threshold
    # PyTorch returns x itself (the difference is below exp(-threshold)).
    return np.where(bx > threshold, x, np.logaddexp(0.0, bx) / beta).astype(x.dtype, copy=False)


def _softplus_vjp(g, ans, x, beta=1.0, threshold=20.0):
    op = _BACKWARD_OPS["softplus_backward"]
    if g.device.name in op.kernels:
        return (op(g, x, beta, threshold),)
    bx = x * beta
    # NOTE: PyTorch's conventions at beta x == threshold: the first derivative is the
    # sigmoid branch's, the second is 0 (its double backward masks beta x < threshold);
    # a constant sigmoid there gives both.
    s = tg.where(bx < threshold, tg.sigmoid(bx), tg.sigmoid(bx.detach()))
    return (tg.where(bx > threshold, g, g * s),)


def _softplus_jvp(t, ans, x, beta=1.0, threshold=20.0):
    # (the VJP's threshold conventions, detached sigmoid included, carry over as they are)
    return _unary_jvp(_softplus_vjp, t, ans, x, beta, threshold)


def _softplus_backward_kernel(g, x, beta=1.0, threshold=20.0):
    # where(beta x > threshold, g, g * sigmoid(beta x)), as _softplus_vjp's composition
    bx = np.multiply(x, beta)
    s = _sigmoid_array(bx)
    gs = np.multiply(g, s)
    above = np.greater(bx, threshold)
    if isinstance(gs, np.ndarray) and gs.shape == np.broadcast_shapes(np.shape(g), above.shape):
        np.copyto(gs, g, where=above)       # (g's dtype never exceeds gs's: exact)
        return gs
    return np.where(above, g, gs)


def _softplus_backward_vjp(gg, out, g, x, beta=1.0, threshold=20.0):
    # out = where(bx > t, g, g s), bx = beta x, s = sigmoid(bx):
    # d/dg = where(bx > t, 1, s); d/dx = g beta s (1 - s) where bx < t, else 0 (PyTorch's
    # double backward masks bx < threshold: 0 at bx == threshold too)
    gx = None
    if tg.needs_grad(x):
        bx = x * beta
        s = tg.sigmoid(bx)
        gx = tg.where(bx < threshold, gg * g * (beta * s * (1.0 - s)), 0)
    return (tg.softplus_backward(gg, x, beta, threshold) if tg.needs_grad(g) else None, gx)


def _softplus_backward_jvp(t, ans, g, x, beta=1.0, threshold=20.0):
    # The VJP's partials as a forward product: d/dg where(bx > t, 1, s) applied to tg is
    # softplus_backward itself; d/dx masked to bx < threshold as PyTorch's double backward.
    tg_, tx = t[0], t[1]
    gx = None
    if tx is not None:
        bx = x * beta
        s = tg.sigmoid(bx)
        gx = tg.where(bx < threshold, g * tx * (beta * s * (1.0 - s)), 0)
    return _sum_terms([tg.softplus_backward(tg_, x, beta, threshold) if tg_ is not None
                       else None, gx], ans)


def _logsigmoid_kernel(x):
    x = _float(x, "logsigmoid")
    # log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): finite for any finite x.
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def _logsigmoid_vjp(g, ans, x):
    return (g * tg.sigmoid(-x),)


def _logsigmoid_jvp(t, ans, x):
    return _unary_jvp(_logsigmoid_vjp, t, ans, x)


# ---------------------------------------------------------------------------------------
# Public functions (torch.nn.functional's signatures)
# ---------------------------------------------------------------------------------------

def log_sigmoid(input):
    """The same function as ``tg.logsigmoid`` (the issue's spelling of PyTorch's name)."""
    return tg.logsigmoid(input)


def mish(input):
    """``x * tanh(softplus(x))``, as ``F.mish``. Smooth."""
    x = tg.asarray(input)
    return x * tg.tanh(tg.softplus(x))


def elu(input, alpha=1.0):
    """``x`` for x > 0, ``alpha (exp(x) - 1)`` for x <= 0, as ``F.elu``. At 0 the
    derivative is PyTorch's, that of the x <= 0 branch: ``alpha`` (and so is the second
    derivative there, ``alpha``; PyTorch's double backward gives 0 at exactly 0)."""
    alpha = _number(alpha, "elu", "alpha")
    x = tg.asarray(input)
    return tg.where(x > 0, x, alpha * tg.expm1(_safe_negative(x)))


def selu(input):
    """``scale * elu(x, alpha)`` with PyTorch's constants (alpha 1.6732632423543772,
    scale 1.0507009873554805), as ``F.selu``. Derivative at 0: ``scale * alpha`` (the
    x <= 0 branch, as PyTorch; the second derivative at 0 is that branch's too, where
    PyTorch's is 0)."""
    x = tg.asarray(input)
    return SELU_SCALE * tg.where(x > 0, x, SELU_ALPHA * tg.expm1(_safe_negative(x)))


def celu(input, alpha=1.0):
    """``x`` for x > 0, ``alpha (exp(x / alpha) - 1)`` for x <= 0, as ``F.celu``
    (alpha != 0). The derivative is 1 on both sides of 0; the second derivative at 0 is
    the x <= 0 branch's, 1 / alpha (PyTorch's is 0)."""
    alpha = _number(alpha, "celu", "alpha")
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0 (it divides x)")
    x = tg.asarray(input)
    return tg.where(x > 0, x, alpha * tg.expm1(_safe_negative(x) / alpha))


def leaky_relu(input, negative_slope=0.01):
    """``x`` for x > 0, ``negative_slope * x`` otherwise, as ``F.leaky_relu``. Derivative
    at 0: ``negative_slope`` (PyTorch's)."""
    slope = _number(negative_slope, "leaky_relu", "negative_slope")
    x = tg.asarray(input)
    return tg.where(x > 0, x, x * slope)


def prelu(input, weight):
    """``x`` for x > 0, ``weight * x`` otherwise, with a learnable `weight` of 1 element
    or of C = input.shape[1] elements (one per channel, broadcast over axis 1 as
    PyTorch's; a 0-d or 1-d input takes a 1-element weight only). Derivative at 0 in x:
    ``weight`` (PyTorch's); in weight: x (0 at 0)."""
    x = tg.asarray(input)
    # A weight tensor of another dtype than the input raises TypeError (as PyTorch).
    check_float_operands("prelu", x, ("weight", weight))
    if isinstance(weight, tg.Tensor):
        w = weight
    else:
        # NOTE: a Python number or list takes the input's float dtype (a float64 0-d
        # tensor would promote a float32 input: NumPy 2 treats 0-d arrays as typed).
        w = tg.asarray(weight, dtype=getattr(weight, "dtype", None) or (
            x.dtype if x.dtype.kind == "f" else None), device=x.device)
    if w.ndim > 1:
        raise ValueError(f"prelu: weight must be 0-d or 1-d, got shape {w.shape}")
    channels = x.shape[1] if x.ndim >= 2 else 1
    if w.size not in (1, channels):
        raise ValueError(f"prelu: weight of {w.size} elements does not fit input of shape "
                         f"{x.shape} (it needs 1 or {channels}, the size of axis 1)")
    if w.size == 1:
        w = tg.reshape(w, ())
    else:
        w = tg.reshape(w, (channels,) + (1,) * (x.ndim - 2))
    return tg.where(x > 0, x, w * x)


def hardtanh(input, min_val=-1.0, max_val=1.0):
    """``clip(x, min_val, max_val)``, as ``F.hardtanh``. Derivative 0 at both
    boundaries (PyTorch's: 1 only strictly inside)."""
    lo = _number(min_val, "hardtanh", "min_val")
    hi = _number(max_val, "hardtanh", "max_val")
    if lo > hi:
        raise ValueError(f"hardtanh: min_val {lo} must not exceed max_val {hi}")
    x = tg.asarray(input)
    inside = tg.logical_and(x > lo, x < hi)
    return tg.where(inside, x, tg.where(x <= lo, lo, hi).astype(x.dtype))


def relu6(input):
    """``min(max(x, 0), 6)`` (``hardtanh(x, 0, 6)``), as ``F.relu6``. Derivative 0 at 0
    and at 6 (PyTorch's)."""
    return hardtanh(input, 0.0, 6.0)


def hardsigmoid(input):
    """``0`` for x <= -3, ``1`` for x >= 3, ``x / 6 + 1/2`` between, as
    ``F.hardsigmoid``. Derivative 0 at -3 and 3 (PyTorch's: 1/6 only strictly inside)."""
    x = tg.asarray(input)
    inside = tg.logical_and(x > -3.0, x < 3.0)
    return tg.where(inside, x / 6.0 + 0.5, tg.where(x <= -3.0, 0.0, 1.0).astype(x.dtype))


def hardswish(input):
    """``x * hardsigmoid(x)``: 0 for x <= -3, x for x >= 3, ``x (x + 3) / 6`` between, as
    ``F.hardswish``. Derivatives at the breaks are PyTorch's (2.x), the outer branches':
    0 at -3, 1 at 3."""
    x = tg.asarray(input)
    middle = tg.logical_and(x > -3.0, x < 3.0)
    return tg.where(middle, x * (x + 3.0) / 6.0, tg.where(x <= -3.0, 0.0, x))


def softsign(input):
    """``x / (1 + |x|)``, as ``F.softsign`` (derivative ``1 / (1 + |x|)^2``, 1 at 0)."""
    x = tg.asarray(input)
    return x / (1.0 + tg.abs(x))


def tanhshrink(input):
    """``x - tanh(x)``, as ``F.tanhshrink``."""
    x = tg.asarray(input)
    return x - tg.tanh(x)


def glu(input, dim=-1):
    """Gated linear unit ``a * sigmoid(b)`` where a, b are the first and second halves of
    `input` along `dim` (whose size must be even), as ``F.glu``."""
    x = tg.asarray(input)
    if x.ndim == 0:
        raise ValueError("glu: input must have at least one dimension (0-d given)")
    if not -x.ndim <= dim < x.ndim:
        raise np.exceptions.AxisError(f"glu: dim {dim} is out of range for an input of "
                                      f"{x.ndim} dimensions")
    if x.shape[dim] % 2:
        raise ValueError(f"glu: the size of dim {dim} must be even, got input of shape "
                         f"{x.shape}")
    a, b = tg.split(x, 2, axis=dim)
    return a * tg.sigmoid(b)


def softmin(input, dim=-1, dtype=None):
    """``softmax(-x, axis=dim)``, as ``F.softmin``; `dtype` casts the input first.

    NOTE: `dim` defaults to the last axis, as tg.softmax (PyTorch's deprecated implicit
    choice of dim is not reproduced)."""
    x = tg.asarray(input)
    if dtype is not None:
        x = x.astype(dtype)
    return tg.softmax(-x, axis=dim)


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

def _x(*shape, seed=0, scale=1.5):
    """Sample inputs kept away from the kinks of the piecewise functions (0, +-3, +-1, 6):
    at least 0.05 from each (the kit's finite differences step 1e-6)."""
    rng = np.random.default_rng(seed + 17 * len(shape) + sum(shape))
    v = scale * rng.standard_normal(shape)
    for k in (0.0, 1.0, -1.0, 3.0, -3.0, 6.0, 0.5, -0.5, 2.0):
        near = np.abs(v - k) < 0.05
        v = np.where(near, k + 0.1 * np.sign(v - k + 1e-12), v)
    return v


_WIDE = np.array([-8.0, -3.7, -2.2, -0.7, 0.4, 1.3, 2.6, 4.1, 7.3])
_UNARY = [tg.Sample(_x(3, 4)), tg.Sample(_x(2, 3, 2, seed=1)), tg.Sample(np.array(0.7)),
          tg.Sample(_WIDE)]


def register(registry):
    """Register the activations with `registry` (called from functional.register)."""
    reg, fn = registry.register_op, registry.register_function
    reg("_normal_cdf", kernels={"cpu": _normal_cdf_kernel}, vjp=_normal_cdf_vjp,
        jvp=_normal_cdf_jvp, save_ans=False, method=False, samples=_UNARY,
        batch="elementwise",
        doc="_normal_cdf(x): the standard normal CDF Phi(x) = (1 + erf(x / sqrt(2))) / 2, "
            "the op exact gelu's rule is written with.")
    reg("gelu", kernels={"cpu": _gelu_kernel}, vjp=_gelu_vjp, jvp=_gelu_jvp, save_ans=False,
        method=False, params=("approximate",),
        samples=_UNARY + [tg.Sample(_x(3, 4), approximate="tanh"),
                          tg.Sample(_WIDE, "tanh")],
        batch="elementwise",
        doc="gelu(input, approximate='none'): the Gaussian error linear unit x Phi(x) with "
            "the normal CDF (exact), or x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) "
            "(approximate='tanh'), as torch.nn.functional.gelu. Smooth: no kink.")
    gelu_samples = [tg.Sample(_x(3, 4), _x(3, 4, seed=5)),
                    tg.Sample(_x(3, 4), _x(3, 4, seed=5), approximate="tanh"),
                    tg.Sample(_x(2, 3, 2, seed=1), _x(3, 2, seed=2)),         # broadcast x
                    tg.Sample(_x(4, seed=3), _x(2, 4, seed=4), "tanh"),       # broadcast g
                    tg.Sample(np.ones_like(_WIDE), _WIDE),
                    tg.Sample(np.ones_like(_WIDE), _WIDE, approximate="tanh")]
    reg("_gelu_backward", kernels={"cpu": _gelu_backward_kernel}, vjp=_gelu_backward_vjp,
        jvp=_gelu_backward_jvp, save_ans=False, method=False, params=("approximate",),
        samples=gelu_samples,
        batch="elementwise",
        doc="_gelu_backward(g, x, approximate='none'): g * gelu'(x) in one kernel, the op "
            "gelu's rule is; its own rule gives gelu's second and higher derivatives.")
    reg("silu", kernels={"cpu": _silu_kernel}, vjp=_silu_vjp, jvp=_silu_jvp, save_ans=False,
        method=False, samples=_UNARY + [tg.Sample(np.array([-60.0, -20.0, 20.0, 60.0]))],
        batch="elementwise",
        doc="silu(input): x * sigmoid(x) (swish), as torch.nn.functional.silu, without "
            "overflow for large |x|.")
    reg("softplus", kernels={"cpu": _softplus_kernel}, vjp=_softplus_vjp, jvp=_softplus_jvp,
        save_ans=False, method=False, params=("beta", "threshold"),
        samples=_UNARY + [tg.Sample(_x(3, 4), 2.0), tg.Sample(_x(3, 4), beta=2.0),
                          tg.Sample(4 * _WIDE, beta=1.0, threshold=5.0),
                          tg.Sample(_WIDE, beta=0.5, threshold=1.5),
                          tg.Sample(_WIDE, beta=-1.0)],
        batch="elementwise",
        doc="softplus(input, beta=1, threshold=20): log(1 + exp(beta x)) / beta, and x "
            "itself where beta x > threshold (derivative 1 there), as "
            "torch.nn.functional.softplus (beta != 0). At beta x == threshold the first "
            "derivative is the sigmoid branch's and the second is 0, as PyTorch's.")
    # their gradients as one op each (Note: [silu_backward and softplus_backward])
    _BACKWARD_OPS["silu_backward"] = reg(
        "silu_backward", kernels={"cpu": _silu_backward_kernel}, vjp=_silu_backward_vjp,
        jvp=_silu_backward_jvp, save_ans=False, method=False,
        samples=[tg.Sample(_x(3, 4, seed=3), _x(3, 4)), tg.Sample(_x(4, seed=4), _WIDE[:4]),
                 tg.Sample(np.array(0.3), np.array(-1.2)),
                 tg.Sample(_x(3, 4, seed=5), _x(4, seed=6))],
        batch="elementwise",
        doc="silu_backward(g, x): g * silu'(x), silu's gradient from its input as one op.")
    _BACKWARD_OPS["softplus_backward"] = reg(
        "softplus_backward", kernels={"cpu": _softplus_backward_kernel},
        vjp=_softplus_backward_vjp, jvp=_softplus_backward_jvp, save_ans=False, method=False,
        params=("beta", "threshold"),
        samples=[tg.Sample(_x(3, 4, seed=3), _x(3, 4)),
                 tg.Sample(_x(9, seed=4), 4 * _WIDE, beta=1.0, threshold=5.0),
                 tg.Sample(_x(9, seed=5), _WIDE, beta=-1.0),
                 tg.Sample(_x(3, 4, seed=6), _x(4, seed=7), 2.0, 1.5)],
        batch="elementwise",
        doc="softplus_backward(g, x, beta=1, threshold=20): softplus's gradient g * "
            "sigmoid(beta x), and g where beta x > threshold, as one op.")
    reg("logsigmoid", kernels={"cpu": _logsigmoid_kernel}, vjp=_logsigmoid_vjp,
        jvp=_logsigmoid_jvp, save_ans=False, method=False,
        samples=_UNARY + [tg.Sample(np.array([-800.0, -30.0, 30.0, 800.0]))],
        batch="elementwise",
        doc="logsigmoid(input): log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), finite for "
            "every finite x, as torch.nn.functional.logsigmoid (also tg.log_sigmoid).")
    alpha = [tg.Sample(_x(3, 4), 0.5), tg.Sample(_WIDE, alpha=2.0)]
    for name, f, extra in [
            ("mish", mish, [tg.Sample(3 * _WIDE)]),
            ("elu", elu, alpha + [tg.Sample(np.array([-900.0, 800.0]))]),
            ("selu", selu, []), ("celu", celu, alpha),
            ("leaky_relu", leaky_relu, [tg.Sample(_x(3, 4), 0.2),
                                        tg.Sample(_WIDE, negative_slope=-0.5)]),
            ("relu6", relu6, [tg.Sample(5 * _WIDE)]),
            ("hardtanh", hardtanh, [tg.Sample(_WIDE, -2.0, 2.0),
                                    tg.Sample(_WIDE, min_val=-0.25, max_val=1.5)]),
            ("hardsigmoid", hardsigmoid, []), ("hardswish", hardswish, []),
            ("softsign", softsign, []),
            ("log_sigmoid", log_sigmoid, []),
            ("tanhshrink", tanhshrink, [])]:
        fn(name, f, method=False, samples=_UNARY + extra)
    fn("prelu", prelu, method=False, samples=[
        tg.Sample(_x(2, 3, 4), np.array([0.25])),
        tg.Sample(_x(2, 3, 4), np.array([0.1, -0.3, 0.6])),
        tg.Sample(_x(2, 3), np.array([0.1, -0.3, 0.6])),
        tg.Sample(_x(4), np.array(0.2)),
        tg.Sample(_x(2, 3, 2, 2), np.array([0.5, 0.25, 2.0]))])
    fn("glu", glu, method=False, samples=[
        tg.Sample(_x(3, 4)), tg.Sample(_x(4, 3), 0), tg.Sample(_x(2, 4, 3), dim=1),
        tg.Sample(_x(6))])
    fn("softmin", softmin, method=False, samples=[
        tg.Sample(_x(3, 4)), tg.Sample(_x(3, 4), 0), tg.Sample(_x(2, 3, 4), dim=1)])
