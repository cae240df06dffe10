"""The backward ops (relu_backward, tanh_backward, ...; Note: [backward ops] in ops.py):
bit for bit the NumPy expressions the rules used before, on a grid of special values
(NaN, +-inf, +-0.0, subnormals, huge) in float32 and float64, through the C loop and
through every fallback path; one op per gradient in eager backward; second derivatives
against the closed forms; and (needs_torch) against PyTorch."""

import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad_elementwise import _backward_kernels as K

def grad(output, x, v=None, create_graph=False):
    """d sum(output * v)/dx (v: ones by default), by backward(): this distribution's tests
    run without tapegrad-higher (tg.grad) and tapegrad-shape (.sum())."""
    x.grad = None
    output.backward(tg.ones_like(output) if v is None else v, create_graph=create_graph)
    g, x.grad = x.grad, None
    return g


# Each backward op: (forward op, the NumPy expression of its gradient from (g, ans-or-x),
# whether the second argument is the forward's result (else its input)).
COMPOSITES = {
    "relu_backward": (tg.relu, lambda g, y: np.where(y > 0, g, 0), True),
    "tanh_backward": (tg.tanh, lambda g, y: g * (1 - y * y), True),
    "sigmoid_backward": (tg.sigmoid, lambda g, y: g * y * (1 - y), True),
    "sqrt_backward": (tg.sqrt, lambda g, y: g / (2 * y), True),
    "abs_backward": (tg.abs, lambda g, x: g * np.sign(x), False),
    "square_backward": (tg.square, lambda g, x: g * (2 * x), False),
    "sin_backward": (tg.sin, lambda g, x: g * np.cos(x), False),
    "cos_backward": (tg.cos, lambda g, x: -g * np.sin(x), False),
}
NAMES = sorted(COMPOSITES)


def special_values(dtype):
    """Every value class where a rounding, a mask or a sign could differ."""
    info = np.finfo(dtype)
    v = [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-3,
         -1e-3, 0.999999, -0.999999, 3.0, -7.5, 1e30, -1e30,
         float(info.tiny), -float(info.tiny), float(info.smallest_subnormal),
         -float(info.smallest_subnormal), float(info.max), -float(info.max),
         float(info.eps), 1 - float(info.epsneg)]
    return np.array(v, dtype=dtype)


def grid(dtype):
    """All pairs (g, y) of special values plus random ones, as two flat arrays."""
    s = special_values(dtype)
    g, y = np.meshgrid(s, s, indexing="ij")
    rng = np.random.default_rng(5)
    r = rng.standard_normal((2, 500)) * rng.choice([1e-3, 1.0, 10.0], (2, 500))
    return (np.concatenate([g.ravel(), r[0]]).astype(dtype),
            np.concatenate([y.ravel(), r[1]]).astype(dtype))


def assert_same_bits(actual, expected):
    """Equal values, dtype and sign of zero; NaN where NaN (NumPy leaves a NaN's sign
    to the hardware, so only NaN-ness is compared)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    a, e = actual[~nan], expected[~nan]
    np.testing.assert_array_equal(a.view(np.uint8), e.view(np.uint8))


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # inf - inf and the like
        with np.errstate(all="ignore"):
            yield


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_kernel_is_bit_identical_to_the_composite_on_special_values(name, dtype):
    g, y = grid(dtype)
    assert_same_bits(getattr(K, name)(g, y), COMPOSITES[name][1](g, y))


@pytest.mark.parametrize("name", NAMES)
def test_kernel_on_a_large_array_is_bit_identical(name):
    # (the loop that releases the GIL)
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float64):
        g, y = rng.standard_normal((2, 300, 257)).astype(dtype)
        assert_same_bits(getattr(K, name)(g, y), COMPOSITES[name][1](g, y))


def _fallback_cases():
    """Inputs the C loop does not take: each runs the NumPy expression."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 6))
    big_endian = a.astype(">f8")
    return {
        "float16": (a.astype(np.float16), a[::-1].astype(np.float16)),
        "longdouble": (a.astype(np.longdouble), a[::-1].astype(np.longdouble)),
        "mixed dtypes": (a.astype(np.float32), a[::-1].copy()),
        "transposed": (a.T, a[::-1].T),
        "strided": (a[:, ::2], a[::-1, ::2]),
        "broadcast": (a, a[0]),
        "0-d": (np.array(0.3), np.array(-0.7)),
        "big-endian": (big_endian, big_endian[::-1]),
        "empty": (np.empty((0, 3)), np.empty((0, 3))),
        "unaligned": (_unaligned(a), _unaligned(a[::-1])),
    }


