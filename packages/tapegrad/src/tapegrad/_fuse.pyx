# cython: language_level=3, boundscheck=False, wraparound=False
"""Fused replay: runs of elementwise ufunc kernels executed as one step (see _fuse.pxd).

NOTE: why this is bit-identical to eager. A ufunc call on float arrays of one dtype picks,
by type resolution, the loop of ``ufunc.types`` whose signature is that dtype throughout
(checked against ``ufunc.resolve_dtypes`` when a kernel is first built), and calls the
function ``ufunc.functions[i]`` with ``ufunc.data[i]`` on (pointers, count, strides).
That is the public legacy inner-loop interface of ``PyUFuncObject``: a fused step calls
the very same function on the very same numbers with the same strides (a broadcast
scalar with stride 0, as NumPy passes it), only in blocks of BLOCK elements instead of
one call over the whole array. NumPy's SIMD loops compute each element independently of
where a call starts (BLOCK is a multiple of every vector width), so the bits agree; the
tests in tests/test_compile_fused.py check every fusible ufunc in float32 and float64,
on sizes around BLOCK and on NaN/inf. What eager does besides the loop is kept too:
floating-point flags are checked after the step, and a flag that ``np.geterr()`` does not
ignore makes the caller run the original steps, which warn (or raise) as eager does.
"""

import numpy as np

cimport numpy as cnp
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp

cnp.import_array()

cdef extern from "<fenv.h>" nogil:
    ctypedef struct fexcept_t:
        pass
    int FE_DIVBYZERO, FE_INVALID, FE_OVERFLOW, FE_UNDERFLOW, FE_ALL_EXCEPT
    int feclearexcept(int)
    int fetestexcept(int)
    int fegetexceptflag(fexcept_t *, int)
    int fesetexceptflag(const fexcept_t *, int)

# The ufuncs a fused step may call: elementwise, one result, no state, with float loops
# that the tests check bit for bit against the ufunc call (tests/test_compile_fused.py).
FUSIBLE = frozenset([
    np.add, np.subtract, np.multiply, np.divide, np.negative, np.positive, np.square,
    np.sqrt, np.cbrt, np.reciprocal, np.absolute, np.fabs, np.sign, np.exp, np.exp2,
    np.expm1, np.log, np.log2, np.log10, np.log1p, np.sin, np.cos, np.tan, np.arcsin,
    np.arccos, np.arctan, np.sinh, np.cosh, np.tanh, np.arcsinh, np.arccosh, np.arctanh,
    np.deg2rad, np.rad2deg, np.maximum, np.minimum, np.fmax, np.fmin, np.power,
    np.arctan2, np.hypot, np.copysign, np.floor, np.ceil, np.trunc, np.rint,
    np.logaddexp, np.logaddexp2, np.fmod, np.heaviside,
])

FUSIBLE_TYPES = frozenset([cnp.NPY_FLOAT32, cnp.NPY_FLOAT64])

cdef dict _loops = {}            # (ufunc, typenum) -> loop index, or -1 (not usable)

cdef enum:                       # FusedKernel.__init__'s per-slot flags
    _IS_INPUT = 1                # read from outside the run (a key of in_sizes)
    _ESCAPES = 2                 # written here and read after the step
    _POOLED = 4                  # written as a row of the step's pool

cdef dict _FLAG_NAMES = {"divide": FE_DIVBYZERO, "over": FE_OVERFLOW,
                         "under": FE_UNDERFLOW, "invalid": FE_INVALID}


cpdef int loop_index(object ufunc, int typenum) except -2:
    """The index in ufunc.types of the loop a call on `typenum` arrays runs, or -1 when
    no loop of that exact signature is what NumPy would pick (then it is not fused)."""
    key = (ufunc, typenum)
    found = _loops.get(key)
    if found is not None:
        return found
    cdef cnp.ufunc uf = <cnp.ufunc>ufunc
    cdef int i, k, index = -1
    if uf.nout == 1 and 1 <= uf.nin <= 2 and uf.nargs == uf.nin + 1:
        for i in range(uf.ntypes):
            for k in range(uf.nargs):
                if <int><unsigned char>uf.types[i * uf.nargs + k] != typenum:
                    break
            else:
                if uf.functions[i] != NULL:
                    index = i
                break
    if index >= 0:
        # NOTE: the first exact match is what the legacy type resolver picks; confirm it
        # with NumPy's own resolution (a promoter or a newer loop would say otherwise).
        dt = cnp.PyArray_DescrFromType(typenum)
        try:
            resolved = ufunc.resolve_dtypes((dt,) * uf.nin + (None,))
        except Exception:
            resolved = None
        if resolved is None or resolved != (dt,) * uf.nargs:
            index = -1
    _loops[key] = index
    return index


