"""The core's own plugin: the ``cpu`` device and the few differentiable primitives the
engine needs to express gradients (accumulation ``add``, un-broadcasting
``sum_to_shape``, ``broadcast_to``, ``astype``, and ``real``, the real part that projects a
complex gradient onto a real input) plus ``zeros_like``/``ones_like``.

It registers through the same hooks as every other plugin.
"""

import operator

import numpy as np

from ._array_kernels import sum_over_added_axis as _sum_over_added_axis
from ._batching import pad_batched
from ._engine import Device, lookup
from ._plugins import Sample, hookimpl


class CpuDevice(Device):
    """The host: arrays are ``numpy.ndarray``; kernels are NumPy functions."""

    def __init__(self):
        super().__init__("cpu", np.ndarray)
        self.rng = np.random.default_rng()

    # NOTE: the methods the engine calls on every op (asarray of a kernel's NumPy scalar,
    # may_share_memory of a view op's output, setitem of `p[...] = p0`) are the NumPy
    # callables themselves, not Python methods that forward to them: the same call
    # without a Python frame, ~1 us each, ~18 per step of a small MLP (W2). Their
    # signatures take the engine's positional arguments as the methods did.
    asarray = staticmethod(np.asarray)          # (obj, dtype=None)

    def to_numpy(self, arr):
        return arr

    def copy(self, arr):
        return arr.copy()

    # NOTE: np.may_share_memory is an __array_function__ dispatcher whose Python
    # dispatch function runs on every call; the engine passes this device's plain
    # ndarrays only, so it calls the C function behind it (the same answer).
    may_share_memory = staticmethod(
        getattr(np.may_share_memory, "_implementation", np.may_share_memory))   # (a, b)

    def copyto(self, dst, src):
        np.copyto(dst, src, casting="same_kind")

    setitem = staticmethod(operator.setitem)    # (arr, index, value): arr[index] = value

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype)

    def ones(self, shape, dtype):
        # np.ones is empty + copyto (two Python frames, one a dispatcher): fill(1) writes
        # the same ones (1 cast to dtype) into the same empty array. The backward's seed.
        out = np.empty(shape, dtype)
        out.fill(1)
        return out

    def random(self, kind, shape, dtype, **params):
        if kind == "uniform":
            out = self.rng.uniform(params["low"], params["high"], shape)
        elif kind == "normal":
            out = self.rng.normal(params["loc"], params["scale"], shape)
        else:
            raise ValueError(f"cpu: unknown distribution '{kind}'")
        return np.asarray(out, dtype=dtype)

    def manual_seed(self, seed):
        self.rng = np.random.default_rng(seed)

    def get_rng_state(self):
        return self.rng.bit_generator.state

    def set_rng_state(self, state):
        self.rng.bit_generator.state = state


_add_reduce = np.add.reduce


def sum_to_shape_kernel(a, shape):
    """Sum `a` over the axes that broadcasting added or stretched, to get `shape`."""
    # The common case (a bias's gradient): one leading axis added, on a float array. Same
    # reduction as below, a.sum(axis=0) (np.add.reduce(a, 0), what ndarray.sum runs), as
    # one C pass in NumPy's order, so its bits (_array_kernels.sum_over_added_axis: None
    # where it does not apply).
    out = _sum_over_added_axis(a, shape)
    if out is not None:
        return out
    shape = tuple(shape)
    lead = a.ndim - len(shape)
    if lead == 1 and a.shape[1:] == shape:
        return _add_reduce(a, 0)
    if lead < 0:
        raise ValueError(f"cannot sum shape {a.shape} down to the longer shape {shape}")
    axes = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and a.shape[lead + i] != 1)
    for i, s in enumerate(shape):
        if s != 1 and a.shape[lead + i] != s:
            raise ValueError(f"cannot sum shape {a.shape} down to shape {shape}")
    out = a.sum(axis=axes, keepdims=True) if axes else a
    return out.reshape(shape) if lead else out


def _sum_to_shape_vjp(g, ans, x, *, shape):
    return (lookup("broadcast_to")(g, shape=x.shape),)


def _broadcast_to_vjp(g, ans, x, *, shape):
    return (lookup("sum_to_shape")(g, shape=x.shape),)


def _astype_vjp(g, ans, x, *, dtype):
    return (_cast_back(g, x.dtype),)


def _cast_back(g, dtype):
    """g as `dtype`: the real part first when g is complex and dtype real (the adjoint of
    the real -> complex cast), not NumPy's cast that warns and drops the imaginary part."""
    if g.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        g = lookup("real")(g)
    return g if g.dtype == dtype else lookup("astype")(g, dtype=dtype)


def _real_vjp(g, ans, x):
    # d Re(z) = Re(dz): the cotangent g (real) is the complex input's gradient g + 0i
    return (lookup("astype")(g, dtype=x.dtype) if x.dtype.kind == "c" else g,)


def _real_kernel(a):
    """NumPy's np.real: a view of the real parts of a complex array; a real array itself."""
    return np.real(a)


# Forward-mode (JVP) rules. `t` holds one tangent per input (None where it has none).

