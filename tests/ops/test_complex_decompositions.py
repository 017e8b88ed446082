"""Closed forms for the complex rules of the decompositions, the orderings and erf/arccosh
(issue 25): values that ``test_ops_complex.py``'s finite differences check only as a whole.

The convention is PyTorch's (``docs/guide/complex.rst``): for a real loss ``L`` of
``z = a + ib`` the gradient is ``dL/da + i dL/db``; for ``L = Re(sum(conj(w) f(z)))`` with a
holomorphic ``f`` it is ``w * conj(f'(z))``.
"""
import math

import numpy as onp
import pytest
import scipy.special

import fastgrad
import fastgrad.scipy.special  # noqa: F401
from fastgrad import autograd, np
from fastgrad._ops import _rules


def grad_of(fn, value, create_graph=False):
    x = np.array(onp.asarray(value))
    x.attach_grad()
    with autograd.record():
        (g,) = autograd.grad(fn(x), [x], create_graph=create_graph)
    return x, g


def numeric_grad(fn, value, eps=1e-6):
    """``dL/da + i dL/db`` by central differences, for a real NumPy function ``fn``."""
    value = onp.array(value, dtype=complex)
    out = onp.zeros(value.shape, dtype=complex)
    for idx in onp.ndindex(value.shape):
        for d in (1, 1j):
            up, down = value.copy(), value.copy()
            up[idx] += eps * d
            down[idx] -= eps * d
            out[idx] += d * (fn(up) - fn(down)) / (2 * eps)
    return out


def cofactor_matrix(a):
    n = a.shape[-1]
    return onp.array([[(-1) ** (i + j) * onp.linalg.det(onp.delete(onp.delete(a, i, 0), j, 1))
                       for j in range(n)] for i in range(n)])


# ---------------------------------------------------------------- det at singular matrices
SINGULAR = onp.array([[1 + 1j, 2 - 1j, 0.5j],
                      [2 + 2j, 4 - 2j, 1j],           # twice the first row
                      [1.0, 0.3j, 2.0]])
RANK_ONE = onp.outer([1 + 1j, 2.0, -1j], [0.5, 1 - 1j, 2j])


@pytest.mark.parametrize("create_graph", [False, True])
def test_det_gradient_at_a_singular_complex_matrix_is_the_conjugate_cofactor_matrix(create_graph):
    """d det / dA = adj(A)^T (the cofactors), conjugated by the convention: for
    ``L = Re(conj(w) det(A))`` the gradient is ``w * conj(cofactors)``; under create_graph it
    used to raise an error naming svd."""
    w = 0.7 - 0.4j
    _, g = grad_of(lambda m: np.real(np.linalg.det(m) * onp.conj(w)), SINGULAR, create_graph)
    assert abs(onp.linalg.det(SINGULAR)) < 1e-12
    onp.testing.assert_allclose(g.asnumpy(), w * onp.conj(cofactor_matrix(SINGULAR)), atol=1e-12)


@pytest.mark.parametrize("a", [SINGULAR, RANK_ONE], ids=["rank2", "rank1"])
def test_det_second_derivative_at_a_singular_complex_matrix(a):
    """The Hessian-vector product of Re(det) at rank n-1 and n-2: the cofactors' own
    derivative, through det of the minors (Note [det at singular matrices])."""
    v = onp.array([[0.3 - 0.2j, 1.0, 0.5j], [-0.4, 0.2 + 0.1j, 1j], [0.1, -1.0, 0.25]])
    x = np.array(a)
    x.attach_grad()
    with autograd.record():
        (g,) = autograd.grad(np.real(np.linalg.det(x)), [x], create_graph=True)
        hv = np.real(g * np.array(onp.conj(v))).sum()
    hv.backward()
    expected = numeric_grad(
        lambda m: onp.real(onp.conj(cofactor_matrix(m)) * onp.conj(v)).sum(), a)
    onp.testing.assert_allclose(x.grad.asnumpy(), expected, atol=1e-7)


