"""A PyCUDA simulator for tests on machines without a GPU.

It provides the parts of PyCUDA that tapegrad-cuda uses -- ``pycuda.driver`` (init,
Device, primary context, memcpy/memset), ``pycuda.gpuarray.GPUArray`` (shape, dtype,
strides, gpudata, views), ``pycuda.tools.DeviceMemoryPool`` and
``pycuda.compiler.SourceModule`` -- over "device memory" that is a table of NumPy byte
buffers addressed by integer pointers. ``SourceModule(...).get_function(name)`` returns a
NumPy emulation of that kernel, written from the ``.cu`` files' documented semantics
(independently of the Python wrappers): it takes EXACTLY the argument list a real launch
takes (pointers, np.int64 / np.int32 / np.float64 scalars, metadata arrays on the
device), checks each argument's type the way PyCUDA packs it and the block size the
kernel assumes, and bounds-checks every element it reads or writes. ``FakeCublas`` does
the same for the cuBLAS GEMM calls (column-major, from the ctypes arguments).

So a wrong stride, a pointer one element off, an int32 where the kernel reads a long long,
or a swapped GEMM operand fails here -- but the .cu code itself never runs: that needs a GPU.
"""

from __future__ import annotations

import ctypes
import re
import sys
import types

import numpy as np

_SPACING = 1 << 36            # each allocation starts at its own multiple of this


class FakeCudaError(Exception):
    """An access the real device would fault on (out of bounds, bad argument)."""


