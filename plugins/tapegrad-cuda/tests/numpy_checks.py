"""Issue 14's cuda kernels against NumPy itself, independently of the CPU ops: edge values
(zeros of both signs, infinities, NaN, integer MIN // -1, division by zero), every dtype a
kernel covers (and the refusal of those it does not), views, every axis and mode.

Each check takes a cuda device -- the simulator's (test_cuda_simulated.py) or the real
one (test_cuda_gpu.py) -- and calls the kernels of ``device.kernels.table()`` on device
arrays directly. ``CHECKS`` / ``IDS`` parametrize both test files.
"""

import functools
import math

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_cuda_tests_cases as cases
from tapegrad_cuda_tests_cases import _r, _t


def _table(dev):
    table = getattr(dev, "_numpy_checks_table", None)
    if table is None:
        table = dev._numpy_checks_table = dev.kernels.table()
    return table


_EDGE_FLOATS = np.array([-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, np.inf, -np.inf, np.nan,
                         1e-30, 7.3, -7.3, 0.3, 0.9, -0.9])
_EDGE_INTS = np.array([0, 1, -1, 2, -2, 7, -7, np.iinfo(np.int64).min, np.iinfo(np.int64).max])
_UNARY_NEW = ["tan", "sinh", "cosh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh",
              "arctanh", "log1p", "expm1", "log2", "log10", "exp2", "reciprocal", "cbrt",
              "sinc", "deg2rad", "rad2deg", "degrees", "radians", "floor", "ceil", "trunc",
              "rint", "isnan", "isinf", "isfinite", "signbit", "nan_to_num", "round"]
_BINARY_NEW = ["arctan2", "hypot", "logaddexp", "logaddexp2", "copysign", "heaviside", "fmax",
               "fmin", "remainder", "fmod", "floor_divide"]


def _on_cuda(dev, name, *args, **kwargs):
    """The cuda kernel of op `name` on host arrays; (result as a host array, None) or
    (None, the exception)."""
    placed = [dev.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    try:
        return dev.to_numpy(_table(dev)[name](*placed, **kwargs)), None
    except (TypeError, ValueError, IndexError) as exc:
        return None, exc


def _same_as_numpy(dev, name, ref, *args, **kwargs):
    with np.errstate(all="ignore"):
        try:
            want, err = ref(*args, **kwargs), None
        except (TypeError, ValueError, IndexError) as exc:
            want, err = None, exc
        got, got_err = _on_cuda(dev, name, *args, **kwargs)
    what = f"{name}{tuple(getattr(a, 'dtype', a) for a in args)} {kwargs}"
    if err is not None:
        assert isinstance(got_err, type(err)), f"{what}: NumPy raises {err!r}, cuda {got_err!r}"
        return
    if got_err is not None and want.dtype in (np.float16, np.int8):
        assert isinstance(got_err, TypeError) and "'cuda'" in str(got_err), what
        return                  # a dtype the kernels do not cover: refused, never wrong
    assert got_err is None, f"{what}: cuda raises {got_err!r}"
    assert got.dtype == want.dtype and got.shape == want.shape, what
    # NOTE: the simulator computes with NumPy itself (exact); a GPU's math library is
    # within a few ulp, and its sums and scans group terms differently: the tolerance of
    # the cpu comparisons (cases._assert_close).
    tol = 2e-5 if want.dtype == np.float32 else 1e-11
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol if want.dtype.kind == "f" else 0, equal_nan=True,
                               err_msg=what)


def check_new_unary_kernels_match_numpy_on_edge_values_and_dtypes(dev, name):
    for x in (_EDGE_FLOATS, _EDGE_FLOATS.astype(np.float32), _EDGE_INTS,
              _EDGE_INTS.astype(np.int32), np.array([True, False]), _t(_r(3, 4))):
        _same_as_numpy(dev, name, getattr(np, name), x)


def check_new_binary_kernels_match_numpy_on_edge_values_and_dtypes(dev, name):
    a, b = np.repeat(_EDGE_FLOATS, len(_EDGE_FLOATS)), np.tile(_EDGE_FLOATS, len(_EDGE_FLOATS))
    ai, bi = np.repeat(_EDGE_INTS, len(_EDGE_INTS)), np.tile(_EDGE_INTS, len(_EDGE_INTS))
    for x, y in ((a, b), (a.astype(np.float32), b.astype(np.float32)), (ai, bi),
                 (ai.astype(np.int32), bi.astype(np.int32)), (a, 2), (ai, -3),
                 (_t(_r(3, 4)), _r(4) + 0.25), (np.arange(-6, 6), 2.5),
                 (np.array([True, False]), np.array([[True], [False]]))):
        _same_as_numpy(dev, name, getattr(np, name), x, y)


