"""The ops of tapegrad-nn: softmax, log_softmax, logsumexp and the losses.

This module is also ``tg.nn.functional`` (PyTorch's ``F``): the registered ops are
reachable here by name (``F.softmax is tg.softmax``), next to ``linear`` (the op
``tg.linear``) and ``dropout`` and the activations of tapegrad-elementwise (``F.relu``).

Vocabulary (as everywhere in tapegrad): ``g`` is the gradient flowing into an op's output,
``ans`` the op's forward result, ``x, t`` its inputs (logits and target; ``x, w, b`` for
linear). Each op below is one ``registry.register_op`` call holding its CPU kernel, ONE
gradient rule written with tapegrad ops (so it runs on any device and is itself
differentiable) and the sample inputs the contract kit checks it with. ``mse_loss`` is a
composition and has no rule of its own.

Numerical notes: every kernel subtracts the maximum before ``exp`` (no overflow, no
warnings for logits like 1000); ``cross_entropy`` is computed from ``log_softmax`` (never
``log(softmax)``, which is ``log(0) = -inf`` for confident wrong predictions);
``binary_cross_entropy_with_logits`` is ``max(x, 0) - x*t + log1p(exp(-|x|))``.

>>> import tapegrad as tg
>>> x = tg.tensor([[1000., 0.], [1., 1.]], requires_grad=True)
>>> tg.softmax(x)
tensor([[1. , 0. ],
        [0.5, 0.5]], grad_fn=<softmax>)
>>> tg.log_softmax(x)[0].tolist()
[0.0, -1000.0]
>>> loss = tg.cross_entropy(x, [1, 0])          # integer class labels
>>> loss
tensor(500.34657359, grad_fn=<cross_entropy>)
>>> loss.backward()
>>> x.grad                                      # (softmax(x) - one_hot(labels)) / N
tensor([[ 0.5 , -0.5 ],
        [-0.25,  0.25]])
"""

from __future__ import annotations

import contextlib
import math
import numbers

import numpy as np
import tapegrad as tg
from tapegrad import _batching
from tapegrad._batching import logical_axes, pad_batched
from tapegrad._compile import run_eagerly
from tapegrad._engine import new_tensor as _new_tensor, plain_gradient as _plain_gradient
from tapegrad_shape.ops import derivative_reason

from ._dtype_check import check_float_operands
from . import _kernels
from . import conv as _conv
from .conv import conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d  # noqa: F401
from . import pooling as _pooling
from .pooling import *  # noqa: F401,F403
from . import normalization as _normalization
from .normalization import (batch_norm, group_norm, instance_norm, layer_norm,  # noqa: F401
                            normalize, rms_norm)
from . import activations as _activations
from .activations import _sum_terms
from . import recurrent_ops as _recurrent_ops
from . import attention as _attention
from .attention import (dropout1d, dropout2d, embedding, masked_fill, one_hot,  # noqa: F401
                        scaled_dot_product_attention)

REDUCTIONS = ("mean", "sum", "none")

# The public names this module forwards to the registered ops (tg.<name>), so that
# ``tg.nn.functional.softmax`` is ``tg.softmax`` whichever plugin defined it.
_FORWARDED = ("softmax", "log_softmax", "logsumexp", "cross_entropy",
              "relu", "tanh", "sigmoid")
_FORWARDED += _activations.NAMES

__all__ = ["linear", "dropout", "mse_loss", "binary_cross_entropy_with_logits", "register",
           *_FORWARDED]
__all__ += ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d"]
__all__ += list(_pooling.NAMES)
__all__ += ["layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "normalize"]
__all__ += _attention.__all__
__all__ += ["bilinear"]


def __getattr__(name):
    if name in _FORWARDED:
        return getattr(tg, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------------------
# Helpers on shapes and parameters (plain Python, never on arrays)
# ---------------------------------------------------------------------------------------

def _check_reduction(reduction):
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _reduce(loss, reduction):
    """Kernel side: the per-element loss array reduced as asked."""
    if reduction == "mean":
        return loss.sum() / loss.size          # np.mean without its Python overhead
    if reduction == "sum":
        return loss.sum()
    return loss


def _reduce_tensor(loss, reduction):
    """Tensor side (for compositions): the per-element loss reduced as asked."""
    if reduction == "mean":
        return tg.mean(loss)
    if reduction == "sum":
        return tg.sum(loss)
    return loss


def _per_element(g, shape, reduction):
    """The gradient flowing into each element of an unreduced loss of `shape`: g / n for
    'mean' (a 0-d tensor that broadcasts), g for 'sum' and 'none'."""
    if reduction == "mean":
        return g / max(math.prod(shape), 1)
    return g


def _is_label(t):
    """Whether a cross_entropy target holds integer class labels (not probabilities):
    an integer array, tensor, TensorMeta or number (bool is not a label)."""
    dtype = getattr(t, "dtype", None)
    if dtype is not None:
        return dtype.kind in "iu"
    return isinstance(t, numbers.Integral) and not isinstance(t, bool)


def _shape_of(v):
    return tuple(getattr(v, "shape", ()))


# vmap's batching rules (register_op(batch=)): `inputs` are physical, the vmapped axis
# first where batched (tapegrad/_batching.py, Note: [batched tensors]).

def _batch_size(inputs, batched):
    return next(x.shape[0] for x, b in zip(inputs, batched) if b)


def _logical_shape(x, batched):
    return tuple(x.shape[1:]) if batched else _shape_of(x)


def _batched_to(x, batched, size, shape):
    """Physical x broadcast to (size,) + shape: a batched x gets unit axes after its batch
    axis first (pad_batched), an unbatched one is shared by every example."""
    if batched:
        x = pad_batched(x, len(shape))
        return x if tuple(x.shape) == (size,) + shape else tg.broadcast_to(x, (size,) + shape)
    if not isinstance(x, tg.Tensor):
        x = tg.asarray(x)
    return tg.broadcast_to(x, (size,) + shape)


def _batch_axes(axis, ndim, who):
    """A logical `axis` (int, tuple or None: all) of an ndim-d value as the physical
    axes (shifted past the batch axis): an int stays an int (the kernels' fast paths)."""
    axes = tuple(a + 1 for a in logical_axes(axis, ndim, who))
    return axes[0] if isinstance(axis, (int, np.integer)) else axes


def _per_example(loss, reduction, count=None):
    """A physical 'none' loss (B, ...) reduced per example as `reduction` asks ('mean'
    divides by `count`, a (B,) tensor, or by the number of elements of one example)."""
    if reduction == "none":
        return loss
    axes = tuple(range(1, loss.ndim))
    total = tg.sum(loss, axis=axes) if axes else loss
    if reduction == "sum":
        return total
    if count is None:
        return total / max(math.prod(loss.shape[1:]), 1)
    with np.errstate(invalid="ignore", divide="ignore"):     # every row ignored: nan
        return total / count


# ---------------------------------------------------------------------------------------
# softmax, log_softmax, logsumexp
# ---------------------------------------------------------------------------------------

_NO_ERRSTATE = contextlib.nullcontext()


def _shifted(x, axis):
    """x minus its maximum over `axis` (kept dims), and that maximum.

    NOTE: a maximum of +-inf (a row of -inf, or an inf entry) is replaced by 0 so that
    x - m is not inf - inf = nan: -inf entries then get exp(-inf) = 0 (masked out), and
    logsumexp of a row of -inf is log(0) = -inf, as mathematically expected. softmax and
    log_softmax of a row of nothing but -inf stay nan (0 / 0), as in PyTorch, silently."""
    m = x.max(axis=axis, keepdims=True)
    finite = np.isfinite(m)
    if not finite.all():
        m = np.where(finite, m, 0)
        return x - m, m, False
    return x - m, m, True


def _sum_kept(a, axis):
    """a.sum(axis, keepdims=True); over a short last axis as einsum's row sum (~3x
    faster than NumPy's reduction there). NOTE: einsum accumulates a row sequentially
    (in SIMD lanes): rows longer than 4096 keep NumPy's pairwise sum (float32)."""
    if (axis == -1 or (a.ndim and axis == a.ndim - 1)) and 0 < a.shape[-1] <= 4096 \
            and type(axis) is int and a.dtype.kind == "f":
        return np.einsum("...i->...", a)[..., None]
    return a.sum(axis=axis, keepdims=True)


def _softmax_kernel(x, axis=-1):
    z, _, finite = _shifted(np.asarray(x), axis)
    # NOTE: z is a fresh array: exp and the division run in place on it (attention's
    # (N, H, L, S) scores: two full-size allocations fewer). An integer or 0-d z is not
    # a float buffer that can hold the result; np.exp makes one.
    if z.dtype.kind == "f" and z.ndim:
        np.exp(z, out=z)
    else:
        z = np.asarray(np.exp(z))
    if finite:                       # the maximum contributes exp(0) = 1: the sum is >= 1
        z /= _sum_kept(z, axis)
        return z
    with np.errstate(invalid="ignore"):           # a row of -inf only: 0 / 0 = nan
        z /= _sum_kept(z, axis)
    return z


def _has_kernel(op, t):
    """Whether `op` has a kernel on t's device (the fused backward ops are CPU-only; the
    rules fall back to their composite form elsewhere)."""
    return t.device.name in op.kernels


def _softmax_vjp(g, ans, x, axis=-1):
    # J^T g for y = softmax(x): y * (g - sum(g * y)), one fused kernel where it has one.
    if _has_kernel(tg._softmax_backward, ans):
        return (tg._softmax_backward(g, ans, axis),)
    return (ans * (g - tg.sum(g * ans, axis, keepdims=True)),)


def _softmax_jvp(t, ans, x, axis=-1):
    # J = diag(y) - y y^T is symmetric: the VJP applied to the tangent is the JVP.
    if t[0] is None:
        return tg.zeros_like(ans)
    return _softmax_vjp(t[0], ans, x, axis)[0]


def _softmax_like_batch(name):
    def rule(inputs, batched, axis=-1):
        (x,) = inputs
        return getattr(tg, name)(x, _batch_axes(axis, x.ndim - 1, name))
    rule.__name__ = rule.__qualname__ = f"_{name}_batch"
    return rule


def _softmax_backward_like_batch(name):
    """The rule of _softmax_backward(g, y, axis) / _log_softmax_backward(g, p, axis): g
    broadcasts to y's shape (the kernel's rule), so both go to y's (B,) + shape."""
    def rule(inputs, batched, axis=-1):
        (g, y), (bg, by) = inputs, batched
        size = _batch_size(inputs, batched)
        shape = np.broadcast_shapes(_logical_shape(g, bg), _logical_shape(y, by))
        y = _batched_to(y, by, size, shape)
        g = pad_batched(g, len(shape)) if bg else g
        return getattr(tg, name)(g, y, _batch_axes(axis, len(shape), name))
    rule.__name__ = rule.__qualname__ = f"_{name}_batch"
    return rule


def _row_dot(a, b, axis):
    """sum(a * b, axis, keepdims=True), without the product array for the last axis."""
    if axis in (-1, a.ndim - 1) and a.ndim and a.shape[-1] <= 4096 and a.shape == b.shape:
        # NOTE: einsum accumulates a row sequentially: short rows only (float32)
        return np.einsum("...i,...i->...", a, b)[..., None]
    return np.sum(a * b, axis=axis, keepdims=True)


def _softmax_backward_kernel(g, y, axis=-1):
    """y * (g - sum(g * y, axis)): softmax's gradient from its output, one buffer."""
    y = np.asarray(y)
    g = np.broadcast_to(g, y.shape)
    out = g - _row_dot(g, y, axis)
    out *= y
    return out


def _softmax_backward_vjp(h, ans, g, y, axis=-1):
    # B(g, y) = y * (g - s), s = sum(g * y): dg = B(h, y) (J is symmetric);
    # dy = h * (g - s) - sum(h * y) * g.
    dg = tg._softmax_backward(h, y, axis) if tg.needs_grad(g) else None
    dy = None
    if tg.needs_grad(y):
        dy = h * (g - tg.sum(g * y, axis, keepdims=True)) - tg.sum(h * y, axis, keepdims=True) * g
    return dg, dy


def _softmax_backward_jvp(t, ans, g, y, axis=-1):
    # d B(g, y) = B(tg, y) + ty * (g - sum(g * y)) - y * sum(g * ty)
    tg_, ty = t[0], t[1]
    terms = []
    if tg_ is not None:
        terms.append(tg._softmax_backward(tg_, y, axis))
    if ty is not None:
        terms.append(ty * (g - tg.sum(g * y, axis, keepdims=True))
                     - y * tg.sum(g * ty, axis, keepdims=True))
    return _sum_terms(terms, ans)


def _log_softmax_and_probs(x, axis):
    """(log_softmax(x), softmax(x)) from one exp of the shifted x."""
    z, _, finite = _shifted(np.asarray(x), axis)
    e = np.exp(z)
    if finite:          # the maximum contributes exp(0) = 1: the sum is >= 1, nothing to mute
        s = _sum_kept(e, axis)
        z -= np.log(s)
        e /= s
        return z, e
    with np.errstate(divide="ignore", invalid="ignore"):   # a row of -inf: -inf - -inf
        s = _sum_kept(e, axis)
        z -= np.log(s)
        e /= s
    return z, e


def _log_softmax_kernel(x, axis=-1):
    z, _, finite = _shifted(np.asarray(x), axis)
    if finite:                       # the maximum contributes exp(0) = 1: the sum is >= 1
        return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))
    with np.errstate(divide="ignore", invalid="ignore"):   # a row of -inf: -inf - -inf
        return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _log_softmax_aux_kernel(x, axis=-1):
    """(log_softmax(x), softmax(x)): the softmax is the auxiliary output its rule reuses
    (register_op(aux=1)) instead of exp(ans) again."""
    return _log_softmax_and_probs(x, axis)


