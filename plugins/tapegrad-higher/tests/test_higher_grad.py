"""tg.grad: torch.autograd.grad semantics."""

import numpy as np
import pytest
import tapegrad as tg


def test_grad_returns_a_tuple_and_leaves_dot_grad_alone():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    result = tg.grad(y, x)
    assert isinstance(result, tuple) and len(result) == 1
    assert result[0].tolist() == [2.0, 4.0]
    assert x.grad is None
    assert not result[0].requires_grad


def test_grad_of_several_outputs_sums_and_several_inputs_get_one_entry_each():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([3.0, -1.0], requires_grad=True)
    a, b = (x * w).sum(), (x * x).sum()
    gx, gw = tg.grad([a, b], [x, w])
    assert gx.tolist() == [3.0 + 2.0, -1.0 + 4.0]
    assert gw.tolist() == [1.0, 2.0]


def test_grad_outputs_seed_non_scalar_outputs():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (g,) = tg.grad(x * x, x, grad_outputs=tg.tensor([1.0, 0.0, 2.0]))
    assert g.tolist() == [2.0, 0.0, 12.0]
    (g,) = tg.grad([x * x], [x], grad_outputs=[np.ones(3)])
    assert g.tolist() == [2.0, 4.0, 6.0]


def test_grad_with_create_graph_is_differentiable_again():
    x = tg.tensor([0.5, -1.0], requires_grad=True)
    (g,) = tg.grad((x ** 3).sum(), x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    (h,) = tg.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * np.array([0.5, -1.0]))


def test_retain_graph_defaults_to_create_graph():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = tg.exp(x).sum()
    tg.grad(y, x)
    with pytest.raises(RuntimeError, match="second time"):
        tg.grad(y, x)
    y = tg.exp(x).sum()
    tg.grad(y, x, retain_graph=True)
    tg.grad(y, x)                                   # still there
    y = tg.exp(x).sum()
    tg.grad(y, x, create_graph=True)
    tg.grad(y, x)                                   # create_graph retained it


def test_unused_inputs_raise_unless_allowed():
    x = tg.tensor([1.0], requires_grad=True)
    z = tg.tensor([2.0, 3.0], requires_grad=True)
    y = (x * 2.0).sum()
    with pytest.raises(RuntimeError, match="input 1 .* was not used.*allow_unused=True"):
        tg.grad(y, (x, z), retain_graph=True)
    gx, gz = tg.grad(y, (x, z), retain_graph=True, allow_unused=True)
    assert gx.tolist() == [2.0] and gz is None
    gx, gz = tg.grad(y, (x, z), materialize_grads=True)
    assert gz.tolist() == [0.0, 0.0] and gz.dtype == z.dtype


def test_grad_with_respect_to_an_intermediate_tensor():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3.0
    y = (h * h).sum()
    (gh,) = tg.grad(y, h)
    assert gh.tolist() == [6.0, 12.0]


def test_grad_errors_name_the_problem():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="grad: output 0 .* does not require grad"):
        tg.grad(tg.tensor(1.0), x)
    with pytest.raises(TypeError, match="grad: output 0 must be a tensor"):
        tg.grad(1.0, x)
    with pytest.raises(RuntimeError, match="grad: input 0 .* does not require grad"):
        tg.grad((x * x).sum(), tg.tensor([1.0]))
    with pytest.raises(ValueError, match="2 grad_outputs for 1 outputs"):
        tg.grad((x * x).sum(), x, grad_outputs=(None, None))
    with pytest.raises(RuntimeError, match="implied only for a tensor with one element"):
        tg.grad(x * x, x)
    with pytest.raises(ValueError, match="outputs is empty"):
        tg.grad([], x)
