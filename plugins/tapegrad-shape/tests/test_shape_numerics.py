"""tapegrad_shape.numerics against NumPy: convolve, correlate, cov, corrcoef, ediff1d,
geomspace, logspace, interp, ldexp, modf, trapezoid, unwrap, vander (values, argument
forms, dtypes, errors; gradients beyond the contract kit's samples)."""

import math
import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import check_jvp

RNG = np.random.default_rng(14)


def _r(*shape):
    return RNG.standard_normal(shape)


def _t(a, grad=False):
    return tg.tensor(np.asarray(a), requires_grad=grad)


# -- convolve, correlate -----------------------------------------------------------------

@pytest.mark.parametrize("n", range(1, 7))
@pytest.mark.parametrize("m", range(1, 7))
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_and_correlate_match_numpy_for_every_length_pair(n, m, mode):
    a, v = _r(n), _r(m)
    np.testing.assert_allclose(tg.convolve(a, v, mode).numpy(), np.convolve(a, v, mode),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tg.correlate(a, v, mode).numpy(), np.correlate(a, v, mode),
                               rtol=1e-12, atol=1e-14)


def test_convolve_gradient_is_the_correlation_with_the_other_operand():
    a, v = _t(_r(5), True), _t(_r(3), True)
    g = _r(7)
    tg.convolve(a, v).backward(tg.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), np.correlate(g, v.numpy(), "valid"))
    np.testing.assert_allclose(v.grad.numpy(), np.correlate(g, a.numpy(), "valid"))


def test_convolve_accepts_numpy_mode_spellings_and_defaults():
    a, v = _r(6), _r(3)
    for mode, name in (("Same", "same"), ("v", "valid"), (2, "full"), (1, "same")):
        np.testing.assert_allclose(tg.convolve(a, v, mode=mode).numpy(),
                                   np.convolve(a, v, name))
    np.testing.assert_allclose(tg.correlate(a, v).numpy(), np.correlate(a, v))   # 'valid'


def test_convolve_keeps_float32_and_integers():
    a, v = np.arange(4, dtype=np.float32), np.ones(2, np.float32)
    assert tg.convolve(a, v).dtype == np.convolve(a, v).dtype == np.float32
    assert tg.convolve(np.arange(4), np.array([1, 2])).tolist() == \
        np.convolve(np.arange(4), [1, 2]).tolist()


def test_convolve_refuses_bad_input():
    with pytest.raises(ValueError, match="convolve: a cannot be empty"):
        tg.convolve(np.zeros(0), np.ones(2))
    with pytest.raises(ValueError, match="convolve: v must be 1-D"):
        tg.convolve(np.ones(3), np.ones((2, 2)))
    with pytest.raises(ValueError, match="mode must be 'full', 'same' or 'valid'"):
        tg.convolve(np.ones(3), np.ones(2), mode="wide")
    with pytest.raises(ValueError, match="correlate: v cannot be empty"):
        tg.correlate(np.ones(3), np.zeros(0))


# -- cov, corrcoef -------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    {}, {"rowvar": False}, {"bias": True}, {"ddof": 2}, {"ddof": 0, "bias": False},
    {"fweights": np.array([1, 2, 1, 3, 1])}, {"aweights": np.array([0.5, 1, 2, 1, 0.3])},
    {"fweights": np.array([1, 2, 1, 3, 1]), "aweights": np.array([0.5, 1, 2, 1, 0.3])},
    {"fweights": np.array([1, 2, 1, 3, 1]), "aweights": np.array([0.5, 1, 2, 1, 0.3]),
     "ddof": 0},
])
def test_cov_matches_numpy(kwargs):
    m = _r(3, 5) if kwargs.get("rowvar", True) else _r(5, 3)
    np.testing.assert_allclose(tg.cov(m, **kwargs).numpy(), np.cov(m, **kwargs), rtol=1e-12)


