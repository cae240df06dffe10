"""Issue 14's ops whose PyTorch counterpart is missing or differs, against finite
differences of the NumPy/SciPy function itself (independent of tapegrad's code).

For each case ``F(x) = sum(w * f(x))`` with a random cotangent ``w``: tapegrad's gradient
of F against central differences of NumPy's/SciPy's F, and tapegrad's second derivative
``u . H v`` (the gradient of ``<grad F, v>``, dotted with ``u``) against the four-point
difference of NumPy's F, for random directions u, v. The points are random and away from
the ops' kinks (ties, jumps), and the argument forms are those the contract kit's fixed
samples do not reach: other axes, keepdims, weights, methods, modes, shape parameters.
"""

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.signal as ssig
import scipy.special as sp
import scipy.stats as st
import tapegrad as tg

R = np.random.default_rng(2024)


def _outputs(out):
    out = out if isinstance(out, (tuple, list)) else (out,)
    return [np.asarray(o.numpy() if hasattr(o, "numpy") else o, dtype=np.float64) for o in out]


def check_fd(tg_fn, np_fn, inputs, *, wrt=None, h=1e-6, rtol=1e-5, atol=1e-7, second=True,
             h2=1e-4, rtol2=1e-4, atol2=1e-5):
    """tapegrad's first and second derivatives of tg_fn against finite differences of
    np_fn (the NumPy/SciPy function) at `inputs`, in the inputs listed by `wrt`."""
    inputs = [np.array(x, dtype=np.float64) for x in inputs]
    wrt = list(range(len(inputs))) if wrt is None else list(wrt)
    rng = np.random.default_rng(7)
    ref = _outputs(np_fn(*inputs))
    ws = [rng.standard_normal(r.shape) for r in ref]

    def F(*xs):
        return sum(float(np.sum(w * o)) for w, o in zip(ws, _outputs(np_fn(*xs))))

    ts = [tg.tensor(x, requires_grad=i in wrt) for i, x in enumerate(inputs)]
    outs = tg_fn(*ts)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    assert len(outs) == len(ref)
    for o, r in zip(outs, ref):
        assert tuple(o.shape) == r.shape
        np.testing.assert_allclose(o.numpy(), r, rtol=1e-10, atol=1e-12, err_msg="value")
    total = sum(((o * tg.tensor(w)).sum() for o, w in zip(outs, ws) if o.requires_grad),
                tg.tensor(0.0))
    grads = tg.grad(total, [ts[i] for i in wrt], create_graph=second, allow_unused=True)
    for i, g in zip(wrt, grads):
        num = np.zeros(inputs[i].shape)
        for k in np.ndindex(inputs[i].shape):
            xp = [x.copy() for x in inputs]
            xm = [x.copy() for x in inputs]
            xp[i][k] += h
            xm[i][k] -= h
            num[k] = (F(*xp) - F(*xm)) / (2 * h)
        got = np.zeros(inputs[i].shape) if g is None else g.numpy()
        np.testing.assert_allclose(got, num, rtol=rtol, atol=atol,
                                   err_msg=f"first derivative, input {i}")
    if not second:
        return
    vs = [rng.standard_normal(inputs[i].shape) for i in wrt]
    inner = sum(((g * tg.tensor(v)).sum() for g, v in zip(grads, vs)
                 if g is not None and g.requires_grad), tg.tensor(0.0))
    hv = (tg.grad(inner, [ts[i] for i in wrt], allow_unused=True) if inner.requires_grad
          else [None] * len(wrt))
    for _ in range(2):
        us = [rng.standard_normal(inputs[i].shape) for i in wrt]
        got = sum(float(np.sum(u * (0 if x is None else x.numpy()))) for u, x in zip(us, hv))

        def shifted(a, b):
            xs = [x.copy() for x in inputs]
            for j, u, v in zip(wrt, us, vs):
                xs[j] = xs[j] + a * h2 * u + b * h2 * v
            return F(*xs)
        num = (shifted(1, 1) - shifted(1, -1) - shifted(-1, 1) + shifted(-1, -1)) / (4 * h2 * h2)
        np.testing.assert_allclose(got, num, rtol=rtol2, atol=atol2,
                                   err_msg="second derivative u.Hv")


def case(name, tg_fn, np_fn, *inputs, **kw):
    return pytest.param(tg_fn, np_fn, inputs, kw, id=name)


def normal(*shape):
    return R.standard_normal(shape)


def positive(*shape):
    return R.uniform(0.5, 3.0, shape)


def spread(*shape):
    """Distinct values at least 0.05 apart (no ties, so order statistics are smooth)."""
    n = int(np.prod(shape))
    return (R.permutation(n) * 0.37 + R.uniform(0, 0.05, n)).reshape(shape) - 0.18 * n


def with_nans(*shape, count=3):
    x = spread(*shape).reshape(-1)
    x[R.choice(x.size, count, replace=False)] = np.nan
    return x.reshape(shape)


METHODS = ("inverted_cdf", "averaged_inverted_cdf", "closest_observation",
           "interpolated_inverted_cdf", "hazen", "weibull", "linear", "median_unbiased",
           "normal_unbiased", "lower", "higher", "midpoint", "nearest")
Q = np.array([0.05, 0.3, 0.5, 0.81, 0.97])

