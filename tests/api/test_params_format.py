"""MXNet's binary .params format: nd.save/nd.load, npx.save/npx.load
(fastgrad/_api/_params_format.py).

The fixture files were written by MXNet 1.9.1 (tests/fixtures/make_mxnet_symbol_fixtures.py).
"""

import os
import struct

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad._api import _params_format as P

from _helpers import FIXTURES

HERE = os.path.join(FIXTURES, "mxnet_symbol")


def _expected():
    with onp.load(os.path.join(HERE, "params_expected.npz")) as z:
        return {k: z[k] for k in z.files}


def _read(name):
    with open(os.path.join(HERE, name), "rb") as f:
        return f.read()


def _same(a, b):
    a = a.asnumpy() if hasattr(a, "asnumpy") else onp.asarray(a)
    return a.dtype == b.dtype and a.shape == b.shape and onp.array_equal(a, b)


# ---------------------------------------------------------------- files MXNet wrote

def test_nd_load_reads_mxnets_list_of_every_dtype():
    exp = _expected()
    got = mx.nd.load(os.path.join(HERE, "list.params"))
    assert isinstance(got, list) and len(got) == 7
    assert all(isinstance(a, mx.nd.NDArray) for a in got)
    for i, a in enumerate(got):
        assert _same(a, exp["list:%d" % i]), i


def test_nd_load_reads_mxnets_dict_in_order():
    exp = _expected()
    got = mx.nd.load(os.path.join(HERE, "dict.params"))
    assert list(got) == ["fc1_weight", "fc1_bias", "steps"]
    for k, a in got.items():
        assert _same(a, exp["dict:" + k]), k


def test_npx_load_reads_scalars_empty_and_bool_arrays():
    exp = _expected()
    got = mx.npx.load(os.path.join(HERE, "np_dict.params"))
    assert list(got) == ["scalar", "empty", "w", "flag"]
    assert got["scalar"].shape == () and got["empty"].shape == (0, 3)
    assert all(type(a) is mx.np.ndarray for a in got.values())
    for k, a in got.items():
        assert _same(a, exp["np_dict:" + k]), k
    lst = mx.npx.load(os.path.join(HERE, "np_list.params"))
    assert isinstance(lst, list) and _same(lst[0], exp["np_list:0"])
    assert mx.nd.load(os.path.join(HERE, "empty_list.params")) == []


@pytest.mark.parametrize("name, numpy_shape", [
    ("list.params", False), ("dict.params", False), ("empty_list.params", False),
    ("np_dict.params", True), ("np_list.params", True)])
def test_writing_back_reproduces_mxnets_bytes(name, numpy_shape):
    raw = _read(name)
    assert P.dumps(P.loads(raw), numpy_shape=numpy_shape) == raw


# ---------------------------------------------------------------- fastgrad's own files

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "uint8", "int8", "int32",
                                   "int64", "bool"])
def test_round_trip_of_every_dtype(tmp_path, dtype):
    rng = onp.random.default_rng(0)
    a = (rng.standard_normal((3, 2)) * 10).astype(dtype)
    path = str(tmp_path / "a.params")
    mx.nd.save(path, {"a": mx.nd.array(a, dtype=dtype)})
    back = mx.nd.load(path)["a"]
    assert _same(back, a)
    mx.npx.save(path, [mx.np.array(a, dtype=dtype)])
    assert _same(mx.npx.load(path)[0], a)


def test_save_accepts_one_array_a_tuple_and_numpy_arrays(tmp_path):
    path = str(tmp_path / "x.params")
    mx.nd.save(path, mx.nd.array([1.0, 2.0]))
    assert [a.asnumpy().tolist() for a in mx.nd.load(path)] == [[1.0, 2.0]]
    mx.nd.save(path, (onp.arange(3.0), onp.ones((1, 1), onp.int64)))
    got = mx.nd.load(path)
    assert _same(got[0], onp.arange(3.0)) and _same(got[1], onp.ones((1, 1), onp.int64))
    assert _same(mx.nd.load_frombuffer(open(path, "rb").read())[0], onp.arange(3.0))


def test_scalars_and_empty_arrays_need_npx_save(tmp_path):
    path = str(tmp_path / "s.params")
    with pytest.raises(ValueError, match="npx.save"):
        mx.nd.save(path, [mx.nd.array(onp.zeros((2, 0)))])
    with pytest.raises(ValueError, match=r"scalar.*npx\.save|shape \(\)"):
        mx.nd.save(path, {"s": mx.np.array(1.5)})
    mx.npx.save(path, {"s": mx.np.array(1.5), "e": mx.np.zeros((2, 0))})
    got = mx.npx.load(path)
    assert got["s"].shape == () and float(got["s"]) == 1.5 and got["e"].shape == (2, 0)


