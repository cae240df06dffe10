"""Joining and splitting, NumPy's convenience forms: append, hstack, vstack, dstack,
column_stack, row_stack, array_split, hsplit, vsplit, dsplit, atleast_1d/2d/3d and the
index tricks ``tg.r_`` / ``tg.c_``.

Every one of them is a composition of ``concatenate``, ``reshape`` and ``getitem`` (the
ops of :mod:`tapegrad_shape.ops`), so each is differentiable to any order and runs on any
device that has those ops; none has a rule of its own. As in NumPy none is a Tensor method.

>>> import tapegrad as tg
>>> a = tg.tensor([1., 2.], requires_grad=True)
>>> tg.vstack([a, a]).shape, tg.hstack([a, a]).shape, tg.column_stack([a, a]).shape
((2, 2), (4,), (2, 2))
>>> tg.r_[a, 0.0, a].tolist()
[1.0, 2.0, 0.0, 1.0, 2.0]
>>> tg.r_[a, 0.0, a].sum().backward(); a.grad
tensor([2., 2.])
>>> [t.tolist() for t in tg.array_split(tg.arange(5.0), 3)]
[[0.0, 1.0], [2.0, 3.0], [4.0]]
"""

from __future__ import annotations

import numbers

import numpy as np
import tapegrad as tg

from .ops import _as_tensor, _as_tensor_like, _axes, _rand, split

__all__ = ["append", "hstack", "vstack", "dstack", "column_stack", "row_stack",
           "array_split", "hsplit", "vsplit", "dsplit", "atleast_1d", "atleast_2d",
           "atleast_3d", "r_", "c_", "register"]


# ---------------------------------------------------------------------------------------
# Helpers (plain Python on shapes, never on arrays)
# ---------------------------------------------------------------------------------------

def _leading_ones(x, ndmin):
    """x reshaped with ones prepended up to `ndmin` dimensions (``np.array(x, ndmin=)``)."""
    if x.ndim >= ndmin:
        return x
    return tg.reshape(x, (1,) * (ndmin - x.ndim) + x.shape)


def _sequence(tup, op):
    """The tensors of `tup`, which must be a sequence (list, tuple or a tensor, whose
    first axis is iterated, as NumPy iterates an ndarray)."""
    if isinstance(tup, tg.Tensor):
        if tup.ndim == 0:
            raise TypeError(f"{op}: a 0-d tensor is not a sequence of arrays to stack")
        return [tup[i] for i in range(tup.shape[0])]
    if not isinstance(tup, (list, tuple)):
        # NOTE: NumPy refuses generators and other iterables here too (since 1.24).
        raise TypeError(f"{op}: arrays to stack must be passed as a sequence type such as "
                        f"list or tuple, got {type(tup).__name__}")
    if not tup:
        raise ValueError(f"{op}: need at least one array to concatenate")
    ref = next((t for t in tup if isinstance(t, tg.Tensor)), None)
    return [_as_tensor(t) if ref is None else _as_tensor_like(t, ref) for t in tup]


def _cast(xs, dtype, casting, op):
    """The tensors converted to `dtype` under NumPy's `casting` rule (the ``dtype=`` and
    ``casting=`` arguments of np.concatenate and the stacks)."""
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ValueError(f"{op}: casting must be one of 'no', 'equiv', 'safe', 'same_kind' "
                         f"or 'unsafe', got {casting!r}")
    if dtype is None:
        if casting != "same_kind":
            result = np.result_type(*(x.dtype for x in xs))
            xs = [_cast_one(x, result, casting, op) for x in xs]
        return xs
    dtype = np.dtype(dtype)
    return [_cast_one(x, dtype, casting, op) for x in xs]


def _cast_one(x, dtype, casting, op):
    if not np.can_cast(x.dtype, dtype, casting):
        raise TypeError(f"{op}: cannot cast an array of dtype {x.dtype} to {dtype} according "
                        f"to the rule {casting!r}")
    return x if x.dtype == dtype else x.astype(dtype)


def _join(xs, axis, dtype, casting, op):
    return tg.concatenate(_cast(xs, dtype, casting, op), axis=axis)


# ---------------------------------------------------------------------------------------
# atleast_1d / 2d / 3d
# ---------------------------------------------------------------------------------------

def _one_or_tuple(results):
    # NOTE: NumPy 2 returns a tuple for several arguments (a list before 2.0).
    return results[0] if len(results) == 1 else tuple(results)


def _at_least_1d(x):
    return tg.reshape(x, (1,)) if x.ndim == 0 else x


