"""MXNet 1.x's ``mx.model``: checkpoints (``save_checkpoint``/``load_checkpoint``/
``load_params``), ``BatchEndParam`` (what batch-end callbacks receive) and the KVStore helpers
the Module uses to update its parameters.

Note [Checkpoint files]
~~~~~~~~~~~~~~~~~~~~~~~
A checkpoint is the two files MXNet 1.9.1 writes: ``<prefix>-symbol.json`` (the symbol in
MXNet's JSON) and ``<prefix>-<epoch %04d>.params`` (``nd.save`` of a dict whose keys are
``arg:<name>`` for parameters and ``aux:<name>`` for auxiliary states). MXNet reads
fastgrad's files and the other way round. A key without one of these prefixes is refused
(MXNet skips it silently): it is a file of something else, e.g. a Gluon ``save_parameters``.

Note [Module updates]
~~~~~~~~~~~~~~~~~~~~~
``_create_kvstore`` and the two update functions follow MXNet 1.9.1's rules: a ``'local'``
or ``'device'`` store on one device is not created (the Module updates with the
optimizer's updater), a ``'dist_*'`` store always is; the optimizer runs on the store
(``update_on_kvstore``) when the store can (``MXNET_UPDATE_ON_KVSTORE``, default 1), and a
``'local'`` store with a parameter of more than 16M elements updates on the workers.
Parameters are visited in the Module's order with index ``i`` (priority ``-i``), those
without a gradient (fixed) skipped; the updater is called once with every
``(index, gradient, weight)`` of the step.
"""

import logging
import os
from collections import namedtuple

import numpy as np

from fastgrad import ndarray as nd
from fastgrad import kvstore as kvs
from fastgrad import symbol as sym

__all__ = ["BatchEndParam", "save_checkpoint", "load_checkpoint", "load_params", "FeedForward"]

BatchEndParam = namedtuple("BatchEndParams", ["epoch", "nbatch", "eval_metric", "locals"])


def _checkpoint_dict(arg_params, aux_params):
    out = {"arg:%s" % k: v for k, v in dict(arg_params or {}).items()}
    out.update({"aux:%s" % k: v for k, v in dict(aux_params or {}).items()})
    return out


def save_checkpoint(prefix, epoch, symbol, arg_params, aux_params, remove_amp_cast=True):
    """Write ``prefix-symbol.json`` (when ``symbol`` is not None) and ``prefix-%04d.params``
    (Note [Checkpoint files]).

    Examples
    --------
    >>> import fastgrad as mx, os, tempfile
    >>> prefix = os.path.join(tempfile.mkdtemp(), 'net')
    >>> net = mx.sym.FullyConnected(mx.sym.var('data'), num_hidden=2, name='fc')
    >>> mx.model.save_checkpoint(prefix, 3, net, {'fc_weight': mx.nd.ones((2, 4)),
    ...                                           'fc_bias': mx.nd.zeros(2)}, {})
    >>> sorted(os.listdir(os.path.dirname(prefix)))
    ['net-0003.params', 'net-symbol.json']
    >>> sorted(mx.model.load_checkpoint(prefix, 3)[1])
    ['fc_bias', 'fc_weight']
    """
    if symbol is not None:
        symbol.save("%s-symbol.json" % prefix, remove_amp_cast=remove_amp_cast)
    param_name = "%s-%04d.params" % (prefix, epoch)
    nd.save(param_name, _checkpoint_dict(arg_params, aux_params))
    logging.info('Saved checkpoint to "%s"', param_name)


def load_params(prefix, epoch):
    """``(arg_params, aux_params)`` read from ``prefix-%04d.params``."""
    fname = "%s-%04d.params" % (prefix, epoch)
    if not os.path.isfile(fname):
        raise FileNotFoundError("load_params: no parameter file %r (prefix %r, epoch %d)"
                                % (fname, prefix, epoch))
    saved = nd.load(fname)
    if not saved:
        logging.warning("Params file '%s' is empty", fname)
        return {}, {}
    return _split_arg_aux(saved, fname)


