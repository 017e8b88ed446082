"""Gluon's parameters: ``Parameter``, ``Constant`` and ``ParameterDict`` (MXNet 1.9.1's).

A :class:`Parameter` holds one array (fastgrad has one device, the CPU) with its gradient
attached, so that ``autograd.record()`` around a forward pass and ``backward()`` fill
``param.grad()``. Its shape may have unknown dimensions (``0``, or ``-1`` after
``npx.set_np()``), filled at the first forward pass: the parameter is then *deferred*, and
reading it raises :class:`DeferredInitializationError` until the block that owns it has seen
an input.

Examples
--------
>>> import fastgrad as mx
>>> w = mx.gluon.Parameter('fc_weight', shape=(2, 3), init=mx.init.One())
>>> w.initialize()
>>> w.data()
<BLANKLINE>
[[1. 1. 1.]
 [1. 1. 1.]]
<NDArray 2x3 @cpu(0)>

Note [Parameter array type]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
MXNet 1.9.1 makes a Parameter's array an ``mx.np.ndarray`` when ``npx.set_np()`` is active
and an ``mx.nd.NDArray`` otherwise; programs of both kinds exist (D2L's MXNet edition calls
``set_np()`` first and uses ``mx.np``; 1.x programs use ``nd``, ``.asscalar()`` and full
reductions of shape ``(1,)``). fastgrad's arrays have NumPy semantics either way, so the
choice is only the array's type, made when the parameter is initialised:

1. after ``npx.set_np()`` (``npx.is_np_array_requested()``) the array is an ``mx.np.ndarray``;
2. a parameter registered on a 2.x-style block (a ``HybridBlock`` subclass that defines
   ``forward`` rather than ``hybrid_forward``) is an ``mx.np.ndarray`` too, since such blocks
   compute on ``mx.np`` arrays (``Parameter._np_arrays``, set by the block);
3. otherwise an ``mx.nd.NDArray``.

A 1.x block's ``hybrid_forward`` further receives its parameters in the type of its first
input (``block.py``), so a ``Dense`` layer fed ``mx.np`` arrays computes in ``mx.np`` even
without ``set_np()``. Both types share data and gradient (``as_np_ndarray`` is a view).
"""

from collections import OrderedDict
import copy
import re
import warnings

import numpy as _onp

from fastgrad import autograd
from fastgrad import initializer
from fastgrad import ndarray as _nd
from fastgrad import numpy as _mx_np
from fastgrad import numpy_extension as _npx
from fastgrad import symbol as _symbol
from fastgrad.base import MXNetError
from fastgrad.context import Context, cpu, check_device

__all__ = ["DeferredInitializationError", "Parameter", "Constant", "ParameterDict",
           "tensor_types"]

tensor_types = (_symbol.Symbol, _nd.NDArray, _mx_np.ndarray)

_GRAD_REQS = ("write", "add", "null")
_STYPES = ("default", "row_sparse", "csr")


class DeferredInitializationError(MXNetError):
    """A parameter's initialisation waits for its shape: pass one batch through the block
    that owns it first (or give the layer its input size, e.g. ``in_units``)."""


def shape_is_known(shape):
    """Whether every dimension of ``shape`` is known (none is ``0`` or ``-1``; MXNet's
    ``gluon.utils.shape_is_known``)."""
    if shape is None:
        return False
    return all(d > 0 for d in shape)


def _unknown_dim():
    """How an unknown dimension is shown: ``-1`` under ``npx.set_np()``, else ``0`` (MXNet)."""
    return -1 if _npx.is_np_array_requested() else 0


def _as_shape(shape):
    if shape is None:
        return None
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(d) for d in shape)


def _ctx_list(ctx):
    """``ctx`` (None, a Context or a list of them) as a list, each checked to be the CPU."""
    if ctx is None:
        return [cpu()]
    if isinstance(ctx, Context):
        ctx = [ctx]
    ctx = list(ctx)
    for c in ctx:
        check_device(c)
    return ctx


def _shared_by_contexts(ctx_list):
    """Whether a parameter on ``ctx_list`` stands for several of MXNet's per-context copies
    (Note [Parameters on several contexts])."""
    return ctx_list is not None and len(set(ctx_list)) > 1