def _log_softmax_vjp(g, ans, x, axis=-1, *, aux=None):
    # J^T g for y = log_softmax(x): g - softmax(x) * sum(g), with softmax(x) = exp(y):
    # the forward's (aux) in a plain backward, exp(ans) when the rule is recorded.
    p = aux[0] if aux is not None else tg.exp(ans)
    if _has_kernel(tg._log_softmax_backward, p):
        return (tg._log_softmax_backward(g, p, axis),)
    return (g - p * tg.sum(g, axis, keepdims=True),)


def _log_softmax_jvp(t, ans, x, axis=-1):
    # J = I - 1 p^T (rows), not symmetric: the tangent is t - sum(p * t) with p = exp(ans),
    # recomputed (a JVP gets no aux).
    if t[0] is None:
        return tg.zeros_like(ans)
    return t[0] - tg.sum(tg.exp(ans) * t[0], axis, keepdims=True)


def _log_softmax_backward_kernel(g, p, axis=-1):
    """g - p * sum(g, axis): log_softmax's gradient from the softmax p, one buffer."""
    p = np.asarray(p)
    g = np.broadcast_to(g, p.shape)
    out = p * -_sum_kept(g, axis)
    out += g
    return out


def _log_softmax_backward_vjp(h, ans, g, p, axis=-1):
    # B(g, p) = g - p * sum(g): dg = h - sum(h * p) (broadcast over axis); dp = -h * sum(g).
    dg = h - tg.sum(h * p, axis, keepdims=True) if tg.needs_grad(g) else None
    dp = -h * tg.sum(g, axis, keepdims=True) if tg.needs_grad(p) else None
    return dg, dp


def _log_softmax_backward_jvp(t, ans, g, p, axis=-1):
    # B(g, p) = g - p * sum(g) is bilinear: B(tg, p) - tp * sum(g).
    tg_, tp = t[0], t[1]
    return _sum_terms([
        tg._log_softmax_backward(tg_, p, axis) if tg_ is not None else None,
        -tp * tg.sum(g, axis, keepdims=True) if tp is not None else None], ans)


def _logsumexp_kernel(x, axis=None, keepdims=False):
    x = np.asarray(x)
    z, m, _ = _shifted(x, axis)
    with np.errstate(divide="ignore"):
        out = np.log(np.exp(z).sum(axis=axis, keepdims=True)) + m
    if not keepdims:
        out = np.squeeze(out, axis=axis) if axis is not None else out.reshape(())
    return out


def _logsumexp_vjp(g, ans, x, axis=None, *, keepdims=False):
    # d logsumexp / dx = exp(x - ans) (the softmax over `axis`), with g and ans
    # broadcast back over the reduced axes.
    if not keepdims:
        kept = _kept_shape(x.shape, axis)
        g, ans = tg.reshape(g, kept), tg.reshape(ans, kept)
    return (g * tg.exp(x - ans),)


def _logsumexp_jvp(t, ans, x, axis=None, *, keepdims=False):
    # sum(softmax(x) * t) over `axis`, the softmax as the VJP's exp(x - ans).
    if t[0] is None:
        return tg.zeros_like(ans)
    kept = ans if keepdims else tg.reshape(ans, _kept_shape(x.shape, axis))
    return tg.sum(tg.exp(x - kept) * t[0], axis, keepdims=keepdims)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """``log(sum(b * exp(a)))`` over `axis` (None: all), computed stably, as
    ``scipy.special.logsumexp``. `b` (scale factors, broadcastable with `a`) is optional
    and differentiable too; entries where ``b == 0`` add nothing, even where `a` is inf
    or NaN (scipy's convention). Where the sum is negative the result is NaN, as scipy's
    with ``return_sign=False``; ``return_sign=True`` is not supported.

    >>> import tapegrad as tg
    >>> x = tg.tensor([0., 1., 2.], requires_grad=True)
    >>> round(tg.logsumexp(x).item(), 6), round(tg.logsumexp(x, b=[1., 0., 2.]).item(), 6)
    (2.407606, 2.758624)
    """
    if return_sign:
        raise ValueError("logsumexp: return_sign=True is not supported (the result of "
                         "tapegrad's logsumexp is real: NaN where sum(b * exp(a)) < 0)")
    if b is None:
        out = tg._logsumexp(a, axis, keepdims=keepdims)
    else:
        # A Python number b promotes weakly (scipy's xp_promote): float32 a stays float32.
        weak = b if type(b) in (int, float) else None
        x = tg.asarray(a)
        b = b if isinstance(b, tg.Tensor) else tg.asarray(b, device=x.device)
        out = _scaled_logsumexp(x, b, weak, axis, keepdims)
    # NOTE: a 0-d `a` with keepdims=True gives a 0-d result (NumPy's keepdims rule, as the
    # op always did); scipy makes `a` 1-D first and returns shape (1,).
    return out


