"""tg.linalg's inverses, determinants, solvers and decompositions, as np.linalg.

Vocabulary as in :mod:`tapegrad_linalg.ops`: ``g`` the gradient of the output, ``ans`` the
op's result, ``a, b`` its inputs. Every op is batched over leading axes as NumPy's, and
every rule is written in tapegrad ops (matmul, solve, ...) so it can be differentiated
again. The flat op table names them ``linalg_<name>``; the public names are
``tg.linalg.<name>`` (see docs/linalg.md).

Decompositions with several results (eigh, eig, svd, qr) are ONE op each whose kernel packs
the results into one array (``_linalg_eigh`` returns w stacked on top of V); the public
function slices it. So the decomposition runs once, and the rule sees the gradients of all
results at once (zeros for the parts that were not used).

>>> import tapegrad as tg
>>> a = tg.tensor([[4., 1.], [1., 3.]], requires_grad=True)
>>> tg.linalg.det(a)
tensor(11., grad_fn=<linalg_det>)
>>> w, v = tg.linalg.eigh(a)
>>> w.sum().backward()           # the trace's gradient: the identity
>>> a.grad.numpy().round(12) + 0.0
array([[1., 0.],
       [0., 1.]])
"""

from __future__ import annotations

import inspect
from collections import namedtuple

import numpy as np
import tapegrad as tg
from tapegrad import _batching
from tapegrad._batching import check_values, pad_batched
from tapegrad._compile import run_eagerly
from tapegrad_shape.ops import derivative_reason

from ._helpers import (_at_least_2d, _conj, _const, _diag_embed, _diagonal, _eye, _host, _imag_diag,
                       _is_complex, _mH, _mT, _rand, _real, _safe_offdiag_divide, _shape,
                       _square, _tril, _triangle_grad)

SlogdetResult = namedtuple("SlogdetResult", "sign logabsdet")
EighResult = namedtuple("EighResult", "eigenvalues eigenvectors")
EigResult = namedtuple("EigResult", "eigenvalues eigenvectors")
QRResult = namedtuple("QRResult", "Q R")
SVDResult = namedtuple("SVDResult", "U S Vh")

_NoValue = np._NoValue


def _real_valued(t):
    """t, a complex tensor whose values are real (a packed eigenvalue, a singular value),
    as the real part kept in t's complex dtype: its tangent must stay real."""
    return 0.5 * (t + tg.conj(t)) if _is_complex(t) else t


def _phase_fix(v, rows, *others):
    """Kernel side of Note: [complex phase gauge]: column j of v (..., n, k) and of each
    array in `others` times the phase that makes v[rows_j, j] real, where it is not
    already (a no-op on LAPACK's own output, which is in that gauge)."""
    if v.dtype.kind != "c":
        return (v,) + others
    x = np.take_along_axis(v, rows[..., None, :], axis=-2)
    # (keeping the sign of the real part: the smallest rotation onto the real axis)
    f = np.where(x.imag == 0, 1, np.abs(x) / np.where(x == 0, 1, x)
                 * np.where(x.real < 0, -1, 1)).astype(v.dtype)      # (complex64 stays)
    v = v * f
    fixed = np.take_along_axis(v, rows[..., None, :], axis=-2)
    np.put_along_axis(v, rows[..., None, :], fixed.real.astype(v.dtype), axis=-2)  # exactly
    return (v,) + tuple(o * f for o in others)


def _gauge_rows(V, row):
    """(onehot, x): the mask (..., n, k) of each column's gauge row and the entries there,
    (..., 1, k). `row` is an int (every column's) or None: each column's largest |V|."""
    n = V.shape[-2]
    if row is not None:
        mask = np.zeros((n, 1))
        mask[row] = 1
        return _const(mask, V), V[..., row:row + 1 if row != -1 else None, :]
    idx = tg.argmax(tg.abs(V.detach()), axis=-2)              # (..., k), a constant
    onehot = (tg.expand_dims(idx, -2) == _const(np.arange(n)[:, None], idx)).astype(V.dtype)
    return onehot, tg.sum(V * onehot, axis=-2, keepdims=True)


def _refuse_zero_gauge(x, op, what):
    if (x == 0).any():
        raise np.linalg.LinAlgError(
            f"{op}: a complex {what[:-1]} has a zero entry where its phase is fixed (NumPy's "
            f"convention, see docs/linalg.md), so its derivative is not defined there")


def _gauge_cotangent(gV, V, c, row, op, what):
    """The cotangent of the vectors in the std gauge for the vectors' cotangent gV in the
    fixed-phase gauge.

    Note: [complex phase gauge]
    A complex eigenvector (a pair of singular vectors) is defined up to a factor
    e^(i phi). LAPACK fixes it: eigh makes the first (UPLO='L') or last ('U') component
    of each eigenvector real, eig the component of largest modulus, svd the first row of
    V (m >= n); tapegrad's kernels enforce the same rule (a no-op on LAPACK's output; for
    svd with m < n the first row of U, which LAPACK's LQ path does not follow, so there
    the phases may differ from NumPy's), so the vectors are a differentiable function of
    the input and every loss of them has a gradient (PyTorch instead raises for a loss
    that depends on the phases). The rules below are written in the gauge
    Im(diag(V^H dV)) = 0; the fixed-phase gauge adds i V diag(theta') with
    theta'_j = -Im(dV[r_j, j]) / V[r_j, j], whose transpose moves -i Im(c_j) / V[r_j, j]
    into row r_j of the cotangent, c_j = diag(V^H gV)_j (svd: of U and V together). Then
    Im(diag(V^H gV)) = 0, the condition under which the std-gauge formulas hold.
    """
    onehot, x = _gauge_rows(V, row)
    check_values(lambda xv: _refuse_zero_gauge(xv, op, what), x)
    c = tg.expand_dims(c, -2)
    return gV - onehot * (0.5 * (c - tg.conj(c)) / x)


def _gauge_tangent(dV, V, row, op, what, *also):
    """dV (and each tangent in `also`, the partners of svd) moved from the std gauge to
    the fixed-phase one (Note: [complex phase gauge])."""
    onehot, x = _gauge_rows(V, row)
    check_values(lambda xv: _refuse_zero_gauge(xv, op, what), x)
    d = tg.sum(dV * onehot, axis=-2, keepdims=True)
    theta = 0.5 * (d - tg.conj(d)) / x                     # i Im(dV[r_j, j]) / V[r_j, j]
    return (dV - V * theta,) + tuple(t - w * theta for t, w in also)


def _as_tensor(a):
    return a if isinstance(a, tg.Tensor) else tg.asarray(a)


def _derivative_wanted(**named):
    """For the first of the `named` tensors whose derivative is being computed (it
    requires grad, or carries a forward-mode tangent): "a requires grad" (its name and
    derivative_reason); None when none is. NOTE: testing requires_grad alone would let a
    forward-mode tangent through, into a result that has no derivative."""
    for name, x in named.items():
        reason = derivative_reason(x)
        if reason is not None:
            return f"{name} {reason}"
    return None


# ---------------------------------------------------------------------------------------
# Samples: well-conditioned matrices (finite differences need them)
# ---------------------------------------------------------------------------------------

def _general(*shape, seed=0):
    """Random square matrices, shifted to be well conditioned (eigenvalues away from 0)."""
    a = _rand(*shape, seed=seed)
    return a + 3.0 * np.eye(shape[-1])


def _spd(*shape, seed=0):
    """Symmetric positive definite: x x^T + n I."""
    x = _rand(*shape, seed=seed)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def _sym(*shape, seed=0):
    """Symmetric with well separated eigenvalues (1, 3, 5, ...)."""
    q, _ = np.linalg.qr(_rand(*shape, seed=seed))
    w = 1.0 + 2.0 * np.arange(shape[-1]) - shape[-1]
    return (q * w) @ np.swapaxes(q, -1, -2)


def _real_spectrum(*shape, seed=0):
    """A non-symmetric matrix with real, well separated eigenvalues: V diag(w) V^-1."""
    v = _rand(*shape, seed=seed) + 2.0 * np.eye(shape[-1])
    w = 1.0 + 1.5 * np.arange(shape[-1])
    return (v * w) @ np.linalg.inv(v)


