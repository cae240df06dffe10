"""``tg.scipy.stats``: densities of common distributions, differentiable in every array
argument where the derivative is closed-form.

``norm``, ``multivariate_normal``, ``t``, ``gamma``, ``beta``, ``dirichlet``,
``poisson`` and ``chi2`` with SciPy's method names, argument order and defaults
(``norm.logpdf(x, loc=0, scale=1)``, ``t.logpdf(x, df, loc=0, scale=1)``, ...) and
SciPy's values outside the support (-inf logpdf, 0 pdf) and for invalid parameters
(nan). Each is composed of tapegrad ops (shape parameters through gammaln/digamma), so
gradients of any order work. Only the density functions listed in the README are
provided (no rvs, sf, ppf, fit).

The functions are registered in the flat table as ``scipy_stats_<dist>_<method>`` (so the
contract kit checks them); use them as ``tg.scipy.stats.<dist>.<method>``.

>>> import tapegrad as tg
>>> mu = tg.tensor(0.5, requires_grad=True)
>>> lp = tg.scipy.stats.norm.logpdf(tg.tensor([0.0, 1.0, 2.0]), loc=mu).sum()
>>> lp.backward()
>>> mu.grad                                  # sum(x - mu)
tensor(1.5)
>>> float(tg.scipy.stats.gamma.logpdf(-1.0, 2.0))   # outside the support
-inf
"""

import math

import numpy as np
import scipy.special as sp
import tapegrad as tg
from tapegrad._compile import compile_check

from . import linalg
from ._common import Draw

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_PI = math.log(math.pi)
_NAN, _NEG_INF = math.nan, -math.inf


def _fn(name, *args):
    """tg.<name>(*args), or a Python float when every argument is a Python number.

    NOTE: an op on Python numbers returns a 0-d float64 tensor, which (unlike a Python
    number, NumPy's "weak" scalar) would promote a float32 x to float64."""
    if all(isinstance(a, (int, float)) for a in args):
        return float(getattr(sp, name)(*args)) if name != "log" else math.log(args[0])
    return getattr(tg, name)(*args)


def _valid(cond, value):
    """value where cond holds, nan elsewhere (SciPy's answer for invalid parameters)."""
    if isinstance(cond, (bool, np.bool_)):
        return value if cond else value * _NAN
    return tg.where(cond, value, _NAN)


def _positive(p):
    """(p > 0, p with 1 where it is not): the check and a value safe to take logs of."""
    ok = p > 0
    if isinstance(ok, (bool, np.bool_)):
        return ok, (p if ok else 1.0)
    return ok, tg.where(ok, p, 1.0)


def _standardize(x, loc, scale):
    ok, s = _positive(scale)
    return (x - loc) / s, ok, _fn("log", s)


# ---------------------------------------------------------------------------------------
# norm
# ---------------------------------------------------------------------------------------

def _norm_logpdf(x, loc=0, scale=1):
    z, ok, log_s = _standardize(x, loc, scale)
    return _valid(ok, -0.5 * (z * z) - log_s - _HALF_LOG_2PI)


def _norm_pdf(x, loc=0, scale=1):
    return tg.exp(_norm_logpdf(x, loc, scale))


def _norm_cdf(x, loc=0, scale=1):
    z, ok, _ = _standardize(x, loc, scale)
    return _valid(ok, tg.ndtr(z))


def _norm_logcdf(x, loc=0, scale=1):
    z, ok, _ = _standardize(x, loc, scale)
    return _valid(ok, tg.log_ndtr(z))


# ---------------------------------------------------------------------------------------
# t, gamma, chi2, beta
# ---------------------------------------------------------------------------------------

def _t_logpdf(x, df, loc=0, scale=1):
    z, ok, log_s = _standardize(x, loc, scale)
    df_ok, d = _positive(df)
    half = (d + 1) * 0.5
    lp = (_fn("gammaln", half) - _fn("gammaln", d * 0.5) - 0.5 * (_fn("log", d) + _LOG_PI) - log_s
          - tg.xlog1py(half, z * z / d))
    return _valid(tg.logical_and(ok, df_ok), lp)


def _t_pdf(x, df, loc=0, scale=1):
    return tg.exp(_t_logpdf(x, df, loc, scale))


def _gamma_logpdf(x, a, loc=0, scale=1):
    y, ok, log_s = _standardize(x, loc, scale)
    a_ok, a = _positive(a)
    inside = y >= 0
    ys = tg.where(inside, y, 1.0)
    lp = tg.xlogy(a - 1, ys) - ys - _fn("gammaln", a) - log_s
    return _valid(tg.logical_and(ok, a_ok), tg.where(inside, lp, _NEG_INF))


def _gamma_pdf(x, a, loc=0, scale=1):
    return tg.exp(_gamma_logpdf(x, a, loc, scale))


