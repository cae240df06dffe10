# cython: language_level=3, binding=True
"""tg.compile: record what a function does once per signature, then replay it.

Recording runs the function eagerly with a recorder installed in the engine
(``_engine.set_tracer``), which hears of every kernel call, in-place write, random draw,
tensor creation and ``.grad`` update. Each array the recording saw becomes a *slot*; each
kernel call becomes a ``_Step`` that reads slots and writes one. If the outputs need
gradients, the recorder also runs one backward over the eager graph (with placeholder
cotangents) and records *its* kernel calls: the backward program. A replay runs both
programs as flat lists from the loop in ``_run``: no op lookup, no argument parsing, no
Tensor or Node per op, and the same kernels on the same operands in the same order as
eager, so results and gradients are bit-identical to eager.

What a slot starts as, on each replay:
- an argument's array (a tensor argument, or an ndarray argument converted to a tensor);
- a closed-over tensor's *current* array (parameters: optimizers update them in place);
- a constant (an array the function created, or one the engine made, like a seed of ones),
  copied afresh on every replay when the recording wrote into it;
- the output of an earlier step.

Traps (documented in docs/compile.md): Python control flow on tensor values, and tensors
that the function reads from outside by a *new* object on each call (``p.grad``) are baked
in at record time; pass such tensors as arguments. ``check=True`` runs eagerly as well and
raises on any difference.
"""

import contextlib
import functools
import gc
import itertools
import logging
import operator
import threading
import types
import warnings
import weakref
from collections import OrderedDict, namedtuple

import numpy as np

cimport cython
cimport numpy as cnp
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.ref cimport Py_INCREF, Py_REFCNT, PyObject
from cpython.dict cimport PyDict_GetItem
from cpython.long cimport PyLong_FromVoidPtr
from cpython.pythread cimport PyThread_get_thread_ident
from cpython.weakref cimport PyWeakref_GET_OBJECT, PyWeakref_NewRef
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memset

from tapegrad._engine cimport Device, Node, TensorBase, VersionCounter
from tapegrad._fuse cimport FusedKernel, InPlaceKernel

from tapegrad._fuse import FUSIBLE as _FUSIBLE, FUSIBLE_TYPES as _FUSIBLE_TYPES, loop_index

from tapegrad import _engine
from tapegrad import random as tg_random

cnp.import_array()

cdef extern from "numpy/ndarraytypes.h":
    ctypedef struct PyArrayObject_fields:
        PyObject* weakreflist

_log = logging.getLogger("tapegrad.compile")
_RECORD_LOCK = threading.RLock()

CacheInfo = namedtuple("CacheInfo", "hits misses size maxsize")
_MAX_VARIANTS = 8       # programs kept per signature for different guarded values
# Outputs at least this large are written into the previous replay's array when nothing
# else holds it (Note: [reused outputs]); below it malloc reuses blocks cheaply anyway.
REUSE_BYTES = 1 << 20


class CompileWarning(UserWarning):
    """tg.compile could not replay a function and runs it eagerly (correct, not faster)."""

# Step kinds.
DEF K_KERNEL = 0      # slots[out] = fn(*args, **kwargs)
DEF K_WRITE = 1       # fn(dst, ...): an in-place write (device.copyto, device.setitem)
DEF K_ACCUM = 2       # accumulate slots[args[0]] into target.grad the way backward() does
DEF K_SETGRAD = 3     # target.grad = None, or a tensor over slots[args[0]]
DEF K_CALL = 4        # fn(): state outside the slots (the random generators' states)
DEF K_BUMP = 5        # count an in-place write (fn: the op's name) on target's version
DEF K_FUSED = 6       # fn (a _fuse.FusedKernel) runs the kernels `sub` as one step
DEF K_INPLACE = 7     # fn (a _fuse.InPlaceKernel) runs `sub` (kernels, then an in-place
                      # ufunc write of their result: p -= lr * g) as one step into the target
DEF K_COPY = 8        # slots[idx[0]][...] = slots[idx[2]] (fn: the recorded setitem) as one
                      # PyArray_CopyInto where both are NumPy arrays of one dtype and shape


@cython.final
cdef class _Step:
    cdef readonly int kind
    cdef readonly object fn
    cdef readonly tuple idx   # per positional argument: a slot, or -1 for the literal
    cdef readonly tuple lits  # the literals (None where idx names a slot)
    cdef readonly dict kwargs  # keyword parameters, or None
    cdef readonly tuple kwslots  # ((key, position or -1, slot), ...): parameters that are slots
    cdef readonly Py_ssize_t out  # slot written, or -1
    cdef readonly tuple aux_out   # K_KERNEL of an op with aux outputs (register_op(aux=)):
                                  # the slots of the aux arrays its kernel returns after
                                  # the output (out, a1, ..., ak); None for other steps
    cdef Device device        # to wrap a non-array kernel result (NumPy's 0-d scalars)
    cdef readonly object target  # K_ACCUM/K_SETGRAD: the tensor, or an int (argument index)
    cdef readonly bint fresh
    cdef readonly tuple free  # slots read for the last time here: dropped after the step
    cdef readonly tuple out_shape  # K_KERNEL: the output's shape when it recorded
    cdef int out_ndim              # its length, or -1 when not checked
    cdef bytes out_dims            # and its dims as packed npy_intp, for one memcmp
    # K_KERNEL of a fusible ufunc (see _fuse_info): (typenum, out shape, per input its
    # number of elements); None for every other step
    cdef readonly tuple fuse_info
    cdef readonly list sub         # K_FUSED: the steps it replaces (run when it cannot)
    cdef object into               # K_KERNEL with a large output: fn(*args, out=a) writing
    cdef object buf                # into a; buf: the last replay's output, reused when
                                   # nothing else holds it (see Note: [reused outputs])

    def describe(self):
        if self.kind == K_FUSED:
            return "fused", (<FusedKernel>self.fn).describe()
        if self.kind == K_INPLACE:
            return "fused_inplace", (<InPlaceKernel>self.fn).describe()
        if self.kind == K_COPY:
            return "copy", "setitem"
        name = getattr(self.fn, "__name__", None) or type(self.fn).__name__
        return {0: "kernel", 1: "write", 2: "accumulate_grad", 3: "set_grad",
                4: "call", 5: "bump_version"}[self.kind], name


cdef inline object _kw(_Step st, list slots):
    cdef dict kw = dict(st.kwargs)
    for key, pos, slot in st.kwslots:
        if pos < 0:
            kw[key] = slots[slot]
        else:
            seq = list(kw[key])
            seq[pos] = slots[slot]
            kw[key] = tuple(seq)
    return kw


cdef object _target(_Step st, tuple args):
    if type(st.target) is int:
        return args[<int>st.target]
    if type(st.target) is _GradOf:
        return (<_GradOf>st.target).get(args)
    return st.target


@cython.final
cdef class _GradOf:
    """The current .grad of a tensor (an argument index, or a tensor from outside): what a
    replay reads where the recording read a .grad that was there before the call."""
    cdef readonly object of
    cdef readonly tuple shape      # the .grad's shape and dtype when it recorded
    cdef readonly object dtype

    def __init__(self, of, grad):
        self.of = of
        self.shape = tuple((<TensorBase>grad)._data.shape)
        self.dtype = (<TensorBase>grad)._data.dtype

    cdef object get(self, tuple args):
        t = args[<Py_ssize_t>self.of] if type(self.of) is int else self.of
        return (<TensorBase>t)._grad


class ReplayShapeError(RuntimeError):
    """A replayed kernel returned another shape than when it recorded: a shape in the
    function depends on tensor values, which a replay cannot follow."""

    def __init__(self, step, kernel, recorded, got):
        super().__init__(
            f"tg.compile: replaying kernel {kernel} (step {step}) gave an array of shape "
            f"{got}, where the recording had shape {recorded}: a shape in this function "
            f"depends on the values of a tensor (boolean-mask indexing such as x[x > 0], "
            f"say), which a replay cannot follow. Keep shapes fixed (tg.where(x > 0, x, 0)) "
            f"or call the function without tg.compile")
        self.step = step


cdef inline bint _shape_is(object out, _Step st):
    """Whether array `out` has the shape step `st` recorded; one memcmp for NumPy arrays
    (this runs once per replayed kernel)."""
    cdef cnp.ndarray a
    if type(out) is cnp.ndarray:
        a = <cnp.ndarray>out
        return cnp.PyArray_NDIM(a) == st.out_ndim and (st.out_ndim == 0 or memcmp(
            cnp.PyArray_DIMS(a), <const char*>st.out_dims,
            st.out_ndim * sizeof(cnp.npy_intp)) == 0)
    return tuple(out.shape) == st.out_shape


cdef void _split_aux_out(_Step st, object result, list slots) except *:
    """Put the aux arrays of an aux kernel's result (out, a1, ..., ak) into their slots."""
    cdef Py_ssize_t j
    if type(result) is not tuple or len(<tuple>result) != len(st.aux_out) + 1:
        # NOTE: the kernel returned (out, aux...) when it recorded; another form now would
        # leave the rule's reads of the aux slots stale: refuse rather than guess.
        raise RuntimeError(
            f"tg.compile: replaying kernel {st.describe()[1]}, which returned its output and "
            f"{len(st.aux_out)} auxiliary arrays when it recorded, gave "
            f"{type(result).__name__ if type(result) is not tuple else f'a tuple of {len(result)}'}; "
            f"call the function without tg.compile")
    for j in range(len(st.aux_out)):
        slots[<Py_ssize_t>st.aux_out[j]] = (<tuple>result)[j + 1]


# Note: [reused outputs]
# Each replayed kernel allocates its output, as eager does; for large outputs glibc's
# malloc hands the blocks back to the OS on free and faults them in again on the next
# allocation (W3: ~2,000 minor page faults per replayed step). A kernel step whose output
# is large and that can write into a given array (a ufunc, or a kernel with an
# `out_kernel` attribute: fn(*args, out=a) computing the same bits as fn(*args)) keeps
# the array it returned last time and writes into it on the next replay -- but only when
# nothing else can see that array: its reference count shows only the step holds it (a
# .grad, a returned tensor, a saved value, a view or a memoryview of it all hold a
# reference), it has no weak references, it owns its data and is writeable. Otherwise the
# step allocates afresh, exactly as before, and the held array is never written again.
# The check and the taking of the reference run under the GIL with no Python code
# between them, so two threads replaying one program never share a buffer.
cdef object _kernel_reusing(_Step st, tuple call):
    cdef object buf = st.buf
    cdef object out
    if (buf is not None and Py_REFCNT(buf) == 2          # st.buf and this local
            and (<PyArrayObject_fields*><PyObject*>buf).weakreflist == NULL
            and cnp.PyArray_CHKFLAGS(<cnp.ndarray>buf, cnp.NPY_ARRAY_OWNDATA)
            and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>buf)):
        return st.into(*call, out=buf)
    st.buf = None            # (a held array stays its holder's; this one is dropped)
    buf = None
    out = st.fn(*call)
    if (type(out) is cnp.ndarray and cnp.PyArray_NBYTES(<cnp.ndarray>out) >= REUSE_BYTES
            and cnp.PyArray_CHKFLAGS(<cnp.ndarray>out, cnp.NPY_ARRAY_OWNDATA)
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>out)):
        st.buf = out
    return out


cdef void _release_buffers(list steps):
    cdef _Step st
    for st in steps or ():
        st.buf = None
        if st.kind == K_FUSED or st.kind == K_INPLACE:
            _release_buffers(st.sub)


cdef int _copy_step(_Step st, list slots) except -1:
    """`dst[...] = src` (a parameter restored from its initial values, say): with two NumPy
    arrays of one shape and equivalent dtypes that is a plain copy, PyArray_CopyInto --
    what ndarray.__setitem__ with an Ellipsis ends in (PyArray_AssignArray, which also
    copies an overlapping source first), without the index parsing and the view; anything
    else goes through the recorded setitem, as eager."""
    dst = slots[<Py_ssize_t>st.idx[0]]
    src = slots[<Py_ssize_t>st.idx[2]]
    if (type(dst) is cnp.ndarray and type(src) is cnp.ndarray
            and cnp.PyArray_NDIM(<cnp.ndarray>dst) == cnp.PyArray_NDIM(<cnp.ndarray>src)
            and memcmp(cnp.PyArray_DIMS(<cnp.ndarray>dst), cnp.PyArray_DIMS(<cnp.ndarray>src),
                       cnp.PyArray_NDIM(<cnp.ndarray>dst) * sizeof(cnp.npy_intp)) == 0
            and cnp.PyArray_EquivTypes((<cnp.ndarray>dst).dtype, (<cnp.ndarray>src).dtype)
            and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>dst)):
        cnp.PyArray_CopyInto(<cnp.ndarray>dst, <cnp.ndarray>src)
    else:
        st.fn(dst, Ellipsis, src)
    return 0


cdef void _run(list steps, list slots, tuple args) except *:
    """The replay loop: every step of a program, in order."""
    cdef _Step st
    cdef Py_ssize_t i, n, k, step = -1
    cdef tuple call
    cdef object item, out
    cdef TensorBase t
    for st in steps:
        step += 1
        if st.kind == K_FUSED or st.kind == K_INPLACE or st.kind == K_COPY:
            # steps that run themselves (falling back to `sub`, as recorded, when they cannot)
            if st.kind == K_FUSED:
                if not (<FusedKernel>st.fn).run(slots):
                    (<FusedKernel>st.fn).materialize(slots)
                    _run(st.sub, slots, args)   # as recorded: eager's warnings, layouts
            elif st.kind == K_INPLACE:
                if not (<InPlaceKernel>st.fn).run(slots):
                    _run(st.sub, slots, args)   # (it wrote nothing: see InPlaceKernel.run)
            else:
                _copy_step(st, slots)
            for k in st.free:
                slots[k] = None
            continue
        n = len(st.idx)
        call = PyTuple_New(n)
        for i in range(n):
            k = st.idx[i]
            item = slots[k] if k >= 0 else st.lits[i]
            Py_INCREF(item)
            PyTuple_SET_ITEM(call, i, item)
        if st.kind == K_KERNEL:
            if st.into is not None:
                out = _kernel_reusing(st, call)
            elif st.kwargs is None:
                out = st.fn(*call)
            elif st.kwslots is None:
                out = st.fn(*call, **st.kwargs)
            else:
                out = st.fn(*call, **_kw(st, slots))
            if st.aux_out is not None:
                _split_aux_out(st, out, slots)
                out = (<tuple>out)[0]
            if type(out) is not st.device.array_type:
                out = st.device.asarray(out)
            if st.out_ndim >= 0 and not _shape_is(out, st):
                raise ReplayShapeError(step, st.describe()[1], st.out_shape,
                                       tuple(out.shape))
            slots[st.out] = out
        elif st.kind == K_WRITE or st.kind == K_CALL:
            st.fn(*call)
        elif st.kind == K_ACCUM:
            t = <TensorBase>_target(st, args)
            _engine.accumulate_grad(t, _engine.new_tensor(call[0], t._device), st.fresh)
            slots[st.out] = t._grad._data
        elif st.kind == K_BUMP:
            t = <TensorBase>_target(st, args)
            if t._vc is None:
                t._vc = VersionCounter.__new__(VersionCounter)
            t._vc.value += 1
            t._vc.last_op = st.fn
            t._vc.last_trace = None
        else:
            t = <TensorBase>_target(st, args)
            t.grad = None if n == 0 else _engine.new_tensor(call[0], t._device)
        if st.free:
            # Drop values nothing later reads, as eager frees them when their last user
            # is done: holding every intermediate to the end costs memory and cache.
            for k in st.free:
                slots[k] = None


