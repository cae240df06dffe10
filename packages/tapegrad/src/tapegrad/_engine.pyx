# cython: language_level=3, embedsignature=True
"""The tapegrad engine: Tensor, the tape Node, op dispatch and the backward traversal.

The data structures are specified in `_engine.pxd`.  Vocabulary used throughout (and by
every VJP rule in every plugin): `g` is the gradient flowing into an op's output, `ans`
the op's forward result, `x, y, ...` its inputs.
"""

cimport cython
from cpython.contextvars cimport PyContextVar_Reset, PyContextVar_Set, get_value
from cpython.dict cimport PyDict_Size
from cpython.float cimport PyFloat_AS_DOUBLE
from libc.math cimport fabs, isinf
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_New, PyTuple_SET_ITEM
from cpython.pythread cimport PyThread_get_thread_ident

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(object)
    object PyObject_Vectorcall(object callable, PyObject** args, size_t nargsf, PyObject* kwnames)
    void PyObject_GC_Track(object)
    bint PyObject_GC_IsTracked(object)

cdef extern from *:
    """
    /* Allocate an instance of a subclass of an extension type through its tp_new slot,
       without the Python-level __new__ lookup that `Base.__new__(Sub)` compiles to. */
    static PyObject* tapegrad_alloc(PyObject* cls, PyObject* empty_args) {
        return ((PyTypeObject*)cls)->tp_new((PyTypeObject*)cls, empty_args, NULL);
    }

    /* Op's call slot (see Note: [calling an op]). */
    typedef PyObject* (*tapegrad_call_fn)(PyObject*, PyObject*, PyObject*);
    static tapegrad_call_fn tapegrad_op_call_impl = NULL;
    static PyObject* tapegrad_op_tp_call(PyObject* self, PyObject* args, PyObject* kwds) {
        return tapegrad_op_call_impl(self, args, kwds);
    }
    static void tapegrad_set_call_slot(PyObject* type, void* impl) {
        tapegrad_op_call_impl = (tapegrad_call_fn)impl;
        ((PyTypeObject*)type)->tp_call = tapegrad_op_tp_call;
    }

    /* Op's vectorcall entry: `op(a, b)` from Python or C with no argument tuple. */
    typedef PyObject* (*tapegrad_vc_fn)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);
    static tapegrad_vc_fn tapegrad_op_vc_impl = NULL;
    static PyObject* tapegrad_op_vectorcall(PyObject* self, PyObject* const* args,
                                            size_t nargsf, PyObject* kwnames) {
        return tapegrad_op_vc_impl(self, args, PyVectorcall_NARGS(nargsf), kwnames);
    }
    static void* tapegrad_set_vectorcall(PyObject* type, void* impl, Py_ssize_t offset) {
        tapegrad_op_vc_impl = (tapegrad_vc_fn)impl;
        ((PyTypeObject*)type)->tp_vectorcall_offset = offset;
        ((PyTypeObject*)type)->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
        return (void*)tapegrad_op_vectorcall;
    }

    /* Give a heap subclass the number slots of its extension base (see Note: [operator
       slots of tapegrad.Tensor]). */
    static void tapegrad_copy_number_slots(PyObject* sub, PyObject* base) {
        PyNumberMethods* s = ((PyTypeObject*)sub)->tp_as_number;
        PyNumberMethods* b = ((PyTypeObject*)base)->tp_as_number;
        if (s != NULL && b != NULL && s != b) *s = *b;
    }

    /* A tuple's item array (the inputs of an op, read in place). */
    static PyObject** tapegrad_tuple_items(PyObject* t) { return ((PyTupleObject*)t)->ob_item; }

    /* The reference count of an object, read through a borrowed pointer (no temporary). */
    static Py_ssize_t tapegrad_refcnt(PyObject* o) { return Py_REFCNT(o); }
    """
    object tapegrad_alloc(object cls, object empty_args)
    Py_ssize_t tapegrad_refcnt(PyObject* o)
    PyObject** tapegrad_tuple_items(object t)
    void tapegrad_set_call_slot(object type, void* impl)
    void* tapegrad_set_vectorcall(object type, void* impl, Py_ssize_t offset)
    void tapegrad_copy_number_slots(object sub, object base)

import contextvars
import threading
import traceback
import weakref

import numpy as np

from tapegrad import _dim_keywords

cimport numpy as cnp
from tapegrad._array_kernels cimport matmul_2d

cnp.import_array()

# ---------------------------------------------------------------------------------------
# Grad mode and anomaly mode: context variables, so each thread and each asyncio task has
# its own setting (a thread starts from the default; a task starts from a copy of its
# creator's context and its changes never leak back).
# ---------------------------------------------------------------------------------------

GRAD_ENABLED = contextvars.ContextVar("tapegrad_grad_enabled", default=True)
ANOMALY_ENABLED = contextvars.ContextVar("tapegrad_anomaly_enabled", default=False)
# Whether the innermost backward running in this context accumulates into .grad
# (backward()) rather than returning gradients (tg.grad); read by hooks that act on
# accumulation only (DDP's gradient all-reduce).
_ACCUMULATING = contextvars.ContextVar("tapegrad_backward_accumulates", default=False)


# NOTE: how many detect_anomaly() blocks are active in any thread: while it is 0, ops skip
# the context-variable lookup that says whether *this* thread/task is in one.
cdef Py_ssize_t _anomaly_blocks = 0


def anomaly_blocks(Py_ssize_t delta):
    global _anomaly_blocks
    _anomaly_blocks += delta


cdef inline bint _anomaly_on():
    return _anomaly_blocks > 0 and <bint>get_value(ANOMALY_ENABLED, False)


cdef inline bint _grad_enabled():
    return <bint>get_value(GRAD_ENABLED, True)


cdef object _GRAD_VAR = GRAD_ENABLED


cdef class _GradSwitchCore:
    """The with-block of `tg.no_grad()` in C (tapegrad._grad_mode.no_grad derives from it):
    construction, __enter__ and __exit__ run no Python frame (three per `with` block in
    the Python switch: ~7.7 k instructions, two blocks per training step). Sets grad mode
    to `_value` (False unless changed) and restores, on exit, exactly the value it
    replaced (a stack of context-variable tokens: one instance may be entered nested).

    >>> from tapegrad._engine import _GradSwitchCore, is_grad_enabled
    >>> with _GradSwitchCore():
    ...     is_grad_enabled()
    False
    >>> is_grad_enabled()
    True
    """
    cdef public bint _value
    cdef public list _tokens

    def __cinit__(self, *args, **kwargs):
        self._value = False
        self._tokens = []

    def __init__(self):
        pass

    def __enter__(self):
        self._tokens.append(PyContextVar_Set(_GRAD_VAR, self._value))
        return self

    def __exit__(self, exc_type=None, exc=None, tb=None):
        PyContextVar_Reset(_GRAD_VAR, self._tokens.pop())
        return False


cpdef bint needs_grad(object value):
    """Whether `value` is a tensor that requires grad: what a gradient rule asks to skip
    gradients nobody needs (``g * x if tg.needs_grad(y) else None``).

    >>> import tapegrad as tg
    >>> tg.needs_grad(tg.tensor([1.0], requires_grad=True)), tg.needs_grad(2.0)
    (True, False)
    """
    if isinstance(value, TensorBase):
        return (<TensorBase>value)._requires_grad
    if isinstance(value, TensorMeta):
        return (<TensorMeta>value).requires_grad
    return False


cpdef bint eager_kernel(Op op, object g):
    """Whether a gradient rule should call `op` (a backward op) on `g`: `op` has a
    kernel for g's device and tg.compile is not recording in this thread (a recording
    prefers the composite, whose kernels fuse). One C call where the rules tested
    ``g.device.name in op.kernels and get_tracer() is None`` in Python.

    >>> import tapegrad as tg
    >>> from tapegrad._engine import eager_kernel
    >>> eager_kernel(tg.add, tg.ones(3)), eager_kernel(tg.add, 2.0)
    (True, False)
    """
    if not isinstance(g, TensorBase) or _traced():
        return False
    return (<TensorBase>g)._device.name in op.kernels


cpdef bint plain_gradient(object g):
    """Whether a gradient rule may compute on `g`'s raw array itself and wrap the result
    with `new_tensor`, skipping the op calls it would otherwise make: nothing would
    record them (grad mode off, i.e. no create_graph; tg.compile not recording in this
    thread), no tg.checkpoint read log is open (an op would log its constant inputs), and
    g carries no forward-mode tangent or tg.vmap batch (an op would carry them along).
    The rule must still check the other operands it reads (their ``_tangents`` too).

    >>> import tapegrad as tg
    >>> from tapegrad._engine import plain_gradient
    >>> with tg.no_grad():
    ...     plain_gradient(tg.ones(3))
    True
    >>> plain_gradient(tg.ones(3)), plain_gradient(2.0)     # grad mode on: ops record
    (False, False)
    """
    if not isinstance(g, TensorBase) or not _nothing_records():
        return False
    return not (<TensorBase>g)._tangents


cdef inline bint _nothing_records():
    """No op call made now would record or log anything: grad mode off (no
    create_graph), tg.compile not recording in this thread, no tg.checkpoint read log.
    What the gradient shortcuts that skip op calls need (plain_gradient,
    _grad_times_number); the cheap tests first."""
    return not _n_read_logs and not _traced() and not _grad_enabled()


def is_grad_enabled():
    """Whether ops record onto the tape in this thread / asyncio task.

    >>> import tapegrad as tg
    >>> tg.is_grad_enabled()
    True
    """
    return _grad_enabled()


# ---------------------------------------------------------------------------------------
# Module state filled in by the registry (tapegrad._plugins) once plugins are loaded.
# ---------------------------------------------------------------------------------------

cdef type _TensorClass = None          # the public Python subclass tapegrad.Tensor
cdef dict _OPS = {}                     # op name -> Op: the dispatch table, built once
cdef dict _PROVIDERS = {}               # op name -> distribution that provides it (hints)
cdef dict _DEVICES = {}                 # device name -> Device
cdef dict _UNAVAILABLE = {}             # device name -> why a plugin could not provide it
cdef Device _DEFAULT_DEVICE = None      # where Python scalars and ndarrays live ("cpu")
cdef Op _op_add = None                  # the core primitives the engine itself calls
cdef Op _op_sum_to_shape = None
cdef Op _op_broadcast_to = None
cdef Op _op_astype = None
# The ops behind Tensor's arithmetic operators, kept by install_op/uninstall_op so an
# operator skips the table lookup (None: not installed; the lookup then raises).
cdef Op _op_subtract = None
cdef Op _op_multiply = None
cdef Op _op_divide = None
cdef Op _op_negative = None
cdef object _grad_lock = threading.Lock()   # guards read-modify-write of .grad
cdef object _MISS_HANDLER = None        # called once when a name is not in the table
cdef object _TRACER = None              # tg.compile's recorder while a thread records, else None
cdef bint _complex_seen = False         # a complex tensor has required grad ([complex tensors])
cdef bint _fwd_active = False           # a forward-mode level is open (see _forward.py)
cdef object _FORWARD = None             # _forward.dispatch: runs an op whose inputs carry tangents
cdef object _LEVEL_HOOKS = None         # _forward.level_hooks: detach/in-place/read of such tensors
cdef unsigned long _TRACER_THREAD = 0   # the thread it listens to (PyThread_get_thread_ident)
cdef dict _READ_LOGS = {}               # thread ident -> list: constants read (see log_reads)
cdef Py_ssize_t _n_read_logs = 0        # len(_READ_LOGS): the hot path's one test
cdef dict _NO_PARAMS = {}               # shared, never mutated: calls without parameters

cdef tuple _python_scalars = (float, int, bool, complex, np.generic)


# Note: [operator slots of tapegrad.Tensor]
# Cython exposes TensorBase's __add__, __rsub__, ... as method descriptors, so CPython
# gives a Python subclass the generic number slots (slot_nb_add and friends), which look
# the method up by name and call it through a descriptor on every `x * a`: ~350
# instructions an operator. tapegrad.Tensor defines no number method of its own, so it is
# given TensorBase's slots themselves, which call the same code directly. A class that
# does define one (a user's subclass of Tensor) is left to CPython.

cdef tuple _NUMBER_DUNDERS = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "divmod", "pow", "matmul", "and",
    "or", "xor", "lshift", "rshift", "neg", "pos", "abs", "invert", "bool", "int",
    "float", "index")


def set_tensor_class(cls):
    global _TensorClass
    _TensorClass = cls
    names = set()
    for d in _NUMBER_DUNDERS:
        names.update((f"__{d}__", f"__r{d}__", f"__i{d}__"))
    for klass in cls.__mro__:
        if klass is TensorBase:
            tapegrad_copy_number_slots(cls, TensorBase)
            break
        if names.intersection(vars(klass)):
            break


def ops_table():
    """The live op table (name -> Op). Read-only by convention."""
    return _OPS


def devices_table():
    return _DEVICES


# Note: [the tracer belongs to the recording thread]
# One process-wide slot holds tg.compile's recorder, so that when nothing records every
# op pays one pointer check (`_TRACER is not None`). While it is set, only the thread that
# installed it talks to it (`_traced()`): the work of other threads is their own eager
# work, and they must neither feed the recording nor change what it sees (a backward in
# another thread once swapped the slot out and back, losing the recording's kernels or
# reinstalling a finished recorder for good).

cdef inline bint _traced():
    """Whether this thread records: the first test is the whole cost when none does."""
    return _TRACER is not None and PyThread_get_thread_ident() == _TRACER_THREAD


def log_reads(log):
    """While `log` (a list; None to stop) is set for the calling thread, every op appends
    (weakref to the tensor, version counter, version, op name, input index, shape, dtype)
    for each input that is a constant: a tensor that is a leaf and does not require grad.
    tg.checkpoint's rerun reads those again, so it checks they were not modified in place
    since. Returns the previous log of this thread."""
    global _n_read_logs
    key = PyThread_get_thread_ident()
    previous = _READ_LOGS.pop(key, None)
    if log is not None:
        _READ_LOGS[key] = log
    _n_read_logs = len(_READ_LOGS)
    return previous


cdef void _log_read(Op op, Py_ssize_t i, TensorBase t) except *:
    cdef VersionCounter vc
    if t._node is not None or t._requires_grad:
        return
    log = _READ_LOGS.get(PyThread_get_thread_ident())
    if log is not None:
        vc = _get_vc(t)
        log.append((weakref.ref(t), vc, vc.value, op.name, i, tuple(t._data.shape),
                    t._data.dtype))


def set_tracer(tracer):
    """Install tg.compile's recorder for the calling thread (None to remove it); returns
    the previous one.

    While one is installed, every kernel call, in-place write and tensor creation of the
    installing thread is reported to it (see tapegrad._compile). One process-wide slot:
    one thread records at a time, which tg.compile guards with a lock.
    """
    global _TRACER, _TRACER_THREAD
    previous = _TRACER
    _TRACER = tracer
    _TRACER_THREAD = PyThread_get_thread_ident()
    return previous


def get_tracer():
    """The recorder listening to the calling thread, or None (also while another thread
    records)."""
    return _TRACER if _traced() else None


def set_forward(bint active, handler=None, hooks=None):
    """Open (active=True, with the dispatcher of tapegrad._forward) or close the
    transform levels (forward mode, vmap): while one is open, an op any of whose tensor
    inputs carries level entries (``_tangents``) is run by the dispatcher instead.
    `hooks` has ``detached(tangents)`` (the entries a detached alias keeps),
    ``check_inplace(name, self, others)`` and ``check_read(t, what)`` (which refuse what a
    batched tensor cannot do), called only for tensors that carry entries."""
    global _fwd_active, _FORWARD, _LEVEL_HOOKS
    if active:
        _FORWARD = handler
        _LEVEL_HOOKS = hooks
    _fwd_active = active


def forward_active():
    return _fwd_active


cdef inline bint _has_tangents(TensorBase t):
    return t._tangents is not None and PyDict_Size(t._tangents) != 0


def has_tangents(TensorBase t):
    return _has_tangents(t)


cdef inline void _check_read(TensorBase t, str what) except *:
    # NOTE: also after the levels closed: a batched tensor kept after its vmap returned
    # has a placeholder for data, which must not be read as its value
    if _has_tangents(t) and _LEVEL_HOOKS is not None:
        _LEVEL_HOOKS.check_read(t, what)


def check_read(TensorBase t, str what):
    """Refuse reading the value of a batched tensor inside tg.vmap (see _batching.py)."""
    _check_read(t, what)


def record_op(Op op, tuple inputs, dict kwargs, TensorBase out):
    """Record `out` as op(*inputs, **kwargs) on the tape, as a call that ran its kernel
    would have, when grad mode is on and an input requires grad: vmap computes a batched
    op's value from the per-example (physical) values and records the call on the
    logical tensors here, so that a tg.grad inside the vmap differentiates it."""
    cdef Py_ssize_t i, n = len(inputs)
    cdef bint needs = False
    if not _grad_enabled() or op.vjp is None:
        return
    for i in range(n):
        a = inputs[i]
        if isinstance(a, TensorBase) and (<TensorBase>a)._requires_grad and (
                op._all_diff or (op.differentiable is not None and i in op.differentiable)):
            needs = True
    if needs and _complex_seen and not op.supports_complex:
        _refuse_complex_inputs(op, tapegrad_tuple_items(inputs), n, out._data)
    if needs and _is_float_array(out._data):
        _record(op, tapegrad_tuple_items(inputs), n, kwargs if kwargs else _NO_PARAMS, out)
    elif needs and _is_complex_array(out._data):
        _record_complex(op, tapegrad_tuple_items(inputs), n, kwargs if kwargs else _NO_PARAMS,
                        out, inputs)


def set_miss_handler(handler):
    """`handler()` runs when an op is not found (it may register deferred plugins);
    it returns True if the lookup should be retried."""
    global _MISS_HANDLER
    _MISS_HANDLER = handler


def set_providers(dict providers):
    _PROVIDERS.clear()
    _PROVIDERS.update(providers)


def install_device(Device device, bint default=False):
    global _DEFAULT_DEVICE
    _DEVICES[device.name] = device
    if default or _DEFAULT_DEVICE is None:
        _DEFAULT_DEVICE = device


