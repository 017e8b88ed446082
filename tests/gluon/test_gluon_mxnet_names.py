"""Names MXNet 1.9.1's own Gluon tests reach for (found by running tests/python/unittest of
MXNet 1.9.1 on fastgrad): ``mx.util`` and its NumPy-semantics switches, ``@use_np`` on Gluon
blocks, ``F.np``/``F.npx`` in a ``hybrid_forward`` given ``mx.nd``, ``nd.reset_arrays``,
``mxnet.base.py_str``."""

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import gluon, npx
from fastgrad import test_utils


@pytest.fixture(autouse=True)
def _mxnet_defaults():
    npx.reset_np()
    yield
    npx.reset_np()


def test_np_shape_scope_reports_and_restores_even_on_error():
    assert (mx.is_np_shape(), mx.util.is_np_shape()) == (False, False)
    with mx.np_shape(True):
        assert mx.is_np_shape()
        with mx.np_shape(False):
            assert not mx.is_np_shape()
        assert mx.is_np_shape()
    assert not mx.is_np_shape()
    with pytest.raises(KeyError):
        with mx.np_shape(True):
            raise KeyError("inside")
    assert not mx.is_np_shape()
    assert mx.set_np_shape(True) is False
    assert mx.set_np_shape(False) is True


def test_set_np_requests_both_and_shape_cannot_be_withdrawn_alone():
    npx.set_np()
    assert (mx.is_np_shape(), mx.is_np_array()) == (True, True)
    with pytest.raises(ValueError, match="Deactivating NumPy shape semantics"):
        mx.set_np_shape(False)
    with pytest.raises(ValueError, match="NumPy Shape semantics is required"):
        npx.set_np(shape=False, array=True)
    npx.reset_np()
    assert (mx.is_np_shape(), mx.is_np_array()) == (False, False)


