"""The pooling and resampling layers of ``tg.nn`` (no parameters): MaxPool1d/2d,
AvgPool1d/2d, AdaptiveAvgPool1d/2d, AdaptiveMaxPool2d, Unfold, Fold, PixelShuffle,
PixelUnshuffle, Upsample and Unflatten, with ``torch.nn``'s constructor arguments and
attribute names; each forward is one call of the function of ``tapegrad_nn.pooling``.

>>> import tapegrad as tg
>>> net = tg.nn.Sequential(tg.nn.MaxPool2d(2), tg.nn.AdaptiveAvgPool2d(1), tg.nn.Flatten())
>>> net(tg.ones((4, 3, 8, 8))).shape
(4, 3)
"""

from __future__ import annotations

import math
import numbers

import tapegrad as tg

from . import pooling as P
from .nn import Module

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "Unfold", "Fold", "PixelShuffle",
           "PixelUnshuffle", "Upsample", "Unflatten"]


def _repr(module, names):
    return ", ".join(f"{n}={getattr(module, n)!r}" for n in names)


class _Layer(Module):
    """A layer whose forward is one function call; a bad input's error names the layer too
    (``MaxPool2d(kernel_size=2, ...): max_pool2d: expected a 4-d ...``)."""

    def _run(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ValueError, TypeError, IndexError) as err:
            raise type(err)(f"{type(self).__name__}({self.extra_repr()}): {err}") from None


class _MaxPoolNd(_Layer):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return self._run(type(self)._fn, input, self.kernel_size, self.stride, self.padding,
                         self.dilation, ceil_mode=self.ceil_mode,
                         return_indices=self.return_indices)

    def extra_repr(self):
        return _repr(self, ("kernel_size", "stride", "padding", "dilation", "ceil_mode"))


