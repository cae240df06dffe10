"""Every op's cuda kernel, run on the PyCUDA simulator (fakecuda.py), against the CPU.

The simulator emulates each .cu kernel with NumPy and checks every launch's arguments, so
these tests cover all the host-side logic of the cuda device -- dtype rules, shapes,
strides and views, index resolution, argument marshalling, launch sizes, the cuBLAS
row-major swap -- but not the CUDA code itself (that needs a GPU: test_cuda_gpu.py).
"""

import ctypes
import math

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_cuda_tests_cases as cases
from tapegrad import _engine
from tapegrad_cuda import cublas, kernels
from tapegrad_cuda_tests_cases import (CUDA_OPS, INTEGER_AND_BOOL, NONCONTIG, _assert_close,
                                       _r, _t, compare)


def test_every_first_party_op_has_a_cuda_kernel_or_raises_not_implemented(cuda):
    cases.every_op_has_a_kernel_or_refuses()


def test_an_op_on_the_no_kernel_list_is_refused_naming_op_and_device(cuda, monkeypatch):
    # The check above on a core op whose cuda kernel is taken away (NO_KERNEL's real
    # entries need tapegrad-linalg, which this distribution's tests may run without).
    import tapegrad_cuda_tests_cases as c

    ops = tg.registry().ops
    ops["add"].kernels.pop("cuda")
    try:
        monkeypatch.setattr(kernels, "NO_KERNEL", ("add",))
        monkeypatch.setattr(c, "OPS", ["add", "zeros_like"])
        c.every_op_has_a_kernel_or_refuses()
        monkeypatch.setattr(kernels, "NO_KERNEL", ())
        with pytest.raises(AssertionError, match=r"not on kernels.NO_KERNEL: \['add'\]"):
            c.every_op_has_a_kernel_or_refuses()
    finally:
        ops["add"].kernels["cuda"] = cuda.kernels.binary("add")


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", CUDA_OPS)
def test_op_samples_forward_and_gradient_match_cpu(cuda, name, dtype):
    op = cases.op(name)
    assert op.samples, name
    for sample in op.samples:
        compare(op, *sample.args, cast=dtype, **sample.kwargs)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")     # NumPy's, for empty and -inf rows
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", range(len(NONCONTIG)),
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NONCONTIG)])
def test_views_broadcasting_axes_and_empty_arrays_match_cpu(cuda, case, dtype):
    name, args, kwargs = NONCONTIG[case]
    compare(cases.op(name), *args, cast=dtype, **kwargs)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")     # the cpu: x // 0, x % 0
@pytest.mark.parametrize("case", range(len(INTEGER_AND_BOOL)),
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(INTEGER_AND_BOOL)])
def test_integer_and_bool_dtypes_match_cpu(cuda, case):
    name, args = INTEGER_AND_BOOL[case]
    compare(cases.op(name), *args, grad=False, **cases.INT_KWARGS.get(name, {}))


def test_astype_to_bool_and_float32_to_int(cuda):
    x = np.array([[-1.7, 0.0, 2.9], [0.5, -0.0, 3.0]], np.float32)
    for dt in (np.bool_, np.int64, np.int32, np.float64):
        compare(tg.astype, x, grad=False, dtype=dt)


def test_index_with_a_cuda_tensor_and_its_gradient(cuda):
    cases.needs("getitem", "sum", "greater")
    x = _r(5, 3)
    idx = np.array([4, 0, 4, -1])
    xc = tg.tensor(x, device="cuda", requires_grad=True)
    xh = tg.tensor(x, requires_grad=True)
    yc = xc[tg.tensor(idx, device="cuda")]
    yh = xh[idx]
    _assert_close(yc.numpy(), yh.numpy())
    yc.sum().backward()
    yh.sum().backward()
    _assert_close(xc.grad.numpy(), xh.grad.numpy())
    mask = tg.tensor(x > 0, device="cuda")
    _assert_close(xc.detach()[mask].numpy(), x[x > 0])
    with pytest.raises(IndexError, match="out of bounds"):
        xc[tg.tensor(np.array([5]), device="cuda")]


