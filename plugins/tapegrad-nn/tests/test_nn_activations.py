"""The activations of tapegrad_nn.activations and their tg.nn modules: values against
NumPy formulas, derivatives at the kinks (PyTorch's conventions), float32, argument
forms, errors; ``needs_torch`` tests compare every function and argument combination
with torch.nn.functional (forward, gradient, second order)."""

import math

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt

F = tg.nn.functional
X = np.array([-7.5, -3.0, -2.2, -1.0, -0.3, 0.0, 0.4, 1.0, 2.5, 3.0, 5.0, 6.0, 8.0])
_erf = np.vectorize(math.erf)


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x, beta=1.0, threshold=20.0):
    return np.where(x * beta > threshold, x, np.log1p(np.exp(beta * x)) / beta)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

# name, tapegrad call, NumPy reference
REFERENCES = [
    ("gelu", lambda x: F.gelu(x), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"),
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    ("silu", F.silu, lambda x: x * _sig(x)),
    ("mish", F.mish, lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    ("elu", lambda x: F.elu(x, 0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    ("selu", F.selu, lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x))),
    ("celu", lambda x: F.celu(x, 2.0), lambda x: np.where(x > 0, x, 2.0 * np.expm1(x / 2))),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    ("relu6", F.relu6, lambda x: np.clip(x, 0, 6)),
    ("hardtanh", lambda x: F.hardtanh(x, -2.0, 2.5), lambda x: np.clip(x, -2.0, 2.5)),
    ("hardsigmoid", F.hardsigmoid, lambda x: np.clip(x / 6 + 0.5, 0, 1)),
    ("hardswish", F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("softplus", F.softplus, _softplus),
    ("softplus_beta", lambda x: F.softplus(x, beta=2.0, threshold=4.0),
     lambda x: _softplus(x, 2.0, 4.0)),
    ("softsign", F.softsign, lambda x: x / (1 + np.abs(x))),
    ("logsigmoid", F.logsigmoid, lambda x: np.log(_sig(x))),
    ("log_sigmoid", F.log_sigmoid, lambda x: np.log(_sig(x))),
    ("tanhshrink", F.tanhshrink, lambda x: x - np.tanh(x)),
]


@pytest.mark.parametrize("name,f,ref", REFERENCES, ids=[r[0] for r in REFERENCES])
def test_values_match_numpy_formula(name, f, ref):
    np.testing.assert_allclose(f(tg.tensor(X)).numpy(), ref(X), rtol=1e-12, atol=1e-14)
    out = f(tg.tensor(X.astype(np.float32)))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), ref(X), rtol=2e-6, atol=1e-6)


def test_functional_names_are_the_registered_functions():
    for name in ("gelu", "silu", "softplus", "logsigmoid", "log_sigmoid", "glu", "softmin",
                 "prelu", "hardswish"):
        assert getattr(F, name) is getattr(tg, name)


def _grad(f, x):
    x = tg.tensor(x, requires_grad=True)
    f(x).sum().backward()
    return x.grad.numpy()


# Derivatives at the break points, PyTorch's conventions.
KINKS = [
    (lambda x: F.elu(x, 0.7), [0.0], [0.7]),
    (F.selu, [0.0], [SELU_S * SELU_A]),
    (lambda x: F.celu(x, 2.0), [0.0], [1.0]),
    (lambda x: F.leaky_relu(x, 0.2), [0.0], [0.2]),
    (F.relu6, [0.0, 6.0], [0.0, 0.0]),
    (lambda x: F.hardtanh(x, -2.0, 2.5), [-2.0, 2.5], [0.0, 0.0]),
    (F.hardsigmoid, [-3.0, 3.0], [0.0, 0.0]),
    (F.hardswish, [-3.0, 3.0], [0.0, 1.0]),
    (F.softsign, [0.0], [1.0]),
    (lambda x: F.softplus(x, 1.0, 2.0), [2.0, 2.0 + 1e-9], [_sig(2.0), 1.0]),
    (lambda x: F.prelu(x, tg.tensor([0.3])), [0.0], [0.3]),
]


@pytest.mark.parametrize("f,at,expected", KINKS)
def test_derivative_at_kinks_is_pytorchs(f, at, expected):
    np.testing.assert_allclose(_grad(f, np.array(at)), expected, rtol=1e-12)


def test_exponential_branches_do_not_overflow_into_nan_gradients():
    x = np.array([-1000.0, -50.0, 50.0, 800.0])
    for f in (F.elu, F.selu, F.celu, F.silu, F.softplus, F.logsigmoid, F.mish, F.gelu):
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            g = _grad(f, x)
        assert np.isfinite(g).all(), f


def test_gelu_second_derivative_matches_formula():
    # gelu''(x) = phi(x) (2 - x^2)
    x = tg.tensor(np.array([-1.2, 0.3, 2.0]), requires_grad=True)
    F.gelu(x).sum().backward(create_graph=True)
    g1 = x.grad
    x.grad = None
    g1.sum().backward()
    phi = np.exp(-0.5 * x.numpy() ** 2) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(x.grad.numpy(), phi * (2 - x.numpy() ** 2), rtol=1e-12)


def _np_gelu_tanh_derivative(x):
    c, a = math.sqrt(2 / math.pi), 0.044715
    t = np.tanh(c * (x + a * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * a * x * x)


def test_gelu_tanh_first_and_second_derivatives_match_formula_and_differences():
    xs = np.array([-4.0, -1.2, -0.3, 0.0, 0.3, 2.0, 5.0])
    x = tg.tensor(xs, requires_grad=True)
    F.gelu(x, approximate="tanh").sum().backward(create_graph=True)
    g1, x.grad = x.grad, None
    np.testing.assert_allclose(g1.numpy(), _np_gelu_tanh_derivative(xs), rtol=1e-12,
                               atol=1e-15)
    g1.sum().backward()
    g2 = x.grad
    h = 1e-5                                  # central differences of the NumPy formula
    numeric = (_np_gelu_tanh_derivative(xs + h) - _np_gelu_tanh_derivative(xs - h)) / (2 * h)
    np.testing.assert_allclose(g2.numpy(), numeric, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_float32_values_and_gradient_match_float64_on_a_dense_grid(approximate):
    # float32 exact gelu uses a rational erf (not scipy's): within float32 rounding.
    xs = np.concatenate([np.linspace(-9, 9, 20001), [-1e-30, 1e-30, 1e-8, -3e-4]])
    ref = F.gelu(tg.tensor(xs), approximate=approximate).numpy()
    x32 = tg.tensor(xs.astype(np.float32), requires_grad=True)
    out = F.gelu(x32, approximate=approximate)
    out.sum().backward()
    assert out.dtype == np.float32 and x32.grad.dtype == np.float32
    # NOTE: x (1 + erf(x / sqrt 2)) / 2 cancels in float32 for x << 0 (as torch's float32
    # gelu, which is off by up to 2.5e-7 (1 + |x|) on this grid): the bound is absolute,
    # scaled by 1 + |x|.
    bound = 4e-7 * (1 + np.abs(xs))
    assert np.all(np.abs(out.numpy() - ref) <= bound)
    x64 = tg.tensor(xs, requires_grad=True)
    F.gelu(x64, approximate=approximate).sum().backward()
    assert np.all(np.abs(x32.grad.numpy() - x64.grad.numpy()) <= bound)


def test_gelu_backward_op_broadcasts_g_and_x():
    rng = np.random.default_rng(2)
    g, x = rng.standard_normal((2, 4)), rng.standard_normal(4)
    got = tg._gelu_backward(tg.tensor(g), tg.tensor(x), approximate="tanh")
    np.testing.assert_allclose(got.numpy(), g * _np_gelu_tanh_derivative(x), rtol=1e-12)
    phi, cdf = np.exp(-x * x / 2) / math.sqrt(2 * math.pi), 0.5 * (1 + _erf(x / math.sqrt(2)))
    got = tg._gelu_backward(tg.tensor(g[:1]), tg.tensor(np.stack([x, -x])))
    np.testing.assert_allclose(got.numpy()[0], g[0] * (cdf + x * phi), rtol=1e-12)


def test_prelu_per_channel_broadcasts_on_axis_1_and_gets_gradients():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4))
    w = np.array([0.1, -0.3, 0.6])
    tx, tw = tg.tensor(x, requires_grad=True), tg.tensor(w, requires_grad=True)
    out = F.prelu(tx, tw)
    np.testing.assert_allclose(out.numpy(), np.where(x > 0, x, w[:, None] * x))
    out.sum().backward()
    np.testing.assert_allclose(tw.grad.numpy(), np.where(x > 0, 0, x).sum((0, 2)))
    assert tgt.gradcheck(F.prelu, (tg.tensor(x, requires_grad=True), tg.tensor(w, requires_grad=True)))


def test_glu_and_softmin():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 2))
    np.testing.assert_allclose(F.glu(tg.tensor(x), dim=1).numpy(),
                               x[:, :2] * _sig(x[:, 2:]), rtol=1e-12)
    np.testing.assert_allclose(F.glu(tg.tensor(x)).numpy(), x[..., :1] * _sig(x[..., 1:]))
    np.testing.assert_allclose(F.softmin(tg.tensor(x), dim=0).numpy(), _softmax(-x, 0))
    assert F.softmin(tg.tensor(x), 1, dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.gelu(tg.ones(2), approximate="fast"), ValueError, "approximate"),
    (lambda: F.softplus(tg.ones(2), beta=0), ValueError, "beta"),
    (lambda: F.softplus(tg.ones(2), beta="1"), TypeError, "beta"),
    (lambda: F.celu(tg.ones(2), alpha=0.0), ValueError, "alpha"),
    (lambda: F.elu(tg.ones(2), alpha=None), TypeError, "alpha"),
    (lambda: F.hardtanh(tg.ones(2), 1.0, -1.0), ValueError, "min_val"),
    (lambda: F.glu(tg.ones((2, 3))), ValueError, "even"),
    (lambda: F.glu(tg.ones((2, 4)), dim=2), np.exceptions.AxisError, "glu"),
    (lambda: F.glu(tg.tensor(1.0)), ValueError, "glu"),
    (lambda: F.prelu(tg.ones((2, 3)), tg.ones(2)), ValueError, "prelu"),
    (lambda: F.prelu(tg.ones((2, 3)), tg.ones((3, 1))), ValueError, "prelu"),
    (lambda: F.gelu(tg.tensor([1, 2])), TypeError, "floating"),
    (lambda: F.silu(tg.tensor([1, 2])), TypeError, "floating"),
])
def test_bad_arguments_raise(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


MODULES = [
    (tg.nn.GELU(), F.gelu), (tg.nn.GELU("tanh"), lambda x: F.gelu(x, approximate="tanh")),
    (tg.nn.SiLU(), F.silu), (tg.nn.Mish(), F.mish), (tg.nn.ELU(0.5), lambda x: F.elu(x, 0.5)),
    (tg.nn.SELU(), F.selu), (tg.nn.CELU(alpha=1.5), lambda x: F.celu(x, 1.5)),
    (tg.nn.LeakyReLU(0.1), lambda x: F.leaky_relu(x, 0.1)), (tg.nn.ReLU6(), F.relu6),
    (tg.nn.Hardtanh(-2.0, 2.0), lambda x: F.hardtanh(x, -2.0, 2.0)),
    (tg.nn.Hardsigmoid(), F.hardsigmoid), (tg.nn.Hardswish(inplace=True), F.hardswish),
    (tg.nn.Softplus(beta=2.0, threshold=5.0), lambda x: F.softplus(x, 2.0, 5.0)),
    (tg.nn.Softsign(), F.softsign), (tg.nn.LogSigmoid(), F.logsigmoid),
    (tg.nn.Tanhshrink(), F.tanhshrink), (tg.nn.GLU(0), lambda x: F.glu(x, 0)),
    (tg.nn.Softmin(dim=1), lambda x: F.softmin(x, 1)),
]


@pytest.mark.parametrize("module,f", MODULES, ids=[type(m).__name__ for m, _ in MODULES])
def test_module_is_its_function(module, f):
    x = np.random.default_rng(2).standard_normal((4, 6)) * 3
    np.testing.assert_array_equal(module(tg.tensor(x)).numpy(), f(tg.tensor(x)).numpy())
    assert list(module.parameters()) == []


def test_module_arguments_and_repr():
    assert repr(tg.nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    assert tg.nn.Softplus().beta == 1.0 and tg.nn.Softplus().threshold == 20.0
    with pytest.raises(TypeError, match="ELU"):
        tg.nn.ELU(1.0, 2.0)
    with pytest.raises(TypeError, match="slope"):
        tg.nn.LeakyReLU(slope=0.1)


def test_prelu_module_parameters_and_training():
    m = tg.nn.PReLU(3, init=0.1, dtype=np.float32)
    assert m.weight.shape == (3,) and m.weight.dtype == np.float32
    assert list(m.state_dict()) == ["weight"]
    x = tg.tensor(-np.ones((2, 3, 2), np.float32))
    m(x).sum().backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), [-4.0, -4.0, -4.0])
    assert tg.nn.PReLU().weight.tolist() == [0.25]
    with pytest.raises(ValueError, match="num_parameters"):
        tg.nn.PReLU(0)


