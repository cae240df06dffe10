"""``tg.scipy.special``: SciPy's special functions with gradients of any order.

The kernels are the ``scipy.special`` functions themselves (values as SciPy's; dtypes as
NumPy's promotion, see ``_common.scipy_kernel``). Every gradient rule is written in
tapegrad ops, mostly this module's own (digamma's derivative is ``polygamma(1, x)``,
i0's is ``i1``), so ``backward(create_graph=True)`` works to any order.

Vocabulary, for every rule in this file:
    g        the gradient flowing into the op's output
    ans      the op's forward result
    x, y     the op's value inputs, in order; n, v: an order (never differentiable)

Op names in tapegrad's one flat table (``tg.<name>``): the SciPy name where neither NumPy
nor another first-party plugin uses it (``tg.gammaln is tg.scipy.special.gammaln``);
``scipy_special_<name>`` for softmax, log_softmax and logsumexp, whose first-party
``tg.softmax`` & co. (tapegrad-nn) have other defaults and signatures.

>>> import tapegrad as tg
>>> x = tg.tensor([0.0, 1.0], requires_grad=True)
>>> tg.scipy.special.erf(x).sum().backward()
>>> x.grad.numpy().round(6)                  # 2/sqrt(pi) exp(-x^2)
array([1.128379, 0.415107])
>>> tg.scipy.special.softmax(tg.tensor([[0.0, 0.0], [0.0, 0.0]]))   # axis=None: all entries
tensor([[0.25, 0.25],
        [0.25, 0.25]])
"""

import math
import sys

import numpy as np
import scipy.special as sp
import tapegrad as tg

from tapegrad._batching import logical_axes, logical_ndim, pad_batched

from ._common import Draw, binary_rules, diagonal_jvp, scipy_kernel

_needs_grad = tg.needs_grad
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _safe(mask, x, fill=1.0):
    """x where mask is false, `fill` where it holds: a "safe where" that keeps log(0) or
    1/0 out of a branch that is masked out anyway (its inf would turn into nan in the
    next derivative)."""
    return tg.where(mask, fill, x)


# ---------------------------------------------------------------------------------------
# Gamma and beta functions
# ---------------------------------------------------------------------------------------

def _gammaln_vjp(g, ans, x):
    return (g * tg.digamma(x),)


def _digamma_vjp(g, ans, x):
    return (g * tg.polygamma(1, x),)


def _polygamma_vjp(g, ans, n, x):
    return (None, g * tg.polygamma(n + 1, x))


def _gamma_vjp(g, ans, x):
    return (g * ans * tg.digamma(x),)


# The binary ops' partials d(v, ans, x, y) = v * d ans / d input, where v is a gradient g
# (the VJP) or that input's tangent (the JVP): _common.binary_rules builds both rules.

def _d_beta_a(v, ans, a, b):
    # d/da B(a, b) = B (digamma(a) - digamma(a + b)); symmetric in a and b.
    return v * ans * (tg.digamma(a) - tg.digamma(a + b))


def _d_beta_b(v, ans, a, b):
    return _d_beta_a(v, ans, b, a)


def _d_betaln_a(v, ans, a, b):
    return v * (tg.digamma(a) - tg.digamma(a + b))


def _d_betaln_b(v, ans, a, b):
    return _d_betaln_a(v, ans, b, a)


# ---------------------------------------------------------------------------------------
# Error functions, the normal distribution, the logistic function
# ---------------------------------------------------------------------------------------

def _erf_vjp(g, ans, x):
    return (g * (_TWO_OVER_SQRT_PI * tg.exp(-(x * x))),)


def _erfc_vjp(g, ans, x):
    return (g * (-_TWO_OVER_SQRT_PI * tg.exp(-(x * x))),)


def _erfinv_vjp(g, ans, x):
    return (g * (_SQRT_PI_OVER_TWO * tg.exp(ans * ans)),)


