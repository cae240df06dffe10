"""Pooling, im2col and resampling: ``max_pool1d/2d``, ``avg_pool1d/2d``,
``adaptive_avg_pool1d/2d``, ``adaptive_max_pool2d``, ``unfold``/``fold``,
``pixel_shuffle``/``pixel_unshuffle`` and ``interpolate``/``upsample``, with
``torch.nn.functional``'s names, argument order and semantics (NCL / NCHW inputs, or
unbatched CL / CHW).

Six ops have their own kernels; everything else is composed of them and of plain ops:

- ``_unfold(x, *, ksize, stride, padding, dilation)``: the windows of x (N, C, *S) padded
  with zeros, (N, C, *K, *L) (im2col); ``_fold`` (N, C, *K, *L) -> (N, C, *size) sums the
  windows back (col2im). Both are linear and each is the other's adjoint, so each one's
  rule is the other op and every order of derivative is exact.
- ``_max_pool_indices`` / ``_adaptive_max_pool_indices``: the flat (per plane) index of
  each window's maximum, an integer tensor, not differentiable: on ties the first maximum
  in window order (row-major), NaN counting as the maximum, and never a position of the
  padding (an all -inf window gives its first entry inside the input), as PyTorch. The
  kernel makes one pass per window offset over strided views (a running maximum, then the
  first offset that hits), not an argmax over a short last axis.
- ``_pool_gather(x, idx)`` / ``_pool_scatter(g, idx, size=S)``: the pooled values at those
  indices, and its adjoint (zeros with g added at them); each is the other's gradient.
  ``overlap=False`` (windows that share no entry, as MaxPool2d(2)) makes the scatter a
  plain write; overlapping windows sum with ``np.add.at`` on one flat index.

Average pooling is ``_unfold`` summed over the window and divided by the divisor (its
gradient: a scaled ``_fold``); adaptive average pooling and linear/bilinear interpolation
are matmuls with constant per-axis averaging/interpolation matrices; nearest
interpolation and pixel (un)shuffle are indexing and reshapes.

>>> import tapegrad as tg
>>> x = tg.tensor([[[[1., 2., 5.], [3., 4., 0.]]]], requires_grad=True)
>>> tg.max_pool2d(x, 2, ceil_mode=True).tolist()
[[[[4.0, 5.0]]]]
>>> tg.max_pool2d(x, 2, ceil_mode=True).sum().backward()
>>> x.grad.tolist()
[[[[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]]]
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import tapegrad as tg
from numpy.lib.stride_tricks import sliding_window_view

from . import _kernels
from ._c_kernel_args import c_kernel_ok as _c_kernel_ok
from .conv import _batch_into_n, _ints

__all__ = ["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_max_pool2d", "unfold", "fold", "pixel_shuffle",
           "pixel_unshuffle", "interpolate", "upsample", "register"]

NAMES = tuple(n for n in __all__ if n != "register")


# ---------------------------------------------------------------------------------------
# Kernels (arrays in, array out)
# ---------------------------------------------------------------------------------------

def _windows(x, ksize, stride, padding, dilation, fill):
    """The view (N, C, *L, *K) of x (N, C, *S) padded by `padding` ((lo, hi) pairs) with
    `fill`."""
    nd = len(ksize)
    if any(lo or hi for lo, hi in padding):
        x = np.pad(x, ((0, 0), (0, 0)) + tuple(padding), constant_values=fill)
    extent = tuple(d * (k - 1) + 1 for k, d in zip(ksize, dilation))
    v = sliding_window_view(x, extent, axis=tuple(range(2, 2 + nd)))
    return v[(slice(None),) * 2 + tuple(slice(None, None, s) for s in stride)
             + tuple(slice(None, None, d) for d in dilation)]


def _unfold_kernel(x, *, ksize, stride, padding, dilation):
    nd = len(ksize)
    v = _windows(x, ksize, stride, padding, dilation, 0)
    return np.ascontiguousarray(v.transpose((0, 1) + tuple(range(2 + nd, 2 + 2 * nd))
                                            + tuple(range(2, 2 + nd))))


def _fold_kernel(cols, *, size, stride, padding, dilation):
    nd = len(size)
    k, out = cols.shape[2:2 + nd], cols.shape[2 + nd:]
    expected = tuple((s + lo + hi - d * (kk - 1) - 1) // st + 1
                     for s, kk, st, (lo, hi), d in zip(size, k, stride, padding, dilation))
    if expected != out:
        raise ValueError(f"_fold: size {tuple(size)} with kernel {k} gives {expected} "
                         f"windows, but the input {cols.shape} has {out}")
    n, c = cols.shape[:2]
    xp = np.zeros((n, c) + tuple(s + lo + hi for s, (lo, hi) in zip(size, padding)), cols.dtype)
    for idx in np.ndindex(*k):
        target = tuple(slice(i * d, i * d + (l - 1) * s + 1, s)
                       for i, d, l, s in zip(idx, dilation, out, stride))
        xp[(slice(None),) * 2 + target] += cols[(slice(None),) * 2 + idx]
    crop = tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, padding))
    return np.ascontiguousarray(xp[(slice(None),) * 2 + crop])


def _max_pool_indices_kernel(x, *, ksize, stride, padding, dilation):
    nd = len(ksize)
    size = x.shape[2:]
    if nd in (1, 2) and _c_kernel_ok(x):
        # One C pass over each window (1-d pooling as planes of height 1).
        k, st, d, pads = ((1,) * (2 - nd) + tuple(ksize), (1,) * (2 - nd) + tuple(stride),
                          (1,) * (2 - nd) + tuple(dilation), ((0, 0),) * (2 - nd) + tuple(padding))
        planes = np.ascontiguousarray(x).reshape((-1,) + (1,) * (2 - nd) + tuple(size))
        out = tuple((s + lo + hi - dd * (kk - 1) - 1) // ss + 1
                    for s, kk, ss, (lo, hi), dd in zip(planes.shape[1:], k, st, pads, d))
        if min(out) > 0 and planes.shape[0] > 0:
            flat = _kernels.max_pool2d_indices(planes, k[0], k[1], st[0], st[1], pads[0][0],
                                               pads[1][0], d[0], d[1], out[0], out[1])
            return flat.reshape(x.shape[:2] + out[2 - nd:])
    padded = any(lo or hi for lo, hi in padding)
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(padding), constant_values=-np.inf) if padded else x
    out = tuple((s + lo + hi - d * (k - 1) - 1) // st + 1
                for s, k, st, (lo, hi), d in zip(size, ksize, stride, padding, dilation))
    plane = tuple(math.prod(size[a + 1:]) for a in range(nd))       # row-major strides of S
    # NOTE: one pass per window offset over (N, C, *L) strided views, not an argmax over
    # a short last axis (which NumPy runs as one tiny loop per window: 5x slower).
    offsets = list(np.ndindex(*ksize))

    def view(idx, a=xp):
        return a[(slice(None),) * 2 + tuple(slice(i * d, i * d + (l - 1) * s + 1, s)
                                             for i, d, l, s in zip(idx, dilation, out, stride))]

    best = view(offsets[0]).copy()
    for idx in offsets[1:]:
        np.maximum(best, view(idx), out=best)                        # NaN propagates
    has_nan = bool(np.isnan(best).any())
    # Padding never wins (PyTorch): where a window's maximum is -inf, its first entry
    # inside the input is the argmax, not a -inf of the padding before it.
    valid = np.pad(np.ones(size, bool), tuple(padding)) if padded else None
    # The first maximum in window order (row-major), or the first NaN (PyTorch's choice):
    # walk the offsets backwards, each hit overwriting the later ones.
    flat = np.empty(best.shape, np.int64)
    for pos, idx in enumerate(reversed(offsets)):
        v = view(idx)
        hit = (v == best) | np.isnan(v) if has_nan else v == best
        if valid is not None:
            hit &= valid[tuple(slice(i * d, i * d + (l - 1) * s + 1, s)
                               for i, d, l, s in zip(idx, dilation, out, stride))]
        offset = sum(i * d * p for i, d, p in zip(idx, dilation, plane))
        if pos == 0:
            flat.fill(offset)        # every window has an entry that hits: a placeholder
        else:
            np.copyto(flat, offset, where=hit)
    base = np.zeros(out, np.int64)
    for a in range(nd):
        base += ((np.arange(out[a]) * stride[a] - padding[a][0]) * plane[a]).reshape(
            (-1,) + (1,) * (nd - 1 - a))
    flat += base
    return flat


def _adaptive_bounds(n_in, n_out):
    """PyTorch's adaptive windows: [floor(i*n_in/n_out), ceil((i+1)*n_in/n_out))."""
    return [((i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)) for i in range(n_out)]


