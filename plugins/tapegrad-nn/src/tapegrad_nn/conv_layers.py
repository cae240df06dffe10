"""The convolution layers of ``tg.nn``: Conv1d/2d/3d and ConvTranspose1d/2d, with
``torch.nn``'s constructor arguments, parameter names and shapes (``weight`` (out,
in/groups, *kernel) for convolutions, (in, out/groups, *kernel) for transposed ones;
``bias`` (out,)) and PyTorch's default initialisation, so that a PyTorch ``state_dict``
converted to arrays loads with ``load_state_dict``.

>>> import tapegrad as tg
>>> conv = tg.nn.Conv2d(3, 16, 3, padding=1)
>>> conv.weight.shape, conv.bias.shape
((16, 3, 3, 3), (16,))
>>> conv(tg.ones((2, 3, 8, 8))).shape
(2, 16, 8, 8)
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import tapegrad as tg

from . import conv as F
from . import init
from .nn import Module, Parameter, _layer_dtype

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d"]


def _positive(layer, name, v):
    if isinstance(v, bool) or not isinstance(v, (numbers.Integral, np.integer)) or v < 1:
        raise ValueError(f"{layer}: {name} must be a positive integer, got {v!r}")
    return int(v)


class _ConvNd(Module):
    _nd = 0
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 groups, bias, padding_mode, output_padding, dtype, device):
        super().__init__()
        layer, nd = type(self).__name__, self._nd
        self.in_channels = _positive(layer, "in_channels", in_channels)
        self.out_channels = _positive(layer, "out_channels", out_channels)
        self.groups = _positive(layer, "groups", groups)
        for name, v in (("in_channels", self.in_channels), ("out_channels", self.out_channels)):
            if v % self.groups:
                raise ValueError(f"{layer}: {name}={v} must be divisible by groups={self.groups}")
        if padding_mode != "zeros":
            # NOTE: PyTorch also has 'reflect', 'replicate' and 'circular'; refused, never
            # silently padded with zeros.
            raise ValueError(f"{layer}: padding_mode={padding_mode!r} is not supported "
                             f"(only 'zeros')")
        self.padding_mode = padding_mode
        self.kernel_size = F._ints(layer, "kernel_size", kernel_size, nd, 1)
        self.stride = F._ints(layer, "stride", stride, nd, 1)
        self.dilation = F._ints(layer, "dilation", dilation, nd, 1)
        if isinstance(padding, str) and not self._transposed:
            if padding not in ("same", "valid"):
                raise ValueError(f"{layer}: padding must be an int, a tuple, 'same' or "
                                 f"'valid', got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{layer}: padding='same' needs stride 1, got {self.stride}")
            self.padding = padding
        else:
            self.padding = F._ints(layer, "padding", padding, nd, 0)
        self.output_padding = F._ints(layer, "output_padding", output_padding, nd, 0)
        dtype = _layer_dtype(dtype, layer)
        if self._transposed:
            shape = (self.in_channels, self.out_channels // self.groups) + self.kernel_size
        else:
            shape = (self.out_channels, self.in_channels // self.groups) + self.kernel_size
        self.weight = Parameter(tg.zeros(shape, dtype, device))
        if bias:
            self.bias = Parameter(tg.zeros((self.out_channels,), dtype, device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Draw weight and bias again (in place), as PyTorch: weight with
        ``kaiming_uniform_(a=sqrt(5))`` and bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
        where fan_in = weight.shape[1] * prod(kernel_size); both bounds are
        1/sqrt(fan_in)."""
        fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            b = 1.0 / math.sqrt(fan_in)
            init.uniform_(self.bias, -b, b)

    def _check_input(self, x):
        x = tg.asarray(x)
        nd = self._nd
        if x.ndim in (nd + 1, nd + 2) and x.shape[x.ndim - nd - 1] != self.in_channels:
            raise ValueError(f"{type(self).__name__}({self.extra_repr()}): expected input with "
                             f"in_channels={self.in_channels} but got input of shape "
                             f"{x.shape} ({x.shape[x.ndim - nd - 1]} channels)")
        return x

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}"
        if self.stride != (1,) * self._nd:
            s += f", stride={self.stride}"
        if self.padding != (0,) * self._nd:
            s += f", padding={self.padding!r}"
        if self._transposed and self.output_padding != (0,) * self._nd:
            s += f", output_padding={self.output_padding}"
        if self.dilation != (1,) * self._nd:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.weight.dtype != np.float64:
            s += f", dtype={self.weight.dtype}"
        return s


class _Conv(_ConvNd):
    _fn = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, 0, dtype, device)

    def forward(self, x):
        return type(self)._fn(self._check_input(x), self.weight, self.bias, self.stride,
                              self.padding, self.dilation, self.groups)


class _ConvTranspose(_ConvNd):
    _transposed = True
    _fn = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, dtype, device)
        if any(op >= s for op, s in zip(self.output_padding, self.stride)):
            raise ValueError(f"{type(self).__name__}: output_padding {self.output_padding} "
                             f"must be smaller than stride {self.stride}")

    def forward(self, x):
        return type(self)._fn(self._check_input(x), self.weight, self.bias, self.stride,
                              self.padding, self.output_padding, self.groups, self.dilation)


class Conv1d(_Conv):
    """1-d convolution layer over (N, C, L) inputs: ``tg.conv1d`` with a learned ``weight``
    (out_channels, in_channels/groups, k) and ``bias`` (out_channels,), as ``torch.nn.Conv1d``
    (``dtype`` defaults to tg.get_default_dtype(); padding_mode 'zeros' only).

    >>> import tapegrad as tg
    >>> tg.nn.Conv1d(2, 4, 3, padding="same")(tg.ones((5, 2, 10))).shape
    (5, 4, 10)
    """
    _nd, _fn = 1, staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-d convolution layer over (N, C, H, W) inputs, as ``torch.nn.Conv2d``: weight
    (out_channels, in_channels/groups, kH, kW), bias (out_channels,).

    >>> import tapegrad as tg
    >>> tg.nn.Conv2d(3, 8, (3, 5), stride=2, bias=False)(tg.ones((1, 3, 9, 9))).shape
    (1, 8, 4, 3)
    """
    _nd, _fn = 2, staticmethod(F.conv2d)


class Conv3d(_Conv):
    """3-d convolution layer over (N, C, D, H, W) inputs, as ``torch.nn.Conv3d``.

    >>> import tapegrad as tg
    >>> tg.nn.Conv3d(1, 2, 2)(tg.ones((1, 1, 3, 3, 3))).shape
    (1, 2, 2, 2, 2)
    """
    _nd, _fn = 3, staticmethod(F.conv3d)


class ConvTranspose1d(_ConvTranspose):
    """1-d transposed convolution layer, as ``torch.nn.ConvTranspose1d``: weight
    (in_channels, out_channels/groups, k), bias (out_channels,).

    >>> import tapegrad as tg
    >>> tg.nn.ConvTranspose1d(4, 2, 3, stride=2)(tg.ones((1, 4, 5))).shape
    (1, 2, 11)
    """
    _nd, _fn = 1, staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTranspose):
    """2-d transposed convolution layer, as ``torch.nn.ConvTranspose2d``: weight
    (in_channels, out_channels/groups, kH, kW), bias (out_channels,).

    >>> import tapegrad as tg
    >>> up = tg.nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)
    >>> up(tg.ones((1, 8, 5, 5))).shape
    (1, 4, 10, 10)
    """
    _nd, _fn = 2, staticmethod(F.conv_transpose2d)
