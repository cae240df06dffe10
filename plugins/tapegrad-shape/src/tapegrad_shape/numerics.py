"""Signals, statistics and numerics with NumPy's names and semantics: convolve, correlate,
cov, corrcoef, ediff1d, geomspace, logspace, interp, ldexp, modf, trapezoid, unwrap,
vander.

``convolve`` (np.convolve: 1-D, modes full/same/valid) and ``ldexp`` are ops with a rule
of their own; convolve's gradient is again a convolution (with the other operand flipped),
so it is differentiable to any order. Two private ops without gradient compute what
NumPy decides from values: ``_interp_segment`` (the segment of xp each x falls in) and
``_unwrap_correction`` (the multiples of the period ``unwrap`` adds). Everything else is
a composition of shape and elementwise ops.

>>> import tapegrad as tg
>>> a = tg.tensor([1., 2., 3.], requires_grad=True)
>>> tg.convolve(a, [0., 1., 0.5]).tolist()
[0.0, 1.0, 2.5, 4.0, 1.5]
>>> tg.trapezoid(a).item()
4.0
>>> tg.interp(2.5, [1., 2., 3.], a).item()
2.5
>>> tg.logspace(0.0, a, 2)[1].tolist()
[10.0, 100.0, 1000.0]
"""

from __future__ import annotations

import math
import numbers
import operator
import warnings

import numpy as np
import tapegrad as tg

from tapegrad._batching import logical_axes

from .ops import (_as_tensor, _as_tensor_like, _axes, _conj, _constant_argument, _loop_fallback,
                  _rand)

# convolve and ldexp are ops (registered in register() below, reached as tg.convolve and
# tg.ldexp), not module attributes: listing them here made `from ... import *` fail.
__all__ = ["correlate", "cov", "corrcoef", "ediff1d", "geomspace", "logspace",
           "interp", "modf", "trapezoid", "unwrap", "vander", "register"]

_NOVALUE = object()      # "argument not given" (NumPy's np._NoValue)


def _tensors(*xs):
    """The arguments as tensors, the non-tensors placed on the first tensor's device."""
    ref = next((x for x in xs if isinstance(x, tg.Tensor)), None)
    return [None if x is None else (_as_tensor(x) if ref is None else _as_tensor_like(x, ref))
            for x in xs]


def _const(values, ref, dtype=None):
    """A constant tensor on `ref`'s device."""
    return tg.asarray(np.asarray(values, dtype=dtype), device=ref.device)


def _inexact(*dtypes):
    """NumPy's result dtype of a floating computation: floats keep theirs, integers and
    booleans compute in float64."""
    dt = np.result_type(*dtypes)
    return dt if dt.kind in "fc" else np.dtype(np.float64)


# ---------------------------------------------------------------------------------------
# convolve (op), correlate
# ---------------------------------------------------------------------------------------

_MODES = {"v": "valid", "s": "same", "f": "full", 0: "valid", 1: "same", 2: "full"}


def _mode(mode, op):
    """NumPy's mode names: 'full', 'same', 'valid' (NumPy reads the first letter, any
    case) or 2, 1, 0."""
    key = mode.lower()[:1] if isinstance(mode, str) else mode
    try:
        return _MODES[key]
    except (KeyError, TypeError):
        raise ValueError(f"{op}: mode must be 'full', 'same' or 'valid', got {mode!r}") from None


def _check_1d(a, v, op):
    for x, name in ((a, "a"), (v, "v")):
        if np.ndim(x) != 1:
            raise ValueError(f"{op}: {name} must be 1-D, got shape {np.shape(x)}")
        if np.shape(x)[0] == 0:
            raise ValueError(f"{op}: {name} cannot be empty")


def _convolve_kernel(a, v, mode="full"):
    _check_1d(a, v, "convolve")
    return np.convolve(a, v, _mode(mode, "convolve"))


def _full_start(n, m, mode):
    """Where np.convolve's `mode` output starts in the 'full' one (lengths n and m)."""
    if mode == "full":
        return 0
    return (min(n, m) - 1) // 2 if mode == "same" else min(n, m) - 1


def _convolve_batch(inputs, batched, mode="full"):
    """vmap's rule. A batch of 1-D convolutions is no 1-D convolution: each entry of the
    'full' output is a window of a (zero-padded by m - 1 on both sides) times v reversed,
    so the windows are gathered with one host index (batch, n + m - 1, m), multiplied by
    v and summed; then `mode`'s part of it, as np.convolve's (which swaps a and v when v
    is the longer: the same values). O(batch (n + m) m) memory, as the direct sum."""
    a, v = inputs
    ndim_a, ndim_v = a.ndim - batched[0], v.ndim - batched[1]
    if ndim_a != 1 or ndim_v != 1 or not a.shape[-1] or not v.shape[-1]:
        # not 1-D or empty: the loop gives the kernel's error
        return _loop_fallback("convolve", inputs, batched, {"mode": mode})
    mode = _mode(mode, "convolve")
    n, m = a.shape[-1], v.shape[-1]
    full = n + m - 1
    padded = tg.pad(a, ((0, 0),) * batched[0] + ((m - 1, m - 1),))
    windows = padded[..., np.arange(full)[:, None] + (m - 1) - np.arange(m)]   # (.., full, m)
    out = tg.sum(windows * (v[:, None, :] if batched[1] else v), axis=-1)
    start = _full_start(n, m, mode)
    length = {"full": full, "same": max(n, m), "valid": max(n, m) - min(n, m) + 1}[mode]
    return out[..., start:start + length]


