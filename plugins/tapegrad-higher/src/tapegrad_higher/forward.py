"""Forward-mode transforms: ``tg.jvp``, ``tg.linearize``, ``tg.jacfwd``, ``tg.jacrev`` and
the forward-over-reverse Hessian.

``tg.jvp`` pushes tangents through the ops' JVP rules (true forward mode: one evaluation
of f carrying tangents, no backward pass); see tapegrad/_forward.py for the engine side
and docs/higher-order.md for when forward mode is the cheaper one.

Note: [composing transforms]
Every transform here keeps (a) the reverse-mode graph of its results when an input
requires grad with grad mode on, and (b) the tangents of outer forward levels, so that
they nest as JAX's do: ``jacfwd(jacrev(f))``, ``jacrev(jacfwd(f))``, ``jvp`` of a
``grad``, third derivatives. (a) is ``create_graph=None`` ("auto") in ``tg.jvp``;
PyTorch's torch.autograd.functional.jvp detaches unless told otherwise, and a nested
transform then reads a zero derivative.
"""

from __future__ import annotations

import tapegrad as tg
from tapegrad import _engine, _forward

from .forward_ad import make_dual
from .functional import (_as_tuple, _backward, _call, _fill, _float_input, _one_hots,
                         _scalar_output, _structure, _transform, _vectors, _zeros)


def _tensors(values, who):
    return tuple(_float_input(x, i, who) for i, x in enumerate(values))


def _auto_graph(create_graph, xs):
    if create_graph is None:
        return tg.is_grad_enabled() and any(x.requires_grad for x in xs)
    return bool(create_graph)


def _cut(t, level, keep_graph):
    """t without the (closed) `level`'s tangent; detached from reverse mode unless
    keep_graph. Tangents of outer levels stay (nesting)."""
    if not keep_graph:
        t = _forward.detached_dual(t)
    elif t._tangents and level in t._tangents:
        t = _engine.apply_plain(_engine.lookup("reshape"), (t,), {"shape": t.shape})
        t._tangents = {}
    else:
        return t
    if t._tangents:
        t._tangents = {k: v for k, v in t._tangents.items() if k != level} or None
    return t


def _forward_pass(f, xs, tangents, keep_graph, who):
    """(outputs, output tangents or None, outputs-were-a-tuple) of f at duals xs + tangents."""
    level = _forward.enter_level()
    try:
        duals = []
        for x, t in zip(xs, tangents):
            base = x if keep_graph else _forward.detached_dual(x)
            duals.append(base if t is None else make_dual(base, t, level=level))
        outs, out_tuple = _call(f, duals, who)
        found = [_forward.tangent_of(o, level) for o in outs]
    finally:
        _forward.exit_level(level)
    outs = tuple(_cut(o, level, keep_graph) for o in outs)
    found = [None if t is None else _cut(t, level, keep_graph) for t in found]
    return outs, found, out_tuple


@_transform
def jvp(f, inputs, v=None, *, create_graph=None, strict=False):
    """``(f(inputs), J v)``: the Jacobian-vector product at `inputs` in direction `v`, in
    forward mode (one evaluation of f carrying tangents; J is never formed).

    `inputs` is a tensor or a tuple of tensors; `v` has their structure and shapes (it may
    be omitted for a single input with one element); the tangent has the structure of f's
    outputs (zeros where an output does not depend on the inputs; ``strict=True`` makes
    that an error). ``create_graph``: keep the results differentiable in reverse mode;
    None (default) keeps them when an input requires grad (see Note: [composing
    transforms]).

    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0])
    >>> out, t = tg.jvp(lambda x: tg.stack([x[0] * x[1], tg.sin(x[0])]), x, tg.tensor([1.0, 0.0]))
    >>> t.numpy().round(4)                          # d/dx0 of (x0 x1, sin x0)
    array([2.    , 0.5403])
    """
    xs_in, in_tuple = _as_tuple(inputs)
    if not xs_in:
        raise ValueError("jvp: inputs is empty")
    xs = _tensors(xs_in, "jvp")
    vs = _vectors(v, xs, "jvp", "input")
    keep = _auto_graph(create_graph, xs)
    outs, tangents, out_tuple = _forward_pass(f, xs, vs, keep, "jvp")
    tangents = _fill(tangents, outs, strict, "jvp", "output")
    return (outs if out_tuple else outs[0]), (tangents if out_tuple else tangents[0])


def linearize(f, *primals):
    """``(f(*primals), f_jvp)`` where ``f_jvp(*tangents)`` is the JVP of f at `primals`
    (JAX's ``jax.linearize``).

    NOTE: f_jvp evaluates f again with the tangents (forward mode), rather than a stored
    linear program as JAX does: each call costs one evaluation of f plus its JVP rules.

    >>> import tapegrad as tg
    >>> out, f_jvp = tg.linearize(lambda x: x ** 3, tg.tensor(2.0))
    >>> float(out), float(f_jvp(tg.tensor(1.0)))
    (8.0, 12.0)
    """
    xs = _tensors(primals, "linearize")
    if not xs:
        raise ValueError("linearize: needs at least one primal")
    with tg.enable_grad():
        out = f(*xs)

    def f_jvp(*tangents):
        if len(tangents) != len(xs):
            raise TypeError(f"linearize: f_jvp takes {len(xs)} tangents (one per primal), "
                            f"got {len(tangents)}")
        return jvp(f, xs, tangents)[1]

    return out, f_jvp


