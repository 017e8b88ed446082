"""The persistent tape of a bound symbol (``Executor``).

Note [Executor plan]
~~~~~~~~~~~~~~~~~~~~
Binding turns the symbol into a *plan* once. Every output of every symbol node gets a *slot*
in a list of values, and the nodes become *steps* in creation order (Note [Symbol graph] in
``symbol/_graph.py``):

* an argument's slot is filled from its bound array at each forward;
* constants, and primitives that depend on no argument, are computed once at bind (constant
  folding) and never again;
* every other primitive is a ``Step`` that calls its NumPy kernel on the values of its input
  slots and stores what it returns in its output slots;
* a composition (``npx.softmax``, ``npx.dropout``, ...) is a step that calls its function on
  fastgrad arrays, recorded on a small tape of its own when a gradient will be needed.

The backward pass is *not* a second implementation: the plan is a tape of ordinary ``Node``
objects (Note [The tape] in ``_node.pyx``), built once at bind and run by the engine of
``_engine.pyx`` like any recorded graph. Each argument that wants a gradient gets a leaf node,
held by an internal array whose ``.grad`` is the executor's gradient buffer with the
argument's ``grad_req``; each step through which a gradient flows gets a node whose parents are
the nodes of the inputs that need one, exactly as ``Primitive._record`` would link them. The
forward pass refreshes, in place, what a node holds for its rule: ``saved`` (the raw values of
the inputs the rule reads, then the shapes it reads, in rule order), ``result`` and the
output's shape and dtype. Nothing is allocated per step but the kernel's outputs and that
tuple. ``backward`` then calls ``run_backward`` on arrays sitting on the output nodes, with
``retain_graph`` so that the tape survives for the next call.

Because the nodes are created in the order of the symbol's operations, their ``seq`` order is
the order in which the same program records them imperatively, the engine schedules them the
same way, calls the same rules with the same arguments and input masks, and accumulates the
contributions in the same order: the executor's gradients equal the imperative ones bit for
bit (``tests/test_executor.py`` checks it). A composite step's node has an op object with
``node_backward`` (the protocol of custom ``Function`` nodes): it runs the engine over the
step's own small tape, so a composite whose input also feeds other steps may round its input's
gradient differently from a fully imperative tape (the composite's contributions are summed
first, then added).
"""

cimport cython
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM, PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.list cimport PyList_GET_ITEM
from cpython.ref cimport Py_INCREF
cimport numpy as cnp
from fastgrad._node cimport Node, new_node, new_leaf
from fastgrad._array cimport ndarray, Primitive, wrap, GRAD_WRITE, GRAD_ADD
from fastgrad._state cimport set_recording_c, set_training_c, is_training_c

import weakref
import numpy as _np

from fastgrad._array import parse_grad_req
from fastgrad._engine import run_backward
from fastgrad.symbol._graph import topo_nodes, run_composite
from fastgrad.symbol._ops import VARIABLE, CONSTANT, is_primitive

cnp.import_array()

cdef type NP_NDARRAY = _np.ndarray
cdef object _asarray = _np.asarray
cdef object _nparray = _np.array
cdef object _copyto = _np.copyto
cdef object _npshape = _np.shape
cdef object _EMPTY = _np.empty(0)


@cython.final
cdef class _Composite:
    """The op of a composite step's node: differentiates the step's own small tape."""

    def __init__(self, str name, Py_ssize_t n_in, Py_ssize_t n_out):
        self.name = name
        self.n_in = n_in
        self.n_out = n_out
        self.tape = None

    def node_backward(self, node, g, needs, create_graph):
        cdef list res = [None] * self.n_in
        if self.tape is None:
            return tuple(res)
        variables, outs = self.tape
        gs = [g] if self.n_out == 1 else list(g)
        heads = []
        hgs = []
        for o, gk in zip(outs, gs):
            if gk is not None and (<ndarray>o)._node is not None:
                heads.append(o)
                hgs.append(gk)
        if not heads:
            return tuple(res)
        # The tape is kept (retain_graph) so that backward can run again before a forward.
        grads = run_backward(heads, hgs, [a for _, a in variables], True, False,
                             bool(is_training_c()), True)
        for (i, _), gr in zip(variables, grads):
            if needs & (1 << i if i < 30 else 1 << 30):
                res[i] = (<ndarray>gr)._data
        return tuple(res)

    def release(self):
        self.tape = None


@cython.final
cdef class Step:
    """One operation of a plan (internal; see Note [Executor plan])."""

    @property
    def tape_node(self):
        """The step's node on the plan's tape (``None`` when no gradient flows through it)."""
        return self.node


cdef inline object _slot(list vals, tuple idx, Py_ssize_t i):
    return <object>PyList_GET_ITEM(vals, <Py_ssize_t><object>PyTuple_GET_ITEM(idx, i))


