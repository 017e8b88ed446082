"""``SequentialModule``: modules chained so that each one's outputs are the next one's data
(MXNet 1.x's ``mx.mod.SequentialModule``).

Note [Sequential modules]
~~~~~~~~~~~~~~~~~~~~~~~~~
``add(module, take_labels=..., auto_wiring=...)`` appends a module. At ``bind`` every module
after the first is bound with ``inputs_need_grad`` (training) and with the previous one's
``output_shapes`` as its data (renamed to its own ``data_names`` with ``auto_wiring``); only
the modules added with ``take_labels=True`` get the labels and update the metric. The outputs
keep their dtype from one module to the next (MXNet binds the next module in float32).
``forward`` passes each module's outputs on; ``backward`` walks back, giving each module the
gradients of the next one's inputs. Parameters must have distinct names across the modules.
"""

import copy
import logging

import numpy as np

from fastgrad.initializer import Uniform
from fastgrad.io import DataDesc
from fastgrad.module.base_module import BaseModule

__all__ = ["SequentialModule"]


class SequentialModule(BaseModule):
    """A chain of modules trained as one (Note [Sequential modules]).

    Examples
    --------
    >>> import fastgrad as mx
    >>> first = mx.mod.Module(mx.sym.FullyConnected(mx.sym.var('data'), num_hidden=4,
    ...                                             name='fc1'), label_names=None)
    >>> head = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var('data'), num_hidden=2,
    ...                                                   name='fc2'), name='softmax')
    >>> seq = mx.mod.SequentialModule()
    >>> seq.add(first).add(mx.mod.Module(head), take_labels=True, auto_wiring=True)
    <fastgrad.module.sequential_module.SequentialModule object at ...>
    >>> seq.bind([('data', (3, 5))], [('softmax_label', (3,))])
    >>> seq.init_params()
    >>> seq.forward(mx.io.DataBatch([mx.nd.ones((3, 5))], [mx.nd.zeros(3)]))
    >>> seq.get_outputs()[0].shape
    (3, 2)
    """

    META_TAKE_LABELS = "take_labels"
    META_AUTO_WIRING = "auto_wiring"

    def __init__(self, logger=logging):
        super().__init__(logger=logger)
        self._modules = []
        self._metas = []
        self._label_shapes = None
        self._data_shapes = None
        self._meta_keys = {self.META_TAKE_LABELS, self.META_AUTO_WIRING}

    def add(self, module, **kwargs):
        """Append ``module`` (options ``take_labels``, ``auto_wiring``); returns ``self``."""
        unknown = sorted(set(kwargs) - self._meta_keys)
        if unknown:
            raise ValueError("SequentialModule.add: unknown options %s (options: %s)"
                             % (unknown, sorted(self._meta_keys)))
        if not isinstance(module, BaseModule):
            raise TypeError("SequentialModule.add: expected a module, got %s"
                            % type(module).__name__)
        self._modules.append(module)
        self._metas.append(kwargs)
        self.binded = False
        self.params_initialized = False
        self.optimizer_initialized = False
        return self

    @property
    def data_names(self):
        return self._modules[0].data_names if self._modules else []

    @property
    def output_names(self):
        return self._modules[-1].output_names if self._modules else []

    @property
    def data_shapes(self):
        self._require("data_shapes", params=False)
        return self._modules[0].data_shapes

    @property
    def label_shapes(self):
        self._require("label_shapes", params=False)
        return self._label_shapes

    @property
    def output_shapes(self):
        self._require("output_shapes", params=False)
        return self._modules[-1].output_shapes

    @property
    def symbol(self):
        """The last module's symbol (what ``epoch_end_callback`` receives)."""
        return self._modules[-1].symbol if self._modules else None

    def get_params(self):
        self._require("get_params")
        arg_params, aux_params = {}, {}
        for module in self._modules:
            arg, aux = module.get_params()
            arg_params.update(arg)
            aux_params.update(aux)
        return arg_params, aux_params

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        if self.params_initialized and not force_init:
            return
        self._require("init_params", params=False)
        for module in self._modules:
            module.init_params(initializer=initializer, arg_params=arg_params,
                               aux_params=aux_params, allow_missing=allow_missing,
                               force_init=force_init, allow_extra=allow_extra)
        for kind in (0, 1):
            owner = {}
            for i, module in enumerate(self._modules):
                for name in module.get_params()[kind]:
                    if name in owner:
                        raise ValueError("SequentialModule: the parameter %r of module %d is "
                                         "also a parameter of module %d; give them distinct "
                                         "names" % (name, i, owner[name]))
                    owner[name] = i
        self.params_initialized = True

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if inputs_need_grad and not for_training:
            raise ValueError("SequentialModule.bind: inputs_need_grad=True needs "
                             "for_training=True")
        if shared_module is not None:
            raise ValueError("SequentialModule.bind: shared_module is not supported")
        if not self._modules:
            raise ValueError("SequentialModule.bind: no module was added")
        self._label_shapes = label_shapes
        shapes = data_shapes
        needs_label = False
        for i, module in enumerate(self._modules):
            meta = self._metas[i]
            labels = None
            if meta.get(self.META_TAKE_LABELS, False):
                labels = label_shapes
                needs_label = True
            if meta.get(self.META_AUTO_WIRING, False):
                names = module.data_names
                if len(names) != len(shapes):
                    raise ValueError("SequentialModule.bind: module %d has data_names %s but "
                                     "receives %d inputs" % (i, names, len(shapes)))
                shapes = [DataDesc(name, tuple(s[1]), getattr(s, "dtype", np.float32))
                          for name, s in zip(names, shapes)]
            module.bind(data_shapes=shapes, label_shapes=labels, for_training=for_training,
                        inputs_need_grad=bool(inputs_need_grad or (for_training and i > 0)),
                        force_rebind=force_rebind, shared_module=None, grad_req=grad_req)
            shapes = module.output_shapes
        if not needs_label:
            self._label_shapes = None
        self.binded = True
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad

    def init_optimizer(self, kvstore="local", optimizer="sgd",
                       optimizer_params=(("learning_rate", 0.01),), force_init=False):
        if self._skip_init_optimizer(force_init):
            return
        for module in self._modules:
            module.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                                  optimizer_params=optimizer_params, force_init=force_init)
        self.optimizer_initialized = True

    def forward(self, data_batch, is_train=None):
        self._require("forward")
        data_batch = copy.copy(data_batch)
        for i, module in enumerate(self._modules):
            module.forward(data_batch, is_train=is_train)
            if i + 1 == len(self._modules):
                break
            data_batch.data = module.get_outputs()
            if getattr(data_batch, "provide_data", None):
                names = [x[0] for x in module.output_shapes]
                data_batch.provide_data = [(n, x.shape) for n, x in zip(names, data_batch.data)]

    def backward(self, out_grads=None):
        self._require("backward")
        for i in reversed(range(len(self._modules))):
            module = self._modules[i]
            module.backward(out_grads=out_grads)
            if i == 0:
                break
            out_grads = module.get_input_grads()

    def update(self):
        self._require("update", optimizer=True)
        for module in self._modules:
            module.update()

    def get_outputs(self, merge_multi_context=True):
        self._require("get_outputs")
        return self._modules[-1].get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        self._require("get_input_grads")
        return self._modules[0].get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        self._require("update_metric")
        for meta, module in zip(self._metas, self._modules):
            if meta.get(self.META_TAKE_LABELS, False):
                module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        self._require("install_monitor", params=False)
        for module in self._modules:
            module.install_monitor(mon)
