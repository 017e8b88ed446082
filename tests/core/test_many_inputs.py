"""Ops with more than 30 (and more than 63) inputs: the ``needs`` mask has one bit per input.

The mask a rule receives used to fold inputs 30 and up into one bit. These tests stack and
concatenate 35, 40 and 70 arrays of which only some want a gradient (among them inputs past
the 30th and the 63rd), on the tape, through ``grad()`` for a subset, through a ``Function``
whose backward reads the mask, and on the executor, and check every gradient's value.
"""

import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastgrad as mx  # noqa: E402


def _inputs(n, shape=(2, 3)):
    rng = onp.random.default_rng(n)
    return [rng.standard_normal(shape) for _ in range(n)]


@pytest.mark.parametrize("n", [40, 70])
def test_stack_gives_gradients_to_exactly_the_inputs_that_want_them(n):
    values = _inputs(n)
    wanted = {0, 5, 29, 30, 31, 39} | ({62, 63, 64, 69} if n > 63 else set())
    arrays = [mx.np.array(v) for v in values]
    for i in wanted:
        arrays[i].attach_grad()
    weights = onp.arange(1.0, n + 1.0)[:, None, None] * onp.ones((n, 2, 3))
    with mx.autograd.record():
        y = mx.np.sum(mx.np.stack(arrays, axis=0) ** 2 * mx.np.array(weights))
    y.backward()
    for i, a in enumerate(arrays):
        if i in wanted:
            onp.testing.assert_allclose(a.grad.asnumpy(), 2.0 * (i + 1.0) * values[i],
                                        rtol=1e-15, err_msg=str(i))
        else:
            assert a.grad is None, i


def test_concatenate_of_35_through_grad_for_a_subset():
    values = _inputs(35, (1, 4))
    arrays = [mx.np.array(v) for v in values]
    for a in arrays:
        a.attach_grad()
    with mx.autograd.record():
        c = mx.np.concatenate(arrays, axis=0)           # (35, 4)
        y = mx.np.sum(mx.np.sin(c) * mx.np.arange(35.0)[:, None])
    picked = [2, 30, 31, 34]
    grads = mx.autograd.grad(y, [arrays[i] for i in picked])
    for i, g in zip(picked, grads):
        onp.testing.assert_allclose(g.asnumpy(), onp.cos(values[i]) * i, rtol=1e-15,
                                    err_msg=str(i))
    assert all(a.grad is None or not a.grad.asnumpy().any() for a in arrays)


class Weighted(mx.autograd.Function):
    """``sum_i (i + 1) x_i`` over many inputs; backward records the ``needs`` it serves."""

    def forward(self, *xs):
        self.n = len(xs)
        total = xs[0] * 1.0
        for i, x in enumerate(xs[1:], start=1):
            total = total + x * (i + 1.0)
        return total

    def backward(self, dy):
        return tuple(dy * (i + 1.0) for i in range(self.n))


def test_a_function_with_70_inputs_delivers_the_31st_and_64th_gradients():
    values = _inputs(70, (3,))
    arrays = [mx.np.array(v) for v in values]
    wanted = [1, 30, 45, 63, 69]
    for i in wanted:
        arrays[i].attach_grad()
    with mx.autograd.record():
        y = mx.np.sum(Weighted()(*arrays) ** 2)
    y.backward()
    total = sum((i + 1.0) * v for i, v in enumerate(values))
    for i in wanted:
        onp.testing.assert_allclose(arrays[i].grad.asnumpy(), 2.0 * total * (i + 1.0),
                                    rtol=1e-13, err_msg=str(i))


def test_a_rule_gets_one_needs_bit_per_input_past_63():
    # The engine computes the mask for a node with 70 inputs; a custom op's node_backward
    # receives it unchanged.
    seen = []

    class Probe(mx.autograd.Function):
        def forward(self, *xs):
            return xs[0] * 0.0 + sum(x for x in xs[1:]) * 0.0

        def backward(self, dy):
            return tuple(dy * 0.0 for _ in range(70))

    from fastgrad._core._custom_function import _FunctionOp
    original = _FunctionOp.node_backward

    def spy(self, node, g, needs, create_graph):
        seen.append(needs)
        return original(self, node, g, needs, create_graph)

    values = _inputs(70, (2,))
    arrays = [mx.np.array(v) for v in values]
    wanted = [0, 31, 62, 63, 64, 69]
    for i in wanted:
        arrays[i].attach_grad()
    _FunctionOp.node_backward = spy
    try:
        with mx.autograd.record():
            y = mx.np.sum(Probe()(*arrays))
        y.backward()
    finally:
        _FunctionOp.node_backward = original
    assert seen == [sum(1 << i for i in wanted)]


def test_executor_stack_of_40_with_grad_req_null_for_most():
    n = 40
    values = _inputs(n)
    names = ["x%d" % i for i in range(n)]
    wanted = {3, 30, 31, 39}
    syms = [mx.sym.var(k) for k in names]
    weights = onp.arange(1.0, n + 1.0)[:, None, None] * onp.ones((n, 2, 3))
    out = mx.sym.sum(mx.sym.square(mx.sym.stack(*syms, axis=0)) * mx.sym.var("w"))
    args = {k: mx.np.array(v) for k, v in zip(names, values)}
    args["w"] = mx.np.array(weights)
    req = {k: ("write" if i in wanted else "null") for i, k in enumerate(names)}
    req["w"] = "null"
    ex = out.bind(mx.cpu(), args, grad_req=req)
    ex.forward(is_train=True)
    ex.backward()
    for i, k in enumerate(names):
        if i in wanted:
            onp.testing.assert_allclose(ex.grad_dict[k].asnumpy(), 2.0 * (i + 1.0) * values[i],
                                        rtol=1e-15, err_msg=k)
        else:
            assert ex.grad_dict.get(k) is None, k
