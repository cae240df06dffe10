"""The C kernels of tapegrad_nn._kernels (batch norm's statistics and backward, max
pooling's argmax, gather and scatter) against independent references: slow obvious
Python loops and float64 NumPy formulas, never the kernels' own output. The ops built on
them are checked against finite differences by the contract kit (tests/test_contract.py)."""

import itertools
import math

import numpy as np
import pytest
import tapegrad as tg
from tapegrad_nn import _kernels as K
from tapegrad_nn import normalization as N
from tapegrad_nn import pooling as P

DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------------------
# Batch norm: references in float64, computed channel by channel
# ---------------------------------------------------------------------------------------

def _ref_moments(x3):
    x = x3.astype(np.float64)
    mean = np.array([x[:, c].mean() for c in range(x.shape[1])])
    m2 = np.array([((x[:, c] - mean[c]) ** 2).sum() for c in range(x.shape[1])])
    return mean, m2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(64, 16, 64), (3, 5, 7), (1, 2, 1), (5, 3, 13)])
def test_channel_moments_and_standardize(dtype, shape):
    x = _rng().standard_normal(shape).astype(dtype) * 3 + 1
    mean, m2 = K.channel_moments(x)
    ref_mean, ref_m2 = _ref_moments(x)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m2, ref_m2, rtol=1e-12, atol=1e-12)
    y, r = K.standardize_channels(x, 1e-5)
    assert y.dtype == dtype and r.dtype == dtype and y.shape == shape and r.shape == (shape[1],)
    n = shape[0] * shape[2]
    ref_r = 1 / np.sqrt(ref_m2 / n + 1e-5)
    ref_y = (x.astype(np.float64) - ref_mean[:, None]) * ref_r[:, None]
    np.testing.assert_allclose(r, ref_r, **TOL[dtype])
    np.testing.assert_allclose(y, ref_y, rtol=TOL[dtype]["rtol"], atol=10 * TOL[dtype]["atol"])


def test_variance_is_two_pass_for_a_large_mean():
    # E[x^2] - E[x]^2 in float32 would lose every digit here (mean 1e4, std 1e-2).
    x = (1e4 + 1e-2 * _rng(1).standard_normal((32, 4, 50))).astype(np.float32)
    _, m2 = K.channel_moments(x)
    _, ref_m2 = _ref_moments(x)
    np.testing.assert_allclose(m2, ref_m2, rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("centred", [True, False])
def test_scaled_backward_channels(dtype, centred):
    rng = _rng(2)
    g = rng.standard_normal((6, 3, 10)).astype(dtype)
    y = rng.standard_normal((6, 3, 10)).astype(dtype)
    r = rng.uniform(0.5, 2, 3).astype(dtype)
    out = K.scaled_backward_channels(g, y, r, centred)
    assert out.dtype == dtype
    g64, y64 = g.astype(np.float64), y.astype(np.float64)
    ref = np.empty_like(g64)
    for c in range(3):
        gc, yc = g64[:, c], y64[:, c]
        ref[:, c] = r[c] * (gc - (gc.mean() if centred else 0) - yc * (gc * yc).mean())
    np.testing.assert_allclose(out, ref, rtol=TOL[dtype]["rtol"], atol=10 * TOL[dtype]["atol"])


@pytest.mark.parametrize("dtype", DTYPES)
def test_channel_affine_dot_sum(dtype):
    rng = _rng(3)
    a = rng.standard_normal((4, 5, 9)).astype(dtype)
    b = rng.standard_normal((4, 5, 9)).astype(dtype)
    w = rng.standard_normal(5).astype(dtype)
    bias = rng.standard_normal(5).astype(dtype)
    out = K.channel_affine(a, w, bias)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, a.astype(np.float64) * w[:, None] + bias[:, None],
                               **TOL[dtype])
    dot, total = K.channel_dot(a, b), K.channel_sum(a)
    assert dot.dtype == dtype and total.dtype == dtype
    ref_dot = [sum(float(a[n, c, l]) * float(b[n, c, l]) for n in range(4) for l in range(9))
               for c in range(5)]
    ref_sum = [sum(float(a[n, c, l]) for n in range(4) for l in range(9)) for c in range(5)]
    np.testing.assert_allclose(dot, ref_dot, **TOL[dtype])
    np.testing.assert_allclose(total, ref_sum, **TOL[dtype])


