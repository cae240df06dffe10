"""tapegrad-special: special functions for tapegrad, and a template for plugins.

Installing this distribution is all it takes: tapegrad finds the module
``tapegrad_special.ops`` through the entry-point group ``tapegrad`` and registers its ops
when tapegrad is imported. They are then ``tg.<name>(...)`` and ``t.<name>(...)``:

- ``special_erf(x)``: the error function;
- ``special_gelu(x)``: the exact Gaussian error linear unit, ``x * Phi(x)``;
- ``special_softplus(x, beta=1.0)``: ``log(1 + exp(beta * x)) / beta``, without overflow;
- ``special_logaddexp(x, y)``: ``log(exp(x) + exp(y))``, without overflow, with broadcasting.

>>> import tapegrad as tg
>>> x = tg.tensor([0.0, 1.0], requires_grad=True)
>>> tg.special_gelu(x).backward(tg.ones(2))   # as of .sum(), without tapegrad-shape
>>> x.grad.numpy().round(6)                 # Phi(x) + x phi(x)
array([0.5     , 1.083315])
"""

# NOTE: import tapegrad before anything of this package: tapegrad loads its plugins when
# it is first imported, and that import must not start from inside ``ops`` (a half-run
# ops module would register nothing). Importing it here makes ``import
# tapegrad_special.ops`` safe as the very first import of a program.
import tapegrad as _tapegrad  # noqa: F401

__version__ = "0.1.0"

OPS = ("special_erf", "special_gelu", "special_softplus", "special_logaddexp")
"""The names this plugin registers."""
