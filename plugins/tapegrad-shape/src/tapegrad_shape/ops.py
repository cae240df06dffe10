"""Ops that reduce, reshape, index and join tensors, with NumPy's names and semantics.

Vocabulary (as everywhere in tapegrad): ``g`` is the gradient flowing into an op's output,
``ans`` the op's forward result, ``x, y, ...`` its inputs, ``t`` the tangents of the inputs
(forward mode; None where an input has none). Each op is registered below as its CPU
kernel, ONE gradient rule and one forward-mode (JVP) rule written with tapegrad ops (so
they run on any device and are themselves differentiable), and the sample inputs the
contract kit checks them with, side by side. Functions that are compositions of other ops (``var``, ``squeeze``, ``split``, ...)
have no rule of their own.

>>> import tapegrad as tg
>>> x = tg.tensor([[1., 2., 3.], [4., 5., 6.]], requires_grad=True)
>>> x.sum(0)
tensor([5., 7., 9.], grad_fn=<sum>)
>>> tg.mean(x, axis=1, keepdims=True).shape
(2, 1)
>>> x.reshape(3, 2).T.shape
(2, 3)
>>> y = x[1:, [0, 0]]          # advanced indexing: column 0 twice
>>> y.sum().backward()
>>> x.grad                     # repeated indices accumulate
tensor([[0., 0., 0.],
        [2., 0., 0.]])
>>> tg.concatenate([x, x], axis=1).shape
(2, 6)
>>> [t.shape for t in tg.split(x, 3, axis=1)]
[(2, 1), (2, 1), (2, 1)]
"""

from __future__ import annotations

import math
import numbers
import operator

import numpy as np
import tapegrad as tg
from tapegrad import _engine, _forward
from tapegrad._batching import _loop as _batch_loop
from tapegrad._batching import _Placeholder, logical_axes
from tapegrad._compile import run_eagerly

from . import rearrange

AxisError = np.exceptions.AxisError


# ---------------------------------------------------------------------------------------
# Shape helpers (plain Python on shapes and axes, never on arrays)
# ---------------------------------------------------------------------------------------

def _axes(axis, ndim, op):
    """`axis` (None, an int or a tuple; negatives count from the end) as a tuple of
    non-negative ints in the order given. None means every axis."""
    if axis is None:
        return tuple(range(ndim))
    if not isinstance(axis, (tuple, list)):
        axis = (axis,)
    out = []
    for a in axis:
        try:
            a = operator.index(a)
        except TypeError:
            raise TypeError(f"{op}: axis must be None, an int or a tuple of ints, got {axis!r}") from None
        if not -ndim <= a < ndim:
            # AxisError is both a ValueError and an IndexError, like NumPy's.
            raise AxisError(f"{op}: axis {a} is out of bounds for a tensor of dimension {ndim}")
        a %= ndim
        if a in out:
            raise ValueError(f"{op}: repeated axis {a} in {axis!r}")
        out.append(a)
    return tuple(out)


def _kept_shape(shape, axes):
    """The shape of a reduction over `axes` with keepdims=True."""
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _unreduce(g, shape, axis, keepdims, op):
    """g, the gradient of a reduction over `axis`, broadcast back to the input's `shape`."""
    if axis is not None and not keepdims:
        kept = _kept_shape(shape, _axes(axis, len(shape), op))
        if g.shape != kept:
            g = tg.reshape(g, kept)
    if g.shape == tuple(shape):
        return g
    return tg.broadcast_to(g, shape)


def _count(shape, axis, op):
    """How many elements a reduction over `axis` combines into one."""
    return math.prod(shape[a] for a in _axes(axis, len(shape), op))


def _as_tensor(x):
    return tg.asarray(x)


def derivative_reason(v):
    """Why a derivative with respect to `v` is being computed -- "requires grad" (reverse
    mode: v requires grad and grad mode is on) or "carries a forward-mode tangent" (v has a
    tangent of an open forward level: tg.jvp, tg.forward_ad, tg.jacfwd) -- or None when it
    is not (v is no tensor, or neither holds).

    What a function that does not compute some argument's derivative tests to refuse it:
    testing ``requires_grad`` alone lets forward mode through, and the argument's tangent
    would be silently dropped. (Shared by the plugins that depend on tapegrad-shape.)

    >>> import tapegrad as tg
    >>> from tapegrad_shape.ops import derivative_reason
    >>> derivative_reason(tg.tensor([1.0], requires_grad=True)), derivative_reason(2.0)
    ('requires grad', None)
    """
    if not isinstance(v, tg.Tensor):
        return None
    if v.requires_grad and tg.is_grad_enabled():
        return "requires grad"
    # NOTE: a tangent of a level that has closed stays on the tensor and is ignored by the
    # engine (Note: [forward levels], tapegrad/_forward.py): only open levels count
    if _engine.forward_active() and _engine.has_tangents(v) and any(
            _forward.is_open(level) for level in v._tangents):
        return "carries a forward-mode tangent"
    return None


def _constant_argument(op, what, v):
    """An argument the function uses as a constant (np.gradient's spacing, np.interp's xp),
    as a host array. NOTE: its derivative exists but is not computed, so a tensor there that
    requires grad (or carries a forward-mode tangent) is refused rather than silently given
    no gradient (tangent)."""
    if isinstance(v, tg.Tensor):
        reason = derivative_reason(v)
        if reason is not None:
            raise NotImplementedError(
                f"{op}: the derivative with respect to {what} is not implemented, and the "
                f"tensor given there (shape {v.shape}, {v.dtype}) {reason}; pass it "
                f"detached ({what}.detach()) if its derivative is not needed")
        # Its values are read in Python: a replay would reuse the recording's.
        run_eagerly(f"{op}: {what} is a tensor whose values are read in Python (a replay "
                    f"would reuse the recording's)")
        v = v.detach().cpu().numpy()
    return v


def _as_tensor_like(x, ref):
    """x as a tensor; a non-tensor becomes a constant on `ref`'s device (not the default
    one), so that compositions of a tensor and arrays or numbers run on its device."""
    return x if isinstance(x, tg.Tensor) else tg.asarray(x, device=ref.device)


