"""NumPy's Kaiser window, ``np.kaiser(M, beta)``, differentiable in `beta`.

It lives in tapegrad-scipy rather than with NumPy's other functions in tapegrad-shape
because it is a ratio of modified Bessel functions ``i0``, which this plugin provides
(tapegrad-shape may use only tapegrad-elementwise). The other windows (``bartlett``,
``hanning``, ...) are functions of an integer length alone: nothing to differentiate.

>>> import tapegrad as tg
>>> beta = tg.tensor(5.0, requires_grad=True)
>>> w = tg.kaiser(4, beta)
>>> w.numpy().round(6).tolist()
[0.036711, 0.775322, 0.775322, 0.036711]
"""

import numpy as np
import tapegrad as tg

__all__ = ["kaiser", "register"]


def kaiser(M, beta):
    """The Kaiser window of `M` points, as ``np.kaiser``:
    ``i0(beta * sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(beta)`` for ``n = 0 .. M - 1``,
    ``alpha = (M - 1) / 2``; M == 1 gives [1.] and M <= 0 an empty window, as NumPy's.
    Differentiable in `beta` (a scalar), through ``tg.i0``. A float32 beta gives a float32
    window (NumPy's is always float64).

    >>> import tapegrad as tg
    >>> tg.kaiser(3, 0.0).tolist()
    [1.0, 1.0, 1.0]
    """
    b = beta if isinstance(beta, tg.Tensor) else tg.asarray(beta)
    if b.ndim != 0:
        raise ValueError(f"kaiser: beta must be a scalar, got shape {b.shape}")
    if b.dtype.kind == "c":
        raise TypeError("kaiser: complex beta is not supported")
    dtype = b.dtype if b.dtype.kind == "f" else np.dtype(np.float64)
    if b.dtype != dtype:
        b = b.astype(dtype)
    if M == 1:
        return tg.ones((1,), dtype=dtype, device=b.device)
    n = np.arange(0, M)
    alpha = (M - 1) / 2.0
    r = tg.asarray(np.sqrt(1 - ((n - alpha) / alpha) ** 2.0).astype(dtype), device=b.device)
    return tg.i0(b * r) / tg.i0(b)


def register(registry):
    """Register this module's function (called by the plugin's hook)."""
    registry.register_function(
        "kaiser", kaiser, method=False, differentiable=(1,),
        samples=[tg.Sample(6, np.array(2.5)), tg.Sample(5, np.array(0.7))])
