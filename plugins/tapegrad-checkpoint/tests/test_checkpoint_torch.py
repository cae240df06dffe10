"""Checkpointed gradients against PyTorch's (deselected unless ``-m needs_torch``)."""

import numpy as np
import pytest
import tapegrad as tg

pytestmark = pytest.mark.needs_torch


def _weights(n, width):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((width, width)) / np.sqrt(width), rng.uniform(-0.1, 0.1, width))
            for _ in range(n)], rng.standard_normal((5, width))


@pytest.mark.parametrize("segments", [1, 3, 6])
def test_checkpoint_sequential_gradients_match_torch(segments):
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint_sequential

    weights, x_np = _weights(12, 7)
    t_blocks = []
    for w, b in weights:
        lin = torch.nn.Linear(7, 7).double()
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            lin.bias.copy_(torch.from_numpy(b))
        t_blocks.append(torch.nn.Sequential(lin, torch.nn.Tanh()))
    t_model = torch.nn.Sequential(*t_blocks)
    t_x = torch.from_numpy(x_np).requires_grad_(True)
    (checkpoint_sequential(t_model, segments, t_x, use_reentrant=False) ** 2).sum().backward()

    g_blocks = []
    for w, b in weights:
        lin = tg.nn.Linear(7, 7)
        with tg.no_grad():
            lin.weight[...] = w
            lin.bias[...] = b
        g_blocks.append(tg.nn.Sequential(lin, tg.nn.Tanh()))
    g_x = tg.tensor(x_np, requires_grad=True)
    strategy = tg.checkpoint.Every(12 // segments) if segments > 1 else None
    (tg.checkpoint_sequential(g_blocks, g_x, strategy) ** 2).sum().backward()

    np.testing.assert_allclose(g_x.grad.numpy(), t_x.grad.numpy(), rtol=1e-10, atol=1e-12)
    for g_block, t_block in zip(g_blocks, t_blocks):
        np.testing.assert_allclose(g_block[0].weight.grad.numpy(),
                                   t_block[0].weight.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(g_block[0].bias.grad.numpy(),
                                   t_block[0].bias.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_second_derivatives_through_a_checkpoint_match_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint

    rng = np.random.default_rng(1)
    w_np, x_np = rng.standard_normal((4, 4)), rng.standard_normal((3, 4))

    t_w = torch.from_numpy(w_np).requires_grad_(True)
    t_x = torch.from_numpy(x_np).requires_grad_(True)
    t_y = checkpoint(lambda h: torch.tanh(h @ t_w) * h, t_x, use_reentrant=False)
    (t_gx,) = torch.autograd.grad(t_y.sum(), t_x, create_graph=True)
    (t_gx ** 2).sum().backward()

    g_w = tg.tensor(w_np, requires_grad=True)
    g_x = tg.tensor(x_np, requires_grad=True)
    g_y = tg.checkpoint(lambda h: tg.tanh(h @ g_w) * h, g_x)
    g_y.sum().backward(create_graph=True)
    g_gx = g_x.grad
    g_x.grad = g_w.grad = None
    (g_gx ** 2).sum().backward()

    np.testing.assert_allclose(g_x.grad.numpy(), t_x.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(g_w.grad.numpy(), t_w.grad.numpy(), rtol=1e-10)