# ---------------------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------------------

class _RngStateCell:
    """A generator state that a replay saves (take) and later restores (restore), where the
    recorded function called tg.random.get_state and set_state (tg.checkpoint does)."""

    def __init__(self, names):
        self.names, self.state = list(names), None

    def take(self):
        self.state = tg_random.get_state(self.names)

    def restore(self):
        tg_random.set_state(self.state)


def _flat_values(kwargs):
    """A kernel's keyword parameters, tuples spread out (getitem's index is a tuple)."""
    if not kwargs:
        return ()
    out = []
    for v in kwargs.values():
        if type(v) is tuple:
            out.extend(v)
        else:
            out.append(v)
    return out


cdef object _weakref_type = weakref.ReferenceType
cdef object _MINUS_ONE = -1          # idx of a literal argument
cdef tuple _EMPTY = ()


cdef bint _holds_tensor(object value) except -1:
    """A tensor, or a tuple or list holding one (a kernel parameter a replay cannot read)."""
    if isinstance(value, TensorBase):
        return True
    if type(value) is tuple or type(value) is list:
        for v in value:
            if isinstance(v, TensorBase):
                return True
    return False
cdef object _ndarray_type = np.ndarray
cdef object _ufunc_type = np.ufunc


# Note: [the recorder's per-kernel cost]
# _Recorder hears of every kernel of the function and of its backward (W1's first call:
# ~6,600), so it is a cdef class whose per-kernel work is C: typed attributes, cdef
# methods for what the engine's hooks share (_step, _slot, _new_slot), slots as C
# integers until they go into the step's tuples. What stays Python are the engine's entry
# points themselves (kernel, write, created, ...: called by name) and the rare paths
# (keyword parameters, aliasing, version bumps).
# The thread check of each hook (see _engine's Note: [the tracer belongs to the recording
# thread]) is one C call: the engine only calls from the recording thread, but
# tapegrad.random and friends reach the recorder through get_tracer() too.


@cython.final
cdef class _Recorder:
    """Installed in the engine while a function records; builds the programs."""

    # NOTE: arrays are watched through weak references, not kept: the engine decides by
    # reference count whether a leaf may adopt a gradient without a copy, and a recording
    # must make the same decisions as eager. An array's id can be reused once it dies, so
    # an entry counts only while its weak reference still points at that very array
    # (_alive); a dead array's entry is dropped when its id comes up again, and the new
    # array is a new slot. (No callback per reference: a Python call per dead array and a
    # closure per watched one cost more than the lookup's check.)
    cdef dict watch                  # id(array) -> weakref (or the array, if not weakrefable)
    cdef dict slot_of                # id(array) -> slot (valid while watch[id] is alive)
    cdef public Py_ssize_t nslots
    cdef public list arg_slots       # (slot, argument index)
    cdef public list externals       # (slot, tensor read by reference)
    cdef public list constants       # [slot, value, pristine copy or None]
    cdef public dict const_index     # slot -> index into constants
    cdef set created_ids             # ids of arrays the function created (constants)
    cdef public tuple arg_tensors
    cdef public list steps           # the program being recorded
    cdef public list effects         # what a check=True run could not repeat safely
    cdef public bint inner_backward
    cdef public bint any_backward    # a backward() or tg.grad ran inside (hooks: see _record)
    cdef public list guards          # (value_fn, value when recorded)
    cdef public object eager_reason  # set when what ran cannot be replayed
    cdef public object once_reason   # set when this recording must not be kept (record_once)
    cdef dict rng_cells              # id(state from tg.random.get_state) -> (state, cell)
    cdef public set rng_steps        # ids of the steps that seed, save or restore generators
    cdef public set check_steps      # ids of the steps of compile_check (no effect)
    cdef public bint hidden_backward  # while _record_backward runs its placeholder backward
    cdef unsigned long thread        # only this thread's calls belong to the recording
    cdef dict arg_of_slot            # argument slot -> index of the (first) argument
    cdef dict ext_of_slot            # external slot -> the tensors read over its array
    cdef dict grad_of                # id(array of a .grad read) -> the tensor it is the grad of
    cdef public list grad_externals  # (slot, _GradOf): a .grad from before the call
    cdef public list alias_candidates  # (weakref of a tensor, argument index): see _slot()
    # (weakref of a tensor, its node, requires_grad) for the arguments and tensors from
    # outside, as first seen: an in-place op that records re-points a tensor's graph
    # (x[0] = w[1] with grad on makes x a non-leaf), which a replay cannot do to a
    # caller's tensor. (Weak: a tensor made inside must die, see _note_alias.)
    cdef public list graph_before

    def __init__(self, tuple arg_tensors):
        self.watch = {}
        self.slot_of = {}
        self.nslots = 0
        self.arg_slots = []
        self.externals = []
        self.constants = []
        self.const_index = {}
        self.created_ids = set()
        self.arg_tensors = arg_tensors
        self.steps = []
        self.effects = []
        self.inner_backward = False
        self.any_backward = False
        self.guards = []
        self.eager_reason = None
        self.once_reason = None
        self.rng_cells = {}
        self.rng_steps = set()
        self.check_steps = set()
        self.hidden_backward = False
        self.thread = PyThread_get_thread_ident()
        self.arg_of_slot = {}
        self.ext_of_slot = {}
        self.grad_of = {}
        self.grad_externals = []
        self.alias_candidates = []
        self.graph_before = []
        cdef Py_ssize_t i, s
        for t in arg_tensors:
            self._note_graph(t)
        for i in range(len(arg_tensors)):
            arr = (<TensorBase>arg_tensors[i])._data
            if self._slot_of(arr) < 0:
                s = self._new_slot(arr)
                self.arg_slots.append((s, i))
                self.arg_of_slot[s] = i

    # -- arrays and slots ---------------------------------------------------------------
    cdef bint _alive(self, object key, object arr) except -1:
        """Whether the entry under `key` (id(arr)) is arr's own; if it is a dead array's
        (whose id arr now has), it is dropped."""
        cdef PyObject *w = PyDict_GetItem(self.watch, key)
        if w != NULL:
            if <object>w is arr or (type(<object>w) is _weakref_type
                                    and PyWeakref_GET_OBJECT(<object>w) == <PyObject*>arr):
                return True
            del self.watch[key]
        self.slot_of.pop(key, None)
        self.created_ids.discard(key)
        return False

    cdef Py_ssize_t _slot_of(self, object arr) except -2:
        """arr's slot, or -1 when the recording has none for it."""
        key = PyLong_FromVoidPtr(<void*>arr)      # id(arr)
        cdef PyObject *s = PyDict_GetItem(self.slot_of, key)
        if s == NULL or not self._alive(key, arr):
            return -1
        return <Py_ssize_t><object>s

    cdef void _watch(self, object key, object arr) except *:
        if type(arr) is _ndarray_type:
            w = PyWeakref_NewRef(arr, None)
        else:
            try:
                w = PyWeakref_NewRef(arr, None)
            except TypeError:
                w = arr
        self.watch[key] = w

    cdef Py_ssize_t _new_slot(self, object arr) except -1:
        key = PyLong_FromVoidPtr(<void*>arr)
        self._watch(key, arr)
        cdef Py_ssize_t slot = self.nslots
        self.nslots += 1
        self.slot_of[key] = slot
        if self.created_ids:
            self.created_ids.discard(key)     # (a dead created array's id, reused)
        return slot

    def new_slot(self, arr):
        """A new slot for `arr` (for tests and tools; the recorder's own code is C)."""
        return self._new_slot(arr)

    def slot(self, arr, tensor=None):
        """The slot of an array a step reads; registers an array seen for the first time."""
        return self._slot(arr, tensor)

    cdef Py_ssize_t _slot(self, object arr, object tensor) except -1:
        cdef Py_ssize_t s = self._slot_of(arr)
        if s >= 0:
            if tensor is not None and (self.arg_of_slot or self.ext_of_slot):
                if s in self.arg_of_slot:
                    self._note_alias(s, tensor)
                elif s in self.ext_of_slot:
                    self._add_external(s, tensor)
            return s
        key = PyLong_FromVoidPtr(<void*>arr)
        if tensor is not None and not (key in self.created_ids and self._alive(key, arr)):
            owner = self.grad_of.get(key)
            if owner is not None and (<TensorBase>owner)._grad is tensor:
                # p.grad read before the backward that replaces it: read afresh
                s = self._new_slot(arr)
                self.grad_externals.append((s, _GradOf(self._spec_of(owner), tensor)))
                return s
            s = self._new_slot(arr)
            self._add_external(s, tensor)
            return s
        # A constant that the function writes into gets a copy of its value just before
        # the first write (see write()), so every replay starts from that value. Copying
        # only then, not on first sight, spares a transient copy of every constant that
        # is only read (most are).
        s = self._new_slot(arr)
        self.const_index[s] = len(self.constants)
        self.constants.append([s, arr, None])
        return s

    cdef object _spec_of(self, tensor):
        """An argument's index, else the tensor (registered as read from outside)."""
        cdef Py_ssize_t i
        for i in range(len(self.arg_tensors)):
            if self.arg_tensors[i] is tensor:
                return i
        self._slot((<TensorBase>tensor)._data, tensor)
        return tensor

    cdef void _add_external(self, Py_ssize_t s, object tensor) except *:
        # NOTE: every tensor read from outside over this array gets an entry, not just the
        # first: in `w.detach() + w` the detached one comes first, and w (which needs the
        # gradient) would otherwise be no external at all.
        seen = self.ext_of_slot.setdefault(s, [])
        for t in seen:
            if t is tensor:
                return
        seen.append(tensor)
        self.externals.append((s, tensor))
        self._note_graph(tensor)

    cdef void _note_graph(self, object tensor) except *:
        for ref, _, _ in self.graph_before:
            if ref() is tensor:
                return
        self.graph_before.append((weakref.ref(tensor), (<TensorBase>tensor)._node,
                                  (<TensorBase>tensor)._requires_grad))

    cdef void _note_alias(self, Py_ssize_t s, object tensor) except *:
        # NOTE: another tensor over an argument's array: a tensor made inside (a.detach())
        # or one from outside that the caller aliased (cf(w.detach()) while the code reads
        # w, or w.detach() inside). A replay could not tell which, so _record checks, once
        # the function has returned, which of these are still alive (those made inside
        # are gone) and, if the argument is itself a view (detach() or a reshape of
        # something outside), treats it as aliased whatever was read.
        for a in self.arg_tensors:
            if a is tensor:
                return
        for ref, _ in self.alias_candidates:
            if ref() is tensor:
                return
        self.alias_candidates.append((weakref.ref(tensor), self.arg_of_slot[s]))

    cdef bint _is_array(self, object obj, object device):
        return type(obj) is (<Device>device).array_type or isinstance(obj, cnp.ndarray)

    # -- steps ----------------------------------------------------------------------------
    cdef _Step _step(self, int kind, object fn, object items, object tensors, object kwargs,
                     object out, object device, object target=None, bint fresh=False):
        cdef _Step st = _Step.__new__(_Step)
        cdef bint reads_index = False
        cdef tuple its = items if type(items) is tuple else tuple(items)
        cdef tuple tens = None
        cdef Py_ssize_t i, n = len(its), ntens = 0, s
        cdef tuple idx = PyTuple_New(n), lits = PyTuple_New(n)
        cdef object item, t, slot_obj
        if tensors is not None:
            tens = tensors if type(tensors) is tuple else tuple(tensors)
            ntens = len(tens)
        array_type = (<Device>device).array_type if device is not None else None
        for i in range(n):
            item = its[i]
            if type(item) is array_type or isinstance(item, cnp.ndarray):
                t = tens[i] if i < ntens else None
                if t is not None and not isinstance(t, TensorBase):
                    t = None
                slot_obj = self._slot(item, t)
                Py_INCREF(slot_obj)
                PyTuple_SET_ITEM(idx, i, slot_obj)
                Py_INCREF(None)
                PyTuple_SET_ITEM(lits, i, None)
                if not reads_index:
                    if isinstance(item, cnp.ndarray):
                        reads_index = (cnp.PyArray_ISINTEGER(<cnp.ndarray>item)
                                       or cnp.PyArray_ISBOOL(<cnp.ndarray>item))
                    else:
                        reads_index = item.dtype.kind in "biu"
            else:
                Py_INCREF(_MINUS_ONE)
                PyTuple_SET_ITEM(idx, i, _MINUS_ONE)
                Py_INCREF(item)
                PyTuple_SET_ITEM(lits, i, item)
        st.kind, st.fn, st.device = kind, fn, device
        st.idx, st.lits = idx, lits
        st.kwargs = dict(kwargs) if kwargs else None
        st.kwslots = None
        if kwargs:
            kws = []
            for key, value in kwargs.items():
                if self._is_array(value, device):
                    s = self._slot_of(value)
                    if s >= 0:
                        kws.append((key, -1, s))
                elif type(value) is tuple:
                    for pos, v in enumerate(value):
                        if self._is_array(v, device):
                            s = self._slot_of(v)
                            if s >= 0:
                                kws.append((key, pos, s))
            st.kwslots = tuple(kws) if kws else None
            for key, pos, _ in kws:   # the template must not keep record-time arrays alive
                if pos < 0:
                    st.kwargs[key] = None
                else:
                    seq = list(st.kwargs[key])
                    seq[pos] = None
                    st.kwargs[key] = tuple(seq)
        st.out = -1 if out is None else self._new_slot(out)
        st.aux_out = None
        # NOTE: only a kernel that reads an integer or bool array (a mask, an index) can
        # return a shape that depends on values (x[x > 0]); checking just those keeps the
        # check off the other steps, where it would cost ~10% of a small replayed kernel.
        if kwargs and not reads_index:
            for v in _flat_values(kwargs):
                if self._is_array(v, device) and v.dtype.kind in "biu":
                    reads_index = True
                    break
        if kind == K_KERNEL and out is not None and reads_index and hasattr(out, "shape"):
            st.out_shape = tuple(out.shape)
            st.out_ndim = len(st.out_shape)
            st.out_dims = np.asarray(st.out_shape, dtype=np.intp).tobytes()
        else:
            st.out_shape = None
            st.out_ndim = -1
            st.out_dims = None
        st.target, st.fresh = target, fresh
        st.fuse_info = _fuse_info(fn, its, out, kwargs) if kind == K_KERNEL else None
        st.into = st.buf = None
        if (kind == K_KERNEL and st.kwargs is None and st.out_shape is None
                and type(out) is _ndarray_type
                and cnp.PyArray_NBYTES(<cnp.ndarray>out) >= REUSE_BYTES):
            # (kernels with parameters, value-dependent shapes or aux outputs allocate)
            if type(fn) is _ufunc_type and fn.nout == 1 and n == fn.nin:
                st.into = fn                # (an `out` passed by position: never)
            else:
                st.into = getattr(fn, "out_kernel", None)
        self.steps.append(st)
        return st

    def add_call(self, fn):
        """Record a K_CALL step: fn() runs at that point of every replay."""
        self._step(K_CALL, fn, (), None, None, None, None)

    cdef object _target_of(self, TensorBase t):
        cdef Py_ssize_t i
        for i in range(len(self.arg_tensors)):
            if self.arg_tensors[i] is t:
                return i
        return t

    cdef inline bint _elsewhere(self):
        """Whether the calling thread is not the recording one (its calls are its own)."""
        return PyThread_get_thread_ident() != self.thread

    # -- the engine's calls -----------------------------------------------------------
    def grad_read(self, t):
        if self._elsewhere():
            return
        self.grad_of[id((<TensorBase>(<TensorBase>t)._grad)._data)] = t

    cdef _Step _kernel(self, fn, arrays, kwargs, out, device, inputs):
        if kwargs and self.eager_reason is None:
            for key, value in kwargs.items():
                if _holds_tensor(value):
                    # NOTE: the step would keep that tensor object (a literal), and each
                    # replay would read the recording's values (tg.repeat(x, r) with
                    # another r returned the recorded repeats).
                    self.eager_reason = (
                        f"a tensor was passed as the parameter '{key}' of the kernel "
                        f"{getattr(fn, '__name__', type(fn).__name__)} (shape "
                        f"{tuple(value.shape) if isinstance(value, TensorBase) else '...'}); "
                        f"a kernel reads a parameter's values, which a replay would take from "
                        f"the recording, so this signature runs eagerly (pass numbers or a "
                        f"tuple instead)")
                    break
        return self._step(K_KERNEL, fn, arrays, inputs, kwargs, out, device)

    def kernel(self, fn, arrays, kwargs, out, device, inputs):
        if self._elsewhere():
            return
        self._kernel(fn, arrays, kwargs, out, device, inputs)

    def kernel_aux(self, fn, arrays, kwargs, out, aux, device, inputs):
        """A kernel of an op with aux outputs, which returned (out, *aux): the aux arrays
        get slots, so that the rule reusing them (in the recorded backward) reads each
        replay's own (see Note: [auxiliary outputs] in _engine.pyx)."""
        if self._elsewhere():
            return
        cdef _Step st = self._kernel(fn, arrays, kwargs, out, device, inputs)
        st.aux_out = tuple([self._new_slot(a) for a in aux])
        st.into = None

    def write(self, fn, items, device, owner):
        """fn(*items) writes into items[0] (device.copyto, device.setitem). Called before
        the write, so a constant seen here first is copied intact."""
        if self._elsewhere():
            return
        s = self._slot(items[0], owner)
        entry = self.const_index.get(s)
        if entry is not None and self.constants[entry][2] is None:
            self.constants[entry][2] = _copy_array(items[0])
        self._step(K_WRITE, fn, items, None, None, None, device)
        if any(s == e for e, _ in self.externals) or any(s == a for a, _ in self.arg_slots):
            self.effects.append("an in-place write into a tensor from outside")
            if owner is not None:
                # (first seen through _inplace's stand-in for it; the write comes before
                # the op re-points owner's graph)
                self._note_graph(owner)

    def created(self, arr, device):
        if self._elsewhere():
            return
        if self._slot_of(arr) < 0:
            key = PyLong_FromVoidPtr(<void*>arr)
            self.created_ids.add(key)
            self._watch(key, arr)

    def random(self, device, kind, shape, dtype, params, arr):
        if self._elsewhere():
            return
        self.rng_steps.add(id(self._step(K_KERNEL, device.random, (kind, shape, dtype), None,
                                         params, arr, device)))
        self.effects.append("a random draw")

    def rng_seeded(self, seed):
        if self._elsewhere():
            return
        self.rng_steps.add(id(self._step(K_CALL, functools.partial(tg_random.manual_seed, seed),
                                         (), None, None, None, None)))

    def rng_state_taken(self, state):
        if self._elsewhere():
            return
        cell = _RngStateCell(tuple(state))
        self.rng_cells[id(state)] = (state, cell)     # kept, so that the id stays unique
        self.rng_steps.add(id(self._step(K_CALL, cell.take, (), None, None, None, None)))

    def rng_state_restored(self, state):
        if self._elsewhere():
            return
        found = self.rng_cells.get(id(state))
        if found is not None and found[0] is state:
            st = self._step(K_CALL, found[1].restore, (), None, None, None, None)
        else:       # a state from outside the function: baked in, like any closed-over value
            st = self._step(K_CALL, functools.partial(tg_random.set_state, dict(state)), (),
                            None, None, None, None)
        self.rng_steps.add(id(st))

    def hook_ran(self, hook):
        """A hook is about to run; returns True when it must not (see _record_backward)."""
        if self._elsewhere():
            return None
        if self.eager_reason is None:
            where = ("is on a tensor that the backward of its result passes"
                     if self.hidden_backward else "ran while it recorded")
            self.eager_reason = (
                f"a tensor hook ({getattr(hook, '__qualname__', type(hook).__name__)}) {where}; "
                f"hooks are Python code a replay would skip (for example "
                f"DistributedDataParallel's all-reduce), so this signature runs eagerly")
        return self.hidden_backward

    def once(self, reason):
        if self._elsewhere():
            return
        if self.once_reason is None:
            self.once_reason = reason

    def function_backward(self, name, ctx):
        """A tg.Function's backward is about to run. Unless its class says it runs the
        same ops whatever the gradient's values (replay_backward), a replay of its kernels
        could take the wrong branch: the signature runs eagerly, and the hidden backward
        stops here, before the user's code sees its placeholder gradients."""
        if self._elsewhere():
            return
        if getattr(ctx, "_replay_backward", True):
            return
        if self.eager_reason is None:
            self.eager_reason = (
                f"the backward of tg.Function '{name}' is Python that may depend on the "
                f"gradient's values, which a replay would not see (set replay_backward = True "
                f"on the class if it runs the same ops whatever they are), so this signature "
                f"runs eagerly")
        if self.hidden_backward:
            raise RuntimeError(self.eager_reason)

    def guard(self, value_fn):
        if self._elsewhere():
            return
        # NOTE: creation functions guard tg.get_default_dtype on every call that uses it:
        # the same function with the same value is checked once (a repeat adds nothing).
        value = value_fn()
        if not any(fn is value_fn and not _guard_changed(value, v) for fn, v in self.guards):
            self.guards.append((value_fn, value))

    def eager(self, reason):
        if self._elsewhere():
            return
        if self.eager_reason is None:
            self.eager_reason = reason

    def check(self, run, tensors):
        if self._elsewhere():
            return
        arrays = tuple([(<TensorBase>t)._data for t in tensors])
        st = self._step(K_CALL, run, arrays, tensors, None, None, (<TensorBase>tensors[0])._device)
        self.check_steps.add(id(st))

    def backward_started(self, accumulate, create_graph):
        if self._elsewhere():
            return
        self.any_backward = True
        if accumulate:
            self.inner_backward = True
            self.effects.append("a backward() that sets .grad")

    def bumped(self, t, op_name):
        """An in-place write counted on t's version: a replay counts it on the tensor from
        outside (an argument, or one read by reference) that shares t's version counter;
        tensors made inside are made afresh by each replay."""
        if self._elsewhere():
            return
        vc = (<TensorBase>t)._vc
        target = None
        for i, a in enumerate(self.arg_tensors):
            if (<TensorBase>a)._vc is vc:
                target = i
                break
        else:
            for _, e in self.externals:
                if (<TensorBase>e)._vc is vc:
                    target = e
                    break
            else:
                for _, g in self.grad_externals:
                    cur = (<_GradOf>g).get(tuple(self.arg_tensors))
                    if cur is not None and (<TensorBase>cur)._vc is vc:
                        target = g
                        break
        if target is not None:
            self._step(K_BUMP, op_name, (), None, None, None, None, target=target)

    def grad_accumulated(self, t, g, fresh, result):
        if self._elsewhere():
            return
        self._step(K_ACCUM, None, (g,), None, None, result, (<TensorBase>t)._device,
                   target=self._target_of(t), fresh=fresh)
        self.effects.append("a backward() that sets .grad")

    def grad_assigned(self, t):
        if self._elsewhere():
            return
        g = (<TensorBase>t)._grad
        items = () if g is None else ((<TensorBase>g)._data,)
        self._step(K_SETGRAD, None, items, None, None, None, (<TensorBase>t)._device,
                   target=self._target_of(t))
        self.effects.append("a .grad assignment")


