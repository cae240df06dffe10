"""`import tapegrad.<namespace>` for the namespaces plugins publish (PyTorch's import
habits: `import tapegrad.nn as nn`), see Note: [plugin namespaces as modules]."""

import subprocess
import sys
import textwrap
import types

import pytest
import tapegrad as tg


def _run(code):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_pytorch_style_imports_give_the_namespace_modules_themselves():
    _run("""
        import tapegrad.nn as nn
        import tapegrad.nn.functional as F
        import tapegrad.optim
        import tapegrad.nn.init
        from tapegrad.optim.lr_scheduler import StepLR
        from tapegrad.nn.utils import clip_grad_norm_
        from tapegrad.nn import Linear
        import tapegrad as tg
        assert nn is tg.nn and F is tg.nn.functional and tapegrad.optim is tg.optim
        assert tapegrad.nn.init is tg.nn.init and StepLR is tg.optim.lr_scheduler.StepLR
        assert clip_grad_norm_ is tg.nn.utils.clip_grad_norm_ and Linear is tg.nn.Linear
        assert tg.nn.__name__ == "tapegrad_nn.nn"      # the module is not renamed
        import tapegrad.testing
        assert tapegrad.testing.__name__ == "tapegrad.testing"
    """)


def test_a_submodule_imported_first_in_a_fresh_interpreter():
    _run("""
        import tapegrad.nn.functional as F
        import tapegrad as tg
        assert F is tg.nn.functional
        from tapegrad.optim.lr_scheduler import StepLR
        assert StepLR is tg.optim.lr_scheduler.StepLR
    """)


def test_any_plugin_namespace_is_importable_and_unknown_ones_are_not():
    _run("""
        import sys, types
        import tapegrad as tg
        toy = types.ModuleType("toy_plugin_ns")
        toy.VALUE = 42
        class Plugin:
            @tg.hookimpl
            def tapegrad_api(self):
                return {"toyns": toy}
        tg.register_plugin(Plugin())
        import tapegrad.toyns
        from tapegrad.toyns import VALUE
        assert tapegrad.toyns is toy and VALUE == 42
        for name in ("tapegrad.no_such_namespace", "tapegrad.nn.no_such_module"):
            try:
                __import__(name)
            except ModuleNotFoundError:
                pass
            else:
                raise AssertionError(name)
        try:
            import tapegrad.exp          # a function, not a module
        except ModuleNotFoundError:
            pass
        else:
            raise AssertionError("tapegrad.exp")
    """)


def test_in_process_import_is_the_same_object():
    import tapegrad.nn as nn
    import tapegrad.optim.lr_scheduler as sched
    assert nn is tg.nn and sched is tg.optim.lr_scheduler
    assert isinstance(nn, types.ModuleType)
    with pytest.raises(ModuleNotFoundError):
        import tapegrad.nn.not_there  # noqa: F401


def test_every_module_all_names_only_what_the_module_defines():
    # `from tapegrad_shape.numerics import *` raised AttributeError while its __all__
    # listed convolve and ldexp, which are registered ops (tg.convolve), not attributes.
    import importlib
    import pkgutil

    missing = {}
    for package in ("tapegrad", "tapegrad_elementwise", "tapegrad_shape", "tapegrad_linalg",
                    "tapegrad_nn", "tapegrad_fft", "tapegrad_higher", "tapegrad_checkpoint"):
        try:
            pkg = importlib.import_module(package)
        except ImportError:        # a plugin not installed in this environment
            continue
        for info in pkgutil.iter_modules(pkg.__path__):
            module = importlib.import_module(f"{package}.{info.name}")
            names = getattr(module, "__all__", ())
            absent = [n for n in names if not hasattr(module, n)]
            if absent:
                missing[module.__name__] = absent
    assert missing == {}
