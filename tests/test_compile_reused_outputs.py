"""Reused outputs (tg.compile, Note: [reused outputs] in _compile.pyx): a replayed kernel
with a large output writes into the array it returned on the previous replay, but only
when nothing else holds that array. These tests hold every kind of reference a user can
hold across replays (a .grad, a returned tensor, a NumPy view, a memoryview, a weak
reference) and check that what they see never changes; they also check that reuse really
happens (so a silent fallback to allocating does not pass), and that replays stay bit for
bit equal to eager, with gradients equal to NumPy's closed form.
"""

import threading
import weakref

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _compile

FLOATS = (np.float32, np.float64)
N = 512                      # a (512, 512) float32 array is 1 MiB: at the threshold


def _bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.dtype, a.shape, a.tobytes()


def _mlp(dtype, batch=N, width=N, seed=0):
    """A two-layer ReLU MLP step with SGD; every GEMM output is >= 1 MiB."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(dtype)
    w2 = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(dtype)
    params = [tg.tensor(w1.copy(), requires_grad=True), tg.tensor(w2.copy(), requires_grad=True)]

    def step(x):
        for p in params:
            p.grad = None
        h = tg.relu(x @ params[0])
        loss = tg.sum((h @ params[1]) * 0.5)
        loss.backward()
        with tg.no_grad():
            for p in params:
                p -= 0.01 * p.grad
        return loss

    xs = [rng.standard_normal((batch, width)).astype(dtype) for _ in range(4)]
    return params, step, xs, (w1, w2)


def _closed_form(x, w1, w2):
    """The gradients of sum(relu(x w1) w2 * 0.5) by hand, and the SGD update."""
    z = x @ w1
    h = np.maximum(z, 0)
    g_out = np.full((x.shape[0], w2.shape[1]), 0.5, x.dtype)
    g2 = h.T @ g_out
    gh = g_out @ w2.T
    g1 = x.T @ (gh * (z > 0))
    return g1, g2


@pytest.mark.parametrize("dtype", FLOATS)
def test_replays_reuse_and_match_eager_bit_for_bit(dtype):
    params_e, step_e, xs, _ = _mlp(dtype)
    params_c, step_c, _, _ = _mlp(dtype)
    compiled = tg.compile(step_c)
    for x in xs:
        le = step_e(tg.tensor(x))
        lc = compiled(tg.tensor(x))
        assert _bits(lc) == _bits(le)
        for pe, pc in zip(params_e, params_c):
            assert _bits(pc) == _bits(pe)
            assert _bits(pc.grad) == _bits(pe.grad)
        del le, lc
    (program,) = compiled.programs()
    assert compiled.cache_info().hits >= 2
    assert program.reusable_buffers() >= 4      # GEMMs, relu's input, the update's products


@pytest.mark.parametrize("dtype", FLOATS)
def test_gradients_match_numpy_closed_form(dtype):
    params, step, xs, (w1, w2) = _mlp(dtype)
    compiled = tg.compile(step)
    tol = 1e-3 if dtype == np.float32 else 1e-10
    for x in xs:
        before = [p.numpy().copy() for p in params]
        compiled(tg.tensor(x))
        g1, g2 = _closed_form(x, *before)
        np.testing.assert_allclose(params[0].grad.numpy(), g1, rtol=tol, atol=tol)
        np.testing.assert_allclose(params[1].grad.numpy(), g2, rtol=tol, atol=tol)
        np.testing.assert_allclose(params[0].numpy(), before[0] - dtype(0.01) * g1,
                                   rtol=tol, atol=tol)


def _held_grads_stay(hold):
    params, step, xs, _ = _mlp(np.float32)
    compiled = tg.compile(step)
    compiled(tg.tensor(xs[0]))
    compiled(tg.tensor(xs[1]))                       # recorded twice (.grad None at first)
    held, snapshots = [], []
    for x in xs[2:] + xs[:2]:
        compiled(tg.tensor(x))
        g = params[0].grad
        held.append(hold(g))
        snapshots.append(g.numpy().copy())
    return held, snapshots


@pytest.mark.parametrize("hold", [
    lambda g: g,                                   # the .grad tensor itself
    lambda g: g.numpy(),                           # its array
    lambda g: g.numpy()[1:],                       # a NumPy view of it
    lambda g: memoryview(g.numpy()),               # a memoryview
])
def test_a_held_grad_never_changes(hold):
    held, snapshots = _held_grads_stay(hold)
    for h, snap in zip(held, snapshots):
        got = np.asarray(h.numpy() if isinstance(h, tg.Tensor) else h)
        assert np.array_equal(got, snap[1:] if got.shape[0] == snap.shape[0] - 1 else snap)


def test_a_weakly_referenced_array_is_not_reused():
    params, step, xs, _ = _mlp(np.float32)
    compiled = tg.compile(step)
    for x in xs[:3]:
        compiled(tg.tensor(x))
    arr = params[0].grad._data                 # the very array (.numpy() may be a view)
    snap = arr.copy()
    ref = weakref.ref(arr)
    del arr
    # the step drops its .grad tensor; only the program and the weak reference see it
    compiled(tg.tensor(xs[3]))
    # not written into: the step allocated afresh and dropped it (were it reused, the
    # weak reference would see the new gradient)
    assert ref() is None or np.array_equal(ref(), snap)
    assert ref() is None


def test_a_held_returned_tensor_never_changes():
    rng = np.random.default_rng(1)
    w = tg.tensor(rng.standard_normal((N, N)).astype(np.float64))

    @tg.compile
    def f(x):
        return (x @ w) * 2.0                     # both outputs >= 1 MiB

    outs, snaps = [], []
    for _ in range(5):
        x = rng.standard_normal((N, N))
        y = f(tg.tensor(x))
        assert np.array_equal(y.numpy(), (x @ w.numpy()) * 2.0)
        outs.append(y)
        snaps.append(y.numpy().copy())
    for y, s in zip(outs, snaps):
        assert np.array_equal(y.numpy(), s)
    # not held: the next replay writes into the same memory (reuse really happens)
    del outs, y
    addresses = set()
    for _ in range(3):
        y = f(tg.tensor(rng.standard_normal((N, N))))
        addresses.add(y.numpy().__array_interface__["data"][0])
        del y
    assert len(addresses) == 1


def test_small_outputs_and_kernels_with_parameters_allocate():
    w = tg.tensor(np.ones((8, 8)))

    @tg.compile
    def f(x):
        return tg.sum(x @ w, axis=0)

    for _ in range(3):
        f(tg.ones((8, 8)))
    assert f.programs()[0].reusable_buffers() == 0
    assert _compile.REUSE_BYTES == 1 << 20


def test_only_the_last_replayed_program_keeps_buffers():
    w = tg.tensor(np.ones((N, N)))

    @tg.compile
    def f(x):
        return (x @ w) + 1.0

    big, other = tg.ones((N, N)), tg.ones((N + 8, N))
    for _ in range(2):
        f(big)
    first = f.programs()[0]
    assert first.reusable_buffers() == 2
    for _ in range(2):
        f(other)
    assert first.reusable_buffers() == 0            # released for the other shape's program
    assert sum(p.reusable_buffers() for p in f.programs()) == 2
    f.cache_clear()


def test_threads_replaying_one_program_never_share_an_output():
    rng = np.random.default_rng(2)
    w = tg.tensor(rng.standard_normal((N, N)))

    @tg.compile
    def f(x):
        return x @ w

    f(tg.ones((N, N)))
    f(tg.ones((N, N)))
    errors = []

    def work(seed):
        r = np.random.default_rng(seed)
        held = []
        for _ in range(10):
            x = r.standard_normal((N, N))
            held.append((f(tg.tensor(x)), x @ w.numpy()))
        for y, want in held:
            if not np.array_equal(y.numpy(), want):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