def _convolve_vjp(g, ans, a, v, mode="full"):
    # full[k] = sum_i a[i] v[k - i], so d/da[i] = sum_k g[k] v[k - i]: the 'valid'
    # convolution of g (zero-padded to the full output) with v flipped; likewise for v.
    # Convolutions again, so the rule is differentiable to any order. (Complex: the
    # adjoint convolves with conj(v), conj(a).)
    n, m = a.shape[0], v.shape[0]
    start = _full_start(n, m, _mode(mode, "convolve"))
    after = n + m - 1 - start - g.shape[0]
    if start or after:
        g = tg.pad(g, ((start, after),))
    return (tg.convolve(g, tg.flip(_conj(v)), "valid") if tg.needs_grad(a) else None,
            tg.convolve(g, tg.flip(_conj(a)), "valid") if tg.needs_grad(v) else None)


def _convolve_jvp(t, ans, a, v, mode="full"):
    ta, tv = t[0], t[1]        # (a positional mode is in t too, as None)
    out = None
    if ta is not None:
        out = tg.convolve(ta, v, mode)
    if tv is not None:
        dv = tg.convolve(a, tv, mode)
        out = dv if out is None else out + dv
    return out


def correlate(a, v, mode="valid"):
    """The cross-correlation of two 1-D sequences, as ``np.correlate``:
    ``c[k] = sum_n a[n + k] * conj(v[n])``, with `mode` 'valid' (the default), 'same' or
    'full'. It is ``tg.convolve`` with v reversed and conjugated (and NumPy's window for
    'same'), so it is differentiable in both inputs to any order.

    >>> import tapegrad as tg
    >>> tg.correlate(tg.tensor([1., 2., 3.]), tg.tensor([0., 1., 0.5])).tolist()
    [3.5]
    >>> tg.correlate([1., 2., 3.], [0., 1., 0.5], "full").tolist()
    [0.5, 2.0, 3.5, 3.0, 0.0]
    """
    a, v = _tensors(a, v)
    _check_1d(a, v, "correlate")
    mode = _mode(mode, "correlate")
    v = _conj(v)
    if mode != "same":
        return tg.convolve(a, tg.flip(v), mode)
    n, m = a.shape[0], v.shape[0]
    # NOTE: for 'same', np.correlate swaps the operands when v is the longer one and
    # reverses the result, so its window in the full output starts at n // 2 then, not at
    # np.convolve's (min(n, m) - 1) // 2 (they differ for an even n < m).
    start = n // 2 if n < m else (m - 1) // 2
    return tg.convolve(a, tg.flip(v), "full")[start:start + max(n, m)]


# ---------------------------------------------------------------------------------------
# cov, corrcoef
# ---------------------------------------------------------------------------------------

def _observations(m, rowvar, op):
    x = _as_tensor(m) if not isinstance(m, tg.Tensor) else m
    if x.ndim > 2:
        raise ValueError(f"{op}: m has more than 2 dimensions (shape {x.shape})")
    if x.ndim < 2:
        x = tg.reshape(x, (1,) + x.shape if x.ndim else (1, 1))
    if not rowvar and x.shape[0] != 1:
        x = tg.transpose(x)
    return x


