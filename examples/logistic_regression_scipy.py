"""L2-regularised logistic regression written as a NumPy/SciPy user would, made
differentiable by taking expit and xlogy from tg.scipy.special instead of scipy.special,
and fitted by plain gradient descent.

The loss is the mean negative log-likelihood plus (lam / 2) |w|^2 (the intercept is not
penalised):

    p = expit(X @ w + b)
    loss = -mean(xlogy(y, p) + xlogy(1 - y, 1 - p)) + lam / 2 * sum(w ** 2)

tests/test_example_logistic_regression.py checks the fitted weights against
scipy.optimize.minimize on the same loss written in NumPy/SciPy.

    .venv/bin/python examples/logistic_regression_scipy.py
"""

import argparse
import time

import numpy as np
import tapegrad as tg

special = tg.scipy.special          # where a SciPy program has `from scipy import special`


def make_data(n=300, d=4, seed=0):
    """A seeded, overlapping two-class problem: X (n, d) standardized, y in {0, 1}."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w_true = np.linspace(-2.0, 2.0, d)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ w_true + 0.5)))).astype(float)
    return X, y


def loss_fn(w, b, X, y, lam):
    p = special.expit(X @ w + b)
    nll = -(special.xlogy(y, p) + special.xlogy(1 - y, 1 - p)).mean()
    return nll + lam / 2 * (w ** 2).sum()


def fit(X, y, lam=0.1, lr=1.0, steps=400):
    """Gradient descent from zero; returns (w, b, final loss) as NumPy values."""
    w = tg.tensor(np.zeros(X.shape[1]), requires_grad=True)
    b = tg.tensor(0.0, requires_grad=True)
    X, y = tg.tensor(X), tg.tensor(y)
    for _ in range(steps):
        loss = loss_fn(w, b, X, y, lam)
        w.grad = b.grad = None
        loss.backward()
        with tg.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
    return w.numpy().copy(), float(b.item()), float(loss_fn(w, b, X, y, lam).item())


def main(steps=400, lam=0.1, seed=0):
    X, y = make_data(seed=seed)
    start = time.perf_counter()
    w, b, loss = fit(X, y, lam=lam, steps=steps)
    seconds = time.perf_counter() - start
    accuracy = np.mean(((X @ w + b) > 0) == (y == 1))
    print(f"loss {loss:.6f}  accuracy {accuracy:.3f}  w {np.round(w, 4)}  b {b:.4f}  "
          f"({steps} steps, {seconds:.2f} s)")
    return w, b, loss


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--lam", type=float, default=0.1)
    args = parser.parse_args()
    main(steps=args.steps, lam=args.lam)