def test_inplace_setitem_and_updates_without_grad(cuda):
    cases.needs("setitem", "greater", "multiply", "transpose")
    x = _r(3, 4)
    xc = tg.tensor(x, device="cuda")
    xc[1] = 5.0
    xc[:, [0, 2]] = tg.tensor(np.ones((3, 2)), device="cuda")
    xc[xc > 4] = -1.0
    x[1] = 5.0
    x[:, [0, 2]] = 1.0
    x[x > 4] = -1.0
    _assert_close(xc.numpy(), x)
    xc += 1
    xc *= tg.tensor(np.arange(4.0), device="cuda")
    x += 1
    x *= np.arange(4.0)
    _assert_close(xc.numpy(), x)
    t = tg.tensor(_r(4, 3), device="cuda").T      # in place into a strided view
    t.add_(1.0)


def test_transfers_and_tensor_protocol(cuda):
    cases.needs("getitem", "multiply", "sum")
    x = _r(2, 3).astype(np.float32)
    c = tg.tensor(x, device="cuda")
    assert c.device == tg.device("cuda") and c.dtype == np.float32 and c.shape == (2, 3)
    assert np.array_equal(c.numpy(), x) and np.array_equal(np.asarray(c), x)
    assert np.array_equal(c.cpu().numpy(), x) and c.cpu().device == tg.device("cpu")
    assert c[1, 2].item() == x[1, 2] and c.tolist() == x.tolist()
    assert "device='cuda'" in repr(c)
    assert tg.zeros((2, 2), device="cuda").numpy().sum() == 0
    assert tg.ones((2, 2), dtype=np.int64, device="cuda").numpy().tolist() == [[1, 1], [1, 1]]
    assert tg.arange(5, device="cuda").numpy().tolist() == [0, 1, 2, 3, 4]
    h = tg.tensor(x, requires_grad=True)
    (h.to("cuda") * 2.0).sum().backward()        # the gradient flows back across devices
    assert h.grad.device == tg.device("cpu") and np.all(h.grad.numpy() == 2.0)
    e = tg.tensor(np.zeros((0, 3)), device="cuda")
    assert e.numpy().shape == (0, 3)


def test_rng_is_seedable_and_its_state_round_trips(cuda):
    tg.manual_seed(7)
    a = tg.random.rand(5, device="cuda", dtype=np.float32)
    b = tg.random.randn(2, 3, device="cuda")
    tg.manual_seed(7)
    assert np.array_equal(a.numpy(), tg.random.rand(5, dtype=np.float32).numpy())
    assert a.device == tg.device("cuda") and a.dtype == np.float32 and b.shape == (2, 3)
    state = tg.random.get_state()
    assert "cuda" in state
    first = tg.random.normal(0, 1, (4,), device="cuda").numpy()
    tg.random.set_state(state)
    assert np.array_equal(first, tg.random.normal(0, 1, (4,), device="cuda").numpy())


def test_training_steps_match_cpu(cuda):
    cases.training_steps_match_cpu()


def test_compiled_steps_and_replayed_hessians_on_cuda(cuda):
    cases.compiled_steps_and_replayed_hessians_on_cuda()


def test_higher_order_gradient_on_cuda(cuda):
    cases.needs("tanh", "power", "sum")
    if "tapegrad-higher" not in tg.registry().plugins:
        pytest.skip("tg.grad needs tapegrad-higher")
    x = tg.tensor(np.array([0.3, -1.2, 2.0]), device="cuda", requires_grad=True)
    (g,) = tg.grad(tg.sum(tg.tanh(x) ** 3), x, create_graph=True)
    (h,) = tg.grad(g.sum(), x)
    xh = np.array([0.3, -1.2, 2.0])
    t = np.tanh(xh)
    d1 = 3 * t ** 2 * (1 - t ** 2)
    d2 = (6 * t * (1 - t ** 2) ** 2) - 6 * t ** 3 * (1 - t ** 2)
    _assert_close(g.numpy(), d1)
    _assert_close(h.numpy(), d2)


