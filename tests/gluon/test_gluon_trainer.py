"""gluon.Trainer: updates equal the optimizers' formulas computed by hand (float64), the
KVStore and update_on_kvstore rules of MXNet 1.9.1, stale gradients, checkpoints, errors."""

import math
import pickle

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd, gluon
from fastgrad.gluon import nn


def _param(name, value, **kwargs):
    value = onp.asarray(value, dtype=onp.float64)
    p = gluon.Parameter(name, shape=value.shape, dtype="float64", **kwargs)
    p.initialize(init=mx.init.Constant(0), ctx=kwargs.pop("ctx", None))
    p.set_data(mx.nd.array(value, dtype="float64"))
    return p


def _backward(params, coefs):
    """Record ``loss = sum_i sum(coef_i * p_i**2 / 2)`` and backpropagate: each gradient is
    ``coef_i * p_i`` (NumPy copies returned)."""
    with autograd.record():
        loss = sum((p.data() * p.data() * mx.nd.array(c, dtype="float64")).sum() / 2
                   for p, c in zip(params, coefs))
    loss.backward()
    return [p.grad().asnumpy().copy() for p in params]


def test_sgd_steps_equal_the_formula():
    rng = onp.random.RandomState(0)
    w0, c = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    p = _param("fc_weight", w0)
    lr, mom, wd, batch = 0.125, 0.875, 0.0625, 4          # exact in float32 (Note [Fused updates])
    trainer = gluon.Trainer([p], "sgd", {"learning_rate": lr, "momentum": mom, "wd": wd})
    w, state = w0.copy(), onp.zeros_like(w0)
    for _ in range(4):
        (g,) = _backward([p], [c])
        trainer.step(batch)
        state = mom * state - lr * (g / batch + wd * w)
        w = w + state
        onp.testing.assert_allclose(p.data().asnumpy(), w, rtol=1e-14, atol=1e-15)
    assert trainer.optimizer.rescale_grad == 1.0 / batch


def test_adam_steps_equal_the_formula():
    rng = onp.random.RandomState(1)
    w0, c = rng.standard_normal(5), rng.standard_normal(5)
    p = _param("w", w0)
    lr, b1, b2, eps, wd = 0.0625, 0.875, 0.96875, 2.0 ** -10, 0.125
    trainer = gluon.Trainer({"w": p}, "adam", {"learning_rate": lr, "beta1": b1, "beta2": b2,
                                               "epsilon": eps, "wd": wd})
    w, m, v = w0.copy(), onp.zeros(5), onp.zeros(5)
    for t in range(1, 5):
        (g,) = _backward([p], [c])
        trainer.step(2)
        g = g / 2 + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        # MXNet passes the bias-corrected rate to its adam_update kernel as a float32
        lr_t = float(onp.float32(lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)))
        w = w - lr_t * m / (onp.sqrt(v) + eps)
        onp.testing.assert_allclose(p.data().asnumpy(), w, rtol=1e-13, atol=1e-14)


def test_lr_mult_and_wd_mult_per_parameter_and_changes_after_creation():
    a, b = _param("a", [1.0, 2.0], lr_mult=0.5), _param("b", [1.0, 2.0], wd_mult=0.0)
    trainer = gluon.Trainer([a, b], "sgd", {"learning_rate": 0.5, "wd": 0.25})
    ga, gb = _backward([a, b], [[1.0, 1.0], [1.0, 1.0]])
    trainer.step(1)
    expected_a = [1, 2] - 0.25 * (ga + 0.25 * onp.array([1, 2]))
    onp.testing.assert_allclose(a.data().asnumpy(), expected_a)
    onp.testing.assert_allclose(b.data().asnumpy(), [1, 2] - 0.5 * gb)
    b.lr_mult = 0.0                                   # read at every step, as in MXNet
    before = b.data().asnumpy().copy()
    _backward([a, b], [[1.0, 1.0], [1.0, 1.0]])
    trainer.step(1)
    onp.testing.assert_array_equal(b.data().asnumpy(), before)


