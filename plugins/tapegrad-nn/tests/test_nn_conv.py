"""Convolutions: conv1d/2d/3d and conv_transpose1d/2d against slow loop references in
NumPy, their gradients (finite differences, the adjoint identity, second order), argument
forms and errors; the Conv*/ConvTranspose* layers (shapes, initialisation, state dicts);
PyTorch comparisons under ``-m needs_torch``."""

import itertools
import math

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import run_doctests
from tapegrad_nn import conv as conv_module
from tapegrad_nn import conv_layers

F = tg.nn.functional
RNG = np.random.default_rng(15)


def randn(*shape):
    return RNG.standard_normal(shape)


# ---------------------------------------------------------------------------------------
# Slow, obvious references: loops over output (or input) positions
# ---------------------------------------------------------------------------------------

def ref_conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    nd = w.ndim - 2
    stride = (stride,) * nd if np.isscalar(stride) else stride
    dilation = (dilation,) * nd if np.isscalar(dilation) else dilation
    k = w.shape[2:]
    if padding == "valid":
        pads = [(0, 0)] * nd
    elif padding == "same":
        pads = [(d * (kk - 1) // 2, d * (kk - 1) - d * (kk - 1) // 2) for d, kk in zip(dilation, k)]
    else:
        pads = [(p, p) for p in ((padding,) * nd if np.isscalar(padding) else padding)]
    xp = np.pad(x, [(0, 0), (0, 0)] + pads)
    o, cg = w.shape[:2]
    out = [(n - d * (kk - 1) - 1) // s + 1 for n, kk, s, d in zip(xp.shape[2:], k, stride, dilation)]
    y = np.zeros((x.shape[0], o, *out))
    for oc in range(o):
        g = oc // (o // groups)
        for pos in itertools.product(*map(range, out)):
            window = tuple(slice(p * s, p * s + d * (kk - 1) + 1, d)
                           for p, s, d, kk in zip(pos, stride, dilation, k))
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + window]
            y[(slice(None), oc) + pos] = (patch * w[oc]).reshape(x.shape[0], -1).sum(1)
        if b is not None:
            y[:, oc] += b[oc]
    return y


def ref_conv_transpose(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    nd = w.ndim - 2

    def tup(v):
        return (v,) * nd if np.isscalar(v) else tuple(v)
    stride, padding, output_padding, dilation = map(tup, (stride, padding, output_padding, dilation))
    c_in, cog, k = w.shape[0], w.shape[1], w.shape[2:]
    full = [(n - 1) * s + d * (kk - 1) + 1 + op
            for n, s, d, kk, op in zip(x.shape[2:], stride, dilation, k, output_padding)]
    y = np.zeros((x.shape[0], cog * groups, *full))
    for ic in range(c_in):
        g = ic // (c_in // groups)
        for pos in itertools.product(*map(range, x.shape[2:])):
            window = tuple(slice(p * s, p * s + d * (kk - 1) + 1, d)
                           for p, s, d, kk in zip(pos, stride, dilation, k))
            value = x[(slice(None), ic) + pos].reshape((-1,) + (1,) * (nd + 1))
            y[(slice(None), slice(g * cog, (g + 1) * cog)) + window] += value * w[ic]
    y = y[(slice(None), slice(None)) + tuple(slice(p, n - p) for p, n in zip(padding, full))]
    if b is not None:
        y += b.reshape((-1,) + (1,) * nd)
    return y


# ---------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------

CONV_CASES = [
    # (fn, x shape, w shape, kwargs)
    ("conv1d", (2, 3, 9), (4, 3, 3), {}),
    ("conv1d", (2, 4, 10), (6, 2, 4), dict(stride=3, padding=2, dilation=2, groups=2)),
    ("conv1d", (1, 2, 7), (3, 2, 4), dict(padding="same")),
    ("conv1d", (1, 2, 7), (3, 2, 2), dict(padding="same", dilation=3)),
    ("conv1d", (1, 2, 7), (3, 2, 3), dict(padding="valid")),
    ("conv2d", (2, 3, 7, 6), (4, 3, 3, 2), dict(stride=(2, 1), padding=(1, 0))),
    ("conv2d", (1, 4, 8, 8), (4, 1, 3, 3), dict(padding=1, groups=4)),     # depthwise
    ("conv2d", (1, 6, 9, 7), (4, 3, 2, 3), dict(stride=2, dilation=(2, 1), groups=2)),
    ("conv2d", (2, 2, 6, 5), (3, 2, 4, 2), dict(padding="same")),
    ("conv2d", (1, 2, 5, 5), (3, 2, 1, 1), {}),
    ("conv3d", (1, 2, 5, 4, 6), (3, 2, 2, 3, 2), dict(stride=(1, 2, 2), padding=1)),
    ("conv3d", (2, 4, 4, 4, 4), (2, 2, 3, 3, 3), dict(padding="same", groups=2)),
]


@pytest.mark.parametrize("fn,xs,ws,kw", CONV_CASES)
def test_conv_matches_the_loop_reference(fn, xs, ws, kw):
    x, w, b = randn(*xs), randn(*ws), randn(ws[0])
    np.testing.assert_allclose(getattr(tg, fn)(x, w, b, **kw).numpy(), ref_conv(x, w, b, **kw),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(getattr(F, fn)(x, w, **kw).numpy(), ref_conv(x, w, **kw),
                               rtol=1e-10, atol=1e-12)


TRANSPOSE_CASES = [
    ("conv_transpose1d", (2, 3, 5), (3, 2, 3), {}),
    ("conv_transpose1d", (1, 4, 6), (4, 3, 4), dict(stride=3, padding=2, output_padding=2, groups=2)),
    ("conv_transpose1d", (1, 2, 5), (2, 2, 3), dict(stride=2, dilation=3, output_padding=1)),
    ("conv_transpose2d", (2, 3, 4, 3), (3, 2, 3, 2), dict(stride=(2, 1), padding=(1, 0))),
    ("conv_transpose2d", (1, 4, 5, 5), (4, 2, 4, 4), dict(stride=2, padding=1, output_padding=1, groups=2)),
    ("conv_transpose2d", (1, 2, 3, 4), (2, 1, 2, 3), dict(dilation=(2, 1), padding=(1, 1))),
]


@pytest.mark.parametrize("fn,xs,ws,kw", TRANSPOSE_CASES)
def test_conv_transpose_matches_the_loop_reference(fn, xs, ws, kw):
    x, w = randn(*xs), randn(*ws)
    b = randn(ws[1] * kw.get("groups", 1))
    np.testing.assert_allclose(getattr(tg, fn)(x, w, b, **kw).numpy(),
                               ref_conv_transpose(x, w, b, **kw), rtol=1e-10, atol=1e-12)


def test_unbatched_input_gives_an_unbatched_output():
    x, w, b = randn(3, 8, 8), randn(4, 3, 3, 3), randn(4)
    y = tg.conv2d(x, w, b, padding=1)
    assert y.shape == (4, 8, 8)
    np.testing.assert_allclose(y.numpy(), ref_conv(x[None], w, b, padding=1)[0], rtol=1e-10)
    t = tg.conv_transpose1d(randn(3, 5), randn(3, 2, 3), stride=2)
    assert t.shape == (2, 11)


def test_float32_stays_float32():
    x, w, b = (randn(2, 3, 6, 6).astype(np.float32), randn(4, 3, 3, 3).astype(np.float32),
               randn(4).astype(np.float32))
    y = tg.conv2d(tg.tensor(x, requires_grad=True), tg.tensor(w, requires_grad=True), b)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.numpy(), ref_conv(x, w, b), rtol=1e-4, atol=1e-5)
    assert tg.conv_transpose2d(y, w).dtype == np.float32


def test_a_cnn_sized_layer_runs_forward_and_backward():
    # A CNN-sized layer: the kernel must stay a few BLAS calls (loops would take seconds).
    x = tg.tensor(randn(16, 32, 28, 28).astype(np.float32), requires_grad=True)
    w = tg.tensor(randn(64, 32, 3, 3).astype(np.float32), requires_grad=True)
    y = tg.conv2d(x, w, padding=1)
    y.sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape


# ---------------------------------------------------------------------------------------
# Gradients (the kit checks the registered samples; these add the public argument forms)
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn,xs,ws,kw", [
    ("conv1d", (1, 4, 7), (2, 2, 4), dict(padding="same", groups=2)),
    ("conv2d", (1, 2, 5, 6), (2, 1, 2, 3), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)),
    ("conv_transpose2d", (1, 2, 3, 3), (2, 2, 2, 3), dict(stride=2, padding=(0, 1), output_padding=1)),
])
def test_gradients_and_second_derivatives_match_finite_differences(fn, xs, ws, kw):
    nb = ws[1] * kw.get("groups", 1) if fn.startswith("conv_transpose") else ws[0]
    x, w, b = (tg.tensor(randn(*s), requires_grad=True) for s in (xs, ws, (nb,)))
    f = getattr(tg, fn)
    assert tg.gradcheck(lambda x, w, b: f(x, w, b, **kw), (x, w, b))
    assert tg.gradgradcheck(lambda x, w: f(x, w, **kw), (x, w))


