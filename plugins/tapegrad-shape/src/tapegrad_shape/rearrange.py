"""Ops that rearrange, scan, sort, pad, tile and gather tensors, and tensor products, with
NumPy's names and semantics (registered by ``register(registry)``, which the plugin's hook
in :mod:`tapegrad_shape.ops` calls).

Vocabulary as in ``ops.py``: ``g`` the gradient flowing into an op's output, ``ans`` the
op's result, ``a, b, x, ...`` its inputs; ``t`` in a JVP rule holds one tangent per input.
Every rule uses tapegrad ops only, so it runs on any device and is itself differentiable.

Op signatures (for device plugins): a kernel is called as ``kernel(*arrays, **params)``,
array inputs positional, parameters by keyword with NumPy's names, exactly as below.
Parameters arrive as the caller passed them (``axis`` may be None, negative, ...).

=======================  =============================================================
op                       kernel signature (and what it must do)
=======================  =============================================================
cumsum                   ``(a, axis=None, dtype=None)``  np.cumsum
cumprod                  ``(a, axis=None, dtype=None)``  np.cumprod
sort                     ``(a, axis=-1, kind=None, order=None, stable=None)`` np.sort
                         (``order`` is refused: structured arrays do not exist here)
argsort                  ``(a, axis=-1, kind=None, order=None, stable=None)`` -> int64
take_along_axis          ``(arr, indices, axis=-1)``  indices: an integer array
_take_along_axis_grad    ``(g, indices, shape, axis=-1)``: zeros of `shape`, g added at
                         the positions take_along_axis(., indices, axis) reads (repeats
                         accumulate); the gradient of take_along_axis and of sort
roll                     ``(a, shift, axis=None)``  np.roll (shift/axis int or tuple)
repeat                   ``(a, repeats, axis=None)``  repeats: an int, or a host int
                         sequence/array (never a device array)
tile                     ``(A, reps)``  np.tile
pad                      ``(array, pad_width, mode='constant', **kwargs)`` np.pad for
                         modes constant (``constant_values``), edge, reflect, symmetric,
                         wrap; ``pad_arguments(array.ndim, pad_width, mode, kwargs)``
                         returns pad_width as one ``(before, after)`` int pair per axis and
                         validates the mode, so a kernel need not parse NumPy's forms
tensordot                ``(a, b, axes=2)``  np.tensordot
take                     ``(a, indices, axis=None, mode='raise')``  np.take
_take_grad               ``(g, indices, shape, axis=None, mode='raise')``: the gradient of
                         take (a scatter-add into zeros of `shape`)
_put_along_axis          ``(arr, indices, values, axis)``: a copy of arr with
                         np.put_along_axis applied (``tg.put_along_axis`` checks its
                         arguments, then calls it)
=======================  =============================================================

What the gradients run besides these: sort's runs argsort and _take_along_axis_grad;
pad's (non-constant modes), repeat's (an array of repeats) and diag (1-d input) run
``_getitem_grad`` of ops.py (a scatter-add with a host index). Everything else here
(outer, inner, kron, trace, diagonal, diag, tril, triu, flip, fliplr, flipud,
put_along_axis) is composed of ops (getitem, where, multiply, ...) and runs wherever those
do.

>>> import tapegrad as tg
>>> x = tg.tensor([[3., 1., 2.], [0., 5., 4.]], requires_grad=True)
>>> tg.cumsum(x, axis=1)
tensor([[3., 4., 6.],
        [0., 5., 9.]], grad_fn=<cumsum>)
>>> tg.sort(x).sum(0).tolist()
[1.0, 6.0, 8.0]
>>> tg.pad(x, 1, mode="edge").shape
(4, 5)
>>> (tg.roll(x, 1, axis=1) * tg.tensor([1., 2., 3.])).sum().backward()
>>> x.grad
tensor([[2., 3., 1.],
        [2., 3., 1.]])
"""

from __future__ import annotations

import math
import numbers
import operator

import numpy as np
import tapegrad as tg
from tapegrad._batching import logical_axes, pad_batched
from tapegrad._compile import compile_check

# NOTE: `from . import ops`, not `from .ops import ...`: ops.py imports this module at its
# top, so at that moment ops is half imported; its helpers are looked up at call time.
from . import ops as _ops

_needs_grad = tg.needs_grad


# ---------------------------------------------------------------------------------------
# Helpers (plain Python on shapes, axes and host index arrays, never on tensor data)
# ---------------------------------------------------------------------------------------

def _axis(axis, ndim, op):
    """One axis (an int; negatives count from the end) as a non-negative int."""
    if isinstance(axis, (tuple, list)):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    (ax,) = _ops._axes(axis, ndim, op)
    return ax


def _host(value):
    """A parameter (an index list, an int array, a tensor that needs no grad) as a host
    NumPy array. NOTE: a Tensor reaching a NumPy function would dispatch back to tapegrad
    through __array_function__; its values are what a parameter means here."""
    if isinstance(value, tg.Tensor):
        return value.numpy()
    return np.asarray(value)


def _constant(array, like):
    """A host array (a mask, an index) as a constant tensor on `like`'s device."""
    return tg.asarray(array, device=like.device)


def _int(value, name, op):
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int, got {value!r}") from None


def _lead(ax):
    return (slice(None),) * ax


def _flip_axis(x, ax):
    return x[_lead(ax) + (slice(None, None, -1),)]


def _rand(*shape, seed=0):
    return _ops._rand(*shape, seed=seed)


def _distinct(*shape):
    return _ops._distinct(*shape)


# ---------------------------------------------------------------------------------------
# vmap's batching rules (see ops.py, "vmap's batching rules: helpers": inputs physical,
# the vmapped axis first; axis parameters logical)
# ---------------------------------------------------------------------------------------

def _flat_examples(x):
    """Physical x as (batch, one example flattened)."""
    return tg.reshape(x, (x.shape[0], math.prod(x.shape[1:])))


def _one_axis_batch(name, default_axis):
    """The rule of an op along one `axis` of its one input, where axis=None means the
    flattened input (cumsum, cumprod, sort, argsort): each example flattened then."""
    def rule(inputs, batched, **params):
        (x,) = inputs
        axis = params.pop("axis", default_axis)
        op = getattr(tg, name)
        if axis is None:
            return op(_flat_examples(x), axis=1, **params)
        (ax,) = logical_axes(axis, x.ndim - 1, name)
        return op(x, axis=ax + 1, **params)
    rule.__qualname__ = rule.__name__ = f"_{name}_batch"
    return rule


def _roll_batch(inputs, batched, *, shift, axis=None):
    (x,) = inputs
    if axis is None:                 # rolled flattened, then the example's shape back
        return tg.reshape(tg.roll(_flat_examples(x), shift, axis=1), x.shape)
    axes = logical_axes(axis, x.ndim - 1, "roll")
    physical = tuple(a + 1 for a in axes) if isinstance(axis, (tuple, list)) else axes[0] + 1
    return tg.roll(x, shift, axis=physical)


def _repeat_batch(inputs, batched, *, repeats, axis=None):
    (x,) = inputs
    if axis is None:
        return tg.repeat(_flat_examples(x), repeats, axis=1)
    (ax,) = logical_axes(axis, x.ndim - 1, "repeat")
    return tg.repeat(x, repeats, axis=ax + 1)


def _tile_batch(inputs, batched, *, reps):
    (x,) = inputs
    reps = tuple(int(r) for r in np.atleast_1d(_host(reps)))
    d = max(x.ndim - 1, len(reps))
    # NOTE: np.tile gives A leading axes when reps is longer: those go after the vmapped
    # axis, which is never tiled.
    return tg.tile(pad_batched(x, d), (1,) + (1,) * (d - len(reps)) + reps)


def _pad_batch(inputs, batched, *, pad_width, mode="constant", **kwargs):
    (x,) = inputs
    if len(_ops._shape_of(kwargs.get("constant_values", 0))) != 0:
        # one constant per axis (and side): left to the exact per-example loop
        return _ops._loop_fallback("pad", inputs, batched,
                                   dict(kwargs, pad_width=pad_width, mode=mode))
    pairs = pad_arguments(x.ndim - 1, pad_width, mode, kwargs)
    return tg.pad(x, ((0, 0),) + pairs, mode, **kwargs)


