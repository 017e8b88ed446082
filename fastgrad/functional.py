"""Function transforms: ``grad(f)``, ``jacobian(f)``, ``vjp``, ``jvp``, ``checkpoint``...

For readers coming from HIPS autograd and JAX: each transform takes a Python function of
fastgrad arrays and returns a function. They are thin wrappers over ``autograd.record`` and
the one backward engine (``_engine.run_backward``); there is no second engine.

Arguments may be arrays, Python numbers, or (for ``grad``, ``value_and_grad``,
``grad_and_aux``, ``elementwise_grad`` and ``vjp``) lists, tuples and dicts of them; the
gradient has the same structure. Integer and boolean inputs are differentiated as float64.

Note [Result types]
~~~~~~~~~~~~~~~~~~~
A transform returns what its arguments were: called (outside any recording) on NumPy arrays
and Python numbers, as HIPS autograd code and ``scipy.optimize`` do, it returns NumPy arrays
(NumPy scalars for numbers); called on fastgrad arrays, fastgrad arrays. Inside an enclosing
transform the results are always fastgrad arrays, which carry the history.

Note [Nesting transforms]
~~~~~~~~~~~~~~~~~~~~~~~~~
A transform runs its function under recording and differentiates it with the engine. It keeps
the gradient's history (``create_graph=True``) exactly when the call is itself inside a
recording (an enclosing transform, or the user's ``autograd.record()``) or its argument
already has history; so ``grad(grad(grad(f)))`` differentiates to the third order, while a
top-level ``grad(f)(x)`` builds no second graph and returns a plain array. An argument with
history is differentiated as it is (an intermediate of the outer computation), so the outer
transform sees through the inner one; an argument without history becomes a fresh variable
sharing its data.
"""

import functools

import numpy as _onp

from fastgrad._api import _functions as _F
from fastgrad._core._array import ndarray, _wrap, unwrap
from fastgrad._core._engine import run_backward
from fastgrad._core._custom_function import Function
from fastgrad._core._state import is_recording, set_recording

__all__ = ["grad", "value_and_grad", "elementwise_grad", "grad_and_aux", "jacobian",
           "hessian", "hessian_vector_product", "hessian_tensor_product", "vjp", "jvp",
           "make_vjp", "make_jvp", "checkpoint", "grad_and_loss"]


# ---------------------------------------------------------------- argument trees
def _flatten(tree):
    """``(leaves, rebuild)``: the arrays and numbers in nested lists, tuples and dicts."""
    if isinstance(tree, (list, tuple)):
        parts = [_flatten(t) for t in tree]
        leaves = [leaf for p in parts for leaf in p[0]]
        counts = [len(p[0]) for p in parts]
        kind = type(tree)

        def rebuild(values):
            out, k = [], 0
            for (_, sub), n in zip(parts, counts):
                out.append(sub(values[k:k + n]))
                k += n
            return kind(out) if kind in (list, tuple) else kind(*out)
        return leaves, rebuild
    if isinstance(tree, dict):
        keys = list(tree)
        leaves, sub = _flatten([tree[k] for k in keys])
        return leaves, lambda values: dict(zip(keys, sub(values)))
    return [tree], lambda values: values[0]


def _variable(x):
    """``x`` itself if it has history, else a variable sharing its data (float64 for
    integers and booleans, Note [Nesting transforms])."""
    if isinstance(x, ndarray) and x.node is not None:
        return x
    if isinstance(x, ndarray) and x.dtype.kind in "fc":
        v = x.detach()
    else:
        data = _onp.array(unwrap(x))
        v = _wrap(data if data.dtype.kind in "fc" else data.astype(_onp.float64))
    v.attach_grad()
    return v


def _argnums(argnum, n_args, who):
    nums = (argnum,) if isinstance(argnum, (int, _onp.integer)) else tuple(argnum)
    for a in nums:
        if not -n_args <= int(a) < n_args:
            raise TypeError("%s: argnum %d is out of range for a call with %d argument(s)"
                            % (who, a, n_args))
    return tuple(int(a) % n_args for a in nums)