def check_round_matches_numpys_algorithm_for_every_decimals(dev):
    for decimals in (-2, -1, 0, 1, 3, 25):
        for x in (_EDGE_FLOATS * 123.456, (_EDGE_FLOATS * 123.456).astype(np.float32),
                  np.arange(-60, 60) * 5, np.array([0.125, 0.375, 2.675, -1.005])):
            _same_as_numpy(dev, "round", np.round, x, decimals=decimals)


def check_nan_to_num_replacements_and_dtype_limits(dev):
    for x in (_EDGE_FLOATS, _EDGE_FLOATS.astype(np.float32)):
        for kw in ({}, {"nan": 5.0, "neginf": -3.0}, {"posinf": 1e3}):
            _same_as_numpy(dev, "nan_to_num", np.nan_to_num, x, **kw)


_X = _r(3, 4, 5)
_XT = np.ascontiguousarray(_X.transpose(2, 0, 1)).transpose(1, 2, 0)     # a strided view
_SORT_ROWS = np.array([[3.0, np.nan, 1, 1, -0.0, 0.0, np.inf, -np.inf, np.nan, 2],
                       [5, 4, 3, 2, 1, 0, -1, -2, -3, -4]])


def check_cumsum_and_cumprod_match_numpy(dev, axis):
    for x in (_X, _XT, _X.astype(np.float32), (_X * 3).astype(np.int32), _X > 0, _r(0, 3)):
        _same_as_numpy(dev, "cumsum", np.cumsum, x, axis=axis)
        _same_as_numpy(dev, "cumprod", np.cumprod, x, axis=axis)
    _same_as_numpy(dev, "cumsum", np.cumsum, _X, axis=axis, dtype=np.float32)
    _same_as_numpy(dev, "cumprod", np.cumprod, (_X * 2).astype(np.int32), axis=axis,
                   dtype=np.int32)


def check_cumsum_of_a_row_longer_than_one_block(dev):
    _same_as_numpy(dev, "cumsum", np.cumsum, _r(1000))
    _same_as_numpy(dev, "cumprod", np.cumprod, 1 + _r(600) / 100)


def check_sort_and_argsort_are_numpys_stable_sort_nan_last(dev, axis):
    rng = np.random.default_rng(5)
    ties = rng.integers(0, 4, (5, 37))
    for x in (_SORT_ROWS, _SORT_ROWS.T, _X, _XT, ties, ties.astype(np.int32), _r(2, 0),
              _r(1000), _r(3, 1), np.array(2.5), ties > 1):
        _same_as_numpy(dev, "sort", np.sort, x, axis=axis)
        _same_as_numpy(dev, "argsort", lambda v, axis: np.argsort(v, axis, kind="stable"),
                       x, axis=axis)


def check_sort_arguments_are_checked_as_on_the_cpu(dev):
    for name in ("sort", "argsort"):
        ref = getattr(np, name)
        for kwargs in ({"kind": "bogus"}, {"kind": "stable", "stable": True},
                       {"kind": "mergesort"}, {"stable": True}, {"kind": "heapsort"}):
            _same_as_numpy(dev, name, ref, _r(7) + np.arange(7), **kwargs)
    cases.needs("sort", "argsort")
    for fn in (tg.sort, tg.argsort):
        with pytest.raises(ValueError, match=r"^(arg)?sort: order= names fields"):
            fn(tg.tensor(_r(3), device="cuda"), order="f0")


def check_take_along_axis_matches_numpy(dev):
    rng = np.random.default_rng(6)
    cases_ = [(rng.integers(-3, 3, (3, 2, 5)), 1), (rng.integers(0, 3, (1, 4, 1)), 0),
              (rng.integers(0, 5, (7,)), None), (rng.integers(0, 6, (3, 4, 5)), 2),
              (rng.integers(0, 4, (3, 4)), 1), (np.zeros((3, 1, 5), np.float64), 1)]
    for idx, axis in cases_:
        _same_as_numpy(dev, "take_along_axis", np.take_along_axis, _XT, idx, axis=axis)


