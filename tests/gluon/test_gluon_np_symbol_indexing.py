"""NumPy indexing and the split family on symbols, as a hybridized ``hybrid_forward`` under
``@use_np`` uses them (MXNet 1.9.1's test_numpy_gluon.py: test_symbolic_basic_slicing,
test_net_symbol_save_load). Note [Symbol indexing], Note [Symbolic split] in
fastgrad/symbol/_graph.py."""

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import gluon, npx


@pytest.fixture(autouse=True)
def _mxnet_defaults():
    npx.reset_np()
    yield
    npx.reset_np()


def _run(sym, x):
    return sym.bind(mx.cpu(), {"x": mx.np.array(x)}).forward()[0].asnumpy()


X = onp.arange(24.0).reshape(2, 3, 4)


@pytest.mark.parametrize("key", [(), (slice(None), -1), (Ellipsis, None, 1),
                                 (0, slice(1, None), slice(None, None, -2)), [1, 0]])
def test_numpy_keys_index_a_one_output_symbol(key):
    x = mx.sym.var("x")
    onp.testing.assert_array_equal(_run(x[key], X), X[key])


def test_int_and_slice_select_outputs_in_mxnet_mode_and_index_in_numpy_mode():
    x = mx.sym.var("x")
    assert x[0] is not x and x[0].list_outputs() == ["x"]     # output 0: x itself
    group = mx.sym.Group([x, x + 1])
    assert group[1].list_outputs() == group.list_outputs()[1:]
    npx.set_np()
    onp.testing.assert_array_equal(_run(x[1], X), X[1])
    onp.testing.assert_array_equal(_run(x[1:], X), X[1:])
    assert group[1].list_outputs() == group.list_outputs()[1:]   # several outputs: selects
    with pytest.raises(TypeError, match="one output"):
        group[:, 0]


def test_split_family_gives_one_symbol_per_section():
    x = mx.sym.var("x")
    parts = mx.sym.np.split(x, 4, axis=2)
    assert isinstance(parts, list) and len(parts) == 4
    joined = mx.sym.np.concatenate(parts[1:-1], axis=2)
    onp.testing.assert_array_equal(_run(joined, X), X[:, :, 1:3])
    assert len(mx.sym.np.split(x, [1, 3], axis=2)) == 3
    assert len(mx.sym.np.array_split(x, 3, axis=2)) == 3
    onp.testing.assert_array_equal(_run(mx.sym.np.hsplit(x, 3)[2], X), X[:, 2:3])


@mx.use_np
class _SplitSlice(gluon.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, flatten=False, in_units=4)

    def hybrid_forward(self, F, x, y):
        x = F.np.split(x, 1)[0]
        middle = F.np.concatenate(F.np.split(x, 3, axis=1)[1:], axis=1)
        return self.dense(x[:, -1, :] + y[:, -1, :]) + middle[()][0].sum()


def test_hybridized_block_with_numpy_indexing_and_split_matches_imperative():
    x = mx.np.array(X)
    y = mx.np.array(X[::-1] * 0.5)
    net = _SplitSlice()
    net.initialize(mx.init.Constant(0.25))
    imperative = net(x, y).asnumpy()
    net.hybridize()
    hybrid = net(x, y).asnumpy()
    want = ((X[:, -1, :] + 0.5 * X[::-1][:, -1, :]) @ onp.full((4, 3), 0.25)   # bias: zeros
            + X[0, 1:].sum())
    onp.testing.assert_allclose(imperative, want, rtol=1e-6)
    onp.testing.assert_allclose(hybrid, want, rtol=1e-6)


