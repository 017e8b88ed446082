"""``Updater``: an optimizer plus the state of every weight it updates, called as
``updater(index, grad, weight)`` (what a KVStore runs on a pushed gradient)."""

import pickle

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
        for idx, w, g in zip(indices, weights, grads):
            self.optimizer.update_multi_precision(idx, w, g, self.states[idx])

    def set_states(self, states):
        """Restore states pickled by ``get_states`` (with the optimizer, if it was saved)."""
        states = pickle.loads(states)
        if isinstance(states, tuple) and len(states) == 2 and isinstance(states[1], Optimizer):
            self.states, self.optimizer = states
        else:
            self.states = states
        self.states_synced = dict.fromkeys(self.states, False)

    def get_states(self, dump_optimizer=False):
        """The states pickled to bytes; with ``dump_optimizer`` also the optimizer (its learning
        rate, schedule and update counts)."""
        return pickle.dumps((self.states, self.optimizer) if dump_optimizer else self.states)


def get_updater(optimizer):
    """An :class:`Updater` for ``optimizer``."""
    return Updater(optimizer)
