"""W4: a 200,000-op chain on a shape-(1,) float64 tensor, forward + backward.

Where W1 measures per-op overhead on a short chain, W4 checks that a deep graph costs
linear time and memory and no recursion: 200,000 recorded ops, then one backward pass
through all of them. The cycle is ``x = x * 1.0000001; x = x - 1e-7`` (values and the
gradient stay near 1, so the check against NumPy is meaningful).
"""

from __future__ import annotations

import numpy as np

from ..registry import Case, Workload, register, time_per

N_OPS = 200_000
SCALE = 1.0000001
SHIFT = 1e-7

W4 = register(Workload(
    key="W4",
    title="200,000-op chain, (1,) float64, forward + backward",
    description=("A chain of 200,000 elementwise ops (x * 1.0000001, x - 1e-7, repeated) on a "
                 "one-element float64 tensor, then backward: deep-graph cost per op, with no "
                 "recursion (the backward walks 200,000 nodes)."),
    params={"n_ops": N_OPS, "scale": SCALE, "shift": SHIFT},
    metrics=(time_per("op", N_OPS),),
    rtol=1e-9,
    atol=0.0,
))


@W4.implementation("numpy")
def numpy_case(params):
    """The chain by hand: the derivative of each cycle is the scale."""
    cycles, a, b = params["n_ops"] // 2, params["scale"], params["shift"]
    x0 = np.ones(1)

    def run():
        x = x0
        for _ in range(cycles):
            x = x * a
            x = x - b
        g = np.ones(1)
        for _ in range(cycles):     # subtract passes g through; multiply scales it
            g = g * a
        return x, g

    return Case(run=run, outputs=lambda r: {"value": r[0], "grad": r[1]})


@W4.implementation("tapegrad")
def tapegrad_case(params):
    return _tapegrad_case(params, compiled=False)


@W4.implementation("tapegrad-compiled")
def tapegrad_compiled_case(params):
    """The chain under ``tg.compile`` (recorded once, then replayed)."""
    return _tapegrad_case(params, compiled=True)


def _tapegrad_case(params, compiled):
    import tapegrad as tg

    cycles, a, b = params["n_ops"] // 2, params["scale"], params["shift"]
    x0 = np.ones(1)

    def chain(x):
        for _ in range(cycles):
            x = x * a
            x = x - b
        return x

    if compiled:
        chain = tg.compile(chain)

    def run():
        leaf = tg.tensor(x0, requires_grad=True)
        x = chain(leaf)
        x.backward()
        return x, leaf

    return Case(run=run, outputs=lambda r: {"value": r[0].numpy(), "grad": r[1].grad.numpy()})


@W4.implementation("torch")
def torch_case(params):
    import torch

    cycles, a, b = params["n_ops"] // 2, params["scale"], params["shift"]

    def run():
        leaf = torch.ones(1, dtype=torch.float64, requires_grad=True)
        x = leaf
        for _ in range(cycles):
            x = x * a
            x = x - b
        x.backward()
        return x, leaf

    return Case(run=run, outputs=lambda r: {"value": r[0].detach().numpy(),
                                             "grad": r[1].grad.numpy()})
