"""The Executor: bind, forward, backward, grad_req, buffers, copy_params_from, optimization."""

import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastgrad as mx  # noqa: E402

from _helpers import assert_close, assert_fd_close, fd_gradient  # noqa: E402


def rand(shape, seed=0):
    return onp.random.default_rng(seed).standard_normal(shape)


def test_mxnet_docstring_example():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    c = 2 * a + b
    texec = c._bind(mx.cpu(), {"a": mx.nd.array([1, 2]), "b": mx.nd.array([2, 3])})
    out = texec.forward()
    assert isinstance(out, list) and len(out) == 1
    assert out[0].asnumpy().tolist() == [4, 7]
    assert isinstance(out[0], mx.nd.NDArray)
    texec.backward(mx.nd.array([1, 1]))
    assert texec.grad_dict["a"].asnumpy().tolist() == [2, 2]
    assert texec.grad_dict["b"].asnumpy().tolist() == [1, 1]


def test_args_are_copied_in_and_list_args():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    av = mx.np.array([1.0, 2.0])
    ex = (a * b).bind(mx.cpu(), [av, mx.np.array([3.0, 4.0])])
    av[:] = 100
    assert ex.forward()[0].asnumpy().tolist() == [3, 8]
    assert ex.arg_dict["a"].asnumpy().tolist() == [1, 2]
    assert [x.asnumpy().tolist() for x in ex.arg_arrays] == [[1, 2], [3, 4]]


def test_bind_errors_name_the_argument():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    c = a + b
    with pytest.raises(ValueError, match=r"\['b'\]"):
        c.bind(mx.cpu(), {"a": mx.np.ones(2)})
    with pytest.raises(ValueError, match="'z'"):
        c.bind(mx.cpu(), {"a": mx.np.ones(2), "b": mx.np.ones(2), "z": mx.np.ones(2)})
    with pytest.raises(ValueError, match="2 arguments"):
        c.bind(mx.cpu(), [mx.np.ones(2)])
    with pytest.raises(ValueError, match="grad_req"):
        c.bind(mx.cpu(), [mx.np.ones(2)] * 2, grad_req="sometimes")
    with pytest.raises(ValueError, match="several arguments named"):
        (mx.sym.var("a") + mx.sym.var("a")).bind(mx.cpu(), {"a": mx.np.ones(2)})
    with pytest.raises(ValueError, match="auxiliary"):
        c.bind(mx.cpu(), [mx.np.ones(2)] * 2, aux_states={"m": mx.np.ones(2)})


def _mlp(batch=4, din=5, dh=7, dout=3):
    x = mx.sym.var("x")
    w1, b1, w2, b2, w3, b3 = (mx.sym.var(n) for n in ("w1", "b1", "w2", "b2", "w3", "b3"))
    h1 = mx.sym.tanh(mx.sym.matmul(x, w1) + b1)
    h2 = mx.sym.relu(mx.sym.matmul(h1, w2) + b2)
    out = mx.sym.sum(mx.sym.square(mx.sym.matmul(h2, w3) + b3) + h1.sum() * 0.5)
    shapes = {"x": (batch, din), "w1": (din, dh), "b1": (dh,), "w2": (dh, dh), "b2": (dh,),
              "w3": (dh, dout), "b3": (dout,)}
    values = {k: rand(s, i) for i, (k, s) in enumerate(shapes.items())}
    return out, values


def _mlp_imperative(v):
    h1 = mx.np.tanh(mx.np.matmul(v["x"], v["w1"]) + v["b1"])
    h2 = mx.npx.relu(mx.np.matmul(h1, v["w2"]) + v["b2"])
    return mx.np.sum(mx.np.square(mx.np.matmul(h2, v["w3"]) + v["b3"]) + h1.sum() * 0.5)


def test_gradients_equal_imperative_exactly():
    sym, values = _mlp()
    ex = sym.bind(mx.cpu(), {k: mx.np.array(v) for k, v in values.items()})
    arrays = {k: mx.np.array(v) for k, v in values.items()}
    for a in arrays.values():
        a.attach_grad()
    for step in range(3):
        with mx.autograd.record():
            y = _mlp_imperative(arrays)
        y.backward()
        out = ex.forward(is_train=True)[0]
        ex.backward()
        assert onp.array_equal(out.asnumpy(), y.asnumpy())
        for k, a in arrays.items():
            assert onp.array_equal(ex.grad_dict[k].asnumpy(), a.grad.asnumpy()), k
    _assert_grads_match_fd(ex, lambda F, v: _mlp_numpy(v))


