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


# ---------------------------------------------------------------- rgamma at the poles of Gamma
# 1/Gamma is entire; with x = -n + t, 1/Gamma(x) = (-1)^n n! (sin(pi t)/pi) Gamma(n + 1 - t)/n!
# (Note [rgamma at the poles]), so with psi = digamma(n + 1), psi1 = polygamma(1, n + 1):
# rgamma'(-n) = (-1)^n n!, rgamma''(-n) = -2 (-1)^n n! psi,
# rgamma'''(-n) = (-1)^n n! (3 psi^2 + 3 psi1 - pi^2).
def _psi(n):
    return -0.5772156649015329 + sum(1.0 / k for k in range(1, n + 1))


def _psi1(n):
    return math.pi ** 2 / 6 - sum(1.0 / k ** 2 for k in range(1, n + 1))


def _rgamma_at_pole(n, k):
    sign_fact = (-1) ** n * math.factorial(n)
    return {0: 0.0, 1: sign_fact, 2: -2 * sign_fact * _psi(n),
            3: sign_fact * (3 * _psi(n) ** 2 + 3 * _psi1(n) - math.pi ** 2)}[k]


# Orders 4 to 6 at 0, -1, -2: mpmath.diff(mpmath.rgamma, -n, k) at 40 digits.
RGAMMA_HIGH = {(0, 4): -1.0080632408182857, (0, 5): 19.984633365874977,
               (0, 6): -30.382368879991922, (1, 4): -14.733010475667808,
               (1, 5): -25.024949569966406, (1, 6): 150.2901690752418,
               (2, 4): 59.0602706254585, (2, 5): -23.615153238406222,
               (2, 6): -450.73003557028204}


def _rgamma(x):
    from fastgrad.scipy import special
    return special.rgamma(x)


@pytest.mark.parametrize("k", range(4))
def test_rgamma_derivatives_at_the_poles_follow_the_reflection_formula(k):
    poles = [0.0, -1.0, -2.0, -3.0, -6.0]
    got = nth_derivative(_rgamma, poles, k)
    want = [_rgamma_at_pole(int(-p), k) for p in poles]
    assert onp.allclose(got, want, rtol=1e-13, atol=0), (got, want)


@pytest.mark.parametrize("k", range(4, 7))
def test_rgamma_higher_derivatives_at_the_poles(k):
    got = nth_derivative(_rgamma, [0.0, -1.0, -2.0], k)
    want = [RGAMMA_HIGH[n, k] for n in range(3)]
    assert onp.allclose(got, want, rtol=1e-12, atol=0), (got, want)


def test_rgamma_derivatives_are_continuous_through_a_pole():
    for k in (1, 2, 3):
        near = nth_derivative(_rgamma, [-2.0 + 1e-6, -2.0 - 1e-6], k)
        at = nth_derivative(_rgamma, [-2.0], k)
        assert onp.allclose(near, at, rtol=1e-4), (k, near, at)


# ---------------------------------------------------------------- gammainc at x = 0
# gammainc(m, x)' = x^(m-1) e^-x / (m-1)!, so for an integer m the k-th derivative at 0 is
# C(k-1, m-1) (-1)^(k-m) for k >= m and 0 below; gammaincc = 1 - gammainc.
def _gammainc_at_zero(m, k):
    return math.comb(k - 1, m - 1) * (-1) ** (k - m) if k >= m else 0.0


@pytest.mark.parametrize("k", range(1, 5))
@pytest.mark.parametrize("name, sign", [("gammainc", 1), ("gammaincc", -1)])
def test_regularized_incomplete_gamma_derivatives_at_zero(name, sign, k):
    from fastgrad.scipy import special
    shapes = np.array([1.0, 2.0, 3.0, 4.0], dtype="float64")
    got = nth_derivative(lambda x: getattr(special, name)(shapes, x), [0.0] * 4, k)
    want = [sign * _gammainc_at_zero(m, k) for m in (1, 2, 3, 4)]
    assert onp.array_equal(got, want), (got, want)


