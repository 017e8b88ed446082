"""Fused elementwise kernels: NumPy ufuncs compiled here through NumPy's public ufunc C API
(``PyUFunc_FromFuncAndData``), each one pass over memory where NumPy's composition of the same
formula takes several.

Note [Fused kernels]
~~~~~~~~~~~~~~~~~~~~
A derivative such as ``where(x == y, 0.5 * g, g * (x > y))`` costs NumPy five passes and four
temporaries of the full size; the same formula evaluated element by element in one loop reads
each input once and writes one output. The kernels here are ordinary ufuncs (broadcasting,
``out=``, type resolution and errors are NumPy's), with loops for float32 and float64 (and
complex where the op has complex values), a contiguous fast path and a strided one, and no
GIL. Each loop computes its formula in the operand precision with the operations in the order
the table's composition writes them, so results equal the composition bit for bit (the C
compiler is not allowed to contract ``a * b + c`` into a fused multiply-add: see setup.py).
They are ops of the table like any other (``_table_fused.py``), each with its own derivative
rule written with table ops, so higher orders work. Their Python names, for the executor and
other callers that want the one-pass kernel on plain arrays:

``maximum_backward(g, x, y)``
    ``g`` where ``x > y``, ``0.5 * g`` where ``x == y``, ``g * 0`` elsewhere: the gradient of
    ``maximum(x, y)`` with respect to ``x`` (Note [Ties of maximum] in _table_fused.py); with
    ``x`` and ``y`` swapped, with respect to ``y`` (and ``minimum``'s, swapped again). A NaN
    operand raises no floating-point error, as NumPy's comparisons raise none; an infinite
    ``g`` where ``x < y`` (or unordered) raises invalid, its result being NaN (Note
    [Comparisons and the invalid flag] in ``_fused_loops.h``).
``sigmoid_backward(g, y)``
    ``g * y * (1 - y)``, the gradient of ``sigmoid`` from its output ``y``.
``tanh_backward(g, y)``
    ``g * (1 - y * y)``, the gradient of ``tanh`` from its output ``y`` (complex loops too).
The loops are vectorized (and built for AVX2 too on x86-64 Linux) where every operand is
contiguous, the gradient or the second operand possibly one value broadcast
(``_fused_loops.h``).
"""

cimport numpy as cnp
from numpy cimport npy_intp

cnp.import_array()
cnp.import_ufunc()

ctypedef fused complexes:
    float complex
    double complex


cdef extern from "_fused_loops.h":
    # NumPy's inner-loop signature (Note [Fused kernels]); the loops are C, vectorized
    void fg_maximum_backward_f(char **, npy_intp *, npy_intp *, void *) noexcept nogil
    void fg_maximum_backward_d(char **, npy_intp *, npy_intp *, void *) noexcept nogil
    void fg_sigmoid_backward_f(char **, npy_intp *, npy_intp *, void *) noexcept nogil
    void fg_sigmoid_backward_d(char **, npy_intp *, npy_intp *, void *) noexcept nogil
    void fg_tanh_backward_f(char **, npy_intp *, npy_intp *, void *) noexcept nogil
    void fg_tanh_backward_d(char **, npy_intp *, npy_intp *, void *) noexcept nogil


# tanh_backward's complex loops (complex tanh's rule, conj(1 - y * y), is not routed here)
cdef inline void _tanh_backward_t(char **args, npy_intp *dims, npy_intp *steps,
                                  complexes kind) noexcept nogil:
    cdef npy_intp i, n = dims[0]
    cdef char *g = args[0]
    cdef char *y = args[1]
    cdef char *out = args[2]
    cdef complexes yv, one = 1
    for i in range(n):
        yv = (<complexes *> y)[0]
        (<complexes *> out)[0] = (<complexes *> g)[0] * (one - yv * yv)
        g += steps[0]
        y += steps[1]
        out += steps[2]


cdef void _tanh_backward_F(char **args, npy_intp *dims, npy_intp *steps,
                           void *data) noexcept nogil:
    cdef float complex kind = 0
    _tanh_backward_t(args, dims, steps, kind)


cdef void _tanh_backward_D(char **args, npy_intp *dims, npy_intp *steps,
                           void *data) noexcept nogil:
    cdef double complex kind = 0
    _tanh_backward_t(args, dims, steps, kind)


# ---------------------------------------------------------------- the ufunc objects
# NumPy keeps pointers to the loop, data and type arrays: they live as long as the module.
cdef cnp.PyUFuncGenericFunction _max_loops[2]
cdef cnp.PyUFuncGenericFunction _sig_loops[2]
cdef cnp.PyUFuncGenericFunction _tanh_loops[4]
cdef void *_no_data[4]
cdef char _types_ddd[8]
cdef char _types_dd[12]

_no_data[:] = [NULL, NULL, NULL, NULL]
_max_loops[:] = [<cnp.PyUFuncGenericFunction> fg_maximum_backward_f,
                 <cnp.PyUFuncGenericFunction> fg_maximum_backward_d]
_sig_loops[:] = [<cnp.PyUFuncGenericFunction> fg_sigmoid_backward_f,
                 <cnp.PyUFuncGenericFunction> fg_sigmoid_backward_d]
_tanh_loops[:] = [<cnp.PyUFuncGenericFunction> fg_tanh_backward_f,
                  <cnp.PyUFuncGenericFunction> fg_tanh_backward_d,
                  <cnp.PyUFuncGenericFunction> _tanh_backward_F,
                  <cnp.PyUFuncGenericFunction> _tanh_backward_D]
_types_ddd[:] = [cnp.NPY_FLOAT, cnp.NPY_FLOAT, cnp.NPY_FLOAT, cnp.NPY_FLOAT,
                 cnp.NPY_DOUBLE, cnp.NPY_DOUBLE, cnp.NPY_DOUBLE, cnp.NPY_DOUBLE]
_types_dd[:] = [cnp.NPY_FLOAT, cnp.NPY_FLOAT, cnp.NPY_FLOAT,
                cnp.NPY_DOUBLE, cnp.NPY_DOUBLE, cnp.NPY_DOUBLE,
                cnp.NPY_CFLOAT, cnp.NPY_CFLOAT, cnp.NPY_CFLOAT,
                cnp.NPY_CDOUBLE, cnp.NPY_CDOUBLE, cnp.NPY_CDOUBLE]

maximum_backward = cnp.PyUFunc_FromFuncAndData(
    _max_loops, _no_data, _types_ddd, 2, 3, 1, cnp.PyUFunc_None, "maximum_backward",
    "maximum_backward(g, x, y): g where x > y, 0.5 * g where x == y, g * 0 elsewhere "
    "(Note [Fused kernels] in fastgrad/_kernels/_fused.pyx).", 0)
sigmoid_backward = cnp.PyUFunc_FromFuncAndData(
    _sig_loops, _no_data, _types_dd, 2, 2, 1, cnp.PyUFunc_None, "sigmoid_backward",
    "sigmoid_backward(g, y): g * y * (1 - y), sigmoid's gradient from its output y.", 0)
tanh_backward = cnp.PyUFunc_FromFuncAndData(
    _tanh_loops, _no_data, _types_dd, 4, 2, 1, cnp.PyUFunc_None, "tanh_backward",
    "tanh_backward(g, y): g * (1 - y * y), tanh's gradient from its output y.", 0)
