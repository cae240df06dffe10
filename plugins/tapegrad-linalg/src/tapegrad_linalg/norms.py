"""tg.linalg's norms: ``norm``, ``vector_norm``, ``matrix_norm`` and ``cond``, as np.linalg.

``vector_norm`` is an op (``linalg_vector_norm``) with its own rule, so the gradient at a
zero vector and at ties follows PyTorch (below); the matrix norms are composed of it, of
sum/abs/max/min and of ``svdvals``.

Note: [norm gradients at non-differentiable points] (PyTorch's convention)
- ord=2 (and 'fro'): the gradient at a zero vector is 0;
- ord=1: sign(x) g (0 for a zero entry: the subgradient);
- ord=inf / -inf: g sign(x), shared evenly among the entries that tie for the max / min |x|;
- other p >= 1: g sign(x) |x|^(p-1) / norm^(p-1), 0 where the norm is 0; p < 1 (negative p
  included): the same, 0 at zero entries;
- ord=0 (the count of nonzero entries): gradient 0 everywhere;
- matrix 2/-2/'nuc' go through svdvals, 1/-1/inf/-inf through sum(abs) and max/min (ties
  share the gradient evenly).

>>> import tapegrad as tg
>>> x = tg.tensor([3., -4.], requires_grad=True)
>>> tg.linalg.norm(x)
tensor(5., grad_fn=<linalg_vector_norm>)
>>> tg.linalg.norm(x).backward(); x.grad
tensor([ 0.6, -0.8])
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import tapegrad as tg

from ._helpers import _rand
from .decompositions import _as_tensor, _distinct_sv, _general


def _norm_axes(axis, ndim, op):
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for ax in axes:
        if not isinstance(ax, numbers.Integral):
            raise TypeError(f"{op}: axis must be an int or a tuple of ints, got {axis!r}")
        if not -ndim <= ax < ndim:
            raise np.exceptions.AxisError(ax, ndim, op)
        out.append(ax % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: duplicate axes in {axis!r}")
    return tuple(out)


def _vector_norm_kernel(x, ord=2, axis=None, keepdims=False):
    if isinstance(ord, str):
        raise ValueError(f"linalg_vector_norm: invalid norm order {ord!r} for vectors")
    return np.asarray(np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord))


def _sign(x):
    """sign(x) for real x; for complex x the phase x / |x| (0 at 0), NumPy 2's sign, written
    with abs and where so that it has a (complex) derivative."""
    if x.dtype.kind != "c":
        return tg.sign(x)
    ax = tg.abs(x)
    return x / tg.where(ax == 0, 1.0, ax)


def _vector_norm_vjp(g, ans, x, ord=2, axis=None, keepdims=False):
    # Complex x: the norm of |x|; d|x| = Re(conj(sign(x)) dx), so every rule below holds
    # with the phase sign(x) = x / |x| (docs/autograd.md's convention).
    if not keepdims:
        axes = _norm_axes(axis, x.ndim, "linalg_vector_norm")
        kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        g, ans = tg.reshape(g, kept), tg.reshape(ans, kept)
    zero = ans == 0
    safe = tg.where(zero, 1.0, ans)
    if ord == 2:
        return (x * tg.where(zero, 0.0, g / safe),)
    if ord == 1:
        return (_sign(x) * g,)
    if ord == 0:
        return (tg.zeros_like(x),)
    if math.isinf(ord):
        ties = (tg.abs(x) == ans).astype(x.dtype)     # (a float32 x keeps float32)
        red = None if axis is None else _norm_axes(axis, x.ndim, "linalg_vector_norm")
        count = tg.sum(ties, axis=red, keepdims=True)
        return (_sign(x) * ties / count * g,)
    ax = tg.abs(x)
    nz = ax != 0
    # NOTE: |x|^(p-1) is inf at a zero entry for p < 1; the safe base keeps the masked
    # branch finite so that second derivatives do not pick up 0 * inf = nan.
    scaled = _sign(x) * tg.where(nz, tg.where(nz, ax, 1.0) ** (ord - 1), 0.0)
    return (scaled * tg.where(zero, 0.0, g / safe ** (ord - 1)),)


def _vector_norm_jvp(t, ans, x, ord=2, axis=None, keepdims=False):
    # The norm is a reduction: its tangent is the sum of (gradient for g = 1) * tangent
    # (complex: Re(conj(gradient) * tangent), a real tangent).
    unit = _vector_norm_vjp(tg.ones_like(ans), ans, x, ord=ord, axis=axis, keepdims=keepdims)[0]
    red = None if axis is None else _norm_axes(axis, x.ndim, "linalg_vector_norm")
    prod = tg.real(tg.conj(unit) * t[0]) if unit.dtype.kind == "c" else unit * t[0]
    return tg.sum(prod, axis=red, keepdims=keepdims)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The vector norm of x over `axis` (all axes flattened when None), as
    ``np.linalg.vector_norm``: ord any real p, inf, -inf, 0. Gradient conventions at zero
    and at ties: see the module docs (PyTorch's).

    >>> import tapegrad as tg
    >>> tg.linalg.vector_norm(tg.tensor([[3., 4.], [0., 1.]]), axis=1, ord=1).tolist()
    [7.0, 1.0]
    """
    x = _as_tensor(x)
    if isinstance(axis, list):
        axis = tuple(axis)
    return tg.linalg_vector_norm(x, ord=ord, axis=axis, keepdims=keepdims)