@contextlib.contextmanager
def _recording(rec):
    with _RECORD_LOCK:
        previous = _engine.set_tracer(rec)
        try:
            yield
        finally:
            _engine.set_tracer(previous)


cdef object _copy_array(arr):
    return arr.copy()


# ---------------------------------------------------------------------------------------
# A recorded program
# ---------------------------------------------------------------------------------------

class _ReplayCtx:
    """What a replayed call keeps for its backward (the FunctionNode's ctx)."""
    __slots__ = ("program", "slots", "args", "versions", "_saved")

    def __init__(self, program, slots, args, versions):
        self.program, self.slots, self.args, self.versions = program, slots, args, versions
        self._saved = ()

    def _release(self):
        self.slots = None


cdef class _Program:
    """The forward (and backward) programs recorded for one signature (filled in by
    CompiledFunction._record)."""
    cdef public object signature, name, rebuild
    cdef public tuple arg_slots, grad_inputs, out_slots, out_devices, needs, seed_slots
    cdef public tuple grad_slots, constants, mutable_constants, externals, ext_guard
    cdef public tuple effects, guards, keep_after_forward, names_read
    cdef public tuple out_from      # per output: None (a slot), or ("arg", i), ("ext", t)
                                    # or ("out", k): that very tensor; None if all are slots
    cdef public tuple out_versions  # per output: its version when it recorded; None if all 0
    cdef public tuple out_views     # per output: a view (of a tensor made inside); None if none
    cdef public tuple alias_guard   # ((tensor, argument index), ...) aliased when recorded
    cdef public tuple hook_watch    # tensors (or argument indices) whose .grad is accumulated
    cdef public tuple grad_externals  # ((slot, _GradOf), ...): .grad read from before the call
    cdef public bint writes_outside  # the forward counts writes on outside tensors' versions
    cdef public object vc_partition  # then: which of the arguments and outside tensors
                                     # shared a version counter (None: none did)
    cdef public tuple spent_needs   # outputs that require grad through a graph the function
                                    # backpropagated itself (no backward program)
    cdef public frozenset constant_outs
    cdef public list forward, backward    # the steps as recorded (what describe() lists)
    cdef public list forward_run, backward_run  # what a replay runs: the same steps, with
                                    # runs of fusible kernels as K_FUSED steps (fuse=True)
    cdef public bint inner_backward
    cdef public bint restore_rng          # save the generators first: a fallback gives back draws
    cdef public object eager_reason
    cdef public Py_ssize_t nslots
    cdef public Py_ssize_t first_effect   # forward steps before this one only compute

    def __init__(self, rec, signature, name):
        self.signature = signature
        self.name = name
        self.arg_slots = tuple(rec.arg_slots)
        self.forward = self.forward_run = rec.steps
        self.backward = self.backward_run = None
        self.grad_inputs = ()
        self.inner_backward = rec.inner_backward
        self.out_from = self.out_versions = self.out_views = None
        self.alias_guard = self.hook_watch = self.spent_needs = ()
        self.vc_partition = None
        self.grad_externals = ()

    def describe(self, fused=False):
        """{"forward": [(kind, name), ...], "backward": [...] or None}: the recorded steps,
        or with fused=True the steps a replay runs (("fused", "3 ops: sin,multiply,add")
        for a fused run of kernels)."""
        fwd_steps = self.forward_run if fused else self.forward
        bwd_steps = self.backward_run if fused else self.backward
        fwd = [(<_Step>s).describe() for s in fwd_steps]
        bwd = None if bwd_steps is None else [(<_Step>s).describe() for s in bwd_steps]
        return {"forward": fwd, "backward": bwd}

    def release_buffers(self):
        """Drop the large outputs kept for the next replay (Note: [reused outputs])."""
        _release_buffers(self.forward_run)
        _release_buffers(self.backward_run)

    def reusable_buffers(self):
        """How many kernel steps keep their output for the next replay (for tests)."""
        cdef _Step st
        cdef Py_ssize_t n = 0
        for run in (self.forward_run, self.backward_run):
            for st in run or ():
                n += st.buf is not None
        return n

    def fused_counts(self):
        """(fused steps, kernels they run) over both programs, for tests and tuning."""
        steps = kernels = 0
        for run in (self.forward_run, self.backward_run):
            for st in run or ():
                if (<_Step>st).kind == K_FUSED:
                    steps += 1
                    kernels += len((<_Step>st).sub)
        return steps, kernels


cdef list _initial_slots(_Program program, tuple args):
    cdef list slots = [None] * program.nslots
    for slot, i in program.arg_slots:
        slots[slot] = (<TensorBase>args[i])._data
    for slot, t in program.externals:
        slots[slot] = (<TensorBase>t)._data
    for slot, g in program.grad_externals:
        slots[slot] = (<TensorBase>(<_GradOf>g).get(args))._data
    for slot, value in program.constants:
        slots[slot] = value
    for slot, pristine in program.mutable_constants:
        slots[slot] = _copy_array(pristine)
    return slots


# ---------------------------------------------------------------------------------------
# Signatures
# ---------------------------------------------------------------------------------------

cdef object _float_bits(double d):
    cdef unsigned long long bits
    memcpy(&bits, &d, sizeof(double))
    return bits


cdef double _bits_float(unsigned long long bits):
    cdef double d
    memcpy(&d, &bits, sizeof(double))
    return d


