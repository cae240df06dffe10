"""The ``.cu`` kernel sources and their Python wrappers.

The manifest part (``UNARY``, ``BINARY``, ``expected_kernels()``, ``source()``) needs
nothing but the standard library and is tested on every machine: the tests compile each
``.cu`` file with ``nvcc`` and check that every expected kernel is in the cubin.

``CudaKernels`` (the wrappers that launch them through PyCUDA) is UNTESTED ON A GPU: it
is only used when ``tg.cuda.is_available()`` is True. Limitations (documented in the
README): float32 and float64 only; unary kernels read contiguous inputs (others are made
contiguous first); reductions read a contiguous input.
"""

from __future__ import annotations

import math
from importlib import resources

import numpy as np

UNARY = ("negative", "abs", "exp", "log", "sqrt", "tanh", "sin", "cos", "sigmoid", "relu")
BINARY = ("add", "subtract", "multiply", "divide", "power", "maximum", "minimum")
REDUCTIONS = ("sum", "max")
SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
THREADS = 256
MAX_BLOCKS = 65535


def expected_kernels() -> dict[str, list[str]]:
    """{.cu file name: the extern "C" kernel names it must define}."""
    ew, red = [], []
    for sfx in SUFFIX.values():
        ew += [f"tg_{n}_{sfx}" for n in UNARY]
        ew += [f"tg_{n}_{sfx}" for n in BINARY]
        ew += [f"tg_{n}_strided_{sfx}" for n in BINARY]
        ew.append(f"tg_copy_strided_{sfx}")
        red += [f"tg_{n}_{kind}_{sfx}" for n in REDUCTIONS for kind in ("all", "axis")]
    return {"elementwise.cu": ew, "reduce.cu": red}


def kernel_dir():
    """The folder (a Traversable) that holds the .cu files (package data)."""
    return resources.files(__package__) / "kernels"


def source_files() -> list[str]:
    return sorted(p.name for p in kernel_dir().iterdir() if p.name.endswith(".cu"))


def source(name: str) -> str:
    """The text of kernels/<name>."""
    return (kernel_dir() / name).read_text(encoding="utf-8")


def suffix(dtype, op: str) -> str:
    sfx = SUFFIX.get(np.dtype(dtype))
    if sfx is None:
        raise TypeError(f"{op}: the cuda kernels support float32 and float64, got "
                        f"{np.dtype(dtype)}; convert with .astype(np.float32) first")
    return sfx


