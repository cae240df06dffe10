"""tg.scipy.stats: values against scipy.stats (inside and outside the support, invalid
parameters), gradients against finite differences of scipy.stats itself, argument forms
and errors."""

import numpy as np
import pytest
import scipy.stats as st
import tapegrad as tg

T = tg.scipy.stats


def _t(v):
    return tg.tensor(np.asarray(v, dtype=float), requires_grad=True)


def fd_grad(f, args, i, eps=1e-6):
    """The gradient of sum(f(*args)) in args[i] by central differences of SciPy's f."""
    args = [np.array(a, dtype=float) for a in args]
    out = np.zeros_like(args[i])
    for idx in np.ndindex(args[i].shape):
        hi = [a.copy() for a in args]
        lo = [a.copy() for a in args]
        hi[i][idx] += eps
        lo[i][idx] -= eps
        out[idx] = (np.sum(f(*hi)) - np.sum(f(*lo))) / (2 * eps)
    return out


def check_grads(ours, theirs, args, rtol=1e-5):
    ts = [_t(a) for a in args]
    ours(*ts).sum().backward()
    for i, t in enumerate(ts):
        np.testing.assert_allclose(t.grad.numpy(), fd_grad(theirs, args, i), rtol=rtol,
                                   atol=1e-7, err_msg=f"argument {i}")


X = np.array([-3.0, -0.5, 0.0, 0.7, 2.0, 5.0])
XPOS = np.array([0.2, 0.9, 1.5, 4.0])


@pytest.mark.parametrize("method", ["pdf", "logpdf", "cdf", "logcdf"])
def test_norm_matches_scipy(method):
    for kw in ({}, {"loc": 1.5}, {"loc": -1.0, "scale": 2.5}):
        np.testing.assert_allclose(getattr(T.norm, method)(tg.tensor(X), **kw).numpy(),
                                   getattr(st.norm, method)(X, **kw), rtol=1e-13)
    check_grads(getattr(T.norm, method), getattr(st.norm, method), (X, 0.3, 1.7))
    with np.errstate(invalid="ignore"):
        assert np.isnan(getattr(T.norm, method)(tg.tensor([1.0]), 0.0, -1.0).numpy()).all()


def test_norm_logcdf_is_accurate_far_in_the_tail():
    np.testing.assert_allclose(T.norm.logcdf(tg.tensor([-40.0])).numpy(),
                               st.norm.logcdf(-40.0), rtol=1e-13)


@pytest.mark.parametrize("method", ["pdf", "logpdf"])
def test_t_matches_scipy_and_differentiates_df(method):
    np.testing.assert_allclose(getattr(T.t, method)(tg.tensor(X), 3.5, 0.5, 2.0).numpy(),
                               getattr(st.t, method)(X, 3.5, 0.5, 2.0), rtol=1e-12)
    check_grads(getattr(T.t, method), getattr(st.t, method), (X, 2.5, 0.2, 1.3))


@pytest.mark.parametrize("dist,shapes", [("gamma", (2.5,)), ("chi2", (3.0,)),
                                         ("beta", (2.0, 3.5))])
@pytest.mark.parametrize("method", ["pdf", "logpdf"])
def test_shape_parameter_distributions_match_scipy(dist, shapes, method):
    ours, theirs = getattr(getattr(T, dist), method), getattr(getattr(st, dist), method)
    x = np.array([-0.5, 0.0, 0.1, 0.5, 0.9, 1.0, 3.0])
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(ours(tg.tensor(x), *shapes).numpy(), theirs(x, *shapes),
                                   rtol=1e-12)
        np.testing.assert_allclose(ours(tg.tensor(x), *shapes, loc=-0.2, scale=1.5).numpy(),
                                   theirs(x, *shapes, loc=-0.2, scale=1.5), rtol=1e-12)
    inside = np.array([0.15, 0.4, 0.8])
    check_grads(ours, theirs, (inside, *shapes, 0.05, 1.1))


def test_out_of_support_values_are_scipys():
    assert T.gamma.logpdf(-1.0, 2.0).item() == -np.inf
    assert T.gamma.pdf(tg.tensor(-1.0), 2.0).item() == 0.0
    assert T.beta.logpdf(tg.tensor([1.5]), 2.0, 2.0).item() == -np.inf
    assert T.gamma.logpdf(0.0, 0.5).item() == st.gamma.logpdf(0.0, 0.5) == np.inf
    with np.errstate(invalid="ignore"):
        assert np.isnan(T.gamma.logpdf(tg.tensor([1.0]), -2.0).item())
        assert np.isnan(T.t.logpdf(tg.tensor([1.0]), 0.0).item())
        assert np.isnan(T.poisson.logpmf(tg.tensor([1.0]), -1.0).item())


def test_poisson_matches_scipy_and_k_gets_no_gradient():
    k = np.array([0.0, 1.0, 2.0, 5.0, 2.5, -1.0])
    for method in ("pmf", "logpmf"):
        np.testing.assert_allclose(getattr(T.poisson, method)(tg.tensor(k), 1.7).numpy(),
                                   getattr(st.poisson, method)(k, 1.7), rtol=1e-13)
        np.testing.assert_allclose(getattr(T.poisson, method)(tg.tensor(k), 1.7, 1).numpy(),
                                   getattr(st.poisson, method)(k, 1.7, 1), rtol=1e-13)
    kt, mu = _t([0.0, 3.0]), _t(2.0)
    T.poisson.logpmf(kt, mu).sum().backward()
    assert kt.grad is None
    np.testing.assert_allclose(mu.grad.item(), 3.0 / 2.0 - 2)       # sum(k / mu - 1)


