"""MXNet 1.x's data iterators: ``DataDesc``, ``DataBatch``, ``DataIter``, ``NDArrayIter``,
``ResizeIter`` and ``PrefetchingIter`` (``mx.io``).

Note [NDArrayIter order]
~~~~~~~~~~~~~~~~~~~~~~~~
``NDArrayIter`` walks a cursor over the examples in steps of ``batch_size``, exactly as MXNet
1.9.1 does, so a script gets the same batches in the same order: sources are sorted by name,
``shuffle=True`` permutes the stored arrays with ``numpy.random.shuffle`` at every reset (the
permutations compose, as in MXNet), ``'pad'`` completes the last batch with examples from
the start (and reports ``pad``), ``'discard'`` drops it, and ``'roll_over'`` keeps the tail
and puts it in front of the next epoch's first batch. Arrays given as NumPy are converted with
``nd.array`` (float32, as MXNet); pass ``nd.array(x, dtype='float64')`` to keep float64.
"""

import threading
from collections import OrderedDict, namedtuple

import numpy as np

from fastgrad import ndarray as nd
from fastgrad.ndarray import NDArray

__all__ = ["DataDesc", "DataBatch", "DataIter", "ResizeIter", "PrefetchingIter", "NDArrayIter"]


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """The name, shape, dtype and layout of one input of a module (a ``(name, shape)`` tuple
    with two more attributes).

    Examples
    --------
    >>> import fastgrad as mx
    >>> d = mx.io.DataDesc('data', (32, 10))
    >>> d.name, d.shape, d.layout
    ('data', (32, 10), 'NCHW')
    """

    def __new__(cls, name, shape, dtype=np.float32, layout="NCHW"):
        out = super().__new__(cls, name, shape)
        out.dtype = dtype
        out.layout = layout
        return out

    def __repr__(self):
        return "DataDesc[%s,%s,%s,%s]" % (self.name, self.shape, self.dtype, self.layout)

    @staticmethod
    def get_batch_axis(layout):
        """The axis of the batch in ``layout`` (``'N'``'s position; 0 for ``None``)."""
        if layout is None:
            return 0
        return layout.find("N")

    @staticmethod
    def get_list(shapes, types):
        """``DataDesc`` objects from ``[(name, shape)]`` and optional ``[(name, dtype)]``."""
        if types is not None:
            type_dict = dict(types)
            return [DataDesc(x[0], x[1], type_dict[x[0]]) for x in shapes]
        return [DataDesc(x[0], x[1]) for x in shapes]


class DataBatch:
    """One batch: lists ``data`` and ``label`` of arrays, ``pad`` (examples at the end that
    only fill the batch), ``index``, ``bucket_key``, ``provide_data``, ``provide_label``."""

    def __init__(self, data, label=None, pad=None, index=None, bucket_key=None,
                 provide_data=None, provide_label=None):
        if data is not None and not isinstance(data, (list, tuple)):
            raise TypeError("DataBatch: data must be a list of arrays, not %s"
                            % type(data).__name__)
        if label is not None and not isinstance(label, (list, tuple)):
            raise TypeError("DataBatch: label must be a list of arrays, not %s"
                            % type(label).__name__)
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self):
        label_shapes = [a.shape for a in self.label] if self.label else None
        return "%s: data shapes: %s label shapes: %s" % (
            type(self).__name__, [a.shape for a in self.data], label_shapes)


class DataIter:
    """The base of the data iterators: ``next()`` returns a :class:`DataBatch` built from
    ``getdata``, ``getlabel``, ``getpad`` and ``getindex`` while ``iter_next()`` is true, and
    raises ``StopIteration`` at the end of the data; ``reset()`` starts again."""

    def __init__(self, batch_size=0):
        self.batch_size = batch_size

    def __iter__(self):
        return self

    def reset(self):
        """Go back to the start of the data."""

    def next(self):
        """The next :class:`DataBatch`; ``StopIteration`` at the end."""
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self):
        return self.next()

    def iter_next(self):
        """Move to the next batch; whether there was one."""

    def getdata(self):
        """The data arrays of the current batch."""

    def getlabel(self):
        """The label arrays of the current batch."""

    def getindex(self):
        """The example indices of the current batch (``None`` when unknown)."""
        return None

    def getpad(self):
        """The number of padding examples in the current batch."""


class _CurrentBatchIter(DataIter):
    """A :class:`DataIter` whose ``iter_next`` keeps the batch it moves to in
    ``self.current_batch``: ``getdata``, ``getlabel``, ``getindex`` and ``getpad`` read it."""

    def getdata(self):
        return self.current_batch.data

    def getlabel(self):
        return self.current_batch.label

    def getindex(self):
        return self.current_batch.index

    def getpad(self):
        return self.current_batch.pad


