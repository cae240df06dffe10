"""``tg.vmap``: vectorizing map, as ``torch.func.vmap`` / ``jax.vmap``.

``vmap(f)(xs)`` computes ``stack([f(x) for x in xs])`` in one call of f: f sees one
example (its shapes have no batch axis) and every op it calls runs once on the whole
batch through the op's batching rule (``register_op(batch=)``; an op without one runs
once per example, exactly, with a one-time ``BatchingFallbackWarning``). The engine half
is tapegrad/_batching.py (Note: [batched tensors]).

It composes with the other transforms: ``vmap(grad(f))`` gives per-example gradients,
``vmap(jacfwd(f))``, ``jacrev(vmap(f))``, ``hessian`` of a vmapped function, and vmap of
vmap (nested levels, innermost first, as JAX's interpreter stack).
"""

from __future__ import annotations

import functools

import numpy as np

import tapegrad as tg
from tapegrad import _batching, _engine

_TensorBase = _engine.TensorBase


def _flatten(tree):
    """(leaves, rebuild) of a pytree of tuples, lists and dicts (sorted keys)."""
    if isinstance(tree, dict):
        keys = sorted(tree)
        parts = [_flatten(tree[k]) for k in keys]
        leaves = [leaf for p in parts for leaf in p[0]]

        def rebuild(vals):
            out, i = {}, 0
            for k, (lv, rb) in zip(keys, parts):
                out[k] = rb(vals[i:i + len(lv)])
                i += len(lv)
            return type(tree)(out) if type(tree) is not dict else out
        return leaves, rebuild
    if isinstance(tree, (tuple, list)):
        parts = [_flatten(x) for x in tree]
        leaves = [leaf for p in parts for leaf in p[0]]

        def rebuild(vals):
            out, i = [], 0
            for lv, rb in parts:
                out.append(rb(vals[i:i + len(lv)]))
                i += len(lv)
            if isinstance(tree, tuple) and hasattr(tree, "_fields"):   # a namedtuple
                return type(tree)(*out)
            return type(tree)(out)
        return leaves, rebuild
    return [tree], lambda vals: vals[0]


def _broadcast_axes(axes, tree, who, what):
    """One axis (int or None) per leaf of `tree`, from `axes` (an int/None for the whole
    tree, or a tree of the same structure whose leaves are ints/None)."""
    if axes is None or isinstance(axes, int):
        return [axes] * len(_flatten(tree)[0])
    if isinstance(axes, dict) and isinstance(tree, dict):
        if set(axes) != set(tree):
            raise ValueError(f"{who}: {what} keys {sorted(axes)} do not match the "
                             f"argument's keys {sorted(tree)}")
        return [a for k in sorted(tree) for a in _broadcast_axes(axes[k], tree[k], who, what)]
    if isinstance(axes, (tuple, list)) and isinstance(tree, (tuple, list)):
        if len(axes) != len(tree):
            raise ValueError(f"{who}: {what} has {len(axes)} entries but the value it maps "
                             f"has {len(tree)}")
        return [a for ax, t in zip(axes, tree) for a in _broadcast_axes(ax, t, who, what)]
    raise ValueError(f"{who}: {what} must be an int, None, or a tuple/list/dict matching the "
                     f"structure of the values, got {axes!r}")


def _check_axis(axis, ndim, who, what):
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"{who}: {what} must be an int or None, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{who}: {what}={axis} is out of range for a tensor with "
                         f"{ndim} dimensions")
    return int(axis) % ndim


def _move(x, src, dst):
    if src == dst:
        return x
    perm = list(range(x.ndim))
    perm.insert(dst, perm.pop(src))
    return _engine.lookup("transpose")(x, axes=tuple(perm))


