"""The array type and the recording path.

Note [Recording]
~~~~~~~~~~~~~~~~
Every differentiable operation is a ``Primitive``: a forward kernel written with NumPy and a
derivative rule generated from the table in ``_derivatives.py``. Calling a primitive unwraps
its inputs to NumPy, runs the kernel, and, only when the thread is recording *and* some input
depends on a variable, records a ``Node`` that keeps the parents, the values the rule reads and
the output's shape and dtype. Everything else (constants, code outside ``record()``) costs one
kernel call and one wrapper allocation. Inputs the rule never reads are not kept, so recording
holds no more memory than the backward pass needs.

Note [Versions]
~~~~~~~~~~~~~~~
An in-place write (``a += b``, ``a[k] = v``) bumps the version of the array's *memory*: a
``VersionCell`` shared by the array and every view of it that fastgrad made (``x[1:3]``,
``x.T``, ``reshape``, ``detach()``, ...: ops marked ``views`` in the table share their input's
cell when their output really is a view of it). A node remembers the sum of the versions of the
arrays it saved and, if its rule reads its output, the output's cell; the backward pass checks
both and raises, naming the op, if memory the rule needs was written after it was recorded —
through the array itself or through any view. Inside ``record()`` in-place arithmetic on an
array that belongs to the graph is refused outright, because it would rewrite history; an
assignment ``a[k] = v`` is recorded instead (Note [Recorded assignment]). Writes through NumPy
views of the data (``numpy.asarray(a)[...] = v``) are outside fastgrad's sight.
"""

cimport cython
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM, PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.ref cimport Py_INCREF, PyObject
from fastgrad._node cimport Node, VersionCell, new_node, new_leaf, _bump_cell, HAS_RULE, NO_RULE
cimport numpy as cnp

cdef extern from "Python.h":
    Py_ssize_t _refcount "Py_REFCNT"(PyObject* o)   # no temporary reference, unlike Py_REFCNT
from fastgrad._state cimport is_recording_c, is_anomaly_c
from fastgrad._large.kernels cimport elementwise

import types as _types
import weakref
import numpy as _np

from fastgrad import _filled
from fastgrad._filled import Filled as _Filled
from fastgrad._zeros import NO_GRADIENT_OUTPUT as _NO_GRADIENT_OUTPUT, ZeroResult as _ZeroResult
from fastgrad.base import MXNetError, MXNetIndexError, MXNetValueError  # Note [MXNet errors]
from fastgrad.context import check_device as _check_device, cpu
from fastgrad import _anomaly

cnp.import_array()

cdef type NP_NDARRAY = _np.ndarray
cdef object _asarray = _np.asarray
cdef type FILLED = _Filled
cdef object _weakref = weakref.ref

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


# NumPy's keyword arguments that fastgrad's ops do not take, and what to do instead.
_NUMPY_ONLY = {
    "out": "use the returned array",
    "where": "use fastgrad.np.where on the result",
    "casting": "cast the inputs with astype() first",
    "order": "fastgrad's results are C-ordered",
    "dtype": "cast the inputs with astype() first",
    "subok": "results are always fastgrad arrays",
    "signature": "cast the inputs with astype() first",
}


def _unexpected_keyword(str op, str key):
    if key in _NUMPY_ONLY:
        return ("fastgrad.%s() does not support NumPy's %s= parameter: %s"
                % (op, key, _NUMPY_ONLY[key]))
    return "fastgrad.%s() got an unexpected keyword argument %r" % (op, key)


cdef ndarray wrap(object data, Node node, Py_ssize_t oidx, type cls=None):
    """Wrap a NumPy value in a fastgrad array produced by ``node`` (or by nothing)."""
    cdef ndarray a
    if type(data) is not NP_NDARRAY:
        data = _asarray(data)
    if cls is None or cls is ndarray:
        a = ndarray.__new__(ndarray)
    else:
        a = cls.__new__(cls)
    a._data = data
    a._node = node
    a._oidx = oidx
    return a


cdef VersionCell cell_of(ndarray a):
    """The version cell of ``a``'s memory, made on first need (Note [Versions])."""
    if a._vcell is None:
        a._vcell = VersionCell.__new__(VersionCell)
    return a._vcell


cdef unsigned long version_of(ndarray a) noexcept:
    return a._vcell.value if a._vcell is not None else 0


cdef object _root(object arr):
    """The array that owns the memory ``arr`` views (following NumPy's base chain)."""
    cdef PyObject* base
    while type(arr) is NP_NDARRAY:
        base = cnp.PyArray_BASE(<cnp.ndarray>arr)
        if base == NULL or type(<object>base) is not NP_NDARRAY:
            break
        arr = <object>base
    return arr


cdef void _share_views(object inp, tuple outs) except *:
    """Give the outputs that view ``inp``'s memory the same version cell (Note [Versions])."""
    if not isinstance(inp, ndarray):
        return
    cdef object root = _root((<ndarray>inp)._data)
    cdef ndarray o
    for obj in outs:
        o = <ndarray>obj
        if cnp.PyArray_BASE(<cnp.ndarray>o._data) != NULL and _root(o._data) is root:
            o._vcell = cell_of(<ndarray>inp)


def _wrap(data, cls=None):
    """Wrap a NumPy array (no copy, no history) in ``cls`` (default ``ndarray``)."""
    return wrap(data, None, 0, cls)


cdef inline object raw(object a):
    if isinstance(a, ndarray):
        return (<ndarray>a)._data
    return a


def unwrap(a):
    """The NumPy value behind ``a`` (a fastgrad array's data, or ``a`` itself)."""
    return raw(a)


def history(a):
    """``(node, output_index)`` of a fastgrad array, or ``(None, 0)`` if it has no history."""
    if isinstance(a, ndarray):
        return (<ndarray>a)._node, (<ndarray>a)._oidx
    return None, 0


def _raw_key(key):
    """An index with fastgrad arrays replaced by their NumPy data (Note [Float indices])."""
    if isinstance(key, ndarray):
        return _integral_index((<ndarray>key)._data)
    if type(key) is tuple:
        return tuple([_integral_index(raw(k)) for k in key])
    if type(key) is list:
        if not key:
            return _np.empty(0, dtype=_np.intp)    # x[[]]: no elements, as in NumPy
        return _integral_index(_asarray([raw(k) for k in key]))
    if type(key) is NP_NDARRAY:
        return _integral_index(key)
    return key


