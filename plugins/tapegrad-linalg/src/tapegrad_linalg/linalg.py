"""``tg.linalg``: NumPy's ``np.linalg``, differentiable.

Every name is np.linalg's, with its signature and semantics (batched over leading axes
where NumPy's is). The ops behind them sit in tapegrad's flat op table as
``linalg_<name>`` (``tg.linalg_inv``), so that no linalg name (``norm``, ``solve``)
collides with another plugin's; the public spelling is ``tg.linalg.<name>``. NumPy's
``LinAlgError`` (a ValueError) is raised as itself by the names here. Conventions for
degenerate inputs and what is refused: docs/linalg.md.

>>> import tapegrad as tg
>>> a = tg.tensor([[3., 1.], [1., 2.]], requires_grad=True)
>>> x = tg.linalg.solve(a, tg.tensor([9., 8.]))
>>> x.tolist()
[2.0, 3.0]
>>> tg.linalg.inv(tg.zeros((2, 2)))
Traceback (most recent call last):
    ...
numpy.linalg.LinAlgError: linalg_inv: Singular matrix ...
"""

import numpy as np
import tapegrad as tg
from tapegrad._dim_keywords import wrap_function as _with_dim_keywords

from .decompositions import (EighResult, EigResult, QRResult, SlogdetResult, SVDResult, cholesky,
                             det, eig, eigh, eigvals, eigvalsh, inv, lstsq, matrix_rank, pinv, qr,
                             slogdet, solve, svd, svdvals)
from .norms import cond, matrix_norm, norm, vector_norm
from .products import (cross, matrix_power, matrix_transpose, multi_dot, outer, tensorinv,
                       tensorsolve, vecdot)

LinAlgError = np.linalg.LinAlgError

# torch.linalg's dim=/keepdim= mean what axis=/keepdims= mean here (Note: [dim= and
# keepdim=] in tapegrad/_dim_keywords.py); the flat ops (tg.linalg_norm) take them already.
norm = _with_dim_keywords("linalg_norm", norm)
vector_norm = _with_dim_keywords("linalg_vector_norm", vector_norm)
cross = _with_dim_keywords("linalg_cross", cross)
vecdot = _with_dim_keywords("linalg_vecdot", vecdot)


def matmul(x1, x2, /):
    """``np.linalg.matmul``: the same as ``tg.matmul`` (``x1 @ x2``)."""
    return tg.matmul(x1, x2)


def diagonal(x, /, *, offset=0):
    """``np.linalg.diagonal``: the diagonals of the last two axes (``tg.diagonal`` with
    ``axis1=-2, axis2=-1``, the array-API form).

    >>> tg.linalg.diagonal(tg.arange(8.).reshape(2, 2, 2)).tolist()
    [[0.0, 3.0], [4.0, 7.0]]
    """
    return tg.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def trace(x, /, *, offset=0, dtype=None):
    """``np.linalg.trace``: the traces of the last two axes (``tg.trace`` with
    ``axis1=-2, axis2=-1``, the array-API form).

    >>> tg.linalg.trace(tg.arange(8.).reshape(2, 2, 2)).tolist()
    [3.0, 11.0]
    """
    return tg.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def tensordot(x1, x2, /, *, axes=2):
    """``np.linalg.tensordot``: ``tg.tensordot`` with ``axes`` by keyword only."""
    return tg.tensordot(x1, x2, axes=axes)


__all__ = ["LinAlgError", "SlogdetResult", "EighResult", "EigResult", "QRResult", "SVDResult",
           "inv", "det", "slogdet", "solve", "cholesky", "qr", "eigh", "eigvalsh", "eig",
           "eigvals", "svd", "svdvals", "pinv", "lstsq", "matrix_rank", "norm", "vector_norm",
           "matrix_norm", "cond", "matrix_power", "multi_dot", "outer", "vecdot", "cross",
           "matrix_transpose", "tensorinv", "tensorsolve", "matmul", "diagonal", "trace",
           "tensordot"]
