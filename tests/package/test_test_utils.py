"""mx.test_utils (fastgrad.test_utils) against MXNet 1.9.1's.

The expected failure messages below are what MXNet 1.9.1's ``mxnet.test_utils`` printed and
raised for the same calls (run with /work/mxnet-venv, numpy 1.23.5, same seeds); the
gradients of the gradient checks are closed forms.
"""
import os

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import test_utils as tu


def _message(call):
    with pytest.raises(AssertionError) as info:
        call()
    return str(info.value)


def test_mx_test_utils_is_the_module():
    assert mx.test_utils is tu
    import fastgrad.test_utils as again
    assert again is tu


def test_default_tolerances_follow_the_dtypes():
    f16, f32, f64 = (onp.dtype(t) for t in (onp.float16, onp.float32, onp.float64))
    assert tu.get_tols(onp.ones(1, f32), onp.ones(1, f64), None, None) == (1e-4, 1e-3)
    assert tu.get_tols(onp.ones(1, f16), onp.ones(1, f64), None, None) == (1e-2, 1e-1)
    assert tu.get_tols(onp.ones(1, f64), onp.ones(1, f64), None, None) == (1e-5, 1e-20)
    assert tu.get_tols(onp.ones(1, onp.int32), onp.ones(1, onp.int64), None, None) == (0, 0)
    # a dict supplies the tolerance of the dtypes it names
    assert tu.get_tols(onp.ones(1, f64), onp.ones(1, f64), {f64: 1e-9}, 0.5) == (1e-9, 0.5)
    assert tu.get_atol() == 1e-20 and tu.get_rtol() == 1e-5
    assert tu.get_rtol(dtype=f16) == 1e-2 and tu.get_atol(0.3) == 0.3
    assert tu.default_numeric_eps()[f32] == 2.0 ** -9
    assert tu.effective_dtype(mx.nd.ones((2,), dtype="float16")) == f16
    assert tu.default_dtype() is onp.float32


def test_assert_almost_equal_passes_within_tolerance_for_every_array_kind():
    tu.assert_almost_equal(mx.nd.array([1.0, 2.0]), onp.array([1.0, 2.00001]))
    tu.assert_almost_equal(mx.np.array([1.0, 2.0]), mx.nd.array([1.0, 2.0009]))
    tu.assert_almost_equal(onp.ones((2, 3), onp.float32), onp.ones(3, onp.float32))
    tu.assert_almost_equal(1.0, onp.float64(1.0))
    tu.assert_almost_equal(onp.array([onp.nan, 1.0]), onp.array([onp.nan, 1.0]), equal_nan=True)
    tu.assert_allclose(onp.array([1.0, 2.0]), onp.array([1.0, 2.0 + 1e-8]))


def test_assert_almost_equal_fails_with_mxnets_message(capsys):
    message = _message(lambda: tu.assert_almost_equal(
        onp.array([1.0, 2.0, 3.0], onp.float32), onp.array([1.0, 2.1, 3.0])))
    assert message == (
        "\nItems are not equal:\nError 82.644628 exceeds tolerance rtol=1.000000e-04, "
        "atol=1.000000e-03 (mismatch 33.333333%).\nLocation of maximum error: (1,), "
        "a=2.00000000, b=2.10000000\n ACTUAL: array([1., 2., 3.], dtype=float32)\n "
        "DESIRED: array([1. , 2.1, 3. ])")
    assert "1: Error 82.644628  Location of error: (1,), a=2.00000000, b=2.10000000" \
        in capsys.readouterr().out
    # more than mismatches[1] = 10 bad elements: "at least" 11 of 30
    a = onp.arange(30, dtype=onp.float64).reshape(5, 6)
    message = _message(lambda: tu.assert_almost_equal(a, a * 1.01, names=("P", "Q")))
    assert message.startswith(
        "\nItems are not equal:\nError 990.099010 exceeds tolerance rtol=1.000000e-05, "
        "atol=1.000000e-20 (mismatch at least 36.666667%).\nLocation of maximum error: "
        "(2, 5), P=17.00000000, Q=17.17000000\n")
    message = _message(lambda: tu.assert_almost_equal(onp.array([onp.nan, 1.0]),
                                                     onp.array([onp.nan, 1.0])))
    assert "Error nan exceeds tolerance rtol=1.000000e-05, atol=1.000000e-20 (mismatch " \
        "50.000000%).\nLocation of maximum error: (0,), a=nan, b=nan" in message
    message = _message(lambda: tu.assert_almost_equal(onp.float32(1.0), onp.float32(1.5)))
    assert "Error 434.782609 exceeds tolerance rtol=1.000000e-04, atol=1.000000e-03.\n" \
        in message


