"""relu's forward kernel (_backward_kernels.relu): np.maximum(x, 0) bit for bit, NaN
payloads included, through its C loop (every length, so every vector tail) and through
NumPy's call for everything the loop does not take."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad_elementwise import _backward_kernels as K


def _values(dtype):
    info = np.finfo(dtype)
    v = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, -1.0, 1e-30, -1e-30,
                  float(info.tiny), -float(info.tiny), float(info.smallest_subnormal),
                  -float(info.smallest_subnormal), float(info.max), -float(info.max)], dtype)
    # a NaN with a payload: maximum passes it through untouched
    payload = np.array([0x7FC0_1234 if dtype == np.float32 else 0x7FF8_0000_0000_1234],
                       np.uint32 if dtype == np.float32 else np.uint64).view(dtype)
    return np.concatenate([v, payload])


def _assert_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_kernel_is_numpys_maximum_bit_for_bit_at_every_length(dtype):
    rng = np.random.default_rng(0)
    base = _values(dtype)
    for n in list(range(1, 70)) + [1000, 4096]:
        x = rng.choice(base, n) if n % 2 else rng.standard_normal(n).astype(dtype)
        _assert_bits(K.relu(x), np.maximum(x, 0))


def test_relu_kernel_on_a_large_array_releasing_the_gil():
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal((300, 257)).astype(dtype)
        x.flat[::97] = -0.0
        _assert_bits(K.relu(x), np.maximum(x, 0))


@pytest.mark.parametrize("x", [
    np.array([-1.5, 0.0, 2.0], np.float16),
    np.array([-3, 0, 4], np.int64),
    np.array([True, False]),
    np.arange(-6.0, 6.0).reshape(3, 4)[:, ::2],          # strided
    np.arange(-6.0, 6.0).reshape(3, 4).T,                # F order
    np.arange(-6.0, 6.0).astype(">f8"),                  # byte-swapped
    np.array(-2.0),                                      # 0-d
    np.array([-1.0 + 2j, 3.0 - 1j]),                     # complex: NumPy's order on it
])
def test_relu_kernel_elsewhere_is_numpys_call(x):
    got, want = K.relu(x), np.maximum(x, 0)
    assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_relu_op_forward_and_gradient():
    x = np.array([-2.0, -0.0, 0.0, 3.0, np.nan], np.float32)
    t = tg.tensor(x, requires_grad=True)
    y = tg.relu(t)
    _assert_bits(y.numpy(), np.maximum(x, 0))
    y.backward(tg.ones_like(y))
    np.testing.assert_array_equal(t.grad.numpy(), [0, 0, 0, 1, 0])