def test_channel_kernels_refuse_mismatched_shapes():
    a = np.zeros((2, 3, 4))
    with pytest.raises(ValueError):
        K.channel_dot(a, np.zeros((2, 3, 5)))
    with pytest.raises(ValueError):
        K.channel_affine(a, np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError):
        K.scaled_backward_channels(a, a, np.ones(2), True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_norm_training_matches_formula(dtype):
    """F.batch_norm in training (C path) and its gradients against the float64 formula and
    the running-statistics update, computed here from first principles."""
    rng = _rng(4)
    x_np = rng.standard_normal((8, 3, 5, 5)).astype(dtype) * 2 + 0.5
    w_np, b_np = rng.uniform(0.5, 1.5, 3).astype(dtype), rng.standard_normal(3).astype(dtype)
    g_np = rng.standard_normal(x_np.shape).astype(dtype)
    x = tg.tensor(x_np, requires_grad=True)
    w, b = tg.tensor(w_np, requires_grad=True), tg.tensor(b_np, requires_grad=True)
    rm, rv = tg.zeros(3, dtype), tg.ones(3, dtype)
    y = tg.nn.functional.batch_norm(x, rm, rv, w, b, training=True, momentum=0.25)
    assert y.dtype == dtype
    (y * tg.tensor(g_np)).sum().backward()

    x64, g64 = x_np.astype(np.float64), g_np.astype(np.float64)
    n = 8 * 25
    mean = x64.mean(axis=(0, 2, 3))
    var = x64.var(axis=(0, 2, 3))
    r = 1 / np.sqrt(var + 1e-5)
    yhat = (x64 - mean[:, None, None]) * r[:, None, None]
    ref_y = yhat * w_np[:, None, None] + b_np[:, None, None]
    gy = g64 * w_np[:, None, None]
    ref_gx = r[:, None, None] * (gy - gy.mean(axis=(0, 2, 3))[:, None, None]
                                 - yhat * (gy * yhat).mean(axis=(0, 2, 3))[:, None, None])
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(y.numpy(), ref_y, **tol)
    np.testing.assert_allclose(x.grad.numpy(), ref_gx, **tol)
    np.testing.assert_allclose(w.grad.numpy(), (g64 * yhat).sum(axis=(0, 2, 3)), **tol)
    np.testing.assert_allclose(b.grad.numpy(), g64.sum(axis=(0, 2, 3)), **tol)
    np.testing.assert_allclose(rm.numpy(), 0.25 * mean, **tol)
    np.testing.assert_allclose(rv.numpy(), 0.75 + 0.25 * var * n / (n - 1), **tol)


def test_standardize_byte_swapped_input_takes_the_numpy_path():
    x = _rng(5).standard_normal((4, 3, 6))
    y_native, r_native = N._standardize_kernel(x, (0, 2), 1e-5)
    y_swapped, r_swapped = N._standardize_kernel(x.astype(">f8"), (0, 2), 1e-5)
    np.testing.assert_allclose(y_swapped, y_native, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r_swapped, r_native, rtol=1e-12)


# ---------------------------------------------------------------------------------------
# Max pooling: the reference is a loop over every window
# ---------------------------------------------------------------------------------------

def _ref_pool_indices(x, k, s, pads, d, out):
    """(N, C, *out) flat per-plane indices: the first maximum in row-major window order,
    the first NaN if any, entries of the padding skipped."""
    nd = len(k)
    size = x.shape[2:]
    plane = [math.prod(size[a + 1:]) for a in range(nd)]
    idx = np.empty(x.shape[:2] + tuple(out), np.int64)
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*map(range, out)):
            best, best_v = None, None
            for off in itertools.product(*map(range, k)):
                pos = [oo * ss - lo + kk * dd for oo, ss, (lo, _), kk, dd in zip(o, s, pads, off, d)]
                if any(p < 0 or p >= sz for p, sz in zip(pos, size)):
                    continue
                v = x[(n, c) + tuple(pos)]
                if best is None or (not math.isnan(best_v) and (math.isnan(v) or v > best_v)):
                    best, best_v = sum(p * st for p, st in zip(pos, plane)), v
            idx[(n, c) + o] = best
    return idx


