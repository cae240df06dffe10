"""NaN-ignoring reductions and scans beyond ``nansum``/``nanmean``: nanmax, nanmin,
nanprod, nancumsum, nancumprod, with NumPy's names and semantics.

Each is the plain op on x with its NaNs replaced by the op's neutral element (``-inf``
for max, ``+inf`` for min, 1 for products, 0 for sums), as NumPy computes them, so the
gradient is 0 at NaN entries (they take no part) and the plain op's elsewhere: ties share
it evenly as in ``tg.max``. An all-NaN slice gives NaN for nanmax/nanmin with NumPy's
``RuntimeWarning: All-NaN slice encountered`` (its gradient is 0), 1 for nanprod and 0
for nancumsum. Integer and bool inputs hold no NaN: they get the plain op.

>>> import tapegrad as tg
>>> x = tg.tensor([[1., float('nan'), 3.], [float('nan'), 2., 4.]], requires_grad=True)
>>> tg.nanmax(x, axis=1).tolist()
[3.0, 4.0]
>>> tg.nanprod(x).backward(); x.grad.tolist()
[[24.0, 0.0, 8.0], [0.0, 12.0, 6.0]]
"""

from __future__ import annotations

import math
import warnings

import tapegrad as tg

from .ops import _as_tensor, _axes, _distinct, _rand
from .statistics import _with_nans

__all__ = ["nanmax", "nanmin", "nanprod", "nancumsum", "nancumprod", "register"]

_NOVALUE = object()       # "argument not given" (NumPy's np._NoValue)


def _refuse(op, out=None, initial=_NOVALUE, where=_NOVALUE):
    # NOTE: out= writes into an existing array (tensors are not written in place here);
    # initial= and where= are not implemented: refused rather than silently ignored.
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (tensors are not written in place); "
                        f"use the returned tensor")
    for name, value in (("initial", initial), ("where", where)):
        if value is not _NOVALUE:
            raise TypeError(f"{op}: {name}= is not supported; combine the result with "
                            f"tg.maximum/tg.where instead")


def _filled(a, neutral):
    """x as a tensor with NaNs replaced by `neutral` (a constant: no gradient there), and
    the NaN mask (None for integer and bool x)."""
    x = _as_tensor(a)
    if x.dtype.kind not in "fc":
        return x, None
    mask = x != x                  # NaN is the only value unequal to itself
    return tg.where(mask, neutral, x), mask


def _nan_extremum(a, axis, keepdims, reduce, neutral, op):
    x, mask = _filled(a, neutral)
    _axes(axis, x.ndim, op)                              # checks axis, naming the op
    out = reduce(x, axis, keepdims=keepdims)
    if mask is None:
        return out
    empty = tg.all(mask, axis, keepdims=keepdims)
    # NOTE: the where is applied always, not only when some slice is all NaN: a tg.compile
    # recording must give NaN for all-NaN slices of later inputs too. Only NumPy's warning
    # depends on this call's values (a replay does not warn).
    if empty.numpy().any():
        warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=3)
    return tg.where(empty, math.nan, out)


def nanmax(a, axis=None, out=None, keepdims=False, initial=_NOVALUE, where=_NOVALUE):
    """Maximum over `axis` ignoring NaNs, as ``np.nanmax``: an all-NaN slice gives NaN and
    a ``RuntimeWarning`` (as NumPy). The gradient goes to the maximal entries (shared
    evenly among ties, as ``tg.max``) and is 0 at NaN entries; ``initial=`` and ``where=``
    are refused.

    >>> import tapegrad as tg
    >>> tg.nanmax(tg.tensor([1., float('nan'), 3.])).item()
    3.0
    """
    _refuse("nanmax", out, initial, where)
    return _nan_extremum(a, axis, keepdims, tg.max, -math.inf, "nanmax")


