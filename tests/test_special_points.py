"""Derivatives at the special points of a rule, against closed forms (float64).

Each of these points is where a rule divides by zero or selects a branch: the first derivative
there was right and a higher or mixed one was silently wrong (issue 25).
"""
import math

import numpy as onp
import pytest

from fastgrad import np, autograd


def nth_derivative(f, x0, n):
    """The n-th derivative of the elementwise ``f`` at ``x0`` by repeated ``grad``."""
    x = np.array(x0, dtype="float64")
    x.attach_grad()
    with autograd.record():
        y = f(x)
        for _ in range(n):
            y = autograd.grad(y, x, create_graph=True)[0]
    return y.asnumpy()


def sinc_derivative_at_zero(k):
    """The Maclaurin series of sinc: sum (-1)^n (pi x)^(2n) / (2n + 1)!."""
    return 0.0 if k % 2 else (-1) ** (k // 2) * math.pi ** k / (k + 1)


@pytest.mark.parametrize("k", range(6))
def test_sinc_derivatives_at_zero_follow_its_series(k):
    got = nth_derivative(np.sinc, [0.0, -0.0], k)
    assert onp.allclose(got, sinc_derivative_at_zero(k), rtol=1e-14, atol=0)


def test_sinc_second_derivative_is_continuous_through_zero():
    near = nth_derivative(np.sinc, [1e-4, -1e-4], 2)
    at = nth_derivative(np.sinc, [0.0], 2)
    assert onp.allclose(near, at, rtol=1e-7)


@pytest.mark.parametrize("base", [2.0, 0.5, 3.0])
def test_power_hessian_at_exponent_zero_is_symmetric_and_exact(base):
    """d^2/dx dp x**p at p = 0 is 1/x; the Hessian is symmetric."""
    x = np.array(base, dtype="float64")
    p = np.array(0.0, dtype="float64")
    x.attach_grad()
    p.attach_grad()
    with autograd.record():
        gx, gp = autograd.grad(x ** p, [x, p], create_graph=True)
        hxx, hxp = autograd.grad(gx, [x, p], create_graph=True)
        hpx, hpp = autograd.grad(gp, [x, p], create_graph=True)
    assert float(hxp) == pytest.approx(1 / base, rel=1e-15)
    assert float(hpx) == pytest.approx(1 / base, rel=1e-15)
    assert float(hxx) == 0.0                   # p (p - 1) x^(p - 2) at p = 0
    assert float(hpp) == pytest.approx(math.log(base) ** 2, rel=1e-14)


def test_power_slope_at_zero_base_and_exponent_stays_zero():
    x = np.array([0.0, 0.0, 0.0], dtype="float64")
    x.attach_grad()
    p = np.array([0.0, 1.0, 2.0], dtype="float64")
    with autograd.record():
        y = np.sum(x ** p)
    y.backward()
    assert onp.array_equal(x.grad.asnumpy(), [0.0, 1.0, 0.0])


@pytest.mark.parametrize("ord", [3, 0.5, -1, 1.5, -2])
def test_vector_norm_gradient_at_the_zero_vector_is_zero(ord):
    v = np.zeros(4, dtype="float64")
    v.attach_grad()
    with autograd.record():
        n = np.linalg.norm(v, ord=ord)
    n.backward()
    assert onp.array_equal(v.grad.asnumpy(), onp.zeros(4))


@pytest.mark.parametrize("ord", [0.5, 3, 1.5])
def test_vector_norm_gradient_with_one_zero_component(ord):
    """d/dx_i (sum |x|^p)^(1/p) = r^(1-p) |x_i|^(p-1) sign(x_i); 0 at the zero component."""
    x0 = onp.array([0.0, 1.0, -2.0, 0.5])
    v = np.array(x0)
    v.attach_grad()
    with autograd.record():
        n = np.linalg.norm(v, ord=ord)
    n.backward()
    r = onp.sum(onp.abs(x0) ** ord) ** (1 / ord)
    nonzero = x0 != 0
    expected = onp.zeros(4)
    expected[nonzero] = r ** (1 - ord) * onp.abs(x0[nonzero]) ** (ord - 1) * onp.sign(
        x0[nonzero])
    assert onp.allclose(v.grad.asnumpy(), expected, rtol=1e-14, atol=0)


def test_negative_order_norm_with_a_zero_component_is_flat():
    """For ord < 0 a zero component makes the norm 0 near that point: gradient 0."""
    v = np.array([0.0, 1.0, -2.0], dtype="float64")
    v.attach_grad()
    with autograd.record():
        n = np.linalg.norm(v, ord=-1)
    n.backward()
    assert float(n) == 0.0
    assert onp.array_equal(v.grad.asnumpy(), onp.zeros(3))