# Note [Parameters on several contexts]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# MXNet keeps one copy of a parameter per context; a data-parallel step runs one backward pass
# per context's shard (``split_and_load``), each writing its own copy's gradient, and the
# Trainer sums the copies' gradients before the update. fastgrad has one device, so a
# parameter initialised on several contexts keeps one array that all of them share. With
# ``grad_req='write'`` the second shard's backward would overwrite the first's gradient: the
# step would silently use one shard. So such a parameter accumulates (its array's grad_req is
# ``'add'`` while ``grad_req`` still reads ``'write'``), every backward pass adds its shard's
# gradient, and the Trainer zeroes the gradient after each update: the update is MXNet's,
# made from the sum over shards. ``grad()`` and ``list_grad()`` give that sum (one array per
# context, all the same buffer). Without a Trainer, call ``zero_grad()`` between steps, as
# with ``grad_req='add'``.


def _brief_print_list(lst, limit=7):
    """A short printed list (MXNet's ``gluon.utils._brief_print_list``)."""
    lst = list(lst)
    if len(lst) > limit:
        return (_brief_print_list(lst[:limit // 2], limit) + ", ..., "
                + _brief_print_list(lst[-limit // 2:], limit))
    return ", ".join(["'%s'" % str(i) for i in lst])


def _indent(text, spaces):
    """Indent every line of ``text`` after the first by ``spaces`` spaces."""
    lines = text.split("\n")
    return "\n".join([lines[0]] + [" " * spaces + line for line in lines[1:]])


class Parameter:
    """A container holding a weight of a Block (MXNet's ``gluon.Parameter``).

    Parameters
    ----------
    name : str, default 'weight'
        Name of this parameter (1.x blocks prefix it: ``dense0_weight``).
    grad_req : {'write', 'add', 'null'}, default 'write'
        How backward passes update the gradient: overwrite it, add to it (call
        :meth:`zero_grad` yourself), or not at all (no gradient buffer).
    shape : int or tuple of int, optional
        The shape; ``0`` (or ``-1``) marks a dimension unknown until the first forward pass.
    dtype : str or numpy.dtype, default 'float32'
    lr_mult, wd_mult : float, default 1.0
        Multipliers of the optimizer's learning rate and weight decay for this parameter.
    init : Initializer or str, optional
        This parameter's initializer; the one given to :meth:`initialize` otherwise.
    allow_deferred_init : bool, default False
        Whether :meth:`initialize` may wait for an unknown shape instead of raising.
    differentiable : bool, default True
        ``False`` makes ``grad_req`` always ``'null'``.
    stype : {'default'}
        Storage type; fastgrad's arrays are dense, so ``'row_sparse'`` and ``'csr'`` raise.
    grad_stype : {'default', 'row_sparse', 'csr'}
        Accepted for MXNet's sake (``Embedding(sparse_grad=True)``); the gradient is dense
        and holds the same values a sparse one would.

    Examples
    --------
    >>> import fastgrad as mx
    >>> b = mx.gluon.Parameter('fc_bias', shape=(3,), init=mx.init.Zero())
    >>> b.initialize()
    >>> b
    Parameter fc_bias (shape=(3,), dtype=<class 'numpy.float32'>)
    """

    def __init__(self, name="weight", grad_req="write", shape=None, dtype=_onp.float32,
                 lr_mult=1.0, wd_mult=1.0, init=None, allow_deferred_init=False,
                 differentiable=True, stype="default", grad_stype="default"):
        for what, value in (("stype", stype), ("grad_stype", grad_stype)):
            if value not in _STYPES:
                raise AssertionError("%s for Parameter '%s' must be one of 'default', "
                                     "'row_sparse', or 'csr', but got '%s'"
                                     % (what, name, value))
        if stype != "default":
            raise ValueError("Parameter '%s': stype=%r is not supported; fastgrad's arrays are "
                             "dense (use 'default')" % (name, stype))
        self.name = name
        self._shape = _as_shape(shape)
        self._dtype = dtype
        self._data = None          # the one array (Note [Parameter array type])
        self._ctx_list = None
        self._deferred_init = ()   # (init, ctx list, default_init, data or None)
        self._differentiable = differentiable
        self._allow_deferred_init = allow_deferred_init
        self._grad_req = None
        self._var = None
        self._var_key = None
        self._trainer = None
        self._np_arrays = None     # True: mx.np arrays; None: decided at initialisation
        self._stype = stype
        self._grad_stype = grad_stype
        self.lr_mult = lr_mult
        self.wd_mult = wd_mult
        self.init = init
        self.grad_req = grad_req

    def __repr__(self):
        return "Parameter %s (shape=%s, dtype=%s)" % (self.name, self.shape, self.dtype)

    def __deepcopy__(self, memo):
        """A copy with its own value and gradient buffer, a variable of autograd like the
        original (``copy.deepcopy(net)`` gives a network that trains on its own), with no
        Trainer."""
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            fresh = key in ("_data", "_var", "_trainer")
            new.__dict__[key] = None if fresh else copy.deepcopy(value, memo)
        if self._data is not None:
            with autograd.pause():
                new._init_impl(self._data.asnumpy(), self._ctx_list)
        return new

    # ------------------------------------------------------------------ attributes
    @property
    def grad_req(self):
        """``'write'``, ``'add'`` or ``'null'``; settable before or after initialisation."""
        return self._grad_req

    @grad_req.setter
    def grad_req(self, req):
        if req not in _GRAD_REQS:
            raise AssertionError("Parameter '%s': grad_req must be one of 'write', 'add', or "
                             "'null', but got '%s'" % (self.name, req))
        if not self._differentiable:
            req = "null"
        if self._grad_req == req:
            return
        self._grad_req = req
        if self._data is not None:
            self._attach_grad()

    @property
    def dtype(self):
        """The data type; setting it casts the value (:meth:`cast`)."""
        return self._dtype

    @dtype.setter
    def dtype(self, dtype):
        self.cast(dtype)

    @property
    def shape(self):
        """The shape, unknown dimensions shown as ``0`` (``-1`` after ``npx.set_np()``).
        Setting it fills unknown dimensions; a known dimension cannot change."""
        if self._shape is None:
            return None
        unknown = _unknown_dim()
        return tuple(d if d > 0 else unknown for d in self._shape)

    @shape.setter
    def shape(self, new_shape):
        new_shape = _as_shape(new_shape)
        self._var = None
        if self._shape is None or new_shape is None:
            self._shape = new_shape
            return
        if len(self._shape) != len(new_shape) or not all(
                old in (-1, 0, new) for old, new in zip(self._shape, new_shape)):
            raise AssertionError("Parameter '%s': expected shape %s is incompatible with given "
                                 "shape %s." % (self.name, str(new_shape), str(self.shape)))
        self._shape = new_shape

    @property
    def stype(self):
        return self._stype

    @property
    def grad_stype(self):
        return self._grad_stype

    @property
    def differentiable(self):
        return self._differentiable

    @property
    def allow_deferred_init(self):
        return self._allow_deferred_init

    @property
    def _grad(self):
        """MXNet's internal list of gradient buffers (``None`` without one); read-only."""
        if self._data is None or self._grad_req == "null":
            return None
        return [self._data.grad]

    def _set_trainer(self, trainer):
        """Remember the Trainer that updates this parameter (Gluon's Trainer calls it)."""
        self._trainer = trainer

    # ------------------------------------------------------------------ access
    def _check_initialized(self, ctx=None):
        if self._data is not None:
            if ctx is not None and ctx is not list:
                check_device(ctx)
            return
        if self._deferred_init:
            raise DeferredInitializationError(
                "Parameter '%s' has not been initialized yet because initialization was "
                "deferred. Actual initialization happens during the first forward pass. "
                "Please pass one batch of data through the network before accessing "
                "Parameters. You can also avoid deferred initialization by specifying "
                "in_units, num_features, etc., for network layers." % self.name)
        raise RuntimeError(
            "Parameter '%s' has not been initialized. Note that you should initialize "
            "parameters and create Trainer with Block.collect_params() instead of "
            "Block.params because the later does not include Parameters of nested child "
            "Blocks" % self.name)

    def data(self, ctx=None):
        """The parameter's array (the same object every call; the optimizer updates it in
        place). ``ctx`` may be any ``mx.cpu(i)``."""
        if ctx is None and self._data is not None:
            return self._data
        self._check_initialized(ctx)
        return self._data

    def row_sparse_data(self, row_id):
        """MXNet's access to a ``row_sparse`` parameter; fastgrad's parameters are dense, so
        this raises as MXNet does for a dense one (use :meth:`data`)."""
        raise RuntimeError("Cannot return a copy of Parameter %s via row_sparse_data() because "
                           "its storage type is %s. Please use data() instead."
                           % (self.name, self._stype))

    def list_row_sparse_data(self, row_id):
        """See :meth:`row_sparse_data`: raises (fastgrad's parameters are dense)."""
        raise RuntimeError("Cannot return copies of Parameter '%s' on all contexts via "
                           "list_row_sparse_data() because its storage type is %s. Please use "
                           "data() instead." % (self.name, self._stype))

    def list_data(self):
        """``[data()]``: fastgrad holds one copy, on the CPU."""
        self._check_initialized()
        return [self._data]

    def grad(self, ctx=None):
        """The gradient buffer (``data().grad``); ``grad_req='null'`` has none and raises."""
        if self._data is not None and self._grad_req == "null":
            raise RuntimeError("Cannot get gradient array for Parameter '%s' because "
                               "grad_req='null'" % self.name)
        self._check_initialized(ctx)
        return self._data.grad

    def list_grad(self):
        """``[grad()]``."""
        return [self.grad()]

    def list_ctx(self):
        """The contexts the parameter lives on (``[cpu(0)]`` once initialised)."""
        if self._data is None:
            if self._deferred_init:
                return self._deferred_init[1]
            raise RuntimeError("Parameter '%s' has not been initialized" % self.name)
        return self._ctx_list

    def _accumulates_shards(self):
        """Whether backward passes add into the gradient because several contexts share the
        array (Note [Parameters on several contexts])."""
        return self._grad_req == "write" and _shared_by_contexts(self._ctx_list)

    def zero_grad(self):
        """Set the gradient to zero (nothing if uninitialised or ``grad_req='null'``)."""
        if self._data is None or self._grad_req == "null":
            return
        grad = self._data.grad
        if grad is not None:
            grad[...] = 0

    def set_data(self, data):
        """Set the value in place (a deferred parameter keeps it for its initialisation)."""
        self.shape = data.shape
        if self._data is None:
            if not self._deferred_init:
                raise AssertionError("Parameter '%s' has not been initialized" % self.name)
            self._deferred_init = self._deferred_init[:3] + (data,)
            return
        trainer = self._trainer
        if trainer is not None and getattr(trainer, "_kv_initialized", False) and \
                getattr(trainer, "_update_on_kvstore", False) and \
                self not in getattr(trainer, "_params_to_init", ()):
            trainer._reset_kvstore()
        with autograd.pause():
            self._data[...] = data

    # ------------------------------------------------------------------ initialisation
    def _wants_np_arrays(self):
        if self._np_arrays is not None:
            return self._np_arrays
        return _npx.is_np_array_requested()

    def _array_type(self):
        return _mx_np.ndarray if self._wants_np_arrays() else _nd.NDArray

    def initialize(self, init=None, ctx=None, default_init=initializer.Uniform(),
                   force_reinit=False):
        """Initialise the value (and gradient buffer).

        Parameters
        ----------
        init : Initializer, optional
            Overrides ``self.init`` and ``default_init``.
        ctx : Context or list of Context, optional
            Any ``mx.cpu(i)`` (fastgrad keeps one copy on the CPU).
        default_init : Initializer, default ``init.Uniform()``
            Used when neither ``init`` nor ``self.init`` is given.
        force_reinit : bool, default False
            Re-initialise an initialised parameter (otherwise it warns and keeps its value).
        """
        if self._data is not None and not force_reinit:
            warnings.warn("Parameter '%s' is already initialized, ignoring. Set "
                          "force_reinit=True to re-initialize." % self.name, stacklevel=2)
            return
        ctx = _ctx_list(ctx)       # a bad context raises before the value is dropped
        self._data = None
        if init is None:
            init = default_init if self.init is None else self.init
        if not shape_is_known(self._shape):
            if self._allow_deferred_init:
                self._deferred_init = (init, ctx, default_init, None)
                return
            raise ValueError("Cannot initialize Parameter '%s' because it has invalid shape: "
                             "%s." % (self.name, str(self.shape)))
        self._deferred_init = (init, ctx, default_init, None)
        self._finish_deferred_init()

    def _finish_deferred_init(self):
        """Initialise now that the shape is known (the first forward pass calls it)."""
        if not self._deferred_init:
            return
        init, ctx, default_init, data = self._deferred_init
        if not shape_is_known(self._shape):
            raise ValueError("Cannot initialize Parameter '%s' because it has invalid shape: "
                             "%s. Please specify in_units, in_channels, etc for `Block`s."
                             % (self.name, str(self.shape)))
        self._deferred_init = ()
        with autograd.pause():
            if data is None:
                data = _onp.zeros(self._shape, dtype=self._dtype)
                data = _nd.array(data, dtype=data.dtype)
                if self._wants_np_arrays():
                    data = data.as_np_ndarray()
                initializer.create(default_init)(
                    initializer.InitDesc(self.name, {"__init__": init}), data)
            self._init_impl(data, ctx)

    def _init_impl(self, data, ctx_list):
        """Take ``data`` (copied, in this parameter's dtype and array type) as the value."""
        self._ctx_list = list(ctx_list)
        values = data.asnumpy() if hasattr(data, "asnumpy") else _onp.asarray(data)
        values = _onp.array(values, dtype=self._dtype if self._dtype is not None
                            else values.dtype)
        if tuple(values.shape) != tuple(self._shape):
            raise ValueError("Parameter '%s': value of shape %s does not fit the parameter's "
                             "shape %s" % (self.name, values.shape, self.shape))
        array = _nd.array(values, dtype=values.dtype)
        if self._wants_np_arrays():
            array = array.as_np_ndarray()
        self._data = array
        self._attach_grad()

    def _attach_grad(self):
        """Attach (or, for ``grad_req='null'``, drop) the gradient buffer of the array."""
        if self._grad_req == "null":
            self._data.drop_grad()
        elif self._data.dtype.kind in "fciu":    # integer parameters get integer gradients
            self._data.attach_grad("add" if self._accumulates_shards() else self._grad_req)
        else:   # a bool parameter has no gradient
            self._data.drop_grad()
        self._var = None

    def _load_init(self, data, ctx=None, cast_dtype=False, dtype_source="current"):
        """(Re)initialise from loaded ``data`` (checking shape and dtype, MXNet's messages)."""
        if cast_dtype and dtype_source not in ("current", "saved"):
            raise ValueError("dtype_source must be 'current' or 'saved', got %r"
                             % (dtype_source,))
        if self._shape:
            for mine, saved in zip(self._shape, data.shape):
                if mine > 0 and mine != saved:
                    raise AssertionError(
                        "Failed loading Parameter '%s' from saved params: shape incompatible "
                        "expected %s vs saved %s" % (self.name, str(self.shape),
                                                     str(data.shape)))
            if len(self._shape) != len(data.shape):
                raise AssertionError(
                    "Failed loading Parameter '%s' from saved params: shape incompatible "
                    "expected %s vs saved %s" % (self.name, str(self.shape), str(data.shape)))
        self._shape = tuple(data.shape)
        if self._dtype is not None and _onp.dtype(self._dtype) != _onp.dtype(data.dtype):
            if not cast_dtype:
                raise AssertionError(
                    "Failed loading Parameter '%s' from saved params: dtype incompatible "
                    "expected %s vs saved %s. Set cast_dtype=True to cast the dtype of saved "
                    "params." % (self.name, str(self.dtype), str(data.dtype)))
            if dtype_source == "saved":
                self._dtype = data.dtype
        if self._data is None:
            if self._deferred_init:
                ctx = self._deferred_init[1]
            ctx = _ctx_list(ctx)
            with autograd.pause():
                self._init_impl(data, ctx)
        else:
            _ctx_list(ctx)
            if self._dtype is not None and _onp.dtype(self._dtype) != self._data.dtype:
                with autograd.pause():     # dtype_source='saved' changed the dtype
                    self._init_impl(data, self._ctx_list)
            else:
                self.set_data(data)
        self._deferred_init = ()

    def _reduce(self):
        """A copy of the value (for saving)."""
        self._check_initialized()
        with autograd.pause():
            return self._data.copy()

    def reset_ctx(self, ctx):
        """Move the parameter to ``ctx``: any ``mx.cpu(i)``, where it already is."""
        ctx = _ctx_list(ctx)
        if self._data is not None:
            self._ctx_list = ctx
            self._attach_grad()       # one context or several (Note [Parameters on ...])
        elif self._deferred_init:
            init, _, default_init, data = self._deferred_init
            self._deferred_init = (init, ctx, default_init, data)
        else:
            raise ValueError("Cannot reset context for Parameter '%s' because it has not been "
                             "initialized." % self.name)

    def cast(self, dtype):
        """Cast the value and gradient to ``dtype`` (the gradient restarts at zero)."""
        self._dtype = dtype
        self._var = None
        if self._data is None:
            return
        with autograd.pause():
            self._init_impl(self._data.asnumpy().astype(dtype), self._ctx_list)

    def var(self):
        """A symbol variable standing for this parameter (``mx.sym.var`` with its name,
        shape, dtype, ``lr_mult``, ``wd_mult`` and ``init``)."""
        shape = None if self._shape is None else tuple(d if d > 0 else 0
                                                       for d in self._shape)
        # One variable per parameter, so that every use of it in a graph (the steps of an
        # unrolled cell) is one argument; made again only when what it declares changed (a
        # cast, the end of deferred initialisation, new multipliers).
        key = (self.name, shape, self.dtype, self.lr_mult, self.wd_mult, self.init)
        if self._var is None or self._var_key != key:
            self._var = _symbol.var(self.name, shape=shape, dtype=self.dtype,
                                    lr_mult=self.lr_mult, wd_mult=self.wd_mult,
                                    init=self.init)     # a symbol's unknown dimension is 0
            self._var_key = key
        return self._var


class Constant(Parameter):
    """A parameter that training does not change (``grad_req`` is always ``'null'``);
    :meth:`set_data` still sets it.

    Parameters
    ----------
    name : str
    value : array-like
        The value; its shape and dtype become the constant's (a list gives float32).

    Examples
    --------
    >>> import fastgrad as mx
    >>> c = mx.gluon.Constant('c', [[1, 2], [3, 4]])
    >>> c.initialize()
    >>> c.data()
    <BLANKLINE>
    [[1. 2.]
     [3. 4.]]
    <NDArray 2x2 @cpu(0)>
    """

    def __init__(self, name, value=None):
        if value is None:   # MXNet 2's Constant(value) with the default name
            name, value = "const", name
        if not isinstance(value, (_nd.NDArray, _mx_np.ndarray)):
            value = _nd.array(value)
        self.value = value
        super().__init__(name, grad_req="null", shape=value.shape,
                         dtype=_onp.dtype(value.dtype).type, init=_ConstantInit(value))

    def __repr__(self):
        return "Constant %s (shape=%s, dtype=%s)" % (self.name, self.shape, self.dtype)

    @property
    def grad_req(self):
        return "null"

    @grad_req.setter
    def grad_req(self, req):
        if req != "null":
            warnings.warn('Constant parameter "%s" does not support grad_req other than "null", '
                          'and new value "%s" is ignored.' % (self.name, req))
        self._grad_req = "null"


class _ConstantInit(initializer.Initializer):
    """Fills a Constant with its value, whatever its name's suffix."""

    def __init__(self, value):
        super().__init__()
        self._value = value

    def __call__(self, desc, arr):
        arr[...] = self._value.asnumpy()

    def _init_weight(self, _, arr):
        arr[...] = self._value.asnumpy()

    def dumps(self):
        return '["constant", {"value": %s}]' % (self._value.asnumpy().tolist(),)


class ParameterDict:
    """An ordered dictionary of Parameters keyed by their names (MXNet 1.x's
    ``ParameterDict``); :meth:`get` creates parameters named ``prefix + name``.

    Parameters
    ----------
    prefix : str, default ''
        Prepended to the names of the parameters :meth:`get` creates.
    shared : ParameterDict, optional
        Where :meth:`get` looks first before creating a parameter (weight sharing).

    Examples
    --------
    >>> import fastgrad as mx
    >>> params = mx.gluon.ParameterDict('net_')
    >>> w = params.get('weight', shape=(2, 2))
    >>> params
    net_ (
      Parameter net_weight (shape=(2, 2), dtype=<class 'numpy.float32'>)
    )
    """

    def __init__(self, prefix="", shared=None):
        self._prefix = prefix
        self._params = OrderedDict()
        self._shared = shared
        self._aliases = {}      # structural names -> parameters (Block.collect_params)

    def __repr__(self):
        name = self._prefix + " " if self._prefix else ""
        content = "\n".join(_indent("  %s" % (v,), 2) for v in self.values())
        return "%s(\n%s\n)" % (name, content)

    def __getitem__(self, key):
        """The parameter named ``key``; a dict from ``Block.collect_params()`` also finds a
        parameter by its structural name (``'0.weight'``, MXNet 2's key)."""
        try:
            return self._params[key]
        except KeyError:
            if key in self._aliases:
                return self._aliases[key]
            raise

    def __iter__(self):
        return iter(self._params)

    def __len__(self):
        return len(self._params)

    def __contains__(self, key):
        return key in self._params or key in self._aliases

    def items(self):
        return self._params.items()

    def keys(self):
        return self._params.keys()

    def values(self):
        return self._params.values()

    @property
    def prefix(self):
        """Prepended to the names of the parameters :meth:`get` creates."""
        return self._prefix

    def _get_impl(self, name):
        if name in self._params:
            return self._params[name]
        if self._shared is not None and name in self._shared._params:
            self._params[name] = self._shared._params[name]
            return self._params[name]
        return None

    def get(self, name, **kwargs):
        """The parameter named ``prefix + name``: from this dict, else from ``shared``, else
        a new ``Parameter(prefix + name, **kwargs)``. An existing parameter must agree with
        ``kwargs`` (unknown shape dimensions are filled from them)."""
        name = self._prefix + name
        param = self._get_impl(name)
        if param is None:
            param = Parameter(name, **kwargs)
            self._params[name] = param
            return param
        for key, value in kwargs.items():
            existing = getattr(param, key, None)
            if existing is None:
                setattr(param, key, value)
                continue
            if key == "shape" and value is not None:
                merged = self._merge_shape(_as_shape(value), param._shape)
                if merged is not None:
                    param._shape = merged
                    continue
            elif key == "dtype" and value is not None and \
                    _onp.dtype(value) == _onp.dtype(existing):
                continue
            if value is not None and value != existing:
                raise AssertionError(
                    "Cannot retrieve Parameter '%s' because desired attribute does not match "
                    "with stored for attribute '%s': desired '%s' vs stored '%s'."
                    % (name, key, str(value), str(existing)))
        return param

    @staticmethod
    def _merge_shape(wanted, stored):
        if len(wanted) != len(stored):
            return None
        merged = []
        for a, b in zip(wanted, stored):
            if a > 0 and b > 0 and a != b:
                return None
            merged.append(a if a > 0 else b)
        return tuple(merged)

    def get_constant(self, name, value=None):
        """The :class:`Constant` named ``prefix + name``: existing, shared, or new from
        ``value``."""
        name = self._prefix + name
        param = self._get_impl(name)
        if param is None:
            if value is None:
                raise KeyError("No constant named '%s'. Please specify value if you want to "
                               "create a new constant." % name)
            param = Constant(name, value)
            self._params[name] = param
        elif value is not None:
            if not isinstance(param, Constant):
                raise AssertionError("Parameter '%s' already exists but it is not a constant."
                                     % name)
            if hasattr(value, "asnumpy"):
                value = value.asnumpy()
            value = _onp.asarray(value)
            if param.shape != value.shape or not (param.value.asnumpy() == value).all():
                raise AssertionError("Constant '%s' already exists but it's value doesn't "
                                     "match new value" % name)
        return param

    def update(self, other):
        """Add the parameters of ``other`` (a dict-like of name to Parameter); a name bound to
        a different parameter raises."""
        for key, value in other.items():
            if key in self._params and self._params[key] is not value:
                raise AssertionError("Cannot update self with other because they have "
                                     "different Parameters with the same name '%s'" % key)
        for key, value in other.items():
            self._params[key] = value

    def initialize(self, init=initializer.Uniform(), ctx=None, verbose=False,
                   force_reinit=False):
        """Initialise every parameter; ``init`` is the default for those without their own
        ``init``."""
        if verbose and hasattr(init, "set_verbosity"):
            init.set_verbosity(verbose=verbose)
        for param in self.values():
            param.initialize(None, ctx, init, force_reinit=force_reinit)

    def zero_grad(self):
        """Set every parameter's gradient to zero."""
        for param in self.values():
            param.zero_grad()

    def reset_ctx(self, ctx):
        """:meth:`Parameter.reset_ctx` on every parameter."""
        for param in self.values():
            param.reset_ctx(ctx)

    def list_ctx(self):
        """The contexts of the parameters (``[cpu(0)]``)."""
        seen = []
        for param in self.values():
            for c in param.list_ctx():
                if c not in seen:
                    seen.append(c)
        return seen

    def setattr(self, name, value):
        """Set attribute ``name`` of every parameter, e.g. ``setattr('grad_req', 'null')``."""
        for param in self.values():
            setattr(param, name, value)

    def select(self, pattern):
        """The parameters whose key matches the regular expression ``pattern`` (``re.match``),
        as a new ParameterDict."""
        regex = re.compile(pattern)
        selected = ParameterDict(self._prefix)
        selected.update({k: v for k, v in self.items() if regex.match(k)})
        return selected

    def save(self, filename, strip_prefix=""):
        """Save the parameters to ``filename`` in MXNet's ``.params`` format, keyed by name
        (without ``strip_prefix``)."""
        arg_dict = {}
        for param in self.values():
            if not param.name.startswith(strip_prefix):
                raise ValueError(
                    "Prefix '%s' is to be striped before saving, but Parameter's name '%s' does "
                    "not start with '%s'. this may be due to your Block shares parameters from "
                    "other Blocks or you forgot to use 'with name_scope()' when creating child "
                    "blocks." % (strip_prefix, param.name, strip_prefix))
            arg_dict[param.name[len(strip_prefix):]] = param._reduce()
        _save(filename, arg_dict)

    def load(self, filename, ctx=None, allow_missing=False, ignore_extra=False,
             restore_prefix="", cast_dtype=False, dtype_source="current"):
        """Load parameters saved by :meth:`save` (or MXNet) from ``filename``.

        Parameters
        ----------
        allow_missing : bool, default False
            Leave parameters absent from the file as they are instead of raising.
        ignore_extra : bool, default False
            Skip entries of the file that name no parameter here instead of raising.
        restore_prefix : str, default ''
            Prepended to the names in the file.
        cast_dtype, dtype_source :
            Cast to the parameter's dtype (``'current'``) or take the file's (``'saved'``).
        """
        if restore_prefix:
            for name in self.keys():
                if not name.startswith(restore_prefix):
                    raise AssertionError(
                        "restore_prefix is '%s' but Parameters name '%s' does not start with "
                        "'%s'." % (restore_prefix, name, restore_prefix))
        self.load_dict(_load(filename), ctx, allow_missing, ignore_extra, restore_prefix,
                       filename, cast_dtype, dtype_source)

    def load_dict(self, param_dict, ctx=None, allow_missing=False, ignore_extra=False,
                  restore_prefix="", filename=None, cast_dtype=False, dtype_source="current"):
        """Load from a dict of name to array (``arg:``/``aux:`` prefixes are dropped)."""
        items = param_dict.items() if isinstance(param_dict, dict) else param_dict
        loaded = [(k[4:] if k.startswith(("arg:", "aux:")) else k, v) for k, v in items]
        arg_dict = {restore_prefix + k: v for k, v in loaded}
        source = "file: %s" % filename if filename else "param_dict"
        lprefix = len(restore_prefix)
        if not allow_missing:
            for name in self.keys():
                if name not in arg_dict:
                    raise AssertionError(
                        "Parameter '%s' is missing in %s, which contains parameters: %s. "
                        "Please make sure source and target networks have the same prefix."
                        % (name[lprefix:], source, _brief_print_list(arg_dict.keys())))
        for name, value in arg_dict.items():
            if name not in self._params:
                if not ignore_extra:
                    raise AssertionError(
                        "Parameter '%s' loaded from %s is not present in ParameterDict, "
                        "choices are: %s. Set ignore_extra to True to ignore. Please make sure "
                        "source and target networks have the same prefix."
                        % (name[lprefix:], source, _brief_print_list(self._params.keys())))
                continue
            self._params[name]._load_init(value, ctx, cast_dtype=cast_dtype,
                                          dtype_source=dtype_source)


def _save(filename, arg_dict):
    """Save a dict of arrays as MXNet does: ``npx.save`` after ``set_np()``, else
    ``nd.save``."""
    if _npx.is_np_array_requested():
        _npx.save(filename, arg_dict)
    else:
        _nd.save(filename, arg_dict)


def _load(filename):
    """Load a ``.params`` file as a dict (``nd.load``; a file of unnamed arrays raises)."""
    loaded = _nd.load(filename)
    if not isinstance(loaded, dict):
        raise ValueError("%s holds a list of %d unnamed arrays; Gluon parameter files name "
                         "their arrays" % (filename, len(loaded)))
    return loaded