def test_conv_transpose_is_the_adjoint_of_conv():
    # <conv(x, w), y> == <x, conv_transpose(y, w)> for the output size conv maps back to.
    x, w = randn(2, 4, 9, 8), randn(6, 2, 3, 2)
    kw = dict(stride=(2, 3), padding=(1, 0), dilation=(1, 2), groups=2)
    y = randn(*tg.conv2d(x, w, **kw).shape)
    lhs = float(np.sum(tg.conv2d(x, w, **kw).numpy() * y))
    rhs = float(np.sum(x * tg.conv_transpose2d(y, w, stride=(2, 3), padding=(1, 0),
                                               output_padding=(0, 2), groups=2,
                                               dilation=(1, 2)).numpy()))
    assert math.isclose(lhs, rhs, rel_tol=1e-10)


def test_gradients_equal_the_reference_gradients():
    # conv's gradients are linear maps: compare with the reference's Jacobian applied to g.
    x, w = randn(1, 2, 5, 5), randn(3, 2, 3, 3)
    xt, wt = tg.tensor(x, requires_grad=True), tg.tensor(w, requires_grad=True)
    y = tg.conv2d(xt, wt, stride=2, padding=1)
    g = randn(*y.shape)
    y.backward(g)
    eps = 1e-6
    for i in [(0, 1, 2, 3), (0, 0, 0, 0)]:
        dx = np.zeros_like(x)
        dx[i] = eps
        num = np.sum((ref_conv(x + dx, w, stride=2, padding=1) - ref_conv(x - dx, w, stride=2, padding=1)) * g) / (2 * eps)
        assert math.isclose(xt.grad.numpy()[i], num, rel_tol=1e-6, abs_tol=1e-8)
    for i in [(2, 1, 0, 2), (0, 0, 1, 1)]:
        dw = np.zeros_like(w)
        dw[i] = eps
        num = np.sum((ref_conv(x, w + dw, stride=2, padding=1) - ref_conv(x, w - dw, stride=2, padding=1)) * g) / (2 * eps)
        assert math.isclose(wt.grad.numpy()[i], num, rel_tol=1e-6, abs_tol=1e-8)