def test_gammainc_at_zero_with_a_fractional_shape_is_zero_then_infinite():
    # x^(a-1) with a = 2.5: the first two derivatives are 0, the third +inf (never NaN).
    from fastgrad.scipy import special
    shapes = np.array([2.5], dtype="float64")
    got = [nth_derivative(lambda x: special.gammainc(shapes, x), [0.0], k)[0]
           for k in (1, 2, 3)]
    assert got == [0.0, 0.0, math.inf], got


# ---------------------------------------------------------------- norm(ord=2) of rank-deficient
def _norm2_hessian_times(a, w):
    """The Hessian of norm(a, 2) applied to ``w``: the gradient of <grad, w>."""
    x = np.array(a, dtype="float64")
    x.attach_grad()
    with autograd.record():
        slope = autograd.grad(np.linalg.norm(x, 2), x, create_graph=True)[0]
        along = (slope * np.array(w, dtype="float64")).sum()
    along.backward()
    return x.grad.asnumpy()


@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (2, 2)])
def test_spectral_norm_hessian_of_a_rank_one_matrix(shape):
    # a = s u v^T: H[w] = ((I - u u^T) w v v^T + u u^T w (I - v v^T)) / s, every other singular
    # value 0 (the fuzzer's point for (3, 4): NaN before).
    rng = onp.random.default_rng(1)
    u, v = rng.standard_normal(shape[0]), rng.standard_normal(shape[1])
    u, v = u / onp.linalg.norm(u), v / onp.linalg.norm(v)
    a, w = 2.5 * onp.outer(u, v), rng.standard_normal(shape)
    pu, pv = onp.outer(u, u), onp.outer(v, v)
    want = ((onp.eye(shape[0]) - pu) @ w @ pv + pu @ w @ (onp.eye(shape[1]) - pv)) / 2.5
    got = _norm2_hessian_times(a, w)
    assert onp.allclose(got, want, rtol=1e-12, atol=1e-14), (got, want)
    got_fuzz_point = _norm2_hessian_times(onp.full((3, 4), 0.75), onp.ones((3, 4)))
    assert onp.all(onp.isfinite(got_fuzz_point))


def test_spectral_norm_hessian_with_a_zero_and_a_nonzero_other_singular_value():
    # a = diag(3, 1, 0) in 3 x 4: w^T H w = (3 (w01^2 + w10^2) + 2 * 1 * w01 w10) / (9 - 1)
    # + (w02^2 + w20^2 + w03^2) / 3 (the zero singular value and the extra right vector).
    a = onp.zeros((3, 4))
    a[0, 0], a[1, 1] = 3.0, 1.0
    w = onp.arange(1.0, 13.0).reshape(3, 4)
    want = (3 * (w[0, 1] ** 2 + w[1, 0] ** 2) + 2 * w[0, 1] * w[1, 0]) / 8 \
        + (w[0, 2] ** 2 + w[2, 0] ** 2 + w[0, 3] ** 2) / 3
    got = (_norm2_hessian_times(a, w) * w).sum()
    assert math.isclose(got, want, rel_tol=1e-13), (got, want)


def test_spectral_norm_second_derivative_at_a_repeated_top_value_is_an_error():
    with pytest.raises(ValueError, match="svd.*repeated singular value"):
        _norm2_hessian_times(onp.diag([2.0, 2.0, 1.0]), onp.ones((3, 3)))


def test_singular_vectors_of_a_zero_singular_value_of_a_non_square_matrix_are_an_error():
    x = np.array([[3.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype="float64")
    x.attach_grad()
    with autograd.record():
        u, s, vh = np.linalg.svd(x, full_matrices=False)
        loss = (vh[1] * np.array([1.0, 2.0, 3.0], dtype="float64")).sum()
    with pytest.raises(ValueError, match="svd.*zero singular value of a non-square"):
        loss.backward()