def _scaled_logsumexp(x, b, weak, axis, keepdims):
    # NOTE: F(x, b) = log(sum(b * exp(x))) = m + log(sum(b * exp(x - m))) for ANY constant
    # m, so with m a constant (no gradient) the composition has F's exact derivatives of
    # every order: d/dx = b exp(x - F), d/db = exp(x - F), also where b == 0. m is the
    # maximum of x over the entries with b != 0 (the largest term is exp(0) = 1, so no
    # overflow), 0 where that is not finite (all -inf: the result is log(0) = -inf). An
    # entry with b == 0 is dropped only where its exp would not be finite (x inf or NaN, or
    # x - m > 700: there the gradient in b, exp(x - F), overflows anyway).
    try:
        shape = np.broadcast_shapes(x.shape, b.shape)
    except ValueError:
        raise ValueError(f"logsumexp: b of shape {b.shape} does not broadcast with a of "
                         f"shape {x.shape}") from None
    if "c" in (x.dtype.kind, b.dtype.kind):
        raise TypeError(f"logsumexp: complex a or b ({x.dtype}, {b.dtype}) is not supported")
    dtype = np.result_type(x.dtype, b.dtype if weak is None else weak)
    if dtype.kind != "f":
        dtype = np.dtype(np.float64)               # scipy computes integers in float64
    x, b = (t if t.dtype == dtype else t.astype(dtype) for t in (x, b))
    if x.shape != shape:
        x = tg.broadcast_to(x, shape)
    if b.shape != shape:
        b = tg.broadcast_to(b, shape)
    for ax in () if axis is None else (axis if isinstance(axis, (tuple, list)) else (axis,)):
        if not -len(shape) <= int(ax) < max(len(shape), 1):
            raise np.exceptions.AxisError(f"logsumexp: axis {ax} is out of bounds for a of "
                                          f"dimension {len(shape)}")
    zero = b == 0
    with tg.no_grad():
        m = tg.max(tg.where(zero, -np.inf, x.detach()), axis, keepdims=True)
        m = tg.where(tg.abs(m) < np.inf, m, 0)          # finite (no inf - inf warning)
        drop = tg.logical_and(zero, tg.logical_not(x.detach() - m <= 700))
    terms = b * tg.exp(tg.where(drop, -np.inf, x) - m)
    # log of the sum without NumPy's warnings: log(0) = -inf, log(< 0) = nan, as scipy's
    # (whose errstate hides them), both constants of the graph.
    total = tg.sum(terms, axis, keepdims=True)
    pos = total > 0
    out = tg.where(pos, tg.log(tg.where(pos, total, 1)),
                   tg.where(total == 0, -np.inf, np.nan).astype(dtype)) + m
    if not keepdims:
        out = tg.reshape(out, _reduced_shape(shape, axis))
    return out


def _reduced_shape(shape, axis):
    """The shape of a reduction of `shape` over `axis` (axis already checked)."""
    if axis is None:
        return ()
    axes = {int(a) % len(shape) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))}
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _kept_shape(shape, axis):
    ndim = len(shape)
    if axis is None:
        return (1,) * ndim
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = {int(a) % ndim for a in axes}
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


# ---------------------------------------------------------------------------------------
# cross_entropy
# ---------------------------------------------------------------------------------------

def _check_cross_entropy(x, t):
    """Raise a clear error for logits/target that do not fit; the class axis is last."""
    if x.ndim == 0:
        raise ValueError("logits must have at least one dimension, the class axis (last)")
    if _is_label(t):
        if _shape_of(t) != x.shape[:-1]:
            raise ValueError(
                f"integer class labels must have the logits' shape without the class axis: "
                f"logits {x.shape} need labels of shape {x.shape[:-1]}, got {_shape_of(t)}")
        return True
    dtype = getattr(t, "dtype", None)
    if isinstance(t, (bool, np.bool_)) or (dtype is not None and np.dtype(dtype).kind not in "f"):
        raise TypeError(
            f"target must hold integer class labels or floating-point class probabilities, "
            f"got dtype {np.dtype(dtype) if dtype is not None else type(t).__name__}")
    if _shape_of(t) != x.shape:
        raise ValueError(
            f"a floating-point target holds class probabilities and must have the logits' "
            f"shape {x.shape}, got {_shape_of(t)} (class labels must be integers)")
    return False


def _check_labels(t, n_classes, ignore_index=None):
    """Raise IndexError for a class label outside [0, n_classes) (other than
    ignore_index)."""
    t = np.asarray(t)
    bad = (t < 0) | (t >= n_classes)
    if ignore_index is not None:
        bad &= t != ignore_index
    if t.size and bad.any():
        # NOTE: a negative label would silently index from the end; refuse it too.
        raise IndexError(
            f"class label {int(t[bad].flat[0])} is out of range for {n_classes} classes "
            f"(labels must be in [0, {n_classes}); {int(np.count_nonzero(bad))} of "
            f"{t.size} are not)")
    return t


def _is_plain(t, weight, ignore_index, label_smoothing):
    """Whether cross_entropy needs none of class weight / ignore_index / label_smoothing
    (the fused path, and the one the cuda kernel implements): no weight, no smoothing,
    and no label equal to ignore_index (PyTorch's default -100 ignores those rows too)."""
    if weight is not None or label_smoothing != 0.0:
        return False
    if not _is_label(t):
        return ignore_index == -100        # otherwise: refused by _coefficients
    if getattr(t, "device", None) is not None and getattr(t.device, "name", "cpu") != "cpu":
        # The cuda kernel refuses a label outside [0, C), -100 included (no silent wrap);
        # another ignore_index takes the weighted path (through the host).
        return ignore_index == -100
    return not (np.asarray(t) == ignore_index).any()


def _class_weight(weight, n_classes, dtype, op):
    """`weight` (None or C class weights, not differentiable) as an array of `dtype`."""
    if weight is None:
        return None
    reason = derivative_reason(weight)
    if reason is not None:
        raise NotImplementedError(f"{op}: the derivative with respect to the class weight is "
                                  f"not implemented (as in PyTorch), and weight {reason}; "
                                  f"pass weight.detach()")
    w = np.asarray(weight)
    if w.shape != (n_classes,):
        raise ValueError(f"{op}: weight must hold one weight per class, shape "
                         f"({n_classes},), got {w.shape}")
    return w.astype(dtype, copy=False)


def _coefficients(x_shape, dtype, t, labels, weight, ignore_index, label_smoothing, op):
    """The loss is -sum(a * log_probs, -1) per row and its 'mean' divides the sum by
    `denom`: returns (a, denom), as NumPy arrays. With labels, row i has
    a[i] = (1 - eps) w[y_i] one_hot(y_i) + eps / C * w, 0 for a row whose label is
    ignore_index, and denom = sum of w[y_i] over the rows kept (PyTorch's weighted mean);
    with probabilities, a = w * ((1 - eps) t + eps / C) and denom = the number of rows."""
    n_classes = x_shape[-1]
    w = _class_weight(weight, n_classes, dtype, op)
    eps = float(label_smoothing)
    ones = np.ones(n_classes, dtype) if w is None else w
    if labels:
        t = _check_labels(t, n_classes, ignore_index)
        keep = t != ignore_index
        safe = np.where(keep, t, 0)
        a = np.zeros(x_shape, dtype)
        rows = a.reshape(-1, n_classes)
        row_w = ones[safe.reshape(-1)] * keep.reshape(-1)
        rows[np.arange(rows.shape[0]), safe.reshape(-1)] = (1.0 - eps) * row_w
        if eps:
            rows += (eps / n_classes) * keep.reshape(-1, 1) * ones
        return a, row_w.sum()
    if ignore_index != -100:
        raise ValueError(f"{op}: ignore_index applies to integer class labels only, not "
                         f"to a target of class probabilities")
    a = ones * ((1.0 - eps) * np.asarray(t) + eps / n_classes)
    return a.astype(dtype, copy=False), max(math.prod(x_shape[:-1]), 1)


def _check_cross_entropy_args(reduction, label_smoothing):
    _check_reduction(reduction)
    if (isinstance(label_smoothing, bool) or not isinstance(label_smoothing, numbers.Real)
            or not 0.0 <= label_smoothing <= 1.0):
        raise ValueError(f"label_smoothing must be a number in [0, 1], got {label_smoothing!r}")


def _cross_entropy_kernel(x, t, *, reduction="mean", weight=None, ignore_index=-100,
                          label_smoothing=0.0):
    return _cross_entropy_aux_kernel(x, t, reduction=reduction, weight=weight,
                                     ignore_index=ignore_index,
                                     label_smoothing=label_smoothing)[0]


def _cross_entropy_aux_kernel(x, t, *, reduction="mean", weight=None, ignore_index=-100,
                              label_smoothing=0.0):
    """(loss, softmax(x)): the softmax is the auxiliary output the rule reuses."""
    # NOTE: the common case (a classifier's batch: what _cross_entropy_c takes, reduced
    # by 'mean') tested here in one expression and run without the five Python frames of
    # the general path (~4 us of W2's step); the same kernel and reduction, so the same
    # bits. label_smoothing must be a real 0 (False is refused below, as there).
    if (reduction == "mean" and weight is None and type(x) is np.ndarray
            and type(t) is np.ndarray and x.ndim == 2 and t.ndim == 1
            and t.dtype == np.int64 and x.dtype in _C_FLOATS
            and (type(label_smoothing) is float or type(label_smoothing) is int)
            and label_smoothing == 0 and not 0 <= ignore_index < x.shape[1]
            and x.flags.c_contiguous and t.flags.c_contiguous):
        parts = _kernels.cross_entropy_rows(x, t)
        if parts is not None:
            loss = 0.0 - parts[0]
            return _add_reduce(loss, None) / loss.size, parts[1]    # as _reduce's 'mean'
    return _cross_entropy_parts(x, t, reduction, weight, ignore_index, label_smoothing)


_add_reduce = np.add.reduce       # what ndarray.sum() runs, without its Python frame


def _cross_entropy_parts(x, t, reduction, weight, ignore_index, label_smoothing):
    _check_cross_entropy_args(reduction, label_smoothing)
    x = np.asarray(x)
    fast = _cross_entropy_c(x, t, reduction, weight, ignore_index, label_smoothing)
    if fast is not None:
        return fast
    labels = _check_cross_entropy(x, t)
    lsm, probs = _log_softmax_and_probs(x, -1)
    return _cross_entropy_loss(x, t, labels, lsm, reduction, weight, ignore_index,
                               label_smoothing), probs