def test_det_third_derivative_at_a_rank_one_real_matrix():
    """At rank n-2 the minors are singular too: the third derivative recurses once more."""
    a = onp.outer([1.0, 2.0, -1.0], [0.5, 1.0, 2.0])
    v = onp.arange(9.0).reshape(3, 3) / 9
    x = np.array(a)
    x.attach_grad()
    with autograd.record():
        (g,) = autograd.grad(np.linalg.det(x), [x], create_graph=True)
        (h,) = autograd.grad((g * np.array(v)).sum(), [x], create_graph=True)
        t = (h * np.array(v)).sum()
    t.backward()
    # checked against central differences of the Hessian-vector product itself
    def hv(m):
        mm = np.array(m)
        mm.attach_grad()
        with autograd.record():
            (gg,) = autograd.grad(np.linalg.det(mm), [mm], create_graph=True)
            s = (gg * np.array(v)).sum()
        s.backward()
        return (mm.grad.asnumpy() * v).sum()
    expected = numeric_grad(lambda m: hv(onp.real(m)), a).real
    onp.testing.assert_allclose(x.grad.asnumpy(), expected, atol=1e-6)


def test_det_second_derivative_at_a_large_singular_matrix_names_det():
    a = onp.zeros((50, 50), dtype=complex)
    x = np.array(a)
    x.attach_grad()
    with autograd.record():
        d = np.linalg.det(x)
        with pytest.raises(NotImplementedError, match="fastgrad.linalg.det"):
            autograd.grad(np.real(d), [x], create_graph=True)


def test_det_second_derivative_at_a_large_singular_real_matrix_takes_the_svd_route():
    rng = onp.random.default_rng(1)
    a = rng.normal(size=(50, 50))
    a[-1] = a[0] + a[1]                                           # rank 49, distinct s
    _, g0 = grad_of(lambda m: np.linalg.det(m), a)
    x, g = grad_of(lambda m: np.linalg.det(m), a, create_graph=True)
    onp.testing.assert_allclose(g.asnumpy(), g0.asnumpy(), rtol=1e-8,
                                atol=1e-8 * abs(g0.asnumpy()).max())
    assert g.node is not None                                     # recorded: differentiable


def test_cofactors_by_minors_equal_the_svd_route():
    rng = onp.random.default_rng(0)
    a = rng.normal(size=(2, 4, 4)) + 1j * rng.normal(size=(2, 4, 4))
    a[1, 3] = a[1, 0] - 2j * a[1, 2]                              # singular
    by_minors = _rules.cofactors_by_minors(np.array(a)).asnumpy()
    onp.testing.assert_allclose(by_minors, _rules.cofactors(a), atol=1e-10)
    onp.testing.assert_allclose(by_minors[0], cofactor_matrix(a[0]), atol=1e-10)


# ---------------------------------------------------------------- decompositions
def _complex_matrix(shape, seed=0):
    rng = onp.random.default_rng(seed)
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
def test_svd_reconstruction_has_the_identity_gradient(shape):
    """``U diag(s) V^H`` is ``A``: the gradient of ``Re(sum(conj(W) A))`` is ``W``, which
    needs the term ``i Im(diag(U^H gU)) / s`` of svd's rule (phase-free only jointly)."""
    a = _complex_matrix(shape)
    w = _complex_matrix(shape, 1)

    def loss(m):
        u, s, vh = np.linalg.svd(m, full_matrices=False)
        return np.real((np.matmul(u * s[None, :], vh) * np.array(onp.conj(w)))).sum()
    _, g = grad_of(loss, a)
    onp.testing.assert_allclose(g.asnumpy(), w, atol=1e-10)


