"""Elementwise ufuncs split across threads on large arrays.

Note [Parallel kernels]
~~~~~~~~~~~~~~~~~~~~~~~
One large elementwise ufunc call can run on several cores, each computing a slice of one
output allocated up front. ``call()`` does that when it is safe, and returns ``None`` (the
caller then calls the ufunc as usual) otherwise. It needs an elementwise ``numpy.ufunc`` with
one to three inputs (three: the fused kernels' ``maximum_backward``, Note [Fused kernels] in
``_fused.pyx``) and one output, exact ``numpy.ndarray`` operands (or Python and NumPy
scalars), more than one thread configured, and arrays of at least ``min_size`` elements
(``2**16``) for ufuncs that cost several nanoseconds an element (trigonometric, hyperbolic,
``power``, ``expm1``...), and for the others, which are bound by memory (``add``,
``multiply``, ``maximum``, comparisons, and ``exp``, ``log``, ``sqrt`` with their SIMD
loops), twice that on the kernel pool and eight times that on Python threads.

Splitting only pays when the ops around it split the same way. On the 2-core reference
machine a megabyte that one core wrote moves to the other core's cache at a few GB/s, so an
add split in two followed by a sum on one core is slower than both on one core. Hence the
pool also runs the reductions a backward pass makes on large arrays: full sums (``sum_all``,
NumPy's pairwise order, bit for bit) and sums over leading axes (``sum_rows``, Note [Row
sums]); a mask cast for relu's gradient (``cast_mask``); and every slice goes to the same
thread each time (thread ``t`` takes chunk ``t``), so consecutive ops find their data in the
cache of the core that wrote it. Fresh outputs come from a cache of freed buffers (Note
[Buffer cache] in ``pool.h``): page faults in two threads at once cost more than the work.

There are two ways to run the slices:

* The kernel pool (``_c_call``, Note [Kernel pool] in ``pool.h``): when every array operand
  is C-contiguous and already of the dtype of NumPy's loop for these operands (float or
  bool loops only), C threads call that very loop. Operands may broadcast: the output is cut
  into rows along the broadcast axes, each row one call of the loop, as NumPy's iterator cuts
  it. A scalar or 0-d array operand (``maximum(z, 0)``'s ``0``, a gradient of one value) is
  converted once to the loop's dtype, as NumPy converts it, and read with stride 0. No GIL
  is involved.
* Python threads (the rest of ``call``): operands that NumPy must cast, integer dtypes, 0-d
  or broadcast-scalar operands of the common shape. Each worker calls the ufunc on its
  slices with ``out=``. Broadcasting between shapes, other strides, subclasses, complex or
  object dtypes fall back.

Either way chunk boundaries are multiples of 8192 elements from the start (or whole rows),
so every element goes through the same inner loop, at the same position within its SIMD
block and with the same alignment, as in the unsplit call: results are bit-identical. So
are full sums; sums over leading axes have an order of their own, the same on any number of
threads (Note [Row sums]). Type resolution,
weak Python scalars and type errors are NumPy's (the pool asks NumPy to resolve the loop;
the Python path applies the ufunc to empty slices first).

``num_threads`` is ``FASTGRAD_NUM_THREADS`` if set (``1`` turns splitting off), else the
number of cores this process may use (``os.sched_getaffinity``); the workers are created on
first use. An exception in a Python worker is raised in the caller once all chunks are done.
Floating-point errors follow the caller's ``numpy.errstate``: every chunk records the flags
it raised; afterwards the caller treats their union as NumPy does after one call (in the
order divide, over, under, invalid: ``'warn'`` issues one ``RuntimeWarning`` "...
encountered in <ufunc>" attributed to the caller's frame, ``'raise'`` raises
``FloatingPointError``). Under an ``errstate`` mode of ``'call'``, ``'print'`` or ``'log'``
nothing is split.

Callers reach this module only through the interface of ``kernels.pxd`` and
``fastgrad._kernels._large`` (Note [Large-array kernels]), each call starting with a C-level size
test: ``Primitive.apply`` for kernels that are ufuncs; the engine's gradient accumulation and
sums over leading axes; the rules' large binding (Note [Bindings] in ``_bindings.py``), whose
operators and ufunc names call ``op_*`` and ``Split`` here; ``relu``'s kernel, full sums and
``Filled``'s mask casts.
"""

cimport cython
cimport numpy as cnp
from cpython.exc cimport PyErr_WarnEx
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from cpython.pythread cimport PyThread_get_thread_ident
from libc.string cimport memcpy


cdef extern from "pool.h":
    # See Note [Kernel pool] in pool.h.
    ctypedef int (*fg_loop_fn)(void *context, char *const *data, const cnp.npy_intp *dims,
                               const cnp.npy_intp *strides, void *auxdata) noexcept nogil
    ctypedef struct fg_call_info:
        fg_loop_fn strided_loop
        void *context
        void *auxdata
        cnp.npy_bool requires_pyapi
        cnp.npy_bool no_floatingpoint_errors
    ctypedef struct fg_loop:
        fg_loop_fn fn
        void *context
        void *auxdata
    ctypedef union fg_partial:
        double d
        float f
    ctypedef struct fg_job:
        int kind
        int nargs
        char *base[4]
        int n_odims
        cnp.npy_intp odims[16]
        cnp.npy_intp outer_stride[4][16]
        cnp.npy_intp inner_stride[4]
        cnp.npy_intp n_outer
        cnp.npy_intp n_inner
        cnp.npy_intp chunk
        int nchunks
        cnp.npy_intp bounds[33]
        fg_partial partial[32]
        fg_loop loops[32]
    enum:
        FG_MAX_THREADS
        FG_ELEMENTWISE
        FG_SUM_BLOCKS
        FG_SUM_ROWS
    int fg_bool_to_double(void *context, char *const *data, const cnp.npy_intp *dims,
                          const cnp.npy_intp *strides, void *auxdata) noexcept nogil
    int fg_bool_to_float(void *context, char *const *data, const cnp.npy_intp *dims,
                         const cnp.npy_intp *strides, void *auxdata) noexcept nogil
    int fg_maximum_d(void *context, char *const *data, const cnp.npy_intp *dims,
                     const cnp.npy_intp *strides, void *auxdata) noexcept nogil
    int fg_maximum_f(void *context, char *const *data, const cnp.npy_intp *dims,
                     const cnp.npy_intp *strides, void *auxdata) noexcept nogil
    int fg_minimum_d(void *context, char *const *data, const cnp.npy_intp *dims,
                     const cnp.npy_intp *strides, void *auxdata) noexcept nogil
    int fg_minimum_f(void *context, char *const *data, const cnp.npy_intp *dims,
                     const cnp.npy_intp *strides, void *auxdata) noexcept nogil
    fg_job fg_job_now
    int fg_nworkers
    int fg_pool_init() except -1
    int fg_pool_start(int n) except -1
    void fg_pool_after_fork() noexcept
    int fg_pool_acquire() noexcept
    void fg_pool_release() noexcept
    int fg_pool_run() noexcept nogil
    ctypedef struct PyDataMem_Handler:
        pass
    PyDataMem_Handler fg_mem_handler
    size_t fg_cache_limit
    size_t fg_cache_bytes
    size_t fg_cache_clear() noexcept


