"""``Module``: a symbol bound to one fastgrad Executor, trained with an optimizer or a KVStore
(MXNet 1.x's ``mx.mod.Module``).

Note [Module on one executor]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
MXNet's Module splits a batch over its devices through an executor group. fastgrad runs on
the CPU, so a Module holds one :class:`fastgrad.executor.Executor` (a list of several
contexts runs as one device over the whole batch: the same sums of gradients, except that
``BatchNorm`` takes its batch statistics over the whole batch), made by ``simple_bind``
from the data and label descriptions (their dtypes decide the arguments' dtypes: float64
data trains in float64). The gradient request of each argument follows MXNet: parameters
``grad_req`` (``'null'`` for ``fixed_param_names``), data ``grad_req`` only with
``inputs_need_grad``, labels and states ``'null'``; nothing when not ``for_training``.
The Module keeps its own copies of the parameters (``get_params``), refreshed from the
executor when an update made them stale, as MXNet's ``_params_dirty``. A batch of another
shape (the last one of an iterator that does not pad, a new batch size at ``predict``)
reshapes the bound executor: the new executor shares the parameter arrays, and the one
bound first is kept so that going back to the bound shape costs nothing.
"""

import logging
import warnings
from collections import OrderedDict

import numpy as np

from fastgrad import ndarray as nd
from fastgrad import optimizer as opt
from fastgrad._core._array import ndarray, unwrap
from fastgrad.context import Context, cpu
from fastgrad.initializer import InitDesc, Uniform
from fastgrad.io import DataDesc
from fastgrad.model import (load_checkpoint, _create_kvstore, _initialize_kvstore,
                            _update_params, _update_params_on_kvstore)
from fastgrad.module.base_module import BaseModule

__all__ = ["Module"]


def _check_input_names(symbol, names, typename, throw):
    args = symbol.list_arguments()
    for name in names:
        if name in args:
            continue
        candidates = [a for a in args
                      if not a.endswith(("_weight", "_bias", "_gamma", "_beta"))]
        msg = ("Module(..., %s_names=%s): the input %r is not an argument of the symbol "
               "(symbol.list_arguments()); did you mean one of %s?"
               % (typename, list(names), name, candidates))
        if throw:
            raise ValueError(msg)
        warnings.warn(msg, stacklevel=4)


def _checked_input_names(symbol, data_names, label_names, state_names, fixed_param_names):
    """A module's ``data_names``, ``label_names``, ``state_names`` and ``fixed_param_names``
    as lists (``None``: empty), checked against the symbol's arguments: an unknown name is an
    error, but a label name only warns (as MXNet)."""
    names = [list(n) if n is not None else []
             for n in (data_names, label_names, state_names, fixed_param_names)]
    for kind, kind_names in zip(("data", "label", "state", "fixed_param"), names):
        _check_input_names(symbol, kind_names, kind, kind != "label")
    return names


def _as_desc(x, what):
    if not isinstance(x, DataDesc):
        try:
            x = DataDesc(*x)
        except TypeError:
            raise TypeError("Module.bind: each entry of %s must be a DataDesc or a (name, "
                            "shape) pair, got %r" % (what, x)) from None
    shape = x.shape
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
        raise TypeError("Module.bind: the shape of %r in %s must be a tuple of ints, got %r"
                        % (x.name, what, shape))
    return x


def _parse_data_desc(data_names, label_names, data_shapes, label_shapes):
    data_shapes = [_as_desc(x, "data_shapes") for x in data_shapes]
    if sorted(data_names) != sorted(x.name for x in data_shapes):
        raise ValueError("Module.bind: data_shapes name %s but the module's data_names are %s"
                         % ([x.name for x in data_shapes], list(data_names)))
    if label_shapes is not None:
        label_shapes = [_as_desc(x, "label_shapes") for x in label_shapes]
        given = [x.name for x in label_shapes]
    else:
        given = []
    if sorted(label_names) != sorted(given):
        warnings.warn("Module.bind: label_shapes name %s but the module's label_names are %s"
                      % (given, list(label_names)), stacklevel=3)
    return data_shapes, label_shapes