def test_only_what_requires_grad_gets_a_gradient():
    x = tg.tensor(randn(1, 2, 5), requires_grad=True)
    w = tg.tensor(randn(3, 2, 2))
    tg.conv1d(x, w).sum().backward()
    assert x.grad is not None and w.grad is None


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------

def test_in_channels_mismatch_names_the_op_the_weight_and_the_input():
    with pytest.raises(ValueError) as e:
        tg.conv2d(tg.ones((2, 3, 8, 8)), tg.ones((16, 4, 3, 3)))
    assert str(e.value) == ("conv2d: expected input with 4 channels (weight (16, 4/groups=1, "
                            "3, 3)) but got input of shape (2, 3, 8, 8)")
    with pytest.raises(ValueError, match=r"expected input with 4 channels \(weight \(6, "
                                         r"4/groups=2, 3\)\) but got input of shape \(3, 5\)"):
        tg.conv1d(tg.ones((3, 5)), tg.ones((6, 2, 3)), groups=2)
    with pytest.raises(ValueError, match=r"conv_transpose2d: expected input with 4 channels"):
        tg.conv_transpose2d(tg.ones((1, 3, 4, 4)), tg.ones((4, 2, 3, 3)))


@pytest.mark.parametrize("call,error,match", [
    (lambda: tg.conv2d(tg.ones((2, 3)), tg.ones((4, 3, 3, 3))), ValueError,
     r"conv2d: expected a 4-d \(batched\) or 3-d \(unbatched\) input, got input of shape \(2, 3\)"),
    (lambda: tg.conv2d(tg.ones((2, 3, 8, 8)), tg.ones((4, 3, 3))), ValueError,
     r"conv2d: expected a 4-d weight, got weight of shape \(4, 3, 3\)"),
    (lambda: tg.conv1d(tg.ones((1, 4, 8)), tg.ones((3, 2, 3)), groups=2), ValueError,
     r"conv1d: out_channels 3 .* divisible by groups=2"),
    (lambda: tg.conv1d(tg.ones((1, 2, 8)), tg.ones((3, 2, 3)), groups=0), ValueError,
     r"conv1d: groups must be a positive int, got 0"),
    (lambda: tg.conv2d(tg.ones((1, 2, 8, 8)), tg.ones((3, 2, 3, 3)), stride=(1, 0)), ValueError,
     r"conv2d: stride must be an int or a tuple of 2 ints, each >= 1, got \(1, 0\)"),
    (lambda: tg.conv2d(tg.ones((1, 2, 8, 8)), tg.ones((3, 2, 3, 3)), padding=(1, 2, 3)), ValueError,
     r"conv2d: padding must be an int or a tuple of 2 ints"),
    (lambda: tg.conv2d(tg.ones((1, 2, 8, 8)), tg.ones((3, 2, 3, 3)), padding=-1), ValueError,
     r"conv2d: padding must be .* >= 0, got -1"),
    (lambda: tg.conv2d(tg.ones((1, 2, 8, 8)), tg.ones((3, 2, 3, 3)), padding="full"), ValueError,
     r"conv2d: padding must be an int, a tuple of 2 ints, 'same' or 'valid', got 'full'"),
    (lambda: tg.conv2d(tg.ones((1, 2, 8, 8)), tg.ones((3, 2, 3, 3)), padding="same", stride=2),
     ValueError, r"conv2d: padding='same' needs stride 1"),
    (lambda: tg.conv2d(tg.ones((1, 2, 4, 4)), tg.ones((3, 2, 5, 3))), ValueError,
     r"conv2d: the kernel \(5, 3\) with dilation \(1, 1\) does not fit in the input \(1, 2, 4, 4\)"),
    (lambda: tg.conv1d(tg.ones((1, 2, 8)), tg.ones((3, 2, 3)), tg.ones(2)), ValueError,
     r"conv1d: bias must have shape \(3,\) \(the output channels\), got \(2,\)"),
    (lambda: tg.conv1d(tg.ones((1, 2, 8), dtype=np.float32), tg.ones((3, 2, 3))), TypeError,
     r"conv1d: input, weight and bias must have the same dtype .* input float32, weight float64"),
    (lambda: tg.conv1d(tg.ones((1, 2, 8), dtype=np.int64), tg.ones((3, 2, 3), dtype=np.int64)),
     TypeError, r"conv1d: input must be floating point, got int64"),
    (lambda: tg.conv_transpose1d(tg.ones((1, 2, 8)), tg.ones((2, 3, 3)), stride=2, output_padding=2),
     ValueError, r"conv_transpose1d: output_padding \(2,\) must be smaller than stride \(2,\)"),
    (lambda: tg.conv_transpose1d(tg.ones((1, 2, 8)), tg.ones((2, 3, 3)), padding="same"),
     ValueError, r"conv_transpose1d: padding must be an int or a tuple of 1 ints"),
    (lambda: tg.conv_transpose1d(tg.ones((1, 2, 2)), tg.ones((2, 3, 2)), padding=2), ValueError,
     r"conv_transpose1d: the output size \(-1,\) .* is not positive"),
    (lambda: tg.conv_transpose2d(tg.ones((1, 3, 4, 4)), tg.ones((3, 2, 3, 3)), groups=2),
     ValueError, r"conv_transpose2d: in_channels 3 .* divisible by groups=2"),
])
def test_bad_arguments_raise_naming_the_op(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---------------------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls,args,kw,wshape", [
    (tg.nn.Conv1d, (4, 6, 3), dict(groups=2), (6, 2, 3)),
    (tg.nn.Conv2d, (3, 16, 3), {}, (16, 3, 3, 3)),
    (tg.nn.Conv2d, (3, 8, (3, 5)), dict(stride=2, padding=(1, 2), dilation=(1, 2)), (8, 3, 3, 5)),
    (tg.nn.Conv3d, (2, 4, 2), dict(bias=False), (4, 2, 2, 2, 2)),
    (tg.nn.ConvTranspose1d, (4, 6, 3), dict(groups=2, stride=2, output_padding=1), (4, 3, 3)),
    (tg.nn.ConvTranspose2d, (8, 4, 4), dict(stride=2, padding=1), (8, 4, 4, 4)),
])
def test_layer_parameters_have_torch_shapes_and_the_forward_is_the_function(cls, args, kw, wshape):
    layer = cls(*args, **kw)
    assert layer.weight.shape == wshape
    assert [n for n, _ in layer.named_parameters()] == (["weight"] if kw.get("bias") is False
                                                        else ["weight", "bias"])
    if layer.bias is not None:
        assert layer.bias.shape == (args[1],)
    nd = len(wshape) - 2
    x = randn(2, args[0], *([7] * nd))
    w = layer.weight.numpy()
    b = None if layer.bias is None else layer.bias.numpy()
    reference = ref_conv_transpose if cls.__name__.startswith("ConvTranspose") else ref_conv
    ref = reference(x, w, b, **{k: v for k, v in kw.items() if k != "bias"})
    np.testing.assert_allclose(layer(x).numpy(), ref, rtol=1e-10, atol=1e-12)


