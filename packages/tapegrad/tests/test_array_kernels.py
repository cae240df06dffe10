"""The core's C array kernels (tapegrad._array_kernels) against NumPy's own calls, bit for
bit: the loops promise NumPy's values, not merely close ones."""

import numpy as np
import pytest

import tapegrad as tg
from tapegrad._array_kernels import sum_leading, transpose_copy


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def _special(rng, shape, dtype):
    """Random values with signed zeros, infinities and NaNs sprinkled in."""
    a = rng.standard_normal(shape).astype(dtype)
    flat = a.reshape(-1)
    picks = rng.integers(0, flat.size, max(1, flat.size // 10))
    flat[picks] = rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype), picks.size)
    return a


def assert_numpys_values(got, want):
    """Bit for bit, except that a NaN need only be a NaN: IEEE 754 leaves the sign and
    payload of a NaN that an addition makes from two NaNs to the hardware, and a C
    compiler may commute an addition (so which operand's NaN survives differs from
    NumPy's SIMD loop)."""
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])


SHAPES = [(1, 2), (2, 2), (3, 5), (32, 128), (32, 10), (7, 1, 3), (5, 4, 3), (1000, 2),
          (3, 33), (257, 9), (64, 1025), (2, 40000)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_sum_leading_has_numpys_bits(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    for a in (rng.standard_normal(shape).astype(dtype) * 1e3, _special(rng, shape, dtype)):
        with np.errstate(invalid="ignore"):
            want = np.add.reduce(a, 0)
            got = sum_leading(a)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert_numpys_values(got, want)


def test_sum_leading_of_negative_zeros_is_positive_zero_as_numpys():
    for dtype in (np.float32, np.float64):
        a = np.full((3, 4), -0.0, dtype)
        assert not np.signbit(np.add.reduce(a, 0)).any()
        assert not np.signbit(sum_leading(a)).any()


@pytest.mark.parametrize("a", [
    np.ones((4, 1), np.float32),              # one element a row: NumPy sums pairwise
    np.ones((0, 3), np.float64),              # empty
    np.ones((3, 4), np.float16),
    np.ones((3, 4), np.int64),
    np.ones((4, 6), np.float32)[:, ::2],      # strided
    np.ones((4, 6), np.float64).T,            # F order
    np.ones((3, 4), np.dtype(">f8")),         # byte-swapped
    np.ones(5, np.float32),                   # 1-d: a full reduction
])
def test_sum_leading_falls_back_to_numpy_elsewhere(a):
    want = np.add.reduce(a, 0)
    got = sum_leading(a)
    assert got.dtype == want.dtype and np.shape(got) == np.shape(want)
    np.testing.assert_array_equal(got, want)


def test_a_bias_gradient_is_numpys_column_sum():
    # sum_to_shape's common case (a bias broadcast along a batch axis) runs the loop
    rng = np.random.default_rng(0)
    g = rng.standard_normal((32, 128)).astype(np.float32)
    b = tg.tensor(np.zeros(128, np.float32), requires_grad=True)
    x = tg.tensor(np.zeros((32, 128), np.float32))
    (x + b).backward(tg.tensor(g))
    np.testing.assert_array_equal(_bits(b.grad.numpy()), _bits(g.sum(axis=0)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (3, 5), (4, 4), (5, 3), (128, 128),
                                   (10, 128), (33, 65), (127, 129), (2, 300)])
def test_transpose_copy_is_the_transpose_in_c_order(shape, dtype):
    a = _special(np.random.default_rng(sum(shape)), shape, dtype)
    got = transpose_copy(a)
    assert got.flags.c_contiguous and got.shape == shape[::-1] and got.dtype == a.dtype
    np.testing.assert_array_equal(_bits(got), _bits(a.T))


@pytest.mark.parametrize("a", [np.arange(12.0).reshape(3, 4)[:, ::2],
                               np.arange(12, dtype=np.int32).reshape(3, 4),
                               np.arange(24.0).reshape(2, 3, 4)])
def test_transpose_copy_falls_back_to_numpy_elsewhere(a):
    got = transpose_copy(a)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, a.T)
