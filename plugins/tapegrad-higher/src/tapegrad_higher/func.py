"""``tg.func``: function transforms in torch.func's (and JAX's) style.

Each takes a function and returns a function, so they compose: ``vmap(grad(loss))``
gives per-example gradients, ``jacfwd(jacrev(f))`` a Hessian, ``grad(grad(f))`` a second
derivative. ``functional_call(module, params, args)`` runs a tg.nn module with other
parameter tensors, which is how a model's loss becomes a function of its parameters.

>>> import tapegrad as tg
>>> tg.func.grad(lambda x: (x ** 3).sum())(tg.tensor([1.0, 2.0]))
tensor([ 3., 12.])
"""

from __future__ import annotations

import contextlib
import functools

import tapegrad as tg
from tapegrad import _engine, _forward

from .forward import _argnums, jacfwd, jacrev, linearize
from .functional import _float_input
from .forward import jvp as _jvp
from .vmap import _flatten, vmap

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
           "linearize", "functional_call"]


def _differentiable_copy(x, i, who):
    """Input `i` as a tensor that requires grad, to differentiate at: connected to x's own
    graph when x requires grad with grad mode on (so that the transform nests: grad of
    grad), else a fresh leaf; tangents and vmap's per-example values are kept."""
    x = _float_input(x, i, who)
    if x.requires_grad and tg.is_grad_enabled():
        return tg.reshape(x, x.shape)
    return _forward.detached_dual(x).requires_grad_(True)


def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning ``(gradient, value)`` of scalar-valued `func` with respect to
    the positional arguments `argnums` (an int, or a tuple: then a tuple of gradients;
    an argument may be a tuple/list/dict of tensors, and its gradient has that structure).
    ``has_aux=True``: func returns ``(value, aux)``, and the result is
    ``(gradient, (value, aux))``. As torch.func.grad_and_value; gradients of inputs the
    value does not depend on are zeros.

    >>> import tapegrad as tg
    >>> g, v = tg.func.grad_and_value(lambda x: (x ** 2).sum())(tg.tensor([1.0, 3.0]))
    >>> g, v
    (tensor([2., 6.]), tensor(10.))
    """
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums, _ = _argnums(argnums, len(args), "grad")
        args = list(args)
        wrt, rebuilds = [], []
        outer_graph = False
        for a in nums:
            leaves, rebuild = _flatten(args[a])
            outer_graph |= any(isinstance(x, _engine.TensorBase) and x.requires_grad
                               for x in leaves)
            copies = [_differentiable_copy(x, i, "grad") for i, x in enumerate(leaves)]
            args[a] = rebuild(copies)
            wrt.append(copies)
            rebuilds.append(rebuild)
        create_graph = outer_graph and tg.is_grad_enabled()
        with tg.enable_grad():
            out = func(*args, **kwargs)
            aux = None
            if has_aux:
                if not isinstance(out, tuple) or len(out) != 2:
                    raise ValueError("grad(has_aux=True): func must return a tuple "
                                     "(value, aux)")
                out, aux = out
            if not isinstance(out, _engine.TensorBase) or out.ndim != 0:
                raise ValueError(
                    f"grad: func must return a scalar tensor (0-d), got "
                    f"{getattr(out, 'shape', type(out).__name__)}; reduce it (.sum(), "
                    f".mean()) or use tg.func.vjp / tg.jacrev for non-scalar outputs")
            flat = tuple(x for group in wrt for x in group)
            if out.requires_grad:
                grads = _engine.run_backward((out,), (None,), None, create_graph, flat, True)
            else:
                grads = (None,) * len(flat)
        grads = [tg.zeros_like(x) if g is None else g for g, x in zip(grads, flat)]
        if not create_graph:
            grads = [_forward.detached_dual(g) for g in grads]
            out = _forward.detached_dual(out)
        results, i = [], 0
        for group, rebuild in zip(wrt, rebuilds):
            results.append(rebuild(grads[i:i + len(group)]))
            i += len(group)
        g = results[0] if isinstance(argnums, int) else tuple(results)
        return (g, (out, aux)) if has_aux else (g, out)

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The gradient of scalar-valued `func` as a function (torch.func.grad, jax.grad):
    ``grad(f)(x)`` is df/dx at x; see grad_and_value for `argnums` and `has_aux` (the
    result is then ``(gradient, aux)``).

    >>> import tapegrad as tg
    >>> d2 = tg.func.grad(tg.func.grad(lambda x: x ** 3))      # 6 x
    >>> d2(tg.tensor(2.0))
    tensor(12.)
    """
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper


