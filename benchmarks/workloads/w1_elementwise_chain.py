"""W1: a 3,000-op elementwise chain on a (16,) float64 vector, forward + backward.

Every op works on 16 numbers, so the kernels cost next to nothing and the figure is
almost all per-op overhead: dispatch, recording the tape, and running each VJP. It is
the workload that shows what tapegrad's "small constant" per op (DESIGN.md §7) is.

The chain repeats one 5-op cycle 600 times, then sums::

    x = sin(x); x = x * 1.002; x = x + 0.01; x = tanh(x); x = x - 0.01

NOTE: the constants keep values and gradients of order one. A cycle like
``tanh(1.01 * sin(x) + 0.1)`` contracts to its fixed point so fast that after 3,000 ops
the gradient is ~1e-180: the check against NumPy would compare numbers on the edge of
underflow, and denormal arithmetic would time a slow path no real program takes. Here the
map's slope at the origin is 1.002 * sech(0.01)**2 ~ 1.0019, so values settle slowly near
+-0.06 and the gradient of every entry stays between ~0.03 and ~2.

The three implementations below spell the same cycle out in the same order; each binds
the functions it calls to locals first, so no library pays attribute look-ups the others
do not.
"""

from __future__ import annotations

import numpy as np

from ..registry import Case, Workload, import_jax, register, time_per

N_OPS = 3000
CYCLE = ("sin", "multiply", "add", "tanh", "subtract")
SCALE = 1.002
SHIFT = 0.01
SIZE = 16
SEED = 0

W1 = register(Workload(
    key="W1",
    title="3,000-op elementwise chain, (16,) float64, forward + backward",
    description=(
        "A chain of 3,000 cheap elementwise ops (sin, *1.002, +0.01, tanh, -0.01, "
        "repeated) on a 16-element float64 vector, then sum() and backward. The kernels "
        "are tiny, so this measures per-op framework overhead: dispatch, taping and VJPs."),
    params={"n_ops": N_OPS, "size": SIZE, "dtype": "float64", "cycle": CYCLE,
            "scale": SCALE, "shift": SHIFT, "seed": SEED},
    metrics=(time_per("op", N_OPS),),
    rtol=1e-10,
    atol=0.0,
))


def initial_x(params) -> np.ndarray:
    """The input vector: uniform in [-0.1, 0.1], the same in every library."""
    return np.random.default_rng(params["seed"]).uniform(-0.1, 0.1, params["size"])


def _cycles(params) -> int:
    n_ops, cycle = params["n_ops"], params["cycle"]
    if n_ops % len(cycle):
        raise ValueError(f"W1: n_ops={n_ops} is not a whole number of {len(cycle)}-op cycles")
    return n_ops // len(cycle)


@W1.implementation("numpy")
def numpy_case(params) -> Case:
    """Forward with NumPy, keeping what the backward needs; backward written by hand."""
    x0, cycles, a, b = initial_x(params), _cycles(params), params["scale"], params["shift"]
    sin, cos, tanh, ones_like = np.sin, np.cos, np.tanh, np.ones_like

    def run():
        x = x0
        tape = []                       # per cycle: (input of sin, output of tanh)
        for _ in range(cycles):
            x_in = x
            x = sin(x)
            x = x * a
            x = x + b
            x = tanh(x)
            tape.append((x_in, x))
            x = x - b
        loss = x.sum()
        g = ones_like(x)                # d loss / d x
        for x_in, y in reversed(tape):  # subtract and add pass g through unchanged
            g = g * (1.0 - y * y)       # tanh' = 1 - tanh**2
            g = g * a
            g = g * cos(x_in)           # sin' = cos
        return loss, g

    return Case(run=run, outputs=lambda r: {"loss": float(r[0]), "grad": r[1]})


@W1.implementation("tapegrad")
def tapegrad_case(params) -> Case:
    """The chain as a tapegrad user writes it; ``loss.backward()`` fills ``x.grad``."""
    return _tapegrad_case(params, compiled=False)


@W1.implementation("tapegrad-compiled")
def tapegrad_compiled_case(params) -> Case:
    """The same chain under ``tg.compile``: recorded on the first call, then replayed
    (forward and backward) from flat kernel lists."""
    return _tapegrad_case(params, compiled=True)


def _tapegrad_case(params, compiled):
    import tapegrad as tg

    x0, cycles, a, b = initial_x(params), _cycles(params), params["scale"], params["shift"]
    sin, tanh, tensor = tg.sin, tg.tanh, tg.tensor

    def chain(x):
        for _ in range(cycles):
            x = sin(x)
            x = x * a
            x = x + b
            x = tanh(x)
            x = x - b
        return x.sum()

    if compiled:
        chain = tg.compile(chain)

    def run():
        leaf = tensor(x0, requires_grad=True)
        loss = chain(leaf)
        loss.backward()
        return loss, leaf

    return Case(run=run,
                outputs=lambda r: {"loss": r[0].item(), "grad": r[1].grad.numpy()})


@W1.implementation("torch")
def torch_case(params) -> Case:
    """The same chain in PyTorch (CPU, float64)."""
    import torch

    x0, cycles, a, b = initial_x(params), _cycles(params), params["scale"], params["shift"]
    sin, tanh, tensor = torch.sin, torch.tanh, torch.tensor

    def run():
        leaf = tensor(x0, dtype=torch.float64, requires_grad=True)
        x = leaf
        for _ in range(cycles):
            x = sin(x)
            x = x * a
            x = x + b
            x = tanh(x)
            x = x - b
        loss = x.sum()
        loss.backward()
        return loss, leaf

    return Case(run=run,
                outputs=lambda r: {"loss": r[0].item(), "grad": r[1].grad.numpy()})


@W1.implementation("jax")
def jax_case(params) -> Case:
    """The same chain as a JAX user writes it: ``jax.jit(jax.value_and_grad(chain))``
    (CPU, float64). The Python loop unrolls into one XLA program of 3,000 ops, which XLA
    fuses; its first call (trace + compile) is reported as the case's first-call time."""
    jax = import_jax()
    import jax.numpy as jnp

    x0, cycles, a, b = initial_x(params), _cycles(params), params["scale"], params["shift"]

    def chain(x):
        for _ in range(cycles):
            x = jnp.sin(x)
            x = x * a
            x = x + b
            x = jnp.tanh(x)
            x = x - b
        return x.sum()

    step = jax.jit(jax.value_and_grad(chain))
    x = jnp.asarray(x0, dtype=jnp.float64)

    def run():
        loss, grad = step(x)
        return loss.block_until_ready(), grad.block_until_ready()

    return Case(run=run, outputs=lambda r: {"loss": float(r[0]), "grad": np.asarray(r[1])})
