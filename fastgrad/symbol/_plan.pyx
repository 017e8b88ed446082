"""The plan of a bound symbol (``Executor``): its forward schedule and its backward replay.

Note [Executor plan]
~~~~~~~~~~~~~~~~~~~~
Binding turns the symbol into a *plan* once. Every output of every symbol node gets a *slot*
in a list of values, and the nodes become *steps* in creation order (Note [Symbol graph] in
``symbol/_graph.py``):

* an argument's slot is filled from its bound array at each forward;
* constants, and primitives that depend on no argument, are computed once at bind (constant
  folding) and never again;
* every other primitive is a ``Step`` that calls its NumPy kernel on the values of its input
  slots and stores what it returns in its output slots (a ufunc of a large array through the
  large-array kernels, as ``Primitive.apply`` calls it for the tape: Note [Large-array
  kernels] in ``_large``);
* a composition (``npx.softmax``, ``npx.dropout``, ...) is a step that calls its function on
  fastgrad arrays, recorded on a small tape of its own when a gradient will be needed.

A slot *is linked* when a gradient flows through it: the slot of an argument that wants one,
and the outputs of a step with a linked input (through an input the op can differentiate).
A linked step knows at bind everything the engine of ``_engine.pyx`` works out per pass for a
recorded node: the mask of the inputs that want a gradient (``needs``), the slots of the
inputs its rule reads by value and by shape, whether it reads the result, and for every input
the slot its gradient goes to. The forward pass runs kernels and nothing else: the values the
rule reads stay in their slots until the next forward.

Note [Backward replay]
~~~~~~~~~~~~~~~~~~~~~~
``backward`` replays the linked steps in reverse creation order over per-slot entries of a
``GradientBuffer``, without a graph walk, a heap, dependency counts or tape nodes. That is
exactly the engine's order for the same program recorded imperatively: the engine runs the
ready node with the largest ``seq`` first, and the unrun node with the largest ``seq`` is
always ready (all its consumers come after it), so it runs the nodes in decreasing ``seq``,
which for a tape recorded in the symbol's order is reverse creation order. Within a step the
input gradients are delivered in input order and the head gradients are seeded first in output
order. The rule is the binding the engine's ``_call_rule`` would run (the large-array kernels'
for a large gradient: Note [Bindings] in ``_bindings.py``).

The replay's loop is the engine's loop over that fixed order: take the step's gradient from
the plan's ``GradientBuffer``, call its rule, hand the gradients to the buffer
(``deliver``), which fits, owns, adds and defers them exactly as for a tape (Note [Gradient
buffers] in ``_engine.pyx``); a step's ``Dest`` entries name the slots its inputs' gradients
go to, fitted to the values in those slots. A step whose op declares a deferred product
defers it where the engine would (``Step.defer_left``, worked out at bind). So each gradient
is the same sum of the same terms in the same order, by the same code, as imperatively, and
the executor's gradients equal the imperative ones bit for bit
(``tests/symbol/test_executor_core.py``).

Each argument's gradient is then written by the engine's ``write_grad_buffer``: ``'write'``
copies it into the buffer, or makes the buffer take the pass's own array when the executor
allocated that buffer; ``'add'`` adds into it; an argument that wants a gradient but gets none
(no output reaches it, or every path carries ``None``) gets zeros under ``'write'``. The
default head gradients (ones) are allocated when the outputs' shapes change, not per call;
they are never written into, because a seed is never owned by the pass. What stays the
plan's own is the compiled forward schedule, the slots it reuses, constant folding and the
merging of equal steps (``Executor.get_optimized_symbol``).

Note [Slot lifetimes]
~~~~~~~~~~~~~~~~~~~~~
Forward keeps a slot's value after the pass only when something reads it later: the outputs,
and the values the backward replay reads (the inputs a linked step's rule takes, its result
when the rule reads it). Any other value a step makes is dropped right after the last step
that reads it (``Step.released``), so an inference plan (``grad_req='null'``) holds about one
intermediate at a time instead of all of them, as NumPy code would. The values kept are
dropped at the start of the next forward, before the steps make new ones.

Of some values backward needs the shape and dtype alone: every input a gradient flows to
(the gradient is summed back and cast to it), the inputs whose shape a rule takes, the outputs
of a multi-output step (its unreached outputs' zeros). Forward records those two facts
(``Step.described``, ``Plan.shapes``, ``Plan.dtypes``) and drops such a value like any other,
as the tape's nodes keep shapes and dtypes instead of arrays. Keeping them instead held
every intermediate of a training step until the next forward: the sums ``x @ Wx + h @ Wh``
of an LSTM and their four views, which no rule reads, were most of what its plan kept
(docs/benchmarks.rst, issue 27).

What backward reads stays until the next forward, because ``Executor.backward`` may run again
from the same forward (MXNet's executor allows it). The tape frees a node's saved values once
its rule has run, so its backward writes into memory it has just read, where the executor's
writes into more. A caller that will not run backward again passes ``release``: each replayed
step then drops the slots it is the last to read (``Step.freed``), and the next backward
without a forward raises. Gluon's hybridized blocks do, when the tape's pass does not retain
the graph (``_Pass.retain``): that pass frees their node right after anyway.

Forward and backward allocate through the buffer cache of the large-array kernels (Note
[Buffer cache] in ``_large/pool.h``; ``use_buffer_cache``): dropping a step's worth of values
at once made glibc give their memory back to the system, and every step page-faulted it in
again (docs/benchmarks.rst, "Numbers behind the engine's Notes"). Arrays made there keep the cache
as their allocator wherever they go (a gradient buffer the executor hands out), and give
their block back to it when they are freed.

A composite step is differentiated through its own small tape by the engine: a composite
whose input also feeds other steps may round that input's gradient differently from a fully
imperative tape (the composite's contributions are summed first, then added). The executor
replaces the composites of a list by the primitives they ran, from the second forward on
(Note [Composite expansion] in ``symbol/_expand.py``; ``Step.expandable``, ``take_traces``).
"""

