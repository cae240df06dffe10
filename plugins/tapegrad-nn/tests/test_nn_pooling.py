"""Pooling, unfold/fold, pixel (un)shuffle and interpolate against slow loop references
in NumPy; gradients (the argmax convention on ties, the unfold/fold adjoint identity,
finite differences on argument forms the contract kit's samples do not cover), dtypes,
errors, and the layers of tapegrad_nn.pooling_layers."""

import itertools
import math

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import run_doctests
from tapegrad_nn import pooling, pooling_layers

RNG = np.random.default_rng(150)


def distinct(*shape):
    return RNG.permutation(math.prod(shape)).reshape(shape) * 0.1 - 1.0


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def pool_len(n, k, s, p, d, ceil):
    """PyTorch's documented output length (MaxPool2d / AvgPool2d docs)."""
    m = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (m - 1) * s >= n + p:
        m -= 1
    return m


# ---------------------------------------------------------------------------------------
# Slow references
# ---------------------------------------------------------------------------------------

def ref_max_pool2d(x, k, s=None, p=0, d=1, ceil=False):
    k, p, d = pair(k), pair(p), pair(d)
    s = k if s is None else pair(s)
    n, c, h, w = x.shape
    oh, ow = (pool_len(h, k[0], s[0], p[0], d[0], ceil), pool_len(w, k[1], s[1], p[1], d[1], ceil))
    y, idx = np.empty((n, c, oh, ow)), np.empty((n, c, oh, ow), np.int64)
    for b, ch, i, j in itertools.product(range(n), range(c), range(oh), range(ow)):
        best, at = -np.inf, -1
        for a, e in itertools.product(range(k[0]), range(k[1])):
            r, q = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + e * d[1]
            if 0 <= r < h and 0 <= q < w and x[b, ch, r, q] > best:
                best, at = x[b, ch, r, q], r * w + q
        y[b, ch, i, j], idx[b, ch, i, j] = best, at
    return y, idx


