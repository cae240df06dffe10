"""examples/gp_marginal_likelihood.py: the fitted GP hyperparameters and nll agree with
scipy.optimize.minimize on the same objective written in plain NumPy (an independent
reference), and tapegrad's gradient with central finite differences of that reference."""

import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
import tapegrad as tg

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gp_marginal_likelihood.py"
GP = runpy.run_path(str(EXAMPLE))


def reference_nll(log_params, x, y):
    """The same objective in NumPy/SciPy: cho_factor and cho_solve, log|K| from the factor."""
    lengthscale, signal, noise = np.exp(log_params)
    K = signal * np.exp(-0.5 * np.subtract.outer(x, x) ** 2 / lengthscale ** 2)
    K += noise * np.eye(len(x))
    c, lower = scipy.linalg.cho_factor(K, lower=True)
    alpha = scipy.linalg.cho_solve((c, lower), y)
    return 0.5 * y @ alpha + np.log(np.diag(c)).sum() + 0.5 * len(x) * np.log(2 * np.pi)


@pytest.fixture(scope="module")
def data():
    return GP["make_data"]()


def test_the_nll_matches_the_reference(data):
    x, y = data
    for p in ([0.0, 0.0, -1.0], [-0.5, 1.0, -3.0]):
        got = GP["negative_log_likelihood"](tg.tensor(p), tg.tensor(x), tg.tensor(y)).item()
        assert got == pytest.approx(reference_nll(np.array(p), x, y), rel=1e-10)


def test_the_gradient_matches_finite_differences_of_the_reference(data):
    x, y = data
    p0 = np.array([-0.2, 0.7, -2.5])
    p = tg.tensor(p0, requires_grad=True)
    GP["negative_log_likelihood"](p, tg.tensor(x), tg.tensor(y)).backward()
    eps = 1e-6
    numeric = np.array([(reference_nll(p0 + eps * e, x, y) - reference_nll(p0 - eps * e, x, y))
                        / (2 * eps) for e in np.eye(3)])
    np.testing.assert_allclose(p.grad.numpy(), numeric, rtol=1e-6, atol=1e-7)


def test_gradient_descent_finds_scipys_minimum(data):
    x, y = data
    log_params, nll = GP["fit"](x, y)
    ref = scipy.optimize.minimize(reference_nll, [0.0, 0.0, -1.0], args=(x, y),
                                  method="L-BFGS-B")
    assert ref.success
    assert nll == pytest.approx(ref.fun, abs=1e-6)
    np.testing.assert_allclose(log_params, ref.x, atol=5e-3)
    # the fitted noise is near the data's (0.1 ** 2 = 0.01)
    assert 0.003 < np.exp(log_params[2]) < 0.03


def test_the_example_runs_as_a_script():
    out = subprocess.run([sys.executable, str(EXAMPLE), "--steps", "20"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "fitted: lengthscale" in out.stdout