cimport cython
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM, PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.list cimport PyList_GET_ITEM
from cpython.ref cimport Py_INCREF, PyObject
from cpython.sequence cimport PySequence_Fast_ITEMS
cimport numpy as cnp
from fastgrad._core._node cimport new_leaf, HAS_RULE, NO_RULE
from fastgrad._core._array cimport ndarray, Primitive, wrap
from fastgrad._core._engine cimport (GradientBuffer, Dest, SHARED, complete_gradients,
                                     write_grad_buffer, same_layout, needs_mask, check_rule_result)
from fastgrad._core._state cimport (set_recording_c, set_training_c, is_training_c, is_anomaly_c)
from fastgrad._kernels._large.kernels cimport (use_buffer_cache, restore_allocator, elementwise,
                                               is_large, large_rule, large_rule_size)

import types
import numpy as _np

from fastgrad._core._array import parse_grad_req
from fastgrad._core._engine import run_backward
from fastgrad._kernels._blas_policy import tick as _blas_tick
from fastgrad._kernels._filled import Filled as FILLED
from fastgrad.symbol._graph import topo_nodes, run_composite
from fastgrad.symbol._expand import EXPANDABLE
from fastgrad.symbol._ops import VARIABLE, CONSTANT, is_primitive

cnp.import_array()

cdef type NP_NDARRAY = _np.ndarray
cdef object _asarray = _np.asarray
cdef object _nparray = _np.array
cdef object _npshape = _np.shape


@cython.final
cdef class _Composite:
    """How a composite step is differentiated: through the step's own small tape."""

    def __init__(self, str name, Py_ssize_t n_in, Py_ssize_t n_out):
        self.name = name
        self.n_in = n_in
        self.n_out = n_out
        self.tape = None

    cdef tuple backward_c(self, object g, object needs):
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
            if (needs >> i) & 1:
                res[i] = (<ndarray>gr)._data
        return tuple(res)


@cython.final
cdef class Step:
    """One operation of a plan (internal; see Note [Executor plan])."""

    @property
    def input_slots(self):
        return self.ins

    @property
    def output_slots(self):
        return self.outs

    @property
    def gradient_slots(self):
        """Per input: the slot its gradient goes to, or -1 (Note [Backward replay])."""
        return self.gslots

    def __repr__(self):
        return "<fastgrad plan step %d %s (%s)>" % (self.index, self.name, self.op)


cdef class _AnomalySite:
    """What ``_anomaly.report`` reads of a node, for a step."""
    cdef readonly str name
    cdef readonly Py_ssize_t seq
    cdef readonly object forward_trace

    def __init__(self, str name, Py_ssize_t seq):
        self.name = name
        self.seq = seq
        self.forward_trace = None


