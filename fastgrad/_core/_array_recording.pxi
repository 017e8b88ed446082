# Part of fastgrad/_core/_array.pyx, textually included by it (Cython's ``include``): one extension
# module, so every call below stays a direct C call (Note [Array parts] in _array.pyx).
# Its imports are _array.pyx's; this file imports nothing.
#
# The recording path: Primitive (calling an op: Primitive.apply, recording its node:
# Primitive._record) and the other ways a node is recorded (custom Functions, zero nodes).
#
# Note [Recording]
# ~~~~~~~~~~~~~~~~
# Every differentiable operation is a ``Primitive``: a forward kernel written with NumPy and a
# derivative rule generated from the table in ``_derivatives.py``. Calling a primitive unwraps
# its inputs to NumPy, runs the kernel, and, only when the thread is recording *and* some input
# depends on a variable, records a ``Node`` that keeps the parents, the values the rule reads and
# the output's shape and dtype. Everything else (constants, code outside ``record()``) costs one
# kernel call and one wrapper allocation. Inputs the rule never reads are not kept, so recording
# holds no more memory than the backward pass needs.


@cython.final
cdef class Primitive:
    """A differentiable operation: a NumPy forward kernel and a generated derivative rule.

    Primitives are built from the derivative table at import and are immutable afterwards.
    Calling one is calling the operation: ``fastgrad.np.sin(x)`` *is* the ``sin`` primitive.
    """

    def __init__(self, str name, forward, backward, Py_ssize_t n_in, Py_ssize_t n_out,
                 tuple param_names, tuple param_defaults, tuple save_inputs, tuple save_shapes,
                 bint save_result, tuple diff, bint differentiable, int order=-1,
                 bint views=False, bint zero=False, tuple differentiable_outputs=None):
        self.name = name
        self.forward = forward
        self.backward = backward
        self.n_in = n_in
        self.nargs_arrays_only = n_in if REQUIRED not in param_defaults else -2
        self.nargs_all_positional = n_in + len(param_names) if n_in >= 0 else -2
        self.n_out = n_out
        self.param_names = param_names
        self.param_defaults = param_defaults
        self.save_inputs = save_inputs
        self.save_shapes = save_shapes
        self.save_result = save_result
        self.diff = diff
        self.diff_all = diff[0] if (n_in < 0 and diff) else HAS_RULE
        self.differentiable = differentiable
        self.order = order
        self.views = views
        self.zero = zero
        self.differentiable_outputs = differentiable_outputs
        self.defer_input = -1
        self.elementwise = (isinstance(forward, _np.ufunc) and forward.signature is None
                            and forward.nout == 1 and forward.nin == n_in and not param_names)
        self.vectorcall = <void *>_primitive_vectorcall

    def _set_graph_rule(self, fn):
        """Set the rule used under ``create_graph`` (once, at import; Note [Bindings])."""
        if self.backward_graph is not None:
            raise AttributeError("fastgrad.%s: its rules are fixed after import" % self.name)
        self.backward_graph = fn

    def _set_complex(self, int mode, Primitive variant=None):
        """How the op differentiates complex values (once, at import; Note [Complex
        gradients] in _complex.py)."""
        if self.complex_mode:
            raise AttributeError("fastgrad.%s: its rules are fixed after import" % self.name)
        self.complex_mode = mode
        self.complex_variant = variant

    def _set_large_rule(self, fn):
        """Set the rule used on large arrays (once, at import; Note [Bindings])."""
        if self.backward_large is not None:
            raise AttributeError("fastgrad.%s: its rules are fixed after import" % self.name)
        self.backward_large = fn

    def _set_passes_g(self):
        """Mark the op's rule as ``g`` for every input (once, at import; Note [Pass-through
        rules] in _engine.pyx)."""
        if self.passes_g:
            raise AttributeError("fastgrad.%s: its rules are fixed after import" % self.name)
        self.passes_g = True

    def _set_deferred(self, Py_ssize_t i, Py_ssize_t factor):
        """Declare the gradient for input ``i`` the product ``x.T @ g`` of input ``factor``
        (``x``) and the op's gradient, which a pass may defer and stack (once, at import; Note
        [Deferred weight gradients] in _kernels/_forward.py)."""
        if self.defer_input >= 0:
            raise AttributeError("fastgrad.%s: its rules are fixed after import" % self.name)
        if factor not in self.save_inputs:
            raise ValueError("fastgrad.%s: a deferred product needs its rule to save input %d"
                             % (self.name, factor))
        self.defer_saved = self.save_inputs.index(factor)
        self.defer_input = i

    @property
    def saves(self):
        """Indices of the inputs the derivative rule keeps, and whether it keeps the output."""
        return self.save_inputs, self.save_shapes, bool(self.save_result)

    def __repr__(self):
        return "<fastgrad op %s>" % self.name

    def __reduce__(self):
        return (_ops_lookup, (self.name,))

    # Note [Docstrings of primitives]
    # ``fastgrad.np.sin`` is a Primitive, not a function, so its docstring and signature are
    # written from the derivative table by fastgrad._ops._docs, when first asked for (help(),
    # inspect.signature, Sphinx), never at import. ``__get__`` (returning the primitive itself,
    # as a class attribute already did) makes it a method descriptor to ``inspect``, so
    # ``pydoc`` documents it as a routine instead of documenting the Primitive class.
    @property
    def __doc__(self):
        return _describe(self, "doc") if _describe is not None else None

    @property
    def __signature__(self):
        return _describe(self, "signature") if _describe is not None else None

    @property
    def __name__(self):
        return self.name

    @property
    def __qualname__(self):
        return self.name

    def __get__(self, instance, owner):
        return self

    def __call__(self, *args, **kwargs):
        if not kwargs:
            if PyTuple_GET_SIZE(args) == self.nargs_arrays_only:
                return self.apply(args, self.param_defaults)
            if PyTuple_GET_SIZE(args) == self.nargs_all_positional:
                return self.apply(args[:self.n_in], args[self.n_in:])
        return self._call_slow(args, kwargs)

    def _call_slow(self, tuple args, dict kwargs):
        cdef Py_ssize_t n_in = self.n_in
        if n_in < 0:
            if not args:
                raise TypeError("fastgrad.%s() missing its sequence of arrays" % self.name)
            inputs = tuple(args[0])
            rest = args[1:]
            if not inputs:
                raise ValueError("fastgrad.%s() needs at least one array" % self.name)
        else:
            if len(args) < n_in:
                raise TypeError("fastgrad.%s() takes %d array argument%s (%d given)"
                                % (self.name, n_in, "" if n_in == 1 else "s", len(args)))
            inputs = args[:n_in]
            rest = args[n_in:]
        names = self.param_names
        if len(rest) > len(names):
            raise TypeError("fastgrad.%s() takes at most %d arguments (%d given)"
                            % (self.name, max(n_in, 0) + len(names), len(args)))
        params = list(rest) + list(self.param_defaults[len(rest):])
        for key, value in kwargs.items():
            try:
                i = names.index(key)
            except ValueError:
                raise TypeError(_unexpected_keyword(self.name, key)) from None
            if i < len(rest):
                raise TypeError("fastgrad.%s() got multiple values for argument %r"
                                % (self.name, key))
            params[i] = value
        for i in range(len(params)):
            if params[i] is REQUIRED:
                raise TypeError("fastgrad.%s() missing required argument %r"
                                % (self.name, names[i]))
        return self.apply(inputs, tuple(params))

    # Note [Raw arguments]
    # ~~~~~~~~~~~~~~~~~~~~~
    # ``apply`` keeps the NumPy values of an op's inputs (``raws``) in a C array on its stack
    # (``RAW_ARGV`` of them; more go in a tuple, whose items are such an array) and calls the
    # kernel through vectorcall, rather than packing them in a tuple per op that the call
    # unpacks again. The array holds new references, dropped when ``apply`` returns or
    # raises; a tuple is built only where one is wanted (parameters, the large-array kernels,
    # an error's note).
    cdef object apply(self, tuple args, tuple params):
        cdef Py_ssize_t n = PyTuple_GET_SIZE(args), i, filled = 0
        cdef PyObject *rawbuf[RAW_ARGV]
        cdef PyObject **rawv = rawbuf
        cdef tuple raws = None
        if n > RAW_ARGV:
            raws = PyTuple_New(n)
            for i in range(n):
                Py_INCREF(None)
                PyTuple_SET_ITEM(raws, i, None)
            rawv = PySequence_Fast_ITEMS(raws)
        try:
            return self._apply(args, params, rawv, n, raws is None, &filled)
        finally:
            if raws is None:
                for i in range(filled):
                    Py_XDECREF(rawbuf[i])

    cdef object _apply(self, tuple args, tuple params, PyObject **rawv, Py_ssize_t n,
                       bint on_stack, Py_ssize_t *filled):
        """``apply`` with the C array ``rawv`` for the raw inputs (Note [Raw arguments]):
        ``on_stack``: it holds new references, ``*filled`` of them so far; else it is a
        tuple's items (of ``None`` until set)."""
        cdef Py_ssize_t i
        cdef bint track = False
        cdef type cls = None
        cdef object a, r
        cdef PyObject *old
        for i in range(n):
            a = <object>PyTuple_GET_ITEM(args, i)
            if isinstance(a, ndarray):
                r = (<ndarray>a)._data
                if cls is None:
                    cls = type(a)
                if (<ndarray>a)._node is not None:
                    track = True
            elif type(a) is list or type(a) is tuple:
                r = _sequence_argument(a, self, i)
                if isinstance(r, ndarray):          # Note [History through construction]
                    a = r
                    args = args[:i] + (a,) + args[i + 1:]
                    r = (<ndarray>a)._data
                    if cls is None:
                        cls = type(a)
                    if (<ndarray>a)._node is not None:
                        track = True
            elif type(a) is FILLED:
                r = _asarray(a)
            else:
                r = a
                if type(a) is not float and type(a) is not int and _foreign(a):
                    if is_recording_c() or (self.elementwise and not PyTuple_GET_SIZE(params)):
                        return _call_with_foreign(self, args, params, i)
                    r = _asarray(a)     # not recording: only its values matter
            Py_INCREF(r)
            if on_stack:
                rawv[i] = <PyObject *>r
                filled[0] = i + 1
            else:
                old = rawv[i]
                rawv[i] = <PyObject *>r
                Py_XDECREF(old)
        try:
            if PyTuple_GET_SIZE(params):
                out = self.forward(*_raw_tuple(rawv, n), *params)
            elif self.elementwise:
                out = None
                for i in range(n):
                    if is_large(<object>rawv[i]):    # Note [Large-array kernels]
                        out = elementwise(self.forward, _raw_tuple(rawv, n))
                        break
                if out is None:
                    out = PyObject_Vectorcall(self.forward, rawv, n, NULL)
            else:
                out = PyObject_Vectorcall(self.forward, rawv, n, NULL)
        except Exception as exc:
            _annotate(exc, self, _raw_tuple(rawv, n), params)
            raise
        cdef Node node = None
        if self.n_out == 1:
            if type(out) is not NP_NDARRAY:
                out = _asarray(out)
            if track and is_recording_c():
                node = self._record(args, rawv, params, out, 1)
            w = wrap(out, node, 0, cls)
            if self.views:
                _share_views(<object>PyTuple_GET_ITEM(args, 0), (w,))
            if node is not None and self.save_result and not node.zero:
                node.out_cell = cell_of(w)
                node.out_v0 = node.out_cell.value
            return w
        out = tuple([o if type(o) is NP_NDARRAY else _asarray(o) for o in out])
        if track and is_recording_c():
            node = self._record(args, rawv, params, out, len(out))
        ws = tuple([wrap(out[i], node, i, cls) for i in range(len(out))])
        if node is not None and not node.zero:
            _zero_outputs(self, node, out, ws)
        if self.views:
            _share_views(<object>PyTuple_GET_ITEM(args, 0), ws)
        if node is not None and self.save_result and not node.zero:
            # One cell watches every output the rule reads.
            cell = VersionCell.__new__(VersionCell)
            for obj in ws:
                if (<ndarray>obj)._vcell is None:
                    (<ndarray>obj)._vcell = cell
            node.out_cell = cell
        return ws

    cdef Node _record(self, tuple args, PyObject **raws, tuple params, object out,
                      Py_ssize_t n_out):
        cdef Py_ssize_t n = PyTuple_GET_SIZE(args), i, j, d
        cdef tuple parents = PyTuple_New(n)
        cdef list oidx = None
        cdef list consts = None
        cdef bint linked = False
        cdef object a, p
        cdef unsigned long vsum = 0
        # A node that carries no gradient still records what it depends on (Note [Zero
        # gradients]): every input with history is a parent, nothing is saved.
        cdef bint zero = (self.zero or not self.differentiable
                          or not _carries(out, n_out, args))
        for i in range(n):
            a = <object>PyTuple_GET_ITEM(args, i)
            p = None
            if isinstance(a, ndarray) and (<ndarray>a)._node is not None:
                d = HAS_RULE if zero else (self.diff_all if self.n_in < 0 else self.diff[i])
                if d == HAS_RULE:
                    p = (<ndarray>a)._node
                    linked = True
                    if (<ndarray>a)._oidx:
                        if oidx is None:
                            oidx = [0] * n
                        oidx[i] = (<ndarray>a)._oidx
                elif d == NO_RULE:
                    raise NotImplementedError(
                        "fastgrad.%s has no derivative with respect to its argument %d, which "
                        "depends on a variable being differentiated; detach() it or use an "
                        "op with a derivative" % (self.name, i))
            if p is None:
                if consts is None:
                    consts = [None] * n
                consts[i] = <object>raws[i]
            Py_INCREF(p)
            PyTuple_SET_ITEM(parents, i, p)
        if not linked:
            return None
        cdef Primitive rule_op = self
        # A zero node runs no rule, so it needs no complex one (comparisons of complex values).
        if not zero and self.complex_mode != 1 and _any_complex(raws, n, out, n_out):
            if self.complex_mode == 0:
                raise NotImplementedError(
                    "fastgrad.%s has no derivative checked for complex values; compute it on "
                    "the real and imaginary parts (numpy.real, numpy.imag) or detach() the "
                    "input" % self.name)
            rule_op = self.complex_variant
        cdef Node node = new_node(rule_op)
        node.parents = parents
        if consts is not None:
            node.consts = tuple(consts)
        node.parent_oidx = tuple(oidx) if oidx is not None else None
        cdef Py_ssize_t ns = PyTuple_GET_SIZE(self.save_inputs)
        cdef Py_ssize_t nsh = PyTuple_GET_SIZE(self.save_shapes)
        cdef tuple saved
        if zero:
            node.zero = True
            node.saved = ()
        elif ns or nsh:
            saved = PyTuple_New(ns + nsh)
            for i in range(nsh):
                j = <Py_ssize_t><object>PyTuple_GET_ITEM(self.save_shapes, i)
                a = <object>raws[j]
                a = a.shape if type(a) is NP_NDARRAY else _np.shape(a)
                Py_INCREF(a)
                PyTuple_SET_ITEM(saved, ns + i, a)
            for i in range(ns):
                j = <Py_ssize_t><object>PyTuple_GET_ITEM(self.save_inputs, i)
                a = <object>PyTuple_GET_ITEM(args, j)
                if isinstance(a, ndarray):
                    vsum += version_of(<ndarray>a)
                else:
                    a = <object>raws[j]
                Py_INCREF(a)
                PyTuple_SET_ITEM(saved, i, a)
            node.saved = saved
            node.vsum = vsum
        else:
            node.saved = ()
        if self.save_result and not zero:
            node.result = out
        node.params = params
        node.n_out = n_out
        if n_out == 1:
            node.out_shape = _out_shape(<cnp.ndarray>out, parents)
            node.out_dtype = <object>cnp.PyArray_DESCR(<cnp.ndarray>out)
        else:
            node.out_shape = tuple([o.shape for o in out])
            node.out_dtype = tuple([o.dtype for o in out])
        if is_anomaly_c():
            node.trace = _capture_trace()
        return node


