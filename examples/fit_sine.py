"""Fit y = sin(x) on [-pi, pi] with a one-hidden-layer tanh network and plain gradient
descent, using only the elementwise and shape plugins (no matmul yet: the hidden layer is
a broadcast multiply and a sum).

    .venv/bin/python examples/fit_sine.py
"""

import argparse
import time

import numpy as np
import tapegrad as tg


def main(steps=2000, hidden=16, lr=0.05, seed=0):
    rng = np.random.default_rng(seed)
    x = tg.tensor(np.linspace(-np.pi, np.pi, 64)[:, None])           # (64, 1)
    y = tg.sin(x)

    w1 = tg.tensor(rng.standard_normal((1, hidden)), requires_grad=True)
    b1 = tg.tensor(np.zeros(hidden), requires_grad=True)
    w2 = tg.tensor(rng.standard_normal((hidden, 1)) / np.sqrt(hidden), requires_grad=True)
    b2 = tg.tensor(np.zeros(1), requires_grad=True)
    params = [w1, b1, w2, b2]

    def model(x):
        h = tg.tanh(x * w1 + b1)                                      # (64, hidden)
        return (h[:, :, None] * w2).sum(axis=1) + b2                  # (64, 1)

    start = time.perf_counter()
    for step in range(steps + 1):
        loss = ((model(x) - y) ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with tg.no_grad():
            for p in params:
                p -= lr * p.grad
        if step % (steps // 5) == 0:
            print(f"step {step:5d}  mse {loss.item():.5f}")
    print(f"{steps} steps in {time.perf_counter() - start:.2f} s")
    return loss.item()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    main(steps=args.steps)
