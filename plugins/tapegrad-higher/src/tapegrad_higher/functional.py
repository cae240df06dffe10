"""Functional transforms: ``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``hvp``.

Each takes a function ``f`` of tensors and the point to differentiate at, with PyTorch's
``torch.autograd.functional`` conventions: `inputs` is a tensor or a tuple of tensors,
results mirror that structure, the function's outputs come back detached unless
``create_graph=True``, and an output that does not depend on an input contributes zeros
(``strict=True`` makes that an error instead).

How each is computed (see Note: [how a Jacobian is assembled]; forward mode proper,
``tg.jvp``/``tg.jacfwd``, is in forward.py):

==========  ==================================================  ==========================
transform   method                                              cost (f = forward pass,
                                                                B = backward pass)
==========  ==================================================  ==========================
vjp         one backward seeded with v                          f + B
jacobian    m rows by m backward passes (m <= 2n), or n columns f + m B, or f + B(cg) +
            by the double-VJP (m > 2n); or all rows in one      n 2B; or f + one batched
            vmapped backward (``vectorize=True``)               B with ``vectorize=True``
hessian     jacobian of the gradient (taken with create_graph)  f + B + n passes (from 8 on,
                                                                replayed: Note below)
hvp         reverse-over-reverse: grad of (grad f . v)          f + B(create_graph) + B
==========  ==================================================  ==========================

Note: [how a Jacobian is assembled]
One backward pass gives one row (J^T u for a unit vector u). Rows when m <= 2n: one
backward per output element, the graph retained. Columns when m > 2n: the double-VJP,
one create_graph backward that builds g(u) = J^T u, then one backward of g per input
element; each of those runs through g's graph and, since the engine does not prune what
does not lead to the inputs asked for, back through f's, so it costs about two rows.
``vectorize=True`` maps the backward pass over all m unit vectors with tg.vmap: the VJP
rules of f's graph run once on a batch of cotangents (their batching rules), and f is
not evaluated again. That is exact for any f (it replaced a check that f treats a
leading batch axis independently); it is opt-in, as in PyTorch, because for small m the
per-row passes (replayed, below) cost less than the batched rules.

Note: [passes replayed from one recording]
The passes of a Jacobian (rows or columns) and of a Hessian all run the same kernels on
the same retained graph; only the seed's values differ. So from eight passes on, when
create_graph is off, the first pass is recorded with ``tg.compile`` and the others replay
its kernel list from Cython: no Python dispatch, no rule calls per pass (the 64-row
Hessian of W5: 2.6 ms -> 1.2 ms). The results equal one eager pass per row bit for bit.
It relies on what every first-party VJP rule does: run the same kernels whatever the
values of its gradient. A tg.Function's backward is user Python that may branch on them,
so a graph with one runs every pass eagerly; a tensor hook in the graph makes the
recording fall back to eager passes too (hooks are Python a replay would skip).
An op plugin whose rule branches on the values of `g` breaks that contract (the same one
tg.compile relies on), and gets the first pass's branch in every replayed pass.
"""

from __future__ import annotations

import functools

import numpy as np
import tapegrad as tg
from tapegrad import _engine, _forward

_NOT_TWICE = "not twice differentiable"        # the engine's message for such ops


# ---------------------------------------------------------------------------------------
# Inputs, outputs, seeds
# ---------------------------------------------------------------------------------------

def _transform(fn):
    """Run a transform with grad mode on, whatever the ambient mode, and cut its results'
    graph when that mode is off.

    NOTE: a transform's derivative must not depend on a context manager outside it
    (torch.func's rule): under tg.no_grad() the inputs' identity ops, f and the
    create_graph passes would record nothing and give zeros (tg.gradcheck evaluates a
    function under no_grad). Only the graph of the result follows the ambient mode.
    """
    @functools.wraps(fn)
    def run(*args, **kwargs):
        if tg.is_grad_enabled():
            return fn(*args, **kwargs)
        with tg.enable_grad():
            result = fn(*args, **kwargs)
        return _detached(result)
    return run