def _erfcinv_vjp(g, ans, x):
    return (g * (-_SQRT_PI_OVER_TWO * tg.exp(ans * ans)),)


def _ndtr_vjp(g, ans, x):
    return (g * (_INV_SQRT_2PI * tg.exp(-0.5 * (x * x))),)


def _log_ndtr_vjp(g, ans, x):
    # NOTE: phi(x) / Phi(x) as exp(-x^2/2 - log Phi(x)): finite for x = -30, where both
    # phi and Phi underflow to 0 and their quotient would be 0/0.
    return (g * (_INV_SQRT_2PI * tg.exp(-0.5 * (x * x) - ans)),)


def _ndtri_vjp(g, ans, x):
    return (g * (_SQRT_2PI * tg.exp(0.5 * (ans * ans))),)


def _expit_vjp(g, ans, x):
    # NOTE: ans * expit(-x), not ans * (1 - ans): 1 - ans is 0 for x > 37 in float64,
    # where the derivative (about exp(-x)) is not.
    return (g * ans * tg.expit(-x),)


def _logit_vjp(g, ans, x):
    return (g / (x * (1 - x)),)


# ---------------------------------------------------------------------------------------
# Bessel functions
# ---------------------------------------------------------------------------------------

def _i0_vjp(g, ans, x):
    return (g * tg.i1(x),)


def _i1_over_x(x, i1x):
    """i1(x) / x, with its limit 1/2 at x == 0."""
    zero = x == 0
    return tg.where(zero, 0.5, i1x / _safe(zero, x))


def _i1_vjp(g, ans, x):
    # i1'(x) = i0(x) - i1(x)/x, which is 1/2 at x == 0 (i1(x)/x -> 1/2 and i0(0) = 1).
    return (g * (tg.i0(x) - _i1_over_x(x, ans)),)


def _i0e_vjp(g, ans, x):
    # i0e = exp(-|x|) i0(x); d|x|/dx = sign(x), 0 at x == 0 (tapegrad's abs).
    return (g * (tg.i1e(x) - tg.sign(x) * ans),)


def _i1e_vjp(g, ans, x):
    return (g * (tg.i0e(x) - _i1_over_x(x, ans) - tg.sign(x) * ans),)


def _iv_vjp(g, ans, v, x):
    return (None, g * (0.5 * (tg.iv(v - 1, x) + tg.iv(v + 1, x))))


def _jn_vjp(g, ans, n, x):
    return (None, g * (0.5 * (tg.jn(n - 1, x) - tg.jn(n + 1, x))))


def _yn_vjp(g, ans, n, x):
    return (None, g * (0.5 * (tg.yn(n - 1, x) - tg.yn(n + 1, x))))


# ---------------------------------------------------------------------------------------
# x log y and the entropies
# ---------------------------------------------------------------------------------------

# xlogy: PyTorch's rule (torch.special.xlogy): d/dx = log(y), 0 where x == 0 and y <= 0;
# d/dy = x / y, and 0 where x == 0 (even at y == 0). NOTE: only x == y == 0 is masked for
# d/dy: elsewhere x / y is already 0 at x == 0, and a mask over all of x == 0 would cut
# the mixed second derivative d2/dxdy = 1/y there.

def _d_xlogy_x(v, ans, x, y):
    edge = tg.logical_and(x == 0, y <= 0)
    return v * tg.where(edge, 0.0, tg.log(_safe(edge, y)))


def _d_xlogy_y(v, ans, x, y):
    both = tg.logical_and(x == 0, y == 0)
    return v * tg.where(both, 0.0, x / _safe(both, y))


# xlog1py: as xlogy, with 1 + y for y: 0 where x == 0 and y <= -1, resp. where x == 0.

def _d_xlog1py_x(v, ans, x, y):
    edge = tg.logical_and(x == 0, y <= -1)
    return v * tg.where(edge, 0.0, tg.xlog1py(1.0, _safe(edge, y, 0.0)))


