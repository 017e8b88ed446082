"""gluon.utils: split_data, split_and_load, clip_global_norm, check_sha1, download."""

import hashlib
import math
import warnings

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd
from fastgrad.gluon import utils


def test_split_data_even_and_uneven():
    x = mx.nd.array(onp.arange(20).reshape(5, 4))
    parts = utils.split_data(x, 2, even_split=False)
    assert [p.shape for p in parts] == [(3, 4), (2, 4)]
    onp.testing.assert_array_equal(onp.concatenate([p.asnumpy() for p in parts]), x.asnumpy())
    parts = utils.split_data(x, 2, batch_axis=1)
    assert [p.shape for p in parts] == [(5, 2), (5, 2)]
    onp.testing.assert_array_equal(parts[1].asnumpy(), x.asnumpy()[:, 2:])
    assert [p.shape for p in utils.split_data(x, 2, batch_axis=-1)] == [(5, 2), (5, 2)]
    # more slices than elements: the last ones are empty, as in MXNet
    assert [p.shape[0] for p in utils.split_data(x, 7, even_split=False)] == [1] * 5 + [0] * 2
    assert len(utils.split_data(x, 1)) == 1


def test_split_data_errors():
    x = mx.nd.zeros((5, 4))
    with pytest.raises(ValueError, match=r"data with shape \(5, 4\) cannot be evenly split "
                                         r"into 2 slices along axis 0"):
        utils.split_data(x, 2)
    with pytest.raises(ValueError, match="num_slice must be a positive integer"):
        utils.split_data(x, 0)
    with pytest.raises(ValueError, match="batch_axis 2 is out of range"):
        utils.split_data(x, 1, batch_axis=2)


def test_split_keeps_the_array_type_and_the_gradient_flows():
    x = mx.np.arange(6.0).reshape(3, 2)
    x.attach_grad()
    with autograd.record():
        parts = utils.split_data(x, 3)
        loss = sum((p * (i + 1)).sum() for i, p in enumerate(parts))
    loss.backward()
    assert all(isinstance(p, mx.np.ndarray) for p in parts)
    onp.testing.assert_array_equal(x.grad.asnumpy(), [[1, 1], [2, 2], [3, 3]])


def test_split_and_load():
    data = onp.arange(12.0).reshape(6, 2)
    parts = utils.split_and_load(data, [mx.cpu(0), mx.cpu(1), mx.cpu(2)])
    assert all(isinstance(p, mx.nd.NDArray) for p in parts)
    onp.testing.assert_array_equal(parts[2].asnumpy(), data[4:])
    (one,) = utils.split_and_load(mx.nd.array(data), [mx.cpu()])
    assert one.shape == (6, 2)
    mx.npx.set_np()
    try:
        assert isinstance(utils.split_and_load(data, [mx.cpu()])[0], mx.np.ndarray)
    finally:
        mx.npx.reset_np()
    with pytest.raises(ValueError, match="ctx_list must be a non-empty list"):
        utils.split_and_load(data, [])


def test_clip_global_norm_scales_to_max_norm():
    rng = onp.random.RandomState(0)
    values = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    arrays = [mx.nd.array(v, dtype="float64") for v in values]
    total = math.sqrt(sum((v ** 2).sum() for v in values))
    norm = utils.clip_global_norm(arrays, 1.0)
    assert isinstance(norm, float) and norm == pytest.approx(total, rel=1e-14)
    for a, v in zip(arrays, values):
        onp.testing.assert_allclose(a.asnumpy(), v * (1.0 / (total + 1e-8)), rtol=1e-14)
    after = math.sqrt(sum((a.asnumpy() ** 2).sum() for a in arrays))
    assert after == pytest.approx(1.0, rel=1e-7)
    # under the limit nothing changes
    before = [a.asnumpy().copy() for a in arrays]
    utils.clip_global_norm(arrays, 10.0)
    for a, b in zip(arrays, before):
        onp.testing.assert_array_equal(a.asnumpy(), b)


