"""The normalisation layers of ``tg.nn``: LayerNorm, RMSNorm, GroupNorm, BatchNorm1d/2d,
InstanceNorm1d/2d (PyTorch's class names, constructor arguments, parameter and buffer
names and shapes, so a converted PyTorch state dict loads). The work is done by the
functions of ``tapegrad_nn.normalization``.

>>> import tapegrad as tg
>>> bn = tg.nn.BatchNorm2d(3)
>>> list(bn.state_dict())
['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
>>> bn(tg.ones((2, 3, 4, 4))).shape
(2, 3, 4, 4)
"""

from __future__ import annotations

import numbers

import numpy as np
import tapegrad as tg

from . import normalization as N
from .nn import Module, Parameter, _layer_dtype

__all__ = ["LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d",
           "InstanceNorm1d", "InstanceNorm2d"]


def _count(v, what, layer):
    if isinstance(v, bool) or not isinstance(v, (numbers.Integral, np.integer)) or v <= 0:
        raise ValueError(f"{layer}: {what} must be a positive integer, got {v!r}")
    return int(v)


_float_dtype = _layer_dtype      # None: tg.get_default_dtype()


class _Affine(Module):
    """Shared: optional ``weight`` (ones) and ``bias`` (zeros) of `shape`."""

    def _make_affine(self, shape, weight, bias, dtype, device):
        if weight:
            self.weight = Parameter(tg.ones(shape, dtype, device))
        else:
            self.register_parameter("weight", None)
        if bias:
            self.bias = Parameter(tg.zeros(shape, dtype, device))
        else:
            self.register_parameter("bias", None)

    def _check_dtype(self, x, name):
        """A float32 input to a float64 layer (or the reverse) raises, as in PyTorch,
        instead of silently promoting."""
        ref = next((t for t in (self.weight, getattr(self, "running_mean", None))
                    if t is not None), None)
        dtype = getattr(x, "dtype", None)
        if ref is not None and dtype is not None and dtype != ref.dtype:
            raise TypeError(f"{name}: input is {dtype} but the layer's parameters are "
                            f"{ref.dtype} (convert one: x.astype(...) or layer.to(dtype=...))")

    def reset_parameters(self):
        """weight = 1, bias = 0 (in place), PyTorch's initialisation."""
        with tg.no_grad():
            if self.weight is not None:
                self.weight[...] = 1
            if self.bias is not None:
                self.bias[...] = 0


class LayerNorm(_Affine):
    """``F.layer_norm`` over the trailing `normalized_shape` axes, with a learnable
    ``weight`` (ones) and ``bias`` (zeros) of that shape when ``elementwise_affine``.

    >>> import tapegrad as tg
    >>> ln = tg.nn.LayerNorm(4)
    >>> ln.weight.shape, ln(tg.ones((2, 4))).shape
    ((4,), (2, 4))
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, *,
                 dtype=None, device=None):
        super().__init__()
        self.normalized_shape = N._shape_tuple(normalized_shape, "LayerNorm")
        self.eps = float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        dtype = _float_dtype(dtype, "LayerNorm")
        self._make_affine(self.normalized_shape, self.elementwise_affine,
                          self.elementwise_affine and bias, dtype, device)

    def forward(self, x):
        _check_trailing(self, x, self.normalized_shape)
        self._check_dtype(x, self._name())
        return N.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def _name(self):
        return f"LayerNorm({self.normalized_shape})"

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, " \
               f"elementwise_affine={self.elementwise_affine}"


class RMSNorm(_Affine):
    """``F.rms_norm`` over the trailing `normalized_shape` axes, with a learnable
    ``weight`` (ones) when ``elementwise_affine``; ``eps=None`` is the machine epsilon of
    the input's dtype (PyTorch's default).

    >>> import tapegrad as tg
    >>> tg.nn.RMSNorm([2, 3])(tg.ones((4, 2, 3))).shape
    (4, 2, 3)
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, *,
                 dtype=None, device=None):
        super().__init__()
        self.normalized_shape = N._shape_tuple(normalized_shape, "RMSNorm")
        self.eps = None if eps is None else float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        dtype = _float_dtype(dtype, "RMSNorm")
        self._make_affine(self.normalized_shape, self.elementwise_affine, False, dtype, device)

    def forward(self, x):
        _check_trailing(self, x, self.normalized_shape)
        self._check_dtype(x, self._name())
        return N.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def _name(self):
        return f"RMSNorm({self.normalized_shape})"

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, " \
               f"elementwise_affine={self.elementwise_affine}"


