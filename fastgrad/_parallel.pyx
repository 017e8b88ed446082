"""Elementwise ufuncs split across threads on large arrays.

Note [Parallel kernels]
~~~~~~~~~~~~~~~~~~~~~~~
NumPy releases the GIL inside a ufunc's inner loop, so one large elementwise call can run on
several cores by calling the ufunc on slices of its operands, each with ``out=`` the matching
slice of one output allocated up front. ``call()`` does that when it is safe, and returns
``None`` (the caller then calls the ufunc as usual) otherwise:

* the ufunc is an elementwise ``numpy.ufunc`` with one or two inputs and one output;
* every array operand is an exact ``numpy.ndarray`` of a boolean, integer or real float
  dtype, and is either C-contiguous with the common shape, 0-d, or a broadcast scalar (all
  strides 0, e.g. the gradient of a ``sum``), which is passed on as a 0-d view; other operands
  are Python or NumPy scalars. Anything else (broadcasting between shapes, other strides,
  subclasses, complex or object dtypes) falls back;
* the arrays have at least ``min_size`` elements (``2**16``) for ufuncs that cost several
  nanoseconds an element (trigonometric, hyperbolic, ``power``, ``expm1``...), eight times
  that (``2**19``) for the others, which are bound by memory (``add``, ``multiply``,
  ``maximum``, comparisons, and ``exp``, ``log``, ``sqrt`` with their SIMD loops), and more
  than one thread is configured. Both measured on 2 cores: below them the hand-off and the page faults of the
  fresh output in two threads cost more than the second core saves.

Chunk boundaries are multiples of 8192 elements from the start, so every element goes through
the same inner loop, at the same position within its SIMD block and with the same alignment,
as in the unsplit call: results are bit-identical (reductions are never split, since their
order of summation would change). The output's dtype is that of the ufunc applied to empty
slices of the operands, so type resolution, weak Python scalars and type errors are NumPy's.

The calling thread runs the first chunk and a persistent pool of ``num_threads - 1`` daemon
workers, created on first use, the others; ``num_threads`` is ``FASTGRAD_NUM_THREADS`` if set
(``1`` turns splitting off), else the number of cores this process may use
(``os.sched_getaffinity``). An exception in a worker is raised in the caller once all chunks
are done. Floating-point errors follow the caller's ``numpy.errstate``: every chunk runs in
``'call'`` mode and records its flags; afterwards the caller treats the union of the flags as
NumPy does after one call (in the order divide, over, under, invalid: ``'warn'`` issues one
``RuntimeWarning`` "... encountered in <ufunc>" attributed to the caller's frame, ``'raise'``
raises ``FloatingPointError``). Under an ``errstate`` mode of ``'call'``, ``'print'`` or
``'log'`` nothing is split.

Hooks, each a C-level size test on the hot path: ``Primitive.apply`` for kernels that are
ufuncs; the engine's in-place gradient accumulation; the engine picks, for a node whose
gradient is a large array, the rule's third binding (Note [Two bindings]), whose operators
and ufunc names call this module; ``relu``'s kernel.
"""

cimport cython
cimport numpy as cnp
from cpython.exc cimport PyErr_WarnEx
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.ref cimport Py_REFCNT

import os
import threading
from _thread import allocate_lock
from queue import SimpleQueue

import numpy as _np

cnp.import_array()

cdef type NP_NDARRAY = _np.ndarray
cdef type UFUNC = _np.ufunc
cdef type NP_GENERIC = _np.generic
cdef object _geterr = _np.geterr
cdef object _errstate = _np.errstate
cdef object _empty = _np.empty

cdef Py_ssize_t _min_size = 1 << 16
cdef Py_ssize_t CHEAP_FACTOR = 8    # fast ufuncs split from 8 * _min_size elements
cdef int _nthreads = 0              # 0: not read yet
cdef Py_ssize_t ALIGN = 8192        # chunk boundaries, in elements
cdef list _workers = []
cdef object _tasks = None
cdef object _pool_lock = threading.Lock()

cdef tuple _FLAGS = ((1, "divide", "divide by zero"), (2, "over", "overflow"),
                     (4, "under", "underflow"), (8, "invalid", "invalid value"))
cdef frozenset _SPLIT_MODES = frozenset(["ignore", "warn", "raise"])
# Ufuncs that cost several nanoseconds an element: split from _min_size elements; all the
# others (one fast pass over memory: add, exp, maximum...) from CHEAP_FACTOR times that.
cdef frozenset _COSTLY = frozenset([getattr(_np, name) for name in (
    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh",
    "arcsinh", "arccosh", "arctanh", "power", "float_power", "logaddexp", "logaddexp2",
    "expm1", "log1p", "cbrt", "fmod", "mod", "hypot")])


