"""fastgrad arrays meet other libraries: DLPack, NumPy's files, and converters that call len().

Round trips are checked for values, dtypes and (for DLPack) that no copy was made: a write on
one side is seen on the other. PyTorch is optional: its tests are skipped, with the reason,
when it is not installed.
"""

import io
import sys

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad._core import _array
from fastgrad._api import _io
from fastgrad import autograd, np

DTYPES = ["float32", "float64", "int64", "bool", "complex128"]


def _fresh(dtype, shape=(2, 3)):
    values = onp.arange(onp.prod(shape, dtype=int)).reshape(shape) - 2
    return np.array(values.astype(dtype))


# ---------------------------------------------------------------- len() of a 0-d array
def test_len_of_0d_array_raises_numpys_type_error():
    with pytest.raises(TypeError) as ours:
        len(np.array(3.0))
    with pytest.raises(TypeError) as numpys:
        len(onp.array(3.0))
    assert str(ours.value) == str(numpys.value)
    assert len(np.zeros((0, 2))) == 0 and len(np.zeros((4, 2))) == 4


def test_iteration_over_0d_array_raises_numpys_type_error():
    with pytest.raises(TypeError) as ours:
        iter(np.array(3.0)).__next__()
    with pytest.raises(TypeError) as numpys:
        iter(onp.array(3.0))
    assert str(ours.value) == str(numpys.value)


# ---------------------------------------------------------------- DLPack with NumPy
# NumPy's DLPack keywords (ndarray.__dlpack__'s max_version, dl_device and copy;
# numpy.from_dlpack's device and copy) are NumPy 2.1's; fastgrad takes them on NumPy 2.0 too
# (Note [DLPack on NumPy 2.0] in fastgrad/_core/_array.pyx). The tests that take ``numpy_dlpack``
# run twice: with the installed NumPy's own keywords, and through fastgrad's NumPy 2.0 path,
# forced, so that a run on the newest NumPy checks that path as well.
@pytest.fixture(params=["numpy's keywords", "numpy 2.0 path"])
def numpy_dlpack(request, monkeypatch):
    if request.param == "numpy 2.0 path":
        monkeypatch.setattr(_array, "_NUMPY_DLPACK_KEYWORDS", False)
        monkeypatch.setattr(_io, "_NUMPY_FROM_DLPACK_KEYWORDS", False)
    return request.param


def test_the_numpy_2_0_path_is_taken_exactly_on_numpy_2_0():
    keywords = onp.lib.NumpyVersion(onp.__version__) >= "2.1.0"
    assert _array._NUMPY_DLPACK_KEYWORDS is keywords
    assert _io._NUMPY_FROM_DLPACK_KEYWORDS is keywords


class _Producer:
    """Exports ``a`` with the given ``__dlpack__`` keywords, whatever the consumer asks."""

    def __init__(self, a, **keywords):
        self.a, self.keywords = a, keywords

    def __dlpack__(self, **ignored):
        return self.a.__dlpack__(**self.keywords)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4)])
def test_numpy_from_dlpack_shares_fastgrads_data(dtype, shape, numpy_dlpack):
    a = _fresh(dtype, shape)
    b = onp.from_dlpack(a)
    assert b.dtype == a.dtype and b.shape == a.shape
    onp.testing.assert_array_equal(b, onp.asarray(a))
    if a.size:
        assert onp.shares_memory(b, onp.asarray(a))


@pytest.mark.parametrize("dtype", DTYPES)
def test_fastgrad_from_dlpack_shares_numpys_data(dtype, numpy_dlpack):
    source = onp.arange(6).reshape(2, 3).astype(dtype)
    a = np.from_dlpack(source)
    assert isinstance(a, mx.np.ndarray) and a.dtype == source.dtype
    source[0, 0] = 1
    assert onp.asarray(a)[0, 0] == 1
    a[1, 2] = a[0, 0]      # writable, as the source is (NumPy 2.0's own import is read-only)
    assert source[1, 2] == 1
    assert a.node is None  # no history


