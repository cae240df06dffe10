"""The ``.cu`` kernel sources and the array-level kernels tapegrad calls on ``cuda``.

The manifest part (``expected_kernels()``, ``source()``) needs nothing but the standard
library and is tested on every machine: the tests compile each ``.cu`` file with ``nvcc``
and check that every expected kernel is in the cubin.

``CudaKernels`` holds one kernel per op of the first-party plugins. NEVER RUN ON A GPU so
far: it is tested on the CPU against a PyCUDA simulator (``tests/fakecuda.py``) that
emulates every kernel with NumPy from the ``.cu`` semantics, and compared op by op with
the CPU kernels. Dtype rules follow NumPy exactly: the output dtype of every op is what
the CPU kernel would give, worked out by running the same NumPy function on one-element
stand-ins (cached per dtype combination).

Conventions of every wrapper: arrays may be non-contiguous views (transpose, reshape,
basic indexing and broadcast_to return views); kernels read them through element strides
(``meta`` arrays of int64 on the device) or after a strided copy. Device pointers are
passed as ``numpy.uintp`` (PyCUDA refuses a plain Python int as a kernel argument).
"""

from __future__ import annotations

import math
import operator
import re
from importlib import resources

import numpy as np

# -- the manifest ----------------------------------------------------------------------
SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
          np.dtype(np.int32): "i32", np.dtype(np.int64): "i64", np.dtype(np.bool_): "b8"}
FLOATS = ("f32", "f64")
INTS = ("i32", "i64")
ALL = FLOATS + INTS + ("b8",)
UNARY_FLOAT = ("negative", "abs", "exp", "log", "sqrt", "tanh", "sin", "cos", "sigmoid", "relu",
               "square", "sign", "tan", "sinh", "cosh", "arcsin", "arccos", "arctan",
               "arcsinh", "arccosh", "arctanh", "log1p", "expm1", "log2", "log10", "exp2",
               "reciprocal", "cbrt", "sinc", "deg2rad", "rad2deg", "floor", "ceil", "trunc",
               "rint")
UNARY_INT = ("negative", "abs", "square", "sign", "reciprocal")
# NumPy returns an integer or bool input itself from these (a copy; no kernel needed).
INT_IDENTITY = ("floor", "ceil", "trunc")
PREDICATES = ("isnan", "isinf", "isfinite", "signbit")
BINARY_FLOAT = ("add", "subtract", "multiply", "divide", "power", "maximum", "minimum",
                "bce_logits", "arctan2", "hypot", "logaddexp", "logaddexp2", "copysign",
                "heaviside", "fmax", "fmin", "remainder", "fmod", "floor_divide")
BINARY_INT = ("add", "subtract", "multiply", "maximum", "minimum", "remainder", "fmod",
              "floor_divide")
# Integer fmax/fmin are maximum/minimum (no NaN to skip): their kernels serve; for bool
# (False < True) the four are logical or / and.
INT_ALIAS = {"fmax": "maximum", "fmin": "minimum"}
BOOL_ALIAS = {"maximum": "logical_or", "fmax": "logical_or", "minimum": "logical_and",
              "fmin": "logical_and"}
# Ops tapegrad-elementwise registers under a second NumPy name (numpy.degrees is rad2deg).
ALIASES = {"degrees": "rad2deg", "radians": "deg2rad"}
COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
REDUCE_TYPES = ("f32", "f64", "i64")
NN = ("softmax", "log_softmax", "logsumexp", "cross_entropy")
SCAN_TYPES = REDUCE_TYPES + ("i32",)
SORT_TYPES = FLOATS + INTS
# Ops of the first-party plugins that have no cuda kernel: tapegrad-linalg's
# LAPACK decompositions (cuSOLVER is not wrapped, and a silent round trip through the host
# would hide a copy per call). On cuda they raise the engine's NotImplementedError naming
# the op and the device; move the tensor to the cpu for them (t.cpu()). The functions built
# on them (linalg_slogdet, linalg_qr, linalg_eigh, linalg_svd, ...) raise the same way.
NO_KERNEL = ("linalg_inv", "linalg_det", "_linalg_slogdet", "linalg_solve",
             "linalg_cholesky", "_linalg_qr", "_linalg_eigh", "linalg_eigvalsh",
             "_linalg_eig", "linalg_eigvals", "_linalg_svd", "linalg_svdvals", "linalg_pinv",
             "_linalg_lstsq", "linalg_matrix_rank",
             # tapegrad-nn's convolutions and normalisations (issue 15): no kernels yet.
             "_conv", "_conv_transpose", "_conv_weight", "_standardize", "_rms_scale",
             "_standardize_grad", "_rms_scale_grad",
             # and its activations with kernels of their own (the others are compositions)
             "gelu", "silu", "softplus", "logsigmoid", "_normal_cdf",
             # and the im2col and argmax ops behind its pooling layers
             "_unfold", "_fold", "_max_pool_indices", "_adaptive_max_pool_indices",
             # the fused forward/backward ops of the norms, softmax and recurrences
             # (issue 15 speed work, issue 16 item 2): CPU kernels only; the rules fall back
             # to their composite forms off the CPU
             "_batch_moments", "_channel_affine", "_channel_dot", "_channel_sum",
             "_standardize_backward", "_rms_scale_backward", "_softmax_backward",
             "_log_softmax_backward", "_minus_one_hot", "_gelu_backward",
             "_lstm_sequence", "_lstm_sequence_backward", "_gru_sequence",
             "_gru_sequence_backward", "_pool_gather", "_pool_scatter",
             # the activations' backward ops (issue 16 item 3): Cython kernels, CPU only
             "abs_backward", "cos_backward", "relu_backward", "sigmoid_backward",
             "silu_backward", "sin_backward", "softplus_backward", "sqrt_backward",
             "square_backward", "tanh_backward",
             # complex numbers (issue 18): the cuda device holds no complex arrays, so the
             # ops that take or make them raise NotImplementedError naming op and device
             "real", "imag", "conj", "angle", "complex",
             # np.roots's companion-matrix eigenvalues (helper cx18): LAPACK on the CPU,
             # as linalg_eigvals
             "_roots")
THREADS = 256
MAX_BLOCKS = 65535
MAX_INDEX_ARRAYS = 8          # index.cu keeps per-index offsets in a fixed array


def _binary_names(op, sfx):
    return [f"tg_{op}_{sfx}", f"tg_{op}_strided_{sfx}"]


def expected_kernels() -> dict[str, list[str]]:
    """{.cu file name: the extern "C" kernel names it must define}."""
    ew = []
    for sfx in FLOATS:
        ew += [f"tg_{n}_{sfx}" for n in UNARY_FLOAT]
        ew += [k for n in BINARY_FLOAT for k in _binary_names(n, sfx)]
        ew += [f"tg_{n}_{sfx}" for n in PREDICATES + ("nan_to_num", "round", "ldexp")]
    for sfx in INTS:
        ew += [f"tg_{n}_{sfx}" for n in UNARY_INT]
        ew += [k for n in BINARY_INT for k in _binary_names(n, sfx)]
    for sfx in ALL:
        ew += [k for n in COMPARISONS for k in _binary_names(n, sfx)]
        ew += [f"tg_where_{sfx}", f"tg_fill_{sfx}"]
        ew += [f"tg_cast_{sfx}_{d}" for d in ALL]
    ew += _binary_names("logical_and", "b8") + _binary_names("logical_or", "b8")
    ew.append("tg_logical_not_b8")
    red = [f"tg_{op}_rows_{sfx}" for sfx in REDUCE_TYPES
           for op in ("sum", "max", "min", "argmax", "argmin")]
    red += [f"tg_mean_rows_{sfx}" for sfx in FLOATS]
    index = [f"tg_{op}_{sfx}" for sfx in ALL for op in ("gather", "scatter")]
    index += [f"tg_scatter_add_{sfx}" for sfx in FLOATS]
    nn = [f"tg_{op}_rows_{sfx}" for sfx in FLOATS for op in NN]
    scan = [f"tg_{op}_rows_{sfx}" for sfx in SCAN_TYPES for op in ("cumsum", "cumprod")]
    scan += [f"tg_sort_{stage}_{sfx}" for sfx in SORT_TYPES for stage in ("init", "step", "fini")]
    scan += [f"tg_interp_segment_{sfx}" for sfx in SORT_TYPES]
    scan += [f"tg_convolve_{sfx}" for sfx in FLOATS]
    return {"elementwise.cu": ew, "reduce.cu": red, "index.cu": index, "nn.cu": nn,
            "scan.cu": scan}


def kernel_dir():
    """The folder (a Traversable) that holds the .cu files (package data)."""
    return resources.files(__package__) / "kernels"


def source_files() -> list[str]:
    """The .cu files of the plugin, sorted."""
    return sorted(p.name for p in kernel_dir().iterdir() if p.name.endswith(".cu"))


_INCLUDE = re.compile(r'^#include "(\w+\.cuh)"[ \t]*$', re.M)


def source(name: str, _seen=None) -> str:
    """The text of kernels/<name>, with the headers it includes (``common.cuh``,
    ``math.cuh``) pasted in, each once (so SourceModule and nvcc need no include path)."""
    seen = set() if _seen is None else _seen
    text = (kernel_dir() / name).read_text(encoding="utf-8").replace("#pragma once", "")

    def paste(match):
        header = match.group(1)
        if header in seen:
            return ""
        seen.add(header)
        return source(header, seen)
    return _INCLUDE.sub(paste, text)


def unsupported(op: str, dtype, supported=("float32", "float64")) -> TypeError:
    """The TypeError for an op that has no cuda kernel for `dtype`."""
    return TypeError(f"{op}: dtype {np.dtype(dtype)} is not supported on device 'cuda' (its "
                     f"kernels cover {', '.join(supported)}); convert with .astype(...) first "
                     f"or compute on the cpu")