def _chi2_logpdf(x, df, loc=0, scale=1):
    return _gamma_logpdf(x, df * 0.5, loc, scale * 2.0)


def _chi2_pdf(x, df, loc=0, scale=1):
    return tg.exp(_chi2_logpdf(x, df, loc, scale))


def _beta_logpdf(x, a, b, loc=0, scale=1):
    y, ok, log_s = _standardize(x, loc, scale)
    a_ok, a = _positive(a)
    b_ok, b = _positive(b)
    inside = tg.logical_and(y >= 0, y <= 1)
    ys = tg.where(inside, y, 0.5)
    lp = tg.xlog1py(b - 1, -ys) + tg.xlogy(a - 1, ys) - _fn("betaln", a, b) - log_s
    valid = tg.logical_and(ok, tg.logical_and(a_ok, b_ok))
    return _valid(valid, tg.where(inside, lp, _NEG_INF))


def _beta_pdf(x, a, b, loc=0, scale=1):
    return tg.exp(_beta_logpdf(x, a, b, loc, scale))


# ---------------------------------------------------------------------------------------
# poisson (k is not differentiable)
# ---------------------------------------------------------------------------------------

def _poisson_logpmf(k, mu, loc=0):
    k = k.detach() if isinstance(k, tg.Tensor) else tg.tensor(np.asarray(k, dtype=float))
    k = k - loc
    # NOTE: which k are whole numbers is computed with tensor ops, not read off k's values
    # on the host: a mask built from host values is a constant to tg.compile, and a replay
    # with other k gave the recording's support (logpmf(1.5) finite).
    support = tg.logical_and(k >= 0, k == tg.floor(k))
    ks = tg.where(support, k, 0.0)
    lp = tg.xlogy(ks, mu) - tg.gammaln(ks + 1) - mu
    return _valid(mu >= 0, tg.where(support, lp, _NEG_INF))


def _poisson_pmf(k, mu, loc=0):
    return tg.exp(_poisson_logpmf(k, mu, loc))


# ---------------------------------------------------------------------------------------
# dirichlet (SciPy's layout: the components along the FIRST axis of x)
# ---------------------------------------------------------------------------------------

def _dirichlet_x(x, alpha):
    """x with its last component completed (1 - the sum of the others) when it has one
    entry fewer than alpha, as SciPy does; checked to lie in the simplex."""
    k = np.shape(alpha)[0] if np.ndim(alpha) == 1 else None
    if k is None:
        raise ValueError(f"dirichlet: alpha must be a vector, got shape {np.shape(alpha)}")
    if isinstance(alpha, tg.Tensor):
        compile_check(_check_alpha, alpha)   # (its values: checked on every replay too)
    else:
        _check_alpha(np.asarray(alpha))
    x = x if isinstance(x, tg.Tensor) else tg.tensor(np.asarray(x, dtype=float))
    if x.shape[0] == k - 1:
        rest = 1 - tg.sum(x, axis=0, keepdims=True)
        x = tg.concatenate([x, rest], axis=0)
    elif x.shape[0] != k:
        raise ValueError(f"dirichlet: x must have {k} or {k - 1} entries along its first "
                         f"axis to match alpha of shape ({k},), got shape {x.shape}")
    compile_check(_check_simplex, x)
    return x


def _check_alpha(av):
    if not np.all(av > 0):                    # SciPy refuses too (else: a silent NaN)
        raise ValueError(f"dirichlet: all parameters alpha must be greater than 0, got "
                         f"{av.tolist()}")


def _check_simplex(xv):
    if np.any(xv < 0) or np.any(xv > 1) or np.any(np.abs(xv.sum(axis=0) - 1) > 1e-9):
        raise ValueError("dirichlet: each x must lie within the simplex (entries in "
                         "[0, 1] that sum to 1 along the first axis)")


def _dirichlet_logpdf(x, alpha):
    x = _dirichlet_x(x, alpha)
    alpha = _as_tensor(alpha, x)
    column = tg.reshape(alpha, (-1,) + (1,) * (x.ndim - 1))     # against x's first axis
    norm = tg.gammaln(tg.sum(alpha)) - tg.sum(tg.gammaln(alpha))
    return tg.sum(tg.xlogy(column - 1, x), axis=0) + norm


def _dirichlet_pdf(x, alpha):
    return tg.exp(_dirichlet_logpdf(x, alpha))


# ---------------------------------------------------------------------------------------
# multivariate_normal
# ---------------------------------------------------------------------------------------

