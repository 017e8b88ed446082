"""Degenerate inputs: no NaN where a finite derivative exists, and the edge cases of shapes.

Each case is checked against a closed form or central finite differences (float64).
"""
import os
import sys
import tracemalloc

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd
from fastgrad._ops._registry import REGISTRY

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _helpers import numerical_grad  # noqa: E402

np = mx.np


def grad_of(f, *values, create_graph=False):
    """``f`` recorded at float64 copies of ``values``; the gradients of its (scalar) result."""
    xs = [np.array(onp.asarray(v, dtype=onp.float64)) for v in values]
    for x in xs:
        x.attach_grad()
    with autograd.record():
        out = f(*xs)
    gs = autograd.grad(out, xs, create_graph=create_graph)
    return [g.asnumpy() for g in gs] if not create_graph else (xs, gs)


def hessian(f, x):
    """The Hessian of scalar ``f`` at ``x`` by double backward."""
    return autograd.hessian(f, np.array(onp.asarray(x, dtype=onp.float64))).asnumpy()


# ---------------------------------------------------------------- linear algebra
def test_eigh_eigenvalue_sum_at_repeated_eigenvalues_is_the_identity():
    (g,) = grad_of(lambda a: np.linalg.eigh(a)[0].sum(), 2 * onp.eye(3))
    onp.testing.assert_allclose(g, onp.eye(3), atol=1e-12)


def test_eigh_weighted_eigenvalues_at_a_repeated_pair():
    a = onp.diag([1.0, 1.0, 3.0])
    w = onp.array([0.0, 0.0, 1.0])        # the top eigenvalue: d/dA = v v^T with v = e3
    (g,) = grad_of(lambda m: (np.linalg.eigh(m)[0] * np.array(w)).sum(), a)
    onp.testing.assert_allclose(g, onp.diag([0.0, 0.0, 1.0]), atol=1e-12)


def test_eigvalsh_at_repeated_eigenvalues():
    (g,) = grad_of(lambda a: (np.linalg.eigvalsh(a) ** 2).sum(), 2 * onp.eye(3))
    onp.testing.assert_allclose(g, 4 * onp.eye(3), atol=1e-12)   # d tr(A^2) = 2 A


def test_eigh_honours_uplo():
    a = onp.array([[2.0, 5.0, -1.0], [0.5, 3.0, 7.0], [0.25, 1.0, 4.0]])
    for uplo in ("L", "U"):
        w, v = np.linalg.eigh(np.array(a), UPLO=uplo)
        ew, _ = onp.linalg.eigh(a, UPLO=uplo)
        onp.testing.assert_allclose(w.asnumpy(), ew, rtol=1e-12)
        onp.testing.assert_allclose(np.linalg.eigvalsh(np.array(a), UPLO=uplo).asnumpy(), ew,
                                    rtol=1e-12)
        weights = onp.array([0.3, -1.2, 2.0])
        (g,) = grad_of(lambda m: (np.linalg.eigvalsh(m, UPLO=uplo) * np.array(weights)).sum(),
                       a)
        (expected,) = numerical_grad(
            lambda m: (onp.linalg.eigvalsh(m, UPLO=uplo) * weights).sum(), a)
        onp.testing.assert_allclose(g, expected, atol=1e-7)
        untouched = onp.triu(g, 1) if uplo == "L" else onp.tril(g, -1)
        assert not untouched.any()      # the other triangle is never read


@pytest.mark.parametrize("ord", ["nuc", 2])
def test_matrix_norms_at_repeated_singular_values(ord):
    (g,) = grad_of(lambda a: np.linalg.norm(a, ord), 2 * onp.eye(3))
    # nuc = trace for positive definite diagonal input; ord=2 splits evenly among the ties
    expected = onp.eye(3) if ord == "nuc" else onp.eye(3) / 3
    onp.testing.assert_allclose(g, expected, atol=1e-12)


def test_svd_singular_values_of_a_rank_deficient_matrix():
    a = onp.array([[1.0, 2.0], [2.0, 4.0], [0.0, 0.0]])      # rank 1, s = (5, 0)
    (g,) = grad_of(lambda m: np.linalg.svd(m, full_matrices=False)[1][0], a)
    u, s, vt = onp.linalg.svd(a, full_matrices=False)
    onp.testing.assert_allclose(g, onp.outer(u[:, 0], vt[0]), atol=1e-12)
    assert onp.isfinite(g).all()


