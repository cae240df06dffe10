"""tg.compile with the core alone (only the `add` op): the recorder, the replay loop and
the cache do not depend on any plugin. The full behaviour is tested in tests/test_compile.py."""

import numpy as np
import pytest
import tapegrad as tg


def test_replay_forward_and_backward_with_the_core_alone():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    f = tg.compile(lambda x: x + w + x)
    for k in range(3):
        x = tg.tensor([k, -k], dtype=np.float64, requires_grad=True)
        out = f(x)
        np.testing.assert_array_equal(out.numpy(), [2 * k + 1.0, -2 * k + 2.0])
        out.backward(tg.tensor([1.0, 10.0]))
        np.testing.assert_array_equal(x.grad.numpy(), [2.0, 20.0])
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 30.0])
    assert f.cache_info() == (2, 1, 1, 1024)
    steps = f.programs()[0].describe()
    assert len(steps["forward"]) == 2 and steps["backward"]


def test_a_tg_function_inside_is_recorded_with_its_backward():
    class Double(tg.Function):
        replay_backward = True      # (the default, False, runs such a signature eagerly)

        @staticmethod
        def forward(ctx, x):
            return x + x

        @staticmethod
        def backward(ctx, g):
            return g + g

    f = tg.compile(lambda x: Double.apply(x))
    for _ in range(2):
        x = tg.ones(3, requires_grad=True)
        f(x).backward(tg.ones(3))
        np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 2.0))
    assert f.cache_info().hits == 1


def test_guards_record_again():
    state = {"k": 1.0}

    def f(x):
        tg.compile_guard(lambda: state["k"])
        return x + state["k"]

    cf = tg.compile(f)
    assert cf(tg.zeros(1)).item() == 1.0
    state["k"] = 4.0
    assert cf(tg.zeros(1)).item() == 4.0
    assert "changed from 1.0 to 4.0" in cf.last_explanation


def test_in_place_writes_on_outside_tensors_are_replayed():
    acc = tg.zeros(2)

    @tg.compile
    def bump(x):
        with tg.no_grad():
            acc.add_(x)
        return acc + 0.0

    for _ in range(3):
        bump(tg.ones(2))
    np.testing.assert_array_equal(acc.numpy(), [3.0, 3.0])


def test_bad_arguments():
    with pytest.raises(TypeError, match="expected a function"):
        tg.compile(3)
    with pytest.raises(TypeError, match="cannot use an argument of type dict"):
        tg.compile(lambda d: d)({})
