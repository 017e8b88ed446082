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
from fastgrad._api import _image, _image_files

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




# ---------------------------------------------------------------- transforms

transforms = vision.transforms
_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "fixtures")


def _load_fixture_module(name):
    """The fixture script ``tests/fixtures/<name>.py`` (its tables; it imports MXNet only
    when run)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name + "_fixture",
                                                  os.path.join(_FIXTURES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_fixture = _load_fixture_module("gluon_data_transforms")
_expected = onp.load(os.path.join(_FIXTURES, "gluon_data_transforms.npz"))

# interpolations computed in fixed point by OpenCV, in float64 here: within 1 grey level
_TOLERANCE = {"resize_down_2": 1, "resize_up_2": 1, "resize_down_3": 1, "resize_down_4": 1,
              "resize_up_4": 1}


@pytest.mark.parametrize("name", sorted(_fixture.cases(transforms)))
def test_transform_matches_mxnet(name):
    source, make, dtype = _fixture.cases(transforms)[name]
    out = make()(mx.nd.array(_expected[source], dtype=dtype))
    expected = _expected[name]
    assert isinstance(out, mx.nd.NDArray)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    tolerance = _TOLERANCE.get(name, 0)
    if expected.dtype.kind == "f":
        onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-5, atol=1e-4)
    else:
        diff = onp.abs(out.asnumpy().astype(onp.int64) - expected.astype(onp.int64))
        assert diff.max() <= tolerance


# bicubic (OpenCV code 2, the default of mx.image's crops) is fixed point in OpenCV
_IMAGE_TOLERANCE = {"image.imresize_2": 1, "image.imresize_4": 1, "image.resize_short": 1,
                    "image.resize_short_auto": 1, "image.center_crop": 1,
                    "image.random_size_crop": 1}


@pytest.mark.parametrize("name", sorted(_fixture.image_cases()))
def test_image_functions_match_mxnet(name):
    import random
    source, function = _fixture.image_cases()[name]
    random.seed(_fixture.RANDOM_SEED)
    x = mx.nd.array(_expected[source], dtype=str(_expected[source].dtype))
    out = function(mx, x)
    expected = _expected[name]
    assert isinstance(out, mx.nd.NDArray)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    if expected.dtype.kind == "f":
        onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-5, atol=1e-5)
    else:
        diff = onp.abs(out.asnumpy().astype(onp.int64) - expected.astype(onp.int64))
        assert diff.max() <= _IMAGE_TOLERANCE.get(name, 0)


def test_image_read_and_decode_png(tmp_path):
    pixels = onp.random.RandomState(4).randint(0, 256, size=(5, 6, 3))
    path = str(tmp_path / "x.png")
    _image_files.write_png(path, pixels)
    rgb = mx.image.imread(path)
    assert isinstance(rgb, mx.nd.NDArray) and rgb.dtype == onp.uint8
    onp.testing.assert_array_equal(rgb.asnumpy(), pixels)
    onp.testing.assert_array_equal(mx.image.imread(path, to_rgb=False).asnumpy(),
                                   pixels[:, :, ::-1])
    assert mx.image.imread(path, flag=0).shape == (5, 6, 1)
    with open(path, "rb") as stream:
        blob = stream.read()
    onp.testing.assert_array_equal(mx.image.imdecode(blob).asnumpy(), pixels)


def test_nd_image_flips_and_errors():
    # odd widths and heights too (MXNet 1.9.1 leaves the middle column or row of an
    # out-of-place flip unwritten)
    image = onp.random.RandomState(5).randint(0, 256, size=(5, 7, 3)).astype(onp.uint8)
    x = mx.nd.array(image, dtype="uint8")
    onp.testing.assert_array_equal(mx.nd.image.flip_left_right(x).asnumpy(), image[:, ::-1])
    onp.testing.assert_array_equal(mx.nd.image.flip_top_bottom(x).asnumpy(), image[::-1])
    outcomes = {bool((mx.nd.image.random_flip_left_right(x).asnumpy() == image).all())
                for _ in range(30)}
    assert outcomes == {True, False}
    with pytest.raises(mx.base.MXNetError, match="nd.image.to_tensor expects an image"):
        mx.nd.image.to_tensor(mx.nd.ones((2, 3, 4, 5, 6)))
    with pytest.raises(mx.base.MXNetError, match="nd.image.crop: the box"):
        mx.nd.image.crop(x, 5, 0, 4, 4)
    with pytest.raises(mx.base.MXNetError, match="interpolation 7"):
        mx.image.imresize(x, 3, 3, interp=7)
    with pytest.raises(TypeError, match="float32"):
        mx.image.imrotate(x, 10.0)


@pytest.mark.parametrize("name", sorted(_fixture.crops(transforms)))
def test_random_crops_follow_python_random_as_mxnet(name):
    import random
    source, make, seed, repeats = _fixture.crops(transforms)[name]
    random.seed(seed)
    transform = make()
    x = mx.nd.array(_expected[source], dtype="uint8")
    got = onp.stack([transform(x).asnumpy() for _ in range(repeats)])
    onp.testing.assert_array_equal(got, _expected[name])


def test_adjust_lighting_matches_mxnet():
    onp.testing.assert_array_equal(
        _image.adjust_lighting(_expected["img"], _fixture.LIGHTING_ALPHA),
        _expected["adjust_lighting"])


def test_transforms_keep_array_type_and_accept_numpy():
    image = onp.arange(4 * 6 * 3, dtype=onp.uint8).reshape(4, 6, 3)
    out = transforms.ToTensor()(mx.np.array(image, dtype="uint8"))
    assert type(out) is mx.np.ndarray and out.shape == (3, 4, 6)
    onp.testing.assert_allclose(out.asnumpy(), image.transpose(2, 0, 1) / 255.0, rtol=1e-6)
    assert type(transforms.Resize(3)(image)) is mx.nd.NDArray


def test_flips_and_brightness_closed_forms():
    image = onp.random.RandomState(2).randint(0, 256, size=(5, 7, 3)).astype(onp.uint8)
    x = mx.nd.array(image, dtype="uint8")
    seen = set()
    for _ in range(30):
        lr = transforms.RandomFlipLeftRight()(x).asnumpy()
        tb = transforms.RandomFlipTopBottom()(x).asnumpy()
        assert (lr == image).all() or (lr == image[:, ::-1]).all()
        assert (tb == image).all() or (tb == image[::-1]).all()
        seen.add((lr == image).all())
    assert seen == {True, False}
    # MXNet's saturate_cast for uint8: clip to [0, 255], truncate
    onp.testing.assert_array_equal(_image.adjust_brightness(image, 1.5),
                                   onp.minimum(image * onp.float32(1.5), 255).astype(onp.uint8))
    grey_mean = (image.astype(onp.float32) @ onp.array([0.299, 0.587, 0.114], onp.float32)).mean()
    contrast = image * onp.float32(0.5) + onp.float32(0.5) * grey_mean
    onp.testing.assert_array_equal(_image.adjust_contrast(image, 0.5), contrast.astype(onp.uint8))


def test_saturation_blends_with_the_full_grey_value():
    image = onp.array([[[200, 100, 50]]], onp.uint8)
    grey = 0.299 * 200 + 0.587 * 100 + 0.114 * 50
    assert _image.adjust_saturation(image, 0.0)[0, 0].tolist() == [int(grey)] * 3
    onp.testing.assert_array_equal(_image.adjust_saturation(image, 1.0), image)


def test_random_colour_transforms_stay_in_range():
    image = mx.nd.array(onp.random.RandomState(3).randint(0, 256, size=(6, 5, 3)),
                        dtype="uint8")
    for transform in (transforms.RandomBrightness(0.5), transforms.RandomContrast(0.5),
                      transforms.RandomSaturation(0.5), transforms.RandomHue(0.2),
                      transforms.RandomColorJitter(0.3, 0.3, 0.3, 0.1),
                      transforms.RandomLighting(0.2)):
        out = transform(image)
        assert out.shape == (6, 5, 3) and out.dtype == onp.uint8
    hue = transforms.RandomHue(0.0)(image)          # a rotation by exactly one turn
    assert onp.abs(hue.asnumpy().astype(int) - image.asnumpy()).max() <= 1


def test_compose_groups_hybrid_transforms_without_tracing_them():
    pipeline = transforms.Compose([transforms.Resize(8), transforms.CenterCrop(6),
                                   transforms.ToTensor(), transforms.Normalize(0.5, 0.5)])
    assert len(pipeline) == 3 and isinstance(pipeline[2], gluon.nn.HybridSequential)
    pipeline.hybridize()
    image = mx.nd.array(onp.full((10, 12, 3), 255), dtype="uint8")
    out = pipeline(image)
    assert out.shape == (3, 6, 6)
    onp.testing.assert_allclose(out.asnumpy(), 1.0)      # (1 - 0.5) / 0.5
    traced = gluon.nn.HybridSequential()
    traced.add(transforms.ToTensor())
    traced.hybridize()
    with pytest.raises(Exception, match="ToTensor.*cannot be traced"):
        traced(image)
    with pytest.raises(ValueError, match="HybridBlock"):
        transforms.HybridCompose([transforms.CenterCrop(2)])
    assert transforms.HybridCompose([transforms.ToTensor()])(image).shape == (3, 10, 12)


def test_random_apply_and_random_crop():
    import random
    image = mx.nd.array(onp.arange(6 * 6 * 1).reshape(6, 6, 1), dtype="uint8")
    never = transforms.RandomApply(transforms.Cast("float32"), p=0.0)
    assert never(image).dtype == onp.uint8
    always = transforms.RandomApply(transforms.Cast("float32"), p=1.0)
    assert always(image).dtype == onp.float32
    random.seed(0)
    crop = transforms.RandomCrop(4, pad=1)(image).asnumpy()
    padded = onp.pad(image.asnumpy(), ((1, 1), (1, 1), (0, 0)))
    windows = [padded[y:y + 4, x:x + 4] for y in range(5) for x in range(5)]
    assert any((crop == w).all() for w in windows)


def test_transform_bad_input():
    image = mx.nd.ones((4, 5, 3), dtype="uint8")
    with pytest.raises(ValueError, match=r"Normalize: mean has 2 values.*3 channels"):
        transforms.Normalize((0.1, 0.2), 1.0)(transforms.ToTensor()(image))
    with pytest.raises(ValueError, match=r"ToTensor expects an image of shape"):
        transforms.ToTensor()(mx.nd.ones((5,)))
    with pytest.raises(ValueError, match="interpolation"):
        transforms.Resize(3, interpolation=7)(image)
    with pytest.raises(ValueError, match="not inside"):
        transforms.CropResize(3, 0, 4, 4)(image)
    with pytest.raises(TypeError, match="takes an image array"):
        transforms.ToTensor()([1, 2, 3])
    with pytest.raises(ValueError, match="size"):
        transforms.CenterCrop((1, 2, 3))


def test_transform_first_with_dataloader_workers(tmp_path):
    make_mnist(str(tmp_path), n_train=4)
    train = vision.MNIST(root=str(tmp_path)).transform_first(
        transforms.Compose([transforms.ToTensor(), transforms.Normalize(0.13, 0.31)]))
    loader = gluon.data.DataLoader(train, batch_size=2, num_workers=2, timeout=30)
    x, y = next(iter(loader))
    assert x.shape == (2, 1, 28, 28) and x.dtype == onp.float32 and y.shape == (2,)


@pytest.mark.parametrize("degrees, row, col", [(90., 0, 1), (180., 1, 0), (270., 2, 1),
                                               (360., 1, 2)])
def test_rotate_quarter_turns(degrees, row, col):
    # the pixel at (1, 2) of a 3x3 image moves as MXNet 1.9.1's test_rotate expects
    image = onp.zeros((1, 3, 3), onp.float32)
    image[0, 1, 2] = 1
    expected = onp.zeros((1, 3, 3), onp.float32)
    expected[0, row, col] = 1
    out = transforms.Rotate(degrees)(mx.nd.array(image))
    onp.testing.assert_allclose(out.asnumpy(), expected, atol=1e-6)


def test_rotate_shapes_zoom_and_errors():
    image = mx.nd.ones((3, 6, 10))
    assert transforms.Rotate(10.)(image).shape == (3, 6, 10)
    batch = mx.nd.ones((2, 3, 6, 10))
    assert transforms.RandomRotation([-10., 10.])(batch).shape == (2, 3, 6, 10)
    # without zoom the corners come from outside the image: 0; zoom_in keeps them inside
    # (nearly: MXNet's zoom uses H and W where its grid uses H - 1 and W - 1)
    assert transforms.Rotate(30.)(image).asnumpy()[0, 0, 0] == 0
    assert transforms.Rotate(30., zoom_in=True)(image).asnumpy().min() > 0.9
    with pytest.raises(TypeError, match="float32"):
        transforms.Rotate(10.)(mx.nd.ones((3, 4, 4), dtype="uint8"))
    with pytest.raises(ValueError, match="between 0 and 1"):
        transforms.RandomRotation([-10, 10.], rotate_with_proba=1.1)
    data = mx.nd.array(onp.random.RandomState(0).normal(size=(3, 5, 6)).astype(onp.float32))
    same = transforms.RandomRotation([-100., 100.], rotate_with_proba=0.0)(data)
    onp.testing.assert_array_equal(same.asnumpy(), data.asnumpy())


def test_recordio_reads_mxnet_files_and_writes_the_same_bytes(tmp_path):
    fixture = _load_fixture_module("gluon_data_recordio")
    rec = os.path.join(_FIXTURES, "gluon_data_recordio.rec")
    idx = os.path.join(_FIXTURES, "gluon_data_recordio.idx")
    reader = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
    assert reader.keys == [key for key, _, _ in fixture.records()]
    for key, label, payload in reversed(fixture.records()):      # random access
        header, data = mx.recordio.unpack(reader.read_idx(key))
        assert data == payload and header.id == key
        onp.testing.assert_allclose(header.label, label)
    sequential = mx.recordio.MXRecordIO(rec, "r")
    assert [mx.recordio.unpack(sequential.read())[1] for _ in fixture.records()] \
        == [payload for _, _, payload in fixture.records()]
    assert sequential.read() is None
    # fastgrad writes MXNet's bytes, magic numbers inside payloads included
    out_rec, out_idx = str(tmp_path / "out.rec"), str(tmp_path / "out.idx")
    writer = mx.recordio.MXIndexedRecordIO(out_idx, out_rec, "w")
    for key, label, payload in fixture.records():
        writer.write_idx(key, mx.recordio.pack(mx.recordio.IRHeader(0, label, key, 0),
                                               payload))
    writer.close()
    with open(out_rec, "rb") as mine, open(rec, "rb") as theirs:
        assert mine.read() == theirs.read()
    with open(out_idx) as mine, open(idx) as theirs:
        assert mine.read() == theirs.read()
    dataset = gluon.data.RecordFileDataset(rec)
    assert len(dataset) == 7 and mx.recordio.unpack(dataset[3])[1] == fixture.records()[3][2]


def test_recordio_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing\.rec not found.*\.idx index"):
        gluon.data.RecordFileDataset(str(tmp_path / "missing.rec"))
    bad = tmp_path / "bad.rec"
    bad.write_bytes(b"\0" * 16)
    with pytest.raises(ValueError, match="magic number"):
        mx.recordio.MXRecordIO(str(bad), "r").read()
    fixture_rec = os.path.join(_FIXTURES, "gluon_data_recordio.rec")
    with open(fixture_rec, "rb") as stream:
        (tmp_path / "cut.rec").write_bytes(stream.read()[:20])
    with pytest.raises(ValueError, match="truncated"):
        reader = mx.recordio.MXRecordIO(str(tmp_path / "cut.rec"), "r")
        reader.read()
        reader.read()


def test_image_record_dataset_with_workers(tmp_path):
    rec, idx = str(tmp_path / "images.rec"), str(tmp_path / "images.idx")
    images = [onp.random.RandomState(i).randint(0, 256, size=(4, 5, 3)).astype(onp.uint8)
              for i in range(4)]
    writer = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    for i, image in enumerate(images):     # pack_img takes BGR, as MXNet's (OpenCV's order)
        header = mx.recordio.IRHeader(0, float(i % 2), i, 0)
        writer.write_idx(i, mx.recordio.pack_img(header, image[:, :, ::-1]))
    writer.close()
    _, bgr = mx.recordio.unpack_img(mx.recordio.MXIndexedRecordIO(idx, rec, "r").read_idx(1))
    onp.testing.assert_array_equal(bgr, images[1][:, :, ::-1])
    dataset = vision.ImageRecordDataset(rec)
    image, label = dataset[2]
    assert isinstance(image, mx.nd.NDArray) and label == 0.0
    onp.testing.assert_array_equal(image.asnumpy(), images[2])
    assert vision.ImageRecordDataset(rec, flag=0)[0][0].shape == (4, 5, 1)
    loader = gluon.data.DataLoader(dataset.transform_first(transforms.ToTensor()), 2,
                                   num_workers=2, timeout=30)
    batches = [(x.shape, y.asnumpy().tolist()) for x, y in loader]
    assert batches == [((2, 3, 4, 5), [0.0, 1.0]), ((2, 3, 4, 5), [0.0, 1.0])]


def test_nd_image_crop_and_normalize_are_differentiable():
    # MXNet has gradients for these two operators (its test_crop_resize checks crop's)
    x = mx.nd.array(onp.arange(60, dtype=onp.float64).reshape(5, 4, 3), dtype="float64")
    x.attach_grad()
    with mx.autograd.record():
        box = mx.nd.image.crop(x, 1, 2, 2, 3)
        (box * box).sum().backward()
    expected = onp.zeros((5, 4, 3))
    expected[2:5, 1:3] = 2 * x.asnumpy()[2:5, 1:3]             # d(sum b^2)/db = 2b
    onp.testing.assert_array_equal(x.grad.asnumpy(), expected)
    t = mx.nd.array(onp.ones((3, 2, 2)), dtype="float64")
    t.attach_grad()
    with mx.autograd.record():
        mx.nd.image.normalize(t, (0.1, 0.2, 0.3), (2.0, 4.0, 8.0)).sum().backward()
    onp.testing.assert_allclose(t.grad.asnumpy()[:, 0, 0], [0.5, 0.25, 0.125])


def test_normalize_transform_is_differentiable():
    t = mx.nd.array(onp.ones((2, 3, 2, 2)), dtype="float64")
    t.attach_grad()
    with mx.autograd.record():
        transforms.Normalize(0.5, (2.0, 4.0, 8.0))(t).sum().backward()
    onp.testing.assert_allclose(t.grad.asnumpy()[0, :, 1, 1], [0.5, 0.25, 0.125])
