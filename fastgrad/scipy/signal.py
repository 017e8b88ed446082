"""Differentiable signal processing: ``fastgrad.scipy.signal`` (``scipy.signal``).

Examples
--------
>>> from fastgrad import np
>>> from fastgrad.scipy.signal import convolve
>>> convolve(np.array([1., 2., 3.]), np.array([0., 1., 0.5]), mode="same")
array([1. , 2.5, 4. ])
"""

from fastgrad._api import _functions as F
from fastgrad._ops._registry import REGISTRY as _P
from fastgrad.scipy.stats._common import as_array


def convolve(in1, in2, mode="full", method="auto"):
    """The N-dimensional convolution of ``in1`` and ``in2`` (``scipy.signal.convolve``),
    differentiable in both, with ``mode`` 'full', 'valid' or 'same'.

    ``method`` is accepted for compatibility; the kernel always sums directly, so the result
    is exact whatever SciPy would have chosen.
    """
    if mode not in ("full", "valid", "same"):
        raise ValueError("fastgrad.scipy.signal.convolve: mode must be 'full', 'valid' or "
                         "'same', got %r" % (mode,))
    if method not in ("auto", "direct", "fft"):
        raise ValueError("fastgrad.scipy.signal.convolve: method must be 'auto', 'direct' or "
                         "'fft', got %r" % (method,))
    a, b = as_array(in1), as_array(in2)
    if a.ndim != b.ndim:
        raise ValueError("fastgrad.scipy.signal.convolve: in1 and in2 should have the same "
                         "dimensionality (%d and %d)" % (a.ndim, b.ndim))
    if a.ndim == 0:
        return a * b
    if mode == "valid":
        if all(m >= n for m, n in zip(b.shape, a.shape)) and b.shape != a.shape:
            a, b = b, a
        elif not all(m >= n for m, n in zip(a.shape, b.shape)):
            raise ValueError("fastgrad.scipy.signal.convolve: for 'valid' mode, one of in1 "
                             "and in2 must be at least as large as the other in every "
                             "dimension, got shapes %s and %s" % (a.shape, b.shape))
        return _P["convolve_valid"](a, b)
    full = _P["convolve_full"](a, b)
    if mode == "full":
        return full
    start = [(m - 1) // 2 for m in b.shape]
    return full[tuple(slice(s, s + n) for s, n in zip(start, a.shape))]


def correlate(in1, in2, mode="full", method="auto"):
    """The N-dimensional cross-correlation (``scipy.signal.correlate``): the convolution
    with ``in2`` reversed along every axis."""
    b = as_array(in2)
    return convolve(in1, F.flip(F.conjugate(b) if b.dtype.kind == "c" else b), mode, method)


__all__ = ["convolve", "correlate"]
