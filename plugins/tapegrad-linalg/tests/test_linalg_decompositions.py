"""tg.linalg's inverses, solvers and decompositions: values against np.linalg (batched,
float32), result types, the argument forms NumPy accepts, errors, and the conventions at
degenerate inputs (docs/linalg.md). The contract kit checks the gradients of every sample."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import check_jvp, gradcheck, gradgradcheck, run_doctests
from tapegrad_linalg import decompositions, linalg

RNG = np.random.default_rng(42)


def general(*shape):
    return RNG.standard_normal(shape) + 3 * np.eye(shape[-1])


def spd(*shape):
    x = RNG.standard_normal(shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def close(t, ref, **kw):
    np.testing.assert_allclose(np.asarray(t.numpy() if isinstance(t, tg.Tensor) else t), ref,
                               **({"rtol": 1e-10, "atol": 1e-12} | kw))


# ---------------------------------------------------------------------------------------
# values against NumPy
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 1, 3, 3), (1, 1)])
@pytest.mark.parametrize("name", ["inv", "det", "eigvalsh", "svdvals", "pinv", "matrix_rank"])
def test_one_matrix_functions_match_numpy_batched(name, shape):
    a = spd(*shape) if name == "eigvalsh" else general(*shape)
    got = getattr(tg.linalg, name)(tg.tensor(a))
    ref = getattr(np.linalg, name)(a)
    close(got, ref)
    assert got.shape == np.shape(ref)


@pytest.mark.parametrize("name", ["inv", "det", "eigvalsh", "svdvals", "pinv", "cholesky"])
def test_float32_stays_float32(name):
    a = spd(2, 3, 3).astype(np.float32)
    x = tg.tensor(a, requires_grad=True)
    out = getattr(tg.linalg, name)(x)
    assert out.dtype == np.float32
    close(out, getattr(np.linalg, name)(a), rtol=1e-4, atol=1e-5)
    out.sum().backward()
    assert x.grad.dtype == np.float32


def test_slogdet_returns_numpys_named_pair():
    a = general(2, 3, 3)
    a[1] *= -1
    res = tg.linalg.slogdet(tg.tensor(a))
    ref = np.linalg.slogdet(a)
    assert isinstance(res, linalg.SlogdetResult) and res._fields == ("sign", "logabsdet")
    sign, logabsdet = res
    close(sign, ref.sign)
    close(logabsdet, ref.logabsdet)
    assert not sign.requires_grad


def test_slogdet_gradient_is_the_inverse_transpose_and_sign_has_none():
    a = general(3, 3)
    x = tg.tensor(a, requires_grad=True)
    tg.linalg.slogdet(x).logabsdet.backward()
    close(x.grad, np.linalg.inv(a).T)
    y = tg.tensor(a, requires_grad=True)
    assert not tg.linalg.slogdet(y).sign.requires_grad


@pytest.mark.parametrize("sa, sb", [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (3,)),
                                    ((2, 3, 3), (2, 3, 4)), ((3, 3), (5, 3, 1)),
                                    ((2, 1, 3, 3), (4, 3, 2))])
def test_solve_follows_numpy2_rules_for_b(sa, sb):
    a, b = general(*sa), RNG.standard_normal(sb)
    got = tg.linalg.solve(tg.tensor(a), tg.tensor(b))
    ref = np.linalg.solve(a, b)
    assert got.shape == ref.shape
    close(got, ref)


def test_solve_gradient_against_finite_differences_both_args():
    a, b = general(2, 3, 3), RNG.standard_normal(3)
    assert gradcheck(tg.linalg.solve, (tg.tensor(a, requires_grad=True),
                                       tg.tensor(b, requires_grad=True)))
    assert gradgradcheck(tg.linalg.solve, (tg.tensor(a, requires_grad=True),
                                           tg.tensor(b, requires_grad=True)))


def test_solve_errors_name_the_op_and_shapes():
    with pytest.raises(ValueError, match=r"linalg_solve: .*length 4, not 3"):
        tg.linalg.solve(tg.tensor(general(3, 3)), tg.ones(4))
    with pytest.raises(ValueError, match=r"b.shape\[-2\] must be 3"):
        tg.linalg.solve(tg.tensor(general(3, 3)), tg.ones((2, 3)))   # NumPy 2: a matrix b
    with pytest.raises(ValueError, match="do not broadcast"):
        tg.linalg.solve(tg.tensor(general(2, 3, 3)), tg.ones((3, 3, 1)))
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        tg.linalg.solve(tg.ones((2, 3)), tg.ones(2))
    with pytest.raises(np.linalg.LinAlgError, match="Singular"):
        tg.linalg.solve(tg.zeros((2, 2)), tg.ones(2))


@pytest.mark.parametrize("name", ["inv", "det", "cholesky", "eigh", "eigvalsh", "eig", "eigvals",
                                  "slogdet"])
def test_square_only_functions_refuse_other_shapes_with_linalg_error(name):
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        getattr(tg.linalg, name)(tg.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match="at least two-dimensional"):
        getattr(tg.linalg, name)(tg.ones(3))


def test_singular_and_non_positive_definite_raise_linalg_error():
    with pytest.raises(np.linalg.LinAlgError, match="linalg_inv: Singular matrix"):
        tg.linalg.inv(tg.zeros((2, 2)))
    with pytest.raises(np.linalg.LinAlgError, match="linalg_cholesky: .*positive definite"):
        tg.linalg.cholesky(tg.tensor([[1., 2.], [2., 1.]]))


def test_det_of_a_singular_matrix_is_zero_and_its_backward_refuses():
    x = tg.tensor([[1., 2.], [2., 4.]], requires_grad=True)
    d = tg.linalg.det(x)
    assert d.item() == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(np.linalg.LinAlgError, match="Singular"):
        d.backward()


# ---------------------------------------------------------------------------------------
# cholesky: one triangle read, one triangle differentiated
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_matches_numpy_including_upper(upper):
    a = spd(2, 4, 4)
    close(tg.linalg.cholesky(tg.tensor(a), upper=upper), np.linalg.cholesky(a, upper=upper))


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_gradient_lives_on_the_triangle_numpy_reads(upper):
    x = tg.tensor(spd(4, 4), requires_grad=True)
    (tg.linalg.cholesky(x, upper=upper) ** 2).sum().backward()
    g = x.grad.numpy()
    other = np.triu(g, 1) if not upper else np.tril(g, -1)
    assert np.all(other == 0)
    assert np.any(g != 0)


def test_cholesky_through_a_symmetric_parametrization_matches_finite_differences():
    # A = X X^T + n I: the usual way a PD matrix is built; its gradient in X is the same
    # under the one-triangle and PyTorch's symmetric conventions.
    x0 = RNG.standard_normal((3, 3))

    def f(x):
        return tg.linalg.cholesky(x @ x.T + 3 * tg.eye(3))

    assert gradcheck(f, (tg.tensor(x0, requires_grad=True),))
    assert gradgradcheck(f, (tg.tensor(x0, requires_grad=True),))


# ---------------------------------------------------------------------------------------
# qr
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 5), (2, 4, 2), (2, 2, 5)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_matches_numpy_in_every_mode(shape, mode):
    a = RNG.standard_normal(shape)
    got, ref = tg.linalg.qr(tg.tensor(a), mode=mode), np.linalg.qr(a, mode=mode)
    if mode == "r":
        close(got, ref)
        return
    assert isinstance(got, linalg.QRResult)
    close(got.Q, ref.Q)
    close(got.R, ref.R)


def test_qr_default_mode_gradient_for_tall_and_wide():
    for shape in [(5, 3), (3, 5), (2, 3, 4)]:
        x = tg.tensor(RNG.standard_normal(shape), requires_grad=True)
        assert gradcheck(lambda a: tg.linalg.qr(a), (x,))


def test_qr_refuses_what_has_no_gradient():
    with pytest.raises(ValueError, match="mode='complete' of a 4x2 matrix"):
        tg.linalg.qr(tg.ones((4, 2), requires_grad=True), mode="complete")
    with tg.no_grad():       # without a gradient it is NumPy's complete Q
        q, r = tg.linalg.qr(tg.tensor(np.arange(8.).reshape(4, 2)), mode="complete")
    assert q.shape == (4, 4) and r.shape == (4, 2)
    with pytest.raises(ValueError, match="mode 'raw' is not supported"):
        tg.linalg.qr(tg.ones((3, 3)), mode="raw")


@pytest.mark.parametrize("call, exc, match", [
    (lambda a: tg.linalg.qr(a, mode="complete")[0], ValueError,
     "linalg.qr: mode='complete' of a 4x2 matrix .* a carries a forward-mode tangent"),
    (lambda a: tg.linalg.svd(a, full_matrices=True)[0], ValueError,
     "linalg.svd: full_matrices=True for a 4x2 matrix .* a carries a forward-mode tangent"),
    (lambda a: tg.linalg.lstsq(a @ tg.ones((2, 3)), tg.ones(4))[0], np.linalg.LinAlgError,
     r"linalg.lstsq: .* has rank 1 < 3, and a carries a forward-mode tangent"),
], ids=["qr", "svd", "lstsq"])
def test_what_has_no_derivative_refuses_a_forward_mode_tangent(call, exc, match):
    a = RNG.standard_normal((4, 2))
    with pytest.raises(exc, match=match):
        check_jvp(call, a, RNG.standard_normal((4, 2)))
    with tg.no_grad():                       # grad mode does not turn forward mode off
        with pytest.raises(exc, match=match):
            check_jvp(call, a, RNG.standard_normal((4, 2)))


def test_lstsq_refuses_a_tangent_on_b_of_a_rank_deficient_system():
    a = np.ones((4, 3))
    with pytest.raises(np.linalg.LinAlgError, match="rank 1 < 3, and b carries a forward-mode"):
        check_jvp(lambda b: tg.linalg.lstsq(tg.tensor(a), b)[0], np.ones(4), np.ones(4))


# ---------------------------------------------------------------------------------------
# eigh / eig
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("UPLO", ["L", "U"])
def test_eigh_matches_numpy_and_reads_one_triangle(UPLO):
    a = RNG.standard_normal((2, 4, 4))           # not symmetric: only one triangle is read
    w, v = tg.linalg.eigh(tg.tensor(a), UPLO=UPLO)
    rw, rv = np.linalg.eigh(a, UPLO=UPLO)
    close(w, rw)
    close(v, rv)
    close(tg.linalg.eigvalsh(tg.tensor(a), UPLO=UPLO), np.linalg.eigvalsh(a, UPLO=UPLO))
    x = tg.tensor(a, requires_grad=True)
    tg.linalg.eigvalsh(x, UPLO=UPLO).sum().backward()
    other = np.triu(x.grad.numpy(), 1) if UPLO == "L" else np.tril(x.grad.numpy(), -1)
    assert np.all(other == 0)


def test_eigh_result_is_numpys_named_pair_and_refuses_bad_uplo():
    res = tg.linalg.eigh(tg.tensor(spd(3, 3)))
    assert isinstance(res, linalg.EighResult)
    assert res._fields == ("eigenvalues", "eigenvectors")
    with pytest.raises(ValueError, match="UPLO argument must be 'L' or 'U'"):
        tg.linalg.eigh(tg.eye(2), UPLO="X")


def test_eigh_of_repeated_eigenvalues():
    # eigenvalues only: defined (the identity's gradient of the trace is the identity)
    x = tg.tensor(np.eye(3), requires_grad=True)
    w, v = tg.linalg.eigh(x)
    w.sum().backward()
    close(x.grad, np.eye(3))
    # through eigenvectors: a clear error, not PyTorch's inf/nan
    x = tg.tensor(np.diag([1., 1., 2.]), requires_grad=True)
    w, v = tg.linalg.eigh(x)
    with pytest.raises(np.linalg.LinAlgError, match="linalg_eigh: .*repeated eigenvalues"):
        (v[:, 0] * tg.tensor([1., 2., 3.])).sum().backward()


def test_eigenvector_gradient_of_a_sign_invariant_loss():
    # v v^T does not depend on LAPACK's sign choice: check it against finite differences
    a0 = spd(4, 4)

    def f(a):
        v = tg.linalg.eigh(a).eigenvectors[:, -1]
        return v[:, None] * v[None, :]

    assert gradcheck(f, (tg.tensor(a0, requires_grad=True),))


def test_eig_real_spectrum_matches_numpy():
    v = RNG.standard_normal((2, 3, 3)) + 2 * np.eye(3)
    a = (v * np.array([1., 2.5, 4.])) @ np.linalg.inv(v)
    w, vecs = tg.linalg.eig(tg.tensor(a))
    rw, rv = np.linalg.eig(a)
    close(w, rw, rtol=1e-9)
    close(vecs, rv, rtol=1e-8, atol=1e-10)
    close(tg.linalg.eigvals(tg.tensor(a)), np.linalg.eigvals(a), rtol=1e-9)
    assert isinstance(tg.linalg.eig(tg.tensor(a)), linalg.EigResult)


@pytest.mark.parametrize("name", ["eig", "eigvals"])
def test_eig_of_a_complex_spectrum_gives_numpys_complex_results(name):
    rotation = np.array([[0., -1.], [1., 0.]])
    got = getattr(tg.linalg, name)(tg.tensor(rotation))
    want = getattr(np.linalg, name)(rotation)
    for g, w in zip(got, want) if name == "eig" else [(got, want)]:
        assert g.dtype == w.dtype == np.complex128
        np.testing.assert_array_equal(g.numpy(), w)


# ---------------------------------------------------------------------------------------
# svd
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 5), (2, 3, 4)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_matches_numpy(shape, full_matrices):
    a = RNG.standard_normal(shape)
    with tg.no_grad():
        got = tg.linalg.svd(tg.tensor(a), full_matrices=full_matrices)
    ref = np.linalg.svd(a, full_matrices=full_matrices)
    assert isinstance(got, linalg.SVDResult) and got._fields == ("U", "S", "Vh")
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        close(g, r)
    close(tg.linalg.svd(tg.tensor(a), compute_uv=False), np.linalg.svd(a, compute_uv=False))


def test_svd_gradients_reconstruct_and_refuse_where_undefined():
    a = tg.tensor(RNG.standard_normal((4, 3)), requires_grad=True)
    u, s, vh = tg.linalg.svd(a, full_matrices=False)
    ((u * s[None, :]) @ vh).sum().backward()           # the reconstruction: a itself
    close(a.grad, np.ones((4, 3)), rtol=1e-9)
    with pytest.raises(ValueError, match="full_matrices=True for a 4x3 matrix has no gradient"):
        tg.linalg.svd(a)                               # NumPy's default, non-square
    sq = tg.tensor(RNG.standard_normal((3, 3)), requires_grad=True)
    assert gradcheck(lambda x: tg.linalg.svd(x), (sq,))    # square: full == reduced
    with pytest.raises(ValueError, match="hermitian=True is not supported"):
        tg.linalg.svd(sq, hermitian=True)


def test_svd_of_repeated_singular_values():
    x = tg.tensor(np.eye(3), requires_grad=True)
    u, s, vh = tg.linalg.svd(x)
    s.sum().backward()                                 # values only: defined
    close(x.grad, np.eye(3))
    x = tg.tensor(np.eye(3), requires_grad=True)
    u, s, vh = tg.linalg.svd(x)
    with pytest.raises(np.linalg.LinAlgError, match="repeated singular values"):
        (u * tg.tensor(RNG.standard_normal((3, 3)))).sum().backward()


# ---------------------------------------------------------------------------------------
# pinv, lstsq, matrix_rank
# ---------------------------------------------------------------------------------------

def test_pinv_follows_numpy_24_rcond_and_rtol():
    a = np.diag([1.0, 1e-3, 1e-17])
    for kwargs in [{}, {"rcond": 1e-2}, {"rtol": 1e-2}, {"rtol": None}, {"hermitian": True}]:
        close(tg.linalg.pinv(tg.tensor(a), **kwargs), np.linalg.pinv(a, **kwargs))
    with pytest.raises(ValueError, match="can't be both set"):
        tg.linalg.pinv(tg.tensor(a), rcond=1e-2, rtol=1e-2)


def test_pinv_gradient_tall_wide_batched():
    for shape in [(4, 2), (2, 4), (2, 3, 3)]:
        x = tg.tensor(RNG.standard_normal(shape), requires_grad=True)
        assert gradcheck(tg.linalg.pinv, (x,))


@pytest.mark.parametrize("sa, sb", [((5, 3), (5,)), ((5, 3), (5, 2)), ((3, 3), (3,)),
                                    ((2, 4), (2,)), ((2, 4), (2, 3))])
def test_lstsq_matches_numpy(sa, sb):
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    x, res, rank, s = tg.linalg.lstsq(tg.tensor(a), tg.tensor(b))
    rx, rres, rrank, rs = np.linalg.lstsq(a, b)
    close(x, rx, rtol=1e-9)
    close(res, rres, rtol=1e-9)
    assert res.shape == rres.shape
    assert rank == rrank and isinstance(rank, int)
    close(s, rs, rtol=1e-9)


def test_lstsq_rank_follows_rcond_as_numpy():
    a = np.diag([1.0, 1e-3, 1e-9])
    for rcond in (None, -1, 1e-2, 1e-6):
        assert tg.linalg.lstsq(tg.tensor(a), tg.ones(3), rcond=rcond)[2] == \
            np.linalg.lstsq(a, np.ones(3), rcond=rcond)[2]


def test_lstsq_gradient_and_rank_deficient_refusal():
    a = tg.tensor(RNG.standard_normal((5, 3)), requires_grad=True)
    b = tg.tensor(RNG.standard_normal((5, 2)), requires_grad=True)
    assert gradcheck(lambda a, b: tg.linalg.lstsq(a, b)[0], (a, b))
    assert gradcheck(lambda a, b: tg.linalg.lstsq(a, b)[1], (a, b))     # the residuals
    deficient = np.ones((4, 3))
    x, res, rank, s = tg.linalg.lstsq(tg.tensor(deficient), tg.ones(4))    # no grad: fine
    close(x, np.linalg.lstsq(deficient, np.ones(4))[0])
    assert rank == 1 and res.shape == (0,)
    with pytest.raises(np.linalg.LinAlgError, match="rank 1 < 3"):
        tg.linalg.lstsq(tg.tensor(deficient, requires_grad=True), tg.ones(4))
    with pytest.raises(np.linalg.LinAlgError, match="not batched"):
        tg.linalg.lstsq(tg.ones((2, 3, 3)), tg.ones(3))
    with pytest.raises(np.linalg.LinAlgError, match="incompatible dimensions"):
        tg.linalg.lstsq(tg.ones((3, 2)), tg.ones(4))


def test_matrix_rank_matches_numpy_and_is_not_differentiable():
    a = np.stack([np.ones((3, 3)), np.eye(3), np.diag([1., 1e-3, 0.])])
    for kwargs in [{}, {"tol": 1e-2}, {"rtol": 1e-2}, {"hermitian": True}]:
        got = tg.linalg.matrix_rank(tg.tensor(a, requires_grad=True), **kwargs)
        np.testing.assert_array_equal(got.numpy(), np.linalg.matrix_rank(a, **kwargs))
        assert not got.requires_grad and got.dtype.kind == "i"


def test_module_docstrings_run():
    for module in (decompositions, linalg):
        result = run_doctests(module)
        assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("name, call", [
    ("eigh", lambda x: tg.linalg.eigh(x)),
    ("qr", lambda x: tg.linalg.qr(x)),
    ("svd", lambda x: tg.linalg.svd(x, full_matrices=False)),
    ("eig", lambda x: tg.linalg.eig(x)),
    ("slogdet", lambda x: tg.linalg.slogdet(x)),
    ("lstsq", lambda x: tg.linalg.lstsq(x, tg.ones(3, dtype=np.float32))[:2]),
])
def test_tuple_results_keep_float32(name, call):
    a = np.diag([1., 2., 4.]) + 0.1 * np.triu(np.ones((3, 3)), 1)
    x = tg.tensor(a.astype(np.float32), requires_grad=True)
    outs = call(x)
    assert all(o.dtype == np.float32 for o in outs), [o.dtype for o in outs]
    sum(o.sum() for o in outs if o.requires_grad).backward()
    assert x.grad.dtype == np.float32


def test_the_ops_doc_is_the_functions_docstring():
    assert "a singular matrix raises LinAlgError" in " ".join(tg.linalg.inv.__doc__.split())
    assert tg.registry().ops["linalg_inv"].doc.startswith("The inverse of square matrices")
    assert tg.linalg.solve.__name__ == "solve"
