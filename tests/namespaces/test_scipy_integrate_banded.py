"""``fastgrad.scipy.integrate.odeint`` (adjoint gradients), ``scipy.linalg.solve_banded`` and
``multivariate_normal.entropy`` / ``logpdf(allow_singular=True)`` (issue 25), in float64
against closed forms, SciPy and finite differences."""

import numpy as onp
import pytest

scipy = pytest.importorskip("scipy")
import scipy.linalg as sl  # noqa: E402
import scipy.stats as ss  # noqa: E402

from fastgrad import np, autograd  # noqa: E402
from fastgrad.functional import grad  # noqa: E402
from fastgrad.scipy.integrate import odeint  # noqa: E402
from fastgrad.scipy.linalg import solve_banded  # noqa: E402
from fastgrad.scipy.stats import multivariate_normal as mvn  # noqa: E402

TIGHT = dict(rtol=1e-11, atol=1e-11)


def a64(x):
    return np.array(onp.asarray(x, dtype=onp.float64))


def fd(f, x, eps=1e-6):
    x = onp.asarray(x, dtype=onp.float64)
    out = onp.zeros_like(x)
    for i in onp.ndindex(x.shape):
        e = onp.zeros_like(x)
        e[i] = eps
        out[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return out


# ---------------------------------------------------------------- odeint
def test_odeint_decay_closed_form():
    # y' = -k y: y_i = y0 exp(-k (t_i - t_0)); every gradient in closed form
    tn, y0n, k, w = onp.array([0.2, 0.5, 1.3]), onp.array([1.0, 2.0]), 0.7, \
        onp.array([[0.3, 0.1], [1.0, -2.0], [0.5, 0.7]])

    def loss(y0, t, k):
        ys = odeint(lambda y, t, k: -k * y, y0, t, args=(k,), **TIGHT)
        return (ys * a64(w)).sum()

    ys = odeint(lambda y, t, k: -k * y, a64(y0n), a64(tn), args=(a64(k),), **TIGHT)
    E = onp.exp(-k * (tn - tn[0]))
    onp.testing.assert_allclose(ys.asnumpy(), E[:, None] * y0n, rtol=1e-9)
    gy, gt, gk = grad(loss, (0, 1, 2))(a64(y0n), a64(tn), a64(k))
    onp.testing.assert_allclose(gy.asnumpy(), (w * E[:, None]).sum(0), rtol=1e-8)
    onp.testing.assert_allclose(float(gk), (w * (-(tn - tn[0]) * E)[:, None] * y0n).sum(),
                                rtol=1e-7)
    dt = -k * (w * y0n).sum(1) * E
    dt[0] = -dt[1:].sum()
    onp.testing.assert_allclose(gt.asnumpy(), dt, rtol=1e-7, atol=1e-10)


def _lotka(y, t, theta):
    a, b = y[0], y[1]
    return np.stack([theta[0] * a - theta[1] * a * b,
                     -theta[2] * b + theta[1] * a * b + 0.1 * np.sin(t)])


def test_odeint_nonlinear_against_finite_differences():
    tn = onp.array([0.0, 0.4, 1.0, 1.7])
    y0n = onp.array([1.0, 0.5])
    th = onp.array([1.1, 0.4, 0.9])
    w = onp.random.default_rng(3).normal(size=(4, 2))

    def loss(y0, t, theta):
        return (odeint(_lotka, y0, t, args=(theta,), **TIGHT) * a64(w)).sum()

    def num(y0, t, theta):
        return float(loss(a64(y0), a64(t), a64(theta)))

    gy, gt, gth = grad(loss, (0, 1, 2))(a64(y0n), a64(tn), a64(th))
    onp.testing.assert_allclose(gy.asnumpy(), fd(lambda v: num(v, tn, th), y0n), rtol=1e-5)
    onp.testing.assert_allclose(gt.asnumpy(), fd(lambda v: num(y0n, v, th), tn), rtol=1e-5,
                                atol=1e-7)
    onp.testing.assert_allclose(gth.asnumpy(), fd(lambda v: num(y0n, tn, v), th), rtol=1e-5)


def test_odeint_matrix_state_and_unused_argument():
    y0n = onp.array([[1.0, 2.0], [0.5, -1.0]])
    A = onp.array([[0.0, 1.0], [-1.0, 0.0]])

    def loss(y0, A, unused):
        ys = odeint(lambda y, t, A, u: np.matmul(A, y), y0, a64([0.0, 1.0]), args=(A, unused),
                    **TIGHT)
        return (ys[-1] ** 2).sum()

    gy, gA, gu = grad(loss, (0, 1, 2))(a64(y0n), a64(A), a64([1.0]))
    # a rotation keeps every column's norm: the loss is |y0|^2
    onp.testing.assert_allclose(gy.asnumpy(), 2 * y0n, rtol=1e-8)
    onp.testing.assert_allclose(gA.asnumpy(),
                                fd(lambda v: float(loss(a64(y0n), a64(v), a64([1.0]))), A),
                                rtol=1e-5)
    assert gu.asnumpy().tolist() == [0.0]


def test_odeint_second_order_refuses():
    y0 = a64([1.0])
    y0.attach_grad()
    with autograd.record():
        y = odeint(lambda y, t: -y, y0, a64([0.0, 1.0]))[-1].sum()
        with pytest.raises(NotImplementedError, match="odeint"):
            autograd.grad(y, [y0], create_graph=True)


# ---------------------------------------------------------------- solve_banded
@pytest.mark.parametrize("l,u,cols", [(1, 2, 2), (0, 1, 0), (2, 0, 3), (1, 1, 0)])
def test_solve_banded_value_and_gradients(l, u, cols):
    rng = onp.random.default_rng(l * 10 + u)
    n = 5
    ab = rng.normal(size=(l + u + 1, n))
    ab[u] += 5
    b = rng.normal(size=(n, cols) if cols else (n,))
    w = rng.normal(size=b.shape)
    x = solve_banded((l, u), a64(ab), a64(b))
    onp.testing.assert_allclose(x.asnumpy(), sl.solve_banded((l, u), ab, b), rtol=1e-12)

    def loss(ab, b):
        return (solve_banded((l, u), ab, b) * a64(w)).sum()

    def num(ab, b):
        return (sl.solve_banded((l, u), ab, b) * w).sum()
    gab, gb = grad(loss, (0, 1))(a64(ab), a64(b))
    num_ab = fd(lambda v: num(v, b), ab)
    # entries of ab outside the matrix are ignored: zero gradient, as finite differences say
    onp.testing.assert_allclose(gab.asnumpy(), num_ab, rtol=1e-6, atol=1e-9)
    onp.testing.assert_allclose(gb.asnumpy(), fd(lambda v: num(ab, v), b), rtol=1e-6,
                                atol=1e-9)

    # second order: the gradient in b, differentiated in ab
    def g2(ab):
        return (grad(loss, 1)(ab, a64(b)) ** 2).sum()

    def g2n(ab):
        return float((grad(loss, 1)(a64(ab), a64(b)).asnumpy() ** 2).sum())
    onp.testing.assert_allclose(grad(g2)(a64(ab)).asnumpy(), fd(g2n, ab), rtol=1e-5,
                                atol=1e-8)


def test_solve_banded_bad_shapes_name_the_function():
    with pytest.raises(ValueError, match="solve_banded"):
        solve_banded((1, 1), a64(onp.ones((2, 3))), a64(onp.ones(3)))
    with pytest.raises(ValueError, match="solve_banded"):
        solve_banded((1, 1), a64(onp.ones((3, 3))), a64(onp.ones(4)))


# ---------------------------------------------------------------- multivariate normal
def _spd(d, seed):
    A = onp.random.default_rng(seed).normal(size=(d, d))
    return A @ A.T + onp.eye(d)


def test_entropy_matches_scipy_and_closed_form_gradient():
    C = _spd(3, 0)
    assert abs(float(mvn.entropy(a64(onp.zeros(3)), a64(C)))
               - ss.multivariate_normal.entropy(onp.zeros(3), C)) < 1e-12
    g = grad(lambda c: mvn.entropy(None, c))(a64(C))
    onp.testing.assert_allclose(g.asnumpy(), onp.linalg.inv(C) / 2, rtol=1e-10)
    assert abs(float(mvn.entropy(None, 2.0)) - ss.multivariate_normal.entropy(None, 2.0)) \
        < 1e-12


def _singular(seed):
    rng = onp.random.default_rng(seed)
    B = rng.normal(size=(3, 2))
    return B, B @ B.T


def test_singular_logpdf_and_entropy_match_scipy():
    B, S = _singular(1)
    rng = onp.random.default_rng(2)
    mu = rng.normal(size=3)
    X = onp.vstack([rng.normal(size=(4, 2)) @ B.T + mu, rng.normal(size=(1, 3))])
    ours = mvn.logpdf(a64(X), a64(mu), a64(S), allow_singular=True).asnumpy()
    theirs = ss.multivariate_normal.logpdf(X, mu, S, allow_singular=True)
    assert onp.isneginf(ours[-1]) and onp.isneginf(theirs[-1])
    onp.testing.assert_allclose(ours[:-1], theirs[:-1], rtol=1e-10)
    assert abs(float(mvn.entropy(None, a64(S))) - ss.multivariate_normal.entropy(None, S)) \
        < 1e-10
    # a non-singular covariance: both paths agree
    C = _spd(3, 5)
    onp.testing.assert_allclose(
        mvn.logpdf(a64(X), a64(mu), a64(C), allow_singular=True).asnumpy(),
        mvn.logpdf(a64(X), a64(mu), a64(C)).asnumpy(), rtol=1e-10)


def test_singular_gradients_along_same_rank_covariances():
    # the gradient is pinv-shaped: checked along C(s) = (B + s dB)(B + s dB)^T (rank kept)
    # and along x, mean moving on the support, against finite differences of SciPy
    B, S = _singular(3)
    rng = onp.random.default_rng(4)
    mu = rng.normal(size=3)
    x = rng.normal(size=2) @ B.T + mu
    dB = rng.normal(size=B.shape)

    gc = grad(lambda c: mvn.logpdf(a64(x), a64(mu), c, allow_singular=True))(a64(S)).asnumpy()
    dS = dB @ B.T + B @ dB.T

    def along(s):
        Bs = B + s * dB
        return ss.multivariate_normal.logpdf(x, mu, Bs @ Bs.T, allow_singular=True)
    eps = 1e-6
    assert abs((gc * dS).sum() - (along(eps) - along(-eps)) / (2 * eps)) < 1e-6
    ge = grad(lambda c: mvn.entropy(None, c))(a64(S)).asnumpy()
    onp.testing.assert_allclose(ge, onp.linalg.pinv(S) / 2, rtol=1e-8, atol=1e-12)

    gx, gm = grad(lambda x, m: mvn.logpdf(x, m, a64(S), allow_singular=True), (0, 1))(
        a64(x), a64(mu))
    P = onp.linalg.pinv(S)
    onp.testing.assert_allclose(gx.asnumpy(), -P @ (x - mu), rtol=1e-8)
    onp.testing.assert_allclose(gm.asnumpy(), P @ (x - mu), rtol=1e-8)