def _mlp_numpy(v):
    h1 = onp.tanh(v["x"] @ v["w1"] + v["b1"])
    h2 = onp.maximum(h1 @ v["w2"] + v["b2"], 0)
    return onp.sum(onp.square(h2 @ v["w3"] + v["b3"]) + h1.sum() * 0.5)


def test_gradients_match_finite_differences():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    y = mx.sym.sum(mx.sym.sin(x * w) / (1 + mx.sym.exp(w)), axis=0)
    xv, wv = rand((3, 2), 1), rand((2,), 2)
    ex = y.bind(mx.cpu(), {"x": mx.np.array(xv), "w": mx.np.array(wv)})
    ex.forward(is_train=True)
    ex.backward()
    gx, gw = fd_gradient(lambda a, b: (onp.sin(a * b) / (1 + onp.exp(b))).sum(0), xv, wv)
    assert_fd_close(ex.grad_dict["x"], gx, "x")
    assert_fd_close(ex.grad_dict["w"], gw, "w")


# ---------------------------------------------------------------- against NumPy
# The tests below that compare the executor with the tape compare fastgrad with itself: a
# wrong rule would pass them. Each also checks the executor's gradients against finite
# differences of the same program run by NumPy (the ``NP`` namespace).

class _NumPyNamespace:
    """NumPy with the few npx names the programs use, for reference values."""

    def __getattr__(self, name):
        return getattr(onp, name)

    @staticmethod
    def relu(x):
        return onp.maximum(x, 0)

    @staticmethod
    def log_softmax(x, axis=-1):
        shifted = x - x.max(axis=axis, keepdims=True)
        return shifted - onp.log(onp.exp(shifted).sum(axis=axis, keepdims=True))


NP = _NumPyNamespace()


def _assert_grads_match_fd(ex, prog, head_grads=None, times=None, what=""):
    """``ex.grad_dict`` against finite differences of ``sum(<head, prog(NP, args)>)``.

    ``times`` maps an argument to the number of backward passes accumulated into its
    gradient (``grad_req='add'``); arguments without a gradient are skipped.
    """
    names = [k for k in ex.arg_dict]
    values = {k: ex.arg_dict[k].asnumpy().astype(onp.float64) for k in names}
    with_grad = [k for k in names if ex.grad_dict.get(k) is not None]

    def loss(*args):
        outs = prog(NP, dict(values, **dict(zip(with_grad, args))))
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        heads = head_grads or [onp.ones(onp.shape(o)) for o in outs]
        return sum(float(onp.sum(o * h)) for o, h in zip(outs, heads))

    expected = fd_gradient(loss, *[values[k] for k in with_grad])
    for k, e in zip(with_grad, expected):
        n = (times or {}).get(k, 1)
        assert_fd_close(ex.grad_dict[k].asnumpy(), n * e, "%s %s" % (what, k))


def test_many_uses_of_one_argument_accumulate_like_the_tape():
    x = mx.sym.var("x")
    y = mx.sym.exp(x) * x + mx.sym.sin(x) * x + x * x * 3.0 + mx.sym.tanh(x) / x
    xv = rand((6,), 3)
    ex = y.bind(mx.cpu(), {"x": mx.np.array(xv)})
    ex.forward(is_train=True)
    ex.backward()
    a = mx.np.array(xv)
    a.attach_grad()
    with mx.autograd.record():
        z = mx.np.exp(a) * a + mx.np.sin(a) * a + a * a * 3.0 + mx.np.tanh(a) / a
    z.backward()
    assert onp.array_equal(ex.grad_dict["x"].asnumpy(), a.grad.asnumpy())
    _assert_grads_match_fd(ex, lambda F, v: F.exp(v["x"]) * v["x"] + F.sin(v["x"]) * v["x"]
                           + v["x"] * v["x"] * 3.0 + F.tanh(v["x"]) / v["x"])