def test_dirichlet_matches_scipy_in_both_layouts():
    alpha = np.array([1.5, 2.0, 0.7])
    x = np.array([[0.2, 0.5], [0.3, 0.1], [0.5, 0.4]])          # components on axis 0
    for method in ("pdf", "logpdf"):
        np.testing.assert_allclose(getattr(T.dirichlet, method)(tg.tensor(x), alpha).numpy(),
                                   getattr(st.dirichlet, method)(x, alpha), rtol=1e-12)
        np.testing.assert_allclose(getattr(T.dirichlet, method)(tg.tensor(x[:2]), alpha).numpy(),
                                   getattr(st.dirichlet, method)(x[:2], alpha), rtol=1e-12)
    a = _t(alpha)
    T.dirichlet.logpdf(tg.tensor(x[:, 0]), a).backward()
    np.testing.assert_allclose(a.grad.numpy(), fd_grad(st.dirichlet.logpdf, (x[:, 0], alpha), 1),
                               rtol=1e-6)


def test_dirichlet_refuses_points_off_the_simplex():
    with pytest.raises(ValueError, match="dirichlet: each x must lie within the simplex"):
        T.dirichlet.logpdf(tg.tensor([0.5, 0.6, 0.1]), np.ones(3))
    with pytest.raises(ValueError, match="dirichlet: x must have 3 or 2 entries"):
        T.dirichlet.logpdf(tg.tensor([0.5]), np.ones(3))


MEAN = np.array([0.5, -1.0, 0.2])
COV = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])


@pytest.mark.parametrize("x", [np.array([0.1, 0.2, 0.3]), np.ones((4, 3)) * [0.1, 2.0, -1.0],
                               np.arange(12.0).reshape(2, 2, 3) / 10, np.ones((1, 3))])
def test_multivariate_normal_matches_scipy(x):
    for method in ("pdf", "logpdf"):
        got = getattr(T.multivariate_normal, method)(tg.tensor(x), MEAN, COV).numpy()
        want = getattr(st.multivariate_normal, method)(x, MEAN, COV)
        assert got.shape == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_multivariate_normal_cov_forms_and_defaults():
    x = np.array([[0.3, -0.4], [1.0, 2.0]])
    for mean, cov in ((np.zeros(2), 2.0), (np.ones(2), np.array([0.5, 3.0])), (None, COV[:2, :2])):
        np.testing.assert_allclose(
            T.multivariate_normal.logpdf(tg.tensor(x), mean, cov=cov).numpy(),
            st.multivariate_normal.logpdf(x, mean, cov=cov), rtol=1e-12)
    np.testing.assert_allclose(T.multivariate_normal.pdf(0.5).numpy(),       # d = 1, N(0, 1)
                               st.multivariate_normal.pdf(0.5), rtol=1e-14)
    xs = np.array([0.1, -0.3, 2.0])                              # d = 1: three points
    np.testing.assert_allclose(T.multivariate_normal.logpdf(tg.tensor(xs), 1.0, 2.0).numpy(),
                               st.multivariate_normal.logpdf(xs, 1.0, 2.0), rtol=1e-12)


def test_multivariate_normal_gradients_in_x_mean_and_cov():
    x = np.array([[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]])
    xt, mt, ct = _t(x), _t(MEAN), _t(COV)
    T.multivariate_normal.logpdf(xt, mt, ct).sum().backward()
    prec = np.linalg.inv(COV)
    d = x - MEAN
    np.testing.assert_allclose(xt.grad.numpy(), -d @ prec, rtol=1e-12)
    np.testing.assert_allclose(mt.grad.numpy(), (d @ prec).sum(0), rtol=1e-12)
    # The factor reads cov's lower triangle: the symmetric gradient, doubled off the
    # diagonal, on that triangle.
    sym = 0.5 * sum(prec @ np.outer(r, r) @ prec - prec for r in d)
    np.testing.assert_allclose(ct.grad.numpy(), np.tril(2 * sym) - np.diag(np.diag(sym)),
                               rtol=1e-10, atol=1e-12)


def test_multivariate_normal_errors():
    with pytest.raises(ValueError, match=r"cov must be a number, a vector of length 3 or a \(3, 3\) matrix"):
        T.multivariate_normal.logpdf(tg.ones((2, 2)), MEAN, np.ones(2))
    with pytest.raises(ValueError, match="x's last axis must have length 3"):
        T.multivariate_normal.logpdf(tg.ones((2, 2)), MEAN, COV)
    with pytest.raises(np.linalg.LinAlgError, match="cholesky.*not positive definite"):
        T.multivariate_normal.logpdf(tg.ones(2), cov=np.array([[1.0, 2.0], [2.0, 1.0]]))


def test_float32_in_float32_out():
    x = tg.tensor(np.float32([0.1, 0.5]))
    assert T.norm.logpdf(x, 0.5, 2.0).dtype == np.float32
    assert T.gamma.logpdf(x, 2.0).dtype == np.float32
    assert T.t.pdf(x, 3.0).dtype == np.float32
