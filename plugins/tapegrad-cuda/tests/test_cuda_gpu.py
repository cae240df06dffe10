"""On a real GPU: every op's forward and gradient on cuda against the cpu, the contract kit
on the cuda device, and sizes that exercise every kernel's multi-block paths. Skipped, with
the reason, where tg.cuda.is_available() is False (ci/gpu-check runs them on a GPU)."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_cuda_tests_cases as cases
import tapegrad_cuda_tests_numpy_checks as checks
from tapegrad import _engine
from tapegrad_cuda_tests_cases import CUDA_OPS, INTEGER_AND_BOOL, NONCONTIG, _assert_close, compare

pytestmark = pytest.mark.skipif(
    not tg.cuda.is_available(),
    reason=f"no usable GPU: {tg.cuda.unavailable_reason() or 'tg.cuda.is_available() is False'}")


def test_the_cuda_device_is_registered_with_a_kernel_for_every_first_party_op():
    assert "cuda" in tg.registry().devices
    cases.every_op_has_a_kernel_or_refuses()


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", CUDA_OPS)
def test_op_samples_forward_and_gradient_match_cpu(name, dtype):
    for sample in cases.op(name).samples:
        compare(cases.op(name), *sample.args, cast=dtype, **sample.kwargs)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", range(len(NONCONTIG)),
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NONCONTIG)])
def test_views_broadcasting_axes_and_empty_arrays_match_cpu(case, dtype):
    name, args, kwargs = NONCONTIG[case]
    compare(cases.op(name), *args, cast=dtype, **kwargs)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")     # the cpu: x // 0, x % 0
@pytest.mark.parametrize("case", range(len(INTEGER_AND_BOOL)),
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(INTEGER_AND_BOOL)])
def test_integer_and_bool_dtypes_match_cpu(case):
    name, args = INTEGER_AND_BOOL[case]
    compare(cases.op(name), *args, grad=False, **cases.INT_KWARGS.get(name, {}))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("check", checks.CHECKS, ids=checks.IDS)
def test_kernel_matches_numpy_directly(check):
    check(tg.device("cuda"))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", range(len(cases.LARGE)),
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(cases.LARGE)])
def test_large_sizes_match_cpu(case, dtype):
    name, args, kwargs = cases.LARGE[case]
    compare(cases.op(name), *args, cast=dtype, **kwargs)


@pytest.fixture
def cuda_default(monkeypatch):
    cpu, cuda = tg.device("cpu"), tg.device("cuda")
    monkeypatch.setattr(tg.testing, "_check_forward", cases.check_forward_on_device)
    _engine.install_device(cuda, True)
    yield cuda
    _engine.install_device(cpu, True)


@pytest.mark.parametrize("name", [n for n in CUDA_OPS if n != "_einsum"])
def test_contract_kit_on_the_cuda_device(cuda_default, name):
    tg.testing.check_op(name)


def test_training_steps_match_cpu():
    cases.training_steps_match_cpu()


def test_compiled_steps_and_replayed_hessians_on_cuda():
    cases.compiled_steps_and_replayed_hessians_on_cuda()


def test_rng_and_synchronize():
    tg.manual_seed(3)
    a = tg.random.randn(1000, device="cuda", dtype=np.float32)
    tg.manual_seed(3)
    assert np.array_equal(a.numpy(), tg.random.randn(1000, dtype=np.float32).numpy())
    tg.cuda.synchronize()


def test_unsupported_dtype_raises_type_error():
    cases.needs("exp")
    with pytest.raises(TypeError, match=r"exp: .*float16.*'cuda'"):
        tg.exp(tg.tensor(np.ones(3, np.float16), device="cuda"))


def test_matmul_of_large_matrices_matches_numpy():
    cases.needs("matmul")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1000, 700))
    b = rng.standard_normal((700, 900))
    _assert_close((tg.tensor(a, device="cuda") @ tg.tensor(b, device="cuda")).numpy(), a @ b)