def test_save_rejects_what_the_format_cannot_hold(tmp_path):
    path = str(tmp_path / "bad.params")
    with pytest.raises(TypeError, match="complex128"):
        mx.npx.save(path, [onp.ones(2, onp.complex128)])
    with pytest.raises(TypeError, match="keys must be str"):
        mx.nd.save(path, {1: mx.nd.ones((1,))})
    with pytest.raises(TypeError, match="item 1"):
        mx.nd.save(path, [mx.nd.ones((1,)), 3.0])
    # MXNet 1.9.1's exception types: ValueError for a payload that is no array, list or
    # dict; TypeError for a list or dict holding something that is not an array.
    for payload in (3, "abc", None):
        with pytest.raises(ValueError, match="not %s" % type(payload).__name__):
            mx.nd.save(path, payload)
        with pytest.raises(ValueError, match="npx.save: data must be"):
            mx.npx.save(path, payload)
    with pytest.raises(TypeError, match="entry 'a' is a int"):
        mx.nd.save(path, {"a": 1})


def test_non_contiguous_and_big_endian_arrays_are_written_in_c_order(tmp_path):
    path = str(tmp_path / "t.params")
    a = onp.arange(12.0).reshape(3, 4).T
    b = onp.arange(4, dtype=">i4")
    mx.nd.save(path, [a, b])
    got = mx.nd.load(path)
    assert onp.array_equal(got[0].asnumpy(), a) and got[1].asnumpy().tolist() == [0, 1, 2, 3]
    assert got[1].dtype == onp.int32


# ---------------------------------------------------------------- old layouts

def _record_v1(shape, data):
    return (struct.pack("<Ii", P.V1_MAGIC, len(shape)) + struct.pack("<%dq" % len(shape), *shape)
            + struct.pack("<iii", 1, 0, 0) + data.astype("<f4").tobytes())


def _record_v0(shape, data):
    return (struct.pack("<I", len(shape)) + struct.pack("<%dI" % len(shape), *shape)
            + struct.pack("<iii", 1, 0, 0) + data.astype("<f4").tobytes())


def _file(records, names=()):
    out = struct.pack("<QQQ", P.LIST_MAGIC, 0, len(records)) + b"".join(records)
    out += struct.pack("<Q", len(names))
    for n in names:
        out += struct.pack("<Q", len(n)) + n.encode()
    return out


def test_reads_the_layouts_of_mxnet_before_1_0():
    a = onp.arange(6.0).reshape(2, 3)
    got = P.loads(_file([_record_v1((2, 3), a), _record_v0((3, 2), a)], ["x", "y"]))
    assert onp.array_equal(got["x"], a) and onp.array_equal(got["y"], a.reshape(3, 2))


# ---------------------------------------------------------------- corrupt files

def test_every_truncation_raises_a_clear_error():
    raw = _read("np_dict.params")
    for n in range(len(raw)):
        with pytest.raises(ValueError, match="not a valid MXNet NDArray file"):
            P.loads(raw[:n])


def test_flipped_bytes_never_crash():
    raw = bytearray(_read("dict.params"))
    rng = onp.random.default_rng(1)
    for _ in range(300):
        bad = bytearray(raw)
        for i in rng.integers(0, len(raw), size=3):
            bad[i] = int(rng.integers(0, 256))
        try:
            P.loads(bytes(bad))
        except ValueError as exc:
            assert "not a valid MXNet NDArray file" in str(exc)


def _v2(shape, stype=0, dtype_flag=0, data=b""):
    return (struct.pack("<Iii", P.V2_MAGIC, stype, len(shape))
            + struct.pack("<%dq" % len(shape), *shape) + struct.pack("<iii", 1, 0, dtype_flag)
            + data)


@pytest.mark.parametrize("blob, message", [
    (b"\x00" * 24, "header magic"),
    (struct.pack("<QQQ", P.LIST_MAGIC, 0, 2 ** 60), "array count"),
    (_file([_v2((2,), stype=1)]), "storage type 1"),
    (_file([_v2((2,), dtype_flag=42, data=b"\x00" * 8)]), "type number 42"),
    (_file([_v2((2 ** 40, 2 ** 40), data=b"\x00" * 8)]), "truncated"),
    (_file([_v2((), data=b"\x00" * 4)]), "no known shape"),
    (_file([_v2((2, 0))]), "no known shape"),
    (_file([_v2((1,), data=b"\x00" * 4)]) + b"junk", "unexpected bytes"),
    (_file([_v2((1,), data=b"\x00" * 4)], ["a", "b"]), "2 names for 1 arrays"),
    (_file([_v2((1,), data=b"\x00" * 4)] * 2, ["a", "a"]), "duplicate names"),
    (_file([struct.pack("<I", 0xDEADBEEF) + b"\0" * 32]), "no NDArray magic"),
])
def test_corrupt_files_name_the_problem(blob, message):
    with pytest.raises(ValueError, match=message):
        P.loads(blob)


def test_load_names_the_file(tmp_path):
    path = tmp_path / "broken.params"
    path.write_bytes(b"\x12\x01\x00")
    with pytest.raises(ValueError, match="broken.params"):
        mx.nd.load(str(path))


def test_a_corrupt_file_is_an_mxnet_error_and_a_value_error():
    from fastgrad.base import MXNetError
    with pytest.raises(MXNetError):
        P.loads(b"\x00" * 24)
    with pytest.raises(ValueError):
        P.loads(b"\x00" * 24)
