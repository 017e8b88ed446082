"""Linear algebra with NumPy's signatures: ``fastgrad.np.linalg`` (``linalg``).

Each function normalizes its arguments and calls table ops (``inv``, ``det``, ``eigh``, ...)
or composes the NumPy-signature functions of ``_functions.py``, so every one is differentiable
to any order.
"""

import types as _types

import numpy as _np

from fastgrad._core._array import unwrap, _wrap
from fastgrad._api._functions import _P, _axis, _check_out, _ndim
from fastgrad._api._functions import (conj, dot, exp, expand_dims, imag, matmul, moveaxis, ravel,
                                      real, reshape, shape, swapaxes, tril, triu, where)
from fastgrad._api._functions import max, min, sum   # the reductions, not Python's builtins


# ---------------------------------------------------------------- linalg (fastgrad.np.linalg)
def _square(name, a):
    shape = _np.shape(unwrap(a))
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise _np.linalg.LinAlgError("fastgrad.linalg.%s: expected a (stack of) square "
                                     "matrices, got shape %s" % (name, shape))


def _norm(x, ord=None, axis=None, keepdims=False):
    """Matrix or vector norm (``numpy.linalg.norm``), differentiable.

    Vector norms of any order, and the Frobenius (``'fro'``), nuclear (``'nuc'``), 1, -1, 2,
    -2, inf and -inf matrix norms. The gradient is undefined where the norm is zero.
    """
    nd = _ndim(x)
    if axis is not None:
        axis = _axis(axis)
        if isinstance(axis, tuple) and len(axis) == 1:
            axis = axis[0]
    matrix = (isinstance(axis, tuple) and len(axis) == 2) or (axis is None and nd == 2
                                                              and ord is not None)
    if matrix and ord in (2, -2, "nuc"):
        axes = axis if axis is not None else (0, 1)
        axes = tuple(a % nd for a in axes)
        s = _svdvals(moveaxis(x, axes, (nd - 2, nd - 1)))
        red = {2: max, -2: min, "nuc": sum}[ord](s, axis=-1)
        if keepdims:
            for a in sorted(axes):
                red = expand_dims(red, a)
        return red
    if axis is None and ord is not None and nd > 2:
        raise ValueError("fastgrad.linalg.norm: ord=%r needs a 1-D or 2-D array or an axis"
                         % (ord,))
    return _P["norm"](x, ord, axis, bool(keepdims))


def _vector_norm(x, axis=None, keepdims=False, ord=2):
    """The vector norm of ``x`` over ``axis`` (all elements if None),
    ``numpy.linalg.vector_norm``."""
    if axis is None:
        x = ravel(x)
        out = _P["norm"](x, ord, 0, False)
        if keepdims:
            out = reshape(out, (1,) * len(_np.shape(unwrap(x))))
        return out
    return _P["norm"](x, ord, _axis(axis), bool(keepdims))


def _matrix_norm(x, keepdims=False, ord="fro"):
    """The matrix norm over the last two axes (``numpy.linalg.matrix_norm``)."""
    return _norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def _inv(a):
    """The inverse of a (stack of) square matrices (``numpy.linalg.inv``)."""
    _square("inv", a)
    return _P["inv"](a)


def _det(a):
    """The determinant of a (stack of) square matrices (``numpy.linalg.det``)."""
    _square("det", a)
    return _P["det"](a)


def _slogdet(a):
    """Sign and log of the absolute determinant (``numpy.linalg.slogdet``); the log is
    differentiable, and so is the sign of complex input (``det / |det|``; the sign of real
    input is locally constant: Note [Complex slogdet] in _table_linalg.py)."""
    _square("slogdet", a)
    if _np.iscomplexobj(unwrap(a)):
        ld = _P["logdet"](a)
        logabs = real(ld)
        sign = exp(1j * imag(ld))
        singular = unwrap(logabs) == -_np.inf
        if _np.any(singular):               # NumPy's sign of a singular matrix is 0
            sign = where(singular, 0j, sign)
        return sign, logabs
    return _P["slogdet"](a)


def _solve(a, b):
    """The solution ``x`` of ``a @ x = b`` (``numpy.linalg.solve``); ``b`` is a vector when
    it is 1-D, otherwise a (stack of) matrices."""
    _square("solve", a)
    return _P["solve"](a, b)


def _conj_swap(x):
    """The conjugate transpose of the last two axes (the transpose of real ``x``)."""
    t = swapaxes(x, -1, -2)
    return conj(t) if _np.iscomplexobj(unwrap(x)) else t


def _cholesky(a, upper=False):
    """The lower Cholesky factor of the symmetric part of ``a`` (``numpy.linalg.cholesky``),
    or with ``upper=True`` its conjugate transpose.

    NumPy reads only the lower triangle; fastgrad factors ``(a + a^H) / 2`` (``a^H`` the
    transpose of real ``a``), which is the same for symmetric (Hermitian) input and makes the
    gradient symmetric (Hermitian) and well defined.
    """
    _square("cholesky", a)
    low = _P["cholesky"](a)
    return _conj_swap(low) if upper else low


