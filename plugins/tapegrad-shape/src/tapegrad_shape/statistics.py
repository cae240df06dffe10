"""Differences and statistics with NumPy's names and semantics: gradient, diff, any, all,
amax, amin, nansum, nanmean, nanvar, nanstd, average, ptp, median, quantile, percentile,
nanmedian, nanquantile, nanpercentile.

Most are compositions of the ops of :mod:`tapegrad_shape.ops` and tapegrad-elementwise
(slices, sums, ``where``), so they are differentiable to any order with no rule of their
own (``any``/``all`` count nonzero entries: boolean results, no gradient). The order statistics
(median, quantile, ...) use four private ops: ``_quantile_index`` (the elements a
quantile reads) and ``_quantile_weight`` (their interpolation weight), both without
gradient, ``_take_last`` (values at tensor indices along the last axis) and its
scatter-add gradient ``_take_last_grad``; the value is NumPy's interpolation of the two
neighbours, so the gradient is the subgradient at the selected elements (see Note:
[quantile plan]).

>>> import tapegrad as tg
>>> x = tg.tensor([1., 4., 2., 8.], requires_grad=True)
>>> tg.median(x)                       # the mean of the two middle values, as NumPy
tensor(3., grad_fn=<...>)
>>> tg.median(x).backward(); x.grad    # so they share the gradient
tensor([0. , 0.5, 0.5, 0. ])
>>> tg.diff(x).tolist(), tg.gradient(x).tolist()
([3.0, -2.0, 6.0], [3.0, 0.5, 2.0, 6.0])
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import tapegrad as tg
from tapegrad._compile import compile_check, run_eagerly

from .ops import _abs2, _batch_size, _shape_of, _with_batch_axis
from .ops import (_EXTREMUM_SAMPLES, _as_tensor, _as_tensor_like, _axes, _complex_distinct,
                  _constant_argument, _distinct, _kept_shape, _mask, _rand, _sqrt_of_var,
                  derivative_reason)

__all__ = ["gradient", "diff", "any", "all", "ptp", "nansum", "nanmean", "nanvar", "nanstd",
           "average", "median", "quantile", "percentile", "nanmedian", "nanquantile",
           "nanpercentile", "register"]

_NOVALUE = object()      # "argument not given" (NumPy's np._NoValue), for diff's prepend


def _index(ndim, axis, item):
    """An index tuple selecting `item` (an int or slice) on `axis` and everything else."""
    return (slice(None),) * axis + (item,) + (slice(None),) * (ndim - axis - 1)


def _isnan(x):
    # NOTE: x != x is NumPy's isnan for floats (NaN is the only value unequal to itself);
    # a comparison, so the mask is a constant in the graph.
    return x != x


# ---------------------------------------------------------------------------------------
# diff, gradient
# ---------------------------------------------------------------------------------------

def diff(a, n=1, axis=-1, prepend=_NOVALUE, append=_NOVALUE):
    """The n-th discrete difference along `axis`, as ``np.diff``: ``out[i] = a[i+1] -
    a[i]``, applied `n` times; `prepend` / `append` (scalars are broadcast to a slice of
    length one) are joined to `a` first. Differentiable in `a`, `prepend` and `append`;
    booleans give ``a[i+1] != a[i]``.

    >>> import tapegrad as tg
    >>> tg.diff(tg.tensor([1., 2., 4., 7.]), n=2).tolist()
    [1.0, 1.0]
    >>> tg.diff(tg.tensor([1., 2.]), prepend=0.0).tolist()
    [1.0, 1.0]
    """
    if isinstance(n, bool) or not isinstance(n, (numbers.Integral, np.integer)):
        raise TypeError(f"diff: the order n must be an integer, got {n!r}")
    if n < 0:
        raise ValueError(f"diff: the order n must be non-negative, got {n}")
    x = _as_tensor(a)
    if x.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional, got a 0-d "
                         "tensor")
    (ax,) = _axes(axis, x.ndim, "diff")
    if n == 0:
        return x
    parts = []
    for value, where in ((prepend, "prepend"), (append, "append")):
        if value is _NOVALUE:
            parts.append(None)
            continue
        v = _as_tensor_like(value, x)
        if v.ndim == 0:
            shape = list(x.shape)
            shape[ax] = 1
            v = tg.broadcast_to(v, tuple(shape))
        parts.append(v)
    if parts[0] is not None or parts[1] is not None:
        x = tg.concatenate([p for p in (parts[0], x, parts[1]) if p is not None], axis=ax)
    subtract = tg.not_equal if x.dtype == np.bool_ else tg.subtract
    for _ in range(n):
        x = subtract(x[_index(x.ndim, ax, slice(1, None))], x[_index(x.ndim, ax, slice(None, -1))])
    return x


def _spacings(varargs, x, axes):
    """The spacing of each axis as NumPy's np.gradient reads `varargs`: a float (uniform)
    or the 1-D float64 array of coordinate differences."""
    if not varargs:
        return [1.0] * len(axes)
    if len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        varargs = varargs * len(axes)
    elif len(varargs) != len(axes):
        raise TypeError(f"gradient: invalid number of spacing arguments: {len(varargs)} for "
                        f"{len(axes)} axes (give none, one scalar, or one per axis)")
    out = []
    for ax, spacing in zip(axes, varargs):
        d = np.asarray(_constant_argument("gradient", "the spacing", spacing))
        if d.ndim == 0:
            out.append(float(d))
            continue
        if d.ndim != 1:
            raise ValueError(f"gradient: distances must be either scalars or 1-D, got shape "
                             f"{d.shape}")
        if len(d) != x.shape[ax]:
            raise ValueError(f"gradient: when 1-D, distances must match the length of the "
                             f"corresponding dimension: axis {ax} has {x.shape[ax]}, the "
                             f"coordinates {len(d)}")
        dx = np.diff(d.astype(np.float64))
        out.append(float(dx[0]) if dx.size and (dx == dx[0]).all() else dx)
    return out


def _gradient_along(f, ax, dx, edge_order):
    n = f.ndim
    s = lambda item: f[_index(n, ax, item)]            # noqa: E731 - a local shorthand

    def coef(values):                     # coordinate-dependent weights, broadcast on ax
        shape = [1] * n
        shape[ax] = -1
        return tg.asarray(np.asarray(values, dtype=f.dtype).reshape(shape), device=f.device)

    if isinstance(dx, float):
        interior = (s(slice(2, None)) - s(slice(None, -2))) / (2.0 * dx)
        if edge_order == 1:
            first = (s(slice(1, 2)) - s(slice(0, 1))) / dx
            last = (s(slice(-1, None)) - s(slice(-2, -1))) / dx
        else:
            first = (-1.5 / dx) * s(slice(0, 1)) + (2.0 / dx) * s(slice(1, 2)) \
                + (-0.5 / dx) * s(slice(2, 3))
            last = (0.5 / dx) * s(slice(-3, -2)) + (-2.0 / dx) * s(slice(-2, -1)) \
                + (1.5 / dx) * s(slice(-1, None))
    else:
        dx1, dx2 = dx[:-1], dx[1:]
        interior = coef(-dx2 / (dx1 * (dx1 + dx2))) * s(slice(None, -2)) \
            + coef((dx2 - dx1) / (dx1 * dx2)) * s(slice(1, -1)) \
            + coef(dx1 / (dx2 * (dx1 + dx2))) * s(slice(2, None))
        if edge_order == 1:
            first = (s(slice(1, 2)) - s(slice(0, 1))) / float(dx[0])
            last = (s(slice(-1, None)) - s(slice(-2, -1))) / float(dx[-1])
        else:
            d1, d2 = float(dx[0]), float(dx[1])
            first = (-(2.0 * d1 + d2) / (d1 * (d1 + d2))) * s(slice(0, 1)) \
                + ((d1 + d2) / (d1 * d2)) * s(slice(1, 2)) \
                + (-d1 / (d2 * (d1 + d2))) * s(slice(2, 3))
            d1, d2 = float(dx[-2]), float(dx[-1])
            last = (d2 / (d1 * (d1 + d2))) * s(slice(-3, -2)) \
                + (-(d2 + d1) / (d1 * d2)) * s(slice(-2, -1)) \
                + ((2.0 * d2 + d1) / (d2 * (d1 + d2))) * s(slice(-1, None))
    return tg.concatenate([first, interior, last], axis=ax)


def gradient(f, *varargs, axis=None, edge_order=1):
    """The gradient of sampled values f by finite differences, as ``np.gradient``: second
    order central differences inside, first (``edge_order=1``) or second order one-sided
    differences at the ends. `varargs`: nothing (spacing 1), one scalar for every axis, or
    one per axis: a scalar spacing or the 1-D coordinates of the samples. One tensor for
    one axis, a tuple of one per axis otherwise. Linear in f, so differentiable to any
    order in f; the spacing is a constant (a tensor there that requires grad raises
    NotImplementedError: its derivative is not computed).

    >>> import tapegrad as tg
    >>> tg.gradient(tg.tensor([1., 2., 4., 7.]), 2.0).tolist()
    [0.5, 0.75, 1.25, 1.5]
    >>> gy, gx = tg.gradient(tg.tensor([[1., 2., 6.], [3., 4., 5.]]))
    >>> gx.tolist()
    [[1.0, 2.5, 4.0], [1.0, 1.0, 1.0]]
    """
    x = _as_tensor(f)
    axes = _axes(axis, x.ndim, "gradient")
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order!r}")
    spacings = _spacings(varargs, x, axes)
    if x.dtype.kind not in "fc":
        x = x.astype(np.float64)          # NumPy's np.gradient computes integers in float64
    outs = []
    for ax, dx in zip(axes, spacings):
        if x.shape[ax] < edge_order + 1:
            raise ValueError(
                f"gradient: axis {ax} of a tensor of shape {x.shape} is too small to "
                f"calculate a numerical gradient: at least edge_order + 1 = {edge_order + 1} "
                f"elements are required")
        outs.append(_gradient_along(x, ax, dx, edge_order))
    # NOTE: NumPy 2 returns a tuple for several axes (a list before 2.0).
    return outs[0] if len(outs) == 1 else tuple(outs)


# ---------------------------------------------------------------------------------------
# any, all (ops), ptp, average
# ---------------------------------------------------------------------------------------

def any(a, axis=None, *, keepdims=False):      # NumPy's name (shadows the builtin here)
    """Whether any element of `a` over `axis` is true (nonzero; NaN counts as true), as
    ``np.any``; also ``t.any()``. A bool tensor, not differentiable.

    >>> import tapegrad as tg
    >>> tg.tensor([[0., 1.], [0., 0.]]).any(axis=1).tolist()
    [True, False]
    """
    return _count_nonzero(a, axis, keepdims, "any", True) > 0


def all(a, axis=None, *, keepdims=False):      # NumPy's name (shadows the builtin here)
    """Whether every element of `a` over `axis` is true (nonzero; NaN counts as true), as
    ``np.all``; also ``t.all()``. A bool tensor, not differentiable (an empty slice: True).

    >>> import tapegrad as tg
    >>> tg.all(tg.tensor([[0., 1.], [2., 3.]]), axis=0).tolist()
    [False, True]
    """
    return _count_nonzero(a, axis, keepdims, "all", False) == 0


def _count_nonzero(a, axis, keepdims, op, nonzero):
    # NOTE: a count (an int64 sum of a comparison) rather than an op of its own, so it runs
    # on every device that has sum and the comparisons; the sum of an empty slice is 0, so
    # any() of it is False and all() True, as NumPy's.
    x = _as_tensor(a)
    _axes(axis, x.ndim, op)                                # checks axis, naming the op
    hits = (x != 0) if nonzero else (x == 0)
    return tg.sum(hits.astype(np.int64), axis, keepdims=keepdims)


def ptp(a, axis=None, keepdims=False):
    """Range (peak to peak) ``max - min`` over `axis`, as ``np.ptp``. Its gradient is that
    of tg.max minus that of tg.min: tied maxima (minima) share theirs evenly.

    >>> import tapegrad as tg
    >>> tg.ptp(tg.tensor([[1., 5.], [2., 3.]]), axis=1).tolist()
    [4.0, 1.0]
    """
    x = _as_tensor(a)
    _axes(axis, x.ndim, "ptp")                # a bad axis names ptp, not its max
    return tg.max(x, axis, keepdims=keepdims) - tg.min(x, axis, keepdims=keepdims)


def _check_weight_sums(scl):
    if np.any(scl == 0):
        raise ZeroDivisionError("average: the weights sum to zero, so they cannot be normalized")


def _broadcast_weights(w, x, axes):
    """`w` set up to broadcast along `axes` of x, as np.average requires of its weights."""
    if w.shape == x.shape:
        return w
    if axes is None:
        raise TypeError(f"average: axis must be specified when the shapes of a {x.shape} and "
                        f"weights {w.shape} differ")
    if w.shape != tuple(x.shape[a] for a in axes):
        raise ValueError(f"average: the shape of weights {w.shape} must be consistent with "
                         f"the shape of a {x.shape} along axis {axes}: expected "
                         f"{tuple(x.shape[a] for a in axes)}")
    order = tuple(int(i) for i in np.argsort(axes))
    if order != tuple(range(len(order))):
        w = tg.transpose(w, order)
    return tg.reshape(w, tuple(s if i in axes else 1 for i, s in enumerate(x.shape)))


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """The weighted average ``sum(a * weights) / sum(weights)`` over `axis`, as
    ``np.average`` (no weights: the mean). `weights` has a's shape, or the shape of a
    along `axis`. ``returned=True`` also gives the sum of the weights (the count without
    weights), broadcast to the result's shape. Differentiable in `a` and `weights`.

    >>> import tapegrad as tg
    >>> tg.average(tg.tensor([1., 2., 4.]), weights=[1., 0., 1.]).item()
    2.5
    >>> avg, total = tg.average(tg.ones((2, 3)), axis=1, weights=[1., 2., 3.], returned=True)
    >>> total.tolist()
    [6.0, 6.0]
    """
    x = _as_tensor(a)
    axes = None if axis is None else _axes(axis, x.ndim, "average")
    if weights is None:
        avg = tg.mean(x, axes, keepdims=keepdims)
        if not returned:
            return avg
        return avg, tg.full(avg.shape, x.size / max(avg.size, 1), dtype=avg.dtype,
                            device=avg.device)
    w = _broadcast_weights(_as_tensor_like(weights, x), x, axes)
    kinds = (x.dtype, w.dtype, np.float64) if x.dtype.kind in "biu" else (x.dtype, w.dtype)
    dtype = np.result_type(*kinds)
    x = x if x.dtype == dtype else x.astype(dtype)
    w = w if w.dtype == dtype else w.astype(dtype)
    scl = tg.sum(w, axes, keepdims=keepdims)
    compile_check(_check_weight_sums, scl)     # on every tg.compile replay too
    avg = tg.sum(x * w, axes, keepdims=keepdims) / scl
    if not returned:
        return avg
    if scl.shape != avg.shape:
        scl = tg.broadcast_to(scl, avg.shape) * 1   # a copy, as NumPy's
    return avg, scl


# ---------------------------------------------------------------------------------------
# nansum, nanmean, nanvar, nanstd
# ---------------------------------------------------------------------------------------

def nansum(a, axis=None, dtype=None, keepdims=False):
    """Sum over `axis` treating NaN as zero, as ``np.nansum``. The gradient is 0 at NaN
    entries (they do not take part), 1 elsewhere.

    >>> import tapegrad as tg
    >>> tg.nansum(tg.tensor([1., float('nan'), 2.])).item()
    3.0
    """
    x = _as_tensor(a)
    if x.dtype.kind in "fc":
        x = tg.where(_isnan(x), 0, x)
    return tg.sum(x, axis, dtype=dtype, keepdims=keepdims)


def _nan_parts(a, axis, op):
    """x with NaNs zeroed, the NaN mask, and the count of the others (keepdims, in x's
    dtype)."""
    x = _as_tensor(a)
    _axes(axis, x.ndim, op)                               # checks axis, naming the op
    if x.dtype.kind not in "fc":
        x = x.astype(np.float64)                          # np.nanmean's mean of integers
    mask = _isnan(x)
    count = tg.sum(tg.logical_not(mask), axis, keepdims=True).astype(x.dtype)
    return tg.where(mask, 0, x), mask, count


def nanmean(a, axis=None, *, keepdims=False):
    """Mean over `axis` ignoring NaNs, as ``np.nanmean`` (an all-NaN slice gives NaN). The
    gradient is 0 at NaN entries and 1 / count elsewhere.

    >>> import tapegrad as tg
    >>> tg.nanmean(tg.tensor([1., float('nan'), 2.])).item()
    1.5
    """
    x, _mask, count = _nan_parts(a, axis, "nanmean")
    total = tg.sum(x, axis, keepdims=True)
    out = tg.where(count > 0, total / tg.where(count > 0, count, 1), math.nan)
    return out if keepdims else _drop_axes(out, axis)


def _drop_axes(t, axis):
    """t, kept dims over `axis`, without those axes."""
    if axis is None:
        return tg.reshape(t, ())
    axes = _axes(axis, t.ndim, "reduction")
    return tg.reshape(t, tuple(s for i, s in enumerate(t.shape) if i not in axes))


def nanvar(a, axis=None, *, ddof=0, keepdims=False):
    """Variance over `axis` ignoring NaNs, as ``np.nanvar``: the non-NaN entries' squared
    deviations from their mean, divided by ``count - ddof`` (NaN where that is <= 0). The
    gradient is 0 at NaN entries.

    >>> import tapegrad as tg
    >>> tg.nanvar(tg.tensor([1., float('nan'), 3.])).item()
    1.0
    """
    x, mask, count = _nan_parts(a, axis, "nanvar")
    ok = count > 0
    mean = tg.sum(x, axis, keepdims=True) / tg.where(ok, count, 1)
    d = tg.where(mask, 0, x - mean)
    dof = count - ddof
    good = dof > 0
    out = tg.where(good, tg.sum(_abs2(d), axis, keepdims=True) / tg.where(good, dof, 1), math.nan)
    return out if keepdims else _drop_axes(out, axis)


def nanstd(a, axis=None, *, ddof=0, keepdims=False):
    """Standard deviation over `axis` ignoring NaNs, as ``np.nanstd``: ``sqrt(nanvar)``,
    with gradient 0 where it is 0 (as tg.std) and at NaN entries.

    >>> import tapegrad as tg
    >>> tg.nanstd(tg.tensor([1., float('nan'), 3.])).item()
    1.0
    """
    return _sqrt_of_var(nanvar(a, axis, ddof=ddof, keepdims=keepdims))


# ---------------------------------------------------------------------------------------
# Order statistics: median, quantile, percentile and their nan versions
# ---------------------------------------------------------------------------------------

# NOTE: [quantile plan] NumPy's quantile of n sorted values reads the values at two
# positions, prev and next, and interpolates them with a weight gamma:
#   a + (b - a) * gamma  (gamma < 0.5),   b - (b - a) * (1 - gamma)  (gamma >= 0.5).
# Positions and gamma depend only on n, q and the method (the "virtual index" of Hyndman
# and Fan's methods, as NumPy's table); which elements sit at those positions depends on
# the data (a sort). `_quantile_index` gives the original indexes of prev and next and
# `_quantile_weight` gamma (NaN where the result is NaN), as constants; the value is then
# computed with differentiable tensor ops, so the gradient is (1 - gamma) at prev and
# gamma at next: the subgradient at the selected elements, as PyTorch's. Ties: the element
# a stable sort puts at that position gets it (as a gradient taken through a sort does).

_CONTINUOUS = {                      # method -> (alpha, beta) of the virtual index
    "interpolated_inverted_cdf": (0.0, 1.0), "hazen": (0.5, 0.5), "weibull": (0.0, 0.0),
    "median_unbiased": (1 / 3.0, 1 / 3.0), "normal_unbiased": (3 / 8.0, 3 / 8.0),
}
_METHODS = ("inverted_cdf", "averaged_inverted_cdf", "closest_observation",
            "interpolated_inverted_cdf", "hazen", "weibull", "linear", "median_unbiased",
            "normal_unbiased", "lower", "higher", "midpoint", "nearest")
_DISCRETE = ("inverted_cdf", "closest_observation", "lower", "higher", "nearest")


def _to_boundaries(index, take_previous):
    previous = np.floor(index)
    out = np.where(take_previous(index - previous, index), previous, previous + 1)
    out = out.astype(np.intp)
    out[out < 0] = 0
    return out


def _virtual_index(n, q, method):
    """NumPy's virtual index of quantile q among n sorted values (n, q broadcast)."""
    if method == "linear":
        return (n - 1) * q
    if method in _CONTINUOUS:
        alpha, beta = _CONTINUOUS[method]
        return n * q + (alpha + q * (1 - alpha - beta)) - 1
    if method == "averaged_inverted_cdf":
        return n * q - 1
    if method == "inverted_cdf":
        return _to_boundaries(n * q - 1, lambda gamma, _i: gamma == 0)
    if method == "closest_observation":
        return _to_boundaries(n * q - 1 - 0.5,
                              lambda gamma, i: (gamma == 0) & (np.floor(i) % 2 == 1))
    if method == "lower":
        return np.floor((n - 1) * q).astype(np.intp)
    if method == "higher":
        return np.ceil((n - 1) * q).astype(np.intp)
    if method == "nearest":
        return np.around((n - 1) * q).astype(np.intp)
    return 0.5 * (np.floor((n - 1) * q) + np.ceil((n - 1) * q))      # midpoint


