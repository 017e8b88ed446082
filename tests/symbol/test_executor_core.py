"""The executor's backward is the engine's: bit-identical gradients and finite differences.

``Plan.backward`` replays the derivative rules through the engine's own fitting, accumulation
and gradient writing (Note [Backward replay] in ``_plan.pyx``), so its gradients must equal the
tape's bit for bit, whatever the program: broadcasting (gradients summed back), arguments used
several times (accumulation, in place or not), multi-output ops (zeros completed), arrays large
enough for the large-array kernels, casts. Bit-identity alone would let a wrong
rule pass (both sides use it), so the executor is also checked against central finite
differences in float64.
"""

import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastgrad as mx  # noqa: E402


def _values(shapes, dtype=onp.float64, seed=0):
    rng = onp.random.default_rng(seed)
    return {k: (0.7 * rng.standard_normal(s)).astype(dtype) for k, s in shapes.items()}


def _broadcasting(F, v):
    x, w, b, c = v["x"], v["w"], v["b"], v["c"]
    h = F.tanh(x * w + b)                       # w (3,) and b (1, 3) broadcast over x (4, 3)
    u = h * c + F.exp(w)                        # c (4, 1) broadcasts along the other axis
    return F.sum(F.sum(u * h, axis=0) * w) + F.mean(F.sin(x) * u)


def _repeated(F, v):
    x, w = v["x"], v["w"]
    a = x * w                                   # x and w each used many times below
    s = a + a                                   # add hands the same gradient to both inputs
    r = F.reshape(s, (-1,))                     # a view of its gradient, passed on
    t = x + w                                   # identity gradients reaching x and w again
    return (F.sum(r * r) + F.sum(F.exp(t) * a) + F.sum(x * x * x) + F.sum(w)
            + F.sum(F.reshape(t, (-1,))))


def _multi_output_plain(F, v):
    kw = {"num_outputs": 3} if F is mx.sym else {}
    a, b, c = F.split(v["x"] * v["w"], 3, axis=1, **kw)
    return F.sum(F.exp(a) * c) + F.sum(F.sin(a) * a)     # b reaches no output


def _large(F, v):
    # Big enough for the large-array kernels' in-place additions.
    x, b = v["x"], v["b"]
    h = F.tanh(x + b)
    return F.sum(h * h) + F.sum(F.exp(h) * x) + F.sum(x * b)


def _described(F, v):
    # Values backward needs only the shape and dtype of (Note [Slot lifetimes]): forward drops
    # them, and their gradients are still summed back and cast to what they were.
    x, w = v["x"], v["w"]
    s = F.sin(w) + F.cos(x)                     # sin(w) (3,) dropped: its gradient is summed
    t = F.sum(F.exp(x) + s, axis=0)             # sum reads its input's shape alone
    kw = {"num_outputs": 3} if F is mx.sym else {}
    a, b, c = F.split(F.tanh(x), 3, axis=0, **kw)   # a and c dropped, b reaches no output
    return F.sum(t * w) + F.sum(F.sin(a) + F.exp(c))


def _described_cast(F, v):
    # A dropped float32 value whose float64 gradient is cast back to float32.
    x = v["x"]
    return F.sum(F.cos(x.astype("float32")).astype("float64") * x)


PROGRAMS = {
    "broadcasting": (_broadcasting, {"x": (4, 3), "w": (3,), "b": (1, 3), "c": (4, 1)}),
    "described": (_described, {"x": (6, 3), "w": (3,)}),
    "described_cast": (_described_cast, {"x": (4, 5)}),
    "repeated": (_repeated, {"x": (3, 4), "w": (3, 4)}),
    "multi_output": (_multi_output_plain, {"x": (4, 6), "w": (6,)}),
    "large": (_large, {"x": (256, 512), "b": (512,)}),
}


def _bind(prog, values, grad_req="write"):
    syms = {k: mx.sym.var(k) for k in values}
    return prog(mx.sym, syms).bind(
        mx.cpu(), {k: mx.np.array(v) for k, v in values.items()}, grad_req=grad_req)


def _tape(prog, values):
    arrays = {k: mx.np.array(v) for k, v in values.items()}
    for a in arrays.values():
        a.attach_grad()
    with mx.autograd.record():
        y = prog(mx.np, arrays)
    y.backward()
    return y, {k: a.grad.asnumpy() for k, a in arrays.items()}


@pytest.mark.parametrize("dtype", [onp.float64, onp.float32])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_executor_gradients_are_the_tapes_bit_for_bit(name, dtype):
    prog, shapes = PROGRAMS[name]
    values = _values(shapes, dtype)
    ex = _bind(prog, values)
    y, want = _tape(prog, values)
    for step in range(2):                       # the second backward reuses the buffers
        out = ex.forward(is_train=True)[0]
        ex.backward()
        assert onp.array_equal(out.asnumpy(), y.asnumpy())
        for k in values:
            got = ex.grad_dict[k].asnumpy()
            assert got.dtype == want[k].dtype and got.shape == want[k].shape, (k, step)
            assert onp.array_equal(got, want[k]), (name, k, step, onp.abs(got - want[k]).max())