def _as_tensor(v, like):
    """v as a constant tensor beside `like`, in NumPy's promoted dtype (a Python number
    takes like's dtype, as NumPy's "weak" scalars do)."""
    if isinstance(v, tg.Tensor):
        return v
    if isinstance(v, (int, float)):
        dtype = like.dtype
    else:
        dtype = np.result_type(np.asarray(v), like.dtype)
        dtype = dtype if dtype.kind == "f" else np.dtype(np.float64)
    return tg.tensor(np.asarray(v, dtype=dtype), device=like.device)


def _mvn_logpdf(x, mean=None, cov=1):
    x = x if isinstance(x, tg.Tensor) else tg.tensor(np.asarray(x, dtype=float))
    cov = _as_tensor(cov, x)
    # SciPy's dimension: mean's size, else a matrix cov's, else 1.
    if mean is not None:
        d = int(np.prod(np.shape(mean)))
    else:
        d = cov.shape[0] if cov.ndim == 2 else 1
    if cov.ndim == 0:
        cov = cov * tg.tensor(np.eye(d, dtype=cov.dtype), device=x.device)
    elif cov.ndim == 1 and cov.shape[0] == d:
        cov = tg.reshape(cov, (1, d)) * tg.tensor(np.eye(d, dtype=cov.dtype), device=x.device)
    elif cov.ndim != 2 or cov.shape != (d, d):
        raise ValueError(f"multivariate_normal: cov must be a number, a vector of length "
                         f"{d} or a ({d}, {d}) matrix for mean of size {d}, got shape "
                         f"{cov.shape}")
    # SciPy's reading of x: a number is one coordinate; with d == 1 a vector is N points,
    # else one point; otherwise the last axis holds the coordinates.
    if x.ndim == 0:
        x = tg.reshape(x, (1,))
    if x.ndim == 1 and (d == 1 or x.shape[0] == d):    # else: the length error below
        x = tg.reshape(x, (-1, 1) if d == 1 else (1, d))
    if x.shape[-1] != d:
        raise ValueError(f"multivariate_normal: x's last axis must have length {d} to "
                         f"match cov {cov.shape}, got shape {x.shape}")
    lead = x.shape[:-1]
    diff = tg.reshape(x, (-1, d)) - (0.0 if mean is None else mean)
    L = linalg.cholesky(cov, lower=True)
    z = linalg.solve_triangular(L, tg.swapaxes(diff, 0, 1), lower=True)     # (d, N)
    idx = np.arange(d)
    logdet = 2 * tg.sum(tg.log(L[idx, idx]))
    lp = -0.5 * (tg.sum(z * z, axis=0) + logdet) - d * _HALF_LOG_2PI
    return tg.reshape(lp, tuple(n for n in lead if n != 1))      # SciPy squeezes


def _mvn_pdf(x, mean=None, cov=1):
    return tg.exp(_mvn_logpdf(x, mean, cov))


# ---------------------------------------------------------------------------------------
# The public objects and their registration
# ---------------------------------------------------------------------------------------

class _Distribution:
    """A SciPy distribution object holding its differentiable density methods."""

    def __init__(self, name, **methods):
        self._name = name
        for method, fn in methods.items():
            setattr(self, method, fn)

    def __repr__(self):
        return f"<tg.scipy.stats.{self._name}>"


def _public(dist, method, fn, doc):
    fn.__name__ = f"{method}"
    fn.__qualname__ = f"{dist}.{method}"
    fn.__doc__ = doc
    return fn


norm = _Distribution(
    "norm",
    pdf=_public("norm", "pdf", _norm_pdf, "norm.pdf(x, loc=0, scale=1): the normal density."),
    logpdf=_public("norm", "logpdf", _norm_logpdf, "norm.logpdf(x, loc=0, scale=1)."),
    cdf=_public("norm", "cdf", _norm_cdf, "norm.cdf(x, loc=0, scale=1), through ndtr."),
    logcdf=_public("norm", "logcdf", _norm_logcdf, "norm.logcdf(x, loc=0, scale=1), "
                   "through log_ndtr (accurate far in the left tail)."))
t = _Distribution(
    "t", pdf=_public("t", "pdf", _t_pdf, "t.pdf(x, df, loc=0, scale=1): Student's t."),
    logpdf=_public("t", "logpdf", _t_logpdf, "t.logpdf(x, df, loc=0, scale=1)."))
gamma = _Distribution(
    "gamma", pdf=_public("gamma", "pdf", _gamma_pdf, "gamma.pdf(x, a, loc=0, scale=1)."),
    logpdf=_public("gamma", "logpdf", _gamma_logpdf, "gamma.logpdf(x, a, loc=0, scale=1): "
                   "-inf below loc."))
chi2 = _Distribution(
    "chi2", pdf=_public("chi2", "pdf", _chi2_pdf, "chi2.pdf(x, df, loc=0, scale=1)."),
    logpdf=_public("chi2", "logpdf", _chi2_logpdf, "chi2.logpdf(x, df, loc=0, scale=1): "
                   "gamma.logpdf(x, df/2, loc, 2 scale)."))
