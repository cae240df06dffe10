"""Complex polynomials (issue 18, helper cx18): polydiv, poly, polyfit and roots on
complex values. Values and dtypes against NumPy's; gradients against complex finite
differences (first and second order, real and imaginary parts perturbed separately,
tapegrad.testing's complex gradcheck, which differentiates nothing itself), and roots'
implicit-function gradient also against finite differences of np.roots itself."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt

RNG = np.random.default_rng(1803)


def crand(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def leaves(*arrays):
    return [tg.tensor(a, requires_grad=True) for a in arrays]


def check_both_orders(f, arrays):
    xs = leaves(*arrays)
    tgt.gradcheck(f, xs)
    tgt.gradgradcheck(f, xs)


# -- polydiv ----------------------------------------------------------------------------

@pytest.mark.parametrize("shapes", [((5,), (2,)), ((4,), (3,)), ((2,), (3,)), ((3,), (1,))])
def test_polydiv_of_complex_coefficients_is_numpys(shapes):
    u, v = crand(*shapes[0]), crand(*shapes[1])
    q, r = tg.polydiv(tg.tensor(u), tg.tensor(v))
    nq, nr = np.polydiv(u, v)
    np.testing.assert_allclose(q.numpy(), nq, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(r.numpy(), nr, rtol=1e-14, atol=1e-15)
    assert q.dtype == nq.dtype and r.dtype == nr.dtype and r.shape == nr.shape
    check_both_orders(lambda a, b: tg.polydiv(a, b), [u, v])
    # a real divisor of complex coefficients (its gradient: the real part)
    check_both_orders(lambda a, b: tg.polydiv(a, b), [u, RNG.standard_normal(shapes[1])])


def test_polydiv_keeps_complex64_and_drops_a_zero_remainder_as_numpy():
    u, v = crand(4, dtype=np.complex64), crand(2, dtype=np.complex64)
    q, r = tg.polydiv(tg.tensor(u), tg.tensor(v))
    nq, nr = np.polydiv(u, v)
    assert q.dtype == nq.dtype == np.complex64 and r.dtype == nr.dtype
    np.testing.assert_allclose(q.numpy(), nq, rtol=1e-5)
    # (x - i)(x + 2) / (x - i): remainder exactly 0
    a = np.polymul([1, -1j], [1, 2])
    q, r = tg.polydiv(tg.tensor(a), tg.tensor(np.array([1, -1j])))
    nq, nr = np.polydiv(a, np.array([1, -1j]))
    np.testing.assert_array_equal(q.numpy(), nq)
    np.testing.assert_array_equal(r.numpy(), nr)


# -- poly -------------------------------------------------------------------------------

@pytest.mark.parametrize("roots", [
    np.array([1 + 2j, 0.5 - 1j, -0.3j]),                  # complex coefficients
    np.array([1 + 2j, 1 - 2j, 0.5 + 0j]),                 # closed under conjugation: real
    np.array([2.0 + 0j, -1.0 + 0j]),                      # complex dtype, real values: real
])
def test_poly_of_complex_roots_is_numpys_including_the_real_result_of_conjugate_pairs(roots):
    got = tg.poly(tg.tensor(roots))
    want = np.poly(roots)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14, atol=1e-15)
    check_both_orders(tg.poly, [roots])


def test_poly_of_matrices_with_complex_eigenvalues_is_numpys():
    rotation = np.array([[0.3, -2.0, 0.1], [2.0, 0.4, 0.0], [0.1, 0.2, -1.0]])   # real
    hermitian_not = crand(3, 3)                                                  # complex
    for a in (rotation, hermitian_not):
        got, want = tg.poly(tg.tensor(a)), np.poly(a)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-13)
        tgt.gradcheck(tg.poly, leaves(a))
    assert np.poly(rotation).dtype == np.float64      # the case the real part covers


def test_poly_keeps_complex64():
    z = crand(3, dtype=np.complex64)
    got, want = tg.poly(tg.tensor(z)), np.poly(z)
    assert got.dtype == want.dtype == np.complex64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


# -- polyfit ----------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["complex y", "complex x", "complex x and y", "2-D y",
                                  "complex x and y and weights"])
def test_polyfit_of_complex_data_is_numpys(case):
    x = np.linspace(-1, 1, 7) + 0.05 * RNG.standard_normal(7)
    y = RNG.standard_normal(7)
    w = None
    if "y" in case:
        y = crand(7) if case != "2-D y" else crand(7, 2)
    if "complex x" in case:
        x = x + 0.3j * RNG.standard_normal(7)
    if case.endswith("weights"):
        w = np.abs(RNG.standard_normal(7)) + 0.5 + 0.2j
    deg = 2
    args = [x, y] if w is None else [x, y, deg, None, False, w]
    want = np.polyfit(*args) if w is not None else np.polyfit(x, y, deg)
    got = tg.polyfit(*[tg.tensor(a) if isinstance(a, np.ndarray) else a for a in args]) \
        if w is not None else tg.polyfit(tg.tensor(x), tg.tensor(y), deg)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-13)
    if w is None:
        check_both_orders(lambda a, b: tg.polyfit(a, b, deg), [x, y])
    else:
        tgt.gradcheck(lambda a, b, c: tg.polyfit(a, b, deg, None, False, c), leaves(x, y, w))


def test_polyfit_refuses_complex_weights_of_real_data_as_numpy():
    x, y, w = np.arange(5.0), np.arange(5.0) * 1j, np.ones(5) * 1j
    with pytest.raises(TypeError):
        np.polyfit(x, y, 1, w=w)
    with pytest.raises(TypeError, match="polyfit: complex weights"):
        tg.polyfit(tg.tensor(x), tg.tensor(y), 1, w=tg.tensor(w))


def test_polyfit_keeps_single_precision_as_for_real_data():
    # tapegrad's polyfit keeps float32 (NumPy's gives float64: docs/linalg.md), and so
    # complex64; the values are NumPy's to single precision
    x = np.linspace(-1, 1, 6).astype(np.float32)
    y = crand(6, dtype=np.complex64)
    got, want = tg.polyfit(tg.tensor(x), tg.tensor(y), 2), np.polyfit(x, y, 2)
    assert tg.polyfit(tg.tensor(x), tg.tensor(y.real.copy()), 2).dtype == np.float32
    assert got.dtype == np.complex64 and want.dtype == np.complex128
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


# -- roots ------------------------------------------------------------------------------

ROOT_CASES = {
    "three real roots": np.array([1.0, -0.5, -2.5, 1.0]),
    "a complex pair": np.array([2.0, 0.4, 1.3, -0.7]),
    "complex coefficients": np.array([1.0 + 0.5j, -0.3 + 1j, 2.0 - 0.2j, 0.4j]),
    "trailing zeros": np.array([1.5, 0.2, -1.1, 0.0]),
    "degree one": np.array([3.0, 1.0]),
    "degree six": np.array([0.5, -1.0, 0.3, 2.0, -0.7, 0.1, 1.2]),
}


@pytest.mark.parametrize("name", sorted(ROOT_CASES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
def test_roots_values_and_dtypes_are_numpys_bit_for_bit(name, dtype):
    p = ROOT_CASES[name]
    if np.dtype(dtype).kind == "f" and p.dtype.kind == "c":
        p = p.real.copy()
    p = p.astype(dtype)
    got, want = tg.roots(tg.tensor(p)), np.roots(p)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("p", [[0.0, 0.0, 1.0, -3.0, 2.0], [2.0], [0.0, 0.0], [],
                               [1, -3, 2], [True, False]])
def test_roots_of_degenerate_inputs_are_numpys(p):
    got, want = tg.roots(p), np.roots(p)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


def test_roots_refuses_what_numpy_refuses():
    with pytest.raises(TypeError):
        np.roots(np.array(5.0))
    with pytest.raises(TypeError, match="roots: p must be a 1-D sequence"):
        tg.roots(np.array(5.0))
    with pytest.raises(ValueError, match="Input must be a rank-1 array"):
        np.roots(np.ones((2, 2)))
    with pytest.raises(ValueError, match="roots: Input must be a rank-1 array"):
        tg.roots(np.ones((2, 2)))


@pytest.mark.parametrize("name", sorted(ROOT_CASES))
def test_roots_gradient_vs_complex_finite_differences_first_and_second_order(name):
    check_both_orders(tg.roots, [ROOT_CASES[name]])


def test_roots_gradient_matches_finite_differences_of_numpys_roots():
    # an independent reference: central differences of np.roots (each root followed by
    # matching), against the VJP of a random complex cotangent, row by row
    p = ROOT_CASES["a complex pair"]
    base = np.roots(p)
    eps = 1e-7
    jac = np.zeros((base.size, p.size), complex)          # d r_i / d p_k (holomorphic)
    for k in range(p.size):
        up, down = p.copy(), p.copy()
        up[k] += eps
        down[k] -= eps
        ru, rd = np.roots(up), np.roots(down)
        ru = ru[[np.argmin(abs(ru - r)) for r in base]]
        rd = rd[[np.argmin(abs(rd - r)) for r in base]]
        jac[:, k] = (ru - rd) / (2 * eps)
    g = crand(base.size)
    x = tg.tensor(p, requires_grad=True)
    (gx,) = tg.grad(tg.roots(x), [x], tg.tensor(g))
    # PyTorch's convention for a real input: Re(sum_i conj(dr_i/dp_k) g_i)
    np.testing.assert_allclose(gx.numpy(), np.real(np.conj(jac).T @ g), rtol=1e-6, atol=1e-7)
    # and the implicit-function formula, written out in NumPy: dr = -r^(n-k) / p'(r)
    n = p.size - 1
    closed = -np.vander(base, n + 1) / np.polyval(np.polyder(p), base)[:, None]
    np.testing.assert_allclose(jac, closed, rtol=1e-6, atol=1e-7)


def test_roots_forward_mode_and_trailing_zero_coefficients_move_the_zero_root():
    # p = 1.5 x^3 + 0.2 x^2 - 1.1 x + 0: the zero root moves with p_3 as -dp_3 / p_2
    p = tg.tensor(ROOT_CASES["trailing zeros"], requires_grad=True)
    r = tg.roots(p)
    zero = int(np.argmin(np.abs(r.detach().numpy())))
    (gp,) = tg.grad(r[zero], [p])
    np.testing.assert_allclose(gp.numpy()[-1], -1.0 / -1.1, rtol=1e-12)


def test_roots_leading_zero_coefficients_get_no_gradient():
    p = tg.tensor(np.array([0.0, 1.0, -3.0, 2.0]), requires_grad=True)
    (gp,) = tg.grad(tg.sum(tg.roots(p)), [p])
    assert gp.numpy()[0] == 0.0
    np.testing.assert_allclose(gp.numpy()[1:], [-3.0, -1.0, 0.0], rtol=1e-12, atol=1e-12)
    # (sum of roots = -p1/p0: d/dp0 = p1/p0^2 = -3, d/dp1 = -1/p0 = -1; here p0 is p[1])


def test_roots_at_a_repeated_root_raise_instead_of_a_silent_inf():
    p = tg.tensor(np.array([1.0, -2.0, 1.0]), requires_grad=True)     # (x - 1)^2
    r = tg.roots(p)
    np.testing.assert_array_equal(r.detach().numpy(), np.roots([1.0, -2.0, 1.0]))
    with pytest.raises(np.linalg.LinAlgError, match="roots: the polynomial has a repeated "
                                                    "root"):
        tg.grad(tg.sum(r), [p])


def test_roots_near_a_repeated_root_give_the_large_true_derivative():
    # (x - 1)(x - 1 - d): the roots' derivative in p_2 is -r^0 / p'(r) = ±1/d, finite
    d = 1e-4
    coeffs = np.poly([1.0, 1.0 + d])
    x = tg.tensor(coeffs, requires_grad=True)
    r = tg.roots(x)
    g = np.zeros(2)
    g[np.argmax(r.detach().numpy())] = 1.0
    (gx,) = tg.grad(r, [x], tg.tensor(g))
    np.testing.assert_allclose(gx.numpy()[-1], -1.0 / d, rtol=1e-3)


def test_roots_keep_single_precision_gradients():
    for p in (ROOT_CASES["a complex pair"].astype(np.float32),
              ROOT_CASES["complex coefficients"].astype(np.complex64)):
        x = tg.tensor(p, requires_grad=True)
        r = tg.roots(x)
        assert r.dtype == np.roots(p).dtype
        (g,) = tg.grad(r, [x], tg.tensor(np.ones(r.shape, r.dtype)))
        assert g.dtype == p.dtype


def test_roots_then_poly_round_trips_with_an_identity_gradient():
    # poly(roots(p)) = p / p_0: for a monic p its Jacobian is the identity but for p_0
    p = np.array([1.0, 0.4, -1.3, 0.7])
    x = tg.tensor(p, requires_grad=True)
    back = tg.poly(tg.roots(x))
    np.testing.assert_allclose(back.detach().numpy(), p, rtol=1e-12, atol=1e-12)
    for k in range(1, 4):
        (g,) = tg.grad(back[k], [x], retain_graph=True)
        expected = np.zeros(4)
        expected[k] = 1.0
        expected[0] = -p[k]               # d(p_k / p_0)/dp_0 at p_0 = 1
        np.testing.assert_allclose(g.numpy(), expected, rtol=1e-8, atol=1e-8)


# -- tg.compile: value-dependent structure runs eagerly, so replays equal eager calls ----

def test_compiled_poly_roots_and_polydiv_equal_eager_calls_when_values_change_the_result():
    import warnings
    cases = [
        (tg.poly, [[np.array([1 + 1j, 1 - 1j])], [np.array([1 + 1j, 2 - 1j])]]),
        (tg.roots, [[np.array([1.0, -3.0, 2.0])], [np.array([0.0, 1.0, -3.0])]]),
        (lambda u, v: tg.polydiv(u, v)[1],
         [[np.array([1.0, -3.0, 2.0]), np.array([1.0, -1.0])],
          [np.array([1.0, -3.0, 3.0]), np.array([1.0, -1.0])]]),
    ]
    for f, calls in cases:
        compiled = tg.compile(f)
        for args in calls:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")          # (the "runs eagerly" warning)
                got = compiled(*[tg.tensor(a) for a in args])
            want = f(*[tg.tensor(a) for a in args])
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_a_compiled_backward_through_roots_still_refuses_a_repeated_root():
    import warnings

    def gradient(p):
        return tg.grad(tg.sum(tg.roots(p) ** 2), [p])[0]

    compiled = tg.compile(gradient)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(tg.tensor([1.0, -3.0, 2.0], requires_grad=True))
        with pytest.raises(np.linalg.LinAlgError, match="repeated root"):
            compiled(tg.tensor([1.0, -2.0, 1.0], requires_grad=True))
