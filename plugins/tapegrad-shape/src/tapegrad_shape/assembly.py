"""Selection and assembly with NumPy's names and semantics: block, broadcast_arrays,
choose, compress, delete, diagflat, extract, insert, meshgrid, partition, piecewise,
resize, rot90, select, trim_zeros, unstack.

Each is a composition of existing ops (indexing, ``take``, ``take_along_axis``,
``where``, ``setitem``, ``concatenate``, ``flip``, ``transpose``, ``broadcast_to``), so it
is differentiable to any order in the values it moves, with no rule of its own. What
depends on values only through which positions are picked -- conditions, masks, index
arguments, the order ``partition`` leaves -- is computed on the host with NumPy itself
(``np.delete``/``np.insert`` on position labels, ``np.partition``), so the positions,
and the errors for bad arguments, are NumPy's; those arguments get no gradient.

>>> import tapegrad as tg
>>> a = tg.tensor([[1., 2.], [3., 4.]], requires_grad=True)
>>> tg.block([[a, tg.zeros((2, 1))], [tg.ones((1, 2)), tg.tensor([[9.]])]]).shape
(3, 3)
>>> tg.insert(a, 1, 0.0, axis=1).tolist()
[[1.0, 0.0, 2.0], [3.0, 0.0, 4.0]]
>>> tg.rot90(a).tolist()
[[2.0, 4.0], [1.0, 3.0]]
"""

from __future__ import annotations

import math
import numbers
import operator

import numpy as np
import tapegrad as tg
from tapegrad._compile import record_once

from .ops import _as_tensor, _as_tensor_like, _axes, _distinct, _mask, _rand

__all__ = ["block", "broadcast_arrays", "choose", "compress", "delete", "diagflat", "extract",
           "insert", "meshgrid", "partition", "piecewise", "resize", "rot90", "select",
           "trim_zeros", "unstack", "register"]


# ---------------------------------------------------------------------------------------
# Helpers (plain Python and NumPy on shapes, masks and host index arrays)
# ---------------------------------------------------------------------------------------

def _host(value, op):
    """An argument that only selects (a condition, an index, kth) as a host NumPy array.
    NOTE: a Tensor reaching a NumPy function would dispatch back to tapegrad through
    __array_function__; its values are what such an argument means."""
    if isinstance(value, tg.Tensor):
        _reads_values(op)
        return value.detach().numpy()
    return np.asarray(value)


def _host_index(obj, op):
    """An index argument (int, slice, sequence, array, tensor) as NumPy takes it."""
    if isinstance(obj, tg.Tensor):
        _reads_values(op)
        return obj.detach().numpy()
    return obj


def _reads_values(op):
    # NOTE: positions computed on the host from a tensor's values would be baked into a
    # tg.compile recording and replayed for other values: a silent wrong result. So a call
    # that reads a tensor's values keeps no recording (it runs eagerly every time).
    record_once(f"{op} reads tensor values on the host to choose positions")


def _no_out(out, op):
    # NOTE: out= writes into an existing array; a tensor's value is never replaced behind
    # its graph's back, so that form is refused rather than silently ignored.
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (tensors are not written in place); "
                        f"use the returned tensor")


def _numpy_errors(op, fn, *args, **kwargs):
    """fn(*args, **kwargs) (a NumPy call on host positions), its errors prefixed with the
    op's name and of the same type (IndexError, ValueError, AxisError, TypeError)."""
    try:
        return fn(*args, **kwargs)
    except np.exceptions.AxisError as exc:
        raise np.exceptions.AxisError(f"{op}: {exc}") from None
    except (IndexError, ValueError, TypeError) as exc:
        raise type(exc)(f"{op}: {exc}") from None


def _lead(ax):
    return (slice(None),) * ax


def _flat_axis(x, axis, op):
    """(x, ax): x flattened with ax = 0 for axis None, else x and the checked axis."""
    if axis is None:
        return tg.reshape(x, (-1,)), 0
    (ax,) = _axes(axis, x.ndim, op)
    return x, ax