def _rand(*shape, seed=0):
    """Float64 sample data: a fixed standard-normal draw per shape."""
    return np.random.default_rng(seed + 17 * len(shape) + sum(shape)).standard_normal(shape)


def _distinct(*shape):
    """Float64 sample data with no two entries equal (max/min samples need no ties)."""
    n = math.prod(shape)
    values = np.linspace(-2.0, 2.0, n) + 0.01 * np.random.default_rng(n).standard_normal(n)
    return np.random.default_rng(n + 1).permutation(values).reshape(shape)


def _complex_distinct(*shape):
    """Complex sample data with distinct real parts (NumPy's lexicographic order is then
    the real parts' order, and stays so under a small perturbation: no ties)."""
    return _distinct(*shape) + 0.5j * _rand(*shape, seed=3)


# ---------------------------------------------------------------------------------------
# vmap's batching rules: helpers
# ---------------------------------------------------------------------------------------

# Every rule below is ``rule(inputs, batched, **params)`` (tapegrad/_batching.py): the
# inputs are *physical*, the vmapped axis first where ``batched[i]``; the parameters are
# the caller's, so their axes are *logical* (shifted by one here); the result has the
# vmapped axis first. Rules call tapegrad ops only, so they are differentiable.

def _move_axis_to_front(x, k):
    """x with its axis k moved to position 0 (the others in order)."""
    if k == 0:
        return x
    return tg.transpose(x, (k,) + tuple(a for a in range(x.ndim) if a != k))


def _move_front_axis_to(x, k):
    """x with its axis 0 moved to position k (the inverse of _move_axis_to_front)."""
    if k == 0:
        return x
    rest = list(range(1, x.ndim))
    return tg.transpose(x, tuple(rest[:k]) + (0,) + tuple(rest[k:]))


def _shape_of(v):
    """The shape of an input or parameter. NOTE: never np.shape / np.ndim on a tensor:
    NumPy's fallback converts it to an array, which a tensor batched at an outer vmap
    level refuses (and which copies it otherwise)."""
    return tuple(v.shape) if hasattr(v, "shape") else np.shape(v)


def _batch_size(inputs, batched):
    return next(x.shape[0] for x, b in zip(inputs, batched) if b)


def _with_batch_axis(x, b, size):
    """Physical x with the vmapped axis first: an unbatched input is broadcast (a view)."""
    return x if b else tg.broadcast_to(x, (size,) + _shape_of(x))


def _loop_fallback(name, inputs, batched, params):
    """The exact per-example loop, for the parameter combinations a rule does not cover."""
    return _batch_loop(tg.registry().ops[name], inputs, batched, params, None)


# ---------------------------------------------------------------------------------------
# Reductions: sum, mean, max, min (ops); var, std, prod (compositions)
# ---------------------------------------------------------------------------------------

def _sum_kernel(x, axis=None, dtype=None, keepdims=False):
    return np.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)


def _sum_vjp(g, ans, x, axis=None, *, dtype=None, keepdims=False):
    return (_unreduce(g, x.shape, axis, keepdims, "sum"),)


# NOTE: [explicit linear rules] sum, mean, reshape, transpose, concatenate and stack are
# linear, but their rules are written out instead of jvp="linear": the generic linear rule
# treats every argument after the tensors as an input, so a parameter given positionally
# (``tg.sum(x, 0)``, as the contract kit passes samples) would be replaced by zeros_like.
# Each rule applies the op itself to the tangent, so it is exactly the linear map.
def _sum_jvp(t, ans, x, axis=None, *, dtype=None, keepdims=False):
    return tg.sum(t[0], axis, dtype=dtype, keepdims=keepdims)


def _mean_kernel(x, axis=None, dtype=None, keepdims=False):
    return np.mean(x, axis=axis, dtype=dtype, keepdims=keepdims)


def _mean_vjp(g, ans, x, axis=None, *, dtype=None, keepdims=False):
    return (_unreduce(g, x.shape, axis, keepdims, "mean") / _count(x.shape, axis, "mean"),)


def _mean_jvp(t, ans, x, axis=None, *, dtype=None, keepdims=False):
    return tg.mean(t[0], axis, dtype=dtype, keepdims=keepdims)   # Note: [explicit linear rules]


def _max_kernel(x, axis=None, keepdims=False):
    return np.max(x, axis=axis, keepdims=keepdims)


def _min_kernel(x, axis=None, keepdims=False):
    return np.min(x, axis=axis, keepdims=keepdims)


def _real_dtype(x):
    """x's dtype, or for complex x its real counterpart (complex64 -> float32): the tie
    shares of max/min are real weights (complex input orders lexicographically, as
    NumPy's, and its gradient is the same selection: no conjugate)."""
    dt = x.dtype
    return dt if dt.kind != "c" else np.empty(0, dt).real.dtype    # (real: no allocation)


def _extremum_vjp(g, ans, x, axis=None, *, keepdims=False):
    # NOTE: ties share the gradient evenly: each of k entries equal to the max gets g / k
    # (the mean of the one-sided derivatives, as in JAX and torch.amax). `hit` comes from
    # a comparison, so it is a constant in the double-backward graph.
    hit = (x == _unreduce(ans, x.shape, axis, keepdims, "max/min")).astype(_real_dtype(x))
    share = hit / tg.sum(hit, axis, keepdims=True)
    return (_unreduce(g, x.shape, axis, keepdims, "max/min") * share,)


def _extremum_jvp(t, ans, x, axis=None, *, keepdims=False):
    # NOTE: the transpose of _extremum_vjp, so ties follow its convention exactly: the
    # tangent is the mean of the tangents of the tied entries (a one-sided derivative
    # would pick one of them and fail <u, Jv> = <J^T u, v>). `hit` is a constant.
    hit = (x == _unreduce(ans, x.shape, axis, keepdims, "max/min")).astype(_real_dtype(x))
    share = hit / tg.sum(hit, axis, keepdims=True)
    return tg.sum(t[0] * share, axis, keepdims=keepdims)