def _is_discrete(method, q):
    return method in _DISCRETE or (method == "linear" and q.dtype.kind in "iu")


def _positions(y, q, method, skipnan):
    """prev, next (sorted positions), gamma and the rows whose result is NaN, each (M, Q),
    for quantiles q of each row of the 2-D y (see Note: [quantile plan]). Reads only which
    entries are NaN, not the order of the values."""
    m, n = y.shape
    nan = np.isnan(y) if y.dtype.kind in "fc" else np.zeros(y.shape, bool)
    count = (n - nan.sum(-1) if skipnan else np.full(m, n))[:, None]       # (M, 1)
    bad = np.broadcast_to(count == 0 if skipnan else nan.any(-1, keepdims=True),
                          (m, q.size))
    qs = q.reshape(1, -1)
    virtual = np.asarray(_virtual_index(count, qs, method))
    last = np.maximum(count - 1, 0)
    if _is_discrete(method, q):
        prev = np.broadcast_to(np.minimum(virtual, last), bad.shape)
        return prev, prev, np.zeros(bad.shape), bad
    virtual = np.broadcast_to(virtual.astype(np.float64), bad.shape)
    prev = np.floor(virtual)
    nxt = prev + 1
    above = virtual >= count - 1
    prev, nxt = np.where(above, -1, prev), np.where(above, -1, nxt)
    below = virtual < 0
    prev, nxt = np.where(below, 0, prev), np.where(below, 0, nxt)
    gamma = virtual - prev                               # NumPy's, from the moved prev
    if method == "averaged_inverted_cdf":
        gamma = np.where(gamma == 0, 0.5, 1.0)
    elif method == "midpoint":
        gamma = np.where(virtual % 1 == 0, 0.0, 0.5)
    prev = np.where(prev < 0, last, prev).astype(np.intp)   # -1: the last valid value
    nxt = np.where(nxt < 0, last, nxt).astype(np.intp)
    return prev, nxt, gamma, bad