def ref_avg_pool2d(x, k, s=None, p=0, ceil=False, include=True, div=None):
    k, p = pair(k), pair(p)
    s = k if s is None else pair(s)
    n, c, h, w = x.shape
    oh, ow = pool_len(h, k[0], s[0], p[0], 1, ceil), pool_len(w, k[1], s[1], p[1], 1, ceil)
    y = np.empty((n, c, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
        h1, w1 = min(h0 + k[0], h + p[0]), min(w0 + k[1], w + p[1])
        size = (h1 - h0) * (w1 - w0)
        h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
        total = x[:, :, h0:h1, w0:w1].sum(axis=(2, 3))
        y[:, :, i, j] = total / (div or (size if include else (h1 - h0) * (w1 - w0)))
    return y


def ref_adaptive(x, out, reduce):
    n, c, h, w = x.shape
    y = np.empty((n, c) + out)
    for i, j in itertools.product(range(out[0]), range(out[1])):
        h0, h1 = math.floor(i * h / out[0]), math.ceil((i + 1) * h / out[0])
        w0, w1 = math.floor(j * w / out[1]), math.ceil((j + 1) * w / out[1])
        y[:, :, i, j] = reduce(x[:, :, h0:h1, w0:w1], axis=(2, 3))
    return y


def ref_unfold(x, k, d=1, p=0, s=1):
    k, d, p, s = pair(k), pair(d), pair(p), pair(s)
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    cols = np.empty((n, c * k[0] * k[1], oh * ow))
    for ch, a, e, i, j in itertools.product(range(c), range(k[0]), range(k[1]), range(oh),
                                            range(ow)):
        r, q = i * s[0] + a * d[0], j * s[1] + e * d[1]
        cols[:, (ch * k[0] + a) * k[1] + e, i * ow + j] = xp[:, ch, r, q]
    return cols


# ---------------------------------------------------------------------------------------
# Values against the references
# ---------------------------------------------------------------------------------------

MAX_CASES = [dict(k=2), dict(k=3, s=2, p=1), dict(k=(3, 2), s=(2, 1), p=(1, 0), ceil=True),
             dict(k=2, s=3, d=2, ceil=True), dict(k=3, s=2, p=1, d=2, ceil=True),
             dict(k=(2, 4), s=1, p=(1, 2), d=(2, 1))]


@pytest.mark.parametrize("case", MAX_CASES)
def test_max_pool2d_values_and_indices_equal_the_loop_reference(case):
    x = distinct(2, 3, 7, 8)
    y, idx = tg.max_pool2d(x, case["k"], case.get("s"), case.get("p", 0), case.get("d", 1),
                           ceil_mode=case.get("ceil", False), return_indices=True)
    ry, ridx = ref_max_pool2d(x, case["k"], case.get("s"), case.get("p", 0), case.get("d", 1),
                              case.get("ceil", False))
    np.testing.assert_array_equal(y.numpy(), ry)
    np.testing.assert_array_equal(idx.numpy(), ridx)
    assert idx.dtype == np.int64


@pytest.mark.parametrize("case", MAX_CASES[:4])
def test_max_pool1d_is_max_pool2d_on_a_one_row_plane(case):
    x = distinct(2, 3, 9)
    args = [pair(v)[1] if not isinstance(v, bool) else v for v in
            (case["k"], case.get("s") or case["k"], case.get("p", 0), case.get("d", 1))]
    y, idx = tg.max_pool1d(x, *args, ceil_mode=case.get("ceil", False), return_indices=True)
    ry, ridx = ref_max_pool2d(x[:, :, None], (1, args[0]), (1, args[1]), (0, args[2]),
                              (1, args[3]), case.get("ceil", False))
    np.testing.assert_array_equal(y.numpy(), ry[:, :, 0])
    np.testing.assert_array_equal(idx.numpy(), ridx[:, :, 0])


def test_ceil_mode_drops_a_window_that_would_start_in_the_right_padding():
    # 5 + 2*1 padded, kernel 2, stride 2: ceil gives 4 windows, but the 4th starts at
    # position 6 (in the right padding), so PyTorch keeps 3.
    assert tg.max_pool1d(distinct(1, 1, 5), 2, 2, 1, ceil_mode=True).shape == (1, 1, 3)
    assert tg.max_pool1d(distinct(1, 1, 5), 2, 2, 0, ceil_mode=True).shape == (1, 1, 3)
    assert tg.max_pool1d(distinct(1, 1, 5), 2, 2, 0).shape == (1, 1, 2)


def test_max_pool_gradient_goes_to_the_first_maximum_on_ties():
    x = tg.tensor([[[1., 4., 4., 2., 2., 2.]]], requires_grad=True)
    y = tg.max_pool1d(x, 3, 1)
    np.testing.assert_array_equal(y.numpy(), [[[4, 4, 4, 2]]])
    # windows [1 4 4] [4 4 2] [4 2 2] [2 2 2]: each gives its gradient to its first maximum
    y.backward(tg.tensor([[[1., 10., 100., 1000.]]]))
    np.testing.assert_array_equal(x.grad.numpy(), [[[0, 11, 100, 1000, 0, 0]]])


def test_max_pool_propagates_nan_as_pytorch():
    x = np.array([[[1., np.nan, 3., 0.]]])
    np.testing.assert_array_equal(np.isnan(tg.max_pool1d(x, 2).numpy()), [[[True, False]]])


def test_padding_never_wins_a_window_whose_maximum_is_minus_inf():
    # PyTorch: the argmax of an all -inf window is its first entry inside the input, never
    # a position of the (-inf) padding before it; its gradient goes there.
    x = tg.tensor(np.full((1, 1, 3, 3), -np.inf), requires_grad=True)
    y, idx = tg.max_pool2d(x, 3, 2, 1, return_indices=True)
    # windows start at rows/cols -1 and 1: their first in-input entries are (0, 0), (0, 1),
    # (1, 0), (1, 1) in flat index h * 3 + w
    np.testing.assert_array_equal(idx.numpy(), [[[[0, 1], [3, 4]]]])
    assert np.all(y.numpy() == -np.inf)
    y.backward(tg.tensor([[[[1., 2.], [3., 4.]]]]))
    np.testing.assert_array_equal(x.grad.numpy(), [[[[1, 2, 0], [3, 4, 0], [0, 0, 0]]]])


@pytest.mark.parametrize("k,s", [(2, None), (3, 1)])
def test_max_pool_of_an_empty_batch_is_empty_with_an_empty_gradient(k, s):
    x = tg.tensor(np.zeros((0, 2, 6, 6)), requires_grad=True)
    y = tg.max_pool2d(x, k, s)
    assert y.shape == (0, 2) + ref_max_pool2d(np.zeros((1, 2, 6, 6)), k, s)[0].shape[2:]
    y.sum().backward()
    assert x.grad.shape == x.shape


@pytest.mark.parametrize("k,s,p,d,overlap", [(2, None, 0, 1, False), ((2, 3), (3, 3), 1, 1, False),
                                             (3, 1, 1, 1, True), (2, 2, 0, 2, True)])
def test_max_pool_backward_sums_where_windows_share_an_entry(k, s, p, d, overlap):
    # The gradient of each input entry is the sum of g over the windows whose argmax it is
    # (a loop over windows); disjoint windows take the write path, others the summing one.
    x = np.floor(RNG.uniform(0, 4, (2, 2, 7, 8)))      # ties and shared maxima
    xt = tg.tensor(x, requires_grad=True)
    y, idx = tg.max_pool2d(xt, k, s, p, d, return_indices=True)
    g = RNG.standard_normal(y.shape)
    y.backward(tg.tensor(g))
    expected = np.zeros_like(x).reshape(2, 2, -1)
    for b, c, *pos in itertools.product(*map(range, y.shape)):
        expected[b, c, idx.numpy()[(b, c, *pos)]] += g[(b, c, *pos)]
    np.testing.assert_allclose(xt.grad.numpy(), expected.reshape(x.shape), rtol=1e-14)
    stride = pair(s if s is not None else k)
    assert overlap == any(st < dd * (kk - 1) + 1 for kk, st, dd in zip(pair(k), stride, pair(d)))


@pytest.mark.parametrize("case", [dict(k=2), dict(k=3, s=2, p=1),
                                  dict(k=3, s=2, p=1, include=False),
                                  dict(k=(3, 2), s=(2, 3), p=(1, 1), ceil=True),
                                  dict(k=(3, 2), s=(2, 3), p=(1, 1), ceil=True, include=False),
                                  dict(k=3, s=2, ceil=True, div=5)])
def test_avg_pool2d_equals_the_loop_reference(case):
    x = RNG.standard_normal((2, 3, 7, 8))
    y = tg.avg_pool2d(x, case["k"], case.get("s"), case.get("p", 0), case.get("ceil", False),
                      case.get("include", True), case.get("div"))
    ref = ref_avg_pool2d(x, case["k"], case.get("s"), case.get("p", 0), case.get("ceil", False),
                         case.get("include", True), case.get("div"))
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-13, atol=1e-14)


def test_avg_pool1d_is_avg_pool2d_on_a_one_row_plane():
    x = RNG.standard_normal((2, 3, 9))
    y = tg.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)
    ref = ref_avg_pool2d(x[:, :, None], (1, 3), (1, 2), (0, 1), True, False)[:, :, 0]
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-13)


