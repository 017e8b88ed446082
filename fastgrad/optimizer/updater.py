"""``Updater``: an optimizer plus the state of every weight it updates, called as
``updater(index, grad, weight)`` (what a KVStore runs on a pushed gradient).

Note [MXNet states]
~~~~~~~~~~~~~~~~~~~
``get_states`` pickles ``states`` (index -> state arrays), with the optimizer when asked, as
MXNet does; ``Trainer.save_states`` and ``KVStore.save_optimizer_states`` write these bytes.
``set_states`` also reads the bytes MXNet 1.x writes: its pickles name MXNet's classes, which
are mapped to fastgrad's (an optimizer to the one registered under the same name, a schedule
to the ``lr_scheduler`` class of the same name), and an MXNet array pickles MXNet's binary
record of one array (what ``nd.save`` writes per array), which is decoded into an NDArray. The
optimizers keep MXNet's attribute names, so the learning rate, schedule, multipliers and
update counts carry over. A state MXNet kept in another dtype than the weight (1.x keeps some
in float32) is cast to the weight's dtype at its first use. MXNet cannot read fastgrad's
pickles (they name fastgrad's classes). As with any pickle, load only files you trust.
"""

import io
import pickle

from fastgrad._core._array import ndarray as _array_base, unwrap, _wrap
from fastgrad._api._params_format import _Reader, _read_array
from fastgrad.optimizer import lr_scheduler
from fastgrad.optimizer.optimizer import Optimizer

__all__ = ["Updater", "get_updater"]


class Updater:
    """Applies ``optimizer`` to weights by index, creating each weight's state on first use.

    ``get_states()`` pickles the states (and the optimizer with ``dump_optimizer=True``);
    ``set_states`` restores them, so training can be checkpointed and resumed.

    Examples
    --------
    >>> import fastgrad as mx
    >>> updater = mx.optimizer.get_updater(mx.optimizer.SGD(learning_rate=0.5, momentum=0.5))
    >>> w = mx.nd.array([1.0]); g = mx.nd.array([1.0])
    >>> updater(0, g, w); updater(0, g, w)
    >>> w
    <BLANKLINE>
    [-0.25]
    <NDArray 1 @cpu(0)>
    """

    def __init__(self, optimizer):
        if not isinstance(optimizer, Optimizer):
            raise TypeError("Updater: expected an Optimizer, got %s" % type(optimizer).__name__)
        self.optimizer = optimizer
        self.states = {}
        self.states_synced = {}

    def __call__(self, index, grad, weight):
        if isinstance(index, (list, tuple)):
            indices, grads, weights = list(index), list(grad), list(weight)
            if not len(indices) == len(grads) == len(weights):
                raise ValueError("Updater: %d indices, %d gradients and %d weights"
                                 % (len(indices), len(grads), len(weights)))
        else:
            indices, grads, weights = [index], [grad], [weight]
        for i, (idx, w) in enumerate(zip(indices, weights)):
            if isinstance(idx, bytes):
                indices[i] = idx = idx.decode()
            if idx not in self.states:
                self.states[idx] = self.optimizer.create_state_multi_precision(idx, w)
                self.states_synced[idx] = True
            elif not self.states_synced.get(idx, True):
                self.states[idx] = _sync_state(self.states[idx], w)
                self.states_synced[idx] = True
        for idx, w, g in zip(indices, weights, grads):
            self.optimizer.update_multi_precision(idx, w, g, self.states[idx])

    def set_states(self, states):
        """Restore states pickled by ``get_states`` (with the optimizer, if it was saved), by
        fastgrad or by MXNet 1.x (Note [MXNet states])."""
        states = _restore_mxnet_arrays(_StatesUnpickler(io.BytesIO(states)).load())
        if isinstance(states, tuple) and len(states) == 2 and isinstance(states[1], Optimizer):
            self.states, self.optimizer = states
        else:
            self.states = states
        self.states_synced = dict.fromkeys(self.states, False)

    def get_states(self, dump_optimizer=False):
        """The states pickled to bytes; with ``dump_optimizer`` also the optimizer (its learning
        rate, schedule and update counts)."""
        return pickle.dumps((self.states, self.optimizer) if dump_optimizer else self.states)


class _MXNetArray:
    """An MXNet array while its pickle is read: its state is MXNet's binary record of one array
    (Note [MXNet states])."""

    numpy_type = False

    def __init__(self, handle=None, *args, **kwargs):   # MXNet pickles NDArray(None)
        self.value = None

    def __setstate__(self, state):
        raw = state.get("handle") if isinstance(state, dict) else None
        if not isinstance(raw, (bytes, bytearray)):
            raise pickle.UnpicklingError("an MXNet array in the optimizer states has no "
                                         "'handle' bytes")
        self.value = _read_array(_Reader(raw, "an MXNet array in the optimizer states"), 0)


class _MXNetNumpyArray(_MXNetArray):
    numpy_type = True


class _StatesUnpickler(pickle.Unpickler):
    """Unpickles states written by fastgrad or by MXNet 1.x (Note [MXNet states])."""

    def find_class(self, module, name):
        if module.split(".")[0] != "mxnet":
            return super().find_class(module, name)
        if (module, name) == ("mxnet.ndarray.ndarray", "NDArray"):
            return _MXNetArray
        if (module, name) == ("mxnet.numpy.multiarray", "ndarray"):
            return _MXNetNumpyArray
        if module.startswith("mxnet.optimizer") and name.lower() in Optimizer.opt_registry:
            return Optimizer.opt_registry[name.lower()]
        if module == "mxnet.lr_scheduler" and hasattr(lr_scheduler, name):
            return getattr(lr_scheduler, name)
        raise pickle.UnpicklingError("the optimizer states name MXNet's %s.%s, which fastgrad "
                                     "has no counterpart of" % (module, name))


def _restore_mxnet_arrays(obj):
    """``obj`` with every MXNet array read from a pickle made a fastgrad array (in place for
    dicts and optimizers' attributes)."""
    if isinstance(obj, _MXNetArray):
        array = _wrap(obj.value).as_nd_ndarray()
        return array.as_np_ndarray() if obj.numpy_type else array
    if isinstance(obj, tuple):
        return tuple(_restore_mxnet_arrays(o) for o in obj)
    if isinstance(obj, list):
        return [_restore_mxnet_arrays(o) for o in obj]
    if isinstance(obj, dict):
        for key, value in obj.items():
            obj[key] = _restore_mxnet_arrays(value)
        return obj
    if isinstance(obj, Optimizer):
        _restore_mxnet_arrays(obj.__dict__)
    return obj


def _sync_state(state, weight):
    """``state`` with each array of another dtype than ``weight`` cast to the weight's
    (Note [MXNet states])."""
    if isinstance(state, (tuple, list)):
        return type(state)(_sync_state(s, weight) for s in state)
    if isinstance(state, _array_base) and state.dtype != weight.dtype:
        return _wrap(unwrap(state).astype(unwrap(weight).dtype), type(weight))
    return state


def get_updater(optimizer):
    """An :class:`Updater` for ``optimizer``."""
    return Updater(optimizer)
