"""``BaseModule``: the training loop and evaluation of MXNet 1.x's modules (``fit``, ``score``,
``predict``, ``iter_predict``), written on the abstract steps a module implements (``bind``,
``init_params``, ``init_optimizer``, ``forward``, ``backward``, ``update``,
``update_metric``, ``get_outputs``, ``get_params``, ``set_params``).

Note [Module fit loop]
~~~~~~~~~~~~~~~~~~~~~~
``fit`` runs MXNet 1.9.1's loop step for step, so a script's parameters after each epoch are
MXNet's: bind to the iterator's ``provide_data``/``provide_label``, ``init_params`` (sorted
by name), ``init_optimizer`` (``rescale_grad = 1/batch_size``); then per epoch: reset the
metric, for each batch forward, backward, update and update the metric (padding included,
as MXNet), fetch the next batch before the batch-end callbacks (so the last one sees the
epoch's metric), then log ``Epoch[i] Train-<name>=<value>``, hand the parameters to the
epoch-end callbacks, score ``eval_data`` and reset ``train_data``. The iterator is not reset
before the first epoch (as MXNet: give a fresh one).
"""

import logging
import time
import warnings

import numpy as np

from fastgrad import metric as _metric
from fastgrad import ndarray as nd
from fastgrad.initializer import Uniform
from fastgrad.io import DataBatch, DataIter
from fastgrad.model import BatchEndParam, _split_arg_aux

__all__ = ["BaseModule"]


def _as_list(obj):
    if obj is None:
        return []
    return list(obj) if isinstance(obj, (list, tuple)) else [obj]


