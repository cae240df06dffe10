"""Per-example gradients with tg.vmap(tg.func.grad(...)): DP-SGD-style training.

Differentially private SGD (Abadi et al., 2016) clips each example's gradient to a norm
bound C before averaging and adds Gaussian noise, so no single example can move the
model much. That needs the gradient of every example separately -- a Python loop of
backward passes, or one vectorized call: ``tg.vmap(tg.func.grad(loss), in_axes=(None, 0,
0))`` maps the gradient of the per-example loss over the batch, with the model's
parameters passed as a dict through ``tg.func.functional_call``.

    python examples/per_sample_grads.py [--steps N]

prints the training accuracy of a small MLP on scikit-learn's digits trained this way.
"""

from __future__ import annotations

import argparse

import numpy as np

import tapegrad as tg


def make_model(seed=0):
    tg.random.manual_seed(seed)
    return tg.nn.Sequential(tg.nn.Linear(64, 64), tg.nn.Tanh(), tg.nn.Linear(64, 10))


def per_example_grads(model, params, x, y):
    """{name: gradient of each example's loss}, each with the batch axis first."""
    def loss(params, xi, yi):
        logits = tg.func.functional_call(model, params, (xi,))
        return tg.nn.functional.cross_entropy(logits, yi)

    return tg.vmap(tg.func.grad(loss), in_axes=(None, 0, 0))(params, x, y)


def clipped_noisy_mean(grads, clip, noise, rng):
    """DP-SGD's update direction: each example's gradient (all parameters together)
    clipped to norm `clip`, averaged, plus Gaussian noise of std noise * clip / batch."""
    names = sorted(grads)
    batch = grads[names[0]].shape[0]
    sq = sum((grads[n].reshape((batch, -1)) ** 2).sum(axis=1) for n in names)
    scale = tg.minimum(tg.ones_like(sq), clip / (tg.sqrt(sq) + 1e-12))       # (batch,)
    out = {}
    for n in names:
        g = grads[n]
        s = scale.reshape((batch,) + (1,) * (g.ndim - 1))
        mean = (g * s).mean(axis=0)
        out[n] = mean + tg.tensor(rng.normal(0.0, noise * clip / batch, mean.shape))
    return out


def main(steps=150, batch=64, lr=0.5, clip=1.0, noise=0.5, seed=0, log=True):
    from sklearn.datasets import load_digits

    digits = load_digits()
    x_all = (digits.data / 16.0).astype(np.float64)
    y_all = digits.target.astype(np.int64)
    model = make_model(seed).double()
    params = {n: p.detach() for n, p in model.named_parameters()}
    rng = np.random.default_rng(seed)
    for step in range(steps):
        idx = rng.choice(len(x_all), batch, replace=False)
        grads = per_example_grads(model, params, tg.tensor(x_all[idx]), tg.tensor(y_all[idx]))
        update = clipped_noisy_mean(grads, clip, noise, rng)
        params = {n: params[n] - lr * update[n] for n in params}
        if log and step % 50 == 0:
            print(f"step {step}")
    with tg.no_grad():
        logits = tg.func.functional_call(model, params, (tg.tensor(x_all),))
    accuracy = float((logits.numpy().argmax(axis=1) == y_all).mean())
    if log:
        print(f"training accuracy with DP-SGD (clip {clip}, noise {noise}): {accuracy:.3f}")
    return accuracy


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    args = parser.parse_args()
    main(steps=args.steps)
