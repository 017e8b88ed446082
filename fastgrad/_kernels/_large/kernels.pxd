# The kernel interface for large arrays (Note [Large-array kernels] in _large/__init__.py).
#
# Every function takes the same operands as the NumPy call it stands for and either does that
# call's work, giving NumPy's result bit for bit (sum_rows: its own order, Note [Row sums]),
# or declines (None / False) and leaves the caller to call NumPy. Small arrays are declined
# by a C-level size test.

cdef object elementwise(object ufunc, tuple args)   # ufunc(*args), or None
cdef bint add_into(object acc, object g) except -1  # acc += g done (True), or not (False)
cdef object add(object a, object b)                 # a + b (a fresh array), or None
cpdef object sum_rows(object x, Py_ssize_t nlead)    # the sum over the nlead leading axes, or None
cdef bint large_rule(object g) noexcept              # run the rule's large binding for g?
cdef Py_ssize_t large_rule_size() noexcept           # ... the size from which (for Filled g)

# Within the package.
cdef bint is_large(object a) noexcept                # an ndarray these kernels would take
cdef Py_ssize_t min_size() noexcept                  # the smallest size is_large() accepts
cdef object call(object ufunc, tuple args, object out=*, int elide=*)
cdef object use_buffer_cache()                      # the allocator it replaces
cdef void restore_allocator(object previous) except *