def _cross_entropy_c(x, t, reduction, weight, ignore_index, label_smoothing):
    """(loss, softmax) from one C pass (_kernels.cross_entropy_rows) in the common case:
    2-D C-contiguous float32/float64 logits, int64 labels, no weight, no smoothing, an
    ignore_index no label can equal; None otherwise, or when the kernel finds a label out
    of range or a non-finite logit (the NumPy path below raises or keeps NaN/inf
    semantics). The loss's reduction is NumPy's, as on that path."""
    if (type(x) is not np.ndarray or x.ndim != 2 or type(t) is not np.ndarray
            or t.dtype != np.int64 or t.ndim != 1 or weight is not None
            or label_smoothing != 0.0 or 0 <= ignore_index < x.shape[1]
            or x.dtype not in _C_FLOATS or not x.flags.c_contiguous
            or not t.flags.c_contiguous):
        return None
    parts = _kernels.cross_entropy_rows(x, t)
    if parts is None:
        return None
    picked, probs = parts
    return _reduce(0.0 - picked, reduction), probs


_C_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _labels_in_range(t, n_classes, ignore_index):
    """The common case in one pass over the labels: a label array with every label in
    [0, n_classes) and an ignore_index outside it (PyTorch's -100), so no row is ignored
    and no label needs _check_labels' error (the general checks decide otherwise)."""
    if type(t) is not np.ndarray or 0 <= ignore_index < n_classes:
        return False
    return t.size == 0 or (t.min() >= 0 and t.max() < n_classes)


def _cross_entropy_loss(x, t, labels, lsm, reduction, weight, ignore_index, label_smoothing):
    if labels and weight is None and label_smoothing == 0.0 and _labels_in_range(
            t, x.shape[-1], ignore_index):
        n_classes = x.shape[-1]
        rows = lsm.reshape(-1, n_classes)
        picked = rows[np.arange(rows.shape[0]), t.reshape(-1)].reshape(t.shape)
        return _reduce(0.0 - picked, reduction)
    if not _is_plain(t, weight, ignore_index, label_smoothing):
        a, denom = _coefficients(x.shape, x.dtype, t, labels, weight, ignore_index,
                                 label_smoothing, "cross_entropy")
        loss = 0.0 - np.sum(a * lsm, axis=-1)
        if reduction == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):   # all ignored: nan
                return np.asarray(loss.sum() / denom, dtype=x.dtype)
        return _reduce(loss, reduction)
    if labels:
        t = _check_labels(t, x.shape[-1])
        n_classes = x.shape[-1]
        rows = lsm.reshape(-1, n_classes)
        picked = rows[np.arange(rows.shape[0]), t.reshape(-1)].reshape(t.shape)
    else:
        picked = np.sum(np.asarray(t) * lsm, axis=-1)
    loss = 0.0 - picked              # not -picked: a perfect prediction is 0, not -0
    return _reduce(loss, reduction)


def _cross_entropy_vjp(g, ans, x, t, *, reduction="mean", weight=None, ignore_index=-100,
                       label_smoothing=0.0, aux=None):
    # aux: (softmax(x),) from the forward in a plain backward; None when the rule is
    # recorded (create_graph, tg.compile), where the softmax must stay a function of x.
    probs = aux[0] if aux is not None else None
    if (probs is not None and reduction == "mean" and weight is None and not label_smoothing
            and tg.needs_grad(x)):
        gx = _plain_labels_vjp(g, probs, t, ignore_index)
        if gx is not None:
            return gx, None
    if _is_label(t) and _batching.is_batched(t):
        return _batched_labels_vjp(g, x, t, reduction, weight, ignore_index, label_smoothing)
    if not _is_plain(t, weight, ignore_index, label_smoothing):
        return _weighted_cross_entropy_vjp(g, x, t, reduction, weight, ignore_index,
                                           label_smoothing, probs)
    g = _per_element(g, x.shape[:-1], reduction)
    if reduction == "none":
        g = tg.reshape(g, g.shape + (1,))          # broadcast over the class axis
    if _is_label(t):
        if not tg.needs_grad(x):
            return None, None
        if probs is not None:
            return tg._minus_one_hot(probs, t) * g, None
        return tg._softmax_minus_one_hot(x, t) * g, None    # (softmax - one_hot) * g
    gx = gt = None
    if tg.needs_grad(x):
        # d/dx -sum(t * log_softmax(x)) = softmax(x) * sum(t) - t  (sum(t) = 1 for
        # probabilities, but any non-negative weights are differentiated correctly).
        p = probs if probs is not None else tg.softmax(x, axis=-1)
        gx = (p * tg.sum(t, -1, keepdims=True) - t) * g
    if tg.needs_grad(t):
        gt = -tg.log_softmax(x, axis=-1) * g
    return gx, gt


def _plain_labels_vjp(g, probs, t, ignore_index):
    """cross_entropy's gradient (softmax - one_hot) * g / N for the common case of a
    plain backward (the forward's softmax `probs` reused, reduction 'mean', no class
    weight or smoothing) when the labels are an unbatched (N,) int64 array all in
    [0, C) and ignore_index is outside it (so no row is ignored): the arrays the general
    path's ops (_per_element's divide, _minus_one_hot, the multiply) compute, from the
    same kernels, without their dispatch (~10 Python frames and 3 ops of W2's step).
    None where the general path must decide (a label out of range or equal to
    ignore_index, other dtypes or layouts, labels or g with tangents: batched under
    tg.vmap or carrying forward-mode tangents).

    NOTE: only where aux is given (the rule is not recorded: no create_graph, so the
    result may be a constant) and nothing records (_plain_gradient: in particular
    tg.compile, whose recording runs the rule with aux too and must see its kernels to
    replay them; an array computed here would be replayed as this call's constant)."""
    if not _plain_gradient(g) or not isinstance(t, tg.Tensor) or t._tangents:
        return None          # (tangents: batched under vmap or carried by forward mode)
    p, labels, g0 = probs._data, t._data, g._data
    if (type(p) is not np.ndarray or type(labels) is not np.ndarray
            or type(g0) is not np.ndarray or p.ndim != 2 or labels.ndim != 1
            or labels.dtype != np.int64 or p.dtype not in _C_FLOATS or g0.dtype != p.dtype
            or g0.ndim != 0 or not 0 < labels.shape[0] <= 1 << 24
            or not p.flags.c_contiguous or not labels.flags.c_contiguous
            or 0 <= ignore_index < p.shape[1]):
        return None
    hot = _kernels.minus_one_hot_rows(p, labels)     # None: a label outside [0, C)
    if hot is None:
        return None
    # as _per_element's g / N: N as a 0-d array of g's dtype (exact below 2**24), which
    # is what the engine makes of the Python int there
    scale = np.divide(g0, p.dtype.type(labels.shape[0]))
    return _new_tensor(np.multiply(hot, scale, out=hot), g.device)


def _label_terms(x, t, weight, ignore_index, label_smoothing):
    """With tensor ops, for labels t whose values cannot be read (batched under tg.vmap:
    one value per example): (d_row, denom) with d_row = softmax(x) sum(a) - a, the
    derivative of each row's loss -sum(a * log_softmax(x)) in x (the coefficients a of
    _coefficients: 0 for an ignored row), and denom the 'mean' divisor (the kept rows'
    weight sum). The labels were checked by the forward (in range or ignore_index)."""
    if weight is None and not label_smoothing:
        # the plain case: softmax - one_hot at the kept rows, one fused op
        kept = tg.not_equal(t, ignore_index)
        hot = tg._softmax_minus_one_hot(x, tg.where(kept, t, 0))
        kept = kept.astype(x.dtype)
        return hot * tg.expand_dims(kept, -1), tg.sum(kept)
    a, denom = _label_coefficients(x, t, weight, ignore_index, label_smoothing, "cross_entropy")
    d_row = tg.softmax(x, axis=-1) * tg.sum(a, -1, keepdims=True) - a
    return d_row, denom


def _label_coefficients(x, t, weight, ignore_index, label_smoothing, op):
    """_coefficients for labels, with tensor ops (labels batched under tg.vmap, whose
    values cannot be read): (a, denom), a of x's shape (0 on an ignored row), denom the
    kept rows' weight sum. The labels must have been checked (in range or ignored)."""
    n_classes = x.shape[-1]
    kept = tg.not_equal(t, ignore_index)
    safe = tg.where(kept, t, 0)
    kept = kept.astype(x.dtype)
    eps = float(label_smoothing)
    w = _class_weight(weight, n_classes, x.dtype, op)
    w = None if w is None else tg.asarray(w, device=x.device)
    hot = (tg.expand_dims(safe, -1) == tg.arange(n_classes, device=x.device)).astype(x.dtype)
    row_w = kept if w is None else tg.sum(hot * w, -1) * kept
    a = (1.0 - eps) * tg.expand_dims(row_w, -1) * hot
    if eps:
        a = a + (eps / n_classes) * tg.expand_dims(kept, -1) * (1.0 if w is None else w)
    return a, tg.sum(row_w)


def _mean_factor(denom):
    """1 / denom for a 'mean' over labelled rows, 0 where denom is 0.

    NOTE: every row ignored: the loss is 0 / 0 = nan, and its gradient PyTorch's
    convention, 0 (not 0 * inf = nan). denom is a tensor (one per example under vmap)."""
    empty = denom == 0
    return tg.where(empty, 0.0, 1.0 / tg.where(empty, 1.0, denom))


