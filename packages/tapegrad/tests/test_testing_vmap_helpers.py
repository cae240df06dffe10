"""tapegrad.testing's helpers for plugins' batching-rule tests (vmap_call, loop_call,
batching_fallbacks, grad_of, assert_same), with the core alone: only `add` (both inputs
batched at the same ndim, or one shared), `ones_like` and the test plugin's `times`.
What needs tapegrad-shape (moving a tensor's axis inside a nested vmap_call, the real loop
fallback's stack) is exercised by the plugins' test_*_batching_rules.py files."""

import sys
import types

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt
from tapegrad import _batching, _engine

RNG = np.random.default_rng(3)


# ---------------------------------------------------------------------------------------
# vmap_call
# ---------------------------------------------------------------------------------------

def test_vmap_call_maps_numpy_arguments_over_any_axis_and_puts_the_result_at_out_axes():
    x, y = RNG.standard_normal((3, 5, 2)), RNG.standard_normal((3, 5, 2))
    got = tgt.vmap_call(lambda a, b: a + b, in_axes=(1, 1), out_axes=-1)(x, y)
    assert isinstance(got, tg.Tensor)
    np.testing.assert_array_equal(got.numpy(), np.moveaxis(x + y, 1, -1))


def test_vmap_call_passes_a_shared_argument_unmapped():
    x, shared = RNG.standard_normal((4, 3)), RNG.standard_normal(3)
    seen = []

    def f(a, b):
        seen.append((a.shape, type(b)))
        return a + b
    got = tgt.vmap_call(f, in_axes=(0, None))(x, shared)
    assert seen == [((3,), np.ndarray)]        # one call, on one logical example
    np.testing.assert_array_equal(got.numpy(), x + shared)


def test_vmap_call_nests_with_tensors_mapped_over_axis_0():
    x, y = RNG.standard_normal((2, 4, 3)), RNG.standard_normal((2, 4, 3))
    shapes = []

    def inner(a, b):
        shapes.append(a.shape)
        return a + b
    got = tgt.vmap_call(tgt.vmap_call(inner))(x, y)
    assert shapes == [(3,)] and got.shape == (2, 4, 3)
    np.testing.assert_array_equal(got.numpy(), x + y)


def test_vmap_call_maps_each_result_of_a_tuple():
    x, y = RNG.standard_normal((3, 2)), RNG.standard_normal((3, 2))
    total, again = tgt.vmap_call(lambda a, b: (a + b, a + a), out_axes=1)(x, y)
    np.testing.assert_array_equal(total.numpy(), (x + y).T)
    np.testing.assert_array_equal(again.numpy(), (x + x).T)


def test_vmap_call_refuses_mapped_axes_of_different_sizes_or_none():
    with pytest.raises(ValueError, match=r"vmap_call: the mapped axes must have one size, "
                                         r"got \[3, 4\]"):
        tgt.vmap_call(lambda a, b: a + b)(np.ones((3, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="no mapped argument"):
        tgt.vmap_call(lambda a: a, in_axes=(None,))(np.ones(2))
    with pytest.raises(ValueError, match="in_axes has 1 entries for 2 arguments"):
        tgt.vmap_call(lambda a, b: a + b, in_axes=(0,))(np.ones(2), np.ones(2))


def test_vmap_call_asserts_that_the_result_is_batched():
    with pytest.raises(AssertionError, match="result 0 of <lambda> is not batched"):
        tgt.vmap_call(lambda a: tg.tensor([1.0]))(np.ones((3, 1)))


# ---------------------------------------------------------------------------------------
# loop_call
# ---------------------------------------------------------------------------------------

def test_loop_call_calls_f_once_per_example_and_stacks_at_out_axes():
    x, shared = RNG.standard_normal((3, 4, 2)), RNG.standard_normal(3)
    calls = []

    def f(v, s):
        calls.append(v.shape)
        return v.sum(axis=1) * s                 # (3,) per example
    got = tgt.loop_call(f, in_axes=(1, None), out_axes=1)(x, shared)
    assert calls == [(3, 2)] * 4
    want = np.stack([x[:, i].sum(axis=1) * shared for i in range(4)], axis=1)
    np.testing.assert_array_equal(got, want)


def test_loop_call_takes_tensors_and_stacks_tensor_and_tuple_results():
    x = tg.tensor(RNG.standard_normal((2, 3)))
    first, second = tgt.loop_call(lambda v: (tg.tensor(v) + 1.0, v[0]))(x)
    np.testing.assert_array_equal(first, x.numpy() + 1.0)
    np.testing.assert_array_equal(second, x.numpy()[:, 0])


def test_vmap_call_and_loop_call_agree_nested():
    x, y = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 2, 3))
    got = tgt.vmap_call(tgt.vmap_call(lambda a, b: a + b), in_axes=(2, 0))(x, y)
    want = tgt.loop_call(tgt.loop_call(np.add), in_axes=(2, 0))(x, y)
    tgt.assert_same(got, want)


