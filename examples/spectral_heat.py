"""Fit the physics of a periodic advection-diffusion equation from one observation, through
a spectral solver written with tg.fft.

    u_t + c u_x = nu u_xx   on [0, 2 pi), periodic

is solved exactly in Fourier space: each mode of the initial state u0 decays and turns,
u_hat(k, T) = u0_hat(k) * exp((-nu k^2 - i c k) T), so u(T) = irfft(rfft(u0) * that).
Given u0 and a noisy observation of u(T), gradient descent on the mean squared misfit
recovers the diffusivity nu and the speed c: the gradient flows through the complex
multiplier, exp of a complex tensor, and rfft/irfft (tapegrad's complex convention,
docs/autograd.md; the real parameters get the real part of their complex gradient).

tests/test_example_spectral.py checks this gradient against the same solver written in
real arithmetic (cos/sin DFT matrices, derivatives by hand) and against finite
differences.

    python examples/spectral_heat.py [--steps 300]
"""

import argparse

import numpy as np
import tapegrad as tg

N = 64                      # grid points
T = 1.0                     # final time
TRUE_NU, TRUE_C = 0.05, 0.8


def grid(n=N):
    return np.arange(n) * (2 * np.pi / n)


def initial_state(n=N):
    """Two smooth bumps: many modes, all of them moved and damped differently."""
    x = grid(n)
    return np.exp(-8 * (1 - np.cos(x - 2.0))) - 0.6 * np.exp(-3 * (1 - np.cos(x - 4.5)))


def solve(u0, log_nu, c, t=T):
    """u(t) of the advection-diffusion equation from u0 (a real (n,) tensor or array), for
    nu = exp(log_nu) and speed c (tensors or numbers), exactly (spectrally)."""
    n = u0.shape[-1]
    k = tg.fft.rfftfreq(n, d=1.0 / n)          # integer wavenumbers 0 .. n/2 on [0, 2 pi)
    rate = -tg.exp(log_nu) * k ** 2 * t - 1j * c * k * t
    return tg.fft.irfft(tg.fft.rfft(u0) * tg.exp(rate), n=n)


def observation(seed=0, noise=0.01):
    u0 = initial_state()
    clean = solve(tg.tensor(u0), np.log(TRUE_NU), TRUE_C).numpy()
    return u0, clean + noise * np.random.default_rng(seed).standard_normal(N)


def loss_fn(u0, obs, log_nu, c):
    return ((solve(u0, log_nu, c) - obs) ** 2).mean()


def main(steps=300, lr=0.05, log=True):
    """Fit (nu, c) from nu = 0.2, c = 0.3; returns (nu, c, first loss, last loss)."""
    u0, obs = observation()
    u0, obs = tg.tensor(u0), tg.tensor(obs)
    log_nu = tg.tensor(np.log(0.2), requires_grad=True)
    c = tg.tensor(0.3, requires_grad=True)
    opt = tg.optim.Adam([log_nu, c], lr=lr)
    losses = []
    for step in range(steps):
        opt.zero_grad()
        loss = loss_fn(u0, obs, log_nu, c)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if log and (step % 50 == 0 or step == steps - 1):
            print(f"step {step:4d}  mse {loss.item():.3e}  nu {np.exp(log_nu.item()):.4f}  "
                  f"c {c.item():.4f}")
    return float(np.exp(log_nu.item())), c.item(), losses[0], losses[-1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    nu, c, first, last = main(steps=args.steps)
    print(f"fitted nu {nu:.4f} (true {TRUE_NU}), c {c:.4f} (true {TRUE_C}); "
          f"mse {first:.3e} -> {last:.3e}")
