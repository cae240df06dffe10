"""gradient, diff, any/all, amax/amin, the nan-reductions, average, ptp and the order
statistics (median, quantile, percentile and their nan versions): values and dtypes
against NumPy, the gradient conventions the contract kit cannot see (NaN entries, ties,
even counts, interpolation weights), argument forms and bad input."""

import warnings

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_shape.statistics as statistics
from tapegrad.testing import check_jvp, run_doctests

RNG = np.random.default_rng(7)
NAN = np.nan
AxisError = np.exceptions.AxisError


def r(*shape):
    return RNG.standard_normal(shape)


def with_nans(*shape, every=3):
    x = r(*shape)
    x.reshape(-1)[::every] = NAN
    return x


def same(t, expected, exact=True):
    expected = np.asarray(expected)
    got = np.asarray(t)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got, expected)
    if exact:
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)


def grad_of(f, x):
    t = tg.tensor(x, requires_grad=True)
    f(t).backward()
    return t.grad.numpy()


def quiet(f, *args, **kwargs):
    """NumPy's result without its warnings (empty and all-NaN slices)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return f(*args, **kwargs)


def test_docstring_examples_run():
    result = run_doctests(statistics)
    assert result.failed == 0 and result.attempted > 20


def test_no_method_where_numpy_has_none():
    for name in ("ptp", "median", "quantile", "percentile", "average", "nansum", "gradient",
                 "diff", "amax", "amin"):
        assert not hasattr(tg.Tensor, name), name
    assert hasattr(tg.Tensor, "any") and hasattr(tg.Tensor, "all")


# ---------------------------------------------------------------------------------------
# diff
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    {}, {"n": 2}, {"n": 0}, {"n": 4}, {"axis": 0}, {"axis": 1, "n": 2},
    {"prepend": 0.5}, {"append": np.array([[1.0], [2.0], [3.0]])},
    {"axis": 0, "prepend": np.ones((2, 4)), "append": 7.0}, {"n": 6},
])
def test_diff_matches_numpy(kwargs):
    x = r(3, 4)
    same(tg.diff(tg.tensor(x), **kwargs), np.diff(x, **kwargs), exact=False)


def test_diff_of_bools_and_integers_matches_numpy():
    b = np.array([True, False, False, True])
    same(tg.diff(b), np.diff(b))
    same(tg.diff(np.arange(6) ** 2, n=2), np.diff(np.arange(6) ** 2, n=2))


def test_diff_gradient_reaches_prepend_and_append():
    x, p, a = (tg.tensor(v, requires_grad=True) for v in (r(4), r(1), r(2)))
    w = r(6)
    (tg.diff(x, prepend=p, append=a) * w).sum().backward()
    full_grad = np.zeros(7)                      # d/dz of sum(w * (z[1:] - z[:-1]))
    full_grad[1:] += w
    full_grad[:-1] -= w
    same(p.grad, full_grad[:1], exact=False)
    same(x.grad, full_grad[1:5], exact=False)
    same(a.grad, full_grad[5:], exact=False)


def test_diff_refuses_bad_input():
    with pytest.raises(ValueError, match="diff: the order n must be non-negative, got -1"):
        tg.diff(tg.ones(3), n=-1)
    with pytest.raises(TypeError, match="diff: the order n must be an integer"):
        tg.diff(tg.ones(3), n=1.5)
    with pytest.raises(ValueError, match="diff requires input that is at least one dimensional"):
        tg.diff(tg.tensor(1.0))
    with pytest.raises(AxisError, match="diff: axis 2 is out of bounds"):
        tg.diff(tg.ones((2, 2)), axis=2)


# ---------------------------------------------------------------------------------------
# gradient
# ---------------------------------------------------------------------------------------

COORDS = np.array([0.0, 0.4, 1.5, 1.7, 3.0])


@pytest.mark.parametrize("args,kwargs", [
    ((), {}), ((0.5,), {}), ((), {"edge_order": 2}), ((0.5,), {"edge_order": 2}),
    ((COORDS,), {}), ((COORDS,), {"edge_order": 2}), ((np.arange(5) * 2,), {}),
])
def test_gradient_of_a_vector_matches_numpy(args, kwargs):
    f = r(5)
    same(tg.gradient(tg.tensor(f), *args, **kwargs), np.gradient(f, *args, **kwargs), exact=False)


@pytest.mark.parametrize("args,kwargs", [
    ((), {}), ((2.0,), {}), ((COORDS[:4], COORDS), {}), ((1.0, COORDS), {"edge_order": 2}),
    ((COORDS[:4],), {"axis": 0}), ((), {"axis": -1, "edge_order": 2}),
    ((0.5, 2.0), {"axis": (1, 0)}),
])
def test_gradient_of_a_matrix_matches_numpy(args, kwargs):
    f = r(4, 5)
    got, expected = tg.gradient(tg.tensor(f), *args, **kwargs), np.gradient(f, *args, **kwargs)
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected):
            same(g, e, exact=False)
    else:
        same(got, expected, exact=False)


def test_gradient_dtypes_follow_numpy():
    same(tg.gradient(np.arange(5) ** 2), np.gradient(np.arange(5) ** 2))     # int -> float64
    f32 = r(5).astype(np.float32)
    got = tg.gradient(tg.tensor(f32), COORDS)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), np.gradient(f32, COORDS), rtol=1e-5)


def test_gradient_is_linear_so_its_gradient_is_its_transpose():
    # sum(w * gradient(f)) is linear in f: its gradient is J^T w, J the matrix of np.gradient.
    w = r(5)
    jac = np.stack([np.gradient(e, COORDS, edge_order=2) for e in np.eye(5)], axis=1)
    got = grad_of(lambda t: (tg.gradient(t, COORDS, edge_order=2) * w).sum(), r(5))
    np.testing.assert_allclose(got, jac.T @ w, rtol=1e-12)


def test_gradient_spacing_tensor_is_a_constant_and_refuses_to_require_grad():
    f, x = tg.tensor(r(5), requires_grad=True), tg.tensor(COORDS, requires_grad=True)
    with pytest.raises(NotImplementedError, match="gradient: the derivative with respect to the spacing"):
        tg.gradient(f, x)
    tg.gradient(f, x.detach()).sum().backward()
    assert f.grad is not None and x.grad is None


def test_gradient_spacing_refuses_a_forward_mode_tangent_and_f_keeps_its_own():
    f = r(5)
    with pytest.raises(NotImplementedError, match="gradient: the derivative with respect to "
                                                  "the spacing .* carries a forward-mode tangent"):
        check_jvp(lambda x: tg.gradient(tg.tensor(f), x), COORDS, r(5))
    t = r(5)          # a tangent on f only: np.gradient is linear in f
    got = check_jvp(lambda f: tg.gradient(f, tg.tensor(COORDS)), f, t,
                    reference=lambda f: np.gradient(f, COORDS), atol=1e-8, rtol=1e-7)
    np.testing.assert_allclose(got, np.gradient(t, COORDS), rtol=1e-12, atol=1e-12)


def test_gradient_refuses_bad_input():
    with pytest.raises(ValueError, match=r"too small to calculate a numerical gradient: at least edge_order \+ 1 = 3"):
        tg.gradient(tg.ones(2), edge_order=2)
    with pytest.raises(ValueError, match="gradient: edge_order must be 1 or 2"):
        tg.gradient(tg.ones(5), edge_order=3)
    with pytest.raises(TypeError, match="gradient: invalid number of spacing arguments: 3 for 2 axes"):
        tg.gradient(tg.ones((3, 3)), 1.0, 2.0, 3.0)
    with pytest.raises(ValueError, match="distances must be either scalars or 1-D"):
        tg.gradient(tg.ones(3), np.ones((3, 1)))
    with pytest.raises(ValueError, match="distances must match the length"):
        tg.gradient(tg.ones(3), np.arange(4.0))
    with pytest.raises(AxisError, match="gradient"):
        tg.gradient(tg.ones(3), axis=1)


# ---------------------------------------------------------------------------------------
# any, all, amax, amin, ptp
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["any", "all"])
@pytest.mark.parametrize("x", [np.array([[0.0, 1.0], [0.0, 0.0]]), np.array([[NAN, 0.0], [2.0, 3.0]]),
                               np.array([[True, False], [True, True]]), np.arange(6).reshape(2, 3),
                               np.zeros((0, 2))])
@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"axis": -1, "keepdims": True},
                                    {"axis": (0, 1)}, {"keepdims": True}])
def test_any_all_match_numpy(name, x, kwargs):
    same(getattr(tg, name)(tg.tensor(x), **kwargs), getattr(np, name)(x, **kwargs))


def test_any_all_are_methods_with_no_gradient():
    x = tg.tensor([[0.0, 1.0], [0.0, 0.0]], requires_grad=True)
    same(x.any(0), [False, True])
    same(x.all(axis=1, keepdims=True), [[False], [False]])
    assert not x.any().requires_grad and x.any().dtype == np.bool_
    with pytest.raises(TypeError, match="any"):
        tg.any(x, out=None)


def test_amax_and_amin_are_max_and_min():
    assert tg.amax is tg.max and tg.amin is tg.min
    x = r(3, 4)
    same(tg.amax(x, axis=1), np.amax(x, axis=1))
    same(tg.amin(x, axis=(0, 1), keepdims=True), np.amin(x, axis=(0, 1), keepdims=True))


@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"axis": 1, "keepdims": True}, {"axis": (0, 1)}])
def test_ptp_matches_numpy(kwargs):
    x = r(3, 4)
    same(tg.ptp(tg.tensor(x), **kwargs), np.ptp(x, **kwargs))
    same(tg.ptp(np.arange(12).reshape(3, 4), **kwargs), np.ptp(np.arange(12).reshape(3, 4), **kwargs))


def test_ptp_ties_share_the_gradient_as_max_and_min_do():
    same(grad_of(tg.ptp, np.array([1.0, 3.0, 3.0, 1.0, 2.0])), [-0.5, 0.5, 0.5, -0.5, 0.0])
    x = np.array([[1.0, 3.0, 3.0], [0.0, 0.0, 5.0]])
    expected = grad_of(lambda t: (tg.max(t, axis=1) - tg.min(t, axis=1)).sum(), x)
    same(grad_of(lambda t: tg.ptp(t, axis=1).sum(), x), expected)


# ---------------------------------------------------------------------------------------
# nansum, nanmean, nanvar, nanstd
# ---------------------------------------------------------------------------------------

NAN_CASES = [with_nans(3, 4), with_nans(2, 3, 4, every=4),
             np.array([[NAN, NAN, NAN], [1.0, NAN, 2.0]]), r(3, 4)]


@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanvar", "nanstd"])
@pytest.mark.parametrize("case", range(len(NAN_CASES)))
@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"axis": -1, "keepdims": True},
                                    {"axis": (0, 1)}, {"keepdims": True}])
def test_nan_reductions_match_numpy(name, case, kwargs):
    x = NAN_CASES[case]
    got = getattr(tg, name)(tg.tensor(x), **kwargs)
    same(got, quiet(getattr(np, name), x, **kwargs), exact=False)


@pytest.mark.parametrize("name", ["nanvar", "nanstd"])
@pytest.mark.parametrize("ddof", [1, 2, 3])
def test_nanvar_nanstd_ddof_match_numpy(name, ddof):
    x = NAN_CASES[0]
    for axis in (None, 0, 1):
        same(getattr(tg, name)(x, axis=axis, ddof=ddof),
             quiet(getattr(np, name), x, axis=axis, ddof=ddof), exact=False)


@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanvar", "nanstd"])
def test_nan_reductions_of_integers_and_float32_match_numpy(name):
    i = np.arange(12).reshape(3, 4)
    same(getattr(tg, name)(i, axis=0), getattr(np, name)(i, axis=0), exact=False)
    f = with_nans(3, 4).astype(np.float32)
    got = getattr(tg, name)(tg.tensor(f), axis=1)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), getattr(np, name)(f, axis=1), rtol=1e-5)


@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanvar", "nanstd"])
def test_nan_reductions_give_gradient_zero_at_nan_entries(name):
    x = NAN_CASES[2]
    g = grad_of(lambda t: tg.nansum(getattr(tg, name)(t, axis=1)), x)
    assert np.all(g[np.isnan(x)] == 0) and np.all(np.isfinite(g))
    # elsewhere: the gradient of the same reduction of the non-NaN values alone
    ref = grad_of(lambda t: getattr(tg, name[3:])(t), x[1, [0, 2]])
    np.testing.assert_allclose(g[1, [0, 2]], ref, rtol=1e-12)


def test_nanmean_of_an_all_nan_slice_warns_nothing_and_is_nan():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = tg.nanmean(tg.tensor(NAN_CASES[2]), axis=1)
        out_var = tg.nanvar(tg.tensor(NAN_CASES[2]), axis=1, ddof=2)
    assert np.isnan(out.numpy()[0]) and out.numpy()[1] == 1.5
    assert np.isnan(out_var.numpy()).all()          # dof <= 0: NaN, as NumPy


# ---------------------------------------------------------------------------------------
# average
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis,wshape,keepdims", [
    (None, None, False), (0, None, True), (None, (3, 4), False), (1, (4,), False),
    (0, (3,), True), ((0, 1), (3, 4), False), ((1, 0), (4, 3), False), (-1, (3, 4), True),
])
@pytest.mark.parametrize("returned", [False, True])
def test_average_matches_numpy(axis, wshape, keepdims, returned):
    x = r(3, 4)
    w = None if wshape is None else np.abs(r(*wshape)) + 0.1
    got = tg.average(tg.tensor(x), axis=axis, weights=w, returned=returned, keepdims=keepdims)
    expected = np.average(x, axis=axis, weights=w, returned=returned, keepdims=keepdims)
    if returned:
        assert isinstance(got, tuple)
        same(got[0], expected[0], exact=False)
        same(got[1], expected[1], exact=False)
    else:
        same(got, expected, exact=False)


def test_average_of_3d_with_weights_along_two_axes_matches_numpy():
    x, w = r(2, 3, 4), np.abs(r(4, 2)) + 0.1
    same(tg.average(x, axis=(2, 0), weights=w), np.average(x, axis=(2, 0), weights=w), exact=False)


def test_average_dtypes_follow_numpy():
    i = np.arange(6).reshape(2, 3)
    same(tg.average(i, axis=1, weights=[1, 2, 3]), np.average(i, axis=1, weights=[1, 2, 3]), exact=False)
    f = r(2, 3).astype(np.float32)
    assert tg.average(tg.tensor(f), axis=1, weights=np.float32([1, 2, 3])).dtype == np.float32


def test_average_gradient_in_a_and_weights():
    x, w = tg.tensor(r(4), requires_grad=True), tg.tensor(np.abs(r(4)) + 0.5, requires_grad=True)
    tg.average(x, weights=w).backward()
    xs, ws = x.numpy(), w.numpy()
    np.testing.assert_allclose(x.grad.numpy(), ws / ws.sum(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), (xs - (xs * ws).sum() / ws.sum()) / ws.sum(), rtol=1e-12)


def test_average_refuses_bad_weights():
    with pytest.raises(TypeError, match="average: axis must be specified when the shapes"):
        tg.average(tg.ones((2, 3)), weights=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="the shape of weights .* must be consistent"):
        tg.average(tg.ones((2, 3)), axis=1, weights=[1.0, 2.0])
    with pytest.raises(ZeroDivisionError, match="average: the weights sum to zero"):
        tg.average(tg.ones((2, 3)), axis=1, weights=[1.0, -1.0, 0.0])
    with pytest.raises(AxisError, match="average"):
        tg.average(tg.ones((2, 3)), axis=2)


# ---------------------------------------------------------------------------------------
# median, quantile, percentile and the nan versions
# ---------------------------------------------------------------------------------------

METHODS = ["inverted_cdf", "averaged_inverted_cdf", "closest_observation",
           "interpolated_inverted_cdf", "hazen", "weibull", "linear", "median_unbiased",
           "normal_unbiased", "lower", "higher", "midpoint", "nearest"]
X3 = r(4, 5, 6)


@pytest.mark.parametrize("method", METHODS)
def test_quantile_matches_numpy_bit_for_bit(method):
    for q in (0.0, 0.3, 0.5, 1.0, [0.1, 0.9], [[0.2, 0.7], [1.0, 0.0]]):
        for axis in (None, 1, (0, 2), -1):
            for keepdims in (False, True):
                same(tg.quantile(X3, q, axis=axis, method=method, keepdims=keepdims),
                     np.quantile(X3, q, axis=axis, method=method, keepdims=keepdims))


@pytest.mark.parametrize("method", METHODS)
def test_nan_quantiles_match_numpy(method):
    x = with_nans(4, 5, 6)
    x[0, :, 0] = NAN                                   # an all-NaN slice along axis 1
    for q in (0.0, 0.3, 1.0, [0.1, 0.9]):
        for axis in (None, 1, (0, 2)):
            same(tg.quantile(x, q, axis=axis, method=method),
                 np.quantile(x, q, axis=axis, method=method))
            same(tg.nanquantile(x, q, axis=axis, method=method),
                 quiet(np.nanquantile, x, q, axis=axis, method=method))


def test_percentiles_match_numpy():
    x = with_nans(3, 7)
    for method in ("linear", "nearest", "weibull"):
        for q in (30, [0, 12.5, 100], 50.0):
            same(tg.percentile(X3, q, axis=2, method=method), np.percentile(X3, q, axis=2, method=method))
            same(tg.nanpercentile(x, q, axis=1, method=method),
                 np.nanpercentile(x, q, axis=1, method=method))


@pytest.mark.parametrize("x", [X3, X3[:, :4], np.arange(24).reshape(2, 3, 4), with_nans(3, 4, 5)])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_median_and_nanmedian_match_numpy_bit_for_bit(x, axis, keepdims):
    same(tg.median(x, axis=axis, keepdims=keepdims), np.median(x, axis=axis, keepdims=keepdims))
    same(tg.nanmedian(x, axis=axis, keepdims=keepdims),
         quiet(np.nanmedian, x, axis=axis, keepdims=keepdims))


def test_quantile_dtypes_follow_numpy():
    f32, i = np.arange(7, dtype=np.float32), np.arange(7)
    for method in METHODS:
        for q in (0.3, 1, np.array(0.3), [0.3]):     # a Python number promotes weakly
            same(tg.quantile(f32, q, method=method), np.quantile(f32, q, method=method))
            same(tg.quantile(i, q, method=method), np.quantile(i, q, method=method))
    for x in (f32, i, np.float16([1, 2, 4])):
        same(tg.median(x), np.median(x))


def test_median_of_an_even_count_splits_the_gradient_between_the_two_middle_values():
    # NumPy's median is their mean (torch.median would return the lower one instead).
    same(grad_of(tg.median, np.array([4.0, 1.0, 3.0, 2.0])), [0.0, 0.0, 0.5, 0.5])
    same(grad_of(tg.median, np.array([4.0, 1.0, 3.0])), [0.0, 0.0, 1.0])
    g = grad_of(lambda t: tg.median(t, axis=0).sum(), np.array([[1.0, 5.0], [3.0, 2.0], [2.0, 4.0]]))
    same(g, [[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]])


def test_median_ties_send_the_gradient_to_one_element_per_rank():
    g = grad_of(tg.median, np.array([2.0, 2.0, 2.0, 5.0]))
    assert g.sum() == 1.0 and g[3] == 0.0 and sorted(g[:3].tolist()) == [0.0, 0.5, 0.5]


def test_quantile_gradient_is_the_interpolation_weights():
    x = np.array([3.0, 1.0, 2.0, 4.0, 0.0])            # sorted: 0 1 2 3 4
    # linear: virtual index (n - 1) q = 4 * 0.3 = 1.2 -> 0.8 at the value 1, 0.2 at 2
    np.testing.assert_allclose(grad_of(lambda t: tg.quantile(t, 0.3), x), [0, 0.8, 0.2, 0, 0])
    same(grad_of(lambda t: tg.quantile(t, 0.3, method="nearest"), x), [0.0, 1.0, 0.0, 0.0, 0.0])
    same(grad_of(lambda t: tg.quantile(t, 0.3, method="higher"), x), [0.0, 0.0, 1.0, 0.0, 0.0])
    same(grad_of(lambda t: tg.quantile(t, 1.0), x), [0.0, 0.0, 0.0, 1.0, 0.0])
    g = grad_of(lambda t: tg.quantile(t, [0.25, 0.3]).sum(), x)
    np.testing.assert_allclose(g, [0, 1.8, 0.2, 0, 0])


def test_quantile_of_a_slice_with_nan_is_nan_with_gradient_zero():
    x = np.array([[1.0, NAN, 3.0], [1.0, 2.0, 4.0]])
    g = grad_of(lambda t: tg.nansum(tg.quantile(t, 0.5, axis=1)), x)
    same(g, [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    g = grad_of(lambda t: tg.nanquantile(t, 0.25, axis=1).sum(), x)
    np.testing.assert_allclose(g, [[0.75, 0.0, 0.25], [0.5, 0.5, 0.0]])


def test_median_of_an_empty_slice_is_nan_as_numpy():
    same(tg.median(np.zeros((2, 0)), axis=1), quiet(np.median, np.zeros((2, 0)), axis=1))


def test_quantiles_refuse_bad_input():
    x = tg.tensor(r(5))
    with pytest.raises(ValueError, match=r"quantile: Quantiles must be in the range \[0, 1\], got \[1.5\]"):
        tg.quantile(x, [1.5])
    with pytest.raises(ValueError, match=r"percentile: Percentiles must be in the range \[0, 100\]"):
        tg.percentile(x, 101)
    with pytest.raises(ValueError, match="nanquantile: 'cubic' is not a valid method; use one of"):
        tg.nanquantile(x, 0.5, method="cubic")
    with pytest.raises(IndexError, match="quantile: cannot take a quantile of an empty slice"):
        tg.quantile(np.zeros((2, 0)), 0.5, axis=1)
    with pytest.raises(TypeError, match="quantile: q is not differentiable"):
        tg.quantile(x, tg.tensor(0.5, requires_grad=True))
    with pytest.raises(TypeError, match="quantile: q must be real numbers"):
        tg.quantile(x, "half")
    with pytest.raises(ValueError, match="q must be a scalar or 1-D or 2-D"):
        tg.quantile(x, np.full((1, 1, 1), 0.5))
    with pytest.raises(AxisError, match="median"):
        tg.median(x, axis=1)
    with pytest.raises(TypeError):
        tg.median(x, out=None)                         # out= is not supported



@pytest.mark.parametrize("name", ["quantile", "nanquantile", "percentile"])
def test_quantile_q_refuses_a_forward_mode_tangent_and_x_keeps_its_own(name):
    x, t = r(4, 5), r(4, 5)
    fn = getattr(tg, name)
    q = 50.0 if "percentile" in name else 0.5
    with pytest.raises(TypeError, match=f"{name}: q is not differentiable here.*carries a "
                                        f"forward-mode tangent"):
        check_jvp(lambda q: fn(tg.tensor(x), q, axis=1), np.array(q), np.array(1.0))
    # a tangent on x: finite differences of NumPy's own function
    np_fn = getattr(np, name)
    check_jvp(lambda x: fn(x, q, axis=1), x, t, reference=lambda x: np_fn(x, q, axis=1),
              atol=1e-7, rtol=1e-7)