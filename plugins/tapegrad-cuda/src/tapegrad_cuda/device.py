"""``CudaDevice``: the ``cuda`` device. UNTESTED ON A GPU (this module is imported only
when ``tg.cuda.is_available()`` is True; no test machine so far had a GPU).

- Arrays are ``pycuda.gpuarray.GPUArray``s allocated from a ``DeviceMemoryPool``, so the
  many short-lived arrays of a backward pass reuse memory.
- The context is GPU 0's primary context (``Device(0).retain_primary_context()``), made
  current on the thread that creates the device and popped at exit. Other threads must
  push it themselves (known limitation).
- Random numbers come from a host NumPy generator and are copied over (no cuRAND in the
  PyCUDA build), so a seed gives the same numbers as on the cpu device.
"""

from __future__ import annotations

import atexit

import numpy as np
import tapegrad as tg

from ._detect import detect

_DEVICE = None


class CudaDevice(tg.Device):
    def __init__(self, ordinal: int = 0):
        det = detect()
        if not det.available:
            raise RuntimeError(f"tapegrad: CUDA is not available: {det.reason}")
        import pycuda.gpuarray as gpuarray
        import pycuda.tools

        drv = det.driver
        super().__init__("cuda", gpuarray.GPUArray)
        self.drv, self.gpuarray, self.ordinal = drv, gpuarray, ordinal
        self.context = drv.Device(ordinal).retain_primary_context()
        self.context.push()
        atexit.register(self._close)
        self.pool = pycuda.tools.DeviceMemoryPool()
        self.rng = np.random.default_rng()
        from .kernels import CudaKernels

        self.kernels = CudaKernels(self)

    def _close(self):
        try:
            self.pool.stop_holding()
            self.context.pop()
        except self.drv.Error:
            pass

    # -- helpers used by the kernels --------------------------------------------------
    def empty(self, shape, dtype):
        return self.gpuarray.empty(tuple(shape), dtype, allocator=self.pool.allocate)

    def contiguous(self, arr):
        if arr.flags.c_contiguous:
            return arr
        return self.kernels.broadcast_to(arr, arr.shape)

    def synchronize(self):
        self.context.synchronize()

    # -- the tg.Device interface ------------------------------------------------------
    def asarray(self, obj, dtype=None):
        if isinstance(obj, self.gpuarray.GPUArray):
            return obj if dtype is None or obj.dtype == np.dtype(dtype) else obj.astype(dtype)
        host = np.ascontiguousarray(np.asarray(obj, dtype=dtype))
        return self.gpuarray.to_gpu(host, allocator=self.pool.allocate)

    def to_numpy(self, arr):
        return arr.get()

    def copy(self, arr):
        out = self.empty(arr.shape, arr.dtype)
        self.copyto(out, arr)
        return out

    def copyto(self, dst, src):
        if not isinstance(src, self.gpuarray.GPUArray) or src.shape != dst.shape:
            src = self.kernels.broadcast_to(self.asarray(src), dst.shape)
        if src.dtype != dst.dtype:
            if not np.can_cast(src.dtype, dst.dtype, casting="same_kind"):
                raise TypeError(f"cannot copy {src.dtype} into {dst.dtype} (same_kind)")
            src = src.astype(dst.dtype)
        src = self.contiguous(src)
        if dst.nbytes:
            self.drv.memcpy_dtod(dst.gpudata, src.gpudata, dst.nbytes)

    def setitem(self, arr, index, value):
        # Slow but simple: through the host.
        host = arr.get()
        host[index] = value.get() if isinstance(value, self.gpuarray.GPUArray) else value
        arr.set(host)

    def zeros(self, shape, dtype):
        return self.gpuarray.zeros(tuple(shape), dtype, allocator=self.pool.allocate)

    def ones(self, shape, dtype):
        out = self.empty(shape, dtype)
        out.fill(1)
        return out

    def may_share_memory(self, a, b):
        a0, b0 = int(a.gpudata), int(b.gpudata)
        return a0 < b0 + max(b.nbytes, 1) and b0 < a0 + max(a.nbytes, 1)

    def random(self, kind, shape, dtype, **params):
        if kind == "uniform":
            host = self.rng.uniform(params["low"], params["high"], shape)
        elif kind == "normal":
            host = self.rng.normal(params["loc"], params["scale"], shape)
        else:
            raise ValueError(f"cuda: unknown distribution '{kind}'")
        return self.asarray(host, dtype=dtype)

    def manual_seed(self, seed):
        self.rng = np.random.default_rng(seed)

    def get_rng_state(self):
        return self.rng.bit_generator.state

    def set_rng_state(self, state):
        self.rng.bit_generator.state = state


def get_cuda_device() -> CudaDevice:
    """The one CudaDevice (GPU 0), created on first use."""
    global _DEVICE
    if _DEVICE is None:
        _DEVICE = CudaDevice(0)
    return _DEVICE