def _quantile_index_kernel(y, *, q, method, skipnan):
    """(2, M, Q) int64: the original indexes (along y's last axis) of the two sorted
    neighbours each quantile of each row reads."""
    y = np.asarray(y)
    prev, nxt, _gamma, _bad = _positions(y, q, method, skipnan)
    order = np.argsort(y, axis=-1, kind="stable")           # NaNs sort last
    return np.stack([np.take_along_axis(order, prev, -1),
                     np.take_along_axis(order, nxt, -1)]).astype(np.int64)


def _quantile_weight_kernel(y, *, q, method, skipnan, dtype):
    """(M, Q) of `dtype`: the weight gamma of the upper neighbour; NaN where the
    quantile is NaN (a NaN in the row, or no value left when NaNs are skipped)."""
    _prev, _nxt, gamma, bad = _positions(np.asarray(y), q, method, skipnan)
    return np.where(bad, np.nan, gamma).astype(dtype)


def _take_last_kernel(y, idx):
    return np.take_along_axis(y, idx, axis=-1)


def _take_last_vjp(g, ans, y, idx):
    return tg._take_last_grad(g, idx, n=y.shape[-1]), None


def _take_last_grad_kernel(g, idx, *, n):
    out = np.zeros(g.shape[:-1] + (n,), dtype=g.dtype)
    rows = np.indices(idx.shape, sparse=True)[:-1]
    np.add.at(out, (*rows, idx), g)          # a position taken twice gets both
    return out


