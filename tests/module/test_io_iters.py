"""mx.io: NDArrayIter, ResizeIter, PrefetchingIter, CSVIter, MNISTIter.

The expected batches are what MXNet 1.9.1 gives for the same calls (run on the oracle venv;
the NDArrayIter and ResizeIter sequences were compared to it element for element, the
shuffled order too, from the same NumPy seed)."""

import gzip
import struct

import numpy as np
import pytest

import fastgrad as mx


def epochs(it, n=3):
    out = []
    for _ in range(n):
        out.append([(b.data[0].asnumpy().astype(int).tolist(), b.pad) for b in it])
        it.reset()
    return out


def five(batch_size, how):
    x = mx.nd.array(np.arange(5))
    return mx.io.NDArrayIter(x, x, batch_size=batch_size, last_batch_handle=how)


def test_ndarrayiter_pad_repeats_the_start_and_reports_it():
    assert epochs(five(2, "pad")) == [[([0, 1], 0), ([2, 3], 0), ([4, 0], 1)]] * 3


def test_ndarrayiter_discard_drops_the_short_batch():
    assert epochs(five(2, "discard")) == [[([0, 1], 0), ([2, 3], 0)]] * 3


def test_ndarrayiter_roll_over_carries_the_tail_into_the_next_epoch():
    assert epochs(five(2, "roll_over")) == [
        [([0, 1], 0), ([2, 3], 0)], [([4, 0], 1), ([1, 2], 0), ([3, 4], 0)],
        [([0, 1], 0), ([2, 3], 0)]]
    assert epochs(five(3, "roll_over")) == [
        [([0, 1, 2], 0)], [([3, 4, 0], 2), ([1, 2, 3], 0)], [([4, 0, 1], 1), ([2, 3, 4], 0)]]


def test_ndarrayiter_pad_larger_than_the_data_tiles_it():
    assert epochs(five(12, "pad"), 1) == [[([0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1], 7)]]


def test_ndarrayiter_names_sorted_and_descriptions():
    it = mx.io.NDArrayIter({"b": np.zeros((4, 2)), "a": np.ones((4, 3))},
                           [np.zeros(4), np.ones(4)], batch_size=2)
    assert repr(it.provide_data) == ("[DataDesc[a,(2, 3),<class 'numpy.float32'>,NCHW], "
                                     "DataDesc[b,(2, 2),<class 'numpy.float32'>,NCHW]]")
    assert [d.name for d in it.provide_label] == ["_0_softmax_label", "_1_softmax_label"]
    batch = it.next()
    assert [a.shape for a in batch.data] == [(2, 3), (2, 2)]
    np.testing.assert_array_equal(batch.data[0].asnumpy(), np.ones((2, 3)))
    np.testing.assert_array_equal(batch.label[1].asnumpy(), np.ones(2))


def test_ndarrayiter_keeps_float64_given_as_ndarray_and_casts_numpy_to_float32():
    it = mx.io.NDArrayIter(mx.nd.array(np.arange(4.0), dtype="float64"), batch_size=2)
    assert it.next().data[0].dtype == np.float64
    assert it.provide_data[0].dtype is np.float64
    it = mx.io.NDArrayIter(np.arange(4.0), batch_size=2)
    assert it.next().data[0].dtype == np.float32


def test_ndarrayiter_shuffle_is_mxnets_permutation_of_data_and_label_together():
    np.random.seed(3)
    x = np.arange(5)
    it = mx.io.NDArrayIter(mx.nd.array(x), mx.nd.array(x * 10), batch_size=5, shuffle=True)
    batch = it.next()
    assert batch.data[0].asnumpy().tolist() == [3, 4, 1, 0, 2]      # MXNet 1.9.1, same seed
    np.testing.assert_array_equal(batch.label[0].asnumpy(), batch.data[0].asnumpy() * 10)
    it.reset()
    again = it.next().data[0].asnumpy()
    assert sorted(again.tolist()) == [0, 1, 2, 3, 4]