class BaseModule:
    """The base of the modules: the state flags (``binded``, ``for_training``,
    ``inputs_need_grad``, ``params_initialized``, ``optimizer_initialized``) and the loops
    built on the abstract steps (Note [Module fit loop])."""

    def __init__(self, logger=logging):
        self.logger = logger
        self.binded = False
        self.for_training = False
        self.inputs_need_grad = False
        self.params_initialized = False
        self.optimizer_initialized = False
        self._symbol = None
        self._total_exec_bytes = 0

    # ------------------------------------------------------------ checks
    def _require(self, what, bound=True, params=True, optimizer=False):
        name = type(self).__name__
        if bound and not self.binded:
            raise RuntimeError("%s.%s: the module is not bound; call bind(data_shapes=..., "
                               "label_shapes=...) first (fit does it)" % (name, what))
        if params and not self.params_initialized:
            raise RuntimeError("%s.%s: the parameters are not initialized; call "
                               "init_params(initializer) or set_params(arg_params, aux_params) "
                               "first (fit does it)" % (name, what))
        if optimizer and not self.optimizer_initialized:
            raise RuntimeError("%s.%s: the optimizer is not initialized; call "
                               "init_optimizer(optimizer=..., optimizer_params=...) first "
                               "(fit does it)" % (name, what))

    # ------------------------------------------------------------ high-level
    def forward_backward(self, data_batch):
        """``forward(data_batch, is_train=True)`` then ``backward()``."""
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(self, eval_data, eval_metric, num_batch=None, batch_end_callback=None,
              score_end_callback=None, reset=True, epoch=0, sparse_row_id_fn=None):
        """Run ``eval_data`` forward (not training) and return ``eval_metric``'s
        ``get_name_value()`` over it (padding included, as MXNet).

        Parameters
        ----------
        eval_data : DataIter
        eval_metric : str or EvalMetric
        num_batch : int, optional
            Stop after this many batches.
        batch_end_callback, score_end_callback : callable or list of callables
            Called with a ``BatchEndParam`` after each batch / at the end.
        reset : bool
            Reset ``eval_data`` first.
        """
        self._require("score")
        if reset:
            eval_data.reset()
        if not isinstance(eval_metric, _metric.EvalMetric):
            eval_metric = _metric.create(eval_metric)
        eval_metric.reset()
        actual_num_batch = 0
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            if isinstance(eval_batch, list):
                self.update_metric(eval_metric, [b.label for b in eval_batch], pre_sliced=True)
            else:
                self.update_metric(eval_metric, eval_batch.label)
            for callback in _as_list(batch_end_callback):
                callback(BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                                       locals=locals()))
            actual_num_batch += 1
        for callback in _as_list(score_end_callback):
            callback(BatchEndParam(epoch=epoch, nbatch=actual_num_batch,
                                   eval_metric=eval_metric, locals=locals()))
        return eval_metric.get_name_value()

    def iter_predict(self, eval_data, num_batch=None, reset=True, sparse_row_id_fn=None):
        """Yield ``(outputs, nbatch, batch)`` for each batch of ``eval_data``, the outputs
        without the batch's padding."""
        self._require("iter_predict")
        if reset:
            eval_data.reset()
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            pad = eval_batch.pad or 0
            outputs = [out[0:out.shape[0] - pad] for out in self.get_outputs()]
            yield outputs, nbatch, eval_batch

    def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True,
                always_output_list=False, sparse_row_id_fn=None):
        """The outputs over ``eval_data`` (a DataIter, or one array run as one batch),
        without padding; concatenated over the batches with ``merge_batches``.

        Returns
        -------
        NDArray or list
            One array when the symbol has one output (and not ``always_output_list``), else a
            list; with ``merge_batches=False`` a list (per batch) of lists of outputs.
        """
        self._require("predict")
        if isinstance(eval_data, (nd.NDArray, np.ndarray)):
            if isinstance(eval_data, np.ndarray):
                eval_data = nd.array(eval_data)
            # inference mode (MXNet runs this forward in training mode on a training module)
            self.forward(DataBatch([eval_data]), is_train=False)
            return self.get_outputs()[0]
        if not isinstance(eval_data, DataIter):
            raise ValueError("predict: eval_data must be an NDArray or a DataIter, not %s"
                             % type(eval_data).__name__)
        if reset:
            eval_data.reset()
        output_list = []
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            pad = eval_batch.pad or 0
            output_list.append([out[0:out.shape[0] - pad].copy() for out in self.get_outputs()])
        if not output_list:
            return output_list
        if merge_batches:
            num_outputs = len(output_list[0])
            if any(len(out) != num_outputs for out in output_list):
                raise ValueError("predict: cannot merge the batches, their numbers of outputs "
                                 "differ (bucketing?); pass merge_batches=False")
            merged = [nd.concatenate([out[i] for out in output_list])
                      for i in range(num_outputs)]
            if num_outputs == 1 and not always_output_list:
                return merged[0]
            return merged
        return output_list

    def fit(self, train_data, eval_data=None, eval_metric="acc", epoch_end_callback=None,
            batch_end_callback=None, kvstore="local", optimizer="sgd",
            optimizer_params=(("learning_rate", 0.01),), eval_end_callback=None,
            eval_batch_end_callback=None, initializer=Uniform(0.01), arg_params=None,
            aux_params=None, allow_missing=False, force_rebind=False, force_init=False,
            begin_epoch=0, num_epoch=None, validation_metric=None, monitor=None,
            sparse_row_id_fn=None):
        """Train on ``train_data`` for epochs ``begin_epoch`` to ``num_epoch - 1`` (Note
        [Module fit loop]).

        Parameters
        ----------
        train_data : DataIter
        eval_data : DataIter, optional
            Scored with ``validation_metric`` (default ``eval_metric``) after each epoch.
        eval_metric : str or EvalMetric
        epoch_end_callback : callable(epoch, symbol, arg_params, aux_params) or a list
        batch_end_callback : callable(BatchEndParam) or a list
        kvstore : str or KVStore
        optimizer : str or Optimizer
        optimizer_params : dict or tuple of pairs
        initializer : Initializer
        arg_params, aux_params : dict, optional
            Initial values (those missing are initialized with ``allow_missing``).
        num_epoch : int
        monitor : Monitor, optional
        """
        if num_epoch is None:
            raise ValueError("fit: num_epoch is required (the number of the last epoch + 1)")
        if not isinstance(train_data, DataIter) and not hasattr(train_data, "provide_data"):
            raise TypeError("fit: train_data must be a DataIter (e.g. mx.io.NDArrayIter), not "
                            "%s" % type(train_data).__name__)
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=force_rebind)
        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(initializer=initializer, arg_params=arg_params,
                         aux_params=aux_params, allow_missing=allow_missing,
                         force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                            optimizer_params=optimizer_params)
        if validation_metric is None:
            validation_metric = eval_metric
        if not isinstance(eval_metric, _metric.EvalMetric):
            eval_metric = _metric.create(eval_metric)
        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            nbatch = 0
            data_iter = iter(train_data)
            end_of_batch = False
            try:
                next_data_batch = next(data_iter)
            except StopIteration:
                raise ValueError("fit: train_data gave no batch in epoch %d; is it reset (or "
                                 "smaller than one batch with last_batch_handle='discard')?"
                                 % epoch) from None
            eval_name_vals = []
            while not end_of_batch:
                data_batch = next_data_batch
                if monitor is not None:
                    monitor.tic()
                self.forward_backward(data_batch)
                self.update()
                if isinstance(data_batch, list):
                    self.update_metric(eval_metric, [b.label for b in data_batch],
                                       pre_sliced=True)
                else:
                    self.update_metric(eval_metric, data_batch.label)
                try:
                    next_data_batch = next(data_iter)
                    self.prepare(next_data_batch, sparse_row_id_fn=sparse_row_id_fn)
                except StopIteration:
                    end_of_batch = True
                if monitor is not None:
                    monitor.toc_print()
                if end_of_batch:
                    eval_name_vals = eval_metric.get_global_name_value()
                for callback in _as_list(batch_end_callback):
                    callback(BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                                           locals=locals()))
                nbatch += 1
            for name, val in eval_name_vals:
                self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, val)
            self.logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)
            arg_params_now, aux_params_now = self.get_params()
            self.set_params(arg_params_now, aux_params_now)
            for callback in _as_list(epoch_end_callback):
                callback(epoch, self.symbol, arg_params_now, aux_params_now)
            if eval_data is not None:
                res = self.score(eval_data, validation_metric,
                                 score_end_callback=eval_end_callback,
                                 batch_end_callback=eval_batch_end_callback, epoch=epoch)
                for name, val in res:
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, val)
            train_data.reset()

    # ------------------------------------------------------------ parameters on disk
    def save_params(self, fname):
        """Write the parameters to ``fname`` as ``arg:<name>``/``aux:<name>`` (MXNet's
        format)."""
        arg_params, aux_params = self.get_params()
        save = {"arg:%s" % k: v for k, v in arg_params.items()}
        save.update({"aux:%s" % k: v for k, v in aux_params.items()})
        nd.save(fname, save)

    def load_params(self, fname):
        """Read parameters written by :meth:`save_params` (or a checkpoint's ``.params``)."""
        arg_params, aux_params = _split_arg_aux(nd.load(fname), fname)
        self.set_params(arg_params, aux_params)

    # ------------------------------------------------------------ what a module defines
    @property
    def symbol(self):
        """The symbol the module runs."""
        return self._symbol

    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Prepare for ``data_batch`` (pulls sparse rows in MXNet; nothing to do here)."""
        if sparse_row_id_fn is not None:
            warnings.warn("prepare: sparse_row_id_fn is ignored (fastgrad has no sparse "
                          "parameters)", stacklevel=2)

    def install_monitor(self, mon):
        raise NotImplementedError()

    def forward(self, data_batch, is_train=None):
        raise NotImplementedError()

    def backward(self, out_grads=None):
        raise NotImplementedError()

    def update(self):
        raise NotImplementedError()

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        raise NotImplementedError()

    def get_outputs(self, merge_multi_context=True):
        raise NotImplementedError()

    def get_params(self):
        raise NotImplementedError()

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Assign parameter values: :meth:`init_params` without an initializer."""
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init,
                         allow_extra=allow_extra)

    def _set_params_settled_by_init_or_ignored(self, arg_params, aux_params, allow_missing,
                                               force_init, allow_extra):
        """The start of ``set_params`` in a module that assigns values itself: without
        ``allow_missing`` the call is :meth:`init_params` without an initializer, and on
        initialized parameters without ``force_init`` it is ignored with a warning (as MXNet).
        Whether either settled the call (else the caller assigns the values)."""
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=allow_missing, force_init=force_init,
                             allow_extra=allow_extra)
            return True
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "set_params call ignored.", stacklevel=3)
            return True
        return False

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        raise NotImplementedError()

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        raise NotImplementedError()

    def _skip_bind(self, force_rebind):
        """The start of ``bind`` in a module with ``_reset_bind``: ``force_rebind`` drops the
        current binding; whether to return at once, as the module is still bound (logged)."""
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning("Already bound, ignoring bind()")
            return True
        return False

    def _skip_init_optimizer(self, force_init):
        """The start of ``init_optimizer`` in a module of modules: the module must be bound
        with parameters; whether to return at once, as an optimizer is already initialized
        and not ``force_init`` (logged)."""
        self._require("init_optimizer")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring.")
            return True
        return False

    def init_optimizer(self, kvstore="local", optimizer="sgd",
                       optimizer_params=(("learning_rate", 0.01),), force_init=False):
        raise NotImplementedError()

    def get_input_grads(self, merge_multi_context=True):
        raise NotImplementedError()

    def get_states(self, merge_multi_context=True):
        """The states (none by default)."""
        self._require("get_states")
        return []

    def set_states(self, states=None, value=None):
        """Set the states (none by default)."""
        self._require("set_states")

    @property
    def data_names(self):
        raise NotImplementedError()

    @property
    def output_names(self):
        raise NotImplementedError()

    @property
    def data_shapes(self):
        raise NotImplementedError()

    @property
    def label_shapes(self):
        raise NotImplementedError()

    @property
    def output_shapes(self):
        raise NotImplementedError()