class MaxPool1d(_MaxPoolNd):
    """``tg.max_pool1d`` as a layer (``torch.nn.MaxPool1d``).

    >>> import tapegrad as tg
    >>> tg.nn.MaxPool1d(2)(tg.tensor([[[1., 3., 2., 0.]]])).tolist()
    [[[3.0, 2.0]]]
    """
    _fn = staticmethod(P.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """``tg.max_pool2d`` as a layer (``torch.nn.MaxPool2d``).

    >>> import tapegrad as tg
    >>> tg.nn.MaxPool2d(3, stride=2, padding=1)(tg.ones((1, 2, 8, 8))).shape
    (1, 2, 4, 4)
    """
    _fn = staticmethod(P.max_pool2d)


class AvgPool1d(_Layer):
    """``tg.avg_pool1d`` as a layer (``torch.nn.AvgPool1d``).

    >>> import tapegrad as tg
    >>> tg.nn.AvgPool1d(2)(tg.tensor([[[1., 3., 2., 0.]]])).tolist()
    [[[2.0, 1.0]]]
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad

    def forward(self, input):
        return self._run(P.avg_pool1d, input, self.kernel_size, self.stride, self.padding,
                         self.ceil_mode, self.count_include_pad)

    def extra_repr(self):
        return _repr(self, ("kernel_size", "stride", "padding"))


class AvgPool2d(_Layer):
    """``tg.avg_pool2d`` as a layer (``torch.nn.AvgPool2d``).

    >>> import tapegrad as tg
    >>> tg.nn.AvgPool2d(2)(tg.ones((1, 2, 4, 6))).shape
    (1, 2, 2, 3)
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return self._run(P.avg_pool2d, input, self.kernel_size, self.stride, self.padding,
                         self.ceil_mode, self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return _repr(self, ("kernel_size", "stride", "padding"))


class AdaptiveAvgPool1d(_Layer):
    """``tg.adaptive_avg_pool1d(x, output_size)`` as a layer.

    >>> import tapegrad as tg
    >>> tg.nn.AdaptiveAvgPool1d(2)(tg.ones((1, 3, 5))).shape
    (1, 3, 2)
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return self._run(P.adaptive_avg_pool1d, input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size!r}"


class AdaptiveAvgPool2d(AdaptiveAvgPool1d):
    """``tg.adaptive_avg_pool2d(x, output_size)`` as a layer (None keeps that axis).

    >>> import tapegrad as tg
    >>> tg.nn.AdaptiveAvgPool2d((1, None))(tg.ones((1, 3, 5, 4))).shape
    (1, 3, 1, 4)
    """

    def forward(self, input):
        return self._run(P.adaptive_avg_pool2d, input, self.output_size)


class AdaptiveMaxPool2d(AdaptiveAvgPool1d):
    """``tg.adaptive_max_pool2d(x, output_size, return_indices)`` as a layer.

    >>> import tapegrad as tg
    >>> tg.nn.AdaptiveMaxPool2d(2)(tg.ones((1, 3, 5, 4))).shape
    (1, 3, 2, 2)
    """

    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return self._run(P.adaptive_max_pool2d, input, self.output_size, self.return_indices)


class Unfold(_Layer):
    """``tg.unfold`` (im2col) as a layer (``torch.nn.Unfold``).

    >>> import tapegrad as tg
    >>> tg.nn.Unfold(2)(tg.ones((1, 3, 4, 4))).shape
    (1, 12, 9)
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = (kernel_size, dilation,
                                                                      padding, stride)

    def forward(self, input):
        return self._run(P.unfold, input, self.kernel_size, self.dilation, self.padding,
                         self.stride)

    def extra_repr(self):
        return _repr(self, ("kernel_size", "dilation", "padding", "stride"))


class Fold(_Layer):
    """``tg.fold`` (col2im) as a layer (``torch.nn.Fold``).

    >>> import tapegrad as tg
    >>> tg.nn.Fold((4, 4), 2)(tg.ones((1, 12, 9))).shape
    (1, 3, 4, 4)
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size, self.dilation, self.padding, self.stride = (kernel_size, dilation,
                                                                      padding, stride)

    def forward(self, input):
        return self._run(P.fold, input, self.output_size, self.kernel_size, self.dilation,
                         self.padding, self.stride)

    def extra_repr(self):
        return _repr(self, ("output_size", "kernel_size", "dilation", "padding", "stride"))


class PixelShuffle(_Layer):
    """``tg.pixel_shuffle(x, upscale_factor)`` as a layer.

    >>> import tapegrad as tg
    >>> tg.nn.PixelShuffle(2)(tg.ones((1, 8, 3, 3))).shape
    (1, 2, 6, 6)
    """

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return self._run(P.pixel_shuffle, input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(_Layer):
    """``tg.pixel_unshuffle(x, downscale_factor)`` as a layer.

    >>> import tapegrad as tg
    >>> tg.nn.PixelUnshuffle(2)(tg.ones((1, 2, 6, 6))).shape
    (1, 8, 3, 3)
    """

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return self._run(P.pixel_unshuffle, input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class Upsample(_Layer):
    """``tg.interpolate(x, size, scale_factor, mode, align_corners)`` as a layer
    (``torch.nn.Upsample``).

    >>> import tapegrad as tg
    >>> tg.nn.Upsample(scale_factor=2, mode="bilinear")(tg.ones((1, 1, 2, 3))).shape
    (1, 1, 4, 6)
    """

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):
        return self._run(P.interpolate, input, self.size, self.scale_factor, self.mode,
                         self.align_corners, self.recompute_scale_factor)

    def extra_repr(self):
        what = (f"size={self.size!r}" if self.size is not None
                else f"scale_factor={self.scale_factor!r}")
        return f"{what}, mode={self.mode!r}"


class Unflatten(Module):
    """Splits axis `dim` into `unflattened_size` (one entry may be -1), as
    ``torch.nn.Unflatten``.

    >>> import tapegrad as tg
    >>> tg.nn.Unflatten(1, (2, 3))(tg.zeros((4, 6))).shape
    (4, 2, 3)
    """

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
            raise TypeError(f"Unflatten: dim must be an int, got {dim!r}")
        sizes = tuple(unflattened_size)
        if (not sizes or sum(s == -1 for s in sizes) > 1
                or any(isinstance(s, bool) or not isinstance(s, numbers.Integral)
                       or (s < 1 and s != -1) for s in sizes)):
            raise ValueError(f"Unflatten: unflattened_size must be a non-empty tuple of "
                             f"positive ints (one may be -1), got {unflattened_size!r}")
        self.dim, self.unflattened_size = int(dim), sizes

    def forward(self, input):
        shape = tuple(input.shape)
        if not -len(shape) <= self.dim < len(shape):
            raise IndexError(f"Unflatten: dim {self.dim} out of range for an input of shape "
                             f"{shape}")
        d = self.dim % len(shape)
        known = math.prod(s for s in self.unflattened_size if s != -1)
        if (shape[d] % known if -1 in self.unflattened_size else shape[d] != known):
            raise ValueError(f"Unflatten: unflattened_size {self.unflattened_size} does not "
                             f"match dimension {self.dim} (size {shape[d]}) of the input of "
                             f"shape {shape}")
        return tg.reshape(input, shape[:d] + self.unflattened_size + shape[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