def test_ndarrayiter_layout_puts_the_batch_on_its_axis():
    x = np.arange(12).reshape(3, 4)          # 4 examples along axis 1
    it = mx.io.NDArrayIter(x, batch_size=2, layout="TN")
    assert it.provide_data[0].shape == (3, 2)
    np.testing.assert_array_equal(it.next().data[0].asnumpy(), x[:, :2])


def test_ndarrayiter_longer_label_is_cut_to_the_data_as_mxnet():
    it = mx.io.NDArrayIter(np.zeros((4, 2)), np.arange(8), batch_size=4)
    assert it.next().label[0].asnumpy().tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("kwargs, message", [
    (dict(last_batch_handle="keep"), "last_batch_handle must be 'pad', 'discard' or"),
    (dict(batch_size=0), "batch_size must be a positive int, got 0"),
    (dict(label=np.zeros(3)), "these have fewer: {'softmax_label': 3}"),
    (dict(layout="TC"), "layout 'TC' has no batch axis 'N'"),
])
def test_ndarrayiter_bad_arguments(kwargs, message):
    args = dict(data=np.zeros((4, 2)), batch_size=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("{", r"\{")):
        mx.io.NDArrayIter(**args)


def test_ndarrayiter_bad_types():
    with pytest.raises(TypeError, match="data must be an NDArray, a numpy.ndarray, a list"):
        mx.io.NDArrayIter(data=3.0)
    with pytest.raises(ValueError, match="data is None"):
        mx.io.NDArrayIter(data=None)


def test_ndarrayiter_at_its_end_raises_stop_iteration_until_reset():
    it = five(5, "pad")
    it.next()
    with pytest.raises(StopIteration):
        it.next()
    it.reset()
    assert it.next().pad == 0


def test_resize_iter_wraps_and_resets():
    # MXNet 1.9.1: [[0, 1], [2, 3], [4, 0], [0, 1], [2, 3]] twice; without reset_internal
    # the second epoch continues the inner iterator: [[4, 0], [0, 1]]
    it = mx.io.ResizeIter(mx.io.NDArrayIter(mx.nd.array(np.arange(5)), batch_size=2), 5)
    for _ in range(2):
        assert [b.data[0].asnumpy().astype(int).tolist() for b in it] == [
            [0, 1], [2, 3], [4, 0], [0, 1], [2, 3]]
        it.reset()
    it = mx.io.ResizeIter(mx.io.NDArrayIter(mx.nd.array(np.arange(5)), batch_size=2), 2,
                          reset_internal=False)
    assert [b.data[0].asnumpy().astype(int).tolist() for b in it] == [[0, 1], [2, 3]]
    it.reset()
    assert [b.data[0].asnumpy().astype(int).tolist() for b in it] == [[4, 0], [0, 1]]


def test_prefetching_iter_joins_renames_and_resets():
    a = mx.io.NDArrayIter({"data": np.arange(8).reshape(4, 2)}, np.arange(4), batch_size=2)
    b = mx.io.NDArrayIter({"data": -np.arange(12).reshape(4, 3)}, np.arange(4), batch_size=2)
    it = mx.io.PrefetchingIter([a, b], rename_data=[{"data": "a"}, {"data": "b"}])
    try:
        assert [d.name for d in it.provide_data] == ["a", "b"]
        assert it.batch_size == 2
        first = [[x.asnumpy().tolist() for x in batch.data] for batch in it]
        assert first == [[[[0, 1], [2, 3]], [[0, -1, -2], [-3, -4, -5]]],
                         [[[4, 5], [6, 7]], [[-6, -7, -8], [-9, -10, -11]]]]
        it.reset()
        assert [[x.asnumpy().tolist() for x in batch.data] for batch in it] == first
    finally:
        it.close()


def test_prefetching_iter_reports_the_inner_error_and_mismatched_lengths():
    class Broken(mx.io.DataIter):
        provide_data = [mx.io.DataDesc("data", (2, 1))]
        provide_label = []

        def next(self):
            raise KeyError("broken source")
    it = mx.io.PrefetchingIter(Broken())
    with pytest.raises(KeyError, match="broken source"):
        it.next()
    it.close()
    short = mx.io.NDArrayIter(np.zeros((2, 1)), batch_size=2)
    longer = mx.io.NDArrayIter(np.zeros((4, 1)), batch_size=2)
    it = mx.io.PrefetchingIter([short, longer])
    it.next()
    with pytest.raises(ValueError, match="different numbers of batches"):
        it.next()
    it.close()