class _Traced:
    """One call of ``fun`` recorded with its differentiated arguments as variables."""

    def __init__(self, fun, args, kwargs, argnums, who):
        self.who = who
        self.nested = is_recording()
        args = list(args)
        self.rebuilds = []
        self.leaves = []
        self.kinds = []
        for a in argnums:
            leaves, rebuild = _flatten(args[a])
            self.nested = self.nested or any(
                isinstance(v, ndarray) and v.node is not None for v in leaves)
            self.kinds.extend(_kind(v) for v in leaves)
            variables = [_variable(v) for v in leaves]
            self.rebuilds.append((rebuild, len(variables)))
            self.leaves.extend(variables)
            args[a] = rebuild(variables)
        prev = set_recording(True)
        try:
            self.out = fun(*args, **kwargs)
        finally:
            set_recording(prev)

    def gradients(self, heads, head_grads, retain=False):
        """The gradients of ``heads`` for every leaf, as trees, one per argnum."""
        heads = [h for h in heads]
        live = [k for k, h in enumerate(heads) if isinstance(h, ndarray) and h.node is not None]
        if live:
            flat = run_backward([heads[k] for k in live],
                                None if head_grads is None else [head_grads[k] for k in live],
                                self.leaves, retain or self.nested, self.nested, True, True)
        else:
            flat = [_F.zeros_like(v) for v in self.leaves]
        if not self.nested:
            flat = [_like(g, kind) for g, kind in zip(flat, self.kinds)]
        out, k = [], 0
        for rebuild, n in self.rebuilds:
            out.append(rebuild(list(flat[k:k + n])))
            k += n
        return out

    @property
    def plain(self):
        """Whether the results are NumPy's (Note [Result types])."""
        return not self.nested and "fastgrad" not in self.kinds

    def value(self, out):
        """``out`` without history unless the call is nested (the graph is not kept)."""
        if isinstance(out, ndarray) and not self.nested:
            if self.plain:
                return _like(out, "scalar" if out.ndim == 0 else "numpy")
            return out.detach()
        return out

    def export(self, x):
        """A result computed from the gradients, as NumPy's when the arguments were."""
        return _like(x, "numpy") if self.plain and isinstance(x, ndarray) else x


def _kind(x):
    """How a result for argument ``x`` is returned (Note [Result types])."""
    if isinstance(x, ndarray):
        return "fastgrad"
    return "scalar" if _onp.ndim(x) == 0 and not isinstance(x, _onp.ndarray) else "numpy"


def _like(x, kind):
    if kind == "fastgrad" or not isinstance(x, ndarray):
        return x
    data = unwrap(x)
    return data[()] if kind == "scalar" else data


def _scalar(out, who):
    if not isinstance(out, ndarray):
        out = _wrap(_onp.asarray(out))
    if out.size != 1:
        raise TypeError("%s: the function must return a single number (use elementwise_grad "
                        "or jacobian for arrays), got shape %s" % (who, out.shape))
    if out.dtype.kind == "c":
        raise TypeError("%s: the function must return a real number, got %s"
                        % (who, out.dtype))
    return out


def _one_or_tuple(grads, argnum):
    return grads[0] if isinstance(argnum, (int, _onp.integer)) else tuple(grads)


# ---------------------------------------------------------------- gradients
def value_and_grad(fun, argnum=0):
    """A function returning ``(fun(*args), gradient of fun with respect to args[argnum])``.

    ``fun`` must return a single real number. ``argnum`` may be a tuple, giving a tuple of
    gradients.

    Examples
    --------
    >>> from fastgrad import np
    >>> from fastgrad.functional import value_and_grad
    >>> value_and_grad(lambda x: (x ** 3).sum())(np.array([1., 2.]))
    (array(9.), array([ 3., 12.]))
    """
    return _value_and_grad(fun, argnum, "value_and_grad")