def _take(x, positions, ax):
    """x at the host integer `positions` along axis ax (a gather: its gradient adds)."""
    return x[_lead(ax) + (np.asarray(positions, dtype=np.intp),)]


# ---------------------------------------------------------------------------------------
# Assembly: block, broadcast_arrays, meshgrid, unstack, diagflat, resize, rot90
# ---------------------------------------------------------------------------------------

def _block_depth(arrays, index):
    """(depth of the nested lists, the largest ndim of a leaf), checking NumPy's rules."""
    if isinstance(arrays, tuple):
        raise TypeError(f"block: arrays{''.join(f'[{i}]' for i in index)} is a tuple. Only "
                        f"lists can be used to arrange blocks, and np.block does not allow "
                        f"implicit conversion from tuple to ndarray.")
    if not isinstance(arrays, list):
        return len(index), np.ndim(arrays) if not isinstance(arrays, tg.Tensor) else arrays.ndim
    if not arrays:
        raise ValueError(f"block: lists cannot be empty (arrays"
                         f"{''.join(f'[{i}]' for i in index)} is [])")
    results = [_block_depth(a, index + [i]) for i, a in enumerate(arrays)]
    first = results[0][0]
    for i, (depth, _) in enumerate(results):
        if depth != first:
            raise ValueError(f"block: list depths are mismatched. First element was at depth "
                             f"{first}, but there is an element at depth {depth} "
                             f"(arrays{''.join(f'[{j}]' for j in index + [i])})")
    return first, max(nd for _, nd in results)


def block(arrays):
    """An array assembled from nested lists of blocks, as ``np.block``: the innermost
    lists are joined along the last axis, the next ones along the second-to-last, and so
    on; blocks are promoted to the common number of dimensions with leading ones first.
    Differentiable in every block.

    >>> import tapegrad as tg
    >>> tg.block([tg.ones(2), tg.zeros(1)]).tolist()
    [1.0, 1.0, 0.0]
    """
    list_ndim, arr_ndim = _block_depth(arrays, [])
    ndim = max(list_ndim, arr_ndim)

    def assemble(x, depth):
        if depth == list_ndim:
            t = _as_tensor(x)
            return tg.reshape(t, (1,) * (ndim - t.ndim) + t.shape) if t.ndim < ndim else t
        return tg.concatenate([assemble(y, depth + 1) for y in x], axis=-(list_ndim - depth))

    out = assemble(arrays, 0)
    return tg.copy(out) if list_ndim == 0 else out      # np.block(a) is a copy of a


def broadcast_arrays(*args, subok=False):
    """The arguments broadcast against each other, as ``np.broadcast_arrays``: a tuple of
    tensors of the common shape (an argument of that shape already is returned as it is).
    The gradient of each sums back to its own shape.

    >>> import tapegrad as tg
    >>> [t.shape for t in tg.broadcast_arrays(tg.ones((2, 1)), tg.ones(3))]
    [(2, 3), (2, 3)]
    """
    xs = [_as_tensor(a) for a in args]
    shape = _numpy_errors("broadcast_arrays", np.broadcast_shapes, *(x.shape for x in xs))
    return tuple(x if x.shape == shape else tg.broadcast_to(x, shape) for x in xs)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate tensors from coordinate vectors, as ``np.meshgrid`` (a tuple):
    ``indexing='xy'`` (Cartesian: the first two axes swapped) or ``'ij'`` (matrix),
    ``sparse=True`` returns the broadcastable vectors only, ``copy=False`` broadcast views.
    The gradient of each input sums over the axes it was repeated along.

    >>> import tapegrad as tg
    >>> X, Y = tg.meshgrid(tg.tensor([1., 2., 3.]), tg.tensor([4., 5.]))
    >>> X.shape, Y[:, 0].tolist()
    ((2, 3), [4.0, 5.0])
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: valid values for `indexing` are 'xy' and 'ij', got "
                         f"{indexing!r}")
    n = len(xi)
    ones = (1,) * n
    out = [tg.reshape(_as_tensor(x), ones[:i] + (-1,) + ones[i + 1:]) for i, x in enumerate(xi)]
    if indexing == "xy" and n > 1:
        out[0] = tg.reshape(out[0], (1, -1) + ones[2:])
        out[1] = tg.reshape(out[1], (-1, 1) + ones[2:])
    if not sparse:
        out = list(broadcast_arrays(*out))
    if copy:
        out = [tg.copy(x) for x in out]
    return tuple(out)


