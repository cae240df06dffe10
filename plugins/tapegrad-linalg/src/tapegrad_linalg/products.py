"""tg.linalg's products and tensor helpers, composed of matmul and shape ops (so they run
on every device that has matmul): ``multi_dot``, ``matrix_power``, ``outer``, ``vecdot``,
``cross``, ``matrix_transpose``, ``tensorinv``, ``tensorsolve``; and NumPy's top-level
``np.cross`` as ``tg.cross``.

>>> import tapegrad as tg
>>> a = tg.tensor([[1., 1.], [0., 1.]])
>>> tg.linalg.matrix_power(a, 3).tolist()
[[1.0, 3.0], [0.0, 1.0]]
>>> tg.linalg.matrix_power(a, -1).tolist()
[[1.0, -1.0], [0.0, 1.0]]
"""

from __future__ import annotations

import math
import operator

import numpy as np
import tapegrad as tg

from ._helpers import _mT, _rand, _square
from .ops import _conj
from .decompositions import _as_tensor, _general


def matrix_power(a, n):
    """a raised to the integer power n (matrix products), as ``np.linalg.matrix_power``:
    n = 0 gives the identity (zero gradient), a negative n the power of ``inv(a)``.
    Batched over leading axes; uses NumPy's binary decomposition of n."""
    a = _as_tensor(a)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"linalg.matrix_power: exponent must be an integer, got "
                        f"{type(n).__name__} {n!r}") from None
    _square(a, "linalg.matrix_power")
    if n == 0:
        # NOTE: the identity, still connected to a (a zero gradient, as PyTorch) through
        # where(), not `eye + 0 * a`, which would turn an inf in a into a nan.
        eye = tg.broadcast_to(tg.eye(a.shape[-1], dtype=a.dtype, device=a.device), a.shape)
        return tg.where(tg.ones(a.shape, dtype=bool, device=a.device), eye, a)
    if n < 0:
        a, n = tg.linalg_inv(a), -n
    if n == 1:
        return tg.copy(a)
    if n == 2:
        return a @ a
    if n == 3:
        return (a @ a) @ a
    z = result = None
    while n > 0:
        z = a if z is None else z @ z
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else result @ z
    return result