def _value_and_grad(fun, argnum, who):
    @functools.wraps(fun)
    def value_and_grad_fun(*args, **kwargs):
        nums = _argnums(argnum, len(args), who)
        t = _Traced(fun, args, kwargs, nums, who)
        out = _scalar(t.out, who)
        return t.value(out), _one_or_tuple(t.gradients([out], None), argnum)
    return value_and_grad_fun


def grad(fun, argnum=0):
    """A function returning the gradient of ``fun`` with respect to its argument ``argnum``.

    ``fun`` must return a single real number; the gradient has the shape (and, for lists,
    tuples and dicts of arrays, the structure) of the argument. Transforms nest to any order
    (Note [Nesting transforms]).

    Examples
    --------
    >>> from fastgrad import np
    >>> from fastgrad.functional import grad
    >>> grad(np.sin)(np.array(0.5, dtype="float64"))      # cos(0.5)
    array(0.87758256, dtype=float64)
    >>> grad(grad(grad(np.sin)))(np.array(0.5, dtype="float64"))   # -cos(0.5)
    array(-0.87758256, dtype=float64)
    >>> grad(lambda x, y: (x * y).sum(), argnum=1)(np.array([1., 2.]), np.array([3., 4.]))
    array([1., 2.])
    """
    vg = _value_and_grad(fun, argnum, "grad")

    @functools.wraps(fun)
    def grad_fun(*args, **kwargs):
        return vg(*args, **kwargs)[1]
    return grad_fun


def grad_and_aux(fun, argnum=0):
    """For ``fun`` returning ``(value, aux)``: a function returning ``(gradient of value,
    aux)``; ``aux`` is passed through undifferentiated.

    Examples
    --------
    >>> from fastgrad import np
    >>> from fastgrad.functional import grad_and_aux
    >>> grad_and_aux(lambda x: ((x * x).sum(), "note"))(np.array([1., 2.]))
    (array([2., 4.]), 'note')
    """
    @functools.wraps(fun)
    def grad_and_aux_fun(*args, **kwargs):
        nums = _argnums(argnum, len(args), "grad_and_aux")
        t = _Traced(fun, args, kwargs, nums, "grad_and_aux")
        if not isinstance(t.out, (tuple, list)) or len(t.out) != 2:
            raise TypeError("grad_and_aux: the function must return a pair (value, aux)")
        out = _scalar(t.out[0], "grad_and_aux")
        return _one_or_tuple(t.gradients([out], None), argnum), t.out[1]
    return grad_and_aux_fun


def elementwise_grad(fun, argnum=0):
    """The gradient of ``fun(...).sum()``: for a function acting elementwise, the derivative
    of each output element by its input element.

    Examples
    --------
    >>> from fastgrad import np
    >>> from fastgrad.functional import elementwise_grad
    >>> elementwise_grad(lambda x: x ** 2)(np.array([1., 2., 3.]))
    array([2., 4., 6.])
    """
    @functools.wraps(fun)
    def elementwise_grad_fun(*args, **kwargs):
        nums = _argnums(argnum, len(args), "elementwise_grad")
        t = _Traced(fun, args, kwargs, nums, "elementwise_grad")
        out = t.out if isinstance(t.out, ndarray) else _wrap(_onp.asarray(t.out))
        ones = _onp.ones(out.shape, dtype=out.dtype)
        return _one_or_tuple(t.gradients([out], [ones]), argnum)
    return elementwise_grad_fun


