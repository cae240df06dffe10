"""tapegrad-fft: np.fft with gradients, published as ``tg.fft``.

>>> import tapegrad as tg
>>> z = tg.tensor([1.0 + 1.0j, 2.0, 0.0], requires_grad=True)
>>> (tg.fft.fft(z).abs() ** 2).sum().backward()    # |F z|^2 = n |z|^2: gradient 2 n z
>>> z.grad
tensor([ 6.+6.j, 12.+0.j,  0.+0.j])
"""

# NOTE: import tapegrad first: it loads its plugins on its first import, and that must not
# start from inside a half-imported module of this package.
import tapegrad as _tapegrad  # noqa: F401

__version__ = "0.1.0"
