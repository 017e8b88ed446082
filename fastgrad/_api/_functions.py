"""The functions of ``fastgrad.numpy`` that take NumPy-style arguments.

Elementwise operations are the primitives themselves (``fastgrad.np.sin`` is the ``sin`` op).
Functions with NumPy signatures (``sum(a, axis=None, dtype=None, out=None, keepdims=False)``)
normalize their arguments here and call one primitive. Creation is in ``_creation.py``
(re-exported here), linear algebra in ``_linalg.py``; ``_dispatch.py`` maps NumPy's functions
to these, for NumPy calls on fastgrad arrays (``numpy.sum(a)``, ``__array_function__``).
"""

import builtins as _builtins

import numpy as _np

from fastgrad._ops import _namespaces
from fastgrad._core._array import ndarray, unwrap, _wrap, record_zero as _record_zero
from fastgrad._core._state import is_recording as _is_recording
from fastgrad.context import check_device as _check_device
# The array type reads a sequence argument with these, through this module (``_ops`` in
# _array_recording.pxi's _sequence_argument).
from fastgrad._api._construction import (holds_array as _holds_array,  # noqa: F401
                                         from_sequence as _from_sequence,
                                         check_numeric as _check_numeric)
from fastgrad._ops._registry import REGISTRY
from fastgrad._api._creation import default_float as _default_float
from fastgrad._api._creation import (array, asarray, zeros, ones, empty, full, zeros_like,
                                     ones_like, empty_like, full_like, arange, eye)

_P = REGISTRY
_max, _min = _builtins.max, _builtins.min

# ---------------------------------------------------------------- elementwise primitives
# Every op NumPy has a function of the same name for, and its NumPy aliases, is that op here;
# the functions below with NumPy's signatures replace some (Note [Generated namespaces] in
# _namespaces.py).
_TABLE_NAMES = _namespaces.numpy_names()
globals().update(_TABLE_NAMES)
sinh = _P["sinh"]
cosh = _P["cosh"]
tanh = _P["tanh"]
arcsinh = asinh = _P["arcsinh"]
arccosh = acosh = _P["arccosh"]
arctanh = atanh = _P["arctanh"]
deg2rad = _P["deg2rad"]
rad2deg = _P["rad2deg"]
radians = _P["radians"]
degrees = _P["degrees"]
sinc = _P["sinc"]
matmul = _P["matmul"]
kron = _P["kron"]
sign = _P["sign"]
floor = _P["floor"]
ceil = _P["ceil"]
trunc = fix = _P["trunc"]
rint = _P["rint"]
signbit = _P["signbit"]
heaviside = _P["heaviside"]
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
logical_xor = _P["logical_xor"]
isnan = _P["isnan"]
isinf = _P["isinf"]
isfinite = _P["isfinite"]
invert = bitwise_not = _P["invert"]
bitwise_and = _P["bitwise_and"]
bitwise_or = _P["bitwise_or"]
bitwise_xor = _P["bitwise_xor"]
left_shift = _P["left_shift"]
right_shift = _P["right_shift"]
gcd = _P["gcd"]
lcm = _P["lcm"]


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
prod = _reduction(_P["prod"], "prod")
max = amax = _reduction(_P["max"], "max")
min = amin = _reduction(_P["min"], "min")
nansum = _reduction(_P["nansum"], "nansum")
nanmean = _reduction(_P["nanmean"], "nanmean")
nanmax = _reduction(_P["nanmax"], "nanmax")
nanmin = _reduction(_P["nanmin"], "nanmin")
nanprod = _reduction(_P["nanprod"], "nanprod")


