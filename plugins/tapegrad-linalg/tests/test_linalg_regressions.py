"""Regression tests for wrong gradients found by the issue 14 differential tests (against
PyTorch and finite differences of NumPy)."""

import numpy as np
import tapegrad as tg


def _numeric_grad(f, a, w, h=1e-6):
    out = np.zeros_like(a)
    for k in np.ndindex(a.shape):
        ap, am = a.copy(), a.copy()
        ap[k] += h
        am[k] -= h
        out[k] = (np.sum(w * f(ap)) - np.sum(w * f(am))) / (2 * h)
    return out


def test_pinv_hermitian_gradient_of_a_matrix_whose_upper_triangle_differs():
    # np.linalg.pinv(hermitian=True) reads the lower triangle only (through eigh); the
    # rule used the full, non-symmetric a instead of that symmetric matrix.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 3))
    a = x @ x.T + 3 * np.eye(3) + np.triu(rng.standard_normal((3, 3)), 1)
    w = rng.standard_normal((3, 3))
    t = tg.tensor(a, requires_grad=True)
    (tg.linalg.pinv(t, hermitian=True) * tg.tensor(w)).sum().backward()
    expected = _numeric_grad(lambda m: np.linalg.pinv(m, hermitian=True), a, w)
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-6, atol=1e-8)
    assert np.all(np.triu(t.grad.numpy(), 1) == 0)          # the upper triangle is unread