def _take_last_grad_vjp(g, ans, gy, idx, *, n):
    return tg._take_last(g, idx), None


# vmap's batching rules (see ops.py, "vmap's batching rules: helpers").

def _quantile_rows_batch(name):
    """The rule of _quantile_index / _quantile_weight, which read the rows of a 2-D y:
    the examples' rows are stacked into one 2-D y, the results split back."""
    def rule(inputs, batched, **params):
        (y,) = inputs
        size, rows, n = y.shape
        out = getattr(tg, name)(tg.reshape(y, (size * rows, n)), **params)
        if name == "_quantile_index":        # (2, size * rows, Q): the pair axis first
            out = tg.reshape(out, (2, size, rows, out.shape[-1]))
            return tg.transpose(out, (1, 0, 2, 3))
        return tg.reshape(out, (size, rows, out.shape[-1]))
    rule.__qualname__ = rule.__name__ = f"{name}_batch"
    return rule


def _take_last_batch(inputs, batched):
    y, idx = inputs
    # np.take_along_axis broadcasts the other axes: an unbatched input gets a unit axis
    y = y if batched[0] else tg.reshape(y, (1,) + _shape_of(y))
    idx = idx if batched[1] else tg.reshape(idx, (1,) + _shape_of(idx))
    return tg._take_last(y, idx)


