"""MXNet programs run unchanged: the imperative surface of issue 13, checked with values.

Reference values are closed forms, finite differences, or real MXNet 1.9.1 output stored in
``tests/fixtures`` (made by the scripts there; the tests do not need MXNet).
"""
import json
import os
import sys

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd, nd, np, npx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _helpers import assert_close, f64, numerical_grad  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


# ---------------------------------------------------------------- autograd.grad returns a list
@pytest.mark.parametrize("as_list", [False, True])
def test_grad_returns_a_list_for_one_variable_or_a_list(as_list):
    x = f64([0.5, -2.0])
    x.attach_grad()
    with autograd.record():
        y = np.sin(x) * x
    out = autograd.grad(y, [x] if as_list else x)
    assert isinstance(out, list) and len(out) == 1
    xn = onp.array([0.5, -2.0])
    assert_close(out[0], onp.cos(xn) * xn + onp.sin(xn))


def test_grad_create_graph_list_indexes_like_mxnet():
    """MXNet's test_gradient: dz/dx of exp(x) + x at 1, then its derivative into x.grad."""
    x = nd.ones((1,))
    x.attach_grad()
    with autograd.record():
        z = nd.elemwise_add(nd.exp(x), x)
    dx, = autograd.grad(z, [x], create_graph=True)
    assert abs(dx.asscalar() - (onp.e + 1)) < 1e-6
    dx.backward()
    assert abs(x.grad.asscalar() - onp.e) < 1e-6


def test_star_import_gives_ndarray():
    namespace = {}
    exec("from fastgrad.autograd import *", namespace)
    assert namespace["NDArray"] is nd.NDArray
    assert namespace["record"] is autograd.record


# ---------------------------------------------------------------- integer variables
def test_integer_variable_gets_integer_gradient():
    x = nd.array([1, 2, 3], dtype="int32")
    x.attach_grad()
    with autograd.record():
        y = x * 2 + x * x
    y.backward()
    assert x.grad.dtype == onp.int32
    onp.testing.assert_array_equal(x.grad.asnumpy(), [4, 6, 8])        # 2 + 2x (MXNet)


def test_integer_variable_through_a_float_cast_gets_the_truncated_gradient():
    """MXNet casts the float gradient back to the variable's type: 2.5 becomes 2."""
    x = nd.array([1, 2, 3], dtype="int32")
    x.attach_grad()
    with autograd.record():
        y = x.astype("float32") * 2.5
    y.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), [2, 2, 2])


def test_bool_variable_is_refused():
    with pytest.raises(TypeError, match="numeric"):
        np.array(onp.array([True, False])).attach_grad()


# ---------------------------------------------------------------- float index arrays
def test_float_index_arrays_index_like_integers_and_differentiate():
    y_hat = np.array([[0.1, 0.3, 0.6], [0.3, 0.2, 0.5]])
    y_hat.attach_grad()
    y = np.array([0, 2])
    assert y.dtype == onp.float32
    with autograd.record():
        picked = y_hat[[0, 1], y]
        loss = -np.log(picked).sum()
    assert_close(picked, onp.array([0.1, 0.5], dtype=onp.float32))
    loss.backward()
    expected = onp.zeros((2, 3), dtype=onp.float32)
    expected[0, 0], expected[1, 2] = -1 / 0.1, -1 / 0.5
    assert_close(y_hat.grad, expected, rtol=1e-6)


@pytest.mark.parametrize("index", [[0.5, 1.0], [onp.nan], [1.0, onp.inf]])
def test_non_integral_float_index_raises_index_error_naming_it(index):
    a = np.arange(6).reshape(3, 2)
    with pytest.raises(IndexError, match="integers") as info:
        a[np.array(index)]
    assert isinstance(info.value, mx.base.MXNetError)


def test_float_index_in_assignment():
    a = np.zeros((3,))
    a[np.array([2.0, 0.0])] = np.array([5.0, 7.0])
    assert_close(a, onp.array([7.0, 0.0, 5.0], dtype=onp.float32))


