"""Convolutions: ``conv1d/2d/3d`` and ``conv_transpose1d/2d`` (``torch.nn.functional``'s
names, arguments and layouts: NCL / NCHW / NCDHW inputs, weights (out, in/groups, *kernel)
for convolutions and (in, out/groups, *kernel) for transposed ones).

All of them are three N-d ops with their own kernels and rules:

- ``_conv(x, w)``: the convolution (cross-correlation, as PyTorch) of x (N, C, *S) with
  w (O, C/groups, *K) -> (N, O, *L);
- ``_conv_transpose(y, w, size=S)``: its adjoint in x, (N, O, *L) -> (N, C, *S): the
  transposed convolution, and the input gradient of ``_conv``;
- ``_conv_weight(x, g, ksize=K)``: its adjoint in w, the weight gradient of ``_conv``.

``<g, _conv(x, w)>`` is linear in each of g, x and w, so each op's gradients are the other
two ops: the set is closed under differentiation and every order of derivative is exact.
Parameters are per spatial axis: ``stride``, ``dilation`` (tuples of ints) and ``padding``
(a tuple of (before, after) pairs, so that PyTorch's ``padding="same"`` with an even kernel
can pad one more after than before, as PyTorch does). Bias is added by the public functions
with one broadcast add.

CPU kernels (all in the input's dtype: float32 stays float32 in BLAS):

- ``_conv``: im2col as one copy of a strided view of the zero-padded input into a
  (groups, N*L, prod(K)*C/groups) matrix, then one GEMM against the weight as a
  (prod(K)*C/groups, O/groups) matrix (for groups=1 a single BLAS call). The copy is
  channels-last (the input is moved to (N, *S, C) first, so a window row is one run of
  kW*C/groups entries) unless an output row is the longer run (C/groups = 1: grey images);
- ``_conv_weight``: the same im2col of x, recomputed rather than saved by the forward
  (saving it would keep a prod(K)-times-the-activation buffer per layer alive between
  forward and backward), then one GEMM with g as (O/groups, N*L);
- ``_conv_transpose``: at stride 1 (the input gradient of every stride-1 convolution) the
  full correlation of y with the flipped kernel, i.e. ``_conv``'s kernel: one im2col of y
  and one GEMM, no scatter. Otherwise one GEMM per kernel offset, each slice-added into
  the padded input where that offset of every window lands (col2im without np.add.at).

Each kernel holds at most one im2col-sized buffer, and a rule calls the ops one after the
other, so a backward never holds two.

>>> import tapegrad as tg
>>> x = tg.ones((1, 1, 4, 4), requires_grad=True)
>>> y = tg.conv2d(x, tg.ones((2, 1, 3, 3)), padding=1)
>>> y.shape, y[0, 0].tolist()[0]
((1, 2, 4, 4), [4.0, 6.0, 6.0, 4.0])
>>> y.sum().backward()
>>> x.grad[0, 0, 0].tolist()
[8.0, 12.0, 12.0, 8.0]
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import tapegrad as tg
from numpy.lib.stride_tricks import as_strided
from tapegrad import _batching

from . import _kernels
from ._c_kernel_args import c_kernel_ok

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "register"]


# ---------------------------------------------------------------------------------------
# Kernels (arrays in, array out)
# ---------------------------------------------------------------------------------------

def _out_size(size, k, stride, padding, dilation):
    """The spatial output shape of a convolution (a negative entry: the kernel does not fit)."""
    return tuple((s + lo + hi - d * (kk - 1) - 1) // st + 1
                 for s, kk, st, (lo, hi), d in zip(size, k, stride, padding, dilation))


def _padded(x, padding, channels_last):
    """x (N, C, *S) zero-padded by `padding` ((lo, hi) pairs, each >= 0), contiguous:
    (N, *Sp, C) if channels_last else (N, C, *Sp). One allocation and one copy (np.pad
    costs twice as much on these small arrays)."""
    nd = x.ndim - 2
    size = x.shape[2:]
    src = np.moveaxis(x, 1, -1) if channels_last else x
    if not any(lo or hi for lo, hi in padding):
        return np.ascontiguousarray(src)
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(size, padding))
    inner = tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, padding))
    if channels_last:
        xp = np.zeros((x.shape[0],) + padded + (x.shape[1],), x.dtype)
        xp[(slice(None),) + inner] = src
    else:
        xp = np.zeros(x.shape[:2] + padded, x.dtype)
        xp[(slice(None), slice(None)) + inner] = src
    return xp


def _im2col(x, ksize, stride, padding, dilation, groups, channels_last=None):
    """The im2col matrix of x (N, C, *S), (G, N*L, prod(K)*C/G) with rows the output
    positions (n, *l) and columns the window entries (*k, c) in that order, and the output
    shape L. The matrix is one buffer, possibly a transposed view (BLAS takes either).
    channels_last: the copy's layout (None: the faster one, see below; tests force each)."""
    nd = len(ksize)
    n, c = x.shape[:2]
    cg = c // groups
    out = _out_size(x.shape[2:], ksize, stride, padding, dilation)
    # NOTE: the copy's speed depends on its innermost contiguous run. Channels-last, a
    # window row (kw, c) is one run of kw*C/G entries (dilation 1); channels-first, an
    # output row of L's last axis is (stride 1). Take the layout whose run is longer
    # (for C/G = 1, e.g. a first layer on grey images, channels-last would copy runs of 3).
    if channels_last is None:
        run_last = cg * ksize[-1] if dilation[-1] == 1 else cg
        run_first = out[-1] if stride[-1] == 1 else 1
        channels_last = run_last >= run_first
    xp = _padded(x, padding, channels_last)
    s = xp.strides
    if channels_last:                                                # xp (N, *Sp, C)
        sp = s[1:1 + nd]
        v = as_strided(xp, (n,) + out + tuple(ksize) + (groups, cg),
                       (s[0],) + tuple(a * b for a, b in zip(sp, stride))
                       + tuple(a * b for a, b in zip(sp, dilation)) + (cg * s[-1], s[-1]),
                       writeable=False)                              # (N, *L, *K, G, C/G)
        cols = np.ascontiguousarray(np.moveaxis(v, 1 + 2 * nd, 0))   # (G, N, *L, *K, C/G)
        return cols.reshape(groups, n * math.prod(out), math.prod(ksize) * cg), out
    sp = s[2:]                                                       # xp (N, C, *Sp)
    v = as_strided(xp, (n, groups, cg) + out + tuple(ksize),
                   (s[0], cg * s[1], s[1]) + tuple(a * b for a, b in zip(sp, stride))
                   + tuple(a * b for a, b in zip(sp, dilation)),
                   writeable=False)                                  # (N, G, C/G, *L, *K)
    k_axes, l_axes = tuple(range(3 + nd, 3 + 2 * nd)), tuple(range(3, 3 + nd))
    cols = np.ascontiguousarray(v.transpose((1,) + k_axes + (2, 0) + l_axes))  # (G, *K, C/G, N, *L)
    return cols.reshape(groups, math.prod(ksize) * cg, n * math.prod(out)).transpose(0, 2, 1), out