def _detached(value):
    if isinstance(value, _engine.TensorBase):
        # NOTE: keeps forward-mode tangents: a transform nested in tg.jvp must not drop
        # the outer level's tangent (that would read as a zero derivative)
        return _forward.detached_dual(value) if value.requires_grad else value
    if isinstance(value, tuple):
        return tuple(_detached(v) for v in value)
    return value

def _as_tuple(value):
    """(items, was_a_sequence)."""
    if isinstance(value, (tuple, list)):
        return tuple(value), True
    return (value,), False


# The transforms whose result is defined for complex inputs by the engine's convention
# (docs/autograd.md, "Complex numbers"): a VJP (v^H J, the .grad of a real loss), a JVP
# (J t) and a real loss's gradient. A Jacobian or Hessian of a complex function is not one
# complex matrix unless the function is holomorphic (and PyTorch's and JAX's differ there),
# so those refuse complex inputs instead of picking a convention silently.
_COMPLEX_TRANSFORMS = frozenset({"vjp", "jvp", "grad", "linearize"})


def _float_input(x, i, who):
    """Input `i` as a tensor (arrays and numbers converted); refused unless it is
    floating-point (only those can be differentiated), or complex for the transforms of
    _COMPLEX_TRANSFORMS."""
    if not isinstance(x, _engine.TensorBase):
        x = tg.asarray(x)
    kind = x.dtype.kind
    if kind == "c" and who not in _COMPLEX_TRANSFORMS:
        raise TypeError(f"{who}: input {i} is {x.dtype}; a {who} of a function of complex "
                        f"inputs is not supported (it is one complex matrix only for "
                        f"holomorphic functions): use tg.vjp / tg.jvp (or tg.func.grad of a "
                        f"real loss), or pass real and imaginary parts as real inputs")
    if kind != "f" and kind != "c":
        raise TypeError(f"{who}: input {i} has dtype {x.dtype}; only floating-point inputs "
                        f"can be differentiated (convert it with .astype(np.float64))")
    return x


def _prepare_inputs(inputs, create_graph, who):
    """Fresh tensors that require grad, one per input, to evaluate f at.

    Without create_graph they are new leaves sharing each input's data, so the results do
    not depend on any graph the inputs belong to. With create_graph, an input that already
    requires grad passes through an identity op, so the results stay differentiable with
    respect to it (nested transforms: the Hessian as a Jacobian of a Jacobian).
    """
    xs, is_tuple = _as_tuple(inputs)
    if not xs:
        raise ValueError(f"{who}: inputs is empty")
    out = []
    for i, x in enumerate(xs):
        x = _float_input(x, i, who)
        if create_graph and x.requires_grad:
            out.append(tg.reshape(x, x.shape))
        else:
            out.append(_forward.detached_dual(x).requires_grad_(True))
    return tuple(out), is_tuple


def _call(f, xs, who):
    """f(*xs) as (tuple of output tensors, was_a_sequence)."""
    with tg.enable_grad():
        result = f(*xs)
    outs, is_tuple = _as_tuple(result)
    if not outs:
        raise ValueError(f"{who}: f returned an empty sequence")
    for k, o in enumerate(outs):
        if not isinstance(o, _engine.TensorBase):
            raise TypeError(f"{who}: f must return a tensor or a tuple of tensors; output {k} "
                            f"is {type(o).__name__}")
    return outs, is_tuple


def _vectors(v, like, who, what):
    """`v` (None, a tensor or a tuple) as one tensor per entry of `like`, each checked."""
    if v is None:
        if len(like) == 1 and like[0].size == 1:
            t = like[0]
            return (tg.ones(t.shape, t.dtype, t.device),)
        raise ValueError(f"{who}: v may be omitted only when there is a single {what} with one "
                         f"element; pass v with the shape of each {what}")
    vs, _ = _as_tuple(v)
    if len(vs) != len(like):
        raise ValueError(f"{who}: got {len(vs)} vectors in v for {len(like)} {what}s")
    out = []
    for k, (u, t) in enumerate(zip(vs, like)):
        if not isinstance(u, _engine.TensorBase):
            u = tg.asarray(u, dtype=t.dtype, device=t.device)
        if u.shape != t.shape:
            raise ValueError(f"{who}: v[{k}] has shape {u.shape}, but {what} {k} has shape "
                             f"{t.shape}")
        out.append(u)
    return tuple(out)