cdef inline object _slot(list vals, tuple idx, Py_ssize_t i):
    return <object>PyList_GET_ITEM(vals, <Py_ssize_t><object>PyTuple_GET_ITEM(idx, i))


cdef inline object _as_np(object v):
    return v if type(v) is NP_NDARRAY else _asarray(v)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _run_primitive(Step st, list vals) except *:
    cdef Py_ssize_t i, n_in = st.n_in, npar = PyTuple_GET_SIZE(st.params)
    cdef tuple args = PyTuple_New(n_in + npar)
    cdef object v, out
    for i in range(n_in):
        v = _slot(vals, st.ins, i)
        Py_INCREF(v)
        PyTuple_SET_ITEM(args, i, v)
    for i in range(npar):
        v = <object>PyTuple_GET_ITEM(st.params, i)
        Py_INCREF(v)
        PyTuple_SET_ITEM(args, n_in + i, v)
    out = None
    if st.elementwise:
        for i in range(n_in):
            if is_large(<object>PyTuple_GET_ITEM(args, i)):    # Note [Large-array kernels]
                out = elementwise(st.kernel, args)
                break
    if out is None:
        out = st.kernel(*args)
    if st.n_out == 1:
        if type(out) is not NP_NDARRAY:
            out = _asarray(out)
        vals[<Py_ssize_t><object>PyTuple_GET_ITEM(st.outs, 0)] = out
        return
    out = tuple([_as_np(o) for o in out])
    if PyTuple_GET_SIZE(out) != st.n_out:
        raise ValueError("%s (op %s) produced %d outputs, its node declares %d"
                         % (st.name, st.kernel.__name__, len(out), st.n_out))
    for i in range(st.n_out):
        vals[<Py_ssize_t><object>PyTuple_GET_ITEM(st.outs, i)] = <object>PyTuple_GET_ITEM(out, i)


cdef void _run_composite(Step st, list vals) except *:
    cdef Py_ssize_t i
    cdef ndarray a
    cdef bint trace = st.expandable
    inputs = []
    variables = []
    for i in range(st.n_in):
        a = wrap(_slot(vals, st.ins, i), None, 0)
        if (st.linked and <Py_ssize_t><object>PyTuple_GET_ITEM(st.gslots, i) >= 0
                and a._data.dtype.kind in "fc"):
            # A fresh variable of the step's own tape (its gradient is returned, not stored).
            a._node = new_leaf(a._data.shape, a._data.dtype, None)
            variables.append((i, a))
        elif trace:
            # Every input of a trace is a variable (Note [Composite expansion]).
            a._node = new_leaf(a._data.shape, a._data.dtype, None)
        inputs.append(a)
    cdef int prev = set_recording_c(1 if variables or trace else 0)
    try:
        outs = run_composite(st.kernel, st.name, st.params, inputs, st.n_out)
    finally:
        set_recording_c(prev)
    if trace:
        st.expandable = False
        st.trace = (inputs, outs)
    for i in range(st.n_out):
        vals[<Py_ssize_t><object>PyTuple_GET_ITEM(st.outs, i)] = (<ndarray>outs[i])._data
    if st.linked:
        st.composite.tape = (variables, outs) if variables else None


@cython.boundscheck(False)
@cython.wraparound(False)
cdef tuple _rule_args(Plan plan, Step st, object g, object needs):
    """The rule's arguments ``(g, needs, *saved inputs, *saved shapes, [result], *params)``
    from the slots."""
    cdef list vals = plan.values
    cdef Py_ssize_t ns = PyTuple_GET_SIZE(st.saved_slots)
    cdef Py_ssize_t nsh = PyTuple_GET_SIZE(st.shape_slots)
    cdef Py_ssize_t npar = PyTuple_GET_SIZE(st.params), k, j
    cdef tuple args = PyTuple_New(2 + ns + nsh + st.save_result + npar)
    cdef object s
    Py_INCREF(g)
    PyTuple_SET_ITEM(args, 0, g)
    s = needs
    Py_INCREF(s)
    PyTuple_SET_ITEM(args, 1, s)
    j = 2
    for k in range(ns):
        s = _slot(vals, st.saved_slots, k)
        Py_INCREF(s)
        PyTuple_SET_ITEM(args, j, s)
        j += 1
    for k in range(nsh):
        s = _shape_of(plan, <Py_ssize_t><object>PyTuple_GET_ITEM(st.shape_slots, k))
        Py_INCREF(s)
        PyTuple_SET_ITEM(args, j, s)
        j += 1
    if st.save_result:
        if st.n_out == 1:
            s = _slot(vals, st.outs, 0)
        else:
            s = tuple([_slot(vals, st.outs, k) for k in range(st.n_out)])
        Py_INCREF(s)
        PyTuple_SET_ITEM(args, j, s)
        j += 1
    for k in range(npar):
        s = <object>PyTuple_GET_ITEM(st.params, k)
        Py_INCREF(s)
        PyTuple_SET_ITEM(args, j, s)
        j += 1
    return args


