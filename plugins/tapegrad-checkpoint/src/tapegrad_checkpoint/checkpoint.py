"""``tg.checkpoint``: run a function keeping only its inputs, and recompute it during
backward; ``tg.checkpoint_sequential`` and ``CheckpointManager`` apply it to sequences of
layers under a strategy.

``tg.checkpoint`` is a function that also carries the strategy classes as attributes
(``tg.checkpoint.SqrtN()``, ``Every(k)``, ``Selective(p)``), ``CheckpointManager``,
``Segment`` and ``Strategy``, so one name gives the whole feature.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Mapping
from typing import Any

import tapegrad as tg
from tapegrad import _engine

from .strategies import Every, Segment, Selective, SqrtN, Strategy, plan_for

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointManager"]

_Tensor = _engine.TensorBase

# Note: [how a checkpoint is recorded]
# 1. Forward. `fn` runs under grad mode on stand-ins of its tensor inputs: a fresh leaf for
#    each input that requires grad (the input itself otherwise). The graph it records is
#    dropped when checkpoint() returns -- only the inputs are kept -- but first it is
#    walked to find the leaves `fn` reached that are not its arguments: parameters of a
#    Module, tensors in closures. They become inputs of the checkpoint node, so their
#    gradients leave it by an edge like any op's (tg.grad, create_graph and hooks then
#    work as without checkpointing). Hooks that `fn` registers on its intermediates land
#    on this discarded graph, so they fire only in the recomputation: once per backward.
# 2. The outputs share the arrays `fn` computed and hang off one `tg.Function` node,
#    "Checkpoint", whose ctx saves the input tensors (not the parameters: they are
#    referenced weakly, as every graph reaches leaves). The generator state of every
#    device is saved before `fn` runs.
# 3. Backward (Checkpoint.backward). `fn` reruns under grad mode on detached inputs, with
#    the saved generator states restored (Dropout draws the same mask) and the current
#    ones put back afterwards; the gradients are backpropagated through the rerun by
#    `run_backward(..., inputs=...)` (tg.grad semantics: nothing is accumulated) to the
#    inputs and parameters, and returned along the node's edges. The parameters' hooks
#    are suspended meanwhile: the outer backward runs them when their gradient arrives.
# 4. create_graph=True. Then the gradient must depend differentiably on the inputs,
#    parameters and incoming gradients, yet the rerun must not walk into the outer graph
#    (two traversals may not share nodes). So the vector-Jacobian product of the segment
#    is itself checkpointed: checkpoint(vjp, *inputs, *grads), whose forward reruns `fn`
#    and backpropagates with create_graph=True on stand-ins, and whose backward reruns
#    that. Any order of derivative works by the same step.


# -- nested structures of tensors ----------------------------------------------------------

class _Slot:
    """Where the `index`-th tensor of a flattened structure was."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def _flatten(obj: Any, out: list) -> Any:
    """`obj` with every tensor (inside lists, tuples, namedtuples and dicts) replaced by a
    `_Slot`; the tensors are appended to `out`."""
    if isinstance(obj, _Tensor):
        out.append(obj)
        return _Slot(len(out) - 1)
    kind = type(obj)
    if kind is tuple or kind is list:
        return kind([_flatten(item, out) for item in obj])
    if kind is dict:
        return {key: _flatten(value, out) for key, value in obj.items()}
    if _is_namedtuple(obj):
        return kind(*[_flatten(item, out) for item in obj])
    return obj


def _fill(spec: Any, values: Any) -> Any:
    """The structure `_flatten` described, with its tensors taken from `values`."""
    if isinstance(spec, _Slot):
        return values[spec.index]
    kind = type(spec)
    if kind is tuple or kind is list:
        return kind([_fill(item, values) for item in spec])
    if kind is dict:
        return {key: _fill(value, values) for key, value in spec.items()}
    if _is_namedtuple(spec):
        return kind(*[_fill(item, values) for item in spec])
    return spec


# -- the recorded segment ------------------------------------------------------------------