cdef object _describe_value(object v, list tensors):
    """v's part of the cache key; the tensors in it are appended to `tensors` (in key
    order), since each is an argument that a replay reads afresh."""
    cdef TensorBase t
    if isinstance(v, TensorBase):
        t = <TensorBase>v
        tensors.append(v)
        return ("tensor", t._data.shape, t._data.dtype, t._device.name, t._requires_grad)
    # NOTE: a number is baked into the program, so the key must tell apart any two that
    # can give different results: True / 1 / 1.0 (the type name is in the key), and -0.0
    # and 0.0 (x / -0.0 is -inf) or two NaN payloads, which == does not: a ("bits", ...)
    # key holds the exact bits (so the same NaN, as another object, replays).
    if isinstance(v, float):
        return ("bits", type(v).__name__, _float_bits(v))
    if isinstance(v, complex):
        return ("bits", type(v).__name__, _float_bits(v.real), _float_bits(v.imag))
    if isinstance(v, np.generic):
        return ("bits", type(v).__name__, v.dtype.str, v.tobytes())
    if isinstance(v, (bool, int, str, bytes, type(None))):
        return ("value", type(v).__name__, v)
    if isinstance(v, (tuple, list)):
        parts = [type(v).__name__]
        for x in v:
            parts.append(_describe_value(x, tensors))
        return tuple(parts)
    try:
        hash(v)
    except TypeError:
        raise TypeError(
            f"tg.compile: cannot use an argument of type {type(v).__name__} in the cache key; "
            f"pass tensors, arrays, numbers, strings or tuples of them (or close over it)") from None
    return ("object", type(v).__name__, v)


_PART_NAMES = {1: "shape", 2: "dtype", 3: "device", 4: "requires_grad"}


def _fmt(value):
    return str(value) if isinstance(value, np.dtype) else repr(value)


def _fmt_part(part):
    """An argument's key in words (a number for the ("bits", ...) keys of numbers)."""
    if type(part) is tuple and part and part[0] == "bits":
        if len(part) == 3:
            return repr(_bits_float(part[2]))
        if type(part[2]) is str:
            return repr(np.frombuffer(part[3], dtype=np.dtype(part[2]))[0])
        return repr(complex(_bits_float(part[2]), _bits_float(part[3])))
    if type(part) is tuple and part and part[0] == "value":
        return repr(part[2])
    return repr(part)


def _explain_difference(new, old):
    """Which part of the signature differs, in words."""
    if new[0] != old[0]:
        return f"grad mode changed from {'enabled' if old[0] else 'disabled'} to " \
               f"{'enabled' if new[0] else 'disabled'}"
    if len(new[1]) != len(old[1]):
        return f"the number of arguments changed from {len(old[1])} to {len(new[1])}"
    for i, (a, b) in enumerate(zip(new[1], old[1])):
        if a != b:
            if a[0] == b[0] == "tensor":
                for k, part in _PART_NAMES.items():
                    if a[k] != b[k]:
                        return f"argument {i}: {part} changed from {_fmt(b[k])} to {_fmt(a[k])}"
            return f"argument {i} changed from {_fmt_part(b)} to {_fmt_part(a)}"
    if new[2] != old[2]:
        return f"keyword arguments changed from {old[2]!r} to {new[2]!r}"
    if new[3] != old[3]:
        return "which arguments are the same tensor changed"
    return "the signature is the same"


# ---------------------------------------------------------------------------------------
# The compiled function
# ---------------------------------------------------------------------------------------

class CompiledFunction:
    """A function compiled by :func:`tapegrad.compile`; call it like the original."""

    def __init__(self, fn, cache_size=1024, explain=False, check=False, fuse=True):
        if not callable(fn):
            raise TypeError(f"tg.compile: expected a function, got {type(fn).__name__}")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
            raise ValueError(f"tg.compile: cache_size must be a positive int, got {cache_size!r}")
        self.fn = fn
        self.cache_size = cache_size
        self.explain = bool(explain)
        self.check = bool(check)
        self.fuse = bool(fuse)
        self._cache = OrderedDict()
        self._hits = 0
        self._misses = 0
        self.last_explanation = None
        # Library code that compiles internally (tg.hessian's replayed passes) falls back
        # to eager quietly: the warning is about the user's own tg.compile.
        self.warn_when_eager = True
        self._warned_variants = False
        # the program whose large outputs are kept for its next replay: one per function,
        # so a function replayed at many shapes keeps one step's worth of memory, not many
        self._buffered = None
        functools.update_wrapper(self, fn)

    def cache_info(self):
        """CacheInfo(hits, misses, size, maxsize), like functools.lru_cache's; size counts
        programs (a signature recorded under several guarded values has one per value)."""
        return CacheInfo(self._hits, self._misses, self._size(), self.cache_size)

    def _size(self):
        return sum(len(variants) for variants in self._cache.values())

    def cache_clear(self):
        self._cache.clear()
        self._buffered = None
        self._hits = self._misses = 0

    def programs(self):
        """The recorded programs, newest last (for inspection and tests)."""
        return [p for variants in self._cache.values() for p in reversed(variants)]

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self):
        return f"<tg.compile of {getattr(self.fn, '__qualname__', self.fn)!r}: {self.cache_info()}>"

    # -- calling ------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if _engine.get_tracer() is not None:
            # Called while another compiled function records: run eagerly, so that the
            # outer recording sees (and replays) these kernels too.
            return self.fn(*args, **kwargs)
        if _engine.forward_active():
            # NOTE: a replay runs kernels on arrays: the tangents of forward mode (tg.jvp,
            # tg.forward_ad) would not be pushed, so inside a forward level it runs eagerly
            if self.warn_when_eager:
                warnings.warn(f"tg.compile({getattr(self.fn, '__qualname__', self.fn)}): "
                              f"called inside a forward-mode level or a vmap (tg.jvp, "
                              f"tg.jacfwd, tg.forward_ad, tg.vmap): runs eagerly, since a "
                              f"replay would carry neither tangents nor a batch",
                              CompileWarning, stacklevel=2)
            return self.fn(*args, **kwargs)
        cdef bint grad_on = _engine.is_grad_enabled()
        args, tensors, key = _call_key(args, kwargs, grad_on)
        # NOTE: a signature keeps one program per combination of guarded values (train
        # and eval mode, say) that it met, most recent first, so that switching back and
        # forth replays instead of recording every time.
        variants = self._cache.get(key)
        program = why = None
        if variants is not None:
            for candidate in variants:
                stale = _stale_externals(candidate, tensors)
                if stale is None:
                    program, why = candidate, None
                    break
                why = why or stale          # explain against the most recent program
        if program is None:
            self._misses += 1
            if why is None and self._cache:
                why = _explain_difference(key, next(reversed(self._cache)))
            elif why is None:
                why = "first call"
            self.last_explanation = why
            if self.explain:
                _log.warning("tg.compile(%s): recording (%s)",
                             getattr(self.fn, "__qualname__", self.fn), why)
            return self._record(key, args, tensors, kwargs)
        self._hits += 1
        self._cache.move_to_end(key)
        if program.eager_reason is not None:
            return self.fn(*args, **kwargs)
        if self.check:
            return self._checked(program, args, tensors, kwargs)
        rng = tg_random.get_state() if program.restore_rng else None
        if program is not self._buffered:
            if self._buffered is not None:
                self._buffered.release_buffers()
            self._buffered = program
        try:
            return _replay(program, args, tensors, grad_on)
        except ReplayShapeError as exc:
            if rng is not None:
                # Give back what the replay drew: the eager rerun (or the caller, after the
                # error) must see the generators as an eager call would.
                tg_random.set_state(rng)
            if exc.step > program.first_effect:
                # Steps that write (.grad, in-place updates) ran already: running the
                # function again eagerly would do them twice.
                _engine.add_note(exc, f"(the replay had already run steps that write into "
                                      f"tensors or .grad before step {exc.step}, so it was "
                                      f"not rerun eagerly)")
                raise
            # Nothing was written yet: run this call eagerly, and every later one.
            program.eager_reason = str(exc)
            if self.warn_when_eager:
                warnings.warn(f"{exc}; this signature runs eagerly from now on",
                              CompileWarning, stacklevel=2)
            return self.fn(*args, **kwargs)

    def _record(self, key, args, tensors, kwargs):
        # NOTE: one thread records at a time (the engine has one recorder slot). A thread
        # that finds another one recording runs this call eagerly instead of waiting: the
        # recording function may itself be waiting for this thread (a barrier, a queue).
        if not _RECORD_LOCK.acquire(blocking=False):
            return self.fn(*args, **kwargs)
        # NOTE: the cyclic GC is paused while a function records. A recording allocates
        # tens of thousands of objects that all stay alive (steps, tuples, the recorder's
        # weak references): W1's 3,000 ops set off ~100 young and ~9 middle collections
        # that free nothing, and often a full one over every object of the process (30-40
        # ms of its 75 ms first call). Eager tapegrad frees its graphs by reference
        # counting, so what piles up meanwhile is only the cyclic garbage of the user's own
        # code, until the recording ends; results are the same either way (collecting
        # never changes a live object). Paused only if enabled, and re-enabled after.
        gc_was_enabled = gc.isenabled()
        if gc_was_enabled:
            gc.disable()
        try:
            return self._record_locked(key, args, tensors, kwargs)
        finally:
            if gc_was_enabled:
                gc.enable()
            _RECORD_LOCK.release()

    def _record_locked(self, key, args, tensors, kwargs):
        name = f"compiled:{getattr(self.fn, '__name__', 'fn')}"
        cdef _Recorder rec = _Recorder(tensors)
        with _recording(rec):
            out = self.fn(*args, **kwargs)
        inner_any_backward = rec.any_backward     # (the hidden backward below sets it too)
        outs, rebuild = _flatten(out)
        if _engine.is_grad_enabled() != key[0]:
            # The function switched grad mode for its caller (tg.set_grad_enabled(b) called
            # plainly): every replay does it too.
            rec._step(K_CALL, functools.partial(_engine.GRAD_ENABLED.set,
                                                _engine.is_grad_enabled()),
                      (), None, None, None, None)
        program = _Program(rec, key, name)
        program.rebuild = rebuild
        program.out_slots = tuple(rec.slot((<TensorBase>o)._data, o) for o in outs)
        program.out_devices = tuple((<TensorBase>o)._device for o in outs)
        aliased = []
        for ref, k in rec.alias_candidates:
            t = ref()
            if t is not None and not any(t is o for o in outs):   # (outputs: see below)
                aliased.append((t, k))
            elif (<TensorBase>tensors[k])._is_view:
                aliased.append((None, k))       # guarded: while argument k is a view
        if aliased:
            program.alias_guard = tuple(aliased)
            if rec.eager_reason is None:
                rec.eager_reason = (
                    f"argument {aliased[0][1]} shares its array with another tensor that the "
                    f"function reads (a call like f(w.detach()) where the code reads w): a "
                    f"replay could not tell the two apart, so calls that alias them run "
                    f"eagerly")
        _outputs_as_eager(rec, program, outs, tensors)
        for ref, node, rg in rec.graph_before:
            t = ref()
            if t is not None and rec.eager_reason is None and ((<TensorBase>t)._node is not node
                                             or (<TensorBase>t)._requires_grad != rg):
                rec.eager_reason = (
                    f"an in-place op recorded into the graph of a tensor from outside (shape "
                    f"{tuple(t.shape)}; x[0] = w[1] or x.mul_(w) with grad mode on): it now has "
                    f"another grad_fn, which a replay cannot give a caller's tensor, so this "
                    f"signature runs eagerly")
        # NOTE: not the caller's grad mode: tg.enable_grad() inside a function called under
        # tg.no_grad() gives outputs that need gradients (eager gives them a graph too).
        needs = [i for i, o in enumerate(outs) if (<TensorBase>o)._requires_grad
                 and (program.out_from is None or program.out_from[i] is None)]
        if needs and not rec.inner_backward and rec.eager_reason is None:
            _record_backward(rec, program, outs, needs, tensors)
            _check_passthrough_grads(rec, program, outs, tensors)
        elif needs and rec.inner_backward:
            program.spent_needs = tuple(needs)
        program.constants = tuple((s, v) for s, v, p in rec.constants if p is None)
        program.mutable_constants = tuple((s, p) for s, v, p in rec.constants if p is not None)
        program.externals = tuple(rec.externals)
        program.grad_externals = tuple(rec.grad_externals)
        program.ext_guard = tuple(((<TensorBase>t)._data.shape, (<TensorBase>t)._data.dtype,
                                   (<TensorBase>t)._device, bool((<TensorBase>t)._requires_grad))
                                  for _, t in rec.externals)
        program.effects = tuple(dict.fromkeys(rec.effects))
        # A constant returned as an output is copied per call: the caller may write into it.
        program.constant_outs = frozenset(s for s in program.out_slots if s in rec.const_index)
        program.guards = tuple(rec.guards) + _external_guards(rec)
        program.names_read = _tensors_named_by(self.fn)
        if inner_any_backward and rec.eager_reason is None:
            # A hook registered later on a tensor that a backward inside reaches (backward()
            # or tg.grad) would be skipped by the replay: such a call records again (and,
            # the hook running, runs eagerly). A program that runs eagerly runs its hooks.
            watch = {id(t): i for i, t in enumerate(tensors) if (<TensorBase>t)._requires_grad}
            for _, t in rec.externals:
                if (<TensorBase>t)._requires_grad and id(t) not in watch:
                    watch[id(t)] = t
            for st in program.forward:
                if (<_Step>st).kind == K_ACCUM and type((<_Step>st).target) is not int:
                    watch.setdefault(id((<_Step>st).target), (<_Step>st).target)
            program.hook_watch = tuple(watch.values())
        program.eager_reason = rec.eager_reason
        if rec.eager_reason is not None and self.warn_when_eager:
            warnings.warn(f"tg.compile({getattr(self.fn, '__qualname__', self.fn)}): "
                          f"{rec.eager_reason}", CompileWarning, stacklevel=3)
        if _any_of_kind(program.forward, K_BUMP):
            program.writes_outside = True
            program.vc_partition = _vc_partition(tensors, program.externals)
        program.nslots = rec.nslots
        # Seeding, saving and restoring generators are not writes that forbid an eager
        # rerun: a fallback puts the generators back as they were before the replay.
        # A fallback can come only from a step that checks its shape; it has drawn random
        # numbers (to give back) only if such a step follows one that uses a generator.
        program.restore_rng = _checks_shape_after_rng(program.forward, rec.rng_steps)
        program.keep_after_forward = _slots_backward_reads(program)
        _plan_frees(program.forward, set(program.out_slots) | set(program.keep_after_forward),
                    program.nslots)
        if program.backward is not None:
            _plan_frees(program.backward, {k for k in program.grad_slots if k is not None},
                        program.nslots)
        program.forward_run, program.backward_run = program.forward, program.backward
        if self.fuse:
            # (after _plan_frees: a value freed inside a run is one only the run reads)
            first_temp, recipe_plans = _reserve_recipe_slots(program)
            program.forward_run = _fuse_steps(program.forward, program.nslots, first_temp,
                                              recipe_plans)
            if program.backward is not None:
                program.backward_run = _fuse_steps(program.backward, program.nslots,
                                                   first_temp, recipe_plans)
            _build_fused(program)
        _use_plain_calls(program.forward_run)
        if program.backward_run is not None:
            _use_plain_calls(program.backward_run)
        # Index into forward_run (where a replay counts steps); a fused step only computes.
        program.first_effect = _first_effect(program.forward_run, rec.rng_steps,
                                             rec.check_steps)
        if rec.once_reason is not None:
            return out            # ran eagerly; the next such call records again
        for steps in (program.forward, program.backward, program.forward_run,
                      program.backward_run):
            _untrack_steps(steps)   # see Note: [steps the cyclic GC need not see]
        variants = self._cache.setdefault(key, [])
        variants.insert(0, program)
        if len(variants) > _MAX_VARIANTS:
            del variants[_MAX_VARIANTS:]
            if not self._warned_variants:
                self._warned_variants = True
                warnings.warn(
                    f"tg.compile({getattr(self.fn, '__qualname__', self.fn)}): one signature "
                    f"has recorded more than {_MAX_VARIANTS} times, for different guarded "
                    f"values (latest: {self.last_explanation}); a value that changes on every "
                    f"call makes every call record, which is slower than running eagerly "
                    f"(tg.optim.Adam: pass capturable=True)", CompileWarning, stacklevel=3)
        self._cache.move_to_end(key)
        while self._size() > self.cache_size and len(self._cache) > 1:
            self._cache.popitem(last=False)
        if self._size() > self.cache_size:
            del variants[self.cache_size:]
        return out

    def _checked(self, program, args, tensors, kwargs):
        if program.effects:
            raise RuntimeError(
                f"tg.compile(check=True): {getattr(self.fn, '__qualname__', self.fn)} has side "
                f"effects ({', '.join(program.effects)}); running it twice to compare would apply "
                f"them twice. Check a function without them, or use check=False")
        eager = self.fn(*args, **kwargs)
        eager_outs, _ = _flatten(eager)
        out = _replay(program, args, tensors, bool(_engine.is_grad_enabled()))
        outs, _ = _flatten(out)
        for i, (a, b) in enumerate(zip(outs, eager_outs)):
            _compare(self.fn, f"output {i}", a, b)
        if program.backward is not None:
            needs = [i for i, o in enumerate(eager_outs) if o.requires_grad]
            seeds = [(<TensorBase>eager_outs[i])._device.ones(eager_outs[i].shape, eager_outs[i].dtype)
                     for i in needs]
            grad_inputs = _grad_inputs(program, tensors)
            eager_grads = _engine.run_backward(
                tuple(eager_outs[i] for i in needs),
                tuple(_engine.new_tensor(s, (<TensorBase>eager_outs[i])._device) for s, i in zip(seeds, needs)),
                True, False, grad_inputs, True)
            compiled = _engine.run_backward(
                tuple(outs[i] for i in needs),
                tuple(_engine.new_tensor(s, (<TensorBase>outs[i])._device) for s, i in zip(seeds, needs)),
                True, False, _grad_inputs(program, tensors), True)
            for i, (a, b) in enumerate(zip(compiled, eager_grads)):
                if (a is None) != (b is None):
                    raise RuntimeError(f"tg.compile(check=True): gradient {i} of "
                                       f"{getattr(self.fn, '__qualname__', self.fn)} is "
                                       f"{'None' if a is None else 'set'} when compiled but "
                                       f"{'None' if b is None else 'set'} when eager")
                if a is not None:
                    _compare(self.fn, f"gradient {i}", a, b)
        return out


