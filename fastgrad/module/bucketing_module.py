"""``BucketingModule``: one :class:`Module` per bucket key (a sequence length, say), all
sharing the parameters and the optimizer of the default bucket's module (MXNet 1.x's
``mx.mod.BucketingModule``).

Note [Buckets share arrays]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
``sym_gen(bucket_key)`` returns ``(symbol, data_names, label_names)``. The module of the
default key is bound first; a batch with another ``bucket_key`` binds that key's module with
``shared_module=`` the default one, whose executor then holds the very parameter and
auxiliary arrays of the default executor (Note [Module on one executor]), so an update
through any bucket is seen by all, and the buckets borrow the default module's optimizer
and updater (one state per parameter). ``sym_gen`` runs inside a fresh
``mx.name.NameManager`` so that automatic names agree between buckets.
"""

import logging

import numpy as np

from fastgrad import ndarray as nd
from fastgrad import symbol as sym
from fastgrad.context import cpu
from fastgrad.initializer import Uniform
from fastgrad.model import load_params
from fastgrad.module.base_module import BaseModule
from fastgrad.module.module import Module, _checked_input_names
from fastgrad.symbol.name import NameManager

__all__ = ["BucketingModule"]


class BucketingModule(BaseModule):
    """Modules of several bucket keys over shared parameters (Note [Buckets share arrays]).

    Parameters
    ----------
    sym_gen : callable
        ``bucket_key -> (symbol, data_names, label_names)``.
    default_bucket_key : hashable
        The key of the largest bucket (bound first; its shapes come from ``bind``).
    context, fixed_param_names, state_names, ... : as :class:`Module`.

    Examples
    --------
    >>> import fastgrad as mx
    >>> def sym_gen(length):
    ...     data = mx.sym.var('data')
    ...     w = mx.sym.var('w', shape=(1,), init=mx.init.One())
    ...     out = mx.sym.sum(mx.sym.broadcast_mul(data, w), axis=1)
    ...     return mx.sym.make_loss(out), ('data',), None
    >>> mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=4)
    >>> mod.bind(data_shapes=[('data', (2, 4))])
    >>> mod.init_params()
    >>> batch = mx.io.DataBatch([mx.nd.ones((2, 3))], bucket_key=3,
    ...                         provide_data=[mx.io.DataDesc('data', (2, 3))])
    >>> mod.forward(batch)
    >>> mod.get_outputs()[0].asnumpy()
    array([3., 3.], dtype=float32)
    """

    def __init__(self, sym_gen, default_bucket_key=None, logger=logging, context=None,
                 work_load_list=None, fixed_param_names=None, state_names=None, group2ctxs=None,
                 compression_params=None):
        super().__init__(logger=logger)
        if default_bucket_key is None:
            raise ValueError("BucketingModule: default_bucket_key is required (the key of the "
                             "largest bucket)")
        self._default_bucket_key = default_bucket_key
        self._sym_gen = sym_gen
        symbol, data_names, label_names = self._call_sym_gen(default_bucket_key)
        data_names, label_names, state_names, fixed_param_names = _checked_input_names(
            symbol, data_names, label_names, state_names, fixed_param_names)
        self._compression_params = compression_params
        self._fixed_param_names = fixed_param_names
        self._state_names = state_names
        self._context = context if context is not None else cpu()
        self._work_load_list = work_load_list
        self._group2ctxs = group2ctxs
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None
        self._params_dirty = False
        self._monitor = None
        self._grad_req = None

    def _call_sym_gen(self, *args, **kwargs):
        with NameManager():
            out = self._sym_gen(*args, **kwargs)
        if not (isinstance(out, (list, tuple)) and len(out) == 3):
            raise TypeError("BucketingModule: sym_gen must return (symbol, data_names, "
                            "label_names), got %r" % (out,))
        return out

    def _new_module(self, symbol, data_names, label_names):
        return Module(symbol, data_names, label_names, logger=self.logger,
                      context=self._context, work_load_list=self._work_load_list,
                      fixed_param_names=self._fixed_param_names, state_names=self._state_names,
                      group2ctxs=self._group2ctxs, compression_params=self._compression_params)

    def _reset_bind(self):
        self.binded = False
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None

    # ------------------------------------------------------------ descriptions
    @property
    def data_names(self):
        if self.binded:
            return self._curr_module.data_names
        return self._call_sym_gen(self._default_bucket_key)[1]

    @property
    def output_names(self):
        if self.binded:
            return self._curr_module.output_names
        return self._call_sym_gen(self._default_bucket_key)[0].list_outputs()

    @property
    def data_shapes(self):
        self._require("data_shapes", params=False)
        return self._curr_module.data_shapes

    @property
    def label_shapes(self):
        self._require("label_shapes", params=False)
        return self._curr_module.label_shapes

    @property
    def output_shapes(self):
        self._require("output_shapes", params=False)
        return self._curr_module.output_shapes

    @property
    def symbol(self):
        self._require("symbol", params=False)
        return self._curr_module.symbol

    # ------------------------------------------------------------ parameters
    def get_params(self):
        self._require("get_params", bound=False)
        self._curr_module._params_dirty = self._params_dirty
        params = self._curr_module.get_params()
        self._params_dirty = False
        return params

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        if self._set_params_settled_by_init_or_ignored(arg_params, aux_params, allow_missing,
                                                       force_init, allow_extra):
            return
        self._curr_module.set_params(arg_params, aux_params, allow_missing=allow_missing,
                                     force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = True
        self.params_initialized = True

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        if self.params_initialized and not force_init:
            return
        self._require("init_params", params=False)
        self._curr_module.init_params(initializer=initializer, arg_params=arg_params,
                                      aux_params=aux_params, allow_missing=allow_missing,
                                      force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = False
        self.params_initialized = True

    def get_states(self, merge_multi_context=True):
        self._require("get_states")
        return self._curr_module.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states=None, value=None):
        self._require("set_states")
        self._curr_module.set_states(states, value)

    # ------------------------------------------------------------ binding and buckets
    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        """Bind the default bucket's module for ``data_shapes``/``label_shapes``."""
        if self.params_initialized:
            arg_params, aux_params = self.get_params()
        if self._skip_bind(force_rebind):
            return
        if shared_module is not None:
            raise ValueError("BucketingModule.bind: shared_module is not supported")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        module = self._buckets.get(self._default_bucket_key)
        if module is None:
            module = self._new_module(*self._call_sym_gen(self._default_bucket_key))
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                    force_rebind=False, shared_module=None, grad_req=grad_req)
        self.binded = True
        self._curr_module = module
        self._curr_bucket_key = self._default_bucket_key
        self._buckets[self._default_bucket_key] = module
        if self.params_initialized:
            self.set_params(arg_params, aux_params)

    def switch_bucket(self, bucket_key, data_shapes, label_shapes=None):
        """Make ``bucket_key``'s module current, binding it (sharing the default module's
        parameters) the first time."""
        self._require("switch_bucket", params=False)
        module = self._buckets.get(bucket_key)
        if module is None or not module.binded:
            if module is None:
                module = self._new_module(*self._call_sym_gen(bucket_key))
            if data_shapes is None:
                raise ValueError("BucketingModule.switch_bucket: bucket %r is new; give its "
                                 "data_shapes (the batch's provide_data)" % (bucket_key,))
            module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                        self._curr_module.inputs_need_grad, force_rebind=False,
                        shared_module=self._buckets[self._default_bucket_key],
                        grad_req=self._grad_req)
            if self._monitor is not None:
                module.install_monitor(self._monitor)
            self._buckets[bucket_key] = module
        self._curr_module = module
        self._curr_bucket_key = bucket_key

    def init_optimizer(self, kvstore="local", optimizer="sgd",
                       optimizer_params=(("learning_rate", 0.01),), force_init=False):
        if self._skip_init_optimizer(force_init):
            return
        self._curr_module.init_optimizer(kvstore, optimizer, optimizer_params,
                                         force_init=force_init)
        for module in self._buckets.values():
            if module is not self._curr_module:
                module.borrow_optimizer(self._curr_module)
        self.optimizer_initialized = True

    # ------------------------------------------------------------ running
    def prepare(self, data_batch, sparse_row_id_fn=None):
        self._require("prepare")
        original = self._curr_bucket_key
        self.switch_bucket(data_batch.bucket_key, data_batch.provide_data,
                           data_batch.provide_label)
        self._curr_module.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self.switch_bucket(original, None, None)

    def forward(self, data_batch, is_train=None):
        self._require("forward")
        key = getattr(data_batch, "bucket_key", None)
        if key is None:
            key = self._curr_bucket_key
        self.switch_bucket(key, getattr(data_batch, "provide_data", None),
                           getattr(data_batch, "provide_label", None))
        self._curr_module.forward(data_batch, is_train=is_train)

    def backward(self, out_grads=None):
        self._require("backward")
        self._curr_module.backward(out_grads=out_grads)

    def update(self):
        self._require("update", optimizer=True)
        self._params_dirty = True
        self._curr_module.update()

    def get_outputs(self, merge_multi_context=True):
        self._require("get_outputs")
        return self._curr_module.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        self._require("get_input_grads")
        return self._curr_module.get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        self._require("update_metric")
        self._curr_module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        self._require("install_monitor", params=False)
        self._monitor = mon
        for module in self._buckets.values():
            module.install_monitor(mon)

    # ------------------------------------------------------------ checkpoints
    def save_checkpoint(self, prefix, epoch, remove_amp_cast=False):
        """Write ``prefix-%04d.params``, each bucket's ``prefix-<key>-symbol.json`` and the
        keys in ``prefix.buckets``."""
        if not self._buckets:
            raise RuntimeError("BucketingModule.save_checkpoint: no bucket is bound")
        self.save_params("%s-%04d.params" % (prefix, epoch))
        for key in self._buckets:
            symbol = self._call_sym_gen(key)[0]
            symbol.save("%s-%s-symbol.json" % (prefix, key), remove_amp_cast=remove_amp_cast)
        nd.save("%s.buckets" % prefix, nd.array(list(self._buckets), dtype=np.int32))

    @staticmethod
    def load(prefix, epoch, sym_gen=None, default_bucket_key=None, **kwargs):
        """A BucketingModule of a checkpoint written by :meth:`save_checkpoint`."""
        if sym_gen is None or default_bucket_key is None:
            raise ValueError("BucketingModule.load: sym_gen and default_bucket_key are "
                             "required")
        keys = [int(k) for k in nd.load("%s.buckets" % prefix)[0].asnumpy().astype("int32")]
        out = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        for key in keys:
            _, data_names, label_names = sym_gen(key)
            symbol = sym.load("%s-%s-symbol.json" % (prefix, key))
            out._buckets[key] = Module(symbol, data_names, label_names, **kwargs)
            if key == default_bucket_key:
                out._curr_module = out._buckets[key]
        if out._curr_module is None:
            raise ValueError("BucketingModule.load: the checkpoint %r has no bucket %r "
                             "(buckets: %s)" % (prefix, default_bucket_key, keys))
        arg_params, aux_params = load_params(prefix, epoch)
        out._curr_module._arg_params = arg_params
        out._curr_module._aux_params = aux_params
        out._curr_module.params_initialized = True
        out.params_initialized = True
        return out

    @staticmethod
    def load_dict(sym_dict=None, sym_gen=None, default_bucket_key=None, arg_params=None,
                  aux_params=None, **kwargs):
        """A BucketingModule from ``{bucket key: symbol}`` and parameter dicts."""
        if sym_dict is None or arg_params is None or aux_params is None \
                or default_bucket_key is None:
            raise ValueError("BucketingModule.load_dict: sym_dict, arg_params, aux_params and "
                             "default_bucket_key are required")
        out = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        for key, symbol in sym_dict.items():
            _, data_names, label_names = sym_gen(default_bucket_key)
            out._buckets[key] = Module(symbol, data_names, label_names, **kwargs)
            if key == default_bucket_key:
                out._curr_module = out._buckets[key]
        out._curr_module._arg_params = arg_params
        out._curr_module._aux_params = aux_params
        out._curr_module.params_initialized = True
        out.params_initialized = True
        return out