def test_svd_vectors_at_an_exactly_zero_complex_singular_value_are_an_error():
    """A zero row and column: s[2] is exactly 0. The term ``i Im(diag(U^H gU)) / s`` is then
    0 / 0 and its limit is not in the gradients at the point (for ``U diag(s) V^H`` it is
    ``i Im(u_k^H W v_k)``): an error naming svd, not NaN or a wrong value. Just off zero, the
    reconstruction's gradient is ``W`` again; the singular values alone are fine."""
    a = onp.array([[1 + 1j, 2, 0], [0.5j, 1 - 1j, 0], [0, 0, 0]])
    w = _complex_matrix((3, 3), 2)

    def loss(m):
        u, s, vh = np.linalg.svd(m)
        return np.real((np.matmul(u * s[None, :], vh) * np.array(onp.conj(w)))).sum()
    with pytest.raises(ValueError, match="svd.*zero singular value"):
        grad_of(loss, a)
    near = a.copy()
    near[2, 2] = 1e-30
    _, g = grad_of(loss, near)
    onp.testing.assert_allclose(g.asnumpy(), w, atol=1e-12)
    _, g = grad_of(lambda m: np.linalg.svd(m)[1][0], a)          # the largest alone
    u, _, vh = onp.linalg.svd(a)
    onp.testing.assert_allclose(g.asnumpy(), onp.outer(u[:, 0], vh[0]), atol=1e-12)


def test_svd_and_eigh_refuse_a_loss_that_depends_on_the_phase_of_the_vectors():
    a = _complex_matrix((3, 3))
    with pytest.raises(ValueError, match="svd.*phase"):
        grad_of(lambda m: np.real(np.linalg.svd(m)[0][0, 0]), a)
    with pytest.raises(ValueError, match="eigh.*phase"):
        grad_of(lambda m: np.imag(np.linalg.eigh(m)[1][0, 0]), a)
    # |v| is phase-free: no error, and the gradient matches finite differences
    _, g = grad_of(lambda m: np.abs(np.linalg.eigh(m)[1][0, 0]), a)
    expected = numeric_grad(lambda m: abs(onp.linalg.eigh(m)[1][0, 0]), a)
    onp.testing.assert_allclose(g.asnumpy(), expected, atol=1e-7)


def test_eigh_of_a_complex_matrix_reads_one_triangle_as_hermitian_like_numpy():
    a = _complex_matrix((3, 3))
    for uplo in ("L", "U"):
        w, v = np.linalg.eigh(np.array(a), UPLO=uplo)
        ew, ev = onp.linalg.eigh(a, UPLO=uplo)
        onp.testing.assert_allclose(w.asnumpy(), ew, rtol=1e-12)
        onp.testing.assert_allclose(onp.abs(v.asnumpy()), onp.abs(ev), atol=1e-12)
        weights = [0.3, -1.0, 2.0]
        _, g = grad_of(lambda m: (np.linalg.eigvalsh(m, UPLO=uplo) * np.array(weights)).sum(), a)
        expected = numeric_grad(lambda m: (onp.linalg.eigvalsh(m, UPLO=uplo) * weights).sum(), a)
        onp.testing.assert_allclose(g.asnumpy(), expected, atol=1e-7)
        untouched = onp.triu(g.asnumpy(), 1) if uplo == "L" else onp.tril(g.asnumpy(), -1)
        assert not untouched.any()
        # LAPACK ignores the imaginary part of the diagonal: no gradient there
        onp.testing.assert_allclose(onp.imag(onp.diagonal(g.asnumpy())), 0, atol=1e-15)


def test_eigh_of_complex_input_at_repeated_eigenvalues_as_for_real():
    a = onp.diag([2.0, 2.0, 5.0]).astype(complex)
    _, g = grad_of(lambda m: np.linalg.eigvalsh(m).sum(), a)          # the trace
    onp.testing.assert_allclose(g.asnumpy(), onp.eye(3), atol=1e-12)
    with pytest.raises(ValueError, match="repeated eigenvalue"):
        grad_of(lambda m: np.abs(np.linalg.eigh(m)[1][0, 0]), a)


def test_cholesky_upper_of_complex_input_is_the_conjugate_transpose():
    b = _complex_matrix((3, 3))
    a = b @ b.conj().T + 3 * onp.eye(3)
    up = np.linalg.cholesky(np.array(a), upper=True).asnumpy()
    onp.testing.assert_allclose(up, onp.linalg.cholesky(a, upper=True), atol=1e-12)
    onp.testing.assert_allclose(up.conj().T @ up, a, atol=1e-12)