STATISTICS = [
    *[case(f"quantile_{m}", lambda x, m=m: tg.quantile(x, Q, axis=1, method=m),
           lambda x, m=m: np.quantile(x, Q, axis=1, method=m), spread(3, 7), second=False)
      for m in METHODS],
    case("quantile_axes_keepdims", lambda x: tg.quantile(x, [[0.2], [0.7]], axis=(0, 2),
                                                         keepdims=True, method="hazen"),
         lambda x: np.quantile(x, [[0.2], [0.7]], axis=(0, 2), keepdims=True, method="hazen"),
         spread(2, 3, 4)),
    case("quantile_none", lambda x: tg.quantile(x, 0.42, method="weibull"),
         lambda x: np.quantile(x, 0.42, method="weibull"), spread(3, 5)),
    case("percentile", lambda x: tg.percentile(x, [12.5, 60.0], axis=0, method="median_unbiased"),
         lambda x: np.percentile(x, [12.5, 60.0], axis=0, method="median_unbiased"),
         spread(6, 3)),
    *[case(f"nanquantile_{m}", lambda x, m=m: tg.nanquantile(x, Q, axis=0, method=m),
           lambda x, m=m: np.nanquantile(x, Q, axis=0, method=m), with_nans(7, 3, count=4))
      for m in ("linear", "normal_unbiased", "nearest", "midpoint")],
    case("nanpercentile_keep", lambda x: tg.nanpercentile(x, 35.0, axis=1, keepdims=True),
         lambda x: np.nanpercentile(x, 35.0, axis=1, keepdims=True), with_nans(3, 6)),
    case("median_even", lambda x: tg.median(x, axis=0), lambda x: np.median(x, axis=0),
         spread(4, 3)),
    case("median_axes", lambda x: tg.median(x, axis=(0, 2), keepdims=True),
         lambda x: np.median(x, axis=(0, 2), keepdims=True), spread(2, 3, 4)),
    case("median_none", tg.median, np.median, spread(3, 4)),
    case("nanmedian", lambda x: tg.nanmedian(x, axis=1), lambda x: np.nanmedian(x, axis=1),
         with_nans(3, 6, count=4)),
    case("nanmedian_none", tg.nanmedian, np.nanmedian, with_nans(3, 5, count=4)),
    case("average_weights", lambda x, w: tg.average(x, axis=1, weights=w, returned=True),
         lambda x, w: np.average(x, axis=1, weights=w, returned=True), normal(3, 4),
         positive(4)),
    case("average_weights_axes", lambda x, w: tg.average(x, axis=(2, 0), weights=w,
                                                         keepdims=True),
         lambda x, w: np.average(x, axis=(2, 0), weights=w, keepdims=True), normal(3, 2, 4),
         positive(4, 3)),
    case("average_weights_full", lambda x, w: tg.average(x, weights=w, returned=True),
         lambda x, w: np.average(x, weights=w, returned=True), normal(3, 4), positive(3, 4)),
    case("average_returned", lambda x: tg.average(x, axis=0, returned=True),
         lambda x: np.average(x, axis=0, returned=True), normal(3, 4)),
    *[case(f"nanvar_ddof{d}", lambda x, d=d: tg.nanvar(x, axis=1, ddof=d, keepdims=True),
           lambda x, d=d: np.nanvar(x, axis=1, ddof=d, keepdims=True), with_nans(3, 6))
      for d in (0, 1, 2)],
    case("nanvar_none", tg.nanvar, np.nanvar, with_nans(3, 4)),
    case("nanstd", lambda x: tg.nanstd(x, axis=0, ddof=1), lambda x: np.nanstd(x, axis=0, ddof=1),
         with_nans(5, 3)),
    case("nanstd_axes", lambda x: tg.nanstd(x, axis=(0, 2)), lambda x: np.nanstd(x, axis=(0, 2)),
         with_nans(2, 3, 4)),
    case("nanmean_axes", lambda x: tg.nanmean(x, axis=(0, 2), keepdims=True),
         lambda x: np.nanmean(x, axis=(0, 2), keepdims=True), with_nans(2, 3, 4)),
    case("nansum_dtype", lambda x: tg.nansum(x, axis=0, keepdims=True),
         lambda x: np.nansum(x, axis=0, keepdims=True), with_nans(4, 3)),
    case("ptp", lambda x: tg.ptp(x, axis=(0, 1)), lambda x: np.ptp(x, axis=(0, 1)),
         spread(3, 2, 4)),
    case("diff_prepend", lambda x, p: tg.diff(x, 2, axis=0, prepend=p, append=1.5),
         lambda x, p: np.diff(x, 2, axis=0, prepend=p, append=1.5), normal(4, 3), normal(1, 3)),
    *[case(f"gradient_edge{e}_{name}", lambda x, e=e, a=a: tg.gradient(x, *a, edge_order=e),
           lambda x, e=e, a=a: np.gradient(x, *a, edge_order=e), normal(4, 5))
      for e in (1, 2) for name, a in (
          ("default", ()), ("scalar", (0.7,)), ("per_axis", (0.5, 2.0)),
          ("coords", (np.array([0.0, 0.4, 1.5, 2.0]), np.array([0.0, 1.0, 1.2, 3.0, 3.1]))),
          ("mixed", (np.array([0.0, 0.4, 1.5, 2.0]), 0.3)))],
    case("gradient_axis", lambda x: tg.gradient(x, np.array([0.0, 0.5, 0.6, 2.0]), axis=-1,
                                                edge_order=2),
         lambda x: np.gradient(x, np.array([0.0, 0.5, 0.6, 2.0]), axis=-1, edge_order=2),
         normal(2, 3, 4)),
    case("gradient_axes", lambda x: tg.gradient(x, 0.5, 2.0, axis=(2, 0)),
         lambda x: np.gradient(x, 0.5, 2.0, axis=(2, 0)), normal(3, 2, 4)),
    case("logsumexp_b", lambda x, b: tg.logsumexp(x, axis=(0, 2), b=b, keepdims=True),
         lambda x, b: sp.logsumexp(x, axis=(0, 2), b=b, keepdims=True), normal(2, 3, 4),
         positive(3, 1)),
    case("logsumexp_b_none", lambda x, b: tg.logsumexp(x, b=b),
         lambda x, b: sp.logsumexp(x, b=b), normal(3, 4), positive(4)),
]