def _tensordot_batch(inputs, batched, *, axes=2):
    a, b = inputs
    nda, ndb = len(_ops._shape_of(a)) - batched[0], len(_ops._shape_of(b)) - batched[1]
    axes_a, axes_b = _tensordot_axes(axes, nda, ndb)
    if batched[0] and batched[1]:
        return _tensordot_both_batched(a, b, axes_a, axes_b, axes)
    if batched[0]:                   # a's free axes come first, the vmapped one first
        return tg.tensordot(a, b, axes=([i + 1 for i in axes_a], axes_b))
    out = tg.tensordot(a, b, axes=(axes_a, [i + 1 for i in axes_b]))
    return _ops._move_axis_to_front(out, nda - len(axes_a))


def _tensordot_both_batched(a, b, axes_a, axes_b, axes):
    """A contraction batched in both inputs is no tensordot: it is a batched matmul of
    (batch, free of a, contracted) by (batch, contracted, free of b). NOTE: matmul is
    tapegrad-linalg's, not a dependency of this plugin: without it, the exact loop."""
    if "matmul" not in tg.registry().ops:
        return _ops._loop_fallback("tensordot", (a, b), (True, True), {"axes": axes})
    free_a = [i for i in range(a.ndim - 1) if i not in axes_a]
    free_b = [i for i in range(b.ndim - 1) if i not in axes_b]
    size = a.shape[0]
    k = math.prod(a.shape[1 + i] for i in axes_a)
    lhs = tg.transpose(a, (0,) + tuple(1 + i for i in free_a + axes_a))
    lhs = tg.reshape(lhs, (size, math.prod(a.shape[1 + i] for i in free_a), k))
    rhs = tg.transpose(b, (0,) + tuple(1 + i for i in axes_b + free_b))
    rhs = tg.reshape(rhs, (size, k, math.prod(b.shape[1 + i] for i in free_b)))
    out = tg.matmul(lhs, rhs)
    return tg.reshape(out, (size,) + tuple(a.shape[1 + i] for i in free_a)
                      + tuple(b.shape[1 + i] for i in free_b))


def _unbatched_leading(x, b):
    """Physical x, or an unbatched x with a unit axis in front (to broadcast)."""
    return x if b else tg.reshape(x, (1,) + _ops._shape_of(x))


def _take_along_axis_batch(inputs, batched, axis=-1):
    arr, indices = inputs
    arr = _unbatched_leading(arr, batched[0])
    indices = _unbatched_leading(indices, batched[1])
    if axis is None:
        # arr flattened per example; (1, n) broadcasts against (batch, m) in take_along_axis
        out = tg.take_along_axis(tg.reshape(arr, (arr.shape[0], math.prod(arr.shape[1:]))),
                                 indices, axis=1)
    else:
        (ax,) = logical_axes(axis, arr.ndim - 1, "take_along_axis")
        out = tg.take_along_axis(arr, indices, axis=ax + 1)
    return out


def _take_along_axis_grad_batch(inputs, batched, *, shape, axis=-1):
    g, indices = inputs
    size = _ops._batch_size(inputs, batched)
    g = _ops._with_batch_axis(g, batched[0], size)
    indices = _unbatched_leading(indices, batched[1])
    if axis is None:
        out = tg._take_along_axis_grad(g, indices, shape=(size, math.prod(shape)), axis=1)
        return tg.reshape(out, (size,) + tuple(shape))
    (ax,) = logical_axes(axis, len(shape), "take_along_axis")
    return tg._take_along_axis_grad(g, indices, shape=(size,) + tuple(shape), axis=ax + 1)


def _put_along_axis_batch(inputs, batched, *, axis):
    arr, indices, values = inputs
    size = _ops._batch_size(inputs, batched)
    arr = _ops._with_batch_axis(arr, batched[0], size)
    idx_ndim = indices.ndim - batched[1]
    indices = _unbatched_leading(indices, batched[1])
    if batched[2]:
        if values.ndim - 1 > idx_ndim:
            return _ops._loop_fallback("_put_along_axis", inputs, batched, {"axis": axis})
        values = pad_batched(values, idx_ndim)
    elif len(_ops._shape_of(values)) > idx_ndim:
        return _ops._loop_fallback("_put_along_axis", inputs, batched, {"axis": axis})
    if axis is None:
        flat = tg.reshape(arr, (size, math.prod(arr.shape[1:])))
        return tg.reshape(tg._put_along_axis(flat, indices, values, axis=1), arr.shape)
    (ax,) = logical_axes(axis, arr.ndim - 1, "put_along_axis")
    return tg._put_along_axis(arr, indices, values, axis=ax + 1)


def _take_indices(indices, n, mode):
    """take's indices into an axis of length n as take_along_axis reads them."""
    if mode == "wrap":
        return tg.remainder(indices, n)
    if mode == "clip":
        return tg.clip(indices, 0, n - 1)
    return indices


def _take_batch(inputs, batched, axis=None, mode="raise"):
    a, indices = inputs
    if not batched[1]:               # one index array for every example: take itself
        if axis is None:
            return tg.take(_flat_examples(a), indices, axis=1, mode=mode)
        (ax,) = logical_axes(axis, a.ndim - 1, "take")
        return tg.take(a, indices, axis=ax + 1, mode=mode)
    # Different indices per example: a gather along the axis (take_along_axis), with
    # the indices flattened to one axis and the example's other axes flattened to another.
    size = indices.shape[0]
    a = _unbatched_leading(a, batched[0])
    index_shape = tuple(indices.shape[1:])
    flat_idx = tg.reshape(indices, (size, math.prod(index_shape)))
    if axis is None:
        flat = _flat_examples(a)
        out = tg.take_along_axis(flat, _take_indices(flat_idx, flat.shape[1], mode), axis=1)
        return tg.reshape(out, (size,) + index_shape)
    (ax,) = logical_axes(axis, a.ndim - 1, "take")
    example = tuple(a.shape[1:])
    rest = example[:ax] + example[ax + 1:]
    moved = _ops._move_axis_to_front(a, ax + 1)             # (n, 1 or batch, rest...)
    moved = tg.transpose(moved, (1, 0) + tuple(range(2, moved.ndim)))
    moved = tg.reshape(moved, (a.shape[0], example[ax], math.prod(rest)))
    idx = tg.reshape(_take_indices(flat_idx, example[ax], mode), (size, flat_idx.shape[1], 1))
    out = tg.take_along_axis(moved, idx, axis=1)             # (batch, m, prod(rest))
    out = tg.reshape(out, (size,) + index_shape + rest)
    # the index axes go where the taken axis was: after the example's first `ax` axes
    k = len(index_shape)
    order = ((0,) + tuple(range(1 + k, 1 + k + ax)) + tuple(range(1, 1 + k))
             + tuple(range(1 + k + ax, out.ndim)))
    return tg.transpose(out, order)


def _take_grad_per_example(g, indices, shape, axis, mode):
    """take's gradient with different indices per example: the scatter-add of
    take_along_axis (_take_along_axis_grad), laid out as _take_batch's gather."""
    size = indices.shape[0]
    index_shape = tuple(indices.shape[1:])
    m = math.prod(index_shape)
    flat_idx = tg.reshape(indices, (size, m))
    if axis is None:
        n = math.prod(shape)
        out = tg._take_along_axis_grad(tg.reshape(g, (size, m)),
                                       _take_indices(flat_idx, n, mode), shape=(size, n),
                                       axis=1)
        return tg.reshape(out, (size,) + shape)
    (ax,) = logical_axes(axis, len(shape), "take")
    n, rest = shape[ax], shape[:ax] + shape[ax + 1:]
    k = len(index_shape)
    # g is (batch, shape[:ax], index_shape, shape[ax+1:]): the index axes after the batch
    order = ((0,) + tuple(range(1 + ax, 1 + ax + k)) + tuple(range(1, 1 + ax))
             + tuple(range(1 + ax + k, g.ndim)))
    g3 = tg.reshape(tg.transpose(g, order), (size, m, math.prod(rest)))
    idx = tg.reshape(_take_indices(flat_idx, n, mode), (size, m, 1))
    out = tg._take_along_axis_grad(g3, idx, shape=(size, n, math.prod(rest)), axis=1)
    out = tg.reshape(out, (size, n) + rest)
    # the taken axis back where it was: after the example's first `ax` axes
    return tg.transpose(out, (0,) + tuple(range(2, 2 + ax)) + (1,)
                        + tuple(range(2 + ax, out.ndim)))


