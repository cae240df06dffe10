"""``tg.nn``: modules in the style of ``torch.nn``, computed with tapegrad ops.

A :class:`Module` registers what is assigned to it: a leaf tensor with
``requires_grad=True`` (or one made by :func:`Parameter`) becomes a *parameter*, a Module a
*sub-module*; ``register_buffer`` adds state that is saved but not trained. From that come
``parameters()``, ``named_parameters()`` (dotted names like ``"0.weight"``),
``state_dict()`` / ``load_state_dict()``, ``train()`` / ``eval()`` and ``zero_grad()``.

Layers follow PyTorch's names and signatures (``Linear(in_features, out_features)``,
``Dropout(p)``, ``Softmax(dim)``, ``Flatten(start_dim, end_dim)``); dtypes follow NumPy:
parameters are float64 (``tg.get_default_dtype()``, which ``tg.set_default_dtype``
changes) unless a layer is given ``dtype=`` (``tg.float32``).
``tg.nn.functional`` is PyTorch's ``F`` (``F.cross_entropy is tg.cross_entropy``).

>>> import tapegrad as tg
>>> tg.manual_seed(0)
>>> model = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Tanh(), tg.nn.Linear(8, 3))
>>> [name for name, _ in model.named_parameters()]
['0.weight', '0.bias', '2.weight', '2.bias']
>>> x, labels = tg.random.randn(5, 4), tg.tensor([0, 2, 1, 1, 0])
>>> loss = tg.cross_entropy(model(x), labels)
>>> loss.backward()
>>> model[0].weight.grad.shape
(8, 4)
>>> model.zero_grad(); model[0].weight.grad is None
True
"""

from __future__ import annotations

import collections
import collections.abc
import math
import numbers
import weakref

import numpy as np
import tapegrad as tg
from tapegrad._compile import add_external_guard
from tapegrad._creation import default_float_dtype

from . import functional
from . import init, utils  # tg.nn.init, tg.nn.utils
from .functional import REDUCTIONS

__all__ = [
    "Parameter", "Module", "Sequential", "ModuleList", "Linear", "Identity", "Flatten",
    "ReLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Dropout", "CrossEntropyLoss",
    "MSELoss", "BCEWithLogitsLoss", "IncompatibleKeys", "functional",
    "init", "utils",
]

IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
IncompatibleKeys.__doc__ = "What load_state_dict(strict=False) did not match: two lists of keys."


# ---------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------

# Tensors made by Parameter(), so that Parameter(t, requires_grad=False) (a frozen
# parameter) still registers. Keyed by id() with a weak reference to check identity.
# NOTE: not a WeakSet: looking a tensor up there compares it with `==`, which is
# elementwise for tensors.
_MARKED: dict[int, weakref.ref] = {}


def _forget(key):
    def callback(_ref):
        _MARKED.pop(key, None)
    return callback


def Parameter(data, requires_grad=True):  # noqa: N802 (PyTorch's name)
    """`data` as a parameter: a leaf tensor that a Module registers when it is assigned.

    A tensor is used as it is when it already is a leaf that requires grad; any other
    tensor is detached (the parameter shares its storage, as in PyTorch); arrays, lists and
    numbers are copied. ``requires_grad=False`` makes a frozen parameter: still registered,
    listed and saved, but not trained.

    >>> import tapegrad as tg
    >>> p = tg.nn.Parameter(tg.zeros(3))
    >>> p.is_leaf, p.requires_grad
    (True, True)
    """
    if isinstance(data, tg.Tensor):
        if data.is_leaf and data.requires_grad == requires_grad and (
                requires_grad or _is_marked(data)):
            return data
        p = data.detach()
    else:
        p = tg.tensor(data)
    p.requires_grad = requires_grad
    key = id(p)
    _MARKED[key] = weakref.ref(p, _forget(key))
    return p


def _is_marked(t):
    ref = _MARKED.get(id(t))
    return ref is not None and ref() is t


def _is_parameter(value):
    return isinstance(value, tg.Tensor) and (
        (value.requires_grad and value.is_leaf) or _is_marked(value))


# ---------------------------------------------------------------------------------------
# Module
# ---------------------------------------------------------------------------------------

# Note: [where a module keeps its state]
# Parameters, buffers and sub-modules live in the instance __dict__ like any attribute, so
# `self.weight` in forward() is a plain attribute lookup. Three ordered name sets
# (_parameters, _buffers, _modules: name -> None) record what each name is; __setattr__
# and __delattr__ keep them in step. copy.deepcopy(module) copies both consistently.

