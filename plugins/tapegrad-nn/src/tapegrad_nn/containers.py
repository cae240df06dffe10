"""More ``tg.nn`` containers and small layers: ParameterList, ParameterDict, ModuleDict,
Bilinear (torch.nn's names, arguments and parameter shapes). (Unflatten is in
pooling_layers.py.)"""

from __future__ import annotations

import collections.abc
import math
import numbers

import numpy as np
import tapegrad as tg

from . import init
from .functional import bilinear
from .nn import Module, Parameter, _as_module, _layer_dtype, _is_parameter, _kind, _position, _state

__all__ = ["ParameterList", "ParameterDict", "ModuleDict", "Bilinear"]


class ParameterList(Module):
    """A list of parameters, registered (a plain list would hide them from
    ``parameters()``) under the names "0", "1", ...; tensors that are not parameters yet
    become ones (``Parameter(t)``). Indexing, ``len``, iteration, ``append``, ``extend``.

    >>> import tapegrad as tg
    >>> ps = tg.nn.ParameterList([tg.zeros(2), tg.ones(3)])
    >>> len(ps), [p.shape for p in ps], [n for n, _ in ps.named_parameters()]
    (2, [(2,), (3,)], ['0', '1'])
    """

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def __len__(self):
        return len(_state(self)[0])

    def __iter__(self):
        d = self.__dict__
        return iter([d[name] for name in _state(self)[0]])

    def __getitem__(self, index):
        names = list(_state(self)[0])
        if isinstance(index, slice):
            return type(self)([self.__dict__[n] for n in names[index]])
        return self.__dict__[names[_position(index, len(names), "ParameterList")]]

    def __setitem__(self, index, value):
        names = list(_state(self)[0])
        name = names[_position(index, len(names), "ParameterList")]
        setattr(self, name, _as_parameter(value, "ParameterList", index))

    def append(self, value):
        """Add `value` (a tensor) at the end. Returns self."""
        self.register_parameter(str(len(self)), _as_parameter(value, "ParameterList", len(self)))
        return self

    def extend(self, values):
        """Add every tensor of `values` at the end. Returns self."""
        for v in values:
            self.append(v)
        return self

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList has no forward(): use its parameters in "
                                  "your own module's forward()")

    def extra_repr(self):
        return "\n".join(f"({i}): Parameter of shape {p.shape} ({p.dtype})"
                         for i, p in enumerate(self))


class ParameterDict(Module):
    """A dict of parameters (string keys, insertion order), registered under their keys.
    ``pd[key]``, ``pd[key] = t``, ``del``, ``in``, ``len``, iteration over keys, ``keys``,
    ``values``, ``items``, ``update``, ``pop``.

    >>> import tapegrad as tg
    >>> pd = tg.nn.ParameterDict({"scale": tg.ones(2)})
    >>> pd["shift"] = tg.zeros(2)
    >>> list(pd), [n for n, _ in pd.named_parameters()]
    (['scale', 'shift'], ['scale', 'shift'])
    """

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        if key not in _state(self)[0]:
            raise KeyError(key)
        return self.__dict__[key]

    def __setitem__(self, key, value):
        value = _as_parameter(value, "ParameterDict", key)
        if key in _state(self)[0]:
            setattr(self, key, value)
        else:
            self.register_parameter(key, value)

    def __delitem__(self, key):
        if key not in _state(self)[0]:
            raise KeyError(key)
        delattr(self, key)

    def __contains__(self, key):
        return key in _state(self)[0]

    def __len__(self):
        return len(_state(self)[0])

    def __iter__(self):
        return iter(list(_state(self)[0]))

    def keys(self):
        """The keys, in insertion order."""
        return list(_state(self)[0])

    def values(self):
        """The parameters, in key order."""
        return [self.__dict__[k] for k in _state(self)[0]]

    def items(self):
        """(key, parameter) pairs, in key order."""
        return [(k, self.__dict__[k]) for k in _state(self)[0]]

    def pop(self, key):
        """Remove `key` and return its parameter."""
        value = self[key]
        del self[key]
        return value

    def update(self, parameters):
        """Add or replace the entries of a mapping or of (key, tensor) pairs."""
        pairs = parameters.items() if isinstance(parameters, collections.abc.Mapping) else parameters
        for key, value in pairs:
            self[key] = value

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict has no forward(): use its parameters in "
                                  "your own module's forward()")


