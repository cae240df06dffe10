"""tg.nn.init: fans, gains, in-place fills and the statistics of the random inits."""

import math

import numpy as np
import pytest
import tapegrad as tg

init = tg.nn.init


def _param(*shape, dtype=np.float64):
    return tg.nn.Parameter(tg.zeros(shape, dtype=dtype))


def test_fans_of_linear_and_conv_weights_count_the_receptive_field():
    assert init._calculate_fan_in_and_fan_out(tg.zeros((5, 3))) == (3, 5)
    assert init._calculate_fan_in_and_fan_out(tg.zeros((16, 3, 5, 5))) == (75, 400)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(tg.zeros(4))


def test_calculate_gain_table_and_errors():
    assert init.calculate_gain("conv2d") == 1 and init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == 5 / 3
    assert init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("leaky_relu") == math.sqrt(2 / (1 + 0.01 ** 2))
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="unsupported nonlinearity 'swish'"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="negative_slope"):
        init.calculate_gain("leaky_relu", True)


def test_fills_are_in_place_on_the_same_leaf_and_return_it():
    w = _param(3, 4)
    v0 = w._version
    for fn, args in ((init.uniform_, ()), (init.normal_, ()), (init.xavier_uniform_, ()),
                     (init.kaiming_normal_, ()), (init.trunc_normal_, ()), (init.orthogonal_, ()),
                     (init.constant_, (2.5,)), (init.zeros_, ()), (init.ones_, ()), (init.eye_, ())):
        assert fn(w, *args) is w
    assert w.is_leaf and w.requires_grad and w.grad_fn is None and w._version > v0
    np.testing.assert_array_equal(w.numpy(), np.eye(3, 4))
    init.constant_(w, 2.5)
    assert (w.numpy() == 2.5).all()


def test_float32_is_kept_and_integer_tensors_are_refused_for_random_fills():
    w = _param(50, 40, dtype=np.float32)
    init.kaiming_uniform_(w)
    assert w.dtype == np.float32
    with pytest.raises(TypeError, match="floating point"):
        init.normal_(tg.zeros((2, 2), dtype=np.int64))


def test_seeded_random_inits_are_reproducible():
    tg.manual_seed(7)
    a = init.xavier_normal_(_param(6, 5)).numpy().copy()
    tg.manual_seed(7)
    b = init.xavier_normal_(_param(6, 5)).numpy()
    np.testing.assert_array_equal(a, b)


# Statistics on 200,000 draws: the std of a sample std is ~ std / sqrt(2n) = 0.16 %, of a
# sample mean std / sqrt(n) = 0.22 % of std; the tolerances below are > 5 of those.
N_OUT, N_IN, K = 400, 50, 10   # fan_in 500, fan_out 4000


def _stats(fn, *args, **kw):
    tg.manual_seed(0)
    w = fn(_param(N_OUT, N_IN, K), *args, **kw).numpy()
    return w, w.mean(), w.std()


@pytest.mark.parametrize("fn, expected_mean, expected_std", [
    (lambda w: init.uniform_(w, -2.0, 4.0), 1.0, 6 / math.sqrt(12)),
    (lambda w: init.normal_(w, 0.5, 3.0), 0.5, 3.0),
    (init.xavier_uniform_, 0.0, math.sqrt(2 / 4500)),
    (lambda w: init.xavier_normal_(w, gain=2.0), 0.0, 2 * math.sqrt(2 / 4500)),
    (lambda w: init.kaiming_uniform_(w, nonlinearity="relu"), 0.0, math.sqrt(2 / 500)),
    (lambda w: init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu"), 0.0,
     math.sqrt(2 / 4000)),
    (lambda w: init.kaiming_normal_(w, a=0.2), 0.0, math.sqrt(2 / 1.04 / 500)),
])
def test_random_init_mean_and_std_match_the_formula(fn, expected_mean, expected_std):
    _, mean, std = _stats(fn)
    assert abs(std / expected_std - 1) < 0.01
    assert abs(mean - expected_mean) < 0.015 * expected_std


def test_uniform_inits_respect_their_bounds():
    w, _, _ = _stats(init.kaiming_uniform_, a=math.sqrt(5))
    assert np.abs(w).max() <= 1 / math.sqrt(500) * (1 + 1e-12)
    w, _, _ = _stats(init.xavier_uniform_)
    assert np.abs(w).max() <= math.sqrt(6 / 4500) * (1 + 1e-12)


