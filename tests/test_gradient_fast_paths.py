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


# -- session 10: backward ops called by the engine (vjp_op), multiply by a number ----------

# op -> (forward in NumPy, its gradient g -> x.grad as the NumPy expression the backward
# op's kernel promises to match bit for bit: Note: [bit-identical arithmetic])
_VJP_CLOSED_FORMS = {
    "sin": (np.sin, lambda g, x, y: np.multiply(g, np.cos(x))),
    "cos": (np.cos, lambda g, x, y: np.multiply(np.negative(g), np.sin(x))),
    "tanh": (np.tanh, lambda g, x, y: g * (1 - y * y)),
    "sigmoid": (None, lambda g, x, y: (g * y) * (1 - y)),
    "sqrt": (np.sqrt, lambda g, x, y: g / (2 * y)),
    "square": (np.square, lambda g, x, y: g * (2 * x)),
    "abs": (np.abs, lambda g, x, y: g * np.sign(x)),
    "relu": (None, lambda g, x, y: np.where(y > 0, g, 0).astype(g.dtype)),
}


def test_vjp_ops_declared_on_the_ops():
    for name, second in [("sin", "x"), ("cos", "x"), ("tanh", "ans"), ("sigmoid", "ans"),
                         ("sqrt", "ans"), ("square", "x"), ("abs", "x"), ("relu", "ans")]:
        op = getattr(tg, name)
        assert op.vjp_op is getattr(tg, name + "_backward"), name
        assert op.vjp_op_reads_ans == (second == "ans"), name
    assert tg.exp.vjp_op is None and not tg.exp.grad_times_number
    assert tg.multiply.grad_times_number and not tg.divide.grad_times_number


def test_set_fast_paths_refuses_wrong_vjp_op_declarations():
    with pytest.raises(ValueError, match="does not save its result"):
        tg.sin._set_fast_paths(vjp_op=tg.sin_backward, vjp_reads="ans")
    with pytest.raises(ValueError, match="does not save its input"):
        tg.tanh._set_fast_paths(vjp_op=tg.tanh_backward, vjp_reads="x")
    with pytest.raises(ValueError, match="must be 'ans' or 'x'"):
        tg.sin._set_fast_paths(vjp_op=tg.sin_backward, vjp_reads="g")
    with pytest.raises(ValueError, match="one tensor input"):
        tg.multiply._set_fast_paths(vjp_op=tg.sin_backward, vjp_reads="x")
    with pytest.raises(TypeError, match="must be a tapegrad op"):
        tg.sin._set_fast_paths(vjp_op=np.cos, vjp_reads="x")
    with pytest.raises(ValueError, match="two inputs"):
        tg.sin._set_fast_paths(grad_times_number=True)
    # unchanged by the refusals
    assert tg.sin.vjp_op is tg.sin_backward and tg.multiply.grad_times_number


def _positive_or_normal(name, shape, dtype):
    a = rng.standard_normal(shape)
    if name == "sqrt":
        a = np.abs(a) + 0.1
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(_VJP_CLOSED_FORMS))
def test_vjp_op_gradients_bit_identical_to_numpy(name, dtype):
    x0 = _positive_or_normal(name, (3, 5), dtype)
    w0 = rng.standard_normal((3, 5)).astype(dtype)
    x = _t(x0)
    y = getattr(tg, name)(x)
    (y * tg.tensor(w0)).sum().backward()         # g into y is w0 itself (1 * w0)
    forward, closed_form = _VJP_CLOSED_FORMS[name]
    y0 = y.numpy() if forward is None else forward(x0)
    np.testing.assert_array_equal(y.numpy(), y0)
    want = closed_form(w0, x0, y0)
    assert x.grad.dtype == want.dtype
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_vjp_op_chain_matches_the_hand_written_backward_bit_for_bit():
    # W1's chain (ci/profile), with the backward written out in NumPy
    x0, a, b = rng.standard_normal(16), 1.002, 0.01
    leaf = _t(x0)
    x = leaf
    for _ in range(20):
        x = tg.tanh(tg.sin(x) * a + b) - b
    x.sum().backward()
    x, tape = x0, []
    for _ in range(20):
        x_in = x
        y = np.tanh(np.sin(x) * a + b)
        tape.append((x_in, y))
        x = y - b
    g = np.ones_like(x)
    for x_in, y in reversed(tape):
        g = g * (1.0 - y * y)
        g = g * a
        g = g * np.cos(x_in)
    np.testing.assert_array_equal(leaf.grad.numpy(), g)