def _adaptive_max_pool_indices_kernel(x, *, output_size):
    n, c, h, w = x.shape
    flat = np.empty((n, c) + tuple(output_size), np.int64)
    for i, (h0, h1) in enumerate(_adaptive_bounds(h, output_size[0])):
        for j, (w0, w1) in enumerate(_adaptive_bounds(w, output_size[1])):
            arg = x[:, :, h0:h1, w0:w1].reshape(n, c, -1).argmax(axis=-1)
            flat[:, :, i, j] = (h0 + arg // (w1 - w0)) * w + w0 + arg % (w1 - w0)
    return flat


def _flat_index(idx, plane):
    """Per-plane indices idx (N, C, *L) as indices into the whole (N, C, plane) array,
    flattened (fancy indexing with one flat index is 2x faster than take/put_along_axis)."""
    n, c = idx.shape[:2]
    rows = idx.reshape(n * c, math.prod(idx.shape[2:]))             # not -1: N may be 0
    return (rows + (np.arange(n * c) * plane)[:, None]).reshape(-1)


def _c_planes(a, idx):
    """(a, idx) as (planes, entries) C-contiguous arrays for the C gather/scatter, or
    None when those cannot take them (other dtypes, an empty batch)."""
    if not (_c_kernel_ok(a) and type(idx) is np.ndarray and idx.dtype == np.int64
            and a.ndim >= 2 and a.ndim == idx.ndim and a.shape[:2] == idx.shape[:2]
            and a.shape[0] * a.shape[1] > 0):
        return None
    planes = a.shape[0] * a.shape[1]
    return (np.ascontiguousarray(a).reshape(planes, -1),
            np.ascontiguousarray(idx).reshape(planes, -1))


def _pool_gather_kernel(x, idx, *, overlap):
    c = _c_planes(x, idx)
    if c is not None and math.prod(x.shape[2:]) > 0:
        return _kernels.pool_gather(*c).reshape(idx.shape)
    return x.reshape(-1)[_flat_index(idx, math.prod(x.shape[2:]))].reshape(idx.shape)


def _pool_scatter_kernel(g, idx, *, size, overlap):
    n, c = g.shape[:2]
    planes = _c_planes(g, idx)
    if planes is not None and g.shape == idx.shape:
        # Each index adds its g (a write for disjoint windows, the sum where they overlap).
        return _kernels.pool_scatter(*planes, math.prod(size)).reshape((n, c) + tuple(size))
    flat = _flat_index(idx, math.prod(size))
    out = np.zeros(n * c * math.prod(size), g.dtype)
    if overlap:
        # Overlapping windows can route to one entry several times: those add up.
        np.add.at(out, flat, g.reshape(-1))
    else:
        # Disjoint windows: each input entry is the argmax of at most one window, so the
        # indices are distinct and a plain write is the sum.
        out[flat] = g.reshape(-1)
    return out.reshape((n, c) + tuple(size))


# ---------------------------------------------------------------------------------------
# Rules: _unfold and _fold are each other's adjoints
# ---------------------------------------------------------------------------------------

def _unfold_vjp(g, ans, x, *, ksize, stride, padding, dilation):
    return (tg._fold(g, size=x.shape[2:], stride=stride, padding=padding, dilation=dilation),)


def _fold_vjp(g, ans, cols, *, size, stride, padding, dilation):
    return (tg._unfold(g, ksize=cols.shape[2:2 + len(size)], stride=stride, padding=padding,
                       dilation=dilation),)


def _pool_gather_vjp(g, ans, x, idx, *, overlap):
    return tg._pool_scatter(g, idx, size=x.shape[2:], overlap=overlap), None


def _pool_scatter_vjp(h, ans, g, idx, *, size, overlap):
    return tg._pool_gather(h, idx, overlap=overlap), None


def _pool_gather_jvp(t, ans, x, idx, *, overlap):
    return tg._pool_gather(t[0], idx, overlap=overlap)


def _pool_scatter_jvp(t, ans, g, idx, *, size, overlap):
    return tg._pool_scatter(t[0], idx, size=size, overlap=overlap)


def _unfold_jvp(t, ans, x, **p):
    return tg._unfold(t[0], **p)


def _fold_jvp(t, ans, cols, **p):
    return tg._fold(t[0], **p)


# ---------------------------------------------------------------------------------------
# Argument checks (plain Python)
# ---------------------------------------------------------------------------------------

def _batched(name, nd, input):
    """(x as (N, C, *S), whether it was unbatched); a floating-point tensor."""
    x = tg.asarray(input)
    if x.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"{name}: expected a {nd + 2}-d (batched) or {nd + 1}-d (unbatched) "
                         f"input, got input of shape {x.shape}")
    if x.dtype.kind != "f":
        raise TypeError(f"{name}: input must be floating point, got {x.dtype}")
    if any(s == 0 for s in x.shape[1:]):
        raise ValueError(f"{name}: expected non-empty channel and spatial axes, got input of "
                         f"shape {x.shape}")
    unbatched = x.ndim == nd + 1
    return (tg.reshape(x, (1,) + x.shape) if unbatched else x), unbatched