# ---------------------------------------------------------------------------------------
# batching_fallbacks
# ---------------------------------------------------------------------------------------

@pytest.fixture
def stand_in_loop(monkeypatch):
    """_batching._loop replaced by a stand-in that computes `times` in one call: the real
    fallback stacks with tapegrad-shape's stack, which the core alone does not have.
    A module that bound the fallback under its own name at import stands beside it."""
    def loop(op, phys, batched, kwargs, size):
        dev = _engine.default_device()
        return _engine.new_tensor(dev.asarray(np.multiply(*[p.numpy() for p in phys])), dev)
    monkeypatch.setattr(_batching, "_loop", loop)
    importer = types.ModuleType("tapegrad_test_fallback_importer")
    importer.own_name = loop
    monkeypatch.setitem(sys.modules, importer.__name__, importer)
    return loop, importer


def test_batching_fallbacks_records_each_op_that_fell_back(times, stand_in_loop):
    loop, importer = stand_in_loop
    x, y = RNG.standard_normal((3, 2)), RNG.standard_normal((3, 2))
    with tgt.batching_fallbacks() as fallbacks:
        assert importer.own_name is not loop          # patched where it was imported too
        got = tgt.vmap_call(lambda a, b: times(a, b) + times(a, a) + b)(x, y)
    assert fallbacks == ["times", "times"]             # `add` has its rule: not recorded
    np.testing.assert_allclose(got.numpy(), x * y + x * x + y)
    assert _batching._loop is loop and importer.own_name is loop    # restored


def test_batching_fallbacks_records_nothing_for_ops_with_rules():
    with tgt.batching_fallbacks() as fallbacks:
        tgt.vmap_call(lambda a, b: a + b)(np.ones((2, 3)), np.ones((2, 3)))
    assert fallbacks == []


def test_batching_fallbacks_restores_the_fallback_after_an_error(stand_in_loop):
    loop, importer = stand_in_loop
    with pytest.raises(ZeroDivisionError):
        with tgt.batching_fallbacks():
            1 / 0
    assert _batching._loop is loop and importer.own_name is loop


# ---------------------------------------------------------------------------------------
# grad_of, assert_same
# ---------------------------------------------------------------------------------------

def test_grad_of_gives_the_gradient_of_the_cotangent_product():
    x = tg.tensor(RNG.standard_normal(3), requires_grad=True)
    unused = tg.tensor(RNG.standard_normal(3), requires_grad=True)
    u = RNG.standard_normal(3)
    gx, gu = tgt.grad_of(x + x + x, (x, unused), u)
    np.testing.assert_array_equal(gx.numpy(), 3 * u)     # d<3x, u>/dx = 3u
    assert gu is None
    np.testing.assert_array_equal(tgt.grad_of(x + x, x).numpy(), np.full(3, 2.0))
    assert x.grad is None                                  # .grad left alone


def test_grad_of_inside_vmap_call_gives_per_example_gradients():
    x = RNG.standard_normal((4, 3))

    def per_example(v):
        p = tg.tensor(np.ones(3), requires_grad=True)
        return tgt.grad_of(p + v, p, v)          # d<p + v, v>/dp = v, per example
    tgt.assert_same(tgt.vmap_call(per_example)(x), x)


def test_assert_same_checks_shape_dtype_and_values():
    tgt.assert_same(tg.tensor([1.0, 2.0]), np.array([1.0, 2.0]))
    tgt.assert_same(np.array([1.0, np.nan]), np.array([1.0 + 1e-13, np.nan]))
    with pytest.raises(AssertionError, match=r"shape \(2,\) dtype float64 differs from the "
                                             r"expected \(1, 2\) float64"):
        tgt.assert_same(np.array([1.0, 2.0]), np.array([[1.0, 2.0]]))
    with pytest.raises(AssertionError, match="float32"):
        tgt.assert_same(np.float32([1.0]), np.array([1.0]))
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        tgt.assert_same(np.array([1.0, 2.0 + 1e-9]), np.array([1.0, 2.0]))
    tgt.assert_same(np.array([1.0, 2.0 + 1e-9]), np.array([1.0, 2.0]), rtol=1e-8)