def unstack(x, /, *, axis=0):
    """The slices of x along `axis`, as a tuple (NumPy 2's ``np.unstack``; the inverse of
    ``tg.stack``).

    >>> import tapegrad as tg
    >>> [t.tolist() for t in tg.unstack(tg.tensor([[1., 2.], [3., 4.]]), axis=1)]
    [[1.0, 3.0], [2.0, 4.0]]
    """
    x = _as_tensor(x)
    if x.ndim == 0:
        raise ValueError("unstack: input array must be at least 1-d (got a 0-d tensor)")
    (ax,) = _axes(axis, x.ndim, "unstack")
    return tuple(x[_lead(ax) + (i,)] for i in range(x.shape[ax]))


def diagflat(v, k=0):
    """A 2-d tensor with the flattened v on its k-th diagonal, as ``np.diagflat``.

    >>> import tapegrad as tg
    >>> tg.diagflat(tg.tensor([[1., 2.]]), 1).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]
    """
    return tg.diag(tg.reshape(_as_tensor(v), (-1,)), operator.index(k))


def resize(a, new_shape):
    """a repeated cyclically (in flat order) to fill `new_shape`, as ``np.resize``; an
    empty a gives zeros. The gradient of each entry sums over its repeats.

    >>> import tapegrad as tg
    >>> tg.resize(tg.tensor([1., 2., 3.]), (2, 4)).tolist()
    [[1.0, 2.0, 3.0, 1.0], [2.0, 3.0, 1.0, 2.0]]
    """
    x = _as_tensor(a)
    if isinstance(new_shape, (numbers.Integral, np.integer)):
        new_shape = (new_shape,)
    shape = tuple(operator.index(s) for s in new_shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"resize: all elements of `new_shape` must be non-negative, got "
                         f"{shape}")
    n = math.prod(shape)
    flat = tg.reshape(x, (-1,))
    if x.size == 0:
        return tg.zeros(shape, dtype=x.dtype, device=x.device)
    if n <= x.size:
        return tg.reshape(flat[:n], shape)
    return tg.reshape(flat[np.arange(n) % x.size], shape)