def _zeros(shape, like):
    return tg.zeros(shape, like.dtype, like.device)


def _fill(grads, likes, strict, who, what):
    """None entries (no dependence) as zeros shaped like `likes`, or an error if strict."""
    out = []
    for i, (g, t) in enumerate(zip(grads, likes)):
        if g is None:
            if strict:
                raise RuntimeError(f"{who}: the output does not depend on {what} {i} "
                                   f"(strict=True)")
            g = _zeros(t.shape, t)
        out.append(g)
    return tuple(out)


# NOTE: seeds for up to this many passes are cut from one identity matrix (8 MiB in
# float64), each a view: one allocation instead of one per pass.
_EYE_MAX = 1024


def _one_hots(t):
    """seeds_of(r) for _passes: a constant tensor like `t` with a 1 at flat index r."""
    dev = t.device
    if dev.name == "cpu" and t.size <= _EYE_MAX:
        eye = np.eye(t.size, dtype=t.dtype).reshape((t.size,) + t.shape)
        return lambda r: (_engine.new_tensor(eye[r], dev),)
    return lambda r: (_one_hot(t, r),)


def _one_hot(t, index):
    """A constant tensor like `t` with a 1 at flat `index`."""
    dev = t.device
    arr = dev.zeros(t.shape, t.dtype)
    dev.setitem(arr, np.unravel_index(index, t.shape) if t.ndim else (), 1)
    return _engine.new_tensor(arr, dev)


def _result(outs, is_tuple, create_graph):
    outs = outs if create_graph else tuple(_forward.detached_dual(o) for o in outs)
    return outs if is_tuple else outs[0]


def _backward(outs, seeds, create_graph, xs):
    """Gradients of `outs` (seeded) with respect to `xs`; None where there is none.

    Outputs that do not require grad contribute nothing (the function is constant in the
    inputs there); the graph is retained, so the caller can run more passes."""
    live = [(o, s) for o, s in zip(outs, seeds) if o.requires_grad]
    if not live:
        return (None,) * len(xs)
    return _engine.run_backward(tuple(o for o, _ in live), tuple(s for _, s in live), True,
                                create_graph, xs, True)


# ---------------------------------------------------------------------------------------
# vjp, jvp, hvp
# ---------------------------------------------------------------------------------------

@_transform
def vjp(f, inputs, v=None, *, create_graph=False, strict=False):
    """``(f(inputs), v^T J)``: the vector-Jacobian product at `inputs` (one backward pass).

    `v` has the structure and shapes of f's outputs (it may be omitted when f returns one
    tensor with one element); the second result has the structure of `inputs`.

    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0])
    >>> out, g = tg.vjp(lambda x: x ** 2, x, tg.tensor([1.0, 10.0]))
    >>> out, g
    (tensor([1., 4.]), tensor([ 2., 40.]))
    """
    xs, in_tuple = _prepare_inputs(inputs, create_graph, "vjp")
    outs, out_tuple = _call(f, xs, "vjp")
    vs = _vectors(v, outs, "vjp", "output")
    grads = _fill(_backward(outs, vs, create_graph, xs), xs, strict, "vjp", "input")
    return _result(outs, out_tuple, create_graph), (grads if in_tuple else grads[0])


@_transform
def hvp(f, inputs, v=None, *, create_graph=False, strict=False):
    """``(f(inputs), H v)``: the Hessian of a scalar function times `v`, without forming H.

    Reverse-over-reverse: the gradient is taken with create_graph, and the gradient of
    ``<grad f, v>`` is H v (H is symmetric). Cost: one forward, one backward with
    create_graph, one backward through the gradient's graph. `v` has the structure and
    shapes of `inputs`.

    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0])
    >>> out, hv = tg.hvp(lambda x: (x ** 3).sum(), x, tg.tensor([1.0, 1.0]))
    >>> out, hv                                      # H = diag(6 x)
    (tensor(9.), tensor([ 6., 12.]))
    """
    xs, in_tuple = _prepare_inputs(inputs, create_graph, "hvp")
    out = _scalar_output(f, xs, "hvp")
    vs = _vectors(v, xs, "hvp", "input")
    grads = _backward((out,), (None,), True, xs)
    pairs = [(g, w) for g, w in zip(grads, vs) if g is not None and g.requires_grad]
    result = (None,) * len(xs)
    if pairs:
        result = _engine.run_backward(tuple(g for g, _ in pairs), tuple(w for _, w in pairs),
                                      True, create_graph, xs, True)
    result = _fill(result, xs, strict, "hvp", "input")
    return _result((out,), False, create_graph), (result if in_tuple else result[0])


