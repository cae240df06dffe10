"""Regression tests for silent wrong results found by the issue 14 differential tests."""

import numpy as np
import pytest
import tapegrad as tg


@pytest.mark.parametrize("make", [
    lambda T: (T(np.arange(3)), 2.5),                       # a float scalar: float64
    lambda T: (T(np.arange(3)), 0.5, T(np.arange(2))),
    lambda T: (slice(0, 3), T(np.ones(2, np.float32))),      # arange's int64 takes part
    lambda T: (T(np.ones(2, np.float32)), 2.5),              # a weak scalar: float32
    lambda T: (True, T(np.arange(2))),
    lambda T: (1, 2.5),
    lambda T: ("0,2", T(np.arange(1)), 0.25),
])
def test_r_takes_the_dtype_of_scalars_and_ranges_into_account(make):
    # NumPy's r_ casts every item to result_type(arrays, ranges, scalars): an int64 tensor
    # and 2.5 give float64 [0, 1, 2, 2.5]; tapegrad cast the scalar to int64 (2).
    got = tg.r_[make(tg.tensor)]
    expected = np.r_[make(np.asarray)]
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.numpy(), expected)


def test_c_with_a_float_scalar_and_an_int_tensor():
    got = tg.c_[tg.tensor(np.arange(1)), 0.5]
    expected = np.c_[np.arange(1), 0.5]
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.numpy(), expected)


def test_r_stays_differentiable_when_a_tensor_is_cast():
    x = tg.tensor(np.ones(2, np.float32), requires_grad=True)
    y = tg.r_[x, np.arange(2)]                   # float32 and int64: float64, as NumPy
    assert y.dtype == np.float64
    y.backward(tg.tensor([1.0, 2.0, 3.0, 4.0]))
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 2.0])
