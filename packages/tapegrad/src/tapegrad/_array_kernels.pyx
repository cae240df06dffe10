# cython: language_level=3, boundscheck=False, wraparound=False
"""C loops over NumPy arrays that the core's kernels call where NumPy's own call costs more
than the arithmetic: the sum over a leading axis (a bias's gradient) and a transposed copy
(matmul's gradient through a small weight). The contract is in _array_kernels.pxd: NumPy's
bits, or NumPy's call.

NOTE: raw pointers from NumPy's C API, not typed memoryviews: acquiring a memoryview costs
about 0.15 us per array, as much as these loops take on W2's (32, 128) arrays.
"""

cimport cython
cimport numpy as cnp
from cpython.object cimport PyObject
from cython cimport floating

import numpy as np

cnp.import_array()

cdef extern from *:
    """
    #if defined(__SSE2__) || defined(_M_X64)
    #include <emmintrin.h>
    #define TG_HAVE_SSE2 1
    #else
    #define TG_HAVE_SSE2 0
    #endif

    /* out (k x n, C order) = the transpose of a (n x k, C order), in square tiles so both
       sides stay in cache; inside a tile, B x B blocks through registers (4x4 floats,
       2x2 doubles, SSE2: every x86-64; a scalar copy of the block elsewhere), the ragged
       edges element by element. Copies only: the values are a's bits. */
    #define TG_TILE 32

    static inline void tg_block_f32(const float* a, float* out, Py_ssize_t i, Py_ssize_t j,
                                    Py_ssize_t n, Py_ssize_t k) {
    #if TG_HAVE_SSE2
        __m128 r0 = _mm_loadu_ps(a + (i + 0) * k + j);
        __m128 r1 = _mm_loadu_ps(a + (i + 1) * k + j);
        __m128 r2 = _mm_loadu_ps(a + (i + 2) * k + j);
        __m128 r3 = _mm_loadu_ps(a + (i + 3) * k + j);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        _mm_storeu_ps(out + (j + 0) * n + i, r0);
        _mm_storeu_ps(out + (j + 1) * n + i, r1);
        _mm_storeu_ps(out + (j + 2) * n + i, r2);
        _mm_storeu_ps(out + (j + 3) * n + i, r3);
    #else
        for (int p = 0; p < 4; p++)
            for (int q = 0; q < 4; q++) out[(j + q) * n + i + p] = a[(i + p) * k + j + q];
    #endif
    }

    static inline void tg_block_f64(const double* a, double* out, Py_ssize_t i, Py_ssize_t j,
                                    Py_ssize_t n, Py_ssize_t k) {
    #if TG_HAVE_SSE2
        __m128d r0 = _mm_loadu_pd(a + (i + 0) * k + j);
        __m128d r1 = _mm_loadu_pd(a + (i + 1) * k + j);
        _mm_storeu_pd(out + (j + 0) * n + i, _mm_unpacklo_pd(r0, r1));
        _mm_storeu_pd(out + (j + 1) * n + i, _mm_unpackhi_pd(r0, r1));
    #else
        for (int p = 0; p < 2; p++)
            for (int q = 0; q < 2; q++) out[(j + q) * n + i + p] = a[(i + p) * k + j + q];
    #endif
    }

    /* One tiled transpose per element type T, with blocks of B x B by BLOCK. */
    #define TG_TRANSPOSE(NAME, T, B, BLOCK)                                               \
        static void NAME(const T* a, T* out, Py_ssize_t n, Py_ssize_t k) {                \
            for (Py_ssize_t i0 = 0; i0 < n; i0 += TG_TILE) {                              \
                Py_ssize_t i1 = i0 + TG_TILE < n ? i0 + TG_TILE : n, i = i0;             \
                for (Py_ssize_t j0 = 0; j0 < k; j0 += TG_TILE) {                          \
                    Py_ssize_t j1 = j0 + TG_TILE < k ? j0 + TG_TILE : k, j;              \
                    for (i = i0; i + B <= i1; i += B) {                                   \
                        for (j = j0; j + B <= j1; j += B) BLOCK(a, out, i, j, n, k);      \
                        for (; j < j1; j++)                                              \
                            for (Py_ssize_t p = i; p < i + B; p++) out[j * n + p] = a[p * k + j]; \
                    }                                                                    \
                    for (; i < i1; i++)                                                  \
                        for (j = j0; j < j1; j++) out[j * n + i] = a[i * k + j];         \
                }                                                                        \
            }                                                                            \
        }
    TG_TRANSPOSE(tg_transpose_f32, float, 4, tg_block_f32)
    TG_TRANSPOSE(tg_transpose_f64, double, 2, tg_block_f64)
    """
    void tg_transpose_f32(const float* a, float* out, Py_ssize_t n, Py_ssize_t k) noexcept nogil
    void tg_transpose_f64(const double* a, double* out, Py_ssize_t n, Py_ssize_t k) noexcept nogil
    object PyObject_Vectorcall(object callable, PyObject** args, size_t nargsf, PyObject* kwnames)