def _chain_order(dims):
    """NumPy's multi_dot order: the optimal parenthesization of the matrix chain whose
    i-th matrix is dims[i] x dims[i + 1] (dynamic programming, Cormen et al.)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(arrays, *, out=None):
    """The product of a chain of matrices in the cheapest order, as
    ``np.linalg.multi_dot``: the first (last) array may be 1-d, a row (column) vector; the
    others must be 2-d. ``out=`` is refused (tensors are not written in place here).

    >>> import tapegrad as tg
    >>> tg.linalg.multi_dot([tg.ones(2), tg.ones((2, 3)), tg.ones((3, 4)), tg.ones(4)])
    tensor(24.)
    """
    if out is not None:
        raise TypeError("linalg.multi_dot: out= is not supported (tensors are immutable here)")
    arrays = [_as_tensor(a) for a in arrays]
    n = len(arrays)
    if n < 2:
        raise ValueError("linalg.multi_dot: expecting at least two arrays")
    if n == 2:
        return tg.dot(arrays[0], arrays[1])
    first_1d, last_1d = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first_1d:
        arrays[0] = tg.reshape(arrays[0], (1, arrays[0].shape[0]))
    if last_1d:
        arrays[-1] = tg.reshape(arrays[-1], (arrays[-1].shape[0], 1))
    for i, a in enumerate(arrays):
        if a.ndim != 2:
            raise ValueError(f"linalg.multi_dot: array {i} has shape {a.shape}; the arrays must "
                             f"be 2-d (the first and last may be 1-d)")
    for i in range(n - 1):
        if arrays[i].shape[1] != arrays[i + 1].shape[0]:
            raise ValueError(f"linalg.multi_dot: shapes {arrays[i].shape} (array {i}) and "
                             f"{arrays[i + 1].shape} (array {i + 1}) are not aligned")
    dims = [arrays[0].shape[0]] + [a.shape[1] for a in arrays]
    split = _chain_order(dims)

    def product(i, j):
        if i == j:
            return arrays[i]
        return product(i, split[i][j]) @ product(split[i][j] + 1, j)

    result = product(0, n - 1)
    if first_1d and last_1d:
        return tg.reshape(result, ())
    if first_1d or last_1d:
        return tg.reshape(result, (result.shape[1],) if first_1d else (result.shape[0],))
    return result


def outer(x1, x2, /):
    """The outer product of two vectors, as ``np.linalg.outer`` (1-d inputs only).

    >>> import tapegrad as tg
    >>> tg.linalg.outer(tg.tensor([1., 2.]), tg.tensor([1., 0., -1.])).tolist()
    [[1.0, 0.0, -1.0], [2.0, 0.0, -2.0]]
    """
    x1, x2 = _as_tensor(x1), _as_tensor(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"linalg.outer: input arrays must be one-dimensional, got shapes "
                         f"{x1.shape} and {x2.shape}")
    return tg.expand_dims(x1, -1) * tg.expand_dims(x2, 0)


def vecdot(x1, x2, /, *, axis=-1):
    """The dot product of vectors along `axis` (other axes broadcast), as
    ``np.linalg.vecdot``: a complex x1 is conjugated, ``sum(conj(x1) * x2)``.

    >>> import tapegrad as tg
    >>> tg.linalg.vecdot(tg.ones((2, 3)), tg.tensor([1., 2., 3.])).tolist()
    [6.0, 6.0]
    """
    x1, x2 = _as_tensor(x1), _as_tensor(x2)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError(f"linalg.vecdot: inputs must be at least 1-d, got shapes {x1.shape} "
                         f"and {x2.shape}")
    for x in (x1, x2):
        if not -x.ndim <= axis < x.ndim:
            raise np.exceptions.AxisError(axis, x.ndim, "linalg.vecdot")
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"linalg.vecdot: x1 (shape {x1.shape}) and x2 (shape {x2.shape}) have "
                         f"different lengths along axis {axis}")
    x1, x2 = tg.moveaxis(_conj(x1), axis, -1), tg.moveaxis(x2, axis, -1)
    return tg.sum(x1 * x2, axis=-1)


def _cross3(a, b):
    """The cross product of 3-vectors along the last axes of a and b (batch axes broadcast);
    a 2-vector is one with z = 0 (np.cross's rule)."""
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return a0 * b1 - a1 * b0
    if a.shape[-1] == 2:
        b2 = b[..., 2]
        return tg.stack([a1 * b2, -(a0 * b2), a0 * b1 - a1 * b0], axis=-1)
    a2 = a[..., 2]
    if b.shape[-1] == 2:
        return tg.stack([-(a2 * b1), a2 * b0, a0 * b1 - a1 * b0], axis=-1)
    b2 = b[..., 2]
    return tg.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def numpy_cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 2- or 3-element vectors, as ``np.cross(a, b, axisa, axisb,
    axisc, axis)`` (``tg.cross``): a 2-vector is a 3-vector with z = 0, and two 2-vectors
    give the z component alone. ``axis`` overrides the other three.

    >>> import tapegrad as tg
    >>> tg.cross(tg.tensor([1., 2., 3.]), tg.tensor([4., 5., 6.])).tolist()
    [-3.0, 6.0, -3.0]
    >>> tg.cross(tg.tensor([1., 0.]), tg.tensor([0., 1.])).item()
    1.0
    """
    a, b = _as_tensor(a), _as_tensor(b)
    if axis is not None:
        axisa = axisb = axisc = axis
    for name, x, ax in (("a", a, axisa), ("b", b, axisb)):
        if x.ndim == 0 or not -x.ndim <= ax < x.ndim:
            raise np.exceptions.AxisError(ax, x.ndim, f"cross: axis{name}")
        if x.shape[ax] not in (2, 3):
            raise ValueError(f"cross: incompatible dimensions for cross product (dimension "
                             f"must be 2 or 3): {name} has shape {x.shape}, {x.shape[ax]} along "
                             f"axis {ax}")
    c = _cross3(tg.moveaxis(a, axisa, -1), tg.moveaxis(b, axisb, -1))
    if c.ndim and (a.shape[axisa] == 3 or b.shape[axisb] == 3):
        if not -c.ndim <= axisc < c.ndim:
            raise np.exceptions.AxisError(axisc, c.ndim, "cross: axisc")
        return tg.moveaxis(c, -1, axisc)
    return c


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-element vectors along `axis` (other axes broadcast), as
    ``np.linalg.cross``.

    >>> import tapegrad as tg
    >>> tg.linalg.cross(tg.tensor([1., 0., 0.]), tg.tensor([0., 1., 0.])).tolist()
    [0.0, 0.0, 1.0]
    """
    x1, x2 = _as_tensor(x1), _as_tensor(x2)
    for x in (x1, x2):
        if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
            raise np.exceptions.AxisError(axis, x.ndim, "linalg.cross")
        if x.shape[axis] != 3:
            raise ValueError(f"linalg.cross: both input arrays must be (arrays of) 3-dimensional "
                             f"vectors, got shapes {x1.shape} and {x2.shape} along axis {axis}")
    c = _cross3(tg.moveaxis(x1, axis, -1), tg.moveaxis(x2, axis, -1))
    return tg.moveaxis(c, -1, axis) if axis != -1 else c


def matrix_transpose(x, /):
    """Each matrix of x transposed (its last two axes swapped), as
    ``np.linalg.matrix_transpose``."""
    x = _as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"linalg.matrix_transpose: input array must be at least 2-dimensional, "
                         f"got shape {x.shape}")
    return _mT(x)


