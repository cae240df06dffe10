"""When the C kernels of ``tapegrad_nn._kernels`` can take a kernel's arrays (the callers
in normalization.py, pooling.py and conv.py run their NumPy code otherwise)."""

from __future__ import annotations

import numpy as np

# Native float32 and float64: a byte-swapped '>f4' compares unequal to these (and the
# typed memoryviews of the C kernels would refuse it).
C_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def c_kernel_ok(*arrays):
    """Whether the C kernels can take these arrays: ndarrays (not subclasses), one dtype,
    native float32 or float64."""
    dtype = arrays[0].dtype if type(arrays[0]) is np.ndarray else None
    return dtype in C_DTYPES and all(type(a) is np.ndarray and a.dtype == dtype
                                     for a in arrays)