def rot90(m, k=1, axes=(0, 1)):
    """m rotated by 90 degrees k times in the plane of `axes`, from the first axis towards
    the second, as ``np.rot90`` (flips and a transpose).

    >>> import tapegrad as tg
    >>> tg.rot90(tg.tensor([[1., 2.], [3., 4.]]), 2).tolist()
    [[4.0, 3.0], [2.0, 1.0]]
    """
    x = _as_tensor(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError(f"rot90: len(axes) must be 2, got axes={axes}")
    a0, a1 = (operator.index(a) for a in axes)
    if a0 == a1 or abs(a0 - a1) == x.ndim:
        raise ValueError(f"rot90: axes must be different, got axes={axes} for a tensor of "
                         f"dimension {x.ndim}")
    if not (-x.ndim <= a0 < x.ndim and -x.ndim <= a1 < x.ndim):
        raise ValueError(f"rot90: axes={axes} out of range for array of ndim={x.ndim}")
    k = operator.index(k) % 4
    if k == 0:
        return x[...]
    if k == 2:
        return tg.flip(tg.flip(x, a0), a1)
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return tg.transpose(tg.flip(x, a1), tuple(perm))
    return tg.flip(tg.transpose(x, tuple(perm)), a1)


# ---------------------------------------------------------------------------------------
# Selection: choose, compress, extract, select, piecewise, delete, insert, trim_zeros
# ---------------------------------------------------------------------------------------

def _rows(seq):
    """A sequence argument (a list, or a tensor / array whose first axis indexes it)."""
    if isinstance(seq, (tg.Tensor, np.ndarray)):
        return [seq[i] for i in range(seq.shape[0])]
    return list(seq)


def choose(a, choices, out=None, mode="raise"):
    """Entry i of the result is entry i of ``choices[a[i]]`` (a, the integer index array,
    and the choices broadcast together), as ``np.choose``; `mode` ``'raise'`` refuses
    indexes outside [0, n), ``'wrap'`` takes them modulo n, ``'clip'`` clips them.
    Differentiable in the choices; `a` only selects.

    >>> import tapegrad as tg
    >>> tg.choose([0, 1, 0], [tg.tensor([1., 2., 3.]), tg.tensor([10., 20., 30.])]).tolist()
    [1.0, 20.0, 3.0]
    """
    _no_out(out, "choose")
    idx = _host(a, "choose")
    if idx.dtype.kind not in "iub":
        raise TypeError(f"choose: a must hold integer indices, got dtype {idx.dtype}")
    cs = [_as_tensor(c) for c in _rows(choices)]
    n = len(cs)
    if n == 0:
        raise ValueError("choose: choices must hold at least one array")
    if mode == "raise":
        if ((idx < 0) | (idx >= n)).any():
            raise ValueError(f"choose: invalid entry in choice array (indices must lie in "
                             f"[0, {n}) with mode='raise')")
    elif mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = np.clip(idx, 0, n - 1)
    else:
        raise ValueError(f"choose: clipmode must be one of 'clip', 'raise', or 'wrap', got "
                         f"{mode!r}")
    shape = _numpy_errors("choose", np.broadcast_shapes, idx.shape, *(c.shape for c in cs))
    stacked = tg.stack([tg.broadcast_to(c, shape) for c in cs], axis=0)
    index = np.broadcast_to(idx.astype(np.intp), shape)[None]
    return tg.take_along_axis(stacked, index, axis=0)[0]


def _compress_method(self, condition, axis=None, out=None):
    """``t.compress(condition, axis=None)``: ndarray.compress's argument order."""
    return compress(condition, self, axis, out)


def compress(condition, a, axis=None, out=None):
    """The slices of a along `axis` (None: of a flattened) where the 1-d `condition` is
    true, as ``np.compress`` (a shorter condition selects among the first entries only).
    Differentiable in a.

    >>> import tapegrad as tg
    >>> tg.compress([False, True], tg.tensor([[1., 2.], [3., 4.]]), axis=0).tolist()
    [[3.0, 4.0]]
    """
    _no_out(out, "compress")
    cond = _host(condition, "compress")
    if cond.ndim != 1:
        raise ValueError(f"compress: condition must be a 1-d array, got shape {cond.shape}")
    x, ax = _flat_axis(_as_tensor(a), axis, "compress")
    positions = np.flatnonzero(cond)
    if positions.size and positions[-1] >= x.shape[ax]:
        raise IndexError(f"compress: index {positions[-1]} is out of bounds for axis {ax} with "
                         f"size {x.shape[ax]} (the condition is longer than the axis)")
    return _take(x, positions, ax)


def extract(condition, arr):
    """The entries of arr (flattened) where `condition` (flattened) is nonzero, as
    ``np.extract``. Differentiable in arr.

    >>> import tapegrad as tg
    >>> x = tg.tensor([[1., -2.], [3., -4.]])
    >>> tg.extract(x > 0, x).tolist()
    [1.0, 3.0]
    """
    x = tg.reshape(_as_tensor(arr), (-1,))
    positions = np.flatnonzero(_host(condition, "extract"))
    if positions.size and positions[-1] >= x.size:
        raise IndexError(f"extract: index {positions[-1]} is out of bounds for size {x.size} "
                         f"(the condition has more entries than arr)")
    return _take(x, positions, 0)


def select(condlist, choicelist, default=0):
    """Entry by entry, the choice of the first condition that holds, else `default`, as
    ``np.select`` (conditions, choices and default broadcast together; NumPy's result
    dtype). Differentiable in the choices and the default.

    >>> import tapegrad as tg
    >>> x = tg.tensor([-2., 0.5, 3.])
    >>> tg.select([x < 0, x < 1], [-x, x * 10], default=1.0).tolist()
    [2.0, 5.0, 1.0]
    """
    conds, choices = _rows(condlist), _rows(choicelist)
    if len(conds) != len(choices):
        raise ValueError(f"select: list of cases must be same length as list of conditions "
                         f"({len(choices)} choices, {len(conds)} conditions)")
    if not conds:
        raise ValueError("select with an empty condition list is not possible")
    # (tensor conditions stay tensors: tg.where reads them in every replay)
    masks = [c if isinstance(c, tg.Tensor) else np.asarray(c) for c in conds]
    for i, c in enumerate(masks):
        if c.dtype != np.bool_:
            raise TypeError(f"select: invalid entry {i} in condlist: should be boolean "
                            f"ndarray, got dtype {c.dtype}")

    def proxy(v):
        return np.zeros((), v.dtype) if isinstance(v, tg.Tensor) else v

    # NumPy's result dtype, from np.select itself on stand-ins of the choices' dtypes (a
    # Python scalar default stays weak: float32 choices give float32).
    dtype = _numpy_errors("select", np.select, [np.asarray(False)] * len(choices),
                          [proxy(c) for c in choices], proxy(default)).dtype
    result = default if isinstance(default, tg.Tensor) else np.asarray(default, dtype=dtype)
    for mask, choice in zip(reversed(masks), reversed(choices)):
        result = tg.where(mask, choice, result)
    result = _as_tensor(result)
    return result if result.dtype == dtype else result.astype(dtype)


def piecewise(x, condlist, funclist, *args, **kw):
    """A piecewise-defined function, as ``np.piecewise``: where ``condlist[i]`` holds,
    ``funclist[i]`` (a callable applied to the selected entries ``x[cond]`` -- write it
    with tapegrad ops -- or a scalar); one extra function is the default where no
    condition holds, else 0 there. Later conditions win where several hold. The result has
    x's dtype. Differentiable in x through the callables (they see only their own
    entries, so a function undefined elsewhere, like ``tg.sqrt`` for negative x, adds no
    NaN to the gradient).

    >>> import tapegrad as tg
    >>> x = tg.tensor([-2., 0.5, 3.])
    >>> tg.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v * v]).tolist()
    [2.0, 0.25, 9.0]
    """
    x = _as_tensor(x)
    if isinstance(condlist, tg.Tensor):
        condlist = _host(condlist, "piecewise")
    elif isinstance(condlist, (list, tuple)):
        condlist = [_host(c, "piecewise") if isinstance(c, tg.Tensor) else c for c in condlist]
    n_funcs = len(funclist)
    # NumPy's (undocumented) rule: a single condition is promoted to a list of one.
    if np.isscalar(condlist) or (not isinstance(condlist[0], (list, np.ndarray))
                                 and x.ndim != 0):
        condlist = [condlist]
    masks = np.asarray(condlist, dtype=bool)
    n = len(masks)
    if n == n_funcs - 1:
        masks = np.concatenate([masks, ~np.any(masks, axis=0, keepdims=True)], axis=0)
        n += 1
    elif n != n_funcs:
        raise ValueError(f"piecewise: with {n} condition(s), either {n} or {n + 1} functions "
                         f"are expected, got {n_funcs}")
    y = tg.zeros(x.shape, dtype=x.dtype, device=x.device)
    for mask, func in zip(masks, funclist):
        if mask.shape != x.shape:
            raise ValueError(f"piecewise: condition of shape {mask.shape} does not match x of "
                             f"shape {x.shape}")
        if not callable(func):
            y = tg.setitem(y, func, index=mask)
        elif mask.any():
            y = tg.setitem(y, _as_tensor_like(func(x[mask], *args, **kw), x), index=mask)
    return y


def delete(arr, obj, axis=None):
    """arr without the sub-arrays at positions `obj` (an int, a slice, a sequence of ints or
    a bool mask) along `axis` (None: of arr flattened), as ``np.delete``. Differentiable in
    arr.

    >>> import tapegrad as tg
    >>> tg.delete(tg.tensor([[1., 2., 3.], [4., 5., 6.]]), [0, 2], axis=1).tolist()
    [[2.0], [5.0]]
    """
    x, ax = _flat_axis(_as_tensor(arr), axis, "delete")
    keep = _numpy_errors("delete", np.delete, np.arange(x.shape[ax]),
                         _host_index(obj, "delete"))
    return _take(x, keep, ax)


def insert(arr, obj, values, axis=None):
    """arr with `values` inserted before the positions `obj` along `axis` (None: into arr
    flattened), as ``np.insert`` (values broadcast as NumPy's and are cast to arr's
    dtype). Differentiable in arr and values.

    >>> import tapegrad as tg
    >>> tg.insert(tg.tensor([1., 2., 3.]), [1, 3], tg.tensor([10., 20.])).tolist()
    [1.0, 10.0, 2.0, 3.0, 20.0]
    """
    x = _as_tensor(arr)
    v = _as_tensor_like(values, x)
    # NOTE: np.insert itself places labels: arr's flat positions (>= 0) and values' (-1 -
    # position), so where every entry comes from, broadcasting of values included, is
    # NumPy's; the tensor result gathers from both.
    labels = np.arange(x.size, dtype=np.int64).reshape(x.shape)
    value_labels = (-1 - np.arange(v.size, dtype=np.int64)).reshape(v.shape)
    placed = _numpy_errors("insert", np.insert, labels, _host_index(obj, "insert"),
                           value_labels, axis)
    from_arr = placed >= 0
    parts = []
    if from_arr.any():
        parts.append(tg.reshape(x, (-1,))[np.where(from_arr, placed, 0)])
    if not from_arr.all():
        vx = v if v.dtype == x.dtype else v.astype(x.dtype)
        parts.append(tg.reshape(vx, (-1,))[np.where(from_arr, 0, -1 - placed)])
    if len(parts) == 1:
        return parts[0]
    return tg.where(from_arr, parts[0], parts[1])


def trim_zeros(filt, trim="fb", axis=None):
    """filt without its leading (``'f'``) and/or trailing (``'b'``) zeros, as
    ``np.trim_zeros``: for n-d input, the slices that are all zero along `axis` (None:
    every axis) are trimmed. Differentiable in the entries kept.

    >>> import tapegrad as tg
    >>> tg.trim_zeros(tg.tensor([0., 0., 1., 2., 0.])).tolist()
    [1.0, 2.0]
    """
    x = _as_tensor(filt)
    trim = trim.lower()
    if trim not in {"fb", "bf", "f", "b"}:
        raise ValueError(f"trim_zeros: unexpected character(s) in `trim`: {trim!r}")
    axes = tuple(range(x.ndim)) if axis is None else _axes(axis, x.ndim, "trim_zeros")
    if not axes:
        return x
    nonzero = np.argwhere(_host(x, "trim_zeros"))
    if nonzero.size == 0:
        start = stop = np.zeros(x.ndim, dtype=np.intp)     # all zero: an empty result
    else:
        start, stop = nonzero.min(axis=0), nonzero.max(axis=0) + 1
        if "f" not in trim:
            start = (None,) * x.ndim
        if "b" not in trim:
            stop = (None,) * x.ndim
    return x[tuple(slice(start[a], stop[a]) if a in axes else slice(None)
                   for a in range(x.ndim))]


def partition(a, kth, axis=-1, kind="introselect", order=None):
    """a rearranged along `axis` (None: flattened) so that the entry at each position in
    `kth` is the one a sort puts there, smaller entries before it and larger after, as
    ``np.partition`` (the same arrangement: it is computed by NumPy). The values are
    differentiable like ``tg.sort``'s: the gradient goes back through the permutation (of
    tied entries, to the one a stable sort puts at that position).

    >>> import tapegrad as tg
    >>> tg.partition(tg.tensor([3., 4., 2., 1.]), 2)[2].item()
    3.0
    """
    if order is not None:
        raise ValueError("partition: order= names fields of a structured array, which "
                         "tapegrad tensors are not; pass order=None")
    x, ax = _flat_axis(_as_tensor(a), axis, "partition")
    values = _host(x, "partition")
    kth = _host_index(kth, "partition")
    arranged = _numpy_errors("partition", np.partition, values, kth, axis=ax, kind=kind)
    # NOTE: the permutation that gives NumPy's arrangement: the stable sort of the input
    # and of NumPy's result list the same values in the same order, so output position
    # t[j] holds input entry s[j]. (np.argpartition need not arrange ties, or at all, as
    # np.partition does.)
    s = np.argsort(values, axis=ax, kind="stable")
    t = np.argsort(arranged, axis=ax, kind="stable")
    perm = np.empty_like(s)
    np.put_along_axis(perm, t, s, axis=ax)
    return tg.take_along_axis(x, perm, axis=ax)


# ---------------------------------------------------------------------------------------
# Registration (called from the plugin's hook in ops.py)
# ---------------------------------------------------------------------------------------

def _square(v, shift=0.0):
    return v * v + shift


def _shifted_exp(v, shift=0.0):
    return tg.exp(v) + shift


def register(registry):
    """Register this module's functions (called from the shape plugin's hook in
    :mod:`tapegrad_shape.ops`)."""
    fn = registry.register_function
    fn("block", block, method=False, samples=[
        tg.Sample([_rand(2), _rand(3, seed=1)]),
        tg.Sample([_rand(2, 3), _rand(2, 1, seed=1)])])
    fn("broadcast_arrays", broadcast_arrays, method=False, samples=[
        tg.Sample(_rand(2, 1), _rand(3, seed=1)), tg.Sample(_rand(3), _rand(2, 3, seed=1),
                                                           _rand(1, 1, seed=2))])
    fn("meshgrid", meshgrid, method=False, samples=[
        tg.Sample(_rand(3), _rand(2, seed=1)),
        tg.Sample(_rand(3), _rand(2, seed=1), _rand(4, seed=2), indexing="ij"),
        tg.Sample(_rand(3), _rand(2, seed=1), sparse=True),
        tg.Sample(_rand(2, 2), _rand(3, seed=1), copy=False)])
    fn("unstack", unstack, method=False, samples=[
        tg.Sample(_rand(3, 2)), tg.Sample(_rand(2, 3, 4), axis=-1)])
    fn("diagflat", diagflat, method=False, samples=[
        tg.Sample(_rand(3)), tg.Sample(_rand(2, 2), 1), tg.Sample(_rand(3), k=-2)])
    fn("resize", resize, method=False, samples=[
        tg.Sample(_rand(3), (2, 4)), tg.Sample(_rand(2, 3), 4), tg.Sample(_rand(2, 2), (3, 3))])
    fn("rot90", rot90, method=False, samples=[
        tg.Sample(_rand(2, 3)), tg.Sample(_rand(2, 3), 2), tg.Sample(_rand(2, 3), -1),
        tg.Sample(_rand(2, 3, 4), 1, (2, 0)), tg.Sample(_rand(2, 3), k=4)])
    # The index argument a selects: only the choices are differentiable.
    fn("choose", choose, method=True, differentiable=(1,), samples=[
        tg.Sample(np.array([0, 2, 1, 0]), _rand(3, 4)),
        tg.Sample(np.array([[0], [1]]), _rand(2, 3), mode="raise"),
        tg.Sample(np.array([3, -1, 1]), _rand(2, 3), mode="wrap"),
        tg.Sample(np.array([3, -1, 1]), _rand(2, 1), mode="clip")])
    fn("compress", compress, method=_compress_method, differentiable=(1,), samples=[
        tg.Sample(np.array([True, False, True]), _rand(3, 2), axis=0),
        tg.Sample(np.array([False, True]), _rand(3, 2), axis=1),
        tg.Sample(np.array([1, 0, 1, 1]), _rand(2, 3))])
    fn("extract", extract, method=False, differentiable=(1,), samples=[
        tg.Sample(_mask(3, 4), _rand(3, 4)), tg.Sample(np.array([0, 2, 0, 1]), _rand(2, 2))])
    fn("select", select, method=False, differentiable=(1, 2), samples=[
        tg.Sample(np.stack([_mask(3, 4), _mask(3, 4, seed=5)]), _rand(2, 3, 4)),
        tg.Sample(np.stack([_mask(3, 4), _mask(3, 4, seed=5)]), _rand(2, 3, 4), _rand(4)),
        tg.Sample(_mask(1, 3, 1), _rand(1, 4), default=-0.5)])
    x = _rand(3, 4)
    fn("piecewise", piecewise, method=False, differentiable=(0,), samples=[
        tg.Sample(x, [x < 0, x > 0.5], [_square, _shifted_exp]),
        tg.Sample(x, [x < 0], [_square, 2.5]),
        tg.Sample(x, [x < -0.5, x > 0.5], [_square, -1.0, _shifted_exp], shift=1.5),
        tg.Sample(_rand(5), _rand(5) > 0, [_shifted_exp])])     # one condition
    fn("delete", delete, method=False, differentiable=(0,), samples=[
        tg.Sample(_rand(5), 2), tg.Sample(_rand(3, 4), [0, 2], axis=1),
        tg.Sample(_rand(3, 4), slice(None, None, 2), 0),
        tg.Sample(_rand(2, 3), np.array([True, False, False, True, False, True]))])
    fn("insert", insert, method=False, differentiable=(0, 2), samples=[
        tg.Sample(_rand(4), 1, _rand(1, seed=1)),
        tg.Sample(_rand(4), [1, 3], _rand(2, seed=1)),
        tg.Sample(_rand(3, 2), 1, _rand(3, seed=1), axis=1),
        tg.Sample(_rand(3, 2), [2], _rand(3, 1, seed=1), axis=1),
        tg.Sample(_rand(2, 3), 0, _rand(3, seed=2), axis=0),
        tg.Sample(_rand(2, 2), slice(0, 2), _rand(1, seed=1))])
    # NOTE: a finite difference that moves a trimmed zero changes the result's shape, so
    # the samples keep only zeros whose perturbation trims nothing (inner zeros, and
    # trailing ones with trim="f"); tests/test_shape_assembly.py gradchecks real trimming
    # through zeros that are constants.
    inner = np.array([[1.5, 0.0, -0.7], [0.0, 0.0, 0.4], [0.3, 0.0, 2.0]])
    fn("trim_zeros", trim_zeros, method=False, samples=[
        tg.Sample(np.array([0.8, 0.0, -1.1, 0.5])),
        tg.Sample(np.array([0.8, -1.1, 0.0, 0.0]), "f"),
        tg.Sample(inner), tg.Sample(inner, "b", axis=1)])
    fn("partition", partition, method=False, differentiable=(0,), samples=[
        tg.Sample(_distinct(6), 2), tg.Sample(_distinct(3, 5), [1, 3]),
        tg.Sample(_distinct(4, 3), 0, axis=0), tg.Sample(_distinct(2, 3), 4, axis=None),
        tg.Sample(_distinct(3, 5) + 0.5j * _distinct(3, 5)[::-1], [1, 3])])   # lexicographic