def _arg_extremum_batch(name):
    """vmap's rule of argmax/argmin. NOTE: not batch="reduce": axis=None is an index into
    the *flattened* example, so each example is flattened (the vmapped axis kept)."""
    def rule(inputs, batched, axis=None, **params):
        (x,) = inputs
        op = getattr(tg, name)
        if params.get("out") is not None:
            return _loop_fallback(name, inputs, batched, dict(params, axis=axis))
        if axis is not None:
            (ax,) = logical_axes(axis, x.ndim - 1, name)
            return op(x, ax + 1, **params)
        flat = tg.reshape(x, (x.shape[0], math.prod(x.shape[1:])))
        out = op(flat, 1)
        if params.get("keepdims"):
            out = tg.reshape(out, (x.shape[0],) + (1,) * (x.ndim - 1))
        return out
    rule.__qualname__ = rule.__name__ = f"_{name}_batch"
    return rule


def var(x, axis=None, *, ddof=0, keepdims=False):
    """Variance over `axis` (NumPy's ``np.var``): mean of squared deviations, divided by
    ``n - ddof``; for complex x the real mean of ``|x - mean|^2``, as NumPy's.

    >>> import tapegrad as tg
    >>> x = tg.tensor([[1., 2.], [3., 5.]])
    >>> tg.var(x)
    tensor(2.1875)
    >>> x.var(axis=0, ddof=1)
    tensor([2. , 4.5])
    """
    return _var(_as_tensor(x), axis, ddof, keepdims, "var")


def _var(x, axis, ddof, keepdims, op):
    n = max(_count(x.shape, axis, op) - ddof, 0)      # checks axis, naming the caller
    d = x - tg.mean(x, axis, keepdims=True)
    return tg.sum(_abs2(d), axis, keepdims=keepdims) / n


def _conj(t):
    """t's complex conjugate, t itself when real (no op recorded for real rules)."""
    dt = getattr(t, "dtype", None)
    if dt is None:                    # a Python number
        return t.conjugate() if isinstance(t, complex) else t
    return tg.conj(t) if dt.kind == "c" else t


def _abs2(d):
    """|d|^2: d * d, or for complex d the real Re(conj(d) d) (NumPy's var and std of
    complex data are real: the mean of |x - mean|^2)."""
    return tg.real(tg.conj(d) * d) if d.dtype.kind == "c" else d * d


def std(x, axis=None, *, ddof=0, keepdims=False):
    """Standard deviation over `axis` (NumPy's ``np.std``): ``sqrt(var(x, axis, ddof=ddof))``.

    >>> import tapegrad as tg
    >>> tg.std(tg.tensor([1., 3.]))
    tensor(1.)
    """
    return _sqrt_of_var(_var(_as_tensor(x), axis, ddof, keepdims, "std"))


def _sqrt_of_var(v):
    """sqrt(v) for a variance v, with gradient 0 where v == 0 (std, nanstd)."""
    # NOTE: d sqrt(v) = dv / (2 sqrt(v)) is inf * 0 = nan where v == 0 (one element, a
    # length-1 axis, equal entries), though std is constant there. Where v == 0 the result
    # is the constant 0 and sqrt only ever sees v != 0 (so no inf reaches the graph, also
    # not in its second derivative): the gradient is 0 there, as torch.std's. `v != 0`
    # keeps nan and inf (0/0 for n - ddof == 0) on the sqrt branch, as NumPy's.
    nonzero = v != 0
    return tg.where(nonzero, tg.sqrt(tg.where(nonzero, v, 1)), 0)


def prod(x, axis=None, *, dtype=None, keepdims=False):
    """Product over `axis` (NumPy's ``np.prod``).

    Computed as a balanced tree of elementwise multiplies, so its gradient is exact when
    entries are zero (no division by x) and differentiable to any order.

    >>> import tapegrad as tg
    >>> x = tg.tensor([[2., 0., 3.], [1., 4., 5.]], requires_grad=True)
    >>> x.prod(axis=1).tolist()
    [0.0, 20.0]
    >>> x.prod(axis=1).sum().backward(); x.grad
    tensor([[ 0.,  6.,  0.],
            [20.,  5.,  4.]])
    """
    # NOTE: prod(x) / x is the textbook gradient, but it is 0/0 wherever x == 0; the tree
    # of multiplies gives every partial product exactly (the approach of JAX's reduce_prod).
    x = _as_tensor(x)
    if dtype is None and x.dtype.kind in "biu" and x.dtype.itemsize < 8:
        dtype = np.uint64 if x.dtype.kind == "u" else np.int64   # NumPy's accumulator
    if dtype is not None and x.dtype != dtype:
        x = x.astype(dtype)
    axes = _axes(axis, x.ndim, "prod")
    kept = [i for i in range(x.ndim) if i not in axes]
    n = _count(x.shape, axis, "prod")
    y = x
    order = tuple(kept) + tuple(sorted(axes))
    if order != tuple(range(x.ndim)):
        y = tg.transpose(y, order)
    y = tg.reshape(y, tuple(x.shape[i] for i in kept) + (n,))
    if n == 0:
        out = tg.sum(y, -1) + 1                       # the empty product, still on the graph
    else:
        rest = None                                   # product of the odd ones left over
        while n > 1:
            if n % 2:
                last = y[..., n - 1]
                rest = last if rest is None else rest * last
                n -= 1
            half = n // 2
            y = y[..., :half] * y[..., half:n]
            n = half
        out = y[..., 0]
        if rest is not None:
            out = out * rest
    if keepdims:
        out = tg.reshape(out, _kept_shape(x.shape, axes))
    return out


# ---------------------------------------------------------------------------------------
# Shapes: reshape, transpose (ops); flatten, squeeze, expand_dims, swapaxes, moveaxis
# ---------------------------------------------------------------------------------------

def _reshape_kernel(x, shape):
    if type(x) is np.ndarray:
        return x.reshape(shape)      # NOTE: np.reshape's dispatch layers cost ~1 us
    return np.reshape(x, shape)


def _reshape_vjp(g, ans, x, *, shape):
    return (tg.reshape(g, x.shape),)


def _reshape_jvp(t, ans, x, shape):
    return tg.reshape(t[0], shape)                      # Note: [explicit linear rules]


