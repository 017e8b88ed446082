"""The distributed stores (``'dist_sync'``, ``'dist_device_sync'``, ``'horovod'``) on MPI
through mpi4py.

Note [MPI store]
~~~~~~~~~~~~~~~~
Every worker is an MPI rank running the same program. ``push`` sums each key's values over
the devices of a worker, then over the workers with ``MPI_Allreduce``, and every worker applies
the result (or the optimizer, identically) to its own copy of the stored value, so the copies
never drift; there are no servers. ``init`` and ``broadcast`` take rank 0's value
(``MPI_Bcast``).

Allreduce runs on the arrays' own buffers: a single pushed array is the send buffer and the
store's merge buffer the receive buffer, nothing is copied. Keys smaller than ``bucket_bytes``
are packed, in the order pushed and per dtype, into a fusion buffer of at most ``bucket_bytes``
that is reduced with one call (Horovod's tensor fusion): a step with a hundred small gradients
makes a few allreduces, not a hundred. The default, 4 MiB, is set per store
(``kv.bucket_bytes``) or by ``FASTGRAD_KV_BUCKET_BYTES``.

Every collective first compares a 64-bit signature of what each rank is about to reduce (the
method, keys, shapes and dtypes) with one 2-element allreduce; if ranks disagree, all of them
exchange their lists and raise an error naming the keys that differ, instead of reducing
mismatched buffers or hanging. That costs one small collective per call (a few microseconds on
an idle machine, more when ranks share cores); ``kv.verify = False`` (or
``FASTGRAD_KV_VERIFY=0``) skips it for a program known to be consistent, and a mismatch is
then MPI's undefined behaviour.

Failure: creating a distributed store installs an exception hook that prints the uncaught
exception's traceback with the rank and calls ``MPI_Abort``, which ends every rank of the job
with a non-zero exit status (a rank that raised must not leave the others waiting forever in a
collective).

mpi4py is imported when a distributed store is created, never by ``import fastgrad``: it is an
optional dependency (``pip install "fastgrad[distributed]"``).
"""

import os
import sys
import time
import traceback
import zlib

import numpy as _onp

from fastgrad._core._array import unwrap
from fastgrad.kvstore.store import KVStore, _local_sum
from fastgrad.kvstore.keys import pairs, check_like

__all__ = ["MPIStore", "load_mpi", "INSTALL_HINT"]

INSTALL_HINT = (
    "distributed KVStores run on MPI through mpi4py, which is not installed. Install both "
    "from PyPI with\n    pip install \"fastgrad[distributed]\"\n(mpi4py and the mpich wheel; "
    "mpiexec lands in the environment's bin/), or on a cluster build mpi4py against the "
    "cluster's MPI:\n    env MPICC=/path/to/mpicc pip install --no-binary=mpi4py mpi4py")

DEFAULT_BUCKET_BYTES = 4 << 20


