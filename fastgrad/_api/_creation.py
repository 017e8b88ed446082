"""Arrays made from values, shapes or other arrays' shapes: ``array``, ``zeros``, ``eye``...

Creation records nothing, except ``array`` of a recorded array (a copy or a cast of it) or of
a list holding recorded arrays (Note [History through construction] in _construction.py).
Python numbers and lists give float32, MXNet's default. ``fastgrad._api._functions`` re-exports
these as part of ``fastgrad.np``; ``linspace``, differentiable in its endpoints, is there.
"""

import numpy as _np

from fastgrad._core._array import ndarray, unwrap, _wrap
from fastgrad.context import check_device as _check_device
from fastgrad._api._construction import (holds_array as _holds_array,
                                         from_sequence as _from_sequence,
                                         check_numeric as _check_numeric)
from fastgrad._ops._registry import REGISTRY as _P

_DEFAULT_FLOAT = _np.float32      # MXNet's default; float64 after npx.set_np(dtype=True)


def default_float():
    """The dtype Python numbers and lists become: float32, or float64 after
    ``npx.set_np(dtype=True)``."""
    return _DEFAULT_FLOAT


def set_default_float(dtype):
    """Make ``dtype`` the default float type of new arrays (``npx.set_np``/``reset_np``)."""
    global _DEFAULT_FLOAT
    _DEFAULT_FLOAT = _np.dtype(dtype).type


# ---------------------------------------------------------------- creation (no history)
def _float_default(obj, dtype):
    if dtype is not None:
        return _np.dtype(dtype)
    if isinstance(obj, (ndarray, _np.ndarray, _np.generic)):
        return obj.dtype          # NumPy arrays and scalars keep their dtype
    try:
        probe = _np.asarray(obj)
    except ValueError as exc:          # NumPy's "inhomogeneous shape"
        raise TypeError("fastgrad.array: argument 'object' is ragged or not numeric (%s)"
                        % exc) from None
    if probe.dtype.kind in "fiu":
        return _np.dtype(_DEFAULT_FLOAT)
    return probe.dtype


def array(object, dtype=None, ctx=None, copy=True, device=None):
    """Create an array. Python numbers and lists give float32 (MXNet's default); a NumPy
    array keeps its dtype unless ``dtype`` is given.

    A recorded array, or a list or tuple holding recorded arrays, gives a recorded result
    with NumPy's result dtype (Note [History through construction]). Values that are not
    numbers, and ragged sequences, raise ``TypeError``.

    Examples
    --------
    >>> import fastgrad as mx
    >>> mx.np.array([[1, 2], [3, 4]])
    array([[1., 2.],
           [3., 4.]])
    """
    _check_device(ctx or device)
    if isinstance(object, ndarray) and object.node is not None:
        if dtype is not None and _np.dtype(dtype) != object.dtype:
            return _P["astype"](object, _np.dtype(dtype))   # fastgrad.np.astype
        return _P["copy"](object) if copy else object
    if (type(object) is list or type(object) is tuple) and _holds_array(object):
        return _as_recorded(_from_sequence(object, dtype))
    data = unwrap(object)
    if isinstance(data, _np.ndarray) and data.dtype.kind == "O" and dtype is None:
        try:
            data = _np.array(data.tolist())
        except ValueError as exc:
            raise TypeError("fastgrad.array: argument 'object' is a ragged object array (%s)"
                            % exc) from None
        _check_numeric(data.dtype, "fastgrad.array: argument 'object'")
    dt = _float_default(data if isinstance(data, _np.ndarray) else object, dtype)
    _check_numeric(dt, "fastgrad.array: argument 'object'")
    try:
        return _wrap(_np.array(data, dtype=dt, copy=True if copy else None))
    except (ValueError, TypeError) as exc:
        raise TypeError("fastgrad.array: argument 'object' cannot be converted to %s (%s)"
                        % (dt, exc)) from None


def genfromtxt(*args, ctx=None, device=None, **kwargs):
    """NumPy's ``genfromtxt`` read into a fastgrad array of the dtype NumPy chose (MXNet's
    ``mx.np.genfromtxt``: its result keeps NumPy's dtype, float64 unless ``dtype=`` says
    otherwise; ``ctx`` is accepted)."""
    _check_device(ctx or device)
    values = _np.genfromtxt(*args, **kwargs)
    return _wrap(_np.array(values, dtype=values.dtype, copy=True))


def _as_recorded(out):
    return out if isinstance(out, ndarray) else _wrap(out)


def asarray(a, dtype=None, ctx=None, device=None):
    """``a`` as a fastgrad array, without a copy when it already is one of that dtype."""
    if isinstance(a, ndarray) and (dtype is None or _np.dtype(dtype) == a.dtype):
        return a
    return array(a, dtype=dtype, copy=False)


def _creation(fn, name):
    def create(shape, dtype=None, order="C", ctx=None, device=None):
        _check_device(ctx or device)
        return _wrap(fn(shape, dtype=_DEFAULT_FLOAT if dtype is None else dtype))
    create.__name__ = create.__qualname__ = name
    create.__doc__ = ("A new array of the given shape (``numpy.%s``); float32 unless "
                      "``dtype`` is given. Not recorded." % name)
    return create


zeros = _creation(_np.zeros, "zeros")
ones = _creation(_np.ones, "ones")
empty = _creation(_np.empty, "empty")


def full(shape, fill_value, dtype=None, order="C", ctx=None, device=None):
    """A new array filled with ``fill_value`` (float32 unless ``dtype`` is given)."""
    _check_device(ctx or device)
    return _wrap(_np.full(shape, unwrap(fill_value),
                          dtype=_DEFAULT_FLOAT if dtype is None else dtype))


def _like(fn, name):
    def like(a, dtype=None, order="C", subok=True, shape=None, ctx=None, device=None):
        return _wrap(fn(unwrap(a), dtype=dtype, shape=shape), type(a) if isinstance(a, ndarray)
                     else None)
    like.__name__ = like.__qualname__ = name
    like.__doc__ = "A new array with the shape and dtype of ``a`` (``numpy.%s``)." % name
    return like


zeros_like = _like(_np.zeros_like, "zeros_like")
ones_like = _like(_np.ones_like, "ones_like")
empty_like = _like(_np.empty_like, "empty_like")


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, ctx=None):
    """A new array with the shape and dtype of ``a``, filled with ``fill_value``."""
    return _wrap(_np.full_like(unwrap(a), unwrap(fill_value), dtype=dtype, shape=shape))


def arange(start, stop=None, step=1, dtype=None, ctx=None, device=None):
    """Evenly spaced values in an interval (float32 unless ``dtype`` is given)."""
    _check_device(ctx or device)
    return _wrap(_np.arange(start, stop, step, dtype=_DEFAULT_FLOAT if dtype is None else dtype))


def eye(N, M=None, k=0, dtype=None, ctx=None, device=None):
    """The identity matrix (float32 unless ``dtype`` is given)."""
    _check_device(ctx or device)
    return _wrap(_np.eye(N, M, k, dtype=_DEFAULT_FLOAT if dtype is None else dtype))