@pytest.mark.parametrize("size,out", [((7, 5), (3, 2)), ((5, 7), (5, 7)), ((3, 4), (5, 6)),
                                      ((6, 6), (1, 1))])
def test_adaptive_pools_equal_the_loop_reference(size, out):
    x = distinct(2, 3, *size)
    np.testing.assert_allclose(tg.adaptive_avg_pool2d(x, out).numpy(),
                               ref_adaptive(x, out, np.mean), rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(tg.adaptive_max_pool2d(x, out).numpy(),
                                  ref_adaptive(x, out, np.max))
    np.testing.assert_allclose(tg.adaptive_avg_pool1d(x[:, :, 0], out[1]).numpy(),
                               ref_adaptive(x[:, :, :1], (1, out[1]), np.mean)[:, :, 0], rtol=1e-13)


def test_adaptive_output_size_none_keeps_that_axis_and_indices_are_flat():
    x = distinct(1, 2, 5, 4)
    assert tg.adaptive_avg_pool2d(x, (None, 2)).shape == (1, 2, 5, 2)
    y, idx = tg.adaptive_max_pool2d(x, (2, None), return_indices=True)
    np.testing.assert_array_equal(np.take_along_axis(x.reshape(1, 2, -1),
                                                     idx.numpy().reshape(1, 2, -1),
                                                     2).reshape(y.shape), y.numpy())


@pytest.mark.parametrize("k,d,p,s", [(2, 1, 0, 1), (3, 2, 1, 2), ((2, 3), (1, 2), (0, 1), (2, 1))])
def test_unfold_equals_the_loop_reference_and_fold_is_its_adjoint(k, d, p, s):
    x = RNG.standard_normal((2, 3, 7, 6))
    cols = tg.unfold(x, k, d, p, s)
    np.testing.assert_array_equal(cols.numpy(), ref_unfold(x, k, d, p, s))
    c = RNG.standard_normal(cols.shape)
    lhs = float((tg.fold(c, (7, 6), k, d, p, s).numpy() * x).sum())
    np.testing.assert_allclose(lhs, float((c * cols.numpy()).sum()), rtol=1e-12)


def test_fold_of_unfold_counts_the_windows_covering_each_pixel():
    ones = np.ones((1, 1, 3, 3))
    np.testing.assert_array_equal(tg.fold(tg.unfold(ones, 2), (3, 3), 2).numpy()[0, 0],
                                  [[1, 2, 1], [2, 4, 2], [1, 2, 1]])


def test_pixel_shuffle_equals_the_index_formula_and_unshuffle_inverts_it():
    r, x = 3, RNG.standard_normal((2, 2 * 9, 3, 4))
    y = tg.pixel_shuffle(x, r).numpy()
    for c, i, j, h, w in itertools.product(range(2), range(r), range(r), range(3), range(4)):
        assert y[:, c, h * r + i, w * r + j].tolist() == x[:, c * r * r + i * r + j, h, w].tolist()
    np.testing.assert_array_equal(tg.pixel_unshuffle(y, r).numpy(), x)


def test_interpolate_nearest_equals_the_index_formula():
    x = RNG.standard_normal((1, 2, 4, 5))
    y = tg.interpolate(x, size=(7, 3)).numpy()
    for i, j in itertools.product(range(7), range(3)):
        src = x[:, :, math.floor(i * 4 / 7), math.floor(j * 5 / 3)]
        np.testing.assert_array_equal(y[:, :, i, j], src)
    np.testing.assert_array_equal(tg.interpolate(x, scale_factor=2).numpy(),
                                  x.repeat(2, axis=2).repeat(2, axis=3))


def test_bilinear_reproduces_an_affine_function_with_align_corners():
    h, w = np.meshgrid(np.arange(4.0), np.arange(5.0), indexing="ij")
    x = (2 * h - 3 * w + 1)[None, None]
    y = tg.interpolate(x, size=(7, 9), mode="bilinear", align_corners=True).numpy()[0, 0]
    hh, ww = np.meshgrid(np.linspace(0, 3, 7), np.linspace(0, 4, 9), indexing="ij")
    np.testing.assert_allclose(y, 2 * hh - 3 * ww + 1, atol=1e-12)


def test_bilinear_without_align_corners_equals_the_half_pixel_formula():
    x = RNG.standard_normal((1, 1, 1, 3))
    y = tg.interpolate(x, size=(1, 6), mode="bilinear").numpy()[0, 0, 0]
    ref = []
    for j in range(6):
        src = max((j + 0.5) * 0.5 - 0.5, 0.0)
        i0 = int(math.floor(src))
        i1, lam = min(i0 + 1, 2), src - i0
        ref.append((1 - lam) * x[0, 0, 0, i0] + lam * x[0, 0, 0, i1])
    np.testing.assert_allclose(y, ref, rtol=1e-13)
    np.testing.assert_array_equal(tg.upsample(x, size=(1, 6), mode="bilinear").numpy()[0, 0, 0], y)


# ---------------------------------------------------------------------------------------
# Gradients (finite differences) on argument forms beyond the kit's samples; dtypes
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn,args,kw", [
    ("max_pool2d", (3, 2, 1, 2), dict(ceil_mode=True)),
    ("max_pool2d", (2,), {}),                             # disjoint windows: the write path
    ("max_pool2d", ((2, 3), 1, (1, 0)), {}),              # overlapping: the summing path
    ("avg_pool2d", ((3, 2), (2, 3), (1, 1), True, False), {}),
    ("adaptive_max_pool2d", ((3, 2),), {}),
    ("interpolate", (), dict(size=(3, 9), mode="bilinear", align_corners=True)),
    ("interpolate", (), dict(scale_factor=0.6, mode="bilinear")),
    ("fold", ((3, 6), 1, 1, 0, 1), {}),
])
def test_gradients_and_second_derivatives_match_finite_differences(fn, args, kw):
    x = distinct(1, 2, 3, 6) if fn != "fold" else RNG.standard_normal((1, 2, 18))
    f = lambda t: getattr(tg, fn)(t, *args, **kw) ** 2  # noqa: E731
    assert tg.gradcheck(f, (tg.tensor(x, requires_grad=True),))
    assert tg.gradgradcheck(f, (tg.tensor(x, requires_grad=True),))