def _elem_strides(arr, shape):
    """Element strides of `arr` read as broadcast to `shape` (0 on broadcast axes)."""
    lead = len(shape) - arr.ndim
    out = [0] * lead
    for dim, (n, st) in enumerate(zip(arr.shape, arr.strides)):
        out.append(0 if n == 1 and shape[lead + dim] != 1 else st // arr.dtype.itemsize)
    return out


# ---------------------------------------------------------------------------------------
# UNTESTED ON A GPU below this line.
# ---------------------------------------------------------------------------------------
class CudaKernels:
    """Compiled modules (lazily, once) and the array-level kernels tapegrad calls."""

    def __init__(self, device):
        self.device = device
        self._modules = {}
        self._functions = {}

    def function(self, module: str, name: str):
        fn = self._functions.get(name)
        if fn is None:
            mod = self._modules.get(module)
            if mod is None:
                from pycuda.compiler import SourceModule

                mod = self._modules[module] = SourceModule(source(module), no_extern_c=True)
            fn = self._functions[name] = mod.get_function(name)
        return fn

    def _launch(self, fn, n, *args, blocks=None):
        if n == 0:
            return
        if blocks is None:
            blocks = max(1, min(MAX_BLOCKS, math.ceil(n / THREADS)))
        fn(*args, block=(THREADS, 1, 1), grid=(blocks, 1))

    def _meta(self, values):
        return self.device.asarray(np.asarray(values, dtype=np.int64))

    # -- elementwise ---------------------------------------------------------------------
    def unary(self, name):
        def kernel(x):
            x = self.device.asarray(x)
            sfx = suffix(x.dtype, name)
            x = self.device.contiguous(x)
            out = self.device.empty(x.shape, x.dtype)
            self._launch(self.function("elementwise.cu", f"tg_{name}_{sfx}"), x.size,
                         x.gpudata, out.gpudata, np.int64(x.size))
            return out
        kernel.__name__ = f"cuda_{name}"
        return kernel

    def binary(self, name):
        def kernel(a, b):
            dtype = np.result_type(*(v if np.isscalar(v) else v.dtype for v in (a, b)))
            sfx = suffix(dtype, name)
            a = self.device.asarray(a, dtype=dtype)
            b = self.device.asarray(b, dtype=dtype)
            shape = tuple(np.broadcast_shapes(a.shape, b.shape))
            out = self.device.empty(shape, dtype)
            n = out.size
            if a.shape == b.shape == shape and a.flags.c_contiguous and b.flags.c_contiguous:
                self._launch(self.function("elementwise.cu", f"tg_{name}_{sfx}"), n,
                             a.gpudata, b.gpudata, out.gpudata, np.int64(n))
            else:
                meta = self._meta(list(shape) + _elem_strides(a, shape) + _elem_strides(b, shape))
                self._launch(self.function("elementwise.cu", f"tg_{name}_strided_{sfx}"), n,
                             a.gpudata, b.gpudata, out.gpudata, np.int64(n),
                             np.int32(len(shape)), meta.gpudata)
            return out
        kernel.__name__ = f"cuda_{name}"
        return kernel

    def broadcast_to(self, x, shape):
        x = self.device.asarray(x)
        shape = tuple(shape)
        np.broadcast_shapes(x.shape, shape)  # raises ValueError when it cannot
        sfx = suffix(x.dtype, "broadcast_to")
        out = self.device.empty(shape, x.dtype)
        if out.size:
            meta = self._meta(list(shape) + _elem_strides(x, shape))
            self._launch(self.function("elementwise.cu", f"tg_copy_strided_{sfx}"), out.size,
                         x.gpudata, out.gpudata, np.int64(out.size), np.int32(len(shape)),
                         meta.gpudata)
        return out

    # -- reductions ----------------------------------------------------------------------
    def reduction(self, name):
        def kernel(x, axis=None, dtype=None, keepdims=False):
            x = self.device.contiguous(self.device.asarray(x, dtype=dtype))
            sfx = suffix(x.dtype, name)
            if name == "max" and x.size == 0:
                raise ValueError("max of an empty array (no identity)")
            axes = range(x.ndim) if axis is None else (axis,) if np.isscalar(axis) else axis
            axes = sorted({int(a) % max(x.ndim, 1) for a in axes}, reverse=True)
            if axis is None:
                out = self._reduce_all(name, sfx, x).reshape(())
                return out.reshape((1,) * x.ndim) if keepdims else out
            for ax in axes:
                x = self._reduce_axis(name, sfx, x, ax)
            if not keepdims:
                x = x.reshape(tuple(s for i, s in enumerate(x.shape) if i not in axes))
            return x
        kernel.__name__ = f"cuda_{name}"
        return kernel

    def _reduce_all(self, name, sfx, x):
        fn = self.function("reduce.cu", f"tg_{name}_all_{sfx}")
        n = x.size
        if n == 0:
            return self.device.zeros((1,), x.dtype)
        blocks = max(1, min(1024, math.ceil(n / THREADS)))
        partial = self.device.empty((blocks,), x.dtype)
        self._launch(fn, n, x.gpudata, partial.gpudata, np.int64(n), blocks=blocks)
        if blocks > 1:
            final = self.device.empty((1,), x.dtype)
            self._launch(fn, blocks, partial.gpudata, final.gpudata, np.int64(blocks), blocks=1)
            partial = final
        return partial

    def _reduce_axis(self, name, sfx, x, ax):
        """Reduce contiguous x over axis ax, keeping it as a length-1 axis."""
        outer = int(np.prod(x.shape[:ax], dtype=np.int64))
        length = x.shape[ax]
        inner = int(np.prod(x.shape[ax + 1:], dtype=np.int64))
        shape = x.shape[:ax] + (1,) + x.shape[ax + 1:]
        out = self.device.empty(shape, x.dtype)
        self._launch(self.function("reduce.cu", f"tg_{name}_axis_{sfx}"), outer * inner,
                     x.gpudata, out.gpudata, np.int64(outer), np.int64(length), np.int64(inner))
        return out

    def sum_to_shape(self, a, shape):
        shape = tuple(shape)
        lead = a.ndim - len(shape)
        if lead < 0 or any(s != 1 and a.shape[lead + i] != s for i, s in enumerate(shape)):
            raise ValueError(f"cannot sum shape {a.shape} down to shape {shape}")
        axes = tuple(range(lead)) + tuple(
            lead + i for i, s in enumerate(shape) if s == 1 and a.shape[lead + i] != 1)
        out = self.reduction("sum")(a, axis=axes, keepdims=True) if axes else a
        return out.reshape(shape)

    def table(self) -> dict:
        """{op name: kernel} for every op this plugin covers on cuda."""
        dev = self.device
        out = {name: self.unary(name) for name in UNARY}
        out.update({name: self.binary(name) for name in BINARY})
        out.update({name: self.reduction(name) for name in REDUCTIONS})
        out["broadcast_to"] = self.broadcast_to
        out["sum_to_shape"] = self.sum_to_shape
        out["astype"] = lambda a, dtype: a.astype(dtype)
        out["zeros_like"] = lambda a: dev.zeros(a.shape, a.dtype)
        out["ones_like"] = lambda a: dev.ones(a.shape, a.dtype)
        return out