class Module:
    """Base class of every layer and model: subclass it, assign layers and parameters in
    ``__init__`` and write ``forward``; calling the module calls ``forward``.

    >>> import tapegrad as tg
    >>> class Affine(tg.nn.Module):
    ...     def __init__(self, n):
    ...         super().__init__()
    ...         self.scale = tg.ones(n, requires_grad=True)     # a parameter
    ...         self.shift = tg.nn.Parameter(tg.zeros(n))        # a parameter too
    ...     def forward(self, x):
    ...         return x * self.scale + self.shift
    >>> m = Affine(2)
    >>> m(tg.tensor([1.0, 2.0]))
    tensor([1., 2.], grad_fn=<add>)
    >>> list(m.state_dict())
    ['scale', 'shift']
    """

    training = True

    def __init__(self):
        _state(self)

    # -- calling -------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f"{type(self).__name__} has no forward(): a Module subclass must define "
            f"forward(self, ...), which calling the module runs")

    def __call__(self, *args, **kwargs):
        # Under tg.compile a forward that branches on self.training (Dropout does) is baked
        # into the recording, and so are the parameter objects it read: train()/eval(), or
        # a parameter, buffer or sub-module replaced by another object (to(dtype),
        # m.weight = ...), must make the next call record again.
        tg.compile_guard(self._compiled_state)
        d = self.__dict__
        pre, post = d.get("_forward_pre_hooks"), d.get("_forward_hooks")
        if not pre and not post:
            return self.forward(*args, **kwargs)
        for entry in list(pre or ()):
            if entry.with_kwargs:
                result = entry.hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            f"forward pre-hook {entry.hook!r} of {type(self).__name__} "
                            f"(with_kwargs=True) must return None or a tuple (args, kwargs), "
                            f"got {_kind(result)}")
                    args, kwargs = result
            else:
                result = entry.hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        out = self.forward(*args, **kwargs)
        for entry in list(post or ()):
            result = (entry.hook(self, args, kwargs, out) if entry.with_kwargs
                      else entry.hook(self, args, out))
            if result is not None:
                out = result
        return out

    # -- hooks ---------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` before every ``forward``; it may return new args (a
        tuple, or one value that becomes a 1-tuple) or None to keep them. With
        ``with_kwargs=True`` it is ``hook(module, args, kwargs)`` returning None or
        ``(args, kwargs)``. Returns a handle whose ``remove()`` unregisters it.

        >>> import tapegrad as tg
        >>> lin = tg.nn.Linear(2, 2)
        >>> h = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
        >>> lin(tg.ones((1, 2))).tolist() == [lin.bias.tolist()]
        True
        >>> h.remove()
        """
        return _add_hook(self, "_forward_pre_hooks", hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args, output)`` after every ``forward`` (``hook(module,
        args, kwargs, output)`` with ``with_kwargs=True``); a value it returns replaces
        the output. Returns a handle whose ``remove()`` unregisters it.

        >>> import tapegrad as tg
        >>> seen = []
        >>> relu = tg.nn.ReLU()
        >>> h = relu.register_forward_hook(lambda m, args, out: seen.append(out.shape))
        >>> _ = relu(tg.ones(3)); seen
        [(3,)]
        >>> h.remove(); _ = relu(tg.ones(3)); seen
        [(3,)]
        """
        return _add_hook(self, "_forward_hooks", hook, prepend, with_kwargs)

    def _compiled_state(self):
        """Training mode, and when an attribute of this module or of any module below it
        (a parameter, buffer, sub-module or plain value) was last set to another object or
        removed (every such write goes through __setattr__, _put or _unregister, which
        count it). See Note: [tg.compile's module guard]."""
        return self.training, _subtree_stamp(self)

    # -- registration --------------------------------------------------------------------
    def __setattr__(self, name, value):
        params, buffers, modules = _state(self)
        if isinstance(value, Module):
            if name not in modules:             # a new name goes last; a known one stays
                _unregister(self, name)
                modules[name] = None
            _put(self, name, value)
        elif _is_parameter(value):
            if name not in params:
                _unregister(self, name)
                params[name] = None
            _put(self, name, value)
        elif name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign {_kind(value)} to '{name}' of {type(self).__name__}: it is "
                    f"a parameter, so it takes a leaf tensor with requires_grad=True "
                    f"(tg.nn.Parameter(t)) or None; delete the attribute first to reuse the name")
            _put(self, name, None)
        elif name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign {_kind(value)} to '{name}' of {type(self).__name__}: it is "
                    f"a sub-module, so it takes a Module or None")
            _put(self, name, None)
        elif name in buffers:
            if value is not None and not isinstance(value, tg.Tensor):
                raise TypeError(
                    f"cannot assign {_kind(value)} to '{name}' of {type(self).__name__}: it is "
                    f"a buffer, so it takes a tensor or None")
            _put(self, name, value)
        else:
            # Public plain attributes (Dropout's p, a flag) may steer forward too: a new
            # value counts as a change for tg.compile's guard (an equal one does not).
            # Not `training` (in the guard by value, so train/eval can switch back), and not
            # private ones: library bookkeeping (DDP's counters) changes on every step.
            changed = (name != "training" and not name.startswith("_")
                       and not _same_value(self.__dict__.get(name, _UNSET), value))
            object.__setattr__(self, name, value)
            if changed:
                _count_entry_change(self)

    def __delattr__(self, name):
        _unregister(self, name)
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        """Add `param` (a tensor, made a parameter with ``Parameter``, or None) as `name`."""
        _check_new_name(self, name, "parameter")
        if param is None:
            _unregister(self, name)
            _state(self)[0][name] = None
            _put(self, name, None)
        else:
            if not isinstance(param, tg.Tensor):
                raise TypeError(f"register_parameter: '{name}' must be a tensor or None, got "
                                f"{_kind(param)}")
            setattr(self, name, param if _is_parameter(param) else Parameter(param))

    def register_buffer(self, name, tensor, persistent=True):
        """Add `tensor` (or None) as state that is not trained: listed by ``buffers()``,
        saved by ``state_dict()`` unless ``persistent=False``, moved by ``to()``.

        >>> import tapegrad as tg
        >>> m = tg.nn.Module()
        >>> m.register_buffer("steps", tg.zeros(()))
        >>> list(m.state_dict()), list(m.parameters())
        (['steps'], [])
        """
        _check_new_name(self, name, "buffer")
        if tensor is not None and not isinstance(tensor, tg.Tensor):
            raise TypeError(f"register_buffer: '{name}' must be a tensor or None, got {_kind(tensor)}")
        _unregister(self, name)
        _state(self)[1][name] = None
        _put(self, name, tensor)
        if persistent:
            self.__dict__.setdefault("_non_persistent", set()).discard(name)
        else:
            self.__dict__.setdefault("_non_persistent", set()).add(name)

    def add_module(self, name, module):
        """Add `module` (or None) as the sub-module `name` (what ``Sequential`` uses)."""
        _check_new_name(self, name, "module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: '{name}' must be a Module or None, got {_kind(module)}")
        _unregister(self, name)
        _state(self)[2][name] = None
        _put(self, name, module)

    def register_module(self, name, module):
        """``add_module`` under PyTorch's other name."""
        self.add_module(name, module)

    # -- traversal -----------------------------------------------------------------------
    def named_children(self):
        """(name, module) for each direct sub-module, in the order they were assigned."""
        d = self.__dict__
        seen = set()
        for name in _state(self)[2]:
            m = d[name]
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        """The direct sub-modules."""
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix="", remove_duplicate=True, _memo=None):
        """(dotted name, module) for this module ("") and every module below it, depth
        first, each shared module once."""
        memo = set() if _memo is None else _memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        d = self.__dict__
        for name in _state(self)[2]:
            m = d[name]
            if m is not None:
                yield from m.named_modules(f"{prefix}.{name}" if prefix else name,
                                           remove_duplicate, memo)

    def modules(self):
        """This module and every module below it."""
        for _, m in self.named_modules():
            yield m

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, parameter) pairs: each module's own parameters in the order they
        were assigned, then those of its sub-modules; a shared parameter appears once.

        >>> import tapegrad as tg
        >>> net = tg.nn.Sequential(tg.nn.Linear(2, 3), tg.nn.ReLU(), tg.nn.Linear(3, 1))
        >>> [(name, p.shape) for name, p in net.named_parameters()]
        [('0.weight', (3, 2)), ('0.bias', (3,)), ('2.weight', (1, 3)), ('2.bias', (1,))]
        """
        yield from self._named_members(0, prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        """The parameters, in ``named_parameters()`` order (what an optimizer takes)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, buffer) pairs, in the order of ``named_parameters``."""
        yield from self._named_members(1, prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        """The buffers (tensors registered with ``register_buffer``)."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def _named_members(self, kind, prefix, recurse, remove_duplicate):
        modules = self.named_modules(prefix, remove_duplicate) if recurse else [(prefix, self)]
        seen = set()
        for mprefix, m in modules:
            d = m.__dict__
            for name in _state(m)[kind]:
                value = d[name]
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield (f"{mprefix}.{name}" if mprefix else name), value

    def get_submodule(self, target):
        """The sub-module at the dotted path `target` ("" is this module)."""
        m = self
        for part in target.split(".") if target else ():
            if part not in _state(m)[2] or m.__dict__[part] is None:
                raise AttributeError(
                    f"{type(m).__name__} has no sub-module '{part}' (looking up '{target}')")
            m = m.__dict__[part]
        return m

    def apply(self, fn):
        """Call ``fn(module)`` on every sub-module (children first) and this one; returns
        self (PyTorch's idiom for custom initialisation)."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- state -----------------------------------------------------------------------------
    def state_dict(self, prefix="", keep_vars=False):
        """An ordered dict of dotted name -> tensor for every parameter and persistent
        buffer (each module's own, then its sub-modules'). The values are *copies*
        (detached, requires_grad False), so a state dict is a snapshot that later training
        steps do not change; ``keep_vars=True`` gives the live tensors instead.

        >>> import tapegrad as tg
        >>> lin = tg.nn.Linear(3, 2)
        >>> sd = lin.state_dict()
        >>> list(sd), sd["weight"].shape, sd["weight"].requires_grad
        (['weight', 'bias'], (2, 3), False)
        >>> lin.load_state_dict(sd)
        IncompatibleKeys(missing_keys=[], unexpected_keys=[])
        """
        out = collections.OrderedDict()
        self._save_to(out, prefix, keep_vars)
        return out

    def _save_to(self, out, prefix, keep_vars):
        d = self.__dict__
        params, buffers, modules = _state(self)
        skip = d.get("_non_persistent", ())
        for name in list(params) + [b for b in buffers if b not in skip]:
            value = d[name]
            if value is not None:
                out[prefix + name] = value if keep_vars else _snapshot(value)
        for name in modules:
            m = d[name]
            if m is not None:
                m._save_to(out, f"{prefix}{name}.", keep_vars)

    def load_state_dict(self, state_dict, strict=True):
        """Copy the values of `state_dict` into this module's parameters and buffers, in
        place (the tensors stay the same objects, so an optimizer built on them keeps
        working). Values may be tensors, arrays or nested lists; they are converted to each
        parameter's dtype and device.

        With ``strict=True`` (the default) the keys must match ``state_dict()`` exactly.
        Any missing or unexpected key, or a value whose shape differs from its parameter's
        (also with ``strict=False``), raises a RuntimeError listing every problem, and
        nothing is copied. Returns ``IncompatibleKeys(missing_keys, unexpected_keys)``.
        """
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError(f"load_state_dict: expected a mapping of name -> tensor, got "
                            f"{_kind(state_dict)}")
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: " + ", ".join(map(repr, unexpected)))
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(map(repr, missing)))
        for name, dst in own.items():
            if name not in state_dict:
                continue
            src = state_dict[name]
            shape = tuple(src.shape) if hasattr(src, "shape") else np.shape(src)
            if shape != dst.shape:
                errors.append(
                    f"size mismatch for {name!r}: copying a value of shape {shape} from the "
                    f"state dict, but the tensor in the module has shape {dst.shape}")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n  "
                               + "\n  ".join(errors))
        with tg.no_grad():
            for name, dst in own.items():
                if name in state_dict:
                    src = state_dict[name]
                    if isinstance(src, tg.Tensor):
                        src = src.detach().to(dst.device)
                    else:
                        src = tg.asarray(np.asarray(src), device=dst.device)
                    dst[...] = src
        return IncompatibleKeys(missing, unexpected)

    # -- modes and gradients -------------------------------------------------------------
    def train(self, mode=True):
        """Set training mode (``mode=True``) or evaluation mode on this module and every
        sub-module; it changes what ``Dropout`` does. Returns self.

        >>> import tapegrad as tg
        >>> net = tg.nn.Sequential(tg.nn.Dropout(0.5))
        >>> net.eval().training, net[0].training
        (False, False)
        """
        if not isinstance(mode, bool):
            raise TypeError(f"train: mode must be a bool, got {_kind(mode)}")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        """Evaluation mode: ``train(False)``. Returns self."""
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        """Reset the gradient of every parameter: to None (the default, as in PyTorch), or
        to zeros with ``set_to_none=False``."""
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad = tg.zeros_like(p.grad)

    def requires_grad_(self, requires_grad=True):
        """Freeze (``False``) or unfreeze every parameter. Returns self."""
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    # -- devices and dtypes --------------------------------------------------------------
    def to(self, device=None, dtype=None):
        """Move parameters and buffers to `device` and/or convert their floating-point
        values to `dtype`. Parameters are converted IN PLACE, as in PyTorch: each stays
        the same object (so an optimizer built before ``model.float()`` keeps training the
        model), with its requires_grad, and its gradient converted too. Buffers are
        replaced by converted tensors. Returns self.

        As in torch, ``to(dtype)``, ``to(device)``, ``to(device, dtype)`` and
        ``to(tensor)`` (that tensor's device and dtype) all work.

        >>> import tapegrad as tg
        >>> lin = tg.nn.Linear(2, 2)
        >>> w = lin.weight
        >>> lin.to(tg.float32).weight is w, w.dtype
        (True, dtype('float32'))
        """
        if isinstance(device, tg.Tensor):
            if dtype is not None:
                raise TypeError("Module.to: a tensor gives both device and dtype; do not pass "
                                "dtype= as well")
            device, dtype = device.device, device.dtype
        if device is not None and not isinstance(device, (str, tg.Device)):
            if dtype is not None:
                raise TypeError(f"Module.to: dtype given twice ({device!r} and dtype={dtype!r})")
            device, dtype = None, device
        dev = tg.device(device) if device is not None else None
        dtype = np.dtype(dtype) if dtype is not None else None
        if dtype is not None and dtype.kind != "f":
            raise TypeError(f"Module.to: dtype must be a floating-point type, got {dtype}")

        def convert(t):
            new = t
            if dev is not None and t.device != dev:
                new = new.detach().to(dev)
            if dtype is not None and t.dtype.kind == "f" and t.dtype != dtype:
                new = new.detach().astype(dtype)
            return new

        for m in self.modules():
            params, buffers, _ = _state(m)
            changed = False
            for name in list(params) + list(buffers):
                t = m.__dict__[name]
                if t is None:
                    continue
                new = convert(t)
                if new is t:
                    continue
                if name in params:
                    grad = t.grad
                    with tg.no_grad():
                        t._set_data_(new)
                        if grad is not None:
                            t.grad = convert(grad)
                    changed = True      # the same object, another array: tg.compile records again
                else:
                    _put(m, name, new)
            if changed:
                _count_entry_change(m)
        return self

    def cpu(self):
        """``to("cpu")``."""
        return self.to("cpu")

    def cuda(self):
        """``to("cuda")`` (needs tapegrad-cuda)."""
        return self.to("cuda")

    def float(self):
        """Parameters and buffers as float32: ``to(dtype=tg.float32)``."""
        return self.to(dtype=np.float32)

    def double(self):
        """Parameters and buffers as float64: ``to(dtype=tg.float64)``."""
        return self.to(dtype=np.float64)

    # -- printing --------------------------------------------------------------------------
    def extra_repr(self):
        """The text inside this module's parentheses in repr(); layers override it."""
        return ""

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines.extend(extra.split("\n"))
        for name, m in ((n, self.__dict__[n]) for n in _state(self)[2]):
            body = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        if not lines:
            return f"{type(self).__name__}()"
        if len(lines) == 1 and not _state(self)[2]:
            return f"{type(self).__name__}({lines[0]})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


class _HookEntry:
    """One registered forward (pre-)hook; compared by identity, so that a handle removes
    its own registration even when the same function is registered twice."""

    __slots__ = ("hook", "with_kwargs")

    def __init__(self, hook, with_kwargs):
        self.hook, self.with_kwargs = hook, with_kwargs


class _HookList(list):
    """A module's hooks; removing one counts as a change for tg.compile's guard (a
    recording made with a hook must not replay without it)."""

    def __init__(self, module):
        super().__init__()
        self._module = weakref.ref(module)

    def remove(self, entry):
        super().remove(entry)
        module = self._module()
        if module is not None:
            _count_entry_change(module)

    def __deepcopy__(self, memo):
        # A deep copy of the module gets its own list, bound to the copy (already in the
        # memo while its __dict__ is copied); the hook functions are shared.
        new = _HookList.__new__(_HookList)
        list.extend(new, self)
        module = self._module()
        copied = memo.get(id(module)) if module is not None else None
        new._module = weakref.ref(copied) if copied is not None else (lambda: None)
        return new


def _add_hook(module, attr, hook, prepend, with_kwargs):
    if not callable(hook):
        raise TypeError(f"{attr[1:-1].replace('_', ' ')}: the hook must be callable, got "
                        f"{_kind(hook)}")
    d = module.__dict__
    hooks = d.get(attr)
    if hooks is None:
        hooks = d[attr] = _HookList(module)
    entry = _HookEntry(hook, bool(with_kwargs))
    if prepend:
        hooks.insert(0, entry)
    else:
        hooks.append(entry)
    _count_entry_change(module)
    return tg.RemovableHandle(hooks, entry)


def _state(module):
    """The (parameters, buffers, modules) name sets of `module`, made on first use, so a
    subclass that forgot ``super().__init__()`` still works."""
    d = module.__dict__
    try:
        return d["_parameters"], d["_buffers"], d["_modules"]
    except KeyError:
        d.setdefault("_parameters", {})
        d.setdefault("_buffers", {})
        d.setdefault("_modules", {})
        return d["_parameters"], d["_buffers"], d["_modules"]


def _unregister(module, name):
    for names in _state(module):
        names.pop(name, None)
    _count_entry_change(module)


_UNSET = object()


def _same_value(old, new):
    """The same object, or an equal number or string (p = 0.5 set twice)."""
    return old is new or (type(old) is type(new) and isinstance(new, (int, float, str))
                          and old == new)


def _put(module, name, value):
    """Set parameter, buffer or sub-module `name` (already registered) to `value`."""
    module.__dict__[name] = value
    _count_entry_change(module)
    if isinstance(value, (tg.Tensor, Module)):
        _note_owner(value, module)


# Note: [tg.compile's module guard]
# A recording reads the parameter objects it saw. A module's guard (Module._compiled_state)
# makes the next call record again when an entry of the module *or of any module below
# it* changed: the modules a forward reads without calling them (a ModuleList it iterates,
# `self.emb.weight` read for weight tying) are below a module it calls. Each change takes
# a stamp from one global clock; a subtree's stamp is the largest below it, so it grows
# on any change there, and it is recomputed only when the clock moved (O(1) per guard
# otherwise). A tensor the function reads straight from a module that it does not call
# at all (`x @ emb.weight.T`, or `for layer in layers:` over a ModuleList, in a plain
# function) adds the guard of the outermost module holding it when it records
# (_module_guards_for, via tg.compile's add_external_guard).
_ENTRY_CLOCK = [0]


def _count_entry_change(module):
    # Read by Module._compiled_state: tg.compile records again after such a change.
    d = module.__dict__
    d["_entries_version"] = d.get("_entries_version", 0) + 1
    _ENTRY_CLOCK[0] += 1
    d["_entries_stamp"] = _ENTRY_CLOCK[0]


def _subtree_stamp(module):
    d = module.__dict__
    clock = _ENTRY_CLOCK[0]
    cached = d.get("_subtree_stamp")
    if cached is not None and cached[0] == clock:
        return cached[1]
    stamp = max(m.__dict__.get("_entries_stamp", 0) for m in module.modules())
    d["_subtree_stamp"] = (clock, stamp)
    return stamp


# id(tensor or module) -> (weak reference to it, [weak references to the modules holding
# it]). NOTE: a deepcopy of a module is not in it, so its guard covers only its own subtree.
_OWNERS: dict[int, tuple] = {}


def _note_owner(t, module):
    key = id(t)
    entry = _OWNERS.get(key)
    if entry is None or entry[0]() is not t:
        def forget(ref, key=key):
            if key in _OWNERS and _OWNERS[key][0] is ref:
                del _OWNERS[key]
        entry = _OWNERS[key] = (weakref.ref(t, forget), [])
    if not any(r() is module for r in entry[1]):
        entry[1].append(weakref.ref(module))


def _owners_of(obj):
    entry = _OWNERS.get(id(obj))
    if entry is None or entry[0]() is not obj:
        return []
    return [m for m in (r() for r in entry[1]) if m is not None]


def _roots_of(obj):
    """The outermost modules that hold `obj` (a tensor or a module), through any chain."""
    roots, seen, todo = [], set(), _owners_of(obj)
    while todo:
        m = todo.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        up = _owners_of(m)
        if up:
            todo.extend(up)
        else:
            roots.append(m)
    return roots


def _module_guards_for(tensors, guard_fns):
    """The guards of the outermost modules that hold `tensors` (read from outside by a
    recording) and whose subtree no guard in `guard_fns` covers already."""
    covered = set()
    for fn in guard_fns:
        m = getattr(fn, "__self__", None)
        if isinstance(m, Module) and getattr(fn, "__func__", None) is Module._compiled_state:
            covered.update(id(x) for x in m.modules())
    out = []
    for t in tensors:
        for m in _roots_of(t):
            if id(m) not in covered:
                covered.update(id(x) for x in m.modules())
                out.append(m._compiled_state)
    return out


add_external_guard(_module_guards_for)


def _check_new_name(module, name, what):
    if not isinstance(name, str):
        raise TypeError(f"{what} name must be a string, got {_kind(name)}")
    if not name or "." in name:
        raise KeyError(f"{what} name must be non-empty and contain no '.', got {name!r}")
    if name in module.__dict__ and not any(name in names for names in _state(module)):
        raise KeyError(f"attribute '{name}' already exists on {type(module).__name__}")
    if hasattr(type(module), name):
        raise KeyError(f"'{name}' is an attribute of the class {type(module).__name__}")


def _kind(value):
    if isinstance(value, tg.Tensor):
        what = "a non-leaf tensor" if not value.is_leaf else (
            "a tensor that does not require grad" if not value.requires_grad else "a tensor")
        return f"{what} (shape {value.shape}, {value.dtype})"
    name = type(value).__name__
    return f"{'an' if name[0] in 'AEIOUaeiou' else 'a'} {name}"


def _snapshot(t):
    """A detached copy of `t` on its device (the value of a state dict entry)."""
    with tg.no_grad():
        return tg.copy(t.detach())


# ---------------------------------------------------------------------------------------
# Containers
# ---------------------------------------------------------------------------------------

class _ModuleSequence(Module):
    """What Sequential and ModuleList share: their sub-modules in order, as a sequence."""

    def _sliced(self, names):
        raise NotImplementedError

    def __len__(self):
        return len(_state(self)[2])

    def __iter__(self):
        d = self.__dict__
        return iter([d[name] for name in _state(self)[2]])

    def __getitem__(self, index):
        names = list(_state(self)[2])
        if isinstance(index, slice):
            return self._sliced(names[index])
        return self.__dict__[names[_position(index, len(names), type(self).__name__)]]

    def __setitem__(self, index, module):
        names = list(_state(self)[2])
        name = names[_position(index, len(names), type(self).__name__)]
        setattr(self, name, _as_module(module, index))

    def append(self, module):
        """Add `module` at the end. Returns self."""
        self.add_module(str(len(self)), _as_module(module, len(self)))
        return self


class Sequential(_ModuleSequence):
    """Modules applied one after the other: ``Sequential(m0, m1, ...)`` names them "0",
    "1", ...; ``Sequential(OrderedDict(name=module, ...))`` uses the given names. Supports
    ``len``, iteration, ``seq[i]``, ``seq[i:j]`` (a Sequential) and ``append``.

    >>> import tapegrad as tg
    >>> net = tg.nn.Sequential(tg.nn.Linear(4, 3), tg.nn.ReLU())
    >>> len(net), type(net[-1]).__name__, net(tg.ones((2, 4))).shape
    (2, 'ReLU', (2, 3))
    >>> net
    Sequential(
      (0): Linear(in_features=4, out_features=3, bias=True)
      (1): ReLU()
    )
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], collections.abc.Mapping):
            for name, m in modules[0].items():
                self.add_module(name, _as_module(m, name))
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), _as_module(m, i))

    def forward(self, x):
        d = self.__dict__
        for name in d["_modules"]:
            x = d[name](x)
        return x

    def _sliced(self, names):
        return type(self)(collections.OrderedDict((n, self.__dict__[n]) for n in names))


class ModuleList(_ModuleSequence):
    """A list of modules whose parameters are registered (a plain Python list would hide
    them from ``parameters()``). Indexing, ``len``, iteration, ``append``, ``extend``.

    >>> import tapegrad as tg
    >>> layers = tg.nn.ModuleList([tg.nn.Linear(2, 2) for _ in range(3)])
    >>> len(layers), len(list(layers.parameters()))
    (3, 6)
    """

    def __init__(self, modules=()):
        super().__init__()
        self.extend(modules)

    def _sliced(self, names):
        return type(self)([self.__dict__[n] for n in names])

    def extend(self, modules):
        """Add every module of `modules` at the end. Returns self."""
        for m in modules:
            self.append(m)
        return self

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            "ModuleList has no forward(): iterate over it in your own module's forward()")


def _as_module(m, where):
    if not isinstance(m, Module):
        raise TypeError(f"element {where!r} is {_kind(m)}, not a tg.nn.Module")
    return m


def _position(index, n, owner):
    if isinstance(index, bool) or not isinstance(index, (numbers.Integral, np.integer)):
        raise TypeError(f"{owner} indices must be integers or slices, not {type(index).__name__}")
    i = int(index)
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of range for a {owner} of length {n}")
    return i % n


# ---------------------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------------------

def _layer_dtype(dtype, layer):
    """A layer's dtype= argument: the default floating dtype (tg.get_default_dtype) when
    None, else a floating dtype (TypeError naming the layer otherwise)."""
    dtype = default_float_dtype() if dtype is None else np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"{layer}: dtype must be a floating-point type, got {dtype}")
    return dtype


class Linear(Module):
    """``y = x @ weight.T + bias``, with ``weight`` of shape (out_features, in_features)
    and ``bias`` of shape (out_features,), as in PyTorch (so its state dicts line up).

    Initialised like PyTorch: every entry of weight and bias uniform in
    [-1/sqrt(in_features), 1/sqrt(in_features)), drawn from ``tg.random`` (weight first),
    so ``tg.manual_seed`` makes it reproducible. ``dtype`` defaults to
    ``tg.get_default_dtype()`` (float64, NumPy's, unless ``tg.set_default_dtype`` changed it).

    >>> import tapegrad as tg
    >>> lin = tg.nn.Linear(3, 2, dtype=tg.float32)
    >>> lin.weight.shape, lin.bias.shape, lin.weight.dtype
    ((2, 3), (2,), dtype('float32'))
    >>> lin(tg.ones((5, 3), dtype=tg.float32)).shape
    (5, 2)
    """

    def __init__(self, in_features, out_features, bias=True, *, dtype=None, device=None):
        super().__init__()
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, (numbers.Integral, np.integer)) or v < 0:
                raise ValueError(f"Linear: {name} must be a non-negative integer, got {v!r}")
        dtype = _layer_dtype(dtype, "Linear")
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = Parameter(tg.zeros((self.out_features, self.in_features), dtype, device))
        if bias:
            self.bias = Parameter(tg.zeros((self.out_features,), dtype, device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Draw weight and bias again (in place), as PyTorch: weight with
        ``init.kaiming_uniform_(a=sqrt(5))`` and bias from U(-b, b); both bounds are
        1/sqrt(in_features)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        # The layer's own check, so that the error names Linear(...) and both widths (the
        # op's error only names `linear`); it starts as the op's does.
        shape = x.shape if hasattr(x, "shape") else np.shape(x)
        if tuple(shape[-1:]) != (self.in_features,):
            got = shape[-1] if len(shape) else "a 0-d input"
            raise ValueError(f"linear: x {tuple(shape)} and weight {tuple(self.weight.shape)} "
                             f"do not fit: {self!r} expects in_features={self.in_features} "
                             f"on the last axis of its input, got {got}")
        return functional.linear(x, self.weight, self.bias)

    def extra_repr(self):
        extra = f"in_features={self.in_features}, out_features={self.out_features}, " \
                f"bias={self.bias is not None}"
        if self.weight.dtype != np.float64:
            extra += f", dtype={self.weight.dtype}"
        return extra


class Identity(Module):
    """Returns its input unchanged (a placeholder layer)."""

    def forward(self, x):
        return x


class Flatten(Module):
    """Merges the axes ``start_dim .. end_dim`` (default: all but the batch axis) into one.

    >>> import tapegrad as tg
    >>> tg.nn.Flatten()(tg.zeros((2, 3, 4))).shape
    (2, 12)
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        shape = tuple(x.shape)
        ndim = len(shape)
        start, end = self.start_dim, self.end_dim
        if not (-ndim <= start < ndim and -ndim <= end < ndim):
            raise IndexError(f"Flatten: start_dim {start} / end_dim {end} out of range for "
                             f"an input of shape {shape}")
        start, end = start % ndim, end % ndim
        if start > end:
            raise ValueError(f"Flatten: start_dim {self.start_dim} comes after end_dim "
                             f"{self.end_dim} for an input of shape {shape}")
        return tg.reshape(x, shape[:start] + (math.prod(shape[start:end + 1]),) + shape[end + 1:])

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class ReLU(Module):
    """``max(x, 0)`` elementwise (``tg.relu``)."""

    def forward(self, x):
        return tg.relu(x)


class Tanh(Module):
    """``tanh(x)`` elementwise (``tg.tanh``)."""

    def forward(self, x):
        return tg.tanh(x)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))`` elementwise (``tg.sigmoid``, stable for large |x|)."""

    def forward(self, x):
        return tg.sigmoid(x)


class Softmax(Module):
    """``tg.softmax(x, axis=dim)``; ``dim`` defaults to the last axis (``axis=`` works too).

    >>> import tapegrad as tg
    >>> tg.nn.Softmax(dim=1)(tg.zeros((1, 4))).tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    """

    def __init__(self, dim=-1, *, axis=None):
        super().__init__()
        self.dim = dim if axis is None else axis

    def forward(self, x):
        return tg.softmax(x, axis=self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """``tg.log_softmax(x, axis=dim)``; ``dim`` defaults to the last axis."""

    def forward(self, x):
        return tg.log_softmax(x, axis=self.dim)


class Dropout(Module):
    """Inverted dropout: in training mode each element is zeroed with probability `p` and
    the rest are scaled by ``1 / (1 - p)``; in evaluation mode (``eval()``) it is the
    identity. The mask comes from ``tg.random.rand`` (reproducible under
    ``tg.manual_seed``).

    >>> import tapegrad as tg
    >>> drop = tg.nn.Dropout(0.25)
    >>> tg.manual_seed(0)
    >>> drop(tg.ones(4)).tolist()
    [1.3333333333333333, 1.3333333333333333, 0.0, 0.0]
    >>> drop.eval()(tg.ones(4)).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """

    def __init__(self, p=0.5):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p!r}")
        self.p = float(p)

    def forward(self, x):
        return functional.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


# ---------------------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------------------

class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in REDUCTIONS:
            raise ValueError(f"{type(self).__name__}: reduction must be 'mean', 'sum' or "
                             f"'none', got {reduction!r}")
        self.reduction = reduction

    def extra_repr(self):
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""


class CrossEntropyLoss(_Loss):
    """``tg.cross_entropy(logits, target, reduction=..., weight=..., ignore_index=...,
    label_smoothing=...)``: target is integer class labels or class probabilities; the
    class axis is the last one. torch.nn's constructor (the class `weight` is a buffer;
    the deprecated size_average / reduce are refused).

    >>> import tapegrad as tg
    >>> tg.nn.CrossEntropyLoss()(tg.zeros((2, 4)), tg.tensor([0, 3]))
    tensor(1.38629436)
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        if size_average is not None or reduce is not None:
            raise TypeError("CrossEntropyLoss: size_average= and reduce= are deprecated in "
                            "PyTorch and not supported; use reduction='mean' | 'sum' | 'none'")
        super().__init__(reduction)
        self.register_buffer("weight", None if weight is None else tg.asarray(weight))
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        kw = {}
        if self.weight is not None:
            kw["weight"] = self.weight
        if self.ignore_index != -100:
            kw["ignore_index"] = self.ignore_index
        if self.label_smoothing:
            kw["label_smoothing"] = self.label_smoothing
        return tg.cross_entropy(input, target, reduction=self.reduction, **kw)


