"""gluon.Trainer training a small MLP equals MXNet 1.9.1's run: the numbers are in
``tests/fixtures/trainer_mxnet.json``, written by ``tests/fixtures/make_trainer_fixtures.py``
(per-parameter lr_mult/wd_mult, weight decay, clipping, a schedule; float32)."""

import json
import os

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


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=_id)
def test_trainer_matches_mxnet(case):
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3, activation="tanh"), nn.Dense(2, in_units=4))
    net.initialize()
    for p, value in zip(net.collect_params().values(), case["init"]):
        p.set_data(mx.nd.array(value))
    net[1].bias.lr_mult = 0.5
    net[0].weight.wd_mult = 2.0
    kwargs = dict(case["kwargs"])
    if "lr_scheduler" in kwargs:
        kwargs["lr_scheduler"] = mx.lr_scheduler.FactorScheduler(
            base_lr=kwargs["learning_rate"], **kwargs["lr_scheduler"][1])
    trainer = gluon.Trainer(net.collect_params(), case["name"], kwargs)
    for x, y, expect in zip(case["X"], case["Y"], case["history"]):
        with autograd.record():
            loss = ((net(mx.nd.array(x)) - mx.nd.array(y)) ** 2).sum()
        loss.backward()
        trainer.step(FIXTURE["batch"])
        for p, e in zip(net.collect_params().values(), expect):
            # float32 forward, backward and update in another order than MXNet's kernels
            onp.testing.assert_allclose(p.data().asnumpy(), onp.array(e, onp.float32),
                                        rtol=1e-5, atol=1e-6, err_msg=p.name)