cdef class _Flags:
    """An ``errstate`` callback that records the floating-point flags it is given."""
    cdef public int flags

    def __call__(self, kind, int flag):
        self.flags |= flag


def _default_threads():
    env = os.environ.get("FASTGRAD_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError("FASTGRAD_NUM_THREADS must be a positive integer, not %r"
                             % env) from None
        if n < 1:
            raise ValueError("FASTGRAD_NUM_THREADS must be a positive integer, not %r" % env)
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def set_num_threads(n=None):
    """Use ``n`` threads for large elementwise ufuncs (``None``: ``FASTGRAD_NUM_THREADS`` or
    the usable cores; ``1``: never split). Returns the previous number."""
    global _nthreads
    old = _nthreads
    if n is None:
        n = _default_threads()
    n = int(n)
    if n < 1:
        raise ValueError("the number of threads must be at least 1")
    _nthreads = n
    return old


def get_num_threads():
    """The number of threads large elementwise ufuncs run on."""
    if _nthreads == 0:
        set_num_threads(None)
    return _nthreads


def set_min_size(Py_ssize_t n):
    """Split arrays of at least ``n`` elements (returns the previous threshold)."""
    global _min_size
    old = _min_size
    _min_size = max(n, 1)
    return old


def get_min_size():
    return _min_size


def _after_fork():
    global _workers, _tasks
    _workers = []
    _tasks = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _work(tasks):
    flags = _Flags()
    _np.seterr(all="call")
    _np.seterrcall(flags)
    while True:
        task = tasks.get()
        if task is None:
            return
        uf, args, out, done, slot = task
        task = None
        flags.flags = 0
        try:
            uf(*args, out=out)
        except BaseException as exc:
            slot[0] = exc
        slot[1] = flags.flags
        uf = args = out = slot = None
        done.release()
        done = None


cdef int _ensure_pool() except -1:
    global _tasks
    cdef Py_ssize_t want = _nthreads - 1
    if _tasks is not None and len(_workers) >= want:
        return 0
    with _pool_lock:
        if _tasks is None:
            _tasks = SimpleQueue()
        while len(_workers) < want:
            t = threading.Thread(target=_work, args=(_tasks,), daemon=True,
                                 name="fastgrad-kernel-%d" % len(_workers))
            t.start()
            _workers.append(t)
    return 0


cdef inline bint _dtype_ok(int t) noexcept:
    return t == cnp.NPY_DOUBLE or t == cnp.NPY_FLOAT or t == cnp.NPY_BOOL or (
        cnp.PyTypeNum_ISINTEGER(t))


cdef bint is_large(object a) noexcept:
    return (type(a) is NP_NDARRAY and cnp.PyArray_SIZE(<cnp.ndarray>a) >= _min_size
            and _nthreads != 1)


cdef bint any_large(tuple args) noexcept:
    cdef Py_ssize_t i
    for i in range(PyTuple_GET_SIZE(args)):
        if is_large(<object>PyTuple_GET_ITEM(args, i)):
            return True
    return False


cdef inline bint _all_zero_strides(cnp.ndarray a) noexcept:
    cdef int k
    for k in range(cnp.PyArray_NDIM(a)):
        if cnp.PyArray_STRIDE(a, k) != 0:
            return False
    return True


cdef inline bint _disjoint(cnp.ndarray a, cnp.ndarray out) noexcept:
    """Whether ``a`` (contiguous or a broadcast scalar) and the contiguous ``out`` share no
    byte, or are the same elements (``a`` *is* the output, as in ``acc += g``)."""
    cdef char* p = <char*>cnp.PyArray_DATA(a)
    cdef char* q = <char*>cnp.PyArray_DATA(out)
    cdef Py_ssize_t na = cnp.PyArray_NBYTES(a) if cnp.PyArray_NDIM(a) == 0 or \
        cnp.PyArray_IS_C_CONTIGUOUS(a) else cnp.PyArray_ITEMSIZE(a)
    if p == q and na == cnp.PyArray_NBYTES(out) and \
            cnp.PyArray_TYPE(a) == cnp.PyArray_TYPE(out):
        return True
    return p + na <= q or q + cnp.PyArray_NBYTES(out) <= p