class ResizeIter(_CurrentBatchIter):
    """``data_iter`` cut or extended to ``size`` batches per epoch (restarting it when it
    runs out); ``reset_internal`` resets it at every :meth:`reset`.

    Examples
    --------
    >>> import fastgrad as mx
    >>> it = mx.io.ResizeIter(mx.io.NDArrayIter(mx.nd.ones((10, 2)), batch_size=4), 5)
    >>> len(list(it))
    5
    """

    def __init__(self, data_iter, size, reset_internal=True):
        super().__init__()
        self.data_iter = data_iter
        self.size = size
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch = None
        self.provide_data = data_iter.provide_data
        self.provide_label = data_iter.provide_label
        self.batch_size = data_iter.batch_size
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self):
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self):
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True


def _renamed(descs, renames):
    out = []
    for r, descs_i in zip(renames, descs):
        for x in descs_i:
            if not isinstance(x, DataDesc):
                x = DataDesc(*x)
            if x.name not in r:
                raise KeyError("PrefetchingIter: the renaming map %s has no entry for %r"
                               % (r, x.name))
            out.append(DataDesc(r[x.name], x.shape, x.dtype))
    return out


class PrefetchingIter(_CurrentBatchIter):
    """Reads the next batch of each of ``iters`` on a background thread while the current one
    is used; the batches of several iterators are joined (their data, then their labels).

    Parameters
    ----------
    iters : DataIter or list of DataIter
    rename_data, rename_label : list of dict, optional
        For each iterator, ``{old name: new name}`` for its ``provide_data``/``provide_label``.

    Examples
    --------
    >>> import fastgrad as mx
    >>> a = mx.io.NDArrayIter({'data': mx.nd.ones((4, 2))}, batch_size=2)
    >>> b = mx.io.NDArrayIter({'data': mx.nd.zeros((4, 3))}, batch_size=2)
    >>> it = mx.io.PrefetchingIter([a, b], rename_data=[{'data': 'a'}, {'data': 'b'}])
    >>> [d.name for d in it.provide_data], [x.shape for x in it.next().data]
    (['a', 'b'], [(2, 2), (2, 3)])
    """

    def __init__(self, iters, rename_data=None, rename_label=None):
        super().__init__()
        if not isinstance(iters, list):
            iters = [iters]
        if not iters:
            raise ValueError("PrefetchingIter: iters is empty; give at least one DataIter")
        self.n_iter = len(iters)
        self.iters = iters
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.batch_size = self.provide_data[0][1][0]
        self.data_ready = [threading.Event() for _ in range(self.n_iter)]
        self.data_taken = [threading.Event() for _ in range(self.n_iter)]
        for event in self.data_taken:
            event.set()
        self.started = True
        self.current_batch = None
        self.next_batch = [None] * self.n_iter
        self._errors = [None] * self.n_iter
        self.prefetch_threads = [threading.Thread(target=self._prefetch, args=(i,), daemon=True)
                                 for i in range(self.n_iter)]
        for thread in self.prefetch_threads:
            thread.start()

    def _prefetch(self, i):
        while True:
            self.data_taken[i].wait()
            if not self.started:
                break
            try:
                self.next_batch[i] = self.iters[i].next()
            except StopIteration:
                self.next_batch[i] = None
            except BaseException as exc:     # re-raised in the caller's thread
                self.next_batch[i] = None
                self._errors[i] = exc
            self.data_taken[i].clear()
            self.data_ready[i].set()

    def close(self):
        """Stop the background threads (also done when the iterator is collected)."""
        if not getattr(self, "started", False):
            return
        self.started = False
        for event in self.data_taken:
            event.set()
        for thread in self.prefetch_threads:
            thread.join()

    def __del__(self):
        self.close()

    @property
    def provide_data(self):
        if self.rename_data is None:
            return sum([list(i.provide_data) for i in self.iters], [])
        return _renamed([i.provide_data for i in self.iters], self.rename_data)

    @property
    def provide_label(self):
        if self.rename_label is None:
            return sum([list(i.provide_label) for i in self.iters], [])
        return _renamed([i.provide_label for i in self.iters], self.rename_label)

    def _raise_errors(self):
        for i, exc in enumerate(self._errors):
            if exc is not None:
                self._errors[i] = None
                raise exc

    def reset(self):
        for event in self.data_ready:
            event.wait()
        self._errors = [None] * self.n_iter
        for it in self.iters:
            it.reset()
        for event in self.data_ready:
            event.clear()
        for event in self.data_taken:
            event.set()

    def iter_next(self):
        for event in self.data_ready:
            event.wait()
        self._raise_errors()
        if self.next_batch[0] is None:
            if any(b is not None for b in self.next_batch):
                raise ValueError("PrefetchingIter: the iterators have different numbers of "
                                 "batches")
            return False
        if any(b is None or b.pad != self.next_batch[0].pad for b in self.next_batch):
            raise ValueError("PrefetchingIter: the iterators have different numbers of "
                             "examples (their batches' pad differ)")
        first = self.next_batch[0]
        self.current_batch = DataBatch(sum([list(b.data) for b in self.next_batch], []),
                                       sum([list(b.label or []) for b in self.next_batch], []),
                                       first.pad, first.index,
                                       provide_data=self.provide_data,
                                       provide_label=self.provide_label)
        for event in self.data_ready:
            event.clear()
        for event in self.data_taken:
            event.set()
        return True

    def next(self):
        if self.iter_next():
            return self.current_batch
        raise StopIteration