def test_grad_req_per_argument_and_add_accumulates():
    a, b, c = mx.sym.var("a"), mx.sym.var("b"), mx.sym.var("c")
    y = a * b + c
    args = {"a": mx.np.array([1.0, 2.0]), "b": mx.np.array([3.0, 4.0]),
            "c": mx.np.array([5.0, 6.0])}
    ex = y.bind(mx.cpu(), args, grad_req={"a": "write", "b": "add", "c": "null"})
    assert ex.grad_dict["c"] is None
    for _ in range(3):
        ex.forward(is_train=True)
        ex.backward()
    assert ex.grad_dict["a"].asnumpy().tolist() == [3, 4]
    assert ex.grad_dict["b"].asnumpy().tolist() == [3, 6]       # 3 x [1, 2]
    ex2 = y.bind(mx.cpu(), args, grad_req=["null", "write", "add"])
    ex2.forward()
    ex2.backward()
    ex2.backward()
    assert ex2.grad_dict["a"] is None
    assert ex2.grad_dict["c"].asnumpy().tolist() == [2, 2]
    assert ex2.grad_arrays[0] is None and ex2.grad_arrays[1] is not None


def test_args_grad_buffers_are_used():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    ga = mx.np.array([10.0, 10.0])
    ex = (a * b).bind(mx.cpu(), [mx.np.array([1.0, 2.0]), mx.np.array([3.0, 4.0])],
                      args_grad={"a": ga}, grad_req="add")
    ex.forward()
    ex.backward()
    assert ex.grad_dict["a"] is ga
    assert ga.asnumpy().tolist() == [13, 14]
    assert ex.grad_dict["b"].asnumpy().tolist() == [1, 2]
    with pytest.raises(ValueError, match="shape"):
        (a * b).bind(mx.cpu(), [mx.np.ones(2), mx.np.ones(2)], args_grad=[mx.np.ones(3), None])


def test_forward_keyword_inputs_and_buffer_reuse():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    ex = mx.sym.matmul(x, w).bind(mx.cpu(), {"x": mx.np.ones((2, 3)), "w": mx.np.ones((3, 4))})
    first = ex.forward()
    grad_buf = ex.grad_dict["w"]
    xv = rand((2, 3))
    second = ex.forward(x=mx.np.array(xv))
    assert second[0] is first[0]                         # outputs are reused
    assert_close(second[0], xv.astype(onp.float32) @ onp.ones((3, 4)), rtol=1e-6)
    assert ex.arg_dict["x"].dtype == onp.float32           # cast to the argument's dtype
    ex.backward()
    assert ex.grad_dict["w"] is grad_buf                   # gradients too
    assert ex.output_dict[ex._output_names[0]] is first[0]
    out = ex.forward(x=mx.np.ones((5, 3)))                 # a new batch size
    onp.testing.assert_array_equal(out[0].asnumpy(), onp.full((5, 4), 3.0))
    ex.backward()
    onp.testing.assert_array_equal(ex.grad_dict["x"].asnumpy(), onp.full((5, 3), 4.0))
    onp.testing.assert_array_equal(ex.grad_dict["w"].asnumpy(), onp.full((3, 4), 5.0))
    with pytest.raises(ValueError, match="'y' is not an argument"):
        ex.forward(y=mx.np.ones(2))


def test_backward_out_grads_forms_and_errors():
    x = mx.sym.var("x")
    g = mx.sym.Group([x * 2, x * 3])
    ex = g.bind(mx.cpu(), {"x": mx.np.array([1.0, 1.0])})
    ex.forward()
    ex.backward([mx.np.array([1.0, 0.0]), mx.np.array([0.0, 1.0])])
    assert ex.grad_dict["x"].asnumpy().tolist() == [2, 3]
    names = g.list_outputs()
    ex.backward({names[1]: onp.array([1.0, 1.0])})
    assert ex.grad_dict["x"].asnumpy().tolist() == [3, 3]
    ex.backward()
    assert ex.grad_dict["x"].asnumpy().tolist() == [5, 5]
    with pytest.raises(ValueError, match="shape"):
        ex.backward([mx.np.ones(3), mx.np.ones(2)])
    with pytest.raises(ValueError, match="2 outputs"):
        ex.backward([mx.np.ones(2)])


def test_backward_before_forward_runs_forward():
    x = mx.sym.var("x")
    ex = mx.sym.square(x).bind(mx.cpu(), {"x": mx.np.array([3.0])})
    ex.backward()
    assert ex.grad_dict["x"].asnumpy().tolist() == [6]


