"""tapegrad-shape: reductions, reshapes, indexing and joins for tapegrad.

The ops live in :mod:`tapegrad_shape.ops`, which tapegrad loads through the entry point
``tapegrad: shape``; use them as ``tg.sum``, ``t.reshape``, ``t[index]`` and so on.
"""

# NOTE: import tapegrad before anything of this package: tapegrad's import loads the
# entry point `tapegrad_shape.ops`, which must not be half-imported at that moment (its
# hooks would not exist yet and the plugin would register nothing).
import tapegrad as _tapegrad  # noqa: F401

__version__ = "0.1.0"