def set_device_unavailable(str name, reason):
    """Record why a plugin could not register device `name` (None forgets it)."""
    if reason is None:
        _UNAVAILABLE.pop(name, None)
    else:
        _UNAVAILABLE[name] = str(reason)


def uninstall_device(str name):
    global _DEFAULT_DEVICE
    dev = _DEVICES.pop(name, None)
    if dev is _DEFAULT_DEVICE:
        _DEFAULT_DEVICE = _DEVICES.get("cpu")


def default_device():
    return _DEFAULT_DEVICE


def install_op(Op op):
    _OPS[op.name] = op
    _set_core_op(op.name, op)


def uninstall_op(str name):
    """Remove `name` from the op table (a plugin unregistered at run time)."""
    _OPS.pop(name, None)
    _set_core_op(name, None)


cdef void _set_core_op(str name, Op op):
    global _op_add, _op_sum_to_shape, _op_broadcast_to, _op_astype
    global _op_subtract, _op_multiply, _op_divide, _op_negative
    if name == "subtract":
        _op_subtract = op
    elif name == "multiply":
        _op_multiply = op
    elif name == "divide":
        _op_divide = op
    elif name == "negative":
        _op_negative = op
    elif name == "add":
        _op_add = op
    elif name == "sum_to_shape":
        _op_sum_to_shape = op
    elif name == "broadcast_to":
        _op_broadcast_to = op
    elif name == "astype":
        _op_astype = op


class OpNotAvailableError(AttributeError, NotImplementedError):
    """An op is not registered: the plugin that provides it is not installed."""


def _refuse_unimplemented_gradient(Op op, Py_ssize_t i, t):
    # NOTE: an input outside `differentiable` would get no gradient, silently: right for
    # a bool mask or an index (piecewise constant), wrong where the derivative exists but
    # the rule does not compute it (scipy's iv in its order). Those ops list the input in
    # not_implemented, and a tensor there that requires grad is refused at the call.
    raise NotImplementedError(
        f"{op.name}: the derivative with respect to input {i} ({_describe((t,))}) is not "
        f"implemented, and that tensor requires grad; pass it detached (t.detach()) if its "
        f"gradient is not needed")


def missing_op_error(str name):
    provider = _PROVIDERS.get(name)
    if provider is not None:
        return OpNotAvailableError(
            f"tapegrad op '{name}' is not available: it is provided by the plugin "
            f"'{provider}', which is not installed or failed to load "
            f"(pip install {provider})")
    return OpNotAvailableError(f"module 'tapegrad' has no attribute or op '{name}'")


def add_note(BaseException exc, str note):
    """``exc.add_note(note)``. Python 3.10 has no ``add_note``: there the note goes into
    ``exc.__notes__`` all the same (readable by code; 3.10's traceback does not print it),
    and the message is left alone, so that it reads the same on every version."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:
        notes = getattr(exc, "__notes__", None)
        if not isinstance(notes, list):
            notes = exc.__notes__ = []
        notes.append(note)


cdef Op _lookup(str name):
    op = _OPS.get(name)
    if op is None:
        if _MISS_HANDLER is not None and _MISS_HANDLER():
            op = _OPS.get(name)
        if op is None:
            raise missing_op_error(name)
    return <Op>op


def lookup(str name):
    return _lookup(name)


# ---------------------------------------------------------------------------------------
# Devices and version counters
# ---------------------------------------------------------------------------------------

@cython.no_gc
@cython.freelist(64)
cdef class VersionCounter:
    def __repr__(self):
        return f"VersionCounter({self.value})"


cdef inline VersionCounter _get_vc(TensorBase t):
    if t._vc is None:
        t._vc = VersionCounter.__new__(VersionCounter)   # NOTE: not VersionCounter(): a
    return t._vc                                         # Python-level call, 3x the cost


cdef inline long long _version_of(TensorBase t):
    return 0 if t._vc is None else t._vc.value


cdef class Device:
    """A place arrays live: registered by a plugin through `tapegrad_register_devices`.

    Subclasses implement the array-level interface below for their array type; the engine
    never touches an array except through it (and the array-API attributes `shape`,
    `dtype`, `ndim`, `size`).
    """

    def __init__(self, str name, array_type):
        self.name = name
        self.array_type = array_type

    def __repr__(self):
        return f"device('{self.name}')"

    def __str__(self):
        return self.name          # torch: str(torch.device("cpu")) == "cpu"

    def __eq__(self, other):
        if isinstance(other, Device):
            return self.name == (<Device>other).name
        if isinstance(other, str):
            return self.name == other
        return NotImplemented

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):
        return (_device_by_name, (self.name,))

    # -- the array interface every device implements ----------------------------------
    def asarray(self, obj, dtype=None):
        """Host data (scalars, lists, ndarrays) -> an array on this device."""
        raise NotImplementedError

    def to_numpy(self, arr):
        """An array of this device -> a numpy.ndarray on the host."""
        raise NotImplementedError

    def copy(self, arr):
        raise NotImplementedError

    def copyto(self, dst, src):
        """Write src into dst in place (same_kind casting, broadcasting src)."""
        raise NotImplementedError

    def setitem(self, arr, index, value):
        raise NotImplementedError

    def zeros(self, shape, dtype):
        raise NotImplementedError

    def ones(self, shape, dtype):
        raise NotImplementedError

    def may_share_memory(self, a, b):
        """Whether a and b might share storage (True when unsure)."""
        return True

    def random(self, kind, shape, dtype, **params):
        """An array of random numbers: kind "uniform" (low, high) or "normal" (loc, scale)."""
        raise NotImplementedError(f"device '{self.name}' has no random number generator")

    def manual_seed(self, seed):
        raise NotImplementedError(f"device '{self.name}' has no random number generator")

    def get_rng_state(self):
        raise NotImplementedError(f"device '{self.name}' has no random number generator")

    def set_rng_state(self, state):
        raise NotImplementedError(f"device '{self.name}' has no random number generator")


def _device_by_name(name):
    return get_device(name)


def get_device(spec):
    """The registered Device for `spec` (a name like "cpu", or a Device)."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        return _DEFAULT_DEVICE
    if not isinstance(spec, str):
        raise TypeError(f"device must be a string like 'cpu' or a tapegrad device, got {type(spec).__name__}")
    name = spec.split(":", 1)[0]
    dev = _DEVICES.get(name)
    if dev is None:
        if name in _UNAVAILABLE:
            raise RuntimeError(
                f"device '{name}' is not available: {_UNAVAILABLE[name]}; registered "
                f"devices: " + ", ".join(sorted(_DEVICES)))
        if name == "cuda":
            raise RuntimeError(
                "device 'cuda' is not available: install the plugin 'tapegrad-cuda' and its "
                "GPU wheels (see tg.cuda.is_available()); registered devices: "
                + ", ".join(sorted(_DEVICES)))
        raise RuntimeError(f"unknown device '{spec}'; registered devices: " + ", ".join(sorted(_DEVICES)))
    return dev


# ---------------------------------------------------------------------------------------
# Op: one registered operation.  Calling it is the whole per-op path.
# ---------------------------------------------------------------------------------------

# Note: [dim= and keepdim=] (the rules: tapegrad/_dim_keywords.py)
# PyTorch's dim=/keepdim= are NumPy's axis=/keepdims=: each Op decides once, at
# construction, whether it takes them (dim_keywords), and only a call that has keywords
# looks at that: the keyword-less path pays nothing.

cdef inline dict _dim_kwargs(Op op, dict kwargs):
    """kwargs, renamed or refused by op.dim_keywords when it holds dim= or keepdim=."""
    if op.dim_keywords is None or ("dim" not in kwargs and "keepdim" not in kwargs):
        return kwargs
    return _dim_keywords.rename(op.name, op.dim_keywords, kwargs)


cdef class Op:
    """A registered op: `tg.<name>` is this object; calling it runs the op."""

    def __init__(self, str name, str plugin, dict kernels, vjp, jvp, int nin, bint seq_input,
                 tuple params, differentiable, bint view, bint twice_differentiable,
                 samples, doc, save_inputs, bint save_ans, tuple not_implemented=(),
                 int n_aux=0, batch=None, bint supports_complex=False):
        self._vectorcall = _op_vectorcall_entry
        self.name = name
        self.supports_complex = supports_complex
        self.batch = batch
        self.n_aux = n_aux
        self.not_implemented = not_implemented
        self.plugin = plugin
        self.kernels = kernels
        self.vjp = vjp
        self.jvp = jvp
        self.nin = nin
        self.seq_input = seq_input
        self.params = params
        self.view = view
        self.twice_differentiable = twice_differentiable
        self.samples = list(samples or [])
        self.doc = doc or ""
        self.save_ans = save_ans
        self.dim_keywords = _dim_keywords.rule(
            name, _dim_keywords.accepted(params, vjp, *kernels.values()))
        if vjp is None:
            differentiable = ()
        if differentiable is None:
            self.differentiable = None
            self._all_diff = True
        else:
            self.differentiable = tuple(differentiable)
            self._all_diff = False
        # None: the rule reads every input; False: none; else one flag per input.
        if save_inputs is None or save_inputs is True:
            self.save_inputs = None
        elif save_inputs is False:
            self.save_inputs = ()
            self._save_no_inputs = True
        else:
            self.save_inputs = tuple(save_inputs)

    @property
    def __doc__(self):
        return self.doc

    cdef inline bint saves_input(self, Py_ssize_t i):
        if self.save_inputs is None:
            return True
        if self._save_no_inputs:
            return False
        return i < len(self.save_inputs) and self.save_inputs[i]

    def is_differentiable(self, int index):
        """Whether input `index` gets a gradient."""
        if self.vjp is None:
            return False
        return self._all_diff or index in self.differentiable

    def __repr__(self):
        return f"<tapegrad op '{self.name}' from {self.plugin}>"

    def __call__(self, *args, **kwargs):
        return _apply(self, args, _dim_kwargs(self, kwargs) if kwargs else kwargs)

    def __get__(self, instance, owner):
        if instance is None:
            return self
        return BoundOp(self, instance)

    def __reduce__(self):
        return (lookup, (self.name,))

    def _set_fast_paths(self, passthrough=None, bint save_for_other=False, vjp_op=None,
                        vjp_reads=None, bint grad_times_number=False,
                        bint matmul_2d=False):
        """Declare what the engine may do without calling the rule (see Note: [gradient
        fast paths]): `passthrough`, one flag per input: the rule's gradient for that input
        is `g` itself; `save_for_other` (two inputs): the rule reads each input only for
        the other's gradient; `vjp_op` (one input) with `vjp_reads` ("ans" or "x"): for a
        real `g` and a real saved value, outside recording, the rule returns
        ``(vjp_op(g, ans),)`` (or ``(vjp_op(g, x),)``); `grad_times_number` (two inputs):
        for a real `g`, the gradient of the tensor input when the other is a Python
        number c is ``g * c``; `matmul_2d` (two saved inputs): for 2-D float32/float64
        ndarrays g, x, y outside recording the rule returns ``matmul(g, y.T)`` and
        ``matmul(x.T, g)`` (each only where the input requires grad; matmul: the op's
        CPU kernel, tapegrad._array_kernels.matmul).
        Each must describe the rule exactly: results do not change.
        One call declares them all (what it leaves out is off).

        >>> import tapegrad as tg
        >>> tg.add.grad_passthrough, tg.add.save_for_other
        ((True, True), False)
        >>> tg.add.vjp_op is None, tg.add.grad_times_number    # sin's: tg.sin_backward
        (True, False)
        """
        if passthrough is not None:
            passthrough = tuple(bool(p) for p in passthrough)
            if self.nin >= 0 and len(passthrough) != self.nin:
                raise ValueError(f"{self.name}: passthrough needs one flag per input "
                                 f"({self.nin}), got {len(passthrough)}")
        if save_for_other and self.nin != 2:
            raise ValueError(f"{self.name}: save_for_other needs an op of two inputs")
        if grad_times_number and self.nin != 2:
            raise ValueError(f"{self.name}: grad_times_number needs an op of two inputs")
        if vjp_op is not None:
            if not isinstance(vjp_op, Op):
                raise TypeError(f"{self.name}: vjp_op must be a tapegrad op, got "
                                f"{type(vjp_op).__name__}")
            if self.nin != 1 or self.seq_input or self.params or self.n_aux:
                raise ValueError(f"{self.name}: vjp_op needs an op of one tensor input "
                                 f"without parameters or auxiliary outputs")
            if vjp_reads == "ans":
                if not self.save_ans:
                    raise ValueError(f"{self.name}: vjp_reads='ans' but the op does not "
                                     f"save its result (save_ans=False)")
            elif vjp_reads == "x":
                if not self.saves_input(0):
                    raise ValueError(f"{self.name}: vjp_reads='x' but the op does not "
                                     f"save its input (save_inputs)")
            else:
                raise ValueError(f"{self.name}: vjp_reads must be 'ans' or 'x', got "
                                 f"{vjp_reads!r}")
        elif vjp_reads is not None:
            raise ValueError(f"{self.name}: vjp_reads without vjp_op")
        if matmul_2d and (self.nin != 2 or self.params or self.n_aux
                          or not (self.saves_input(0) and self.saves_input(1))):
            raise ValueError(f"{self.name}: matmul_2d needs an op of two saved tensor "
                             f"inputs without parameters or auxiliary outputs")
        self.grad_passthrough = passthrough
        self.save_for_other = save_for_other
        self.vjp_op = vjp_op
        self.vjp_op_reads_ans = vjp_reads == "ans"
        self.grad_times_number = grad_times_number
        self.vjp_matmul_2d = matmul_2d


# Note: [gradient fast paths]
# Two per-op constants the tape can skip when a plugin says its rule allows it, measured on
# W1 (docs/performance.md, "Session 9: eager per-op cost"):
# * passthrough: `add`'s rule is `(g, g)` and `subtract`'s `(g, -g)`; when every input that
#   gets a gradient is a pass-through one (x + 0.01, x - 0.01, a residual sum), the node
#   hands `g` on itself instead of calling the rule (a Python frame and a tuple). The same
#   object the rule returned, so the same bits, under create_graph too (`g` carries its
#   graph). A rule that would run for another input (subtract's y) runs as before.
# * save_for_other: `multiply` reads y only for x's gradient and x only for y's (PyTorch's
#   mul saves the same way): `x * 2.0` saves nothing, so it allocates no saved record or
#   version counter, and backward unpacks no tensor the rule does not read. The rule gets
#   the unsaved input's TensorMeta, as for save_inputs=False; tg.needs_grad answers for it.
#   As in PyTorch, modifying x in place afterwards is then no error: its value is not used.
# * vjp_op (session 10): the rules of sin, tanh, ... end in one backward op (Note: [backward
#   ops] in tapegrad_elementwise/ops.py): `(sin_backward(g, x),)` for a real g, outside
#   tg.compile's recording. Two Python frames (the holomorphic wrapper, the rule), a dict
#   lookup, the unpacked saved Tensor and a full op call (_apply_arrays) to reach one
#   kernel call: the engine calls that kernel itself (_vjp_by_op) on the same two arrays,
#   so the same bits. Only where the rule would take that branch and nothing else can
#   differ: not recording (create_graph must record the backward op: the rule runs), no
#   forward level (tangents, vmap), no tracer, no read log, both arrays real ndarrays on
#   g's device with a kernel there, and the saved value unmodified (else the rule runs
#   and raises its error). Anything else runs the rule, unchanged.
# * grad_times_number: multiply's rule for `x * 2.0` is `(g * 2.0, None)`: the engine
#   makes the same `g * 2.0` call itself (the operator's _apply2), without the rule's two
#   frames; for a real g only (the holomorphic wrapper conjugates a complex one).
# * matmul_2d (session 12): matmul's rule for two 2-D real operands in a plain backward is
#   `(matmul(g, y.T), matmul(x.T, g))` (matmul: the op's CPU kernel,
#   tapegrad._array_kernels.matmul) on the raw arrays (tapegrad_linalg's
#   _matmul_vjp, its own shortcut). The engine makes those two calls itself
#   (_matmul_2d_vjp), without the rule's frames, the two unpacked saved Tensors and the
#   helper frames (~30 k instructions of W2's step): the same ufunc on the same arrays
#   (y.T a transposed view, as `y._data.T`), so the same bits. Only for: grad mode off
#   (no create_graph), no forward level, no tracer, no read log, g, x, y exact ndarrays
#   (no subclass), 2-D, one dtype, float32 or float64, on g's device, no tangents, saved
#   values unmodified (else the rule runs and raises its error). Gradients only where the
#   rule makes one (the saved input's requires_grad, what tg.needs_grad reads).


# Note: [calling an op]
# `def __call__(self, *args, **kwargs)` makes Cython build an empty dict for **kwargs on
# every call (plus its deallocation: ~40 ns of an op's constant). Op's call slot is set
# instead to _op_call, which gets the keyword dict CPython passes (NULL when there is
# none). Op.__call__ stays as the documented Python-level entry point. Calls without
# keywords (`tg.sin(x)`, and a rule's `op(g, x)`) take CPython's vectorcall protocol
# instead (_op_vectorcall, installed on the type at import): the inputs are read from the
# caller's argument array, with no tuple (W1: 14,146 -> see docs/performance.md, Session 9).

cdef object _op_call(object self, object args, PyObject* kwds):
    if kwds == NULL or not <dict>kwds:
        return _apply(<Op>self, <tuple>args, _NO_PARAMS)
    return _apply(<Op>self, <tuple>args, _dim_kwargs(<Op>self, dict(<dict>kwds)))


tapegrad_set_call_slot(Op, <void*>_op_call)


cdef object _op_vectorcall(object self, PyObject** args, Py_ssize_t nargs, PyObject* kwnames):
    """op(*args) through vectorcall: the inputs are read from CPython's argument array
    (as _apply2 does for operators), with no tuple; keywords and parameters passed
    positionally take _apply's general path."""
    cdef Op op = <Op>self
    cdef PyObject* argv[_KERNEL_ARGS]
    cdef Py_ssize_t held = 0, i
    cdef dict kwargs
    if kwnames != NULL and len(<tuple>kwnames) > 0:
        kwargs = {}
        for i in range(len(<tuple>kwnames)):
            kwargs[(<tuple>kwnames)[i]] = <object>args[nargs + i]
        return _apply(op, _tuple_of(args, nargs), _dim_kwargs(op, kwargs))
    if op.seq_input or not (op.nin < 0 or op.nin == nargs) or nargs > _KERNEL_ARGS:
        return _apply(op, _tuple_of(args, nargs), _NO_PARAMS)
    try:
        return _apply_arrays(op, None, args, _NO_PARAMS, nargs, argv, &held, None)
    finally:
        for i in range(held):
            Py_XDECREF(argv[i])


