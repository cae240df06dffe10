import numpy as np
import pytest
import tapegrad as tg


class FakeArray(np.ndarray):
    """Arrays of the 'fake' device: ndarrays of another type, so mixing is detectable."""


class FakeDevice(tg.Device):
    def __init__(self):
        super().__init__("fake", FakeArray)

    def asarray(self, obj, dtype=None):
        return np.array(obj, dtype=dtype).view(FakeArray)

    def to_numpy(self, arr):
        return arr.view(np.ndarray)

    def copy(self, arr):
        return arr.copy()

    def copyto(self, dst, src):
        np.copyto(dst, src, casting="same_kind")

    def setitem(self, arr, index, value):
        arr[index] = value

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype).view(FakeArray)

    def ones(self, shape, dtype):
        return np.ones(shape, dtype).view(FakeArray)


class FakePlugin:
    @tg.hookimpl
    def tapegrad_register_devices(self, registry):
        registry.register_device(FakeDevice())

    @tg.hookimpl
    def tapegrad_register_kernels(self, registry):
        registry.register_kernel("add", "fake", lambda x, y: np.add(x, y).view(FakeArray))
        registry.register_kernel("sum_to_shape", "fake", lambda x, shape: x)


@pytest.fixture
def fake():
    name = tg.register_plugin(FakePlugin(), name="fake-device")
    yield tg.device("fake")
    tg.unregister_plugin(name)


def test_cpu_device():
    assert tg.device("cpu").name == "cpu" and repr(tg.device("cpu")) == "device('cpu')"


def test_str_of_a_device_is_its_name_like_torch():
    assert str(tg.device("cpu")) == "cpu" and f"{tg.device('cpu')}" == "cpu"
    assert str(tg.zeros(1).device) == "cpu"


def test_tensor_to_accepts_a_dtype_like_torch():
    x = tg.tensor([1.5, 2.0], requires_grad=True)
    y = x.to(np.float32)
    assert y.dtype == np.float32 and y.tolist() == [1.5, 2.0]
    y.backward(tg.ones(2, dtype=np.float32))
    assert x.grad.dtype == np.float64 and x.grad.tolist() == [1.0, 1.0]
    assert x.to("cpu", np.float64) is x and x.to(dtype=np.float64) is x
    z = x.to("cpu", dtype=np.float32)
    assert z.dtype == np.float32 and z.device.name == "cpu"
    with pytest.raises(TypeError, match="dtype given twice"):
        x.to(np.float32, dtype=np.float64)


def test_cuda_without_plugin_raises_a_clear_error():
    if "cuda" in tg.registry().devices:
        pytest.skip("a cuda device is registered on this machine")
    with pytest.raises(RuntimeError, match="tapegrad-cuda"):
        tg.tensor([1.0], device="cuda")


def test_unknown_device():
    with pytest.raises(RuntimeError, match="unknown device 'tpu'.*cpu"):
        tg.device("tpu")


def test_tensor_on_another_device_and_transfer_gradient(fake):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    xf = x.to("fake")
    assert xf.device == fake and type(xf._data) is FakeArray
    y = xf + xf
    assert y.device == fake
    y.backward(tg.tensor([1.0, 1.0], device="fake"))
    assert x.grad.device.name == "cpu" and x.grad.tolist() == [2.0, 2.0]
    assert xf.to("fake") is xf and y.cpu().device.name == "cpu"


def test_mixing_devices_raises_naming_both(fake):
    a = tg.tensor([1.0])
    b = tg.tensor([1.0], device="fake")
    with pytest.raises(RuntimeError, match="add: expected all tensors on the same device.*cpu and fake"):
        a + b


def test_op_without_kernel_for_the_device(fake):
    b = tg.tensor([1.0], device="fake")
    with pytest.raises(NotImplementedError, match="astype: no kernel for device 'fake'.*cpu"):
        tg.astype(b, np.float32)
