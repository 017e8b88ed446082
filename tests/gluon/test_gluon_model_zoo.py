"""gluon.model_zoo.vision against MXNet 1.9.1's model zoo.

``tests/fixtures/make_model_zoo.py`` ran the models of ``tests/fixtures/model_zoo_cases.py``
in MXNet 1.9.1: their parameters' names and shapes, their predict-mode outputs with fixed
parameter values, and one model saved in both parameter-file layouts.
"""
import json
import os
import shutil
import sys

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd
from fastgrad.gluon.model_zoo import vision, model_store

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures")
sys.path.insert(0, FIXTURES)
import model_zoo_cases as cases  # noqa: E402

with open(os.path.join(FIXTURES, "model_zoo.json")) as _f:
    MX = json.load(_f)


def _without_prefix(params, prefix):
    return {key: [name[len(prefix):] if name.startswith(prefix) else "!" + name, shape]
            for key, (name, shape) in params.items()}


@pytest.mark.parametrize("name", sorted(cases.MODELS))
def test_model_equals_mxnet(name):
    names, y, net = cases.run(mx, vision, name)
    want = MX[name]
    assert _without_prefix(names, net.prefix) == _without_prefix(want["params"],
                                                                  want["prefix"])
    assert repr(net) == want["repr"]
    if want["output"] is not None:
        expected = onp.array(want["output"])
        onp.testing.assert_allclose(y, expected, rtol=1e-4,
                                    atol=1e-5 * max(1.0, onp.abs(expected).max()))


def test_every_model_has_mxnets_parameters():
    """All 34 models of MXNet's get_model: their parameters' names and shapes (a digest)."""
    assert sorted(MX["digests"]) == sorted(cases.ALL_NAMES)
    got = {name: cases.digest(vision.get_model(name)) for name in cases.ALL_NAMES}
    assert got == MX["digests"]


@pytest.mark.parametrize("file_name", ["model_zoo_mobilenet.params",
                                       "model_zoo_mobilenet_prefixed.params"])
def test_mxnet_parameter_files_load(file_name):
    shape = cases.MODELS[cases.SAVED][1]
    net = cases.build(vision, cases.SAVED)
    net.load_parameters(os.path.join(FIXTURES, file_name))
    assert net.features[0].weight.shape == (4, 3, 3, 3)
    y = net(mx.nd.array(cases.input_array(cases.SAVED, shape))).asnumpy()
    onp.testing.assert_allclose(y, onp.array(MX[cases.SAVED]["output"]), rtol=1e-4,
                                atol=1e-6)


def test_pretrained_reads_the_file_from_root(tmp_path):
    name = "mobilenet0.25"
    kwargs, shape = cases.MODELS[name]
    with pytest.raises(FileNotFoundError, match=r"mobilenet0\.25 are not in .*: fastgrad does "
                                                r"not download .*; put mobilenet0\.25-9f83e440"
                                                r"\.params there \(SHA-1 9f83e440996887baf91a6"
                                                r"aff1cccc1c903a64274; MXNet publishes it zipped "
                                                r"at https://apache-mxnet\.s3-accelerate\."
                                                r"dualstack\.amazonaws\.com/gluon/models/"
                                                r"mobilenet0\.25-9f83e440\.zip\)"):
        vision.get_model(name, pretrained=True, root=str(tmp_path), **kwargs)
    _, _, trained = cases.run(mx, vision, name)
    trained.save_parameters(str(tmp_path / "mobilenet0.25-mine.params"))
    net = vision.get_model(name, pretrained=True, root=str(tmp_path), **kwargs)
    y = net(mx.nd.array(cases.input_array(name, shape))).asnumpy()
    onp.testing.assert_allclose(y, onp.array(MX[name]["output"]), rtol=1e-4, atol=1e-6)
    # A file under MXNet's own name must be MXNet's published one.
    shutil.copy(tmp_path / "mobilenet0.25-mine.params",
                tmp_path / "mobilenet0.25-9f83e440.params")
    with pytest.raises(ValueError, match="does not hold MXNet's published parameters"):
        vision.mobilenet0_25(pretrained=True, root=str(tmp_path), **kwargs)
    model_store.purge(str(tmp_path))
    assert not list(tmp_path.iterdir())


def test_get_model_names_and_errors():
    with pytest.raises(ValueError, match="Model resnet19_v1 is not supported. Available "
                                         "options are\n\talexnet"):
        vision.get_model("ResNet19_v1")
    with pytest.raises(AssertionError, match="Invalid number of layers: 19"):
        vision.get_resnet(1, 19)
    with pytest.raises(ValueError, match="Pretrained model for resnet19_v1 is not available"):
        model_store.short_hash("resnet19_v1")
    assert vision.get_model("MobileNet0.5").features[0]._channels == 16
    assert mx.gluon.model_zoo.vision is vision


@pytest.mark.parametrize("name", [cases.SAVED, "mobilenetv2_0.25"])
def test_input_gradient_equals_finite_differences(name):
    """In float64 and predict mode: the backward pass through the whole model against a
    central difference along random directions."""
    net = cases.build(vision, name)
    net.initialize()
    net.cast("float64")
    rng = onp.random.RandomState(0)
    x = mx.nd.array(rng.randn(1, 3, 32, 32), dtype="float64")
    head = mx.nd.array(rng.randn(1, 10), dtype="float64")
    net(x)
    for key, p in net._collect_params_with_prefix().items():
        p.set_data(mx.nd.array(cases.param_value(key, p.shape), dtype="float64"))
    x.attach_grad()
    with autograd.record(train_mode=False):
        loss = (net(x) * head).sum()
    loss.backward()

    def f(z):
        return float((net(mx.nd.array(z, dtype="float64")) * head).sum().asscalar())

    for _ in range(2):
        v, eps = rng.randn(1, 3, 32, 32), 1e-5
        numeric = (f(x.asnumpy() + eps * v) - f(x.asnumpy() - eps * v)) / (2 * eps)
        onp.testing.assert_allclose((x.grad.asnumpy() * v).sum(), numeric, rtol=1e-7)


def test_hybridized_resnet_equals_imperative_with_gradients():
    x = mx.nd.array(cases.input_array("resnet18_v1", (2, 3, 16, 16)))
    results = []
    for hybridize in (False, True):
        net = vision.resnet18_v1(classes=4)
        net.initialize()
        net(x)
        for key, p in net._collect_params_with_prefix().items():
            p.set_data(mx.nd.array(cases.param_value(key, p.shape)))
        if hybridize:
            net.hybridize()
        with autograd.record():
            loss = (net(x) ** 2).sum()
        loss.backward()
        results.append((loss.asnumpy(), net.features[0].weight.grad().asnumpy(),
                        net.features[1].running_mean.data().asnumpy()))
    for imperative, hybrid in zip(*results):
        onp.testing.assert_array_equal(hybrid, imperative)