cdef void* _op_vectorcall_entry = NULL


def _install_vectorcall():
    """Give Op CPython's vectorcall protocol (once, at import)."""
    global _op_vectorcall_entry
    cdef Op probe = Op.__new__(Op)
    cdef Py_ssize_t offset = <char*>&probe._vectorcall - <char*><PyObject*>probe
    _op_vectorcall_entry = tapegrad_set_vectorcall(Op, <void*>_op_vectorcall, offset)


_install_vectorcall()


cdef class BoundOp:
    """`t.<op>` : the op with the tensor bound as its first input."""
    cdef Op op
    cdef object this

    def __init__(self, Op op, this):
        self.op = op
        self.this = this

    def __call__(self, *args, **kwargs):
        return _apply(self.op, (self.this,) + args,
                      _dim_kwargs(self.op, kwargs) if kwargs else kwargs)

    def __repr__(self):
        return f"<bound tapegrad op '{self.op.name}'>"


@cython.no_gc
@cython.freelist(64)
cdef class TensorMeta:
    """What a Node keeps of an input it does not save: enough for shapes and dtypes."""
    cdef readonly tuple shape
    cdef readonly object dtype
    cdef readonly Device device
    cdef readonly bint requires_grad   # of the tensor it describes, when it was recorded

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        cdef Py_ssize_t n = 1
        for s in self.shape:
            n *= s
        return n

    def __repr__(self):
        return f"TensorMeta(shape={self.shape}, dtype={self.dtype}, device='{self.device.name}')"


# NOTE: a TensorMeta is immutable, so nodes may share one: the last one made is reused
# when the next input it would describe has the same shape, dtype, device and flag (a
# chain of ops on one shape allocates none), compared in C for NumPy arrays.
cdef TensorMeta _last_meta = None


cdef TensorMeta _meta_of(TensorBase t):
    global _last_meta
    cdef TensorMeta m = _last_meta
    cdef cnp.ndarray arr
    cdef tuple shape
    cdef int k, nd
    if m is not None and type(t._data) is cnp.ndarray and m.device is t._device \
            and m.requires_grad == t._requires_grad:
        arr = <cnp.ndarray>t._data
        if <void*>m.dtype == <void*>cnp.PyArray_DESCR(arr):
            shape = m.shape
            nd = cnp.PyArray_NDIM(arr)
            if len(shape) == nd:
                for k in range(nd):
                    if <Py_ssize_t>shape[k] != cnp.PyArray_DIMS(arr)[k]:
                        break
                else:
                    return m
    m = TensorMeta.__new__(TensorMeta)
    m.shape = t._data.shape
    m.dtype = t._data.dtype
    m.device = t._device
    m.requires_grad = t._requires_grad
    _last_meta = m
    return m


cdef dict _bind_params(Op op, tuple extra, dict kwargs):
    if len(extra) > len(op.params):
        raise TypeError(
            f"{op.name}() got {len(extra)} extra positional arguments after its tensor inputs; "
            f"it takes at most {len(op.params)} ({', '.join(op.params) or 'none'})")
    kwargs = dict(kwargs)
    for name, value in zip(op.params, extra):
        if name in kwargs:
            raise TypeError(f"{op.name}() got multiple values for argument '{name}'")
        kwargs[name] = value
    return kwargs


cdef str _describe(tuple inputs):
    parts = []
    for i, a in enumerate(inputs):
        if isinstance(a, TensorBase):
            t = <TensorBase>a
            parts.append(f"input {i}: shape {tuple(t._data.shape)} {t._data.dtype} on {t._device.name}")
        else:
            parts.append(f"input {i}: {type(a).__name__} {a!r}"[:120])
    return "; ".join(parts)


cdef object _same_type_error(BaseException exc, str msg):
    """An exception of exc's own type (np.linalg.LinAlgError, np.exceptions.AxisError,
    UFuncTypeError, ...) carrying msg, so that a NumPy user's ``except`` still catches it.

    NOTE: some classes cannot be built from a message alone (NumPy's private
    _UFuncNoLoopError(ufunc, dtypes), _UFuncCastingError(ufunc, casting, from_, to)); the
    nearest class up the MRO that can is used (UFuncTypeError, then TypeError). AxisError
    built from one string keeps the message but has axis = ndim = None (its __str__ would
    otherwise rebuild its own message); the original, with its attributes, stays as
    __cause__. The error path only: the hot path never comes here."""
    for cls in type(exc).__mro__:
        if cls is Exception or cls is BaseException:
            break
        try:
            new = cls(msg)
        except Exception:
            continue
        if str(new) == msg:
            return new
    return RuntimeError(msg)


cdef object _op_error(Op op, BaseException exc, tuple inputs, dict kwargs):
    params = f" with {kwargs}" if kwargs else ""
    text = str(exc)
    # a kernel's own message often names the op already ("linalg_inv: ..."; the private
    # "_linalg_eigh" as "linalg_eigh: ..."): no second prefix then
    if not (text.startswith(op.name + ": ") or text.startswith(op.name.lstrip("_") + ": ")):
        text = f"{op.name}: {text}"
    return _same_type_error(exc, f"{text} ({_describe(inputs)}){params}")


cdef bint _holds_tensor(object a, int depth=0):
    """Whether a (nested) list or tuple holds a Tensor anywhere. NOTE: no deeper than
    NumPy's 64 dimensions (C recursion); NumPy rejects deeper lists itself."""
    if depth > 64:
        return False
    for item in a:
        if isinstance(item, TensorBase):
            return True
        if isinstance(item, (list, tuple)) and _holds_tensor(item, depth + 1):
            return True
    return False


cdef object _stack_nested(object a, int depth=0):
    if not isinstance(a, (list, tuple)) or depth > 64:   # deeper: NumPy's error
        return a
    return _apply(_lookup("stack"), ([_stack_nested(item, depth + 1) for item in a],),
                  _NO_PARAMS)


def stack_nested(a):
    """A (nested) list or tuple that holds tensors as one tensor, built with tg.stack (so
    with gradients) as NumPy would build the array; None if it holds no tensor."""
    if isinstance(a, (list, tuple)) and _holds_tensor(a):
        return _stack_nested(a)
    return None


cdef object _to_constant(object a, Op op, Py_ssize_t i):
    """Wrap a non-tensor, non-scalar input (ndarray, list) as a tensor: a constant, unless
    it is a list that holds tensors."""
    # NOTE: np.asarray would read the tensors' values and silently drop their graph
    # (tg.mean([x, x + 2])); stacked, they keep it. Only lists pay this walk.
    stacked = stack_nested(a)
    if stacked is not None:
        return stacked
    if isinstance(a, np.ndarray) or isinstance(a, (list, tuple)):
        arr = _DEFAULT_DEVICE.asarray(a)
        return _new_tensor(arr, _DEFAULT_DEVICE)
    if hasattr(a, "__array__"):
        return _new_tensor(_DEFAULT_DEVICE.asarray(np.asarray(a)), _DEFAULT_DEVICE)
    raise TypeError(f"{op.name}: input {i} must be a tensor, array or number, not {type(a).__name__}")


cdef tuple _EMPTY = ()


cdef inline TensorBase _new_tensor(object data, Device device):
    cdef TensorBase t = <TensorBase>tapegrad_alloc(_TensorClass, _EMPTY)
    t._data = data
    t._device = device
    return t


cdef inline TensorBase _kernel_result_tensor(object out, Device device):
    """A kernel's result as a tensor on `device`. NOTE: NumPy returns a scalar, not a 0-d
    array, for 0-d operands, so a result that is not the device's array type is made one."""
    if type(out) is not device.array_type:
        out = device.asarray(out)
    return _new_tensor(out, device)


def new_tensor(data, Device device, bint requires_grad=False):
    """Wrap a device array as a Tensor (no copy, no checks: for plugins and the core)."""
    cdef TensorBase t = _new_tensor(data, device)
    if _traced():
        _TRACER.created(data, device)
    if requires_grad:
        _check_can_require_grad(t)
        t._requires_grad = True
    return t


def detached_view(data, TensorBase base):
    """`data` (an array sharing base's storage: a reinterpretation of its bytes) as a
    tensor cut from the graph that shares base's version counter, as detach() does: a
    write through either one bumps the version that the other's saved values check."""
    cdef TensorBase t = _new_tensor(data, base._device)
    t._vc = _get_vc(base)
    t._is_view = True
    return t


cdef object _F64 = np.dtype(np.float64)
cdef object _F32 = np.dtype(np.float32)


cdef inline bint _is_float_array(object arr):
    if type(arr) is cnp.ndarray:        # NOTE: no `.dtype` attribute lookup for NumPy's
        return cnp.PyArray_ISFLOAT(<cnp.ndarray>arr)
    dt = arr.dtype
    return dt is _F64 or dt is _F32 or dt.kind == "f"


# Note: [Python scalars as 0-d arrays]
# A ufunc converts a Python float operand through NumPy's scalar-promotion machinery on
# every call: about 120 ns of the 390 ns that `arr * 1.002` costs on 16 elements, while a
# 0-d array of the array's dtype goes straight to the loop. When every tensor operand is
# a float64 ndarray (or every one a float32 ndarray), NumPy's own result is exactly the
# one with the scalar cast to that dtype first (NEP 50's weak Python scalars; value-based
# casting before NumPy 2 gives the same). So for a ufunc kernel a float, or an int that
# the dtype represents exactly, is passed as such a 0-d array. The arrays of the last few
# scalar objects are cached by identity (a literal in a loop is the same object every
# time; the cache holds a reference, so an id is never reused while cached). Values that
# would overflow float32 are left to NumPy (it warns). The op's inputs, as rules and the
# tape see them, stay the Python scalars.

cdef enum:
    _SCALAR_SLOTS = 8

cdef PyObject* _scalar_keys[_SCALAR_SLOTS]     # the scalar objects (owned references)
cdef PyObject* _scalar_arrays[_SCALAR_SLOTS]   # their 0-d arrays (owned references)
cdef int _scalar_types[_SCALAR_SLOTS]          # the dtype (NumPy type number) of each array
cdef int _scalar_next = 0                      # the slot the next miss overwrites
cdef double _F32_MAX = 3.4028234663852886e38
cdef object _ufunc_type = np.ufunc


cdef object _scalar_operand(object v, int type_num):
    """v (a float or an int) as a 0-d array of type_num (NPY_DOUBLE or NPY_FLOAT), or None
    where that could differ from what NumPy does with v itself."""
    global _scalar_next
    cdef Py_ssize_t k
    cdef PyObject* key = <PyObject*>v
    cdef double d
    cdef long long iv
    cdef int overflow = 0
    for k in range(_SCALAR_SLOTS):
        if _scalar_keys[k] == key and _scalar_types[k] == type_num:
            return <object>_scalar_arrays[k]
    if type(v) is float:
        d = PyFloat_AS_DOUBLE(v)
        if type_num == cnp.NPY_FLOAT and fabs(d) > _F32_MAX and not isinf(d):
            return None         # finite but beyond float32: NumPy warns; leave it to it
    else:
        iv = PyLong_AsLongLongAndOverflow(v, &overflow)
        if overflow or iv > (1 << 24) or iv < -(1 << 24):
            return None
        d = <double>iv
    cdef cnp.ndarray arr = cnp.PyArray_SimpleNew(0, NULL, type_num)
    if type_num == cnp.NPY_DOUBLE:
        (<double*>cnp.PyArray_DATA(arr))[0] = d
    else:
        (<float*>cnp.PyArray_DATA(arr))[0] = <float>d
    cnp.PyArray_CLEARFLAGS(arr, cnp.NPY_ARRAY_WRITEABLE)
    k = _scalar_next
    _scalar_next = (k + 1) % _SCALAR_SLOTS
    Py_XDECREF(_scalar_keys[k])
    Py_XDECREF(_scalar_arrays[k])
    Py_INCREF(v)
    Py_INCREF(arr)
    _scalar_keys[k] = key
    _scalar_arrays[k] = <PyObject*>arr
    _scalar_types[k] = type_num
    return arr


cdef void _scalars_as_arrays(tuple arrays, int type_num):
    """Replace the float and int items of `arrays` (a fresh tuple we own) by 0-d arrays."""
    cdef Py_ssize_t i
    cdef object v, z
    for i in range(len(arrays)):
        v = <object>PyTuple_GET_ITEM(arrays, i)
        if type(v) is float or type(v) is int:
            z = _scalar_operand(v, type_num)
            if z is not None:
                Py_INCREF(z)
                Py_DECREF(v)            # the tuple's reference; `v` holds its own
                PyTuple_SET_ITEM(arrays, i, z)


cdef void _scalars_as_arrays_c(PyObject** argv, Py_ssize_t n, int type_num) except *:
    """_scalars_as_arrays for arguments held in a C array (owned references)."""
    cdef Py_ssize_t i
    cdef object v, z
    for i in range(n):
        v = <object>argv[i]
        if type(v) is float or type(v) is int:
            z = _scalar_operand(v, type_num)
            if z is not None:
                Py_INCREF(z)
                Py_XDECREF(argv[i])     # the array's reference; `v` holds its own
                argv[i] = <PyObject*>z


cdef tuple _tuple_of(PyObject** argv, Py_ssize_t n):
    cdef tuple t = PyTuple_New(n)
    cdef Py_ssize_t i
    for i in range(n):
        Py_INCREF(<object>argv[i])
        PyTuple_SET_ITEM(t, i, <object>argv[i])
    return t


# NOTE: a kernel's arguments are gathered in a C array and passed by vectorcall: no tuple
# per op. Ops with more inputs, or keyword parameters, get the tuple.
cdef enum:
    _KERNEL_ARGS = 8


cdef object _apply(Op op, tuple args, dict kwargs):
    cdef tuple inputs
    cdef Py_ssize_t nargs = len(args), n, i

    # -- split positional arguments into tensor inputs and parameters ------------------
    if op.seq_input:
        if nargs < 1:
            raise TypeError(f"{op.name}() needs a sequence of tensors as its first argument")
        try:
            inputs = tuple(args[0])
        except TypeError:
            raise TypeError(f"{op.name}() needs a sequence of tensors, got {type(args[0]).__name__}") from None
        if len(inputs) == 0:
            raise ValueError(f"{op.name}() needs at least one tensor")
        if nargs > 1:
            kwargs = _bind_params(op, args[1:], kwargs)
    elif op.nin < 0 or op.nin == nargs:
        inputs = args
    elif nargs < op.nin:
        raise TypeError(f"{op.name}() takes {op.nin} tensor inputs, got {nargs}")
    else:
        inputs = args[:op.nin]
        kwargs = _bind_params(op, args[op.nin:], kwargs)

    # -- resolve device, collect arrays, see whether anything needs a gradient ---------
    n = len(inputs)
    cdef PyObject* argv[_KERNEL_ARGS]   # the arrays (owned references) when n fits
    cdef Py_ssize_t held = 0            # how many of argv are set
    cdef bint use_argv = n <= _KERNEL_ARGS
    cdef tuple arrays = None if use_argv else PyTuple_New(n)
    try:
        return _apply_arrays(op, inputs, tapegrad_tuple_items(inputs), kwargs, n, argv, &held,
                             arrays)
    finally:
        for i in range(held):
            Py_XDECREF(argv[i])


cdef object _apply2(Op op, object a, object b):
    """op(a, b) for Tensor's binary operators: _apply without the argument tuple."""
    cdef PyObject* pair[2]
    cdef PyObject* argv[2]
    cdef Py_ssize_t held = 0, i
    if op.seq_input or not (op.nin < 0 or op.nin == 2):
        return _apply(op, (a, b), _NO_PARAMS)
    pair[0] = <PyObject*>a          # borrowed: the caller holds both
    pair[1] = <PyObject*>b
    try:
        return _apply_arrays(op, None, pair, _NO_PARAMS, 2, argv, &held, None)
    finally:
        for i in range(held):
            Py_XDECREF(argv[i])


def apply_plain(Op op, tuple inputs, dict kwargs):
    """op(*inputs, **kwargs) ignoring tangents: the primal computation of forward mode
    (`inputs` are the tensor inputs already split from the parameters; kwargs bound)."""
    cdef Py_ssize_t n = len(inputs), i
    cdef PyObject* argv[_KERNEL_ARGS]
    cdef Py_ssize_t held = 0
    cdef tuple arrays = None if n <= _KERNEL_ARGS else PyTuple_New(n)
    try:
        return _apply_arrays(op, inputs, tapegrad_tuple_items(inputs), kwargs, n, argv, &held,
                             arrays, True)
    finally:
        for i in range(held):
            Py_XDECREF(argv[i])


