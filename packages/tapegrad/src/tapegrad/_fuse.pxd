# The spec of a fused step (see _fuse.pyx and docs/compile.md, "Fused replay").
#
# A FusedKernel replays a run of elementwise ufunc kernels of one program as one step: it
# calls each ufunc's own typed strided inner loop (the function NumPy's ufunc machinery
# calls for that dtype signature) on blocks of BLOCK elements, operand pointers taken from
# a small register file, so that no Python call and no temporary array is made per op.
#
# Invariants (checked when it is built, and again on each run where a replay can differ):
# - every op is a ufunc of FUSIBLE with nin in (1, 2) and nout == 1, on one float dtype
#   (typenum): every operand and every result has that dtype, so the loop is the one whose
#   signature is (typenum,) * nargs, the one NumPy's type resolution picks for it;
# - every op's result has the same shape (out_shape, `size` elements);
# - an operand is a register: an input (a slot's array of `size` elements, read with its
#   own stride, or of 1 element, read with stride 0: a broadcast scalar), an output (a
#   fresh array of out_shape, which the step stores into its slot: a value read after the
#   step), or scratch (BLOCK elements, a value only the step's own ops read);
# - pooling: a value written here that only fused steps read afterwards (a forward value
#   the fused backward reads, say) is no array of its own but a row of one pool array of
#   shape (npool,) + out_shape, stored in slot pool_slot; its readers read the row. Its
#   own slot stays None, unless the writer ran its steps unfused (then the reader reads
#   the array there) or a reader must run unfused (materialize() then puts a view of the
#   row in that slot first). One array object per step instead of one per value: the
#   objects cost more than W1's arithmetic.
# - a run that cannot follow the recording (an input that is not an aligned NumPy array of
#   the dtype, laid out contiguously or along one axis) or that raises a floating-point
#   flag that np.geterr() does not ignore returns 0: the caller then runs the original
#   steps, as eager would (and they warn or raise as eager does).

cimport numpy as cnp

cdef enum:
    BLOCK = 1024            # elements per inner-loop call: a few registers stay in L1

ctypedef void (*inner_loop)(char **, cnp.npy_intp *, cnp.npy_intp *, void *) noexcept nogil

cdef class FusedKernel:
    cdef readonly int typenum        # the dtype of every operand (NPY_FLOAT32/NPY_FLOAT64)
    cdef int itemsize                # its size in bytes
    cdef readonly tuple out_shape    # the shape of every op's result
    cdef cnp.npy_intp size           # its number of elements (> 0)
    cdef int out_ndim                # len(out_shape)
    cdef cnp.npy_intp *out_dims      # out_shape as npy_intp, for PyArray_EMPTY
    cdef readonly tuple names        # the ufuncs' names, in order (for describe())
    cdef readonly tuple in_slots     # the slots read, one register each
    cdef readonly tuple out_slots    # the slots written, one register each
    cdef cnp.npy_intp *in_size       # per input: the elements expected (size, or 1)
    cdef Py_ssize_t *in_pool         # per input: the slot of the pool holding it, or -1
    cdef Py_ssize_t *in_row          # per pooled input: its row in that pool
    cdef int *in_ndim                # per pooled input: the ndim of the value (0: stride 0)
    cdef Py_ssize_t nin_regs, nout_regs, nscratch, nops
    cdef Py_ssize_t npool            # outputs written as rows of one pool array (see below)
    cdef readonly Py_ssize_t pool_slot  # the slot that pool is stored in, or -1
    cdef readonly tuple pooled_slots # the slots whose values are rows of the pool, in order
    cdef readonly tuple pooled_inputs  # ((slot, pool slot, row, shape), ...) for inputs
    cdef inner_loop *op_loop         # per op: the ufunc's inner loop for the dtype
    cdef void **op_data              # per op: the loop's data pointer (ufunc.data[i])
    cdef int *op_nargs               # per op: nin + 1
    cdef int *op_regs                # per op, 3 entries: input registers, then the result's
    cdef readonly object ufuncs      # the ufunc objects (kept alive: we hold their loops)
    cdef readonly Py_ssize_t runs    # runs done fused, and runs handed back to the caller
    cdef readonly Py_ssize_t fallbacks  # (diagnostics for tests; not exact across threads)

    cdef int run(self, list slots) except -1
    cdef int materialize(self, list slots) except -1


# An in-place fused step (see InPlaceKernel in _fuse.pyx and docs/compile.md, "In-place
# fused updates"): a run of elementwise ufunc kernels whose last result is written into an
# existing array by an in-place ufunc write (`p -= lr * p.grad`: multiply, then
# subtract(p, t, out=p)), executed block by block with the ufuncs' own inner loops and
# the final result stored straight into that array. Every check that can send a replay
# back to the original steps is made before the first byte is written.
cdef enum:
    INPLACE_BLOCK = 8192    # elements per inner-loop call (one scratch block per value)

cdef class InPlaceKernel:
    cdef readonly int typenum        # the dtype of every operand (NPY_FLOAT32/NPY_FLOAT64)
    cdef int itemsize
    cdef readonly tuple out_shape    # the shape of every op's result and of the target
    cdef cnp.npy_intp size           # its number of elements (> 0)
    cdef int out_ndim
    cdef bytes out_dims              # out_shape as packed npy_intp (one memcmp per run)
    cdef readonly tuple names        # the ufuncs' names, in order (for describe())
    cdef readonly tuple in_slots     # the slots read, one register each (the target's too)
    cdef readonly Py_ssize_t dst_slot  # the slot of the array written in place
    cdef int dst_reg                 # its register (an input register)
    cdef cnp.npy_intp *in_size       # per input: the elements expected (size, or 1)
    cdef Py_ssize_t nin_regs, nscratch, nops
    cdef inner_loop *op_loop
    cdef void **op_data
    cdef int *op_nargs
    cdef int *op_regs                # per op, 3 entries: input registers, then the result's
    cdef readonly object ufuncs
    cdef readonly Py_ssize_t runs, fallbacks   # (diagnostics for tests)

    cdef int run(self, list slots) except -1