def load_mpi(what):
    """mpi4py's ``MPI`` module, or an ImportError saying what to install."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError("%s: %s\n(the import failed with: %s)" % (what, INSTALL_HINT, e)) \
            from None
    return MPI


_hook_installed = False


def _install_abort_hook(comm):
    """An uncaught exception on any rank aborts the whole job (Note [MPI store])."""
    global _hook_installed
    if _hook_installed:
        return
    _hook_installed = True
    previous = sys.excepthook
    rank = comm.Get_rank()

    def abort_job(exc_type, exc, tb):
        try:
            text = "".join(traceback.format_exception(exc_type, exc, tb))
            sys.stderr.write("fastgrad: rank %d raised an exception; aborting the job\n%s"
                             % (rank, text))
            sys.stderr.flush()
            sys.stdout.flush()
            # MPI_Abort makes the launcher kill every rank, and output still on its way
            # through the launcher's forwarding can be lost with them: give it a moment
            # (this path runs once, when the job is ending anyway).
            time.sleep(0.25)
        finally:
            if exc_type is KeyboardInterrupt:
                previous(exc_type, exc, tb)
            comm.Abort(1)

    sys.excepthook = abort_job


class MPIStore(KVStore):
    """A distributed store over ``MPI.COMM_WORLD``; see Note [MPI store].

    Parameters
    ----------
    name : str
        ``'dist_sync'``, ``'dist_device_sync'`` or ``'horovod'``.
    bucket_bytes : int, optional
        The size limit of the fusion buffers (default 4 MiB or ``FASTGRAD_KV_BUCKET_BYTES``).
    """

    def __init__(self, name, bucket_bytes=None):
        super().__init__(name)
        self._MPI = MPI = load_mpi("kvstore.create(%r)" % name)
        self._comm = MPI.COMM_WORLD
        if bucket_bytes is None:
            bucket_bytes = int(os.environ.get("FASTGRAD_KV_BUCKET_BYTES", DEFAULT_BUCKET_BYTES))
        self.bucket_bytes = bucket_bytes
        self._buckets = {}            # dtype -> fusion buffer
        self._signatures = {}         # description -> [crc32, -crc32] (int64)
        self.verify = os.environ.get("FASTGRAD_KV_VERIFY", "1") != "0"
        self._check_out = _onp.zeros(2, _onp.int64)
        _install_abort_hook(self._comm)

    @property
    def rank(self):
        return self._comm.Get_rank()

    @property
    def num_workers(self):
        return self._comm.Get_size()

    @property
    def bucket_bytes(self):
        """Keys smaller than this are fused into buffers of at most this many bytes."""
        return self._bucket_bytes

    @bucket_bytes.setter
    def bucket_bytes(self, value):
        value = int(value)
        if value < 0:
            raise ValueError("kvstore.bucket_bytes must be >= 0 (0: no fusion), got %d" % value)
        self._bucket_bytes = value

    def barrier(self):
        """Wait until every worker reaches the barrier."""
        self._comm.Barrier()

    _barrier = barrier

    # ----------------------------------------------------------------- consistency
    def _agree(self, method, description):
        """All ranks are about to run the same collective on the same keys, shapes and dtypes,
        or every rank raises an error naming what differs (Note [MPI store])."""
        if not self.verify:
            return
        check = self._signatures.get(description)
        if check is None:
            text = repr([(k, s, d.str) for k, s, d in description[1:]])
            crc = zlib.crc32((description[0] + text).encode())
            check = self._signatures[description] = _onp.array([crc, -crc], _onp.int64)
        self._comm.Allreduce(check, self._check_out, op=self._MPI.MIN)
        if self._check_out[0] == check[0] and self._check_out[1] == check[1]:
            return
        description = (description[0],) + tuple((k, s, d.str) for k, s, d in description[1:])
        everyone = self._comm.allgather(description)
        mine = everyone[self.rank]
        lines = []
        for r, theirs in enumerate(everyone):
            if theirs != mine:
                lines.append("rank %d: %s" % (r, _describe(theirs)))
        raise ValueError("kvstore.%s: the workers disagree on the keys, shapes or dtypes of "
                         "this call: rank %d has %s, but %s" % (method, self.rank,
                                                                _describe(mine),
                                                                "; ".join(lines)))

    # ----------------------------------------------------------------- collectives
    def _from_rank0(self, method, items):
        self._agree(method, (method,) + tuple([(k, d.shape, d.dtype) for k, d in items]))
        for _, data in items:
            self._comm.Bcast(data, root=0)

    def _sum_across_workers(self, method, items):
        self._agree(method, (method,) + tuple([(k, d.shape, d.dtype) for k, _, d in items]))
        if len(items) == 1:
            self._allreduce_one(items[0][1], items[0][2])
            return
        pending = {}                       # dtype -> [(key, arrays, dest)] waiting for a bucket
        pending_bytes = {}
        for item in items:
            _, arrays, dest = item
            if dest.nbytes >= self._bucket_bytes or dest.size == 0:
                self._allreduce_one(arrays, dest)
                continue
            dt = dest.dtype
            if pending_bytes.get(dt, 0) + dest.nbytes > self._bucket_bytes:
                self._allreduce_bucket(pending.pop(dt))
                pending_bytes[dt] = 0
            pending.setdefault(dt, []).append(item)
            pending_bytes[dt] = pending_bytes.get(dt, 0) + dest.nbytes
        for group in pending.values():
            self._allreduce_bucket(group)

    def _allreduce_one(self, arrays, dest):
        """``dest`` = the sum of ``arrays`` over devices and workers, on the buffers."""
        MPI = self._MPI
        if dest.size == 0:
            return
        if len(arrays) == 1 and arrays[0] is dest:
            self._comm.Allreduce(MPI.IN_PLACE, dest, op=MPI.SUM)
        elif len(arrays) == 1 and arrays[0].flags.c_contiguous \
                and not _onp.shares_memory(arrays[0], dest):
            self._comm.Allreduce(arrays[0], dest, op=MPI.SUM)
        else:
            _local_sum(arrays, dest)
            self._comm.Allreduce(MPI.IN_PLACE, dest, op=MPI.SUM)

    def _allreduce_bucket(self, group):
        """Pack the small keys of ``group`` into one fusion buffer, reduce it, unpack."""
        if len(group) == 1:
            self._allreduce_one(group[0][1], group[0][2])
            return
        total = sum(dest.size for _, _, dest in group)
        dt = group[0][2].dtype
        buf = self._buckets.get(dt)
        if buf is None or buf.size < total:
            buf = self._buckets[dt] = _onp.empty(total, dt)
        flat = buf[:total]
        offset = 0
        for _, arrays, dest in group:
            part = flat[offset:offset + dest.size].reshape(dest.shape)
            _local_sum(arrays, part)
            offset += dest.size
        self._comm.Allreduce(self._MPI.IN_PLACE, flat, op=self._MPI.SUM)
        offset = 0
        for _, _, dest in group:
            _onp.copyto(dest, flat[offset:offset + dest.size].reshape(dest.shape))
            offset += dest.size


class HorovodStore(MPIStore):
    """``'horovod'``: MXNet's Horovod store, an allreduce without stored values.

    ``pushpull`` sums ``value`` over workers straight into ``out`` (into ``value`` when ``out``
    is None) and ``broadcast`` copies rank 0's value into ``out``; keys need no ``init``. Like
    MXNet's Horovod store it keeps nothing, so ``init``/``push``/``pull`` and ``set_optimizer``
    are errors: use ``'dist_sync'`` for those.
    """

    def is_capable(self, capability):
        if str(capability).lower() == KVStore.OPTIMIZER:
            return False
        return super().is_capable(capability)

    def _stateless(self, method):
        raise NotImplementedError(
            "kvstore.%s: the 'horovod' store keeps no values (as MXNet's); use pushpull and "
            "broadcast, or kvstore.create('dist_sync') for init/push/pull and set_optimizer"
            % method)

    def init(self, key, value):
        self._stateless("init")

    def push(self, key, value, priority=0):
        self._stateless("push")

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        self._stateless("pull")

    def set_optimizer(self, optimizer):
        self._stateless("set_optimizer")

    def pushpull(self, key, value, out=None, priority=0):
        items = pairs("pushpull", key, value)
        outs = items if out is None else pairs("pushpull", key, out)
        work = []
        for (k, arrays), (_, targets) in zip(items, outs):
            first = unwrap(arrays[0])
            check_like("pushpull", k, first, arrays + targets, "array")
            work.append((k, [unwrap(a) for a in arrays], unwrap(targets[0])))
        self._sum_across_workers("pushpull", work)
        for (_, _, dest), (_, targets) in zip(work, outs):
            for t in targets[1:]:
                t[...] = dest
            targets[0][...] = dest          # marks the first target written (a free copy)

    def broadcast(self, key, value, out, priority=0):
        items = pairs("broadcast", key, value)
        outs = pairs("broadcast", key, out)
        work = []
        for (k, arrays), (_, targets) in zip(items, outs):
            check_like("broadcast", k, unwrap(arrays[0]), targets, "out array")
            data = unwrap(targets[0])
            _onp.copyto(data, unwrap(arrays[0]))
            work.append((k, data))
        self._from_rank0("broadcast", work)
        for (_, data), (_, targets) in zip(work, outs):
            for t in targets:
                t[...] = data


def _describe(description):
    method, entries = description[0], description[1:]
    if not entries:
        return "%s of no keys" % method
    return "%s of %s" % (method, ", ".join("key %r shape %s dtype %s" % (k, s, _onp.dtype(d))
                                            for k, s, d in entries))
