"""``tg.cuda``: what PyTorch users expect under ``torch.cuda``.

>>> import tapegrad as tg
>>> tg.cuda.is_available() in (True, False)
True
>>> tg.cuda.is_available() or bool(tg.cuda.unavailable_reason())
True
"""

from ._detect import detect

__all__ = ["is_available", "device_count", "synchronize", "unavailable_reason",
           "require"]


def is_available() -> bool:
    """True when PyCUDA imports, the driver initialises and at least one GPU is present."""
    return detect().available


def device_count() -> int:
    """The number of GPUs the driver reports (0 when CUDA is not available)."""
    return detect().device_count


def unavailable_reason() -> str:
    """Why CUDA is not available ("" when it is)."""
    return detect().reason


def require() -> None:
    """Raise a RuntimeError that says why, when CUDA is not available."""
    det = detect()
    if not det.available:
        raise RuntimeError(f"tapegrad: CUDA is not available: {det.reason}")


def synchronize() -> None:
    """Wait for all work queued on the GPU (``cuCtxSynchronize``).

    Raises a RuntimeError naming the reason when CUDA is not available.
    """
    require()
    from .device import get_cuda_device

    get_cuda_device().synchronize()