@pytest.mark.parametrize("tg_fn, np_fn, inputs, kw", STATISTICS)
def test_statistics_against_finite_differences(tg_fn, np_fn, inputs, kw):
    check_fd(tg_fn, np_fn, inputs, **kw)


def off_grid(*shape, scale=3.0):
    x = R.uniform(-scale, scale, shape)
    return np.floor(x) + R.uniform(0.15, 0.85, shape)


def dirty(*shape):
    x = normal(*shape).reshape(-1)
    x[0], x[1], x[2] = np.nan, np.inf, -np.inf
    return x.reshape(shape)


def nan_pair():
    a, b = normal(3, 4), normal(3, 4)
    a[0, 1] = b[1, 2] = np.nan
    return a, b


NA, NB = nan_pair()
EW = [
    # (default posinf/neginf: the largest finite floats, which finite differences of a
    # sum cannot resolve; those are checked with explicit values below)
    case("nan_to_num", lambda x: tg.nan_to_num(x), np.nan_to_num,
         np.where(np.eye(3, 4) > 0, np.nan, normal(3, 4))),
    case("nan_to_num_values", lambda x: tg.nan_to_num(x, True, 2.0, 9.0, -9.0),
         lambda x: np.nan_to_num(x, True, 2.0, 9.0, -9.0), dirty(2, 5)),
    case("fmax_nan", tg.fmax, np.fmax, NA, NB),
    case("fmin_nan", tg.fmin, np.fmin, NA, NB),
    case("fmax_bcast_nan", tg.fmax, np.fmax, NA, normal(4)),
    # (heaviside's x1 jumps at 0: its gradient there is 0 by convention; x2's is exact)
    case("heaviside", tg.heaviside, np.heaviside, np.array([[-1.0, 0.0, 2.0], [0.0, 0.0, -3.0]]),
         normal(2, 3), wrt=[1]),
    case("heaviside_bcast", tg.heaviside, np.heaviside, np.array([[-1.0], [0.0]]), normal(3),
         wrt=[1]),
    case("floor_divide", tg.floor_divide, np.floor_divide, off_grid(3, 4), np.array([1.5, -2.0, 0.7, 3.0])),
    case("remainder_neg", tg.remainder, np.remainder, off_grid(3, 4), np.array([-1.5, 2.0, -0.7, 3.0])),
    case("fmod_neg", tg.fmod, np.fmod, off_grid(3, 4), np.array([-1.5, 2.0, -0.7, 3.0])),
    case("divmod", tg.divmod, np.divmod, off_grid(2, 3), np.array([-1.5, 2.0, 0.7])),
    case("round_neg", lambda x: tg.round(x, -1), lambda x: np.round(x, -1),
         off_grid(3, 4, scale=3.0) * 10 + 0.1),
    case("around", lambda x: tg.around(x, 2), lambda x: np.around(x, 2), off_grid(3) / 100 + 1e-4),
    case("copysign", tg.copysign, np.copysign, normal(3, 4), normal(4)),
    case("logaddexp2", tg.logaddexp2, np.logaddexp2, normal(3, 1), normal(4)),
    case("sinc", tg.sinc, np.sinc, np.array([1e-3, -0.05, 0.0999, 0.1001, 0.5, 1.3, -2.7])),
    case("arctan2_bcast", tg.arctan2, np.arctan2, normal(2, 1, 3), normal(4, 1)),
]


@pytest.mark.parametrize("tg_fn, np_fn, inputs, kw", EW)
def test_elementwise_against_finite_differences(tg_fn, np_fn, inputs, kw):
    check_fd(tg_fn, np_fn, inputs, **kw)


