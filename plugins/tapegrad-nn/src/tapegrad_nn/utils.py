"""``tg.nn.utils``: PyTorch's gradient clipping and parameter <-> vector helpers.

>>> import tapegrad as tg
>>> w = tg.tensor([3.0, 4.0], requires_grad=True)
>>> (w * w).sum().backward()                 # grad [6, 8], norm 10
>>> float(tg.nn.utils.clip_grad_norm_([w], max_norm=1.0))
10.0
>>> [round(v, 4) for v in w.grad.tolist()]
[0.6, 0.8]
"""

from __future__ import annotations

import math
import numbers

import tapegrad as tg

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]


def _as_list(parameters, fn):
    if isinstance(parameters, tg.Tensor):
        return [parameters]
    try:
        params = list(parameters)
    except TypeError:
        raise TypeError(f"{fn}: parameters must be a tensor or an iterable of tensors, got "
                        f"{type(parameters).__name__}") from None
    for p in params:
        if not isinstance(p, tg.Tensor):
            raise TypeError(f"{fn}: parameters must be tensors, got {type(p).__name__}")
    return params


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale the gradients of `parameters` in place so that their total norm (the
    `norm_type`-norm of all gradients taken as one vector) is at most `max_norm`; returns
    that total norm, before clipping, as a 0-d tensor (as PyTorch). Each gradient is
    multiplied by ``min(1, max_norm / (total + 1e-6))``. Parameters without a gradient are
    skipped; with none, the result is ``tensor(0.)``. ``norm_type`` is a positive number or
    ``inf`` (max |g|). ``error_if_nonfinite=True`` raises a RuntimeError when the total is
    nan or inf (otherwise the gradients become nan, as in PyTorch).
    """
    grads = [p.grad for p in _as_list(parameters, "clip_grad_norm_") if p.grad is not None]
    if isinstance(norm_type, bool) or not isinstance(norm_type, numbers.Real) or not (
            norm_type > 0):
        raise ValueError(f"clip_grad_norm_: norm_type must be a positive number or inf, got "
                         f"{norm_type!r}")
    norm_type, max_norm = float(norm_type), float(max_norm)
    if not grads:
        return tg.tensor(0.0)
    device = grads[0].device
    with tg.no_grad():
        if math.isinf(norm_type):
            parts = [tg.max(tg.abs(g)).to(device) if g.size else tg.zeros((), g.dtype, device)
                     for g in grads]
            total = tg.max(tg.stack(parts))
        else:
            # NOTE: the norm of the per-gradient norms, as PyTorch (same value as one norm
            # over everything; each gradient's norm is taken in its own dtype).
            parts = [tg.linalg.norm(g.reshape(-1), ord=norm_type).to(device) for g in grads]
            total = tg.linalg.norm(tg.stack(parts), ord=norm_type)
        if error_if_nonfinite and not math.isfinite(float(total)):
            raise RuntimeError(
                f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                f"non-finite ({float(total)}), so it cannot be clipped; pass "
                f"error_if_nonfinite=False to scale them anyway")
        # No host round trip: the factor stays a tensor (tg.compile can replay it).
        coef = tg.minimum(max_norm / (total + 1e-6), 1.0)
        for g in grads:
            g[...] = g * coef.to(g.device).astype(g.dtype)
    return total


def clip_grad_value_(parameters, clip_value):
    """Clip every gradient of `parameters` in place to ``[-clip_value, clip_value]``."""
    clip_value = float(clip_value)
    with tg.no_grad():
        for p in _as_list(parameters, "clip_grad_value_"):
            if p.grad is not None:
                p.grad[...] = tg.clip(p.grad, -clip_value, clip_value)


def parameters_to_vector(parameters):
    """All `parameters` flattened and joined into one 1-D tensor (differentiable, in
    ``parameters()`` order). They must share a device.

    >>> import tapegrad as tg
    >>> tg.nn.utils.parameters_to_vector(tg.nn.Linear(2, 3).parameters()).shape
    (9,)
    """
    params = _as_list(parameters, "parameters_to_vector")
    _check_devices(params, "parameters_to_vector")
    if not params:
        raise ValueError("parameters_to_vector: no parameters given")
    return tg.concatenate([tg.reshape(p, (-1,)) for p in params])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D `vec` into `parameters`, in place (the inverse of
    ``parameters_to_vector``). ``vec.size`` must equal the parameters' total size."""
    if not isinstance(vec, tg.Tensor):
        raise TypeError(f"vector_to_parameters: expected vec to be a Tensor, got "
                        f"{type(vec).__name__}")
    if vec.ndim != 1:
        raise ValueError(f"vector_to_parameters: vec must be 1-D, got shape {vec.shape}")
    params = _as_list(parameters, "vector_to_parameters")
    _check_devices(params + [vec], "vector_to_parameters")
    total = sum(p.size for p in params)
    if total != vec.size:
        raise ValueError(f"vector_to_parameters: vec has {vec.size} elements but the "
                         f"parameters have {total} in all")
    start = 0
    with tg.no_grad():
        for p in params:
            p[...] = tg.reshape(vec[start:start + p.size], p.shape).detach()
            start += p.size


def _check_devices(tensors, fn):
    devices = {str(t.device) for t in tensors}
    if len(devices) > 1:
        raise TypeError(f"{fn}: found tensors on different devices ({', '.join(sorted(devices))})")
