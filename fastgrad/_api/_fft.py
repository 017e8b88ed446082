"""The functions of ``fastgrad.np.fft`` with NumPy's signatures, built on the three FFT ops
of the derivative table (``_table_fft.py``) and the shape ops that pad, truncate,
conjugate and roll; all differentiable to any order, for real and complex inputs."""

import numpy as _np

from fastgrad._api import _functions as _F
from fastgrad._core._array import ndarray, _wrap
from fastgrad._ops._registry import REGISTRY as _P

_NORMS = (None, "backward", "ortho", "forward")


def _norm(name, norm):
    if norm not in _NORMS:
        raise ValueError("fastgrad.fft.%s: norm must be one of 'backward', 'ortho', 'forward' "
                         "or None, got %r" % (name, norm))
    return "backward" if norm is None else norm


def _swap(norm):
    return {"backward": "forward", "ortho": "ortho", "forward": "backward"}[norm]


def _array(name, a):
    if a is None:
        raise TypeError("fastgrad.fft.%s() missing required argument 'a'" % name)
    if isinstance(a, ndarray):
        return a if a.dtype.kind in "fc" else _F.astype(a, _np.float64)
    data = _np.asarray(a)
    return _wrap(data if data.dtype.kind in "fc" else data.astype(_np.float64))


def _is_complex(a):
    return a.dtype.kind == "c"


def _complex(a):
    return a if _is_complex(a) else _P["to_complex"](a)


def _axes_and_sizes(name, a, s, axes):
    nd = a.ndim
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
    axes = tuple(int(x) for x in ([axes] if isinstance(axes, (int, _np.integer)) else axes))
    for x in axes:
        if not -nd <= x < nd:
            raise ValueError("fastgrad.fft.%s: axis %d is out of bounds for an array of "
                             "dimension %d" % (name, x, nd))
    axes = tuple(x % nd for x in axes)
    if s is None:
        s = tuple(a.shape[x] for x in axes)
    else:
        s = tuple(int(v) for v in ([s] if isinstance(s, (int, _np.integer)) else s))
        if len(s) != len(axes):
            raise ValueError("fastgrad.fft.%s: s and axes have different lengths (%d, %d)"
                             % (name, len(s), len(axes)))
    for v in s:
        if v < 1:
            raise ValueError("fastgrad.fft.%s: invalid number of data points (%d)" % (name, v))
    return s, axes


def _fit(a, n, axis):
    """``a`` truncated or zero-padded at the end of ``axis`` to length ``n``."""
    m = a.shape[axis]
    if n == m:
        return a
    if n < m:
        key = tuple(slice(0, n) if d == axis else slice(None) for d in range(a.ndim))
        return a[key]
    width = [(0, 0)] * a.ndim
    width[axis] = (0, n - m)
    return _F.pad(a, width)


def _c2c(name, a, s, axes, norm, inverse):
    a = _array(name, a)
    norm = _norm(name, norm)
    s, axes = _axes_and_sizes(name, a, s, axes)
    for n, axis in zip(s, axes):
        a = _fit(a, n, axis)
    if not axes:
        return _F.copy(_complex(a))
    return _P["fftn_c2c"](_complex(a), axes, norm, inverse)


def _r2c(name, a, s, axes, norm):
    a = _array(name, a)
    if _is_complex(a):
        raise TypeError("fastgrad.fft.%s: the input a must be real, got %s (use fft for "
                        "complex input)" % (name, a.dtype))
    norm = _norm(name, norm)
    s, axes = _axes_and_sizes(name, a, s, axes)
    for n, axis in zip(s, axes):
        a = _fit(a, n, axis)
    return _P["rfftn"](a, axes, norm)


