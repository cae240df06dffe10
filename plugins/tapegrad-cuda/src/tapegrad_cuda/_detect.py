"""Whether a usable GPU is there, found the one way that held without PyCUDA, without a
driver and without a device (see the notes on building PyCUDA):

1. ``import pycuda.driver``: an ``ImportError`` (no PyCUDA, or no ``libcuda.so.1``)
   means no GPU;
2. ``pycuda.driver.init()`` and ``pycuda.driver.Device.count() > 0``: any
   ``pycuda.driver.Error`` (no usable device, driver too old, ...) means no GPU.

``pycuda.autoinit`` is never imported: it creates a context at import and registers an
exit hook, which a library must not do. The answer is computed once and cached;
``detect(refresh=True)`` computes it again (tests use it with a fake ``pycuda.driver``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Detection:
    available: bool
    device_count: int
    reason: str                     # "" when available
    driver: ModuleType | None = None  # pycuda.driver, when it imported


_LOCK = threading.Lock()
_CACHED: Detection | None = None


def _probe() -> Detection:
    try:
        import pycuda.driver as drv
    except ImportError as exc:
        return Detection(False, 0, f"PyCUDA could not be imported ({type(exc).__name__}: "
                         f"{exc}); install tapegrad-cuda[gpu] on a machine with an NVIDIA "
                         "driver")
    try:
        drv.init()
        count = int(drv.Device.count())
    except drv.Error as exc:
        return Detection(False, 0, f"the CUDA driver could not be initialised "
                         f"({type(exc).__name__}: {exc})", drv)
    if count <= 0:
        return Detection(False, 0, "the CUDA driver reports no GPU (Device.count() == 0)",
                         drv)
    return Detection(True, count, "", drv)


def detect(refresh: bool = False) -> Detection:
    """The cached detection result (probing the first time, or again with refresh)."""
    global _CACHED
    with _LOCK:
        if _CACHED is None or refresh:
            _CACHED = _probe()
        return _CACHED