cdef inline bint _reusable(cnp.ndarray a) noexcept:
    return (cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISWRITEABLE(a)
            and cnp.PyArray_BASE(a) == NULL and cnp.PyArray_NDIM(a) > 0)


cdef object call(object ufunc, tuple args, object out=None, int elide=0):
    """``ufunc(*args)`` (or ``ufunc(*args, out=out)``) run in chunks on several threads, or
    ``None`` when that is not possible or not worth it (Note [Parallel kernels]). Bit ``i``
    of ``elide``: argument ``i`` is a temporary nothing else references, which may become
    the output when its dtype is the result's, as NumPy's own temporary elision does."""
    cdef Py_ssize_t n = PyTuple_GET_SIZE(args), i, k, size, lo, hi, step
    cdef object shape = None
    cdef object a
    cdef cnp.ndarray arr
    cdef list flat
    cdef int nd
    if _nthreads == 0:
        set_num_threads(None)
    if _nthreads < 2 or n < 1 or n > 2 or type(ufunc) is not UFUNC:
        return None
    if ufunc.nin != n or ufunc.nout != 1 or ufunc.signature is not None:
        return None
    flat = [None] * n
    for i in range(n):
        a = <object>PyTuple_GET_ITEM(args, i)
        if type(a) is NP_NDARRAY:
            arr = <cnp.ndarray>a
            if not _dtype_ok(cnp.PyArray_TYPE(arr)):
                return None
            nd = cnp.PyArray_NDIM(arr)
            if nd == 0:
                flat[i] = a
                continue
            if shape is None:
                shape = a.shape
            elif a.shape != shape:
                return None
            if cnp.PyArray_IS_C_CONTIGUOUS(arr):
                flat[i] = cnp.PyArray_Ravel(arr, cnp.NPY_CORDER)
            elif _all_zero_strides(arr):
                flat[i] = a[(0,) * nd + (Ellipsis,)]       # the broadcast scalar, 0-d
            else:
                return None
        elif type(a) is float or type(a) is int or type(a) is bool:
            flat[i] = a
        elif isinstance(a, NP_GENERIC) and _dtype_ok(a.dtype.num):
            flat[i] = a
        else:
            return None
    if shape is None:
        return None
    size = 1
    for k in shape:
        size *= k
    cdef bint small = size < _min_size or (size < _min_size * CHEAP_FACTOR
                                            and ufunc not in _COSTLY)
    if small and not elide:
        return None
    if out is not None:
        if type(out) is not NP_NDARRAY or out.shape != shape:
            return None
        arr = <cnp.ndarray>out
        if not (cnp.PyArray_IS_C_CONTIGUOUS(arr) and cnp.PyArray_ISWRITEABLE(arr)
                and _dtype_ok(cnp.PyArray_TYPE(arr))):
            return None
        for i in range(n):
            a = <object>PyTuple_GET_ITEM(args, i)
            if type(a) is NP_NDARRAY and not _disjoint(<cnp.ndarray>a, arr):
                return None
    errs = _geterr()
    for mode in errs.values():
        if mode not in _SPLIT_MODES:
            return None
    # Type resolution (and its errors) exactly as NumPy's: run the ufunc on empty slices.
    probe = tuple([f[:0] if type(f) is NP_NDARRAY and cnp.PyArray_NDIM(<cnp.ndarray>f) else f
                   for f in flat])
    try:
        if out is None:
            r = ufunc(*probe)
            if type(r) is not NP_NDARRAY:
                return None
            for i in range(n):
                a = <object>PyTuple_GET_ITEM(args, i)
                if elide & (1 << i) and type(a) is NP_NDARRAY and _reusable(<cnp.ndarray>a) \
                        and a.shape == shape and a.dtype == r.dtype:
                    out = a
                    break
            else:
                out = _empty(shape, r.dtype)
        else:
            ufunc(*probe, out=cnp.PyArray_Ravel(<cnp.ndarray>out, cnp.NPY_CORDER)[:0])
    except Exception:
        return None                  # the caller's plain call raises it, with its context
    step = (size + _nthreads - 1) // _nthreads
    step = (step + ALIGN - 1) // ALIGN * ALIGN
    if small or step >= size:
        # Not worth splitting; but a temporary can still take the result, in one call.
        for i in range(n):
            if out is <object>PyTuple_GET_ITEM(args, i):
                return ufunc(*args, out=out)
        return None
    oflat = cnp.PyArray_Ravel(<cnp.ndarray>out, cnp.NPY_CORDER)
    _ensure_pool()
    pending = []
    lo = step
    while lo < size:
        hi = min(lo + step, size)
        chunk = tuple([f[lo:hi] if type(f) is NP_NDARRAY and cnp.PyArray_NDIM(<cnp.ndarray>f)
                       else f for f in flat])
        done = allocate_lock()
        done.acquire()
        slot = [None, 0]
        _tasks.put((ufunc, chunk, oflat[lo:hi], done, slot))
        pending.append((done, slot))
        lo = hi
    chunk = tuple([f[:step] if type(f) is NP_NDARRAY and cnp.PyArray_NDIM(<cnp.ndarray>f)
                   else f for f in flat])
    flags = _Flags()
    error = None
    try:
        with _errstate(all="call", call=flags):
            ufunc(*chunk, out=oflat[:step])
    except BaseException as exc:
        error = exc
    cdef int bits = flags.flags
    for done, slot in pending:
        done.acquire()
        if error is None and slot[0] is not None:
            error = slot[0]
        bits |= <int>slot[1]
    if error is not None:
        raise error
    if bits:
        _report(ufunc, bits, errs)
    return out


