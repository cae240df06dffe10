"""Session 12's eager shortcuts: matmul's plain 2-D backward computed by the engine
(Op._set_fast_paths(matmul_2d=True); Note: [gradient fast paths] in _engine.pyx) and
tg.no_grad()'s with-block in C (_engine._GradSwitchCore).

Gradients are checked against NumPy's closed forms (g @ y.T, x.T @ g), bit for bit where
the shortcut promises the same NumPy call, and against finite differences where the rule
runs instead. Whether matmul's Python rule ran is observed through the module global it
calls first on its 2-D path (tapegrad_linalg.ops._plain_gradient): the shortcut must not
call it, and every case where the shortcut must not run must call it.
"""
import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad_linalg.ops as linalg_ops
from tapegrad._engine import _GradSwitchCore

rng = np.random.default_rng(1212)


@pytest.fixture
def rule_calls(monkeypatch):
    """A list that gets one entry per run of matmul's Python rule on a 2-D pair."""
    calls = []
    original = linalg_ops._plain_gradient

    def counting(g):
        calls.append(g.shape)
        return original(g)

    monkeypatch.setattr(linalg_ops, "_plain_gradient", counting)
    return calls


def _pair(dtype=np.float64, n=3, k=4, m=5):
    return (rng.standard_normal((n, k)).astype(dtype), rng.standard_normal((k, m)).astype(dtype),
            rng.standard_normal((n, m)).astype(dtype))


def test_matmul_declares_the_2d_shortcut():
    assert tg.matmul.vjp_matmul_2d
    assert not tg.multiply.vjp_matmul_2d


def test_set_fast_paths_refuses_matmul_2d_on_a_one_input_op():
    with pytest.raises(ValueError, match="matmul_2d needs an op of two saved tensor inputs"):
        tg.sin._set_fast_paths(matmul_2d=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_plain_2d_backward_skips_the_rule_and_gives_numpys_bits(rule_calls, dtype):
    x0, w0, g0 = _pair(dtype)
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    (x @ w).backward(tg.tensor(g0))
    assert rule_calls == []
    assert x.grad.dtype == dtype and w.grad.dtype == dtype
    np.testing.assert_array_equal(x.grad.numpy(), np.matmul(g0, w0.T))
    np.testing.assert_array_equal(w.grad.numpy(), np.matmul(x0.T, g0))


def test_only_the_input_that_requires_grad_gets_one(rule_calls):
    x0, w0, g0 = _pair()
    x, w = tg.tensor(x0), tg.tensor(w0, requires_grad=True)
    (x @ w).backward(tg.tensor(g0))
    assert rule_calls == [] and x.grad is None
    np.testing.assert_array_equal(w.grad.numpy(), np.matmul(x0.T, g0))
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0)
    (x @ w).backward(tg.tensor(g0))
    assert rule_calls == [] and w.grad is None
    np.testing.assert_array_equal(x.grad.numpy(), np.matmul(g0, w0.T))


def test_a_leaf_that_stopped_requiring_grad_is_asked_as_the_rule_asks(rule_calls):
    # tg.needs_grad(x) in the rule reads the leaf itself: the shortcut must read the same
    x0, w0, g0 = _pair()
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    h = tg.tensor(np.ones_like(x0), requires_grad=True)
    y = (x * h) @ w                      # x * h keeps the graph alive when x stops
    w.requires_grad_(False)
    y.backward(tg.tensor(g0))
    assert rule_calls == []
    assert w.grad is None
    np.testing.assert_array_equal(x.grad.numpy(), np.matmul(g0, w0.T))


