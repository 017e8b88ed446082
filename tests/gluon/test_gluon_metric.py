"""mx.metric (also mx.gluon.metric): values against MXNet 1.9.1's on the same inputs.

``tests/fixtures/mxnet_metrics.json`` was written by ``make_metric_fixtures.py`` with MXNet
1.9.1; every metric, ties, several batches, ``reset_local`` and axis options.
"""

import json
import math
import os

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import metric

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "fixtures", "mxnet_metrics.json")
with open(FIXTURE) as _f:
    CASES = json.load(_f)["cases"]


def _same(ours, theirs, rtol):
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b, rtol)
        return
    if theirs is None:
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(theirs, rel=rtol, abs=1e-12)


def _run(case, make_array):
    m = metric.create(case["metric"], **case["kwargs"])
    for step, expected in zip(case["steps"], case["results"]):
        if isinstance(step, str):
            getattr(m, step)()
        else:
            m.update([make_array(a) for a in step["labels"]],
                     [make_array(a) for a in step["preds"]])
        name, value = m.get()
        assert name == expected["name"]
        # float32 sums may round in another order than MXNet's kernels: 1e-6 relative
        _same(value, expected["get"], 1e-6)
        if case["metric"] == "pearsonr" and case["kwargs"].get("average") == "micro":
            # MXNet's get_global() is 0.0 here (it never fills the global sums in 'micro'
            # mode); fastgrad's global statistic is the one of everything since reset()
            assert m.get_global()[1] == pytest.approx(value, rel=1e-12)
        else:
            _same(m.get_global()[1], expected["get_global"], 1e-6)


def _case_id(case):
    return "%s-%s" % (case["metric"], "-".join("%s=%s" % kv for kv in case["kwargs"].items()))


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_values_equal_mxnets(case):
    _run(case, lambda a: mx.nd.array(a))


@pytest.mark.parametrize("case", CASES[:3] + CASES[-2:], ids=_case_id)
@pytest.mark.parametrize("kind", ["np", "numpy", "float64"])
def test_other_array_types_give_the_same_values(case, kind):
    make = {"np": lambda a: mx.np.array(a, dtype="float32"),
            "numpy": lambda a: onp.asarray(a, dtype=onp.float32),
            "float64": lambda a: mx.nd.array(a, dtype="float64")}[kind]
    _run(case, make)


def test_a_single_array_is_one_batch():
    acc = mx.metric.Accuracy()
    acc.update(mx.nd.array([0, 1, 1]), mx.nd.array([[0.3, 0.7], [0, 1.], [0.4, 0.6]]))
    assert acc.get() == ("accuracy", pytest.approx(2 / 3))
    assert acc.num_inst == 3 and acc.sum_metric == 2


def test_shape_checks_raise_mxnets_error():
    acc = mx.metric.Accuracy()
    with pytest.raises(ValueError, match="Shape of labels 3 does not match shape of predictions"
                       " 2"):
        acc.update([mx.nd.array([0, 1, 1])], [mx.nd.array([[1, 1, 0], [0, 2, 2]])])
    with pytest.raises(ValueError, match="Shape of labels 1 does not match shape of "
                       "predictions 0"):
        acc.update([mx.nd.array([0, 1, 1])], [])
    with pytest.raises(ValueError, match=r"Shape of labels \(3,\) does not match"):
        mx.metric.PearsonCorrelation().update([mx.nd.zeros((3,))], [mx.nd.zeros((3, 1))])
    with pytest.raises(ValueError, match="only supports binary classification"):
        mx.metric.F1().update([mx.nd.array([0, 1, 2])], [mx.nd.ones((3, 2))])
    with pytest.raises(ValueError, match="Perplexity: shape mismatch"):
        mx.metric.Perplexity(None).update([mx.nd.zeros((3,))], [mx.nd.ones((4, 3))])
    with pytest.raises(ValueError, match="CrossEntropy: labels"):
        mx.metric.CrossEntropy().update([mx.nd.zeros((3,))], [mx.nd.ones((4, 3))])
    with pytest.raises(ValueError, match="top_k is no more than 1"):
        mx.metric.TopKAccuracy(1)
    with pytest.raises(ValueError):          # MXNet: argpartition's kth out of bounds
        mx.metric.TopKAccuracy(7).update([mx.nd.zeros((2,))], [mx.nd.ones((2, 4))])
    with pytest.raises(ValueError, match="at least one dimension"):
        acc.update(mx.nd.array(1.0), mx.nd.array(1.0))


