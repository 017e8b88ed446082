"""Image datasets: MNIST, Fashion-MNIST, CIFAR-10/100 from their standard files, folders and
lists of image files (MXNet's ``gluon.data.vision`` datasets).

fastgrad never downloads: the files must already be in ``root``. A missing file raises
``FileNotFoundError`` naming it and the address it is published at (MXNet's mirror), and a
file of the wrong format raises ``ValueError`` naming it. MXNet checks each file's SHA-1
against the published one; fastgrad does not (so that small files of the same format work,
as in its tests).

For example (with the four MNIST files in ``~/.mxnet/datasets/mnist``)::

    from fastgrad.gluon.data import vision
    train = vision.MNIST(root='~/.mxnet/datasets/mnist')
    image, label = train[0]         # a (28, 28, 1) uint8 NDArray and a numpy.int32
"""

import gzip
import os
import struct
import tarfile
import warnings

import numpy as _onp

from fastgrad._core._array import ndarray as _array_type, _wrap
from fastgrad.ndarray import NDArray
from fastgrad.gluon.data import dataset as _dataset
from fastgrad.gluon.data.dataloader import _np_arrays_requested
from fastgrad._api import _image_files
from fastgrad import recordio as _recordio

__all__ = ["MNIST", "FashionMNIST", "CIFAR10", "CIFAR100", "ImageRecordDataset",
           "ImageFolderDataset", "ImageListDataset"]

MXNET_DATASET_URL = "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/gluon/dataset/"
IDX_IMAGES_MAGIC = 2051
IDX_LABELS_MAGIC = 2049
CIFAR_IMAGE_BYTES = 3 * 32 * 32


def _default_root(name):
    return os.path.join(os.environ.get("MXNET_HOME", os.path.join("~", ".mxnet")),
                        "datasets", name)


def _as_array(values):
    """A NumPy array as the array type Gluon makes now: ``mx.nd.NDArray``, or ``mx.np`` under
    ``npx.set_np()``."""
    return _wrap(_onp.ascontiguousarray(values),
                 _array_type if _np_arrays_requested() else NDArray)


def _missing(dataset, path, url):
    return FileNotFoundError(
        "%s: %s not found. fastgrad does not download datasets: get the file from %s (or "
        "the dataset's home page) and put it in %s" % (dataset, path, url,
                                                       os.path.dirname(path)))


class MNIST(_dataset._DownloadedDataset):
    """The MNIST handwritten digits, read from the four gzipped IDX files of
    http://yann.lecun.com/exdb/mnist in ``root``: ``train-images-idx3-ubyte.gz``,
    ``train-labels-idx1-ubyte.gz`` (``train=True``), ``t10k-images-idx3-ubyte.gz``,
    ``t10k-labels-idx1-ubyte.gz`` (``train=False``).

    A sample is ``(image, label)``: a ``(28, 28, 1)`` uint8 NDArray and a ``numpy.int32``
    (``mx.np`` arrays under ``npx.set_np()``), passed through ``transform(image, label)``
    when one is given.
    """

    _namespace = "mnist"
    _files = {True: ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
              False: ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}

    def __init__(self, root=None, train=True, transform=None):
        self._train = train
        super().__init__(root or _default_root(self._namespace), transform)

    def _path(self, name):
        path = os.path.join(self._root, name)
        if not os.path.exists(path) and os.path.exists(path[:-len(".gz")]):
            return path[:-len(".gz")]                   # the file, already unpacked
        if not os.path.exists(path):
            raise _missing(type(self).__name__, path,
                           MXNET_DATASET_URL + self._namespace + "/" + name)
        return path

    def _get_data(self):
        image_name, label_name = self._files[bool(self._train)]
        image_path, label_path = self._path(image_name), self._path(label_name)
        where = type(self).__name__
        labels = _read_idx(label_path, IDX_LABELS_MAGIC, 1, where).astype(_onp.int32)
        images = _read_idx(image_path, IDX_IMAGES_MAGIC, 3, where)
        if len(images) != len(labels):
            raise ValueError("%s: %s holds %d images but %s holds %d labels"
                             % (where, image_path, len(images), label_path, len(labels)))
        self._data = _as_array(images[:, :, :, None])
        self._label = _as_array(labels) if _np_arrays_requested() else labels