def _c2r(name, a, s, axes, norm):
    a = _array(name, a)
    norm = _norm(name, norm)
    nd = a.ndim
    if s is None:
        if axes is None:
            axes = tuple(range(nd))
        axes = tuple(int(x) % nd for x in ([axes] if isinstance(axes, int) else axes))
        s = tuple(a.shape[x] for x in axes[:-1]) + (2 * (a.shape[axes[-1]] - 1),)
    s, axes = _axes_and_sizes(name, a, s, axes)
    n = s[-1]
    for size, axis in zip(s[:-1], axes[:-1]):
        a = _fit(a, size, axis)
    a = _fit(a, n // 2 + 1, axes[-1])
    return _P["irfftn"](_complex(a), axes, n, norm)


# ---------------------------------------------------------------- NumPy's functions
def fft(a, n=None, axis=-1, norm=None):
    """The one-dimensional discrete Fourier transform (``numpy.fft.fft``); differentiable
    for real and complex ``a``.

    Examples
    --------
    >>> from fastgrad import np
    >>> np.fft.fft(np.array([1., 2., 3., 4.]))
    array([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j], dtype=complex64)
    """
    return _c2c("fft", a, None if n is None else (n,), (axis,), norm, False)


def ifft(a, n=None, axis=-1, norm=None):
    """The one-dimensional inverse discrete Fourier transform (``numpy.fft.ifft``)."""
    return _c2c("ifft", a, None if n is None else (n,), (axis,), norm, True)


def fft2(a, s=None, axes=(-2, -1), norm=None):
    """The two-dimensional discrete Fourier transform (``numpy.fft.fft2``)."""
    return _c2c("fft2", a, s, axes, norm, False)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """The two-dimensional inverse discrete Fourier transform (``numpy.fft.ifft2``)."""
    return _c2c("ifft2", a, s, axes, norm, True)


def fftn(a, s=None, axes=None, norm=None):
    """The N-dimensional discrete Fourier transform (``numpy.fft.fftn``)."""
    return _c2c("fftn", a, s, axes, norm, False)


def ifftn(a, s=None, axes=None, norm=None):
    """The N-dimensional inverse discrete Fourier transform (``numpy.fft.ifftn``)."""
    return _c2c("ifftn", a, s, axes, norm, True)


def rfft(a, n=None, axis=-1, norm=None):
    """The discrete Fourier transform of real input, non-negative frequencies only
    (``numpy.fft.rfft``).

    Examples
    --------
    >>> from fastgrad import np
    >>> np.fft.rfft(np.array([1., 2., 3., 4.]))
    array([10.+0.j, -2.+2.j, -2.+0.j], dtype=complex64)
    """
    return _r2c("rfft", a, None if n is None else (n,), (axis,), norm)


def irfft(a, n=None, axis=-1, norm=None):
    """The inverse of ``rfft``: ``n`` real points (default ``2 * (m - 1)``) from ``m``
    non-negative frequencies (``numpy.fft.irfft``)."""
    if n is None:
        return _c2r("irfft", a, None, (axis,), norm)
    return _c2r("irfft", a, (n,), (axis,), norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """The two-dimensional FFT of real input (``numpy.fft.rfft2``)."""
    return _r2c("rfft2", a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """The inverse of ``rfft2`` (``numpy.fft.irfft2``)."""
    return _c2r("irfft2", a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    """The N-dimensional FFT of real input (``numpy.fft.rfftn``)."""
    return _r2c("rfftn", a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    """The inverse of ``rfftn`` (``numpy.fft.irfftn``)."""
    return _c2r("irfftn", a, s, axes, norm)


def _reverse(a, axis):
    """``a[(-j) mod n]`` along ``axis``: conj(FFT(a)) = FFT(_reverse(a)) for real ``a``, and
    the inverse real FFT of conj(X) is the reversed inverse real FFT of X."""
    return _F.roll(_F.flip(a, axis), 1, axis)


def hfft(a, n=None, axis=-1, norm=None):
    """The FFT of a signal with Hermitian symmetry given by its first half: a real spectrum
    of ``n`` points (``numpy.fft.hfft``), ``irfft(conj(a))`` computed as the reversed
    ``irfft(a)``."""
    a = _array("hfft", a)
    norm = _swap(_norm("hfft", norm))
    out = _c2r("hfft", a, None if n is None else (n,), (axis,), norm)
    return _reverse(out, axis)


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of ``hfft`` for real input (``numpy.fft.ihfft``): ``conj(rfft(a))``
    computed as the ``rfft`` of the reversed signal."""
    a = _array("ihfft", a)
    if _is_complex(a):
        raise TypeError("fastgrad.fft.ihfft: the input a must be real, got %s" % a.dtype)
    norm = _swap(_norm("ihfft", norm))
    axis = int(axis) % max(a.ndim, 1)
    if n is not None:
        a = _fit(a, int(n), axis)
    return _r2c("ihfft", _reverse(a, axis), None, (axis,), norm)


def _shift(name, x, axes, sign):
    if not isinstance(x, ndarray):
        x = _wrap(_np.asarray(x))
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, (int, _np.integer)):
        axes = (int(axes),)
    axes = tuple(int(a) % max(x.ndim, 1) for a in axes)
    if not axes:
        return _F.copy(x)
    shift = tuple(sign * (x.shape[a] // 2) for a in axes)
    return _F.roll(x, shift, axes)


def fftshift(x, axes=None):
    """Move the zero-frequency term to the centre (``numpy.fft.fftshift``)."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, axes=None):
    """The inverse of ``fftshift`` (``numpy.fft.ifftshift``)."""
    return _shift("ifftshift", x, axes, -1)


def fftfreq(n, d=1.0):
    """The sample frequencies of ``fft`` (``numpy.fft.fftfreq``; not differentiable)."""
    return _wrap(_np.fft.fftfreq(n, d))


def rfftfreq(n, d=1.0):
    """The sample frequencies of ``rfft`` (``numpy.fft.rfftfreq``; not differentiable)."""
    return _wrap(_np.fft.rfftfreq(n, d))


__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
           "irfft2", "rfftn", "irfftn", "hfft", "ihfft", "fftshift", "ifftshift", "fftfreq",
           "rfftfreq"]

# NumPy's functions -> these, for ``numpy.fft.fft(fastgrad_array)`` (``__array_function__``).
FUNCS = {getattr(_np.fft, name): globals()[name] for name in __all__}