def _distinct_sv(*shape, seed=0):
    """A matrix with well separated nonzero singular values."""
    m, n = shape[-2:]
    k = min(m, n)
    u, _ = np.linalg.qr(_rand(*shape[:-2], m, k, seed=seed))
    v, _ = np.linalg.qr(_rand(*shape[:-2], n, k, seed=seed + 1))
    s = 1.0 + np.arange(k)[::-1] * 1.0
    return (u * s) @ np.swapaxes(v, -1, -2)


# ---------------------------------------------------------------------------------------
# inv, det, slogdet, solve
# ---------------------------------------------------------------------------------------

def _inv_kernel(a):
    _square(a, "linalg_inv")
    return np.linalg.inv(a)


def _inv_vjp(g, ans, a):
    ans_h = _mH(ans)            # complex: -A^-H g A^-H
    return (-(ans_h @ g @ ans_h),)


def _inv_jvp(t, ans, a):
    return -(ans @ t[0] @ ans)


def _trace_of_solve(a, ta):
    """tr(a^-1 ta), batched."""
    return tg.sum(_diagonal(tg.linalg_solve(a, ta)), axis=-1)


def _det_kernel(a):
    _square(a, "linalg_det")
    return np.asarray(np.linalg.det(a))


def _det_vjp(g, ans, a):
    # NOTE: d det(A) = det(A) tr(A^-1 dA). A singular A has no inverse: the backward then
    # raises LinAlgError (PyTorch goes through an SVD there; documented in docs/linalg.md).
    # (complex, det holomorphic: g conj(det) A^-H)
    scale = tg.expand_dims(tg.expand_dims(g * _conj(ans), -1), -1)
    return (scale * _mH(tg.linalg_inv(a)),)


def _det_jvp(t, ans, a):
    return ans * _trace_of_solve(a, t[0])


def _slogdet_kernel(a):
    _square(a, "linalg_slogdet")
    sign, logabsdet = np.linalg.slogdet(a)
    # (complex a: a complex sign of modulus 1 and a real logabsdet, packed as complex)
    return np.stack([sign, logabsdet.astype(sign.dtype)], axis=-1)


def _slogdet_vjp(g, ans, a):
    # Real a: only logabsdet (the last entry) has a gradient: sign is piecewise constant.
    # Complex a: with t = tr(A^-1 dA), d logabsdet = Re t and d sign = sign i Im t, so the
    # gradient is (Re g_l - i Im(conj(g_s) sign)) A^-H (PyTorch's slogdet_backward).
    coef = g[..., 1]
    if _is_complex(a):
        w = _conj(g[..., 0]) * ans[..., 0]
        coef = _real_valued(coef) - 0.5 * (w - tg.conj(w))
    coef = tg.expand_dims(tg.expand_dims(coef, -1), -1)
    return (coef * _mH(tg.linalg_inv(a)),)


def _slogdet_jvp(t, ans, a):
    dt = _trace_of_solve(a, t[0])
    if _is_complex(a):
        return tg.stack([ans[..., 0] * 0.5 * (dt - tg.conj(dt)), _real_valued(dt)], axis=-1)
    return tg.stack([tg.zeros_like(dt), dt], axis=-1)


def slogdet(a):
    """Sign and natural log of the absolute determinant, as ``np.linalg.slogdet``.

    Returns ``SlogdetResult(sign, logabsdet)``; ``logabsdet`` is differentiable (its
    gradient is ``inv(a).T``), ``sign`` is piecewise constant (zero gradient) for a real a.
    For a complex a, sign is complex of modulus 1 (differentiable) and logabsdet real, as
    NumPy's.

    >>> import tapegrad as tg
    >>> sign, logdet = tg.linalg.slogdet(tg.tensor([[2., 0.], [0., -3.]]))
    >>> float(sign), round(float(logdet), 6)
    (-1.0, 1.791759)
    """
    packed = tg._linalg_slogdet(_as_tensor(a))
    if _is_complex(packed):
        return SlogdetResult(packed[..., 0], tg.real(packed[..., 1]))
    return SlogdetResult(packed[..., 0].detach(), packed[..., 1])


def _solve_check(a, b):
    sa, sb = np.shape(a), np.shape(b)
    _square(a, "linalg_solve")
    m = sa[-1]
    if len(sb) == 0:
        raise ValueError(f"linalg_solve: b must be at least 1-d, got a 0-d b (a has shape {sa})")
    if len(sb) == 1:
        if sb[0] != m:
            raise ValueError(f"linalg_solve: a has shape {sa} but the vector b has length "
                             f"{sb[0]}, not {m}")
        return
    if sb[-2] != m:
        raise ValueError(f"linalg_solve: a has shape {sa} and b has shape {sb}: b.shape[-2] must "
                         f"be {m} (NumPy 2 treats an N-d b as a stack of matrices; for a stack "
                         f"of vectors pass b[..., None] and take [..., 0])")
    try:
        np.broadcast_shapes(sa[:-2], sb[:-2])
    except ValueError:
        raise ValueError(f"linalg_solve: batch dimensions {sa[:-2]} of a (shape {sa}) and "
                         f"{sb[:-2]} of b (shape {sb}) do not broadcast") from None


def _solve_kernel(a, b):
    _solve_check(a, b)
    return np.linalg.solve(a, b)


def _solve_vjp(g, ans, a, b):
    # x = A^-1 b: gb = A^-H g, gA = -gb x^H, with a solve (never an explicit inverse).
    if b.ndim == 1:
        gb = tg.linalg_solve(_mH(a), tg.expand_dims(g, -1))[..., 0]
        ga = -(tg.expand_dims(gb, -1) * tg.expand_dims(_conj(ans), -2))
    else:
        gb = tg.linalg_solve(_mH(a), g)
        ga = -(gb @ _mH(ans))
    return (ga if tg.needs_grad(a) else None), (gb if tg.needs_grad(b) else None)


def _solve_jvp(t, ans, a, b):
    # dx = a^-1 (db - da x)
    ta, tb = t
    vector = b.ndim == 1
    rhs = None
    if ta is not None:
        rhs = -(ta @ ans) if not vector else -(ta @ tg.expand_dims(ans, -1))[..., 0]
    if tb is not None:
        rhs = tb if rhs is None else rhs + tb
    if vector:
        return tg.linalg_solve(a, tg.expand_dims(rhs, -1))[..., 0]
    return tg.linalg_solve(a, rhs)


# ---------------------------------------------------------------------------------------
# cholesky
# ---------------------------------------------------------------------------------------

def _cholesky_kernel(a, upper=False):
    _square(a, "linalg_cholesky")
    return np.linalg.cholesky(a, upper=upper)


def _cholesky_vjp(g, ans, a, upper=False):
    # Murray 2016 / PyTorch: gA = L^-H Phi(L^H gL) L^-1, Phi = the lower triangle with its
    # diagonal halved, symmetrized; then mapped to the triangle NumPy reads (^H = ^T for
    # a real a).
    L, gL = (_mH(ans), _mH(g)) if upper else (ans, g)
    P = _tril(_mH(L) @ gL)
    P = 0.5 * (P + _mH(_tril(P, -1)))
    X = tg.linalg_solve(_mH(L), P)                  # L^-H P
    G = _mH(tg.linalg_solve(_mH(L), _mH(X)))        # (L^-H P) L^-1
    return (_triangle_grad(G, lower=not upper),)


def _cholesky_jvp(t, ans, a, upper=False):
    # dL = L Phi(L^-1 S L^-T), S the symmetric matrix of the triangle NumPy reads (Murray
    # 2016), Phi the lower triangle with its diagonal halved.
    ta = t[0]
    if upper:
        ta = _mH(ta)
    S = _copyltu(ta)                                # (Hermitian for a complex a)
    L = _mH(ans) if upper else ans
    X = tg.linalg_solve(L, _mH(tg.linalg_solve(L, S)))
    dL = L @ (_tril(X) - 0.5 * X * _eye(X.shape[-1], X))
    return _mH(dL) if upper else dL


# ---------------------------------------------------------------------------------------
# qr
# ---------------------------------------------------------------------------------------

def _qr_kernel(a, mode="reduced"):
    _at_least_2d(a, "linalg_qr")
    q, r = np.linalg.qr(a, mode=mode)
    return np.concatenate([q, np.swapaxes(r, -1, -2)], axis=-2)    # (m + n, k)