cdef tuple _out_shape(cnp.ndarray out, tuple parents):
    """``out.shape``: the shape tuple of a parent whose single output has the same shape
    (an elementwise op's usual case), else a new one.

    Note [Shared shape tuples]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~
    A node keeps its output's shape as a tuple (``out_shape``), and ``ndarray.shape`` builds a
    new one through an attribute lookup at each call. Most recorded ops output the shape of an
    input, whose node already holds that tuple: comparing the dimensions in C and sharing the
    (immutable) tuple costs a few loads instead. Nothing compares these tuples by identity.
    """
    cdef Py_ssize_t i, k, nd = cnp.PyArray_NDIM(out)
    cdef PyObject *p
    cdef object shape
    for i in range(PyTuple_GET_SIZE(parents)):
        p = PyTuple_GET_ITEM(parents, i)
        if <object>p is None or (<Node>p).n_out != 1:
            continue
        shape = (<Node>p).out_shape
        if type(shape) is not tuple or PyTuple_GET_SIZE(shape) != nd:
            continue
        for k in range(nd):
            if (<cnp.npy_intp><object>PyTuple_GET_ITEM(shape, k)) != cnp.PyArray_DIMS(out)[k]:
                break
        else:
            return <tuple>shape
    return (<object>out).shape


# Note [Primitive vectorcall]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``fastgrad.np.sin(x)`` calls a Primitive. Cython gives ``__call__`` only the ``tp_call``
# entry, through which Python packs the arguments in a tuple and the keywords in a new dict
# per call. The type also gets a vectorcall entry (set up once, below the class): a C
# function stored in each primitive, which takes the arguments as Python's C array and goes
# straight to ``apply``. It does what ``__call__`` does; keyword calls go to ``_call_slow``
# as before. A primitive made without ``__init__`` has no entry, and Python then calls
# ``tp_call``.
cdef extern from "Python.h":
    ctypedef struct _VectorcallType "PyTypeObject":
        Py_ssize_t tp_vectorcall_offset
        unsigned long tp_flags
    unsigned long Py_TPFLAGS_HAVE_VECTORCALL
    Py_ssize_t PyVectorcall_NARGS(size_t nargsf)


