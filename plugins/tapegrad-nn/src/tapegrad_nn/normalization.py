"""Normalisation: layer_norm, rms_norm, group_norm, batch_norm, instance_norm, normalize.

PyTorch's ``torch.nn.functional`` names, argument order and semantics. The work of each
is one fused op with a NumPy kernel (mean and variance and the scaling in one call, no
intermediate tensors on the tape) whose gradient rule is again one op with its own NumPy
kernel (so a backward pass is one kernel), and whose rule in turn is written in
tapegrad ops (so every order is differentiable and it runs on any device):

    _standardize(x, axis, eps)          (x - mean) / sqrt(var + eps) over `axis` (biased var)
    _rms_scale(x, axis, eps)            x / sqrt(mean(x**2) + eps) over `axis`
    _standardize_grad(g, x, axis, eps)  r * (g - mean(g) - y * mean(g * y))
    _rms_scale_grad(g, x, axis, eps)    r * (g - y * mean(g * y))

with y the forward output and r the inverse std (or inverse RMS), both recomputed from
the saved input x (there is no auxiliary-output mechanism), and means over `axis`
(both exact for eps > 0). The optional elementwise affine (``* weight + bias``) is two
plain broadcasting ops on top, whose gradients the engine reduces to the parameter's
shape. layer_norm/instance_norm/batch_norm(training) standardise over different axes;
group_norm reshapes to (N, G, -1) first; batch_norm in eval mode is elementwise with the
running statistics.

>>> import tapegrad as tg
>>> import tapegrad_nn.normalization as N
>>> y = N.layer_norm(tg.tensor([[1., 2., 3.]]), (3,))
>>> [round(v, 4) for v in y[0].tolist()]
[-1.2247, 0.0, 1.2247]
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import tapegrad as tg
from tapegrad import _batching
from tapegrad._batching import logical_axes, pad_batched
from tapegrad_shape.ops import derivative_reason

from . import _kernels
from ._c_kernel_args import c_kernel_ok as _c_kernel_ok
from ._dtype_check import check_float_operands
from .activations import _sum_terms

__all__ = ["layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm",
           "normalize"]


# ---------------------------------------------------------------------------------------
# The fused ops
# ---------------------------------------------------------------------------------------

def _as_rows(x, axis):
    """x as an (M, K) C-contiguous array when `axis` is x's trailing axes (layer_norm,
    rms_norm, group_norm, instance_norm), else None."""
    k = len(axis)
    if x.ndim == 0 or sorted(a % x.ndim for a in axis) != list(range(x.ndim - k, x.ndim)):
        return None
    return np.ascontiguousarray(x).reshape(-1, math.prod(x.shape[x.ndim - k:]) if k else 1)


def _row_mean(a):
    # NOTE: not a @ ones (BLAS gemv): erratic under thread contention (x30 measured).
    # einsum's row sum is ~3x NumPy's sum(axis=1) on short rows, but accumulates each
    # row sequentially (in SIMD lanes): pairwise sum(axis=1) for long float32 rows.
    if a.shape[1] > 4096:
        return a.sum(axis=1) * (1.0 / a.shape[1])
    return np.einsum("ij->i", a) * (1.0 / max(a.shape[1], 1))


def _row_dot_mean(a, b):
    k = a.shape[1]
    if k > 4096:     # NOTE: einsum accumulates sequentially: keep long float32 rows pairwise
        return np.mean(a * b, axis=1)
    return np.einsum("ij,ij->i", a, b) * (1.0 / max(k, 1))


def _as_channels(x, axis):
    """x as an (N, C, L) C-contiguous array when `axis` is every axis but 1 (batch_norm
    in training on an (N, C, *) input), else None."""
    if x.ndim < 2 or tuple(sorted(a % x.ndim for a in axis)) != (0,) + tuple(range(2, x.ndim)):
        return None
    return np.ascontiguousarray(x).reshape(x.shape[0], x.shape[1], -1)


def _channel_dot(a, b):
    """sum(a * b) over axes 0 and 2 of (N, C, L) arrays, per channel: (C,).

    NOTE: einsum accumulates each (n, c) row sequentially: pairwise sums for long rows
    (as _row_dot_mean), and across the batch always."""
    if a.shape[2] > 4096:
        return (a * b).sum(axis=2).sum(axis=0)
    return np.einsum("ncl,ncl->nc", a, b).sum(axis=0)


def _channel_sum(a):
    if a.shape[2] > 4096:
        return a.sum(axis=2).sum(axis=0)
    return np.einsum("ncl->nc", a).sum(axis=0)


def _channel_moments(x3):
    """(x3 - mean, biased variance, mean) per channel of an (N, C, L) array."""
    inv = 1.0 / max(x3.shape[0] * x3.shape[2], 1)
    mean = _channel_sum(x3) * inv
    d = x3 - mean[:, None]
    return d, _channel_dot(d, d) * inv, mean


def _moments(x, axis, eps):
    """(x - mean) and the inverse std 1 / sqrt(var + eps) (biased var), both
    broadcastable against x (rows: (M, K) and (M, 1) when `axis` is trailing; channels:
    (N, C, L) and (C, 1) when it is every axis but 1)."""
    rows = _as_rows(x, axis)
    if rows is not None:
        d = rows - _row_mean(rows)[:, None]
        return d, (1.0 / np.sqrt(_row_dot_mean(d, d) + eps))[:, None]
    chans = _as_channels(x, axis)
    if chans is not None:
        d, var, _ = _channel_moments(chans)
        return d, (1.0 / np.sqrt(var + eps))[:, None]
    d = x - x.mean(axis=axis, keepdims=True)
    # NOTE: a Python float eps keeps float32 float32 (NumPy 2's weak scalars).
    return d, 1.0 / np.sqrt(np.mean(d * d, axis=axis, keepdims=True) + eps)


def _kept_shape(shape, axis):
    """`shape` with the axes `axis` set to 1 (keepdims)."""
    nd = len(shape)
    reduced = {a % nd for a in axis} if nd else set()
    return tuple(1 if i in reduced else n for i, n in enumerate(shape))


def _standardize_kernel(x, axis=(-1,), eps=1e-5):
    """(y, r): the standardised x and, as the op's auxiliary output, the inverse std r
    (keepdims shape), which the first-order rule reuses (register_op(aux=1))."""
    x = np.asarray(x)
    chans = _as_channels(x, axis) if _c_kernel_ok(x) else None
    if chans is not None:          # batch norm in training: one C pass pair per channel
        y, r = _kernels.standardize_channels(chans, eps)
        return y.reshape(x.shape), r.reshape(_kept_shape(x.shape, axis))
    d, r = _moments(x, axis, eps)
    d *= r
    return d.reshape(x.shape), np.reshape(r, _kept_shape(x.shape, axis))


def _standardize_grad_kernel(g, x, axis=(-1,), eps=1e-5):
    x = np.asarray(x)
    g = np.broadcast_to(g, x.shape)     # so g's rows line up with x's
    chans = _as_channels(x, axis) if _c_kernel_ok(x, np.asarray(g)) else None
    if chans is not None:
        y, r = _kernels.standardize_channels(chans, eps)
        return _kernels.scaled_backward_channels(_channels_of(g), y, r, True).reshape(x.shape)
    y, r = _moments(x, axis, eps)
    y *= r
    rows = _as_rows(g, axis)            # not None: _moments took the (M, K) path too
    if rows is None and _as_channels(x, axis) is not None:
        return _scaled_backward(g, y.reshape(x.shape), r, axis, True)
    if rows is not None:
        out = rows - _row_mean(rows)[:, None]
        out *= r
        out -= (r[:, 0] * _row_dot_mean(rows, y))[:, None] * y
        return out.reshape(x.shape)
    out = g - g.mean(axis=axis, keepdims=True)
    out -= y * np.mean(g * y, axis=axis, keepdims=True)
    out *= r
    return out


def _rms_kernel(x, axis=(-1,), eps=1e-5):
    """(y, r): x / rms and, as the auxiliary output, the inverse rms r (keepdims)."""
    x = np.asarray(x)
    rows = _as_rows(x, axis)
    if rows is not None:
        r = (1.0 / np.sqrt(_row_dot_mean(rows, rows) + eps))[:, None]
        return (rows * r).reshape(x.shape), r.reshape(_kept_shape(x.shape, axis))
    r = 1.0 / np.sqrt(np.mean(x * x, axis=axis, keepdims=True) + eps)
    return x * r, r


def _std_backward_kernel(g, y, r, axis=(-1,)):
    """r * (g - mean(g) - y * mean(g * y)) over `axis`: _standardize's gradient from its
    output y and inverse std r (no moments recomputed; one output buffer)."""
    return _scaled_backward(g, y, r, axis, True)


def _rms_backward_kernel(g, y, r, axis=(-1,)):
    """r * (g - y * mean(g * y)) over `axis`: _rms_scale's gradient from y and r."""
    return _scaled_backward(g, y, r, axis, False)


