"""Datasets: indexable collections of samples (MXNet's ``gluon.data`` datasets).

A dataset is anything with ``len()`` and ``[i]``; :class:`Dataset` adds the chaining
methods ``transform``, ``transform_first``, ``filter``, ``shard``, ``take`` and ``sample``.

>>> import numpy as np
>>> from fastgrad import gluon
>>> ds = gluon.data.ArrayDataset(np.arange(6).reshape(3, 2), [10, 11, 12])
>>> ds[1]
(array([2, 3]), 11)
>>> ds.transform_first(lambda x: x * 2)[1]
(array([4, 6]), 11)
"""

import os

from fastgrad._core._array import ndarray as _array_type
from fastgrad import recordio as _recordio
from fastgrad.gluon.data import sampler as _sampler

__all__ = ["Dataset", "SimpleDataset", "ArrayDataset", "RecordFileDataset"]


class Dataset:
    """The base class of datasets: a subclass defines ``__getitem__`` (the ``i``-th sample)
    and ``__len__`` (how many). A NumPy or fastgrad array, or a list, can be used wherever a
    dataset is expected."""

    def __getitem__(self, idx):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError

    def filter(self, fn):
        """A dataset of the samples for which ``fn(sample)`` is true (``fn`` runs over every
        sample once, now; a lazy transform is applied again when a sample is read)."""
        return _SampledDataset(self, _sampler.FilterSampler(fn, self))

    def shard(self, num_shards, index):
        """Part ``index`` of ``num_shards`` contiguous parts of nearly equal length (the first
        ``len(self) % num_shards`` parts have one sample more). Shard before shuffling, so
        that each worker of a distributed job reads its own samples."""
        if not 0 < num_shards:
            raise ValueError("Dataset.shard: num_shards must be positive, got %r"
                             % (num_shards,))
        if not 0 <= index < num_shards:
            raise ValueError("Dataset.shard: index %r is out of range for %d shards"
                             % (index, num_shards))
        base, rest = divmod(len(self), num_shards)
        start = base * index + min(index, rest)
        length = base + (1 if index < rest else 0)
        return _SampledDataset(self, _sampler.SequentialSampler(length, start))

    def take(self, count):
        """The first ``count`` samples (all of them when ``count`` is None or larger than the
        dataset)."""
        if count is None or count > len(self):
            count = len(self)
        return _SampledDataset(self, _sampler.SequentialSampler(count))

    def sample(self, sampler):
        """The samples at the indices ``sampler`` yields (drawn once, now)."""
        if not isinstance(sampler, _sampler.Sampler):
            raise TypeError("Dataset.sample: invalid sampler type %s; expected a "
                            "gluon.data.Sampler" % type(sampler).__name__)
        return _SampledDataset(self, sampler)

    def transform(self, fn, lazy=True):
        """A dataset whose samples are ``fn(sample)`` (``fn(*sample)`` when a sample is a
        tuple). ``lazy=False`` applies ``fn`` to every sample now and keeps the results:
        avoid it for random augmentations, which would then be the same in every epoch."""
        transformed = _LazyTransformDataset(self, fn)
        if lazy:
            return transformed
        return SimpleDataset([transformed[i] for i in range(len(transformed))])

    def transform_first(self, fn, lazy=True):
        """Like :meth:`transform`, but ``fn`` is applied to the first element of each sample
        only (the data, leaving the label as it is)."""
        return self.transform(_TransformFirst(fn), lazy)


class SimpleDataset(Dataset):
    """A dataset over any object with ``len()`` and ``[i]`` (a list, an array...)."""

    def __init__(self, data):
        self._data = data

    def __len__(self):
        return len(self._data)

    def __getitem__(self, idx):
        return self._data[idx]


class _LazyTransformDataset(Dataset):
    """The samples of a dataset, each passed through ``fn`` when it is read."""

    def __init__(self, data, fn):
        self._data = data
        self._fn = fn

    def __len__(self):
        return len(self._data)

    def __getitem__(self, idx):
        item = self._data[idx]
        if isinstance(item, tuple):
            return self._fn(*item)
        return self._fn(item)


class _TransformFirst:
    """``fn`` applied to the first element of a sample (a class, not a closure, so that it
    can be pickled)."""

    def __init__(self, fn):
        self._fn = fn

    def __call__(self, x, *rest):
        if rest:
            return (self._fn(x),) + rest
        return self._fn(x)


class _SampledDataset(Dataset):
    """The samples of a dataset at the indices a sampler gave once."""

    def __init__(self, dataset, sampler):
        self._dataset = dataset
        self._sampler = sampler
        self._indices = list(iter(sampler))

    def __len__(self):
        return len(self._indices)

    def __getitem__(self, idx):
        return self._dataset[self._indices[idx]]


class ArrayDataset(Dataset):
    """The samples ``(a[i], b[i], ...)`` of several dataset-like objects of one length
    (arrays, lists, datasets); with one object, its items themselves.

    A one-dimensional fastgrad array is turned into a NumPy array first, so that its items
    are NumPy scalars, as in MXNet.
    """

    def __init__(self, *args):
        if not args:
            raise ValueError("ArrayDataset needs at least 1 array")
        self._length = len(args[0])
        self._data = []
        for i, data in enumerate(args):
            if len(data) != self._length:
                raise ValueError("ArrayDataset: all arrays must have the same length; "
                                 "array[0] has length %d while array[%d] has %d"
                                 % (self._length, i, len(data)))
            if isinstance(data, _array_type) and data.ndim == 1:
                data = data.asnumpy()
            self._data.append(data)

    def __getitem__(self, idx):
        if len(self._data) == 1:
            return self._data[0][idx]
        return tuple(data[idx] for data in self._data)

    def __len__(self):
        return self._length


class RecordFileDataset(Dataset):
    """The records of a RecordIO file (``filename``, with its index ``<name>.idx`` beside it)
    as raw bytes, in the index's order (:mod:`fastgrad.recordio`)."""

    def __init__(self, filename):
        self.idx_file = os.path.splitext(filename)[0] + ".idx"
        self.filename = filename
        for path in (filename, self.idx_file):
            if not os.path.exists(path):
                raise FileNotFoundError("%s: %s not found (a RecordIO dataset needs the .rec "
                                        "file and its .idx index)" % (type(self).__name__,
                                                                      path))
        self._record = _recordio.MXIndexedRecordIO(self.idx_file, self.filename, "r")

    def __getitem__(self, idx):
        return self._record.read_idx(self._record.keys[idx])

    def __len__(self):
        return len(self._record.keys)


class _DownloadedDataset(Dataset):
    """The base of MNIST, CIFAR10, ...: ``(data[i], label[i])``, passed through
    ``transform(data, label)`` when one is given; ``_get_data`` reads the files in ``root``."""

    def __init__(self, root, transform):
        self._transform = transform
        self._data = None
        self._label = None
        self._root = os.path.expanduser(root)
        self._get_data()

    def __getitem__(self, idx):
        if self._transform is not None:
            return self._transform(self._data[idx], self._label[idx])
        return self._data[idx], self._label[idx]

    def __len__(self):
        return len(self._label)

    def _get_data(self):
        raise NotImplementedError
