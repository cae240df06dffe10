"""The hook of tapegrad-distributed: it publishes tg.distributed (this package).

It registers no op: gradients are averaged by hooks on the parameters.
"""

import tapegrad as tg


@tg.hookimpl
def tapegrad_api():
    import tapegrad_distributed
    return {"distributed": tapegrad_distributed}