class _Segment:
    """What a checkpoint node needs to rerun its function. It holds no tensor: the inputs
    are saved on the ctx, the parameters referenced weakly."""

    __slots__ = ("fn", "spec", "n_inputs", "needs", "params", "param_versions", "read",
                 "constants_read", "out_meta", "rng_state", "outputs", "ctx")

    def call(self, inputs):
        args, kwargs = _fill(self.spec, inputs)
        return self.fn(*args, **kwargs)

    def live_params(self) -> list:
        return [ref() for ref in self.params]

    def describe(self) -> str:
        name = getattr(self.fn, "__qualname__", None) or type(self.fn).__name__
        return f"checkpoint({name})"

    def check_unmodified(self) -> None:
        """Raise, as the plain call's backward would, if what the forward read was modified
        in place since: a parameter, or a value an op of the segment saved (a constant
        from a closure). The inputs are checked by ctx.saved_tensors."""
        for k, (p, version) in enumerate(zip(self.live_params(), self.param_versions)):
            if p is not None and p._version != version:
                raise RuntimeError(
                    f"one of the values needed for gradient computation has been modified by "
                    f"an in-place operation: parameter {k} of {self.describe()} (shape "
                    f"{p.shape}, {p.dtype}) is at version {p._version}; the checkpointed "
                    f"forward read it at version {version}, and rerunning it now would use "
                    f"the new value. Modify it after backward(), or out of place.")
        # NOTE: a constant the segment made itself is gone by now (or, if it lives on,
        # is made anew by the rerun): only tensors still alive are read again.
        constants = [(vc, *rest) for ref, vc, *rest in self.constants_read if ref() is not None]
        for vc, version, op, i, shape, dtype in self.read + constants:
            if vc.value != version:
                raise RuntimeError(
                    f"one of the values needed for gradient computation has been modified by "
                    f"an in-place operation: input {i} of '{op}' in {self.describe()} (shape "
                    f"{shape}, {dtype}) is at version {vc.value}; '{op}' read it at version "
                    f"{version}, and rerunning the segment now would use the new value. "
                    f"Modify it after backward(), or out of place (.clone() it first).")


class Checkpoint(tg.Function):
    """The node of a checkpointed segment: inputs (the segment's tensor arguments, then the
    parameters it reached), outputs (its tensor results). See Note: [how a checkpoint is
    recorded]."""

    # Its backward reruns the segment and backpropagates through it with registered ops:
    # what it runs does not depend on the gradient's values, so tg.compile replays it.
    replay_backward = True

    @staticmethod
    def forward(ctx, seg, *tensors):
        ctx.segment = seg
        ctx.save_for_backward(*tensors[:seg.n_inputs])
        seg.ctx = ctx
        return tuple(seg.outputs)     # computed already, by checkpoint(); only recorded here

    @staticmethod
    def backward(ctx, *grads):
        seg = ctx.segment
        inputs = ctx.saved_tensors
        if tg.is_grad_enabled():       # the outer backward has create_graph=True
            return (None, *_recorded_vjp(seg, inputs, grads))
        stand_ins = [t.detach().requires_grad_() if need else t.detach()
                     for t, need in zip(inputs, seg.needs)]
        return (None, *_vjp(seg, stand_ins, grads, create_graph=False))


