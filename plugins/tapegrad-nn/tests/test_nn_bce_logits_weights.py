"""F.binary_cross_entropy_with_logits takes torch's weight= and pos_weight= (issue 15:
"weight= where torch has it"): against the textbook formula in NumPy, finite
differences, the module, and torch (needs_torch)."""

import numpy as np
import pytest
import tapegrad as tg

F = tg.nn.functional
RNG = np.random.default_rng(3)
X = RNG.standard_normal((5, 3)) * 3
T = RNG.uniform(0, 1, (5, 3))
W = RNG.uniform(0.5, 2, (5, 1))          # broadcast to the input
PW = np.array([0.5, 2.0, 4.0])            # one per class (last axis)


def _reference(x, t, weight, pos_weight, reduction):
    sig = 1 / (1 + np.exp(-x))
    pw = 1.0 if pos_weight is None else pos_weight
    loss = -(pw * t * np.log(sig) + (1 - t) * np.log(1 - sig))
    if weight is not None:
        loss = loss * weight
    return {"mean": loss.mean(), "sum": loss.sum(), "none": loss}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weight, pos_weight", [(W, None), (None, PW), (W, PW), (None, None)])
def test_matches_the_formula_and_finite_differences(weight, pos_weight, reduction):
    x, t = tg.tensor(X, requires_grad=True), tg.tensor(T, requires_grad=True)
    kw = dict(reduction=reduction,
              weight=None if weight is None else tg.tensor(weight),
              pos_weight=None if pos_weight is None else tg.tensor(pos_weight))
    out = F.binary_cross_entropy_with_logits(x, t, **kw)
    np.testing.assert_allclose(out.numpy(), _reference(X, T, weight, pos_weight, reduction),
                               rtol=1e-12)
    assert tg.gradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b, **kw), (x, t))
    assert tg.gradgradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b, **kw), (x, t))


@pytest.mark.parametrize("name", ["weight", "pos_weight"])
def test_weights_refuse_a_forward_mode_tangent(name):
    value = W if name == "weight" else PW
    with pytest.raises(TypeError, match=f"binary_cross_entropy_with_logits: {name} carries a "
                                        f"forward-mode tangent; it is a constant here"):
        tg.testing.check_jvp(lambda w: F.binary_cross_entropy_with_logits(
            tg.tensor(X), tg.tensor(T), **{name: w}), value, np.ones_like(value))


def test_the_module_is_the_function():
    loss = tg.nn.BCEWithLogitsLoss(weight=tg.tensor(W), pos_weight=tg.tensor(PW),
                                   reduction="sum")
    x, t = tg.tensor(X), tg.tensor(T)
    np.testing.assert_array_equal(
        loss(x, t).numpy(),
        F.binary_cross_entropy_with_logits(x, t, tg.tensor(W), reduction="sum",
                                           pos_weight=tg.tensor(PW)).numpy())


def test_float32_is_kept_and_bad_arguments_are_refused():
    x32 = tg.tensor(X.astype(np.float32))
    out = F.binary_cross_entropy_with_logits(x32, tg.tensor(T.astype(np.float32)),
                                             pos_weight=tg.tensor(PW))
    assert out.dtype == np.float32
    with pytest.raises(TypeError, match="size_average"):
        F.binary_cross_entropy_with_logits(x32, x32, size_average=True)
    with pytest.raises(TypeError, match="pos_weight requires grad"):
        F.binary_cross_entropy_with_logits(tg.tensor(X), tg.tensor(T),
                                           pos_weight=tg.tensor(PW, requires_grad=True))
    with pytest.raises(ValueError, match="target shape"):
        F.binary_cross_entropy_with_logits(tg.tensor(X), tg.tensor(T[0]), weight=tg.tensor(W))


@pytest.mark.needs_torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_matches_torch(reduction):
    import torch
    tx = torch.tensor(X, requires_grad=True)
    tt = torch.tensor(T)
    expected = torch.nn.functional.binary_cross_entropy_with_logits(
        tx, tt, torch.tensor(W), reduction=reduction, pos_weight=torch.tensor(PW))
    expected.sum().backward()
    x = tg.tensor(X, requires_grad=True)
    got = F.binary_cross_entropy_with_logits(x, tg.tensor(T), tg.tensor(W),
                                             reduction=reduction, pos_weight=tg.tensor(PW))
    got.sum().backward()
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


# F.mse_loss(weight=): torch's weighted form ('mean' divides by the sum of the weights)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_weight_matches_the_formula_and_finite_differences(reduction):
    weight = RNG.uniform(0.5, 2, X.shape)
    se = weight * (X - T) ** 2
    expected = {"mean": se.sum() / weight.sum(), "sum": se.sum(), "none": se}[reduction]
    x, w = tg.tensor(X, requires_grad=True), tg.tensor(weight, requires_grad=True)
    out = F.mse_loss(x, tg.tensor(T), reduction=reduction, weight=w)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)
    assert tg.gradcheck(lambda a, b: F.mse_loss(a, tg.tensor(T), reduction=reduction,
                                                weight=b), (x, w))
    with pytest.raises(ValueError, match="weight shape"):
        F.mse_loss(x, tg.tensor(T), weight=tg.tensor(weight[0]))


@pytest.mark.needs_torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_weight_matches_torch(reduction):
    import torch
    weight = RNG.uniform(0.5, 2, X.shape)
    tx = torch.tensor(X, requires_grad=True)
    expected = torch.nn.functional.mse_loss(tx, torch.tensor(T), reduction=reduction,
                                            weight=torch.tensor(weight))
    expected.sum().backward()
    x = tg.tensor(X, requires_grad=True)
    got = F.mse_loss(x, tg.tensor(T), reduction=reduction, weight=tg.tensor(weight))
    got.sum().backward()
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
