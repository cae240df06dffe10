"""tapegrad-cuda: the ``cuda`` device for tapegrad (PyCUDA), with kernels kept as ``.cu``
files under ``tapegrad_cuda/kernels/``.

Installing this distribution publishes ``tg.cuda`` (``is_available()``,
``device_count()``, ``synchronize()``, ``unavailable_reason()``) through the entry-point
group ``tapegrad`` (``cuda = "tapegrad_cuda.plugin"``). The ``cuda`` device itself is
registered only when PyCUDA imports, the driver initialises and there is at least one
GPU; otherwise tapegrad keeps working on the CPU and ``tg.cuda.unavailable_reason()``
says why. Importing this package never fails for lack of a GPU, driver or PyCUDA.

>>> import tapegrad as tg
>>> isinstance(tg.cuda.is_available(), bool)
True
"""

# NOTE: import tapegrad before anything of this package: tapegrad loads its plugins when
# it is first imported, and that import must not start from inside ``plugin``.
import tapegrad as _tapegrad  # noqa: F401

__version__ = "0.1.0"

API = ("cuda",)
"""The public names this plugin adds to ``tapegrad``."""
