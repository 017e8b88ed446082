"""The functions of ``fastgrad.numpy`` that take NumPy-style arguments.

Elementwise operations are the primitives themselves (``fastgrad.np.sin`` is the ``sin`` op).
Functions with NumPy signatures (``sum(a, axis=None, dtype=None, out=None, keepdims=False)``)
normalize their arguments here and call one primitive. ``FUNCS`` maps NumPy's functions to
these, for NumPy calls on fastgrad arrays (``numpy.sum(a)``, ``__array_function__``).
"""

import numpy as _np

from fastgrad import _array
from fastgrad._array import ndarray, unwrap, _wrap
from fastgrad._kernels import normalize_axis
from fastgrad._registry import REGISTRY, UFUNC_OPS

_P = REGISTRY
_DEFAULT_FLOAT = _np.float32

# ---------------------------------------------------------------- elementwise primitives
add = _P["add"]
subtract = _P["subtract"]
multiply = _P["multiply"]
divide = true_divide = _P["divide"]
power = _P["power"]
negative = _P["negative"]
positive = _P["positive"]
mod = remainder = _P["mod"]
maximum = _P["maximum"]
minimum = _P["minimum"]
exp = _P["exp"]
log = _P["log"]
sin = _P["sin"]
cos = _P["cos"]
tan = _P["tan"]
tanh = _P["tanh"]
sqrt = _P["sqrt"]
square = _P["square"]
abs = absolute = _P["abs"]
reciprocal = _P["reciprocal"]
matmul = _P["matmul"]
sign = _P["sign"]
floor = _P["floor"]
ceil = _P["ceil"]
floor_divide = _P["floor_divide"]
equal = _P["equal"]
not_equal = _P["not_equal"]
less = _P["less"]
less_equal = _P["less_equal"]
greater = _P["greater"]
greater_equal = _P["greater_equal"]
logical_not = _P["logical_not"]
logical_and = _P["logical_and"]
logical_or = _P["logical_or"]
isnan = _P["isnan"]
isinf = _P["isinf"]
isfinite = _P["isfinite"]
invert = _P["invert"]
bitwise_and = _P["bitwise_and"]
bitwise_or = _P["bitwise_or"]
bitwise_xor = _P["bitwise_xor"]


def _check_out(name, out):
    if out is not None:
        raise TypeError("fastgrad.%s: out= is not supported; use the returned array" % name)


def _axis(axis):
    if axis is None or isinstance(axis, (int, _np.integer)):
        return None if axis is None else int(axis)
    return tuple(int(a) for a in axis)