def nanmin(a, axis=None, out=None, keepdims=False, initial=_NOVALUE, where=_NOVALUE):
    """Minimum over `axis` ignoring NaNs, as ``np.nanmin``: an all-NaN slice gives NaN and
    a ``RuntimeWarning`` (as NumPy). The gradient goes to the minimal entries (shared
    evenly among ties, as ``tg.min``) and is 0 at NaN entries; ``initial=`` and ``where=``
    are refused.

    >>> import tapegrad as tg
    >>> tg.nanmin(tg.tensor([1., float('nan'), 3.])).item()
    1.0
    """
    _refuse("nanmin", out, initial, where)
    return _nan_extremum(a, axis, keepdims, tg.min, math.inf, "nanmin")


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NOVALUE,
            where=_NOVALUE):
    """Product over `axis` treating NaN as one, as ``np.nanprod`` (an all-NaN slice gives
    1). The gradient is ``tg.prod``'s (exact at zeros) and 0 at NaN entries; ``initial=``
    and ``where=`` are refused.

    >>> import tapegrad as tg
    >>> tg.nanprod(tg.tensor([2., float('nan'), 3.])).item()
    6.0
    """
    _refuse("nanprod", out, initial, where)
    x, _mask = _filled(a, 1)
    return tg.prod(x, axis, dtype=dtype, keepdims=keepdims)


def nancumsum(a, axis=None, dtype=None, out=None):
    """Running sum along `axis` (None: of a flattened) treating NaN as zero, as
    ``np.nancumsum``. The gradient is ``tg.cumsum``'s and 0 at NaN entries.

    >>> import tapegrad as tg
    >>> tg.nancumsum(tg.tensor([1., float('nan'), 2.])).tolist()
    [1.0, 1.0, 3.0]
    """
    _refuse("nancumsum", out)
    x, _mask = _filled(a, 0)
    return tg.cumsum(x, axis, dtype=dtype)


def nancumprod(a, axis=None, dtype=None, out=None):
    """Running product along `axis` (None: of a flattened) treating NaN as one, as
    ``np.nancumprod``. The gradient is ``tg.cumprod``'s (exact at zeros) and 0 at NaN
    entries.

    >>> import tapegrad as tg
    >>> tg.nancumprod(tg.tensor([2., float('nan'), 3.])).tolist()
    [2.0, 2.0, 6.0]
    """
    _refuse("nancumprod", out)
    x, _mask = _filled(a, 1)
    return tg.cumprod(x, axis, dtype=dtype)


def _distinct_with_nans(*shape):
    x = _distinct(*shape)
    x.reshape(-1)[1::4] = math.nan
    return x


def register(registry):
    """Register this module's functions (called from the shape plugin's hook in
    :mod:`tapegrad_shape.ops`)."""
    fn = registry.register_function
    extremum = [tg.Sample(_distinct_with_nans(3, 4)), tg.Sample(_distinct_with_nans(3, 4), 1),
                tg.Sample(_distinct_with_nans(2, 3, 4), axis=(0, 2), keepdims=True),
                tg.Sample(_distinct(3, 4), axis=0)]
    complex_with_nans = _distinct_with_nans(3, 4) + 0.5j * _distinct(3, 4)[::-1]
    extremum = extremum + [tg.Sample(complex_with_nans, 1)]      # (lexicographic, NumPy's)
    fn("nanmax", nanmax, method=False, samples=extremum)
    fn("nanmin", nanmin, method=False, samples=extremum)
    fn("nanprod", nanprod, method=False, samples=[
        tg.Sample(_with_nans(3, 4)), tg.Sample(_with_nans(3, 4), axis=1),
        tg.Sample(_with_nans(2, 3, 4), axis=(0, -1), keepdims=True),
        tg.Sample(_rand(3, 4), 0)])
    scans = [tg.Sample(_with_nans(5)), tg.Sample(_with_nans(3, 4), axis=1),
             tg.Sample(_with_nans(3, 4), 0), tg.Sample(_rand(2, 3), axis=-1)]
    fn("nancumsum", nancumsum, method=False, samples=scans)
    fn("nancumprod", nancumprod, method=False, samples=scans)
