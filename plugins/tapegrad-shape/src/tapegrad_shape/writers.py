"""NumPy's in-place writers: copyto, fill_diagonal, place, put, putmask.

As NumPy's, each writes into its first argument (a Tensor) and returns None. The write
is one recorded in-place ``setitem`` (what ``t[mask] = v`` does), so everything in-place
writes do holds: the tensor's version is bumped (a value saved for backward and then
overwritten raises at backward), its views are rebased, a leaf that requires grad is
refused, and gradients flow to the values written and to the entries left untouched.

Which positions get which value is decided by NumPy itself, on the host: the NumPy
function runs on an integer array of "labels" (-1 everywhere) with ``arange`` as the
values, so it leaves at each position the flat index of the value NumPy would write
there -- with NumPy's cycling of short values, ``put``'s modes and its
last-write-wins for repeated indices, and NumPy's errors. The tensor then gets
``values.ravel()[labels]`` at the labelled positions, so a value written nowhere (or
overwritten by a later one) gets a zero gradient, exactly.

>>> import tapegrad as tg
>>> a = tg.zeros(5)
>>> tg.put(a, [0, 2], [1.0, 2.0])
>>> a.tolist()
[1.0, 0.0, 2.0, 0.0, 0.0]
>>> tg.putmask(a, a == 0, [7.0, 8.0])   # values[i % 2] at flat position i
>>> a.tolist()
[1.0, 8.0, 2.0, 8.0, 7.0]
"""

from __future__ import annotations

import numpy as np
import tapegrad as tg

from .assembly import _host, _numpy_errors
from .ops import _mask, _rand

__all__ = ["copyto", "fill_diagonal", "place", "put", "putmask", "register"]


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------

def _destination(a, op, arg):
    # NOTE: writing into a tensor made from a NumPy array would leave the array unchanged
    # (a silent no-op for the caller): only a Tensor is written into.
    if not isinstance(a, tg.Tensor):
        raise TypeError(f"{op}: {arg} must be a Tensor to write into, got {type(a).__name__}; "
                        f"to write into a NumPy array call numpy.{op} with NumPy arrays only "
                        f"(t.numpy(); a gradient cannot reach an array)")
    return a


def _selector(value, op):
    """A mask or index argument as a host NumPy array (a Tensor's values: read once)."""
    return _host(value, op) if isinstance(value, tg.Tensor) else value


def _labels(a):
    return np.full(a.shape, -1, dtype=np.int64)


def _value_labels(values):
    return np.arange(int(np.prod(np.shape(values))), dtype=np.int64)


def _write_labelled(a, labels, values):
    """a[labels >= 0] = values.ravel()[labels[labels >= 0]], one recorded setitem."""
    hit = labels >= 0
    if not hit.any():
        return None
    src = labels[hit]
    if isinstance(values, tg.Tensor):
        a[hit] = tg.take(tg.reshape(values, (-1,)), src)
    else:
        a[hit] = np.asarray(values).reshape(-1)[src]
    return None


# ---------------------------------------------------------------------------------------
# The writers
# ---------------------------------------------------------------------------------------

def copyto(dst, src, casting="same_kind", where=True):
    """Copy src into the tensor dst, in place (NumPy's ``np.copyto``): src (and `where`)
    broadcast to dst's shape; only the entries where `where` is True are written. Refuses
    (TypeError) a cast `casting` does not allow, as NumPy. Returns None.

    >>> import tapegrad as tg
    >>> d = tg.zeros(3)
    >>> tg.copyto(d, tg.tensor([1.0, 2.0, 3.0]), where=[True, False, True])
    >>> d.tolist()
    [1.0, 0.0, 3.0]
    """
    dst = _destination(dst, "copyto", "dst")
    where = _selector(where, "copyto")
    # NumPy's own check of casting, broadcasting and `where` on stand-ins of dst and src
    # (zero strides: no memory), so the errors are NumPy's.
    stand_in = np.lib.stride_tricks.as_strided(np.zeros(1, dst.dtype), dst.shape,
                                               (0,) * dst.ndim)
    src_stand_in = (np.broadcast_to(np.zeros((), src.dtype), src.shape)
                    if isinstance(src, tg.Tensor) else src)
    _numpy_errors("copyto", np.copyto, stand_in, src_stand_in, casting=casting, where=where)
    if isinstance(src, tg.Tensor):
        full = tg.broadcast_to(src, dst.shape) if src.shape != dst.shape else src
    else:
        full = np.broadcast_to(np.asarray(src), dst.shape)
    mask = np.broadcast_to(np.asarray(where).astype(bool), dst.shape)
    if mask.all():
        dst[...] = full
    elif mask.any():
        dst[mask] = full[mask]
    return None