IDX = R.integers(-4, 4, (3, 5))
SHAPE = [
    *[case(f"pad_{mode}_{w}", lambda x, mode=mode, w=w: tg.pad(x, w, mode=mode),
           lambda x, mode=mode, w=w: np.pad(x, w, mode=mode), normal(3, 4))
      for mode in ("edge", "reflect", "symmetric", "wrap")
      for w in (((2, 5), (1, 0)), 7, ((1,), ), ((0, 9), (4, 4)))],
    case("pad_reflect_1", lambda x: tg.pad(x, 3, mode="reflect"),
         lambda x: np.pad(x, 3, mode="reflect"), normal(2, 2)),
    case("pad_constant_values", lambda x: tg.pad(x, ((1, 2), (3, 0)), constant_values=((1, 2), (3, 4))),
         lambda x: np.pad(x, ((1, 2), (3, 0)), constant_values=((1, 2), (3, 4))), normal(2, 3)),
    case("cumprod_dtype", lambda x: tg.cumprod(x, axis=1, dtype=np.float64),
         lambda x: np.cumprod(x, axis=1, dtype=np.float64), normal(3, 4)),
    case("cumsum_method", lambda x: x.cumsum(axis=0), lambda x: np.cumsum(x, axis=0), normal(3, 4)),
    case("cumprod_method_zero", lambda x: x.cumprod(), lambda x: np.cumprod(x),
         np.array([[1.3, 0.0, -0.7], [0.0, 2.0, 0.5]])),
    case("sort_kind", lambda x: tg.sort(x, axis=0, kind="heapsort"),
         lambda x: np.sort(x, axis=0, kind="heapsort"), spread(4, 3)),
    case("sort_none", lambda x: tg.sort(x, None),
         lambda x: np.sort(x, None), spread(3, 4)),
    case("take_neg", lambda x: tg.take(x, IDX, axis=1), lambda x: np.take(x, IDX, axis=1),
         normal(2, 4, 2)),
    case("take_wrap", lambda x: tg.take(x, IDX * 3, axis=0, mode="wrap"),
         lambda x: np.take(x, IDX * 3, axis=0, mode="wrap"), normal(4, 2)),
    case("take_clip_flat", lambda x: tg.take(x, IDX * 3, mode="clip"),
         lambda x: np.take(x, IDX * 3, mode="clip"), normal(2, 3)),
    case("take_along_none", lambda x: tg.take_along_axis(x, np.array([5, 0, 5, 2]), axis=None),
         lambda x: np.take_along_axis(x, np.array([5, 0, 5, 2]), axis=None), normal(2, 3)),
    case("take_along_bcast", lambda x: tg.take_along_axis(x, np.array([[[1], [0]]]), axis=2),
         lambda x: np.take_along_axis(x, np.array([[[1], [0]]]), axis=2), normal(3, 2, 4)),
    case("put_along_axis", lambda x, v: tg.put_along_axis(x, np.array([[2], [0]]), v, axis=1),
         lambda x, v: (lambda y: (np.put_along_axis(y, np.array([[2], [0]]), v, 1), y)[1])(x.copy()),
         normal(2, 4), normal(2, 1)),
    case("put_along_axis_bcast", lambda x, v: tg.put_along_axis(x, np.array([[0, 3]]), v, axis=1),
         lambda x, v: (lambda y: (np.put_along_axis(y, np.array([[0, 3]]), v, 1), y)[1])(x.copy()),
         normal(3, 4), normal(1, 2)),
    case("put_along_axis_scalar_v", lambda x, v: tg.put_along_axis(x, np.array([[1], [2], [0]]), v, axis=1),
         lambda x, v: (lambda y: (np.put_along_axis(y, np.array([[1], [2], [0]]), v, 1), y)[1])(x.copy()),
         normal(3, 3), normal()),
    case("repeat_bcast", lambda x: tg.repeat(x, [2], axis=1), lambda x: np.repeat(x, [2], axis=1),
         normal(2, 3)),
    case("tile_more", lambda x: tg.tile(x, (2, 1, 1, 2)), lambda x: np.tile(x, (2, 1, 1, 2)),
         normal(3, 2)),
    case("roll_neg_axes", lambda x: tg.roll(x, (7, -1), axis=(-1, 0)),
         lambda x: np.roll(x, (7, -1), axis=(-1, 0)), normal(3, 4)),
    case("roll_same_axis", lambda x: tg.roll(x, (1, 2), axis=(1, 1)),
         lambda x: np.roll(x, (1, 2), axis=(1, 1)), normal(3, 4)),
    case("roll_bcast_shift", lambda x: tg.roll(x, 2, axis=(0, 1)),
         lambda x: np.roll(x, 2, axis=(0, 1)), normal(3, 4)),
    case("diagonal_neg_axes", lambda x: tg.diagonal(x, -1, -1, 0), lambda x: np.diagonal(x, -1, -1, 0),
         normal(4, 2, 3)),
    case("trace_dtype", lambda x: tg.trace(x, -1, 2, 0), lambda x: np.trace(x, -1, 2, 0),
         normal(3, 2, 4)),
    case("diag_far", lambda x: tg.diag(x, 5), lambda x: np.diag(x, 5), normal(3, 4)),
    case("tensordot_pairs", lambda a, b: tg.tensordot(a, b, axes=(1, 0)),
         lambda a, b: np.tensordot(a, b, axes=(1, 0)), normal(2, 3), normal(3, 4)),
    case("tensordot_neg", lambda a, b: tg.tensordot(a, b, axes=([-1, 0], [0, -1])),
         lambda a, b: np.tensordot(a, b, axes=([-1, 0], [0, -1])), normal(2, 3, 4), normal(4, 2)),
    case("inner_scalar", tg.inner, np.inner, normal(), normal(2, 3)),
    case("outer_nd", tg.outer, np.outer, normal(2, 2), normal(3)),
    case("kron_scalar", tg.kron, np.kron, normal(2, 3), normal()),
    case("kron_3d_1d", tg.kron, np.kron, normal(2, 1, 2), normal(3)),
    case("append_axis0", lambda a, b: tg.append(a, b, axis=0), lambda a, b: np.append(a, b, axis=0),
         normal(2, 3), normal(1, 3)),
    case("array_split_neg", lambda a: tg.array_split(a, 4, axis=-1),
         lambda a: np.array_split(a, 4, axis=-1), normal(2, 6)),
    case("column_stack_2d", lambda a, b: tg.column_stack((a, b)),
         lambda a, b: np.column_stack((a, b)), normal(3, 2), normal(3)),
    case("r_", lambda a, b: tg.r_[a, 0.5, b], lambda a, b: np.r_[a, 0.5, b], normal(3), normal(2)),
    case("r_axis", lambda a, b: tg.r_["1", a, b], lambda a, b: np.r_["1", a, b],
         normal(2, 3), normal(2, 1)),
    case("r_ndmin", lambda a, b: tg.r_["0,2", a, b], lambda a, b: np.r_["0,2", a, b],
         normal(3), normal(2, 3)),
    case("r_trans", lambda a, b: tg.r_["0,2,0", a, b], lambda a, b: np.r_["0,2,0", a, b],
         normal(3), normal(2, 1)),
    case("c_", lambda a, b: tg.c_[a, b], lambda a, b: np.c_[a, b], normal(3), normal(3, 2)),
    case("c_2d", lambda a, b: tg.c_[a, b], lambda a, b: np.c_[a, b], normal(2, 3), normal(2, 1)),
]