def _triangle(name, a, UPLO):
    """The symmetric (complex: Hermitian) matrix that NumPy's ``eigh`` reads from one triangle
    of ``a`` (LAPACK ignores the imaginary part of the diagonal; the ops take the Hermitian
    part, which drops it too)."""
    _square(name, a)
    if UPLO not in ("L", "U", "l", "u"):
        raise ValueError("fastgrad.linalg.%s: UPLO must be 'L' or 'U', got %r" % (name, UPLO))
    if UPLO in ("L", "l"):
        return tril(a) + _conj_swap(tril(a, -1))
    return triu(a) + _conj_swap(triu(a, 1))


def _eigh(a, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of the symmetric (complex: Hermitian) matrix
    held in the lower (``UPLO='L'``) or upper triangle of ``a`` (``numpy.linalg.eigh``);
    differentiable where the eigenvalues are distinct, and at repeated eigenvalues for a
    function of the eigenvalues alone. Complex eigenvectors are defined up to a phase each: a
    loss that depends on it is an error."""
    return _P["eigh"](_triangle("eigh", a, UPLO))


def _eigvalsh(a, UPLO="L"):
    """Eigenvalues of the symmetric matrix in one triangle of ``a`` (``numpy.linalg.eigvalsh``)."""
    return _P["eigvalsh"](_triangle("eigvalsh", a, UPLO))


def _qr(a, mode="reduced"):
    """The reduced QR decomposition (``numpy.linalg.qr``); differentiable for matrices with
    at least as many rows as columns and full rank."""
    if mode != "reduced":
        raise NotImplementedError("fastgrad.linalg.qr: only mode='reduced' is supported")
    m, n = _np.shape(unwrap(a))[-2:]
    if m < n:
        raise NotImplementedError("fastgrad.linalg.qr: the derivative needs at least as many "
                                  "rows as columns, got shape %s" % (_np.shape(unwrap(a)),))
    return _P["qr"](a)


def _svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """The singular value decomposition ``u, s, vh`` (``numpy.linalg.svd``).

    Differentiable where the singular values are distinct and non-zero; with
    ``full_matrices=True`` on non-square input, while the loss does not use the completed
    singular vectors (which are not unique). Complex singular vectors are defined up to a
    phase (``u[:, j]`` and ``vh[j]`` together): a loss that depends on it is an error.
    """
    if not compute_uv:
        return _svdvals(a)
    shape = _np.shape(unwrap(a))
    u, sv, vh = _P["svd"](a)
    if full_matrices and shape[-1] != shape[-2]:
        # The completed vectors are not unique: differentiable while the loss does not use
        # them (the complete_basis rule raises otherwise).
        if shape[-2] > shape[-1]:
            u = _P["complete_basis"](u)
        else:
            vh = swapaxes(_P["complete_basis"](swapaxes(vh, -1, -2)), -1, -2)
    return u, sv, vh


def _svdvals(a):
    """The singular values, descending (``numpy.linalg.svdvals``)."""
    return _P["svd"](a)[1]


def _pinv(a, rcond=None, hermitian=False, *, rtol=None):
    """The Moore-Penrose pseudo-inverse (``numpy.linalg.pinv``): singular values at or below
    ``rtol`` (or ``rcond``) times the largest are treated as zero; the default is
    ``max(M, N) * eps``, NumPy's. Differentiable wherever the rank is locally constant, so at
    rank-deficient matrices too (the derivative of the pseudo-inverse of that rank)."""
    if rcond is not None and rtol is not None:
        raise ValueError("fastgrad.linalg.pinv: pass rcond or rtol, not both")
    cut = rtol if rtol is not None else rcond
    return _P["pinv"](a, None if cut is None else float(cut))


def _matrix_power(a, n):
    """``a`` multiplied by itself ``n`` times (``numpy.linalg.matrix_power``)."""
    _square("matrix_power", a)
    n = int(n)
    if n < 0:
        a, n = _inv(a), -n
    if n == 0:
        shape = _np.shape(unwrap(a))
        return _wrap(_np.broadcast_to(_np.eye(shape[-1], dtype=unwrap(a).dtype), shape).copy())
    result, base = None, a
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


def _multi_dot(arrays, out=None):
    """Chained ``dot`` of several arrays (``numpy.linalg.multi_dot``)."""
    _check_out("linalg.multi_dot", out)
    arrays = list(arrays)
    result = arrays[0]
    for a in arrays[1:]:
        result = dot(result, a)
    return result


def _matrix_transpose(x):
    """Swap the last two axes (``numpy.linalg.matrix_transpose``)."""
    return swapaxes(x, -1, -2)


def _named(fn, name):
    fn.__name__ = fn.__qualname__ = name
    return fn


linalg = _types.SimpleNamespace(**{
    name: _named(fn, name) for name, fn in [
        ("norm", _norm), ("vector_norm", _vector_norm), ("matrix_norm", _matrix_norm),
        ("inv", _inv), ("det", _det), ("slogdet", _slogdet), ("solve", _solve),
        ("cholesky", _cholesky), ("eigh", _eigh), ("eigvalsh", _eigvalsh), ("qr", _qr),
        ("svd", _svd), ("svdvals", _svdvals), ("pinv", _pinv),
        ("matrix_power", _matrix_power), ("multi_dot", _multi_dot),
        ("matrix_transpose", _matrix_transpose)]})
"""The functions of ``fastgrad.np.linalg`` (re-exported by ``fastgrad/numpy/linalg.py``)."""
linalg.LinAlgError = _np.linalg.LinAlgError
