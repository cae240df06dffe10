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

from __future__ import annotations

import functools

import numpy as np
import tapegrad as tg

from . import decompositions as _dec
from . import norms as _norms
from . import products as _prod

LinAlgError = np.linalg.LinAlgError
SlogdetResult = _dec.SlogdetResult
EighResult = _dec.EighResult
EigResult = _dec.EigResult
QRResult = _dec.QRResult
SVDResult = _dec.SVDResult


def _linalg_errors(fn):
    """fn, re-raising NumPy's LinAlgError as LinAlgError (the engine reports a kernel's
    ValueError, LinAlgError's base, as a plain ValueError naming the op)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except LinAlgError:
            raise
        except ValueError as exc:
            if isinstance(exc.__cause__, LinAlgError):
                raise LinAlgError(str(exc)) from exc.__cause__
            raise
    return call


def _op(name, signature_doc):
    """The public function for the op ``linalg_<name>`` (looked up when called)."""
    def call(*args, **kwargs):
        return getattr(tg, "linalg_" + name)(*args, **kwargs)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``np.linalg.{signature_doc}``, the op ``linalg_{name}`` (see docs/linalg.md)."
    return _linalg_errors(call)


inv = _op("inv", "inv(a)")
det = _op("det", "det(a)")
solve = _op("solve", "solve(a, b)")
cholesky = _op("cholesky", "cholesky(a, /, *, upper=False)")
eigvalsh = _op("eigvalsh", "eigvalsh(a, UPLO='L')")
eigvals = _op("eigvals", "eigvals(a)")
svdvals = _op("svdvals", "svdvals(x, /)")
pinv = _op("pinv", "pinv(a, rcond=None, hermitian=False, *, rtol=<no value>)")
matrix_rank = _op("matrix_rank", "matrix_rank(A, tol=None, hermitian=False, *, rtol=None)")

slogdet = _linalg_errors(_dec.slogdet)
qr = _linalg_errors(_dec.qr)
eigh = _linalg_errors(_dec.eigh)
eig = _linalg_errors(_dec.eig)
svd = _linalg_errors(_dec.svd)
lstsq = _linalg_errors(_dec.lstsq)

norm = _linalg_errors(_norms.norm)
vector_norm = _linalg_errors(_norms.vector_norm)
matrix_norm = _linalg_errors(_norms.matrix_norm)
cond = _linalg_errors(_norms.cond)

matrix_power = _linalg_errors(_prod.matrix_power)
multi_dot = _linalg_errors(_prod.multi_dot)
outer = _prod.outer
vecdot = _prod.vecdot
cross = _prod.cross
matrix_transpose = _prod.matrix_transpose
tensorinv = _linalg_errors(_prod.tensorinv)
tensorsolve = _linalg_errors(_prod.tensorsolve)


def matmul(x1, x2, /):
    """``np.linalg.matmul``: the same as ``tg.matmul`` (``x1 @ x2``)."""
    return tg.matmul(x1, x2)


__all__ = ["LinAlgError", "SlogdetResult", "EighResult", "EigResult", "QRResult", "SVDResult",
           "inv", "det", "slogdet", "solve", "cholesky", "qr", "eigh", "eigvalsh", "eig",
           "eigvals", "svd", "svdvals", "pinv", "lstsq", "matrix_rank", "norm", "vector_norm",
           "matrix_norm", "cond", "matrix_power", "multi_dot", "outer", "vecdot", "cross",
           "matrix_transpose", "tensorinv", "tensorsolve", "matmul"]