# ---------------------------------------------------------------- recorded assignment
def test_assignment_into_intermediate_is_recorded():
    xn, wn = onp.array([1.0, 2.0, 3.0]), 5.0
    x, w = f64(xn), f64([wn])
    x.attach_grad()
    w.attach_grad()
    with autograd.record():
        h = x * 2
        h[1] = w[0] * 3
        z = (h * h).sum()
    assert_close(h, [2.0, 15.0, 6.0])
    z.backward()
    assert_close(x.grad, [8.0, 0.0, 24.0])        # 2 * 2h where h was kept
    assert_close(w.grad, [90.0])                  # 2 * 15 * 3


def test_assignment_into_constant_buffer_builds_outputs():
    """The RNN pattern: rows of a zeros buffer filled inside record()."""
    xn = onp.array([0.3, -0.7])
    x = f64(xn)
    x.attach_grad()
    weights = onp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])

    def f(xv):
        out = onp.zeros((3, 2))
        out[0] = xv * 3
        out[1:] = onp.sin(xv) * xv[0]
        return out * weights

    with autograd.record():
        out = np.zeros((3, 2), dtype="float64")
        out[0] = x * 3
        out[1:] = np.sin(x) * x[0]
        loss = (out * np.array(weights)).sum()
    loss.backward()
    assert_close(out * np.array(weights), f(xn))
    (expected,) = numerical_grad(f, xn)
    assert_close(x.grad, expected, rtol=1e-6)


