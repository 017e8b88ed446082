"""Differentiable linear algebra: ``fastgrad.np.linalg`` (MXNet's ``mx.np.linalg``).

The implementations live in ``fastgrad._api._linalg``; every function here is a
table op or a composition of table ops, so it is differentiable to any order.
"""

from fastgrad._api._linalg import linalg as _impl
from fastgrad._api import _numpy_composites as _more

norm = _impl.norm
vector_norm = _impl.vector_norm
matrix_norm = _impl.matrix_norm
inv = _impl.inv
det = _impl.det
slogdet = _impl.slogdet
solve = _impl.solve
cholesky = _impl.cholesky
eigh = _impl.eigh
eigvalsh = _impl.eigvalsh
qr = _impl.qr
svd = _impl.svd
svdvals = _impl.svdvals
pinv = _impl.pinv
matrix_power = _impl.matrix_power
multi_dot = _impl.multi_dot
matrix_transpose = _impl.matrix_transpose
LinAlgError = _impl.LinAlgError
eig = _more.LINALG["eig"]
eigvals = _more.LINALG["eigvals"]
lstsq = _more.LINALG["lstsq"]

__all__ = ["norm", "vector_norm", "matrix_norm", "inv", "det", "slogdet", "solve", "cholesky",
           "eigh", "eigvalsh", "qr", "svd", "svdvals", "pinv", "matrix_power", "multi_dot",
           "matrix_transpose", "LinAlgError"]
__all__ += ["eig", "eigvals", "lstsq"]
