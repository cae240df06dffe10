"""tapegrad-checkpoint: gradient checkpointing for tapegrad.

Installing this distribution adds, through the entry-point group ``tapegrad``
(``checkpoint = "tapegrad_checkpoint.plugin"``), the public names:

- ``tg.checkpoint(fn, *args, **kwargs)``: run `fn` keeping only its inputs; backward
  recomputes it (with the same random numbers) and backpropagates through the rerun;
- ``tg.checkpoint_sequential(layers, x, strategy=...)`` with the strategies
  ``tg.checkpoint.SqrtN()``, ``Every(k)``, ``Selective(predicate)`` and ``None``, and
  ``tg.checkpoint.CheckpointManager(strategy)`` for use inside a Module's ``forward``;
- ``tg.memory.saved_bytes(t)``: the bytes the graph behind `t` keeps for backward, per op
  and in total, measured before backward runs.

>>> import tapegrad as tg
>>> tg.manual_seed(0)
>>> net = tg.nn.Sequential(*[tg.nn.Sequential(tg.nn.Linear(16, 16), tg.nn.Tanh())
...                          for _ in range(16)])
>>> x = tg.random.randn(8, 16)
>>> plain = tg.memory.saved_bytes(net(x)).activations
>>> ckpt = tg.memory.saved_bytes(tg.checkpoint_sequential(net, x)).activations
>>> plain // 1024, ckpt // 1024, round(ckpt / plain, 2)    # 17 arrays of 1 KiB vs 8
(17, 8, 0.47)
"""

# NOTE: import tapegrad before anything of this package: tapegrad loads its plugins when
# it is first imported, and that import must not start from inside ``plugin`` (a half-run
# plugin module would publish nothing). Importing it here makes ``import
# tapegrad_checkpoint.plugin`` safe as the very first import of a program.
import tapegrad as _tapegrad  # noqa: F401

__version__ = "0.1.0"

API = ("checkpoint", "checkpoint_sequential", "memory")
"""The public names this plugin adds to ``tapegrad``."""