cdef object _integral_index(object k):
    """Note [Float indices]
    ~~~~~~~~~~~~~~~~~~~~
    ``mx.np.array([0, 2])`` is float32, and MXNet indexes with float arrays (D2L's
    ``y_hat[[0, 1], y]``). A float index array whose values are all integers indexes like the
    integer array with those values; any other value raises ``IndexError`` naming it, where
    MXNet would silently truncate it.
    """
    if type(k) is not NP_NDARRAY or (<cnp.ndarray>k).dtype.kind != "f":
        return k
    finite = _np.isfinite(k)
    ik = _np.where(finite, k, 0).astype(_np.intp)
    if not (finite.all() and _np.array_equal(ik, k)):
        bad = k[(ik != k) | ~finite]
        raise MXNetIndexError("index arrays must hold integers; this %s index holds %s"
                              % (k.dtype, _np.unique(bad)[:5].tolist()))
    return ik


def parse_grad_req(req):
    try:
        return _GRAD_REQS[req]
    except (KeyError, TypeError):
        raise ValueError("grad_req must be one of 'write', 'add' or 'null', got %r" % (req,)) from None


@cython.final
cdef class Primitive:
    """A differentiable operation: a NumPy forward kernel and a generated derivative rule.

    Primitives are built from the derivative table at import and are immutable afterwards.
    Calling one is calling the operation: ``fastgrad.np.sin(x)`` *is* the ``sin`` primitive.
    """

    def __init__(self, str name, forward, backward, Py_ssize_t n_in, Py_ssize_t n_out,
                 tuple param_names, tuple param_defaults, tuple save_inputs, tuple save_shapes,
                 bint save_result, tuple diff, bint differentiable, int order=-1,
                 bint views=False, bint zero=False, tuple differentiable_outputs=None):
        self.name = name
        self.forward = forward
        self.backward = backward
        self.n_in = n_in
        self.nargs_arrays_only = n_in if REQUIRED not in param_defaults else -2
        self.nargs_all_positional = n_in + len(param_names) if n_in >= 0 else -2
        self.n_out = n_out
        self.param_names = param_names
        self.param_defaults = param_defaults
        self.save_inputs = save_inputs
        self.save_shapes = save_shapes
        self.save_result = save_result
        self.diff = diff
        self.diff_all = diff[0] if (n_in < 0 and diff) else HAS_RULE
        self.differentiable = differentiable
        self.order = order
        self.views = views
        self.zero = zero
        self.differentiable_outputs = differentiable_outputs
        self.elementwise = (isinstance(forward, _np.ufunc) and forward.signature is None
                            and forward.nout == 1 and forward.nin == n_in and not param_names)

    def _set_graph_rule(self, fn):
        """Set the rule used under ``create_graph`` (once, at import; Note [Bindings])."""
        if self.backward_graph is not None:
            raise AttributeError("fastgrad.%s: its rules are fixed after import" % self.name)
        self.backward_graph = fn

    def _set_complex(self, int mode, Primitive variant=None):
        """How the op differentiates complex values (once, at import; Note [Complex
        gradients] in _complex.py)."""
        if self.complex_mode:
            raise AttributeError("fastgrad.%s: its rules are fixed after import" % self.name)
        self.complex_mode = mode
        self.complex_variant = variant

    def _set_large_rule(self, fn):
        """Set the rule used on large arrays (once, at import; Note [Bindings])."""
        if self.backward_large is not None:
            raise AttributeError("fastgrad.%s: its rules are fixed after import" % self.name)
        self.backward_large = fn

    @property
    def saves(self):
        """Indices of the inputs the derivative rule keeps, and whether it keeps the output."""
        return self.save_inputs, self.save_shapes, bool(self.save_result)

    def __repr__(self):
        return "<fastgrad op %s>" % self.name

    def __reduce__(self):
        return (_ops_lookup, (self.name,))

    # Note [Docstrings of primitives]
    # ``fastgrad.np.sin`` is a Primitive, not a function, so its docstring and signature are
    # written from the derivative table by fastgrad._docs, when first asked for (help(),
    # inspect.signature, Sphinx), never at import. ``__get__`` (returning the primitive itself,
    # as a class attribute already did) makes it a method descriptor to ``inspect``, so
    # ``pydoc`` documents it as a routine instead of documenting the Primitive class.
    @property
    def __doc__(self):
        return _describe(self, "doc") if _describe is not None else None

    @property
    def __signature__(self):
        return _describe(self, "signature") if _describe is not None else None

    @property
    def __name__(self):
        return self.name

    @property
    def __qualname__(self):
        return self.name

    def __get__(self, instance, owner):
        return self

    def __call__(self, *args, **kwargs):
        if not kwargs:
            if PyTuple_GET_SIZE(args) == self.nargs_arrays_only:
                return self.apply(args, self.param_defaults)
            if PyTuple_GET_SIZE(args) == self.nargs_all_positional:
                return self.apply(args[:self.n_in], args[self.n_in:])
        return self._call_slow(args, kwargs)

    def _call_slow(self, tuple args, dict kwargs):
        cdef Py_ssize_t n_in = self.n_in
        if n_in < 0:
            if not args:
                raise TypeError("fastgrad.%s() missing its sequence of arrays" % self.name)
            inputs = tuple(args[0])
            rest = args[1:]
            if not inputs:
                raise ValueError("fastgrad.%s() needs at least one array" % self.name)
        else:
            if len(args) < n_in:
                raise TypeError("fastgrad.%s() takes %d array argument%s (%d given)"
                                % (self.name, n_in, "" if n_in == 1 else "s", len(args)))
            inputs = args[:n_in]
            rest = args[n_in:]
        names = self.param_names
        if len(rest) > len(names):
            raise TypeError("fastgrad.%s() takes at most %d arguments (%d given)"
                            % (self.name, max(n_in, 0) + len(names), len(args)))
        params = list(rest) + list(self.param_defaults[len(rest):])
        for key, value in kwargs.items():
            try:
                i = names.index(key)
            except ValueError:
                raise TypeError(_unexpected_keyword(self.name, key)) from None
            if i < len(rest):
                raise TypeError("fastgrad.%s() got multiple values for argument %r"
                                % (self.name, key))
            params[i] = value
        for i in range(len(params)):
            if params[i] is REQUIRED:
                raise TypeError("fastgrad.%s() missing required argument %r"
                                % (self.name, names[i]))
        return self.apply(inputs, tuple(params))

    cdef object apply(self, tuple args, tuple params):
        cdef Py_ssize_t n = PyTuple_GET_SIZE(args), i
        cdef tuple raws = PyTuple_New(n)
        cdef bint track = False
        cdef type cls = None
        cdef object a, r
        for i in range(n):
            a = <object>PyTuple_GET_ITEM(args, i)
            if isinstance(a, ndarray):
                r = (<ndarray>a)._data
                if cls is None:
                    cls = type(a)
                if (<ndarray>a)._node is not None:
                    track = True
            elif type(a) is list or type(a) is tuple:
                r = _sequence_argument(a, self, i)
                if isinstance(r, ndarray):          # Note [History through construction]
                    a = r
                    args = args[:i] + (a,) + args[i + 1:]
                    r = (<ndarray>a)._data
                    if cls is None:
                        cls = type(a)
                    if (<ndarray>a)._node is not None:
                        track = True
            elif type(a) is FILLED:
                r = _asarray(a)
            else:
                r = a
            Py_INCREF(r)
            PyTuple_SET_ITEM(raws, i, r)
        try:
            if PyTuple_GET_SIZE(params):
                out = self.forward(*raws, *params)
            elif self.elementwise:
                out = elementwise(self.forward, raws)   # Note [Large-array kernels]
                if out is None:
                    out = self.forward(*raws)
            else:
                out = self.forward(*raws)
        except Exception as exc:
            _annotate(exc, self, raws, params)
            raise
        cdef Node node = None
        if self.n_out == 1:
            if type(out) is not NP_NDARRAY:
                out = _asarray(out)
            if track and is_recording_c():
                node = self._record(args, raws, params, out, 1)
            w = wrap(out, node, 0, cls)
            if self.views:
                _share_views(<object>PyTuple_GET_ITEM(args, 0), (w,))
            if node is not None and self.save_result and not node.zero:
                node.out_cell = cell_of(w)
                node.out_v0 = node.out_cell.value
            return w
        out = tuple([o if type(o) is NP_NDARRAY else _asarray(o) for o in out])
        if track and is_recording_c():
            node = self._record(args, raws, params, out, len(out))
        ws = tuple([wrap(out[i], node, i, cls) for i in range(len(out))])
        if node is not None and not node.zero:
            _zero_outputs(self, node, out, ws)
        if self.views:
            _share_views(<object>PyTuple_GET_ITEM(args, 0), ws)
        if node is not None and self.save_result and not node.zero:
            # One cell watches every output the rule reads.
            cell = VersionCell.__new__(VersionCell)
            for obj in ws:
                if (<ndarray>obj)._vcell is None:
                    (<ndarray>obj)._vcell = cell
            node.out_cell = cell
        return ws

    cdef Node _record(self, tuple args, tuple raws, tuple params, object out, Py_ssize_t n_out):
        cdef Py_ssize_t n = PyTuple_GET_SIZE(args), i, j, d
        cdef tuple parents = PyTuple_New(n)
        cdef list oidx = None
        cdef list consts = None
        cdef bint linked = False
        cdef object a, p
        cdef unsigned long vsum = 0
        # A node that carries no gradient still records what it depends on (Note [Zero
        # gradients]): every input with history is a parent, nothing is saved.
        cdef bint zero = (self.zero or not self.differentiable
                          or not _carries(out, n_out, args, raws))
        for i in range(n):
            a = <object>PyTuple_GET_ITEM(args, i)
            p = None
            if isinstance(a, ndarray) and (<ndarray>a)._node is not None:
                d = HAS_RULE if zero else (self.diff_all if self.n_in < 0 else self.diff[i])
                if d == HAS_RULE:
                    p = (<ndarray>a)._node
                    linked = True
                    if (<ndarray>a)._oidx:
                        if oidx is None:
                            oidx = [0] * n
                        oidx[i] = (<ndarray>a)._oidx
                elif d == NO_RULE:
                    raise NotImplementedError(
                        "fastgrad.%s has no derivative with respect to its argument %d, which "
                        "depends on a variable being differentiated; detach() it or use an "
                        "op with a derivative" % (self.name, i))
            if p is None:
                if consts is None:
                    consts = [None] * n
                consts[i] = <object>PyTuple_GET_ITEM(raws, i)
            Py_INCREF(p)
            PyTuple_SET_ITEM(parents, i, p)
        if not linked:
            return None
        cdef Primitive rule_op = self
        # A zero node runs no rule, so it needs no complex one (comparisons of complex values).
        if not zero and self.complex_mode != 1 and _any_complex(raws, out, n_out):
            if self.complex_mode == 0:
                raise NotImplementedError(
                    "fastgrad.%s has no derivative checked for complex values; compute it on "
                    "the real and imaginary parts (numpy.real, numpy.imag) or detach() the "
                    "input" % self.name)
            rule_op = self.complex_variant
        cdef Node node = new_node(rule_op)
        node.parents = parents
        if consts is not None:
            node.consts = tuple(consts)
        node.parent_oidx = tuple(oidx) if oidx is not None else None
        cdef Py_ssize_t ns = PyTuple_GET_SIZE(self.save_inputs)
        cdef Py_ssize_t nsh = PyTuple_GET_SIZE(self.save_shapes)
        cdef tuple saved
        if zero:
            node.zero = True
            node.saved = ()
        elif ns or nsh:
            saved = PyTuple_New(ns + nsh)
            for i in range(nsh):
                j = <Py_ssize_t><object>PyTuple_GET_ITEM(self.save_shapes, i)
                a = <object>PyTuple_GET_ITEM(raws, j)
                a = a.shape if type(a) is NP_NDARRAY else _np.shape(a)
                Py_INCREF(a)
                PyTuple_SET_ITEM(saved, ns + i, a)
            for i in range(ns):
                j = <Py_ssize_t><object>PyTuple_GET_ITEM(self.save_inputs, i)
                a = <object>PyTuple_GET_ITEM(args, j)
                if isinstance(a, ndarray):
                    vsum += version_of(<ndarray>a)
                else:
                    a = <object>PyTuple_GET_ITEM(raws, j)
                Py_INCREF(a)
                PyTuple_SET_ITEM(saved, i, a)
            node.saved = saved
            node.vsum = vsum
        else:
            node.saved = ()
        if self.save_result and not zero:
            node.result = out
        node.params = params
        node.n_out = n_out
        if n_out == 1:
            node.out_shape = out.shape
            node.out_dtype = out.dtype
        else:
            node.out_shape = tuple([o.shape for o in out])
            node.out_dtype = tuple([o.dtype for o in out])
        if is_anomaly_c():
            node.trace = _capture_trace()
        return node