def _batched_labels_vjp(g, x, t, reduction, weight, ignore_index, label_smoothing):
    # (the VJP, for labels batched under tg.vmap: see _label_terms)
    if not tg.needs_grad(x):
        return None, None
    d_row, denom = _label_terms(x, t, weight, ignore_index, label_smoothing)
    if reduction == "mean":
        g = g * _mean_factor(denom)
    elif reduction == "none":
        g = tg.expand_dims(g, -1)
    return d_row * g, None


def _weighted_coefficients(x, t, labels, weight, ignore_index, label_smoothing, what):
    """(a, w, denom) of cross_entropy's weighted path (class weight, label smoothing or
    ignored labels): the coefficients `a` of each row's loss -sum(a * log_softmax(x)) as a
    tensor on x's device, the class weight `w` there (or None), and 'mean''s denominator.
    With labels, `a` is a constant; with probabilities a = w ((1 - eps) t + eps / C) is
    differentiated in t too. `what` names the derivative in run_eagerly's reason."""
    if labels:
        # NOTE: the coefficients are built from the labels' values on the host: a
        # tg.compile replay would reuse the recording's, so such a signature runs eagerly.
        run_eagerly(f"cross_entropy: with a class weight, label smoothing or ignored labels "
                    f"its {what} is built from the labels' values")
    n_classes = x.shape[-1]
    a_np, denom = _coefficients(x.shape, x.dtype, np.asarray(t) if labels else
                                np.zeros(x.shape, x.dtype), labels, weight, ignore_index,
                                label_smoothing, "cross_entropy")
    w = None if weight is None else _class_weight(weight, n_classes, x.dtype, "cross_entropy")
    # NOTE: host constants go to x's device (a cuda tensor times an ndarray would not).
    w = None if w is None else tg.asarray(w, device=x.device)
    if labels:
        return tg.asarray(a_np, device=x.device), w, denom
    eps = float(label_smoothing)
    a = (1.0 - eps) * t + eps / n_classes
    return (a if w is None else a * w), w, denom


def _weighted_cross_entropy_vjp(g, x, t, reduction, weight, ignore_index, label_smoothing,
                                probs=None):
    # loss row = -sum(a * log_softmax(x)): d/dx = softmax(x) * sum(a) - a. With labels `a`
    # is a constant (built on the host, then put on x's device); with probabilities
    # a = w ((1 - eps) t + eps / C) is differentiated in t too.
    # NOTE: the coefficients are rebuilt from the labels here rather than saved: the
    # engine saves inputs, not kernel by-products.
    labels = _is_label(t)
    a, w, denom = _weighted_coefficients(x, t, labels, weight, ignore_index, label_smoothing,
                                         "gradient")
    if reduction == "mean":
        g = g / denom if denom else g * 0.0       # (see _mean_factor)
    elif reduction == "none":
        g = tg.reshape(g, g.shape + (1,))
    gx = gt = None
    if tg.needs_grad(x):
        p = probs if probs is not None else tg.softmax(x, axis=-1)
        gx = (p * tg.sum(a, -1, keepdims=True) - a) * g
    if not labels and tg.needs_grad(t):
        scale = (1.0 - float(label_smoothing)) * (1.0 if w is None else w)
        gt = -(tg.log_softmax(x, axis=-1) * scale) * g
    return gx, gt


def _cross_entropy_jvp(t, ans, x, target, *, reduction="mean", weight=None,
                       ignore_index=-100, label_smoothing=0.0):
    # Each row's loss is -sum(a * log_softmax(x)) with a the coefficients of
    # _coefficients (one_hot(label) on the plain path, the target itself for plain
    # probabilities): its tangent is sum((softmax(x) sum(a) - a) * tx) - sum(da * lsm)
    # (da: a's tangent, from a probability target's), then reduced as the loss is
    # ('mean' divides by the VJP's denom, the kept rows' weight sum with labels).
    tx, tt = t[0], t[1]
    labels = _is_label(target)
    w = None
    if labels and _batching.is_batched(target):          # (see _label_terms)
        if tx is None:
            return tg.zeros_like(ans)
        d_row, denom = _label_terms(x, target, weight, ignore_index, label_smoothing)
        row = tg.sum(d_row * tx, -1)
        if reduction == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):   # every row ignored
                return tg.sum(row) / denom
        return _reduce_tensor(row, reduction)
    if _is_plain(target, weight, ignore_index, label_smoothing):
        denom = max(math.prod(x.shape[:-1]), 1)
        a = None if labels else target
    else:
        a, w, denom = _weighted_coefficients(x, target, labels, weight, ignore_index,
                                             label_smoothing, "tangent")
    terms = []
    if tx is not None:
        if a is None:       # plain labels: sum(a) = 1, softmax - one_hot is the VJP's op
            d_row = tg._softmax_minus_one_hot(x, target)
        else:
            d_row = tg.softmax(x, axis=-1) * tg.sum(a, -1, keepdims=True) - a
        terms.append(tg.sum(d_row * tx, -1))
    if tt is not None and not labels:
        da = (1.0 - float(label_smoothing)) * (tt if w is None else tt * w)
        terms.append(-tg.sum(tg.log_softmax(x, axis=-1) * da, -1))
    row = _sum_terms(terms, ans)
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):    # all ignored: nan
            return tg.sum(row) / denom
    return _reduce_tensor(row, reduction)


def _cross_entropy_batch(inputs, batched, *, reduction="mean", weight=None,
                         ignore_index=-100, label_smoothing=0.0):
    """vmap's rule: the per-row losses of the whole batch in one call (reduction='none'),
    then each example's reduction. 'mean' divides by the example's number of rows, or,
    with labels, by the weight sum of its rows whose label is not ignore_index (PyTorch's
    weighted mean; computed with tensor ops, as the labels may be batched at an outer
    level)."""
    (x, t), (bx, bt) = inputs, batched
    _check_cross_entropy_args(reduction, label_smoothing)
    params = dict(reduction=reduction, weight=weight, ignore_index=ignore_index,
                  label_smoothing=label_smoothing)
    labels = _is_label(t)
    size = _batch_size(inputs, batched)
    xs, ts = _logical_shape(x, bx), _logical_shape(t, bt)
    if not xs:
        raise ValueError("logits must have at least one dimension, the class axis (last)")
    # NOTE: the kernel checks the logical shapes of one example; a shared value is
    # broadcast to the batch only after that check (a wrong target shape must not
    # broadcast into a silently different loss).
    if labels and ts != xs[:-1]:
        _check_cross_entropy(tg.zeros(xs), np.zeros(ts, np.int64))
    if not labels and ts != xs:
        _check_cross_entropy(tg.zeros(xs), np.zeros(ts))
    x = _batched_to(x, bx, size, xs)
    t = _batched_to(t, bt, size, ts)
    loss = tg.cross_entropy(x, t, **dict(params, reduction="none"))
    count = None
    if labels and reduction == "mean":
        kept = tg.not_equal(t, ignore_index)
        row_w = kept.astype(loss.dtype)
        if weight is not None:
            # (the labels are in range or ignored: the forward above checked them)
            w = tg.asarray(_class_weight(weight, xs[-1], loss.dtype, "cross_entropy"),
                           device=loss.device)
            row_w = tg.take(w, tg.where(kept, t, 0)) * row_w
        count = tg.sum(row_w, axis=tuple(range(1, row_w.ndim))) if row_w.ndim > 1 else row_w
    return _per_example(loss, reduction, count)


def _one_hot_like_batch(name):
    """The rule of _softmax_minus_one_hot(x, labels) / _minus_one_hot(p, labels): rows
    and labels both go to the batch (the kernel wants labels of the rows' shape)."""
    def rule(inputs, batched):
        (x, t), (bx, bt) = inputs, batched
        size = _batch_size(inputs, batched)
        xs, ts = _logical_shape(x, bx), _logical_shape(t, bt)
        if ts != xs[:-1]:
            raise ValueError(f"{name}: labels of shape {ts} for rows of shape {xs}; they "
                             f"must have the rows' shape without the class axis")
        return getattr(tg, name)(_batched_to(x, bx, size, xs), _batched_to(t, bt, size, ts))
    rule.__name__ = rule.__qualname__ = f"_{name}_batch"
    return rule


def _softmax_minus_one_hot_kernel(x, t):
    # One pass instead of softmax, a one-hot mask and a where (the hot part of every
    # classifier's backward); the same arithmetic: p - 1 at each label, p elsewhere.
    p = _softmax_kernel(np.asarray(x), axis=-1)
    rows = p.reshape(-1, p.shape[-1])            # p is a fresh contiguous array: a view
    # NOTE: checked here too, not only in the forward kernel: a tg.compile replay of a
    # recording without ignored labels, given a batch with -100 labels, must not index
    # rows from the end (a silent wrong gradient once there are >= 100 classes).
    t = _check_labels(t, p.shape[-1])
    rows[np.arange(rows.shape[0]), t.reshape(-1)] -= 1
    return p


def _minus_one_hot_kernel(p, t):
    """p with 1 subtracted at each row's label (p: probabilities over the last axis)."""
    if (type(p) is np.ndarray and p.ndim == 2 and p.dtype in _C_FLOATS
            and p.flags.c_contiguous and type(t) is np.ndarray and t.dtype == np.int64
            and t.ndim == 1 and t.flags.c_contiguous):
        out = _kernels.minus_one_hot_rows(p, t)      # the same bits, one pass
        if out is not None:
            return out
    out = np.array(p, copy=True, order="C")
    rows = out.reshape(-1, out.shape[-1])
    # NOTE: checked here too (see _softmax_minus_one_hot_kernel): a replayed or reused
    # call must not index rows from the end with a -100 label.
    t = _check_labels(t, out.shape[-1])
    rows[np.arange(rows.shape[0]), t.reshape(-1)] -= 1
    return out