def vmap(func, in_axes=0, out_axes=0, randomness="error", *, chunk_size=None, in_dims=None,
         out_dims=None):
    """``func`` vectorized over an axis of its inputs: ``vmap(f)(xs)`` equals
    ``stack([f(x) for x in xs])``, computed with one call of f.

    in_axes: which axis of each positional argument is mapped -- an int for all, None for
    an argument passed whole to every example, or a tuple with one entry per argument
    (nested tuples/lists/dicts for arguments that are such containers of tensors).
    Keyword arguments are never mapped. out_axes: where the mapped axis goes in each
    output (an int, or a tuple matching the outputs; None for an output that does not
    depend on the mapped inputs). randomness: what random draws inside f do --
    "error" (refuse, the default), "different" (each example draws its own) or "same"
    (one draw shared by all examples). chunk_size: run the batch in chunks of this many
    examples (less memory; with randomness="same" each chunk draws once). The names and
    semantics are torch.func.vmap's (in_dims/out_dims are also accepted).

    >>> import tapegrad as tg
    >>> xs = tg.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> w = tg.tensor([10.0, 1.0])
    >>> tg.vmap(lambda x, w: (x * w).sum(), in_axes=(0, None))(xs, w)
    tensor([12., 34., 56.])
    >>> per_example = tg.vmap(tg.func.grad(lambda w, x: ((x * w).sum()) ** 2),
    ...                       in_axes=(None, 0))
    >>> per_example(w, xs)[0]                       # 2 (x . w) x for x = xs[0]
    tensor([24., 48.])
    """
    if in_dims is not None:            # torch.func.vmap's names
        in_axes = in_dims
    if out_dims is not None:
        out_axes = out_dims
    if not callable(func):
        raise TypeError(f"vmap: func must be callable, got {type(func).__name__}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be a positive int or None, got {chunk_size!r}")
    if randomness not in ("error", "different", "same"):
        raise ValueError(f"vmap: randomness must be 'error', 'different' or 'same', "
                         f"got {randomness!r}")

    @functools.wraps(func)
    def vmapped(*args, **kwargs):
        leaves, rebuild = _flatten(list(args))
        axes = _broadcast_axes(in_axes, list(args), "vmap", "in_axes")
        size, mapped = None, []
        for i, (x, a) in enumerate(zip(leaves, axes)):
            if a is None:
                mapped.append(None)
                continue
            if not isinstance(x, _TensorBase):
                if isinstance(x, np.ndarray):
                    x = tg.asarray(x)
                    leaves[i] = x
                else:
                    raise ValueError(
                        f"vmap: in_axes={a} for an argument of type {type(x).__name__}; only "
                        f"tensors can be mapped over (use in_axes=None for it)")
            if x.ndim == 0:
                raise ValueError(f"vmap: cannot map over axis {a} of a 0-d tensor")
            ax = _check_axis(a, x.ndim, "vmap", "in_axes")
            n = x.shape[ax]
            if size is not None and n != size:
                raise ValueError(
                    f"vmap: the mapped axes have different sizes ({size} and {n}); every "
                    f"mapped input must have the same size along its in_axes")
            size = n
            mapped.append(ax)
        if size is None:
            raise ValueError("vmap: at least one argument must be a tensor mapped over (every "
                             "in_axes entry is None, or there are no tensor arguments)")
        if chunk_size is not None and size > chunk_size:
            return _chunked(leaves, mapped, rebuild, kwargs, size)
        return _run(leaves, mapped, rebuild, kwargs, size)

    def _run(leaves, mapped, rebuild, kwargs, size):
        physical = [x if a is None else _move(x, a, 0) for x, a in zip(leaves, mapped)]
        level = _batching.enter(size, randomness)
        try:
            logical = [x if a is None else _batching.wrap(p, level)
                       for x, p, a in zip(leaves, physical, mapped)]
            out = func(*rebuild(logical), **kwargs)
        finally:
            _batching.exit(level)
        return _unwrap(out, level, size)

    def _chunked(leaves, mapped, rebuild, kwargs, size):
        parts = []
        for start in range(0, size, chunk_size):
            stop = min(start + chunk_size, size)
            chunk = [x if a is None else x[(slice(None),) * a + (slice(start, stop),)]
                     for x, a in zip(leaves, mapped)]
            parts.append(_run(chunk, mapped, rebuild, kwargs, stop - start))
        outs = [_flatten(p)[0] for p in parts]
        rebuild_out = _flatten(parts[0])[1]
        axes = _out_axes(parts[0])
        joined = [p[0] if a is None else tg.concatenate([p[j] for p in outs], axis=a)
                  for j, (p, a) in enumerate(zip(zip(*outs), axes))]
        return rebuild_out(joined)

    def _out_axes(out):
        return _broadcast_axes(out_axes, out, "vmap", "out_axes")

    def _unwrap(out, level, size):
        leaves, rebuild = _flatten(out)
        axes = _out_axes(out)
        result = []
        for o, a in zip(leaves, axes):
            if not isinstance(o, _TensorBase):
                raise TypeError(f"vmap: func must return tensors (or tuples/lists/dicts of "
                                f"them), got {type(o).__name__}")
            p, batched = _batching.physical(o, level)
            if a is None:
                if batched:
                    raise ValueError("vmap: out_axes=None for an output that depends on the "
                                     "mapped inputs (it differs per example)")
                result.append(o)
                continue
            if not batched:
                # an output that does not depend on the mapped inputs: the same for every
                # example (as torch.func.vmap, it is expanded)
                p = _engine.lookup("broadcast_to")(
                    _engine.lookup("reshape")(o, shape=(1,) + tuple(o.shape)),
                    shape=(size,) + tuple(o.shape))
            result.append(_move(p, 0, _check_axis(a, p.ndim, "vmap", "out_axes")))
        return rebuild(result)

    return vmapped
