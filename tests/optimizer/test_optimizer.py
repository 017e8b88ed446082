"""The optimizer API: registry, learning rates and multipliers, schedulers, the Updater's
states, and the fused update ops' in-place, unrecorded, allocation-free behaviour.

The formulas themselves are checked against MXNet in tests/optimizer/test_optimizer_mxnet.py.
"""

import pickle
import tracemalloc

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd
from fastgrad.optimizer import lr_scheduler

nd = mx.nd


def test_create_and_register():
    assert isinstance(mx.optimizer.create("SGD"), mx.optimizer.SGD)
    for name in ("sgd", "nag", "adam", "adamw", "rmsprop", "adagrad", "adadelta", "signum",
                 "lamb", "ftrl"):
        opt = mx.optimizer.create(name, learning_rate=0.5)
        assert type(opt).__name__.lower() == name and opt.learning_rate == 0.5
    with pytest.raises(ValueError, match="no optimizer named 'nope'"):
        mx.optimizer.create("nope")
    with pytest.raises(TypeError, match="momentum2"):
        mx.optimizer.create("sgd", momentum2=0.9)

    @mx.optimizer.register
    class HalfStep(mx.optimizer.Optimizer):
        def update(self, index, weight, grad, state):
            weight[:] = weight - 0.5 * grad

    opt = mx.optimizer.Optimizer.create_optimizer("halfstep")
    w = nd.array([1.0])
    mx.optimizer.get_updater(opt)(0, nd.array([1.0]), w)
    assert w.asscalar() == 0.5
    with pytest.raises(TypeError, match="subclass of Optimizer"):
        mx.optimizer.register(int)


def test_learning_rate_multipliers_and_names():
    opt = mx.optimizer.SGD(learning_rate=0.1, wd=0.01,
                           param_idx2name={0: "fc_weight", 1: "fc_bias", 2: "bn_gamma"})
    assert opt._get_wd(0) == 0.01 and opt._get_wd(1) == 0.0 and opt._get_wd(2) == 0.01
    opt.set_lr_mult({"fc_weight": 2.0, 2: 0.5})
    assert opt._get_lr(0) == pytest.approx(0.2) and opt._get_lr(2) == pytest.approx(0.05)
    assert opt._get_lr(7) == pytest.approx(0.1)
    opt.set_learning_rate(0.3)
    assert opt.learning_rate == 0.3
    sched = lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=1.0)
    opt = mx.optimizer.SGD(lr_scheduler=sched)
    with pytest.raises(UserWarning, match="lr_scheduler"):
        opt.set_learning_rate(0.1)
    with pytest.warns(UserWarning, match="overwritten"):
        mx.optimizer.SGD(learning_rate=0.5, lr_scheduler=lr_scheduler.FactorScheduler(
            step=1, base_lr=1.0))


def test_multipliers_from_a_symbols_attributes():
    # MXNet 1.9.1 gives the same four numbers for this symbol: a variable's lr_mult/wd_mult
    # attributes set its multipliers, and a name ending in _bias gets no weight decay.
    data = mx.sym.Variable("data")
    weight = mx.sym.Variable("fc1_weight", lr_mult=0.1, wd_mult=0.0)
    net = mx.sym.FullyConnected(data, weight=weight, num_hidden=3, name="fc1")
    opt = mx.optimizer.create("sgd", learning_rate=1.0, wd=0.5, sym=net,
                              param_idx2name={0: "fc1_weight", 1: "fc1_bias"})
    assert (opt._get_lr(0), opt._get_wd(0)) == pytest.approx((0.1, 0.0))
    assert (opt._get_lr(1), opt._get_wd(1)) == pytest.approx((1.0, 0.0))