cdef extern from "numpy/arrayobject.h":
    object PyDataMem_SetHandler(object handler)

import os
import threading
from _thread import allocate_lock
from queue import SimpleQueue
from weakref import ref as _ref

import numpy as _np

cnp.import_array()

cdef type NP_NDARRAY = _np.ndarray
cdef type UFUNC = _np.ufunc
cdef type NP_GENERIC = _np.generic
cdef object _geterr = _np.geterr
cdef object _errstate = _np.errstate
cdef object _empty = _np.empty
cdef object _broadcast_shapes = _np.broadcast_shapes
cdef object _add_reduce = _np.add.reduce
cdef object _BOOL = _np.dtype(bool)

cdef Py_ssize_t _min_size = 1 << 16
cdef Py_ssize_t CHEAP_FACTOR = 8    # fast ufuncs split from 8 * _min_size elements
cdef Py_ssize_t POOL_CHEAP_FACTOR = 2   # ... and from 2 * _min_size on the kernel pool
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


def pool_calls():
    """How many calls ran on the kernel pool so far (Note [Kernel pool])."""
    return _pool_calls


def _after_fork():
    global _workers, _tasks
    _workers = []
    _tasks = None
    fg_pool_after_fork()


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


cdef Py_ssize_t min_size() noexcept:
    return _min_size if _nthreads != 1 else PY_SSIZE_T_MAX


cdef bint is_large(object a) noexcept:
    return (type(a) is NP_NDARRAY and cnp.PyArray_SIZE(<cnp.ndarray>a) >= _min_size
            and _nthreads != 1)


cdef inline bint any_large(tuple args) noexcept:
    cdef Py_ssize_t i
    for i in range(PyTuple_GET_SIZE(args)):
        if is_large(<object>PyTuple_GET_ITEM(args, i)):
            return True
    return False


# ------------------------------------------------------------------ the interface
# (kernels.pxd; Note [Large-array kernels])

# Each kernel can be switched off on its own, to measure what it brings (``disable``).
cdef dict _KERNELS = {"elementwise": 1, "add_into": 2, "add": 4, "sum_rows": 8,
                      "sum_all": 16, "cast_mask": 32, "apply": 64, "large_rules": 128}
cdef int _off = 0


def disable(names=()):
    """Switch off the kernels in ``names`` (keys of ``KERNELS``), and on all the others;
    their callers then call NumPy. Returns the names that were off. For measuring what each
    kernel brings; ``set_num_threads(1)`` switches them all off."""
    global _off
    cdef int bits = 0
    for name in names:
        if name not in _KERNELS:
            raise ValueError("unknown kernel %r; the kernels are %s" % (name, sorted(_KERNELS)))
        bits |= <int>_KERNELS[name]
    old = sorted(k for k, v in _KERNELS.items() if _off & <int>v)
    _off = bits
    return old


KERNELS = tuple(sorted(_KERNELS))


cdef object elementwise(object ufunc, tuple args):
    if not (_off & 1) and any_large(args):
        return call(ufunc, args)
    return None


cdef bint add_into(object acc, object g) except -1:
    return not (_off & 2) and is_large(acc) and call(_add, (acc, g), acc) is not None


cdef object add(object a, object b):
    return call(_add, (a, b)) if not (_off & 4) and is_large(a) else None


cdef bint large_rule(object g) noexcept:
    return not (_off & 128) and is_large(g)


cdef Py_ssize_t large_rule_size() noexcept:
    return PY_SSIZE_T_MAX if _off & 128 else min_size()


cdef inline bint _reusable(cnp.ndarray a) noexcept:
    return (cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISWRITEABLE(a)
            and cnp.PyArray_BASE(a) == NULL and cnp.PyArray_NDIM(a) > 0)


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


# ------------------------------------------------------------------ the C path

cdef object _HANDLER = PyCapsule_New(&fg_mem_handler, b"mem_handler", NULL)


cdef object _out(object shape, object dtype):
    """``numpy.empty(shape, dtype)`` from the buffer cache (Note [Buffer cache])."""
    old = PyDataMem_SetHandler(_HANDLER)
    try:
        return _empty(shape, dtype)
    finally:
        PyDataMem_SetHandler(old)


cdef object use_buffer_cache():
    """Make the buffer cache (Note [Buffer cache] in ``pool.h``) this context's NumPy
    allocator; returns the one it replaces, for ``restore_allocator``."""
    return PyDataMem_SetHandler(_HANDLER)


cdef void restore_allocator(object previous) except *:
    PyDataMem_SetHandler(previous)


def cached_empty(shape, dtype):
    """``numpy.empty(shape, dtype)`` whose memory comes from, and goes back to, the buffer
    cache (Note [Buffer cache] in ``pool.h``).

    For kernels that make large scratch arrays of the same size every training step (a
    convolution's columns): the cache takes a block back when NumPy frees the array, which
    happens only once nothing refers to it, so a block is never handed out while in use.
    """
    return _out(shape, dtype)


def set_cache_limit(limit):
    """Keep at most ``limit`` bytes of freed output buffers for reuse (Note [Buffer cache]
    in ``pool.h``; ``0`` frees them all and keeps none). Returns the previous limit."""
    global fg_cache_limit
    old = fg_cache_limit
    limit = int(limit)
    if limit < 0:
        raise ValueError("the cache limit must be at least 0 bytes")
    fg_cache_limit = limit
    if limit < fg_cache_bytes:
        fg_cache_clear()
    return old


