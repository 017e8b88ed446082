"""gluon.nn's basic layers and activations (MXNet 1.9.1's behaviour).

Outputs, input and parameter gradients, moving statistics, reprs and parameter names come
from MXNet 1.9.1 (``tests/fixtures/make_gluon_layers.py`` ran the cases of
``tests/fixtures/gluon_layer_cases.py`` and wrote ``gluon_layers.npz`` and
``gluon_layer_reprs.json``); gradients are also checked against float64 central differences,
and the rest against closed forms. The convolution and pooling layers are in
``test_gluon_conv.py``.
"""
import json
import os
import sys
import warnings

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd
from fastgrad.gluon import nn

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures")
sys.path.insert(0, FIXTURES)
import gluon_layer_cases as cases  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _helpers import fd_gradient, assert_fd_close  # noqa: E402

MX = onp.load(os.path.join(FIXTURES, "gluon_layers.npz"))
with open(os.path.join(FIXTURES, "gluon_layer_reprs.json")) as _f:
    MX_REPRS = json.load(_f)

CONV_WORDS = ("conv", "pool", "pad")
NN_CASES = sorted(c for c in cases.CASES if not any(w in c for w in CONV_WORDS))
SELU = (1.0507009873554804934193349852946, 1.6732632423543772848170429916717)


def mxnet_result(case):
    prefix = case + "."
    return {k[len(prefix):]: MX[k] for k in MX.files if k.startswith(prefix)}


def compare_with_mxnet(case, hybridize=False, skip=()):
    got = cases.run_case(mx, nn, autograd, case, hybridize=hybridize)
    want = mxnet_result(case)
    assert sorted(got) == sorted(want)
    for key in sorted(want):
        if key in skip:
            continue
        assert got[key].shape == want[key].shape, key
        onp.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-5,
                                    err_msg="%s: %s" % (case, key))
    return got


@pytest.mark.parametrize("case", NN_CASES)
def test_layer_equals_mxnet(case):
    # MXNet 1.9.1's SELU gradient is wrong for negative inputs (its central difference
    # disagrees); fastgrad's is checked against the closed form instead.
    got = compare_with_mxnet(case, skip=("dx",) if case == "selu" else ())
    if case == "selu":
        x, cot = got["x"].astype(onp.float64), got["cot"]
        lam, alpha = SELU
        want = onp.where(x > 0, lam, lam * alpha * onp.exp(x)) * cot
        onp.testing.assert_allclose(got["dx"], want, rtol=1e-6)
        assert onp.abs(mxnet_result(case)["dx"] - want).max() > 1e-3   # MXNet's error


@pytest.mark.parametrize("case", NN_CASES)
def test_hybridized_equals_imperative_bit_for_bit(case):
    imperative = cases.run_case(mx, nn, autograd, case)
    hybrid = cases.run_case(mx, nn, autograd, case, hybridize=True)
    assert sorted(hybrid) == sorted(imperative)
    for key in imperative:
        onp.testing.assert_array_equal(hybrid[key], imperative[key], err_msg=key)


# ---------------------------------------------------------------- float64 central differences

def check_gradients_by_finite_differences(layer, x, n_checked=10, seed=0):
    """Gradients of ``sum(layer(x) * cot)`` in training mode with respect to ``x`` and every
    parameter with a gradient, against float64 central differences at ``n_checked``
    positions of each array."""
    layer.cast("float64")
    x = mx.nd.array(x, dtype="float64")
    layer(x)
    params = {k: p for k, p in layer._collect_params_with_prefix().items()
              if p.grad_req != "null"}
    rng = onp.random.default_rng(seed)
    with autograd.record():
        y = layer(x)
    cot = rng.standard_normal(y.shape)
    x.attach_grad()
    with autograd.record():
        y = layer(x)
    y.backward(mx.nd.array(cot, dtype="float64"))
    arrays = {"x": x}
    arrays.update({k: p.data() for k, p in params.items()})
    grads = {"x": x.grad.asnumpy()}
    grads.update({k: p.grad().asnumpy() for k, p in params.items()})
    for name, arr in arrays.items():
        raw = arr.asnumpy()
        flat = rng.choice(raw.size, size=min(n_checked, raw.size), replace=False)
        for i in flat:
            idx = onp.unravel_index(i, raw.shape)

            def total(t, idx=idx, arr=arr, orig=raw[idx]):
                arr[idx] = orig + t
                try:
                    with autograd.train_mode():
                        return float((layer(x).asnumpy() * cot).sum())
                finally:
                    arr[idx] = orig
            [fd] = fd_gradient(lambda t: total(float(t)), onp.zeros(()))
            assert_fd_close(grads[name][idx], fd, what="%s %s%s" % (type(layer).__name__,
                                                                     name, idx), rtol=1e-6)


