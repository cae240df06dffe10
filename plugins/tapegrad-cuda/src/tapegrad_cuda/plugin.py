"""The hooks of tapegrad-cuda (entry point ``cuda = "tapegrad_cuda.plugin"``).

- ``tapegrad_api``: always publishes ``tg.cuda`` (``tapegrad_cuda.api``).
- ``tapegrad_register_devices`` / ``tapegrad_register_kernels``: only when
  ``tg.cuda.is_available()``; otherwise the device is marked unavailable with the reason,
  so ``device="cuda"`` raises a RuntimeError that says why.
"""

import tapegrad as tg

from . import api
from ._detect import detect


@tg.hookimpl
def tapegrad_register_devices(registry):
    if not detect().available:
        registry.mark_device_unavailable(
            "cuda", f"{detect().reason} (tapegrad-cuda is installed; tg.cuda.unavailable_reason() "
                    f"says the same)")
        return
    from .device import get_cuda_device

    registry.register_device(get_cuda_device())


@tg.hookimpl
def tapegrad_register_kernels(registry):
    if not detect().available:
        return
    from .device import get_cuda_device

    for op, fn in get_cuda_device().kernels.table().items():
        registry.register_kernel(op, "cuda", fn)


@tg.hookimpl
def tapegrad_api():
    return {"cuda": api}