def _weight_matrix(w, groups):
    """w (O, C/G, *K) as (G, prod(K)*C/G, O/G), rows (*k, c) as _im2col's columns."""
    o, cg, nd = w.shape[0], w.shape[1], w.ndim - 2
    wg = w.reshape((groups, o // groups, cg) + w.shape[2:])
    return np.ascontiguousarray(wg.transpose((0,) + tuple(range(3, 3 + nd)) + (2, 1))).reshape(
        groups, math.prod(w.shape[2:]) * cg, o // groups)


def _grad_rows(g, groups):
    """g (N, O, *L) as (G, N*L, O/G): channels last, rows the output positions."""
    n, o = g.shape[:2]
    gg = g.reshape((n, groups, o // groups) + g.shape[2:])
    # NOTE: explicit sizes, not -1: an empty batch has no size to infer
    return np.ascontiguousarray(np.moveaxis(gg, (1, 2), (0, -1))).reshape(
        groups, n * math.prod(g.shape[2:]), o // groups)


# NOTE: the kernels run over the batch in chunks whose im2col buffer is about this size,
# so that the buffer stays in cache between its copy and its GEMM (a whole-batch buffer of
# a small CNN is several MB: written to memory, then read back). Chunks also bound the
# memory to one chunk's buffer.
_CHUNK_BYTES = 1 << 19


def _batch_chunks(x, ksize, groups, out):
    """Slices of the batch axis whose im2col buffers hold about _CHUNK_BYTES each."""
    n = x.shape[0]
    per_image = math.prod(out) * math.prod(ksize) * x.shape[1] * x.itemsize
    step = max(1, min(n, _CHUNK_BYTES // max(per_image, 1)))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _as_2d(nd, *per_axis):
    """Per-axis parameters of a 1-d convolution as those of a 2-d one of height 1 (the
    C kernels are 2-d); 2-d ones unchanged."""
    return [((1,) if not isinstance(p[0], tuple) else ((0, 0),)) * (2 - nd) + tuple(p)
            for p in per_axis]


def _c_im2col_pays(x, ksize, stride, dilation, groups, w):
    """Whether _conv / _conv_weight take the C im2col path: groups=1, 1-d or 2-d, float32
    or float64, and a window row (kW*C entries) at least as long as an output row (the
    NumPy path's channels-first copy is faster for grey images: C = 1, runs of kW)."""
    if groups != 1 or len(ksize) not in (1, 2) or not c_kernel_ok(x, w):
        return False
    out_w = (x.shape[-1] - dilation[-1] * (ksize[-1] - 1) - 1) // stride[-1] + 1
    return x.shape[1] * ksize[-1] >= out_w


def _c_im2col(x, ksize, stride, padding, dilation, out):
    """The im2col matrix (N*L, prod(K)*C) of x (N, C, *S), 1-d or 2-d, by the C kernel:
    x zero-padded channels last (one copy, _padded), then one memcpy per window row."""
    nd = len(ksize)
    k, st, dl, o = _as_2d(nd, ksize, stride, dilation, out)
    xp = _padded(x, padding, True)                                    # (N, *Sp, C)
    x4 = xp.reshape((xp.shape[0],) + (1,) * (2 - nd) + xp.shape[1:])
    cols = np.empty((x.shape[0] * math.prod(out), math.prod(ksize) * x.shape[1]), x.dtype)
    _kernels.im2col(x4, cols, k[0], k[1], st[0], st[1], dl[0], dl[1], o[0], o[1])
    return cols


def _conv_kernel(x, w, *, stride, padding, dilation, groups):
    n, k = x.shape[0], w.shape[2:]
    if _c_im2col_pays(x, k, stride, dilation, groups, w):
        return _conv_by_c_im2col(x, w, stride=stride, padding=padding, dilation=dilation)
    out = _out_size(x.shape[2:], k, stride, padding, dilation)
    wm = _weight_matrix(w, groups)                                   # (G, *K * C/G, O/G)
    length = math.prod(out)
    y = np.empty((groups, n * length, wm.shape[2]), np.result_type(x, w))
    for part in _batch_chunks(x, k, groups, out):
        cols, _ = _im2col(x[part], k, stride, padding, dilation, groups)
        np.matmul(cols, wm, out=y[:, part.start * length:part.stop * length])
        del cols
    nd = len(out)
    y = y.reshape((groups, n) + out + (wm.shape[2],))                # (G, N, *L, O/G)
    y = y.transpose((1, 0, 2 + nd) + tuple(range(2, 2 + nd)))        # (N, G, O/G, *L)
    return np.ascontiguousarray(y).reshape((n, w.shape[0]) + out)


def _conv_by_c_im2col(x, w, *, stride, padding, dilation):
    """_conv_kernel for groups=1 in 1-d and 2-d (float32/float64): per batch chunk the
    C im2col and one GEMM, then one transpose of the output to (N, O, *L)."""
    n, o, k = x.shape[0], w.shape[0], w.shape[2:]
    out = _out_size(x.shape[2:], k, stride, padding, dilation)
    wm = _weight_matrix(w, 1)[0]                                     # (*K * C, O)
    length = math.prod(out)
    y = np.empty((n * length, o), x.dtype)
    for part in _batch_chunks(x, k, 1, out):
        cols = _c_im2col(x[part], k, stride, padding, dilation, out)
        np.matmul(cols, wm, out=y[part.start * length:part.stop * length])
        del cols
    return np.ascontiguousarray(np.moveaxis(y.reshape((n,) + out + (o,)), -1, 1))


def _conv_weight_kernel(x, g, *, ksize, stride, padding, dilation, groups):
    out = _out_size(x.shape[2:], ksize, stride, padding, dilation)
    if out != g.shape[2:]:
        raise ValueError(f"_conv_weight: g's spatial shape {g.shape[2:]} is not the "
                         f"convolution's output shape {out}")
    if _c_im2col_pays(x, ksize, stride, dilation, groups, g) and x.shape[0] > 0:
        # As _conv_by_c_im2col: the C im2col per chunk.
        rows = _grad_rows(g, 1)[0].T                                 # (O, N*L)
        length = math.prod(out)
        gw = None
        for part in _batch_chunks(x, ksize, 1, out):
            cols = _c_im2col(x[part], ksize, stride, padding, dilation, out)
            term = rows[:, part.start * length:part.stop * length] @ cols
            gw = term if gw is None else np.add(gw, term, out=gw)    # (O, *K * C)
            del cols
        o, c, nd = g.shape[1], x.shape[1], len(ksize)
        gw = np.moveaxis(gw.reshape((o,) + tuple(ksize) + (c,)), -1, 1)   # (O, C, *K)
        return np.ascontiguousarray(gw)
    rows = _grad_rows(g, groups).transpose(0, 2, 1)                  # (G, O/G, N*L)
    length = math.prod(out)
    gw = None
    for part in _batch_chunks(x, ksize, groups, out):
        cols, _ = _im2col(x[part], ksize, stride, padding, dilation, groups)
        term = np.matmul(rows[:, :, part.start * length:part.stop * length], cols)
        gw = term if gw is None else np.add(gw, term, out=gw)        # (G, O/G, *K * C/G)
        del cols
    o, cg, nd = g.shape[1], x.shape[1] // groups, len(ksize)
    if gw is None:                                                   # an empty batch
        gw = np.zeros((groups, o // groups, math.prod(ksize) * cg), np.result_type(x, g))
    gw = gw.reshape((groups, o // groups) + tuple(ksize) + (cg,))
    gw = gw.transpose((0, 1, 2 + nd) + tuple(range(2, 2 + nd)))      # (G, O/G, C/G, *K)
    return np.ascontiguousarray(gw).reshape((o, cg) + tuple(ksize))


def _full_padding(k, padding, dilation):
    """The padding of the full correlation that is _conv's adjoint at stride 1: the
    kernel's extent less the forward padding (negative: the forward padding exceeds it)."""
    return tuple((d * (kk - 1) - lo, d * (kk - 1) - hi) for kk, d, (lo, hi) in zip(k, dilation, padding))


def _conv_transpose_kernel(y, w, *, size, stride, padding, dilation, groups):
    out, k = y.shape[2:], w.shape[2:]
    if _out_size(size, k, stride, padding, dilation) != out:
        raise ValueError(f"_conv_transpose: size {tuple(size)} does not convolve back to the "
                         f"input's spatial shape {out}")
    if groups == 1 and len(k) in (1, 2) and c_kernel_ok(y, w):
        return _adjoint_by_gemm_and_c_col2im(y, w, size=size, stride=stride, padding=padding,
                                             dilation=dilation)
    full = _full_padding(k, padding, dilation)
    if all(st == 1 for st in stride) and all(lo >= 0 and hi >= 0 for lo, hi in full):
        return _adjoint_by_full_correlation(y, w, padding=padding, dilation=dilation, groups=groups)
    return _adjoint_by_col2im(y, w, size=size, stride=stride, padding=padding, dilation=dilation,
                              groups=groups)


def _adjoint_by_full_correlation(y, w, *, padding, dilation, groups):
    """_conv_transpose at stride 1: the full correlation of y, padded by the kernel's extent
    less the forward padding, with the flipped kernel, channels swapped within each group.
    One im2col of y (N*S rows of prod(K)*O/G: one buffer) and one GEMM, no scatter."""
    o, cg, k = w.shape[0], w.shape[1], w.shape[2:]
    wf = w.reshape((groups, o // groups, cg) + k).swapaxes(1, 2).reshape((groups * cg, o // groups) + k)
    wf = wf[(slice(None), slice(None)) + (slice(None, None, -1),) * len(k)]
    return _conv_kernel(y, wf, stride=(1,) * len(k), padding=_full_padding(k, padding, dilation),
                        dilation=dilation, groups=groups)


def _adjoint_by_gemm_and_c_col2im(y, w, *, size, stride, padding, dilation):
    """_conv_transpose for groups=1 in 1-d and 2-d (float32/float64): per batch chunk one
    GEMM (rows, O) @ (O, prod(K)*C) into window columns, then the C col2im adds each
    column run of C entries where its window entry lands (channels-last accumulator), and
    one transpose to (N, C, *S). Against the full correlation (an im2col of y, prod(K)*O
    wide, and a GEMM only C wide) it copies half to a quarter as much and its GEMM is the
    wide one: about 1.5x faster on W7's layers (measured, alternating calls)."""
    n, o, out = y.shape[0], y.shape[1], y.shape[2:]
    k, c, nd = w.shape[2:], w.shape[1], len(out)
    k2, out2, size2, st2, dl2, pd2 = _as_2d(nd, k, out, size, stride, dilation, padding)
    wt = _weight_matrix(w, 1)[0].T                                   # (O, *K * C), a view
    rows = _grad_rows(y, 1)[0]                                       # (N*L, O)
    acc = np.zeros((n,) + size2 + (c,), np.result_type(y, w))        # (N, *S, C)
    length = math.prod(out)
    # chunks of about _CHUNK_BYTES of window columns, as the im2col kernels
    step = max(1, min(n, _CHUNK_BYTES // max(length * wt.shape[1] * acc.itemsize, 1)))
    for start in range(0, n, step):
        stop = min(start + step, n)
        cols = rows[start * length:stop * length] @ wt               # (rows, *K * C)
        _kernels.col2im_add(cols, acc[start:stop], k2[0], k2[1], st2[0], st2[1], pd2[0][0],
                            pd2[1][0], dl2[0], dl2[1], out2[0], out2[1])
        del cols
    x = np.moveaxis(acc.reshape((n,) + tuple(size) + (c,)), -1, 1)    # (N, C, *S)
    return np.ascontiguousarray(x)


def _adjoint_by_col2im(y, w, *, size, stride, padding, dilation, groups):
    """_conv_transpose in general (stride > 1, or padding beyond the kernel's extent): one
    GEMM per kernel offset k, (N*L, O/G) @ (O/G, C/G), slice-added into the padded input
    where offset k of each window lands (col2im). Its buffers are input-gradient sized:
    no im2col buffer at all."""
    n, o, out = y.shape[0], y.shape[1], y.shape[2:]
    k, cg, nd = w.shape[2:], w.shape[1], len(out)
    rows = _grad_rows(y, groups)                                      # (G, N*L, O/G)
    wm = _weight_matrix(w, groups).reshape((groups, math.prod(k), cg, o // groups))
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(size, padding))
    xp = np.zeros((groups, n) + padded + (cg,), dtype=np.result_type(y, w))
    part = np.empty((groups, rows.shape[1], cg), dtype=xp.dtype)
    for flat, idx in enumerate(np.ndindex(*k)):
        np.matmul(rows, wm[:, flat].transpose(0, 2, 1), out=part)
        # window offset `idx` of output position l lands at l*stride + idx*dilation.
        target = tuple(slice(i * d, i * d + (l - 1) * s + 1, s)
                       for i, d, l, s in zip(idx, dilation, out, stride))
        xp[(slice(None), slice(None)) + target] += part.reshape((groups, n) + out + (cg,))
    del part
    crop = tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, padding))
    x = xp[(slice(None), slice(None)) + crop]                        # (G, N, *S, C/G)
    x = x.transpose((1, 0, 2 + nd) + tuple(range(2, 2 + nd)))        # (N, G, C/G, *S)
    return np.ascontiguousarray(x).reshape((n, groups * cg) + tuple(size))


# ---------------------------------------------------------------------------------------
# Rules: each op's gradients are the other two ops (see the module docstring)
# ---------------------------------------------------------------------------------------

def _conv_vjp(g, ans, x, w, *, stride, padding, dilation, groups):
    p = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    gx = tg._conv_transpose(g, w, size=x.shape[2:], **p) if tg.needs_grad(x) else None
    gw = tg._conv_weight(x, g, ksize=w.shape[2:], **p) if tg.needs_grad(w) else None
    return gx, gw


def _conv_transpose_vjp(h, ans, y, w, *, size, stride, padding, dilation, groups):
    p = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    gy = tg._conv(h, w, **p) if tg.needs_grad(y) else None
    gw = tg._conv_weight(h, y, ksize=w.shape[2:], **p) if tg.needs_grad(w) else None
    return gy, gw


def _conv_weight_vjp(h, ans, x, g, *, ksize, stride, padding, dilation, groups):
    p = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    gx = tg._conv_transpose(g, h, size=x.shape[2:], **p) if tg.needs_grad(x) else None
    gg = tg._conv(x, h, **p) if tg.needs_grad(g) else None
    return gx, gg


def _product_rule(op, t, a, b, **p):
    """The tangent of the bilinear op(a, b): op(ta, b) + op(a, tb)."""
    ta, tb = t
    terms = ([op(ta, b, **p)] if ta is not None else []) + ([op(a, tb, **p)] if tb is not None else [])
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


def _conv_jvp(t, ans, x, w, **p):
    return _product_rule(tg._conv, t, x, w, **p)


def _conv_transpose_jvp(t, ans, y, w, **p):
    return _product_rule(tg._conv_transpose, t, y, w, **p)


def _conv_weight_jvp(t, ans, x, g, **p):
    return _product_rule(tg._conv_weight, t, x, g, **p)


# ---------------------------------------------------------------------------------------
# vmap's batching rules (register_op(batch=)): inputs are physical, the vmapped axis first
# ---------------------------------------------------------------------------------------
#
# Note: [convolutions under vmap]
# A batched x alone folds the vmapped axis B into N: (B, N, C, *S) -> (B*N, C, *S), one
# call. A batched weight (one filter bank per example) is a grouped convolution: the
# examples' channels side by side, (N, B*C, *S), against the weights stacked along O,
# (B*O, C/g, *K), with B*groups groups -- group (b, j) sees example b's channel group j
# only. The weight gradient _conv_weight is per example the same way. A logical shape
# these reshapes do not fit (the kernels check little) runs once per example instead,
# so each example gets the kernel's own behaviour.

def _fold(t):
    """(B, N, ...) -> (B*N, ...)."""
    return tg.reshape(t, (t.shape[0] * t.shape[1],) + tuple(t.shape[2:]))


def _side_by_side(t, batched, size):
    """Physical (B, N, C, *S) (or an unbatched (N, C, *S), shared) -> (N, B*C, *S)."""
    if batched:
        t = tg.swapaxes(t, 0, 1)
    else:
        t = tg.broadcast_to(tg.expand_dims(t, 1), (t.shape[0], size) + tuple(t.shape[1:]))
    return tg.reshape(t, (t.shape[0], size * t.shape[2]) + tuple(t.shape[3:]))


def _split_channels(t, size):
    """(N, B*O, *L) -> (B, N, O, *L)."""
    n, bo = t.shape[:2]
    t = tg.reshape(t, (n, size, bo // size) + tuple(t.shape[2:]))
    return tg.swapaxes(t, 0, 1)


def _stack_weights(w, size):
    """(B, O, C/g, *K) -> (B*O, C/g, *K)."""
    return tg.reshape(w, (size * w.shape[1],) + tuple(w.shape[2:]))


def _logical(x, batched):
    return tuple(x.shape[1:]) if batched else tuple(x.shape)


def _batch_into_n(name, ndims):
    """The rule of an op on (N, C, ...) inputs that treats every sample n alike (pooling,
    im2col): the vmapped axis is folded into N of every input (an unbatched one is
    broadcast to the batch first), one call, and split off the output's N again.
    ndims(**params): the logical ndim each input must have (None: at least 2); other
    shapes, or inputs of different N, run once per example (the kernel's behaviour)."""
    def rule(inputs, batched, **params):
        size = next(x.shape[0] for x, b in zip(inputs, batched) if b)
        shapes = [_logical(x, b) for x, b in zip(inputs, batched)]
        if any(len(s) < 2 or (n is not None and len(s) != n)
               for s, n in zip(shapes, ndims(**params))) or len({s[0] for s in shapes}) > 1:
            return _batching._loop(getattr(tg, name), inputs, batched, params, None)
        args = [_fold(x if b else tg.broadcast_to(x, (size,) + s))
                for x, b, s in zip(inputs, batched, shapes)]
        out = getattr(tg, name)(*args, **params)
        return tg.reshape(out, (size, shapes[0][0]) + tuple(out.shape[1:]))
    rule.__name__ = rule.__qualname__ = f"_{name}_batch"
    return rule


def _filter_bank_batch(op, inputs, batched, params, groups, channels_agree):
    """The rule of op(a, w) (_conv, _conv_transpose), w a filter bank whose axis 0 is
    split into `groups`: Note: [convolutions under vmap]. channels_agree(a_shape,
    w_shape): whether the logical shapes' channel counts fit each other."""
    (a, w), (ba, bw) = inputs, batched
    a_shape, w_shape = _logical(a, ba), _logical(w, bw)
    size = (a if ba else w).shape[0]
    if (len(a_shape) != len(w_shape) or len(a_shape) < 3
            or not channels_agree(a_shape, w_shape) or w_shape[0] % groups):
        return _batching._loop(op, inputs, batched, dict(params, groups=groups), None)
    if not bw:
        out = op(_fold(a), w, groups=groups, **params)
        return tg.reshape(out, (size, a_shape[0]) + tuple(out.shape[1:]))
    out = op(_side_by_side(a, ba, size), _stack_weights(w, size), groups=size * groups,
             **params)
    return _split_channels(out, size)


def _conv_batch(inputs, batched, *, stride, padding, dilation, groups):
    # x (N, C, *S), w (O, C/g, *K)
    return _filter_bank_batch(tg._conv, inputs, batched,
                              dict(stride=stride, padding=padding, dilation=dilation), groups,
                              lambda xs, ws: xs[1] == ws[1] * groups)


def _conv_transpose_batch(inputs, batched, *, size, stride, padding, dilation, groups):
    # y (N, C_in, *L), w (C_in, C_out/g, *K)
    return _filter_bank_batch(tg._conv_transpose, inputs, batched,
                              dict(size=size, stride=stride, padding=padding,
                                   dilation=dilation), groups,
                              lambda ys, ws: ys[1] == ws[0])


def _conv_weight_batch(inputs, batched, *, ksize, stride, padding, dilation, groups):
    (x, g), (bx, bg) = inputs, batched
    p = dict(ksize=ksize, stride=stride, padding=padding, dilation=dilation)
    xs, gs = _logical(x, bx), _logical(g, bg)
    n = (x if bx else g).shape[0]
    if len(xs) != len(gs) or len(xs) < 3 or xs[0] != gs[0] or xs[1] % groups or gs[1] % groups:
        return _batching._loop(tg._conv_weight, inputs, batched, dict(p, groups=groups), None)
    gw = tg._conv_weight(_side_by_side(x, bx, n), _side_by_side(g, bg, n), groups=n * groups,
                         **p)                                         # (B*O, C/g, *K)
    return tg.reshape(gw, (n, gs[1]) + tuple(gw.shape[1:]))


# ---------------------------------------------------------------------------------------
# The public functions (argument checks, then one op and one bias add)
# ---------------------------------------------------------------------------------------

def _ints(name, arg, value, nd, minimum):
    """An int or a tuple of `nd` ints, each >= minimum, as a tuple."""
    items = (value,) * nd if isinstance(value, (numbers.Integral, np.integer)) else value
    try:
        items = tuple(items)
    except TypeError:
        items = None
    if (items is None or len(items) != nd
            or any(isinstance(v, bool) or not isinstance(v, (numbers.Integral, np.integer))
                   or v < minimum for v in items)):
        raise ValueError(f"{name}: {arg} must be an int or a tuple of {nd} ints, each >= "
                         f"{minimum}, got {value!r}")
    return tuple(int(v) for v in items)


def _operands(name, nd, input, weight, bias):
    """(x batched, weight, bias, whether x was unbatched), with dtype and rank checks."""
    x, w = tg.asarray(input), tg.asarray(weight)
    if x.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"{name}: expected a {nd + 2}-d (batched) or {nd + 1}-d (unbatched) "
                         f"input, got input of shape {x.shape}")
    if w.ndim != nd + 2:
        raise ValueError(f"{name}: expected a {nd + 2}-d weight, got weight of shape {w.shape}")
    operands = [("input", x), ("weight", w)]
    if bias is not None:
        bias = tg.asarray(bias)
        operands.append(("bias", bias))
    for arg, t in operands:
        if t.dtype.kind != "f":
            raise TypeError(f"{name}: {arg} must be floating point, got {t.dtype}")
    if any(t.dtype != x.dtype for _, t in operands):
        raise TypeError(f"{name}: input, weight and bias must have the same dtype (as in "
                        f"PyTorch), got " + ", ".join(f"{a} {t.dtype}" for a, t in operands))
    unbatched = x.ndim == nd + 1
    return (tg.reshape(x, (1,) + x.shape) if unbatched else x), w, bias, unbatched


def _groups(name, groups):
    if isinstance(groups, bool) or not isinstance(groups, (numbers.Integral, np.integer)) or groups < 1:
        raise ValueError(f"{name}: groups must be a positive int, got {groups!r}")
    return int(groups)


def _finish(name, y, bias, channels, unbatched, nd):
    if bias is not None:
        if bias.shape != (channels,):
            raise ValueError(f"{name}: bias must have shape ({channels},) (the output "
                             f"channels), got {bias.shape}")
        y = y + tg.reshape(bias, (channels,) + (1,) * nd)
    return tg.reshape(y, y.shape[1:]) if unbatched else y


def _shown_weight(w, channels, groups):
    """The weight's shape with its in/groups axis spelled out: (16, 4/groups=1, 3, 3)."""
    dims = [str(w.shape[0]), f"{channels}/groups={groups}"] + [str(k) for k in w.shape[2:]]
    return "(" + ", ".join(dims) + ")"


def _conv_nd(name, nd, input, weight, bias, stride, padding, dilation, groups):
    x, w, bias, unbatched = _operands(name, nd, input, weight, bias)
    groups = _groups(name, groups)
    stride = _ints(name, "stride", stride, nd, 1)
    dilation = _ints(name, "dilation", dilation, nd, 1)
    o, cg, k = w.shape[0], w.shape[1], w.shape[2:]
    if o % groups:
        raise ValueError(f"{name}: out_channels {o} (weight {w.shape}) must be divisible by "
                         f"groups={groups}")
    if x.shape[1] != cg * groups:
        raise ValueError(f"{name}: expected input with {cg * groups} channels (weight "
                         f"{_shown_weight(w, cg * groups, groups)}) but got input of shape "
                         f"{x.shape[1:] if unbatched else x.shape}")
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{name}: padding='same' needs stride 1 (as in PyTorch), "
                                 f"got stride={stride}")
            # NOTE: as PyTorch, an odd total puts the extra padding after (right/bottom).
            total = [d * (kk - 1) for d, kk in zip(dilation, k)]
            pads = tuple((t // 2, t - t // 2) for t in total)
        else:
            raise ValueError(f"{name}: padding must be an int, a tuple of {nd} ints, 'same' "
                             f"or 'valid', got {padding!r}")
    else:
        pads = tuple((p, p) for p in _ints(name, "padding", padding, nd, 0))
    out = _out_size(x.shape[2:], k, stride, pads, dilation)
    if any(n < 1 for n in out) or any(k_ == 0 for k_ in k):
        raise ValueError(f"{name}: the kernel {tuple(k)} with dilation {dilation} does not fit "
                         f"in the input {x.shape} padded by {tuple(p[0] for p in pads)}")
    y = tg._conv(x, w, stride=stride, padding=pads, dilation=dilation, groups=groups)
    return _finish(name, y, bias, o, unbatched, nd)


def _conv_transpose_nd(name, nd, input, weight, bias, stride, padding, output_padding, groups,
                       dilation):
    x, w, bias, unbatched = _operands(name, nd, input, weight, bias)
    groups = _groups(name, groups)
    stride = _ints(name, "stride", stride, nd, 1)
    dilation = _ints(name, "dilation", dilation, nd, 1)
    if isinstance(padding, str):
        raise ValueError(f"{name}: padding must be an int or a tuple of {nd} ints (PyTorch "
                         f"has no string padding for transposed convolutions), got {padding!r}")
    padding = _ints(name, "padding", padding, nd, 0)
    output_padding = _ints(name, "output_padding", output_padding, nd, 0)
    if any(op >= s for op, s in zip(output_padding, stride)):
        # NOTE: PyTorch also accepts output_padding < dilation; not supported here.
        raise ValueError(f"{name}: output_padding {output_padding} must be smaller than "
                         f"stride {stride}")
    c_in, cg, k = w.shape[0], w.shape[1], w.shape[2:]
    if c_in % groups:
        raise ValueError(f"{name}: in_channels {c_in} (weight {w.shape}) must be divisible "
                         f"by groups={groups}")
    if x.shape[1] != c_in:
        raise ValueError(f"{name}: expected input with {c_in} channels (weight {w.shape}, "
                         f"(in, out/groups, *kernel)) but got input of shape "
                         f"{x.shape[1:] if unbatched else x.shape}")
    size = tuple((n - 1) * s - 2 * p + d * (kk - 1) + op + 1 for n, s, p, d, kk, op in
                 zip(x.shape[2:], stride, padding, dilation, k, output_padding))
    if any(n < 1 for n in size) or any(k_ == 0 for k_ in k):
        raise ValueError(f"{name}: the output size {size} (input {x.shape}, kernel {tuple(k)}, "
                         f"padding {padding}) is not positive")
    y = tg._conv_transpose(x, w, size=size, stride=stride, padding=tuple((p, p) for p in padding),
                           dilation=dilation, groups=groups)
    return _finish(name, y, bias, cg * groups, unbatched, nd)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution of input (N, C, L) (or (C, L)) with weight (O, C/groups, K), as
    ``torch.nn.functional.conv1d``; `padding` an int, a 1-tuple, "same" or "valid".

    >>> import tapegrad as tg
    >>> tg.conv1d(tg.ones((1, 1, 5)), tg.ones((1, 1, 3)), padding="same").tolist()
    [[[2.0, 3.0, 3.0, 3.0, 2.0]]]
    """
    return _conv_nd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution of input (N, C, H, W) (or (C, H, W)) with weight (O, C/groups, kH, kW),
    as ``torch.nn.functional.conv2d``; stride, padding, dilation: an int or a pair
    (padding also "same" or "valid").

    >>> import tapegrad as tg
    >>> tg.conv2d(tg.ones((2, 3, 8, 8)), tg.ones((4, 3, 3, 3)), stride=2).shape
    (2, 4, 3, 3)
    """
    return _conv_nd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-d convolution of input (N, C, D, H, W) (or (C, D, H, W)) with weight
    (O, C/groups, kD, kH, kW), as ``torch.nn.functional.conv3d``.

    >>> import tapegrad as tg
    >>> tg.conv3d(tg.ones((1, 2, 4, 4, 4)), tg.ones((3, 2, 2, 2, 2))).shape
    (1, 3, 3, 3, 3)
    """
    return _conv_nd("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-d transposed convolution (the gradient of conv1d in its input) of input (N, C_in, L)
    with weight (C_in, C_out/groups, K), as ``torch.nn.functional.conv_transpose1d`` (note
    its argument order: groups before dilation). Output length
    ``(L - 1)*stride - 2*padding + dilation*(K - 1) + output_padding + 1``.

    >>> import tapegrad as tg
    >>> tg.conv_transpose1d(tg.ones((1, 1, 3)), tg.ones((1, 1, 2)), stride=2).tolist()
    [[[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]]
    """
    return _conv_transpose_nd("conv_transpose1d", 1, input, weight, bias, stride, padding,
                              output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-d transposed convolution of input (N, C_in, H, W) with weight
    (C_in, C_out/groups, kH, kW), as ``torch.nn.functional.conv_transpose2d``.

    >>> import tapegrad as tg
    >>> tg.conv_transpose2d(tg.ones((1, 4, 3, 3)), tg.ones((4, 2, 3, 3)), stride=2,
    ...                     padding=1, output_padding=1).shape
    (1, 2, 6, 6)
    """
    return _conv_transpose_nd("conv_transpose2d", 2, input, weight, bias, stride, padding,
                              output_padding, groups, dilation)


# ---------------------------------------------------------------------------------------
# Samples and registration
# ---------------------------------------------------------------------------------------

def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _p(nd, stride=1, padding=0, dilation=1, groups=1):
    pad = padding if isinstance(padding, tuple) else ((padding, padding),) * nd
    return dict(stride=(stride,) * nd, padding=pad, dilation=(dilation,) * nd, groups=groups)


_CONV_SAMPLES = [
    tg.Sample(_r(2, 2, 5), _r(3, 2, 3, seed=1), **_p(1)),
    tg.Sample(_r(1, 4, 7), _r(4, 2, 2, seed=2), **_p(1, stride=2, padding=((1, 2),), groups=2)),
    tg.Sample(_r(1, 2, 4, 5), _r(2, 2, 2, 3, seed=3), **_p(2, padding=1)),
    tg.Sample(_r(1, 2, 5, 5), _r(2, 1, 2, 2, seed=4), **_p(2, stride=2, dilation=2, groups=2)),
    tg.Sample(_r(1, 1, 3, 3, 3), _r(2, 1, 2, 2, 2, seed=5), **_p(3)),
]
_CONV_WEIGHT_SAMPLES = [
    tg.Sample(_r(2, 2, 5), _r(2, 3, 3, seed=1), ksize=(3,), **_p(1)),
    tg.Sample(_r(1, 4, 7), _r(1, 4, 5, seed=2), ksize=(2,), **_p(1, stride=2, padding=((1, 2),), groups=2)),
    tg.Sample(_r(1, 2, 5, 5), _r(1, 2, 2, 2, seed=4), ksize=(2, 2), **_p(2, stride=2, dilation=2, groups=2)),
]
_CONV_TRANSPOSE_SAMPLES = [
    tg.Sample(_r(2, 3, 3), _r(3, 2, 3, seed=1), size=(5,), **_p(1)),
    tg.Sample(_r(1, 4, 3), _r(4, 2, 2, seed=2), size=(5,), **_p(1, stride=2, padding=((1, 1),), groups=2)),
    tg.Sample(_r(1, 2, 2, 2), _r(2, 1, 2, 2, seed=4), size=(5, 5), **_p(2, stride=2, dilation=2, groups=2)),
]

_FUNCTION_SAMPLES = {
    "conv1d": [
        tg.Sample(_r(2, 2, 5), _r(3, 2, 3, seed=1), _r(3, seed=2)),
        tg.Sample(_r(1, 4, 6), _r(2, 2, 2, seed=1), padding="same", dilation=1, groups=2),
        tg.Sample(_r(2, 5), _r(2, 2, 3, seed=1), None, 2, 1),
    ],
    "conv2d": [
        tg.Sample(_r(1, 2, 4, 4), _r(2, 2, 3, 3, seed=1), _r(2, seed=2), stride=(1, 2), padding=1),
        tg.Sample(_r(1, 2, 5, 4), _r(2, 2, 2, 2, seed=3), padding="same", dilation=(2, 1)),
    ],
    "conv3d": [
        tg.Sample(_r(1, 2, 3, 3, 3), _r(2, 1, 2, 2, 2, seed=1), _r(2, seed=2), groups=2),
    ],
    "conv_transpose1d": [
        tg.Sample(_r(2, 2, 3), _r(2, 3, 2, seed=1), _r(3, seed=2), stride=2, output_padding=1),
        tg.Sample(_r(1, 4, 3), _r(4, 1, 3, seed=1), padding=1, groups=2, dilation=2),
    ],
    "conv_transpose2d": [
        tg.Sample(_r(1, 2, 2, 3), _r(2, 2, 3, 2, seed=1), _r(2, seed=2), stride=(2, 1), padding=(1, 0)),
    ],
}

_PARAMS_DOC = ("stride, dilation: tuples of ints per spatial axis; padding: a tuple of "
               "(before, after) pairs; groups: an int")


def register(registry):
    """Register the convolution ops and functions with `registry` (called from
    ``tapegrad_nn.functional.register``)."""
    registry.register_op(
        "_conv", kernels={"cpu": _conv_kernel}, vjp=_conv_vjp, jvp=_conv_jvp, save_ans=False,
        method=False, samples=_CONV_SAMPLES, batch=_conv_batch,
        doc="_conv(x, w, *, stride, padding, dilation, groups): the N-d convolution "
            "(cross-correlation, as PyTorch) of x (N, C, *S) with w (O, C/groups, *K) -> "
            f"(N, O, *L), the op behind tg.conv1d/2d/3d; {_PARAMS_DOC}.")
    registry.register_op(
        "_conv_transpose", kernels={"cpu": _conv_transpose_kernel}, vjp=_conv_transpose_vjp,
        jvp=_conv_transpose_jvp, save_ans=False, method=False, samples=_CONV_TRANSPOSE_SAMPLES,
        batch=_conv_transpose_batch,
        doc="_conv_transpose(y, w, *, size, stride, padding, dilation, groups): the adjoint "
            "of _conv in x: y (N, O, *L) and w (O, C/groups, *K) -> (N, C, *size), the op "
            f"behind tg.conv_transpose1d/2d and the input gradient of _conv; {_PARAMS_DOC}.")
    registry.register_op(
        "_conv_weight", kernels={"cpu": _conv_weight_kernel}, vjp=_conv_weight_vjp,
        jvp=_conv_weight_jvp, save_ans=False, method=False, samples=_CONV_WEIGHT_SAMPLES,
        batch=_conv_weight_batch,
        doc="_conv_weight(x, g, *, ksize, stride, padding, dilation, groups): the adjoint of "
            "_conv in w: x (N, C, *S) and g (N, O, *L) -> (O, C/groups, *ksize), the weight "
            f"gradient of _conv; {_PARAMS_DOC}.")
    for name, fn in (("conv1d", conv1d), ("conv2d", conv2d), ("conv3d", conv3d),
                     ("conv_transpose1d", conv_transpose1d),
                     ("conv_transpose2d", conv_transpose2d)):
        registry.register_function(name, fn, method=False, samples=_FUNCTION_SAMPLES[name])