def checkpoint(fn, *args, preserve_rng_state=True, **kwargs):
    """``fn(*args, **kwargs)``, keeping only the inputs for backward: `fn`'s intermediates
    are not saved, and backward recomputes them by running `fn` again.

    Memory for time: a checkpointed segment costs one extra forward pass during backward
    and keeps, between forward and backward, only its inputs instead of everything its ops
    save. Arguments and results may be tensors (several, in tuples, lists or dicts) or
    anything else (passed through). Gradients reach the tensor arguments that require grad
    and every parameter `fn` uses (a Module's weights, leaves in closures); they equal the
    gradients of the plain call bit for bit. Random ops (Dropout) draw the same numbers when
    rerun: the generator state of every device is saved before `fn` runs and restored for
    the rerun (``preserve_rng_state=False`` skips that, for functions without randomness).
    ``tg.grad``, hooks (a hook `fn` registers fires once per backward) and
    ``create_graph=True`` (the checkpointed backward is itself differentiable) work as
    without checkpointing. Under ``tg.no_grad()`` it is a plain call.

    `fn` must compute the same thing when rerun (same inputs, same module state). A tensor
    it uses that requires grad and is not a leaf must be one of its arguments.

    >>> import tapegrad as tg
    >>> tg.manual_seed(0)
    >>> block = tg.nn.Sequential(tg.nn.Linear(4, 4), tg.nn.Tanh(), tg.nn.Dropout(0.5))
    >>> x = tg.random.randn(3, 4, requires_grad=True)
    >>> state = tg.random.get_state()
    >>> y = tg.checkpoint(block, x)
    >>> y.grad_fn
    <Checkpoint node>
    >>> y.sum().backward()
    >>> checkpointed = block[0].weight.grad.numpy().copy()
    >>> block.zero_grad(); tg.random.set_state(state)
    >>> block(x).sum().backward()           # the plain call, with the same dropout mask
    >>> bool((block[0].weight.grad.numpy() == checkpointed).all())
    True
    """
    if not callable(fn):
        raise TypeError(f"checkpoint: fn must be callable, got {type(fn).__name__} (call it "
                        f"as tg.checkpoint(fn, *args))")
    if not tg.is_grad_enabled():
        return fn(*args, **kwargs)

    inputs: list = []
    seg = _Segment()
    seg.fn = fn
    seg.spec = _flatten((args, kwargs), inputs)
    seg.n_inputs = len(inputs)
    seg.needs = tuple(t.requires_grad for t in inputs)
    seg.rng_state = tg.random.get_state() if preserve_rng_state else None
    stand_ins = [t.detach().requires_grad_() if need else t
                 for t, need in zip(inputs, seg.needs)]
    constants_read: list = []
    outer_log = _engine.log_reads(constants_read)
    try:
        result = seg.call(stand_ins)
    finally:
        _engine.log_reads(outer_log)
        if outer_log is not None:          # a checkpoint inside another one: it reads them too
            outer_log.extend(constants_read)
    outputs: list = []
    out_spec = _flatten(result, outputs)
    params, read = _walk_forward(outputs, stand_ins)
    if not outputs or not (any(seg.needs) or params):
        return result                  # nothing to differentiate: nothing was recorded
    seg.params = tuple(weakref.ref(p) for p in params)
    seg.param_versions = tuple(p._version for p in params)
    seg.read = read
    seg.constants_read = constants_read
    seg.out_meta = tuple((o.shape, o.dtype) for o in outputs)
    seg.outputs = outputs
    try:
        recorded = Checkpoint.apply(seg, *inputs, *params)
    finally:
        seg.outputs = None             # the forward's graph dies with this frame
        seg.ctx = None
    return _fill(out_spec, recorded)


def _walk_forward(outputs, stand_ins) -> tuple[list, list]:
    """(the leaves that require grad in the graph behind `outputs`, other than
    `stand_ins`, in the order first met; the version records of every value its nodes
    saved). An iterative walk: no recursion.

    NOTE: the rerun must read what the forward read. Parameters and saved values (a
    closure's constant that matmul saved) are version-checked before it
    (_Segment.check_unmodified), and so are the constants the forward read (logged by the
    engine while it ran: _engine.log_reads), whether an op saved them or not."""
    own = {id(t) for t in stand_ins}
    found, found_ids, seen, stack = [], set(), set(), []
    read = []

    def leaf(t):
        if id(t) not in own and id(t) not in found_ids:
            found_ids.add(id(t))
            found.append(t)

    for o in outputs:
        node = o.grad_fn
        if node is None:
            if o.requires_grad:        # fn returned a leaf (a parameter) as it is
                leaf(o)
        elif node not in seen:
            seen.add(node)
            stack.append(node)
    while stack:
        node = stack.pop()
        read.extend((vc, version, node.name, i, shape, dtype)
                    for vc, version, i, shape, dtype in node.saved_versions())
        for nxt, _ in node.next_functions:
            if nxt is None:
                continue
            if isinstance(nxt, _Tensor):
                leaf(nxt)
            elif nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return found, read


# -- backward --------------------------------------------------------------------------------

def _vjp(seg: _Segment, xs, grads, create_graph: bool) -> list:
    """Rerun the segment on `xs` (tensors used as they are) and backpropagate `grads`
    through the rerun: one gradient (or None) per input, then per parameter."""
    seg.check_unmodified()
    params = seg.live_params()
    with _rng_replay(seg.rng_state), tg.enable_grad():
        result = seg.call(xs)
    outputs: list = []
    _flatten(result, outputs)
    _check_same(seg, outputs)
    roots, seeds = [], []
    for out, g in zip(outputs, grads):
        if out.requires_grad and g is not None:
            roots.append(out)
            seeds.append(g)
    n = seg.n_inputs
    wrt_pos = [i for i in range(n) if seg.needs[i] and xs[i].requires_grad]
    wrt_pos += [n + j for j, p in enumerate(params) if p is not None]
    grads_out: list = [None] * (n + len(params))
    if not roots or not wrt_pos:
        return grads_out
    wrt = tuple(xs[i] if i < n else params[i - n] for i in wrt_pos)
    try:
        # input_hooks=False: the parameters' hooks run once, in the outer backward, when
        # their gradients arrive through the checkpoint node's edges.
        got = _engine.run_backward(tuple(roots), tuple(seeds), None, create_graph, wrt, True,
                                   False)
    except RuntimeError as exc:
        # NOTE: the rerun's graph is new, so a node another backward owns or already
        # freed can only be outside the segment, reached through a closure.
        if "at the same time" in str(exc) or "second time" in str(exc):
            _engine.add_note(
                exc,
                f"({seg.describe()}: rerunning the segment reached a node of the graph "
                f"outside it: a tensor the function uses that requires grad and is not a "
                f"leaf must be passed to tg.checkpoint as an argument, not taken from "
                f"a closure.)")
        raise
    for i, g in zip(wrt_pos, got):
        grads_out[i] = g
    return grads_out