def test_det_at_a_singular_matrix_is_the_cofactor_matrix():
    a = onp.array([[1.0, 2.0], [2.0, 4.0]])
    (g,) = grad_of(lambda m: np.linalg.det(m), a)
    onp.testing.assert_allclose(g, [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)


def test_det_at_singular_matrices_in_a_batch_and_of_rank_n_minus_two():
    a = onp.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],
                   [[2.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 3.0]],
                   [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]])
    (g,) = grad_of(lambda m: np.linalg.det(m).sum(), a)
    (expected,) = numerical_grad(lambda m: onp.linalg.det(m).sum(), a)
    onp.testing.assert_allclose(g, expected, atol=1e-7)
    onp.testing.assert_allclose(g[2], 0, atol=1e-12)     # rank 1: every cofactor is 0


def test_det_gradient_at_a_singular_matrix_under_create_graph():
    a = onp.array([[1.0, 2.0], [2.0, 4.0]])
    xs, (g,) = grad_of(lambda m: np.linalg.det(m), a, create_graph=True)
    onp.testing.assert_allclose(g.asnumpy(), [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)


def test_pinv_cuts_off_small_singular_values_as_numpy():
    a = onp.array([[1.0, 2.0], [2.0, 4.0 + 1e-17]])
    onp.testing.assert_allclose(np.linalg.pinv(np.array(a)).asnumpy(), onp.linalg.pinv(a),
                                rtol=1e-12)
    b = onp.array([[1.0, 0.0], [0.0, 1e-4]])
    onp.testing.assert_allclose(np.linalg.pinv(np.array(b), rcond=1e-3).asnumpy(),
                                onp.linalg.pinv(b, rcond=1e-3), rtol=1e-12)
    onp.testing.assert_allclose(np.linalg.pinv(np.array(b), rtol=1e-5).asnumpy(),
                                onp.linalg.pinv(b, rtol=1e-5), rtol=1e-12)


def test_pinv_gradient_of_a_rank_deficient_matrix_along_rank_preserving_directions():
    rng = onp.random.default_rng(3)
    left, right = rng.normal(size=(4, 2)), rng.normal(size=(2, 3))
    weights = rng.normal(size=(3, 4))

    def loss_np(b, c):
        return (onp.linalg.pinv(b @ c) * weights).sum()

    def loss(b, c):
        return (np.linalg.pinv(np.matmul(b, c)) * np.array(weights)).sum()

    got = grad_of(loss, left, right)
    expected = numerical_grad(loss_np, left, right)
    for g, e in zip(got, expected):
        onp.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- elementwise and reductions
def test_power_zero_at_zero():
    (g,) = grad_of(lambda x: (x ** 0).sum(), [0.0, 1.5, -2.0])
    onp.testing.assert_array_equal(g, [0.0, 0.0, 0.0])
    (g,) = grad_of(lambda x: np.float_power(x, 0).sum(), [0.0, 1.5])
    onp.testing.assert_array_equal(g, [0.0, 0.0])
    (g,) = grad_of(lambda x: (x ** 1).sum() + (x ** 2).sum(), [0.0, 1.5])
    onp.testing.assert_array_equal(g, [1.0, 4.0])


@pytest.mark.parametrize("shape,axis", [((4,), None), ((3, 1), 1), ((2, 3), 1)])
def test_std_and_var_of_constants_have_zero_gradient(shape, axis):
    c = onp.full(shape, 1.5)
    for fn in (np.std, np.var):
        (g,) = grad_of(lambda x: fn(x, axis=axis).sum(), c)
        onp.testing.assert_array_equal(g, onp.zeros(shape))
    xs, (g,) = grad_of(lambda x: np.std(x, axis=axis).sum(), c, create_graph=True)
    onp.testing.assert_array_equal(g.asnumpy(), onp.zeros(shape))   # the same under create_graph


def test_std_away_from_constants_is_unchanged():
    x = onp.array([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]])
    (g,) = grad_of(lambda a: np.std(a, axis=1).sum(), x)
    row = x[0] - x[0].mean()
    onp.testing.assert_allclose(g[0], row / (3 * onp.std(x[0])), rtol=1e-12)
    onp.testing.assert_array_equal(g[1], 0)


