# The tape node: one recorded operation.  See Note [The tape] in _node.pyx.


# What an op's rule table says of one of its inputs (``Primitive.diff``, set by _registry;
# also readable from Python as fastgrad._core._node.HAS_RULE, ...).
cpdef enum Derivative:
    HAS_RULE = 1             # differentiable, with a formula
    NOT_DIFFERENTIABLE = 0   # carries no gradient (an index, a condition): never a parent
    NO_RULE = -1             # differentiable but no formula: an error if a gradient is wanted


cdef class VersionCell:
    # How many in-place writes the memory of an array (and of every view of it) has had.
    # Shared by an array and its views; see Note [Versions] in _array_versions.pxi.
    cdef public unsigned long value

cdef class Node:
    # --- what was recorded (read by the backward pass) ---
    cdef readonly object op          # the Primitive (or custom Function op); None for a variable
    cdef tuple parents               # per input: the Node that produced it, or None (constant)
    cdef tuple parent_oidx           # per input: which output of that parent; None when all are 0
    cdef tuple consts                # per input: its value if it had no history, else None;
                                     #   None when every input had history (for get_symbol)
    cdef tuple saved                 # the inputs the derivative rule reads, in rule order
    cdef object result               # the raw output(s), kept only if the rule reads the result
    cdef tuple params                # the op's non-array arguments (axis, shape, ...)
    cdef object out_shape            # shape of the output (tuple of shapes if n_out > 1)
    cdef object out_dtype            # dtype of the output (tuple of dtypes if n_out > 1)
    cdef Py_ssize_t n_out            # number of outputs
    cdef readonly long long seq      # creation order; a parent's seq is always smaller
    cdef unsigned long vsum          # sum of the saved arrays' versions when recorded
    cdef VersionCell out_cell        # the outputs' version cell, if the rule reads the result
    cdef unsigned long out_v0        # its value when recorded
    cdef bint released               # saved values were freed by a backward pass
    cdef object var_refs             # weakref(s) to the array(s) whose .grad this node fills
    cdef object trace                # where the forward was recorded (anomaly detection only)
    cdef bint zero                   # carries no gradient: an integer/bool output or a zero
                                     #   derivative; kept for reach (Note [Zero gradients])
    # --- which running backward pass holds this node's state (Note [Pass state]) ---
    cdef unsigned long long epoch    # that pass's epoch; 0 when no running pass claimed it
    cdef Py_ssize_t slot             # the node's index in that pass's state arrays
    cdef object __weakref__          # so tests and tools can watch a node die


cdef long long next_seq() noexcept
cdef long long last_seq() noexcept      # the seq of the newest node so far
cdef void _bump_cell(VersionCell cell) noexcept
cdef Node new_node(object op)
cdef Node new_leaf(object shape, object dtype, object var_ref)
