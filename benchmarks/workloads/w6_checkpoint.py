"""W6: gradient checkpointing's memory/time trade, 32 (W6) and 64 (W6-64) layers of
Linear(512, 512) + tanh at batch 2048, float32, forward + backward of ``sum(output)``.

Each step runs three variants back to back, so they are measured in one run on the same
machine state (the order rotates from step to step):

- **plain**: every layer's activation is kept for backward (~n activations of 4 MiB);
- **SqrtN**: tapegrad's ``tg.checkpoint.SqrtN()``: round(sqrt(n)) segments (6, 6, 5, 5, 5,
  5 layers at n = 32; 8 x 8 at n = 64), all but the last checkpointed, so about 2 sqrt(n)
  activations are held after forward; the checkpointed layers run forward twice;
- **Every(4)**: segments of 4 layers, all but the last checkpointed.

Figures per variant: time per step; the memory **held at the end of the forward pass**
(the loss computed, backward not started) and the **peak during backward**, both above the
parameters and the input (allocated before the step). tapegrad and NumPy are measured with
``tracemalloc``, which sees NumPy's array allocations exactly (DESIGN.md §8); the figure
``held SqrtN/plain`` is the one to hold against the 2 sqrt(n)/n bound (0.354 at n = 32,
0.25 at n = 64). The peak includes the parameters' gradients (32 or 64 MiB), which every
variant allocates during backward.

- **numpy**: the forward keeps what a hand-written backward needs (each layer's tanh
  output); the checkpointed variants are written by hand too: the forward keeps each
  checkpointed segment's input only, and the backward reruns a segment just before
  backpropagating through it. Same segments as tapegrad's strategies.
- **torch**: ``torch.utils.checkpoint.checkpoint_sequential(model, segments, x,
  use_reentrant=False)`` with ``segments = round(sqrt(n))`` (PyTorch cuts n // segments
  layers per segment and runs the rest as the plain last one: 5 x 5 + 7 at n = 32) and
  ``n // 4``. tracemalloc does not see PyTorch's allocator, so its memory is glibc's
  ``mallinfo2()`` bytes in use: after the forward pass, and sampled before and after every
  autograd node during backward (a peak at node granularity, a little below the true
  one). Where ``mallinfo2`` does not exist (not glibc), W6 has no torch implementation.

Memory is deterministic for a given library and variant (the same arrays are allocated
every step), so each worker measures it once, in an untimed step with tracing on, and
reports that measurement with every sample; the timed steps run without tracing.

NOTE: weights are N(0, 1/512) (not PyTorch's U(+-1/sqrt(512)), whose activations shrink by
~1/sqrt(3) per layer and vanish after 32 layers): activations settle near std 0.2 and
every gradient stays of order one, so the check against NumPy compares real numbers.
"""

from __future__ import annotations

import ctypes
import gc
import math
import time
import tracemalloc

import numpy as np

from ..registry import Case, Metric, Workload, register

WIDTH = 512
BATCH = 2048
SEED = 0
EVERY = 4
VARIANTS = ("plain", "SqrtN", f"Every({EVERY})")
MIB = 2.0 ** 20


def _extra(name: str, scale: float = 1.0):
    return lambda sample: sample.extras[name] * scale


def _metrics() -> tuple[Metric, ...]:
    metrics = [Metric(f"time {v}", "ms/step", _extra(f"time {v}", 1e3)) for v in VARIANTS]
    metrics += [Metric(f"held {v}", "MiB", _extra(f"held {v}", 1 / MIB)) for v in VARIANTS]
    metrics += [Metric(f"peak {v}", "MiB", _extra(f"peak {v}", 1 / MIB)) for v in VARIANTS]
    for v in VARIANTS[1:]:
        metrics.append(Metric(f"held {v}/plain", "x",
                              lambda s, v=v: s.extras[f"held {v}"] / s.extras["held plain"]))
        metrics.append(Metric(f"time {v}/plain", "x",
                              lambda s, v=v: s.extras[f"time {v}"] / s.extras["time plain"]))
    return tuple(metrics)


def _workload(key: str, layers: int) -> Workload:
    bound = 2 * math.sqrt(layers) / layers
    return register(Workload(
        key=key,
        title=(f"checkpointing: {layers} x (Linear({WIDTH}, {WIDTH}) + tanh), batch {BATCH}, "
               f"float32, forward + backward; plain vs SqrtN vs Every({EVERY}) "
               f"(2 sqrt(n)/n = {bound:.3f})"),
        description=(
            f"Forward and backward of sum(output) through {layers} layers of "
            f"Linear({WIDTH}, {WIDTH}) + tanh at batch {BATCH}, float32, plain and "
            f"checkpointed (SqrtN, Every({EVERY})): time per step, memory held at the end "
            f"of the forward pass and peak memory during backward, both above the "
            f"parameters (tracemalloc; mallinfo2 for torch). Measures checkpointing's "
            f"memory/time trade; SqrtN's held memory should be near {bound:.3f} x plain."),
        params={"layers": layers, "width": WIDTH, "batch": BATCH, "dtype": "float32",
                "seed": SEED, "every": EVERY},
        metrics=_metrics(),
        rtol=2e-3,
        atol=1e-3,
    ))