@pytest.mark.parametrize("fn,first", [(np.maximum, True), (np.minimum, False),
                                      (np.fmax, True), (np.fmin, False)])
def test_binary_extrema_split_ties_evenly(fn, first):
    x = onp.array([1.0, 2.0, 3.0, onp.nan])
    y = onp.array([1.0, 3.0, 2.0, 5.0])
    gx, gy = grad_of(lambda a, b: fn(a, b).sum(), x, y)
    big = [0.5, 0.0, 1.0] if first else [0.5, 1.0, 0.0]
    onp.testing.assert_array_equal(gx[:3], big)
    onp.testing.assert_array_equal(gy[:3], 1 - onp.array(big))
    if fn in (np.fmax, np.fmin):             # the value came from y
        assert (gx[3], gy[3]) == (0.0, 1.0)


def test_max_reduction_and_maximum_agree_at_ties():
    a = onp.array([2.0, 2.0])
    (g1,) = grad_of(lambda x: np.max(x), a)
    (g2,) = grad_of(lambda x: np.maximum(x[0], x[1]), a)
    onp.testing.assert_array_equal(g1, g2)


def test_cumprod_with_zeros_matches_finite_differences_to_second_order():
    x = onp.array([0.7, 0.0, -1.2, 0.0, 0.9, 1.1])
    w = onp.array([1.1, 0.6, 1.3, 0.8, -0.4, 0.5])
    (g,) = grad_of(lambda a: (np.cumprod(a) * np.array(w)).sum(), x)
    (expected,) = numerical_grad(lambda a: (onp.cumprod(a) * w).sum(), x)
    onp.testing.assert_allclose(g, expected, atol=1e-8)
    h = hessian(lambda a: (np.cumprod(a) * np.array(w)).sum(), x)
    cols = []
    for i in range(len(x)):
        e = onp.zeros_like(x)
        e[i] = 1e-5
        up = grad_of(lambda a: (np.cumprod(a) * np.array(w)).sum(), x + e)[0]
        down = grad_of(lambda a: (np.cumprod(a) * np.array(w)).sum(), x - e)[0]
        cols.append((up - down) / 2e-5)
    onp.testing.assert_allclose(h, onp.array(cols).T, atol=1e-6)


def test_cumprod_backward_memory_is_linear():
    n = 2000
    x = onp.linspace(0.5, 1.5, n)
    x[[3, 700]] = 0.0
    a = np.array(x)
    a.attach_grad()
    with autograd.record():
        y = np.cumprod(a).sum()
    tracemalloc.start()
    try:
        y.backward()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # O(n^2) would be n*n*8 bytes = 32 MB; O(n) is a few arrays of 16 kB.
    assert peak < 1_000_000, peak
    g = a.grad.asnumpy()

    def exact(i):      # sum over j >= i of the product of x[:j+1] without x[i]
        return sum(onp.prod(onp.delete(x[:j + 1], i)) for j in range(i, 701))
    onp.testing.assert_allclose(g[:4], [exact(i) for i in range(4)], rtol=1e-10)
    assert (g[4:] == 0).all()


# ---------------------------------------------------------------- shapes
def test_indexing_with_an_empty_list():
    x = np.array([1.0, 2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = x[[]]
        loss = (y * 2).sum()
    assert y.shape == (0,) and y.dtype == x.dtype
    onp.testing.assert_array_equal(onp.asarray(x.asnumpy())[[]], y.asnumpy())
    loss.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 0.0, 0.0])


@pytest.mark.parametrize("make", [lambda x: np.split(x, 1)[0], lambda x: np.array_split(x, 1)[0],
                                  lambda x: np.stack([x])[0], lambda x: np.concatenate([x]),
                                  lambda x: np.split(x, [])[0]])