def test_copy_params_from():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    ex = (a + b).bind(mx.cpu(), {"a": mx.nd.zeros(2), "b": mx.nd.zeros(2)})
    ex.copy_params_from({"a": mx.nd.array([1, 2], dtype="float64"), "b": onp.array([3, 4])})
    assert ex.arg_dict["a"].dtype == onp.float32
    assert ex.forward()[0].asnumpy().tolist() == [4, 6]
    with pytest.raises(ValueError, match="'c' is not an argument"):
        ex.copy_params_from({"c": mx.nd.ones(2)})
    ex.copy_params_from({"c": mx.nd.ones(2)}, allow_extra_params=True)
    with pytest.raises(ValueError, match="auxiliary"):
        ex.copy_params_from({}, {"m": mx.nd.ones(2)})
    ex.copy_params_from({}, {"m": mx.nd.ones(2)}, allow_extra_params=True)
    with pytest.raises(ValueError, match="shape"):
        ex.copy_params_from({"a": mx.nd.ones(3)})


def test_train_mode_scope_reaches_compositions():
    x = mx.sym.var("x")
    y = mx.sym.npx.dropout(x, p=0.5)
    ex = y.bind(mx.cpu(), {"x": mx.np.ones((200,))})
    assert onp.array_equal(ex.forward(is_train=False)[0].asnumpy(), onp.ones(200))
    out = ex.forward(is_train=True)[0].asnumpy()
    assert set(onp.unique(out)) <= {0.0, 2.0} and (out == 0).any()
    ex.backward()
    assert onp.array_equal(ex.grad_dict["x"].asnumpy(), out)   # mask * 1/(1-p)
    assert not mx.autograd.is_training() and not mx.autograd.is_recording()


def test_composite_gradients_match_imperative():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    y = mx.sym.npx.log_softmax(mx.sym.matmul(x, w), axis=-1)
    loss = mx.sym.np.mean(y * y)
    xv, wv = rand((4, 3)), rand((3, 5), 1)
    ex = loss.bind(mx.cpu(), {"x": mx.np.array(xv), "w": mx.np.array(wv)})
    ex.forward(is_train=True)
    ex.backward()
    xa, wa = mx.np.array(xv), mx.np.array(wv)
    xa.attach_grad()
    wa.attach_grad()
    with mx.autograd.record():
        z = mx.npx.log_softmax(mx.np.matmul(xa, wa), axis=-1)
        z = mx.np.mean(z * z)
    z.backward()
    assert_close(ex.grad_dict["x"], xa.grad, rtol=1e-12, atol=1e-15)
    assert_close(ex.grad_dict["w"], wa.grad, rtol=1e-12, atol=1e-15)
    _assert_grads_match_fd(ex, lambda F, v: F.mean(F.log_softmax(v["x"] @ v["w"], axis=-1) ** 2))


def test_integer_arguments_get_no_gradient():
    x, idx = mx.sym.var("x"), mx.sym.var("i")
    y = mx.sym.sum(x * idx)
    ex = y.bind(mx.cpu(), {"x": mx.np.array([1.0, 2.0]), "i": onp.array([2, 3])})
    ex.forward()
    ex.backward()
    assert ex.grad_dict["i"] is None
    assert ex.grad_dict["x"].asnumpy().tolist() == [2, 3]


def test_multi_output_primitive_backward():
    x = mx.sym.var("x")
    parts = mx.sym.split(x, (1,), num_outputs=2)
    y = mx.sym.sum(parts[1] * 3.0)
    ex = y.bind(mx.cpu(), {"x": mx.np.array([1.0, 2.0, 3.0])})
    ex.forward()
    ex.backward()
    assert ex.grad_dict["x"].asnumpy().tolist() == [0, 3, 3]


def test_get_optimized_symbol_folds_and_merges():
    x = mx.sym.var("x")
    c = mx.sym.exp(mx.sym.const(onp.array([0.0, 1.0]))) * 2.0     # all constant: folded
    y = mx.sym.sin(x) + mx.sym.sin(x) + c
    ex = y.bind(mx.cpu(), {"x": mx.np.array([0.5, 1.5])})
    opt = ex.get_optimized_symbol()
    ops = [n["op"] for n in __import__("json").loads(opt.tojson(layout="fastgrad"))["nodes"]]
    assert ops.count("sin") == 1
    assert "exp" not in ops and "multiply" not in ops
    assert opt.list_arguments() == ["x"]
    assert opt.list_outputs() == y.list_outputs()
    ex2 = opt.bind(mx.cpu(), {"x": mx.np.array([0.5, 1.5])})
    assert_close(ex2.forward()[0], ex.forward()[0], rtol=1e-6)
    ex2.backward()
    ex.backward()
    assert_close(ex2.grad_dict["x"], ex.grad_dict["x"], rtol=1e-6)


