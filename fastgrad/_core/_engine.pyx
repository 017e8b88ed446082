"""The backward pass: scheduling, gradient accumulation and release of saved values.

Note [Scheduling]
~~~~~~~~~~~~~~~~~
A pass first walks the graph from the heads with an explicit stack (never recursion, so
graphs of millions of nodes work), giving each node a slot in the pass (Note [Pass state])
and counting, for every node, how many of its consumers the pass will run (``deps``). It
then runs nodes from a max-heap keyed on ``seq``: a node is pushed once all its consumers
have run, and the ready node recorded last runs first. That order is deterministic and
mirrors the forward pass in reverse, which frees saved arrays in the order a hand-written
backward would. ``grad()``
first marks the nodes that lie on a path to one of its variables (in ascending ``seq`` order,
parents before consumers) and counts and runs only those.

Note [Accumulation]
~~~~~~~~~~~~~~~~~~~
Derivative rules never unbroadcast or cast: the gradient buffer sums each gradient back to the
shape of the input it belongs to and casts it to that input's dtype (``_fit``; Note [Gradient
buffers]). The first gradient reaching a node is kept as it is (no copy; it may be shared with
another node, e.g. the two inputs of ``add`` receive the same array). Later ones are added by
``_sum``: in place into a buffer the pass owns (Note [Gradient buffer ownership]), else into
the new contribution if the pass owns that, else out of place once, which gives a buffer the
pass owns for the later ones. So a large backward allocates no more than its rules' results.
Under ``create_graph`` every one of these steps is a recorded operation, so the gradient
itself can be differentiated.

Note [Gradient buffer ownership]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A gradient array may be written in place only if nothing outside the pass can see it. The
pass decides that from what it did, never from reference counts (which count Cython's
temporaries and say nothing about who else will read an array): an entry's gradient is
*owned* (``OWNED``) when the pass made it and has not handed it out.

* The pass owns what it allocates: the sum of ``_fit`` (a reduction over broadcast axes, a
  cast) and the result of an out-of-place ``_sum``.
* It owns what a *table* rule made for one input (``_result_owned``): a table rule is a pure
  function of its arguments, so a writeable base array it returns is its own unless it is one
  of the arguments (``g`` passed through by ``add``, ``reshape``'s view of it, a saved value,
  ``result``), or is also returned for another input.
* It owns nothing else: the head gradients, anything a ``Function``'s or custom op's
  ``backward`` returns (user code may keep it), read-only and broadcast views, symbolic
  constants (Note [Filled gradients]), the outputs of multi-output nodes.
* A table rule that passes its own ``g`` on unchanged (``add``) passes the pass's ownership
  of ``g`` on to the one input that keeps it as it is (``GradientBuffer.deliver`` fits every
  gradient of the node first to count them); when two inputs keep it, or its ``g`` was not
  owned, neither owns it.
* Handing out ends ownership: a gradient given to ``grad()``'s caller or to a ``Function``
  stops being the pass's; a variable's owned gradient becomes its ``.grad`` buffer
  instead of being copied (``write_grad_buffer``) and the pass drops it; ``grad()`` returns an
  owned gradient as it is and a copy for every other (or repeated) variable, and a captured
  gradient that was also given to a ``Function`` is copied.

Anything not owned is copied by its first accumulation (``acc + g``), after which the sum is
owned. The executor's replay decides ownership with the same buffer, so the two agree.
Note [Release]
~~~~~~~~~~~~~~
Once a node has run, the values it saved and the gradients it received are dropped (unless
``retain_graph``), so a backward pass holds at most the arrays a hand-written one would. A node
whose saved values were dropped is marked ``released``; reaching it again raises an error that
says to use ``retain_graph=True``.

Note [Retained intermediates]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``attach_grad()`` on an array computed from variables keeps its history and only adds a
reference from its node to the array (``var_refs``), inside ``record()`` or after it (MXNet
2.x's "retain grad"): a pass fills its ``.grad`` and goes on to the variables below. If an
earlier pass freed that history, the node *acts as a leaf*: the pass writes its ``.grad`` and
stops there instead of raising, which is what the array became for the user when they
attached a gradient to it after its graph was gone.

Note [Pass state]
~~~~~~~~~~~~~~~~~
Each ``backward()``/``grad()`` call owns its state in a ``_Pass`` object: a C array with one
*slot* per node it visited (the node, its dependency count, flags for needed and target, all
references owned by the pass), its ready heap, its ``GradientBuffer`` (an entry per slot) and,
under ``create_graph``, its memo (Note [Shared subexpressions]). ``grad()`` sorts the slots by
``seq`` with ``qsort``. There is no process-wide lock and no global pass state besides the
counter that numbers passes, so passes on different graphs run in different threads at once,
and a ``Function``'s backward may start a pass in its own thread or in another one and wait
for it. Nothing is locked while user code runs.

A node records only which pass claimed it: ``epoch`` (that pass's number, 0 when none) and
``slot``. A pass visiting an unclaimed node claims it (Note [Threads]) and hands it back at its
end. A pass that meets a node another *running* pass claimed (the outer pass, for a pass
started inside a ``Function``'s backward that differentiates through the outer graph; or a
pass in another thread over a shared variable or the same graph) keeps the node's slot in a
side dict. So the common case costs one comparison per lookup, and nested or concurrent
passes never see each other's counts or pending gradients: an inner pass through the outer
graph gives the right values, and the outer pass's gradients survive it.

What passes do share is the graph itself. Two passes over one graph at once both give right
gradients as long as neither frees it: with ``retain_graph=True`` they are independent.
Without it, a pass frees each node's saved values once the node has run, exactly as when the
passes run one after the other: a pass that reaches a node another pass already freed raises
the usual "already freed ... retain_graph=True" error (checked again when the rule is about to
run, not only during the walk, since the other pass may free it in between). An inner pass
without ``retain_graph`` that runs outer-graph nodes frees them too, and the outer pass then
raises the same error for them. Writes into a variable's ``.grad`` are each serialised by a
short lock of their own (no user code runs under it), so passes in two threads that write the
same variable add (``grad_req='add'``) or overwrite (``'write'``) as they would in sequence;
an inner ``backward()`` writes its variables' ``.grad`` when it finishes, and the outer pass
writes them again when it reaches them. A ``Function`` node's user ``backward`` runs for one
pass at a time (Note [Function backward in concurrent passes] in ``_custom_function.py``).

Note [Threads]
~~~~~~~~~~~~~~
The engine relies on the GIL, and says so once, here. Claiming a node (the test of ``epoch``
and its write), numbering a pass (``_epoch``), counting dependencies and moving gradients in
and out of a pass's buffer run with no Python code in between, so under the GIL no other
thread can interleave with them; threads meet only where Python code runs (a rule, a kernel
that releases the GIL), and by then every pass keeps its own state (Note [Pass state]). The
one read-modify-write that can interleave with NumPy releasing the GIL, writing a variable's
``.grad``, has its lock (``_lock_grads``). Ownership (Note [Gradient buffer ownership]) needs
no atomics: only the pass that owns a buffer ever writes it. A free-threaded CPython that runs
without the GIL would break the claims and counters, so the import refuses it
(``_require_gil``); a free-threaded build that re-enabled the GIL (as it does when it imports
an extension module not declared free-threading safe, such as fastgrad's) is fine.
"""

cimport cython
from cpython.tuple cimport (PyTuple_New, PyTuple_SET_ITEM, PyTuple_GET_SIZE, PyTuple_GET_ITEM,
                            PyTuple_CheckExact)
from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF, Py_XDECREF
from libc.stdlib cimport qsort
from cpython.sequence cimport PySequence_Fast_ITEMS
from cpython.mem cimport PyMem_Realloc, PyMem_Free, PyMem_Calloc
from cpython.pythread cimport (PyThread_type_lock, PyThread_allocate_lock,
                               PyThread_acquire_lock, PyThread_release_lock,
                               PyThread_get_thread_ident, WAIT_LOCK, NOWAIT_LOCK)
cimport numpy as cnp
from fastgrad._core._node cimport Node, _bump_cell, last_seq, new_node
from fastgrad._core._array cimport (ndarray, Primitive, wrap, cell_of, version_of, GRAD_NULL,
                                    GRAD_WRITE, GRAD_ADD)
from fastgrad._core._state cimport set_recording_c, set_training_c, is_anomaly_c, swap_pass_c
from fastgrad._kernels._large.kernels cimport (add_into, add as large_add, sum_rows, large_rule,
                                               large_rule_size)

import sys as _sys
import sysconfig as _sysconfig

import numpy as _np
from fastgrad._kernels._filled import Filled as FILLED
from fastgrad._core._zeros import ConstantDerivative, GRADIENT_OF
from fastgrad.base import MXNetError, MXNetValueError   # Note [MXNet errors]
from fastgrad._core import _anomaly
from fastgrad._kernels import _forward as _kernels
from fastgrad._kernels._blas_policy import tick as _blas_tick

