"""gluon.data.vision: MNIST/Fashion-MNIST/CIFAR readers on tiny files written here in the
published formats, image folders and lists, and the image transforms."""

import gzip
import os
import struct

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import gluon
from fastgrad import numpy_extension as npx
from fastgrad.gluon.data.vision import _image_files

vision = gluon.data.vision


# ---------------------------------------------------------------- file writers (the formats)

def write_idx(path, array, gz=True):
    """An IDX file (http://yann.lecun.com/exdb/mnist): magic 0x0000 08 <ndim>, big-endian
    uint32 dimensions, then the unsigned bytes."""
    array = onp.asarray(array, onp.uint8)
    blob = struct.pack(">I", 0x0800 + array.ndim) + struct.pack(">%dI" % array.ndim,
                                                                 *array.shape)
    blob += array.tobytes()
    with (gzip.open if gz else open)(str(path), "wb") as stream:
        stream.write(blob)


def make_mnist(root, n_train=5, n_test=3, seed=0):
    rng = onp.random.RandomState(seed)
    made = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.randint(0, 256, size=(n, 28, 28)).astype(onp.uint8)
        labels = rng.randint(0, 10, size=n).astype(onp.uint8)
        write_idx(os.path.join(root, "%s-images-idx3-ubyte.gz" % prefix), images)
        write_idx(os.path.join(root, "%s-labels-idx1-ubyte.gz" % prefix), labels)
        made[prefix] = images, labels
    return made


def cifar_records(images, *label_columns):
    """CIFAR binary records: label byte(s), then the R, G, B planes of a 32x32 image."""
    planes = onp.asarray(images, onp.uint8).transpose(0, 3, 1, 2).reshape(len(images), -1)
    labels = onp.stack(label_columns, axis=1).astype(onp.uint8)
    return onp.concatenate([labels, planes], axis=1).tobytes()


# ---------------------------------------------------------------- MNIST

@pytest.mark.parametrize("cls", [vision.MNIST, vision.FashionMNIST])
def test_mnist_reads_idx_files(tmp_path, cls):
    made = make_mnist(str(tmp_path))
    train = cls(root=str(tmp_path))
    test = cls(root=str(tmp_path), train=False)
    assert len(train) == 5 and len(test) == 3
    image, label = train[2]
    assert isinstance(image, mx.nd.NDArray) and image.shape == (28, 28, 1)
    assert image.dtype == onp.uint8
    onp.testing.assert_array_equal(image.asnumpy()[:, :, 0], made["train"][0][2])
    assert type(label) is onp.int32 and label == made["train"][1][2]
    onp.testing.assert_array_equal(test[1][0].asnumpy()[:, :, 0], made["t10k"][0][1])


def test_mnist_transform_and_loader(tmp_path):
    made = make_mnist(str(tmp_path), n_train=6)
    train = vision.MNIST(root=str(tmp_path),
                         transform=lambda x, y: (x.astype("float32") / 255, y))
    loader = gluon.data.DataLoader(train, batch_size=4)
    x, y = next(iter(loader))
    assert x.shape == (4, 28, 28, 1) and x.dtype == onp.float32
    onp.testing.assert_allclose(x.asnumpy()[1, :, :, 0], made["train"][0][1] / 255.0, rtol=1e-6)
    assert y.dtype == onp.int32 and y.asnumpy().tolist() == made["train"][1][:4].tolist()


def test_mnist_under_set_np_gives_np_arrays(tmp_path):
    make_mnist(str(tmp_path))
    npx.set_np()
    try:
        image, label = vision.MNIST(root=str(tmp_path))[0]
    finally:
        npx.reset_np()
    assert type(image) is mx.np.ndarray and type(label) is mx.np.ndarray


def test_mnist_missing_file_names_file_and_source(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        vision.MNIST(root=str(tmp_path))
    message = str(info.value)
    assert os.path.join(str(tmp_path), "train-images-idx3-ubyte.gz") in message
    assert "gluon/dataset/mnist/train-images-idx3-ubyte.gz" in message
    assert "does not download" in message
    with pytest.raises(FileNotFoundError, match="fashion-mnist/t10k-images"):
        vision.FashionMNIST(root=str(tmp_path), train=False)


def test_mnist_unpacked_files_are_read(tmp_path):
    images = onp.arange(2 * 28 * 28).reshape(2, 28, 28) % 256
    write_idx(tmp_path / "train-images-idx3-ubyte", images, gz=False)
    write_idx(tmp_path / "train-labels-idx1-ubyte", [3, 4], gz=False)
    dataset = vision.MNIST(root=str(tmp_path))
    assert dataset[1][1] == 4
    onp.testing.assert_array_equal(dataset[1][0].asnumpy()[:, :, 0], images[1])


def test_mnist_corrupt_files(tmp_path):
    make_mnist(str(tmp_path))
    path = tmp_path / "train-images-idx3-ubyte.gz"
    with gzip.open(str(path), "rb") as stream:
        blob = stream.read()
    with gzip.open(str(path), "wb") as stream:
        stream.write(blob[:-10])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        vision.MNIST(root=str(tmp_path))
    write_idx(path, onp.zeros((5, 28)))                       # two dimensions, not three
    with pytest.raises(ValueError, match="not an IDX file"):
        vision.MNIST(root=str(tmp_path))
    write_idx(path, onp.zeros((4, 28, 28)))                   # 4 images, 5 labels
    with pytest.raises(ValueError, match="4 images.*5 labels"):
        vision.MNIST(root=str(tmp_path))
    path.write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="gzip"):
        vision.MNIST(root=str(tmp_path))


