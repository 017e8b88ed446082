# The persistent tape of a bound symbol.  See Note [Executor plan] in _plan.pyx.

from fastgrad._node cimport Node


cdef class _Composite:
    cdef readonly str name           # the composite's op name ('npx.softmax', ...)
    cdef Py_ssize_t n_in
    cdef Py_ssize_t n_out
    cdef object tape                 # (variables, outputs) recorded by the last forward, or None


cdef class Step:
    cdef object kernel               # a primitive's NumPy kernel, or the composite function
    cdef str name                    # the symbol node's name
    cdef tuple ins                   # slot index of every input
    cdef tuple outs                  # slot index of every output
    cdef Py_ssize_t n_in
    cdef Py_ssize_t n_out
    cdef tuple params                # the kernel's non-array arguments
    cdef Node node                   # the persistent tape node; None when no gradient flows
    cdef tuple saved_slots           # slots of the inputs the rule reads (rule order)
    cdef tuple shape_slots           # slots of the inputs whose shapes the rule reads
    cdef bint save_result            # the rule reads the output
    cdef _Composite composite        # set for a composite step


cdef class Plan:
    cdef list values                 # one value per slot (Note [Executor plan])
    cdef list steps                  # the Steps, in creation order
    cdef list arg_arrays             # the executor's argument arrays (shared list)
    cdef tuple arg_slots             # per argument: its slot
    cdef list leaves                 # per argument: its leaf Node, or None ('null')
    cdef list sinks                  # per argument: the array holding the leaf and .grad
    cdef list heads                  # per output: an array on the output's node, or None
    cdef list grad_heads             # the heads that are not None
    cdef list head_index             # their output indices
    cdef list ones                   # per grad head: ones of its shape (the default gradient)
    cdef list zero_sinks             # 'write' arguments no output reaches
    cdef tuple out_slots
    cdef list outputs                # the output arrays handed to the user (reused)
    cdef type out_cls
    cdef readonly bint any_grad

    cdef list _store_outputs(self)