def _check_trailing(layer, x, shape):
    xs = tuple(getattr(x, "shape", np.shape(x)))
    if len(xs) < len(shape) or xs[len(xs) - len(shape):] != shape:
        raise ValueError(f"{layer._name()}: expected input of shape (*, "
                         f"{', '.join(map(str, shape))}), got {xs}")


class GroupNorm(_Affine):
    """``F.group_norm`` with `num_groups` groups of the `num_channels` channels (axis 1),
    and per-channel ``weight`` (ones) and ``bias`` (zeros) when ``affine``.

    >>> import tapegrad as tg
    >>> tg.nn.GroupNorm(2, 4)(tg.ones((3, 4, 5))).shape
    (3, 4, 5)
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, *,
                 dtype=None, device=None, bias=True):
        super().__init__()
        self.num_groups = _count(num_groups, "num_groups", "GroupNorm")
        self.num_channels = _count(num_channels, "num_channels", "GroupNorm")
        if self.num_channels % self.num_groups:
            raise ValueError(f"GroupNorm: num_channels {self.num_channels} must be divisible "
                             f"by num_groups {self.num_groups}")
        self.eps = float(eps)
        self.affine = bool(affine)
        dtype = _float_dtype(dtype, "GroupNorm")
        self._make_affine((self.num_channels,), self.affine, self.affine and bias, dtype,
                          device)

    def forward(self, x):
        xs = tuple(getattr(x, "shape", np.shape(x)))
        if len(xs) < 2 or xs[1] != self.num_channels:
            raise ValueError(f"GroupNorm({self.num_groups}, {self.num_channels}): expected "
                             f"input of shape (N, {self.num_channels}, *), got {xs}")
        self._check_dtype(x, f"GroupNorm({self.num_groups}, {self.num_channels})")
        return N.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _NormBase(_Affine):
    """Shared by BatchNorm*/InstanceNorm*: per-channel affine and running statistics
    (buffers ``running_mean`` (zeros), ``running_var`` (ones), ``num_batches_tracked``
    (int64 0), None when ``track_running_stats`` is False, as in PyTorch)."""

    _dims = ()          # the accepted input ndims
    _layout = ""        # how the error messages write the expected shape

    def __init__(self, num_features, eps, momentum, affine, track_running_stats, dtype,
                 device, bias=True):
        super().__init__()
        layer = type(self).__name__
        self.num_features = _count(num_features, "num_features", layer)
        self.eps = float(eps)
        if momentum is not None and (isinstance(momentum, bool)
                                     or not isinstance(momentum, numbers.Real)):
            raise TypeError(f"{layer}: momentum must be a number or None, got {momentum!r}")
        self.momentum = None if momentum is None else float(momentum)
        self.affine = bool(affine)
        self.track_running_stats = bool(track_running_stats)
        dtype = _float_dtype(dtype, layer)
        c = self.num_features
        # bias=False (keyword-only, as torch's): a learnable scale without a shift
        self._make_affine((c,), self.affine, self.affine and bias, dtype, device)
        if self.track_running_stats:
            self.register_buffer("running_mean", tg.zeros((c,), dtype, device))
            self.register_buffer("running_var", tg.ones((c,), dtype, device))
            self.register_buffer("num_batches_tracked", tg.zeros((), np.int64, device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        """running_mean = 0, running_var = 1, num_batches_tracked = 0 (in place)."""
        if self.track_running_stats:
            with tg.no_grad():
                self.running_mean[...] = 0
                self.running_var[...] = 1
                self.num_batches_tracked[...] = 0

    def reset_parameters(self):
        self.reset_running_stats()
        super().reset_parameters()

    def _check_input(self, x):
        xs = tuple(getattr(x, "shape", np.shape(x)))
        name = f"{type(self).__name__}({self.num_features})"
        if len(xs) not in self._dims:
            raise ValueError(f"{name}: expected a {' or '.join(f'{d}-D' for d in self._dims)} "
                             f"input {self._layout}, got shape {xs}")
        if xs[1] != self.num_features:
            raise ValueError(f"{name}: expected input with {self.num_features} channels "
                             f"(axis 1), got {xs[1]} channels in shape {xs}")
        self._check_dtype(x, name)

    def _factor(self):
        """The momentum of this step; counts the step (num_batches_tracked += 1)."""
        if not (self.training and self.track_running_stats):
            return 0.0 if self.momentum is None else self.momentum
        with tg.no_grad():
            self.num_batches_tracked[...] = self.num_batches_tracked + 1
        if self.momentum is None:      # cumulative moving average, PyTorch's momentum=None
            # NOTE: a tensor op, not .item(): under tg.compile a Python number read from
            # the buffer would be baked into the recording (a silently wrong average).
            return 1.0 / tg.astype(self.num_batches_tracked, self.running_mean.dtype)
        return self.momentum

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, " \
               f"affine={self.affine}, track_running_stats={self.track_running_stats}"


class _BatchNorm(_NormBase):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, *, dtype=None, device=None, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype,
                         device, bias)

    def forward(self, x):
        self._check_input(x)
        factor = self._factor()
        # PyTorch: batch statistics in training, and in eval when nothing is tracked;
        # running buffers are updated only in training.
        batch_stats = self.training or self.running_mean is None
        use_buffers = not self.training or self.track_running_stats
        return N.batch_norm(x, self.running_mean if use_buffers else None,
                            self.running_var if use_buffers else None, self.weight,
                            self.bias, batch_stats, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) inputs per channel (PyTorch's
    ``BatchNorm1d``): ``train()`` normalises with the batch's statistics and updates the
    running buffers in place (``momentum=None``: cumulative average); ``eval()`` uses the
    running statistics. ``dtype`` defaults to tg.get_default_dtype(), as ``Linear``.

    >>> import tapegrad as tg
    >>> bn = tg.nn.BatchNorm1d(2, momentum=0.5)
    >>> _ = bn(tg.tensor([[1., 2.], [3., 6.]]))
    >>> bn.running_mean.tolist(), bn.running_var.tolist(), int(bn.num_batches_tracked)
    ([1.0, 2.0], [1.5, 4.5], 1)
    """
    _dims = (2, 3)
    _layout = "(N, C) or (N, C, L)"


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) inputs per channel (PyTorch's ``BatchNorm2d``;
    see ``BatchNorm1d``).

    >>> import tapegrad as tg
    >>> tg.nn.BatchNorm2d(16)(tg.ones((2, 8, 5, 5)))
    Traceback (most recent call last):
    ...
    ValueError: BatchNorm2d(16): expected input with 16 channels (axis 1), got 8 channels ...
    """
    _dims = (4,)
    _layout = "(N, C, H, W)"


class _InstanceNorm(_NormBase):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, *, dtype=None, device=None, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype,
                         device, bias)

    def forward(self, x):
        self._check_input(x)
        # NOTE: as PyTorch's InstanceNorm: num_batches_tracked is never counted, and
        # momentum=None means 0.0 (not a cumulative average).
        factor = 0.0 if self.momentum is None else self.momentum
        return N.instance_norm(x, self.running_mean, self.running_var, self.weight,
                               self.bias, self.training or not self.track_running_stats,
                               factor, self.eps)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of (N, C, L) inputs (PyTorch's ``InstanceNorm1d``; affine
    and running statistics off by default).

    NOTE: PyTorch also takes an unbatched (C, L) input; this layer requires the batch axis.
    """
    _dims = (3,)
    _layout = "(N, C, L)"


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of (N, C, H, W) inputs (PyTorch's ``InstanceNorm2d``)."""
    _dims = (4,)
    _layout = "(N, C, H, W)"