FD_LAYERS = [
    ("nn.Dense(3, activation='tanh')", (2, 2, 3)),
    ("nn.Dense(3, flatten=False)", (2, 3, 2)),
    ("nn.BatchNorm()", (4, 3, 2)),
    ("nn.BatchNorm(axis=-1, center=False)", (5, 3)),
    ("nn.LayerNorm()", (3, 4)),
    ("nn.GroupNorm(2)", (2, 4, 3)),
    ("nn.InstanceNorm(scale=True)", (2, 3, 4)),
    ("nn.InstanceNorm(axis=2, scale=True)", (2, 3, 4, 2)),
    ("nn.PReLU(in_channels=3)", (2, 3, 4)),
    ("nn.ELU(0.5)", (2, 5)),
    ("nn.SELU()", (2, 5)),
    ("nn.GELU()", (2, 5)),
    ("nn.Swish(1.5)", (2, 5)),
    ("nn.LeakyReLU(0.1)", (2, 5)),
    ("nn.Activation('softrelu')", (2, 5)),
    ("seq(nn.Dense(4, activation='relu'), nn.BatchNorm(), nn.Dense(2))", (3, 5)),
]


@pytest.mark.parametrize("ctor,shape", FD_LAYERS, ids=[c for c, _ in FD_LAYERS])
def test_gradients_match_central_differences(ctor, shape):
    layer = cases.build(ctor, nn)
    layer.initialize(mx.init.Normal(0.5))
    x = onp.random.default_rng(1).standard_normal(shape) + 0.05   # away from relu's kink
    check_gradients_by_finite_differences(layer, x)


def test_embedding_weight_gradient_adds_up_repeated_rows():
    emb = nn.Embedding(4, 2)
    emb.initialize()
    with autograd.record():
        y = emb(mx.nd.array([[1, 3], [1, 0]]))
    y.backward(mx.nd.ones((2, 2, 2)))
    onp.testing.assert_array_equal(emb.weight.grad().asnumpy(),
                                   [[1, 1], [2, 2], [0, 0], [1, 1]])


# ---------------------------------------------------------------- reprs and names

@pytest.mark.parametrize("ctor", sorted(MX_REPRS))
def test_repr_and_parameters_equal_mxnet(ctor):
    layer = cases.build(ctor, nn, mx.gluon.contrib.nn)
    assert cases.describe(layer) == MX_REPRS[ctor]


def test_parameter_names_follow_mxnet_prefixes():
    net = nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(nn.Dense(2), nn.BatchNorm(), nn.Dense(3))
    assert list(net.collect_params()) == [
        "net_dense0_weight", "net_dense0_bias", "net_batchnorm0_gamma", "net_batchnorm0_beta",
        "net_batchnorm0_running_mean", "net_batchnorm0_running_var", "net_dense1_weight",
        "net_dense1_bias"]
    assert net[0].weight is net[0].params["net_dense0_weight"]


# ---------------------------------------------------------------- deferred initialisation

def test_dense_infers_in_units_from_the_first_input():
    layer = nn.Dense(3)
    layer.initialize()
    assert layer.weight.shape == (3, 0)
    y = layer(mx.nd.ones((2, 4, 5)))
    assert y.shape == (2, 3) and layer.weight.shape == (3, 20)
    assert repr(layer) == "Dense(20 -> 3, linear)"
    flat = nn.Dense(3, flatten=False)
    flat.initialize()
    assert flat(mx.nd.ones((2, 4, 5))).shape == (2, 4, 3) and flat.weight.shape == (3, 5)


@pytest.mark.parametrize("ctor,shape,axis", [("nn.BatchNorm()", (2, 3, 4), 1),
                                             ("nn.BatchNorm(axis=-1)", (2, 3, 4), -1),
                                             ("nn.LayerNorm()", (2, 3, 4), -1),
                                             ("nn.InstanceNorm()", (2, 3, 4), 1)])
def test_norms_infer_their_channels(ctor, shape, axis):
    layer = cases.build(ctor, nn)
    layer.initialize()
    layer(mx.nd.ones(shape))
    for p in layer.collect_params().values():
        assert p.shape == (shape[axis],)


def test_embedding_and_groupnorm_need_no_deferral():
    emb, gn = nn.Embedding(7, 2), nn.GroupNorm(3)
    emb.initialize()
    gn.initialize()
    assert emb.weight.data().shape == (7, 2) and gn.gamma.data().shape == (3,)