def test_trunc_normal_stays_in_bounds_with_the_truncated_moments():
    w, mean, std = _stats(init.trunc_normal_, mean=1.0, std=2.0, a=0.0, b=3.0)
    assert w.min() >= 0.0 and w.max() <= 3.0
    # N(1, 4) truncated to [0, 3] (alpha = -0.5, beta = 1): moments from the formula.
    from math import erf, exp, pi, sqrt
    phi = lambda z: exp(-z * z / 2) / sqrt(2 * pi)      # noqa: E731
    cdf = lambda z: (1 + erf(z / sqrt(2))) / 2          # noqa: E731
    al, be = -0.5, 1.0
    Z = cdf(be) - cdf(al)
    m = 1 + 2 * (phi(al) - phi(be)) / Z
    v = 4 * (1 + (al * phi(al) - be * phi(be)) / Z - ((phi(al) - phi(be)) / Z) ** 2)
    assert abs(mean - m) < 0.01 and abs(std / math.sqrt(v) - 1) < 0.01


def test_trunc_normal_float32_default_bounds_and_refusals():
    tg.manual_seed(4)
    w = init.trunc_normal_(_param(300, 300, dtype=np.float32)).numpy()
    assert w.dtype == np.float32 and w.min() >= -2 and w.max() <= 2
    # N(0, 1) on [-2, 2]: std 0.8796
    assert abs(w.std() / 0.87963 - 1) < 0.01 and abs(w.mean()) < 0.01
    with pytest.raises(ValueError, match="holds only"):
        init.trunc_normal_(_param(3), mean=0.0, std=1.0, a=6.0, b=7.0)
    with pytest.raises(ValueError, match="a .* must be smaller than b"):
        init.trunc_normal_(_param(3), a=1.0, b=0.0)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (8, 2, 3)])
def test_orthogonal_gives_orthonormal_rows_or_columns_times_gain(shape):
    tg.manual_seed(1)
    w = init.orthogonal_(_param(*shape), gain=2.0).numpy().reshape(shape[0], -1) / 2.0
    rows, cols = w.shape
    gram = w.T @ w if rows >= cols else w @ w.T
    np.testing.assert_allclose(gram, np.eye(min(rows, cols)), atol=1e-12)


def test_dirac_keeps_the_identity_of_a_convolution():
    w = init.dirac_(_param(4, 4, 3, 3))
    x = tg.random.randn(1, 4, 5, 5)
    np.testing.assert_allclose(tg.conv2d(x, w, padding=1).numpy(), x.numpy(), atol=1e-12)
    w2 = init.dirac_(_param(4, 2, 3), groups=2).numpy()
    assert w2.sum() == 4 and w2[0, 0, 1] == 1 and w2[1, 1, 1] == 1 and w2[2, 0, 1] == 1


def test_errors_name_the_function():
    with pytest.raises(ValueError, match="mode 'fan_avg' not supported"):
        init.kaiming_uniform_(_param(2, 2), mode="fan_avg")
    with pytest.raises(ValueError, match="eye_: only 2-D"):
        init.eye_(_param(2, 2, 2))
    with pytest.raises(ValueError, match="orthogonal_"):
        init.orthogonal_(_param(3))
    with pytest.raises(TypeError, match="uniform_: expected a tapegrad Tensor"):
        init.uniform_(np.zeros(3))


def test_linear_and_conv_layers_use_kaiming_uniform_sqrt5():
    tg.manual_seed(3)
    lin = tg.nn.Linear(7, 5)
    conv = tg.nn.Conv2d(3, 4, 3)
    tg.manual_seed(3)
    w = init.kaiming_uniform_(_param(5, 7), a=math.sqrt(5))
    b = init.uniform_(_param(5), -1 / math.sqrt(7), 1 / math.sqrt(7))
    cw = init.kaiming_uniform_(_param(4, 3, 3, 3), a=math.sqrt(5))
    cb = init.uniform_(_param(4), -1 / math.sqrt(27), 1 / math.sqrt(27))
    for got, want in ((lin.weight, w), (lin.bias, b), (conv.weight, cw), (conv.bias, cb)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.needs_torch
def test_gain_and_fans_match_torch():
    torch = pytest.importorskip("torch")
    for nl, p in (("linear", None), ("conv3d", None), ("tanh", None), ("relu", None),
                  ("leaky_relu", None), ("leaky_relu", 0.3), ("selu", None), ("sigmoid", None)):
        assert init.calculate_gain(nl, p) == torch.nn.init.calculate_gain(nl, p)
    for shape in ((5, 3), (16, 3, 5, 5), (2, 4, 3), (6, 2, 1, 2, 3)):
        assert init._calculate_fan_in_and_fan_out(tg.zeros(shape)) == \
            torch.nn.init._calculate_fan_in_and_fan_out(torch.zeros(shape))