def test_assert_almost_equal_exact_dtypes_and_shapes():
    with pytest.raises(AssertionError,
                       match=r"Error 100000000000000000000\.000000 exceeds tolerance "
                             r"rtol=0\.000000e\+00, atol=0\.000000e\+00 \(mismatch 50\.000000%\)"):
        tu.assert_almost_equal(onp.array([1, 2], onp.int32), onp.array([1, 3], onp.int32))
    with pytest.raises(AssertionError, match="Arrays are not equal"):
        tu.assert_almost_equal(onp.array([True, False]), onp.array([True, True]))
    message = _message(lambda: tu.assert_almost_equal(
        onp.ones((2, 3), onp.float32), onp.ones((3,), onp.float32), use_broadcast=False))
    assert message.startswith("\nItems are not equal: a.shape = (2, 3) and b.shape = (3,) "
                              "are not equal\n")
    # float16's defaults (1e-2, 1e-1) accept what float32's reject
    tu.assert_almost_equal(onp.array([1.0, 2.0], onp.float16), onp.array([1.05, 2.0],
                                                                       onp.float16))
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(onp.array([1.0, 2.0], onp.float32),
                               onp.array([1.05, 2.0], onp.float32))
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(onp.array([1.0, 2.0]), onp.array([1.0, 2.0001]),
                               rtol={onp.dtype(onp.float64): 1e-6})


def test_almost_equal_and_same():
    # almost_equal alone takes float64's defaults whatever the dtypes
    assert not tu.almost_equal(onp.float32([1.0]), onp.float32([1.0001]))
    assert tu.almost_equal(onp.float32([1.0]), onp.float32([1.0001]), rtol=1e-3)
    assert tu.almost_equal(mx.nd.array([1.0, 2.0]), onp.array([1.0, 2.0]))
    assert tu.same(mx.nd.array([1.0, 2.0]), onp.array([1.0, 2.0]))
    assert not tu.same(onp.array([1.0, 2.0]), onp.array([1.0, 2.0, 3.0]))


def test_assert_exception_and_retry():
    tu.assert_exception(int, ValueError, "x")
    with pytest.raises(AssertionError, match="int did not raise ValueError"):
        tu.assert_exception(int, ValueError, "3")
    calls = []

    @tu.retry(3)
    def flaky():
        calls.append(1)
        assert len(calls) == 3

    flaky()
    assert len(calls) == 3
    calls.clear()

    @tu.retry(2)
    def always():
        calls.append(1)
        assert False, "still wrong"

    with pytest.raises(AssertionError, match="still wrong"):
        always()
    assert len(calls) == 2