def _derivative_of(Primitive prim, Py_ssize_t i):
    """What ``prim``'s table says of its input ``i`` (enum Derivative in ``_node.pxd``)."""
    if prim.n_in < 0:
        return prim.diff[0] if prim.diff else HAS_RULE
    return prim.diff[i]


@cython.final
cdef class Plan:
    """Slots, steps and the backward replay of a bound symbol (Note [Executor plan]).

    ``arg_arrays`` and ``grad_arrays`` are the executor's lists (one entry per argument of
    ``arg_names``); ``reqs`` the arguments' ``grad_req``. The plan reads the arguments' values
    from ``arg_arrays`` at each forward, so replacing an entry of that list is seen.
    """

    def __init__(self, symbol, list arg_names, list reqs, list arg_arrays, list grad_arrays,
                 list own_grads, type out_cls, bint trace=False):
        cdef Step st
        cdef Py_ssize_t i, k
        self.values = []
        self.steps = []
        self.arg_arrays = arg_arrays
        self.out_cls = out_cls
        self.outputs = None
        self.ones = None
        n_args = len(arg_names)
        index = {n: i for i, n in enumerate(arg_names)}
        arg_slots = [None] * n_args
        self.bufs = [None] * n_args
        self.reqs = [None] * n_args
        self.swappable = [False] * n_args
        grad_args = []
        slot = {}
        static = []       # per slot: a value fixed at bind
        linked = []       # per slot: a gradient flows through it
        multi = []        # per slot: an output of a multi-output step
        values = self.values

        def new_slot(value, is_static, is_linked, is_multi=False):
            values.append(value)
            static.append(is_static)
            linked.append(is_linked)
            multi.append(is_multi)
            return len(values) - 1

        for snode in topo_nodes(symbol._entries):
            if snode.op == VARIABLE:
                k = index[snode.name]
                wants = reqs[k] != "null" and grad_arrays[k] is not None
                s = new_slot(None, False, wants)
                if wants:
                    self.bufs[k] = grad_arrays[k]
                    self.reqs[k] = parse_grad_req(reqs[k])
                    self.swappable[k] = bool(own_grads[k])
                    grad_args.append(k)
                slot[(snode.id, 0)] = s
                arg_slots[k] = s
                continue
            if snode.op == CONSTANT:
                slot[(snode.id, 0)] = new_slot(snode.value, True, False)
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
            gslots = [-1] * len(ins)
            st.defer_input = -1
            if is_primitive(fn):
                if all([static[s] for s in ins]):
                    with _np.errstate(all="ignore"):
                        out = fn.forward(*[values[s] for s in ins], *snode.params)
                    outs = [out] if fn.n_out == 1 else list(out)
                    if len(outs) != n_out:
                        raise ValueError("bind: %s (op %s) produced %d outputs, its node "
                                         "declares %d" % (snode.name, snode.op, len(outs), n_out))
                    for i, o in enumerate(outs):
                        slot[(snode.id, i)] = new_slot(_asarray(o), True, False)
                    continue
                st.op = fn.name
                if fn.differentiable:
                    for i, s in enumerate(ins):
                        if not linked[s]:
                            continue
                        derivative = _derivative_of(fn, i)
                        if derivative == HAS_RULE:
                            gslots[i] = s
                        elif derivative == NO_RULE:
                            raise NotImplementedError(
                                "bind: fastgrad.%s (node %r) has no derivative with respect "
                                "to its input %d, which depends on an argument that wants a "
                                "gradient; use grad_req='null' for it" % (fn.name, snode.name, i))
                st.kernel = fn.forward
                st.params = tuple(snode.params)
                st.elementwise = (<Primitive>fn).elementwise and not st.params
                st.rule = fn.backward
                st.rule_large = fn.backward_large
                save_inputs, save_shapes, save_result = fn.saves
                st.saved_slots = tuple([ins[j] for j in save_inputs])
                st.shape_slots = tuple([ins[j] for j in save_shapes])
                st.save_result = save_result
                if fn.defer_input >= 0:
                    st.defer_input = fn.defer_input
                    st.defer_x_slot = st.saved_slots[(<Primitive>fn).defer_saved]
            else:
                st.op = snode.op
                for i, s in enumerate(ins):
                    if linked[s]:
                        gslots[i] = s
                st.kernel = fn
                st.params = snode.params
                st.composite = _Composite(snode.op, len(ins), n_out)
                st.expandable = trace and snode.op in EXPANDABLE
            st.gslots = tuple(gslots)
            st.linked = any([s >= 0 for s in gslots])
            st.needs = needs_mask([s >= 0 for s in gslots])
            outs = tuple([new_slot(None, False, st.linked, n_out > 1) for i in range(n_out)])
            for i in range(n_out):
                slot[(snode.id, i)] = outs[i]
            st.outs = outs
            st.index = len(self.steps)
            st.node_id = snode.id
            self.steps.append(st)

        self.arg_slots = tuple(arg_slots)
        self.grad_args = tuple(grad_args)
        self.out_slots = tuple([slot[(n.id, k)] for n, k in symbol._entries])
        self._plan_lifetimes(static)
        self._plan_deferred_products(arg_slots)
        self.head_slots = tuple([s for s in self.out_slots if linked[s]])
        self.head_index = tuple([i for i, s in enumerate(self.out_slots) if linked[s]])
        self.bsteps = [st for st in reversed(self.steps) if st.linked]
        self._plan_backward_release(static)
        self.grads = GradientBuffer.__new__(GradientBuffer)
        self.grads.reset(len(values), False)
        for i in range(len(values)):
            if multi[i]:
                self.grads.entries[i].flags = SHARED    # never owned, as in the engine
        self.any_grad = bool(grad_args)

    def _plan_lifetimes(self, list static):
        """Decide which slots forward drops, and when, and which it describes by shape and
        dtype before dropping them (Note [Slot lifetimes])."""
        cdef Step st
        kept = set(self.out_slots)
        described = set()
        for st in self.steps:
            if not st.linked:
                continue
            kept.update(st.saved_slots)
            described.update(st.shape_slots)
            described.update([s for s in st.gslots if s >= 0])
            if st.save_result:
                kept.update(st.outs)
            elif st.n_out > 1:
                described.update(st.outs)
        last_use = {}
        for st in self.steps:
            for s in st.outs:
                last_use[s] = st.index
            for s in st.ins:
                last_use[s] = st.index
        produced = set()
        for st in self.steps:
            produced.update(st.outs)
        for st in self.steps:
            st.released = tuple(sorted(set([
                s for s in st.ins + st.outs
                if s in produced and s not in kept and not static[s]
                and last_use[s] == st.index])))
            st.described = tuple([s for s in st.outs if s in described and s not in kept])
        self.kept_slots = tuple(sorted([s for s in produced if s in kept]))
        self.shapes = [None] * len(static)
        self.dtypes = [None] * len(static)

    def _plan_backward_release(self, list static):
        """For a backward that releases (Note [Slot lifetimes]): the slots each replayed step
        is the last to read, as a value or for its shape."""
        cdef Step st
        last = {}
        for pos, st in enumerate(self.bsteps):
            reads = list(st.saved_slots) + list(st.shape_slots)
            reads += [s for s in st.gslots if s >= 0]
            if st.save_result or st.n_out > 1:
                reads += list(st.outs)
            for s in reads:
                last[s] = pos
        outputs = set(self.out_slots)
        produced = set()
        for st in self.steps:
            produced.update(st.outs)
            st.freed = ()
        for pos, st in enumerate(self.bsteps):
            st.freed = tuple(sorted([s for s, p in last.items() if p == pos and s in produced
                                     and s not in outputs and not static[s]]))

    def _plan_deferred_products(self, list arg_slots):
        """Mark the steps whose op declares a deferred product (``Primitive.defer_input``)
        for an argument, which the replay defers where the engine would (Note [Deferred weight
        gradients] in _kernels/_forward.py): the engine defers
        while the variable has more than one consumer left to run, counting every input of
        every node it visits, a node being visited when it has history and leads to a head."""
        cdef Step st
        cdef Py_ssize_t i
        wants = set([arg_slots[k] for k in self.grad_args])
        history = set(wants)
        for st in self.steps:
            if any([s in history for s in st.ins]):
                history.update(st.outs)
        reached = set([s for s in self.out_slots if s in history])
        visited = []
        for st in reversed(self.steps):
            st.defer_left = 0
            if any([s in reached for s in st.outs]):
                visited.append(st)
                reached.update([s for s in st.ins if s in history])
        left = dict.fromkeys(wants, 0)
        for st in reversed(visited):            # creation order
            for s in st.ins:
                if s in left:
                    left[s] += 1
            i = st.defer_input
            if i >= 0 and st.gslots[i] in wants:
                st.defer_left = left[st.gslots[i]]
                st.needs_deferred = needs_mask([s >= 0 and k != i
                                                for k, s in enumerate(st.gslots)])

    def take_traces(self):
        """The traces of composite steps the last forward made, by symbol node id (Note
        [Composite expansion] in ``symbol/_expand.py``); ``None`` when there are none."""
        cdef Step st
        traces = {}
        for st in self.steps:
            if st.trace is not None:
                traces[st.node_id] = st.trace
                st.trace = None
        return traces or None

    def adopt_outputs(self, Plan other):
        """Write into ``other``'s output arrays, which the executor has handed out."""
        self.outputs = other.outputs
        self.ones = other.ones

    def set_outputs(self, list outputs):
        """Write the outputs into these arrays of the executor's (allocated at bind, or views
        of another executor's outputs after ``reshape``) while their shapes do not change."""
        cdef dict by_slot = {}
        for slot, out in zip(self.out_slots, outputs):
            by_slot.setdefault(slot, out)
        self.outputs = outputs
        # The default head gradients, as _store_outputs makes them for fresh outputs.
        self.ones = [_np.ones_like((<ndarray>by_slot[slot])._data) for slot in self.head_slots]

    def set_grad(self, Py_ssize_t k, grad):
        """Argument ``k`` has a new gradient buffer of the executor's (a forward with a new
        shape)."""
        if self.bufs[k] is not None:
            self.bufs[k] = grad
            self.swappable[k] = True

    @property
    def steps_list(self):
        """The steps, in the order forward runs them (for introspection and tests)."""
        return list(self.steps)

    @property
    def backward_steps(self):
        """The steps backward replays, in its order (Note [Backward replay])."""
        return list(self.bsteps)

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def forward(self, bint is_train):
        """Run every step and return the output arrays (reused while shapes do not change)."""
        cdef list vals = self.values
        cdef Py_ssize_t k, n = PyTuple_GET_SIZE(self.arg_slots)
        cdef Step st
        cdef int prev_train = set_training_c(is_train)
        cdef int prev_rec = set_recording_c(0)
        cdef object allocator = use_buffer_cache()
        _blas_tick()                # Note [Load-aware BLAS threads] in _kernels/_blas_policy.py
        try:
            # The last pass's values go first, so that their buffers can be reused.
            self.freed_values = False
            for k in range(PyTuple_GET_SIZE(self.kept_slots)):
                vals[<Py_ssize_t><object>PyTuple_GET_ITEM(self.kept_slots, k)] = None
            for k in range(n):
                vals[<Py_ssize_t><object>PyTuple_GET_ITEM(self.arg_slots, k)] = \
                    (<ndarray>PyList_GET_ITEM(self.arg_arrays, k))._data
            for obj in self.steps:
                st = <Step>obj
                if st.composite is None:
                    _run_primitive(st, vals)
                else:
                    _run_composite(st, vals)
                for k in range(PyTuple_GET_SIZE(st.described)):
                    _describe(self, <Py_ssize_t><object>PyTuple_GET_ITEM(st.described, k))
                for k in range(PyTuple_GET_SIZE(st.released)):
                    vals[<Py_ssize_t><object>PyTuple_GET_ITEM(st.released, k)] = None
        finally:
            restore_allocator(allocator)
            set_recording_c(prev_rec)
            set_training_c(prev_train)
        return self._store_outputs()

    cdef list _store_outputs(self):
        cdef list vals = self.values
        cdef list outs = self.outputs
        cdef Py_ssize_t i, n = PyTuple_GET_SIZE(self.out_slots)
        cdef bint fresh = outs is None
        if not fresh:
            for i in range(n):
                value = _as_np(_slot(vals, self.out_slots, i))
                if not same_layout((<ndarray>outs[i])._data, value):
                    fresh = True
                    break
        if fresh:
            self.outputs = [wrap(_nparray(_slot(vals, self.out_slots, i)), None, 0,
                                 self.out_cls) for i in range(n)]
            # The default head gradients; a seed is never written into (Note [Backward replay]).
            self.ones = [_np.ones_like(_as_np(_slot(vals, self.head_slots, i)))
                         for i in range(PyTuple_GET_SIZE(self.head_slots))]
            return self.outputs
        for i in range(n):
            if cnp.PyArray_CopyInto((<ndarray>outs[i])._data,
                                    _as_np(_slot(vals, self.out_slots, i))) < 0:
                raise RuntimeError("forward: could not copy output %d" % i)
        return outs

    def backward(self, list head_grads, bint train_mode, bint release=False):
        """Replay the linked steps backward; fill the gradient buffers.

        ``head_grads``: one gradient per output (an ndarray of its shape and dtype), or
        ``None`` for ones. With ``release`` each value forward kept is dropped once the last
        step that reads it has run, as the tape drops a node's (Note [Slot lifetimes]); the
        next backward then needs a forward first.
        """
        if self.freed_values:
            raise RuntimeError("backward: an earlier backward released the values of the last "
                               "forward; run forward again before backward")
        cdef int prev_rec = set_recording_c(0)
        cdef int prev_train = set_training_c(train_mode)
        cdef object allocator = use_buffer_cache()
        _blas_tick()
        try:
            if release:
                self.freed_values = True
            self._replay(head_grads, release)
            self._write_grads()
        finally:
            restore_allocator(allocator)
            set_recording_c(prev_rec)
            set_training_c(prev_train)
            self.grads.clear()

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef void _replay(self, list head_grads, bint release) except *:
        """Note [Backward replay]: the engine's loop over a fixed order, with its buffer."""
        cdef GradientBuffer buf = self.grads
        cdef list vals = self.values
        cdef Py_ssize_t i, nh = PyTuple_GET_SIZE(self.head_slots)
        cdef Step st
        cdef Dest *dests
        cdef object g, needs
        cdef tuple grads, args
        cdef bint owned, anomaly = is_anomaly_c()
        # Seeds first, in output order (never owned: a head gradient is not the pass's).
        for i in range(nh):
            if head_grads is None:
                g = self.ones[i]
            else:
                g = head_grads[<Py_ssize_t><object>PyTuple_GET_ITEM(self.head_index, i)]
            buf.add(<Py_ssize_t><object>PyTuple_GET_ITEM(self.head_slots, i), 0, 1, g, False)
        for obj in self.bsteps:
            st = <Step>obj
            # Take the step's gradient; where the gradient for each of its inputs goes.
            g = _take(buf, st, &owned)
            if g is None:
                if release:
                    _free(vals, st.freed)
                continue
            dests = buf.destinations(st.n_in)
            _step_destinations(self, st, dests)
            needs = st.needs
            args = None
            if st.composite is not None:
                # Its gradients come from a pass of its own: not owned.
                grads = st.composite.backward_c(g, needs)
            else:
                if st.defer_left and not anomaly:
                    needs = _defer_product(buf, st, vals, g, dests, needs)
                    if needs is None:
                        if release:
                            _free(vals, st.freed)
                        continue
                if st.n_out > 1:
                    g = _completed(self, st, g)
                args = _rule_args(self, st, g, needs)
                if st.rule_large is not None and (
                        large_rule(g) or (type(g) is FILLED and g.size >= large_rule_size())):
                    grads = st.rule_large(*args)     # the engine's choice (_call_rule)
                else:
                    grads = st.rule(*args)
            # Hand the gradients to the inputs' entries.
            check_rule_result(st, grads, st.n_in,
                              _AnomalySite(st.op, st.index) if anomaly else None)
            buf.deliver(st, grads, dests,
                        PySequence_Fast_ITEMS(args) if args is not None else NULL,
                        PyTuple_GET_SIZE(args) if args is not None else 0,
                        g, owned and args is not None)
            g = None
            args = None
            if release:
                _free(vals, st.freed)

    cdef void _write_grads(self) except *:
        """Write every argument's gradient into its buffer (as the engine writes a
        variable's)."""
        cdef Py_ssize_t j, k, s
        cdef bint owned
        cdef object g
        for j in range(PyTuple_GET_SIZE(self.grad_args)):
            k = <Py_ssize_t><object>PyTuple_GET_ITEM(self.grad_args, j)
            s = <Py_ssize_t><object>PyTuple_GET_ITEM(self.arg_slots, k)
            g = self.grads.take(s, &owned)
            write_grad_buffer(<ndarray>self.bufs[k], <int>self.reqs[k], g,
                              owned and self.swappable[k])