def _batch_size(desc):
    axis = DataDesc.get_batch_axis(getattr(desc, "layout", None))
    return desc.shape[max(axis, 0)] if len(desc.shape) else None


def _with_batch(desc, batch):
    """``desc``'s shape with ``batch`` on its batch axis."""
    axis = max(DataDesc.get_batch_axis(getattr(desc, "layout", None)), 0)
    shape = list(desc.shape)
    if batch is not None and axis < len(shape):
        shape[axis] = batch
    return tuple(shape)


class Module(BaseModule):
    """A symbol trained and evaluated on batches (MXNet 1.x's ``Module``; Note [Module on
    one executor]).

    Parameters
    ----------
    symbol : Symbol
    data_names, label_names : list of str
        The symbol's inputs fed from a batch's ``data`` and ``label``.
    context : Context or list of one Context
    fixed_param_names : list of str, optional
        Parameters not updated (no gradient).
    state_names : list of str, optional
        Inputs set with ``set_states``, not updated.

    Examples
    --------
    >>> import fastgrad as mx
    >>> import numpy as np
    >>> data = mx.sym.var('data')
    >>> net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(data, num_hidden=2, name='fc'),
    ...                            name='softmax')
    >>> x = np.array([[1., 0.], [0., 1.], [1., 0.1], [0.1, 1.]] * 4)
    >>> y = np.array([0, 1, 0, 1] * 4)
    >>> train = mx.io.NDArrayIter(x, y, batch_size=4)
    >>> mod = mx.mod.Module(net)
    >>> mod.fit(train, num_epoch=20, optimizer_params={'learning_rate': 0.5},
    ...         initializer=mx.init.Xavier())
    >>> mod.score(train, 'acc')
    [('accuracy', 1.0)]
    """

    def __init__(self, symbol, data_names=("data",), label_names=("softmax_label",),
                 logger=logging, context=None, work_load_list=None, fixed_param_names=None,
                 state_names=None, group2ctxs=None, compression_params=None):
        super().__init__(logger=logger)
        if context is None:
            context = cpu()
        if isinstance(context, Context):
            context = [context]
        context = list(context)
        if not context:
            raise ValueError("Module: context is an empty list; give mx.cpu()")
        devices = [c for c in context if getattr(c, "device_type", "cpu") != "cpu"]
        if devices:
            raise ValueError("Module: fastgrad runs on the CPU only; context names %s (use "
                             "mx.cpu())" % devices)
        # Note [Module on one executor]: several devices run as one over the whole batch; their
        # number still decides whether a 'local' KVStore is made, as in MXNet
        self._context = context[:1]
        self._num_devices = len(context)
        self._work_load_list = work_load_list or [1]
        self._symbol = symbol
        data_names, label_names, state_names, fixed_param_names = _checked_input_names(
            symbol, data_names, label_names, state_names, fixed_param_names)
        input_names = data_names + label_names + state_names
        self._param_names = [x for x in symbol.list_arguments() if x not in input_names]
        self._fixed_param_names = fixed_param_names
        self._aux_names = symbol.list_auxiliary_states()
        self._data_names = data_names
        self._label_names = label_names
        self._state_names = state_names
        self._output_names = symbol.list_outputs()
        self._arg_params = None
        self._aux_params = None
        self._params_dirty = False
        self._compression_params = compression_params
        self._optimizer = None
        self._kvstore = None
        self._update_on_kvstore = None
        self._updater = None
        self._preload_opt_states = None
        self._grad_req = None
        self._exec = None
        self._default_exec = None
        self._monitors = []
        self._data_shapes = None
        self._label_shapes = None

    # ------------------------------------------------------------ checkpoints
    @staticmethod
    def load(prefix, epoch, load_optimizer_states=False, **kwargs):
        """A Module of the checkpoint ``prefix``/``epoch`` (bind it before use); ``kwargs``
        go to the constructor (``data_names=...``)."""
        symbol, args, auxs = load_checkpoint(prefix, epoch)
        mod = Module(symbol=symbol, **kwargs)
        mod._arg_params = args
        mod._aux_params = auxs
        mod.params_initialized = True
        if load_optimizer_states:
            mod._preload_opt_states = "%s-%04d.states" % (prefix, epoch)
        return mod

    def save_checkpoint(self, prefix, epoch, save_optimizer_states=False, remove_amp_cast=True):
        """Write ``prefix-symbol.json``, ``prefix-%04d.params`` (and ``.states``)."""
        self._symbol.save("%s-symbol.json" % prefix, remove_amp_cast=remove_amp_cast)
        param_name = "%s-%04d.params" % (prefix, epoch)
        self.save_params(param_name)
        logging.info('Saved checkpoint to "%s"', param_name)
        if save_optimizer_states:
            state_name = "%s-%04d.states" % (prefix, epoch)
            self.save_optimizer_states(state_name)
            logging.info('Saved optimizer state to "%s"', state_name)

    # ------------------------------------------------------------ descriptions
    @property
    def data_names(self):
        return self._data_names

    @property
    def label_names(self):
        return self._label_names

    @property
    def output_names(self):
        return self._output_names

    @property
    def data_shapes(self):
        self._require("data_shapes", params=False)
        return self._data_shapes

    @property
    def label_shapes(self):
        self._require("label_shapes", params=False)
        return self._label_shapes

    @property
    def output_shapes(self):
        self._require("output_shapes", params=False)
        inputs = [d for d in self._data_shapes + (self._label_shapes or [])
                  if d.name in self._exec.arg_dict]
        _, out_shapes, _ = self._symbol.infer_shape(**{d.name: d.shape for d in inputs})
        _, out_types, _ = self._symbol.infer_type(**{d.name: np.dtype(d.dtype) for d in inputs})
        # (name, shape) pairs as MXNet's, which also carry the dtype (a SequentialModule
        # binds the next module in it)
        return [DataDesc(n, tuple(s), np.dtype(t).type)
                for n, s, t in zip(self._output_names, out_shapes, out_types)]

    @property
    def _exec_group(self):
        """MXNet scripts read ``mod._exec_group.execs[0]``: an object with ``execs``."""
        return _ExecutorView(self) if self.binded else None

    # ------------------------------------------------------------ parameters
    def get_params(self):
        """``(arg_params, aux_params)``: the module's copies, brought up to date."""
        self._require("get_params", bound=False)
        if self._params_dirty:
            self._sync_params_from_devices()
        return self._arg_params, self._aux_params

    def _sync_params_from_devices(self):
        args, auxs = self._exec.arg_dict, self._exec.aux_dict
        for name, arr in self._arg_params.items():
            args[name].copyto(arr)
        for name, arr in self._aux_params.items():
            auxs[name].copyto(arr)
        self._params_dirty = False

    def _set_exec_params(self, arg_params, aux_params, allow_extra=False, what="set_params"):
        for values, names, kind in ((arg_params, self._param_names, "parameter"),
                                    (aux_params, self._aux_names, "auxiliary state")):
            for name, value in (values or {}).items():
                if name not in names:
                    if allow_extra:
                        continue
                    raise ValueError("Module.%s: %r is not a %s of the symbol (%ss: %s); pass "
                                     "allow_extra=True to ignore it"
                                     % (what, name, kind, kind, names))
                target = (self._exec.arg_dict if kind == "parameter"
                          else self._exec.aux_dict)[name]
                if tuple(value.shape) != tuple(target.shape):
                    raise ValueError("Module.%s: %s %r has shape %s but the bound symbol "
                                     "expects %s" % (what, kind, name, tuple(value.shape),
                                                     tuple(target.shape)))
                target[:] = value.asnumpy() if hasattr(value, "asnumpy") else value

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Give every parameter and auxiliary state a value: from ``arg_params``/
        ``aux_params`` when they hold it, else from ``initializer`` (``allow_missing``), in
        sorted name order as MXNet. Other names in ``arg_params``/``aux_params`` are ignored.

        Raises
        ------
        RuntimeError
            If a parameter is missing from ``arg_params`` without ``allow_missing``.
        """
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "init_params call ignored.", stacklevel=2)
            return
        self._require("init_params", params=False)

        def fill(name, arr, given, kind):
            if given is not None:
                if name in given:
                    value = given[name]
                    if value is not arr:
                        if tuple(value.shape) != tuple(arr.shape):
                            raise ValueError("Module.init_params: %s %r has shape %s but the "
                                             "bound symbol expects %s" % (
                                                 kind, str(name), tuple(value.shape),
                                                 tuple(arr.shape)))
                        arr[:] = value.asnumpy() if hasattr(value, "asnumpy") else value
                    return
                if not allow_missing:
                    raise RuntimeError("%s is not presented: Module.init_params got %s_params "
                                       "without the %s %r (pass allow_missing=True to "
                                       "initialize it with the initializer)"
                                       % (name, kind[:3], kind, str(name)))
                if initializer is None:
                    return
            if initializer is None:
                raise ValueError("Module.init_params: initializer is None and no value was "
                                 "given for %r" % (str(name),))
            initializer(name, arr)

        attrs = self._symbol.attr_dict()
        for name, arr in sorted(self._arg_params.items()):
            fill(InitDesc(name, attrs.get(name, None)), arr, arg_params, "arg")
        for name, arr in sorted(self._aux_params.items()):
            fill(InitDesc(name, attrs.get(name, None)), arr, aux_params, "aux")
        # As MXNet, values for names the symbol does not have are ignored here (a bigger
        # network's checkpoint, a SequentialModule's merged parameters).
        self.params_initialized = True
        self._params_dirty = False
        self._set_exec_params(self._arg_params, self._aux_params, what="init_params")

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Assign parameter values (every one, unless ``allow_missing``)."""
        if self._set_params_settled_by_init_or_ignored(arg_params, aux_params, allow_missing,
                                                       force_init, allow_extra):
            return
        self._require("set_params", params=False)
        self._set_exec_params(arg_params, aux_params, allow_extra=allow_extra)
        self._params_dirty = True
        self.params_initialized = True

    # ------------------------------------------------------------ binding
    def _reset_bind(self):
        self.binded = False
        self._exec = None
        self._default_exec = None
        self._data_shapes = None
        self._label_shapes = None

    def _grad_reqs(self, grad_req):
        reqs = {}
        for name in self._symbol.list_arguments():
            if not self.for_training:
                req = "null"
            elif name in self._param_names:
                if isinstance(grad_req, dict):
                    req = grad_req.get(name, "write")
                else:
                    req = grad_req
                if name in self._fixed_param_names:
                    req = "null"
            elif name in self._data_names:
                req = (grad_req if isinstance(grad_req, str) else grad_req.get(name, "write")) \
                    if self.inputs_need_grad else "null"
            else:
                req = "null"
            reqs[name] = req
        return reqs

    def _bind_executor(self, data_shapes, label_shapes, shared_exec=None):
        inputs = list(data_shapes) + list(label_shapes or [])
        shapes = {d.name: tuple(d.shape) for d in inputs}
        types = {d.name: np.dtype(d.dtype) for d in inputs}
        known = set(self._symbol.list_arguments()) | set(self._aux_names)
        shapes = {k: v for k, v in shapes.items() if k in known}
        types = {k: v for k, v in types.items() if k in known}
        reqs = self._grad_reqs(self._grad_req)
        try:
            ex = self._symbol.simple_bind(cpu(), grad_req=reqs, type_dict=types, **shapes)
        except (ValueError, TypeError) as exc:
            raise ValueError("Module.bind: the symbol cannot be bound with data_shapes %s and "
                             "label_shapes %s: %s" % (list(data_shapes), label_shapes, exc)) \
                from exc
        if shared_exec is None:
            return ex
        # Note [Buckets share arrays] in bucketing_module.py: the shared module's parameter
        # and auxiliary arrays and gradient buffers (so 'add' accumulates across both)
        grads = {}
        for name in self._param_names:
            mine, theirs = ex.grad_dict.get(name), shared_exec.grad_dict.get(name)
            if mine is not None and theirs is not None and mine.shape == theirs.shape \
                    and mine.dtype == theirs.dtype:
                grads[name] = theirs
        if grads:
            ex = self._symbol.bind(cpu(), ex.arg_dict, args_grad=grads, grad_req=reqs,
                                   aux_states=ex.aux_dict)
        shared = dict(shared_exec.arg_dict)
        shared.update(shared_exec.aux_dict)
        names = ex._arg_names + ex._aux_names
        for i, name in enumerate(names):
            if name in shared and (name in self._param_names or name in self._aux_names):
                if shared[name].shape != ex._args[i].shape:
                    raise ValueError("Module.bind: shared_module's %r has shape %s, this "
                                     "module needs %s" % (name, shared[name].shape,
                                                          ex._args[i].shape))
                ex._args[i] = shared[name]
        return ex

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        """Bind the symbol for inputs described by ``data_shapes`` and ``label_shapes``
        (lists of ``DataDesc`` or ``(name, shape)``).

        Parameters
        ----------
        for_training : bool
            Allocate gradients (``backward``/``update`` need it).
        inputs_need_grad : bool
            Also compute the gradients of the data (``get_input_grads``).
        grad_req : str or dict
            ``'write'``, ``'add'`` or ``'null'`` for the parameters.
        shared_module : Module, optional
            Share its parameters (and optimizer).
        """
        if self._skip_bind(force_rebind):
            return
        if not for_training and inputs_need_grad:
            raise ValueError("Module.bind: inputs_need_grad=True needs for_training=True")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        self._data_shapes, self._label_shapes = _parse_data_desc(
            self._data_names, self._label_names, data_shapes, label_shapes)
        if shared_module is not None and not (isinstance(shared_module, Module)
                                              and shared_module.binded
                                              and shared_module.params_initialized):
            raise ValueError("Module.bind: shared_module must be a bound Module with "
                             "initialized parameters")
        self._exec = self._bind_executor(
            self._data_shapes, self._label_shapes,
            shared_module._exec if shared_module is not None else None)
        self._default_exec = self._exec
        for mon in self._monitors:
            mon.install(self._exec)
        if shared_module is not None:
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
        elif self.params_initialized:
            missing = [n for n in self._param_names if n not in self._arg_params] + \
                [n for n in self._aux_names if n not in (self._aux_params or {})]
            if missing:
                self._reset_bind()
                raise RuntimeError("Module.bind: the parameters given (Module.load's "
                                   "checkpoint or set_params) have no value for %s of the "
                                   "symbol; they hold %s" % (missing, sorted(
                                       list(self._arg_params) + list(self._aux_params or {}))))
            self._set_exec_params(self._arg_params, self._aux_params, what="bind")
        else:
            args, auxs = self._exec.arg_dict, self._exec.aux_dict
            self._arg_params = {n: nd.zeros(args[n].shape, dtype=args[n].dtype)
                                for n in self._param_names}
            self._aux_params = {n: nd.zeros(auxs[n].shape, dtype=auxs[n].dtype)
                                for n in self._aux_names}
        if shared_module is not None and shared_module.optimizer_initialized:
            self.borrow_optimizer(shared_module)
        self.binded = True

    def reshape(self, data_shapes, label_shapes=None):
        """Bind again for new input shapes, keeping the parameters."""
        self._require("reshape", params=False)
        data_shapes, label_shapes = _parse_data_desc(self._data_names, self._label_names,
                                                     data_shapes, label_shapes)
        new = {d.name: tuple(d.shape) for d in data_shapes + (label_shapes or [])
               if d.name in self._default_exec.arg_dict}
        current = {n: a.shape for n, a in self._exec.arg_dict.items() if n in new}
        previous = self._exec
        if new != current:
            default = {n: a.shape for n, a in self._default_exec.arg_dict.items() if n in new}
            if new == default:
                self._exec = self._default_exec
            else:
                try:
                    self._exec = self._default_exec.reshape(allow_up_sizing=True, **new)
                except ValueError as exc:
                    raise ValueError("Module.reshape: the symbol bound with %s cannot take "
                                     "the shapes %s: %s" % (default, new, exc)) from exc
        self._data_shapes, self._label_shapes = data_shapes, label_shapes
        if self._exec is not previous:
            for mon in self._monitors:      # the monitor watches the executor now in use
                mon._replace(previous, self._exec)

    # ------------------------------------------------------------ optimizer
    def init_optimizer(self, kvstore="local", optimizer="sgd",
                       optimizer_params=(("learning_rate", 0.01),), force_init=False):
        """Create the optimizer (``rescale_grad=1/batch_size`` unless given) and the KVStore
        (Note [Module updates] in ``fastgrad/model.py``)."""
        self._require("init_optimizer")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring...")
            return
        if self._params_dirty:
            self._sync_params_from_devices()
        kvstore, update_on_kvstore = _create_kvstore(kvstore, self._num_devices,
                                                     self._arg_params)
        batch_size = _batch_size(self._data_shapes[0])
        if kvstore and "dist" in kvstore.type and "_sync" in kvstore.type:
            batch_size *= kvstore.num_workers
        rescale_grad = 1.0 / batch_size
        idx2name = dict(enumerate(self._param_names))
        if isinstance(optimizer, str):
            optimizer_params = dict(optimizer_params)
            if "rescale_grad" not in optimizer_params:
                optimizer_params["rescale_grad"] = rescale_grad
            optimizer = opt.create(optimizer, sym=self.symbol, param_idx2name=idx2name,
                                   **optimizer_params)
        else:
            if not isinstance(optimizer, opt.Optimizer):
                raise TypeError("Module.init_optimizer: optimizer must be a name or an "
                                "Optimizer, not %s" % type(optimizer).__name__)
            if optimizer.rescale_grad != rescale_grad:
                warnings.warn("Optimizer created manually outside Module but rescale_grad is "
                              "not normalized to 1.0/batch_size/num_workers (%s vs. %s). Is "
                              "this intended?" % (optimizer.rescale_grad, rescale_grad),
                              stacklevel=2)
            if not optimizer.idx2name:
                optimizer.idx2name = idx2name.copy()
        self._optimizer = optimizer
        self._kvstore = kvstore
        self._update_on_kvstore = update_on_kvstore
        self._updater = None
        if kvstore:
            if self._compression_params:
                kvstore.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kvstore.set_optimizer(self._optimizer)
            _initialize_kvstore(kvstore, self._param_arrays(), self._arg_params,
                                self._param_names, update_on_kvstore)
        if not update_on_kvstore:
            self._updater = opt.get_updater(optimizer)
        self.optimizer_initialized = True
        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def borrow_optimizer(self, shared_module):
        """Use ``shared_module``'s optimizer, store and updater."""
        if not shared_module.optimizer_initialized:
            raise RuntimeError("Module.borrow_optimizer: the shared module's optimizer is not "
                               "initialized")
        self._optimizer = shared_module._optimizer
        self._kvstore = shared_module._kvstore
        self._update_on_kvstore = shared_module._update_on_kvstore
        self._updater = shared_module._updater
        self.optimizer_initialized = True

    def save_optimizer_states(self, fname):
        """Write the optimizer's states (the updater's, or the store's) to ``fname``."""
        self._require("save_optimizer_states", optimizer=True)
        if self._update_on_kvstore:
            self._kvstore.save_optimizer_states(fname)
        else:
            with open(fname, "wb") as f:
                f.write(self._updater.get_states())

    def load_optimizer_states(self, fname):
        """Read states written by :meth:`save_optimizer_states`."""
        self._require("load_optimizer_states", optimizer=True)
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
        else:
            with open(fname, "rb") as f:
                self._updater.set_states(f.read())

    # ------------------------------------------------------------ running
    def _param_arrays(self):
        args = self._exec.arg_dict
        return [[args[n]] for n in self._param_names]

    def _grad_arrays(self):
        grads = self._exec.grad_dict
        return [[grads[n]] for n in self._param_names]

    def _load(self, arrays, names, what):
        args = self._exec.arg_dict
        if len(arrays) != len(names):
            raise ValueError("Module.forward: the batch has %d %s arrays but the module "
                             "has %s_names %s" % (len(arrays), what, what, names))
        for name, value in zip(names, arrays):
            target = args[name]
            if tuple(value.shape) != tuple(target.shape):
                raise ValueError("Module.forward: %s %r of the batch has shape %s but the "
                                 "module is bound with %s" % (what, name, tuple(value.shape),
                                                              tuple(target.shape)))
            # one copy into the bound array (as NDArray.copyto), cast to its dtype
            np.copyto(unwrap(target), unwrap(value) if isinstance(value, ndarray)
                      else np.asarray(value), casting="unsafe")

    def forward(self, data_batch, is_train=None):
        """Run the symbol on ``data_batch`` (a ``DataBatch``); ``is_train`` defaults to
        ``for_training``. A batch of another shape reshapes the module first."""
        self._require("forward")
        if isinstance(data_batch, list):
            if not data_batch:
                raise ValueError("Module.forward: the list of batches is empty")
            batches = data_batch
            data = [nd.concatenate([b.data[i] for b in batches])
                    for i in range(len(batches[0].data))]
            labels = ([nd.concatenate([b.label[i] for b in batches])
                       for i in range(len(batches[0].label))] if batches[0].label else None)
            provide_data = provide_label = None
        else:
            data, labels = data_batch.data, getattr(data_batch, "label", None)
            provide_data = getattr(data_batch, "provide_data", None)
            provide_label = getattr(data_batch, "provide_label", None)
        if data is None or len(data) != len(self._data_names):
            raise ValueError("Module.forward: the batch has %s data arrays but the module has "
                             "data_names %s" % ("no" if data is None else len(data),
                                                self._data_names))
        current = tuple(tuple(d.shape) for d in self._data_shapes)
        new_shapes = tuple(tuple(d.shape) for d in data)
        if current != new_shapes:
            if provide_data:
                new_dshape = provide_data
            else:
                new_dshape = [DataDesc(d.name, shape, d.dtype, d.layout)
                              for d, shape in zip(self._data_shapes, new_shapes)]
            if provide_label:
                new_lshape = provide_label
            elif labels and self._label_shapes:
                new_lshape = [DataDesc(d.name, tuple(lab.shape), d.dtype, d.layout)
                              for d, lab in zip(self._label_shapes, labels)]
            elif self._label_shapes:
                # no labels (predicting): the bound labels follow the new batch size (MXNet
                # fails to reshape here)
                new_lshape = [DataDesc(d.name, _with_batch(d, _batch_size(new_dshape[0])),
                                       d.dtype, d.layout) for d in self._label_shapes]
            else:
                new_lshape = None
            self.reshape(new_dshape, new_lshape)
        if is_train is None:
            is_train = self.for_training
        self._load(data, [d.name for d in self._data_shapes], "data")
        label_names = [d.name for d in self._label_shapes or []
                       if d.name in self._exec.arg_dict]
        if label_names:
            if labels:
                self._load(labels, label_names, "label")
            elif is_train:
                raise ValueError("Module.forward: the batch has no label but the module is "
                                 "bound with label_shapes %s and is_train=True; give the "
                                 "DataBatch label=[...] (or bind with label_shapes=None)"
                                 % [(d.name, d.shape) for d in self._label_shapes])
        self._exec.forward(is_train=bool(is_train))
        for mon in self._monitors:
            mon._after_forward(self._exec)

    def backward(self, out_grads=None):
        """Gradients of the outputs (``out_grads``, or the loss heads' own) into the
        parameters' gradient buffers."""
        self._require("backward")
        if not self.for_training:
            raise RuntimeError("Module.backward: the module was bound with for_training=False; "
                               "bind(..., for_training=True) to compute gradients")
        self._exec.backward(out_grads=out_grads)

    def update(self):
        """Apply the optimizer to every parameter with a gradient (Note [Module updates])."""
        self._require("update", optimizer=True)
        self._params_dirty = True
        if self._update_on_kvstore:
            _update_params_on_kvstore(self._param_arrays(), self._grad_arrays(),
                                      self._kvstore, self._param_names)
        else:
            _update_params(self._param_arrays(), self._grad_arrays(), updater=self._updater,
                           num_device=len(self._context), kvstore=self._kvstore,
                           param_names=self._param_names)

    def get_outputs(self, merge_multi_context=True):
        """The outputs of the last forward (the executor's arrays)."""
        self._require("get_outputs")
        if self._exec.outputs is None:
            raise RuntimeError("Module.get_outputs: call forward first")
        outputs = list(self._exec.outputs)
        return outputs if merge_multi_context else [[o] for o in outputs]

    def get_input_grads(self, merge_multi_context=True):
        """The gradients of the data inputs (needs ``inputs_need_grad=True`` at bind)."""
        self._require("get_input_grads")
        if not self.inputs_need_grad:
            raise RuntimeError("Module.get_input_grads: bind with inputs_need_grad=True")
        grads = self._exec.grad_dict
        out = [grads[n] for n in self._data_names]
        return out if merge_multi_context else [[g] for g in out]

    def get_states(self, merge_multi_context=True):
        """The values of the ``state_names`` inputs."""
        self._require("get_states")
        out = [self._exec.arg_dict[n] for n in self._state_names]
        return out if merge_multi_context else [[s] for s in out]

    def set_states(self, states=None, value=None):
        """Set the ``state_names`` inputs to ``states`` (a list) or all to ``value``."""
        self._require("set_states")
        if (states is None) == (value is None):
            raise ValueError("Module.set_states: give exactly one of states and value")
        args = self._exec.arg_dict
        if states is not None:
            states = [s[0] if isinstance(s, (list, tuple)) else s for s in states]
            if len(states) != len(self._state_names):
                raise ValueError("Module.set_states: %d states for state_names %s"
                                 % (len(states), self._state_names))
            for name, s in zip(self._state_names, states):
                args[name][:] = s.asnumpy() if hasattr(s, "asnumpy") else s
        else:
            for name in self._state_names:
                args[name][:] = value

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """``eval_metric.update_dict(labels by label name, outputs by output name)``."""
        if pre_sliced:
            labels = [nd.concatenate(list(parts)) for parts in zip(*labels)] if labels else []
        label_names = [d.name for d in self._label_shapes] if self._label_shapes else []
        if labels and not label_names:
            raise ValueError("Module.update_metric: the module was bound without label_shapes, "
                             "so the batch's labels have no names (label_names %s); bind with "
                             "label_shapes=iterator.provide_label to score"
                             % self._label_names)
        eval_metric.update_dict(OrderedDict(zip(label_names, labels or [])),
                                OrderedDict(zip(self._output_names, self.get_outputs())))

    def install_monitor(self, mon):
        """Have ``mon`` (a :class:`fastgrad.monitor.Monitor`) watch the executor."""
        self._require("install_monitor", params=False)
        self._monitors.append(mon)
        mon.install(self._exec)


class _ExecutorView:
    """``mod._exec_group`` for scripts that reach into it: ``execs``, ``param_names``,
    ``param_arrays``, ``grad_arrays``, ``aux_arrays``, ``data_shapes``."""

    def __init__(self, module):
        self._module = module

    @property
    def execs(self):
        return [self._module._exec]

    @property
    def param_names(self):
        return list(self._module._param_names)

    @property
    def param_arrays(self):
        return self._module._param_arrays()

    @property
    def grad_arrays(self):
        return self._module._grad_arrays()

    @property
    def aux_arrays(self):
        return [[a] for a in self._module._exec.aux_arrays]

    @property
    def data_shapes(self):
        return self._module._data_shapes

    @property
    def label_shapes(self):
        return self._module._label_shapes

    @property
    def batch_size(self):
        return self._module._data_shapes[0].shape[0]