def test_cov_of_two_variables_one_variable_and_y():
    x, y = _r(6), _r(6)
    np.testing.assert_allclose(tg.cov(x, y).numpy(), np.cov(x, y), rtol=1e-12)
    assert tg.cov(x).shape == () and np.isclose(tg.cov(x).item(), np.cov(x))


def test_cov_with_y_and_rowvar_false_matches_numpy():
    a, b = _r(4, 2), _r(4, 3)
    np.testing.assert_allclose(tg.cov(a, b, rowvar=False).numpy(), np.cov(a, b, rowvar=False),
                               rtol=1e-12)


def test_cov_gradient_matches_finite_differences_in_aweights():
    m = _r(2, 5)
    w = tg.tensor(np.abs(_r(5)) + 0.5, requires_grad=True)
    assert tg.gradcheck(lambda w: tg.cov(m, aweights=w), (w,))


def test_cov_dtypes():
    assert tg.cov(np.ones((2, 3), np.float32) + np.arange(3, dtype=np.float32)).dtype == np.float32
    assert tg.cov(np.arange(6).reshape(2, 3)).dtype == np.float64
    np.testing.assert_allclose(tg.cov(np.arange(6).reshape(2, 3)).numpy(),
                               np.cov(np.arange(6).reshape(2, 3)))
    assert tg.cov(_r(2, 3), dtype=np.float32).dtype == np.float32