def _add_jvp(t, ans, x, y):
    tx, ty = t
    if tx is None and ty is None:
        return lookup("zeros_like")(ans)
    if tx is None or ty is None:
        return ty if tx is None else tx        # broadcasts to ans: the engine's contract
    return lookup("add")(tx, ty)


def _astype_jvp(t, ans, x, *, dtype):
    # NOTE: a cast to an integer or bool dtype is piecewise constant (its output never
    # requires grad): its tangent is 0. Casting the tangent itself would truncate it into
    # a silently wrong "derivative".
    if t[0] is None or np.dtype(dtype).kind not in "fc":
        return lookup("zeros_like")(ans)
    return _cast_back(t[0], dtype)


# vmap's batching rules (see _batching.py): inputs are physical, the vmapped axis first.

def _sum_to_shape_batch(inputs, batched, *, shape):
    (x,) = inputs
    lead = x.ndim - 1 - len(shape)
    if lead > 0:
        # the leading axes the sum removes go before the batch axis, which is kept
        perm = tuple(range(1, lead + 1)) + (0,) + tuple(range(lead + 1, x.ndim))
        x = lookup("transpose")(x, axes=perm)
    return lookup("sum_to_shape")(x, shape=(x.shape[max(lead, 0)],) + tuple(shape))


def _broadcast_to_batch(inputs, batched, *, shape):
    x = pad_batched(inputs[0], len(shape))
    return lookup("broadcast_to")(x, shape=(x.shape[0],) + tuple(shape))


def _rand(*shape):
    return np.random.default_rng(sum(shape) + 7).standard_normal(shape)


@hookimpl
def tapegrad_register_devices(registry):
    registry.register_device(CpuDevice(), default=True)


@hookimpl
def tapegrad_register_ops(registry):
    registry.register_op(
        "add", kernels={"cpu": np.add},
        vjp=lambda g, ans, x, y: (g, g), jvp=_add_jvp, batch="elementwise",
        save_inputs=(False, False), save_ans=False, complex=True,
        samples=[(_rand(3, 4), _rand(3, 4)), (_rand(3, 4), _rand(4)),
                 (_rand(2, 1, 3), _rand(4, 1)), (_rand(3), 2.5), (1.5, _rand(2, 2))],
        doc="x + y, elementwise with NumPy broadcasting.")._set_fast_paths(
        passthrough=(True, True))   # the rule is (g, g): see Note: [gradient fast paths]
    registry.register_op(
        "sum_to_shape", kernels={"cpu": sum_to_shape_kernel}, vjp=_sum_to_shape_vjp, jvp="linear",
        batch=_sum_to_shape_batch, complex=True,
        save_inputs=(False,), save_ans=False, method=False,
        samples=[Sample(_rand(2, 3, 4), shape=(3, 1)), Sample(_rand(3, 4), shape=(3, 4))],
        doc="Sum x down to `shape` (the inverse of broadcasting): the engine calls it to "
            "reduce gradients of broadcast inputs.")
    registry.register_op(
        "broadcast_to", kernels={"cpu": np.broadcast_to}, vjp=_broadcast_to_vjp, jvp="linear",
        batch=_broadcast_to_batch, complex=True,
        view=True,
        save_inputs=(False,), save_ans=False,
        samples=[Sample(_rand(3, 1), shape=(2, 3, 4)), Sample(_rand(4), shape=(3, 4))],
        doc="x broadcast to `shape` (NumPy's broadcast_to; a read-only view on cpu).")
    registry.register_op(
        "astype", kernels={"cpu": lambda a, dtype: a.astype(dtype)}, vjp=_astype_vjp,
        jvp=_astype_jvp, batch="elementwise", complex=True,
        save_inputs=(False,), save_ans=False,
        samples=[Sample(_rand(3, 2), dtype=np.float64)],
        doc="x converted to `dtype`; the gradient is converted back to x's dtype (a real x "
            "cast to complex gets the real part of the complex gradient).")
    registry.register_op(
        "real", kernels={"cpu": _real_kernel}, vjp=_real_vjp, jvp="linear",
        batch="elementwise", complex=True, view=True, method=False,
        save_inputs=(False,), save_ans=False,
        samples=[(_rand(3, 2),), (_rand(3, 2) + 1j * _rand(3, 2),)],
        doc="The real part of x (np.real: a view of a complex x's real parts, x itself when "
            "real); its gradient is the real cotangent as a complex one. Also ``Tensor.real``."
            "\n\n    >>> import numpy as np, tapegrad as tg\n"
            "    >>> tg.real(tg.tensor(np.array([1 + 2j, 3 - 1j]))).numpy()\n"
            "    array([1., 3.])")
    registry.register_op(
        "zeros_like", kernels={"cpu": np.zeros_like}, nin=1, batch="elementwise",
        samples=[(_rand(2, 3),)], doc="A tensor of zeros with x's shape, dtype and device.")
    registry.register_op(
        "ones_like", kernels={"cpu": np.ones_like}, nin=1, batch="elementwise",
        samples=[(_rand(2, 3),)], doc="A tensor of ones with x's shape, dtype and device.")