def _take_grad_batch(inputs, batched, *, shape, axis=None, mode="raise"):
    g, indices = inputs
    size = _ops._batch_size(inputs, batched)
    g = _ops._with_batch_axis(g, batched[0], size)
    if batched[1]:
        return _take_grad_per_example(g, indices, tuple(shape), axis, mode)
    if axis is None:
        out = tg._take_grad(g, indices, shape=(size, math.prod(shape)), axis=1, mode=mode)
        return tg.reshape(out, (size,) + tuple(shape))
    (ax,) = logical_axes(axis, len(shape), "take")
    return tg._take_grad(g, indices, shape=(size,) + tuple(shape), axis=ax + 1, mode=mode)


# ---------------------------------------------------------------------------------------
# Scans: cumsum, cumprod
# ---------------------------------------------------------------------------------------

def _cumsum_kernel(a, axis=None, dtype=None):
    return np.cumsum(a, axis=axis, dtype=dtype)


def _cumsum_vjp(g, ans, a, axis=None, *, dtype=None):
    # The transpose of a running sum is the running sum from the other end.
    if axis is None:
        return (tg.reshape(_flip_axis(tg.cumsum(_flip_axis(g, 0)), 0), a.shape),)
    ax = axis % a.ndim
    return (_flip_axis(tg.cumsum(_flip_axis(g, ax), ax), ax),)


def _cumsum_jvp(t, ans, a, axis=None, *, dtype=None):
    return tg.cumsum(t[0], axis, dtype=dtype)


def _cumprod_kernel(a, axis=None, dtype=None):
    return np.cumprod(a, axis=axis, dtype=dtype)


def _cumprod_vjp(g, ans, a, axis=None, *, dtype=None):
    # NOTE: the textbook rule, reverse_cumsum(g * ans) / a, is 0/0 wherever a == 0. This
    # one divides by nothing: d ans_i / d a_j = prod_{k <= i, k != j} a_k for j <= i, the
    # running product C[j, i] of a with its entry j replaced by 1 (one row per j), so
    # grad_j = sum_{i >= j} g_i C[j, i]. Exact with any number of zeros and
    # differentiable again, at O(n^2) memory per lane for an axis of length n (O(n^3) for
    # the second derivative): the price of correctness without data-dependent branches.
    x = tg.reshape(a, (-1,)) if axis is None else a
    ax = 0 if axis is None else axis % a.ndim
    xm, gm = _ops.moveaxis(x, ax, -1), _ops.moveaxis(g, ax, -1)
    later, products = _running_products(xm)
    if products.dtype.kind == "c":
        products = tg.conj(products)      # complex (holomorphic): g conj(d ans / d a)
    terms = tg.where(later, products * gm[..., None, :], 0)
    grad = _ops.moveaxis(tg.sum(terms, axis=-1), -1, ax)
    return (tg.reshape(grad, a.shape) if axis is None else grad,)


def _running_products(xm):
    """(later, C) for cumprod's rules over xm's last axis (length n): later[j, i] is
    i >= j, and C[j, i] (for i >= j) the product of xm[0..i] without xm[j], which is
    d cumprod_i / d x_j: a cumprod of rows with a 1 on the diagonal -- no division, so
    exact where entries are zero."""
    n = xm.shape[-1]
    eye = _constant(np.eye(n, dtype=bool), xm)
    later = _constant(np.triu(np.ones((n, n), dtype=bool)), xm)    # later[j, i]: i >= j
    rows = tg.where(eye, xm.dtype.type(1), xm[..., None, :])          # rows[j, k]
    return later, tg.cumprod(rows, axis=-1)


def _cumprod_jvp(t, ans, a, axis=None, *, dtype=None):
    # The transpose of _cumprod_vjp, with the same division-free running products:
    # tangent_i = sum_{j <= i} t_j C[j, i] (exact where entries are zero).
    x = tg.reshape(a, (-1,)) if axis is None else a
    tx = tg.reshape(t[0], (-1,)) if axis is None else t[0]
    ax = 0 if axis is None else axis % a.ndim
    xm, tm = _ops.moveaxis(x, ax, -1), _ops.moveaxis(tx, ax, -1)
    later, products = _running_products(xm)
    terms = tg.where(later, products * tm[..., :, None], 0)
    out = _ops.moveaxis(tg.sum(terms, axis=-2), -1, ax)
    if out.dtype != ans.dtype:
        out = out.astype(ans.dtype)
    return tg.reshape(out, ans.shape) if axis is None else out


# ---------------------------------------------------------------------------------------
# Sorting: sort, argsort
# ---------------------------------------------------------------------------------------

def _no_order(order):
    if order is not None:
        # (the engine prefixes a kernel's errors with the op's name and inputs)
        raise ValueError("order= names fields of a structured array, which tapegrad tensors "
                         "are not; pass order=None")


def _sort_kernel(a, axis=-1, kind=None, order=None, *, stable=None):
    _no_order(order)
    return np.sort(a, axis=axis, kind=kind, stable=stable)


def _argsort_kernel(a, axis=-1, kind=None, order=None, *, stable=None):
    _no_order(order)
    return np.argsort(a, axis=axis, kind=kind, stable=stable)


def _sort_permutation(a, axis):
    """(flat or not) a, the stable sorting permutation along the sorted axis, the axis."""
    # NOTE: the permutation is the *stable* one whatever `kind` the forward used: tied
    # entries are equal, so every kind gives the same sorted values, and the gradient of
    # a tie goes to the element a stable sort puts at that position (as torch.sort's).
    x = tg.reshape(a, (-1,)) if axis is None else a
    ax = 0 if axis is None else axis % a.ndim
    return x, tg.argsort(x, axis=ax, kind="stable"), ax


def _sort_vjp(g, ans, a, axis=-1, kind=None, order=None, *, stable=None):
    x, perm, ax = _sort_permutation(a, axis)
    grad = tg._take_along_axis_grad(g, perm, shape=x.shape, axis=ax)
    return (tg.reshape(grad, a.shape) if axis is None else grad,)


def _sort_jvp(t, ans, a, axis=-1, kind=None, order=None, *, stable=None):
    x, perm, ax = _sort_permutation(a, axis)
    tx = tg.reshape(t[0], (-1,)) if axis is None else t[0]
    return tg.take_along_axis(tx, perm, axis=ax)


# ---------------------------------------------------------------------------------------
# Gathers and scatters along an axis: take_along_axis, put_along_axis, take
# ---------------------------------------------------------------------------------------

def _along_axis_index(indices, ax, shape):
    """The advanced index that take_along_axis(arr, indices, ax) reads arr at (NumPy's
    construction: a broadcast arange for every other axis)."""
    nd = len(shape)
    return tuple(indices if d == ax
                 else np.arange(n).reshape((1,) * d + (-1,) + (1,) * (nd - d - 1))
                 for d, n in enumerate(shape))


def _take_along_axis_kernel(arr, indices, axis=-1):
    return np.take_along_axis(arr, indices, axis=axis)


def _take_along_axis_vjp(g, ans, arr, indices, axis=-1):
    return tg._take_along_axis_grad(g, indices, shape=arr.shape, axis=axis), None


def _take_along_axis_jvp(t, ans, arr, indices, axis=-1):
    return tg.take_along_axis(t[0], indices, axis=axis)


def _take_along_axis_grad_kernel(g, indices, *, shape, axis=-1):
    out = np.zeros(shape, dtype=g.dtype)
    if axis is None:
        np.add.at(out.reshape(-1), indices, g)
    else:
        np.add.at(out, _along_axis_index(indices, axis % len(shape), shape), g)
    return out


