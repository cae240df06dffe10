import gc
import subprocess
import sys
import textwrap
import time
import weakref

import numpy as np
import pytest
import tapegrad as tg


def test_x_plus_x_gives_two():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    (x + x).backward(tg.ones(2))
    assert x.grad.tolist() == [2.0, 2.0]


def test_gradients_accumulate_across_backward_calls():
    x = tg.tensor([1.0], requires_grad=True)
    (x + 1.0).backward()
    (x + 2.0).backward()
    assert x.grad.item() == 2.0
    x.grad = None
    (x + 1.0).backward()
    assert x.grad.item() == 1.0


def test_only_leaves_keep_grad_unless_retained():
    x = tg.tensor([1.0], requires_grad=True)
    h = x + 1.0
    k = (h + 1.0).retain_grad()
    (k + h).backward()
    assert h.grad is None
    assert k.grad.item() == 1.0 and k.retains_grad
    assert x.grad.item() == 2.0


def test_leaf_grad_does_not_alias_the_seed_or_other_leaves():
    x = tg.tensor([1.0], requires_grad=True)
    y = tg.tensor([1.0], requires_grad=True)
    seed = tg.ones(1)
    (x + y).backward(seed)
    x.grad.add_(5.0)
    assert y.grad.item() == 1.0 and seed.item() == 1.0


def test_leaf_grad_adopts_only_an_unshared_gradient():
    # A fresh gradient nobody else holds becomes .grad without a copy; one a hook kept, or
    # one that reached two leaves, is copied, so .grad never aliases anything.
    x = tg.tensor(np.ones((4, 3)), requires_grad=True)
    kept = []
    x.register_hook(lambda g: kept.append(g))
    tg.broadcast_to(x, (2, 4, 3)).backward(tg.ones((2, 4, 3)))
    assert x.grad is not kept[0]
    assert not np.shares_memory(x.grad.numpy(), kept[0].numpy())
    np.testing.assert_array_equal(x.grad.numpy(), np.full((4, 3), 2.0))
    y = tg.tensor(np.ones(3), requires_grad=True)
    z = tg.tensor(np.ones(3), requires_grad=True)
    tg.sum_to_shape(tg.broadcast_to(y, (2, 3)), shape=(3,)).backward(tg.ones(3))
    (y + z).backward(tg.ones(3))
    assert not np.shares_memory(y.grad.numpy(), z.grad.numpy())
    np.testing.assert_array_equal(y.grad.numpy(), [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(z.grad.numpy(), [1.0, 1.0, 1.0])


def test_broadcast_gradients_are_summed_to_each_input_shape(times):
    a = tg.tensor(np.ones((3, 4)), requires_grad=True)
    b = tg.tensor(np.arange(4.0), requires_grad=True)
    c = tg.tensor(2.0, requires_grad=True)
    y = times(a + b, c)
    y.backward(tg.ones((3, 4)))
    assert b.grad.shape == (4,) and b.grad.tolist() == [6.0] * 4
    assert c.grad.shape == () and c.grad.item() == pytest.approx(float((1 + np.arange(4.0)).sum() * 3))
    assert a.grad.shape == (3, 4)


def test_second_backward_without_retain_graph_raises():
    x = tg.tensor([1.0], requires_grad=True)
    y = tg.sum_to_shape(x + x, (1,))
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_retain_graph_allows_a_second_backward():
    x = tg.tensor([1.0], requires_grad=True)
    y = tg.sum_to_shape(x + x, (1,))
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.item() == 4.0


def test_backward_of_non_scalar_needs_a_gradient():
    y = tg.tensor([1.0, 2.0], requires_grad=True) + 1.0
    with pytest.raises(RuntimeError, match="one element.*shape \\(2,\\)"):
        y.backward()


def test_backward_gradient_must_match_shape():
    y = tg.tensor([1.0, 2.0], requires_grad=True) + 1.0
    with pytest.raises(RuntimeError, match="shape \\(3,\\)"):
        y.backward(tg.ones(3))


def test_backward_on_tensor_that_does_not_require_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        (tg.tensor([1.0]) + 1.0).backward()
    x = tg.tensor([1.0], requires_grad=True)
    with tg.no_grad():
        y = x + 1.0
    with pytest.raises(RuntimeError, match="no_grad"):
        y.backward()


def test_backward_on_a_leaf_accumulates_ones():
    x = tg.tensor([3.0], requires_grad=True)
    x.backward()
    assert x.grad.item() == 1.0


def test_multiple_roots():
    x = tg.tensor([1.0], requires_grad=True)
    tg.backward([x + x, x + 1.0])
    assert x.grad.item() == 3.0


def test_diamond_graph_runs_each_vjp_once(times):
    x = tg.tensor([2.0], requires_grad=True)
    a = times(x, 3.0)
    b = a + a            # a feeds two edges of one node
    c = times(a, b)      # ... and another node
    c.backward()
    # c = 3x * 6x = 18 x^2, dc/dx = 36 x
    assert x.grad.item() == pytest.approx(72.0)


def test_hooks_see_and_replace_gradients():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()))
    h = x + 1.0
    handle = h.register_hook(lambda g: g + g)
    (h + 0.0).backward(tg.ones(2))
    assert seen == [[2.0, 2.0]] and x.grad.tolist() == [2.0, 2.0]
    handle.remove()
    x.grad = None
    (x + 1.0 + 0.0).backward(tg.ones(2))
    assert x.grad.tolist() == [1.0, 1.0]


