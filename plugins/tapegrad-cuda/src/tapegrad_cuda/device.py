"""``CudaDevice``: the ``cuda`` device. NEVER RUN ON A GPU so far: it is tested on the CPU
against the PyCUDA simulator in ``tests/fakecuda.py`` (this module is imported only when
``tg.cuda.is_available()`` is True, or by those tests).

- Arrays are ``pycuda.gpuarray.GPUArray``s allocated from a ``DeviceMemoryPool``, so the
  many short-lived arrays of a backward pass reuse memory.
- The context is GPU 0's primary context (``Device(0).retain_primary_context()``), made
  current on the thread that creates the device and popped at exit. Other threads must
  push it themselves (known limitation).
- Random numbers come from a host NumPy generator and are copied over (no cuRAND in the
  PyCUDA build), so a seed gives the same numbers as on the cpu device; ``tg.random``
  (manual_seed, get_state, set_state, rand, randn, ...) reaches it like any device's.
- Host transfers are ``memcpy_htod``/``memcpy_dtoh`` on contiguous arrays; views
  (transpose, basic indexing, broadcast_to) are made contiguous on the device first.
"""

from __future__ import annotations

import atexit

import numpy as np
import tapegrad as tg

from ._detect import detect

_DEVICE = None


class CudaDevice(tg.Device):
    def __init__(self, ordinal: int = 0, cublas_library=None):
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

        self.kernels = CudaKernels(self, cublas_library)

    def _close(self):
        try:
            self.pool.stop_holding()
            self.context.pop()
        except self.drv.Error:
            pass

    # -- helpers used by the kernels --------------------------------------------------
    def empty(self, shape, dtype):
        """An uninitialised contiguous array from the memory pool."""
        return self.gpuarray.GPUArray(tuple(shape), np.dtype(dtype), allocator=self.pool.allocate)

    def contiguous(self, arr):
        return self.kernels.contiguous(arr)

    def synchronize(self):
        self.context.synchronize()

    # -- the tg.Device interface ------------------------------------------------------
    def asarray(self, obj, dtype=None):
        if isinstance(obj, self.gpuarray.GPUArray):
            return obj if dtype is None or obj.dtype == np.dtype(dtype) else \
                self.kernels.cast(obj, dtype)
        host = np.asarray(obj, dtype=dtype, order="C")
        if host.dtype.kind not in "biuf":
            raise TypeError(f"cuda: cannot hold an array of dtype {host.dtype}")
        out = self.empty(host.shape, host.dtype)
        if host.size:
            self.drv.memcpy_htod(int(out.gpudata), host)
        return out

    def to_numpy(self, arr):
        arr = self.kernels.contiguous(arr)
        host = np.empty(arr.shape, arr.dtype)
        if host.size:
            self.drv.memcpy_dtoh(host, int(arr.gpudata))
        return host

    def copy(self, arr):
        return self.kernels.copy(arr)

    def copyto(self, dst, src):
        src_dtype = getattr(src, "dtype", None)
        if src_dtype is not None and src.dtype != dst.dtype and not np.can_cast(
                src.dtype, dst.dtype, casting="same_kind"):
            raise TypeError(f"cannot copy {src.dtype} into {dst.dtype} (same_kind)")
        self.kernels.copy_into(dst, src)

    def setitem(self, arr, index, value):
        self.kernels.assign(arr, index, value)

    def zeros(self, shape, dtype):
        out = self.empty(shape, dtype)
        if out.nbytes:
            # All-zero bytes are 0 in every dtype the kernels use (0.0, 0, False).
            self.drv.memset_d8(int(out.gpudata), 0, out.nbytes)
        return out

    def ones(self, shape, dtype):
        return self.kernels.fill(self.empty(shape, dtype), 1)

    def may_share_memory(self, a, b):
        def extent(x):
            if x.gpudata is None or x.size == 0:
                return None
            lo = hi = int(x.gpudata)
            for n, st in zip(x.shape, x.strides):
                (lo, hi) = (lo + (n - 1) * st, hi) if st < 0 else (lo, hi + (n - 1) * st)
            return lo, hi + x.dtype.itemsize
        ea, eb = extent(a), extent(b)
        return ea is not None and eb is not None and ea[0] < eb[1] and eb[0] < ea[1]

    # NOTE: random numbers come from a host NumPy generator and are copied over: no cuRAND
    # in the PyCUDA build, and a seed then gives the same numbers as on the cpu device.
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