def _take_along_axis_grad_vjp(g, ans, x, indices, *, shape, axis=-1):
    return tg.take_along_axis(g, indices, axis=axis), None


def _put_along_axis_kernel(arr, indices, values, *, axis):
    out = arr.copy()
    np.put_along_axis(out, indices, values, axis)
    return out


def _put_along_axis_vjp(g, ans, arr, indices, values, *, axis):
    garr = tg._put_along_axis(g, indices, 0, axis=axis) if _needs_grad(arr) else None
    gvalues = tg.take_along_axis(g, indices, axis=axis) if _needs_grad(values) else None
    return garr, None, gvalues


def put_along_axis(arr, indices, values, axis):
    """`arr` with `values` put at `indices` along `axis` (NumPy's ``np.put_along_axis``),
    as a NEW tensor: unlike NumPy's, this function does not modify `arr` (tensors that take
    part in a graph are not written in place), so write ``arr = tg.put_along_axis(...)``.
    ``np.put_along_axis(t, ...)`` on a tensor is refused for the same reason.

    `values` broadcasts against `indices`; ``axis=None`` works on arr flattened. Gradients:
    `arr` gets g with zeros at the written positions, `values` gets g at them (summed to
    its shape where it was broadcast). Where `indices` writes one position more than once,
    NumPy keeps one of the writes (the last, in practice; NumPy does not promise an order),
    so which value's gradient is g would be a guess: a call whose `values` requires grad
    (or carries a forward-mode tangent) with such duplicates raises a ValueError (without
    derivatives, duplicates are NumPy's).

    >>> import tapegrad as tg
    >>> a = tg.zeros((2, 3))
    >>> tg.put_along_axis(a, tg.tensor([[2], [0]]), 5.0, axis=1)
    tensor([[0., 0., 5.],
            [5., 0., 0.]])
    """
    arr = tg.asarray(arr)
    if isinstance(indices, (list, tuple)) or isinstance(indices, np.ndarray):
        indices = tg.asarray(indices, device=arr.device)
    if not isinstance(indices, tg.Tensor) or indices.dtype.kind not in "iu":
        raise TypeError(f"put_along_axis: indices must be an integer tensor or array, got "
                        f"{getattr(indices, 'dtype', type(indices).__name__)}")
    if axis is None:
        if indices.ndim != 1:
            raise ValueError(f"put_along_axis: with axis=None, indices must be 1-d (they "
                             f"index arr flattened), got shape {indices.shape}")
    else:
        _axis(axis, arr.ndim, "put_along_axis")
        if indices.ndim != arr.ndim:
            raise ValueError(f"put_along_axis: indices (shape {indices.shape}) and arr (shape "
                             f"{arr.shape}) must have the same number of dimensions")
    if isinstance(values, (list, tuple)):
        values = tg.asarray(values, device=arr.device)   # a list of tensors keeps its graph
    out = tg._put_along_axis(arr, indices, values, axis=axis)   # raises for bad indices
    reason = _ops.derivative_reason(values)
    if reason is not None:
        # (on the values of every tg.compile replay too: indices may come from an argsort)
        if isinstance(indices, tg.Tensor):
            # (values' shape only: the recorded check must not keep the tensor alive)
            like = np.broadcast_to(np.float64(0), tuple(getattr(values, "shape", ())))
            compile_check(lambda idx: _refuse_duplicate_writes(arr.shape, idx, axis, like,
                                                               reason), indices)
        else:
            _refuse_duplicate_writes(arr.shape, _host(indices), axis, values, reason)
    return out


def _refuse_duplicate_writes(shape, indices, axis, values, reason):
    if axis is None:
        n = math.prod(shape)
        targets = np.asarray(indices) % max(n, 1)
    else:
        ax = axis % len(shape)
        vshape = getattr(values, "shape", ())
        index = _along_axis_index(indices % max(shape[ax], 1), ax, shape)
        full = np.broadcast_shapes(*(i.shape for i in index), vshape)
        targets = np.ravel_multi_index([np.broadcast_to(i, full) for i in index], shape)
    _refuse_repeated_writes("put_along_axis", targets, f"arr of shape {tuple(shape)}, axis "
                            f"{axis}", reason, "values")


def _refuse_repeated_writes(op, targets, where, reason, values_name):
    """Raise if `targets` (the flat position each written element lands on) names a
    position twice: NumPy keeps one of the writes there without promising which, so the
    derivative with respect to the values written would be a guess. `reason` says why
    that derivative is wanted (derivative_reason: "requires grad", ...). Shared by the
    scatters: put_along_axis, setitem."""
    targets = np.asarray(targets).reshape(-1)
    if np.unique(targets).size != targets.size:
        raise ValueError(
            f"{op}: indices write some position more than once, and {values_name} "
            f"{reason} ({where}): NumPy keeps one of the writes without promising "
            f"which, so the derivative with respect to {values_name} would be a guess; make "
            f"the indices unique, or pass {values_name}.detach()")


def _take_kernel(a, indices, axis=None, mode="raise"):
    return np.take(a, indices, axis=axis, mode=mode)


def _take_vjp(g, ans, a, indices, axis=None, mode="raise"):
    return tg._take_grad(g, indices, shape=a.shape, axis=axis, mode=mode), None


def _take_jvp(t, ans, a, indices, axis=None, mode="raise"):
    return tg.take(t[0], indices, axis=axis, mode=mode)


def _take_grad_kernel(g, indices, *, shape, axis=None, mode="raise"):
    size = math.prod(shape)
    out = np.zeros(size if axis is None else shape, dtype=g.dtype)
    ax = 0 if axis is None else axis % len(shape)
    n = out.shape[ax]
    idx = np.asarray(indices)
    if mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = np.clip(idx, 0, n - 1)
    np.add.at(out, _lead(ax) + (idx,), g)
    return out.reshape(shape)


def _take_grad_vjp(g, ans, x, indices, *, shape, axis=None, mode="raise"):
    return tg.take(g, indices, axis=axis, mode=mode), None


# ---------------------------------------------------------------------------------------
# Copies that move entries: roll, flip, repeat, tile, pad
# ---------------------------------------------------------------------------------------

def _roll_kernel(a, shift, axis=None):
    return np.roll(a, shift, axis=axis)


def _roll_vjp(g, ans, a, *, shift, axis=None):
    back = np.negative(shift).tolist()
    return (tg.roll(g, tuple(back) if isinstance(back, list) else back, axis=axis),)


def _roll_jvp(t, ans, a, shift, axis=None):
    return tg.roll(t[0], shift, axis=axis)


def flip(m, axis=None):
    """m with the order of its entries reversed along `axis` (None: every axis; an int or
    a tuple), as NumPy's ``np.flip``; a view, as NumPy's.

    >>> import tapegrad as tg
    >>> tg.flip(tg.tensor([[1., 2.], [3., 4.]]), axis=1)
    tensor([[2., 1.],
            [4., 3.]])
    """
    x = tg.asarray(m)
    axes = _ops._axes(axis, x.ndim, "flip")
    return x[tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(x.ndim))]


def fliplr(m):
    """m with its columns (axis 1) in reverse order, as ``np.fliplr``; needs 2 dimensions.

    >>> import tapegrad as tg
    >>> tg.fliplr(tg.tensor([[1., 2.], [3., 4.]])).tolist()
    [[2.0, 1.0], [4.0, 3.0]]
    """
    x = tg.asarray(m)
    if x.ndim < 2:
        raise ValueError(f"fliplr: needs a tensor of at least 2 dimensions, got shape {x.shape}")
    return _flip_axis(x, 1)


def flipud(m):
    """m with its rows (axis 0) in reverse order, as ``np.flipud``; needs 1 dimension.

    >>> import tapegrad as tg
    >>> tg.flipud(tg.tensor([1., 2., 3.])).tolist()
    [3.0, 2.0, 1.0]
    """
    x = tg.asarray(m)
    if x.ndim < 1:
        raise ValueError(f"flipud: needs a tensor of at least 1 dimension, got shape {x.shape}")
    return _flip_axis(x, 0)