def test_no_gradient_required_backward_is_a_no_op():
    x = mx.sym.var("x")
    ex = mx.sym.exp(x).bind(mx.cpu(), {"x": mx.np.ones(2)}, grad_req="null")
    ex.forward()
    ex.backward()
    assert ex.grad_arrays == [None]


# ---------------------------------------------------------------- the backward replay
# Note [Backward replay] in fastgrad/symbol/_plan.pyx: the bound graph is replayed backward in the
# engine's order with its accumulation rules, so gradients agree with the imperative ones (==).

def _mlp_values(dtype, batch=6, din=5, dh=8, dout=4):
    shapes = {"x": (batch, din), "w1": (din, dh), "b1": (dh,), "w2": (dh, dh), "b2": (dh,),
              "w3": (dh, dout), "b3": (dout,)}
    return {k: (rand(s, 10 + i) * 0.5).astype(dtype) for i, (k, s) in enumerate(shapes.items())}


def _mlp_loss_sym():
    x = mx.sym.var("x")
    h = x
    for i in (1, 2):
        h = mx.sym.relu(mx.sym.matmul(h, mx.sym.var("w%d" % i)) + mx.sym.var("b%d" % i))
    out = mx.sym.matmul(h, mx.sym.var("w3")) + mx.sym.var("b3")
    return mx.sym.mean(mx.sym.square(out))


def _mlp_loss_imperative(p, F=None):
    F = F or _FastgradNamespace
    h = p["x"]
    for i in (1, 2):
        h = F.relu(F.matmul(h, p["w%d" % i]) + p["b%d" % i])
    out = F.matmul(h, p["w3"]) + p["b3"]
    return F.mean(F.square(out))


class _FastgradNamespace:
    relu = staticmethod(mx.npx.relu)
    matmul = staticmethod(mx.np.matmul)
    mean = staticmethod(mx.np.mean)
    square = staticmethod(mx.np.square)


@pytest.mark.parametrize("dtype", [onp.float64, onp.float32])
def test_mlp_gradients_equal_imperative_bit_for_bit(dtype):
    values = _mlp_values(dtype)
    ex = _mlp_loss_sym().bind(mx.cpu(), {k: mx.np.array(v) for k, v in values.items()})
    arrays = {k: mx.np.array(v) for k, v in values.items()}
    for a in arrays.values():
        a.attach_grad()
    for step in range(3):
        # New inputs and parameters every step, as in training.
        new = _mlp_values(dtype, dh=8)
        new = {k: (v * (1 + step)).astype(dtype) for k, v in new.items()}
        ex.copy_params_from({k: mx.np.array(v) for k, v in new.items()})
        for k, v in new.items():
            arrays[k][...] = v
        out = ex.forward(is_train=True)[0]
        ex.backward()
        with mx.autograd.record():
            y = _mlp_loss_imperative(arrays)
        y.backward()
        assert out.dtype == dtype and ex.grad_dict["w1"].dtype == dtype
        assert (out.asnumpy() == y.asnumpy()).all()
        for k, a in arrays.items():
            assert (ex.grad_dict[k].asnumpy() == a.grad.asnumpy()).all(), (k, step)
        if dtype == onp.float64:
            _assert_grads_match_fd(ex, lambda F, v: _mlp_loss_imperative(v, F), what=step)


def test_grad_req_add_over_several_steps_equals_imperative():
    values = _mlp_values(onp.float32)
    ex = _mlp_loss_sym().bind(mx.cpu(), {k: mx.np.array(v) for k, v in values.items()},
                              grad_req={k: ("null" if k == "x" else "add") for k in values})
    arrays = {k: mx.np.array(v) for k, v in values.items()}
    for k, a in arrays.items():
        if k != "x":
            a.attach_grad(grad_req="add")
    for step in range(4):
        xv = (rand((6, 5), 100 + step) * 0.5).astype(onp.float32)
        ex.forward(is_train=True, x=mx.np.array(xv))
        ex.backward()
        arrays["x"] = mx.np.array(xv)
        with mx.autograd.record():
            y = _mlp_loss_imperative(arrays)
        y.backward()
    assert ex.grad_dict["x"] is None
    for k, a in arrays.items():
        if k != "x":
            assert (ex.grad_dict[k].asnumpy() == a.grad.asnumpy()).all(), k