def _scalar_output(f, xs, who):
    outs, out_tuple = _call(f, xs, who)
    if out_tuple or outs[0].size != 1:
        shapes = [o.shape for o in outs]
        raise ValueError(f"{who}: f must return a single tensor with one element (a scalar); "
                         f"it returned {'a tuple of shapes ' if out_tuple else 'shape '}"
                         f"{shapes if out_tuple else shapes[0]}")
    return outs[0]


# ---------------------------------------------------------------------------------------
# jacobian and hessian
# ---------------------------------------------------------------------------------------

@_transform
def jacobian(f, inputs, *, create_graph=False, strict=False, vectorize=False,
             strategy="auto"):
    """The Jacobian of f at `inputs`: d out / d x with out's shape, then x's.

    For an output of shape (a, b) and an input of shape (c,) the result has shape
    (a, b, c), as in PyTorch and JAX. With several inputs (a tuple) the result is a tuple
    with one block per input; with several outputs, a tuple per output; with both, a
    tuple (per output) of tuples (per input).

    strategy: ``"reverse-mode"`` computes the m rows (m = output elements) with one
    backward each; ``"forward-mode"`` the n columns (n = input elements) with the
    double-VJP trick, one backward each after one with create_graph (each costs about
    two rows); ``"auto"`` (default) picks rows when m <= 2n, else columns.
    ``vectorize=True`` instead computes every row in one pass: tg.vmap over the
    backward pass (exact for any f; faster when there are many rows).
    `create_graph=True` keeps the result differentiable (a Jacobian of a Jacobian).

    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0, 3.0])
    >>> tg.jacobian(lambda x: x[0:2] + x[1:3], x)
    tensor([[1., 1., 0.],
            [0., 1., 1.]])
    >>> tg.jacobian(lambda x: tg.reshape(x * x, (3, 1)), x).shape
    (3, 1, 3)
    """
    if strategy not in ("auto", "reverse-mode", "forward-mode"):
        raise ValueError(f"jacobian: strategy must be 'auto', 'reverse-mode' or 'forward-mode', "
                         f"got {strategy!r}")
    xs, in_tuple = _prepare_inputs(inputs, create_graph, "jacobian")
    outs, out_tuple = _call(f, xs, "jacobian")
    blocks = _jacobian_blocks(f, xs, outs, create_graph, vectorize, strategy, "jacobian")
    blocks = _fill_blocks(blocks, outs, xs, strict, "jacobian")
    return _structure(blocks, in_tuple, out_tuple)