@pytest.mark.parametrize("ctor,good,bad,message", [
    ("nn.Dense(3)", (2, 4), (2, 5), r"Dense 'dense\d+': the input has flattened size 5, but "
                                    r"the layer's parameters were made for in_units=4"),
    ("nn.Dense(3, flatten=False)", (2, 4), (2, 6), r"last axis 6, .*in_units=4"),
    ("nn.BatchNorm()", (2, 3), (2, 4), r"BatchNorm 'batchnorm\d+'.*channels \(axis 1\): 4.*"
                                       r"in_channels=3"),
    ("nn.LayerNorm()", (2, 3), (2, 5), r"LayerNorm 'layernorm\d+'.*in_channels=3"),
    ("nn.InstanceNorm()", (2, 3, 4), (2, 2, 4), r"InstanceNorm 'instancenorm\d+'.*"
                                                r"in_channels=3"),
    ("nn.GroupNorm(2)", (2, 4), (2, 3), r"GroupNorm 'groupnorm\d+'.*num_groups=2"),
    ("nn.BatchNorm(axis=2)", (2, 3, 4), (2, 3), r"BatchNorm .*axis=2 is out of range"),
])
def test_input_that_disagrees_with_the_parameters_raises_naming_the_layer(ctor, good, bad,
                                                                          message):
    layer = cases.build(ctor, nn)
    layer.initialize()
    layer(mx.nd.ones(good))
    with pytest.raises(ValueError, match=message):
        layer(mx.nd.ones(bad))


def test_given_in_units_are_checked_at_the_first_call():
    layer = nn.Dense(2, in_units=4)
    layer.initialize()
    with pytest.raises(ValueError, match="flattened size 3.*in_units=4"):
        layer(mx.nd.ones((1, 3)))


# ---------------------------------------------------------------- BatchNorm's statistics

def _batchnorm_and_data():
    bn = nn.BatchNorm(in_channels=2, momentum=0.75)
    bn.initialize()
    x = onp.array([[1.0, 2.0], [3.0, 6.0], [5.0, 1.0]], dtype=onp.float32)
    return bn, x


def test_batchnorm_updates_moving_statistics_in_training_only():
    bn, x = _batchnorm_and_data()
    y = bn(mx.nd.array(x))                                 # predict mode: running stats
    onp.testing.assert_allclose(y.asnumpy(), x / onp.sqrt(1 + 1e-5), rtol=1e-6)
    onp.testing.assert_array_equal(bn.running_mean.data().asnumpy(), [0, 0])
    with autograd.record():
        y = bn(mx.nd.array(x))
    mean, var = x.mean(0), x.var(0)
    onp.testing.assert_allclose(y.asnumpy(), (x - mean) / onp.sqrt(var + 1e-5), rtol=1e-5)
    onp.testing.assert_allclose(bn.running_mean.data().asnumpy(), 0.25 * mean, rtol=1e-6)
    onp.testing.assert_allclose(bn.running_var.data().asnumpy(), 0.75 + 0.25 * var, rtol=1e-6)
    with autograd.record(train_mode=False):
        bn(mx.nd.array(x))
    onp.testing.assert_allclose(bn.running_mean.data().asnumpy(), 0.25 * mean, rtol=1e-6)


def test_batchnorm_with_global_stats_never_updates():
    bn = nn.BatchNorm(in_channels=2, use_global_stats=True)
    bn.initialize()
    bn.running_mean.set_data(mx.nd.array([1.0, -1.0]))
    with autograd.record():
        y = bn(mx.nd.array([[1.0, -1.0], [3.0, 1.0]]))
    onp.testing.assert_allclose(y.asnumpy(), [[0, 0], [2 / onp.sqrt(1 + 1e-5)] * 2],
                                rtol=1e-6)
    onp.testing.assert_array_equal(bn.running_mean.data().asnumpy(), [1, -1])


def test_batchnorm_hybridized_updates_the_same_statistics():
    for hybridize in (False, True):
        bn, x = _batchnorm_and_data()
        if hybridize:
            bn.hybridize()
        for _ in range(2):
            with autograd.record():
                bn(mx.nd.array(x))
        stats = bn.running_var.data().asnumpy()
        if hybridize:
            onp.testing.assert_array_equal(stats, imperative)
        imperative = stats


def test_batchnorm_cast_keeps_float16_statistics_in_float32():
    bn = nn.BatchNorm(in_channels=2)
    bn.initialize()
    bn.cast("float16")
    assert onp.dtype(bn.running_mean.dtype) == onp.float32
    bn.cast("float64")
    assert bn.running_mean.data().dtype == onp.float64