def test_cov_refuses_bad_weights_and_warns_on_no_dof():
    m = _r(2, 3)
    with pytest.raises(TypeError, match="fweights must be integer"):
        tg.cov(m, fweights=[1.5, 1.0, 1.0])
    with pytest.raises(ValueError, match="fweights cannot be negative"):
        tg.cov(m, fweights=[1, -1, 1])
    with pytest.raises(RuntimeError, match="incompatible numbers of samples and aweights"):
        tg.cov(m, aweights=[1.0, 1.0])
    with pytest.raises(ValueError, match="more than 2 dimensions"):
        tg.cov(np.ones((2, 2, 2)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = tg.cov(_r(2, 1))
    assert any("degrees of freedom" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(np.isnan(out.numpy()), np.isnan(np.cov(_r(2, 1))))


def test_corrcoef_matches_numpy():
    for args, kwargs in [((_r(3, 6),), {}), ((_r(6), _r(6)), {}), ((_r(6, 3),), {"rowvar": False})]:
        np.testing.assert_allclose(tg.corrcoef(*args, **kwargs).numpy(),
                                   np.corrcoef(*args, **kwargs), rtol=1e-12)
    assert tg.corrcoef(_r(5)).item() == 1.0
    with pytest.warns(DeprecationWarning):
        tg.corrcoef(_r(3, 4), bias=True)


# -- ediff1d, trapezoid, unwrap, vander ----------------------------------------------------

def test_ediff1d_matches_numpy():
    a = _r(2, 3)
    np.testing.assert_allclose(tg.ediff1d(a).numpy(), np.ediff1d(a))
    np.testing.assert_allclose(tg.ediff1d(a, to_end=[1.0, 2.0], to_begin=-5.0).numpy(),
                               np.ediff1d(a, to_end=[1.0, 2.0], to_begin=-5.0))
    assert tg.ediff1d(np.arange(4, dtype=np.int32)).dtype == np.int32
    with pytest.raises(TypeError, match="same_kind"):
        tg.ediff1d(np.arange(4), to_begin=0.5)


def test_ediff1d_gradient_reaches_to_begin_and_to_end():
    a, b, e = _t(_r(4), True), _t(1.0, True), _t(_r(2), True)
    (tg.ediff1d(a, to_end=e, to_begin=b) * tg.tensor(np.arange(1.0, 7.0))).sum().backward()
    assert b.grad.item() == 1.0 and e.grad.tolist() == [5.0, 6.0]
    assert a.grad.tolist() == [-2.0, -1.0, -1.0, 4.0]


@pytest.mark.parametrize("args,kwargs", [
    ((np.array([1.0, 2.0, 3.0]),), {}),
    ((np.array([1.0, 2.0, 3.0]),), {"x": [4.0, 6.0, 8.0]}),
    ((np.array([1.0, 2.0, 3.0]),), {"dx": 2.0}),
    ((np.arange(12.0).reshape(3, 4),), {"axis": 0}),
    ((np.arange(12.0).reshape(3, 4) ** 2,), {"x": np.array([0.0, 0.5, 2.0, 2.5])}),
    ((np.arange(12.0).reshape(3, 4) ** 2,),
     {"x": np.cumsum(np.ones((3, 4)), axis=0), "axis": 0}),
])
def test_trapezoid_matches_numpy(args, kwargs):
    np.testing.assert_allclose(tg.trapezoid(*args, **kwargs).numpy(),
                               np.trapezoid(*args, **kwargs))


def test_trapezoid_gradient_in_x_and_dtype():
    y, x = _t([1.0, 4.0, 9.0], True), _t([0.0, 1.0, 3.0], True)
    tg.trapezoid(y, x).backward()
    assert y.grad.tolist() == [0.5, 1.5, 1.0]
    assert x.grad.tolist() == [-2.5, -4.0, 6.5]          # d/dx of sum (x1-x0)(y0+y1)/2
    assert tg.trapezoid(np.ones(3, np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="trapezoid"):
        tg.trapezoid(np.ones(3), x=[0.0, 1.0])


@pytest.mark.parametrize("args,kwargs", [
    ((np.array([0.0, 3.0, 6.5, 0.5, 7.0]),), {}),
    ((np.linspace(0, 20, 9),), {"discont": 4.0}),
    ((RNG.standard_normal((3, 5)) * 5,), {"axis": 0}),
    ((np.array([0, 1, 5, 2, 8, 3]),), {"period": 6}),
    ((np.array([0, 1, 5, 2, 8, 3]),), {"period": 5}),
    ((np.array([5.0, 7.0, 1.0, 9.0]),), {"period": 4.0}),
    ((np.array([0.0, 3.0, 6.5], np.float32),), {}),
])
def test_unwrap_matches_numpy(args, kwargs):
    got, want = tg.unwrap(*args, **kwargs), np.unwrap(*args, **kwargs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)


def test_unwrap_gradient_is_one():
    p = _t([0.0, 3.0, 6.5, 0.5], True)
    tg.unwrap(p).sum().backward()
    assert p.grad.tolist() == [1.0] * 4


@pytest.mark.parametrize("kwargs", [{}, {"N": 2}, {"N": 5, "increasing": True}, {"N": 0}])
def test_vander_matches_numpy(kwargs):
    x = np.array([0.0, 1.5, -2.0, 3.0])
    np.testing.assert_array_equal(tg.vander(x, **kwargs).numpy(), np.vander(x, **kwargs))
    np.testing.assert_array_equal(tg.vander(np.arange(3), **kwargs).numpy(),
                                  np.vander(np.arange(3), **kwargs))


def test_vander_gradient_at_zero_and_errors():
    x = _t([0.0, 2.0], True)
    tg.vander(x, 3).sum().backward()                     # d/dx (x^2 + x + 1) = 2x + 1
    assert x.grad.tolist() == [1.0, 5.0]
    with pytest.raises(ValueError, match="one-dimensional"):
        tg.vander(np.ones((2, 2)))


# -- logspace, geomspace -------------------------------------------------------------------

@pytest.mark.parametrize("args,kwargs", [
    ((0.0, 2.0), {"num": 5}), ((1, 3), {"num": 4, "endpoint": False, "base": 2.0}),
    ((np.array([0.0, 1.0]), 3.0), {"num": 4}),
    ((np.array([0.0, 1.0]), np.array([2.0, 3.0])), {"num": 3, "axis": 1}),
    ((0.0, np.array([1.0, 2.0])), {"num": 3, "base": np.array([2.0, 3.0])}),
    ((0.0, 2.0), {"num": 1}), ((0.0, 2.0), {"num": 0}), ((0.0, 2.5), {"num": 4, "dtype": int}),
])
def test_logspace_matches_numpy(args, kwargs):
    got, want = tg.logspace(*args, **kwargs), np.logspace(*args, **kwargs)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)


def test_logspace_is_differentiable_in_start_stop_and_base():
    s, e, b = _t(0.5, True), _t([1.0, 2.0], True), _t(3.0, True)
    assert tg.gradcheck(lambda s, e, b: tg.logspace(s, e, 4, base=b), (s, e, b))
    assert tg.logspace(np.float32(0), np.ones(2, np.float32), 3).dtype == np.float32


@pytest.mark.parametrize("args,kwargs", [
    ((1.0, 1000.0), {"num": 4}), ((-1.0, -1000.0), {"num": 4}),
    ((2.0, 7.0), {"num": 5, "endpoint": False}),
    ((np.array([1.0, -2.0]), np.array([8.0, -5.0])), {"num": 4, "axis": -1}),
    ((1, 16), {"num": 5}), ((3.0, 9.0), {"num": 1}),
])
def test_geomspace_matches_numpy_with_exact_ends(args, kwargs):
    got, want = tg.geomspace(*args, **kwargs), np.geomspace(*args, **kwargs)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)
    if kwargs.get("endpoint", True) and kwargs["num"] > 1:
        np.testing.assert_array_equal(np.take(got.numpy(), -1, axis=kwargs.get("axis", 0)),
                                      np.take(want, -1, axis=kwargs.get("axis", 0)))


def test_geomspace_gradient_and_errors():
    s, e = _t(2.0, True), _t(32.0, True)
    assert tg.gradcheck(lambda s, e: tg.geomspace(s, e, 5), (s, e))
    with pytest.raises(ValueError, match="cannot include zero"):
        tg.geomspace(0.0, 1.0, 3)
    with pytest.raises(ValueError, match="opposite signs"):
        tg.geomspace(-1.0, 1.0, 3)


# -- interp ----------------------------------------------------------------------------------

XP = np.array([-1.0, 0.0, 0.5, 2.0, 3.5])
FP = np.array([1.0, -2.0, 0.5, 4.0, 3.0])


@pytest.mark.parametrize("x", [
    np.array([-3.0, -1.0, -0.2, 0.0, 0.25, 0.5, 1.7, 2.0, 3.5, 9.0, np.nan]),
    np.array(0.3), 1.25, np.linspace(-2, 4, 12).reshape(3, 4),
])
def test_interp_matches_numpy(x):
    np.testing.assert_allclose(tg.interp(x, XP, FP).numpy(), np.interp(x, XP, FP), rtol=1e-14)
    np.testing.assert_allclose(tg.interp(x, XP, FP, left=-7.0, right=8.0).numpy(),
                               np.interp(x, XP, FP, left=-7.0, right=8.0), rtol=1e-14)


def test_interp_with_period_and_a_single_point():
    x = np.array([-180.0, -170.0, -185.0, 185.0, -10.0, -5.0, 0.0, 365.0, 10.0])
    xp, fp = np.array([190.0, -190.0, 350.0, -350.0]), np.array([5.0, 10.0, 3.0, 4.0])
    np.testing.assert_allclose(tg.interp(x, xp, fp, period=360).numpy(),
                               np.interp(x, xp, fp, period=360), rtol=1e-14)
    x1 = np.array([-1.0, 2.0, 3.0])
    np.testing.assert_array_equal(tg.interp(x1, [2.0], [5.0]).numpy(), np.interp(x1, [2.0], [5.0]))


def test_interp_gradients_in_x_and_fp():
    x, fp = _t([-3.0, 0.25, 0.5, 3.5], True), _t(FP, True)
    tg.interp(x, XP, fp).sum().backward()
    # slopes: outside 0; at the knot 0.5 the segment to its right; at 3.5 the last one
    assert x.grad.tolist() == [0.0, 5.0, (4.0 - 0.5) / 1.5, (3.0 - 4.0) / 1.5]
    np.testing.assert_allclose(fp.grad.numpy(), [1.0, 0.5, 1.5, 0.0, 1.0])


def test_interp_xp_is_a_constant_and_dtypes():
    xp = _t(XP, True)
    with pytest.raises(NotImplementedError, match="interp: the derivative with respect to xp"):
        tg.interp(_t([0.2], True), xp, FP)
    out = tg.interp(_t([0.2], True), xp.detach(), FP)
    out.sum().backward()
    assert xp.grad is None
    f32 = np.float32
    assert tg.interp(np.ones(2, f32), XP.astype(f32), FP.astype(f32)).dtype == np.float32
    assert tg.interp(np.array([0, 1]), [0, 1], [0, 2]).dtype == np.float64


def test_interp_xp_refuses_a_forward_mode_tangent_and_x_fp_keep_theirs():
    x = np.array([-0.5, 0.2, 1.3, 3.0])
    with pytest.raises(NotImplementedError, match="interp: the derivative with respect to xp.*"
                                                  "carries a forward-mode tangent"):
        check_jvp(lambda xp: tg.interp(_t(x), xp, FP), XP, RNG.standard_normal(5))
    check_jvp(lambda x, fp: tg.interp(x, XP, fp), (x, FP),
              (RNG.standard_normal(4), RNG.standard_normal(5)),
              reference=lambda x, fp: np.interp(x, XP, fp), atol=1e-7, rtol=1e-7)


def test_interp_refuses_bad_input():
    with pytest.raises(ValueError, match="not of the same length"):
        tg.interp(0.5, [0.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="empty"):
        tg.interp(0.5, [], [])
    with pytest.raises(ValueError, match="1-D"):
        tg.interp(0.5, [[0.0, 1.0]], [[1.0, 2.0]])
    with pytest.raises(ValueError, match="period must be a non-zero"):
        tg.interp(0.5, [0.0, 1.0], [1.0, 2.0], period=0)


# -- ldexp, modf -------------------------------------------------------------------------------

def test_ldexp_matches_numpy_and_differentiates_x1():
    x1, x2 = _r(3, 4), np.array([[1], [0], [-3]])
    np.testing.assert_array_equal(tg.ldexp(x1, x2).numpy(), np.ldexp(x1, x2))
    assert tg.ldexp(np.ones(2, np.float32), np.array([1, 2])).dtype == np.float32
    assert tg.ldexp(np.array([1, 2]), 3).dtype == np.ldexp(np.array([1, 2]), 3).dtype
    x = _t([1.5, -2.0], True)
    tg.ldexp(x, np.array([2, -1])).sum().backward()
    assert x.grad.tolist() == [4.0, 0.5]
    with pytest.raises(TypeError, match="ldexp: the exponent x2 must be integers"):
        tg.ldexp(np.ones(2), np.ones(2))


def test_modf_matches_numpy_with_two_outputs():
    x = np.array([3.25, -1.5, 0.0, 2.0, -7.0, np.inf, -np.inf, 1e20, np.nan])
    frac, whole = tg.modf(x)
    want_frac, want_whole = np.modf(x)
    np.testing.assert_array_equal(frac.numpy(), want_frac)
    np.testing.assert_array_equal(np.signbit(frac.numpy()), np.signbit(want_frac))
    np.testing.assert_array_equal(whole.numpy(), want_whole)
    assert tg.modf(np.ones(2, np.float32))[0].dtype == np.float32
    assert tg.modf(np.array([1, 2]))[1].dtype == np.modf(np.array([1, 2]))[1].dtype
    t = _t([3.25, -1.5], True)
    f, w = tg.modf(t)
    (f * 2 + w * 5).sum().backward()
    assert t.grad.tolist() == [2.0, 2.0]


def test_numpy_dispatches_to_the_numerics():
    a = _t(_r(4), True)
    assert isinstance(np.convolve(a, np.ones(2)), tg.Tensor)
    assert isinstance(np.trapezoid(a), tg.Tensor)
    assert math.isclose(np.trapezoid(a).item(), np.trapezoid(a.numpy()))
