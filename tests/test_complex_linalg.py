"""Complex input through tg.linalg and the products (issue 18).

Here rather than in tapegrad-linalg's tests: it uses tg.grad (tapegrad-higher), which the
plugin does not depend on (tests/test_isolation.py runs those with its dependencies only).

Values are NumPy's; gradients are checked against PyTorch (the same convention:
z.grad = dL/dx + i dL/dy for a real loss L) and against complex finite differences of
the loss (real and imaginary parts perturbed separately), first and second order. A loss
that depends on the phases of complex eigen/singular vectors gets the exact gradient of
LAPACK's phase convention (PyTorch refuses those; phase-invariant losses agree).
"""

import numpy as np
import pytest
import tapegrad as tg

try:        # the comparisons with PyTorch run where it is installed (ci/bench installs it);
    import torch    # the finite-difference checks always run
    HAVE_TORCH = True
except ImportError:
    class _NoTorch:
        """Stands for torch where it is not installed: `torch.linalg.inv` and the like
        name a function check() then does not call."""
        def __getattr__(self, name):
            return self
    torch = _NoTorch()
    HAVE_TORCH = False

RNG = np.random.default_rng(18)


def crand(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def cotangent(shape, dtype):
    """A random cotangent W of an output: the loss is L = Re sum(conj(W) * out)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return crand(*shape, dtype=dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _loss(outs, ws):
    """L = Re sum(conj(W) * out), summed over outputs, in NumPy (for finite differences)."""
    return sum(float(np.real(np.sum(np.conj(w) * np.asarray(o)))) for o, w in zip(outs, ws))


def fd_grad(f_np, arrays, ws, k, eps=1e-6):
    """dL/dRe(a_k) + i dL/dIm(a_k) by central differences (real a_k: dL/da_k)."""
    a = arrays[k]
    g = np.zeros(a.shape, dtype=np.result_type(a.dtype, np.float64))
    units = (1, 1j) if a.dtype.kind == "c" else (1,)
    for idx in np.ndindex(a.shape):
        for u in units:
            vals = []
            for s in (1, -1):
                b = a.astype(g.dtype, copy=True)
                b[idx] += s * eps * u
                args = list(arrays)
                args[k] = b
                vals.append(_loss(_tuple(f_np(*args)), ws))
            g[idx] += u * (vals[0] - vals[1]) / (2 * eps)
    return g


def check(f_tg, arrays, f_torch=None, f_np=None, rtol=1e-6, second=True):
    """f's gradients in tapegrad against finite differences of the NumPy loss (computed
    through tapegrad's forward, which is NumPy's) and against torch's, and the second
    derivative (the gradient of <gradient, V>) against finite differences of the first."""
    f_np = f_np or (lambda *a: tuple(o.numpy() for o in _tuple(f_tg(*(tg.tensor(x) for x in a)))))
    xs = [tg.tensor(a, requires_grad=True) for a in arrays]
    outs = _tuple(f_tg(*xs))
    ws = [cotangent(o.shape, o.dtype) for o in outs]
    grads = tg.grad(list(outs), xs, [tg.tensor(w) for w in ws], create_graph=second)
    for k, (a, g) in enumerate(zip(arrays, grads)):
        assert g.dtype == a.dtype, (g.dtype, a.dtype)
        want = fd_grad(f_np, arrays, ws, k)
        np.testing.assert_allclose(g.numpy(), want, rtol=rtol, atol=rtol * max(1, np.abs(want).max()))
    if f_torch is not None and HAVE_TORCH:
        ts = [torch.tensor(a, requires_grad=True) for a in arrays]
        touts = _tuple(f_torch(*ts))
        for o, t in zip(outs, touts):
            np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=1e-9, atol=1e-9)
        tgrads = torch.autograd.grad(touts, ts, [torch.tensor(w) for w in ws])
        for g, t in zip(grads, tgrads):
            np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-8, atol=1e-9)
    if second:
        # second order: M(a) = Re sum(conj(V) * grad(a)) is a real function of a; its
        # gradient (by tapegrad, double backward) against finite differences of M
        vs = [cotangent(a.shape, a.dtype) for a in arrays]

        def grad_np(*a):
            x = [tg.tensor(b, requires_grad=True) for b in a]
            return tuple(g.numpy() for g in tg.grad(list(_tuple(f_tg(*x))), x,
                                                     [tg.tensor(w) for w in ws]))
        m = sum(tg.sum(tg.real(tg.conj(tg.tensor(v)) * g)) for v, g in zip(vs, grads))
        # (a linear f: the gradient is constant, the second derivative 0)
        second_grads = (tg.grad(m, xs, allow_unused=True) if m.requires_grad
                        else [None] * len(xs))
        for k, (a, g2) in enumerate(zip(arrays, second_grads)):
            want = fd_grad(grad_np, arrays, vs, k)
            got = np.zeros_like(want) if g2 is None else g2.numpy()
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1, np.abs(want).max()))


# ---------------------------------------------------------------------------------------
# products
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("sa, sb", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)),
                                    ((2, 3), (3, 4)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_gradients_conjugate_the_other_operand(sa, sb):
    check(tg.matmul, [crand(*sa), crand(*sb)], torch.matmul)


def test_matmul_of_a_real_and_a_complex_operand_gives_the_real_one_a_real_gradient():
    a, b = RNG.standard_normal((2, 3)), crand(3, 2)
    check(tg.matmul, [a, b], lambda x, y: x.to(y.dtype) @ y)      # (torch does not promote)


@pytest.mark.parametrize("subscripts, shapes", [("ij,jk->ik", [(2, 3), (3, 4)]),
                                                ("ii->", [(3, 3)]), ("i,j->ij", [(2,), (3,)]),
                                                ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
                                                ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)])])
def test_einsum_gradients_conjugate_the_other_operands(subscripts, shapes):
    check(lambda *xs: tg.einsum(subscripts, *xs), [crand(*s) for s in shapes],
          lambda *xs: torch.einsum(subscripts, *xs))


@pytest.mark.parametrize("name, f_np", [
    ("vdot", lambda a, b: np.vdot(a, b)), ("vecdot", lambda a, b: np.vecdot(a, b)),
    ("inner", np.inner), ("outer", np.outer), ("kron", np.kron), ("dot", np.dot),
    ("tensordot", lambda a, b: np.tensordot(a, b, 1))])
def test_vector_products_follow_numpys_conjugation(name, f_np):
    a, b = crand(2, 3), crand(3) if name in ("dot", "tensordot") else crand(2, 3)
    if name == "vdot":
        b = crand(6)
    f = (lambda x, y: tg.tensordot(x, y, 1)) if name == "tensordot" else getattr(tg, name)
    np.testing.assert_allclose(f(tg.tensor(a), tg.tensor(b)).numpy(), f_np(a, b), rtol=1e-12)
    check(f, [a, b])


def test_vecmat_conjugates_the_vector_and_matvec_does_not():
    v, m = crand(2), crand(2, 3)
    np.testing.assert_allclose(tg.vecmat(tg.tensor(v), tg.tensor(m)).numpy(), np.vecmat(v, m))
    np.testing.assert_allclose(tg.matvec(tg.tensor(m.T), tg.tensor(v)).numpy(), np.matvec(m.T, v))
    check(tg.vecmat, [v, m])
    check(tg.linalg.vecdot, [crand(2, 3), crand(3)])


def test_complex64_stays_complex64_through_matmul_and_its_gradients():
    a = tg.tensor(crand(2, 3, dtype=np.complex64), requires_grad=True)
    b = tg.tensor(crand(3, 2, dtype=np.complex64), requires_grad=True)
    out = a @ b
    assert out.dtype == np.complex64
    ga, gb = tg.grad(out, [a, b], tg.tensor(crand(2, 2, dtype=np.complex64)))
    assert ga.dtype == gb.dtype == np.complex64


# ---------------------------------------------------------------------------------------
# inverses, determinants, solvers, factorizations
# ---------------------------------------------------------------------------------------

def general(*shape):
    return crand(*shape) + 3 * np.eye(shape[-1])


def hermitian_pd(n):
    x = crand(n, n)
    return x @ x.conj().T + n * np.eye(n)


@pytest.mark.parametrize("name", ["inv", "det"])
def test_inv_and_det(name):
    check(getattr(tg.linalg, name), [general(3, 3)], getattr(torch.linalg, name))
    check(getattr(tg.linalg, name), [general(2, 3, 3)], getattr(torch.linalg, name))


def test_slogdet_has_a_complex_sign_and_a_real_logabsdet_both_differentiable():
    a = general(3, 3)
    sign, logabsdet = tg.linalg.slogdet(tg.tensor(a))
    want = np.linalg.slogdet(a)
    assert sign.dtype == np.complex128 and logabsdet.dtype == np.float64
    np.testing.assert_allclose(sign.numpy(), want.sign, rtol=1e-12)
    np.testing.assert_allclose(logabsdet.numpy(), want.logabsdet, rtol=1e-12)
    check(lambda x: tuple(tg.linalg.slogdet(x)), [a], lambda x: tuple(torch.linalg.slogdet(x)))


@pytest.mark.parametrize("sb", [(3,), (3, 2)])
def test_solve(sb):
    check(tg.linalg.solve, [general(3, 3), crand(*sb)], torch.linalg.solve)


def gram(f, lib):
    """f of the Hermitian positive definite x x^H + 3 I: PyTorch's gradient convention
    for Hermitian input (a symmetrized gradient) and the one-triangle one of NumPy's
    reads (docs/linalg.md) agree on the gradient in x."""
    def g(x):
        h = x @ (tg.conj(tg.swapaxes(x, -1, -2)) if lib is tg else x.mH)
        return f(h + 3 * (tg.eye(x.shape[-1]) if lib is tg else torch.eye(x.shape[-1])))
    return g


def test_cholesky_reads_one_triangle_of_a_hermitian_matrix():
    a = hermitian_pd(3)
    check(tg.linalg.cholesky, [a])
    x = crand(3, 3)
    check(gram(tg.linalg.cholesky, tg), [x], gram(torch.linalg.cholesky, torch))
    # NumPy reads the lower triangle and the real part of the diagonal only: the gradient
    # is the finite differences' (zero on the unread entries)
    b = a.copy()
    b[np.triu_indices(3, 1)] = 7 - 2j
    b[np.diag_indices(3)] += 0.5j
    check(tg.linalg.cholesky, [b])
    check(gram(lambda h: tg.linalg.cholesky(h, upper=True), tg), [x],
          gram(lambda h: torch.linalg.cholesky(h, upper=True), torch))


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 4)])
def test_qr(shape):
    check(lambda x: tuple(tg.linalg.qr(x)), [crand(*shape)], lambda x: tuple(torch.linalg.qr(x)))


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
def test_pinv_and_lstsq(shape):
    check(tg.linalg.pinv, [crand(*shape)], torch.linalg.pinv)
    if shape[0] >= shape[1]:
        check(lambda a, b: tg.linalg.lstsq(a, b)[0], [crand(*shape), crand(shape[0])])


def test_pinv_hermitian_reads_the_lower_triangle():
    a = hermitian_pd(3)
    a[np.triu_indices(3, 1)] = 2 + 5j
    check(lambda x: tg.linalg.pinv(x, hermitian=True), [a])


# ---------------------------------------------------------------------------------------
# eigh, eig, svd: values, phase-invariant and phase-dependent losses
# ---------------------------------------------------------------------------------------

def projector_loss(vecs_fn):
    """A phase-invariant function of the vectors: V diag(c) V^H (c fixed) and |V|^2."""
    def f(x):
        w, v = vecs_fn(x)
        c = tg.tensor(np.array([0.3, -1.1, 0.7, 0.2][:v.shape[-1]]))
        return w, (v * c) @ tg.conj(tg.swapaxes(v, -1, -2)), tg.abs(v) ** 2
    return f


def test_eigh_of_a_hermitian_matrix():
    a = crand(3, 3)
    a = a + a.conj().T
    w, v = tg.linalg.eigh(tg.tensor(a))
    ref = np.linalg.eigh(a)
    assert w.dtype == np.float64 and v.dtype == np.complex128
    np.testing.assert_array_equal(w.numpy(), ref.eigenvalues)
    np.testing.assert_array_equal(v.numpy(), ref.eigenvectors)
    check(projector_loss(tg.linalg.eigh), [a])
    check(tg.linalg.eigvalsh, [a])
    check(gram(tg.linalg.eigvalsh, tg), [crand(3, 3)], gram(torch.linalg.eigvalsh, torch))
    c = np.array([0.3, -1.1, 0.7])
    # (one eigh call per function: torch checks each call's cotangent is phase-invariant)
    check(gram(lambda h: (lambda v: (v * c) @ tg.conj(v).T)(tg.linalg.eigh(h)[1]), tg),
          [crand(3, 3)],
          gram(lambda h: (lambda v: (v * torch.tensor(c)) @ v.mH)(torch.linalg.eigh(h)[1]), torch))


def test_svd():
    for shape in [(3, 3), (4, 2), (2, 4)]:
        a = crand(*shape)
        u, s, vh = tg.linalg.svd(tg.tensor(a), full_matrices=False)
        ref = np.linalg.svd(a, full_matrices=False)
        assert s.dtype == np.float64
        np.testing.assert_array_equal(s.numpy(), ref.S)

        def usv(x):
            u, s, vh = tg.linalg.svd(x, full_matrices=False)
            c = tg.tensor(np.array([0.3, -1.1, 0.7][:s.shape[-1]]))
            return s, (u * c) @ vh, tg.abs(u) ** 2, tg.abs(vh) ** 2
        check(usv, [a])
        check(tg.linalg.svdvals, [a], torch.linalg.svdvals)


def test_eig_of_a_complex_matrix_and_of_a_real_one_with_complex_eigenvalues():
    a = crand(3, 3)

    def f(x):
        w, v = tg.linalg.eig(x)
        c = tg.tensor(np.array([0.3, -1.1, 0.7]))
        return w, (v * c) @ tg.linalg.inv(v), tg.abs(v) ** 2
    check(f, [a], second=False)
    check(tg.linalg.eigvals, [a], torch.linalg.eigvals)
    real = np.array([[0., -1., 0.5], [1., 0., 0.2], [0.3, 0.1, 2.]])
    w = tg.linalg.eigvals(tg.tensor(real))
    np.testing.assert_array_equal(w.numpy(), np.linalg.eigvals(real))
    assert w.dtype == np.complex128
    check(tg.linalg.eigvals, [real], torch.linalg.eigvals)       # a real gradient


@pytest.mark.parametrize("name, shape", [("eigh", (3, 3)), ("eigh", (2, 3, 3)), ("eig", (3, 3)),
                                         ("svd", (3, 3)), ("svd", (4, 2)), ("svd", (2, 4))])
def test_the_vectors_phases_follow_lapack_and_any_loss_of_them_is_differentiable(name, shape):
    a = crand(*shape)
    if name == "eigh":
        a = a + np.swapaxes(a, -1, -2).conj()
    out = getattr(tg.linalg, name)(tg.tensor(a)) if name != "svd" else \
        tg.linalg.svd(tg.tensor(a), full_matrices=False)
    ref = getattr(np.linalg, name)(a) if name != "svd" else np.linalg.svd(a, full_matrices=False)
    if name == "svd" and shape[0] < shape[1]:
        u = out.U.numpy()
        assert np.all(u[..., 0, :].imag == 0)                 # U's first row real
        np.testing.assert_allclose((u * out.S.numpy()[..., None, :]) @ out.Vh.numpy(), a,
                                   atol=1e-12)
    else:
        for got, want in zip(out, ref):
            np.testing.assert_array_equal(got.numpy(), want)   # NumPy's phases exactly
    # a loss that depends on the phases: the gradient of LAPACK's convention, exact
    if name == "svd":
        check(lambda x: tuple(tg.linalg.svd(x, full_matrices=False)), [a])
    else:
        check(lambda x: tuple(getattr(tg.linalg, name)(x)), [a], second=name == "eigh")


def test_eig_of_a_real_matrix_with_complex_eigenvectors_has_a_real_gradient():
    real = np.array([[0., -1., 0.5], [1., 0., 0.2], [0.3, 0.1, 2.]])
    check(lambda x: tuple(tg.linalg.eig(x)), [real], second=False)


# ---------------------------------------------------------------------------------------
# norms
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("ord", [None, 1, 2, np.inf, -np.inf, 3, 0.5])
def test_vector_norms(ord):
    x = crand(5)
    np.testing.assert_allclose(tg.linalg.norm(tg.tensor(x), ord).numpy(), np.linalg.norm(x, ord),
                               rtol=1e-12)
    check(lambda v: tg.linalg.norm(v, ord), [x],
          lambda v: torch.linalg.vector_norm(v, 2 if ord is None else ord))


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norms(ord):
    x = crand(3, 4)
    np.testing.assert_allclose(tg.linalg.norm(tg.tensor(x), ord).numpy(), np.linalg.norm(x, ord),
                               rtol=1e-12)
    check(lambda v: tg.linalg.norm(v, ord), [x], lambda v: torch.linalg.matrix_norm(v, ord))


def test_matrix_rank_and_cond_of_complex_matrices():
    a = crand(4, 3)
    assert int(tg.linalg.matrix_rank(tg.tensor(a))) == np.linalg.matrix_rank(a)
    np.testing.assert_allclose(tg.linalg.cond(tg.tensor(a)).numpy(), np.linalg.cond(a), rtol=1e-12)


def test_svd_of_short_wide_complex_matrices_is_numpys_up_to_rounding():
    # m < n: tapegrad makes U's first row exactly real where LAPACK's is real up to
    # rounding (docs/linalg.md); the factors stay within a few ulp of NumPy's
    rng = np.random.default_rng(2)
    for _ in range(50):
        m = int(rng.integers(1, 5))
        n = m + int(rng.integers(1, 5))
        a = rng.standard_normal((m, n)) + 1j * rng.standard_normal((m, n))
        u, s, vh = tg.linalg.svd(tg.tensor(a), full_matrices=False)
        nu, ns, nvh = np.linalg.svd(a, full_matrices=False)
        np.testing.assert_array_equal(s.numpy(), ns)
        np.testing.assert_allclose(u.numpy(), nu, rtol=0, atol=1e-14)
        np.testing.assert_allclose(vh.numpy(), nvh, rtol=0, atol=1e-14)
        assert np.all(u.numpy()[0].imag == 0)


# ---------------------------------------------------------------------------------------
# polynomials (compositions of complex-correct ops)
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, args, kwargs", [
    ("polyval", [(4,), (3,)], {}),
    ("polyadd", [(3,), (5,)], {}),
    ("polysub", [(4,), (2,)], {}),
    ("polymul", [(3,), (4,)], {}),
    ("polyder", [(5,)], {"m": 2}),
    ("polyint", [(4,)], {"m": 2, "k": [1.0 + 2.0j, -0.5j]}),
])
def test_polynomials_of_complex_coefficients_are_numpys_and_differentiable(name, args, kwargs):
    arrays = [crand(*shape) for shape in args]
    f_tg, f_np = getattr(tg, name), getattr(np, name)
    got = f_tg(*[tg.tensor(a) for a in arrays], **kwargs)
    np.testing.assert_allclose(got.numpy(), f_np(*arrays, **kwargs), rtol=1e-14, atol=1e-14)
    assert got.dtype == f_np(*arrays, **kwargs).dtype
    check(lambda *xs: f_tg(*xs, **kwargs), arrays)


def test_polyval_of_real_coefficients_at_complex_points_gives_real_coefficients_a_real_gradient():
    p, x = RNG.standard_normal(4), crand(3)
    check(tg.polyval, [p, x])


# polydiv, poly, polyfit and roots on complex values: tests/test_complex_polynomials.py