def _keep(result, shape, axes):
    """result reshaped as if the reduced `axes` of `shape` had been kept (length 1)."""
    return tg.reshape(result, tuple(1 if i in axes else d for i, d in enumerate(shape)))


def _matrix_norm(x, ord, axes, keepdims, op):
    r, c = axes
    if r == c:
        raise ValueError(f"{op}: duplicate axes given ({r}, {c})")
    if ord == "fro":
        return tg.linalg_vector_norm(x, ord=2, axis=(r, c), keepdims=keepdims)
    if ord in ("nuc", 2, -2):
        s = tg.linalg_svdvals(tg.moveaxis(x, (r, c), (-2, -1)))
        out = (tg.sum(s, axis=-1) if ord == "nuc" else tg.max(s, axis=-1) if ord == 2
               else tg.min(s, axis=-1))
    elif ord in (1, -1, math.inf, -math.inf):
        if ord in (math.inf, -math.inf):
            r, c = c, r                          # inf: the max row sum (1: column sum)
        sums = tg.sum(tg.abs(x), axis=r)
        out = (tg.max if ord > 0 else tg.min)(sums, axis=c - 1 if c > r else c)
    else:
        raise ValueError(f"{op}: invalid norm order {ord!r} for matrices (use None, 'fro', "
                         f"'nuc', inf, -inf, 1, -1, 2 or -2)")
    return _keep(out, x.shape, axes) if keepdims else out


