"""NumPy's vector products: ``vdot`` and NumPy 2's gufuncs ``vecdot``, ``matvec`` and
``vecmat``, composed of ``tg.matmul`` and shape ops (so they run on every
device that has matmul, with matmul's dtypes: float32 stays float32, bool gives bool).

The gufuncs' core dimensions must match exactly (they do not broadcast) and the batch
dimensions broadcast, as NumPy's; ``vecdot`` takes ``axis=`` and ``keepdims=``. The other
gufunc keywords (``axes=``, ``out=``, ``dtype=``, ...) are refused with a TypeError.

>>> import tapegrad as tg
>>> tg.vecdot(tg.tensor([[1., 2.], [3., 4.]]), tg.tensor([1., 1.])).tolist()
[3.0, 7.0]
>>> tg.matvec(tg.tensor([[1., 2.], [3., 4.]]), tg.tensor([1., 0.])).tolist()
[1.0, 3.0]
>>> tg.vdot(tg.tensor([[1., 2.], [3., 4.]]), tg.tensor([1., 1., 1., 1.])).item()
10.0
"""

from __future__ import annotations

import operator

import numpy as np
import tapegrad as tg

from ._helpers import _rand
from .decompositions import _as_tensor
from .ops import _conj

__all__ = ["vdot", "vecdot", "matvec", "vecmat", "register"]


def _refuse(op, kwargs):
    if kwargs:
        raise TypeError(f"{op}: the keyword(s) {', '.join(sorted(kwargs))} are not supported "
                        f"(tapegrad's {op} takes axis= only where NumPy's gufunc has one core "
                        f"dimension, and writes no out= arrays)")


def _core_mismatch(op, signature, operand, dim, got, want):
    return ValueError(f"{op}: Input operand {operand} has a mismatch in its core dimension "
                      f"{dim}, with gufunc signature {signature} (size {got} is different "
                      f"from {want})")


def vdot(a, b, /):
    """The dot product of a and b flattened, as ``np.vdot`` (a 0-d tensor): a complex
    a is conjugated, ``sum(conj(a) * b)``. Both must have the same number of entries.

    >>> import tapegrad as tg
    >>> tg.vdot(tg.tensor([1., 2.]), tg.tensor([3., 4.])).item()
    11.0
    """
    a, b = _as_tensor(a), _as_tensor(b)
    if a.size != b.size:
        raise ValueError(f"vdot: a (shape {a.shape}, {a.size} entries) and b (shape {b.shape}, "
                         f"{b.size} entries) must have the same number of entries")
    return tg.matmul(tg.reshape(_conj(a), (-1,)), tg.reshape(b, (-1,)))


def vecdot(x1, x2, /, *, axis=-1, keepdims=False, **kwargs):
    """The dot product of the vectors along `axis` of x1 and x2, batch axes broadcast, as
    NumPy 2's ``np.vecdot``: a complex x1 is conjugated, ``sum(conj(x1) * x2)``
    (``keepdims=True`` keeps the reduced axis with length one).

    >>> import tapegrad as tg
    >>> tg.vecdot(tg.ones((3, 2)), tg.tensor([[1.], [2.], [3.]]), axis=0).tolist()
    [6.0, 6.0]
    """
    _refuse("vecdot", kwargs)
    x1, x2 = _as_tensor(x1), _as_tensor(x2)
    axis = operator.index(axis)
    for i, x in enumerate((x1, x2)):
        if x.ndim == 0:
            raise ValueError(f"vecdot: input operand {i} does not have enough dimensions (has "
                             f"0, gufunc core with signature (n),(n)->() requires 1)")
        if not -x.ndim <= axis < x.ndim:
            raise np.exceptions.AxisError(axis, x.ndim, "vecdot")
    v1, v2 = tg.moveaxis(_conj(x1), axis, -1), tg.moveaxis(x2, axis, -1)
    if v1.shape[-1] != v2.shape[-1]:
        raise _core_mismatch("vecdot", "(n),(n)->()", 1, 0, v2.shape[-1], v1.shape[-1])
    _batch("vecdot", v1.shape[:-1], v2.shape[:-1])
    out = tg.matmul(tg.expand_dims(v1, -2), tg.expand_dims(v2, -1))[..., 0, 0]
    if keepdims:
        out = tg.expand_dims(out, axis if axis >= 0 else out.ndim + 1 + axis)
    return out