# ---------------------------------------------------------------- Dropout

def test_dropout_is_the_identity_in_predict_mode_and_scales_in_training():
    layer = nn.Dropout(0.25)
    x = mx.nd.ones((200, 50))
    onp.testing.assert_array_equal(layer(x).asnumpy(), x.asnumpy())
    with autograd.record():
        y = layer(x).asnumpy()
    assert set(onp.unique(y)) <= {0.0, onp.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.02


def test_dropout_shares_its_mask_along_axes():
    layer = nn.Dropout(0.5, axes=(1,))
    with autograd.record():
        y = layer(mx.nd.ones((40, 6))).asnumpy()
    assert (y == y[:, :1]).all() and 0 < (y[:, 0] == 0).sum() < 40


def test_dropout_zero_rate_copies():
    x = mx.nd.array([1.0, 2.0])
    with autograd.record():
        y = nn.Dropout(0)(x)
    assert y is not x
    onp.testing.assert_array_equal(y.asnumpy(), [1, 2])


# ---------------------------------------------------------------- containers and wrappers

def test_sequential_indexing_slicing_and_len():
    net = nn.HybridSequential(prefix="model_")
    with net.name_scope():
        net.add(nn.Dense(3), nn.Activation("relu"), nn.Dense(2))
    assert len(net) == 3 and isinstance(net[1], nn.Activation)
    head = net[:2]
    assert type(head) is nn.HybridSequential and head.prefix == "model_" and len(head) == 2
    assert head[0] is net[0]
    assert repr(net[1:]) == ("HybridSequential(\n  (0): Activation(relu)\n"
                             "  (1): Dense(None -> 2, linear)\n)")
    net.initialize()
    assert net(mx.nd.ones((4, 5))).shape == (4, 2)


def test_sequential_of_hybrid_blocks_warns_when_hybridized():
    net = nn.Sequential()
    net.add(nn.Dense(2))
    with pytest.warns(UserWarning, match="Consider using HybridSequential"):
        net.hybridize()
    net.add(nn.Lambda(lambda x: x * 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net.hybridize()
    net.initialize(mx.init.One())
    onp.testing.assert_array_equal(net(mx.nd.ones((1, 3))).asnumpy(), [[6, 6]])


def test_hybrid_sequential_refuses_plain_blocks():
    with pytest.raises(ValueError, match="Children of HybridBlock must also be HybridBlock"):
        nn.HybridSequential().add(nn.Lambda("tanh"))


def test_lambdas_take_functions_or_operator_names():
    x = mx.nd.array([-1.0, 0.5])
    onp.testing.assert_allclose(nn.Lambda("tanh")(x).asnumpy(), onp.tanh([-1.0, 0.5]),
                                rtol=1e-6)
    onp.testing.assert_allclose(nn.HybridLambda(lambda F, v: F.relu(v) * 3)(x).asnumpy(),
                                [0, 1.5])
    assert repr(nn.Lambda(abs)) == "Lambda(abs)"
    with pytest.raises(AssertionError, match="Function name nope is not found in ndarray"):
        nn.Lambda("nope")
    with pytest.raises(AssertionError, match="nope is not found in symbol/ndarray"):
        nn.HybridLambda("nope")
    with pytest.raises(ValueError, match="Unrecognized function in lambda: 3"):
        nn.HybridLambda(3)


def test_identity_and_concatenate():
    x = mx.nd.array([[1.0, 2.0]])
    assert nn.Identity()(x) is x
    for cls in (nn.Concatenate, nn.HybridConcatenate):
        block = cls(axis=1)
        block.add(nn.Identity(), nn.HybridLambda(lambda F, v: v * 10))
        onp.testing.assert_array_equal(block(x).asnumpy(), [[1, 2, 10, 20]])
    block = nn.HybridConcatenate(axis=0)
    block.add(nn.Identity(), nn.Identity())
    block.hybridize()
    assert block(x).shape == (2, 2)


def test_embedding_truncates_float_indices_and_clips_out_of_range():
    emb = nn.Embedding(4, 2)
    emb.initialize()
    emb.weight.set_data(mx.nd.arange(8).reshape((4, 2)))
    onp.testing.assert_array_equal(emb(mx.nd.array([0, 3.7, 9, -1])).asnumpy(),
                                   [[0, 1], [6, 7], [6, 7], [0, 1]])   # MXNet 1.9.1's values


def test_np_arrays_go_through_the_same_layers():
    net = nn.HybridSequential()
    net.add(nn.Dense(3, activation="relu"), nn.LayerNorm())
    net.initialize()
    x = onp.random.default_rng(0).standard_normal((2, 4)).astype(onp.float32)
    y_nd = net(mx.nd.array(x))
    y_np = net(mx.np.array(x))
    assert isinstance(y_np, mx.np.ndarray) and not isinstance(y_np, mx.nd.NDArray)
    onp.testing.assert_array_equal(y_np.asnumpy(), y_nd.asnumpy())


def test_activation_and_leaky_family_closed_forms():
    x = onp.linspace(-2, 2, 9)
    X = mx.nd.array(x, dtype="float64")
    lam, alpha = SELU
    expected = {
        nn.LeakyReLU(0.2): onp.where(x > 0, x, 0.2 * x),
        nn.ELU(0.5): onp.where(x > 0, x, 0.5 * (onp.exp(x) - 1)),
        nn.SELU(): onp.where(x > 0, lam * x, lam * alpha * (onp.exp(x) - 1)),
        nn.Swish(2.0): x / (1 + onp.exp(-2 * x)),
        nn.SiLU(): x / (1 + onp.exp(-x)),
        nn.Activation("softsign"): x / (1 + onp.abs(x)),
    }
    for layer, want in expected.items():
        onp.testing.assert_allclose(layer(X).asnumpy(), want, rtol=1e-12,
                                    err_msg=type(layer).__name__)
    with pytest.raises(AssertionError, match="Slope coefficient for LeakyReLU"):
        nn.LeakyReLU(-0.1)


def test_nn_exports_what_mxnet_gluon_nn_does():
    for name in ("Block", "HybridBlock", "Sequential", "HybridSequential", "Dense", "Dropout",
                 "Embedding", "BatchNorm", "BatchNormReLU", "InstanceNorm", "LayerNorm",
                 "GroupNorm", "Flatten", "Lambda", "HybridLambda", "Activation", "LeakyReLU",
                 "PReLU", "ELU", "SELU", "Swish", "GELU", "Conv2D", "MaxPool2D",
                 "GlobalAvgPool2D", "ReflectionPad2D"):
        assert name in nn.__all__ and hasattr(nn, name), name
    assert mx.gluon.nn is nn


def test_sync_batchnorm_warns_without_num_devices_and_normalizes_like_batchnorm():
    with pytest.warns(UserWarning, match="Caution using SyncBatchNorm"):
        sync = mx.gluon.contrib.nn.SyncBatchNorm()
    plain = nn.BatchNorm()
    x = mx.nd.array(onp.random.default_rng(0).standard_normal((4, 3, 2)))
    for layer in (sync, plain):
        layer.initialize()
    with autograd.record():
        ys = [sync(x), plain(x)]
    onp.testing.assert_array_equal(ys[0].asnumpy(), ys[1].asnumpy())
    onp.testing.assert_array_equal(sync.running_var.data().asnumpy(),
                                   plain.running_var.data().asnumpy())


def test_sparse_embedding_gives_dense_gradients():
    emb = mx.gluon.contrib.nn.SparseEmbedding(4, 2)
    emb.initialize()
    with autograd.record():
        y = emb(mx.nd.array([1, 1, 3]))
    y.backward()
    onp.testing.assert_array_equal(emb.weight.grad().asnumpy(), [[0, 0], [2, 2], [0, 0], [1, 1]])


def test_awkward_inputs():
    # A 1-D input is a batch of one-feature rows, as in MXNet 1.9.1 ((1,) -> (1, 2)).
    dense = nn.Dense(2, in_units=1)
    dense.initialize(mx.init.One())
    onp.testing.assert_array_equal(dense(mx.nd.array([3.0])).asnumpy(), [[3, 3]])
    with pytest.raises(ValueError, match="fully_connected: the data is 0-d"):
        dense(mx.nd.array(3.0))
    # Empty batches keep their shape (MXNet 1.9.1 fails on them).
    for layer, shape, out in ((nn.Dense(3), (0, 5), (0, 3)), (nn.Flatten(), (0, 3, 2), (0, 6)),
                              (nn.Dense(4), (0, 3, 2), (0, 4)),
                              (nn.Embedding(4, 2), (0,), (0, 2))):
        layer.initialize()
        assert layer(mx.nd.ones(shape)).shape == out
    # float64 layers compute in float64.
    dense = nn.Dense(2, dtype="float64", in_units=3)
    dense.initialize()
    assert dense(mx.nd.ones((2, 3), dtype="float64")).dtype == onp.float64
