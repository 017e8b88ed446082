"""Pass-through rules (Note [Pass-through rules] in _engine.pyx): an op whose every rule is ``g``
(add, copy, astype, ...) gets its gradients from the engine without a call of its rule, with
the same values, checks and errors as the rule."""
import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastgrad as mx  # noqa: E402
from fastgrad._ops._registry import REGISTRY  # noqa: E402
from fastgrad.base import MXNetError  # noqa: E402
from _helpers import assert_close  # noqa: E402


def test_pass_through_ops_are_marked():
    assert REGISTRY["add"].passes_g and REGISTRY["copy"].passes_g
    assert REGISTRY["astype"].passes_g
    assert not REGISTRY["subtract"].passes_g and not REGISTRY["multiply"].passes_g


def test_add_gradients_with_broadcasting_and_repeated_inputs():
    x = mx.np.array(onp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    b = mx.np.array(onp.array([0.5, -1.0, 2.0]))
    x.attach_grad()
    b.attach_grad()
    with mx.autograd.record():
        y = x + b
        z = (y + y) * 3.0 + x
        s = z.sum()
    s.backward()
    assert_close(x.grad, onp.full((2, 3), 7.0))
    assert_close(b.grad, onp.full(3, 12.0))


def test_add_gradient_of_one_input_only():
    x = mx.np.array(onp.array([1.0, 2.0]))
    x.attach_grad()
    c = mx.np.array(onp.array([5.0, 6.0]))
    with mx.autograd.record():
        s = ((c + x) * x).sum()
    s.backward()
    assert_close(x.grad, onp.array([1.0 + 5.0 + 1.0, 2.0 + 6.0 + 2.0]))


def test_astype_passes_the_gradient_cast_back():
    x = mx.np.array(onp.array([1.0, 2.0, 3.0], dtype=onp.float32))
    x.attach_grad()
    with mx.autograd.record():
        s = (x.astype(onp.float64) * 2.0).sum()
    s.backward()
    assert x.grad.dtype == onp.float32
    assert_close(x.grad, onp.full(3, 2.0))


def test_conjugate_of_complex_input_is_not_passed_through():
    # conj's real rule is g, its complex one is not: Re(sum(conj(z) c)) = Re(sum(z conj(c))),
    # so both must give one gradient; passing g through conj would give another.
    r = onp.random.default_rng(0)
    zv = r.standard_normal(4) + 1j * r.standard_normal(4)
    cv = r.standard_normal(4) + 1j * r.standard_normal(4)
    grads = []
    for through_conj in (True, False):
        z = mx.np.array(zv)
        z.attach_grad()
        with mx.autograd.record():
            prod = mx.np.conjugate(z) * mx.np.array(cv) if through_conj \
                else z * mx.np.array(onp.conj(cv))
            s = mx.np.real(prod).sum()
        s.backward()
        grads.append(z.grad.asnumpy())
    onp.testing.assert_allclose(grads[0], grads[1], rtol=1e-15, atol=1e-15)


def test_a_released_add_node_still_raises():
    x = mx.np.array(onp.array([1.0, 2.0]))
    x.attach_grad()
    with mx.autograd.record():
        y = x + 1.0
        s = y.sum()
    s.backward()
    with pytest.raises(MXNetError, match="retain_graph"):
        s.backward()


def test_add_under_create_graph_differentiates_again():
    x = mx.np.array(onp.array([0.3, -0.7]))
    x.attach_grad()
    with mx.autograd.record():
        y = (mx.np.sin(x) + x * x).sum()
        (gx,) = mx.autograd.grad(y, [x], create_graph=True)
        h = gx.sum()
    h.backward()
    assert_close(x.grad, -onp.sin(onp.array([0.3, -0.7])) + 2.0)
