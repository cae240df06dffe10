"""The workloads of DESIGN.md §8, one module each; importing this package registers them.

W1 (elementwise chain) and W2/W3 (MLP training steps) are implemented; W4-W6 slot in as
one module each with an import line below; the runner, worker and report need no change.
"""

from . import w1_elementwise_chain, w2_w3_mlp_training, w4_deep_chain, w5_hessian, w6_checkpoint  # noqa: F401
from . import w7_cnn_training  # noqa: F401
from . import w8_gpt_blocks  # noqa: F401
from . import w9_per_sample_grads  # noqa: F401
