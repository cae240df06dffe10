"""Forward-mode automatic differentiation: tangents carried by tensors through op calls.

The engine's half is small (see _engine.pxd, ``TensorBase._tangents``): while a forward
level is open, an op any of whose tensor inputs carries a tangent is handed to
:func:`dispatch` here instead of running its kernel. This module computes the primal with
the op's kernel and the output's tangent with the op's JVP rule (``register_op(jvp=)``),
and attaches it. The public transforms (``tg.jvp``, ``tg.jacfwd``, ``tg.forward_ad``, ...)
are in tapegrad-higher; they open and close levels with :func:`enter_level` /
:func:`exit_level`.

Note: [forward levels]
Each ``tg.jvp`` (or ``dual_level()``) opens a level with a fresh id; ids only grow and are
never reused, so a tangent left on a tensor after its level closed is simply ignored (it
can never be mistaken for the tangent of a later level). A tensor's ``_tangents`` maps
level id -> tangent, and a tangent is a Tensor that may itself carry tangents of *outer*
(lower-id) levels: nested levels are how forward-over-forward (third derivatives, jacfwd
of jacfwd) works. An op call whose inputs carry tangents at several levels is processed
from the innermost (highest) level k down: the primal and the tangents of levels < k
come from the same call made with level k hidden (the recursion), then the level-k
tangent is the JVP rule evaluated with levels >= k hidden -- the rule's own ops see
only outer levels, so the tangent gets its outer-level tangents (the cross terms) and no
tangent of its own level. That is the order JAX's interpreter stack gives (the innermost
trace's rule runs on the outer traces), and hiding a level while its own rule runs is
what prevents perturbation confusion.

Note: [forward mode and reverse mode together]
JVP rules are written in tapegrad ops, so (a) reverse over forward works: with grad mode
on, the rule's ops are recorded like any others and a tangent is differentiable in
reverse mode; (b) forward over reverse works: values a node saves keep their tangents
(the SavedTensor shares the tensor's dict), the rules a backward runs are op calls on
them, so a gradient computed inside a level carries the tangent of the gradient (a
Hessian-vector product) -- the engine's raw-array fast paths (gradient accumulation,
aux arrays) step aside while a level is open. Grad mode does not affect forward mode
(as in PyTorch: tangents flow under tg.no_grad()).

Note: [ops without a JVP rule]
An op registered without ``jvp=`` falls back to the double-VJP: its VJP rule is linear in
the cotangent u, so J v = d/du <vjp(u), v>, which one reverse pass over the rule gives
exactly (never an approximation). It is computed on detached copies of the inputs (so the
nested backward cannot reach a graph another backward owns), which makes that tangent a
constant for reverse mode: when an input or tangent requires grad (grad mode on), the
tangent is connected to them through a node whose gradient raises, so differentiating it
in reverse mode is refused instead of giving a silently missing dependence (forward over
reverse, which does not differentiate tangents in reverse, is fine). A one-time ``ForwardFallbackWarning`` names
the op.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np

from . import _batching, _engine
from ._engine import TensorBase, new_tensor, run_backward
from ._grad_mode import enable_grad


class ForwardFallbackWarning(UserWarning):
    """An op without a JVP rule was differentiated in forward mode by the double-VJP."""


_levels: list[int] = []        # ids of the open levels, innermost last
_next_id = [1]
_lock = threading.Lock()
# The highest level id an op call may see: None = all open levels. Lowered while a
# level's own JVP rule runs (see Note: [forward levels]).
_cap: list = [None]
_warned: set = set()
_kinds: dict = {}          # open level -> "forward" | "batch"


def enter_level(kind: str = "forward") -> int:
    """Open a level -- "forward" (tangents) or "batch" (vmap, see _batching.py) --;
    returns its id (the key of its entries in tensors' ``_tangents``)."""
    with _lock:
        level = _next_id[0]
        _next_id[0] += 1
        _levels.append(level)
        _kinds[level] = kind
        _engine.set_forward(True, dispatch, _batching)
    return level


def exit_level(level: int) -> None:
    """Close `level`, which must be the innermost open one."""
    with _lock:
        if not _levels or _levels[-1] != level:
            raise RuntimeError(f"forward level {level} is not the innermost open level "
                               f"(open: {_levels}); levels must be closed in reverse order")
        _levels.pop()
        _kinds.pop(level, None)
        if not _levels:
            _engine.set_forward(False)


def current_level():
    """The id of the innermost open level, or None."""
    return _levels[-1] if _levels else None


def is_open(level) -> bool:
    return level in _levels


def open_levels():
    """The ids of the open levels, outermost first."""
    return list(_levels)


def tangent_of(x, level):
    """The tangent of tensor `x` at `level`, or None."""
    if isinstance(x, TensorBase) and x._tangents:
        t = x._tangents.get(level)
        return None if type(t) is _batching._Batch else t
    return None


def set_tangent(x, level, tangent):
    """Attach `tangent` to `x` at `level` (in place on x's dict)."""
    if x._tangents is None:
        x._tangents = {}
    x._tangents[level] = tangent


def detached_dual(x):
    """A detached copy of tensor x (same data, no graph) that keeps x's tangents (and,
    if x is batched inside a vmap, its per-example values, detached too)."""
    d = x.detach()
    if x._tangents:
        kept = dict(x._tangents)
        if d._tangents:
            kept.update(d._tangents)        # the batch entries, detached
        d._tangents = kept
    return d


def _relevant_level(inputs, cap):
    """The highest open level <= cap at which some input carries a tangent, or None."""
    best = None
    for x in inputs:
        if isinstance(x, TensorBase) and x._tangents:
            for level in x._tangents:
                if (cap is None or level <= cap) and (best is None or level > best) \
                        and level in _levels:
                    best = level
    return best


def dispatch(op, inputs, kwargs):
    """Run `op` on `inputs` (some carry tangents) and attach the output's tangents."""
    level = _relevant_level(inputs, _cap[0])
    if level is None:
        return _engine.apply_plain(op, inputs, kwargs)
    if _kinds[level] == "batch":
        return _batching.dispatch_batch(op, level, inputs, kwargs)
    saved_cap = _cap[0]
    _cap[0] = level - 1
    try:
        ans = dispatch(op, inputs, kwargs)
        tangent = _output_tangent(op, level, ans, inputs, kwargs)
    finally:
        _cap[0] = saved_cap
    if tangent is not None:
        set_tangent(ans, level, tangent)
    return ans


def _is_float(x):
    return isinstance(x, TensorBase) and x.dtype.kind in "fc"


def _output_tangent(op, level, ans, inputs, kwargs):
    if (op.vjp is None and op.jvp is None) or not _is_float(ans):
        return None     # not differentiable (a comparison, an index)
    # NOTE: an op with a JVP rule and no VJP (a backward op computed on arrays, as the
    # LSTM's backward through time) is differentiable in forward mode only: its rule
    # takes every input's tangent, whatever `differentiable` says for reverse mode
    forward_only = op.vjp is None
    tangents = []
    for i, x in enumerate(inputs):
        t = tangent_of(x, level)
        if t is not None and not forward_only and not op.is_differentiable(i):
            if op.not_implemented and i in op.not_implemented:
                # as reverse mode refuses a tensor there that requires grad
                _engine._refuse_unimplemented_gradient(op, i, x)
            t = None
        tangents.append(t)
    if all(t is None for t in tangents):
        return None
    if not op.supports_complex:
        _refuse_complex_tangents(op, inputs, tangents, ans)
    rule = op.jvp
    if rule is None:
        tangent = _double_vjp(op, tuple(tangents), ans, inputs, kwargs)
    else:
        try:
            tangent = rule(tuple(tangents), ans, *inputs, **kwargs)
        except Exception as exc:
            _engine.add_note(exc, f"(while computing the forward-mode tangent of '{op.name}')")
            raise
    return _fit(op, tangent, ans)


def _fit(op, tangent, ans):
    """The rule's result as a tensor of ans's shape and dtype."""
    if tangent is None:
        raise RuntimeError(f"the JVP rule of '{op.name}' returned None, but an input has a "
                           f"tangent; a rule returns zeros_like(ans) where the derivative is 0")
    if not isinstance(tangent, TensorBase):
        tangent = new_tensor(ans.device.asarray(np.asarray(tangent, dtype=ans.dtype)),
                             ans.device)
    if tangent.shape != ans.shape:
        try:
            tangent = _engine.lookup("broadcast_to")(tangent, shape=ans.shape)
        except (ValueError, RuntimeError) as exc:
            raise RuntimeError(
                f"the JVP rule of '{op.name}' returned a tangent of shape {tangent.shape}, "
                f"which does not broadcast to the output's shape {ans.shape}") from exc
    if tangent.dtype != ans.dtype:
        if tangent.dtype.kind == "c" and ans.dtype.kind != "c":
            # a real primal's tangent is real: the real part (as reverse mode's gradient
            # projection, see Note: [complex tensors] in _engine.pyx)
            tangent = _engine.lookup("real")(tangent)
        if tangent.dtype != ans.dtype:
            tangent = tangent.astype(ans.dtype)
    return tangent


def _refuse_complex_tangents(op, inputs, tangents, ans):
    """An op not registered with complex=True must not push a complex tangent (its JVP
    rule is written for real inputs): TypeError, as reverse mode's refusal."""
    if ans.dtype.kind == "c" or any(
            t is not None and (t.dtype.kind == "c" or x.dtype.kind == "c")
            for x, t in zip(inputs, tangents)):
        _engine.check_complex_op(op, tuple(inputs), ans._data if ans.dtype.kind == "c"
                                 else next(t._data for t in tangents if t is not None))


def _fresh_leaf(x):
    leaf = detached_dual(x)
    leaf.requires_grad_(True)
    return leaf


def _double_vjp(op, tangents, ans, inputs, kwargs):
    """J v of an op without a JVP rule from its VJP (see Note: [ops without a JVP rule])."""
    if op.name not in _warned:
        _warned.add(op.name)
        warnings.warn(f"'{op.name}' has no JVP rule: forward mode computes its tangent with "
                      f"the double-VJP trick (exact, about 2-3x the cost of the op); "
                      f"register_op(..., jvp=) makes it direct", ForwardFallbackWarning,
                      stacklevel=3)
    # NOTE: inputs with a tangent become fresh leaves that require grad: rules skip the
    # gradient of an input that needs none (tg.needs_grad), which would read as a zero
    # tangent
    xs = tuple(_fresh_leaf(x) if t is not None else
               detached_dual(x) if isinstance(x, TensorBase) else x
               for x, t in zip(inputs, tangents))
    ts = tuple(None if t is None else detached_dual(t) for t in tangents)
    a = detached_dual(ans)
    u = new_tensor(ans.device.zeros(ans.shape, ans.dtype), ans.device, True)
    params = dict(kwargs)
    if op.n_aux:
        params["aux"] = None
    with enable_grad():
        grads = op.vjp(u, a, *xs, **params)
        if not isinstance(grads, tuple):
            grads = (grads,)
        total = None
        for gi, ti in zip(grads, ts):
            if gi is None or ti is None:
                continue
            term = (gi * ti).sum()      # broadcasting sums gi down to ti's shape
            total = term if total is None else total + term
        if total is None or not total.requires_grad:
            return _engine.lookup("zeros_like")(ans)
        # create_graph=False: the rules still push the outer levels' tangents (forward
        # mode does not need recording), and the result is a constant for reverse mode
        # (which the check above made sure nobody needs)
        (jv,) = run_backward((total,), (new_tensor(total.device.ones((), total.dtype),
                                                   total.device),),
                             True, False, (u,), True)
    jv = _engine.lookup("zeros_like")(ans) if jv is None else detached_dual(jv)
    sources = tuple(x for x in tuple(inputs) + tuple(t for t in tangents if t is not None)
                    if isinstance(x, TensorBase) and x.requires_grad)
    if sources and _engine.is_grad_enabled():
        jv = _poisoned(jv, op.name, sources)
    return jv


class _FallbackContext:
    _replay_backward = True         # its backward raises, whatever the values

    def __init__(self, op_name):
        self.op_name = op_name

    def _release(self):
        pass


def _refuse_reverse_over_fallback(ctx, g):
    raise NotImplementedError(
        f"'{ctx.op_name}' has no forward-mode (JVP) rule: its tangent was computed by the "
        f"double-VJP fallback on detached inputs, which reverse mode cannot differentiate "
        f"(reverse over forward). Register a rule with register_op(..., jvp=).")


def _poisoned(jv, op_name, sources):
    """jv, connected in reverse mode to `sources` through a node whose gradient raises:
    differentiating the fallback's tangent in reverse mode is refused, never a silent
    zero (as for twice_differentiable=False rules)."""
    out = new_tensor(jv._data, jv.device)
    out._tangents = jv._tangents
    _engine.attach_function_node(f"{op_name}_jvp_fallback", _FallbackContext(op_name),
                                 _refuse_reverse_over_fallback, sources, (out,),
                                 (True,) * len(sources))
    return out


# ---------------------------------------------------------------------------------------
# tg.Function in forward mode
# ---------------------------------------------------------------------------------------

def function_level(cls, args):
    """The level at which tg.Function `cls` must push tangents for `args`, or None.

    A Function's forward may compute on arrays, so its outputs get tangents only from its
    own ``jvp(ctx, *tangents)``: without one it is refused (never a silent zero tangent).
    Only one level at a time is supported (nested forward levels through a Function are
    refused)."""
    cap = _cap[0]
    levels = set()
    for a in args:
        if isinstance(a, TensorBase) and a._tangents:
            levels.update(k for k in a._tangents if k in _levels and (cap is None or k <= cap))
    if not levels:
        return None
    if any(_kinds[k] == "batch" for k in levels):
        return "batch"
    if getattr(cls, "jvp", None) is None or getattr(cls.jvp, "_tapegrad_default", False):
        raise NotImplementedError(
            f"{cls.__name__}: a tg.Function needs a forward-mode rule to be used in forward "
            f"mode (an input carries a tangent): define "
            f"`@staticmethod def jvp(ctx, *tangents)` returning the output tangent(s), as "
            f"torch.autograd.Function's jvp")
    if len(levels) > 1 or any(
            isinstance(t, TensorBase) and t._tangents and any(k in _levels for k in t._tangents)
            for a in args if isinstance(a, TensorBase) and a._tangents
            for t in a._tangents.values()):
        raise NotImplementedError(
            f"{cls.__name__}: nested forward levels through a tg.Function are not supported")
    return levels.pop()


class hidden:
    """Context manager: op calls inside do not see `level` (nor levels above it)."""

    def __init__(self, level):
        self.level = level

    def __enter__(self):
        self.saved = _cap[0]
        _cap[0] = self.level - 1

    def __exit__(self, *exc):
        _cap[0] = self.saved