def test_random_helpers_draw_from_numpys_generator():
    onp.random.seed(3)
    # the draws MXNet 1.9.1's helpers make after numpy.random.seed(3)
    assert tu.rand_shape_2d() == (9, 10)
    assert tu.rand_shape_3d() == (4, 9, 9)
    assert tu.rand_shape_nd(4) == (1, 6, 4, 10)
    assert tu.random_sample([1, 2, 3, 4, 5], 3) == [1, 4, 5]
    for _ in range(20):
        assert all(0 <= d <= 2 for d in tu.rand_shape_nd(3, 2, allow_zero_size=True))
        assert all(1 <= d <= 2 for d in tu.rand_shape_2d(2, 2))
    onp.random.seed(0)
    x = tu.rand_ndarray((2, 3))
    onp.random.seed(0)
    assert isinstance(x, mx.nd.NDArray) and x.dtype == onp.float32
    onp.testing.assert_array_equal(x.asnumpy(), onp.random.randn(2, 3).astype(onp.float32))
    a, b = tu.random_arrays((2,), ())
    assert a.shape == (2,) and b.shape == () and b.dtype == onp.float32
    (u,) = tu.random_uniform_arrays((100,), low=2, high=3)
    assert u.min() >= 2 and u.max() < 3
    with pytest.raises(TypeError, match="unexpected argument"):
        tu.random_uniform_arrays((2,), lo=1)


def test_reductions_and_matrices():
    onp.testing.assert_array_equal(tu.collapse_sum_like(onp.ones((2, 3, 4)), (3, 1)),
                                   onp.full((3, 1), 8.0))
    x = onp.arange(24).reshape(2, 3, 4)
    onp.testing.assert_array_equal(tu.np_reduce(x, [0, 2], True, onp.sum),
                                   x.sum(axis=(0, 2), keepdims=True))
    onp.testing.assert_array_equal(tu.np_reduce(x, None, False, onp.max), 23)
    onp.random.seed(1)
    m = tu.new_matrix_with_real_eigvals_nd((2, 3, 3))
    assert m.shape == (2, 3, 3)
    assert onp.allclose(onp.linalg.eigvals(m).imag, 0)
    s = tu.new_sym_matrix_with_real_eigvals_2d(4)
    onp.testing.assert_allclose(s, s.T, atol=1e-12)
    q = tu.new_orthonormal_matrix_2d(3)
    onp.testing.assert_allclose(q @ q.T, onp.eye(3), atol=1e-12)


def test_check_numeric_gradient_passes_on_correct_gradients():
    onp.random.seed(0)
    x = mx.sym.Variable("x")
    tu.check_numeric_gradient(mx.sym.tanh(x), [onp.array([[0.1, -0.5], [0.3, 0.9]])])
    tu.check_numeric_gradient(mx.sym.tanh(x), {"x": onp.array([0.2, -0.3])},
                              dtype=onp.float64, rtol=1e-6, atol=1e-8)
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    tu.check_numeric_gradient(fc, [onp.random.randn(2, 4), onp.random.randn(3, 4),
                                   onp.random.randn(3)],
                              grad_nodes={"data": "write", "fc_weight": "add",
                                          "fc_bias": "null"})
    bn = mx.sym.BatchNorm(data, name="bn", fix_gamma=False)
    tu.check_numeric_gradient(bn, [onp.random.randn(4, 3), onp.random.rand(3) + 0.5,
                                   onp.random.randn(3)],
                              aux_states=[onp.zeros(3), onp.ones(3)], numeric_eps=1e-3,
                              rtol=1e-2, atol=1e-3)


def test_gradient_checks_of_scalars_and_empty_arrays():
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    tu.check_numeric_gradient(x * y, [onp.array(0.7), onp.array(1.3)], dtype=onp.float64)
    # a 0-d difference is reported without a location, as MXNet's
    with pytest.raises(AssertionError, match=r"Error 100000\.000000 exceeds tolerance "
                                             r"rtol=1\.000000e-05, atol=1\.000000e-20\.\n"):
        tu.check_numeric_gradient(x * mx.sym.BlockGrad(x), [onp.array(0.7)], dtype=onp.float64)
    tu.check_numeric_gradient(mx.sym.exp(x), {"x": onp.zeros((0, 3))})
    tu.check_symbolic_backward(mx.sym.sum(x), [onp.ones((0, 2))], [onp.array(1.0)],
                               [onp.zeros((0, 2))])