def test_hook_on_leaf_used_twice_fires_once_with_the_sum():
    x = tg.tensor([1.0], requires_grad=True)
    calls = []
    x.register_hook(lambda g: calls.append(g.item()))
    (x + x).backward()
    assert calls == [2.0]


def test_hook_must_keep_the_shape():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: tg.ones(3))
    with pytest.raises(ValueError, match="shape"):
        (x + 1.0).backward(tg.ones(2))


def test_detach_shares_data_and_cuts_the_graph():
    x = tg.tensor([1.0], requires_grad=True)
    d = (x + 1.0).detach()
    assert not d.requires_grad and d.is_leaf and d.item() == 2.0
    y = x + d
    y.backward()
    assert x.grad.item() == 1.0


def test_grad_setter_validates():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match="shape"):
        x.grad = tg.ones(3)
    with pytest.raises(TypeError, match="dtype"):
        x.grad = tg.ones(2, dtype=np.float32)
    x.grad = np.array([1.0, 1.0])
    assert isinstance(x.grad, tg.Tensor)


def test_mixed_dtypes_promote_like_numpy_and_grads_keep_input_dtypes():
    a = tg.tensor(np.ones(2, np.float32), requires_grad=True)
    b = tg.tensor(np.ones(2, np.float64), requires_grad=True)
    y = a + b
    assert y.dtype == np.float64
    y.backward(tg.ones(2))
    assert a.grad.dtype == np.float32 and b.grad.dtype == np.float64
    assert (a + 1.0).dtype == np.float32        # Python scalars are weak (NEP 50)


def test_shape_mismatch_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"add: .*\(2, 3\).*\(4,\)"):
        tg.tensor(np.ones((2, 3))) + tg.tensor(np.ones(4))


def test_create_graph_gives_differentiable_gradients(times):
    x = tg.tensor([1.5], requires_grad=True)
    y = tg.cube(x)
    (gx,) = (None,)
    y.backward(create_graph=True)
    gx = x.grad                      # 3 x^2, with a graph
    assert gx.requires_grad and gx.item() == pytest.approx(6.75)
    x.grad = None
    gx.backward()                    # d(3x^2)/dx = 6x
    assert x.grad.item() == pytest.approx(9.0)


def _chain(n):
    x = tg.tensor(np.ones(1), requires_grad=True)
    y = x
    for _ in range(n):
        y = y + 1.0
    return x, y


def test_2000_op_chain_backpropagates():
    x, y = _chain(2000)
    y.backward()
    assert x.grad.item() == 1.0 and y.item() == 2001.0


def test_graph_is_freed_by_reference_counting(times):
    gc.disable()
    try:
        x = tg.tensor(np.ones(3), requires_grad=True)
        h = x + 1.0
        y = times(h, h) + 2.0          # times' rule reads h: the graph keeps h's array
        array_ref = weakref.ref(h._data)
        del h
        assert array_ref() is not None
        del y
        assert array_ref() is None
    finally:
        gc.enable()


def _freed_without_gc(build):
    """Whether what build() returns (weakly referenced) dies by reference counting alone."""
    gc.collect()
    gc.disable()
    try:
        ref = build()
        return ref() is None
    finally:
        gc.enable()


def test_create_graph_gradient_does_not_leak_a_cycle(times):
    def build():
        x = tg.tensor([1.5, 2.0], requires_grad=True)
        tg.cube(x).backward(tg.ones(2), create_graph=True)   # x.grad's graph reads x
        assert x.grad.requires_grad
        return weakref.ref(x)
    assert _freed_without_gc(build)


def test_inplace_update_from_its_own_value_does_not_leak_a_cycle(times):
    def build():
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        h = x + 0.0
        h.add_(times(h, 2.0))          # times saved h's old value; h is rebound after
        assert h.grad_fn.name == "add"
        return weakref.ref(h)
    assert _freed_without_gc(build)


def test_graph_does_not_keep_a_leaf_alive():
    x = tg.tensor([1.0], requires_grad=True)
    y = x + 1.0
    ref = weakref.ref(x)
    del x
    assert ref() is None
    y.backward()                       # the leaf is gone: nothing to accumulate into
    assert y.grad_fn.next_functions == ((None, 0), (None, 0))


def test_hook_closing_a_cycle_is_collected(times):
    def build():
        x = tg.tensor([1.0], requires_grad=True)
        h = x + 1.0
        h.register_hook(lambda g: g if h is not None else g)   # refers back to h
        return weakref.ref(h)
    ref = build()
    gc.collect()
    assert ref() is None