cdef object _sequence_argument(object seq, Primitive op, Py_ssize_t i):
    """A list or tuple passed for an array argument: a recorded array if it holds fastgrad
    arrays (Note [History through construction] in _construction.py), else its NumPy array.
    Ragged or non-numeric sequences raise ``TypeError`` naming the op and the argument."""
    what = "fastgrad.%s: argument %d" % (op.name, i)
    if _ops._holds_array(seq):
        return _ops._from_sequence(seq, None, what)
    try:
        r = _asarray(seq)
    except ValueError as exc:
        raise TypeError("%s is a ragged sequence (%s)" % (what, exc)) from None
    _ops._check_numeric(r.dtype, what)
    return r


cdef void _zero_outputs(Primitive op, Node node, tuple out, tuple ws) except *:
    """Give each output of a multi-output node that carries no gradient (declared so in the
    table, or of an integer or bool dtype) a zero node of its own between it and ``node``:
    it still reaches what ``node`` depends on, and ``node`` sees a symbolic zero for it
    (Note [Zero gradients])."""
    cdef Py_ssize_t k
    cdef Node z
    cdef tuple flags = op.differentiable_outputs
    for k in range(len(out)):
        if (flags is None or flags[k]) and (cnp.PyArray_ISFLOAT(<cnp.ndarray>out[k])
                                            or cnp.PyArray_ISCOMPLEX(<cnp.ndarray>out[k])):
            continue
        z = new_node(_NO_GRADIENT_OUTPUT)
        z.zero = True
        z.parents = (node,)
        z.parent_oidx = (k,) if k else None
        z.saved = ()
        z.params = ()
        z.out_shape = out[k].shape
        z.out_dtype = out[k].dtype
        (<ndarray>ws[k])._node = z
        (<ndarray>ws[k])._oidx = 0