cdef inline void _free(list vals, tuple slots) except *:
    """Drop the values of ``slots`` (a releasing backward; Note [Slot lifetimes])."""
    cdef Py_ssize_t k
    for k in range(PyTuple_GET_SIZE(slots)):
        vals[<Py_ssize_t><object>PyTuple_GET_ITEM(slots, k)] = None


cdef object _take(GradientBuffer buf, Step st, bint *owned):
    """The gradient of ``st``'s output (a list for a multi-output step, whose outputs are
    never owned), or None when none reached it."""
    cdef Py_ssize_t k
    cdef bint unused
    if st.n_out == 1:
        return buf.take(<Py_ssize_t><object>PyTuple_GET_ITEM(st.outs, 0), owned)
    owned[0] = False
    g = [buf.take(<Py_ssize_t><object>PyTuple_GET_ITEM(st.outs, k), &unused)
         for k in range(st.n_out)]
    if all([gk is None for gk in g]):
        return None
    return g


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _step_destinations(Plan plan, Step st, Dest *dests) noexcept:
    """Where the gradient for each input of ``st`` goes: its slot, fitted to the slot's value,
    or to the shape and dtype recorded for a slot forward dropped (``Dest``, Note [Gradient
    buffers] in _engine.pyx; Note [Slot lifetimes])."""
    cdef Py_ssize_t i, s
    cdef PyObject *v
    for i in range(st.n_in):
        s = <Py_ssize_t><object>PyTuple_GET_ITEM(st.gslots, i)
        dests[i].entry = s
        if s >= 0:
            dests[i].oidx = 0
            dests[i].n_out = 1
            v = PyList_GET_ITEM(plan.values, s)
            if v == <PyObject *>None:
                dests[i].shape = PyList_GET_ITEM(plan.shapes, s)
                dests[i].dtype = PyList_GET_ITEM(plan.dtypes, s)
                dests[i].like = NULL
            else:
                dests[i].shape = NULL
                dests[i].dtype = NULL
                dests[i].like = v