def _minus_one_hot_vjp(h, ans, p, t):
    return h, None                   # p - one_hot(t): the identity in p


def _minus_one_hot_jvp(t, ans, p, labels):
    # p - one_hot(labels) is affine in p (not linear: jvp="linear" would subtract the
    # one-hot from the tangent too): its tangent is p's.
    return t[0] if t[0] is not None else tg.zeros_like(ans)


def _softmax_minus_one_hot_vjp(g, ans, x, t):
    # The one-hot part is constant: the Jacobian is softmax's.
    return _softmax_vjp(g, tg.softmax(x, axis=-1), x)[0], None


def _softmax_minus_one_hot_jvp(t, ans, x, labels):
    # softmax(x) minus a constant: softmax's tangent (its symmetric Jacobian, as the VJP).
    if t[0] is None:
        return tg.zeros_like(ans)
    return _softmax_vjp(t[0], tg.softmax(x, axis=-1), x)[0]


# ---------------------------------------------------------------------------------------
# binary_cross_entropy_with_logits, mse_loss
# ---------------------------------------------------------------------------------------

def _check_same_shape(x, t, name):
    if not isinstance(t, numbers.Number) and _shape_of(t) != _shape_of(x):
        raise ValueError(
            f"{name} of shape {_shape_of(x)} and target of shape {_shape_of(t)} must have the "
            f"same shape (broadcasting them would silently compute a different loss)")


def _bce_logits_kernel(x, t, *, reduction="mean"):
    _check_reduction(reduction)
    _check_same_shape(x, t, "logits")
    x = np.asarray(x)
    # NOTE: log(1 + exp(-x)) overflows for x << 0 and log(sigmoid) underflows to -inf for
    # confident predictions; this form is exact and finite everywhere.
    loss = np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x)))
    return _reduce(loss, reduction)


def _bce_logits_vjp(g, ans, x, t, *, reduction="mean"):
    g = _per_element(g, x.shape, reduction)
    # NOTE: the derivative sigmoid(x) - t is smooth; differentiating the kernel's formula
    # op by op would give -t instead of 0.5 - t at x == 0 (relu and abs have kinks there).
    return (g * (tg.sigmoid(x) - t) if tg.needs_grad(x) else None,
            -g * x if tg.needs_grad(t) else None)


def _bce_logits_jvp(t, ans, x, target, *, reduction="mean"):
    # per element (sigmoid(x) - target) tx - x ttarget, reduced as the loss
    tx, tt = t[0], t[1]
    terms = [(tg.sigmoid(x) - target) * tx if tx is not None else None,
             -x * tt if tt is not None else None]
    return _reduce_tensor(_sum_terms(terms, x), reduction)


