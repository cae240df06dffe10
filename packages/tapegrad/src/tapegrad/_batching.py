"""vmap's half in the core: batched tensors and the dispatch of batching rules.

``tg.vmap`` (tapegrad-higher) opens a *batch level* (a transform level like a forward-mode
level, in the same stack: see _forward.py, Note: [forward levels]) and gives f *logical*
tensors: what f sees is one example, shape and dtype included, while the values of all
examples live in a *physical* tensor with the vmapped axis first.

Note: [batched tensors]
A logical tensor x at batch level k is a TensorBase whose ``_data`` is a placeholder (a
read-only zero-stride array of the logical shape and dtype, of class _Placeholder) and
whose ``_tangents[k]`` is ``_Batch(physical)``. Every op call with such an input reaches
:func:`dispatch_batch` (through _forward.dispatch, innermost level first), which runs the
op's batching rule on the physical values with level k hidden -- so the rule's own op
calls see the outer levels: nested vmaps, jvp of vmap, vmap of jvp -- and wraps the
physical result as a new logical tensor. The invariants:

- the physical value always has the vmapped axis first (in_axes/out_axes are moved at
  the boundary), so a rule never tracks where the batch axis is;
- an op with a batched input gives a batched output (a rule may broadcast);
- reading a logical tensor's value (``numpy()``, ``item()``, ``bool()``, ``repr``) is refused,
  as is writing into one in place: its values are per example, and the placeholder has
  none. Any kernel that still got one raises (_Placeholder refuses NumPy's ufuncs and
  functions) -- never a silent value.

Note: [reverse mode inside vmap]
``vmap(grad(f))`` differentiates f per example: tg.grad's leaves are logical tensors (or
unbatched ones), so the tape must be recorded on the *logical* tensors. dispatch_batch
records the op call on them (``_engine.record_op``) when a logical input requires grad,
and the backward pass then runs the VJP rules on logical tensors, which are batched op
calls again. ``grad(vmap(f))`` (grad outside) differentiates the physical computation:
the rules' op calls on physical tensors are recorded as usual. A tensor that is both
(an unbatched leaf of an inner tg.grad) is recorded on both levels; only the graph the
backward starts from is traversed.
"""

from __future__ import annotations

import warnings

import numpy as np

from . import _engine, _forward  # NOTE: _forward imports this module too (a cycle: only
# attributes read at call time cross it)
from ._engine import TensorBase, new_tensor


class BatchingFallbackWarning(UserWarning):
    """An op without a batching rule was vmapped by a loop over the batch."""


class _Batch:
    """The entry of a batch level in a logical tensor's ``_tangents``: its physical value,
    the vmapped axis first."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"_Batch(shape={tuple(self.value.shape)})"


def _leak_error(what="a kernel"):
    return RuntimeError(
        f"vmap: {what} read the value of a batched tensor directly, outside an op call. "
        f"Inside tg.vmap a tensor's values are per example and reach ops only through "
        f"their batching rules; a batched tensor used after its vmap returned, or a "
        f"kernel called on one, has no value to give")


class _Placeholder(np.ndarray):
    """The ``_data`` of a logical tensor: right shape and dtype, no values (Note:
    [batched tensors]). NumPy's ufuncs and functions refuse it."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raise _leak_error(f"np.{ufunc.__name__}")

    def __array_function__(self, func, types, args, kwargs):
        if func in _SHAPE_ONLY:
            return super().__array_function__(func, types, args, kwargs)
        raise _leak_error(f"np.{func.__name__}")


_SHAPE_ONLY = {np.shape, np.ndim, np.size, np.result_type, np.may_share_memory,
               np.shares_memory}


_placeholders: dict = {}


def placeholder(shape, dtype):
    """The (shared, read-only, zero-stride) placeholder of that shape and dtype."""
    key = (shape, dtype)
    p = _placeholders.get(key)
    if p is None:
        if len(_placeholders) > 1024:
            _placeholders.clear()
        p = _placeholders[key] = np.broadcast_to(np.zeros((), dtype), shape).view(_Placeholder)
    return p


