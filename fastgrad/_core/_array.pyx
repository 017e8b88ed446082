"""The array type: ``ndarray``, its operators and methods.

The recording path and the version cells live in the files this one includes (Note [Array
parts]): ``_array_recording.pxi`` (Note [Recording]: ``Primitive``, ``Primitive.apply``),
``_array_versions.pxi`` (Note [Versions]) and ``_array_tables.pxi`` (the tables the layers
above fill at import).

Note [Array parts]
~~~~~~~~~~~~~~~~~
The operators of ``ndarray`` call ``Primitive.apply``, which makes arrays: the two form one
cycle, and the per-op path is one module's C code (direct calls of the final class's ``apply``,
of ``wrap`` and ``cell_of``, which the C compiler may inline). Separate extension
modules would turn those into calls through pointers and need an abstract base to break the
cycle, so the concepts are split into files that ``_array.pyx`` includes textually: one
module, the same C code. The included files import nothing; the imports of the whole module
are the ones below (``_layers.source_files`` counts the ``.pxi`` files as ``_array``'s).
"""

cimport cython
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM, PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.ref cimport Py_INCREF, Py_XDECREF, PyObject
from cpython.sequence cimport PySequence_Fast_ITEMS
from fastgrad._core._node cimport (Node, VersionCell, new_node, new_leaf, _bump_cell, HAS_RULE,
                                  NO_RULE)
cimport numpy as cnp

cdef extern from "Python.h":
    Py_ssize_t _refcount "Py_REFCNT"(PyObject* o)   # no temporary reference, unlike Py_REFCNT
    object PyObject_Vectorcall(object callable, PyObject **args, size_t nargsf, PyObject *kwnames)
from fastgrad._core._state cimport is_recording_c, is_anomaly_c
from fastgrad._kernels._large.kernels cimport elementwise, is_large

import types as _types
import weakref
import numpy as _np

from fastgrad._kernels._filled import Filled as _Filled
from fastgrad._core._zeros import (NO_GRADIENT_OUTPUT as _NO_GRADIENT_OUTPUT,
                                   ZeroResult as _ZeroResult)
from fastgrad.base import MXNetError, MXNetIndexError, MXNetValueError  # Note [MXNet errors]
from fastgrad.context import check_device as _check_device, cpu
from fastgrad._core import _anomaly

cnp.import_array()

cdef type NP_NDARRAY = _np.ndarray
cdef object _asarray = _np.asarray
cdef type FILLED = _Filled
cdef object _weakref = weakref.ref

include "_array_tables.pxi"


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


# Note [DLPack on NumPy 2.0]
# The DLPack keywords of the array API standard 2023.12 (``max_version``, ``dl_device``,
# ``copy``) reached NumPy in 2.1: NumPy 2.0's ``ndarray.__dlpack__`` takes ``stream`` alone,
# and its ``numpy.from_dlpack(x)`` no keyword at all. fastgrad supports NumPy 2.0, so its
# ``__dlpack__`` (here) and ``fastgrad.np.from_dlpack`` (``_io.py``) take the keywords on every
# NumPy: they pass them on where NumPy takes them, and on NumPy 2.0 do what they ask by other
# means. ``max_version`` is a ceiling the standard lets a producer ignore (the consumer reads the
# version from the capsule's name): NumPy 2.0 exports the unversioned capsule, which every
# consumer reads. ``dl_device`` must be the CPU, as NumPy 2.1 asks (else ``BufferError``).
# ``copy=True`` exports a copy. Sharing never copies, so ``copy=False`` is honoured, except for
# a read-only array, which only the versioned capsule of NumPy >= 2.1 can mark read-only: with
# ``copy=False`` that is an error naming the method, and with ``copy=None`` ("copy if needed")
# a copy is exported. ``fastgrad.np.from_dlpack`` checks ``device`` and copies by itself, and
# takes a NumPy or fastgrad array's memory as it is, writable if it is, after DLPack's checks:
# NumPy 2.0's ``from_dlpack`` makes every array it imports read-only (so it stays for another
# library's tensors on NumPy 2.0, as the docstring says). Which NumPy is installed is found by
# trying the keywords once; ``tests/api/test_interop.py`` runs the NumPy 2.0 path on every NumPy.
def _numpy_dlpack_takes_keywords():
    try:
        _np.empty(0).__dlpack__(max_version=None, dl_device=None, copy=None)
    except TypeError:
        return False
    return True


_NUMPY_DLPACK_KEYWORDS = _numpy_dlpack_takes_keywords()


def _dlpack_without_keywords(data, stream, dl_device, copy):
    """``data.__dlpack__`` with the keywords NumPy 2.0 lacks (Note [DLPack on NumPy 2.0])."""
    name = "fastgrad.np.ndarray.__dlpack__"
    if dl_device is not None and tuple(dl_device) != data.__dlpack_device__():
        raise BufferError("%s: unsupported device requested: dl_device=%r; fastgrad arrays are "
                          "on the CPU, %r" % (name, dl_device, data.__dlpack_device__()))
    if copy:
        data = data.copy()
    elif not data.flags.writeable:
        if copy is not None:
            raise BufferError(
                "%s: copy=False cannot share a read-only array: NumPy %s exports DLPack's "
                "unversioned capsule, which has no read-only flag (NumPy >= 2.1 marks it); "
                "pass copy=None or copy=True to export a copy" % (name, _np.__version__))
        data = data.copy()
    return data.__dlpack__(stream=stream)


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


include "_array_versions.pxi"


cdef object _one_element(object data):
    """The element of a one-element NumPy array, as a NumPy scalar (for float(), int())."""
    if data.size != 1:
        raise TypeError("only size-1 arrays can be converted to Python scalars")
    return data.reshape(())[()]


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
        raise ValueError("grad_req must be one of 'write', 'add' or 'null', got %r"
                         % (req,)) from None


include "_array_recording.pxi"




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




cdef inline void _check_recorded_inplace(ndarray self, object other, str what) except *:
    if is_recording_c() and (
            self._node is not None
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
    old_part = P_GETITEM.apply((old,), (key,))
    kept = P_SUB.apply((old, P_SCATTER.apply((old_part,), (key, shape))), ())
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
                if not _wired:
                    raise _not_wired("the table's ufuncs (fastgrad._ops._registry)")
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
            if not _wired:
                raise _not_wired("NumPy's functions on fastgrad arrays (fastgrad._api._dispatch)")
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
            raise ValueError("fastgrad arrays are dense: stype must be 'default', got %r"
                             % (stype,))
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
        if _LEGACY_ARRAY is None:
            raise _not_wired("the legacy array class (fastgrad.ndarray.NDArray)")
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
    # On NumPy 2.0 the keywords are honoured by fastgrad (Note [DLPack on NumPy 2.0]).
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if _NUMPY_DLPACK_KEYWORDS:
            return self._data.__dlpack__(stream=stream, max_version=max_version,
                                         dl_device=dl_device, copy=copy)
        return _dlpack_without_keywords(self._data, stream, dl_device, copy)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        for i in range(self._data.shape[0]):
            yield self[i]

    def __bool__(self):
        return bool(self._data)

    # float(), int() and complex() take any one-element array, as MXNet's (and NumPy 1.x's)
    # do; NumPy 2.x refuses arrays of more than 0 dimensions.
    def __float__(self):
        return float(_one_element(self._data))

    def __int__(self):
        return int(_one_element(self._data))

    def __index__(self):
        return self._data.__index__()

    def __complex__(self):
        return complex(_one_element(self._data))

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

_stand_ins()     # until start-up wires the module (Note [Bootstrap] in _bootstrap.py)
