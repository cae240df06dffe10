"""tapegrad.Tensor: the public tensor class.

The engine half (fields, operators, backward) is the Cython class ``TensorBase``. This
Python subclass exists so plugins can add methods (``t.sum()``, ``t.reshape()``) when they
register: extension types cannot grow attributes at run time, and methods must be real
attributes (no ``__getattr__`` fallback on the per-op path).
"""

import numpy as np

from . import _engine
from ._engine import TensorBase, get_device, new_tensor
from .function import Function

_UFUNC_ALIASES = {"absolute": "abs", "true_divide": "divide"}


class Tensor(TensorBase):
    """An n-dimensional array that records the ops computed from it.

    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> y = x + x + 1.0
    >>> y.backward(tg.ones(3))
    >>> x.grad
    tensor([2., 2., 2.])
    """

    __slots__ = ()

    def __init__(self, *args, **kwargs):
        # NOTE: the engine makes tensors through tp_new alone and never calls __init__, so
        # this runs only for a user's `tg.Tensor(...)`, which used to return a tensor with
        # no data. It is refused rather than guessed: torch.Tensor(2, 3) is a shape but
        # torch.Tensor([2., 3.]) is data (docs/tensors.md).
        raise TypeError(
            "tg.Tensor(...) does not build a tensor; use tg.tensor(data) for data "
            "(tg.tensor([1., 2.])), or tg.zeros(shape) / tg.ones(shape) for a shape "
            "(tg.zeros((2, 3)))")

    def __repr__(self):
        _engine.check_read(self, "repr()")
        arr = self.device.to_numpy(self._data)
        body = np.array2string(arr, separator=", ", prefix="tensor(")
        extras = []
        if arr.dtype not in (np.float64, np.int64, np.bool_):
            extras.append(f"dtype={arr.dtype}")
        if self.device.name != "cpu":
            extras.append(f"device='{self.device.name}'")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    def __format__(self, spec):
        if self.size == 1 and spec:
            return format(self.item(), spec)
        return repr(self)

    def __reduce__(self):
        raise TypeError("tapegrad tensors are not pickled; use tg.save(obj, path) (NumPy .npz)")

    def __deepcopy__(self, memo):
        # Like PyTorch: only leaves can be deep-copied (a copy of a graph has no meaning).
        if not self.is_leaf:
            raise RuntimeError(
                "only leaf tensors can be deep-copied; use .detach() first to copy the value")
        copy = new_tensor(self.device.copy(self._data), self.device, self.requires_grad)
        if self.grad is not None:
            copy.grad = new_tensor(self.device.copy(self.grad._data), self.device)
        memo[id(self)] = copy
        return copy

    def __copy__(self):
        return self.__deepcopy__({}) if self.is_leaf else self.detach()

    def to(self, device=None, dtype=None):
        """This tensor on `device` ("cpu", "cuda") and/or as `dtype`; differentiable, and
        self if nothing changes. As in torch, ``t.to(dtype)`` (a dtype first) works too.

        >>> import numpy as np, tapegrad as tg
        >>> tg.tensor([1.0, 2.0]).to(np.float32)
        tensor([1., 2.], dtype=float32)
        """
        if device is not None and not isinstance(device, (str, _engine.Device)):
            if dtype is not None:
                raise TypeError(f"Tensor.to: dtype given twice ({device!r} and dtype={dtype!r})")
            device, dtype = None, device
        out = self
        if dtype is not None and np.dtype(dtype) != self.dtype:
            out = out.astype(np.dtype(dtype))
        dev = get_device(device) if device is not None else out.device
        if dev is out.device:
            return out
        return _ToDevice.apply(out, dev)

    def __round__(self, ndigits=None):
        """``round(t)`` and ``round(t, ndigits)``: ``tg.round`` (halves to even), as for a
        NumPy array."""
        return _engine.lookup("round")(self, 0 if ndigits is None else ndigits)

    def cpu(self):
        """This tensor on the cpu."""
        return self.to("cpu")

    def cuda(self):
        """This tensor on the GPU (needs the tapegrad-cuda plugin)."""
        return self.to("cuda")

    # -- PyTorch's method spellings ---------------------------------------------------
    # Note: [PyTorch methods]
    # Only where NumPy's ndarray has no method of that name, or where its method would
    # raise for the arguments PyTorch takes (flatten(1), size()), so that no NumPy-valid
    # call changes meaning. docs/coming-from-pytorch.md lists the spellings that NumPy
    # and PyTorch give different meanings (x.repeat, x.max(1), x.view(dtype) ...).
    # NOTE: the core's doctests run with the core alone (tests/test_isolation.py), so a
    # method built on a plugin's op (reshape, transpose, power, equal, ...) shows its
    # example in words; docs/coming-from-pytorch.md runs them all.

    @property
    def real(self):
        """The real part (``tg.real``: for a complex tensor a view of its real parts, as
        NumPy's and PyTorch's ``.real``; a real tensor itself).

        >>> import numpy as np, tapegrad as tg
        >>> tg.tensor(np.array([1 + 2j])).real
        tensor([1.])
        """
        return _engine.lookup("real")(self)

    @property
    def imag(self):
        """The imaginary part (``tg.imag``: for a complex tensor a view of its imaginary
        parts; zeros for a real one, as NumPy's ``.imag``). With tapegrad-elementwise
        (``Tensor.imag`` in docs/ops.md)."""
        return _engine.lookup("imag")(self)

    @property
    def size(self):
        """The number of elements, an int as NumPy's ``ndarray.size`` (``x.size == 6``),
        which can also be called as PyTorch's ``size()``: ``x.size()`` is the shape,
        ``x.size(d)`` the length of axis d (negative d counts from the end).

        >>> import tapegrad as tg
        >>> x = tg.zeros((2, 3))
        >>> x.size, x.size(), x.size(-1)
        (6, (2, 3), 3)
        """
        return _Size(_BASE_SIZE.__get__(self), self.shape)

    def numel(self):
        """The number of elements (``x.size``), as PyTorch's ``numel()``.

        >>> import tapegrad as tg
        >>> tg.zeros((2, 3)).numel()
        6
        """
        return _BASE_SIZE.__get__(self)

    def dim(self):
        """The number of axes (``x.ndim``), as PyTorch's ``dim()``.

        >>> import tapegrad as tg
        >>> tg.zeros((2, 3)).dim()
        2
        """
        return self.ndim

    def view(self, *shape):
        """PyTorch's ``view``: this tensor's data in another shape without a copy
        (``x.view(3, 2)``, ``x.view((3, 2))``, -1 for one inferred axis; differentiable,
        shares storage). As PyTorch, it raises RuntimeError where the layout cannot be
        viewed in that shape without a copy (a transposed tensor): use ``reshape``,
        which copies then. ``x.view(dtype)`` reinterprets the bytes (NumPy's and
        PyTorch's ``view(dtype)``): not differentiable, so refused for a tensor that
        requires grad while grad mode is on; the result shares storage and version.

        ``tg.arange(6.0).view(2, -1).shape == (2, 3)``; and the bits of a float32 one:

        >>> import numpy as np, tapegrad as tg
        >>> tg.tensor([1.0], dtype=np.float32).view(np.int32).item()
        1065353216
        """
        if not shape:
            shape = self.shape          # NumPy's view(): the same shape and dtype
        elif len(shape) == 1:
            dtype = _as_dtype(shape[0])
            if dtype is not None:
                return self._view_dtype(dtype)
            if isinstance(shape[0], (tuple, list)):
                shape = tuple(shape[0])
        target = _viewable_shape(self, shape)
        return _engine.lookup("reshape")(self, target)

    def _view_dtype(self, dtype):
        if self.requires_grad and _engine.is_grad_enabled():
            raise TypeError(
                f"view({dtype}): reinterpreting the bytes of a {self.dtype} tensor that "
                f"requires grad is not differentiable; use .detach().view({dtype}) for the "
                f"bits, or .astype({dtype}) to convert the values")
        try:
            data = self._data.view(dtype)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"view({dtype}): {exc} (tensor shape {self.shape} "
                            f"{self.dtype})") from exc
        return _engine.detached_view(data, self)

    def view_as(self, other):
        """``self.view(other.shape)``, as PyTorch's ``view_as``.

        Example: ``tg.arange(6.0).view_as(tg.zeros((3, 2))).shape == (3, 2)``.
        """
        return self.view(tuple(other.shape))

    def unsqueeze(self, dim):
        """A new axis of length 1 at `dim` (``tg.expand_dims``), as PyTorch's
        ``unsqueeze``: dim from -ndim-1 to ndim; differentiable.

        Example: ``tg.zeros((2, 3)).unsqueeze(1).shape == (2, 1, 3)``, and ``unsqueeze(-1)``
        gives ``(2, 3, 1)``.
        """
        import tapegrad
        return tapegrad.expand_dims(self, dim)

    def expand(self, *sizes):
        """PyTorch's ``expand``: this tensor broadcast to `sizes` (ints or one tuple; -1
        keeps an axis' length; new axes go in front), a read-only broadcast view with no
        copy; differentiable (the gradient sums over the broadcast axes).

        >>> import tapegrad as tg
        >>> tg.zeros((3, 1)).expand(2, -1, 4).shape
        (2, 3, 4)
        """
        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
            sizes = tuple(sizes[0])
        shape = self.shape
        lead = len(sizes) - len(shape)
        if lead < 0:
            raise ValueError(
                f"expand: the number of sizes ({len(sizes)}) must be at least the tensor's "
                f"number of axes ({len(shape)}); tensor shape {shape}, sizes {tuple(sizes)}")
        target = []
        for i, s in enumerate(sizes):
            s = int(s)
            if s == -1:
                if i < lead:
                    raise ValueError(
                        f"expand: -1 is not allowed for a new leading axis (position {i}); "
                        f"tensor shape {shape}, sizes {tuple(sizes)}")
                s = shape[i - lead]
            target.append(s)
        return _engine.lookup("broadcast_to")(self, tuple(target))

    def expand_as(self, other):
        """``self.expand(other.shape)``, as PyTorch's ``expand_as``.

        >>> import tapegrad as tg
        >>> tg.zeros(3).expand_as(tg.zeros((2, 3))).shape
        (2, 3)
        """
        return self.expand(tuple(other.shape))

    def permute(self, *dims):
        """The axes in the order `dims` (ints or one tuple), as PyTorch's ``permute``
        (``tg.transpose(x, dims)``); differentiable.

        Example: ``tg.zeros((2, 3, 4)).permute(2, 0, 1).shape == (4, 2, 3)``.
        """
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = dims[0]
        return _engine.lookup("transpose")(self, tuple(int(d) for d in dims))

    def flatten(self, *args, **kwargs):
        """NumPy's ``flatten()`` (one axis); with PyTorch's ``flatten(start_dim,
        end_dim=-1)`` (an int first, or those keywords: what NumPy's ``flatten(order)``
        rejects), the axes start_dim..end_dim (inclusive) merged into one. Differentiable.

        Example: for x of shape (2, 3, 4, 5), ``x.flatten()`` has shape (120,),
        ``x.flatten(1)`` (2, 60) and ``x.flatten(1, 2)`` (2, 12, 5).
        """
        if (args and isinstance(args[0], (int, np.integer)) and not isinstance(args[0], bool)) \
                or "start_dim" in kwargs or "end_dim" in kwargs:
            return self._flatten_dims(*args, **kwargs)
        import tapegrad
        return tapegrad.flatten(self, *args, **kwargs)

    def _flatten_dims(self, start_dim=0, end_dim=-1):
        shape = self.shape
        n = max(len(shape), 1)          # a 0-d tensor flattens to shape (1,), as in torch
        start, end = (_axis_index(d, n, "flatten") for d in (start_dim, end_dim))
        if start > end:
            raise ValueError(f"flatten: start_dim ({start_dim}) comes after end_dim "
                             f"({end_dim}) for a tensor of shape {shape}")
        if not shape:
            return _engine.lookup("reshape")(self, (1,))
        merged = int(np.prod(shape[start:end + 1], dtype=np.int64))
        return _engine.lookup("reshape")(self, shape[:start] + (merged,) + shape[end + 1:])

    def repeat_interleave(self, repeats, dim=None, *, output_size=None):
        """Each entry repeated `repeats` times (an int, or one count per entry) along
        `dim` (None: of the flattened tensor), as PyTorch's ``repeat_interleave`` and
        NumPy's ``np.repeat(x, repeats, axis)``; differentiable. (NumPy's and tapegrad's
        ``x.repeat`` is this too; PyTorch's ``x.repeat`` is ``tg.tile``.)

        Example: ``tg.tensor([1.0, 2.0]).repeat_interleave(2)`` is ``[1., 1., 2., 2.]``.
        """
        if isinstance(repeats, TensorBase):
            repeats = np.asarray(repeats.detach().cpu())
        out = _engine.lookup("repeat")(self, repeats, dim)
        if output_size is not None:
            length = out.shape[0 if dim is None else dim]
            if length != output_size:
                raise ValueError(f"repeat_interleave: output_size={output_size} but the "
                                 f"result has {length} entries along dim {dim}")
        return out

    def contiguous(self):
        """This tensor if its data is C-contiguous, else a C-contiguous copy, as
        PyTorch's ``contiguous()``; differentiable.

        Example: ``x.T.view(-1)`` raises, ``x.T.contiguous().view(-1)`` does not.
        """
        if _c_contiguous(self._data):
            return self
        out = _engine.lookup("copy")(self)
        if not _c_contiguous(out._data):     # np.copy keeps an axis order
            reshape = _engine.lookup("reshape")
            out = reshape(reshape(out, (-1,)), self.shape)
        return out

    def pow(self, exponent):
        """``self ** exponent`` (``tg.power``), as PyTorch's ``pow``.

        Example: ``tg.tensor([2.0, 3.0]).pow(2)`` is ``[4., 9.]``.
        """
        return _engine.lookup("power")(self, exponent)

    def eq(self, other):
        """``self == other`` elementwise (a bool tensor), as PyTorch's ``eq``.

        Example: ``tg.tensor([1.0, 2.0]).eq(2.0)`` is ``[False, True]``.
        """
        return _engine.lookup("equal")(self, other)

    def ne(self, other):
        """``self != other`` elementwise, as PyTorch's ``ne``.

        Example: ``tg.tensor([1.0, 2.0]).ne(2.0)`` is ``[True, False]``.
        """
        return _engine.lookup("not_equal")(self, other)

    def lt(self, other):
        """``self < other`` elementwise, as PyTorch's ``lt``.

        Example: ``tg.tensor([1.0, 2.0]).lt(2.0)`` is ``[True, False]``.
        """
        return _engine.lookup("less")(self, other)

    def le(self, other):
        """``self <= other`` elementwise, as PyTorch's ``le``.

        Example: ``tg.tensor([1.0, 2.0]).le(2.0)`` is ``[True, True]``.
        """
        return _engine.lookup("less_equal")(self, other)

    def gt(self, other):
        """``self > other`` elementwise, as PyTorch's ``gt``.

        Example: ``tg.tensor([1.0, 2.0]).gt(1.0)`` is ``[False, True]``.
        """
        return _engine.lookup("greater")(self, other)

    def ge(self, other):
        """``self >= other`` elementwise, as PyTorch's ``ge``.

        Example: ``tg.tensor([1.0, 2.0]).ge(2.0)`` is ``[False, True]``.
        """
        return _engine.lookup("greater_equal")(self, other)

    def type_as(self, other):
        """This tensor as other's dtype (``astype``; self when it already is), as
        PyTorch's ``type_as``; differentiable to a float dtype.

        >>> import numpy as np, tapegrad as tg
        >>> tg.tensor([1, 2]).type_as(tg.zeros(1, dtype=np.float32)).dtype
        dtype('float32')
        """
        return _cast(self, other.dtype)

    def float(self):
        """This tensor as float32 (self when it already is), as PyTorch's ``float()``;
        differentiable.

        >>> import tapegrad as tg
        >>> tg.tensor([1.5]).float().dtype
        dtype('float32')
        """
        return _cast(self, np.float32)

    def double(self):
        """This tensor as float64 (self when it already is), as PyTorch's ``double()``.

        >>> import tapegrad as tg
        >>> tg.tensor([1]).double().dtype
        dtype('float64')
        """
        return _cast(self, np.float64)

    def half(self):
        """This tensor as float16 (self when it already is), as PyTorch's ``half()``.

        >>> import tapegrad as tg
        >>> tg.tensor([1.5]).half().dtype
        dtype('float16')
        """
        return _cast(self, np.float16)

    def long(self):
        """This tensor as int64 (truncated toward zero, as astype), as PyTorch's
        ``long()``; the result gets no gradient.

        >>> import tapegrad as tg
        >>> tg.tensor([1.7, -1.7]).long().tolist()
        [1, -1]
        """
        return _cast(self, np.int64)

    def int(self):
        """This tensor as int32, as PyTorch's ``int()``; no gradient.

        >>> import tapegrad as tg
        >>> tg.tensor([2.9]).int().dtype
        dtype('int32')
        """
        return _cast(self, np.int32)

    def bool(self):
        """This tensor as bool (nonzero is True), as PyTorch's ``bool()``; no gradient.

        >>> import tapegrad as tg
        >>> tg.tensor([0.0, 0.5]).bool().tolist()
        [False, True]
        """
        return _cast(self, np.bool_)

    # -- NumPy interoperability (NEP 13 / NEP 18) --------------------------------------
    # np.exp(t), np.sum(t), ndarray + t dispatch to tapegrad ops when one is registered.
    # Anything else falls back to NumPy on the arrays, but only when no input requires
    # grad: computing through NumPy would silently drop that gradient.

    __array_priority__ = 1000

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = _UFUNC_ALIASES.get(ufunc.__name__, ufunc.__name__)
        op = _engine.ops_table().get(name)
        if op is not None and method == "__call__" and not kwargs:
            return op(*inputs)
        if method == "__call__" and not kwargs:
            import tapegrad     # a registered function of the ufunc's name (np.divmod)
            if name in tapegrad.registry().functions:
                return getattr(tapegrad, name)(*inputs)
        return _numpy_fallback(f"numpy.{ufunc.__name__}", getattr(ufunc, method), inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func in _SHAPE_QUERIES and len(args) == 1 and not kwargs:
            # np.shape(t), np.ndim(t), np.size(t): no conversion to an array (a copy on a
            # device, and refused for a batched tensor inside tg.vmap)
            return _SHAPE_QUERIES[func](args[0])
        import tapegrad
        target = getattr(tapegrad, func.__name__, None)
        if target is not None and (isinstance(target, _engine.Op)
                                   or func.__name__ in tapegrad.registry().functions):
            fdef = tapegrad.registry().functions.get(func.__name__)
            if func.__name__ in _NUMPY_IN_PLACE and getattr(fdef, "writes_into", None) is None:
                # NOTE: NumPy's writes into its argument and returns None; tapegrad's
                # returns a new tensor, so dispatching would leave the tensor unchanged.
                # (tapegrad's writers -- tg.copyto, tg.put, ... -- write in place too.)
                raise TypeError(
                    f"numpy.{func.__name__} modifies its argument in place; tapegrad's "
                    f"tg.{func.__name__} returns a new tensor instead: write "
                    f"t = tg.{func.__name__}(t, ...)")
            return target(*args, **kwargs)
        return _numpy_fallback(f"numpy.{func.__name__}", func, args, kwargs)


_SHAPE_QUERIES = {np.shape: lambda t: tuple(t.shape), np.ndim: lambda t: t.ndim,
                  np.size: lambda t: int(TensorBase.size.__get__(t))}

_BASE_SIZE = TensorBase.size          # the engine's int; Tensor.size wraps it


class _Size(int):
    """A tensor's ``size``: NumPy's int, callable as PyTorch's ``size(dim=None)``."""

    def __new__(cls, n, shape):
        self = super().__new__(cls, n)
        self._shape = shape
        return self

    def __call__(self, dim=None):
        if dim is None:
            return self._shape
        return self._shape[_axis_index(dim, len(self._shape), "size")]

    def __reduce__(self):
        return (int, (int(self),))       # a plain int once it leaves the tensor


def _axis_index(dim, ndim, what):
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{what}: dim must be an int, got {type(dim).__name__} {dim!r}")
    if not -ndim <= dim < ndim:
        raise IndexError(f"{what}: dim {dim} is out of range for a tensor with {ndim} axes "
                         f"(expected -{ndim} to {ndim - 1})")
    return int(dim) % ndim


def _as_dtype(arg):
    """np.dtype(arg) when arg names a dtype (np.float32, 'float32', float), else None."""
    if isinstance(arg, np.dtype):
        return arg
    if isinstance(arg, str) or (isinstance(arg, type) and issubclass(arg, (np.generic, float,
                                                                          int, complex))):
        try:
            return np.dtype(arg)
        except TypeError:
            return None
    return None


def _c_contiguous(arr):
    flags = getattr(arr, "flags", None)
    return True if flags is None else bool(flags.c_contiguous)


def _viewable_shape(t, shape):
    """`shape` (-1 resolved) if t's data can be viewed in it without a copy; else
    ValueError (the sizes differ) or RuntimeError (a copy is needed), as torch's view."""
    try:
        shape = tuple(int(s) for s in shape)
        # zero strides: NumPy resolves -1 and checks the sizes without touching the data
        probe = np.broadcast_to(np.empty((), np.int8), t.shape)
        target = np.reshape(probe, shape).shape
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"view: shape {shape} is invalid for a tensor of shape {t.shape} "
                        f"({_BASE_SIZE.__get__(t)} elements): {exc}") from exc
    arr = t._data
    if isinstance(arr, np.ndarray):
        ok = _reshapes_without_copy(arr, target)
    else:
        ok = _c_contiguous(arr)
    if not ok:
        raise RuntimeError(
            f"view: a tensor of shape {t.shape} with strides {getattr(arr, 'strides', '?')} "
            f"(not contiguous: transposed, sliced or broadcast) cannot be viewed as shape "
            f"{target} without a copy; use .reshape({', '.join(map(str, target))}) (copies "
            f"where needed) or .contiguous().view(...)")
    return target


