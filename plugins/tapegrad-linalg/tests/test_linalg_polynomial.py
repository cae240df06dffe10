"""tapegrad_linalg.polynomial against NumPy's legacy polynomial functions: poly, polyadd,
polyder, polydiv, polyfit, polyint, polymul, polysub, polyval (values, argument forms,
dtypes, refusals; gradients beyond the contract kit's samples)."""

import numpy as np
import pytest
import tapegrad as tg

RNG = np.random.default_rng(41)


def _r(*shape):
    return RNG.standard_normal(shape)


def _t(a, grad=False):
    return tg.tensor(np.asarray(a, dtype=float), requires_grad=grad)


@pytest.mark.parametrize("p,x", [
    ([3.0, 0.0, 1.0], 5.0), ([1.0, -2.0, 0.5, 4.0], np.linspace(-2, 2, 7)),
    ([2.5], np.array([[1.0, 2.0], [3.0, 4.0]])), (np.array([1, 2, 3]), np.array([1, 2])),
])
def test_polyval_matches_numpy(p, x):
    got, want = tg.polyval(p, x), np.polyval(p, x)
    assert got.dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got.numpy(), want)


def test_polyval_gradients_are_the_powers_and_the_derivative():
    p, x = _t([1.0, -3.0, 2.0], True), _t([2.0, 5.0], True)
    tg.polyval(p, x).sum().backward()
    assert p.grad.tolist() == [4.0 + 25.0, 7.0, 2.0]
    assert x.grad.tolist() == [2 * 2.0 - 3, 2 * 5.0 - 3]


@pytest.mark.parametrize("a1,a2", [([1.0, 2.0], [9.0, 5.0, 4.0]), ([1.0, 2.0, 3.0], [4.0]),
                                   ([1.0, 2.0], [3.0, 4.0]), (2.0, [1.0, 1.0])])
def test_polyadd_polysub_polymul_match_numpy(a1, a2):
    np.testing.assert_array_equal(tg.polyadd(a1, a2).numpy(), np.polyadd(a1, a2))
    np.testing.assert_array_equal(tg.polysub(a1, a2).numpy(), np.polysub(a1, a2))
    np.testing.assert_allclose(tg.polymul(a1, a2).numpy(), np.polymul(a1, a2))


def test_polymul_drops_leading_zeros_as_numpy():
    for a1, a2 in (([0.0, 1.0], [1.0, 1.0]), ([0.0, 0.0], [1.0, 2.0]),
                   (np.array([0, 0, 1, 2]), [3]), ([0.0, 0.0, 2.0], [0.0, 1.0, -1.0])):
        got, want = tg.polymul(a1, a2), np.polymul(a1, a2)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want)
    a = _t([0.0, 1.0, 2.0], True)
    tg.polymul(a, [1.0, 1.0]).sum().backward()
    assert a.grad.tolist() == [0.0, 2.0, 2.0]


def test_polymul_gradient_flows_to_both_factors():
    a, b = _t([1.0, 2.0], True), _t([3.0, 0.0, 1.0], True)
    tg.polyval(tg.polymul(a, b), 2.0).backward()          # p(2) = a(2) * b(2) = 4 * 13
    np.testing.assert_allclose(a.grad.numpy(), [2.0 * 13, 13.0])
    np.testing.assert_allclose(b.grad.numpy(), [4.0 * 4, 4.0 * 2, 4.0])


@pytest.mark.parametrize("m", [0, 1, 2, 4, 6])
def test_polyder_matches_numpy(m):
    p = _r(5)
    np.testing.assert_allclose(tg.polyder(p, m).numpy(), np.polyder(p, m), rtol=1e-14)
    np.testing.assert_array_equal(tg.polyder(np.array([1, 2, 3, 4]), m).numpy(),
                                  np.polyder(np.array([1, 2, 3, 4]), m))


@pytest.mark.parametrize("m,k", [(1, None), (2, None), (1, 3.0), (3, [1.0, 2.0, 3.0]),
                                 (2, 0.5), (0, None)])
def test_polyint_matches_numpy(m, k):
    p = _r(4)
    np.testing.assert_allclose(tg.polyint(p, m, k).numpy(), np.polyint(p, m, k), rtol=1e-14)


def test_polyint_is_differentiable_in_k_and_undoes_polyder():
    p, k = _t(_r(4), True), _t([1.0, 2.0], True)
    out = tg.polyint(p, 2, k)
    np.testing.assert_allclose(tg.polyder(out, 2).detach().numpy(), p.detach().numpy())
    tg.polyval(out, 3.0).backward()
    assert k.grad.tolist() == [3.0, 1.0]                   # k0 * x + k1 at x = 3


def test_polyder_polyint_refuse_bad_orders():
    with pytest.raises(ValueError, match="polyder: order of derivative must be positive"):
        tg.polyder([1.0, 2.0], -1)
    with pytest.raises(ValueError, match="polyint: order of integral must be positive"):
        tg.polyint([1.0, 2.0], -1)
    with pytest.raises(ValueError, match="k must be a scalar or a rank-1 array"):
        tg.polyint([1.0, 2.0], 3, [1.0, 2.0])
    with pytest.raises(TypeError, match="polyder: the order m must be an integer"):
        tg.polyder([1.0, 2.0], 1.5)