def tensorinv(a, ind=2):
    """The inverse of a tensor under tensordot over its first `ind` axes, as
    ``np.linalg.tensorinv``."""
    a = _as_tensor(a)
    if not isinstance(ind, int) or ind <= 0:
        raise ValueError(f"linalg.tensorinv: invalid ind argument {ind!r} (a positive int)")
    old = a.shape
    rows = math.prod(old[ind:])
    if rows * rows != a.size:
        raise np.linalg.LinAlgError(f"linalg.tensorinv: shape {old} with ind={ind} does not give "
                                    f"a square matrix (prod(a.shape[ind:]) ** 2 != a.size)")
    ia = tg.linalg_inv(tg.reshape(a, (math.prod(old[:ind]), rows)))
    return tg.reshape(ia, old[ind:] + old[:ind])


def tensorsolve(a, b, axes=None):
    """x with ``tensordot(a, x, axes=x.ndim) == b``, as ``np.linalg.tensorsolve``."""
    a, b = _as_tensor(a), _as_tensor(b)
    an = a.ndim
    if axes is not None:
        order = list(range(an))
        for k in axes:
            order.remove(k)
            order.insert(an, k)
        a = tg.transpose(a, tuple(order))
    old = a.shape[-(an - b.ndim):] if an > b.ndim else ()
    size = math.prod(old)
    if a.size != size * size:
        raise np.linalg.LinAlgError(
            f"linalg.tensorsolve: input arrays must satisfy prod(a.shape[b.ndim:]) ** 2 == "
            f"a.size, got a of shape {a.shape} and b of shape {b.shape}")
    x = tg.linalg_solve(tg.reshape(a, (size, size)), tg.reshape(b, (size,)))
    return tg.reshape(x, old)


def register(registry):
    sq = _general(3, 3) / 3.0
    registry.register_function(
        "linalg_matrix_power", matrix_power, method=False,
        samples=[tg.Sample(sq, 1), tg.Sample(sq, 2), tg.Sample(sq, 3), tg.Sample(sq, 5),
                 tg.Sample(_general(2, 3, 3, seed=1) / 3.0, 4), tg.Sample(sq, -2)])
    registry.register_function(
        "linalg_multi_dot", multi_dot, method=False,
        samples=[tg.Sample([_rand(2, 3), _rand(3, 4, seed=1)]),
                 tg.Sample([_rand(5, 2), _rand(2, 6, seed=1), _rand(6, 3, seed=2)]),
                 tg.Sample([_rand(3), _rand(3, 4, seed=1), _rand(4, 2, seed=2), _rand(2, seed=3)]),
                 tg.Sample([_rand(2, 3), _rand(3, 5, seed=1), _rand(5, 2, seed=2),
                            _rand(2, 4, seed=3)])])
    registry.register_function("linalg_outer", outer, method=False,
                               samples=[(_rand(3), _rand(2, seed=1))])
    registry.register_function(
        "linalg_vecdot", vecdot, method=False,
        samples=[(_rand(2, 3), _rand(3, seed=1)), tg.Sample(_rand(3, 2), _rand(4, 3, 1), axis=-2)])
    registry.register_function(
        "linalg_cross", cross, method=False,
        samples=[(_rand(3), _rand(3, seed=1)), (_rand(2, 3), _rand(3, seed=2)),
                 tg.Sample(_rand(3, 2), _rand(3, 1, seed=3), axis=0)])
    registry.register_function(
        "cross", numpy_cross, method=False,
        samples=[(_rand(3), _rand(3, seed=1)), (_rand(2, 3), _rand(3, seed=2)),
                 (_rand(4, 2), _rand(4, 3, seed=3)), (_rand(2), _rand(2, seed=4)),
                 (_rand(2, 3), _rand(2, seed=5)),
                 tg.Sample(_rand(3, 2), _rand(2, 3, seed=6), axisa=0, axisc=0),
                 tg.Sample(_rand(3, 4), _rand(3, 1, seed=7), axis=0)])
    registry.register_function("linalg_matrix_transpose", matrix_transpose, method=False,
                               samples=[(_rand(2, 3, 4),)])
    registry.register_function(
        "linalg_tensorinv", tensorinv, method=False,
        samples=[tg.Sample(_general(6, 6).reshape(2, 3, 6), 2),
                 tg.Sample(_general(4, 4).reshape(4, 2, 2), ind=1)])
    registry.register_function(
        "linalg_tensorsolve", tensorsolve, method=False,
        samples=[tg.Sample(_general(6, 6).reshape(2, 3, 6), _rand(2, 3)),
                 tg.Sample(_general(6, 6).reshape(6, 2, 3), _rand(6)),
                 tg.Sample(_general(6, 6).reshape(6, 2, 3).transpose(2, 0, 1), _rand(6),
                           axes=(0,))])
