"""Custom differentiable functions without writing a plugin (the
``torch.autograd.Function`` pattern)."""

from . import _engine, _forward
from ._engine import GRAD_ENABLED, TensorBase, attach_function_node, new_tensor


def _shares_storage(o, args):
    """Whether output `o` may share storage with a tensor argument (a view of it)."""
    return any(isinstance(a, TensorBase) and a.device is o.device
               and o.device.may_share_memory(o._data, a._data) for a in args)


class FunctionCtx:
    """The ``ctx`` passed to ``forward`` and ``backward``; store anything on it."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()
        self._versions = ()
        self._released = False

    def save_for_backward(self, *tensors):
        """Keep tensors for backward; modifying them in place afterwards is detected."""
        for t in tensors:
            if t is not None and not isinstance(t, TensorBase):
                raise TypeError(f"save_for_backward takes tensors (or None), got {type(t).__name__}")
        self._saved = tensors
        self._versions = tuple(None if t is None else t._version for t in tensors)

    @property
    def saved_tensors(self):
        if self._released:
            raise RuntimeError(
                "Trying to backward through the graph a second time: the tensors this Function "
                "saved were freed by an earlier backward(); pass retain_graph=True to it")
        for i, (t, v) in enumerate(zip(self._saved, self._versions)):
            if t is not None and t._version != v:
                raise RuntimeError(
                    f"one of the values needed for gradient computation has been modified by an "
                    f"in-place operation: saved tensor {i} (shape {t.shape}) is at version "
                    f"{t._version}; it was saved at version {v}")
        return self._saved

    def _release(self):
        self._saved = ()
        self._released = True


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``.

    ``forward`` runs with grad mode off and returns a Tensor or a tuple of Tensors.
    ``backward`` gets one gradient per output and returns one gradient (or None) per
    argument of ``forward``. Written with tapegrad ops, it is itself differentiable.

    >>> import tapegrad as tg
    >>> class Triple(tg.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return x + x + x
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         return g + g + g
    >>> x = tg.tensor([3.0], requires_grad=True)
    >>> Triple.apply(x).backward(); x.grad.item()
    3.0

    ``replay_backward``: whether tg.compile may record ``backward`` once and replay its
    kernels with other gradients. False by default: ``backward`` is Python that may branch
    on the gradient's values, so a compiled function whose graph runs it runs eagerly
    (with a ``tg.CompileWarning``). Set it True on a class whose ``backward`` runs the same
    ops whatever the values (as the registered ops' rules do).
    """

    replay_backward = False

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a tg.Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a tg.Function subclass must define backward(ctx, *grads)")

    @staticmethod
    def jvp(ctx, *tangents):
        """Forward mode (optional): the output tangent(s) given one tangent (or None) per
        argument of ``forward``, written with tapegrad ops; `ctx` is forward's."""
        raise NotImplementedError("a tg.Function subclass used in forward mode must define "
                                  "jvp(ctx, *tangents)")
    jvp._tapegrad_default = True

    @classmethod
    def apply(cls, *args, **kwargs):
        needs = tuple(isinstance(a, TensorBase) and a.requires_grad for a in args)
        if kwargs and GRAD_ENABLED.get():
            for k, v in kwargs.items():
                if isinstance(v, TensorBase) and v.requires_grad:
                    # NOTE: backward returns one gradient per positional argument; a
                    # keyword tensor's gradient would be silently dropped.
                    raise TypeError(
                        f"{cls.__name__}.apply: the tensor passed by keyword '{k}' requires "
                        f"grad, but only positional arguments are differentiated; pass it "
                        f"positionally (backward returns one gradient per positional "
                        f"argument), or .detach() it")
        ctx = FunctionCtx(needs)
        ctx._replay_backward = cls.replay_backward
        level = _forward.function_level(cls, args) if _engine.forward_active() else None
        if level == "batch":
            from . import _batching
            return _batching.function_loop(cls, args, kwargs)
        token = GRAD_ENABLED.set(False)
        try:
            if level is None:
                out = cls.forward(ctx, *args, **kwargs)
            else:
                with _forward.hidden(level):
                    out = cls.forward(ctx, *args, **kwargs)
        finally:
            GRAD_ENABLED.reset(token)
        if level is not None:
            out = _with_tangents(cls, ctx, args, out, level)
        if not GRAD_ENABLED.get() or not any(needs):
            return out
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        fixed = []
        for i, o in enumerate(outs):
            if not isinstance(o, TensorBase):
                raise TypeError(f"{cls.__name__}.forward must return Tensors; output {i} is {type(o).__name__}")
            if any(o is a for a in args) or _shares_storage(o, args):
                # An input returned as is, or a tensor sharing an input's storage: the
                # output is an alias of it (PyTorch makes it a view): it shares the data
                # and version counter, so in-place on it is refused as on any view, or
                # bumps the input's version. NOTE: o's counter is the input's when o is a
                # view of it or a detach()ed stand-in (tg.checkpoint's).
                o = o.detach()
            elif o.grad_fn is not None or o.requires_grad:
                # A tensor with history: give the output its own identity so that
                # recording does not rewrite that tensor's graph.
                o = new_tensor(o._data, o.device)
            if level is not None and outs[i]._tangents:
                o._tangents = dict(outs[i]._tangents)
            fixed.append(o)
        attach_function_node(cls.__name__, ctx, cls.backward, args, tuple(fixed), needs)
        return fixed[0] if single else tuple(fixed)


def _with_tangents(cls, ctx, args, out, level):
    """forward's outputs, as new tensors that carry the tangents cls.jvp gives at `level`."""
    tangents = tuple(_forward.tangent_of(a, level) for a in args)
    with _forward.hidden(level):
        found = cls.jvp(ctx, *tangents)
    single = not isinstance(out, tuple)
    outs = (out,) if single else out
    found = (found,) if single and not isinstance(found, tuple) else tuple(found)
    if len(found) != len(outs):
        raise RuntimeError(f"{cls.__name__}.jvp returned {len(found)} tangents for "
                           f"{len(outs)} outputs")
    result = []
    for o, t in zip(outs, found):
        o = o.detach() if o.requires_grad or o._tangents else o
        if t is not None:
            if not isinstance(t, TensorBase) or t.shape != o.shape:
                raise RuntimeError(f"{cls.__name__}.jvp must return a tensor of each output's "
                                   f"shape {o.shape}, got {getattr(t, 'shape', type(t).__name__)}")
            o = new_tensor(o._data, o.device) if o is out else o
            _forward.set_tangent(o, level, t)
        result.append(o)
    return result[0] if single else tuple(result)