def test_step_equals_allreduce_grads_then_update():
    rng = onp.random.RandomState(2)
    w0, c = rng.standard_normal(6), rng.standard_normal(6)
    results = []
    for split in (False, True):
        p = _param("w", w0)
        trainer = gluon.Trainer([p], "nag", {"learning_rate": 0.1, "momentum": 0.9},
                                update_on_kvstore=False)
        for _ in range(3):
            _backward([p], [c])
            if split:
                trainer.allreduce_grads()
                trainer.update(3)
            else:
                trainer.step(3)
        results.append(p.data().asnumpy())
    onp.testing.assert_array_equal(results[0], results[1])


def test_stale_gradient_is_mxnets_error_and_changes_nothing():
    a, b = _param("used", [1.0]), _param("unused", [2.0])
    trainer = gluon.Trainer([a, b], "sgd", {"learning_rate": 0.5})
    _backward([a], [[1.0]])
    with pytest.raises(UserWarning, match=r"Gradient of Parameter `unused` on context cpu\(0\) "
                                          r"has not been updated by backward since last `step`"):
        trainer.step(1)
    assert a.data().asnumpy()[0] == 1.0 and b.data().asnumpy()[0] == 2.0   # nothing applied
    trainer.step(1, ignore_stale_grad=True)
    assert a.data().asnumpy()[0] == 0.5 and b.data().asnumpy()[0] == 2.0
    # both are stale now: a second step without backward raises for the first of them
    with pytest.raises(UserWarning, match="Parameter `used`"):
        trainer.step(1)
    trainer.step(1, ignore_stale_grad=True)
    assert a.data().asnumpy()[0] == 0.5


def test_a_trainer_of_another_blocks_parameters_reports_them_stale():
    net, other = nn.Dense(2, in_units=3), nn.Dense(2, in_units=3)
    net.initialize()
    other.initialize()
    trainer = gluon.Trainer(other.collect_params(), "sgd")
    with autograd.record():
        loss = net(mx.nd.ones((1, 3))).sum()
    loss.backward()
    with pytest.raises(UserWarning, match="Gradient of Parameter `%s`"
                       % sorted(other.collect_params().keys())[0]):
        trainer.step(1)


def test_grad_req_null_parameters_are_skipped():
    a, frozen = _param("a", [1.0]), _param("frozen", [3.0])
    frozen.grad_req = "null"
    trainer = gluon.Trainer([a, frozen], "sgd", {"learning_rate": 1.0})
    _backward([a], [[2.0]])
    trainer.step(1)
    assert a.data().asnumpy()[0] == -1.0 and frozen.data().asnumpy()[0] == 3.0


def test_trains_a_dense_layer_from_collect_params():
    net = nn.Dense(1, in_units=2)
    net.initialize(mx.init.Zero())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    x, y = mx.nd.array([[1.0, 2.0], [3.0, -1.0]]), mx.nd.array([[1.0], [2.0]])
    with autograd.record():
        loss = ((net(x) - y) ** 2).sum()
    loss.backward()
    trainer.step(2)
    # from zero weights: grad W = -2 * y^T x, grad b = -2 * sum(y); divided by the batch of 2
    onp.testing.assert_allclose(net.weight.data().asnumpy(), [[0.5 * 7, 0.5 * 0]], rtol=1e-6)
    onp.testing.assert_allclose(net.bias.data().asnumpy(), [0.5 * 3], rtol=1e-6)


def test_save_and_load_states_resume_training_exactly(tmp_path):
    rng = onp.random.RandomState(3)
    w0, c = rng.standard_normal(4), rng.standard_normal(4)
    p = _param("w", w0)
    trainer = gluon.Trainer([p], "adam", {"learning_rate": 0.1})
    for _ in range(2):
        _backward([p], [c])
        trainer.step(1)
    fname = str(tmp_path / "t.states")
    trainer.save_states(fname)
    saved_w = p.data().asnumpy().copy()
    for _ in range(2):
        _backward([p], [c])
        trainer.step(1)
    expect = p.data().asnumpy().copy()

    q = _param("w", saved_w)
    resumed = gluon.Trainer([q], "adam", {"learning_rate": 0.5})
    resumed.load_states(fname)
    assert resumed.learning_rate == 0.1                        # the saved optimizer came back
    assert resumed.optimizer.param_dict[0] is q
    for _ in range(2):
        _backward([q], [c])
        resumed.step(1)
    onp.testing.assert_array_equal(q.data().asnumpy(), expect)
    q.lr_mult = 2.0                                            # param_dict is the live one
    assert resumed.optimizer._get_lr(0) == 0.2