def _d_xlog1py_y(v, ans, x, y):
    both = tg.logical_and(x == 0, y == -1)
    return v * tg.where(both, 0.0, x / _safe(both, 1 + y))


def _entr_vjp(g, ans, x):
    # -log(x) - 1; +inf at x == 0 (PyTorch's torch.special.entr does the same).
    return (g * (-tg.log(x) - 1),)


def _log_ratio(x, y):
    """log(x / y) with -inf (the one-sided limit) where x == 0, and no log(0) computed."""
    zero = x == 0
    return tg.where(zero, -math.inf, tg.log(_safe(zero, x)) - tg.log(y))


def _d_rel_entr_x(v, ans, x, y):
    return v * (_log_ratio(x, y) + 1)


def _d_rel_entr_y(v, ans, x, y):
    return v * (-x / y)


def _d_kl_div_x(v, ans, x, y):
    return v * _log_ratio(x, y)


def _d_kl_div_y(v, ans, x, y):
    return v * (1 - x / y)


# ---------------------------------------------------------------------------------------
# logsumexp, softmax, log_softmax (SciPy's signatures: axis=None by default)
# ---------------------------------------------------------------------------------------

def _axes(axis, ndim, name):
    """`axis` (None, an int or a tuple) as a tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(
                f"{name}: axis {a} is out of bounds for an array of dimension {ndim}")
        out.append(int(a) % ndim if ndim else 0)
    return tuple(out)


def _keepdims_shape(shape, axis, name):
    axes = _axes(axis, len(shape), name)
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _logsumexp_kernel(a, b, axis=None, keepdims=False):
    if isinstance(b, (int, float)) and b == 1:
        return sp.logsumexp(a, axis=axis, keepdims=keepdims)
    return sp.logsumexp(a, axis=axis, b=b, keepdims=keepdims)


def _shape(v):
    # NOTE: np.shape(tensor) goes through NumPy's fallback, which converts the tensor to
    # an array: a copy, and refused for a batched tensor inside tg.vmap.
    return tuple(v.shape) if hasattr(v, "shape") else np.shape(v)


def _logsumexp_vjp(g, ans, a, b, axis=None, keepdims=False):
    # d/da log(sum(b exp(a))) = b exp(a - ans), d/db = exp(a - ans), with ans and g in
    # keepdims form so they broadcast against a and b.
    shape = np.broadcast_shapes(_shape(a), _shape(b))
    kshape = _keepdims_shape(shape, axis, "logsumexp")
    if not keepdims:
        g, ans = tg.reshape(g, kshape), tg.reshape(ans, kshape)
    w = g * tg.exp(a - ans)
    return (w * b if _needs_grad(a) else None, w if _needs_grad(b) else None)


def _logsumexp_jvp(t, ans, a, b, axis=None, keepdims=False):
    # d log(sum(b e^a)) = sum(e^(a - ans) (b da + db)): the VJP's weights, summed over the
    # reduced axes (ans in keepdims form so it broadcasts against a and b).
    ta, tb = t
    shape = np.broadcast_shapes(_shape(a), _shape(b))
    kans = ans if keepdims else tg.reshape(ans, _keepdims_shape(shape, axis, "logsumexp"))
    inner = None
    if ta is not None:
        inner = ta * b
    if tb is not None:
        inner = tb if inner is None else inner + tb
    if inner is None:
        return tg.zeros_like(ans)
    return tg.sum(tg.exp(a - kans) * inner, axis=axis, keepdims=keepdims)


def _softmax_vjp(g, ans, x, axis=None):
    return (ans * (g - tg.sum(g * ans, axis=axis, keepdims=True)),)


def _softmax_jvp(t, ans, x, axis=None):
    # The Jacobian diag(s) - s s^T is symmetric, so the JVP is the VJP applied to the
    # tangent.
    return _softmax_vjp(t[0], ans, x, axis=axis)[0]


def _log_softmax_vjp(g, ans, x, axis=None):
    return (g - tg.exp(ans) * tg.sum(g, axis=axis, keepdims=True),)


def _log_softmax_jvp(t, ans, x, axis=None):
    # J = I - 1 s^T (s = exp(ans) along the axis): the transpose of the VJP's I - s 1^T.
    return t[0] - tg.sum(tg.exp(ans) * t[0], axis=axis, keepdims=True)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a), axis)), computed stably: ``scipy.special.logsumexp``.

    Differentiable in `a` and in the scale factors `b` (which broadcast with `a`).
    ``return_sign=True`` is refused (a ValueError): its sign output has no gradient and
    its magnitude is the logsumexp of |sum|; take ``tg.abs`` of the sum yourself.

    >>> import tapegrad as tg
    >>> float(tg.scipy.special.logsumexp(tg.tensor([0.0, 0.0]), b=tg.tensor([1.0, 3.0])).exp())
    4.0
    """
    if return_sign:
        raise ValueError("tg.scipy.special.logsumexp: return_sign=True is not supported "
                         "(pass a positive b, or compute the signed sum yourself)")
    return tg.scipy_special_logsumexp(a, 1.0 if b is None else b, axis=axis, keepdims=keepdims)