def _take_last_grad_batch(inputs, batched, *, n):
    # NOTE: the kernel takes its rows from idx and its output's shape from g, so both
    # need the vmapped axis at full length (a unit axis would scatter into example 0).
    size = _batch_size(inputs, batched)
    g, idx = (_with_batch_axis(v, b, size) for v, b in zip(inputs, batched))
    return tg._take_last_grad(g, idx, n=n)


def _rows(x, axis, op):
    """x with the axes of `axis` moved last and flattened into one: (M, n), and the shape
    the kept axes have (without and with keepdims)."""
    axes = _axes(axis, x.ndim, op)
    kept = [i for i in range(x.ndim) if i not in axes]
    order = tuple(kept) + tuple(sorted(axes))
    y = x if order == tuple(range(x.ndim)) else tg.transpose(x, order)
    kept_shape = tuple(x.shape[i] for i in kept)
    n = math.prod(x.shape[i] for i in axes)
    return tg.reshape(y, (math.prod(kept_shape), n)), kept_shape, _kept_shape(x.shape, axes)


def _check_q(q, op, scale):
    if isinstance(q, tg.Tensor):
        reason = derivative_reason(q)
        if reason is not None:
            raise TypeError(f"{op}: q is not differentiable here, and the tensor given there "
                            f"{reason}; pass q.detach() (or numbers / an array)")
        run_eagerly(f"{op}: q is a tensor whose values are read in Python (a replay would "
                    f"reuse the recording's q)")
        q = q.numpy()
    weak = type(q) in (int, float)        # NumPy: a Python number promotes weakly
    q = np.asanyarray(q)
    if q.dtype.kind not in "biuf":
        raise TypeError(f"{op}: q must be real numbers, got dtype {q.dtype}")
    given = q                             # the message shows q as passed, not q / 100
    if scale != 1:
        q = np.true_divide(q, scale)
    if q.size and not (np.all(q >= 0) and np.all(q <= 1)):
        what = "Percentiles" if scale == 100 else "Quantiles"
        raise ValueError(f"{op}: {what} must be in the range [0, {scale}], got {given.tolist()}")
    if q.ndim > 2:
        raise ValueError(f"{op}: q must be a scalar or 1-D or 2-D, got shape {q.shape}")
    return q, weak