cdef object _primitive_vectorcall(object callable, PyObject **argv, size_t nargsf,
                                  PyObject *kwnames):
    cdef Primitive self = <Primitive>callable
    cdef Py_ssize_t n = PyVectorcall_NARGS(nargsf), i
    cdef tuple args = PyTuple_New(n)
    for i in range(n):
        Py_INCREF(<object>argv[i])
        PyTuple_SET_ITEM(args, i, <object>argv[i])
    if kwnames == NULL:
        if n == self.nargs_arrays_only:
            return self.apply(args, self.param_defaults)
        if n == self.nargs_all_positional:
            return self.apply(args[:self.n_in], args[self.n_in:])
        return self._call_slow(args, {})
    cdef dict kwargs = {}
    cdef tuple names = <tuple>kwnames
    for i in range(PyTuple_GET_SIZE(names)):
        kwargs[<object>PyTuple_GET_ITEM(names, i)] = <object>argv[n + i]
    if not kwargs:
        return self.__call__(*args)
    return self._call_slow(args, kwargs)


cdef Primitive _probe = Primitive.__new__(Primitive)
(<_VectorcallType *>Primitive).tp_vectorcall_offset = (
    <char *>&_probe.vectorcall - <char *><PyObject *>_probe)
(<_VectorcallType *>Primitive).tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL
_probe = None