def test_vjp_op_second_order_records_through_the_rule():
    # create_graph: the backward op must be recorded, so the engine leaves it to the rule
    x0 = rng.standard_normal(4)
    x = _t(x0)
    (g,) = tg.grad(tg.sin(x).sum() + tg.tanh(x).sum(), (x,), create_graph=True)
    (h,) = tg.grad(g.sum(), (x,))
    t = np.tanh(x0)
    np.testing.assert_allclose(g.numpy(), np.cos(x0) + 1 - t * t, rtol=1e-14)
    np.testing.assert_allclose(h.numpy(), -np.sin(x0) - 2 * t * (1 - t * t), rtol=1e-12)


def test_vjp_op_complex_input_takes_the_holomorphic_rule():
    z0 = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    z = _t(z0)
    w0 = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    y = tg.sin(z)
    y.backward(tg.tensor(w0))
    np.testing.assert_allclose(z.grad.numpy(), w0 * np.conj(np.cos(z0)), rtol=1e-14)


@pytest.mark.parametrize("name", ["sin", "tanh"])
def test_vjp_op_refuses_a_saved_value_modified_in_place(name):
    base = _t(rng.standard_normal(5))
    x = base * 1.0
    y = getattr(tg, name)(x)
    (x if name == "sin" else y).add_(1.0)       # what sin's / tanh's gradient reads
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_vjp_op_on_strided_views_matches_numpy():
    # a transposed view: the saved x and ans are not C-contiguous (the kernels' NumPy path)
    x0 = rng.standard_normal((4, 3))
    w0 = rng.standard_normal((3, 4))
    x = _t(x0)
    (tg.sin(x.T) * tg.tensor(w0) + tg.tanh(x.T) * tg.tensor(w0)).sum().backward()
    t = np.tanh(x0.T)
    want = np.multiply(w0, np.cos(x0.T)) + w0 * (1 - t * t)
    np.testing.assert_array_equal(x.grad.numpy(), want.T)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("c", [2.5, 0.1, 3, -1])
def test_multiply_by_a_number_gradient_is_g_times_the_number(c, dtype):
    x0 = rng.standard_normal(7).astype(dtype)
    w0 = rng.standard_normal(7).astype(dtype)
    x, u = _t(x0), _t(x0.copy())
    (x * c * tg.tensor(w0)).sum().backward()
    ((c * u) * tg.tensor(w0)).sum().backward()
    want = w0 * c                               # NumPy 2: the number takes w0's dtype
    assert x.grad.dtype == want.dtype
    np.testing.assert_array_equal(x.grad.numpy(), want)
    np.testing.assert_array_equal(u.grad.numpy(), want)


def test_multiply_by_a_number_second_order_and_complex():
    x0 = rng.standard_normal(3)
    x = _t(x0)
    (g,) = tg.grad((tg.sin(x) * 2.0).sum(), (x,), create_graph=True)
    (h,) = tg.grad((g * 3.0).sum(), (x,))
    np.testing.assert_allclose(g.numpy(), 2.0 * np.cos(x0), rtol=1e-14)
    np.testing.assert_allclose(h.numpy(), -6.0 * np.sin(x0), rtol=1e-14)
    z0 = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    w0 = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    z = _t(z0)
    (z * 2.0).backward(tg.tensor(w0))
    np.testing.assert_allclose(z.grad.numpy(), w0 * 2.0, rtol=1e-15)