# ---------------------------------------------------------------------------------------
# levels
# ---------------------------------------------------------------------------------------

_sizes: dict = {}          # open batch level -> batch size
_randomness: dict = {}     # open batch level -> "error" | "different" | "same"
_warned: set = set()


def enter(size, randomness="error"):
    """Open a batch level of `size` examples; returns its id."""
    if randomness not in ("error", "different", "same"):
        raise ValueError(f"vmap: randomness must be 'error', 'different' or 'same', "
                         f"got {randomness!r}")
    level = _forward.enter_level("batch")
    _sizes[level] = int(size)
    _randomness[level] = randomness
    return level


def exit(level):
    _forward.exit_level(level)
    _sizes.pop(level, None)
    _randomness.pop(level, None)


def wrap(physical, level):
    """The logical tensor at `level` whose examples are physical[0], physical[1], ..."""
    if not isinstance(physical, TensorBase):
        raise TypeError(f"vmap: a batching rule must return a tensor, got "
                        f"{type(physical).__name__}")
    t = new_tensor(placeholder(tuple(physical.shape[1:]), physical.dtype), physical.device)
    t._tangents = {level: _Batch(physical)}
    return t


def physical(x, level):
    """(the physical value of x at `level`, whether x is batched there)."""
    if isinstance(x, TensorBase) and x._tangents:
        b = x._tangents.get(level)
        if type(b) is _Batch:
            return b.value, True
    return x, False


def batch_entries(x):
    """{level: physical} of the batch levels x is batched at (open or not)."""
    if not isinstance(x, TensorBase) or not x._tangents:
        return {}
    return {k: v.value for k, v in x._tangents.items() if type(v) is _Batch}


def is_batched(x):
    """Whether x is a logical tensor of an open batch level."""
    return any(k in _sizes for k in batch_entries(x))


# ---------------------------------------------------------------------------------------
# the dispatch
# ---------------------------------------------------------------------------------------

def call_op(op, args, kwargs):
    """op applied to already-split tensor inputs `args` (and bound parameters)."""
    return op(list(args), **kwargs) if op.seq_input else op(*args, **kwargs)


def dispatch_batch(op, level, inputs, kwargs):
    """Run `op` on `inputs`, some of them batched at `level` (Note: [batched tensors])."""
    # NOTE: the per-op path of every vmapped op: no imports, context managers or helper
    # calls here (physical() and _forward.hidden() inlined)
    phys, batched = [], []
    for x in inputs:
        if isinstance(x, TensorBase) and x._tangents:
            b = x._tangents.get(level)
            if type(b) is _Batch:
                phys.append(b.value)
                batched.append(True)
                continue
        phys.append(x)
        batched.append(False)
    size = _sizes[level]
    cap = _forward._cap
    saved = cap[0]
    cap[0] = level - 1          # the rule's own op calls do not see this level
    try:
        out = run_rule(op, tuple(phys), tuple(batched), kwargs, size)
    finally:
        cap[0] = saved
    if not isinstance(out, TensorBase) or out.ndim < 1 or out.shape[0] != size:
        raise RuntimeError(
            f"the batching rule of '{op.name}' returned "
            f"{getattr(out, 'shape', type(out).__name__)}; it must return a tensor with the "
            f"vmapped axis (size {size}) first")
    ans = wrap(out, level)
    _engine.record_op(op, tuple(inputs), kwargs, ans)
    return ans


def run_rule(op, phys, batched, kwargs, size):
    rule = op.batch
    try:
        if rule is None:
            return _loop(op, phys, batched, kwargs, size)
        if rule == "elementwise":
            return _elementwise(op, phys, batched, kwargs)
        if rule == "reduce":
            return _reduce(op, phys, batched, kwargs)
        return rule(phys, batched, **kwargs)
    except Exception as exc:
        _engine.add_note(exc, f"(in the vmap batching rule of '{op.name}')")
        raise


def check_rule(name, rule):
    """register_op's check of `batch=`."""
    if rule is None or callable(rule) or rule in ("elementwise", "reduce"):
        return rule
    from ._plugins import PluginError
    raise PluginError(f"op '{name}': batch must be callable, \"elementwise\", \"reduce\" "
                      f"or None, got {rule!r}")