def _reshapes_without_copy(arr, shape):
    try:
        np.reshape(arr, shape, copy=False)
        return True
    except ValueError:
        return False
    except TypeError:                   # NumPy < 2.1: no copy= keyword
        probe = arr.view()
        try:
            probe.shape = shape
        except AttributeError:
            return False
        return True


def _cast(t, dtype):
    dtype = np.dtype(dtype)
    return t if t.dtype == dtype else _engine.lookup("astype")(t, dtype)


# NumPy functions that write into their first argument (and return None): never
# dispatched to a functional tapegrad function of the same name, only to a tapegrad
# function that writes in place too (registered with writes_into).
_NUMPY_IN_PLACE = frozenset({"put_along_axis", "put", "place", "putmask", "copyto",
                             "fill_diagonal"})


def _numpy_fallback(what, func, args, kwargs):
    needs_grad = []

    def unwrap(obj):
        if isinstance(obj, TensorBase):
            if obj.requires_grad and _engine.is_grad_enabled():
                needs_grad.append(obj)
            return np.asarray(obj)
        if isinstance(obj, (list, tuple)):
            return type(obj)(unwrap(o) for o in obj)
        return obj

    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    outs = out if isinstance(out, tuple) else () if out is None else (out,)
    # NOTE: NumPy writing into a tensor's array (out=t) would bypass its version counter,
    # so a node that saved t would backpropagate its new value silently. Compute without
    # out= and store into the tensors with setitem, which bumps the version (and refuses,
    # or records, as any in-place write does).
    into_tensors = any(isinstance(o, TensorBase) for o in outs)
    args = unwrap(args)
    kwargs = {k: unwrap(v) for k, v in kwargs.items()}
    if out is not None and not into_tensors:
        kwargs["out"] = out
    result = func(*args, **kwargs)
    if needs_grad and _carries_float(result):
        raise TypeError(
            f"{what} has no tapegrad op, and an input requires grad (shape "
            f"{needs_grad[0].shape}): computing it in NumPy would silently drop that gradient. "
            f"Use tapegrad ops, or .detach() the input if no gradient is wanted.")
    if not into_tensors:
        return result
    results = result if isinstance(result, tuple) else (result,)
    for o, r in zip(outs, results):
        o[...] = r
    return out if isinstance(result, tuple) else outs[0]   # as NumPy: out=(t,) returns t


def _carries_float(result):
    """Could a gradient flow through `result`? Not through shapes, counts, indexes or
    booleans (np.shape, np.argmax, np.isfinite, np.allclose): only floats carry one."""
    if isinstance(result, (tuple, list)):
        return any(_carries_float(r) for r in result)
    if isinstance(result, (bool, int, np.bool_, np.integer)) or result is None:
        return False
    dtype = getattr(result, "dtype", None)
    return dtype is None or dtype.kind not in "biu"


class _ToDevice(Function):
    replay_backward = True          # a transfer back, whatever the values

    @staticmethod
    def forward(ctx, x, device):
        ctx.source = x.device
        return new_tensor(device.asarray(x.device.to_numpy(x._data)), device)

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx.source), None


_engine.set_tensor_class(Tensor)