class ModuleDict(Module):
    """A dict of sub-modules (string keys, insertion order), registered under their keys.
    ``md[key]``, ``md[key] = m``, ``del``, ``in``, ``len``, iteration over keys, ``keys``,
    ``values``, ``items``, ``update``, ``pop``.

    >>> import tapegrad as tg
    >>> heads = tg.nn.ModuleDict({"cls": tg.nn.Linear(4, 3), "reg": tg.nn.Linear(4, 1)})
    >>> heads["reg"](tg.ones((2, 4))).shape, [n for n, _ in heads.named_parameters()][:2]
    ((2, 1), ['cls.weight', 'cls.bias'])
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        if key not in _state(self)[2]:
            raise KeyError(key)
        return self.__dict__[key]

    def __setitem__(self, key, module):
        module = _as_module(module, key)
        if key in _state(self)[2]:
            setattr(self, key, module)
        else:
            self.add_module(key, module)

    def __delitem__(self, key):
        if key not in _state(self)[2]:
            raise KeyError(key)
        delattr(self, key)

    def __contains__(self, key):
        return key in _state(self)[2]

    def __len__(self):
        return len(_state(self)[2])

    def __iter__(self):
        return iter(list(_state(self)[2]))

    def keys(self):
        """The keys, in insertion order."""
        return list(_state(self)[2])

    def values(self):
        """The modules, in key order."""
        return [self.__dict__[k] for k in _state(self)[2]]

    def items(self):
        """(key, module) pairs, in key order."""
        return [(k, self.__dict__[k]) for k in _state(self)[2]]

    def pop(self, key):
        """Remove `key` and return its module."""
        value = self[key]
        del self[key]
        return value

    def update(self, modules):
        """Add or replace the entries of a mapping or of (key, module) pairs."""
        pairs = modules.items() if isinstance(modules, collections.abc.Mapping) else modules
        for key, m in pairs:
            self[key] = m

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(): call its modules in your "
                                  "own module's forward()")


def _as_parameter(value, owner, where):
    if not isinstance(value, tg.Tensor):
        raise TypeError(f"{owner}: element {where!r} is {_kind(value)}, not a tensor")
    # A tensor that is not a parameter yet becomes one (requires grad), as in PyTorch.
    return value if _is_parameter(value) else Parameter(value)


class Bilinear(Module):
    """``y = x1^T A x2 + b`` (torch.nn.Bilinear): weight (out_features, in1_features,
    in2_features), bias (out_features,), both initialised U(-1/sqrt(in1), 1/sqrt(in1))
    as PyTorch.

    >>> import tapegrad as tg
    >>> tg.nn.Bilinear(3, 4, 2)(tg.ones((5, 3)), tg.ones((5, 4))).shape
    (5, 2)
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, *,
                 dtype=None, device=None):
        super().__init__()
        for name, v in (("in1_features", in1_features), ("in2_features", in2_features),
                        ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, (numbers.Integral, np.integer)) or v < 0:
                raise ValueError(f"Bilinear: {name} must be a non-negative integer, got {v!r}")
        dtype = _layer_dtype(dtype, "Bilinear")
        self.in1_features, self.in2_features = int(in1_features), int(in2_features)
        self.out_features = int(out_features)
        self.weight = Parameter(tg.zeros((self.out_features, self.in1_features,
                                          self.in2_features), dtype, device))
        if bias:
            self.bias = Parameter(tg.zeros((self.out_features,), dtype, device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Draw weight and bias again (in place) from U(-1/sqrt(in1), 1/sqrt(in1))."""
        bound = 1.0 / math.sqrt(self.in1_features) if self.in1_features else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        input1, input2 = tg.asarray(input1), tg.asarray(input2)
        if input1.shape[-1:] != (self.in1_features,) or input2.shape[-1:] != (self.in2_features,):
            raise ValueError(f"Bilinear({self.extra_repr()}): expected inputs (..., "
                             f"{self.in1_features}) and (..., {self.in2_features}), got "
                             f"{input1.shape} and {input2.shape}")
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
