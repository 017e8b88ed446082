# Part of fastgrad/_core/_array.pyx, textually included by it (Cython's ``include``): one extension
# module, so every call below stays a direct C call (Note [Array parts] in _array.pyx).
# Its imports are _array.pyx's; this file imports nothing.
#
# What the layers above connect at start-up (Note [Bootstrap] in _bootstrap.py): the table's
# primitives, the NumPy functions and ufuncs fastgrad overrides, the backward pass, the
# describer of primitives, the legacy array class.

# Set once, by ``wire`` below. Until then each holds a stand-in that raises an error naming
# what is missing (``_Unwired``, ``_unwired_primitive``); the stand-ins are made at the end of
# _array.pyx, once Primitive exists.
cdef object _ops = None          # fastgrad._api._functions: methods delegate to it
cdef dict _UFUNCS = {}           # numpy ufunc -> fastgrad callable (fastgrad._ops._registry)
cdef dict _FUNCS = {}            # numpy function -> fastgrad callable (fastgrad._api._dispatch)
cdef object _backward = None     # fastgrad.autograd.backward
cdef object _describe = None     # fastgrad._ops._docs.describe (Note [Docstrings of primitives])
cdef type _LEGACY_ARRAY = None   # fastgrad.ndarray.NDArray, for as_nd_ndarray
cdef bint _wired = False         # whether ``wire`` has run
cdef dict _PRIMITIVES = {}       # op name -> Primitive (fastgrad._ops._registry)
cdef object _capture_trace = _anomaly.capture_trace
cdef Primitive P_ADD = None, P_SUB = None, P_MUL = None, P_DIV = None, P_POW = None
cdef Primitive P_NEG = None, P_MATMUL = None, P_GETITEM = None, P_MOD = None
cdef Primitive P_SCATTER = None, P_BROADCAST = None, P_ASTYPE = None
cdef Primitive P_SIGMOID = None, P_RELU = None

# The table's primitives by name, read-only: filled by ``wire`` at start-up.
PRIMITIVES = _types.MappingProxyType(_PRIMITIVES)

class _Required:
    """The default of a parameter that has none."""

    def __repr__(self):
        return "<required>"

    def __reduce__(self):
        return "REQUIRED"


REQUIRED = _Required()

_GRAD_REQS = {"null": GRAD_NULL, "write": GRAD_WRITE, "add": GRAD_ADD, "inplace": GRAD_WRITE}


def wire(*, primitives, ufuncs, functions, numpy_functions, describe, legacy_array, backward):
    """Connect the array type to what the layers above it define: called once, by
    ``fastgrad._bootstrap.wire`` at start-up (Note [Bootstrap] in _bootstrap.py).

    Parameters
    ----------
    primitives : mapping
        The table's primitives by name (``fastgrad._ops._registry.REGISTRY``): the operators
        (``a + b`` is the ``add`` op) and ``PRIMITIVES``.
    ufuncs : mapping
        NumPy ufunc -> its primitive (``fastgrad._ops._registry.UFUNC_OPS``), for
        ``__array_ufunc__``.
    functions : module
        The NumPy-style functions the methods delegate to (``a.sum()`` is
        ``functions.sum(a)``): ``fastgrad._api._functions``.
    numpy_functions : mapping
        NumPy function -> fastgrad's, for ``__array_function__`` (``fastgrad._api._dispatch``).
    describe : callable
        Writes the primitives' docstrings and signatures (``fastgrad._ops._docs.describe``).
    legacy_array : type
        The class ``as_nd_ndarray`` returns (``fastgrad.ndarray.NDArray``).
    backward : callable
        What ``a.backward()`` calls (``fastgrad.autograd.backward``).
    """
    global _ops, _UFUNCS, _FUNCS, _backward, _describe, _LEGACY_ARRAY, _wired
    global P_ADD, P_SUB, P_MUL, P_DIV, P_POW, P_NEG, P_MATMUL, P_GETITEM, P_MOD
    global P_SCATTER, P_BROADCAST, P_ASTYPE, P_SIGMOID, P_RELU
    _PRIMITIVES.update(primitives)
    _UFUNCS = dict(ufuncs)
    P_ADD, P_SUB = primitives["add"], primitives["subtract"]
    P_MUL, P_DIV = primitives["multiply"], primitives["divide"]
    P_POW, P_NEG, P_MATMUL = primitives["power"], primitives["negative"], primitives["matmul"]
    P_GETITEM, P_MOD = primitives["getitem"], primitives["mod"]
    P_SCATTER, P_BROADCAST = primitives["scatter_add"], primitives["broadcast_to"]
    P_ASTYPE, P_SIGMOID, P_RELU = primitives["astype"], primitives["sigmoid"], primitives["relu"]
    _ops = functions
    _FUNCS = dict(numpy_functions)
    _describe = describe
    _LEGACY_ARRAY = legacy_array
    _backward = backward
    _wired = True


def _not_wired(what):
    """The error of using ``what`` before start-up connected it."""
    return RuntimeError(
        "fastgrad._core._array: %s is not connected yet. fastgrad._bootstrap.wire() connects it "
        "when `import fastgrad` has imported its modules (Note [Bootstrap] in "
        "fastgrad/_bootstrap.py); code that runs while fastgrad is being imported cannot "
        "use it." % what)


class _Unwired:
    """Stands for ``what`` until ``wire`` replaces it: any use raises ``_not_wired``."""

    def __init__(self, what):
        self._what = what

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise _not_wired(self._what)

    def __call__(self, *args, **kwargs):
        raise _not_wired(self._what)


cdef Primitive _unwired_primitive(str name, Py_ssize_t n_in):
    """A stand-in for the table's primitive ``name``, whose kernel raises ``_not_wired``."""
    return Primitive(name, _Unwired("the table's primitive %r (fastgrad._ops._registry)" % name),
                     None, n_in, 1, (), (), (), (), False, (NO_RULE,) * n_in, False)


cdef _stand_ins():
    """Fill the slots ``wire`` sets with stand-ins that name what is missing."""
    global _ops, _backward, P_ADD, P_SUB, P_MUL, P_DIV, P_POW, P_NEG, P_MATMUL, P_GETITEM
    global P_MOD, P_SCATTER, P_BROADCAST, P_ASTYPE, P_SIGMOID, P_RELU
    _ops = _Unwired("the NumPy-style functions the methods call (fastgrad._api._functions)")
    _backward = _Unwired("the backward pass a.backward() runs (fastgrad.autograd)")
    P_ADD, P_SUB = _unwired_primitive("add", 2), _unwired_primitive("subtract", 2)
    P_MUL, P_DIV = _unwired_primitive("multiply", 2), _unwired_primitive("divide", 2)
    P_POW, P_MOD = _unwired_primitive("power", 2), _unwired_primitive("mod", 2)
    P_NEG, P_MATMUL = _unwired_primitive("negative", 1), _unwired_primitive("matmul", 2)
    P_GETITEM, P_SCATTER = _unwired_primitive("getitem", 1), _unwired_primitive("scatter_add", 1)
    P_BROADCAST = _unwired_primitive("broadcast_to", 1)
    P_ASTYPE, P_SIGMOID = _unwired_primitive("astype", 1), _unwired_primitive("sigmoid", 1)
    P_RELU = _unwired_primitive("relu", 1)
