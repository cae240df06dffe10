"""The hooks of tapegrad-scipy (entry point ``scipy = "tapegrad_scipy.plugin"``).

- ``tapegrad_register_ops``: the ops and functions of each submodule (special, stats,
  linalg, signal), each module registering its own.
- ``tapegrad_api``: publishes ``tg.scipy``, the namespace with those submodules.
"""

import types

import tapegrad as tg

from . import integrate, linalg, signal, special, stats

scipy = types.ModuleType(
    "tapegrad.scipy",
    "SciPy with gradients: tg.scipy.special, tg.scipy.stats, tg.scipy.linalg and "
    "tg.scipy.signal (tapegrad-scipy). tg.scipy.integrate.odeint is out of scope.")
scipy.special = special
scipy.stats = stats
scipy.linalg = linalg
scipy.signal = signal
scipy.integrate = integrate


@tg.hookimpl
def tapegrad_register_ops(registry):
    special.register(registry)
    linalg.register(registry)
    stats.register(registry)
    signal.register(registry)
    from . import windows
    windows.register(registry)


@tg.hookimpl
def tapegrad_api():
    return {"scipy": scipy}