def test_save_states_is_mxnets_pickle_of_states_and_optimizer(tmp_path):
    p = _param("w", [1.0, 2.0])
    trainer = gluon.Trainer([p], "sgd", {"learning_rate": 0.1, "momentum": 0.5})
    _backward([p], [[1.0, 1.0]])
    trainer.step(1)
    trainer.save_states(str(tmp_path / "s"))
    with open(str(tmp_path / "s"), "rb") as f:
        states, optimizer = pickle.load(f)
    assert isinstance(optimizer, mx.optimizer.SGD) and optimizer.momentum == 0.5
    onp.testing.assert_allclose(states[0].asnumpy(), [-0.1, -0.2])   # -lr * grad


def _two_ctx_param(value=(0.0, 0.0, 0.0)):
    """A parameter initialised on two contexts (one copy in fastgrad: the store then sums one
    gradient)."""
    p = gluon.Parameter("x", shape=(3,), dtype="float64")
    p.initialize(init=mx.init.Constant(0), ctx=[mx.cpu(0), mx.cpu(1)])
    p.set_data(mx.nd.array(value, dtype="float64"))
    return p


@pytest.mark.parametrize("kvstore", ["device", None])
def test_one_backward_per_context_shard_steps_as_the_whole_batch(kvstore):
    """split_and_load over two contexts with a backward pass per shard (D2L's data-parallel
    loop) makes the same step as one context on the whole batch (Note [Parameters on several
    contexts] in parameter.py)."""
    rng = onp.random.default_rng(3)
    x = mx.nd.array(rng.standard_normal((6, 4)), dtype="float64")
    y = mx.nd.array(rng.standard_normal((6, 2)), dtype="float64")
    w0 = rng.standard_normal((2, 4))
    results = []
    for ctx in ([mx.cpu(0)], [mx.cpu(0), mx.cpu(1)]):
        net = gluon.nn.Dense(2, in_units=4, dtype="float64")
        net.initialize(ctx=ctx)
        net.weight.set_data(mx.nd.array(w0, dtype="float64"))
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1},
                                kvstore=kvstore)
        loss = gluon.loss.L2Loss()
        for _ in range(3):
            xs = gluon.utils.split_and_load(x, ctx)
            ys = gluon.utils.split_and_load(y, ctx)
            for xi, yi in zip(xs, ys):
                with autograd.record():
                    li = loss(net(xi), yi)
                li.backward()
            trainer.step(6)
        results.append(net.weight.data().asnumpy())
    onp.testing.assert_allclose(results[1], results[0], rtol=1e-14, atol=0)


@pytest.mark.parametrize("update_on_kvstore", [None, True, False])
def test_update_on_kvstore_variants_give_the_same_weights(update_on_kvstore):
    p = _two_ctx_param()
    trainer = gluon.Trainer([p], "sgd", {"learning_rate": 1.0, "momentum": 0.5},
                            update_on_kvstore=update_on_kvstore)
    for _ in range(2):
        with autograd.record():
            y = (p.data() + 1).sum()
        y.backward()
        trainer.step(1)
    assert trainer._kvstore is not None and trainer._kvstore.type == "device"
    assert trainer._update_on_kvstore is (update_on_kvstore is not False)
    # one copy on the CPU: gradient 1 per step; momentum 0.5 -> -1 then -1 - 1.5
    onp.testing.assert_allclose(p.data().asnumpy(), [-2.5] * 3)
    if trainer._update_on_kvstore:
        with pytest.raises(AssertionError, match="update_on_kvstore"):
            trainer.allreduce_grads()
        with pytest.raises(AssertionError, match="update_on_kvstore"):
            trainer.update(1)


