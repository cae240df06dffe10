"""W7: one training step of examples/train_digits_cnn.py's CNN on a batch of 64 8x8
images, float32.

The network (PyTorch layer names, in both libraries as ``nn.Sequential`` of modules)::

    Conv2d(1, 16, 3, padding=1) BatchNorm2d ReLU  Conv2d(16, 32, 3, padding=1) BatchNorm2d
    ReLU MaxPool2d(2)  Conv2d(32, 64, 3, padding=1) BatchNorm2d ReLU MaxPool2d(2)
    Flatten Linear(256, 10)

A step is: forward in training mode (batch statistics; the running statistics are updated),
mean cross-entropy against integer labels, backward, and a plain SGD update (lr 0.01) of
every parameter. The example's Dropout is left out: the libraries draw different random
masks, so their results could not be checked against each other (it is one elementwise
multiply, a small part of the step).

**Reference.** A hand-written NumPy backward of convolutions, batch norm and max pooling
would be a second implementation of im2col/col2im and of pooling's argmax routing, as long
as the layers themselves and no more trustworthy; so W7 has no NumPy case, and its
reference is tapegrad (eager), whose conv/batch-norm/pool gradients are checked against
finite differences by the plugin's contract tests. Every round of torch and of
tapegrad-compiled is checked against it: the loss and every parameter's gradient, computed
from the same weights and batch.

NOTE: like W2, a step first restores the initial parameters and running statistics (an
in-place copy, the same in every library), so every call computes the same step.
"""

from __future__ import annotations

import numpy as np

from ..registry import Case, Workload, register, time_per

LR = 0.01
# (kind, arguments) of the layers, PyTorch's constructor arguments.
LAYERS = (("conv", (1, 16)), ("bn", (16,)), ("relu", ()),
          ("conv", (16, 32)), ("bn", (32,)), ("relu", ()), ("pool", ()),
          ("conv", (32, 64)), ("bn", (64,)), ("relu", ()), ("pool", ()),
          ("flatten", ()), ("linear", (64 * 2 * 2, 10)))

W7 = register(Workload(
    key="W7",
    title="CNN (3 conv + batch norm + max pool) batch 64 on 8x8 training step (float32)",
    description=("One SGD training step (forward in training mode, cross-entropy, backward, "
                 "update) of examples/train_digits_cnn.py's CNN without Dropout on a batch "
                 "of 64 1x8x8 images, float32, as nn modules in both libraries. No NumPy "
                 "case (a hand-written CNN backward is not a more trustworthy reference): "
                 "torch and tapegrad-compiled are checked against tapegrad eager."),
    params={"batch": 64, "lr": LR, "seed": 0, "dtype": "float32"},
    metrics=(time_per("step", 1, unit="ms"),),
    rtol=2e-3,
    atol=2e-5,
    reference="tapegrad",
))


def _model(nn, dtype):
    """The network in ``nn`` (``tg.nn`` or ``torch.nn``): the same names and shapes."""
    make = {"conv": lambda i, o: nn.Conv2d(i, o, 3, padding=1, dtype=dtype),
            "bn": lambda c: nn.BatchNorm2d(c, dtype=dtype),
            "relu": nn.ReLU, "pool": lambda: nn.MaxPool2d(2), "flatten": nn.Flatten,
            "linear": lambda i, o: nn.Linear(i, o, dtype=dtype)}
    return nn.Sequential(*(make[kind](*args) for kind, args in LAYERS))


def _data(params, shapes):
    """Batch, labels and initial parameters {name: array} for ``shapes`` {name: shape}."""
    rng = np.random.default_rng(params["seed"])
    x = rng.standard_normal((params["batch"], 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, params["batch"])
    init = {}
    for name, shape in shapes.items():
        if len(shape) > 1:                           # conv/linear weight: PyTorch's bound
            bound = 1.0 / np.sqrt(np.prod(shape[1:]))
            init[name] = rng.uniform(-bound, bound, shape).astype(np.float32)
        else:                                        # biases; batch-norm scales near 1
            scale = LAYERS[int(name.split(".")[0])][0] == "bn" and name.endswith("weight")
            init[name] = (scale + rng.uniform(-0.1, 0.1, shape)).astype(np.float32)
    return x, y, init


def _outputs(loss, grads):
    return {"loss": float(loss)} | {f"grad {name}": g for name, g in grads.items()}


def _tapegrad_case(params, compiled):
    import tapegrad as tg

    model = _model(tg.nn, np.float32)
    weights = dict(model.named_parameters())
    x_np, y, init = _data(params, {n: p.shape for n, p in weights.items()})
    buffers = {n: b for n, b in model.named_buffers()}
    buffers0 = {n: b.numpy().copy() for n, b in buffers.items()}
    x, lr = tg.tensor(x_np), params["lr"]
    cross_entropy, no_grad = tg.nn.functional.cross_entropy, tg.no_grad

    def step(x, y):
        with no_grad():
            for name, p in weights.items():
                p[...] = init[name]
                p.grad = None
            for name, b in buffers.items():
                b[...] = buffers0[name]
        loss = cross_entropy(model(x), y)
        loss.backward()
        grads = [p.grad for p in weights.values()]
        with no_grad():
            for p in weights.values():
                p -= lr * p.grad
        return (loss, *grads)              # flat: tg.compile returns Tensors or a tuple of them

    if compiled:
        step = tg.compile(step)

    def run():
        return step(x, y)

    return Case(run=run, outputs=lambda r: _outputs(
        r[0].item(), {n: g.numpy() for n, g in zip(weights, r[1:])}))


@W7.implementation("tapegrad")
def tapegrad_case(params):
    """The network as tg.nn modules; loss.backward(); SGD under no_grad (the reference)."""
    return _tapegrad_case(params, compiled=False)


@W7.implementation("tapegrad-compiled")
def tapegrad_compiled_case(params):
    """The same step, the whole of it (reset, forward, backward, update) under
    ``tg.compile``: recorded on the first call, then replayed."""
    return _tapegrad_case(params, compiled=True)


@W7.implementation("torch")
def torch_case(params):
    """The same network as torch.nn modules (CPU, float32), the same weights and batch."""
    import torch

    model = _model(torch.nn, torch.float32)
    weights = dict(model.named_parameters())
    x_np, y_np, init_np = _data(params, {n: tuple(p.shape) for n, p in weights.items()})
    init = {n: torch.from_numpy(a) for n, a in init_np.items()}
    buffers = dict(model.named_buffers())
    buffers0 = {n: b.clone() for n, b in buffers.items()}
    x, y, lr = torch.from_numpy(x_np), torch.from_numpy(y_np), params["lr"]
    cross_entropy = torch.nn.functional.cross_entropy

    def run():
        with torch.no_grad():
            for name, p in weights.items():
                p.copy_(init[name])
                p.grad = None
            for name, b in buffers.items():
                b.copy_(buffers0[name])
        loss = cross_entropy(model(x), y)
        loss.backward()
        grads = [p.grad for p in weights.values()]
        with torch.no_grad():
            for p in weights.values():
                p -= lr * p.grad
        return loss, grads

    return Case(run=run, outputs=lambda r: _outputs(
        r[0].item(), {n: g.numpy() for n, g in zip(weights, r[1])}))
