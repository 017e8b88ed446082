# The backward pass.  See Note [Scheduling] and Note [Gradient buffers] in _engine.pyx.
# The executor's replay (_plan.pyx) keeps its gradients in the same GradientBuffer, so the
# tape and the replay fit, own, accumulate and defer gradients with one piece of code.

cimport numpy as cnp
from cpython.ref cimport PyObject
from fastgrad._core._array cimport ndarray


# Per entry of a GradientBuffer: what it knows of the gradient it holds.
cdef enum EntryFlag:
    OWNED = 1          # the gradient is a buffer the pass made and may write in place
                       #   (Note [Gradient buffer ownership])
    DEFERRED = 2       # stacked products wait to be added (Note [Deferred weight gradients]
                       #   in _kernels/_forward.py)
    SHARED = 4         # an output of a multi-output op (replay): never owned


cdef struct Entry:
    PyObject *acc              # the gradient accumulated so far (a reference), or NULL;
                               #   a list of per-output gradients for a multi-output node
    unsigned char flags        # EntryFlag bits


cdef struct Dest:
    # Where the gradient for one input of the node being run goes; borrowed pointers, valid
    # while the rule runs.
    Py_ssize_t entry           # the buffer entry of the input's producer; -1: no gradient
    Py_ssize_t oidx            # which output of its producer the input is
    Py_ssize_t n_out           # how many outputs its producer has (> 1: a list entry)
    PyObject *shape            # the shape to fit to (a tuple), or NULL when ``like`` is set
    PyObject *dtype            # the dtype to fit to, or NULL when ``like`` is set
    PyObject *like             # an array with the input's shape and dtype (replay), or NULL


cdef class GradientBuffer:
    # The incoming gradients of every node of one pass: Note [Gradient buffers].
    cdef Entry *entries        # one per node (tape) or slot (replay)
    cdef Py_ssize_t n          # entries in use
    cdef Dest *dests           # scratch: the destinations of the running node's inputs
    cdef Py_ssize_t ndests     # its capacity
    cdef bint create           # under create_graph: every step is a recorded op
    cdef dict deferred         # entry -> ([x, ...], [g, ...]), deferred products
    cdef dict stacked          # the stacked rows' memo, for one pass

    cdef int reset(self, Py_ssize_t n, bint create) except -1
    cdef void clear(self) noexcept
    cdef Dest *destinations(self, Py_ssize_t n) except NULL
    cdef void add(self, Py_ssize_t k, Py_ssize_t oidx, Py_ssize_t n_out, object g,
                  bint g_owned) except *
    cdef object take(self, Py_ssize_t k, bint *owned)
    cdef void deliver(self, object site, tuple grads, Dest *dests, PyObject **args,
                      Py_ssize_t nargs, object g, bint g_owned) except *
    cdef bint defer(self, Dest *d, Py_ssize_t left, object x, object g) except -1


cdef tuple complete_gradients(object g, Py_ssize_t n_out, object shapes, object dtypes)
cdef void write_grad_buffer(ndarray buf, int req, object g, bint take) except *
cdef bint same_layout(cnp.ndarray a, cnp.ndarray b)
cdef object needs_mask(list wants)
cdef void check_rule_result(object site, tuple grads, Py_ssize_t n_in,
                            object report_as) except *