cdef tuple _call_key(tuple args, dict kwargs, bint grad_on):
    """(args with ndarrays made tensors, the tensor arguments, the cache key)."""
    cdef Py_ssize_t n = len(args), i, j
    cdef list parts = [None] * n
    cdef list tensors = []
    cdef list converted = None
    for i in range(n):
        a = args[i]
        if type(a) is np.ndarray:
            dev = _engine.default_device()
            a = _engine.new_tensor((<Device>dev).asarray(a), dev)
            if converted is None:
                converted = list(args)
            converted[i] = a
        parts[i] = _describe_value(a, tensors)
    # NOTE: tensors passed by keyword or inside a tuple/list are arguments too, in key
    # order (keywords sorted): left out, the recording would read them as closed-over
    # tensors and every replay would use the first call's objects.
    kw = ()
    if kwargs:
        kw = []
        for k in sorted(kwargs):
            kw.append((k, _describe_value(kwargs[k], tensors)))
        kw = tuple(kw)
    if converted is not None:
        args = tuple(converted)
    aliases = None
    n = len(tensors)
    for i in range(1, n):
        for j in range(i):
            if (<TensorBase>tensors[i])._data is (<TensorBase>tensors[j])._data:
                if aliases is None:
                    aliases = []
                aliases.append((i, j))
                break
    return args, tuple(tensors), (grad_on, tuple(parts), kw,
                                  None if aliases is None else tuple(aliases))


cdef object _vc_partition(tuple tensors, tuple externals):
    """Per argument and tensor from outside, the first of them that shares its version
    counter; None when none share one. NOTE: a program that writes into one of them saw
    writes to the others that share its counter (a detach(), a view) count on theirs: a
    replay on another sharing would check the versions of what its backward reads
    against the wrong counts."""
    cdef Py_ssize_t i, j, n
    cdef bint any_view = False
    for t in tensors:
        any_view = any_view or (<TensorBase>t)._is_view
    for _, t in externals:
        any_view = any_view or (<TensorBase>t)._is_view
    if not any_view:          # only a view (detach(), reshape, ...) shares a counter
        return None
    cdef list vcs = [(<TensorBase>t)._vc for t in tensors]
    for _, t in externals:
        vcs.append((<TensorBase>t)._vc)
    n = len(vcs)
    out = [0] * n
    shared = False
    for i in range(n):
        out[i] = i
        if vcs[i] is not None:
            for j in range(i):
                if vcs[j] is vcs[i]:
                    out[i] = j
                    shared = True
                    break
    return tuple(out) if shared else None


cdef object _stale_externals(_Program program, tuple tensors):
    """Why a closed-over tensor or a guarded value no longer matches the recording, or None."""
    cdef TensorBase tb
    cdef Py_ssize_t k
    for t, k in program.alias_guard:
        if (not (<TensorBase>tensors[k])._is_view if t is None else
                (<TensorBase>t)._data is not (<TensorBase>tensors[k])._data):
            return (f"argument {k} no longer shares its array with a tensor that the "
                    f"function reads from outside")
    if program.writes_outside and \
            _vc_partition(tensors, program.externals) != program.vc_partition:
        return ("which arguments and tensors from outside share a version counter changed "
                "(one is a detach() or a view of another), and the function writes into one")
    for slot, g in program.grad_externals:
        cur = (<_GradOf>g).get(tensors)
        if cur is None or (<TensorBase>cur)._data.shape != (<_GradOf>g).shape or \
                (<TensorBase>cur)._data.dtype != (<_GradOf>g).dtype:
            return ("a .grad that the function reads before its backward is None now, or of "
                    "another shape or dtype")
    for x in program.hook_watch:
        tb = <TensorBase>(tensors[<Py_ssize_t>x] if type(x) is int else x)
        if tb._hooks or (tb._node is not None and tb._node.hooks):
            return (f"a hook was registered on a tensor (shape {tuple(tb._data.shape)}) "
                    f"that a backward inside the function reaches")
    for value_fn, value in program.guards:
        now = value_fn()
        if _guard_changed(now, value):
            return (f"a value guarded by {getattr(value_fn, '__qualname__', value_fn)} changed "
                    f"from {value!r} to {now!r}")
    for name, cell, namespace, value in program.names_read:
        now = _NOTHING
        try:
            now = cell.cell_contents if cell is not None else namespace.get(name, _NOTHING)
        except ValueError:            # an emptied closure cell
            pass
        if now is not value:
            return (f"the name {name!r} that the function reads now refers to another object "
                    f"than the tensor it read when it recorded (pass tensors that are "
                    f"replaced between calls as arguments, or update them in place)")
    cdef tuple externals = program.externals, guard = program.ext_guard
    for k in range(len(externals)):
        tb = <TensorBase>(<tuple>externals[k])[1]
        shape, dtype, device, rg = guard[k]
        if tb._data.shape == shape and tb._data.dtype is dtype and tb._device is device \
                and tb._requires_grad == rg:
            continue
        if tb._data.shape != shape or tb._data.dtype != dtype or tb._device is not device \
                or bool(tb._requires_grad) != rg:
            return (f"closed-over tensor {k} changed: was shape {shape}, {dtype}, "
                    f"{device.name}, requires_grad={rg}; now shape {tuple(tb._data.shape)}, "
                    f"{tb._data.dtype}, {tb._device.name}, requires_grad={bool(tb._requires_grad)}")
    return None


_NOTHING = object()


cdef inline bint _guard_changed(object now, object value) except -1:
    # Floats by their bits, as arguments are (see _describe_value): -0.0 is not 0.0.
    if type(now) is float and type(value) is float:
        return _float_bits(now) != _float_bits(value)
    return bool(now != value)


def _tensors_named_by(fn):
    """(name, closure cell or None, globals or None, tensor) for each tensor that fn's own
    code reads by name, from a closure cell or a global. A replay reads the tensor it
    recorded with; if the name is rebound to another tensor (w = w - lr * g at module
    level), the next call must record again instead of reading the old one."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return ()
    out = []
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, TensorBase):
            out.append((name, cell, None, value))
    namespace = getattr(fn, "__globals__", None)
    if namespace is not None:
        for name in code.co_names:
            value = namespace.get(name)
            if isinstance(value, TensorBase):
                out.append((name, None, namespace, value))
    return tuple(out)


cdef bint _any_of_kind(list steps, int kind):
    cdef _Step st
    for st in steps:
        if st.kind == kind:
            return True
    return False


cdef bint _checks_shape_after_rng(list steps, set rng_steps) except -1:
    """Whether a step that checks its shape follows the first that uses a generator."""
    cdef _Step st
    cdef bint drawn = False
    for st in steps:
        if drawn:
            if st.out_ndim >= 0:
                return True
        elif rng_steps and id(st) in rng_steps:
            drawn = True
    return False


cdef Py_ssize_t _first_effect(list steps, set rng_steps, set check_steps) except -1:
    """The index of the first step that does more than compute, or len(steps)."""
    cdef _Step st
    cdef Py_ssize_t i
    for i in range(len(steps)):
        st = <_Step>steps[i]
        if st.kind != K_KERNEL and st.kind != K_FUSED and not (
                rng_steps and id(st) in rng_steps) and not (
                check_steps and id(st) in check_steps):
            return i
    return len(steps)



# Note: [steps the cyclic GC need not see]
# A recording leaves tens of thousands of long-lived objects (W1: 6,600 steps and 40,000
# tuples of slots, literals and shapes). The cyclic GC traverses every tracked object of a
# generation on each of its collections: the first young collection after a recording
# walked all of them (~6 ms of W1's ~65 ms first call), and each later middle or full
# collection walks them again, in the middle of whatever replay it interrupts. None of
# them can be part of a reference cycle when everything a step holds is a leaf (numbers,
# strings, arrays, dtypes, ufuncs, devices, fused kernels, C functions, first-party
# module-level functions, and tuples of those): nothing it reaches can reach the step, so
# reference counting alone frees it, and it is untracked (CPython does the same for
# tuples of atoms on their first traversal). A step holding anything else (a tensor, a
# closure, a bound Python method, a list) stays tracked: a cycle through it is still
# found. NOTE: only fields set before the step is untracked may hold objects; a replay
# later sets `buf`, which is always a plain ndarray (see _kernel_reusing).
cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)
    bint PyObject_GC_IsTracked(object op)

cdef object _builtin_type = type(len)
cdef object _module_type = type(np)
cdef object _cyfunction_type = type(_flat_values)     # (a def of this Cython module)
cdef object _plain_function_type = types.FunctionType   # (a lambda here is a cyfunction)
cdef object _dispatcher_type = type(np.broadcast_to)   # NumPy's Python-level functions
cdef object _method_descriptor_type = type(np.ndarray.transpose)   # a C type's method


cdef object _generic_type = np.generic
cdef object _dtype_type = np.dtype


cdef bint _leaf_value(object v, int depth) except -1:
    """Whether v holds nothing that could lead back to a step (see Note: [steps the
    cyclic GC need not see]); tuples found to be leaves are untracked on the way."""
    t = type(v)
    if t is tuple:                  # (first: most values here are tuples, or ints in them)
        if depth > 4:
            return False
        for x in <tuple>v:
            if not (x is None or type(x) is int or _leaf_value(x, depth + 1)):
                return False
        if PyObject_GC_IsTracked(v):
            PyObject_GC_UnTrack(<void*>v)
        return True
    if (v is None or t is int or t is float or t is bool or t is str or t is bytes
            or t is complex or v is Ellipsis or t is _ndarray_type or t is _ufunc_type
            or t is FusedKernel or t is InPlaceKernel or isinstance(v, _generic_type)
            or isinstance(v, _dtype_type) or isinstance(v, Device)):
        return True
    if t is slice:
        return (_leaf_value((<slice>v).start, depth + 1) and _leaf_value((<slice>v).stop, depth + 1)
                and _leaf_value((<slice>v).step, depth + 1))
    return False


cdef bint _leaf_callable(object fn) except -1:
    """Whether a step's kernel is a leaf: a ufunc, a C function (bound to nothing, a
    module, a ufunc: np.add.reduce), one of NumPy's Python-level functions, or a
    module-level function of a tapegrad module (no closure; its globals are a module's,
    which lives as long as the process)."""
    t = type(fn)
    if fn is None or t is _ufunc_type:
        return True
    if t is _builtin_type:
        owner = getattr(fn, "__self__", None)
        return (owner is None or type(owner) is _module_type or type(owner) is _ufunc_type)
    if t is _method_descriptor_type:
        return True                 # (its type object is all it holds)
    if t is _dispatcher_type:
        return getattr(fn, "__module__", "").startswith("numpy")
    if t is _cyfunction_type or t is _plain_function_type:
        module = getattr(fn, "__module__", None)
        return (getattr(fn, "__closure__", None) is None and type(module) is str
                and (module == "tapegrad" or module.startswith("tapegrad")))
    return False


cdef bint _untrack_step(_Step st) except -1:
    """Untracks st (and its tuples) when everything it holds is a leaf; True if it was."""
    if not PyObject_GC_IsTracked(st):
        return True                 # (already checked: a fused step's sub is also listed)
    if not (_leaf_callable(st.fn) or type(st.fn) is FusedKernel or type(st.fn) is InPlaceKernel):
        return False
    if st.into is not None and not _leaf_callable(st.into):
        return False
    if not (st.target is None or type(st.target) is int):
        return False
    if st.buf is not None and type(st.buf) is not _ndarray_type:
        return False
    if not (st.device is None or isinstance(st.device, Device)):
        return False
    if not (_leaf_value(st.idx, 0) and _leaf_value(st.lits, 0) and _leaf_value(st.free, 0)
            and (st.kwslots is None or _leaf_value(st.kwslots, 0))
            and (st.aux_out is None or _leaf_value(st.aux_out, 0))
            and (st.out_shape is None or _leaf_value(st.out_shape, 0))
            and (st.fuse_info is None or _leaf_value(st.fuse_info, 0))):
        return False
    if st.kwargs is not None:
        for value in st.kwargs.values():
            if not _leaf_value(value, 0):
                return False
    if st.sub is not None:
        if not _untrack_steps(st.sub):
            return False
        PyObject_GC_UnTrack(<void*>st.sub)
    if st.kwargs is not None:
        PyObject_GC_UnTrack(<void*>st.kwargs)
    if PyObject_GC_IsTracked(st):
        PyObject_GC_UnTrack(<void*>st)
    return True


cdef bint _untrack_steps(list steps) except -1:
    """Untracks every step of `steps` that is all leaves; True if every one was."""
    cdef bint all_untracked = True
    if steps is None:
        return True
    for st in steps:
        if not _untrack_step(<_Step>st):
            all_untracked = False
    return all_untracked


def _untracked(step):
    """Whether a recorded step is untracked by the cyclic GC (for tests)."""
    return not PyObject_GC_IsTracked(step)

def _outputs_as_eager(_Recorder rec, _Program program, tuple outs, tuple tensors):
    """Make the replay's outputs what eager returns: an argument, a tensor read from
    outside, or an earlier output returned as it is is returned as that very tensor
    (eager returns that object, with its version and leaf status); an output that is a
    view of one of those (x.reshape, w.T) shares its version counter and view status,
    which a fresh tensor could not, so such a signature runs eagerly; an output written
    in place inside gets the version it had."""
    cdef TensorBase o
    n = len(outs)
    out_from = [None] * n
    versions = [0] * n
    views = [False] * n
    outside = [(("arg", j), a) for j, a in enumerate(tensors)] + \
              [(("ext", e), e) for _, e in rec.externals]
    for i in range(n):
        o = <TensorBase>outs[i]
        for src, x in outside:
            if x is o:
                out_from[i] = src
                break
        else:
            for k in range(i):
                if outs[k] is o:
                    out_from[i] = ("out", k)
                    break
        if out_from[i] is not None:
            continue
        versions[i] = _version(o)
        views[i] = o._is_view
        if o._vc is None or rec.eager_reason is not None:
            continue
        if any((<TensorBase>x)._vc is o._vc for _, x in outside):
            what = "an argument or of a tensor read from outside"
        elif any((<TensorBase>x)._vc is o._vc for x in outs[:i]):
            what = "another output"
        else:
            continue
        rec.eager_reason = (
            f"output {i} is a view of {what} (x.reshape(...), w.T, x.detach()), and a "
            f"replay's fresh output could not share its version counter and view status, "
            f"so this signature runs eagerly")
    if any(x is not None for x in out_from):
        program.out_from = tuple(out_from)
    if any(versions):
        program.out_versions = tuple(versions)
    if any(views):
        program.out_views = tuple(views)


def _check_passthrough_grads(_Recorder rec, _Program program, tuple outs, tuple tensors):
    """An output returned as an argument or outside tensor that the other outputs'
    gradients reach too: eagerly its gradients are summed in the engine's order with
    the others (g_x + g1 + g2), a replay sums the program's part first (g1 + g2), which
    can differ in the last bit. Such a signature runs eagerly."""
    if program.out_from is None or program.backward is None:   # (None: recording it raised)
        return
    for i, src in enumerate(program.out_from):
        if src is None or src[0] == "out" or not (<TensorBase>outs[i])._requires_grad:
            continue
        for spec, g in zip(program.grad_inputs, program.grad_slots):
            if g is not None and ((type(spec) is int and spec == src[1]) if src[0] == "arg"
                                  else spec is src[1]):
                if rec.eager_reason is None:
                    rec.eager_reason = (
                        f"output {i} is a tensor from outside (or an argument) returned as it "
                        f"is, which the other outputs' gradients reach too: a replay would sum "
                        f"its gradients in another order than eager, so this signature runs "
                        f"eagerly")
                return


def _flatten(out):
    """(tensors, rebuild): the function's result as a flat tuple of tensors."""
    if isinstance(out, TensorBase):
        return (out,), None
    if isinstance(out, (tuple, list)) and all(isinstance(o, TensorBase) for o in out):
        return tuple(out), type(out)
    if out is None:
        return (), "none"
    raise TypeError(
        f"tg.compile: the function must return a Tensor, a tuple or list of Tensors, or None; "
        f"it returned {type(out).__name__}")


