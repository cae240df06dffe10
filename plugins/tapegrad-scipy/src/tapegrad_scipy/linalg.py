"""``tg.scipy.linalg``: solve_triangular, cholesky, cho_solve and sqrtm with gradients.

Each takes SciPy's arguments (``solve_triangular(a, b, trans=0, lower=False,
unit_diagonal=False)``, ``cho_solve((c, lower), b)``) for a single matrix ``a`` (2-D)
and a right-hand side ``b`` of shape (M,) or (M, K); stacks of matrices are refused with
a ValueError. Every gradient rule is written with these ops, matmul and masks, so
second derivatives work.

Op names in the flat table: ``scipy_linalg_<name>`` (tapegrad-linalg owns the plain
np.linalg names), and ``_scipy_linalg_sylvester_sym``, sqrtm's gradient helper.

>>> import numpy as np, tapegrad as tg
>>> L = tg.tensor([[2.0, 0.0], [1.0, 1.0]], requires_grad=True)
>>> x = tg.scipy.linalg.solve_triangular(L, tg.tensor([2.0, 3.0]), lower=True)
>>> x
tensor([1., 2.], grad_fn=<...>)
>>> (x * tg.tensor([1.0, 2.0])).sum().backward()
>>> L.grad                                   # -L^{-T} w x^T, on the lower triangle
tensor([[ 0.5,  0. ],
        [-2. , -4. ]])
"""

import numpy as np
import tapegrad as tg

from ._common import Draw, loop_fallback

_needs_grad = tg.needs_grad


# ---------------------------------------------------------------------------------------
# Argument checks (SciPy's own messages are about LAPACK; these name the function)
# ---------------------------------------------------------------------------------------

def _check_square(name, a):
    shape = np.shape(a)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"{name}: a must be one square matrix (M, M), got shape {shape} "
                         f"(stacks of matrices are not supported)")
    return shape[0]


def _check_rhs(name, m, b):
    shape = np.shape(b)
    if len(shape) not in (1, 2) or shape[0] != m:
        raise ValueError(f"{name}: b must have shape ({m},) or ({m}, K) to match a "
                         f"({m}, {m}), got {shape}")


def _trans_code(trans):
    """SciPy's trans (0/'N', 1/'T', 2/'C') as 0 or 1; 'C' is 'T' for real matrices."""
    codes = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}
    if isinstance(trans, str):
        trans = trans.upper()
    if trans not in codes:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    return codes[trans]


def _triangle(n, lower, diagonal, like):
    """A bool mask (on `like`'s device) of the triangle a triangular function reads."""
    k = 0 if diagonal else 1
    mask = np.tril(np.ones((n, n), bool), -k) if lower else np.triu(np.ones((n, n), bool), k)
    return tg.tensor(mask, device=like.device)


def _mT(x):
    return tg.swapaxes(x, -1, -2)


def _outer(u, v):
    """u v^T for vectors (u[:, None] * v[None, :]), u @ v^T for matrices."""
    if u.ndim == 1:
        return tg.reshape(u, (-1, 1)) * tg.reshape(v, (1, -1))
    return u @ _mT(v)


# ---------------------------------------------------------------------------------------
# solve_triangular
# ---------------------------------------------------------------------------------------

def _solve_triangular_kernel(a, b, trans=0, lower=False, unit_diagonal=False):
    m = _check_square("solve_triangular", a)
    _check_rhs("solve_triangular", m, b)
    import scipy.linalg as sl   # NOTE: here, not at the top: importing it costs 0.15 s, which `import tapegrad` would pay
    return sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


def _solve_triangular_batch(inputs, batched, **params):
    a, b = inputs
    if batched[0]:
        # one matrix per example: a solve each (SciPy's solve_triangular takes one)
        return loop_fallback("scipy_linalg_solve_triangular", inputs, batched, params)
    # One matrix for every example: the examples' right-hand sides are the columns of one
    # (M, batch * K) right-hand side.
    m = b.shape[1]
    cols = tg.transpose(b, (1, 0) + tuple(range(2, b.ndim)))         # (M, batch[, K])
    x = tg.scipy_linalg_solve_triangular(a, tg.reshape(cols, (m, -1)), **params)
    x = tg.reshape(x, cols.shape)
    return tg.transpose(x, (1, 0) + tuple(range(2, b.ndim)))


