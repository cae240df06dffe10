"""dot: numpy.dot's rules for every dimension, its gradients and its errors."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck

RNG = np.random.default_rng(7)

CASES = [
    ((3,), (3,)),                 # inner product -> 0-d
    ((2, 3), (3, 4)),             # matrix product
    ((2, 3), (3,)),
    ((3,), (3, 2)),
    ((2, 3, 4), (4,)),            # sum product over the last axes
    ((4,), (2, 4, 3)),
    ((2, 3, 4), (4, 2)),
    ((2, 3), (4, 3, 2)),          # N-d . M-d -> (2, 4, 2)
    ((2, 2, 3), (2, 3, 3, 2)),    # -> (2, 2, 2, 3, 2)
    ((3,), ()),                   # a 0-d operand multiplies
    ((), (2, 3)),
    ((), ()),
]
IDS = [f"{a}.{b}" for a, b in CASES]


def rand(shape, dtype=np.float64):
    return np.asarray(RNG.standard_normal(shape)).astype(dtype)


def leaf(a):
    return tg.tensor(a, requires_grad=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("xs, ys", CASES, ids=IDS)
def test_values_match_numpy(xs, ys, dtype):
    a, b = rand(xs, dtype), rand(ys, dtype)
    out = tg.dot(leaf(a), leaf(b))
    expected = np.dot(a, b)
    assert out.shape == np.shape(expected)
    assert out.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(out.numpy(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("xs, ys", CASES, ids=IDS)
def test_gradients_match_finite_differences(xs, ys):
    x, y = leaf(rand(xs)), leaf(rand(ys))
    assert gradcheck(tg.dot, (x, y))
    out = tg.dot(x, y)
    out.backward(tg.ones(out.shape))
    assert x.grad.shape == x.shape and y.grad.shape == y.shape


def test_method_numpy_dispatch_and_plain_arguments():
    a, b = rand((2, 3)), rand((3, 2))
    x = leaf(a)
    for out in (x.dot(b), np.dot(x, b), tg.dot(x, b.tolist()), tg.dot(a, leaf(b))):
        assert isinstance(out, tg.Tensor) and out.requires_grad
        np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-12)
    np.testing.assert_allclose(tg.dot(x, 2.0).numpy(), 2.0 * a)


def test_second_derivative_of_a_quadratic_form():
    # f(x) = x . (A . x): df/dx = (A + A^T) x, d<df/dx, v>/dx = (A + A^T) v
    A_, x_, v_ = rand((3, 3)), rand(3), rand(3)
    x = leaf(x_)
    tg.dot(x, tg.dot(tg.tensor(A_), x)).backward(create_graph=True)
    gx, x.grad = x.grad, None
    np.testing.assert_allclose(gx.numpy(), (A_ + A_.T) @ x_, rtol=1e-12)
    tg.dot(gx, tg.tensor(v_)).backward()
    np.testing.assert_allclose(x.grad.numpy(), (A_ + A_.T) @ v_, rtol=1e-12)


@pytest.mark.parametrize("xs, ys", [((3, 4), (5, 2)), ((3,), (4,)), ((2, 3), (2,)),
                                    ((3,), (2, 3)), ((2, 3), (4, 2, 5))], ids=str)
def test_misaligned_shapes_name_dot_and_both_shapes(xs, ys):
    with pytest.raises(ValueError, match="dot: shapes") as info:
        tg.dot(tg.ones(xs), tg.ones(ys))
    assert str(xs) in str(info.value) and str(ys) in str(info.value)
    with pytest.raises(ValueError):
        np.dot(np.ones(xs), np.ones(ys))