def test_check_numeric_gradient_fails_on_a_wrong_gradient():
    # x * BlockGrad(x): backward gives x, the function's derivative is 2x. MXNet 1.9.1 with
    # numpy.random.seed(0) reports the same worst element and values.
    x = mx.sym.Variable("x")
    onp.random.seed(0)
    message = _message(lambda: tu.check_numeric_gradient(
        x * mx.sym.BlockGrad(x), [onp.array([[0.5, -1.0], [2.0, 1.5]])]))
    assert "(mismatch 100.000000%).\nLocation of maximum error: (1, 0), " \
        "NUMERICAL_x=2.81103516, BACKWARD_x=1.40552676" in message
    with pytest.raises(ValueError, match="do not match"):
        tu.check_numeric_gradient(x * 2, {"y": onp.ones(2)})
    with pytest.raises(AssertionError, match="too small"):
        tu.check_numeric_gradient(x * 2, [onp.ones(2)], numeric_eps=1e-6)
    with pytest.raises(ValueError, match="one output"):
        tu.check_numeric_gradient(mx.sym.Group([x * 2, x * 3]), [onp.ones(2)])


def test_check_symbolic_forward_and_backward():
    lhs, rhs = mx.sym.Variable("lhs"), mx.sym.Variable("rhs")
    mat1, mat2 = onp.array([[1, 2], [3, 4]]), onp.array([[5, 6], [7, 8]])
    outputs = tu.check_symbolic_forward(mx.sym.dot(lhs, rhs), [mat1, mat2],
                                        [onp.array([[19, 22], [43, 50]])])
    onp.testing.assert_array_equal(outputs[0].asnumpy(), mat1 @ mat2)
    product = lhs * rhs
    tu.check_symbolic_forward(product, {"lhs": mat1, "rhs": mat2},
                              {product.list_outputs()[0]: mat1 * mat2})
    ograd = onp.array([[1.0, -1.0], [0.5, 2.0]])
    grads = tu.check_symbolic_backward(product, [mat1, mat2], [ograd],
                                       [ograd * mat2, ograd * mat1])
    onp.testing.assert_array_equal(grads["rhs"].asnumpy(), ograd * mat1)
    tu.check_symbolic_backward(product, [mat1, mat2], [ograd],
                               {"lhs": ograd * mat2, "rhs": ograd * mat1},
                               grad_req={"lhs": "add", "rhs": "null"})
    x = mx.sym.Variable("x")
    message = _message(lambda: tu.check_symbolic_forward(
        x * 2, [onp.array([1.0, 2.0])], [onp.array([2.0, 5.0])]))
    assert "Error 714.285714 exceeds tolerance rtol=1.000000e-04, atol=1.000000e-03 " \
        "(mismatch 50.000000%)." in message and "EXPECTED_" in message
    message = _message(lambda: tu.check_symbolic_backward(
        x * 2, [onp.array([1.0, 2.0])], [onp.array([1.0, 1.0])], [onp.array([2.0, 3.0])]))
    assert "Location of maximum error: (1,), EXPECTED_x=3.00000000, BACKWARD_x=2.00000000" \
        in message


def test_simple_forward_and_check_speed():
    x = mx.sym.Variable("x")
    onp.testing.assert_array_equal(tu.simple_forward(x * 3, x=onp.array([1.0, 2.0])),
                                   [3.0, 6.0])
    seconds = tu.check_speed(mx.sym.tanh(x), location={"x": onp.ones((2, 2))}, N=2)
    assert seconds >= 0
    with pytest.raises(ValueError, match='typ can only be "whole" or "forward"'):
        tu.check_speed(mx.sym.tanh(x), location={"x": onp.ones(2)}, typ="both")


