"""Issue 24's Gluon acceptance check: four models written with MXNet 1.9.1 run in fastgrad.

``tests/fixtures/make_gluon_models.py`` built the MLP, LeNet (BatchNorm, Dropout), 2-layer
LSTM language model and ResNet-18 of ``tests/fixtures/gluon_models_cases.py`` in MXNet 1.9.1,
saved their parameters, exported them hybridized, and kept their outputs and the gradients of
every parameter for a fixed loss. Here fastgrad
- loads MXNet's ``.params`` into its own blocks of both Gluon styles (1.x ``hybrid_forward``
  with prefixes; 2.x ``forward`` on ``mx.np`` arrays with structural names, from the 1.x file
  and from MXNet's ``npx.save``-format file of the 2.x twin), imperative and hybridized, and
  gives MXNet's outputs and gradients: predict mode (Dropout rate 0.5 is the identity,
  BatchNorm on the moving statistics; gradients only for the models without BatchNorm,
  whose predict-mode backward MXNet 1.9.1 does not define), and training mode with the
  models rebuilt at Dropout rate 0 (BatchNorm on batch statistics, moving statistics updated);
- loads MXNet's ``export`` with ``SymbolBlock.imports``;
- exports its own hybridized blocks and loads them back. MXNet reads them too: run
  ``PYTHONPATH=. python tests/gluon/test_gluon_models_mxnet.py --export DIR`` here, then
  ``/work/mxnet-venv/bin/python tests/fixtures/make_gluon_models.py --check-fastgrad-export
  DIR``.

Tolerance: float32 with ``rtol=1e-5`` and ``atol = 1e-5 * max|reference|`` per array: the two
libraries sum in different orders (BLAS, convolution, BatchNorm's reductions over the batch),
so entries that cancel to near zero carry an absolute error proportional to the array's scale
(rounding of the terms), not to their own size. Measured (every model, style, file and
mode; the same imperative and hybridized): outputs within 9.0e-7 of their largest entry (MLP
2.1e-7, LeNet 9.0e-7, LSTM LM 2.2e-7, ResNet-18 5.3e-7), gradients and moving statistics
within 5.3e-6 (MLP 0 -- bit for bit --, LeNet 2.4e-6, LSTM LM 4.1e-7, ResNet-18 5.3e-6), so
``ATOL_SCALE = 1e-5`` has a margin of about 2. See ``BEFORE_BATCHNORM`` for the gradients
that are rounding noise in both libraries.
"""
import json
import os
import sys

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd
from fastgrad.gluon import SymbolBlock

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures")
FILES = os.path.join(FIXTURES, "gluon_models")
sys.path.insert(0, FIXTURES)
import gluon_models_cases as cases  # noqa: E402

# a 2.x block, and a 1.x container holding one, run imperatively after hybridize(), with a
# one-time warning naming the 2.x block
pytestmark = pytest.mark.filterwarnings("ignore:HybridBlock .* runs this block imperatively")

REF = dict(onp.load(os.path.join(FIXTURES, "gluon_models.npz")))
RTOL = 1e-5
ATOL_SCALE = 1e-5
# Biases of layers whose output goes into a BatchNorm: in training mode BatchNorm subtracts
# the batch mean of each channel, so their exact gradient is 0 and both libraries give
# rounding noise (MXNet up to 8e-6); it is compared at the scale of the layer's weight
# gradient instead of its own.
BEFORE_BATCHNORM = {"lenet": ("0.bias", "4.bias", "8.bias")}


def _ref(model, what):
    """Fixture arrays ``<model>.<what><suffix>`` by suffix."""
    head = "%s.%s" % (model, what)
    return {k[len(head):]: v for k, v in REF.items() if k.startswith(head)}


def _inputs(model):
    return [REF["%s.x%d" % (model, i)] for i in range(len(_ref(model, "x")))]


