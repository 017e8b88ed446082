"""A bound executor replaces its MXNet operators by the primitives they ran.

Note [Composite expansion] in ``fastgrad/symbol/_expand.py``: the first forward traces the
composite steps of the list (``sym.Convolution``, ``sym.Pooling``, ``sym.FullyConnected``,
``sym.split``, ...), and from the next forward on the plan runs their primitives. These tests
check that it happens, that the results are the imperative program's bit for bit and match
finite differences, that traces which would bake values in are refused, and that a new
argument shape, outputs handed out earlier and stateful operators behave as before.
"""

import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastgrad as mx  # noqa: E402
from fastgrad import autograd, npx  # noqa: E402
from _helpers import numerical_grad  # noqa: E402

sym = mx.sym


def _ops(ex):
    return [s.op for s in ex._plan.steps_list]


def _lenet_symbol():
    v = {n: sym.var(n) for n in ("X", "W1", "b1", "W2", "b2", "W3", "b3", "labels")}
    h = sym.Convolution(v["X"], v["W1"], v["b1"], kernel=(3, 3), num_filter=3, pad=(1, 1))
    h = sym.Pooling(sym.relu(h), kernel=(2, 2), stride=(2, 2), pool_type="max")
    h = sym.Convolution(h, v["W2"], v["b2"], kernel=(3, 3), num_filter=4)
    h = sym.Pooling(sym.relu(h), kernel=(2, 2), stride=(2, 2), pool_type="max")
    z = sym.FullyConnected(h, v["W3"], v["b3"], num_hidden=5)
    return -sym.mean(sym.pick(sym.log_softmax(z, axis=-1), v["labels"]))


def _lenet_imperative(a):
    h = npx.convolution(a["X"], a["W1"], a["b1"], kernel=(3, 3), num_filter=3, pad=(1, 1))
    h = npx.pooling(npx.relu(h), kernel=(2, 2), stride=(2, 2), pool_type="max")
    h = npx.convolution(h, a["W2"], a["b2"], kernel=(3, 3), num_filter=4)
    h = npx.pooling(npx.relu(h), kernel=(2, 2), stride=(2, 2), pool_type="max")
    z = npx.fully_connected(h, a["W3"], a["b3"], num_hidden=5)
    return -npx.pick(npx.log_softmax(z, axis=-1), a["labels"]).mean()


def _lenet_values(batch=4, seed=0, dtype=onp.float64):
    r = onp.random.default_rng(seed)
    shapes = {"X": (batch, 2, 14, 14), "W1": (3, 2, 3, 3), "b1": (3,), "W2": (4, 3, 3, 3),
              "b2": (4,), "W3": (5, 16), "b3": (5,)}
    v = {k: (0.5 * r.standard_normal(s)).astype(dtype) for k, s in shapes.items()}
    v["labels"] = r.integers(0, 5, size=batch).astype(dtype)
    return v


PARAMS = ("W1", "b1", "W2", "b2", "W3", "b3")


def _bind_lenet(values):
    reqs = {k: ("write" if k in PARAMS else "null") for k in values}
    return _lenet_symbol().bind(mx.cpu(), {k: mx.np.array(v) for k, v in values.items()},
                                grad_req=reqs)


def _tape(values):
    a = {k: mx.np.array(v) for k, v in values.items()}
    for k in PARAMS:
        a[k].attach_grad()
    with autograd.record():
        loss = _lenet_imperative(a)
    loss.backward()
    return loss.asnumpy(), {k: a[k].grad.asnumpy() for k in PARAMS}


@pytest.mark.parametrize("dtype", [onp.float64, onp.float32])
def test_operators_become_primitives_and_gradients_are_the_tapes(dtype):
    values = _lenet_values(dtype=dtype)
    ex = _bind_lenet(values)
    assert "mx.Convolution" in _ops(ex) and "mx.Pooling" in _ops(ex)
    want_loss, want = _tape(values)
    for step in range(3):
        loss = ex.forward(is_train=True)[0].asnumpy()
        ex.backward()
        if step:
            ops = _ops(ex)
            assert not any(op.startswith("mx.") for op in ops), ops
            assert {"im2col", "conv2d_product_bias", "max_pool2d", "matmul"} <= set(ops)
            assert not any(op.startswith("npx.") for op in ops), ops
            assert "pick_along_axis" in ops     # the labels are its input, read every step
        assert onp.array_equal(loss, want_loss)
        for k in PARAMS:
            got = ex.grad_dict[k].asnumpy()
            assert got.dtype == dtype
            assert onp.array_equal(got, want[k]), (step, k, onp.abs(got - want[k]).max())


def _trained_twice(values):
    """An executor of the LeNet-like symbol after two training steps (so expanded)."""
    ex = _bind_lenet(values)
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward()
    return ex


def test_expanded_gradients_match_central_differences():
    values = _lenet_values(seed=3)
    ex = _trained_twice(values)

    def loss_at(k, v):
        vals = dict(values)
        vals[k] = v
        a = {kk: mx.np.array(vv) for kk, vv in vals.items()}
        return float(_lenet_imperative(a).asnumpy())
    for k in ("W1", "b2", "W3"):
        want = numerical_grad(lambda v, k=k: loss_at(k, v), values[k])[0]
        onp.testing.assert_allclose(ex.grad_dict[k].asnumpy(), want, rtol=1e-6, atol=1e-9,
                                    err_msg=k)