def _grad_inputs(program, tuple tensors):
    out = []
    for spec in program.grad_inputs:
        out.append(tensors[spec] if type(spec) is int else spec)
    return tuple(out)


def _record_backward(_Recorder rec, program, outs, needs, tensors):
    """Run one backward over the eager graph with placeholder cotangents, recording it."""
    grad_inputs = []
    specs = []
    for i, t in enumerate(tensors):
        if (<TensorBase>t)._requires_grad and not any(t is u for u in tensors[:i]):
            grad_inputs.append(t)
            specs.append(i)
    for slot, t in rec.externals:
        if (<TensorBase>t)._requires_grad and not any(t is u for u in grad_inputs):
            grad_inputs.append(t)
            specs.append(t)
    if not grad_inputs:
        return
    seeds, seed_slots = [], []
    for i in needs:
        o = <TensorBase>outs[i]
        arr = o._device.ones(o._data.shape, o._data.dtype)
        seed_slots.append(rec._new_slot(arr))
        seeds.append(_engine.new_tensor(arr, o._device))
    forward = rec.steps
    rec.steps = []
    rec.hidden_backward = True
    try:
        with _recording(rec):
            # input_hooks=False: the inputs' own hooks run in the real backward, which
            # reaches them through the replay's node. Hooks inside are not called at all
            # (Recorder.hook_ran): they would see the placeholder gradients.
            grads = _engine.run_backward(tuple(outs[i] for i in needs), tuple(seeds), True,
                                         False, tuple(grad_inputs), True, False)
    except Exception as exc:
        # NOTE: the eager call returned normally; its backward (if the caller ever runs
        # one) is the one that must raise, e.g. for a saved value the function itself
        # modified in place afterwards. So this signature runs eagerly instead.
        rec.steps = forward
        if rec.eager_reason is None:
            rec.eager_reason = (
                f"recording its backward raised {type(exc).__name__} ({exc}); a call returns "
                f"before any backward runs, so this signature runs eagerly and the error "
                f"comes, as it would eagerly, from a backward through its result")
        return
    finally:
        rec.hidden_backward = False
    program.backward = rec.steps
    rec.steps = forward
    program.seed_slots = tuple(seed_slots)
    program.needs = tuple(needs)
    program.grad_inputs = tuple(specs)
    program.grad_slots = tuple(None if g is None else rec.slot((<TensorBase>g)._data)
                               for g in grads)