def test_scheduler_warmup_and_errors():
    s = lr_scheduler.CosineScheduler(max_update=10, base_lr=1.0, warmup_steps=4,
                                     warmup_begin_lr=0.2)
    assert [s(t) for t in range(4)] == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert s(4) == 1.0 and s(10) == 0.0 and s(20) == 0.0
    with pytest.raises(ValueError, match="warmup_begin_lr"):
        lr_scheduler.PolyScheduler(10, base_lr=0.1, warmup_begin_lr=0.5)
    with pytest.raises(ValueError, match="increase"):
        lr_scheduler.MultiFactorScheduler([3, 2])
    with pytest.raises(ValueError, match="warmup_mode"):
        lr_scheduler.FactorScheduler(2, warmup_mode="cubic")
    # the optimizer's learning rate follows the schedule of its update count
    opt = mx.optimizer.SGD(lr_scheduler=lr_scheduler.MultiFactorScheduler([2], 0.1,
                                                                         base_lr=1.0))
    w, g = nd.array([0.0], dtype="float64"), nd.array([1.0], dtype="float64")
    for _ in range(3):
        opt.update(0, w, g, None)
    assert w.asscalar() == pytest.approx(-(1.0 + 1.0 + 0.1))


def test_updater_states_pickle_and_resume():
    def run(updater, steps, w):
        for k in range(steps):
            updater(["a", "b"], [nd.array([1.0, -1.0], dtype="float64") * (k + 1),
                                 nd.array([0.5], dtype="float64")], w)

    opt = mx.optimizer.Adam(learning_rate=0.1, wd=0.01)
    u = mx.optimizer.get_updater(opt)
    w = [nd.array([1.0, 2.0], dtype="float64"), nd.array([3.0], dtype="float64")]
    run(u, 2, w)
    blob = u.get_states(dump_optimizer=True)
    snapshot = [a.asnumpy().copy() for a in w]
    run(u, 2, w)
    # restore into a fresh updater (with the optimizer, so update counts come back too)
    u2 = mx.optimizer.get_updater(mx.optimizer.SGD())
    u2.set_states(blob)
    assert isinstance(u2.optimizer, mx.optimizer.Adam)
    w2 = [nd.array(s, dtype="float64") for s in snapshot]
    run(u2, 2, w2)
    for a, b in zip(w, w2):
        onp.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    assert set(pickle.loads(u.get_states())) == {"a", "b"}
    with pytest.raises(ValueError, match="2 indices, 1 gradients"):
        u(["a", "b"], [nd.ones((1,))], w)


def test_update_ops_write_in_place_or_return_new():
    w, g, mom = nd.array([1.0, 2.0]), nd.array([1.0, -1.0]), nd.zeros((2,))
    new = nd.sgd_mom_update(w, g, mom, lr=0.5, momentum=0.9)
    assert w.asnumpy().tolist() == [1.0, 2.0]                 # no out: weight untouched
    assert new.asnumpy().tolist() == [0.5, 2.5] and type(new) is type(w)
    assert mom.asnumpy().tolist() == [-0.5, 0.5]              # states always in place
    other = nd.zeros((2,))
    assert nd.sgd_update(w, g, lr=1.0, out=other) is other
    assert other.asnumpy().tolist() == [0.0, 3.0] and w.asnumpy().tolist() == [1.0, 2.0]
    x = mx.np.array([1.0, 2.0])
    assert mx.npx.signsgd_update(x, mx.np.array([3.0, -0.0]), lr=0.25, out=x) is x
    assert x.asnumpy().tolist() == [0.75, 2.0]                # sign(0) = 0


def test_update_ops_check_their_arguments():
    w = nd.ones((2, 3))
    with pytest.raises(ValueError, match=r"sgd_update: grad has shape \(3, 2\)"):
        nd.sgd_update(w, nd.ones((3, 2)), lr=0.1)
    with pytest.raises(ValueError, match="adam_update: var has shape"):
        nd.adam_update(w, w, nd.zeros((2, 3)), nd.zeros((3,)), lr=0.1)
    with pytest.raises(ValueError, match="sgd_mom_update: mom has .* dtype float64"):
        nd.sgd_mom_update(w, w, nd.zeros((2, 3), dtype="float64"), lr=0.1)
    with pytest.raises(TypeError, match="ftrl_update: weight must be a fastgrad array"):
        nd.ftrl_update(onp.ones(3), w, w, w, lr=0.1)
    with pytest.raises(TypeError, match="must have a floating-point dtype"):
        nd.sgd_update(nd.ones((2,), dtype="int32"), nd.ones((2,), dtype="int32"), lr=1)
    with pytest.raises(TypeError, match="rmsprop_update: lr must be a number"):
        nd.rmsprop_update(w, w, nd.zeros((2, 3)), lr="fast")
    with pytest.raises(ValueError, match="lamb_update_phase1: t .* at least 1"):
        nd.lamb_update_phase1(w, w, nd.zeros((2, 3)), nd.zeros((2, 3)), t=0, wd=0.0)
    with pytest.raises(ValueError, match="out overlaps the weight"):
        x = nd.ones((4,))
        nd.sgd_update(x[:2], nd.ones((2,)), lr=0.1, out=x[1:3])