def softmax(x, axis=None):
    """``scipy.special.softmax``: exp(x) / sum(exp(x), axis). NOTE: SciPy's default is
    axis=None, the softmax over all entries (``tg.softmax``, tapegrad-nn's, defaults to
    the last axis)."""
    return tg.scipy_special_softmax(x, axis=axis)


def log_softmax(x, axis=None):
    """``scipy.special.log_softmax``: x - logsumexp(x, axis), axis=None by default (all
    entries; ``tg.log_softmax`` defaults to the last axis)."""
    return tg.scipy_special_log_softmax(x, axis=axis)


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

# (name, vjp, sample kind, doc): unary elementwise ops, each SciPy's function of that name.
_UNARY = (
    ("gammaln", _gammaln_vjp, "positive", "log|Gamma(x)|. Its derivative is digamma(x)."),
    ("digamma", _digamma_vjp, "positive", "psi(x), the derivative of gammaln. Its "
                                          "derivative is polygamma(1, x)."),
    ("gamma", _gamma_vjp, "positive", "The gamma function. Its derivative is "
                                      "gamma(x) digamma(x)."),
    ("erf", _erf_vjp, "normal", "The error function. Its derivative is "
                                "2/sqrt(pi) exp(-x^2)."),
    ("erfc", _erfc_vjp, "normal", "1 - erf(x), accurate for large x."),
    ("erfinv", _erfinv_vjp, "unit", "The inverse of erf on (-1, 1) (+-inf at +-1, nan "
                                    "outside). Its derivative is sqrt(pi)/2 exp(ans^2)."),
    ("erfcinv", _erfcinv_vjp, "zero_two", "The inverse of erfc on (0, 2). Its derivative "
                                          "is -sqrt(pi)/2 exp(ans^2)."),
    ("expit", _expit_vjp, "wide", "The logistic sigmoid 1/(1 + exp(-x)). Its derivative "
                                  "is expit(x) expit(-x) (accurate in both tails)."),
    ("logit", _logit_vjp, "prob", "log(x / (1 - x)) on (0, 1) (+-inf at 0 and 1, nan "
                                  "outside). Its derivative is 1/(x (1 - x))."),
    ("ndtr", _ndtr_vjp, "normal", "The standard normal CDF Phi(x). Its derivative is the "
                                  "normal density."),
    ("log_ndtr", _log_ndtr_vjp, "wide", "log Phi(x), accurate for x << 0. Its derivative "
                                        "phi(x)/Phi(x) is computed as exp(-x^2/2 - ans)/"
                                        "sqrt(2 pi), finite where phi and Phi underflow."),
    ("ndtri", _ndtri_vjp, "prob", "The inverse of ndtr on (0, 1). Its derivative is "
                                  "sqrt(2 pi) exp(ans^2 / 2)."),
    ("i0", _i0_vjp, "normal", "The modified Bessel function of order 0 (also numpy.i0). "
                              "Its derivative is i1(x)."),
    ("i1", _i1_vjp, "normal", "The modified Bessel function of order 1. Its derivative "
                              "is i0(x) - i1(x)/x, 1/2 at x == 0 (the limit)."),
    ("i0e", _i0e_vjp, "nonzero", "exp(-|x|) i0(x). Its derivative is i1e(x) - sign(x) "
                                 "i0e(x); at x == 0, where |x| has a kink, sign(0) = 0 "
                                 "gives 0 (the mean of the one-sided derivatives +-1, as "
                                 "tapegrad's abs)."),
    ("i1e", _i1e_vjp, "nonzero", "exp(-|x|) i1(x). Its derivative is i0e(x) - i1e(x)/x - "
                                 "sign(x) i1e(x), 1/2 at x == 0."),
    ("entr", _entr_vjp, "positive", "-x log(x) for x > 0, 0 at 0, -inf for x < 0. Its "
                                    "derivative is -log(x) - 1 (+inf at 0, as PyTorch's "
                                    "torch.special.entr)."),
)