@pytest.fixture
def csv_files(tmp_path):
    data = tmp_path / "d.csv"
    label = tmp_path / "l.csv"
    np.savetxt(data, np.arange(20).reshape(5, 4), delimiter=",")
    np.savetxt(label, np.arange(5), delimiter=",")
    return str(data), str(label)


def test_csv_iter_round_batch_order_is_mxnets(csv_files):
    data, label = csv_files
    it = mx.io.CSVIter(data_csv=data, data_shape=(4,), label_csv=label, batch_size=2)
    assert it.provide_data[0].shape == (2, 4) and it.provide_label[0].shape == (2,)
    seen = []
    for _ in range(3):
        seen.append([(b.label[0].asnumpy().astype(int).tolist(), b.pad) for b in it])
        it.reset()
    # MXNet 1.9.1: the padded examples of an epoch's last batch are skipped by the next one
    assert seen == [[([0, 1], 0), ([2, 3], 0), ([4, 0], 1)],
                    [([1, 2], 0), ([3, 4], 0)],
                    [([0, 1], 0), ([2, 3], 0), ([4, 0], 1)]]
    it.reset()
    batch = it.next()
    np.testing.assert_array_equal(batch.data[0].asnumpy(), [[0, 1, 2, 3], [4, 5, 6, 7]])
    assert it.getdata().shape == (2, 4)         # one array, as MXNet's C++ iterators
    it = mx.io.CSVIter(data_csv=data, data_shape=(4,), label_csv=label, batch_size=3)
    seen = []
    for _ in range(3):
        seen.append([(b.label[0].asnumpy().astype(int).tolist(), b.pad) for b in it])
        it.reset()
    assert seen == [[([0, 1, 2], 0), ([3, 4, 0], 1)],          # MXNet 1.9.1
                    [([1, 2, 3], 0), ([4, 0, 1], 2)],
                    [([2, 3, 4], 0)]]


def test_csv_iter_shapes_dtypes_and_errors(csv_files, tmp_path):
    data, _ = csv_files
    it = mx.io.CSVIter(data_csv=data, data_shape=(2, 2), batch_size=5, dtype="int32")
    batch = it.next()
    assert batch.data[0].dtype == np.int32 and batch.data[0].shape == (5, 2, 2)
    np.testing.assert_array_equal(batch.label[0].asnumpy(), np.zeros(5))
    with pytest.raises(ValueError, match=r"has 4 values but its shape \(3,\) needs 3"):
        mx.io.CSVIter(data_csv=data, data_shape=(3,), batch_size=2)
    with pytest.raises(FileNotFoundError, match="data_csv .*nope.csv"):
        mx.io.CSVIter(data_csv=str(tmp_path / "nope.csv"), data_shape=(4,))
    with pytest.raises(ValueError, match="dtype must be"):
        mx.io.CSVIter(data_csv=data, data_shape=(4,), dtype="float16")


def write_mnist(prefix, n, magic=2051, truncate=0, gz=False):
    images = (np.arange(n * 28 * 28) % 256).astype(np.uint8).reshape(n, 28, 28)
    labels = (np.arange(n) % 10).astype(np.uint8)
    blob = struct.pack(">iiii", magic, n, 28, 28) + images.tobytes()
    blob = blob[:len(blob) - truncate]
    opener = gzip.open if gz else open
    with opener(prefix + "-images", "wb") as f:
        f.write(blob)
    with open(prefix + "-labels", "wb") as f:
        f.write(struct.pack(">ii", 2049, n) + labels.tobytes())
    return images, labels