@pytest.fixture
def cuda_default(cuda, monkeypatch):
    cpu = tg.device("cpu")
    monkeypatch.setattr(tg.testing, "_check_forward", cases.check_forward_on_device)
    _engine.install_device(cuda, True)
    yield cuda
    _engine.install_device(cpu, True)


CONTRACT_OPS = [n for n in CUDA_OPS if n not in ("_einsum",)]


@pytest.mark.parametrize("name", CONTRACT_OPS)
def test_contract_kit_on_the_cuda_device(cuda_default, name):
    assert _engine.default_device().name == "cuda"
    tg.testing.check_op(name)


def test_gradcheck_on_cuda_tensors(cuda):
    cases.needs("linear", "log_softmax")
    x = tg.tensor(_r(3, 4), device="cuda", requires_grad=True)
    w = tg.tensor(_r(5, 4), device="cuda", requires_grad=True)
    assert tg.gradcheck(lambda x, w: tg.log_softmax(tg.linear(x, w), axis=-1), (x, w))


# -- errors --------------------------------------------------------------------------
def test_unsupported_dtype_names_op_dtype_and_device(cuda):
    cases.needs("exp", "matmul", "softmax")
    h = tg.tensor(np.ones(3, np.float16), device="cuda")
    with pytest.raises(TypeError, match=r"exp: .*float16.*'cuda'"):
        tg.exp(h)
    i = tg.tensor(np.ones((2, 2), np.int64), device="cuda")
    with pytest.raises(TypeError, match=r"matmul: .*int64.*'cuda'"):
        i @ i
    with pytest.raises(TypeError, match=r"softmax: .*float16.*'cuda'"):
        tg.softmax(h)


def test_mixed_devices_raise(cuda):
    with pytest.raises(RuntimeError, match="same device"):
        tg.tensor([1.0], device="cuda") + tg.tensor([1.0])


def test_missing_cublas_raises_a_runtime_error_naming_what_was_tried(cuda, monkeypatch):
    monkeypatch.setattr(cublas, "candidate_paths",
                        lambda: ["/nowhere/nvidia/cublas/lib/libcublas.so.13", "libcublas.so.99"])
    ks = kernels.CudaKernels(cuda)
    with pytest.raises(RuntimeError) as err:
        ks.cublas()                       # what matmul calls first
    msg = str(err.value)
    assert "cuBLAS" in msg and "/nowhere/nvidia/cublas/lib/libcublas.so.13" in msg
    assert "libcublas.so.99" in msg and "nvidia-cublas" in msg


def test_candidate_paths_look_in_the_nvidia_cublas_package_first(tmp_path, monkeypatch):
    pkg = tmp_path / "nvidia" / "cublas"
    (pkg / "lib").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    importlib.invalidate_caches()
    paths = cublas.candidate_paths()
    assert paths[0].endswith("nvidia/cublas/lib/libcublas.so.13"), paths
    assert any(p.startswith("libcublas.so") for p in paths)


def test_matmul_reads_transposed_views_with_op_t_and_no_copy(cuda, fakecuda):
    cases.needs("linear")
    lib = cuda.kernels._cublas.lib if cuda.kernels._cublas else None
    x = tg.tensor(_r(4, 3), device="cuda")
    w = tg.tensor(_r(5, 3), device="cuda")
    before = dict(fakecuda.LAUNCHES)
    y = tg.linear(x, w)
    lib = cuda.kernels._cublas.lib
    call = lib.calls[-1]
    # swapped: first cuBLAS operand is w.T (read with op T), second is x (op N)
    assert (call["ta"], call["tb"], call["m"], call["n"], call["k"]) == (1, 0, 5, 4, 3)
    assert fakecuda.LAUNCHES.get("tg_cast_f64_f64", 0) == before.get("tg_cast_f64_f64", 0)
    _assert_close(y.numpy(), x.numpy() @ w.numpy().T)