def _bce_logits_batch(inputs, batched, *, reduction="mean"):
    # the per-element losses of the whole batch in one call, then each example's reduction
    (x, t), (bx, bt) = inputs, batched
    _check_reduction(reduction)
    size = _batch_size(inputs, batched)
    xs = _logical_shape(x, bx)
    if not isinstance(t, numbers.Number):
        _check_same_shape(tg.zeros(xs), tg.zeros(_logical_shape(t, bt)), "logits")
        t = _batched_to(t, bt, size, xs)
    x = _batched_to(x, bx, size, xs)
    loss = tg.binary_cross_entropy_with_logits(x, t, reduction="none")
    return _per_example(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """PyTorch's ``F.binary_cross_entropy_with_logits``: the op
    ``tg.binary_cross_entropy_with_logits`` (fused, stable) when neither weight is given;
    with ``weight`` (a rescaling of each element's loss, broadcast to the input) or
    ``pos_weight`` (the positive term's weight, broadcast along the last axis: one per
    class), PyTorch's per-element loss::

        (1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x)        (times weight)

    with ``softplus(-x) = -logsigmoid(x)`` computed stably. The weights take the input's
    dtype (a float64 weight does not promote a float32 loss) and get no gradient.

    >>> import tapegrad as tg
    >>> F = tg.nn.functional
    >>> x, t = tg.zeros(2), tg.tensor([1.0, 0.0])
    >>> round(F.binary_cross_entropy_with_logits(x, t, pos_weight=tg.tensor([3.0])).item(), 6)
    1.386294
    """
    if size_average is not None or reduce is not None:
        raise TypeError("binary_cross_entropy_with_logits: size_average= and reduce= are "
                        "deprecated in PyTorch and not supported; use reduction='mean' | "
                        "'sum' | 'none'")
    if weight is None and pos_weight is None:
        return tg.binary_cross_entropy_with_logits(input, target, reduction=reduction)
    _check_reduction(reduction)
    x, t = tg.asarray(input), tg.asarray(target)
    if x.shape != t.shape:
        raise ValueError(f"binary_cross_entropy_with_logits: target shape {t.shape} must "
                         f"equal input shape {x.shape}")
    for name, w in (("weight", weight), ("pos_weight", pos_weight)):
        reason = derivative_reason(w)
        if reason is not None:
            raise TypeError(f"binary_cross_entropy_with_logits: {name} {reason}; it is a "
                            f"constant here (detach it), as a buffer of the module")
    softplus_neg = -tg.logsigmoid(x)
    if pos_weight is None:
        loss = (1.0 - t) * x + softplus_neg
    else:
        pos_weight = tg.asarray(pos_weight).detach().astype(x.dtype)
        loss = (1.0 - t) * x + (1.0 + (pos_weight - 1.0) * t) * softplus_neg
    if weight is not None:
        loss = loss * tg.asarray(weight).detach().astype(x.dtype)
    return _reduce_tensor(loss, reduction)


def mse_loss(input, target, *, reduction="mean", weight=None):
    """Mean squared error ``(input - target) ** 2``, reduced by `reduction` ('mean', 'sum'
    or 'none'). input and target must have the same shape (target may be a number).
    ``weight`` (PyTorch's, same shape as input) scales each element's error, and 'mean'
    is then ``sum(weight * error) / sum(weight)``, as torch's.

    >>> import tapegrad as tg
    >>> x = tg.tensor([1., 2., 4.], requires_grad=True)
    >>> tg.mse_loss(x, tg.tensor([1., 1., 1.]))
    tensor(3.33333333, grad_fn=<mean>)
    >>> tg.mse_loss(x, 1.0, reduction="none").tolist()
    [0.0, 1.0, 9.0]
    """
    if isinstance(input, (list, tuple)):
        input = np.asarray(input)
    if isinstance(target, (list, tuple)):
        target = np.asarray(target)
    try:
        _check_reduction(reduction)
        _check_same_shape(input, target, "input")
    except ValueError as exc:
        raise ValueError(f"mse_loss: {exc}") from None
    squared = tg.square(tg.subtract(input, target))
    if weight is None:
        return _reduce_tensor(squared, reduction)
    if np.shape(weight) != np.shape(input):
        raise ValueError(f"mse_loss: weight shape {np.shape(weight)} must equal input shape "
                         f"{np.shape(input)} (as torch's)")
    weighted = squared * weight
    if reduction == "mean":
        return tg.sum(weighted) / tg.sum(weight)
    return _reduce_tensor(weighted, reduction)


# ---------------------------------------------------------------------------------------
# linear (the op behind tg.nn.Linear), dropout (a plain function: it is random)
# ---------------------------------------------------------------------------------------

def _rows_matmul(x, m):
    """x @ m for a 2-D m, with x's leading axes folded into the rows of ONE 2-D product.

    NOTE: np.matmul runs a (B, n, k) @ (k, m) product as B separate small GEMMs (and a
    transposed view of x as B strided ones): at W8's sizes ((16, 64, 128) @ (128, 512))
    that is ~1.8x the time of the single (1024, 128) @ (128, 512) GEMM. The reshape is
    free for a contiguous x and one copy otherwise, which costs less than the product."""
    if x.ndim <= 2:
        return np.matmul(x, m)
    lead = x.shape[:-1]          # NOTE: rows spelled out: -1 is ambiguous for 0 features
    return np.matmul(x.reshape(math.prod(lead), x.shape[-1]), m).reshape(lead + (m.shape[-1],))


def _linear_kernel(x, w, b=None):
    x, w = np.asarray(x), np.asarray(w)
    _check_linear_shapes(x.shape, w.shape)
    out = _rows_matmul(x, w.T)
    if b is None:
        return out
    if np.shape(b) == out.shape[-1:] and np.result_type(out, b) == out.dtype:
        return np.add(out, b, out=out)     # out is fresh: adding in place saves a copy
    return out + b                         # NumPy's promotion and broadcasting


def _linear_vjp(g, ans, x, w, *b):
    gx = None
    if tg.needs_grad(x):
        # NOTE: g (..., out) @ w as one 2-D GEMM over all rows (see _rows_matmul); the
        # reshapes are views for the contiguous gradients backward produces.
        gx = g @ w if g.ndim <= 2 else tg.reshape(
            tg.reshape(g, (math.prod(g.shape[:-1]), w.shape[0])) @ w,
            g.shape[:-1] + (w.shape[1],))
    gw = None
    if tg.needs_grad(w):
        if x.ndim == 2 and g.ndim == 2:
            gw = tg.transpose(g) @ x
        else:   # a vector, batch axes, or a bias that broadcast x: rows flattened into one
            rows = math.prod(g.shape[:-1])        # not -1: ambiguous for 0 features
            xs = g.shape[:-1] + (w.shape[1],)
            xb = x if x.shape == xs else tg.broadcast_to(x, xs)
            gw = tg.transpose(tg.reshape(g, (rows, w.shape[0]))) @ tg.reshape(
                xb, (rows, w.shape[1]))
    if b:
        return gx, gw, (g if tg.needs_grad(b[0]) else None)   # summed to b's shape
    return gx, gw


def _linear_jvp(t, ans, x, w, *b):
    # bilinear in (x, w) plus the bias: linear(tx, w) + linear(x, tw) + tb (each
    # broadcasts to ans)
    tx, tw = t[0], t[1]
    tb = t[2] if b else None
    return _sum_terms([tg.linear(tx, w) if tx is not None else None,
                       tg.linear(x, tw) if tw is not None else None, tb], ans)


def _check_linear_shapes(xs, ws):
    if len(ws) != 2 or not xs or xs[-1] != ws[1]:
        raise ValueError(
            f"weight must be (out_features, in_features) with in_features equal to the last "
            f"axis of x: x {xs} and weight {ws} do not fit")


def _linear_batch(inputs, batched):
    """vmap's rule. A shared weight (the usual case: examples through one layer) is one
    linear call on the stacked x, the batch folded into its rows; a batched weight (an
    ensemble of layers) is one stacked matmul x @ w^T, the bias added after."""
    x, w = inputs[:2]
    bx, bw = batched[:2]
    size = _batch_size(inputs, batched)
    xs, ws = _logical_shape(x, bx), _logical_shape(w, bw)
    _check_linear_shapes(xs, ws)
    has_b = len(inputs) == 3
    bb = has_b and batched[2]
    lo = len(xs)                   # the logical output's ndim: x's, the last axis replaced
    if not bw:
        # NOTE: a shared bias with more axes than the output broadcasts the output (NumPy
        # from the right): inside the kernel it would broadcast against the batch axis.
        if bx and has_b and not bb and np.ndim(inputs[2]) <= lo:
            return tg.linear(x, w, inputs[2])
        out = tg.linear(x, w)
    else:
        wt = tg.swapaxes(w, -1, -2)                              # (B, in, out)
        if bx and len(xs) == 1:
            x = tg.reshape(x, (size, 1) + xs)                    # a row per example
        nd = max(len(xs), 2)
        if nd > 2:
            wt = tg.reshape(wt, (size,) + (1,) * (nd - 2) + tuple(wt.shape[1:]))
        out = tg.matmul(x, wt)
        out_shape = xs[:-1] + (ws[0],)
        if tuple(out.shape) != (size,) + out_shape:
            out = tg.reshape(out, (size,) + out_shape)
    if not has_b:
        return out
    b = inputs[2]
    nd = max(lo, b.ndim - 1 if bb else np.ndim(b))
    if bb:
        b = pad_batched(b, nd)
    if bx or bw:
        out = pad_batched(out, nd)
    return out + b


def linear(x, weight, bias=None):
    """``x @ weight.T + bias`` (PyTorch's ``F.linear``; `weight` is (out, in)), as one op
    (``tg.linear``) with one gradient rule instead of a transpose, a matmul and an add.

    >>> import tapegrad as tg
    >>> import tapegrad_nn.functional as F
    >>> x = tg.ones((2, 3), requires_grad=True)
    >>> y = F.linear(x, tg.ones((4, 3)), tg.zeros(4))
    >>> y.shape, y.grad_fn.name
    ((2, 4), 'linear')

    A float32 input to float64 weights (or the reverse) raises TypeError, as PyTorch
    refuses it (the op ``tg.linear`` itself keeps NumPy's promotion).
    """
    if not hasattr(x, "dtype"):
        x = tg.asarray(x)
    check_float_operands("linear", x, ("weight", weight), ("bias", bias))
    if bias is None:
        return tg.linear(x, weight)
    return tg.linear(x, weight, bias)


def bilinear(input1, input2, weight, bias=None):
    """``y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]``, as
    PyTorch's ``F.bilinear`` (composed with ``tg.einsum``, so it differentiates twice).

    >>> import tapegrad as tg
    >>> import tapegrad_nn.functional as F
    >>> F.bilinear(tg.ones((2, 3)), tg.ones((2, 4)), tg.ones((5, 3, 4))).shape
    (2, 5)
    """
    input1, input2, weight = tg.asarray(input1), tg.asarray(input2), tg.asarray(weight)
    check_float_operands("bilinear", input1, ("input2", input2), ("weight", weight),
                         ("bias", bias), input_name="input1")
    if weight.ndim != 3 or input1.shape[-1:] != weight.shape[1:2] or \
            input2.shape[-1:] != weight.shape[2:3] or input1.shape[:-1] != input2.shape[:-1]:
        raise ValueError(f"bilinear: expected weight (out, in1, in2), input1 (..., in1) and "
                         f"input2 (..., in2) with the same leading axes; got input1 "
                         f"{input1.shape}, input2 {input2.shape}, weight {weight.shape}")
    y = tg.einsum("...i,oij,...j->...o", input1, weight, input2)
    return y if bias is None else y + bias


def dropout(input, p=0.5, training=True, inplace=False):
    """Inverted dropout: each element is zeroed with probability `p` and the others are
    scaled by ``1 / (1 - p)``, so the expectation is unchanged; identity when
    ``training`` is False or p == 0. The mask comes from ``tg.random.rand`` on x's device
    (reproducible under ``tg.manual_seed``). ``torch.nn.functional.dropout``'s signature;
    ``inplace=True`` is refused (the result is always a new tensor: a port that relied on
    the input being overwritten would silently keep the undropped values).

    >>> import tapegrad as tg
    >>> import tapegrad_nn.functional as F
    >>> tg.manual_seed(0)
    >>> F.dropout(tg.ones(6), p=0.5).tolist()
    [2.0, 0.0, 0.0, 0.0, 2.0, 2.0]
    >>> F.dropout(tg.ones(3), p=0.5, training=False).tolist()
    [1.0, 1.0, 1.0]
    """
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be a probability in [0, 1], got {p!r}")
    if inplace:
        raise ValueError("dropout: inplace=True is not supported (tapegrad computes out of "
                         "place); write x = F.dropout(x, p, training)")
    x = tg.asarray(input)
    if not training or p == 0.0:
        return x
    if x.dtype.kind != "f":
        raise TypeError(f"dropout: input must be floating point, got {x.dtype}")
    if p == 1.0:
        return x * 0.0
    # The mask is a constant (scale where kept, 0 where dropped): one recorded multiply.
    keep = tg.random.rand(*x.shape, dtype=x.dtype, device=x.device) >= p
    mask = tg.where(keep, 1.0 / (1.0 - p), 0.0).astype(x.dtype)
    return x * mask


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

def _rng(seed):
    return np.random.default_rng(seed)


def _logits(*shape, seed=0, scale=2.0):
    return scale * _rng(seed + 31 * len(shape) + sum(shape)).standard_normal(shape)


def _labels(n_classes, *shape, seed=0):
    return _rng(seed + 7).integers(0, n_classes, shape)


def _probabilities(*shape, seed=0):
    e = np.exp(_logits(*shape, seed=seed + 100))
    return e / e.sum(-1, keepdims=True)


_SOFTMAX_SAMPLES = [
    tg.Sample(_logits(3, 4)),
    tg.Sample(_logits(3, 4), axis=0),
    tg.Sample(_logits(2, 3, 4), 1),
    tg.Sample(_logits(2, 3, 4), axis=(0, 2)),
    tg.Sample(_logits(5)),
    tg.Sample(_logits(3, 4), axis=None),
    tg.Sample(np.array([[20.0, -30.0, 0.5], [1.0, 1.0, 1.0]])),
]

_LOGSUMEXP_SAMPLES = [
    tg.Sample(_logits(3, 4)),
    tg.Sample(_logits(3, 4), axis=1),
    tg.Sample(_logits(3, 4), -1, keepdims=True),
    tg.Sample(_logits(2, 3, 4), axis=(0, 2)),
    tg.Sample(_logits(2, 3, 4), keepdims=True),
    tg.Sample(np.array([[40.0, -30.0, 0.5], [1.0, 1.0, 1.0]]), axis=1),
]

_CROSS_ENTROPY_SAMPLES = [
    tg.Sample(_logits(4, 3), _labels(3, 4)),
    tg.Sample(_logits(4, 3), _labels(3, 4), reduction="sum"),
    tg.Sample(_logits(4, 3), _labels(3, 4), reduction="none"),
    tg.Sample(_logits(2, 3, 5), _labels(5, 2, 3)),
    tg.Sample(_logits(5), np.array(2)),
    tg.Sample(_logits(4, 3), _probabilities(4, 3)),
    tg.Sample(_logits(4, 3), _probabilities(4, 3), reduction="none"),
    tg.Sample(_logits(2, 3, 4), 0.5 * _probabilities(2, 3, 4), reduction="sum"),
    tg.Sample(_logits(4, 3), _labels(3, 4), weight=np.array([0.2, 1.0, 3.0])),
    tg.Sample(_logits(5, 3), np.array([0, 2, -100, 1, 2]), ignore_index=-100,
              weight=np.array([0.5, 1.0, 2.0])),
    tg.Sample(_logits(5, 3), np.array([0, 2, 1, 1, 2]), ignore_index=1, reduction="none"),
    tg.Sample(_logits(2, 3, 4), _labels(4, 2, 3), label_smoothing=0.2, reduction="sum"),
    tg.Sample(_logits(4, 3), _labels(3, 4), label_smoothing=0.1,
              weight=np.array([0.2, 1.0, 3.0])),
    tg.Sample(_logits(4, 3), _probabilities(4, 3), label_smoothing=0.3,
              weight=np.array([0.2, 1.0, 3.0])),
    tg.Sample(_logits(4, 3), _probabilities(4, 3), label_smoothing=0.3, reduction="none"),
]

_SOFTMAX_MINUS_ONE_HOT_SAMPLES = [
    tg.Sample(_logits(4, 3), _labels(3, 4)),
    tg.Sample(_logits(2, 3, 5), _labels(5, 2, 3)),
    tg.Sample(_logits(5), np.array(2)),
]

_BCE_SAMPLES = [
    tg.Sample(_logits(4, 3), _rng(1).uniform(0, 1, (4, 3))),
    tg.Sample(_logits(5), _rng(2).integers(0, 2, 5).astype(np.float64), reduction="sum"),
    tg.Sample(np.array([-30.0, -2.0, 0.0, 2.0, 30.0]), _rng(3).uniform(0, 1, 5),
              reduction="none"),
    tg.Sample(_logits(3, 2), 1.0),
]

_LINEAR_SAMPLES = [
    tg.Sample(_logits(4, 3), _logits(5, 3, seed=1), _logits(5, seed=2)),
    tg.Sample(_logits(4, 3), _logits(5, 3, seed=1)),
    tg.Sample(_logits(3), _logits(2, 3, seed=1), _logits(2, seed=2)),
    tg.Sample(_logits(2, 4, 3), _logits(5, 3, seed=1), _logits(5, seed=2)),
    tg.Sample(_logits(2, 4, 3), _logits(5, 3, seed=1)),
    tg.Sample(_logits(4, 3), _logits(5, 3, seed=1), 0.5),
]

_MSE_SAMPLES = [
    tg.Sample(_logits(4, 3), _logits(4, 3, seed=1)),
    tg.Sample(_logits(5), _logits(5, seed=2), reduction="sum"),
    tg.Sample(_logits(2, 3), _logits(2, 3, seed=3), reduction="none"),
    tg.Sample(_logits(3), 0.5),
]


def register(registry):
    """Register this plugin's ops and functions with `registry` (called by the
    ``tapegrad_register_ops`` hook in ``tapegrad_nn.plugin``)."""
    reg = registry.register_op
    _conv.register(registry)
    _pooling.register(registry)
    _normalization.register(registry)
    _activations.register(registry)
    _attention.register(registry)
    _losses.register(registry)
    _recurrent_ops.register(registry)
    reg("softmax", kernels={"cpu": _softmax_kernel}, vjp=_softmax_vjp,
        jvp=_softmax_jvp, params=("axis",), batch=_softmax_like_batch("softmax"),
        save_inputs=(False,), samples=_SOFTMAX_SAMPLES,
        doc="softmax(x, axis=-1): exp(x) / sum(exp(x), axis), computed with the maximum "
            "subtracted first (no overflow). `axis` may be an int, a tuple or None (all).")
    reg("log_softmax", kernels={"cpu": _log_softmax_aux_kernel}, vjp=_log_softmax_vjp,
        jvp=_log_softmax_jvp, batch=_softmax_like_batch("log_softmax"),
        params=("axis",), save_inputs=(False,), samples=_SOFTMAX_SAMPLES, aux=1,
        doc="log_softmax(x, axis=-1): x - logsumexp(x, axis), finite for any finite x "
            "(never log(softmax(x)), which is -inf where softmax underflows).")
    # NOTE: the op is `_logsumexp` (x only: one kernel per device); the public
    # `tg.logsumexp` is the function above, which adds scipy's scale factors b=.
    reg("_logsumexp", kernels={"cpu": _logsumexp_kernel}, vjp=_logsumexp_vjp,
        jvp=_logsumexp_jvp, batch="reduce",
        params=("axis",), method=False, samples=_LOGSUMEXP_SAMPLES,
        doc="_logsumexp(x, axis=None, keepdims=False): log(sum(exp(x), axis)) computed "
            "stably, the op behind tg.logsumexp without b; the gradient is the softmax "
            "over `axis`.")
    reg("cross_entropy", kernels={"cpu": _cross_entropy_aux_kernel}, vjp=_cross_entropy_vjp,
        jvp=_cross_entropy_jvp, batch=_cross_entropy_batch,
        params=(), save_ans=False, method=False, samples=_CROSS_ENTROPY_SAMPLES, aux=1,
        doc="cross_entropy(logits, target, *, reduction='mean', weight=None, "
            "ignore_index=-100, label_smoothing=0.0): -sum(target * "
            "log_softmax(logits)) over the class axis (the last). `target` is either integer "
            "class labels of the logits' shape without the class axis (no gradient; out of "
            "range labels raise IndexError) or class probabilities of the logits' shape "
            "(differentiable). reduction: 'mean' over the batch, 'sum' or 'none'. weight "
            "(C class weights), ignore_index (labels only) and label_smoothing are "
            "PyTorch's, with its weighted mean (divided by the sum of the kept rows' "
            "weights); calls with them run on the CPU kernel only.")
    reg("_softmax_minus_one_hot", kernels={"cpu": _softmax_minus_one_hot_kernel},
        vjp=_softmax_minus_one_hot_vjp,
        jvp=_softmax_minus_one_hot_jvp, batch=_one_hot_like_batch("_softmax_minus_one_hot"),
        differentiable=(0,), save_inputs=(True, False),
        save_ans=False, method=False, samples=_SOFTMAX_MINUS_ONE_HOT_SAMPLES,
        doc="_softmax_minus_one_hot(logits, labels): softmax over the last axis with 1 "
            "subtracted at each row's label, the gradient of cross_entropy with integer "
            "labels (labels are checked by cross_entropy, which calls it from its rule).")
    reg("_minus_one_hot", kernels={"cpu": _minus_one_hot_kernel}, vjp=_minus_one_hot_vjp,
        jvp=_minus_one_hot_jvp, batch=_one_hot_like_batch("_minus_one_hot"),
        differentiable=(0,), save_inputs=(False, False), save_ans=False, method=False,
        samples=[tg.Sample(s.args[0], s.args[1]) for s in _SOFTMAX_MINUS_ONE_HOT_SAMPLES],
        doc="_minus_one_hot(probs, labels): probs with 1 subtracted at each row's label "
            "(cross_entropy's gradient from the forward's softmax).")
    reg("_softmax_backward", kernels={"cpu": _softmax_backward_kernel},
        vjp=_softmax_backward_vjp,
        jvp=_softmax_backward_jvp, batch=_softmax_backward_like_batch("_softmax_backward"),
        params=("axis",), method=False,
        samples=[tg.Sample(_logits(*s.args[0].shape, seed=5), _softmax_kernel(s.args[0], *s.args[1:2], **s.kwargs),
                           *s.args[1:2], **s.kwargs) for s in _SOFTMAX_SAMPLES]
        + [tg.Sample(_logits(1, 4, seed=7), _softmax_kernel(_logits(3, 4)))],   # broadcast g
        doc="_softmax_backward(g, y, axis=-1): y * (g - sum(g * y, axis)), softmax's "
            "gradient from its output in one kernel; differentiable in g and y.")
    reg("_log_softmax_backward", kernels={"cpu": _log_softmax_backward_kernel},
        vjp=_log_softmax_backward_vjp,
        jvp=_log_softmax_backward_jvp,
        batch=_softmax_backward_like_batch("_log_softmax_backward"),
        params=("axis",), method=False, save_ans=False,
        samples=[tg.Sample(_logits(*s.args[0].shape, seed=6), _softmax_kernel(s.args[0], *s.args[1:2], **s.kwargs),
                           *s.args[1:2], **s.kwargs) for s in _SOFTMAX_SAMPLES]
        + [tg.Sample(_logits(1, 4, seed=8), _softmax_kernel(_logits(3, 4)))],   # broadcast g
        doc="_log_softmax_backward(g, p, axis=-1): g - p * sum(g, axis), log_softmax's "
            "gradient from the softmax p in one kernel; differentiable in g and p.")
    reg("binary_cross_entropy_with_logits", kernels={"cpu": _bce_logits_kernel},
        vjp=_bce_logits_vjp,
        jvp=_bce_logits_jvp, batch=_bce_logits_batch, params=(), save_ans=False, method=False,
        samples=_BCE_SAMPLES,
        doc="binary_cross_entropy_with_logits(logits, target, *, reduction='mean'): "
            "-(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))) computed as max(x, 0) - x t "
            "+ log1p(exp(-|x|)); target (probabilities, same shape) is differentiable.")
    reg("linear", kernels={"cpu": _linear_kernel}, vjp=_linear_vjp,
        jvp=_linear_jvp, batch=_linear_batch, save_ans=False,
        method=False, samples=_LINEAR_SAMPLES,
        doc="linear(x, weight[, bias]): x @ weight.T + bias with weight of shape (out, in), "
            "as PyTorch's F.linear (the layer tg.nn.Linear); one op instead of three.")
    registry.register_function("mse_loss", mse_loss, method=False, samples=_MSE_SAMPLES)
    registry.register_function("logsumexp", logsumexp, method=True, samples=_LOGSUMEXP_SAMPLES + [
        tg.Sample(_logits(3, 4), None, _rng(4).uniform(0.5, 2.0, (3, 4))),
        tg.Sample(_logits(3, 4), 1, np.array([0.7, 0.0, 1.5, 0.0]), keepdims=True),
        tg.Sample(_logits(2, 3, 4), (0, 2), np.array([[1.0], [0.2], [2.5]])),
        tg.Sample(_logits(3, 4), b=0.5)])


# The losses module uses this module's helpers, so it is imported last.
from . import losses as _losses  # noqa: E402
from .losses import kl_div  # noqa: E402,F401  (tg.kl_div is scipy.special's)
_FORWARDED += _losses.NAMES
__all__ += [*_losses.NAMES, "kl_div"]