def test_clip_global_norm_without_the_finiteness_check_returns_an_array():
    arrays = [mx.nd.array([3.0]), mx.nd.array([4.0])]
    norm = utils.clip_global_norm(arrays, 100.0, check_isfinite=False)
    assert isinstance(norm, mx.nd.NDArray) and norm.shape == (1,)
    assert norm.asnumpy()[0] == 5.0
    norm = utils.clip_global_norm([mx.np.array([3.0, 4.0])], 1.0, check_isfinite=False)
    assert isinstance(norm, mx.np.ndarray)


def test_clip_global_norm_warns_on_nan_and_inf():
    for bad in (float("nan"), float("inf")):
        arrays = [mx.nd.array([1.0, bad])]
        with pytest.warns(UserWarning, match="nan or inf is detected"):
            norm = utils.clip_global_norm(arrays, 1.0)
        assert not math.isfinite(norm)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        utils.clip_global_norm([mx.nd.array([1.0, float("nan")])], 1.0, check_isfinite=False)


def test_clip_global_norm_bad_input():
    with pytest.raises(AssertionError, match="empty"):
        utils.clip_global_norm([], 1.0)
    with pytest.raises(TypeError, match="a list of arrays, got one array"):
        utils.clip_global_norm(mx.nd.ones(2), 1.0)
    with pytest.raises(TypeError, match="fastgrad arrays"):
        utils.clip_global_norm([onp.ones(2)], 1.0)


def test_clip_global_norm_on_trainer_gradients():
    w = mx.gluon.Parameter("w", shape=(2,))
    w.initialize(mx.init.One())
    with autograd.record():
        loss = (w.data() * mx.nd.array([30.0, 40.0])).sum()
    loss.backward()
    norm = utils.clip_global_norm([w.grad()], 5.0)
    assert norm == pytest.approx(50.0)
    onp.testing.assert_allclose(w.grad().asnumpy(), [3.0, 4.0], rtol=1e-6)


def test_check_sha1(tmp_path):
    f = tmp_path / "abc"
    f.write_bytes(b"abc")
    # FIPS 180-1's test vector for "abc"
    assert utils.check_sha1(str(f), "a9993e364706816aba3e25717850c26c9cd0d89d")
    assert not utils.check_sha1(str(f), "0" * 40)


def test_download_from_a_file_url_and_keeping_existing_files(tmp_path):
    src = tmp_path / "src" / "data.bin"
    src.parent.mkdir()
    src.write_bytes(b"payload")
    sha1 = hashlib.sha1(b"payload").hexdigest()
    dest_dir = tmp_path / "dest"
    dest_dir.mkdir()
    path = utils.download(src.as_uri(), path=str(dest_dir), sha1_hash=sha1)
    assert path == str(dest_dir / "data.bin")
    assert (dest_dir / "data.bin").read_bytes() == b"payload"
    (dest_dir / "data.bin").write_bytes(b"edited")
    assert utils.download(src.as_uri(), path=path) == path          # kept: exists, no hash
    assert (dest_dir / "data.bin").read_bytes() == b"edited"
    utils.download(src.as_uri(), path=path, sha1_hash=sha1)         # hash differs: fetched
    assert (dest_dir / "data.bin").read_bytes() == b"payload"
    with pytest.raises(UserWarning, match="content hash does not match"):
        utils.download(src.as_uri(), path=str(tmp_path / "other"), sha1_hash="0" * 40,
                       retries=0)
    assert not (tmp_path / "other").exists()


def test_download_without_network_names_the_url(tmp_path):
    url = "http://127.0.0.1:9/model.params"            # the discard port: refused at once
    with pytest.raises(RuntimeError, match=r"failed downloading url http://127\.0\.0\.1:9/"
                                           r"model\.params.*put it at .*model\.params"):
        utils.download(url, path=str(tmp_path), retries=1)
    assert list(tmp_path.iterdir()) == []
