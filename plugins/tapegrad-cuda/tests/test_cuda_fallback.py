"""Without a usable GPU: tg.cuda says so and why, the CPU is unaffected, device="cuda"
raises a clear RuntimeError. The cases with PyCUDA present but no driver/device are
simulated with a fake ``pycuda.driver`` module."""

import sys
import types
from importlib import metadata

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_cuda
from tapegrad_cuda import _detect, api, plugin


@pytest.fixture
def redetect(monkeypatch):
    """Run detection again (under a test's fake modules); afterwards remove the fakes
    first, then detect again, so later tests see this machine as it is."""
    yield lambda: _detect.detect(refresh=True)
    monkeypatch.undo()
    _detect.detect(refresh=True)


def _fake_pycuda(monkeypatch, init=None, count=None):
    class Error(Exception):
        pass

    class LogicError(Error):
        pass

    drv = types.ModuleType("pycuda.driver")
    drv.Error, drv.LogicError = Error, LogicError

    def _init(flags=0):
        if init is not None:
            raise init(drv)

    class Device:
        @staticmethod
        def count():
            if isinstance(count, type) or callable(count):
                raise count(drv)
            return count

    drv.init, drv.Device = _init, Device
    pkg = types.ModuleType("pycuda")
    pkg.__path__ = []
    pkg.driver = drv
    monkeypatch.setitem(sys.modules, "pycuda", pkg)
    monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
    monkeypatch.delitem(sys.modules, "pycuda.autoinit", raising=False)
    return drv


def test_entry_point_and_public_name():
    (ep,) = [e for e in metadata.entry_points(group="tapegrad") if e.name == "cuda"]
    assert ep.load() is plugin
    assert "tapegrad-cuda" in tg.registry().plugins
    assert "tapegrad-cuda" not in tg.registry().failed
    assert tg.cuda is api
    assert tapegrad_cuda.API == ("cuda",)
    for name in ("is_available", "device_count", "synchronize", "unavailable_reason"):
        assert callable(getattr(tg.cuda, name))


def test_this_machine_has_no_usable_gpu_and_says_why():
    if tg.cuda.is_available():
        pytest.skip("a GPU is available here; the fallback is tested with fakes below")
    assert tg.cuda.device_count() == 0
    assert isinstance(tg.cuda.unavailable_reason(), str) and tg.cuda.unavailable_reason()
    assert "cuda" not in tg.registry().devices
    assert "pycuda.autoinit" not in sys.modules


def test_pycuda_absent(monkeypatch, redetect):
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    det = redetect()
    assert not det.available and det.device_count == 0
    assert not tg.cuda.is_available()
    assert tg.cuda.device_count() == 0
    reason = tg.cuda.unavailable_reason()
    assert "PyCUDA could not be imported" in reason and "Error" in reason
    assert "tapegrad-cuda[gpu]" in reason


def test_driver_init_fails(monkeypatch, redetect):
    class NoDriver:
        def __new__(cls, drv):
            return drv.LogicError("cuInit failed: no CUDA-capable device is detected")

    _fake_pycuda(monkeypatch, init=NoDriver)
    det = redetect()
    assert not det.available and det.device_count == 0
    assert not tg.cuda.is_available()
    reason = tg.cuda.unavailable_reason()
    assert "LogicError" in reason and "no CUDA-capable device is detected" in reason
    assert "pycuda.autoinit" not in sys.modules


def test_device_count_raises_driver_error(monkeypatch, redetect):
    _fake_pycuda(monkeypatch, count=lambda drv: drv.Error("cuDeviceGetCount failed: boom"))
    assert not redetect().available
    assert "cuDeviceGetCount failed: boom" in tg.cuda.unavailable_reason()


def test_zero_devices(monkeypatch, redetect):
    _fake_pycuda(monkeypatch, count=0)
    assert not redetect().available
    assert "no GPU" in tg.cuda.unavailable_reason()


def test_detection_with_devices(monkeypatch, redetect):
    drv = _fake_pycuda(monkeypatch, count=2)
    det = redetect()
    assert det.available and det.device_count == 2 and det.reason == ""
    assert det.driver is drv
    assert tg.cuda.is_available() and tg.cuda.device_count() == 2
    assert tg.cuda.unavailable_reason() == ""


def test_unexpected_errors_are_not_swallowed(monkeypatch, redetect):
    # Only ImportError and pycuda.driver.Error mean "no GPU"; a bug must stay visible.
    _fake_pycuda(monkeypatch, init=lambda drv: ZeroDivisionError("a bug"))
    with pytest.raises(ZeroDivisionError):
        redetect()


def test_device_cuda_raises_a_clear_runtime_error():
    if tg.cuda.is_available():
        pytest.skip("a GPU is available here")
    for call in (lambda: tg.tensor([1.0], device="cuda"), lambda: tg.device("cuda"),
                 lambda: tg.tensor([1.0]).to("cuda"), lambda: tg.tensor([1.0]).cuda()):
        with pytest.raises(RuntimeError) as err:
            call()
        msg = str(err.value)
        assert "device 'cuda' is not available" in msg and tg.cuda.unavailable_reason() in msg


def test_require_and_synchronize_say_why():
    if tg.cuda.is_available():
        pytest.skip("a GPU is available here")
    for call in (tg.cuda.require, tg.cuda.synchronize):
        with pytest.raises(RuntimeError, match="CUDA is not available") as err:
            call()
        assert tg.cuda.unavailable_reason() in str(err.value)


def test_hooks_register_only_the_reason_without_a_gpu():
    if tg.cuda.is_available():
        pytest.skip("a GPU is available here")

    class Recorder:
        def __init__(self):
            self.calls = []

        def register_device(self, *a, **k):
            self.calls.append(("device", a))

        def register_kernel(self, *a, **k):
            self.calls.append(("kernel", a))

        def mark_device_unavailable(self, name, reason):
            self.calls.append(("unavailable", name))

    rec = Recorder()
    plugin.tapegrad_register_devices(rec)
    plugin.tapegrad_register_kernels(rec)
    assert rec.calls == [("unavailable", "cuda")]
    assert plugin.tapegrad_api() == {"cuda": api}


def test_cpu_is_unaffected():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x + x
    assert y.device == tg.device("cpu")
    y.backward(tg.ones(2))
    assert x.grad.tolist() == [2.0, 2.0]
    w = tg.tensor(np.ones(3, np.float32))
    assert (w + w).dtype == np.float32


def test_plugin_import_never_needs_pycuda(tmp_path):
    import subprocess

    code = ("import sys; sys.modules['pycuda'] = None; sys.modules['pycuda.driver'] = None\n"
            "import tapegrad as tg, tapegrad_cuda.plugin\n"
            "assert tg.cuda.is_available() is False, tg.cuda.unavailable_reason()\n"
            "assert 'cuda' not in tg.registry().devices\n"
            "assert 'pycuda.autoinit' not in sys.modules\n"
            "print('OK', tg.cuda.unavailable_reason())\n")
    out = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("OK PyCUDA could not be imported")


def test_device_error_carries_the_detection_reason():
    import tapegrad as tg
    if tg.cuda.is_available():
        pytest.skip("a GPU is available on this machine")
    with pytest.raises(RuntimeError) as info:
        tg.tensor([1.0], device="cuda")
    assert tg.cuda.unavailable_reason() in str(info.value)
