"""compile_check and run_eagerly: how library code that reads tensor values stays
correct under tg.compile (core ops only: add)."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad._compile import compile_check, run_eagerly


def _non_negative(a):
    if (a < 0).any():
        raise ValueError(f"negative entries: {a.tolist()}")


def test_compile_check_runs_on_every_replay_and_in_the_backward():
    def f(x):
        compile_check(_non_negative, x)
        return x + x

    cf = tg.compile(f)
    for v in ([1.0, 2.0], [3.0, 0.0]):
        assert cf(tg.tensor(v, requires_grad=True)).tolist() == [2 * e for e in v]
    with pytest.raises(ValueError, match=r"negative entries: \[-1.0, 2.0\]"):
        cf(tg.tensor([-1.0, 2.0], requires_grad=True))
    assert cf.cache_info().misses == 1
    with pytest.raises(ValueError, match="negative entries"):     # eager: the same
        f(tg.tensor([-1.0, 2.0]))


def test_compile_check_outside_a_recording_just_checks():
    compile_check(_non_negative, tg.ones(2), np.ones(2))
    with pytest.raises(ValueError):
        compile_check(_non_negative, tg.tensor([-1.0, 1.0]))


def test_run_eagerly_warns_and_every_call_runs_the_function():
    calls = []

    def f(x):
        calls.append(1)
        run_eagerly("f reads its values")
        return x + x

    cf = tg.compile(f)
    with pytest.warns(tg.CompileWarning, match="f reads its values"):
        cf(tg.ones(2))
    cf(tg.ones(2))
    cf(tg.ones(2))
    assert len(calls) == 3