def test_layer_initialisation_is_torch_default():
    tg.manual_seed(3)
    layer = tg.nn.Conv2d(8, 32, 3, groups=2)
    fan_in = 4 * 9
    bound = 1 / math.sqrt(fan_in)          # kaiming_uniform_(a=sqrt(5)) and the bias bound
    w, b = layer.weight.numpy(), layer.bias.numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.95 * bound                  # uniform on the whole interval
    assert math.isclose(w.std(), bound / math.sqrt(3), rel_tol=0.1)
    t = tg.nn.ConvTranspose2d(8, 6, 3, groups=2)           # fan_in = weight.shape[1] * 9
    assert np.abs(t.weight.numpy()).max() <= 1 / math.sqrt(3 * 9)
    tg.manual_seed(3)
    assert np.array_equal(tg.nn.Conv2d(8, 32, 3, groups=2).weight.numpy(), w)   # reproducible


def test_layer_dtype_and_state_dict_round_trip():
    layer = tg.nn.Conv2d(3, 4, 3, dtype=tg.float32)
    assert layer.weight.dtype == layer.bias.dtype == np.float32
    assert layer(tg.ones((1, 3, 5, 5), dtype=np.float32)).dtype == np.float32
    other = tg.nn.Conv2d(3, 4, 3, dtype=tg.float32)
    other.load_state_dict({k: v.numpy() for k, v in layer.state_dict().items()})
    assert np.array_equal(other.weight.numpy(), layer.weight.numpy())
    with pytest.raises(Exception, match="size mismatch"):
        tg.nn.Conv2d(3, 4, 5).load_state_dict({k: v.numpy() for k, v in layer.state_dict().items()})


