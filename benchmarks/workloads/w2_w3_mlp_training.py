"""W2 and W3: one training step of a ReLU MLP with softmax cross-entropy, float32.

W2  64-128-128-10, batch 32:     small matrices, so framework overhead shows.
W3  784-2048-2048-10, batch 256: large matrices, so the BLAS kernels dominate.

A step is: forward, mean cross-entropy against integer labels, backward, and a plain SGD
update (lr 0.01) of every weight and bias. Weights are stored (in, out) and the layers are
written out by hand in all three libraries (no module machinery), so the figures compare
the autodiff engines on the same arithmetic.

NOTE: a step changes the parameters, and the runner calls ``run()`` many times per sample,
so each step first restores the initial parameters (an in-place copy, the same in every
library); the outputs checked against NumPy are then those of one step from the same start.
"""

from __future__ import annotations

import numpy as np

from ..registry import Case, Workload, import_jax, register, time_per

LR = 0.01


def _workload(key, sizes, batch, note):
    return register(Workload(
        key=key,
        title=f"MLP {'-'.join(map(str, sizes))} batch {batch} training step (float32)",
        description=(f"One SGD training step (forward, cross-entropy, backward, update) of a "
                     f"ReLU MLP {'-'.join(map(str, sizes))} on a batch of {batch}, float32. "
                     + note),
        params={"sizes": sizes, "batch": batch, "lr": LR, "seed": 0, "dtype": "float32"},
        metrics=(time_per("step", 1, unit="ms"),),
        rtol=2e-3,
        atol=2e-5,
    ))


W2 = _workload("W2", (64, 128, 128, 10), 32, "Small matrices: per-op overhead shows.")
W3 = _workload("W3", (784, 2048, 2048, 10), 256, "Large matrices: BLAS dominates.")


def _data(params):
    """Inputs, labels and initial (W, b) per layer, the same in every library."""
    rng = np.random.default_rng(params["seed"])
    sizes, batch = params["sizes"], params["batch"]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch)
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        layers.append((rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32),
                       rng.uniform(-bound, bound, fan_out).astype(np.float32)))
    return x, y, layers


def numpy_forward(x, weights):
    """The ReLU MLP's forward in NumPy keeping what a hand-written backward reads: the
    activations (input first, logits last) and the pre-activations of each layer."""
    acts, pre, h = [x], [], x
    n_layers = len(weights) // 2
    for i in range(n_layers):
        z = h @ weights[2 * i] + weights[2 * i + 1]
        pre.append(z)
        h = np.maximum(z, 0) if i < n_layers - 1 else z
        acts.append(h)
    return acts, pre


def _outputs(loss, params):
    out = {"loss": float(loss)}
    for i, p in enumerate(params):
        out[f"param{i}"] = np.asarray(p)
    return out


def _tapegrad_case(params, compiled):
    import tapegrad as tg

    x_np, y_np, layers = _data(params)
    init = [a for layer in layers for a in layer]
    weights = [tg.tensor(a, requires_grad=True) for a in init]
    x, y = tg.tensor(x_np), y_np
    lr, relu, cross_entropy, no_grad = params["lr"], tg.relu, tg.cross_entropy, tg.no_grad

    def step(x, y):
        with no_grad():
            for p, p0 in zip(weights, init):
                p[...] = p0
                p.grad = None
        h = x
        n_layers = len(weights) // 2
        for i in range(n_layers):
            h = h @ weights[2 * i] + weights[2 * i + 1]
            if i < n_layers - 1:
                h = relu(h)
        loss = cross_entropy(h, y)
        loss.backward()
        with no_grad():
            for p in weights:
                p -= lr * p.grad
        return loss

    if compiled:
        step = tg.compile(step)

    def run():
        return step(x, y), weights

    return Case(run=run, outputs=lambda r: _outputs(r[0].item(), [p.numpy() for p in r[1]]))