cdef tuple _raw_tuple(PyObject **rawv, Py_ssize_t n):
    """The raw inputs of ``apply`` as a tuple (Note [Raw arguments])."""
    cdef tuple t = PyTuple_New(n)
    cdef Py_ssize_t i
    for i in range(n):
        Py_INCREF(<object>rawv[i])
        PyTuple_SET_ITEM(t, i, <object>rawv[i])
    return t


cdef object _sequence_argument(object seq, Primitive op, Py_ssize_t i):
    """A list or tuple passed for an array argument: a recorded array if it holds fastgrad
    arrays (Note [History through construction] in _construction.py), else its NumPy array.
    Ragged or non-numeric sequences raise ``TypeError`` naming the op and the argument."""
    what = "fastgrad.%s: argument %d" % (op.name, i)
    if _ops._holds_array(seq):
        return _ops._from_sequence(seq, None, what)
    try:
        r = _asarray(seq)
    except ValueError as exc:
        raise TypeError("%s is a ragged sequence (%s)" % (what, exc)) from None
    _ops._check_numeric(r.dtype, what)
    return r


cdef void _zero_outputs(Primitive op, Node node, tuple out, tuple ws) except *:
    """Give each output of a multi-output node that carries no gradient (declared so in the
    table, or of an integer or bool dtype) a zero node of its own between it and ``node``:
    it still reaches what ``node`` depends on, and ``node`` sees a symbolic zero for it
    (Note [Zero gradients])."""
    cdef Py_ssize_t k
    cdef Node z
    cdef tuple flags = op.differentiable_outputs
    for k in range(len(out)):
        if (flags is None or flags[k]) and (cnp.PyArray_ISFLOAT(<cnp.ndarray>out[k])
                                            or cnp.PyArray_ISCOMPLEX(<cnp.ndarray>out[k])):
            continue
        z = new_node(_NO_GRADIENT_OUTPUT)
        z.zero = True
        z.parents = (node,)
        z.parent_oidx = (k,) if k else None
        z.saved = ()
        z.params = ()
        z.out_shape = out[k].shape
        z.out_dtype = out[k].dtype
        (<ndarray>ws[k])._node = z
        (<ndarray>ws[k])._oidx = 0


