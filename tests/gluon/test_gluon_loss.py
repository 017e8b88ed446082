"""gluon.loss against MXNet 1.9.1, finite differences and the symbolic path.

``tests/fixtures/gluon_losses.npz`` was written by ``make_gluon_losses.py`` with MXNet 1.9.1:
every loss on fixed inputs (sample_weight, weight, batch_axis=1, sparse and dense labels,
from_logits, pos_weight, CTC with padding and lengths), its output and the gradients of the
output's sum. Gradients are also checked in float64 against central finite differences of
the loss itself (first order, and second order through ``create_graph`` for the losses that
are twice differentiable), and the losses traced with ``F = mx.sym`` against ``F = mx.nd``.
"""
import json
import os
import sys

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd, gluon

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__))))
from _helpers import assert_fd_close, central_difference, fd_gradient  # noqa: E402

FIXTURE = onp.load(os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                                "gluon_losses.npz"))
SPEC = {case["name"]: case for case in json.loads(str(FIXTURE["spec"]))}
NAMES = sorted(SPEC)
# Losses with a second derivative: not CTC (differentiable once, Note [CTC loss]); the
# piecewise losses (L1, Huber, hinges, triplet's relu) have one away from their kinks, where
# the fixed inputs lie.
TWICE = [n for n in NAMES if SPEC[n]["cls"] != "CTCLoss"]
# MXNet's float32 SDML value of the first sample is 0.06384426 where the float64 value is
# 0.06384146 and ours 0.06384148 (a sum of terms of size ~1 that cancel to 0.06)
TOLERANCE = {"sdml_smoothing": dict(rtol=1e-5, atol=1e-5)}


def _inputs(case, dtype=onp.float32, kind=mx.nd.array):
    name = case["name"]
    out = []
    for i in range(case["n_inputs"]):
        if i in case["none"]:
            out.append(None)
        else:
            out.append(kind(FIXTURE["%s/in%d" % (name, i)].astype(dtype), dtype=dtype))
    return out


def _diff(case):
    """The inputs to differentiate: MXNet's, or the prediction where MXNet records none."""
    return case["diff"] or [0]


def _loss(case):
    return getattr(gluon.loss, case["cls"])(**case["kwargs"])


def _weights(case):
    """Fixed weights making the output a scalar whose derivatives see every output."""
    shape = FIXTURE[case["name"] + "/out"].shape
    return onp.random.default_rng(7).uniform(0.5, 1.5, shape)


# ---------------------------------------------------------------- against MXNet 1.9.1
@pytest.mark.parametrize("name", NAMES)
def test_value_and_gradient_match_mxnet(name):
    case = SPEC[name]
    loss = _loss(case)
    assert repr(loss) == case["repr"]
    inputs = _inputs(case)
    for i in case["diff"]:
        inputs[i].attach_grad()
    with autograd.record():
        out = loss(*inputs)
    if case["diff"]:        # MXNet cannot record poisson_full (compute_full); we can
        out.backward()
    expected = FIXTURE[name + "/out"]
    assert isinstance(out, mx.nd.NDArray)
    assert out.shape == expected.shape and out.dtype == onp.float32
    onp.testing.assert_allclose(out.asnumpy(), expected,
                                **TOLERANCE.get(name, dict(rtol=1e-5, atol=1e-6)))
    for i in case["diff"]:
        onp.testing.assert_allclose(inputs[i].grad.asnumpy(), FIXTURE["%s/grad%d" % (name, i)],
                                    rtol=1e-4, atol=1e-6, err_msg="input %d" % i)


# ---------------------------------------------------------------- finite differences
def _scalar_loss(case, values, weights):
    """The weighted sum of the loss outputs for float64 NumPy ``values`` (None kept)."""
    arrays = [None if v is None else mx.nd.array(v, dtype=onp.float64) for v in values]
    out = _loss(case)(*arrays)
    return float(onp.sum(out.asnumpy() * weights))


