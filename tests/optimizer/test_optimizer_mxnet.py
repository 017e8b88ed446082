"""Optimizers, fused update ops and learning-rate schedules against MXNet 1.9.1's numbers.

The numbers are in ``tests/fixtures/optimizer_mxnet.json``, written by
``tests/fixtures/make_optimizer_fixtures.py`` from a real MXNet 1.9.1.
"""

import json
import os

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad.optimizer import lr_scheduler

from _helpers import FIXTURES

with open(os.path.join(FIXTURES, "optimizer_mxnet.json")) as _f:
    FIXTURE = json.load(_f)


def _id(case):
    return "%s-%s" % (case.get("op") or case.get("name"), "-".join(
        "%s=%s" % kv for kv in sorted(case["kwargs"].items()) if not isinstance(kv[1], dict)))


@pytest.mark.parametrize("case", FIXTURE["ops"], ids=_id)
@pytest.mark.parametrize("ns", ["nd", "npx"])
def test_update_op_matches_mxnet(case, ns):
    """Each fused op called ``STEPS`` times: weights and states equal MXNet's (float64)."""
    lib = getattr(mx, ns)
    make = mx.nd.array if ns == "nd" else mx.np.array
    w = make(onp.array(case["weight"]), dtype="float64")
    states = [make(onp.zeros_like(case["weight"]), dtype="float64") for _ in case["states"]]
    for step, g in enumerate(case["grads"], 1):
        g = make(onp.array(g), dtype="float64")
        kwargs = dict(case["kwargs"])
        if case["op"] == "lamb_update":
            phase2 = {k: kwargs.pop(k) for k in ("lr", "lower_bound", "upper_bound")
                      if k in kwargs}
            d = lib.lamb_update_phase1(w, g, *states, t=step, **kwargs)
            r1, r2 = onp.linalg.norm(w.asnumpy()), onp.linalg.norm(d.asnumpy())
            lib.lamb_update_phase2(w, d, make([r1], dtype="float64"),
                                   make([r2], dtype="float64"), out=w, **phase2)
        elif case["op"] == "adamw_update":
            scale = kwargs.pop("rescale_grad")
            lib.adamw_update(w, g, *states, make([scale]), out=w, **kwargs)
        else:
            res = getattr(lib, case["op"])(w, g, *states, out=w, **kwargs)
            assert res is w
        tol = _tolerance(case)
        onp.testing.assert_allclose(w.asnumpy(), case["weights"][step - 1], **tol)
        for s, expect in zip(states, case["state_values"][step - 1]):
            onp.testing.assert_allclose(s.asnumpy(), expect, **tol)


def _tolerance(case):
    """MXNet's kernels take float hyper-parameters as float32, and so do these (the defaults
    0.9, 0.999, 1e-8 included), so float64 results agree to rounding."""
    return dict(rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("case", FIXTURE["optimizers"], ids=_id)
def test_optimizer_matches_mxnet(case, monkeypatch):
    """Each optimizer through ``get_updater`` with lr/wd multipliers, clipping, rescaling and
    schedules, in the dtype MXNet ran it in (float32 unless the case says float64)."""
    kwargs = dict(case["kwargs"])
    sched = kwargs.pop("lr_scheduler", None)
    if sched is not None:
        kwargs["lr_scheduler"] = lr_scheduler.FactorScheduler(base_lr=kwargs["learning_rate"],
                                                              **sched[1])
    if "idx2name" in case:
        kwargs["param_idx2name"] = {int(k): v for k, v in case["idx2name"].items()}
    opt = mx.optimizer.create(case["name"], **kwargs)
    if case.get("zero_noise"):
        # MXNet's numbers are SGLD's deterministic part (its noise patched to zeros there too);
        # the noise itself is tested in tests/optimizer/test_optimizer_more.py
        monkeypatch.setattr(opt, "noise", lambda shape, dtype, scale: onp.zeros(shape, dtype))
    opt.set_lr_mult({1: 0.5})
    opt.set_wd_mult({1: 2.0})
    updater = mx.optimizer.get_updater(opt)
    dtype = case.get("dtype", "float32")
    ws = [mx.nd.array(onp.array(w), dtype=dtype) for w in case["weights"]]
    # float32: arithmetic in a different order than MXNet's fused loops; float64: the same
    # formulas, the hyper-parameters rounded as MXNet rounds them, so agreement to rounding
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == "float32" else dict(rtol=1e-11, atol=1e-12)
    for step_grads, expect in zip(case["grads"], case["history"]):
        for i, (w, g) in enumerate(zip(ws, step_grads)):
            updater(i, mx.nd.array(onp.array(g), dtype=dtype), w)
        for w, e in zip(ws, expect):
            assert w.dtype == onp.dtype(dtype)
            onp.testing.assert_allclose(w.asnumpy(), onp.array(e, dtype), **tol)


@pytest.mark.parametrize("case", FIXTURE["schedulers"], ids=_id)
def test_lr_scheduler_matches_mxnet(case):
    sched = getattr(lr_scheduler, case["name"])(**case["kwargs"])
    onp.testing.assert_allclose([sched(t) for t in range(len(case["lrs"]))], case["lrs"],
                                rtol=1e-15, atol=0)