def _weights(fweights, aweights, n, ref):
    """NumPy's checks of cov's weights, and their product (None without weights)."""
    w = None
    if fweights is not None:
        f = _as_tensor_like(fweights, ref)
        if f.dtype.kind not in "biu":
            raise TypeError("cov: fweights must be integer")
        if f.ndim > 1:
            raise RuntimeError("cov: cannot handle multidimensional fweights")
        if f.shape[0] != n:
            raise RuntimeError(f"cov: incompatible numbers of samples and fweights: {n} "
                               f"observations, {f.shape[0]} weights")
        if bool(tg.any(f < 0).item()):
            raise ValueError("cov: fweights cannot be negative")
        w = f
    if aweights is not None:
        a = _as_tensor_like(aweights, ref)
        if a.ndim > 1:
            raise RuntimeError("cov: cannot handle multidimensional aweights")
        if a.shape[0] != n:
            raise RuntimeError(f"cov: incompatible numbers of samples and aweights: {n} "
                               f"observations, {a.shape[0]} weights")
        if bool(tg.any(a < 0).item()):
            raise ValueError("cov: aweights cannot be negative")
        w = a if w is None else w * a
    return w


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """The covariance matrix of the variables in `m` (rows are variables, columns
    observations; ``rowvar=False`` swaps them) and `y`, as ``np.cov``: normalized by
    ``N - 1`` (``bias=True``: ``N``; ``ddof`` overrides both), with integer frequency
    weights `fweights` and observation weights `aweights`. One variable gives a 0-d
    result. Differentiable in m, y and aweights.

    dtype: float32 data stays float32 (``np.cov`` computes in float64 unless told
    ``dtype=``); integers compute in float64.

    >>> import tapegrad as tg
    >>> tg.cov(tg.tensor([[0., 1., 2.], [2., 1., 0.]])).tolist()
    [[1.0, -1.0], [-1.0, 1.0]]
    >>> tg.cov([1., 2., 4.], bias=True).item()
    1.5555555555555554
    """
    if ddof is not None and ddof != int(ddof):
        raise ValueError(f"cov: ddof must be an integer, got {ddof!r}")
    m, y = _tensors(m, y)
    x = _observations(m, rowvar, "cov")
    if y is not None:
        y = _observations(y, rowvar, "cov")
        if y.shape[1] != x.shape[1]:
            raise ValueError(f"cov: m and y must have the same number of observations, got "
                             f"{x.shape[1]} and {y.shape[1]}")
        x = tg.concatenate([x, y], axis=0)
    dt = np.dtype(dtype) if dtype is not None else _inexact(x.dtype)
    if x.dtype != dt:
        x = x.astype(dt)
    if ddof is None:
        ddof = 0 if bias else 1
    n = x.shape[1]
    w = _weights(fweights, aweights, n, x)
    wt = np.empty(0, dt).real.dtype            # (complex data: real weights, as NumPy's)
    if w is not None and w.dtype != wt:
        w = w.astype(wt)
    if w is None:
        avg = tg.mean(x, axis=1, keepdims=True)
        fact = n - ddof
    else:
        w_sum = tg.sum(w)
        avg = tg.sum(x * w, axis=1, keepdims=True) / w_sum
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * tg.sum(w * _as_tensor_like(aweights, x).astype(wt)) / w_sum
    if (fact if isinstance(fact, numbers.Number) else fact.item()) <= 0:
        warnings.warn("cov: degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=2)
        fact = 0.0
    d = x - avg
    dw = d if w is None else d * w
    # (complex: X X^H, as NumPy's cov conjugates the second factor)
    c = tg.tensordot(d, tg.transpose(tg.conj(dw) if dw.dtype.kind == "c" else dw), 1)
    # NOTE: fact == 0 gives inf/nan as NumPy's (c * np.true_divide(1, 0.0)).
    c = c * (math.inf if isinstance(fact, numbers.Number) and fact == 0 else 1 / fact)
    return tg.reshape(c, tuple(s for s in c.shape if s != 1))


def corrcoef(x, y=None, rowvar=True, bias=_NOVALUE, ddof=_NOVALUE, *, dtype=None):
    """Pearson correlation coefficients, as ``np.corrcoef``: ``cov(x, y, rowvar)`` divided
    by the outer product of the standard deviations, clipped to [-1, 1] (the clip's
    gradient is 0 where it binds: only the diagonal, which is constant 1). One variable
    gives 1 (or NaN), as NumPy's. `bias` and `ddof` have no effect (deprecated in NumPy).

    >>> import tapegrad as tg
    >>> tg.corrcoef(tg.tensor([1., 2., 4.]), tg.tensor([2., 4., 7.])).numpy().round(4).tolist()
    [[1.0, 0.9972], [0.9972, 1.0]]
    """
    if bias is not _NOVALUE or ddof is not _NOVALUE:
        warnings.warn("corrcoef: bias and ddof have no effect and are deprecated",
                      DeprecationWarning, stacklevel=2)
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = tg.diagonal(c)
    complex_ = c.dtype.kind == "c"
    std = tg.sqrt(tg.real(d) if complex_ else d)
    c = c / tg.reshape(std, (-1, 1)) / tg.reshape(std, (1, -1))
    if complex_:
        # NumPy clips the real and imaginary parts separately (np.clip of a complex array
        # would order it lexicographically)
        return tg.complex(tg.clip(tg.real(c), -1, 1), tg.clip(tg.imag(c), -1, 1))
    return tg.clip(c, -1, 1)


# ---------------------------------------------------------------------------------------
# ediff1d, trapezoid, unwrap, vander
# ---------------------------------------------------------------------------------------

def ediff1d(ary, to_end=None, to_begin=None):
    """The differences between consecutive elements of the flattened `ary`, as
    ``np.ediff1d``, with `to_begin` / `to_end` (flattened) joined before / after. The
    result has ary's dtype. Differentiable in all three.

    >>> import tapegrad as tg
    >>> tg.ediff1d(tg.tensor([1., 2., 4., 7.]), to_begin=-99., to_end=[88., 99.]).tolist()
    [-99.0, 1.0, 2.0, 3.0, 88.0, 99.0]
    """
    a, to_end, to_begin = _tensors(ary, to_end, to_begin)
    a = tg.reshape(a, (-1,))
    parts = []
    for extra, name in ((to_begin, "to_begin"), (to_end, "to_end")):
        if extra is None:
            parts.append(None)
            continue
        if not np.can_cast(extra.dtype, a.dtype, casting="same_kind"):
            raise TypeError(f"ediff1d: dtype of `{name}` ({extra.dtype}) must be compatible "
                            f"with input `ary` ({a.dtype}) under the `same_kind` rule.")
        extra = tg.reshape(extra, (-1,))
        parts.append(extra if extra.dtype == a.dtype else extra.astype(a.dtype))
    d = a[1:] - a[:-1]
    if d.dtype != a.dtype:          # booleans: NumPy subtracts in ary's dtype (refused)
        d = d.astype(a.dtype)
    if parts[0] is None and parts[1] is None:
        return d
    return tg.concatenate([p for p in (parts[0], d, parts[1]) if p is not None])


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of `y` along `axis` by the composite trapezoidal rule, as
    ``np.trapezoid``: at the sample points `x` (1-D of y's length along axis, or y's
    shape), else with spacing `dx`. Differentiable in y, x and dx.

    >>> import tapegrad as tg
    >>> tg.trapezoid(tg.tensor([1., 2., 3.]), x=[4., 6., 8.]).item()
    8.0
    """
    if isinstance(dx, numbers.Number):          # a Python number stays weak (float32 y)
        y, x = _tensors(y, x)
    else:
        y, x, dx = _tensors(y, x, dx)
    if y.ndim == 0:
        raise ValueError("trapezoid: y must be at least 1-D, got a 0-d tensor")
    (ax,) = _axes(axis, y.ndim, "trapezoid")
    if x is None:
        d = dx
    else:
        if x.ndim == 1:
            if x.shape[0] != y.shape[ax]:
                raise ValueError(f"trapezoid: x has {x.shape[0]} sample points, y "
                                 f"{y.shape[ax]} along axis {ax} (shape {y.shape})")
            d = x[1:] - x[:-1]
            shape = [1] * y.ndim
            shape[ax] = d.shape[0]
            d = tg.reshape(d, tuple(shape))
        else:
            d = tg.diff(x, axis=axis)
    lo = (slice(None),) * ax + (slice(None, -1),)
    hi = (slice(None),) * ax + (slice(1, None),)
    return tg.sum(d * (y[hi] + y[lo]) / 2.0, ax)


def _unwrap_correction_batch(inputs, batched, *, axis, **params):
    (p,) = inputs
    (ax,) = logical_axes(axis, p.ndim - 1, "unwrap")
    return tg._unwrap_correction(p, axis=ax + 1, **params)


def _unwrap_correction_kernel(p, *, discont, axis, period):
    # NumPy's np.unwrap, without its last step (adding the correction to p).
    dd = np.diff(p, axis=axis)
    if discont is None:
        discont = period / 2
    dtype = np.result_type(dd, period)
    if np.issubdtype(dtype, np.integer):
        interval_high, rem = divmod(period, 2)
        boundary_ambiguous = rem == 0
    else:
        interval_high = period / 2
        boundary_ambiguous = True
    interval_low = -interval_high
    ddmod = np.mod(dd - interval_low, period) + interval_low
    if boundary_ambiguous:
        np.copyto(ddmod, interval_high, where=(ddmod == interval_low) & (dd > 0))
    ph_correct = ddmod - dd
    np.copyto(ph_correct, 0, where=abs(dd) < discont)
    shape = list(p.shape)
    shape[axis] = 1
    return np.concatenate([np.zeros(shape, ph_correct.dtype), ph_correct.cumsum(axis)],
                          axis=axis).astype(dtype, copy=False)


def unwrap(p, discont=None, axis=-1, *, period=2 * math.pi):
    """`p` unwrapped along `axis`, as ``np.unwrap``: where consecutive values jump by
    more than ``max(discont, period / 2)`` the jump is brought into [-period/2, period/2]
    by adding multiples of `period`. Those multiples are piecewise constant in p (they
    change only where a jump crosses the threshold), so the gradient is 1 everywhere: the
    derivative of each piece, as PyTorch's convention for piecewise functions.

    >>> tg.unwrap(tg.tensor([0., 3., 6.5])).numpy().round(4).tolist()
    [0.0, 3.0, 0.2168]
    """
    x = _as_tensor(p)
    if x.ndim == 0:
        raise ValueError("unwrap: p must be at least 1-D, got a 0-d tensor")
    (ax,) = _axes(axis, x.ndim, "unwrap")
    correction = tg._unwrap_correction(x, discont=discont, axis=ax, period=period)
    if x.dtype != correction.dtype:
        x = x.astype(correction.dtype)
    return x + correction


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of the 1-D `x`, as ``np.vander``: column i is
    ``x ** (N - 1 - i)`` (``increasing=True``: ``x ** i``); N defaults to len(x). Built by
    repeated multiplication, as NumPy does, so the gradient at x = 0 is exact (no
    ``0 * x ** -1``). float32 x stays float32 (NumPy's vander gives float64).

    >>> import tapegrad as tg
    >>> tg.vander(tg.tensor([1., 2., 3.]), 3).tolist()
    [[1.0, 1.0, 1.0], [4.0, 2.0, 1.0], [9.0, 3.0, 1.0]]
    """
    x = _as_tensor(x)
    if x.ndim != 1:
        raise ValueError(f"vander: x must be a one-dimensional array or sequence, got shape "
                         f"{x.shape}")
    n = x.shape[0] if N is None else operator.index(N)
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {n}")
    # NOTE: NumPy promotes with int64 (float32 -> float64); float32 stays float32 here.
    dtype = x.dtype if x.dtype.kind == "f" else np.promote_types(x.dtype, np.int64)
    if x.dtype != dtype:
        x = x.astype(dtype)
    if n == 0:
        return tg.reshape(x[:0], (x.shape[0], 0)) if x.shape[0] == 0 else \
            tg.zeros((x.shape[0], 0), dtype=dtype, device=x.device)
    cols = [tg.ones(x.shape, dtype=dtype, device=x.device)]
    for _ in range(n - 1):
        cols.append(x if len(cols) == 1 else cols[-1] * x)
    if not increasing:
        cols.reverse()
    return tg.stack(cols, axis=1)


# ---------------------------------------------------------------------------------------
# linspace (differentiable, private), logspace, geomspace
# ---------------------------------------------------------------------------------------

def _scalar_or_dtype(a):
    return a if isinstance(a, (int, float)) and not isinstance(a, bool) else np.asarray(a).dtype


def _linspace(start, stop, num, endpoint, axis, op):
    """np.linspace(start, stop, num, endpoint, axis=axis) with tensor start/stop,
    differentiable in both (NumPy's arithmetic, step by step)."""
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"{op}: number of samples, {num}, must be non-negative")
    dt = _inexact(*(a.dtype if isinstance(a, tg.Tensor) else _scalar_or_dtype(a)
                    for a in (start, stop)), 0.0)
    s, e = _tensors(start, stop)
    s = s if s.dtype == dt else s.astype(dt)
    e = e if e.dtype == dt else e.astype(dt)
    div = (num - 1) if endpoint else num
    delta = e - s
    y = _const(np.arange(0, num, dtype=dt).reshape((-1,) + (1,) * delta.ndim), delta)
    if div > 0:
        step = delta / div
        if bool(tg.any(step == 0).item()):
            y = y / div * delta          # NOTE: NumPy's path for denormal steps (gh-5437)
        else:
            y = y * step
    else:
        y = y * delta
    y = y + s
    if endpoint and num > 1:
        last = tg.broadcast_to(e, delta.shape)
        y = tg.concatenate([y[:-1], tg.reshape(last, (1,) + delta.shape)], axis=0)
    if axis != 0:
        y = tg.moveaxis(y, 0, axis)
    return y


