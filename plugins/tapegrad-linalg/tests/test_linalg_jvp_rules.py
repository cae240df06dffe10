"""Forward-mode (JVP) rules of tapegrad-linalg's ops: every differentiable op has one, the
contract kit checks each against finite differences and against the transpose of its VJP,
and hand tests cover what the samples do not: inputs without a tangent, 1-d and
broadcast operands, the triangle UPLO reads, and the refusals the VJPs make (repeated
eigenvalues and singular values, zero singular values of non-square matrices, the
non-unique factors of complete QR and full SVD)."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt
from tapegrad import _engine

PLUGIN = "tapegrad-linalg"
# Differentiable ops of this plugin that have no JVP rule of their own, with the reason
# (the engine falls back to an exact double-VJP for them). None at present.
WITHOUT_JVP = {}

RNG = np.random.default_rng(5)


def _differentiable_ops():
    return sorted(n for n, op in _engine.ops_table().items()
                  if op.plugin == PLUGIN and op.vjp is not None)


def _rule(name):
    return _engine.ops_table()[name].jvp


def _check_jvp(name, reference, xs, ts, atol, **params):
    """The op's tangent in forward mode (tg.jvp's path: the engine calls the rule) on
    NumPy inputs and tangents (None: that input does not move), against central
    differences of `reference`, NumPy's function: the independent reference for J t."""
    op = _engine.ops_table()[name]
    return tgt.check_jvp(lambda *xs: op(*xs, **params), xs, ts, reference=reference,
                         atol=atol, rtol=1e-7)


def _spd_like(n, seed):
    x = np.random.default_rng(seed).standard_normal((n, n))
    return x @ x.T + n * np.eye(n)


def test_every_differentiable_op_has_a_jvp_rule():
    missing = [n for n in _differentiable_ops()
               if _engine.ops_table()[n].jvp is None and n not in WITHOUT_JVP]
    assert missing == []


@pytest.mark.parametrize("name", _differentiable_ops())
def test_the_kit_checks_the_jvp_rule_against_finite_differences_and_the_vjp(name, contract_reports):
    if name in WITHOUT_JVP:
        pytest.skip(WITHOUT_JVP[name])
    checks = set(contract_reports[name].checks)
    assert "float64 JVP rule vs finite differences" in checks
    assert "JVP rule is the transpose of the VJP rule" in checks
    assert "float32 JVP rule keeps the dtype" in checks      # the rule itself, not the engine


# -- products: one tangent at a time ---------------------------------------------------

@pytest.mark.parametrize("shapes", [((2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)),
                                    ((3,), (3,)), ((2, 1, 3, 4), (5, 4, 2))])
@pytest.mark.parametrize("moving", [(True, False), (False, True), (True, True)])
def test_matmul_jvp_with_a_tangent_on_either_operand(shapes, moving):
    xs = [RNG.standard_normal(s) for s in shapes]
    ts = [RNG.standard_normal(s) if m else None for s, m in zip(shapes, moving)]
    _check_jvp("matmul", np.matmul, xs, ts, atol=1e-8)


@pytest.mark.parametrize("subscripts,shapes", [("ij,jk->ik", ((2, 3), (3, 4))),
                                               ("ii,i->i", ((3, 3), (3,))),
                                               ("ij,j->ij", ((2, 3), (1,))),
                                               ("ij,jk,kl->il", ((2, 3), (3, 2), (2, 4)))])
def test_einsum_jvp_with_some_operands_without_a_tangent(subscripts, shapes):
    xs = [RNG.standard_normal(s) for s in shapes]
    ts = [RNG.standard_normal(s) if k % 2 == 0 else None for k, s in enumerate(shapes)]
    _check_jvp("_einsum", lambda *xs: np.einsum(subscripts, *xs), xs, ts, atol=1e-8,
               subscripts=subscripts)


def test_einsum_jvp_of_one_tensor_used_twice_counts_both_uses():
    a, ta = RNG.standard_normal((3, 3)), RNG.standard_normal((3, 3))
    einsum = _engine.ops_table()["_einsum"]
    tgt.check_jvp(lambda a: einsum(a, a, subscripts="ij,jk->ik"), [a], [ta],
                  reference=lambda a: a @ a, atol=1e-8, rtol=1e-7)


# -- solvers: one tangent at a time ----------------------------------------------------

@pytest.mark.parametrize("b_shape", [(3,), (3, 2)])
@pytest.mark.parametrize("moving", [(True, False), (False, True)])
def test_solve_jvp_with_a_tangent_on_either_input(b_shape, moving):
    a = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
    b = RNG.standard_normal(b_shape)
    ts = [RNG.standard_normal(x.shape) if m else None for x, m in zip((a, b), moving)]
    _check_jvp("linalg_solve", np.linalg.solve, [a, b], ts, atol=1e-7)


@pytest.mark.parametrize("a_shape,b_shape", [((5, 3), (5,)), ((5, 3), (5, 2)), ((2, 4), (2,))])
@pytest.mark.parametrize("moving", [(True, False), (False, True)])
def test_lstsq_jvp_with_a_tangent_on_either_input(a_shape, b_shape, moving):
    a, b = RNG.standard_normal(a_shape), RNG.standard_normal(b_shape)
    ts = [RNG.standard_normal(x.shape) if m else None for x, m in zip((a, b), moving)]
    _check_jvp("_linalg_lstsq", lambda a, b: np.linalg.lstsq(a, b)[0], [a, b], ts, atol=1e-6)


