"""gluon.nn's convolution, pooling and padding layers, and the operators under them.

Outputs and gradients come from MXNet 1.9.1 (``tests/fixtures/make_gluon_layers.py``, the
cases of ``tests/fixtures/gluon_layer_cases.py``); the compositions added for these layers
(convolution in groups and in 1-D/3-D, 3-D transposed convolution, ``pooling_convention=
'full'``, 3-D average pooling without the padding counted, reflection padding) are checked
against float64 central differences to the second order, since the registry-driven op tests
check only the table's ops.
"""
import json
import os
import sys

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd
from fastgrad.gluon import nn

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures")
sys.path.insert(0, FIXTURES)
import gluon_layer_cases as cases  # noqa: E402
import gluon_lenet_case  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _helpers import fd_gradient, assert_fd_close  # noqa: E402

MX = onp.load(os.path.join(FIXTURES, "gluon_layers.npz"))
CONV_CASES = sorted(c for c in cases.CASES if any(w in c for w in ("conv", "pool", "pad")))


@pytest.mark.parametrize("case", CONV_CASES)
def test_layer_equals_mxnet(case):
    got = cases.run_case(mx, nn, autograd, case)
    prefix = case + "."
    want = {k[len(prefix):]: MX[k] for k in MX.files if k.startswith(prefix)}
    assert sorted(got) == sorted(want)
    for key in sorted(want):
        assert got[key].shape == want[key].shape, key
        onp.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-5,
                                    err_msg="%s: %s" % (case, key))


@pytest.mark.parametrize("case", CONV_CASES)
def test_hybridized_equals_imperative_bit_for_bit(case):
    imperative = cases.run_case(mx, nn, autograd, case)
    hybrid = cases.run_case(mx, nn, autograd, case, hybridize=True)
    for key in imperative:
        onp.testing.assert_array_equal(hybrid[key], imperative[key], err_msg=key)


# ---------------------------------------------------------------- derivatives of the ops

def _first_order(f, arrays, cot):
    """Gradients of ``sum(f(*arrays) * cot)`` (NumPy in and out)."""
    xs = [mx.np.array(a) for a in arrays]
    for x in xs:
        x.attach_grad()
    with autograd.record():
        y = f(*xs)
    y.backward(mx.np.array(cot))
    return [x.grad.asnumpy() for x in xs]


def check_to_second_order(f, arrays, seed=0):
    """First derivatives of ``f`` against central differences of ``f``, and second
    derivatives (``create_graph=True``, then a backward pass of their product with fixed
    directions) against central differences of the first, at a few positions."""
    rng = onp.random.default_rng(seed)
    arrays = [onp.asarray(a, dtype=onp.float64) for a in arrays]
    cot = rng.standard_normal(f(*[mx.np.array(a) for a in arrays]).shape)
    grads = _first_order(f, arrays, cot)
    directions = [rng.standard_normal(a.shape) for a in arrays]

    def along(*values):        # sum_i <grad_i(values), direction_i>, by first-order autograd
        return sum(float((g * d).sum()) for g, d in
                   zip(_first_order(f, values, cot), directions))

    xs = [mx.np.array(a) for a in arrays]
    for x in xs:
        x.attach_grad()
    with autograd.record():
        y = f(*xs)
        firsts = autograd.grad((y * mx.np.array(cot)).sum(), xs, create_graph=True)
        total = sum((g * mx.np.array(d)).sum() for g, d in zip(firsts, directions))
    total.backward()
    seconds = [x.grad.asnumpy() for x in xs]
    for i, a in enumerate(arrays):
        for flat in rng.choice(a.size, size=min(4, a.size), replace=False):
            idx = onp.unravel_index(flat, a.shape)

            def value(t, i=i, idx=idx):
                moved = [b.copy() for b in arrays]
                moved[i][idx] += t
                return moved

            [d1] = fd_gradient(lambda t: float((f(*[mx.np.array(b) for b in value(float(t))])
                                                .asnumpy() * cot).sum()), onp.zeros(()))
            assert_fd_close(grads[i][idx], d1, what="d/d input %d %s" % (i, idx), rtol=1e-6)
            [d2] = fd_gradient(lambda t: along(*value(float(t))), onp.zeros(()))
            assert_fd_close(seconds[i][idx], d2, what="d2/d input %d %s" % (i, idx), rtol=1e-6)


