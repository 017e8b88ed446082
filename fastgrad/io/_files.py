"""Iterators over local files: ``CSVIter`` and ``MNISTIter`` (``mx.io``), and the RecordIO
readers fastgrad does not have (a clear error).

Note [File iterators]
~~~~~~~~~~~~~~~~~~~~~
MXNet's file iterators are C++ objects with a prefetching thread; fastgrad reads the whole
file with NumPy at construction (CSV and MNIST files are small) and then serves batches from
memory, in MXNet 1.9.1's order: ``CSVIter(round_batch=True)`` completes the last batch with
examples from the start, reports them as ``pad``, and begins the next epoch after them (as
MXNet's batch loader does); ``round_batch=False`` pads with the start as well but the next
epoch starts at the first example. ``MNISTIter`` scales pixels by 1/256 (as MXNet), drops the
last incomplete batch, and with ``shuffle=True`` permutes with a NumPy generator seeded by
``seed`` (not MXNet's generator: the order differs from MXNet's).
"""

import gzip
import os
import struct
import warnings

import numpy as np

from fastgrad import ndarray as nd
from fastgrad.io.io import DataBatch, DataDesc, DataIter

__all__ = ["CSVIter", "MNISTIter", "ImageRecordIter", "ImageRecordUInt8Iter",
           "ImageRecordInt8Iter", "ImageDetRecordIter", "LibSVMIter", "ImageRecordIter_v1",
           "ImageRecordUInt8Iter_v1"]


def _ignore(where, kwargs, known):
    """MXNet's C++ iterators accept and ignore arguments they do not have; so do these, with a
    warning for a name that is not one of MXNet's iterator options."""
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        warnings.warn("%s: ignoring the unknown arguments %s (as MXNet)" % (where, unknown),
                      stacklevel=3)


def _shape_tuple(shape, what, where):
    try:
        out = tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError("%s: %s must be a tuple of ints, got %r" % (where, what, shape)) from None
    if any(d <= 0 for d in out):
        raise ValueError("%s: %s must have positive dimensions, got %r" % (where, what, shape))
    return out


def _read_csv(path, shape, dtype, what):
    if not os.path.isfile(path):
        raise FileNotFoundError("CSVIter: %s %r: no such file" % (what, path))
    rows = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    width = int(np.prod(shape))
    if rows.shape[1] != width:
        raise ValueError("CSVIter: each line of %s %r has %d values but its shape %s needs %d"
                         % (what, path, rows.shape[1], shape, width))
    return rows.astype(dtype).reshape((rows.shape[0],) + shape)


class _MemoryBatches(DataIter):
    """Batches served in order from arrays in memory (the file iterators' common part):
    a subclass's ``iter_next`` keeps the batch it moves to in ``self._batch``, which ``next``
    returns and ``getdata``, ``getlabel`` and ``getindex`` read."""

    def __init__(self, data, label, batch_size, data_name="data", label_name="softmax_label"):
        super().__init__(batch_size)
        self._data = data
        self._label = label
        self._start = 0          # the first example of the epoch
        self._cursor = None
        self._batch = None
        self.provide_data = [DataDesc(data_name, (batch_size,) + data.shape[1:],
                                      np.dtype(data.dtype).type)]
        self.provide_label = [DataDesc(label_name, (batch_size,) + label.shape[1:],
                                       np.dtype(label.dtype).type)]

    def _take(self, start):
        n = self._data.shape[0]
        index = np.arange(start, start + self.batch_size) % n
        pad = max(0, start + self.batch_size - n)
        return DataBatch([nd.array(self._data[index], dtype=self._data.dtype)],
                         [nd.array(self._label[index], dtype=self._label.dtype)],
                         pad=pad, index=index)

    def next(self):
        if self.iter_next():
            return self._batch
        raise StopIteration

    def getdata(self):
        """The current batch's data array (one array, as MXNet's C++ iterators)."""
        return self._batch.data[0]

    def getlabel(self):
        """The current batch's label array (one array, as MXNet's C++ iterators)."""
        return self._batch.label[0]

    def getindex(self):
        return self._batch.index


