"""DataLoader: mini-batches from a dataset, in this process or in worker processes or
threads (MXNet 1.9.1's ``gluon.data.DataLoader``).

>>> import numpy as np
>>> from fastgrad import gluon
>>> ds = gluon.data.ArrayDataset(np.arange(10.0).reshape(5, 2), np.arange(5))
>>> [(x.shape, y.shape) for x, y in gluon.data.DataLoader(ds, batch_size=2)]
[((2, 2), (2,)), ((2, 2), (2,)), ((1, 2), (1,))]

Note [DataLoader workers]
~~~~~~~~~~~~~~~~~~~~~~~~~
With ``num_workers > 0`` the batches are made by ``num_workers`` worker processes
(``concurrent.futures.ProcessPoolExecutor`` over the ``fork`` start method, as MXNet forks
its ``multiprocessing.Pool``). The dataset and ``batchify_fn`` reach the workers by the fork,
not by pickling, so lambdas and local functions work. A worker returns its batch with every
fastgrad array replaced by a :class:`_ShippedArray` (the NumPy data and the array type), and
the main process wraps them again, so batches come back as ``mx.nd.NDArray`` (or ``mx.np``
arrays under ``npx.set_np()``), never as raw NumPy arrays.

Errors: an exception raised in a worker (in the dataset, a transform or ``batchify_fn``) is
raised again in the main process, of the same type, chained to a ``_RemoteTraceback`` that
carries the worker's traceback text. A worker that dies (killed, ``os._exit``, a crash)
breaks the pool: the iterator raises ``RuntimeError`` at once instead of waiting, and the
next iteration starts a new pool. A batch that takes longer than ``timeout`` seconds raises
``TimeoutError``. A worker checks twice a second that its main process is alive and exits
when it is not, so no worker outlives a killed main process; ``DataLoader.__del__`` (or
leaving the interpreter) terminates the workers. An exception that cannot be pickled
reaches the main process as a ``RuntimeError`` carrying its type, message and traceback.

MXNet sends batches through shared memory; fastgrad pickles the NumPy arrays through a pipe,
which costs one copy per batch.
"""

import concurrent.futures as _futures
from concurrent.futures.process import BrokenProcessPool
import multiprocessing as _mp
import os
import pickle
import signal
import threading
import time
import traceback
import weakref

import numpy as _onp

from fastgrad import numpy_extension as _npx
from fastgrad._core._array import ndarray as _array_type, _wrap, unwrap
from fastgrad.ndarray import NDArray
from fastgrad.gluon.data import sampler as _sampler

__all__ = ["DataLoader"]


def _np_arrays_requested():
    """Whether Gluon should make ``mx.np`` arrays (``npx.set_np()`` is in effect) rather than
    MXNet 1.x's ``mx.nd.NDArray``."""
    return _npx.is_np_array_requested()


def _batch_array_type():
    return _array_type if _np_arrays_requested() else NDArray


def default_batchify_fn(data):
    """Stack a list of samples into a batch (MXNet's ``default_batchify_fn``).

    Arrays (fastgrad or NumPy) and numbers are stacked along a new first axis into one
    ``mx.nd.NDArray`` (an ``mx.np`` array under ``npx.set_np()``), keeping their dtype;
    tuples of them are batched field by field into a list.
    """
    if not len(data):
        raise ValueError("default_batchify_fn: cannot batch an empty list of samples")
    first = data[0]
    if isinstance(first, tuple):
        widths = {len(sample) if isinstance(sample, tuple) else None for sample in data}
        if len(widths) != 1:
            raise ValueError("default_batchify_fn: the samples are tuples of different "
                             "lengths (%s); pass a batchify_fn to batch them" %
                             ", ".join(sorted(str(w) for w in widths)))
        return [default_batchify_fn(list(field)) for field in zip(*data)]
    if isinstance(first, _array_type):
        raw = [unwrap(sample) for sample in data]
    else:
        raw = data
    shapes = {_onp.shape(sample) for sample in raw}
    if len(shapes) > 1:
        raise ValueError("default_batchify_fn: cannot stack samples of different shapes "
                         "(%s); pad them to one shape or pass a batchify_fn"
                         % ", ".join(sorted(str(s) for s in shapes)))
    stacked = _onp.stack([_onp.asarray(sample) for sample in raw])
    if stacked.dtype == object or stacked.dtype.kind in "USV":
        raise TypeError("default_batchify_fn: cannot batch samples of type %s (they make a "
                        "NumPy array of dtype %s); pass a batchify_fn"
                        % (type(first).__name__, stacked.dtype))
    return _wrap(_onp.ascontiguousarray(stacked), _batch_array_type())


