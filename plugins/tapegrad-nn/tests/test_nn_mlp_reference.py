"""An MLP built from tg.nn against an independent NumPy implementation with a hand-written
backward pass: forward values, the cross-entropy loss and every parameter gradient, before
and after one SGD step, to 1e-10 in float64."""

import numpy as np
import pytest
import tapegrad as tg

nn = tg.nn
SIZES = (64, 32, 16, 10)
BATCH = 12
LR = 0.1


# ---------------------------------------------------------------------------------------
# The NumPy reference (weights (out, in) as in tg.nn.Linear)
# ---------------------------------------------------------------------------------------

def np_forward(params, x, activations):
    """Logits and what the backward pass needs: (input, pre-activation) per layer."""
    cache = []
    h = x
    for i, act in enumerate(activations):
        w, b = params[2 * i], params[2 * i + 1]
        z = h @ w.T + b
        cache.append((h, z))
        if act == "tanh":
            h = np.tanh(z)
        elif act == "relu":
            h = np.maximum(z, 0.0)
        else:
            h = z
    return h, cache


def np_cross_entropy(logits, labels, reduction):
    """Loss and d loss / d logits, by hand."""
    m = logits.max(axis=1, keepdims=True)
    log_p = logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))
    rows = np.arange(len(labels))
    per_sample = -log_p[rows, labels]
    grad = np.exp(log_p)
    grad[rows, labels] -= 1.0
    if reduction == "mean":
        return per_sample.mean(), grad / len(labels)
    return per_sample.sum(), grad


def np_backward(params, cache, activations, g):
    """Gradients of every parameter, in (w0, b0, w1, b1, ...) order, from d loss/d logits."""
    grads = [None] * len(params)
    for i in reversed(range(len(activations))):
        h, z = cache[i]
        act = activations[i]
        if act == "tanh":
            g = g * (1.0 - np.tanh(z) ** 2)
        elif act == "relu":
            g = g * (z > 0)
        w = params[2 * i]
        grads[2 * i] = g.T @ h
        grads[2 * i + 1] = g.sum(axis=0)
        g = g @ w
    return grads


# ---------------------------------------------------------------------------------------
# The same network in tg.nn
# ---------------------------------------------------------------------------------------

ACTIVATION_MODULES = {"tanh": nn.Tanh, "relu": nn.ReLU}


def build(activations, seed=0, dtype=np.float64):
    tg.manual_seed(seed)
    layers = []
    for i, act in enumerate(activations):
        layers.append(nn.Linear(SIZES[i], SIZES[i + 1], dtype=dtype))
        if act is not None:
            layers.append(ACTIVATION_MODULES[act]())
    return nn.Sequential(*layers)


def data(seed=1, dtype=np.float64):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(dtype)
    labels = rng.integers(0, SIZES[-1], BATCH)
    labels[:SIZES[-1]] = np.arange(SIZES[-1])          # every class appears
    return x, labels


def assert_close(actual, expected, what, tol=1e-10):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=tol, atol=tol * 1e-2,
                               err_msg=what)


CASES = [(("tanh", "relu", None), "mean"), (("relu", "tanh", None), "sum"),
         (("tanh", "tanh", None), "mean")]


@pytest.mark.parametrize("activations, reduction", CASES, ids=["tanh-relu-mean",
                                                               "relu-tanh-sum", "tanh-tanh-mean"])
def test_forward_loss_and_every_gradient_match_numpy_before_and_after_one_step(activations, reduction):
    model = build(activations)
    named = list(model.named_parameters())
    linear_positions = [i for i, m in enumerate(model) if isinstance(m, nn.Linear)]
    assert [n for n, _ in named] == [f"{i}.{k}" for i in linear_positions for k in ("weight", "bias")]
    params = [p.numpy().copy() for _, p in named]
    x, labels = data()

    for step in range(2):
        logits_ref, cache = np_forward(params, x, activations)
        loss_ref, g = np_cross_entropy(logits_ref, labels, reduction)
        grads_ref = np_backward(params, cache, activations, g)

        model.zero_grad()
        logits = model(tg.tensor(x))
        assert_close(logits, logits_ref, f"logits at step {step}")
        loss = tg.cross_entropy(logits, labels, reduction=reduction)
        assert_close(loss.item(), loss_ref, f"loss at step {step}")
        loss.backward()
        for (name, p), g_ref in zip(named, grads_ref):
            assert p.grad is not None, name
            assert p.grad.shape == p.shape and p.grad.dtype == np.float64
            assert_close(p.grad, g_ref, f"gradient of {name} at step {step}")

        # One plain SGD step, in both implementations.
        with tg.no_grad():
            for _, p in named:
                p -= LR * p.grad
        params = [w - LR * gw for w, gw in zip(params, grads_ref)]
        for (name, p), ref in zip(named, params):
            assert_close(p, ref, f"{name} after step {step}")