def test_update_on_kvstore_detects_stale_gradients_too():
    p = _two_ctx_param()
    trainer = gluon.Trainer([p], "sgd", {"learning_rate": 1.0})
    with autograd.record():
        y = (p.data() * 2).sum()
    y.backward()
    trainer.step(1)
    with pytest.raises(UserWarning, match="Parameter `x`"):
        trainer.step(1)                              # MXNet 1.9.1 applies the old gradient again
    onp.testing.assert_allclose(p.data().asnumpy(), [-2.0] * 3)


def test_kvstore_choice_follows_mxnet():
    single = _param("w", [1.0])
    for kv in ("device", "local", None):
        t = gluon.Trainer([single], "sgd", kvstore=kv)
        t._init_kvstore()
        assert t._kvstore is None and t._update_on_kvstore is None    # one device, one process
    # asking for update_on_kvstore without a store is ignored (MXNet 1.9.1 crashes on it)
    t = gluon.Trainer([single], "sgd", update_on_kvstore=True)
    t._init_kvstore()
    assert t._kvstore is None
    store = mx.kv.create("local")
    t = gluon.Trainer([single], "sgd", kvstore=store)
    t._init_kvstore()
    assert t._kvstore is store and t._update_on_kvstore is True
    t = gluon.Trainer([_two_ctx_param()], "sgd", kvstore=None)
    t._init_kvstore()
    assert t._kvstore is None


def test_update_on_kvstore_default_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    t = gluon.Trainer([_two_ctx_param()], "sgd")
    t._init_kvstore()
    assert t._kvstore is not None and t._update_on_kvstore is False


def test_a_store_without_an_optimizer_forces_local_updates():
    class SumOnly(mx.kv.KVStore):
        def is_capable(self, capability):
            return False
    p = _two_ctx_param()
    t = gluon.Trainer([p], "sgd", {"learning_rate": 1.0}, kvstore=SumOnly("sumonly"))
    with autograd.record():
        y = (p.data() + 1).sum()
    y.backward()
    t.step(1)
    assert t._update_on_kvstore is False
    onp.testing.assert_allclose(p.data().asnumpy(), [-1.0] * 3)
    bad = gluon.Trainer([p], "sgd", kvstore=SumOnly("sumonly"), update_on_kvstore=True)
    with pytest.raises(ValueError, match="Please set update_on_kvstore=False"):
        bad._init_kvstore()


def test_loading_parameters_resets_a_store_that_updates():
    p = _two_ctx_param()
    t = gluon.Trainer([p], "sgd", {"learning_rate": 0.1}, kvstore="local")
    with autograd.record():
        y = (p.data() + 1).sum()
    y.backward()
    t.step(1)
    assert t._kv_initialized and t._update_on_kvstore
    p.set_data(mx.nd.zeros((3,), dtype="float64"))       # a checkpoint loaded, say
    assert t._kvstore is None and not t._kv_initialized
    with autograd.record():
        y = (p.data() + 1).sum()
    y.backward()
    t.step(1)
    onp.testing.assert_allclose(p.data().asnumpy(), [-0.1] * 3)   # from the loaded value


def test_learning_rate_and_schedules():
    p = _param("w", [1.0])
    t = gluon.Trainer([p], "sgd", {"learning_rate": 0.5})
    assert t.learning_rate == 0.5
    t.set_learning_rate(0.25)
    assert t.learning_rate == 0.25 and t.optimizer.lr == 0.25
    sched = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    t = gluon.Trainer([p], "sgd", {"learning_rate": 1.0, "lr_scheduler": sched})
    rates = []
    for _ in range(5):
        _backward([p], [[1.0]])
        t.step(1)
        rates.append(t.learning_rate)
    # MXNet's FactorScheduler: the rate changes once num_update exceeds each multiple of step
    assert rates == [1.0, 1.0, 0.5, 0.5, 0.25]
    with pytest.raises(UserWarning):
        t.set_learning_rate(0.1)


def test_optimizer_instance_is_used_as_given():
    p = _param("w", [1.0])
    sgd = mx.optimizer.SGD(learning_rate=0.5)
    t = gluon.Trainer([p], sgd)
    assert t.optimizer is sgd and sgd.param_dict == {0: p}
    with pytest.raises(AssertionError, match="optimizer_params must be None"):
        gluon.Trainer([p], sgd, {"learning_rate": 1})