def test_one_piece_split_stack_and_concatenate_at_any_order(make):
    x0 = onp.array([1.0, 2.0, 3.0])
    x = np.array(x0)
    x.attach_grad()
    with autograd.record():
        y = make(x)
        g1 = autograd.grad((y ** 3).sum(), [x], create_graph=True)[0]     # 3 x^2
        g2 = autograd.grad(g1.sum(), [x], create_graph=True)[0]           # 6 x
        g3 = autograd.grad(g2.sum(), [x])[0]                              # 6
    onp.testing.assert_allclose(g1.asnumpy(), 3 * x0 ** 2)
    onp.testing.assert_allclose(g2.asnumpy(), 6 * x0)
    onp.testing.assert_allclose(g3.asnumpy(), [6.0, 6.0, 6.0])


def test_linspace_with_array_endpoints_is_differentiable():
    a, b = np.array(1.0, dtype="float64"), np.array([2.0, 5.0], dtype="float64")
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        y = np.linspace(a, b, 5)
        loss = (y * np.array(onp.arange(10.0).reshape(5, 2))).sum()
    onp.testing.assert_allclose(y.asnumpy(), onp.linspace(1.0, [2.0, 5.0], 5), rtol=1e-15)
    assert y.dtype == onp.float64
    loss.backward()
    frac = onp.linspace(0, 1, 5)[:, None]
    w = onp.arange(10.0).reshape(5, 2)
    onp.testing.assert_allclose(a.grad.asnumpy(), ((1 - frac) * w).sum(), rtol=1e-12)
    onp.testing.assert_allclose(b.grad.asnumpy(), (frac * w).sum(0), rtol=1e-12)


@pytest.mark.parametrize("kw", [dict(num=4, endpoint=False), dict(num=1), dict(num=3, axis=1),
                                dict(num=3, retstep=True)])
def test_linspace_with_array_endpoints_matches_numpy(kw):
    start, stop = onp.array([0.5, -1.0]), onp.array([2.0, 3.0])
    got = np.linspace(np.array(start), np.array(stop), **kw)
    expected = onp.linspace(start, stop, **kw)
    if kw.get("retstep"):
        onp.testing.assert_allclose(got[1].asnumpy(), expected[1], rtol=1e-15)
        got, expected = got[0], expected[0]
    onp.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-15)


# ---------------------------------------------------------------- where with NaN
@pytest.mark.filterwarnings("ignore:invalid value encountered in sqrt:RuntimeWarning")
def test_where_with_nan_in_the_unselected_branch():
    x = np.array([-1.0, 4.0])
    x.attach_grad()
    with autograd.record():
        y = np.where(x > 0, np.sqrt(x), 0.0).sum()
    y.backward()
    # sqrt'(-1) is NaN and 0 * NaN is NaN: the documented behaviour (docs/guide/edge_cases.rst).
    g = x.grad.asnumpy()
    assert onp.isnan(g[0]) and g[1] == 0.25
    with autograd.record():
        safe = np.where(x > 0, x, 1.0)
        y = np.where(x > 0, np.sqrt(safe), 0.0).sum()
    y.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 0.25])


# ---------------------------------------------------------------- kinks at the origin
def test_hypot_arctan2_and_norm_at_the_origin_have_gradient_zero():
    gx, gy = grad_of(lambda a, b: (np.hypot(a, b) + np.arctan2(a, b)).sum() + np.linalg.norm(a),
                     [0.0, 3.0], [0.0, 4.0])
    # at (3, 4): hypot' = (0.6, 0.8), arctan2(a, b)' = (b, -a) / 25, norm(a)' = a / 3
    onp.testing.assert_allclose(gx, [0.0, 0.6 + 4 / 25 + 1.0], rtol=1e-14)
    onp.testing.assert_allclose(gy, [0.0, 0.8 - 3 / 25], rtol=1e-14)


# ---------------------------------------------------------------- empty axes
def test_softmax_log_softmax_and_logsumexp_over_empty_axes():
    x = np.array(onp.zeros((2, 0)), dtype="float64")
    x.attach_grad()
    with autograd.record():
        s = mx.npx.softmax(x)
        ls = mx.npx.log_softmax(x)
        loss = s.sum() + ls.sum()
    assert s.shape == ls.shape == (2, 0) and s.dtype == onp.float64
    loss.backward()
    assert x.grad.shape == (2, 0)
    with onp.errstate(divide="ignore"):
        lse = REGISTRY["logsumexp"](x, 1, False)
    onp.testing.assert_array_equal(lse.asnumpy(), [-onp.inf, -onp.inf])