cnp.import_array()


def _require_gil():
    """Refuse a free-threaded CPython running without the GIL (Note [Threads])."""
    enabled = getattr(_sys, "_is_gil_enabled", None)
    if _sysconfig.get_config_var("Py_GIL_DISABLED") and enabled is not None and not enabled():
        raise ImportError(
            "fastgrad needs the GIL: its backward pass claims nodes and counts dependencies "
            "under it (Note [Threads] in fastgrad/_core/_engine.pyx), and this free-threaded "
            "Python runs without it. Run with the GIL enabled (PYTHON_GIL=1 or -X gil=1).")


_require_gil()

cdef extern from "Python.h":
    object PyObject_Vectorcall(object callable, PyObject **args, size_t nargsf, PyObject *kwnames)

cdef type NP_NDARRAY = _np.ndarray
cdef object _asarray = _np.asarray
cdef object _copyto = _np.copyto
cdef object _npadd = _np.add
cdef object _add_reduce = _np.add.reduce
cdef unsigned long long _epoch = 0     # the last pass's number (Note [Pass state])

cdef object _sum_to = _kernels.sum_to           # NumPy kernel: sum_to(array, shape)
cdef object _summed_weight_gradients = _kernels.summed_weight_gradients
cdef Py_ssize_t _DEFERRED_MAX_ROWS = _kernels.DEFERRED_MAX_ROWS
cdef object _anomaly_report = _anomaly.report

# The table's primitives the engine records with under create_graph: registered once by
# fastgrad._ops._registry when it has built them (Note [Layers] in _layers.py).
cdef Primitive P_SUM_TO = None       # sum_to as a recorded op
cdef Primitive P_ADD = None
cdef Primitive P_CAST = None
cdef Primitive P_COPY = None
cdef Primitive P_REAL = None


def register_primitives(prims):
    """Take the primitives the engine records with (by name): called once by
    fastgrad._ops._registry when it has built them."""
    global P_SUM_TO, P_ADD, P_CAST, P_COPY, P_REAL
    P_SUM_TO, P_ADD, P_CAST = prims["sum_to"], prims["add"], prims["astype"]
    P_COPY = prims["copy"]
    P_REAL = prims["real"]


# ------------------------------------------------------------------ helpers

cdef inline bint _acts_as_leaf(Node n) noexcept:
    """Whether the pass stops at ``n``: a variable, or an intermediate with ``attach_grad``
    whose history an earlier pass freed (Note [Retained intermediates])."""
    return n.op is None or (n.released and n.var_refs is not None)


cdef str _released_message(Node n):
    return ("fastgrad.%s (node #%d): its saved values were already freed by an earlier backward "
            "pass. Pass retain_graph=True to the first backward()/grad() to differentiate the "
            "same graph again." % (n.op.name, n.seq))


cdef dict _ONES = {}


cdef object _one(object dtype):
    """A read-only 0-d one of ``dtype``, made once per dtype."""
    one = _ONES.get(dtype)
    if one is None:
        one = _np.ones((), dtype=dtype)
        one.flags.writeable = False
        _ONES[dtype] = one
    return one


cdef object _head_grad(ndarray h, object hg, Py_ssize_t i, bint create):
    data = h._data
    if hg is None:
        if create:
            # A constant of ones, kept symbolic: a rule's g * y is then y itself, with no
            # multiply to record and differentiate again (Note [Filled gradients]).
            return FILLED(_one(data.dtype), data.shape)
        g = _np.ones_like(data)
    elif isinstance(hg, ndarray):
        if (<ndarray>hg)._data.shape != data.shape:
            raise ValueError("backward: head gradient %d has shape %s but head %d has shape %s"
                             % (i, (<ndarray>hg)._data.shape, i, data.shape))
        if create:
            if (<ndarray>hg)._data.dtype != data.dtype:
                return P_CAST.apply((hg,), (data.dtype,))
            return hg
        g = (<ndarray>hg)._data
    else:
        g = _asarray(hg)
        if g.ndim == 0:
            g = _np.full(data.shape, g, dtype=data.dtype)
        elif g.shape != data.shape:
            raise ValueError("backward: head gradient %d has shape %s but head %d has shape %s"
                             % (i, g.shape, i, data.shape))
    if g.dtype != data.dtype:
        g = g.astype(data.dtype)
    if create:
        return wrap(g, None, 0)
    return g


# ------------------------------------------------------------------ the gradient buffer

# Note [Gradient buffers]
# ~~~~~~~~~~~~~~~~~~~~~~~
# Everything that happens to a gradient between the rule that made it and the rule that reads
# it happens in one type, ``GradientBuffer`` (PyTorch's ``InputBuffer`` is its model): one
# *entry* per node of the pass (per slot of a plan's replay), and five operations.
#
# * ``deliver`` takes what a rule returned, one gradient per input, and for each input that
#   wants one *fits* it (``_fit``: summed over broadcast axes, cast, complex to real; Note
#   [Accumulation]), decides whether the pass *owns* it (Note [Gradient buffer ownership]) and
#   *adds* it to the entry of the input's producer. Where an input's gradient goes is a
#   ``Dest`` the caller fills: the tape from the input's node, the replay from its slot.
# * ``add`` accumulates one gradient into an entry (the seeds use it directly).
# * ``take`` hands an entry's gradient to the node about to run, with its ownership, after
#   adding the products deferred for it.
# * ``defer`` keeps a product for later instead of running the rule for it: the op's
#   deferred-product hook (``Primitive.defer_input``, declared in the derivative table as
#   ``Op(..., deferred=...)``; Note [Deferred weight gradients] in _kernels/_forward.py).
# * a *symbolic zero* is an entry with no gradient (NULL): nothing reached it, nothing is
#   allocated; ``complete_gradients`` fills a multi-output node's unreached outputs with
#   constants that cost no memory.
#
# The tape and the executor's replay both run every gradient through these operations, so
# they cannot disagree: the same terms are summed in the same order by the same code, and the
# executor's gradients equal the tape's bit for bit. Under ``create_graph`` each step is a
# recorded op instead (``P_SUM_TO``, ``P_CAST``, ``P_REAL``, ``P_ADD``), so the gradient can be
# differentiated again; nothing is owned or deferred then.

cdef inline bint _has_shape(cnp.ndarray a, tuple shape) except -1:
    """Whether ``a.shape == shape``, without building the shape tuple."""
    cdef int k, nd = cnp.PyArray_NDIM(a)
    if nd != PyTuple_GET_SIZE(shape):
        return False
    for k in range(nd):
        if cnp.PyArray_DIMS(a)[k] != <cnp.npy_intp><object>PyTuple_GET_ITEM(shape, k):
            return False
    return True


cdef bint same_layout(cnp.ndarray a, cnp.ndarray b):
    """Whether ``a`` and ``b`` have the same shape and dtype (without building tuples)."""
    cdef int k, nd = cnp.PyArray_NDIM(a)
    if nd != cnp.PyArray_NDIM(b):
        return False
    for k in range(nd):
        if cnp.PyArray_DIMS(a)[k] != cnp.PyArray_DIMS(b)[k]:
            return False
    if <void*>cnp.PyArray_DESCR(a) == <void*>cnp.PyArray_DESCR(b):
        return True
    return a.dtype == b.dtype


cdef object _fit(object g, Dest *d, bint create, object site, Py_ssize_t i, bint *allocated):
    """``g`` summed back to the shape of the input ``d`` describes and cast to its dtype
    (Note [Accumulation]): a NumPy array, or a symbolic constant that already fits (Note
    [Filled gradients]); a recorded array under ``create_graph``. ``*allocated`` is set when
    the result is an array this call made (a sum, a cast), which the pass then owns (Note
    [Gradient buffer ownership]). ``site`` (a ``Node``, or a plan step) names the op in errors."""
    allocated[0] = False
    if d.like != NULL:
        like = <object>d.like
        if type(like) is not NP_NDARRAY:
            like = _asarray(like)
        if type(g) is NP_NDARRAY and same_layout(<cnp.ndarray>g, <cnp.ndarray>like):
            return g            # already fits, compared in C
        return _fit_first_order(g, like.shape, like.dtype, site, i, allocated)
    shape = <object>d.shape
    dtype = <object>d.dtype
    if create:
        return _fit_recorded(g, shape, dtype, site, i)
    if (type(g) is NP_NDARRAY and type(shape) is tuple
            and <void *>cnp.PyArray_DESCR(<cnp.ndarray>g) == <void *>dtype
            and _has_shape(<cnp.ndarray>g, <tuple>shape)):
        return g                # already fits: what _fit_first_order would return, sooner
    return _fit_first_order(g, shape, dtype, site, i, allocated)