def test_bad_arguments_raise_clear_errors():
    p = _param("w", [1.0])
    net = nn.Dense(2, in_units=2)
    with pytest.raises(ValueError, match="list or dict of Parameters.*collect_params"):
        gluon.Trainer(net, "sgd")
    with pytest.raises(ValueError, match="got list of <class 'int'>"):
        gluon.Trainer([p, 3], "sgd")
    with pytest.raises(ValueError, match="Parameter 'w' is given twice"):
        gluon.Trainer([p, p], "sgd")
    with pytest.raises(ValueError, match="no optimizer named 'sgdd'"):
        gluon.Trainer([p], "sgdd")
    with pytest.raises(TypeError, match="kvstore must be KVStore, str or None"):
        gluon.Trainer([p], "sgd", kvstore=5)
    with pytest.raises(ValueError, match="update_on_kvstore must be True, False or None"):
        gluon.Trainer([p], "sgd", update_on_kvstore="yes")
    t = gluon.Trainer([p], "sgd")
    _backward([p], [[1.0]])
    for bad in (0, -2, "4", None):
        with pytest.raises(ValueError, match="Trainer.step: batch_size must be a positive"):
            t.step(bad)
    uninitialised = gluon.Parameter("u", shape=(2,))
    with pytest.raises(RuntimeError, match="Parameter 'u' has not been initialized"):
        gluon.Trainer([uninitialised], "sgd")


def test_deferred_parameters_are_reported_by_name_at_step():
    net = nn.Dense(2)                                   # in_units unknown until a forward pass
    net.initialize()
    t = gluon.Trainer(net.collect_params(), "sgd")
    with pytest.raises(UserWarning, match="bias"):     # sorted first, and never written
        t.step(1)
    with pytest.raises(gluon.parameter.DeferredInitializationError, match="weight"):
        t.step(1, ignore_stale_grad=True)


def test_compression_is_refused_when_a_store_is_used():
    t = gluon.Trainer([_two_ctx_param()], "sgd",
                      compression_params={"type": "2bit", "threshold": 0.5})
    with pytest.raises(NotImplementedError, match="gradient compression is not supported"):
        t._init_kvstore()


def test_np_parameters_train_too():
    mx.npx.set_np()
    try:
        net = nn.Dense(1, in_units=2)
        net.initialize(mx.init.One())
        t = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
        with autograd.record():
            loss = net(mx.np.array([[1.0, 2.0]])).sum()
        loss.backward()
        t.step(1)
        assert isinstance(net.weight.data(), mx.np.ndarray)
        onp.testing.assert_allclose(net.weight.data().asnumpy(), [[0.5, 0.0]])
    finally:
        mx.npx.reset_np()


def test_horovod_without_mpi_names_what_to_install():
    pytest.importorskip("pytest")
    try:
        import mpi4py  # noqa: F401
        pytest.skip("mpi4py is installed: the horovod store works here")
    except ImportError:
        pass
    t = gluon.Trainer([_param("w", [1.0])], "sgd", kvstore="horovod")
    with pytest.raises(ImportError, match="mpi4py"):
        t._init_kvstore()


@pytest.mark.parametrize("name", ["sgd", "ccsgd", "nag", "signum", "sgld", "dcasgd", "lars",
                                  "lbsgd", "adam", "adamax", "nadam", "lamb", "rmsprop",
                                  "adagrad", "adadelta", "ftrl", "ftml", "groupadagrad", "test",
                                  "adamw"])
def test_every_optimizer_trains_through_the_trainer(name):
    net = nn.Dense(3, in_units=4, use_bias=False)        # 2-D only: GroupAdaGrad needs rows
    net.initialize(mx.init.One())
    trainer = gluon.Trainer(net.collect_params(), name, {"learning_rate": 0.01})
    x = mx.nd.array(onp.linspace(-1, 1, 8).reshape(2, 4))
    for _ in range(2):
        with autograd.record():
            loss = (net(x) ** 2).sum()
        loss.backward()
        trainer.step(2)
    w = net.weight.data().asnumpy()
    assert onp.isfinite(w).all()
    assert not onp.array_equal(w, onp.ones((3, 4)))