def _at_least_2d(x):
    if x.ndim == 0:
        return tg.reshape(x, (1, 1))
    return tg.reshape(x, (1,) + x.shape) if x.ndim == 1 else x


def _at_least_3d(x):
    if x.ndim == 0:
        return tg.reshape(x, (1, 1, 1))
    if x.ndim == 1:
        return tg.reshape(x, (1,) + x.shape + (1,))
    return tg.reshape(x, x.shape + (1,)) if x.ndim == 2 else x


def atleast_1d(*arys):
    """Each input as a tensor of at least one dimension (0-d becomes shape (1,)), as
    ``np.atleast_1d``: one argument gives one tensor, several a tuple.

    >>> import tapegrad as tg
    >>> tg.atleast_1d(3.0).shape, [t.shape for t in tg.atleast_1d(1.0, tg.ones((2, 2)))]
    ((1,), [(1,), (2, 2)])
    """
    return _one_or_tuple([_at_least_1d(_as_tensor(a)) for a in arys])


def atleast_2d(*arys):
    """Each input with at least two dimensions, as ``np.atleast_2d``: 0-d -> (1, 1),
    (n,) -> (1, n). One argument gives one tensor, several a tuple.

    >>> import tapegrad as tg
    >>> tg.atleast_2d(tg.ones(3)).shape
    (1, 3)
    """
    return _one_or_tuple([_at_least_2d(_as_tensor(a)) for a in arys])


def atleast_3d(*arys):
    """Each input with at least three dimensions, as ``np.atleast_3d``: 0-d -> (1, 1, 1),
    (n,) -> (1, n, 1), (m, n) -> (m, n, 1). One argument gives one tensor, several a tuple.

    >>> import tapegrad as tg
    >>> tg.atleast_3d(tg.ones(3)).shape, tg.atleast_3d(tg.ones((2, 3))).shape
    ((1, 3, 1), (2, 3, 1))
    """
    return _one_or_tuple([_at_least_3d(_as_tensor(a)) for a in arys])


# ---------------------------------------------------------------------------------------
# append and the stacks
# ---------------------------------------------------------------------------------------

def append(arr, values, axis=None):
    """`values` appended to the end of `arr`, as ``np.append``: with ``axis=None`` both
    are flattened first and the result is 1-D; with an axis they must have the same
    number of dimensions and match on every other axis. Differentiable in both.

    >>> import tapegrad as tg
    >>> tg.append(tg.ones((2, 2)), [5.0, 6.0]).tolist()
    [1.0, 1.0, 1.0, 1.0, 5.0, 6.0]
    >>> tg.append(tg.ones((2, 2)), tg.zeros((1, 2)), axis=0).shape
    (3, 2)
    """
    arr = _as_tensor(arr)
    values = _as_tensor_like(values, arr)
    if axis is None:
        return tg.concatenate([tg.reshape(arr, (-1,)), tg.reshape(values, (-1,))])
    return tg.concatenate([arr, values], axis=axis)


def vstack(tup, *, dtype=None, casting="same_kind"):
    """The tensors stacked vertically (row-wise), as ``np.vstack``: 1-D inputs of shape
    (n,) become rows (1, n), then all are joined along the first axis.

    >>> import tapegrad as tg
    >>> tg.vstack([tg.ones(3), tg.zeros((2, 3))]).shape
    (3, 3)
    """
    xs = [_at_least_2d(x) for x in _sequence(tup, "vstack")]
    return _join(xs, 0, dtype, casting, "vstack")


def row_stack(tup, *, dtype=None, casting="same_kind"):
    """The same as ``vstack`` (NumPy's deprecated alias ``np.row_stack``).

    >>> import tapegrad as tg
    >>> tg.row_stack([tg.ones(2), tg.ones(2)]).shape
    (2, 2)
    """
    # NOTE: NumPy 2.4 still has row_stack, with a DeprecationWarning; tapegrad keeps the
    # alias without the warning (it will not go away here when NumPy drops it).
    xs = [_at_least_2d(x) for x in _sequence(tup, "row_stack")]
    return _join(xs, 0, dtype, casting, "row_stack")