def test_layer_input_channel_error_names_the_layer():
    with pytest.raises(ValueError, match=r"Conv2d\(3, 16, kernel_size=\(3, 3\)\): expected input "
                                         r"with in_channels=3 but got input of shape \(2, 4, 8, 8\) "
                                         r"\(4 channels\)"):
        tg.nn.Conv2d(3, 16, 3)(tg.ones((2, 4, 8, 8)))
    with pytest.raises(ValueError, match=r"ConvTranspose1d\(2, 3, .*in_channels=2"):
        tg.nn.ConvTranspose1d(2, 3, 3)(tg.ones((4, 5)))


@pytest.mark.parametrize("call,match", [
    (lambda: tg.nn.Conv2d(3, 4, 3, padding_mode="reflect"),
     r"Conv2d: padding_mode='reflect' is not supported \(only 'zeros'\)"),
    (lambda: tg.nn.Conv2d(3, 4, 3, groups=2), r"Conv2d: in_channels=3 must be divisible by groups=2"),
    (lambda: tg.nn.Conv1d(0, 4, 3), r"Conv1d: in_channels must be a positive integer, got 0"),
    (lambda: tg.nn.Conv2d(3, 4, (3, 3, 3)), r"Conv2d: kernel_size must be an int or a tuple of 2"),
    (lambda: tg.nn.Conv2d(3, 4, 3, stride=2, padding="same"), r"Conv2d: padding='same' needs stride 1"),
    (lambda: tg.nn.Conv2d(3, 4, 3, padding="full"), r"Conv2d: padding must be an int, a tuple"),
    (lambda: tg.nn.ConvTranspose2d(3, 4, 3, output_padding=1),
     r"ConvTranspose2d: output_padding \(1, 1\) must be smaller than stride \(1, 1\)"),
])
def test_layer_bad_arguments_raise_naming_the_layer(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_layer_repr():
    assert repr(tg.nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False)) == \
        "Conv2d(3, 16, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)"


# ---------------------------------------------------------------------------------------
# The kernels' paths: each im2col layout and each input-gradient algorithm, forced on the
# same inputs, against the loop reference (the kernels choose one by shape; see conv.py)
# ---------------------------------------------------------------------------------------

