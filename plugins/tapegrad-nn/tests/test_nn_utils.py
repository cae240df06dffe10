"""tg.nn.utils: gradient clipping and parameters <-> vector, against NumPy."""

import math

import numpy as np
import pytest
import tapegrad as tg

utils = tg.nn.utils


def _with_grads(*grads, dtype=np.float64):
    params = []
    for g in grads:
        p = tg.nn.Parameter(tg.zeros(np.shape(g), dtype=dtype))
        p.grad = tg.tensor(np.asarray(g, dtype=dtype))
        params.append(p)
    return params


G1, G2 = np.array([[3.0, -4.0], [1.0, 2.0]]), np.array([0.5, -7.0, 2.0])


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_returns_total_and_scales_to_max_norm(norm_type):
    params = _with_grads(G1, G2)
    flat = np.concatenate([G1.ravel(), G2])
    want = np.max(np.abs(flat)) if math.isinf(norm_type) else np.sum(np.abs(flat) ** norm_type) ** (1 / norm_type)
    total = utils.clip_grad_norm_(params, max_norm=1.5, norm_type=norm_type)
    assert isinstance(total, tg.Tensor) and total.shape == ()
    np.testing.assert_allclose(float(total), want, rtol=1e-12)
    coef = 1.5 / (want + 1e-6)
    np.testing.assert_allclose(params[0].grad.numpy(), G1 * coef, rtol=1e-12)
    np.testing.assert_allclose(params[1].grad.numpy(), G2 * coef, rtol=1e-12)


def test_clip_grad_norm_leaves_small_gradients_and_skips_missing_ones():
    params = _with_grads(G1) + [tg.nn.Parameter(tg.zeros(3))]
    total = utils.clip_grad_norm_(params, 100.0)
    np.testing.assert_allclose(float(total), np.linalg.norm(G1), rtol=1e-12)
    np.testing.assert_array_equal(params[0].grad.numpy(), G1)
    assert params[1].grad is None
    assert float(utils.clip_grad_norm_([tg.nn.Parameter(tg.zeros(2))], 1.0)) == 0.0


def test_clip_grad_norm_keeps_float32_and_takes_a_single_tensor():
    (p,) = _with_grads(G2, dtype=np.float32)
    total = utils.clip_grad_norm_(p, 1.0)
    assert total.dtype == np.float32 and p.grad.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(p.grad.numpy()), 1.0, rtol=1e-5)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf * 0, as torch
def test_clip_grad_norm_nonfinite_and_bad_arguments():
    params = _with_grads(np.array([1.0, np.inf]))
    with pytest.raises(RuntimeError, match="non-finite"):
        utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    assert math.isinf(float(utils.clip_grad_norm_(params, 1.0)))
    with pytest.raises(ValueError, match="norm_type"):
        utils.clip_grad_norm_(_with_grads(G1), 1.0, norm_type=0)
    with pytest.raises(TypeError, match="parameters must be"):
        utils.clip_grad_norm_(3.0, 1.0)


def test_clip_grad_norm_after_a_backward():
    lin = tg.nn.Linear(4, 3)
    lin(tg.random.randn(8, 4)).sum().backward()
    grads = np.concatenate([p.grad.numpy().ravel() for p in lin.parameters()])
    total = utils.clip_grad_norm_(lin.parameters(), 0.1)
    np.testing.assert_allclose(float(total), np.linalg.norm(grads), rtol=1e-12)
    after = np.concatenate([p.grad.numpy().ravel() for p in lin.parameters()])
    np.testing.assert_allclose(np.linalg.norm(after), 0.1, rtol=1e-4)


def test_clip_grad_value_clips_in_place():
    params = _with_grads(G1, G2)
    assert utils.clip_grad_value_(params, 2.0) is None
    np.testing.assert_array_equal(params[0].grad.numpy(), np.clip(G1, -2, 2))
    np.testing.assert_array_equal(params[1].grad.numpy(), np.clip(G2, -2, 2))


def test_parameters_to_vector_and_back_round_trip_in_place():
    lin = tg.nn.Linear(3, 2)
    params = list(lin.parameters())
    vec = utils.parameters_to_vector(params)
    np.testing.assert_array_equal(vec.numpy(), np.concatenate([p.numpy().ravel() for p in params]))
    new = tg.arange(8.0)
    utils.vector_to_parameters(new, lin.parameters())
    assert lin.weight is params[0] and lin.weight.is_leaf
    np.testing.assert_array_equal(lin.weight.numpy(), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(lin.bias.numpy(), [6.0, 7.0])


def test_parameters_to_vector_is_differentiable():
    a, b = tg.ones((2, 2), requires_grad=True), tg.ones(3, requires_grad=True)
    (utils.parameters_to_vector([a, b]) * tg.arange(7.0)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[0, 1], [2, 3]])
    np.testing.assert_array_equal(b.grad.numpy(), [4, 5, 6])


def test_vector_to_parameters_errors():
    with pytest.raises(TypeError, match="expected vec to be a Tensor"):
        utils.vector_to_parameters(np.zeros(3), [tg.zeros(3)])
    with pytest.raises(ValueError, match="5 elements but the parameters have 3"):
        utils.vector_to_parameters(tg.zeros(5), [tg.zeros(3)])


@pytest.mark.needs_torch
def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    for norm_type in (2.0, 1.0, 3.5, math.inf):
        params = _with_grads(G1, G2)
        tp = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in (G1, G2)]
        for t, g in zip(tp, (G1, G2)):
            t.grad = torch.tensor(g)
        want = torch.nn.utils.clip_grad_norm_(tp, 2.0, norm_type=norm_type)
        got = utils.clip_grad_norm_(params, 2.0, norm_type=norm_type)
        np.testing.assert_allclose(float(got), float(want), rtol=1e-12)
        for p, t in zip(params, tp):
            np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-12)