def _copyltu(M):
    """The symmetric matrix with M's lower triangle; for a complex M the Hermitian one,
    with the real part of M's diagonal (what LAPACK reads of a Hermitian matrix)."""
    if _is_complex(M):
        low = _tril(M, -1)
        return low + _mH(low) + _real_valued(M) * _eye(M.shape[-1], M)
    return _tril(M) + _mT(_tril(M, -1))


def _qr_vjp(g, ans, a, mode="reduced"):
    m, n = a.shape[-2:]
    if mode == "complete" and m > n:
        raise ValueError(f"linalg_qr: the gradient of mode='complete' for a {m}x{n} matrix "
                         f"(m > n) is not defined (Q's last {m - n} columns are not unique); "
                         f"use mode='reduced'")
    Q, R = ans[..., :m, :], _mT(ans[..., m:, :])
    gQ, gR = g[..., :m, :], _mT(g[..., m:, :])
    # Walter & Lehmann / PyTorch: gA = [gQ + Q copyltu(M)] R^-H, M = R gR^H - gQ^H Q; for
    # m < n, A = [X | Y] with X = Q U square, Y = Q V: the same for X with gQ + Y gV^H, and
    # gY = Q gV. (Complex: LAPACK's R has a real diagonal, so copyltu keeps the real part
    # of M's; ^H = ^T for a real a.)
    if m >= n:
        M = R @ _mH(gR) - _mH(gQ) @ Q
        B = gQ + Q @ _copyltu(M)
        return (_mH(tg.linalg_solve(R, _mH(B))),)
    U, gU, gV = R[..., :m], gR[..., :m], gR[..., m:]
    Y = a[..., m:]
    gQ = gQ + Y @ _mH(gV)
    M = U @ _mH(gU) - _mH(gQ) @ Q
    gX = _mH(tg.linalg_solve(U, _mH(gQ + Q @ _copyltu(M))))
    return (tg.concatenate([gX, Q @ gV], axis=-1),)


def _qr_jvp(t, ans, a, mode="reduced"):
    m, n = a.shape[-2:]
    if mode == "complete" and m > n:
        raise ValueError(f"linalg_qr: the derivative of mode='complete' for a {m}x{n} matrix "
                         f"(m > n) is not defined (Q's last {m - n} columns are not unique); "
                         f"use mode='reduced'")
    Q, R = ans[..., :m, :], _mT(ans[..., m:, :])
    dA = t[0]
    # A = Q R: with C = Q^T dA R^-1 = Q^T dQ + dR R^-1, where Q^T dQ is skew and dR R^-1
    # upper triangular, Omega = Q^T dQ is the strictly lower part of C minus its transpose,
    # dR = (C - Omega) R and dQ = dA R^-1 - Q (C - Omega) (which also holds the part of dQ
    # outside Q's columns when m > n). For m < n, A = [X | Y] with X = Q U square, Y = Q V:
    # the square rule for X, then dV = dQ^T Y + Q^T dY.
    if m >= n:
        dQ, dR = _qr_square_jvp(Q, R, dA)
        return tg.concatenate([dQ, _mT(dR)], axis=-2)
    U = R[..., :m]
    dQ, dU = _qr_square_jvp(Q, U, dA[..., :m])
    dV = _mH(dQ) @ a[..., m:] + _mH(Q) @ dA[..., m:]
    return tg.concatenate([dQ, _mT(tg.concatenate([dU, dV], axis=-1))], axis=-2)


def _qr_square_jvp(Q, R, dA):
    """(dQ, dR) of A = Q R for an A with at least as many rows as columns."""
    # (complex: Q^H dQ is skew-Hermitian and dR R^-1's diagonal real, so Omega also takes
    # the imaginary part of C's diagonal)
    dA_Rinv = _mH(tg.linalg_solve(_mH(R), _mH(dA)))          # dA R^-1
    C = _mH(Q) @ dA_Rinv
    low = _tril(C, -1)
    C_minus_omega = C - (low - _mH(low))                     # dR R^-1, upper triangular
    im = _imag_diag(C)
    if im is not None:
        C_minus_omega = C_minus_omega - im
    return dA_Rinv - Q @ C_minus_omega, C_minus_omega @ R


def qr(a, mode="reduced"):
    """The QR decomposition, as ``np.linalg.qr(a, mode)``: ``QRResult(Q, R)`` for mode
    'reduced' (differentiable) and 'complete' (differentiable for m <= n, where it equals
    'reduced'; for m > n the backward refuses), and R alone for mode 'r'. Mode 'raw' is
    refused. Batched over leading axes.

    >>> import tapegrad as tg
    >>> q, r = tg.linalg.qr(tg.tensor([[3., 0.], [4., 5.]]))
    >>> r.tolist()
    [[-5.0, -4.0], [0.0, 3.0]]
    """
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: mode {mode!r} is not supported (use 'reduced', "
                         f"'complete' or 'r'; 'raw' returns LAPACK's Householder form, which "
                         f"has no gradient here)")
    a = _as_tensor(a)
    _at_least_2d(a, "linalg.qr")
    m, n = a.shape[-2:]
    if mode == "r":
        packed = tg._linalg_qr(a, mode="reduced")
        return _mT(packed[..., m:, :])
    wanted = _derivative_wanted(a=a) if mode == "complete" and m > n else None
    if wanted:
        raise ValueError(f"linalg.qr: mode='complete' of a {m}x{n} matrix (m > n) has no "
                         f"gradient nor tangent (Q's last {m - n} columns are not unique), "
                         f"and {wanted}; use mode='reduced', or pass a.detach() (tg.no_grad() "
                         f"for a gradient)")
    packed = tg._linalg_qr(a, mode=mode)
    return QRResult(packed[..., :m, :], _mT(packed[..., m:, :]))


# ---------------------------------------------------------------------------------------
# eigh, eigvalsh
# ---------------------------------------------------------------------------------------

def _uplo(UPLO, op):
    if UPLO not in ("L", "U"):
        raise ValueError(f"{op}: UPLO argument must be 'L' or 'U', got {UPLO!r}")


def _eigh_kernel(a, UPLO="L"):
    _square(a, "linalg_eigh")
    _uplo(UPLO, "linalg_eigh")
    w, v = np.linalg.eigh(a, UPLO=UPLO)        # (complex a: real w packed with complex v)
    (v,) = _phase_fix(v, np.full(v.shape[:-2] + v.shape[-1:], 0 if UPLO == "L" else -1))
    return np.concatenate([w[..., None, :], v], axis=-2)          # (n + 1, n)


def _eigh_vjp(g, ans, a, UPLO="L"):
    w, V = ans[..., 0, :], ans[..., 1:, :]
    gw, gV = g[..., 0, :], g[..., 1:, :]
    # gA = V (diag(gw) + skew(V^H gV) / E) V^H, E_ij = w_j - w_i (PyTorch's
    # linalg_eig_backward for Hermitian input); see Note: [degenerate spectra] and, for
    # complex input, Note: [complex phase gauge].
    if _is_complex(V):
        gV = _gauge_cotangent(gV, V, _diagonal(_mH(V) @ gV), 0 if UPLO == "L" else -1,
                              "linalg_eigh", "eigenvectors")
        w, gw = _real(w), _real_valued(gw)
    VtgV = _mH(V) @ gV
    skew = 0.5 * (VtgV - _mH(VtgV))
    E = tg.expand_dims(w, -2) - tg.expand_dims(w, -1)
    inner = _safe_offdiag_divide(skew, E, "linalg_eigh", "eigenvectors") + _diag_embed(gw)
    return (_triangle_grad(V @ inner @ _mH(V), lower=UPLO == "L"),)


def _read_triangle(ta, UPLO):
    """The symmetric matrix that a tangent of A stands for when only the UPLO triangle
    is read (Note: [one-triangle gradients]): the other triangle has no effect."""
    return _copyltu(ta) if UPLO == "L" else _mH(_copyltu(_mH(ta)))


def _eigh_jvp(t, ans, a, UPLO="L"):
    w, V = ans[..., 0, :], ans[..., 1:, :]
    # dw = diag(V^T dA V), dV = V (F o V^T dA V) with F_ij = 1 / (w_j - w_i) off the
    # diagonal, 0 on it (unit eigenvectors stay unit); a zero gap refuses as the VJP's
    # (Note: [degenerate spectra]).
    # (complex: V^H dA V, and the phase gauge Im(diag(V^H dV)) = 0)
    VtdAV = _mH(V) @ _read_triangle(t[0], UPLO) @ V
    w = _real(w)
    E = tg.expand_dims(w, -2) - tg.expand_dims(w, -1)
    dV = V @ _safe_offdiag_divide(VtdAV, E, "linalg_eigh", "eigenvectors")
    if _is_complex(V):
        (dV,) = _gauge_tangent(dV, V, 0 if UPLO == "L" else -1, "linalg_eigh", "eigenvectors")
    return tg.concatenate([tg.expand_dims(_real_valued(_diagonal(VtdAV)), -2), dV], axis=-2)