def test_the_loss_decreases_over_training_steps():
    model = build(("tanh", "relu", None), seed=3)
    x, labels = data(seed=4)
    losses = []
    for _ in range(30):
        model.zero_grad()
        loss = tg.cross_entropy(model(tg.tensor(x)), labels)
        loss.backward()
        with tg.no_grad():
            for p in model.parameters():
                p -= 0.2 * p.grad
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_probability_targets_and_eval_mode_dropout_match_numpy():
    model = build(("tanh", "relu", None))
    model = nn.Sequential(*list(model)[:2], nn.Dropout(0.5), *list(model)[2:]).eval()
    named = list(model.named_parameters())
    params = [p.numpy().copy() for _, p in named]
    x, _ = data()
    rng = np.random.default_rng(7)
    targets = rng.dirichlet(np.ones(SIZES[-1]), BATCH)

    logits_ref, cache = np_forward(params, x, ("tanh", "relu", None))
    m = logits_ref.max(axis=1, keepdims=True)
    log_p = logits_ref - m - np.log(np.exp(logits_ref - m).sum(axis=1, keepdims=True))
    loss_ref = -(targets * log_p).sum(axis=1).mean()
    g = (np.exp(log_p) - targets) / BATCH
    grads_ref = np_backward(params, cache, ("tanh", "relu", None), g)

    loss = tg.cross_entropy(model(tg.tensor(x)), tg.tensor(targets))
    assert_close(loss.item(), loss_ref, "loss")
    loss.backward()
    for (name, p), g_ref in zip(named, grads_ref):
        assert_close(p.grad, g_ref, f"gradient of {name}")


def test_float32_network_matches_numpy_to_float32_precision():
    activations = ("tanh", "relu", None)
    model = build(activations, dtype=np.float32)
    named = list(model.named_parameters())
    assert all(p.dtype == np.float32 for _, p in named)
    params = [p.numpy().astype(np.float64) for _, p in named]
    x, labels = data(dtype=np.float32)
    logits_ref, cache = np_forward(params, x.astype(np.float64), activations)
    loss_ref, g = np_cross_entropy(logits_ref, labels, "mean")
    grads_ref = np_backward(params, cache, activations, g)
    logits = model(tg.tensor(x))
    loss = tg.cross_entropy(logits, labels)
    assert logits.dtype == loss.dtype == np.float32
    loss.backward()
    assert_close(loss.item(), loss_ref, "loss", tol=1e-5)
    for (name, p), g_ref in zip(named, grads_ref):
        assert p.grad.dtype == np.float32
        np.testing.assert_allclose(p.grad.numpy(), g_ref, rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.needs_torch
def test_state_dict_loads_into_pytorch_and_gives_the_same_loss_and_gradients():
    torch = pytest.importorskip("torch")
    model = build(("tanh", "relu", None))
    ref = torch.nn.Sequential(
        torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 16), torch.nn.ReLU(),
        torch.nn.Linear(16, 10)).double()
    ref.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in model.state_dict().items()})
    x, labels = data()
    loss = tg.cross_entropy(model(tg.tensor(x)), labels)
    loss.backward()
    ref_loss = torch.nn.functional.cross_entropy(ref(torch.from_numpy(x)), torch.from_numpy(labels))
    ref_loss.backward()
    assert_close(loss.item(), ref_loss.item(), "loss")
    for (name, p), (ref_name, q) in zip(model.named_parameters(), ref.named_parameters()):
        assert name == ref_name
        assert_close(p.grad, q.grad.numpy(), f"gradient of {name}")
