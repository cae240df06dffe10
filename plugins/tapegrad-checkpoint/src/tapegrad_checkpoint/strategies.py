"""Which layers of a sequence to checkpoint: the strategies of ``tg.checkpoint_sequential``.

A strategy turns a sequence of ``n`` named layers into a *plan*: consecutive
:class:`Segment` s that cover the layers in order, each run either plainly (its
intermediates kept for backward, as without checkpointing) or checkpointed (only its input
kept; the segment is rerun during backward).

==================  ========================================================================
``None``            no checkpointing: one plain segment (what a plain loop does)
``SqrtN()``         about sqrt(n) segments of about sqrt(n) layers: the memory held after
                    the forward pass falls from ~n activations to ~2 sqrt(n), for one extra
                    forward pass of the checkpointed layers
``Every(k)``        segments of k layers
``Selective(p)``    exactly the layers the predicate p picks, each checkpointed on its own;
                    the layers between them run plainly
==================  ========================================================================

NOTE: SqrtN and Every leave the **last** segment plain, as PyTorch's
``checkpoint_sequential`` does: backward starts there, so checkpointing it would rerun it at
once -- a full forward of those layers for no saving in peak memory. ``checkpoint_last=True``
checkpoints it anyway (the memory held between forward and backward then drops by that
segment's activations). Selective checkpoints exactly what it picks, the last layer
included.

>>> import tapegrad as tg
>>> layers = [("0", None)] * 10
>>> [(s.start, s.stop, s.checkpoint) for s in tg.checkpoint.SqrtN().plan(layers)]
[(0, 4, True), (4, 7, True), (7, 10, False)]
>>> [(s.start, s.stop, s.checkpoint) for s in tg.checkpoint.Every(4).plan(layers)]
[(0, 4, True), (4, 8, True), (8, 10, False)]
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Segment", "Strategy", "SqrtN", "Every", "Selective", "plan_for"]

NamedLayers = Sequence[tuple[str, Any]]


@dataclass(frozen=True)
class Segment:
    """Layers ``start:stop`` of the sequence, run checkpointed or plainly."""

    start: int
    stop: int
    checkpoint: bool

    def __len__(self) -> int:
        return self.stop - self.start


class Strategy:
    """Base class: ``plan(layers)`` takes ``[(name, layer), ...]`` and returns the
    segments, consecutive and covering every layer once, in order."""

    def plan(self, layers: NamedLayers) -> list[Segment]:
        raise NotImplementedError(f"{type(self).__name__} must define plan(layers)")


def _consecutive(sizes: Sequence[int], checkpoint_last: bool) -> list[Segment]:
    segments, start = [], 0
    for i, size in enumerate(sizes):
        last = i == len(sizes) - 1
        segments.append(Segment(start, start + size, checkpoint_last or not last))
        start += size
    return segments


class SqrtN(Strategy):
    """``round(sqrt(n))`` segments of as equal a length as possible (longer ones first), the
    last one plain (``checkpoint_last=True``: checkpointed too).

    For n layers of equal size this keeps about 2 sqrt(n) activations instead of n after
    the forward pass (sqrt(n) segment inputs plus the plain last segment), at the price of
    one extra forward pass through the checkpointed layers.

    >>> import tapegrad as tg
    >>> [len(s) for s in tg.checkpoint.SqrtN().plan([("", None)] * 32)]
    [6, 6, 5, 5, 5, 5]
    """

    def __init__(self, *, checkpoint_last: bool = False):
        self.checkpoint_last = bool(checkpoint_last)

    def plan(self, layers: NamedLayers) -> list[Segment]:
        n = len(layers)
        if n == 0:
            return []
        count = max(1, round(math.sqrt(n)))
        base, extra = divmod(n, count)
        return _consecutive([base + 1] * extra + [base] * (count - extra), self.checkpoint_last)

    def __repr__(self) -> str:
        return "SqrtN(checkpoint_last=True)" if self.checkpoint_last else "SqrtN()"


class Every(Strategy):
    """Segments of `k` layers (the last one may be shorter), the last one plain
    (``checkpoint_last=True``: checkpointed too).

    >>> import tapegrad as tg
    >>> [len(s) for s in tg.checkpoint.Every(3).plan([("", None)] * 7)]
    [3, 3, 1]
    """

    def __init__(self, k: int, *, checkpoint_last: bool = False):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"Every(k): k must be a positive integer (layers per segment), "
                             f"got {k!r}")
        self.k = k
        self.checkpoint_last = bool(checkpoint_last)

    def plan(self, layers: NamedLayers) -> list[Segment]:
        full, rest = divmod(len(layers), self.k)
        return _consecutive([self.k] * full + ([rest] if rest else []), self.checkpoint_last)

    def __repr__(self) -> str:
        last = ", checkpoint_last=True" if self.checkpoint_last else ""
        return f"Every({self.k}{last})"


class Selective(Strategy):
    """Checkpoint exactly the layers `predicate` picks, each as its own segment; runs of
    layers it does not pick are plain segments.

    `predicate` is a layer type (or a tuple of types), picked by ``isinstance``; or a
    function of the layer, ``predicate(layer)``; or a function of its name and the layer,
    ``predicate(name, layer)`` (names are a Sequential's child names, "0", "1", ..., or the
    keys of a dict of layers).

    >>> import tapegrad as tg
    >>> net = tg.nn.Sequential(tg.nn.Linear(2, 2), tg.nn.Tanh(), tg.nn.Linear(2, 2))
    >>> named = list(net.named_children())
    >>> [(s.start, s.stop, s.checkpoint) for s in
    ...  tg.checkpoint.Selective(tg.nn.Linear).plan(named)]
    [(0, 1, True), (1, 2, False), (2, 3, True)]
    >>> [(s.start, s.stop, s.checkpoint) for s in
    ...  tg.checkpoint.Selective(lambda name, layer: name == "1").plan(named)]
    [(0, 1, False), (1, 2, True), (2, 3, False)]
    """

    def __init__(self, predicate: type | tuple[type, ...] | Callable[..., bool]):
        if isinstance(predicate, type) or (
                isinstance(predicate, tuple) and predicate
                and all(isinstance(t, type) for t in predicate)):
            types = predicate
            self._pick: Callable[[str, Any], bool] = lambda name, layer: isinstance(layer, types)
        elif callable(predicate):
            if _takes_two(predicate):
                self._pick = predicate
            else:
                self._pick = lambda name, layer: predicate(layer)
        else:
            raise TypeError(f"Selective(predicate): predicate must be a layer type, a tuple of "
                            f"types, or a function of (layer) or (name, layer); got "
                            f"{type(predicate).__name__}")
        self.predicate = predicate

    def plan(self, layers: NamedLayers) -> list[Segment]:
        segments: list[Segment] = []
        for i, (name, layer) in enumerate(layers):
            if self._pick(name, layer):
                segments.append(Segment(i, i + 1, True))
            elif segments and not segments[-1].checkpoint:
                segments[-1] = Segment(segments[-1].start, i + 1, False)
            else:
                segments.append(Segment(i, i + 1, False))
        return segments

    def __repr__(self) -> str:
        return f"Selective({getattr(self.predicate, '__name__', self.predicate)!s})"


def _takes_two(fn: Callable[..., Any]) -> bool:
    """Whether `fn` takes (name, layer) rather than (layer)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):      # a builtin without a signature: one argument
        return False
    empty, kinds = inspect.Parameter.empty, (inspect.Parameter.POSITIONAL_ONLY,
                                             inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in kinds]
    return len(positional) >= 2 and positional[1].default is empty


def plan_for(strategy: Strategy | None, layers: NamedLayers) -> list[Segment]:
    """The segments `strategy` makes of `layers`, checked; ``None``: one plain segment."""
    n = len(layers)
    if strategy is None:
        return [Segment(0, n, False)] if n else []
    if not isinstance(strategy, Strategy):
        raise TypeError(
            f"checkpoint_sequential: strategy must be tg.checkpoint.SqrtN(), Every(k), "
            f"Selective(predicate), another tg.checkpoint.Strategy, or None; got "
            f"{strategy!r}" + (" (a class: call it, e.g. SqrtN())"
                               if isinstance(strategy, type) else ""))
    segments = list(strategy.plan(layers))
    position = 0
    for seg in segments:
        if not isinstance(seg, Segment) or seg.start != position or seg.stop <= seg.start:
            raise ValueError(f"{strategy!r}.plan() must return consecutive, non-empty "
                             f"Segments starting at 0; got {segments}")
        position = seg.stop
    if position != n:
        raise ValueError(f"{strategy!r}.plan() covers layers 0:{position} of {n}")
    return segments
