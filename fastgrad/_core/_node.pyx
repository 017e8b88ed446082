"""The tape node.

Note [The tape]
~~~~~~~~~~~~~~~
fastgrad records a graph of ``Node`` objects while ``autograd.record()`` is on. An array that
depends on a variable holds the ``Node`` that produced it (and which of its outputs it is); a
node holds its parents, never its consumers, so the graph of a value is kept alive by that value
alone and is freed with it. Nodes are created in increasing ``seq`` order, so ``seq`` is a
topological order of the whole tape: the backward pass runs the ready node with the largest
``seq`` first (see _engine.pyx). Variables are nodes with ``op is None``; an intermediate array
that had ``attach_grad`` called inside ``record()`` keeps its node and gains a ``var_refs`` entry.
Nodes are small, final and freelisted, because one is created per recorded operation.

Note [No cycles]
~~~~~~~~~~~~~~~~
Nodes and arrays are not tracked by Python's cycle collector: with a million live nodes its
collections would cost more than recording itself. That is sound because the tape is acyclic
by construction: a node references its parents, the inputs its rule saved (ancestors), raw
NumPy values, and the arrays whose ``.grad`` it fills only through weak references. A custom
``Function`` that saves its own outputs keeps markers instead of the outputs (see
``_custom_function.py``), so it does not close a loop either. Freeing a long chain never recurses
deeply in C: every link from a node to another node passes through a tuple (``parents``,
``saved``), and CPython frees deep tuple nesting iteratively.
"""

cimport cython

cdef long long _seq = 0


cdef long long next_seq() noexcept:
    global _seq
    _seq += 1
    return _seq


cdef long long last_seq() noexcept:
    return _seq


@cython.final
@cython.freelist(64)
@cython.no_gc
cdef class VersionCell:
    """The in-place write count of one array's memory, shared with its views (internal)."""


# Note [Node free list]
# ~~~~~~~~~~~~~~~~~~~~~
# The free list keeps up to 1024 dead nodes (about 200 KB) for reuse: a step of a small model
# records a few hundred nodes and frees them all when its loss goes, so with a shorter list
# every step allocated the excess from the heap again.
@cython.final
@cython.freelist(1024)
@cython.no_gc
cdef class Node:
    """One recorded operation of the tape (internal).

    Attributes readable from Python: ``op`` (the operation, ``None`` for a variable) and
    ``seq`` (creation order). ``parents_list()`` lists the producing nodes of the inputs.
    """

    def parents_list(self):
        """The nodes that produced this node's inputs (``None`` for constants)."""
        return list(self.parents) if self.parents is not None else []

    @property
    def name(self):
        """The name of the recorded operation (``'variable'`` for a variable)."""
        return "variable" if self.op is None else self.op.name

    @property
    def op_params(self):
        """The op's non-array arguments, in the order of ``op.param_names``."""
        return self.params

    @property
    def constants(self):
        """Per input: its value if it was a constant (no history), else ``None``."""
        if self.consts is None:
            return [None] * (len(self.parents) if self.parents is not None else 0)
        return list(self.consts)

    @property
    def output_indices(self):
        """Per input: which output of its parent node it was."""
        if self.parents is None:
            return []
        if self.parent_oidx is None:
            return [0] * len(self.parents)
        return list(self.parent_oidx)

    @property
    def output_shapes(self):
        """The shapes of the node's outputs (a list, one per output)."""
        return [self.out_shape] if self.n_out == 1 else list(self.out_shape)

    @property
    def output_dtypes(self):
        """The dtypes of the node's outputs (a list, one per output)."""
        return [self.out_dtype] if self.n_out == 1 else list(self.out_dtype)

    @property
    def num_outputs(self):
        return self.n_out

    @property
    def forward_trace(self):
        """Where the forward op was recorded (only under ``autograd.detect_anomaly()``)."""
        return self.trace

    @property
    def carries_gradient(self):
        """False for a node recorded only for what it depends on: an integer or bool output,
        or an op whose derivative is zero (Note [Zero gradients] in _zeros.py)."""
        return not self.zero

    @property
    def is_released(self):
        """Whether a backward pass freed what this node saved."""
        return bool(self.released)

    def __repr__(self):
        return "<fastgrad Node %s #%d>" % (self.name, self.seq)


cdef void _bump_cell(VersionCell cell) noexcept:
    cell.value += 1


cdef Node new_node(object op):
    cdef Node n = Node.__new__(Node)
    n.op = op
    n.seq = next_seq()
    n.n_out = 1
    return n


cdef Node new_leaf(object shape, object dtype, object var_ref):
    cdef Node n = Node.__new__(Node)
    n.seq = next_seq()
    n.n_out = 1
    n.parents = ()
    n.out_shape = shape
    n.out_dtype = dtype
    n.var_refs = var_ref
    return n