POOL_CASES = [  # kernel, stride, padding, dilation, ceil_mode, spatial size
    ((2, 2), None, 0, 1, False, (8, 8)),
    ((2, 2), None, 0, 1, False, (4, 4)),
    ((3, 3), 2, 1, 1, False, (7, 6)),
    ((3, 3), 1, 0, 1, False, (5, 5)),
    ((2, 3), (1, 2), (1, 1), (2, 1), False, (6, 7)),
    ((2, 2), None, 0, 1, True, (5, 7)),
    ((3, 2), 2, (1, 0), 1, True, (6, 5)),
    ((4, 4), 3, 2, 1, False, (9, 9)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool2d_indices_against_window_loop(dtype, case):
    k, s, p, d, ceil, size = case
    rng = _rng(6)
    # small integers: many ties, so "the first maximum" is exercised
    x = rng.integers(-3, 4, (2, 3) + size).astype(dtype)
    x[0, 0].flat[::5] = np.nan
    x[1, 2] = -np.inf
    kk, ss, pads, dd, out = P._pool_geometry("t", 2, size, k, s, p, d, ceil)
    got = P._max_pool_indices_kernel(x, ksize=kk, stride=ss, padding=pads, dilation=dd)
    np.testing.assert_array_equal(got, _ref_pool_indices(x, kk, ss, pads, dd, out))
    y = tg.max_pool2d(tg.tensor(x), k, s, p, d, ceil)
    np.testing.assert_array_equal(
        y.numpy(), np.take_along_axis(x.reshape(2, 3, -1), got.reshape(2, 3, -1), 2).reshape(y.shape))


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pool1d_indices_against_window_loop(dtype):
    x = _rng(7).integers(-2, 3, (3, 2, 11)).astype(dtype)
    x[0, 1, 4] = np.nan
    for k, s, p, d, ceil in [(2, None, 0, 1, False), (3, 2, 1, 2, False), (2, 3, 1, 1, True)]:
        kk, ss, pads, dd, out = P._pool_geometry("t", 1, (11,), k, s, p, d, ceil)
        got = P._max_pool_indices_kernel(x, ksize=kk, stride=ss, padding=pads, dilation=dd)
        np.testing.assert_array_equal(got, _ref_pool_indices(x, kk, ss, pads, dd, out))


def test_max_pool_window_outside_input_raises():
    # Called directly (F.max_pool2d's checks never build this): no window entry in the input.
    x = np.zeros((1, 1, 2, 2), np.float32)
    with pytest.raises(ValueError, match="no entry inside the input"):
        P._max_pool_indices_kernel(x, ksize=(1, 1), stride=(1, 1), padding=((3, 0), (0, 0)),
                                   dilation=(1, 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_pool_gather_scatter_against_numpy_indexing(dtype):
    rng = _rng(8)
    x = rng.standard_normal((2, 3, 5, 4)).astype(dtype)
    idx = rng.integers(0, 20, (2, 3, 3, 3))           # repeats: the scatter must sum
    gathered = P._pool_gather_kernel(x, idx, overlap=True)
    ref = np.take_along_axis(x.reshape(2, 3, 20), idx.reshape(2, 3, 9), 2).reshape(idx.shape)
    np.testing.assert_array_equal(gathered, ref)
    g = rng.standard_normal(idx.shape).astype(dtype)
    scattered = P._pool_scatter_kernel(g, idx, size=(5, 4), overlap=True)
    assert scattered.dtype == dtype
    ref = np.zeros((2, 3, 20))
    for n, c in itertools.product(range(2), range(3)):
        np.add.at(ref[n, c], idx[n, c].reshape(-1), g[n, c].reshape(-1).astype(np.float64))
    np.testing.assert_allclose(scattered.reshape(2, 3, 20), ref, **TOL[dtype])


def test_pool_gather_scatter_refuse_out_of_range_indices():
    x = np.zeros((1, 2, 2, 2))
    for bad in (4, -1):
        idx = np.zeros((1, 2, 1, 1), np.int64)
        idx[0, 1] = bad
        with pytest.raises(IndexError):
            K.pool_gather(x.reshape(2, 4), idx.reshape(2, 1))
        with pytest.raises(IndexError):
            K.pool_scatter(np.ones((2, 1)), idx.reshape(2, 1), 4)