@pytest.mark.parametrize("u,v", [
    ([3.0, 5.0, 2.0], [2.0, 1.0]), ([1.0, -3.0, 2.0], [1.0, -1.0]), ([1.0, 2.0], [1.0, 0.0, 1.0]),
    (list(RNG.standard_normal(6)), list(RNG.standard_normal(3))), ([4.0], [2.0]),
    (np.array([1, 0, -1]), np.array([1, 1])),
])
def test_polydiv_matches_numpy(u, v):
    q, r = tg.polydiv(u, v)
    want_q, want_r = np.polydiv(u, v)
    assert q.shape == want_q.shape and r.shape == want_r.shape
    assert q.dtype == want_q.dtype
    np.testing.assert_allclose(q.numpy(), want_q, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(r.numpy(), want_r, rtol=1e-13, atol=1e-14)


def test_polydiv_gradient_matches_finite_differences():
    u, v = _t(_r(5), True), _t([1.5, -0.3, 0.8], True)
    assert tg.gradcheck(lambda u, v: tg.polydiv(u, v), (u, v))
    assert tg.gradgradcheck(lambda u, v: tg.polydiv(u, v)[0], (u, v))


def test_poly_matches_numpy_for_roots_and_matrices():
    for z in ([1.0, 2.0], _r(4), [3], [0.5, 0.5]):
        np.testing.assert_allclose(tg.poly(z).numpy(), np.poly(z), rtol=1e-13)
    a = np.array([[2.0, 0.3, 0.1], [0.2, -1.0, 0.4], [0.0, 0.3, 0.5]])
    np.testing.assert_allclose(tg.poly(a).numpy(), np.poly(a), rtol=1e-12)
    assert tg.poly([]) == np.poly([]) == 1.0
    assert tg.poly(np.array([1, 2])).dtype == np.poly(np.array([1, 2])).dtype


def test_poly_gradient_in_the_roots():
    z = _t([1.0, 2.0, -0.5], True)
    tg.polyval(tg.poly(z), 3.0).backward()                 # prod(3 - z), d/dz_i = -prod_j!=i
    np.testing.assert_allclose(z.grad.numpy(), [-1.0 * 3.5, -2.0 * 3.5, -2.0 * 1.0])


def test_poly_of_a_conjugate_pair_is_real_and_bad_shapes_are_refused():
    got = tg.poly(np.array([1j, -1j]))
    want = np.poly(np.array([1j, -1j]))
    assert got.dtype == want.dtype == np.float64
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(ValueError, match="1d or non-empty square 2d"):
        tg.poly(np.ones((2, 3)))
    with pytest.raises(TypeError, match="poly1d is not supported"):
        tg.polyval(np.poly1d([1.0, 2.0]), 1.0)


@pytest.mark.parametrize("deg", [0, 1, 2, 3])
def test_polyfit_matches_numpy(deg):
    x = np.linspace(-1, 2, 9)
    y = np.cos(x) + 0.1 * _r(9)
    np.testing.assert_allclose(tg.polyfit(x, y, deg).numpy(), np.polyfit(x, y, deg),
                               rtol=1e-10, atol=1e-12)
    w = np.abs(_r(9)) + 0.2
    np.testing.assert_allclose(tg.polyfit(x, y, deg, w=w).numpy(), np.polyfit(x, y, deg, w=w),
                               rtol=1e-10, atol=1e-12)
    y2 = _r(9, 3)
    np.testing.assert_allclose(tg.polyfit(x, y2, deg).numpy(), np.polyfit(x, y2, deg),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tg.polyfit(x, y2, deg, w=w).numpy(),
                               np.polyfit(x, y2, deg, w=w), rtol=1e-10, atol=1e-12)


def test_polyfit_gradient_in_y_is_the_pseudo_inverse_row():
    x = np.linspace(0, 1, 5)
    y = _t(_r(5), True)
    c = tg.polyfit(x, y, 1)
    c[0].backward()                                        # slope = row 0 of pinv(vander)
    np.testing.assert_allclose(y.grad.numpy(), np.linalg.pinv(np.vander(x, 2))[0], atol=1e-12)
    xt = _t(x + 0.01 * _r(5), True)
    assert tg.gradcheck(lambda xt, y: tg.polyfit(xt, y, 2), (xt, y))


def test_polyfit_refuses_what_it_does_not_support():
    x, y = np.linspace(0, 1, 4), np.ones(4)
    with pytest.raises(ValueError, match="polyfit: full=True"):
        tg.polyfit(x, y, 1, full=True)
    with pytest.raises(ValueError, match="polyfit: cov is not supported"):
        tg.polyfit(x, y, 1, cov=True)
    with pytest.raises(ValueError, match="deg >= 0"):
        tg.polyfit(x, y, -1)
    with pytest.raises(TypeError, match="same length"):
        tg.polyfit(x, np.ones(3), 1)
    with pytest.raises(TypeError, match="1D vector for x"):
        tg.polyfit(np.ones((2, 2)), np.ones(2), 1)
    with pytest.warns(np.exceptions.RankWarning):
        tg.polyfit(np.ones(4), y, 1)


def test_float32_coefficients_stay_float32():
    p = np.ones(3, np.float32)
    for out in (tg.polyval(p, np.float32(2)), tg.polyder(p), tg.polyint(p), tg.polymul(p, p),
                tg.polydiv(p, p[:2])[0], tg.poly(p)):
        assert out.dtype == np.float32