cdef object _fit_first_order(object g, tuple shape, object dtype, object site, Py_ssize_t i,
                             bint *allocated):
    """``_fit`` for a first-order pass."""
    if type(g) is not NP_NDARRAY:
        if type(g) is FILLED:
            # Passed on as it is when it already fits (Note [Filled gradients]).
            if g.shape == shape:
                return g if g.dtype == dtype else _cast(g, dtype)
            g = g.view()
        elif isinstance(g, ndarray):
            g = (<ndarray>g)._data
        else:
            g = _asarray(g)
    if not _has_shape(<cnp.ndarray>g, shape):
        g = _sum_to_shape(g, g.shape, shape, site, i, allocated)
    if <void *>cnp.PyArray_DESCR(<cnp.ndarray>g) != <void *>dtype and g.dtype != dtype:
        g = _cast(g, dtype)
        allocated[0] = True
    return g


cdef object _fit_recorded(object g, object shape, object dtype, object site, Py_ssize_t i):
    """``_fit`` under ``create_graph``: each step a recorded op."""
    if not isinstance(g, ndarray):
        if type(g) is FILLED and g.shape == shape and g.dtype == dtype:
            return g
        g = wrap(_asarray(g), None, 0)
    gshape = (<ndarray>g)._data.shape
    if gshape != shape:
        _check_fit(gshape, shape, site, i)
        g = P_SUM_TO.apply((g,), (shape,))
    if (<ndarray>g)._data.dtype != dtype:
        if (<ndarray>g)._data.dtype.kind == "c" and dtype.kind != "c":
            g = P_REAL.apply((g,), ())      # Note [Complex gradients] in _complex.py
        if (<ndarray>g)._data.dtype != dtype:
            g = P_CAST.apply((g,), (dtype,))
    return g


cdef object _cast(object g, object dtype):
    """``g`` as ``dtype``; a complex gradient of a real value keeps its real part (Note
    [Complex gradients] in _complex.py), without NumPy's warning about the discarded part."""
    if g.dtype.kind == "c" and dtype.kind != "c":
        if type(g) is FILLED:
            return FILLED(g.value.real.astype(dtype), g.shape)
        g = g.real
    return g.astype(dtype)


cdef object _sum_to_shape(object g, tuple gshape, tuple shape, object site, Py_ssize_t i,
                          bint *allocated):
    """``_kernels.sum_to`` for the first-order pass: the axes found in C, one reduction.
    ``*allocated`` is set when the result is (a view of) a new array nothing else holds."""
    cdef Py_ssize_t ns = len(shape), lead = len(gshape) - ns, k
    cdef bint widen = False
    if lead < 0:
        _check_fit(gshape, shape, site, i)
        return _sum_to(g, shape)        # a read-only broadcast view: not allocated
    cdef list axes = list(range(lead))
    for k in range(ns):
        t = shape[k]
        d = gshape[lead + k]
        if t == d:
            continue
        if t == 1:
            axes.append(lead + k)
        elif d == 1:
            widen = True
        else:
            _check_fit(gshape, shape, site, i)
    if axes:
        r = None
        if axes[len(axes) - 1] == len(axes) - 1:
            r = sum_rows(g, len(axes))          # leading axes (Note [Row sums])
        if r is None:
            g = _add_reduce(g, axis=tuple(axes), keepdims=True)
        else:
            g = r.reshape((1,) * len(axes) + r.shape)
        allocated[0] = not widen
    if lead:
        g = g.reshape(g.shape[lead:])
    if widen:
        g = _np.broadcast_to(g, shape)
    return g


cdef str _site_name(object site):
    """The op name of a consumer node or of a plan step (for error messages)."""
    if isinstance(site, Node):
        return (<Node>site).op.name if (<Node>site).op is not None else "?"
    return getattr(site, "op", "?")


cdef void _check_fit(tuple gshape, tuple shape, object site, Py_ssize_t i) except *:
    cdef Py_ssize_t k, lead = len(gshape) - len(shape)
    cdef bint ok = True
    if lead >= 0:
        for k in range(len(shape)):
            if shape[k] != 1 and gshape[lead + k] != shape[k] and gshape[lead + k] != 1:
                ok = False
    else:
        try:
            _np.broadcast_shapes(gshape, shape)
            ok = _np.broadcast_shapes(gshape, shape) == shape
        except ValueError:
            ok = False
    if not ok:
        raise ValueError("fastgrad.%s: the gradient for argument %d has shape %s, which cannot "
                         "be summed to the argument's shape %s"
                         % (_site_name(site), i, gshape, shape))


cdef bint _result_owned(object r, PyObject **args, Py_ssize_t nargs, tuple grads,
                        Py_ssize_t i):
    """Whether ``r``, the gradient a table rule called with the ``nargs`` arguments ``args``
    returned for its input ``i`` (``grads`` is all it returned), is an array the rule made and
    no longer holds, so that the pass owns it from now on (Note [Gradient buffer ownership]).

    A table rule is a pure function of its arguments: what it returns is one of them (``g``
    passed through), a view, or an array it computed. So a writeable base array that is none
    of the arguments (looked into one level of tuples: multi-output ``g`` and ``result``) and
    is not also returned for another input is the rule's own."""
    cdef Py_ssize_t k, j
    cdef PyObject *a
    cdef PyObject *me = <PyObject *>r
    if (type(r) is not NP_NDARRAY or cnp.PyArray_BASE(<cnp.ndarray>r) != NULL
            or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>r)
            or not cnp.PyArray_CHKFLAGS(<cnp.ndarray>r, cnp.NPY_ARRAY_OWNDATA)):
        return False
    # Borrowed pointers only: no reference counting in this scan.
    for k in range(nargs):
        a = args[k]
        if a == me:
            return False
        if PyTuple_CheckExact(<object>a):
            for j in range(PyTuple_GET_SIZE(<object>a)):
                if PyTuple_GET_ITEM(<object>a, j) == me:
                    return False
    for k in range(PyTuple_GET_SIZE(grads)):
        if k != i and PyTuple_GET_ITEM(grads, k) == me:
            return False
    return True


cdef object _sum(object acc, bint acc_owned, object g, bint g_owned, bint create):
    """``acc + g`` (Note [Accumulation]): recorded under ``create_graph``; otherwise in place
    into ``acc`` when the pass owns it, else into ``g`` when the pass owns that, else a new
    array (which the pass then owns). Large in-place additions and large out-of-place sums go
    through the large-array kernels (Note [Large-array kernels] in _large/__init__.py)."""
    if create:
        return P_ADD.apply((acc, g), ())
    if acc_owned:
        if not add_into(acc, g):
            acc += g
        return acc
    if g_owned and g.shape == acc.shape:
        # the new contribution is ours: add the old into it
        if not add_into(g, acc):
            g += acc
        return g
    r = large_add(acc, g)
    acc = acc + g if r is None else r
    if type(acc) is not NP_NDARRAY:
        acc = _asarray(acc)   # 0-d sums come back as NumPy scalars
    return acc


cdef inline bint _deferrable(object x, object g, Dest *d) noexcept:
    """Whether the product ``x.T @ g`` for the input ``d`` may be deferred
    (Note [Deferred weight gradients] in _kernels/_forward.py): NumPy matrices of one real
    floating dtype, the input's too (no cast to decide), ``x`` with few rows."""
    cdef int t
    if type(x) is not NP_NDARRAY or type(g) is not NP_NDARRAY:
        return False
    if (cnp.PyArray_NDIM(<cnp.ndarray>x) != 2 or cnp.PyArray_NDIM(<cnp.ndarray>g) != 2
            or cnp.PyArray_DIM(<cnp.ndarray>x, 0) > _DEFERRED_MAX_ROWS):
        return False
    t = cnp.PyArray_TYPE(<cnp.ndarray>x)
    if (t != cnp.NPY_FLOAT and t != cnp.NPY_DOUBLE) or cnp.PyArray_TYPE(<cnp.ndarray>g) != t:
        return False
    if d.like != NULL:
        y = <object>d.like
        return (type(y) is NP_NDARRAY and cnp.PyArray_NDIM(<cnp.ndarray>y) == 2
                and cnp.PyArray_TYPE(<cnp.ndarray>y) == t)
    return (d.n_out == 1 and PyTuple_CheckExact(<object>d.shape)
            and PyTuple_GET_SIZE(<object>d.shape) == 2
            and isinstance(<object>d.dtype, cnp.dtype)
            and (<cnp.dtype><object>d.dtype).type_num == t)


