"""``tg.forward_ad``: dual tensors, as ``torch.autograd.forward_ad`` has them.

A *dual tensor* is a tensor that carries a tangent at an open forward level; every op
applied to it computes the tangent of its output with the op's JVP rule (see
tapegrad/_forward.py, Note: [forward levels]). Use it when you want forward mode inside
your own code; ``tg.jvp``, ``tg.jacfwd`` and ``tg.linearize`` are built on it.

>>> import tapegrad as tg
>>> fwAD = tg.forward_ad
>>> x = tg.tensor([0.0, 1.0])
>>> with fwAD.dual_level():
...     y = tg.sin(fwAD.make_dual(x, tg.tensor([1.0, 1.0])))
...     primal, tangent = fwAD.unpack_dual(y)
>>> tangent.numpy().round(4)                        # cos(x)
array([1.    , 0.5403])
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple, Optional

import tapegrad as tg
from tapegrad import _engine, _forward

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
           "UnpackedDualTensor"]


class UnpackedDualTensor(NamedTuple):
    """What :func:`unpack_dual` returns: the primal (no tangent) and the tangent (or None)."""
    primal: object
    tangent: Optional[object]


def enter_dual_level() -> int:
    """Open a new forward level and return its id (prefer ``with dual_level():``)."""
    return _forward.enter_level()


def exit_dual_level(*, level=None) -> None:
    """Close `level` (default: the innermost open one); levels close in reverse order."""
    if level is None:
        level = _forward.current_level()
        if level is None:
            raise RuntimeError("exit_dual_level: no forward level is open")
    _forward.exit_level(level)


@contextlib.contextmanager
def dual_level():
    """Context manager: a forward level for the duration of the block; yields its id.

    Tangents made inside belong to this level; after the block, ``unpack_dual`` of a
    tensor from inside finds no tangent (the level is closed).
    """
    level = _forward.enter_level()
    try:
        yield level
    finally:
        _forward.exit_level(level)


def _level_or_current(level, who):
    if level is None:
        level = _forward.current_level()
        if level is None:
            raise RuntimeError(f"{who}: no forward level is open; use it inside "
                               f"`with tg.forward_ad.dual_level():`")
    elif not _forward.is_open(level):
        raise RuntimeError(f"{who}: forward level {level} is not open")
    return level


def make_dual(tensor, tangent, *, level=None):
    """A tensor with `tensor`'s value that carries `tangent` at `level` (default: the
    innermost open level).

    The result is differentiable in reverse mode with respect to `tensor` when it
    requires grad (an identity op links them); `tangent` must have tensor's shape,
    floating dtype and device. In-place ops on the dual tensor are refused (it shares
    `tensor`'s storage).
    """
    level = _level_or_current(level, "make_dual")
    if not isinstance(tensor, _engine.TensorBase):
        raise TypeError(f"make_dual: expected a Tensor as the primal, got {type(tensor).__name__}")
    if not isinstance(tangent, _engine.TensorBase):
        tangent = tg.asarray(tangent, dtype=tensor.dtype, device=tensor.device)
    if tensor.dtype.kind not in "fc":
        raise TypeError(f"make_dual: the primal has dtype {tensor.dtype}; only floating-point "
                        f"tensors have tangents")
    if tangent.shape != tensor.shape:
        raise ValueError(f"make_dual: the tangent has shape {tangent.shape}, but the primal "
                         f"has shape {tensor.shape}")
    if tangent.dtype != tensor.dtype:
        raise TypeError(f"make_dual: the tangent has dtype {tangent.dtype}, but the primal "
                        f"has dtype {tensor.dtype}; convert it with .astype()")
    if tangent.device != tensor.device:
        raise RuntimeError(f"make_dual: the tangent is on {tangent.device}, the primal on "
                           f"{tensor.device}")
    if tensor.requires_grad and tg.is_grad_enabled():
        dual = _engine.apply_plain(_engine.lookup("reshape"), (tensor,),
                                   {"shape": tensor.shape})
    else:
        dual = tensor.detach()
    # the dual keeps the primal's tangents at other levels (nested levels). NOTE: update
    # the dict in place: a node recorded for `dual` may already share it
    if dual._tangents is None:
        dual._tangents = {}
    if tensor._tangents:
        dual._tangents.update(tensor._tangents)
    dual._tangents[level] = tangent
    return dual


def unpack_dual(tensor, *, level=None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of `tensor` at `level` (default: the innermost open level).

    The primal has tensor's value and reverse-mode history and no tangent at `level`;
    the tangent is None when the tensor carries none (it does not depend on a dual input
    of that level). With no level open, returns ``(tensor, None)``.
    """
    if level is None:
        level = _forward.current_level()
        if level is None:
            return UnpackedDualTensor(tensor, None)
    if not isinstance(tensor, _engine.TensorBase):
        raise TypeError(f"unpack_dual: expected a Tensor, got {type(tensor).__name__}")
    tangent = _forward.tangent_of(tensor, level) if _forward.is_open(level) else None
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    if tensor.requires_grad and tg.is_grad_enabled():
        primal = _engine.apply_plain(_engine.lookup("reshape"), (tensor,),
                                     {"shape": tensor.shape})
    else:
        primal = tensor.detach()
    if primal._tangents is None:
        primal._tangents = {}
    primal._tangents.update((k, v) for k, v in tensor._tangents.items() if k != level)
    return UnpackedDualTensor(primal, tangent)