def _recorded_vjp(seg: _Segment, inputs, grads) -> tuple:
    """The segment's VJP as a differentiable function of inputs, parameters and grads
    (create_graph=True): itself a checkpointed segment (Note: [how a checkpoint is
    recorded], 4)."""
    n = seg.n_inputs

    def segment_vjp(*tensors):
        return tuple(_vjp(seg, tensors[:n], tensors[n:], create_graph=True))

    segment_vjp.__qualname__ = f"vjp of {seg.describe()}"
    # NOTE: no state of its own to preserve: _vjp replays the forward's generator state.
    return checkpoint(segment_vjp, *inputs, *grads, preserve_rng_state=False)


def _check_same(seg: _Segment, outputs) -> None:
    meta = tuple((o.shape, o.dtype) for o in outputs)
    if meta != seg.out_meta:
        def show(m):
            return ", ".join(f"{shape} {dtype}" for shape, dtype in m) or "none"
        raise RuntimeError(
            f"{seg.describe()}: rerunning the function during backward gave tensors "
            f"[{show(meta)}], but the forward pass gave [{show(seg.out_meta)}]. A "
            f"checkpointed function must compute the same thing from the same inputs (its "
            f"random numbers are replayed; other state, such as a module switched between "
            f"train() and eval(), is not).")


@contextlib.contextmanager
def _rng_replay(state):
    """Run with the generator states `state` (from tg.random.get_state()), then put back
    the states there were before."""
    if state is None:
        yield
        return
    current = tg.random.get_state(list(state))
    tg.random.set_state(state)
    try:
        yield
    finally:
        tg.random.set_state(current)


# -- sequences of layers ---------------------------------------------------------------------

_DEFAULT = SqrtN()


def _named_layers(layers) -> list[tuple[str, Any]]:
    """[(name, layer)] of a Sequential/ModuleList (child names), a dict (its keys) or any
    sequence of callables ("0", "1", ...)."""
    if isinstance(layers, Mapping):
        named = [(str(k), v) for k, v in layers.items()]
    elif hasattr(layers, "named_children") and hasattr(layers, "__iter__"):
        items = list(layers)
        names = [name for name, _ in layers.named_children()]
        # NOTE: named_children lists a module used twice once; fall back to positions then.
        if len(names) != len(items):
            names = [str(i) for i in range(len(items))]
        named = list(zip(names, items))
    elif hasattr(layers, "__iter__") and not isinstance(layers, (str, bytes, _Tensor)):
        named = [(str(i), layer) for i, layer in enumerate(layers)]
    else:
        raise TypeError(f"checkpoint_sequential: layers must be a tg.nn.Sequential, a "
                        f"ModuleList, a list or a dict of callables; got "
                        f"{type(layers).__name__}")
    for name, layer in named:
        if not callable(layer):
            raise TypeError(f"checkpoint_sequential: layer {name!r} is not callable "
                            f"({type(layer).__name__})")
    return named


def _run_layers(layers, start, stop):
    def run(x):
        for layer in layers:
            x = layer(x)
        return x
    run.__qualname__ = f"layers[{start}:{stop}]"
    return run