cdef class FusedKernel:
    """One fused step: build with `ops` = [(ufunc, (input slot, ...), output slot)], in
    program order, all on dtype `typenum` with results of shape `out_shape`; `in_sizes`
    maps each slot read from outside the run to its element count (out size or 1);
    `escaping` is the set of slots written here that are read after the step.
    Pooling (see _fuse.pxd): `pooled` lists slots of `escaping` to write as rows of one
    pool array, stored in slot `pool_slot`; `pooled_in` maps an input slot that is such
    a row of another step's pool to (pool slot, row, the value's shape)."""

    def __cinit__(self):
        self.in_size = NULL
        self.in_pool = NULL
        self.in_row = NULL
        self.in_ndim = NULL
        self.op_loop = NULL
        self.op_data = NULL
        self.op_nargs = NULL
        self.op_regs = NULL
        self.out_dims = NULL

    def __dealloc__(self):
        free(self.in_size)
        free(self.in_pool)
        free(self.in_row)
        free(self.in_ndim)
        free(self.op_loop)
        free(self.op_data)
        free(self.op_nargs)
        free(self.op_regs)
        free(self.out_dims)

    def __init__(self, list ops, int typenum, tuple out_shape, dict in_sizes, escaping,
                 pooled=(), Py_ssize_t pool_slot=-1, dict pooled_in=None):
        cdef Py_ssize_t i, k, n = len(ops)
        cdef cnp.ufunc uf
        cdef int index
        self.typenum = typenum
        self.itemsize = cnp.PyArray_DescrFromType(typenum).itemsize
        self.out_shape = out_shape
        self.out_ndim = len(out_shape)
        self.out_dims = <cnp.npy_intp*>malloc(max(1, self.out_ndim) * sizeof(cnp.npy_intp))
        self.size = 1
        for i in range(self.out_ndim):
            self.out_dims[i] = out_shape[i]
            self.size *= out_shape[i]
        self.nops = n
        self.op_loop = <inner_loop*>malloc(max(1, n) * sizeof(inner_loop))
        self.op_data = <void**>malloc(max(1, n) * sizeof(void*))
        self.op_nargs = <int*>malloc(max(1, n) * sizeof(int))
        self.op_regs = <int*>malloc(max(1, 3 * n) * sizeof(int))
        # NOTE: slots are small integers (indexes into a replay's slot list), so the
        # planning below keeps its per-slot tables (register, last reader, flags) in C
        # arrays indexed by slot: a fused run of W1 has 3,000 ops, and dicts and sets of
        # Python ints cost ~6,000 instructions an op.
        cdef Py_ssize_t nslot = 0, a, s, nin, base, nscratch = 0, nargs, nfree = 0
        cdef tuple op, args
        for i in range(n):
            op = <tuple>ops[i]
            for a in <tuple>op[1]:
                if a < 0:
                    raise ValueError(f"not fusible: op {i} reads slot {a}")
                if a >= nslot:
                    nslot = a + 1
            s = op[2]
            if s < 0:
                raise ValueError(f"not fusible: op {i} writes slot {s}")
            if s >= nslot:
                nslot = s + 1
        cdef int *reg = <int*>malloc(max(1, nslot) * sizeof(int))     # slot -> register
        cdef Py_ssize_t *last = <Py_ssize_t*>malloc(max(1, nslot) * sizeof(Py_ssize_t))
        cdef unsigned char *flag = <unsigned char*>calloc(max(1, nslot), 1)
        cdef int *free_scratch = <int*>malloc(max(1, 3 * n) * sizeof(int))  # a stack
        cdef list in_slots = [], out_slots = [], names = []
        cdef dict loops = {}, ufunc_names = {}
        try:
            if reg == NULL or last == NULL or flag == NULL or free_scratch == NULL:
                raise MemoryError()
            for a in range(nslot):
                reg[a] = -1
                last[a] = -1
            for a in in_sizes:
                if 0 <= a < nslot:
                    flag[a] |= _IS_INPUT
            for a in escaping:
                if 0 <= a < nslot:
                    flag[a] |= _ESCAPES
            # Registers: inputs first, then outputs, then scratch (numbered after, below).
            for i in range(n):
                for a in <tuple>(<tuple>ops[i])[1]:
                    last[a] = i
                    if reg[a] < 0 and flag[a] & _IS_INPUT:
                        reg[a] = len(in_slots)
                        in_slots.append(a)
            nin = len(in_slots)
            if pool_slot >= 0:
                for a in pooled:
                    if 0 <= a < nslot:
                        flag[a] |= _POOLED
            for i in range(n):
                s = (<tuple>ops[i])[2]
                if flag[s] & _ESCAPES and not flag[s] & _POOLED:
                    reg[s] = nin + len(out_slots)
                    out_slots.append(s)
            self.nin_regs, self.nout_regs = nin, len(out_slots)
            self.npool = len(pooled) if pool_slot >= 0 else 0
            self.pool_slot = pool_slot if self.npool else -1
            self.pooled_slots = tuple(pooled) if self.npool else ()
            for i in range(self.npool):
                reg[<Py_ssize_t>self.pooled_slots[i]] = nin + len(out_slots) + i
            self.in_size = <cnp.npy_intp*>malloc(max(1, nin) * sizeof(cnp.npy_intp))
            self.in_pool = <Py_ssize_t*>malloc(max(1, nin) * sizeof(Py_ssize_t))
            self.in_row = <Py_ssize_t*>malloc(max(1, nin) * sizeof(Py_ssize_t))
            self.in_ndim = <int*>malloc(max(1, nin) * sizeof(int))
            pooled_inputs = []
            for i in range(nin):
                self.in_size[i] = in_sizes[in_slots[i]]
                self.in_pool[i] = -1
                found = None if pooled_in is None else pooled_in.get(in_slots[i])
                if found is not None:
                    self.in_pool[i], self.in_row[i], shape = found
                    self.in_ndim[i] = len(shape)
                    pooled_inputs.append((in_slots[i],) + tuple(found))
            self.pooled_inputs = tuple(pooled_inputs)
            # Scratch registers by liveness: a value only this step reads lives in a block
            # buffer from the op that makes it to its last reader, then the buffer is
            # reused. (An op's result never shares a buffer with its own operands: kept
            # apart, the loop sees the same non-overlapping operands as eager.)
            base = nin + len(out_slots) + self.npool
            for i in range(n):
                op = <tuple>ops[i]
                ufunc = op[0]
                args = <tuple>op[1]
                s = op[2]
                found = loops.get(ufunc)
                if found is None:
                    found = loops[ufunc] = loop_index(ufunc, typenum)
                    ufunc_names[ufunc] = ufunc.__name__
                index = found
                uf = <cnp.ufunc>ufunc
                nargs = len(args)
                if index < 0 or uf.nin != nargs:
                    raise ValueError(f"not fusible: {ufunc.__name__} on type {typenum}")
                self.op_loop[i] = <inner_loop>uf.functions[index]
                self.op_data[i] = uf.data[index]
                self.op_nargs[i] = nargs + 1
                for k in range(nargs):
                    a = args[k]
                    if reg[a] < 0:
                        raise ValueError(f"not fusible: op {i} reads slot {a}, which is "
                                         f"neither an input nor written before it")
                    self.op_regs[3 * i + k] = reg[a]
                if reg[s] < 0:
                    if nfree:
                        nfree -= 1
                        reg[s] = free_scratch[nfree]
                    else:
                        reg[s] = base + nscratch
                        nscratch += 1
                self.op_regs[3 * i + nargs] = reg[s]
                for k in range(nargs):
                    a = args[k]
                    if last[a] == i and reg[a] >= base and (k == 0 or args[0] != args[k]):
                        free_scratch[nfree] = reg[a]
                        nfree += 1
                if last[s] < 0 and reg[s] >= base:     # a result nothing here reads
                    free_scratch[nfree] = reg[s]
                    nfree += 1
                names.append(ufunc_names[ufunc])
        finally:
            free(reg)
            free(last)
            free(flag)
            free(free_scratch)
        self.nscratch = nscratch
        self.in_slots, self.out_slots = tuple(in_slots), tuple(out_slots)
        self.names = tuple(names)
        self.ufuncs = tuple(loops)

    def describe(self):
        shown = ",".join(self.names[:8]) + (",..." if len(self.names) > 8 else "")
        return f"{len(self.names)} ops: {shown}"

    def try_run(self, list slots):
        """run() from Python (tests): True when it ran fused, False when it handed back."""
        return self.run(slots) == 1

    cdef int materialize(self, list slots) except -1:
        """Before the original steps run instead of this one: put a view of each pooled
        input's row into its slot (the steps read arrays)."""
        for slot, pool_slot, row, shape in self.pooled_inputs:
            if slots[<Py_ssize_t>slot] is None:
                slots[<Py_ssize_t>slot] = slots[<Py_ssize_t>pool_slot][row]
        return 0

    cdef int run(self, list slots) except -1:
        """Run the step on `slots`; 1 when done, 0 when the caller must run the original
        steps instead (an input it cannot read as recorded, or a flag to report)."""
        cdef Py_ssize_t nreg = self.nin_regs + self.nout_regs + self.npool + self.nscratch
        cdef Py_ssize_t i, k, op, chunk = self.size if self.size < BLOCK else BLOCK
        cdef cnp.npy_intp count, offset, nblock
        cdef cnp.ndarray arr
        cdef char *args[3]
        cdef cnp.npy_intp steps[3]
        cdef int reg, flags, ok = 1
        cdef int *regs
        cdef fexcept_t saved
        cdef char **base = <char**>malloc(nreg * sizeof(char*))
        cdef cnp.npy_intp *stride = <cnp.npy_intp*>malloc(nreg * sizeof(cnp.npy_intp))
        cdef cnp.npy_intp *advance = <cnp.npy_intp*>malloc(nreg * sizeof(cnp.npy_intp))
        cdef char *scratch = <char*>malloc(max(1, self.nscratch * chunk * self.itemsize))
        cdef list outs
        cdef cnp.ndarray pool = None
        cdef cnp.npy_intp pool_dims[65]   # (NPY_MAXDIMS is 64)
        self.fallbacks += 1         # (until it succeeds, below)
        try:
            if base == NULL or stride == NULL or advance == NULL or scratch == NULL:
                raise MemoryError()
            for i in range(self.nin_regs):
                obj = slots[<Py_ssize_t>self.in_slots[i]]
                if obj is None and self.in_pool[i] >= 0:
                    # a row of another step's pool (C-contiguous, of the writer's shape):
                    # the strides eager's fresh array of that shape would get
                    arr = <cnp.ndarray>slots[self.in_pool[i]]
                    stride[i] = 0 if self.in_ndim[i] == 0 or (
                        self.in_size[i] == 1 and self.size > 1) else self.itemsize
                    base[i] = <char*>cnp.PyArray_DATA(arr) + \
                        self.in_row[i] * self.in_size[i] * self.itemsize
                    advance[i] = stride[i] * BLOCK
                    continue
                if type(obj) is not np.ndarray:
                    return 0
                arr = <cnp.ndarray>obj
                if cnp.PyArray_TYPE(arr) != self.typenum or \
                        cnp.PyArray_SIZE(arr) != self.in_size[i] or \
                        not cnp.PyArray_ISALIGNED(arr):
                    return 0
                # NOTE: the strides NumPy itself passes, which some loops branch on (power
                # with a stride-0 exponent of 0.5 is sqrt, not pow; SIMD or scalar code
                # for contiguous or strided operands): its single-call path passes 0 for a
                # 0-d input, a 1-D input's own stride, the itemsize for an N-D contiguous
                # one (and for the result); its iterator passes 0 for a broadcast axis.
                # A negative stride NumPy may flip, and N-D non-contiguous operands it
                # iterates in another order: those calls run unfused.
                if cnp.PyArray_NDIM(arr) == 0 or (self.in_size[i] == 1 and self.size > 1):
                    stride[i] = 0                       # a broadcast scalar
                elif cnp.PyArray_NDIM(arr) == 1:
                    stride[i] = cnp.PyArray_STRIDES(arr)[0]
                    if stride[i] < 0:
                        return 0
                elif cnp.PyArray_IS_C_CONTIGUOUS(arr):
                    stride[i] = self.itemsize
                else:
                    return 0
                base[i] = <char*>cnp.PyArray_DATA(arr)
                advance[i] = stride[i] * BLOCK
            outs = [None] * self.nout_regs
            for i in range(self.nout_regs):
                arr = cnp.PyArray_EMPTY(self.out_ndim, self.out_dims, self.typenum, 0)
                outs[i] = arr
                k = self.nin_regs + i
                base[k] = <char*>cnp.PyArray_DATA(arr)
                stride[k] = self.itemsize
                advance[k] = self.itemsize * BLOCK
            if self.npool:
                pool_dims[0] = self.npool
                for i in range(self.out_ndim):
                    pool_dims[i + 1] = self.out_dims[i]
                pool = cnp.PyArray_EMPTY(self.out_ndim + 1, pool_dims, self.typenum, 0)
                for i in range(self.npool):
                    k = self.nin_regs + self.nout_regs + i
                    base[k] = <char*>cnp.PyArray_DATA(pool) + i * self.size * self.itemsize
                    stride[k] = self.itemsize
                    advance[k] = self.itemsize * BLOCK
            for i in range(self.nscratch):
                k = self.nin_regs + self.nout_regs + self.npool + i
                base[k] = scratch + i * chunk * self.itemsize
                stride[k] = self.itemsize
                advance[k] = 0
            fegetexceptflag(&saved, FE_ALL_EXCEPT)
            feclearexcept(FE_ALL_EXCEPT)
            # NOTE: as NumPy does (NPY_BEGIN_THREADS_THRESHOLDED), the GIL is released only
            # for work worth it: releasing it costs more than a small step's arithmetic,
            # and getting it back can wait for another thread's switch interval.
            if self.size * self.nops >= _NOGIL_WORK:
                with nogil:
                    _blocks(self, base, stride, advance)
            else:
                _blocks(self, base, stride, advance)
            flags = fetestexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID)
            fesetexceptflag(&saved, FE_ALL_EXCEPT)
            if flags and _reported(flags):
                return 0
            for i in range(self.nout_regs):
                slots[<Py_ssize_t>self.out_slots[i]] = outs[i]
            if self.npool:
                slots[self.pool_slot] = pool
            self.fallbacks -= 1
            self.runs += 1
            global _total_runs
            _total_runs += 1
            return 1
        finally:
            free(base)
            free(stride)
            free(advance)
            free(scratch)


