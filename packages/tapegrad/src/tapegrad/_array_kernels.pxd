# The spec of the core's C array kernels (see _array_kernels.pyx).
#
# Each kernel computes, bit for bit, what the NumPy expression its docstring names
# computes (a NaN is a NaN where NumPy's is, its sign and payload aside: IEEE 754 leaves
# those to the hardware where an addition meets two NaNs, and C compilers commute
# additions), and runs its C loop only where that is certain: exact ndarrays of one float
# dtype (float32 or float64), C-contiguous, aligned, in native byte order. Anything else
# returns None from the cdef entry points (the caller then runs the NumPy expression) or
# runs the NumPy expression itself in the def ones.

cimport numpy as cnp

# np.add.reduce(a, 0) for a C-contiguous float array of ndim >= 2 whose trailing axes
# hold at least 2 elements, up to 16,384 elements; None where it cannot or should not
# (see sum_leading_axis's docstring: NumPy's SIMD reduction wins above that size).
cdef object sum_leading_axis(object a)

# np.ascontiguousarray(a.T) for a 2-D C-contiguous float array; None where it cannot.
cdef object transposed_copy(object a)

# np.matmul(x, y) for 2-D operands, with the one layout choice of Note: [matmul through a
# transposed copy] (_array_kernels.pyx): a small F-ordered float32 y is multiplied as a C
# copy. `out`: None, or an array np.matmul may write into.
cdef object matmul_2d(object x, object y, object out)
