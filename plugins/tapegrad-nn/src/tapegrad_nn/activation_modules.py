"""``tg.nn`` modules of the activations in :mod:`tapegrad_nn.activations` (torch.nn's
class names and constructor arguments).

NOTE: PyTorch's ``inplace=`` is accepted and ignored: the result is computed out of
place (the same values; the input is not overwritten, which autograd needs anyway).

>>> import tapegrad as tg
>>> tg.nn.LeakyReLU(0.5)(tg.tensor([-2.0, 3.0])).tolist()
[-1.0, 3.0]
>>> tg.nn.PReLU(3).weight.tolist()
[0.25, 0.25, 0.25]
"""

from __future__ import annotations

import numbers

import numpy as np
import tapegrad as tg

from . import activations as A
from .nn import Module, Parameter, _layer_dtype

__all__ = ["GELU", "SiLU", "Mish", "ELU", "SELU", "CELU", "LeakyReLU", "PReLU", "ReLU6",
           "Hardtanh", "Hardsigmoid", "Hardswish", "Softplus", "Softsign", "LogSigmoid",
           "Tanhshrink", "GLU", "Softmin"]


class _Activation(Module):
    """An elementwise activation `_fn` with the keyword arguments named in `_args`."""
    _fn = None
    _args = ()

    def __init__(self, *args, inplace=False, **kwargs):
        super().__init__()
        names = self._args
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} positional "
                            f"arguments ({', '.join(names) or 'none'}), got {len(args)}")
        values = dict(self._defaults)
        values.update(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"{type(self).__name__} got an unexpected argument {k!r}")
            values[k] = v
        for k, v in values.items():
            setattr(self, k, v)
        self.inplace = bool(inplace)

    _defaults = {}

    def forward(self, input):
        fn = type(self)._fn
        if isinstance(fn, str):                 # a registered op: tg.<name>
            fn = getattr(tg, fn)
        return fn(input, **{k: getattr(self, k) for k in self._args})

    def extra_repr(self):
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in self._args)


def _activation(name, fn, doc, **defaults):
    cls = type(name, (_Activation,), {
        "_fn": fn if isinstance(fn, str) else staticmethod(fn), "_args": tuple(defaults), "_defaults": defaults,
        "__doc__": doc, "__module__": __name__})
    return cls


GELU = _activation("GELU", "gelu", "``tg.gelu(x, approximate)`` (approximate='none' or "
                   "'tanh').", approximate="none")
SiLU = _activation("SiLU", "silu", "``tg.silu(x) = x * sigmoid(x)``.")
Mish = _activation("Mish", A.mish, "``tg.mish(x) = x * tanh(softplus(x))``.")
ELU = _activation("ELU", A.elu, "``tg.elu(x, alpha)``.", alpha=1.0)
SELU = _activation("SELU", A.selu, "``tg.selu(x)``.")
CELU = _activation("CELU", A.celu, "``tg.celu(x, alpha)``.", alpha=1.0)
LeakyReLU = _activation("LeakyReLU", A.leaky_relu, "``tg.leaky_relu(x, negative_slope)``.",
                        negative_slope=0.01)
ReLU6 = _activation("ReLU6", A.relu6, "``tg.relu6(x) = clip(x, 0, 6)``.")
Hardtanh = _activation("Hardtanh", A.hardtanh, "``tg.hardtanh(x, min_val, max_val)``.",
                       min_val=-1.0, max_val=1.0)
Hardsigmoid = _activation("Hardsigmoid", A.hardsigmoid, "``tg.hardsigmoid(x)``.")
Hardswish = _activation("Hardswish", A.hardswish, "``tg.hardswish(x)``.")
Softplus = _activation("Softplus", "softplus", "``tg.softplus(x, beta, threshold)``.",
                       beta=1.0, threshold=20.0)
Softsign = _activation("Softsign", A.softsign, "``tg.softsign(x) = x / (1 + |x|)``.")
LogSigmoid = _activation("LogSigmoid", "logsigmoid", "``tg.logsigmoid(x)``.")
Tanhshrink = _activation("Tanhshrink", A.tanhshrink, "``tg.tanhshrink(x) = x - tanh(x)``.")
GLU = _activation("GLU", A.glu, "``tg.glu(x, dim)`` (dim defaults to -1).", dim=-1)
Softmin = _activation("Softmin", A.softmin, "``tg.softmin(x, dim)`` (dim defaults to the "
                      "last axis, as tg.nn.Softmax).", dim=-1)


class PReLU(Module):
    """``tg.prelu(x, weight)`` with a learnable ``weight`` of ``num_parameters`` entries
    (1, or the number of channels, axis 1 of the input), each initialised to `init`
    (0.25), as ``torch.nn.PReLU``. ``dtype`` defaults to tg.get_default_dtype().

    >>> import tapegrad as tg
    >>> m = tg.nn.PReLU()
    >>> m(tg.tensor([[-4.0, 1.0]])).tolist()
    [[-1.0, 1.0]]
    """

    def __init__(self, num_parameters=1, init=0.25, *, dtype=None, device=None):
        super().__init__()
        if (isinstance(num_parameters, bool) or not isinstance(num_parameters, numbers.Integral)
                or num_parameters < 1):
            raise ValueError(f"PReLU: num_parameters must be a positive integer, got "
                             f"{num_parameters!r}")
        dtype = _layer_dtype(dtype, "PReLU")
        self.num_parameters, self.init = int(num_parameters), float(init)
        self.weight = Parameter(tg.full((self.num_parameters,), self.init, dtype=dtype,
                                        device=device))

    def reset_parameters(self):
        """Set every entry of weight back to `init` (in place)."""
        with tg.no_grad():
            self.weight[...] = self.init

    def forward(self, input):
        shape = input.shape if hasattr(input, "shape") else np.shape(input)
        if self.num_parameters != 1 and (len(shape) < 2 or shape[1] != self.num_parameters):
            raise ValueError(f"PReLU(num_parameters={self.num_parameters}): expected input "
                             f"with {self.num_parameters} channels (axis 1), got input of "
                             f"shape {tuple(shape)}")
        return A.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"