def _batch(op, s1, s2):
    try:
        return np.broadcast_shapes(s1, s2)
    except ValueError:
        raise ValueError(f"{op}: the batch dimensions {s1} and {s2} of the operands do not "
                         f"broadcast") from None


def matvec(x1, x2, /, **kwargs):
    """The matrix-vector product of the matrices in x1 (last two axes) and the vectors in
    x2 (last axis), batch axes broadcast, as NumPy 2's ``np.matvec`` (no conjugation).

    >>> import tapegrad as tg
    >>> tg.matvec(tg.ones((2, 3)), tg.tensor([1., 2., 3.])).tolist()
    [6.0, 6.0]
    """
    _refuse("matvec", kwargs)
    x1, x2 = _as_tensor(x1), _as_tensor(x2)
    if x1.ndim < 2 or x2.ndim < 1:
        raise ValueError(f"matvec: the operands need at least 2 and 1 dimensions (gufunc "
                         f"signature (m,n),(n)->(m)), got shapes {x1.shape} and {x2.shape}")
    if x1.shape[-1] != x2.shape[-1]:
        raise _core_mismatch("matvec", "(m,n),(n)->(m)", 1, 0, x2.shape[-1], x1.shape[-1])
    _batch("matvec", x1.shape[:-2], x2.shape[:-1])
    return tg.matmul(x1, tg.expand_dims(x2, -1))[..., 0]


def vecmat(x1, x2, /, **kwargs):
    """The vector-matrix product of the vectors in x1 (last axis) and the matrices in x2
    (last two axes), batch axes broadcast, as NumPy 2's ``np.vecmat``: a complex vector
    is conjugated, ``conj(x1) @ x2``.

    >>> import tapegrad as tg
    >>> tg.vecmat(tg.tensor([1., 2.]), tg.ones((2, 3))).tolist()
    [3.0, 3.0, 3.0]
    """
    _refuse("vecmat", kwargs)
    x1, x2 = _as_tensor(x1), _as_tensor(x2)
    if x1.ndim < 1 or x2.ndim < 2:
        raise ValueError(f"vecmat: the operands need at least 1 and 2 dimensions (gufunc "
                         f"signature (n),(n,m)->(m)), got shapes {x1.shape} and {x2.shape}")
    if x1.shape[-1] != x2.shape[-2]:
        raise _core_mismatch("vecmat", "(n),(n,m)->(m)", 1, 0, x2.shape[-2], x1.shape[-1])
    _batch("vecmat", x1.shape[:-1], x2.shape[:-2])
    return tg.matmul(tg.expand_dims(_conj(x1), -2), x2)[..., 0, :]


def register(registry):
    """Register this module's functions (called from the plugin's hook in ops.py)."""
    fn = registry.register_function
    fn("vdot", vdot, method=False, samples=[
        (_rand(3), _rand(3, seed=1)), (_rand(2, 3), _rand(6, seed=1)),
        (_rand(2, 2), _rand(2, 2, seed=2))])
    fn("vecdot", vecdot, method=False, samples=[
        (_rand(2, 3), _rand(3, seed=1)), (_rand(4, 1, 3), _rand(2, 3, seed=1)),
        tg.Sample(_rand(3, 2), _rand(3, 1, seed=2), axis=0),
        tg.Sample(_rand(2, 3), _rand(2, 3, seed=3), keepdims=True),
        tg.Sample(_rand(3, 2, 4), _rand(3, 2, 4, seed=4), axis=1, keepdims=True)])
    fn("matvec", matvec, method=False, samples=[
        (_rand(2, 3), _rand(3, seed=1)), (_rand(4, 2, 3), _rand(3, seed=1)),
        (_rand(2, 3), _rand(5, 3, seed=2)), (_rand(1, 2, 3), _rand(4, 1, 3, seed=3))])
    fn("vecmat", vecmat, method=False, samples=[
        (_rand(2), _rand(2, 3, seed=1)), (_rand(4, 2), _rand(2, 3, seed=1)),
        (_rand(2), _rand(5, 2, 3, seed=2)), (_rand(3, 1, 2), _rand(4, 2, 3, seed=3))])
