# Part of fastgrad/_core/_array.pyx, textually included by it (Cython's ``include``): one extension
# module, so every call below stays a direct C call (Note [Array parts] in _array.pyx).
# Its imports are _array.pyx's; this file imports nothing.
#
# The version cells of array memory: what the backward pass checks saved values with.
#
# Note [Versions]
# ~~~~~~~~~~~~~~~
# An in-place write (``a += b``, ``a[k] = v``) bumps the version of the array's *memory*: a
# ``VersionCell`` shared by the array and every view of it that fastgrad made (``x[1:3]``,
# ``x.T``, ``reshape``, ``detach()``, ...: ops marked ``views`` in the table share their input's
# cell when their output really is a view of it). A node remembers the sum of the versions of the
# arrays it saved and, if its rule reads its output, the output's cell; the backward pass checks
# both and raises, naming the op, if memory the rule needs was written after it was recorded —
# through the array itself or through any view. Inside ``record()`` in-place arithmetic on an
# array that belongs to the graph is refused outright, because it would rewrite history; an
# assignment ``a[k] = v`` is recorded instead (Note [Recorded assignment]). Writes through NumPy
# views of the data (``numpy.asarray(a)[...] = v``) are outside fastgrad's sight.


cdef VersionCell cell_of(ndarray a):
    """The version cell of ``a``'s memory, made on first need (Note [Versions])."""
    if a._vcell is None:
        a._vcell = VersionCell.__new__(VersionCell)
    return a._vcell


cdef unsigned long version_of(ndarray a) noexcept:
    return a._vcell.value if a._vcell is not None else 0


cdef object _root(object arr):
    """The array that owns the memory ``arr`` views (following NumPy's base chain)."""
    cdef PyObject* base
    while type(arr) is NP_NDARRAY:
        base = cnp.PyArray_BASE(<cnp.ndarray>arr)
        if base == NULL or type(<object>base) is not NP_NDARRAY:
            break
        arr = <object>base
    return arr


cdef void _share_views(object inp, tuple outs) except *:
    """Give the outputs that view ``inp``'s memory the same version cell (Note [Versions])."""
    if not isinstance(inp, ndarray):
        return
    cdef object root = _root((<ndarray>inp)._data)
    cdef ndarray o
    for obj in outs:
        o = <ndarray>obj
        if cnp.PyArray_BASE(<cnp.ndarray>o._data) != NULL and _root(o._data) is root:
            o._vcell = cell_of(<ndarray>inp)
