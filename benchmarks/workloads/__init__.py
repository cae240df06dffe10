"""The workloads of DESIGN.md §8, one module each; importing this package registers them.

W1 is implemented. W2-W6 slot in as ``w2_mlp_small.py``, ... with one import line each
below; the runner, worker and report need no change.
"""

from . import w1_elementwise_chain  # noqa: F401