def suffix(dtype, op: str, allowed=FLOATS) -> str:
    """The kernel name suffix of `dtype`; TypeError naming op, dtype and device if the op
    has no kernel for it."""
    sfx = SUFFIX.get(np.dtype(dtype))
    if sfx not in allowed:
        names = {v: str(k) for k, v in SUFFIX.items()}
        raise unsupported(op, dtype, [names[a] for a in allowed])
    return sfx


# -- shape and stride helpers (plain Python; tested without a GPU) ---------------------
def _elem_strides(arr, shape):
    """Element strides of `arr` read as broadcast to `shape` (0 on broadcast axes)."""
    lead = len(shape) - arr.ndim
    out = [0] * lead
    for dim, (n, st) in enumerate(zip(arr.shape, arr.strides)):
        out.append(0 if n == 1 and shape[lead + dim] != 1 else st // arr.dtype.itemsize)
    return out


def _c_strides(shape):
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(s, 1)
    return out[::-1]


def _c_contiguous(a):
    """`a` as a C-contiguous ndarray of the same shape. NOTE: not np.ascontiguousarray,
    which turns a 0-d array into shape (1,)."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous else a.copy(order="C")


def is_contiguous(arr) -> bool:
    """C-contiguous (strides of length-1 axes do not matter, as in NumPy)."""
    if arr.size == 0:
        return True
    want = _c_strides(arr.shape)
    item = arr.dtype.itemsize
    return all(n == 1 or st == w * item for n, st, w in zip(arr.shape, arr.strides, want))


def _normalize_axes(axis, ndim, op):
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(f"{op}: axis {a} is out of bounds for array of "
                                          f"dimension {ndim}")
        a %= max(ndim, 1)
        if a in out:
            raise ValueError(f"{op}: duplicate value in 'axis'")
        out.append(a)
    return tuple(out)


def _reshape_target(size, shape):
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    shape = tuple(operator.index(s) for s in shape)
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    if math.prod(shape) != size or any(s < 0 for s in shape):
        raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
    return shape


def _stand_in(v):
    """What NumPy's type resolution sees for an input: a 1-element array of the dtype of
    an array (strong), the scalar itself for a Python/NumPy scalar (NEP 50)."""
    dtype = getattr(v, "dtype", None)
    if dtype is not None and not isinstance(v, np.generic):
        return np.ones(1, dtype)
    return v


def _type_key(v):
    dtype = getattr(v, "dtype", None)
    if dtype is not None and not isinstance(v, np.generic):
        return ("a", dtype)
    return ("s", type(v), getattr(v, "dtype", None))


_RESOLVED: dict = {}


def _resolve(key, fn, *args):
    """The dtype `fn` (a NumPy function) gives for these inputs, cached per dtype/type key."""
    k = (key,) + tuple(_type_key(a) for a in args)
    dt = _RESOLVED.get(k)
    if dt is None:
        with np.errstate(all="ignore"):
            dt = fn(*(_stand_in(a) for a in args))
            dt = _RESOLVED[k] = dt if isinstance(dt, np.dtype) else np.asarray(dt).dtype
    return dt


def _ref_sigmoid(x):
    return np.exp(x)


def _ref_relu(x):
    return np.maximum(x, 0)


def _ref_bce(x, t):
    return np.log1p(np.multiply(x, t))


def _power_of_ten(n):
    """10.0**n as NumPy's round computes it (a table to 1e8, then repeated * 10.0), so the
    factor has NumPy's rounding for large n too."""
    if n < 9:
        return float(10 ** n)
    out = 1e9
    for _ in range(n - 9):
        out *= 10.0
    return out


def _ref_round(x):
    return np.round(x)


def _ref_nan_to_num(x):
    return np.nan_to_num(x)


_UFUNCS = {"negative": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log,
           "sqrt": np.sqrt, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
           "sigmoid": _ref_sigmoid, "relu": _ref_relu, "square": np.square, "sign": np.sign,
           "add": np.add, "subtract": np.subtract, "multiply": np.multiply,
           "divide": np.divide, "power": np.power, "maximum": np.maximum,
           "minimum": np.minimum, "bce_logits": _ref_bce,
           "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
           "less_equal": np.less_equal, "greater": np.greater,
           "greater_equal": np.greater_equal, "round": _ref_round,
           "nan_to_num": _ref_nan_to_num, "sinc": np.sinc}
_UFUNCS.update({n: getattr(np, n) for n in UNARY_FLOAT + PREDICATES + BINARY_FLOAT
                if n not in _UFUNCS and n != "bce_logits"})


def _value_pairs(values, ndim):
    """numpy.pad's reading of constant_values: one value, one (before, after) pair, or one
    pair per axis, as ((before, after),) * ndim."""
    x = np.asarray(values)
    if x.ndim < 3 and (x.size == 1 or (x.size == 2 and x.shape != (2, 1))):
        flat = x.ravel()
        return [(flat[0].item(), flat[-1].item())] * ndim
    try:
        pairs = np.broadcast_to(x, (ndim, 2))
    except ValueError:
        raise ValueError(f"constant_values of shape {x.shape} does not fit an array of "
                         f"{ndim} dimensions") from None
    return [(a.item(), b.item()) for a, b in pairs]


class IndexPlan:
    """A NumPy index resolved against an array: the result's shape, the element offset
    and strides of the basic part, and the advanced (integer array) parts."""

    __slots__ = ("shape", "offset", "strides", "arrays", "keep")

    def __init__(self, shape, offset, strides, arrays):
        self.shape = tuple(shape)
        self.offset = offset
        self.strides = list(strides)
        self.arrays = arrays        # [(int64 device array, axis length, axis stride, istrides)]
        self.keep = []


# ---------------------------------------------------------------------------------------
# The kernels. NEVER RUN ON A GPU: tested against tests/fakecuda.py only.
# ---------------------------------------------------------------------------------------
class CudaKernels:
    """Compiled modules (lazily, once) and the array-level kernels tapegrad calls."""

    def __init__(self, device, cublas_library=None):
        self.device = device
        self._modules = {}
        self._functions = {}
        self._cublas = None
        self._cublas_library = cublas_library   # a loaded library (tests), else found lazily

    # -- plumbing ----------------------------------------------------------------------
    def function(self, module: str, name: str):
        """The compiled kernel `name` of kernels/<module> (compiled on first use)."""
        fn = self._functions.get(name)
        if fn is None:
            mod = self._modules.get(module)
            if mod is None:
                from pycuda.compiler import SourceModule

                mod = self._modules[module] = SourceModule(source(module), no_extern_c=True)
            fn = self._functions[name] = mod.get_function(name)
        return fn

    def _launch(self, module, name, n, *args, blocks=None):
        if n == 0:
            return
        if blocks is None:
            blocks = max(1, min(MAX_BLOCKS, -(-n // THREADS)))
        self.function(module, name)(*args, block=(THREADS, 1, 1), grid=(int(blocks), 1))

    @staticmethod
    def ptr(arr):
        """The device address of arr's first element, as a kernel argument."""
        return np.uintp(0 if arr.gpudata is None else int(arr.gpudata))

    def _meta(self, values):
        return self.device.asarray(np.asarray(values, dtype=np.int64).reshape(-1))

    def empty(self, shape, dtype):
        return self.device.empty(tuple(shape), np.dtype(dtype))

    def view(self, x, shape, strides, offset=0):
        """A GPUArray over x's memory: element `strides`, starting `offset` elements in."""
        shape = tuple(int(s) for s in shape)
        if math.prod(shape) == 0 or x.gpudata is None:
            return self.empty(shape, x.dtype)
        item = x.dtype.itemsize
        return self.device.gpuarray.GPUArray(
            shape, x.dtype, gpudata=int(x.gpudata) + int(offset) * item,
            strides=tuple(int(s) * item for s in strides), base=x)

    def operand(self, v, dtype=None):
        """v (a GPUArray or a number) as a GPUArray of `dtype` (cast when it differs)."""
        if not isinstance(v, self.device.gpuarray.GPUArray):
            return self.device.asarray(np.asarray(v, dtype=dtype))
        if dtype is not None and v.dtype != np.dtype(dtype):
            return self.cast(v, dtype)
        return v

    def copy_into(self, dst, src):
        """dst[...] = src, broadcasting src and casting to dst's dtype (dst may be a view)."""
        src = self.operand(src)
        shape = dst.shape
        while src.ndim > len(shape) and src.shape[0] == 1:   # NumPy drops leading ones
            src = self.view(src, src.shape[1:], _elem_strides(src, src.shape)[1:])
        np.broadcast_shapes(src.shape, shape)
        if tuple(np.broadcast_shapes(src.shape, shape)) != tuple(shape):
            raise ValueError(f"could not broadcast input array from shape {src.shape} into "
                             f"shape {shape}")
        s, d = suffix(src.dtype, "copy", ALL), suffix(dst.dtype, "copy", ALL)
        if dst.size:
            meta = self._meta(list(shape) + _elem_strides(src, shape)
                              + _elem_strides(dst, shape))
            self._launch("elementwise.cu", f"tg_cast_{s}_{d}", dst.size, self.ptr(src),
                         self.ptr(dst), np.int64(dst.size), np.int32(len(shape)),
                         self.ptr(meta))
        return dst

    def contiguous(self, x):
        """x itself when C-contiguous, else a contiguous copy."""
        if is_contiguous(x):
            return x
        return self.copy_into(self.empty(x.shape, x.dtype), x)

    def cast(self, x, dtype):
        """A contiguous copy of x converted to `dtype` (NumPy's unsafe casting)."""
        return self.copy_into(self.empty(x.shape, dtype), x)

    def fill(self, out, value):
        sfx = suffix(out.dtype, "fill", ALL)
        self._launch("elementwise.cu", f"tg_fill_{sfx}", out.size, self.ptr(out),
                     np.int64(out.size), np.float64(value))
        return out

    # -- elementwise ---------------------------------------------------------------------
    def unary(self, name, op=None):
        """The kernel of unary op `name` (NumPy's dtype rules; ints promote where NumPy's
        do); `op` is the name errors use (an alias such as degrees), default `name`."""
        ref = _UFUNCS[name]
        op = op or name
        allowed = FLOATS + INTS if name in UNARY_INT else FLOATS

        def kernel(x):
            out_dtype = _resolve(name, ref, x)
            if name in INT_IDENTITY and out_dtype.kind in "biu":
                return self.copy(x)
            sfx = suffix(out_dtype, op, allowed)
            x = self.contiguous(self.operand(x, out_dtype))
            out = self.empty(x.shape, out_dtype)
            self._launch("elementwise.cu", f"tg_{name}_{sfx}", x.size, self.ptr(x),
                         self.ptr(out), np.int64(x.size))
            return out
        kernel.__name__ = f"cuda_{op}"
        return kernel

    def predicate(self, name):
        """isnan / isinf / isfinite / signbit (bool result). Integer and bool inputs need no
        kernel: never NaN or infinite, and signbit of an integer is x < 0."""
        def kernel(x):
            x = self.operand(x)
            if x.dtype.kind in "biu":
                if name == "signbit" and x.dtype.kind == "i":
                    return self._binary("less", x, 0, x.dtype, np.bool_, ALL, op=name)
                return self.fill(self.empty(x.shape, np.bool_), name == "isfinite")
            sfx = suffix(x.dtype, name)
            x = self.contiguous(x)
            out = self.empty(x.shape, np.bool_)
            self._launch("elementwise.cu", f"tg_{name}_{sfx}", x.size, self.ptr(x),
                         self.ptr(out), np.int64(x.size))
            return out
        kernel.__name__ = f"cuda_{name}"
        return kernel

    def nan_to_num(self, x, copy=True, nan=0.0, posinf=None, neginf=None):
        """numpy.nan_to_num: NaN, +inf, -inf replaced (None: the dtype's largest / most
        negative finite value). Integer and bool inputs come back unchanged (a copy)."""
        if not copy:       # as the CPU kernel: NumPy's copy=False would write into x
            raise ValueError("copy=False (replacing the values in place) is not supported; "
                             "use x = tg.nan_to_num(x, ...)")
        x = self.operand(x)
        dtype = _resolve("nan_to_num", _ref_nan_to_num, x)
        if dtype.kind in "biu":
            return self.copy(x)
        sfx = suffix(dtype, "nan_to_num")
        info = np.finfo(dtype)
        x = self.contiguous(self.operand(x, dtype))
        out = self.empty(x.shape, dtype)
        self._launch("elementwise.cu", f"tg_nan_to_num_{sfx}", x.size, self.ptr(x),
                     self.ptr(out), np.int64(x.size), np.float64(nan),
                     np.float64(info.max if posinf is None else posinf),
                     np.float64(info.min if neginf is None else neginf))
        return out

    def round(self, x, decimals=0):
        """numpy.round: rint(x * 10**decimals) / 10**decimals in x's dtype (for negative
        decimals rint(x / 10**-decimals) * 10**-decimals), as NumPy computes it. An integer
        array is returned as is for decimals >= 0, else rounded in float64 and cast back
        (NumPy's way: half to even, 15 -> 20 and 25 -> 20 for decimals=-1)."""
        x = self.operand(x)
        decimals = operator.index(decimals)
        dtype = _resolve("round", _ref_round, x)
        if dtype.kind in "biu":
            if decimals >= 0:
                return self.copy(x)
            return self.cast(self.round(self.cast(x, np.float64), decimals), dtype)
        sfx = suffix(dtype, "round")
        x = self.contiguous(self.operand(x, dtype))
        out = self.empty(x.shape, dtype)
        self._launch("elementwise.cu", f"tg_round_{sfx}", x.size, self.ptr(x), self.ptr(out),
                     np.int64(x.size), np.float64(_power_of_ten(abs(decimals))),
                     np.int32(decimals < 0))
        return out

    def ldexp(self, x1, x2):
        """numpy.ldexp: x1 * 2**x2 for integer x2, broadcast; NumPy's float dtype (an
        integer x1 gives float64)."""
        e = x2 if isinstance(x2, self.device.gpuarray.GPUArray) else np.asarray(x2)
        if e.dtype.kind not in "biu":
            raise TypeError(f"the exponent x2 must be integers, got dtype {e.dtype}")
        dtype = _resolve("ldexp", np.ldexp, x1, x2)       # NumPy refuses uint64 here
        sfx = suffix(dtype, "ldexp")
        x, e = self.operand(x1, dtype), self.operand(e, np.int64)
        shape = tuple(np.broadcast_shapes(x.shape, e.shape))
        out = self.empty(shape, dtype)
        if out.size:
            meta = self._meta(list(shape) + _elem_strides(x, shape) + _elem_strides(e, shape))
            self._launch("elementwise.cu", f"tg_ldexp_{sfx}", out.size, self.ptr(x),
                         self.ptr(e), self.ptr(out), np.int64(out.size),
                         np.int32(len(shape)), self.ptr(meta))
        return out

    def _binary(self, name, a, b, compute, out_dtype, allowed, op=None):
        sfx = suffix(compute, op or name, allowed)
        a, b = self.operand(a, compute), self.operand(b, compute)
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        out = self.empty(shape, out_dtype)
        n = out.size
        if n == 0:
            return out
        if a.shape == b.shape == shape and is_contiguous(a) and is_contiguous(b):
            self._launch("elementwise.cu", f"tg_{name}_{sfx}", n, self.ptr(a), self.ptr(b),
                         self.ptr(out), np.int64(n))
        else:
            meta = self._meta(list(shape) + _elem_strides(a, shape) + _elem_strides(b, shape))
            self._launch("elementwise.cu", f"tg_{name}_strided_{sfx}", n, self.ptr(a),
                         self.ptr(b), self.ptr(out), np.int64(n), np.int32(len(shape)),
                         self.ptr(meta))
        return out

    def binary(self, name):
        """The kernel of binary op `name`, with NumPy broadcasting and type promotion."""
        ref = _UFUNCS[name]
        compare = name in COMPARISONS
        allowed = ALL if compare else (FLOATS + INTS if name in BINARY_INT + tuple(INT_ALIAS)
                                       else FLOATS)

        def kernel(a, b):
            out_dtype = _resolve(name, ref, a, b)
            compute = _resolve("result_type", np.result_type, a, b) if compare else out_dtype
            if compute.kind == "b" and name in BOOL_ALIAS:
                return self._binary(BOOL_ALIAS[name], a, b, compute, out_dtype, ("b8",),
                                    op=name)
            kname = INT_ALIAS.get(name, name) if compute.kind in "iu" else name
            return self._binary(kname, a, b, compute, out_dtype, allowed, op=name)
        kernel.__name__ = f"cuda_{name}"
        return kernel

    def logical(self, name):
        """logical_and / logical_or / logical_not: inputs read as bool (nonzero is true)."""
        def as_bool(v):
            return self.operand(v, np.bool_)

        if name == "logical_not":
            def kernel(x):
                x = self.contiguous(as_bool(x))
                out = self.empty(x.shape, np.bool_)
                self._launch("elementwise.cu", "tg_logical_not_b8", x.size, self.ptr(x),
                             self.ptr(out), np.int64(x.size))
                return out
        else:
            def kernel(a, b):
                return self._binary(name, as_bool(a), as_bool(b), np.bool_, np.bool_, ("b8",))
        kernel.__name__ = f"cuda_{name}"
        return kernel

    def where(self, cond, x, y):
        """numpy.where(cond, x, y) with broadcasting; cond is read as bool."""
        out_dtype = _resolve("where", lambda a, b: np.where(np.ones(1, bool), a, b), x, y)
        sfx = suffix(out_dtype, "where", ALL)
        c = self.operand(cond, np.bool_)
        x, y = self.operand(x, out_dtype), self.operand(y, out_dtype)
        shape = tuple(np.broadcast_shapes(c.shape, x.shape, y.shape))
        out = self.empty(shape, out_dtype)
        if out.size:
            meta = self._meta(list(shape) + _elem_strides(c, shape) + _elem_strides(x, shape)
                              + _elem_strides(y, shape))
            self._launch("elementwise.cu", f"tg_where_{sfx}", out.size, self.ptr(c),
                         self.ptr(x), self.ptr(y), self.ptr(out), np.int64(out.size),
                         np.int32(len(shape)), self.ptr(meta))
        return out

    def clip(self, x, a_min=None, a_max=None):
        """numpy.clip as maximum then minimum (NaN propagates, as NumPy's)."""
        out_dtype = _resolve("clip", lambda v, lo, hi: np.clip(v, lo, hi), x, a_min, a_max)
        out = self.operand(x, out_dtype)
        if a_min is not None:
            out = self._binary("maximum", out, a_min, out_dtype, out_dtype, FLOATS + INTS)
        if a_max is not None:
            out = self._binary("minimum", out, a_max, out_dtype, out_dtype, FLOATS + INTS)
        return out if out is not x else self.copy(x)

    # -- shapes and copies ---------------------------------------------------------------
    def copy(self, x):
        """A fresh contiguous copy of x."""
        x = self.operand(x)
        return self.copy_into(self.empty(x.shape, x.dtype), x)

    def astype(self, x, dtype):
        return self.cast(self.operand(x), dtype)

    def zeros_like(self, x):
        return self.device.zeros(x.shape, x.dtype)

    def ones_like(self, x):
        return self.device.ones(x.shape, x.dtype)

    def broadcast_to(self, x, shape):
        """x broadcast to `shape`: a view with stride 0 on the broadcast axes."""
        x = self.operand(x)
        shape = tuple(int(s) for s in ((shape,) if np.isscalar(shape) else shape))
        dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), x.shape, (0,) * x.ndim)
        np.broadcast_to(dummy, shape)           # NumPy's checks and messages
        return self.view(x, shape, _elem_strides(x, shape))

    def reshape(self, x, shape):
        """x with a new shape: a view when x is contiguous, else a copy."""
        shape = _reshape_target(x.size, shape)
        x = self.contiguous(x)
        return self.view(x, shape, _c_strides(shape))

    def transpose(self, x, axes=None):
        """x with its axes permuted: always a view (strides permuted)."""
        if axes is None:
            perm = tuple(range(x.ndim))[::-1]
        else:
            perm = _normalize_axes(axes, x.ndim, "transpose")
            if len(perm) != x.ndim:
                raise ValueError("axes don't match array")
        st = _elem_strides(x, x.shape)
        return self.view(x, [x.shape[a] for a in perm], [st[a] for a in perm])

    def _moved_last(self, x, axes):
        """(contiguous x with `axes` moved last, kept shape, rows, row length)."""
        kept = [a for a in range(x.ndim) if a not in axes]
        perm = tuple(kept) + tuple(axes)
        if perm != tuple(range(x.ndim)):
            x = self.transpose(x, perm)
        x = self.contiguous(x)
        rows = math.prod(x.shape[:len(kept)])
        return x, perm, rows, math.prod(x.shape[len(kept):])

    def sum_to_shape(self, a, shape):
        shape = tuple(shape)
        lead = a.ndim - len(shape)
        if lead < 0:
            raise ValueError(f"cannot sum shape {a.shape} down to the longer shape {shape}")
        if any(s != 1 and a.shape[lead + i] != s for i, s in enumerate(shape)):
            raise ValueError(f"cannot sum shape {a.shape} down to shape {shape}")
        axes = tuple(range(lead)) + tuple(
            lead + i for i, s in enumerate(shape) if s == 1 and a.shape[lead + i] != 1)
        out = self.reduce("sum", a, axes, None, True) if axes else a
        return self.reshape(out, shape) if out.shape != shape else out

    # -- reductions ----------------------------------------------------------------------
    def reduce(self, name, x, axis=None, dtype=None, keepdims=False):
        """sum / mean / max / min over `axis` (None, an int or a tuple), as NumPy."""
        x = self.operand(x)
        if name == "sum":
            out_dtype = _resolve(("sum", dtype), lambda v: np.sum(v, dtype=dtype), x)
        elif name == "mean":
            out_dtype = _resolve(("mean", dtype), lambda v: np.mean(v, dtype=dtype), x)
        else:
            out_dtype = x.dtype
        sfx = suffix(out_dtype, name, FLOATS if name == "mean" else REDUCE_TYPES)
        axes = _normalize_axes(axis, x.ndim, name)
        out_shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape)) if keepdims \
            else tuple(s for i, s in enumerate(x.shape) if i not in axes)
        xs, _, rows, length = self._moved_last(self.operand(x, out_dtype), axes)
        out = self.empty(out_shape, out_dtype)
        if rows == 0:
            return out
        if length == 0:
            if name in ("max", "min"):
                raise ValueError(f"zero-size array to reduction operation "
                                 f"{'maximum' if name == 'max' else 'minimum'} which has no "
                                 f"identity")
            return self.fill(out, np.nan if name == "mean" else 0)
        self._reduce_rows(name, sfx, xs, out, rows, length)
        return out

    def _reduce_rows(self, name, sfx, xs, out, rows, length):
        first = "sum" if name == "mean" else name
        if rows == 1 and length > 8 * THREADS:
            # A long single row is split over many blocks first, then finished by one.
            parts = min(1024, -(-length // (8 * THREADS)))
            chunk = -(-length // parts)
            parts = -(-length // chunk)
            partial = self.empty((parts,), xs.dtype)
            self._launch("reduce.cu", f"tg_{first}_rows_{sfx}", parts, self.ptr(xs),
                         self.ptr(partial), np.int64(parts), np.int64(chunk),
                         np.int64(length), blocks=min(parts, MAX_BLOCKS))
            xs, length_now, n = partial, parts, parts
        else:
            length_now, n = length, rows * length
        extra = (np.int64(length),) if name == "mean" else ()
        self._launch("reduce.cu", f"tg_{name}_rows_{sfx}", rows, self.ptr(xs), self.ptr(out),
                     np.int64(rows), np.int64(length_now), np.int64(n), *extra,
                     blocks=min(rows, MAX_BLOCKS))

    def reduction(self, name):
        """The kernel of op `name` (sum, mean: with dtype; max, min: without)."""
        if name in ("sum", "mean"):
            def kernel(x, axis=None, dtype=None, keepdims=False):
                return self.reduce(name, x, axis, dtype, keepdims)
        else:
            def kernel(x, axis=None, keepdims=False):
                return self.reduce(name, x, axis, None, keepdims)
        kernel.__name__ = f"cuda_{name}"
        return kernel

    def arg_reduction(self, name):
        """argmax / argmin (int64 result; first occurrence; NaN counts as the extreme)."""
        def kernel(x, axis=None, keepdims=False):
            x = self.operand(x)
            sfx = suffix(x.dtype, name, REDUCE_TYPES)
            if axis is None:
                xs, rows, length = self.contiguous(x), 1, x.size
                out_shape = (1,) * x.ndim if keepdims else ()
            else:
                axes = _normalize_axes(axis, x.ndim, name)
                xs, _, rows, length = self._moved_last(x, axes)
                out_shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape)) \
                    if keepdims else tuple(s for i, s in enumerate(x.shape) if i not in axes)
            if length == 0:
                raise ValueError(f"attempt to get {name} of an empty sequence")
            out = self.empty(out_shape, np.int64)
            self._launch("reduce.cu", f"tg_{name}_rows_{sfx}", rows, self.ptr(xs),
                         self.ptr(out), np.int64(rows), np.int64(length),
                         blocks=min(max(rows, 1), MAX_BLOCKS))
            return out
        kernel.__name__ = f"cuda_{name}"
        return kernel

    def _int_range(self, arr):
        """(min, max) of a non-empty int64 device array (reads two numbers back)."""
        arr = self.contiguous(arr)
        lo = self.reduce("min", arr)
        hi = self.reduce("max", arr)
        return int(self.device.to_numpy(lo)), int(self.device.to_numpy(hi))

    # -- indexing ------------------------------------------------------------------------
    def plan(self, x, index) -> IndexPlan:
        """Resolve a NumPy index (basic, advanced or mixed) against x's shape and strides."""
        gpu = self.device.gpuarray.GPUArray
        entries = list(index) if isinstance(index, tuple) else [index]
        norm, masks = [], []
        for e in entries:
            if isinstance(e, gpu) and e.dtype == np.bool_:
                e = self.device.to_numpy(e)          # a mask's result shape needs the host
            if isinstance(e, list):
                e = np.asarray(e)
            if isinstance(e, (bool, np.bool_)):
                e = np.asarray(e)
            if isinstance(e, np.ndarray) and e.dtype == np.bool_:
                if e.ndim == 0:
                    raise IndexError("cuda: 0-d boolean indices are not supported")
                masks.append((len(norm), e.shape))
                norm.extend(np.nonzero(e))
                continue
            if isinstance(e, np.ndarray) and e.dtype.kind not in "iu":
                raise IndexError("arrays used as indices must be of integer (or boolean) type")
            if isinstance(e, gpu) and e.dtype.kind not in "iu":
                raise IndexError("arrays used as indices must be of integer (or boolean) type")
            norm.append(e)
        consumed = sum(1 for e in norm if e is not None and e is not Ellipsis)
        if consumed > x.ndim:
            raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, "
                             f"but {consumed} were indexed")
        if sum(1 for e in norm if e is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        for at, mshape in masks:
            def used(es):
                return sum(1 for e in es if e is not None and e is not Ellipsis)
            ell = any(e is Ellipsis for e in norm[:at] if not isinstance(e, (np.ndarray, gpu)))
            first = x.ndim - used(norm[at:]) if ell else used(norm[:at])
            for d, n in enumerate(mshape):
                if x.shape[first + d] != n:
                    raise IndexError(
                        f"boolean index did not match indexed array along axis {first + d}; "
                        f"size of axis is {x.shape[first + d]} but size of corresponding "
                        f"boolean axis is {n}")
        if Ellipsis in [e for e in norm if not isinstance(e, (np.ndarray, gpu))]:
            at = next(i for i, e in enumerate(norm) if e is Ellipsis)
            norm[at:at + 1] = [slice(None)] * (x.ndim - consumed)
        else:
            norm += [slice(None)] * (x.ndim - consumed)
        advanced = any(isinstance(e, (np.ndarray, gpu)) for e in norm)
        st = _elem_strides(x, x.shape)
        offset, axis = 0, 0
        basic = []        # (position in norm, length, stride) of every output axis it makes
        arrays = []       # (position in norm, array, axis length, axis stride)
        for pos, e in enumerate(norm):
            if e is None:
                basic.append((pos, 1, 0))
                continue
            n, s = x.shape[axis], st[axis]
            if isinstance(e, slice):
                start, stop, step = e.indices(n)
                basic.append((pos, len(range(start, stop, step)), step * s))
                offset += start * s if len(range(start, stop, step)) else 0
            elif isinstance(e, (np.ndarray, gpu)) or (advanced and not isinstance(e, slice)):
                arrays.append((pos, e if isinstance(e, (np.ndarray, gpu))
                               else np.asarray(operator.index(e)), n, s))
            else:
                i = operator.index(e)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
                offset += (i % n) * s
            axis += 1
        if not arrays:
            return IndexPlan([b[1] for b in basic], offset, [b[2] for b in basic], [])
        try:
            bshape = tuple(np.broadcast_shapes(*(a[1].shape for a in arrays)))
        except ValueError:
            raise IndexError("shape mismatch: indexing arrays could not be broadcast together "
                             "with shapes " + " ".join(str(a[1].shape) for a in arrays)) from None
        positions = [a[0] for a in arrays]
        adjacent = positions == list(range(positions[0], positions[-1] + 1))
        if adjacent:
            before = [b for b in basic if b[0] < positions[0]]
            after = [b for b in basic if b[0] > positions[0]]
        else:
            before, after = [], basic
        nb = len(before)
        shape = [b[1] for b in before] + list(bshape) + [b[1] for b in after]
        strides = [b[2] for b in before] + [0] * len(bshape) + [b[2] for b in after]
        plan = IndexPlan(shape, offset, strides, [])
        if len(arrays) > MAX_INDEX_ARRAYS:
            raise IndexError(f"cuda: at most {MAX_INDEX_ARRAYS} index arrays are supported")
        for _, arr, n, s in arrays:
            if isinstance(arr, np.ndarray):
                if arr.size and (arr.min() < -n or arr.max() >= n):
                    bad = arr[(arr < -n) | (arr >= n)].flat[0]
                    raise IndexError(f"index {bad} is out of bounds for axis with size {n}")
                dev = self.device.asarray(np.asarray(arr, dtype=np.int64, order="C"))
            else:
                dev = self.operand(arr, np.int64)
                if dev.size:
                    lo, hi = self._int_range(dev)
                    if lo < -n or hi >= n:
                        raise IndexError(f"index {hi if hi >= n else lo} is out of bounds for "
                                         f"axis with size {n}")
            ist = _elem_strides(dev, bshape)
            istr = [0] * nb + ist + [0] * len(after)
            plan.arrays.append((dev, n, s, istr))
        return plan

    def _plan_meta(self, plan):
        values = list(plan.shape) + list(plan.strides)
        for dev, n, s, istr in plan.arrays:
            values += [int(self.ptr(dev)), n, s] + list(istr)
        return self._meta(values)

    def _index_launch(self, kind, sfx, plan, base, src_or_dst_first, other):
        n = math.prod(plan.shape)
        if n == 0:
            return
        meta = self._plan_meta(plan)
        item = base.dtype.itemsize
        base_ptr = np.uintp(int(self.ptr(base)) + plan.offset * item)
        first, second = (base_ptr, self.ptr(other)) if kind == "gather" else \
            (self.ptr(other), base_ptr)
        self._launch("index.cu", f"tg_{kind}_{sfx}", n, first, second, np.int64(n),
                     np.int32(len(plan.shape)), np.int32(len(plan.arrays)), self.ptr(meta))

    def getitem(self, x, index):
        """x[index]: a view for basic indexing, a gather for advanced indexing."""
        plan = self.plan(x, index)
        if not plan.arrays:
            return self.view(x, plan.shape, plan.strides, plan.offset)
        out = self.empty(plan.shape, x.dtype)
        self._index_launch("gather", suffix(x.dtype, "getitem", ALL), plan, x, True, out)
        return out

    def getitem_grad(self, g, index, shape):
        """Zeros of `shape` with g added at `index` (repeated indices accumulate)."""
        out = self.device.zeros(tuple(shape), g.dtype)
        plan = self.plan(out, index)
        sfx = suffix(g.dtype, "_getitem_grad")
        v = self.contiguous(self.broadcast_to(g, plan.shape))
        self._index_launch("scatter_add", sfx, plan, out, False, v)
        return out

    def assign(self, arr, index, value):
        """arr[index] = value in place (value broadcast and cast to arr's dtype)."""
        plan = self.plan(arr, index)
        sfx = suffix(arr.dtype, "setitem", ALL)
        v = self.operand(value)
        v = self.copy_into(self.empty(plan.shape, arr.dtype), v)
        self._index_launch("scatter", sfx, plan, arr, False, v)
        return arr

    def setitem(self, x, value, index):
        """A copy of x with x[index] = value."""
        return self.assign(self.copy(x), index, value)

    # -- joining -------------------------------------------------------------------------
    def concatenate(self, *xs, axis=0):
        """numpy.concatenate: each input copied into its slice of the output."""
        xs = [self.operand(x) for x in xs]
        dtype = np.result_type(*[x.dtype for x in xs])
        if axis is None:
            xs = [self.reshape(x, (-1,)) for x in xs]
            axis = 0
        nd = xs[0].ndim
        if nd == 0:
            raise ValueError("zero-dimensional arrays cannot be concatenated")
        (ax,) = _normalize_axes(axis, nd, "concatenate")
        for i, x in enumerate(xs):
            if x.ndim != nd:
                raise ValueError(
                    f"all the input array dimensions except for the concatenation axis must "
                    f"match exactly, but the array at index 0 has {nd} dimension(s) and the "
                    f"array at index {i} has {x.ndim} dimension(s)")
            for d in range(nd):
                if d != ax and x.shape[d] != xs[0].shape[d]:
                    raise ValueError(
                        f"all the input array dimensions except for the concatenation axis "
                        f"must match exactly, but along dimension {d}, the array at index 0 "
                        f"has size {xs[0].shape[d]} and the array at index {i} has size "
                        f"{x.shape[d]}")
        shape = list(xs[0].shape)
        shape[ax] = sum(x.shape[ax] for x in xs)
        out = self.empty(shape, dtype)
        st, start = _c_strides(shape), 0
        for x in xs:
            part = list(shape)
            part[ax] = x.shape[ax]
            if x.size:
                self.copy_into(self.view(out, part, st, start * st[ax]), x)
            start += x.shape[ax]
        return out

    def stack(self, *xs, axis=0):
        """numpy.stack: the inputs (one shape) joined along a new axis."""
        xs = [self.operand(x) for x in xs]
        if any(x.shape != xs[0].shape for x in xs):
            raise ValueError("all input arrays must have the same shape")
        (ax,) = _normalize_axes(axis, xs[0].ndim + 1, "stack")
        new = xs[0].shape[:ax] + (1,) + xs[0].shape[ax:]
        return self.concatenate(*[self.view(x, new, _elem_strides(x, x.shape)[:ax] + [0]
                                            + _elem_strides(x, x.shape)[ax:])
                                  for x in xs], axis=ax)

    # -- scans, sorting and index ops along an axis ----------------------------------------
    def _along(self, x, axis, op):
        """(x, axis index) for an op along one axis; axis None means the flattened array."""
        x = self.operand(x)
        if axis is None:
            return self.reshape(x, (-1,)), 0
        return x, _normalize_axes(axis, x.ndim, op)[0]

    def _back(self, out, perm):
        """`out` (computed with the axes in order `perm`) with the original axis order."""
        if perm == tuple(range(len(perm))):
            return out
        return self.transpose(out, tuple(int(i) for i in np.argsort(perm)))

    def cumulative(self, name):
        """cumsum / cumprod along `axis` (None: the flattened array), NumPy's dtypes (an
        int32 or bool input accumulates in int64, as the CPU's)."""
        ref = np.cumsum if name == "cumsum" else np.cumprod

        def kernel(x, axis=None, dtype=None):
            x, ax = self._along(x, axis, name)
            out_dtype = _resolve((name, dtype), lambda v: ref(v, dtype=dtype), x)
            sfx = suffix(out_dtype, name, SCAN_TYPES)
            xs, perm, rows, length = self._moved_last(self.operand(x, out_dtype), (ax,))
            out = self.empty(xs.shape, out_dtype)
            if rows and length:
                self._launch("scan.cu", f"tg_{name}_rows_{sfx}", rows, self.ptr(xs),
                             self.ptr(out), np.int64(rows), np.int64(length),
                             blocks=min(rows, MAX_BLOCKS))
            return self._back(out, perm)
        kernel.__name__ = f"cuda_{name}"
        return kernel

    def sort_with_positions(self, x, axis=-1, op="sort"):
        """(the stable sort of x along `axis`, the positions the values came from): NaN
        last, ties in their original order (NumPy's kind="stable"), for every kind."""
        x, ax = self._along(x, axis, op)
        if x.dtype == np.bool_:           # False < True: sorted as int32, cast back
            out, pos = self.sort_with_positions(self.cast(x, np.int32), ax, op)
            return self.cast(out, np.bool_), pos
        sfx = suffix(x.dtype, op, SORT_TYPES)
        xs, perm, rows, length = self._moved_last(x, (ax,))
        out, pos = self.empty(xs.shape, x.dtype), self.empty(xs.shape, np.int64)
        if rows and length:
            width = 1 << (length - 1).bit_length()       # the next power of two
            n = rows * width
            vals, work = self.empty((n,), x.dtype), self.empty((n,), np.int64)
            sizes = (np.int64(rows), np.int64(length), np.int64(width))
            self._launch("scan.cu", f"tg_sort_init_{sfx}", n, self.ptr(xs), self.ptr(vals),
                         self.ptr(work), *sizes)
            k = 2
            while k <= width:
                j = k // 2
                while j:
                    self._launch("scan.cu", f"tg_sort_step_{sfx}", n, self.ptr(vals),
                                 self.ptr(work), *sizes, np.int64(k), np.int64(j))
                    j //= 2
                k *= 2
            self._launch("scan.cu", f"tg_sort_fini_{sfx}", rows * length, self.ptr(vals),
                         self.ptr(work), self.ptr(out), self.ptr(pos), *sizes)
        return self._back(out, perm), self._back(pos, perm)

    @staticmethod
    def _sort_arguments(kind, order, stable):
        """The cpu op's checks: order= refused; kind and stable checked by NumPy itself on
        a one-element stand-in (its values and messages)."""
        if order is not None:
            raise ValueError("order= names fields of a structured array, which tapegrad "
                             "tensors are not; pass order=None")
        np.sort(np.zeros(1), kind=kind, stable=stable)

    def sort(self, a, axis=-1, kind=None, order=None, stable=None):
        """numpy.sort (always the stable order: equal values cannot be told apart)."""
        self._sort_arguments(kind, order, stable)
        return self.sort_with_positions(a, axis, "sort")[0]

    def argsort(self, a, axis=-1, kind=None, order=None, stable=None):
        """numpy.argsort in the stable order (ties by position) whatever `kind` is."""
        self._sort_arguments(kind, order, stable)
        a = self.operand(a)
        if a.ndim == 0:                  # NumPy argsorts a 0-d array as a 1-d one
            a = self.reshape(a, (1,))
        return self.sort_with_positions(a, axis, "argsort")[1]

    def _index_array(self, indices, error=IndexError):
        """indices (a device array, a host array, a list or a number) as an integer array
        for an index (a device one stays on the device); `error` (NumPy's type for the
        op: IndexError for take_along_axis, TypeError for take) for other dtypes."""
        idx = indices if isinstance(indices, self.device.gpuarray.GPUArray) \
            else np.asarray(indices)
        if idx.dtype.kind not in "iu":
            raise error(f"indices must be an integer array, got dtype {idx.dtype}")
        return idx

    def _along_index(self, indices, axis, shape, op):
        """(the advanced index that take_along_axis(arr, indices, axis) reads arr of
        `shape` at, the shape it indexes: arr's, or (size,) for axis=None): NumPy's own
        construction, a broadcast arange for every other axis."""
        idx = self._index_array(indices)
        if axis is None:
            if idx.ndim != 1:
                raise ValueError("when axis=None, `indices` must have a single dimension.")
            return (idx,), (math.prod(shape),)
        ax = _normalize_axes(axis, len(shape), op)[0]
        if idx.ndim != len(shape):
            raise ValueError(f"`indices` (shape {idx.shape}) and `arr` (shape "
                             f"{tuple(shape)}) must have the same number of dimensions")
        return tuple(idx if d == ax else
                     np.arange(n).reshape((1,) * d + (n,) + (1,) * (len(shape) - d - 1))
                     for d, n in enumerate(shape)), tuple(shape)

    def take_along_axis(self, arr, indices, axis=-1):
        """numpy.take_along_axis: one gather (index.cu)."""
        arr = self.operand(arr)
        index, shape = self._along_index(indices, axis, arr.shape, "take_along_axis")
        return self.getitem(self.reshape(arr, shape), index)

    def take_along_axis_grad(self, g, indices, *, shape, axis=-1):
        """Zeros of `shape` with g added where take_along_axis reads (a scatter-add)."""
        index, target = self._along_index(indices, axis, shape, "_take_along_axis_grad")
        return self.reshape(self.getitem_grad(g, index, target), shape)

    def put_along_axis(self, arr, indices, values, *, axis):
        """A copy of arr with values (broadcast to indices) written where take_along_axis
        reads. NOTE: where indices repeat a position, one of the writes wins (NumPy's: the
        last), as for setitem."""
        out = self.copy(arr)
        index, target = self._along_index(indices, axis, out.shape, "_put_along_axis")
        self.assign(self.reshape(out, target), index, values)
        return out

    def _take_index(self, indices, n, mode):
        """take's index for an axis of length n: mode 'wrap' and 'clip' applied (on the
        host for host indices, with the remainder/clip kernels for device ones)."""
        if mode not in ("raise", "wrap", "clip"):
            raise ValueError(f"mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
        idx = indices if isinstance(indices, self.device.gpuarray.GPUArray) \
            else np.asarray(indices)
        if idx.dtype == np.bool_:            # NumPy casts bool indices to 0 / 1
            idx = self.cast(idx, np.int64) if not isinstance(idx, np.ndarray) \
                else idx.astype(np.int64)
        idx = self._index_array(idx, TypeError)
        if mode == "raise":
            return idx
        if n == 0:
            if math.prod(idx.shape):
                raise IndexError("cannot do a non-empty take from an empty axis")
            return idx
        if isinstance(idx, np.ndarray):
            return idx % n if mode == "wrap" else np.clip(idx, 0, n - 1)
        if mode == "wrap":
            return self.binary("remainder")(idx, np.int64(n))
        return self.clip(idx, 0, n - 1)

    def take(self, a, indices, axis=None, mode="raise"):
        """numpy.take: one gather along the axis (a flattened for axis=None)."""
        a, ax = self._along(a, axis, "take")
        idx = self._take_index(indices, a.shape[ax], mode)
        return self.getitem(a, (slice(None),) * ax + (idx,))

    def take_grad(self, g, indices, *, shape, axis=None, mode="raise"):
        """Zeros of `shape` with g added where take reads (repeats accumulate)."""
        target = (math.prod(shape),) if axis is None else tuple(shape)
        ax = 0 if axis is None else _normalize_axes(axis, len(shape), "_take_grad")[0]
        idx = self._take_index(indices, target[ax], mode)
        out = self.getitem_grad(g, (slice(None),) * ax + (idx,), target)
        return self.reshape(out, shape)

    def tensordot(self, a, b, axes=2):
        """numpy.tensordot: both operands transposed and reshaped to matrices, one GEMM
        (matmul), the result reshaped; `axes` read and checked as NumPy does."""
        a, b = self.operand(a), self.operand(b)
        try:
            iter(axes)
        except TypeError:
            n = operator.index(axes)
            axes_a, axes_b = list(range(-n, 0)), list(range(n))
        else:
            axes_a, axes_b = axes
        axes_a = list(axes_a) if isinstance(axes_a, (list, tuple, np.ndarray)) else [axes_a]
        axes_b = list(axes_b) if isinstance(axes_b, (list, tuple, np.ndarray)) else [axes_b]
        if len(axes_a) != len(axes_b) or any(
                a.shape[i] != b.shape[j] for i, j in zip(axes_a, axes_b)):
            raise ValueError(f"shape-mismatch for sum (a {a.shape}, b {b.shape}, axes {axes!r})")
        axes_a = [int(i) % a.ndim for i in axes_a]
        axes_b = [int(j) % b.ndim for j in axes_b]
        free_a = [i for i in range(a.ndim) if i not in axes_a]
        free_b = [j for j in range(b.ndim) if j not in axes_b]
        k = math.prod(a.shape[i] for i in axes_a)
        m = math.prod(a.shape[i] for i in free_a)
        n = math.prod(b.shape[j] for j in free_b)
        am = self.reshape(self.transpose(a, free_a + axes_a), (m, k))
        bm = self.reshape(self.transpose(b, axes_b + free_b), (k, n))
        out = self.matmul(am, bm)
        return self.reshape(out, tuple(a.shape[i] for i in free_a)
                            + tuple(b.shape[j] for j in free_b))

    def interp_segment(self, x, xp):
        """For each x, the segment j of the increasing xp with xp[j] <= x < xp[j + 1],
        clipped to 0 .. len(xp) - 2 (tg.interp's): NumPy's binary search per element."""
        x, xp = self.operand(x), self.operand(xp)
        dtype = _resolve("result_type", np.result_type, x, xp)
        if dtype == np.bool_:
            dtype = np.dtype(np.int32)
        sfx = suffix(dtype, "_interp_segment", SORT_TYPES)
        x = self.contiguous(self.operand(x, dtype))
        xp = self.contiguous(self.reshape(self.operand(xp, dtype), (-1,)))
        out = self.empty(x.shape, np.int64)
        if out.size and xp.size == 0:
            return self.fill(out, 0)
        self._launch("scan.cu", f"tg_interp_segment_{sfx}", x.size, self.ptr(x),
                     self.ptr(xp), self.ptr(out), np.int64(x.size), np.int64(xp.size))
        return out

    def convolve(self, a, v, mode="full"):
        """numpy.convolve of two 1-D arrays: one thread per output element (scan.cu), the
        mode read and the inputs checked by tapegrad-shape's own helpers."""
        from tapegrad_shape.numerics import _check_1d, _full_start, _mode

        a, v = self.operand(a), self.operand(v)
        _check_1d(a, v, "convolve")
        mode = _mode(mode, "convolve")
        dtype = _resolve("convolve", np.convolve, a, v)
        sfx = suffix(dtype, "convolve")
        a, v = self.contiguous(self.operand(a, dtype)), self.contiguous(self.operand(v, dtype))
        n, m = a.shape[0], v.shape[0]
        length = {"full": n + m - 1, "same": max(n, m), "valid": abs(n - m) + 1}[mode]
        out = self.empty((length,), dtype)
        self._launch("scan.cu", f"tg_convolve_{sfx}", length, self.ptr(a), np.int64(n),
                     self.ptr(v), np.int64(m), self.ptr(out), np.int64(length),
                     np.int64(_full_start(n, m, mode)))
        return out

    def unwrap_correction(self, p, *, discont, axis, period):
        """What np.unwrap adds to p along `axis`, NumPy's steps on the device kernels (diff,
        mod, the boundary fix, the running sum)."""
        p = self.operand(p)
        (ax,) = _normalize_axes(axis, p.ndim, "_unwrap_correction")
        n = p.shape[ax]
        lead = (slice(None),) * ax
        dd = self.binary("subtract")(self.getitem(p, lead + (slice(1, None),)),
                                     self.getitem(p, lead + (slice(None, max(n - 1, 0)),)))
        if discont is None:
            discont = period / 2
        dtype = _resolve("result_type", np.result_type, dd, period)
        if dtype.kind in "iu":
            high, rem = divmod(period, 2)
            ambiguous = rem == 0
        else:
            high, ambiguous = period / 2, True
        low = -high
        ddmod = self.binary("add")(self.binary("remainder")(
            self.binary("subtract")(dd, low), period), low)
        if ambiguous:
            edge = self.logical("logical_and")(self.binary("equal")(ddmod, low),
                                               self.binary("greater")(dd, 0))
            ddmod = self.cast(self.where(edge, high, ddmod), ddmod.dtype)
        correct = self.binary("subtract")(ddmod, dd)
        small = self.binary("less")(self.unary("abs")(dd), discont)
        correct = self.cast(self.where(small, 0, correct), correct.dtype)
        total = self.cumulative("cumsum")(correct, axis=ax)
        first = self.device.zeros(p.shape[:ax] + (1,) + p.shape[ax + 1:], correct.dtype)
        return self.cast(self.concatenate(first, total, axis=ax), dtype)

    def host_fallbacks(self) -> dict:
        """Kernels that run through the host: the private ops behind tapegrad-shape's order
        statistics (median, quantile, ...): a sort-based plan and the gather/scatter-add
        along the last axis that reads the selected values.

        NOTE: a deliberate simplification, as einsum: correct on cuda, not fast (each call
        copies its operands to the host and the result back)."""
        def through_host(name):
            def run(*xs, **params):
                # NOTE: imported here, not above: tapegrad-cuda does not depend on
                # tapegrad-shape (its ops are only called when that plugin is installed).
                from tapegrad_shape import statistics

                kernel = getattr(statistics, f"{name}_kernel")
                host = [self.device.to_numpy(x) if isinstance(x, self.device.gpuarray.GPUArray)
                        else x for x in xs]
                return self.device.asarray(_c_contiguous(kernel(*host, **params)))
            return run

        return {name: through_host(name) for name in (
            "_quantile_index", "_quantile_weight", "_take_last", "_take_last_grad")}

    def _take_axis(self, x, idx, ax):
        """x gathered along axis `ax` with the host index array `idx` (one gather launch)."""
        return self.getitem(x, (slice(None),) * ax + (np.asarray(idx, np.int64),))

    def roll(self, a, shift, axis=None):
        """numpy.roll: per rolled axis, two slices copied into the output."""
        a = self.operand(a)
        if axis is None:
            return self.reshape(self.roll(self.reshape(a, (-1,)), shift, 0), a.shape)
        pairs = np.broadcast(shift, axis)
        if pairs.ndim > 1:
            raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
        shifts = {}
        for sh, ax in pairs:
            (ax,) = _normalize_axes(int(ax), a.ndim, "roll")
            shifts[ax] = shifts.get(ax, 0) + operator.index(sh)
        out = a
        for ax, sh in sorted(shifts.items()):
            n = out.shape[ax]
            if n == 0 or sh % n == 0:
                continue
            sh %= n
            res = self.empty(out.shape, out.dtype)
            lead = (slice(None),) * ax
            self.copy_into(self.getitem(res, lead + (slice(sh, None),)),
                           self.getitem(out, lead + (slice(None, n - sh),)))
            self.copy_into(self.getitem(res, lead + (slice(None, sh),)),
                           self.getitem(out, lead + (slice(n - sh, None),)))
            out = res
        return self.copy(a) if out is a else out

    def repeat(self, a, repeats, axis=None):
        """numpy.repeat: a gather along the axis with np.repeat(arange(n), repeats) (NumPy
        checks repeats: negative counts, lengths that do not broadcast)."""
        a, ax = self._along(a, axis, "repeat")
        if isinstance(repeats, self.device.gpuarray.GPUArray):
            repeats = self.device.to_numpy(repeats)
        return self._take_axis(a, np.repeat(np.arange(a.shape[ax]), repeats), ax)

    def tile(self, A, reps):
        """numpy.tile: one strided copy of a view that reads A with stride 0 on the tiled
        axes, reshaped (no index arrays)."""
        A = self.operand(A)
        try:
            tup = tuple(operator.index(r) for r in reps)
        except TypeError:
            tup = (operator.index(reps),)
        if any(r < 0 for r in tup):
            raise ValueError("negative dimensions are not allowed")
        nd = max(len(tup), A.ndim)
        tup = (1,) * (nd - len(tup)) + tup
        shape = (1,) * (nd - A.ndim) + A.shape
        st = [0] * (nd - A.ndim) + _elem_strides(A, A.shape)
        inter_shape, inter_st = [], []
        for r, n, s in zip(tup, shape, st):
            inter_shape += [r, n]
            inter_st += [0, s]
        out = self.copy_into(self.empty(inter_shape, A.dtype), self.view(A, inter_shape, inter_st))
        return self.reshape(out, tuple(r * n for r, n in zip(tup, shape)))

    def pad(self, array, pad_width, mode="constant", **kwargs):
        """numpy.pad for the modes the cpu op has: constant, edge, reflect, symmetric, wrap.

        constant: the input copied into the middle of the output, then each axis's two pad
        slabs filled in axis order (so, as NumPy's, a later axis's value wins in the
        corners). The other modes are index maps that act on each axis separately: one
        gather per padded axis with np.pad(arange(n), widths, mode) as the index."""
        from tapegrad_shape.rearrange import pad_arguments     # the cpu op's own checks

        x = self.operand(array)
        widths = pad_arguments(x.ndim, pad_width, mode, kwargs)
        if mode == "constant":
            values = _value_pairs(kwargs.get("constant_values", 0), x.ndim)
            shape = tuple(n + b + e for n, (b, e) in zip(x.shape, widths))
            out = self.empty(shape, x.dtype)
            inner = tuple(slice(b, b + n) for n, (b, _) in zip(x.shape, widths))
            if x.size:
                self.copy_into(self.getitem(out, inner), x)
            for ax, ((b, e), (vb, ve)) in enumerate(zip(widths, values)):
                lead = (slice(None),) * ax
                rest = inner[ax + 1:]
                for part, value in ((slice(0, b), vb), (slice(shape[ax] - e, None), ve)):
                    view = self.getitem(out, lead + (part,) + rest)
                    if view.size:
                        self.copy_into(view, self.operand(np.asarray(value)))
            return out
        out = x
        for ax, (b, e) in enumerate(widths):
            if b == e == 0:
                continue
            if x.shape[ax] == 0:
                raise ValueError(f"can't extend empty axis {ax} using modes other than "
                                 f"'constant' or 'empty'")
            out = self._take_axis(out, np.pad(np.arange(x.shape[ax]), (b, e), mode=mode), ax)
        return self.copy(x) if out is x else out

    # -- matmul (cuBLAS) -----------------------------------------------------------------
    def cublas(self):
        """The cuBLAS handle (loading the library on first use)."""
        if self._cublas is None:
            from . import cublas

            lib = self._cublas_library or cublas.load_library()
            self._cublas = cublas.Cublas(lib)
        return self._cublas

    def _gemm_operand(self, a, batch_shape):
        """(array, op, ld, batch stride) of a (..., r, c) operand for the swapped call."""
        from .cublas import CUBLAS_OP_N, CUBLAS_OP_T

        r, c = a.shape[-2:]
        nb = math.prod(batch_shape)
        if a.shape[:-2] != tuple(batch_shape) and math.prod(a.shape[:-2]) != 1:
            a = self.contiguous(self.broadcast_to(a, tuple(batch_shape) + (r, c)))
        st = _elem_strides(a, a.shape)
        sr, sc = st[-2], st[-1]
        sb = 0
        if nb > 1 and math.prod(a.shape[:-2]) > 1:
            dims = [(n, s) for n, s in zip(a.shape[:-2], st[:-2]) if n != 1]
            sb = dims[-1][1]
            ok = all(dims[i][1] == dims[i + 1][1] * dims[i + 1][0] for i in range(len(dims) - 1))
            if not ok or sb < r * c:
                a = self.contiguous(a)
                return self._gemm_operand(a, batch_shape)
        if (sc == 1 or c == 1) and (ld := (sr if r > 1 else c)) >= max(c, 1):
            return a, CUBLAS_OP_N, ld, sb
        if (sr == 1 or r == 1) and (ld := (sc if c > 1 else r)) >= max(r, 1):
            return a, CUBLAS_OP_T, ld, sb
        return self._gemm_operand(self.contiguous(a), batch_shape)

    def matmul(self, x, y):
        """numpy.matmul through cuBLAS: vectors, matrices, broadcast batches."""
        from tapegrad_linalg.ops import _matmul_mismatch

        xs, ys = np.shape(x), np.shape(y)
        why = _matmul_mismatch(xs, ys)
        if why is not None:
            raise ValueError(why)
        dtype = _resolve("matmul", np.matmul, x, y)
        suffix(dtype, "matmul")
        x, y = self.operand(x, dtype), self.operand(y, dtype)
        if x.ndim == 1:
            x = self.view(x, (1,) + x.shape, [0] + _elem_strides(x, x.shape))
        if y.ndim == 1:
            y = self.view(y, y.shape + (1,), _elem_strides(y, y.shape) + [0])
        batch = tuple(np.broadcast_shapes(x.shape[:-2], y.shape[:-2]))
        m, k = x.shape[-2:]
        n = y.shape[-1]
        out = self.empty(batch + (m, n), dtype)
        final = batch + ((m,) if len(xs) > 1 else ()) + ((n,) if len(ys) > 1 else ())
        if out.size and k == 0:
            self.fill(out, 0)
        elif out.size:
            a, opa, lda, sba = self._gemm_operand(x, batch)
            b, opb, ldb, sbb = self._gemm_operand(y, batch)
            # Row-major C = A B is column-major C^T = B^T A^T: pass B first (see cublas.py).
            self.cublas().gemm(dtype, opb, opa, n, m, k, int(self.ptr(b)), ldb,
                               int(self.ptr(a)), lda, int(self.ptr(out)), n,
                               stride_a=sbb, stride_b=sba, stride_c=m * n,
                               batch=math.prod(batch))
        return self.view(out, final, _c_strides(final)) if final != out.shape else out

    def vector_norm(self, x, ord=2, axis=None, keepdims=False):
        """numpy.linalg.vector_norm from the elementwise and reduction kernels, in NumPy's
        steps: sqrt(sum(x * x)) for 2, sum(|x|), max/min(|x|) for +-inf, the count of
        nonzero entries for 0, sum(|x|**p) ** (1/p) otherwise (integers as float64)."""
        if isinstance(ord, str):
            raise ValueError(f"linalg_vector_norm: invalid norm order {ord!r} for vectors")
        x = self.operand(x)
        dtype = _resolve("vector_norm", np.linalg.vector_norm, x)
        x = self.operand(x, dtype)

        def total(v):
            return self.reduce("sum", v, axis, None, keepdims)
        if ord == 2:
            return self.unary("sqrt")(total(self.binary("multiply")(x, x)))
        if ord == 0:
            return total(self.cast(self.binary("not_equal")(x, 0), dtype))
        ax = self.unary("abs")(x)
        if ord == 1:
            return total(ax)
        if ord in (math.inf, -math.inf):
            return self.reduce("max" if ord > 0 else "min", ax, axis, None, keepdims)
        with np.errstate(divide="ignore"):
            inverse = np.reciprocal(np.float64(ord)).astype(dtype)
        return self.binary("power")(total(self.binary("power")(ax, float(ord))), inverse)

    def einsum(self, *xs, subscripts):
        """_einsum through the host (np.einsum), then back to the device.

        NOTE: a deliberate simplification: einsum is a stretch op and its contraction
        order is NumPy's optimizer; doing it on the device would mean re-implementing
        that planner over transposes and batched GEMMs."""
        from tapegrad_linalg.ops import _einsum_kernel

        host = [self.device.to_numpy(x) if isinstance(x, self.device.gpuarray.GPUArray)
                else x for x in xs]
        return self.device.asarray(np.asarray(_einsum_kernel(*host, subscripts=subscripts), order="C"))

    # -- nn ------------------------------------------------------------------------------
    def _rows_op(self, name, x, axis):
        """Run the row kernel `name` over `axis` (moved last); returns (out, perm, rows)."""
        x = self.operand(x)
        dtype = _resolve("nn", np.exp, x)
        sfx = suffix(dtype, name)
        axes = _normalize_axes(axis, x.ndim, name)
        xs, perm, rows, length = self._moved_last(self.operand(x, dtype), axes)
        return xs, sfx, perm, rows, length

    def softmax_like(self, name):
        """softmax / log_softmax over `axis` (an int, a tuple or None), one block per row."""
        def kernel(x, axis=-1):
            xs, sfx, perm, rows, length = self._rows_op(name, x, axis)
            out = self.empty(xs.shape, xs.dtype)
            if rows and length:
                self._launch("nn.cu", f"tg_{name}_rows_{sfx}", rows, self.ptr(xs),
                             self.ptr(out), np.int64(rows), np.int64(length),
                             blocks=min(rows, MAX_BLOCKS))
            if perm == tuple(range(len(perm))):
                return out
            return self.transpose(out, tuple(int(i) for i in np.argsort(perm)))
        kernel.__name__ = f"cuda_{name}"
        return kernel

    def logsumexp(self, x, axis=None, keepdims=False):
        xs, sfx, perm, rows, length = self._rows_op("logsumexp", x, axis)
        axes = _normalize_axes(axis, x.ndim, "logsumexp")
        out_shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape)) if keepdims \
            else tuple(s for i, s in enumerate(x.shape) if i not in axes)
        if length == 0 and rows:
            raise ValueError("zero-size array to reduction operation maximum which has no "
                             "identity")
        out = self.empty(out_shape, xs.dtype)
        if rows:
            self._launch("nn.cu", f"tg_logsumexp_rows_{sfx}", rows, self.ptr(xs),
                         self.ptr(out), np.int64(rows), np.int64(length),
                         blocks=min(rows, MAX_BLOCKS))
        return out

    def _loss_reduce(self, loss, reduction):
        if reduction == "mean":
            return self.reduce("mean", loss)
        if reduction == "sum":
            return self.reduce("sum", loss)
        return loss

    def cross_entropy(self, x, t, *, reduction="mean", weight=None, ignore_index=-100,
                      label_smoothing=0.0):
        """cross_entropy with integer labels (one fused pass per row) or probabilities.
        With a class weight, label smoothing or an ignore_index other than -100, the cpu
        kernel runs through the host (NOTE: correct, not fast: as einsum)."""
        from tapegrad_nn.functional import (_check_cross_entropy, _check_reduction,
                                            _cross_entropy_kernel)

        if weight is not None or label_smoothing != 0.0 or ignore_index != -100:
            host = [self.device.to_numpy(v) if isinstance(v, self.device.gpuarray.GPUArray)
                    else v for v in (x, t, weight)]
            return self.device.asarray(_c_contiguous(_cross_entropy_kernel(
                host[0], host[1], reduction=reduction, weight=host[2],
                ignore_index=ignore_index, label_smoothing=label_smoothing)))
        _check_reduction(reduction)
        x = self.operand(x)
        labels = _check_cross_entropy(x, t)
        if not labels:
            lsm = self.softmax_like("log_softmax")(x, axis=-1)
            picked = self.reduce("sum", self.binary("multiply")(t, lsm), -1)
            return self._loss_reduce(self.binary("subtract")(0.0, picked), reduction)
        dtype = _resolve("nn", np.exp, x)
        sfx = suffix(dtype, "cross_entropy")
        n_classes = x.shape[-1]
        lab = self.contiguous(self.operand(t, np.int64))
        if lab.size:
            lo, hi = self._int_range(lab)
            if lo < 0 or hi >= n_classes:
                raise IndexError(f"class label {lo if lo < 0 else hi} is out of range for "
                                 f"{n_classes} classes (labels must be in [0, {n_classes}))")
        xs = self.contiguous(self.operand(x, dtype))
        rows = lab.size
        loss = self.empty(lab.shape, dtype)
        if rows:
            self._launch("nn.cu", f"tg_cross_entropy_rows_{sfx}", rows, self.ptr(xs),
                         self.ptr(lab), self.ptr(loss), np.int64(rows), np.int64(n_classes),
                         blocks=min(rows, MAX_BLOCKS))
        return self._loss_reduce(loss, reduction)

    def softmax_minus_one_hot(self, x, t):
        """softmax over the last axis, minus 1 at each row's label (cross_entropy's
        gradient): the softmax kernel, then a scatter-add of -1 at (row, label)."""
        p = self.softmax_like("softmax")(x, axis=-1)
        n_classes = p.shape[-1]
        lab = self.contiguous(self.operand(t, np.int64))
        rows = lab.size
        lab = lab.reshape((rows,))
        minus = self.getitem_grad(self.operand(np.full(rows, -1, dtype=p.dtype)),
                                  (self.operand(np.arange(rows, dtype=np.int64)), lab),
                                  (rows, n_classes))
        return self.binary("add")(self.contiguous(p).reshape(rows, n_classes),
                                  minus).reshape(p.shape)

    def bce_with_logits(self, x, t, *, reduction="mean"):
        """binary_cross_entropy_with_logits: one fused elementwise kernel, then the reduction."""
        from tapegrad_nn.functional import _check_reduction, _check_same_shape

        _check_reduction(reduction)
        _check_same_shape(x, t, "logits")
        loss = self.binary("bce_logits")(x, t)
        return self._loss_reduce(loss, reduction)

    def linear(self, x, w, b=None):
        """x @ w.T + b: w.T is a view that cuBLAS reads with op T (no copy)."""
        if w.ndim != 2 or x.ndim == 0 or x.shape[-1] != w.shape[1]:
            raise ValueError(
                f"weight must be (out_features, in_features) with in_features equal to the "
                f"last axis of x: x {x.shape} and weight {w.shape} do not fit")
        out = self.matmul(x, self.transpose(w))
        return out if b is None else self.binary("add")(out, b)

    # -- the table -----------------------------------------------------------------------
    def table(self) -> dict:
        """{op name: kernel} for every op of the first-party plugins on cuda."""
        out = {name: self.unary(name) for name in UNARY_FLOAT}
        out.update({alias: self.unary(name, op=alias) for alias, name in ALIASES.items()})
        out.update({name: self.predicate(name) for name in PREDICATES})
        out.update({"nan_to_num": self.nan_to_num, "round": self.round})
        out.update({name: self.cumulative(name) for name in ("cumsum", "cumprod")})
        out.update({"sort": self.sort, "argsort": self.argsort,
                    "take_along_axis": self.take_along_axis,
                    "_take_along_axis_grad": self.take_along_axis_grad,
                    "_put_along_axis": self.put_along_axis, "take": self.take,
                    "_take_grad": self.take_grad, "tensordot": self.tensordot, "pad": self.pad,
                    "ldexp": self.ldexp, "convolve": self.convolve,
                    "_interp_segment": self.interp_segment,
                    "_unwrap_correction": self.unwrap_correction,
                    "roll": self.roll, "repeat": self.repeat, "tile": self.tile})
        out.update({name: self.binary(name) for name in BINARY_FLOAT if name != "bce_logits"})
        out.update({name: self.binary(name) for name in COMPARISONS})
        out.update({name: self.logical(name) for name in ("logical_and", "logical_or",
                                                           "logical_not")})
        out.update({name: self.reduction(name) for name in ("sum", "mean", "max", "min")})
        out.update({name: self.arg_reduction(name) for name in ("argmax", "argmin")})
        out.update({name: self.softmax_like(name) for name in ("softmax", "log_softmax")})
        out.update({
            "where": self.where, "clip": self.clip,
            "broadcast_to": self.broadcast_to, "sum_to_shape": self.sum_to_shape,
            "astype": self.astype, "zeros_like": self.zeros_like, "ones_like": self.ones_like,
            "copy": self.copy, "reshape": self.reshape, "transpose": self.transpose,
            "getitem": lambda x, index: self.getitem(x, index),
            "_getitem_grad": lambda g, index, shape: self.getitem_grad(g, index, shape),
            "setitem": lambda x, value, index: self.setitem(x, value, index),
            "concatenate": self.concatenate, "stack": self.stack,
            "matmul": self.matmul, "_einsum": self.einsum,
            "linalg_vector_norm": self.vector_norm,
            "_logsumexp": self.logsumexp,
            "cross_entropy": self.cross_entropy,
            "_softmax_minus_one_hot": self.softmax_minus_one_hot,
            "binary_cross_entropy_with_logits": self.bce_with_logits, "linear": self.linear,
        })
        out.update(self.host_fallbacks())
        return out