# ---------------------------------------------------------------------------------------
# Against PyTorch (deselected unless -m needs_torch)
# ---------------------------------------------------------------------------------------

# name, tapegrad fn, torch fn builder (TF is torch.nn.functional), input
TORCH = [
    ("gelu", F.gelu, lambda TF: TF.gelu),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"),
     lambda TF: lambda x: TF.gelu(x, approximate="tanh")),
    ("silu", F.silu, lambda TF: TF.silu), ("mish", F.mish, lambda TF: TF.mish),
    ("elu", F.elu, lambda TF: TF.elu),
    ("elu_alpha", lambda x: F.elu(x, 0.3), lambda TF: lambda x: TF.elu(x, 0.3)),
    ("selu", F.selu, lambda TF: TF.selu),
    ("celu", lambda x: F.celu(x, 1.7), lambda TF: lambda x: TF.celu(x, 1.7)),
    ("leaky_relu", F.leaky_relu, lambda TF: TF.leaky_relu),
    ("leaky_relu_slope", lambda x: F.leaky_relu(x, -0.4),
     lambda TF: lambda x: TF.leaky_relu(x, -0.4)),
    ("relu6", F.relu6, lambda TF: TF.relu6),
    ("hardtanh", F.hardtanh, lambda TF: TF.hardtanh),
    ("hardtanh_args", lambda x: F.hardtanh(x, -3.0, 0.4),
     lambda TF: lambda x: TF.hardtanh(x, -3.0, 0.4)),
    ("hardsigmoid", F.hardsigmoid, lambda TF: TF.hardsigmoid),
    ("hardswish", F.hardswish, lambda TF: TF.hardswish),
    ("softplus", F.softplus, lambda TF: TF.softplus),
    ("softplus_args", lambda x: F.softplus(x, 2.0, 5.0),
     lambda TF: lambda x: TF.softplus(x, 2.0, 5.0)),
    ("softplus_negbeta", lambda x: F.softplus(x, -1.5, 3.0),
     lambda TF: lambda x: TF.softplus(x, -1.5, 3.0)),
    ("softsign", F.softsign, lambda TF: TF.softsign),
    ("logsigmoid", F.logsigmoid, lambda TF: TF.logsigmoid),
    ("tanhshrink", F.tanhshrink, lambda TF: TF.tanhshrink),
    ("glu", lambda x: F.glu(x[:, 1:]), lambda TF: lambda x: TF.glu(x[:, 1:])),
    ("glu0", lambda x: F.glu(x, 0), lambda TF: lambda x: TF.glu(x, 0)),
    ("softmin0", lambda x: F.softmin(x, 0), lambda TF: lambda x: TF.softmin(x, 0)),
    ("softmin1", lambda x: F.softmin(x, 1), lambda TF: lambda x: TF.softmin(x, 1)),
]
SECOND_ORDER_AT_0_DIFFERS = ("elu", "elu_alpha", "selu", "celu")
# Every kink of every function, and points on both sides of them.
XT = np.concatenate([X, [-20.0, -6.0, -0.4, 0.4 + 1e-9, 2.5, 20.0, 40.0, -2.0, 1.5, 3.5]])[:22]
XT = XT.reshape(2, 11)