cdef bint _foreign(object a):
    """Whether ``a`` is another library's type that overrides NumPy's ufuncs (or opts out of
    them with ``__array_ufunc__ = None``, which asks operators to return NotImplemented)."""
    if isinstance(a, (ndarray, NP_NDARRAY, FILLED, int, float, complex, _np.generic, list,
                      tuple)) or a is None:
        return False
    return hasattr(type(a), "__array_ufunc__")


cdef inline bint _defer(object other):
    """Whether a binary operator should return ``NotImplemented`` so that ``other``'s own
    reflected operator runs (another library's array wrapping fastgrad arrays)."""
    if type(other) is float or type(other) is int or isinstance(other, ndarray) \
            or type(other) is NP_NDARRAY:
        return False
    return _foreign(other)


cdef inline bint _carries(object out, Py_ssize_t n_out, tuple args, tuple raws) except -1:
    """Whether an op's output can carry a gradient: a floating or complex dtype (for several
    outputs, any of them), or an integer result computed from integer variables alone (MXNet's
    integer variables). Bool results, and integer results of float inputs (casts, rounding
    to integers), never do: their derivative is zero (Note [Zero gradients])."""
    if n_out == 1:
        if cnp.PyArray_ISFLOAT(<cnp.ndarray>out) or cnp.PyArray_ISCOMPLEX(<cnp.ndarray>out):
            return True
        return cnp.PyArray_ISINTEGER(<cnp.ndarray>out) and _integer_history(args, raws)
    for o in out:
        if cnp.PyArray_ISFLOAT(<cnp.ndarray>o) or cnp.PyArray_ISCOMPLEX(<cnp.ndarray>o):
            return True
    return False


cdef bint _integer_history(tuple args, tuple raws) except -1:
    """Whether every input with history is an integer array."""
    cdef Py_ssize_t i
    for i in range(PyTuple_GET_SIZE(args)):
        a = <object>PyTuple_GET_ITEM(args, i)
        if isinstance(a, ndarray) and (<ndarray>a)._node is not None:
            if not cnp.PyArray_ISINTEGER(<cnp.ndarray>(<ndarray>a)._data):
                return False
    return True


cdef bint _any_complex(tuple raws, object out, Py_ssize_t n_out) except -1:
    """Whether an input or output of a recorded op holds complex values."""
    cdef object r
    for r in raws:
        if type(r) is NP_NDARRAY:
            if cnp.PyArray_ISCOMPLEX(<cnp.ndarray>r):
                return True
        elif type(r) is complex:
            return True
    if n_out == 1:
        return cnp.PyArray_ISCOMPLEX(<cnp.ndarray>out)
    for r in out:
        if cnp.PyArray_ISCOMPLEX(<cnp.ndarray>r):
            return True
    return False


cdef void _annotate(object exc, Primitive op, tuple raws, tuple params):
    """Add the op, its inputs' shapes and dtypes and its parameters to an error's message."""
    parts = []
    for r in raws:
        if isinstance(r, NP_NDARRAY):
            parts.append("array of shape %s and dtype %s" % (r.shape, r.dtype))
        else:
            parts.append("%s %r" % (type(r).__name__, r))
    note = "in fastgrad.%s(%s)" % (op.name, ", ".join(parts))
    if params:
        note += " with %s" % ", ".join("%s=%r" % (n, v) for n, v in zip(op.param_names, params))
    try:
        exc.add_note(note)
    except AttributeError:      # Python < 3.11: no notes
        pass


def record_custom(op, tuple inputs, tuple outputs):
    """Record one node for a custom op (``autograd.Function``) and return its outputs.

    ``op`` must have a ``name`` and a ``node_backward(node, g, needs, create_graph)`` method.
    Returns new arrays sharing the outputs' data, produced by the node, or the outputs
    unchanged when nothing is recorded.
    """
    cdef Py_ssize_t n = len(inputs), i
    cdef list parents = [None] * n
    cdef list oidx = None
    cdef bint linked = False
    if not is_recording_c():
        return outputs
    for i in range(n):
        a = inputs[i]
        if isinstance(a, ndarray) and (<ndarray>a)._node is not None:
            parents[i] = (<ndarray>a)._node
            linked = True
            if (<ndarray>a)._oidx:
                if oidx is None:
                    oidx = [0] * n
                oidx[i] = (<ndarray>a)._oidx
    if not linked:
        return outputs
    cdef Node node = new_node(op)
    node.parents = tuple(parents)
    if None in parents:
        node.consts = tuple([None if parents[i] is not None else unwrap(inputs[i])
                             for i in range(n)])
    node.parent_oidx = tuple(oidx) if oidx is not None else None
    node.saved = ()
    node.params = ()
    node.n_out = len(outputs)
    if node.n_out == 1:
        node.out_shape = (<ndarray>outputs[0])._data.shape
        node.out_dtype = (<ndarray>outputs[0])._data.dtype
    else:
        node.out_shape = tuple([(<ndarray>o)._data.shape for o in outputs])
        node.out_dtype = tuple([(<ndarray>o)._data.dtype for o in outputs])
    if is_anomaly_c():
        node.trace = _capture_trace()
    return tuple([wrap((<ndarray>outputs[i])._data, node, i, type(outputs[i]))
                  for i in range(node.n_out)])