def _quantile(a, q, axis, method, keepdims, skipnan, op, scale=1):
    if method not in _METHODS:
        raise ValueError(f"{op}: {method!r} is not a valid method; use one of "
                         f"{', '.join(_METHODS)}")
    x = _as_tensor(a)
    if x.dtype.kind == "c":
        # NumPy's quantile family refuses complex data (median and nanmedian take it)
        raise TypeError(f"{op}: a must be an array of real numbers, got a {x.dtype} tensor "
                        f"of shape {x.shape} (np.{op} refuses complex input too)")
    q, weak = _check_q(q, op, scale)
    y, kept, kept_dims = _rows(x, axis, op)
    if y.shape[1] == 0:
        raise IndexError(f"{op}: cannot take a quantile of an empty slice (axis {axis!r} of a "
                         f"tensor of shape {x.shape} is empty)")
    index = tg._quantile_index(y, q=q, method=method, skipnan=skipnan)
    lo = tg._take_last(y, index[0])
    if _is_discrete(method, q):
        dtype = x.dtype
        out = lo
    else:
        dtype = np.result_type(x.dtype, 0.0 if weak else np.float64)
        if x.dtype.kind not in "fc":
            dtype = np.dtype(np.float64)
        hi = tg._take_last(y, index[1])
        lo, hi = lo.astype(dtype), hi.astype(dtype)
    gamma = tg._quantile_weight(y, q=q, method=method, skipnan=skipnan,
                                dtype=dtype if dtype.kind == "f" else np.float64)
    bad = gamma != gamma
    if not _is_discrete(method, q):
        gamma = tg.where(bad, 0, gamma)
        span = hi - lo
        out = tg.where(gamma >= 0.5, hi - span * (1 - gamma), lo + span * gamma)
    if dtype.kind == "f":
        out = tg.where(bad, math.nan, out)
    return _quantile_shape(out, q.shape, kept, kept_dims, keepdims)


def _quantile_shape(out, qshape, kept, kept_dims, keepdims):
    """(M, Q) results as NumPy lays them out: q's axes first, then the kept axes (or a's
    axes with the reduced ones as length one, for keepdims)."""
    out = tg.reshape(out, (kept_dims if keepdims else kept) + qshape)
    nq, nk = len(qshape), out.ndim - len(qshape)
    if nq and nk:
        out = tg.transpose(out, tuple(range(nk, nk + nq)) + tuple(range(nk)))
    return out


def quantile(a, q, axis=None, *, method="linear", keepdims=False):
    """The q-th quantiles (q in [0, 1]: a number or an array of up to 2-D) over `axis`, as
    ``np.quantile``: all 13 of NumPy's methods (default 'linear'; 'lower', 'higher',
    'nearest', 'midpoint', 'inverted_cdf', 'hazen', ...). The result has q's axes first.
    A slice holding NaN gives NaN. The gradient is the subgradient at the selected
    elements: with 'linear', (1 - frac) at the lower neighbour and frac at the upper one.

    >>> import tapegrad as tg
    >>> x = tg.tensor([3., 1., 2., 4.], requires_grad=True)
    >>> tg.quantile(x, 0.25)
    tensor(1.75, grad_fn=<...>)
    >>> tg.quantile(x, 0.25).backward(); x.grad
    tensor([0.  , 0.25, 0.75, 0.  ])
    """
    return _quantile(a, q, axis, method, keepdims, False, "quantile")


def percentile(a, q, axis=None, *, method="linear", keepdims=False):
    """The q-th percentiles (q in [0, 100]) over `axis`, as ``np.percentile``: the
    quantiles at q / 100 (see tg.quantile).

    >>> import tapegrad as tg
    >>> tg.percentile(tg.tensor([1., 2., 3., 4., 5.]), [50, 100]).tolist()
    [3.0, 5.0]
    """
    return _quantile(a, q, axis, method, keepdims, False, "percentile", scale=100)


def nanquantile(a, q, axis=None, *, method="linear", keepdims=False):
    """``quantile`` ignoring NaNs, as ``np.nanquantile`` (an all-NaN slice gives NaN).

    >>> import tapegrad as tg
    >>> tg.nanquantile(tg.tensor([1., float('nan'), 3.]), 0.5).item()
    2.0
    """
    return _quantile(a, q, axis, method, keepdims, True, "nanquantile")


def nanpercentile(a, q, axis=None, *, method="linear", keepdims=False):
    """``percentile`` ignoring NaNs, as ``np.nanpercentile``.

    >>> import tapegrad as tg
    >>> tg.nanpercentile(tg.tensor([1., float('nan'), 3.]), 100).item()
    3.0
    """
    return _quantile(a, q, axis, method, keepdims, True, "nanpercentile", scale=100)


