"""Tensor constructors (NumPy names). None of these records a graph.

The default floating dtype (``set_default_dtype``) is the dtype of floats made from
Python data: ``tensor([1., 2.])``, ``zeros(3)``, ``full(2, 0.5)``, ``arange(0., 1., .1)``,
the samplers of ``tapegrad.random``, the parameters of ``tg.nn`` layers. NumPy arrays,
NumPy scalars and tensors keep their dtype, and an explicit ``dtype=`` wins.
"""

import numpy as np

from ._engine import TensorBase, get_device, get_tracer, is_grad_enabled, new_tensor, stack_nested

_FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
# NOTE: process-wide, as torch's: a plain global, not per thread or task.
_default_float = np.dtype(np.float64)


def set_default_dtype(dtype):
    """Make ``dtype`` (float16, float32 or float64) the dtype of floats made from Python
    data by creation functions, the samplers of ``tg.random`` and ``tg.nn`` layers'
    parameters (torch.set_default_dtype). Process-wide; float64 (NumPy's) until changed.
    Other dtypes raise TypeError. Arrays and tensors keep their dtype; ``dtype=`` wins.

    >>> import tapegrad as tg
    >>> tg.set_default_dtype(tg.float32)
    >>> tg.tensor([1.0, 2.0]).dtype, tg.zeros(2, 3).dtype, tg.tensor([1, 2]).dtype
    (dtype('float32'), dtype('float32'), dtype('int64'))
    >>> tg.set_default_dtype(tg.float64)
    """
    global _default_float
    if dtype is None or isinstance(dtype, bool):
        # NOTE: np.dtype(None) is float64: None must not quietly mean "reset".
        raise TypeError(f"set_default_dtype: expected float16, float32 or float64, got {dtype!r}")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"set_default_dtype: expected float16, float32 or float64, "
                        f"got {dtype!r}") from None
    if dt not in _FLOAT_DTYPES:
        raise TypeError(f"set_default_dtype: only floating-point types float16, float32 and "
                        f"float64 can be the default, got {dt}")
    _default_float = dt


def get_default_dtype():
    """The default floating dtype (a numpy.dtype; float64 unless set_default_dtype changed
    it).

    >>> import tapegrad as tg
    >>> tg.get_default_dtype()
    dtype('float64')
    """
    return _default_float


def default_float_dtype():
    """The default floating dtype, for code that creates floats without a dtype= (library
    code: tapegrad.random, tg.nn layers). Unlike get_default_dtype() it tells tg.compile
    that what is being recorded depends on it: a compiled function records again after
    set_default_dtype instead of replaying tensors of the old dtype."""
    tracer = get_tracer()
    if tracer is not None:
        tracer.guard(get_default_dtype)
    return _default_float


def _resolve(dtype):
    """dtype= as given, or the default floating dtype when it is None."""
    return default_float_dtype() if dtype is None else np.dtype(dtype)


def _is_python_data(data):
    # NOTE: NumPy scalars (np.float64 is a subclass of float) and arrays keep their dtype,
    # as torch keeps a numpy array's; lists and Python numbers follow the default.
    return not isinstance(data, (np.ndarray, np.generic, TensorBase))


def _host_array(data, dtype, copy):
    python_data = dtype is None and _is_python_data(data)
    if isinstance(data, TensorBase):
        data = data.device.to_numpy(data._data)
    arr = np.array(data, dtype=dtype, copy=True) if copy else np.asarray(data, dtype=dtype)
    if arr.dtype.kind not in "biufc":
        raise TypeError(f"tensor: unsupported data of dtype {arr.dtype} (numbers and booleans only)")
    if python_data and arr.dtype == np.float64:
        target = default_float_dtype()
        if target != arr.dtype and not _holds_float64(data):
            arr = arr.astype(target)
    return arr


def _holds_float64(data):
    """Whether nested lists hold a float64 array, NumPy scalar or tensor: then the result
    is float64 whatever the default, as torch infers (a Python float is "the default", a
    numpy float64 is float64). Runs only when the default is not float64."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, (np.ndarray, np.generic, TensorBase)):
            if item.dtype == np.float64:
                return True
    return False


def _place(arr, device, requires_grad):
    dev = get_device(device)
    return new_tensor(dev.asarray(arr), dev, requires_grad)


def _is_size(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _sizes_and_options(name, args, shape, dtype, device, requires_grad):
    """Split a creation function's positionals into (shape, dtype, device, requires_grad).

    ``zeros(2, 3)`` is torch's size varargs (NumPy raises: its second positional is a
    dtype), ``zeros((2, 3), np.float32)`` and ``zeros(2, np.float32)`` keep NumPy's
    meaning. After the shape come dtype, device, requires_grad, as before; ``shape=`` is
    NumPy's keyword."""
    if shape is not None:
        if args:
            raise TypeError(f"{name}: shape given both by position and by keyword")
        args = (shape,)
    if not args:
        raise TypeError(f"{name}: missing the shape (zeros((2, 3)) or zeros(2, 3))")
    n = 0
    while n < len(args) and _is_size(args[n]):
        n += 1
    if n >= 2:
        shape, rest = tuple(int(s) for s in args[:n]), args[n:]
    else:
        shape, rest = args[0], args[1:]
    if len(rest) > 3:
        raise TypeError(f"{name}: too many positional arguments {args!r} (after the shape: "
                        f"dtype, device, requires_grad)")
    given = dict(zip(("dtype", "device", "requires_grad"), rest))
    for key, default in (("dtype", dtype), ("device", device), ("requires_grad", requires_grad)):
        if key in given and default not in (None, False):
            raise TypeError(f"{name}: {key} given both by position and by keyword")
    return (_shape(shape), given.get("dtype", dtype), given.get("device", device),
            given.get("requires_grad", requires_grad))


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (nested lists, scalars, arrays, tensors).

    Floats from Python data get the default dtype (float64 like NumPy, unless
    set_default_dtype changed it); arrays and tensors keep theirs, as in NumPy and torch.

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


