"""``KVStore``: MXNet's key-value store semantics in one process (``'local'``, ``'device'``);
the distributed stores (``fastgrad/kvstore/mpi.py``) change only how values are summed across
workers.

Note [KVStore semantics]
~~~~~~~~~~~~~~~~~~~~~~~~
As MXNet's: ``init`` stores a copy of a value under a key (once per key). ``push`` sums the
values given for a key (one per device, and across workers in a distributed store); without an
optimizer the sum replaces the stored value, with one (``set_optimizer``) the updater runs
``updater(key, summed, stored)`` and changes the stored value in place. ``pull`` copies the
stored value into ``out``; ``pushpull`` is a push followed by a pull (into ``value`` when
``out`` is None); ``broadcast`` is an ``init`` followed by a ``pull``. Keys are ints or strings
(``3`` and ``'3'`` are different keys); every method takes one key or a list of keys. A key
that was never initialised, or a value whose shape or dtype differs from the stored one, is an
error naming the key. Values are summed in their own dtype.
"""

import numpy as _onp

from fastgrad._core._array import unwrap, _wrap
from fastgrad._core._state import set_recording
from fastgrad.optimizer import get_updater, Optimizer
from fastgrad.kvstore.keys import pairs, key_name, check_like

__all__ = ["KVStore", "LocalStore"]