def _scaled_backward(g, y, r, axis, centred):
    y = np.asarray(y)
    g = np.broadcast_to(g, y.shape)
    rows, yrows = _as_rows(g, axis), _as_rows(y, axis)
    if rows is not None:
        rr = np.reshape(r, (-1, 1))
        out = yrows * (-_row_dot_mean(rows, yrows))[:, None]
        out += rows
        if centred:
            out -= _row_mean(rows)[:, None]
        out *= rr
        return out.reshape(y.shape)
    chans, ychans = _as_channels(g, axis), _as_channels(y, axis)
    if chans is not None and _c_kernel_ok(chans, ychans, np.asarray(r)):
        return _kernels.scaled_backward_channels(
            chans, ychans, np.ascontiguousarray(r).reshape(-1), centred).reshape(y.shape)
    if chans is not None:
        inv = 1.0 / max(chans.shape[0] * chans.shape[2], 1)
        out = ychans * (-_channel_dot(chans, ychans) * inv)[:, None]
        out += chans
        if centred:
            out -= (_channel_sum(chans) * inv)[:, None]
        out *= np.reshape(r, (-1, 1))
        return out.reshape(y.shape)
    out = y * -np.mean(g * y, axis=axis, keepdims=True)
    out += g
    if centred:
        out -= g.mean(axis=axis, keepdims=True)
    out *= r
    return out


def _rms_grad_kernel(g, x, axis=(-1,), eps=1e-5):
    x = np.asarray(x)
    g = np.broadcast_to(g, x.shape)
    rows, grows = _as_rows(x, axis), _as_rows(g, axis)
    if rows is not None:
        r = 1.0 / np.sqrt(_row_dot_mean(rows, rows) + eps)
        # g r - y r mean(g y) with y = x r: g r - x r**3 mean(g x)
        out = grows * r[:, None]
        out -= (r ** 3 * _row_dot_mean(grows, rows))[:, None] * rows
        return out.reshape(x.shape)
    r = 1.0 / np.sqrt(np.mean(x * x, axis=axis, keepdims=True) + eps)
    y = x * r
    out = g - y * np.mean(g * y, axis=axis, keepdims=True)
    out *= r
    return out


def _batch_moments_kernel(x, axis=(0,), ddof=1):
    """stack([mean, var(ddof)]) over `axis`: the batch statistics a running-statistics
    update needs, in one pass pair (the var with Bessel's correction for ddof=1)."""
    x = np.asarray(x)
    chans = _as_channels(x, axis)
    if chans is not None:
        n = chans.shape[0] * chans.shape[2]
        if _c_kernel_ok(chans) and n > 0:
            mean, m2 = _kernels.channel_moments(chans)     # float64: m2 / n stays exact-ish
            mean, var = mean.astype(x.dtype), (m2 * (1.0 / n)).astype(x.dtype)
        else:
            _, var, mean = _channel_moments(chans)
        with np.errstate(divide="ignore", invalid="ignore"):    # n <= ddof: nan, as NumPy
            return np.stack([mean, var * (n / (n - ddof)) if n > ddof else var * np.nan])
    return np.stack([x.mean(axis=axis), x.var(axis=axis, ddof=ddof)])


def _batch_moments_vjp(g, ans, x, axis=(0,), ddof=1):
    # d mean / dx = 1 / n; d var / dx = 2 (x - mean) / (n - ddof): g[0] and g[1] are in
    # the reduced shape, put back with keepdims.
    kept = _kept_shape(x.shape, axis)
    n = math.prod(x.shape) // max(math.prod(kept), 1)
    g_mean, g_var = tg.reshape(g[0], kept), tg.reshape(g[1], kept)
    mean = tg.mean(x, axis, keepdims=True)
    return (g_mean * (1.0 / n) + g_var * (x - mean) * (2.0 / (n - ddof)),)