@pytest.mark.parametrize("tg_fn, np_fn, inputs, kw", SHAPE)
def test_shape_against_finite_differences(tg_fn, np_fn, inputs, kw):
    check_fd(tg_fn, np_fn, inputs, **kw)


SS, STS, SLA = tg.scipy.special, tg.scipy.stats, tg.scipy.linalg


def spd(n):
    x = normal(n, n)
    return x @ x.T + n * np.eye(n)


SIMPLEX = (lambda s: s / (s.sum(0) * 1.25))(R.uniform(0.2, 1.0, (3, 4)))
SCIPY = [
    case("iv", lambda x: SS.iv(np.array([[0.0], [1.5], [-2.0]]), x),
         lambda x: sp.iv(np.array([[0.0], [1.5], [-2.0]]), x), positive(4)),
    case("jn", lambda x: SS.jn(np.array([[0], [1], [4]]), x),
         lambda x: sp.jn(np.array([[0], [1], [4]]), x), 3 * normal(4)),
    case("yn", lambda x: SS.yn(np.array([[0], [2]]), x), lambda x: sp.yn(np.array([[0], [2]]), x),
         positive(4)),
    case("polygamma_bcast", lambda x: SS.polygamma(np.array([[0], [1], [3]]), x),
         lambda x: sp.polygamma(np.array([[0], [1], [3]]), x), positive(4)),
    case("gamma_neg", SS.gamma, sp.gamma, np.array([-0.5, -1.5, -3.3, 0.4, 4.2])),
    case("gammaln_neg", SS.gammaln, sp.gammaln, np.array([-0.5, -1.5, -3.3, 0.4])),
    case("digamma_neg", SS.digamma, sp.digamma, np.array([-0.5, -1.5, -3.3, 0.4])),
    case("beta_bcast", SS.beta, sp.beta, positive(3, 1), positive(4)),
    case("betaln", SS.betaln, sp.betaln, positive(2, 3), positive(3)),
    case("erfcinv", SS.erfcinv, sp.erfcinv, R.uniform(0.1, 1.9, (3, 4))),
    case("i0e_i1e", lambda x: (SS.i0e(x), SS.i1e(x)), lambda x: (sp.i0e(x), sp.i1e(x)),
         np.array([-3.0, -0.4, 0.3, 2.5, 8.0])),
    case("i1_small", SS.i1, sp.i1, np.array([1e-3, -0.02, 0.5])),
    case("kl_div", SS.kl_div, sp.kl_div, positive(3, 4), positive(4)),
    case("rel_entr", SS.rel_entr, sp.rel_entr, positive(3, 4), positive(3, 1)),
    case("xlogy_zero_x", SS.xlogy, sp.xlogy, np.array([0.0, 1.0, -2.0]), positive(3), wrt=[1]),
    case("xlog1py", SS.xlog1py, sp.xlog1py, normal(3, 4), R.uniform(-0.7, 2.0, (4,))),
    case("softmax_axes", lambda x: SS.softmax(x, axis=(0, 2)), lambda x: sp.softmax(x, axis=(0, 2)),
         normal(2, 3, 4)),
    case("log_softmax", lambda x: SS.log_softmax(x, axis=-1), lambda x: sp.log_softmax(x, axis=-1),
         normal(3, 4)),
    case("sp_logsumexp_b", lambda x, b: SS.logsumexp(x, axis=1, b=b, keepdims=True),
         lambda x, b: sp.logsumexp(x, axis=1, b=b, keepdims=True), normal(3, 4), positive(3, 1)),
    case("t_logpdf", STS.t.logpdf, st.t.logpdf, normal(3, 4), positive(4), normal(3, 1),
         positive(4)),
    case("t_pdf_df", lambda x, df: STS.t.pdf(x, df), lambda x, df: st.t.pdf(x, df),
         normal(3, 4), positive(3, 1)),
    case("gamma_logpdf", STS.gamma.logpdf, st.gamma.logpdf, positive(3, 4) + 0.5, positive(4),
         R.uniform(0, 0.4, (3, 1)), positive(4)),
    case("gamma_pdf_small_a", lambda x, a: STS.gamma.pdf(x, a, scale=2.0),
         lambda x, a: st.gamma.pdf(x, a, scale=2.0), positive(4), R.uniform(0.3, 0.9, 4)),
    case("chi2_logpdf", STS.chi2.logpdf, st.chi2.logpdf, positive(3, 4) + 0.5, positive(4) + 1,
         R.uniform(0, 0.4, (3, 1)), positive(4)),
    case("chi2_pdf", STS.chi2.pdf, st.chi2.pdf, positive(3, 4), positive(4) + 1),
    case("beta_logpdf", STS.beta.logpdf, st.beta.logpdf, R.uniform(0.2, 0.8, (3, 4)),
         positive(4), positive(3, 1), R.uniform(-0.15, 0.15, 4), R.uniform(1.1, 1.4, (3, 1))),
    case("beta_pdf", lambda x, a, b: STS.beta.pdf(x, a, b), lambda x, a, b: st.beta.pdf(x, a, b),
         R.uniform(0.1, 0.9, (3, 4)), positive(4), positive(3, 1)),
    case("norm_logcdf_tail", STS.norm.logcdf, st.norm.logcdf, np.array([-30.0, -5.0, 0.3, 4.0]),
         normal(4), positive(4)),
    case("norm_cdf", STS.norm.cdf, st.norm.cdf, normal(3, 4), normal(4), positive(3, 1)),
    case("poisson_logpmf", lambda mu: STS.poisson.logpmf(np.array([[1.0], [2.0], [5.0]]), mu, 1),
         lambda mu: st.poisson.logpmf(np.array([[1.0], [2.0], [5.0]]), mu, 1), positive(4)),
    case("poisson_pmf", lambda mu: STS.poisson.pmf(np.array([0.0, 3.0, 1.0]), mu),
         lambda mu: st.poisson.pmf(np.array([0.0, 3.0, 1.0]), mu), positive(3)),
    case("dirichlet_logpdf_short", lambda x, a: STS.dirichlet.logpdf(x, a),
         lambda x, a: st.dirichlet.logpdf(x, a), SIMPLEX, positive(4)),
    case("dirichlet_pdf", lambda x, a: STS.dirichlet.pdf(x, a), lambda x, a: st.dirichlet.pdf(x, a),
         (lambda s: s / s.sum())(R.uniform(0.2, 1.0, 3)), positive(3), wrt=[1]),
    case("mvn_logpdf", lambda x, m, c: STS.multivariate_normal.logpdf(x, m, c),
         lambda x, m, c: st.multivariate_normal.logpdf(x, m, c), normal(4, 3), normal(3),
         spd(3), wrt=[0, 1]),
    case("mvn_logpdf_cov", lambda c: STS.multivariate_normal.logpdf(
        np.array([[0.3, -1.0, 0.5], [1.0, 0.2, 0.1]]), np.zeros(3), 0.5 * (c + c.T)),
         lambda c: st.multivariate_normal.logpdf(
        np.array([[0.3, -1.0, 0.5], [1.0, 0.2, 0.1]]), np.zeros(3), 0.5 * (c + c.T)), spd(3)),
    case("mvn_diag", lambda x, c: STS.multivariate_normal.pdf(x, np.zeros(2), c),
         lambda x, c: st.multivariate_normal.pdf(x, np.zeros(2), c), normal(5, 2), positive(2)),
    case("mvn_scalar_cov", lambda x, c: STS.multivariate_normal.logpdf(x, np.full(2, 0.5), c),
         lambda x, c: st.multivariate_normal.logpdf(x, np.full(2, 0.5), c), normal(4, 2),
         positive()),
    case("solve_triangular", lambda a, b: SLA.solve_triangular(a, b, trans=1, lower=True),
         lambda a, b: sla.solve_triangular(a, b, trans=1, lower=True),
         np.tril(normal(3, 3)) + 3 * np.eye(3) + np.triu(normal(3, 3), 1), normal(3, 2)),
    case("solve_triangular_unit", lambda a, b: SLA.solve_triangular(a, b, unit_diagonal=True),
         lambda a, b: sla.solve_triangular(a, b, unit_diagonal=True),
         0.4 * normal(3, 3), normal(3)),
    case("cho_solve", lambda c, b: SLA.cho_solve((c, False), b),
         lambda c, b: sla.cho_solve((c, False), b),
         np.linalg.cholesky(spd(3)).T + np.tril(normal(3, 3), -1), normal(3, 2)),
    case("scipy_cholesky", SLA.cholesky, sla.cholesky, spd(3) + np.tril(normal(3, 3), -1)),
    case("sqrtm", lambda a: SLA.sqrtm(0.5 * (a + a.T)), lambda a: sla.sqrtm(0.5 * (a + a.T)),
         spd(3)),
    *[case(f"{fn}_{mode}", lambda a, b, fn=fn, mode=mode: getattr(tg.scipy.signal, fn)(a, b, mode=mode),
           lambda a, b, fn=fn, mode=mode: getattr(ssig, fn)(a, b, mode=mode), normal(*sa),
           normal(*sb))
      for fn in ("convolve", "correlate") for mode in ("full", "same", "valid")
      for sa, sb in (((3, 5), (4, 2)), ((2, 3, 4), (2, 2, 3)), ((3,), (6,)))
      if mode != "valid" or all(p >= q for p, q in zip(sa, sb)) or all(q >= p for p, q in zip(sa, sb))],
]


