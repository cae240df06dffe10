"""_batching.check_values: compile_check's value check, once per example on batched
(tg.vmap) tensors, with nested batch levels and tensors batched at different levels
(core only: the batch levels are opened with _batching directly)."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _batching


def _record(seen):
    def check(*arrays):
        seen.append(tuple(np.array(a) for a in arrays))
    return check


def test_plain_tensors_are_checked_once_as_compile_check():
    seen = []
    _batching.check_values(_record(seen), tg.tensor([1.0, 2.0]), 3.0)
    assert len(seen) == 1 and seen[0][0].tolist() == [1.0, 2.0]


def test_each_example_is_checked_with_its_own_values():
    x = np.arange(12.0).reshape(3, 4)             # 3 examples of shape (4,)
    shared = tg.tensor([10.0, 20.0, 30.0, 40.0])
    seen = []
    level = _batching.enter(3)
    try:
        _batching.check_values(_record(seen), _batching.wrap(tg.tensor(x), level), shared)
    finally:
        _batching.exit(level)
    assert [s[0].tolist() for s in seen] == x.tolist()
    assert all(s[1].tolist() == [10.0, 20.0, 30.0, 40.0] for s in seen)


def test_nested_levels_and_tensors_batched_at_one_level_each():
    outer_vals = np.arange(2.0)[:, None] * np.ones((2, 3))          # 2 outer examples
    inner_vals = 100 + np.arange(4.0)[:, None] * np.ones((4, 3))    # 4 inner examples
    both = np.arange(2 * 4 * 3.0).reshape(2, 4, 3)                   # at both levels
    seen = []
    outer = _batching.enter(2)
    try:
        a = _batching.wrap(tg.tensor(outer_vals), outer)
        b_phys = _batching.wrap(tg.tensor(both), outer)              # (4, 3) per outer example
        inner = _batching.enter(4)
        try:
            c = _batching.wrap(tg.tensor(inner_vals), inner)
            b = _batching.wrap(b_phys, inner)
            _batching.check_values(_record(seen), a, b, c)
        finally:
            _batching.exit(inner)
    finally:
        _batching.exit(outer)
    assert len(seen) == 8
    for k, (av, bv, cv) in enumerate(seen):
        i, j = divmod(k, 4)                      # outer example i, inner example j
        assert av.tolist() == outer_vals[i].tolist()
        assert bv.tolist() == both[i, j].tolist()
        assert cv.tolist() == inner_vals[j].tolist()


def test_a_failing_example_raises():
    def positive(a):
        if (a <= 0).any():
            raise ValueError(f"not positive: {a.tolist()}")
    level = _batching.enter(3)
    try:
        x = _batching.wrap(tg.tensor([[1.0], [-2.0], [3.0]]), level)
        with pytest.raises(ValueError, match=r"not positive: \[-2.0\]"):
            _batching.check_values(positive, x)
    finally:
        _batching.exit(level)