class MSELoss(_Loss):
    """``tg.mse_loss(input, target, reduction=...)``."""

    def forward(self, input, target):
        return tg.mse_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """``tg.binary_cross_entropy_with_logits(logits, target, reduction=...)``, with
    torch.nn's ``weight`` (a rescaling of each element's loss, broadcast to the input) and
    ``pos_weight`` (the weight of the positive term, broadcast along the last axis: one
    per class); both are buffers, as PyTorch's. The loss of one element is PyTorch's::

        (1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x)      (times weight)

    with ``softplus(-x) = -logsigmoid(x)`` computed stably. Without either weight it is
    the fused op.

    >>> import tapegrad as tg
    >>> loss = tg.nn.BCEWithLogitsLoss(pos_weight=tg.tensor([3.0]))
    >>> round(loss(tg.zeros(2), tg.tensor([1.0, 0.0])).item(), 6)     # (3 + 1) ln 2 / 2
    1.386294
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean",
                 pos_weight=None):
        if size_average is not None or reduce is not None:
            raise TypeError("BCEWithLogitsLoss: size_average= and reduce= are deprecated in "
                            "PyTorch and not supported; use reduction='mean' | 'sum' | 'none'")
        if isinstance(weight, str):
            # NOTE: tapegrad's earlier BCEWithLogitsLoss(reduction) (a weight is never a
            # string, so the torch order weight-first loses nothing by accepting it).
            if reduction != "mean":
                raise TypeError(f"BCEWithLogitsLoss: got a reduction twice ({weight!r} as the "
                                f"first argument, which is torch's weight, and "
                                f"reduction={reduction!r})")
            weight, reduction = None, weight
        super().__init__(reduction)
        self.register_buffer("weight", None if weight is None else tg.asarray(weight))
        self.register_buffer("pos_weight",
                             None if pos_weight is None else tg.asarray(pos_weight))

    def forward(self, input, target):
        if self.weight is not None or self.pos_weight is not None:
            # the error names the layer (the fused op's own message names the op)
            x_shape, t_shape = np.shape(input), np.shape(target)
            if x_shape != t_shape:
                raise ValueError(f"BCEWithLogitsLoss: target shape {t_shape} must equal "
                                 f"input shape {x_shape}")
        return functional.binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight)


# The convolution layers live in their own module (they subclass Module, defined above).
from .conv_layers import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d  # noqa: E402
__all__ += ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d"]
# The normalisation layers live in their own module (they need Module, defined above).
from .nn_normalization import (BatchNorm1d, BatchNorm2d, GroupNorm,  # noqa: E402, F401
                               InstanceNorm1d, InstanceNorm2d, LayerNorm, RMSNorm)

__all__ += ["LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d",
            "InstanceNorm1d", "InstanceNorm2d"]
# Activation modules (GELU, SiLU, ..., PReLU): their own module, imported last (it
# subclasses Module).
from .activation_modules import *  # noqa: E402,F401,F403
from . import activation_modules as _activation_modules  # noqa: E402
__all__ += _activation_modules.__all__
from .loss_modules import *  # noqa: E402,F401,F403
from . import loss_modules as _loss_modules  # noqa: E402
__all__ += _loss_modules.__all__
# Recurrent layers (RNN/LSTM/GRU and their cells): their own module (they subclass Module).
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: E402,F401
__all__ += ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU"]
# Embedding, channel dropout, MultiheadAttention and the Transformer layers (they need
# Linear, LayerNorm and ModuleList, defined above or in the modules imported above).
from .transformer_layers import *  # noqa: E402,F401,F403
from . import transformer_layers as _transformer_layers  # noqa: E402
__all__ += _transformer_layers.__all__
# Pooling, im2col and resampling layers (and Unflatten): their own module.
from .pooling_layers import *  # noqa: E402,F401,F403
from . import pooling_layers as _pooling_layers  # noqa: E402
__all__ += _pooling_layers.__all__
# ParameterList/Dict, ModuleDict, Unflatten, Bilinear (they subclass Module).
from .containers import *  # noqa: E402,F401,F403
from . import containers as _containers  # noqa: E402
__all__ += _containers.__all__
