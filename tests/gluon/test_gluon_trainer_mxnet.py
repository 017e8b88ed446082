"""gluon.Trainer training a small MLP equals MXNet 1.9.1's run: the numbers are in
``tests/fixtures/trainer_mxnet.json``, written by ``tests/fixtures/make_trainer_fixtures.py``
(per-parameter lr_mult/wd_mult, weight decay, clipping, a schedule; float32). Trainer states
that MXNet saved load into fastgrad's Trainer and training goes on as in MXNet."""

import base64
import json
import os
import pickle

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd, gluon
from fastgrad.gluon import nn

with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "trainer_mxnet.json")) as _f:
    FIXTURE = json.load(_f)


def _id(case):
    return "%s-%s" % (case["name"], "-".join("%s=%s" % kv for kv in sorted(case["kwargs"].items())
                                             if not isinstance(kv[1], list)))


def _net(init):
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3, activation="tanh"), nn.Dense(2, in_units=4))
    net.initialize()
    for p, value in zip(net.collect_params().values(), init):
        p.set_data(mx.nd.array(value))
    net[1].bias.lr_mult = 0.5
    net[0].weight.wd_mult = 2.0
    return net


def _optimizer_params(case):
    kwargs = dict(case["kwargs"])
    if "lr_scheduler" in kwargs:
        kwargs["lr_scheduler"] = mx.lr_scheduler.FactorScheduler(
            base_lr=kwargs["learning_rate"], **kwargs["lr_scheduler"][1])
    return kwargs


def _train(net, trainer, case, steps):
    for step in steps:
        with autograd.record():
            loss = ((net(mx.nd.array(case["X"][step])) - mx.nd.array(case["Y"][step])) ** 2).sum()
        loss.backward()
        trainer.step(FIXTURE["batch"])
        for p, e in zip(net.collect_params().values(), case["history"][step]):
            # float32 forward, backward and update in another order than MXNet's kernels
            onp.testing.assert_allclose(p.data().asnumpy(), onp.array(e, onp.float32),
                                        rtol=1e-5, atol=1e-6, err_msg=p.name)


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=_id)
def test_trainer_matches_mxnet(case):
    net = _net(case["init"])
    trainer = gluon.Trainer(net.collect_params(), case["name"], _optimizer_params(case))
    _train(net, trainer, case, range(FIXTURE["steps"]))


@pytest.mark.parametrize("case", FIXTURE["states"], ids=_id)
def test_states_saved_by_mxnet_resume_training(case, tmp_path):
    """Start from the parameters MXNet had when it saved, with another learning rate and no
    state: load_states brings MXNet's optimizer (rate, schedule, update counts) and momenta."""
    start = case["saved_after"]
    net = _net(case["history"][start - 1])
    trainer = gluon.Trainer(net.collect_params(), case["name"], {"learning_rate": 123.0})
    fname = str(tmp_path / "mxnet.states")
    with open(fname, "wb") as f:
        f.write(base64.b64decode(case["states"]))
    trainer.load_states(fname)
    assert type(trainer.optimizer).__name__.lower() == case["name"]
    assert trainer.optimizer.num_update == start
    params = net.collect_params()
    assert trainer.optimizer.param_dict[0] is params[sorted(params.keys())[0]]
    _train(net, trainer, case, range(start, FIXTURE["steps"]))


def test_states_naming_an_unknown_mxnet_class_are_refused(tmp_path):
    payload = b"\x80\x02cmxnet.gluon.block\nBlock\nq\x00."
    p = gluon.Parameter("w", shape=(1,))
    p.initialize()
    trainer = gluon.Trainer([p], "sgd")
    fname = str(tmp_path / "bad.states")
    with open(fname, "wb") as f:
        f.write(payload)
    with pytest.raises(pickle.UnpicklingError, match="mxnet.gluon.block.Block"):
        trainer.load_states(fname)
