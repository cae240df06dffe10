# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""CPU kernels of the backward ops (``relu_backward``, ``tanh_backward``, ...): each is one
pass over the arrays in C where a VJP written op by op took two to four NumPy calls, each
with its temporary array and the engine's per-op constant. And relu's forward
(``np.maximum(x, 0)``, whose broadcast 0 sends NumPy down its slower strided loop: 2.4 us
against 0.8 us on a (32, 128) float32 array).

Contract of every kernel here: the same values, bit for bit, as the NumPy expression its
docstring names (the composite the VJP used before), for every input. The C loop runs
only for what it can do exactly: both arrays ndarrays of one dtype, float32 or float64,
one shape, C-contiguous, aligned, native byte order. Anything else (other dtypes, broadcasting, strided views, 0-d
scalars) runs the NumPy expression itself, so it is right by construction.

NOTE: [bit-identical arithmetic]
- Every operation is done in the arrays' own type: the constants are typed ``floating``
  locals, because a bare ``1.0`` in C is a double and would compute float32 data in double
  and round once at the end (a different, "better" answer that is not NumPy's).
- The operations run in the order of the NumPy expression: ``g * y * (1 - y)`` is
  ``(g * y) * (1 - y)``. Setup compiles this module with ``-ffp-contract=off`` so the C
  compiler cannot fuse ``a * b + c`` into one FMA (one rounding instead of two).
- Masks compare the way NumPy's do: ``y > 0`` is false for NaN, so the gradient there is
  the exact 0 that ``where(y > 0, g, 0)`` writes (never ``0 * g``, which is NaN for an
  infinite or NaN ``g``).

The loops are ``noexcept nogil`` over raw pointers taken with NumPy's C API. NOTE: not
typed memoryviews: acquiring one costs about 0.15 us per array, three per call, as much as
the whole loop on the small arrays (the (16,) vectors of W1) where the op's constant is
what this module is for; the pointers are the same loop without that. Large arrays release
the GIL while the loop runs.
"""

cimport cython
from cpython.object cimport PyObject
from libc.string cimport memcmp
cimport numpy as cnp
from cython cimport floating

import numpy as np

cnp.import_array()

# Below this many elements the loop is shorter than releasing and re-taking the GIL.
cdef Py_ssize_t _NOGIL_FROM = 32768


# ---------------------------------------------------------------------------------------
# The loops: out[i] from g[i] and y[i] (y is the forward's result or input, by op)
# ---------------------------------------------------------------------------------------

cdef void _relu_loop(floating* g, floating* y, floating* out, Py_ssize_t n) noexcept nogil:
    # where(y > 0, g, 0): NaN and -0.0 in y fail the test, so they give +0.0.
    # NOTE: g[i] is loaded whether or not it is selected: a select of two loaded values
    # compiles to a vector compare-and-mask; `g[i] if ... else 0` (a conditional load)
    # stays a branch, mispredicted on half the elements of a random-sign array (8x slower).
    cdef Py_ssize_t i
    cdef floating zero = 0
    cdef floating a
    for i in range(n):
        a = g[i]
        out[i] = a if y[i] > zero else zero


cdef void _tanh_loop(floating* g, floating* y, floating* out, Py_ssize_t n) noexcept nogil:
    # g * (1 - y * y)
    cdef Py_ssize_t i
    cdef floating one = 1
    cdef floating a
    for i in range(n):
        a = y[i]
        out[i] = g[i] * (one - a * a)


cdef void _sigmoid_loop(floating* g, floating* y, floating* out, Py_ssize_t n) noexcept nogil:
    # g * y * (1 - y), left to right: (g * y) * (1 - y)
    cdef Py_ssize_t i
    cdef floating one = 1
    cdef floating a
    for i in range(n):
        a = y[i]
        out[i] = (g[i] * a) * (one - a)


cdef void _sqrt_loop(floating* g, floating* y, floating* out, Py_ssize_t n) noexcept nogil:
    # g / (2 * y) (y = sqrt(x)); 2 * y is exact (or overflows to inf, as NumPy's)
    cdef Py_ssize_t i
    cdef floating two = 2
    for i in range(n):
        out[i] = g[i] / (two * y[i])


cdef void _abs_loop(floating* g, floating* x, floating* out, Py_ssize_t n) noexcept nogil:
    # g * sign(x), with NumPy's sign: 1, -1, +0.0 for +-0.0, and NaN itself for NaN
    cdef Py_ssize_t i
    cdef floating one = 1, zero = 0
    cdef floating a, s
    for i in range(n):
        a = x[i]
        s = one if a > zero else (-one if a < zero else (zero if a == zero else a))
        out[i] = g[i] * s


cdef void _square_loop(floating* g, floating* x, floating* out, Py_ssize_t n) noexcept nogil:
    # g * (2 * x)
    cdef Py_ssize_t i
    cdef floating two = 2
    for i in range(n):
        out[i] = g[i] * (two * x[i])


cdef void _relu_forward_loop(floating* x, floating* out, Py_ssize_t n) noexcept nogil:
    # maximum(x, 0): a NaN is returned as it is (NumPy's maximum propagates it, payload
    # and sign kept), and -0.0 gives +0.0 (NumPy's maximum returns the 0 when the two
    # compare equal, on every path: tests/test_relu_forward_kernel.py)
    cdef Py_ssize_t i
    cdef floating zero = 0
    cdef floating a
    for i in range(n):
        a = x[i]
        out[i] = a if (a > zero) | (a != a) else zero


# ---------------------------------------------------------------------------------------
# Dispatch: the C loop where it is exact, else the NumPy expression
# ---------------------------------------------------------------------------------------

cdef enum Kind:
    RELU, TANH, SIGMOID, SQRT, ABS, SQUARE, RELU_FORWARD    # (RELU_FORWARD reads y only)


cdef int _fast_type(object g, object y):
    """The NumPy type number the C loop can run on, or -1 (then the NumPy expression runs)."""
    if type(g) is not cnp.ndarray or type(y) is not cnp.ndarray:     # (a C pointer test)
        return -1
    cdef cnp.ndarray ga = <cnp.ndarray>g, ya = <cnp.ndarray>y
    cdef int t = cnp.PyArray_TYPE(ga)
    if t != cnp.PyArray_TYPE(ya) or (t != cnp.NPY_DOUBLE and t != cnp.NPY_FLOAT):
        return -1
    if not (cnp.PyArray_IS_C_CONTIGUOUS(ga) and cnp.PyArray_IS_C_CONTIGUOUS(ya)):
        return -1
    # NOTE: byte order: a big-endian float64 array has type number NPY_DOUBLE too; the
    # loop reads native doubles, so it takes native (and "not applicable") orders only.
    if not (cnp.PyArray_ISNOTSWAPPED(ga) and cnp.PyArray_ISNOTSWAPPED(ya)):
        return -1
    # NOTE: an unaligned view (np.frombuffer at an odd offset) must not reach the loop:
    # the vectorised code may use aligned loads once it has stepped to an element
    # boundary, and would fault on a pointer that is not a multiple of the element size.
    if not (cnp.PyArray_ISALIGNED(ga) and cnp.PyArray_ISALIGNED(ya)):
        return -1
    cdef int nd = cnp.PyArray_NDIM(ga)
    if nd != cnp.PyArray_NDIM(ya) or nd == 0:
        return -1
    cdef cnp.npy_intp* gs = cnp.PyArray_DIMS(ga)
    cdef cnp.npy_intp* ys = cnp.PyArray_DIMS(ya)
    cdef int k
    for k in range(nd):
        if gs[k] != ys[k]:
            return -1
    return t


cdef object _run(Kind kind, object g, object y):
    """The C loop over g and y into a new array of their shape and dtype (_fast_type
    said it can run)."""
    cdef cnp.ndarray ga = <cnp.ndarray>g, ya = <cnp.ndarray>y
    cdef int t = cnp.PyArray_TYPE(ga)
    cdef cnp.ndarray out = cnp.PyArray_EMPTY(cnp.PyArray_NDIM(ga), cnp.PyArray_DIMS(ga), t, 0)
    cdef Py_ssize_t n = cnp.PyArray_SIZE(ga)
    cdef void* gp = cnp.PyArray_DATA(ga)
    cdef void* yp = cnp.PyArray_DATA(ya)
    cdef void* op = cnp.PyArray_DATA(out)
    if n >= _NOGIL_FROM:
        with nogil:
            _dispatch(kind, t, gp, yp, op, n)
    else:
        _dispatch(kind, t, gp, yp, op, n)
    return out


cdef void _dispatch(Kind kind, int t, void* g, void* y, void* out, Py_ssize_t n) noexcept nogil:
    if t == cnp.NPY_DOUBLE:
        if kind == RELU:
            _relu_loop(<double*>g, <double*>y, <double*>out, n)
        elif kind == TANH:
            _tanh_loop(<double*>g, <double*>y, <double*>out, n)
        elif kind == SIGMOID:
            _sigmoid_loop(<double*>g, <double*>y, <double*>out, n)
        elif kind == SQRT:
            _sqrt_loop(<double*>g, <double*>y, <double*>out, n)
        elif kind == ABS:
            _abs_loop(<double*>g, <double*>y, <double*>out, n)
        elif kind == RELU_FORWARD:
            _relu_forward_loop(<double*>y, <double*>out, n)
        else:
            _square_loop(<double*>g, <double*>y, <double*>out, n)
    else:
        if kind == RELU:
            _relu_loop(<float*>g, <float*>y, <float*>out, n)
        elif kind == TANH:
            _tanh_loop(<float*>g, <float*>y, <float*>out, n)
        elif kind == SIGMOID:
            _sigmoid_loop(<float*>g, <float*>y, <float*>out, n)
        elif kind == SQRT:
            _sqrt_loop(<float*>g, <float*>y, <float*>out, n)
        elif kind == ABS:
            _abs_loop(<float*>g, <float*>y, <float*>out, n)
        elif kind == RELU_FORWARD:
            _relu_forward_loop(<float*>y, <float*>out, n)
        else:
            _square_loop(<float*>g, <float*>y, <float*>out, n)


# ---------------------------------------------------------------------------------------
# The kernels (arrays in, array out), one per backward op, and relu's forward
# ---------------------------------------------------------------------------------------

def relu(x):
    """``np.maximum(x, 0)``: relu's forward (NaN stays NaN, -0.0 becomes 0.0), one C pass
    where NumPy's call takes its slower path for a broadcast scalar operand."""
    if _fast_type(x, x) >= 0:
        return _run(RELU_FORWARD, x, x)
    return np.maximum(x, 0)


def relu_backward(g, ans):
    """``where(ans > 0, g, 0)``: relu's gradient from its result (0 at 0, NaN, -0.0)."""
    if _fast_type(g, ans) >= 0:
        return _run(RELU, g, ans)
    return np.where(np.greater(ans, 0), g, 0)


def tanh_backward(g, ans):
    """``g * (1 - ans * ans)``: tanh's gradient from its result."""
    if _fast_type(g, ans) >= 0:
        return _run(TANH, g, ans)
    return np.multiply(g, np.subtract(1, np.multiply(ans, ans)))


def sigmoid_backward(g, ans):
    """``g * ans * (1 - ans)``: the sigmoid's gradient from its result."""
    if _fast_type(g, ans) >= 0:
        return _run(SIGMOID, g, ans)
    return np.multiply(np.multiply(g, ans), np.subtract(1, ans))


def sqrt_backward(g, ans):
    """``g / (2 * ans)``: the square root's gradient from its result."""
    if _fast_type(g, ans) >= 0:
        return _run(SQRT, g, ans)
    return np.divide(g, np.multiply(2, ans))


def abs_backward(g, x):
    """``g * sign(x)``: abs's gradient from its input (0 at 0, NaN at NaN, as NumPy's sign)."""
    if _fast_type(g, x) >= 0:
        return _run(ABS, g, x)
    return np.multiply(g, np.sign(x))


def square_backward(g, x):
    """``g * (2 * x)``: the square's gradient from its input."""
    if _fast_type(g, x) >= 0:
        return _run(SQUARE, g, x)
    return np.multiply(g, np.multiply(2, x))



# Fusion recipes (see Note: [fusion recipes] in tapegrad/_compile.pyx): the ufunc calls,
# in order, of the composite each rule in ops.py falls back to, which these kernels
# equal bit for bit. tg.compile records the backward op (one step) and a fused replay
# runs these calls; operands: input i, nin + j (the j-th call's result), or a float.
tanh_backward.fused_as = ((np.multiply, (1, 1)), (np.subtract, (1.0, 2)),
                          (np.multiply, (0, 3)))              # g * (1 - ans * ans)
sigmoid_backward.fused_as = ((np.multiply, (0, 1)), (np.subtract, (1.0, 1)),
                             (np.multiply, (2, 3)))           # g * ans * (1 - ans)

cdef bint _same_array_kind(object g, object c):
    """Whether ``g * c`` can be written into `c` (so c's buffer is the result): both
    ndarrays of one dtype and shape. (Checked in C: W1's backward runs it 600 times.)
    NOTE: until session 14 this compared ``(<cnp.ndarray>g).shape`` with c's, which for
    a typed ndarray is Cython's C dims *pointer*: never equal for two arrays, so the
    in-place path below never ran."""
    cdef cnp.ndarray ga, ca
    cdef int nd
    if type(g) is not cnp.ndarray or type(c) is not cnp.ndarray:
        return False
    ga = <cnp.ndarray>g
    ca = <cnp.ndarray>c
    nd = cnp.PyArray_NDIM(ga)
    return (nd == cnp.PyArray_NDIM(ca)
            and (nd == 0 or memcmp(cnp.PyArray_DIMS(ga), cnp.PyArray_DIMS(ca),
                                   nd * sizeof(cnp.npy_intp)) == 0)
            and cnp.PyArray_EquivTypes(<cnp.dtype><PyObject*>cnp.PyArray_DESCR(ga),
                                       <cnp.dtype><PyObject*>cnp.PyArray_DESCR(ca)))


# The ufuncs, held once (a module attribute lookup each call is a dict lookup)
cdef object _cos = np.cos, _sin = np.sin, _multiply = np.multiply, _negative = np.negative


def sin_backward(g, x):
    """``g * cos(x)``: the sine's gradient from its input. NumPy's own cos and multiply (a
    C cos would not be bit-identical to NumPy's SIMD one), into one buffer: one op instead
    of two, one temporary instead of two."""
    c = _cos(x)
    if _same_array_kind(g, c):
        return _multiply(g, c, out=c)
    return _multiply(g, c)


def cos_backward(g, x):
    """``-g * sin(x)``: the cosine's gradient from its input, as ``sin_backward``: NumPy's
    own sin, negative and multiply, the product written into sin's buffer.
    NOTE: ``(-g) * sin(x)`` in that order, never ``-(g * sin(x))``: the same number, but
    where g and sin(x) are both NaN the product keeps one operand's NaN, and negating
    first or last flips which sign comes out -- the fused replay runs the recipe below,
    and a replay must give eager's bits, NaN signs included (tests/test_compile_fused.py's
    fuzzer found it)."""
    s = _sin(x)
    if _same_array_kind(g, s):
        return _multiply(_negative(g), s, out=s)
    return _multiply(_negative(g), s)



sin_backward.fused_as = ((np.cos, (1,)), (np.multiply, (0, 2)))       # g * cos(x)
cos_backward.fused_as = ((np.negative, (0,)), (np.sin, (1,)),
                         (np.multiply, (2, 3)))                       # -g * sin(x)