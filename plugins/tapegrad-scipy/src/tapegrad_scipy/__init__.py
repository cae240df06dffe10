"""tapegrad-scipy: SciPy's functions with gradients, published as ``tg.scipy``.

``tg.scipy.special``, ``tg.scipy.stats``, ``tg.scipy.linalg`` and ``tg.scipy.signal``
mirror their SciPy modules: same names, argument order and defaults, SciPy's kernels
(values and dtypes), and gradient rules written in tapegrad ops (so second derivatives
work). ``tg.scipy.integrate.odeint`` is out of scope and raises saying so.

>>> import tapegrad as tg
>>> x = tg.tensor([0.5, 2.0], requires_grad=True)
>>> tg.scipy.special.gammaln(x).sum().backward()
>>> bool(abs(x.grad[1].item() - (1 - 0.5772156649015329)) < 1e-12)   # digamma(2)
True
"""

# NOTE: import tapegrad first: it loads its plugins on its first import, and that must not
# start from inside a half-imported module of this package.
import tapegrad as _tapegrad  # noqa: F401

__version__ = "0.1.0"