# MXNet stacks into shared memory in its workers; fastgrad's workers send NumPy data back
# (Note [DataLoader workers]), so the same function serves both.
default_mp_batchify_fn = default_batchify_fn


class _ShippedArray:
    """A fastgrad array on its way from a worker to the main process: its NumPy data and
    its array type."""

    __slots__ = ("data", "array_type")

    def __init__(self, data, array_type):
        self.data = data
        self.array_type = array_type

    def __reduce__(self):
        return (_ShippedArray, (self.data, self.array_type))


def _ship(batch):
    """``batch`` with every fastgrad array replaced by a :class:`_ShippedArray`."""
    if isinstance(batch, _array_type):
        return _ShippedArray(_onp.asarray(unwrap(batch)), type(batch))
    if isinstance(batch, (list, tuple)):
        shipped = [_ship(item) for item in batch]
        if type(batch) in (list, tuple):
            return type(batch)(shipped)
        if hasattr(batch, "_fields"):                   # a namedtuple
            return type(batch)(*shipped)
        return type(batch)(shipped)
    if isinstance(batch, dict):
        return type(batch)((key, _ship(value)) for key, value in batch.items())
    return batch


def _unship(batch):
    """The inverse of :func:`_ship`, in the main process."""
    if isinstance(batch, _ShippedArray):
        return _wrap(batch.data, batch.array_type)
    if isinstance(batch, (list, tuple)):
        restored = [_unship(item) for item in batch]
        if type(batch) in (list, tuple):
            return type(batch)(restored)
        if hasattr(batch, "_fields"):
            return type(batch)(*restored)
        return type(batch)(restored)
    if isinstance(batch, dict):
        return type(batch)((key, _unship(value)) for key, value in batch.items())
    return batch


# The dataset and batchify_fn of the DataLoader that owns this worker process, set by the
# pool's initializer in each worker (inherited through the fork, Note [DataLoader workers]).
_worker_state = {}


def _exit_when_orphaned(parent_pid, period=0.5):
    """Run in a worker: end this process once its parent is gone (checked every ``period``
    seconds by a daemon thread), so that a worker whose main process was killed does not
    live on."""
    def watch():
        while True:
            time.sleep(period)
            if os.getppid() != parent_pid:
                os._exit(1)
    threading.Thread(target=watch, name="fastgrad-DataLoader-watchdog", daemon=True).start()


def _process_worker_init(dataset, batchify_fn, np_arrays, parent_pid):
    if os.getppid() != parent_pid:          # the parent died before the fork returned
        os._exit(1)
    _exit_when_orphaned(parent_pid)
    # Ctrl-C goes to the whole process group: the main process handles it, workers ignore it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_state["dataset"] = dataset
    _worker_state["batchify_fn"] = batchify_fn
    if np_arrays:
        _npx.set_np()


def _process_worker_batch(indices):
    dataset = _worker_state["dataset"]
    try:
        return _ship(_worker_state["batchify_fn"]([dataset[i] for i in indices]))
    except Exception as error:
        try:
            pickle.dumps(error)
        except Exception:       # noqa: BLE001 -- any failure to pickle
            # The exception cannot travel to the main process: send its type, message and
            # traceback as text instead.
            raise RuntimeError("%s: %s\n(the exception could not be pickled to the main "
                               "process; the worker's traceback follows)\n%s"
                               % (type(error).__name__, error,
                                  traceback.format_exc())) from None
        raise


def _thread_worker_batch(dataset, batchify_fn, indices):
    return batchify_fn([dataset[i] for i in indices])


def _short(indices, shown=8):
    indices = list(indices)
    text = ", ".join(str(i) for i in indices[:shown])
    return "[%s%s]" % (text, ", ..." if len(indices) > shown else "")


# How long a discarded pool's workers may take to finish the batch they are making before
# they are terminated (DataLoader._discard_pool).
_WORKER_GRACE_SECONDS = 2.0