def _repeat_kernel(a, repeats, axis=None):
    return np.repeat(a, _host(repeats), axis=axis)


def _repeat_vjp(g, ans, a, *, repeats, axis=None):
    shape = (a.size,) if axis is None else a.shape
    ax = 0 if axis is None else axis % a.ndim
    n, r = shape[ax], _host(repeats)
    if r.size == 1:                      # every entry k times: sum each run of k
        k = int(r.reshape(()))
        runs = tg.reshape(g, shape[:ax] + (n, k) + shape[ax + 1:])
        grad = tg.sum(runs, axis=ax + 1)
    else:                                # runs of different lengths: scatter-add them
        source = np.repeat(np.arange(n), r)
        grad = tg._getitem_grad(g, index=_lead(ax) + (source,), shape=shape)
    return (tg.reshape(grad, a.shape) if axis is None else grad,)


def _repeat_jvp(t, ans, a, repeats, axis=None):
    return tg.repeat(t[0], repeats, axis=axis)


def _tile_kernel(A, reps):
    return np.tile(A, _host(reps))


def _tile_vjp(g, ans, A, *, reps):
    reps = tuple(int(r) for r in np.atleast_1d(_host(reps)))
    d = max(A.ndim, len(reps))
    reps = (1,) * (d - len(reps)) + reps
    shape = (1,) * (d - A.ndim) + tuple(A.shape)
    # g's axis i holds reps[i] copies of A's axis i: split each into (copy, entry), sum copies.
    split = tg.reshape(g, tuple(v for pair in zip(reps, shape) for v in pair))
    return (tg.reshape(tg.sum(split, axis=tuple(range(0, 2 * d, 2))), A.shape),)


def _tile_jvp(t, ans, A, reps):
    return tg.tile(t[0], reps)


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")
_PAD_KEYWORDS = {"constant": {"constant_values"}, "edge": set(),
                 "reflect": {"reflect_type"}, "symmetric": {"reflect_type"}, "wrap": set()}


def pad_arguments(ndim, pad_width, mode="constant", kwargs=None):
    """Validate np.pad's arguments for a tensor of `ndim` dimensions and return
    `pad_width` as a tuple of ``(before, after)`` int pairs, one per axis (NumPy's forms:
    an int, ``(n,)``, ``(before, after)``, or one pair per axis). Raises ValueError or
    TypeError (the engine adds the op's name and inputs to a kernel's errors).

    >>> pad_arguments(2, ((1, 2),))
    ((1, 2), (1, 2))
    >>> pad_arguments(3, (0, 1), "edge")
    ((0, 1), (0, 1), (0, 1))
    """
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        raise ValueError(
            f"mode {mode!r} is not supported (tapegrad pads with {', '.join(_PAD_MODES)}; "
            f"linear_ramp, maximum, mean, median, minimum, empty and callables are not)")
    unknown = set(kwargs or ()) - _PAD_KEYWORDS[mode]
    if unknown:
        raise ValueError(f"unsupported keyword arguments for mode {mode!r}: {sorted(unknown)}")
    if (kwargs or {}).get("reflect_type", "even") != "even":
        raise ValueError(f"reflect_type={kwargs['reflect_type']!r} is not supported "
                         f"(only 'even', NumPy's default)")
    width = np.asarray(_host(pad_width))
    if width.dtype.kind not in "iu":
        raise TypeError(f"pad_width must be of integral type, got {pad_width!r}")
    if width.size == 0 and ndim:
        raise ValueError(f"pad_width {pad_width!r} is empty")
    if width.size == 1:
        pairs = np.full((ndim, 2), int(width.reshape(())))
    elif width.size == 2 and width.shape != (2, 1):
        pairs = np.broadcast_to(width.reshape(2), (ndim, 2))
    else:
        try:
            pairs = np.broadcast_to(width, (ndim, 2))
        except ValueError:
            raise ValueError(f"pad_width of shape {width.shape} does not fit a tensor of "
                             f"{ndim} dimensions (it takes an int, (before, after), or one "
                             f"(before, after) pair per axis)") from None
    if (pairs < 0).any():
        raise ValueError(f"pad_width must not be negative, got {pad_width!r}")
    return tuple((int(b), int(e)) for b, e in pairs)


def _pad_kernel(array, pad_width, mode="constant", **kwargs):
    pairs = pad_arguments(np.ndim(array), pad_width, mode, kwargs)
    return np.pad(array, pairs, mode=mode, **kwargs)


def _pad_vjp(g, ans, array, *, pad_width, mode="constant", constant_values=0,
             reflect_type="even"):
    pairs = pad_arguments(array.ndim, pad_width, mode)
    if mode == "constant":            # the inner block; the padding was constants
        return (g[tuple(slice(b, b + n) for (b, _e), n in zip(pairs, array.shape))],)
    # NOTE: every other mode copies entries along each axis independently of the values
    # and of the other axes (corners included: NumPy pads axis by axis), so the gradient
    # is a scatter-add per axis. Where padded position j came from is found by padding
    # the positions 0..n-1 themselves with np.pad: NumPy's own reading of the mode, also
    # for widths beyond the axis length (reflect and wrap repeat then).
    grad = g
    for ax, ((before, after), n) in enumerate(zip(pairs, array.shape)):
        if before or after:
            source = np.pad(np.arange(n), (before, after), mode=mode)
            grad = tg._getitem_grad(grad, index=_lead(ax) + (source,),
                                    shape=grad.shape[:ax] + (n,) + grad.shape[ax + 1:])
    return (grad,)


def _pad_jvp(t, ans, array, pad_width, mode="constant", constant_values=0,
             reflect_type="even"):
    # The constants do not move with the input: the tangent pads with zeros.
    return tg.pad(t[0], pad_width, mode)


# ---------------------------------------------------------------------------------------
# Products: tensordot (op); outer, inner, kron (compositions)
# ---------------------------------------------------------------------------------------

def _tensordot_axes(axes, nda, ndb):
    """(axes of a, axes of b) that tensordot contracts, as lists of non-negative ints
    (NumPy's reading of `axes`: an int N, a pair of ints, or a pair of sequences)."""
    try:
        iter(axes)
    except TypeError:
        n = operator.index(axes)
        axes_a, axes_b = list(range(-n, 0)), list(range(0, n))
    else:
        axes_a, axes_b = axes
    return _axis_list(axes_a, nda), _axis_list(axes_b, ndb)


def _axis_list(axes, ndim):
    axes = [axes] if isinstance(axes, (numbers.Integral, np.integer)) else list(axes)
    return [int(i) % ndim if ndim else int(i) for i in axes]


def _tensordot_kernel(a, b, axes=2):
    return np.tensordot(a, b, axes=axes)


def _tensordot_vjp(g, ans, a, b, axes=2):
    axes_a, axes_b = _tensordot_axes(axes, a.ndim, b.ndim)
    free_a = [i for i in range(a.ndim) if i not in axes_a]
    free_b = [i for i in range(b.ndim) if i not in axes_b]
    na = len(free_a)
    ga = gb = None
    if _needs_grad(a):
        # g . b over b's free axes leaves a's free axes, then b's contracted axes in b's
        # order, each standing for the a axis it was paired with.
        # (complex: the adjoint contracts with conj(b), and gb with conj(a))
        ga = tg.tensordot(g, _ops._conj(b), axes=(list(range(na, g.ndim)), free_b))
        order = free_a + [axes_a[axes_b.index(j)] for j in sorted(axes_b)]
        ga = _unpermute(ga, order)
    if _needs_grad(b):
        gb = tg.tensordot(_ops._conj(a), g, axes=(free_a, list(range(na))))
        order = [axes_b[axes_a.index(i)] for i in sorted(axes_a)] + free_b
        gb = _unpermute(gb, order)
    return ga, gb


def _unpermute(x, order):
    """x, whose axis k is axis order[k] of the result, in the result's axis order."""
    if order == sorted(order):
        return x
    return tg.transpose(x, tuple(int(i) for i in np.argsort(order)))


