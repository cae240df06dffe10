"""An integer %, //, fmod or divmod by zero is not an error, as in NumPy: a RuntimeWarning
("divide by zero") and 0 (floats: NaN / inf). See the plugin's README."""

import numpy as np
import pytest
import tapegrad as tg

A = np.array([5, -7, 0])


@pytest.mark.parametrize("call", [
    lambda a: a % 0, lambda a: a // 0, lambda a: np.fmod(a, 0), lambda a: np.remainder(a, 0),
    lambda a: np.floor_divide(a, np.zeros(3, dtype=a.dtype)),
], ids=["%", "//", "fmod", "remainder", "floor_divide"])
def test_integer_division_by_zero_warns_and_gives_numpys_zeros(call):
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        want = call(A)
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        got = call(tg.tensor(A))
    assert got.dtype == want.dtype == np.int64
    np.testing.assert_array_equal(got.numpy(), want)


def test_divmod_by_zero():
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        q, r = divmod(tg.tensor(A), 0)
    np.testing.assert_array_equal(q.numpy(), [0, 0, 0])
    np.testing.assert_array_equal(r.numpy(), [0, 0, 0])


def test_float_remainder_by_zero_is_nan_with_gradient_one():
    x = tg.tensor([5.0, -7.0], requires_grad=True)
    with pytest.warns(RuntimeWarning):
        y = x % 0.0
    assert np.isnan(y.numpy()).all()
    y.backward(tg.ones(2))
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])