def _unaligned(a):
    """A copy of `a` whose data starts at an odd address (aligned=False)."""
    buf = np.frombuffer(bytearray(a.nbytes + 1), np.uint8)[1:]
    out = buf.view(a.dtype).reshape(a.shape)
    out[...] = a
    assert not out.flags.aligned
    return out


@pytest.mark.parametrize("case", sorted(_fallback_cases()))
@pytest.mark.parametrize("name", NAMES)
def test_inputs_outside_the_c_loop_get_the_composite_exactly(name, case):
    g, y = _fallback_cases()[case]
    got, want = getattr(K, name)(g, y), COMPOSITES[name][1](g, y)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_eager_gradient_is_the_composite_bit_for_bit(name, dtype):
    forward, composite, from_result = COMPOSITES[name]
    g, x = grid(dtype)
    xt = tg.tensor(x, requires_grad=True)
    out = forward(xt)
    out.backward(tg.tensor(g))
    y = out.numpy() if from_result else x
    assert_same_bits(xt.grad.numpy(), composite(g, y))


def test_relu_gradient_at_its_kink_and_at_special_inputs():
    x = tg.tensor([0.0, -0.0, np.nan, np.inf, -np.inf, 2.0, -2.0], requires_grad=True)
    tg.relu(x).backward(tg.tensor([5.0, 5.0, 5.0, 5.0, 5.0, 5.0, np.nan]))
    # 0 at the kink, at -0.0 and at NaN (the mask ans > 0 is false there); never 0 * g.
    assert_same_bits(x.grad.numpy(), np.array([0.0, 0.0, 0.0, 5.0, 0.0, 5.0, 0.0]))


@pytest.mark.parametrize("name", NAMES)
def test_eager_backward_runs_one_op_per_gradient(name):
    forward = COMPOSITES[name][0]
    x = tg.tensor(np.linspace(0.1, 0.9, 5), requires_grad=True)
    v = tg.tensor(np.linspace(-1, 1, 5), requires_grad=True)  # (relu's gradient depends
    gx = grad(forward(x), x, v, create_graph=True)       # on v only)
    assert gx.grad_fn.name == name
    # its inputs are v itself and the forward's result (its node) or input: no op between
    (g_in, _), (second, _) = gx.grad_fn.next_functions
    assert g_in is v
    if name in ("relu_backward", "abs_backward"):
        assert second is None          # (a mask or sign: not differentiable)
    elif COMPOSITES[name][2]:
        assert second.name == forward.name
    else:
        assert second is x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float32_stays_float32(dtype):
    x = tg.tensor(np.linspace(0.1, 0.9, 6).astype(dtype), requires_grad=True)
    for name in NAMES:
        x.grad = None
        out = COMPOSITES[name][0](x)
        out.backward(tg.ones_like(out))
        assert x.grad.dtype == dtype, name


# Second derivatives d/dx (d f / dx) of sum(f(x)), in closed form with NumPy.
SECOND = {
    "relu_backward": lambda x: np.zeros_like(x),
    "tanh_backward": lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2),
    "sigmoid_backward": lambda x: (lambda s: s * (1 - s) * (1 - 2 * s))(1 / (1 + np.exp(-x))),
    "sqrt_backward": lambda x: -0.25 * x ** -1.5,
    "abs_backward": lambda x: np.zeros_like(x),
    "square_backward": lambda x: np.full_like(x, 2.0),
    "sin_backward": lambda x: -np.sin(x),
    "cos_backward": lambda x: -np.cos(x),
}


@pytest.mark.parametrize("name", NAMES)
def test_double_backward_matches_the_second_derivative(name):
    x_np = np.array([0.3, 0.7, 1.4, 2.2, -0.6, -1.9])
    if name == "sqrt_backward":
        x_np = np.abs(x_np)
    x = tg.tensor(x_np, requires_grad=True)
    gx = grad(COMPOSITES[name][0](x), x, create_graph=True)
    if name in ("relu_backward", "abs_backward"):   # a mask or sign of x times a constant
        assert not gx.requires_grad
        return
    ggx = grad(gx, x)
    np.testing.assert_allclose(ggx.numpy(), SECOND[name](x_np), rtol=1e-12, atol=1e-15)