def check_roll_repeat_tile_match_numpy(dev):
    for x in (_X, _XT, _X > 0):
        for shift, axis in ((1, None), (-7, None), (2, 0), ((1, 2), (0, 1)), ((1, 1), (1, 1)),
                            (3, -1), (5, 2), (1, 3), ((1, 2, 3), (0, 1))):
            _same_as_numpy(dev, "roll", np.roll, x, shift, axis=axis)
        for reps, axis in ((2, None), (3, 0), ([1, 0, 2], 0), ([1, 2, 0, 1], 1), (0, 2),
                           (-1, 0), ([1, 2], 0), (2.5, 0), (2, 5)):
            _same_as_numpy(dev, "repeat", np.repeat, x, reps, axis=axis)
        for reps in (2, (2, 1), (1, 1, 1), (2, 1, 1, 3), (0, 2), (), 1, (-1,)):
            _same_as_numpy(dev, "tile", np.tile, x, reps)


def check_pad_matches_numpy_for_every_mode(dev, mode):
    pytest.importorskip("tapegrad_shape.rearrange", reason="pad's checks are tapegrad-shape's")
    for width in (1, (1, 2), ((1, 2), (0, 3), (2, 0)), ((1,), (2,), (3,)), -1, 1.5,
                  ((1, 2), (3, 4))):
        _same_as_numpy(dev, "pad", np.pad, _XT, width, mode=mode)
        _same_as_numpy(dev, "pad", np.pad, np.arange(3), 7, mode=mode)   # wider than the axis
    _same_as_numpy(dev, "pad", np.pad, _r(0, 3), ((0, 0), (1, 1)), mode=mode)
    _same_as_numpy(dev, "pad", np.pad, _r(0, 3), ((1, 0), (1, 1)), mode=mode)


def check_pad_constant_values_per_axis_and_side(dev):
    pytest.importorskip("tapegrad_shape.rearrange", reason="pad's checks are tapegrad-shape's")
    _same_as_numpy(dev, "pad", np.pad, _X, ((1, 2), (3, 1), (1, 1)), mode="constant",
                   constant_values=((1, 2), (3, 4), (5, 6)))
    _same_as_numpy(dev, "pad", np.pad, (_X * 4).astype(np.int32), 2, mode="constant",
                   constant_values=7.7)


def check_pad_modes_the_cpu_op_refuses_are_refused_on_cuda_too(dev):
    pytest.importorskip("tapegrad_shape.rearrange", reason="pad's checks are tapegrad-shape's")
    _, err = _on_cuda(dev, "pad", _X, 1, mode="linear_ramp")
    assert isinstance(err, ValueError) and "pad" in str(err) and "linear_ramp" in str(err)
    _, err = _on_cuda(dev, "pad", _X, 1, mode="reflect", reflect_type="odd")
    assert isinstance(err, ValueError) and "odd" in str(err)
    _, err = _on_cuda(dev, "pad", _X, 1, mode="edge", constant_values=1)
    assert isinstance(err, ValueError) and "constant_values" in str(err)


def _np_take_grad(g, indices, *, shape, axis=None, mode="raise"):
    out = np.zeros(math.prod(shape) if axis is None else shape, g.dtype)
    ax = 0 if axis is None else axis % len(shape)
    idx = np.asarray(indices)
    idx = idx % out.shape[ax] if mode == "wrap" else (
        np.clip(idx, 0, out.shape[ax] - 1) if mode == "clip" else idx)
    np.add.at(out, (slice(None),) * ax + (idx,), g)
    return out.reshape(shape)


def _np_take_along_axis_grad(g, indices, *, shape, axis=-1):
    out = np.zeros(shape, g.dtype)
    if axis is None:
        np.add.at(out.reshape(-1), indices, g)
        return out
    ax = axis % len(shape)
    index = tuple(indices if d == ax else
                  np.arange(n).reshape((1,) * d + (n,) + (1,) * (len(shape) - d - 1))
                  for d, n in enumerate(shape))
    np.add.at(out, index, g)
    return out


def _np_put_along_axis(arr, indices, values, *, axis):
    out = arr.copy()
    np.put_along_axis(out, indices, values, axis)
    return out


def check_take_and_its_gradient_match_numpy_for_every_mode(dev):
    idx = np.array([[0, 3], [3, -1]])
    for mode in ("raise", "wrap", "clip"):
        for indices, axis in ((np.array([0, 2, 2, 11]), None), (idx, 1), (1, 0),
                              (np.array([5, -7, 1]), 0), (np.array([5, -7, 1]), -1),
                              (np.array([True, False]), 0), (np.array([0.5]), 0)):
            _same_as_numpy(dev, "take", np.take, _XT[0], indices, axis=axis, mode=mode)
        g = _r(2, 2, 5)
        _same_as_numpy(dev, "_take_grad", _np_take_grad, g, np.array([[0, 3], [3, -1]]),
                       shape=(4, 5), axis=0, mode=mode)
        _same_as_numpy(dev, "_take_grad", _np_take_grad, _r(3), np.array([5, -7, 1]),
                       shape=(2, 2), mode=mode)