def test_softmax_cross_entropy_composite_equals_imperative():
    x, w, b, label = (mx.sym.var(n) for n in ("x", "w", "b", "label"))
    logits = mx.sym.matmul(x, w) + b
    logp = mx.sym.npx.log_softmax(logits, axis=-1)           # a composite step
    loss = -mx.sym.mean(mx.sym.sum(logp * label, axis=-1))
    xv, wv, bv = rand((7, 4), 1), rand((4, 5), 2), rand((5,), 3)
    onehot = onp.eye(5)[onp.random.default_rng(4).integers(0, 5, 7)]
    ex = loss.bind(mx.cpu(), {"x": mx.np.array(xv), "w": mx.np.array(wv),
                              "b": mx.np.array(bv), "label": mx.np.array(onehot)},
                   grad_req={"x": "write", "w": "write", "b": "write", "label": "null"})
    arrays = {"x": mx.np.array(xv), "w": mx.np.array(wv), "b": mx.np.array(bv)}
    for a in arrays.values():
        a.attach_grad()
    for _ in range(2):
        out = ex.forward(is_train=True)[0]
        ex.backward()
        with mx.autograd.record():
            lg = mx.np.matmul(arrays["x"], arrays["w"]) + arrays["b"]
            y = -mx.np.mean(mx.np.sum(mx.npx.log_softmax(lg, axis=-1) * mx.np.array(onehot),
                                      axis=-1))
        y.backward()
        assert (out.asnumpy() == y.asnumpy()).all()
        for k, a in arrays.items():
            assert (ex.grad_dict[k].asnumpy() == a.grad.asnumpy()).all(), k
    _assert_grads_match_fd(ex, lambda F, v: -F.mean(F.sum(
        F.log_softmax(v["x"] @ v["w"] + v["b"], axis=-1) * v["label"], axis=-1)))


def test_plan_is_built_once_and_outputs_have_no_history():
    values = _mlp_values(onp.float64)
    ex = _mlp_loss_sym().bind(mx.cpu(), {k: mx.np.array(v) for k, v in values.items()})
    steps = ex._plan.steps_list
    assert [s.op for s in steps] == ["matmul", "add", "relu", "matmul", "add", "relu",
                                     "matmul", "add", "square", "mean"]
    assert ex._plan.backward_steps == steps[::-1]
    for _ in range(3):
        out = ex.forward(is_train=True)[0]
        ex.backward()
    assert ex._plan.steps_list == steps
    assert out.node is None                  # outputs are plain arrays, off the tape
    g = ex.grad_dict["w2"].asnumpy()
    out[...] = 123.0                         # writing into an output changes no gradient
    ex.backward()
    assert (ex.grad_dict["w2"].asnumpy() == g).all()


def test_backward_replays_only_steps_a_gradient_flows_through():
    x, w, i = mx.sym.var("x"), mx.sym.var("w"), mx.sym.var("i")
    y = mx.sym.sum(mx.sym.exp(x) * mx.sym.sin(w)) + mx.sym.sum(i * 2.0)
    ex = y.bind(mx.cpu(), {"x": mx.np.ones(3), "w": mx.np.ones(3), "i": mx.np.ones(3)},
                grad_req={"x": "null", "w": "write", "i": "null"})
    linked = {s.op for s in ex._plan.backward_steps}
    assert "exp" not in linked and "sin" in linked
    assert [s.op for s in ex._plan.steps_list].count("multiply") == 2
    ex.forward()
    ex.backward()
    assert_close(ex.grad_dict["w"], onp.exp(1.0) * onp.cos(1.0) * onp.ones(3), rtol=1e-6)


def _bind_both(prog, shapes, dtype=onp.float64, grad_req="write", seed=0):
    """``prog`` bound as a symbol and recorded imperatively on the same values."""
    values = {k: (rand(s, seed + j) * 0.7).astype(dtype)
              for j, (k, s) in enumerate(shapes.items())}
    syms = {k: mx.sym.var(k) for k in shapes}
    out = prog(mx.sym, syms)
    out = out if isinstance(out, (list, tuple)) else [out]
    ex = mx.sym.Group(list(out)).bind(mx.cpu(), {k: mx.np.array(v) for k, v in values.items()},
                                      grad_req=grad_req)
    arrays = {k: mx.np.array(v) for k, v in values.items()}
    req = grad_req if isinstance(grad_req, dict) else {k: grad_req for k in shapes}
    for k, a in arrays.items():
        if req.get(k, "null") != "null":
            a.attach_grad(grad_req=req[k])

    def imperative(head_grads=None):
        with mx.autograd.record():
            res = prog(mx.np, arrays)
        res = list(res) if isinstance(res, (list, tuple)) else [res]
        mx.autograd.backward(res, head_grads)
        return res
    return ex, arrays, imperative


