"""The results issue #4 asks to show: Hessians, Jacobians, HVPs and third derivatives
against closed forms."""

import numpy as np
import pytest
import tapegrad as tg


def test_hessian_of_sum_of_squares_is_2_identity():
    x = tg.tensor(np.random.default_rng(0).standard_normal(5))
    H = tg.hessian(lambda x: (x ** 2).sum(), x)
    assert H.shape == (5, 5)
    np.testing.assert_array_equal(H.numpy(), 2 * np.eye(5))


def test_jacobian_of_the_narrow_add_example():
    # RustyTorch++'s example: f(x) = x[0:2] + x[1:3] for x in R^3.
    x = tg.tensor([0.3, -1.2, 2.5])
    J = tg.jacobian(lambda x: x[0:2] + x[1:3], x)
    assert J.shape == (2, 3)
    np.testing.assert_array_equal(J.numpy(), [[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    for strategy in ("reverse-mode", "forward-mode"):
        np.testing.assert_array_equal(
            tg.jacobian(lambda x: x[0:2] + x[1:3], x, strategy=strategy).numpy(), J.numpy())
    batched = tg.jacobian(lambda x: x[..., 0:2] + x[..., 1:3], x, vectorize=True)
    np.testing.assert_array_equal(batched.numpy(), J.numpy())


def _tanh_problem(n=6, m=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, n)), rng.standard_normal(n)


def _tanh_hessian(W, x):
    t = np.tanh(W @ x)
    return W.T @ np.diag(-2 * t * (1 - t ** 2)) @ W


@pytest.mark.parametrize("n,m", [(6, 4), (3, 7), (64, 64)])
def test_hessian_of_sum_tanh_Wx_matches_the_analytic_formula(n, m):
    W, x0 = _tanh_problem(n, m)
    Wt = tg.tensor(W)
    H = tg.hessian(lambda x: tg.tanh(Wt @ x).sum(), tg.tensor(x0))
    assert H.shape == (n, n)
    np.testing.assert_allclose(H.numpy(), _tanh_hessian(W, x0), rtol=0, atol=1e-10)
    Hb = tg.hessian(lambda x: tg.tanh(x @ Wt.T).sum(axis=-1), tg.tensor(x0), vectorize=True)
    np.testing.assert_allclose(Hb.numpy(), _tanh_hessian(W, x0), rtol=0, atol=1e-10)


def test_hvp_matches_hessian_times_v():
    W, x0 = _tanh_problem()
    Wt = tg.tensor(W)
    f = lambda x: tg.tanh(Wt @ x).sum()
    x = tg.tensor(x0)
    v = tg.tensor(np.random.default_rng(1).standard_normal(x0.shape))
    H = tg.hessian(f, x)
    out, hv = tg.hvp(f, x, v)
    np.testing.assert_allclose(hv.numpy(), H.numpy() @ v.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.item(), np.tanh(W @ x0).sum())


def _derivatives(f, x, order):
    """[f'(x), f''(x), ...] by repeated tg.grad with create_graph."""
    x = tg.tensor(x, requires_grad=True)
    y, out = f(x), []
    for k in range(order):
        (y,) = tg.grad(y, x, create_graph=k < order - 1)
        out.append(y.item())
    return out


@pytest.mark.parametrize("x", [-1.3, 0.0, 0.7, 2.0])
def test_third_derivative_of_sin(x):
    d1, d2, d3 = _derivatives(tg.sin, x, 3)
    np.testing.assert_allclose([d1, d2, d3], [np.cos(x), -np.sin(x), -np.cos(x)],
                               rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("x", [-1.3, 0.0, 0.7, 2.0])
def test_third_derivative_of_exp_x_times_x(x):
    d = _derivatives(lambda x: tg.exp(x) * x, x, 4)
    # d^k/dx^k x e^x = (x + k) e^x
    np.testing.assert_allclose(d, [(x + k) * np.exp(x) for k in (1, 2, 3, 4)], rtol=1e-14)


def test_third_derivative_through_nested_transforms():
    # jacobian of the hessian (kept differentiable with create_graph): d^3/dx^3 of sum(sin)
    x0 = np.array([0.4, -0.9, 1.7])
    T = tg.jacobian(lambda x: tg.hessian(lambda z: tg.sin(z).sum(), x, create_graph=True),
                    tg.tensor(x0))
    expected = np.zeros((3, 3, 3))
    expected[np.arange(3), np.arange(3), np.arange(3)] = -np.cos(x0)
    assert T.shape == (3, 3, 3)
    np.testing.assert_allclose(T.numpy(), expected, atol=1e-14)


@pytest.mark.needs_torch
def test_hessian_against_torch_when_it_is_installed():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    A, b = rng.standard_normal((4, 5)), rng.standard_normal((5,))
    x0 = rng.standard_normal(5)

    def f(x, lib):
        h = lib.sigmoid(lib.sin(A @ x) * 2.0) if lib is tg else torch.sigmoid(
            torch.sin(torch.tensor(A) @ x) * 2.0)
        return (h * h).sum() + (x * x * (b if lib is tg else torch.tensor(b))).sum()

    H = tg.hessian(lambda x: f(x, tg), tg.tensor(x0)).numpy()
    Ht = torch.autograd.functional.hessian(lambda x: f(x, torch), torch.tensor(x0)).numpy()
    np.testing.assert_allclose(H, Ht, rtol=1e-12, atol=1e-14)