cdef object _apply_arrays(Op op, tuple inputs, PyObject** in_argv, dict kwargs, Py_ssize_t n,
                          PyObject** argv, Py_ssize_t* held, tuple arrays, bint plain=False):
    """_apply from its inputs on. The inputs are in_argv[:n]; `inputs` is them as a tuple,
    or None, and then is built only where one is needed (errors, tg.compile's recorder).
    The kernel's arguments go into argv (the caller releases held[0] of them) or, when
    `arrays` is given, into that tuple. `plain`: ignore tangents (forward mode's primal)."""
    cdef Py_ssize_t i
    cdef Device device = None
    cdef bint needs_grad = False
    cdef TensorBase t
    cdef list converted = None
    cdef Py_ssize_t n_scalars = 0
    cdef int scalar_type = -1       # dtype all tensor operands share (see _scalars_as_arrays)
    cdef int tn
    cdef object item
    cdef bint dual = False
    for i in range(n):
        a = <object>in_argv[i]
        if isinstance(a, TensorBase):
            t = <TensorBase>a
            if _n_read_logs:
                _log_read(op, i, t)
            if _fwd_active and not plain and _has_tangents(t):
                dual = True
        elif type(a) is float or isinstance(a, _python_scalars):
            Py_INCREF(a)
            if arrays is None:
                argv[i] = <PyObject*>a
                held[0] = i + 1
            else:
                PyTuple_SET_ITEM(arrays, i, a)
            n_scalars += 1
            continue
        else:
            t = _to_constant(a, op, i)
            if converted is None:
                converted = list(_tuple_of(in_argv, n))
            converted[i] = t
        if device is None:
            device = t._device
        elif t._device is not device:
            if inputs is None:
                inputs = _tuple_of(in_argv, n)
            raise RuntimeError(
                f"{op.name}: expected all tensors on the same device, but found "
                f"{device.name} and {t._device.name} ({_describe(inputs)}); "
                f"move them with .to(device) first")
        item = t._data
        Py_INCREF(item)
        if arrays is None:
            argv[i] = <PyObject*>item
            held[0] = i + 1
        else:
            PyTuple_SET_ITEM(arrays, i, item)
        if scalar_type != -2:
            if type(item) is cnp.ndarray:
                tn = cnp.PyArray_TYPE(<cnp.ndarray>item)
                if (tn == cnp.NPY_DOUBLE or tn == cnp.NPY_FLOAT) and (scalar_type == -1 or scalar_type == tn):
                    scalar_type = tn
                else:
                    scalar_type = -2
            else:
                scalar_type = -2
        if _is_stale_view(t) and (_grad_enabled() or _fwd_active):
            _refresh_view(t)
        if t._requires_grad:
            if op._all_diff or (op.differentiable is not None and i in op.differentiable):
                needs_grad = True
            elif op.not_implemented and i in op.not_implemented and _grad_enabled():
                _refuse_unimplemented_gradient(op, i, t)
    if converted is not None:
        inputs = tuple(converted)
        in_argv = tapegrad_tuple_items(inputs)
    if dual:
        # forward mode: the dispatcher computes the primal (apply_plain) and the tangents
        return _FORWARD(op, _tuple_of(in_argv, n) if inputs is None else inputs, kwargs)
    if device is None:
        device = _DEFAULT_DEVICE
    if kwargs and _grad_enabled():
        _check_params_need_no_grad(op, kwargs)

    kernel = op.kernels.get(device.name)
    if kernel is None:
        # NotImplementedError (a RuntimeError) as PyTorch's "not implemented for 'CUDA'".
        raise NotImplementedError(
            f"{op.name}: no kernel for device '{device.name}' (kernels registered for: "
            f"{', '.join(sorted(op.kernels)) or 'none'}); a plugin adds one with "
            f"registry.register_kernel('{op.name}', '{device.name}', fn)")
    if n_scalars and scalar_type >= 0 and type(kernel) is _ufunc_type and not kwargs:
        # see Note: [Python scalars as 0-d arrays]
        if arrays is None:
            _scalars_as_arrays_c(argv, n, scalar_type)
        else:
            _scalars_as_arrays(arrays, scalar_type)
    if kwargs:
        if type(kernel) is _ufunc_type and not op.params:
            # NOTE: a ufunc kernel would take NumPy's ufunc keywords itself: where= leaves
            # uninitialized memory, out= aliases the caller's array, dtype= changes the
            # result's dtype, and the gradient rule, which takes none of them, crashes.
            raise TypeError(
                f"{op.name}() got an unexpected keyword argument "
                f"{', '.join(repr(k) for k in kwargs)}: NumPy's ufunc keywords (out=, where=, "
                f"dtype=, casting=, order=, subok=, signature=) are not supported by tapegrad "
                f"ops (for where= use tg.where(mask, result, other), for dtype= .astype(dtype))")
        if arrays is None:
            arrays = _tuple_of(argv, n)
    try:
        if arrays is None:
            out = PyObject_Vectorcall(kernel, argv, n, NULL)
        elif kwargs:
            out = kernel(*arrays, **kwargs)
        else:
            out = kernel(*arrays)
    except (ValueError, TypeError, IndexError) as exc:
        raise _op_error(op, exc, _tuple_of(in_argv, n) if inputs is None else inputs,
                        kwargs) from exc
    aux = None
    if op.n_aux:
        out, aux = _split_aux(op, out, device, in_argv, n)
    if type(out) is not device.array_type:
        out = device.asarray(out)
    if _traced():
        if aux is not None:       # see Note: [auxiliary outputs]
            _TRACER.kernel_aux(kernel, _tuple_of(argv, n) if arrays is None else arrays,
                               kwargs, out, aux, device,
                               _tuple_of(in_argv, n) if inputs is None else inputs)
        else:
            _TRACER.kernel(_OutputOnly(kernel) if op.n_aux else kernel,
                           _tuple_of(argv, n) if arrays is None else arrays, kwargs, out,
                           device, _tuple_of(in_argv, n) if inputs is None else inputs)

    t = _new_tensor(out, device)
    if op.view and n and isinstance(<object>in_argv[0], TensorBase) and device.may_share_memory(
            out, (<TensorBase>in_argv[0])._data):
        _mark_view(t, <TensorBase>in_argv[0], op, n == 1 and _grad_enabled(), kwargs)
    if needs_grad and _grad_enabled():
        if _complex_seen and not op.supports_complex:
            _refuse_complex_inputs(op, in_argv, n, out)
        if _is_float_array(out):
            _record(op, in_argv, n, kwargs if kwargs else _NO_PARAMS, t)
            if aux is not None:
                (<OpNode>t._node).aux_data = aux
        elif _is_complex_array(out):
            _record_complex(op, in_argv, n, kwargs if kwargs else _NO_PARAMS, t,
                            _tuple_of(in_argv, n) if inputs is None else inputs)
            if aux is not None:
                (<OpNode>t._node).aux_data = aux
    return t


# Note: [auxiliary outputs]
# An op registered with aux=k (register_op) has kernels that return (out, a1, ..., ak):
# intermediates of the forward its first-order rule can reuse (the inverse std of a
# normalisation, the softmax inside a cross-entropy) instead of computing them again.
# The arrays are kept on the node and passed to the rule as `aux=` (a tuple of constant
# tensors) ONLY when the rule is not itself recorded. They are constants of the first-
# order rule: under create_graph (tg.grad(..., create_graph=True), hessians, jvp) a rule
# that used them would differentiate as if they did not depend on the inputs -- a silent
# wrong second derivative -- so there the rule gets aux=None and must recompute from its
# inputs with tapegrad ops. tg.compile's recorder hears of the aux arrays
# (Recorder.kernel_aux): the recorded step writes them into slots of their own, so a
# rule that reuses them reads that replay's arrays, not the recording's (as constants),
# and a replay runs the very kernels eager runs. A kernel may also return the output alone
# (a device whose kernel does not compute the intermediates): the rule then gets
# aux=None, and the recorder records the kernel as one that returns the output only
# (_OutputOnly).
# The aux arrays must be new arrays: one that
# shares memory with the output or an input could be written in place behind the node's
# back (no version counter guards it), which _split_aux refuses. Ops without aux pay one
# C int test.

cdef tuple _split_aux(Op op, object result, Device device, PyObject** in_argv, Py_ssize_t n):
    """(out, aux tuple) of an aux kernel's (out, a1, ..., ak), checked; (out, None) for a
    kernel that returns the output alone (one for a device that does not compute them)."""
    cdef Py_ssize_t i
    if type(result) is not tuple:
        return result, None
    if len(<tuple>result) != op.n_aux + 1:
        raise TypeError(
            f"{op.name}: the op is registered with aux={op.n_aux}, so its kernel must return "
            f"a tuple (out, {op.n_aux} auxiliary arrays) or the output alone; got a tuple of "
            f"length {len(result)}")
    out = result[0]
    aux = (<tuple>result)[1:]
    for a in aux:
        if a is out or device.may_share_memory(a, out):
            raise ValueError(f"{op.name}: an auxiliary array shares memory with the output; "
                             f"the kernel must return new arrays as aux")
        for i in range(n):
            x = <object>in_argv[i]
            if isinstance(x, TensorBase) and device.may_share_memory(a, (<TensorBase>x)._data):
                raise ValueError(f"{op.name}: an auxiliary array shares memory with input "
                                 f"{i}; the kernel must return new arrays as aux")
    return out, aux


class _OutputOnly:
    """An aux kernel as tg.compile records it: returns the output only."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.__name__ = getattr(kernel, "__name__", type(kernel).__name__)

    def __call__(self, *args, **kwargs):
        out = self.kernel(*args, **kwargs)
        return out[0] if type(out) is tuple else out


cdef void _check_params_need_no_grad(Op op, dict kwargs) except *:
    """Keyword arguments are parameters: no gradient flows into them. A tensor there that
    requires grad (tg.clip(x, a_min=lo)) would silently lose its gradient, on every device."""
    for key, value in kwargs.items():
        if isinstance(value, TensorBase) and (<TensorBase>value)._requires_grad:
            raise TypeError(
                f"{op.name}: keyword argument '{key}' is a tensor that requires grad, but "
                f"keyword arguments are parameters that get no gradient, so its gradient "
                f"would be silently lost; pass {key}.detach(), or write the computation with "
                f"ops that differentiate it")


cdef inline bint _is_complex_array(object arr):
    if type(arr) is cnp.ndarray:
        return cnp.PyArray_ISCOMPLEX(<cnp.ndarray>arr)
    return arr.dtype.kind == "c"


cdef object _complex_error(Op op, tuple inputs, object out):
    # NOTE: recording nothing would cut the graph silently (x + abs(x * 1j) would get the
    # gradient of x alone), and recording a rule written for real inputs would be silently
    # wrong (multiply's g * y needs conj(y)). Under no_grad, or for inputs that need no
    # grad, complex values are fine: only a graph through them is refused.
    return TypeError(
        f"{op.name}: the op has no complex gradient rule (it is not registered with "
        f"complex=True), and a complex value needs a gradient through it (result "
        f"{out.dtype}; {_describe(inputs)}); compute it under tg.no_grad() or on "
        f".detach()ed inputs, or keep real and imaginary parts as two real tensors")


# Note: [complex tensors]
# complex64/complex128 tensors may require grad, with PyTorch's convention: for a real loss
# L of z = x + iy, z.grad = dL/dx + i dL/dy, and a rule gets its output's cotangent in that
# convention (docs/autograd.md). Only ops registered with complex=True (Op.supports_complex)
# record a graph through complex values; any other op that meets one raises TypeError
# (_complex_error), so a rule written for real inputs is never applied silently. The
# input check costs one C test while no complex tensor has ever required grad
# (_complex_seen, set the first time one does). A real input of a complex op gets the real
# part of its complex gradient and a complex input a real gradient cast to complex
# (_fit_grad, _project_grad).

cdef inline void _note_complex(object arr):
    global _complex_seen
    if not _complex_seen and _is_complex_array(arr):
        _complex_seen = True


def complex_seen():
    """Whether a complex tensor has required grad in this process (see Note: [complex
    tensors]); forward mode and vmap ask it before checking their inputs."""
    return _complex_seen


cdef void _refuse_complex_inputs(Op op, PyObject** in_argv, Py_ssize_t n, object out) except *:
    """Raise _complex_error if an input of op (not complex=True) that gets a gradient is
    complex."""
    cdef Py_ssize_t i
    cdef TensorBase t
    for i in range(n):
        a = <object>in_argv[i]
        if isinstance(a, TensorBase):
            t = <TensorBase>a
            if t._requires_grad and (op._all_diff or (
                    op.differentiable is not None and i in op.differentiable)) \
                    and _is_complex_array(t._data):
                raise _complex_error(op, _tuple_of(in_argv, n), out)


cdef void _record_complex(Op op, PyObject** in_argv, Py_ssize_t n, dict params, TensorBase t,
                          tuple inputs) except *:
    """Record a complex result of op (needing grad), or refuse it (see Note: [complex
    tensors])."""
    if not op.supports_complex:
        raise _complex_error(op, inputs, t._data)
    _note_complex(t._data)
    _record(op, in_argv, n, params, t)


def check_complex_op(Op op, tuple inputs, out):
    """_refuse_complex_inputs / the complex-result refusal for Python callers (record_op,
    forward mode): raise TypeError if op is not complex=True and a complex value needs
    a gradient (or tangent) through it."""
    cdef Py_ssize_t i
    if op.supports_complex:
        return
    for i in range(len(inputs)):
        a = inputs[i]
        if isinstance(a, TensorBase) and _is_complex_array((<TensorBase>a)._data) and (
                (<TensorBase>a)._requires_grad or _has_tangents(<TensorBase>a)):
            raise _complex_error(op, inputs, out)
    if out is not None and _is_complex_array(out):
        raise _complex_error(op, inputs, out)


# Note: [views of a base modified in place]
# `v = a[0:2]; a.mul_(x)`: v shares a's storage, so it sees the new values -- but its node
# is getitem(a's *old* node), so backpropagating from v would differentiate the old value
# of a (a silent wrong gradient). As PyTorch does, such a view is rebased: every view
# remembers its parent, the view op and its parameters, and the epoch of its storage's
# version counter (`graph_epoch`, bumped by every in-place write that is recorded, i.e.
# gives the base a new node). When a stale view is next used with grad mode on -- as an
# op's input, as a root of backward, or through requires_grad/grad_fn/register_hook -- the
# view op is applied again to its (refreshed) parent and the view takes that node.
# In-place writes that are not recorded (no_grad, an optimizer's step) change values but not
# graphs, so they do not bump the epoch. A view made with grad mode off has no op to
# replay: using it after its base got a recorded write raises, as in PyTorch (the view's
# meaning -- detached or not -- is ambiguous). A recorded in-place write *into* a view is
# refused in _inplace, so a base is never changed through its views' graphs.

cdef void _mark_view(TensorBase t, TensorBase parent, Op op, bint replayable, dict params) except *:
    """t (just made by `op` from parent) aliases parent's storage. `replayable`: op can be
    applied again to rebuild t's graph (one tensor input, made with grad mode on)."""
    cdef VersionCounter vc = _get_vc(parent)
    t._vc = vc
    t._is_view = True
    if parent._view_parent is None and parent._is_view and parent._node is None \
            and not parent._requires_grad:
        # parent is a detached alias: its views are plain constants, like it
        return
    t._view_parent = parent
    t._view_op = op if replayable else None
    t._view_params = params
    t._view_epoch = vc.graph_epoch


cdef inline bint _is_stale_view(TensorBase t):
    return t._view_parent is not None and t._view_epoch != t._vc.graph_epoch


cdef void _refresh_view(TensorBase t) except *:
    """Rebuild the graph of a stale view t, and of its stale ancestors, from its base's
    current node (see Note: [views of a base modified in place]), whatever the grad mode:
    the graph is what the view *is*. (_apply_arrays calls it only with grad mode on: no
    graph is built otherwise, and the view is refreshed when one is.)"""
    cdef list chain
    cdef TensorBase v, fresh
    chain = []
    v = t
    while _is_stale_view(v):
        chain.append(v)
        v = v._view_parent
    for v in reversed(chain):
        if v._node is None and v._requires_grad:
            # a leaf the user made from a view (v.requires_grad_()): it stays that leaf
            v._view_epoch = v._vc.graph_epoch
            continue
        if v._view_op is None:
            raise RuntimeError(
                f"a view (shape {tuple(v._data.shape)}) was made while grad mode was off (or by "
                f"a view op with several tensor inputs), and its base was since modified in "
                f"place by an op that records a graph ('{v._vc.last_op}'): its graph cannot be "
                f"rebuilt. Take the view again after the in-place op, or make it with "
                f".detach() if it should not take part in the graph")
        token = GRAD_ENABLED.set(True)
        try:
            fresh = _apply(v._view_op, (v._view_parent,), v._view_params)
        finally:
            GRAD_ENABLED.reset(token)
        _take_graph(v, fresh)
        v._view_epoch = v._vc.graph_epoch


cdef void _take_graph(TensorBase v, TensorBase fresh) except *:
    """v takes fresh's place in the graph; hooks and retain_grad on v's old node follow."""
    cdef Node old = v._node
    cdef int old_nr = v._output_nr
    v._node = fresh._node
    v._output_nr = fresh._output_nr
    v._requires_grad = fresh._requires_grad
    if _fwd_active:
        v._tangents = fresh._tangents
    if old is None or v._node is None:
        return
    if old.hooks is not None and old_nr in old.hooks:
        for hook in old.hooks[old_nr]:
            v._node.register_hook(hook, v._output_nr)
    if v._retains_grad:
        v._retains_grad = False
        v.retain_grad()


cdef inline void _refresh_if_stale(TensorBase t) except *:
    if _is_stale_view(t):
        _refresh_view(t)


# Note: [the graph holds no user-visible tensors]
# A node refers to what produced its inputs (Nodes, or a LeafRef that reaches a leaf
# weakly) and to SavedTensor records of the values its rule reads (array, version counter,
# producer) -- never to Tensor objects, which in-place ops rebind and .grad links back to.
# So the graph is a DAG that no user object is part of: it is freed by reference counting
# alone (also in the create_graph case that PyTorch documents as a leak), and its nodes and
# tuples need not be tracked by the cyclic garbage collector, whose passes took a third of
# the forward time. A node is tracked again when it gets something user-defined that could
# close a cycle (a tensor hook); FunctionNodes (user ctx objects) always are.

@cython.no_gc
@cython.freelist(64)
cdef class LeafRef:
    """The graph's handle on a leaf tensor: weak, so a graph never keeps a leaf alive."""
    cdef object ref          # weakref to the leaf Tensor

    cdef TensorBase get(self):
        t = self.ref()
        return None if t is None else <TensorBase>t

    def __repr__(self):
        return f"<leaf {self.ref()!r}>"


cdef LeafRef _leaf_ref_of(TensorBase t):
    cdef LeafRef r = t._leaf_ref
    if r is None:
        r = LeafRef.__new__(LeafRef)
        r.ref = weakref.ref(t)
        t._leaf_ref = r
    return r