def checkpoint_sequential(layers, x, strategy: Strategy | None = _DEFAULT, *,
                          preserve_rng_state=True):
    """Apply `layers` one after the other to `x`, checkpointing the segments `strategy`
    chooses: ``tg.checkpoint.SqrtN()`` (the default: about sqrt(n) segments of about
    sqrt(n) layers, the last one plain), ``Every(k)`` (segments of k layers, the last one
    plain), ``Selective(predicate)`` (exactly the layers it picks) or ``None`` (no
    checkpointing). Results and gradients equal the plain loop's bit for bit.

    `layers` is a ``tg.nn.Sequential``, a ``ModuleList``, a list of callables or a dict of
    them (its keys name the layers for ``Selective``).

    >>> import tapegrad as tg
    >>> tg.manual_seed(0)
    >>> net = tg.nn.Sequential(*[tg.nn.Linear(8, 8) for _ in range(9)])
    >>> x = tg.random.randn(2, 8)
    >>> y = tg.checkpoint_sequential(net, x, strategy=tg.checkpoint.SqrtN())
    >>> report = tg.memory.saved_bytes(y)    # segments 3 + 3 checkpointed, the last 3 plain
    >>> report.nodes
    {'linear': 3, 'Checkpoint': 2}
    >>> report.activations // x.numpy().nbytes, tg.memory.saved_bytes(net(x)).activations // 128
    (5, 9)
    """
    named = _named_layers(layers)
    segments = plan_for(strategy, named)
    if not tg.is_grad_enabled():
        segments = [Segment(0, len(named), False)] if named else []
    for seg in segments:
        chunk = [layer for _, layer in named[seg.start:seg.stop]]
        if seg.checkpoint:
            x = checkpoint(_run_layers(chunk, seg.start, seg.stop), x,
                           preserve_rng_state=preserve_rng_state)
        else:
            for layer in chunk:
                x = layer(x)
    return x


class CheckpointManager:
    """Checkpointing as a switchable part of a model: holds a strategy, and applies it
    where a Module's ``forward`` asks.

    ``manager(layers, x)`` runs a sequence of layers under the strategy
    (``checkpoint_sequential``); ``manager.checkpoint(fn, *args)`` checkpoints one call.
    ``manager.enabled = False`` (or ``strategy=None``) turns both into plain calls, and
    under ``tg.no_grad()`` (evaluation) they are plain calls anyway. ``manager.plan(layers)``
    shows the segments the strategy makes.

    >>> import tapegrad as tg
    >>> class Deep(tg.nn.Module):
    ...     def __init__(self, n):
    ...         super().__init__()
    ...         self.layers = tg.nn.Sequential(*[tg.nn.Linear(4, 4) for _ in range(n)])
    ...         self.checkpointing = tg.checkpoint.CheckpointManager(tg.checkpoint.Every(2))
    ...     def forward(self, x):
    ...         return self.checkpointing(self.layers, x)
    >>> model = Deep(5)
    >>> [(s.start, s.stop, s.checkpoint) for s in model.checkpointing.plan(model.layers)]
    [(0, 2, True), (2, 4, True), (4, 5, False)]
    >>> model(tg.ones((1, 4))).grad_fn.next_functions[0][0].name
    'Checkpoint'
    >>> model.checkpointing.enabled = False
    >>> model(tg.ones((1, 4))).grad_fn.next_functions[0][0].name
    'linear'
    """

    def __init__(self, strategy: Strategy | None = _DEFAULT, *, enabled: bool = True,
                 preserve_rng_state: bool = True):
        plan_for(strategy, [])                # check it now, not at the first forward
        self.strategy = strategy
        self.enabled = bool(enabled)
        self.preserve_rng_state = bool(preserve_rng_state)

    def __call__(self, layers, x):
        return checkpoint_sequential(layers, x, self.strategy if self.enabled else None,
                                     preserve_rng_state=self.preserve_rng_state)

    def checkpoint(self, fn, *args, **kwargs):
        """``tg.checkpoint(fn, *args, **kwargs)`` when enabled, else ``fn(*args, **kwargs)``."""
        if not self.enabled:
            return fn(*args, **kwargs)
        return checkpoint(fn, *args, preserve_rng_state=self.preserve_rng_state, **kwargs)

    def plan(self, layers) -> list[Segment]:
        """The segments ``self(layers, x)`` would run (one plain segment when disabled)."""
        return plan_for(self.strategy if self.enabled else None, _named_layers(layers))

    def __repr__(self) -> str:
        state = "" if self.enabled else ", enabled=False"
        return f"CheckpointManager({self.strategy!r}{state})"


# `tg.checkpoint` is this function, and carries the rest of the feature as attributes.
for _name, _value in (("SqrtN", SqrtN), ("Every", Every), ("Selective", Selective),
                      ("Strategy", Strategy), ("Segment", Segment),
                      ("CheckpointManager", CheckpointManager),
                      ("checkpoint_sequential", checkpoint_sequential)):
    setattr(checkpoint, _name, _value)
del _name, _value
