"""``import tapegrad.<name>`` for the namespaces that plugins publish as modules.

Note: [plugin namespaces as modules]
A plugin's ``tapegrad_api`` may publish a module as ``tg.<name>`` (tapegrad-nn publishes
``tapegrad_nn.nn`` as ``tg.nn``). PyTorch code imports such namespaces as modules
(``import tapegrad.nn as nn``, ``import tapegrad.nn.functional as F``, ``from
tapegrad.optim.lr_scheduler import StepLR``), so ``tapegrad.<name>`` must be importable
although no file of the core is called that. Two finders on ``sys.meta_path`` do it, for
any plugin, by what ``getattr`` finds:

* ``tapegrad.<name>`` (last on sys.meta_path, so the core's own submodules are found as
  files first): when ``tg.<name>`` is a module, the import gives that very module object
  (``import tapegrad.nn as nn; nn is tg.nn``), with its own ``__name__`` and
  ``__spec__`` left as they are. Its sub-modules of the same distribution that it holds as
  public attributes are registered at the same time under the dotted alias
  (``tapegrad.nn.functional``), recursively: importlib needs them there because an alias
  of a plain module has no ``__path__``.
* ``tapegrad.<name>.<sub>`` (first on sys.meta_path, only below an alias): the attribute
  ``<sub>`` when it is a module, else, for a package, its real submodule imported by its
  own name -- never a second copy of a module file under the alias name.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types

_ROOT = "tapegrad"

# alias name -> the module it stands for
_ALIASES: dict[str, types.ModuleType] = {}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self._target = target

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        # NOTE: importlib returns what sys.modules holds under the name once this returns,
        # so putting the target there makes the import give the target itself (the
        # throwaway module importlib made is dropped).
        _register(module.__name__, self._target)


def _register(alias, target, seen=None):
    # `seen`: each module is registered once per alias tree (modules that import each
    # other would otherwise give tapegrad.nn.functional.nn.functional...).
    seen = set() if seen is None else seen
    seen.add(id(target))
    sys.modules[alias] = target
    _ALIASES[alias] = target
    top = target.__name__.partition(".")[0]
    for name, value in list(vars(target).items()):
        sub = f"{alias}.{name}"
        if (isinstance(value, types.ModuleType) and not name.startswith("_")
                and value.__name__.startswith(top + ".") and id(value) not in seen
                and sub not in sys.modules):
            _register(sub, value, seen)


def _spec(fullname, target):
    return importlib.util.spec_from_loader(fullname, _AliasLoader(target))


class _TopFinder(importlib.abc.MetaPathFinder):
    """``tapegrad.<name>`` when no file provides it and ``tg.<name>`` is a module."""

    def find_spec(self, fullname, path=None, target=None):
        parent_name, _, leaf = fullname.rpartition(".")
        if parent_name != _ROOT or leaf.startswith("_"):
            return None
        parent = sys.modules.get(parent_name)
        try:
            value = getattr(parent, leaf)
        except AttributeError as exc:    # what tapegrad raises for a name no plugin gives
            if "pip install" in str(exc):
                # A known plugin's namespace that is not installed: say which to install.
                raise ModuleNotFoundError(f"No module named {fullname!r}: {exc}",
                                          name=fullname) from None
            return None
        if not isinstance(value, types.ModuleType) or value.__name__ == fullname:
            return None
        return _spec(fullname, value)


class _BelowAliasFinder(importlib.abc.MetaPathFinder):
    """``tapegrad.<name>.<sub>...`` below an alias (see the Note)."""

    def find_spec(self, fullname, path=None, target=None):
        parent_name, _, leaf = fullname.rpartition(".")
        parent = _ALIASES.get(parent_name)
        if parent is None or sys.modules.get(parent_name) is not parent:
            return None
        value = getattr(parent, leaf, None)
        if isinstance(value, types.ModuleType):
            return _spec(fullname, value)
        if hasattr(parent, "__path__"):
            real = importlib.util.find_spec(f"{parent.__name__}.{leaf}")
            if real is not None:
                return _spec(fullname, importlib.import_module(real.name))
        return None


_TOP, _BELOW = _TopFinder(), _BelowAliasFinder()


# ---------------------------------------------------------------------------------------
# Function names PyTorch spells differently (docs/coming-from-pytorch.md). NumPy has no
# function of these names, so none changes the meaning of a NumPy call.
# ---------------------------------------------------------------------------------------

def cat(tensors, *args, **kwargs):
    """``tg.concatenate`` under PyTorch's name (``torch.cat``): the tensors joined along an
    existing axis, ``axis=`` or ``dim=`` (default 0); differentiable. ``tg.concat`` (the
    array API's name) is the same op.

    >>> import tapegrad as tg
    >>> a, b = tg.zeros((2, 3)), tg.ones((2, 1))
    >>> tg.cat([a, b], dim=1).shape
    (2, 4)
    """
    # NOTE: looked up per call, so that with tapegrad-shape missing the error names it
    return _engine_lookup("concatenate")(tensors, *args, **kwargs)


def _engine_lookup(name):
    from . import _engine
    return _engine.lookup(name)


_FUNCTIONS = {"cat": cat}


def install():
    """Put the two finders on sys.meta_path (once), and PyTorch's function names
    (_FUNCTIONS) on tapegrad where no plugin has taken the name."""
    namespace = sys.modules.get(_ROOT)
    for name, fn in _FUNCTIONS.items():
        if namespace is not None and name not in vars(namespace):
            setattr(namespace, name, fn)
    if not any(isinstance(f, _BelowAliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _BELOW)
    if not any(isinstance(f, _TopFinder) for f in sys.meta_path):
        sys.meta_path.append(_TOP)