@cython.no_gc
@cython.freelist(64)
cdef class SavedTensor:
    """A value a node's rule reads, saved without holding the Tensor object."""
    cdef readonly object data        # the array
    cdef Device device
    cdef VersionCounter vc           # the storage's version counter
    cdef long long version           # its value when saved
    cdef Node node                   # the producer (None for leaves and constants)
    cdef int output_nr
    cdef bint requires_grad          # of the saved tensor (rules ask tg.needs_grad)
    cdef LeafRef leaf                # set for a leaf that requires grad
    cdef object tangents             # the tensor's _tangents dict (forward mode), else None

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    cdef object unpack(self, bint recording):
        """The value as a Tensor for a rule: the leaf itself, or a tensor connected to the
        producer when recording (create_graph), so the rule is differentiable."""
        cdef TensorBase t
        if self.leaf is not None:
            t = self.leaf.get()
            if t is not None and t._data is self.data:
                return t
        t = _new_tensor(self.data, self.device)
        t._vc = self.vc
        # NOTE: requires_grad even when not recording: rules skip the gradients of inputs
        # that do not need one (tg.needs_grad), so it must say what the saved tensor said.
        t._requires_grad = self.requires_grad
        t._tangents = self.tangents
        if self.node is not None and recording:
            t._node = self.node
            t._output_nr = self.output_nr
        return t


cdef SavedTensor _save(TensorBase t):
    cdef SavedTensor rec = SavedTensor.__new__(SavedTensor)
    rec.data = t._data
    rec.device = t._device
    rec.vc = _get_vc(t)
    rec.version = rec.vc.value
    rec.requires_grad = t._requires_grad
    if _fwd_active:
        if t._tangents is None:
            # NOTE: the dict is shared: tangents the dispatcher attaches to t after this
            # (t is an op's output being recorded) are seen by the saved value too.
            t._tangents = {}
        rec.tangents = t._tangents
    if t._node is not None:
        rec.node = t._node
        rec.output_nr = t._output_nr
    elif t._requires_grad:
        rec.leaf = _leaf_ref_of(t)
    return rec


cdef inline object _edge_of(TensorBase t):
    return t._node if t._node is not None else _leaf_ref_of(t)


cdef inline void _note_output(OpNode node, object data) except *:
    cdef cnp.ndarray arr
    cdef int k, nd
    if type(data) is cnp.ndarray and cnp.PyArray_NDIM(<cnp.ndarray>data) <= 8:
        arr = <cnp.ndarray>data
        nd = cnp.PyArray_NDIM(arr)
        for k in range(nd):
            node.out_dims[k] = cnp.PyArray_DIMS(arr)[k]
        node.out_ndim = nd
        node.out_dtype = <object>cnp.PyArray_DESCR(arr)
    else:
        node.out_ndim = -1
        node.out_shape_tuple = tuple(data.shape)
        node.out_dtype = data.dtype


cdef inline bint _gets_grad(Op op, object a, Py_ssize_t i):
    """Whether input i (the object a) gets an edge of the node being recorded."""
    return isinstance(a, TensorBase) and (<TensorBase>a)._requires_grad and (
        op._all_diff or i in op.differentiable)


cdef void _record(Op op, PyObject** inputs, Py_ssize_t n, dict params, TensorBase out) except *:
    cdef OpNode node = OpNode.__new__(OpNode)
    cdef Py_ssize_t i
    cdef tuple edges = PyTuple_New(n)
    cdef tuple saved = PyTuple_New(n)
    cdef list nrs = None
    cdef TensorBase t
    cdef object edge, item
    for i in range(n):
        a = <object>inputs[i]
        edge = None
        item = a
        if isinstance(a, TensorBase):
            t = <TensorBase>a
            if t._requires_grad and (op._all_diff or i in op.differentiable):
                edge = _edge_of(t)
                if t._output_nr != 0:
                    if nrs is None:
                        nrs = [0] * n
                    nrs[i] = t._output_nr
            if op.save_for_other:       # see Note: [gradient fast paths]
                item = _save(t) if _gets_grad(op, <object>inputs[1 - i], 1 - i) else _meta_of(t)
            else:
                item = _save(t) if op.saves_input(i) else _meta_of(t)
        Py_INCREF(edge)
        PyTuple_SET_ITEM(edges, i, edge)
        Py_INCREF(item)
        PyTuple_SET_ITEM(saved, i, item)
    if not _fwd_active:
        # see Note: [the graph holds no user-visible tensors]; a node recorded in a forward
        # level holds tangents (Tensors), which can reach it again: it stays tracked
        PyObject_GC_UnTrack(edges)
        PyObject_GC_UnTrack(saved)
        PyObject_GC_UnTrack(node)
    node.name = op.name
    node.op = op
    node.edges = edges
    node.edge_nrs = None if nrs is None else tuple(nrs)
    node.inputs = saved
    node.params = params
    node.n_outputs = 1
    node.device = out._device
    _note_output(node, out._data)
    if op.save_ans:
        node.ans_data = out._data
        node.ans_vc = _get_vc(out)
        node.ans_version = node.ans_vc.value
        if _fwd_active:
            if out._tangents is None:
                out._tangents = {}
            node.ans_tangents = out._tangents
    if _anomaly_on():
        node.trace = traceback.extract_stack()
    out._node = node
    out._output_nr = 0
    out._requires_grad = True


# ---------------------------------------------------------------------------------------
# Nodes
# ---------------------------------------------------------------------------------------

@cython.trashcan(True)
cdef class Node:
    """An entry of the tape: what one op needs to send gradients to its inputs."""

    def __repr__(self):
        return f"<{self.name} node>"

    @property
    def next_functions(self):
        """(node or leaf tensor, output_nr) per input, like PyTorch's
        grad_fn.next_functions (None where the input gets no gradient)."""
        nrs = self.edge_nrs or (0,) * len(self.edges)
        edges = [(<LeafRef>e).get() if isinstance(e, LeafRef) else e for e in self.edges]
        return tuple(zip(edges, nrs))

    @property
    def saved_released(self):
        return self.released

    @property
    def output_meta(self):
        """(shape, dtype) of each output, as the forward computed them."""
        return ()

    def saved_arrays(self):
        """The arrays this node keeps alive for its VJP (for memory reports)."""
        out = []
        if self.inputs is not None:
            for a in self.inputs:
                if isinstance(a, SavedTensor):
                    out.append((<SavedTensor>a).data)
        return out

    def saved_versions(self):
        """(version counter, version when saved, input index, shape, dtype) of each value
        this node's rule reads: what a recomputation of it must find unchanged
        (tg.checkpoint). Holds no array."""
        out = []
        cdef SavedTensor rec
        if self.inputs is not None:
            for i, a in enumerate(self.inputs):
                if isinstance(a, SavedTensor):
                    rec = <SavedTensor>a
                    out.append((rec.vc, rec.version, i, tuple(rec.data.shape), rec.data.dtype))
        return out

    def register_hook(self, hook, int output_nr=0):
        # A hook is user code that may refer back to the tensor: let the cycle collector see
        # this node from now on (see Note: [the graph holds no user-visible tensors]).
        if not PyObject_GC_IsTracked(self):
            PyObject_GC_Track(self)
        if self.hooks is None:
            self.hooks = {}
        self.hooks.setdefault(output_nr, []).append(hook)
        return RemovableHandle(self.hooks[output_nr], hook)

    cdef tuple _run_vjp(self, list grads):
        raise NotImplementedError

    cdef void release(self):
        self.inputs = None
        self.released = True

    cdef void _check_saved(self) except *:
        if self.released:
            raise RuntimeError(
                f"Trying to backward through the graph a second time: the values '{self.name}' "
                f"saved for its gradient were already freed by an earlier backward(). "
                f"Pass retain_graph=True to the first backward() (or tg.grad) if you need to "
                f"backward through the same graph again.")
        if self.inputs is None:
            return
        cdef Py_ssize_t i
        cdef SavedTensor rec
        for i in range(len(self.inputs)):
            a = self.inputs[i]
            if not isinstance(a, SavedTensor):
                continue
            rec = <SavedTensor>a
            if rec.vc.value != rec.version:
                raise RuntimeError(
                    f"one of the values needed for gradient computation has been modified by an "
                    f"in-place operation: input {i} of '{self.name}' (shape "
                    f"{tuple(rec.data.shape)}, {rec.data.dtype}) is at version {rec.vc.value}; "
                    f"'{self.name}' saved it at version {rec.version}"
                    + _modified_note(rec.vc) + ". Use an out-of-place op (or .clone()) before "
                    f"modifying it." + _creation_note(self) + _modified_trace(rec.vc))


cdef str _modified_note(VersionCounter vc):
    if vc.last_op is None:
        return ""
    return f", and '{vc.last_op}' modified it in place last"


cdef str _modified_trace(VersionCounter vc):
    if vc.last_op is None or vc.last_trace is None:
        return ""
    return "\n'" + vc.last_op + "' was called at:\n" + "".join(
        traceback.format_list(_user_frames(vc.last_trace)[-3:]))


cdef str _creation_note(Node node):
    if node.trace is None:
        return " (Run under tg.detect_anomaly() to see where it was created.)"
    return "\n'" + node.name + "' was created at:\n" + "".join(
        traceback.format_list(_user_frames(node.trace)[-3:]))


def _user_frames(trace):
    """The frames of user code: tapegrad's own (and its plugins') are left out."""
    def is_library(frame):
        name = frame.filename.replace("\\", "/")
        if "/tests/" in name or "/examples/" in name:
            return False
        return "/tapegrad/" in name or "/tapegrad_" in name or "/pluggy/" in name
    frames = [f for f in trace if not is_library(f)]
    return frames[-8:] or list(trace)[-8:]


cdef class OpNode(Node):

    @property
    def output_meta(self):
        if self.out_ndim < 0:
            shape = self.out_shape_tuple
        else:
            shape = tuple(self.out_dims[k] for k in range(self.out_ndim))
        return ((shape, self.out_dtype),)

    cdef void release(self):
        self.inputs = None
        self.ans_data = None
        self.aux_data = None
        self.released = True

    def saved_arrays(self):
        out = Node.saved_arrays(self)
        if self.ans_data is not None:
            out.append(self.ans_data)
        if self.aux_data is not None:
            out.extend(self.aux_data)
        return out

    cdef tuple _run_vjp(self, list grads):
        if self.released:
            self._check_saved()         # raises
        cdef Op op = self.op
        if op.grad_passthrough is not None and _passes_through(self, op.grad_passthrough):
            return _passthrough_grads(op.grad_passthrough, grads[0])
        cdef bint recording = _grad_enabled()
        cdef tuple fast
        if op.vjp_op is not None and not recording and not _fwd_active:
            fast = _vjp_by_op(self, op.vjp_op, grads[0])    # see Note: [gradient fast paths]
            if fast is not None:
                return fast
        if op.grad_times_number and not _fwd_active:
            fast = _grad_times_number(self, grads[0])
            if fast is not None:
                return fast
        if op.vjp_matmul_2d and not recording and not _fwd_active:
            fast = _matmul_2d_vjp(self, grads[0])      # see Note: [gradient fast paths]
            if fast is not None:
                return fast
        ans = None
        if op.save_ans:
            if self.ans_vc.value != self.ans_version:
                raise RuntimeError(
                    f"one of the values needed for gradient computation has been modified by an "
                    f"in-place operation: the output of '{self.name}' (shape "
                    f"{tuple(self.ans_data.shape)}, {self.ans_data.dtype}) is at version "
                    f"{self.ans_vc.value}; '{self.name}' saved it at version {self.ans_version}"
                    + _modified_note(self.ans_vc) + ". Use an out-of-place op (or .clone()) "
                    f"before modifying it." + _creation_note(self) + _modified_trace(self.ans_vc))
            ans_t = _new_tensor(self.ans_data, self.device)
            ans_t._vc = self.ans_vc
            ans_t._tangents = self.ans_tangents
            if recording:
                # create_graph: `ans` depends on the inputs through this very node.
                ans_t._node = self
                ans_t._requires_grad = True
            ans = ans_t
        if _fwd_active and not op.twice_differentiable:
            _refuse_forward_through_rule(self, grads[0], ans)
        try:
            if op.n_aux:
                args = _vjp_args(self, grads[0], ans, self.inputs, recording)
                # NOTE: in forward mode the aux arrays are constants without tangents: the
                # rule must recompute them (as when recorded)
                res = op.vjp(*args, aux=self._aux_tensors(recording or _fwd_active),
                             **self.params)
            elif self.params or len(self.inputs) > _RULE_ARGS - 2:
                args = _vjp_args(self, grads[0], ans, self.inputs, recording)
                res = op.vjp(*args, **self.params)
            else:
                res = _call_rule(op.vjp, self, grads[0], ans, self.inputs, recording)
        except Exception as exc:
            add_note(exc, f"(while computing the gradient of '{self.name}')")
            raise
        return _check_arity(self, res)


    cdef object _aux_tensors(self, bint recording):
        """The aux arrays as constant tensors, or None when the rule must recompute
        (recorded: create_graph or tg.compile; see Note: [auxiliary outputs])."""
        if recording or self.aux_data is None:
            return None
        return tuple(_new_tensor(a, self.device) for a in self.aux_data)


cdef inline bint _real_ndarray(object a):
    return type(a) is cnp.ndarray and not cnp.PyArray_ISCOMPLEX(<cnp.ndarray>a)


cdef tuple _vjp_by_op(OpNode node, Op bop, object g):
    """`(bop(g, second),)` as the rule would return it, by a direct call of bop's kernel
    on the two arrays; None where the rule must run instead (see Note: [gradient fast
    paths]: the caller has checked recording and forward levels)."""
    cdef TensorBase gt
    cdef SavedTensor rec
    cdef Device device
    cdef object second, item
    cdef PyObject* argv[2]
    if not isinstance(g, TensorBase) or node.params or _n_read_logs or _traced():
        return None
    gt = <TensorBase>g
    device = gt._device
    if node.op.vjp_op_reads_ans:
        if node.ans_vc is None or node.ans_vc.value != node.ans_version or node.device is not device:
            return None                 # the rule raises the in-place error
        second = node.ans_data
    else:
        item = <object>PyTuple_GET_ITEM(node.inputs, 0)
        if type(item) is not SavedTensor:
            return None
        rec = <SavedTensor>item
        if rec.vc.value != rec.version or rec.device is not device:
            return None
        second = rec.data
    if not (_real_ndarray(gt._data) and _real_ndarray(second)):
        return None
    kernel = bop.kernels.get(device.name)
    if kernel is None:
        return None
    argv[0] = <PyObject*>gt._data       # borrowed: gt and the node hold them
    argv[1] = <PyObject*>second
    try:
        out = PyObject_Vectorcall(kernel, argv, 2, NULL)
    except (ValueError, TypeError, IndexError):
        return None                     # the rule's op call raises it with the op's context
    return (_kernel_result_tensor(out, device),)


cdef tuple _grad_times_number(OpNode node, object g):
    """multiply's gradients when one input is a Python number c: `g * c` for the tensor
    input, None for the number (see Note: [gradient fast paths]); None where the rule
    must run (a complex g, a tensor on both sides)."""
    cdef tuple edges = node.edges
    cdef Py_ssize_t k               # the tensor input
    cdef object c
    if not isinstance(g, TensorBase) or not _real_ndarray((<TensorBase>g)._data):
        return None
    if PyTuple_GET_ITEM(edges, 1) == <PyObject*>None and PyTuple_GET_ITEM(edges, 0) != <PyObject*>None:
        k = 0
    elif PyTuple_GET_ITEM(edges, 0) == <PyObject*>None and PyTuple_GET_ITEM(edges, 1) != <PyObject*>None:
        k = 1
    else:
        return None
    c = <object>PyTuple_GET_ITEM(node.inputs, 1 - k)
    if not (type(c) is float or type(c) is int):
        return None
    gk = None
    if node.op is _op_multiply and _nothing_records():
        gk = _times_number_kernel(<TensorBase>g, c)
    if gk is not None:
        return (gk, None) if k == 0 else (None, gk)
    try:
        gk = _binary_op(_op_multiply, "multiply", g, c)
    except Exception as exc:
        add_note(exc, f"(while computing the gradient of '{node.name}')")
        raise
    return (gk, None) if k == 0 else (None, gk)



cdef inline bint _plain_float_matrix(object a, int type_num):
    """An exact ndarray (no subclass), 2-D, of NumPy type `type_num`."""
    return (type(a) is cnp.ndarray and cnp.PyArray_NDIM(<cnp.ndarray>a) == 2
            and cnp.PyArray_TYPE(<cnp.ndarray>a) == type_num)


cdef inline bint _saved_needs_grad(SavedTensor rec):
    """tg.needs_grad of the tensor rec.unpack() gives the rule: the leaf itself (its
    requires_grad now) where it still holds the saved array, else the saved flag."""
    cdef TensorBase t
    if rec.leaf is not None:
        t = rec.leaf.get()
        if t is not None and t._data is rec.data:
            return t._requires_grad
    return rec.requires_grad


cdef tuple _matmul_2d_vjp(OpNode node, object g):
    """matmul's gradients `(matmul(g, y.T), matmul(x.T, g))` for 2-D float ndarrays,
    as its rule's plain branch computes them; None where the rule must run (see Note:
    [gradient fast paths]: the caller has checked recording and forward levels)."""
    cdef TensorBase gt
    cdef SavedTensor rx, ry
    cdef Device device
    cdef object item_x, item_y, g0, gx = None, gy = None
    cdef int tn
    if not isinstance(g, TensorBase) or _n_read_logs or _traced():
        return None
    gt = <TensorBase>g
    if gt._tangents:
        return None
    g0 = gt._data
    if type(g0) is not cnp.ndarray:
        return None
    tn = cnp.PyArray_TYPE(<cnp.ndarray>g0)
    if (tn != cnp.NPY_DOUBLE and tn != cnp.NPY_FLOAT) or cnp.PyArray_NDIM(<cnp.ndarray>g0) != 2:
        return None
    item_x = <object>PyTuple_GET_ITEM(node.inputs, 0)
    item_y = <object>PyTuple_GET_ITEM(node.inputs, 1)
    if type(item_x) is not SavedTensor or type(item_y) is not SavedTensor:
        return None
    rx = <SavedTensor>item_x
    ry = <SavedTensor>item_y
    device = gt._device
    if (rx.vc.value != rx.version or ry.vc.value != ry.version      # the rule raises
            or rx.device is not device or ry.device is not device
            or rx.tangents or ry.tangents
            or not _plain_float_matrix(rx.data, tn) or not _plain_float_matrix(ry.data, tn)):
        return None
    # matmul_2d: the op's CPU kernel itself (Note: [matmul through a transposed copy] in
    # _array_kernels.pyx), so the rule's products and bits
    if _saved_needs_grad(rx):
        gx = _kernel_result_tensor(
            matmul_2d(g0, cnp.PyArray_Transpose(<cnp.ndarray>ry.data, NULL), None), device)
    if _saved_needs_grad(ry):
        gy = _kernel_result_tensor(
            matmul_2d(cnp.PyArray_Transpose(<cnp.ndarray>rx.data, NULL), g0, None), device)
    return (gx, gy)