def _weights(model):
    return [REF["%s.w%d" % (model, i)] for i in range(len(_ref(model, "w")))]


def _names(model):
    return json.loads(str(REF[model + ".names"]))


def _as_list(y):
    return list(y) if isinstance(y, (list, tuple)) else [y]


def _run(net, model, train, array, params=None):
    """Outputs, gradients and non-differentiable values of ``sum_i sum(out_i * w_i)``, by
    structural name (or by the keys of ``params``, a SymbolBlock's ``collect_params()``)."""
    xs = [array(x) for x in _inputs(model)]
    with autograd.record(train_mode=train):
        outs = _as_list(net(*xs))
        loss = sum((o * array(w)).sum() for o, w in zip(outs, _weights(model)))
    loss.backward()
    params = (params or net._collect_params_with_prefix()).items()
    grads = {k: p.grad().asnumpy() for k, p in params if p.grad_req != "null"}
    after = {k: p.data().asnumpy() for k, p in params if p.grad_req == "null"}
    return [o.asnumpy() for o in outs], grads, after


def _close(got, want, what, scale=None):
    assert got.shape == want.shape, what
    scale = float(onp.abs(want).max()) if scale is None else scale
    atol = ATOL_SCALE * max(scale, 1e-30)
    onp.testing.assert_allclose(got, want, rtol=RTOL, atol=atol, err_msg=what)
    return float(onp.abs(got - want).max() / max(scale, 1e-30))


def _compare(model, mode, outs, grads, after=None, names=None):
    """Compare with the fixture of ``mode``; ``names`` maps structural names to the keys of
    ``grads``/``after`` (a SymbolBlock's prefixed names); ``grads=None`` compares the
    outputs only. Returns the largest difference
    relative to each array's largest entry."""
    names = names or {k: k for k in _names(model)}
    want_outs = _ref(model, mode + ".out")
    worst = max(_close(outs[int(i)], v, "%s %s out%s" % (model, mode, i))
                for i, v in want_outs.items())
    assert len(outs) == len(want_outs)
    want_grads = _ref(model, mode + ".grad.")
    if grads is not None:
        assert want_grads
        assert set(want_grads) <= set(names)
        for k, v in want_grads.items():
            scale = None
            if mode == "train" and k in BEFORE_BATCHNORM.get(model, ()):
                scale = float(onp.abs(want_grads[k[:-len("bias")] + "weight"]).max())
            worst = max(worst, _close(grads[names[k]], v, "%s %s grad %s" % (model, mode, k),
                                      scale))
    if after is not None:
        for k, v in _ref(model, mode + ".after.").items():
            worst = max(worst, _close(after[names[k]], v, "%s %s after %s" % (model, mode, k)))
    return worst


def _build(model, style, dropout=cases.DROPOUT, hybridize=False, params_file=None):
    with mx.name.NameManager():    # the prefixes MXNet's export has (resnetv10_, ...)
        net = cases.build(mx, model, style, dropout=dropout)
    net.load_parameters(params_file or os.path.join(FILES, model + ".params"))
    if hybridize:
        net.hybridize()
    return net


def _check_style(model, style, hybridize, params_file=None):
    array = mx.nd.array if style == "1x" else mx.np.array
    net = _build(model, style, hybridize=hybridize, params_file=params_file)
    outs = [o.asnumpy() for o in _as_list(net(*[array(x) for x in _inputs(model)]))]
    worst = _compare(model, "predict", outs, None)
    if model not in cases.HAS_BATCHNORM:
        p_outs, grads, _ = _run(net, model, False, array)
        worst = max(worst, _compare(model, "predict", p_outs, grads))
    tnet = _build(model, style, dropout=0.0, hybridize=hybridize, params_file=params_file)
    return max(worst, _compare(model, "train", *_run(tnet, model, True, array)))