# ------------------------------------------------------------ NDArrayIter
def _init_data(data, allow_empty, default_name, what):
    """``data`` (an array, a list of arrays or a dict of them) as a sorted list of
    ``(name, NDArray)``; a list of several gets the names ``_0_<name>``, ``_1_<name>``..."""
    if data is None:
        if not allow_empty:
            raise ValueError("NDArrayIter: %s is None; give an array, a list or a dict" % what)
        data = []
    if isinstance(data, (np.ndarray, NDArray)) or hasattr(data, "asnumpy"):
        data = [data]
    if isinstance(data, (list, tuple)):
        if not data and not allow_empty:
            raise ValueError("NDArrayIter: %s is an empty list" % what)
        if len(data) == 1:
            data = OrderedDict([(default_name, data[0])])
        else:
            data = OrderedDict(("_%d_%s" % (i, default_name), d) for i, d in enumerate(data))
    if not isinstance(data, dict):
        raise TypeError("NDArrayIter: %s must be an NDArray, a numpy.ndarray, a list of them "
                        "or a dict with them as values, not %s" % (what, type(data).__name__))
    out = {}
    for k, v in data.items():
        if not isinstance(v, NDArray):
            try:
                v = nd.array(v.asnumpy() if hasattr(v, "asnumpy") else v)
            except Exception:
                raise TypeError("NDArrayIter: invalid type %s for %r; it should be an NDArray "
                                "or a numpy.ndarray" % (type(v).__name__, k)) from None
        if v.ndim == 0:
            raise ValueError("NDArrayIter: %s %r is 0-d; it needs an axis of examples"
                             % (what, k))
        out[k] = v
    return sorted(out.items())