def test_executor_gradients_equal_the_tapes_with_a_cast_back_to_the_argument_dtype():
    def prog(F, v):
        return F.sum(F.exp(v["x"].astype("float64")) * v["w"])   # x float32, w float64
    values = {"x": onp.linspace(-1, 1, 6, dtype=onp.float32).reshape(2, 3),
              "w": onp.linspace(0.5, 2, 3)}
    ex = _bind(prog, values)
    ex.forward(is_train=True)
    ex.backward()
    _, want = _tape(prog, values)
    assert ex.grad_dict["x"].dtype == onp.float32
    for k in values:
        assert onp.array_equal(ex.grad_dict[k].asnumpy(), want[k]), k


def _central_differences(prog, values, eps=1e-6):
    """d sum(prog) / d value, by central differences in float64 (no recording)."""
    def f(vals):
        return float(prog(mx.np, {k: mx.np.array(v) for k, v in vals.items()}).asnumpy())
    grads = {}
    for k, v in values.items():
        g = onp.zeros_like(v)
        for idx in onp.ndindex(v.shape):
            plus = {kk: vv.copy() for kk, vv in values.items()}
            minus = {kk: vv.copy() for kk, vv in values.items()}
            plus[k][idx] += eps
            minus[k][idx] -= eps
            g[idx] = (f(plus) - f(minus)) / (2 * eps)
        grads[k] = g
    return grads


@pytest.mark.parametrize("name", ["broadcasting", "described", "repeated", "multi_output"])
def test_executor_gradients_match_central_differences(name):
    prog, shapes = PROGRAMS[name]
    values = _values(shapes, onp.float64, seed=3)
    ex = _bind(prog, values)
    ex.forward(is_train=True)
    ex.backward()
    want = _central_differences(prog, values)
    for k in values:
        got = ex.grad_dict[k].asnumpy()
        onp.testing.assert_allclose(got, want[k], rtol=1e-7, atol=1e-8, err_msg=k)


def test_executor_gradient_of_a_multi_output_op_with_an_unreached_output_is_exact():
    # Closed form: d/dx sum(exp(a) * c) + sum(sin(a) * a) with a, b, c = split(x * w).
    values = _values({"x": (4, 6), "w": (6,)}, seed=5)
    ex = _bind(_multi_output_plain, values)
    ex.forward(is_train=True)
    ex.backward()
    x, w = values["x"], values["w"]
    p = x * w
    a, c = p[:, :2], p[:, 4:]
    dp = onp.zeros_like(p)
    dp[:, :2] = onp.exp(a) * c + onp.cos(a) * a + onp.sin(a)
    dp[:, 4:] = onp.exp(a)
    onp.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), dp * w, rtol=1e-13)
    onp.testing.assert_allclose(ex.grad_dict["w"].asnumpy(), (dp * x).sum(0), rtol=1e-13)


def test_executor_on_large_arrays_uses_the_large_kernels_as_the_tape_does():
    """Steps of large arrays run where the tape runs them (Note [Executor plan]): ufunc
    kernels and the rules' large binding through the large-array kernels, split across the
    pool as often as the tape splits them, with the tape's values bit for bit."""
    from fastgrad._kernels import _large

    def prog(F, v):
        x = v["x"]
        return F.sum(F.sin(x) * F.exp(-x * x) + x * x)

    values = _values({"x": ((1 << 18) + 4097,)}, onp.float64)
    old = _large.set_num_threads(2)
    try:
        ex = _bind(prog, values)
        ex.forward(is_train=True)
        start = _large.pool_calls()
        out = ex.forward(is_train=True)[0]
        forward_calls = _large.pool_calls() - start
        ex.backward()
        backward_calls = _large.pool_calls() - start - forward_calls
        x = mx.np.array(values["x"])
        x.attach_grad()
        start = _large.pool_calls()
        with mx.autograd.record():
            y = prog(mx.np, {"x": x})
        tape_forward_calls = _large.pool_calls() - start
        y.backward()
        tape_backward_calls = _large.pool_calls() - start - tape_forward_calls
    finally:
        _large.set_num_threads(old if old else None)
    assert (forward_calls, backward_calls) == (tape_forward_calls, tape_backward_calls)
    assert onp.array_equal(out.asnumpy(), y.asnumpy())
    assert onp.array_equal(ex.grad_dict["x"].asnumpy(), x.grad.asnumpy())
