"""Higher-order derivatives against closed forms (float64): second to fourth and tenth
derivatives, and Hessian-vector products against finite differences of gradients.
"""
import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastgrad import autograd, np, npx  # noqa: E402

from _helpers import (  # noqa: E402
    assert_close,
    f64,
    numerical_grad,
    to_numpy,
)


def _rng(seed=0):
    return onp.random.RandomState(seed)


# ==========================================================================
# Elementwise ops against finite differences
# ==========================================================================

def _sigmoid(a):
    return 1.0 / (1.0 + onp.exp(-a))


# ==========================================================================
# Higher-order derivatives (float64, closed forms)
# ==========================================================================

def _t(a):
    return onp.tanh(a)


# (id, function, derivatives 1..4 as closed forms; None if the 4th is not checked)
HIGHER = [
    ("sin", np.sin, [onp.cos, lambda a: -onp.sin(a), lambda a: -onp.cos(a), onp.sin]),
    ("cube", lambda a: a ** 3, [lambda a: 3 * a ** 2, lambda a: 6 * a, lambda a: 6 + 0 * a, None]),
    ("power3", lambda a: np.power(a, 3),
     [lambda a: 3 * a ** 2, lambda a: 6 * a, lambda a: 6 + 0 * a, None]),
    ("exp", np.exp, [onp.exp, onp.exp, onp.exp, onp.exp]),
    ("tanh", np.tanh, [
        lambda a: 1 - _t(a) ** 2,
        lambda a: -2 * _t(a) * (1 - _t(a) ** 2),
        lambda a: -2 * (1 - _t(a) ** 2) * (1 - 3 * _t(a) ** 2),
        lambda a: 8 * _t(a) * (1 - _t(a) ** 2) * (2 - 3 * _t(a) ** 2),
    ]),
]