def _cast_result(y, dtype):
    if dtype is None:
        return y
    dtype = np.dtype(dtype)
    if dtype.kind in "iub":
        y = tg.floor(y)
    return y if y.dtype == dtype else y.astype(dtype)


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """`num` numbers spaced evenly on a log scale, ``base ** linspace(start, stop)``, as
    ``np.logspace``: start, stop and base may be arrays (broadcast together; the new axis
    is `axis`). Differentiable in start, stop and base.

    >>> import tapegrad as tg
    >>> tg.logspace(0.0, 2.0, 3).tolist()
    [1.0, 10.0, 100.0]
    """
    b_nd = base.ndim if isinstance(base, tg.Tensor) else np.ndim(base)
    if not isinstance(base, (float, int)) and b_nd:
        start, stop, base = _tensors(start, stop, base)
        ndmax = max(start.ndim, stop.ndim, base.ndim)
        start, stop, base = (tg.reshape(a, (1,) * (ndmax - a.ndim) + a.shape)
                             for a in (start, stop, base))
        y = _linspace(start, stop, num, endpoint, axis, "logspace")
        base = tg.expand_dims(base, axis)
    else:
        y = _linspace(start, stop, num, endpoint, axis, "logspace")
        if isinstance(base, tg.Tensor) and base.device != y.device:
            base = base.to(y.device)
    return _cast_result(tg.power(base, y), dtype)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """`num` numbers spaced evenly on a log scale from start to stop (a geometric
    progression), as ``np.geomspace``: the ends are exactly start and stop; both may be
    negative (not of opposite signs: that sequence is complex) and arrays. Differentiable
    in start and stop.

    >>> import tapegrad as tg
    >>> tg.geomspace(1.0, 1000.0, 4).tolist()
    [1.0, 10.0, 100.0, 1000.0]
    """
    num = operator.index(num)
    dt = _inexact(*(a.dtype if isinstance(a, tg.Tensor) else _scalar_or_dtype(a)
                    for a in (start, stop)), 0.0)
    s, e = _tensors(start, stop)
    if s.dtype.kind == "c" or e.dtype.kind == "c":
        raise TypeError("geomspace: complex start/stop are not supported")
    if bool(tg.any(s == 0).item()) or bool(tg.any(e == 0).item()):
        raise ValueError("geomspace: geometric sequence cannot include zero")
    s = s if s.dtype == dt else s.astype(dt)
    e = e if e.dtype == dt else e.astype(dt)
    sign = tg.sign(s.detach())                 # a constant: +1 or -1
    s, e = s / sign, e / sign
    if bool(tg.any(e < 0).item()):
        raise ValueError("geomspace: start and stop of opposite signs give a complex "
                         "sequence; complex numbers are not supported")
    result = logspace(tg.log10(s), tg.log10(e), num=num, endpoint=endpoint, base=10.0)
    if num > 0:
        shape = (1,) + result.shape[1:]
        ends = [tg.reshape(tg.broadcast_to(s, result.shape[1:]), shape)]
        middle = result[1:]
        if num > 1 and endpoint:
            middle = result[1:-1]
            tail = [tg.reshape(tg.broadcast_to(e, result.shape[1:]), shape)]
        else:
            tail = []
        result = tg.concatenate(ends + [middle] + tail, axis=0)
    result = result * sign
    if axis != 0:
        result = tg.moveaxis(result, 0, axis)
    return _cast_result(result, dtype)