def _torch_orders(torch, f, x):
    t = torch.tensor(x, requires_grad=True)
    y = f(t)
    v = torch.tensor(np.linspace(0.5, 1.5, y.numel()).reshape(y.shape))
    (g,) = torch.autograd.grad(y, t, v, create_graph=True)
    try:
        (gg,) = torch.autograd.grad(g, t, torch.ones_like(g), allow_unused=True)
    except RuntimeError:             # "derivative for aten::hardsigmoid_backward is not implemented"
        return y.detach().numpy(), g.detach().numpy(), None
    return y.detach().numpy(), g.detach().numpy(), (np.zeros_like(x) if gg is None else gg.numpy())


def _tg_orders(f, x):
    t = tg.tensor(x, requires_grad=True)
    y = f(t)
    v = np.linspace(0.5, 1.5, y.size).reshape(y.shape)
    y.backward(tg.tensor(v), create_graph=True)
    g = t.grad
    t.grad = None
    if g.requires_grad:
        g.sum().backward()
    gg = np.zeros_like(x) if t.grad is None else t.grad.numpy()
    return y.numpy(), g.detach().numpy(), gg


@pytest.mark.needs_torch
@pytest.mark.parametrize("name,f,tf", TORCH, ids=[r[0] for r in TORCH])
def test_matches_torch_forward_grad_second_order(name, f, tf):
    torch = pytest.importorskip("torch")
    expected, got = _torch_orders(torch, tf(torch.nn.functional), XT), _tg_orders(f, XT)
    # NOTE: PyTorch computes hardsigmoid's derivative with a float 1/6 and celu's with a
    # float 1/alpha (relative errors ~1e-7).
    rtol = 1e-6 if name in ("hardsigmoid", "celu") else 1e-10
    for order, (e, g) in enumerate(zip(expected, got)):
        if e is None:                  # torch has no second derivative (hardsigmoid)
            continue
        if order == 2 and name in SECOND_ORDER_AT_0_DIFFERS:
            # Documented: tapegrad's second derivative at exactly 0 is the x <= 0
            # branch's; PyTorch's double backward masks x < 0 and gives 0.
            assert g[XT == 0] != 0 and (e[XT == 0] == 0).all()
            e, g = e[XT != 0], g[XT != 0]
        np.testing.assert_allclose(g, e, rtol=rtol, atol=1e-12, err_msg=f"order {order}")