def _batch_moments_jvp(t, ans, x, axis=(0,), ddof=1):
    # stack([mean(tx), 2 sum((x - mean) tx) / (n - ddof)]) over `axis`
    if t[0] is None:
        return tg.zeros_like(ans)
    kept = _kept_shape(x.shape, axis)
    n = math.prod(x.shape) // max(math.prod(kept), 1)
    d_mean = tg.mean(t[0], axis)
    d_var = tg.sum((x - tg.mean(x, axis, keepdims=True)) * t[0], axis) * (2.0 / (n - ddof))
    return tg.stack([d_mean, d_var])


# The per-channel affine of group_norm / batch_norm / instance_norm as one op: its
# weight and bias gradients are per-channel reductions of (N, C, L) views (einsum, ~3x
# faster than NumPy's sum over axes (0, 2, 3) that un-broadcasting would do).

def _channels_of(a):
    return np.ascontiguousarray(a).reshape(a.shape[0], a.shape[1], -1)


def _channel_affine_kernel(y, w, b):
    y, w, b = np.asarray(y), np.asarray(w), np.asarray(b)
    if _c_kernel_ok(y, w, b) and y.ndim >= 2 and w.shape == b.shape == (y.shape[1],):
        return _kernels.channel_affine(_channels_of(y), np.ascontiguousarray(w),
                                       np.ascontiguousarray(b)).reshape(y.shape)
    out = _channels_of(y) * np.asarray(w)[:, None]
    out += np.asarray(b)[:, None]
    return out.reshape(y.shape)


def _channel_affine_vjp(g, ans, y, w, b):
    gy = g * tg.reshape(w, _channel_shape(y)) if tg.needs_grad(y) else None
    gw = tg._channel_dot(g, y) if tg.needs_grad(w) else None
    gb = tg._channel_sum(g) if tg.needs_grad(b) else None
    return gy, gw, gb


def _channel_affine_jvp(t, ans, y, w, b):
    # y * w + b per channel: ty w + y tw + tb (w, b, tw, tb on axis 1)
    ty, tw, tb = t
    shape = _channel_shape(y)
    return _sum_terms([ty * tg.reshape(w, shape) if ty is not None else None,
                       y * tg.reshape(tw, shape) if tw is not None else None,
                       tg.broadcast_to(tg.reshape(tb, shape), ans.shape)
                       if tb is not None else None], ans)