# ---------------------------------------------------------------- CIFAR

def test_cifar10_reads_binary_batches(tmp_path):
    rng = onp.random.RandomState(0)
    images = rng.randint(0, 256, size=(10, 32, 32, 3))
    labels = rng.randint(0, 10, size=10)
    for i in range(5):
        (tmp_path / ("data_batch_%d.bin" % (i + 1))).write_bytes(
            cifar_records(images[2 * i:2 * i + 2], labels[2 * i:2 * i + 2]))
    (tmp_path / "test_batch.bin").write_bytes(cifar_records(images[:3], labels[:3]))
    train = vision.CIFAR10(root=str(tmp_path))
    assert len(train) == 10 and len(vision.CIFAR10(root=str(tmp_path), train=False)) == 3
    image, label = train[7]
    assert isinstance(image, mx.nd.NDArray) and image.shape == (32, 32, 3)
    assert image.dtype == onp.uint8
    onp.testing.assert_array_equal(image.asnumpy(), images[7])
    assert type(label) is onp.int32 and label == labels[7]


def test_cifar10_archive_folder_layout_and_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"data_batch_1\.bin.*cifar-10-binary\.tar\.gz"):
        vision.CIFAR10(root=str(tmp_path))
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    image = onp.zeros((1, 32, 32, 3), onp.uint8)
    image[0, 0, 1] = (10, 20, 30)                 # pixel (0, 1) has R=10, G=20, B=30
    (folder / "test_batch.bin").write_bytes(cifar_records(image, [9]))
    test = vision.CIFAR10(root=str(tmp_path), train=False)
    assert test[0][0].asnumpy()[0, 1].tolist() == [10, 20, 30] and test[0][1] == 9
    (folder / "test_batch.bin").write_bytes(b"\0" * 3000)
    with pytest.raises(ValueError, match="not a CIFAR binary file"):
        vision.CIFAR10(root=str(tmp_path), train=False)


def test_cifar100_coarse_and_fine_labels(tmp_path):
    images = onp.random.RandomState(1).randint(0, 256, size=(4, 32, 32, 3))
    coarse, fine = onp.array([1, 2, 3, 4]), onp.array([50, 60, 70, 80])
    (tmp_path / "train.bin").write_bytes(cifar_records(images, coarse, fine))
    (tmp_path / "test.bin").write_bytes(cifar_records(images[:1], coarse[:1], fine[:1]))
    assert [int(vision.CIFAR100(root=str(tmp_path))[i][1]) for i in range(4)] == [1, 2, 3, 4]
    fine_set = vision.CIFAR100(root=str(tmp_path), fine_label=True)
    assert [int(fine_set[i][1]) for i in range(4)] == [50, 60, 70, 80]
    onp.testing.assert_array_equal(fine_set[2][0].asnumpy(), images[2])
    assert len(vision.CIFAR100(root=str(tmp_path), train=False)) == 1


# ---------------------------------------------------------------- image files