cdef inline bint _carries(object out, Py_ssize_t n_out, tuple args) except -1:
    """Whether an op's output can carry a gradient: a floating or complex dtype (for several
    outputs, any of them), or an integer result computed from integer variables alone (MXNet's
    integer variables). Bool results, and integer results of float inputs (casts, rounding
    to integers), never do: their derivative is zero (Note [Zero gradients])."""
    if n_out == 1:
        if cnp.PyArray_ISFLOAT(<cnp.ndarray>out) or cnp.PyArray_ISCOMPLEX(<cnp.ndarray>out):
            return True
        return cnp.PyArray_ISINTEGER(<cnp.ndarray>out) and _integer_history(args)
    for o in out:
        if cnp.PyArray_ISFLOAT(<cnp.ndarray>o) or cnp.PyArray_ISCOMPLEX(<cnp.ndarray>o):
            return True
    return False


cdef bint _integer_history(tuple args) except -1:
    """Whether every input with history is an integer array."""
    cdef Py_ssize_t i
    for i in range(PyTuple_GET_SIZE(args)):
        a = <object>PyTuple_GET_ITEM(args, i)
        if isinstance(a, ndarray) and (<ndarray>a)._node is not None:
            if not cnp.PyArray_ISINTEGER(<cnp.ndarray>(<ndarray>a)._data):
                return False
    return True