def jacobian(fun, argnum=0):
    """A function returning the Jacobian of ``fun`` with respect to array argument
    ``argnum``, of shape ``fun(...).shape + args[argnum].shape``.

    One reverse pass per output element.

    Examples
    --------
    >>> from fastgrad import np
    >>> from fastgrad.functional import jacobian
    >>> jacobian(lambda x: x * x)(np.array([1., 2.]))
    array([[2., 0.],
           [0., 4.]])
    """
    @functools.wraps(fun)
    def jacobian_fun(*args, **kwargs):
        nums = _argnums(argnum, len(args), "jacobian")
        if len(nums) != 1:
            raise TypeError("jacobian: argnum must be a single int")
        t = _Traced(fun, args, kwargs, nums, "jacobian")
        if len(t.leaves) != 1:
            raise TypeError("jacobian: argument %d must be an array or a number" % nums[0])
        x = t.leaves[0]
        out = t.out if isinstance(t.out, ndarray) else _wrap(_onp.asarray(t.out))
        n = out.size
        rows = []
        for i in range(n):
            e = _onp.zeros(n, dtype=out.dtype)
            e[i] = 1
            rows.append(t.gradients([out], [e.reshape(out.shape)], retain=True)[0])
        if n == 0:
            return t.export(_F.zeros(out.shape + x.shape, dtype=x.dtype))
        return t.export(_F.reshape(_F.stack(rows), out.shape + x.shape))
    return jacobian_fun


