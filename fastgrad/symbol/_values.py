"""Encoding of the non-array values a symbol stores (op parameters and constants) as JSON.

Note [Symbol values]
~~~~~~~~~~~~~~~~~~~~
Op parameters are Python values: numbers, strings, ``None``, tuples (shapes, axes), NumPy
dtypes, slices and ``Ellipsis`` (indexing keys), NumPy arrays (advanced indices, constants).
JSON has no tuples, dtypes, slices or arrays, so each of those is written as a one-key object
with a reserved tag (``{"__tuple__": [...]}``); everything else is plain JSON. Decoding accepts
exactly these forms and nothing else, and builds arrays from raw bytes with ``numpy.frombuffer``
for a checked list of plain dtypes: loading a symbol never imports, evaluates or unpickles
anything. Every value a symbol op receives is encoded once when the symbol is built, so an
argument that cannot be saved is reported where it was written, not when the graph is saved.
"""

import base64
import math

import numpy as np

# Plain numeric dtypes (bool, signed and unsigned ints, floats, complex): the only ones that
# can be rebuilt from bytes without running anything.
_ARRAY_KINDS = "biufc"
_TAGS = ("__tuple__", "__dtype__", "__slice__", "__ellipsis__", "__array__", "__complex__",
         "__float__", "__input__")


class InputRef:
    """A placeholder for a composite op's ``k``-th symbol input inside its stored call."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __eq__(self, other):
        return isinstance(other, InputRef) and other.index == self.index

    def __hash__(self):
        return hash(("InputRef", self.index))

    def __repr__(self):
        return "<input %d>" % self.index


def _check_dtype(text, where):
    if not isinstance(text, str) or len(text) > 16:
        raise ValueError("%s: a dtype must be a short string, got %r" % (where, text))
    try:
        dt = np.dtype(text)
    except TypeError:
        raise ValueError("%s: unknown dtype %r" % (where, text)) from None
    if dt.kind not in _ARRAY_KINDS or dt.fields is not None or dt.subdtype is not None:
        raise ValueError("%s: dtype %r is not a plain numeric dtype" % (where, text))
    return dt


def encode(value, where="value"):
    """``value`` as a JSON-compatible structure (see Note [Symbol values]).

    Raises
    ------
    TypeError
        If ``value`` (or something inside it) is not one of the supported kinds.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and not isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float) and not isinstance(value, np.floating):
        if math.isfinite(value):
            return value
        return {"__float__": repr(value)}
    if isinstance(value, complex):
        return {"__complex__": [encode(value.real), encode(value.imag)]}
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v, where) for v in value]}
    if isinstance(value, list):
        return [encode(v, where) for v in value]
    if isinstance(value, slice):
        return {"__slice__": [encode(value.start, where), encode(value.stop, where),
                              encode(value.step, where)]}
    if value is Ellipsis:
        return {"__ellipsis__": True}
    if isinstance(value, InputRef):
        return {"__input__": value.index}
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        dt = np.dtype(value)
        _check_dtype(dt.str, where)
        return {"__dtype__": dt.str}
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        _check_dtype(arr.dtype.str, where)
        data = np.ascontiguousarray(arr).tobytes()
        return {"__array__": {"dtype": arr.dtype.str, "shape": list(arr.shape),
                              "data": base64.b64encode(data).decode("ascii"),
                              "scalar": isinstance(value, np.generic)}}
    raise TypeError("%s: a %s cannot be stored in a symbol (supported: numbers, strings, None, "
                    "tuples, lists, slices, dtypes and NumPy arrays)"
                    % (where, type(value).__name__))


def decode(obj, where="value", depth=0):
    """The Python value of an :func:`encode` result; any other structure is a ValueError."""
    if depth > 64:
        raise ValueError("%s: value nested too deeply" % where)
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError("%s: non-finite numbers must be tagged" % where)
        return obj
    if isinstance(obj, list):
        return [decode(v, where, depth + 1) for v in obj]
    if not isinstance(obj, dict) or len(obj) != 1:
        raise ValueError("%s: unexpected value %.80r" % (where, obj))
    (tag, body), = obj.items()
    if tag == "__tuple__":
        if not isinstance(body, list):
            raise ValueError("%s: __tuple__ needs a list" % where)
        return tuple(decode(v, where, depth + 1) for v in body)
    if tag == "__dtype__":
        return _check_dtype(body, where)
    if tag == "__slice__":
        if not isinstance(body, list) or len(body) != 3:
            raise ValueError("%s: __slice__ needs [start, stop, step]" % where)
        parts = [decode(v, where, depth + 1) for v in body]
        if any(p is not None and not isinstance(p, int) for p in parts):
            raise ValueError("%s: slice bounds must be integers or null" % where)
        return slice(*parts)
    if tag == "__ellipsis__":
        if body is not True:
            raise ValueError("%s: __ellipsis__ must be true" % where)
        return Ellipsis
    if tag == "__float__":
        if body not in ("inf", "-inf", "nan"):
            raise ValueError("%s: __float__ must be 'inf', '-inf' or 'nan'" % where)
        return float(body)
    if tag == "__complex__":
        if not isinstance(body, list) or len(body) != 2:
            raise ValueError("%s: __complex__ needs [real, imag]" % where)
        re, im = (decode(v, where, depth + 1) for v in body)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (re, im)):
            raise ValueError("%s: __complex__ parts must be numbers" % where)
        return complex(re, im)
    if tag == "__array__":
        return _decode_array(body, where)
    if tag == "__input__":
        if not isinstance(body, int) or isinstance(body, bool) or body < 0:
            raise ValueError("%s: __input__ needs a non-negative integer" % where)
        return InputRef(body)
    raise ValueError("%s: unknown tag %r (expected one of %s)" % (where, tag, ", ".join(_TAGS)))


def _decode_array(body, where):
    if not isinstance(body, dict) or set(body) != {"dtype", "shape", "data", "scalar"}:
        raise ValueError("%s: __array__ needs exactly dtype, shape, data and scalar" % where)
    dt = _check_dtype(body["dtype"], where)
    shape = body["shape"]
    if not isinstance(shape, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
        raise ValueError("%s: an array shape must be a list of non-negative integers" % where)
    if not isinstance(body["data"], str) or not isinstance(body["scalar"], bool):
        raise ValueError("%s: array data must be a base64 string" % where)
    try:
        raw = base64.b64decode(body["data"].encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ValueError("%s: array data is not valid base64" % where) from None
    count = 1
    for s in shape:
        count *= s
    if len(raw) != count * dt.itemsize:
        raise ValueError("%s: array data has %d bytes, but shape %s of %s needs %d"
                         % (where, len(raw), tuple(shape), dt, count * dt.itemsize))
    arr = np.frombuffer(raw, dtype=dt).reshape(shape).copy()
    if body["scalar"]:
        if arr.ndim != 0:
            raise ValueError("%s: a scalar must have shape []" % where)
        return arr[()]
    return arr


def contains_input(value):
    """Whether ``value`` (a decoded structure) holds an :class:`InputRef` anywhere."""
    if isinstance(value, InputRef):
        return True
    if isinstance(value, (list, tuple)):
        return any(contains_input(v) for v in value)
    return False


def same(a, b):
    """Whether two stored values are identical (arrays compared by dtype, shape and bytes)."""
    return encode(a) == encode(b)