def _assert_grads_equal(ex, arrays, what=""):
    for k, a in arrays.items():
        if a.grad is None:
            continue
        got, want = ex.grad_dict[k].asnumpy(), a.grad.asnumpy()
        assert got.dtype == want.dtype and got.shape == want.shape, (k, what)
        assert onp.array_equal(got, want), (k, what, got - want)


def _fan_out(F, v):
    x, w, b, c = v["x"], v["w"], v["b"], v["c"]
    h = F.tanh(x * w + b)                  # w (3,) and b (1, 3) broadcast over x (4, 3)
    u = h * c + F.exp(w)                   # c (4, 1) broadcasts the other way; w used again
    t = F.sum(u * h, axis=0) * w           # h used three times, w a third time
    return F.sum(t) + F.mean(F.sin(x) * u) + F.sum(h * h * b) + F.sum(c * c, axis=None)


@pytest.mark.parametrize("dtype", [onp.float64, onp.float32])
def test_fan_out_shared_inputs_and_broadcasting_equal_imperative(dtype):
    shapes = {"x": (4, 3), "w": (3,), "b": (1, 3), "c": (4, 1)}
    ex, arrays, imperative = _bind_both(_fan_out, shapes, dtype)
    for step in range(3):
        out = ex.forward(is_train=True)[0]
        ex.backward()
        y = imperative()[0]
        assert onp.array_equal(out.asnumpy(), y.asnumpy())
        _assert_grads_equal(ex, arrays, step)
    if dtype == onp.float64:
        _assert_grads_match_fd(ex, _fan_out)


def test_several_outputs_with_head_gradients_equal_imperative():
    def prog(F, v):
        x, w = v["x"], v["w"]
        y1 = F.tanh(F.matmul(x, w))
        y2 = F.sum(y1 * y1, axis=1) + F.sum(x, axis=1)    # an output that feeds another one
        return [y1, y2, x * 2.0, y1]                       # the same output twice
    shapes = {"x": (5, 3), "w": (3, 4)}
    ex, arrays, imperative = _bind_both(prog, shapes)
    ex.forward(is_train=True)
    hg = [rand((5, 4), 7), rand((5,), 8), rand((5, 3), 9), rand((5, 4), 10)]
    ex.backward([mx.np.array(h) for h in hg])
    imperative([mx.np.array(h) for h in hg])
    _assert_grads_equal(ex, arrays)
    _assert_grads_match_fd(ex, prog, head_grads=hg)
    ex.backward()                                          # ones, twice: same result
    imperative()
    _assert_grads_equal(ex, arrays, "ones")
    ex.backward()
    _assert_grads_equal(ex, arrays, "ones again")
    _assert_grads_match_fd(ex, prog)


def test_output_that_is_an_argument():
    x = mx.sym.var("x")
    ex = mx.sym.Group([x, mx.sym.exp(x)]).bind(mx.cpu(), {"x": mx.np.array([0.0, 1.0])})
    ex.forward()
    ex.backward([mx.np.array([1.0, 2.0]), mx.np.array([3.0, 4.0])])
    assert_close(ex.grad_dict["x"], [1.0 + 3.0, 2.0 + 4.0 * onp.e], rtol=1e-6)
    ex.backward()
    assert_close(ex.grad_dict["x"], [2.0, 1.0 + onp.e], rtol=1e-6)


def test_multi_output_steps_equal_imperative():
    def prog(F, v):
        kw = {"num_outputs": 3} if F is mx.sym else {}
        a, b, c = F.split(v["x"] * v["w"], 3, axis=1, **kw)
        return F.sum(F.exp(a) * c) + F.sum(F.sin(a))      # b reaches no output
    shapes = {"x": (4, 6), "w": (6,)}
    ex, arrays, imperative = _bind_both(prog, shapes)
    ex.forward(is_train=True)
    ex.backward()
    imperative()
    _assert_grads_equal(ex, arrays)
    _assert_grads_match_fd(ex, prog)