@pytest.mark.parametrize("tg_fn, np_fn, inputs, kw", SCIPY)
def test_scipy_against_finite_differences(tg_fn, np_fn, inputs, kw):
    check_fd(tg_fn, np_fn, inputs, **kw)


LA = tg.linalg


def well(*shape):
    return normal(*shape) + 3 * np.eye(shape[-1])


def lower_read(n):
    """A symmetric positive definite matrix with a different (unread) upper triangle."""
    return spd(n) + np.triu(normal(n, n), 1)


LINALG = [
    *[case(f"norm_vec_{o}", lambda x, o=o: LA.norm(x, o, axis=1, keepdims=True),
           lambda x, o=o: np.linalg.norm(x, o, axis=1, keepdims=True), normal(4, 3))
      for o in (None, 1, -1, 0.5, -2.5, np.inf, -np.inf)],
    *[case(f"norm_mat_axes_{o}", lambda x, o=o: LA.norm(x, o, axis=(0, 2)),
           lambda x, o=o: np.linalg.norm(x, o, axis=(0, 2)), normal(3, 2, 4))
      for o in (None, "nuc", 1, -1, 2, -2, np.inf, -np.inf)],
    *[case(f"cond_{p}", lambda x, p=p: LA.cond(x, p), lambda x, p=p: np.linalg.cond(x, p), well(3, 3))
      for p in (None, "fro", "nuc", 1, -1, -2, np.inf)],
    *[case(f"matrix_power_{n}", lambda x, n=n: LA.matrix_power(x, n),
           lambda x, n=n: np.linalg.matrix_power(x, n), 0.5 * well(3, 3)) for n in (-2, 4, 7)],
    case("pinv_hermitian_lower", lambda a: LA.pinv(a, hermitian=True),
         lambda a: np.linalg.pinv(a, hermitian=True), lower_read(3)),
    case("pinv_rtol", lambda a: LA.pinv(a, rtol=1e-3), lambda a: np.linalg.pinv(a, rtol=1e-3),
         normal(2, 3, 4)),
    case("eigh_upper", lambda a: (LA.eigh(a, UPLO="U")[0], tg.abs(LA.eigh(a, UPLO="U")[1])),
         lambda a: (np.linalg.eigh(a, UPLO="U")[0], np.abs(np.linalg.eigh(a, UPLO="U")[1])),
         normal(3, 3)),
    case("eigvalsh_lower", LA.eigvalsh, np.linalg.eigvalsh, normal(2, 3, 3)),
    case("cholesky_lower_read", LA.cholesky, np.linalg.cholesky, lower_read(3)),
    case("cholesky_upper", lambda a: LA.cholesky(a, upper=True),
         lambda a: np.linalg.cholesky(a, upper=True), lower_read(3).T),
    case("lstsq", lambda a, b: (LA.lstsq(a, b)[0], LA.lstsq(a, b)[1], LA.lstsq(a, b)[3]),
         lambda a, b: (lambda r: (r[0], r[1], r[3]))(np.linalg.lstsq(a, b)), normal(5, 3),
         normal(5, 2)),
    case("lstsq_rcond", lambda a, b: LA.lstsq(a, b, rcond=1e-3)[0],
         lambda a, b: np.linalg.lstsq(a, b, rcond=1e-3)[0], normal(3, 4), normal(3)),
    case("solve_bcast", LA.solve, np.linalg.solve, well(2, 1, 3, 3), normal(4, 3, 2)),
    case("solve_batch_vec", LA.solve, np.linalg.solve, well(2, 3, 3), normal(3)),
    case("tensorsolve_axes", lambda a, b: LA.tensorsolve(a, b, axes=(1,)),
         lambda a, b: np.linalg.tensorsolve(a, b, axes=(1,)), well(6, 6).reshape(6, 2, 3),
         normal(6)),
    case("tensorinv_ind1", lambda a: LA.tensorinv(a, 1), lambda a: np.linalg.tensorinv(a, 1),
         well(4, 4).reshape(4, 2, 2)),
    case("qr_complete", lambda a: tuple(LA.qr(a, mode="complete")),
         lambda a: tuple(np.linalg.qr(a, mode="complete")), normal(2, 4)),
    case("qr_r", lambda a: LA.qr(a, mode="r"), lambda a: np.linalg.qr(a, mode="r"), normal(2, 5, 3)),
    case("svd_compute_uv", lambda a: LA.svd(a, compute_uv=False),
         lambda a: np.linalg.svd(a, compute_uv=False), normal(2, 3, 5)),
    case("eigvals", lambda a: tg.sort(LA.eigvals(a)), lambda a: np.sort(np.linalg.eigvals(a).real),
         (lambda v: (v * np.array([1.0, 2.5, 4.0])) @ np.linalg.inv(v))(well(3, 3))),
    case("multi_dot", lambda a, b, c: LA.multi_dot([a, b, c]),
         lambda a, b, c: np.linalg.multi_dot([a, b, c]), normal(2, 5), normal(5, 3), normal(3)),
    case("np_cross_axes", lambda a, b: tg.cross(a, b, axisa=0, axisb=-1, axisc=1),
         lambda a, b: np.cross(a, b, axisa=0, axisb=-1, axisc=1), normal(3, 4, 2), normal(4, 1, 3)),
    case("vecdot", lambda a, b: LA.vecdot(a, b, axis=0),
         lambda a, b: np.linalg.vecdot(a, b, axis=0), normal(3, 4), normal(3, 1)),
    case("la_matmul_1d", LA.matmul, np.linalg.matmul, normal(3), normal(2, 3, 4)),
]