def _implement(workload):
    @workload.implementation("numpy")
    def numpy_case(params):
        """Forward keeping activations; backward and update written by hand."""
        x, y, layers = _data(params)
        init = [a for layer in layers for a in layer]
        weights = [a.copy() for a in init]
        lr = np.float32(params["lr"])
        rows = np.arange(x.shape[0])

        def run():
            for p, p0 in zip(weights, init):
                p[...] = p0
            acts, pre = numpy_forward(x, weights)
            n_layers = len(weights) // 2
            logits = acts[-1]
            shifted = logits - logits.max(axis=1, keepdims=True)
            exp = np.exp(shifted)
            total = exp.sum(axis=1, keepdims=True)
            loss = -(shifted[rows, y] - np.log(total[:, 0])).mean()
            g = exp / total
            g[rows, y] -= 1
            g /= x.shape[0]
            for i in reversed(range(n_layers)):
                if i < n_layers - 1:
                    g = g * (pre[i] > 0)
                gw = acts[i].T @ g
                gb = g.sum(axis=0)
                if i > 0:
                    g = g @ weights[2 * i].T
                weights[2 * i] -= lr * gw
                weights[2 * i + 1] -= lr * gb
            return loss, weights

        return Case(run=run, outputs=lambda r: _outputs(r[0], r[1]))

    @workload.implementation("tapegrad")
    def tapegrad_case(params):
        """The same network as raw tapegrad tensors; loss.backward(); SGD under no_grad."""
        return _tapegrad_case(params, compiled=False)

    @workload.implementation("tapegrad-compiled")
    def tapegrad_compiled_case(params):
        """The same step, the whole of it (reset, forward, backward, update) under
        ``tg.compile``: recorded on the first call, then replayed as one kernel list."""
        return _tapegrad_case(params, compiled=True)

    @workload.implementation("torch")
    def torch_case(params):
        """The same network in PyTorch (CPU, float32)."""
        import torch

        x_np, y_np, layers = _data(params)
        init = [torch.from_numpy(a) for layer in layers for a in layer]
        weights = [a.clone().requires_grad_(True) for a in init]
        x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
        lr, relu, cross_entropy = params["lr"], torch.relu, torch.nn.functional.cross_entropy

        def run():
            with torch.no_grad():
                for p, p0 in zip(weights, init):
                    p.copy_(p0)
                    p.grad = None
            h = x
            n_layers = len(weights) // 2
            for i in range(n_layers):
                h = h @ weights[2 * i] + weights[2 * i + 1]
                if i < n_layers - 1:
                    h = relu(h)
            loss = cross_entropy(h, y)
            loss.backward()
            with torch.no_grad():
                for p in weights:
                    p -= lr * p.grad
            return loss, weights

        return Case(run=run,
                    outputs=lambda r: _outputs(r[0].item(), [p.detach().numpy() for p in r[1]]))


    @workload.implementation("jax")
    def jax_case(params):
        """The same step as a JAX user writes it: loss, gradients and the SGD update in
        one ``jax.jit`` function (CPU, float32), from the initial parameters each call
        (the functional counterpart of the others' in-place restore)."""
        jax = import_jax()
        import jax.numpy as jnp

        x_np, y_np, layers = _data(params)
        init = [jnp.asarray(a) for layer in layers for a in layer]
        x, y, lr = jnp.asarray(x_np), jnp.asarray(y_np), params["lr"]

        def loss_of(weights):
            h = x
            n_layers = len(weights) // 2
            for i in range(n_layers):
                h = h @ weights[2 * i] + weights[2 * i + 1]
                if i < n_layers - 1:
                    h = jax.nn.relu(h)
            logp = jax.nn.log_softmax(h, axis=1)
            return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()

        @jax.jit
        def step(weights):
            loss, grads = jax.value_and_grad(loss_of)(weights)
            return loss, [p - lr * g for p, g in zip(weights, grads)]

        def run():
            loss, weights = step(init)
            return jax.block_until_ready((loss, weights))

        return Case(run=run, outputs=lambda r: _outputs(float(r[0]), [np.asarray(p) for p in r[1]]))


_implement(W2)
_implement(W3)