def test_assignment_with_broadcast_and_cast_value():
    x = f64([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        buf = np.zeros((2, 3), dtype="float32")
        buf[:, 1:] = (x * x).reshape(2, 1)          # broadcast along the columns, cast to f32
        s = buf.sum()
    s.backward()
    assert buf.dtype == onp.float32
    assert_close(x.grad, [2 * 2 * 1.0, 2 * 2 * 2.0])


def test_assignment_is_differentiable_twice():
    x = f64([0.5])
    x.attach_grad()
    with autograd.record():
        h = np.zeros((2,), dtype="float64")
        h[0] = x[0] ** 3
        h[1] = 1.0
        (d1,) = autograd.grad(h.sum(), [x], create_graph=True)
    (d2,) = autograd.grad(d1, [x])
    assert_close(d1, [3 * 0.25])
    assert_close(d2, [6 * 0.5])


def test_assignment_into_variable_raises():
    x = f64([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        with pytest.raises(mx.base.MXNetError, match="variable"):
            x[0] = 3.0


def test_assignment_into_saved_value_raises_at_backward():
    x = f64([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        h = x * 2
        z = (h * h).sum()      # multiply saved h
        h[0] = 1.0
    with pytest.raises(RuntimeError, match="modified in place"):
        z.backward()


def test_assignment_into_shared_memory_raises():
    x = f64([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        h = x * 2
        view = h[0:1]   # noqa: F841  (a view of h's memory)
        with pytest.raises(RuntimeError, match="shares"):
            h[1] = 7.0


def test_assignment_with_repeated_indices_raises():
    x = f64([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        h = x * 2
        with pytest.raises(IndexError, match="repeated"):
            h[onp.array([0, 0])] = np.array([1.0, 2.0], dtype="float64")


def test_assignment_outside_record_is_not_recorded():
    x = f64([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        h = x * 2
    h[0] = 10.0
    assert_close(h, [10.0, 4.0])
    assert h.version == 1


# ---------------------------------------------------------------- attach_grad after record
def test_attach_grad_after_record_keeps_the_intermediate_in_the_graph():
    x = f64([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        h = x * x
        z = (h * 3).sum()
    h.attach_grad()
    z.backward()
    assert_close(h.grad, [3.0, 3.0])
    assert_close(x.grad, [6.0, 12.0])          # still reaches x through h


def test_drop_grad_undoes_attach_grad():
    x = f64([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        h = x * x
        z = (h * 3).sum()
    h.attach_grad()
    h.drop_grad()
    assert h.grad is None
    z.backward()
    assert h.grad is None
    assert_close(x.grad, [6.0, 12.0])
    x.drop_grad()
    assert x.grad is None and x.grad_req == "null"
    with autograd.record():
        y = x * 2
    with pytest.raises(RuntimeError, match="no recorded history"):
        y.backward()


def test_attached_intermediate_whose_history_was_freed_acts_as_a_leaf():
    x = f64([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        h = x * x
        z = (h * 3).sum()
    z.backward()
    h.attach_grad()
    with autograd.record():
        w = (h * h).sum()
    w.backward()
    assert_close(h.grad, [2.0, 8.0])
    assert_close(x.grad, [6.0, 12.0])          # from the first pass only


def test_retain_and_drop_grad_on_head_intermediate_and_variable():
    """MXNet 2.x's retain/drop grad: the head, an intermediate and a variable."""
    xn, yn = onp.array([[1.0, 2.0], [3.0, 4.0]]), onp.array([[5.0, 6.0], [7.0, 8.0]])
    x, y = f64(xn), f64(yn)
    x.attach_grad()
    y.attach_grad()
    with autograd.record():
        u = x * y
        z = u * x
    u.attach_grad()
    z.attach_grad()
    z.backward(f64(onp.full((2, 2), 10.0)), retain_graph=True)
    assert_close(z.grad, onp.full((2, 2), 10.0))
    assert_close(u.grad, 10 * xn)
    assert_close(y.grad, 10 * xn * xn)
    assert_close(x.grad, 10 * 2 * xn * yn)
    u.drop_grad()
    z.drop_grad()
    y.drop_grad()
    z.backward(f64(onp.full((2, 2), 0.1)))
    assert u.grad is None and z.grad is None and y.grad is None
    assert_close(x.grad, 0.1 * 2 * xn * yn)


def test_mark_variables_on_an_intermediate_keeps_its_history():
    x = f64(onp.ones((3, 2)))
    x.attach_grad()
    with autograd.record():
        u = x * 3
        z = u * x
    ubuf = np.zeros((3, 2), dtype="float64")
    autograd.mark_variables(u, ubuf)
    z.backward()
    assert_close(ubuf, onp.ones((3, 2)))          # dz/du = x
    assert_close(x.grad, onp.full((3, 2), 6.0))   # d(3x^2)/dx


def test_fresh_grad_flag():
    """MXNet's test_detach_updated_grad."""
    x, y = nd.ones((2, 2)), nd.ones((2, 2))
    dx, dy = nd.zeros_like(x), nd.zeros_like(y)
    autograd.mark_variables([x, y], [dx, dy])
    assert x._fresh_grad is False and y._fresh_grad is False
    with autograd.record():
        y2 = (x + 2) + y
    y2.backward()
    assert x._fresh_grad is True and y._fresh_grad is True
    x._fresh_grad = y._fresh_grad = False
    with autograd.record():
        y2 = (x + 2).detach() + y
    y2.backward()
    assert y._fresh_grad is True and x._fresh_grad is False


# ---------------------------------------------------------------- Function and grad_req null
class _ReturnsNumpy(autograd.Function):
    def forward(self, x):
        return x * 2

    def backward(self, dy):
        return dy.asnumpy()


class _ReturnsNone(autograd.Function):
    def forward(self, x, y):
        return x * y

    def backward(self, dz):
        return dz, None


def test_function_backward_returning_numpy_raises_type_error():
    x = f64([1.0])
    x.attach_grad()
    with autograd.record():
        y = _ReturnsNumpy()(x)
    with pytest.raises(TypeError, match=r"_ReturnsNumpy.*gradient 0 is a ndarray") as info:
        y.backward()
    assert isinstance(info.value, mx.base.MXNetError)


def test_function_backward_returning_none_raises_type_error():
    x, y = f64([1.0]), f64([2.0])
    x.attach_grad()
    y.attach_grad()
    with autograd.record():
        z = _ReturnsNone()(x, y)
    with pytest.raises(TypeError, match=r"_ReturnsNone.*gradient 1 is a NoneType"):
        z.backward()


def test_grad_with_respect_to_null_variable_raises():
    x = f64([1.0, 2.0])
    x.attach_grad(grad_req="null")
    with autograd.record():
        z = (x * x).sum()
    with pytest.raises(ValueError, match="grad_req is 'null'") as info:
        autograd.grad(z, [x])
    assert isinstance(info.value, mx.base.MXNetError)


# ---------------------------------------------------------------- MXNetError
def test_mxnet_error_is_a_runtime_error_and_wraps_python_types():
    assert issubclass(mx.base.MXNetError, RuntimeError)
    assert issubclass(mx.base.MXNetValueError, ValueError)
    x = f64([1.0])
    x.attach_grad()
    with autograd.record():
        y = x * x
    y.backward()
    with pytest.raises(mx.base.MXNetError, match="retain_graph"):
        y.backward()
    u = f64([1.0])
    u.attach_grad()
    with autograd.record():
        y = x * 2
    for kind in (ValueError, mx.base.MXNetError):
        with pytest.raises(kind, match="not reached"):
            autograd.grad(y, [x, u])


# ---------------------------------------------------------------- reshape codes
def _fixture():
    with open(os.path.join(FIXTURES, "mxnet_reshape_codes.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("case", _fixture()["legacy"], ids=str)
def test_nd_reshape_codes_match_mxnet(case):
    ishape, target, reverse, expected = case
    data = onp.arange(onp.prod(ishape), dtype=onp.float32).reshape(ishape)
    a = nd.array(data)
    out = a.reshape(tuple(target), reverse=reverse)
    assert out.shape == tuple(expected)
    assert_close(out, data.reshape(expected))
    assert nd.reshape(a, shape=tuple(target), reverse=reverse).shape == tuple(expected)


@pytest.mark.parametrize("case", _fixture()["npx"], ids=str)
def test_npx_reshape_codes_match_mxnet(case):
    ishape, target, reverse, expected = case
    a = np.zeros(tuple(ishape))
    assert npx.reshape(a, tuple(target), reverse=reverse).shape == tuple(expected)


def test_reshape_codes_differentiate():
    x = f64(onp.arange(6.0).reshape(2, 3)).as_nd_ndarray()
    x.attach_grad()
    with autograd.record():
        y = x.reshape((0, -1, 1)) * nd.array(onp.arange(6.0).reshape(2, 3, 1), dtype="float64")
    y.backward()
    assert_close(x.grad, onp.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("target, message", [
    ((5, -1), "not a multiple"), ((-1, -1), "only one"), ((0, 0, 0, 0), "more dimensions"),
    ((-4, -1, -1, -2), "both split sizes"), ((-4, 5, -1, -2), "cannot split"),
    ((-7,), "not a reshape code"),
])
def test_bad_reshape_codes_raise(target, message):
    with pytest.raises(ValueError, match=message):
        nd.zeros((2, 3, 4)).reshape(target)


def test_numpy_reshape_refuses_mxnet_codes():
    with pytest.raises(ValueError, match="negative size -2"):
        np.zeros((2, 3)).reshape((-2,))
    with pytest.raises(ValueError, match="npx.reshape"):
        np.zeros((2, 3)).reshape((6,), reverse=True)


# ---------------------------------------------------------------- legacy nd operators
def test_split_with_squeeze_axis_and_head_gradients():
    """MXNet's test_out_grads: split into rows, one head gradient per row."""
    x = nd.ones((3, 5))
    dx = nd.zeros_like(x)
    autograd.mark_variables([x], [dx])
    with autograd.record():
        a, b, c = nd.split(x, axis=0, num_outputs=3, squeeze_axis=True)
    assert a.shape == (5,)
    autograd.backward([a, b, c], [None, nd.array([1, 2, 3, 4, 5]), nd.array([5, 4, 3, 2, 1])])
    onp.testing.assert_array_equal(dx.asnumpy(), [[1] * 5, [1, 2, 3, 4, 5], [5, 4, 3, 2, 1]])


def test_split_defaults_and_errors():
    a = nd.array(onp.arange(12.0).reshape(2, 6))
    parts = nd.split(a, 3)                      # axis=1 by default, as in MXNet
    assert [p.shape for p in parts] == [(2, 2)] * 3
    assert_close(parts[1], onp.arange(12.0).reshape(2, 6)[:, 2:4])
    assert isinstance(nd.split(a, num_outputs=1), nd.NDArray)
    with pytest.raises(ValueError, match="equal parts"):
        nd.split(a, num_outputs=4)
    with pytest.raises(ValueError, match="squeeze_axis"):
        nd.split(a, num_outputs=3, squeeze_axis=True)


def test_concat_default_dim_is_one_and_differentiates():
    a, b = nd.array([[1.0, 2.0]]), nd.array([[3.0]])
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        c = nd.concat(a, b)
        loss = (c * nd.array([[1.0, 2.0, 3.0]])).sum()
    assert_close(c, [[1.0, 2.0, 3.0]])
    loss.backward()
    assert_close(a.grad, [[1.0, 2.0]])
    assert_close(b.grad, [[3.0]])
    assert nd.concat(a, a, dim=0).shape == (2, 2)


def test_nd_stack_takes_the_arrays_positionally_as_mxnet():
    a, b = nd.array([1.0, 2.0], dtype="float64"), nd.array([3.0, 4.0], dtype="float64")
    a.attach_grad()
    with autograd.record():
        s = nd.stack(a, b, axis=1)
        loss = (s * nd.array([[1.0, 2.0], [3.0, 4.0]], dtype="float64")).sum()
    loss.backward()
    assert type(s) is nd.NDArray and s.shape == (2, 2)
    assert_close(s, [[1.0, 3.0], [2.0, 4.0]])
    assert_close(a.grad, [1.0, 3.0])
    assert nd.stack([a, b]).shape == (2, 2) and nd.stack(a).shape == (1, 2)
    with pytest.raises(mx.base.MXNetError, match="nd.stack: num_args=3 but 2"):
        nd.stack(a, b, num_args=3)


def test_slice_axis_and_slice_like():
    data = onp.arange(24.0).reshape(2, 3, 4)
    a = nd.array(data)
    assert_close(nd.slice_axis(a, axis=1, begin=0, end=2), data[:, 0:2])
    assert_close(nd.slice_axis(a, axis=-1, begin=-2, end=None), data[..., 2:])
    assert_close(a.slice_axis(2, 1, 3), data[..., 1:3])
    assert_close(nd.slice_like(a, nd.zeros((1, 2, 3))), data[:1, :2, :3])
    assert_close(nd.slice_like(a, nd.zeros((1, 2, 3)), axes=(1,)), data[:, :2])
    assert_close(npx.slice_like(np.array(data), np.zeros((2, 1, 4))), data[:, :1])
    with pytest.raises(ValueError, match="select nothing"):
        nd.slice_axis(a, axis=0, begin=1, end=1)
    with pytest.raises(ValueError, match="larger"):
        nd.slice_like(a, nd.zeros((3, 3, 4)))


def test_slice_axis_gradient():
    x = nd.array(onp.arange(6.0).reshape(2, 3))
    x.attach_grad()
    with autograd.record():
        y = nd.slice_axis(x, axis=1, begin=1, end=3) * 2
    y.backward()
    assert_close(x.grad, [[0.0, 2.0, 2.0], [0.0, 2.0, 2.0]])


def test_flatten_radians_rcbrt_and_comparisons():
    a = nd.array(onp.arange(24.0).reshape(2, 3, 4))
    assert a.flatten().shape == (2, 12) and nd.flatten(a).shape == (2, 12)
    assert nd.Flatten(nd.ones((5,))).shape == (5, 1)
    assert_close(nd.radians(nd.array([180.0])), [onp.pi], rtol=1e-6)
    assert_close(nd.degrees(nd.array([onp.pi])), [180.0], rtol=1e-6)
    assert_close(nd.rcbrt(nd.array([8.0, 27.0])), [0.5, 1 / 3], rtol=1e-6)
    eq = nd.equal(nd.array([1, 2]), nd.array([1, 3]))
    assert eq.dtype == onp.float32
    assert_close(eq, [1.0, 0.0])
    assert_close(nd.lesser(nd.array([1, 2]), nd.array([2, 2])), [1.0, 0.0])
    assert_close(nd.logical_not(nd.array([0, 2])), [1.0, 0.0])
    assert nd.nansum(nd.array([1.0, onp.nan])).shape == (1,)
    assert_close(nd.nansum(nd.array([1.0, onp.nan])), [1.0])
    padded = nd.pad(nd.ones((1, 1, 2, 2)), mode="constant", pad_width=(0, 0, 0, 0, 1, 1, 1, 1))
    assert padded.shape == (1, 1, 4, 4) and float(padded.sum().asscalar()) == 4.0


def test_rcbrt_gradient():
    x = f64([8.0]).as_nd_ndarray()
    x.attach_grad()
    with autograd.record():
        y = nd.rcbrt(x)
    y.backward()
    assert_close(x.grad, [-(1 / 3) * 8.0 ** (-4 / 3)])


def test_random_aliases_with_mxnet_arguments():
    mx.random.seed(7)
    u = nd.uniform(low=2, high=3, shape=(1000,))
    mx.random.seed(7)
    u2 = nd.random_uniform(low=2, high=3, shape=(1000,))
    assert u.dtype == onp.float32 and u.shape == (1000,)
    onp.testing.assert_array_equal(u.asnumpy(), u2.asnumpy())
    assert 2 <= float(u.min().asscalar()) and float(u.max().asscalar()) < 3
    n = nd.normal(loc=10, scale=0.1, shape=(2, 500))
    assert n.shape == (2, 500) and abs(float(n.mean().asscalar()) - 10) < 0.05
    assert nd.random_normal(loc=0, scale=1, shape=(3,)).dtype == onp.float32


def test_tostype_and_stype():
    x = nd.array([1.0, 2.0])
    assert x.stype == "default"
    d = x.tostype("default")
    assert d.stype == "default" and d is not x
    assert_close(d, [1.0, 2.0])
    with pytest.raises(ValueError, match="dense"):
        x.tostype("csr")


# ---------------------------------------------------------------- devices and small names
def test_gpu_can_be_named_but_not_used():
    g = mx.gpu(1)
    assert str(g) == "gpu(1)" and npx.gpu(0) == mx.gpu(0) and npx.num_gpus() == 0
    assert mx.device.Device is mx.Context
    x = np.array([1.0])
    for place in (lambda: np.array([1.0], ctx=g), lambda: nd.zeros((2,), ctx=g),
                  lambda: x.as_in_ctx(g), lambda: x.to_device(g), lambda: x.copyto(g),
                  lambda: nd.uniform(shape=(2,), ctx=g), lambda: x.as_in_context(g)):
        with pytest.raises(ValueError, match="CPU only"):
            place()
    assert x.as_in_ctx(mx.cpu()) is x and x.to_device(mx.cpu()) is x


def test_set_np_dtype_makes_float64_the_default():
    try:
        npx.set_np(dtype=True)
        assert npx.is_np_default_dtype()
        assert np.array([1, 2]).dtype == onp.float64
        assert np.zeros((2,)).dtype == onp.float64
        assert np.random.uniform(size=(2,)).dtype == onp.float64
    finally:
        npx.set_np()
    assert np.array([1, 2]).dtype == onp.float32
    npx.waitall()


def test_every_table_op_mxnet_nd_has_is_in_nd():
    with open(os.path.join(FIXTURES, "mxnet_nd_names.json")) as f:
        names = json.load(f)
    assert len(names) > 50
    missing = [n for n in names if not callable(getattr(nd, n, None))]
    assert missing == []


def test_default_ctx_and_cpu_pinned_name_the_cpu():
    """MXNet's deprecated ``Context.default_ctx`` (MXNet's test_gluon_rnn.py reads it) and
    ``mx.cpu_pinned()`` (DataLoader's pin_memory) are CPU devices here."""
    assert mx.Context.default_ctx == mx.cpu(0)
    pinned = mx.cpu_pinned(0)
    assert repr(pinned) == "cpu_pinned(0)" and pinned != mx.cpu(0)
    a = nd.array([1.0, 2.0], ctx=pinned)
    assert a.asnumpy().tolist() == [1.0, 2.0]
    with pytest.raises(AttributeError, match="on the class"):
        mx.cpu().default_ctx = mx.cpu(1)
