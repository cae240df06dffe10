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


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unrecorded_in_place_updates_write_straight_into_storage_bit_identically(dtype):
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((4, 5)).astype(dtype)
    b_np = rng.standard_normal((4, 5)).astype(dtype)
    for op, ref in (("__isub__", np.subtract), ("__iadd__", np.add),
                    ("__imul__", np.multiply), ("__itruediv__", np.divide)):
        for other, other_np in ((tg.tensor(b_np), b_np), (0.37, 0.37), (3, 3)):
            a = tg.tensor(a_np.copy())
            storage, version = a.numpy(), a._version
            with tg.no_grad():
                getattr(a, op)(other)
            want = ref(a_np, np.asarray(other_np, dtype=dtype))
            assert a.dtype == dtype and np.array_equal(a.numpy(), want)
            assert a._version == version + 1
            assert np.shares_memory(a.numpy(), storage)
    x = tg.tensor(a_np.copy())
    with tg.no_grad():
        x -= x                                  # aliasing operand
        y = tg.tensor(a_np.copy())
        y += tg.tensor(b_np[0])                 # broadcasting: the general path
        z = tg.tensor([1, 2])
        z *= 2                                  # integer storage: the general path
    assert not x.numpy().any()
    assert np.array_equal(y.numpy(), a_np + b_np[0])
    assert z.tolist() == [2, 4]