def _normal(*shape, seed=0):
    return onp.random.default_rng(seed).standard_normal(shape)


OPS = {
    "conv2d_groups": (lambda x, w, b: mx.npx.convolution(x, w, b, kernel=(2, 2), num_filter=4,
                                                         num_group=2, pad=(1, 0)),
                      [(1, 4, 3, 3), (4, 2, 2, 2), (4,)]),
    "conv1d_groups": (lambda x, w: mx.npx.convolution(x, w, kernel=(2,), stride=(2,),
                                                      num_filter=3, num_group=3, no_bias=True),
                      [(2, 3, 5), (3, 1, 2)]),
    "conv3d_groups": (lambda x, w: mx.npx.convolution(x, w, kernel=(2, 1, 2), num_filter=2,
                                                      num_group=2, no_bias=True, pad=(1, 0, 0)),
                      [(1, 2, 2, 2, 3), (2, 1, 2, 1, 2)]),
    "deconv3d": (lambda x, w, b: mx.npx.deconvolution(x, w, b, kernel=(2, 2, 1),
                                                      stride=(2, 1, 1), pad=(1, 0, 0),
                                                      adj=(1, 0, 0), num_filter=2,
                                                      no_bias=False),
                 [(1, 2, 2, 2, 2), (2, 2, 2, 2, 1), (2,)]),
    "deconv2d_groups": (lambda x, w: mx.npx.deconvolution(x, w, kernel=(2, 2), stride=(2, 2),
                                                          num_filter=4, num_group=2),
                        [(1, 2, 2, 2), (2, 2, 2, 2)]),
    "maxpool_full": (lambda x: mx.npx.pooling(x, kernel=(2, 2), stride=(2, 2),
                                              pooling_convention="full"), [(1, 2, 3, 5)]),
    "avgpool_full_nopad": (lambda x: mx.npx.pooling(x, kernel=(3,), stride=(2,), pad=(1,),
                                                    pool_type="avg", count_include_pad=False,
                                                    pooling_convention="full"), [(2, 1, 6)]),
    "avgpool3d_nopad": (lambda x: mx.npx.pooling(x, kernel=(2, 2, 2), pad=(1, 0, 1),
                                                 pool_type="avg", count_include_pad=False),
                        [(1, 1, 3, 2, 3)]),
    "pad_reflect": (lambda x: mx.np.pad(x, ((0, 0), (1, 2), (2, 1)), mode="reflect"),
                    [(2, 3, 4)]),
    "pad_edge_nd": (lambda x: mx.nd.pad(x, mode="edge", pad_width=(0, 0, 0, 0, 1, 1, 2, 0)),
                    [(1, 2, 2, 3)]),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_composite_ops_differentiate_to_second_order(name):
    f, shapes = OPS[name]
    # Max pooling is checked away from ties; the smooth ops anywhere.
    arrays = [_normal(*s, seed=k) for k, s in enumerate(shapes)]
    check_to_second_order(f, arrays)


def test_group_norm_per_group_matches_its_closed_form():
    x = _normal(2, 4, 3)
    g, b = onp.array([2.0, 0.5]), onp.array([0.1, -1.0])
    got = mx.nd.GroupNorm(mx.nd.array(x, dtype="float64"), mx.nd.array(g, dtype="float64"),
                          mx.nd.array(b, dtype="float64"), num_groups=2).asnumpy()
    grouped = x.reshape(2, 2, 6)
    want = (grouped - grouped.mean(2, keepdims=True)) / onp.sqrt(grouped.var(2, keepdims=True)
                                                                 + 1e-5)
    want = (want * g[None, :, None] + b[None, :, None]).reshape(x.shape)
    onp.testing.assert_allclose(got, want, rtol=1e-12)
    check_to_second_order(lambda x, g, b: mx.nd.GroupNorm(x, g, b, num_groups=2),
                          [x, g, b])


def test_reflection_padding_values():
    x = onp.arange(16.0).reshape(1, 1, 4, 4)
    got = nn.ReflectionPad2D((0, 0, 0, 0, 1, 1, 2, 2))(mx.nd.array(x)).asnumpy()
    onp.testing.assert_array_equal(got, onp.pad(x, ((0, 0), (0, 0), (1, 1), (2, 2)),
                                                mode="reflect"))
    with pytest.raises(ValueError, match="mode='reflect' cannot pad axis 2 of length 1"):
        mx.np.pad(mx.np.ones((1, 1, 1, 3)), ((0, 0), (0, 0), (1, 1), (0, 0)), mode="reflect")


# ---------------------------------------------------------------- layers

LAYER_FD = [
    ("nn.Conv1D(2, 3, padding=1, groups=2, in_channels=2)", (2, 2, 5)),
    ("nn.Conv2D(2, 2, strides=2, activation='tanh')", (1, 3, 4, 5)),
    ("nn.Conv3D(2, (2, 1, 2), padding=(1, 0, 0))", (1, 2, 2, 3, 3)),
    ("nn.Conv1DTranspose(2, 3, strides=2, output_padding=1)", (1, 2, 3)),
    ("nn.Conv2DTranspose(2, 2, strides=2, groups=2, in_channels=2)", (1, 2, 2, 3)),
    ("nn.Conv3DTranspose(1, 2, strides=(2, 1, 1))", (1, 2, 2, 2, 2)),
    ("nn.AvgPool2D(3, 2, 1, ceil_mode=True, count_include_pad=False)", (1, 2, 4, 5)),
    ("nn.GlobalAvgPool3D()", (1, 2, 2, 3, 2)),
    ("nn.ReflectionPad2D(1)", (1, 2, 3, 3)),
]


@pytest.mark.parametrize("ctor,shape", LAYER_FD, ids=[c for c, _ in LAYER_FD])
def test_layer_gradients_match_central_differences(ctor, shape):
    layer = cases.build(ctor, nn)
    layer.initialize(mx.init.Normal(0.5))
    layer.cast("float64")
    x = mx.nd.array(_normal(*shape, seed=3), dtype="float64")
    layer(x)
    params = {k: p for k, p in layer._collect_params_with_prefix().items()}

    def f(x, *values):
        for p, v in zip(params.values(), values):
            p.set_data(v)
        return layer(x)

    for p in params.values():
        p.data()
    arrays = [x.asnumpy()] + [p.data().asnumpy() for p in params.values()]
    rng = onp.random.default_rng(0)
    cot = rng.standard_normal(layer(x).shape)
    xs = [mx.nd.array(a, dtype="float64") for a in arrays]
    xs[0].attach_grad()
    with autograd.record():
        y = layer(xs[0])
    y.backward(mx.nd.array(cot, dtype="float64"))
    got = [xs[0].grad.asnumpy()] + [p.grad().asnumpy() for p in params.values()]
    for i, a in enumerate(arrays):
        for flat in rng.choice(a.size, size=min(6, a.size), replace=False):
            idx = onp.unravel_index(flat, a.shape)

            def total(t, i=i, idx=idx):
                moved = [b.copy() for b in arrays]
                moved[i][idx] += t
                out = f(*[mx.nd.array(b, dtype="float64") for b in moved])
                return float((out.asnumpy() * cot).sum())
            [fd] = fd_gradient(lambda t: total(float(t)), onp.zeros(()))
            assert_fd_close(got[i][idx], fd, what="%s array %d %s" % (ctor, i, idx), rtol=1e-6)


@pytest.mark.parametrize("ctor,shape,weight", [
    ("nn.Conv2D(4, 3)", (1, 3, 5, 5), (4, 3, 3, 3)),
    ("nn.Conv2D(4, 3, groups=2)", (1, 6, 5, 5), (4, 3, 3, 3)),
    ("nn.Conv1D(2, 2)", (1, 5, 4), (2, 5, 2)),
    ("nn.Conv3D(2, 2)", (1, 3, 2, 2, 2), (2, 3, 2, 2, 2)),
    ("nn.Conv2DTranspose(4, 3)", (1, 3, 5, 5), (3, 4, 3, 3)),
    ("nn.Conv2DTranspose(4, 3, groups=2)", (1, 6, 5, 5), (6, 2, 3, 3)),
    ("nn.Conv3DTranspose(2, 2)", (1, 3, 2, 2, 2), (3, 2, 2, 2, 2)),
])
def test_convolutions_infer_their_input_channels(ctor, shape, weight):
    layer = cases.build(ctor, nn)
    layer.initialize()
    layer(mx.nd.ones(shape))
    assert layer.weight.shape == weight and layer.weight.data().shape == weight


@pytest.mark.parametrize("ctor,good,bad,message", [
    ("nn.Conv2D(4, 3)", (1, 3, 5, 5), (1, 2, 5, 5),
     r"Conv2D 'conv\d+': the input has channels \(axis 1\): 2, but the layer's parameters "
     r"were made for in_channels=3"),
    ("nn.Conv2DTranspose(4, 3)", (1, 3, 5, 5), (1, 4, 5, 5),
     r"Conv2DTranspose 'conv\d+'.*channels \(axis 1\): 4.*in_channels=3"),
    ("nn.Conv1D(4, 3)", (1, 3, 5), (1, 3, 5, 5), r"Conv1D 'conv\d+': expects 3-D input \(NCW\), "
                                                 r"got shape \(1, 3, 5, 5\)"),
    ("nn.MaxPool2D()", (1, 1, 4, 4), (1, 4, 4), r"MaxPool2D 'pool\d+': expects 4-D input"),
])
def test_input_that_disagrees_with_the_layer_raises_naming_it(ctor, good, bad, message):
    layer = cases.build(ctor, nn)
    layer.initialize()
    layer(mx.nd.ones(good))
    with pytest.raises(ValueError, match=message):
        layer(mx.nd.ones(bad))


def test_channels_that_do_not_split_into_groups_raise():
    layer = nn.Conv2D(4, 3, groups=2)
    layer.initialize()
    with pytest.raises(ValueError, match=r"Conv2D 'conv\d+': 3 input channels do not split "
                                         r"into groups=2"):
        layer(mx.nd.ones((1, 3, 5, 5)))


def test_constructor_checks_as_mxnet():
    with pytest.raises(AssertionError, match="kernel_size must be a number or a list of 2"):
        nn.Conv2D(2, (3, 3, 3))
    with pytest.raises(AssertionError, match="Only supports 'NCW' layout for now"):
        nn.Conv1D(2, 3, layout="NWC")
    with pytest.raises(AssertionError, match="Only NCHW and NHWC layouts are valid for 2D"):
        nn.GlobalAvgPool2D(layout="NCW")
    with pytest.raises(AssertionError, match="output_padding must be a number or a list of 3"):
        nn.Conv3DTranspose(2, 2, output_padding=(1, 1))


def test_pooling_defaults_and_global_pooling():
    pool = nn.MaxPool2D(3)
    assert pool._kwargs["stride"] == (3, 3) and pool._kwargs["pad"] == (0, 0)
    x = _normal(2, 3, 4, 5)
    onp.testing.assert_allclose(nn.GlobalAvgPool2D()(mx.nd.array(x, dtype="float64"))
                                .asnumpy(), x.mean(axis=(2, 3), keepdims=True), rtol=1e-12)
    onp.testing.assert_array_equal(nn.GlobalMaxPool1D()(mx.nd.array(x[:, :, 0])).asnumpy(),
                                   x[:, :, 0].max(axis=2, keepdims=True).astype(onp.float32))


def test_sym_operators_take_the_layers_arguments():
    """The layers' operators build Symbols with MXNet's names and run them."""
    data = mx.sym.var("data")
    conv = mx.sym.Convolution(data, kernel=(3,), num_filter=2, num_group=2, name="c")
    assert conv.list_arguments() == ["data", "c_weight", "c_bias"]
    deconv = mx.sym.Deconvolution(data, kernel=(2, 2, 2), num_filter=2, name="d")
    pooled = mx.sym.Pooling(data, kernel=(2, 2, 2), pooling_convention="full", pool_type="avg")
    padded = mx.sym.pad(data, mode="reflect", pad_width=(0, 0, 0, 0, 1, 1, 1, 1))
    gnorm = mx.sym.GroupNorm(data, num_groups=2, name="g")
    assert gnorm.list_arguments() == ["data", "g_gamma", "g_beta"]
    x = _normal(1, 2, 3, 3, 3)
    w = _normal(2, 2, 2, 2, 2)
    out = deconv.eval(data=mx.nd.array(x), d_weight=mx.nd.array(w))[0]
    want = mx.nd.Deconvolution(mx.nd.array(x), mx.nd.array(w), kernel=(2, 2, 2), num_filter=2)
    onp.testing.assert_array_equal(out.asnumpy(), want.asnumpy())
    assert pooled.eval(data=mx.nd.array(x))[0].shape == (1, 2, 2, 2, 2)
    x4 = mx.nd.array(_normal(1, 2, 3, 3))
    onp.testing.assert_array_equal(padded.eval(data=x4)[0].asnumpy(),
                                   mx.nd.pad(x4, mode="reflect",
                                             pad_width=(0, 0, 0, 0, 1, 1, 1, 1)).asnumpy())


@pytest.mark.parametrize("ctor,shape,weight", [
    # MXNet 1.9.1's weight shapes for these layers (it infers them, but its CPU convolutions
    # then fail on channels-last data; fastgrad computes them).
    ("nn.Conv2D(4, (3, 2), layout='NHWC')", (1, 5, 6, 7), (4, 3, 2, 7)),
    ("nn.Conv2D(4, (3, 2), layout='NHWC', groups=2)", (1, 5, 6, 6), (4, 3, 2, 3)),
    ("nn.Conv3D(2, (3, 2, 1), layout='NDHWC')", (1, 3, 3, 3, 5), (2, 3, 2, 1, 5)),
    ("nn.Conv2DTranspose(2, (3, 2), layout='NHWC')", (1, 3, 3, 5), (5, 3, 2, 2)),
])
def test_channels_last_convolutions_equal_channels_first(ctor, shape, weight):
    last = cases.build(ctor, nn)
    first = cases.build(ctor.replace("layout='NHWC'", "layout='NCHW'")
                        .replace("layout='NDHWC'", "layout='NCDHW'"), nn)
    x = _normal(*shape)
    last.initialize(mx.init.Normal(0.5))
    first.initialize()
    last(mx.nd.array(x))
    assert last.weight.shape == weight
    first(mx.nd.array(onp.moveaxis(x, -1, 1)))
    first.weight.set_data(mx.nd.array(onp.moveaxis(last.weight.data().asnumpy(), -1, 1)))
    first.bias.set_data(last.bias.data())
    xl, xf = mx.nd.array(x), mx.nd.array(onp.moveaxis(x, -1, 1))
    xl.attach_grad()
    xf.attach_grad()
    with autograd.record():
        yl, yf = last(xl), first(xf)
        total = yl.sum() + yf.sum()
    total.backward()
    onp.testing.assert_allclose(yl.asnumpy(), onp.moveaxis(yf.asnumpy(), 1, -1), rtol=1e-5,
                                atol=1e-6)
    onp.testing.assert_allclose(xl.grad.asnumpy(), onp.moveaxis(xf.grad.asnumpy(), 1, -1),
                                rtol=1e-5, atol=1e-6)
    onp.testing.assert_allclose(last.weight.grad().asnumpy(),
                                onp.moveaxis(first.weight.grad().asnumpy(), 1, -1), rtol=1e-5,
                                atol=1e-5)
    with pytest.raises(ValueError, match=r"channels \(axis %d\): 1" % (len(shape) - 1)):
        last(mx.nd.ones(shape[:-1] + (1,)))


@pytest.mark.parametrize("hybridize", [False, True])
def test_lenet_trains_as_in_mxnet(hybridize):
    """Five SGD steps (momentum, weight decay) of a LeNet with BatchNorm through Gluon's
    Trainer and SoftmaxCrossEntropyLoss: the losses and the moving mean of MXNet 1.9.1
    (``tests/fixtures/make_gluon_lenet.py``)."""
    with open(os.path.join(FIXTURES, "gluon_lenet.json")) as f:
        want_losses, want_mean = json.load(f)[str(hybridize)]
    losses, mean = gluon_lenet_case.train(mx, hybridize)
    onp.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    onp.testing.assert_allclose(mean, want_mean, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["1d", "2d", "3d"])
def test_mxnet_exported_layers_import_and_run(name):
    """Networks of every layer kind exported by MXNet 1.9.1
    (``tests/fixtures/make_gluon_layer_export.py``) load with ``SymbolBlock.imports`` and
    give MXNet's output, imperatively and hybridized."""
    base = os.path.join(FIXTURES, "gluon_layer_export_" + name)
    data = onp.load(os.path.join(FIXTURES, "gluon_layer_export.npz"))
    net = mx.gluon.SymbolBlock.imports(base + "-symbol.json", ["data"], base + "-0000.params")
    x = mx.nd.array(data[name + ".x"])
    onp.testing.assert_allclose(net(x).asnumpy(), data[name + ".y"], rtol=1e-4, atol=1e-5)
    net.hybridize()
    onp.testing.assert_allclose(net(x).asnumpy(), data[name + ".y"], rtol=1e-4, atol=1e-5)
