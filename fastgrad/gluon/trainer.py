"""``Trainer``: an optimizer applied to a set of Gluon Parameters after each backward pass,
with the gradients summed across devices and worker processes by a KVStore (MXNet 1.9.1's
``gluon.Trainer``).

Note [Trainer and the KVStore]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
MXNet's rules decide whether there is a store and who runs the optimizer. ``kvstore=None``
means none. A string makes one only for a distributed type (``'dist_sync'``,
``'dist_device_sync'``, ``'horovod'``) or when the parameters were initialised on more than one
context (``ctx=[mx.cpu(0), mx.cpu(1)]``; fastgrad keeps one copy on the CPU, so the store
then sums one gradient). A ``KVStore`` object is used as given. When there is a store,
``update_on_kvstore`` (default: the environment's ``MXNET_UPDATE_ON_KVSTORE``, 1 unless set)
says whether the store runs the optimizer on the summed gradient (``pushpull(grad,
out=weight)``) or only sums the gradients (``pushpull(grad)``) and the Trainer's own updater
runs it; a store that cannot run an optimizer (``'horovod'``) forces the latter, and asking
for the former with it is a ValueError. The store is created at the first ``step`` (or
``allreduce_grads``/``update``/``save_states``), and each parameter's value is broadcast
from rank 0 then, so every worker starts from the same weights.

Note [Stale gradients]
~~~~~~~~~~~~~~~~~~~~~~
Every array records whether a backward pass wrote its gradient since it was last cleared
(``_fresh_grad``, set by the engine); the Trainer clears it for each parameter it updates.
Before anything is summed or updated, ``step``/``update`` check every parameter with a
gradient: a stale one raises MXNet's message naming the parameter, unless
``ignore_stale_grad=True``, which skips updating it. Differences from MXNet 1.9.1, which
checks only after the gradients were summed (and, with ``update_on_kvstore``, after the store
already updated the weights): here the error comes first and changes nothing, and with
``update_on_kvstore`` a stale gradient is detected too (MXNet applies it again) and
``ignore_stale_grad`` keeps it out of the store's update.
"""

import numbers
import os

from fastgrad import kvstore as _kvstore
from fastgrad import optimizer as opt
from fastgrad.gluon.parameter import Parameter, ParameterDict

__all__ = ["Trainer"]

_STALE_MESSAGE = (
    "Gradient of Parameter `%s` on context %s has not been updated by backward since last "
    "`step`. This could mean a bug in your model that made it only use a subset of the "
    "Parameters (Blocks) for this iteration. If you are intentionally only using a subset, "
    "call step with ignore_stale_grad=True to suppress this warning and skip updating of "
    "Parameters with stale gradient")

# Local stores only matter with several contexts; these always make a store (Note [Trainer
# and the KVStore]).
_ALWAYS_A_STORE = ("dist", "horovod")


