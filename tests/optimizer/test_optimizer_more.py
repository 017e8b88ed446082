"""The optimizers' behaviour beyond MXNet's numbers (those are in test_optimizer_mxnet.py):
SGLD's noise, the places where fastgrad deliberately differs from MXNet 1.9.1, bad input."""

import math

import numpy as onp
import pytest

import fastgrad as mx

# Every name MXNet 1.9.1's mx.optimizer registers (Optimizer.opt_registry there).
MXNET_1_9_1_OPTIMIZERS = ["adadelta", "adagrad", "adam", "adamax", "ccsgd", "dcasgd", "ftml",
                          "ftrl", "groupadagrad", "lamb", "lars", "lbsgd", "nadam", "nag",
                          "rmsprop", "sgd", "sgld", "signum", "test"]


@pytest.mark.parametrize("name", MXNET_1_9_1_OPTIMIZERS)
def test_every_mxnet_optimizer_is_creatable_and_steps(name):
    opt = mx.optimizer.create(name.upper() if name == "sgd" else name, learning_rate=0.01)
    updater = mx.optimizer.get_updater(opt)
    w = mx.nd.array(onp.linspace(-1, 1, 6).reshape(2, 3), dtype="float64")
    before = w.asnumpy().copy()
    updater(0, mx.nd.ones((2, 3), dtype="float64"), w)
    assert w.dtype == onp.float64 and w.shape == (2, 3)
    assert onp.isfinite(w.asnumpy()).all()
    assert not onp.array_equal(w.asnumpy(), before)


def test_unknown_optimizer_names_the_registered_ones():
    with pytest.raises(ValueError, match="no optimizer named 'adamz'.*nadam"):
        mx.optimizer.create("adamz")


def _sgld_step(seed, w0, g, lr, wd):
    mx.random.seed(seed)
    opt = mx.optimizer.create("sgld", learning_rate=lr, wd=wd)
    w = mx.nd.array(w0, dtype="float64")
    mx.optimizer.get_updater(opt)(0, mx.nd.array(g, dtype="float64"), w)
    return w.asnumpy()


def test_sgld_noise_is_seeded_and_gaussian_with_variance_lr():
    lr, wd = 0.04, 0.5
    rng = onp.random.RandomState(0)
    w0, g = rng.standard_normal((200, 100)), rng.standard_normal((200, 100))
    a, b = _sgld_step(3, w0, g, lr, wd), _sgld_step(3, w0, g, lr, wd)
    onp.testing.assert_array_equal(a, b)                       # mx.random.seed reproduces it
    assert not onp.array_equal(a, _sgld_step(4, w0, g, lr, wd))
    noise = a - (w0 - lr / 2 * (g + wd * w0))
    # 20000 draws of N(0, lr): the sample mean is within 5 standard errors of 0 and the sample
    # variance within 5 of its standard errors (sqrt(2/n) * lr) of lr
    n = noise.size
    assert abs(noise.mean()) < 5 * math.sqrt(lr / n)
    assert abs(noise.var() - lr) < 5 * math.sqrt(2.0 / n) * lr


def test_sgld_noise_comes_from_the_global_generator():
    mx.random.seed(11)
    expect = mx.np.random.normal(0.0, math.sqrt(0.25), size=(4,), dtype="float64").asnumpy()
    w = mx.nd.zeros((4,), dtype="float64")
    mx.random.seed(11)
    opt = mx.optimizer.SGLD(learning_rate=0.25)
    opt.update(0, w, mx.nd.zeros((4,), dtype="float64"), None)
    onp.testing.assert_array_equal(w.asnumpy(), expect)