cdef Py_ssize_t _total_runs = 0
cdef enum:
    _NOGIL_WORK = 1 << 16         # elements x kernels above which run() releases the GIL


cdef void _blocks(FusedKernel kernel, char **base, cnp.npy_intp *stride,
                  cnp.npy_intp *advance) noexcept nogil:
    """Every kernel of `kernel` on every block, operands from the register file."""
    cdef cnp.npy_intp count, offset = 0, nblock = 0
    cdef Py_ssize_t op, k
    cdef int reg
    cdef int *regs
    cdef char *args[3]
    cdef cnp.npy_intp steps[3]
    while offset < kernel.size:
        count = kernel.size - offset
        if count > BLOCK:
            count = BLOCK
        for op in range(kernel.nops):
            regs = &kernel.op_regs[3 * op]
            for k in range(kernel.op_nargs[op]):
                reg = regs[k]
                args[k] = base[reg] + nblock * advance[reg]
                steps[k] = stride[reg]
            kernel.op_loop[op](args, &count, steps, kernel.op_data[op])
        offset += count
        nblock += 1


def fused_runs():
    """How many fused steps have run fused in this process (tests count them)."""
    return _total_runs


cdef bint _reported(int flags) except -1:
    """Whether np.geterr() does anything (warn, raise, call, ...) for one of `flags`."""
    modes = np.geterr()
    for name, flag in _FLAG_NAMES.items():
        if flags & <int>flag and modes[name] != "ignore":
            return True
    return False


