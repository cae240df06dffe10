"""Pooling, unfold/fold, pixel (un)shuffle and interpolate against
``torch.nn.functional`` over many argument combinations (values, indices and gradients);
runs only under ``-m needs_torch``."""

import itertools

import numpy as np
import pytest
import tapegrad as tg

RNG = np.random.default_rng(151)
pytestmark = pytest.mark.needs_torch


def distinct(*shape):
    return RNG.permutation(int(np.prod(shape))).reshape(shape) * 0.01 - 1.0


def compare(name, x, *args, tg_fn=None, tie_free=True, **kw):
    """Values and input gradients of tg.<name> vs torch's on the same arguments."""
    torch = pytest.importorskip("torch")
    xt = tg.tensor(x, requires_grad=True)
    y = (tg_fn or getattr(tg, name))(xt, *args, **kw)
    yr_in = torch.tensor(x, requires_grad=True)
    yr = getattr(torch.nn.functional, name)(yr_in, *args, **kw)
    if isinstance(y, tuple):
        np.testing.assert_array_equal(y[1].numpy(), yr[1].numpy())
        y, yr = y[0], yr[0]
    assert y.shape == tuple(yr.shape), (y.shape, yr.shape)
    np.testing.assert_allclose(y.numpy(), yr.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = RNG.standard_normal(y.shape)
    y.backward(g)
    yr.backward(torch.tensor(g))
    np.testing.assert_allclose(xt.grad.numpy(), yr_in.grad.numpy(), rtol=1e-12, atol=1e-12)


POOL2 = [dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=c)
         for k, s, p, d, c in itertools.product([2, 3, (3, 2)], [None, 1, 2, (2, 3)], [0, 1],
                                                [1, 2], [False, True])]


@pytest.mark.parametrize("kw", POOL2)
def test_max_pool2d_matches_torch(kw):
    compare("max_pool2d", distinct(2, 3, 9, 8), return_indices=True, **kw)


@pytest.mark.parametrize("kw", [dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=c)
                                for k, s, p, d, c in itertools.product(
                                    [2, 3, 4], [None, 1, 3], [0, 1, 2], [1, 3], [False, True])
                                if p <= k // 2])
@pytest.mark.parametrize("n", [11, 12])
def test_max_pool1d_matches_torch(kw, n):
    compare("max_pool1d", distinct(2, 3, n), return_indices=True, **kw)


def test_max_pool_ties_and_unbatched_match_torch():
    x = np.floor(RNG.uniform(0, 3, (3, 7, 7)))        # many ties
    compare("max_pool2d", x, 3, 2, 1, return_indices=True)
    compare("max_pool1d", x, 2, ceil_mode=True, return_indices=True)


@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, stride=1, padding=1, ceil_mode=True),
                                dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 1), dilation=2)])
def test_max_pool_with_inf_and_nan_matches_torch(kw):
    # -inf entries next to the padding (whose windows' maximum is -inf), and NaNs.
    x = distinct(2, 2, 7, 6)
    x[0, 0, :3] = -np.inf
    x[0, 1] = -np.inf
    x[1, 0, 2, 3] = np.nan
    x[1, 1, 0, 0] = x[1, 1, 4, 5] = np.nan
    compare("max_pool2d", x, return_indices=True, **kw)


@pytest.mark.parametrize("shape", [(64, 32, 8, 8), (64, 64, 4, 4), (3, 5, 9, 7)])
def test_float32_max_pool2d_2_matches_torch(shape):
    # W7's pools (and an odd size, whose last row and column floor mode drops), float32.
    torch = pytest.importorskip("torch")
    x = distinct(*shape).astype(np.float32)
    xt = tg.tensor(x, requires_grad=True)
    y, idx = tg.max_pool2d(xt, 2, return_indices=True)
    xr = torch.tensor(x, requires_grad=True)
    yr, idxr = torch.nn.functional.max_pool2d(xr, 2, return_indices=True)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.numpy(), yr.detach().numpy())
    np.testing.assert_array_equal(idx.numpy(), idxr.numpy())
    g = RNG.standard_normal(y.shape).astype(np.float32)
    y.backward(tg.tensor(g))
    yr.backward(torch.tensor(g))
    assert xt.grad.dtype == np.float32
    np.testing.assert_array_equal(xt.grad.numpy(), xr.grad.numpy())


@pytest.mark.parametrize("kw", [dict(kernel_size=k, stride=s, padding=p, ceil_mode=c,
                                     count_include_pad=ci)
                                for k, s, p, c, ci in itertools.product(
                                    [2, 3, (3, 2)], [None, 1, 2, (2, 3)], [0, 1], [False, True],
                                    [False, True])])
def test_avg_pool2d_matches_torch(kw):
    compare("avg_pool2d", RNG.standard_normal((2, 3, 9, 8)), **kw)


@pytest.mark.parametrize("div", [1, 3, -2])
def test_avg_pool2d_divisor_override_matches_torch(div):
    compare("avg_pool2d", RNG.standard_normal((2, 3, 7, 6)), 3, 2, 1, True, divisor_override=div)