@pytest.mark.parametrize("hybridize", [False, True], ids=["imperative", "hybridized"])
@pytest.mark.parametrize("model", cases.MODELS)
def test_mxnet_params_in_1x_blocks(model, hybridize):
    _check_style(model, "1x", hybridize)


@pytest.mark.parametrize("source", ["1x_file", "np_file"])
@pytest.mark.parametrize("hybridize", [False, True], ids=["imperative", "hybridized"])
@pytest.mark.parametrize("model", cases.MODELS)
def test_mxnet_params_in_2x_blocks(model, hybridize, source):
    params_file = None
    if source == "np_file":
        params_file = os.path.join(FILES, model + "_np.params")
        if not os.path.exists(params_file):
            pytest.skip("no npx-format file for %s (kept small: its 2.x twin loads the 1.x "
                        "file)" % model)
    mx.npx.set_np()
    try:
        _check_style(model, "2x", hybridize, params_file)
    finally:
        mx.npx.reset_np()


def _input_names(model):
    return ["data"] if len(_inputs(model)) == 1 else \
        ["data%d" % i for i in range(len(_inputs(model)))]


@pytest.mark.parametrize("model", cases.MODELS)
def test_mxnet_export_in_symbol_block_imports(model):
    prefix = os.path.join(FILES, model)
    net = SymbolBlock.imports(prefix + "-symbol.json", _input_names(model),
                              prefix + "-0000.params")
    outs = [o.asnumpy() for o in _as_list(net(*[mx.nd.array(x) for x in _inputs(model)]))]
    _compare(model, "predict", outs, None)
    if model not in cases.HAS_BATCHNORM:
        outs, grads, _ = _run(net, model, False, mx.nd.array, net.collect_params())
        _compare(model, "predict", outs, grads, names=_names(model))
    if model not in cases.HAS_DROPOUT:       # its exported graph keeps Dropout at rate 0.5
        _compare(model, "train", *_run(net, model, True, mx.nd.array, net.collect_params()),
                 names=_names(model))


def export_all(directory):
    """fastgrad's ``export`` of each hybridized 1.x model (MXNet's parameter values) into
    ``directory/<model>-symbol.json`` + ``-0000.params``, and of the models with Dropout
    rebuilt at rate 0 into ``<model>_train-*`` (for the training-mode comparison)."""
    for model in cases.MODELS:
        for suffix, dropout in [("", cases.DROPOUT)] + \
                [("_train", 0.0)] * (model in cases.HAS_DROPOUT):
            net = _build(model, "1x", dropout=dropout, hybridize=True)
            net(*[mx.nd.array(x) for x in _inputs(model)])
            net.export(os.path.join(directory, model + suffix))


@pytest.mark.parametrize("model", cases.MODELS)
def test_fastgrad_export_loads_back(model, tmp_path):
    net = _build(model, "1x", hybridize=True)
    net(*[mx.nd.array(x) for x in _inputs(model)])
    prefix = os.path.join(str(tmp_path), model)
    net.export(prefix)
    # the same parameter keys (arg:/aux: and prefixed names) as MXNet's export of the model
    ours = mx.nd.load(prefix + "-0000.params")
    theirs = mx.nd.load(os.path.join(FILES, model + "-0000.params"))
    assert sorted(ours) == sorted(theirs)
    for k in theirs:
        onp.testing.assert_array_equal(ours[k].asnumpy(), theirs[k].asnumpy(), err_msg=k)
    back = SymbolBlock.imports(prefix + "-symbol.json", _input_names(model),
                               prefix + "-0000.params")
    outs = [o.asnumpy() for o in _as_list(back(*[mx.nd.array(x) for x in _inputs(model)]))]
    _compare(model, "predict", outs, None)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--export":
        os.makedirs(sys.argv[2], exist_ok=True)
        export_all(sys.argv[2])
        print("exported %s to %s" % (", ".join(cases.MODELS), sys.argv[2]))
    else:
        sys.exit("usage: python %s --export DIR" % sys.argv[0])