def test_grad_req_add_and_write_mixed_over_steps_equal_imperative():
    shapes = {"x": (4, 3), "w": (3,), "b": (1, 3), "c": (4, 1)}
    req = {"x": "null", "w": "add", "b": "write", "c": "add"}
    ex, arrays, imperative = _bind_both(_fan_out, shapes, grad_req=req)
    for step in range(4):
        ex.forward(is_train=True)
        ex.backward()
        imperative()
        _assert_grads_equal(ex, arrays, step)
    assert ex.grad_dict["x"] is None
    _assert_grads_match_fd(ex, _fan_out, times={"w": 4, "c": 4})


def test_args_grad_buffers_keep_their_memory_and_get_no_shared_arrays():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    ga, gb = mx.np.zeros(3), mx.np.zeros(3)
    ex = mx.sym.sum(mx.sym.exp(a + b)).bind(
        mx.cpu(), {"a": mx.np.array([0.0, 1.0, 2.0]), "b": mx.np.zeros(3)},
        args_grad={"a": ga, "b": gb})
    ex.forward()
    ex.backward()
    assert ex.grad_dict["a"] is ga and ex.grad_dict["b"] is gb
    assert_close(ga, onp.exp([0.0, 1.0, 2.0]), rtol=1e-6)
    assert_close(gb, onp.exp([0.0, 1.0, 2.0]), rtol=1e-6)
    # `add` passes one gradient to both of its inputs: each buffer gets its own copy.
    ex2 = mx.sym.sum(mx.sym.exp(a + b) * 1.0).bind(
        mx.cpu(), {"a": mx.np.array([0.0, 1.0, 2.0]), "b": mx.np.zeros(3)})
    ex2.forward()
    ex2.backward()
    ga2, gb2 = ex2.grad_dict["a"].asnumpy(), ex2.grad_dict["b"].asnumpy()
    assert onp.array_equal(ga2, gb2)
    ex2.grad_dict["a"][...] = 0.0
    assert onp.array_equal(ex2.grad_dict["b"].asnumpy(), gb2)


def test_cast_back_to_the_argument_dtype_equals_imperative():
    c = (rand((3,), 5) * 3).astype(onp.float64)
    def prog(F, v):
        k = mx.sym.const(c) if F is mx.sym else c
        return F.sum(F.exp(v["x"] * k)) + F.sum(v["x"] * v["x"])   # float64 product
    shapes = {"x": (2, 3)}
    ex, arrays, imperative = _bind_both(prog, shapes, dtype=onp.float32)
    ex.forward(is_train=True)
    ex.backward()
    imperative()
    assert ex.grad_dict["x"].dtype == onp.float32
    _assert_grads_equal(ex, arrays)


def test_new_shapes_at_forward_refit_the_gradients():
    x, b = mx.sym.var("x"), mx.sym.var("b")
    y = mx.sym.sum(mx.sym.tanh(x + b) * x)
    ex = y.bind(mx.cpu(), {"x": mx.np.array(rand((2, 3))), "b": mx.np.array(rand((3,), 1))})
    for n in (2, 5, 1, 5):
        xv = rand((n, 3), n)
        ex.forward(is_train=True, x=mx.np.array(xv))
        ex.backward()
        xa, ba = mx.np.array(xv), mx.np.array(ex.arg_dict["b"].asnumpy())
        xa.attach_grad()
        ba.attach_grad()
        with mx.autograd.record():
            z = mx.np.sum(mx.np.tanh(xa + ba) * xa)
        z.backward()
        assert onp.array_equal(ex.grad_dict["x"].asnumpy(), xa.grad.asnumpy()), n
        assert onp.array_equal(ex.grad_dict["b"].asnumpy(), ba.grad.asnumpy()), n
        _assert_grads_match_fd(ex, lambda F, v: F.sum(F.tanh(v["x"] + v["b"]) * v["x"]), what=n)


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_anomaly_detection_names_the_step():
    x = mx.sym.var("x")
    ex = mx.sym.sum(mx.sym.sqrt(x)).bind(mx.cpu(), {"x": mx.np.array([0.0, 1.0])})
    ex.forward()
    ex.backward()                            # inf, but anomaly detection is off
    with mx.autograd.detect_anomaly():
        with pytest.raises(FloatingPointError, match="sqrt"):
            ex.backward()
