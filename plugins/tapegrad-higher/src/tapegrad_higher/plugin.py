"""The hook of tapegrad-higher: it publishes tg.grad and the functional transforms.

It registers no op: everything here is built on the engine's backward pass
(``create_graph=True`` makes a gradient differentiable again) and the ops of the other
first-party plugins.
"""

import tapegrad as tg


@tg.hookimpl
def tapegrad_api():
    from . import forward_ad, func
    from .autograd import grad
    from .forward import jacfwd, jacrev, jvp, linearize
    from .functional import hessian, hvp, jacobian, vjp
    from .vmap import vmap
    return {"grad": grad, "vjp": vjp, "jvp": jvp, "jacobian": jacobian,
            "hessian": hessian, "hvp": hvp, "linearize": linearize, "jacfwd": jacfwd,
            "jacrev": jacrev, "forward_ad": forward_ad, "vmap": vmap, "func": func}