def test_pinv_hermitian_jvp_reads_only_the_lower_triangle():
    a = _spd_like(3, 1)
    a[0, 2] += 0.7                        # the upper triangle is ignored by NumPy
    ta = RNG.standard_normal((3, 3))
    _check_jvp("linalg_pinv", lambda a: np.linalg.pinv(a, hermitian=True), [a], [ta],
               atol=1e-7, hermitian=True)


# -- eigh / eigvalsh: only the UPLO triangle moves the result ----------------------------

@pytest.mark.parametrize("UPLO", ["L", "U"])
def test_eigh_and_eigvalsh_jvp_read_only_the_uplo_triangle(UPLO):
    q, _ = np.linalg.qr(np.random.default_rng(2).standard_normal((3, 3)))
    a = (q * np.array([-2.0, 0.5, 3.0])) @ q.T
    a += np.triu(RNG.standard_normal((3, 3)), 1) if UPLO == "L" else \
        np.tril(RNG.standard_normal((3, 3)), -1)          # junk in the unread triangle
    ta = RNG.standard_normal((3, 3))                          # not symmetric

    def packed(a):
        w, v = np.linalg.eigh(a, UPLO=UPLO)
        return np.concatenate([w[None, :], v], axis=0)
    _check_jvp("_linalg_eigh", packed, [a], [ta], atol=1e-6, UPLO=UPLO)
    _check_jvp("linalg_eigvalsh", lambda a: np.linalg.eigvalsh(a, UPLO=UPLO), [a], [ta],
               atol=1e-6, UPLO=UPLO)


def test_eigh_jvp_refuses_a_repeated_eigenvalue_where_the_eigenvectors_move():
    a = np.diag([1.0, 1.0, 3.0])
    ta = RNG.standard_normal((3, 3))
    ans = tg._linalg_eigh(tg.tensor(a))
    with pytest.raises(np.linalg.LinAlgError, match="linalg_eigh.*eigenvalues"):
        _rule("_linalg_eigh")((tg.tensor(ta),), ans, tg.tensor(a))


def test_eig_jvp_refuses_a_repeated_eigenvalue():
    a = np.array([[2.0, 0.0, 1.0], [0.0, 2.0, 0.5], [0.0, 0.0, 4.0]])
    ta = RNG.standard_normal((3, 3))
    ans = tg._linalg_eig(tg.tensor(a))
    with pytest.raises(np.linalg.LinAlgError, match="linalg_eig"):
        _rule("_linalg_eig")((tg.tensor(ta),), ans, tg.tensor(a))


# -- svd / qr: the VJPs' refusals, and the non-square cases ------------------------------

def test_svd_jvp_refuses_a_zero_singular_value_of_a_non_square_matrix():
    a = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    ta = RNG.standard_normal((3, 2))
    ans = tg._linalg_svd(tg.tensor(a), full_matrices=False)
    with pytest.raises(np.linalg.LinAlgError, match="zero singular value"):
        _rule("_linalg_svd")((tg.tensor(ta),), ans, tg.tensor(a), full_matrices=False)


def test_svd_jvp_refuses_a_repeated_singular_value():
    a = np.diag([2.0, 2.0, 1.0])
    ta = RNG.standard_normal((3, 3))
    ans = tg._linalg_svd(tg.tensor(a), full_matrices=False)
    with pytest.raises(np.linalg.LinAlgError, match="repeated singular values"):
        _rule("_linalg_svd")((tg.tensor(ta),), ans, tg.tensor(a), full_matrices=False)


def test_svd_jvp_refuses_full_matrices_of_a_non_square_matrix():
    a = RNG.standard_normal((3, 2))
    ans = tg._linalg_svd(tg.tensor(a), full_matrices=True)
    with pytest.raises(ValueError, match="full_matrices=True"):
        _rule("_linalg_svd")((tg.tensor(a),), ans, tg.tensor(a), full_matrices=True)


def test_qr_jvp_refuses_complete_mode_of_a_tall_matrix():
    a = RNG.standard_normal((4, 2))
    ans = tg._linalg_qr(tg.tensor(a), mode="complete")
    with pytest.raises(ValueError, match="mode='complete'"):
        _rule("_linalg_qr")((tg.tensor(a),), ans, tg.tensor(a), mode="complete")


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 4)])
def test_qr_jvp_matches_finite_differences_of_numpy_qr(shape):
    a, ta = RNG.standard_normal(shape), RNG.standard_normal(shape)
    a[..., :min(shape), :min(shape)] += 2 * np.eye(min(shape))    # well conditioned

    def packed(a):
        q, r = np.linalg.qr(a)
        return np.concatenate([q, r.T], axis=0)
    _check_jvp("_linalg_qr", packed, [a], [ta], atol=1e-6)


def test_lstsq_jvp_refuses_a_rank_deficient_matrix_itself():
    # tg.linalg.lstsq refuses it before the op runs; a direct call of the op reaches
    # the rule, which must refuse it too.
    a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])            # rank 1
    b = RNG.standard_normal(3)
    with tg.no_grad():
        ans = tg._linalg_lstsq(tg.tensor(a), tg.tensor(b))
    with pytest.raises(np.linalg.LinAlgError, match="rank 1 < 2"):
        _rule("_linalg_lstsq")((tg.tensor(RNG.standard_normal((3, 2))), None), ans,
                               tg.tensor(a), tg.tensor(b))