@pytest.mark.parametrize("fn,derivs", [h[1:] for h in HIGHER], ids=[h[0] for h in HIGHER])
def test_third_order_derivatives(fn, derivs):
    xn = onp.array([-1.3, -0.4, 0.25, 0.9, 1.7])
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        d = fn(x)
        results = []
        for _ in range(3):
            d = autograd.grad(d, x, create_graph=True)[0]
            results.append(d)
    for order, (got, closed) in enumerate(zip(results, derivs[:3]), start=1):
        assert got.dtype == onp.float64, order
        assert_close(got, closed(xn), rtol=1e-10, atol=1e-12)
    if derivs[3] is not None:
        results[-1].backward()
        assert_close(x.grad, derivs[3](xn), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fn,derivs", [h[1:] for h in HIGHER], ids=[h[0] for h in HIGHER])
def test_second_order_via_grad_outside_record(fn, derivs):
    """create_graph=True records the gradient even when called outside record()."""
    xn = onp.array([-0.8, 0.3, 1.1])
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        y = fn(x)
    d1 = autograd.grad(y, [x], create_graph=True)[0]
    assert_close(d1, derivs[0](xn), rtol=1e-12, atol=1e-12)
    d1.backward()
    assert_close(x.grad, derivs[1](xn), rtol=1e-12, atol=1e-12)


SECOND = [
    ("log", np.log, lambda a: 1 / a, lambda a: -1 / a ** 2, (0.3, 2.0)),
    ("cos", np.cos, lambda a: -onp.sin(a), lambda a: -onp.cos(a), (-2.0, 2.0)),
    ("sqrt", np.sqrt, lambda a: 0.5 * a ** -0.5, lambda a: -0.25 * a ** -1.5, (0.3, 2.0)),
    ("square", np.square, lambda a: 2 * a, lambda a: 2 + 0 * a, (-2.0, 2.0)),
    ("sigmoid", npx.sigmoid, lambda a: _sigmoid(a) * (1 - _sigmoid(a)),
     lambda a: _sigmoid(a) * (1 - _sigmoid(a)) * (1 - 2 * _sigmoid(a)), (-3.0, 3.0)),
    ("reciprocal", lambda a: 1 / a, lambda a: -1 / a ** 2, lambda a: 2 / a ** 3, (0.3, 2.0)),
    ("x_times_sin_x", lambda a: a * np.sin(a), lambda a: onp.sin(a) + a * onp.cos(a),
     lambda a: 2 * onp.cos(a) - a * onp.sin(a), (-2.0, 2.0)),
]


@pytest.mark.parametrize("fn,d1,d2,domain", [s[1:] for s in SECOND], ids=[s[0] for s in SECOND])
def test_second_order_derivatives(fn, d1, d2, domain):
    xn = _rng(18).uniform(domain[0], domain[1], (6,))
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        y = fn(x)
        g = autograd.grad(y, x, create_graph=True)[0]
    assert_close(g, d1(xn), rtol=1e-12, atol=1e-12)
    g.backward()
    assert_close(x.grad, d2(xn), rtol=1e-10, atol=1e-12)


def test_tenth_derivative_of_sin():
    """nnabla's example: the 10th derivative of sin is -sin; one more backward gives -cos."""
    xn = _rng(19).randn(2, 2)
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        d = np.sin(x)
        for _ in range(10):
            d = autograd.grad(d, x, create_graph=True)[0]
    assert_close(d, -onp.sin(xn), rtol=1e-10, atol=1e-12)
    d.backward()
    assert_close(x.grad, -onp.cos(xn), rtol=1e-10, atol=1e-12)


_W42 = onp.linspace(-1.0, 1.0, 8).reshape(4, 2)


_REP = onp.array([0, 2, 0, 1])


# scalar functions of a (3, 4) float64 array, built from several ops each
HVP_FUNCTIONS = [
    ("matmul_cube", lambda x: np.sum(np.matmul(x, f64(_W42)) ** 3)),
    ("mean_keepdims", lambda x: np.sum(np.mean(x * x, axis=1, keepdims=True) * x)),
    ("rational", lambda x: np.sum(x / (1 + x * x))),
    ("power_both_sides", lambda x: np.sum(np.power(np.abs(x) + 1, x))),
    ("gram_tanh", lambda x: np.sum(np.tanh(x.T @ x))),
    ("dot_square", lambda x: np.sum(np.dot(x, x.T) ** 2)),
    ("reshape_sigmoid_sqrt",
     lambda x: np.sum(npx.sigmoid(x.reshape(2, 6)) * np.sqrt(x * x + 1).reshape(2, 6))),
    ("max_min", lambda x: np.sum(np.maximum(x, 0.1) ** 2 * np.minimum(x, 0.2))),
    ("broadcast_row", lambda x: np.sum((x + x[0:1]) ** 3)),
    ("logsumexp", lambda x: np.sum(np.log(np.sum(np.exp(x), axis=0)))),
    ("index_repeats", lambda x: np.sum(x[_fg_int_array(_REP)] ** 3) + np.sum(np.exp(x[x > 0]))),
    ("transpose_cos", lambda x: np.sum(np.cos(np.transpose(x)) * np.transpose(x) ** 2)),
]


def _fg_int_array(values):
    return np.array(onp.array(values, dtype=onp.int64))


def _fg_gradient(fn, xn):
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        y = fn(x)
    return to_numpy(autograd.grad(y, x)[0])


@pytest.mark.parametrize("fn", [h[1] for h in HVP_FUNCTIONS], ids=[h[0] for h in HVP_FUNCTIONS])
def test_hessian_vector_product_matches_finite_differences_of_gradient(fn):
    """Double backward: d/dx sum(grad f(x) * v) = H v, compared with central differences of
    the first-order gradient (itself checked elsewhere)."""
    rng = _rng(21)
    # stay away from the kinks of abs/maximum/minimum and from x == 0 (x > 0 mask)
    xn = rng.uniform(0.25, 0.9, (3, 4)) * rng.choice([-1.0, 1.0], (3, 4))
    xn[xn > 0] += 0.05
    vn = rng.uniform(-1, 1, (3, 4))
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        y = fn(x)
        g = autograd.grad(y, x, create_graph=True)[0]
        h = np.sum(g * f64(vn))
    assert_close(g, _fg_gradient(fn, xn), rtol=1e-12, atol=1e-12)
    fd_g = numerical_grad(lambda a: fn(f64(a)).asnumpy(), xn)[0]
    assert_close(g, fd_g, rtol=1e-6, atol=1e-6)
    h.backward()
    fd_hv = numerical_grad(lambda a: _fg_gradient(fn, a) * vn, xn, eps=1e-5)[0]
    assert_close(x.grad, fd_hv, rtol=1e-5, atol=1e-6)
