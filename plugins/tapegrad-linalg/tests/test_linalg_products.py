"""tg.linalg's products: matrix_power, multi_dot, outer, vecdot, cross, matrix_transpose,
tensorinv, tensorsolve, matmul -- values against np.linalg, argument forms, errors."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck, run_doctests
from tapegrad_linalg import products

RNG = np.random.default_rng(3)


def close(t, ref, **kw):
    np.testing.assert_allclose(t.numpy(), ref, **({"rtol": 1e-10, "atol": 1e-12} | kw))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, -1, -3])
def test_matrix_power_matches_numpy(n):
    a = RNG.standard_normal((2, 3, 3)) / 2 + np.eye(3)
    got = tg.linalg.matrix_power(tg.tensor(a), n)
    close(got, np.linalg.matrix_power(a, n), rtol=1e-9)
    assert got.dtype == np.float64


def test_matrix_power_zero_is_the_identity_with_zero_gradient():
    x = tg.tensor(RNG.standard_normal((3, 3)), requires_grad=True)
    out = tg.linalg.matrix_power(x, 0)
    close(out, np.eye(3))
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((3, 3)))
    inf = np.full((2, 2), np.inf)
    close(tg.linalg.matrix_power(tg.tensor(inf), 0), np.linalg.matrix_power(inf, 0))


def test_matrix_power_one_is_a_copy_and_negative_powers_differentiate():
    x = tg.tensor(np.eye(2) * 2, requires_grad=True)
    assert tg.linalg.matrix_power(x, 1) is not x
    assert gradcheck(lambda a: tg.linalg.matrix_power(a, -2),
                     (tg.tensor(RNG.standard_normal((3, 3)) + 3 * np.eye(3), requires_grad=True),))


def test_matrix_power_errors():
    with pytest.raises(TypeError, match="exponent must be an integer"):
        tg.linalg.matrix_power(tg.eye(2), 1.5)
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        tg.linalg.matrix_power(tg.ones((2, 3)), 2)


def test_multi_dot_matches_numpy_in_every_end_form():
    mats = [RNG.standard_normal(s) for s in [(10, 3), (3, 20), (20, 2), (2, 7)]]
    v0, v1 = RNG.standard_normal(10), RNG.standard_normal(7)
    for arrays in [mats[:2], mats[:3], mats, [v0] + mats, mats + [v1], [v0] + mats + [v1]]:
        got = tg.linalg.multi_dot([tg.tensor(a) for a in arrays])
        ref = np.linalg.multi_dot(arrays)
        assert got.shape == np.shape(ref)
        close(got, ref)


def test_multi_dot_picks_the_cheap_order():
    # (a @ b) @ c costs 10*100*5 + 10*5*50 = 7500, a @ (b @ c) 100*5*50 + 10*100*50 = 75000
    from tapegrad_linalg.products import _chain_order
    assert _chain_order([10, 100, 5, 50])[0][2] == 1      # split after b: (a b) c


def test_multi_dot_errors():
    with pytest.raises(ValueError, match="at least two arrays"):
        tg.linalg.multi_dot([tg.ones((2, 2))])
    with pytest.raises(ValueError, match="not aligned"):
        tg.linalg.multi_dot([tg.ones((2, 3)), tg.ones((2, 2)), tg.ones((2, 2))])
    with pytest.raises(ValueError, match="must be 2-d"):
        tg.linalg.multi_dot([tg.ones((2, 2)), tg.ones((2, 2, 2)), tg.ones((2, 2))])
    with pytest.raises(TypeError, match="out= is not supported"):
        tg.linalg.multi_dot([tg.ones((2, 2)), tg.ones((2, 2))], out=np.zeros((2, 2)))


def test_outer_vecdot_cross_match_numpy():
    a, b = RNG.standard_normal(3), RNG.standard_normal(4)
    close(tg.linalg.outer(tg.tensor(a), tg.tensor(b)), np.linalg.outer(a, b))
    x, y = RNG.standard_normal((2, 4, 3)), RNG.standard_normal((4, 3))
    close(tg.linalg.vecdot(tg.tensor(x), tg.tensor(y)), np.linalg.vecdot(x, y))
    close(tg.linalg.vecdot(tg.tensor(x), tg.tensor(y), axis=-2), np.linalg.vecdot(x, y, axis=-2))
    close(tg.linalg.cross(tg.tensor(x), tg.tensor(y)), np.linalg.cross(x, y))
    p, q = RNG.standard_normal((3, 5)), RNG.standard_normal((3, 1))
    close(tg.linalg.cross(tg.tensor(p), tg.tensor(q), axis=0), np.linalg.cross(p, q, axis=0))
    close(tg.linalg.matrix_transpose(tg.tensor(x)), np.linalg.matrix_transpose(x))
    close(tg.linalg.matmul(tg.tensor(x), tg.tensor(y.T)), np.linalg.matmul(x, y.T))


def test_outer_vecdot_cross_errors():
    with pytest.raises(ValueError, match="one-dimensional"):
        tg.linalg.outer(tg.ones((2, 2)), tg.ones(2))
    with pytest.raises(ValueError, match="different lengths along axis -1"):
        tg.linalg.vecdot(tg.ones((2, 3)), tg.ones(1))       # no broadcasting along the axis
    with pytest.raises(ValueError, match="3-dimensional vectors"):
        tg.linalg.cross(tg.ones(2), tg.ones(2))
    with pytest.raises(ValueError, match="at least 2-dimensional"):
        tg.linalg.matrix_transpose(tg.ones(3))


def test_tensorinv_and_tensorsolve_match_numpy():
    a = (RNG.standard_normal((6, 6)) + 3 * np.eye(6)).reshape(6, 2, 3)
    close(tg.linalg.tensorinv(tg.tensor(a), ind=1), np.linalg.tensorinv(a, ind=1))
    b = RNG.standard_normal(6)
    close(tg.linalg.tensorsolve(tg.tensor(a), tg.tensor(b)), np.linalg.tensorsolve(a, b))
    a3 = a.transpose(1, 0, 2)
    close(tg.linalg.tensorsolve(tg.tensor(a3), tg.tensor(b), axes=(0,)),
          np.linalg.tensorsolve(a3, b, axes=(0,)))
    with pytest.raises(np.linalg.LinAlgError, match="square matrix"):
        tg.linalg.tensorinv(tg.ones((2, 3)), ind=1)
    with pytest.raises(ValueError, match="invalid ind"):
        tg.linalg.tensorinv(tg.ones((2, 2)), ind=0)


def test_module_docstrings_run():
    result = run_doctests(products)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.filterwarnings("ignore::DeprecationWarning")     # NumPy 2 deprecates 2-vectors
@pytest.mark.parametrize("sa, sb, kwargs", [
    ((3,), (3,), {}), ((4, 3), (3,), {}), ((4, 2), (4, 3), {}), ((4, 3), (2,), {}),
    ((2,), (2,), {}), ((5, 2), (1, 2), {}), ((3, 2), (2, 3), {"axisa": 0, "axisc": 0}),
    ((3, 4), (3, 1), {"axis": 0}), ((2, 3, 4), (4, 3), {"axisa": 1, "axisb": 1, "axisc": 0}),
])
def test_top_level_cross_matches_numpy(sa, sb, kwargs):
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    got = tg.cross(tg.tensor(a), tg.tensor(b), **kwargs)
    ref = np.cross(a, b, **kwargs)
    assert got.shape == ref.shape
    close(got, ref)


def test_top_level_cross_errors():
    with pytest.raises(ValueError, match="dimension must be 2 or 3"):
        tg.cross(tg.ones(4), tg.ones(3))
    with pytest.raises(np.exceptions.AxisError):
        tg.cross(tg.ones(3), tg.ones(3), axisa=1)


def test_einsum_accepts_numpys_optimize_argument():
    a = RNG.standard_normal((3, 4))
    for optimize in (True, False, "greedy", "optimal"):
        close(tg.einsum("ij,jk", tg.tensor(a), tg.tensor(a.T), optimize=optimize), a @ a.T)