# (name, (x's partial, y's partial), doc): binary elementwise ops, SciPy's of that name.
_BINARY = (
    ("beta", (_d_beta_a, _d_beta_b),
     "B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b). d/da = B (digamma(a) - digamma(a + b)), "
     "likewise for b."),
    ("betaln", (_d_betaln_a, _d_betaln_b),
     "log|B(a, b)|. d/da = digamma(a) - digamma(a + b)."),
    ("xlogy", (_d_xlogy_x, _d_xlogy_y),
     "x log(y), 0 where x == 0 (also at y == 0). As PyTorch's torch.special.xlogy: d/dx = "
     "log(y), taken as 0 where x == 0 and y <= 0; d/dy = x / y, taken as 0 where x == 0."),
    ("xlog1py", (_d_xlog1py_x, _d_xlog1py_y),
     "x log(1 + y), 0 where x == 0. As PyTorch's torch.special.xlog1py: d/dx = log(1 + y), "
     "0 where x == 0 and y <= -1; d/dy = x / (1 + y), 0 where x == 0."),
    ("rel_entr", (_d_rel_entr_x, _d_rel_entr_y),
     "x log(x / y) for x, y > 0, 0 at x == 0 (y >= 0), inf otherwise. d/dx = log(x/y) + 1 "
     "(-inf at x == 0, the one-sided limit), d/dy = -x / y."),
    ("kl_div", (_d_kl_div_x, _d_kl_div_y),
     "x log(x / y) - x + y for x, y > 0, y at x == 0, inf otherwise. d/dx = log(x/y) (-inf "
     "at x == 0), d/dy = 1 - x/y."),
)


def _samples(draw, kind):
    a = {"positive": draw.positive, "normal": draw.normal, "nonzero": draw.nonzero,
         "unit": lambda *s: draw.uniform(-0.9, 0.9, *s),
         "zero_two": lambda *s: draw.uniform(0.1, 1.9, *s),
         "prob": lambda *s: draw.uniform(0.05, 0.95, *s),
         "wide": lambda *s: 4 * draw.normal(*s)}[kind]
    out = [(a(3, 4),), (a(2, 1, 3),), (np.asarray(a()),)]
    if kind == "wide":
        out.append((np.array([-30.0, -8.0, 0.0, 8.0]),))
    return out


def _binary_samples(a, b):
    return [(a(3, 4), b(3, 4)), (a(3, 4), b(4)), (a(2, 1, 3), b(4, 1)), (a(3), 1.5),
            (2.0, b(2, 2))]