# ---------------------------------------------------------------------------------------
# In-place fused updates (`p -= lr * p.grad` as one step)
# ---------------------------------------------------------------------------------------

from cpython.exc cimport PyErr_WarnEx
from cpython.contextvars cimport get_value as _context_value

try:        # NumPy 2's errstate lives in this context variable (np.geterr reads it)
    from numpy._core.umath import _extobj_contextvar as _EXTOBJ
except ImportError:             # pragma: no cover (another NumPy layout: ask every time)
    _EXTOBJ = None

cdef tuple _modes_seen = (None, False)
cdef Py_ssize_t _total_inplace_runs = 0


def inplace_runs():
    """How many in-place fused steps have run (not handed back) in this process (tests)."""
    return _total_inplace_runs
     # (the errstate object last checked, its verdict)

cdef tuple _FLAG_ORDER = (     # NumPy reports a ufunc's flags in this order, in these words
    ("divide", FE_DIVBYZERO, "divide by zero"), ("over", FE_OVERFLOW, "overflow"),
    ("under", FE_UNDERFLOW, "underflow"), ("invalid", FE_INVALID, "invalid value"))


cdef bint _modes_allow_inplace() except -1:
    """Whether np.geterr() only ignores or warns: then an in-place step can run and report
    its flags afterwards, as eager's ufuncs do (warnings, in the same order). 'raise',
    'call', 'print' and 'log' act while eager's first ufunc returns, before the write
    into the target: those replays run the original steps. Cached by the identity of
    NumPy's errstate object (np.errstate and np.seterr make a new one; ~50 ns a check)."""
    global _modes_seen
    if _EXTOBJ is None:
        return _only_warn_or_ignore(np.geterr())
    obj = _context_value(_EXTOBJ)     # (C: no bound method made per check)
    seen = _modes_seen
    if seen[0] is obj:
        return seen[1]
    ok = _only_warn_or_ignore(np.geterr())
    _modes_seen = (obj, ok)          # (one assignment: another thread sees old or new)
    return ok