def test_check_consistency_compares_dtypes():
    fc = mx.sym.FullyConnected(num_hidden=3, name="fc")
    ctx_list = [{"ctx": mx.cpu(0), "fc_data": (2, 4), "type_dict": {"fc_data": onp.float64}},
                {"ctx": mx.cpu(0), "fc_data": (2, 4), "type_dict": {"fc_data": onp.float32}}]
    onp.random.seed(0)
    truth = tu.check_consistency(fc, ctx_list)
    assert sorted(truth) == ["fc_bias", "fc_data", "fc_output", "fc_weight"]
    assert truth["fc_output"].dtype == onp.float64
    # weight gradient = head^T data, with head = the output itself (cast to float32)
    onp.random.seed(0)
    args = {k: onp.random.normal(size=s) for k, s in
            sorted({"fc_bias": (3,), "fc_data": (2, 4), "fc_weight": (3, 4)}.items())}
    out = args["fc_data"] @ args["fc_weight"].T + args["fc_bias"]
    head = out.astype(onp.float32).astype(onp.float64)
    onp.testing.assert_allclose(truth["fc_weight"].asnumpy(), head.T @ args["fc_data"],
                                rtol=1e-12)
    with pytest.raises(ValueError, match="at least two"):
        tu.check_consistency(fc, ctx_list[:1])


def test_check_gluon_hybridize_consistency():
    def builder(prefix):
        net = mx.gluon.nn.HybridSequential(prefix=prefix)
        with net.name_scope():
            net.add(mx.gluon.nn.Dense(3, in_units=4), mx.gluon.nn.Activation("tanh"))
        return net

    data = [mx.np.array(onp.random.RandomState(0).randn(2, 4))]
    tu.check_gluon_hybridize_consistency(builder, data)
    with pytest.raises(AssertionError):
        tu.check_gluon_hybridize_consistency(builder, data, numpy_func=lambda x: x[:, :3])
    assert not mx.npx.is_np_array_requested()


def test_contexts_environment_and_what_fastgrad_lacks(tmp_path):
    assert tu.default_context() == mx.cpu()
    assert list(tu.list_gpus()) == []
    assert tu.is_op_runnable() and not tu.has_tvm_ops()
    tu.set_default_context(mx.cpu(0))
    assert tu.default_context() == mx.cpu(0)
    with pytest.raises(Exception, match="CPU only"):
        tu.set_default_context(mx.gpu(0))
    name = "FASTGRAD_TEST_UTILS_VARIABLE"
    os.environ.pop(name, None)
    with tu.environment(name, "1"):
        assert os.environ[name] == "1"
        with tu.environment({name: None}):
            assert name not in os.environ
        assert os.environ[name] == "1"
    assert name not in os.environ
    for call in (lambda: tu.rand_ndarray((2, 2), stype="csr"),
                 lambda: tu.rand_sparse_ndarray((2, 2), "row_sparse"),
                 lambda: tu.create_sparse_array((2, 2), "csr")):
        with pytest.raises(NotImplementedError, match="no sparse storage"):
            call()
    # an existing file is not downloaded again
    path = tmp_path / "file.txt"
    path.write_text("x")
    assert tu.download("http://example.invalid/file.txt", dirname=str(tmp_path)) == str(path)
    assert tu.download_model("no-such-model") == (None, 0)
    a = mx.nd.zeros((2,))
    assert tu.same_array(a, a) and not tu.same_array(a, a.copy())


def test_star_import_hands_out_what_mxnets_does():
    names = {}
    exec("from fastgrad.test_utils import *", names)
    assert names["rnd"] is onp.random and names["np"] is onp
    assert names["npt"] is onp.testing
    assert isinstance(names["array"]([1.0, 2.0]), mx.nd.NDArray)
    assert names["assert_almost_equal"] is tu.assert_almost_equal
    assert names["Symbol"] is mx.sym.Symbol
    import scipy.stats
    assert names["ss"] is scipy.stats