def _reduction(prim, name):
    def reduce(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        if kwargs:
            raise TypeError("fastgrad.%s() got unexpected keyword argument(s) %s"
                            % (name, ", ".join(sorted(kwargs))))
        _check_out(name, out)
        if dtype is not None:
            a = astype(a, dtype)
        return prim(a, _axis(axis), bool(keepdims))
    reduce.__name__ = reduce.__qualname__ = name
    reduce.__doc__ = (
        "%s of array elements over the given axis (``numpy.%s``), differentiable.\n\n"
        "Parameters\n----------\na : array_like\naxis : None, int or tuple of ints\n"
        "dtype : dtype, optional\n    Cast the input to this dtype first.\n"
        "keepdims : bool\n    Keep reduced axes as dimensions of size one.\n" % (name, name))
    return reduce


sum = _reduction(_P["sum"], "sum")
mean = _reduction(_P["mean"], "mean")
max = amax = _reduction(_P["max"], "max")
min = amin = _reduction(_P["min"], "min")


# ---------------------------------------------------------------- shape
def reshape(a, newshape=None, order="C", shape=None):
    """Give a new shape to an array without changing its data (``numpy.reshape``)."""
    if shape is not None:
        newshape = shape
    if newshape is None:
        raise TypeError("fastgrad.reshape() missing the new shape")
    if order != "C":
        raise ValueError("fastgrad.reshape: only order='C' is supported, got %r" % (order,))
    if isinstance(newshape, (int, _np.integer)):
        newshape = (int(newshape),)
    return _P["reshape"](a, tuple(int(s) for s in newshape))


def transpose(a, axes=None):
    """Permute the dimensions of an array (``numpy.transpose``)."""
    return _P["transpose"](a, None if axes is None else tuple(int(x) for x in axes))


def swapaxes(a, axis1, axis2):
    """Interchange two axes of an array (``numpy.swapaxes``)."""
    return _P["swapaxes"](a, int(axis1), int(axis2))


def expand_dims(a, axis):
    """Insert a new axis of length one (``numpy.expand_dims``)."""
    return _P["expand_dims"](a, _axis(axis))


def squeeze(a, axis=None):
    """Remove axes of length one (``numpy.squeeze``)."""
    return _P["squeeze"](a, _axis(axis))


def broadcast_to(array, shape):
    """Broadcast an array to a new shape (``numpy.broadcast_to``); the gradient sums back."""
    if isinstance(shape, (int, _np.integer)):
        shape = (int(shape),)
    return _P["broadcast_to"](array, tuple(int(s) for s in shape))


def where(condition, x=None, y=None):
    """``x`` where ``condition`` holds, ``y`` elsewhere (``numpy.where``).

    With only ``condition``, the indices of its non-zero elements (not differentiable).
    """
    if x is None and y is None:
        return tuple(_wrap(i) for i in _np.nonzero(unwrap(condition)))
    if x is None or y is None:
        raise ValueError("fastgrad.where: either both or neither of x and y must be given")
    return _P["where"](_np.asarray(unwrap(condition), dtype=bool), x, y)


def concatenate(seq, axis=0, out=None):
    """Join arrays along an existing axis (``numpy.concatenate``)."""
    _check_out("concatenate", out)
    seq = list(seq)
    if axis is None:
        seq = [reshape(a, (-1,)) for a in seq]
        axis = 0
    sizes = tuple(_np.shape(unwrap(a))[axis] for a in seq)
    return _P["concatenate"](seq, int(axis), sizes)


def stack(arrays, axis=0, out=None):
    """Join arrays along a new axis (``numpy.stack``)."""
    _check_out("stack", out)
    return _P["stack"](list(arrays), int(axis))


def split(ary, indices_or_sections, axis=0):
    """Split an array into sub-arrays (``numpy.split``); returns a list."""
    n = _np.shape(unwrap(ary))[axis]
    if isinstance(indices_or_sections, (int, _np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0 or n % sections:
            raise ValueError("fastgrad.split: an axis of length %d does not split into %d equal "
                             "parts" % (n, sections))
        indices = tuple(range(n // sections, n, n // sections))
    else:
        indices = tuple(int(i) for i in indices_or_sections)
    return list(_P["split"](ary, indices, int(axis)))


def clip(a, a_min=None, a_max=None):
    """Limit the values of an array (``numpy.clip``); the gradient is zero where it clips."""
    if a_min is None and a_max is None:
        raise ValueError("fastgrad.clip: one of a_min and a_max must be given")
    return _P["clip"](a, unwrap(a_min), unwrap(a_max))


def dot(a, b, out=None):
    """Dot product of two arrays (``numpy.dot``)."""
    _check_out("dot", out)
    na, nb = _np.ndim(unwrap(a)), _np.ndim(unwrap(b))
    if na == 0 or nb == 0:
        return multiply(a, b)
    if nb <= 2:
        return matmul(a, b)
    raise NotImplementedError("fastgrad.dot: the second argument has %d dimensions; use "
                              "matmul or tensordot" % nb)


def astype(a, dtype):
    """A copy of ``a`` cast to ``dtype``; the gradient is cast back."""
    return _P["astype"](a, _np.dtype(dtype))


def copy(a, order="K"):
    """A copy of ``a`` whose gradient flows back to ``a`` (``numpy.copy``)."""
    return _P["copy"](a)


# ---------------------------------------------------------------- creation (no history)
def _float_default(obj, dtype):
    if dtype is not None:
        return _np.dtype(dtype)
    if isinstance(obj, ndarray):
        return obj.dtype
    if isinstance(obj, _np.ndarray):
        return obj.dtype
    probe = _np.asarray(obj)
    if probe.dtype.kind in "fiu":
        return _np.dtype(_DEFAULT_FLOAT)
    return probe.dtype


def array(object, dtype=None, ctx=None, copy=True, device=None):
    """Create an array. Python numbers and lists give float32 (MXNet's default); a NumPy
    array keeps its dtype unless ``dtype`` is given.

    Examples
    --------
    >>> import fastgrad as mx
    >>> mx.np.array([[1, 2], [3, 4]])
    array([[1., 2.],
           [3., 4.]])
    """
    dt = _float_default(object, dtype)
    data = unwrap(object)
    return _wrap(_np.array(data, dtype=dt, copy=True if copy else None))


def asarray(a, dtype=None, ctx=None, device=None):
    """``a`` as a fastgrad array, without a copy when it already is one of that dtype."""
    if isinstance(a, ndarray) and (dtype is None or _np.dtype(dtype) == a.dtype):
        return a
    return array(a, dtype=dtype, copy=False)


def _creation(fn, name):
    def create(shape, dtype=None, order="C", ctx=None, device=None):
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
    return _wrap(_np.arange(start, stop, step, dtype=_DEFAULT_FLOAT if dtype is None else dtype))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, ctx=None):
    """Evenly spaced numbers over an interval (float32 unless ``dtype`` is given)."""
    res = _np.linspace(start, stop, num, endpoint=endpoint, retstep=retstep,
                       dtype=_DEFAULT_FLOAT if dtype is None else dtype, axis=axis)
    if retstep:
        return _wrap(res[0]), res[1]
    return _wrap(res)


def eye(N, M=None, k=0, dtype=None, ctx=None, device=None):
    """The identity matrix (float32 unless ``dtype`` is given)."""
    return _wrap(_np.eye(N, M, k, dtype=_DEFAULT_FLOAT if dtype is None else dtype))


# ---------------------------------------------------------------- not differentiable
def argmax(a, axis=None, out=None, keepdims=False):
    """Indices of the maximum values (not differentiable)."""
    _check_out("argmax", out)
    return _wrap(_np.asarray(_np.argmax(unwrap(a), axis=axis, keepdims=keepdims)))


def argmin(a, axis=None, out=None, keepdims=False):
    """Indices of the minimum values (not differentiable)."""
    _check_out("argmin", out)
    return _wrap(_np.asarray(_np.argmin(unwrap(a), axis=axis, keepdims=keepdims)))


def array_equal(a1, a2, equal_nan=False):
    return bool(_np.array_equal(unwrap(a1), unwrap(a2), equal_nan=equal_nan))


def array_equiv(a1, a2):
    return bool(_np.array_equiv(unwrap(a1), unwrap(a2)))


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(_np.allclose(unwrap(a), unwrap(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return _wrap(_np.asarray(_np.isclose(unwrap(a), unwrap(b), rtol=rtol, atol=atol,
                                         equal_nan=equal_nan)))


def all(a, axis=None, keepdims=False):
    return _wrap(_np.asarray(_np.all(unwrap(a), axis=axis, keepdims=keepdims)))


def any(a, axis=None, keepdims=False):
    return _wrap(_np.asarray(_np.any(unwrap(a), axis=axis, keepdims=keepdims)))


def shape(a):
    return _np.shape(unwrap(a))


def ndim(a):
    return _np.ndim(unwrap(a))


def size(a, axis=None):
    return _np.size(unwrap(a), axis)


def result_type(*arrays_and_dtypes):
    return _np.result_type(*[unwrap(a) for a in arrays_and_dtypes])


def _array_repr(a):
    """``array([...])`` as MXNet prints it: the dtype is shown unless it is float32 or bool."""
    data = unwrap(a)
    body = _np.array2string(data, separator=", ", prefix="array(")
    if data.dtype in (_np.float32, _np.bool_):
        return "array(%s)" % body
    return "array(%s, dtype=%s)" % (body, data.dtype)


__all__ = [
    name for name, value in list(globals().items())
    if not name.startswith("_") and name not in ("ndarray", "unwrap",
                                                 "normalize_axis", "REGISTRY", "UFUNC_OPS")
    and (callable(value))
]

# ---------------------------------------------------------------- NumPy dispatch
FUNCS = {
    _np.sum: sum, _np.mean: mean, _np.max: max, _np.amax: amax, _np.min: min,
    _np.amin: amin, _np.reshape: reshape, _np.transpose: transpose, _np.swapaxes: swapaxes,
    _np.expand_dims: expand_dims, _np.squeeze: squeeze, _np.broadcast_to: broadcast_to,
    _np.where: where, _np.concatenate: concatenate, _np.stack: stack, _np.split: split,
    _np.clip: clip, _np.dot: dot, _np.copy: copy, _np.zeros_like: zeros_like,
    _np.ones_like: ones_like, _np.empty_like: empty_like, _np.full_like: full_like,
    _np.argmax: argmax, _np.argmin: argmin, _np.array_equal: array_equal,
    _np.array_equiv: array_equiv, _np.allclose: allclose, _np.isclose: isclose,
    _np.all: all, _np.any: any, _np.shape: shape, _np.ndim: ndim, _np.size: size,
    _np.result_type: result_type,
}