def eigh(a, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of symmetric (complex: Hermitian)
    matrices, as ``np.linalg.eigh(a, UPLO)``: ``EighResult(eigenvalues, eigenvectors)``,
    the eigenvalues real. Only the triangle named by UPLO is read, and only it gets a
    gradient (docs/linalg.md). The gradient through the eigenvectors needs distinct
    eigenvalues (else LinAlgError); complex eigenvectors have NumPy's phases (the first,
    for UPLO='U' the last, component real), differentiated exactly (docs/linalg.md).

    >>> import tapegrad as tg
    >>> w, v = tg.linalg.eigh(tg.tensor([[2., 1.], [1., 2.]]))
    >>> w.tolist()
    [1.0, 3.0]
    """
    _uplo(UPLO, "linalg.eigh")
    a = _as_tensor(a)
    packed = tg._linalg_eigh(a, UPLO=UPLO)
    w = packed[..., 0, :]
    return EighResult(tg.real(w) if _is_complex(w) else w, packed[..., 1:, :])


def _eigvalsh_kernel(a, UPLO="L"):
    _square(a, "linalg_eigvalsh")
    _uplo(UPLO, "linalg_eigvalsh")
    return np.linalg.eigvalsh(a, UPLO=UPLO)


def _eigvalsh_vjp(g, ans, a, UPLO="L"):
    # gA = V diag(g) V^T: defined even for repeated eigenvalues (not its derivative).
    V = tg._linalg_eigh(a, UPLO=UPLO)[..., 1:, :]
    return (_triangle_grad((V * tg.expand_dims(g, -2)) @ _mH(V), lower=UPLO == "L"),)


def _eigvalsh_jvp(t, ans, a, UPLO="L"):
    # dw = diag(V^T dA V): the transpose of the VJP, with its convention for repeated
    # eigenvalues (there the eigenvalues are not differentiable; see the VJP's NOTE).
    V = tg._linalg_eigh(a, UPLO=UPLO)[..., 1:, :]
    return _real(_diagonal(_mH(V) @ _read_triangle(t[0], UPLO) @ V))


# ---------------------------------------------------------------------------------------
# eig, eigvals (complex results where NumPy's are)
# ---------------------------------------------------------------------------------------

def _eig_kernel(a):
    _square(a, "linalg_eig")
    w, v = np.linalg.eig(a)        # (complex where NumPy's are: a real a may give them)
    (v,) = _phase_fix(v, np.argmax(np.abs(v), axis=-2))
    return np.concatenate([w[..., None, :], v], axis=-2)


def _eig_vjp(g, ans, a):
    w, V = ans[..., 0, :], ans[..., 1:, :]
    gw, gV = g[..., 0, :], g[..., 1:, :]
    # PyTorch's linalg_eig_backward: NumPy normalizes each eigenvector to unit length,
    # which the projection term accounts for;
    # gA = V^-H (diag(gw) + (V^H gV - V^H V Re diag(V^H gV)) / conj(E)) V^H,
    # E_ij = w_j - w_i (^H = ^T for a real spectrum). Complex eigenvectors: their
    # phases' part of gV first (Note: [complex phase gauge]).
    if _is_complex(V):
        gV = _gauge_cotangent(gV, V, _diagonal(_mH(V) @ gV), None, "linalg_eig", "eigenvectors")
    VtgV = _mH(V) @ gV
    d = _real_valued(_diagonal(VtgV))
    VtgV = VtgV - (_mH(V) @ V) * tg.expand_dims(d, -2)
    E = _conj(tg.expand_dims(w, -2) - tg.expand_dims(w, -1))
    inner = _safe_offdiag_divide(VtgV, E, "linalg_eig", "eigenvectors") + _diag_embed(gw)
    return (tg.linalg_solve(_mH(V), inner @ _mH(V)),)


def _eig_jvp(t, ans, a):
    w, V = ans[..., 0, :], ans[..., 1:, :]
    # A = V diag(w) V^-1: with C = V^-1 dA V, dw = diag(C) and the eigenvectors move by
    # dV0 = V (F o C), F_ij = 1 / (w_j - w_i) off the diagonal; NumPy's unit length then
    # removes each column's component along itself: dV = dV0 - V Re diag(V^H dV0) (for
    # complex eigenvectors, then moved to NumPy's phases: Note: [complex phase gauge]).
    C = tg.linalg_solve(V, t[0] @ V)
    E = tg.expand_dims(w, -2) - tg.expand_dims(w, -1)
    dV0 = V @ _safe_offdiag_divide(C, E, "linalg_eig", "eigenvectors")
    dV = dV0 - V * tg.expand_dims(_real_valued(_diagonal(_mH(V) @ dV0)), -2)
    if _is_complex(V):
        (dV,) = _gauge_tangent(dV, V, None, "linalg_eig", "eigenvectors")
    return tg.concatenate([tg.expand_dims(_diagonal(C), -2), dV], axis=-2)


def eig(a):
    """Eigenvalues and (unit-length) right eigenvectors of square matrices, as
    ``np.linalg.eig``: ``EigResult(eigenvalues, eigenvectors)``, complex where NumPy's are
    (a real matrix with complex eigenvalues gives complex results; its gradient is real).
    Complex eigenvectors have NumPy's phases (the largest component real), differentiated
    exactly (docs/linalg.md).

    >>> import tapegrad as tg
    >>> tg.linalg.eig(tg.tensor([[2., 1.], [0., 3.]])).eigenvalues.tolist()
    [2.0, 3.0]
    >>> tg.linalg.eig(tg.tensor([[0., -1.], [1., 0.]])).eigenvalues.tolist()
    [1j, -1j]
    """
    a = _as_tensor(a)
    packed = tg._linalg_eig(a)
    return EigResult(packed[..., 0, :], packed[..., 1:, :])


def _eigvals_kernel(a):
    _square(a, "linalg_eigvals")
    # NOTE: eig's eigenvalues, not np.linalg.eigvals': LAPACK's geev without eigenvectors
    # may round (or order) the eigenvalues differently, and the rule pairs them with eig's
    # eigenvectors.
    return np.linalg.eig(a)[0]


def _eigvals_vjp(g, ans, a):
    V = tg._linalg_eig(a)[..., 1:, :]       # its columns in the kernel's eigenvalue order
    return (tg.linalg_solve(_mH(V), _diag_embed(g) @ _mH(V)),)


def _eigvals_jvp(t, ans, a):
    V = tg._linalg_eig(a)[..., 1:, :]       # its columns in the kernel's eigenvalue order
    return _diagonal(tg.linalg_solve(V, t[0] @ V))


# ---------------------------------------------------------------------------------------
# svd, svdvals
# ---------------------------------------------------------------------------------------

def _svd_kernel(a, full_matrices=False):
    _at_least_2d(a, "linalg_svd")
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    m, n = a.shape[-2:]
    if u.dtype.kind == "c" and not full_matrices:
        # Note: [complex phase gauge]: V's first row real (U's for m < n)
        k = min(m, n)
        rows = np.zeros(a.shape[:-2] + (k,), dtype=np.intp)
        if m >= n:
            v, u = _phase_fix(np.conj(np.swapaxes(vh, -1, -2)), rows, u)
        else:
            u, v = _phase_fix(u, rows, np.conj(np.swapaxes(vh, -1, -2)))
        vh = np.conj(np.swapaxes(v, -1, -2))
    width = max(u.shape[-1], vh.shape[-2])
    out = np.zeros(a.shape[:-2] + (m + 1 + n, width), dtype=u.dtype)
    out[..., :m, :u.shape[-1]] = u
    out[..., m, :s.shape[-1]] = s
    out[..., m + 1:, :vh.shape[-2]] = np.conj(np.swapaxes(vh, -1, -2))      # V = Vh^H
    return out


def _svd_unpack(p, m, n, full_matrices):
    k = min(m, n)
    mu, nv = (m, n) if full_matrices else (k, k)
    return p[..., :m, :mu], p[..., m, :k], p[..., m + 1:, :nv]


def _svd_factors(ans, a, full_matrices, what):
    """(m, n, k, U, S, V) of the packed svd output, refusing full_matrices=True for a
    non-square matrix (its extra singular vectors are not unique): `what` names the
    derivative ("gradient", "derivative") in the error."""
    m, n = a.shape[-2:]
    if full_matrices and m != n:
        raise ValueError(f"linalg_svd: the {what} of full_matrices=True for a {m}x{n} matrix "
                         f"is not defined (the extra singular vectors are not unique); use "
                         f"full_matrices=False")
    return (m, n, min(m, n)) + tuple(_svd_unpack(ans, m, n, full_matrices))


def _svd_vjp(g, ans, a, full_matrices=False):
    m, n, k, U, S, V = _svd_factors(ans, a, full_matrices, "gradient")
    gU, gS, gV = _svd_unpack(g, m, n, full_matrices)
    # PyTorch's svd_backward, with skew(X) = X - X^H, E_ij = S_j^2 - S_i^2:
    # gA = U [(skew(U^H gU) S + S skew(V^H gV)) / E + diag(gS)] V^H
    #      + (I - U U^H) gU S^-1 V^H + U S^-1 gV^H (I - V V^H)
    # and for complex a (Note: [complex phase gauge]) U diag(i Im(diag(U^H gU)) / S) V^H.
    UtgU = _mH(U) @ gU
    VtgV = _mH(V) @ gV
    im = None
    if _is_complex(UtgU):
        c = _diagonal(UtgU) + _diagonal(VtgV)
        if m >= n:
            gV = _gauge_cotangent(gV, V, c, 0, "linalg_svd", "singular vectors")
            VtgV = _mH(V) @ gV
        else:
            gU = _gauge_cotangent(gU, U, c, 0, "linalg_svd", "singular vectors")
            UtgU = _mH(U) @ gU
        S, gS = _real(S), _real_valued(gS)
        im = _imag_diag(UtgU) / tg.expand_dims(S, -2)
    UtgU, VtgV = UtgU - _mH(UtgU), VtgV - _mH(VtgV)
    S2 = S * S
    E = tg.expand_dims(S2, -2) - tg.expand_dims(S2, -1)
    num = UtgU * tg.expand_dims(S, -2) + tg.expand_dims(S, -1) * VtgV
    inner = _safe_offdiag_divide(num, E, "linalg_svd", "singular vectors") + _diag_embed(gS)
    if im is not None:
        inner = inner + im
    Vt = _mH(V)
    if m > k or n > k:
        check_values(lambda s: _refuse_zero_singular_value(s, m, n), S)
    if m > k:
        gUS = gU / tg.expand_dims(S, -2)
        return ((U @ inner + gUS - U @ (_mH(U) @ gUS)) @ Vt,)
    if n > k:
        SgV = _mH(gV) / tg.expand_dims(S, -1)
        return (U @ (inner @ Vt + SgV - (SgV @ V) @ Vt),)
    return (U @ inner @ Vt,)


def _refuse_zero_singular_value(s, m, n):
    if (s == 0).any():
        raise np.linalg.LinAlgError(
            f"linalg_svd: the gradient through the singular vectors of a non-square "
            f"{m}x{n} matrix with a zero singular value is not defined")


def _svd_jvp(t, ans, a, full_matrices=False):
    m, n, k, U, S, V = _svd_factors(ans, a, full_matrices, "derivative")
    dA = t[0]
    # With dP = U^H dA V: dS = Re diag(dP), dU = U (F o (dP S + S dP^H)),
    # dV = V (F o (S dP + dP^H S)), F_ij = 1 / (S_j^2 - S_i^2) off the diagonal; plus, for
    # a non-square A, the parts outside U's (V's) columns: (I - U U^H) dA V S^-1
    # ((I - V V^H) dA^H U S^-1). Zero gaps and zero singular values refuse as the VJP's.
    # Complex a: i Im(diag(dP)) / S goes to U's phases (the gauge Im(diag(V^H dV)) = 0).
    dP = _mH(U) @ dA @ V
    S = _real(S)
    S_row, S_col = tg.expand_dims(S, -2), tg.expand_dims(S, -1)
    S2 = S * S
    E = tg.expand_dims(S2, -2) - tg.expand_dims(S2, -1)
    dU = U @ _safe_offdiag_divide(dP * S_row + S_col * _mH(dP), E, "linalg_svd",
                                  "singular vectors")
    dV = V @ _safe_offdiag_divide(S_col * dP + _mH(dP) * S_row, E, "linalg_svd",
                                  "singular vectors")
    im = _imag_diag(dP)
    if im is not None:
        dU = dU + U @ (im / S_row)
    if m > k or n > k:
        check_values(lambda s: _refuse_zero_singular_value(s, m, n), S)
    if m > k:
        dAV = dA @ V
        dU = dU + (dAV - U @ (_mH(U) @ dAV)) / S_row
    if n > k:
        dAtU = _mH(dA) @ U
        dV = dV + (dAtU - V @ (_mH(V) @ dAtU)) / S_row
    if _is_complex(dU):
        if m >= n:
            dV, dU = _gauge_tangent(dV, V, 0, "linalg_svd", "singular vectors", (dU, U))
        else:
            dU, dV = _gauge_tangent(dU, U, 0, "linalg_svd", "singular vectors", (dV, V))
    return tg.concatenate([dU, tg.expand_dims(_real_valued(_diagonal(dP)), -2), dV], axis=-2)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """The singular value decomposition, as ``np.linalg.svd``: ``SVDResult(U, S, Vh)``
    with ``a = U @ (S[..., None] * Vh)``, or the singular values alone for
    ``compute_uv=False``. Differentiable for ``full_matrices=False`` (and for square
    matrices); the gradient through U and Vh needs distinct, nonzero singular values (else
    LinAlgError). ``hermitian=True`` is refused (use eigh).

    >>> import tapegrad as tg
    >>> tg.linalg.svd(tg.tensor([[3., 0.], [0., -4.]])).S.tolist()
    [4.0, 3.0]
    """
    if hermitian:
        raise ValueError("linalg.svd: hermitian=True is not supported (use tg.linalg.eigh, whose "
                         "eigenvalues' absolute values are the singular values)")
    a = _as_tensor(a)
    if not compute_uv:
        return tg.linalg_svdvals(a)
    _at_least_2d(a, "linalg.svd")
    m, n = a.shape[-2:]
    full = bool(full_matrices) and m != n      # square: the same as full_matrices=False
    wanted = _derivative_wanted(a=a) if full else None
    if wanted:
        raise ValueError(f"linalg.svd: full_matrices=True for a {m}x{n} matrix has no gradient "
                         f"nor tangent (the extra singular vectors are not unique), and "
                         f"{wanted}; use full_matrices=False, or pass a.detach() (tg.no_grad() "
                         f"for a gradient)")
    packed = tg._linalg_svd(a, full_matrices=full)
    U, S, V = _svd_unpack(packed, m, n, full)
    if _is_complex(packed):
        S = tg.real(S)         # (real singular values, as NumPy's)
    return SVDResult(U, S, _mH(V))


def _svdvals_kernel(a):
    _at_least_2d(a, "linalg_svdvals")
    return np.linalg.svd(a, compute_uv=False)


def _svdvals_vjp(g, ans, a):
    # gA = U diag(g) V^T: defined even for repeated singular values.
    m, n = a.shape[-2:]
    U, _, V = _svd_unpack(tg._linalg_svd(a, full_matrices=False), m, n, False)
    return ((U * tg.expand_dims(g, -2)) @ _mH(V),)


def _svdvals_jvp(t, ans, a):
    # dS = diag(U^T dA V): the transpose of the VJP (its convention at repeated values).
    m, n = a.shape[-2:]
    U, _, V = _svd_unpack(tg._linalg_svd(a, full_matrices=False), m, n, False)
    return _real(_diagonal(_mH(U) @ t[0] @ V))


# ---------------------------------------------------------------------------------------
# pinv, lstsq, matrix_rank
# ---------------------------------------------------------------------------------------

def _pinv_kernel(a, rcond=None, hermitian=False, rtol=_NoValue):
    _at_least_2d(a, "linalg_pinv")
    return np.linalg.pinv(a, rcond=rcond, hermitian=hermitian, rtol=rtol)


def _pinv_grad(G, P, A):
    """The gradient in A of <G, pinv(A)> where P = pinv(A) (PyTorch's pinv_backward, exact
    where the rank of A is locally constant)."""
    m, n = A.shape[-2:]
    Pt, Gt = _mH(P), _mH(G)                    # (^H: complex; ^T for real)
    if m <= n:
        K = Gt @ P
        KPt = K @ Pt
        return -_mH(P @ K) + KPt - (A @ P) @ KPt + (Pt @ P) @ (Gt - K @ A)
    K = P @ Gt
    PtK = Pt @ K
    return -_mH(K @ P) + ((Gt - A @ K) @ P) @ Pt + PtK - (PtK @ P) @ A


def _pinv_vjp(g, ans, a, rcond=None, hermitian=False, rtol=_NoValue):
    if not hermitian:
        return (_pinv_grad(g, ans, a),)
    # hermitian=True goes through eigh, which reads the lower triangle only: ans is the
    # pseudo-inverse of the symmetric matrix of that triangle, so the rule takes that
    # matrix (NOTE: not `a`, whose upper triangle may differ), then maps G to the triangle.
    return (_triangle_grad(_pinv_grad(g, ans, _copyltu(a)), lower=True),)


def _pinv_tangent(dA, P, A):
    """The derivative of P = pinv(A) along dA (Golub & Pereyra; exact where the rank of A
    is locally constant, as _pinv_grad, whose transpose it is):
    dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P."""
    Pt, dAt = _mH(P), _mH(dA)
    return (-(P @ dA @ P) + (P @ Pt) @ (dAt - dAt @ (A @ P))
            + (dAt - (P @ A) @ dAt) @ (Pt @ P))


def _pinv_jvp(t, ans, a, rcond=None, hermitian=False, rtol=_NoValue):
    if not hermitian:
        return _pinv_tangent(t[0], ans, a)
    # hermitian=True reads the lower triangle only (see _pinv_vjp): both the matrix and
    # its tangent are the symmetric matrices of their lower triangles.
    return _pinv_tangent(_copyltu(t[0]), ans, _copyltu(a))


def _lstsq_kernel(a, b, rcond=None):
    return np.linalg.lstsq(a, b, rcond=rcond)[0]


def _lstsq_vjp(g, ans, a, b, rcond=None):
    # Full rank (lstsq refuses a differentiable rank-deficient call): x = pinv(a) b.
    P = tg.linalg_pinv(a)
    ga = gb = None
    if tg.needs_grad(b):
        gb = _mH(P) @ g
    if tg.needs_grad(a):
        gx = g if b.ndim == 2 else tg.expand_dims(g, -1)
        bb = b if b.ndim == 2 else tg.expand_dims(b, -1)
        ga = _pinv_grad(gx @ _mH(bb), P, a)
    return ga, gb


def _lstsq_rank(s, m, n, dtype, rcond):
    """The rank np.linalg.lstsq gives a (m, n) matrix with singular values s (host)."""
    eps = np.finfo(np.result_type(dtype, np.float32)).eps
    # NumPy 2's default rcond, and LAPACK's rule that a negative rcond means eps
    rel = eps * max(m, n) if rcond is None else (eps if rcond < 0 else rcond)
    cut = rel * (s.max() if s.size else 0.0)
    return int((s > cut).sum())


def _refuse_rank_deficient(s, m, n, dtype, rcond):
    rank = _lstsq_rank(s, m, n, dtype, rcond)
    if rank < min(m, n):
        raise np.linalg.LinAlgError(
            f"linalg_lstsq: a (shape {(m, n)}) has rank {rank} < {min(m, n)}; the derivative "
            f"of a rank-deficient least-squares solution is not supported (regularize a)")


def _lstsq_jvp(t, ans, a, b, rcond=None):
    # Full rank (as the VJP): x = pinv(a) b, so dx = dpinv(a) b + pinv(a) db.
    # NOTE: tg.linalg.lstsq refuses a rank-deficient call only when an input requires
    # grad; a tangent may arrive without that, so the rule checks the rank itself.
    ta, tb = t
    m, n = a.shape
    dtype = np.result_type(a.dtype, b.dtype)
    check_values(lambda s: _refuse_rank_deficient(s, m, n, dtype, rcond), tg.linalg_svdvals(a))
    P = tg.linalg_pinv(a)
    out = None if tb is None else P @ tb
    if ta is not None:
        term = _pinv_tangent(ta, P, a) @ b
        out = term if out is None else out + term
    return out


def lstsq(a, b, rcond=None):
    """The least-squares solution of ``a @ x = b``, as ``np.linalg.lstsq(a, b, rcond)``:
    ``(x, residuals, rank, s)`` for a 2-d a (M, N) and b (M,) or (M, K) (NumPy's lstsq is
    not batched, nor is this). ``x``, ``residuals`` and ``s`` are differentiable; ``rank`` is
    an int. A rank-deficient a refuses a differentiable call (the solution jumps with the
    rank; its gradient is not defined here).

    >>> import tapegrad as tg
    >>> x, res, rank, s = tg.linalg.lstsq(tg.tensor([[1., 0.], [0., 1.], [1., 1.]]),
    ...                                   tg.tensor([1., 2., 3.]))
    >>> x.numpy().round(12).tolist(), rank
    ([1.0, 2.0], 2)
    """
    a, b = _as_tensor(a), _as_tensor(b)
    sa, sb = a.shape, b.shape
    if len(sa) != 2 or len(sb) not in (1, 2):
        raise np.linalg.LinAlgError(
            f"linalg.lstsq: a must be 2-d and b 1-d or 2-d, got shapes {sa} and {sb} (NumPy's "
            f"lstsq is not batched)")
    if sb[0] != sa[0]:
        raise np.linalg.LinAlgError(f"linalg.lstsq: incompatible dimensions: a has shape {sa}, "
                                    f"b has shape {sb} (b.shape[0] must be {sa[0]})")
    m, n = sa
    s = tg.linalg_svdvals(a)
    # NOTE: the rank decides the residuals returned: tg.compile cannot replay that
    run_eagerly("linalg.lstsq: the rank it returns, and whether it returns residuals, "
                "depend on a's values (a replay would repeat the recording's)")
    rank = _lstsq_rank(_host(s), m, n, np.result_type(a.dtype, b.dtype), rcond)
    wanted = _derivative_wanted(a=a, b=b) if rank < min(m, n) else None
    if wanted:
        raise np.linalg.LinAlgError(
            f"linalg.lstsq: a (shape {sa}) has rank {rank} < {min(m, n)}, and {wanted}; the "
            f"derivative of a rank-deficient least-squares solution is not supported (pass "
            f"a and b detached -- tg.no_grad() for a gradient --, or regularize a)")
    x = tg._linalg_lstsq(a, b, rcond=rcond)
    if rank == n and m > n:
        res = b - a @ x
        # (complex: |res|^2, real, as NumPy's residuals)
        r = tg.sum(tg.real(_conj(res) * res) if _is_complex(res) else res ** 2, axis=0)
        residuals = tg.reshape(r, (1,)) if b.ndim == 1 else r
    else:
        residuals = tg.zeros((0,), dtype=x.dtype, device=x.device)
    return x, residuals, rank, s


def _matrix_rank_kernel(A, tol=None, hermitian=False, rtol=None):
    return np.asarray(np.linalg.matrix_rank(A, tol=tol, hermitian=hermitian, rtol=rtol))


# ---------------------------------------------------------------------------------------
# Samples
# ---------------------------------------------------------------------------------------

_SQUARE = [(_general(3, 3),), (_general(2, 3, 3, seed=1),), (_general(1, 1, seed=2),)]

_SOLVE_SAMPLES = [
    (_general(3, 3), _rand(3)),                          # vector b
    (_general(3, 3), _rand(3, 2, seed=1)),               # matrix b
    (_general(2, 3, 3, seed=2), _rand(3)),               # batched a, one vector b
    (_general(2, 3, 3, seed=3), _rand(2, 3, 1, seed=4)), # batched a and b
    (_general(3, 3, seed=5), _rand(2, 3, 2, seed=6)),    # a broadcast against b's batch
    (_general(2, 1, 3, 3, seed=7), _rand(4, 3, 2, seed=8)),
]

_QR_SAMPLES = [
    tg.Sample(_rand(4, 3)), tg.Sample(_rand(3, 3, seed=1) + 2 * np.eye(3)),
    tg.Sample(_rand(2, 3, 5, seed=2)), tg.Sample(_rand(2, 3, seed=3), mode="complete"),
]

_SVD_SAMPLES = [
    tg.Sample(_distinct_sv(3, 3), full_matrices=False),
    tg.Sample(_distinct_sv(4, 2, seed=1), full_matrices=False),
    tg.Sample(_distinct_sv(2, 4, seed=2), full_matrices=False),
    tg.Sample(_distinct_sv(2, 3, 2, seed=3), full_matrices=False),
]


# ---------------------------------------------------------------------------------------
# The public functions of the single-result ops (tg.linalg.<name>); each op's doc is its
# function's docstring
# ---------------------------------------------------------------------------------------

def inv(a):
    """The inverse of square matrices, as np.linalg.inv (tg.linalg.inv); a singular matrix
    raises LinAlgError. Gradient -inv(a).T @ g @ inv(a).T. Batched over leading axes, as
    NumPy.
    """
    return tg.linalg_inv(a)


def det(a):
    """The determinant, as np.linalg.det (tg.linalg.det). Gradient det(a) inv(a).T; at a
    singular matrix the backward raises LinAlgError (PyTorch uses an SVD there). Batched
    over leading axes, as NumPy.
    """
    return tg.linalg_det(a)


def solve(a, b):
    """x with a @ x = b, as np.linalg.solve (tg.linalg.solve), NumPy 2's rule for b: a 1-d
    b is a vector, an N-d b a stack of matrices (..., M, K); batch axes broadcast.
    Gradient through solves with a.T (no explicit inverse).
    """
    return tg.linalg_solve(a, b)


def cholesky(a, /, *, upper=False):
    """The Cholesky factor L (a = L L^T; U = L^T with upper=True), as np.linalg.cholesky
    (tg.linalg.cholesky). NumPy reads only the lower (upper) triangle, so only that
    triangle gets a gradient: see docs/linalg.md (one-triangle gradients). Batched over
    leading axes, as NumPy.
    """
    return tg.linalg_cholesky(a, upper=upper)


def eigvalsh(a, UPLO="L"):
    """The eigenvalues of symmetric matrices, ascending, as np.linalg.eigvalsh
    (tg.linalg.eigvalsh). Gradient V diag(g) V^T (defined for repeated eigenvalues too),
    on the triangle UPLO names. Batched over leading axes, as NumPy.
    """
    return tg.linalg_eigvalsh(a, UPLO=UPLO)


def eigvals(a):
    """The eigenvalues of square matrices, as np.linalg.eigvals (tg.linalg.eigvals):
    complex where NumPy's are (a real matrix may have complex eigenvalues). Gradient
    V^-H diag(g) V^H. Batched over leading axes, as NumPy.
    """
    return tg.linalg_eigvals(a)


def svdvals(x, /):
    """The singular values, descending, as np.linalg.svdvals (tg.linalg.svdvals). Gradient
    U diag(g) V^T (defined for repeated singular values too). Batched over leading axes,
    as NumPy.
    """
    return tg.linalg_svdvals(x)


def pinv(a, rcond=None, hermitian=False, *, rtol=_NoValue):
    """The Moore-Penrose pseudo-inverse, as np.linalg.pinv(a, rcond, hermitian, rtol=)
    (tg.linalg.pinv; NumPy 2.4's rcond/rtol rules). Gradient: PyTorch's formula, exact
    where the rank is locally constant; at a rank change (a singular value crossing the
    cutoff) pinv jumps and has no derivative. Batched over leading axes, as NumPy.
    """
    return tg.linalg_pinv(a, rcond=rcond, hermitian=hermitian, rtol=rtol)


def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """The rank of matrices (singular values above the tolerance), as
    np.linalg.matrix_rank(A, tol, hermitian, rtol=) (tg.linalg.matrix_rank); an integer
    result, not differentiable. Batched over leading axes, as NumPy.
    """
    return tg.linalg_matrix_rank(A, tol=tol, hermitian=hermitian, rtol=rtol)


# ---------------------------------------------------------------------------------------
# vmap's batching rules (register_op(batch=)): inputs are physical, the vmapped axis first
# ---------------------------------------------------------------------------------------

def _stacked_batch(name):
    """The rule of an op on the last two axes of its one input, batched over the leading
    ones as NumPy's linalg is: the vmapped axis is one more leading axis, one call.

    NOTE: a logical input of fewer than 2 axes would be read as a matrix with the vmapped
    axis as its rows: it is refused as the kernel refuses one example. A parameter that
    is an array (pinv's rcond, matrix_rank's tol broadcast against the stack; one with
    more axes than the logical stack would broadcast against the vmapped axis) runs
    once per example instead."""
    def rule(inputs, batched, **params):
        (a,) = inputs
        _at_least_2d(_shaped(a.shape[1:]), name)
        if any(isinstance(v, (tg.Tensor, np.ndarray, list, tuple)) for v in params.values()):
            return _batching._loop(getattr(tg, name), inputs, batched, params, None)
        return getattr(tg, name)(a, **params)
    rule.__name__ = rule.__qualname__ = f"_{name}_batch"
    return rule


def _shaped(shape):
    """A value-less array of `shape` (zero strides) for the shape checks."""
    return np.broadcast_to(np.zeros(()), shape)


def _solve_batch(inputs, batched):
    """vmap's rule of solve(a, b). NumPy 2 reads a 1-d b as a vector and an N-d b as a
    stack of matrices, so a batched vector b (B, M) becomes a stack of columns (B, M, 1)
    (the result's last axis dropped after), except against a shared a, where the (B, M)
    rows are solved as the columns of one (M, B) right-hand side. The other operand's
    stack axes line up from the right (pad_batched)."""
    (a, b), (ba, bb) = inputs, batched
    size = (a if ba else b).shape[0]
    sa = tuple(a.shape[1:]) if ba else _shape(a)
    sb = tuple(b.shape[1:]) if bb else _shape(b)
    _solve_check(_shaped(sa), _shaped(sb))
    vector = len(sb) == 1
    if vector and not bb:
        return tg.linalg_solve(a, b)               # (B, ..., M, M) with one vector
    if vector and not ba and len(sa) == 2:
        return _mT(tg.linalg_solve(a, _mT(b)))     # one (M, B) right-hand side
    if vector:
        b = tg.reshape(b, (size,) + sb + (1,))
    nd = max(len(sa), len(sb) + vector)
    if ba:
        a = pad_batched(a, nd)
    if bb:
        b = pad_batched(b, nd)
    x = tg.linalg_solve(a, b)
    return x[..., 0] if vector else x


def _lstsq_batch(inputs, batched, rcond=None):
    """vmap's rule of lstsq(a, b) (NumPy's: a 2-d, b 1-d or 2-d). A shared a with a
    batched b is ONE solve with the examples' right-hand sides as columns, (m, B) or
    (m, B*k); a batched a (one factorization each) runs once per example."""
    (a, b), (ba, bb) = inputs, batched
    sb = tuple(b.shape[1:]) if bb else _shape(b)
    if ba or _shape(a)[:1] != sb[:1] or len(_shape(a)) != 2 or len(sb) not in (1, 2):
        return _batching._loop(tg._linalg_lstsq, inputs, batched, {"rcond": rcond}, None)
    size = b.shape[0]
    if len(sb) == 1:
        return _mT(tg._linalg_lstsq(a, _mT(b), rcond=rcond))      # (n, B) -> (B, n)
    m, k = sb
    cols = tg.reshape(tg.swapaxes(b, 0, 1), (m, size * k))        # (m, B*k)
    x = tg._linalg_lstsq(a, cols, rcond=rcond)                     # (n, B*k)
    return tg.swapaxes(tg.reshape(x, (x.shape[0], size, k)), 0, 1)


def _op_doc(fn):
    return " ".join(inspect.cleandoc(fn.__doc__).split("\n\n")[0].split())



def register(registry):
    _doc_batched = " Batched over leading axes, as NumPy."
    registry.register_op(
        "linalg_inv", complex=True,
        kernels={"cpu": _inv_kernel}, vjp=_inv_vjp, jvp=_inv_jvp, method=False,
        save_inputs=(False,), samples=_SQUARE,
        batch=_stacked_batch("linalg_inv"),
        doc=_op_doc(inv))
    registry.register_op(
        "linalg_det", complex=True,
        kernels={"cpu": _det_kernel}, vjp=_det_vjp, jvp=_det_jvp, method=False,
        samples=_SQUARE,
        batch=_stacked_batch("linalg_det"),
        doc=_op_doc(det))
    registry.register_op(
        "_linalg_slogdet", complex=True,
        kernels={"cpu": _slogdet_kernel}, vjp=_slogdet_vjp, jvp=_slogdet_jvp, method=False,
        samples=_SQUARE + [(-_general(3, 3, seed=4),)],
        batch=_stacked_batch("_linalg_slogdet"),
        doc="The op behind tg.linalg.slogdet: sign and log|det| stacked along a last axis "
            "of length 2. Only log|det| has a gradient (inv(a).T); sign's is 0." + _doc_batched)
    registry.register_function("linalg_slogdet", slogdet, method=False, samples=_SQUARE)
    registry.register_op(
        "linalg_solve", complex=True,
        kernels={"cpu": _solve_kernel}, vjp=_solve_vjp, jvp=_solve_jvp, method=False,
        samples=_SOLVE_SAMPLES,
        batch=_solve_batch,
        doc=_op_doc(solve))
    registry.register_op(
        "linalg_cholesky", complex=True, kernels={"cpu": _cholesky_kernel}, vjp=_cholesky_vjp,
        jvp=_cholesky_jvp, method=False,
        save_inputs=(False,),
        samples=[tg.Sample(_spd(3, 3)), tg.Sample(_spd(2, 3, 3, seed=1)),
                 tg.Sample(_spd(4, 4, seed=2), upper=True)],
        batch=_stacked_batch("linalg_cholesky"),
        doc=_op_doc(cholesky))
    registry.register_op(
        "_linalg_qr", complex=True,
        kernels={"cpu": _qr_kernel}, vjp=_qr_vjp, jvp=_qr_jvp, method=False,
        samples=_QR_SAMPLES,
        batch=_stacked_batch("_linalg_qr"),
        doc="The op behind tg.linalg.qr: Q (m, k) stacked on R^T (n, k), shape (m + n, k). "
            "Gradient for modes 'reduced' and 'complete' with m <= n." + _doc_batched)
    registry.register_function("linalg_qr", qr, method=False, samples=_QR_SAMPLES + [
        tg.Sample(_rand(4, 3, seed=5), mode="r")])
    # NOTE: LAPACK picks each eigenvector's sign, and a finite-difference step can flip
    # it (a jump, not a derivative); these seeds give matrices where no step does.
    eigh_samples = [tg.Sample(_sym(3, 3)), tg.Sample(_sym(2, 3, 3, seed=15)),
                    tg.Sample(_sym(4, 4, seed=3), UPLO="U")]
    registry.register_op(
        "_linalg_eigh", complex=True,
        kernels={"cpu": _eigh_kernel}, vjp=_eigh_vjp, jvp=_eigh_jvp, method=False,
        save_inputs=(False,), samples=eigh_samples,
        batch=_stacked_batch("_linalg_eigh"),
        doc="The op behind tg.linalg.eigh: the eigenvalues (one row) stacked on the "
            "eigenvectors, shape (n + 1, n). The gradient through the eigenvectors divides "
            "by eigenvalue gaps: a repeated eigenvalue raises LinAlgError in the backward "
            "(PyTorch gives inf/nan)." + _doc_batched)
    registry.register_function("linalg_eigh", eigh, method=False, samples=eigh_samples)
    registry.register_op(
        "linalg_eigvalsh", complex=True, kernels={"cpu": _eigvalsh_kernel}, vjp=_eigvalsh_vjp,
        jvp=_eigvalsh_jvp, method=False,
        save_ans=False, samples=eigh_samples,
        batch=_stacked_batch("linalg_eigvalsh"),
        doc=_op_doc(eigvalsh))
    eig_samples = [(_real_spectrum(3, 3),), (_real_spectrum(2, 3, 3, seed=1),)]
    registry.register_op(
        "_linalg_eig", complex=True,
        kernels={"cpu": _eig_kernel}, vjp=_eig_vjp, jvp=_eig_jvp, method=False,
        save_inputs=(False,), samples=eig_samples,
        batch=_stacked_batch("_linalg_eig"),
        doc="The op behind tg.linalg.eig: the eigenvalues stacked on the unit eigenvectors, "
            "(n + 1, n), complex where NumPy's are (a real matrix may have complex "
            "eigenvalues)." + _doc_batched)
    registry.register_function("linalg_eig", eig, method=False, samples=eig_samples)
    registry.register_op(
        "linalg_eigvals", complex=True, kernels={"cpu": _eigvals_kernel}, vjp=_eigvals_vjp,
        jvp=_eigvals_jvp, method=False,
        save_ans=False, samples=eig_samples,
        batch=_stacked_batch("linalg_eigvals"),
        doc=_op_doc(eigvals))
    registry.register_op(
        "_linalg_svd", complex=True,
        kernels={"cpu": _svd_kernel}, vjp=_svd_vjp, jvp=_svd_jvp, method=False,
        save_inputs=(False,), samples=_SVD_SAMPLES,
        batch=_stacked_batch("_linalg_svd"),
        doc="The op behind tg.linalg.svd: U (m rows), S (one row) and V = Vh^T (n rows) "
            "stacked, zero-padded to one width. The gradient through U and V divides by gaps "
            "of squared singular values: a repeated one raises LinAlgError in the backward "
            "(PyTorch gives inf/nan)." + _doc_batched)
    registry.register_function("linalg_svd", svd, method=False, samples=[
        tg.Sample(*s.args, **s.kwargs) for s in _SVD_SAMPLES] + [
        tg.Sample(_distinct_sv(3, 3, seed=4)), tg.Sample(_distinct_sv(3, 2, seed=5),
                                                          compute_uv=False)])
    svdvals_samples = [(_distinct_sv(3, 3),), (_distinct_sv(4, 2, seed=1),),
                       (_distinct_sv(2, 2, 3, seed=2),)]
    registry.register_op(
        "linalg_svdvals", complex=True, kernels={"cpu": _svdvals_kernel}, vjp=_svdvals_vjp,
        jvp=_svdvals_jvp, method=False,
        save_ans=False, samples=svdvals_samples,
        batch=_stacked_batch("linalg_svdvals"),
        doc=_op_doc(svdvals))
    registry.register_op(
        "linalg_pinv", complex=True,
        kernels={"cpu": _pinv_kernel}, vjp=_pinv_vjp, jvp=_pinv_jvp, method=False,
        samples=[tg.Sample(_distinct_sv(3, 3)), tg.Sample(_distinct_sv(4, 2, seed=1)),
                 tg.Sample(_distinct_sv(2, 2, 4, seed=2)), tg.Sample(_spd(3, 3), hermitian=True),
                 tg.Sample(_distinct_sv(3, 2, seed=3), rtol=1e-10)],
        batch=_stacked_batch("linalg_pinv"),
        doc=_op_doc(pinv))
    lstsq_samples = [(_rand(4, 2), _rand(4, seed=1)), (_rand(4, 3, seed=2), _rand(4, 2, seed=3)),
                     (_general(3, 3, seed=4), _rand(3, seed=5)),
                     (_distinct_sv(2, 3, seed=6), _rand(2, seed=7))]
    registry.register_op(
        "_linalg_lstsq", complex=True,
        kernels={"cpu": _lstsq_kernel}, vjp=_lstsq_vjp, jvp=_lstsq_jvp,
        batch=_lstsq_batch,
        method=False, save_ans=False, samples=lstsq_samples,
        doc="The op behind tg.linalg.lstsq: its solution x. Gradient through x = pinv(a) b "
            "(full rank only; tg.linalg.lstsq refuses a rank-deficient differentiable call).")
    registry.register_function("linalg_lstsq", lstsq, method=False, samples=lstsq_samples)
    registry.register_op(
        "linalg_matrix_rank", kernels={"cpu": _matrix_rank_kernel}, nin=1,
        params=("tol", "hermitian", "rtol"), method=False,
        samples=[(_rand(3, 4),), (np.ones((2, 3, 3)),), tg.Sample(_spd(3, 3), hermitian=True),
                 tg.Sample(_rand(3, 3), tol=0.5)],
        batch=_stacked_batch("linalg_matrix_rank"),
        doc=_op_doc(matrix_rank))
