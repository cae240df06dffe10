"""tapegrad-linalg: matrix products for tapegrad (``matmul`` and ``@``, ``dot``, ``einsum``).

The ops live in :mod:`tapegrad_linalg.ops`, which tapegrad loads through the entry point
``tapegrad: linalg``; use them as ``x @ w``, ``tg.matmul``, ``tg.dot``, ``t.dot`` and
``tg.einsum``.

>>> import tapegrad as tg
>>> x = tg.tensor([[1., 2.], [3., 4.]], requires_grad=True)
>>> (x @ x).sum().backward()
>>> x.grad
tensor([[ 7., 11.],
        [ 9., 13.]])
"""

# NOTE: import tapegrad before anything of this package: tapegrad's import loads the
# entry point `tapegrad_linalg.ops`, which must not be half-imported at that moment (its
# hooks would not exist yet and the plugin would register nothing).
import tapegrad as _tapegrad  # noqa: F401

__version__ = "0.1.0"