@pytest.mark.parametrize("call", [
    lambda x: tg.max_pool2d(x, 2), lambda x: tg.avg_pool2d(x, 3, 1, 1),
    lambda x: tg.adaptive_avg_pool2d(x, 3), lambda x: tg.adaptive_max_pool2d(x, 3),
    lambda x: tg.unfold(x, 2), lambda x: tg.pixel_unshuffle(x, 2),
    lambda x: tg.interpolate(x, scale_factor=1.5, mode="bilinear"),
    lambda x: tg.interpolate(x, size=5),
])
def test_float32_stays_float32_in_value_and_gradient(call):
    x = tg.tensor(RNG.standard_normal((1, 2, 4, 6)).astype(np.float32), requires_grad=True)
    y = call(x)
    assert y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32


def test_unbatched_inputs_give_unbatched_outputs():
    x = distinct(3, 6, 6)
    assert tg.max_pool2d(x, 2).shape == (3, 3, 3)
    assert tg.max_pool2d(x, 2, return_indices=True)[1].shape == (3, 3, 3)
    assert tg.avg_pool1d(x[0], 2).shape == (6, 3)
    assert tg.adaptive_avg_pool2d(x, 2).shape == (3, 2, 2)
    assert tg.unfold(x, 2).shape == (12, 25)
    assert tg.fold(tg.unfold(x, 2), 6, 2).shape == (3, 6, 6)