cdef void _plan_frees(list steps, object protected, Py_ssize_t nslots) except *:
    """Set each step's `free`: the slots it reads (or writes) for the last time, in the
    order the program first mentions them (slots are below `nslots`)."""
    cdef _Step st
    cdef Py_ssize_t i, j, k, n = len(steps), nseen = 0
    cdef object slot_obj
    cdef tuple frees
    # NOTE: C arrays throughout (W1's first call plans 6,600 steps): last reader and
    # first-mention order per slot, the protected slots as flags, and per step the
    # number of slots it frees, so that each step's tuple is made once, at its size.
    cdef Py_ssize_t *last = <Py_ssize_t*>malloc(max(1, nslots) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *seen = <Py_ssize_t*>malloc(max(1, nslots) * sizeof(Py_ssize_t))
    cdef unsigned char *kept = <unsigned char*>calloc(max(1, nslots), 1)
    cdef Py_ssize_t *nfree = <Py_ssize_t*>calloc(max(1, n), sizeof(Py_ssize_t))
    try:
        if last == NULL or seen == NULL or kept == NULL or nfree == NULL:
            raise MemoryError()
        for k in range(nslots):
            last[k] = -1
        for i in range(n):
            st = <_Step>steps[i]
            for k in st.idx:
                if k >= 0:
                    nseen = _mention(last, seen, nseen, nslots, k, i, True)
            if st.kwslots:
                for _, _, k in st.kwslots:
                    nseen = _mention(last, seen, nseen, nslots, k, i, True)
            if st.out >= 0:
                nseen = _mention(last, seen, nseen, nslots, st.out, i, True)
            if st.aux_out is not None:
                for k in st.aux_out:      # (one nothing reads is dropped right away)
                    nseen = _mention(last, seen, nseen, nslots, k, i, False)
        for k in protected:
            if 0 <= k < nslots:
                kept[k] = 1
        for j in range(nseen):
            k = seen[j]
            if not kept[k]:
                nfree[last[k]] += 1
        for i in range(n):
            (<_Step>steps[i]).free = _EMPTY if nfree[i] == 0 else PyTuple_New(nfree[i])
            nfree[i] = 0                  # (now: how many are filled in)
        for j in range(nseen):            # in first-mention order, as before
            k = seen[j]
            if kept[k]:
                continue
            i = last[k]
            frees = (<_Step>steps[i]).free
            slot_obj = k
            Py_INCREF(slot_obj)
            PyTuple_SET_ITEM(frees, nfree[i], slot_obj)
            nfree[i] += 1
    finally:
        free(last)
        free(seen)
        free(kept)
        free(nfree)


cdef inline Py_ssize_t _mention(Py_ssize_t *last, Py_ssize_t *seen, Py_ssize_t nseen,
                                Py_ssize_t nslots, Py_ssize_t k, Py_ssize_t i,
                                bint overwrite) except -1:
    """_plan_frees: step i mentions slot k (overwrite=False: only if none did before)."""
    if k >= nslots:
        raise RuntimeError(f"tg.compile: a step reads slot {k} of a program of {nslots}")
    if last[k] < 0:
        seen[nseen] = k
        nseen += 1
        last[k] = i
    elif overwrite:
        last[k] = i
    return nseen


def _slots_backward_reads(_Program program):
    """Slots written before the backward that the backward program reads."""
    if program.backward is None:
        return ()
    cdef _Step st
    cdef Py_ssize_t k, n = program.nslots
    cdef unsigned char *state = <unsigned char*>calloc(max(1, n), 1)  # 1 written, 2 read
    try:
        if state == NULL:
            raise MemoryError()
        for k in program.seed_slots:
            state[_checked_slot(k, n)] = 1
        for st in program.backward:
            for k in st.idx:
                if k >= 0 and state[_checked_slot(k, n)] == 0:
                    state[k] = 2
            if st.kwslots:
                for _, _, k in st.kwslots:
                    if state[_checked_slot(k, n)] == 0:
                        state[k] = 2
            if st.out >= 0 and state[_checked_slot(st.out, n)] != 2:
                state[st.out] = 1
            if st.aux_out is not None:
                for k in st.aux_out:
                    if state[_checked_slot(k, n)] != 2:
                        state[k] = 1
        for g in program.grad_slots:
            if g is not None and state[_checked_slot(g, n)] == 0:
                state[<Py_ssize_t>g] = 2
        return tuple([k for k in range(n) if state[k] == 2])
    finally:
        free(state)


cdef inline Py_ssize_t _checked_slot(Py_ssize_t k, Py_ssize_t nslots) except -1:
    if k < 0 or k >= nslots:
        raise RuntimeError(f"tg.compile: slot {k} outside a program of {nslots} slots")
    return k


# ---------------------------------------------------------------------------------------
# Fusion (the kernels' inner loops: _fuse.pyx)
# ---------------------------------------------------------------------------------------

cdef dict _fusible_loops = {}    # typenum -> {ufunc: in FUSIBLE, with a loop for typenum}


cdef bint _fusible(object fn, int typenum) except -1:
    """Whether ufunc `fn` on `typenum` arrays may join a fused step (cached per ufunc)."""
    cdef dict known = _fusible_loops.get(typenum)
    if known is None:
        known = _fusible_loops[typenum] = {}
    found = known.get(fn)
    if found is None:
        found = known[fn] = fn in _FUSIBLE and loop_index(fn, typenum) >= 0
    return found


cdef object _fuse_info(object fn, tuple items, object out, object kwargs):
    """(typenum, out shape, input sizes) when this kernel call may join a fused step: a
    ufunc of _fuse.FUSIBLE on NumPy arrays of one float dtype, no keywords, every input
    of the result's size or of one element (a broadcast scalar); else None."""
    if kwargs or type(out) is not _ndarray_type:
        return None
    if type(fn) is not _ufunc_type:
        return _recipe_fuse_info(fn, items, <cnp.ndarray>out)
    cdef cnp.ndarray o = <cnp.ndarray>out
    cdef int typenum = cnp.PyArray_TYPE(o)
    cdef cnp.npy_intp size = cnp.PyArray_SIZE(o), s
    cdef Py_ssize_t i, n = len(items)
    if typenum not in _FUSIBLE_TYPES or size == 0 or n != (<cnp.ufunc>fn).nin:
        return None
    cdef tuple sizes = PyTuple_New(n)
    cdef object size_obj            # (an object: Cython would infer a C integer)
    for i in range(n):
        a = items[i]
        if type(a) is not _ndarray_type or cnp.PyArray_TYPE(<cnp.ndarray>a) != typenum:
            return None
        s = cnp.PyArray_SIZE(<cnp.ndarray>a)
        if s != size and s != 1:
            return None
        if s == 1 and size == 1 and cnp.PyArray_NDIM(<cnp.ndarray>a) > 0 \
                and a.shape != out.shape:
            # NOTE: (1,) against (1, 1): NumPy's iterator runs it, with strides for its
            # length-1 axes that a fused step would have to guess (see FusedKernel.run)
            return None
        size_obj = s
        Py_INCREF(size_obj)
        PyTuple_SET_ITEM(sizes, i, size_obj)
    if not _fusible(fn, typenum):
        return None
    return (typenum, out.shape, sizes)


# Note: [fusion recipes]
# A kernel that computes what a chain of ufuncs computes, bit for bit (a backward op's C
# loop, like tanh_backward's for g * (1 - ans * ans)), may say so with an attribute
# `fused_as`: a tuple of (ufunc, operands) in the order the chain calls them, operands
# being an int (the kernel's input i < nin, or nin + j: the result of the recipe's j-th
# ufunc) or a float (a 0-d constant of the run's dtype); the last ufunc's result is the
# kernel's. Its rule may then call the backward op while tg.compile records (one
# recorded kernel instead of the chain's three, each a dispatch and a recorded step: W1's
# first call), and a fused run expands the step into the recipe's ufuncs, the very calls
# the chain would have recorded: the fused step runs the same inner loops on the same
# operands (its intermediates in scratch registers, its constants in constant slots) as
# before. Run on its own (unfused, fuse=False, or a fallback), the step calls the kernel.
# Only inputs of the result's full shape (no broadcasting) and dtypes whose loops the
# recipe's ufuncs all have take this path; any other call is a plain kernel step.
cdef dict _recipes_checked = {}  # typenum -> {kernel with fused_as: its recipe, or None
                                 # when it does not check out}


cdef object _recipe_of(object fn, int typenum):
    """fn's fusion recipe when every ufunc of it fuses on `typenum` (else None)."""
    cdef dict known = _recipes_checked.get(typenum)
    cdef PyObject *found
    if known is None:
        known = _recipes_checked[typenum] = {}
    try:
        found = PyDict_GetItem(known, fn)
    except TypeError:
        return None                 # (an unhashable kernel)
    if found != NULL:
        return <object>found
    recipe = getattr(fn, "fused_as", None)
    if recipe is None:
        return None                 # (not cached: kernels made per call would pile up)
    ok = type(recipe) is tuple and len(recipe) >= 1
    if ok:
        for entry in recipe:
            if not (type(entry) is tuple and len(entry) == 2 and type(entry[0]) is _ufunc_type
                    and type(entry[1]) is tuple and len(entry[1]) == (<cnp.ufunc>entry[0]).nin
                    and (<cnp.ufunc>entry[0]).nout == 1 and _fusible(entry[0], typenum)):
                ok = False
                break
    known[fn] = recipe if ok else None
    return known[fn]


cdef object _recipe_fuse_info(object fn, tuple items, cnp.ndarray out):
    """_fuse_info of a kernel with a fusion recipe: every input an ndarray of the
    result's dtype and shape (the recipe's results then all have that shape)."""
    cdef int typenum = cnp.PyArray_TYPE(out)
    cdef cnp.npy_intp size = cnp.PyArray_SIZE(out)
    if typenum not in _FUSIBLE_TYPES or size == 0:
        return None
    recipe = _recipe_of(fn, typenum)
    if recipe is None:
        return None
    cdef Py_ssize_t i, n = len(items), j = 0
    shape = (<object>out).shape
    for entry in <tuple>recipe:       # operands must name inputs, earlier results, floats
        for operand in <tuple>entry[1]:
            if type(operand) is int:
                if not 0 <= operand < n + j:
                    return None
            elif type(operand) is not float:
                return None
        j += 1
    for i in range(n):
        a = items[i]
        if type(a) is not _ndarray_type or cnp.PyArray_TYPE(<cnp.ndarray>a) != typenum \
                or a.shape != shape:
            return None
    return (typenum, shape, (size,) * n)


cdef tuple _reserve_recipe_slots(_Program program):
    """Slots for the fusion recipes of the program's steps (see Note: [fusion
    recipes]): a constant slot per (value, dtype) its recipes read, and as many temporary
    slots as the longest recipe has intermediates (shared: a recipe's intermediates are
    dead when the next one starts). Returns (the first temporary slot, plans): plans maps
    (kernel, typenum) to its recipe resolved for _expand_recipe, ((ufunc, operands),
    ...) with each operand an input index (>= 0), or ~slot of a constant, or an
    intermediate as ~(first temporary + j) (all temporaries and constants lie above the
    program's other slots); the constants are added to the program (forward and
    backward read them)."""
    cdef _Step st
    cdef dict consts = {}, plans = {}
    cdef Py_ssize_t temps = 0, n, j
    cdef list added = [], used = []
    for steps in (program.forward, program.backward):
        for st in steps or ():
            if st.fuse_info is None or type(st.fn) is _ufunc_type:
                continue
            typenum = (<tuple>st.fuse_info)[0]
            key = (st.fn, typenum)
            if key in plans:
                continue
            recipe = <tuple>_recipe_of(st.fn, typenum)
            plans[key] = None
            used.append((key, recipe, len(st.idx)))
            temps = max(temps, len(recipe) - 1)
            for entry in recipe:
                for operand in <tuple>entry[1]:
                    if type(operand) is float and (operand, typenum) not in consts:
                        consts[(operand, typenum)] = program.nslots
                        added.append((program.nslots,
                                      np.array(operand, dtype=cnp.PyArray_DescrFromType(typenum))))
                        program.nslots += 1
    if added:
        program.constants = tuple(program.constants) + tuple(added)
        program.keep_after_forward = tuple(program.keep_after_forward) + tuple(
            [slot for slot, _ in added])
    first_temp = program.nslots
    program.nslots += temps
    for key, recipe, n in used:
        typenum = key[1]
        plan = []
        for entry in recipe:
            resolved = []
            for operand in <tuple>entry[1]:
                if type(operand) is float:
                    resolved.append(~consts[(operand, typenum)])
                elif operand < n:
                    resolved.append(operand)
                else:
                    resolved.append(~(first_temp + operand - n))
            plan.append((entry[0], tuple(resolved)))
        plans[key] = tuple(plan)
    return first_temp, plans


cdef enum:                       # _fuse_steps' per-slot flags, within one run
    _RUN_READS_FIRST = 1         # read before the run writes it: an input of the step
    _RUN_WRITES = 2
    _RUN_FREES = 4               # read for the last time in the run (dropped after it)


cdef list _fuse_steps(list steps, Py_ssize_t nslots, Py_ssize_t first_temp=-1,
                      dict recipe_plans=None):
    """`steps` with each run of two or more consecutive fusible kernels of one dtype and
    result shape replaced by one K_FUSED step (which keeps the run, as `sub`, for the
    calls it cannot fuse). Needs the frees planned: a slot a run writes and frees is one
    only the run reads (a scratch register); the others it writes are its outputs.
    `nslots`: the program's number of slots (every slot read or written is below it);
    `first_temp`, `recipe_plans`: from _reserve_recipe_slots (a step of a kernel
    with a fusion recipe is expanded into the recipe's ufuncs, see Note: [fusion
    recipes])."""
    cdef list out = []
    cdef Py_ssize_t i = 0, j, n, pos, k, lo, hi
    cdef _Step st, g, fused
    cdef tuple info, gidx, sizes
    cdef list group, ops, freed
    cdef set escaping
    cdef dict in_sizes
    cdef bint in_range
    # NOTE: per-slot flags in a C array (cleared over the run's slot range after each
    # run): W1's runs have 3,000 ops, and sets and dicts of Python ints cost ~2,500
    # instructions an op of the first call.
    cdef unsigned char *flag = <unsigned char*>calloc(max(1, nslots), 1)
    if flag == NULL:
        raise MemoryError()
    try:
        steps = _fuse_inplace(steps)        # first: the in-place runs take their kernels
        n = len(steps)
        while i < n:
            st = <_Step>steps[i]
            if st.fuse_info is None:
                out.append(st)
                i += 1
                continue
            info = st.fuse_info
            j = i + 1
            while j < n and (<_Step>steps[j]).fuse_info is not None \
                    and (<tuple>(<_Step>steps[j]).fuse_info)[0] == info[0] \
                    and (<tuple>(<_Step>steps[j]).fuse_info)[1] == info[1]:
                j += 1
            if j - i < 2:
                out.append(st)
                i = j
                continue
            group = steps[i:j]
            in_range = True
            lo, hi = nslots, -1
            for g in group:                 # (slots out of range: leave the run unfused)
                if not 0 <= g.out < nslots:
                    in_range = False
                for k in g.idx:
                    if not 0 <= k < nslots:
                        in_range = False
                for k in g.free or ():
                    if not 0 <= k < nslots:
                        in_range = False
            if not in_range:
                out.extend(group)
                i = j
                continue
            in_sizes, ops, freed, escaping = {}, [], [], set()
            for g in group:
                gidx = g.idx
                sizes = <tuple>(<tuple>g.fuse_info)[2]
                for pos in range(len(gidx)):
                    k = gidx[pos]
                    if not flag[k] & (_RUN_READS_FIRST | _RUN_WRITES):
                        flag[k] |= _RUN_READS_FIRST
                        in_sizes[gidx[pos]] = sizes[pos]
                    lo, hi = min(lo, k), max(hi, k)
                k = g.out
                flag[k] |= _RUN_WRITES
                lo, hi = min(lo, k), max(hi, k)
                if g.free:
                    for k in g.free:
                        if not flag[k] & _RUN_FREES:
                            flag[k] |= _RUN_FREES
                            freed.append(k)
                        lo, hi = min(lo, k), max(hi, k)
                if type(g.fn) is _ufunc_type:
                    ops.append((g.fn, gidx, g.out))
                else:
                    if recipe_plans is None:
                        raise RuntimeError("tg.compile: a fusion recipe without its slots")
                    _expand_recipe(g, info[0], first_temp, recipe_plans, flag, ops, in_sizes)
                    # (the constants and temporaries lie above every other slot, see
                    # _reserve_recipe_slots: their flags are cleared with the run's)
                    hi = nslots - 1
            for g in group:
                k = g.out
                if not flag[k] & _RUN_FREES:
                    escaping.add(k)
            if hi >= lo:
                memset(flag + lo, 0, hi - lo + 1)
            fused = _Step.__new__(_Step)
            fused.kind = K_FUSED
            fused.fn = (ops, info[0], info[1], in_sizes, escaping)   # see _build_fused
            fused.idx = fused.lits = ()
            fused.kwargs = fused.kwslots = None
            fused.out = -1
            fused.device = st.device
            fused.free = tuple(freed)
            fused.out_ndim = -1
            fused.sub = group
            out.append(fused)
            i = j
    finally:
        free(flag)
    return out


cdef void _expand_recipe(_Step g, object typenum, Py_ssize_t first_temp, dict plans,
                         unsigned char *flag, list ops, dict in_sizes) except *:
    """_fuse_steps: append the ufunc calls of g's fusion recipe to `ops` (see Note:
    [fusion recipes]; `plans`: from _reserve_recipe_slots): inputs are g's slots,
    intermediates the temporary slots, floats the constant slots (read from outside the
    run: inputs of one element)."""
    cdef tuple plan = <tuple>plans[(g.fn, typenum)]
    cdef tuple gidx = g.idx, operands, args
    cdef Py_ssize_t j, a, last = len(plan) - 1, k, code
    cdef object slot_obj
    for j in range(len(plan)):
        ufunc, operands = <tuple>plan[j]
        args = PyTuple_New(len(operands))
        for a in range(len(operands)):
            code = operands[a]
            if code >= 0:
                slot_obj = gidx[code]
            else:
                k = ~code
                slot_obj = k
                if k < first_temp and not flag[k] & (_RUN_READS_FIRST | _RUN_WRITES):
                    flag[k] |= _RUN_READS_FIRST       # a constant: an input of the run
                    in_sizes[slot_obj] = 1
            Py_INCREF(slot_obj)
            PyTuple_SET_ITEM(args, a, slot_obj)
        k = g.out if j == last else first_temp + j
        flag[k] |= _RUN_WRITES
        ops.append((ufunc, args, k))


cdef object _inplace_write_ufunc(_Step st):
    """The ufunc of an in-place ufunc write `ufunc(dst, other, out=dst)` (what an unrecorded
    `p -= t` records: _engine.ufunc_into) between two slots, when a fused step may run it;
    else None."""
    if st.kind != K_WRITE or st.fn is not _engine.ufunc_into or len(st.idx) != 3 \
            or st.kwargs is not None:
        return None
    dst, other, lit = st.idx
    ufunc = st.lits[2]
    if dst < 0 or other < 0 or lit != -1 or other == dst or type(ufunc) is not np.ufunc \
            or ufunc not in _FUSIBLE or ufunc.nin != 2 or ufunc.nout != 1:
        return None
    return ufunc


cdef bint _is_full_setitem(_Step st):
    """A recorded `dst[...] = src` between two slots (operator.setitem: the cpu device's)."""
    return (st.kind == K_WRITE and st.fn is operator.setitem and len(st.idx) == 3
            and st.idx[0] >= 0 and st.idx[1] == -1 and st.lits[1] is Ellipsis
            and st.idx[2] >= 0 and st.kwargs is None)


cdef _Step _copy_of(_Step w):
    """A K_COPY step for the full setitem `w` (which stays in `sub`, for describe())."""
    cdef _Step st = _Step.__new__(_Step)
    st.kind = K_COPY
    st.fn = w.fn
    st.idx, st.lits = w.idx, w.lits
    st.kwargs = st.kwslots = None
    st.out = -1
    st.device = w.device
    st.free = w.free
    st.out_ndim = -1
    st.sub = [w]
    return st


cdef list _fuse_inplace(list steps):
    """`steps` with each in-place ufunc write of a fusible kernel run's result replaced by
    one K_INPLACE step (an _fuse.InPlaceKernel: `p -= lr * p.grad` is one multiply's and
    one subtract's inner loops, block by block, straight into p; docs/compile.md,
    "In-place fused updates"). The run is the longest stretch of fusible kernels of the
    target's dtype and shape just before the write, ending in the write's operand, whose
    results the write or the run reads last (frees planned: nothing after them reads
    them, so none needs an array). Other writes and kernels stay as they are."""
    cdef list out = []
    cdef Py_ssize_t i, j, n = len(steps), start, pos, size
    cdef _Step st, w, k, step, fused
    cdef tuple info
    for j in range(n):
        w = <_Step>steps[j]
        if _is_full_setitem(w):
            out.append(_copy_of(w))
            continue
        ufunc = _inplace_write_ufunc(w)
        if ufunc is None or j == 0:
            out.append(w)
            continue
        dst, other = w.idx[0], w.idx[1]
        k = <_Step>steps[j - 1]
        if k.kind != K_KERNEL or k.fuse_info is None or k.out != other \
                or type(k.fn) is not _ufunc_type \
                or k.aux_out is not None or not out or out[len(out) - 1] is not k \
                or loop_index(ufunc, (<tuple>k.fuse_info)[0]) < 0:
            out.append(w)
            continue
        info = k.fuse_info
        freed = set(w.free)
        start = j
        while start > 0:
            step = <_Step>steps[start - 1]
            if step.kind != K_KERNEL or step.fuse_info is None or step.aux_out is not None \
                    or type(step.fn) is not _ufunc_type \
                    or (<tuple>step.fuse_info)[0] != info[0] \
                    or (<tuple>step.fuse_info)[1] != info[1] \
                    or step.out == dst or out[len(out) - (j - start) - 1] is not step:
                break
            freed.update(step.free)
            # every result of the run is read last inside it (or by the write)
            if any((<_Step>steps[i]).out not in freed for i in range(start - 1, j)):
                break
            start -= 1
        if start == j:
            out.append(w)
            continue
        size = 1
        for d in info[1]:
            size *= d
        ops, in_sizes, written, frees = [], {}, set(), set(w.free)
        for i in range(start, j):
            step = <_Step>steps[i]
            for pos in range(len(step.idx)):
                a = step.idx[pos]
                if a not in written and a not in in_sizes:
                    in_sizes[a] = step.fuse_info[2][pos]
            written.add(step.out)
            frees.update(step.free)
            ops.append((step.fn, step.idx, step.out))
        if in_sizes.get(dst, size) != size or size == 0 or not info[1]:
            out.append(w)
            continue
        in_sizes[dst] = size
        ops.append((ufunc, (dst, other), dst))
        fused = _Step.__new__(_Step)
        fused.kind = K_INPLACE
        fused.fn = InPlaceKernel(ops, info[0], info[1], in_sizes, dst)
        # idx: the slots it reads, so that the planning of pools sees a plain reader
        fused.idx = tuple(sorted(in_sizes))
        fused.lits = (None,) * len(fused.idx)
        fused.kwargs = fused.kwslots = None
        fused.out = -1
        fused.device = w.device
        fused.free = tuple(frees)
        fused.out_ndim = -1
        fused.sub = steps[start:j + 1]
        del out[len(out) - (j - start):]
        out.append(fused)
    return out


# Note: [plain calls]
# A kernel may carry a `plain_call` attribute: a C callable computing the same bits as the
# kernel for every argument a replay can pass it (the linalg plugin's _matmul_kernel:
# np.matmul, whose Python wrapper only rewords NumPy's shape error -- and a replay's shapes
# are the recording's, checked by the signature). A replayed step with positional
# arguments only, each read from a slot, calls it directly: no Python frame per call (W2:
# 8 matmul and 5 transpose steps a run). Steps with keyword parameters, aux outputs or a
# literal argument keep the kernel. The shape plugin's _transpose_kernel has
# np.ndarray.transpose: a slot of a CPU kernel's argument always holds an ndarray (kernel
# outputs are made one by the replay, tensors' data is one), where the kernel calls
# x.transpose(None), which is what np.ndarray.transpose(x) calls.
cdef void _use_plain_calls(list steps) except *:
    cdef _Step st
    for st in steps:
        if st.sub is not None:          # (fused and in-place steps' fallbacks)
            _use_plain_calls(st.sub)
        elif (st.kind == K_KERNEL and st.kwargs is None and st.aux_out is None
                and all(k >= 0 for k in st.idx)):
            # (every argument from a slot: a replay's arrays of the kernel's device, never
            # a recorded literal such as a Python number)
            plain = getattr(st.fn, "plain_call", None)
            if plain is not None:
                st.fn = plain


cdef void _build_fused(_Program program) except *:
    """Make the K_FUSED steps of both programs FusedKernels, pooling (see _fuse.pxd) the
    values that only fused steps read afterwards."""
    cdef _Step st
    runs = [program.forward_run] + ([program.backward_run] if program.backward_run else [])
    plain = set(program.out_slots) | set(program.seed_slots or ())
    plain.update(k for k in (program.grad_slots or ()) if k is not None)
    for run in runs:
        for st in run:
            if st.kind == K_FUSED:
                continue
            plain.update(k for k in st.idx if k >= 0)
            if st.kwslots:
                plain.update(k for _, _, k in st.kwslots)
    pooled_in = {}
    backward_pools = []
    for r, run in enumerate(runs):
        for st in run:
            if st.kind != K_FUSED:
                continue
            ops, typenum, shape, in_sizes, escaping = st.fn
            pooled = [s for _, _, s in ops if s in escaping and s not in plain]
            pool_slot = -1
            if len(pooled) >= 2:
                pool_slot = program.nslots
                program.nslots += 1
                if r == 0:
                    backward_pools.append(pool_slot)
            st.fn = FusedKernel(ops, typenum, shape, in_sizes, escaping, pooled, pool_slot,
                                pooled_in)
            for row, s in enumerate((<FusedKernel>st.fn).pooled_slots):
                pooled_in[s] = (pool_slot, row, shape)
    if backward_pools and program.backward_run is not None:
        # (the backward reads the forward's pools: kept for it like any saved value)
        program.keep_after_forward = tuple(program.keep_after_forward) + tuple(backward_pools)


cdef inline long long _version(TensorBase t):
    return 0 if t._vc is None else t._vc.value


cdef object _replay(_Program program, tuple args, tuple tensors, bint grad_on):
    cdef list slots = _initial_slots(program, tensors)
    cdef Py_ssize_t i, k, n = len(program.out_slots)
    cdef list outs = [None] * n
    cdef TensorBase t
    try:
        _run(program.forward_run, slots, tensors)
    except ReplayShapeError:
        raise                 # says what happened; the note below would mislead
    except Exception as exc:
        _engine.add_note(exc, f"(while replaying {program.name}; the same call ran eagerly "
                              f"when it recorded: an input it could not check, like a label "
                              f"value, may differ)")
        raise
    for i in range(n):
        if program.out_from is not None and program.out_from[i] is not None:
            kind, src = program.out_from[i]
            outs[i] = tensors[src] if kind == "arg" else outs[src] if kind == "out" else src
            continue
        s = program.out_slots[i]
        arr = slots[s]
        if program.constant_outs and s in program.constant_outs:
            arr = _copy_array(arr)
        outs[i] = t = _engine.new_tensor(arr, program.out_devices[i])
        if program.out_versions is not None and program.out_versions[i]:
            t._vc = VersionCounter.__new__(VersionCounter)
            t._vc.value = program.out_versions[i]
        if program.out_views is not None and program.out_views[i]:
            t._is_view = True          # (in-place writes into it in a graph raise, as eagerly)
    if program.backward is not None:
        grad_inputs = _grad_inputs(program, tensors)
        keep = [None] * program.nslots
        for k in <tuple>program.keep_after_forward:
            keep[k] = slots[k]
        # Tensors whose arrays the backward reads: an in-place write to one of them after
        # this call must make backward() raise, as it would eagerly.
        versions = []
        for group in (grad_inputs, [e[1] for e in program.externals], tensors, outs):
            for x in group:
                t = <TensorBase>x
                versions.append((t, _version(t)))
        ctx = _ReplayCtx(program, keep, tensors, versions)
        needed = tuple([outs[i] for i in program.needs])
        mask = (True,) * len(grad_inputs)
        _engine.attach_function_node(program.name, ctx, _backward_fn, grad_inputs, needed, mask)
    elif program.spent_needs:
        # NOTE: eagerly these outputs require grad, through a graph the function itself
        # backpropagated (loss.backward() inside): they keep that look, and a backward
        # through them raises (eager raises too, unless the inner backward retained it).
        _engine.attach_function_node(program.name, _ReplayCtx(program, None, (), ()),
                                     _spent_backward, (),
                                     tuple([outs[i] for i in program.spent_needs]), ())
    if program.rebuild is None:
        return outs[0]
    if program.rebuild == "none":
        return None
    return program.rebuild(outs)


def _spent_backward(ctx, *grads):
    raise RuntimeError(
        f"Trying to backward through the graph a second time: '{ctx.program.name}' ran "
        f"backward() over it inside the compiled function, and a replay keeps nothing for "
        f"another one (even where that backward had retain_graph=True). Call the function "
        f"uncompiled to backpropagate its outputs again")


def _backward_fn(ctx, *grads):
    if _engine.is_grad_enabled():
        raise RuntimeError(
            f"{ctx.program.name}: backward with create_graph=True (double backward) through a "
            f"tg.compile'd function is not supported: its backward is a recorded kernel list, "
            f"not tapegrad ops. Call the function uncompiled where you need higher derivatives")
    if ctx.slots is None:
        raise RuntimeError(
            f"Trying to backward through the graph a second time: the values "
            f"'{ctx.program.name}' saved for its gradient were already freed by an earlier "
            f"backward(). Pass retain_graph=True to the first backward()")
    for t, v in ctx.versions:
        if _version(<TensorBase>t) != v:
            raise RuntimeError(
                f"one of the values needed for gradient computation has been modified by an "
                f"in-place operation: a tensor of shape {tuple(t.shape)} that "
                f"'{ctx.program.name}' read is at version {t._version}; it was at version {v} "
                f"when the compiled function ran. Use an out-of-place op (or .clone()) before "
                f"modifying it.")
    cdef list slots = list(ctx.slots)
    program = ctx.program
    for s, g in zip(program.seed_slots, grads):
        slots[s] = (<TensorBase>g)._data
    _run(program.backward_run, slots, ctx.args)
    grads = []
    for spec, s in zip(program.grad_inputs, program.grad_slots):
        t = ctx.args[spec] if type(spec) is int else spec
        grads.append(None if s is None else _engine.new_tensor(slots[s], (<TensorBase>t)._device))
    return tuple(grads)


cdef void _compare(fn, what, a, b) except *:
    x, y = np.asarray(a.numpy()), np.asarray(b.numpy())
    if x.shape != y.shape or x.dtype != y.dtype or not np.array_equal(x, y, equal_nan=True):
        diff = np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))) if x.shape == y.shape else None
        raise RuntimeError(
            f"tg.compile(check=True): {what} of {getattr(fn, '__qualname__', fn)} differs between "
            f"the compiled replay (shape {x.shape}, {x.dtype}) and eager (shape {y.shape}, "
            f"{y.dtype}); max abs difference {diff}. The function probably branches on tensor "
            f"values or reads a tensor that is a new object on each call: such choices are "
            f"baked in when it records (see docs/compile.md)")