class _Dot(gluon.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.w = self.params.get("w", shape=(2, 2))

    def hybrid_forward(self, F, x, w):
        return F.np.dot(x, w) + F.np.ones(()) + F.npx.relu(-x).sum()


@pytest.mark.parametrize("hybridize", [False, True])
def test_use_np_block_holds_np_arrays_and_reaches_F_np(hybridize):
    NpDot = mx.use_np(type("NpDot", (_Dot,), {}))
    net = NpDot()
    assert not mx.is_np_array()            # only the decorated class's methods are scoped
    net.initialize(mx.init.Constant(0.5))
    assert type(net.w.data()) is mx.np.ndarray
    legacy = _Dot()
    legacy.initialize()
    assert type(legacy.w.data()) is mx.nd.NDArray
    if hybridize:
        net.hybridize()
    x = mx.np.array([[1.0, -2.0]])
    # [1, -2] @ 0.5 + 1 + relu([-1, 2]).sum() = [-0.5 + 1 + 2] * 2
    onp.testing.assert_allclose(net(x).asnumpy(), [[2.5, 2.5]])
    assert test_utils.use_np is mx.util.use_np is mx.use_np


def test_use_np_function_scope():
    @mx.util.use_np
    def inside():
        return mx.is_np_shape(), mx.is_np_array()
    assert inside() == (True, True)
    assert (mx.is_np_shape(), mx.is_np_array()) == (False, False)
    with pytest.raises(TypeError, match="use_np_array can only decorate"):
        mx.use_np_array(3)


def test_reset_arrays_zeroes_in_place():
    a = mx.nd.array([[1.0, 2.0], [3.0, 4.0]])
    b = mx.np.array([5, 6], dtype="int32")
    same_a = a
    mx.nd.reset_arrays(a, b, num_arrays=2)
    assert same_a is a
    onp.testing.assert_array_equal(a.asnumpy(), onp.zeros((2, 2), "float32"))
    onp.testing.assert_array_equal(b.asnumpy(), [0, 0])
    assert b.dtype == onp.int32
    with pytest.raises(ValueError, match="num_arrays=3"):
        mx.nd.reset_arrays(a, num_arrays=3)


def test_base_py_str_and_type_tuples():
    assert mx.base.py_str("é".encode("utf-8")) == "é"
    assert isinstance(onp.float32(1), mx.base.numeric_types)
    assert isinstance(onp.int64(1), mx.base.integer_types)
    assert not isinstance(1.5, mx.base.integer_types)
    assert mx.util.getenv("FASTGRAD_SURELY_UNSET_VARIABLE") is None


def test_ndarray_ndarray_module_and_storage_codes():
    from fastgrad.ndarray.ndarray import NDArray, _STORAGE_TYPE_STR_TO_ID
    assert NDArray is mx.nd.NDArray
    # MXNet 1.9.1's codes (include/mxnet/ndarray.h: kUndefinedStorage = -1, kDefaultStorage,
    # kRowSparseStorage, kCSRStorage)
    assert _STORAGE_TYPE_STR_TO_ID == {"undefined": -1, "default": 0, "row_sparse": 1, "csr": 2}


def test_sparse_names_import_and_making_one_says_dense_only():
    import fastgrad.ndarray.sparse as mxsps
    assert mxsps is mx.nd.sparse
    assert not isinstance(mx.nd.zeros((2, 3)), (mxsps.CSRNDArray, mxsps.RowSparseNDArray))
    with pytest.raises(mx.base.MXNetError, match=r"sparse.zeros: .*stype 'csr'.*mx.nd.zeros"):
        mxsps.zeros("csr", (2, 3))
    with pytest.raises(ValueError, match="row_sparse_array: fastgrad has no sparse storage"):
        mxsps.row_sparse_array(onp.ones((2, 3)))
    with pytest.raises(ValueError, match="CSRNDArray"):
        mxsps.CSRNDArray()


def test_nd_slice_matches_mxnet():
    # values printed by MXNet 1.9.1 for the same calls
    a = mx.nd.arange(24).reshape((2, 3, 4))
    assert mx.nd.slice(a, begin=(0, 1), end=(2, None)).shape == (2, 2, 4)
    onp.testing.assert_array_equal(
        mx.nd.slice(a, (None,) * 3, (None,) * 3, step=(-1, 1, -2))[0, 0].asnumpy(), [15, 13])
    onp.testing.assert_array_equal(mx.nd.slice(a, (1, -2), (2, -1)).asnumpy(),
                                   [[[16, 17, 18, 19]]])
    for begin, end, shape in [((0,), (5,), (2, 3, 4)), ((-5,), (1,), (1, 3, 4)),
                              ((1,), (1,), (0, 3, 4)), ((2,), (1,), (0, 3, 4))]:
        assert mx.nd.slice(a, begin, end).shape == shape
    part = a.slice((0, 1), (1, 3))
    assert type(part) is mx.nd.NDArray
    onp.testing.assert_array_equal(part.asnumpy(), onp.arange(24).reshape(2, 3, 4)[0:1, 1:3])
    with pytest.raises(ValueError, match="same length"):
        mx.nd.slice(a, (0, 1), (1,))
    with pytest.raises(ValueError, match="zero entry"):
        mx.nd.slice(a, (0,), (1,), step=(0,))


def test_ndarray_str_is_mxnet_repr_and_squeeze_takes_inplace():
    x = mx.nd.array([[1.5], [2.0], [-3.0]])
    # MXNet 1.9.1: print(mx.nd.array([[1.5], [2], [-3]]).squeeze()) shows these lines
    assert str(x.squeeze(inplace=True)) == "\n[ 1.5  2.  -3. ]\n<NDArray 3 @cpu(0)>"
    assert str(x) == repr(x)
    assert x.shape == (3, 1)                   # the array itself keeps its shape, as in MXNet
    out = x.squeeze(axis=1, inplace=False)
    assert type(out) is mx.nd.NDArray and out.shape == (3,)
    onp.testing.assert_array_equal(out.asnumpy(), [1.5, 2.0, -3.0])


def test_optimizer_allow_np_array_and_updater_without_it():
    assert mx.optimizer.SGD().allow_np_array is False

    @mx.use_np
    def make_and_update():
        optimizer = mx.optimizer.SGD(learning_rate=0.1)
        assert optimizer.allow_np_array is True          # as MXNet 1.9.1 under @use_np
        del optimizer.allow_np_array                     # an optimizer pickled by older MXNet
        updater = mx.optimizer.Updater(optimizer)
        weight = mx.np.array([1.0, 2.0])
        updater(0, mx.np.array([1.0, -1.0]), weight)
        updater(1, mx.np.ones((0, 0)), mx.np.zeros((0, 0)))
        return weight.asnumpy()
    onp.testing.assert_allclose(make_and_update(), [0.9, 2.1], rtol=1e-6)


def test_batch_norm_output_mean_var_gives_inverse_std_as_mxnet():
    # MXNet 1.9.1, nd.BatchNorm(x, ones, zeros, [0.5, 1], [4, 9], output_mean_var=True,
    # fix_gamma=False, eps=1e-3) on x = arange(8).reshape(4, 2):
    x = mx.nd.array(onp.arange(8.0).reshape(4, 2))

    def run(**kwargs):
        return mx.nd.BatchNorm(x, mx.nd.ones(2), mx.nd.zeros(2), mx.nd.array([0.5, 1.0]),
                               mx.nd.array([4.0, 9.0]), output_mean_var=True,
                               fix_gamma=False, eps=1e-3, **kwargs)
    _, mean, inv_std = run()
    onp.testing.assert_allclose(mean.asnumpy(), [0.5, 1.0])
    onp.testing.assert_allclose(inv_std.asnumpy(), [0.49993753, 0.3333148], rtol=1e-6)
    with mx.autograd.record(train_mode=True):
        _, mean, inv_std = run()
    onp.testing.assert_allclose(mean.asnumpy(), [3.0, 4.0])
    onp.testing.assert_allclose(inv_std.asnumpy(), [0.44716886, 0.44716886], rtol=1e-6)
    with mx.autograd.record(train_mode=True):
        _, mean, inv_std = run(use_global_stats=True)
    onp.testing.assert_allclose(inv_std.asnumpy(), [0.49993753, 0.3333148], rtol=1e-6)
