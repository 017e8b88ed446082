"""Zero derivatives are zeros, not errors: zero rules, symbolic zeros, per-output flags.

Issue 12, item 2 (Note [Zero gradients] in fastgrad/_core/_zeros.py). Every value is a closed form
or a float64 finite difference.
"""

import json
import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastgrad as mx  # noqa: E402
from fastgrad import autograd, np, npx  # noqa: E402

from _helpers import assert_close, numerical_grad, variable as var  # noqa: E402


# ---------------------------------------------------------------- item 2: zero rules
ZERO_OPS = {
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "fix": np.fix,
    "round": np.round, "around": np.around, "round_decimals": lambda v: np.round(v, 1),
    "sign": np.sign, "floor_divide": lambda v: np.floor_divide(v, 0.7),
    "floordiv_operator": lambda v: v // 0.7, "heaviside": lambda v: np.heaviside(v, 0.5),
}
ZERO_REFS = {
    "floor": onp.floor, "ceil": onp.ceil, "trunc": onp.trunc, "rint": onp.rint,
    "fix": onp.fix, "round": onp.round, "around": onp.around,
    "round_decimals": lambda v: onp.round(v, 1), "sign": onp.sign,
    "floor_divide": lambda v: onp.floor_divide(v, 0.7),
    "floordiv_operator": lambda v: v // 0.7, "heaviside": lambda v: onp.heaviside(v, 0.5),
}
POINTS = [0.23, 1.37, -2.61, 3.49]      # away from every jump of the ops above


@pytest.mark.parametrize("name", sorted(ZERO_OPS))
def test_zero_derivative_ops_are_recorded_and_give_zeros(name):
    x = var(POINTS)
    with autograd.record():
        h = ZERO_OPS[name](x * 1.0)
        y = (h * x).sum()            # d/dx (h(x) x) = h(x) where h is locally constant
    assert_close(h, ZERO_REFS[name](onp.array(POINTS)))
    (g,) = autograd.grad(y, [x])
    fd, = numerical_grad(lambda v: ZERO_REFS[name](v) * v, onp.array(POINTS))
    assert_close(g, fd, rtol=1e-6, atol=1e-8)
    with autograd.record():
        alone = ZERO_OPS[name](x).sum()
    assert_close(autograd.grad(alone, [x])[0], onp.zeros(4))


@pytest.mark.parametrize("name", ["floor", "sign", "round"])
def test_zero_ops_to_second_order(name):
    x = var(POINTS)
    with autograd.record():
        y = (ZERO_OPS[name](x) * x * x).sum()
        (d1,) = autograd.grad(y, [x], create_graph=True)
        s = d1.sum()
    ref = ZERO_REFS[name](onp.array(POINTS))
    assert_close(d1, 2 * ref * onp.array(POINTS))
    (d2,) = autograd.grad(s, [x])
    assert_close(d2, 2 * ref)


def test_list_ops_reports_zero_ops_as_differentiable():
    info = mx.list_ops()
    for name in ("floor", "ceil", "trunc", "rint", "round", "sign", "floor_divide",
                 "heaviside"):
        assert info[name]["differentiable"] is True and info[name]["order"] == "any", name
    assert info["greater"]["differentiable"] is False


def _derivatives(f, x, n):
    out = []
    with autograd.record():
        g = f(x).sum()
        for _ in range(n):
            (g,) = autograd.grad(g, [x], create_graph=True)
            out.append(g.asnumpy())
            g = g.sum()
    return out


@pytest.mark.parametrize("name,f,closed", [
    ("relu", npx.relu, lambda v: [(v > 0) * 1.0, 0 * v, 0 * v]),
    ("square", np.square, lambda v: [2 * v, 2 + 0 * v, 0 * v, 0 * v]),
    ("clip", lambda v: np.clip(v, -1.0, 1.0),
     lambda v: [((v > -1) & (v < 1)) * 1.0, 0 * v, 0 * v]),
    ("abs", np.abs, lambda v: [onp.sign(v), 0 * v, 0 * v]),
    ("radians", np.radians, lambda v: [onp.pi / 180 + 0 * v, 0 * v]),
    ("linear", lambda v: 3 * v + 1, lambda v: [3 + 0 * v, 0 * v, 0 * v]),
])
def test_derivatives_constant_in_x_answer_zeros(name, f, closed):
    xv = onp.array([0.5, -1.5, 2.0])
    expected = closed(xv)
    got = _derivatives(f, var(xv), len(expected))
    for k, (g, e) in enumerate(zip(got, expected)):
        assert_close(g, e, atol=1e-12), (name, k)