def test_batched_matmul_uses_one_strided_batched_call(cuda):
    cases.needs("matmul")
    a = tg.tensor(_r(6, 2, 3), device="cuda")
    b = tg.tensor(_r(3, 4), device="cuda")
    (a @ b).numpy()
    call = cuda.kernels._cublas.lib.calls[-1]
    assert call["count"] == 6 and call["sa"] == 0 and call["sb"] == 6 and call["sc"] == 8


def test_a_cublas_error_status_raises(cuda):
    bad = cublas.Cublas.__new__(cublas.Cublas)
    with pytest.raises(RuntimeError, match="cublasSgemm_v2 failed with cuBLAS status 7"):
        bad._check("cublasSgemm_v2", 7)


# -- the simulator itself catches the bugs it is there for -------------------------------
def test_simulator_refuses_python_ints_and_out_of_bounds_access(cuda, fakecuda):
    fn = cuda.kernels.function("elementwise.cu", "tg_exp_f64")
    x = cuda.asarray(np.ones(4))
    out = cuda.empty((4,), np.float64)
    with pytest.raises(TypeError, match="invalid type on parameter #2"):
        fn(x, out, 4, block=(256, 1, 1), grid=(1, 1))
    with pytest.raises(fakecuda.FakeCudaError, match="packed as"):
        fn(x, out, np.int32(4), block=(256, 1, 1), grid=(1, 1))
    with pytest.raises(fakecuda.FakeCudaError, match="out-of-bounds"):
        fn(x, out, np.int64(5), block=(256, 1, 1), grid=(1, 1))
    with pytest.raises(fakecuda.LogicError, match="named symbol not found"):
        cuda.kernels.function("elementwise.cu", "tg_exp_i64")
    fake = fakecuda.FakeCublas()
    h = ctypes.c_void_p()
    assert fake.cublasCreate_v2(ctypes.byref(h)) == 0 and h.value


def test_a_clip_bound_that_requires_grad_is_refused_on_cuda_too(cuda):
    # The refusal lived in the cpu kernel only: on cuda the bound's gradient was dropped.
    cases.needs("clip")
    x = tg.tensor(np.array([-1.0, 0.5, 2.0]), device="cuda", requires_grad=True)
    lo = tg.tensor(np.zeros(3), device="cuda", requires_grad=True)
    with pytest.raises(TypeError, match="clip: keyword argument 'a_min' is a tensor that requires"):
        tg.clip(x, a_min=lo, a_max=1.0)
    np.testing.assert_array_equal(tg.clip(x, a_min=lo.detach(), a_max=1.0).cpu().numpy(),
                                  [0.0, 0.5, 1.0])


# -- issue 14's kernels against NumPy itself (independently of the CPU ops) -------------------
_EDGE_FLOATS = np.array([-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, np.inf, -np.inf, np.nan,
                         1e-30, 7.3, -7.3, 0.3, 0.9, -0.9])
_EDGE_INTS = np.array([0, 1, -1, 2, -2, 7, -7, np.iinfo(np.int64).min, np.iinfo(np.int64).max])
_UNARY_NEW = ["tan", "sinh", "cosh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh",
              "arctanh", "log1p", "expm1", "log2", "log10", "exp2", "reciprocal", "cbrt",
              "sinc", "deg2rad", "rad2deg", "degrees", "radians", "floor", "ceil", "trunc",
              "rint", "isnan", "isinf", "isfinite", "signbit", "nan_to_num", "round"]
