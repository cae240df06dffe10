"""Tensor constructors (NumPy names). None of these records a graph."""

import numpy as np

from ._engine import TensorBase, get_device, is_grad_enabled, new_tensor, stack_nested


def _host_array(data, dtype, copy):
    if isinstance(data, TensorBase):
        data = data.device.to_numpy(data._data)
    arr = np.array(data, dtype=dtype, copy=True) if copy else np.asarray(data, dtype=dtype)
    if arr.dtype.kind not in "biufc":
        raise TypeError(f"tensor: unsupported data of dtype {arr.dtype} (numbers and booleans only)")
    return arr


def _place(arr, device, requires_grad):
    dev = get_device(device)
    return new_tensor(dev.asarray(arr), dev, requires_grad)


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (nested lists, scalars, arrays, tensors).

    Floats default to float64 and other dtypes are kept, as in NumPy.

    >>> import numpy as np, tapegrad as tg
    >>> x = tg.tensor([[1., 2.], [3., 4.]], requires_grad=True)
    >>> x.dtype, x.shape, x.requires_grad
    (dtype('float64'), (2, 2), True)
    >>> tg.tensor(np.ones(3, np.float32)).dtype
    dtype('float32')
    """
    return _place(_host_array(data, dtype, copy=True), device, requires_grad)


def asarray(data, dtype=None, device=None):
    """Like tensor(), but shares memory with a numpy array (or returns a tensor) when it can.

    >>> import numpy as np, tapegrad as tg
    >>> a = np.zeros(2)
    >>> t = tg.asarray(a); a[0] = 5; t.tolist()[0]
    5.0
    """
    stacked = stack_nested(data)     # a list of tensors keeps their graph (tg.stack)
    if stacked is not None:
        data = stacked
    if isinstance(data, TensorBase) and (dtype is None or data.dtype == dtype) and (
            device is None or get_device(device) is data.device):
        return data
    if isinstance(data, TensorBase) and data.requires_grad and is_grad_enabled():
        # NOTE: another dtype or device is differentiable (astype, to), never a copy that
        # silently drops the graph.
        if dtype is not None and data.dtype != dtype:
            data = data.astype(dtype)
        if device is not None and get_device(device) is not data.device:
            data = data.to(device)
        return data
    return _place(_host_array(data, dtype, copy=False), device, False)


def zeros(shape, dtype=np.float64, device=None, requires_grad=False):
    """A tensor of zeros.

    >>> import tapegrad as tg
    >>> tg.zeros((2, 3)).shape
    (2, 3)
    """
    dev = get_device(device)
    return new_tensor(dev.zeros(_shape(shape), np.dtype(dtype)), dev, requires_grad)


def ones(shape, dtype=np.float64, device=None, requires_grad=False):
    """A tensor of ones.

    >>> import tapegrad as tg
    >>> tg.ones(2, requires_grad=True)
    tensor([1., 1.], requires_grad=True)
    """
    dev = get_device(device)
    return new_tensor(dev.ones(_shape(shape), np.dtype(dtype)), dev, requires_grad)


def full(shape, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor filled with `fill_value`.

    >>> import tapegrad as tg
    >>> tg.full((2,), 7.0)
    tensor([7., 7.])
    """
    return _place(np.full(_shape(shape), fill_value, dtype=dtype), device, requires_grad)


def full_like(x, fill_value, dtype=None, requires_grad=False):
    """A tensor like `x` (shape, device, dtype unless given) filled with `fill_value`.

    >>> import tapegrad as tg
    >>> tg.full_like(tg.zeros(2), 3.0)
    tensor([3., 3.])
    """
    return full(x.shape, fill_value, dtype=dtype or x.dtype, device=x.device,
                requires_grad=requires_grad)


def arange(start, stop=None, step=1, dtype=None, device=None, requires_grad=False):
    """Evenly spaced values, as numpy.arange.

    >>> import tapegrad as tg
    >>> tg.arange(4)
    tensor([0, 1, 2, 3])
    """
    arr = np.arange(start, stop, step, dtype=dtype) if stop is not None else np.arange(start, dtype=dtype)
    return _place(arr, device, requires_grad)


def linspace(start, stop, num=50, dtype=None, device=None, requires_grad=False):
    """`num` evenly spaced values from start to stop, as numpy.linspace.

    >>> import tapegrad as tg
    >>> tg.linspace(0, 1, 3)
    tensor([0. , 0.5, 1. ])
    """
    return _place(np.linspace(start, stop, num, dtype=dtype), device, requires_grad)


def eye(n, m=None, dtype=np.float64, device=None, requires_grad=False):
    """The identity matrix, as numpy.eye.

    >>> import tapegrad as tg
    >>> tg.eye(2)
    tensor([[1., 0.],
            [0., 1.]])
    """
    return _place(np.eye(n, m, dtype=dtype), device, requires_grad)


def _shape(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)