class _SliceDense(gluon.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = gluon.nn.Dense(2, in_units=8)

    def hybrid_forward(self, F, x):
        part = x.slice(begin=(0, 1), end=(2, None))           # MXNet's NDArray/Symbol.slice
        return self.dense(F.slice(part, begin=(None, None, 3), end=(None, None, None),
                                  step=(1, -1, -1)))


def test_slice_method_and_op_hybridized_match_imperative_values_and_gradients():
    x_np = onp.arange(24.0, dtype="float32").reshape(2, 3, 4) / 10
    net = _SliceDense()
    net.initialize(mx.init.Constant(0.5))
    grads = []
    outs = []
    for hybridize in (False, True):
        if hybridize:
            net.hybridize()
        x = mx.nd.array(x_np)
        x.attach_grad()
        with mx.autograd.record():
            out = net(x)
        out.backward()
        outs.append(out.asnumpy())
        grads.append(x.grad.asnumpy())
    part = x_np[0:2, 1:][:, ::-1, 3::-1]                     # (2, 2, 4)
    want = part.reshape(2, -1) @ onp.full((8, 2), 0.5)
    onp.testing.assert_allclose(outs[0], want, rtol=1e-6)
    onp.testing.assert_allclose(outs[1], want, rtol=1e-6)
    want_grad = onp.zeros_like(x_np)
    want_grad[:, 1:, :] = 1.0                                # each kept element feeds 2 outputs
    onp.testing.assert_allclose(grads[0], want_grad)
    onp.testing.assert_allclose(grads[1], want_grad)


class _Method(gluon.HybridBlock):
    def __init__(self, name, **kwargs):
        super().__init__(**kwargs)
        self._method, self._kwargs = name, kwargs_of[name]

    def hybrid_forward(self, F, a):
        return getattr(a, self._method)(**self._kwargs)


kwargs_of = {"var": {"axis": 0, "dtype": "float64", "ddof": 1},
             "cumsum": {"axis": 1, "dtype": "float64"},
             "std": {"axis": None, "dtype": "float64"}}


@pytest.mark.parametrize("method", sorted(kwargs_of))
def test_symbol_methods_take_numpys_dtype_keyword_hybridized(method):
    # MXNet 1.9.1's test_numpy_op.py test_np_moment / test_np_cumsum call a.var(dtype=...)
    x = onp.arange(6.0, dtype="float32").reshape(2, 3) ** 2
    net = _Method(method)
    net.hybridize()
    out = net(mx.np.array(x))
    want = getattr(onp, method)(x.astype("float64"), **{k: v for k, v in kwargs_of[method].items()
                                                      if k != "dtype"})
    assert out.dtype == onp.float64
    onp.testing.assert_allclose(out.asnumpy(), want, rtol=1e-12)


def test_npx_slice_arrays_and_symbols_and_mx_mxneterror():
    a = onp.arange(24.0).reshape(2, 3, 4)
    got = mx.npx.slice(mx.np.array(a), begin=(0, 1), end=(1, None), step=(None, 2))
    onp.testing.assert_array_equal(got.asnumpy(), a[0:1, 1::2])
    y = mx.sym.npx.slice(mx.sym.var("x"), begin=(1, None, -1), end=(None, 0, None),
                         step=(1, -1, -1))
    onp.testing.assert_array_equal(_run(y, a), a[1:, :0:-1, -1::-1])
    assert mx.MXNetError is mx.base.MXNetError


def test_sym_np_symbol_class_is_the_symbol_type():
    # MXNet's test_numpy_op.py test_np_stack: type(F.np.stack(...)) == mx.sym.np._Symbol
    x = mx.sym.var("x")
    stacked = mx.sym.np.stack([x, x * 2], axis=1)
    assert type(stacked) is mx.sym.np._Symbol
    onp.testing.assert_array_equal(_run(stacked, X[0]), onp.stack([X[0], 2 * X[0]], axis=1))


def test_sym_image_ops_forward_and_backward():
    # MXNet's test_gluon_data_vision.py test_crop_resize: mx.sym.image.crop with
    # check_symbolic_backward
    from fastgrad.test_utils import check_symbolic_backward
    a = onp.arange(60.0).reshape(5, 4, 3)
    crop = mx.sym.image.crop(mx.sym.var("data"), 2, 1, 1, 2)     # x, y, width, height
    out = crop.bind(mx.cpu(), {"data": mx.nd.array(a)}).forward()[0]
    onp.testing.assert_array_equal(out.asnumpy(), a[1:3, 2:3, :])
    head = a[1:3, 2:3, :] + 0.5
    want = onp.zeros_like(a)
    want[1:3, 2:3, :] = head
    check_symbolic_backward(crop, [a], [head], [want])
    flipped = mx.sym.image.flip_left_right(mx.sym.var("data"))
    onp.testing.assert_array_equal(
        flipped.bind(mx.cpu(), {"data": mx.nd.array(a)}).forward()[0].asnumpy(), a[:, ::-1])
    from fastgrad.symbol._api import op_names
    assert "crop" not in op_names()          # image ops live under sym.image only
    with pytest.raises(AttributeError):
        mx.sym.crop


class _BroadcastTo(gluon.HybridBlock):
    def __init__(self, shape, **kwargs):
        super().__init__(**kwargs)
        self._shape = shape

    def hybrid_forward(self, F, a):
        return F.np.broadcast_to(a, self._shape)


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("shape,want", [((1, 2, 3, -2), (1, 2, 3, 4)),
                                        ((1, 0, -2, 4), (1, 0, 3, 4)), ((2, -2, -2), (2, 3, 4))])
def test_broadcast_to_minus_two_keeps_the_input_dimension(hybridize, shape, want):
    # MXNet's np.broadcast_to extension (MXNet 1.9.1 test_numpy_op.py test_np_broadcast_to)
    a_np = onp.arange(12.0, dtype="float32").reshape(3, 4)
    net = _BroadcastTo(shape)
    if hybridize:
        net.hybridize()
    a = mx.np.array(a_np)
    a.attach_grad()
    with mx.autograd.record():
        out = net(a)
    out.backward()
    onp.testing.assert_array_equal(out.asnumpy(), onp.broadcast_to(a_np, want))
    onp.testing.assert_array_equal(a.grad.asnumpy(), onp.full((3, 4), onp.prod(want) / 12))


def test_broadcast_to_minus_two_without_an_input_dimension_is_an_error():
    with pytest.raises(ValueError, match="keeps an input dimension"):
        mx.np.broadcast_to(mx.np.ones((3, 4)), (-2, 3, 4))