beta = _Distribution(
    "beta", pdf=_public("beta", "pdf", _beta_pdf, "beta.pdf(x, a, b, loc=0, scale=1)."),
    logpdf=_public("beta", "logpdf", _beta_logpdf, "beta.logpdf(x, a, b, loc=0, scale=1): "
                   "-inf outside [loc, loc + scale]."))
poisson = _Distribution(
    "poisson", pmf=_public("poisson", "pmf", _poisson_pmf, "poisson.pmf(k, mu, loc=0)."),
    logpmf=_public("poisson", "logpmf", _poisson_logpmf, "poisson.logpmf(k, mu, loc=0): "
                   "differentiable in mu; k (not differentiable) off the non-negative "
                   "integers gives -inf."))
dirichlet = _Distribution(
    "dirichlet",
    pdf=_public("dirichlet", "pdf", _dirichlet_pdf, "dirichlet.pdf(x, alpha)."),
    logpdf=_public("dirichlet", "logpdf", _dirichlet_logpdf,
                   "dirichlet.logpdf(x, alpha): x's FIRST axis holds the components (as "
                   "SciPy); with one component fewer than alpha, the last is 1 - the sum "
                   "of the others. x off the simplex raises a ValueError (as SciPy)."))
multivariate_normal = _Distribution(
    "multivariate_normal",
    pdf=_public("multivariate_normal", "pdf", _mvn_pdf,
                "multivariate_normal.pdf(x, mean=None, cov=1)."),
    logpdf=_public("multivariate_normal", "logpdf", _mvn_logpdf,
                   "multivariate_normal.logpdf(x, mean=None, cov=1): through the Cholesky "
                   "factor of cov (tg.scipy.linalg.cholesky and solve_triangular); cov a "
                   "number, a vector (the diagonal) or a positive definite matrix."))


def register(registry):
    """Register every density as a function, so the contract kit checks it."""
    draw = Draw(seed=16)
    n, pos = draw.normal, draw.positive
    S = tg.Sample
    simplex = draw.uniform(0.1, 1.0, 3, 4)
    simplex /= simplex.sum(axis=0) * 1.25            # 3 of 4 components, sum 0.8
    spd = draw.spd(3)
    cases = {
        "norm": (norm, ("pdf", "logpdf", "cdf", "logcdf"),
                 [S(n(3, 4)), S(n(3, 4), n(4), pos(3, 1)), S(n(5), loc=0.5, scale=2.0),
                  S(4 * n(4), pos(4))]),
        "t": (t, ("pdf", "logpdf"),
              [S(n(3, 4), pos(4) + 1), S(n(5), 3.0, n(5), pos(5)),
               S(n(4), 2.0, loc=0.5, scale=2.0)]),
        "gamma": (gamma, ("pdf", "logpdf"),
                  [S(pos(3, 4), pos(4) + 1), S(pos(5) + 1, 2.5, draw.uniform(0, 0.5, 5), pos(5)),
                   S(pos(3) + 1, 0.7, scale=2.0)]),
        "chi2": (chi2, ("pdf", "logpdf"),
                 [S(pos(3, 4), pos(4) + 2), S(pos(5) + 1, 3.0, 0.2, pos(5))]),
        "beta": (beta, ("pdf", "logpdf"),
                 [S(draw.uniform(0.1, 0.9, 3, 4), pos(4), pos(3, 1)),
                  S(draw.uniform(0.2, 0.8, 5), 2.0, 3.0, draw.uniform(-0.1, 0.1, 5),
                    draw.uniform(1.1, 1.5, 5)),
                  S(draw.uniform(0.2, 0.8, 3), 0.5, 0.7, loc=0.1, scale=1.0)]),
        "poisson": (poisson, ("pmf", "logpmf"),
                    [S(np.array([0.0, 1.0, 3.0, 7.0]), pos(4) * 2),
                     S(np.array([[0.0], [2.0]]), pos(3), 0)]),
        "dirichlet": (dirichlet, ("pdf", "logpdf"),
                      [S(simplex[:, 0], pos(4)), S(simplex, pos(4))]),
        "multivariate_normal": (multivariate_normal, ("pdf", "logpdf"),
                                [S(n(3), n(3), spd), S(n(4, 3), n(3), spd),
                                 S(n(2, 2), n(2), pos(2)), S(n(2, 2), None, spd[:2, :2]), S(n(5), 0.5, 2.0)]),
    }
    for dist, (obj, methods, samples) in cases.items():
        diff = {"poisson": (1,), "dirichlet": None}.get(dist)
        for method in methods:
            registry.register_function(f"scipy_stats_{dist}_{method}", getattr(obj, method),
                                       samples=samples, method=False, differentiable=diff)