@pytest.mark.parametrize("tg_fn, np_fn, inputs, kw", LINALG)
def test_linalg_against_finite_differences(tg_fn, np_fn, inputs, kw):
    check_fd(tg_fn, np_fn, inputs, **kw)


# ---------------------------------------------------------------------------------------
# Random argument forms: shapes, axes (ints, negative, tuples, None), keepdims, methods,
# widths, shifts, indices; a fixed seed, so the draws are the same on every run
# ---------------------------------------------------------------------------------------

def _draws(rng):
    """(name, tg_fn, np_fn, inputs, kw) for one random shape and its random arguments."""
    nd = int(rng.integers(1, 4))
    shape = tuple(int(s) for s in rng.integers(1, 5, nd))
    n = int(np.prod(shape))
    x = (rng.permutation(n) * 0.37 + rng.uniform(0, 0.05, n)).reshape(shape) - 0.18 * n
    k = int(rng.integers(0, nd + 1))
    axes = tuple(int(a) for a in rng.choice(nd, k, replace=False)) if k else None
    if axes is not None and k == 1 and rng.random() < 0.5:
        axes = axes[0] - nd                                 # a negative int axis
    kd = bool(rng.random() < 0.5)
    method = METHODS[int(rng.integers(len(METHODS)))]
    q = np.round(rng.uniform(0.01, 0.99, [(), (2,), (2, 1)][int(rng.integers(3))]), 3) + 4e-4
    with_nan = x.copy().reshape(-1)
    with_nan[rng.choice(n, n // 4, replace=False)] = np.nan
    with_nan = with_nan.reshape(shape)
    ax = int(rng.integers(-nd, nd))
    idx = rng.integers(-shape[ax], shape[ax], tuple(
        s if i != ax % nd else int(rng.integers(1, 4)) for i, s in enumerate(shape)))
    widths = tuple((int(a), int(b)) for a, b in rng.integers(0, 6, (nd, 2)))
    mode = ("constant", "edge", "reflect", "symmetric", "wrap")[int(rng.integers(5))]
    if mode == "reflect" and 1 in shape:
        mode = "symmetric"                                  # (reflect needs 2 entries)
    shift = tuple(int(s) for s in rng.integers(-6, 7, k)) if k else int(rng.integers(-6, 7))
    repeats = [int(rng.integers(0, 3)), [int(r) for r in rng.integers(0, 3, shape[ax])]][
        int(rng.integers(2))]
    reps = tuple(int(r) for r in rng.integers(1, 3, int(rng.integers(1, 4))))
    order = (None, 1, 2, 3, 0.5, -1, np.inf, -np.inf)[int(rng.integers(8))]
    # NaN results (an all-NaN slice, count <= ddof) have no derivative: compared as 0
    nan0 = tg.nan_to_num
    yield (f"quantile{shape} {axes} {kd} {method} q{np.shape(q)}",
           lambda x: tg.quantile(x, q, axis=axes, method=method, keepdims=kd),
           lambda x: np.quantile(x, q, axis=axes, method=method, keepdims=kd), [x],
           {"second": False})
    yield (f"median{shape} {axes} {kd}", lambda x: tg.median(x, axis=axes, keepdims=kd),
           lambda x: np.median(x, axis=axes, keepdims=kd), [x], {"second": False})
    yield (f"nanmedian{shape} {axes} {kd}",
           lambda x: nan0(tg.nanmedian(x, axis=axes, keepdims=kd)),
           lambda x: np.nan_to_num(np.nanmedian(x, axis=axes, keepdims=kd)), [with_nan],
           {"second": False})
    yield (f"nanvar{shape} {axes} {kd}",
           lambda x: nan0(tg.nanvar(x, axis=axes, keepdims=kd, ddof=1)),
           lambda x: np.nan_to_num(np.nanvar(x, axis=axes, keepdims=kd, ddof=1)),
           [with_nan / 10], {})
    yield (f"ptp{shape} {axes} {kd}", lambda x: tg.ptp(x, axis=axes, keepdims=kd),
           lambda x: np.ptp(x, axis=axes, keepdims=kd), [x], {})
    yield (f"logsumexp_b{shape} {axes} {kd}",
           lambda x, b: tg.logsumexp(x, axis=axes, keepdims=kd, b=b),
           lambda x, b: sp.logsumexp(x, axis=axes, keepdims=kd, b=b),
           [x / 10, rng.uniform(0.5, 2, shape[-1:])], {})
    yield (f"pad{shape} {widths} {mode}", lambda x: tg.pad(x, widths, mode=mode),
           lambda x: np.pad(x, widths, mode=mode), [x], {})
    yield (f"roll{shape} {shift} {axes}", lambda x: tg.roll(x, shift, axis=axes),
           lambda x: np.roll(x, shift, axis=axes), [x], {})
    yield (f"take_along_axis{shape} {ax}", lambda x: tg.take_along_axis(x, idx, axis=ax),
           lambda x: np.take_along_axis(x, idx, axis=ax), [x], {})
    yield (f"take{shape} {ax}", lambda x: tg.take(x, idx, axis=ax, mode="wrap"),
           lambda x: np.take(x, idx, axis=ax, mode="wrap"), [x], {})
    yield (f"repeat{shape} {repeats} {ax}", lambda x: tg.repeat(x, repeats, axis=ax),
           lambda x: np.repeat(x, repeats, axis=ax), [x], {})
    yield (f"tile{shape} {reps}", lambda x: tg.tile(x, reps), lambda x: np.tile(x, reps), [x], {})
    yield (f"cumprod{shape} {ax}", lambda x: tg.cumprod(x, axis=ax),
           lambda x: np.cumprod(x, axis=ax), [np.where(rng.random(shape) < 0.2, 0.0, x / 10)], {})
    yield (f"vector_norm{shape} {order} {ax} {kd}",
           lambda x: tg.linalg.norm(x, order, axis=ax, keepdims=kd),
           lambda x: np.linalg.norm(x, order, axis=ax, keepdims=kd), [x / 5], {"h2": 2e-5})


@pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning",
                            "ignore:All-NaN slice:RuntimeWarning")
def test_random_argument_forms_against_finite_differences():
    rng = np.random.default_rng(14)
    failures = []
    for _ in range(12):
        for name, tg_fn, np_fn, inputs, kw in _draws(rng):
            try:
                check_fd(tg_fn, np_fn, inputs, **kw)
            except AssertionError as e:
                failures.append(f"{name}: {str(e).strip().splitlines()[0:3]}")
    assert not failures, "\n".join(failures)