def logical_ndim(x, batched):
    if batched:
        return x.ndim - 1
    return x.ndim if isinstance(x, TensorBase) else np.ndim(x)


def pad_batched(x, ndim):
    """Physical x (batch axis first) with unit axes after the batch axis, so that its
    logical part has `ndim` axes and broadcasts against unbatched values from the right."""
    r = x.ndim - 1
    if r >= ndim:
        return x
    return _engine.lookup("reshape")(x, shape=(x.shape[0],) + (1,) * (ndim - r)
                                     + tuple(x.shape[1:]))


def _elementwise(op, phys, batched, kwargs):
    ndim = max(logical_ndim(x, b) for x, b in zip(phys, batched))
    args = [pad_batched(x, ndim) if b else x for x, b in zip(phys, batched)]
    return call_op(op, args, kwargs)


def logical_axes(axis, ndim, who):
    """`axis` (int, tuple or None: all) of a logical value with `ndim` axes, normalised
    to non-negative ints, as a tuple."""
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise np.exceptions.AxisError(
                f"{who}: axis {a} is out of bounds for a tensor of dimension {ndim}")
        out.append(a % ndim if ndim else a)
    return tuple(out)


def _reduce(op, phys, batched, kwargs):
    if any(batched[1:]):
        return _loop(op, phys, batched, kwargs, phys[0].shape[0] if batched[0] else None)
    x = phys[0]
    ndim = x.ndim - 1
    params = dict(kwargs)
    params["axis"] = tuple(a + 1 for a in logical_axes(kwargs.get("axis"), ndim, op.name))
    return call_op(op, (x,) + tuple(phys[1:]), params)


def _slice(x, b):
    return x[b]


def _loop(op, phys, batched, kwargs, size):
    """The fallback: op once per example, the results stacked (exact, slow)."""
    if op.name not in _warned:
        _warned.add(op.name)
        why = ("has no batching rule" if op.batch is None else
               "has a batching rule that does not cover these arguments")
        warnings.warn(f"'{op.name}' {why}: vmap runs it once per example (exact, slow)"
                      + ("; register_op(..., batch=) makes it one call" if op.batch is None
                         else ""), BatchingFallbackWarning, stacklevel=4)
    if size is None:
        size = next(x.shape[0] for x, b in zip(phys, batched) if b)
    if size == 0:
        raise NotImplementedError(
            f"vmap: '{op.name}' runs once per example here (no batching rule covers these "
            f"arguments), and a batch of size 0 gives no example to learn its output's "
            f"shape from")
    outs = [call_op(op, [_slice(x, i) if b else x for x, b in zip(phys, batched)], kwargs)
            for i in range(size)]
    shapes = {tuple(o.shape) for o in outs}
    if len(shapes) > 1:
        raise RuntimeError(f"vmap: '{op.name}' gives outputs of different shapes for "
                           f"different examples ({sorted(shapes)[:3]}...); vmap needs one "
                           f"shape per call")
    return _engine.lookup("stack")(outs, axis=0)