cdef inline object _as_np(object v):
    return v if type(v) is NP_NDARRAY else _asarray(v)


cdef bint _same_layout(cnp.ndarray a, cnp.ndarray b):
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


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _run_primitive(Step st, list vals) except *:
    cdef Py_ssize_t i, n_in = st.n_in, npar = PyTuple_GET_SIZE(st.params), ns, nsh
    cdef tuple args = PyTuple_New(n_in + npar)
    cdef tuple saved
    cdef object v, out
    cdef Node node
    for i in range(n_in):
        v = _slot(vals, st.ins, i)
        Py_INCREF(v)
        PyTuple_SET_ITEM(args, i, v)
    for i in range(npar):
        v = <object>PyTuple_GET_ITEM(st.params, i)
        Py_INCREF(v)
        PyTuple_SET_ITEM(args, n_in + i, v)
    out = st.kernel(*args)
    if st.n_out == 1:
        if type(out) is not NP_NDARRAY:
            out = _asarray(out)
        vals[<Py_ssize_t><object>PyTuple_GET_ITEM(st.outs, 0)] = out
    else:
        out = tuple([_as_np(o) for o in out])
        if PyTuple_GET_SIZE(out) != st.n_out:
            raise ValueError("%s (op %s) produced %d outputs, its node declares %d"
                             % (st.name, st.kernel.__name__, len(out), st.n_out))
        for i in range(st.n_out):
            vals[<Py_ssize_t><object>PyTuple_GET_ITEM(st.outs, i)] = \
                <object>PyTuple_GET_ITEM(out, i)
    node = st.node
    if node is None:
        return
    # Refresh what the rule reads, as Primitive._record stores it: inputs, then shapes.
    ns = PyTuple_GET_SIZE(st.saved_slots)
    nsh = PyTuple_GET_SIZE(st.shape_slots)
    if ns or nsh:
        saved = PyTuple_New(ns + nsh)
        for i in range(ns):
            v = _slot(vals, st.saved_slots, i)
            Py_INCREF(v)
            PyTuple_SET_ITEM(saved, i, v)
        for i in range(nsh):
            v = _slot(vals, st.shape_slots, i)
            v = v.shape if type(v) is NP_NDARRAY else _npshape(v)
            Py_INCREF(v)
            PyTuple_SET_ITEM(saved, ns + i, v)
        node.saved = saved
    if st.save_result:
        node.result = out
    if st.n_out == 1:
        node.out_shape = out.shape
        node.out_dtype = out.dtype
    else:
        node.out_shape = tuple([o.shape for o in out])
        node.out_dtype = tuple([o.dtype for o in out])


cdef void _run_composite(Step st, list vals) except *:
    cdef Py_ssize_t i
    cdef ndarray a
    cdef Node node = st.node
    inputs = []
    variables = []
    for i in range(st.n_in):
        a = wrap(_slot(vals, st.ins, i), None, 0)
        if (node is not None and <object>PyTuple_GET_ITEM(node.parents, i) is not None
                and a._data.dtype.kind in "fc"):
            # A fresh variable of the step's own tape (its gradient is returned, not stored).
            a._node = new_leaf(a._data.shape, a._data.dtype, None)
            variables.append((i, a))
        inputs.append(a)
    cdef int prev = set_recording_c(1 if variables else 0)
    try:
        outs = run_composite(st.kernel, st.name, st.params, inputs, st.n_out)
    finally:
        set_recording_c(prev)
    for i in range(st.n_out):
        vals[<Py_ssize_t><object>PyTuple_GET_ITEM(st.outs, i)] = (<ndarray>outs[i])._data
    if node is None:
        return
    st.composite.tape = (variables, outs) if variables else None
    if st.n_out == 1:
        node.out_shape = (<ndarray>outs[0])._data.shape
        node.out_dtype = (<ndarray>outs[0])._data.dtype
    else:
        node.out_shape = tuple([(<ndarray>o)._data.shape for o in outs])
        node.out_dtype = tuple([(<ndarray>o)._data.dtype for o in outs])


def _diff_flag(Primitive prim, Py_ssize_t i):
    if prim.n_in < 0:
        return prim.diff[0] if prim.diff else 1
    return prim.diff[i]