@cython.final
cdef class GradientBuffer:
    """The incoming gradients of one backward pass (Note [Gradient buffers]): per entry the
    gradient accumulated so far and whether the pass owns it, the deferred products, and the
    operations that fit, own, add and hand out gradients."""

    def __cinit__(self):
        self.entries = NULL
        self.n = 0
        self.dests = NULL
        self.ndests = 0

    def __dealloc__(self):
        self.clear()
        PyMem_Free(self.entries)
        PyMem_Free(self.dests)

    cdef int reset(self, Py_ssize_t n, bint create) except -1:
        """Make ``n`` empty entries (at a plan's bind, at every pass of the tape)."""
        self.clear()
        PyMem_Free(self.entries)
        self.entries = NULL
        self.n = 0
        # calloc: a large zeroed block comes from fresh pages, with no memset
        cdef void *mem = PyMem_Calloc(n if n > 0 else 1, sizeof(Entry))
        if mem == NULL:
            raise MemoryError()
        self.entries = <Entry *>mem
        self.n = n
        self.create = create
        return 0

    cdef void clear(self) noexcept:
        """Drop every gradient the buffer holds; entries keep only their SHARED mark."""
        cdef Py_ssize_t k
        cdef PyObject *p
        for k in range(self.n):
            p = self.entries[k].acc
            if p != NULL:
                self.entries[k].acc = NULL
                Py_DECREF(<object>p)
            self.entries[k].flags &= SHARED
        self.deferred = None
        self.stacked = None

    cdef Dest *destinations(self, Py_ssize_t n) except NULL:
        """Room for the destinations of a node's ``n`` inputs (reused from node to node)."""
        cdef void *mem
        if n > self.ndests or self.dests == NULL:
            mem = PyMem_Realloc(self.dests, (n if n > 8 else 8) * sizeof(Dest))
            if mem == NULL:
                raise MemoryError()
            self.dests = <Dest *>mem
            self.ndests = n if n > 8 else 8
        return self.dests

    cdef void add(self, Py_ssize_t k, Py_ssize_t oidx, Py_ssize_t n_out, object g,
                  bint g_owned) except *:
        """Add the gradient ``g`` for output ``oidx`` of entry ``k``'s node (Note
        [Accumulation]); ``g_owned``: the pass owns ``g`` (Note [Gradient buffer ownership])."""
        cdef Entry *e = &self.entries[k]
        cdef PyObject *old = e.acc
        cdef object acc
        if n_out > 1:
            # A multi-output node keeps a list per entry, with no ownership: later
            # contributions are added out of place.
            if old == NULL:
                accs = [None] * n_out
                Py_INCREF(accs)
                e.acc = <PyObject *>accs
            else:
                accs = <object>old
            acc = accs[oidx]
            accs[oidx] = g if acc is None else _sum(acc, False, g, False, self.create)
            return
        if e.flags & SHARED:
            g_owned = False
        if old == NULL:
            Py_INCREF(g)
            e.acc = <PyObject *>g
            e.flags = (e.flags & ~OWNED) | (OWNED if g_owned else 0)
            return
        acc = _sum(<object>old, (e.flags & OWNED) != 0, g, g_owned, self.create)
        Py_INCREF(acc)
        e.acc = <PyObject *>acc
        Py_DECREF(<object>old)
        if not self.create and not e.flags & SHARED:
            e.flags |= OWNED

    cdef object take(self, Py_ssize_t k, bint *owned):
        """The gradient of entry ``k`` (None: a symbolic zero), which the entry no longer
        holds, after adding its deferred products; ``*owned``: the pass owns it."""
        cdef Entry *e = &self.entries[k]
        if e.flags & DEFERRED:
            xs, gs = self.deferred.pop(k)
            e.flags &= ~DEFERRED
            if self.stacked is None:
                self.stacked = {}
            self.add(k, 0, 1, _summed_weight_gradients(xs, gs, self.stacked), True)
        owned[0] = (e.flags & OWNED) != 0
        e.flags &= ~OWNED
        cdef PyObject *p = e.acc
        if p == NULL:
            return None
        e.acc = NULL
        g = <object>p
        Py_DECREF(g)                   # the entry's reference is now g's
        return g

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef void deliver(self, object site, tuple grads, Dest *dests, PyObject **args,
                      Py_ssize_t nargs, object g, bint g_owned) except *:
        """Fit each gradient a rule returned (``grads``, one per input; ``args``: its
        ``nargs`` arguments, NULL for user code) to its input and add it to the entry of the
        input's producer (``dests``), with the ownership of Note [Gradient buffer ownership].
        ``g_owned``: the pass owns ``g``, the gradient the table rule received; a rule that
        passes it on unchanged (``add``) hands the pass's buffer on to the one input that keeps
        it as it is (two that keep it share it: neither owns it)."""
        cdef Py_ssize_t i, n = PyTuple_GET_SIZE(grads), holders = 0
        cdef bint create = self.create, allocated, owned, passed = False
        cdef Dest *d
        cdef object gi, fitted
        cdef list fits = None
        cdef unsigned long long fit_alloc = 0     # bit i: fits[i] was allocated (i < 64)
        if g_owned:
            for i in range(n):
                if PyTuple_GET_ITEM(grads, i) == <PyObject *>g and dests[i].entry >= 0:
                    passed = True
                    break
        if passed:
            # Fit every gradient first, to count the inputs that will hold g itself.
            fits = [None] * n
            for i in range(n):
                gi = <object>PyTuple_GET_ITEM(grads, i)
                if dests[i].entry < 0 or gi is None:
                    continue
                fitted = _fit(gi, &dests[i], create, site, i, &allocated)
                # A bit per input, a tuple past 63: cheaper than a bytearray for all
                # (docs/benchmarks.rst, "Numbers behind the engine's Notes").
                if i < 64:
                    fits[i] = fitted
                    fit_alloc |= (<unsigned long long>allocated) << i
                else:
                    fits[i] = (fitted, allocated)
                if fitted is g:
                    holders += 1
        for i in range(n):
            d = &dests[i]
            if d.entry < 0:
                continue
            gi = <object>PyTuple_GET_ITEM(grads, i)
            if gi is None:
                continue
            if fits is None:
                fitted = _fit(gi, d, create, site, i, &allocated)
            elif i < 64:
                fitted = fits[i]
                allocated = (fit_alloc >> i) & 1
                fits[i] = None
            else:
                fitted, allocated = <tuple>fits[i]
                fits[i] = None
            # The pass owns what it allocated, what a table rule made for this input alone,
            # and its own g passed on to this input alone.
            owned = allocated or (args != NULL and fitted is gi and not create and (
                _result_owned(gi, args, nargs, grads, i) or (fitted is g and holders == 1)))
            gi = None
            self.add(d.entry, d.oidx, d.n_out, fitted, owned)
            fitted = None

    cdef bint defer(self, Dest *d, Py_ssize_t left, object x, object g) except -1:
        """The deferred-product hook (Note [Deferred weight gradients] in
        _kernels/_forward.py): keep ``(x, g)``, whose product ``x.T @ g`` is the gradient for
        the input ``d``, to add it with the input's other such products in one when its
        gradient is taken; ``left``: the input's consumers still to run. False (nothing kept)
        when nothing could be stacked with it or the product does not qualify; the caller then
        runs the rule as usual."""
        cdef Py_ssize_t k = d.entry
        if self.create or k < 0:
            return False
        if not self.entries[k].flags & DEFERRED and left <= 1:
            return False                # its only consumer left: nothing to stack with
        if not _deferrable(x, g, d):
            return False
        if self.deferred is None:
            self.deferred = {}
        pending = self.deferred.get(k)
        if pending is None:
            pending = ([], [])
            self.deferred[k] = pending
        (<list>pending[0]).append(x)
        (<list>pending[1]).append(g)
        self.entries[k].flags |= DEFERRED
        return True


cdef tuple complete_gradients(object g, Py_ssize_t n_out, object shapes, object dtypes):
    """The per-output gradients of a multi-output op, with symbolic zeros (Note [Zero
    gradients] in _zeros.py) for the outputs no gradient reached."""
    cdef Py_ssize_t k
    out = []
    for k in range(n_out):
        gk = g[k] if g is not None else None
        if gk is None:
            # No memory, and a rule's product with it is zero even where the other factor
            # is infinite.
            gk = FILLED(_np.zeros((), dtype=dtypes[k]), shapes[k])
        out.append(gk)
    return tuple(out)


cdef void check_rule_result(object site, tuple grads, Py_ssize_t n_in,
                            object report_as) except *:
    """A rule returns one gradient per input (``site``, a node or a plan step, names the op
    in the error); under anomaly detection each is checked, reported as ``report_as``."""
    if PyTuple_GET_SIZE(grads) != n_in:
        raise RuntimeError("fastgrad.%s: its derivative rule returned %d gradients for %d "
                           "inputs" % (_site_name(site), PyTuple_GET_SIZE(grads), n_in))
    if is_anomaly_c():
        _anomaly_report(report_as, grads)


cdef object needs_mask(list wants):
    """The ``needs`` argument of a rule: bit ``i`` set when input ``i`` wants a gradient
    (``wants[i]`` true), one bit per input however many there are."""
    cdef unsigned long long small = 0
    cdef Py_ssize_t i, n = len(wants)
    if n < 63:
        for i in range(n):
            if wants[i]:
                small |= (<unsigned long long>1) << i
        return small
    big = 0
    for i in range(n):
        if wants[i]:
            big |= (<object>1) << i
    return big