def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn)``: ``vjp_fn(v)`` is the tuple of the vector-Jacobian
    products ``v^T J`` with respect to each primal, as torch.func.vjp (``has_aux``: func
    returns ``(output, aux)`` and the result is ``(output, vjp_fn, aux)``). vjp_fn can be
    called several times.

    >>> import tapegrad as tg
    >>> out, vjp_fn = tg.func.vjp(lambda x: x ** 2, tg.tensor([1.0, 3.0]))
    >>> vjp_fn(tg.ones(2))
    (tensor([2., 6.]),)
    """
    xs = [_differentiable_copy(x, i, "vjp") for i, x in enumerate(primals)]
    create_graph = any(isinstance(x, _engine.TensorBase) and x.requires_grad
                       for x in primals) and tg.is_grad_enabled()
    with tg.enable_grad():
        out = func(*xs)
    aux = None
    if has_aux:
        out, aux = out
    outs, rebuild = _flatten(out)

    def vjp_fn(cotangents):
        vs, _ = _flatten(cotangents)
        if len(vs) != len(outs):
            raise ValueError(f"vjp_fn: got {len(vs)} cotangents for {len(outs)} outputs")
        live = [(o, v) for o, v in zip(outs, vs) if o.requires_grad]
        if not live:
            return tuple(tg.zeros_like(x) for x in xs)
        with tg.enable_grad():
            grads = _engine.run_backward(tuple(o for o, _ in live), tuple(v for _, v in live),
                                         True, create_graph, tuple(xs), True)
        grads = [tg.zeros_like(x) if g is None else g for g, x in zip(grads, xs)]
        if not create_graph:
            grads = [_forward.detached_dual(g) for g in grads]
        return tuple(grads)

    shown = out if create_graph else rebuild([_forward.detached_dual(o) for o in outs])
    return (shown, vjp_fn, aux) if has_aux else (shown, vjp_fn)


def jvp(func, primals, tangents):
    """``(func(*primals), J tangents)`` in forward mode, as torch.func.jvp (primals and
    tangents are tuples, one tangent per primal).

    >>> import tapegrad as tg
    >>> tg.func.jvp(lambda x: x ** 2, (tg.tensor(3.0),), (tg.tensor(1.0),))
    (tensor(9.), tensor(6.))
    """
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise TypeError("func.jvp: primals and tangents must be tuples (one tangent per "
                        "primal), as torch.func.jvp")
    return _jvp(lambda *xs: func(*xs), primals, tangents)


def hessian(func, argnums=0):
    """The Hessian of scalar-valued `func` as a function: forward over reverse,
    ``jacfwd(jacrev(func, argnums), argnums)`` (torch.func.hessian).

    >>> import tapegrad as tg
    >>> tg.func.hessian(lambda x: (x ** 3).sum())(tg.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)


@contextlib.contextmanager
def _swapped(module, values):
    """Module `module` with the tensors of `values` ({dotted name: tensor}) in place of
    its parameters/buffers of those names, restored on exit."""
    saved = []
    try:
        for name, value in values.items():
            prefix, _, leaf = name.rpartition(".")
            owner = module.get_submodule(prefix) if prefix else module
            state = vars(owner)
            if leaf not in state:
                raise KeyError(f"functional_call: {type(module).__name__} has no parameter or "
                               f"buffer '{name}'")
            saved.append((state, leaf, state[leaf]))
            # NOTE: written into the instance dict, bypassing Module.__setattr__, which
            # (rightly) refuses a non-leaf tensor as a parameter: here the parameter is
            # a function argument, possibly batched by vmap or part of a graph
            state[leaf] = value
        yield
    finally:
        for state, leaf, old in reversed(saved):
            state[leaf] = old


def functional_call(module, parameter_and_buffer_dicts, args=(), kwargs=None, *,
                    strict=False):
    """``module(*args, **kwargs)`` computed with the tensors of
    `parameter_and_buffer_dicts` ({dotted name: tensor}, or a tuple of such dicts) in
    place of the module's own parameters and buffers of those names, which are restored
    afterwards; as torch.func.functional_call. ``strict=True``: every parameter and
    buffer must be given. With ``tg.func.grad`` and ``tg.vmap`` it gives per-example
    gradients of a model (examples/per_sample_grads.py).

    With a tg.nn module: ``tg.func.functional_call(lin, {"weight": w, "bias": b}, (x,))``.
    Any object with ``get_submodule`` whose state lives in instance attributes works:

    >>> import tapegrad as tg
    >>> class Scale:
    ...     def __init__(self):
    ...         self.w = tg.tensor(2.0)
    ...     def get_submodule(self, name):
    ...         return self
    ...     def __call__(self, x):
    ...         return self.w * x
    >>> m = Scale()
    >>> tg.func.functional_call(m, {"w": tg.tensor(3.0)}, (tg.tensor(1.5),))
    tensor(4.5)
    >>> m.w                                      # restored
    tensor(2.)
    """
    dicts = (parameter_and_buffer_dicts if isinstance(parameter_and_buffer_dicts, (tuple, list))
             else (parameter_and_buffer_dicts,))
    values = {}
    for d in dicts:
        for k, v in d.items():
            if k in values:
                raise ValueError(f"functional_call: '{k}' is given twice")
            values[k] = v
    if strict:
        names = {n for n, _ in module.named_parameters()} | {n for n, _ in module.named_buffers()}
        missing = sorted(names - set(values))
        unexpected = sorted(set(values) - names)
        if missing or unexpected:
            raise RuntimeError(f"functional_call(strict=True): missing {missing}, unexpected "
                               f"{unexpected}")
    if not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, values):
        return module(*args, **(kwargs or {}))
