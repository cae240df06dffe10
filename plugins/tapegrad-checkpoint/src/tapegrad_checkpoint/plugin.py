"""The hook of tapegrad-checkpoint: it publishes tg.checkpoint, tg.checkpoint_sequential
and tg.memory.

It registers no op: a checkpointed segment is one ``tg.Function`` node whose backward
reruns the segment and backpropagates through the rerun.
"""

import tapegrad as tg


@tg.hookimpl
def tapegrad_api():
    from . import memory
    from .checkpoint import checkpoint, checkpoint_sequential
    return {"checkpoint": checkpoint, "checkpoint_sequential": checkpoint_sequential,
            "memory": memory}