def _argnums(argnums, nargs, who):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    if not nums:
        raise ValueError(f"{who}: argnums is empty")
    for n in nums:
        if not isinstance(n, int) or not -nargs <= n < nargs:
            raise ValueError(f"{who}: argnums {argnums!r} out of range for {nargs} "
                             f"positional arguments")
    return tuple(n % nargs for n in nums), single


def jacfwd(f, argnums=0):
    """The Jacobian of f in forward mode, as a function (JAX's ``jax.jacfwd``, PyTorch's
    ``torch.func.jacfwd``): one evaluation of f with tangents per input element.

    The result for output o and argument x has shape ``o.shape + x.shape``; with a tuple
    `argnums` a tuple (one per argument), with several outputs a tuple per output. Cheaper
    than :func:`jacrev` when f has more outputs than inputs.

    >>> import tapegrad as tg
    >>> tg.jacfwd(lambda x: x[0:2] * x[1:3])(tg.tensor([1.0, 2.0, 3.0]))
    tensor([[2., 1., 0.],
            [0., 3., 2.]])
    """
    def jacobian_fn(*args):
        nums, single = _argnums(argnums, len(args), "jacfwd")
        args = list(args)
        xs = _tensors([args[n] for n in nums], "jacfwd")
        keep = _auto_graph(None, xs)
        blocks = None
        outs = None
        out_tuple = False

        def g(*selected):
            full = list(args)
            for n, s in zip(nums, selected):
                full[n] = s
            return f(*full)

        for j, x in enumerate(xs):
            seeds = _one_hots(x)
            columns = None
            for e in range(x.size):
                (seed,) = seeds(e)
                tangents = [seed if i == j else None for i in range(len(xs))]
                with tg.enable_grad():
                    outs, found, out_tuple = _forward_pass(g, xs, tangents, keep, "jacfwd")
                if columns is None:
                    columns = [[] for _ in outs]
                for k, (o, t) in enumerate(zip(outs, found)):
                    columns[k].append(_zeros(o.shape, o) if t is None else t)
            if blocks is None:
                blocks = [[None] * len(xs) for _ in outs]
            for k, o in enumerate(outs):
                if x.size == 0 or columns is None:
                    blocks[k][j] = _zeros(o.shape + x.shape, x)
                else:
                    blocks[k][j] = tg.reshape(tg.stack(columns[k], axis=-1), o.shape + x.shape)
        if outs is None:        # every argument is empty: one plain call for the outputs
            outs, out_tuple = _as_tuple(f(*args))
            blocks = [[_zeros(o.shape + x.shape, x) for x in xs] for o in outs]
        return _structure(blocks, not single, out_tuple)

    return jacobian_fn


def jacrev(f, argnums=0):
    """The Jacobian of f in reverse mode, as a function (JAX's ``jax.jacrev``, PyTorch's
    ``torch.func.jacrev``): one backward pass per output element.

    Same result layout as :func:`jacfwd`; cheaper when f has fewer outputs than inputs.

    >>> import tapegrad as tg
    >>> tg.jacrev(lambda x: (x ** 2).sum())(tg.tensor([1.0, 2.0]))
    tensor([2., 4.])
    """
    def jacobian_fn(*args):
        nums, single = _argnums(argnums, len(args), "jacrev")
        args = list(args)
        xs = _tensors([args[n] for n in nums], "jacrev")

        def g(*selected):
            full = list(args)
            for n, s in zip(nums, selected):
                full[n] = s
            return f(*full)

        from .functional import jacobian
        return jacobian(g, xs[0] if single else xs, strategy="reverse-mode",
                        create_graph=_auto_graph(None, xs))

    return jacobian_fn


def hessian_forward_over_reverse(f, xs, in_tuple, create_graph, strict):
    """tg.hessian's ``outer_jacobian_strategy="forward-mode"``: column e of the Hessian is
    the tangent of grad f at x in direction e (one forward-mode pass through f and its
    backward per input element)."""
    keep = bool(create_graph) or _auto_graph(None, xs)
    blocks = [[None] * len(xs) for _ in xs]
    depends = [[False] * len(xs) for _ in xs]
    for j, x in enumerate(xs):
        seeds = _one_hots(x)
        columns = [[] for _ in xs]
        for e in range(x.size):
            (seed,) = seeds(e)
            tangents = [seed if i == j else None for i in range(len(xs))]

            def gradient(*zs):
                leaves = tuple(z if keep and z.requires_grad
                               else _forward.detached_dual(z).requires_grad_(True) for z in zs)
                out = _scalar_output(f, leaves, "hessian")
                grads = _backward((out,), (None,), keep, leaves)
                return _fill(grads, leaves, False, "hessian", "input")

            with tg.enable_grad():
                grads, found, _ = _forward_pass(gradient, xs, tangents, keep, "hessian")
            for i, (g, t) in enumerate(zip(grads, found)):
                columns[i].append(_zeros(g.shape, g) if t is None else t)
                depends[i][j] |= t is not None
        for i, xi in enumerate(xs):
            if x.size == 0:
                blocks[i][j] = _zeros(xi.shape + x.shape, x)
            else:
                blocks[i][j] = tg.reshape(tg.stack(columns[i], axis=-1), xi.shape + x.shape)
    if strict:
        for i in range(len(xs)):
            for j in range(len(xs)):
                if not depends[i][j]:
                    raise RuntimeError(f"hessian: the gradient of input {i} does not depend "
                                       f"on input {j} (strict=True)")
    return _structure(blocks, in_tuple, in_tuple)