def check_take_along_axis_gradient_and_put_along_axis_match_numpy(dev):
    idx = np.array([[0, 3, 3], [1, 1, 0], [2, 0, 1]])
    _same_as_numpy(dev, "_take_along_axis_grad", _np_take_along_axis_grad, _r(3, 3), idx,
                   shape=(3, 4), axis=1)
    _same_as_numpy(dev, "_take_along_axis_grad", _np_take_along_axis_grad, _r(3),
                   np.array([5, 0, 0]), shape=(2, 3), axis=None)
    _same_as_numpy(dev, "_put_along_axis", _np_put_along_axis, _X[0], np.array([[0], [2], [3]]),
                   _r(3, 1), axis=1)
    _same_as_numpy(dev, "_put_along_axis", _np_put_along_axis, _X[0],
                   np.array([[1, 0, 2, 1, 0]]), 2.5, axis=0)
    _same_as_numpy(dev, "_put_along_axis", _np_put_along_axis, _X[0], np.array([4, 0]),
                   _r(2), axis=None)
    _same_as_numpy(dev, "_put_along_axis", _np_put_along_axis, _X[0].astype(np.int32),
                   np.array([[1, 0, 2, 1, 0]]), 2.5, axis=0)


def check_tensordot_matches_numpy(dev):
    pytest.importorskip("tapegrad_linalg", reason="matmul's checks are tapegrad-linalg's")
    for a, b, axes in ((_r(2, 3, 4), _r(3, 4, 2), 2), (_r(2, 3), _r(3, 4), 1),
                       (_XT, _r(5, 4, 3), ([1, 2], [1, 0])), (_r(3, 2), _r(4, 3), (0, 1)),
                       (_r(2, 3), _r(2), 0), (_r(3), _r(3), 1),
                       (_r(2, 3, 4), _r(4, 3), ((-1, -2), (0, 1))), (_r(2, 3), _r(4, 3), 1),
                       (_r(2, 0), _r(0, 3), 1), (_r(2, 3), _r(3, 4), ([0], [0, 1]))):
        _same_as_numpy(dev, "tensordot", np.tensordot, a, b, axes=axes)


def check_vector_norm_matches_numpy_for_every_ord(dev):
    x = _XT.copy()
    x[0, 1, 2] = 0.0
    for ord_ in (2, 1, 0, np.inf, -np.inf, 3, 0.5, -1, 2.0, "fro"):
        for axis, keepdims in ((None, False), (1, False), ((0, 2), True), (-1, True)):
            for v in (x, x.astype(np.float32), (x * 3).astype(np.int64)):
                _same_as_numpy(dev, "linalg_vector_norm", _np_vector_norm, v, ord=ord_,
                               axis=axis, keepdims=keepdims)


def _np_vector_norm(x, ord=2, axis=None, keepdims=False):
    if isinstance(ord, str):
        raise ValueError(f"invalid norm order {ord!r} for vectors")
    return np.asarray(np.linalg.vector_norm(x, ord=ord, axis=axis, keepdims=keepdims))


def check_ldexp_matches_numpy(dev):
    x = _EDGE_FLOATS
    for x1, x2 in ((x, np.array([1, -3, 0, 1024, -1075, 2 ** 40])[:, None]),
                   (x.astype(np.float32), np.int32(3)), (_t(_r(3, 4)), np.arange(4)),
                   (np.arange(5), np.array([True, False, True, True, False])),
                   (_r(3), np.array([1.5, 2.0, 0.0])), (_r(3), np.array([1, 2, 3], np.uint64))):
        _same_as_numpy(dev, "ldexp", np.ldexp, x1, x2)


def _np_convolve(a, v, mode="full"):
    if np.ndim(a) != 1 or np.ndim(v) != 1 or not np.size(a) or not np.size(v):
        raise ValueError("convolve: a and v must be non-empty 1-D arrays")
    return np.convolve(a, v, mode)


def check_convolve_matches_numpy_for_every_mode(dev):
    pytest.importorskip("tapegrad_shape.numerics", reason="convolve is tapegrad-shape's")
    for mode in ("full", "same", "valid"):
        for n, m in ((5, 3), (3, 5), (6, 4), (4, 6), (1, 4), (7, 7), (300, 40)):
            _same_as_numpy(dev, "convolve", _np_convolve, _r(n), _r(m), mode=mode)
        _same_as_numpy(dev, "convolve", _np_convolve, _r(4).astype(np.float32), _r(3),
                       mode=mode)
    _same_as_numpy(dev, "convolve", _np_convolve, _r(2, 2), _r(3))
    _same_as_numpy(dev, "convolve", _np_convolve, _r(0), _r(3))


