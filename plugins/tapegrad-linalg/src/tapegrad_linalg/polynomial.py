"""NumPy's legacy polynomial functions (``np.poly``, ``np.polyval``, ``np.polyfit``, ...),
differentiable in the coefficients, the points and the roots.

A polynomial is the 1-D array of its coefficients, highest power first, as in NumPy.
Each function is a composition of shape, elementwise and linalg ops (``polymul`` is
``tg.convolve``, ``polyfit`` a least-squares solve through ``tg.linalg.lstsq``), so each
is differentiable to any order. ``np.poly1d`` objects are not supported (pass
``p.coeffs``). Complex coefficients, roots, points and data work everywhere, with
NumPy's values and dtypes: the functions compose complex-correct ops, and ``roots`` (the
companion matrix's eigenvalues, NumPy's kernel) is an op whose gradient is the implicit
derivative of ``p(r) = 0`` (see Note: [roots gradient]).

>>> import tapegrad as tg
>>> p = tg.tensor([1., -3., 2.], requires_grad=True)     # x**2 - 3x + 2
>>> tg.polyval(p, 3.0).item()
2.0
>>> tg.polyder(p).tolist(), tg.polyint(p).tolist()
([2.0, -3.0], [0.3333333333333333, -1.5, 2.0, 0.0])
>>> q, r = tg.polydiv(p, [1., -1.])                     # (x - 1)(x - 2)
>>> q.tolist(), r.tolist()
([1.0, -2.0], [0.0])
"""

from __future__ import annotations

import operator
import warnings

import numpy as np
import tapegrad as tg
from tapegrad._compile import compile_check, run_eagerly

from ._helpers import _conj, _rand

__all__ = ["poly", "polyadd", "polyder", "polydiv", "polyfit", "polyint", "polymul",
           "polysub", "polyval", "roots", "register"]


def _tensors(*xs):
    """The arguments as tensors, the non-tensors placed on the first tensor's device."""
    for x in xs:
        if isinstance(x, np.poly1d):
            raise TypeError("np.poly1d is not supported by tapegrad's polynomial functions; "
                            "pass its coefficients (p.coeffs)")
    ref = next((x for x in xs if isinstance(x, tg.Tensor)), None)
    dev = None if ref is None else ref.device
    return [x if isinstance(x, tg.Tensor) else tg.asarray(x, device=dev) for x in xs]


def _coefficients(p, op, name="p", allow_complex=False):
    """p as a 1-D tensor of coefficients (a scalar is a constant polynomial); complex ones
    only where `allow_complex` (a function composed of complex-correct ops only)."""
    if isinstance(p, np.poly1d):
        raise TypeError(f"{op}: np.poly1d is not supported; pass its coefficients "
                        f"({name}.coeffs)")
    p = p if isinstance(p, tg.Tensor) else tg.asarray(p)
    if p.dtype.kind == "c" and not allow_complex:
        raise TypeError(f"{op}: complex coefficients are not supported (dtype {p.dtype})")
    if p.ndim == 0:
        p = tg.reshape(p, (1,))
    if p.ndim != 1:
        raise ValueError(f"{op}: {name} must be a 1-D sequence of coefficients, got shape "
                         f"{p.shape}")
    return p


def _count_down(n, p):
    """n, n - 1, ..., 1 as a constant in p's float or complex dtype (NumPy's int64 arange
    would promote float32 coefficients to float64, complex64 to complex128; tapegrad keeps
    float32 and complex64)."""
    dtype = p.dtype if p.dtype.kind in "fc" else np.int64
    return tg.asarray(np.arange(n, 0, -1, dtype=dtype), device=p.device)


def _float(x):
    """``x + 0.0`` as NumPy writes it: floats and complex values keep their dtype
    (complex64 too), integers and bools become float64."""
    return x if x.dtype.kind in "fc" else x.astype(np.float64)


# ---------------------------------------------------------------------------------------
# polyval, polyadd, polysub, polymul
# ---------------------------------------------------------------------------------------

def polyval(p, x):
    """The polynomial with coefficients `p` (highest power first) at `x`, as
    ``np.polyval``, by Horner's rule (``y = y * x + p[i]``, as NumPy computes it).
    Differentiable in p and x.

    >>> import tapegrad as tg
    >>> tg.polyval([3., 0., 1.], tg.tensor([1., 2.])).tolist()
    [4.0, 13.0]
    """
    p, x = _tensors(p, x)
    p = _coefficients(p, "polyval", allow_complex=True)
    y = tg.zeros_like(x)
    for i in range(p.shape[0]):
        y = y * x + p[i]
    return y