# ---------------------------------------------------------------------------------------
# interp
# ---------------------------------------------------------------------------------------

def _interp_segment_batch(inputs, batched):
    x, xp = inputs
    if batched[1]:              # knots per example: a search per example
        return _loop_fallback("_interp_segment", inputs, batched, {})
    return tg._interp_segment(x, xp)        # each x on its own: any shape of x


def _interp_segment_kernel(x, xp):
    """For each x: the j with xp[j] <= x < xp[j + 1], clipped to the segments."""
    j = np.searchsorted(xp, x, side="right") - 1
    return np.clip(j, 0, max(len(xp) - 2, 0)).astype(np.int64)


def interp(x, xp, fp, left=None, right=None, period=None):
    """The piecewise linear interpolant of the points (xp, fp) at x, as ``np.interp``:
    xp increasing (not checked, as NumPy), x < xp[0] gives `left` (default fp[0]),
    x > xp[-1] `right` (default fp[-1]); with `period` the points repeat (left/right are
    ignored). Differentiable in x and fp (and left/right); xp is a constant (a tensor
    there that requires grad raises NotImplementedError). At a knot
    xp[j] the derivative in x is the slope of the segment to its right (at xp[-1]: of
    the last segment), outside [xp[0], xp[-1]] it is 0.

    dtype: float32 x and fp give float32 (``np.interp`` always computes in float64).

    >>> import tapegrad as tg
    >>> tg.interp([0.5, 1.5, 9.], [0., 1., 2.], tg.tensor([0., 10., 0.])).tolist()
    [5.0, 5.0, 0.0]
    """
    xp = _constant_argument("interp", "xp", xp)
    x, fp = _tensors(x, fp)
    xp = np.asarray(xp)
    if fp.dtype.kind == "c" or xp.dtype.kind == "c":
        raise TypeError("interp: complex xp or fp is not supported")
    if xp.ndim != 1 or fp.ndim != 1:
        raise ValueError(f"interp: xp and fp must be 1-D, got shapes {xp.shape} and {fp.shape}")
    if fp.shape[0] != xp.shape[0]:
        raise ValueError(f"interp: fp and xp are not of the same length ({fp.shape[0]} and "
                         f"{xp.shape[0]})")
    if xp.shape[0] == 0:
        raise ValueError("interp: array of sample points is empty")
    dt = _inexact(x.dtype, fp.dtype)
    x = x if x.dtype == dt else x.astype(dt)
    fp = fp if fp.dtype == dt else fp.astype(dt)
    xp = xp.astype(dt)
    if period is not None:
        if period == 0:
            raise ValueError("interp: period must be a non-zero value")
        period = abs(period)
        left = right = None
        x = tg.mod(x, period)
        xp = np.mod(xp, period)
        order = np.argsort(xp, kind="stable")
        xp = xp[order]
        fp = fp[order]
        xp = np.concatenate((xp[-1:] - period, xp, xp[0:1] + period))
        fp = tg.concatenate([fp[-1:], fp, fp[0:1]])
    left = fp[0] if left is None else _as_tensor_like(left, x)
    right = fp[-1] if right is None else _as_tensor_like(right, x)
    n = xp.shape[0]
    if n == 1:
        val = tg.broadcast_to(fp[0], x.shape)
    else:
        j = tg._interp_segment(x, _const(xp, x))
        xj, xj1 = _const(xp[:-1], x), _const(xp[1:], x)
        xj, xj1 = tg.take(xj, j), tg.take(xj1, j)
        fj, fj1 = tg.take(fp, j), tg.take(fp, j + 1)
        width = xj1 - xj
        flat = width == 0                       # repeated xp: no slope, as NumPy's
        slope = tg.where(flat, 0, (fj1 - fj) / tg.where(flat, 1, width))
        # NOTE: at x == xp[-1] NumPy gives fp[-1] exactly: measure from the right end.
        val = tg.where(x == float(xp[-1]), slope * (x - xj1) + fj1, slope * (x - xj) + fj)
    val = tg.where(x < float(xp[0]), left, val)
    val = tg.where(x > float(xp[-1]), right, val)
    return val if val.dtype == dt else val.astype(dt)


