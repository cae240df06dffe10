"""Tensor._set_data_: a leaf takes another array in place (what Module.to builds on)."""

import numpy as np
import pytest
import tapegrad as tg


def test_set_data_keeps_the_object_and_requires_grad_and_bumps_the_version():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    p.grad = tg.ones(2)
    v = p._version
    p._set_data_(tg.tensor(np.array([3.0, 4.0], np.float32)))
    assert p.dtype == np.float32 and p.tolist() == [3.0, 4.0]
    assert p.requires_grad and p.is_leaf and p.grad is None and p._version == v + 1


def test_set_data_refuses_non_leaves_other_shapes_and_int_data_for_grad_tensors():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="only a leaf"):
        (p + p)._set_data_(tg.zeros(2))
    with pytest.raises(ValueError, match="shape"):
        p._set_data_(tg.zeros(3))
    with pytest.raises(TypeError, match="int64"):
        p._set_data_(tg.tensor(np.array([1, 2], np.int64)))