def test_mnist_iter_reads_scales_and_drops_the_short_batch(tmp_path):
    prefix = str(tmp_path / "mn")
    images, labels = write_mnist(prefix, 5)
    it = mx.io.MNISTIter(image=prefix + "-images", label=prefix + "-labels", batch_size=2,
                         shuffle=False)
    assert it.provide_data[0].shape == (2, 1, 28, 28)
    batches = list(it)
    assert len(batches) == 2                    # MXNet drops the fifth image too
    np.testing.assert_array_equal(batches[1].data[0].asnumpy(),
                                  images[2:4, None].astype(np.float32) / 256)
    np.testing.assert_array_equal(batches[1].label[0].asnumpy(), [2, 3])
    flat = mx.io.MNISTIter(image=prefix + "-images", label=prefix + "-labels", batch_size=2,
                           shuffle=False, flat=True)
    assert flat.next().data[0].shape == (2, 784)


def test_mnist_iter_shuffle_is_a_seeded_permutation(tmp_path):
    prefix = str(tmp_path / "mn")
    write_mnist(prefix, 6)

    def labels(seed):
        it = mx.io.MNISTIter(image=prefix + "-images", label=prefix + "-labels",
                             batch_size=6, shuffle=True, seed=seed)
        return it.next().label[0].asnumpy().tolist()
    assert labels(1) == labels(1)
    assert sorted(labels(1)) == [0, 1, 2, 3, 4, 5]


def test_mnist_iter_gzip_and_bad_files(tmp_path):
    prefix = str(tmp_path / "gz")
    write_mnist(prefix, 2, gz=True)
    it = mx.io.MNISTIter(image=prefix + "-images", label=prefix + "-labels", batch_size=2)
    assert it.next().data[0].shape == (2, 1, 28, 28)
    bad = str(tmp_path / "bad")
    write_mnist(bad, 2, magic=1234)
    with pytest.raises(ValueError, match="not an MNIST idx file"):
        mx.io.MNISTIter(image=bad + "-images", label=bad + "-labels")
    short = str(tmp_path / "short")
    write_mnist(short, 2, truncate=10)
    with pytest.raises(ValueError, match="is truncated"):
        mx.io.MNISTIter(image=short + "-images", label=short + "-labels")
    with pytest.raises(FileNotFoundError, match="no such file"):
        mx.io.MNISTIter(image=str(tmp_path / "none"), label=bad + "-labels")


@pytest.mark.parametrize("name", ["ImageRecordIter", "ImageRecordUInt8Iter", "LibSVMIter",
                                  "ImageDetRecordIter"])
def test_record_io_readers_refuse_clearly(name):
    with pytest.raises(NotImplementedError, match="mx.io.%s: .*NDArrayIter" % name):
        getattr(mx.io, name)(path_imgrec="train.rec", data_shape=(3, 32, 32), batch_size=4)


def test_databatch_str_and_checks():
    batch = mx.io.DataBatch(data=[mx.nd.ones((2, 3))], label=[mx.nd.ones((2,))], pad=1)
    assert str(batch) == "DataBatch: data shapes: [(2, 3)] label shapes: [(2,)]"
    with pytest.raises(TypeError, match="data must be a list of arrays"):
        mx.io.DataBatch(data=mx.nd.ones((2, 3)))
    assert mx.io.DataDesc.get_batch_axis("TNC") == 1


def test_file_iterators_ignore_unknown_arguments_with_a_warning(tmp_path, csv_files):
    # MXNet's C++ iterators accept and ignore them (its mnist_mlp example passes data_shape)
    prefix = str(tmp_path / "mn")
    write_mnist(prefix, 2)
    it = mx.io.MNISTIter(image=prefix + "-images", label=prefix + "-labels", batch_size=2,
                         flat=True, data_shape=(784,), preprocess_threads=4)
    assert it.provide_data[0].shape == (2, 784)
    with pytest.warns(UserWarning, match=r"data_shape=\(5,\) is ignored"):
        mx.io.MNISTIter(image=prefix + "-images", label=prefix + "-labels", batch_size=2,
                        flat=True, data_shape=(5,))
    with pytest.warns(UserWarning, match=r"CSVIter: ignoring the unknown arguments \['foo'\]"):
        mx.io.CSVIter(data_csv=csv_files[0], data_shape=(4,), batch_size=2, foo=1)