def test_dropout_second_derivative_is_zero():
    x = var(onp.linspace(-1, 1, 50))
    mx.np.random.seed(0)
    with autograd.record(train_mode=True):
        y = npx.dropout(x, p=0.5)
        (d1,) = autograd.grad(y.sum(), [x], create_graph=True)
        (d2,) = autograd.grad(d1.sum(), [x], create_graph=True)
    kept = y.asnumpy() != 0
    assert_close(d1, kept * 2.0)
    assert_close(d2, onp.zeros(50))


def test_gradient_constant_in_another_variable_is_zero_not_unreached():
    x, z = var([1.0, 2.0]), var([3.0, 4.0])
    with autograd.record():
        y = (x * z).sum()
        (d1,) = autograd.grad(y, [x], create_graph=True)     # = z
        s = d1.sum()
    gx, gz = autograd.grad(s, [x, z])
    assert_close(gx, [0.0, 0.0])
    assert_close(gz, [1.0, 1.0])


def test_unreached_variable_error_says_which_case_and_opt_in_gives_zeros():
    x, z = var([1.0]), var([2.0])
    with autograd.record():
        y = (z * 2).sum()
    with pytest.raises(ValueError, match="variable 0 .*not reached.*no recorded path"):
        autograd.grad(y, [x])
    assert_close(autograd.grad(y, [x], allow_unused=True)[0], [0.0])


def test_head_without_history_error_does_not_blame_record():
    x = var([1.0])
    with autograd.record():
        pass
    y = (x * 2).sum()          # computed outside record()
    with pytest.raises(RuntimeError, match="does not depend on any variable"):
        y.backward()
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        autograd.grad(y, [x])


def test_zero_path_reaches_the_variable_without_opt_in():
    x = var([0.4, 1.6])
    with autograd.record():
        y = np.floor(x).sum() + (x > 1).sum()
    assert_close(autograd.grad(y, [x])[0], [0.0, 0.0])


def test_symbolic_zero_for_unused_output_of_a_multi_output_op():
    # Only the first output of modf is used: the second's gradient is a symbolic zero.
    x = var([1.25, -2.5])
    with autograd.record():
        frac, whole = np.modf(x)
        y = (frac * frac).sum()
    y.backward()
    assert_close(x.grad, 2 * onp.modf(onp.array([1.25, -2.5]))[0])


def test_symbolic_zero_times_infinity_is_zero():
    from fastgrad._kernels._filled import Filled
    z = Filled(onp.zeros(()), (3,))
    out = z * onp.array([1.0, onp.inf, -onp.inf])
    assert type(out) is Filled and out.zero and out.shape == (3,)
    assert onp.asarray(out).tolist() == [0.0, 0.0, 0.0]


# ---------------------------------------------------------------- per-output differentiability
def test_slogdet_sign_output_carries_no_gradient():
    av = onp.array([[2.0, 1.0], [0.5, -3.0]])
    a = var(av)
    with autograd.record():
        sign, logabs = np.linalg.slogdet(a)
        y = sign * logabs
    assert not sign.node.carries_gradient and logabs.node.carries_gradient
    y.backward()
    # d/da (sign * log|det a|) with sign locally constant: sign * inv(a).T
    assert_close(a.grad, onp.sign(onp.linalg.det(av)) * onp.linalg.inv(av).T)
    with autograd.record():
        sign, _ = np.linalg.slogdet(a)
        s = sign * 1.0
    assert_close(autograd.grad(s, [a])[0], onp.zeros((2, 2)))


def test_table_declares_output_differentiability():
    from fastgrad._ops._registry import REGISTRY
    assert REGISTRY["slogdet"].differentiable_outputs == (False, True)
    assert REGISTRY["eigh"].differentiable_outputs is None


# ---------------------------------------------------------------- get_symbol of tied gradients
def test_get_symbol_of_gradients_returned_under_create_graph():
    x = var([0.3, -0.7])
    with autograd.record():
        (d1,) = autograd.grad((x * x * x).sum(), [x], create_graph=True)
        (d3,) = autograd.grad(np.square(x).sum(), [x], create_graph=True)
        (d4,) = autograd.grad(d3.sum(), [x], create_graph=True)     # constant 2
    ops = [n["op"] for n in json.loads(autograd.get_symbol(d1).tojson())["nodes"]]
    assert "gradient_of" not in ops and "no_gradient_output" not in ops and len(ops) > 1
    sym = autograd.get_symbol(d4)              # a constant: no arguments
    assert sym.list_arguments() == []
    assert_close(sym.bind(mx.cpu(), {}).forward()[0], [2.0, 2.0])
    s1 = autograd.get_symbol(d1)                 # 3 x**2
    assert_close(s1.bind(mx.cpu(), {"var0": x}).forward()[0], 3 * onp.array([0.3, -0.7]) ** 2)