cdef object _times_number_kernel(TensorBase g, object c):
    """`g * c` for a float64 or float32 ndarray g and a float or int c, as _apply_arrays
    computes it when nothing records (the multiply kernel, a ufunc, on g's array and c
    as the 0-d array of Note: [Python scalars as 0-d arrays]); None: take the operator."""
    cdef object gd = g._data
    cdef int tn
    cdef PyObject* argv[2]
    if type(gd) is not cnp.ndarray:
        return None
    tn = cnp.PyArray_TYPE(<cnp.ndarray>gd)
    if tn != cnp.NPY_DOUBLE and tn != cnp.NPY_FLOAT:
        return None
    kernel = _op_multiply.kernels.get(g._device.name)
    if type(kernel) is not _ufunc_type:
        return None
    z = _scalar_operand(c, tn)
    if z is None:
        return None
    argv[0] = <PyObject*>gd             # borrowed: g and the locals hold them
    argv[1] = <PyObject*>z
    out = PyObject_Vectorcall(kernel, argv, 2, NULL)
    return _kernel_result_tensor(out, g._device)


cdef bint _passes_through(Node node, tuple passthrough):
    """Whether every input of `node` that gets a gradient is a pass-through one."""
    cdef tuple edges = node.edges
    cdef Py_ssize_t i
    if len(edges) != len(passthrough):
        return False
    for i in range(len(edges)):
        if PyTuple_GET_ITEM(edges, i) != <PyObject*>None and not passthrough[i]:
            return False
    return True


cdef tuple _passthrough_grads(tuple passthrough, object g):
    """The rule's result when every input that gets a gradient passes `g` through (see
    Note: [gradient fast paths]); None for the others (they get none)."""
    cdef Py_ssize_t n = len(passthrough), i
    cdef tuple out = PyTuple_New(n)
    cdef object item
    for i in range(n):
        item = g if passthrough[i] else None
        Py_INCREF(item)
        PyTuple_SET_ITEM(out, i, item)
    return out


cdef void _refuse_forward_through_rule(OpNode node, object g, object ans) except *:
    """A rule registered twice_differentiable=False computes on arrays: run inside a
    forward level with tangents on what it reads, it would drop them silently."""
    cdef bint dual = (isinstance(g, TensorBase) and _has_tangents(<TensorBase>g)) or (
        ans is not None and _has_tangents(<TensorBase>ans))
    cdef list entries = [g._tangents if isinstance(g, TensorBase) else None,
                         ans._tangents if ans is not None else None]
    for item in node.inputs:
        if type(item) is SavedTensor and (<SavedTensor>item).tangents:
            dual = True
            entries.append((<SavedTensor>item).tangents)
    if dual and _LEVEL_HOOKS is not None:
        _LEVEL_HOOKS.check_array_rule(node.name, entries)
    if dual:
        raise RuntimeError(
            f"forward mode through the gradient of '{node.name}' is not supported: its rule "
            f"is registered with twice_differentiable=False (it computes on arrays, not with "
            f"tapegrad ops), so the tangents of its inputs cannot be pushed through it "
            f"(forward over reverse, tg.hessian's forward mode); use reverse over reverse "
            f"(tg.hessian(f, x, outer_jacobian_strategy='reverse-mode'))")


cdef class FunctionNode(Node):

    @property
    def output_meta(self):
        return tuple((shape, dtype) for shape, dtype, _device in self.out_meta)

    def saved_arrays(self):
        """The arrays of the tensors the Function saved with ctx.save_for_backward."""
        if self.released or self.ctx is None:
            return []
        return [(<TensorBase>t)._data for t in getattr(self.ctx, "_saved", ())
                if isinstance(t, TensorBase)]

    cdef void release(self):
        self.inputs = None
        self.released = True
        if self.ctx is not None:
            self.ctx._release()

    cdef tuple _run_vjp(self, list grads):
        self._check_saved()
        cdef Py_ssize_t k
        for k in range(self.n_outputs):
            if grads[k] is None:
                shape, dtype, dev = self.out_meta[k]
                grads[k] = _new_tensor((<Device>dev).zeros(shape, dtype), dev)
        if _traced():
            _TRACER.function_backward(self.name, self.ctx)   # tg.compile may refuse it
        try:
            res = self.backward_fn(self.ctx, *grads)
        except Exception as exc:
            add_note(exc, f"(while computing the gradient of '{self.name}')")
            raise
        return _check_arity(self, res)


cdef tuple _vjp_args(Node node, object g, object ans, tuple inputs, bint recording):
    """(g, ans, *inputs) in one allocation, checking that no saved value was modified."""
    cdef Py_ssize_t n = len(inputs), i
    cdef tuple args = PyTuple_New(n + 2)
    cdef object item
    cdef SavedTensor rec
    Py_INCREF(g)
    PyTuple_SET_ITEM(args, 0, g)
    Py_INCREF(ans)
    PyTuple_SET_ITEM(args, 1, ans)
    for i in range(n):
        item = <object>PyTuple_GET_ITEM(inputs, i)
        if type(item) is SavedTensor:
            rec = <SavedTensor>item
            if rec.vc.value != rec.version:
                node._check_saved()     # raises, saying which input and where
            item = rec.unpack(recording)
        Py_INCREF(item)
        PyTuple_SET_ITEM(args, i + 2, item)
    return args


cdef enum:
    _RULE_ARGS = 8


cdef object _call_rule(object rule, Node node, object g, object ans, tuple inputs,
                       bint recording):
    """rule(g, ans, *inputs) for a rule without parameters, as _vjp_args would build
    its arguments, passed in a C array (vectorcall) instead of a new tuple."""
    cdef PyObject* argv[_RULE_ARGS]
    cdef Py_ssize_t n = len(inputs), i, held = 0
    cdef object item
    cdef SavedTensor rec
    argv[0] = <PyObject*>g          # borrowed: the caller holds both
    argv[1] = <PyObject*>ans
    try:
        for i in range(n):
            item = <object>PyTuple_GET_ITEM(inputs, i)
            if type(item) is SavedTensor:
                rec = <SavedTensor>item
                if rec.vc.value != rec.version:
                    node._check_saved()     # raises, saying which input and where
                item = rec.unpack(recording)
            Py_INCREF(item)
            argv[i + 2] = <PyObject*>item
            held = i + 1
        return PyObject_Vectorcall(rule, argv, n + 2, NULL)
    finally:
        for i in range(held):
            Py_XDECREF(argv[i + 2])


cdef tuple _check_arity(Node node, object res):
    """A rule returns one gradient (or None) per input; a lone tensor for one input."""
    cdef tuple out
    if type(res) is tuple:
        out = <tuple>res
    elif isinstance(res, (tuple, list)):
        out = tuple(res)
    else:
        out = (res,)
    if len(out) != len(node.edges):
        raise RuntimeError(
            f"the gradient rule of '{node.name}' returned {len(out)} gradients, but the op has "
            f"{len(node.edges)} inputs (return one per input, None where there is no gradient)")
    return out


cdef tuple _reduced_shape(tuple g_shape, tuple x_shape):
    """The shape a gradient of shape g_shape is summed down to on its way to x_shape: axes
    that broadcasting added or stretched (x has 1) are summed; axes where g has 1 and x more
    are kept for a broadcast afterwards."""
    cdef Py_ssize_t lead = len(g_shape) - len(x_shape), k
    if lead < 0:
        return g_shape
    out = []
    for k in range(len(x_shape)):
        out.append(1 if x_shape[k] == 1 else g_shape[lead + k])
    return tuple(out)


cdef inline bint _fits(object ga, object x):
    """Whether gradient array `ga` already has the shape and dtype of input record `x` (a
    SavedTensor or TensorMeta), decided in C for NumPy arrays; False when unsure."""
    cdef cnp.ndarray g, xa
    cdef tuple shape
    cdef int k, nd
    if type(ga) is not cnp.ndarray:
        return False
    g = <cnp.ndarray>ga
    nd = cnp.PyArray_NDIM(g)
    if type(x) is SavedTensor:
        if type((<SavedTensor>x).data) is not cnp.ndarray:
            return False
        xa = <cnp.ndarray>(<SavedTensor>x).data
        if cnp.PyArray_NDIM(xa) != nd:
            return False
        for k in range(nd):
            if cnp.PyArray_DIMS(xa)[k] != cnp.PyArray_DIMS(g)[k]:
                return False
        return cnp.PyArray_DESCR(xa) == cnp.PyArray_DESCR(g) or \
            cnp.PyArray_EquivTypes(<object>cnp.PyArray_DESCR(xa), <object>cnp.PyArray_DESCR(g))
    if type(x) is TensorMeta:
        shape = (<TensorMeta>x).shape
        if len(shape) != nd:
            return False
        for k in range(nd):
            if <Py_ssize_t>shape[k] != cnp.PyArray_DIMS(g)[k]:
                return False
        return <void*>(<TensorMeta>x).dtype == <void*>cnp.PyArray_DESCR(g)
    return False


cdef object _fit_grad(Node node, Py_ssize_t i, object gi, object x):
    cdef TensorBase gt
    if isinstance(gi, TensorBase) and _fits((<TensorBase>gi)._data, x):
        return gi
    if isinstance(x, SavedTensor):
        x_shape = (<SavedTensor>x).data.shape
        x_dtype = (<SavedTensor>x).data.dtype
    elif isinstance(x, TensorMeta):
        x_shape = (<TensorMeta>x).shape
        x_dtype = (<TensorMeta>x).dtype
    else:
        x_shape = x.shape
        x_dtype = x.dtype
    if isinstance(gi, TensorBase):
        gt = <TensorBase>gi
        if gt._data.shape == x_shape and (gt._data.dtype is x_dtype or gt._data.dtype == x_dtype):
            return gt
    else:
        dev = _DEFAULT_DEVICE
        if isinstance(x, SavedTensor):
            dev = (<SavedTensor>x).device
        elif isinstance(x, TensorMeta):
            dev = (<TensorMeta>x).device
        gt = _new_tensor((<Device>dev).asarray(gi, x_dtype), dev)
    shape = gt._data.shape
    if shape != x_shape:
        try:
            reduced = _reduced_shape(shape, x_shape)
            if reduced != shape:
                gt = _op_sum_to_shape(gt, shape=reduced)
            if reduced != x_shape:
                gt = _op_broadcast_to(gt, shape=x_shape)
        except (ValueError, RuntimeError) as exc:
            raise RuntimeError(
                f"the gradient rule of '{node.name}' returned a gradient of shape {shape} for "
                f"input {i}, which has shape {x_shape}, and it does not reduce or broadcast "
                f"to it") from exc
    if gt._data.dtype != x_dtype:
        gt = _project_grad(gt, x_dtype)
    return gt


cdef object _project_grad(TensorBase g, object dtype):
    """Gradient g converted to its input's dtype: a real input gets the real part of a
    complex gradient (NumPy's real -> complex promotion is R-linear: its adjoint is Re), a
    complex input a real gradient as complex (see Note: [complex tensors])."""
    if _is_complex_array(g._data) and np.dtype(dtype).kind != "c":
        g = _apply(_lookup("real"), (g,), _NO_PARAMS)
        if g._data.dtype == dtype:
            return g
    return _op_astype(g, dtype=dtype)


# ---------------------------------------------------------------------------------------
# Hooks
# ---------------------------------------------------------------------------------------

class RemovableHandle:
    """Returned by register_hook; `handle.remove()` unregisters the hook."""

    def __init__(self, hooks, hook):
        self._hooks = hooks
        self._hook = hook

    def remove(self):
        try:
            self._hooks.remove(self._hook)
        except ValueError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


cdef object _run_hooks(list hooks, object g):
    if hooks and _traced() and _TRACER.hook_ran(hooks[0]):
        # tg.compile's own backward over placeholder gradients (it records the backward
        # program): a hook must not see those; the signature then runs eagerly anyway.
        return g
    for hook in list(hooks):
        r = hook(g)
        if r is not None:
            if not isinstance(r, TensorBase):
                raise TypeError(f"a tensor hook must return a Tensor or None, got {type(r).__name__}")
            if (<TensorBase>r)._data.shape != (<TensorBase>g)._data.shape:
                raise ValueError(
                    f"a tensor hook returned a gradient of shape {tuple((<TensorBase>r)._data.shape)}"
                    f" for a gradient of shape {tuple((<TensorBase>g)._data.shape)}")
            # NOTE: a float32 leaf must never get a float64 .grad (PyTorch raises too).
            if (<TensorBase>r)._data.dtype != (<TensorBase>g)._data.dtype:
                raise TypeError(
                    f"a tensor hook returned a gradient of dtype {(<TensorBase>r)._data.dtype}"
                    f" for a gradient of dtype {(<TensorBase>g)._data.dtype}; return "
                    f"one of the same dtype (cast it with .astype(g.dtype))")
            if (<TensorBase>r)._device is not (<TensorBase>g)._device:
                raise RuntimeError(
                    f"a tensor hook returned a gradient on {(<TensorBase>r)._device.name} for a "
                    f"gradient on {(<TensorBase>g)._device.name}; move it with .to()")
            g = r
    return g


# ---------------------------------------------------------------------------------------
# The backward traversal
# ---------------------------------------------------------------------------------------

cdef object _detached_copy(TensorBase g):
    out = g._device.copy(g._data)
    if _traced():
        _TRACER.kernel(g._device.copy, (g._data,), None, out, g._device, None)
    return _new_tensor(out, g._device)


def accumulate_grad(TensorBase t, TensorBase g, bint fresh):
    """Add g into t.grad the way backward() does (tg.compile's replay of that step)."""
    _accumulate_grad(t, g, False, fresh)


cdef void _accumulate_grad(TensorBase t, object g, bint create_graph, bint fresh) except *:
    """Add g into t.grad. The first gradient is stored as a private copy unless `fresh`."""
    global _TRACER
    cdef object tracer = _TRACER
    if not create_graph and _traced():
        # tg.compile replays this whole step (it depends on whether .grad is None then).
        # NOTE: only the recording thread gets here (see [the tracer belongs to the
        # recording thread]), so emptying the slot hides nothing from another thread.
        _TRACER = None
        try:
            _accumulate_grad(t, g, False, fresh)
        finally:
            _TRACER = tracer
        tracer.grad_accumulated(t, (<TensorBase>g)._data, fresh, (<TensorBase>t._grad)._data)
        return
    cdef TensorBase cur
    if _fwd_active and (_has_tangents(<TensorBase>g) or (
            t._grad is not None and _has_tangents(<TensorBase>t._grad))):
        create_graph = True         # keep the tangents (see _sum_grads)
    with _grad_lock:
        if t._grad is None:
            if create_graph:
                t._grad = g
            else:
                t._grad = g if fresh else _detached_copy(<TensorBase>g)
        else:
            if create_graph:
                t._grad = _op_add(t._grad, g)
            else:
                cur = <TensorBase>t._grad
                t._grad = _new_tensor(_raw_add(cur, <TensorBase>g), cur._device)


cdef bint _unshared(object g):
    """Whether gradient `g`, which the caller holds `refs` references to and checked that
    nothing else does, is a plain tensor over a NumPy array that owns its memory and that
    only it references. Such a gradient (a rule's fresh result) becomes a leaf's .grad as
    it is; any other is copied first, since the user or another gradient might alias it
    (add's rule passes g to both inputs; a hook may keep what it returns)."""
    cdef TensorBase t
    if type(g) is not _TensorClass:
        return False
    t = <TensorBase>g
    if t._requires_grad or t._node is not None or t._vc is not None or t._hooks is not None:
        return False
    return type(t._data) is cnp.ndarray and tapegrad_refcnt(<PyObject*>t._data) == 1 \
        and cnp.PyArray_BASE(<cnp.ndarray>t._data) == NULL \
        and cnp.PyArray_CHKFLAGS(<cnp.ndarray>t._data, cnp.NPY_ARRAY_OWNDATA | cnp.NPY_ARRAY_WRITEABLE)


@cython.no_gc
cdef class _LeafSlot:
    """What one backward knows about one leaf (leaves may be shared between threads, so
    their traversal state lives in a dict of the call, not on the tensor)."""
    cdef Py_ssize_t deps     # edges into this leaf from nodes that have not run
    cdef object g            # gradient summed so far
    cdef bint fresh          # g is a buffer this traversal allocated


cdef object _sum_grads(object prev, object g, bint create_graph, bint prev_fresh):
    """prev + g. Returns the sum: prev itself (updated in place) when prev_fresh, else a
    new buffer that the caller then owns."""
    cdef TensorBase cur
    if create_graph or (_fwd_active and (_has_tangents(<TensorBase>prev)
                                         or _has_tangents(<TensorBase>g))):
        # NOTE: forward mode: the raw add below would drop the gradients' tangents
        return _apply(_op_add, (prev, g), _NO_PARAMS)
    cur = <TensorBase>prev
    if prev_fresh:
        # NOTE: accumulate in place only into a buffer this traversal allocated itself;
        # a first gradient may be shared with other consumers (add's VJP returns g twice).
        _copyto(cur._device, cur._data, _raw_add(cur, <TensorBase>g))
        return cur
    return _new_tensor(_raw_add(cur, <TensorBase>g), cur._device)


cdef object _raw_add(TensorBase a, TensorBase b):
    """a + b with the add kernel, outside the tape (gradient accumulation)."""
    kernel = _op_add.kernels[a._device.name]
    out = kernel(a._data, b._data)
    # NOTE: NumPy returns a scalar, not a 0-d array, for 0-d inputs.
    if type(out) is not a._device.array_type:
        out = a._device.asarray(out)
    if _traced():
        _TRACER.kernel(kernel, (a._data, b._data), None, out, a._device, None)
    return out


cdef inline void _copyto(Device device, object dst, object src, object owner=None) except *:
    # NOTE: the recorder hears of the write first: it may copy dst's value before it goes.
    if _traced():
        _TRACER.write(device.copyto, (dst, src), device, owner)
    device.copyto(dst, src)