cdef inline int _plain_float(object a) noexcept:
    """The typenum of `a` if it is an exact ndarray the loops take (float32 or float64,
    C-contiguous, aligned, native byte order), else -1."""
    cdef int tn
    if type(a) is not cnp.ndarray:
        return -1
    tn = cnp.PyArray_TYPE(<cnp.ndarray>a)
    if tn != cnp.NPY_FLOAT and tn != cnp.NPY_DOUBLE:
        return -1
    if not (cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a) and cnp.PyArray_ISALIGNED(<cnp.ndarray>a)
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>a)):
        return -1
    return tn


cdef void _sum_rows(floating* a, floating* out, Py_ssize_t m, Py_ssize_t n) noexcept nogil:
    # out[j] = ((0 + a[0, j]) + a[1, j]) + ...: NumPy's order for a reduction over a
    # leading axis (its iterator keeps the contiguous axis inner and adds row after row
    # into the result, which starts at add's identity, 0: so a column of -0.0 sums to
    # +0.0, as np.add.reduce's does).
    cdef Py_ssize_t i, j
    cdef floating zero = 0
    for j in range(n):
        out[j] = zero
    for i in range(m):
        for j in range(n):
            out[j] = out[j] + a[i * n + j]


# Above this many elements NumPy's own reduction is as fast or faster (its loops are
# dispatched to AVX2/AVX-512; this one is compiled for baseline x86-64): W3's (256, 2048)
# bias sum takes 49 us there against 73 here, W2's (32, 128) 1.75 against 0.67.
cdef Py_ssize_t _SUM_LOOP_MAX = 16384


cdef object sum_leading_axis(object a):
    """``np.add.reduce(a, 0)`` (what ``a.sum(axis=0)`` runs) for a float32/float64
    C-contiguous ndarray of ndim >= 2 and at most _SUM_LOOP_MAX elements, as one C pass;
    None where NumPy's call should run: fewer than 2 elements in a row (NumPy then reduces
    along the contiguous axis, pairwise), an empty array, or a large one."""
    cdef int tn = _plain_float(a)
    cdef cnp.ndarray arr, out
    cdef Py_ssize_t m, n
    if tn < 0 or cnp.PyArray_NDIM(<cnp.ndarray>a) < 2:
        return None
    arr = <cnp.ndarray>a
    m = cnp.PyArray_DIM(arr, 0)
    if m == 0 or cnp.PyArray_SIZE(arr) > _SUM_LOOP_MAX:
        return None
    n = cnp.PyArray_SIZE(arr) // m
    if n < 2:
        return None
    out = cnp.PyArray_EMPTY(cnp.PyArray_NDIM(arr) - 1, cnp.PyArray_DIMS(arr) + 1, tn, 0)
    if tn == cnp.NPY_FLOAT:
        _sum_rows(<float*>cnp.PyArray_DATA(arr), <float*>cnp.PyArray_DATA(out), m, n)
    else:
        _sum_rows(<double*>cnp.PyArray_DATA(arr), <double*>cnp.PyArray_DATA(out), m, n)
    return out


