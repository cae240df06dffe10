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
        import tapegrad
        target = getattr(tapegrad, func.__name__, None)
        if target is not None and (isinstance(target, _engine.Op)
                                   or func.__name__ in tapegrad.registry().functions):
            if func.__name__ in _NUMPY_IN_PLACE:
                # NOTE: NumPy's writes into its argument and returns None; tapegrad's
                # returns a new tensor, so dispatching would leave the tensor unchanged.
                raise TypeError(
                    f"numpy.{func.__name__} modifies its argument in place; tapegrad's "
                    f"tg.{func.__name__} returns a new tensor instead: write "
                    f"t = tg.{func.__name__}(t, ...)")
            return target(*args, **kwargs)
        return _numpy_fallback(f"numpy.{func.__name__}", func, args, kwargs)


# NumPy functions that write into their first argument (and return None): never
# dispatched to a functional tapegrad function of the same name.
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
