"""Small tensor helpers shared by the tg.linalg modules (all written in tapegrad ops, so
the gradient rules that use them stay differentiable and device-agnostic)."""

from __future__ import annotations

import numpy as np
import tapegrad as tg
from tapegrad._batching import check_values

from .ops import _conj, _mH, _mT, _rand, _shape  # noqa: F401  (re-exported for the modules)


def _is_complex(t):
    return np.dtype(t.dtype).kind == "c"


def _real(t):
    """The real part of t (t itself when real)."""
    return tg.real(t) if _is_complex(t) else t


def _imag_diag(m):
    """i Im(m_ii) on the diagonal, 0 elsewhere: the skew-Hermitian part of m's diagonal
    (None for a real m, where it is 0)."""
    if not _is_complex(m):
        return None
    d = _diagonal(m)
    return _diag_embed(0.5 * (d - tg.conj(d)))


def _eye(n, like):
    return tg.eye(n, dtype=like.dtype, device=like.device)


def _const(array, like):
    """A constant tensor (a mask) on `like`'s device and dtype."""
    return tg.tensor(np.asarray(array), dtype=like.dtype, device=like.device)


def _diag_embed(v):
    """(..., n) -> (..., n, n) with v on the diagonal."""
    return tg.expand_dims(v, -2) * _eye(v.shape[-1], v)


def _diagonal(m):
    """(..., n, n) -> (..., n): the diagonal of every matrix."""
    return tg.sum(m * _eye(m.shape[-1], m), axis=-1)


def _tril(m, k=0):
    n = m.shape[-1]
    return m * _const(np.tri(m.shape[-2], n, k), m)


def _triangle_grad(G, lower):
    """The gradient of a function that reads only one triangle of its (symmetric) input.

    Note: [one-triangle gradients]
    np.linalg.cholesky/eigh/eigvalsh (and pinv(hermitian=True)) read only the lower (or
    upper) triangle of A, so an entry A_ij (i > j) stands for both A_ij and A_ji, and the
    other triangle has no effect at all. Given G, the gradient for a full (symmetric)
    perturbation, the exact gradient of what NumPy computes is G_ij + G_ji on the read
    triangle, G_ii on the diagonal and 0 on the other triangle. This is what finite
    differences see; for a symmetric A = f(X) the chain rule gives the same gradient in X
    as PyTorch's symmetric convention.
    Complex (Hermitian) input: an entry A_ij of the read triangle stands for A_ij and
    conj(A_ij) = A_ji, so its gradient is G_ij + conj(G_ji); LAPACK reads only the real part
    of the diagonal, whose gradient is Re(G_ii). Both are G + G^H (halved on the diagonal).
    """
    n = G.shape[-1]
    mask = np.tri(n, n, -1) if lower else np.tri(n, n, -1).T
    if _is_complex(G):
        H = G + _mH(G)
        return _const(mask, H) * H + 0.5 * H * _eye(n, H)
    return _const(mask, G) * (G + _mT(G)) + G * _eye(n, G)


def _square(a, op):
    """Refuse anything that is not a stack of square matrices, as NumPy does."""
    shape = _shape(a)
    if len(shape) < 2:
        raise np.linalg.LinAlgError(
            f"{op}: {len(shape)}-dimensional array given (shape {shape}); the array must be at "
            f"least two-dimensional")
    if shape[-1] != shape[-2]:
        raise np.linalg.LinAlgError(
            f"{op}: last 2 dimensions of the array must be square, got shape {shape}")


def _at_least_2d(a, op):
    shape = _shape(a)
    if len(shape) < 2:
        raise np.linalg.LinAlgError(
            f"{op}: {len(shape)}-dimensional array given (shape {shape}); the array must be at "
            f"least two-dimensional")


def _host(t):
    """The values of a tensor as a NumPy array (for the checks a rule makes on values)."""
    return np.asarray(t.detach().numpy()) if isinstance(t, tg.Tensor) else np.asarray(t)


def _safe_offdiag_divide(num, den, op, what):
    """num / den off the diagonal, 0 on it, for the rules whose formulas divide by
    eigenvalue (or squared singular value) gaps.

    Note: [degenerate spectra]
    Where a gap is exactly 0 (a repeated eigenvalue or singular value) the eigenvectors are
    not unique and the gradient does not exist: PyTorch returns inf/nan there. Here a zero
    gap with a nonzero numerator raises LinAlgError naming the op; a zero gap whose
    numerator is 0 too (the loss does not depend on the choice of basis, e.g. only the
    eigenvalues are used) contributes 0, which is the gradient in that case.
    """
    n = den.shape[-1]
    off = _const(1.0 - np.eye(n), den)
    # NOTE: the masks are tensor ops and the check a compile_check: masks read off host
    # values would be constants to tg.compile, which a replay with other values reuses.
    zero_gap = tg.where(den == 0, off, 0.0)                    # 1 where a gap is 0
    # (check_values: compile_check's check, per example inside tg.vmap)
    check_values(lambda nv, zv: _refuse_degenerate(nv, zv, op, what), num, zero_gap)
    safe = zero_gap + (1.0 - off)                              # 1 on gaps and the diagonal
    return num / (den + safe) * (off - zero_gap)


def _refuse_degenerate(num, zero_gap, op, what):
    if (num[np.broadcast_to(zero_gap == 1, num.shape)] != 0).any():
        raise np.linalg.LinAlgError(
            f"{op}: the gradient through the {what} is not defined for repeated "
            f"{'singular values' if 'singular' in what else 'eigenvalues'} (the {what} are "
            f"not unique there; PyTorch returns inf/nan); use a loss that depends on the "
            f"values only, or perturb the input")