def record_zero(str name, tuple inputs, ndarray out):
    """Record ``out``, an integer or bool result of ``inputs`` that no table op computes
    (``argmax``, ``nonzero``...), as a zero node (Note [Zero gradients]); returns ``out``."""
    if not is_recording_c():
        return out
    cdef list parents = []
    cdef list oidx = []
    for a in inputs:
        if isinstance(a, ndarray) and (<ndarray>a)._node is not None:
            parents.append((<ndarray>a)._node)
            oidx.append((<ndarray>a)._oidx)
    if not parents:
        return out
    cdef Node node = new_node(_ZeroResult(name, out._data))
    node.zero = True
    node.parents = tuple(parents)
    node.parent_oidx = tuple(oidx) if any(oidx) else None
    node.saved = ()
    node.params = ()
    node.out_shape = out._data.shape
    node.out_dtype = out._data.dtype
    out._node = node
    out._oidx = 0
    return out


def wrap_output(data, Node node, Py_ssize_t index):
    """A fastgrad array for output ``index`` of ``node`` (internal: custom Functions)."""
    return wrap(data, node, index)


def _ops_lookup(name):
    return _PRIMITIVES[name]


cdef inline void _check_recorded_inplace(ndarray self, object other, str what) except *:
    if is_recording_c() and (self._node is not None
                             or (isinstance(other, ndarray) and (<ndarray>other)._node is not None)):
        raise MXNetError(
            "in-place %s on an array that takes part in a recorded graph would rewrite its "
            "history; inside autograd.record() write it out of place (a = a + b)" % what)


cdef void _record_setitem(ndarray self, object key, object value) except *:
    """``self[key] = value`` inside ``record()``.

    Note [Recorded assignment]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~
    As in MXNet and PyTorch, ``x[key] = v`` inside ``record()`` is part of the graph when ``x``
    is an intermediate or a constant: the values are written into ``x``'s memory as usual, and
    ``x`` gets a new history, ``x - scatter(x[key]) + scatter(v)``, made of table ops (so it is
    differentiable to any order and saves none of ``x``'s values): the gradient reaches ``v``
    at ``key`` and ``x``'s old history everywhere else. Refused, with a clear error: writing
    into a variable (a leaf whose gradient is wanted), into memory that another fastgrad array
    shares (a view, or an output whose rule reads it), and repeated advanced indices (which
    element wins is up to NumPy). A recorded op that saved ``x``'s old values raises at
    backward time, through the version counter (Note [Versions]).
    """
    cdef Node node = self._node
    if node is not None and node.op is None:
        raise MXNetError(
            "in-place assignment (a[...] = v) into a variable that requires a gradient would "
            "lose its gradient; inside autograd.record() write into an intermediate or a copy "
            "(y = x.copy(); y[...] = v)")
    if self._vcell is not None and _refcount(<PyObject*>self._vcell) > 1:
        raise MXNetError(
            "in-place assignment (a[...] = v) inside autograd.record() into an array whose "
            "memory another recorded array shares (a view, or an output its op saved) would "
            "give that array wrong gradients; assign into a copy() instead")
    cdef object data = self._data
    cdef object target_shape = data[key].shape
    counts = _np.zeros(data.shape, dtype=_np.intp)
    _np.add.at(counts, key, 1)
    if counts.max(initial=0) > 1:
        raise MXNetIndexError(
            "in-place assignment (a[...] = v) inside autograd.record() with repeated indices "
            "is not differentiable (which value is kept is up to NumPy); use unique indices")
    v = value
    if not isinstance(v, ndarray):
        v = wrap(_np.asarray(v), None, 0, type(self))
    if (<ndarray>v)._data.dtype != data.dtype:
        v = P_ASTYPE.apply((v,), (data.dtype,))
    if (<ndarray>v)._data.shape != target_shape:
        v = P_BROADCAST.apply((v,), (target_shape,))
    shape = data.shape
    old = wrap(data, node, self._oidx, type(self))   # the values before, with their history
    kept = P_SUB.apply((old, P_SCATTER.apply((P_GETITEM.apply((old,), (key,)),), (key, shape))), ())
    new = <ndarray>P_ADD.apply((kept, P_SCATTER.apply((v,), (key, shape))), ())
    data[key] = (<ndarray>v)._data
    self._bump()
    self._node = new._node
    self._oidx = new._oidx


