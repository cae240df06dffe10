"""What a recording makes a replay run, and what recording costs (issue 16 item 5):

- an op with aux outputs (cross_entropy's softmax) is replayed with its aux arrays in
  slots, so the recorded backward reuses that replay's softmax, as eager does, instead of
  recomputing it;
- relu's rule runs relu_backward (one C loop) while recording too (its composite, a
  comparison and a where, is never fused);
- the cyclic GC is paused while a function records, and restored after.

References: the eager step (bit for bit) and NumPy's closed form of the gradient.
"""

import gc

import numpy as np
import pytest
import tapegrad as tg


def _same(a, b):
    a = a.numpy() if isinstance(a, tg.Tensor) else np.asarray(a)
    b = b.numpy() if isinstance(b, tg.Tensor) else np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert np.array_equal(a, b, equal_nan=True), np.max(np.abs(a - b))


def _layers(rng, sizes, dtype):
    return [rng.standard_normal(s).astype(dtype) for fan_in, fan_out in zip(sizes, sizes[1:])
            for s in ((fan_in, fan_out), (fan_out,))]


def _training_step(weights, lr):
    def step(x, y):
        with tg.no_grad():
            for p in weights:
                p.grad = None
        h = x
        for i in range(0, len(weights), 2):
            h = h @ weights[i] + weights[i + 1]
            if i + 2 < len(weights):
                h = tg.relu(h)
        loss = tg.cross_entropy(h, y)
        loss.backward()
        with tg.no_grad():
            for p in weights:
                p -= lr * p.grad
        return loss
    return step


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_compiled_relu_mlp_training_step_equals_eager_bit_for_bit(dtype):
    rng = np.random.default_rng(3)
    init = _layers(rng, (7, 9, 9, 4), dtype)
    eager_w = [tg.tensor(a.copy(), requires_grad=True) for a in init]
    comp_w = [tg.tensor(a.copy(), requires_grad=True) for a in init]
    eager_step = _training_step(eager_w, 0.1)
    compiled = tg.compile(_training_step(comp_w, 0.1))
    for call in range(5):
        x = rng.standard_normal((6, 7)).astype(dtype)
        x[0, :3] = 0.0                       # relu's kink: inputs exactly 0 reach it
        y = rng.integers(0, 4, 6)
        _same(compiled(tg.tensor(x), y), eager_step(tg.tensor(x), y))
        for p, q in zip(comp_w, eager_w):
            _same(p, q)
            _same(p.grad, q.grad)
    assert compiled.cache_info().hits >= 3
    names = [name for _, name in compiled.programs()[-1].describe()["forward"]]
    # the backward of cross_entropy reuses the forward's softmax (aux), as eagerly
    assert "_minus_one_hot_kernel" in names and "_softmax_minus_one_hot_kernel" not in names
    assert names.count("relu_backward") == 2 and "where" not in names


def test_a_replayed_cross_entropy_gradient_is_the_closed_form_on_new_values():
    rng = np.random.default_rng(5)
    w = tg.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    f = tg.compile(lambda x, y: tg.cross_entropy(x @ w, y))
    for call in range(4):
        x = rng.standard_normal((8, 5))
        y = rng.integers(0, 3, 8)
        w.grad = None
        loss = f(tg.tensor(x), y)
        loss.backward()
        z = x @ w.numpy()
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        np.testing.assert_allclose(loss.item(), -np.log(p[np.arange(8), y]).mean(), rtol=1e-12)
        p[np.arange(8), y] -= 1
        np.testing.assert_allclose(w.grad.numpy(), x.T @ p / 8, rtol=1e-10, atol=1e-14)
    assert f.cache_info().hits == 3


def test_a_replay_checks_the_labels_of_its_call():
    w = tg.tensor(np.ones((2, 3)), requires_grad=True)
    f = tg.compile(lambda x, y: tg.cross_entropy(x @ w, y))
    f(tg.tensor(np.ones((4, 2))), np.array([0, 1, 2, 0])).backward()
    with pytest.raises(IndexError, match="out of range"):
        f(tg.tensor(np.ones((4, 2))), np.array([0, 3, 2, 0]))


def test_the_cyclic_gc_is_paused_while_a_function_records_and_restored_after():
    seen = []

    def fn(x):
        seen.append(gc.isenabled())
        return x * 2.0

    f = tg.compile(fn)
    assert gc.isenabled()
    f(tg.ones(3))
    assert seen == [False] and gc.isenabled()
    f(tg.ones(3))                            # a replay runs no Python of fn
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        f(tg.ones(4))                        # records again: the GC stays off after
        assert seen == [False, False] and not gc.isenabled()
    finally:
        gc.enable()


def test_the_gc_is_restored_when_recording_raises():
    def fn(x):
        raise ValueError("boom")

    f = tg.compile(fn)
    with pytest.raises(ValueError, match="boom"):
        f(tg.ones(2))
    assert gc.isenabled()