def compile(fn=None, *, cache_size=1024, explain=False, check=False, fuse=True):
    """Compile `fn`: record its kernels once per signature, then replay them.

    The first call with a new signature (each argument's shape, dtype, device and
    requires_grad; other arguments by value; grad mode) runs `fn` eagerly and records
    every kernel it calls and, when its outputs need gradients, the kernels of their
    backward. Later calls with that signature replay both recordings from a flat list,
    without Python dispatch; results and gradients are bit-identical to eager. Up to
    `cache_size` signatures are kept (least recently used dropped first);
    ``cache_info()`` counts hits and misses. ``explain=True`` logs (logger
    ``tapegrad.compile``) why a call recorded again; ``check=True`` also runs `fn`
    eagerly on every call and raises if anything differs. ``fuse=True`` (the default)
    replays each run of elementwise ufunc kernels on float arrays as one fused step
    that calls NumPy's own inner loops block by block, with no temporary array per op
    (bit-identical to eager; docs/compile.md, "Fused replay"); ``fuse=False`` replays
    every kernel as its own call.

    Python control flow on tensor values (``if x.sum() > 0``) is baked in at record
    time, and so is a tensor read from outside that is a new object on each call (pass
    those as arguments); closed-over tensors such as parameters are read afresh on
    each call. Also a decorator: ``@tg.compile`` or ``@tg.compile(cache_size=8)``.

    >>> import tapegrad as tg
    >>> w = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> @tg.compile
    ... def f(x):
    ...     return x + w + w
    >>> for _ in range(3):
    ...     f(tg.tensor([0.5, -0.5])).backward(tg.ones(2))
    >>> f.cache_info()
    CacheInfo(hits=2, misses=1, size=1, maxsize=1024)
    >>> w.grad
    tensor([6., 6.])
    """
    if fn is None:
        return lambda f: CompiledFunction(f, cache_size, explain, check, fuse)
    return CompiledFunction(fn, cache_size, explain, check, fuse)


_EXTERNAL_GUARDS = []


def add_external_guard(provider):
    """Register `provider(tensors, guard_fns) -> [value_fn, ...]`: when a function has
    recorded, it gets the tensors the recording read from outside and the value functions
    guarded already, and returns more to guard (tg.nn: the modules holding those tensors,
    so that a weight read without calling its module and then replaced is noticed)."""
    _EXTERNAL_GUARDS.append(provider)


def _external_guards(_Recorder rec):
    if not _EXTERNAL_GUARDS or not rec.externals:
        return ()
    tensors = tuple(t for _, t in rec.externals)
    fns = tuple(fn for fn, _ in rec.guards)
    out = []
    for provider in _EXTERNAL_GUARDS:
        for fn in provider(tensors, fns):
            out.append((fn, fn()))
    return tuple(out)


def compile_check(check, *tensors):
    """Run ``check(*arrays)`` (NumPy arrays of the tensors' values; it raises for bad
    values) now, and where a tg.compile'd function records, as a step of its program: every
    replay runs it again on that call's values.

    For library code that validates tensor values in Python (a probability vector on the
    simplex, weights that sum to zero, repeated indices): a plain check would run only while
    the function recorded, so a replay would return a result where the eager call raises.
    Inside a gradient rule it checks the values of each replayed backward."""
    tensors = tuple(t for t in tensors if isinstance(t, TensorBase))
    devices = tuple((<TensorBase>t)._device for t in tensors)

    def run(*arrays):
        check(*[(<Device>d).to_numpy(a) for d, a in zip(devices, arrays)])

    run(*[(<TensorBase>t)._data for t in tensors])
    tracer = _engine.get_tracer()
    if tracer is not None and tensors:
        tracer.check(run, tensors)


def run_eagerly(reason):
    """Make the signature that records now (if one does) run eagerly on this and every
    later call, with a tg.CompileWarning giving `reason`: for library code that branches in
    Python on tensor values in a way that compile_check cannot cover (what it returns
    depends on them, as lstsq's rank and residuals do)."""
    tracer = _engine.get_tracer()
    if tracer is not None:
        tracer.eager(f"{reason}, so this signature runs eagerly")


def record_once(reason):
    """Keep no recording of the call running now (if one records): library code calls it
    where it changes Python state that a replay would not change, such as an optimizer
    putting new state tensors into its state dict on its first step."""
    tracer = _engine.get_tracer()
    if tracer is not None:
        tracer.once(reason)


def compile_guard(value_fn):
    """Make tg.compile record again when ``value_fn()`` changes.

    For code that a compiled function may call and whose kernels depend on Python state
    (hyperparameters, step counters, which buffers exist yet): while a function records,
    ``value_fn()`` is evaluated and kept; each later call evaluates it again before
    replaying and records afresh if the value differs. Outside a recording it does
    nothing. The optimizers of tg.optim guard their hyperparameters and state this way.

    >>> import tapegrad as tg
    >>> scale = {"k": 2.0}
    >>> def f(x):
    ...     tg.compile_guard(lambda: scale["k"])
    ...     return x + scale["k"]
    >>> cf = tg.compile(f)
    >>> cf(tg.ones(1)).item(), cf(tg.ones(1)).item()
    (3.0, 3.0)
    >>> scale["k"] = 5.0
    >>> cf(tg.ones(1)).item(), cf.cache_info().misses
    (6.0, 2)
    """
    tracer = _engine.get_tracer()
    if tracer is not None:
        tracer.guard(value_fn)
