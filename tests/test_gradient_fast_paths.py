"""The engine's gradient fast paths (Note: [gradient fast paths] in _engine.pyx): add's and
subtract's pass-through gradients and multiply's saving of each input only for the other's
gradient. Checked against NumPy's closed forms, PyTorch and finite differences."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad._engine import eager_kernel

rng = np.random.default_rng(16)


def _t(a, grad=True):
    return tg.tensor(a, requires_grad=grad)


def test_declared_on_the_ops():
    assert tg.add.grad_passthrough == (True, True)
    assert tg.subtract.grad_passthrough == (True, False)
    assert tg.multiply.save_for_other and tg.multiply.grad_passthrough is None
    assert not tg.divide.save_for_other


def test_set_fast_paths_refuses_a_wrong_arity():
    with pytest.raises(ValueError, match="one flag per input"):
        tg.add._set_fast_paths(passthrough=(True,))
    with pytest.raises(ValueError, match="two inputs"):
        tg.sin._set_fast_paths(save_for_other=True)
    assert tg.add.grad_passthrough == (True, True)     # unchanged by the refusals


@pytest.mark.parametrize("xs, ys", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1))])
def test_add_subtract_broadcast_grads_match_numpy(xs, ys):
    x0, y0 = rng.standard_normal(xs), rng.standard_normal(ys)
    x, y = _t(x0), _t(y0)
    out = (x + y) * 1.5 + (x - y) * 0.5
    w = rng.standard_normal(out.shape)
    (out * tg.tensor(w)).sum().backward()
    gx = np.broadcast_to(2.0 * w, np.broadcast_shapes(xs, ys))
    gy = np.broadcast_to(1.0 * w, gx.shape)
    sum_to = lambda g, s: g.sum(axis=tuple(range(g.ndim - len(s)))).sum(
        axis=tuple(k for k, n in enumerate(s) if n == 1), keepdims=True)
    np.testing.assert_allclose(x.grad.numpy(), sum_to(gx, xs), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), sum_to(gy, ys), rtol=1e-12)


def test_subtract_of_a_constant_passes_g_and_of_a_tensor_negates():
    x, y = _t(rng.standard_normal(5)), _t(rng.standard_normal(5))
    ((x - 0.25) * 3.0 + (2.0 - y)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(5, 3.0))
    np.testing.assert_array_equal(y.grad.numpy(), np.full(5, -1.0))


def test_same_tensor_twice_through_add_and_multiply():
    x0 = rng.standard_normal(4)
    x = _t(x0)
    ((x + x) * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * x0, rtol=1e-14)


def test_multiply_by_a_number_saves_nothing_and_tolerates_inplace_as_torch():
    x0 = rng.standard_normal(6)
    base = _t(x0)
    x = base * 1.0                      # a non-leaf, modified in place below
    y = x * 2.0
    assert y.grad_fn.saved_arrays() == []
    x.add_(1.0)
    y.sum().backward()
    # PyTorch's mul saves the same way, so this runs there too and gives 2 (x's value,
    # changed in place, is not read by y's gradient)
    np.testing.assert_array_equal(base.grad.numpy(), np.full(6, 2.0))


def test_multiply_by_a_constant_tensor_saves_only_it():
    x0, c0 = rng.standard_normal(6), rng.standard_normal(6)
    x, c = _t(x0), tg.tensor(c0)
    y = x * c
    saved = y.grad_fn.saved_arrays()
    assert len(saved) == 1 and saved[0] is c._data
    c.mul_(2.0)                         # what x's gradient reads: refused, as PyTorch
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_multiply_where_only_y_needs_grad_saves_x():
    x0, y0 = rng.standard_normal(3), rng.standard_normal(3)
    x, y = tg.tensor(x0), _t(y0)
    z = x * y
    assert [a is x._data for a in z.grad_fn.saved_arrays()] == [True]
    z.sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), x0)


def test_multiply_both_need_grad_second_order_matches_the_closed_form():
    x0, y0 = rng.standard_normal(4), rng.standard_normal(4)
    x, y = _t(x0), _t(y0)
    z = ((x * y) * x + y * 3.0 - x).sum()          # z = x^2 y + 3 y - x
    gx, gy = tg.grad(z, (x, y), create_graph=True)
    hx, hy = tg.grad((gx * gy).sum(), (x, y))      # of (2xy - 1)(x^2 + 3)
    want_gx, want_gy = 2 * x0 * y0 - 1, x0 ** 2 + 3
    want_hx = 2 * y0 * (x0 ** 2 + 3) + (2 * x0 * y0 - 1) * 2 * x0
    want_hy = 2 * x0 * (x0 ** 2 + 3)
    for a, b in [(gx, want_gx), (gy, want_gy), (hx, want_hx), (hy, want_hy)]:
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-12)


def test_second_order_through_passthrough_by_finite_differences():
    x0 = rng.standard_normal(3)

    def f(a):
        return np.sum(np.sin(a + 0.3) * 2.0 - 0.1)

    x = _t(x0)
    (g,) = tg.grad(((tg.sin(x + 0.3) * 2.0) - 0.1).sum(), (x,), create_graph=True)
    (h,) = tg.grad(g.sum(), (x,))
    eps = 1e-5
    e = np.eye(3)
    fd_g = np.array([(f(x0 + eps * e[i]) - f(x0 - eps * e[i])) / (2 * eps) for i in range(3)])
    np.testing.assert_allclose(g.numpy(), fd_g, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(h.numpy(), -2.0 * np.sin(x0 + 0.3), rtol=1e-12)


def test_hooks_see_the_passed_through_gradient():
    x = _t(np.ones(3))
    y = x * 1.0
    seen = []
    y.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2.0)
    (y + 1.0).sum().backward()
    np.testing.assert_array_equal(seen[0], np.ones(3))
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 2.0))


def test_eager_kernel():
    assert eager_kernel(tg.tanh_backward, tg.ones(3))
    assert not eager_kernel(tg.tanh_backward, np.ones(3))


def test_op_calls_through_vectorcall_keep_every_calling_form():
    x0 = rng.standard_normal((3, 4))
    x = _t(x0)
    np.testing.assert_array_equal(tg.sum(x, 1).numpy(), x0.sum(1))          # parameter
    np.testing.assert_array_equal(tg.sum(x, axis=0).numpy(), x0.sum(0))     # keyword
    np.testing.assert_array_equal(tg.sum(x, dim=0, keepdim=True).numpy(),   # PyTorch's
                                  x0.sum(0, keepdims=True))
    np.testing.assert_array_equal(tg.concatenate([x, x]).numpy(), np.concatenate([x0, x0]))
    np.testing.assert_array_equal(tg.add(x, 1.0).numpy(), x0 + 1.0)
    with pytest.raises(TypeError, match="takes 1 tensor inputs, got 0"):
        tg.sin()
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        tg.sin(x, out=np.empty((3, 4)))
    tg.tanh(tg.sin(x)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x0) * (1 - np.tanh(np.sin(x0)) ** 2),
                               rtol=1e-14)
