"""tg.scipy.linalg: values against scipy.linalg, gradients against finite differences of
SciPy's own functions, second derivatives, argument forms and errors."""

import numpy as np
import pytest
import scipy.linalg as sl
import tapegrad as tg

L = tg.scipy.linalg
RNG = np.random.default_rng(3)
A = np.tril(RNG.standard_normal((4, 4)) * 0.4) + np.diag([1.5, 2.0, 1.2, 1.8])
B = RNG.standard_normal((4, 2))
_m = RNG.standard_normal((4, 4))
SPD = _m @ _m.T / 4 + np.eye(4)


def fd(f, x, eps=1e-6):
    x = np.array(x, dtype=float)
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[idx] += eps
        lo[idx] -= eps
        out[idx] = (np.sum(f(hi)) - np.sum(f(lo))) / (2 * eps)
    return out


@pytest.mark.parametrize("kw", [{"lower": True}, {"lower": False}, {"lower": True, "trans": 1},
                                {"lower": True, "trans": "T"}, {"lower": False, "trans": "C"},
                                {"lower": True, "unit_diagonal": True}])
@pytest.mark.parametrize("rhs", [B, B[:, 0]], ids=["matrix", "vector"])
def test_solve_triangular_matches_scipy_with_gradients(kw, rhs):
    a = A if kw["lower"] else A.T
    np.testing.assert_allclose(L.solve_triangular(tg.tensor(a), tg.tensor(rhs), **kw).numpy(),
                               sl.solve_triangular(a, rhs, **kw), rtol=1e-13)
    at, bt = tg.tensor(a, requires_grad=True), tg.tensor(rhs, requires_grad=True)
    L.solve_triangular(at, bt, **kw).sum().backward()
    np.testing.assert_allclose(at.grad.numpy(), fd(lambda m: sl.solve_triangular(m, rhs, **kw), a),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(bt.grad.numpy(), fd(lambda v: sl.solve_triangular(a, v, **kw), rhs),
                               rtol=1e-6, atol=1e-8)


def test_solve_triangular_errors():
    with pytest.raises(ValueError, match=r"solve_triangular: a must be one square matrix"):
        L.solve_triangular(tg.ones((2, 3)), tg.ones(2))
    with pytest.raises(ValueError, match=r"solve_triangular: a must be one square matrix"):
        L.solve_triangular(tg.ones((2, 2, 2)), tg.ones((2, 2)))
    with pytest.raises(ValueError, match=r"b must have shape \(3,\) or \(3, K\)"):
        L.solve_triangular(tg.tensor(np.eye(3)), tg.ones(4))
    with pytest.raises(ValueError, match="trans must be 0, 1, 2"):
        L.solve_triangular(tg.tensor(np.eye(2)), tg.ones(2), trans="X")
    with pytest.raises(np.linalg.LinAlgError, match="scipy_linalg_solve_triangular: singular matrix"):
        L.solve_triangular(tg.tensor(np.zeros((2, 2))), tg.ones(2))


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_matches_scipy_and_reads_one_triangle(lower):
    np.testing.assert_allclose(L.cholesky(tg.tensor(SPD), lower=lower).numpy(),
                               sl.cholesky(SPD, lower=lower), rtol=1e-13)
    at = tg.tensor(SPD, requires_grad=True)
    w = RNG.standard_normal((4, 4))
    (L.cholesky(at, lower=lower) * tg.tensor(w)).sum().backward()
    np.testing.assert_allclose(at.grad.numpy(),
                               fd(lambda m: sl.cholesky(m, lower=lower) * w, SPD), rtol=1e-6,
                               atol=1e-8)


def test_cholesky_default_is_scipys_upper_factor():
    np.testing.assert_allclose(L.cholesky(tg.tensor(SPD)).numpy(), sl.cholesky(SPD), rtol=1e-13)


def test_cholesky_of_a_matrix_that_is_not_positive_definite_raises():
    with pytest.raises(np.linalg.LinAlgError, match="cholesky.*not positive definite"):
        L.cholesky(tg.tensor([[1.0, 2.0], [2.0, 1.0]]))


@pytest.mark.parametrize("lower", [True, False])
def test_cho_solve_matches_scipy_with_gradients(lower):
    c = sl.cholesky(SPD, lower=lower)
    np.testing.assert_allclose(L.cho_solve((tg.tensor(c), lower), tg.tensor(B)).numpy(),
                               sl.cho_solve((c, lower), B), rtol=1e-12)
    ct, bt = tg.tensor(c, requires_grad=True), tg.tensor(B, requires_grad=True)
    L.cho_solve((ct, lower), bt).sum().backward()
    np.testing.assert_allclose(ct.grad.numpy(), fd(lambda m: sl.cho_solve((m, lower), B), c),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(bt.grad.numpy(), fd(lambda v: sl.cho_solve((c, lower), v), B),
                               rtol=1e-6, atol=1e-8)


def test_cho_solve_takes_the_pair_scipy_takes():
    c_and_lower = sl.cho_factor(SPD)
    np.testing.assert_allclose(L.cho_solve(c_and_lower, tg.tensor(B[:, 0])).numpy(),
                               sl.cho_solve(c_and_lower, B[:, 0]), rtol=1e-12)
    with pytest.raises(TypeError, match=r"cho_solve: the first argument must be the pair"):
        L.cho_solve(tg.tensor(SPD), tg.tensor(B))


def test_sqrtm_matches_scipy_for_symmetric_input_with_gradients():
    np.testing.assert_allclose(L.sqrtm(tg.tensor(SPD)).numpy(), sl.sqrtm(SPD), rtol=1e-10)
    at = tg.tensor(SPD, requires_grad=True)
    w = RNG.standard_normal((4, 4))
    (L.sqrtm(at) * tg.tensor(w)).sum().backward()
    # SciPy's sqrtm of a perturbed (non-symmetric) matrix is not the symmetric-part root
    # ours is, so the reference perturbs symmetrically: d/dA_ij of f((A + A^T)/2).
    ref = fd(lambda m: sl.sqrtm((m + m.T) / 2).real * w, SPD)
    np.testing.assert_allclose(at.grad.numpy(), ref, rtol=1e-5, atol=1e-8)


def test_sqrtm_second_derivative():
    at = tg.tensor(SPD[:2, :2], requires_grad=True)
    assert tg.gradgradcheck(lambda m: L.sqrtm(m), at)


def test_sqrtm_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="sqrtm: only symmetric matrices are supported"):
        L.sqrtm(tg.tensor([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="sqrtm: the matrix has a negative eigenvalue"):
        L.sqrtm(tg.tensor([[1.0, 0.0], [0.0, -4.0]]))
    with pytest.raises(ValueError, match="sqrtm: a must be one square matrix"):
        L.sqrtm(tg.ones((2, 3)))


def test_float32_stays_float32():
    a32 = tg.tensor(SPD.astype(np.float32))
    assert L.cholesky(a32).dtype == np.float32
    assert L.sqrtm(a32).dtype == np.float32
    assert L.solve_triangular(a32, tg.tensor(np.float32([1, 2, 3, 4])), lower=True).dtype == np.float32