def norm(x, ord=None, axis=None, keepdims=False):
    """A matrix or vector norm, as ``np.linalg.norm(x, ord, axis, keepdims)``.

    Vector norms (a 1-d x, or an int axis): ord None/2, 1, inf, -inf, 0, any real p.
    Matrix norms (a 2-d x, or a pair of axes): ord None/'fro', 'nuc', 1, -1, 2, -2, inf,
    -inf. ``axis=None`` with ``ord=None`` is the 2-norm of the flattened x. Gradient
    conventions at zero and at ties: see the module docs (PyTorch's).

    >>> import tapegrad as tg
    >>> a = tg.tensor([[1., -2.], [3., 4.]])
    >>> float(tg.linalg.norm(a, 1)), float(tg.linalg.norm(a, "fro") ** 2)
    (6.0, 30.0)
    """
    x = _as_tensor(x)
    if x.dtype.kind not in "fc":
        x = tg.asarray(x, dtype=np.float64)
    nd = x.ndim
    if axis is None:
        if ord is None:
            return tg.linalg_vector_norm(x, ord=2, axis=None, keepdims=keepdims)
        if nd == 1:
            axis = (0,)
        elif nd == 2:
            axis = (0, 1)
        else:
            raise ValueError(f"linalg.norm: improper number of dimensions to norm: x has shape "
                             f"{x.shape}; give axis= for an ord on a {nd}-d x")
    elif isinstance(axis, numbers.Integral):
        axis = (axis,)
    elif isinstance(axis, (tuple, list)):
        axis = tuple(axis)
    else:
        raise TypeError(f"linalg.norm: 'axis' must be None, an integer or a tuple of integers, "
                        f"got {axis!r}")
    axes = _norm_axes(axis, nd, "linalg.norm")
    if len(axes) == 1:
        if isinstance(ord, str):
            raise ValueError(f"linalg.norm: invalid norm order {ord!r} for vectors")
        return tg.linalg_vector_norm(x, ord=2 if ord is None else ord, axis=axes[0],
                                     keepdims=keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, "fro" if ord is None else ord, axes, keepdims, "linalg.norm")
    raise ValueError(f"linalg.norm: improper number of dimensions to norm (axis {axis!r})")


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The matrix norm of every matrix in x (its last two axes), as
    ``np.linalg.matrix_norm``; ord as :func:`norm`'s matrix norms.

    >>> import tapegrad as tg
    >>> tg.linalg.matrix_norm(tg.ones((2, 2, 3)), ord=1).tolist()
    [2.0, 2.0]
    """
    x = _as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"linalg.matrix_norm: x must be at least 2-d, got shape {x.shape}")
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def cond(x, p=None):
    """The condition number of x, as ``np.linalg.cond(x, p)``: for p None/2/-2 the ratio
    of the extreme singular values, otherwise ``norm(x, p) * norm(inv(x), p)``.

    >>> import tapegrad as tg
    >>> float(tg.linalg.cond(tg.tensor([[2., 0.], [0., 0.5]])))
    4.0
    """
    x = _as_tensor(x)
    if x.ndim < 2:
        raise np.linalg.LinAlgError(f"linalg.cond: x must be at least 2-d, got shape {x.shape}")
    if p is None or p == 2 or p == -2:
        s = tg.linalg_svdvals(x)
        r = s[..., 0] / s[..., -1]
        return 1.0 / r if p == -2 else r
    if x.shape[-1] != x.shape[-2]:
        raise np.linalg.LinAlgError(f"linalg.cond: p={p!r} needs square matrices, got shape "
                                    f"{x.shape}")
    return norm(x, p, axis=(-2, -1)) * norm(tg.linalg_inv(x), p, axis=(-2, -1))


_X = _rand(3, 4) + 0.1 * np.arange(12).reshape(3, 4)     # no ties in |x| or in row sums


def register(registry):
    v = _rand(5) + 0.05 * np.arange(5)
    registry.register_op(
        "linalg_vector_norm", complex=True,
        kernels={"cpu": _vector_norm_kernel}, vjp=_vector_norm_vjp,
        jvp=_vector_norm_jvp, batch="reduce",
        method=False, save_ans=True,
        samples=[tg.Sample(v), tg.Sample(v, ord=1), tg.Sample(v, ord=math.inf),
                 tg.Sample(v, ord=-math.inf), tg.Sample(v, ord=0), tg.Sample(v, ord=3),
                 tg.Sample(v, ord=0.5), tg.Sample(v, ord=-1), tg.Sample(v, ord=-2),
                 tg.Sample(_X, axis=1), tg.Sample(_X, axis=0, keepdims=True, ord=1),
                 tg.Sample(_rand(2, 3, 4), axis=(0, 2), ord=3),
                 tg.Sample(_rand(2, 3, 4), axis=(-1, -2), ord=math.inf, keepdims=True)],
        doc="The vector norm, as np.linalg.vector_norm(x, axis, keepdims, ord) "
            "(tg.linalg.vector_norm, and tg.linalg.norm's vector case). At 0 the 2-norm's "
            "gradient is 0 and the p-norms' is the subgradient sign(x)|x|^(p-1)/norm^(p-1) "
            "(0 where the norm is 0); inf/-inf share the gradient evenly among ties; ord=0 "
            "has gradient 0 (PyTorch's conventions).")
    norm_samples = [
        tg.Sample(v), tg.Sample(v, 1), tg.Sample(v, math.inf), tg.Sample(v, 3),
        tg.Sample(_X), tg.Sample(_X, "fro"), tg.Sample(_X, "nuc"), tg.Sample(_X, 1),
        tg.Sample(_X, -1), tg.Sample(_X, 2), tg.Sample(_X, -2), tg.Sample(_X, math.inf),
        tg.Sample(_X, -math.inf), tg.Sample(_X, axis=1), tg.Sample(_X, 1, axis=0),
        tg.Sample(_X, None, None, True),
        tg.Sample(_rand(2, 3, 4), 1, (2, 0), True), tg.Sample(_rand(2, 3, 4), "nuc", (0, 2)),
        tg.Sample(_rand(2, 3, 4), math.inf, (-1, 1)),
    ]
    registry.register_function("linalg_norm", norm, method=False, samples=norm_samples)
    registry.register_function(
        "linalg_matrix_norm", matrix_norm, method=False,
        samples=[tg.Sample(_X), tg.Sample(_rand(2, 3, 4) + 0.1 * np.arange(4), ord=2),
                 tg.Sample(_X, ord=math.inf, keepdims=True)])
    registry.register_function(
        "linalg_cond", cond, method=False,
        samples=[tg.Sample(_distinct_sv(3, 3)), tg.Sample(_distinct_sv(4, 2), -2),
                 tg.Sample(_general(3, 3), "fro"), tg.Sample(_general(2, 3, 3), 1)])