def _channel_dot_kernel(a, b):
    """sum(a * b) over every axis but 1: (C,)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    if _c_kernel_ok(a, b) and a.ndim >= 2:
        return _kernels.channel_dot(_channels_of(a), _channels_of(b))
    return _channel_dot(_channels_of(a), _channels_of(b))


def _channel_dot_vjp(h, ans, a, b):
    hc = tg.reshape(h, _channel_shape(a))
    return (hc * b if tg.needs_grad(a) else None), (hc * a if tg.needs_grad(b) else None)


def _channel_dot_jvp(t, ans, a, b):
    ta, tb = t
    return _sum_terms([tg._channel_dot(ta, b) if ta is not None else None,
                       tg._channel_dot(a, tb) if tb is not None else None], ans)


def _channel_sum_kernel(a):
    a = np.asarray(a)
    if _c_kernel_ok(a) and a.ndim >= 2:
        return _kernels.channel_sum(_channels_of(a))
    return _channel_sum(_channels_of(a))


def _channel_sum_vjp(h, ans, a):
    return (tg.broadcast_to(tg.reshape(h, _channel_shape(a)), a.shape),)


def _inv_std(x, axis, eps):
    return 1.0 / tg.sqrt(tg.var(x, axis, keepdims=True) + eps)


def _inv_rms(x, axis, eps):
    return 1.0 / tg.sqrt(tg.mean(x * x, axis, keepdims=True) + eps)


# The first-order rules are one op each (_standardize_grad, _rms_scale_grad: g -> J^T g
# in one NumPy kernel, from g and the saved input), so a backward pass costs one kernel,
# not a dozen tapegrad ops. Both Jacobians are symmetric (J = r (I - 1/N - y y^T / N) and
# r (I - y y^T / N)), so J^T g = J g, which is also the JVP. The rule of a *_grad op
# B(g, x) = J(x) g (for double backward) is, for either op, with cotangent h:
#     dg = B(h, x)
#     dx = -r * (y * mean(h * B(g, x)) + mean(h * y) * B(g, x) + mean(g * y) * B(h, x))
# (differentiate h^T J(x) g through r and y, using dr/dx = -r**2 y / N and dy/dx = J).
# It is written with the ops themselves, so every order is differentiable.

def _standardize_vjp(g, ans, x, axis=(-1,), eps=1e-5, *, aux=None):
    if aux is not None:          # a plain backward: the forward's inverse std, reused
        return (tg._standardize_backward(g, ans, aux[0], axis),)
    # Recorded (create_graph, tg.compile): r must stay a function of x, so recompute.
    return (tg._standardize_grad(g, x, axis, eps),)


def _standardize_jvp(t, ans, x, axis=(-1,), eps=1e-5):
    return tg._standardize_grad(t[0], x, axis, eps)     # t also holds None for axis, eps


def _rms_vjp(g, ans, x, axis=(-1,), eps=1e-5, *, aux=None):
    if aux is not None:
        return (tg._rms_scale_backward(g, ans, aux[0], axis),)
    return (tg._rms_scale_grad(g, x, axis, eps),)


# The rules of _standardize_backward / _rms_scale_backward, B(g, y, r) = r * (g - [mean(g)]
# - y * m) with m = mean(g * y), in all three arguments (the ops are called with the
# forward's y and r as constants, but their own rule treats them as the inputs they are):
#     dg = B(h, y, r)                              (J is symmetric)
#     dy = -r * (h * m + mean(h * y) * g)
#     dr = sum(h * (g - [mean(g)] - y * m))        (r has keepdims shape)

def _scaled_backward_vjp(backward_op, centred, h, g, y, r, axis):
    dg = backward_op(h, y, r, axis) if tg.needs_grad(g) else None
    dy = dr = None
    if tg.needs_grad(y) or tg.needs_grad(r):
        m = tg.mean(g * y, axis, keepdims=True)
        if tg.needs_grad(y):
            dy = -r * (h * m + tg.mean(h * y, axis, keepdims=True) * g)
        if tg.needs_grad(r):
            centre = g - tg.mean(g, axis, keepdims=True) if centred else g
            dr = tg.sum(h * (centre - y * m), axis, keepdims=True)
    return dg, dy, dr


def _std_backward_vjp(h, ans, g, y, r, axis=(-1,)):
    return _scaled_backward_vjp(tg._standardize_backward, True, h, g, y, r, axis)


def _rms_backward_vjp(h, ans, g, y, r, axis=(-1,)):
    return _scaled_backward_vjp(tg._rms_scale_backward, False, h, g, y, r, axis)


# Their tangents, from B(g, y, r) = r * (g - [mean(g)] - y * m), m = mean(g * y):
#     B(tg, y, r) - r * (ty * m + y * mean(g * ty)) + tr * (g - [mean(g)] - y * m)

def _scaled_backward_jvp(backward_op, centred, t, ans, g, y, r, axis):
    tg_, ty, tr = t[0], t[1], t[2]
    terms = [backward_op(tg_, y, r, axis) if tg_ is not None else None]
    if ty is not None or tr is not None:
        m = tg.mean(g * y, axis, keepdims=True)
        if ty is not None:
            terms.append(-r * (ty * m + y * tg.mean(g * ty, axis, keepdims=True)))
        if tr is not None:
            centre = g - tg.mean(g, axis, keepdims=True) if centred else g
            terms.append(tr * (centre - y * m))
    return _sum_terms(terms, ans)


def _std_backward_jvp(t, ans, g, y, r, axis=(-1,)):
    return _scaled_backward_jvp(tg._standardize_backward, True, t, ans, g, y, r, axis)


def _rms_backward_jvp(t, ans, g, y, r, axis=(-1,)):
    return _scaled_backward_jvp(tg._rms_scale_backward, False, t, ans, g, y, r, axis)


def _rms_jvp(t, ans, x, axis=(-1,), eps=1e-5):
    return tg._rms_scale_grad(t[0], x, axis, eps)


def _grad_op_vjp(grad_op, y, r, h, bg, g, x, axis, eps):
    bh = grad_op(h, x, axis, eps)
    dx = None
    if tg.needs_grad(x):
        dx = -r * (y * tg.mean(h * bg, axis, keepdims=True)
                   + tg.mean(h * y, axis, keepdims=True) * bg
                   + tg.mean(g * y, axis, keepdims=True) * bh)
    return (bh if tg.needs_grad(g) else None), dx


def _standardize_grad_vjp(h, ans, g, x, axis=(-1,), eps=1e-5):
    # NOTE: this rule is recorded whenever it runs (it is the double backward), so the
    # _standardize and _rms_scale calls below never hand their aux arrays to a rule.
    return _grad_op_vjp(tg._standardize_grad, tg._standardize(x, axis, eps),
                        _inv_std(x, axis, eps), h, ans, g, x, axis, eps)


# NOTE: [the tangent of a *_grad op]  f = _standardize (or _rms_scale) has a symmetric
# Jacobian everywhere, so f is the gradient of a scalar function phi and B(g, x) = J(x) g
# has d/dx B(g, x)[v] = D3 phi(x)[., g, v], symmetric in all three slots. The x-tangent
# of B at tx is therefore the x-gradient of <h, B(g, x)> at h = tx: _grad_op_vjp's dx
# with h = tx, term for term.

def _grad_op_jvp(grad_op, y, r, t, ans, g, x, axis, eps):
    tg_, tx = t[0], t[1]
    terms = [grad_op(tg_, x, axis, eps) if tg_ is not None else None]
    if tx is not None:
        bt = grad_op(tx, x, axis, eps)
        terms.append(-r * (y * tg.mean(tx * ans, axis, keepdims=True)
                           + tg.mean(tx * y, axis, keepdims=True) * ans
                           + tg.mean(g * y, axis, keepdims=True) * bt))
    return _sum_terms(terms, ans)


def _standardize_grad_jvp(t, ans, g, x, axis=(-1,), eps=1e-5):
    if t[1] is None:            # no x tangent: B is linear in g (y and r not needed)
        return _grad_op_jvp(tg._standardize_grad, None, None, t, ans, g, x, axis, eps)
    return _grad_op_jvp(tg._standardize_grad, tg._standardize(x, axis, eps),
                        _inv_std(x, axis, eps), t, ans, g, x, axis, eps)


def _rms_grad_vjp(h, ans, g, x, axis=(-1,), eps=1e-5):
    return _grad_op_vjp(tg._rms_scale_grad, tg._rms_scale(x, axis, eps),
                        _inv_rms(x, axis, eps), h, ans, g, x, axis, eps)


def _rms_grad_jvp(t, ans, g, x, axis=(-1,), eps=1e-5):
    # (Note: [the tangent of a *_grad op])
    if t[1] is None:
        return _grad_op_jvp(tg._rms_scale_grad, None, None, t, ans, g, x, axis, eps)
    return _grad_op_jvp(tg._rms_scale_grad, tg._rms_scale(x, axis, eps),
                        _inv_rms(x, axis, eps), t, ans, g, x, axis, eps)


# ---------------------------------------------------------------------------------------
# Helpers (plain Python on shapes)
# ---------------------------------------------------------------------------------------

def _shape_tuple(normalized_shape, op):
    if isinstance(normalized_shape, (numbers.Integral, np.integer)) \
            and not isinstance(normalized_shape, bool):
        return (int(normalized_shape),)
    items = normalized_shape if isinstance(normalized_shape, (tuple, list)) else None
    if items is None or not all(isinstance(s, (numbers.Integral, np.integer))
                                and not isinstance(s, bool) for s in items):
        raise TypeError(f"{op}: normalized_shape must be an int or a sequence of ints, "
                        f"got {normalized_shape!r}")
    return tuple(int(s) for s in items)


def _check_trailing(x, shape, op):
    if len(shape) == 0 or x.ndim < len(shape) or tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise ValueError(f"{op}: normalized_shape {shape} does not match the last axes of "
                         f"input of shape {tuple(x.shape)} (expected (*, "
                         f"{', '.join(map(str, shape))}))")


def _check_param(p, shape, what, op):
    if p is not None and _shape(p) != shape:
        raise ValueError(f"{op}: {what} must have shape {shape}, got {_shape(p)}")


def _shape(v):
    return tuple(v.shape) if hasattr(v, "shape") else np.shape(v)


def _affine(y, weight, bias, shape=None):
    """y * weight + bias, with weight/bias reshaped to `shape` (channel broadcasting)."""
    if shape is not None and weight is not None and bias is not None \
            and y.device.name in tg._channel_affine.kernels:
        return tg._channel_affine(y, weight, bias)      # one op, channel-wise reductions
    if weight is not None:
        y = y * (weight if shape is None else tg.reshape(weight, shape))
    if bias is not None:
        y = y + (bias if shape is None else tg.reshape(bias, shape))
    return y


def _as_tensor(x):
    return x if isinstance(x, tg.Tensor) else tg.asarray(x)


def _channel_shape(x):
    return (x.shape[1],) + (1,) * (x.ndim - 2)


def _refuse_grad(t, name, op):
    reason = derivative_reason(t)
    if reason is not None:
        raise NotImplementedError(f"{op}: the derivative for {name} is not implemented, and "
                                  f"{name} {reason} (it is a running statistic; pass it "
                                  f"detached)")


# ---------------------------------------------------------------------------------------
# The functions (torch.nn.functional's)
# ---------------------------------------------------------------------------------------

def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last ``len(normalized_shape)`` axes (mean 0, biased variance 1,
    `eps` added to the variance), then ``* weight + bias`` (each of `normalized_shape`).

    >>> import tapegrad as tg
    >>> x = tg.tensor([[0., 2.], [1., 5.]], requires_grad=True)
    >>> tg.nn.functional.layer_norm(x, 2, eps=0.0).tolist()
    [[-1.0, 1.0], [-1.0, 1.0]]
    """
    x = _as_tensor(input)
    check_float_operands("layer_norm", x, ("weight", weight), ("bias", bias))
    shape = _shape_tuple(normalized_shape, "layer_norm")
    _check_trailing(x, shape, "layer_norm")
    _check_param(weight, shape, "weight", "layer_norm")
    _check_param(bias, shape, "bias", "layer_norm")
    axis = tuple(range(x.ndim - len(shape), x.ndim))
    return _affine(tg._standardize(x, axis, float(eps)), weight, bias)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last ``len(normalized_shape)``
    axes (PyTorch 2.4+'s ``F.rms_norm``: ``eps=None`` is ``finfo(input.dtype).eps``).

    >>> import tapegrad as tg
    >>> [round(v, 6) for v in tg.nn.functional.rms_norm(tg.tensor([3., 4.]), 2).tolist()]
    [0.848528, 1.131371]
    """
    x = _as_tensor(input)
    check_float_operands("rms_norm", x, ("weight", weight))
    shape = _shape_tuple(normalized_shape, "rms_norm")
    _check_trailing(x, shape, "rms_norm")
    _check_param(weight, shape, "weight", "rms_norm")
    if eps is None:
        if x.dtype.kind != "f":
            raise TypeError(f"rms_norm: input must be floating-point, got {x.dtype}")
        eps = float(np.finfo(x.dtype).eps)
    axis = tuple(range(x.ndim - len(shape), x.ndim))
    return _affine(tg._rms_scale(x, axis, float(eps)), weight, None)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Split the channels (axis 1) of an (N, C, *) input into `num_groups` groups and
    normalise each group of each sample over its channels and spatial axes; then the
    per-channel affine ``* weight + bias`` (each of shape (C,)).

    >>> import tapegrad as tg
    >>> tg.nn.functional.group_norm(tg.ones((2, 4, 3)), 2).shape
    (2, 4, 3)
    """
    x = _as_tensor(input)
    check_float_operands("group_norm", x, ("weight", weight), ("bias", bias))
    if x.ndim < 2:
        raise ValueError(f"group_norm: expected an input of shape (N, C, *), got "
                         f"{tuple(x.shape)}")
    c = x.shape[1]
    if isinstance(num_groups, bool) or not isinstance(num_groups, (numbers.Integral, np.integer)) \
            or num_groups <= 0 or c % num_groups:
        raise ValueError(f"group_norm: the {c} channels of input of shape {tuple(x.shape)} "
                         f"cannot be split into num_groups={num_groups!r} groups")
    _check_param(weight, (c,), "weight", "group_norm")
    _check_param(bias, (c,), "bias", "group_norm")
    n = x.shape[0]
    y = tg._standardize(tg.reshape(x, (n, int(num_groups), -1)), (2,), float(eps))
    return _affine(tg.reshape(y, x.shape), weight, bias, _channel_shape(x))


def _check_channels(x, stat, what, op):
    if stat is not None and _shape(stat) != (x.shape[1],):
        raise ValueError(f"{op}: {what} must have shape ({x.shape[1]},) (the channels of "
                         f"input of shape {tuple(x.shape)}), got {_shape(stat)}")


def _update_running(running, batch_value, momentum):
    """running = (1 - momentum) * running + momentum * batch_value, IN PLACE (a tensor
    written through ``[...] =``, or a NumPy array)."""
    with tg.no_grad():
        new = running * (1.0 - momentum) + batch_value * momentum
        if isinstance(running, tg.Tensor):
            running[...] = tg.astype(new, running.dtype)
        else:
            running[...] = np.asarray(new)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch normalisation of an (N, C, *) input, per channel (axis 1).

    ``training=True``: normalise with the batch's mean and biased variance over every axis
    but the channels; if `running_mean` / `running_var` are given they are updated IN
    PLACE, ``running = (1 - momentum) * running + momentum * batch``, with the *unbiased*
    batch variance (as PyTorch). ``training=False``: normalise with the running
    statistics. Then the per-channel affine ``* weight + bias``.

    >>> import tapegrad as tg
    >>> rm, rv = tg.zeros(2), tg.ones(2)
    >>> x = tg.tensor([[1., 2.], [3., 6.]])
    >>> y = tg.nn.functional.batch_norm(x, rm, rv, training=True, momentum=0.5)
    >>> rm.tolist(), rv.tolist()
    ([1.0, 2.0], [1.5, 4.5])
    """
    x = _as_tensor(input)
    check_float_operands("batch_norm", x, ("running_mean", running_mean),
                         ("running_var", running_var), ("weight", weight), ("bias", bias))
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of shape (N, C, *), got "
                         f"{tuple(x.shape)}")
    _check_channels(x, running_mean, "running_mean", "batch_norm")
    _check_channels(x, running_var, "running_var", "batch_norm")
    _check_param(weight, (x.shape[1],), "weight", "batch_norm")
    _check_param(bias, (x.shape[1],), "bias", "batch_norm")
    _refuse_grad(running_mean, "running_mean", "batch_norm")
    _refuse_grad(running_var, "running_var", "batch_norm")
    cshape = _channel_shape(x)
    axis = (0,) + tuple(range(2, x.ndim))
    if training:
        count = x.size // max(x.shape[1], 1)
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when "
                             f"training, got input of shape {tuple(x.shape)}")
        if running_mean is not None or running_var is not None:
            with tg.no_grad():
                stats = tg._batch_moments(x.detach(), axis, 1)     # one op: mean, var
                if running_mean is not None:
                    _update_running(running_mean, stats[0], momentum)
                if running_var is not None:
                    _update_running(running_var, stats[1], momentum)
        return _affine(tg._standardize(x, axis, float(eps)), weight, bias, cshape)
    if running_mean is None or running_var is None:
        raise ValueError("batch_norm: running_mean and running_var are required when "
                         "training=False")
    # Eval: one scale and one shift per channel, so the input is read by two elementwise
    # ops (PyTorch's CPU kernel does the same): x * (w r) + (b - mean w r).
    scale = 1.0 / tg.sqrt(_as_tensor(running_var) + eps)
    if weight is not None:
        scale = scale * weight
    shift = -(_as_tensor(running_mean) * scale)
    if bias is not None:
        shift = shift + bias
    return x * tg.reshape(scale, cshape) + tg.reshape(shift, cshape)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalise each channel of each sample of an (N, C, *) input over its spatial axes
    (PyTorch's ``F.instance_norm``). With ``use_input_stats=True`` the statistics are the
    input's, and given running buffers are updated in place with the batch average of the
    per-instance mean and unbiased variance; with False the running statistics are used.

    >>> import tapegrad as tg
    >>> tg.nn.functional.instance_norm(tg.ones((2, 3, 4))).shape
    (2, 3, 4)
    """
    x = _as_tensor(input)
    check_float_operands("instance_norm", x, ("running_mean", running_mean),
                         ("running_var", running_var), ("weight", weight), ("bias", bias))
    if x.ndim < 3:
        raise ValueError(f"instance_norm: expected an input of shape (N, C, L, ...), got "
                         f"{tuple(x.shape)}")
    _check_channels(x, running_mean, "running_mean", "instance_norm")
    _check_channels(x, running_var, "running_var", "instance_norm")
    _check_param(weight, (x.shape[1],), "weight", "instance_norm")
    _check_param(bias, (x.shape[1],), "bias", "instance_norm")
    _refuse_grad(running_mean, "running_mean", "instance_norm")
    _refuse_grad(running_var, "running_var", "instance_norm")
    if not use_input_stats:
        return batch_norm(x, running_mean, running_var, weight, bias, False, momentum, eps)
    axis = tuple(range(2, x.ndim))
    count = math.prod(x.shape[2:])
    if count <= 1:
        raise ValueError(f"instance_norm: expected more than 1 spatial element per channel, "
                         f"got input of shape {tuple(x.shape)}")
    if running_mean is not None or running_var is not None:
        with tg.no_grad():
            xd = x.detach()
            if running_mean is not None:
                _update_running(running_mean, tg.mean(tg.mean(xd, axis), 0), momentum)
            if running_var is not None:
                _update_running(running_var, tg.mean(tg.var(xd, axis, ddof=1), 0), momentum)
    return _affine(tg._standardize(x, axis, float(eps)), weight, bias, _channel_shape(x))


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """``x / max(||x||_p, eps)`` along `dim` (PyTorch's ``F.normalize``): unit Lp-norm
    vectors; a zero vector stays zero (its gradient is ``g / eps``, as PyTorch's).

    >>> import tapegrad as tg
    >>> tg.nn.functional.normalize(tg.tensor([[3., 4.], [0., 0.]])).tolist()
    [[0.6, 0.8], [0.0, 0.0]]
    """
    x = _as_tensor(input)
    norm = tg.linalg.vector_norm(x, ord=p, axis=dim, keepdims=True)
    return x / tg.maximum(norm, eps)


# ---------------------------------------------------------------------------------------
# Samples and registration
# ---------------------------------------------------------------------------------------

def _r(*shape, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape)


def _pos(*shape, seed=0):
    return np.random.default_rng(seed).uniform(0.5, 2.0, shape)


_STD_SAMPLES = [
    tg.Sample(_r(3, 4), (1,), 1e-5),
    tg.Sample(_r(2, 3, 4, seed=1), (1, 2), 1e-5),
    tg.Sample(_r(4, 3, 2, seed=2), (0, 2), 0.1),
    tg.Sample(_r(5, seed=3), (0,), 1e-3),
]

_RMS_SAMPLES = [
    tg.Sample(_r(3, 4), (1,), 1e-6),
    tg.Sample(_r(2, 3, 4, seed=1), (1, 2), 1e-5),
    tg.Sample(_r(4, 3, seed=2), (0,), 0.1),
]

_LAYER_NORM_SAMPLES = [
    tg.Sample(_r(3, 4), (4,)),
    tg.Sample(_r(2, 3, 4, seed=1), (3, 4), _pos(3, 4, seed=2), _r(3, 4, seed=3)),
    tg.Sample(_r(2, 5, seed=4), 5, _pos(5, seed=5), eps=1e-3),
]

_RMS_NORM_SAMPLES = [
    tg.Sample(_r(3, 4), (4,)),
    tg.Sample(_r(2, 3, 4, seed=1), (3, 4), _pos(3, 4, seed=2), eps=1e-5),
]

_GROUP_NORM_SAMPLES = [
    tg.Sample(_r(2, 4, 3), 2),
    tg.Sample(_r(2, 6, 2, 2, seed=1), 3, _pos(6, seed=2), _r(6, seed=3)),
    tg.Sample(_r(3, 4, seed=4), 4, eps=1e-3),
]

_BATCH_NORM_SAMPLES = [
    tg.Sample(_r(4, 3), None, None, training=True),
    tg.Sample(_r(3, 2, 4, seed=1), None, None, _pos(2, seed=2), _r(2, seed=3), True),
    tg.Sample(_r(3, 2, 4, seed=1), _r(2, seed=4), _pos(2, seed=5), _pos(2, seed=2),
              _r(2, seed=3)),
]

_INSTANCE_NORM_SAMPLES = [
    tg.Sample(_r(2, 3, 4)),
    tg.Sample(_r(2, 2, 3, 2, seed=1), None, None, _pos(2, seed=2), _r(2, seed=3)),
]

_NORMALIZE_SAMPLES = [
    tg.Sample(_r(3, 4)),
    tg.Sample(_r(3, 4, seed=1), 1.0, 0),
    tg.Sample(_r(2, 3, 4, seed=2), 3.0, -1),
]


def _backward_samples(forward_samples):
    """(g, y, r, axis) for the *_backward ops, shaped as the forward samples."""
    out = []
    for k, s in enumerate(forward_samples):
        x, axis = s.args[0], s.args[1]
        out.append(tg.Sample(_r(*x.shape, seed=20 + k), _r(*x.shape, seed=30 + k),
                             _pos(*_kept_shape(x.shape, axis), seed=40 + k), axis))
    return out


# ---------------------------------------------------------------------------------------
# vmap's batching rules (register_op(batch=)): inputs are physical, the vmapped axis first
# ---------------------------------------------------------------------------------------

def _size_and_shapes(inputs, batched):
    size = next(x.shape[0] for x, b in zip(inputs, batched) if b)
    return size, [tuple(x.shape[1:]) if b else tuple(np.shape(x)) for x, b in
                  zip(inputs, batched)]


def _to_batch(x, b, size, shape):
    """Physical x as (size,) + shape: a batched x padded (unit axes after the batch axis)
    and broadcast, an unbatched one broadcast (shared by every example)."""
    if b:
        x = pad_batched(x, len(shape))
    elif not isinstance(x, tg.Tensor):
        x = tg.asarray(x)
    return x if tuple(x.shape) == (size,) + shape else tg.broadcast_to(x, (size,) + shape)


def _moved(axis, ndim, who):
    """The logical reduction axes as physical ones (a tuple), past the batch axis."""
    return tuple(a + 1 for a in logical_axes(axis, ndim, who))


def _over_axes_batch(name):
    """The rule of _standardize / _rms_scale (x, axis, eps): the axes move past the
    vmapped axis, which is one more axis not reduced over."""
    def rule(inputs, batched, axis=(-1,), eps=1e-5):
        (x,) = inputs
        return getattr(tg, name)(x, _moved(axis, x.ndim - 1, name), eps)
    rule.__name__ = rule.__qualname__ = f"_{name}_batch"
    return rule


def _grad_over_axes_batch(name):
    """The rule of _standardize_grad / _rms_scale_grad (g, x, axis, eps): g broadcasts
    to x's shape (the kernel's rule), so x goes to the batch's full shape."""
    def rule(inputs, batched, axis=(-1,), eps=1e-5):
        size, (gs, xs) = _size_and_shapes(inputs, batched)
        shape = np.broadcast_shapes(gs, xs)
        g = pad_batched(inputs[0], len(shape)) if batched[0] else inputs[0]
        x = _to_batch(inputs[1], batched[1], size, shape)
        return getattr(tg, name)(g, x, _moved(axis, len(shape), name), eps)
    rule.__name__ = rule.__qualname__ = f"_{name}_batch"
    return rule


def _backward_over_axes_batch(name):
    """The rule of _standardize_backward / _rms_scale_backward (g, y, r, axis): y and r
    (whose shape is y's kept shape: the kernel reshapes it into one value per row) go
    to the batch; another r shape runs once per example."""
    def rule(inputs, batched, axis=(-1,)):
        size, (gs, ys, rs) = _size_and_shapes(inputs, batched)
        shape = np.broadcast_shapes(gs, ys)
        if rs != _kept_shape(shape, tuple(axis)):
            return _batching._loop(getattr(tg, name), inputs, batched, {"axis": axis}, None)
        g = pad_batched(inputs[0], len(shape)) if batched[0] else inputs[0]
        y = _to_batch(inputs[1], batched[1], size, shape)
        r = _to_batch(inputs[2], batched[2], size, rs)
        return getattr(tg, name)(g, y, r, _moved(axis, len(shape), name))
    rule.__name__ = rule.__qualname__ = f"_{name}_batch"
    return rule


def _batch_moments_batch(inputs, batched, axis=(0,), ddof=1):
    # the output stacks [mean, var] along a new first axis: the vmapped axis goes first
    (x,) = inputs
    out = tg._batch_moments(x, _moved(axis, x.ndim - 1, "_batch_moments"), ddof)
    return tg.swapaxes(out, 0, 1)


def _merge_into_channels(t, size, shape):
    """Physical (B, N, C, *) -> (N, B*C, *): the examples' channels side by side, so a
    per-channel op treats each (example, channel) pair as one channel."""
    t = tg.swapaxes(t, 0, 1)
    return tg.reshape(t, (shape[0], size * shape[1]) + tuple(shape[2:]))


def _channel_affine_batch(inputs, batched):
    """y (N, C, *) and w, b (C,) on axis 1. A batched y alone folds the vmapped axis
    into N; a batched w or b puts the examples' channels side by side (B*C channels)."""
    size, (ys, ws, bs) = _size_and_shapes(inputs, batched)
    (y, w, b), (by, bw, bb) = inputs, batched
    if len(ys) < 2 or ws != (ys[1],) or bs != (ys[1],):
        return _batching._loop(tg._channel_affine, inputs, batched, {}, None)
    if not (bw or bb):
        out = tg._channel_affine(tg.reshape(y, (size * ys[0],) + ys[1:]), w, b)
        return tg.reshape(out, (size,) + ys)
    y = _merge_into_channels(_to_batch(y, by, size, ys), size, ys)
    w, b = (tg.reshape(_to_batch(v, bv, size, ws), (size * ws[0],))
            for v, bv in ((w, bw), (b, bb)))
    out = tg.reshape(tg._channel_affine(y, w, b), (ys[0], size) + ys[1:])
    return tg.swapaxes(out, 0, 1)


def _channel_reduction_batch(name):
    """The rule of _channel_dot(a, b) / _channel_sum(a), sums over every axis but 1:
    the examples' channels side by side (B*C channels), one call, (B, C)."""
    def rule(inputs, batched):
        size, shapes = _size_and_shapes(inputs, batched)
        shape = np.broadcast_shapes(*shapes)
        if len(shape) < 2:
            return _batching._loop(getattr(tg, name), inputs, batched, {}, None)
        args = [_merge_into_channels(_to_batch(x, b, size, shape), size, shape)
                for x, b in zip(inputs, batched)]
        return tg.reshape(getattr(tg, name)(*args), (size, shape[1]))
    rule.__name__ = rule.__qualname__ = f"_{name}_batch"
    return rule


def register(registry):
    """Register the normalisation ops and functions (called from functional.register)."""
    reg = registry.register_op
    reg("_standardize", kernels={"cpu": _standardize_kernel}, vjp=_standardize_vjp,
        jvp=_standardize_jvp, params=("axis", "eps"), method=False, samples=_STD_SAMPLES,
        aux=1,
        batch=_over_axes_batch("_standardize"),
        doc="_standardize(x, axis, eps): (x - mean) / sqrt(var + eps) over the axes `axis` "
            "(a tuple; biased variance) in one kernel, the op behind layer_norm, "
            "group_norm, instance_norm and batch_norm in training; closed-form rule.")
    reg("_rms_scale", kernels={"cpu": _rms_kernel}, vjp=_rms_vjp, jvp=_rms_jvp,
        params=("axis", "eps"), method=False, samples=_RMS_SAMPLES, aux=1,
        batch=_over_axes_batch("_rms_scale"),
        doc="_rms_scale(x, axis, eps): x / sqrt(mean(x**2) + eps) over the axes `axis` in "
            "one kernel, the op behind rms_norm; closed-form rule.")
    reg("_standardize_grad", kernels={"cpu": _standardize_grad_kernel},
        vjp=_standardize_grad_vjp,
        jvp=_standardize_grad_jvp, params=("axis", "eps"), method=False,
        samples=[tg.Sample(_r(*s.args[0].shape, seed=9), *s.args) for s in _STD_SAMPLES],
        batch=_grad_over_axes_batch("_standardize_grad"),
        doc="_standardize_grad(g, x, axis, eps): the gradient of _standardize at x for "
            "the output gradient g, r * (g - mean(g) - y * mean(g * y)), in one kernel "
            "(its first-order rule); differentiable again.")
    reg("_rms_scale_grad", kernels={"cpu": _rms_grad_kernel}, vjp=_rms_grad_vjp,
        jvp=_rms_grad_jvp,
        params=("axis", "eps"), method=False,
        samples=[tg.Sample(_r(*s.args[0].shape, seed=9), *s.args) for s in _RMS_SAMPLES],
        batch=_grad_over_axes_batch("_rms_scale_grad"),
        doc="_rms_scale_grad(g, x, axis, eps): the gradient of _rms_scale at x for the "
            "output gradient g, r * (g - y * mean(g * y)), in one kernel (its first-order "
            "rule); differentiable again.")
    reg("_standardize_backward", kernels={"cpu": _std_backward_kernel},
        vjp=_std_backward_vjp,
        jvp=_std_backward_jvp, params=("axis",), method=False,
        samples=_backward_samples(_STD_SAMPLES),
        batch=_backward_over_axes_batch("_standardize_backward"),
        doc="_standardize_backward(g, y, r, axis): r * (g - mean(g) - y * mean(g * y)), "
            "the gradient of _standardize from its output y and inverse std r (its rule's "
            "fast path, with the forward's r); differentiable in g, y and r.")
    reg("_rms_scale_backward", kernels={"cpu": _rms_backward_kernel},
        vjp=_rms_backward_vjp,
        jvp=_rms_backward_jvp, params=("axis",), method=False,
        samples=_backward_samples(_RMS_SAMPLES),
        batch=_backward_over_axes_batch("_rms_scale_backward"),
        doc="_rms_scale_backward(g, y, r, axis): r * (g - y * mean(g * y)), the gradient "
            "of _rms_scale from its output y and inverse rms r; differentiable in g, y, r.")
    reg("_batch_moments", kernels={"cpu": _batch_moments_kernel}, vjp=_batch_moments_vjp,
        jvp=_batch_moments_jvp,
        params=("axis", "ddof"), method=False,
        samples=[tg.Sample(_r(4, 3, 2, seed=7), (0, 2), 1), tg.Sample(_r(5, 2, seed=8), (0,), 0)],
        batch=_batch_moments_batch,
        doc="_batch_moments(x, axis, ddof): stack([mean, var(ddof=ddof)]) over `axis` in "
            "one kernel (the batch statistics of a running-statistics update).")
    reg("_channel_affine", kernels={"cpu": _channel_affine_kernel}, vjp=_channel_affine_vjp,
        jvp=_channel_affine_jvp,
        method=False, save_ans=False,
        samples=[tg.Sample(_r(3, 2, 4, seed=11), _pos(2, seed=12), _r(2, seed=13)),
                 tg.Sample(_r(2, 3, 2, 2, seed=14), _r(3, seed=15), _r(3, seed=16)),
                 tg.Sample(_r(4, 3, seed=17), _r(3, seed=18), _r(3, seed=19))],
        batch=_channel_affine_batch,
        doc="_channel_affine(y, w, b): y * w + b with w, b of shape (C,) on axis 1 of an "
            "(N, C, *) y, in one kernel (the affine of group/batch/instance norm).")
    reg("_channel_dot", kernels={"cpu": _channel_dot_kernel}, vjp=_channel_dot_vjp,
        jvp=_channel_dot_jvp,
        method=False, save_ans=False,
        samples=[tg.Sample(_r(3, 2, 4, seed=21), _r(3, 2, 4, seed=22)),
                 tg.Sample(_r(3, 2, 4, seed=27), _r(1, 2, 4, seed=28)),      # broadcast
                 tg.Sample(_r(4, 3, seed=23), _r(4, 3, seed=24))],
        batch=_channel_reduction_batch("_channel_dot"),
        doc="_channel_dot(a, b): sum(a * b) over every axis but 1, shape (C,).")
    reg("_channel_sum", kernels={"cpu": _channel_sum_kernel}, vjp=_channel_sum_vjp,
        jvp="linear",
        method=False, save_ans=False, save_inputs=(False,),
        samples=[tg.Sample(_r(3, 2, 4, seed=25)), tg.Sample(_r(4, 3, 2, 2, seed=26))],
        batch=_channel_reduction_batch("_channel_sum"),
        doc="_channel_sum(a): sum(a) over every axis but 1, shape (C,).")
    fn = registry.register_function
    fn("layer_norm", layer_norm, method=False, samples=_LAYER_NORM_SAMPLES)
    fn("rms_norm", rms_norm, method=False, samples=_RMS_NORM_SAMPLES)
    fn("group_norm", group_norm, method=False, samples=_GROUP_NORM_SAMPLES)
    fn("batch_norm", batch_norm, method=False, samples=_BATCH_NORM_SAMPLES,
       differentiable=(0, 3, 4), not_implemented=(1, 2))
    fn("instance_norm", instance_norm, method=False, samples=_INSTANCE_NORM_SAMPLES,
       differentiable=(0, 3, 4), not_implemented=(1, 2))
    fn("normalize", normalize, method=False, samples=_NORMALIZE_SAMPLES)
