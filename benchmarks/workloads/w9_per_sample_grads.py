"""W9: per-example gradients of the W2 MLP (64-128-128-10, float32) for a batch of 64.

Differential privacy (DP-SGD), influence functions and gradient-noise diagnostics need
the gradient of every example's loss separately. The reference is NumPy with the
per-example backward written by hand (one batched pass: each layer's per-example weight
gradient is the outer product of its input and its output gradient). tapegrad runs a
Python loop of 64 backward passes (what a user writes without vmap) and
``tg.vmap(tg.func.grad(loss))``; PyTorch the same loop and ``torch.func.vmap(grad)``
(target of issue 17: tapegrad's vmap at most 1x torch.func's).
"""

from __future__ import annotations

import numpy as np

from ..registry import Case, Workload, register, time_per
from .w2_w3_mlp_training import _data as _mlp_data
from .w2_w3_mlp_training import numpy_forward

SIZES = (64, 128, 128, 10)
BATCH = 64

W9 = register(Workload(
    key="W9",
    title="per-example gradients, MLP 64-128-128-10, batch 64 (float32)",
    description=("The gradient of each of 64 examples' cross-entropy losses with respect to "
                 "every weight and bias of a ReLU MLP 64-128-128-10, float32: a loop of "
                 "backward passes, and vmap(grad), against NumPy's hand-written per-example "
                 "backward."),
    params={"sizes": SIZES, "batch": BATCH, "seed": 0, "dtype": "float32"},
    metrics=(time_per("batch", 1, unit="ms"),),
    rtol=2e-3,
    atol=2e-5,
))


def _data(params):
    """W2's inputs, labels and initial weights (x, y, [W1, b1, W2, b2, ...])."""
    x, y, layers = _mlp_data(params)
    return x, y, [a for layer in layers for a in layer]


def _outputs(grads):
    return {f"grad{i}": np.asarray(g) for i, g in enumerate(grads)}


@W9.implementation("numpy")
def numpy_case(params) -> Case:
    """The per-example backward by hand, all examples at once."""
    x, y, weights = _data(params)
    rows = np.arange(x.shape[0])
    n_layers = len(weights) // 2

    def run():
        acts, pre = numpy_forward(x, weights)
        logits = acts[-1]
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        g = e / e.sum(axis=1, keepdims=True)
        g[rows, y] -= 1                      # d loss_b / d logits_b (no 1/batch: per example)
        grads = [None] * len(weights)
        for i in reversed(range(n_layers)):
            if i < n_layers - 1:
                g = g * (pre[i] > 0)
            grads[2 * i] = acts[i][:, :, None] * g[:, None, :]
            grads[2 * i + 1] = g
            if i > 0:
                g = g @ weights[2 * i].T
        return grads

    return Case(run=run, outputs=_outputs)


def _mlp_loss(relu, cross_entropy):
    """The per-example loss of the MLP, in whichever library's relu and cross_entropy."""
    def loss(weights, x, y):
        h = x
        n_layers = len(weights) // 2
        for i in range(n_layers):
            h = h @ weights[2 * i] + weights[2 * i + 1]
            if i < n_layers - 1:
                h = relu(h)
        return cross_entropy(h, y)
    return loss


def _tapegrad_loss(tg):
    return _mlp_loss(tg.relu, tg.cross_entropy)


@W9.implementation("tapegrad")
def tapegrad_loop_case(params) -> Case:
    """A Python loop: one forward and backward per example (tg.grad)."""
    import tapegrad as tg

    x_np, y_np, init = _data(params)
    weights = [tg.tensor(a, requires_grad=True) for a in init]
    x, y = tg.tensor(x_np), tg.tensor(y_np)
    loss, grad = _tapegrad_loss(tg), tg.grad

    def run():
        per = [grad(loss(weights, x[i:i + 1], y[i:i + 1]), weights) for i in range(len(x_np))]
        return [tg.stack([p[k] for p in per]) for k in range(len(weights))]

    return Case(run=run, outputs=lambda gs: _outputs([g.numpy() for g in gs]))


@W9.implementation("tapegrad-vmap")
def tapegrad_vmap_case(params) -> Case:
    """``tg.vmap(tg.func.grad(loss), in_axes=(None, 0, 0))``."""
    return _vmap_case(params, compiled=False)


@W9.implementation("tapegrad-vmap-compiled")
def tapegrad_vmap_compiled_case(params) -> Case:
    """The same call under ``tg.compile``."""
    return _vmap_case(params, compiled=True)


def _vmap_case(params, compiled):
    import tapegrad as tg

    x_np, y_np, init = _data(params)
    weights = [tg.tensor(a) for a in init]
    x, y = tg.tensor(x_np), tg.tensor(y_np)
    per_example = tg.vmap(tg.func.grad(_tapegrad_loss(tg)), in_axes=(None, 0, 0))
    if compiled:
        per_example = tg.compile(per_example)

    def run():
        return per_example(weights, x, y)

    return Case(run=run, outputs=lambda gs: _outputs([g.numpy() for g in gs]))


def _torch_loss(torch):
    return _mlp_loss(torch.relu, torch.nn.functional.cross_entropy)


@W9.implementation("torch")
def torch_loop_case(params) -> Case:
    """A Python loop of torch.autograd.grad, one example at a time."""
    import torch

    x_np, y_np, init = _data(params)
    weights = [torch.from_numpy(a).requires_grad_(True) for a in init]
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    loss = _torch_loss(torch)

    def run():
        per = [torch.autograd.grad(loss(weights, x[i:i + 1], y[i:i + 1]), weights)
               for i in range(len(x_np))]
        return [torch.stack([p[k] for p in per]) for k in range(len(weights))]

    return Case(run=run, outputs=lambda gs: _outputs([g.numpy() for g in gs]))


@W9.implementation("torch-func")
def torch_func_case(params) -> Case:
    """``torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))``."""
    import torch
    from torch.func import grad, vmap

    x_np, y_np, init = _data(params)
    weights = [torch.from_numpy(a) for a in init]
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    per_example = vmap(grad(_torch_loss(torch)), in_dims=(None, 0, 0))

    def run():
        return per_example(weights, x, y)

    return Case(run=run, outputs=lambda gs: _outputs([g.numpy() for g in gs]))