_BINARY_NEW = ["arctan2", "hypot", "logaddexp", "logaddexp2", "copysign", "heaviside", "fmax",
               "fmin", "remainder", "fmod", "floor_divide"]


def _on_cuda(cuda, name, *args, **kwargs):
    """The cuda kernel of op `name` on host arrays; (result as a host array, None) or
    (None, the exception)."""
    placed = [cuda.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    try:
        return cuda.to_numpy(cuda.kernels.table()[name](*placed, **kwargs)), None
    except (TypeError, ValueError, IndexError) as exc:
        return None, exc


def _same_as_numpy(cuda, name, ref, *args, **kwargs):
    with np.errstate(all="ignore"):
        try:
            want, err = ref(*args, **kwargs), None
        except (TypeError, ValueError, IndexError) as exc:
            want, err = None, exc
        got, got_err = _on_cuda(cuda, name, *args, **kwargs)
    what = f"{name}{tuple(getattr(a, 'dtype', a) for a in args)} {kwargs}"
    if err is not None:
        assert isinstance(got_err, type(err)), f"{what}: NumPy raises {err!r}, cuda {got_err!r}"
        return
    if got_err is not None and want.dtype in (np.float16, np.int8):
        assert isinstance(got_err, TypeError) and "'cuda'" in str(got_err), what
        return                  # a dtype the kernels do not cover: refused, never wrong
    assert got_err is None, f"{what}: cuda raises {got_err!r}"
    assert got.dtype == want.dtype and got.shape == want.shape, what
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-6,
                               atol=0, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("name", _UNARY_NEW)
def test_new_unary_kernels_match_numpy_on_edge_values_and_dtypes(cuda, name):
    for x in (_EDGE_FLOATS, _EDGE_FLOATS.astype(np.float32), _EDGE_INTS,
              _EDGE_INTS.astype(np.int32), np.array([True, False]), _t(_r(3, 4))):
        _same_as_numpy(cuda, name, getattr(np, name), x)


@pytest.mark.parametrize("name", _BINARY_NEW)
def test_new_binary_kernels_match_numpy_on_edge_values_and_dtypes(cuda, name):
    a, b = np.repeat(_EDGE_FLOATS, len(_EDGE_FLOATS)), np.tile(_EDGE_FLOATS, len(_EDGE_FLOATS))
    ai, bi = np.repeat(_EDGE_INTS, len(_EDGE_INTS)), np.tile(_EDGE_INTS, len(_EDGE_INTS))
    for x, y in ((a, b), (a.astype(np.float32), b.astype(np.float32)), (ai, bi),
                 (ai.astype(np.int32), bi.astype(np.int32)), (a, 2), (ai, -3),
                 (_t(_r(3, 4)), _r(4) + 0.25), (np.arange(-6, 6), 2.5)):
        _same_as_numpy(cuda, name, getattr(np, name), x, y)


def test_round_matches_numpys_algorithm_for_every_decimals(cuda):
    for decimals in (-2, -1, 0, 1, 3, 25):
        for x in (_EDGE_FLOATS * 123.456, (_EDGE_FLOATS * 123.456).astype(np.float32),
                  np.arange(-60, 60) * 5, np.array([0.125, 0.375, 2.675, -1.005])):
            got, err = _on_cuda(cuda, "round", x, decimals=decimals)
            want = np.round(x, decimals)
            assert err is None and got.dtype == want.dtype
            assert np.array_equal(got, want, equal_nan=True), (decimals, x.dtype, got, want)


def test_nan_to_num_replacements_and_dtype_limits(cuda):
    for x in (_EDGE_FLOATS, _EDGE_FLOATS.astype(np.float32)):
        for kw in ({}, {"nan": 5.0, "neginf": -3.0}, {"posinf": 1e3}):
            got, err = _on_cuda(cuda, "nan_to_num", x, **kw)
            want = np.nan_to_num(x, **kw)
            assert err is None and got.dtype == want.dtype and np.array_equal(got, want), kw


_X = _r(3, 4, 5)
_XT = np.ascontiguousarray(_X.transpose(2, 0, 1)).transpose(1, 2, 0)     # a strided view
_SORT_ROWS = np.array([[3.0, np.nan, 1, 1, -0.0, 0.0, np.inf, -np.inf, np.nan, 2],
                       [5, 4, 3, 2, 1, 0, -1, -2, -3, -4]])


@pytest.mark.parametrize("axis", [None, 0, 1, -1, 3])
def test_cumsum_and_cumprod_match_numpy(cuda, axis):
    for x in (_X, _XT, _X.astype(np.float32), (_X * 3).astype(np.int32), _X > 0, _r(0, 3)):
        _same_as_numpy(cuda, "cumsum", np.cumsum, x, axis=axis)
        _same_as_numpy(cuda, "cumprod", np.cumprod, x, axis=axis)
    _same_as_numpy(cuda, "cumsum", np.cumsum, _X, axis=axis, dtype=np.float32)
    _same_as_numpy(cuda, "cumprod", np.cumprod, (_X * 2).astype(np.int32), axis=axis,
                   dtype=np.int32)


def test_cumsum_of_a_row_longer_than_one_block(cuda):
    _same_as_numpy(cuda, "cumsum", np.cumsum, _r(1000))
    _same_as_numpy(cuda, "cumprod", np.cumprod, 1 + _r(600) / 100)


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_sort_and_argsort_are_numpys_stable_sort_nan_last(cuda, axis):
    rng = np.random.default_rng(5)
    ties = rng.integers(0, 4, (5, 37))
    for x in (_SORT_ROWS, _SORT_ROWS.T, _X, _XT, ties, ties.astype(np.int32), _r(2, 0),
              _r(1000), _r(3, 1), np.array(2.5), ties > 1):
        _same_as_numpy(cuda, "sort", np.sort, x, axis=axis)
        _same_as_numpy(cuda, "argsort", lambda v, axis: np.argsort(v, axis, kind="stable"),
                       x, axis=axis)


def test_sort_arguments_are_checked_as_on_the_cpu(cuda):
    for name in ("sort", "argsort"):
        ref = getattr(np, name)
        for kwargs in ({"kind": "bogus"}, {"kind": "stable", "stable": True},
                       {"kind": "mergesort"}, {"stable": True}, {"kind": "heapsort"}):
            _same_as_numpy(cuda, name, ref, _r(7) + np.arange(7), **kwargs)
    cases.needs("sort", "argsort")
    for fn in (tg.sort, tg.argsort):
        with pytest.raises(ValueError, match=r"^(arg)?sort: order= names fields"):
            fn(tg.tensor(_r(3), device="cuda"), order="f0")


def test_take_along_axis_matches_numpy(cuda):
    rng = np.random.default_rng(6)
    cases_ = [(rng.integers(-3, 3, (3, 2, 5)), 1), (rng.integers(0, 3, (1, 4, 1)), 0),
              (rng.integers(0, 5, (7,)), None), (rng.integers(0, 6, (3, 4, 5)), 2),
              (rng.integers(0, 4, (3, 4)), 1), (np.zeros((3, 1, 5), np.float64), 1)]
    for idx, axis in cases_:
        _same_as_numpy(cuda, "take_along_axis", np.take_along_axis, _XT, idx, axis=axis)


def test_roll_repeat_tile_match_numpy(cuda):
    for x in (_X, _XT, _X > 0):
        for shift, axis in ((1, None), (-7, None), (2, 0), ((1, 2), (0, 1)), ((1, 1), (1, 1)),
                            (3, -1), (5, 2), (1, 3), ((1, 2, 3), (0, 1))):
            _same_as_numpy(cuda, "roll", np.roll, x, shift, axis=axis)
        for reps, axis in ((2, None), (3, 0), ([1, 0, 2], 0), ([1, 2, 0, 1], 1), (0, 2),
                           (-1, 0), ([1, 2], 0), (2.5, 0), (2, 5)):
            _same_as_numpy(cuda, "repeat", np.repeat, x, reps, axis=axis)
        for reps in (2, (2, 1), (1, 1, 1), (2, 1, 1, 3), (0, 2), (), 1, (-1,)):
            _same_as_numpy(cuda, "tile", np.tile, x, reps)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
def test_pad_matches_numpy_for_every_mode(cuda, mode):
    pytest.importorskip("tapegrad_shape.rearrange", reason="pad's checks are tapegrad-shape's")
    for width in (1, (1, 2), ((1, 2), (0, 3), (2, 0)), ((1,), (2,), (3,)), -1, 1.5,
                  ((1, 2), (3, 4))):
        _same_as_numpy(cuda, "pad", np.pad, _XT, width, mode=mode)
        _same_as_numpy(cuda, "pad", np.pad, np.arange(3), 7, mode=mode)   # wider than the axis
    _same_as_numpy(cuda, "pad", np.pad, _r(0, 3), ((0, 0), (1, 1)), mode=mode)
    _same_as_numpy(cuda, "pad", np.pad, _r(0, 3), ((1, 0), (1, 1)), mode=mode)


def test_pad_constant_values_per_axis_and_side(cuda):
    pytest.importorskip("tapegrad_shape.rearrange", reason="pad's checks are tapegrad-shape's")
    _same_as_numpy(cuda, "pad", np.pad, _X, ((1, 2), (3, 1), (1, 1)), mode="constant",
                   constant_values=((1, 2), (3, 4), (5, 6)))
    _same_as_numpy(cuda, "pad", np.pad, (_X * 4).astype(np.int32), 2, mode="constant",
                   constant_values=7.7)


def test_pad_modes_the_cpu_op_refuses_are_refused_on_cuda_too(cuda):
    pytest.importorskip("tapegrad_shape.rearrange", reason="pad's checks are tapegrad-shape's")
    _, err = _on_cuda(cuda, "pad", _X, 1, mode="linear_ramp")
    assert isinstance(err, ValueError) and "pad" in str(err) and "linear_ramp" in str(err)
    _, err = _on_cuda(cuda, "pad", _X, 1, mode="reflect", reflect_type="odd")
    assert isinstance(err, ValueError) and "odd" in str(err)
    _, err = _on_cuda(cuda, "pad", _X, 1, mode="edge", constant_values=1)
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


def test_take_and_its_gradient_match_numpy_for_every_mode(cuda):
    idx = np.array([[0, 3], [3, -1]])
    for mode in ("raise", "wrap", "clip"):
        for indices, axis in ((np.array([0, 2, 2, 11]), None), (idx, 1), (1, 0),
                              (np.array([5, -7, 1]), 0), (np.array([5, -7, 1]), -1),
                              (np.array([True, False]), 0), (np.array([0.5]), 0)):
            _same_as_numpy(cuda, "take", np.take, _XT[0], indices, axis=axis, mode=mode)
        g = _r(2, 2, 5)
        _same_as_numpy(cuda, "_take_grad", _np_take_grad, g, np.array([[0, 3], [3, -1]]),
                       shape=(4, 5), axis=0, mode=mode)
        _same_as_numpy(cuda, "_take_grad", _np_take_grad, _r(3), np.array([5, -7, 1]),
                       shape=(2, 2), mode=mode)


def test_take_along_axis_gradient_and_put_along_axis_match_numpy(cuda):
    idx = np.array([[0, 3, 3], [1, 1, 0], [2, 0, 1]])
    _same_as_numpy(cuda, "_take_along_axis_grad", _np_take_along_axis_grad, _r(3, 3), idx,
                   shape=(3, 4), axis=1)
    _same_as_numpy(cuda, "_take_along_axis_grad", _np_take_along_axis_grad, _r(3),
                   np.array([5, 0, 0]), shape=(2, 3), axis=None)
    _same_as_numpy(cuda, "_put_along_axis", _np_put_along_axis, _X[0], np.array([[0], [2], [3]]),
                   _r(3, 1), axis=1)
    _same_as_numpy(cuda, "_put_along_axis", _np_put_along_axis, _X[0],
                   np.array([[1, 0, 2, 1, 0]]), 2.5, axis=0)
    _same_as_numpy(cuda, "_put_along_axis", _np_put_along_axis, _X[0], np.array([4, 0]),
                   _r(2), axis=None)
    _same_as_numpy(cuda, "_put_along_axis", _np_put_along_axis, _X[0].astype(np.int32),
                   np.array([[1, 0, 2, 1, 0]]), 2.5, axis=0)


def test_tensordot_matches_numpy(cuda):
    pytest.importorskip("tapegrad_linalg", reason="matmul's checks are tapegrad-linalg's")
    for a, b, axes in ((_r(2, 3, 4), _r(3, 4, 2), 2), (_r(2, 3), _r(3, 4), 1),
                       (_XT, _r(5, 4, 3), ([1, 2], [1, 0])), (_r(3, 2), _r(4, 3), (0, 1)),
                       (_r(2, 3), _r(2), 0), (_r(3), _r(3), 1),
                       (_r(2, 3, 4), _r(4, 3), ((-1, -2), (0, 1))), (_r(2, 3), _r(4, 3), 1),
                       (_r(2, 0), _r(0, 3), 1), (_r(2, 3), _r(3, 4), ([0], [0, 1]))):
        _same_as_numpy(cuda, "tensordot", np.tensordot, a, b, axes=axes)


def test_vector_norm_matches_numpy_for_every_ord(cuda):
    x = _XT.copy()
    x[0, 1, 2] = 0.0
    for ord_ in (2, 1, 0, np.inf, -np.inf, 3, 0.5, -1, 2.0, "fro"):
        for axis, keepdims in ((None, False), (1, False), ((0, 2), True), (-1, True)):
            for v in (x, x.astype(np.float32), (x * 3).astype(np.int64)):
                _same_as_numpy(cuda, "linalg_vector_norm", _np_vector_norm, v, ord=ord_,
                               axis=axis, keepdims=keepdims)


def _np_vector_norm(x, ord=2, axis=None, keepdims=False):
    if isinstance(ord, str):
        raise ValueError(f"invalid norm order {ord!r} for vectors")
    return np.asarray(np.linalg.vector_norm(x, ord=ord, axis=axis, keepdims=keepdims))


def test_percent_floordiv_divmod_and_method_forms_on_cuda(cuda):
    cases.needs("remainder", "floor_divide", "cumsum", "round")
    x = np.array([[7.5, -7.5, 3.0], [-0.5, 2.0, -4.25]])
    t = tg.tensor(x, device="cuda", requires_grad=True)
    _assert_close((t % 2.0).numpy(), x % 2.0)
    _assert_close((t // -2.0).numpy(), x // -2.0)
    _assert_close((-3.0 % t).numpy(), -3.0 % x)
    q, r = divmod(t, 1.5)
    _assert_close(q.numpy(), x // 1.5)
    _assert_close(r.numpy(), x % 1.5)
    i = tg.tensor(np.array([7, -7, 0]), device="cuda")
    _assert_close((i % 3).numpy(), np.array([7, -7, 0]) % 3)
    _assert_close((i // -2).numpy(), np.array([7, -7, 0]) // -2)
    _assert_close(t.cumsum(axis=1).numpy(), x.cumsum(axis=1))
    _assert_close(t.round(1).numpy(), x.round(1))
    (t % 2.0).sum().backward()
    assert t.grad.device == tg.device("cuda")
    _assert_close(t.grad.numpy(), np.ones_like(x))