class NDArrayIter(DataIter):
    """Batches of in-memory arrays (Note [NDArrayIter order]).

    Parameters
    ----------
    data : array, list of arrays or dict of name to array
        The inputs; named ``data_name`` (one array), ``_<i>_<data_name>`` (a list) or by key.
    label : array, list or dict, optional
        The labels, named the same way from ``label_name``.
    batch_size : int
    shuffle : bool
        Permute the examples at every reset (with ``numpy.random``).
    last_batch_handle : {'pad', 'discard', 'roll_over'}
        What to do with a last batch that is not full.
    data_name, label_name : str
    layout : str
        Where ``'N'`` is, the batch axis.

    Examples
    --------
    >>> import fastgrad as mx
    >>> import numpy as np
    >>> it = mx.io.NDArrayIter(np.arange(10).reshape(5, 2), np.arange(5), batch_size=2)
    >>> [(b.label[0].asnumpy().tolist(), b.pad) for b in it]
    [([0.0, 1.0], 0), ([2.0, 3.0], 0), ([4.0, 0.0], 1)]
    """

    def __init__(self, data, label=None, batch_size=1, shuffle=False, last_batch_handle="pad",
                 data_name="data", label_name="softmax_label", layout="NCHW"):
        super().__init__(batch_size)
        if not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError("NDArrayIter: batch_size must be a positive int, got %r"
                             % (batch_size,))
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError("NDArrayIter: last_batch_handle must be 'pad', 'discard' or "
                             "'roll_over', got %r" % (last_batch_handle,))
        if "N" not in layout:
            raise ValueError("NDArrayIter: layout %r has no batch axis 'N'" % (layout,))
        self.layout = layout
        self.data = _init_data(data, False, data_name, "data")
        self.label = _init_data(label, True, label_name, "label")
        axis = layout.find("N")
        counts = {k: v.shape[axis] if v.ndim > axis else None for k, v in self.data + self.label}
        first = self.data[0][1].shape[axis] if self.data[0][1].ndim > axis else None
        # As MXNet, the first data array decides the number of examples; a longer array is
        # cut to it, a shorter one cannot fill the batches.
        bad = {k: n for k, n in counts.items() if n is None or n < first}
        if bad:
            raise ValueError("NDArrayIter: every data and label array needs at least as many "
                             "examples along axis %d as %r (%s); these have fewer: %s"
                             % (axis, self.data[0][0], first, bad))
        self.idx = np.arange(first)
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.batch_size = int(batch_size)
        self.cursor = -self.batch_size
        self.num_data = self.idx.shape[0]
        self._cache_data = None
        self._cache_label = None
        self.reset()
        self.data_list = [x[1] for x in self.data] + [x[1] for x in self.label]
        self.num_source = len(self.data_list)

    def _describe(self, sources):
        axis = self.layout.find("N")
        return [DataDesc(k, tuple(list(v.shape[:axis]) + [self.batch_size] +
                                  list(v.shape[axis + 1:])), np.dtype(v.dtype).type,
                         layout=self.layout)
                for k, v in sources]

    @property
    def provide_data(self):
        """``DataDesc`` of each data array, with the batch size on the batch axis."""
        return self._describe(self.data)

    @property
    def provide_label(self):
        """``DataDesc`` of each label array."""
        return self._describe(self.label)

    def hard_reset(self):
        """Start again from the first example, dropping any rolled-over tail."""
        if self.shuffle:
            self._shuffle_data()
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None

    def reset(self):
        if self.shuffle:
            self._shuffle_data()
        if (self.last_batch_handle == "roll_over"
                and self.num_data - self.batch_size < self.cursor < self.num_data):
            # the tail (cached by next) goes in front of the next epoch's first batch
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size

    def iter_next(self):
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self):
        if not self.iter_next():
            raise StopIteration
        data = self.getdata()
        label = self.getlabel()
        if data[0].shape[self.layout.find("N")] != self.batch_size:
            # a short last batch ('discard', 'roll_over'): keep it for a roll-over
            self._cache_data = data
            self._cache_label = label
            raise StopIteration
        return DataBatch(data=data, label=label, pad=self.getpad(), index=None)

    def _getdata(self, sources, start=None, end=None):
        start = 0 if start is None else start
        if end is None:
            end = sources[0][1].shape[self.layout.find("N")] if sources else 0
        axis = self.layout.find("N")
        return [v.slice_axis(axis=axis, begin=start, end=end) for _, v in sources]

    def _concat(self, first, second):
        if not first or not second:
            return first if first else second
        axis = self.layout.find("N")
        return [nd.concat(a, b, dim=axis) for a, b in zip(first, second)]

    def _tile(self, data, repeats):
        out = []
        for datum in data:
            reps = [1] * datum.ndim
            reps[0] = repeats
            out.append(nd.tile(datum, reps=tuple(reps)))
        return out

    def _batchify(self, sources):
        if self.cursor >= self.num_data:
            raise RuntimeError("NDArrayIter: the iterator is at its end; call reset()")
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            cached = self._cache_data if self._cache_data is not None else self._cache_label
            if cached is None:
                raise RuntimeError("NDArrayIter: roll_over expected the previous epoch's tail")
            second = self._getdata(sources, end=self.cursor + self.batch_size)
            if self._cache_data is not None:
                self._cache_data = None
            else:
                self._cache_label = None
            return self._concat(cached, second)
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            pad = self.batch_size - self.num_data + self.cursor
            first = self._getdata(sources, start=self.cursor)
            if pad > self.num_data:
                second = self._tile(self._getdata(sources, end=self.num_data),
                                    pad // self.num_data)
                if pad % self.num_data:
                    second = self._concat(second,
                                          self._getdata(sources, end=pad % self.num_data))
            else:
                second = self._getdata(sources, end=pad)
            return self._concat(first, second)
        end = min(self.cursor + self.batch_size, self.num_data)
        return self._getdata(sources, self.cursor, end)

    def getdata(self):
        return self._batchify(self.data)

    def getlabel(self):
        return self._batchify(self.label)

    def getpad(self):
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            return -self.cursor
        return 0

    def _shuffle_data(self):
        np.random.shuffle(self.idx)
        axis = self.layout.find("N")

        def permuted(sources):
            return [(k, nd.array(v.asnumpy()[self.idx], dtype=v.dtype))
                    for k, v in sources]
        self.data = permuted(self.data)
        self.label = permuted(self.label)