def _split_arg_aux(saved, fname):
    """``(arg_params, aux_params)`` from what ``nd.load`` read from the parameter file
    ``fname``: a dict keyed ``'arg:<name>'`` and ``'aux:<name>'``; anything else raises."""
    if not isinstance(saved, dict):
        raise ValueError("load_params: %r holds %d unnamed arrays, not a checkpoint's "
                         "'arg:<name>'/'aux:<name>' dict" % (fname, len(saved)))
    arg_params, aux_params = {}, {}
    for key, value in saved.items():
        kind, _, name = key.partition(":")
        if kind == "arg" and name:
            arg_params[name] = value
        elif kind == "aux" and name:
            aux_params[name] = value
        else:
            raise ValueError("load_params: %r is not a checkpoint's parameter file: the key %r "
                             "does not start with 'arg:' or 'aux:' (a Gluon save_parameters "
                             "file loads with Block.load_parameters)" % (fname, key))
    return arg_params, aux_params


def load_checkpoint(prefix, epoch):
    """``(symbol, arg_params, aux_params)`` read from ``prefix-symbol.json`` and
    ``prefix-%04d.params`` (Note [Checkpoint files])."""
    fname = "%s-symbol.json" % prefix
    if not os.path.isfile(fname):
        raise FileNotFoundError("load_checkpoint: no symbol file %r (prefix %r)"
                                % (fname, prefix))
    symbol = sym.load(fname)
    arg_params, aux_params = load_params(prefix, epoch)
    return symbol, arg_params, aux_params


class FeedForward:
    """MXNet's pre-Module model class; it was removed from MXNet's supported API and fastgrad
    does not have it: constructing one raises ``NotImplementedError`` pointing to
    :class:`fastgrad.module.Module`."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "mx.model.FeedForward is not available in fastgrad; use "
            "mx.mod.Module(symbol, data_names=..., label_names=...).fit(train_iter, ...), "
            "and mx.mod.Module.load(prefix, epoch) for its checkpoints")

    @staticmethod
    def load(*args, **kwargs):
        """Raises ``NotImplementedError``: use :meth:`fastgrad.module.Module.load`."""
        FeedForward()

    @staticmethod
    def create(*args, **kwargs):
        """Raises ``NotImplementedError``: use :meth:`fastgrad.module.Module.fit`."""
        FeedForward()


# ------------------------------------------ the Module's updates (Note [Module updates])
def _create_kvstore(kvstore, num_device, arg_params):
    """``(store or None, update_on_kvstore)`` for the Module's ``kvstore`` argument."""
    update_on_kvstore = bool(int(os.getenv("MXNET_UPDATE_ON_KVSTORE", "1")))
    if kvstore is None:
        store = None
    elif isinstance(kvstore, kvs.KVStore):
        store = kvstore
    elif isinstance(kvstore, str):
        if num_device == 1 and "dist" not in kvstore:
            store = None
        else:
            store = kvs.create(kvstore)
            if kvstore == "local" and arg_params:
                if max(int(np.prod(p.shape)) for p in arg_params.values()) > 1024 * 1024 * 16:
                    update_on_kvstore = False
    else:
        raise TypeError("kvstore must be a KVStore, a str or None, not %s"
                        % type(kvstore).__name__)
    if store is None:
        update_on_kvstore = False
    else:
        update_on_kvstore = update_on_kvstore and store.is_capable("optimizer")
    return store, update_on_kvstore


def _initialize_kvstore(kvstore, param_arrays, arg_params, param_names, update_on_kvstore):
    for index, on_devices in enumerate(param_arrays):
        name = param_names[index]
        if not update_on_kvstore:
            kvstore.init(name, arg_params[name])
        else:
            kvstore.broadcast(name, arg_params[name], out=on_devices)


def _update_params_on_kvstore(param_arrays, grad_arrays, kvstore, param_names):
    for index, (arg_list, grad_list) in enumerate(zip(param_arrays, grad_arrays)):
        if grad_list[0] is None:
            continue
        kvstore.pushpull(param_names[index], grad_list, out=arg_list, priority=-index)


def _update_params(param_arrays, grad_arrays, updater, num_device, kvstore=None,
                   param_names=None):
    updates = [[] for _ in range(num_device)]
    for index, (arg_list, grad_list) in enumerate(zip(param_arrays, grad_arrays)):
        if grad_list[0] is None:
            continue
        if kvstore:
            kvstore.pushpull(param_names[index], grad_list, priority=-index)
        for k, (weight, grad) in enumerate(zip(arg_list, grad_list)):
            updates[k].append((index * num_device + k, grad, weight))
    for device_updates in updates:
        if device_updates:
            indices, grads, weights = zip(*device_updates)
            updater(indices, grads, weights)