def _reshape_batch(inputs, batched, *, shape):
    (x,) = inputs
    example = x.shape[1:]
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    shape = tuple(operator.index(s) for s in shape)
    if shape.count(-1) == 1:
        # NOTE: -1 is resolved from one example's size: with the vmapped axis in front,
        # a batch of 0 examples would leave it ambiguous (NumPy refuses that).
        known = math.prod(s for s in shape if s != -1)
        if known and math.prod(example) % known == 0:
            shape = tuple(math.prod(example) // known if s == -1 else s for s in shape)
    return tg.reshape(x, (x.shape[0],) + shape)


def _reshape_method(self, *shape, **kwargs):
    """``t.reshape(2, 3)``, ``t.reshape((2, 3))`` or ``t.reshape(-1)``, as in NumPy."""
    if not shape:
        return tg.reshape(self, **kwargs)
    if len(shape) == 1 and not isinstance(shape[0], (numbers.Integral, np.integer)):
        shape = shape[0]
    return tg.reshape(self, shape, **kwargs)


def _transpose_kernel(x, axes=None):
    if type(x) is np.ndarray:
        return x.transpose(axes)     # NOTE: np.transpose's dispatch layers cost ~1 us
    return np.transpose(x, axes)


# A replay calls the method itself, no Python frame (see Note: [plain calls] in
# tapegrad's _compile.pyx): it passes only ndarrays, for which the kernel calls it too.
_transpose_kernel.plain_call = np.ndarray.transpose


def _transpose_vjp(g, ans, x, axes=None):
    if axes is None:
        return (tg.transpose(g),)
    inverse = np.argsort([a % x.ndim for a in axes])
    return (tg.transpose(g, tuple(int(a) for a in inverse)),)


def _transpose_jvp(t, ans, x, axes=None):
    return tg.transpose(t[0], axes)                     # Note: [explicit linear rules]


def _transpose_batch(inputs, batched, axes=None):
    (x,) = inputs
    n = x.ndim - 1
    if axes is None:
        order = tuple(range(n - 1, -1, -1))
    else:
        order = logical_axes(axes, n, "transpose")
        if len(order) != n:
            raise ValueError(f"transpose: axes {axes!r} don't match a tensor of dimension {n}")
    return tg.transpose(x, (0,) + tuple(a + 1 for a in order))


def _transpose_method(self, *axes):
    """``t.transpose()``, ``t.transpose(1, 0)`` or ``t.transpose((1, 0))``, as in NumPy."""
    if not axes:
        return tg.transpose(self)
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    return tg.transpose(self, axes)


def flatten(x):
    """x as one dimension (like ``ndarray.flatten``; differentiable, may share storage).

    >>> import tapegrad as tg
    >>> tg.ones((2, 3)).flatten().shape
    (6,)
    """
    return tg.reshape(x, (-1,))


def ravel(x):
    """x as one dimension (NumPy's ``np.ravel``); the same as ``flatten``.

    >>> import tapegrad as tg
    >>> tg.ravel(tg.ones((2, 3))).shape
    (6,)
    """
    return tg.reshape(x, (-1,))


def squeeze(x, axis=None):
    """x without the axes of length one (all of them, or those in `axis`).

    >>> import tapegrad as tg
    >>> tg.zeros((1, 3, 1)).squeeze().shape, tg.squeeze(tg.zeros((1, 3, 1)), axis=0).shape
    ((3,), (3, 1))
    """
    x = _as_tensor(x)
    if axis is None:
        return tg.reshape(x, tuple(s for s in x.shape if s != 1))
    axes = _axes(axis, x.ndim, "squeeze")
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(
                f"squeeze: cannot remove axis {a} of a tensor of shape {x.shape}: it has length "
                f"{x.shape[a]}, and only axes of length one can be squeezed")
    return tg.reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))


def expand_dims(x, axis):
    """x with new axes of length one inserted at `axis` (an int or a tuple), as in NumPy.

    >>> import tapegrad as tg
    >>> tg.expand_dims(tg.zeros((2, 3)), (0, -1)).shape
    (1, 2, 3, 1)
    """
    x = _as_tensor(x)
    n_new = len(axis) if isinstance(axis, (tuple, list)) else 1
    axes = _axes(axis, x.ndim + n_new, "expand_dims")
    dims = iter(x.shape)
    return tg.reshape(x, tuple(1 if i in axes else next(dims) for i in range(x.ndim + n_new)))


def swapaxes(x, axis1, axis2):
    """x with axes `axis1` and `axis2` interchanged (NumPy's ``np.swapaxes``).

    >>> import tapegrad as tg
    >>> tg.zeros((2, 3, 4)).swapaxes(0, -1).shape
    (4, 3, 2)
    """
    x = _as_tensor(x)
    (a,), (b,) = _axes(axis1, x.ndim, "swapaxes"), _axes(axis2, x.ndim, "swapaxes")
    perm = list(range(x.ndim))
    perm[a], perm[b] = b, a
    return tg.transpose(x, tuple(perm))