def _padded(a1, a2):
    """The two coefficient arrays with zeros in front of the shorter one."""
    diff = a2.shape[0] - a1.shape[0]
    if diff > 0:
        a1 = tg.concatenate([tg.zeros((diff,), dtype=a1.dtype, device=a1.device), a1])
    elif diff < 0:
        a2 = tg.concatenate([tg.zeros((-diff,), dtype=a2.dtype, device=a2.device), a2])
    return a1, a2


def polyadd(a1, a2):
    """The sum of two polynomials, as ``np.polyadd`` (the shorter padded with leading
    zeros).

    >>> import tapegrad as tg
    >>> tg.polyadd([1., 2.], [9., 5., 4.]).tolist()
    [9.0, 6.0, 6.0]
    """
    a1, a2 = _tensors(a1, a2)
    a1, a2 = _padded(_coefficients(a1, "polyadd", "a1", allow_complex=True),
                     _coefficients(a2, "polyadd", "a2", allow_complex=True))
    return a1 + a2


def polysub(a1, a2):
    """The difference ``a1 - a2`` of two polynomials, as ``np.polysub``.

    >>> import tapegrad as tg
    >>> tg.polysub([2., 10., -2.], [3., 10., -4.]).tolist()
    [-1.0, 0.0, 2.0]
    """
    a1, a2 = _tensors(a1, a2)
    a1, a2 = _padded(_coefficients(a1, "polysub", "a1", allow_complex=True),
                     _coefficients(a2, "polysub", "a2", allow_complex=True))
    return a1 - a2


def _trim_leading_zeros(p):
    """p without its leading zero coefficients (all zeros: its last one), as np.poly1d
    stores a polynomial. The dropped zeros get no gradient."""
    nonzero = np.flatnonzero((p != 0).cpu().numpy())
    start = int(nonzero[0]) if nonzero.size else p.shape[0] - 1
    return p[start:] if start else p


def polymul(a1, a2):
    """The product of two polynomials, as ``np.polymul``: ``tg.convolve(a1, a2)`` of the
    coefficients without their leading zeros (NumPy's polymul makes np.poly1d objects of
    them first, which drops those; they get no gradient).

    >>> import tapegrad as tg
    >>> tg.polymul([1., 2., 3.], [9., 5., 1.]).tolist()
    [9.0, 23.0, 38.0, 17.0, 3.0]
    """
    a1, a2 = _tensors(a1, a2)
    a1 = _coefficients(a1, "polymul", "a1", allow_complex=True)
    a2 = _coefficients(a2, "polymul", "a2", allow_complex=True)
    return tg.convolve(_trim_leading_zeros(a1), _trim_leading_zeros(a2))


# ---------------------------------------------------------------------------------------
# polyder, polyint, polydiv, poly
# ---------------------------------------------------------------------------------------

def _order(m, op):
    try:
        m = operator.index(m)
    except TypeError:
        raise TypeError(f"{op}: the order m must be an integer, got {m!r}") from None
    if m < 0:
        raise ValueError(f"{op}: order of derivative must be positive (see polyint), got "
                         f"{m}" if op == "polyder" else
                         f"{op}: order of integral must be positive (see polyder), got {m}")
    return m


def polyder(p, m=1):
    """The m-th derivative of the polynomial p, as ``np.polyder``.

    >>> import tapegrad as tg
    >>> tg.polyder([1., 1., 1., 1.], 2).tolist()
    [6.0, 2.0]
    """
    m = _order(m, "polyder")
    p = _coefficients(p, "polyder", allow_complex=True)
    for _ in range(m):
        n = p.shape[0] - 1
        p = p[:-1] * _count_down(n, p)
    return p