def _median(a, axis, keepdims, skipnan, op):
    x = _as_tensor(a)
    if x.dtype.kind not in "fc":
        x = x.astype(np.float64)           # NumPy's median of integers is float64
    y, kept, kept_dims = _rows(x, axis, op)
    if y.shape[1] == 0:
        # NumPy: the median of an empty slice is NaN (with a RuntimeWarning).
        out = tg.sum(y, -1) * math.nan
        return tg.reshape(out, kept_dims if keepdims else kept)
    q = np.array([0.5])
    index = tg._quantile_index(y, q=q, method="linear", skipnan=skipnan)
    lo, hi = tg._take_last(y, index[0]), tg._take_last(y, index[1])
    gamma = tg._quantile_weight(y, q=q, method="linear", skipnan=skipnan, dtype=x.dtype)
    # NOTE: NumPy's median is the mean of the two middle values, (a + b) / 2 (not the lerp
    # of quantile: the last bits differ), and the middle value itself for an odd count.
    # With NaNs skipped the count differs from row to row: gamma is 0 (odd) or 0.5 (even).
    bad = gamma != gamma
    odd = tg.logical_or(gamma == 0, bad)
    out = tg.where(odd, lo, (lo + hi) / 2)
    out = tg.where(bad, math.nan, out)
    return _quantile_shape(out, (), kept, kept_dims, keepdims)


def median(a, axis=None, *, keepdims=False):
    """The median over `axis`, as ``np.median``: the middle value, or the mean of the two
    middle values for an even count (a slice holding NaN gives NaN). The gradient is 1 at
    the middle element, or 1/2 at each of the two (NumPy's value is their mean; note that
    torch.median returns the lower one instead, and gives it the whole gradient).

    >>> import tapegrad as tg
    >>> tg.median(tg.tensor([[1., 3., 2.], [4., 0., 6.]]), axis=1).tolist()
    [2.0, 4.0]
    """
    return _median(a, axis, keepdims, False, "median")


def nanmedian(a, axis=None, *, keepdims=False):
    """``median`` ignoring NaNs, as ``np.nanmedian`` (an all-NaN slice gives NaN).

    >>> import tapegrad as tg
    >>> tg.nanmedian(tg.tensor([1., float('nan'), 3., 10.])).item()
    3.0
    """
    return _median(a, axis, keepdims, True, "nanmedian")


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

def _with_nans(*shape, seed=5, every=4):
    x = _rand(*shape, seed=seed)
    x.reshape(-1)[::every] = np.nan
    return x


_REDUCTIONS = [tg.Sample(_rand(3, 4)), tg.Sample(_rand(3, 4), axis=0),
               tg.Sample(_rand(2, 3, 4), axis=(0, 2), keepdims=True)]
_NAN_REDUCTIONS = [tg.Sample(_with_nans(3, 4)), tg.Sample(_with_nans(3, 4), axis=1),
                   tg.Sample(_with_nans(2, 3, 4), axis=(0, -1), keepdims=True),
                   tg.Sample(_rand(3, 4), axis=0)]