# vmap's batching rules (tapegrad/_batching.py): inputs physical, the vmapped axis first;
# `axis` logical. The elementwise and order functions are batch="elementwise".

def _physical_axes(axis, ndim, name):
    """SciPy's `axis` (None: every axis) of a logical value with `ndim` axes, shifted past
    the vmapped axis."""
    return tuple(a + 1 for a in logical_axes(axis, ndim, name))


def _logsumexp_batch(inputs, batched, axis=None, keepdims=False):
    # a and b broadcast against each other, and the sum runs over their broadcast shape
    ndim = max(logical_ndim(v, b) for v, b in zip(inputs, batched))
    a, b = (pad_batched(v, ndim) if bv else v for v, bv in zip(inputs, batched))
    return tg.scipy_special_logsumexp(a, b, axis=_physical_axes(axis, ndim, "logsumexp"),
                                      keepdims=keepdims)


def _softmax_batch(name):
    def rule(inputs, batched, axis=None):
        (x,) = inputs
        return getattr(tg, name)(x, axis=_physical_axes(axis, x.ndim - 1, name))
    rule.__qualname__ = rule.__name__ = f"{name}_batch"
    return rule


def _register_elementwise(reg, draw, module):
    for name, vjp, kind, doc in _UNARY:
        op = reg(name, kernels={"cpu": scipy_kernel(getattr(sp, name))}, vjp=vjp,
                 jvp=diagonal_jvp(vjp), method=False, batch="elementwise",
                 save_inputs=(name not in ("erfinv", "erfcinv", "ndtri"),),
                 save_ans=name in ("gamma", "erfinv", "erfcinv", "expit", "log_ndtr",
                                   "ndtri", "i1", "i0e", "i1e"),
                 samples=_samples(draw, kind), doc=f"scipy.special.{name}: {doc}")
        setattr(module, name, op)
    for name, partials, doc in _BINARY:
        vjp, jvp = binary_rules(name, *partials)
        pos = draw.positive
        samples = _binary_samples(pos, pos)
        if name in ("xlogy", "xlog1py"):
            samples += [(draw.normal(3, 4), pos(3, 4)),
                        (np.array([0.0, 0.0, 1.0]), np.array([0.5, 2.0, 3.0]))]
        op = reg(name, kernels={"cpu": scipy_kernel(getattr(sp, name))}, vjp=vjp, jvp=jvp,
                 method=False, batch="elementwise", save_ans=name == "beta", samples=samples,
                 doc=f"scipy.special.{name}: {doc}")
        setattr(module, name, op)


def _register_orders(reg, draw, module):
    """The functions with an order argument first: polygamma(n, x), iv, jn, yn."""
    pos = draw.positive
    ops = (
        ("polygamma", _polygamma_vjp,
         [(1, pos(3, 4)), (np.array([0, 1, 2]), pos(2, 3)), (np.array([[0], [3]]), pos(3)),
          (2, np.asarray(pos()))],
         "polygamma(n, x): the n-th derivative of digamma (n = 0: digamma). Its derivative "
         "in x is polygamma(n + 1, x); n, an integer, is not differentiable (a tensor there that requires grad raises NotImplementedError)."),
        ("iv", _iv_vjp,
         [(1.5, pos(3, 4)), (np.array([0.0, 0.5, 2.0]), pos(2, 3)),
          (np.array([[1], [-2]]), pos(3))],
         "iv(v, x): the modified Bessel function of the first kind of real order v. Its "
         "derivative in x is (iv(v - 1, x) + iv(v + 1, x)) / 2; the order v is not "
         "differentiable (its derivative has no closed form): a v that requires grad raises "
         "NotImplementedError."),
        ("jn", _jn_vjp,
         [(1, draw.normal(3, 4)), (np.array([0, 1, 3]), draw.normal(2, 3)),
          (np.array([[2], [-1]]), draw.normal(3))],
         "jn(n, x): the Bessel function of the first kind of integer order n. Its "
         "derivative in x is (jn(n - 1, x) - jn(n + 1, x)) / 2; n is not differentiable (a tensor there that requires grad raises NotImplementedError)."),
        ("yn", _yn_vjp,
         [(1, pos(3, 4)), (np.array([0, 1, 3]), pos(2, 3)), (np.array([[2], [0]]), pos(3))],
         "yn(n, x): the Bessel function of the second kind of integer order n (x > 0). Its "
         "derivative in x is (yn(n - 1, x) - yn(n + 1, x)) / 2; n is not differentiable (a tensor there that requires grad raises NotImplementedError)."),
    )
    for name, vjp, samples, doc in ops:
        op = reg(name, kernels={"cpu": scipy_kernel(getattr(sp, name), orders=1)}, vjp=vjp,
                 jvp=diagonal_jvp(vjp, 1), differentiable=(1,), not_implemented=(0,),
                 method=False, batch="elementwise", save_ans=False, samples=samples, doc=f"scipy.special.{doc}")
        setattr(module, name, op)


