"""Per-example gradients (issue 17): tg.vmap(tg.func.grad(loss)) over a tg.nn model with
tg.func.functional_call equals one backward pass per example, and
examples/per_sample_grads.py (DP-SGD-style clipping) trains."""

import runpy
import warnings
from pathlib import Path

import numpy as np
import pytest
import tapegrad as tg

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RNG = np.random.default_rng(64)


def _mlp():
    tg.random.manual_seed(0)
    return tg.nn.Sequential(tg.nn.Linear(8, 16), tg.nn.Tanh(), tg.nn.Linear(16, 16),
                            tg.nn.ReLU(), tg.nn.Linear(16, 5)).double()


def _per_example(model, x, y):
    params = {n: p.detach() for n, p in model.named_parameters()}

    def loss(params, xi, yi):
        return tg.nn.functional.cross_entropy(tg.func.functional_call(model, params, (xi,)), yi)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # ops without a batching rule loop
        return tg.vmap(tg.func.grad(loss), in_axes=(None, 0, 0))(params, x, y)


def test_per_sample_gradients_of_an_mlp_equal_64_single_example_backward_passes():
    model = _mlp()
    x = tg.tensor(RNG.standard_normal((64, 8)))
    y = tg.tensor(RNG.integers(0, 5, 64))
    grads = _per_example(model, x, y)
    for i in range(64):
        model.zero_grad()
        tg.nn.functional.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
        for name, p in model.named_parameters():
            np.testing.assert_allclose(grads[name].numpy()[i], p.grad.numpy(), rtol=1e-10,
                                       atol=1e-13, err_msg=f"example {i}, {name}")
    # their mean is the batch gradient
    model.zero_grad()
    tg.nn.functional.cross_entropy(model(x), y).backward()
    for name, p in model.named_parameters():
        np.testing.assert_allclose(grads[name].numpy().mean(axis=0), p.grad.numpy(),
                                   rtol=1e-10, atol=1e-13)


def test_functional_call_restores_the_parameters_and_checks_names():
    model = _mlp()
    before = {n: p for n, p in model.named_parameters()}
    zeros = {n: tg.zeros_like(p) for n, p in before.items()}
    out = tg.func.functional_call(model, zeros, (tg.ones((2, 8)),))
    np.testing.assert_array_equal(out.numpy(), np.zeros((2, 5)))
    assert all(p is before[n] for n, p in model.named_parameters())
    with pytest.raises(KeyError, match="no parameter or buffer '0.wieght'"):
        tg.func.functional_call(model, {"0.wieght": tg.zeros((16, 8))}, (tg.ones((2, 8)),))
    with pytest.raises(RuntimeError, match="missing"):
        tg.func.functional_call(model, {"0.weight": zeros["0.weight"]}, (tg.ones((2, 8)),),
                                strict=True)
    assert all(p is before[n] for n, p in model.named_parameters())


def test_the_dp_sgd_example_trains():
    example = runpy.run_path(str(EXAMPLES / "per_sample_grads.py"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        accuracy = example["main"](steps=100, log=False)
    assert accuracy >= 0.85          # 10 classes: chance is 0.1 (seed 0 gives 0.89)


@pytest.mark.needs_torch
def test_per_sample_gradients_equal_torch_func():
    import torch
    from torch.func import functional_call, grad, vmap

    model = _mlp()
    x_np, y_np = RNG.standard_normal((64, 8)), RNG.integers(0, 5, 64)
    grads = _per_example(model, tg.tensor(x_np), tg.tensor(y_np))
    tm = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16),
                             torch.nn.ReLU(), torch.nn.Linear(16, 5)).double()
    tm.load_state_dict({n: torch.tensor(p.numpy()) for n, p in model.named_parameters()})
    params = {n: p.detach() for n, p in tm.named_parameters()}

    def loss(params, xi, yi):
        out = functional_call(tm, params, (xi[None],))
        return torch.nn.functional.cross_entropy(out, yi[None])

    want = vmap(grad(loss), in_dims=(None, 0, 0))(params, torch.tensor(x_np), torch.tensor(y_np))
    for name in want:
        np.testing.assert_allclose(grads[name].numpy(), want[name].numpy(), rtol=1e-10,
                                   atol=1e-13)