class KVStore:
    """The key-value store interface (``mx.kv.KVStore``); see Note [KVStore semantics].

    Create stores with :func:`fastgrad.kvstore.create`.

    Examples
    --------
    >>> import fastgrad as mx
    >>> kv = mx.kv.create("local")
    >>> kv.init(3, mx.nd.ones((2, 2)))
    >>> kv.push(3, [mx.nd.ones((2, 2)), mx.nd.ones((2, 2)) * 2])   # two "devices"
    >>> out = mx.nd.zeros((2, 2))
    >>> kv.pull(3, out=out)
    >>> out
    <BLANKLINE>
    [[3. 3.]
     [3. 3.]]
    <NDArray 2x2 @cpu(0)>
    """

    OPTIMIZER = "optimizer"

    def __init__(self, name):
        self._type = name
        self._stored = {}          # key -> numpy array owned by the store
        self._updater = None
        self._merge = {}           # key -> numpy buffer the summed push lands in

    # ----------------------------------------------------------------- properties
    @property
    def type(self):
        """The store's type (``'local'``, ``'dist_sync'``, ...)."""
        return self._type

    @property
    def rank(self):
        """This worker's rank, in ``[0, num_workers)``."""
        return 0

    @property
    def num_workers(self):
        """The number of workers."""
        return 1

    def is_capable(self, capability):
        """Whether the store supports ``capability`` (``'optimizer'``: it can run one)."""
        if str(capability).lower() == KVStore.OPTIMIZER:
            return True
        raise ValueError("kvstore.is_capable: unknown capability %r" % (capability,))

    # ----------------------------------------------------------------- what subclasses change
    def _sum_across_workers(self, method, items):
        """Sum across workers: ``items`` is ``[(key, [numpy arrays], dest)]``; write each key's
        sum over its arrays (and, in a distributed store, over all workers) into ``dest``."""
        for _, arrays, dest in items:
            _local_sum(arrays, dest)

    def _from_rank0(self, method, items):
        """``items`` is ``[(key, numpy array)]``: give every worker rank 0's values in place."""

    # ----------------------------------------------------------------- the API
    def init(self, key, value):
        """Store a copy of ``value`` under ``key`` (in a distributed store, rank 0's value)."""
        items = []
        for k, arrays in pairs("init", key, value):
            if k in self._stored:
                raise ValueError("kvstore.init: key %s is already initialised" % key_name(k))
            items.append((k, _onp.array(unwrap(arrays[0]), copy=True, order="C")))
        self._from_rank0("init", items)
        for k, data in items:
            self._stored[k] = data

    def push(self, key, value, priority=0):
        """Sum ``value`` (over devices and workers) into the store under ``key``; see Note
        [KVStore semantics]."""
        self._push("push", pairs("push", key, value))

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Copy the value stored under ``key`` into ``out`` (an array or a list of them)."""
        if out is None:
            raise TypeError("kvstore.pull: out is required (the arrays to copy the values into)")
        self._pull("pull", pairs("pull", key, out))

    def pushpull(self, key, value, out=None, priority=0):
        """``push(key, value)`` then ``pull(key, out)``; without ``out`` the result goes into
        ``value``."""
        items = pairs("pushpull", key, value)
        outs = items if out is None else pairs("pushpull", key, out)
        if self._updater is not None:
            self._push("pushpull", items)
            self._pull("pushpull", outs)
            return
        # Without an optimizer the sum lands in the first out array directly and is copied
        # from there to the stored value (one copy, not two).
        work = []
        for (k, arrays), (_, targets) in zip(items, outs):
            stored = self._stored_of("pushpull", k)
            check_like("pushpull", k, stored, arrays, "value pushed")
            check_like("pushpull", k, stored, targets, "out array")
            dest = unwrap(targets[0])
            if not dest.flags.c_contiguous:
                dest = self._merge.setdefault(k, _onp.empty_like(stored))
            work.append((k, [unwrap(a) for a in arrays], dest))
        self._sum_across_workers("pushpull", work)
        prev = set_recording(False)
        try:
            for (k, _, dest), (_, targets) in zip(work, outs):
                _onp.copyto(self._stored[k], dest)
                for t in targets:
                    # for targets[0] a free self-copy that bumps its version
                    t[...] = dest
        finally:
            set_recording(prev)

    def broadcast(self, key, value, out, priority=0):
        """Initialise ``key`` with ``value`` (rank 0's) and pull it into ``out``."""
        self.init(key, value)
        self._pull("broadcast", pairs("broadcast", key, out))

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        raise NotImplementedError("kvstore.row_sparse_pull: fastgrad has no row_sparse arrays; "
                                  "use pull")

    def set_gradient_compression(self, compression_params):
        """Not supported: gradients are summed exactly (MXNet's 2-bit compression changes the
        result; see the distributed training guide)."""
        raise NotImplementedError(
            "kvstore.set_gradient_compression: gradient compression is not supported; fastgrad "
            "sums gradients exactly (got %r)" % (compression_params,))

    def set_optimizer(self, optimizer):
        """Run ``optimizer`` on every pushed (summed) gradient against the stored weight.

        In a distributed store every worker runs it on the same sum, so the stored weights
        stay identical on all workers.
        """
        if not isinstance(optimizer, Optimizer):
            raise TypeError("kvstore.set_optimizer: expected an Optimizer, got %s"
                            % type(optimizer).__name__)
        self._set_updater(get_updater(optimizer))

    def _set_updater(self, updater):
        """Run ``updater(key, summed, stored)`` on each push instead of storing the sum."""
        if updater is not None and not callable(updater):
            raise TypeError("kvstore._set_updater: the updater must be callable")
        self._updater = updater

    def barrier(self):
        """Wait until every worker reaches the barrier (nothing to wait for in one process)."""

    _barrier = barrier

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Write the optimizer's states (with the optimizer when ``dump_optimizer``) to
        ``fname``."""
        with open(fname, "wb") as f:
            f.write(self._optimizer_updater("save_optimizer_states").get_states(dump_optimizer))

    def load_optimizer_states(self, fname):
        """Read optimizer states written by ``save_optimizer_states``."""
        updater = self._optimizer_updater("load_optimizer_states")
        with open(fname, "rb") as f:
            updater.set_states(f.read())

    # ----------------------------------------------------------------- machinery
    def _optimizer_updater(self, method):
        if self._updater is None or not hasattr(self._updater, "get_states"):
            raise RuntimeError("kvstore.%s: the store has no optimizer; call set_optimizer "
                               "first" % method)
        return self._updater

    def _stored_of(self, method, key):
        try:
            return self._stored[key]
        except KeyError:
            raise KeyError("kvstore.%s: key %s was not initialised (call init first)"
                           % (method, key_name(key))) from None

    def _push(self, method, items):
        kinds = {k: type(arrays[0]) for k, arrays in items}
        work = []
        for k, arrays in items:
            stored = self._stored_of(method, k)
            check_like(method, k, stored, arrays, "value pushed")
            merge = self._merge.get(k)
            if merge is None:
                merge = self._merge[k] = _onp.empty_like(stored)
            work.append((k, [unwrap(a) for a in arrays], merge))
        self._sum_across_workers(method, work)
        prev = set_recording(False)
        try:
            for k, _, merge in work:
                stored = self._stored[k]
                if self._updater is not None:
                    self._updater(k, _wrap(merge, kinds[k]), _wrap(stored, kinds[k]))
                else:
                    _onp.copyto(stored, merge)
        finally:
            set_recording(prev)

    def _pull(self, method, items):
        prev = set_recording(False)
        try:
            for k, outs in items:
                stored = self._stored_of(method, k)
                check_like(method, k, stored, outs, "out array")
                for o in outs:
                    o[...] = stored
        finally:
            set_recording(prev)


def _local_sum(arrays, dest):
    """``dest = arrays[0] + arrays[1] + ...`` without temporaries."""
    if len(arrays) == 1:
        _onp.copyto(dest, arrays[0])
        return
    _onp.add(arrays[0], arrays[1], out=dest)
    for a in arrays[2:]:
        _onp.add(dest, a, out=dest)


class LocalStore(KVStore):
    """``'local'`` and ``'device'``: one process; values pushed for a key from several
    devices are summed in place."""