cdef int _report(object ufunc, int bits, dict errs) except -1:
    """Treat the floating-point flags ``bits`` as NumPy does after a ufunc call."""
    cdef int bit
    for bit, name, what in _FLAGS:
        if bits & bit:
            mode = errs[name]
            msg = "%s encountered in %s" % (what, ufunc.__name__)
            if mode == "warn":
                if PyErr_WarnEx(RuntimeWarning, msg.encode(), 1) < 0:
                    return -1
            elif mode == "raise":
                raise FloatingPointError(msg)
    return 0


def apply(ufunc, *args):
    """``ufunc(*args)``, split across threads when the arrays are large enough."""
    if any_large(args):
        r = call(ufunc, args)
        if r is not None:
            return r
    return ufunc(*args)


cdef class Split:
    """A ufunc called through ``apply`` (the names of the rules' third binding)."""
    cdef readonly object ufunc

    def __init__(self, ufunc):
        self.ufunc = ufunc

    def __call__(self, *args, **kwargs):
        if not kwargs and any_large(args):
            r = call(self.ufunc, args)
            if r is not None:
                return r
        return self.ufunc(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.ufunc, name)

    def __repr__(self):
        return "<split %r>" % (self.ufunc,)


# Operators of the rules' third binding: the ufunc an ndarray operator calls, split when large,
# else the operator itself (so scalar-only arithmetic keeps Python's semantics).

cdef object _add = _np.add, _subtract = _np.subtract, _multiply = _np.multiply
cdef object _divide = _np.divide, _negative = _np.negative
cdef object _greater = _np.greater, _greater_equal = _np.greater_equal
cdef object _less = _np.less, _less_equal = _np.less_equal
cdef object _equal = _np.equal, _not_equal = _np.not_equal


cdef inline object _bin(object uf, object a, object b):
    # A reference count of 2 here (the caller's stack and this function's argument): a
    # temporary of the rule's expression, which the result may overwrite.
    cdef int elide
    if is_large(a) or is_large(b):
        elide = (Py_REFCNT(a) == 2) | ((Py_REFCNT(b) == 2) << 1)    # before (a, b) exists
        return call(uf, (a, b), None, elide)
    return None


def op_add(a, b):
    r = _bin(_add, a, b)
    return a + b if r is None else r


def op_sub(a, b):
    r = _bin(_subtract, a, b)
    return a - b if r is None else r


def op_mul(a, b):
    r = _bin(_multiply, a, b)
    return a * b if r is None else r


def op_div(a, b):
    r = _bin(_divide, a, b)
    return a / b if r is None else r


def op_neg(a):
    cdef int elide = Py_REFCNT(a) == 2
    r = call(_negative, (a,), None, elide) if is_large(a) else None
    return -a if r is None else r


def op_gt(a, b):
    r = _bin(_greater, a, b)
    return a > b if r is None else r


def op_ge(a, b):
    r = _bin(_greater_equal, a, b)
    return a >= b if r is None else r


def op_lt(a, b):
    r = _bin(_less, a, b)
    return a < b if r is None else r


def op_le(a, b):
    r = _bin(_less_equal, a, b)
    return a <= b if r is None else r


def op_eq(a, b):
    r = _bin(_equal, a, b)
    return a == b if r is None else r


def op_ne(a, b):
    r = _bin(_not_equal, a, b)
    return a != b if r is None else r