class _WorkerIter:
    """One pass over the batches of a DataLoader whose batches are made by its pool: up to
    ``prefetch`` batches are requested ahead, and they are returned in order."""

    def __init__(self, loader, pool, prefetch):
        # What the pass needs is copied and the loader is only referenced weakly: a loader
        # holding its next pass (auto_reload) would otherwise form a cycle, and only the
        # garbage collector, at an arbitrary moment, could stop its workers. (The generator
        # DataLoader.__iter__ returns keeps the loader alive while it is iterated.)
        self._loader = weakref.ref(loader)
        self._pool = pool
        self._thread_pool = loader._thread_pool
        self._dataset = loader._dataset
        self._batchify_fn = loader._batchify_fn
        self._timeout = loader._timeout
        self._batches = iter(loader._batch_sampler)
        self._pending = []
        self._prefetch = prefetch
        for _ in range(prefetch):
            self._request_next()

    def _request_next(self):
        indices = next(self._batches, None)
        if indices is None:
            return False
        try:
            if self._thread_pool:
                future = self._pool.submit(_thread_worker_batch, self._dataset,
                                           self._batchify_fn, indices)
            else:
                future = self._pool.submit(_process_worker_batch, list(indices))
        except BrokenProcessPool as error:
            # A worker died after the last batch came back: the pool refuses new work
            # before any result could tell us.
            raise self._worker_died(error) from error
        self._pending.append((future, indices))
        return True

    def _worker_died(self, error):
        """Shut the broken pool down; the error to raise in its place."""
        self._cancel()
        loader = self._loader()
        if loader is not None and loader._pool is self._pool:
            loader._discard_pool()
        return RuntimeError("DataLoader: a worker process exited unexpectedly (killed, out of "
                            "memory, or a crash) while making a batch; the worker pool was "
                            "shut down")

    def __iter__(self):
        return self

    def __next__(self):
        self._request_next()
        if not self._pending:
            raise StopIteration
        future, indices = self._pending.pop(0)
        try:
            batch = future.result(timeout=self._timeout)
        except _futures.TimeoutError:
            self._cancel()
            raise TimeoutError(
                "DataLoader: a worker took more than timeout=%s seconds to make a batch. A "
                "slow dataset or transform needs a larger timeout" % self._timeout)
        except BrokenProcessPool as error:
            raise self._worker_died(error) from error
        except Exception as error:
            self._cancel()
            if hasattr(error, "add_note"):
                error.add_note("(raised in a DataLoader worker %s while making the batch of "
                               "samples %s)" % ("thread" if self._thread_pool else "process",
                                                _short(indices)))
            raise
        except BaseException:
            self._cancel()
            raise
        if self._thread_pool:
            return batch
        return _unship(batch)

    def _cancel(self):
        for future, _ in self._pending:
            future.cancel()
        self._pending = []
        self._batches = iter(())

    def __del__(self):
        self._cancel()