cdef bint _any_complex(PyObject **raws, Py_ssize_t n, object out, Py_ssize_t n_out) except -1:
    """Whether an input (the ``n`` raw values ``raws``) or output of a recorded op holds
    complex values."""
    cdef object r
    cdef Py_ssize_t i
    for i in range(n):
        r = <object>raws[i]
        if type(r) is NP_NDARRAY:
            if cnp.PyArray_ISCOMPLEX(<cnp.ndarray>r):
                return True
        elif type(r) is complex:
            return True
    if n_out == 1:
        return cnp.PyArray_ISCOMPLEX(<cnp.ndarray>out)
    for r in out:
        if cnp.PyArray_ISCOMPLEX(<cnp.ndarray>r):
            return True
    return False


cdef void _annotate(object exc, Primitive op, tuple raws, tuple params):
    """Add the op, its inputs' shapes and dtypes and its parameters to an error's message."""
    parts = []
    for r in raws:
        if isinstance(r, NP_NDARRAY):
            parts.append("array of shape %s and dtype %s" % (r.shape, r.dtype))
        else:
            parts.append("%s %r" % (type(r).__name__, r))
    note = "in fastgrad.%s(%s)" % (op.name, ", ".join(parts))
    if params:
        note += " with %s" % ", ".join("%s=%r" % (n, v) for n, v in zip(op.param_names, params))
    try:
        exc.add_note(note)
    except AttributeError:      # Python < 3.11: no notes
        pass


