# Part of fastgrad/_array.pyx, textually included by it (Cython's ``include``): one extension
# module, so every call below stays a direct C call (Note [Array parts] in _array.pyx).
# Its imports are _array.pyx's; this file imports nothing.
#
# The tables the layers above fill at import (Note [Layers] in _layers.py): the table's
# primitives, the NumPy functions and ufuncs fastgrad overrides, the backward pass, the
# describer of primitives, the legacy array class.

# Filled once at import by the modules above that define them (Note [Layers] in _layers.py).
cdef object _ops = None          # fastgrad._functions: methods delegate to it
cdef dict _UFUNCS = {}           # numpy ufunc -> fastgrad callable (fastgrad._registry)
cdef dict _FUNCS = {}            # numpy function -> fastgrad callable (fastgrad._dispatch)
cdef object _backward = None     # fastgrad.autograd.backward
cdef object _describe = None     # fastgrad._docs.describe (Note [Docstrings of primitives])
cdef type _LEGACY_ARRAY = None   # fastgrad.ndarray.NDArray, for as_nd_ndarray
cdef dict _PRIMITIVES = {}       # op name -> Primitive (fastgrad._registry)
cdef object _capture_trace = _anomaly.capture_trace
cdef Primitive P_ADD = None, P_SUB = None, P_MUL = None, P_DIV = None, P_POW = None
cdef Primitive P_NEG = None, P_MATMUL = None, P_GETITEM = None, P_MOD = None
cdef Primitive P_SCATTER = None, P_BROADCAST = None, P_ASTYPE = None
cdef Primitive P_SIGMOID = None, P_RELU = None

# The table's primitives by name, read-only: filled by fastgrad._registry when it builds them.
PRIMITIVES = _types.MappingProxyType(_PRIMITIVES)

class _Required:
    """The default of a parameter that has none."""

    def __repr__(self):
        return "<required>"

    def __reduce__(self):
        return "REQUIRED"


REQUIRED = _Required()

_GRAD_REQS = {"null": GRAD_NULL, "write": GRAD_WRITE, "add": GRAD_ADD, "inplace": GRAD_WRITE}


def register_primitives(prims, ufuncs):
    """Take the table's primitives (by name) and the NumPy ufuncs they implement: called once
    by fastgrad._registry when it has built them (Note [Layers] in _layers.py)."""
    global _UFUNCS
    global P_ADD, P_SUB, P_MUL, P_DIV, P_POW, P_NEG, P_MATMUL, P_GETITEM, P_MOD
    global P_SCATTER, P_BROADCAST, P_ASTYPE, P_SIGMOID, P_RELU
    _PRIMITIVES.update(prims)
    _UFUNCS = dict(ufuncs)
    P_ADD, P_SUB, P_MUL, P_DIV = prims["add"], prims["subtract"], prims["multiply"], prims["divide"]
    P_POW, P_NEG, P_MATMUL = prims["power"], prims["negative"], prims["matmul"]
    P_GETITEM, P_MOD = prims["getitem"], prims["mod"]
    P_SCATTER, P_BROADCAST, P_ASTYPE = prims["scatter_add"], prims["broadcast_to"], prims["astype"]
    P_SIGMOID, P_RELU = prims["sigmoid"], prims["relu"]


def register_functions(functions):
    """Take the module of NumPy-style functions the methods delegate to (``a.sum()`` is
    ``functions.sum(a)``): called once by fastgrad._functions at its import."""
    global _ops
    _ops = functions


def register_numpy_functions(funcs):
    """Take the map from NumPy's functions to fastgrad's, for ``__array_function__``: called
    once by fastgrad._dispatch at its import."""
    global _FUNCS
    _FUNCS = dict(funcs)


def register_backward(backward):
    """Take the function ``a.backward()`` calls: called once by fastgrad.autograd."""
    global _backward
    _backward = backward


def register_describer(describe):
    """Take the function that writes the primitives' docstrings and signatures: called once
    by fastgrad._docs at its import."""
    global _describe
    _describe = describe


def register_legacy_array(cls):
    """Take the legacy array class ``as_nd_ndarray`` returns: called once by fastgrad.ndarray."""
    global _LEGACY_ARRAY
    _LEGACY_ARRAY = cls
