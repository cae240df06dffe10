"""cuBLAS through ctypes, on device pointers (matmul's kernel).

The library is found, in order, in the ``nvidia-cublas`` Python package
(``nvidia/cublas/lib/libcublas.so.13``, what PyTorch installs), then as the system's
``libcublas.so*``. When none loads, ``load_library`` raises a RuntimeError naming every
path and name it tried and why each failed.

Row-major trick: cuBLAS is column-major, and a row-major (r, c) array read column-major is
its (c, r) transpose. So C = A @ B (row-major) is computed as C^T = B^T A^T: the operands
are passed swapped, and C comes out row-major with no transposes anywhere. An operand that
is a transposed view of a contiguous matrix (``w.T``) is passed with op T instead of being
copied.

One handle per process (created on first use, in the current context), stream 0 -- the
stream PyCUDA launches our kernels on -- so no synchronisation is needed between them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os

import numpy as np

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1


def candidate_paths() -> list[str]:
    """Where libcublas is looked for, in order."""
    paths = []
    try:
        spec = importlib.util.find_spec("nvidia.cublas")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec else []:
        for version in ("13", "12"):
            paths.append(os.path.join(root, "lib", f"libcublas.so.{version}"))
    for env in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        root = os.environ.get(env)
        if root:
            paths += sorted(glob.glob(os.path.join(root, "lib64", "libcublas.so*")))
    found = ctypes.util.find_library("cublas")
    if found:
        paths.append(found)
    paths += ["libcublas.so.13", "libcublas.so.12", "libcublas.so"]
    return paths


def load_library(paths=None):
    """The first libcublas in `paths` (default: candidate_paths()) that ctypes loads."""
    tried = []
    for path in candidate_paths() if paths is None else paths:
        try:
            return ctypes.CDLL(path)
        except OSError as exc:
            tried.append(f"{path} ({exc})")
    raise RuntimeError(
        "tapegrad-cuda: matmul needs cuBLAS, and no libcublas could be loaded; tried: "
        + "; ".join(tried or ["nothing (no candidate paths)"])
        + ". Install the 'nvidia-cublas' package (pip install nvidia-cublas) or put the CUDA "
          "toolkit's libcublas.so on the library path.")


class Cublas:
    """A cuBLAS handle and the two GEMM entry points matmul uses."""

    def __init__(self, lib):
        self.lib = lib
        handle = ctypes.c_void_p()
        self._check("cublasCreate_v2", lib.cublasCreate_v2(ctypes.byref(handle)))
        self.handle = handle

    @staticmethod
    def _check(name, status):
        if status != 0:
            raise RuntimeError(f"tapegrad-cuda: {name} failed with cuBLAS status {status}")

    def gemm(self, dtype, transa, transb, m, n, k, a, lda, b, ldb, c, ldc,
             stride_a=0, stride_b=0, stride_c=0, batch=1):
        """Column-major C[m, n] = op(A)[m, k] op(B)[k, n] (alpha 1, beta 0), `batch` times
        with the given element strides. a, b, c are device pointers (ints)."""
        dtype = np.dtype(dtype)
        if dtype == np.float32:
            scalar, prefix = ctypes.c_float, "cublasS"
        elif dtype == np.float64:
            scalar, prefix = ctypes.c_double, "cublasD"
        else:
            raise TypeError(f"matmul: cuBLAS GEMM supports float32 and float64, got {dtype}")
        for name, v in (("m", m), ("n", n), ("k", k), ("lda", lda), ("ldb", ldb), ("ldc", ldc)):
            if v > 2**31 - 1:
                raise ValueError(f"matmul: {name} = {v} exceeds cuBLAS's 32-bit limit")
        alpha, beta = scalar(1.0), scalar(0.0)
        common = (self.handle, ctypes.c_int(transa), ctypes.c_int(transb), ctypes.c_int(m),
                  ctypes.c_int(n), ctypes.c_int(k), ctypes.byref(alpha))
        if batch == 1:
            name = prefix + "gemm_v2"
            status = getattr(self.lib, name)(
                *common, ctypes.c_void_p(a), ctypes.c_int(lda), ctypes.c_void_p(b),
                ctypes.c_int(ldb), ctypes.byref(beta), ctypes.c_void_p(c), ctypes.c_int(ldc))
        else:
            name = prefix + "gemmStridedBatched"
            status = getattr(self.lib, name)(
                *common, ctypes.c_void_p(a), ctypes.c_int(lda), ctypes.c_longlong(stride_a),
                ctypes.c_void_p(b), ctypes.c_int(ldb), ctypes.c_longlong(stride_b),
                ctypes.byref(beta), ctypes.c_void_p(c), ctypes.c_int(ldc),
                ctypes.c_longlong(stride_c), ctypes.c_int(batch))
        self._check(name, status)