class CSVIter(_MemoryBatches):
    """Batches of rows of CSV files (Note [File iterators]).

    Parameters
    ----------
    data_csv : str
        The file of the data, one example per line.
    data_shape : tuple of int
        The shape of one example (its line has ``prod(data_shape)`` values).
    label_csv : str, optional
        The file of the labels (zeros when not given).
    label_shape : tuple of int
    batch_size : int
    round_batch : bool
    dtype : {'float32', 'int32', 'int64'}

    Examples
    --------
    >>> import fastgrad as mx, numpy as np, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), 'd.csv')
    >>> np.savetxt(path, np.arange(6).reshape(3, 2), delimiter=',')
    >>> [b.data[0].asnumpy().tolist() for b in mx.io.CSVIter(data_csv=path, data_shape=(2,),
    ...                                                      batch_size=2)]
    [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [0.0, 1.0]]]
    """

    def __init__(self, data_csv, data_shape, label_csv=None, label_shape=(1,), batch_size=1,
                 round_batch=True, dtype="float32", prefetch_buffer=4, ctx="cpu",
                 data_name="data", label_name="softmax_label", **kwargs):
        _ignore("CSVIter", kwargs, {"preprocess_threads", "seed", "shuffle", "silent",
                                    "verbose"})
        if str(dtype) not in ("float32", "int32", "int64"):
            raise ValueError("CSVIter: dtype must be 'float32', 'int32' or 'int64', got %r"
                             % (dtype,))
        if int(batch_size) <= 0:
            raise ValueError("CSVIter: batch_size must be positive, got %r" % (batch_size,))
        data_shape = _shape_tuple(data_shape, "data_shape", "CSVIter")
        label_shape = _shape_tuple(label_shape, "label_shape", "CSVIter")
        data = _read_csv(data_csv, data_shape, dtype, "data_csv")
        if label_csv is None or label_csv == "NULL":
            label = np.zeros((data.shape[0],) + label_shape, dtype)
        else:
            label = _read_csv(label_csv, label_shape, dtype, "label_csv")
            if label.shape[0] != data.shape[0]:
                raise ValueError("CSVIter: label_csv %r has %d lines but data_csv %r has %d"
                                 % (label_csv, label.shape[0], data_csv, data.shape[0]))
        if label_shape == (1,):
            label = label.reshape(-1)
        if data.shape[0] == 0:
            raise ValueError("CSVIter: data_csv %r is empty" % (data_csv,))
        self.round_batch = bool(round_batch)
        super().__init__(data, label, int(batch_size), data_name, label_name)
        self.reset()

    def reset(self):
        if self._cursor is not None and self._cursor >= self._data.shape[0] \
                and self.round_batch:
            # the padded examples of the last batch were this epoch's start
            self._start = self._cursor - self._data.shape[0]
        else:
            self._start = 0
        self._cursor = self._start

    def iter_next(self):
        if self._cursor >= self._data.shape[0]:
            return False
        self._batch = self._take(self._cursor)
        self._cursor += self.batch_size
        return True

    def getpad(self):
        return self._batch.pad


def _read_idx(path, magic, what):
    if not os.path.isfile(path):
        raise FileNotFoundError("MNISTIter: %s %r: no such file" % (what, path))
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".gz") or raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    ndim = 3 if magic == 2051 else 1
    head = 4 * (1 + ndim)
    if len(raw) < head or struct.unpack(">i", raw[:4])[0] != magic:
        raise ValueError("MNISTIter: %s %r is not an MNIST idx file (magic number %d expected)"
                         % (what, path, magic))
    dims = struct.unpack(">" + "i" * ndim, raw[4:head])
    count = int(np.prod(dims))
    if len(raw) - head < count:
        raise ValueError("MNISTIter: %s %r is truncated: %d bytes of %d"
                         % (what, path, len(raw) - head, count))
    return np.frombuffer(raw, np.uint8, count, head).reshape(dims)