cdef void _node_add_grad(Node e, Py_ssize_t nr, object g, bint create_graph) except *:
    cdef unsigned long long bit
    if nr == 0:
        if e._g is None:
            e._g = g
        else:
            e._g = _sum_grads(e._g, g, create_graph, e._fresh & 1)
            if not create_graph:
                e._fresh |= 1
        return
    if e._gmore is None:
        e._gmore = [None] * (e.n_outputs - 1)
    prev = e._gmore[nr - 1]
    if prev is None:
        e._gmore[nr - 1] = g
        return
    bit = (<unsigned long long>1) << (nr if nr < 63 else 63)
    e._gmore[nr - 1] = _sum_grads(prev, g, create_graph, (e._fresh & bit) != 0 and nr < 63)
    if not create_graph:
        e._fresh |= bit


cdef void _leaf_add_grad(_LeafSlot slot, object g, bint create_graph) except *:
    if slot.g is None:
        slot.g = g
        return
    slot.g = _sum_grads(slot.g, g, create_graph, slot.fresh)
    slot.fresh = not create_graph


cdef void _claim(Node node, object walk, list visited) except *:
    if node._walk is not None:
        raise RuntimeError(
            f"backward reached '{node.name}', which another backward() or tg.grad() running at "
            f"the same time (another thread, or a hook) is differentiating; run them one after "
            f"the other")
    node._walk = walk
    visited.append(node)


cdef inline void _reset(Node node):
    node._walk = None
    node._deps = 0
    node._g = None
    node._gmore = None
    node._fresh = 0


cdef inline Py_ssize_t _push(list work, Py_ssize_t top, object x) except -1:
    """Put x at work[top] (a stack whose live part is work[:top]); returns the new top.
    NOTE: the list never shrinks: popping a one-item list empties it, and CPython frees
    its item array, so a chain of nodes would free and allocate it once per node."""
    if top < len(work):
        work[top] = x
    else:
        work.append(x)
    return top + 1


cdef _LeafSlot _leaf_slot(dict leaves, LeafRef key):
    cdef _LeafSlot slot = leaves.get(key)
    if slot is None:
        slot = _LeafSlot.__new__(_LeafSlot)
        leaves[key] = slot
    return slot


cdef object _check_finite(Node node, Py_ssize_t i, object g):
    arr = (<TensorBase>g)._device.to_numpy((<TensorBase>g)._data)
    if not np.all(np.isfinite(arr)):
        shapes = [tuple(a.shape) for a in (node.inputs or ()) if hasattr(a, "shape")]
        raise RuntimeError(
            f"anomaly: the gradient of '{node.name}' (input shapes {shapes}) produced NaN or "
            f"inf for input {i}." + _creation_note(node))


def backward_accumulates():
    """Whether the backward pass running now (in this thread or task), if any, accumulates
    into .grad (backward()) rather than returning the gradients (tg.grad): a hook that
    should act only on accumulation (DDP's all-reduce) asks this."""
    return _ACCUMULATING.get()


def run_backward(tuple tensors, tuple grad_tensors, retain_graph=None, bint create_graph=False,
                 tuple inputs=None, bint allow_unused=False, bint input_hooks=True):
    """Backpropagate from `tensors` seeded with `grad_tensors`.

    With `inputs` (tg.grad), return the gradients flowing into those tensors and leave every
    `.grad` untouched; otherwise accumulate into the `.grad` of leaves (and retain_grad
    tensors). `input_hooks=False` skips the hooks of leaves in `inputs` (a backward nested
    in another one, like a checkpoint's recompute, whose outer pass runs them).
    """
    cdef bint retain = create_graph if retain_graph is None else bool(retain_graph)
    cdef list visited = []          # every node whose traversal fields this call set
    cdef object walk = visited      # identity token of this traversal
    cdef dict leaves = {}
    cdef list ready = []            # nodes and leaves whose gradient is complete: ready[:nready]
    cdef Py_ssize_t nready = 0
    cdef list roots = []
    cdef TensorBase t, g
    cdef Node node, en
    cdef _LeafSlot lslot
    cdef LeafRef lref
    cdef Py_ssize_t i, j, n, nr, nrefs
    cdef dict cap_leaf = None
    cdef dict cap_node = None
    cdef list captured = None
    cdef list grads
    cdef list grads1 = [None]       # reused as `grads` by every single-output node
    cdef tuple res = None, edges, nrs
    cdef bint accumulate = inputs is None
    cdef bint anomaly = _anomaly_on()
    cdef bint has_grad, fresh, completed = False

    if len(tensors) != len(grad_tensors):
        raise ValueError(f"backward: got {len(tensors)} tensors but {len(grad_tensors)} gradients")
    if accumulate and _fwd_active and _LEVEL_HOOKS is not None:
        _LEVEL_HOOKS.check_backward(tensors)
    for x in tensors + (inputs or ()):
        if isinstance(x, TensorBase):
            _refresh_if_stale(<TensorBase>x)
    if _traced():
        _TRACER.backward_started(inputs is None, create_graph)
    if inputs is not None:
        cap_leaf = {}
        cap_node = {}
        captured = [None] * len(inputs)
        for i in range(len(inputs)):
            x = inputs[i]
            if not isinstance(x, TensorBase):
                raise TypeError(f"grad: inputs must be tensors, input {i} is {type(x).__name__}")
            t = <TensorBase>x
            if not t._requires_grad:
                raise RuntimeError(f"grad: input {i} (shape {tuple(t._data.shape)}) does not require grad")
            if t._node is None:
                cap_leaf.setdefault(_leaf_ref_of(t), []).append(i)
            else:
                cap_node.setdefault(t._node, []).append((t._output_nr, i))

    token = GRAD_ENABLED.set(create_graph)
    acc_token = _ACCUMULATING.set(accumulate)
    try:
        # -- seed the roots ----------------------------------------------------------
        for i in range(len(tensors)):
            x = tensors[i]
            if not isinstance(x, TensorBase):
                raise TypeError(f"backward: expected a Tensor, got {type(x).__name__}")
            t = <TensorBase>x
            if not t._requires_grad:
                raise RuntimeError(
                    f"backward: tensor {i} (shape {tuple(t._data.shape)}) does not require grad "
                    f"and has no grad_fn: nothing in its computation requires grad (make an "
                    f"input with requires_grad=True, and do not compute it under tg.no_grad())")
            g = _seed_grad(t, grad_tensors[i], i)
            if t._node is not None:
                node = t._node
                if node._walk is not walk:
                    _claim(node, walk, visited)
                    roots.append(node)
                _node_add_grad(node, t._output_nr, g, create_graph)
            else:
                lref = _leaf_ref_of(t)
                if lref not in leaves:
                    roots.append(lref)
                _leaf_add_grad(_leaf_slot(leaves, lref), g, create_graph)

        # -- count, for every reachable key, the edges that point to it -----------------
        # NOTE: `visited` is the work list: every node is claimed (appended) once, so
        # reading it front to back reaches each node exactly once, with no second list.
        j = 0
        while j < len(visited):
            node = <Node>visited[j]
            j += 1
            for e in node.edges:
                if e is None:
                    continue
                if isinstance(e, Node):
                    en = <Node>e
                    if en._walk is not walk:
                        _claim(en, walk, visited)
                    en._deps += 1
                else:
                    (<_LeafSlot>_leaf_slot(leaves, e)).deps += 1
        for key in roots:
            if isinstance(key, Node):
                if (<Node>key)._deps == 0:
                    nready = _push(ready, nready, key)
            elif (<_LeafSlot>leaves[key]).deps == 0:
                nready = _push(ready, nready, key)

        # -- Kahn's traversal ----------------------------------------------------------
        while nready:
            nready -= 1
            key = ready[nready]
            ready[nready] = None
            if not isinstance(key, Node):
                lslot = <_LeafSlot>leaves.pop(key)
                gv = lslot.g
                t = (<LeafRef>key).get()
                if gv is None or t is None:      # no gradient, or the leaf is gone
                    continue
                if t._hooks and (input_hooks or cap_leaf is None or key not in cap_leaf):
                    gv = _run_hooks(t._hooks, gv)
                if cap_leaf is not None:
                    for idx in cap_leaf.get(key, ()):
                        captured[idx] = gv
                elif accumulate:
                    # NOTE: a gradient held only by `gv` and the slot (2 references) may be
                    # adopted without a copy: see _unshared.
                    nrefs = tapegrad_refcnt(<PyObject*>gv)
                    fresh = gv is lslot.g and (lslot.fresh or (nrefs == 2 and _unshared(gv)))
                    _accumulate_grad(t, gv, create_graph, fresh)
                continue

            node = <Node>key
            if node.n_outputs == 1:
                grads1[0] = node._g
                grads = grads1
            else:
                grads1[0] = None        # as if the previous node's list were dropped
                grads = [node._g] + (node._gmore or [None] * (node.n_outputs - 1))
            _reset(node)
            has_grad = False
            for nr in range(node.n_outputs):
                gv = grads[nr]
                if gv is None:
                    continue
                if node.hooks is not None and nr in node.hooks:
                    gv = _run_hooks(node.hooks[nr], gv)
                    grads[nr] = gv
                if node.retained is not None and nr in node.retained:
                    owner = node.retained[nr]()
                    if owner is not None and accumulate:
                        _accumulate_grad(<TensorBase>owner, gv, create_graph, False)
                has_grad = True
            if cap_node is not None and node in cap_node:
                for nr, idx in cap_node[node]:
                    captured[idx] = grads[nr]
            if has_grad:
                res = node._run_vjp(grads)
            edges = node.edges
            nrs = node.edge_nrs
            n = len(edges)
            for i in range(n):
                e = edges[i]
                if e is None:
                    continue
                gv = res[i] if has_grad else None
                if gv is not None:
                    gv = _fit_grad(node, i, gv, node.inputs[i])
                    if anomaly:
                        _check_finite(node, i, gv)
                nr = 0 if nrs is None else nrs[i]
                if isinstance(e, Node):
                    en = <Node>e
                    if gv is not None:
                        _node_add_grad(en, nr, gv, create_graph)
                    en._deps -= 1
                    if en._deps == 0:
                        nready = _push(ready, nready, en)
                else:
                    lslot = <_LeafSlot>leaves[e]
                    if gv is not None:
                        _leaf_add_grad(lslot, gv, create_graph)
                    lslot.deps -= 1
                    if lslot.deps == 0:
                        nready = _push(ready, nready, e)
            res = None
            if not retain:
                node.release()
        completed = True
    finally:
        GRAD_ENABLED.reset(token)
        _ACCUMULATING.reset(acc_token)
        if not completed:
            for node in visited:
                if node._walk is walk:
                    _reset(node)

    if captured is None:
        return None
    for i in range(len(captured)):
        if captured[i] is None and not allow_unused:
            raise RuntimeError(
                f"grad: input {i} (shape {tuple(inputs[i].shape)}) was not used to compute the "
                f"outputs (or no gradient reaches it); pass allow_unused=True to get None for it")
        if captured[i] is not None and not create_graph:
            g = _new_tensor((<TensorBase>captured[i])._data, (<TensorBase>captured[i])._device)
            g._tangents = (<TensorBase>captured[i])._tangents    # forward over reverse
            captured[i] = g
    return tuple(captured)


cdef TensorBase _seed_grad(TensorBase t, object grad, Py_ssize_t i):
    cdef TensorBase g
    if grad is None:
        if _is_complex_array(t._data):
            # PyTorch's rule: a complex output has no implied cotangent (1? 1j?)
            raise RuntimeError(
                f"backward: grad can be implicitly created only for real scalar outputs; "
                f"tensor {i} is {t._data.dtype} (shape {tuple(t._data.shape)}): pass "
                f"gradient=, or backpropagate from a real loss (e.g. abs(z).sum() or z.real)")
        if t._data.size != 1:
            raise RuntimeError(
                f"backward: the gradient can be implied only for a tensor with one element; "
                f"tensor {i} has shape {tuple(t._data.shape)}: pass gradient= (a tensor of that "
                f"shape), or reduce it first (e.g. .sum())")
        return _new_tensor(t._device.ones(t._data.shape, t._data.dtype), t._device)
    if isinstance(grad, TensorBase):
        g = <TensorBase>grad
    else:
        g = _new_tensor(t._device.asarray(grad, t._data.dtype), t._device)
    if g._data.shape != t._data.shape:
        raise RuntimeError(
            f"backward: gradient {i} has shape {tuple(g._data.shape)} but the tensor has shape "
            f"{tuple(t._data.shape)}")
    if g._device is not t._device:
        raise RuntimeError(
            f"backward: gradient {i} is on {g._device.name} but the tensor is on {t._device.name}")
    return g


# ---------------------------------------------------------------------------------------
# tg.Function support
# ---------------------------------------------------------------------------------------

def attach_function_node(str name, ctx, backward_fn, tuple args, tuple outputs, tuple differentiable_mask):
    """Record a tg.Function call: `outputs` get one FunctionNode whose VJP is backward_fn."""
    cdef FunctionNode node = FunctionNode.__new__(FunctionNode)
    cdef Py_ssize_t n = len(args), i
    cdef list edges = [None] * n
    cdef list nrs = [0] * n
    cdef TensorBase t
    for i in range(n):
        a = args[i]
        if isinstance(a, TensorBase) and differentiable_mask[i]:
            t = <TensorBase>a
            if t._requires_grad:
                edges[i] = _edge_of(t)
                nrs[i] = t._output_nr
    node.name = name
    node.edges = tuple(edges)
    node.edge_nrs = tuple(nrs)
    node.inputs = tuple(_meta_of(<TensorBase>a) if isinstance(a, TensorBase) else a for a in args)
    node.n_outputs = len(outputs)
    node.ctx = ctx
    node.backward_fn = backward_fn
    if _anomaly_on():
        node.trace = traceback.extract_stack()
    meta = []
    for i in range(len(outputs)):
        t = <TensorBase>outputs[i]
        meta.append((t._data.shape, t._data.dtype, t._device))
        if _is_float_array(t._data) or _is_complex_array(t._data):
            _note_complex(t._data)
            t._node = node
            t._output_nr = <int>i
            t._requires_grad = True
    node.out_meta = tuple(meta)
    return node


# ---------------------------------------------------------------------------------------
# Tensor
# ---------------------------------------------------------------------------------------

cdef void _check_can_require_grad(TensorBase t) except *:
    if t._data.dtype.kind not in "fc":
        raise TypeError(
            f"only floating-point and complex tensors can require gradients; this tensor has "
            f"dtype {t._data.dtype} (convert it with .astype(np.float64) first)")
    _note_complex(t._data)


cdef object _binary(str name, a, b):
    return _apply(_lookup(name), (a, b), _NO_PARAMS)


cdef inline object _binary_op(Op op, str name, a, b):
    """An arithmetic operator: its op as install_op keeps it, else looked up by name."""
    return _apply2(op if op is not None else _lookup(name), a, b)


cdef object _logical(str name, a, b):
    for x in (a, b):
        if isinstance(x, TensorBase) and (<TensorBase>x)._data.dtype.kind != "b":
            raise TypeError(
                f"{name.replace('logical_', '')} operators (&, |, ~) are defined for bool tensors; "
                f"got {(<TensorBase>x)._data.dtype} (compare first, e.g. (x > 0) & (x < 1))")
    if b is None:
        return _apply(_lookup(name), (a,), _NO_PARAMS)
    return _apply(_lookup(name), (a, b), _NO_PARAMS)


