"""Differentiable linear algebra from SciPy: ``fastgrad.scipy.linalg`` (``scipy.linalg``).

Examples
--------
>>> from fastgrad import np
>>> from fastgrad.scipy.linalg import expm
>>> expm(np.array([[0., 1.], [0., 0.]]))
array([[1., 1.],
       [0., 1.]])
"""

import numpy as _onp

from fastgrad._api import _functions as F
from fastgrad._core._array import unwrap, _wrap
from fastgrad._core._custom_function import Function
from fastgrad._api._linalg import linalg as _np_linalg
from fastgrad._ops._registry import REGISTRY as _P
from fastgrad._ops._table_special import _scipy
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


def _band_moved(ab, l, u, shift):
    """``ab[l + u - r, j + r - shift]`` at each ``(r, j)`` of the band storage (zero where
    the column is outside the matrix): with ``shift = l`` the storage of the transpose."""
    rows, n = ab.shape[0], ab.shape[1]
    r = _onp.arange(rows)[:, None]
    cols = _onp.arange(n)[None, :] + r - shift
    mask = (cols >= 0) & (cols < n)
    picked = ab[_onp.broadcast_to(l + u - r, cols.shape), _onp.clip(cols, 0, n - 1)]
    return picked * mask.astype(unwrap(ab).dtype)


class _SolveBanded(Function):
    """The recorded call of ``solve_banded``. For ``x = A^{-1} b``: ``gb = A^{-T} g`` is
    another banded solve (the transpose's storage gathered from ``ab``), and ``gA = -gb
    x^T`` is read on the band only; both are written with fastgrad ops, this one included,
    so the gradient is differentiable again, to any order."""

    def __init__(self, l, u):
        super().__init__()
        self.l, self.u = l, u

    def forward(self, ab, b):
        x = _scipy("linalg").solve_banded((self.l, self.u), unwrap(ab), unwrap(b))
        x = _wrap(_onp.asarray(x, dtype=_onp.result_type(unwrap(ab), unwrap(b))))
        self.save_for_backward(ab, x)
        return x

    def backward(self, g):
        ab, x = self.saved_tensors
        l, u = self.l, self.u
        n = ab.shape[1]
        gb = solve_banded((u, l), _band_moved(ab, l, u, l), g)
        r = _onp.arange(l + u + 1)[:, None]
        rows = _onp.arange(n)[None, :] + r - u
        mask = ((rows >= 0) & (rows < n)).astype(unwrap(ab).dtype)
        picked = gb[_onp.clip(rows, 0, n - 1)]                    # gb[j + r - u] at (r, j)
        if x.ndim == 1:
            gab = -(picked * x) * mask
        else:
            gab = -F.sum(picked * x, axis=-1) * mask
        return gab, gb


def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
    """The solution of ``a x = b`` for a banded ``a`` in SciPy's band storage ``ab``
    (``ab[u + i - j, j] = a[i, j]``, ``scipy.linalg.solve_banded``), differentiable in
    ``ab`` (its entries inside the matrix) and ``b``, to any order. ``b`` is a vector or a
    matrix of right-hand sides.

    Examples
    --------
    >>> from fastgrad import np
    >>> from fastgrad.scipy.linalg import solve_banded
    >>> ab = np.array([[0., 1., 1.], [4., 4., 4.], [1., 1., 0.]], dtype="float64")
    >>> solve_banded((1, 1), ab, np.array([5., 6., 5.], dtype="float64"))
    array([1., 1., 1.], dtype=float64)
    """
    l, u = (int(v) for v in l_and_u)
    ab, b = as_array(ab), as_array(b)
    if l < 0 or u < 0 or ab.ndim != 2 or ab.shape[0] != l + u + 1:
        raise ValueError("fastgrad.scipy.linalg.solve_banded: ab must have l + u + 1 = %d "
                         "rows for (l, u) = (%d, %d), got shape %s"
                         % (l + u + 1, l, u, ab.shape))
    if b.ndim not in (1, 2) or b.shape[0] != ab.shape[1]:
        raise ValueError("fastgrad.scipy.linalg.solve_banded: b must have %d rows (the "
                         "columns of ab), got shape %s" % (ab.shape[1], b.shape))
    return _SolveBanded(l, u)(ab, b)


__all__ = ["solve_triangular", "cholesky", "cho_factor", "cho_solve", "expm", "sqrtm",
           "solve_sylvester", "solve_banded"]