def fill_diagonal(a, val, wrap=False):
    """Write val along the main diagonal of the tensor a, in place (NumPy's
    ``np.fill_diagonal``): the entries a[i, i, ..., i] (a 2-d a may be rectangular; for
    more dimensions all must be equal), val's entries cycled along it; for a tall matrix
    `wrap` starts the diagonal again every ncols + 1 rows. Returns None.

    >>> import tapegrad as tg
    >>> a = tg.zeros((2, 3))
    >>> tg.fill_diagonal(a, 5.0)
    >>> a.tolist()
    [[5.0, 0.0, 0.0], [0.0, 5.0, 0.0]]
    """
    a = _destination(a, "fill_diagonal", "a")
    labels = _labels(a)
    _numpy_errors("fill_diagonal", np.fill_diagonal, labels, _value_labels(val), wrap=wrap)
    return _write_labelled(a, labels, val)


def place(arr, mask, vals):
    """Write vals into the tensor arr where mask is True, in place (NumPy's ``np.place``):
    the i-th True position (in C order) gets vals[i % len(vals)]; mask has arr's size.
    Returns None.

    >>> import tapegrad as tg
    >>> a = tg.zeros(4)
    >>> tg.place(a, [True, False, True, True], [1.0, 2.0])
    >>> a.tolist()
    [1.0, 0.0, 2.0, 1.0]
    """
    arr = _destination(arr, "place", "arr")
    labels = _labels(arr)
    _numpy_errors("place", np.place, labels, _selector(mask, "place"), _value_labels(vals))
    return _write_labelled(arr, labels, vals)


def put(a, ind, v, mode="raise"):
    """Write v at the flat positions `ind` of the tensor a, in place (NumPy's ``np.put``
    and ``a.put``): v is cycled over ind; `mode` 'raise' (out of bounds raises IndexError),
    'wrap' or 'clip'. A position given twice keeps the last write, as in NumPy, and the
    earlier values written there get a zero gradient. Returns None.

    >>> import tapegrad as tg
    >>> a = tg.zeros(3)
    >>> tg.put(a, [0, 4], [1.0, 2.0], mode="clip")
    >>> a.tolist()
    [1.0, 0.0, 2.0]
    """
    a = _destination(a, "put", "a")
    labels = _labels(a)
    _numpy_errors("put", np.put, labels, _selector(ind, "put"), _value_labels(v), mode=mode)
    return _write_labelled(a, labels, v)


def putmask(a, mask, values):
    """Write into the tensor a where mask is True, in place (NumPy's ``np.putmask``): the
    entry at flat position i gets values[i % len(values)] -- i counts every position, not
    only the True ones (that is ``place``); mask has a's size. Returns None.

    >>> import tapegrad as tg
    >>> a = tg.zeros(4)
    >>> tg.putmask(a, [False, True, False, True], [1.0, 2.0])
    >>> a.tolist()
    [0.0, 2.0, 0.0, 2.0]
    """
    a = _destination(a, "putmask", "a")
    labels = _labels(a)
    _numpy_errors("putmask", np.putmask, labels, _selector(mask, "putmask"),
                  _value_labels(values))
    return _write_labelled(a, labels, values)


# ---------------------------------------------------------------------------------------
# Registration (the kit checks each as "write into a copy of the first argument")
# ---------------------------------------------------------------------------------------

def register(registry):
    fn = registry.register_function
    fn("copyto", copyto, method=False, writes_into=0, samples=[
        tg.Sample(_rand(3, 4), _rand(4)),                                    # broadcast src
        tg.Sample(_rand(3, 4), _rand(3, 4, seed=1), where=_mask(3, 4)),
        tg.Sample(_rand(3, 4), _rand(3, 1), where=_mask(1, 4)),
        tg.Sample(_rand(2, 3), 2.5, where=_mask(2, 3))])
    fn("fill_diagonal", fill_diagonal, method=False, writes_into=0, samples=[
        tg.Sample(_rand(3, 4), _rand(2)),                                    # cycled
        tg.Sample(_rand(7, 3), _rand(3), wrap=True),
        tg.Sample(_rand(3, 3, 3), _rand(3)),
        tg.Sample(_rand(4, 2), 1.5)])
    fn("place", place, method=False, writes_into=0, samples=[
        tg.Sample(_rand(3, 4), _mask(3, 4), _rand(3)),
        tg.Sample(_rand(6), _mask(2, 3), _rand(2, 2))])
    fn("put", put, method=True, writes_into=0, samples=[
        tg.Sample(_rand(3, 4), np.array([0, 5, 11]), _rand(3)),
        tg.Sample(_rand(3, 4), np.array([1, 7, 1, 2]), _rand(2)),            # repeat, cycle
        tg.Sample(_rand(5), np.array([-1, 6, 12]), _rand(3), mode="wrap"),
        tg.Sample(_rand(5), np.array([-3, 9]), _rand(2), mode="clip")])
    fn("putmask", putmask, method=False, writes_into=0, samples=[
        tg.Sample(_rand(3, 4), _mask(3, 4), _rand(5)),
        tg.Sample(_rand(3, 4), _mask(3, 4), _rand(3, 4, seed=2))])