cdef void write_grad_buffer(ndarray buf, int req, object g, bint take) except *:
    """Write the gradient ``g`` of a variable into its ``.grad`` buffer ``buf`` under
    ``req`` (``GRAD_WRITE`` or ``GRAD_ADD``); ``g is None`` means zero. With ``take`` (the
    pass owns ``g`` and the buffer may change arrays) ``'write'`` makes the buffer hold ``g``
    instead of copying it; ``g`` is then handed out. Shared by the engine and the executor."""
    if g is None:
        # Reached, but every path to it carried no gradient: the gradient is zero.
        if req == GRAD_WRITE:
            buf._data[...] = 0
            _bump_cell(cell_of(buf))
        return
    if req == GRAD_WRITE:
        if take and type(g) is NP_NDARRAY and same_layout(<cnp.ndarray>g, buf._data):
            buf._data = g
        else:
            _copyto(buf._data, g)
    else:
        _npadd(buf._data, g, out=buf._data)
    _bump_cell(cell_of(buf))


cdef void _write_var(object ref, object g, bint owned) except *:
    arr = ref()
    if arr is None:
        return
    cdef ndarray a = <ndarray>arr
    if a._grad_req == GRAD_NULL:
        return
    a._fresh_grad = True
    if isinstance(g, ndarray):
        g = (<ndarray>g)._data
    if a._grad is None:
        if not a._grad_lazy:
            return
        # Its buffer was never made: this gradient becomes it (Note [Lazy grad buffers]).
        if g is None:
            # A zero stays symbolic: reading .grad makes the zeros (Note [Zero gradients]).
            return
        if not (owned and type(g) is NP_NDARRAY and g.shape == a._data.shape
                  and g.dtype == a._data.dtype):
            g = _np.array(g, dtype=a._data.dtype, copy=True)
        a._grad = wrap(g, None, 0, type(a))
        a._grad_lazy = False
        return
    write_grad_buffer(<ndarray>a._grad, a._grad_req, g, owned and a._grad_swappable)


# Writing a variable's .grad is a read-modify-write (the buffer may be made on first use;
# grad_req 'add' adds into it, and NumPy releases the GIL while it adds), and passes in two
# threads may write the same variable. These writes alone are serialised, by a lock that is
# never held while user code runs (Note [Pass state]); it is re-entrant for its thread in case
# a finalizer run by an allocation under it starts a pass.
cdef PyThread_type_lock _grad_lock = PyThread_allocate_lock()
cdef unsigned long _grad_owner = 0
cdef int _grad_depth = 0


cdef void _lock_grads() noexcept:
    global _grad_owner, _grad_depth
    cdef unsigned long me = PyThread_get_thread_ident()
    if _grad_depth and _grad_owner == me:
        _grad_depth += 1
        return
    if not PyThread_acquire_lock(_grad_lock, NOWAIT_LOCK):
        with nogil:
            PyThread_acquire_lock(_grad_lock, WAIT_LOCK)
    _grad_owner = me
    _grad_depth = 1


cdef void _unlock_grads() noexcept:
    global _grad_depth
    _grad_depth -= 1
    if _grad_depth == 0:
        PyThread_release_lock(_grad_lock)


cdef void _write_vars(Node n, object g, bint owned) except *:
    cdef Py_ssize_t k
    _lock_grads()
    try:
        if n.n_out == 1:
            _write_var(n.var_refs, g, owned)
            return
        for k in range(n.n_out):
            ref = n.var_refs[k]
            if ref is not None:
                _write_var(ref, g[k] if g is not None else None, False)
    finally:
        _unlock_grads()


cdef void _check_versions(Node n, tuple saved) except *:
    cdef unsigned long vsum = 0
    cdef Primitive op = <Primitive>n.op
    for s in saved:
        if isinstance(s, ndarray):
            vsum += version_of(<ndarray>s)
    if vsum != n.vsum or (n.out_cell is not None and n.out_cell.value != n.out_v0):
        raise MXNetError(
            "fastgrad.%s (node #%d): an array this op saved for the backward pass was modified "
            "in place after it was recorded, so its gradient would be wrong. Write the update "
            "out of place, or copy() the array before modifying it." % (op.name, n.seq))


# Note [Rule arguments]
# ~~~~~~~~~~~~~~~~~~~~~
# A table rule is called through vectorcall with its arguments in a C array on the pass loop's
# stack (``RULE_ARGV`` of them; a rule with more gets a tuple, whose items are such an array),
# not packed into a tuple that the call unpacks again: one allocation and one deallocation
# fewer per node. The array holds new references, which the loop drops after the call.
cdef enum:
    RULE_ARGV = 16


cdef tuple _rule_argv(Node n, object g, object mask, bint create, PyObject **argv,
                     Py_ssize_t *count):
    """Put the arguments of ``n``'s table rule, ``(g, needs, *saved, [result], *params)``
    with ``g`` completed with zeros for a multi-output node, in ``argv`` (``RULE_ARGV``
    entries) as new references, set ``*count`` to how many there are and return None; when
    there are more, return them in a new tuple instead (Note [Rule arguments]). Nothing is
    put in ``argv`` unless all of it is. For a table op only (``Primitive``)."""
    cdef Primitive op = <Primitive>n.op
    cdef Py_ssize_t ns, nprm, k, j
    cdef tuple args = None
    cdef object s
    # Read once: another pass over the same graph may release the node meanwhile
    # (Note [Pass state]); these references keep what this call uses alive.
    cdef tuple saved = n.saved
    cdef object result = n.result
    if n.released or saved is None:
        raise MXNetError(_released_message(n))
    _check_versions(n, saved)
    if n.n_out > 1:
        g = complete_gradients(g, n.n_out, n.out_shape, n.out_dtype)
    ns = PyTuple_GET_SIZE(saved)
    nprm = PyTuple_GET_SIZE(n.params)
    cdef bint with_result = op.save_result
    if with_result and create:
        if n.n_out == 1:
            result = wrap(result, n, 0)
        else:
            result = tuple([wrap(result[k], n, k) for k in range(n.n_out)])
    count[0] = 2 + ns + with_result + nprm
    if count[0] > RULE_ARGV:
        args = PyTuple_New(count[0])
        argv = PySequence_Fast_ITEMS(args)
    Py_INCREF(g)
    argv[0] = <PyObject *>g
    s = mask
    Py_INCREF(s)
    argv[1] = <PyObject *>s
    j = 2
    for k in range(ns):
        s = <object>PyTuple_GET_ITEM(saved, k)
        if not create and isinstance(s, ndarray):
            s = (<ndarray>s)._data
        Py_INCREF(s)
        argv[j] = <PyObject *>s
        j += 1
    if with_result:
        Py_INCREF(result)
        argv[j] = <PyObject *>result
        j += 1
    for k in range(nprm):
        s = <object>PyTuple_GET_ITEM(n.params, k)
        Py_INCREF(s)
        argv[j] = <PyObject *>s
        j += 1
    return args


cdef tuple _call_rule(Node n, PyObject **argv, Py_ssize_t nargs, bint create):
    """Run the table rule of ``n`` on the ``nargs`` arguments ``argv`` (from ``_rule_argv``)."""
    cdef Primitive op = <Primitive>n.op
    g = <object>argv[0]
    if create and op.backward_graph is not None:
        return PyObject_Vectorcall(op.backward_graph, argv, nargs, NULL)
    if not create and op.backward_large is not None and (
            large_rule(g) or (type(g) is FILLED and g.size >= large_rule_size())):
        # Note [Bindings] in _bindings.py
        return PyObject_Vectorcall(op.backward_large, argv, nargs, NULL)
    return PyObject_Vectorcall(op.backward, argv, nargs, NULL)


# Note [Pass-through rules]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# The rule of ``add`` (``copy``, ``astype``, ...) gives every input ``g`` itself. In a first-order
# pass the engine builds that tuple in C (``passes_g``, set at import for a single-output op whose
# every formula is ``g``) instead of calling the compiled rule: a Python frame per node of a chain
# of additions. Its checks (a released node, modified saved values) and what
# ``GradientBuffer.deliver`` is given (the rule's argument ``g``, for the ownership of
# Note [Gradient buffer ownership]) are those of the rule's call. Under ``create_graph`` the
# graph binding's rule runs as for any op.
cdef tuple _passed_on(Node n, object g, unsigned long long mask, Py_ssize_t nparents,
                      PyObject **argv, Py_ssize_t *count):
    """What the rule of ``n`` (``passes_g``) returns for the inputs ``mask`` wants, with ``g``
    put in ``argv`` as its one argument (a new reference; ``*count`` is set to 1)."""
    cdef tuple saved = n.saved
    cdef Py_ssize_t i
    cdef object gi
    if n.released or saved is None:
        raise MXNetError(_released_message(n))
    _check_versions(n, saved)
    cdef tuple grads = PyTuple_New(nparents)
    for i in range(nparents):
        gi = g if mask & ((<unsigned long long>1) << i) else None
        Py_INCREF(gi)
        PyTuple_SET_ITEM(grads, i, gi)
    Py_INCREF(g)
    argv[0] = <PyObject *>g
    count[0] = 1
    return grads