def _register_reductions(reg, draw):
    n = draw.normal
    reg("scipy_special_logsumexp", kernels={"cpu": scipy_kernel(_logsumexp_kernel)},
        vjp=_logsumexp_vjp, jvp=_logsumexp_jvp, method=False, batch=_logsumexp_batch,
        samples=[(n(3, 4), 1.0), tg.Sample(n(3, 4), 1.0, axis=1),
                 tg.Sample(n(2, 3, 4), 1.0, axis=(0, 2), keepdims=True),
                 tg.Sample(n(3, 4), draw.positive(4), axis=-1),
                 tg.Sample(n(3, 1), draw.positive(3, 4), axis=0),
                 tg.Sample(10 * n(5), draw.positive(5))],
        doc="scipy.special.logsumexp(a, axis=None, b=None, keepdims=False) as the op "
            "(a, b, axis, keepdims), b = 1.0 when SciPy's is None: log(sum(b exp(a))) "
            "computed stably. d/da = b exp(a - ans), d/db = exp(a - ans).")
    reg("scipy_special_softmax", kernels={"cpu": scipy_kernel(sp.softmax)},
        vjp=_softmax_vjp, jvp=_softmax_jvp, method=False,
        batch=_softmax_batch("scipy_special_softmax"),
        samples=[(n(3, 4),), tg.Sample(n(3, 4), axis=1), tg.Sample(n(2, 3, 4), axis=(0, 2)),
                 tg.Sample(10 * n(5), axis=0)],
        doc="scipy.special.softmax(x, axis=None): exp(x) / sum(exp(x), axis), over all "
            "entries by default (SciPy's axis=None, unlike tg.softmax's -1).")
    reg("scipy_special_log_softmax", kernels={"cpu": scipy_kernel(sp.log_softmax)},
        vjp=_log_softmax_vjp, jvp=_log_softmax_jvp, method=False, save_inputs=(False,),
        batch=_softmax_batch("scipy_special_log_softmax"),
        samples=[(n(3, 4),), tg.Sample(n(3, 4), axis=1), tg.Sample(n(2, 3, 4), axis=(0, 2)),
                 tg.Sample(10 * n(5), axis=0)],
        doc="scipy.special.log_softmax(x, axis=None): x - logsumexp(x, axis), over all "
            "entries by default (SciPy's axis=None, unlike tg.log_softmax's -1).")


def register(registry):
    """Register this module's ops (called by the plugin's hook); each op is also set as
    this module's attribute of its SciPy name (``special.gammaln is tg.gammaln``)."""
    module = sys.modules[__name__]
    draw = Draw(seed=14)
    _register_elementwise(registry.register_op, draw, module)
    _register_orders(registry.register_op, draw, module)
    _register_reductions(registry.register_op, draw)