def clear_cache():
    """Free the cached output buffers (Note [Buffer cache]); returns the bytes released."""
    return fg_cache_clear()


def cached_bytes():
    """Bytes of freed output buffers held for reuse."""
    return fg_cache_bytes


cdef bytes _CAPSULE = b"numpy_1.24_ufunc_call_info"
cdef dict _loops = {}               # (ufunc, operand types) -> _Loop, or None: not usable
cdef Py_ssize_t _pool_calls = 0      # calls run on the kernel pool (for tests)
cdef object _loops_lock = threading.Lock()


cdef class _Loop:
    """NumPy's strided loop for one ufunc and operand types, one copy per thread."""
    cdef object ufunc
    cdef tuple types                # what _resolve_dtypes_and_context was given
    cdef readonly tuple dtypes      # the loop's dtypes: inputs, then the output
    cdef bint check_fpe             # the loop may raise floating-point flags
    cdef bint reduction             # NumPy's reduce loop (out += a pairwise sum)
    cdef list capsules              # one call-info capsule per thread (they own the loops)

    cdef int fill(self, fg_job *job, int nthreads) except -1:
        cdef fg_call_info *info
        cdef int t
        while len(self.capsules) < nthreads:
            dtypes, capsule = self.ufunc._resolve_dtypes_and_context(
                self.types, reduction=self.reduction)
            self.ufunc._get_strided_loop(capsule)
            self.capsules.append(capsule)
        for t in range(nthreads):
            info = <fg_call_info*>PyCapsule_GetPointer(self.capsules[t], _CAPSULE)
            job.loops[t].fn = info.strided_loop
            job.loops[t].context = info.context
            job.loops[t].auxdata = info.auxdata
        return 0


cdef object _find_loop(object ufunc, tuple key):
    """The ``_Loop`` for ``key`` = (ufunc, the operands' dtypes or Python scalar types), or
    None when NumPy would cast an array operand, the loop needs the GIL, or this NumPy
    does not expose its loops."""
    cdef fg_call_info *info = NULL
    cdef _Loop made
    loop = _loops.get(key, False)
    if loop is not False:
        return loop
    loop = None
    # Array operands are keyed by their dtype, scalars by (dtype,) or their Python type; a
    # reduction by (ufunc, "reduce", dtype).
    cdef bint reduction = len(key) == 3 and key[1] == "reduce"
    if reduction:
        types = (None, key[2], None)
    else:
        types = tuple([t[0] if type(t) is tuple else t for t in key[1:]]) + (None,)
    try:
        dtypes, capsule = ufunc._resolve_dtypes_and_context(types, reduction=reduction)
        ufunc._get_strided_loop(capsule)
        info = <fg_call_info*>PyCapsule_GetPointer(capsule, _CAPSULE)
    except Exception:           # an old NumPy, no loop for these types, another capsule
        info = NULL
    if info != NULL and not info.requires_pyapi and info.strided_loop != NULL:
        ok = True
        for i in range(len(types) - 1):
            t = types[i] if reduction else key[i + 1]
            if isinstance(t, _np.dtype) and t != dtypes[i]:
                ok = False      # NumPy would cast this array first
        # Floating and boolean loops only: integer loops may raise Python errors from
        # inside the loop (power with a negative exponent), which needs the caller's thread.
        if ok and all(d.kind in "bf" for d in dtypes):
            made = _Loop.__new__(_Loop)
            made.ufunc = ufunc
            made.types = types
            made.dtypes = tuple(dtypes)
            made.check_fpe = not info.no_floatingpoint_errors
            made.reduction = reduction
            made.capsules = [capsule]
            loop = made
    with _loops_lock:
        _loops[key] = loop
    return loop


