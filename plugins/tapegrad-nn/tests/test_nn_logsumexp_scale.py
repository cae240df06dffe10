"""logsumexp's scale factors b= (scipy.special.logsumexp): values and dtypes against scipy,
gradients in a and b (also where b == 0), the edge cases scipy defines, and refusals.

scipy is not a dependency of tapegrad-nn: the comparisons with it skip where it is not
installed (tests/test_isolation.py runs this file with only tapegrad-nn's dependencies);
the gradient checks and refusals run everywhere."""

import inspect
import warnings

import numpy as np
import pytest
import tapegrad as tg

RNG = np.random.default_rng(31)


def r(*shape):
    return RNG.standard_normal(shape)


@pytest.fixture
def scipy_special():
    return pytest.importorskip("scipy.special", reason="scipy is not installed")


def close(t, expected):
    expected = np.asarray(expected)
    got = np.asarray(t)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got, expected)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("ashape,bshape,axis", [
    ((3, 4), (3, 4), None), ((3, 4), (3, 4), 1), ((3, 4), (4,), 0), ((3, 4), (3, 1), -1),
    ((2, 3, 4), (3, 1), (0, 2)), ((4,), (), None), ((), (), None), ((3, 1), (1, 4), 1),
])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matches_scipy(scipy_special, ashape, bshape, axis, keepdims):
    a, b = 3 * r(*ashape), np.abs(r(*bshape)) + 0.1
    if keepdims and not ashape:
        # scipy makes a 0-d `a` 1-D first (shape (1,)); tapegrad keeps NumPy's keepdims rule
        out = tg.logsumexp(a, b=b, keepdims=True)
        assert out.shape == () and np.allclose(out.numpy(), scipy_special.logsumexp(a, b=b))
        return
    close(tg.logsumexp(tg.tensor(a), axis=axis, b=tg.tensor(b), keepdims=keepdims),
          scipy_special.logsumexp(a, axis=axis, b=b, keepdims=keepdims))


def test_edge_cases_match_scipy(scipy_special):
    cases = [
        (np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, -0.5])),       # mixed signs, positive
        (np.array([1.0, np.inf, 3.0]), np.array([1.0, 0.0, 2.0])),     # inf where b == 0
        (np.array([1.0, np.nan, 3.0]), np.array([1.0, 0.0, 2.0])),     # nan where b == 0
        (np.array([1000.0, 0.0]), np.array([0.0, 1.0])),               # huge a, b == 0
        (np.array([800.0, 801.0]), np.array([1.0, 2.0])),              # no overflow
        (np.array([-np.inf, -np.inf]), np.array([1.0, 1.0])),          # log(0) = -inf
        (np.array([1.0, 2.0]), np.array([0.0, 0.0])),                  # all b zero: -inf
        (np.array([1.0, np.inf]), np.array([1.0, 1.0])),               # inf
        (np.array([1.0, 2.0]), np.array([1.0, -3.0])),                 # negative sum: nan
    ]
    with np.errstate(divide="ignore", invalid="ignore"):
        for a, b in cases:
            close(tg.logsumexp(a, b=b), scipy_special.logsumexp(a, b=b))


def test_values_match_the_direct_formula_and_scipys_conventions():
    # Without scipy: log(sum(b * exp(a))) computed directly where it does not overflow.
    a, b = r(3, 4), np.abs(r(3, 4)) + 0.1
    close(tg.logsumexp(a, axis=1, b=b), np.log(np.sum(b * np.exp(a), axis=1)))
    close(tg.logsumexp(np.array([1000.0, 1001.0]), b=np.array([2.0, 1.0])),
          1000.0 + np.log(2.0 + np.e))                                 # no overflow
    close(tg.logsumexp(np.array([1.0, np.inf, 2.0]), b=np.array([1.0, 0.0, 3.0])),
          np.log(np.e + 3.0 * np.e ** 2))                              # b == 0 drops the inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # scipy's values, without warnings
        assert tg.logsumexp(np.array([1.0, 2.0]), b=np.zeros(2)).item() == -np.inf
        assert tg.logsumexp(np.full(2, -np.inf), b=np.ones(2)).item() == -np.inf
        assert np.isnan(tg.logsumexp(np.array([1.0, 2.0]), b=np.array([1.0, -3.0])).item())