cdef object transposed_copy(object a):
    """``np.ascontiguousarray(a.T)`` for a 2-D float32/float64 C-contiguous ndarray (its
    values copied, so a's bits), in cache tiles: ~5x faster than NumPy's strided copy
    (docs/linalg.md, "Matmul and the BLAS"); None for anything else."""
    cdef int tn = _plain_float(a)
    cdef cnp.ndarray arr, out
    cdef cnp.npy_intp dims[2]
    cdef Py_ssize_t n, k
    if tn < 0 or cnp.PyArray_NDIM(<cnp.ndarray>a) != 2:
        return None
    arr = <cnp.ndarray>a
    n = cnp.PyArray_DIM(arr, 0)
    k = cnp.PyArray_DIM(arr, 1)
    dims[0] = k
    dims[1] = n
    out = cnp.PyArray_EMPTY(2, dims, tn, 0)
    with nogil:
        if tn == cnp.NPY_FLOAT:
            tg_transpose_f32(<float*>cnp.PyArray_DATA(arr), <float*>cnp.PyArray_DATA(out), n, k)
        else:
            tg_transpose_f64(<double*>cnp.PyArray_DATA(arr), <double*>cnp.PyArray_DATA(out), n, k)
    return out


# Note: [matmul through a transposed copy]
# A linear layer's input gradient is g @ W.T: NumPy hands the BLAS W with a transpose
# flag. NumPy 2.4's OpenBLAS (SkylakeX kernels) has a "direct" sgemm that skips packing,
# for row-major products without transpose flags only (docs/linalg.md, "Matmul and the
# BLAS"), so at small sizes g @ W.T is much slower than the same product on a C-ordered
# copy of W.T: W2's (32, 128) @ (128, 128).T takes 19.1 us as written, 12.6 us as the
# tiled copy above (2.2 us; np.ascontiguousarray: 10.5) and the direct product, one BLAS
# thread. So matmul's CPU kernel multiplies a transposed (F-ordered) float32 y by way of
# its C copy where that measured faster with one thread and no slower with two: x
# C-ordered with at least 16 rows, y at least 64 columns, 65,536 < m * n * k <= 524,288
# (with more work the threaded packed product wins: (256, 128) @ (128, 128).T, 52 against
# 77 us on two threads). Fewer rows (8: 3.9 against 6.2 us), fewer columns and float64
# (no direct dgemm) keep NumPy's call.
# NOTE: the values: each element is the same k-term dot product either way, and OpenBLAS
# 0.3.31 rounds it identically with both layouts at every shape inside these bounds that
# the tests try (not with fewer than 16 rows: another kernel runs there); a BLAS that
# rounds the two layouts differently gives the copy's product, which is as accurate.
# Every path that multiplies two 2-D matrices on the CPU (the op's kernel, its rule's
# shortcut, the engine's matmul_2d fast path, a tg.compile replay) calls this one
# function, so eager, compiled and double backward agree bit for bit.
cdef object _np_matmul = np.matmul
cdef Py_ssize_t _COPY_MIN_ROWS = 16, _COPY_MIN_COLS = 64
cdef double _COPY_MIN_WORK = 65536, _COPY_MAX_WORK = 524288     # m * n * k