cdef object _c_call(object ufunc, tuple args, object out, int elide):
    """``ufunc(*args)`` on the kernel pool (Note [Kernel pool]), or None when the operands
    are not plain arrays that NumPy's loop can take as they are (then ``call`` goes on)."""
    global fg_job_now, _pool_calls
    cdef Py_ssize_t n = PyTuple_GET_SIZE(args), i, j, k, d, od, nd, size, ndim
    cdef cnp.ndarray arr, o
    cdef fg_job job
    cdef object a
    cdef list ops = [None] * n
    cdef list kinds = [None] * (n + 1)
    cdef object shape = None
    cdef int bits, nthreads
    cdef _Loop loop
    kinds[0] = ufunc
    for i in range(n):
        a = <object>PyTuple_GET_ITEM(args, i)
        if type(a) is NP_NDARRAY:
            arr = <cnp.ndarray>a
            if cnp.PyArray_NDIM(arr) == 0:
                kinds[i + 1] = (arr.dtype,)     # one value: converted as a NumPy scalar is
                continue
            if not cnp.PyArray_IS_C_CONTIGUOUS(arr):
                return None
            kinds[i + 1] = arr.dtype
        elif type(a) is float or type(a) is int:
            kinds[i + 1] = type(a)          # weak: takes the array's dtype (NEP 50)
        elif type(a) is bool:
            kinds[i + 1] = (_BOOL,)
        elif isinstance(a, NP_GENERIC):
            kinds[i + 1] = (a.dtype,)
        else:
            return None
    loop = _find_loop(ufunc, tuple(kinds))
    if loop is None:
        return None
    # The output's shape: the operands' broadcast shape (without NumPy's Python-level
    # broadcast_shapes when the arrays have one shape, 0-d ones aside, as most calls do).
    shapes = [(<object>PyTuple_GET_ITEM(args, i)).shape for i in range(n)
              if type(<object>PyTuple_GET_ITEM(args, i)) is NP_NDARRAY]
    shape = ()
    for one in shapes:
        if one != ():
            shape = one
            break
    for one in shapes:
        if one != shape and one != ():
            try:
                shape = _broadcast_shapes(*shapes)
            except ValueError:
                return None         # NumPy raises it
            break
    ndim = len(shape)
    size = 1
    for k in shape:
        size *= k
    if size < _pool_min(ufunc):
        return None
    odtype = loop.dtypes[n]
    # Scalars (and 0-d arrays) become 0-d arrays of the loop's dtype, as NumPy converts them.
    for i in range(n):
        a = <object>PyTuple_GET_ITEM(args, i)
        if type(a) is NP_NDARRAY and cnp.PyArray_NDIM(<cnp.ndarray>a) > 0:
            ops[i] = a
        else:
            try:
                ops[i] = _np.asarray(a, dtype=loop.dtypes[i])
            except (OverflowError, ValueError, TypeError):
                return None
            if (<cnp.ndarray>ops[i]).dtype != loop.dtypes[i]:
                return None
    if out is not None:
        if type(out) is not NP_NDARRAY or out.shape != shape or out.dtype != odtype:
            return None
        o = <cnp.ndarray>out
        if not (cnp.PyArray_IS_C_CONTIGUOUS(o) and cnp.PyArray_ISWRITEABLE(o)):
            return None
    else:
        for i in range(n):
            a = ops[i]
            if elide & (1 << i) and _reusable(<cnp.ndarray>a) and a.shape == shape \
                    and a.dtype == odtype:
                out = a                 # a temporary the caller owns takes the result
                break
        else:
            out = _out(shape, odtype)   # fresh, from the buffer cache (Note [Buffer cache])
        o = <cnp.ndarray>out
    for i in range(n):
        if not _disjoint(<cnp.ndarray>ops[i], o):
            return None
        if cnp.PyArray_DATA(<cnp.ndarray>ops[i]) == cnp.PyArray_DATA(o) and \
                ops[i].shape != shape:
            return None
    errs = _geterr()
    if not _errstate_ok(errs):
        return None
    # Strides of every operand over the output's shape (0 on broadcast axes), then the axes
    # merged into rows of a contiguous run: (n_outer, n_inner).
    cdef cnp.npy_intp st[4][32]
    cdef cnp.npy_intp dims[32]
    cdef Py_ssize_t m = 0
    if ndim > 32:
        return None
    for d in range(ndim):
        if shape[d] == 1:
            continue
        dims[m] = shape[d]
        for k in range(n + 1):
            arr = <cnp.ndarray>(ops[k] if k < n else o)
            nd = cnp.PyArray_NDIM(arr)
            od = d - (ndim - nd)
            if od < 0 or cnp.PyArray_DIM(arr, od) == 1:
                st[k][m] = 0
            else:
                st[k][m] = cnp.PyArray_STRIDE(arr, od)
        m += 1
    if m == 0:
        return None
    cdef cnp.npy_intp inner = dims[m - 1], outer = 1
    cdef Py_ssize_t last = m - 2
    cdef bint merge
    while last >= 0:
        merge = True
        for k in range(n + 1):
            if st[k][last] != st[k][m - 1] * inner:
                merge = False
        if not merge:
            break
        inner *= dims[last]
        last -= 1
    # The other axes index the rows (merged where every operand allows, as NumPy does).
    job.n_odims = 0
    d = last
    while d >= 0:
        if job.n_odims == 16:
            return None
        job.odims[job.n_odims] = dims[d]
        for k in range(n + 1):
            job.outer_stride[k][job.n_odims] = st[k][d]
        d -= 1
        while d >= 0:
            merge = True
            for k in range(n + 1):
                if st[k][d] != job.outer_stride[k][job.n_odims] * job.odims[job.n_odims]:
                    merge = False
            if not merge:
                break
            job.odims[job.n_odims] *= dims[d]      # the group keeps its innermost stride
            d -= 1
        outer *= job.odims[job.n_odims]
        job.n_odims += 1
    # Collected innermost first: put them in C order.
    cdef cnp.npy_intp tmp
    for i in range(job.n_odims // 2):
        j = job.n_odims - 1 - i
        tmp = job.odims[i]; job.odims[i] = job.odims[j]; job.odims[j] = tmp
        for k in range(n + 1):
            tmp = job.outer_stride[k][i]
            job.outer_stride[k][i] = job.outer_stride[k][j]
            job.outer_stride[k][j] = tmp
    job.nargs = n + 1
    for k in range(n + 1):
        arr = <cnp.ndarray>(ops[k] if k < n else o)
        job.base[k] = <char*>cnp.PyArray_DATA(arr)
        job.inner_stride[k] = st[k][m - 1]
    job.n_outer = outer
    job.n_inner = inner
    nthreads = min(_nthreads, FG_MAX_THREADS)
    if outer == 1:
        job.chunk = (inner + nthreads - 1) // nthreads
        job.chunk = (job.chunk + ALIGN - 1) // ALIGN * ALIGN
        job.nchunks = <int>((inner + job.chunk - 1) // job.chunk)
    else:
        job.chunk = (outer + nthreads - 1) // nthreads
        job.nchunks = <int>((outer + job.chunk - 1) // job.chunk)
    if job.nchunks < 2:
        return None
    job.kind = FG_ELEMENTWISE
    cdef fg_loop_fn fn = NULL
    if n == 2 and (ufunc is _maximum or ufunc is _minimum) and (
            _all_zero(&job, 0) or _all_zero(&job, 1)):
        fn = _extremum(ufunc, loop.dtypes[0]) if loop.dtypes[0] == loop.dtypes[1] else NULL
    bits = _run_job(&job, None if fn != NULL else loop, fn, ufunc.__name__)
    if bits < 0:
        return None                     # another thread's job is running
    if bits and loop.check_fpe:
        _report(ufunc.__name__, bits, errs)
    return out


# Note [Extrema with a scalar]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``maximum(z, 0)`` (relu, as ``npx.relu`` computes it and as users write it) compares with one
# value: NumPy runs its loop with a stride of 0 for it, a path that loads the operand as
# strided lanes and costs about twice an ``add`` of the same array. On the pool such a call
# (maximum or minimum, float32 or float64, one operand the same value everywhere) runs
# ``fg_maximum_d``... of ``pool.h`` instead: one loop the compiler vectorizes, computing
# ``isnan(a) ? a : (a > b ? a : b)`` (``minimum``: ``a < b``), which is NumPy's value for every
# pair on its SIMD paths: a NaN operand propagates (the first if both are), a tie of signed
# zeros gives the second operand, and no floating-point error is raised. That it is NumPy's
# value is not part of NumPy's API, so it is tested once, on first use, as the summation order
# is (Note [NumPy's summation order]): both ufuncs, both dtypes, the scalar first and second,
# for every pair of NaNs (of either sign and another payload), infinities, signed zeros,
# subnormals and ordinary values, at every position of SIMD blocks and tails; on any
# difference, or any floating-point error NumPy raises there, NumPy's loop is used.
cdef object _maximum = _np.maximum, _minimum = _np.minimum
cdef int _extrema_exact = -1            # -1 not known yet, 0 no, 1 yes


cdef inline bint _all_zero(fg_job *job, int k) noexcept:
    """Whether operand ``k`` of ``job`` is one value: every stride 0."""
    cdef int d
    if job.inner_stride[k] != 0:
        return False
    for d in range(job.n_odims):
        if job.outer_stride[k][d] != 0:
            return False
    return True


cdef fg_loop_fn _extremum_fn(object ufunc, object dtype) noexcept:
    if dtype == _np.float64:
        return fg_maximum_d if ufunc is _maximum else fg_minimum_d
    if dtype == _np.float32:
        return fg_maximum_f if ufunc is _maximum else fg_minimum_f
    return NULL


cdef fg_loop_fn _extremum(object ufunc, object dtype) except? NULL:
    """The loop of Note [Extrema with a scalar] for ``ufunc`` on ``dtype``, or NULL."""
    global _extrema_exact
    if _extrema_exact < 0:
        _extrema_exact = 1 if _extrema_probe() else 0
    return _extremum_fn(ufunc, dtype) if _extrema_exact == 1 else NULL


cdef object _extremum_here(object ufunc, object a, object b):
    """``ufunc(a, b)`` by the loop of Note [Extrema with a scalar], on this thread: one of
    ``a``, ``b`` a 0-d array, the other a contiguous 1-d array of the same dtype."""
    cdef cnp.ndarray x = <cnp.ndarray>a, y = <cnp.ndarray>b, o
    cdef char *data[3]
    cdef cnp.npy_intp dims[1]
    cdef cnp.npy_intp steps[3]
    cdef fg_loop_fn fn = _extremum_fn(ufunc, x.dtype)
    out = _empty(_broadcast_shapes(a.shape, b.shape), x.dtype)
    o = <cnp.ndarray>out
    data[0] = <char*>cnp.PyArray_DATA(x)
    data[1] = <char*>cnp.PyArray_DATA(y)
    data[2] = <char*>cnp.PyArray_DATA(o)
    dims[0] = cnp.PyArray_SIZE(o)
    steps[0] = cnp.PyArray_ITEMSIZE(x) if cnp.PyArray_NDIM(x) else 0
    steps[1] = cnp.PyArray_ITEMSIZE(y) if cnp.PyArray_NDIM(y) else 0
    steps[2] = cnp.PyArray_ITEMSIZE(o)
    fn(NULL, data, dims, steps, NULL)
    return out


def _extrema_probe():
    """Whether the loops of Note [Extrema with a scalar] give NumPy's values (and NumPy raises
    no floating-point error) for every pair of special values, anywhere in an array."""
    for dtype, bits in ((_np.float32, _np.int32), (_np.float64, _np.int64)):
        values = _np.array([_np.nan, -_np.nan, _np.inf, -_np.inf, 0.0, -0.0, 1.0, -1.0,
                            _np.finfo(dtype).smallest_subnormal, -2.5, 3.0, 0.0, 0.0], dtype)
        values[11:] = values[0]
        values[11:].view(bits)[...] |= 12345            # NaNs of another payload
        values[12] = -values[12]
        # every value at every position of a SIMD block (1021 is prime) and of the tails
        arrays = [_np.resize(values, 1021)] + [_np.roll(values, k)[:k] for k in (1, 3, 7, 13)]
        for ufunc in (_maximum, _minimum):
            for s in values:
                scalar = _np.asarray(s)
                for a in arrays:
                    for x, y in ((a, scalar), (scalar, a)):
                        try:
                            with _errstate(all="raise"):
                                expected = ufunc(x, y)
                        except FloatingPointError:
                            return False
                        if _extremum_here(ufunc, x, y).tobytes() != expected.tobytes():
                            return False
    return True


def extrema_exact():
    """Whether maximum and minimum with one value run the pool's own loop (Note [Extrema with
    a scalar]); probes NumPy on first use."""
    global _extrema_exact
    if _extrema_exact < 0:
        _extrema_exact = 1 if _extrema_probe() else 0
    return _extrema_exact == 1


cdef int _run_job(fg_job *job, _Loop loop, fg_loop_fn fn, str name) except -2:
    """Run ``job`` on the pool with ``loop`` (or the C function ``fn``): the floating-point
    error bits its chunks raised, or -1 when another thread is using the pool."""
    global fg_job_now, _pool_calls
    cdef int bits, t
    cdef int nthreads = min(_nthreads, FG_MAX_THREADS)
    fg_pool_init()
    if not fg_pool_acquire():
        return -1
    try:
        if fg_nworkers < nthreads - 1:
            fg_pool_start(nthreads - 1)
        if loop is not None:
            loop.fill(job, fg_nworkers + 1)
        else:
            for t in range(fg_nworkers + 1):
                job.loops[t].fn = fn
                job.loops[t].context = NULL
                job.loops[t].auxdata = NULL
        fg_job_now = job[0]
        with nogil:
            bits = fg_pool_run()
        memcpy(job.partial, fg_job_now.partial, sizeof(job.partial))    # while still ours
    finally:
        fg_pool_release()
    _pool_calls += 1
    if bits < 0:
        raise RuntimeError("fastgrad: numpy.%s failed in a kernel thread" % name)
    return bits


cdef inline Py_ssize_t _pool_min(object ufunc) noexcept:
    """The size from which the pool runs ``ufunc`` (None: a memory-bound pass)."""
    if ufunc is not None and ufunc in _COSTLY:
        return _min_size
    return _min_size * POOL_CHEAP_FACTOR


cdef bint _float_ok(cnp.ndarray a) noexcept:
    return (cnp.PyArray_IS_C_CONTIGUOUS(a) and (cnp.PyArray_TYPE(a) == cnp.NPY_DOUBLE
                                                 or cnp.PyArray_TYPE(a) == cnp.NPY_FLOAT))


cdef bint _errstate_ok(dict errs):
    for mode in errs.values():
        if mode not in _SPLIT_MODES:
            return False
    return True


# Whether NumPy's full sums are one pairwise recursion over the whole array, as sum_all
# assumes: -1 not known yet, 0 no, 1 yes (Note [NumPy's summation order]).
cdef int _pairwise_sums = -1


cdef bint _numpy_sums_pairwise() except -1:
    """Note [NumPy's summation order]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    ``sum_all`` reproduces NumPy's pairwise summation of one contiguous run. NumPy 2.0 does
    not sum a large array that way: its reduction runs the inner loop on buffers of 8192
    elements and adds their pairwise sums in order, a different order (found by CI's job on
    the oldest NumPy fastgrad supports). Which order the installed NumPy uses is not part
    of its API, so it is tested once, on first use: ``sum_all`` of two probe arrays, one per
    dtype, must equal ``numpy.add.reduce`` bit for bit, or ``sum_all`` declines from then
    on and the callers call NumPy."""
    global _pairwise_sums
    if _pairwise_sums < 0:
        _pairwise_sums = 1                   # lets the probes run
        n = max(_min_size * POOL_CHEAP_FACTOR, 1 << 18) + 12345
        base = _np.sin(_np.arange(n, dtype=_np.float64)) * 1000.0 + 0.1
        for dtype in (_np.float32, _np.float64):
            probe = base.astype(dtype)
            with _errstate(all="ignore"):
                ours = _sum_all(probe)
                if ours is not None and ours != _add_reduce(probe, axis=None):
                    _pairwise_sums = 0
    return _pairwise_sums == 1


def numpy_sums_pairwise():
    """Whether the installed NumPy sums a contiguous array as one pairwise recursion, which
    ``sum_all`` reproduces (Note [NumPy's summation order]); if not, ``sum_all`` declines."""
    return _numpy_sums_pairwise()


def sum_all(x):
    """``numpy.add.reduce(x)`` over every axis of a large C-contiguous float array, on the
    kernel pool; ``None`` when not applicable (the caller then calls NumPy).

    NumPy sums a contiguous run pairwise: the sum of ``n`` values is the sum of the first
    ``n2`` plus the sum of the rest, ``n2`` being ``n // 2`` rounded down to a multiple of 8.
    The blocks here are the leaves of that recursion, each summed by NumPy's own reduce loop
    and combined along the same tree, so the result is NumPy's, bit for bit (where NumPy
    sums that way: Note [NumPy's summation order]).
    """
    r = _sum_all(x)
    if r is not None and not _numpy_sums_pairwise():
        return None
    return r


cdef object _sum_all(object x):
    cdef cnp.ndarray arr
    cdef fg_job job
    cdef Py_ssize_t size, lo, hi, half, i
    cdef int nthreads, depth, leaves, c, bits
    cdef double dv[32]
    cdef float fv[32]
    if type(x) is not NP_NDARRAY or get_num_threads() < 2 or _off & 16:
        return None
    arr = <cnp.ndarray>x
    size = cnp.PyArray_SIZE(arr)
    if not _float_ok(arr) or size < _min_size * POOL_CHEAP_FACTOR:
        return None
    errs = _geterr()
    if not _errstate_ok(errs):
        return None
    loop = _find_loop(_np.add, (_np.add, "reduce", arr.dtype))
    if loop is None:
        return None
    nthreads = min(_nthreads, FG_MAX_THREADS)
    depth = 0
    while (1 << depth) < nthreads:
        depth += 1
    blocks = [(0, size)]
    for _ in range(depth):
        split = []
        for lo, hi in blocks:
            if hi - lo <= 128:
                return None             # the recursion stops here: not worth it anyway
            half = (hi - lo) // 2
            half -= half % 8
            split.append((lo, lo + half))
            split.append((lo + half, hi))
        blocks = split
    leaves = len(blocks)
    job.kind = FG_SUM_BLOCKS
    job.nargs = 3
    job.base[1] = <char*>cnp.PyArray_DATA(arr)
    job.inner_stride[1] = cnp.PyArray_ITEMSIZE(arr)
    job.n_outer = 1
    job.n_inner = size
    job.nchunks = leaves
    for c in range(leaves):
        job.bounds[c] = blocks[c][0]
    job.bounds[leaves] = size
    bits = _run_job(&job, <_Loop>loop, NULL, "add")
    if bits < 0:
        return None
    # Combine along the recursion, in the array's precision.
    if cnp.PyArray_TYPE(arr) == cnp.NPY_DOUBLE:
        for c in range(leaves):
            dv[c] = job.partial[c].d
        while leaves > 1:
            for c in range(leaves // 2):
                dv[c] = dv[2 * c] + dv[2 * c + 1]
            leaves //= 2
        result = _np.float64(dv[0])
    else:
        for c in range(leaves):
            fv[c] = job.partial[c].f
        while leaves > 1:
            for c in range(leaves // 2):
                fv[c] = fv[2 * c] + fv[2 * c + 1]
            leaves //= 2
        result = _np.float32(fv[0])
    if bits and (<_Loop>loop).check_fpe:
        _report("reduce", bits, errs)
    return result


#: The size from which sum_rows sums two halves of the rows (on any number of threads).
SUM_ROWS_MIN = 1 << 17


cpdef object sum_rows(object x, Py_ssize_t nlead):
    """The sum over the first ``nlead`` axes of a large C-contiguous float array, as the sum
    of two halves of its rows; ``None`` for arrays that do not qualify (the caller then calls
    ``numpy.add.reduce``).

    Note [Row sums]
    ~~~~~~~~~~~~~~~
    A gradient summed back over broadcast leading axes (a bias's, summed over the batch) is
    the one reduction of a backward pass that NumPy cannot split without changing its order
    of summation: it adds the rows in order. Split by columns, each thread would read half of
    every row, which the op before wrote half on each core; on the 2-core reference machine
    that costs more than it saves. So from ``SUM_ROWS_MIN`` elements (with at least 256 kept
    elements and 2 rows) the sum is defined as NumPy's sum of the first ``rows // 2`` rows
    plus NumPy's sum of the others, computed by one thread each when there are two, and in
    that same order by NumPy otherwise. The result depends only on the shape, never on the
    number of threads; it can differ from ``numpy.add.reduce`` in the last bits, as any
    other order of summation would.
    """
    cdef cnp.ndarray arr, o, t
    cdef fg_job job
    cdef Py_ssize_t size, rows = 1, cols = 1, k, half
    cdef int bits = -1
    if type(x) is not NP_NDARRAY or _off & 8:
        return None
    arr = <cnp.ndarray>x
    size = cnp.PyArray_SIZE(arr)
    if not _float_ok(arr) or size < SUM_ROWS_MIN:
        return None
    if nlead < 1 or nlead >= cnp.PyArray_NDIM(arr):
        return None
    for k in range(cnp.PyArray_NDIM(arr)):
        if k < nlead:
            rows *= cnp.PyArray_DIM(arr, k)
        else:
            cols *= cnp.PyArray_DIM(arr, k)
    if cols < 256 or rows < 2:
        return None
    half = rows // 2
    shape = x.shape[nlead:]
    out = _out(shape, arr.dtype)
    other = _out(shape, arr.dtype)
    o = <cnp.ndarray>out
    t = <cnp.ndarray>other
    errs = _geterr()
    loop = None
    if get_num_threads() >= 2 and _errstate_ok(errs):
        loop = _find_loop(_np.add, (_np.add, arr.dtype, arr.dtype))
    if loop is not None:
        job.kind = FG_SUM_ROWS
        job.nargs = 3
        job.base[0] = <char*>cnp.PyArray_DATA(o)
        job.base[1] = <char*>cnp.PyArray_DATA(arr)
        job.base[2] = <char*>cnp.PyArray_DATA(t)
        job.inner_stride[0] = job.inner_stride[1] = job.inner_stride[2] = \
            cnp.PyArray_ITEMSIZE(arr)
        job.outer_stride[1][0] = cols * cnp.PyArray_ITEMSIZE(arr)
        job.n_outer = rows
        job.n_inner = cols
        job.nchunks = 2
        job.bounds[0] = 0
        job.bounds[1] = half
        job.bounds[2] = rows
        bits = _run_job(&job, <_Loop>loop, NULL, "add")
        if bits > 0 and (<_Loop>loop).check_fpe:
            _report("reduce", bits, errs)
    if bits < 0:                        # one thread, or the pool busy: the same sums here
        flat = x.reshape(rows, cols)
        _add_reduce(flat[:half], axis=0, out=out.reshape(cols))
        _add_reduce(flat[half:], axis=0, out=other.reshape(cols))
    _np.add(out, other, out=out)
    return out


def cast_mask(mask, dtype):
    """A large boolean array as 0/1 of ``dtype`` (float32 or float64) on the kernel pool, or
    ``None`` when not applicable."""
    cdef cnp.ndarray m, o
    cdef fg_job job
    cdef Py_ssize_t size
    cdef int nthreads, bits
    cdef fg_loop_fn fn
    if type(mask) is not NP_NDARRAY or get_num_threads() < 2 or _off & 32:
        return None
    m = <cnp.ndarray>mask
    size = cnp.PyArray_SIZE(m)
    if cnp.PyArray_TYPE(m) != cnp.NPY_BOOL or not cnp.PyArray_IS_C_CONTIGUOUS(m) \
            or size < _min_size * POOL_CHEAP_FACTOR:
        return None
    dtype = _np.dtype(dtype)
    if dtype == _np.float64:
        fn = fg_bool_to_double
    elif dtype == _np.float32:
        fn = fg_bool_to_float
    else:
        return None
    out = _out(mask.shape, dtype)
    o = <cnp.ndarray>out
    nthreads = min(_nthreads, FG_MAX_THREADS)
    job.kind = FG_ELEMENTWISE
    job.nargs = 2
    job.base[0] = <char*>cnp.PyArray_DATA(m)
    job.base[1] = <char*>cnp.PyArray_DATA(o)
    job.inner_stride[0] = 1
    job.inner_stride[1] = cnp.PyArray_ITEMSIZE(o)
    job.n_outer = 1
    job.n_inner = size
    job.chunk = (size + nthreads - 1) // nthreads
    job.chunk = (job.chunk + ALIGN - 1) // ALIGN * ALIGN
    job.nchunks = <int>((size + job.chunk - 1) // job.chunk)
    if job.nchunks < 2:
        return None
    if _run_job(&job, None, fn, "astype") < 0:
        return None
    return out


cdef object call(object ufunc, tuple args, object out=None, int elide=0):
    """``ufunc(*args)`` (or ``ufunc(*args, out=out)``) run in chunks on several threads, or
    ``None`` when that is not possible or not worth it (Note [Parallel kernels]). Bit ``i``
    of ``elide``: the caller owns argument ``i``, a temporary nothing else holds (Note [Owned
    temporaries]), which may then become the output when its dtype and shape are the
    result's. Otherwise a fresh output comes from the buffer cache (Note [Buffer cache])."""
    cdef Py_ssize_t n = PyTuple_GET_SIZE(args), i, k, size, lo, hi, step
    cdef object shape = None
    cdef object a
    cdef cnp.ndarray arr
    cdef list flat
    cdef int nd
    if _nthreads == 0:
        set_num_threads(None)
    if _nthreads < 2 or n < 1 or n > 3 or type(ufunc) is not UFUNC:
        return None
    if ufunc.nin != n or ufunc.nout != 1 or ufunc.signature is not None:
        return None
    r = _c_call(ufunc, args, out, elide)
    if r is not None:
        return r
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
    if not _errstate_ok(errs):
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
                out = _out(shape, r.dtype)
        else:
            ufunc(*probe, out=cnp.PyArray_Ravel(<cnp.ndarray>out, cnp.NPY_CORDER)[:0])
    except Exception:
        return None                  # the caller's plain call raises it, with its context
    step = (size + _nthreads - 1) // _nthreads
    step = (step + ALIGN - 1) // ALIGN * ALIGN
    if small or step >= size:
        # Not worth splitting; but an owned temporary can still take the result, in one call.
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
        _report(ufunc.__name__, bits, errs)
    return out


cdef int _report(str name, int bits, dict errs) except -1:
    """Treat the floating-point flags ``bits`` as NumPy does after a call of ``name``."""
    cdef int bit
    for bit, kind, what in _FLAGS:
        if bits & bit:
            mode = errs[kind]
            msg = "%s encountered in %s" % (what, name)
            if mode == "warn":
                if PyErr_WarnEx(RuntimeWarning, msg.encode(), 1) < 0:
                    return -1
            elif mode == "raise":
                raise FloatingPointError(msg)
    return 0


def apply(ufunc, *args):
    """``ufunc(*args)``, split across threads when the arrays are large enough."""
    if not (_off & 64) and any_large(args):
        r = call(ufunc, args)
        if r is not None:
            return r
    return ufunc(*args)


# ------------------------------------------------------------------ the large binding
# (Note [Bindings] in _bindings.py)
#
# Note [Owned temporaries]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# A rule such as ``g * cos(x)`` makes a temporary (``cos(x)``) that only the expression
# holds; NumPy would reuse it as the output of the ``*`` (its temporary elision), which on a
# large backward saves one array in three. The large binding does the same from ownership it
# tracks itself, never from reference counts: a rule of this binding runs inside a *scope*
# (``rule_begin``/``rule_end``, which the rewritten rule calls), and every array that one of
# its operators or ufunc calls allocates is recorded in the scope of the running thread. An
# operand that is in the scope is a temporary of this rule's expression: the rule's own
# arguments (``g``, saved inputs, ``result``) were made outside the scope, and an expression
# without names can use a temporary only once, so nothing else holds it. The operation that
# takes it as an operand removes it from the scope and may write its result into it. When
# the rule returns, its scope ends: what it returns is handed out and is never reused. The
# scope holds weak references, so it keeps no temporary alive.

cdef dict _scopes = {}          # thread ident -> {id(array): weakref} of its running rule


def rule_begin():
    """Open the scope of a large-binding rule in this thread (Note [Owned temporaries]);
    returns the enclosing scope, for ``rule_end``."""
    cdef unsigned long t = PyThread_get_thread_ident()
    outer = _scopes.get(t)
    _scopes[t] = {}
    return outer


def rule_end(outer):
    """Close this thread's scope, restoring ``outer``."""
    cdef unsigned long t = PyThread_get_thread_ident()
    if outer is None:
        _scopes.pop(t, None)
    else:
        _scopes[t] = outer


cdef inline int _own(object r) except -1:
    """Record ``r``, just allocated by the large binding, as owned by the running rule."""
    if type(r) is NP_NDARRAY and _reusable(<cnp.ndarray>r):
        scope = _scopes.get(PyThread_get_thread_ident())
        if scope is not None:
            scope[id(r)] = _ref(r)
    return 0


cdef inline bint _take(object a):
    """Whether ``a`` is a temporary the running rule owns; it leaves the scope either way."""
    if type(a) is not NP_NDARRAY:
        return False
    scope = _scopes.get(PyThread_get_thread_ident())
    if scope is None:
        return False
    ref = scope.pop(id(a), None)
    return ref is not None and ref() is a


cdef inline object _fresh(object r, tuple args):
    """``r``, a result computed from ``args``, recorded as owned when it is new."""
    cdef Py_ssize_t i
    for i in range(PyTuple_GET_SIZE(args)):
        if r is <object>PyTuple_GET_ITEM(args, i):
            return r                    # an operand handed back (Filled's ``1 * x``)
    _own(r)
    return r


cdef class Split:
    """A ufunc of the large binding: through the kernels when large, its result owned by
    the running rule (Note [Owned temporaries])."""
    cdef readonly object ufunc

    def __init__(self, ufunc):
        self.ufunc = ufunc

    def __call__(self, *args, **kwargs):
        cdef int elide = 0
        cdef Py_ssize_t i
        if not kwargs and any_large(args):
            for i in range(PyTuple_GET_SIZE(args)):
                if _take(<object>PyTuple_GET_ITEM(args, i)):
                    elide |= 1 << i
            r = call(self.ufunc, args, None, elide)
            if r is not None:
                return _fresh(r, args)
        return _fresh(self.ufunc(*args, **kwargs), args)

    def __getattr__(self, name):
        return getattr(self.ufunc, name)

    def __repr__(self):
        return "<large %r>" % (self.ufunc,)


# Operators of the large binding: the ufunc an ndarray operator calls, through the kernels
# when large, else the operator itself (so scalar-only arithmetic keeps Python's semantics).

cdef object _add = _np.add, _subtract = _np.subtract, _multiply = _np.multiply
cdef object _divide = _np.divide, _negative = _np.negative
cdef object _greater = _np.greater, _greater_equal = _np.greater_equal
cdef object _less = _np.less, _less_equal = _np.less_equal
cdef object _equal = _np.equal, _not_equal = _np.not_equal


cdef inline object _bin(object uf, object a, object b):
    cdef int elide
    if is_large(a) or is_large(b):
        elide = _take(a) | (_take(b) << 1)
        r = call(uf, (a, b), None, elide)
        if r is not None:
            _own(r)
        return r
    return None


def op_add(a, b):
    r = _bin(_add, a, b)
    return _fresh(a + b, (a, b)) if r is None else r


def op_sub(a, b):
    r = _bin(_subtract, a, b)
    return _fresh(a - b, (a, b)) if r is None else r


def op_mul(a, b):
    r = _bin(_multiply, a, b)
    return _fresh(a * b, (a, b)) if r is None else r


def op_div(a, b):
    r = _bin(_divide, a, b)
    return _fresh(a / b, (a, b)) if r is None else r


def op_neg(a):
    r = call(_negative, (a,), None, _take(a)) if is_large(a) else None
    if r is None:
        return _fresh(-a, (a,))
    _own(r)
    return r


def op_gt(a, b):
    r = _bin(_greater, a, b)
    return _fresh(a > b, (a, b)) if r is None else r


def op_ge(a, b):
    r = _bin(_greater_equal, a, b)
    return _fresh(a >= b, (a, b)) if r is None else r


def op_lt(a, b):
    r = _bin(_less, a, b)
    return _fresh(a < b, (a, b)) if r is None else r


def op_le(a, b):
    r = _bin(_less_equal, a, b)
    return _fresh(a <= b, (a, b)) if r is None else r


def op_eq(a, b):
    r = _bin(_equal, a, b)
    return _fresh(a == b, (a, b)) if r is None else r


def op_ne(a, b):
    r = _bin(_not_equal, a, b)
    return _fresh(a != b, (a, b)) if r is None else r