@pytest.mark.parametrize("kw", [dict(kernel_size=k, stride=s, padding=p, ceil_mode=c,
                                     count_include_pad=ci)
                                for k, s, p, c, ci in itertools.product(
                                    [2, 3, 4], [None, 1, 3], [0, 1, 2], [False, True],
                                    [False, True]) if p <= k // 2])
def test_avg_pool1d_matches_torch(kw):
    compare("avg_pool1d", RNG.standard_normal((2, 3, 11)), **kw)


@pytest.mark.parametrize("size,out", [((7, 5), (3, 2)), ((5, 7), 4), ((6, 6), (None, 4)),
                                      ((4, 9), (4, 9)), ((3, 5), (7, 8)), ((5, 5), 1)])
def test_adaptive_pools_match_torch(size, out):
    compare("adaptive_avg_pool2d", RNG.standard_normal((2, 3) + size), out)
    compare("adaptive_max_pool2d", distinct(2, 3, *size), out, return_indices=True)
    o1 = out if isinstance(out, int) else out[1]
    compare("adaptive_avg_pool1d", RNG.standard_normal((2, 3, size[1])), o1)


@pytest.mark.parametrize("k,d,p,s", [(2, 1, 0, 1), (3, 2, 1, 2), ((2, 3), (1, 2), (0, 1), (2, 1)),
                                     (1, 1, 0, 3), (3, 1, 2, 1)])
def test_unfold_and_fold_match_torch(k, d, p, s):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 3, 9, 8))
    compare("unfold", x, k, d, p, s)
    cols = torch.nn.functional.unfold(torch.tensor(x), k, d, p, s)
    compare("fold", RNG.standard_normal(tuple(cols.shape)), (9, 8), k, d, p, s)


@pytest.mark.parametrize("r", [1, 2, 3])
def test_pixel_shuffle_matches_torch(r):
    compare("pixel_shuffle", RNG.standard_normal((2, 2 * r * r, 3, 4)), r)
    compare("pixel_shuffle", RNG.standard_normal((3, 2, r * r, 3, 4)), r)
    compare("pixel_unshuffle", RNG.standard_normal((2, 2, 3 * r, 2 * r)), r)


INTERP = ([dict(size=s) for s in [(5, 7), (3, 2), (6, 4), (13, 9)]]
          + [dict(scale_factor=f) for f in [2, 3, 0.5, 1.7, (2.5, 1.3), (0.7, 3)]]
          + [dict(scale_factor=1.7, recompute_scale_factor=True)])


@pytest.mark.parametrize("kw", INTERP)
@pytest.mark.parametrize("mode,ac", [("nearest", None), ("bilinear", False), ("bilinear", True)])
def test_interpolate_2d_matches_torch(kw, mode, ac):
    compare("interpolate", RNG.standard_normal((2, 3, 6, 4)), mode=mode, align_corners=ac, **kw)


@pytest.mark.parametrize("kw", [dict(size=9), dict(size=4), dict(size=1), dict(scale_factor=2.5),
                                dict(scale_factor=0.6)])
@pytest.mark.parametrize("mode,ac", [("nearest", None), ("linear", False), ("linear", True)])
def test_interpolate_1d_matches_torch(kw, mode, ac):
    compare("interpolate", RNG.standard_normal((2, 3, 6)), mode=mode, align_corners=ac, **kw)


def test_second_derivatives_of_max_pool_and_bilinear_match_torch():
    torch = pytest.importorskip("torch")
    x = distinct(1, 2, 6, 6)
    for fn, kw in (("max_pool2d", dict(kernel_size=3, stride=2, padding=1)),
                   ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
                   ("interpolate", dict(size=(9, 7), mode="bilinear"))):
        xt = tg.tensor(x, requires_grad=True)
        gx, = tg.grad((getattr(tg, fn)(xt, **kw) ** 3).sum(), (xt,), create_graph=True)
        (gx ** 2).sum().backward()
        xr = torch.tensor(x, requires_grad=True)
        gxr, = torch.autograd.grad((getattr(torch.nn.functional, fn)(xr, **kw) ** 3).sum(), (xr,),
                                   create_graph=True)
        (gxr ** 2).sum().backward()
        np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("make,shape", [
    (lambda nn: nn.MaxPool2d(3, 2, 1, ceil_mode=True), (2, 3, 9, 8)),
    (lambda nn: nn.MaxPool1d(2, dilation=2), (2, 3, 9)),
    (lambda nn: nn.AvgPool2d((3, 2), padding=1, count_include_pad=False), (2, 3, 9, 8)),
    (lambda nn: nn.AvgPool1d(3, 2, 1, ceil_mode=True), (2, 3, 9)),
    (lambda nn: nn.AdaptiveAvgPool2d((4, None)), (2, 3, 9, 8)),
    (lambda nn: nn.AdaptiveAvgPool1d(4), (2, 3, 9)),
    (lambda nn: nn.AdaptiveMaxPool2d(3), (2, 3, 9, 8)),
    (lambda nn: nn.Unfold(3, dilation=2, padding=1, stride=2), (2, 3, 9, 8)),
    (lambda nn: nn.Fold((5, 6), 2), (2, 12, 20)),
    (lambda nn: nn.PixelShuffle(2), (2, 8, 3, 4)),
    (lambda nn: nn.PixelUnshuffle(3), (2, 1, 6, 9)),
    (lambda nn: nn.Upsample(size=(5, 11), mode="bilinear", align_corners=True), (2, 3, 9, 8)),
    (lambda nn: nn.Upsample(scale_factor=1.5), (2, 3, 9, 8)),
    (lambda nn: nn.Unflatten(1, (3, -1)), (2, 12)),
])
def test_layers_match_torch_layers(make, shape):
    torch = pytest.importorskip("torch")
    x = distinct(*shape)
    np.testing.assert_allclose(make(tg.nn)(x).numpy(), make(torch.nn)(torch.tensor(x)).numpy(),
                               rtol=1e-12, atol=1e-12)


def test_upsample_alias_matches_torch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((1, 2, 3, 4))
    with pytest.warns(UserWarning):
        ref = torch.nn.functional.upsample(torch.tensor(x), scale_factor=2, mode="bilinear")
    np.testing.assert_allclose(tg.upsample(x, scale_factor=2, mode="bilinear").numpy(),
                               ref.numpy(), rtol=1e-12)
