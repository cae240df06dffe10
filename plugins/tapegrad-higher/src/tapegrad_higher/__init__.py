"""tapegrad-higher: higher-order and functional differentiation for tapegrad.

Installing this distribution adds, through the entry-point group ``tapegrad``
(``higher = "tapegrad_higher.plugin"``), the public names:

- ``tg.grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
  allow_unused=False)``: gradients returned as a tuple, ``.grad`` untouched
  (``torch.autograd.grad``);
- ``tg.vjp(f, x, v)``, ``tg.jvp(f, x, v)``, ``tg.jacobian(f, x)``, ``tg.hessian(f, x)``,
  ``tg.hvp(f, x, v)``: transforms of a function (``torch.autograd.functional``);
- ``tg.linearize``, ``tg.jacfwd``, ``tg.jacrev``, ``tg.forward_ad``: forward mode;
- ``tg.vmap(f, in_axes, out_axes, randomness)`` and ``tg.func`` (``grad``, ``vjp``, ``jvp``,
  ``hessian``, ``functional_call``, ...): vectorizing map and torch.func-style transforms.

``tg.gradcheck`` and ``tg.gradgradcheck`` live in the core (``tapegrad.testing``).

>>> import tapegrad as tg
>>> x = tg.tensor([0.5, 2.0])
>>> tg.hessian(lambda x: (x ** 3).sum(), x)            # diag(6 x)
tensor([[ 3.,  0.],
        [ 0., 12.]])
>>> x = tg.tensor(0.3, requires_grad=True)
>>> (d1,) = tg.grad(tg.sin(x), x, create_graph=True)
>>> (d2,) = tg.grad(d1, x, create_graph=True)
>>> (d3,) = tg.grad(d2, x)
>>> round(d3.item(), 6) == round(-float(tg.cos(x).item()), 6)
True
"""

# NOTE: import tapegrad before anything of this package: tapegrad loads its plugins when
# it is first imported, and that import must not start from inside ``plugin`` (a half-run
# plugin module would publish nothing). Importing it here makes ``import
# tapegrad_higher.plugin`` safe as the very first import of a program.
import tapegrad as _tapegrad  # noqa: F401

__version__ = "0.1.0"

API = ("grad", "vjp", "jvp", "jacobian", "hessian", "hvp", "linearize", "jacfwd", "jacrev",
       "forward_ad", "vmap", "func")
"""The public names this plugin adds to ``tapegrad``."""