def moveaxis(x, source, destination):
    """x with the axes `source` moved to positions `destination` (NumPy's ``np.moveaxis``).

    >>> import tapegrad as tg
    >>> tg.moveaxis(tg.zeros((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    x = _as_tensor(x)
    src = _axes(source, x.ndim, "moveaxis")
    dst = _axes(destination, x.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ValueError(
            f"moveaxis: source {source!r} and destination {destination!r} must name the same "
            f"number of axes")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return tg.transpose(x, tuple(order))


# ---------------------------------------------------------------------------------------
# Indexing: getitem (and the scatter-add that is its gradient), setitem
# ---------------------------------------------------------------------------------------

def _check_index(index, op):
    # The kernels' cheap form of _refuse_batched_index (they run on every x[i]).
    if type(index) is tuple:
        for i in index:
            if type(i) is _Placeholder:
                _refuse_batched_index(index, op)
    elif type(index) is _Placeholder:
        _refuse_batched_index(index, op)


def _getitem_kernel(x, *, index):
    # (_check_index written out: this kernel runs on every t[i]; ~0.1 us)
    if type(index) is tuple:
        for i in index:
            if type(i) is _Placeholder:
                _refuse_batched_index(index, "getitem")
    elif type(index) is _Placeholder:
        _refuse_batched_index(index, "getitem")
    return x[index]


def _getitem_vjp(g, ans, x, *, index):
    return (tg._getitem_grad(g, index=index, shape=x.shape),)


_BASIC_INDEX = (int, np.integer, bool, np.bool_, slice, type(None), type(Ellipsis))


def _picks_once(index):
    """Whether `index` can pick no element twice: only basic items (ints, slices, None,
    ...) and bool masks. NOTE: anything else NumPy takes as an integer array -- also a
    tuple or list *inside* the index (``x[(0, 0), (1, 1)]``), a range, a nested list --
    so it is answered False, never by listing the array-like types."""
    for i in index if isinstance(index, tuple) else (index,):
        if not isinstance(i, _BASIC_INDEX) and not (isinstance(i, np.ndarray) and i.dtype == bool):
            return False
    return True


def _refuse_batched_index(index, op):
    """NOTE: a tensor inside an index reaches the kernel as its array; a batched tensor's
    array is a placeholder without values (tapegrad/_batching.py, Note: [batched
    tensors]), which NumPy's indexing would read as zeros, silently. Refused instead."""
    for i in index if isinstance(index, tuple) else (index,):
        if isinstance(i, _Placeholder):
            raise RuntimeError(
                f"vmap: {op} with an index that is a batched tensor (different indices per "
                f"example, shape {i.shape}) is not supported inside tg.vmap; use "
                f"tg.take(x, indices, axis) or tg.take_along_axis, whose indices are inputs")


def _batched_index(index):
    """The index of the physical value for `index` of the logical one, and the position of
    the vmapped axis in the result; None where the rule does not cover the index.

    The index gets a full slice in front. NOTE: NumPy puts the axes of advanced indices
    (arrays, and ints beside arrays) where the first one was only if they are consecutive
    in the index (no slice, None or Ellipsis between them); otherwise in front of all
    other axes -- the vmapped one included, which then sits after them."""
    items = index if isinstance(index, tuple) else (index,)
    advanced, arrays_ndim, has_array = [], 0, False
    for pos, i in enumerate(items):
        if isinstance(i, (bool, np.bool_)):
            return None                       # a scalar bool adds an axis: left to the loop
        if isinstance(i, (numbers.Integral, np.integer)):
            advanced.append(pos)
        elif isinstance(i, np.ndarray):
            if i.ndim == 0 and i.dtype == bool:
                return None
            if i.ndim == 0:
                advanced.append(pos)          # a 0-d int array indexes as an int
            else:
                has_array = True
                advanced.append(pos)
                arrays_ndim = max(arrays_ndim, 1 if i.dtype == bool else i.ndim)
        elif not (isinstance(i, slice) or i is None or i is Ellipsis):
            return None                       # not NumPy's normal form: left to the loop
    physical = (slice(None),) + items
    if not has_array or advanced[-1] - advanced[0] + 1 == len(advanced):
        return physical, 0
    return physical, arrays_ndim


def _getitem_batch(inputs, batched, *, index):
    (x,) = inputs
    _refuse_batched_index(index, "getitem")
    found = _batched_index(index)
    if found is None:
        return _loop_fallback("getitem", inputs, batched, {"index": index})
    physical, k = found
    return _move_axis_to_front(tg.getitem(x, index=physical), k)


def _getitem_grad_batch(inputs, batched, *, index, shape):
    (g,) = inputs
    _refuse_batched_index(index, "getitem's gradient")
    found = _batched_index(index)
    if found is None:
        return _loop_fallback("_getitem_grad", inputs, batched, {"index": index, "shape": shape})
    physical, k = found
    return tg._getitem_grad(_move_front_axis_to(g, k), index=physical,
                            shape=(g.shape[0],) + tuple(shape))


def _index_result_shape(shape, index):
    """The shape of x[index] for an x of `shape`, from a zero-stride stand-in (no values
    are read; advanced indexing allocates one byte per element of the result)."""
    return np.broadcast_to(np.zeros((), np.int8), shape)[index].shape


def _setitem_batch(inputs, batched, *, index):
    x, value = inputs
    _refuse_batched_index(index, "setitem")
    found = _batched_index(index)
    if found is None:
        return _loop_fallback("setitem", inputs, batched, {"index": index})
    physical, k = found
    size = _batch_size(inputs, batched)
    x_batched = _with_batch_axis(x, batched[0], size)
    if not isinstance(value, numbers.Number):
        # value broadcasts against one example's x[index] (of shape target): laid out as
        # that, with its vmapped axis (or a unit one) where x[physical] has the vmapped axis.
        target = _index_result_shape(tuple(x_batched.shape[1:]), index)
        v_shape = tuple(value.shape[1:]) if batched[1] else _shape_of(value)
        extra = len(v_shape) - len(target)
        if extra > 0:
            if any(s != 1 for s in v_shape[:extra]):
                return _loop_fallback("setitem", inputs, batched, {"index": index})
            v_shape = v_shape[extra:]           # NumPy drops a value's leading unit axes
        v_shape = (1,) * (len(target) - len(v_shape)) + v_shape
        lead = value.shape[0] if batched[1] else 1
        value = _move_front_axis_to(tg.reshape(value, (lead,) + v_shape), k)
    return tg.setitem(x_batched, value, index=physical)


def _getitem_grad_kernel(g, *, index, shape):
    _check_index(index, "getitem's gradient")
    out = np.zeros(shape, dtype=g.dtype)
    if _picks_once(index):
        out[index] = g               # basic indexing and masks never repeat an element
    else:
        np.add.at(out, index, g)     # repeated indices accumulate (NumPy indexing rules)
    return out


def _getitem_grad_vjp(g, ans, x, *, index, shape):
    return (tg.getitem(g, index=index),)


def _setitem_kernel(x, value, *, index):
    _check_index(index, "setitem")
    out = x.copy()
    out[index] = value
    return out


def _host_index(index, device):
    """`index` with its array items as host NumPy arrays (the engine hands the kernel a
    cuda tensor's index as device arrays)."""
    def host(item):
        if isinstance(item, _BASIC_INDEX) or isinstance(item, (np.ndarray, list, tuple, range)):
            return item
        if isinstance(item, tg.Tensor):
            return item.detach().numpy()
        return device.to_numpy(item)
    return tuple(host(i) for i in index) if isinstance(index, tuple) else host(index)


