# The backward pass.  See Note [Scheduling], Note [Accumulation] and Note [Gradient buffer
# ownership] in _engine.pyx.  The functions below are the pass's core steps; the executor's
# replay (_plan.pyx) calls the same ones, so the two cannot disagree.

cimport numpy as cnp
from fastgrad._array cimport ndarray

cdef object fit_gradient(object g, tuple shape, object dtype, object site, Py_ssize_t i,
                         bint *allocated)
cdef object fit_gradient_like(object g, object like, object site, Py_ssize_t i,
                              bint *allocated)
cdef object add_gradient(object acc, bint acc_owned, object g, bint g_owned, bint *owned)
cdef bint rule_result_owned(object r, tuple args, tuple grads, Py_ssize_t i)
cdef tuple complete_gradients(object g, Py_ssize_t n_out, object shapes, object dtypes)
cdef void write_grad_buffer(ndarray buf, int req, object g, bint take) except *
cdef bint same_layout(cnp.ndarray a, cnp.ndarray b)
cdef object needs_mask(list wants)
cdef bint deferrable_product(object x, object y, object g) except -1
cdef dict keep_product(dict deferred, Py_ssize_t key, object x, object g)
cdef object summed_weight_gradients(list xs, list gs, dict memo)