def zeros(*sizes, shape=None, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros: ``zeros((2, 3))`` or ``zeros(2, 3)``; the default dtype unless
    ``dtype=`` (``zeros(2, tg.float32)``: a second positional that is not an int is the
    dtype, as in NumPy).

    >>> import tapegrad as tg
    >>> tg.zeros((2, 3)).shape, tg.zeros(2, 3).shape
    ((2, 3), (2, 3))
    """
    shape, dtype, device, requires_grad = _sizes_and_options(
        "zeros", sizes, shape, dtype, device, requires_grad)
    dev = get_device(device)
    return new_tensor(dev.zeros(shape, _resolve(dtype)), dev, requires_grad)


def ones(*sizes, shape=None, dtype=None, device=None, requires_grad=False):
    """A tensor of ones: ``ones((2, 3))`` or ``ones(2, 3)`` (see zeros).

    >>> import tapegrad as tg
    >>> tg.ones(2, requires_grad=True)
    tensor([1., 1.], requires_grad=True)
    """
    shape, dtype, device, requires_grad = _sizes_and_options(
        "ones", sizes, shape, dtype, device, requires_grad)
    dev = get_device(device)
    return new_tensor(dev.ones(shape, _resolve(dtype)), dev, requires_grad)


def empty(*sizes, shape=None, dtype=None, device=None, requires_grad=False):
    """A tensor whose values are to be overwritten: ``empty((2, 3))`` or ``empty(2, 3)``
    (see zeros). Its values are unspecified (today zeros: do not rely on it).

    >>> import tapegrad as tg
    >>> tg.empty(2, 3).shape
    (2, 3)
    """
    shape, dtype, device, requires_grad = _sizes_and_options(
        "empty", sizes, shape, dtype, device, requires_grad)
    dev = get_device(device)
    # NOTE: zeros, not uninitialised memory: stale values (another tensor's data, a NaN)
    # must not leak into a result when code reads before it writes.
    return new_tensor(dev.zeros(shape, _resolve(dtype)), dev, requires_grad)


def empty_like(prototype, dtype=None, *, device=None, requires_grad=False):
    """A tensor with `prototype`'s shape, and its dtype and device unless given, whose
    values are to be overwritten (see empty).

    >>> import numpy as np, tapegrad as tg
    >>> tg.empty_like(tg.ones(2, dtype=np.float32)).dtype
    dtype('float32')
    """
    x = prototype if isinstance(prototype, TensorBase) else asarray(prototype)
    dev = get_device(device) if device is not None else x.device
    dt = x.dtype if dtype is None else np.dtype(dtype)
    return new_tensor(dev.zeros(tuple(x.shape), dt), dev, requires_grad)


def full(shape, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor filled with `fill_value`; a Python float fill gets the default dtype, an
    int fill int64, a bool bool (NumPy's and torch's rules).

    >>> import tapegrad as tg
    >>> tg.full((2,), 7.0)
    tensor([7., 7.])
    """
    if dtype is None and isinstance(fill_value, float) and not isinstance(fill_value, np.generic):
        dtype = default_float_dtype()
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
    """Evenly spaced values, as numpy.arange; with a Python float among the arguments the
    values have the default dtype (as torch), with ints only int64.

    >>> import tapegrad as tg
    >>> tg.arange(4)
    tensor([0, 1, 2, 3])
    """
    arr = np.arange(start, stop, step, dtype=dtype) if stop is not None else np.arange(start, dtype=dtype)
    if dtype is None and arr.dtype == np.float64 and all(
            _is_python_data(v) for v in (start, stop, step)):
        # NOTE: the values are computed in float64 (NumPy's count of steps) and then cast.
        arr = arr.astype(default_float_dtype(), copy=False)
    return _place(arr, device, requires_grad)


def linspace(start, stop, num=50, dtype=None, device=None, requires_grad=False):
    """`num` evenly spaced values from start to stop, as numpy.linspace (the default dtype
    for Python numbers, as torch).

    >>> import tapegrad as tg
    >>> tg.linspace(0, 1, 3)
    tensor([0. , 0.5, 1. ])
    """
    arr = np.linspace(start, stop, num, dtype=dtype)
    if dtype is None and arr.dtype == np.float64 and _is_python_data(start) and \
            _is_python_data(stop):
        arr = arr.astype(default_float_dtype(), copy=False)
    return _place(arr, device, requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    """The identity matrix, as numpy.eye (the default dtype unless ``dtype=``).

    >>> import tapegrad as tg
    >>> tg.eye(2)
    tensor([[1., 0.],
            [0., 1.]])
    """
    return _place(np.eye(n, m, dtype=_resolve(dtype)), device, requires_grad)


def _shape(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def iscomplexobj(x):
    """Whether x has a complex dtype (not whether any value has an imaginary part), as
    numpy.iscomplexobj.

    >>> import numpy as np, tapegrad as tg
    >>> tg.iscomplexobj(tg.tensor(np.array([1 + 0j]))), tg.iscomplexobj(tg.ones(2))
    (True, False)
    """
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return bool(np.iscomplexobj(x))
    return np.dtype(dtype).kind == "c"