def polyint(p, m=1, k=None):
    """The m-th antiderivative of the polynomial p, as ``np.polyint``: the integration
    constants `k` (a scalar for all of them, or m of them, the first integration's first;
    default 0) are differentiable too.

    >>> import tapegrad as tg
    >>> tg.polyint([3., 2., 1.], k=5.).tolist()
    [1.0, 1.0, 1.0, 5.0]
    """
    m = _order(m, "polyint")
    p = _coefficients(p, "polyint", allow_complex=True)
    if k is None:
        k = tg.zeros((m,), dtype=p.dtype if p.dtype.kind == "f" else np.float64,
                     device=p.device)
    (k,) = _tensors(k) if not isinstance(k, tg.Tensor) else (k,)
    if k.device != p.device:
        k = k.to(p.device)
    if k.ndim == 0:
        k = tg.reshape(k, (1,))
    if k.ndim != 1:
        raise ValueError(f"polyint: k must be a scalar or a 1-D sequence, got shape {k.shape}")
    if k.shape[0] == 1 and m > 1:
        k = tg.broadcast_to(k, (m,))
    if k.shape[0] < m:
        raise ValueError("polyint: k must be a scalar or a rank-1 array of length 1 or >m.")
    for i in range(m):
        y = p / _count_down(p.shape[0], p)
        kk = k[i:i + 1]
        dt = np.result_type(y.dtype, kk.dtype)
        p = tg.concatenate([y.astype(dt) if y.dtype != dt else y,
                            kk.astype(dt) if kk.dtype != dt else kk])
    return p