def test_dtypes_follow_scipy(scipy_special):
    f32 = r(4).astype(np.float32)
    for b in (0.5, 2, np.float32(0.5), np.ones(4, np.float32), np.ones(4), np.arange(4)):
        got = tg.logsumexp(tg.tensor(f32), b=b)
        expected = scipy_special.logsumexp(f32, b=b)
        assert got.dtype == expected.dtype, (b, got.dtype, expected.dtype)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
    close(tg.logsumexp(np.arange(4), b=np.arange(4)), scipy_special.logsumexp(np.arange(4), b=np.arange(4)))


def test_gradient_in_a_and_b_is_b_exp_a_minus_f_and_exp_a_minus_f():
    a = tg.tensor(r(3, 4), requires_grad=True)
    b = tg.tensor(np.array([0.5, 0.0, 2.0, 1.0]), requires_grad=True)
    out = tg.logsumexp(a, axis=1, b=b)
    w = r(3)
    (out * w).sum().backward()
    e = np.exp(a.numpy() - out.numpy()[:, None])
    np.testing.assert_allclose(a.grad.numpy(), w[:, None] * b.numpy() * e, rtol=1e-12)
    # also where b == 0: d/db = exp(a - F), though that entry adds nothing to the value
    np.testing.assert_allclose(b.grad.numpy(), (w[:, None] * e).sum(0), rtol=1e-12)
    assert b.grad.numpy()[1] != 0


def test_second_order_gradients_including_zero_weights():
    a = tg.tensor(r(2, 3), requires_grad=True)
    b = tg.tensor(np.array([[1.0, 0.0, 0.5], [2.0, 0.3, 0.0]]), requires_grad=True)
    f = lambda a, b: tg.logsumexp(a, axis=-1, b=b)         # noqa: E731
    assert tg.gradcheck(f, (a, b)) and tg.gradgradcheck(f, (a, b))


def test_hessian_matches_the_closed_form():
    # F = log(sum(b exp(a))), p = b exp(a - F): d2F/da2 = diag(p) - p p^T.
    b = np.array([0.5, 2.0, 1.0])
    a0 = r(3)
    a = tg.tensor(a0, requires_grad=True)
    tg.logsumexp(a, b=b).backward(create_graph=True)
    grad, rows = a.grad, []
    for i in range(3):              # the Hessian row by row (tg.hessian is tapegrad-higher's)
        a.grad = None
        grad[i].backward(retain_graph=True)
        rows.append(a.grad.numpy())
    hess = np.stack(rows)
    p = b * np.exp(a0 - np.log(np.sum(b * np.exp(a0))))
    np.testing.assert_allclose(hess, np.diag(p) - np.outer(p, p), rtol=1e-10, atol=1e-12)


def test_without_b_it_is_the_op_and_a_method(scipy_special):
    x = tg.tensor(r(3, 4), requires_grad=True)
    assert tg.logsumexp(x).grad_fn.name == "_logsumexp"      # b=None: the one-kernel op
    close(x.logsumexp(axis=1, b=np.ones(4) * 2), scipy_special.logsumexp(x.numpy(), axis=1, b=2 * np.ones(4)))
    close(x.logsumexp(1), scipy_special.logsumexp(x.numpy(), axis=1))
    # tg.logsumexp is F.logsumexp wrapped to take PyTorch's dim= (tapegrad._dim_keywords)
    assert inspect.unwrap(tg.logsumexp) is tg.nn.functional.logsumexp


def test_refusals():
    x = tg.tensor(r(3, 4))
    with pytest.raises(ValueError, match="logsumexp: return_sign=True is not supported"):
        tg.logsumexp(x, b=np.ones(4), return_sign=True)
    with pytest.raises(ValueError, match=r"logsumexp: b of shape \(3,\) does not broadcast with a of shape \(3, 4\)"):
        tg.logsumexp(x, b=np.ones(3))
    with pytest.raises(TypeError, match="logsumexp: complex a or b"):
        tg.logsumexp(x, b=np.ones(4) * 1j)
    with pytest.raises(np.exceptions.AxisError, match="logsumexp: axis 2 is out of bounds"):
        tg.logsumexp(x, axis=2, b=np.ones(4))