cdef bint _only_warn_or_ignore(dict modes):
    for name, _, _ in _FLAG_ORDER:
        if modes[name] != "ignore" and modes[name] != "warn":
            return False
    return True


cdef class InPlaceKernel:
    """An in-place fused step (see _fuse.pxd): `ops` = [(ufunc, (input slot, ...), output
    slot)] in program order, all on dtype `typenum` with results of shape `out_shape`; the
    last op's output slot is `dst_slot`, whose array the step writes in place (the last op
    reads it too: subtract(p, t, out=p)); every other op's output is a value only the step
    reads. `in_sizes` maps each slot read from outside the run (dst_slot included) to its
    element count (the out size, or 1 for a broadcast scalar)."""

    def __cinit__(self):
        self.in_size = NULL
        self.op_loop = NULL
        self.op_data = NULL
        self.op_nargs = NULL
        self.op_regs = NULL

    def __dealloc__(self):
        free(self.in_size)
        free(self.op_loop)
        free(self.op_data)
        free(self.op_nargs)
        free(self.op_regs)

    def __init__(self, list ops, int typenum, tuple out_shape, dict in_sizes,
                 Py_ssize_t dst_slot):
        cdef Py_ssize_t i, k, n = len(ops), nargs
        cdef cnp.ufunc uf
        cdef int index
        if n < 2 or (<tuple>ops[n - 1])[2] != dst_slot or dst_slot not in in_sizes \
                or not out_shape:
            raise ValueError("an in-place step needs kernels then the write into dst_slot "
                             "(an array of one or more dimensions)")
        self.typenum = typenum
        self.itemsize = cnp.PyArray_DescrFromType(typenum).itemsize
        self.out_shape = out_shape
        self.out_ndim = len(out_shape)
        self.out_dims = np.asarray(out_shape, dtype=np.intp).tobytes()
        self.size = 1
        for i in range(self.out_ndim):
            self.size *= out_shape[i]
        if self.size <= 0 or in_sizes[dst_slot] != self.size:
            raise ValueError("an in-place step writes a non-empty array of its result's size")
        self.nops = n
        self.dst_slot = dst_slot
        self.op_loop = <inner_loop*>malloc(n * sizeof(inner_loop))
        self.op_data = <void**>malloc(n * sizeof(void*))
        self.op_nargs = <int*>malloc(n * sizeof(int))
        self.op_regs = <int*>malloc(3 * n * sizeof(int))
        cdef list in_slots = []
        cdef dict reg_of = {}
        for i in range(n):
            for a in <tuple>(<tuple>ops[i])[1]:
                if a not in reg_of and a in in_sizes:
                    reg_of[a] = len(in_slots)
                    in_slots.append(a)
        self.nin_regs = len(in_slots)
        self.dst_reg = reg_of[dst_slot]
        self.in_size = <cnp.npy_intp*>malloc(self.nin_regs * sizeof(cnp.npy_intp))
        for i in range(self.nin_regs):
            self.in_size[i] = in_sizes[in_slots[i]]
        # Scratch: one block buffer per intermediate value, never shared (the runs are a
        # few ops long), so no op's result shares memory with an operand of its own.
        names = []
        for i in range(n):
            ufunc, args, s = <tuple>ops[i]
            uf = <cnp.ufunc>ufunc
            nargs = len(args)
            index = loop_index(ufunc, typenum)
            if index < 0 or uf.nin != nargs:
                raise ValueError(f"not fusible: {ufunc.__name__} on type {typenum}")
            self.op_loop[i] = <inner_loop>uf.functions[index]
            self.op_data[i] = uf.data[index]
            self.op_nargs[i] = nargs + 1
            for k in range(nargs):
                if args[k] not in reg_of:
                    raise ValueError(f"op {i} reads slot {args[k]} before it is written")
                self.op_regs[3 * i + k] = reg_of[args[k]]
            if i < n - 1:
                if s in reg_of:
                    raise ValueError(f"op {i} writes slot {s}, which the step also reads")
                reg_of[s] = self.nin_regs + i
            self.op_regs[3 * i + nargs] = reg_of[s]
            names.append(ufunc.__name__)
        self.nscratch = n - 1
        self.in_slots = tuple(in_slots)
        self.names = tuple(names)
        self.ufuncs = tuple(set([(<tuple>op)[0] for op in ops]))

    def describe(self):
        return f"{len(self.names)} ops into slot {self.dst_slot}: {','.join(self.names)}"

    def try_run(self, list slots):
        """run() from Python (tests): True when it ran, False when it handed back (then
        nothing was written)."""
        return self.run(slots) == 1

    cdef int run(self, list slots) except -1:
        """Run the step on `slots`; 1 when done, 0 when the caller must run the original
        steps instead. Every reason for 0 is found before anything is written: an operand
        it cannot read as the recording did, a target that is not writeable, of another
        shape or laid out otherwise, an input that overlaps the target other than as the
        very same elements, or an errstate that acts on a flag as the ufunc returns."""
        cdef Py_ssize_t nreg = self.nin_regs + self.nscratch
        cdef Py_ssize_t i, chunk = self.size if self.size < INPLACE_BLOCK else INPLACE_BLOCK
        cdef cnp.ndarray arr, dst
        cdef char *lo
        cdef char *dlo
        cdef char *dhi
        cdef cnp.npy_intp extent
        cdef int op
        cdef fexcept_t saved
        cdef char **base = NULL
        cdef cnp.npy_intp *stride = NULL
        cdef int *op_flags = NULL
        cdef char *scratch = NULL
        cdef bint any_flag = False
        obj = slots[self.dst_slot]
        if type(obj) is not np.ndarray:
            self.fallbacks += 1
            return 0
        dst = <cnp.ndarray>obj
        if cnp.PyArray_TYPE(dst) != self.typenum or cnp.PyArray_NDIM(dst) != self.out_ndim \
                or memcmp(cnp.PyArray_DIMS(dst), <const char*>self.out_dims,
                          self.out_ndim * sizeof(cnp.npy_intp)) != 0 \
                or not cnp.PyArray_ISWRITEABLE(dst) or not cnp.PyArray_ISALIGNED(dst) \
                or not _modes_allow_inplace():
            self.fallbacks += 1
            return 0
        base = <char**>malloc(nreg * sizeof(char*))
        stride = <cnp.npy_intp*>malloc(nreg * sizeof(cnp.npy_intp))
        op_flags = <int*>malloc(self.nops * sizeof(int))
        scratch = <char*>malloc(max(1, self.nscratch * chunk * self.itemsize))
        try:
            if base == NULL or stride == NULL or op_flags == NULL or scratch == NULL:
                raise MemoryError()
            for i in range(self.nin_regs):
                obj = slots[<Py_ssize_t>self.in_slots[i]]
                if type(obj) is not np.ndarray:
                    self.fallbacks += 1
                    return 0
                arr = <cnp.ndarray>obj
                if cnp.PyArray_TYPE(arr) != self.typenum or \
                        cnp.PyArray_SIZE(arr) != self.in_size[i] or \
                        not cnp.PyArray_ISALIGNED(arr):
                    self.fallbacks += 1
                    return 0
                # NOTE: the strides NumPy passes (see FusedKernel.run, the same rules)
                if cnp.PyArray_NDIM(arr) == 0 or (self.in_size[i] == 1 and self.size > 1):
                    stride[i] = 0
                elif cnp.PyArray_NDIM(arr) == 1:
                    stride[i] = cnp.PyArray_STRIDES(arr)[0]
                    if stride[i] < 0:
                        self.fallbacks += 1
                        return 0
                elif cnp.PyArray_IS_C_CONTIGUOUS(arr):
                    stride[i] = self.itemsize
                else:
                    self.fallbacks += 1
                    return 0
                base[i] = <char*>cnp.PyArray_DATA(arr)
            if stride[self.dst_reg] == 0 and self.size > 1:
                self.fallbacks += 1         # a target whose elements share memory
                return 0
            # NOTE: eager computes each intermediate over the whole array before the write
            # into the target; block by block, an input that overlaps the target would be
            # read after an earlier block was written. Only the target's own elements,
            # read at the same positions (p -= lr * p), are safe.
            dlo = base[self.dst_reg]
            dhi = dlo + (self.size - 1) * stride[self.dst_reg] + self.itemsize
            for i in range(self.nin_regs):
                if i == self.dst_reg:
                    continue
                lo = base[i]
                if lo == dlo and stride[i] == stride[self.dst_reg] and \
                        self.in_size[i] == self.size:
                    continue
                extent = (self.in_size[i] - 1) * stride[i] + self.itemsize \
                    if stride[i] > 0 else self.itemsize
                if lo < dhi and dlo < lo + extent:
                    self.fallbacks += 1
                    return 0
            for i in range(self.nscratch):
                base[self.nin_regs + i] = scratch + i * chunk * self.itemsize
                stride[self.nin_regs + i] = self.itemsize
            for op in range(self.nops):
                op_flags[op] = 0
            fegetexceptflag(&saved, FE_ALL_EXCEPT)
            feclearexcept(FE_ALL_EXCEPT)
            if self.size * self.nops >= _NOGIL_WORK:
                with nogil:
                    _inplace_blocks(self, base, stride, op_flags)
            else:
                _inplace_blocks(self, base, stride, op_flags)
            fesetexceptflag(&saved, FE_ALL_EXCEPT)
            self.runs += 1
            global _total_inplace_runs
            _total_inplace_runs += 1
            for op in range(self.nops):
                if op_flags[op]:
                    any_flag = True
            if any_flag:
                # as each eager ufunc does when it returns, in op order (the modes allow
                # only 'ignore' and 'warn' here)
                modes = np.geterr()
                for op in range(self.nops):
                    for name, flag, text in _FLAG_ORDER:
                        if op_flags[op] & <int>flag and modes[name] == "warn":
                            message = f"{text} encountered in {self.names[op]}".encode()
                            PyErr_WarnEx(RuntimeWarning, message, 1)
            return 1
        finally:
            free(base)
            free(stride)
            free(op_flags)
            free(scratch)


cdef void _inplace_blocks(InPlaceKernel kernel, char **base, cnp.npy_intp *stride,
                          int *op_flags) noexcept nogil:
    """Every op of `kernel` on every block; each op's floating-point flags into op_flags
    (a test per call, a clear only when one is set: flags are rare)."""
    cdef cnp.npy_intp count, offset = 0
    cdef Py_ssize_t op, k
    cdef int reg, f
    cdef int *regs
    cdef char *args[3]
    cdef cnp.npy_intp steps[3]
    while offset < kernel.size:
        count = kernel.size - offset
        if count > INPLACE_BLOCK:
            count = INPLACE_BLOCK
        for op in range(kernel.nops):
            regs = &kernel.op_regs[3 * op]
            for k in range(kernel.op_nargs[op]):
                reg = regs[k]
                args[k] = base[reg] + (offset * stride[reg] if reg < kernel.nin_regs else 0)
                steps[k] = stride[reg]
            kernel.op_loop[op](args, &count, steps, kernel.op_data[op])
            f = fetestexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID)
            if f:
                op_flags[op] |= f
                feclearexcept(FE_ALL_EXCEPT)
        offset += count