def _tensordot_jvp(t, ans, a, b, axes=2):
    ta, tb = t[0], t[1]
    out = None if ta is None else tg.tensordot(ta, b, axes)
    if tb is not None:
        tb = tg.tensordot(a, tb, axes)
        out = tb if out is None else out + tb
    return out


def outer(a, b):
    """The outer product of a and b, both flattened (NumPy's ``np.outer``):
    ``out[i, j] = a.ravel()[i] * b.ravel()[j]``.

    >>> import tapegrad as tg
    >>> tg.outer(tg.tensor([1., 2.]), tg.tensor([1., 10., 100.])).tolist()
    [[1.0, 10.0, 100.0], [2.0, 20.0, 200.0]]
    """
    return tg.reshape(a, (-1, 1)) * tg.reshape(b, (1, -1))


def inner(a, b):
    """The inner product over the last axes of a and b (NumPy's ``np.inner``); a plain
    product when either is 0-d.

    >>> import tapegrad as tg
    >>> tg.inner(tg.tensor([[1., 2.], [3., 4.]]), tg.tensor([1., 1.])).tolist()
    [3.0, 7.0]
    """
    a, b = tg.asarray(a), tg.asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"inner: the last axes of a (shape {a.shape}) and b (shape "
                         f"{b.shape}) must have the same length")
    return tg.tensordot(a, b, axes=(-1, -1))


def kron(a, b):
    """The Kronecker product of a and b (NumPy's ``np.kron``): blocks ``a[i, j] * b``;
    the one with fewer dimensions gets leading axes of length one.

    >>> import tapegrad as tg
    >>> tg.kron(tg.tensor([1., 2.]), tg.tensor([1., 10.])).tolist()
    [1.0, 10.0, 2.0, 20.0]
    """
    a, b = tg.asarray(a), tg.asarray(b)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + a.shape
    sb = (1,) * (nd - b.ndim) + b.shape
    # a's axes interleaved with b's: (a0, b0, a1, b1, ...), then each pair merged.
    blocks = (tg.reshape(a, tuple(v for s in sa for v in (s, 1)))
              * tg.reshape(b, tuple(v for s in sb for v in (1, s))))
    return tg.reshape(blocks, tuple(x * y for x, y in zip(sa, sb)))


# ---------------------------------------------------------------------------------------
# Diagonals and triangles: diagonal, trace, diag, tril, triu (compositions)
# ---------------------------------------------------------------------------------------

def _diagonal_index(n1, n2, offset):
    """Row and column indices of diagonal `offset` of an (n1, n2) matrix."""
    if offset >= 0:
        k = np.arange(max(0, min(n1, n2 - offset)))
        return k, k + offset
    k = np.arange(max(0, min(n1 + offset, n2)))
    return k - offset, k