# ------------------------------------------------------------------ the pass

cdef enum:
    NEEDED = 1          # lies on a path to a requested variable (grad()); always for backward()
    TARGET = 2          # its gradient is returned by grad()


cdef struct Slot:
    PyObject *node          # the node (a reference the pass owns)
    long long seq           # node.seq, for sorting in C
    Py_ssize_t deps         # consumers not yet run in this pass
    unsigned char flags     # NEEDED | TARGET


cdef int _by_seq(const void *a, const void *b) noexcept nogil:
    cdef long long sa = (<const Slot *>a).seq, sb = (<const Slot *>b).seq
    return (sa > sb) - (sa < sb)


@cython.final
cdef class _Pass:
    """The state of one backward pass (Note [Pass state]): per visited node a slot with the
    node, its dependency count and flags; the ready heap; the gradient buffer; the memo."""

    cdef unsigned long long epoch
    cdef bint create
    cdef bint prune
    cdef Slot *slots                # the visited nodes' state, by slot
    cdef Py_ssize_t n               # slots in use
    cdef Py_ssize_t cap             # slots allocated
    cdef dict shadow                # Node -> slot, for nodes another running pass claimed
    cdef Py_ssize_t *work           # the walk's stack, then the ready heap: slot indices
    cdef Py_ssize_t nwork           # entries in use
    cdef Py_ssize_t capwork         # entries allocated
    cdef readonly dict memo         # Note [Shared subexpressions]; None unless create_graph
    cdef readonly bint retain       # retain_graph: the nodes keep what they saved (Note
                                    #   [Release]); a node's op may ask (``current_pass()``)
    cdef GradientBuffer buf         # the nodes' incoming gradients, by slot (Note [Gradient
                                    #   buffers]); made once the walk has counted the nodes
    cdef object __weakref__

    def __cinit__(self):
        self.slots = NULL
        self.n = 0
        self.cap = 0
        self.work = NULL
        self.nwork = 0
        self.capwork = 0

    def __dealloc__(self):
        cdef Py_ssize_t k
        cdef Slot *slots = self.slots
        self.slots = NULL
        for k in range(self.n):
            Py_XDECREF(slots[k].node)
        PyMem_Free(slots)
        PyMem_Free(self.work)
        self.work = NULL

    cdef inline Py_ssize_t slot_of(self, Node n) except -2:
        """``n``'s slot in this pass, or -1 if the pass has not visited it."""
        if n.epoch == self.epoch:
            return n.slot
        return self.shadow_slot(n)

    cdef Py_ssize_t shadow_slot(self, Node n) except -2:
        """The slot of a node this pass did not claim (Note [Pass state]), or -1."""
        if self.shadow is None:
            return -1
        found = self.shadow.get(n)
        return -1 if found is None else <Py_ssize_t>found

    cdef int grow(self) except -1:
        cdef Py_ssize_t newcap = 64 if self.cap == 0 else 2 * self.cap
        cdef void *mem = PyMem_Realloc(self.slots, newcap * sizeof(Slot))
        if mem == NULL:
            raise MemoryError()
        self.slots = <Slot *>mem
        self.cap = newcap
        return 0

    cdef inline Py_ssize_t visit(self, Node n) except -1:
        """Give ``n`` a slot, claiming the node if no running pass holds it, and push the slot
        on the walk's stack (``work``)."""
        cdef Py_ssize_t k = self.n
        if k == self.cap:
            self.grow()
        Py_INCREF(n)
        self.slots[k].node = <PyObject *>n
        self.slots[k].seq = n.seq
        self.slots[k].deps = 0
        self.slots[k].flags = NEEDED
        self.n = k + 1
        if n.epoch == 0:
            n.epoch = self.epoch       # no Python code between the test and the claim
                                       #   (Note [Threads])
            n.slot = k
        else:
            if self.shadow is None:
                self.shadow = {}
            self.shadow[n] = k
        self.push_work(k)
        return k

    # Note [Work array]
    # ~~~~~~~~~~~~~~~~~
    # The walk's stack and the ready heap hold slot indices in one C array of the pass (the
    # stack is empty before the first node is pushed on the heap), not nodes in Python lists:
    # on a chain of ops both hold one or two entries, and a Python list that empties frees its
    # memory, so every push and pop was a realloc. The slots hold the references to the nodes,
    # and they do not move while the heap is in use (``order_by_seq`` runs before it).

    cdef inline int push_work(self, Py_ssize_t k) except -1:
        cdef void *mem
        if self.nwork == self.capwork:
            mem = PyMem_Realloc(self.work, (64 if self.capwork == 0 else 2 * self.capwork)
                                * sizeof(Py_ssize_t))
            if mem == NULL:
                raise MemoryError()
            self.work = <Py_ssize_t *>mem
            self.capwork = 64 if self.capwork == 0 else 2 * self.capwork
        self.work[self.nwork] = k
        self.nwork += 1
        return 0

    cdef inline int heap_push(self, Py_ssize_t k) except -1:
        """Push slot ``k`` on the ready heap (max ``seq`` first)."""
        cdef Py_ssize_t i = self.nwork, parent
        cdef long long seq = self.slots[k].seq
        self.push_work(k)
        while i > 0:
            parent = (i - 1) >> 1
            if self.slots[self.work[parent]].seq >= seq:
                break
            self.work[i] = self.work[parent]
            i = parent
        self.work[i] = k
        return 0

    cdef inline Py_ssize_t heap_pop(self) noexcept:
        """Pop the slot of the ready node with the largest ``seq`` (the heap is not empty)."""
        cdef Py_ssize_t top = self.work[0], last, n, i = 0, child
        cdef long long last_seq
        self.nwork -= 1
        n = self.nwork
        if n == 0:
            return top
        last = self.work[n]
        last_seq = self.slots[last].seq
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if (child + 1 < n
                    and self.slots[self.work[child + 1]].seq > self.slots[self.work[child]].seq):
                child += 1
            if self.slots[self.work[child]].seq <= last_seq:
                break
            self.work[i] = self.work[child]
            i = child
        self.work[i] = last
        return top

    cdef void finish(self) noexcept:
        """Hand the nodes this pass claimed back and drop its references (the pass is over)."""
        cdef Py_ssize_t k, count = self.n
        cdef Node n
        cdef Slot *slots = self.slots
        self.n = 0
        for k in range(count):
            n = <Node>slots[k].node
            if n.epoch == self.epoch:
                n.epoch = 0
            slots[k].node = NULL
            Py_DECREF(n)                # n still holds its own reference until it goes
        self.buf = None                 # its entries go with it

    cdef void order_by_seq(self) except *:
        """Sort the slots by ``seq`` (parents first) and renumber them."""
        cdef Node n
        cdef Py_ssize_t k
        qsort(self.slots, self.n, sizeof(Slot), _by_seq)
        for k in range(self.n):
            n = <Node>self.slots[k].node
            if n.epoch == self.epoch:
                n.slot = k
            else:
                self.shadow[n] = k
            self.slots[k].deps = 0
            self.slots[k].flags = 0

    cdef void prune_to_targets(self) except *:
        """Keep only the nodes on a path from the heads to a target (Note [Scheduling]);
        the slots are in ``seq`` order, so a node's parents are decided before it."""
        cdef Node n
        cdef Py_ssize_t k, j
        cdef bint needed
        for k in range(self.n):
            n = <Node>self.slots[k].node
            needed = (self.slots[k].flags & TARGET) != 0
            if not needed and not _acts_as_leaf(n):
                for par in n.parents:
                    if par is not None and self.slots[self.slot_of(<Node>par)].flags & NEEDED:
                        needed = True
                        break
            if needed:
                self.slots[k].flags |= NEEDED
        for k in range(self.n):
            n = <Node>self.slots[k].node
            if self.slots[k].flags & NEEDED and not _acts_as_leaf(n):
                for par in n.parents:
                    if par is not None:
                        j = self.slot_of(<Node>par)
                        if self.slots[j].flags & NEEDED:
                            self.slots[j].deps += 1