# ---------------------------------------------------------------------------------------
# Errors name the op and the shapes
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("call,exc,words", [
    (lambda: tg.max_pool2d(np.ones((2, 3)), 2), ValueError, ["max_pool2d", "(2, 3)"]),
    (lambda: tg.max_pool2d(np.ones((1, 1, 4, 4), np.int64), 2), TypeError, ["max_pool2d", "int64"]),
    (lambda: tg.max_pool2d(np.ones((1, 1, 4, 4)), 2, padding=2), ValueError,
     ["max_pool2d", "half"]),
    (lambda: tg.max_pool2d(np.ones((1, 1, 2, 2)), 3), ValueError, ["max_pool2d", "(2, 2)"]),
    (lambda: tg.max_pool1d(np.ones((1, 1, 4)), 0), ValueError, ["max_pool1d", "kernel_size"]),
    (lambda: tg.max_pool1d(np.ones((1, 1, 4)), (2, 2)), ValueError, ["max_pool1d", "kernel_size"]),
    (lambda: tg.avg_pool2d(np.ones((1, 1, 4, 4)), 2, stride=0), ValueError,
     ["avg_pool2d", "stride"]),
    (lambda: tg.avg_pool2d(np.ones((1, 1, 4, 4)), 2, divisor_override=0), ValueError,
     ["avg_pool2d", "divisor_override"]),
    (lambda: tg.adaptive_avg_pool2d(np.ones((1, 1, 4, 4)), (2, 0)), ValueError,
     ["adaptive_avg_pool2d", "output_size"]),
    (lambda: tg.adaptive_max_pool2d(np.ones((4, 4)), 2), ValueError,
     ["adaptive_max_pool2d", "(4, 4)"]),
    (lambda: tg.unfold(np.ones((1, 1, 2, 2)), 3), ValueError, ["unfold", "(1, 1, 2, 2)"]),
    (lambda: tg.fold(np.ones((1, 5, 9)), (4, 4), 2), ValueError,
     ["fold", "(1, 5, 9)", "divisible"]),
    (lambda: tg.fold(np.ones((1, 4, 8)), (4, 4), 2), ValueError, ["fold", "(1, 4, 8)", "9 blocks"]),
    (lambda: tg.pixel_shuffle(np.ones((1, 6, 2, 2)), 2), ValueError,
     ["pixel_shuffle", "(1, 6, 2, 2)"]),
    (lambda: tg.pixel_unshuffle(np.ones((1, 1, 3, 4)), 2), ValueError,
     ["pixel_unshuffle", "(1, 1, 3, 4)"]),
    (lambda: tg.interpolate(np.ones((1, 1, 2, 2)), size=3, mode="bicubic"), ValueError,
     ["interpolate", "bicubic"]),
    (lambda: tg.interpolate(np.ones((1, 1, 2)), size=3, mode="bilinear"), ValueError,
     ["interpolate", "(1, 1, 2)"]),
    (lambda: tg.interpolate(np.ones((1, 1, 2, 2)), size=3, align_corners=True), ValueError,
     ["interpolate", "align_corners"]),
    (lambda: tg.interpolate(np.ones((1, 1, 2, 2))), ValueError, ["interpolate", "size"]),
    (lambda: tg.interpolate(np.ones((1, 1, 2, 2)), size=3, scale_factor=2), ValueError,
     ["interpolate", "exactly one"]),
    (lambda: tg.interpolate(np.ones((1, 1, 2, 2)), scale_factor=0.1), ValueError,
     ["interpolate", "empty"]),
    (lambda: tg.interpolate(np.ones((1, 1, 2, 2)), size=3, antialias=True), ValueError,
     ["interpolate", "antialias"]),
    (lambda: tg.interpolate(np.ones((2, 2)), size=3), ValueError, ["interpolate", "(2, 2)"]),
])
def test_bad_inputs_raise_errors_naming_the_op_and_shapes(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


# ---------------------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------------------

def test_layers_forward_their_function_with_torch_argument_names():
    x = distinct(2, 4, 8, 6)
    nn = tg.nn
    cases = [
        (nn.MaxPool2d(3, 2, 1, ceil_mode=True), tg.max_pool2d(x, 3, 2, 1, ceil_mode=True)),
        (nn.MaxPool1d(2, dilation=2), tg.max_pool1d(x[:, :, 0], 2, dilation=2)),
        (nn.AvgPool2d(2, count_include_pad=False, padding=1),
         tg.avg_pool2d(x, 2, padding=1, count_include_pad=False)),
        (nn.AvgPool1d(3, 1, 1), tg.avg_pool1d(x[:, :, 0], 3, 1, 1)),
        (nn.AdaptiveAvgPool2d((2, None)), tg.adaptive_avg_pool2d(x, (2, None))),
        (nn.AdaptiveAvgPool1d(3), tg.adaptive_avg_pool1d(x[:, :, 0], 3)),
        (nn.AdaptiveMaxPool2d(3), tg.adaptive_max_pool2d(x, 3)),
        (nn.Unfold(2, stride=2), tg.unfold(x, 2, stride=2)),
        (nn.PixelUnshuffle(2), tg.pixel_unshuffle(x, 2)),
        (nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True),
         tg.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)),
    ]
    for layer, ref in cases:
        inp = x[:, :, 0] if type(layer) in (nn.MaxPool1d, nn.AvgPool1d, nn.AdaptiveAvgPool1d) else x
        np.testing.assert_array_equal(layer(inp).numpy(), ref.numpy())
        assert list(layer.parameters()) == []
    cols = tg.unfold(x, 2)
    np.testing.assert_array_equal(nn.Fold((8, 6), 2)(cols).numpy(),
                                  tg.fold(cols, (8, 6), 2).numpy())
    np.testing.assert_array_equal(nn.PixelShuffle(2)(x).numpy(), tg.pixel_shuffle(x, 2).numpy())
    y, idx = nn.MaxPool2d(2, return_indices=True)(x)
    assert idx.shape == y.shape == (2, 4, 4, 3)
    assert nn.MaxPool2d(2).stride == 2
    assert repr(nn.MaxPool2d(2)) == ("MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, "
                                     "ceil_mode=False)")