def _refuse_repeated_setitem_writes(shape, index, value, device, reason):
    """Raise if x[index] = value, x of `shape`, writes one position more than once: NumPy
    keeps one of those writes without promising which, so the derivative with respect to
    value -- which of its entries ends up there -- would be a guess. (The derivative with
    respect to x is well defined: zero at every written position.)"""
    if _picks_once(index):
        return
    # each element of the selection, named by the flat position it writes
    targets = np.arange(math.prod(shape)).reshape(shape)[_host_index(index, device)]
    rearrange._refuse_repeated_writes(
        "setitem (x[index] = value)", targets,
        f"x of shape {tuple(shape)}, value of shape {tuple(getattr(value, 'shape', ()))} "
        f"{getattr(value, 'dtype', '')}", reason, "value")


def _setitem_vjp(g, ans, x, value, *, index):
    gx = tg.setitem(g, 0.0, index=index)
    if isinstance(value, numbers.Number):
        return gx, None
    if tg.needs_grad(value):
        # NOTE: checked here, at backward, as the engine has no hook at the call for an op's
        # own refusals; an index that repeats an element would otherwise send the
        # gradient of one surviving write to every write (PyTorch leaves it undefined)
        _refuse_repeated_setitem_writes(g.shape, index, value, g.device, "requires grad")
    gv = tg.getitem(g, index=index)
    if gv.ndim < value.ndim:   # value had extra leading ones that assignment dropped
        gv = tg.reshape(gv, (1,) * (value.ndim - gv.ndim) + gv.shape)
    return gx, gv


def _setitem_jvp(t, ans, x, value, *, index):
    tx, tv = t
    if tv is not None:
        _refuse_repeated_setitem_writes(ans.shape, index, value, ans.device,
                                        "carries a forward-mode tangent")
    # (the op is linear in (x, value): its tangent is the op on the tangents, zeros where
    # one has none)
    base = tg.zeros_like(ans) if tx is None else tx
    return tg.setitem(base, 0.0 if tv is None else tv, index=index)