def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal `offset` (above the main one when positive) of the matrices that axes
    `axis1` and `axis2` span, as NumPy's ``np.diagonal``: those axes are removed and the
    diagonal becomes the last axis. NumPy returns a read-only view; this is a tensor
    whose gradient scatters back onto the diagonal.

    >>> import tapegrad as tg
    >>> x = tg.tensor([[1., 2., 3.], [4., 5., 6.]])
    >>> x.diagonal().tolist(), tg.diagonal(x, 1).tolist(), tg.diagonal(x, -1).tolist()
    ([1.0, 5.0], [2.0, 6.0], [4.0])
    """
    return _diagonal(a, offset, axis1, axis2, "diagonal")


def _diagonal(a, offset, axis1, axis2, op):
    """diagonal, its errors naming `op` (trace's name them trace)."""
    x = tg.asarray(a)
    if x.ndim < 2:
        raise ValueError(f"{op}: needs a tensor of at least 2 dimensions, got shape {x.shape}")
    ax1, ax2 = _axis(axis1, x.ndim, op), _axis(axis2, x.ndim, op)
    if ax1 == ax2:
        raise ValueError(f"{op}: axis1 and axis2 cannot be the same (both are {ax1})")
    rows, cols = _diagonal_index(x.shape[ax1], x.shape[ax2], _int(offset, "offset", op))
    return _ops.moveaxis(x, (ax1, ax2), (-2, -1))[..., rows, cols]


def trace(a, offset=0, axis1=0, axis2=1, dtype=None):
    """The sum along diagonal `offset` of the matrices spanned by `axis1` and `axis2`
    (NumPy's ``np.trace``): ``diagonal(a, offset, axis1, axis2).sum(-1)``.

    >>> import tapegrad as tg
    >>> tg.tensor([[1., 2.], [3., 4.]]).trace()
    tensor(5.)
    """
    return tg.sum(_diagonal(a, offset, axis1, axis2, "trace"), axis=-1, dtype=dtype)


def diag(v, k=0):
    """NumPy's ``np.diag``: from a 1-d v, the square matrix with v on diagonal `k`; from a
    2-d v, its diagonal `k`.

    >>> import tapegrad as tg
    >>> tg.diag(tg.tensor([1., 2.]), k=1).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]
    >>> tg.diag(tg.tensor([[1., 2.], [3., 4.]])).tolist()
    [1.0, 4.0]
    """
    x = tg.asarray(v)
    k = _int(k, "k", "diag")
    if x.ndim == 2:
        return diagonal(x, k)
    if x.ndim != 1:
        raise ValueError(f"diag: input must be 1-d or 2-d, got shape {x.shape}")
    n = x.shape[0] + abs(k)
    rows, cols = _diagonal_index(n, n, k)
    # zeros with x added on the diagonal: the scatter that is getitem's gradient.
    return tg._getitem_grad(x, index=(rows, cols), shape=(n, n))


def _triangle(m, k, op, lower):
    x = tg.asarray(m)
    if x.ndim < 1:
        raise ValueError(f"{op}: needs a tensor of at least 1 dimension, got a 0-d tensor")
    k = _int(k, "k", op)
    # NOTE: as NumPy: a mask over the last two axes (over the only one, for 1-d input,
    # which makes a 1-d input an (n, n) result), zeros of x's own dtype elsewhere.
    keep = np.tri(*x.shape[-2:], k=k if lower else k - 1, dtype=bool)
    if not lower:
        keep = ~keep
    return tg.where(_constant(keep, x), x, x.dtype.type(0))


def tril(m, k=0):
    """m with the entries above diagonal `k` of its last two axes set to zero (NumPy's
    ``np.tril``).

    >>> import tapegrad as tg
    >>> tg.tril(tg.ones((2, 3))).tolist()
    [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    """
    return _triangle(m, k, "tril", True)


def triu(m, k=0):
    """m with the entries below diagonal `k` of its last two axes set to zero (NumPy's
    ``np.triu``).

    >>> import tapegrad as tg
    >>> tg.triu(tg.ones((2, 3)), k=1).tolist()
    [[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]
    """
    return _triangle(m, k, "triu", False)


# ---------------------------------------------------------------------------------------
# Registration (called from the plugin's hook in ops.py)
# ---------------------------------------------------------------------------------------

_ZEROS = np.array([[0.5, 0.0, 0.0, 2.0], [1.1, -0.8, 0.0, 1.3], [0.0, 1.0, 1.4, 0.6]])


def register(registry):
    """Register this module's ops and functions (the hook of ops.py calls it)."""
    _register_scans(registry)
    _register_sorting(registry)
    _register_gathers(registry)
    _register_moves(registry)
    _register_products(registry)
    _register_diagonals(registry)


def _register_scans(registry):
    registry.register_op(
        "cumsum", complex=True, kernels={"cpu": _cumsum_kernel}, vjp=_cumsum_vjp, jvp=_cumsum_jvp,
        batch=_one_axis_batch("cumsum", None),
        save_inputs=(False,), save_ans=False,
        samples=[tg.Sample(_rand(5)), tg.Sample(_rand(3, 4), axis=0),
                 tg.Sample(_rand(3, 4), -1), tg.Sample(_rand(2, 3, 4), axis=1),
                 tg.Sample(_rand(2, 3)), tg.Sample(_rand(2, 3), 1, dtype=np.float64)],
        doc="Running sum of a along `axis` (None: of a flattened), as np.cumsum(a, axis=None, "
            "dtype=None); t.cumsum(). The gradient is the running sum of g from the other end.")
    registry.register_op(
        "cumprod", complex=True,
        kernels={"cpu": _cumprod_kernel}, vjp=_cumprod_vjp, jvp=_cumprod_jvp,
        batch=_one_axis_batch("cumprod", None),
        save_ans=False,
        samples=[tg.Sample(np.array([1.5, 0.0, 2.0, -0.7, 1.2])),
                 tg.Sample(_ZEROS, axis=1), tg.Sample(_ZEROS, axis=0),
                 tg.Sample(_rand(3, 4), axis=-1), tg.Sample(_rand(2, 3)),
                 tg.Sample(np.array([0.0, 0.0, 1.5, 0.0]))],
        doc="Running product of a along `axis` (None: of a flattened), as np.cumprod(a, "
            "axis=None, dtype=None); t.cumprod(). The gradient divides by nothing, so it is "
            "exact where entries are zero (repeated zeros too), as PyTorch's.")


def sort_complex(a):
    """`a` sorted along its last axis, lexicographically (real part first, then
    imaginary), as a complex tensor: ``np.sort_complex``. The dtype is NumPy's: complex
    input keeps its own, (u)int8/(u)int16 become complex64, every other real input
    (float32 included, as NumPy's) complex128. The gradient is the sorting permutation
    (tg.sort's); a real input gets the real part of its complex gradient.

    >>> import numpy as np, tapegrad as tg
    >>> tg.sort_complex(tg.tensor([5., 3., 6., 2., 1.]))
    tensor([1.+0.j, 2.+0.j, 3.+0.j, 5.+0.j, 6.+0.j], dtype=complex128)
    >>> z = tg.tensor(np.array([1 + 2j, 2 - 1j, 3 - 2j, 3 - 3j, 3 + 5j]))
    >>> tg.sort_complex(z).numpy()
    array([1.+2.j, 2.-1.j, 3.-3.j, 3.-2.j, 3.+5.j])
    """
    x = a if isinstance(a, tg.Tensor) else tg.tensor(np.asarray(a))
    out = tg.sort(x, axis=-1)
    if x.dtype.kind == "c":
        return out
    # NumPy's rule (numpy/lib/_function_base_impl.py): 'bhBH' -> 'F', 'g' -> 'G', else 'D'
    target = {"b": "F", "h": "F", "B": "F", "H": "F", "g": "G"}.get(x.dtype.char, "D")
    return out.astype(np.dtype(target))


def _register_sorting(registry):
    registry.register_op(
        "sort", complex=True,
        kernels={"cpu": _sort_kernel}, vjp=_sort_vjp, jvp=_sort_jvp,
        batch=_one_axis_batch("sort", -1),
        save_ans=False, method=False, params=("axis", "kind", "order"),
        samples=[tg.Sample(_distinct(5)), tg.Sample(_distinct(3, 4)),
                 tg.Sample(_distinct(3, 4), axis=0), tg.Sample(_distinct(2, 3), axis=None),
                 tg.Sample(_distinct(2, 3, 4), 1, "mergesort")],
        doc="a sorted along `axis` (default -1; None: a flattened), as np.sort(a, axis=-1, "
            "kind=None); `kind` is NumPy's (the values do not depend on it). The gradient "
            "goes back through the sorting permutation; of tied entries, to the one the "
            "stable sort put at that position (as torch.sort). Complex input sorts "
            "lexicographically (NumPy's) and its gradient is the same permutation. "
            "No method form: "
            "ndarray.sort sorts in place.")
    registry.register_op(
        "argsort",
        kernels={"cpu": _argsort_kernel}, nin=1, params=("axis", "kind", "order"),
        batch=_one_axis_batch("argsort", -1),
        samples=[tg.Sample(_distinct(3, 4)), tg.Sample(_distinct(3, 4), axis=0),
                 tg.Sample(_distinct(2, 3), axis=None)],
        doc="The indices that sort a along `axis` (int64), as np.argsort(a, axis=-1, "
            "kind=None, stable=None); not differentiable.")
    registry.register_function(
        "sort_complex", sort_complex, method=False, samples=[
            tg.Sample(_distinct(5)), tg.Sample(_distinct(3, 4)),
            tg.Sample(_distinct(4) + 1j * _distinct(4)[::-1].copy()),
            tg.Sample(_distinct(2, 3) - 0.5j * _distinct(2, 3))])


def _register_gathers(registry):
    registry.register_op(
        "take_along_axis", complex=True,
        kernels={"cpu": _take_along_axis_kernel}, vjp=_take_along_axis_vjp,
        batch=_take_along_axis_batch,
        jvp=_take_along_axis_jvp, differentiable=(0,), save_inputs=(False, True),
        save_ans=False, method=False,
        samples=[tg.Sample(_rand(3, 4), np.array([[0, 3, 3], [1, 1, 0], [2, 0, 1]]), axis=1),
                 tg.Sample(_rand(3, 4), np.array([[2, 0, 2, 1]]), axis=0),
                 tg.Sample(_rand(3, 4), np.array([[1], [0], [-1]])),
                 tg.Sample(_rand(2, 3), np.array([5, 0, 0]), None)],
        doc="The entries of arr at `indices` along `axis` (indices has arr's number of "
            "dimensions and broadcasts against it; axis=None: arr flattened), as "
            "np.take_along_axis(arr, indices, axis=-1). Repeated indices accumulate in the "
            "gradient.")
    registry.register_op(
        "_take_along_axis_grad", complex=True, kernels={"cpu": _take_along_axis_grad_kernel},
        batch=_take_along_axis_grad_batch,
        vjp=_take_along_axis_grad_vjp, jvp="linear", differentiable=(0,), save_inputs=(False, True),
        save_ans=False, method=False,
        samples=[tg.Sample(_rand(3, 3), np.array([[0, 3, 3], [1, 1, 0], [2, 0, 1]]),
                           shape=(3, 4), axis=1),
                 tg.Sample(_rand(3), np.array([5, 0, 0]), shape=(2, 3), axis=None)],
        doc="The gradient of take_along_axis (and sort): zeros of `shape` with g added at "
            "the positions take_along_axis(., indices, axis) reads. Its gradient is "
            "take_along_axis.")
    registry.register_op(
        "_put_along_axis", complex=True,
        kernels={"cpu": _put_along_axis_kernel}, vjp=_put_along_axis_vjp,
        batch=_put_along_axis_batch,
        jvp="linear",
        differentiable=(0, 2), save_inputs=(False, True, False), save_ans=False,
        method=False,
        samples=[tg.Sample(_rand(3, 4), np.array([[0], [2], [3]]), _rand(3, 1), axis=1),
                 tg.Sample(_rand(3, 4), np.array([[1, 0, 2, 1]]), 2.5, axis=0),
                 tg.Sample(_rand(2, 3), np.array([4, 0]), _rand(2), axis=None)],
        doc="arr with values put at `indices` along `axis`, out of place (the op behind "
            "put_along_axis, which checks its arguments first).")
    registry.register_function(
        "put_along_axis", put_along_axis, method=False,
        samples=[tg.Sample(_rand(3, 4), np.array([[0, 2], [2, 1], [3, 0]]), _rand(3, 2), 1),
                 tg.Sample(_rand(3, 4), np.array([[1], [0], [3]]), _rand(1), axis=-1),
                 tg.Sample(_rand(2, 3), np.array([4, 0]), 0.5, None)])
    registry.register_op(
        "take", complex=True, kernels={"cpu": _take_kernel}, vjp=_take_vjp, jvp=_take_jvp,
        batch=_take_batch,
        differentiable=(0,), save_inputs=(False, True), save_ans=False,
        samples=[tg.Sample(_rand(3, 4), np.array([0, 2, 2, 11])),
                 tg.Sample(_rand(3, 4), np.array([[0, 3], [3, -1]]), axis=1),
                 tg.Sample(_rand(3, 4), 1, axis=0),
                 tg.Sample(_rand(3, 4), np.array([5, -7, 1]), 0, "wrap"),
                 tg.Sample(_rand(3, 4), np.array([5, -7, 1]), axis=1, mode="clip")],
        doc="The entries of a at `indices` (of a flattened, or along `axis`), as np.take(a, "
            "indices, axis=None, mode='raise'; 'wrap' and 'clip' too); t.take(). Repeated "
            "indices accumulate in the gradient.")
    registry.register_op(
        "_take_grad", complex=True,
        kernels={"cpu": _take_grad_kernel}, vjp=_take_grad_vjp, jvp="linear",
        batch=_take_grad_batch,
        differentiable=(0,), save_inputs=(False, True), save_ans=False, method=False,
        samples=[tg.Sample(_rand(3), np.array([0, 2, 2]), shape=(3, 4)),
                 tg.Sample(_rand(3, 2, 2), np.array([[0, 3], [3, -1]]), shape=(3, 4), axis=1),
                 tg.Sample(_rand(3), np.array([5, -7, 1]), shape=(4,), axis=0, mode="wrap")],
        doc="The gradient of take: zeros of `shape` with g added at the positions take reads "
            "(repeats accumulate). Its gradient is take.")


def _register_moves(registry):
    registry.register_op(
        "roll", complex=True, kernels={"cpu": _roll_kernel}, vjp=_roll_vjp, jvp=_roll_jvp,
        batch=_roll_batch,
        save_inputs=(False,), save_ans=False, method=False,
        samples=[tg.Sample(_rand(5), 2), tg.Sample(_rand(3, 4), shift=-1, axis=0),
                 tg.Sample(_rand(3, 4), (1, 2), (0, 1)), tg.Sample(_rand(3, 4), 5),
                 tg.Sample(_rand(2, 3, 4), shift=(1, 2), axis=(2, -1))],
        doc="a with its entries shifted by `shift` along `axis` (None: a flattened, then "
            "reshaped back; tuples shift several axes), wrapping around, as np.roll(a, shift, "
            "axis=None).")
    registry.register_function(
        "flip", flip, method=False,
        samples=[tg.Sample(_rand(3, 4)), tg.Sample(_rand(3, 4), axis=0),
                 tg.Sample(_rand(2, 3, 4), axis=(0, -1))])
    registry.register_function("fliplr", fliplr, method=False, samples=[(_rand(3, 4),)])
    registry.register_function("flipud", flipud, method=False,
                               samples=[(_rand(3, 4),), (_rand(3),)])
    registry.register_op(
        "repeat", complex=True, kernels={"cpu": _repeat_kernel}, vjp=_repeat_vjp, jvp=_repeat_jvp,
        batch=_repeat_batch,
        save_inputs=(False,), save_ans=False,
        samples=[tg.Sample(_rand(3), 2), tg.Sample(_rand(2, 3), repeats=[1, 0, 2], axis=1),
                 tg.Sample(_rand(2, 3), repeats=3, axis=0),
                 tg.Sample(_rand(2, 2), repeats=np.array([2, 1, 1, 3])),
                 tg.Sample(_rand(2, 3), np.array([2]), -1)],
        doc="Each entry of a repeated `repeats` times (an int, or one count per entry) along "
            "`axis` (None: a flattened), as np.repeat(a, repeats, axis=None); t.repeat() is "
            "NumPy's (torch's Tensor.repeat is tile).")
    registry.register_op(
        "tile", complex=True, kernels={"cpu": _tile_kernel}, vjp=_tile_vjp, jvp=_tile_jvp,
        batch=_tile_batch,
        save_inputs=(False,), save_ans=False, method=False,
        samples=[tg.Sample(_rand(3), 2), tg.Sample(_rand(2, 3), reps=(2, 1)),
                 tg.Sample(_rand(2, 3), (2, 1, 2)), tg.Sample(_rand(2, 3), 3),
                 tg.Sample(_rand(2, 2, 3), reps=(2, 1))],
        doc="A repeated `reps` times along each axis (reps shorter than A.ndim gets leading "
            "ones, longer gives A leading axes), as np.tile(A, reps).")
    registry.register_op(
        "pad", complex=True, kernels={"cpu": _pad_kernel}, vjp=_pad_vjp, jvp=_pad_jvp,
        batch=_pad_batch,
        params=("pad_width", "mode"), save_inputs=(False,), save_ans=False, method=False,
        samples=[tg.Sample(_rand(3), 2),
                 tg.Sample(_rand(2, 3), ((1, 0), (2, 1)), constant_values=1.5),
                 tg.Sample(_rand(2, 3), (1, 2), "edge"), tg.Sample(_rand(3, 4), 2, mode="reflect"),
                 tg.Sample(_rand(3, 4), ((3, 1), (0, 5)), mode="reflect"),
                 tg.Sample(_rand(3, 4), ((1, 2), (2, 0)), mode="symmetric"),
                 tg.Sample(_rand(2, 3), ((2, 4), (1, 1)), mode="wrap"),
                 tg.Sample(_rand(2, 3), (1,))],
        doc="array padded by pad_width (an int, (before, after), or one pair per axis) as "
            "np.pad(array, pad_width, mode='constant', **kwargs), for the modes constant "
            "(constant_values), edge, reflect, symmetric and wrap (reflect_type 'even'); the "
            "other modes raise. The gradient of a copied entry adds up at its source.")


def _register_products(registry):
    registry.register_op(
        "tensordot", complex=True, kernels={"cpu": _tensordot_kernel}, vjp=_tensordot_vjp,
        batch=_tensordot_batch,
        jvp=_tensordot_jvp, method=False, save_ans=False,
        samples=[tg.Sample(_rand(2, 3, 4), _rand(3, 4, 2)),
                 tg.Sample(_rand(2, 3), _rand(3, 4), 1),
                 tg.Sample(_rand(2, 3, 4), _rand(4, 2, 3), axes=([1, 2], [2, 0])),
                 tg.Sample(_rand(3, 2), _rand(4, 3), axes=(0, 1)),
                 tg.Sample(_rand(2, 3), _rand(2), axes=0),
                 tg.Sample(_rand(3), _rand(3), axes=1),
                 tg.Sample(_rand(2, 3, 4), _rand(4, 3), axes=((-1, -2), (0, 1)))],
        doc="Sum of products of a and b over the axes `axes` pairs up, as np.tensordot(a, b, "
            "axes=2): an int N (a's last N with b's first N), a pair of ints, or a pair of "
            "sequences. The result has a's free axes, then b's.")
    registry.register_function("outer", outer, method=False,
                               samples=[(_rand(3), _rand(4)), (_rand(2, 2), _rand(3))])
    registry.register_function(
        "inner", inner, method=False,
        samples=[(_rand(3), _rand(3)), (_rand(2, 3), _rand(4, 3)), (_rand(2, 3), np.array(1.5)),
                 (_rand(2, 2, 3), _rand(3))])
    registry.register_function(
        "kron", kron, method=False,
        samples=[(_rand(2, 2), _rand(3, 2)), (_rand(3), _rand(2, 2)), (_rand(2), _rand(3))])


def _register_diagonals(registry):
    registry.register_function(
        "diagonal", diagonal,
        samples=[tg.Sample(_rand(3, 4)), tg.Sample(_rand(3, 4), 1), tg.Sample(_rand(3, 4), -2),
                 tg.Sample(_rand(2, 3, 4), offset=1, axis1=-1, axis2=0)])
    registry.register_function(
        "trace", trace,
        samples=[tg.Sample(_rand(3, 3)), tg.Sample(_rand(3, 4), offset=1),
                 tg.Sample(_rand(2, 3, 4), 0, 1, 2), tg.Sample(_rand(3, 4, 2), offset=-1)])
    registry.register_function(
        "diag", diag, method=False,
        samples=[tg.Sample(_rand(3)), tg.Sample(_rand(3), k=1), tg.Sample(_rand(2), -2),
                 tg.Sample(_rand(3, 4)), tg.Sample(_rand(3, 4), k=-1)])
    for name, fn in (("tril", tril), ("triu", triu)):
        registry.register_function(
            name, fn, method=False,
            samples=[tg.Sample(_rand(3, 4)), tg.Sample(_rand(3, 4), k=1),
                     tg.Sample(_rand(2, 3, 3), k=-1), tg.Sample(_rand(3))])