def hstack(tup, *, dtype=None, casting="same_kind"):
    """The tensors stacked horizontally (column-wise), as ``np.hstack``: joined along the
    second axis, or along the first when the inputs are 1-D (0-d inputs count as 1-D).

    >>> import tapegrad as tg
    >>> tg.hstack([tg.ones((2, 1)), tg.zeros((2, 2))]).shape, tg.hstack([1.0, tg.ones(2)]).shape
    ((2, 3), (3,))
    """
    xs = [_at_least_1d(x) for x in _sequence(tup, "hstack")]
    return _join(xs, 0 if xs[0].ndim == 1 else 1, dtype, casting, "hstack")


def dstack(tup):
    """The tensors stacked depth-wise (along the third axis), as ``np.dstack``: (n,)
    becomes (1, n, 1) and (m, n) becomes (m, n, 1) first.

    >>> import tapegrad as tg
    >>> tg.dstack([tg.ones((2, 3)), tg.ones((2, 3))]).shape
    (2, 3, 2)
    """
    xs = [_at_least_3d(x) for x in _sequence(tup, "dstack")]
    return tg.concatenate(xs, axis=2)


def column_stack(tup):
    """1-D tensors as the columns of a 2-D one, as ``np.column_stack``: (n,) inputs become
    (n, 1) columns (0-d: (1, 1)); 2-D and higher inputs are joined along axis 1 as they are.

    >>> import tapegrad as tg
    >>> tg.column_stack([tg.ones(3), tg.zeros(3)]).shape
    (3, 2)
    """
    xs = [x if x.ndim >= 2 else tg.reshape(x, (x.size, 1))
          for x in _sequence(tup, "column_stack")]
    return tg.concatenate(xs, axis=1)


# ---------------------------------------------------------------------------------------
# array_split and the directional splits
# ---------------------------------------------------------------------------------------

def array_split(ary, indices_or_sections, axis=0):
    """A list of sub-tensors of `ary` along `axis`, as ``np.array_split``: like ``split``,
    but an int N need not divide the axis: the first ``len % N`` parts get one element
    more. A list of indices cuts before each index (indices past the end give empty parts).

    >>> import tapegrad as tg
    >>> [t.shape for t in tg.array_split(tg.ones((7, 2)), 3)]
    [(3, 2), (2, 2), (2, 2)]
    """
    x = _as_tensor(ary)
    (ax,) = _axes(axis, x.ndim, "array_split")
    if not isinstance(indices_or_sections, (numbers.Integral, np.integer)):
        return split(x, indices_or_sections, axis=ax)
    sections = int(indices_or_sections)
    if sections <= 0:
        raise ValueError(f"array_split: the number of sections must be larger than 0, got "
                         f"{sections}")
    each, extra = divmod(x.shape[ax], sections)
    bounds, start = [], 0
    for i in range(sections - 1):
        start += each + (1 if i < extra else 0)
        bounds.append(start)
    return split(x, bounds, axis=ax)


def _directional_split(ary, indices_or_sections, axis, min_ndim, op):
    x = _as_tensor(ary)
    if x.ndim < min_ndim:
        raise ValueError(f"{op} only works on tensors of {min_ndim} or more dimensions, got "
                         f"shape {x.shape}")
    return split(x, indices_or_sections, axis=axis)