W6 = _workload("W6", 32)
W6_64 = _workload("W6-64", 64)


# -- shared set-up --------------------------------------------------------------------


def _data(params):
    """x (batch, width) and per layer (W (out, in), b), the same in every library."""
    rng = np.random.default_rng(params["seed"])
    n, width = params["layers"], params["width"]
    layers = [((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32),
               rng.uniform(-0.1, 0.1, width).astype(np.float32)) for _ in range(n)]
    x = rng.standard_normal((params["batch"], width)).astype(np.float32)
    return x, layers


def segment_sizes(variant: str, n: int, every: int) -> list[int]:
    """Layers per segment, the same arithmetic as tapegrad's SqrtN() and Every(k): all
    segments but the last are checkpointed."""
    if variant == "plain":
        return [n]
    if variant == "SqrtN":
        count = max(1, round(math.sqrt(n)))
        base, extra = divmod(n, count)
        return [base + 1] * extra + [base] * (count - extra)
    full, rest = divmod(n, every)
    return [every] * full + ([rest] if rest else [])


def _outputs(result, n):
    """{f"{name} {variant}": value}: the loss, W0's and the last bias's gradient."""
    out = {}
    for variant, (loss, g_w0, g_blast) in result.items():
        out[f"loss {variant}"] = float(loss)
        out[f"grad W0 {variant}"] = g_w0
        out[f"grad b{n - 1} {variant}"] = g_blast
    return out


def _same_as_plain(result, library):
    """Checkpointing must not change a single bit of the result."""
    plain = result["plain"]
    for variant, values in result.items():
        for a, b in zip(values, plain):
            if not np.array_equal(a, b):
                raise AssertionError(f"W6: {library}'s {variant} result differs from its plain "
                                     f"run; checkpointing must give the same bits")


class _Steps:
    """Runs the variants of one library, rotating their order; keeps the last times."""

    def __init__(self, step, measure):
        self.step, self.measure = step, measure       # step(variant) -> (values, seconds)
        self.turn = 0
        self.times: dict[str, float] = {}
        self.memory: dict[str, float] | None = None

    def run(self):
        order = VARIANTS[self.turn % 3:] + VARIANTS[:self.turn % 3]
        self.turn += 1
        result = {}
        for variant in order:
            result[variant], self.times[f"time {variant}"] = self.step(variant)
        return {v: result[v] for v in VARIANTS}

    def extras(self):
        if self.memory is None:          # deterministic: measured once, untimed
            self.memory = {}
            for variant in VARIANTS:
                held, peak = self.measure(variant)
                self.memory[f"held {variant}"] = float(held)
                self.memory[f"peak {variant}"] = float(peak)
        return {**self.times, **self.memory}