PATH_CASES = [  # x shape, w shape, stride, (lo, hi) padding per axis, dilation, groups
    ((2, 3, 5, 4), (4, 3, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),     # W7's layers
    ((1, 4, 5, 6), (6, 2, 2, 3), (1, 1), ((0, 1), (2, 1)), (2, 1), 2),     # asymmetric, dilated, groups
    ((2, 1, 6, 5), (3, 1, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),     # C = 1
    ((1, 2, 7, 6), (3, 2, 3, 2), (2, 3), ((1, 0), (2, 1)), (1, 2), 1),     # strided
    ((1, 2, 4, 4), (2, 2, 2, 2), (1, 1), ((3, 2), (0, 2)), (1, 1), 1),     # padding beyond the kernel
    ((1, 3, 7), (3, 1, 3), (1,), ((2, 2),), (2,), 3),                      # depthwise 1-d
]


def _conv_params(stride, pads, dilation, groups):
    return dict(stride=stride, padding=pads, dilation=dilation, groups=groups)


def _ref_padded_conv(x, w, stride, pads, dilation, groups):
    """ref_conv with (lo, hi) padding pairs: pad first, then a valid convolution."""
    xp = np.pad(x, [(0, 0), (0, 0)] + list(pads))
    return ref_conv(xp, w, stride=stride, padding=0, dilation=dilation, groups=groups)


@pytest.fixture(params=["whole batch", "one image"])
def chunking(request, monkeypatch):
    """The kernels' batch chunks: one for the whole batch, or one per image (several
    chunks, as on a batch larger than the cache)."""
    if request.param == "one image":
        monkeypatch.setattr(conv_module, "_CHUNK_BYTES", 1)
    else:
        monkeypatch.setattr(conv_module, "_CHUNK_BYTES", 1 << 40)
    return request.param


@pytest.mark.parametrize("xs,ws,stride,pads,dilation,groups", PATH_CASES)
@pytest.mark.parametrize("channels_last", [True, False])
def test_both_im2col_layouts_give_the_loop_reference(xs, ws, stride, pads, dilation, groups,
                                                     channels_last):
    x, w = randn(*xs), randn(*ws)
    cols, out = conv_module._im2col(x, ws[2:], stride, pads, dilation, groups, channels_last)
    y = np.matmul(cols, conv_module._weight_matrix(w, groups))          # (G, N*L, O/G)
    y = y.reshape((groups, xs[0]) + out + (-1,))
    y = np.moveaxis(y, -1, 1).reshape((groups * y.shape[-1], xs[0]) + out).swapaxes(0, 1)
    np.testing.assert_allclose(y, _ref_padded_conv(x, w, stride, pads, dilation, groups),
                               rtol=1e-10, atol=1e-12)


def _ref_adjoint(y, w, size, stride, pads, dilation, groups):
    """J^T y for J the (linear) map x -> conv(x, w), column by column from the reference."""
    n, c = y.shape[0], w.shape[1] * groups
    gx = np.zeros((n, c) + tuple(size))
    for i in np.ndindex(*gx.shape):
        e = np.zeros_like(gx)
        e[i] = 1.0
        gx[i] = np.sum(_ref_padded_conv(e, w, stride, pads, dilation, groups) * y)
    return gx


@pytest.mark.parametrize("xs,ws,stride,pads,dilation,groups", PATH_CASES)
def test_both_input_gradient_algorithms_give_the_reference_adjoint(xs, ws, stride, pads,
                                                                   dilation, groups, chunking):
    x, w = randn(*xs), randn(*ws)
    y = randn(*_ref_padded_conv(x, w, stride, pads, dilation, groups).shape)
    expected = _ref_adjoint(y, w, xs[2:], stride, pads, dilation, groups)
    p = _conv_params(stride, pads, dilation, groups)
    got = conv_module._conv_transpose_kernel(y, w, size=xs[2:], **p)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    # and the other two kernels, chunked the same way
    np.testing.assert_allclose(conv_module._conv_kernel(x, w, **p),
                               _ref_padded_conv(x, w, stride, pads, dilation, groups),
                               rtol=1e-10, atol=1e-12)
    gw = conv_module._conv_weight_kernel(x, y, ksize=ws[2:], **p)
    eps = 1e-6                  # <conv(x, w), y> is linear in w: central differences are exact
    for i in [(0, 0) + (0,) * (len(ws) - 2), tuple(n - 1 for n in ws)]:
        dw = np.zeros_like(w)
        dw[i] = eps
        num = np.sum((_ref_padded_conv(x, w + dw, stride, pads, dilation, groups)
                      - _ref_padded_conv(x, w - dw, stride, pads, dilation, groups)) * y) / (2 * eps)
        assert math.isclose(gw[i], num, rel_tol=1e-7, abs_tol=1e-9)
    np.testing.assert_allclose(conv_module._adjoint_by_col2im(y, w, size=xs[2:], **p), expected,
                               rtol=1e-10, atol=1e-12)
    full = conv_module._full_padding(ws[2:], pads, dilation)
    if all(st == 1 for st in stride) and all(lo >= 0 and hi >= 0 for lo, hi in full):
        got = conv_module._adjoint_by_full_correlation(y, w, padding=pads, dilation=dilation,
                                                       groups=groups)
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fn,xs,ws,kw", [
    ("conv2d", (2, 3, 5, 4), (4, 3, 3, 3), dict(padding=1)),           # full correlation, channels-last
    ("conv2d", (1, 2, 5, 5), (4, 1, 3, 3), dict(padding=1, groups=2)),  # channels-first im2col
    ("conv2d", (1, 2, 6, 5), (3, 2, 3, 2), dict(stride=2, padding=1)),  # col2im
    ("conv2d", (1, 2, 3, 3), (2, 2, 2, 2), dict(padding=2)),            # col2im at stride 1
    ("conv1d", (2, 2, 6), (2, 2, 4), dict(padding="same", dilation=2)),  # asymmetric full correlation
])
def test_each_kernel_path_passes_first_and_second_order_gradcheck(fn, xs, ws, kw, chunking):
    x, w, b = (tg.tensor(randn(*s), requires_grad=True) for s in (xs, ws, (ws[0],)))
    f = getattr(tg, fn)
    assert tg.gradcheck(lambda x, w, b: f(x, w, b, **kw), (x, w, b))
    assert tg.gradgradcheck(lambda x, w: f(x, w, **kw), (x, w))