@pytest.mark.needs_torch
@pytest.mark.parametrize("shape,wshape", [((2, 3, 4), (3,)), ((2, 3, 4), (1,)), ((2, 3), (3,)),
                                          ((5,), (1,)), ((2, 3, 2, 2), (3,))])
def test_prelu_matches_torch(shape, wshape):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    x.flat[0] = 0.0
    w = rng.uniform(-0.5, 0.5, wshape)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = torch.nn.functional.prelu(tx, tw)
    gx, gw = torch.autograd.grad((y * y).sum(), (tx, tw))
    ax, aw = tg.tensor(x, requires_grad=True), tg.tensor(w, requires_grad=True)
    z = F.prelu(ax, aw)
    (z * z).sum().backward()
    np.testing.assert_allclose(z.numpy(), y.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ax.grad.numpy(), gx.numpy(), rtol=1e-12)
    np.testing.assert_allclose(aw.grad.numpy(), gw.numpy(), rtol=1e-12)
    assert torch.nn.PReLU(wshape[0]).weight.tolist() == tg.nn.PReLU(wshape[0]).weight.tolist()


def test_docstring_examples_run():
    from tapegrad.testing import run_doctests
    from tapegrad_nn import activation_modules, activations
    for module in (activations, activation_modules):
        result = run_doctests(module)
        assert result.attempted > 3 and result.failed == 0, module
