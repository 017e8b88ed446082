# The array type and the recording path, one module: _array.pyx and the files it includes.
# See Note [Recording] in _array_recording.pxi and Note [Array parts] in _array.pyx.

from cpython.ref cimport PyObject
from fastgrad._core._node cimport Node, VersionCell


cdef class ndarray:
    cdef object _data                # the numpy.ndarray holding the values
    cdef Node _node                  # the node that produced this array, or None
    cdef Py_ssize_t _oidx            # which output of _node this array is
    cdef object _grad                # the gradient buffer (an ndarray) once attached
    cdef int _grad_req               # GRAD_NULL, GRAD_WRITE or GRAD_ADD
    cdef bint _grad_swappable        # the buffer is ours: backward may replace its data
    cdef bint _grad_lazy             # attached, buffer not made yet (Note [Lazy grad buffers])
    cdef public bint _fresh_grad     # a backward pass wrote .grad since this was last cleared
                                     #   (MXNet's flag; attach_grad and mark_variables clear it)
    cdef VersionCell _vcell          # in-place writes to this memory, shared with views
                                     #   (Note [Versions]); None until first needed
    cdef object __weakref__

    cdef _attach(self, int req, object grad, bint swappable)
    cdef _bump(self)
    cdef _inplace(self, ufunc, other, str what)


cdef class Primitive:
    cdef readonly str name           # the op's public name
    cdef readonly object forward     # kernel: forward(*raw_inputs, *params) -> ndarray(s)
    cdef readonly object backward    # rule: backward(g, needs, *saved, *params) -> grads
    cdef readonly object backward_graph  # the same rule bound to fastgrad's functions
    cdef readonly object backward_large  # the same rule for large arrays (Note [Bindings])
    cdef readonly bint passes_g      # every input's rule is ``g`` (Note [Pass-through rules])
    cdef bint elementwise            # forward is a ufunc of the arrays alone
                                     #   (Note [Large-array kernels])
    cdef readonly Py_ssize_t n_in    # number of array inputs (-1: any number)
    cdef Py_ssize_t nargs_arrays_only     # a call's length when it passes the arrays alone
                                          #   (n_in; -2 when a parameter is required)
    cdef Py_ssize_t nargs_all_positional  # when it passes every parameter positionally too
                                          #   (n_in + parameters; -2 when variadic)
    cdef readonly Py_ssize_t n_out   # number of outputs
    cdef readonly tuple param_names  # names of the non-array arguments, in order
    cdef readonly tuple param_defaults
    cdef tuple save_inputs           # indices of the inputs the rule reads
    cdef tuple save_shapes           # indices of the inputs whose shape the rule reads
    cdef bint save_result            # the rule reads the output
    cdef readonly tuple diff         # per input: HAS_RULE, NOT_DIFFERENTIABLE or NO_RULE
                                     #   (enum Derivative in _node.pxd)
    cdef int diff_all                # for n_in == -1: the diff value of every input
    cdef readonly bint differentiable  # False: outputs are never recorded
    cdef readonly int order          # how many times the rule can be differentiated (-1: any)
    cdef readonly bint views         # outputs may be views of input 0 (Note [Versions])
    cdef readonly bint zero          # its derivative is zero almost everywhere (floor, sign...):
                                     #   recorded for reach only (Note [Zero gradients])
    cdef readonly tuple differentiable_outputs  # per output: carries a gradient (None: all
                                     #   float/complex outputs do)
    cdef readonly int complex_mode   # 0 no complex rule, 1 same rule, 2 complex_variant
                                     #   (Note [Complex gradients] in _complex.py)
    cdef readonly Primitive complex_variant  # the op with its rule for complex values
    cdef readonly Py_ssize_t defer_input  # the input whose gradient is a product x.T @ g a
                                     #   pass may defer and stack, or -1
                                     #   (Note [Deferred weight gradients] in
                                     #   _kernels/_forward.py; Op(deferred=...))
    cdef Py_ssize_t defer_saved      # the factor x's index among the values the rule saves
    cdef void *vectorcall            # the call entry (Note [Primitive vectorcall])

    cdef object apply(self, tuple args, tuple params)
    cdef object _apply(self, tuple args, tuple params, PyObject **rawv, Py_ssize_t n,
                       bint on_stack, Py_ssize_t *filled)
    cdef Node _record(self, tuple args, PyObject **raws, tuple params, object out,
                      Py_ssize_t n_out)


cdef enum:
    RAW_ARGV = 8            # raw inputs apply keeps on its stack (Note [Raw arguments])

cdef enum:
    GRAD_NULL = 0
    GRAD_WRITE = 1
    GRAD_ADD = 2

cdef ndarray wrap(object data, Node node, Py_ssize_t oidx, type cls=*)
cdef VersionCell cell_of(ndarray a)
cdef unsigned long version_of(ndarray a) noexcept