def test_non_contiguous_operands_give_the_rules_bits(rule_calls):
    # NOTE: the rule's own plain branch makes the same np.matmul calls on strided arrays,
    # so the shortcut takes them too; the result must still be NumPy's.
    xt0 = rng.standard_normal((4, 3))
    w0 = rng.standard_normal((8, 5))[::2]
    g0 = rng.standard_normal((3, 5))
    xt, w = tg.tensor(xt0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    y = tg.transpose(xt) @ w[::1]
    y.backward(tg.tensor(g0))
    np.testing.assert_array_equal(xt.grad.numpy(), np.matmul(g0, w0.T).T)
    np.testing.assert_array_equal(w.grad.numpy(), np.matmul(xt0.T.T, g0))


def test_create_graph_runs_the_rule_and_second_order_is_right(rule_calls):
    x0, w0, _ = _pair()
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    loss = ((x @ w) ** 2).sum()
    gx, gw = tg.grad(loss, (x, w), create_graph=True)
    assert rule_calls, "create_graph must record the rule's ops: the shortcut must not run"
    np.testing.assert_allclose(gx.numpy(), 2 * (x0 @ w0) @ w0.T, rtol=1e-13)
    # d/dw of sum(gx) = d/dw sum(2 (x w) w^T), checked by central finite differences
    (hw,) = tg.grad(gx.sum(), (w,))

    def f(w_arr):
        return np.sum(2 * (x0 @ w_arr) @ w_arr.T)

    eps, fd = 1e-6, np.empty_like(w0)
    for idx in np.ndindex(w0.shape):
        d = np.zeros_like(w0)
        d[idx] = eps
        fd[idx] = (f(w0 + d) - f(w0 - d)) / (2 * eps)
    np.testing.assert_allclose(hw.numpy(), fd, rtol=1e-6, atol=1e-8)


def test_grad_mode_on_during_the_backward_runs_the_rule(rule_calls):
    # a hook that turns grad mode on is no business of the shortcut's, but create_graph is
    # the only way grad mode is on while rules run; checked above. Here: enable_grad
    # around a plain backward does not turn create_graph on (rules run with it off).
    x0, w0, g0 = _pair()
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    with tg.enable_grad():
        (x @ w).backward(tg.tensor(g0))
    assert rule_calls == []
    np.testing.assert_array_equal(x.grad.numpy(), np.matmul(g0, w0.T))


def test_hooks_still_run_and_their_gradient_is_the_one_used(rule_calls):
    x0, w0, g0 = _pair()
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    seen = []
    y = x @ w
    y.register_hook(lambda g: g * 2.0)
    w.register_hook(lambda g: seen.append(g.numpy().copy()))
    y.retain_grad()
    y.backward(tg.tensor(g0))
    np.testing.assert_array_equal(x.grad.numpy(), np.matmul(g0 * 2.0, w0.T))
    np.testing.assert_array_equal(w.grad.numpy(), np.matmul(x0.T, g0 * 2.0))
    np.testing.assert_array_equal(seen[0], np.matmul(x0.T, g0 * 2.0))
    np.testing.assert_array_equal(y.grad.numpy(), g0 * 2.0)


def test_forward_over_reverse_runs_the_rule(rule_calls):
    # a tangent on the operands: the rule must run (it carries the tangents along)
    x0, w0, _ = _pair()
    w = tg.tensor(w0, requires_grad=True)
    t0 = rng.standard_normal(x0.shape)

    def grad_of(x):
        (gw,) = tg.grad((tg.sin(x @ w)).sum(), (w,), create_graph=True)
        return gw

    _, jv = tg.jvp(grad_of, (tg.tensor(x0),), (tg.tensor(t0),))
    assert rule_calls
    # gw = x^T cos(x w); its derivative along x -> x + s t:
    # t^T cos(x w) - x^T (sin(x w) * (t w))
    z = x0 @ w0
    np.testing.assert_allclose(jv.numpy(), t0.T @ np.cos(z) - x0.T @ (np.sin(z) * (t0 @ w0)),
                               rtol=1e-12)


def test_compile_recording_runs_the_rule_and_replays_equal_eager(rule_calls):
    x0, w0, g0 = _pair()
    w = tg.tensor(w0, requires_grad=True)
    x = tg.tensor(x0)

    def step(x):
        w.grad = None
        (x @ w).backward(tg.tensor(g0))
        return w.grad * 1.0

    eager = step(x).numpy()
    assert rule_calls == []
    compiled = tg.compile(step)
    first = compiled(x).numpy()
    assert rule_calls, "tg.compile's recording must see the rule's ops"
    again = compiled(x).numpy()
    np.testing.assert_array_equal(first, eager)
    np.testing.assert_array_equal(again, eager)


@pytest.mark.parametrize("kind", ["float16", "complex128", "mixed"])
def test_other_dtypes_run_the_rule(rule_calls, kind):
    x0, w0, g0 = _pair()
    if kind == "float16":
        x0, w0, g0 = x0.astype(np.float16), w0.astype(np.float16), g0.astype(np.float16)
    elif kind == "complex128":
        x0 = x0 + 1j * rng.standard_normal(x0.shape)
        w0 = w0 + 1j * rng.standard_normal(w0.shape)
        g0 = g0 + 1j * rng.standard_normal(g0.shape)
    else:
        w0 = w0.astype(np.float32)
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    y = x @ w
    y.backward(tg.tensor(g0.astype(y.dtype)))
    assert rule_calls
    gy = g0.astype(y.dtype)
    np.testing.assert_allclose(x.grad.numpy(), gy @ np.conj(w0).T.astype(y.dtype),
                               rtol=1e-2 if kind == "float16" else 1e-6)
    np.testing.assert_allclose(w.grad.numpy(), np.conj(x0).T.astype(y.dtype) @ gy,
                               rtol=1e-2 if kind == "float16" else 1e-6)


def test_batched_and_1d_operands_run_the_rule():
    x0 = rng.standard_normal((2, 3, 4))
    w0 = rng.standard_normal(4)
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    g0 = rng.standard_normal((2, 3))
    (x @ w).backward(tg.tensor(g0))
    np.testing.assert_allclose(x.grad.numpy(), g0[..., None] * w0, rtol=1e-14)
    np.testing.assert_allclose(w.grad.numpy(), np.einsum("ab,abk->k", g0, x0), rtol=1e-13)


def test_a_saved_operand_modified_in_place_still_raises(rule_calls):
    x0, w0, g0 = _pair()
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    h = x * 1.0
    y = h @ w
    h.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward(tg.tensor(g0))


def test_anomaly_mode_still_names_the_op():
    x0, w0, _ = _pair()
    w0[0, 0] = np.inf
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    with tg.detect_anomaly():
        y = x @ w
        with pytest.raises(RuntimeError, match="matmul"):
            y.backward(tg.tensor(np.ones((3, 5))))


def test_an_ndarray_subclass_runs_the_rule(rule_calls):
    # a device whose arrays are an ndarray subclass is not plain: the shortcut's type test
    # is `type(a) is np.ndarray`; through the public API tensors hold base-class arrays, so
    # this checks that a subclass put into a tensor (as a device would) takes the rule.
    class Sub(np.ndarray):
        pass

    from tapegrad._engine import new_tensor
    x0, w0, g0 = _pair()
    x = new_tensor(x0.view(Sub), tg.tensor(x0).device)
    x.requires_grad_(True)
    w = tg.tensor(w0, requires_grad=True)
    y = x @ w
    y.backward(tg.tensor(g0))
    assert rule_calls
    np.testing.assert_array_equal(np.asarray(w.grad.numpy()), np.matmul(x0.T, g0))


def test_w2_shaped_step_matches_the_hand_written_backward_bit_for_bit(rule_calls):
    # a Linear-ReLU-Linear step in float32 as the W2 bench runs it
    x0 = rng.standard_normal((32, 64)).astype(np.float32)
    w1 = (rng.standard_normal((64, 128)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((128, 10)) / 8).astype(np.float32)
    g0 = rng.standard_normal((32, 10)).astype(np.float32)
    W1, W2 = tg.tensor(w1, requires_grad=True), tg.tensor(w2, requires_grad=True)
    (tg.relu(tg.tensor(x0) @ W1) @ W2).backward(tg.tensor(g0))
    assert rule_calls == []
    z = x0 @ w1
    h = np.maximum(z, 0)
    np.testing.assert_array_equal(W2.grad.numpy(), np.matmul(h.T, g0))
    gh = np.matmul(g0, w2.T) * (z > 0)
    np.testing.assert_array_equal(W1.grad.numpy(), np.matmul(x0.T, gh))


# ---------------------------------------------------------------------------------------
# tg.no_grad() in C
# ---------------------------------------------------------------------------------------

def test_no_grad_runs_no_python_frame_on_entry_and_exit():
    # what the shortcut is: the methods are the C base's, not Python functions
    assert tg.no_grad.__init__ is _GradSwitchCore.__init__
    assert tg.no_grad.__enter__ is _GradSwitchCore.__enter__
    assert tg.no_grad.__exit__ is _GradSwitchCore.__exit__


def test_no_grad_restores_the_mode_it_replaced_even_on_error():
    assert tg.is_grad_enabled()
    with pytest.raises(ZeroDivisionError):
        with tg.no_grad():
            assert not tg.is_grad_enabled()
            1 / 0
    assert tg.is_grad_enabled()
    with tg.no_grad():
        with tg.enable_grad():
            assert tg.is_grad_enabled()
            with tg.no_grad():
                assert not tg.is_grad_enabled()
            assert tg.is_grad_enabled()
        assert not tg.is_grad_enabled()
    assert tg.is_grad_enabled()


def test_one_no_grad_instance_entered_nested():
    switch = tg.no_grad()
    with switch:
        with tg.enable_grad():
            with switch:
                assert not tg.is_grad_enabled()
            assert tg.is_grad_enabled()
        assert not tg.is_grad_enabled()
    assert tg.is_grad_enabled()


def test_no_grad_as_decorator_and_on_generators():
    x = tg.tensor([1.0], requires_grad=True)

    @tg.no_grad()
    def f():
        return x * 2, tg.is_grad_enabled()

    y, mode = f()
    assert not y.requires_grad and not mode and tg.is_grad_enabled()

    @tg.no_grad()
    def gen():
        yield tg.is_grad_enabled()
        yield tg.is_grad_enabled()

    seen = []
    for mode in gen():
        seen.append((mode, tg.is_grad_enabled()))
    assert seen == [(False, True), (False, True)]


def test_no_grad_is_per_thread():
    seen = []
    inside, release = threading.Event(), threading.Event()

    def other():
        inside.wait()
        seen.append(tg.is_grad_enabled())
        release.set()

    t = threading.Thread(target=other)
    t.start()
    with tg.no_grad():
        inside.set()
        release.wait()
    t.join()
    assert seen == [True]


def test_no_grad_exit_without_enter_raises():
    with pytest.raises(IndexError):
        tg.no_grad().__exit__(None, None, None)