def run_backward(list heads, list head_grads, list variables, bint retain_graph,
                 bint create_graph, bint train_mode, bint allow_unused=False):
    """Run one backward pass (internal; see ``fastgrad.autograd.backward`` and ``grad``).

    With ``variables=None`` the gradients are written into the variables' ``.grad`` buffers;
    otherwise they are returned, one per variable, and no ``.grad`` is touched.
    """
    global _epoch
    _blas_tick()                    # Note [Load-aware BLAS threads] in _kernels/_blas_policy.py
    if head_grads is not None and len(head_grads) != len(heads):
        raise ValueError("backward: got %d heads but %d head gradients"
                         % (len(heads), len(head_grads)))
    cdef _Pass ps = _Pass.__new__(_Pass)
    _epoch += 1                     # under the GIL (Note [Threads])
    ps.epoch = _epoch
    ps.create = create_graph
    ps.retain = retain_graph
    ps.prune = variables is not None
    if create_graph:
        ps.memo = {}                # Note [Shared subexpressions]
    prev_rec = set_recording_c(create_graph)
    prev_train = set_training_c(train_mode)
    outer = swap_pass_c(ps)
    try:
        return _run(ps, heads, head_grads, variables, retain_graph, allow_unused)
    finally:
        swap_pass_c(outer)
        ps.finish()
        set_recording_c(prev_rec)
        set_training_c(prev_train)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef object _run(_Pass ps, list heads, list head_grads, list variables, bint retain,
                 bint allow_unused):
    """The backward pass (Note [Scheduling]): walk, seed, then run the ready nodes."""
    cdef long long start_seq = last_seq()       # nodes after it are made by this pass
    cdef list seeds = _seeds(ps, heads, head_grads, allow_unused)
    cdef list freed = _walk(ps)
    cdef list targets = None
    cdef dict captured = None
    if ps.prune:
        targets = _targets(ps, variables, freed, allow_unused)
        captured = {}
    ps.buf = GradientBuffer.__new__(GradientBuffer)
    ps.buf.reset(ps.n, ps.create)
    _push_seeds(ps, seeds)
    seeds = None

    cdef Node n
    cdef Py_ssize_t slot
    cdef object g, needs
    cdef bint owned
    cdef unsigned long long mask
    cdef Dest *dests = NULL
    while ps.nwork:
        # Take the ready node recorded last and the gradient its consumers left it.
        slot = ps.heap_pop()
        n = <Node>ps.slots[slot].node
        g = ps.buf.take(slot, &owned)
        needs = None
        if g is not None and not n.zero and not _acts_as_leaf(n):
            # Which of its inputs want a gradient, and where each goes.
            dests = ps.buf.destinations(PyTuple_GET_SIZE(n.parents))
            needs = _destinations(ps, n, dests, &mask)
        owned = _hand_out(ps, slot, n, g, owned, needs is not None, captured)
        if _acts_as_leaf(n):
            continue
        if needs is not None and _has_deferred_product(n, mask, ps.create):
            # The op's hook may keep a product for later instead (Note [Gradient buffers]).
            needs = _defer_product(ps, n, g, dests, &mask, needs)
        if needs is not None:
            # Call its rule; hand the gradients it returns to its inputs' buffer entries.
            _run_rule(ps, n, g, owned, needs, mask, dests)
        g = None
        if not retain:
            _release(n)
        _schedule_parents(ps, n)

    if not ps.prune:
        return None
    return _collect(ps, variables, targets, captured, ps.create, start_seq)


# ------------------------------------------------------------------ the steps of the pass

cdef list _seeds(_Pass ps, list heads, list head_grads, bint allow_unused):
    """Check the heads, make their gradients and give their nodes slots: ``(node, output,
    gradient)`` per head that has history."""
    cdef list seeds = []
    cdef Py_ssize_t i
    cdef ndarray h
    for i in range(len(heads)):
        obj = heads[i]
        if not isinstance(obj, ndarray):
            raise TypeError("backward: head %d is a %s, not a fastgrad array"
                            % (i, type(obj).__name__))
        h = <ndarray>obj
        if h._node is None:
            if ps.prune and allow_unused:
                # A constant head (e.g. the derivative of a linear function) reaches no
                # variable: with the opt-in, every variable gets zeros from it.
                continue
            # Every recorded op keeps a head connected to what it depends on, zero-derivative
            # and integer ops included (Note [Zero gradients] in _zeros.py): no history means
            # the head depends on no variable at all.
            raise MXNetError(
                "backward: head %d does not depend on any variable: it has no recorded history "
                "(it was computed outside autograd.record(), only from arrays without "
                "attach_grad(), or from data that left the graph through numpy.asarray() or "
                "detach())%s" % (i, "" if not ps.prune else
                                 "; pass allow_unused=True to grad() to get zeros for it"))
        g = _head_grad(h, head_grads[i] if head_grads is not None else None, i, ps.create)
        seeds.append((h._node, h._oidx, g))
        if ps.slot_of(h._node) < 0:
            ps.visit(h._node)
    return seeds


cdef list _walk(_Pass ps):
    """Walk the graph from the heads' nodes, giving each node a slot and counting its
    consumers (Note [Scheduling]); returns the released nodes met, which ``grad()`` forgives
    unless it needs their rules."""
    cdef list freed = []
    cdef Node n, p
    cdef Py_ssize_t pslot
    while ps.nwork:
        ps.nwork -= 1
        n = <Node>ps.slots[ps.work[ps.nwork]].node
        if _acts_as_leaf(n):
            continue
        if n.released:
            if not ps.prune:
                raise MXNetError(_released_message(n))
            freed.append(n)     # an error only if its rule would run (checked after pruning)
        for obj in n.parents:
            if obj is None:
                continue
            p = <Node>obj
            if p.epoch == ps.epoch:
                pslot = p.slot
            elif p.epoch == 0:
                pslot = ps.visit(p)     # unclaimed, so not visited (Note [Pass state])
            else:
                pslot = ps.shadow_slot(p)
                if pslot < 0:
                    pslot = ps.visit(p)
            ps.slots[pslot].deps += 1
    return freed


cdef list _targets(_Pass ps, list variables, list freed, bint allow_unused):
    """For ``grad()``: mark the variables' nodes as targets and keep only the nodes on a path
    to one (Note [Scheduling]); the variables' nodes, None for one not reached."""
    cdef list targets = []
    cdef Py_ssize_t i, slot
    cdef ndarray h
    cdef Node n
    ps.order_by_seq()
    for i in range(len(variables)):
        obj = variables[i]
        if not isinstance(obj, ndarray):
            raise TypeError("grad: variable %d is a %s, not a fastgrad array"
                            % (i, type(obj).__name__))
        h = <ndarray>obj
        if h._node is None:
            raise MXNetValueError("grad: variable %d (shape %s) has no recorded history; "
                                  "call attach_grad() on it before recording"
                                  % (i, h.shape))
        slot = ps.slot_of(h._node)
        if slot < 0:
            if not allow_unused:
                raise MXNetValueError(
                    "grad: variable %d (shape %s) is not reached from the heads: no "
                    "recorded path leads from them to it (a path through an op whose "
                    "derivative is zero, such as floor or a cast to an integer type, would "
                    "count and give zeros); pass allow_unused=True to get zeros for it"
                    % (i, h.shape))
            targets.append(None)
            continue
        ps.slots[slot].flags |= TARGET
        targets.append(h._node)
    ps.prune_to_targets()
    # A freed node is fine as long as nothing needs its rule: grad(y + 0, [y]) after y's
    # producer was released captures y's gradient and stops there.
    for obj in freed:
        n = <Node>obj
        if ps.slots[ps.slot_of(n)].flags & NEEDED:
            for par in n.parents:
                if par is not None and ps.slots[ps.slot_of(<Node>par)].flags & NEEDED:
                    raise MXNetError(_released_message(n))
    return targets


cdef void _push_seeds(_Pass ps, list seeds) except *:
    """Add the head gradients to their nodes' entries (never owned: they are the caller's),
    then make the heads nothing else consumes ready."""
    cdef Node n
    cdef Py_ssize_t slot
    for obj in seeds:
        n = <Node>obj[0]
        slot = ps.slot_of(n)
        if ps.slots[slot].flags & NEEDED:
            ps.buf.add(slot, obj[1], n.n_out, obj[2], False)
    for obj in seeds:
        n = <Node>obj[0]
        slot = ps.slot_of(n)
        if ps.slots[slot].flags & NEEDED and ps.slots[slot].deps == 0:
            ps.slots[slot].deps = -1
            ps.heap_push(slot)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef object _destinations(_Pass ps, Node n, Dest *dests, unsigned long long *mask):
    """Fill ``dests`` with where the gradient for each input of ``n`` goes: its producer's
    slot, shape and dtype; no entry (-1) for a constant, a producer that carries no gradient
    (Note [Zero gradients]) or one ``grad()`` does not need. Return the rule's ``needs``: bit
    ``i`` for each input that wants a gradient, however many (Note [Rule arguments]); the
    first 63 bits also in ``*mask``; None when no input wants one."""
    cdef tuple parents = n.parents
    cdef tuple poidx = n.parent_oidx
    cdef Py_ssize_t i, k, slot, nparents = PyTuple_GET_SIZE(parents)
    cdef unsigned long long m = 0
    cdef object big = None
    cdef PyObject *obj
    cdef Node p
    cdef Dest *d
    for i in range(nparents):
        d = &dests[i]
        d.entry = -1
        obj = PyTuple_GET_ITEM(parents, i)
        if obj == <PyObject *>None:
            continue
        p = <Node>obj
        if p.zero:
            continue
        slot = ps.slot_of(p)
        if ps.prune and not ps.slots[slot].flags & NEEDED:
            continue
        d.entry = slot
        d.like = NULL
        d.n_out = p.n_out
        if p.n_out == 1:
            d.oidx = 0
            d.shape = <PyObject *>p.out_shape
            d.dtype = <PyObject *>p.out_dtype
        else:
            k = 0 if poidx is None else <Py_ssize_t><object>PyTuple_GET_ITEM(poidx, i)
            d.oidx = k
            d.shape = <PyObject *>(p.out_shape[k])      # borrowed: the node holds them
            d.dtype = <PyObject *>(p.out_dtype[k])
        if i < 63:
            m |= (<unsigned long long>1) << i
        else:
            big = (m if big is None else big) | ((<object>1) << i)   # a Python int
    mask[0] = m
    if big is not None:
        return big
    return m if m else None