def _traced(forward, backward):
    """(held after forward, peak during backward) above what existed before, in bytes, as
    tracemalloc sees them; forward() returns what backward(state) needs."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        state = forward()
        held = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.reset_peak()
        backward(state)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return held, peak


# -- numpy ----------------------------------------------------------------------------


def _numpy_case(params) -> Case:
    """By hand: forward keeping tanh outputs (or, checkpointed, segment inputs), backward
    written out, rerunning each checkpointed segment just before its backward."""
    x, layers = _data(params)
    n, every = params["layers"], params["every"]
    matmul, tanh, ones_like = np.matmul, np.tanh, np.ones_like

    def layer(h, i):
        w, b = layers[i]
        z = matmul(h, w.T)
        z += b
        return tanh(z)

    def forward(variant):
        sizes = segment_sizes(variant, n, every)
        kept, h, start = [], x, 0
        for k, size in enumerate(sizes):
            stop = start + size
            if k < len(sizes) - 1:                      # checkpointed: keep the input only
                kept.append((start, stop, h))
                for i in range(start, stop):
                    h = layer(h, i)
            else:                                        # plain: keep every activation
                acts = [h]
                for i in range(start, stop):
                    h = layer(h, i)
                    acts.append(h)
                kept.append((start, stop, acts))
            start = stop
        return h.sum(), kept, h

    def backward(kept, out):
        grads = [None] * n
        g = ones_like(out)
        while kept:
            start, stop, saved = kept.pop()
            if isinstance(saved, list):
                acts = saved
            else:                                        # rerun the segment
                acts, h = [saved], saved
                for i in range(start, stop):
                    h = layer(h, i)
                    acts.append(h)
            for i in reversed(range(start, stop)):
                y = acts.pop()
                g = g * (1 - y * y)
                grads[i] = (g.T @ acts[-1], g.sum(axis=0))
                if i > 0:
                    g = g @ layers[i][0]
        return grads

    def step(variant):
        start = time.perf_counter()
        loss, kept, out = forward(variant)
        grads = backward(kept, out)
        seconds = time.perf_counter() - start
        return (loss, grads[0][0], grads[-1][1]), seconds

    def measure(variant):
        return _traced(lambda: forward(variant), lambda state: backward(*state[1:]))

    steps = _Steps(step, measure)

    def outputs(result):
        _same_as_plain(result, "numpy")
        return _outputs(result, n)

    return Case(run=steps.run, outputs=outputs, extras=steps.extras)


# -- tapegrad -------------------------------------------------------------------------


def _tapegrad_case(params) -> Case:
    """tg.nn.Sequential(Linear, Tanh) blocks; plain loop vs tg.checkpoint_sequential."""
    import tapegrad as tg

    x_np, init = _data(params)
    n, width, every = params["layers"], params["width"], params["every"]
    blocks = []
    for w, b in init:
        linear = tg.nn.Linear(width, width, dtype=tg.float32)
        with tg.no_grad():
            linear.weight[...] = w
            linear.bias[...] = b
        blocks.append(tg.nn.Sequential(linear, tg.nn.Tanh()))
    first, last = blocks[0][0], blocks[-1][0]
    parameters = [p for block in blocks for p in block.parameters()]
    x = tg.tensor(x_np)
    strategies = {"SqrtN": tg.checkpoint.SqrtN(), f"Every({every})": tg.checkpoint.Every(every)}

    def forward(variant):
        if variant == "plain":
            h = x
            for block in blocks:
                h = block(h)
        else:
            h = tg.checkpoint_sequential(blocks, x, strategy=strategies[variant])
        return h.sum()

    def clear():
        for p in parameters:
            p.grad = None

    def step(variant):
        clear()
        start = time.perf_counter()
        loss = forward(variant)
        loss.backward()
        seconds = time.perf_counter() - start
        return (loss.item(), first.weight.grad.numpy().copy(),
                last.bias.grad.numpy().copy()), seconds

    def measure(variant):
        clear()
        return _traced(lambda: forward(variant), lambda loss: loss.backward())

    steps = _Steps(step, measure)

    def outputs(result):
        _same_as_plain(result, "tapegrad")
        return _outputs(result, n)

    return Case(run=steps.run, outputs=outputs, extras=steps.extras)


# -- torch ----------------------------------------------------------------------------


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _mallinfo2():
    """glibc's mallinfo2 (bytes malloc has handed out and not got back), or None."""
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2

    def in_use() -> int:
        info = fn()
        return info.uordblks + info.hblkhd
    return in_use


def _torch_case(params) -> Case:
    """nn.Sequential of (Linear, Tanh) blocks; checkpoint_sequential(use_reentrant=False)."""
    import torch
    from torch.utils.checkpoint import checkpoint_sequential

    x_np, init = _data(params)
    n, width, every = params["layers"], params["width"], params["every"]
    blocks = []
    for w, b in init:
        linear = torch.nn.Linear(width, width)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(w))
            linear.bias.copy_(torch.from_numpy(b))
        blocks.append(torch.nn.Sequential(linear, torch.nn.Tanh()))
    model = torch.nn.Sequential(*blocks)
    first, last = blocks[0][0], blocks[-1][0]
    x = torch.from_numpy(x_np)
    segments = {"SqrtN": max(1, round(math.sqrt(n))), f"Every({every})": n // every}
    in_use = _mallinfo2()

    def forward(variant):
        if variant == "plain":
            y = model(x)
        else:
            y = checkpoint_sequential(model, segments[variant], x, use_reentrant=False)
        return y.sum()

    def step(variant):
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        loss = forward(variant)
        loss.backward()
        seconds = time.perf_counter() - start
        return (loss.item(), first.weight.grad.numpy().copy(),
                last.bias.grad.numpy().copy()), seconds

    def measure(variant):
        model.zero_grad(set_to_none=True)
        gc.collect()
        base = in_use()
        loss = forward(variant)
        held = in_use() - base
        samples = [held]

        def sample(*_):
            samples.append(in_use() - base)

        seen, stack = set(), [loss.grad_fn]
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            node.register_prehook(sample)
            node.register_hook(sample)
            stack.extend(nxt for nxt, _ in node.next_functions)
        loss.backward()
        return held, max(samples)

    steps = _Steps(step, measure)
    return Case(run=steps.run, outputs=lambda result: _outputs(result, n),
                extras=steps.extras)


for _w in (W6, W6_64):
    _w.implementation("numpy")(_numpy_case)
    _w.implementation("tapegrad")(_tapegrad_case)
    if _mallinfo2() is not None:
        _w.implementation("torch")(_torch_case)
