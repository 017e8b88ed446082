# Elementwise ufuncs split across threads on large arrays.  See Note [Parallel kernels] in
# _parallel.pyx.

cdef bint is_large(object a) noexcept     # an ndarray worth splitting (a cheap C-level test)
cdef Py_ssize_t min_size() noexcept       # the smallest size is_large() accepts
cdef bint any_large(tuple args) noexcept  # is_large() of some item of args
cdef object call(object ufunc, tuple args, object out=*, int elide=*)  # result, or None