def _solve_triangular_vjp(g, ans, a, b, trans=0, lower=False, unit_diagonal=False):
    # x = op(a)^-1 b, op(a) = a or a^T: b's gradient is op(a)^-T g, a solve with the other
    # trans; op(a)'s is -gb x^T, read back onto the triangle a's kernel reads (the other
    # triangle, and the diagonal when unit_diagonal, never enter the result).
    gb = tg.scipy_linalg_solve_triangular(a, g, trans=1 - trans, lower=lower,
                                          unit_diagonal=unit_diagonal)
    ga = None
    if _needs_grad(a):
        gop = -_outer(gb, ans)
        ga = gop if trans == 0 else _mT(gop)
        ga = tg.where(_triangle(a.shape[0], lower, not unit_diagonal, g), ga, 0.0)
    return ga, (gb if _needs_grad(b) else None)


def _solve_triangular_jvp(t, ans, a, b, trans=0, lower=False, unit_diagonal=False):
    # op(a) x = b: op(da) x + op(a) dx = db, with da read on the triangle the kernel reads
    # (the VJP's mask), so dx = op(a)^-1 (db - op(da) x): one more solve.
    ta, tb = t
    rhs = tb
    if ta is not None:
        da = tg.where(_triangle(a.shape[0], lower, not unit_diagonal, ta), ta, 0.0)
        dop_x = (da if trans == 0 else _mT(da)) @ ans
        rhs = -dop_x if rhs is None else rhs - dop_x
    if rhs is None:
        return tg.zeros_like(ans)
    return tg.scipy_linalg_solve_triangular(a, rhs, trans=trans, lower=lower,
                                            unit_diagonal=unit_diagonal)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """``scipy.linalg.solve_triangular``: x with op(a) x = b, a triangular (only the
    `lower` or upper triangle is read; with `unit_diagonal` the diagonal is taken as 1).
    Differentiable in a (on the triangle read) and b. `overwrite_b` and `check_finite`
    are accepted and ignored (the input is never overwritten).

    >>> import tapegrad as tg
    >>> tg.scipy.linalg.solve_triangular(tg.tensor([[2.0, 1.0], [0.0, 4.0]]), tg.tensor([3.0, 4.0]))
    tensor([1., 1.])
    """
    return tg.scipy_linalg_solve_triangular(a, b, trans=_trans_code(trans), lower=bool(lower),
                                            unit_diagonal=bool(unit_diagonal))


# ---------------------------------------------------------------------------------------
# cholesky
# ---------------------------------------------------------------------------------------

# NOTE: one op, one owner: the factorisation and its rule are tapegrad-linalg's
# (tg.linalg.cholesky, which reads the same triangle as SciPy for either factor).


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """``scipy.linalg.cholesky``: the factor U with a = U^T U (L with a = L L^T when
    `lower`); SciPy's default is the UPPER factor. Only that triangle of `a` is read
    (and gets a gradient). A matrix that is not positive definite raises a ValueError
    naming the op (SciPy's LinAlgError, which is a ValueError).

    >>> import tapegrad as tg
    >>> tg.scipy.linalg.cholesky(tg.tensor([[4.0, 2.0], [2.0, 2.0]]), lower=True)
    tensor([[2., 0.],
            [1., 1.]])
    """
    return tg.linalg.cholesky(a, upper=not lower)


# ---------------------------------------------------------------------------------------
# cho_solve
# ---------------------------------------------------------------------------------------

