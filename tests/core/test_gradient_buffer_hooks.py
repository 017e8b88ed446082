"""The deferred-product hook is declared in the derivative table (``Op(..., deferred=...)``),
compiled onto the Primitive, and applied by the engine's GradientBuffer for the tape and the
executor alike (Note [Gradient buffers] in _engine.pyx, Note [Deferred weight gradients] in
_kernels/_forward.py)."""

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad._core._array import Primitive
from fastgrad._ops._derivatives import TABLE
from fastgrad._ops._registry import REGISTRY


def test_the_table_declares_the_hook_and_the_registry_compiles_it():
    declared = {op.name: op.deferred for op in TABLE if op.deferred}
    assert declared == {"matmul": {"y": "x"}}
    assert REGISTRY["matmul"].defer_input == 1
    assert [name for name, p in REGISTRY.items() if p.defer_input >= 0] == ["matmul"]


def _prim(save_inputs):
    return Primitive("t", onp.matmul, None, 2, 1, (), (), save_inputs, (), False, (1, 1), True)


def test_a_hook_needs_its_factor_saved_and_is_fixed_once_set():
    with pytest.raises(ValueError, match="save input 0"):
        _prim((1,))._set_deferred(1, 0)
    p = _prim((0, 1))
    p._set_deferred(1, 0)
    assert p.defer_input == 1
    with pytest.raises(AttributeError, match="fixed after import"):
        p._set_deferred(1, 0)


def _rnn(F, xs, w, h):
    for x in xs:
        h = F.np.tanh(F.np.matmul(x, w) + F.np.matmul(h, w))
    return F.np.sum(h * h)


@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
def test_a_shared_weight_gets_the_same_bits_from_the_tape_and_the_executor(dtype):
    rng = onp.random.default_rng(0)
    xs = [rng.standard_normal((4, 5)).astype(dtype) for _ in range(6)]
    w = rng.standard_normal((5, 5)).astype(dtype) * 0.3
    h = rng.standard_normal((4, 5)).astype(dtype)
    # tape
    wa, ha = mx.np.array(w), mx.np.array(h)
    wa.attach_grad()
    ha.attach_grad()
    with mx.autograd.record():
        y = _rnn(mx, [mx.np.array(x) for x in xs], wa, ha)
    y.backward()
    # executor
    names = ["x%d" % i for i in range(len(xs))]
    sym = _rnn(mx.sym, [mx.sym.var(n) for n in names], mx.sym.var("w"), mx.sym.var("h"))
    args = {n: mx.np.array(x) for n, x in zip(names, xs)}
    args.update(w=mx.np.array(w), h=mx.np.array(h))
    reqs = {n: "null" for n in names}
    reqs.update(w="write", h="write")
    ex = sym.bind(mx.cpu(), args, grad_req=reqs)
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward()
        assert onp.array_equal(ex.grad_dict["w"].asnumpy(), wa.grad.asnumpy())
        assert onp.array_equal(ex.grad_dict["h"].asnumpy(), ha.grad.asnumpy())