def register(registry):
    """Register this module's ops and functions with `registry` (called from the shape
    plugin's ``tapegrad_register_ops`` hook in :mod:`tapegrad_shape.ops`)."""
    fn, op = registry.register_function, registry.register_op
    fn("diff", diff, method=False, samples=[
        tg.Sample(_rand(5)), tg.Sample(_rand(3, 5), n=2), tg.Sample(_rand(3, 4), axis=0),
        tg.Sample(_rand(3, 4), 1, 0, _rand(1, 4), _rand(2, 4, seed=1)),
        tg.Sample(_rand(4), 1, -1, np.array(0.5), _rand(2))])
    # NOTE: the spacing (coordinates) is a constant: only f is differentiated, and a
    # spacing tensor that requires grad is refused (not_implemented: the spacings).
    fn("gradient", gradient, method=False, not_implemented=(1, 2, 3), differentiable=(0,),
       samples=[
        tg.Sample(_rand(5)), tg.Sample(_rand(5), 0.5, edge_order=2),
        tg.Sample(_rand(3, 4)), tg.Sample(_rand(3, 4), 2.0, axis=-1),
        tg.Sample(_rand(4, 5), np.array([0.0, 0.5, 1.5, 1.7]), np.array([0, 1, 3, 4, 9.0])),
        tg.Sample(_rand(4, 5), np.array([0.0, 0.5, 1.5, 1.7]), axis=0, edge_order=2)])
    any_samples = [tg.Sample(_mask(3, 4)), tg.Sample(_rand(3, 4), axis=1),
                   tg.Sample(np.array([[0.0, 1.0], [0.0, 0.0]]), axis=0, keepdims=True)]
    fn("any", any, method=True, samples=any_samples)
    fn("all", all, method=True, samples=any_samples)
    fn("amax", registry.ops["max"], method=False, samples=_EXTREMUM_SAMPLES)
    fn("amin", registry.ops["min"], method=False, samples=_EXTREMUM_SAMPLES)
    # (the complex samples: NumPy's lexicographic order, checked by the complex kit)
    fn("ptp", ptp, method=False, samples=_EXTREMUM_SAMPLES + [
        tg.Sample(_complex_distinct(3, 4), axis=1)])
    fn("nansum", nansum, method=False, samples=_NAN_REDUCTIONS)
    fn("nanmean", nanmean, method=False, samples=_NAN_REDUCTIONS)
    fn("nanvar", nanvar, method=False, samples=_NAN_REDUCTIONS + [
        tg.Sample(_with_nans(3, 4), axis=0, ddof=1)])
    fn("nanstd", nanstd, method=False, samples=_NAN_REDUCTIONS[:3] + [
        tg.Sample(_with_nans(4, 5), axis=1, ddof=1)])
    fn("average", average, method=False, samples=_REDUCTIONS + [
        tg.Sample(_rand(3, 4), None, np.abs(_rand(3, 4, seed=2)) + 0.5),
        tg.Sample(_rand(3, 4), 1, np.abs(_rand(4, seed=2)) + 0.5),
        tg.Sample(_rand(2, 3, 4), (2, 0), np.abs(_rand(4, 2, seed=3)) + 0.5, keepdims=True),
        tg.Sample(_rand(3, 4), 0, np.abs(_rand(3, seed=2)) + 0.5, True)])
    # -- order statistics ----------------------------------------------------------------
    op("_quantile_index", kernels={"cpu": _quantile_index_kernel}, nin=1, method=False,
       batch=_quantile_rows_batch("_quantile_index"),
       params=(), samples=[
           tg.Sample(_distinct(3, 5), q=np.array([0.25, 0.5]), method="linear", skipnan=False),
           tg.Sample(_with_nans(3, 5), q=np.array([0.5]), method="nearest", skipnan=True)],
       doc="For each row of a 2-D x and each quantile in q (see tg.quantile): the original "
           "indexes of the two sorted neighbours the quantile reads, a (2, rows, len(q)) "
           "int64 tensor. Not differentiable.")
    op("_quantile_weight", kernels={"cpu": _quantile_weight_kernel}, nin=1, method=False,
       batch=_quantile_rows_batch("_quantile_weight"),
       params=(), samples=[
           tg.Sample(_distinct(3, 5), q=np.array([0.25, 0.5]), method="linear",
                     skipnan=False, dtype=np.float64),
           tg.Sample(_with_nans(3, 5), q=np.array([0.3]), method="hazen", skipnan=True,
                     dtype=np.float32)],
       doc="For each row of a 2-D x and each quantile in q (see tg.quantile): the weight "
           "of the upper of the two neighbours it interpolates, in `dtype`; NaN where the "
           "quantile is NaN. Depends on x only through which entries are NaN; not "
           "differentiable.")
    op("_take_last", complex=True,
    kernels={"cpu": _take_last_kernel}, vjp=_take_last_vjp, jvp="linear",
       batch=_take_last_batch,
       differentiable=(0,), save_inputs=(False, True), save_ans=False, method=False,
       samples=[tg.Sample(_rand(3, 4), np.array([[0, 3, 0], [1, 1, 2], [3, 2, 1]]))],
       doc="np.take_along_axis(x, idx, axis=-1) with idx an integer tensor: the values "
           "the order statistics read. Its gradient scatters g back (_take_last_grad).")
    op("_take_last_grad", complex=True,
    kernels={"cpu": _take_last_grad_kernel}, vjp=_take_last_grad_vjp,
       jvp="linear", batch=_take_last_grad_batch,
       differentiable=(0,), save_inputs=(False, True), save_ans=False, method=False,
       samples=[tg.Sample(_rand(2, 3), np.array([[0, 3, 0], [1, 1, 2]]), n=4),
                tg.Sample(_rand(2, 1), np.array([[0, 3, 0], [1, 1, 2]]), n=4)],
       doc="The gradient of _take_last: zeros with n entries along the last axis and g "
           "added at idx (np.add.at, so a position taken twice gets both).")
    order_samples = [tg.Sample(_distinct(7)), tg.Sample(_distinct(3, 4), axis=1),
                     tg.Sample(_distinct(2, 3, 5), axis=(0, 2), keepdims=True),
                     tg.Sample(_distinct(4, 3), axis=0)]
    fn("median", median, method=False, samples=order_samples + [
        tg.Sample(_complex_distinct(7)), tg.Sample(_complex_distinct(3, 4), axis=1)])
    complex_with_nans = _complex_distinct(3, 5)
    complex_with_nans[0, 1] = complex_with_nans[2, 3] = np.nan
    fn("nanmedian", nanmedian, method=False, samples=[
        tg.Sample(_with_nans(7, every=3)), tg.Sample(_with_nans(3, 5), axis=1),
        tg.Sample(_with_nans(3, 4), axis=0, keepdims=True),
        tg.Sample(complex_with_nans, axis=1)])
    fn("quantile", quantile, method=False, samples=[
        tg.Sample(_distinct(7), 0.3), tg.Sample(_distinct(3, 5), 0.6, axis=1),
        tg.Sample(_distinct(3, 5), 0.3, axis=0, method="hazen", keepdims=True),
        tg.Sample(_distinct(2, 3, 5), 0.45, axis=(0, 2), method="midpoint"),
        tg.Sample(_distinct(3, 5), 0.6, axis=1, method="lower"),
        tg.Sample(_distinct(3, 5), 0.3, axis=1, method="median_unbiased")])
    fn("percentile", percentile, method=False, samples=[
        tg.Sample(_distinct(7), 30), tg.Sample(_distinct(3, 5), 60.0, axis=1, method="weibull")])
    fn("nanquantile", nanquantile, method=False, samples=[
        tg.Sample(_with_nans(7, every=3), 0.3), tg.Sample(_with_nans(3, 5), 0.6, axis=1)])
    fn("nanpercentile", nanpercentile, method=False, samples=[
        tg.Sample(_with_nans(3, 5), 35, axis=1)])