def test_the_outputs_stay_the_same_arrays_across_the_expansion():
    values = _lenet_values()
    ex = _bind_lenet(values)
    first = ex.forward(is_train=True)[0]
    ex.forward(is_train=True)
    assert ex.outputs[0] is first
    new_w = values["W3"] * 2
    ex.forward(is_train=False, W3=mx.np.array(new_w))
    vals = dict(values, W3=new_w)
    want = _lenet_imperative({k: mx.np.array(v) for k, v in vals.items()}).asnumpy()
    assert onp.array_equal(first.asnumpy(), want)


def test_a_new_batch_size_plans_the_symbol_again():
    values = _lenet_values(batch=4)
    ex = _trained_twice(values)
    assert "im2col" in _ops(ex)
    small = _lenet_values(batch=3, seed=8)
    for step in range(2):
        loss = ex.forward(is_train=True, X=mx.np.array(small["X"]),
                          labels=mx.np.array(small["labels"]))[0].asnumpy()
        ex.backward()
        assert ("im2col" in _ops(ex)) == (step == 1)      # traced again, then expanded
        vals = dict(values, X=small["X"], labels=small["labels"])
        want_loss, want = _tape(vals)
        assert onp.array_equal(loss, want_loss)
        for k in PARAMS:
            onp.testing.assert_allclose(ex.grad_dict[k].asnumpy(), want[k], rtol=1e-12,
                                        atol=1e-15, err_msg=k)


def test_split_becomes_the_split_primitive():
    x = sym.var("x")
    parts = sym.split(x * 2.0, num_outputs=3, axis=1)
    out = sym.sum(parts[0] * parts[2]) + sym.sum(sym.exp(parts[1]))
    xv = onp.linspace(-1, 1, 12).reshape(2, 6)
    ex = out.bind(mx.cpu(), {"x": mx.np.array(xv)})
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward()
    assert "split" in _ops(ex) and "mx.SliceChannel" not in _ops(ex)
    a, b, c = onp.split(2 * xv, 3, axis=1)
    want = onp.concatenate([2 * c, 2 * onp.exp(b), 2 * a], axis=1)
    onp.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), want, rtol=1e-15)


def test_operators_with_state_or_randomness_stay_composites():
    D = sym.var("data")
    net = sym.Dropout(sym.BatchNorm(D, fix_gamma=False, name="bn"), p=0.5)
    rng = onp.random.default_rng(1)
    data = rng.standard_normal((8, 3)) + 1.0
    ex = net.bind(mx.cpu(), {"data": mx.np.array(data), "bn_gamma": mx.np.ones(3),
                             "bn_beta": mx.np.zeros(3)},
                  aux_states={"bn_moving_mean": mx.np.zeros(3), "bn_moving_var": mx.np.ones(3)})
    masks = []
    for _ in range(3):
        out = ex.forward(is_train=True)[0].asnumpy()
        masks.append(out != 0)
    assert "mx.BatchNorm" in _ops(ex) and "mx.Dropout" in _ops(ex)
    assert not all(onp.array_equal(masks[0], m) for m in masks[1:])     # a new mask each time
    # The moving mean moved once per training forward (momentum 0.9): 1 - 0.9**3 of the mean.
    mean = ex.aux_dict["bn_moving_mean"].asnumpy()
    onp.testing.assert_allclose(mean, (1 - 0.9 ** 3) * data.mean(axis=0), rtol=1e-6)


def test_a_trace_that_read_an_input_into_a_parameter_is_refused():
    from fastgrad.symbol._expand import traced_symbol
    x = mx.np.array(onp.arange(12.0).reshape(3, 4))
    idx = mx.np.array(onp.array([[0], [3], [1]]))
    for a in (x, idx):
        a.attach_grad()
    with autograd.record():
        out = mx.np.take_along_axis(x, idx, 1)      # the indices become its parameter
    assert traced_symbol([x, idx], [out]) is None
    with autograd.record():
        picked = npx.pick(x, idx[:, 0])             # a view of an input: baked, refused
    assert traced_symbol([x, idx], [picked]) is None
    with autograd.record():
        picked = npx.pick(x, idx)                   # the index itself: read as an argument
    sub = traced_symbol([x, idx], [picked])
    assert sorted(sub.list_arguments()) == ["__expand_input0", "__expand_input1"]
    with autograd.record():
        out2 = npx.relu(x) * 2.0
    sub = traced_symbol([x], [out2])
    assert sub is not None and sub.list_arguments() == ["__expand_input0"]


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_expanded_pick_reads_new_labels_every_step(mode):
    # Note [Composite expansion]: pick's index is an input of its primitive, so the expanded
    # plan must pick the labels of each forward, not those of the traced one.
    r = onp.random.default_rng(5)
    x = sym.var("x")
    labels = sym.var("labels")
    loss = -sym.sum(sym.pick(sym.log_softmax(x, axis=-1), labels, axis=-1, mode=mode) *
                    sym.arange(1, 5, dtype="float64"))
    xv = r.standard_normal((4, 6))
    ex = loss.bind(mx.cpu(), {"x": mx.np.array(xv), "labels": mx.np.zeros(4)},
                   grad_req={"x": "write", "labels": "null"})
    for step in range(4):
        lab = r.integers(-3, 9, 4).astype(onp.float64)
        ex.arg_dict["labels"][:] = lab
        got = ex.forward(is_train=True)[0].asnumpy()
        ex.backward()
        a = mx.np.array(xv)
        a.attach_grad()
        with autograd.record():
            want = -(npx.pick(npx.log_softmax(a, axis=-1), mx.np.array(lab), axis=-1,
                              mode=mode) * mx.np.arange(1, 5, dtype="float64")).sum()
        want.backward()
        assert onp.array_equal(got, want.asnumpy()), step
        assert onp.array_equal(ex.grad_dict["x"].asnumpy(), a.grad.asnumpy()), step
    assert "pick_along_axis" in _ops(ex)