class DataLoader:
    """Mini-batches of a dataset.

    Parameters
    ----------
    dataset : Dataset
        The samples (any object with ``len()`` and ``[i]``, such as an array or a list).
    batch_size : int
        The number of samples per batch (required unless ``batch_sampler`` is given).
    shuffle : bool, default False
        Visit the samples in a new random order on every pass (NumPy's global generator).
    sampler : Sampler
        The order of the samples; not together with ``shuffle``.
    last_batch : {'keep', 'discard', 'rollover'}, default 'keep'
        What to do with a last, incomplete batch (:class:`~.sampler.BatchSampler`).
    batch_sampler : Sampler
        Yields the list of indices of each batch; not together with ``batch_size``,
        ``shuffle``, ``sampler`` or ``last_batch``.
    batchify_fn : callable
        Makes a batch from a list of samples; :func:`default_batchify_fn` stacks them.
    num_workers : int, default 0
        The number of worker processes (threads with ``thread_pool=True``) making batches;
        0 makes them in this process (Note [DataLoader workers]).
    pin_memory, pin_device_id :
        Accepted for MXNet compatibility; fastgrad's arrays are always on ``cpu(0)``.
    prefetch : int, default ``2 * num_workers``
        How many batches the workers make ahead.
    thread_pool : bool, default False
        Use threads instead of processes.
    timeout : float, default 120
        The seconds to wait for one batch from a worker before raising ``TimeoutError``.
    auto_reload : bool, default False
        Start making the next pass's first batches as soon as a pass ends (MXNet 1.9.1).
    try_nopython : bool, optional
        MXNet 2's option to compile the loader; accepted and ignored.

    Examples
    --------
    >>> import numpy as np
    >>> from fastgrad import gluon
    >>> loader = gluon.data.DataLoader(np.arange(5), batch_size=2, last_batch='discard')
    >>> [b.asnumpy().tolist() for b in loader], len(loader)
    ([[0, 1], [2, 3]], 2)
    """

    def __init__(self, dataset, batch_size=None, shuffle=False, sampler=None,
                 last_batch=None, batch_sampler=None, batchify_fn=None, num_workers=0,
                 pin_memory=False, pin_device_id=0, prefetch=None, thread_pool=False,
                 timeout=120, auto_reload=False, try_nopython=None):
        self._dataset = dataset
        self._pin_memory = pin_memory
        self._pin_device_id = pin_device_id
        self._thread_pool = bool(thread_pool)
        if not timeout > 0:
            raise ValueError("DataLoader: timeout must be positive, got %r" % (timeout,))
        self._timeout = timeout
        if batch_sampler is None:
            if batch_size is None:
                raise ValueError("DataLoader: batch_size must be specified unless "
                                 "batch_sampler is specified")
            if sampler is None:
                sampler = (_sampler.RandomSampler(len(dataset)) if shuffle
                           else _sampler.SequentialSampler(len(dataset)))
            elif shuffle:
                raise ValueError("DataLoader: shuffle must not be specified if sampler is "
                                 "specified")
            last_batch = last_batch if last_batch else "keep"
            _sampler.check_last_batch(last_batch, "DataLoader")
            batch_sampler = _sampler.BatchSampler(sampler, batch_size, last_batch)
        elif batch_size is not None or shuffle or sampler is not None or \
                last_batch is not None:
            raise ValueError("DataLoader: batch_size, shuffle, sampler and last_batch must "
                             "not be specified if batch_sampler is specified.")
        self._batch_sampler = batch_sampler
        self._num_workers = max(0, int(num_workers))
        self._prefetch = max(0, int(prefetch) if prefetch is not None
                             else 2 * self._num_workers)
        self._batchify_fn = default_batchify_fn if batchify_fn is None else batchify_fn
        self._pool = None
        self.auto_reload = auto_reload
        self._iter = None
        if self.auto_reload:
            self.refresh()

    def __len__(self):
        return len(self._batch_sampler)

    def __iter__(self):
        if self._iter is None:
            self.refresh()
        batches, self._iter = self._iter, None      # an iterator is used once
        for batch in batches:
            yield batch
        if self._iter is None and self.auto_reload:
            self.refresh()

    def refresh(self):
        """Start a new pass (its first batches are requested from the workers now)."""
        self._iter = self._new_iter()

    def clean(self):
        """Forget the pass started by :meth:`refresh`; the next ``iter()`` starts one."""
        self._iter = None

    def _new_iter(self):
        if self._num_workers == 0:
            return self._same_process_iter()
        return _WorkerIter(self, self._get_pool(), self._prefetch)

    def _same_process_iter(self):
        for indices in self._batch_sampler:
            yield self._batchify_fn([self._dataset[i] for i in indices])

    def _get_pool(self):
        if self._pool is None:
            if self._thread_pool:
                self._pool = _futures.ThreadPoolExecutor(
                    self._num_workers, thread_name_prefix="fastgrad-DataLoader")
            else:
                self._pool = _futures.ProcessPoolExecutor(
                    self._num_workers, mp_context=_mp.get_context("fork"),
                    initializer=_process_worker_init,
                    initargs=(self._dataset, self._batchify_fn, _np_arrays_requested(),
                              os.getpid()))
        return self._pool

    def _discard_pool(self):
        """Stop the workers. The pool is told to shut down and its workers get
        ``_WORKER_GRACE_SECONDS`` to finish the batch they are making; only those still
        alive then (stuck) are terminated. A worker terminated while it writes a batch into
        the result pipe would leave half a message there, on which the pool's manager thread
        waits forever (MXNet's test_multi_worker_dataloader_release_pool hung on it: large
        batches, a loader dropped after one batch). Waiting for the manager thread at the end
        keeps CPython 3.11 from reporting a closed pipe when the interpreter exits."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if isinstance(pool, _futures.ProcessPoolExecutor):
            processes = list((getattr(pool, "_processes", None) or {}).values())
            manager = getattr(pool, "_executor_manager_thread", None)
            pool.shutdown(wait=False, cancel_futures=True)
            deadline = time.monotonic() + _WORKER_GRACE_SECONDS
            for process in processes:
                process.join(max(0.0, deadline - time.monotonic()))
            for process in processes:
                if process.is_alive():
                    process.terminate()
            if manager is not None:
                manager.join()
        else:
            pool.shutdown(wait=False, cancel_futures=True)

    def __del__(self):
        try:
            self._discard_pool()
        except Exception:           # noqa: BLE001 -- interpreter shutdown
            pass