# ---------------------------------------------------------------------------------------
# ldexp (op), modf
# ---------------------------------------------------------------------------------------

def _ldexp_kernel(x1, x2):
    x2 = np.asarray(x2)
    if x2.dtype.kind not in "biu":
        raise TypeError(f"ldexp: the exponent x2 must be integers, got dtype {x2.dtype}")
    return np.ldexp(x1, x2)


def _ldexp_vjp(g, ans, x1, x2):
    return tg.ldexp(g, x2), None                 # linear in x1: d/dx1 = 2 ** x2


def modf(x):
    """The fractional and integral parts of x, as ``np.modf``: ``(x - trunc(x),
    trunc(x))``, both with x's sign and float dtype. The gradient is 1 for the fractional
    part and 0 for the integral part (trunc's, as PyTorch), also at integers.

    >>> import tapegrad as tg
    >>> frac, whole = tg.modf(tg.tensor([3.25, -1.5]))
    >>> frac.tolist(), whole.tolist()
    ([0.25, -0.5], [3.0, -1.0])
    """
    x = _as_tensor(x)
    if x.dtype.kind not in "fc":
        x = x.astype(_inexact(x.dtype))
    whole = tg.trunc(x)
    # NOTE: inf - trunc(inf) is nan (and warns); NumPy's fractional part of +-inf is +-0,
    # so infinities are replaced before the subtraction. The fractional part has x's sign
    # also when it is zero (-0.0 for -2.0, as NumPy's): it is computed on -x there.
    inf = tg.isinf(x)
    safe = tg.where(inf, 0.0, x)
    neg = -safe
    frac = tg.where(tg.signbit(x), -(neg - tg.trunc(neg)), safe - tg.trunc(safe))
    frac = tg.where(inf, tg.where(tg.signbit(x), -0.0, 0.0).astype(x.dtype), frac)
    return frac, whole


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