@pytest.mark.parametrize("name", NAMES)
def test_gradient_matches_finite_differences_float64(name):
    case = SPEC[name]
    values = [None if v is None else v.asnumpy().astype(onp.float64) for v in _inputs(case)]
    diff = _diff(case)
    weights = _weights(case)
    arrays = [None if v is None else mx.nd.array(v, dtype=onp.float64) for v in values]
    for i in diff:
        arrays[i].attach_grad()
    with autograd.record():
        total = (_loss(case)(*arrays) * mx.nd.array(weights, dtype=onp.float64)).sum()
    total.backward()
    for i in diff:
        def f(x, i=i):
            vals = list(values)
            vals[i] = x
            return _scalar_loss(case, vals, weights)
        expected = fd_gradient(f, values[i])[0]
        assert arrays[i].grad.dtype == onp.float64
        assert_fd_close(arrays[i].grad.asnumpy(), expected, "%s d/d(input %d)" % (name, i),
                        rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", TWICE)
def test_hessian_vector_product_matches_finite_differences(name):
    """d/dt of the gradient at ``x + t v`` equals the gradient of ``<grad, v>``."""
    case = SPEC[name]
    i = _diff(case)[0]
    values = [None if v is None else v.asnumpy().astype(onp.float64) for v in _inputs(case)]
    weights = mx.nd.array(_weights(case), dtype=onp.float64)
    v = onp.random.default_rng(3).uniform(-1, 1, values[i].shape)

    def gradient(x, create_graph=False):
        arrays = [None if a is None else mx.nd.array(a, dtype=onp.float64) for a in values]
        arrays[i] = x
        x.attach_grad()
        with autograd.record():
            total = (_loss(case)(*arrays) * weights).sum()
            g = autograd.grad(total, x, create_graph=create_graph)[0]
        return g

    x = mx.nd.array(values[i], dtype=onp.float64)
    with autograd.record():
        g = gradient(x, create_graph=True)
        directional = (g * mx.nd.array(v, dtype=onp.float64)).sum()
    hv = autograd.grad(directional, x)[0].asnumpy()

    def phi(t):
        return gradient(mx.nd.array(values[i] + t * v, dtype=onp.float64)).asnumpy()
    assert_fd_close(hv, central_difference(phi), "%s Hessian-vector product" % name,
                    rtol=1e-6, atol=1e-7)


def test_ctc_second_derivative_is_a_clear_error():
    case = SPEC["ctc_ntc"]
    pred, label = _inputs(case, onp.float64)
    pred.attach_grad()
    with autograd.record():
        out = _loss(case)(pred, label).sum()
        g = autograd.grad(out, pred, create_graph=True)[0]
        with pytest.raises(NotImplementedError, match="differentiable once"):
            autograd.grad((g * g).sum(), pred)
    assert mx.list_ops()["ctc_loss"]["order"] == 1


# ---------------------------------------------------------------- F = mx.sym
@pytest.mark.parametrize("name", [n for n in NAMES if SPEC[n]["cls"] != "SDMLLoss"])
def test_symbolic_trace_equals_imperative(name):
    """The loss called on Symbols (``F = mx.sym``) and bound gives the imperative values and
    gradients (Note [Losses on nd and sym])."""
    case = SPEC[name]
    inputs = _inputs(case)
    given = [j for j, x in enumerate(inputs) if x is not None]
    variables = {j: mx.sym.var("in%d" % j) for j in given}
    out_sym = _loss(case)(*[variables.get(j) for j in range(len(inputs))])
    args = {"in%d" % j: inputs[j] for j in given}
    grads = {"in%d" % j: mx.nd.zeros(inputs[j].shape) for j in _diff(case)}
    exe = out_sym.bind(mx.cpu(), args=args, args_grad=grads)
    out = exe.forward(is_train=True)[0]
    for j in _diff(case):
        inputs[j].attach_grad()
    with autograd.record():
        expected = _loss(case)(*inputs)
    expected.backward()
    onp.testing.assert_allclose(out.asnumpy().reshape(expected.shape), expected.asnumpy(),
                                rtol=1e-6, atol=1e-7)
    exe.backward(mx.nd.ones(out.shape))
    for j in _diff(case):
        onp.testing.assert_allclose(grads["in%d" % j].asnumpy(), inputs[j].grad.asnumpy(),
                                    rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- hybridized
@pytest.mark.parametrize("name", [n for n in NAMES if SPEC[n]["cls"] != "SDMLLoss"])
def test_hybridized_equals_imperative(name):
    case = SPEC[name]
    results = []
    for hybrid in (False, True):
        loss = _loss(case)
        if hybrid:
            loss.hybridize()
        inputs = _inputs(case)
        for j in _diff(case):
            inputs[j].attach_grad()
        outs = []
        for _ in range(2):      # the first hybridized call traces, the second replays
            with autograd.record():
                out = loss(*inputs)
            out.backward()
            outs.append((out.asnumpy(), [inputs[j].grad.asnumpy() for j in _diff(case)]))
        results.append(outs)
    for (out_i, grads_i), (out_h, grads_h) in zip(*results):
        assert out_h.shape == out_i.shape
        onp.testing.assert_array_equal(out_h, out_i)
        for gi, gh in zip(grads_i, grads_h):
            onp.testing.assert_array_equal(gh, gi)


def test_sdml_hybridized_names_the_block():
    loss = gluon.loss.SDMLLoss()
    loss.hybridize()
    x = mx.nd.array(onp.ones((3, 2)))
    with pytest.raises(Exception, match="SDMLLoss"):
        loss(x, x)


# ---------------------------------------------------------------- behaviour and errors
def test_mxnet_unittest_values():
    """The closed-form values of MXNet's test_loss.py::test_loss_ndarray."""
    output, label = mx.nd.array([1, 2, 3, 4]), mx.nd.array([1, 3, 5, 7])
    weighting = mx.nd.array([0.5, 1, 0.5, 1])
    assert mx.nd.sum(gluon.loss.L1Loss()(output, label)).asscalar() == 6.
    assert mx.nd.sum(gluon.loss.L1Loss(weight=0.5)(output, label)).asscalar() == 3.
    assert mx.nd.sum(gluon.loss.L1Loss()(output, label, weighting)).asscalar() == 5.
    assert mx.nd.sum(gluon.loss.L2Loss()(output, label)).asscalar() == 7.
    assert mx.nd.sum(gluon.loss.L2Loss(weight=0.25)(output, label)).asscalar() == 1.75
    assert mx.nd.sum(gluon.loss.L2Loss()(output, label, weighting)).asscalar() == 6


def test_np_arrays_give_np_arrays():
    pred = mx.np.array([[0.5, -1.0], [2.0, 0.0]])
    label = mx.np.array([1, 0])
    out = gluon.loss.SoftmaxCrossEntropyLoss()(pred, label)
    assert isinstance(out, mx.np.ndarray) and not isinstance(out, mx.nd.NDArray)
    x = pred.asnumpy().astype(onp.float64)
    logp = x - onp.log(onp.exp(x).sum(1, keepdims=True))
    onp.testing.assert_allclose(out.asnumpy(), -logp[[0, 1], [1, 0]], rtol=1e-6)


def test_poisson_full_with_zero_counts_is_finite():
    """Stirling's term only where target > 1: a zero count adds nothing (MXNet: nan)."""
    pred, target = mx.nd.array([[1.0, 2.0]]), mx.nd.array([[0.0, 3.0]])
    out = gluon.loss.PoissonNLLLoss(from_logits=False, compute_full=True)(pred, target)
    p, t = onp.array([1.0, 2.0]), onp.array([0.0, 3.0])
    nll = p - t * onp.log(p + 1e-8)
    nll[1] += 3 * onp.log(3) - 3 + 0.5 * onp.log(2 * onp.pi * 3)
    assert out.shape == (1,)
    onp.testing.assert_allclose(out.asnumpy(), [nll.mean()], rtol=1e-6)


def test_ctc_empty_label_and_impossible_alignment():
    """An empty label has loss -sum_t log y[t, blank]; a label that needs more frames than
    there are has loss inf and a zero gradient (MXNet 1.9.1 returns 0 for both)."""
    pred = mx.nd.array(onp.random.default_rng(0).normal(size=(2, 2, 3)), dtype=onp.float64)
    pred.attach_grad()
    label = mx.nd.array([[-1, -1], [1, 1]])     # sample 1: "1 1" needs 3 frames, has 2
    with autograd.record():
        out = gluon.loss.CTCLoss()(pred, label)
    out.backward()
    x = pred.asnumpy()[0]
    logy = x - onp.log(onp.exp(x).sum(-1, keepdims=True))
    onp.testing.assert_allclose(out.asnumpy()[0], -logy[:, 2].sum(), rtol=1e-12)
    assert out.asnumpy()[1] == onp.inf
    assert not pred.grad.asnumpy()[1].any()


def test_ctc_bad_labels_raise():
    pred = mx.nd.zeros((1, 3, 4))
    with pytest.raises(ValueError, match="labels must lie in"):
        gluon.loss.CTCLoss()(pred, mx.nd.array([[3, -1]]))     # 3 is the blank
    with pytest.raises(ValueError, match="data length exceeds"):
        gluon.loss.CTCLoss()(pred, mx.nd.array([[1, -1]]), mx.nd.array([4]))


@pytest.mark.parametrize("make, message", [
    (lambda: gluon.loss.L1Loss(weight="2"), "L1Loss: weight must be a number"),
    (lambda: gluon.loss.L2Loss(batch_axis=0.5), "L2Loss: batch_axis must be an int"),
    (lambda: gluon.loss.CTCLoss(layout="NCT"), "CTCLoss: layout must be"),
    (lambda: gluon.loss.CTCLoss(label_layout="NTC"), "CTCLoss: label_layout must be"),
    (lambda: gluon.loss.LogisticLoss(label_format="pm1"), "label_format can only be"),
])
def test_bad_arguments_raise(make, message):
    with pytest.raises((TypeError, ValueError), match=message):
        make()


@pytest.mark.parametrize("cls", ["L2Loss", "KLDivLoss", "TripletLoss"])
def test_batch_axis_out_of_range_names_the_loss(cls):
    """MXNet raises too; wrapping the axis around would average over the wrong axes."""
    x = mx.nd.ones((2, 3))
    with pytest.raises(ValueError, match="%s: batch_axis=2 is out of range" % cls):
        getattr(gluon.loss, cls)(batch_axis=2)(x, x, x) if cls == "TripletLoss" else \
            getattr(gluon.loss, cls)(batch_axis=2)(x, x)


@pytest.mark.parametrize("cls, args, message", [
    ("L2Loss", [(2, 3), (5,)], "L2Loss: label has shape (5,) (5 elements) but pred"),
    ("TripletLoss", [(2, 3), (6,), (2, 2)], "TripletLoss: negative has shape (2, 2)"),
    ("CosineEmbeddingLoss", [(2, 2), (2, 3), (2,)], "CosineEmbeddingLoss: input1 has shape"),
])
def test_size_mismatch_names_the_loss_and_inputs(cls, args, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        getattr(gluon.loss, cls)()(*[mx.nd.zeros(shape) for shape in args])


def test_ctc_without_frames_or_labels():
    """No frames: only the empty label is possible (loss 0), any other is impossible (inf);
    a label of width 0 is empty for every sample."""
    out = gluon.loss.CTCLoss()(mx.nd.zeros((2, 0, 4)), mx.nd.array([[-1, -1], [0, -1]]))
    onp.testing.assert_array_equal(out.asnumpy(), [0.0, onp.inf])
    assert not onp.signbit(out.asnumpy()[0])
    out = gluon.loss.CTCLoss()(mx.nd.zeros((2, 3, 4)), mx.nd.zeros((2, 0)))
    onp.testing.assert_allclose(out.asnumpy(), [3 * onp.log(4)] * 2, rtol=1e-6)


def test_sdml_shape_mismatch_names_the_loss():
    with pytest.raises(ValueError, match="SDMLLoss: x1 and x2"):
        gluon.loss.SDMLLoss()(mx.nd.ones((3, 2)), mx.nd.ones((2, 2)))


def test_empty_batch():
    out = gluon.loss.L2Loss()(mx.nd.zeros((0, 3)), mx.nd.zeros((0, 3)))
    assert out.shape == (0,)


# ---------------------------------------------------------------- nd operators test_loss.py uses
def test_nd_where_with_a_row_condition_selects_rows():
    """MXNet's nd.where: a 1-D condition of length x.shape[0] picks whole rows (MXNet 1.9.1
    prints [[1, 2], [30, 40]] for this call)."""
    x, y = mx.nd.array([[1, 2], [3, 4]]), mx.nd.array([[10, 20], [30, 40]])
    out = mx.nd.where(mx.nd.array([1, 0]), x, y)
    onp.testing.assert_array_equal(out.asnumpy(), [[1, 2], [30, 40]])
    same = mx.nd.where(mx.nd.array([[1, 0], [0, 1]]), x, y)     # elementwise as before
    onp.testing.assert_array_equal(same.asnumpy(), [[1, 20], [30, 4]])


def test_nd_broadcast_ops_ignore_attributes_they_lack_as_mxnet():
    """MXNet 1.9.1: broadcast_maximum([0], [[1], [-1]], axis=1) is [[1], [0]]."""
    out = mx.nd.broadcast_maximum(mx.nd.array([0]), mx.nd.array([[1], [-1]]), axis=1)
    onp.testing.assert_array_equal(out.asnumpy(), [[1], [0]])
    with pytest.raises(TypeError, match="out= is not supported"):
        mx.nd.broadcast_add(mx.nd.ones(1), mx.nd.ones(1), out=mx.nd.ones(1))