def function_loop(cls, args, kwargs):
    """A tg.Function applied inside vmap: once per example, the outputs stacked. Its
    forward may compute on arrays, which a batched tensor does not have; a Function's
    node cannot be recorded on logical tensors (its backward would get them too), so a
    tg.grad inside the vmap through it is refused."""
    level = max(k for a in args for k in batch_entries(a) if k in _sizes)
    phys = [physical(a, level) for a in args]
    size = _sizes[level]
    if size == 0:
        raise NotImplementedError(
            f"vmap: tg.Function {cls.__name__} runs once per example, and a batch of size "
            f"0 gives no example to learn its outputs' shapes from")
    inner_grad = _engine.is_grad_enabled() and any(
        is_batched(a) and a.requires_grad for a in args)
    if cls.__name__ not in _warned:
        _warned.add(cls.__name__)
        warnings.warn(f"tg.Function {cls.__name__} inside tg.vmap runs once per example "
                      f"(exact, slow)", BatchingFallbackWarning, stacklevel=4)
    with _forward.hidden(level):
        per = [cls.apply(*[_slice(v, i) if b else v for v, b in phys], **kwargs)
               for i in range(size)]
        single = not isinstance(per[0], tuple)
        cols = [(p,) if single else p for p in per]
        outs = tuple(_engine.lookup("stack")([c[j] for c in cols], axis=0)
                     for j in range(len(cols[0])))
    outs = tuple(wrap(o, level) for o in outs)
    if inner_grad:
        # NOTE: the per-example calls are recorded on the physical values (a gradient
        # taken outside the vmap is right); on the logical tensors the outputs get a
        # node whose gradient raises, so a tg.grad inside the vmap is refused, never a
        # silent zero
        sources = tuple(a for a in args if isinstance(a, TensorBase) and a.requires_grad)
        _engine.attach_function_node(f"{cls.__name__}_in_vmap", _RefusingContext(cls.__name__),
                                     _refuse_grad_inside_vmap, sources, outs,
                                     (True,) * len(sources))
    return outs[0] if single else outs


class _RefusingContext:
    _replay_backward = True

    def __init__(self, name):
        self.name = name

    def _release(self):
        pass


def _refuse_grad_inside_vmap(ctx, *grads):
    raise NotImplementedError(
        f"{ctx.name}: a tg.Function differentiated inside tg.vmap (tg.grad inside the "
        f"vmap) is not supported: its backward computes on one example's arrays; take the "
        f"gradient outside the vmap, or write the function with tapegrad ops")


# ---------------------------------------------------------------------------------------
# what the engine asks of batched tensors (set_forward's hooks)
# ---------------------------------------------------------------------------------------

def detached(entries):
    """The entries a detached alias of a tensor keeps: its batch entries, with detached
    physical values (forward-mode tangents are dropped, as PyTorch's detach does)."""
    out = {k: _Batch(v.value.detach()) for k, v in entries.items() if type(v) is _Batch}
    return out or None


def check_inplace(name, t, others):
    if is_batched(t) or any(is_batched(o) for o in others):
        raise RuntimeError(
            f"vmap: {name} (in place) on a batched tensor, or writing a batched value into "
            f"a tensor in place, is not supported inside tg.vmap; use the out-of-place op "
            f"(shape {tuple(t.shape)})")


def check_backward(tensors):
    """.backward() inside vmap would accumulate per-example gradients into .grad of
    tensors that live outside it; refused, as torch.func does."""
    if any(is_batched(t) for t in tensors):
        raise RuntimeError(
            "vmap: .backward() of a batched tensor inside tg.vmap is not supported (it would "
            "write per-example gradients into .grad); use tg.func.grad or tg.grad inside "
            "the vmap, or call .backward() on the vmap's result outside it")


def check_array_rule(name, entries):
    """A gradient rule registered twice_differentiable=False computes on arrays, which a
    batched tensor does not have: refused inside vmap, naming it."""
    if any(d and any(type(v) is _Batch and k in _sizes for k, v in d.items())
           for d in entries):
        raise RuntimeError(
            f"vmap: the gradient rule of '{name}' is registered with "
            f"twice_differentiable=False (it computes on arrays, not with tapegrad ops), so "
            f"it cannot run on batched tensors inside tg.vmap (tg.grad inside the vmap); "
            f"take the gradient outside the vmap")


def batched_index(x, index):
    """``x[index]`` for one integer index tensor batched inside tg.vmap: NumPy's x[i] for
    an integer array i is take(x, i, axis=0) (negative indices wrap, out of range raises),
    whose batching rule gathers per example. None for anything else (refused by
    check_index: a boolean mask's result shape differs per example)."""
    if is_batched(index) and index.dtype.kind in "iu" and x.ndim >= 1:
        return _engine.lookup("take")(x, index, axis=0)
    return None