def _unbatch(y, unbatched):
    return tg.reshape(y, y.shape[1:]) if unbatched else y


def _pool_geometry(name, nd, size, kernel_size, stride, padding, dilation, ceil_mode):
    """(kernel, stride, (lo, hi) padding pairs, dilation, output shape) of a pool, with
    PyTorch's output size: ceil_mode rounds up, but the last window must start inside the
    input or the left padding; hi pads the right far enough for the last window."""
    k = _ints(name, "kernel_size", kernel_size, nd, 1)
    s = k if stride is None or (not isinstance(stride, numbers.Integral) and len(stride) == 0) \
        else _ints(name, "stride", stride, nd, 1)
    p = _ints(name, "padding", padding, nd, 0)
    d = _ints(name, "dilation", dilation, nd, 1)
    if any(pp > kk // 2 for pp, kk in zip(p, k)):
        raise ValueError(f"{name}: padding {p} must be at most half of kernel_size {k} "
                         f"(as in PyTorch)")
    out, pads = [], []
    for n_, kk, st, pp, dd in zip(size, k, s, p, d):
        span = n_ + 2 * pp - dd * (kk - 1) - 1
        if span < 0:
            raise ValueError(f"{name}: the kernel {k} with dilation {d} does not fit in the "
                             f"input of spatial shape {tuple(size)} padded by {p}")
        m = (span + (st - 1 if ceil_mode else 0)) // st + 1
        if ceil_mode and (m - 1) * st >= n_ + pp:
            m -= 1
        out.append(m)
        pads.append((pp, max(pp, (m - 1) * st + dd * (kk - 1) + 1 - n_ - pp)))
    return k, s, tuple(pads), d, tuple(out)


def _pair_or_int(name, arg, value, nd, allow_none=False):
    items = (value,) * nd if value is None or isinstance(value, (numbers.Integral, np.integer)) \
        else tuple(value)
    def bad(v):
        if v is None:
            return not allow_none
        return (isinstance(v, bool) or not isinstance(v, (numbers.Integral, np.integer))
                or v < 1)

    if len(items) != nd or any(bad(v) for v in items):
        raise ValueError(f"{name}: {arg} must be a positive int or a tuple of {nd} of them"
                         f"{' (or None)' if allow_none else ''}, got {value!r}")
    return tuple(None if v is None else int(v) for v in items)


# ---------------------------------------------------------------------------------------
# Max pooling
# ---------------------------------------------------------------------------------------

def _max_pool_nd(name, nd, input, kernel_size, stride, padding, dilation, ceil_mode,
                 return_indices):
    x, unbatched = _batched(name, nd, input)
    k, s, pads, d, _ = _pool_geometry(name, nd, x.shape[2:], kernel_size, stride, padding,
                                      dilation, ceil_mode)
    idx = tg._max_pool_indices(x.detach(), ksize=k, stride=s, padding=pads, dilation=d)
    # Windows that share no entry (stride >= window extent on every axis, as MaxPool2d(2))
    # let the backward write instead of sum.
    overlap = any(st < dd * (kk - 1) + 1 for kk, st, dd in zip(k, s, d))
    y = _unbatch(tg._pool_gather(x, idx, overlap=overlap), unbatched)
    return (y, _unbatch(idx, unbatched)) if return_indices else y


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-d max pooling of input (N, C, L) (or (C, L)), as ``torch.nn.functional.max_pool1d``:
    padding is with -inf, stride defaults to kernel_size; return_indices also returns the
    flat index in L of each maximum. The gradient goes to each window's (first) maximum.

    >>> import tapegrad as tg
    >>> tg.max_pool1d(tg.tensor([[[1., 3., 2., 0., 5.]]]), 2).tolist()
    [[[3.0, 2.0]]]
    """
    return _max_pool_nd("max_pool1d", 1, input, kernel_size, stride, padding, dilation,
                        ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-d max pooling of input (N, C, H, W) (or (C, H, W)), as
    ``torch.nn.functional.max_pool2d``; return_indices also returns each maximum's flat
    index ``h * W + w`` in its plane (PyTorch's convention).

    >>> import tapegrad as tg
    >>> tg.max_pool2d(tg.ones((2, 3, 5, 5)), 3, stride=2, padding=1).shape
    (2, 3, 3, 3)
    """
    return _max_pool_nd("max_pool2d", 2, input, kernel_size, stride, padding, dilation,
                        ceil_mode, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Adaptive 2-d max pooling to `output_size` (an int, or a pair whose None entries keep
    the input's size), as ``torch.nn.functional.adaptive_max_pool2d``: output cell (i, j)
    is the maximum over rows ``[floor(i*H/Oh), ceil((i+1)*H/Oh))`` and the same for columns.

    >>> import tapegrad as tg
    >>> tg.adaptive_max_pool2d(tg.ones((1, 2, 5, 7)), (2, None)).shape
    (1, 2, 2, 7)
    """
    x, unbatched = _batched("adaptive_max_pool2d", 2, input)
    out = _pair_or_int("adaptive_max_pool2d", "output_size", output_size, 2, allow_none=True)
    out = tuple(x.shape[2 + a] if o is None else o for a, o in enumerate(out))
    idx = tg._adaptive_max_pool_indices(x.detach(), output_size=out)
    y = _unbatch(tg._pool_gather(x, idx, overlap=True), unbatched)
    return (y, _unbatch(idx, unbatched)) if return_indices else y


# ---------------------------------------------------------------------------------------
# Average pooling
# ---------------------------------------------------------------------------------------

def _avg_divisor(size, k, s, pads, out, count_include_pad):
    """PyTorch's divisor per output position (separable): the window clipped to the
    padded input (count_include_pad) or to the input itself."""
    per_axis = []
    for n_, kk, st, (lo, _), m in zip(size, k, s, pads, out):
        start = np.arange(m) * st - lo
        end = np.minimum(start + kk, n_ + lo)
        if count_include_pad:
            per_axis.append(end - start)
        else:
            per_axis.append(np.minimum(end, n_) - np.maximum(start, 0))
    div = per_axis[0]
    for a in per_axis[1:]:
        div = np.multiply.outer(div, a)
    return div


def _avg_pool_nd(name, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                 divisor_override):
    x, unbatched = _batched(name, nd, input)
    k, s, pads, d, out = _pool_geometry(name, nd, x.shape[2:], kernel_size, stride, padding, 1,
                                        ceil_mode)
    cols = tg._unfold(x, ksize=k, stride=s, padding=pads, dilation=d)
    total = tg.sum(cols, axis=tuple(range(2, 2 + nd)))
    if divisor_override is not None:
        if (isinstance(divisor_override, bool) or not isinstance(divisor_override, numbers.Integral)
                or divisor_override == 0):
            raise ValueError(f"{name}: divisor_override must be a nonzero int, got "
                             f"{divisor_override!r}")
        y = total / float(divisor_override)
    else:
        div = _avg_divisor(x.shape[2:], k, s, pads, out, count_include_pad)
        y = total * tg.asarray((1.0 / div).astype(x.dtype), device=x.device)
    return _unbatch(y, unbatched)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-d average pooling of input (N, C, L) (or (C, L)), as
    ``torch.nn.functional.avg_pool1d`` (zero padding; count_include_pad counts the
    padded zeros in the divisor, never the extra positions of ceil_mode).

    >>> import tapegrad as tg
    >>> tg.avg_pool1d(tg.tensor([[[1., 3., 2., 0., 5.]]]), 2).tolist()
    [[[2.0, 1.0]]]
    """
    return _avg_pool_nd("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-d average pooling of input (N, C, H, W) (or (C, H, W)), as
    ``torch.nn.functional.avg_pool2d``; divisor_override replaces the divisor.

    >>> import tapegrad as tg
    >>> tg.avg_pool2d(tg.ones((1, 1, 4, 4)), 2, divisor_override=1).tolist()
    [[[[4.0, 4.0], [4.0, 4.0]]]]
    """
    return _avg_pool_nd("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override)


def _adaptive_matrix(n_in, n_out, dtype):
    m = np.zeros((n_out, n_in))
    for i, (a, b) in enumerate(_adaptive_bounds(n_in, n_out)):
        m[i, a:b] = 1.0 / (b - a)
    return m.astype(dtype)


def _adaptive_avg_nd(name, nd, input, output_size):
    x, unbatched = _batched(name, nd, input)
    out = _pair_or_int(name, "output_size", output_size, nd, allow_none=True)
    y = x
    for a, o in enumerate(out):
        n_in = x.shape[2 + a]
        if o is None or o == n_in:
            continue
        y = _along(y, _adaptive_matrix(n_in, o, x.dtype), 2 + a)
    return _unbatch(y, unbatched)


def _along(y, m, axis):
    """m (out, in) applied along `axis` of y (a matmul on the last or last-but-one axis)."""
    m = tg.asarray(m, device=y.device)      # NOTE: a host constant, put on y's device
    if axis == y.ndim - 1:
        return tg.matmul(y, m.T)
    if axis == y.ndim - 2:
        return tg.matmul(m, y)
    raise AssertionError("only the last two axes")


def adaptive_avg_pool1d(input, output_size):
    """Adaptive 1-d average pooling of (N, C, L) (or (C, L)) to `output_size` positions, as
    ``torch.nn.functional.adaptive_avg_pool1d`` (windows ``[floor(i*L/O), ceil((i+1)*L/O))``).

    >>> import tapegrad as tg
    >>> tg.adaptive_avg_pool1d(tg.tensor([[[1., 3., 5., 7.]]]), 2).tolist()
    [[[2.0, 6.0]]]
    """
    return _adaptive_avg_nd("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """Adaptive 2-d average pooling of (N, C, H, W) (or (C, H, W)) to `output_size` (an int
    or a pair; None keeps that axis), as ``torch.nn.functional.adaptive_avg_pool2d``.

    >>> import tapegrad as tg
    >>> tg.adaptive_avg_pool2d(tg.ones((2, 3, 7, 5)), 1).shape
    (2, 3, 1, 1)
    """
    return _adaptive_avg_nd("adaptive_avg_pool2d", 2, input, output_size)


# ---------------------------------------------------------------------------------------
# unfold / fold (torch's im2col names)
# ---------------------------------------------------------------------------------------

def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding blocks of input (N, C, H, W) (or (C, H, W)) as columns,
    (N, C*kh*kw, L), as ``torch.nn.functional.unfold`` (im2col; zero padding; L the number
    of block positions, row-major). Its gradient is ``fold``.

    >>> import tapegrad as tg
    >>> tg.unfold(tg.ones((2, 3, 4, 5)), 2).shape
    (2, 12, 12)
    """
    x, unbatched = _batched("unfold", 2, input)
    k = _ints("unfold", "kernel_size", kernel_size, 2, 1)
    d = _ints("unfold", "dilation", dilation, 2, 1)
    p = _ints("unfold", "padding", padding, 2, 0)
    s = _ints("unfold", "stride", stride, 2, 1)
    out = [(n_ + 2 * pp - dd * (kk - 1) - 1) // st + 1
           for n_, kk, st, pp, dd in zip(x.shape[2:], k, s, p, d)]
    if any(m < 1 for m in out):
        raise ValueError(f"unfold: the kernel {k} with dilation {d} does not fit in the input "
                         f"{x.shape} padded by {p}")
    cols = tg._unfold(x, ksize=k, stride=s, padding=tuple((pp, pp) for pp in p), dilation=d)
    n, c = x.shape[:2]
    return _unbatch(tg.reshape(cols, (n, c * math.prod(k), math.prod(out))), unbatched)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sums columns (N, C*kh*kw, L) (or (C*kh*kw, L)) back into (N, C, *output_size), as
    ``torch.nn.functional.fold`` (col2im; overlapping entries add up): the adjoint of
    ``unfold``.

    >>> import tapegrad as tg
    >>> tg.fold(tg.ones((1, 4, 4)), (3, 3), 2)[0, 0].tolist()
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    cols = tg.asarray(input)
    size = _ints("fold", "output_size", output_size, 2, 1)
    k = _ints("fold", "kernel_size", kernel_size, 2, 1)
    d = _ints("fold", "dilation", dilation, 2, 1)
    p = _ints("fold", "padding", padding, 2, 0)
    s = _ints("fold", "stride", stride, 2, 1)
    if cols.ndim not in (2, 3):
        raise ValueError(f"fold: expected a 3-d (batched) or 2-d (unbatched) input, got input "
                         f"of shape {cols.shape}")
    if cols.dtype.kind != "f":
        raise TypeError(f"fold: input must be floating point, got {cols.dtype}")
    unbatched = cols.ndim == 2
    if unbatched:
        cols = tg.reshape(cols, (1,) + cols.shape)
    n, ck, length = cols.shape
    out = [(n_ + 2 * pp - dd * (kk - 1) - 1) // st + 1
           for n_, kk, st, pp, dd in zip(size, k, s, p, d)]
    if ck % math.prod(k):
        raise ValueError(f"fold: expected input's dimension 1 ({ck}, input of shape "
                         f"{cols.shape}) to be divisible by the kernel's size {math.prod(k)} "
                         f"(kernel_size {k})")
    if any(m < 1 for m in out) or math.prod(out) != length:
        raise ValueError(f"fold: output_size {size} with kernel_size {k}, dilation {d}, "
                         f"padding {p}, stride {s} gives {max(0, math.prod(out))} blocks, but the "
                         f"input of shape {cols.shape} has {length}")
    c = ck // math.prod(k)
    y = tg._fold(tg.reshape(cols, (n, c) + k + tuple(out)), size=size, stride=s,
                 padding=tuple((pp, pp) for pp in p), dilation=d)
    return _unbatch(y, unbatched)


# ---------------------------------------------------------------------------------------
# pixel_shuffle / pixel_unshuffle
# ---------------------------------------------------------------------------------------

def _factor(name, arg, r):
    if isinstance(r, bool) or not isinstance(r, (numbers.Integral, np.integer)) or r < 1:
        raise ValueError(f"{name}: {arg} must be a positive int, got {r!r}")
    return int(r)


def pixel_shuffle(input, upscale_factor):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r), as ``torch.nn.functional.pixel_shuffle``.

    >>> import tapegrad as tg
    >>> tg.pixel_shuffle(tg.ones((1, 8, 3, 3)), 2).shape
    (1, 2, 6, 6)
    """
    x = tg.asarray(input)
    r = _factor("pixel_shuffle", "upscale_factor", upscale_factor)
    if x.ndim < 3 or x.shape[-3] % (r * r):
        raise ValueError(f"pixel_shuffle: expected an input of at least 3 dimensions whose "
                         f"channels (dimension -3) are divisible by upscale_factor**2 = {r * r}, "
                         f"got input of shape {x.shape}")
    *b, c, h, w = x.shape
    nb = len(b)
    y = tg.reshape(x, (*b, c // (r * r), r, r, h, w))
    y = tg.transpose(y, tuple(range(nb)) + tuple(nb + a for a in (0, 3, 1, 4, 2)))
    return tg.reshape(y, (*b, c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W), the inverse of pixel_shuffle, as
    ``torch.nn.functional.pixel_unshuffle``.

    >>> import tapegrad as tg
    >>> tg.pixel_unshuffle(tg.ones((1, 2, 6, 6)), 2).shape
    (1, 8, 3, 3)
    """
    x = tg.asarray(input)
    r = _factor("pixel_unshuffle", "downscale_factor", downscale_factor)
    if x.ndim < 3 or x.shape[-1] % r or x.shape[-2] % r:
        raise ValueError(f"pixel_unshuffle: expected an input of at least 3 dimensions whose "
                         f"height and width are divisible by downscale_factor = {r}, got input "
                         f"of shape {x.shape}")
    *b, c, h, w = x.shape
    nb = len(b)
    y = tg.reshape(x, (*b, c, h // r, r, w // r, r))
    y = tg.transpose(y, tuple(range(nb)) + tuple(nb + a for a in (0, 2, 4, 1, 3)))
    return tg.reshape(y, (*b, c * r * r, h // r, w // r))


# ---------------------------------------------------------------------------------------
# interpolate / upsample
# ---------------------------------------------------------------------------------------

_MODES = {"nearest": None, "linear": 1, "bilinear": 2}


def _nearest_index(n_in, n_out, scale):
    # NOTE: PyTorch computes the source index in float32: floor(dst * scale), scale =
    # 1/scale_factor when one was given, else in/out; the same arithmetic here.
    sc = np.float32(1.0 / scale) if scale is not None else np.float32(n_in) / np.float32(n_out)
    src = np.floor(np.arange(n_out, dtype=np.float32) * sc).astype(np.int64)
    return np.minimum(src, n_in - 1)


def _linear_matrix(n_in, n_out, scale, align_corners, dtype):
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = dst * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        sc = 1.0 / scale if scale is not None else n_in / n_out
        src = np.maximum((dst + 0.5) * sc - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = src - i0
    m = np.zeros((n_out, n_in))
    np.add.at(m, (np.arange(n_out), i0), 1.0 - lam)
    np.add.at(m, (np.arange(n_out), i1), lam)
    return m.astype(dtype)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resamples (N, C, L) or (N, C, H, W) to `size` (an int or one per spatial axis) or by
    `scale_factor` (output ``floor(in * scale_factor)``), as
    ``torch.nn.functional.interpolate``: mode "nearest" (source ``floor(dst * in/out)``, or
    ``* 1/scale_factor`` when that was given), "linear" (3-d) or "bilinear" (4-d), with
    align_corners (default False for the linear modes). Other modes, and antialias, are
    refused.

    >>> import tapegrad as tg
    >>> tg.interpolate(tg.tensor([[[1., 2.]]]), scale_factor=2).tolist()
    [[[1.0, 1.0, 2.0, 2.0]]]
    >>> tg.interpolate(tg.tensor([[[1., 2.]]]), size=3, mode="linear", align_corners=True).tolist()
    [[[1.0, 1.5, 2.0]]]
    """
    name = "interpolate"
    if mode not in _MODES:
        raise ValueError(f"{name}: mode {mode!r} is not supported (only 'nearest', 'linear', "
                         f"'bilinear')")
    if antialias:
        raise ValueError(f"{name}: antialias=True is not supported")
    x = tg.asarray(input)
    if x.ndim not in (3, 4):
        raise ValueError(f"{name}: expected a 3-d (N, C, L) or 4-d (N, C, H, W) input, got "
                         f"input of shape {x.shape}")
    if x.dtype.kind != "f":
        raise TypeError(f"{name}: input must be floating point, got {x.dtype}")
    nd = x.ndim - 2
    if _MODES[mode] is not None and _MODES[mode] != nd:
        raise ValueError(f"{name}: mode {mode!r} needs a {_MODES[mode] + 2}-d input, got input "
                         f"of shape {x.shape}")
    if mode == "nearest" and align_corners is not None:
        raise ValueError(f"{name}: align_corners only applies to the linear modes (as in "
                         f"PyTorch), got align_corners={align_corners!r} with mode 'nearest'")
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{name}: give exactly one of size and scale_factor")
    in_size = x.shape[2:]
    if size is not None:
        out = _pair_or_int(name, "size", size, nd)
        scales = (None,) * nd
    else:
        sf = (scale_factor,) * nd if isinstance(scale_factor, numbers.Real) else tuple(scale_factor)
        if len(sf) != nd or any(isinstance(v, bool) or not isinstance(v, numbers.Real) or v <= 0
                                for v in sf):
            raise ValueError(f"{name}: scale_factor must be a positive number or a tuple of "
                             f"{nd} of them, got {scale_factor!r}")
        out = tuple(int(math.floor(n_ * float(v))) for n_, v in zip(in_size, sf))
        if any(o < 1 for o in out):
            raise ValueError(f"{name}: scale_factor {scale_factor!r} gives an empty output "
                             f"{out} for the input of shape {x.shape}")
        scales = (None,) * nd if recompute_scale_factor else tuple(float(v) for v in sf)
    if mode == "nearest":
        idx = [_nearest_index(n_, o, sc) for n_, o, sc in zip(in_size, out, scales)]
        if nd == 1:
            return x[:, :, idx[0]]
        return x[:, :, idx[0][:, None], idx[1][None, :]]
    y = x
    for a in range(nd):
        m = _linear_matrix(in_size[a], out[a], scales[a], bool(align_corners), x.dtype)
        y = _along(y, m, 2 + a)
    return y


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """``torch.nn.functional.upsample``: the (deprecated in PyTorch) alias of
    ``interpolate``.

    >>> import tapegrad as tg
    >>> tg.upsample(tg.ones((1, 1, 2, 2)), scale_factor=2).shape
    (1, 1, 4, 4)
    """
    return interpolate(input, size, scale_factor, mode, align_corners)


# ---------------------------------------------------------------------------------------
# Samples and registration
# ---------------------------------------------------------------------------------------

def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _distinct(*shape, seed=0):
    """Values at least 0.1 apart (no ties in any window, so max pool is smooth there)."""
    rng = np.random.default_rng(seed)
    return (rng.permutation(math.prod(shape)) * 0.1 - 1.0).reshape(shape)


def _up(nd, stride=1, padding=0, dilation=1):
    pad = padding if isinstance(padding, tuple) else ((padding, padding),) * nd
    return dict(stride=(stride,) * nd, padding=pad, dilation=(dilation,) * nd)


_UNFOLD_SAMPLES = [
    tg.Sample(_r(2, 2, 5), ksize=(3,), **_up(1)),
    tg.Sample(_r(1, 2, 7), ksize=(2,), **_up(1, stride=2, padding=((1, 2),), dilation=2)),
    tg.Sample(_r(1, 2, 4, 5), ksize=(2, 3), **_up(2, padding=1)),
    tg.Sample(_r(1, 1, 5, 5), ksize=(2, 2), **_up(2, stride=2, dilation=2)),
]
_FOLD_SAMPLES = [
    tg.Sample(_r(2, 2, 3, 3), size=(5,), **_up(1)),
    tg.Sample(_r(1, 2, 2, 4), size=(7,), **_up(1, stride=2, padding=((1, 2),), dilation=2)),
    tg.Sample(_r(1, 2, 2, 3, 5, 5), size=(4, 5), **_up(2, padding=1)),
]
_INDEX_SAMPLES = [
    tg.Sample(_distinct(1, 2, 5), ksize=(2,), **_up(1, stride=2, padding=((1, 1),))),
    tg.Sample(_distinct(1, 2, 4, 5), ksize=(2, 2), **_up(2)),
]

_PLANE_INDEX = np.array([[[[0, 3], [9, 10]], [[5, 2], [8, 11]]]])        # (1, 2, 2, 2) into 3x4
_GATHER_SAMPLES = [
    tg.Sample(_r(1, 2, 3, 4), _PLANE_INDEX, overlap=False),
    tg.Sample(_r(2, 1, 5), np.array([[[1, 1, 4]], [[0, 2, 2]]]), overlap=True),
]
_SCATTER_SAMPLES = [
    tg.Sample(_r(1, 2, 2, 2), _PLANE_INDEX, size=(3, 4), overlap=False),
    tg.Sample(_r(2, 1, 3), np.array([[[1, 1, 4]], [[0, 2, 2]]]), size=(5,), overlap=True),
]

_FUNCTION_SAMPLES = {
    "max_pool1d": [
        tg.Sample(_distinct(2, 2, 7), 3),
        tg.Sample(_distinct(2, 6), 2, 1, 1, ceil_mode=True),
        tg.Sample(_distinct(1, 2, 9), 2, stride=3, dilation=2, ceil_mode=True),
    ],
    "max_pool2d": [
        tg.Sample(_distinct(2, 2, 5, 4), 2),
        tg.Sample(_distinct(1, 2, 5, 5), (3, 2), stride=(2, 1), padding=1, ceil_mode=True),
        tg.Sample(_distinct(2, 6, 6), 2, dilation=2),
    ],
    "avg_pool1d": [
        tg.Sample(_r(2, 2, 7), 3),
        tg.Sample(_r(1, 2, 6), 3, 2, 1, ceil_mode=True, count_include_pad=False),
    ],
    "avg_pool2d": [
        tg.Sample(_r(1, 2, 5, 4), 2, ceil_mode=True),
        tg.Sample(_r(1, 2, 5, 5), 3, stride=2, padding=1, count_include_pad=False),
        tg.Sample(_r(2, 4, 4), 2, divisor_override=3),
    ],
    "adaptive_avg_pool1d": [tg.Sample(_r(2, 3, 7), 3), tg.Sample(_r(2, 5), 4)],
    "adaptive_avg_pool2d": [tg.Sample(_r(1, 2, 5, 7), (2, 3)), tg.Sample(_r(2, 5, 4), (None, 3))],
    "adaptive_max_pool2d": [tg.Sample(_distinct(1, 2, 5, 7), (2, 3)),
                            tg.Sample(_distinct(2, 5, 4), 3)],
    "unfold": [tg.Sample(_r(2, 2, 4, 5), 2), tg.Sample(_r(2, 5, 5), (2, 3), 2, 1, (2, 1))],
    "fold": [tg.Sample(_r(2, 8, 12), (4, 5), 2),
             tg.Sample(_r(12, 9), (5, 5), (2, 3), 1, 1, (2, 2))],
    "pixel_shuffle": [tg.Sample(_r(1, 8, 2, 3), 2), tg.Sample(_r(9, 2, 2), 3)],
    "pixel_unshuffle": [tg.Sample(_r(1, 2, 4, 6), 2)],
    "interpolate": [
        tg.Sample(_r(1, 2, 3, 4), scale_factor=2),
        tg.Sample(_r(1, 2, 3, 4), size=(5, 3)),
        tg.Sample(_r(1, 2, 3, 4), size=(5, 7), mode="bilinear"),
        tg.Sample(_r(1, 2, 3, 4), scale_factor=(1.5, 2), mode="bilinear", align_corners=True),
        tg.Sample(_r(2, 2, 5), size=8, mode="linear"),
    ],
    "upsample": [tg.Sample(_r(1, 1, 3, 3), scale_factor=2, mode="bilinear")],
}

_PARAMS_DOC = ("stride, dilation: tuples of ints per spatial axis; padding: a tuple of "
               "(before, after) pairs")


def register(registry):
    """Register the pooling ops and functions with `registry` (called from
    ``tapegrad_nn.functional.register``)."""
    registry.register_op(
        "_unfold", kernels={"cpu": _unfold_kernel}, vjp=_unfold_vjp, jvp=_unfold_jvp,
        batch=_batch_into_n("_unfold", lambda ksize, **_: (2 + len(ksize),)),
        save_ans=False, method=False, samples=_UNFOLD_SAMPLES,
        doc="_unfold(x, *, ksize, stride, padding, dilation): the windows (im2col) of x "
            "(N, C, *S) zero-padded, as (N, C, *ksize, *L); the op behind tg.unfold and the "
            f"average pools, whose gradient is _fold; {_PARAMS_DOC}.")
    registry.register_op(
        "_fold", kernels={"cpu": _fold_kernel}, vjp=_fold_vjp, jvp=_fold_jvp,
        batch=_batch_into_n("_fold", lambda size, **_: (2 + 2 * len(size),)),
        save_ans=False, method=False, samples=_FOLD_SAMPLES,
        doc="_fold(cols, *, size, stride, padding, dilation): the adjoint of _unfold (col2im): "
            "windows (N, C, *K, *L) summed back into (N, C, *size), overlaps adding up; "
            f"{_PARAMS_DOC}.")
    registry.register_op(
        "_max_pool_indices", kernels={"cpu": _max_pool_indices_kernel}, nin=1,
        batch=_batch_into_n("_max_pool_indices", lambda ksize, **_: (2 + len(ksize),)),
        params=("ksize", "stride", "padding", "dilation"), method=False, samples=_INDEX_SAMPLES,
        doc="_max_pool_indices(x, *, ksize, stride, padding, dilation): for each window of x "
            "(N, C, *S) padded with -inf, the flat index in S of its first maximum (NaN counts "
            f"as the maximum, as PyTorch); an int64 tensor, not differentiable; {_PARAMS_DOC}.")
    registry.register_op(
        "_adaptive_max_pool_indices", kernels={"cpu": _adaptive_max_pool_indices_kernel},
        batch=_batch_into_n("_adaptive_max_pool_indices", lambda output_size: (4,)),
        nin=1, params=("output_size",), method=False,
        samples=[tg.Sample(_distinct(1, 2, 5, 7), output_size=(2, 3))],
        doc="_adaptive_max_pool_indices(x, *, output_size): the flat index h*W + w of the "
            "first maximum of each of PyTorch's adaptive windows of x (N, C, H, W); an int64 "
            "tensor, not differentiable.")
    registry.register_op(
        "_pool_gather", kernels={"cpu": _pool_gather_kernel}, vjp=_pool_gather_vjp,
        batch=_batch_into_n("_pool_gather", lambda overlap: (None, None)),
        jvp=_pool_gather_jvp, differentiable=(0,), save_inputs=(False, True), save_ans=False,
        method=False, samples=_GATHER_SAMPLES,
        doc="_pool_gather(x, idx, *, overlap): x (N, C, *S) at the flat per-plane indices idx "
            "(N, C, *L) (the max pools' values at their argmax); its gradient is _pool_scatter. "
            "overlap=False promises that idx has no repeated entry within a plane.")
    registry.register_op(
        "_pool_scatter", kernels={"cpu": _pool_scatter_kernel}, vjp=_pool_scatter_vjp,
        batch=_batch_into_n("_pool_scatter", lambda size, overlap: (2 + len(size), None)),
        jvp=_pool_scatter_jvp, differentiable=(0,), save_inputs=(False, True), save_ans=False,
        method=False, samples=_SCATTER_SAMPLES,
        doc="_pool_scatter(g, idx, *, size, overlap): zeros (N, C, *size) with g (N, C, *L) "
            "added at the flat per-plane indices idx (repeats sum; overlap=False promises "
            "none, and the entries are written); the gradient of _pool_gather, whose "
            "gradient it is.")
    for name in NAMES:
        registry.register_function(name, globals()[name], method=False,
                                   samples=_FUNCTION_SAMPLES[name])
