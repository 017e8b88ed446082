"""MXNet's key-value store (``fastgrad.kvstore``, also ``mx.kv``): summing gradients across
devices and worker processes, and running the optimizer on the sums.

``'local'`` and ``'device'`` work in one process; ``'dist_sync'``, ``'dist_device_sync'`` and
``'horovod'`` run on MPI through mpi4py (``pip install "fastgrad[distributed]"``) with one
process per rank, started by ``python -m fastgrad.launch -n N COMMAND...``. See the
distributed training guide.

Examples
--------
>>> import fastgrad as mx
>>> kv = mx.kv.create("local")
>>> (kv.type, kv.rank, kv.num_workers)
('local', 0, 1)
"""

from fastgrad.kvstore.store import KVStore, LocalStore
from fastgrad.kvstore import mpi   # imports mpi4py only when a store is made (Note [MPI store])

__all__ = ["create", "KVStore", "KVStoreBase"]

KVStoreBase = KVStore

_LOCAL = ("local", "device", "local_update_cpu", "local_allreduce_cpu", "local_allreduce_device",
          "nccl")
_DIST = ("dist_sync", "dist_device_sync", "dist", "horovod")


def create(name="local", bucket_bytes=None):
    """A new KVStore of type ``name``.

    Parameters
    ----------
    name : str
        ``'local'`` or ``'device'`` (one process), ``'dist_sync'`` or ``'dist_device_sync'``
        (one process per MPI rank, synchronous), ``'horovod'`` (MXNet's Horovod store:
        ``pushpull`` and ``broadcast`` only). ``'dist_async'`` is not supported.
    bucket_bytes : int, optional
        For the distributed stores: keys smaller than this are fused into allreduce buffers of
        at most this many bytes (default 4 MiB).
    """
    if not isinstance(name, str):
        raise TypeError("kvstore.create: name must be a string, got %r" % (name,))
    kind = name.lower()
    if kind in _LOCAL:
        return LocalStore(kind)
    if kind in _DIST:
        cls = mpi.HorovodStore if kind == "horovod" else mpi.MPIStore
        return cls("dist_sync" if kind == "dist" else kind, bucket_bytes=bucket_bytes)
    if kind.startswith("dist_async") or kind == "dist_device_async":
        raise NotImplementedError(
            "kvstore.create(%r): asynchronous distributed training is not supported; fastgrad's "
            "distributed stores are synchronous allreduce on MPI: use 'dist_sync'" % name)
    raise ValueError("kvstore.create: unknown store type %r; known: %s, dist_sync, "
                     "dist_device_sync, horovod" % (name, ", ".join(_LOCAL)))
