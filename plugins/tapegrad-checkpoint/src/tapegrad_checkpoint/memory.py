"""``tg.memory``: what a graph keeps alive for its backward pass, measured before running it.

``tg.memory.saved_bytes(loss)`` walks the graph behind ``loss`` (iteratively: graphs of a
million ops are fine) and adds up the arrays its nodes keep for their gradient rules:
per op and in total, each array counted once however many nodes keep it. That is the
memory checkpointing trades for time, so it shows what a strategy saves before you run
backward.

>>> import tapegrad as tg
>>> x = tg.ones((1000,), requires_grad=True)          # 8,000 bytes of float64
>>> y = tg.tanh(tg.tanh(x) * 2.0)
>>> report = tg.memory.saved_bytes(y)     # each tanh keeps its output, and multiply the
>>> report.total, report.by_op            # first one too: counted once
(16000, {'tanh': 16000})
>>> print(report)
saved for backward: 15.6 KiB in 2 arrays, kept by 3 nodes
  op        nodes  arrays     bytes
  tanh          2       2  15.6 KiB
  multiply      1       0       0 B
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from tapegrad import _engine

__all__ = ["saved_bytes", "SavedBytes"]

@dataclass(frozen=True)
class SavedBytes:
    """What a graph keeps for backward (``tg.memory.saved_bytes``).

    total:      bytes of the distinct arrays kept; an array is counted once, also when
                several nodes keep it or a node keeps a view of it (the whole underlying
                buffer counts: it is what stays alive)
    parameters: the part of ``total`` that belongs to leaf tensors that require grad (a
                model's weights): memory that is alive with or without the graph
    by_op:      bytes per op name, largest first; each array is listed under the op that
                computed it when that op keeps it, else under the op nearest the inputs
                that keeps it, so the values add up to ``total``
    nodes:      number of nodes per op name, in the same order
    arrays:     number of distinct arrays kept (a tg.Function counts what its ctx saved)
    """

    total: int
    parameters: int
    by_op: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, int] = field(default_factory=dict)
    arrays: int = 0
    counts: dict[str, int] = field(default_factory=dict, repr=False)   # arrays per op

    @property
    def activations(self) -> int:
        """``total - parameters``: what the graph adds to the memory of the model."""
        return self.total - self.parameters

    def __str__(self) -> str:
        head = (f"saved for backward: {format_bytes(self.total)} in {self.arrays} arrays, "
                f"kept by {sum(self.nodes.values())} nodes")
        if self.parameters:
            head += f" ({format_bytes(self.parameters)} of it parameters)"
        rows = [("op", "nodes", "arrays", "bytes")]
        for name in self.nodes:
            rows.append((name, str(self.nodes[name]), str(self.counts.get(name, 0)),
                         format_bytes(self.by_op.get(name, 0))))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = [head] + ["  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                           for i, (c, w) in enumerate(zip(r, widths)))
                          for r in rows]
        return "\n".join(lines)


def format_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _buffer(arr):
    """The object that owns `arr`'s memory (a NumPy view's base, recursively)."""
    while isinstance(arr, np.ndarray) and isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def saved_bytes(*tensors) -> SavedBytes:
    """What the graph behind `tensors` keeps alive for backward (a :class:`SavedBytes`).

    Call it between forward and backward: it reads the graph, runs nothing, and changes
    nothing. Several tensors (or one list of them) report their graphs together, shared
    parts once.

    >>> import tapegrad as tg
    >>> layers = [tg.nn.Linear(100, 100) for _ in range(16)]
    >>> def forward(x):
    ...     for layer in layers:
    ...         x = tg.tanh(layer(x))
    ...     return x
    >>> x = tg.ones((50, 100))
    >>> plain = tg.memory.saved_bytes(forward(x))
    >>> ckpt = tg.memory.saved_bytes(tg.checkpoint(forward, x))
    >>> plain.activations, ckpt.activations            # 16 tanh outputs and x, vs x
    (680000, 40000)
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if not isinstance(t, _engine.TensorBase):
            raise TypeError(f"saved_bytes: expected tensors, argument {i} is "
                            f"{type(t).__name__}")

    # -- every node once, with the nodes it sends gradients to ----------------------------
    index: dict = {}                   # node -> position in `nodes`
    nodes: list = []
    succ: list[list[int]] = []         # per node: positions of the nodes its edges reach
    leaves, stack = [], []

    def visit(node):
        if node not in index:
            index[node] = len(nodes)
            nodes.append(node)
            succ.append([])
            stack.append(node)
        return index[node]

    for t in tensors:
        if t.grad_fn is not None:
            visit(t.grad_fn)
    while stack:
        node = stack.pop()
        nexts = succ[index[node]]
        for nxt, _ in node.next_functions:
            if isinstance(nxt, _engine.TensorBase):
                leaves.append(nxt)
            elif nxt is not None:
                nexts.append(visit(nxt))

    # -- topological order from the outputs (Kahn): a node comes after all its users --------
    pending = [0] * len(nodes)
    for nexts in succ:
        for j in nexts:
            pending[j] += 1
    ready = [i for i in range(len(nodes)) if pending[i] == 0]
    order = []
    while ready:
        i = ready.pop()
        order.append(i)
        for j in succ[i]:
            pending[j] -= 1
            if pending[j] == 0:
                ready.append(j)

    # -- arrays: the last keeper in that order (the producer, or the one nearest the inputs)
    owner: dict[int, str] = {}         # id(buffer) -> op name
    buffers: dict[int, object] = {}    # id(buffer) -> buffer (kept alive while we count)
    node_count: dict[str, int] = {}
    for i in order:
        node = nodes[i]
        node_count[node.name] = node_count.get(node.name, 0) + 1
        for arr in node.saved_arrays():          # empty once a backward freed them
            buf = _buffer(arr)
            buffers[id(buf)] = buf
            owner[id(buf)] = node.name

    by_op: dict[str, int] = {}
    counts: dict[str, int] = {}
    for key, name in owner.items():
        by_op[name] = by_op.get(name, 0) + int(buffers[key].nbytes)
        counts[name] = counts.get(name, 0) + 1
    param_keys = {id(_buffer(leaf._data)) for leaf in leaves}
    parameters = sum(int(buffers[k].nbytes) for k in param_keys if k in buffers)
    ranked = sorted(node_count, key=lambda name: (-by_op.get(name, 0), name))
    return SavedBytes(total=sum(by_op.values()), parameters=parameters,
                      by_op={name: by_op[name] for name in ranked if name in by_op},
                      nodes={name: node_count[name] for name in ranked},
                      arrays=len(owner), counts=counts)