def polydiv(u, v):
    """The quotient and remainder of the polynomial division u / v, as ``np.polydiv``
    (long division; the remainder's leading entries that are zero to rtol 1e-14 are
    dropped, as NumPy does). Differentiable in u and v; complex coefficients as NumPy's
    (the division is holomorphic, its gradient conjugates, PyTorch's convention).

    >>> import tapegrad as tg
    >>> q, r = tg.polydiv([3., 5., 2.], [2., 1.])
    >>> q.tolist(), r.tolist()
    ([1.5, 1.75], [0.25])
    """
    u, v = _tensors(u, v)
    u = _float(_coefficients(u, "polydiv", "u", allow_complex=True))
    v = _float(_coefficients(v, "polydiv", "v", allow_complex=True))
    dt = np.result_type(u.dtype, v.dtype)
    u, v = (t if t.dtype == dt else t.astype(dt) for t in (u, v))
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = 1.0 / v[0]
    # NOTE: the long division element by element (NumPy's r[k:k+n+1] -= d*v, written out):
    # each entry is a tensor of its own, so no write into a tensor is recorded.
    r = [u[i] for i in range(m + 1)]
    vs = [v[j] for j in range(n + 1)]
    q = []
    for k in range(m - n + 1):
        d = scale * r[k]
        q.append(d)
        for j in range(n + 1):
            r[k + j] = r[k + j] - d * vs[j]
    run_eagerly("polydiv: the remainder's leading entries are dropped by their values "
                "(NumPy's allclose test)")
    while len(r) > 1 and np.allclose(r[0].item(), 0, rtol=1e-14):
        r = r[1:]
    quotient = tg.stack(q) if q else tg.zeros((1,), dtype=dt, device=u.device)
    return quotient, tg.stack(r)


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots, as ``np.poly``
    (``prod(x - r)``, by repeated ``convolve``); a square matrix gives those of its
    characteristic polynomial (through ``tg.linalg.eigvals``, complex where NumPy's is).
    No roots give 1.0. Complex roots give complex coefficients, except that, as NumPy's,
    the result is real (its real part) when the roots are closed under conjugation
    exactly (conjugate pairs, or a real matrix's complex eigenvalues). Differentiable in
    the roots (and the matrix).

    >>> import tapegrad as tg
    >>> tg.poly(tg.tensor([1., 2.])).tolist()
    [1.0, -3.0, 2.0]
    >>> tg.poly(tg.tensor([1 + 2j, 1 - 2j])).tolist()      # a conjugate pair: real
    [1.0, -2.0, 5.0]
    """
    z = seq_of_zeros if isinstance(seq_of_zeros, tg.Tensor) else tg.asarray(seq_of_zeros)
    if z.ndim == 0:
        z = tg.reshape(z, (1,))
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        z = tg.linalg.eigvals(z)
    elif z.ndim == 1:
        if z.dtype.kind not in "fc":
            z = z.astype(np.float64)     # np.mintypecode: integers compute in float64
    else:
        raise ValueError(f"poly: input must be 1d or non-empty square 2d array, got shape "
                         f"{z.shape}")
    if z.shape[0] == 0:
        return 1.0
    a = tg.ones((1,), dtype=z.dtype, device=z.device)
    one = tg.ones((1,), dtype=z.dtype, device=z.device)
    for i in range(z.shape[0]):
        a = tg.convolve(a, tg.concatenate([one, -z[i:i + 1]]), "full")
    if a.dtype.kind == "c":
        # NumPy's rule: roots equal (exactly) to their conjugates as a multiset give the
        # real part (a decision on the values; the real part's gradient is the projection)
        run_eagerly("poly: whether the coefficients of complex roots are real depends on "
                    "the roots' values (NumPy's conjugate-pair test)")
        values = np.asarray(z.detach().cpu().numpy(), complex)
        if np.all(np.sort(values) == np.sort(values.conjugate())):
            a = tg.real(a)
    return a


# ---------------------------------------------------------------------------------------
# roots
# ---------------------------------------------------------------------------------------

# NOTE: [roots gradient] np.roots computes the eigenvalues of the companion matrix; their
# gradient is not taken through eigvals but by implicit differentiation of p(r) = 0 at
# each (simple) root r of p = p_0 x^n + ... + p_n:
#     dr = -(sum_k dp_k r^(n-k)) / p'(r),
# holomorphic in p, so the VJP is  grad p_k = -sum_i g_i conj(r_i^(n-k) / p'(r_i))
# (PyTorch's convention: g conj(f')). The rules are written with tapegrad ops of `ans` (the
# roots, a recorded output) and p, so their derivative (the second order) chains through
# the roots again. The zero roots NumPy appends for trailing zero coefficients are roots
# of the full p, and the rules use it: a trailing zero coefficient moves a simple zero
# root (dr = -dp_n / p_{n-1}). Leading zero coefficients are dropped before the op (as
# NumPy's) and get no gradient. At a repeated root p'(r) = 0 and the derivative is
# infinite: where p'(r) is exactly 0 or two roots are exactly equal the backward raises
# LinAlgError (as eig's at an exactly repeated eigenvalue does); near-repeated roots give
# the large, correct derivative of the simple roots.

def _roots_kernel(p):
    return np.roots(p)


def _root_terms(ans, p):
    """(V, dp): V[i, k] = r_i^(n-k) (k = 0..n) and dp[i] = p'(r_i), as tapegrad ops."""
    n = p.shape[0] - 1
    one = tg.ones(ans.shape, dtype=ans.dtype, device=ans.device)
    powers = [one]
    for _ in range(n):
        powers.append(powers[-1] * ans)
    V = tg.stack(powers[::-1], axis=1)                      # r^n, ..., r, 1
    dp = polyval(polyder(p), ans)
    return V, dp


def _refuse_repeated(r, dp):
    if np.any(dp == 0) or (r.size > 1 and np.any(np.diff(np.sort(r)) == 0)):
        raise np.linalg.LinAlgError(
            f"roots: the polynomial has a repeated root (p'(r) = 0), where the roots are "
            f"not differentiable (their derivative is infinite); roots {r.tolist()}")


def _roots_vjp(g, ans, p):
    V, dp = _root_terms(ans, p)
    compile_check(_refuse_repeated, ans, dp)      # (a tg.compile replay checks it too)
    weights = g / _conj(dp)                                 # (R,)
    return (-tg.sum(_conj(V) * tg.reshape(weights, (-1, 1)), axis=0),)


def _roots_jvp(t, ans, p):
    V, dp = _root_terms(ans, p)
    return -tg.sum(V * t[0], axis=1) / dp


def roots(p):
    """The roots of the polynomial with coefficients `p` (highest power first), as
    ``np.roots``: the eigenvalues of its companion matrix (NumPy's kernel, so the values
    are NumPy's bit for bit), real where they all are and complex otherwise (complex64
    kept for float32/complex64 coefficients); leading zeros are dropped and trailing ones
    give zero roots. Differentiable in p by implicit differentiation of p(r) = 0 (Note:
    [roots gradient]), to any order; at a repeated root the derivative is infinite and the
    backward raises LinAlgError.

    >>> import tapegrad as tg
    >>> tg.roots([1., -3., 2.])                              # (x - 1)(x - 2)
    tensor([2., 1.])
    >>> tg.roots(tg.tensor([1., 0., 4.])).numpy().imag       # x^2 + 4: complex roots
    array([ 2., -2.])
    """
    (p,) = _tensors(p)
    run_eagerly("roots: which leading and trailing coefficients are zero (NumPy's roots "
                "drops them) is read from p's values")
    if p.ndim == 0:
        raise TypeError("roots: p must be a 1-D sequence of coefficients, got a 0-d value "
                        "(np.roots refuses it too)")
    if p.ndim != 1:
        raise ValueError(f"roots: Input must be a rank-1 array, got shape {p.shape}")
    nonzero = np.flatnonzero(p.detach().cpu().numpy())
    if nonzero.size == 0:
        return tg.asarray(np.array([]), device=p.device)    # NumPy's: float64, empty
    p = _float(p[int(nonzero[0]):] if nonzero[0] else p)
    if p.shape[0] == 1:                                     # a nonzero constant: no roots
        return tg.asarray(np.roots(p.detach().cpu().numpy()), device=p.device)
    return tg._roots(p)


# ---------------------------------------------------------------------------------------
# polyfit
# ---------------------------------------------------------------------------------------

def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial fit of degree `deg` to the points (x, y), as
    ``np.polyfit``: the coefficients, highest power first (a (deg + 1, K) array for a
    2-D y of K data sets). `w` weights the residuals (``w[i] * (y[i] - p(x[i]))``, use
    1/sigma). NumPy's computation: the Vandermonde matrix with scaled columns, solved by
    ``tg.linalg.lstsq``, so it is differentiable in x, y and w. Complex x, y or w are
    NumPy's too (its column scale ``sqrt(sum(lhs * lhs))`` does not conjugate, and
    tapegrad computes the same). ``full=True`` and ``cov`` are not supported (a
    ValueError); a rank-deficient fit refuses a differentiable call (lstsq's rule).

    >>> import tapegrad as tg
    >>> x, y = tg.tensor([0., 1., 2., 3.]), tg.tensor([1., 3., 5., 7.])
    >>> tg.polyfit(x, y, 1).numpy().round(8).tolist()
    [2.0, 1.0]
    """
    if full:
        raise ValueError("polyfit: full=True (residuals, rank, singular values) is not "
                         "supported; call tg.linalg.lstsq on tg.vander(x, deg + 1) for them")
    if cov is not False:
        raise ValueError("polyfit: cov is not supported (only cov=False)")
    order = operator.index(deg) + 1
    x, y, w = _tensors(x, y, w) if w is not None else (*_tensors(x, y), None)
    x, y = _float(x), _float(y)
    if deg < 0:
        raise ValueError("polyfit: expected deg >= 0")
    if x.ndim != 1:
        raise TypeError(f"polyfit: expected 1D vector for x, got shape {x.shape}")
    if x.size == 0:
        raise TypeError("polyfit: expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise TypeError(f"polyfit: expected 1D or 2D array for y, got shape {y.shape}")
    if x.shape[0] != y.shape[0]:
        raise TypeError(f"polyfit: expected x and y to have same length, got {x.shape[0]} "
                        f"and {y.shape[0]}")
    if rcond is None:
        rcond = len(x) * np.finfo(x.dtype).eps      # (complex x: its real part's eps)
    lhs = tg.vander(x, order)
    rhs = y
    if w is not None:
        w = _float(w)
        if w.ndim != 1:
            raise TypeError(f"polyfit: expected a 1-d array for weights, got shape {w.shape}")
        if w.shape[0] != y.shape[0]:
            raise TypeError(f"polyfit: expected w and y to have the same length, got "
                            f"{w.shape[0]} and {y.shape[0]}")
        for name, t in (("the Vandermonde matrix of x", lhs), ("y", rhs)):
            if w.dtype.kind == "c" and t.dtype.kind != "c":
                # NumPy multiplies in place (lhs *= w): complex weights into real values
                raise TypeError(f"polyfit: complex weights ({w.dtype}) need complex x and "
                                f"y: NumPy cannot cast their product into {name} "
                                f"({t.dtype}) in place, and refuses it too")
        lhs = lhs * tg.reshape(w, (-1, 1))
        rhs = rhs * (tg.reshape(w, (-1, 1)) if rhs.ndim == 2 else w)
    scale = tg.sqrt(tg.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, _resids, rank, _s = tg.linalg.lstsq(lhs, rhs, rcond)
    c = tg.transpose(tg.transpose(c) / scale)
    if rank != order:
        warnings.warn("polyfit: the fit may be poorly conditioned (rank "
                      f"{rank} < {order} coefficients)", np.exceptions.RankWarning,
                      stacklevel=2)
    return c


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

def register(registry):
    """Register this module's functions with `registry` (called from the linalg plugin's
    ``tapegrad_register_ops`` hook in :mod:`tapegrad_linalg.ops`)."""
    fn = registry.register_function
    fn("polyval", polyval, method=False, samples=[
        tg.Sample(_rand(4), _rand(3, seed=1)), tg.Sample(_rand(3), _rand(2, 3, seed=2)),
        tg.Sample(_rand(1), np.array(0.7))])
    fn("polyadd", polyadd, method=False, samples=[
        tg.Sample(_rand(2), _rand(4, seed=1)), tg.Sample(_rand(3), _rand(3, seed=1)),
        tg.Sample(_rand(4), _rand(1, seed=1))])
    fn("polysub", polysub, method=False, samples=[
        tg.Sample(_rand(2), _rand(4, seed=1)), tg.Sample(_rand(4), _rand(2, seed=1))])
    fn("polymul", polymul, method=False, samples=[
        tg.Sample(_rand(3), _rand(2, seed=1)), tg.Sample(_rand(1), _rand(4, seed=1))])
    fn("polyder", polyder, method=False, samples=[
        tg.Sample(_rand(5)), tg.Sample(_rand(5), 2), tg.Sample(_rand(3), m=0)])
    fn("polyint", polyint, method=False, samples=[
        tg.Sample(_rand(4)), tg.Sample(_rand(3), 2, _rand(2, seed=1)),
        tg.Sample(_rand(3), 3, np.array(0.5))])
    fn("polydiv", polydiv, method=False, samples=[
        tg.Sample(_rand(5), _rand(2, seed=1) + np.array([2.0, 0.0])),
        tg.Sample(_rand(4), np.array([1.5, -0.3, 0.8])),
        tg.Sample(_rand(2), _rand(3, seed=1)),
        # (a monic divisor: the cancelled leading remainder entries are exactly 0 in
        # complex64 too, so both precisions drop them, as NumPy's, and shapes agree)
        tg.Sample(_rand(4) + 1j * _rand(4, seed=5), np.array([1.0 + 0j, -0.3, 0.8j]))])
    fn("poly", poly, method=False, samples=[
        tg.Sample(_rand(3)), tg.Sample(_rand(1)),
        tg.Sample(np.array([[2.0, 0.3, 0.1], [0.2, -1.0, 0.4], [0.0, 0.3, 0.5]])),
        tg.Sample(_rand(3) + 1j * _rand(3, seed=6)),
        tg.Sample(np.array([[0.3, -2.0, 0.1], [2.0, 0.4, 0.0], [0.1, 0.2, -1.0]]))])
    op = registry.register_op
    op("_roots", complex=True, kernels={"cpu": _roots_kernel}, vjp=_roots_vjp, jvp=_roots_jvp,
       method=False, save_inputs=(True,),
       samples=[tg.Sample(np.array([1.0, -0.5, -2.5, 1.0])),        # three real roots
                tg.Sample(np.array([2.0, 0.4, 1.3, -0.7])),         # a complex pair
                tg.Sample(np.array([0.7, -1.2, 0.3, 0.0])),         # a zero root
                tg.Sample(np.array([1.0 + 0.5j, -0.3 + 1j, 2.0 - 0.2j]))],
       doc="The roots of the polynomial p (leading coefficient nonzero, at least two "
           "coefficients): np.roots(p). Its gradient is the implicit derivative of "
           "p(r) = 0 (see tg.roots).")
    fn("roots", roots, method=False, samples=[
        tg.Sample(np.array([1.0, -0.5, -2.5, 1.0])), tg.Sample(np.array([2.0, 0.4, 1.3, -0.7])),
        tg.Sample(np.array([1.5, 0.2, -1.1, 0.0])), tg.Sample(np.array([3.0, 1.0])),
        tg.Sample(np.array([1.0 - 1j, 0.5j, 2.0]))])
    # (no sample with a leading zero: a finite difference there changes the degree, and
    # with it the number of roots; tests/test_complex_polynomials.py checks those)
    fn("polyfit", polyfit, method=False, differentiable=(0, 1, 5), samples=[
        tg.Sample(np.linspace(-1, 1, 6) + 0.05 * _rand(6), _rand(6, seed=1), 2),
        tg.Sample(np.linspace(0, 2, 5), _rand(5, 2, seed=2), 1),
        tg.Sample(np.linspace(-1, 1, 6), _rand(6, seed=3), 3, None, False,
                  np.abs(_rand(6, seed=4)) + 0.5),
        tg.Sample(np.linspace(-1, 1, 6), _rand(6, seed=1) + 1j * _rand(6, seed=7), 2)])
