"""tapegrad-nn: softmax and losses (ops), ``tg.nn`` modules, ``tg.optim`` optimizers and
``tg.data`` loaders. Import tapegrad first: it loads this plugin through its entry point."""

import tapegrad  # noqa: F401  (registers this plugin before its modules are used)

__version__ = "0.1.0"
