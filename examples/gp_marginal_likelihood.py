"""Fit the hyperparameters of a Gaussian process (an RBF kernel: lengthscale, signal
variance, noise variance) by gradient descent on its negative log marginal likelihood,

    nll = 1/2 y^T K^-1 y + 1/2 log|K| + n/2 log(2 pi),
    K_ij = s2 exp(-(x_i - x_j)^2 / (2 l^2)) + noise2 [i == j],

written as a NumPy user writes it (``np.linalg.cholesky``, ``solve``, ``slogdet``) with
``tg`` in place of ``np``; tapegrad differentiates through the Cholesky factor, the
triangular solves and the log-determinant. The hyperparameters are optimized in log space
with Adam (tg.optim).

    .venv/bin/python examples/gp_marginal_likelihood.py
"""

import argparse
import time

import numpy as np
import tapegrad as tg


def make_data(n=40, seed=0):
    """n noisy samples of sin(3x) + x/2 on [-2, 2] (fixed seed)."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-2.0, 2.0, n))
    y = np.sin(3.0 * x) + 0.5 * x + 0.1 * rng.standard_normal(n)
    return x, y


def negative_log_likelihood(log_params, x, y):
    """The GP's negative log marginal likelihood at log_params = (log lengthscale,
    log signal variance, log noise variance); tensors in, a 0-d tensor out."""
    lengthscale, signal, noise = tg.exp(log_params[0]), tg.exp(log_params[1]), tg.exp(log_params[2])
    n = x.shape[0]
    d2 = (x[:, None] - x[None, :]) ** 2
    K = signal * tg.exp(-0.5 * d2 / lengthscale ** 2) + noise * tg.eye(n)
    L = tg.linalg.cholesky(K)
    alpha = tg.linalg.solve(L.T, tg.linalg.solve(L, y))         # K^-1 y, via the factor
    logdet = tg.linalg.slogdet(K).logabsdet
    return 0.5 * (y @ alpha) + 0.5 * logdet + 0.5 * n * np.log(2.0 * np.pi)


def fit(x, y, steps=400, lr=0.05, init=(0.0, 0.0, -1.0), verbose=False):
    """Minimize the nll with Adam; returns (log_params as a NumPy array, final nll)."""
    x, y = tg.tensor(x), tg.tensor(y)
    log_params = tg.tensor(np.array(init, dtype=float), requires_grad=True)
    opt = tg.optim.Adam([log_params], lr=lr)
    sched = max(steps // 2, 1)
    for step in range(steps):
        if step == sched:                   # a smaller step to settle in the minimum
            for group in opt.param_groups:
                group["lr"] = lr / 10
        opt.zero_grad()
        nll = negative_log_likelihood(log_params, x, y)
        nll.backward()
        opt.step()
        if verbose and step % (steps // 5) == 0:
            print(f"step {step:4d}  nll {nll.item():.6f}  params {np.exp(log_params.numpy())}")
    with tg.no_grad():
        final = negative_log_likelihood(log_params, x, y).item()
    return log_params.numpy().copy(), final


def main(steps=400):
    x, y = make_data()
    start = time.perf_counter()
    log_params, nll = fit(x, y, steps=steps, verbose=True)
    lengthscale, signal, noise = np.exp(log_params)
    print(f"fitted: lengthscale {lengthscale:.4f}  signal variance {signal:.4f}  "
          f"noise variance {noise:.5f}  nll {nll:.6f}  ({time.perf_counter() - start:.2f} s)")
    return log_params, nll


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    main(parser.parse_args().steps)