@cython.trashcan(True)
cdef class TensorBase:
    """The engine half of tapegrad.Tensor (see tapegrad.Tensor for the public docs)."""

    __array_priority__ = 1000

    # -- attributes ---------------------------------------------------------------------
    @property
    def shape(self):
        return self._data.shape

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def size(self):
        return self._data.size

    @property
    def device(self):
        return self._device

    @property
    def is_leaf(self):
        _refresh_if_stale(self)
        return self._node is None

    @property
    def grad_fn(self):
        _refresh_if_stale(self)
        return self._node

    @property
    def output_nr(self):
        _refresh_if_stale(self)
        return self._output_nr

    @property
    def retains_grad(self):
        return self._retains_grad

    @property
    def _version(self):
        return _version_of(self)

    @property
    def requires_grad(self):
        _refresh_if_stale(self)
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        value = bool(value)
        if self._node is not None:
            if not value:
                raise RuntimeError(
                    "requires_grad can only be changed on leaf tensors; use .detach() to get a "
                    "tensor of this value that does not require grad")
            return
        if value:
            _check_can_require_grad(self)
        self._requires_grad = value

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    def _set_data_(self, TensorBase src):
        """Make `src`'s array (same shape; any dtype or device) this leaf's own, keeping this
        object: what PyTorch's ``param.data = ...`` does, and what ``Module.to`` uses so
        that an optimizer built before ``model.float()`` still holds the model's parameters.
        requires_grad and hooks stay; the gradient is dropped (the caller converts it); the
        version is bumped, so a graph that saved the old value raises at backward."""
        if self._node is not None:
            raise RuntimeError("_set_data_: only a leaf tensor's data can be replaced")
        if _traced():
            raise RuntimeError("_set_data_: cannot replace a tensor's data inside tg.compile")
        if src._data.shape != self._data.shape:
            raise ValueError(f"_set_data_: shape {tuple(src._data.shape)} differs from the "
                             f"tensor's {tuple(self._data.shape)}")
        if self._requires_grad and src._data.dtype.kind not in "fc":
            raise TypeError(f"_set_data_: a tensor that requires grad cannot take "
                            f"{src._data.dtype} data")
        if self._requires_grad:
            _note_complex(src._data)
        self._data = src._data
        self._device = src._device
        self._grad = None
        _bump(self, "_set_data_")

    @property
    def grad(self):
        if self._grad is not None and _traced():
            # tg.compile: a .grad read before the backward that replaces it (zero_grad(
            # set_to_none=False)) must be read afresh by a replay, not baked in.
            _TRACER.grad_read(self)
        return self._grad

    @grad.setter
    def grad(self, value):
        cdef TensorBase g
        if value is None:
            self._grad = None
            if _traced():
                _TRACER.grad_assigned(self)
            return
        if not isinstance(value, TensorBase):
            value = _new_tensor(self._device.asarray(value, self._data.dtype), self._device)
        g = <TensorBase>value
        if g._data.shape != self._data.shape:
            raise ValueError(
                f"assigned grad has shape {tuple(g._data.shape)}, but the tensor has shape "
                f"{tuple(self._data.shape)}")
        if g._data.dtype != self._data.dtype:
            raise TypeError(f"assigned grad has dtype {g._data.dtype}, but the tensor has dtype {self._data.dtype}")
        if g._device is not self._device:
            raise RuntimeError(f"assigned grad is on {g._device.name}, but the tensor is on {self._device.name}")
        self._grad = g
        if _traced():
            _TRACER.grad_assigned(self)

    # -- graph control ------------------------------------------------------------------
    def detach(self):
        """A tensor sharing this one's data, cut from the graph (requires_grad False)."""
        cdef TensorBase t = _new_tensor(self._data, self._device)
        t._vc = _get_vc(self)
        t._is_view = True
        if _fwd_active and _has_tangents(self) and _LEVEL_HOOKS is not None:
            # NOTE: no forward-mode tangent (as PyTorch), but a vmapped tensor stays one
            # (its per-example values, detached too)
            t._tangents = _LEVEL_HOOKS.detached(self._tangents)
        return t

    def detach_(self):
        """Cut this tensor from the graph in place; it becomes a leaf."""
        self._view_parent = None        # and is never rebased onto its base's graph again
        self._node = None
        self._output_nr = 0
        self._requires_grad = False
        # as detach(): no forward-mode tangent either (a vmapped tensor stays one)
        if _fwd_active and _has_tangents(self) and _LEVEL_HOOKS is not None:
            self._tangents = _LEVEL_HOOKS.detached(self._tangents)
        else:
            self._tangents = None
        return self

    def retain_grad(self):
        """Keep .grad on this non-leaf tensor after backward (leaves always keep it)."""
        _refresh_if_stale(self)
        if self._node is None:
            if not self._requires_grad:
                raise RuntimeError("retain_grad: the tensor does not require grad")
            return self
        if self._node.retained is None:
            self._node.retained = {}
        self._node.retained[self._output_nr] = weakref.ref(self)
        self._retains_grad = True
        return self

    def register_hook(self, hook):
        """Call hook(grad) when the gradient for this tensor is computed; a returned
        tensor replaces the gradient. Returns a handle whose .remove() unregisters it."""
        _refresh_if_stale(self)
        if not self._requires_grad:
            raise RuntimeError("register_hook: cannot register a hook on a tensor that does not require grad")
        if self._node is not None:
            return self._node.register_hook(hook, self._output_nr)
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(hook)
        return RemovableHandle(self._hooks, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        """Accumulate d(self)/d(leaf) into every leaf's .grad.

        `gradient` is required unless the tensor has one element. Saved values are freed
        as the traversal passes unless `retain_graph` (which defaults to `create_graph`).
        """
        run_backward((self,), (gradient,), retain_graph, create_graph)

    # -- conversion -----------------------------------------------------------------------
    def numpy(self):
        """The data as a numpy.ndarray (shared memory on cpu; read-only if requires_grad)."""
        _check_read(self, "numpy()")
        arr = self._device.to_numpy(self._data)
        if self._requires_grad:
            arr = arr.view()
            arr.flags.writeable = False
        return arr

    def __array__(self, dtype=None, copy=None):
        _check_read(self, "conversion to a NumPy array")
        arr = self._device.to_numpy(self._data)
        if dtype is not None and arr.dtype != dtype:
            return arr.astype(dtype)
        if copy:
            return arr.copy()
        if self._requires_grad:
            arr = arr.view()
            arr.flags.writeable = False
        return arr

    def item(self):
        _check_read(self, "item()")
        if self._data.size != 1:
            raise ValueError(
                f"item(): only a tensor with one element can be converted to a Python scalar; "
                f"this one has shape {tuple(self._data.shape)}")
        return self._device.to_numpy(self._data).item()

    def tolist(self):
        _check_read(self, "tolist()")
        return self._device.to_numpy(self._data).tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        _check_read(self, "bool() (data-dependent control flow)")
        if self._data.size != 1:
            raise ValueError(
                f"the truth value of a tensor with {self._data.size} elements is ambiguous; "
                f"use .any() or .all()")
        return bool(self.item())

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self._data.shape[0]):
            yield self[i]

    def __hash__(self):
        return id(self)

    # -- operators ------------------------------------------------------------------------
    def __add__(self, other):
        return _apply2(_op_add, self, other)

    def __radd__(self, other):
        return _apply2(_op_add, other, self)

    def __sub__(self, other):
        return _binary_op(_op_subtract, "subtract", self, other)

    def __rsub__(self, other):
        return _binary_op(_op_subtract, "subtract", other, self)

    def __mul__(self, other):
        return _binary_op(_op_multiply, "multiply", self, other)

    def __rmul__(self, other):
        return _binary_op(_op_multiply, "multiply", other, self)

    def __truediv__(self, other):
        return _binary_op(_op_divide, "divide", self, other)

    def __rtruediv__(self, other):
        return _binary_op(_op_divide, "divide", other, self)

    def __floordiv__(self, other):
        return _apply2(_lookup("floor_divide"), self, other)

    def __rfloordiv__(self, other):
        return _apply2(_lookup("floor_divide"), other, self)

    def __mod__(self, other):
        return _apply2(_lookup("remainder"), self, other)

    def __rmod__(self, other):
        return _apply2(_lookup("remainder"), other, self)

    def __divmod__(self, other):
        return (_apply2(_lookup("floor_divide"), self, other),
                _apply2(_lookup("remainder"), self, other))

    def __rdivmod__(self, other):
        return (_apply2(_lookup("floor_divide"), other, self),
                _apply2(_lookup("remainder"), other, self))

    def __pow__(self, other, mod):
        if mod is not None:
            raise TypeError("pow() with a modulus is not supported for tensors")
        return _binary("power", self, other)

    def __rpow__(self, other, mod):
        return _binary("power", other, self)

    def __matmul__(self, other):
        return _binary("matmul", self, other)

    def __rmatmul__(self, other):
        return _binary("matmul", other, self)

    def __neg__(self):
        return _apply(_op_negative if _op_negative is not None else _lookup("negative"),
                      (self,), _NO_PARAMS)

    def __pos__(self):
        return self

    def __abs__(self):
        return _lookup("abs")(self)

    def __lt__(self, other):
        return _binary("less", self, other)

    def __le__(self, other):
        return _binary("less_equal", self, other)

    def __gt__(self, other):
        return _binary("greater", self, other)

    def __ge__(self, other):
        return _binary("greater_equal", self, other)

    def __eq__(self, other):
        if other is None:
            return False
        return _binary("equal", self, other)

    def __ne__(self, other):
        if other is None:
            return True
        return _binary("not_equal", self, other)

    def __and__(self, other):
        return _logical("logical_and", self, other)

    def __rand__(self, other):
        return _logical("logical_and", other, self)

    def __or__(self, other):
        return _logical("logical_or", self, other)

    def __ror__(self, other):
        return _logical("logical_or", other, self)

    def __invert__(self):
        return _logical("logical_not", self, None)

    def __getitem__(self, index):
        if _fwd_active and isinstance(index, TensorBase) and _has_tangents(<TensorBase>index) \
                and _LEVEL_HOOKS is not None:
            # x[i] with an integer index tensor batched by tg.vmap: per-example indices,
            # which is take(x, i, axis=0) (the hook returns None where it is not)
            out = _LEVEL_HOOKS.batched_index(self, index)
            if out is not None:
                return out
        return _lookup("getitem")(self, index=_index_arrays(index))

    @property
    def T(self):
        return _lookup("transpose")(self)

    @property
    def mT(self):
        """The transpose of the last two axes (ndarray.mT, the stack of matrices' transposes)."""
        n = len(self.shape)
        if n < 2:
            raise ValueError("matrix transpose with ndim < 2 is undefined")
        return _lookup("transpose")(self, tuple(range(n - 2)) + (n - 1, n - 2))

    # -- in-place ops (bump the version; see _inplace) --------------------------------------
    def add_(self, other):
        return _inplace(self, "add", (other,), None)

    def sub_(self, other):
        return _inplace(self, "subtract", (other,), None)

    def mul_(self, other):
        return _inplace(self, "multiply", (other,), None)

    def div_(self, other):
        return _inplace(self, "divide", (other,), None)

    def zero_(self):
        return _inplace(self, "zeros_like", (), None)

    # NOTE: the operators call _inplace themselves, not self.add_ ...: the method lookup on
    # the Python subclass (an MRO walk) and its call were ~1 k instructions of each `p -=
    # lr * p.grad` of an optimizer step. A subclass overriding add_ must override the
    # operator too (tapegrad.Tensor overrides neither).
    def __iadd__(self, other):
        return _inplace(self, "add", (other,), None)

    def __isub__(self, other):
        return _inplace(self, "subtract", (other,), None)

    def __imul__(self, other):
        return _inplace(self, "multiply", (other,), None)

    def __itruediv__(self, other):
        return _inplace(self, "divide", (other,), None)

    def __ifloordiv__(self, other):
        return _inplace(self, "floor_divide", (other,), None)

    def __imod__(self, other):
        return _inplace(self, "remainder", (other,), None)

    def __setitem__(self, index, value):
        index = _index_arrays(index)
        if _inplace_records(self, (value,)) or (_fwd_active and _inplace_dual(self, (value,))):
            _inplace(self, "setitem", (value,), {"index": index})
            return
        if isinstance(value, TensorBase):
            if (<TensorBase>value)._device is not self._device:
                raise RuntimeError(
                    f"setitem: value is on {(<TensorBase>value)._device.name} but the tensor is on "
                    f"{self._device.name}")
            value = (<TensorBase>value)._data
        if _traced():
            _TRACER.write(self._device.setitem, (self._data, index, value), self._device, self)
        try:
            self._device.setitem(self._data, index, value)
        except (ValueError, TypeError, IndexError) as exc:
            raise _same_type_error(exc,
                f"setitem: {exc} (tensor shape {tuple(self._data.shape)} {self._data.dtype}, "
                f"index {index!r})") from exc
        _bump(self, "setitem")


cdef tuple _BASIC_INDEX_ITEMS = (int, bool, slice, type(None), type(Ellipsis), np.integer,
                                 np.bool_, np.ndarray)


cdef object _index_item(object i):
    if isinstance(i, TensorBase):
        if _has_tangents(<TensorBase>i) and _LEVEL_HOOKS is not None:
            # NOTE: a batched index (inside tg.vmap) has a placeholder for data: reading
            # it would index every example with zeros
            _LEVEL_HOOKS.check_index(<TensorBase>i)
        return (<TensorBase>i)._data
    if isinstance(i, _BASIC_INDEX_ITEMS) or hasattr(type(i), "__index__"):
        return i
    # NOTE: NumPy takes every other item (a list, a tuple inside the index, a range, a
    # nested list of tensors) as an array: make it one here, so the kernels and the
    # gradient see one form ("x[(0, 0), (1, 1)]" picks x[0, 1] twice).
    return np.asarray(i)


cdef object _index_arrays(object index):
    """The index in NumPy's normal form: a tuple of basic items and arrays, or one item;
    tensors inside it replaced by their arrays (indices are never differentiable)."""
    if isinstance(index, tuple):        # a tuple subclass (a namedtuple) is one too
        return tuple([_index_item(i) for i in index])
    return _index_item(index)


cdef bint _inplace_records(TensorBase self, tuple others):
    if not _grad_enabled():
        return False
    _refresh_if_stale(self)
    if self._requires_grad:
        return True
    for o in others:
        if isinstance(o, TensorBase):
            _refresh_if_stale(<TensorBase>o)
            if (<TensorBase>o)._requires_grad:
                return True
    return False


def ufunc_into(dst, other, ufunc):
    """ufunc(dst, other) written into dst (tg.compile replays _ufunc_into's writes so)."""
    ufunc(dst, other, out=dst)


cdef bint _ufunc_into(TensorBase self, Op op, tuple others, str name) except -1:
    """The fast path of an unrecorded `self op= other` (an optimizer's update): when the
    kernel is a NumPy ufunc and the result has self's shape and dtype, compute straight
    into self's storage (out=), which is what computing and copying in gives, bit for
    bit, without the temporary and the copy. Returns False to take the general path."""
    cdef TensorBase o
    cdef object data = self._data, od
    cdef PyObject* argv[3]
    if len(others) != 1 or type(data) is not cnp.ndarray \
            or not cnp.PyArray_ISFLOAT(<cnp.ndarray>data):
        return False
    kernel = op.kernels.get(self._device.name)
    if type(kernel) is not _ufunc_type:
        return False
    other = <object>PyTuple_GET_ITEM(others, 0)
    if isinstance(other, TensorBase):
        o = <TensorBase>other
        od = o._data
        # NOTE: the same dtype object (as `od.dtype is data.dtype`) and shape, read in C
        if o._device is not self._device or type(od) is not cnp.ndarray \
                or <void*>cnp.PyArray_DESCR(<cnp.ndarray>od) != <void*>cnp.PyArray_DESCR(<cnp.ndarray>data) \
                or not cnp.PyArray_SAMESHAPE(<cnp.ndarray>od, <cnp.ndarray>data):
            return False
        other = od
    elif type(other) is not float and type(other) is not int:
        return False
    if _traced():
        _TRACER.write(ufunc_into, (data, other, kernel), self._device, self)
    # ufunc(a, b, a): out= positional, the call `kernel(a, b, out=a)` with no keyword names
    argv[0] = <PyObject*>data           # borrowed: the locals hold all three
    argv[1] = <PyObject*>other
    argv[2] = <PyObject*>data
    PyObject_Vectorcall(kernel, argv, 3, NULL)
    _bump(self, name)
    return True


cdef object _inplace(TensorBase self, str op_name, tuple others, dict params):
    """self <- op(self, *others): write the result into self's storage and bump its version.

    When recording, the op is recorded on a stand-in for self's old value (a copy if the
    op's VJP reads it), and self becomes that op's output.
    """
    cdef TensorBase shadow, r
    cdef Op op
    name = op_name if op_name == "setitem" else op_name + "_"   # setitem: x[i] = v
    params = params or {}
    cdef bint dual = _fwd_active and _inplace_dual(self, others)
    if dual and _LEVEL_HOOKS is not None:
        _LEVEL_HOOKS.check_inplace(name, self, others)
    if dual and self._is_view:
        raise RuntimeError(
            f"{name}: in-place modification of a view (shape {tuple(self._data.shape)}) with "
            f"forward-mode tangents (inside tg.jvp / tg.forward_ad.dual_level) is not "
            f"supported: its base's tangent would not follow; use an out-of-place op")
    if not _inplace_records(self, others):
        op = _lookup(op_name)
        if not dual and _ufunc_into(self, op, others, name):
            return self
        token = GRAD_ENABLED.set(False)
        try:
            r = _apply(op, (self,) + others, params)
        finally:
            GRAD_ENABLED.reset(token)
        _write_inplace(self, r, name)
        if dual:
            _take_tangents(self, r)
        return self
    if self._node is None and self._requires_grad:
        raise RuntimeError(
            f"{name}: a leaf tensor that requires grad (shape {tuple(self._data.shape)}) cannot be "
            f"modified in place while grad mode is on; wrap the update in `with tg.no_grad():` "
            f"or use an out-of-place op")
    if self._is_view:
        raise RuntimeError(
            f"{name}: in-place modification of a view (a tensor from detach(), reshape, "
            f"transpose or indexing that shares storage) is not supported while it takes part "
            f"in a graph; use an out-of-place op")
    op = _lookup(op_name)
    saves_self = op.saves_input(0)
    if saves_self:
        old_value = self._device.copy(self._data)
        if _traced():
            # NOTE: tg.compile must see the copy as a kernel of the function: an array it
            # has not seen made, read by a tensor that requires grad, would be taken for a
            # tensor from outside, and replays would connect to this call's graph.
            _TRACER.kernel(self._device.copy, (self._data,), None, old_value, self._device,
                           (self,))
    else:
        old_value = self._data
    shadow = _new_tensor(old_value, self._device)
    shadow._node = self._node
    shadow._output_nr = self._output_nr
    shadow._requires_grad = self._requires_grad
    if not saves_self:
        shadow._vc = _get_vc(self)
    if dual:
        shadow._tangents = self._tangents
    r = _apply(op, (shadow,) + others, params)
    _write_inplace(self, r, name)
    self._node = r._node
    self._output_nr = r._output_nr
    self._requires_grad = r._requires_grad
    if dual:
        _take_tangents(self, r)
    # the storage's views now belong to a graph older than it (see Note: [views of a base
    # modified in place])
    self._vc.graph_epoch += 1
    return self


cdef bint _inplace_dual(TensorBase self, tuple others):
    if _has_tangents(self):
        return True
    for o in others:
        if isinstance(o, TensorBase) and _has_tangents(<TensorBase>o):
            return True
    return False


cdef void _take_tangents(TensorBase self, TensorBase r) except *:
    """self (just written in place with r's value) takes r's tangents; its views are now
    stale (their tangents were taken from the old value) and are rebuilt before use."""
    cdef VersionCounter vc = _get_vc(self)
    self._tangents = r._tangents
    vc.graph_epoch += 1


cdef void _write_inplace(TensorBase self, TensorBase r, str name) except *:
    if r._data.shape != self._data.shape:
        raise ValueError(
            f"{name}: the result has shape {tuple(r._data.shape)}, which cannot be stored in place "
            f"into a tensor of shape {tuple(self._data.shape)}")
    if r._data.dtype != self._data.dtype and not np.can_cast(r._data.dtype, self._data.dtype, "same_kind"):
        raise TypeError(
            f"{name}: the result has dtype {r._data.dtype}, which cannot be stored in place into a "
            f"{self._data.dtype} tensor")
    _copyto(self._device, self._data, r._data, self)
    _bump(self, name)


cdef inline void _bump(TensorBase t, str op_name) except *:
    cdef VersionCounter vc = _get_vc(t)
    vc.value += 1
    vc.last_op = op_name
    vc.last_trace = traceback.extract_stack() if _anomaly_on() else None
    if _traced():
        # tg.compile replays the bump on the tensor from outside that shares vc, so that
        # a graph outside that saved the old value raises as it would eagerly.
        _TRACER.bumped(t, op_name)