def hessian(fun, argnum=0):
    """A function returning the Hessian of scalar ``fun`` with respect to argument
    ``argnum``, of shape ``x.shape + x.shape``: the Jacobian of the gradient.

    Examples
    --------
    >>> from fastgrad import np
    >>> from fastgrad.functional import hessian
    >>> hessian(lambda x: (x ** 3).sum())(np.array([1., 2.]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    return jacobian(grad(fun, argnum), argnum)


def hessian_tensor_product(fun, argnum=0):
    """A function of ``(*args, v)`` returning the product of the Hessian of scalar ``fun``
    (with respect to argument ``argnum``) with ``v``, without forming the Hessian.

    Examples
    --------
    >>> from fastgrad import np
    >>> from fastgrad.functional import hessian_vector_product
    >>> hvp = hessian_vector_product(lambda x: (x ** 3).sum())
    >>> hvp(np.array([1., 2.]), np.array([1., 1.]))
    array([ 6., 12.])
    """
    fun_grad = grad(fun, argnum)

    def grad_dot_vector(*args, **kwargs):
        *args, v = args
        return _F.sum(fun_grad(*args, **kwargs) * v)
    return grad(grad_dot_vector, argnum)


hessian_vector_product = hessian_tensor_product


# ---------------------------------------------------------------- products
def vjp(fun, *primals):
    """``(fun(*primals), vjp_fun)`` where ``vjp_fun(cotangent)`` returns the tuple of
    vector-Jacobian products ``cotangent^T J``, one per primal (JAX's signature).

    ``vjp_fun`` may be called any number of times.

    Examples
    --------
    >>> from fastgrad import np
    >>> from fastgrad.functional import vjp
    >>> out, vjp_fun = vjp(lambda x, y: x * y, np.array([1., 2.]), np.array([3., 4.]))
    >>> vjp_fun(np.array([1., 10.]))
    (array([ 3., 40.]), array([ 1., 20.]))
    """
    t = _Traced(fun, primals, {}, tuple(range(len(primals))), "vjp")
    outs, rebuild = _flatten(t.out)

    def vjp_fun(cotangent):
        cts, _ = _flatten(cotangent)
        if len(cts) != len(outs):
            raise TypeError("vjp: the cotangent has %d arrays but the output has %d"
                            % (len(cts), len(outs)))
        return tuple(t.gradients(outs, [unwrap(c) for c in cts], retain=True))
    return rebuild([t.value(o) for o in outs]), vjp_fun


def make_vjp(fun, argnum=0):
    """HIPS autograd's form: ``make_vjp(fun, argnum)(*args)`` is ``(vjp_fun, value)`` with
    ``vjp_fun(cotangent)`` the product for argument ``argnum`` only."""
    def make(*args, **kwargs):
        nums = _argnums(argnum, len(args), "make_vjp")
        t = _Traced(fun, args, kwargs, nums, "make_vjp")
        out = t.out if isinstance(t.out, ndarray) else _wrap(_onp.asarray(t.out))

        def vjp_fun(cotangent):
            return _one_or_tuple(t.gradients([out], [unwrap(cotangent)], retain=True), argnum)
        return vjp_fun, t.value(out)
    return make


def jvp(fun, primals, tangents):
    """``(fun(*primals), J tangents)``: the Jacobian-vector product (JAX's signature).

    Computed by two reverse passes (Note [Forward mode by double backward] in
    ``_derivative_tools.py``), so it works for every differentiable op.

    Examples
    --------
    >>> from fastgrad import np
    >>> from fastgrad.functional import jvp
    >>> jvp(lambda x: x * x, (np.array([1., 2.]),), (np.array([1., 0.]),))
    (array([1., 4.]), array([2., 0.]))
    """
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise TypeError("jvp: %d primals but %d tangents" % (len(primals), len(tangents)))
    t = _Traced(fun, primals, {}, tuple(range(len(primals))), "jvp")
    out = t.out if isinstance(t.out, ndarray) else _wrap(_onp.asarray(t.out))
    if out.node is None:
        return t.value(out), t.export(_F.zeros_like(out))
    u = _wrap(_onp.zeros(out.shape, dtype=out.dtype))
    u.attach_grad()
    prev = set_recording(True)
    try:
        gs = run_backward([out], [u], t.leaves, True, True, True, True)
        inner = None
        for g, v in zip(gs, _flatten(list(tangents))[0]):
            term = _F.sum(g * v)
            inner = term if inner is None else inner + term
    finally:
        set_recording(prev)
    if inner is None or inner.node is None:
        return t.value(out), t.export(_F.zeros_like(out))
    tangent_out = run_backward([inner], None, [u], t.nested, t.nested, True, True)[0]
    return t.value(out), t.export(tangent_out)


def make_jvp(fun, argnum=0):
    """HIPS autograd's form: ``make_jvp(fun, argnum)(*args)(v)`` is ``(value, J v)``."""
    def make(*args, **kwargs):
        nums = _argnums(argnum, len(args), "make_jvp")[0]

        def jvp_fun(v):
            def of_one(x):
                full = list(args)
                full[nums] = x
                return fun(*full, **kwargs)
            return jvp(of_one, (args[nums],), (v,))
        return jvp_fun
    return make


# ---------------------------------------------------------------- memory
def _vjp_by_recomputing(fun, n_in):
    """The function ``(*xs, *gs) -> gs^T J_fun(xs)``, one gradient per x, computed on fresh
    copies of ``xs`` (Note [Checkpoint to any order])."""
    def vjp_of(*arrays):
        # Called recording only when a higher order recomputes it: its arguments are then
        # that recomputation's fresh variables, to differentiate through.
        create = is_recording()
        if create:
            xs, gs = list(arrays[:n_in]), list(arrays[n_in:])
        else:
            xs = [_variable(a.detach()) for a in arrays[:n_in]]
            gs = [unwrap(g) for g in arrays[n_in:]]
        prev = set_recording(True)
        try:
            out = fun(*xs)
        finally:
            set_recording(prev)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        grads = run_backward(outs, gs, xs, create, create, True, True)
        return tuple(grads) if len(grads) > 1 else grads[0]
    return vjp_of


class _Checkpointed(Function):
    """The recorded call of a checkpointed function of arrays: keeps only its inputs.

    Note [Checkpoint to any order]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    Backward recomputes ``fun`` on detached copies of the inputs and differentiates it with
    a pass of its own, over that recomputed graph only (a pass inside another may reach the
    outer graph, Note [Pass state] in _engine.pyx, but would free its nodes without
    ``retain_graph``, and the recomputation does not need them). When the gradient must keep
    its history (``create_graph``), backward instead returns the checkpointed call of that
    recompute-and-differentiate function on the real inputs and output gradients, so the
    next order is again a checkpoint, and so on to any order.
    """

    def __init__(self, fun, n_in):
        super().__init__()
        self.fun, self.n_in = fun, n_in
        self.inputs = ()

    def forward(self, *arrays):
        out = self.fun(*arrays)
        if isinstance(out, (list, tuple)):
            return tuple(o.detach() for o in out)
        return out.detach()

    def backward(self, *output_grads):
        vjp_of = _vjp_by_recomputing(self.fun, self.n_in)
        if is_recording():           # create_graph: the gradient keeps its history
            grads = _checkpoint_arrays(vjp_of, tuple(self.inputs) + output_grads)
        else:
            grads = vjp_of(*self.inputs, *output_grads)
        return grads


def _checkpoint_arrays(fun, arrays):
    call = _Checkpointed(fun, len(arrays))
    call.inputs = tuple(arrays)
    return call(*arrays)


def checkpoint(fun):
    """``fun`` whose intermediate results are not kept while recording: backward runs
    ``fun`` again to compute them (trading time for memory).

    ``fun`` takes arrays (other positional arguments pass through as constants) and returns
    an array or a tuple of arrays; it must be deterministic (the recomputation must give the
    same values). Gradients of any order flow through it (Note [Checkpoint to any order]).

    Examples
    --------
    >>> from fastgrad import np, autograd
    >>> from fastgrad.functional import checkpoint
    >>> block = checkpoint(lambda x: np.tanh(np.tanh(x)))
    >>> x = np.array([0.5], dtype="float64"); x.attach_grad()
    >>> with autograd.record():
    ...     y = block(x)
    >>> y.backward()
    >>> x.grad                  # (1 - tanh(tanh x)^2) (1 - tanh(x)^2)
    array([0.63980802], dtype=float64)
    """
    @functools.wraps(fun)
    def checkpointed(*args, **kwargs):
        positions = [i for i, a in enumerate(args) if isinstance(a, ndarray)]
        if not is_recording() or not positions:
            return fun(*args, **kwargs)

        def of_arrays(*arrays):
            full = list(args)
            for p, a in zip(positions, arrays):
                full[p] = a
            return fun(*full, **kwargs)
        return _checkpoint_arrays(of_arrays, [args[i] for i in positions])
    return checkpointed


# ---------------------------------------------------------------- MXNet 1.x
def grad_and_loss(func, argnum=None):
    """MXNet 1.x's ``autograd.grad_and_loss``: a function returning ``(gradients, outputs)``.

    The gradients are those of ``func``'s outputs (their sum, for non-scalar outputs) with
    respect to the arguments selected by ``argnum`` (an int or a list of ints; all arguments
    when None), always as a list. The inputs' ``.grad`` buffers are not touched.

    Examples
    --------
    >>> from fastgrad import np, autograd
    >>> grads, loss = autograd.grad_and_loss(lambda x, y: x * y)(np.array([2.]),
    ...                                                           np.array([5.]))
    >>> grads, loss
    ([array([5.]), array([2.])], array([10.]))
    """
    @functools.wraps(func)
    def wrapped(*args):
        if argnum is None:
            nums = tuple(range(len(args)))
        else:
            nums = _argnums(argnum if isinstance(argnum, (list, tuple)) else [argnum],
                            len(args), "grad_and_loss")
        for k in nums:
            if not isinstance(args[k], ndarray):
                raise TypeError("grad_and_loss: argument %d must be a fastgrad array, got %s"
                                % (k, type(args[k]).__name__))
        t = _Traced(func, args, {}, nums, "grad_and_loss")
        outs = list(t.out) if isinstance(t.out, (list, tuple)) else [t.out]
        heads = [_onp.ones(o.shape, dtype=o.dtype) for o in outs]
        grads = t.gradients(outs, heads)
        value = [t.value(o) for o in outs]
        return list(grads), (value if isinstance(t.out, (list, tuple)) else value[0])
    return wrapped
