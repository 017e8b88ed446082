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
Derivative rules never unbroadcast or cast: the engine sums each gradient back to the shape
of the input it belongs to and casts it to that input's dtype (``fit_gradient``). The first
gradient reaching a node is kept as it is (no copy; it may be shared with another node, e.g.
the two inputs of ``add`` receive the same array). Later ones are added by ``add_gradient``:
in place into a buffer the pass owns (Note [Gradient buffer ownership]), else into the new
contribution if the pass owns that, else out of place once, which gives a buffer the pass
owns for the later ones. So a large backward allocates no more than its rules' results. Under
``create_graph`` every one of these steps is a recorded operation, so the gradient itself can
be differentiated. The executor's replay (``_plan.pyx``) calls these same functions.

Note [Gradient buffer ownership]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A gradient array may be written in place only if nothing outside the pass can see it. The
pass decides that from what it did, never from reference counts (which say nothing reliable
under free-threaded CPython, and count Cython's temporaries): a slot's gradient is *owned*
(``OWNED``) when the pass made it and has not handed it out.

* The pass owns what it allocates: the sum of ``fit_gradient`` (a reduction over broadcast
  axes, a cast) and the result of an out-of-place ``add_gradient``.
* It owns what a *table* rule made for one input (``rule_result_owned``): a table rule is a
  pure function of its arguments, so a writeable base array it returns is its own unless it
  is one of the arguments (``g`` passed through by ``add``, ``reshape``'s view of it, a saved
  value, ``result``), or is also returned for another input.
* It owns nothing else: the head gradients, anything a ``Function``'s or custom op's
  ``backward`` returns (user code may keep it), read-only and broadcast views, symbolic
  constants (Note [Filled gradients]), the outputs of multi-output nodes.
* A table rule that passes its own ``g`` on unchanged (``add``) passes the pass's ownership
  of ``g`` on to the one input slot that keeps it as it is (``_deliver`` fits every gradient
  of the node first to count them); when two slots keep it, or its ``g`` was not owned,
  neither slot owns it.
* Handing out ends ownership: a gradient given to ``grad()``'s caller or to a ``Function``
  stops being the pass's; a variable's owned gradient becomes its ``.grad`` buffer
  instead of being copied (``write_grad_buffer``) and the pass drops it; ``grad()`` returns an
  owned gradient as it is and a copy for every other (or repeated) variable, and a captured
  gradient that was also given to a ``Function`` is copied.

Anything not owned is copied by its first accumulation (``acc + g``), after which the sum is
owned. The in-place decisions are the same in the engine and the executor.
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
*slot* per node it visited (the node, its dependency count, flags for needed, target and
owned, and the gradient accumulated so far, all references owned by the pass), its ready heap
and, under ``create_graph``, its memo (Note [Shared subexpressions]). ``grad()`` sorts the
slots by ``seq`` with ``qsort``. There is no process-wide lock and no global pass state
besides the counter that numbers passes, so passes on different graphs run in different
threads at once, and a ``Function``'s backward may start a pass in its own
thread or in another one and wait for it. Nothing is locked while user code runs.

A node records only which pass claimed it: ``epoch`` (that pass's number, 0 when none) and
``slot``. A pass visiting an unclaimed node claims it (test and set with no Python code
between them, so under the GIL two passes cannot both claim it) and hands it back at its end.
A pass that meets a node another *running* pass claimed (the outer pass, for a pass started
inside a ``Function``'s backward that differentiates through the outer graph; or a pass in
another thread over a shared variable or the same graph) keeps the node's slot in a side
dict. So the common case costs one comparison per lookup, and nested or concurrent passes
never see each other's counts or pending gradients: an inner pass through the outer graph
gives the right values, and the outer pass's gradients survive it.

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
pass at a time (Note [Function backward in concurrent passes] in ``_function.py``).
"""

cimport cython
from cpython.tuple cimport (PyTuple_New, PyTuple_SET_ITEM, PyTuple_GET_SIZE, PyTuple_GET_ITEM,
                            PyTuple_CheckExact)
from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF, Py_XDECREF
from libc.stdlib cimport qsort
from cpython.sequence cimport PySequence_Fast_ITEMS
from cpython.mem cimport PyMem_Realloc, PyMem_Free
from cpython.pythread cimport (PyThread_type_lock, PyThread_allocate_lock,
                               PyThread_acquire_lock, PyThread_release_lock,
                               PyThread_get_thread_ident, WAIT_LOCK, NOWAIT_LOCK)
cimport numpy as cnp
from fastgrad._node cimport Node, _bump_cell, last_seq, new_node
from fastgrad._array cimport (ndarray, Primitive, wrap, cell_of, version_of, GRAD_NULL,
                              GRAD_WRITE, GRAD_ADD)
from fastgrad._state cimport set_recording_c, set_training_c, is_anomaly_c, swap_pass_c
from fastgrad._large.kernels cimport (add_into, add as large_add, sum_rows, large_rule,
                                      large_rule_size)

import numpy as _np
from fastgrad._filled import Filled as FILLED
from fastgrad._zeros import ConstantDerivative, GRADIENT_OF
from fastgrad.base import MXNetError, MXNetValueError   # Note [MXNet errors]
from fastgrad import _anomaly, _kernels

cnp.import_array()

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
# fastgrad._registry when it has built them (Note [Layers] in _layers.py).
cdef Primitive P_SUM_TO = None       # sum_to as a recorded op
cdef Primitive P_ADD = None
cdef Primitive P_CAST = None
cdef Primitive P_COPY = None
cdef Primitive P_REAL = None
cdef Primitive P_MATMUL = None     # Note [Deferred weight gradients] in _kernels.py


def register_primitives(prims):
    """Take the primitives the engine records with (by name): called once by
    fastgrad._registry when it has built them."""
    global P_SUM_TO, P_ADD, P_CAST, P_COPY, P_REAL, P_MATMUL
    P_SUM_TO, P_ADD, P_CAST = prims["sum_to"], prims["add"], prims["astype"]
    P_COPY = prims["copy"]
    P_REAL = prims["real"]
    P_MATMUL = prims["matmul"]
    if P_MATMUL.saves[0] != (0, 1):     # defer_weight_gradient reads saved (x, y)
        raise RuntimeError("the engine expects matmul's rule to keep (x, y), not inputs %s"
                           % (P_MATMUL.saves[0],))


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


cdef object _fit(object g, Node p, Py_ssize_t oidx, Node consumer, Py_ssize_t i, bint create,
                 bint *allocated):
    """Sum ``g`` back to the shape of ``p``'s output ``oidx`` and cast it to its dtype
    (``*allocated``: see ``fit_gradient``; never set under ``create_graph``)."""
    allocated[0] = False
    if p.n_out == 1:
        shape = p.out_shape
        dtype = p.out_dtype
        if (not create and type(g) is NP_NDARRAY and type(shape) is tuple
                and <void *>cnp.PyArray_DESCR(<cnp.ndarray>g) == <void *>dtype
                and _has_shape(<cnp.ndarray>g, <tuple>shape)):
            return g            # already fits: what fit_gradient would return, sooner
    else:
        shape = p.out_shape[oidx]
        dtype = p.out_dtype[oidx]
    if create:
        if not isinstance(g, ndarray):
            if type(g) is FILLED and g.shape == shape and g.dtype == dtype:
                return g
            g = wrap(_asarray(g), None, 0)
        gshape = (<ndarray>g)._data.shape
        if gshape != shape:
            _check_fit(gshape, shape, consumer, i)
            g = P_SUM_TO.apply((g,), (shape,))
        if (<ndarray>g)._data.dtype != dtype:
            if (<ndarray>g)._data.dtype.kind == "c" and dtype.kind != "c":
                g = P_REAL.apply((g,), ())      # Note [Complex gradients] in _complex.py
            if (<ndarray>g)._data.dtype != dtype:
                g = P_CAST.apply((g,), (dtype,))
        return g
    return fit_gradient(g, shape, dtype, consumer, i, allocated)


cdef object fit_gradient(object g, tuple shape, object dtype, object site, Py_ssize_t i,
                         bint *allocated):
    """The first-order fit of Note [Accumulation]: the gradient ``g`` a rule returned, summed
    over the axes it was broadcast along to ``shape`` and cast to ``dtype``; a NumPy array,
    or a symbolic constant that already fits (Note [Filled gradients]). ``*allocated`` is set
    when the result is an array this call made (a sum, a cast), which the pass then owns (Note
    [Gradient buffer ownership]). ``site`` (a ``Node``, or a plan step) names the op in errors.
    Shared by the engine and the executor's replay (``_plan.pyx``)."""
    allocated[0] = False
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


cdef object fit_gradient_like(object g, object like, object site, Py_ssize_t i,
                              bint *allocated):
    """``fit_gradient`` to the shape and dtype of the array ``like`` (the executor's replay
    has the input's value at hand), compared in C first, so a gradient that already fits
    costs no shape tuple."""
    if type(like) is not NP_NDARRAY:
        like = _asarray(like)
    if (type(g) is NP_NDARRAY and same_layout(<cnp.ndarray>g, <cnp.ndarray>like)):
        allocated[0] = False
        return g
    return fit_gradient(g, (<object>like).shape, (<object>like).dtype, site, i,
                        allocated)


cdef inline bint _has_shape(cnp.ndarray a, tuple shape) except -1:
    """Whether ``a.shape == shape``, without building the shape tuple."""
    cdef int k, nd = cnp.PyArray_NDIM(a)
    if nd != PyTuple_GET_SIZE(shape):
        return False
    for k in range(nd):
        if cnp.PyArray_DIMS(a)[k] != <cnp.npy_intp><object>PyTuple_GET_ITEM(shape, k):
            return False
    return True


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


cdef bint rule_result_owned(object r, tuple args, tuple grads, Py_ssize_t i):
    """Whether ``r``, the gradient a table rule called with ``args`` returned for its input
    ``i`` (``grads`` is all it returned), is an array the rule made and no longer holds, so
    that the pass owns it from now on (Note [Gradient buffer ownership]).

    A table rule is a pure function of its arguments: what it returns is one of them (``g``
    passed through), a view, or an array it computed. So a writeable base array that is none
    of the arguments (looked into one level of tuples: multi-output ``g`` and ``result``) and
    is not also returned for another input is the rule's own."""
    return _result_owned(r, PySequence_Fast_ITEMS(args), PyTuple_GET_SIZE(args), grads, i)


cdef bint _result_owned(object r, PyObject **args, Py_ssize_t nargs, tuple grads,
                        Py_ssize_t i):
    """``rule_result_owned`` with the rule's arguments as the C array it was called with."""
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


cdef object add_gradient(object acc, bint acc_owned, object g, bint g_owned, bint *owned):
    """``acc + g`` for first-order accumulation (Note [Accumulation]): in place into ``acc``
    when the pass owns it, else into ``g`` when the pass owns that, else a new array, which
    the pass then owns (``*owned``). Large in-place additions go through ``add_into`` (Note
    [Large-array kernels] in _large/__init__.py), and so do large out-of-place sums. Shared
    by the engine and the executor's replay."""
    owned[0] = True
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


cdef bint deferrable_product(object x, object y, object g) except -1:
    """Whether the gradient of ``matmul(x, y)`` for ``y``, given ``g``, may be deferred (Note
    [Deferred weight gradients] in _kernels.py): NumPy matrices of one real floating dtype,
    ``x`` with few rows."""
    cdef int t
    if type(x) is not NP_NDARRAY or type(y) is not NP_NDARRAY or type(g) is not NP_NDARRAY:
        return False
    if (cnp.PyArray_NDIM(<cnp.ndarray>x) != 2 or cnp.PyArray_NDIM(<cnp.ndarray>y) != 2
            or cnp.PyArray_NDIM(<cnp.ndarray>g) != 2
            or cnp.PyArray_DIM(<cnp.ndarray>x, 0) > _DEFERRED_MAX_ROWS):
        return False
    t = cnp.PyArray_TYPE(<cnp.ndarray>x)
    return ((t == cnp.NPY_FLOAT or t == cnp.NPY_DOUBLE)
            and cnp.PyArray_TYPE(<cnp.ndarray>y) == t and cnp.PyArray_TYPE(<cnp.ndarray>g) == t)


cdef dict keep_product(dict deferred, Py_ssize_t key, object x, object g):
    """Add ``(x, g)`` to the products deferred for ``key`` (Note [Deferred weight gradients]
    in _kernels.py); returns ``deferred``, made if it was None."""
    if deferred is None:
        deferred = {}
    pending = deferred.get(key)
    if pending is None:
        pending = ([], [])
        deferred[key] = pending
    (<list>pending[0]).append(x)
    (<list>pending[1]).append(g)
    return deferred


cdef object summed_weight_gradients(list xs, list gs, dict memo):
    """The deferred products' sum (Note [Deferred weight gradients] in _kernels.py)."""
    return _summed_weight_gradients(xs, gs, memo)


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


cdef tuple complete_gradients(object g, Py_ssize_t n_out, object shapes, object dtypes):
    """The per-output gradients of a multi-output op, with symbolic zeros (Note [Zero
    gradients] in _zeros.py) for the outputs no gradient reached. Shared with the executor."""
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
            return      # a zero stays symbolic: reading .grad makes the zeros (Note [Zero gradients])
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
# of additions. Its checks (a released node, modified saved values) and what ``_deliver`` is
# given (the rule's argument ``g``, for the ownership of Note [Gradient buffer ownership]) are
# those of the rule's call. Under ``create_graph`` the graph binding's rule runs as for any op.
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
    OWNED = 4           # its accumulated gradient is a buffer this pass allocated
    DEFERRED = 8        # it has deferred weight-gradient products (Note [Deferred weight
                        # gradients] in _kernels.py)


cdef struct Slot:
    PyObject *node          # the node (a reference the pass owns)
    PyObject *acc           # the gradient accumulated so far (owned), or NULL
    long long seq           # node.seq, for sorting in C
    Py_ssize_t deps         # consumers not yet run in this pass
    unsigned char flags     # NEEDED | TARGET | OWNED


cdef int _by_seq(const void *a, const void *b) noexcept nogil:
    cdef long long sa = (<const Slot *>a).seq, sb = (<const Slot *>b).seq
    return (sa > sb) - (sa < sb)


@cython.final
cdef class _Pass:
    """The state of one backward pass (Note [Pass state]): per visited node a slot with the
    node, its dependency count, flags and accumulated gradient; the ready heap; the memo."""

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
    cdef dict deferred              # slot -> ([x, ...], [g, ...]): Note [Deferred weight
    cdef dict stacked               # gradients] in _kernels.py; the stacked rows' memo
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
            Py_XDECREF(slots[k].acc)
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
        self.slots[k].acc = NULL
        self.slots[k].seq = n.seq
        self.slots[k].deps = 0
        self.slots[k].flags = NEEDED
        self.n = k + 1
        if n.epoch == 0:
            n.epoch = self.epoch       # no Python code between the test and the claim
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
            if child + 1 < n and self.slots[self.work[child + 1]].seq > self.slots[self.work[child]].seq:
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
            Py_XDECREF(slots[k].acc)
            slots[k].node = NULL
            Py_DECREF(n)                # n still holds its own reference until it goes
        self.deferred = None
        self.stacked = None

    cdef inline object take_acc(self, Py_ssize_t k):
        """The gradient accumulated for slot ``k``, which the slot no longer holds."""
        cdef PyObject *p = self.slots[k].acc
        if p == NULL:
            return None
        self.slots[k].acc = NULL
        g = <object>p
        Py_DECREF(g)                   # the slot's reference is now g's
        return g

    cdef inline void set_acc(self, Py_ssize_t k, object g) noexcept:
        cdef PyObject *old = self.slots[k].acc
        Py_INCREF(g)
        self.slots[k].acc = <PyObject *>g
        Py_XDECREF(old)

    cdef void accumulate(self, Node p, Py_ssize_t slot, Py_ssize_t oidx, object g,
                         bint g_owned) except *:
        """Add the gradient ``g`` for output ``oidx`` of ``p`` to its slot (Note
        [Accumulation]); ``g_owned``: the pass owns ``g`` (Note [Gradient buffer ownership])."""
        cdef object acc
        cdef bint owned
        cdef PyObject *held = self.slots[slot].acc
        if p.n_out == 1:
            if held == NULL:
                self.set_acc(slot, g)
                if g_owned:
                    self.slots[slot].flags |= OWNED
                else:
                    self.slots[slot].flags &= ~OWNED
                return
            acc = <object>held
            if self.create:
                self.set_acc(slot, P_ADD.apply((acc, g), ()))
                return
            acc = add_gradient(acc, (self.slots[slot].flags & OWNED) != 0, g, g_owned, &owned)
            self.set_acc(slot, acc)
            self.slots[slot].flags |= OWNED
            return
        # A multi-output node keeps a list per slot, with no ownership: later contributions
        # are added out of place.
        if held == NULL:
            accs = [None] * p.n_out
            self.set_acc(slot, accs)
        else:
            accs = <object>held
        acc = accs[oidx]
        if acc is None:
            accs[oidx] = g
        elif self.create:
            accs[oidx] = P_ADD.apply((acc, g), ())
        else:
            accs[oidx] = add_gradient(acc, False, g, False, &owned)

    cdef bint defer_weight_gradient(self, Node n, object g) except -1:
        """Keep the gradient of ``n`` (a matmul) for its right operand, a variable, to be
        summed with the variable's other products in one (Note [Deferred weight gradients] in
        _kernels.py); False leaves it to the rule."""
        cdef object obj = <object>PyTuple_GET_ITEM(n.parents, 1)
        cdef Node p
        cdef Py_ssize_t slot
        if obj is None or is_anomaly_c():
            return False
        p = <Node>obj
        if not _acts_as_leaf(p):
            return False
        slot = self.slot_of(p)
        if not self.slots[slot].flags & DEFERRED and self.slots[slot].deps <= 1:
            return False                # its only consumer left: nothing to stack with
        cdef tuple saved = n.saved
        if n.released or saved is None:
            return False                # the rule's path raises the error
        x = <object>PyTuple_GET_ITEM(saved, 0)
        y = <object>PyTuple_GET_ITEM(saved, 1)
        if isinstance(x, ndarray):
            x = (<ndarray>x)._data
        if isinstance(y, ndarray):
            y = (<ndarray>y)._data
        if not deferrable_product(x, y, g):
            return False
        _check_versions(n, saved)
        self.deferred = keep_product(self.deferred, slot, x, g)
        self.slots[slot].flags |= DEFERRED
        return True

    cdef void add_deferred(self, Node p, Py_ssize_t slot) except *:
        """Add the deferred products of ``p`` (Note [Deferred weight gradients] in
        _kernels.py) to its gradient, as one product."""
        xs, gs = self.deferred.pop(slot)
        self.slots[slot].flags &= ~DEFERRED
        if self.stacked is None:
            self.stacked = {}
        self.accumulate(p, slot, 0, _summed_weight_gradients(xs, gs, self.stacked), True)

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


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _deliver(_Pass ps, Node n, tuple grads, PyObject **args, Py_ssize_t nargs, object g,
                   bint g_owned) except *:
    """Fit the gradients ``n``'s rule returned (``grads``; ``args`` its ``nargs`` arguments,
    NULL for a ``Function``) to its inputs and add each to its parent's slot, with the ownership of Note
    [Gradient buffer ownership]. ``g_owned``: the pass owns ``g``, the gradient the table rule
    received; a rule that passes it on unchanged (``add``) then hands the pass's buffer on, and
    the one slot that keeps it as it is owns it (two that keep it share it: neither does)."""
    cdef tuple parents = n.parents
    cdef Py_ssize_t i, k, pslot, nparents = PyTuple_GET_SIZE(parents), holders = 0
    cdef bint create = ps.create, prune = ps.prune, allocated, owned, passed = False
    cdef tuple poidx = n.parent_oidx
    cdef Node p
    cdef object obj, gi, fitted
    cdef list fits = None
    cdef unsigned long long fit_alloc = 0     # bit i: fits[i] was allocated (i < 64)
    if g_owned:
        for i in range(nparents):
            if PyTuple_GET_ITEM(grads, i) == <PyObject *>g:
                passed = True
                break
    if passed:
        # Fit every gradient first, to count the slots that will hold g itself.
        fits = [None] * nparents
        for i in range(nparents):
            obj = <object>PyTuple_GET_ITEM(parents, i)
            gi = <object>PyTuple_GET_ITEM(grads, i)
            if obj is None or gi is None:
                continue
            p = <Node>obj
            if (prune and not ps.slots[ps.slot_of(p)].flags & NEEDED) or p.zero:
                continue
            k = 0 if poidx is None else <Py_ssize_t>poidx[i]
            fitted = _fit(gi, p, k, n, i, create, &allocated)
            # A bit per input, a tuple past 63 (a bytearray for all was measured: W1 +1.1%
            # instructions).
            if i < 64:
                fits[i] = fitted
                fit_alloc |= (<unsigned long long>allocated) << i
            else:
                fits[i] = (fitted, allocated)
            if fitted is g:
                holders += 1
    for i in range(nparents):
        obj = <object>PyTuple_GET_ITEM(parents, i)
        if obj is None:
            continue
        p = <Node>obj
        pslot = ps.slot_of(p)
        if (prune and not ps.slots[pslot].flags & NEEDED) or p.zero:
            continue
        gi = <object>PyTuple_GET_ITEM(grads, i)
        if gi is None:
            continue
        k = 0 if poidx is None else <Py_ssize_t>poidx[i]
        if fits is None:
            fitted = _fit(gi, p, k, n, i, create, &allocated)
        elif i < 64:
            fitted = fits[i]
            allocated = (fit_alloc >> i) & 1
            fits[i] = None
        else:
            fitted, allocated = <tuple>fits[i]
            fits[i] = None
        # The pass owns what it allocated, what a table rule made for this input alone, and
        # its own g passed on to this input alone.
        owned = allocated or (args != NULL and fitted is gi and not create and (
            _result_owned(gi, args, nargs, grads, i) or (fitted is g and holders == 1)))
        gi = None
        ps.accumulate(p, pslot, k, fitted, owned)
        fitted = None


def run_backward(list heads, list head_grads, list variables, bint retain_graph,
                 bint create_graph, bint train_mode, bint allow_unused=False):
    """Run one backward pass (internal; see ``fastgrad.autograd.backward`` and ``grad``).

    With ``variables=None`` the gradients are written into the variables' ``.grad`` buffers;
    otherwise they are returned, one per variable, and no ``.grad`` is touched.
    """
    global _epoch
    if head_grads is not None and len(head_grads) != len(heads):
        raise ValueError("backward: got %d heads but %d head gradients"
                         % (len(heads), len(head_grads)))
    cdef _Pass ps = _Pass.__new__(_Pass)
    _epoch += 1                     # under the GIL: no two passes get the same epoch
    ps.epoch = _epoch
    ps.create = create_graph
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
    cdef bint create = ps.create
    cdef long long start_seq = last_seq()       # nodes after it are made by this pass
    cdef list seeds = []
    cdef list freed = []
    cdef Node n, p
    cdef ndarray h
    cdef Py_ssize_t i, k, nparents, slot, pslot
    cdef object obj, g, gi, grads
    cdef bint prune = ps.prune
    cdef tuple parents, poidx
    cdef unsigned long long mask
    cdef bint owned, allocated
    cdef object fitted, needs = None
    cdef PyObject *argv[RULE_ARGV]          # Note [Rule arguments]
    cdef PyObject **rargs
    cdef Py_ssize_t nargs
    cdef tuple spill

    for i in range(len(heads)):
        obj = heads[i]
        if not isinstance(obj, ndarray):
            raise TypeError("backward: head %d is a %s, not a fastgrad array"
                            % (i, type(obj).__name__))
        h = <ndarray>obj
        if h._node is None:
            if prune and allow_unused:
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
                "detach())%s" % (i, "" if not prune else
                                 "; pass allow_unused=True to grad() to get zeros for it"))
        g = _head_grad(h, head_grads[i] if head_grads is not None else None, i, create)
        seeds.append((h._node, h._oidx, g))
        if ps.slot_of(h._node) < 0:
            ps.visit(h._node)

    # Walk the graph; count the consumers of every node (Note [Scheduling]).
    while ps.nwork:
        ps.nwork -= 1
        n = <Node>ps.slots[ps.work[ps.nwork]].node
        if _acts_as_leaf(n):
            continue
        if n.released:
            if not prune:
                raise MXNetError(_released_message(n))
            freed.append(n)     # an error only if its rule would run (checked after pruning)
        for obj in n.parents:
            if obj is None:
                continue
            p = <Node>obj
            pslot = ps.slot_of(p)
            if pslot < 0:
                pslot = ps.visit(p)
            ps.slots[pslot].deps += 1

    cdef list targets = None
    if prune:
        ps.order_by_seq()
        targets = []
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

    cdef dict captured = {} if prune else None
    for obj in seeds:
        n = <Node>obj[0]
        slot = ps.slot_of(n)
        if ps.slots[slot].flags & NEEDED:
            ps.accumulate(n, slot, obj[1], obj[2], False)
    for obj in seeds:
        n = <Node>obj[0]
        slot = ps.slot_of(n)
        if ps.slots[slot].flags & NEEDED and ps.slots[slot].deps == 0:
            ps.slots[slot].deps = -1
            ps.heap_push(slot)
    seeds = None

    while ps.nwork:
        slot = ps.heap_pop()
        n = <Node>ps.slots[slot].node
        if ps.slots[slot].flags & DEFERRED:
            ps.add_deferred(n, slot)
        owned = (ps.slots[slot].flags & OWNED) != 0
        g = ps.take_acc(slot)
        if prune:
            if ps.slots[slot].flags & TARGET:
                captured[n] = (g, owned)
                owned = False               # handed out to grad()'s caller
        elif n.var_refs is not None:
            # A variable's gradient the pass owns becomes its .grad buffer (handed out).
            _write_vars(n, g, n.op is None and owned)
        if _acts_as_leaf(n):
            continue
        parents = n.parents
        nparents = PyTuple_GET_SIZE(parents)
        # The rule's ``needs``: one bit per input that wants a gradient, however many.
        mask = 0
        needs = None
        for i in range(nparents):
            obj = <object>PyTuple_GET_ITEM(parents, i)
            if obj is not None and not (<Node>obj).zero and (
                    not prune or ps.slots[ps.slot_of(<Node>obj)].flags & NEEDED):
                if i < 63:
                    mask |= (<unsigned long long>1) << i
                else:
                    needs = (mask if needs is None else needs) | ((<object>1) << i)  # a Python int
        if needs is None and mask:
            needs = mask
        if (mask & 2 and n.op is P_MATMUL and not create and g is not None
                and ps.defer_weight_gradient(n, g)):
            mask &= ~(<unsigned long long>2)
            needs = mask if mask else None
        if needs is not None and g is not None and not n.zero:
            nargs = 0
            rargs = NULL
            spill = None
            try:
                if type(n.op) is Primitive and (<Primitive>n.op).passes_g and not create:
                    grads = _passed_on(n, g, mask, nparents, argv, &nargs)
                    rargs = &argv[0]
                elif type(n.op) is Primitive:
                    spill = _rule_argv(n, g, needs, create, argv, &nargs)
                    if spill is None:
                        rargs = &argv[0]
                    else:
                        rargs = PySequence_Fast_ITEMS(spill)
                    grads = _call_rule(n, rargs, nargs, create)
                else:
                    # A Function or a custom op: its backward is user code, which may keep the
                    # gradient it receives and the arrays it returns.
                    grads = tuple(n.op.node_backward(n, g, needs, create))
                    if prune and ps.slots[slot].flags & TARGET:
                        captured[n] = (captured[n][0], False)
                if PyTuple_GET_SIZE(grads) != nparents:
                    raise RuntimeError("fastgrad.%s: its derivative rule returned %d gradients "
                                       "for %d inputs" % (n.op.name, len(grads), nparents))
                if is_anomaly_c():
                    _anomaly_report(n, grads)
                _deliver(ps, n, grads, rargs, nargs, g,
                         owned and rargs != NULL and not create)
            finally:
                if rargs == &argv[0]:
                    for i in range(nargs):
                        Py_XDECREF(argv[i])
                rargs = NULL
                spill = None
            grads = None          # release the rule's results as soon as they are delivered
        g = None
        if not retain and not n.zero:     # a zero node holds nothing a rule needs
            n.saved = None
            n.result = None
            n.consts = None
            n.released = True
            if type(n.op) is not Primitive:
                n.op.release()
        for i in range(nparents):
            obj = <object>PyTuple_GET_ITEM(parents, i)
            if obj is None:
                continue
            p = <Node>obj
            pslot = ps.slot_of(p)
            if prune and not ps.slots[pslot].flags & NEEDED:
                continue
            ps.slots[pslot].deps -= 1
            if ps.slots[pslot].deps == 0:
                ps.heap_push(pslot)

    if not prune:
        return None
    return _collect(ps, variables, targets, captured, create, start_seq)


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
