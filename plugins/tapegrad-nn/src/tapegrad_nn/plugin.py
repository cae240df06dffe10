"""The hooks of tapegrad-nn: its ops, and the public names tg.nn, tg.optim, tg.data."""

import tapegrad as tg


@tg.hookimpl
def tapegrad_register_ops(registry):
    from . import functional
    functional.register(registry)


@tg.hookimpl
def tapegrad_api():
    from . import data, nn, optim
    return {"nn": nn, "optim": optim, "data": data}