def test_update_ops_are_not_recorded_and_bump_versions():
    w = mx.np.array([1.0, 2.0])
    w.attach_grad()
    with autograd.record():
        loss = (w * w).sum()
        mx.npx.sgd_update(w, mx.np.array([1.0, 1.0]), lr=0.5, out=w)
        assert autograd.is_recording()
    assert w.asnumpy().tolist() == [0.5, 1.5]
    with pytest.raises(RuntimeError):
        loss.backward()           # w changed after multiply saved it: refused, not wrong
    # an empty and a 0-d weight
    e = mx.np.zeros((0, 3))
    mx.npx.adam_update(e, e, mx.np.zeros((0, 3)), mx.np.zeros((0, 3)), lr=0.1, out=e)
    s, m = mx.np.array(2.0), mx.np.array(0.0)
    mx.npx.sgd_mom_update(s, mx.np.array(1.0), m, lr=0.5, momentum=0.5, out=s)
    assert s.item() == 1.5 and m.item() == -0.5


@pytest.mark.parametrize("name,kwargs", [
    ("sgd", dict(momentum=0.9, wd=1e-4, clip_gradient=1.0)),
    ("nag", dict(momentum=0.9, wd=1e-4)),
    ("adam", dict(wd=1e-4, clip_gradient=1.0)),
    ("adamw", dict(wd=1e-2)),
    ("rmsprop", dict(centered=True, clip_weights=5.0)),
    ("rmsprop", dict()),
    ("adagrad", dict(wd=1e-4)),
    ("adadelta", dict(wd=1e-4)),
    ("signum", dict(wd_lh=1e-3)),
    ("lamb", dict(wd=1e-2, lower_bound=0.1, upper_bound=10.0)),
    ("ftrl", dict(wd=1e-4)),
])
def test_steps_allocate_nothing(name, kwargs):
    """After the first step (states and scratch buffers), a step allocates no array memory:
    the peak traced allocation of ten steps stays far below one weight's size."""
    rng = onp.random.default_rng(0)
    w = mx.np.array(rng.standard_normal((256, 512)))           # 1 MiB of float64
    grads = [mx.np.array(rng.standard_normal((256, 512))) for _ in range(2)]
    updater = mx.optimizer.get_updater(mx.optimizer.create(name, learning_rate=0.01,
                                                           **kwargs))
    updater(0, grads[0], w)
    updater(0, grads[1], w)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for k in range(10):
            updater(0, grads[k % 2], w)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - base < w.nbytes // 16, (peak - base, w.nbytes)
    assert current - base < 4096
    assert onp.isfinite(w.asnumpy()).all()


def test_multi_precision_float16():
    opt = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, multi_precision=True)
    u = mx.optimizer.get_updater(opt)
    w = nd.array([1.0, 2.0], dtype="float16")
    for _ in range(3):
        u(0, nd.array([1e-3, 1e-3], dtype="float16"), w)
    master = u.states[0][0]
    assert master.dtype == onp.float32 and w.dtype == onp.float16
    onp.testing.assert_array_equal(w.asnumpy(), master.asnumpy().astype(onp.float16))
    # 3 steps of momentum SGD on a constant gradient: 1e-4 * (1 + 1.9 + 2.71)
    onp.testing.assert_allclose(master.asnumpy(), onp.array([1.0, 2.0]) - 1e-4 * 5.61,
                                rtol=1e-6)


def test_adamw_skips_bad_rescale():
    """adamw_update: a rescale_grad of 0, inf or NaN (loss scaling overflow) skips the step."""
    w = nd.array([1.0, 2.0])
    mean, var = nd.zeros((2,)), nd.zeros((2,))
    for bad in (0.0, float("inf"), float("nan")):
        nd.adamw_update(w, nd.ones((2,)), mean, var, nd.array([bad]), lr=0.1, eta=1.0, out=w)
        assert w.asnumpy().tolist() == [1.0, 2.0] and mean.asnumpy().tolist() == [0.0, 0.0]