def test_relu_backward_is_differentiable_in_the_gradient():
    x = tg.tensor(np.array([-1.0, 0.0, 0.5, 2.0]), requires_grad=True)
    v = tg.tensor(np.array([1.0, 2.0, 3.0, 4.0]), requires_grad=True)
    gx = grad(tg.relu(x), x, v, create_graph=True)
    gv = grad(gx * gx, v)
    np.testing.assert_array_equal(gv.numpy(), 2 * np.array([0.0, 0.0, 3.0, 4.0]))


@pytest.mark.parametrize("name", NAMES)
def test_third_derivative_through_the_backward_ops_rules(name):
    # the backward ops' rules call backward ops themselves: check one more order by
    # finite differences of the second derivative
    if name in ("relu_backward", "abs_backward", "square_backward"):
        pytest.skip("the second derivative is constant (checked above)")
    x_np = np.array([0.4, 1.1, 1.7])
    f = COMPOSITES[name][0]

    def second(v):
        x = tg.tensor(v, requires_grad=True)
        gx = grad(f(x), x, create_graph=True)
        ggx = grad(gx, x, create_graph=True, )
        return x, ggx

    x, ggx = second(x_np)
    third = grad(ggx, x)
    h = 1e-6
    numeric = (second(x_np + h)[1].numpy() - second(x_np - h)[1].numpy()) / (2 * h)
    np.testing.assert_allclose(third.numpy(), numeric, rtol=1e-5, atol=1e-7)


def test_the_rule_runs_the_composite_where_the_backward_op_has_no_kernel(monkeypatch):
    # (a device without the backward op's kernel, such as cuda: the rule must not call it)
    x = tg.tensor(np.array([-0.5, 0.25, 1.5]), requires_grad=True)
    y = np.tanh(x.numpy())
    monkeypatch.delitem(tg.tanh_backward.kernels, "cpu")
    gx = grad(tg.tanh(x), x, create_graph=True)
    assert gx.grad_fn.name == "multiply"            # g * (1 - ans * ans), op by op
    np.testing.assert_array_equal(gx.numpy(), 1 * (1 - y * y))


# ---------------------------------------------------------------------------------------
# PyTorch
# ---------------------------------------------------------------------------------------

TORCH = {"relu_backward": "relu", "tanh_backward": "tanh", "sigmoid_backward": "sigmoid",
         "sqrt_backward": "sqrt", "abs_backward": "abs", "square_backward": "square",
         "sin_backward": "sin", "cos_backward": "cos"}


@pytest.mark.needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_first_and_second_derivatives_match_torch(name, dtype):
    torch = pytest.importorskip("torch")
    x_np = np.array([0.0, 0.3, 0.7, 1.4, 2.2, 5.0, -0.6, -1.9, -0.0, np.inf, -np.inf],
                    dtype=dtype)
    if name == "sqrt_backward":
        x_np = np.abs(x_np)
    g_np = np.linspace(-2, 2, x_np.size).astype(dtype)
    tx = torch.tensor(x_np, requires_grad=True)
    (tgx,) = torch.autograd.grad(getattr(torch, TORCH[name])(tx), tx, torch.tensor(g_np),
                                 create_graph=True)
    x = tg.tensor(x_np, requires_grad=True)
    gx = grad(COMPOSITES[name][0](x), x, tg.tensor(g_np), create_graph=True)
    assert gx.dtype == dtype
    np.testing.assert_allclose(gx.numpy(), tgx.detach().numpy(), rtol=2e-6, atol=1e-30)
    finite = np.isfinite(x_np) & (x_np != 0)       # (second derivatives at the kinks and at
    if name in ("relu_backward", "abs_backward"):  # inf are conventions: compared above)
        return
    (tggx,) = torch.autograd.grad(tgx.sum(), tx)
    ggx = grad(gx, x)
    np.testing.assert_allclose(ggx.numpy()[finite], tggx.numpy()[finite], rtol=2e-5)


@pytest.mark.needs_torch
def test_relu_gradient_at_nan_is_zero_where_torch_passes_g():
    # The documented difference (docs/performance.md, backward ops): tapegrad's relu
    # gradient is where(ans > 0, g, 0), 0 at a NaN input; torch's threshold_backward
    # passes g there. Both forward values are NaN.
    torch = pytest.importorskip("torch")
    tx = torch.tensor([np.nan, 1.0], requires_grad=True)
    torch.relu(tx).backward(torch.tensor([3.0, 3.0]))
    x = tg.tensor([np.nan, 1.0], requires_grad=True)
    tg.relu(x).backward(tg.tensor([3.0, 3.0]))
    assert x.grad.numpy().tolist() == [0.0, 3.0]
    assert tx.grad.numpy().tolist() == [3.0, 3.0]