def test_fastgrad_from_dlpack_of_a_read_only_numpy_array_shares_it(numpy_dlpack):
    source = onp.arange(3.0)
    source.flags.writeable = False
    a = np.from_dlpack(source)
    assert onp.shares_memory(onp.asarray(a), source) and a.tolist() == [0.0, 1.0, 2.0]


def test_from_dlpack_round_trip_of_a_view_keeps_strides(numpy_dlpack):
    base = np.array(onp.arange(12.0).reshape(3, 4))
    view = base[:, ::2]
    back = np.from_dlpack(onp.from_dlpack(view))
    onp.testing.assert_array_equal(onp.asarray(back), onp.arange(12.0).reshape(3, 4)[:, ::2])
    assert onp.shares_memory(onp.asarray(back), onp.asarray(base))


def test_from_dlpack_of_a_recorded_array_gives_values_without_history():
    x = np.array([1.0, 2.0], dtype="float64")
    x.attach_grad()
    with autograd.record():
        y = x * 3
        z = np.from_dlpack(y)
        (z * y).sum().backward()
    # z is a constant: d/dx (z * 3x) = 3 z = 9x, not 18x.
    onp.testing.assert_allclose(x.grad.asnumpy(), [9.0, 18.0], rtol=0, atol=0)


def test_from_dlpack_copy_flags(numpy_dlpack):
    source = onp.arange(3.0)
    copied = np.from_dlpack(source, copy=True)
    source[0] = 7.0
    assert onp.asarray(copied)[0] == 0.0
    assert onp.asarray(np.from_dlpack(source, copy=False))[0] == 7.0
    assert onp.asarray(np.from_dlpack(source, device="cpu", copy=None))[0] == 7.0


def test_from_dlpack_refuses_a_device_but_the_cpu(numpy_dlpack):
    with pytest.raises(ValueError) as e:
        np.from_dlpack(onp.arange(3.0), device="cuda")
    assert "cpu" in str(e.value)


def test_from_dlpack_errors_name_it(numpy_dlpack):
    if sys.version_info < (3, 11):
        pytest.skip("exception notes are Python 3.11's")
    with pytest.raises(BufferError) as e:
        np.from_dlpack(onp.arange(3.0).astype(">f8"))       # DLPack has no byte order
    assert "fastgrad.np.from_dlpack" in " ".join(getattr(e.value, "__notes__", []))


@pytest.mark.parametrize("copy", [None, False, True])
@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_dlpack_keywords_of_fastgrad_arrays(copy, max_version, numpy_dlpack):
    a = np.array([1.0, 2.0, 3.0])
    b = onp.from_dlpack(_Producer(a, max_version=max_version, dl_device=(1, 0), copy=copy))
    onp.testing.assert_array_equal(b, [1.0, 2.0, 3.0])
    assert onp.shares_memory(b, onp.asarray(a)) is (copy is not True)


def test_dlpack_refuses_a_device_but_the_cpu(numpy_dlpack):
    with pytest.raises(BufferError):
        np.array([1.0]).__dlpack__(dl_device=(2, 0))       # kDLCUDA


def test_dlpack_of_a_read_only_array_on_numpy_2_0(monkeypatch):
    """NumPy 2.0's capsule cannot mark an array read-only: copy=None exports a copy, and
    copy=False, which forbids one, is an error naming the method."""
    monkeypatch.setattr(_array, "_NUMPY_DLPACK_KEYWORDS", False)
    a = np.array([1.0, 2.0])
    data = _array.unwrap(a)
    data.flags.writeable = False
    b = onp.from_dlpack(_Producer(a, copy=None))
    assert b.tolist() == [1.0, 2.0] and not onp.shares_memory(b, data)
    with pytest.raises(BufferError, match=r"fastgrad\.np\.ndarray\.__dlpack__: copy=False"):
        a.__dlpack__(copy=False)


def test_dlpack_device_is_the_cpu():
    assert np.array([1.0]).__dlpack_device__() == onp.array([1.0]).__dlpack_device__()


