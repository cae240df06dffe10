"""tg.vdot, tg.vecdot, tg.matvec and tg.vecmat (module ``vector_products``) against NumPy:
values and dtypes over batch broadcasting, vecdot's axis= and keepdims=, gradients, and
the errors (core dimensions that differ, batch dimensions that do not broadcast, the
gufunc keywords refused). The contract kit runs over them in tests/test_contract.py."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck, gradgradcheck, run_doctests

RNG = np.random.default_rng(5)


def T(a, requires_grad=False):
    return tg.tensor(np.asarray(a), requires_grad=requires_grad)


def same(got, want):
    want = np.asarray(want)
    g = got.numpy()
    assert (g.shape, g.dtype) == (want.shape, want.dtype), (g.shape, g.dtype, want.dtype)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("s1,s2", [((3,), (3,)), ((2, 3), (6,)), ((2, 2), (4, 1)), ((1,), (1,))])
def test_vdot_matches_numpy(s1, s2):
    a, b = RNG.normal(size=s1), RNG.normal(size=s2)
    same(tg.vdot(T(a), T(b)), np.vdot(a, b))
    same(tg.vdot(T(a.astype(np.float32)), T(b.astype(np.float32))),
         np.vdot(a.astype(np.float32), b.astype(np.float32)))
    i = np.arange(4)
    same(tg.vdot(T(i), T(i)), np.vdot(i, i))


@pytest.mark.parametrize("s1,s2,kwargs", [
    ((2, 3), (3,), {}), ((4, 1, 3), (2, 3), {}), ((3, 2), (3, 1), {"axis": 0}),
    ((3, 2, 4), (3, 2, 4), {"axis": 1}), ((2, 3), (2, 3), {"keepdims": True}),
    ((3, 2), (3, 2), {"axis": 0, "keepdims": True}),
    ((3, 2, 4), (3, 2, 4), {"axis": 1, "keepdims": True}),
    ((3, 2, 4), (2, 4), {"axis": -2, "keepdims": True}), ((5,), (5,), {})])
def test_vecdot_matches_numpy(s1, s2, kwargs):
    a, b = RNG.normal(size=s1), RNG.normal(size=s2)
    same(tg.vecdot(T(a), T(b), **kwargs), np.vecdot(a, b, **kwargs))


@pytest.mark.parametrize("s1,s2", [((2, 3), (3,)), ((4, 2, 3), (3,)), ((2, 3), (5, 3)),
                                   ((1, 2, 3), (4, 1, 3)), ((3, 3), (3,))])
def test_matvec_matches_numpy(s1, s2):
    a, b = RNG.normal(size=s1), RNG.normal(size=s2)
    same(tg.matvec(T(a), T(b)), np.matvec(a, b))


@pytest.mark.parametrize("s1,s2", [((2,), (2, 3)), ((4, 2), (2, 3)), ((2,), (5, 2, 3)),
                                   ((3, 1, 2), (4, 2, 3))])
def test_vecmat_matches_numpy(s1, s2):
    a, b = RNG.normal(size=s1), RNG.normal(size=s2)
    same(tg.vecmat(T(a), T(b)), np.vecmat(a, b))


@pytest.mark.parametrize("name", ["vecdot", "matvec", "vecmat"])
def test_dtypes_are_numpys(name):
    shapes = {"vecdot": ((2, 3), (3,)), "matvec": ((2, 3), (3,)), "vecmat": ((3,), (3, 2))}[name]
    for dtype in (np.float32, np.int64, np.int32, np.bool_):
        a = (RNG.normal(size=shapes[0]) > 0).astype(dtype)
        b = (RNG.normal(size=shapes[1]) > 0).astype(dtype)
        got, want = getattr(tg, name)(T(a), T(b)), getattr(np, name)(a, b)
        assert got.dtype == want.dtype, dtype
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("name,s1,s2,kwargs", [
    ("vdot", (2, 3), (6,), {}), ("vecdot", (4, 1, 3), (2, 3), {}),
    ("vecdot", (3, 2), (3, 1), {"axis": 0, "keepdims": True}),
    ("matvec", (1, 2, 3), (4, 1, 3), {}), ("vecmat", (3, 1, 2), (4, 2, 3), {})])
def test_gradients_first_and_second_order(name, s1, s2, kwargs):
    a, b = T(RNG.normal(size=s1), True), T(RNG.normal(size=s2), True)
    f = lambda x, y: getattr(tg, name)(x, y, **kwargs)  # noqa: E731
    assert gradcheck(f, [a, b]) and gradgradcheck(f, [a, b])


def test_matvec_gradient_is_the_outer_product():
    a, v = T(RNG.normal(size=(2, 3)), True), T(RNG.normal(size=3), True)
    tg.matvec(a, v).backward(T([1.0, 2.0]))
    np.testing.assert_allclose(a.grad.numpy(), np.outer([1.0, 2.0], v.numpy()))
    np.testing.assert_allclose(v.grad.numpy(), np.array([1.0, 2.0]) @ a.numpy())


def test_core_dimensions_must_match_as_in_numpy():
    with pytest.raises(ValueError, match="vecdot: Input operand 1 has a mismatch in its core"):
        tg.vecdot(tg.ones((2, 3)), tg.ones(1))          # a core dimension does not broadcast
    with pytest.raises(ValueError):
        np.vecdot(np.ones((2, 3)), np.ones(1))
    with pytest.raises(ValueError, match="matvec: Input operand 1 has a mismatch"):
        tg.matvec(tg.ones((2, 3)), tg.ones(4))
    with pytest.raises(ValueError, match="vecmat: Input operand 1 has a mismatch"):
        tg.vecmat(tg.ones(3), tg.ones((2, 3)))
    with pytest.raises(ValueError, match="vdot: a \\(shape \\(3,\\), 3 entries\\) and b"):
        tg.vdot(tg.ones(3), tg.ones(4))


def test_batch_dimensions_must_broadcast_and_operands_need_their_dimensions():
    with pytest.raises(ValueError, match="matvec: the batch dimensions \\(2,\\) and \\(3,\\)"):
        tg.matvec(tg.ones((2, 2, 3)), tg.ones((3, 3)))
    with pytest.raises(ValueError, match="matvec: the operands need at least 2 and 1"):
        tg.matvec(tg.ones(3), tg.ones(3))
    with pytest.raises(ValueError, match="vecmat: the operands need at least 1 and 2"):
        tg.vecmat(tg.ones(3), tg.ones(3))
    with pytest.raises(ValueError, match="vecdot: input operand 0 does not have enough"):
        tg.vecdot(tg.tensor(1.0), tg.ones(3))
    with pytest.raises(np.exceptions.AxisError, match="vecdot"):
        tg.vecdot(tg.ones(3), tg.ones(3), axis=1)


@pytest.mark.parametrize("name,kwargs", [("vecdot", {"axes": [(0,), (0,), ()]}),
                                         ("vecdot", {"out": np.empty(2)}),
                                         ("matvec", {"axis": 0}), ("vecmat", {"dtype": float})])
def test_other_gufunc_keywords_are_refused(name, kwargs):
    with pytest.raises(TypeError, match=f"{name}: the keyword"):
        getattr(tg, name)(tg.ones((2, 2)), tg.ones((2, 2)), **kwargs)


def test_docstring_examples_run():
    from tapegrad_linalg import vector_products
    result = run_doctests(vector_products)
    assert result.attempted > 0 and result.failed == 0
