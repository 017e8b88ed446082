"""Differentiable linear algebra from SciPy: ``fastgrad.scipy.linalg`` (``scipy.linalg``).

Examples
--------
>>> from fastgrad import np
>>> from fastgrad.scipy.linalg import expm
>>> expm(np.array([[0., 1.], [0., 0.]]))
array([[1., 1.],
       [0., 1.]])
"""

from fastgrad import _functions as F
from fastgrad._linalg import linalg as _np_linalg
from fastgrad._registry import REGISTRY as _P
from fastgrad.scipy.stats._common import as_array

_TRANS = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """The solution ``x`` of ``a x = b`` (``trans=0``) or ``a^T x = b`` (``trans=1``) for
    triangular ``a`` (``scipy.linalg.solve_triangular``); differentiable in ``a`` (its
    triangle) and ``b``."""
    if trans not in _TRANS:
        raise ValueError("fastgrad.scipy.linalg.solve_triangular: trans must be 0, 1, 2, 'N', "
                         "'T' or 'C', got %r" % (trans,))
    a, b = as_array(a), as_array(b)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("fastgrad.scipy.linalg.solve_triangular: a must be a square matrix, "
                         "got shape %s" % (a.shape,))
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError("fastgrad.scipy.linalg.solve_triangular: b must have %d rows, got "
                         "shape %s" % (a.shape[0], b.shape))
    return _P["solve_triangular"](a, b, bool(lower), _TRANS[trans], bool(unit_diagonal))


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor of a positive-definite matrix, upper (``a = U^T U``) unless
    ``lower`` (``scipy.linalg.cholesky``)."""
    factor = _np_linalg.cholesky(as_array(a))
    return factor if lower else F.swapaxes(factor, -1, -2)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``(c, lower)`` for ``cho_solve`` (``scipy.linalg.cho_factor``). Unlike SciPy, the
    other triangle of ``c`` is zero, not left over from ``a``."""
    return cholesky(a, lower=lower), bool(lower)


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """The solution of ``a x = b`` from ``cho_factor(a)`` (``scipy.linalg.cho_solve``);
    differentiable in the factor and ``b``."""
    c, lower = c_and_lower
    y = solve_triangular(c, b, trans=0 if lower else 1, lower=lower)
    return solve_triangular(c, y, trans=1 if lower else 0, lower=lower)


def expm(A):
    """The matrix exponential (``scipy.linalg.expm``); its gradient is the adjoint Fréchet
    derivative, computed as a block exponential, so it is differentiable to any order."""
    return _P["expm"](as_array(A))


def sqrtm(A, disp=True, blocksize=64):
    """The principal square root of a matrix with no negative real eigenvalues
    (``scipy.linalg.sqrtm``); its gradient solves a Sylvester equation."""
    return _P["sqrtm"](as_array(A))


def solve_sylvester(a, b, q):
    """The solution ``x`` of ``a x + x b = q`` (``scipy.linalg.solve_sylvester``),
    differentiable in all three."""
    return _P["sylvester"](as_array(a), as_array(b), as_array(q))


__all__ = ["solve_triangular", "cholesky", "cho_factor", "cho_solve", "expm", "sqrtm",
           "solve_sylvester"]
