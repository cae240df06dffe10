"""silu_backward and softplus_backward (Note: [silu_backward and softplus_backward] in
activations.py): the numbers of the compositions they replace, bit for bit, on a grid of
special values; one op per gradient; second derivatives against the closed forms and
(needs_torch) against PyTorch."""

import warnings

import numpy as np
import pytest
import tapegrad as tg

F = tg.nn.functional

def grad(output, x, v=None, create_graph=False):
    """d(output)/dx contracted with v (ones for a scalar output), by backward() (the tests
    of this distribution may not use tapegrad-higher's tg.grad); None if none reaches x."""
    x.grad = None
    output.backward(v, create_graph=create_graph)
    g, x.grad = x.grad, None
    return g



def sigmoid(x):
    return tg.sigmoid(np.asarray(x)).numpy()     # the forward op's kernel (not under test)


def silu_grad(g, x):
    s = sigmoid(x)
    return g * (s * (1.0 + x * (1.0 - s)))


def softplus_grad(g, x, beta=1.0, threshold=20.0):
    bx = x * beta
    return np.where(bx > threshold, g, g * sigmoid(bx))


def grid(dtype):
    s = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 19.999, 20.0, 20.001, 40.0,
                  -40.0, 800.0, -800.0, 1e-30, -1e-30, 3.5, -7.25], dtype=dtype)
    g, x = np.meshgrid(s, s, indexing="ij")
    r = np.random.default_rng(3).standard_normal((2, 300)) * 5
    return (np.concatenate([g.ravel(), r[0]]).astype(dtype),
            np.concatenate([x.ravel(), r[1]]).astype(dtype))


def assert_same_bits(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    np.testing.assert_array_equal(actual[~nan].view(np.uint8), expected[~nan].view(np.uint8))


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with np.errstate(all="ignore"):
            yield


CASES = {
    "silu": (F.silu, silu_grad),
    "softplus": (F.softplus, softplus_grad),
    "softplus_beta2_t5": (lambda x: F.softplus(x, 2.0, 5.0),
                          lambda g, x: softplus_grad(g, x, 2.0, 5.0)),
    "softplus_negative_beta": (lambda x: F.softplus(x, beta=-1.5, threshold=3.0),
                               lambda g, x: softplus_grad(g, x, -1.5, 3.0)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_eager_gradient_is_the_composition_bit_for_bit(case, dtype):
    forward, reference = CASES[case]
    g, x = grid(dtype)
    xt = tg.tensor(x, requires_grad=True)
    forward(xt).backward(tg.tensor(g))
    assert_same_bits(xt.grad.numpy(), reference(g, x))


def test_kernels_fall_back_on_mixed_dtypes_and_broadcasting():
    x = np.linspace(-3, 3, 12).reshape(3, 4)
    g32 = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(tg.silu_backward(g32, x).numpy(), silu_grad(g32, x))
    np.testing.assert_array_equal(tg.silu_backward(np.ones(4), x[0:1]).numpy(),
                                  silu_grad(np.ones(4), x[0:1]))
    np.testing.assert_array_equal(tg.softplus_backward(g32, x, 2.0, 1.0).numpy(),
                                  softplus_grad(g32, x, 2.0, 1.0))
    np.testing.assert_array_equal(tg.softplus_backward(np.ones((2, 3, 4)), x).numpy(),
                                  softplus_grad(np.ones((2, 3, 4)), x))


@pytest.mark.parametrize("name,forward", [("silu_backward", F.silu),
                                          ("softplus_backward", F.softplus)])
def test_eager_backward_is_one_op(name, forward):
    x = tg.tensor(np.linspace(-2, 2, 5), requires_grad=True)
    v = tg.tensor(np.linspace(-1, 1, 5), requires_grad=True)
    gx = grad(forward(x), x, v, create_graph=True)
    assert gx.grad_fn.name == name
    (g_in, _), (x_in, _) = gx.grad_fn.next_functions
    assert g_in is v and x_in is x


def _silu2(x):
    s = 1 / (1 + np.exp(-x))
    return s * (1 - s) * (2 + x * (1 - 2 * s))


def _softplus2(x, beta=1.0, threshold=20.0):
    s = 1 / (1 + np.exp(-beta * x))
    return np.where(beta * x < threshold, beta * s * (1 - s), 0.0)


@pytest.mark.parametrize("forward,second", [
    (F.silu, _silu2), (F.softplus, _softplus2),
    (lambda x: F.softplus(x, 2.0, 3.0), lambda x: _softplus2(x, 2.0, 3.0)),
    (lambda x: F.softplus(x, -0.5, 1.0), lambda x: _softplus2(x, -0.5, 1.0))])
def test_double_backward_matches_the_second_derivative(forward, second):
    x_np = np.array([-6.0, -1.3, -0.2, 0.4, 1.1, 1.6, 2.5, 7.0])
    x = tg.tensor(x_np, requires_grad=True)
    gx = grad(forward(x).sum(), x, create_graph=True)
    ggx = grad(gx.sum(), x)
    np.testing.assert_allclose(ggx.numpy(), second(x_np), rtol=1e-12, atol=1e-15)


def test_softplus_at_the_threshold_keeps_pytorchs_conventions():
    # first derivative: the sigmoid branch's at beta x == threshold; second: 0 there
    x = tg.tensor(np.array([2.0, 2.5]), requires_grad=True)
    gx = grad(F.softplus(x, 1.0, 2.0).sum(), x, create_graph=True)
    np.testing.assert_array_equal(gx.numpy(), [1 / (1 + np.exp(-2.0)), 1.0])
    ggx = grad(gx.sum(), x)
    np.testing.assert_array_equal(ggx.numpy(), [0.0, 0.0])


@pytest.mark.needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,args", [("silu", ()), ("softplus", ()),
                                       ("softplus", (2.0, 3.0)), ("softplus", (-1.5, 2.0))])
def test_first_and_second_derivatives_match_torch(name, args, dtype):
    torch = pytest.importorskip("torch")
    x_np = np.array([-30.0, -6.0, -1.3, -0.2, 0.0, 0.4, 1.1, 1.5, 2.5, 7.0, 30.0], dtype=dtype)
    g_np = np.linspace(-2, 2, x_np.size).astype(dtype)
    tx = torch.tensor(x_np, requires_grad=True)
    (tgx,) = torch.autograd.grad(getattr(torch.nn.functional, name)(tx, *args), tx,
                                 torch.tensor(g_np), create_graph=True)
    (tggx,) = torch.autograd.grad(tgx.sum(), tx)
    x = tg.tensor(x_np, requires_grad=True)
    gx = grad(getattr(F, name)(x, *args), x, tg.tensor(g_np), create_graph=True)
    ggx = grad(gx.sum(), x)
    assert gx.dtype == dtype and ggx.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(gx.numpy(), tgx.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(ggx.numpy(), tggx.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,forward,reference", [
    ("silu_backward", F.silu, silu_grad), ("softplus_backward", F.softplus, softplus_grad)])
def test_the_composition_runs_where_the_backward_op_has_no_kernel(monkeypatch, name, forward,
                                                                  reference):
    # (a device without the backward op's kernel, such as cuda)
    x_np = np.linspace(-3, 3, 7)
    monkeypatch.delitem(getattr(tg, name).kernels, "cpu")
    x = tg.tensor(x_np, requires_grad=True)
    gx = grad(forward(x).sum(), x, create_graph=True)
    assert gx.grad_fn.name != name
    np.testing.assert_array_equal(gx.numpy(), reference(np.ones(7), x_np))