def hsplit(ary, indices_or_sections):
    """``split`` along the second axis (the first for 1-D tensors), as ``np.hsplit``.

    >>> import tapegrad as tg
    >>> [t.shape for t in tg.hsplit(tg.ones((2, 4)), 2)]
    [(2, 2), (2, 2)]
    """
    x = _as_tensor(ary)
    if x.ndim == 0:
        raise ValueError("hsplit only works on tensors of 1 or more dimensions, got shape ()")
    return split(x, indices_or_sections, axis=1 if x.ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    """``split`` along the first axis of a tensor of 2 or more dimensions (``np.vsplit``).

    >>> import tapegrad as tg
    >>> [t.shape for t in tg.vsplit(tg.ones((4, 2)), [1])]
    [(1, 2), (3, 2)]
    """
    return _directional_split(ary, indices_or_sections, 0, 2, "vsplit")


def dsplit(ary, indices_or_sections):
    """``split`` along the third axis of a tensor of 3 or more dimensions (``np.dsplit``).

    >>> import tapegrad as tg
    >>> [t.shape for t in tg.dsplit(tg.ones((1, 2, 4)), 2)]
    [(1, 2, 2), (1, 2, 2)]
    """
    return _directional_split(ary, indices_or_sections, 2, 3, "dsplit")


# ---------------------------------------------------------------------------------------
# tg.r_ and tg.c_
# ---------------------------------------------------------------------------------------

_SCALARS = (numbers.Number, np.generic)


class AxisConcatenator:
    """The objects behind ``tg.r_`` and ``tg.c_`` (NumPy's index tricks ``np.r_`` /
    ``np.c_``): ``tg.r_[a, b, ...]`` concatenates its items along the first axis, where an
    item is a tensor, an array-like, a scalar, or a slice (``0:5:2`` is ``arange``, a
    complex step ``0:1:5j`` is ``linspace`` with that many points). A first item that is a
    string is a directive: ``'0'`` (the axis), ``'0,2'`` (axis, minimum dimensions),
    ``'0,2,0'`` (and where a short item's own axes go). ``tg.c_`` is ``tg.r_['-1,2,0', ...]``.
    Built on ``concatenate``, so it is differentiable in every tensor item. The matrix
    directives ``'r'`` and ``'c'`` (which make ``np.matrix``) are refused.

    >>> import tapegrad as tg
    >>> tg.r_[0:3, 5.0].tolist(), tg.r_['0,2', [1., 2.], [3., 4.]].shape
    ([0.0, 1.0, 2.0, 5.0], (2, 2))
    >>> tg.c_[tg.ones(2), tg.zeros(2)].tolist()
    [[1.0, 0.0], [1.0, 0.0]]
    """

    def __init__(self, name, axis=0, ndmin=1, trans1d=-1):
        self._name = name
        self._defaults = (axis, ndmin, trans1d)

    def __repr__(self):
        return f"tg.{self._name}"

    def __len__(self):
        return 0

    def __getitem__(self, key):
        axis, ndmin, trans1d = self._defaults
        items = key if isinstance(key, tuple) else (key,)
        # constants (scalars, ranges, arrays) go to the device of the tensors among the items
        device = next((i.device for i in items if isinstance(i, tg.Tensor)), None)
        objs, scalars, dtypes = [], [], []
        for k, item in enumerate(items):
            if isinstance(item, str):
                if k != 0:
                    raise ValueError(f"{self._name}: special directives must be the first "
                                     f"entry, got {item!r} at position {k}")
                axis, ndmin, trans1d = self._directive(item, axis, ndmin, trans1d)
                continue
            if isinstance(item, slice):
                obj = self._range(item, device)
                obj = _leading_ones(obj, ndmin)
                if trans1d != -1 and obj.ndim > 1:
                    obj = tg.swapaxes(obj, -1, trans1d)
                dtypes.append(obj.dtype)
            elif isinstance(item, _SCALARS):          # NumPy's ScalarType (bool included)
                obj = item
                scalars.append(len(objs))
                dtypes.append(item)           # a Python number promotes weakly (NEP 50)
            else:
                obj = self._array(item, ndmin, trans1d, device)
                dtypes.append(obj.dtype)
            objs.append(obj)
        if not objs:
            raise ValueError(f"{self._name}: nothing to concatenate")
        # NOTE: as NumPy, every item is cast to the result type of ALL items, scalars and
        # ranges included: r_[int tensor, 2.5] is float64, not int64 with 2.5 cut to 2.
        dtype = np.result_type(*dtypes)
        for k, obj in enumerate(objs):
            if k in scalars:
                objs[k] = tg.asarray(np.array(obj, dtype=dtype, ndmin=ndmin), device=device)
            elif obj.dtype != dtype:
                objs[k] = obj.astype(dtype)
        try:
            return tg.concatenate(objs, axis=axis)
        except ValueError as exc:
            raise ValueError(f"{self._name}: {exc}") from None

    def _directive(self, item, axis, ndmin, trans1d):
        if item in ("r", "c"):
            raise ValueError(
                f"{self._name}: the directive {item!r} makes an np.matrix, which tapegrad has "
                f"no tensor type for; use '0,2' (rows) or '-1,2,0' (columns) instead")
        try:
            if "," in item:
                vec = [int(v) for v in item.split(",")]
                if len(vec) not in (2, 3):
                    raise ValueError(item)
                axis, ndmin = vec[:2]
                if len(vec) == 3:
                    trans1d = vec[2]
            else:
                axis = int(item)
        except ValueError:
            raise ValueError(f"{self._name}: unknown special directive {item!r} (use 'axis', "
                             f"'axis,ndmin' or 'axis,ndmin,trans1d' of ints)") from None
        return axis, ndmin, trans1d

    def _range(self, item, device):
        step = 1 if item.step is None else item.step
        start = 0 if item.start is None else item.start
        if item.stop is None:
            raise ValueError(f"{self._name}: a slice needs a stop value, got {item!r}")
        if isinstance(step, (complex, np.complexfloating)):
            return tg.linspace(start, item.stop, int(abs(step)), device=device)
        return tg.arange(start, item.stop, step, device=device)

    def _array(self, item, ndmin, trans1d, device):
        x = item if isinstance(item, tg.Tensor) else tg.asarray(item, device=device)
        ndim = x.ndim
        x = _leading_ones(x, ndmin)
        if trans1d != -1 and ndim < ndmin:
            # NumPy's rule: the item's own axes move to position trans1d of the new shape.
            k2 = ndmin - ndim
            k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
            default = list(range(ndmin))
            order = default[:k1] + default[k2:] + default[k1:k2]
            if sorted(order) != default:   # NumPy: a bare "axes don't match array"
                raise ValueError(
                    f"{self._name}: trans1d {trans1d} is out of range for an item of "
                    f"{ndim} dimension(s) (shape {tuple(x.shape[k2:])} made {ndmin}-d)")
            if order != default:
                x = tg.transpose(x, tuple(order))
        return x


r_ = AxisConcatenator("r_")
c_ = AxisConcatenator("c_", axis=-1, ndmin=2, trans1d=0)


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

def register(registry):
    """Register this module's functions with `registry` (called from the shape plugin's
    ``tapegrad_register_ops`` hook in :mod:`tapegrad_shape.ops`)."""
    fn = registry.register_function
    fn("append", append, method=False, samples=[
        tg.Sample(_rand(2, 3), _rand(4)),
        tg.Sample(_rand(2, 3), _rand(1, 3), axis=0),
        tg.Sample(_rand(2, 3), _rand(2, 2), axis=-1),
        tg.Sample(_rand(3), np.array(1.5))])
    stack_samples = [tg.Sample([_rand(3), _rand(3, seed=1)]),
                     tg.Sample([_rand(2, 3), _rand(1, 3), _rand(3, seed=2)]),
                     tg.Sample([_rand(2, 3, 2), _rand(1, 3, 2)])]
    fn("vstack", vstack, method=False, samples=stack_samples)
    fn("row_stack", row_stack, method=False, samples=stack_samples[:2])
    fn("hstack", hstack, method=False, samples=[
        tg.Sample([_rand(3), _rand(2)]),
        tg.Sample([_rand(2, 3), _rand(2, 1)]),
        tg.Sample([_rand(2, 1, 2), _rand(2, 3, 2)])])
    fn("dstack", dstack, method=False, samples=[
        tg.Sample([_rand(3), _rand(3, seed=1)]),
        tg.Sample([_rand(2, 3), _rand(2, 3, 2)])])
    fn("column_stack", column_stack, method=False, samples=[
        tg.Sample([_rand(3), _rand(3, seed=1)]),
        tg.Sample([_rand(3), _rand(3, 2)])])
    fn("array_split", array_split, method=False, samples=[
        tg.Sample(_rand(7, 2), 3),
        tg.Sample(_rand(2, 5), [1, 3], axis=1),
        tg.Sample(_rand(2, 4), 3, axis=-1)])
    fn("hsplit", hsplit, method=False, samples=[
        tg.Sample(_rand(2, 4), 2), tg.Sample(_rand(6), [2, 3])])
    fn("vsplit", vsplit, method=False, samples=[tg.Sample(_rand(4, 2), [1])])
    fn("dsplit", dsplit, method=False, samples=[tg.Sample(_rand(1, 2, 4), 2)])
    fn("atleast_1d", atleast_1d, method=False, samples=[
        tg.Sample(np.array(1.5)), tg.Sample(_rand(3)), tg.Sample(np.array(0.5), _rand(2, 2))])
    fn("atleast_2d", atleast_2d, method=False, samples=[
        tg.Sample(np.array(1.5)), tg.Sample(_rand(3)), tg.Sample(_rand(2, 3), _rand(4))])
    fn("atleast_3d", atleast_3d, method=False, samples=[
        tg.Sample(np.array(1.5)), tg.Sample(_rand(3)), tg.Sample(_rand(2, 3), _rand(1, 2, 3))])
    # NOTE: r_ and c_ are objects indexed with [], not functions, so they are exported as
    # plain public names (the api table, as a tapegrad_api hook would); their gradients
    # are checked in tests/test_shape_joining.py.
    for name, obj in (("r_", r_), ("c_", c_)):
        if name in registry.api:
            raise tg.PluginError(f"plugin '{registry.plugin}' exports '{name}' twice")
        registry.api[name] = obj