def _read_idx(path, magic, ndim, where):
    """The array in an IDX file, gzipped or not (the MNIST format: a big-endian magic
    number, the dimensions, then unsigned bytes)."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as stream:
            blob = stream.read()
    except (OSError, EOFError) as error:
        raise ValueError("%s: cannot read %s as a gzip file (%s)" % (where, path, error))
    header = 4 * (1 + ndim)
    if len(blob) < header or struct.unpack(">I", blob[:4])[0] != magic:
        raise ValueError("%s: %s is not an IDX file of %d dimension(s) (magic number %d "
                         "expected)" % (where, path, ndim, magic))
    shape = struct.unpack(">%dI" % ndim, blob[4:header])
    count = int(_onp.prod(shape))
    if len(blob) - header != count:
        raise ValueError("%s: %s is truncated or corrupt: its header announces shape %s "
                         "(%d bytes) but it holds %d" % (where, path, shape, count,
                                                         len(blob) - header))
    return _onp.frombuffer(blob, _onp.uint8, offset=header).reshape(shape)


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST, a drop-in replacement for MNIST with the same four file
    names and format (https://github.com/zalandoresearch/fashion-mnist)."""

    _namespace = "fashion-mnist"


class CIFAR10(_dataset._DownloadedDataset):
    """CIFAR-10, read from the binary version's files in ``root``
    (https://www.cs.toronto.edu/~kriz/cifar.html): ``data_batch_1.bin`` ...
    ``data_batch_5.bin`` (``train=True``) or ``test_batch.bin``. Files in the archive's
    folder ``cifar-10-batches-bin`` are found too, and a ``cifar-10-binary.tar.gz`` in
    ``root`` is unpacked when the files are missing.

    Each record is one label byte and 3072 pixel bytes (the red, green and blue planes of a
    32x32 image); a sample is ``(image, label)``: a ``(32, 32, 3)`` uint8 NDArray and a
    ``numpy.int32``.
    """

    _namespace = "cifar10"
    _archive = "cifar-10-binary.tar.gz"
    _folder = "cifar-10-batches-bin"
    _label_bytes = 1
    _train_files = ["data_batch_%d.bin" % i for i in range(1, 6)]
    _test_files = ["test_batch.bin"]

    def __init__(self, root=None, train=True, transform=None):
        self._train = train
        super().__init__(root or _default_root(self._namespace), transform)

    def _label_column(self):
        return 0

    def _find(self, name):
        for path in (os.path.join(self._root, name),
                     os.path.join(self._root, self._folder, name)):
            if os.path.exists(path):
                return path
        return None

    def _get_data(self):
        names = self._train_files if self._train else self._test_files
        archive = os.path.join(self._root, self._archive)
        if any(self._find(name) is None for name in names) and os.path.exists(archive):
            with tarfile.open(archive) as tar:
                tar.extractall(self._root, filter="data")
        images, labels = [], []
        for name in names:
            path = self._find(name)
            if path is None:
                raise _missing(type(self).__name__, os.path.join(self._root, name),
                               MXNET_DATASET_URL + self._namespace + "/" + self._archive
                               + " (unpacked)")
            batch_images, batch_labels = self._read_batch(path)
            images.append(batch_images)
            labels.append(batch_labels)
        images = _onp.concatenate(images)
        labels = _onp.concatenate(labels)
        self._data = _as_array(images)
        self._label = _as_array(labels) if _np_arrays_requested() else labels

    def _read_batch(self, path):
        record = self._label_bytes + CIFAR_IMAGE_BYTES
        with open(path, "rb") as stream:
            blob = stream.read()
        if len(blob) % record:
            raise ValueError("%s: %s is not a CIFAR binary file: its size %d is not a "
                             "multiple of the record size %d" % (type(self).__name__, path,
                                                                 len(blob), record))
        rows = _onp.frombuffer(blob, _onp.uint8).reshape(-1, record)
        images = rows[:, self._label_bytes:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        return images, rows[:, self._label_column()].astype(_onp.int32)


class CIFAR100(CIFAR10):
    """CIFAR-100 from its binary files ``train.bin`` / ``test.bin`` in ``root`` (or in the
    archive's folder ``cifar-100-binary``). Each record has two label bytes, the coarse
    (20 super-classes) then the fine (100 classes) label: ``fine_label`` chooses."""

    _namespace = "cifar100"
    _archive = "cifar-100-binary.tar.gz"
    _folder = "cifar-100-binary"
    _label_bytes = 2
    _train_files = ["train.bin"]
    _test_files = ["test.bin"]

    def __init__(self, root=None, fine_label=False, train=True, transform=None):
        self._fine_label = fine_label
        super().__init__(root, train, transform)

    def _label_column(self):
        return 1 if self._fine_label else 0


class ImageRecordDataset(_dataset.RecordFileDataset):
    """The images of a RecordIO file made by MXNet's ``im2rec`` or ``recordio.pack_img``:
    ``(image, label)`` samples, the image an ``(H, W, 3)`` uint8 NDArray (``flag=1``) or
    ``(H, W, 1)`` (``flag=0``), passed through ``transform(image, label)`` when given. PNG
    records are decoded by fastgrad; JPEG ones need Pillow or OpenCV."""

    def __init__(self, filename, flag=1, transform=None):
        super().__init__(filename)
        self._flag = flag
        self._transform = transform

    def __getitem__(self, idx):
        header, encoded = _recordio.unpack(super().__getitem__(idx))
        image = _as_array(_image_files.decode_image(bytes(encoded), self._flag,
                                                    "record %d of %s" % (idx, self.filename)))
        if self._transform is not None:
            return self._transform(image, header.label)
        return image, header.label


IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")


class _ImageFiles(_dataset.Dataset):
    """A list of ``(filename, label)`` pairs read as ``(image, label)`` samples."""

    def __init__(self, flag, transform):
        if flag not in (0, 1):
            raise ValueError("%s: flag must be 0 (grey) or 1 (colour), got %r"
                             % (type(self).__name__, flag))
        self._flag = flag
        self._transform = transform
        self.items = []

    def __getitem__(self, idx):
        filename, label = self.items[idx]
        image = _as_array(_image_files.read_image(filename, self._flag))
        if self._transform is not None:
            return self._transform(image, label)
        return image, label

    def __len__(self):
        return len(self.items)


class ImageFolderDataset(_ImageFiles):
    """The images of a folder with one subfolder per class::

        root/car/0001.jpg
        root/car/xxxa.png
        root/bus/123.jpg

    Classes are numbered in the sorted order of the subfolder names (``synsets``); files
    other than ``.jpg``, ``.jpeg`` and ``.png`` are skipped with a warning. A sample is
    ``(image, label)``: an ``(H, W, 3)`` uint8 NDArray (``flag=1``, RGB) or ``(H, W, 1)``
    (``flag=0``, grey), and an int. PNG files are decoded by fastgrad; JPEG needs Pillow or
    OpenCV.

    Attributes
    ----------
    synsets : list of str
        The class names; ``synsets[i]`` is the name of label ``i``.
    items : list of (str, int)
        Every image file and its label.
    """

    def __init__(self, root, flag=1, transform=None):
        super().__init__(flag, transform)
        self._root = os.path.expanduser(root)
        self._exts = list(IMAGE_EXTENSIONS)
        if not os.path.isdir(self._root):
            raise FileNotFoundError("ImageFolderDataset: %s is not a directory"
                                    % (self._root,))
        self.synsets = []
        for folder in sorted(os.listdir(self._root)):
            path = os.path.join(self._root, folder)
            if not os.path.isdir(path):
                warnings.warn("Ignoring %s, which is not a directory." % path, stacklevel=3)
                continue
            label = len(self.synsets)
            self.synsets.append(folder)
            for filename in sorted(os.listdir(path)):
                filename = os.path.join(path, filename)
                ext = os.path.splitext(filename)[1]
                if ext.lower() not in self._exts:
                    warnings.warn("Ignoring %s of type %s. Only support %s"
                                  % (filename, ext, ", ".join(self._exts)))
                    continue
                self.items.append((filename, label))


class ImageListDataset(_ImageFiles):
    """Images named by a list (MXNet 2's ``ImageListDataset``).

    ``imglist`` is either the name (in ``root``) of a ``.lst`` file whose tab-separated
    lines are ``index, label(s)..., path``, or a list of entries ``[label, path]`` or
    ``[label_1, ..., label_k, path]``. Paths are relative to ``root``. A sample is
    ``(image, label)`` with the label a float32 array of the entry's labels.
    """

    def __init__(self, root=".", imglist=None, flag=1, transform=None):
        super().__init__(flag, transform)
        self._root = os.path.expanduser(root)
        if isinstance(imglist, str):
            listing = os.path.join(self._root, imglist)
            with open(listing, "rt") as stream:
                for number, line in enumerate(stream, 1):
                    fields = line.rstrip("\n").split("\t")
                    if not line.strip():
                        continue
                    if len(fields) < 3:
                        raise ValueError("ImageListDataset: line %d of %s has %d field(s); "
                                         "expected index, label(s) and path separated by "
                                         "tabs" % (number, listing, len(fields)))
                    self.items.append((os.path.join(self._root, fields[-1]),
                                       _as_array(_onp.array(fields[1:-1], _onp.float32))))
        elif isinstance(imglist, (list, tuple)):
            for entry in imglist:
                if len(entry) < 2 or not isinstance(entry[-1], str):
                    raise ValueError("ImageListDataset: each entry must be [label(s)..., "
                                     "path], got %r" % (entry,))
                labels = entry[:-1] if len(entry) > 2 else entry[0]
                labels = _onp.atleast_1d(_onp.asarray(labels, _onp.float32))
                self.items.append((os.path.join(self._root, entry[-1]), _as_array(labels)))
        else:
            raise ValueError("ImageListDataset: imglist must be a file name or a list of "
                             "entries, given %s" % type(imglist).__name__)