def _positive(*shape, seed=0):
    return np.abs(_rand(*shape, seed=seed)) + 0.5


def register(registry):
    """Register this module's ops and functions with `registry` (called from the shape
    plugin's ``tapegrad_register_ops`` hook in :mod:`tapegrad_shape.ops`)."""
    fn, op = registry.register_function, registry.register_op
    op("convolve", complex=True,
    kernels={"cpu": _convolve_kernel}, vjp=_convolve_vjp, jvp=_convolve_jvp,
       batch=_convolve_batch,
       method=False, save_ans=False, samples=[
           tg.Sample(_rand(5), _rand(3, seed=1)), tg.Sample(_rand(3), _rand(5, seed=1)),
           tg.Sample(_rand(6), _rand(3, seed=1), "same"),
           tg.Sample(_rand(6), _rand(4, seed=1), mode="same"),
           tg.Sample(_rand(3), _rand(6, seed=1), mode="same"),
           tg.Sample(_rand(6), _rand(4, seed=1), mode="valid"),
           tg.Sample(_rand(2), _rand(5, seed=1), mode="valid"),
           tg.Sample(_rand(1), _rand(4, seed=1))],
       doc="The discrete linear convolution of two 1-D sequences, as np.convolve(a, v, "
           "mode='full'): 'full' (length n + m - 1), 'same' (length max(n, m), centred as "
           "NumPy's) or 'valid' (max(n, m) - min(n, m) + 1). The gradient of each input "
           "is the 'valid' convolution of g (zero-padded to the full output) with the "
           "other input reversed.")
    fn("correlate", correlate, method=False, samples=[
        tg.Sample(_rand(5), _rand(3, seed=1)), tg.Sample(_rand(2), _rand(5, seed=1), "same"),
        tg.Sample(_rand(4), _rand(5, seed=1), mode="same"),
        tg.Sample(_rand(6), _rand(3, seed=1), mode="full")])
    fn("cov", cov, method=False, differentiable=(0, 1), samples=[
        tg.Sample(_rand(3, 5)), tg.Sample(_rand(5, 3), rowvar=False),
        tg.Sample(_rand(6), _rand(6, seed=1), bias=True),
        tg.Sample(_rand(2, 6), ddof=2),
        tg.Sample(_rand(2, 5), fweights=np.array([1, 2, 1, 3, 1]),
                  aweights=_positive(5, seed=2)),
        tg.Sample(_rand(2, 5), aweights=_positive(5, seed=3), ddof=0)])
    fn("corrcoef", corrcoef, method=False, samples=[
        tg.Sample(_rand(3, 5)), tg.Sample(_rand(6), _rand(6, seed=1)),
        tg.Sample(_rand(5, 3), rowvar=False)])
    fn("ediff1d", ediff1d, method=False, samples=[
        tg.Sample(_rand(5)), tg.Sample(_rand(2, 3), _rand(2, seed=1), np.array(0.5))])
    fn("trapezoid", trapezoid, method=False, samples=[
        tg.Sample(_rand(5)), tg.Sample(_rand(3, 4), np.cumsum(_positive(4, seed=1))),
        tg.Sample(_rand(3, 4), None, np.array(0.5), axis=0),
        tg.Sample(_rand(3, 4), np.cumsum(_positive(3, 4, seed=2), axis=0), axis=0)])
    op("_unwrap_correction", kernels={"cpu": _unwrap_correction_kernel}, nin=1,
       batch=_unwrap_correction_batch,
       method=False, params=(), samples=[
           tg.Sample(np.array([0.0, 3.0, 6.5, 1.0]), discont=None, axis=0, period=2 * np.pi),
           tg.Sample(_rand(3, 4) * 4, discont=4.0, axis=1, period=2 * np.pi)],
       doc="What np.unwrap adds to p along `axis`: the running sum of the multiples of "
           "`period` that bring each jump into [-period/2, period/2] (0 before the first "
           "element). Piecewise constant in p: not differentiable.")
    fn("unwrap", unwrap, method=False, samples=[
        tg.Sample(np.array([0.1, 3.0, 6.5, 0.7, 7.2])),
        tg.Sample(_rand(3, 5) * 4, axis=0), tg.Sample(_rand(2, 5) * 4, 1.0, period=5.0)])
    fn("vander", vander, method=False, samples=[
        tg.Sample(_rand(4)), tg.Sample(_rand(3), 5, increasing=True),
        tg.Sample(np.array([0.0, 1.5, -2.0]), N=3)])
    fn("logspace", logspace, method=False, samples=[
        tg.Sample(np.array(0.5), np.array(2.0), 5),
        tg.Sample(_rand(3), np.array(1.0), 4, endpoint=False, base=2.0),
        tg.Sample(_rand(2), _rand(2, seed=1), 3, True, _positive(2, seed=2), axis=1)])
    fn("geomspace", geomspace, method=False, samples=[
        tg.Sample(np.array(0.5), np.array(8.0), 5),
        tg.Sample(-_positive(3), np.array(-2.0), 4, endpoint=False, axis=-1)])
    op("_interp_segment", kernels={"cpu": _interp_segment_kernel}, nin=2, method=False,
       batch=_interp_segment_batch,
       params=(), samples=[tg.Sample(_rand(6), np.array([-1.0, 0.0, 0.5, 2.0]))],
       doc="For each x, the segment j of the increasing xp with xp[j] <= x < xp[j + 1] "
           "(clipped to 0 .. len(xp) - 2): what tg.interp reads. Not differentiable.")
    knots = np.array([-1.5, -0.4, 0.3, 1.1, 2.0])
    fn("interp", interp, method=False, not_implemented=(1,), differentiable=(0, 2, 3, 4), samples=[
        tg.Sample(np.array([-1.2, 0.1, 0.77, 1.9]), knots, _rand(5)),
        tg.Sample(np.array([[-2.0, 0.5], [2.5, 1.3]]), knots, _rand(5), np.array(0.5),
                  np.array(-0.25)),
        tg.Sample(np.array([-3.1, 0.2, 4.4, 7.9]), np.array([0.5, 1.7, 3.0, 4.6]),
                  _rand(4), period=5.0)])
    op("ldexp", kernels={"cpu": _ldexp_kernel}, vjp=_ldexp_vjp, batch="elementwise",
       jvp=lambda t, ans, x1, x2: tg.ldexp(t[0], x2),
       differentiable=(0,), save_inputs=(False, True), save_ans=False, method=False,
       samples=[tg.Sample(_rand(3, 4), np.array([[1], [0], [-2]])),
                tg.Sample(_rand(4), np.array(3))],
       doc="x1 * 2 ** x2 with x2 integers, as np.ldexp (x1's float dtype; integers give "
           "float64). Differentiable in x1 (gradient 2 ** x2); the exponent gets none.")
    fn("modf", modf, method=False, samples=[tg.Sample(_rand(3, 4) * 3)])