cdef inline bint _has_deferred_product(Node n, unsigned long long mask, bint create) noexcept:
    """Whether ``n``'s op declares a deferred product (``Primitive.defer_input``) for an input
    that wants a gradient, in a first-order pass."""
    return (not create and type(n.op) is Primitive and (<Primitive>n.op).defer_input >= 0
            and (mask >> (<Primitive>n.op).defer_input) & 1)


cdef object _defer_product(_Pass ps, Node n, object g, Dest *dests, unsigned long long *mask,
                           object needs):
    """The op's deferred-product hook (Note [Deferred weight gradients] in
    _kernels/_forward.py): the gradient for input ``defer_input`` of a variable with more
    consumers to come is kept in the buffer (``GradientBuffer.defer``) instead of computed by
    the rule. Returns the rule's ``needs`` without that input when it was kept, else ``needs``
    unchanged."""
    cdef Primitive op = <Primitive>n.op
    cdef Py_ssize_t i = op.defer_input
    cdef Dest *d = &dests[i]
    cdef tuple saved = n.saved
    if is_anomaly_c() or not _acts_as_leaf(<Node>PyTuple_GET_ITEM(n.parents, i)):
        return needs
    if n.released or saved is None:
        return needs                    # the rule's call raises the error
    x = <object>PyTuple_GET_ITEM(saved, op.defer_saved)
    if isinstance(x, ndarray):
        x = (<ndarray>x)._data
    if not ps.buf.defer(d, ps.slots[d.entry].deps, x, g):
        return needs
    _check_versions(n, saved)
    mask[0] &= ~((<unsigned long long>1) << i)
    d.entry = -1
    return mask[0] if mask[0] else None


cdef bint _hand_out(_Pass ps, Py_ssize_t slot, Node n, object g, bint owned,
                    bint to_user_code, dict captured) except -1:
    """Give ``n``'s gradient to whoever asked for it: ``grad()``'s caller (``captured``) or
    the ``.grad`` of the variables it belongs to. Returns whether the pass still owns it
    (Note [Gradient buffer ownership]); ``to_user_code``: a ``Function``'s backward will
    receive it, so the caller gets a copy."""
    if ps.prune:
        if ps.slots[slot].flags & TARGET:
            captured[n] = (g, owned and not (to_user_code and type(n.op) is not Primitive))
            return False                    # handed out to grad()'s caller
    elif n.var_refs is not None:
        # A variable's gradient the pass owns becomes its .grad buffer (handed out).
        _write_vars(n, g, n.op is None and owned)
    return owned


cdef void _run_rule(_Pass ps, Node n, object g, bint owned, object needs,
                    unsigned long long mask, Dest *dests) except *:
    """Call ``n``'s derivative rule on its gradient ``g`` and deliver what it returns to the
    gradient buffer. A table rule's arguments are a C array on this frame's stack (Note [Rule
    arguments]); a pass-through rule is not called at all (Note [Pass-through rules])."""
    cdef PyObject *argv[RULE_ARGV]
    cdef PyObject **args = NULL
    cdef Py_ssize_t i, nargs = 0, nparents = PyTuple_GET_SIZE(n.parents)
    cdef tuple spill = None, grads
    cdef bint create = ps.create
    cdef bint table = type(n.op) is Primitive
    try:
        if table and (<Primitive>n.op).passes_g and not create:
            grads = _passed_on(n, g, mask, nparents, argv, &nargs)
            args = &argv[0]
        elif table:
            spill = _rule_argv(n, g, needs, create, argv, &nargs)
            args = &argv[0] if spill is None else PySequence_Fast_ITEMS(spill)
            grads = _call_rule(n, args, nargs, create)
        else:
            # A Function or a custom op: its backward is user code, which may keep the
            # gradient it receives and the arrays it returns.
            grads = tuple(n.op.node_backward(n, g, needs, create))
        check_rule_result(n, grads, nparents, n)
        ps.buf.deliver(n, grads, dests, args, nargs, g, owned and table and not create)
    finally:
        if args == &argv[0]:
            for i in range(nargs):
                Py_XDECREF(argv[i])


cdef inline void _release(Node n) except *:
    """Drop what ``n`` saved for its rule, which has run (Note [Release])."""
    if n.zero:
        return          # a zero node holds nothing a rule needs
    n.saved = None
    n.result = None
    n.consts = None
    n.released = True
    if type(n.op) is not Primitive:
        n.op.release()


@cython.boundscheck(False)
@cython.wraparound(False)
cdef int _schedule_parents(_Pass ps, Node n) except -1:
    """``n`` has run: each of its producers has one consumer fewer to wait for, and is ready
    when none is left."""
    cdef tuple parents = n.parents
    cdef Py_ssize_t i, pslot
    cdef PyObject *obj
    for i in range(PyTuple_GET_SIZE(parents)):
        obj = PyTuple_GET_ITEM(parents, i)
        if obj == <PyObject *>None:
            continue
        pslot = ps.slot_of(<Node>obj)
        if ps.prune and not ps.slots[pslot].flags & NEEDED:
            continue
        ps.slots[pslot].deps -= 1
        if ps.slots[pslot].deps == 0:
            ps.heap_push(pslot)
    return 0


cdef ndarray _link_reach(ndarray g, list leaves, object target):
    """Tie a gradient returned under ``create_graph`` to the variables the pass reached, so
    that differentiating it again gives zeros for the ones it is constant in (Note [Zero
    gradients] in _zeros.py). A constant gets a zero node; a recorded gradient a node that
    passes its gradient on to its own history."""
    cdef list parents = list(leaves)
    if target is not None and (<Node>target).op is not None:
        parents.append(target)
    if not parents:
        return g
    cdef Node node
    if g._node is None:
        node = new_node(ConstantDerivative(g._data))
        node.zero = True
        node.parents = tuple(parents)
    else:
        node = new_node(GRADIENT_OF)
        node.parents = (g._node,) + tuple(parents)
        if g._oidx:
            node.parent_oidx = (g._oidx,) + (0,) * len(parents)
    node.saved = ()
    node.params = ()
    node.out_shape = g._data.shape
    node.out_dtype = g._data.dtype
    cdef ndarray out = wrap(g._data, node, 0, type(g))
    out._vcell = cell_of(g)
    return out


cdef list _leaves(_Pass ps):
    """The variables (nodes without an op) the pass visited, in slot order."""
    cdef Py_ssize_t k
    cdef list leaves = []
    for k in range(ps.n):
        if (<Node>ps.slots[k].node).op is None:
            leaves.append(<Node>ps.slots[k].node)
    return leaves


cdef list _collect(_Pass ps, list variables, list targets, dict captured, bint create,
                   long long start_seq):
    cdef list leaves = None
    cdef list out = []
    cdef ndarray v
    cdef Node n
    cdef Py_ssize_t i
    for i in range(len(variables)):
        v = <ndarray>variables[i]
        obj = targets[i]
        entry = captured.get(obj) if obj is not None else None
        g = None
        owned = False
        if entry is not None:
            g, owned = entry
            n = <Node>obj
            if n.n_out > 1:
                g = g[v._oidx] if g is not None else None
                owned = False
            elif owned:
                captured[obj] = (g, False)   # a variable listed twice gets its own copy
        if g is None:
            g = _np.zeros_like(v._data)
            owned = True
        if create:
            if not isinstance(g, ndarray):
                g = wrap(_np.array(g, dtype=v._data.dtype, copy=True), None, 0, type(v))
            elif ((<ndarray>g)._node is None or (<ndarray>g)._node.seq <= start_seq
                  or any([g is o for o in out])):
                # Not made by this pass (one times x is x itself, Note [Filled gradients];
                # a head gradient passed through), or already returned for a variable listed
                # twice: the caller gets an array of its own, still recorded.
                g = P_COPY.apply((g,), ())
            if leaves is None:
                leaves = _leaves(ps)
            out.append(_link_reach(<ndarray>g, leaves, obj))
            continue
        if isinstance(g, ndarray):
            g = (<ndarray>g)._data
        elif type(g) is not NP_NDARRAY:
            g = _asarray(g)
        if not owned:
            g = g.copy()
        out.append(wrap(g, None, 0, type(v)))
    return out