# ---------------------------------------------------------------- DLPack and converters with torch
def _torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed (optional peer)")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_torch_from_dlpack_shares_fastgrads_data(dtype):
    torch = _torch()
    a = _fresh(dtype)
    t = torch.from_dlpack(a)
    assert tuple(t.shape) == a.shape and str(t.dtype) == "torch." + dtype
    onp.testing.assert_array_equal(t.numpy(), onp.asarray(a))
    assert t.data_ptr() == onp.asarray(a).ctypes.data  # no copy


def test_fastgrad_from_dlpack_of_a_torch_tensor_shares_its_data():
    torch = _torch()
    t = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    a = np.from_dlpack(t)
    t[1, 2] = -5.0
    assert onp.asarray(a)[1, 2] == -5.0 and a.dtype == onp.float64


@pytest.mark.parametrize("convert", ["tensor", "as_tensor"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (0, 2)])
def test_torch_tensor_and_as_tensor_accept_fastgrad_arrays(convert, shape):
    torch = _torch()
    a = _fresh("float64", shape)
    t = getattr(torch, convert)(a)
    assert tuple(t.shape) == shape and t.dtype == torch.float64
    onp.testing.assert_array_equal(t.numpy(), onp.asarray(a))


# ---------------------------------------------------------------- NumPy's files
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4)])
def test_save_load_round_trip(tmp_path, dtype, shape):
    a = _fresh(dtype, shape)
    np.save(tmp_path / "a.npy", a)
    back = np.load(tmp_path / "a.npy")
    assert isinstance(back, mx.np.ndarray) and back.dtype == a.dtype and back.shape == shape
    onp.testing.assert_array_equal(onp.asarray(back), onp.asarray(a))
    # The file is NumPy's: NumPy reads it, and numpy.save on a fastgrad array writes the same.
    onp.testing.assert_array_equal(onp.load(tmp_path / "a.npy"), onp.asarray(a))
    onp.save(tmp_path / "b.npy", a)
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()


@pytest.mark.parametrize("save", ["savez", "savez_compressed"])
def test_savez_load_gives_a_dict_of_arrays(tmp_path, save):
    x, y = _fresh("float32"), _fresh("int64", (4,))
    getattr(np, save)(tmp_path / "ab.npz", x, weights=y)
    loaded = np.load(tmp_path / "ab.npz")
    assert sorted(loaded) == ["arr_0", "weights"]
    for name, ref in (("arr_0", x), ("weights", y)):
        assert isinstance(loaded[name], mx.np.ndarray) and loaded[name].dtype == ref.dtype
        onp.testing.assert_array_equal(onp.asarray(loaded[name]), onp.asarray(ref))
    with onp.load(tmp_path / "ab.npz") as numpys:  # NumPy reads it too
        onp.testing.assert_array_equal(numpys["weights"], onp.asarray(y))
    getattr(onp, save)(tmp_path / "c.npz", x)  # NumPy's function on a fastgrad array
    onp.testing.assert_array_equal(onp.asarray(np.load(tmp_path / "c.npz")["arr_0"]),
                                   onp.asarray(x))


def test_saved_arrays_hold_values_not_history():
    x = np.array([1.0, 2.0], dtype="float64")
    x.attach_grad()
    with autograd.record():
        y = x * x
    f = io.BytesIO()
    np.save(f, y)
    f.seek(0)
    back = np.load(f)
    assert back.node is None and y.node is not None
    onp.testing.assert_array_equal(onp.asarray(back), [1.0, 4.0])


def test_load_refuses_pickles(tmp_path):
    onp.save(tmp_path / "objects.npy", onp.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="allow_pickle"):
        np.load(tmp_path / "objects.npy")


def test_load_memory_map(tmp_path):
    onp.save(tmp_path / "m.npy", onp.arange(5.0))
    m = np.load(tmp_path / "m.npy", mmap_mode="r")
    onp.testing.assert_array_equal(onp.asarray(m), onp.arange(5.0))
