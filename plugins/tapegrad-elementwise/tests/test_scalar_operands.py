"""Python numbers as operands: the engine hands them to a ufunc kernel as 0-d arrays of the
tensor's dtype (Note: [Python scalars as 0-d arrays] in the engine); the results must be
NumPy's own, bit for bit."""

import numpy as np
import pytest
import tapegrad as tg


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_python_scalar_operands_give_numpys_result_bit_for_bit(dtype):
    # The engine passes a float or small int to a ufunc kernel as a 0-d array of the
    # tensor's dtype (Note: [Python scalars as 0-d arrays]): same values, dtype and
    # warnings as NumPy with the scalar itself, including -0.0, nan, inf and repeats.
    a = np.array([-1.5, -0.0, 0.0, 0.1, 3.0, np.inf, np.nan, 1e-30], dtype)
    t = tg.tensor(a)
    scalars = [1.002, -0.0, 0.0, 1, -3, 2 ** 30, float("nan"), float("inf"), 1e-300, True]
    for v in scalars * 2:                   # twice: the second time from the cache
        for op, fn in [(tg.multiply, np.multiply), (tg.add, np.add), (tg.subtract, np.subtract),
                       (tg.divide, np.divide), (tg.maximum, np.maximum), (tg.less, np.less)]:
            with np.errstate(all="ignore"):
                for got, want in [(op(t, v), fn(a, v)), (op(v, t), fn(v, a))]:
                    assert got.dtype == want.dtype
                    np.testing.assert_array_equal(got.numpy(), want)
                    assert np.array_equal(np.signbit(got.numpy()), np.signbit(want))


def test_python_float_beyond_float32_still_warns_like_numpy():
    t = tg.tensor(np.ones(2, np.float32))
    with pytest.warns(RuntimeWarning, match="overflow"):
        assert (t * 1e300).dtype == np.float32