cdef object matmul_2d(object x, object y, object out):
    cdef cnp.ndarray xa, ya
    if (type(x) is cnp.ndarray and type(y) is cnp.ndarray
            and cnp.PyArray_NDIM(<cnp.ndarray>x) == 2 and cnp.PyArray_NDIM(<cnp.ndarray>y) == 2):
        xa = <cnp.ndarray>x
        ya = <cnp.ndarray>y
        if (cnp.PyArray_TYPE(xa) == cnp.NPY_FLOAT and cnp.PyArray_TYPE(ya) == cnp.NPY_FLOAT
                and cnp.PyArray_DIM(xa, 0) >= _COPY_MIN_ROWS
                and cnp.PyArray_DIM(ya, 1) >= _COPY_MIN_COLS
                and cnp.PyArray_DIM(xa, 1) == cnp.PyArray_DIM(ya, 0)
                and _COPY_MIN_WORK < <double>cnp.PyArray_DIM(xa, 0) * cnp.PyArray_SIZE(ya)
                <= _COPY_MAX_WORK
                and cnp.PyArray_IS_C_CONTIGUOUS(xa) and cnp.PyArray_ISALIGNED(xa)
                and cnp.PyArray_ISNOTSWAPPED(xa)
                and not cnp.PyArray_IS_C_CONTIGUOUS(ya) and cnp.PyArray_IS_F_CONTIGUOUS(ya)):
            c = transposed_copy(cnp.PyArray_Transpose(ya, NULL))
            if c is not None:
                y = c
    cdef PyObject* argv[2]
    if out is None:
        argv[0] = <PyObject*>x          # borrowed: the caller holds x, and y is held here
        argv[1] = <PyObject*>y
        return PyObject_Vectorcall(_np_matmul, argv, 2, NULL)
    return _np_matmul(x, y, out=out)


def matmul(x, y, out=None):
    """``np.matmul(x, y)`` (``out=``: into that array), multiplying a small transposed
    float32 ``y`` as a C-ordered copy (see Note: [matmul through a transposed copy]):
    the kernel of tapegrad's matmul on the CPU.

    >>> import numpy as np
    >>> from tapegrad._array_kernels import matmul
    >>> w = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / 1000
    >>> g = np.ones((32, 64), np.float32)
    >>> bool((matmul(g, w.T) == g @ np.ascontiguousarray(w.T)).all())
    True
    """
    return matmul_2d(x, y, out)


def sum_over_added_axis(a, shape):
    """``np.add.reduce(a, 0)`` where `shape` is ``a.shape[1:]`` (a bias's gradient:
    broadcasting added one leading axis) and the C loop applies; None otherwise (the
    caller sums its general way). Checked in C: the caller is every bias gradient.

    >>> import numpy as np
    >>> from tapegrad._array_kernels import sum_over_added_axis
    >>> sum_over_added_axis(np.ones((4, 3)), (3,)).tolist(), sum_over_added_axis(np.ones((4, 3)), (1, 3))
    ([4.0, 4.0, 4.0], None)
    """
    cdef Py_ssize_t i, nd, length
    if type(a) is not cnp.ndarray or type(shape) is not tuple:
        return None
    nd = cnp.PyArray_NDIM(<cnp.ndarray>a)
    if nd != len(<tuple>shape) + 1:
        return None
    for i in range(nd - 1):
        item = (<tuple>shape)[i]
        if type(item) is not int:
            return None
        try:
            length = item
        except OverflowError:           # no such axis: the general path names the error
            return None
        if length != cnp.PyArray_DIM(<cnp.ndarray>a, i + 1):
            return None
    return sum_leading_axis(a)


def sum_leading(a):
    """``np.add.reduce(a, 0)``, NumPy's bits, through the C loop where it applies.

    >>> import numpy as np
    >>> from tapegrad._array_kernels import sum_leading
    >>> sum_leading(np.ones((3, 2), np.float32)).tolist()
    [3.0, 3.0]
    """
    out = sum_leading_axis(a)
    return np.add.reduce(a, 0) if out is None else out


def transpose_copy(a):
    """``np.ascontiguousarray(a.T)`` (the same values, C order), through the tiled C copy
    where it applies.

    >>> import numpy as np
    >>> from tapegrad._array_kernels import transpose_copy
    >>> transpose_copy(np.arange(6.0).reshape(2, 3)).tolist()
    [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    """
    out = transposed_copy(a)
    return np.ascontiguousarray(np.transpose(a)) if out is None else out
