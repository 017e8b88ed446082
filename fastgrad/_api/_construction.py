"""Arrays built from Python sequences that hold recorded arrays (internal).

Note [History through construction]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``np.array([x, 2 * x, x * x])`` must be a recorded function of ``x``, not a NumPy copy of its
values: a gradient silently lost there is the worst kind of wrong. So a (nested) list or tuple
that holds fastgrad arrays is built as a recorded ``stack`` of its elements, innermost lists
first, and every op that receives such a sequence for an array argument (``np.sum([x, x**3])``,
``np.append([x, x], x)``) builds it the same way (``Primitive.apply`` calls
``from_sequence``). The dtype is NumPy's: the result type of the arrays and numbers in the
sequence (``[x, 2.0]`` with ``x`` float64 is float64); only a sequence of plain Python numbers
gets fastgrad's default float32 (MXNet's). A ragged sequence, or values that are not numbers
(an object array of strings, ``None``), raise ``TypeError`` naming the argument.

What cannot work: NumPy's own constructors and functions handed a *list* (``numpy.array([x,
y])``, ``numpy.mean([x, y])``, ``numpy.r_[x, y]``) never ask fastgrad: NumPy's
``__array_function__`` protocol only dispatches on arguments that are arrays themselves, so it
converts the elements with ``__array__`` and returns a plain NumPy result without history. Use
``fastgrad.np`` for those (``np.array``, ``np.mean``, ``np.r_``); NumPy functions called with a
fastgrad array as an argument (``numpy.stack([x, y])``, ``numpy.mean(x)``) do dispatch.
"""

import numpy as _np

from fastgrad._core._array import ndarray, unwrap
from fastgrad._ops._registry import REGISTRY

_STACK = REGISTRY["stack"]
_ASTYPE = REGISTRY["astype"]
_NUMERIC = "biufc"


def holds_array(seq):
    """Whether a (nested) list or tuple holds a fastgrad array."""
    for item in seq:
        if isinstance(item, ndarray):
            return True
        if type(item) is list or type(item) is tuple:
            if holds_array(item):
                return True
    return False


def _leaves(seq, out):
    for item in seq:
        if type(item) is list or type(item) is tuple:
            _leaves(item, out)
        else:
            out.append(item)
    return out


def _result_dtype(seq, what):
    types = []
    for leaf in _leaves(seq, []):
        if isinstance(leaf, (ndarray, _np.ndarray, _np.generic)):
            types.append(leaf.dtype)
        elif isinstance(leaf, (bool, int, float, complex)):
            types.append(leaf)          # a Python number: a weak type (NEP 50)
        else:
            raise TypeError("%s: cannot make a numeric array from an element of type %s"
                            % (what, type(leaf).__name__))
    dtype = _np.result_type(*types)
    check_numeric(dtype, what)
    return dtype


def check_numeric(dtype, what):
    """Raise ``TypeError`` naming ``what`` unless ``dtype`` is bool, integer, float or complex."""
    if _np.dtype(dtype).kind not in _NUMERIC:
        raise TypeError("%s: fastgrad arrays hold numbers, not %s values (dtype %s)"
                        % (what, "object" if _np.dtype(dtype).kind == "O" else "these",
                           _np.dtype(dtype)))


def _build(seq, dtype, what):
    items = []
    for item in seq:
        if type(item) is list or type(item) is tuple:
            item = _build(item, dtype, what)
        elif isinstance(item, ndarray):
            if item.dtype != dtype:
                item = _ASTYPE(item, dtype)
        else:
            item = _np.asarray(item, dtype=dtype)
        items.append(item)
    if not items:
        return _np.zeros((0,), dtype=dtype)
    shapes = {_np.shape(unwrap(a)) for a in items}
    if len(shapes) > 1:
        raise TypeError("%s: the sequence is ragged (its elements have shapes %s); fastgrad "
                        "arrays are rectangular" % (what, sorted(shapes, key=len)))
    return _STACK(items, 0)


def from_sequence(seq, dtype=None, what="fastgrad.array: argument 'object'"):
    """A recorded array built from a (nested) list or tuple holding fastgrad arrays.

    Parameters
    ----------
    seq : list or tuple
        Elements: fastgrad arrays, NumPy arrays, Python numbers, or sequences of them.
    dtype : dtype, optional
        The result's dtype; by default NumPy's result type of the elements.
    what : str
        How to name the argument in error messages.
    """
    dtype = _result_dtype(seq, what) if dtype is None else _np.dtype(dtype)
    out = _build(seq, dtype, what)
    return out if isinstance(out, ndarray) else _np.asarray(out)
