"""examples/logistic_regression_scipy.py fits the same weights as scipy.optimize.minimize
on the same loss written in plain NumPy/SciPy (the independent reference)."""

import runpy
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.optimize
import scipy.special

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "logistic_regression_scipy.py"


def _numpy_loss_and_grad(theta, X, y, lam):
    w, b = theta[:-1], theta[-1]
    z = X @ w + b
    p = scipy.special.expit(z)
    loss = -np.mean(scipy.special.xlogy(y, p) + scipy.special.xlogy(1 - y, 1 - p))
    loss += lam / 2 * np.sum(w ** 2)
    r = (p - y) / len(y)
    return loss, np.append(X.T @ r + lam * w, r.sum())


def test_fitted_weights_match_scipy_optimize():
    example = runpy.run_path(str(EXAMPLE))
    X, y = example["make_data"]()
    lam = 0.1
    start = time.perf_counter()
    w, b, loss = example["fit"](X, y, lam=lam)
    assert time.perf_counter() - start < 5.0
    ref = scipy.optimize.minimize(_numpy_loss_and_grad, np.zeros(X.shape[1] + 1),
                                  args=(X, y, lam), jac=True, method="BFGS",
                                  options={"gtol": 1e-8})
    assert ref.success, ref.message
    # Tolerance: the loss is strongly convex (modulus >= lam = 0.1), so a gradient below
    # 1e-8 puts BFGS within 1e-7 of the minimiser; 1e-6 on each weight leaves room for
    # gradient descent to be as far.
    np.testing.assert_allclose(w, ref.x[:-1], atol=1e-6)
    np.testing.assert_allclose(b, ref.x[-1], atol=1e-6)
    np.testing.assert_allclose(loss, ref.fun, rtol=1e-10)


def test_runs_as_a_script():
    out = subprocess.run([sys.executable, str(EXAMPLE), "--steps", "20"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "accuracy" in out.stdout
