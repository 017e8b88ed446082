# The plan of a bound symbol.  See Note [Executor plan] in _plan.pyx.

from fastgrad._core._engine cimport GradientBuffer, Dest


cdef class _Composite:
    cdef readonly str name           # the composite's op name ('npx.softmax', ...)
    cdef Py_ssize_t n_in
    cdef Py_ssize_t n_out
    cdef object tape                 # (variables, outputs) recorded by the last forward, or None

    cdef tuple backward_c(self, object g, object needs)


cdef class Step:
    cdef object kernel               # a primitive's NumPy kernel, or the composite function
    cdef readonly str name           # the symbol node's name
    cdef readonly str op             # the op's name
    cdef tuple ins                   # slot index of every input
    cdef tuple outs                  # slot index of every output
    cdef Py_ssize_t n_in
    cdef Py_ssize_t n_out
    cdef tuple params                # the kernel's non-array arguments
    cdef bint elementwise            # a ufunc of the arrays alone: large inputs go through the
                                     #   large-array kernels, as the tape's (Note [Executor plan])
    cdef readonly bint linked        # a gradient flows through the step
    # --- the backward replay (Note [Backward replay]); set when linked ---
    cdef object rule                 # the primitive's derivative rule (None for a composite)
    cdef object rule_large           # the same rule's large binding (Note [Bindings]), or None
    cdef object needs                # the rule's ``needs``: a Python int, bit i for input i
    cdef tuple gslots                # per input: the slot its gradient goes to, or -1
    cdef tuple saved_slots           # slots of the inputs the rule reads (rule order)
    cdef tuple shape_slots           # slots of the inputs whose shapes the rule reads
    cdef bint save_result            # the rule reads the output
    cdef _Composite composite        # set for a composite step
    cdef bint expandable             # trace it at the next forward (Note [Composite expansion])
    cdef object trace                # (inputs, outputs) of that trace, until taken
    cdef readonly object node_id     # the id of its symbol node
    cdef readonly Py_ssize_t index   # position in the plan
    cdef tuple released              # slots forward drops after this step (Note [Slot lifetimes])
    cdef tuple freed                 # slots a releasing backward drops after this step
                                     #   (Note [Slot lifetimes])
    cdef tuple described             # its outputs backward knows by shape and dtype alone,
                                     #   recorded before they are dropped (Note [Slot lifetimes])
    # The op's deferred-product hook (Primitive.defer_input; Note [Deferred weight gradients]
    # in _kernels/_forward.py), for an input that is an argument wanting a gradient:
    cdef Py_ssize_t defer_input      # that input, or -1
    cdef Py_ssize_t defer_left       # its consumers the engine would count at this step
                                     #   (this one and those replayed after it), else 0
    cdef Py_ssize_t defer_x_slot     # the slot of the product's other factor x
    cdef object needs_deferred       # the rule's needs without that input


cdef class Plan:
    cdef list values                 # one value per slot (Note [Executor plan])
    cdef list steps                  # the Steps, in creation order
    cdef list bsteps                 # the linked Steps, in reverse creation order
    cdef list arg_arrays             # the executor's argument arrays (shared list)
    cdef tuple arg_slots             # per argument: its slot
    cdef tuple kept_slots            # step outputs kept after forward (Note [Slot lifetimes])
    cdef list shapes                 # per slot: the shape of a described slot's last value
    cdef list dtypes                 # per slot: its dtype
    cdef tuple grad_args             # the arguments that get a gradient (indices)
    cdef list bufs                   # per argument: its gradient buffer (an ndarray) or None
    cdef list reqs                   # per argument: GRAD_WRITE or GRAD_ADD (None: no gradient)
    cdef list swappable              # per argument: the buffer may take the pass's array
    cdef tuple head_slots            # the slots of the outputs a gradient flows back from
    cdef tuple head_index            # their output indices
    cdef list ones                   # per grad head: ones of its shape (the default gradient)
    cdef GradientBuffer grads        # per slot: its incoming gradient (Note [Gradient
                                     #   buffers] in _engine.pyx); empty between passes
    cdef tuple out_slots
    cdef list outputs                # the output arrays handed to the user (reused)
    cdef type out_cls
    cdef readonly bint any_grad
    cdef bint freed_values           # a releasing backward dropped values since the forward

    cdef list _store_outputs(self)
    cdef void _replay(self, list head_grads, bint release) except *
    cdef void _write_grads(self) except *