def test_slogdet_of_complex_input_differentiates_its_sign():
    """``sign = det / |det|`` varies with a complex matrix: ``d sign = i sign Im(tr(A^-1 dA))``
    and ``d log|det| = Re(tr(A^-1 dA))``, so ``log|det|``'s gradient is ``inv(A)^H``."""
    a = _complex_matrix((3, 3)) + 2 * onp.eye(3)
    _, g = grad_of(lambda m: np.linalg.slogdet(m)[1], a)
    onp.testing.assert_allclose(g.asnumpy(), onp.linalg.inv(a).conj().T, atol=1e-12)
    w = 0.4 + 0.9j
    _, g = grad_of(lambda m: np.real(np.linalg.slogdet(m)[0] * onp.conj(w)), a)
    sign = onp.linalg.slogdet(a)[0]
    expected = 1j * onp.imag(w * onp.conj(sign)) * onp.linalg.inv(a).conj().T
    onp.testing.assert_allclose(g.asnumpy(), expected, atol=1e-12)


# ---------------------------------------------------------------- orderings
def test_complex_max_min_sort_clip_select_in_numpys_lexicographic_order():
    z = onp.array([1 + 2j, 1 + 1j, 0.5 - 3j, -2 + 5j])
    # max: 1+2j (a tie in the real part, broken by the imaginary part); min: -2+5j
    _, g = grad_of(lambda x: np.real(np.max(x)) + np.imag(np.min(x)), z)
    onp.testing.assert_array_equal(g.asnumpy(), [1, 0, 0, 1j])
    # sort: [-2+5j, 0.5-3j, 1+1j, 1+2j]; the holomorphic weight (1 - 2i) goes back conjugated
    _, g = grad_of(lambda x: np.real(np.sort(x)[1] * (1 - 2j)), z)
    onp.testing.assert_array_equal(g.asnumpy(), [0, 0, 1 + 2j, 0])
    # clip to [-1, 1]: only 0.5-3j lies inside (1+1j > 1 compares its imaginary part)
    _, g = grad_of(lambda x: np.imag(np.clip(x, -1.0, 1.0)).sum(), z)
    onp.testing.assert_array_equal(g.asnumpy(), [0, 0, 1j, 0])


# ---------------------------------------------------------------- erf, erfc, arccosh
Z = onp.array([0.3 + 0.8j, -1.2 + 0.4j, 0.9 - 1.1j])


@pytest.mark.parametrize("name,sign", [("erf", 1), ("erfc", -1)])
def test_erf_and_erfc_of_complex_values_are_holomorphic(name, sign):
    """erf is entire: ``d erf / dz = 2/sqrt(pi) exp(-z^2)``, conjugated by the convention."""
    fn = fastgrad.npx.erf if name == "erf" else fastgrad.scipy.special.erfc
    w = onp.array([1.0, 0.5 - 0.5j, 2j])
    x, g = grad_of(lambda x: np.real(fn(x) * np.array(onp.conj(w))).sum(), Z)
    onp.testing.assert_allclose(fn(np.array(Z)).asnumpy(), getattr(scipy.special, name)(Z),
                                rtol=1e-13)
    expected = w * onp.conj(sign * 2 / math.sqrt(math.pi) * onp.exp(-Z * Z))
    onp.testing.assert_allclose(g.asnumpy(), expected, rtol=1e-12)


def test_arccosh_of_complex_values_follows_numpys_branch():
    """``arccosh'(z) = 1 / (sqrt(z - 1) sqrt(z + 1))``, which is ``-1 / sqrt(z^2 - 1)`` where
    ``Re z < 0``: the real rule's formula would give the wrong sign there."""
    z = onp.array([-2.0 + 0.5j, 0.3 - 0.7j, 2.5 + 0.1j])
    _, g = grad_of(lambda x: np.real(np.arccosh(x)).sum(), z)
    expected = onp.conj(1 / (onp.sqrt(z - 1) * onp.sqrt(z + 1)))
    onp.testing.assert_allclose(g.asnumpy(), expected, rtol=1e-12)
    onp.testing.assert_allclose(g.asnumpy(),
                                numeric_grad(lambda m: onp.real(onp.arccosh(m)).sum(), z),
                                atol=1e-8)
    assert abs(expected[0] - onp.conj(1 / onp.sqrt(z[0] ** 2 - 1))) > 0.1
