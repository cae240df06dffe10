"""Every op's cuda kernel, run on the PyCUDA simulator (fakecuda.py), against the CPU.

The simulator emulates each .cu kernel with NumPy and checks every launch's arguments, so
these tests cover all the host-side logic of the cuda device -- dtype rules, shapes,
strides and views, index resolution, argument marshalling, launch sizes, the cuBLAS
row-major swap -- but not the CUDA code itself (that needs a GPU: test_cuda_gpu.py).
"""

import contextlib
import ctypes

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_cuda_tests_cases as cases
import tapegrad_cuda_tests_numpy_checks as checks
from tapegrad import _engine
from tapegrad_cuda import cublas, kernels
from tapegrad_cuda_tests_cases import (CUDA_OPS, INTEGER_AND_BOOL, NONCONTIG, _assert_close,
                                       _r, compare)


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


@contextlib.contextmanager
def _kit_samples_on_cuda(op):
    """The op's first two samples and its first broadcasting one, for the time of the
    block (the registry's list, changed in place and restored)."""
    every = list(op.samples)
    broadcasting = tg.testing._first_broadcasting_sample(every)
    op.samples[:] = [s for i, s in enumerate(every) if i < 2 or i == broadcasting]
    try:
        yield
    finally:
        op.samples[:] = every


# NOTE: on the simulator the kit costs ten times what it costs on the cpu (finite
# differences of simulated kernels; gradgradcheck is 60% of it), so it runs here on the
# samples _kit_samples_on_cuda picks: half of them. Every sample's forward and gradient
# on cuda are compared with the cpu's in f64 and f32 above
# (test_op_samples_forward_and_gradient_match_cpu), and the cpu kit runs on every sample
# (tests/test_contract.py and each plugin's tests).
@pytest.mark.parametrize("name", CONTRACT_OPS)
def test_contract_kit_on_the_cuda_device(cuda_default, name):
    assert _engine.default_device().name == "cuda"
    op = cases.op(name)
    with _kit_samples_on_cuda(op):
        report = tg.testing.check_op(name)
    assert report.checks, f"{name}: no check ran on cuda"


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


# -- issue 14's kernels against NumPy itself (numpy_checks.py; on a GPU too) ------------------
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("check", checks.CHECKS, ids=checks.IDS)
def test_kernel_matches_numpy_directly(cuda, check):
    check(cuda)


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


def test_matmul_based_linalg_runs_on_cuda_and_decompositions_refuse(cuda):
    # Issue 14: multi_dot and matrix_power (n >= 0) are matmuls and run on cuda; the
    # LAPACK decompositions (and matrix_power with n < 0, an inverse) raise
    # NotImplementedError naming the op and the device.
    cases.needs("matmul", "linalg_inv")
    a, b, c = _r(3, 4), _r(4, 5), _r(5, 2)
    compare(tg.linalg.multi_dot, [a, b, c])
    m = _r(3, 3)
    for n in (0, 1, 3):
        compare(tg.linalg.matrix_power, m, n)
    x = tg.tensor(m, device="cuda")
    for call in (lambda: tg.linalg.matrix_power(x, -2), lambda: tg.linalg.inv(x),
                 lambda: tg.linalg.cholesky(x @ x.T), lambda: tg.linalg.svd(x)):
        with pytest.raises(NotImplementedError, match=r"linalg_\w+: no kernel for device 'cuda'"):
            call()