@_transform
def hessian(f, inputs, *, create_graph=False, strict=False, vectorize=False,
            strategy="auto", outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar function f at `inputs`: shape x.shape + x.shape.

    With several inputs, a tuple of tuples: block (i, j) is d^2 f / dx_i dx_j with shape
    x_i.shape + x_j.shape. Computed as the Jacobian of the gradient (taken with
    create_graph): one forward, one backward, and n more passes through the gradient's
    graph (n = input elements), or one vmapped pass over that graph with
    ``vectorize=True``.
    ``outer_jacobian_strategy`` (PyTorch's name): ``"reverse-mode"`` (default) takes that
    Jacobian by reverse passes; ``"forward-mode"`` by forward mode over the gradient
    (forward over reverse: column e is the tangent of grad f in direction e; every op on
    the path needs a JVP rule or its double-VJP fallback).

    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0])
    >>> tg.hessian(lambda x: (x ** 2).sum() + x[0] * x[1], x)
    tensor([[2., 1.],
            [1., 2.]])
    """
    if outer_jacobian_strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f"hessian: outer_jacobian_strategy must be 'reverse-mode' or "
                         f"'forward-mode', got {outer_jacobian_strategy!r}")
    if outer_jacobian_strategy == "forward-mode":
        if vectorize:
            raise ValueError("hessian: vectorize=True is a reverse-mode option; it cannot be "
                             "combined with outer_jacobian_strategy='forward-mode'")
        from .forward import _tensors, hessian_forward_over_reverse
        xs_in, in_tuple = _as_tuple(inputs)
        if not xs_in:
            raise ValueError("hessian: inputs is empty")
        return hessian_forward_over_reverse(f, _tensors(xs_in, "hessian"), in_tuple,
                                            create_graph, strict)
    xs, in_tuple = _prepare_inputs(inputs, create_graph, "hessian")

    def gradient(*zs):
        out = _scalar_output(f, zs, "hessian")
        return _fill(_backward((out,), (None,), True, zs), zs, False, "hessian", "input")

    outs, _ = _call(gradient, xs, "hessian")
    blocks = _jacobian_blocks(gradient, xs, outs, create_graph, vectorize, strategy, "hessian")
    blocks = _fill_blocks(blocks, outs, xs, strict, "hessian")
    return _structure(blocks, in_tuple, in_tuple)


def _structure(blocks, in_tuple, out_tuple):
    rows = [tuple(row) if in_tuple else row[0] for row in blocks]
    return tuple(rows) if out_tuple else rows[0]


def _fill_blocks(blocks, outs, xs, strict, who):
    out = []
    for k, row in enumerate(blocks):
        filled = []
        for j, b in enumerate(row):
            if b is None:
                if strict:
                    raise RuntimeError(f"{who}: output {k} does not depend on input {j} "
                                       f"(strict=True)")
                b = _zeros(outs[k].shape + xs[j].shape, xs[j])
            filled.append(b)
        out.append(filled)
    return out


def _jacobian_blocks(f, xs, outs, create_graph, vectorize, strategy, who):
    """blocks[k][j]: d outs[k] / d xs[j] (shape out.shape + x.shape), None if zero."""
    if vectorize:
        return _batched(f, xs, outs, create_graph, who)
    m = sum(o.size for o in outs if o.requires_grad)
    n = sum(x.size for x in xs)
    # NOTE: a column costs about two rows (its pass runs through the gradient's graph and
    # back into f's), so "auto" takes columns only for Jacobians more than twice as tall
    # as wide.
    if strategy == "forward-mode" or (strategy == "auto" and m > 2 * n):
        try:
            return _columns(xs, outs, create_graph)
        except RuntimeError as exc:
            # NOTE: the double-VJP differentiates each rule in g; an op declared
            # twice_differentiable=False refuses that, but its rows are still fine.
            if strategy != "auto" or _NOT_TWICE not in str(exc):
                raise
    return _rows(xs, outs, create_graph)


def _rows(xs, outs, create_graph):
    """Reverse mode: one backward per output element (the graph is retained)."""
    blocks = []
    for out in outs:
        per_input = [[] for _ in xs]
        if out.requires_grad:
            for grads in _passes((out,), _one_hots(out), out.size, xs, create_graph):
                for j, g in enumerate(grads):
                    per_input[j].append(g)
        blocks.append([_assemble(parts, out.shape, x, leading=True)
                       for parts, x in zip(per_input, xs)])
    return blocks


def _columns(xs, outs, create_graph):
    """Double-VJP: g(u) = J^T u with u a leaf per output, then one backward of g per
    input element gives a column of every output's Jacobian."""
    live = [k for k, o in enumerate(outs) if o.requires_grad]
    blocks = [[None] * len(xs) for _ in outs]
    if not live:
        return blocks
    us = tuple(_engine.new_tensor(outs[k].device.zeros(outs[k].shape, outs[k].dtype),
                                  outs[k].device, True) for k in live)
    gs = _engine.run_backward(tuple(outs[k] for k in live), us, True, True, xs, True)
    for j, (x, g) in enumerate(zip(xs, gs)):
        if g is None or not g.requires_grad:        # g = J^T u does not depend on u: J = 0
            continue
        cols = [[] for _ in live]
        for found in _passes((g,), _one_hots(g), x.size, us, create_graph):
            for i, t in enumerate(found):
                cols[i].append(t)
        for i, k in enumerate(live):
            blocks[k][j] = _assemble(cols[i], outs[k].shape, x, leading=False)
    return blocks