def test_layer_gradients_flow_through_a_small_cnn():
    net = tg.nn.Sequential(tg.nn.Conv2d(1, 2, 3, padding=1), tg.nn.MaxPool2d(2),
                           tg.nn.AvgPool2d(2), tg.nn.Flatten(), tg.nn.Unflatten(1, (2, -1)))
    x = distinct(3, 1, 8, 8)
    y = net(x)
    assert y.shape == (3, 2, 4)
    y.sum().backward()
    assert net[0].weight.grad.shape == (2, 1, 3, 3)


def test_unflatten_splits_an_axis_and_checks_sizes():
    assert tg.nn.Unflatten(-1, (2, 3))(tg.zeros((4, 6))).shape == (4, 2, 3)
    assert tg.nn.Unflatten(0, (-1, 2))(tg.zeros((4, 6))).shape == (2, 2, 6)
    with pytest.raises(ValueError, match=r"Unflatten.*\(4, 6\)"):
        tg.nn.Unflatten(1, (4, 2))(tg.zeros((4, 6)))
    with pytest.raises(ValueError, match="Unflatten"):
        tg.nn.Unflatten(1, (-1, -1))


def test_functional_namespace_and_doctests():
    F = tg.nn.functional
    for name in pooling.NAMES:
        assert getattr(F, name) is getattr(tg, name) or getattr(F, name) is getattr(pooling, name)
    run_doctests(pooling)
    run_doctests(pooling_layers)


def test_a_layer_given_a_bad_input_names_the_layer_and_the_shape():
    with pytest.raises(ValueError, match=r"^MaxPool2d\(kernel_size=2, .*\): max_pool2d: expected a "
                                         r"4-d .* got input of shape \(2, 3\)"):
        tg.nn.MaxPool2d(2)(tg.ones((2, 3)))
    with pytest.raises(ValueError, match=r"^PixelShuffle\(upscale_factor=2\): .*\(1, 3, 4, 4\)"):
        tg.nn.PixelShuffle(2)(tg.ones((1, 3, 4, 4)))