def record_custom(op, tuple inputs, tuple outputs):
    """Record one node for a custom op (``autograd.Function``) and return its outputs.

    ``op`` must have a ``name`` and a ``node_backward(node, g, needs, create_graph)`` method.
    Returns new arrays sharing the outputs' data, produced by the node, or the outputs
    unchanged when nothing is recorded.
    """
    cdef Py_ssize_t n = len(inputs), i
    cdef list parents = [None] * n
    cdef list oidx = None
    cdef bint linked = False
    if not is_recording_c():
        return outputs
    for i in range(n):
        a = inputs[i]
        if isinstance(a, ndarray) and (<ndarray>a)._node is not None:
            parents[i] = (<ndarray>a)._node
            linked = True
            if (<ndarray>a)._oidx:
                if oidx is None:
                    oidx = [0] * n
                oidx[i] = (<ndarray>a)._oidx
    if not linked:
        return outputs
    cdef Node node = new_node(op)
    node.parents = tuple(parents)
    if None in parents:
        node.consts = tuple([None if parents[i] is not None else unwrap(inputs[i])
                             for i in range(n)])
    node.parent_oidx = tuple(oidx) if oidx is not None else None
    node.saved = ()
    node.params = ()
    node.n_out = len(outputs)
    if node.n_out == 1:
        node.out_shape = (<ndarray>outputs[0])._data.shape
        node.out_dtype = (<ndarray>outputs[0])._data.dtype
    else:
        node.out_shape = tuple([(<ndarray>o)._data.shape for o in outputs])
        node.out_dtype = tuple([(<ndarray>o)._data.dtype for o in outputs])
    if is_anomaly_c():
        node.trace = _capture_trace()
    return tuple([wrap((<ndarray>outputs[i])._data, node, i, type(outputs[i]))
                  for i in range(node.n_out)])


def record_zero(str name, tuple inputs, ndarray out):
    """Record ``out``, an integer or bool result of ``inputs`` that no table op computes
    (``argmax``, ``nonzero``...), as a zero node (Note [Zero gradients]); returns ``out``."""
    if not is_recording_c():
        return out
    cdef list parents = []
    cdef list oidx = []
    for a in inputs:
        if isinstance(a, ndarray) and (<ndarray>a)._node is not None:
            parents.append((<ndarray>a)._node)
            oidx.append((<ndarray>a)._oidx)
    if not parents:
        return out
    cdef Node node = new_node(_ZeroResult(name, out._data))
    node.zero = True
    node.parents = tuple(parents)
    node.parent_oidx = tuple(oidx) if any(oidx) else None
    node.saved = ()
    node.params = ()
    node.out_shape = out._data.shape
    node.out_dtype = out._data.dtype
    out._node = node
    out._oidx = 0
    return out


def wrap_output(data, Node node, Py_ssize_t index):
    """A fastgrad array for output ``index`` of ``node`` (internal: custom Functions)."""
    return wrap(data, node, index)


def _ops_lookup(name):
    return _PRIMITIVES[name]


# Note [Foreign arrays]
# ~~~~~~~~~~~~~~~~~~~~~
# Another library's array type that overrides NumPy's ufuncs (an xarray DataArray, a pandas
# Series) may hold fastgrad arrays. NumPy's protocols keep their history: fastgrad's operators
# and ``__array_ufunc__`` return NotImplemented to it, and it calls the ufunc again on the
# fastgrad arrays inside, which records. A fastgrad function called with such an object
# directly (``fastgrad.np.exp(data_array)``) must do the same: an op whose kernel is a ufunc
# of its arrays calls the ufunc on the arguments as given, so that the other library unwraps
# them; any other op would convert the object to a NumPy array and drop the history of what
# it holds, so while recording it raises instead, naming the op and the argument (outside
# recording there is no history to drop, and the op runs on the object's NumPy values).
cdef object _call_with_foreign(Primitive op, tuple args, tuple params, Py_ssize_t i):
    if op.elementwise and not PyTuple_GET_SIZE(params):
        return op.forward(*args)
    raise TypeError(
        "fastgrad.%s: argument %d is a %s.%s, another library's array; fastgrad cannot "
        "record through it while recording (its history would be lost). Call "
        "fastgrad.%s on the fastgrad array it holds (e.g. its .data or .values)"
        % (op.name, i, type(args[i]).__module__, type(args[i]).__name__, op.name))