# NOTE: recording a pass costs about four eager ones; below this many, just loop.
_REPLAY_FROM = 8


def _passes(roots, seeds_of, count, wrt, create_graph):
    """The gradients of `roots` with respect to `wrt` for seeds_of(0) ... seeds_of(count-1),
    one backward pass each, the graph retained (see Note: [passes replayed from one
    recording])."""

    def one_pass(*seeds):
        return _engine.run_backward(roots, seeds, True, create_graph, wrt, True)

    # NOTE: inside a forward level the passes carry tangents, which a replay would drop
    if (create_graph or count < _REPLAY_FROM or _engine.get_tracer() is not None
            or _forward.current_level() is not None or not _replayable(roots)):
        return [one_pass(*seeds_of(r)) for r in range(count)]
    present = None

    def present_gradients(*seeds):
        nonlocal present
        grads = one_pass(*seeds)
        present = tuple(g is not None for g in grads)
        return tuple(g for g in grads if g is not None)

    replay = tg.compile(present_gradients, cache_size=1)
    # A tensor hook in the graph makes the recording fall back to eager passes: still
    # right, and this is not the user's tg.compile to warn about.
    replay.warn_when_eager = False
    found = [replay(*seeds_of(r)) for r in range(count)]
    out = []
    for grads in found:
        it = iter(grads)
        out.append(tuple(next(it) if p else None for p in present))
    return out


def _replayable(roots):
    """Whether every node the passes run through is a registered op's: a tg.Function's
    backward is the user's Python, which may branch on the values of its gradient."""
    seen, stack = set(), [r.grad_fn for r in roots]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen or isinstance(node, tg.Tensor):
            continue
        if isinstance(node, _engine.FunctionNode):
            return False
        seen.add(id(node))
        stack.extend(n for n, _ in node.next_functions)
    return True


def _assemble(parts, out_shape, x, *, leading):
    """Rows (each x.shape; leading=True) or columns (each out_shape) into one block of
    shape out_shape + x.shape; None when every part is None."""
    if not parts or all(p is None for p in parts):
        return None
    like = next(p for p in parts if p is not None)
    parts = [_zeros(like.shape, like) if p is None else p for p in parts]
    if leading:
        return tg.reshape(tg.stack(parts, axis=0), out_shape + x.shape)
    return tg.reshape(tg.stack(parts, axis=-1), out_shape + x.shape)


def _batched(f, xs, outs, create_graph, who):
    """Every row of every output's Jacobian in one vmapped backward pass: the rows are
    J^T e_i for the unit vectors e_i, and tg.vmap maps the pullback over all of them at
    once (as torch.autograd.functional's vectorize=True). Exact for any f: f itself is
    not re-evaluated on a batch, only the VJP rules of its graph run batched."""
    from .vmap import vmap
    sizes = [o.size if o.requires_grad else 0 for o in outs]
    batch = sum(sizes)
    blocks = [[None] * len(xs) for _ in outs]
    live = [k for k in range(len(outs)) if sizes[k]]
    if not live:
        return blocks
    seeds, offsets, start = [], [], 0
    for k in live:
        o, m = outs[k], sizes[k]
        seed = np.zeros((batch, m), dtype=o.dtype)
        seed[start:start + m] = np.eye(m, dtype=o.dtype)
        seeds.append(tg.asarray(seed.reshape((batch,) + o.shape), device=o.device))
        offsets.append(start)
        start += m

    def pullback(*us):
        grads = _engine.run_backward(tuple(outs[k] for k in live), tuple(us), True,
                                     create_graph, tuple(xs), True)
        return tuple(_zeros(x.shape, x) if g is None else g for g, x in zip(grads, xs))

    rows = vmap(pullback)(*seeds)               # one per input: (batch,) + x.shape
    for j, (x, r) in enumerate(zip(xs, rows)):
        for k, off in zip(live, offsets):
            m = sizes[k]
            blocks[k][j] = tg.reshape(r[off:off + m], outs[k].shape + x.shape)
    return blocks