@pytest.mark.slow
def test_million_op_chain_is_linear_and_deletes_without_crashing():
    # In a subprocess: a crash of the interpreter must fail the test, not kill pytest.
    script = textwrap.dedent("""
        import time, numpy as np, tapegrad as tg

        def run(n):
            x = tg.tensor(np.ones(1), requires_grad=True)
            t0 = time.perf_counter()
            y = x
            for _ in range(n):
                y = y + 1.0
            y.backward()
            dt = time.perf_counter() - t0
            assert x.grad.item() == 1.0 and y.item() == n + 1.0
            return dt, y

        small, _ = run(100_000)
        big, y = run(1_000_000)
        del y                                   # after backward
        x = tg.tensor(np.ones(1), requires_grad=True)
        y = x
        for _ in range(1_000_000):
            y = y + 1.0
        del y                                   # before backward
        print(f"RATIO {big / small:.2f}")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    ratio = float(out.stdout.split("RATIO")[1])
    assert ratio < 20.0, f"1,000,000-op chain took {ratio:.1f}x the 100,000-op chain"


def test_traversal_is_linear_time_for_a_wide_graph():
    x = tg.tensor(np.ones(1), requires_grad=True)
    terms = [x + float(i) for i in range(20000)]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    t0 = time.perf_counter()
    total.backward()
    assert x.grad.item() == 20000.0
    assert time.perf_counter() - t0 < 5.0


def test_threads_accumulating_into_a_shared_leaf_lose_no_update():
    import threading
    x = tg.tensor(np.zeros(4), requires_grad=True)
    errors = []

    def work():
        try:
            for _ in range(200):
                (x + 1.0).backward(tg.ones(4))
        except Exception as exc:       # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert x.grad.tolist() == [1600.0] * 4


def test_threads_backpropagating_independent_graphs_match_serial(times):
    import threading
    rng = np.random.default_rng(0)
    data = [rng.standard_normal(5) for _ in range(8)]

    def grad_of(a):
        x = tg.tensor(a, requires_grad=True)
        y = x
        for _ in range(300):
            y = times(y, 0.999) + 0.001
        tg.cube(y).backward(tg.ones(5))
        return x.grad.numpy()

    start = time.perf_counter()
    serial = [grad_of(a) for a in data]
    serial_s = time.perf_counter() - start
    results = [None] * len(data)

    def work(i):
        results[i] = grad_of(data[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(data))]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    threaded_s = time.perf_counter() - start
    print(f"\n8 graphs of 600 ops: serial {serial_s * 1e3:.1f} ms, 8 threads {threaded_s * 1e3:.1f} ms")
    for got, want in zip(results, serial):
        assert np.array_equal(got, want)


def test_rule_gradients_are_reduced_and_broadcast_to_the_input_shape():
    class KeepSum:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            # Both rules return g as it is: (1, 4) and (4,) for an input of shape (3, 4).
            registry.register_op("keepsum_t", kernels={"cpu": lambda x: x.sum(0, keepdims=True)},
                                 vjp=lambda g, ans, x: (g,), save_inputs=(False,), save_ans=False)
            registry.register_op("sum0_t", kernels={"cpu": lambda x: x.sum(0)},
                                 vjp=lambda g, ans, x: (g,), save_inputs=(False,), save_ans=False)

    name = tg.register_plugin(KeepSum(), name="keepsum")
    try:
        for op in (tg.keepsum_t, tg.sum0_t):
            x = tg.tensor(np.ones((3, 4)), requires_grad=True)
            y = op(x)
            y.backward(tg.ones(y.shape))
            assert x.grad.shape == (3, 4) and x.grad.tolist() == [[1.0] * 4] * 3
    finally:
        tg.unregister_plugin(name)


def test_gradients_of_0d_tensors_stay_0d_arrays(times):
    x = tg.tensor(0.3, requires_grad=True)
    tg.cube(x).backward()                 # several contributions summed into one 0-d grad
    (times(x, 2.0) + x).backward()
    assert isinstance(x.grad.numpy(), np.ndarray) and x.grad.shape == ()
    assert x.grad.item() == pytest.approx(3 * 0.09 + 3.0)
    x.grad.add_(1.0)


@pytest.mark.parametrize("leaf", [True, False], ids=["leaf-hook", "node-hook"])
def test_hook_returning_another_dtype_raises(leaf):
    # PyTorch raises; a float32 leaf must never get a float64 .grad.
    x = tg.tensor(np.ones(3, np.float32), requires_grad=True)
    h = x if leaf else x + 1.0
    h.register_hook(lambda g: tg.tensor(np.ones(3)))
    with pytest.raises(TypeError, match="dtype float64.*float32"):
        (h + 0.0).backward(tg.tensor(np.ones(3, np.float32)))
    assert x.grad is None