def test_perplexity_takes_one_label_per_position_for_any_rank():
    # MXNet 1.9.1 accepts only 2-D predictions; fastgrad picks along `axis` for any rank.
    pred = onp.random.RandomState(0).rand(2, 3, 4).astype(onp.float32) + 0.1
    label = onp.array([[0, 3, 1], [2, 2, 0]], dtype=onp.float32)
    m = mx.metric.Perplexity(ignore_label=None)
    m.update([mx.nd.array(label)], [mx.nd.array(pred)])
    picked = onp.take_along_axis(pred, label.astype(int)[..., None], -1)
    assert m.get()[1] == pytest.approx(math.exp(-onp.log(picked).mean()), rel=1e-6)


def test_create_names_lists_callables_and_configs():
    names = {"acc": "accuracy", "accuracy": "accuracy", "top_k_accuracy": "top_k_accuracy_5",
             "top_k_acc": "top_k_accuracy_5", "f1": "f1", "mcc": "mcc", "mae": "mae",
             "mse": "mse", "rmse": "rmse", "ce": "cross-entropy", "nll_loss": "nll-loss",
             "pearsonr": "pearsonr", "pcc": "pcc", "loss": "loss", "torch": "torch",
             "caffe": "caffe", "composite": "composite"}
    for name, display in names.items():
        kwargs = {"top_k": 5} if "top_k" in name else {}
        assert mx.metric.create(name, **kwargs).name == display
    assert mx.metric.create("perplexity", -1).name == "perplexity"
    composite = mx.metric.create(["acc", mx.metric.MAE(), lambda label, pred: 1.0])
    assert isinstance(composite, mx.metric.CompositeEvalMetric)
    assert [m.name for m in composite.metrics] == ["accuracy", "mae", "custom(<lambda>)"]
    assert composite.get_metric(1).name == "mae"
    with pytest.raises(ValueError, match="out of range"):
        composite.get_metric(5)
    acc = mx.metric.Accuracy(axis=0)
    assert mx.metric.create(acc) is acc
    config = acc.get_config()
    assert config == {"axis": 0, "metric": "Accuracy", "name": "accuracy",
                      "output_names": None, "label_names": None}
    assert mx.metric.create(**config).axis == 0
    assert str(mx.metric.Accuracy()) == "EvalMetric: {'accuracy': nan}"
    with pytest.raises(ValueError, match="foo is not registered"):
        mx.metric.create("foo")
    with pytest.raises(NotImplementedError, match="cannot be serialized"):
        mx.metric.CustomMetric(lambda label, pred: 0.0).get_config()
    assert mx.gluon.metric is mx.metric


def test_custom_metric_and_np():
    def half_sum(label, pred):
        assert isinstance(label, onp.ndarray) and isinstance(pred, onp.ndarray)
        return float((label + pred).sum()), 2

    m = mx.metric.np(half_sum)
    assert m.name == "half_sum"
    m.update([mx.nd.array([1, 2])], [mx.nd.array([3, 4])])
    assert m.get() == ("half_sum", 5.0)
    extra = mx.metric.CustomMetric(lambda label, pred: pred.sum(), name="first",
                                   allow_extra_outputs=True)
    extra.update([mx.nd.array([1.0])], [mx.nd.array([2.0]), mx.nd.array([100.0])])
    assert extra.get() == ("first", 2.0)


def test_update_dict_picks_names():
    m = mx.metric.Accuracy(output_names=["out"], label_names=["y"])
    m.update_dict({"y": mx.nd.array([1, 0]), "z": mx.nd.array([0, 0])},
                  {"out": mx.nd.array([[0, 1], [0, 1]]), "other": mx.nd.zeros((2, 2))})
    assert m.get() == ("accuracy", 0.5)
    assert m.get_name_value() == [("accuracy", 0.5)]
    composite = mx.metric.CompositeEvalMetric([mx.metric.Accuracy(), mx.metric.MAE()])
    composite.update_dict({"y": mx.nd.array([1.0, 1.0])}, {"p": mx.nd.array([1.0, 0.0])})
    assert composite.get_name_value() == [("accuracy", 0.5), ("mae", 0.5)]
    assert composite.get_global_name_value() == [("accuracy", 0.5), ("mae", 0.5)]


def test_register_a_new_metric():
    @mx.metric.register
    @mx.metric.alias("always_one")
    class AlwaysOne(mx.metric.EvalMetric):
        def __init__(self, name="always_one"):
            super().__init__(name)

        def update(self, labels, preds):
            self.sum_metric += 1
            self.num_inst += 1

    m = mx.metric.create("always_one")
    m.update([], [])
    assert m.get() == ("always_one", 1.0)
    assert m.get_global() == m.get()     # no global statistics: get_global is get
    assert isinstance(mx.metric.create("alwaysone"), AlwaysOne)