cdef object _defer_product(GradientBuffer buf, Step st, list vals, object g, Dest *dests,
                           object needs):
    """The op's deferred-product hook, where the engine would apply it (Note [Deferred weight
    gradients] in _kernels/_forward.py): the rule's needs without the deferred input when its
    product was kept, else ``needs``."""
    cdef Dest *d = &dests[st.defer_input]
    if not buf.defer(d, st.defer_left, <object>PyList_GET_ITEM(vals, st.defer_x_slot), g):
        return needs
    d.entry = -1
    return st.needs_deferred if st.needs_deferred else None


cdef tuple _completed(Plan plan, Step st, object g):
    """A multi-output step's gradients, with symbolic zeros for its outputs no gradient
    reached, as in the engine."""
    return complete_gradients(g, st.n_out, [_shape_of(plan, s) for s in st.outs],
                              [_dtype_of(plan, s) for s in st.outs])


cdef inline void _describe(Plan plan, Py_ssize_t s) except *:
    """Record the shape and dtype of slot ``s``'s value, which forward is about to drop
    (Note [Slot lifetimes])."""
    v = _as_np(<object>PyList_GET_ITEM(plan.values, s))
    plan.shapes[s] = v.shape
    plan.dtypes[s] = v.dtype


cdef object _shape_of(Plan plan, Py_ssize_t s):
    """The shape of slot ``s``'s value, kept or described (Note [Slot lifetimes])."""
    v = <object>PyList_GET_ITEM(plan.values, s)
    if v is None:
        return <object>PyList_GET_ITEM(plan.shapes, s)
    return v.shape if type(v) is NP_NDARRAY else _npshape(v)


cdef object _dtype_of(Plan plan, Py_ssize_t s):
    v = <object>PyList_GET_ITEM(plan.values, s)
    if v is None:
        return <object>PyList_GET_ITEM(plan.dtypes, s)
    return _as_np(v).dtype