@pytest.mark.parametrize("kw,ws", [(dict(padding=1), (3, 2, 3, 3)), (dict(stride=2), (3, 2, 3, 3)),
                                   (dict(padding=1, groups=2), (4, 1, 3, 3))])
def test_an_empty_batch_gives_empty_outputs_and_zero_weight_gradients(kw, ws):
    # N = 0 (each kernel path, and no batch chunk at all): the weight gradient is an empty
    # sum, zero, as in PyTorch.
    x, w = tg.tensor(np.zeros((0, 2, 5, 5)), requires_grad=True), tg.tensor(randn(*ws), requires_grad=True)
    y = tg.conv2d(x, w, **kw)
    assert y.shape == (0, ws[0]) + ref_conv(np.zeros((1, 2, 5, 5)), randn(*ws), **kw).shape[2:]
    y.sum().backward()
    assert x.grad.shape == x.shape
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros(ws))


def test_docstring_examples():
    run_doctests(conv_module)
    run_doctests(conv_layers)


# ---------------------------------------------------------------------------------------
# PyTorch
# ---------------------------------------------------------------------------------------

TORCH_CASES = CONV_CASES + TRANSPOSE_CASES + [
    ("conv2d", (2, 6, 10, 9), (6, 3, 4, 3), dict(padding="same", dilation=(1, 2), groups=2)),
    ("conv2d", (3, 4, 12, 12), (8, 4, 5, 5), dict(stride=(3, 2), padding=(2, 1))),
    ("conv3d", (1, 3, 6, 5, 4), (6, 1, 2, 2, 3), dict(stride=2, dilation=(1, 2, 1), groups=3)),
    ("conv_transpose2d", (2, 6, 4, 5), (6, 2, 3, 3), dict(stride=(2, 3), padding=1,
                                                          output_padding=(1, 2), groups=3, dilation=2)),
    # the kernels' paths (see test_both_input_gradient_algorithms_give_the_reference_adjoint)
    ("conv2d", (2, 2, 5, 7), (3, 2, 2, 2), dict(padding=3)),             # col2im at stride 1
    ("conv2d", (2, 1, 9, 7), (4, 1, 3, 3), dict(padding=1)),             # C = 1: channels-first
    ("conv2d", (2, 4, 7, 9), (4, 1, 3, 3), dict(padding="same", groups=4)),
    ("conv1d", (2, 3, 11), (4, 3, 4), dict(padding="same", dilation=3)),  # asymmetric full corr.
    ("conv2d", (3, 5, 7, 6), (6, 5, 3, 3), dict(stride=2, dilation=2, padding=2)),
    ("conv_transpose2d", (2, 4, 5, 6), (4, 3, 3, 3), dict(padding=1)),   # stride 1: full corr.
]


@pytest.mark.needs_torch
@pytest.mark.parametrize("fn,xs,ws,kw", TORCH_CASES)
def test_values_and_gradients_match_torch(fn, xs, ws, kw):
    torch = pytest.importorskip("torch")
    nb = ws[1] * kw.get("groups", 1) if fn.startswith("conv_transpose") else ws[0]
    x, w, b = randn(*xs), randn(*ws), randn(nb)
    xt, wt, bt = (tg.tensor(a, requires_grad=True) for a in (x, w, b))
    y = getattr(tg, fn)(xt, wt, bt, **kw)
    g = randn(*y.shape)
    y.backward(g)
    xr, wr, br = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yr = getattr(torch.nn.functional, fn)(xr, wr, br, **kw)
    yr.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), yr.detach().numpy(), rtol=1e-10, atol=1e-10)
    for mine, theirs in ((xt, xr), (wt, wr), (bt, br)):
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.needs_torch
def test_second_derivatives_match_torch():
    torch = pytest.importorskip("torch")
    x, w = randn(1, 4, 6, 6), randn(4, 2, 3, 3)
    kw = dict(stride=2, padding=1, groups=2)
    xt, wt = tg.tensor(x, requires_grad=True), tg.tensor(w, requires_grad=True)
    gx, = tg.grad((tg.conv2d(xt, wt, **kw) ** 2).sum(), (xt,), create_graph=True)
    (gx ** 2).sum().backward()
    xr, wr = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    gxr, = torch.autograd.grad((torch.nn.functional.conv2d(xr, wr, **kw) ** 2).sum(), (xr,),
                               create_graph=True)
    (gxr ** 2).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-9)
    np.testing.assert_allclose(wt.grad.numpy(), wr.grad.numpy(), rtol=1e-9)