def _cho_solve(c, b, lower=False):
    if lower:       # a = L L^T: L y = b, L^T x = y
        y = tg.scipy_linalg_solve_triangular(c, b, trans=0, lower=True)
        return tg.scipy_linalg_solve_triangular(c, y, trans=1, lower=True)
    y = tg.scipy_linalg_solve_triangular(c, b, trans=1, lower=False)      # a = U^T U
    return tg.scipy_linalg_solve_triangular(c, y, trans=0, lower=False)


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """``scipy.linalg.cho_solve((c, lower), b)``: x with a x = b, from a's Cholesky
    factor c (as ``cho_factor``/``cholesky`` return it; only its `lower` or upper
    triangle is read). Differentiable in c and b.

    >>> import tapegrad as tg
    >>> c = tg.scipy.linalg.cholesky(tg.tensor([[4.0, 2.0], [2.0, 2.0]]))
    >>> tg.scipy.linalg.cho_solve((c, False), tg.tensor([6.0, 4.0]))
    tensor([1., 1.])
    """
    # NOTE: a bare matrix would unpack into its two rows (c, lower = a) and fail later
    # with "truth value ... ambiguous"; only a real pair is taken.
    if not isinstance(c_and_lower, (tuple, list)) or len(c_and_lower) != 2:
        what = (f"a tensor of shape {tuple(c_and_lower.shape)}" if hasattr(c_and_lower, "shape")
                else type(c_and_lower).__name__)
        raise TypeError(f"cho_solve: the first argument must be the pair (c, lower), as "
                        f"scipy.linalg.cho_factor returns it, got {what}")
    c, lower = c_and_lower
    return tg.scipy_linalg_cho_solve(c, b, lower=bool(lower))


# ---------------------------------------------------------------------------------------
# sqrtm (symmetric input)
# ---------------------------------------------------------------------------------------

def _symmetric_part(name, a):
    """(a + a^T) / 2, refusing a matrix that is not symmetric to a relative 1e-5."""
    _check_square(name, a)
    a = np.asarray(a)
    scale = max(1.0, float(np.max(np.abs(a)))) if a.size else 1.0
    if a.size and float(np.max(np.abs(a - a.T))) > 1e-5 * scale:
        raise ValueError(f"{name}: only symmetric matrices are supported (the square root "
                         f"is computed through eigh); this one differs from its transpose "
                         f"by up to {float(np.max(np.abs(a - a.T))):.3g}")
    return (a + a.T) / 2


def _sqrtm_kernel(a):
    s = _symmetric_part("sqrtm", a)
    w, v = np.linalg.eigh(s)
    if w.size and w[0] < -1e-10 * max(1.0, abs(w[-1])):
        raise ValueError(f"sqrtm: the matrix has a negative eigenvalue ({w[0]:.3g}): its "
                         f"square root is complex, which tapegrad-scipy does not support")
    return ((v * np.sqrt(np.clip(w, 0, None))) @ v.T).astype(s.dtype, copy=False)


def _sqrtm_vjp(g, ans, a):
    # X = sqrtm(A) solves X X = A, so dX solves X dX + dX X = dA (a Sylvester equation
    # with the symmetric X); its adjoint is the same equation, on the symmetric part of g
    # (the kernel reads the symmetric part of a).
    return (tg._scipy_linalg_sylvester_sym(ans, 0.5 * (g + _mT(g))),)


def _sqrtm_jvp(t, ans, a):
    # X dX + dX X = dA on the symmetric part of dA (the part the kernel reads).
    return tg._scipy_linalg_sylvester_sym(ans, 0.5 * (t[0] + _mT(t[0])))


def _sylvester_kernel(r, c):
    r = _symmetric_part("sylvester_sym", r)
    c = np.broadcast_to(c, r.shape)          # C broadcasts to R's shape (like NumPy's ops)
    w, v = np.linalg.eigh(r)
    return (v @ ((v.T @ c @ v) / (w[:, None] + w[None, :])) @ v.T).astype(
        np.result_type(r, c), copy=False)


def _sylvester_vjp(g, ans, r, c):
    # X solves R X + X R = C (R symmetric): the adjoint of that linear map is itself, so
    # C's gradient is Y solving R Y + Y R = g, and R's is -(Y X^T + X^T Y) (symmetrized:
    # the kernel reads R's symmetric part).
    y = tg._scipy_linalg_sylvester_sym(r, g)
    gr = None
    if _needs_grad(r):
        gr = -(y @ _mT(ans) + _mT(ans) @ y)
        gr = 0.5 * (gr + _mT(gr))
    return gr, (y if _needs_grad(c) else None)