def test_dcasgd_with_momentum_follows_its_formula():
    """MXNet 1.9.1 cannot run DCASGD with momentum (Note [DCASGD's momentum]); the formula by
    hand, in float64."""
    lr, mom_c, lamda, wd = 0.1, 0.5, 0.25, 0.125
    opt = mx.optimizer.create("dcasgd", learning_rate=lr, momentum=mom_c, lamda=lamda, wd=wd,
                              rescale_grad=0.5)
    updater = mx.optimizer.get_updater(opt)
    rng = onp.random.RandomState(1)
    w_ref = rng.standard_normal(5)
    w = mx.nd.array(w_ref, dtype="float64")
    prev, mom = w_ref.copy(), onp.zeros(5)
    for _ in range(3):
        g = rng.standard_normal(5)
        updater(0, mx.nd.array(g, dtype="float64"), w)
        gs = 0.5 * g
        mom = mom_c * mom - lr * (gs + wd * w_ref + lamda * gs * gs * (w_ref - prev))
        prev = w_ref.copy()
        w_ref = w_ref + mom
        onp.testing.assert_allclose(w.asnumpy(), w_ref, rtol=1e-14, atol=1e-15)


def test_lbsgd_sums_the_gradients_given_even_when_the_buffer_is_reused():
    """Note [LBSGD's accumulation]: a Trainer writes every gradient into the same buffer."""
    opt = mx.optimizer.create("lbsgd", learning_rate=1.0, batch_scale=2, warmup_epochs=0)
    updater = mx.optimizer.get_updater(opt)
    w = mx.nd.zeros((3,), dtype="float64")
    g = mx.nd.zeros((3,), dtype="float64")
    g[:] = mx.nd.array([1.0, 2.0, 3.0], dtype="float64")
    updater(0, g, w)
    onp.testing.assert_array_equal(w.asnumpy(), 0)           # accumulating
    g[:] = mx.nd.array([3.0, 2.0, 1.0], dtype="float64")
    updater(0, g, w)
    # lr * batch_scale (the warm-up is over) times the mean gradient [2, 2, 2]
    onp.testing.assert_allclose(w.asnumpy(), [-4.0, -4.0, -4.0], rtol=1e-15)


def test_lars_leaves_bias_gamma_beta_at_the_plain_rate():
    kw = dict(learning_rate=0.5, eta=0.01, param_idx2name={0: "d_weight", 1: "d_bias"})
    opt = mx.optimizer.create("lars", **kw)
    w0, w1 = mx.nd.ones((4,), dtype="float64"), mx.nd.ones((4,), dtype="float64")
    g = mx.nd.ones((4,), dtype="float64")
    opt.update([0, 1], [w0, w1], [g, g], [None, None])
    onp.testing.assert_allclose(w1.asnumpy(), 0.5)           # bias: plain SGD, no wd
    # weight: lr * eta * ||w|| / ||g|| = 0.5 * 0.01 * 2 / 2
    onp.testing.assert_allclose(w0.asnumpy(), 1 - 0.005, rtol=1e-6)


def test_group_adagrad_errors_name_the_problem():
    opt = mx.optimizer.contrib.GroupAdaGrad(learning_rate=0.1)
    with pytest.raises(ValueError, match="must be 2-D"):
        opt.create_state(0, mx.nd.ones((3,)))
    opt = mx.optimizer.create("groupadagrad", wd=0.1)
    w = mx.nd.ones((2, 2))
    with pytest.raises(ValueError, match="weight decay"):
        opt.update(0, w, mx.nd.ones((2, 2)), opt.create_state(0, w))


@pytest.mark.parametrize("name", ["adamax", "nadam", "ftml", "sgld", "dcasgd", "test"])
def test_mis_shaped_gradient_is_an_error_naming_the_optimizer(name):
    opt = mx.optimizer.create(name)
    w = mx.nd.ones((2, 3))
    with pytest.raises(ValueError, match="grad has shape"):
        mx.optimizer.get_updater(opt)(0, mx.nd.ones((3, 2)), w)
    onp.testing.assert_array_equal(w.asnumpy(), 1)           # nothing was written


def test_np_arrays_stay_np_arrays():
    for name in ["adamax", "nadam", "ftml", "lars", "lbsgd", "dcasgd"]:
        w = mx.np.ones((2, 2), dtype="float64")
        g = mx.np.full((2, 2), 0.5, dtype="float64")
        mx.optimizer.get_updater(mx.optimizer.create(name))(0, g, w)
        assert isinstance(w, mx.np.ndarray) and w.dtype == onp.float64
