"""The hooks of tapegrad-fft (entry point ``fft = "tapegrad_fft.plugin"``).

- ``tapegrad_register_ops``: the 1-d transforms, the shifts and the crop/pad op of their
  gradients (flat names ``fft_<name>``), and the n-d transforms as functions.
- ``tapegrad_api``: publishes ``tg.fft``, the namespace with np.fft's names.
"""

import numpy as np
import tapegrad as tg

from . import _ops, fft


def _nd_samples(kind):
    r = np.random.default_rng(90)
    if kind == "real":
        make = r.standard_normal
    else:
        def make(shape):
            return r.standard_normal(shape) + 1j * r.standard_normal(shape)
    real = r.standard_normal
    # NOTE: the kit's complex checks are for ops; a function's complex samples are skipped
    # by its real checks, so each function has real samples as well. Their gradients, real
    # and complex, are checked against finite differences in tests/test_fft_gradients.py.
    return [tg.Sample(make((3, 4))), tg.Sample(make((2, 3, 4)), axes=(0, 2), norm="ortho"),
            tg.Sample(make((3, 5)), s=(4, 4), axes=(0, 1), norm="forward"),
            tg.Sample(make((2, 3)), axes=(1, 1)), tg.Sample(real((3, 4))),
            tg.Sample(real((2, 5)), s=(3, 4), axes=(-1, 0), norm="ortho")]


@tg.hookimpl
def tapegrad_register_ops(registry):
    _ops.register(registry)
    for name in ("fftn", "ifftn", "fft2", "ifft2", "irfftn", "irfft2"):
        registry.register_function(f"fft_{name}", getattr(fft, name), method=False,
                                   samples=_nd_samples("complex"))
    for name in ("rfftn", "rfft2"):
        registry.register_function(f"fft_{name}", getattr(fft, name), method=False,
                                   samples=_nd_samples("real"))


@tg.hookimpl
def tapegrad_api():
    return {"fft": fft}
