"""Fixtures: the PyCUDA simulator (fakecuda.py) installed as ``pycuda`` and a ``cuda``
device built on it, registered for the tests of one module and removed afterwards."""

import importlib.util
import sys
from pathlib import Path

import pytest
import tapegrad as tg
from tapegrad import _engine


def _load(filename, name):
    # NOTE: pytest runs with --import-mode=importlib, so sibling modules are not importable
    # by name; load them once under a unique name (the test files import that name).
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(filename))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def _load_fakecuda():
    return _load("fakecuda.py", "tapegrad_cuda_tests_fakecuda")


_load("cases.py", "tapegrad_cuda_tests_cases")
_load("numpy_checks.py", "tapegrad_cuda_tests_numpy_checks")


@pytest.fixture(scope="session")
def fakecuda():
    """The simulator module."""
    return _load_fakecuda()


class _FakeCudaPlugin:
    def __init__(self, device):
        self.device = device

    @tg.hookimpl
    def tapegrad_register_devices(self, registry):
        registry.register_device(self.device)

    @tg.hookimpl
    def tapegrad_register_kernels(self, registry):
        for op, fn in self.device.kernels.table().items():
            registry.register_kernel(op, "cuda", fn)


def _restore_unavailable_reason():
    """Mark cuda unavailable again with exactly the reason the plugin's hook gives."""
    from tapegrad_cuda import plugin

    class Marks:
        def mark_device_unavailable(self, name, reason):
            _engine.set_device_unavailable(name, reason)

    plugin.tapegrad_register_devices(Marks())


@pytest.fixture(scope="module")
def cuda(fakecuda):
    """A CudaDevice on the simulator, registered as tg's ``cuda`` device."""
    from tapegrad_cuda import _detect
    from tapegrad_cuda.device import CudaDevice

    if tg.cuda.is_available():
        pytest.skip("a real GPU is available: the simulator tests would shadow it")
    saved = {k: sys.modules.get(k) for k in fakecuda.modules()}
    sys.modules.update(fakecuda.modules())
    try:
        assert _detect.detect(refresh=True).available
        dev = CudaDevice(0, cublas_library=fakecuda.FakeCublas())
        tg.register_plugin(_FakeCudaPlugin(dev), name="tapegrad-cuda-simulated")
        yield dev
    finally:
        if "tapegrad-cuda-simulated" in tg.registry().plugins:
            tg.unregister_plugin("tapegrad-cuda-simulated")
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
        _detect.detect(refresh=True)
        _restore_unavailable_reason()