# ---------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------
class Memory:
    def __init__(self):
        self.buffers = {}          # base address -> np.uint8 buffer
        self.views = {}            # (base, dtype char) -> that buffer viewed as the dtype
        self.next = 1
        self.allocated = 0

    def alloc(self, nbytes):
        base = self.next * _SPACING
        self.next += 1
        self.buffers[base] = np.zeros(max(int(nbytes), 1), np.uint8)
        self.allocated += 1
        return base

    def locate(self, ptr):
        base = (int(ptr) // _SPACING) * _SPACING
        buf = self.buffers.get(base)
        if buf is None:
            raise FakeCudaError(f"pointer {int(ptr):#x} is not in any allocation")
        return buf, int(ptr) - base

    def typed(self, ptr, dtype):
        """(the whole allocation as `dtype`, element index of ptr in it)."""
        dtype = np.dtype(dtype)
        base = (int(ptr) // _SPACING) * _SPACING
        off = int(ptr) - base
        if off % dtype.itemsize:
            raise FakeCudaError(f"pointer {int(ptr):#x} is misaligned for {dtype}")
        key = (base, dtype.char)
        arr = self.views.get(key)
        if arr is None:
            buf, _ = self.locate(ptr)
            usable = len(buf) // dtype.itemsize * dtype.itemsize
            arr = self.views[key] = buf[:usable].view(dtype)
        return arr, off // dtype.itemsize

    def typed_or_empty(self, ptr, dtype, offsets):
        # A kernel that touches no element never dereferences its pointer (it may be null).
        if np.size(offsets) == 0:
            return np.zeros(0, dtype), 0
        return self.typed(ptr, dtype)

    def _index(self, arr, origin, offsets):
        idx = origin + np.asarray(offsets, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= len(arr)):
            raise FakeCudaError(f"out-of-bounds access: elements {idx.min()}..{idx.max()} of "
                                f"an allocation of {len(arr)}")
        return idx

    def read(self, ptr, dtype, offsets):
        arr, origin = self.typed_or_empty(ptr, dtype, offsets)
        return arr[self._index(arr, origin, offsets)].copy()

    def write(self, ptr, dtype, offsets, values):
        arr, origin = self.typed_or_empty(ptr, dtype, offsets)
        arr[self._index(arr, origin, offsets)] = values

    def add_at(self, ptr, dtype, offsets, values):
        arr, origin = self.typed(ptr, dtype)
        np.add.at(arr, self._index(arr, origin, offsets), values)


MEMORY = Memory()


class DeviceAllocation:
    def __init__(self, nbytes):
        self.ptr = MEMORY.alloc(nbytes)

    def __int__(self):
        return self.ptr

    __index__ = __int__


# ---------------------------------------------------------------------------------------
# pycuda.driver
# ---------------------------------------------------------------------------------------
class Error(Exception):
    pass


class LogicError(Error):
    pass


class Context:
    def __init__(self):
        self.pushed = 0

    def push(self):
        self.pushed += 1

    def pop(self):
        self.pushed -= 1

    def synchronize(self):
        pass


class Device:
    def __init__(self, ordinal):
        self.ordinal = ordinal

    @staticmethod
    def count():
        return 1

    def retain_primary_context(self):
        return Context()


def _addr(p):
    if isinstance(p, (int, np.integer, DeviceAllocation)):
        return int(p)
    raise TypeError(f"not a device pointer: {type(p).__name__}")


def memcpy_htod(dst, src):
    src = np.asarray(src, order="C")
    MEMORY.write(_addr(dst), np.uint8, np.arange(src.nbytes), src.reshape(-1).view(np.uint8))


def memcpy_dtoh(dst, src):
    if not dst.flags.c_contiguous:
        raise ValueError("memcpy_dtoh needs a contiguous host array")
    dst.reshape(-1).view(np.uint8)[:] = MEMORY.read(_addr(src), np.uint8, np.arange(dst.nbytes))


def memcpy_dtod(dst, src, nbytes):
    MEMORY.write(_addr(dst), np.uint8, np.arange(nbytes),
                 MEMORY.read(_addr(src), np.uint8, np.arange(nbytes)))


def memset_d8(dst, value, count):
    MEMORY.write(_addr(dst), np.uint8, np.arange(count), np.uint8(value))


def mem_alloc(nbytes):
    return DeviceAllocation(nbytes)


def init(flags=0):
    pass


# ---------------------------------------------------------------------------------------
# pycuda.gpuarray.GPUArray (the constructor, views and flags as PyCUDA defines them)
# ---------------------------------------------------------------------------------------
class _Flags:
    def __init__(self, arr):
        item, acc, c = arr.dtype.itemsize, arr.dtype.itemsize, True
        for n, st in reversed(list(zip(arr.shape, arr.strides))):
            if n != 1 and st != acc:
                c = False
            acc *= n
        self.c_contiguous = c or arr.size == 0
        self.f_contiguous = arr.ndim <= 1 and self.c_contiguous
        self.forc = self.c_contiguous or self.f_contiguous
        del item


class GPUArray:
    def __init__(self, shape, dtype, allocator=mem_alloc, base=None, gpudata=None,
                 strides=None, order="C"):
        dtype = np.dtype(dtype)
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
        size = int(np.prod(shape, dtype=np.int64))
        if strides is None:
            strides, acc = [], dtype.itemsize
            for s in reversed(shape):
                strides.append(acc)
                acc *= s
            strides = strides[::-1]
        self.shape, self.dtype, self.strides = shape, dtype, tuple(int(s) for s in strides)
        self.size = self.mem_size = size
        self.nbytes = dtype.itemsize * size
        self.itemsize = dtype.itemsize
        self.allocator = allocator
        if gpudata is None:
            self.gpudata = allocator(self.nbytes) if size else None
            assert base is None
        else:
            self.gpudata = gpudata
        self.base = base

    ndim = property(lambda self: len(self.shape))
    flags = property(lambda self: _Flags(self))

    def _offsets(self):
        if self.size == 0:
            return np.zeros(0, np.int64)
        coords = np.unravel_index(np.arange(self.size), self.shape)
        st = [s // self.itemsize for s in self.strides]
        return sum((c.astype(np.int64) * s for c, s in zip(coords, st)),
                   np.zeros(self.size, np.int64))

    def get(self):
        if self.size == 0:
            return np.empty(self.shape, self.dtype)
        return MEMORY.read(int(self.gpudata), self.dtype, self._offsets()).reshape(self.shape)

    def set(self, ary):
        ary = np.asarray(ary, self.dtype)
        if self.size:
            MEMORY.write(int(self.gpudata), self.dtype, self._offsets(), ary.reshape(-1))

    def reshape(self, *shape):
        if not self.flags.forc:
            raise RuntimeError("only contiguous arrays may be used as arguments to this operation")
        shape = tuple(shape[0]) if isinstance(shape[0], (tuple, list)) else shape
        return GPUArray(shape, self.dtype, self.allocator, base=self,
                        gpudata=int(self.gpudata) if self.gpudata is not None else None)

    def __getitem__(self, index):
        # PyCUDA's basic indexing: slices, ints, Ellipsis, newaxis -> a strided view.
        index = index if isinstance(index, tuple) else (index,)
        shape, strides, offset, axis = [], [], 0, 0
        for entry in index:
            if isinstance(entry, slice):
                start, stop, step = entry.indices(self.shape[axis])
                shape.append(len(range(start, stop, step)))
                strides.append(step * self.strides[axis])
                offset += start * self.strides[axis]
                axis += 1
            elif isinstance(entry, (int, np.integer)):
                n = self.shape[axis]
                if not -n <= entry < n:
                    raise IndexError("subindex out of range")
                offset += (int(entry) % n) * self.strides[axis]
                axis += 1
            elif entry is None:
                shape.append(1)
                strides.append(0)
            else:
                raise IndexError("invalid subindex")
        shape += self.shape[axis:]
        strides += self.strides[axis:]
        return GPUArray(shape, self.dtype, self.allocator, base=self,
                        gpudata=int(self.gpudata) + offset, strides=strides)


def to_gpu(ary, allocator=mem_alloc):
    ary = np.asarray(ary, order="C")
    out = GPUArray(ary.shape, ary.dtype, allocator)
    out.set(ary)
    return out


def empty(shape, dtype, allocator=mem_alloc):
    return GPUArray(shape, dtype, allocator)


class DeviceMemoryPool:
    def allocate(self, nbytes):
        return DeviceAllocation(nbytes)

    def stop_holding(self):
        pass


# ---------------------------------------------------------------------------------------
# Kernel argument packing (as pycuda.driver._build_arg_buf) and launch checks
# ---------------------------------------------------------------------------------------
def _pack(args):
    """[(kind, value)] with kind 'P' (pointer), or the NumPy char of a scalar; a Python
    int or float is refused exactly as PyCUDA refuses it."""
    out = []
    for i, a in enumerate(args):
        if isinstance(a, np.number):
            out.append((a.dtype.char, a))
        elif isinstance(a, DeviceAllocation):
            out.append(("P", int(a)))
        elif isinstance(a, GPUArray):
            out.append(("P", 0 if a.gpudata is None else int(a.gpudata)))
        else:
            raise TypeError(f"invalid type on parameter #{i} (0-based)")
    return out


_KIND = {"P": ("P", np.dtype(np.uintp).char, np.dtype(np.uint64).char),
         "q": (np.dtype(np.int64).char,), "i": (np.dtype(np.int32).char,),
         "d": (np.dtype(np.float64).char,)}
_TYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64,
          "b8": np.bool_}


def _offsets(n, shape, strides):
    if len(shape) == 0:
        return np.zeros(n, np.int64)
    coords = np.unravel_index(np.arange(n, dtype=np.int64), tuple(int(s) for s in shape))
    off = np.zeros(n, np.int64)
    for c, s in zip(coords, strides):
        off += c.astype(np.int64) * int(s)
    return off


def _meta(ptr, count):
    return MEMORY.read(ptr, np.int64, np.arange(count))


def _contig(ptr, dtype, n):
    return MEMORY.read(ptr, dtype, np.arange(n))


# -- emulations, from the .cu semantics ------------------------------------------------
def _maximum(u, v):
    return np.where((u != u) | (u > v), u, v)


def _minimum(u, v):
    return np.where((u != u) | (u < v), u, v)


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    s = (1 / (1 + e)).astype(x.dtype)
    return np.where(x >= 0, s, e * s)


_UNARY = {
    "negative": lambda v: -v, "abs": lambda v: np.where(v < 0, -v, v) if v.dtype.kind == "i" else np.abs(v),
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "sin": np.sin,
    "cos": np.cos, "sigmoid": _sigmoid,
    "relu": lambda v: np.where(v > 0, v, np.where(v != v, v, 0)).astype(v.dtype),
    "square": lambda v: v * v,
    "sign": lambda v: np.where(v > 0, 1, np.where(v < 0, -1, v)).astype(v.dtype),
    "logical_not": lambda v: ~v,
    "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "arcsin": np.arcsin, "arccos": np.arccos,
    "arctan": np.arctan, "arcsinh": np.arcsinh, "arccosh": np.arccosh, "arctanh": np.arctanh,
    "log1p": np.log1p, "expm1": np.expm1, "log2": np.log2, "log10": np.log10, "exp2": np.exp2,
    "reciprocal": lambda v: _ireciprocal(v) if v.dtype.kind == "i" else 1 / v,
    "cbrt": np.cbrt, "sinc": lambda v: _sinc(v), "deg2rad": np.deg2rad,
    "rad2deg": np.rad2deg, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
    "rint": np.rint,
    # bool results
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "signbit": np.signbit,
}
_PREDICATES = {"isnan", "isinf", "isfinite", "signbit"}
_BINARY = {
    "add": lambda u, v: u + v, "subtract": lambda u, v: u - v, "multiply": lambda u, v: u * v,
    "divide": lambda u, v: u / v, "power": np.power, "maximum": _maximum, "minimum": _minimum,
    "bce_logits": lambda u, v: np.maximum(u, 0) - u * v + np.log1p(np.exp(-np.abs(u))),
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or,
    "arctan2": np.arctan2, "hypot": np.hypot, "logaddexp": np.logaddexp,
    "logaddexp2": np.logaddexp2, "copysign": np.copysign, "heaviside": np.heaviside,
    "fmax": np.fmax, "fmin": np.fmin,
    # NumPy's semantics for floats and ints alike (sign of the divisor, zero divisors)
    "remainder": np.remainder, "fmod": np.fmod, "floor_divide": np.floor_divide,
}
_BOOL_OUT = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
             "logical_and", "logical_or"}


def _ireciprocal(v):
    # elementwise.cu's tg_ireciprocal: NumPy's (T)(1.0 / x) with x86's MIN for 1 / 0
    return np.where(v == 0, np.iinfo(v.dtype).min, np.where(np.abs(v) == 1, v, 0)).astype(v.dtype)


def _sinc(v):
    t = v.dtype.type
    y = t(np.pi) * np.where(v == 0, t(1e-20), v)
    return np.sin(y) / y


def _row_stats(row):
    m = np.max(row)
    if not np.isfinite(m):
        m = row.dtype.type(0)
    s = np.sum(np.exp(row - m))
    return m, s


def _emulator(name):
    """(signature, emulate(args, block, grid)) of kernel `name`, or None if unknown."""
    m = re.fullmatch(r"tg_(\w+?)_(f32|f64|i32|i64|b8)", name)
    if not m:
        return None
    op, sfx = m.groups()
    T = np.dtype(_TYPES[sfx])

    if op.startswith("cast_"):
        src = np.dtype(_TYPES[op[5:]])

        def cast(a, block, grid):
            x, out, n, ndim, meta = a
            mt = _meta(meta, 3 * ndim)
            vals = MEMORY.read(x, src, _offsets(n, mt[:ndim], mt[ndim:2 * ndim]))
            vals = vals != 0 if T == np.bool_ else vals.astype(T)
            MEMORY.write(out, T, _offsets(n, mt[:ndim], mt[2 * ndim:]), vals)
        return "PPqiP", cast
    if op == "fill":
        return "Pqd", lambda a, block, grid: MEMORY.write(a[0], T, np.arange(a[1]),
                                                         np.asarray(a[2]).astype(T))
    if op == "where":
        def where(a, block, grid):
            c, x, y, out, n, ndim, meta = a
            mt = _meta(meta, 4 * ndim)
            sh = mt[:ndim]
            cv = MEMORY.read(c, np.bool_, _offsets(n, sh, mt[ndim:2 * ndim]))
            xv = MEMORY.read(x, T, _offsets(n, sh, mt[2 * ndim:3 * ndim]))
            yv = MEMORY.read(y, T, _offsets(n, sh, mt[3 * ndim:]))
            MEMORY.write(out, T, np.arange(n), np.where(cv, xv, yv))
        return "PPPPqiP", where
    if op == "nan_to_num":
        def nan_to_num(a, block, grid):
            x, out, n, nan, posinf, neginf = a
            v = _contig(x, T, n)
            with np.errstate(all="ignore"):
                rep = [np.asarray(r).astype(T) for r in (nan, posinf, neginf)]
            res = np.where(v != v, rep[0], np.where(v == np.inf, rep[1],
                                                    np.where(v == -np.inf, rep[2], v)))
            MEMORY.write(out, T, np.arange(n), res.astype(T))
        return "PPqddd", nan_to_num
    if op == "round":
        def round_(a, block, grid):
            x, out, n, factor, divide_first = a
            v, f = _contig(x, T, n), T.type(factor)
            with np.errstate(all="ignore"):
                res = np.rint(v / f) * f if divide_first else np.rint(v * f) / f
            MEMORY.write(out, T, np.arange(n), res.astype(T))
        return "PPqdi", round_
    strided = op.endswith("_strided")
    base = op[:-len("_strided")] if strided else op
    if base in _UNARY and not strided:
        R = np.dtype(np.bool_) if base in _PREDICATES else T

        def unary(a, block, grid):
            x, out, n = a
            with np.errstate(all="ignore"):
                MEMORY.write(out, R, np.arange(n), _UNARY[base](_contig(x, T, n)))
        return "PPq", unary
    if base in _BINARY:
        R = np.dtype(np.bool_) if base in _BOOL_OUT else T

        def binary(a, block, grid):
            if strided:
                x, y, out, n, ndim, meta = a
                mt = _meta(meta, 3 * ndim)
                u = MEMORY.read(x, T, _offsets(n, mt[:ndim], mt[ndim:2 * ndim]))
                v = MEMORY.read(y, T, _offsets(n, mt[:ndim], mt[2 * ndim:]))
            else:
                x, y, out, n = a
                u, v = _contig(x, T, n), _contig(y, T, n)
            with np.errstate(all="ignore"):
                MEMORY.write(out, R, np.arange(n), np.asarray(_BINARY[base](u, v)).astype(R))
        return ("PPPqiP" if strided else "PPPq"), binary
    rows = re.fullmatch(r"(sum|max|min|mean|argmax|argmin|softmax|log_softmax|logsumexp|"
                        r"cross_entropy)_rows", op)
    if rows:
        kind = rows.group(1)

        def reduce_rows(a, block, grid):
            if block != (256, 1, 1):
                raise FakeCudaError(f"{name} needs blockDim (256, 1, 1), got {block}")
            if kind in ("argmax", "argmin"):
                x, out, nrows, length = a
                vals = _contig(x, T, nrows * length).reshape(nrows, length)
                res = (np.argmax if kind == "argmax" else np.argmin)(vals, axis=1)
                MEMORY.write(out, np.int64, np.arange(nrows), res)
                return
            if kind in ("softmax", "log_softmax", "logsumexp"):
                x, out, nrows, length = a
                vals = _contig(x, T, nrows * length).reshape(nrows, length)
                res = []
                with np.errstate(all="ignore"):
                    for row in vals:
                        mx, s = _row_stats(row)
                        if kind == "softmax":
                            res.append(np.exp(row - mx) / s)
                        elif kind == "log_softmax":
                            res.append((row - mx) - np.log(s))
                        else:
                            res.append([np.log(s) + mx])
                MEMORY.write(out, T, np.arange(nrows * (1 if kind == "logsumexp" else length)),
                             np.asarray(res, T).reshape(-1))
                return
            if kind == "cross_entropy":
                x, labels, out, nrows, length = a
                vals = _contig(x, T, nrows * length).reshape(nrows, length)
                lab = _contig(labels, np.int64, nrows)
                res = []
                for row, lb in zip(vals, lab):
                    if not 0 <= lb < length:
                        raise FakeCudaError(f"label {lb} read outside row of {length}")
                    mx, s = _row_stats(row)
                    res.append((np.log(s) + mx) - row[lb])
                MEMORY.write(out, T, np.arange(nrows), np.asarray(res, T))
                return
            x, out, nrows, length, n = a[:5]
            res = []
            with np.errstate(all="ignore"):
                for r in range(nrows):
                    seg = MEMORY.read(x, T, np.arange(r * length, min(r * length + length, n)))
                    if kind in ("sum", "mean"):
                        acc = seg.sum(dtype=T)
                        if kind == "mean" and a[5] > 0:
                            acc = acc / T.type(a[5])
                    else:
                        if seg.size == 0:
                            raise FakeCudaError(f"{name}: empty row")
                        acc = (np.max if kind == "max" else np.min)(seg)
                    res.append(acc)
            MEMORY.write(out, T, np.arange(nrows), np.asarray(res, T))
        sig = {"argmax": "PPqq", "argmin": "PPqq", "softmax": "PPqq", "log_softmax": "PPqq",
               "logsumexp": "PPqq", "cross_entropy": "PPPqq", "mean": "PPqqqq"}
        return sig.get(kind, "PPqqq"), reduce_rows
    if op in ("cumsum_rows", "cumprod_rows"):
        def scan(a, block, grid):
            if block != (256, 1, 1):
                raise FakeCudaError(f"{name} needs blockDim (256, 1, 1), got {block}")
            x, out, nrows, length = a
            vals = _contig(x, T, nrows * length).reshape(nrows, length)
            fn = np.cumsum if op == "cumsum_rows" else np.cumprod
            with np.errstate(all="ignore"):
                MEMORY.write(out, T, np.arange(nrows * length), fn(vals, axis=1, dtype=T).ravel())
        return "PPqq", scan
    if op.startswith("sort_"):
        return _sort_emulator(op[5:], T)
    if op == "ldexp":
        def ldexp(a, block, grid):
            x, e, out, n, ndim, meta = a
            mt = _meta(meta, 3 * ndim)
            u = MEMORY.read(x, T, _offsets(n, mt[:ndim], mt[ndim:2 * ndim]))
            k = MEMORY.read(e, np.int64, _offsets(n, mt[:ndim], mt[2 * ndim:]))
            k = np.clip(k, -(2 ** 31 - 1), 2 ** 31 - 1).astype(np.int32)
            with np.errstate(all="ignore"):
                MEMORY.write(out, T, np.arange(n), np.ldexp(u, k).astype(T))
        return "PPPqiP", ldexp
    if op == "interp_segment":
        def interp_segment(a, block, grid):
            x, xp, out, n, m = a
            j = np.searchsorted(_contig(xp, T, m), _contig(x, T, n), side="right") - 1
            MEMORY.write(out, np.int64, np.arange(n), np.clip(j, 0, max(m - 2, 0)))
        return "PPPqq", interp_segment
    if op == "convolve":
        def convolve(a, block, grid):
            x, n, v, m, out, length, start = a
            full = np.convolve(_contig(x, T, n), _contig(v, T, m))     # NumPy's 'full'
            MEMORY.write(out, T, np.arange(length), full[start:start + length].astype(T))
        return "PqPqPqq", convolve
    if op in ("gather", "scatter", "scatter_add"):
        def index(a, block, grid):
            first, second, n, ndim, nidx, meta = a
            head = _meta(meta, 2 * ndim + nidx * (3 + ndim))
            shape, strides = head[:ndim], head[ndim:2 * ndim]
            off = _offsets(n, shape, strides)
            for k in range(nidx):
                ent = head[2 * ndim + k * (3 + ndim):2 * ndim + (k + 1) * (3 + ndim)]
                ptr, length, stride, istr = int(ent[0]), ent[1], ent[2], ent[3:]
                j = MEMORY.read(ptr, np.int64, _offsets(n, shape, istr))
                j = np.where(j < 0, j + length, j)
                off = off + j * stride
            if op == "gather":
                MEMORY.write(second, T, np.arange(n), MEMORY.read(first, T, off))
            elif op == "scatter":
                MEMORY.write(second, T, off, _contig(first, T, n))
            else:
                MEMORY.add_at(second, T, off, _contig(first, T, n))
        return "PPqiiP", index
    return None


def _sort_less(a, ia, b, ib, length):
    """math.cuh's tg_sort_less, elementwise: pads last, then NaN, then value, then position."""
    ap, bp = ia >= length, ib >= length
    an, bn = (a != a) & ~ap, (b != b) & ~bp
    by_value = np.where(a < b, True, np.where(b < a, False, ia < ib))
    by_nan = np.where(an == bn, ia < ib, bn)
    return np.where(ap | bp, np.where(ap == bp, ia < ib, bp),
                    np.where(an | bn, by_nan, by_value))


def _sort_emulator(stage, T):
    """The three bitonic-sort kernels of scan.cu; each step is emulated as the kernel does
    it (every pair (i, i ^ j) of every row compared and swapped), not by sorting."""
    if stage == "init":
        def init(a, block, grid):
            x, vals, pos, rows, length, width = a
            j = np.tile(np.arange(width), rows)
            r = np.repeat(np.arange(rows), width)
            real = j < length
            v = np.zeros(rows * width, T)
            v[real] = MEMORY.read(x, T, (r * length + j)[real])
            MEMORY.write(vals, T, np.arange(rows * width), v)
            MEMORY.write(pos, np.int64, np.arange(rows * width), j)
        return "PPPqqq", init
    if stage == "step":
        def step(a, block, grid):
            vals, pos, rows, length, width, k, j = a
            if width & (width - 1) or not (1 <= j < k <= width):
                raise FakeCudaError(f"sort step with width {width}, k {k}, j {j}")
            n = rows * width
            v = MEMORY.read(vals, T, np.arange(n)).reshape(rows, width)
            p = MEMORY.read(pos, np.int64, np.arange(n)).reshape(rows, width)
            i = np.arange(width)
            partner = i ^ j
            first, second = i[partner > i], partner[partner > i]
            up = (first & k) == 0
            va, pa, vb, pb = v[:, first], p[:, first], v[:, second], p[:, second]
            with np.errstate(invalid="ignore"):
                swap = np.where(up, _sort_less(vb, pb, va, pa, length),
                                _sort_less(va, pa, vb, pb, length))
            v[:, first], v[:, second] = np.where(swap, vb, va), np.where(swap, va, vb)
            p[:, first], p[:, second] = np.where(swap, pb, pa), np.where(swap, pa, pb)
            MEMORY.write(vals, T, np.arange(n), v.ravel())
            MEMORY.write(pos, np.int64, np.arange(n), p.ravel())
        return "PPqqqqq", step
    if stage == "fini":
        def fini(a, block, grid):
            vals, pos, out, out_pos, rows, length, width = a
            src = (np.arange(rows)[:, None] * width + np.arange(length)).ravel()
            MEMORY.write(out, T, np.arange(rows * length), MEMORY.read(vals, T, src))
            MEMORY.write(out_pos, np.int64, np.arange(rows * length),
                         MEMORY.read(pos, np.int64, src))
        return "PPPPqqq", fini
    return None


class Function:
    """A compiled kernel: called like PyCUDA's Function (args, block=, grid=)."""

    def __init__(self, name, signature, emulate):
        self.name, self.signature, self.emulate = name, signature, emulate
        self.launches = 0

    def __call__(self, *args, block, grid=(1, 1), stream=None, shared=0):
        packed = _pack(args)
        if len(packed) != len(self.signature):
            raise FakeCudaError(f"{self.name} takes {len(self.signature)} arguments, got "
                                f"{len(packed)}")
        values = []
        for i, ((kind, value), want) in enumerate(zip(packed, self.signature)):
            if kind not in _KIND[want]:
                raise FakeCudaError(f"{self.name}: argument {i} is packed as {kind!r}, the "
                                    f"kernel reads {want!r}")
            values.append(int(value) if want in "Pqi" else float(value))
        block = tuple(block) + (1,) * (3 - len(block))
        grid = tuple(grid) + (1,) * (3 - len(grid))
        if not 1 <= block[0] * block[1] * block[2] <= 1024:
            raise FakeCudaError(f"{self.name}: bad block {block}")
        if not 1 <= grid[0] < 2 ** 31 or not 1 <= grid[1] <= 65535:
            raise FakeCudaError(f"{self.name}: bad grid {grid}")
        self.launches += 1
        LAUNCHES[self.name] = LAUNCHES.get(self.name, 0) + 1
        self.emulate(values, block, grid)


LAUNCHES: dict = {}


class SourceModule:
    """Compiles nothing: looks the kernel up in the manifest of the .cu file given."""

    def __init__(self, source, no_extern_c=False, options=None, **kwargs):
        from tapegrad_cuda import kernels

        if not no_extern_c:
            raise FakeCudaError("the .cu files declare extern \"C\" themselves: pass "
                                "no_extern_c=True")
        self.file = next((f for f in kernels.source_files() if kernels.source(f) == source),
                         None)
        if self.file is None:
            raise FakeCudaError("SourceModule got a source that is none of the .cu files")
        self.names = set(kernels.expected_kernels()[self.file])

    def get_function(self, name):
        if name not in self.names:
            raise LogicError(f"cuModuleGetFunction failed: named symbol not found ({name} is "
                             f"not in {self.file})")
        found = _emulator(name)
        if found is None:
            raise FakeCudaError(f"the simulator has no emulation of {name}")
        return Function(name, *found)


# ---------------------------------------------------------------------------------------
# cuBLAS through ctypes
# ---------------------------------------------------------------------------------------
class FakeCublas:
    """The cuBLAS entry points matmul calls, reading ctypes arguments like the C ABI."""

    def __init__(self):
        self.calls = []

    @staticmethod
    def _v(arg, ctype):
        if not isinstance(arg, ctype):
            raise FakeCudaError(f"cuBLAS argument {arg!r} is not a {ctype.__name__}")
        return arg.value

    @staticmethod
    def _ref(arg, ctype):
        obj = getattr(arg, "_obj", None)
        if not isinstance(obj, ctype):
            raise FakeCudaError(f"cuBLAS argument {arg!r} is not a pointer to {ctype.__name__}")
        return obj

    def cublasCreate_v2(self, handle_ref):
        self._ref(handle_ref, ctypes.c_void_p).value = 0xC0B1A5
        return 0

    def _gemm(self, dtype, scalar, args, batched):
        v, c_int = self._v, ctypes.c_int
        handle = v(args[0], ctypes.c_void_p)
        ta, tb, m, n, k = (v(a, c_int) for a in args[1:6])
        alpha = self._ref(args[6], scalar).value
        if batched:
            (a, lda, sa, b, ldb, sb, beta, c, ldc, sc, count) = args[7:]
            sa, sb, sc = (v(s, ctypes.c_longlong) for s in (sa, sb, sc))
            count = v(count, c_int)
        else:
            (a, lda, b, ldb, beta, c, ldc), sa, sb, sc, count = args[7:], 0, 0, 0, 1
        a, b, c = (v(p, ctypes.c_void_p) for p in (a, b, c))
        lda, ldb, ldc = (v(x, c_int) for x in (lda, ldb, ldc))
        beta = self._ref(beta, scalar).value
        self.calls.append(dict(ta=ta, tb=tb, m=m, n=n, k=k, lda=lda, ldb=ldb, ldc=ldc,
                               sa=sa, sb=sb, sc=sc, count=count))
        if handle != 0xC0B1A5 or ta not in (0, 1) or tb not in (0, 1):
            return 7
        rows_a, rows_b = (m if ta == 0 else k), (k if tb == 0 else n)
        if lda < max(1, rows_a) or ldb < max(1, rows_b) or ldc < max(1, m):
            return 7                                  # CUBLAS_STATUS_INVALID_VALUE
        ii, jj = np.meshgrid(np.arange(m), np.arange(k), indexing="ij")   # op(A) is m x k
        a_off = ii + jj * lda if ta == 0 else jj + ii * lda
        ii2, jj2 = np.meshgrid(np.arange(k), np.arange(n), indexing="ij")  # op(B) is k x n
        b_off = ii2 + jj2 * ldb if tb == 0 else jj2 + ii2 * ldb
        ic, jc = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
        c_off = ic + jc * ldc
        t = np.arange(count).reshape(-1, 1, 1)
        A = MEMORY.read(a, dtype, (a_off + t * sa).reshape(-1)).reshape(count, m, k)
        B = MEMORY.read(b, dtype, (b_off + t * sb).reshape(-1)).reshape(count, k, n)
        C = (alpha * (A @ B)).astype(dtype)
        if beta != 0:
            C = C + beta * MEMORY.read(c, dtype, (c_off + t * sc).reshape(-1)).reshape(C.shape)
        MEMORY.write(c, dtype, (c_off + t * sc).reshape(-1), C.reshape(-1))
        return 0

    def cublasSgemm_v2(self, *args):
        return self._gemm(np.float32, ctypes.c_float, args, False)

    def cublasDgemm_v2(self, *args):
        return self._gemm(np.float64, ctypes.c_double, args, False)

    def cublasSgemmStridedBatched(self, *args):
        return self._gemm(np.float32, ctypes.c_float, args, True)

    def cublasDgemmStridedBatched(self, *args):
        return self._gemm(np.float64, ctypes.c_double, args, True)


# ---------------------------------------------------------------------------------------
# Installing the fake modules
# ---------------------------------------------------------------------------------------
def modules() -> dict:
    """{module name: module} to put into sys.modules in place of PyCUDA."""
    this = sys.modules[__name__]
    drv = types.ModuleType("pycuda.driver")
    for name in ("Error", "LogicError", "Device", "Context", "init", "memcpy_htod",
                 "memcpy_dtoh", "memcpy_dtod", "memset_d8", "mem_alloc", "DeviceAllocation"):
        setattr(drv, name, getattr(this, name))
    gpuarray = types.ModuleType("pycuda.gpuarray")
    gpuarray.GPUArray, gpuarray.to_gpu, gpuarray.empty = GPUArray, to_gpu, empty
    tools = types.ModuleType("pycuda.tools")
    tools.DeviceMemoryPool = DeviceMemoryPool
    compiler = types.ModuleType("pycuda.compiler")
    compiler.SourceModule = SourceModule
    pkg = types.ModuleType("pycuda")
    pkg.__path__ = []
    pkg.driver, pkg.gpuarray, pkg.tools, pkg.compiler = drv, gpuarray, tools, compiler
    return {"pycuda": pkg, "pycuda.driver": drv, "pycuda.gpuarray": gpuarray,
            "pycuda.tools": tools, "pycuda.compiler": compiler}
