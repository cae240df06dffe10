"""tapegrad: reverse-mode automatic differentiation over NumPy.

>>> import tapegrad as tg
>>> x = tg.tensor([1.0, 2.0], requires_grad=True)
>>> (x + x + 1.0).backward(tg.ones(2))
>>> x.grad
tensor([2., 2.])

Ops come from plugins (tapegrad-elementwise, tapegrad-shape, ...), found through the
entry-point group ``tapegrad`` when this module is imported.
"""

import sys as _sys

import numpy as _np

from . import _engine, _plugins, random
from ._compile import CompiledFunction, CompileWarning, compile, compile_guard  # noqa: A004 (tg.compile, like torch.compile)
from ._creation import (
    arange,
    asarray,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    get_default_dtype,
    iscomplexobj,
    linspace,
    ones,
    set_default_dtype,
    tensor,
    zeros,
)
from ._engine import (
    Device,
    Node,
    Op,
    OpNotAvailableError,
    RemovableHandle,
    TensorMeta,
    is_grad_enabled,
    needs_grad,
)
from ._grad_mode import (
    detect_anomaly,
    enable_grad,
    inference_mode,
    is_anomaly_enabled,
    no_grad,
    set_grad_enabled,
)
from ._plugins import (
    PluginError,
    PluginWarning,
    Registry,
    Sample,
    hookimpl,
    register_plugin,
    registry,
    unregister_plugin,
)
from ._tensor import Tensor
from .function import Function, FunctionCtx
from .random import manual_seed
from .serialization import load, save

__version__ = "0.1.0"

float16, float32, float64 = _np.float16, _np.float32, _np.float64
int32, int64, bool_ = _np.int32, _np.int64, _np.bool_
newaxis = None


def device(spec):
    """The registered device called `spec` ("cpu", "cuda").

    >>> import tapegrad as tg
    >>> tg.device("cpu")
    device('cpu')
    """
    return _engine.get_device(spec)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    """Backpropagate from several tensors at once (sums their contributions).

    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0], requires_grad=True)
    >>> tg.backward([x + x, x]); x.grad.item()
    3.0
    """
    tensors = tuple(tensors) if isinstance(tensors, (list, tuple)) else (tensors,)
    if grad_tensors is None:
        grad_tensors = (None,) * len(tensors)
    elif not isinstance(grad_tensors, (list, tuple)):
        grad_tensors = (grad_tensors,)
    _engine.run_backward(tensors, tuple(grad_tensors), retain_graph, create_graph)


def __getattr__(name):
    # NOTE: import submodules with importlib: `from . import testing` here would look the
    # name up on this module again and recurse into this function.
    import importlib
    if name == "testing":
        return importlib.import_module(".testing", __name__)
    if name in ("gradcheck", "gradgradcheck", "GradcheckError"):
        return getattr(importlib.import_module(".testing", __name__), name)
    if name.startswith("__"):
        raise AttributeError(name)
    if _plugins.LOADER.load_deferred() and name in globals():
        return globals()[name]
    raise _engine.missing_op_error(name)


def _load():
    from . import _core_plugin
    namespace = _sys.modules[__name__]
    previous = _plugins.LOADER.namespace
    if previous is not None and previous is not namespace:
        # NOTE: an earlier `import tapegrad` stopped in here (a plugin error in strict mode)
        # and left its module half loaded; the plugins it registered hold that module as
        # `tg`. So that module stays tapegrad: this import returns it (importlib returns
        # whatever sys.modules holds once the module body has run) and its loading goes on
        # from the plugin that failed, raising again if that plugin still fails.
        _sys.modules[__name__] = namespace = previous
    _engine.set_providers(_plugins.KNOWN_PROVIDERS)
    _engine.set_miss_handler(_plugins.LOADER.load_deferred)
    _plugins.LOADER.load(namespace, Tensor, _core_plugin)
    # `import tapegrad.nn` and the like (Note: [plugin namespaces as modules]).
    from . import _aliases
    _aliases.install()


_load()