def _np_interp_segment(x, xp):
    j = np.searchsorted(xp, x, side="right") - 1
    return np.clip(j, 0, max(len(xp) - 2, 0)).astype(np.int64)


def check_interp_segment_is_numpys_searchsorted(dev):
    xp = np.array([-1.0, 0.0, 0.5, 0.5, 2.0])
    for x in (np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 0.7, 2.0, 9.0, np.nan, np.inf, -np.inf]),
              _r(3, 4), np.float64(0.25) * np.ones((2, 0))):
        _same_as_numpy(dev, "_interp_segment", _np_interp_segment, x, xp)
        _same_as_numpy(dev, "_interp_segment", _np_interp_segment, x.astype(np.float32), xp)
    _same_as_numpy(dev, "_interp_segment", _np_interp_segment, np.arange(-2, 9), np.arange(0, 7, 2))
    _same_as_numpy(dev, "_interp_segment", _np_interp_segment, _r(4), np.array([0.5]))


def check_unwrap_correction_is_the_cpu_kernels(dev):
    numerics = pytest.importorskip("tapegrad_shape.numerics",
                                   reason="_unwrap_correction is tapegrad-shape's")
    ref = numerics._unwrap_correction_kernel
    rng = np.random.default_rng(8)
    for p, kw in ((np.array([0.0, 3.0, 6.5, 1.0, -np.pi, np.pi]),
                   {"discont": None, "axis": 0, "period": 2 * np.pi}),
                  (_XT * 4, {"discont": 4.0, "axis": 1, "period": 2 * np.pi}),
                  (_XT.astype(np.float32) * 4, {"discont": None, "axis": -1, "period": 5.0}),
                  (rng.integers(-20, 20, (3, 6)), {"discont": None, "axis": 1, "period": 8}),
                  (rng.integers(-20, 20, (3, 6)), {"discont": 2, "axis": 0, "period": 7}),
                  (np.array([0.0, 1.0, 0.0, -1.0]), {"discont": None, "axis": 0, "period": 2.0})):
        _same_as_numpy(dev, "_unwrap_correction", ref, p, **kw)


def _each(check, name, values):
    return [(f"{name}-{v}", functools.partial(check, **{name: v})) for v in values]


_ALL = [
    *_each(check_new_unary_kernels_match_numpy_on_edge_values_and_dtypes, "name", _UNARY_NEW),
    *_each(check_new_binary_kernels_match_numpy_on_edge_values_and_dtypes, "name", _BINARY_NEW),
    ("round", check_round_matches_numpys_algorithm_for_every_decimals),
    ("nan_to_num", check_nan_to_num_replacements_and_dtype_limits),
    *_each(check_cumsum_and_cumprod_match_numpy, "axis", [None, 0, 1, -1, 3]),
    ("cumsum-long-row", check_cumsum_of_a_row_longer_than_one_block),
    *_each(check_sort_and_argsort_are_numpys_stable_sort_nan_last, "axis", [None, 0, -1]),
    ("sort-arguments", check_sort_arguments_are_checked_as_on_the_cpu),
    ("take_along_axis", check_take_along_axis_matches_numpy),
    ("roll-repeat-tile", check_roll_repeat_tile_match_numpy),
    *_each(check_pad_matches_numpy_for_every_mode, "mode",
           ["constant", "edge", "reflect", "symmetric", "wrap"]),
    ("pad-constant-values", check_pad_constant_values_per_axis_and_side),
    ("pad-refusals", check_pad_modes_the_cpu_op_refuses_are_refused_on_cuda_too),
    ("take", check_take_and_its_gradient_match_numpy_for_every_mode),
    ("take_along_axis-grad-put", check_take_along_axis_gradient_and_put_along_axis_match_numpy),
    ("tensordot", check_tensordot_matches_numpy),
    ("vector_norm", check_vector_norm_matches_numpy_for_every_ord),
    ("ldexp", check_ldexp_matches_numpy),
    ("convolve", check_convolve_matches_numpy_for_every_mode),
    ("interp_segment", check_interp_segment_is_numpys_searchsorted),
    ("unwrap_correction", check_unwrap_correction_is_the_cpu_kernels),
]
IDS = [name for name, _ in _ALL]
CHECKS = [check for _, check in _ALL]
