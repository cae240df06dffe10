"""NumPy's other spellings of tapegrad's shape ops: the NumPy 2 array-API names
(``concat``, ``permute_dims``, ``matrix_transpose``, ``cumulative_sum``,
``cumulative_prod``) and the legacy ``rollaxis``.

Where NumPy's name is the same function as another (``np.concat is np.concatenate``,
``np.permute_dims is np.transpose``), tapegrad's is the same op (``tg.concat is
tg.concatenate``). The others are thin compositions with NumPy's own semantics:
``cumulative_sum``/``cumulative_prod`` take ``include_initial`` and require ``axis`` for
more than one dimension, ``rollaxis`` rolls an axis back to ``start``.

>>> import tapegrad as tg
>>> tg.concat is tg.concatenate
True
>>> tg.cumulative_sum(tg.tensor([1., 2., 3.]), include_initial=True).tolist()
[0.0, 1.0, 3.0, 6.0]
>>> tg.rollaxis(tg.zeros((2, 3, 4)), 2).shape
(4, 2, 3)
"""

from __future__ import annotations

import operator

import numpy as np
import tapegrad as tg

from .ops import _as_tensor, _axes, _rand

AxisError = np.exceptions.AxisError

__all__ = ["rollaxis", "matrix_transpose", "cumulative_sum", "cumulative_prod", "register"]


def _no_out(out, op):
    # NOTE: NumPy's out= writes into an existing array; a tensor's value is never replaced
    # behind its graph's back, so that form is refused rather than silently ignored.
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (tensors are not written in place); "
                        f"use the returned tensor")


def rollaxis(a, axis, start=0):
    """a with axis `axis` rolled back until it lies before position `start`, as
    ``np.rollaxis`` (the other axes keep their order; ``tg.moveaxis`` is the clearer
    spelling).

    >>> import tapegrad as tg
    >>> tg.rollaxis(tg.zeros((2, 3, 4)), 0, 2).shape
    (3, 2, 4)
    """
    x = _as_tensor(a)
    n = x.ndim
    (ax,) = _axes(axis, n, "rollaxis")
    start = operator.index(start)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise AxisError(f"rollaxis: 'start' arg requires {-n} <= start < {n + 1}, but "
                        f"{start if start >= 0 else start - n} was passed in")
    if ax < start:
        start -= 1
    if ax == start:
        return x[...]
    order = [i for i in range(n) if i != ax]
    order.insert(start, ax)
    return tg.transpose(x, tuple(order))


def matrix_transpose(x, /):
    """Each matrix of x transposed (its last two axes swapped), as
    ``np.matrix_transpose`` (x must have at least two dimensions).

    >>> import tapegrad as tg
    >>> tg.matrix_transpose(tg.zeros((5, 2, 3))).shape
    (5, 3, 2)
    """
    x = _as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: input array must be at least 2-dimensional, but "
                         f"it is {x.ndim} (shape {x.shape})")
    return tg.swapaxes(x, -1, -2)


def _cumulative(scan, initial, op, x, axis, dtype, out, include_initial):
    _no_out(out, op)
    x = _as_tensor(x)
    if x.ndim == 0:
        x = tg.reshape(x, (1,))                       # NumPy treats a scalar as 1-d
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"{op}: for arrays which have more than one dimension the axis "
                             f"argument is required (got shape {x.shape})")
        axis = 0
    (ax,) = _axes(axis, x.ndim, op)
    out = scan(x, ax, dtype=dtype)
    if not include_initial:
        return out
    shape = list(out.shape)
    shape[ax] = 1
    first = tg.full(tuple(shape), initial, dtype=out.dtype, device=out.device)
    return tg.concatenate([first, out], axis=ax)


def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    """Running sum of x along `axis`, as NumPy 2's ``np.cumulative_sum``: `axis` may be
    omitted only for 1-d x; ``include_initial=True`` starts the result with 0 (one more
    entry along `axis`). Integer and bool inputs sum in NumPy's dtype (int64), as
    ``tg.cumsum``. The gradient is the running sum of g from the other end.

    >>> import tapegrad as tg
    >>> tg.cumulative_sum(tg.tensor([[1., 2.], [3., 4.]]), axis=1).tolist()
    [[1.0, 3.0], [3.0, 7.0]]
    """
    return _cumulative(tg.cumsum, 0, "cumulative_sum", x, axis, dtype, out, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    """Running product of x along `axis`, as NumPy 2's ``np.cumulative_prod``: `axis` may
    be omitted only for 1-d x; ``include_initial=True`` starts the result with 1. The
    gradient is ``tg.cumprod``'s, exact where entries are zero.

    >>> import tapegrad as tg
    >>> tg.cumulative_prod(tg.tensor([2., 3., 4.]), include_initial=True).tolist()
    [1.0, 2.0, 6.0, 24.0]
    """
    return _cumulative(tg.cumprod, 1, "cumulative_prod", x, axis, dtype, out, include_initial)


def register(registry):
    """Register this module's functions (called from the shape plugin's hook in
    :mod:`tapegrad_shape.ops`)."""
    fn = registry.register_function
    fn("concat", registry.ops["concatenate"], method=False,
       samples=[tg.Sample([_rand(2, 3), _rand(1, 3)]),
                tg.Sample([_rand(2, 3), _rand(2, 2)], axis=1)])
    fn("permute_dims", registry.ops["transpose"], method=False,
       samples=[tg.Sample(_rand(2, 3)), tg.Sample(_rand(2, 3, 4), (1, 2, 0))])
    fn("rollaxis", rollaxis, method=False, samples=[
        tg.Sample(_rand(2, 3, 4), 2), tg.Sample(_rand(2, 3, 4), 0, 2),
        tg.Sample(_rand(2, 3, 4), -1, start=1), tg.Sample(_rand(2, 3), 1, 2)])
    fn("matrix_transpose", matrix_transpose, method=False, samples=[
        (_rand(2, 3),), (_rand(2, 3, 4),)])
    zeros = np.array([[0.5, 0.0, 2.0], [1.1, -0.8, 0.0]])
    for name, f, extra in (("cumulative_sum", cumulative_sum, _rand(2, 3)),
                           ("cumulative_prod", cumulative_prod, zeros)):
        fn(name, f, method=False, samples=[
            tg.Sample(_rand(5)), tg.Sample(_rand(4), include_initial=True),
            tg.Sample(extra, axis=1), tg.Sample(extra, axis=0, include_initial=True),
            tg.Sample(_rand(2, 3, 4), axis=-1, include_initial=True)])