class MNISTIter(_MemoryBatches):
    """Batches of the MNIST idx files ``image`` and ``label`` (Note [File iterators]).

    Data are float32 pixels scaled by 1/256, shaped ``(batch, 1, 28, 28)`` or ``(batch, 784)``
    with ``flat=True``; labels are float32. The last incomplete batch is dropped.
    """

    def __init__(self, image="./train-images-idx3-ubyte", label="./train-labels-idx1-ubyte",
                 batch_size=128, shuffle=True, flat=False, seed=0, silent=False, num_parts=1,
                 part_index=0, prefetch_buffer=4, ctx="cpu", dtype=None, **kwargs):
        data_shape = kwargs.pop("data_shape", None)
        _ignore("MNISTIter", kwargs, {"preprocess_threads", "verbose"})
        if int(batch_size) <= 0:
            raise ValueError("MNISTIter: batch_size must be positive, got %r" % (batch_size,))
        images = _read_idx(image, 2051, "image")
        labels = _read_idx(label, 2049, "label")
        if images.shape[0] != labels.shape[0]:
            raise ValueError("MNISTIter: image %r has %d images but label %r has %d labels"
                             % (image, images.shape[0], label, labels.shape[0]))
        if not 0 <= part_index < num_parts:
            raise ValueError("MNISTIter: part_index %d is not in [0, num_parts=%d)"
                             % (part_index, num_parts))
        per_part = images.shape[0] // num_parts
        span = slice(part_index * per_part, (part_index + 1) * per_part)
        images, labels = images[span], labels[span]
        order = np.arange(images.shape[0])
        if shuffle:
            np.random.RandomState(seed).shuffle(order)
        data = images[order].astype(np.float32) / np.float32(256)
        data = data.reshape((data.shape[0], -1) if flat else (data.shape[0], 1) + data.shape[1:])
        if data_shape is not None and tuple(data_shape) != data.shape[1:]:
            warnings.warn("MNISTIter: data_shape=%s is ignored (as MXNet); the images are %s "
                          "(flat=%s)" % (tuple(data_shape), data.shape[1:], flat), stacklevel=2)
        self.shuffle = shuffle
        super().__init__(data, labels[order].astype(np.float32), int(batch_size))
        self._order = order
        self.reset()

    def reset(self):
        self._cursor = 0

    def iter_next(self):
        if self._cursor + self.batch_size > self._data.shape[0]:
            return False
        self._batch = self._take(self._cursor)
        self._batch.index = self._order[self._batch.index]
        self._cursor += self.batch_size
        return True

    def getpad(self):
        return 0


def _record_io_reader(name, what="RecordIO (.rec) files",
                      instead="use gluon.data.vision.ImageRecordDataset (it reads .rec files) "
                              "with a gluon.data.DataLoader, or "):
    def refuse(*args, **kwargs):
        raise NotImplementedError(
            "mx.io.%s: fastgrad's mx.io has no iterator over %s; %sload the examples into "
            "arrays for mx.io.NDArrayIter" % (name, what, instead))
    refuse.__name__ = name
    refuse.__qualname__ = name
    refuse.__doc__ = "Not available in fastgrad: raises ``NotImplementedError``."
    return refuse


ImageRecordIter = _record_io_reader("ImageRecordIter")
ImageRecordUInt8Iter = _record_io_reader("ImageRecordUInt8Iter")
ImageRecordInt8Iter = _record_io_reader("ImageRecordInt8Iter")
ImageDetRecordIter = _record_io_reader("ImageDetRecordIter")
ImageRecordIter_v1 = _record_io_reader("ImageRecordIter_v1")
ImageRecordUInt8Iter_v1 = _record_io_reader("ImageRecordUInt8Iter_v1")
LibSVMIter = _record_io_reader("LibSVMIter", "LibSVM files (sparse storage)", instead="")
