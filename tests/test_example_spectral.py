"""examples/spectral_heat.py: its solver and gradient against the same solver written in
real arithmetic (cos/sin DFT matrices, no complex numbers, derivatives by hand), against
finite differences, and the fit recovers nu and c."""

import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import tapegrad as tg

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "spectral_heat.py"
EX = runpy.run_path(str(EXAMPLE))


def _real_solver(n, nu, c, t):
    """The solution operator M (u(t) = M @ u0) and its derivatives in nu and c, from the
    real Fourier series: M[p, q] = 1/n sum_j exp(-nu k_j^2 t) cos(2 pi j (p - q) / n
    - c k_j t), k_j the signed integer wavenumbers (j and n - j pair up into real modes)."""
    j = np.arange(n)
    k = np.where(j <= n // 2, j, j - n).astype(float)
    if n % 2 == 0:
        k[n // 2] = -n / 2          # np.fft.fftfreq's sign of the Nyquist bin; cos is even
    diff = np.subtract.outer(np.arange(n), np.arange(n))          # p - q
    phase = 2 * np.pi * np.multiply.outer(diff, j) / n - c * k * t   # (p, q, j)
    decay = np.exp(-nu * k ** 2 * t)
    m = (decay * np.cos(phase)).sum(-1) / n
    dm_dnu = (-(k ** 2) * t * decay * np.cos(phase)).sum(-1) / n
    dm_dc = (k * t * decay * np.sin(phase)).sum(-1) / n
    return m, dm_dnu, dm_dc


def _reference(u0, obs, nu, c, t):
    """Loss and its gradients (u0, log nu, c), in real arithmetic."""
    n = u0.shape[0]
    m, dm_dnu, dm_dc = _real_solver(n, nu, c, t)
    r = m @ u0 - obs
    loss = np.mean(r ** 2)
    g_u0 = m.T @ (2 * r / n)
    g_lognu = (2 * r / n) @ (dm_dnu @ u0) * nu
    g_c = (2 * r / n) @ (dm_dc @ u0)
    return loss, g_u0, g_lognu, g_c


def test_solver_and_gradient_match_real_arithmetic():
    u0, obs = EX["observation"]()
    for nu, c, t in ((0.2, 0.3, 1.0), (0.05, -1.3, 0.7), (0.01, 2.5, 2.0)):
        u0t = tg.tensor(u0, requires_grad=True)
        log_nu = tg.tensor(np.log(nu), requires_grad=True)
        ct = tg.tensor(c, requires_grad=True)
        m, _, _ = _real_solver(u0.shape[0], nu, c, t)
        np.testing.assert_allclose(EX["solve"](tg.tensor(u0), np.log(nu), c, t).numpy(),
                                   m @ u0, atol=1e-12)
        loss = ((EX["solve"](u0t, log_nu, ct, t) - tg.tensor(obs)) ** 2).mean()
        loss.backward()
        ref = _reference(u0, obs, nu, c, t)
        np.testing.assert_allclose(loss.item(), ref[0], rtol=1e-12)
        for got, want in zip((u0t.grad, log_nu.grad, ct.grad), ref[1:]):
            assert got.dtype == np.float64             # real parameters, real gradients
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-12)


def test_gradient_matches_finite_differences():
    u0, obs = EX["observation"]()

    def loss(p):
        return EX["loss_fn"](tg.tensor(u0), tg.tensor(obs), p[0], p[1]).item()

    p = np.array([np.log(0.1), 0.5])
    pt = [tg.tensor(p[0], requires_grad=True), tg.tensor(p[1], requires_grad=True)]
    EX["loss_fn"](tg.tensor(u0), tg.tensor(obs), *pt).backward()
    eps = 1e-6
    for i in range(2):
        d = np.zeros(2)
        d[i] = eps
        fd = (loss(p + d) - loss(p - d)) / (2 * eps)
        np.testing.assert_allclose(pt[i].grad.item(), fd, rtol=1e-6)


def test_fit_recovers_nu_and_c():
    nu, c, first, last = EX["main"](steps=300, log=False)
    assert abs(nu - EX["TRUE_NU"]) < 0.01 and abs(c - EX["TRUE_C"]) < 0.02
    assert last < 2e-4 < first        # the noise's variance is 1e-4


def test_runs_as_a_script():
    out = subprocess.run([sys.executable, str(EXAMPLE), "--steps", "5"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "fitted nu" in out.stdout


def test_compiled_step_replays_the_same_loss_and_gradient():
    """tg.compile records the spectral solver (fft ops, complex elementwise) and replays
    it: the same numbers as eager, bit for bit, from the second call on."""
    u0, obs = (tg.tensor(a) for a in EX["observation"]())

    @tg.compile
    def step(log_nu, c):
        loss = EX["loss_fn"](u0, obs, log_nu, c)
        loss.backward()
        return loss

    for nu, c in ((0.1, 0.6), (0.2, 0.7), (0.3, 0.8)):
        compiled = [tg.tensor(np.log(nu), requires_grad=True), tg.tensor(c, requires_grad=True)]
        eager = [tg.tensor(np.log(nu), requires_grad=True), tg.tensor(c, requires_grad=True)]
        got = step(*compiled)
        want = EX["loss_fn"](u0, obs, *eager)
        want.backward()
        assert got.item() == want.item()
        assert [p.grad.item() for p in compiled] == [p.grad.item() for p in eager]
    assert step.cache_info().hits == 2
