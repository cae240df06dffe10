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
       sides stay in cache; 4x4 (float) and 2x2 (double) register transposes inside a tile
       where SSE2 is there (every x86-64), scalar copies elsewhere. Copies only: the values
       are a's bits. */
    #define TG_TILE 32
    static void tg_transpose_f32(const float* a, float* out, Py_ssize_t n, Py_ssize_t k) {
        for (Py_ssize_t i0 = 0; i0 < n; i0 += TG_TILE) {
            Py_ssize_t i1 = i0 + TG_TILE < n ? i0 + TG_TILE : n;
            for (Py_ssize_t j0 = 0; j0 < k; j0 += TG_TILE) {
                Py_ssize_t j1 = j0 + TG_TILE < k ? j0 + TG_TILE : k;
                Py_ssize_t i = i0;
    #if TG_HAVE_SSE2
                for (; i + 4 <= i1; i += 4) {
                    Py_ssize_t j = j0;
                    for (; j + 4 <= j1; j += 4) {
                        __m128 r0 = _mm_loadu_ps(a + (i + 0) * k + j);
                        __m128 r1 = _mm_loadu_ps(a + (i + 1) * k + j);
                        __m128 r2 = _mm_loadu_ps(a + (i + 2) * k + j);
                        __m128 r3 = _mm_loadu_ps(a + (i + 3) * k + j);
                        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
                        _mm_storeu_ps(out + (j + 0) * n + i, r0);
                        _mm_storeu_ps(out + (j + 1) * n + i, r1);
                        _mm_storeu_ps(out + (j + 2) * n + i, r2);
                        _mm_storeu_ps(out + (j + 3) * n + i, r3);
                    }
                    for (; j < j1; j++)
                        for (Py_ssize_t ii = i; ii < i + 4; ii++) out[j * n + ii] = a[ii * k + j];
                }
    #endif
                for (; i < i1; i++)
                    for (Py_ssize_t j = j0; j < j1; j++) out[j * n + i] = a[i * k + j];
            }
        }
    }

    static void tg_transpose_f64(const double* a, double* out, Py_ssize_t n, Py_ssize_t k) {
        for (Py_ssize_t i0 = 0; i0 < n; i0 += TG_TILE) {
            Py_ssize_t i1 = i0 + TG_TILE < n ? i0 + TG_TILE : n;
            for (Py_ssize_t j0 = 0; j0 < k; j0 += TG_TILE) {
                Py_ssize_t j1 = j0 + TG_TILE < k ? j0 + TG_TILE : k;
                Py_ssize_t i = i0;
    #if TG_HAVE_SSE2
                for (; i + 2 <= i1; i += 2) {
                    Py_ssize_t j = j0;
                    for (; j + 2 <= j1; j += 2) {
                        __m128d r0 = _mm_loadu_pd(a + (i + 0) * k + j);
                        __m128d r1 = _mm_loadu_pd(a + (i + 1) * k + j);
                        _mm_storeu_pd(out + (j + 0) * n + i, _mm_unpacklo_pd(r0, r1));
                        _mm_storeu_pd(out + (j + 1) * n + i, _mm_unpackhi_pd(r0, r1));
                    }
                    for (; j < j1; j++) {
                        out[j * n + i] = a[i * k + j];
                        out[j * n + i + 1] = a[(i + 1) * k + j];
                    }
                }
    #endif
                for (; i < i1; i++)
                    for (Py_ssize_t j = j0; j < j1; j++) out[j * n + i] = a[i * k + j];
            }
        }
    }
    """
    void tg_transpose_f32(const float* a, float* out, Py_ssize_t n, Py_ssize_t k) noexcept nogil
    void tg_transpose_f64(const double* a, double* out, Py_ssize_t n, Py_ssize_t k) noexcept nogil


# Above this many elements a loop releases the GIL while it runs.
cdef Py_ssize_t _NOGIL_FROM = 32768


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


cdef object sum_leading_axis(object a):
    """``np.add.reduce(a, 0)`` (what ``a.sum(axis=0)`` runs) for a float32/float64
    C-contiguous ndarray of ndim >= 2, as one C pass; None where the loop would not be
    NumPy's order: fewer than 2 elements in a row (NumPy then reduces along the contiguous
    axis, pairwise), or an empty array."""
    cdef int tn = _plain_float(a)
    cdef cnp.ndarray arr, out
    cdef Py_ssize_t m, n
    if tn < 0 or cnp.PyArray_NDIM(<cnp.ndarray>a) < 2:
        return None
    arr = <cnp.ndarray>a
    m = cnp.PyArray_DIM(arr, 0)
    if m == 0:
        return None
    n = cnp.PyArray_SIZE(arr) // m
    if n < 2:
        return None
    out = cnp.PyArray_EMPTY(cnp.PyArray_NDIM(arr) - 1, cnp.PyArray_DIMS(arr) + 1, tn, 0)
    if tn == cnp.NPY_FLOAT:
        if m * n >= _NOGIL_FROM:
            with nogil:
                _sum_rows(<float*>cnp.PyArray_DATA(arr), <float*>cnp.PyArray_DATA(out), m, n)
        else:
            _sum_rows(<float*>cnp.PyArray_DATA(arr), <float*>cnp.PyArray_DATA(out), m, n)
    else:
        if m * n >= _NOGIL_FROM:
            with nogil:
                _sum_rows(<double*>cnp.PyArray_DATA(arr), <double*>cnp.PyArray_DATA(out), m, n)
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