@cython.final
cdef class Plan:
    """Slots, steps and the persistent tape of a bound symbol (Note [Executor plan]).

    ``arg_arrays`` and ``grad_arrays`` are the executor's lists (one entry per argument of
    ``arg_names``); ``reqs`` the arguments' ``grad_req``. The plan reads the arguments' values
    from ``arg_arrays`` at each forward, so replacing an entry of that list is seen.
    """

    def __init__(self, symbol, list arg_names, list reqs, list arg_arrays, list grad_arrays,
                 list own_grads, type out_cls):
        cdef ndarray sink
        cdef Node leaf, node
        cdef Step st
        self.values = []
        self.steps = []
        self.arg_arrays = arg_arrays
        self.out_cls = out_cls
        self.outputs = None
        n_args = len(arg_names)
        index = {n: i for i, n in enumerate(arg_names)}
        arg_slots = [None] * n_args
        self.leaves = [None] * n_args
        self.sinks = [None] * n_args
        slot = {}
        static = []       # per slot: a value fixed at bind
        links = []        # per slot: (node, output index) when a gradient flows through it
        values = self.values

        def new_slot(value, is_static, link):
            values.append(value)
            static.append(is_static)
            links.append(link)
            return len(values) - 1

        for snode in topo_nodes(symbol._entries):
            if snode.op == VARIABLE:
                k = index[snode.name]
                link = None
                if reqs[k] != "null" and grad_arrays[k] is not None:
                    data = (<ndarray>arg_arrays[k])._data
                    sink = wrap(data, None, 0)
                    leaf = new_leaf(data.shape, data.dtype, weakref.ref(sink))
                    sink._node = leaf
                    self.leaves[k] = leaf
                    self.sinks[k] = sink
                    self._attach(k, grad_arrays[k], reqs[k], own_grads[k])
                    link = (leaf, 0)
                s = new_slot(None, False, link)
                slot[(snode.id, 0)] = s
                arg_slots[k] = s
                continue
            if snode.op == CONSTANT:
                slot[(snode.id, 0)] = new_slot(snode.value, True, None)
                continue
            fn = snode.fn
            ins = tuple([slot[(p.id, k)] for p, k in snode.inputs])
            n_out = snode.num_outputs
            st = Step.__new__(Step)
            st.name = snode.name
            st.ins = ins
            st.n_in = len(ins)
            st.n_out = n_out
            st.saved_slots = ()
            st.shape_slots = ()
            if is_primitive(fn):
                if all([static[s] for s in ins]):
                    with _np.errstate(all="ignore"):
                        out = fn.forward(*[values[s] for s in ins], *snode.params)
                    outs = [out] if fn.n_out == 1 else list(out)
                    if len(outs) != n_out:
                        raise ValueError("bind: %s (op %s) produced %d outputs, its node "
                                         "declares %d" % (snode.name, snode.op, len(outs), n_out))
                    for i, o in enumerate(outs):
                        slot[(snode.id, i)] = new_slot(_asarray(o), True, None)
                    continue
                parents = [None] * len(ins)
                oidx = None
                linked = False
                if fn.differentiable:
                    for i, s in enumerate(ins):
                        if links[s] is None:
                            continue
                        flag = _diff_flag(fn, i)
                        if flag == 1:
                            parents[i] = links[s][0]
                            if links[s][1]:
                                if oidx is None:
                                    oidx = [0] * len(ins)
                                oidx[i] = links[s][1]
                            linked = True
                        elif flag == -1:
                            raise NotImplementedError(
                                "bind: fastgrad.%s (node %r) has no derivative with respect "
                                "to its input %d, which depends on an argument that wants a "
                                "gradient; use grad_req='null' for it" % (fn.name, snode.name, i))
                st.kernel = fn.forward
                st.params = tuple(snode.params)
                if linked:
                    node = new_node(fn)
                    save_inputs, save_shapes, save_result = fn.saves
                    st.saved_slots = tuple([ins[j] for j in save_inputs])
                    st.shape_slots = tuple([ins[j] for j in save_shapes])
                    st.save_result = save_result
            else:
                parents = [links[s][0] if links[s] is not None else None for s in ins]
                oidx = None
                for i, s in enumerate(ins):
                    if links[s] is not None and links[s][1]:
                        if oidx is None:
                            oidx = [0] * len(ins)
                        oidx[i] = links[s][1]
                linked = any([p is not None for p in parents])
                st.kernel = fn
                st.params = snode.params
                st.composite = _Composite(snode.op, len(ins), n_out)
                if linked:
                    node = new_node(st.composite)
            if linked:
                node.parents = tuple(parents)
                node.parent_oidx = tuple(oidx) if oidx is not None else None
                node.params = st.params if is_primitive(fn) else ()
                node.saved = ()
                node.n_out = n_out
                st.node = node
            outs = tuple([new_slot(None, False, (node, i) if linked else None)
                          for i in range(n_out)])
            for i in range(n_out):
                slot[(snode.id, i)] = outs[i]
            st.outs = outs
            self.steps.append(st)

        self.arg_slots = tuple(arg_slots)
        self.out_slots = tuple([slot[(n.id, k)] for n, k in symbol._entries])
        self.heads = []
        self.grad_heads = []
        self.head_index = []
        for i, s in enumerate(self.out_slots):
            link = links[s]
            if link is None:
                self.heads.append(None)
                continue
            h = wrap(_EMPTY, <Node>link[0], link[1])
            self.heads.append(h)
            self.grad_heads.append(h)
            self.head_index.append(i)
        # Arguments that want a gradient but that no output reaches: 'write' gives zeros.
        reached = set()
        stack = [(<ndarray>h)._node for h in self.grad_heads]
        while stack:
            node = stack.pop()
            if id(node) in reached:
                continue
            reached.add(id(node))
            if node.parents is not None:
                stack.extend([p for p in node.parents if p is not None])
        self.zero_sinks = [sink for k, sink in enumerate(self.sinks) if sink is not None
                           and reqs[k] == "write" and id(self.leaves[k]) not in reached]
        self.any_grad = bool(self.grad_heads) or bool(self.zero_sinks)

    def _attach(self, Py_ssize_t k, grad, str req, bint own):
        """Make ``grad`` (an array) the gradient buffer of argument ``k``.

        A buffer the executor allocated (``own``) may take a gradient the pass computed
        instead of a copy of it, as ``attach_grad`` buffers do; an ``args_grad`` array keeps
        its memory.
        """
        cdef ndarray sink = <ndarray>self.sinks[k]
        sink._grad = grad
        sink._grad_req = parse_grad_req(req)
        sink._grad_swappable = own

    def set_grad(self, Py_ssize_t k, grad):
        """Argument ``k`` has a new gradient buffer of the executor's (a forward with a new
        shape)."""
        if self.sinks[k] is not None:
            (<ndarray>self.sinks[k])._grad = grad
            (<ndarray>self.sinks[k])._grad_swappable = True

    @property
    def steps_list(self):
        """The steps (for introspection and tests)."""
        return list(self.steps)

    @property
    def arg_leaves(self):
        """Per argument: its leaf node, or ``None`` when it wants no gradient."""
        return list(self.leaves)

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def forward(self, bint is_train):
        """Run every step and return the output arrays (reused while shapes do not change)."""
        cdef list vals = self.values
        cdef Py_ssize_t k, n = len(self.arg_slots)
        cdef ndarray a
        cdef Node leaf
        cdef Step st
        cdef int prev_train = set_training_c(is_train)
        cdef int prev_rec = set_recording_c(0)
        try:
            for k in range(n):
                a = <ndarray>self.arg_arrays[k]
                data = a._data
                vals[<Py_ssize_t><object>PyTuple_GET_ITEM(self.arg_slots, k)] = data
                obj = self.leaves[k]
                if obj is not None and (<ndarray>self.sinks[k])._data is not data:
                    # A new array (a forward with a new shape): the leaf follows it.
                    leaf = <Node>obj
                    leaf.out_shape = data.shape
                    leaf.out_dtype = data.dtype
                    (<ndarray>self.sinks[k])._data = data
            for obj in self.steps:
                st = <Step>obj
                if st.composite is None:
                    _run_primitive(st, vals)
                else:
                    _run_composite(st, vals)
        finally:
            set_recording_c(prev_rec)
            set_training_c(prev_train)
        return self._store_outputs()

    cdef list _store_outputs(self):
        cdef list vals = self.values
        cdef list outs = self.outputs
        cdef Py_ssize_t i, n = PyTuple_GET_SIZE(self.out_slots)
        cdef bint fresh = outs is None
        cdef ndarray o
        for i in range(n):
            v = _as_np(_slot(vals, self.out_slots, i))
            h = self.heads[i]
            if h is not None:
                (<ndarray>h)._data = v
            if not fresh:
                o = <ndarray>outs[i]
                if not _same_layout(o._data, v):
                    fresh = True
        if fresh:
            self.outputs = [wrap(_nparray(_slot(vals, self.out_slots, i)), None, 0,
                                 self.out_cls) for i in range(n)]
            # The default head gradients; the engine never writes into a head gradient.
            self.ones = [_np.ones_like((<ndarray>h)._data) for h in self.grad_heads]
            return self.outputs
        for i in range(n):
            if cnp.PyArray_CopyInto((<ndarray>outs[i])._data,
                                    _as_np(_slot(vals, self.out_slots, i))) < 0:
                raise RuntimeError("forward: could not copy output %d" % i)
        return outs

    def backward(self, list head_grads, bint train_mode):
        """Run the engine over the plan's tape; fill the gradient buffers.

        ``head_grads``: one gradient (or ``None`` for ones) per output, or ``None``.
        """
        cdef ndarray buf
        if self.grad_heads:
            if head_grads is None:
                hg = self.ones
            else:
                hg = [head_grads[i] for i in self.head_index]
            run_backward(self.grad_heads, hg, None, True, False, train_mode, False)
        for sink in self.zero_sinks:
            buf = <ndarray>(<ndarray>sink)._grad
            buf._data[...] = 0
            buf._version += 1
