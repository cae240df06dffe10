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


# (the last three are above the loop's size limit: NumPy's own call, by construction)
SHAPES = [(1, 2), (2, 2), (3, 5), (32, 128), (32, 10), (7, 1, 3), (5, 4, 3), (1000, 2),
          (3, 33), (257, 9), (64, 256), (64, 1025), (2, 40000), (256, 2048)]


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


def test_sum_over_added_axis_declines_what_is_not_a_bias_sum():
    from tapegrad._array_kernels import sum_over_added_axis
    from tapegrad._core_plugin import sum_to_shape_kernel
    a = np.ones((4, 3))
    for shape in ((1, 3), (4,), [3], (np.int64(3),), (2 ** 70,), (-3,), ()):
        assert sum_over_added_axis(a, shape) is None
    with pytest.raises(ValueError, match="cannot sum shape"):
        sum_to_shape_kernel(a, (2 ** 70,))
    np.testing.assert_array_equal(sum_to_shape_kernel(a, [3]), [4.0, 4.0, 4.0])


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


# matmul: a small transposed float32 y through a C copy (Note: [matmul through a
# transposed copy] in _array_kernels.pyx)
from tapegrad._array_kernels import matmul  # noqa: E402

COPIED = [(32, 128, 128), (16, 128, 128), (64, 64, 64), (32, 64, 256), (20, 100, 70)]
NOT_COPIED = [(8, 128, 128), (32, 128, 32), (256, 128, 128), (32, 256, 256), (16, 64, 64)]


def _operands(m, k, n, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed + m + k + n)
    return rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((n, k)).astype(dtype)


@pytest.mark.parametrize("m,k,n", COPIED)
def test_matmul_of_a_small_transposed_float32_is_the_product_of_its_c_copy(m, k, n):
    g, w = _operands(m, k, n)
    got = matmul(g, w.T)
    assert got.flags.c_contiguous and got.dtype == np.float32 and got.shape == (m, n)
    np.testing.assert_array_equal(got, np.matmul(g, np.ascontiguousarray(w.T)))
    nt = np.matmul(g, w.T)
    if (m, k, n) != (20, 100, 70):
        # with this NumPy's OpenBLAS, NumPy's own bits for g @ w.T at these shapes (k a
        # multiple of 16): docs/linalg.md's claim (a BLAS that rounds the two layouts
        # differently fails here, and the claim must then go)
        np.testing.assert_array_equal(got, nt)
    # and everywhere within the error bound of a float32 dot product of k terms
    bound = k * np.finfo(np.float32).eps * (np.abs(g).astype(np.float64) @ np.abs(w.T))
    assert (np.abs(got.astype(np.float64) - nt) <= bound).all()
    out = np.empty((m, n), np.float32)
    assert matmul(g, w.T, out=out) is out
    np.testing.assert_array_equal(out, got)


@pytest.mark.parametrize("m,k,n", NOT_COPIED)
def test_matmul_elsewhere_is_numpys_call(m, k, n):
    g, w = _operands(m, k, n)
    np.testing.assert_array_equal(matmul(g, w.T), np.matmul(g, w.T))


@pytest.mark.parametrize("x,y", [
    _operands(32, 128, 128, np.float64),                           # float64: NumPy's call
    (_operands(32, 128, 128)[0], _operands(32, 128, 128)[1].T.astype(np.float64).T),
    (np.ones((3, 32, 64), np.float32), np.ones((128, 64), np.float32).T),   # 3-D
    (np.ones((32, 64), np.float32), np.ones((64, 128), np.float32)),       # y C-ordered
    (np.ones(64, np.float32), np.ones((128, 64), np.float32).T),           # 1-d x
])
def test_matmul_of_other_operands_is_numpys_call(x, y):
    got, want = matmul(x, y), np.matmul(x, y)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_matmul_shape_errors_are_numpys():
    g, w = _operands(32, 128, 128)
    with pytest.raises(ValueError, match="mismatch"):
        matmul(g[:, :100], w.T)