@cython.freelist(256)
@cython.no_gc
cdef class ndarray:
    """A NumPy array that autograd can differentiate through.

    ``fastgrad.np.ndarray`` wraps a ``numpy.ndarray`` and records the operations applied to it
    while ``autograd.record()`` is on and it depends on a variable (an array that had
    ``attach_grad`` called). Create arrays with ``fastgrad.np.array``, ``zeros``, ``ones``, ...

    Examples
    --------
    >>> import fastgrad as mx
    >>> x = mx.np.array([1.0, 2.0, 3.0])
    >>> x.attach_grad()
    >>> with mx.autograd.record():
    ...     y = (x * x).sum()
    >>> y.backward()
    >>> x.grad
    array([2., 4., 6.])
    """

    def __init__(self, data=None, dtype=None, ctx=None):
        if data is None:
            data = ()
        if isinstance(data, ndarray):
            data = (<ndarray>data)._data
        if isinstance(data, tuple) and all(isinstance(s, int) for s in data):
            self._data = _np.empty(data, dtype=_np.float32 if dtype is None else dtype)
        else:
            self._data = _np.array(data, dtype=dtype)

    # ----------------------------------------------------------- NumPy protocols
    __array_priority__ = 1000.0

    def __array__(self, dtype=None, copy=None):
        if dtype is None and not copy:
            return self._data
        return _np.array(self._data, dtype=dtype, copy=True if copy else None)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # An operand of another library that overrides ufuncs (a wrapper holding fastgrad
        # arrays, such as an xarray DataArray): defer to it, as NumPy's protocol asks; it
        # calls the ufunc again on the fastgrad arrays it holds, which records it.
        for a in inputs:
            if _foreign(a):
                return NotImplemented
        out = kwargs.pop("out", None)
        if out is not None:
            for a in (out if isinstance(out, tuple) else (out,)):
                if _foreign(a):
                    return NotImplemented
        if method == "__call__":
            fn = _UFUNCS.get(ufunc)
            if fn is None:
                raise TypeError("fastgrad does not support numpy.%s on fastgrad arrays; "
                                "call numpy.asarray() first to leave the graph" % ufunc.__name__)
            if kwargs:
                raise TypeError("fastgrad.%s: unsupported keyword argument(s) %s"
                                % (ufunc.__name__, ", ".join(sorted(kwargs))))
            result = fn(*inputs)
        elif method == "reduce" and ufunc in _REDUCERS:
            axis = kwargs.pop("axis", 0)
            keepdims = kwargs.pop("keepdims", False)
            if kwargs:
                raise TypeError("fastgrad: numpy.%s.reduce with %s is not supported"
                                % (ufunc.__name__, ", ".join(sorted(kwargs))))
            result = getattr(_ops, _REDUCERS[ufunc])(inputs[0], axis=axis, keepdims=keepdims)
        else:
            raise TypeError("fastgrad does not support numpy.%s.%s on fastgrad arrays"
                            % (ufunc.__name__, method))
        if out is not None:
            target = out[0] if isinstance(out, tuple) else out
            if isinstance(target, ndarray):
                target[...] = result
            else:
                _np.copyto(target, raw(result))
            return target
        return result

    def __array_function__(self, func, types, args, kwargs):
        for t in types:
            if not issubclass(t, (ndarray, NP_NDARRAY, FILLED)):
                return NotImplemented       # another library's array: let it decide
        fn = _FUNCS.get(func)
        if fn is None:
            raise TypeError("fastgrad does not support numpy.%s on fastgrad arrays; call "
                            "numpy.asarray() first to leave the graph" % func.__name__)
        return fn(*args, **kwargs)

    # ----------------------------------------------------------- attributes
    @property
    def shape(self):
        return self._data.shape

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def size(self):
        return self._data.size

    @property
    def itemsize(self):
        return self._data.itemsize

    @property
    def nbytes(self):
        return self._data.nbytes

    @property
    def strides(self):
        return self._data.strides

    @property
    def T(self):
        return _ops.transpose(self)

    @property
    def real(self):
        """The real part (differentiable; Note [Complex gradients] in _complex.py)."""
        return _ops.real(self)

    @property
    def imag(self):
        """The imaginary part (differentiable)."""
        return _ops.imag(self)

    def conj(self):
        """The complex conjugate (differentiable)."""
        return _ops.conj(self)

    conjugate = conj

    @property
    def grad(self):
        """The gradient buffer filled by ``backward`` (``None`` until ``attach_grad``).

        Note [Lazy grad buffers]
        ~~~~~~~~~~~~~~~~~~~~~~~~
        ``attach_grad`` does not allocate the buffer: it is made the first time ``.grad`` is
        read (zeros, as MXNet shows it) or, if a backward pass comes first, it *is* the first
        gradient that pass computes. A large variable therefore never costs a zero-filled
        buffer next to its gradient.
        """
        if self._grad_lazy:
            self._grad = wrap(_np.zeros_like(self._data), None, 0, type(self))
            self._grad_lazy = False
        return self._grad

    @property
    def grad_req(self):
        return {GRAD_NULL: "null", GRAD_WRITE: "write", GRAD_ADD: "add"}[self._grad_req] \
            if self._grad is not None or self._grad_lazy else "null"

    @property
    def ctx(self):
        return cpu()

    @property
    def context(self):
        return cpu()

    @property
    def device(self):
        return cpu()

    @property
    def stype(self):
        return "default"

    @property
    def version(self):
        """How many in-place writes this array has had (see ``Note [Versions]``)."""
        return version_of(self)

    @property
    def node(self):
        """The tape node that produced this array, or ``None`` (internal; for introspection)."""
        return self._node

    @property
    def output_index(self):
        return self._oidx

    # ----------------------------------------------------------- autograd
    def attach_grad(self, grad_req="write", stype=None):
        """Allocate a gradient buffer and make this array a variable of autograd.

        Parameters
        ----------
        grad_req : {'write', 'add', 'null'}
            ``'write'`` overwrites ``.grad`` at each backward pass, ``'add'`` adds to it,
            ``'null'`` leaves it alone.

        Notes
        -----
        ``.grad`` stays the same array object across backward passes, but a pass may give it
        a new data buffer (a gradient the pass computed is moved in rather than copied): read
        it through ``x.grad`` after each pass instead of keeping a NumPy view of its old data.

        Calling it on an array computed from variables, inside ``record()`` or after it,
        keeps the history through the array (MXNet 2.x): gradients still flow to the variables
        it came from, and the array's own ``.grad`` receives the gradient with respect to it
        (Note [Retained intermediates] in ``_engine.pyx``); :meth:`drop_grad` undoes it.
        """
        cdef int req = parse_grad_req(grad_req)
        if stype not in (None, "default"):
            raise ValueError("fastgrad arrays are dense: stype must be 'default', got %r" % (stype,))
        if self._data.dtype.kind not in "fciu":
            raise TypeError("attach_grad: gradients are defined for numeric arrays (integer "
                            "variables get integer gradients, as in MXNet); this array has "
                            "dtype %s (use astype('float32'))" % self._data.dtype)
        self._attach(req, None, True)

    cdef _attach(self, int req, object grad, bint swappable):
        cdef Node node = self._node
        if node is not None and node.op is not None:
            if node.n_out == 1:
                node.var_refs = _weakref(self)
            else:
                if node.var_refs is None:
                    node.var_refs = [None] * node.n_out
                node.var_refs[self._oidx] = _weakref(self)
        else:
            if node is not None and node.op is None:
                node.var_refs = None
            self._node = new_leaf(self._data.shape, self._data.dtype, _weakref(self))
            self._oidx = 0
        self._grad = grad
        self._grad_lazy = grad is None
        self._grad_req = req
        self._grad_swappable = swappable
        self._fresh_grad = False

    def drop_grad(self):
        """Undo :meth:`attach_grad`: ``.grad`` becomes ``None`` and no backward pass writes it.

        A variable becomes a constant; an intermediate keeps its history (gradients still flow
        through it to the variables below) but no longer receives its own gradient.
        """
        cdef Node node = self._node
        if node is not None:
            if node.op is None:
                node.var_refs = None
                self._node = None
            elif node.n_out == 1:
                node.var_refs = None
            elif node.var_refs is not None:
                node.var_refs[self._oidx] = None
                if all(r is None for r in node.var_refs):
                    node.var_refs = None
        self._grad = None
        self._grad_lazy = False
        self._grad_req = GRAD_NULL
        self._fresh_grad = False

    def _mark(self, grad, grad_req):
        cdef int req = parse_grad_req(grad_req)
        if not isinstance(grad, ndarray):
            if not isinstance(grad, NP_NDARRAY):
                raise TypeError("mark_variables: gradients must be arrays, got %s"
                                % type(grad).__name__)
            grad = wrap(grad, None, 0, type(self))
        if (<ndarray>grad)._data.shape != self._data.shape:
            raise ValueError("mark_variables: gradient shape %s does not match the variable's "
                             "shape %s" % ((<ndarray>grad).shape, self.shape))
        if self._data.dtype.kind not in "fciu":
            raise TypeError("mark_variables: gradients are defined for numeric arrays; "
                            "this variable has dtype %s" % self._data.dtype)
        self._attach(req, grad, False)

    def backward(self, out_grad=None, retain_graph=False, train_mode=True):
        """Compute the gradient of this array with respect to the variables it depends on.

        A non-scalar array is treated as the sum of its elements unless ``out_grad`` is given.
        See :func:`fastgrad.autograd.backward`.
        """
        _backward([self], None if out_grad is None else [out_grad], retain_graph, train_mode)

    def detach(self):
        """The same values with no history: gradients do not flow through the result."""
        cdef ndarray out = wrap(self._data, None, 0, type(self))
        out._vcell = cell_of(self)          # same memory (Note [Versions])
        return out

    def asnumpy(self):
        """A NumPy copy of the values."""
        return self._data.copy()

    def asscalar(self):
        if self._data.size != 1:
            raise ValueError("asscalar: the array has %d elements, not 1" % self._data.size)
        return self._data.reshape(()).item()

    def item(self, *args):
        return self._data.item(*args)

    def tolist(self):
        return self._data.tolist()

    def wait_to_read(self):
        pass

    def as_np_ndarray(self):
        cdef ndarray out = wrap(self._data, self._node, self._oidx, ndarray)
        out._vcell = cell_of(self)
        return out

    def as_nd_ndarray(self):
        cdef ndarray out = wrap(self._data, self._node, self._oidx, _LEGACY_ARRAY)
        out._vcell = cell_of(self)
        return out

    def copy(self):
        """A copy that keeps the history (its gradient flows back to this array)."""
        return _ops.copy(self)

    def copyto(self, other):
        """Copy into ``other`` (an array of the same shape) or to a context (a copy)."""
        if isinstance(other, ndarray):
            other[...] = self
            return other
        _check_device(other)
        return _ops.copy(self)

    def as_in_context(self, ctx):
        """This array (fastgrad has one device, the CPU; another device raises)."""
        _check_device(ctx)
        return self

    def as_in_ctx(self, ctx):
        """This array (fastgrad has one device, the CPU; another device raises)."""
        _check_device(ctx)
        return self

    def to_device(self, device):
        """This array (fastgrad has one device, the CPU; another device raises)."""
        _check_device(device)
        return self

    def tostype(self, stype):
        """A copy (with this array's history) for ``stype='default'``; fastgrad has no sparse
        storage types, so any other raises."""
        if stype != "default":
            raise MXNetValueError("tostype(%r): fastgrad arrays are dense; only 'default' "
                                  "storage exists" % (stype,))
        return _ops.copy(self)

    def astype(self, dtype, copy=True):
        if not copy and _np.dtype(dtype) == self._data.dtype:
            return self
        return _ops.astype(self, dtype)

    # ----------------------------------------------------------- shape methods
    def reshape(self, *shape, order="C", reverse=False):
        if reverse:
            raise ValueError("reshape: NumPy arrays have no reverse=; use npx.reshape(a, shape, "
                             "reverse=True) for MXNet's reshape codes")
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        return _ops.reshape(self, shape, order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
            axes = axes[0]
        return _ops.transpose(self, axes if axes else None)

    def flatten(self, order="C"):
        return _ops.reshape(self, (-1,))

    def ravel(self, order="C"):
        return _ops.reshape(self, (-1,))

    def squeeze(self, axis=None):
        return _ops.squeeze(self, axis)

    def expand_dims(self, axis):
        return _ops.expand_dims(self, axis)

    def swapaxes(self, axis1, axis2):
        return _ops.swapaxes(self, axis1, axis2)

    def broadcast_to(self, shape):
        return _ops.broadcast_to(self, shape)

    def repeat(self, repeats, axis=None):
        return _ops.repeat(self, repeats, axis)

    def tile(self, reps):
        return _ops.tile(self, reps)

    def clip(self, a_min=None, a_max=None):
        return _ops.clip(self, a_min, a_max)

    def take(self, indices, axis=None, mode="raise"):
        return _ops.take(self, indices, axis=axis)

    # ----------------------------------------------------------- reductions
    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        return _ops.sum(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        return _ops.mean(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False):
        return _ops.prod(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def max(self, axis=None, out=None, keepdims=False):
        return _ops.max(self, axis=axis, out=out, keepdims=keepdims)

    def min(self, axis=None, out=None, keepdims=False):
        return _ops.min(self, axis=axis, out=out, keepdims=keepdims)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return _ops.std(self, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return _ops.var(self, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)

    def argmax(self, axis=None, out=None):
        return _ops.argmax(self, axis)

    def argmin(self, axis=None, out=None):
        return _ops.argmin(self, axis)

    def cumsum(self, axis=None, dtype=None, out=None):
        return _ops.cumsum(self, axis=axis, dtype=dtype)

    def norm(self, ord=None, axis=None, keepdims=False):
        return _FUNCS[_np.linalg.norm](self, ord=ord, axis=axis, keepdims=keepdims)

    def dot(self, b):
        return _ops.dot(self, b)

    # elementwise methods used by NDArray code (x.exp(), x.sqrt(), ...)
    def exp(self):
        return _ops.exp(self)

    def log(self):
        return _ops.log(self)

    def sqrt(self):
        return _ops.sqrt(self)

    def square(self):
        return _ops.square(self)

    def abs(self):
        return _ops.abs(self)

    def sin(self):
        return _ops.sin(self)

    def cos(self):
        return _ops.cos(self)

    def tanh(self):
        return _ops.tanh(self)

    def sigmoid(self):
        return P_SIGMOID(self)

    def relu(self):
        return P_RELU(self)

    # ----------------------------------------------------------- operators
    def __add__(self, other):
        if _defer(other):
            return NotImplemented
        return P_ADD.apply((self, other), ())

    def __radd__(self, other):
        if _defer(other):
            return NotImplemented
        return P_ADD.apply((other, self), ())

    def __sub__(self, other):
        if _defer(other):
            return NotImplemented
        return P_SUB.apply((self, other), ())

    def __rsub__(self, other):
        if _defer(other):
            return NotImplemented
        return P_SUB.apply((other, self), ())

    def __mul__(self, other):
        if _defer(other):
            return NotImplemented
        return P_MUL.apply((self, other), ())

    def __rmul__(self, other):
        if _defer(other):
            return NotImplemented
        return P_MUL.apply((other, self), ())

    def __truediv__(self, other):
        if _defer(other):
            return NotImplemented
        return P_DIV.apply((self, other), ())

    def __rtruediv__(self, other):
        if _defer(other):
            return NotImplemented
        return P_DIV.apply((other, self), ())

    def __pow__(self, other, mod):
        if mod is not None:
            return NotImplemented
        if _defer(other):
            return NotImplemented
        return P_POW.apply((self, other), ())

    def __rpow__(self, other, mod):
        if mod is not None:
            return NotImplemented
        if _defer(other):
            return NotImplemented
        return P_POW.apply((other, self), ())

    def __mod__(self, other):
        if _defer(other):
            return NotImplemented
        return P_MOD.apply((self, other), ())

    def __rmod__(self, other):
        if _defer(other):
            return NotImplemented
        return P_MOD.apply((other, self), ())

    def __floordiv__(self, other):
        if _defer(other):
            return NotImplemented
        return _ops.floor_divide(self, other)

    def __rfloordiv__(self, other):
        if _defer(other):
            return NotImplemented
        return _ops.floor_divide(other, self)

    def __matmul__(self, other):
        if _defer(other):
            return NotImplemented
        return P_MATMUL.apply((self, other), ())

    def __rmatmul__(self, other):
        if _defer(other):
            return NotImplemented
        return P_MATMUL.apply((other, self), ())

    def __neg__(self):
        return P_NEG.apply((self,), ())

    def __pos__(self):
        return self

    def __abs__(self):
        return _ops.abs(self)

    def __lt__(self, other):
        return _ops.less(self, other)

    def __le__(self, other):
        return _ops.less_equal(self, other)

    def __gt__(self, other):
        return _ops.greater(self, other)

    def __ge__(self, other):
        return _ops.greater_equal(self, other)

    def __eq__(self, other):
        if other is None:
            return False
        return _ops.equal(self, other)

    def __ne__(self, other):
        if other is None:
            return True
        return _ops.not_equal(self, other)

    def __invert__(self):
        return _ops.logical_not(self) if self._data.dtype == _np.bool_ else _ops.invert(self)

    def __and__(self, other):
        return _ops.bitwise_and(self, other)

    def __or__(self, other):
        return _ops.bitwise_or(self, other)

    def __xor__(self, other):
        return _ops.bitwise_xor(self, other)

    def __hash__(self):
        return id(self)

    # in place: see Note [Versions]
    cdef _bump(self):
        _bump_cell(cell_of(self))

    cdef _inplace(self, ufunc, other, str what):
        _check_recorded_inplace(self, other, what)
        ufunc(self._data, raw(other), out=self._data)
        self._bump()
        return self

    def __iadd__(self, other):
        return self._inplace(_np.add, other, "addition (+=)")

    def __isub__(self, other):
        return self._inplace(_np.subtract, other, "subtraction (-=)")

    def __imul__(self, other):
        return self._inplace(_np.multiply, other, "multiplication (*=)")

    def __itruediv__(self, other):
        return self._inplace(_np.divide, other, "division (/=)")

    def __ipow__(self, other):
        return self._inplace(_np.power, other, "power (**=)")

    def __getitem__(self, key):
        return P_GETITEM.apply((self,), (_raw_key(key),))

    def __setitem__(self, key, value):
        key = _raw_key(key)
        if is_recording_c() and (self._node is not None or (
                isinstance(value, ndarray) and (<ndarray>value)._node is not None)):
            _record_setitem(self, key, value)
            return
        self._data[key] = raw(value)
        self._bump()

    # ----------------------------------------------------------- conversions
    def __len__(self):
        if self._data.ndim == 0:
            # NumPy's words exactly: converters such as torch.tensor() recognise a scalar by them.
            raise TypeError("len() of unsized object")
        return self._data.shape[0]

    # Note [DLPack shares the data, not the history]
    # The DLPack protocol hands the consumer (numpy.from_dlpack, torch.from_dlpack, jax.dlpack)
    # the array's buffer without a copy, exactly as NumPy's own array would, so writes through
    # the consumer's view are not seen by fastgrad's version counter, as with numpy.asarray(a).
    # The history is not part of the protocol: the consumer gets values.
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self._data.__dlpack__(stream=stream, max_version=max_version,
                                     dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        for i in range(self._data.shape[0]):
            yield self[i]

    def __bool__(self):
        return bool(self._data)

    def __float__(self):
        return float(self._data)

    def __int__(self):
        return int(self._data)

    def __index__(self):
        return self._data.__index__()

    def __complex__(self):
        return complex(self._data)

    def __repr__(self):
        return _ops._array_repr(self)

    def __str__(self):
        return str(self._data)

    def __format__(self, spec):
        return format(self._data, spec) if self._data.ndim == 0 else format(str(self), spec)

    def __reduce__(self):
        return (_wrap, (self._data, type(self)))

    def __copy__(self):
        return wrap(self._data.copy(), None, 0, type(self))

    def __deepcopy__(self, memo):
        return wrap(self._data.copy(), None, 0, type(self))


_REDUCERS = {_np.add: "sum", _np.multiply: "prod", _np.maximum: "max", _np.minimum: "min"}

_filled.register_array_type(ndarray)      # Filled defers to fastgrad arrays (create_graph)