def split(x, indices_or_sections, axis=0):
    """A list of sub-tensors of x along `axis` (NumPy's ``np.split``): an int cuts it into
    that many equal parts, a list of indices cuts it before each index.

    >>> import tapegrad as tg
    >>> [t.tolist() for t in tg.split(tg.arange(6.0), [2, 5])]
    [[0.0, 1.0], [2.0, 3.0, 4.0], [5.0]]
    """
    x = _as_tensor(x)
    (ax,) = _axes(axis, x.ndim, "split")
    n = x.shape[ax]
    if isinstance(indices_or_sections, (numbers.Integral, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError(f"split: the number of sections must be positive, got {sections}")
        if n % sections:
            raise ValueError(
                f"split: axis {ax} of a tensor of shape {x.shape} has {n} elements, which do "
                f"not divide into {sections} equal sections; pass a list of split indices")
        bounds = [i * (n // sections) for i in range(sections + 1)]
    else:
        bounds = [0] + [operator.index(i) for i in indices_or_sections] + [n]
    lead = (slice(None),) * ax
    return [x[lead + (slice(bounds[i], bounds[i + 1]),)] for i in range(len(bounds) - 1)]


# ---------------------------------------------------------------------------------------
# Joining: concatenate, stack
# ---------------------------------------------------------------------------------------

def _concatenate_kernel(*xs, axis=0):
    return np.concatenate(xs, axis=axis)


def _concatenate_vjp(g, ans, *xs, axis=0):
    out, start = [], 0
    if axis is None:                 # NumPy flattens every input first
        for x in xs:
            out.append(tg.reshape(g[start:start + x.size], x.shape))
            start += x.size
        return tuple(out)
    (ax,) = _axes(axis, g.ndim, "concatenate")
    lead = (slice(None),) * ax
    for x in xs:
        out.append(g[lead + (slice(start, start + x.shape[ax]),)])
        start += x.shape[ax]
    return tuple(out)


def _joined_tangents(t, xs):
    """The tangents of joined inputs, zeros where an input has none (their shapes and
    dtypes are the inputs')."""
    return [tg.zeros_like(x) if ti is None else ti for ti, x in zip(t, xs)]


def _concatenate_jvp(t, ans, *xs, axis=0):
    return tg.concatenate(_joined_tangents(t, xs), axis=axis)  # Note: [explicit linear rules]


def _concatenate_batch(inputs, batched, axis=0):
    size = _batch_size(inputs, batched)
    xs = [_with_batch_axis(x, b, size) for x, b in zip(inputs, batched)]
    if axis is None:                 # each example flattened first
        return tg.concatenate([tg.reshape(x, (size, math.prod(x.shape[1:]))) for x in xs],
                              axis=1)
    (ax,) = logical_axes(axis, xs[0].ndim - 1, "concatenate")
    return tg.concatenate(xs, axis=ax + 1)


def _stack_kernel(*xs, axis=0):
    return np.stack(xs, axis=axis)


def _stack_vjp(g, ans, *xs, axis=0):
    (ax,) = _axes(axis, g.ndim, "stack")
    lead = (slice(None),) * ax
    return tuple(g[lead + (i,)] for i in range(len(xs)))


def _stack_jvp(t, ans, *xs, axis=0):
    return tg.stack(_joined_tangents(t, xs), axis=axis)  # Note: [explicit linear rules]


def _stack_batch(inputs, batched, axis=0):
    size = _batch_size(inputs, batched)
    xs = [_with_batch_axis(x, b, size) for x, b in zip(inputs, batched)]
    (ax,) = logical_axes(axis, xs[0].ndim, "stack")      # an axis of the result
    return tg.stack(xs, axis=ax + 1)


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

def _mask(*shape, seed=3):
    return np.random.default_rng(seed).standard_normal(shape) > 0


_REDUCE_SAMPLES = [
    tg.Sample(_rand(3, 4)),
    tg.Sample(_rand(3, 4), axis=0),
    tg.Sample(_rand(3, 4), 1),
    tg.Sample(_rand(2, 3, 4), axis=-1, keepdims=True),
    tg.Sample(_rand(2, 3, 4), axis=(0, 2)),
    tg.Sample(_rand(2, 3, 4), axis=(-1, 0), keepdims=True),
    tg.Sample(_rand(3, 4), keepdims=True),
    tg.Sample(np.array(1.5)),
]
_EXTREMUM_SAMPLES = [
    tg.Sample(_distinct(3, 4)),
    tg.Sample(_distinct(3, 4), axis=1),
    tg.Sample(_distinct(2, 3, 4), axis=-1, keepdims=True),
    tg.Sample(_distinct(2, 3, 4), axis=(0, 2)),
    tg.Sample(_distinct(3, 4), keepdims=True),
]


@tg.hookimpl
def tapegrad_register_ops(registry):
    # -- reductions --------------------------------------------------------------------
    registry.register_op(
        "sum", complex=True,
        kernels={"cpu": _sum_kernel}, vjp=_sum_vjp, jvp=_sum_jvp, params=("axis",),
        batch="reduce",
        save_inputs=(False,), save_ans=False, samples=_REDUCE_SAMPLES,
        doc="Sum of x over `axis` (None: all; an int or a tuple; negatives count from the "
            "end), as np.sum(x, axis, dtype=None, keepdims=False).")
    registry.register_op(
        "mean", complex=True,
        kernels={"cpu": _mean_kernel}, vjp=_mean_vjp, jvp=_mean_jvp, params=("axis",),
        batch="reduce",
        save_inputs=(False,), save_ans=False, samples=_REDUCE_SAMPLES,
        doc="Mean of x over `axis`, as np.mean(x, axis, dtype=None, keepdims=False).")
    for name, kernel in (("max", _max_kernel), ("min", _min_kernel)):
        registry.register_op(
            name, complex=True,
            kernels={"cpu": kernel}, vjp=_extremum_vjp, jvp=_extremum_jvp, params=("axis",),
            batch="reduce",
            samples=_EXTREMUM_SAMPLES,
            doc=f"{name.capitalize()}imum of x over `axis`, as np.{name}(x, axis, "
                f"keepdims=False). The gradient is shared evenly among tied entries. Complex "
                f"input is ordered lexicographically (NumPy's), with the same gradient.")
    for name, kernel in (("argmax", np.argmax), ("argmin", np.argmin)):
        registry.register_op(
            name, kernels={"cpu": kernel}, nin=1, params=("axis",),
            batch=_arg_extremum_batch(name),
            samples=[tg.Sample(_distinct(3, 4)), tg.Sample(_distinct(3, 4), axis=-1)],
            doc=f"Index of the {name[3:]}imum of x (flattened, or along `axis`), as "
                f"np.{name}; an integer tensor, not differentiable.")
    registry.register_function(
        "var", var, samples=[
            tg.Sample(_rand(3, 4)), tg.Sample(_rand(3, 4), axis=0, ddof=1),
            tg.Sample(_rand(2, 3, 4), axis=(0, -1), keepdims=True)])
    registry.register_function(
        "std", std, samples=[tg.Sample(_rand(3, 4)), tg.Sample(_rand(3, 4), axis=1, ddof=1)])
    registry.register_function(
        "prod", prod, samples=[
            tg.Sample(_rand(3, 4)), tg.Sample(_rand(3, 5), axis=1),
            tg.Sample(_rand(2, 3, 4), axis=(0, 2), keepdims=True),
            tg.Sample(_rand(7), axis=-1),
            tg.Sample(np.array([[1.5, 0.0, 2.0], [0.0, 0.0, -3.0], [0.5, 1.2, 0.0]]), axis=1),
            tg.Sample(np.array([[1.5, 0.0, 2.0], [0.0, 0.7, -3.0]]))])

    # -- shapes ------------------------------------------------------------------------
    registry.register_op(
        "reshape", complex=True,
        kernels={"cpu": _reshape_kernel}, vjp=_reshape_vjp, jvp=_reshape_jvp, view=True,
        batch=_reshape_batch,
        save_inputs=(False,), save_ans=False, method=_reshape_method,
        samples=[tg.Sample(_rand(2, 3), shape=(3, 2)), tg.Sample(_rand(2, 3, 4), (4, -1)),
                 tg.Sample(_rand(6), shape=(1, 2, 3)), tg.Sample(_rand(2, 3), shape=-1)],
        doc="x with a new shape holding the same elements (-1 infers one length), as "
            "np.reshape(x, shape); t.reshape(2, 3) and t.reshape((2, 3)) both work.")
    registry.register_op(
        "transpose", complex=True,
        kernels={"cpu": _transpose_kernel}, vjp=_transpose_vjp, jvp=_transpose_jvp,
        batch=_transpose_batch,
        view=True, save_inputs=(False,), save_ans=False, method=_transpose_method,
        samples=[tg.Sample(_rand(2, 3)), tg.Sample(_rand(2, 3, 4), axes=(1, 0, 2)),
                 tg.Sample(_rand(2, 3, 4), (-1, 0, 1))],
        doc="x with its axes permuted by `axes` (None: reversed), as np.transpose(x, axes); "
            "t.T, t.transpose(1, 0) and t.transpose((1, 0)) all work.")
    registry.register_function("flatten", flatten, samples=[(_rand(2, 3),)])
    registry.register_function("ravel", ravel, samples=[(_rand(2, 3),)])
    registry.register_function(
        "squeeze", squeeze, samples=[
            tg.Sample(_rand(1, 3, 1)), tg.Sample(_rand(1, 3, 1), axis=-1),
            tg.Sample(_rand(1, 3, 1), axis=(0, 2))])
    registry.register_function(
        "expand_dims", expand_dims, method=False, samples=[
            tg.Sample(_rand(2, 3), axis=0), tg.Sample(_rand(2, 3), axis=-1),
            tg.Sample(_rand(2, 3), axis=(0, 3))])
    registry.register_function(
        "swapaxes", swapaxes, samples=[tg.Sample(_rand(2, 3, 4), 0, -1),
                                       tg.Sample(_rand(2, 3), axis1=1, axis2=1)])
    registry.register_function(
        "moveaxis", moveaxis, method=False, samples=[
            tg.Sample(_rand(2, 3, 4), 0, -1),
            tg.Sample(_rand(2, 3, 4), source=(0, 1), destination=(-1, 0))])

    # -- indexing ------------------------------------------------------------------------
    registry.register_op(
        "getitem", complex=True,
        kernels={"cpu": _getitem_kernel}, vjp=_getitem_vjp, jvp="linear", view=True,
        batch=_getitem_batch,
        save_inputs=(False,), save_ans=False, method=False,
        samples=[
            tg.Sample(_rand(3, 4), index=1),
            tg.Sample(_rand(3, 4), index=(slice(1, None), -1)),
            tg.Sample(_rand(2, 3, 4), index=(Ellipsis, None, slice(None, None, -2))),
            tg.Sample(_rand(5), index=np.array([0, 3, 0, 0])),                    # repeats
            tg.Sample(_rand(3, 4), index=(slice(1, None), np.array([0, 0]))),     # mixed
            tg.Sample(_rand(3, 4, 2), index=(np.array([0, 2, 0]), slice(None), np.array([1, 1, 0]))),
            tg.Sample(_rand(3, 4), index=_mask(3, 4)),                            # bool mask
            tg.Sample(_rand(3, 4), index=(np.array([True, False, True]), np.array([1, 1]))),
        ],
        doc="x[index] (the op behind t[index]): basic indexing (ints, slices, None, ...) and "
            "advanced indexing (int arrays, bool masks, mixed), as in NumPy.")
    registry.register_op(
        "_getitem_grad", complex=True,
        kernels={"cpu": _getitem_grad_kernel}, vjp=_getitem_grad_vjp, jvp="linear",
        batch=_getitem_grad_batch,
        save_inputs=(False,), save_ans=False, method=False,
        samples=[
            tg.Sample(_rand(3), index=np.array([0, 2, 0]), shape=(4,)),
            tg.Sample(_rand(2, 3), index=(slice(None), np.array([0, 0, 2])), shape=(2, 4)),
            tg.Sample(_rand(4), index=1, shape=(3, 4)),
        ],
        doc="The gradient of getitem: zeros of `shape` with g added at `index` (np.add.at, "
            "so repeated indices accumulate). Its own gradient is getitem.")
    registry.register_op(
        "setitem", complex=True,
        kernels={"cpu": _setitem_kernel}, vjp=_setitem_vjp, jvp=_setitem_jvp,
        batch=_setitem_batch,
        save_inputs=(False, False), save_ans=False, method=False,
        samples=[
            tg.Sample(_rand(3, 4), _rand(4), index=1),
            tg.Sample(_rand(3, 4), 2.5, index=(slice(None), 0)),
            tg.Sample(_rand(3, 4), _rand(2, 4), index=np.array([0, 2])),
            tg.Sample(_rand(3, 4), _rand(1), index=_mask(3, 4)),
            tg.Sample(_rand(3, 4), _rand(1, 1, 4), index=0),
        ],
        doc="A copy of x with x[index] = value (the op t[index] = value records when "
            "gradients flow): x gets g with zeros at index, value gets g[index]. An index "
            "that writes one position twice (x[[1, 1]] = v) refuses value's derivative "
            "(ValueError: NumPy keeps one write without promising which).")

    # -- joining -------------------------------------------------------------------------
    registry.register_op(
        "concatenate", complex=True, kernels={"cpu": _concatenate_kernel}, vjp=_concatenate_vjp,
        jvp=_concatenate_jvp, batch=_concatenate_batch, seq_input=True, save_ans=False,
        method=False,
        samples=[tg.Sample([_rand(2, 3), _rand(1, 3)]),
                 tg.Sample([_rand(2, 3), _rand(2, 1), _rand(2, 2)], axis=1),
                 tg.Sample([_rand(2, 3), _rand(2, 3, seed=1)], axis=-1),
                 tg.Sample([_rand(2, 2), _rand(3)], axis=None)],
        doc="The tensors joined along an existing `axis` (None: flattened first), as "
            "np.concatenate(xs, axis=0).")
    registry.register_op(
        "stack", complex=True, kernels={"cpu": _stack_kernel}, vjp=_stack_vjp, jvp=_stack_jvp,
        batch=_stack_batch, seq_input=True, save_ans=False, method=False,
        samples=[tg.Sample([_rand(2, 3), _rand(2, 3, seed=1)]),
                 tg.Sample([_rand(2, 3), _rand(2, 3, seed=1), _rand(2, 3, seed=2)], axis=-1),
                 tg.Sample([_rand(2, 3), _rand(2, 3, seed=1)], axis=1)],
        doc="The tensors (all of one shape) joined along a new `axis`, as "
            "np.stack(xs, axis=0).")
    registry.register_function(
        "split", split, method=False,
        samples=[tg.Sample(_rand(6, 2), 3), tg.Sample(_rand(2, 5), [1, 3], axis=1)])

    # -- copies --------------------------------------------------------------------------
    copy = registry.register_op(
        "copy", complex=True, kernels={"cpu": np.copy}, vjp=lambda g, ans, x: (g,), jvp="linear",
        batch="elementwise",
        save_inputs=(False,), save_ans=False, samples=[(_rand(3, 4),)],
        doc="A copy of x that shares no storage with it (np.copy); t.copy() and t.clone().")
    registry.register_function("clone", copy, samples=[(_rand(3, 4),)])

    rearrange.register(registry)     # tensordot, cumsum, sort, pad, take, ... (rearrange.py)
    # -- more families, each in its own module (they import this module's helpers) -----
    from . import joining
    joining.register(registry)
    from . import statistics
    statistics.register(registry)
    from . import numerics
    numerics.register(registry)
    from . import aliases, assembly, nanfunctions
    aliases.register(registry)       # concat, permute_dims, cumulative_sum, ... (aliases.py)
    nanfunctions.register(registry)  # nanmax, nanmin, nanprod, nancumsum, nancumprod
    assembly.register(registry)      # block, choose, insert, partition, ... (assembly.py)
    from . import writers
    writers.register(registry)       # copyto, fill_diagonal, place, put, putmask
