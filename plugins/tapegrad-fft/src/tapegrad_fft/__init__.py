"""tapegrad-fft: np.fft with gradients, published as ``tg.fft``.

>>> import tapegrad as tg
>>> z = tg.tensor([1.0 + 1.0j, 2.0, 0.0], requires_grad=True)
>>> y = tg.fft.fft(z)
>>> y.backward(gradient=y.detach())    # L = sum |y|^2 / 2 = n |z|^2 / 2 (Parseval): n z
>>> z.grad.numpy().round(12)
array([3.+3.j, 6.+0.j, 0.+0.j])
"""

# NOTE: import tapegrad first: it loads its plugins on its first import, and that must not
# start from inside a half-imported module of this package.
import tapegrad as _tapegrad  # noqa: F401

__version__ = "0.1.0"