def _sylvester_jvp(t, ans, r, c):
    # R X + X R = C: dR X + R dX + dX R + X dR = dC, so dX solves the same equation with
    # C replaced by dC - dR X - X dR (dR symmetrized: the kernel reads R's symmetric part).
    tr, tc = t
    rhs = tc
    if tr is not None:
        dr = 0.5 * (tr + _mT(tr))
        moved = dr @ ans + ans @ dr
        rhs = -moved if rhs is None else rhs - moved
    if rhs is None:
        return tg.zeros_like(ans)
    return tg._scipy_linalg_sylvester_sym(r, rhs)


def sqrtm(A, disp=True, blocksize=64):
    """``scipy.linalg.sqrtm`` for a symmetric positive semi-definite matrix: the
    symmetric X with X X = A, through eigh. A matrix that is not symmetric (to a relative
    1e-5), or has a negative eigenvalue (a complex root), raises a ValueError. The
    gradient solves the Sylvester equation X dA' + dA' X = g (it does not exist where A
    is singular).

    >>> import tapegrad as tg
    >>> tg.scipy.linalg.sqrtm(tg.tensor([[4.0, 0.0], [0.0, 9.0]]))
    tensor([[2., 0.],
            [0., 3.]])
    """
    return tg.scipy_linalg_sqrtm(A)


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

def register(registry):
    """Register this module's ops and functions (called by the plugin's hook)."""
    draw = Draw(seed=15)
    reg = registry.register_op

    def tri(n, lower=True):
        a = draw.normal(n, n) * 0.3 + np.diag(draw.uniform(1.0, 2.0, n))
        return np.tril(a) if lower else np.triu(a)

    reg("scipy_linalg_solve_triangular", kernels={"cpu": _solve_triangular_kernel},
        vjp=_solve_triangular_vjp, jvp=_solve_triangular_jvp, method=False,
        batch=_solve_triangular_batch,
        save_inputs=(True, False),
        samples=[tg.Sample(tri(3), draw.normal(3), lower=True),
                 tg.Sample(tri(3, False), draw.normal(3, 2)),
                 tg.Sample(tri(4), draw.normal(4, 2), trans=1, lower=True),
                 tg.Sample(tri(3, False), draw.normal(3), trans=1, unit_diagonal=True),
                 tg.Sample(draw.normal(3, 3), draw.normal(3, 2), lower=True, unit_diagonal=True)],
        doc="scipy.linalg.solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False) "
            "with trans 0 or 1: x = op(a)^-1 b for one matrix a and b of shape (M,) or "
            "(M, K). Only the triangle the solve reads (and, with unit_diagonal, not the "
            "diagonal) gets a gradient.")
    registry.register_function(
        "scipy_linalg_cho_solve", _cho_solve, method=False,
        samples=[tg.Sample(np.linalg.cholesky(draw.spd(3)), draw.normal(3), lower=True),
                 tg.Sample(np.linalg.cholesky(draw.spd(3)).T, draw.normal(3, 2))])
    reg("scipy_linalg_sqrtm", kernels={"cpu": _sqrtm_kernel}, vjp=_sqrtm_vjp, jvp=_sqrtm_jvp,
        method=False, save_inputs=(False,),
        samples=[(draw.spd(3),), (draw.spd(2, jitter=0.5),)],
        doc="scipy.linalg.sqrtm(A) for symmetric positive semi-definite A (through eigh): "
            "the symmetric X with X X = A. Non-symmetric input (beyond a relative 1e-5) "
            "and negative eigenvalues raise a ValueError; the symmetric part is used.")
    reg("_scipy_linalg_sylvester_sym", kernels={"cpu": _sylvester_kernel},
        vjp=_sylvester_vjp, jvp=_sylvester_jvp, method=False,
        samples=[(draw.spd(3), draw.normal(3, 3)), (draw.spd(3), draw.normal(3)),
                 (draw.spd(2), draw.normal(2, 1))],
        doc="The X with R X + X R = C for symmetric positive definite R (its symmetric "
            "part is used; C broadcasts to R's shape), through eigh: the gradient of sqrtm.")