class Trainer:
    """Applies an :class:`~fastgrad.optimizer.Optimizer` to a set of Parameters; use it with
    ``autograd``: record the forward pass, call ``backward()``, then :meth:`step`.

    Parameters
    ----------
    params : ParameterDict, dict or list of Parameter
        The parameters to optimise (``net.collect_params()``); a dict's values are taken in
        the order of its sorted keys.
    optimizer : str or Optimizer
        An optimizer's registered name (``'sgd'``, ``'adam'``, ...) or an instance.
    optimizer_params : dict, optional
        Keyword arguments of the optimizer's constructor (``{'learning_rate': 0.1}``); must be
        empty when ``optimizer`` is an instance.
    kvstore : str, KVStore or None, default 'device'
        Sums gradients across devices and workers (Note [Trainer and the KVStore]):
        ``'local'``, ``'device'``, ``'dist_sync'``, ``'dist_device_sync'``, ``'horovod'``, a
        store from ``mx.kv.create``, or None.
    compression_params : dict, optional
        Gradient compression for the store; fastgrad sums gradients exactly, so a store given
        this raises.
    update_on_kvstore : bool, optional
        Whether the store runs the optimizer (None: MXNet's default for the store).

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad import autograd, gluon
    >>> w = gluon.Parameter('w', shape=(2,), init=mx.init.One())
    >>> w.initialize()
    >>> trainer = gluon.Trainer([w], 'sgd', {'learning_rate': 0.1})
    >>> with autograd.record():
    ...     loss = (w.data() * mx.nd.array([1.0, 3.0])).sum()
    >>> loss.backward()
    >>> trainer.step(batch_size=1)
    >>> w.data()
    <BLANKLINE>
    [0.9 0.7]
    <NDArray 2 @cpu(0)>
    """

    def __init__(self, params, optimizer, optimizer_params=None, kvstore="device",
                 compression_params=None, update_on_kvstore=None):
        if isinstance(params, (dict, ParameterDict)):
            params = [params[key] for key in sorted(params.keys())]
        if not isinstance(params, (list, tuple)):
            hint = (" (pass block.collect_params())" if hasattr(params, "collect_params")
                    else "")
            raise ValueError("First argument must be a list or dict of Parameters, got %s.%s"
                             % (type(params), hint))
        self._params = []
        self._param2idx = {}
        self._index = seen = {}            # id(parameter) -> its index (its key in the store)
        for i, param in enumerate(params):
            if not isinstance(param, Parameter):
                raise ValueError("First argument must be a list or dict of Parameters, got "
                                 "list of %s." % type(param))
            if id(param) in seen:
                raise ValueError("Trainer: Parameter '%s' is given twice (at positions %d and "
                                 "%d); each parameter must appear once, or it would be "
                                 "updated twice per step" % (param.name, seen[id(param)], i))
            seen[id(param)] = i
            self._param2idx[param.name] = i
            self._params.append(param)
            param._set_trainer(self)
        self._contains_sparse_weight = False
        self._contains_sparse_grad = False
        self._compression_params = compression_params
        self._contexts = self._check_contexts()
        self._init_optimizer(optimizer, optimizer_params if optimizer_params else {})
        self._scale = self._optimizer.rescale_grad
        if not (kvstore is None or isinstance(kvstore, (str, _kvstore.KVStore))):
            raise TypeError("kvstore must be KVStore, str or None")
        if update_on_kvstore not in (None, True, False):
            raise ValueError("Trainer: update_on_kvstore must be True, False or None, got %r"
                             % (update_on_kvstore,))
        self._kvstore_params = {"kvstore": kvstore, "update_on_kvstore": update_on_kvstore}
        self._kv_initialized = False
        self._kvstore = None
        self._update_on_kvstore = None
        self._distributed = None
        self._params_to_init = []
        self._reset_kvstore()

    # ------------------------------------------------------------------ set-up
    def _check_contexts(self):
        contexts = None
        for param in self._params:
            ctx = param.list_ctx()
            if contexts is not None and contexts != ctx:
                raise AssertionError(
                    "All Parameters must be initialized on the same set of contexts, but "
                    "Parameter %s is initialized on %s while previous Parameters are "
                    "initialized on %s." % (param.name, str(ctx), str(contexts)))
            contexts = ctx
        return contexts if contexts is not None else []

    def _init_optimizer(self, optimizer, optimizer_params):
        param_dict = dict(enumerate(self._params))
        if isinstance(optimizer, opt.Optimizer):
            if optimizer_params:
                raise AssertionError("optimizer_params must be None if optimizer is an "
                                     "instance of Optimizer instead of str")
            self._optimizer = optimizer
            # not a copy: later changes of a parameter's lr_mult/wd_mult take effect
            self._optimizer.param_dict = param_dict
        else:
            self._optimizer = opt.create(optimizer, param_dict=param_dict, **optimizer_params)
        self._updaters = [opt.get_updater(self._optimizer) for _ in self._contexts or [None]]

    def _reset_kvstore(self):
        """Forget the store (a parameter loaded anew is broadcast again at the next step)."""
        if self._kvstore and "dist" in self._kvstore.type:
            raise RuntimeError("Cannot reset distributed KVStore.")
        self._kv_initialized = False
        self._kvstore = None
        self._distributed = None
        self._update_on_kvstore = None
        self._params_to_init = list(self._params)

    def _create_kvstore(self):
        """MXNet's ``model._create_kvstore``: the store (or None) and the default of
        ``update_on_kvstore``."""
        kind = self._kvstore_params["kvstore"]
        update_on_kvstore = bool(int(os.getenv("MXNET_UPDATE_ON_KVSTORE", "1")))
        if kind is None:
            store = None
        elif isinstance(kind, _kvstore.KVStore):
            store = kind
        elif len(self._contexts) <= 1 and not any(k in kind for k in _ALWAYS_A_STORE):
            store = None        # one device, one process: nothing to sum
        else:
            store = _kvstore.create(kind)
            if kind == "local":
                largest = max((_size(p.shape) for p in self._params), default=0)
                if largest > 1024 * 1024 * 16:
                    update_on_kvstore = False
        if store is None:
            return None, False
        return store, update_on_kvstore and store.is_capable(_kvstore.KVStore.OPTIMIZER)

    def _init_kvstore(self):
        """Create the store and decide ``update_on_kvstore`` (Note [Trainer and the
        KVStore])."""
        asked = self._kvstore_params["update_on_kvstore"]
        store, update_on_kvstore = self._create_kvstore()
        self._distributed = "dist" in store.type if store is not None else False
        if store is not None:
            if asked is not None:
                update_on_kvstore = asked
            if update_on_kvstore and not store.is_capable(_kvstore.KVStore.OPTIMIZER):
                if asked:
                    raise ValueError("Please set update_on_kvstore=False when training with "
                                     "{}".format(type(store)))
                update_on_kvstore = False
            if self._compression_params:
                store.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                store.set_optimizer(self._optimizer)
            self._kvstore = store
            self._update_on_kvstore = update_on_kvstore
        else:
            self._kvstore = None
            self._update_on_kvstore = None
        self._kv_initialized = True

    def _init_params(self):
        """Put each parameter whose value exists into the store (rank 0's value, broadcast to
        every worker); deferred ones wait for a later step."""
        waiting = []
        if self._kvstore:
            for param in self._params_to_init:
                if param._deferred_init:
                    waiting.append(param)
                    continue
                arrays = param.list_data()
                self._kvstore.broadcast(self._index[id(param)], arrays[0], arrays)
        self._params_to_init = waiting

    def _ready(self):
        if not self._kv_initialized:
            self._init_kvstore()
        if self._params_to_init:
            self._init_params()

    # ------------------------------------------------------------------ properties
    @property
    def learning_rate(self):
        """The optimizer's current learning rate."""
        if not isinstance(self._optimizer, opt.Optimizer):
            raise UserWarning("Optimizer has to be defined before its learning rate can be "
                              "accessed.")
        return self._optimizer.learning_rate

    @property
    def optimizer(self):
        """The optimizer."""
        if isinstance(self._optimizer, opt.Optimizer):
            return self._optimizer
        raise UserWarning("Optimizer has not been initialized yet")

    def set_learning_rate(self, lr):
        """Set the optimizer's learning rate (an error when an ``lr_scheduler`` sets it)."""
        if not isinstance(self._optimizer, opt.Optimizer):
            raise UserWarning("Optimizer has to be defined before its learning rate is "
                              "mutated.")
        self._optimizer.set_learning_rate(lr)

    # ------------------------------------------------------------------ training
    def _check_and_rescale_grad(self, scale):
        if self._update_on_kvstore and self._distributed and self._kv_initialized:
            if self._optimizer.rescale_grad != scale:
                raise UserWarning("Possible change in the `batch_size` from previous `step` "
                                  "detected. Optimizer gradient normalizing factor will not "
                                  "change w.r.t new batch_size when update_on_kvstore=True "
                                  "and when distributed kvstore is used.")
        self._optimizer.rescale_grad = scale

    def step(self, batch_size, ignore_stale_grad=False):
        """One update of every parameter, after ``backward()`` and outside ``record()``:
        :meth:`allreduce_grads` then :meth:`update`.

        Parameters
        ----------
        batch_size : int
            The gradients are scaled by ``1 / batch_size`` (with several workers, the batch
            summed over all of them is usually meant). Use 1 if the loss is already a mean.
        ignore_stale_grad : bool, default False
            Skip parameters whose gradient no backward pass wrote since the last step,
            instead of raising (Note [Stale gradients]).
        """
        self._check_and_rescale_grad(self._scale / _batch(batch_size, "step"))
        fresh = self._fresh_params("step", ignore_stale_grad)
        self._ready()
        self._allreduce_grads(fresh if self._update_on_kvstore else None)
        self._update(fresh)
        self._clear_shard_sums(fresh)

    def allreduce_grads(self):
        """Sum each parameter's gradient over devices and workers, in place. With
        :meth:`update` it makes a :meth:`step` with room in between (to clip the summed
        gradients, say); not available when the store runs the optimizer."""
        self._ready()
        if self._kvstore and self._update_on_kvstore:
            raise AssertionError("allreduce_grads() when parameters are updated on kvstore is "
                                 "not supported. Try setting `update_on_kvstore` to False "
                                 "when creating trainer.")
        self._allreduce_grads(None)

    def update(self, batch_size, ignore_stale_grad=False):
        """The update half of :meth:`step` (after :meth:`allreduce_grads`)."""
        self._ready()
        if self._kvstore and self._update_on_kvstore:
            raise AssertionError("update() when parameters are updated on kvstore is not "
                                 "supported. Try setting `update_on_kvstore` to False when "
                                 "creating trainer.")
        fresh = self._fresh_params("update", ignore_stale_grad)
        self._check_and_rescale_grad(self._scale / _batch(batch_size, "update"))
        self._update(fresh)
        self._clear_shard_sums(fresh)

    def _clear_shard_sums(self, updated):
        """Zero the gradients that summed the shards of several contexts, once used (Note
        [Parameters on several contexts] in parameter.py)."""
        for i in updated:
            if self._params[i]._accumulates_shards():
                self._params[i].zero_grad()

    def _fresh_params(self, method, ignore_stale_grad):
        """The indices of the parameters to update; raises for a stale gradient unless
        ``ignore_stale_grad`` (Note [Stale gradients])."""
        fresh = []
        for i, param in enumerate(self._params):
            if param.grad_req == "null":
                continue
            arrays = param.list_data()
            stale = [a for a in arrays if not a._fresh_grad]
            if stale and not ignore_stale_grad:
                raise UserWarning(_STALE_MESSAGE % (param.name, str(stale[0].context)))
            if not stale:
                fresh.append(i)
        return fresh

    def _allreduce_grads(self, only):
        """Sum the gradients in the store: into the gradients, or, when the store runs the
        optimizer, into its update whose result is pulled into the weights (``only``: the
        indices of the parameters to push, for ``ignore_stale_grad``)."""
        if not self._kvstore:
            return
        for i, param in enumerate(self._params):
            if param.grad_req == "null" or (only is not None and i not in only):
                continue
            grads = param.list_grad()
            if self._update_on_kvstore:
                self._kvstore.pushpull(i, grads, out=param.list_data(), priority=-i)
                for array in param.list_data():
                    array._fresh_grad = False
            else:
                self._kvstore.pushpull(i, grads, priority=-i)

    def _update(self, fresh):
        if self._kvstore and self._update_on_kvstore:
            return
        batches = [[] for _ in self._updaters]
        for i in fresh:
            param = self._params[i]
            for batch, array, grad in zip(batches, param.list_data(), param.list_grad()):
                batch.append((i, grad, array))
                array._fresh_grad = False
        for updater, batch in zip(self._updaters, batches):
            if batch:
                indices, grads, weights = zip(*batch)
                updater(list(indices), list(grads), list(weights))

    # ------------------------------------------------------------------ checkpoints
    def save_states(self, fname):
        """Write the optimizer and its states (momenta, moments, update counts) to ``fname``
        (a pickle, as MXNet; the parameters' ``lr_mult``/``wd_mult`` are not saved)."""
        self._ready()
        if self._update_on_kvstore:
            if self._params_to_init:
                raise AssertionError("Cannot save trainer states when some parameters are not "
                                     "yet initialized in kvstore.")
            self._kvstore.save_optimizer_states(fname, dump_optimizer=True)
        else:
            with open(fname, "wb") as f:
                f.write(self._updaters[0].get_states(dump_optimizer=True))

    def load_states(self, fname):
        """Read what :meth:`save_states` wrote; the loaded optimizer replaces this Trainer's,
        attached to this Trainer's parameters."""
        self._ready()
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
            self._optimizer = self._kvstore._updater.optimizer
        else:
            with open(fname, "rb") as f:
                states = f.read()
            for updater in self._updaters:
                updater.set_states(states)
                updater.optimizer = self._updaters[0].optimizer
            self._optimizer = self._updaters[0].optimizer
        self._optimizer.param_dict = dict(enumerate(self._params))


def _batch(batch_size, method):
    """``batch_size`` as a positive number, or a ValueError naming the method."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Real) \
            or not batch_size > 0:
        raise ValueError("Trainer.%s: batch_size must be a positive number, got %r"
                         % (method, batch_size))
    return batch_size


def _size(shape):
    n = 1
    for d in shape or ():
        n *= d
    return n