def _moments(prim, name):
    def moment(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
        if kwargs:
            raise TypeError("fastgrad.%s() got unexpected keyword argument(s) %s"
                            % (name, ", ".join(sorted(kwargs))))
        _check_out(name, out)
        if dtype is not None:
            a = astype(a, dtype)
        return prim(a, _axis(axis), bool(keepdims), ddof)
    moment.__name__ = moment.__qualname__ = name
    moment.__doc__ = (
        "%s of array elements over the given axis (``numpy.%s``), differentiable.\n\n"
        "Parameters\n----------\na : array_like\naxis : None, int or tuple of ints\n"
        "ddof : int\n    Delta degrees of freedom: the divisor is ``N - ddof``.\n"
        "keepdims : bool\n    Keep reduced axes as dimensions of size one.\n" % (name, name))
    return moment


var = _moments(_P["var"], "var")
std = _moments(_P["std"], "std")


def ptp(a, axis=None, keepdims=False):
    """Range of values, maximum minus minimum, along an axis (``numpy.ptp``)."""
    return subtract(max(a, axis=axis, keepdims=keepdims), min(a, axis=axis, keepdims=keepdims))


def _cumulative(prim, name):
    def cumulative(a, axis=None, dtype=None, out=None):
        _check_out(name, out)
        if dtype is not None:
            a = astype(a, dtype)
        if axis is None:
            a = reshape(a, (-1,))
            axis = 0
        return prim(a, int(axis) % _np.ndim(unwrap(a)))
    cumulative.__name__ = cumulative.__qualname__ = name
    cumulative.__doc__ = (
        "Cumulative %s of the elements along ``axis`` (``numpy.%s``); the flattened array "
        "when ``axis`` is None." % (name[3:], name))
    return cumulative


cumsum = cumulative_sum = _cumulative(_P["cumsum"], "cumsum")
cumprod = cumulative_prod = _cumulative(_P["cumprod"], "cumprod")
nancumsum = _cumulative(_P["nancumsum"], "nancumsum")
nancumprod = _cumulative(_P["nancumprod"], "nancumprod")


def real(val):
    """The real part (a copy for real arrays), ``numpy.real``."""
    return _P["real"](val)


def imag(val):
    """The imaginary part (``numpy.imag``); differentiable for complex input, a constant
    zero array for real input."""
    if isinstance(val, ndarray) and val.dtype.kind == "c":
        return _P["imag"](val)
    return _wrap(_np.array(_np.imag(unwrap(val)), copy=True))


def angle(z, deg=False):
    """The argument of complex numbers (``numpy.angle``), in radians or degrees:
    ``arctan2(imag(z), real(z))``, differentiable for complex input; piecewise constant (no
    history) for real input."""
    if isinstance(z, ndarray) and z.dtype.kind == "c":
        out = arctan2(imag(z), real(z))
        return out * (180.0 / _np.pi) if deg else out
    return _wrap(_np.angle(unwrap(z), deg=deg))


def i0(x):
    """The modified Bessel function of the first kind of order 0 (``numpy.i0``),
    differentiable (its derivative is ``i1``)."""
    return _P["i0"](x)


def real_if_close(a, tol=100):
    """The real part if every imaginary part is within ``tol`` machine epsilons of zero,
    else ``a`` (``numpy.real_if_close``); differentiable either way."""
    if not (isinstance(a, ndarray) and a.dtype.kind == "c"):
        return a if isinstance(a, ndarray) else _wrap(_np.real_if_close(a, tol))
    data = unwrap(a)
    limit = _np.finfo(data.dtype).eps * tol if tol > 1 else tol
    if _np.all(_np.abs(data.imag) < limit):
        return real(a)
    return a


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN and infinities replaced by finite numbers (``numpy.nan_to_num``); the gradient
    is zero at the replaced elements."""
    return _P["nan_to_num"](x, float(nan), posinf, neginf)


def median(a, axis=None, keepdims=False, out=None):
    """The median along ``axis`` (``numpy.median``): the middle sorted element, or the mean
    of the two middle ones; differentiable through ``sort``."""
    _check_out("median", out)
    return quantile(a, 0.5, axis=axis, keepdims=keepdims)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False):
    """The ``q``-th quantile along ``axis`` with linear interpolation (``numpy.quantile``);
    differentiable in ``a`` through ``sort``."""
    _check_out("quantile", out)
    if method != "linear":
        raise NotImplementedError("fastgrad.quantile supports method='linear' only")
    nd = _ndim(a)
    axes = tuple(range(nd)) if axis is None else (
        (int(axis) % nd,) if isinstance(axis, (int, _np.integer))
        else tuple(int(i) % nd for i in axis))
    last = tuple(range(nd - len(axes), nd))
    work = moveaxis(a, axes, last)
    lead = _np.shape(unwrap(work))[:nd - len(axes)]
    s = sort(reshape(work, lead + (-1,)), axis=-1)
    n = _np.shape(unwrap(s))[-1]
    qs = _np.asarray(unwrap(q), dtype=_np.float64)
    pos = qs * (n - 1)
    lo = _np.floor(pos).astype(_np.intp)
    hi = _np.minimum(lo + 1, n - 1)
    frac = (pos - lo).astype(unwrap(s).dtype)
    lo_v = take(s, lo, axis=-1)
    out = lo_v + (take(s, hi, axis=-1) - lo_v) * frac
    if qs.ndim:        # NumPy puts the quantile axes first
        k = len(lead)
        out = moveaxis(out, tuple(range(k, k + qs.ndim)), tuple(range(qs.ndim)))
    if keepdims:
        for r in sorted(axes):
            out = expand_dims(out, qs.ndim + r)
    return out


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False):
    """The ``q``-th percentile (``numpy.percentile``); see ``quantile``."""
    return quantile(a, _np.asarray(unwrap(q)) / 100.0, axis=axis, out=out, method=method,
                    keepdims=keepdims)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """Integral by the trapezoidal rule along ``axis`` (``numpy.trapezoid``)."""
    nd = _ndim(y)
    axis = int(axis) % nd
    n = _np.shape(unwrap(y))[axis]
    lo = tuple(slice(0, n - 1) if d == axis else slice(None) for d in range(nd))
    hi = tuple(slice(1, n) if d == axis else slice(None) for d in range(nd))
    if x is None:
        d = dx
    else:
        d = diff(x, axis=axis if _ndim(x) == nd else -1)
    return sum(d * (y[lo] + y[hi]) / 2.0, axis=axis)


def polyval(p, x):
    """Value of the polynomial with coefficients ``p`` (highest degree first) at ``x``
    (``numpy.polyval``), by Horner's rule."""
    n = _np.shape(unwrap(p))[0]
    y = zeros_like(x) if isinstance(x, ndarray) else _np.zeros_like(_np.asarray(x, dtype=float))
    for i in range(n):
        y = y * x + p[i]
    return y


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """Weighted average along ``axis`` (``numpy.average``); differentiable in ``a`` and
    ``weights``.

    Examples
    --------
    >>> import fastgrad as mx
    >>> mx.np.average(mx.np.array([1.0, 2.0, 4.0]), weights=mx.np.array([1.0, 1.0, 2.0]))
    array(2.75)
    """
    if weights is None:
        avg = mean(a, axis=axis, keepdims=keepdims)
        if returned:
            n = _np.size(unwrap(a)) // _max(_np.size(unwrap(avg)), 1)
            return avg, full_like(avg, n)
        return avg
    ashape = _np.shape(unwrap(a))
    wshape = _np.shape(unwrap(weights))
    if wshape != ashape:
        if axis is None or len(wshape) != 1 or not isinstance(axis, (int, _np.integer)):
            raise TypeError("fastgrad.average: weights of shape %s differ from a's shape %s; "
                            "1-D weights need an int axis" % (wshape, ashape))
        view = [1] * len(ashape)
        view[int(axis)] = wshape[0]
        weights = broadcast_to(reshape(weights, view), ashape)
    avg = _P["average"](a, weights, _axis(axis), bool(keepdims))
    if returned:
        return avg, sum(weights, axis=axis, keepdims=keepdims)
    return avg


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
    newshape = tuple(int(s) for s in newshape)
    bad = [s for s in newshape if s < -1]
    if bad:
        # NumPy would take any negative size as -1; MXNet's codes have their own meaning.
        raise ValueError("fastgrad.reshape: negative size %d in %s; only -1 (infer) is a NumPy "
                         "size (MXNet's reshape codes are in nd.reshape and npx.reshape)"
                         % (bad[0], newshape))
    return _P["reshape"](a, newshape)


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
    """Broadcast an array to a new shape (``numpy.broadcast_to``); the gradient sums back.

    As in MXNet's ``np.broadcast_to``, ``-2`` in ``shape`` keeps the input's size of that
    dimension (dimensions aligned from the right): ``(3, 4)`` to ``(1, 2, 3, -2)`` gives
    ``(1, 2, 3, 4)``."""
    if isinstance(shape, (int, _np.integer)):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    if -2 in shape:
        source = _np.shape(unwrap(array))
        offset = len(shape) - len(source)
        if offset < 0 or -2 in shape[:offset]:
            raise ValueError("broadcast_to: -2 in shape %s keeps an input dimension, but the "
                             "input of shape %s has none there" % (shape, source))
        shape = tuple(source[i - offset] if s == -2 else s for i, s in enumerate(shape))
    return _P["broadcast_to"](array, shape)


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
        if sections > 0 and n == 0:
            return list(_P["split"](ary, (0,) * (sections - 1), int(axis)))
        if sections <= 0 or n % sections:
            raise ValueError("fastgrad.split: an axis of length %d does not split into %d equal "
                             "parts" % (n, sections))
        indices = tuple(range(n // sections, n, n // sections))
    else:
        indices = tuple(int(i) for i in indices_or_sections)
    return _split(ary, indices, axis)


def _split(ary, indices, axis):
    if not indices:
        # One section: the array itself (as a view), by a single-output op.
        return [_P["getitem"](ary, (Ellipsis,))]
    return list(_P["split"](ary, indices, int(axis)))


def clip(a, a_min=None, a_max=None):
    """Limit the values of an array (``numpy.clip``); the gradient is zero where it clips."""
    if a_min is None and a_max is None:
        raise ValueError("fastgrad.clip: one of a_min and a_max must be given")
    return _P["clip"](a, unwrap(a_min), unwrap(a_max))


def _int_tuple(v):
    if isinstance(v, (int, _np.integer)):
        return int(v)
    return tuple(int(i) for i in v)


def _ndim(a):
    return _np.ndim(unwrap(a))


def moveaxis(a, source, destination):
    """Move axes of an array to new positions (``numpy.moveaxis``)."""
    nd = _ndim(a)
    src = (source,) if isinstance(source, (int, _np.integer)) else tuple(source)
    dst = (destination,) if isinstance(destination, (int, _np.integer)) else tuple(destination)
    if len(src) != len(dst):
        raise ValueError("fastgrad.moveaxis: source and destination need the same number of "
                         "elements, got %s and %s" % (src, dst))
    src = tuple(int(s) % nd for s in src) if nd else src
    dst = tuple(int(d) % nd for d in dst) if nd else dst
    if src == dst:
        return a
    return _P["moveaxis"](a, src, dst)


def rollaxis(a, axis, start=0):
    """Roll ``axis`` backwards until it lies before ``start`` (``numpy.rollaxis``)."""
    nd = _ndim(a)
    axis, start = int(axis) % nd, int(start) % (nd + 1)
    return moveaxis(a, axis, start - 1 if start > axis else start)


def ravel(a, order="C"):
    """The array flattened to one dimension (``numpy.ravel``)."""
    return reshape(a, (-1,), order=order)


def atleast_1d(*arys):
    """Arrays with at least one dimension (``numpy.atleast_1d``)."""
    out = [a if _ndim(a) >= 1 else reshape(a, (1,)) for a in arys]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys):
    """Arrays with at least two dimensions (``numpy.atleast_2d``)."""
    out = [a if _ndim(a) >= 2 else reshape(a, (1, -1) if _ndim(a) else (1, 1)) for a in arys]
    return out[0] if len(out) == 1 else out


def atleast_3d(*arys):
    """Arrays with at least three dimensions (``numpy.atleast_3d``)."""
    out = []
    for a in arys:
        nd = _ndim(a)
        if nd == 0:
            a = reshape(a, (1, 1, 1))
        elif nd == 1:
            a = reshape(a, (1, -1, 1))
        elif nd == 2:
            a = expand_dims(a, 2)
        out.append(a)
    return out[0] if len(out) == 1 else out


def vstack(tup, dtype=None, casting="same_kind"):
    """Stack arrays vertically, row-wise (``numpy.vstack``)."""
    return concatenate([atleast_2d(a) for a in tup], axis=0)


row_stack = vstack


def hstack(tup, dtype=None, casting="same_kind"):
    """Stack arrays horizontally, column-wise (``numpy.hstack``)."""
    arrs = [atleast_1d(a) for a in tup]
    return concatenate(arrs, axis=0 if _ndim(arrs[0]) == 1 else 1)


def dstack(tup):
    """Stack arrays along the third axis (``numpy.dstack``)."""
    return concatenate([atleast_3d(a) for a in tup], axis=2)


def column_stack(tup):
    """Stack 1-D arrays as columns of a 2-D array (``numpy.column_stack``)."""
    return concatenate([reshape(a, (-1, 1)) if _ndim(a) < 2 else a for a in tup], axis=1)


def append(arr, values, axis=None):
    """``values`` appended to the end of ``arr`` (``numpy.append``)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)])
    return concatenate([arr, values], axis=axis)


def array_split(ary, indices_or_sections, axis=0):
    """Split into sub-arrays that may differ in size (``numpy.array_split``)."""
    n = _np.shape(unwrap(ary))[axis]
    if isinstance(indices_or_sections, (int, _np.integer)):
        sections = int(indices_or_sections)
        each, extra = divmod(n, sections)
        sizes = [each + 1] * extra + [each] * (sections - extra)
        indices = tuple(int(i) for i in _np.cumsum(sizes)[:-1])
    else:
        indices = tuple(int(i) for i in indices_or_sections)
    return _split(ary, indices, axis)


def hsplit(ary, indices_or_sections):
    """Split along the second axis (the first for 1-D arrays), ``numpy.hsplit``."""
    return split(ary, indices_or_sections, axis=1 if _ndim(ary) > 1 else 0)


def vsplit(ary, indices_or_sections):
    """Split along the first axis (``numpy.vsplit``)."""
    return split(ary, indices_or_sections, axis=0)


def broadcast_arrays(*args):
    """The arguments broadcast to one shape (``numpy.broadcast_arrays``)."""
    shape = _np.broadcast_shapes(*[_np.shape(unwrap(a)) for a in args])
    return [broadcast_to(a, shape) for a in args]


def tile(A, reps):
    """Repeat the whole array ``reps`` times (``numpy.tile``)."""
    return _P["tile"](A, _int_tuple(reps) if not isinstance(reps, (int, _np.integer))
                      else (int(reps),))


def repeat(a, repeats, axis=None):
    """Repeat each element ``repeats`` times (``numpy.repeat``); ``repeats`` an int or one
    count per element along ``axis``."""
    repeats = unwrap(repeats)
    if _np.ndim(repeats) == 0:
        repeats = int(repeats)
    else:
        repeats = tuple(int(r) for r in _np.ravel(repeats))
    if axis is not None:
        axis = int(axis) % _max(_ndim(a), 1)
    return _P["repeat"](a, repeats, axis)


def flip(m, axis=None):
    """Reverse the order of elements along ``axis`` (``numpy.flip``)."""
    return _P["flip"](m, _axis(axis))


def fliplr(m):
    """Reverse the order of columns (``numpy.fliplr``)."""
    return flip(m, 1)


def flipud(m):
    """Reverse the order of rows (``numpy.flipud``)."""
    return flip(m, 0)


def roll(a, shift, axis=None):
    """Roll elements along ``axis``; elements that roll off one end come back at the other
    (``numpy.roll``)."""
    return _P["roll"](a, _int_tuple(shift), _axis(axis))


def rot90(m, k=1, axes=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``axes`` (``numpy.rot90``)."""
    return _P["rot90"](m, int(k), tuple(int(a) for a in axes))


_PAD_BY_INDEX = ("edge", "reflect", "symmetric", "wrap")


def pad(array, pad_width, mode="constant", constant_values=0, **kwargs):
    """Pad an array (``numpy.pad``) with a constant, or with copies of its own elements
    (``mode='edge'``, ``'reflect'``, ``'symmetric'`` or ``'wrap'``, NumPy's default
    ``reflect_type='even'``).

    Note [Padding by index]: a padding that copies elements is, along each padded axis, a
    ``take`` of the indices NumPy's own ``pad`` gives ``arange(n)``; ``take``'s gradient adds
    the copies' gradients back to the elements they came from, so every mode is
    differentiable to any order without an op of its own.
    """
    if kwargs or (mode != "constant" and mode not in _PAD_BY_INDEX):
        raise NotImplementedError("fastgrad.pad supports mode='constant', 'edge', 'reflect', "
                                  "'symmetric' and 'wrap' (no other arguments), got mode=%r%s"
                                  % (mode, " and %s" % sorted(kwargs) if kwargs else ""))
    nd = _ndim(array)
    width = _np.broadcast_to(_np.asarray(unwrap(pad_width), dtype=_np.intp), (nd, 2))
    if (width < 0).any():
        raise ValueError("fastgrad.pad: negative pad widths %s" % (width.tolist(),))
    width = tuple((int(b), int(e)) for b, e in width)
    if mode == "constant":
        return _P["pad"](array, width, unwrap(constant_values))
    shape = _np.shape(unwrap(array))
    for axis, (before, after) in enumerate(width):
        if before or after:
            if mode == "reflect" and shape[axis] < 2 or shape[axis] == 0:
                raise ValueError("fastgrad.pad: mode=%r cannot pad axis %d of length %d"
                                 % (mode, axis, shape[axis]))
            index = _np.pad(_np.arange(shape[axis]), (before, after), mode=mode)
            array = take(array, index, axis=axis)
    return array


def diag(v, k=0):
    """The diagonal of a 2-D array, or a 2-D array with a 1-D array on its diagonal
    (``numpy.diag``)."""
    if _ndim(v) not in (1, 2):
        raise ValueError("fastgrad.diag: the input must be 1-D or 2-D, got %d-D" % _ndim(v))
    return _P["diag"](v, int(k))


def diagflat(v, k=0):
    """A 2-D array with the flattened input on its ``k``-th diagonal (``numpy.diagflat``)."""
    return diag(ravel(v), k)


def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal along ``axis1`` and ``axis2``, as a new array (``numpy.diagonal``)."""
    nd = _ndim(a)
    return _P["diagonal"](a, int(offset), int(axis1) % nd, int(axis2) % nd)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum along a diagonal (``numpy.trace``)."""
    _check_out("trace", out)
    nd = _ndim(a)
    if dtype is not None:
        a = astype(a, dtype)
    return _P["trace"](a, int(offset), int(axis1) % nd, int(axis2) % nd)


def triu(m, k=0):
    """The upper triangle, elements below the ``k``-th diagonal zeroed (``numpy.triu``)."""
    return _P["triu"](m, int(k))


def tril(m, k=0):
    """The lower triangle, elements above the ``k``-th diagonal zeroed (``numpy.tril``)."""
    return _P["tril"](m, int(k))


def _indices(name, indices):
    idx = _np.asarray(unwrap(indices))
    if idx.dtype.kind not in "iub":
        if idx.size and not _np.all(idx == _np.floor(idx)):
            raise IndexError("fastgrad.%s: indices must be integers, got %s" % (name, idx.dtype))
        idx = idx.astype(_np.intp)
    return idx


def take(a, indices, axis=None, out=None, mode="raise"):
    """Elements of ``a`` at ``indices`` along ``axis`` (``numpy.take``); the gradient adds
    up at repeated indices.

    ``mode`` is ``'raise'``, ``'clip'`` or ``'wrap'``.
    """
    _check_out("take", out)
    idx = _indices("take", indices)
    n = _np.size(unwrap(a)) if axis is None else _np.shape(unwrap(a))[axis]
    if mode == "clip":
        idx = _np.clip(idx, 0, n - 1)
    elif mode == "wrap":
        idx = idx % n
    elif mode == "raise":
        if idx.size and (idx.max() >= n or idx.min() < -n):
            raise IndexError("fastgrad.take: index out of bounds for an axis of size %d" % n)
        idx = idx % n if n else idx
    else:
        raise ValueError("fastgrad.take: mode must be 'raise', 'clip' or 'wrap', got %r"
                         % (mode,))
    return _P["take"](a, idx, None if axis is None else int(axis) % _ndim(a))


def take_along_axis(arr, indices, axis=-1):
    """Values of ``arr`` at ``indices`` along ``axis`` (``numpy.take_along_axis``)."""
    idx = _indices("take_along_axis", indices)
    if axis is None:
        return _P["take_along_axis"](ravel(arr), idx, 0)
    nd = _ndim(arr)
    idx = idx % _np.shape(unwrap(arr))[int(axis)]
    return _P["take_along_axis"](arr, idx, int(axis) % nd)


def sort(a, axis=-1, kind=None, order=None, stable=None):
    """A sorted copy of ``a`` (``numpy.sort``); each element's gradient is the gradient of
    the place it was sorted to."""
    if axis is None:
        a = ravel(a)
        axis = -1
    return _P["sort"](a, int(axis) % _max(_ndim(a), 1))


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The ``n``-th discrete difference along ``axis`` (``numpy.diff``)."""
    if prepend is not None or append is not None:
        parts = []
        shape = list(_np.shape(unwrap(a)))
        for extra in (prepend, append):
            if extra is None:
                parts.append(None)
                continue
            if _np.ndim(unwrap(extra)) == 0:
                shape[axis] = 1
                extra = broadcast_to(extra, tuple(shape))
            parts.append(extra)
        a = concatenate([p for p in (parts[0], a, parts[1]) if p is not None], axis=axis)
    if n == 0:
        return a
    return _P["diff"](a, int(n), int(axis) % _ndim(a))


# ---------------------------------------------------------------- products
def dot(a, b, out=None):
    """Dot product of two arrays (``numpy.dot``): a sum product over the last axis of ``a``
    and the second-to-last of ``b``; multiplication when either is 0-d."""
    _check_out("dot", out)
    if _ndim(a) == 0 or _ndim(b) == 0:
        return multiply(a, b)
    return _P["dot"](a, b)


def vdot(a, b):
    """The dot product of the flattened arrays (``numpy.vdot``, real arrays)."""
    return _P["dot"](ravel(a), ravel(b))


def inner(a, b):
    """Sum product over the last axes (``numpy.inner``)."""
    if _ndim(a) == 0 or _ndim(b) == 0:
        return multiply(a, b)
    return _P["tensordot"](a, b, ((_ndim(a) - 1,), (_ndim(b) - 1,)))


def outer(a, b, out=None):
    """Outer product of the flattened arrays (``numpy.outer``)."""
    _check_out("outer", out)
    return _P["outer"](a, b)


def tensordot(a, b, axes=2):
    """Sum products over the given axes (``numpy.tensordot``).

    ``axes`` is an int ``N`` (the last ``N`` axes of ``a`` with the first ``N`` of ``b``) or a
    pair of axis sequences.
    """
    na, nb = _ndim(a), _ndim(b)
    if isinstance(axes, (int, _np.integer)):
        n = int(axes)
        ax, ay = tuple(range(na - n, na)), tuple(range(n))
    else:
        ax, ay = axes
        ax = (ax,) if isinstance(ax, (int, _np.integer)) else tuple(ax)
        ay = (ay,) if isinstance(ay, (int, _np.integer)) else tuple(ay)
        ax = tuple(int(i) % na for i in ax)
        ay = tuple(int(i) % nb for i in ay)
    if len(ax) != len(ay):
        raise ValueError("fastgrad.tensordot: axes %s and %s have different lengths" % (ax, ay))
    return _P["tensordot"](a, b, (ax, ay))


def _einsum_parse(subscripts, shapes):
    """Explicit subscripts (``'ij,jk->ik'``) with every ellipsis spelled out in letters."""
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        lhs, out = subscripts.split("->")
    else:
        lhs, out = subscripts, None
    inputs = lhs.split(",")
    if len(inputs) != len(shapes):
        raise ValueError("fastgrad.einsum: %d operands for subscripts %r"
                         % (len(shapes), subscripts))
    used = set(c for c in subscripts if c.isalpha())
    free = [c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in used]
    nell = 0
    for sub, shape in zip(inputs, shapes):
        if "..." in sub:
            nell = _max(nell, len(shape) - (len(sub) - 3))
    ell = "".join(free[:nell])
    expanded = []
    for sub, shape in zip(inputs, shapes):
        if "..." in sub:
            k = len(shape) - (len(sub) - 3)
            sub = sub.replace("...", ell[nell - k:] if k else "")
        expanded.append(sub)
    if out is None:
        letters = "".join(expanded)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1
                                   and c not in ell))
    else:
        out = out.replace("...", ell)
    return expanded, out


def _einsum_diagonals(operand, sub):
    """An operand whose subscript repeats a letter (``'ii'``), as the diagonal over the
    repeated axes with the letter once, so every einsum rule sees distinct letters."""
    while len(set(sub)) != len(sub):
        c = next(c for c in sub if sub.count(c) > 1)
        p = sub.index(c)
        q = sub.index(c, p + 1)
        operand = diagonal(operand, 0, p, q)      # the diagonal becomes the last axis
        sub = "".join(x for i, x in enumerate(sub) if i not in (p, q)) + c
    return operand, sub


def _einsum_interleaved(first, rest):
    """``(subscripts, operands)`` from NumPy's interleaved form ``einsum(op0, sublist0, op1,
    sublist1, ..., [sublistout])``, whose sublists hold integers (or ``Ellipsis``)."""
    args = (first,) + tuple(rest)
    operands, sublists = list(args[0::2]), list(args[1::2])
    output = None
    if len(sublists) < len(operands):
        output = operands.pop()
    if len(sublists) != len(operands):
        raise TypeError("fastgrad.einsum: give subscripts as a string, or operands each "
                        "followed by its list of axis labels")
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def word(sub):
        out = []
        for label in sub:
            if label is Ellipsis:
                out.append("...")
            elif isinstance(label, (int, _np.integer)) and 0 <= label < len(letters):
                out.append(letters[int(label)])
            else:
                raise TypeError("fastgrad.einsum: axis labels must be integers in [0, 52) "
                                "or Ellipsis, got %r" % (label,))
        return "".join(out)
    subscripts = ",".join(word(sub) for sub in sublists)
    if output is not None:
        subscripts += "->" + word(output)
    return subscripts, operands


def einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    """Einstein summation (``numpy.einsum``), differentiable in every operand.

    Three or more operands are contracted pairwise from the left.

    Examples
    --------
    >>> import fastgrad as mx
    >>> a = mx.np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> mx.np.einsum("ij,ij->", a, a)
    array(30.)
    """
    _check_out("einsum", out)
    if kwargs:
        raise TypeError("fastgrad.einsum() got unexpected keyword argument(s) %s"
                        % ", ".join(sorted(kwargs)))
    if not isinstance(subscripts, str):
        subscripts, operands = _einsum_interleaved(subscripts, operands)
    inputs, output = _einsum_parse(subscripts, [_np.shape(unwrap(o)) for o in operands])
    operands = list(operands)
    for k, sub in enumerate(inputs):
        if len(set(sub)) != len(sub):
            operands[k], inputs[k] = _einsum_diagonals(operands[k], sub)
    if len(operands) == 1:
        return _P["einsum"](operands[0], "%s->%s" % (inputs[0], output))
    acc, acc_sub = operands[0], inputs[0]
    for i in range(1, len(operands)):
        later = set(output).union(*inputs[i + 1:])
        both = acc_sub + inputs[i]
        if i == len(operands) - 1:
            keep = output
        else:
            keep = "".join(dict.fromkeys(c for c in both if c in later))
        acc = _P["einsum2"](acc, operands[i], "%s,%s->%s" % (acc_sub, inputs[i], keep))
        acc_sub = keep
    return acc


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross product of 3-vectors along ``axis`` (``numpy.cross``)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    if axisa != axisb or axisa != axisc:
        a = moveaxis(a, axisa, -1)
        b = moveaxis(b, axisb, -1)
        return moveaxis(_P["cross"](a, b, -1), -1, axisc)
    for name, v in (("a", a), ("b", b)):
        if _np.shape(unwrap(v))[axisa] != 3:
            raise ValueError("fastgrad.cross: %s must have 3 elements along the axis "
                             "(2-vectors are not supported)" % name)
    return _P["cross"](a, b, int(axisa))


def _convolution_slice(full, n, m, mode, offset_same):
    if mode == "full":
        return full
    if mode == "valid":
        length, start = _max(n, m) - _min(n, m) + 1, _min(n, m) - 1
    elif mode == "same":
        length, start = _max(n, m), offset_same
    else:
        raise ValueError("fastgrad: mode must be 'full', 'same' or 'valid', got %r" % (mode,))
    return full[start:start + length]


def convolve(a, v, mode="full"):
    """Discrete linear convolution of two 1-D arrays (``numpy.convolve``)."""
    n, m = _np.size(unwrap(a)), _np.size(unwrap(v))
    if n == 0 or m == 0:
        raise ValueError("fastgrad.convolve: the arrays must not be empty")
    full = _P["convolve"](ravel(a), ravel(v))
    return _convolution_slice(full, n, m, mode, (_min(n, m) - 1) // 2)


def correlate(a, v, mode="valid"):
    """Cross-correlation of two 1-D arrays (``numpy.correlate``, real arrays)."""
    n, m = _np.size(unwrap(a)), _np.size(unwrap(v))
    if n == 0 or m == 0:
        raise ValueError("fastgrad.correlate: the arrays must not be empty")
    full = _P["convolve"](ravel(a), flip(ravel(v), 0))
    same = (m - 1) // 2 if n >= m else n + m - 1 - m - (n - 1) // 2
    return _convolution_slice(full, n, m, mode, same)


def astype(a, dtype):
    """A copy of ``a`` cast to ``dtype``; the gradient is cast back."""
    return _P["astype"](a, _np.dtype(dtype))


def copy(a, order="K"):
    """A copy of ``a`` whose gradient flows back to ``a`` (``numpy.copy``)."""
    return _P["copy"](a)


# ---------------------------------------------------------------- linspace
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, ctx=None):
    """Evenly spaced numbers over an interval (float32 unless ``dtype`` is given).

    With fastgrad arrays as ``start`` or ``stop`` the result is differentiable in them and has
    their dtype (``numpy.linspace``'s rules); the last value is exactly ``stop`` when
    ``endpoint`` is true.
    """
    if isinstance(start, ndarray) or isinstance(stop, ndarray):
        return _linspace_recorded(start, stop, int(num), endpoint, retstep, dtype, axis)
    _check_device(ctx)
    res = _np.linspace(start, stop, num, endpoint=endpoint, retstep=retstep,
                       dtype=_default_float() if dtype is None else dtype, axis=axis)
    if retstep:
        return _wrap(res[0]), res[1]
    return _wrap(res)


def _linspace_recorded(start, stop, num, endpoint, retstep, dtype, axis):
    if num < 0:
        raise ValueError("fastgrad.linspace: num must be non-negative, got %d" % num)
    # A Python number is weak (NEP 50): a float32 start with stop=1.0 stays float32.
    kind = _np.result_type(*[unwrap(v) if isinstance(v, ndarray) else v
                             for v in (start, stop)], 1.0)
    start = start if isinstance(start, ndarray) else _wrap(_np.asarray(start))
    stop = stop if isinstance(stop, ndarray) else _wrap(_np.asarray(stop))
    start, stop = start.astype(kind), stop.astype(kind)
    shape = _np.broadcast_shapes(start.shape, stop.shape)
    div = num - 1 if endpoint else num
    delta = stop - start
    frac = _np.arange(num, dtype=kind).reshape((num,) + (1,) * len(shape))
    step = delta / div if div > 0 else delta * _np.nan
    y = start + delta * (frac / div if div > 0 else frac * 0)
    if endpoint and num > 1:
        last = broadcast_to(stop, shape)[None]
        y = concatenate([y[:-1], last], axis=0)
    y = broadcast_to(y, (num,) + shape)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    if dtype is not None:
        y = y.astype(dtype)
    return (y, step) if retstep else y


# ---------------------------------------------------------------- not differentiable
def _no_gradient(name, value, *inputs):
    """An integer or bool result of ``inputs``: no gradient, but recorded for what it
    depends on (Note [Zero gradients])."""
    return _record_zero(name, inputs, _wrap(_np.asarray(value)))


def argmax(a, axis=None, out=None, keepdims=False):
    """Indices of the maximum values (not differentiable)."""
    _check_out("argmax", out)
    return _no_gradient("argmax", _np.argmax(unwrap(a), axis=axis, keepdims=keepdims), a)


def argmin(a, axis=None, out=None, keepdims=False):
    """Indices of the minimum values (not differentiable)."""
    _check_out("argmin", out)
    return _no_gradient("argmin", _np.argmin(unwrap(a), axis=axis, keepdims=keepdims), a)


def argsort(a, axis=-1, kind=None, order=None, stable=None):
    """Indices that would sort an array (not differentiable)."""
    return _no_gradient("argsort", _np.argsort(unwrap(a), axis=axis, kind=kind), a)


def around(a, decimals=0, out=None):
    """Round to the given number of decimals; the derivative is zero (Note [Zero gradients])."""
    _check_out("round", out)
    return _P["round"](a, int(decimals))


round = round_ = around


def nonzero(a):
    """Indices of the non-zero elements, one array per dimension (not differentiable)."""
    return tuple(_no_gradient("nonzero", i, a) for i in _np.nonzero(unwrap(a)))


def flatnonzero(a):
    """Indices of the non-zero elements of the flattened array (not differentiable)."""
    return _no_gradient("flatnonzero", _np.flatnonzero(unwrap(a)), a)


def argwhere(a):
    """Indices of the non-zero elements, grouped by element (not differentiable)."""
    return _no_gradient("argwhere", _np.argwhere(unwrap(a)), a)


def count_nonzero(a, axis=None, keepdims=False):
    """The number of non-zero elements (not differentiable)."""
    return _no_gradient("count_nonzero",
                        _np.count_nonzero(unwrap(a), axis=axis, keepdims=keepdims), a)


def searchsorted(a, v, side="left", sorter=None):
    """Where to insert ``v`` to keep ``a`` sorted (not differentiable)."""
    return _no_gradient("searchsorted", _np.searchsorted(unwrap(a), unwrap(v), side=side,
                                                         sorter=unwrap(sorter)), a, v)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           equal_nan=True):
    """The sorted unique elements. The values are a recorded selection of ``ar`` (their
    gradient reaches the first occurrence of each); indices and counts carry none."""
    res = _np.unique(unwrap(ar), return_index=True, return_inverse=return_inverse,
                     return_counts=return_counts, axis=axis)
    first = res[1]
    if axis is None:
        values = _P["getitem"](reshape(ar, (-1,)), (first,))
    else:
        values = take(ar, first, axis=axis)
    extra = [_no_gradient("unique", r, ar) for r in res[2:]]
    if return_index:
        extra.insert(0, _no_gradient("unique", first, ar))
    return tuple([values] + extra) if extra else values


def bincount(x, weights=None, minlength=0):
    """Counts of each non-negative integer; with ``weights``, the sums of the weights in each
    bin, differentiable with respect to the weights."""
    xv = _np.asarray(unwrap(x))
    if weights is None:
        return _no_gradient("bincount", _np.bincount(xv, None, minlength), x)
    n = _max(int(xv.max()) + 1 if xv.size else 0, int(minlength))
    w = weights if isinstance(weights, ndarray) else _np.asarray(weights)
    if _np.asarray(unwrap(w)).dtype.kind not in "fc":
        w = astype(w, _np.float64)          # NumPy's bincount sums weights in float64
    return _P["scatter_add"](w, (xv,), (n,))


def histogram(a, bins=10, range=None, density=None, weights=None):
    """A histogram of the data. Counts carry no gradient; float results that depend on a
    recorded array (edges found from its range, densities, weighted counts) raise rather
    than silently having none: call it on ``a.detach()``."""
    hist, edges = _np.histogram(unwrap(a), bins, range, density, unwrap(weights))
    recorded = [v for v in (a, weights) if isinstance(v, ndarray) and v.node is not None]
    if recorded and _is_recording() and (
            range is None or hist.dtype.kind == "f" or weights is not None):
        raise NotImplementedError(
            "fastgrad.histogram has no derivative for its edges, densities or weighted "
            "counts, which depend on a recorded array; call it on a.detach() (and pass "
            "range=) if you only need the values")
    return _no_gradient("histogram", hist, a), _wrap(edges)


def array_equal(a1, a2, equal_nan=False):
    """Whether two arrays have the same shape and elements (``numpy.array_equal``); a Python
    bool, not recorded."""
    return bool(_np.array_equal(unwrap(a1), unwrap(a2), equal_nan=equal_nan))


def array_equiv(a1, a2):
    """Whether two arrays are equal after broadcasting (``numpy.array_equiv``); a Python bool, not
    recorded."""
    return bool(_np.array_equiv(unwrap(a1), unwrap(a2)))


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether all elements are equal within ``atol + rtol * abs(b)`` (``numpy.allclose``); a
    Python bool, not recorded."""
    return bool(_np.allclose(unwrap(a), unwrap(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``abs(a - b) <= atol + rtol * abs(b)``, a boolean array
    (``numpy.isclose``); not differentiable."""
    return _no_gradient("isclose", _np.isclose(unwrap(a), unwrap(b), rtol=rtol, atol=atol,
                                               equal_nan=equal_nan), a, b)


def all(a, axis=None, keepdims=False):
    """Whether every element along ``axis`` is true, a boolean array (``numpy.all``); not
    differentiable."""
    return _no_gradient("all", _np.all(unwrap(a), axis=axis, keepdims=keepdims), a)


def any(a, axis=None, keepdims=False):
    """Whether any element along ``axis`` is true, a boolean array (``numpy.any``); not
    differentiable."""
    return _no_gradient("any", _np.any(unwrap(a), axis=axis, keepdims=keepdims), a)


def shape(a):
    """The shape of ``a``, a tuple of ints (``numpy.shape``)."""
    return _np.shape(unwrap(a))


def ndim(a):
    """The number of dimensions of ``a`` (``numpy.ndim``)."""
    return _np.ndim(unwrap(a))


def size(a, axis=None):
    """The number of elements of ``a``, or along ``axis`` (``numpy.size``)."""
    return _np.size(unwrap(a), axis)


def result_type(*arrays_and_dtypes):
    """The dtype NumPy's promotion rules give for these arrays and dtypes
    (``numpy.result_type``)."""
    return _np.result_type(*[unwrap(a) for a in arrays_and_dtypes])


def _array_repr(a):
    """``array([...])`` as MXNet prints it: the dtype is shown unless it is float32 or bool."""
    data = unwrap(a)
    body = _np.array2string(data, separator=", ", prefix="array(")
    if data.dtype in (_np.float32, _np.bool_):
        return "array(%s)" % body
    return "array(%s, dtype=%s)" % (body, data.dtype)


concat = concatenate
permute_dims = transpose

# The table's names and the public functions defined above (Note [Generated namespaces]);
# type checkers read fastgrad/numpy/__init__.pyi, generated from this by tests.tools.stubgen.
__all__ = _namespaces.public_names(globals(), _TABLE_NAMES, ["fastgrad._api._creation"])

# Files and DLPack (fastgrad/_api/_io.py); numpy.save(f, a) on a fastgrad array dispatches here.
from fastgrad._api._io import from_dlpack, load, save, savez, savez_compressed  # noqa: E402
__all__ += ['from_dlpack', 'load', 'save', 'savez', 'savez_compressed']
