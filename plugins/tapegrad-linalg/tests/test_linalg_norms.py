"""tg.linalg.norm / vector_norm / matrix_norm / cond: every ord NumPy supports, axis and
keepdims forms, against np.linalg; gradients at zero and at ties (PyTorch's conventions);
errors."""

import math

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck, gradgradcheck, run_doctests
from tapegrad_linalg import norms

RNG = np.random.default_rng(7)
X = RNG.standard_normal((3, 4))
X3 = RNG.standard_normal((2, 3, 4))
INF = math.inf

VECTOR_ORDS = [None, 2, 1, INF, -INF, 0, 3, 0.5, -1, -2, 2.5]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, INF, -INF]


def close(t, ref, **kw):
    np.testing.assert_allclose(t.numpy(), ref, **({"rtol": 1e-10, "atol": 1e-12} | kw))


@pytest.mark.parametrize("ord", VECTOR_ORDS)
def test_vector_norms_match_numpy(ord):
    v = RNG.standard_normal(5)
    close(tg.linalg.norm(tg.tensor(v), ord), np.linalg.norm(v, ord))
    for axis in (0, 1, -1):
        for keepdims in (False, True):
            got = tg.linalg.norm(tg.tensor(X), ord, axis=axis, keepdims=keepdims)
            ref = np.linalg.norm(X, ord, axis=axis, keepdims=keepdims)
            assert got.shape == ref.shape
            close(got, ref)


@pytest.mark.parametrize("ord", MATRIX_ORDS)
def test_matrix_norms_match_numpy(ord):
    close(tg.linalg.norm(tg.tensor(X), ord), np.linalg.norm(X, ord))
    for axis in [(0, 1), (1, 0), (2, 0), (-1, 1), (0, 2)]:
        for keepdims in (False, True):
            got = tg.linalg.norm(tg.tensor(X3), ord, axis=axis, keepdims=keepdims)
            ref = np.linalg.norm(X3, ord, axis=axis, keepdims=keepdims)
            assert got.shape == ref.shape, (axis, keepdims)
            close(got, ref)


def test_norm_without_ord_or_axis_is_the_flattened_2_norm():
    for keepdims in (False, True):
        got = tg.linalg.norm(tg.tensor(X3), keepdims=keepdims)
        ref = np.linalg.norm(X3, keepdims=keepdims)
        assert got.shape == ref.shape
        close(got, ref)
    close(tg.linalg.norm([[3, 4]]), np.linalg.norm([[3, 4]]))    # ints become float


@pytest.mark.parametrize("ord", [2, 1, INF, -INF, 0, 3, -1])
def test_vector_norm_matches_numpy_with_tuple_axes(ord):
    for axis in [None, 0, (0, 2), (-1, -2)]:
        for keepdims in (False, True):
            got = tg.linalg.vector_norm(tg.tensor(X3), axis=axis, keepdims=keepdims, ord=ord)
            ref = np.linalg.vector_norm(X3, axis=axis, keepdims=keepdims, ord=ord)
            assert got.shape == ref.shape
            close(got, ref)


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, INF, -INF])
def test_matrix_norm_matches_numpy(ord):
    for keepdims in (False, True):
        got = tg.linalg.matrix_norm(tg.tensor(X3), ord=ord, keepdims=keepdims)
        ref = np.linalg.matrix_norm(X3, ord=ord, keepdims=keepdims)
        assert got.shape == ref.shape
        close(got, ref)


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, INF, -INF, "fro", "nuc"])
def test_cond_matches_numpy(p):
    a = RNG.standard_normal((2, 3, 3)) + 2 * np.eye(3)
    close(tg.linalg.cond(tg.tensor(a), p), np.linalg.cond(a, p), rtol=1e-9)


def test_cond_gradient():
    a = RNG.standard_normal((3, 3)) + 2 * np.eye(3)
    for p in (None, 1, "fro"):
        assert gradcheck(lambda x: tg.linalg.cond(x, p), (tg.tensor(a, requires_grad=True),))


# ---------------------------------------------------------------------------------------
# gradients at non-differentiable points (PyTorch's conventions)
# ---------------------------------------------------------------------------------------

def grad_of(f, x):
    x = tg.tensor(x, requires_grad=True)
    f(x).backward()
    return x.grad.numpy()


