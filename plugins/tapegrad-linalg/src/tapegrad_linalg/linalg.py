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

from .decompositions import (EighResult, EigResult, QRResult, SlogdetResult, SVDResult, cholesky,
                             det, eig, eigh, eigvals, eigvalsh, inv, lstsq, matrix_rank, pinv, qr,
                             slogdet, solve, svd, svdvals)
from .norms import cond, matrix_norm, norm, vector_norm
from .products import (cross, matrix_power, matrix_transpose, multi_dot, outer, tensorinv,
                       tensorsolve, vecdot)

LinAlgError = np.linalg.LinAlgError


def matmul(x1, x2, /):
    """``np.linalg.matmul``: the same as ``tg.matmul`` (``x1 @ x2``)."""
    return tg.matmul(x1, x2)


__all__ = ["LinAlgError", "SlogdetResult", "EighResult", "EigResult", "QRResult", "SVDResult",
           "inv", "det", "slogdet", "solve", "cholesky", "qr", "eigh", "eigvalsh", "eig",
           "eigvals", "svd", "svdvals", "pinv", "lstsq", "matrix_rank", "norm", "vector_norm",
           "matrix_norm", "cond", "matrix_power", "multi_dot", "outer", "vecdot", "cross",
           "matrix_transpose", "tensorinv", "tensorsolve", "matmul"]