@pytest.mark.needs_torch
@pytest.mark.parametrize("make", [
    lambda nn: nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2),
    lambda nn: nn.Conv2d(3, 8, (3, 2), padding="same", dilation=2),
    lambda nn: nn.Conv3d(2, 4, 2, bias=False),
    lambda nn: nn.ConvTranspose1d(4, 6, 3, stride=2, output_padding=1, groups=2),
    lambda nn: nn.ConvTranspose2d(6, 4, 4, stride=2, padding=1, dilation=1),
])
def test_a_torch_state_dict_loads_and_gives_torch_outputs(make):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = make(torch.nn).double()
    layer = make(tg.nn)
    assert [n for n, _ in layer.named_parameters()] == [n for n, _ in ref.named_parameters()]
    layer.load_state_dict({k: v.numpy() for k, v in ref.state_dict().items()})
    nd = ref.weight.ndim - 2
    x = randn(2, ref.in_channels, *([8] * nd))
    np.testing.assert_allclose(layer(x).numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-10, atol=1e-12)
    # Same init distribution: torch's default bound is ours.
    fan_in = ref.weight.shape[1] * math.prod(ref.weight.shape[2:])
    assert ref.weight.abs().max().item() <= 1 / math.sqrt(fan_in)
    assert np.abs(make(tg.nn).weight.numpy()).max() <= 1 / math.sqrt(fan_in)


@pytest.mark.needs_torch
@pytest.mark.parametrize("xs,ws", [((64, 1, 8, 8), (16, 1, 3, 3)), ((64, 16, 8, 8), (32, 16, 3, 3)),
                                   ((64, 32, 4, 4), (64, 32, 3, 3))])
def test_float32_w7_layers_match_torch(xs, ws):
    # W7's three layers in float32 (BLAS sgemm, no float64 detour): torch's float32 result
    # within float32 rounding of sums of a few hundred products.
    torch = pytest.importorskip("torch")
    x, w, b = (randn(*s).astype(np.float32) for s in (xs, ws, (ws[0],)))
    xt, wt, bt = (tg.tensor(a, requires_grad=True) for a in (x, w, b))
    y = tg.conv2d(xt, wt, bt, padding=1)
    assert y.dtype == np.float32
    g = randn(*y.shape).astype(np.float32)
    y.backward(g)
    xr, wr, br = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yr = torch.nn.functional.conv2d(xr, wr, br, padding=1)
    yr.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), yr.detach().numpy(), rtol=1e-4, atol=1e-4)
    for mine, theirs in ((xt, xr), (wt, wr), (bt, br)):
        assert mine.grad.dtype == np.float32
        scale = np.abs(theirs.grad.numpy()).max()
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-4,
                                   atol=1e-5 * scale)


def _backward_peak(n, c, o, hw):
    """Bytes a conv2d backward (input and weight gradient) allocates at its peak, and the
    size of one whole-batch im2col buffer (float64)."""
    import tracemalloc
    x = tg.tensor(randn(n, c, hw, hw), requires_grad=True)
    w = tg.tensor(randn(o, c, 3, 3), requires_grad=True)
    y = tg.conv2d(x, w, padding=1)
    g = tg.tensor(randn(*y.shape))
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        y.backward(g)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return peak, n * c * 9 * hw * hw * 8


def test_backward_holds_at_most_one_im2col_buffer(monkeypatch):
    # One chunk for the whole batch: one buffer plus padded copies and the gradients
    # themselves (each ~1/9 of it); two buffers alive at once would be 2x.
    monkeypatch.setattr(conv_module, "_CHUNK_BYTES", 1 << 40)
    peak, buffer = _backward_peak(4, 8, 8, 16)
    assert buffer < peak < 1.6 * buffer, (peak, buffer)


def test_batch_chunks_bound_the_backward_memory():
    # The default chunks: a batch whose im2col would be 9x the input holds ~one chunk of it
    # (plus the gradients, each 1/9 of the whole buffer).
    peak, buffer = _backward_peak(32, 8, 8, 16)
    assert peak < 0.5 * buffer, (peak, buffer)