def test_two_norm_gradient_at_zero_is_zero_and_finite_second_order():
    assert np.array_equal(grad_of(tg.linalg.norm, np.zeros(3)), np.zeros(3))
    assert np.array_equal(grad_of(lambda x: tg.linalg.norm(x, "fro"), np.zeros((2, 2))),
                          np.zeros((2, 2)))
    # one zero row among nonzero ones: only that row's gradient is 0
    a = np.array([[0., 0.], [3., 4.]])
    np.testing.assert_allclose(grad_of(lambda x: tg.linalg.norm(x, axis=1).sum(), a),
                               [[0., 0.], [0.6, 0.8]])


def test_one_norm_uses_the_sign_subgradient():
    np.testing.assert_array_equal(grad_of(lambda x: tg.linalg.norm(x, 1), np.array([-2., 0., 3.])),
                                  [-1., 0., 1.])


def test_inf_norms_share_the_gradient_among_ties():
    v = np.array([3., -3., 1.])
    np.testing.assert_allclose(grad_of(lambda x: tg.linalg.norm(x, INF), v), [0.5, -0.5, 0.])
    v = np.array([1., -1., 2.])
    np.testing.assert_allclose(grad_of(lambda x: tg.linalg.norm(x, -INF), v), [0.5, -0.5, 0.])


def test_p_norm_gradients_at_zero_entries_and_zero_vectors():
    np.testing.assert_array_equal(grad_of(lambda x: tg.linalg.norm(x, 3), np.zeros(3)), np.zeros(3))
    g = grad_of(lambda x: tg.linalg.norm(x, 0.5), np.array([0., 4.]))
    assert g[0] == 0 and np.isfinite(g).all()
    g = grad_of(lambda x: tg.linalg.norm(x, 3), np.array([0., 2.]))
    np.testing.assert_allclose(g, [0., 1.])


def test_zero_norm_counts_and_has_zero_gradient():
    v = np.array([0., 2., -1.])
    assert tg.linalg.norm(tg.tensor(v), 0).item() == 2.0
    np.testing.assert_array_equal(grad_of(lambda x: tg.linalg.norm(x, 0), v), np.zeros(3))


@pytest.mark.parametrize("ord", VECTOR_ORDS)
def test_vector_norm_second_derivatives_away_from_kinks(ord):
    v = np.array([0.7, -1.3, 2.1, 0.4])
    if ord == 0:
        return
    assert gradgradcheck(lambda x: tg.linalg.norm(x, ord), (tg.tensor(v, requires_grad=True),))


# ---------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------

def test_norm_errors():
    with pytest.raises(ValueError, match="invalid norm order 'fro' for vectors"):
        tg.linalg.norm(tg.ones(3), "fro")
    with pytest.raises(ValueError, match="invalid norm order 3 for matrices"):
        tg.linalg.norm(tg.ones((2, 2)), 3)
    with pytest.raises(ValueError, match="improper number of dimensions"):
        tg.linalg.norm(tg.ones((2, 2, 2)), 2)
    with pytest.raises(ValueError, match="improper number of dimensions"):
        tg.linalg.norm(tg.ones((2, 2, 2)), axis=(0, 1, 2))
    with pytest.raises(np.exceptions.AxisError):
        tg.linalg.norm(tg.ones((2, 2)), axis=2)
    with pytest.raises(ValueError, match="duplicate axes"):
        tg.linalg.norm(tg.ones((2, 2)), axis=(1, 1))
    with pytest.raises(TypeError, match="'axis' must be None, an integer or a tuple"):
        tg.linalg.norm(tg.ones((2, 2)), axis=1.5)
    with pytest.raises(ValueError, match="at least 2-d"):
        tg.linalg.matrix_norm(tg.ones(3))
    with pytest.raises(np.linalg.LinAlgError, match="needs square matrices"):
        tg.linalg.cond(tg.ones((2, 3)), 1)
    for bad in [("fro",), (3,)]:          # NumPy refuses these too
        with pytest.raises(ValueError):
            np.linalg.norm(np.ones(3) if bad[0] == "fro" else np.ones((2, 2)), bad[0])


def test_module_docstrings_run():
    result = run_doctests(norms)
    assert result.failed == 0 and result.attempted > 0
