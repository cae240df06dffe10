"""The hook of tapegrad-viz: it publishes ``tg.viz`` (``to_dot`` and ``render``).

It registers no op: a picture is read off a recorded graph (``grad_fn``,
``next_functions``, ``saved_arrays()``), which every op already provides.
"""

import tapegrad as tg


@tg.hookimpl
def tapegrad_api():
    from . import graph
    return {"viz": graph}