def check_index(t):
    if is_batched(t):
        raise RuntimeError(
            "vmap: a batched tensor used inside an index (x[i, j], x[..., i], x[i] = v) "
            "inside tg.vmap is not supported: its values differ per example; x[i] alone "
            "works, and tg.take(x, i, axis) / tg.take_along_axis(x, i, axis) cover the "
            "other axes")
    if batch_entries(t):
        raise _leak_error("indexing")


def check_read(t, what):
    if is_batched(t):
        raise RuntimeError(
            f"vmap: {what} of a batched tensor (logical shape {tuple(t.shape)}) inside "
            f"tg.vmap: its value differs per example, so data-dependent Python control "
            f"flow and conversions to Python/NumPy values are not supported; use tensor "
            f"ops (tg.where instead of if/else)")
    if batch_entries(t):
        raise _leak_error(f"{what}")


# ---------------------------------------------------------------------------------------
# random numbers inside vmap (tg.vmap's randomness=)
# ---------------------------------------------------------------------------------------

def random_levels(who):
    """The open batch levels whose examples draw different numbers, outermost first;
    raises under randomness="error"."""
    levels = [k for k in _forward.open_levels() if k in _sizes]
    for k in levels:
        if _randomness[k] == "error":
            raise RuntimeError(
                f"vmap: {who} draws random numbers inside tg.vmap(..., randomness='error') "
                f"(the default); pass randomness='different' (each example its own draws) "
                f"or 'same' (one draw shared by all examples)")
    return [k for k in levels if _randomness[k] == "different"]


def wrap_random(arr_tensor, levels):
    """A tensor drawn with the batch sizes of `levels` in front, as a logical tensor."""
    t = arr_tensor
    for k in levels:
        t = wrap(t, k)
    return t


def random_shape(levels, shape):
    return tuple(_sizes[k] for k in levels) + tuple(shape)


# ---------------------------------------------------------------------------------------
# value checks inside vmap (a helper for plugins: compile_check on batched tensors)
# ---------------------------------------------------------------------------------------

def _all_examples(t):
    """(array, levels) of a tensor: its values for every example, unwrapped through each
    batch level it is batched at (open or not), the vmapped axes first, one per level of
    `levels` (ascending: outermost first)."""
    unwrapped = []
    while True:
        entries = batch_entries(t)
        if not entries:
            break
        (level, t), = entries.items()      # (wrap gives a tensor one batch entry)
        unwrapped.append(level)
    a = np.asarray(t.detach().numpy())
    # the last level unwrapped is the array's first axis
    axes = unwrapped[::-1]
    order = sorted(range(len(axes)), key=axes.__getitem__)
    a = a.transpose(tuple(order) + tuple(range(len(axes), a.ndim)))
    return a, sorted(axes)


def check_values(check, *tensors):
    """``compile_check(check, *tensors)`` that also works on batched tensors: inside
    tg.vmap (a gradient rule's check on logical tensors) ``check`` runs once per example,
    on that example's values -- a check may compare values across a tensor (a rank
    against the largest singular value), so it never sees several examples at once. A
    tg.compile that records such a call runs its signature eagerly (a replay would check
    the stacked values)."""
    from ._compile import compile_check, run_eagerly
    tensors = tuple(t for t in tensors if isinstance(t, TensorBase))
    if not any(batch_entries(t) for t in tensors):
        return compile_check(check, *tensors)
    run_eagerly("a value check on batched (tg.vmap) tensors runs per example")
    parts = [_all_examples(t) for t in tensors]
    levels = sorted({k for _, ks in parts for k in ks})
    sizes = {}
    for a, ks in parts:
        for i, k in enumerate(ks):
            sizes[k] = a.shape[i]
    batch = tuple(sizes[k] for k in levels)
    arrays = []
    for (a, ks), t in zip(parts, tensors):
        # the levels a tensor is not batched at become unit axes, then every example's
        # values are there for every index of the common batch shape
        shape = tuple(sizes[k] if k in ks else 1 for k in levels) + tuple(t.shape)
        arrays.append(np.broadcast_to(a.reshape(shape), batch + tuple(t.shape)))
    for index in np.ndindex(*batch):
        check(*[a[index] for a in arrays])