def _png_with_filters(path, pixels, filters):
    """A PNG whose rows use the given filter types (1 Sub, 2 Up, 3 Average, 4 Paeth), encoded
    here from the PNG specification, to check the decoder's unfiltering."""
    import zlib
    pixels = onp.asarray(pixels, onp.uint8)
    height, width, channels = pixels.shape
    bpp = channels
    raw = pixels.reshape(height, width * channels).astype(onp.int64)
    lines = []
    for y in range(height):
        kind = filters[y % len(filters)]
        prior = raw[y - 1] if y else onp.zeros(width * channels, onp.int64)
        row = raw[y]
        left = onp.concatenate([onp.zeros(bpp, onp.int64), row[:-bpp]])
        upper_left = onp.concatenate([onp.zeros(bpp, onp.int64), prior[:-bpp]])
        if kind == 0:
            predicted = 0
        elif kind == 1:
            predicted = left
        elif kind == 2:
            predicted = prior
        elif kind == 3:
            predicted = (left + prior) // 2
        else:
            p = left + prior - upper_left
            pa, pb, pc = abs(p - left), abs(p - prior), abs(p - upper_left)
            predicted = onp.where((pa <= pb) & (pa <= pc), left,
                                  onp.where(pb <= pc, prior, upper_left))
        lines.append(bytes([kind]) + ((row - predicted) % 256).astype(onp.uint8).tobytes())
    colour = {1: 0, 3: 2, 4: 6}[channels]

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    path.write_bytes(_image_files.PNG_SIGNATURE
                     + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"".join(lines))) + chunk(b"IEND", b""))


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_png_decoder_every_filter(tmp_path, channels):
    pixels = onp.random.RandomState(channels).randint(0, 256, size=(7, 5, channels))
    path = tmp_path / "img.png"
    _png_with_filters(path, pixels, [0, 1, 2, 3, 4])
    colour = _image_files.read_image(str(path), 1)
    expected = pixels[:, :, :3] if channels > 1 else onp.repeat(pixels, 3, axis=2)
    onp.testing.assert_array_equal(colour, expected)
    grey = _image_files.read_image(str(path), 0)
    assert grey.shape == (7, 5, 1)
    if channels == 1:
        onp.testing.assert_array_equal(grey[:, :, 0], pixels[:, :, 0])
    else:
        # libpng's fixed-point weights, truncated (the bytes MXNet 1.9.1 reads)
        rgb = pixels[:, :, :3].astype(onp.int64)
        luma = (rgb[:, :, 0] * 9797 + rgb[:, :, 1] * 19234 + rgb[:, :, 2] * 3737) >> 15
        onp.testing.assert_array_equal(grey[:, :, 0], luma)


def test_png_decoder_errors(tmp_path):
    path = tmp_path / "bad.png"
    _image_files.write_png(str(path), onp.zeros((3, 3, 3)))
    blob = path.read_bytes()
    path.write_bytes(blob[:40])
    with pytest.raises(ValueError, match="bad.png"):
        _image_files.read_image(str(path))
    jpeg = tmp_path / "x.jpg"
    jpeg.write_bytes(b"\xff\xd8\xff\xe0 not really")
    try:
        import PIL  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="x.jpg.*Pillow"):
            _image_files.read_image(str(jpeg))


def test_image_folder_dataset(tmp_path):
    rng = onp.random.RandomState(0)
    made = {}
    for cls in ("dog", "cat"):
        (tmp_path / cls).mkdir()
        for j in range(2):
            pixels = rng.randint(0, 256, size=(4, 6, 3))
            _image_files.write_png(str(tmp_path / cls / ("%d.png" % j)), pixels)
            made[cls, j] = pixels
    (tmp_path / "cat" / "notes.txt").write_text("skip me")
    (tmp_path / "README").write_text("not a class")
    with pytest.warns(UserWarning, match="Ignoring"):
        dataset = vision.ImageFolderDataset(str(tmp_path))
    assert dataset.synsets == ["cat", "dog"] and len(dataset) == 4
    image, label = dataset[3]
    assert isinstance(image, mx.nd.NDArray) and image.shape == (4, 6, 3)
    assert image.dtype == onp.uint8 and label == 1
    onp.testing.assert_array_equal(image.asnumpy(), made["dog", 1])
    with pytest.warns(UserWarning):
        grey = vision.ImageFolderDataset(str(tmp_path), flag=0,
                                         transform=lambda x, y: (x.shape, y))
    assert grey[0] == ((4, 6, 1), 0)
    loader = gluon.data.DataLoader(dataset, batch_size=4, num_workers=2, timeout=30)
    x, y = next(iter(loader))
    assert x.shape == (4, 4, 6, 3) and y.asnumpy().tolist() == [0, 0, 1, 1]
    with pytest.raises(FileNotFoundError, match="not a directory"):
        vision.ImageFolderDataset(str(tmp_path / "nope"))


def test_image_list_dataset(tmp_path):
    pixels = onp.arange(2 * 3 * 3).reshape(2, 3, 3)
    _image_files.write_png(str(tmp_path / "a.png"), pixels)
    (tmp_path / "list.lst").write_text("0\t4\ta.png\n1\t1.5\t2\ta.png\n")
    from_file = vision.ImageListDataset(str(tmp_path), "list.lst")
    assert len(from_file) == 2
    image, label = from_file[1]
    onp.testing.assert_array_equal(image.asnumpy(), pixels)
    assert label.asnumpy().tolist() == [1.5, 2.0]
    from_list = vision.ImageListDataset(str(tmp_path), [[7, "a.png"], [1, 2, "a.png"]])
    assert from_list[0][1].asnumpy().tolist() == [7.0]
    assert from_list[1][1].asnumpy().tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="imglist"):
        vision.ImageListDataset(str(tmp_path), None)
    (tmp_path / "bad.lst").write_text("0 4 a.png\n")
    with pytest.raises(ValueError, match="line 1"):
        vision.ImageListDataset(str(tmp_path), "bad.lst")


def test_image_record_dataset_says_recordio_is_missing():
    with pytest.raises(NotImplementedError, match="RecordIO"):
        vision.ImageRecordDataset("train.rec")
