"""Edge cases and errors of the NumPy functions added for issue 18 (their values and
derivatives are checked by the registry-driven op tests through ``op_specs.py``)."""
import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import np


def test_svd_full_matrices_errors_only_when_the_extra_vectors_are_used():
    a = np.array(onp.random.default_rng(0).normal(size=(4, 2)))
    a.attach_grad()
    with mx.autograd.record():
        u, s, vh = np.linalg.svd(a)
        assert u.shape == (4, 4)
        onp.testing.assert_allclose((u.asnumpy().T @ u.asnumpy()), onp.eye(4), atol=1e-12)
        loss = (u[:, 2:] ** 2).sum() * s.sum()
    with pytest.raises(ValueError, match="extra singular vectors"):
        loss.backward()


def test_eig_rejects_a_loss_that_depends_on_eigenvector_phase():
    x = np.array(onp.array([[2.0, 1.0], [0.5, 3.0]]))
    x.attach_grad()
    with mx.autograd.record():
        w, v = np.linalg.eig(x)
        loss = np.imag(v).sum() + np.real(v).sum()
    with pytest.raises(ValueError, match="phase of the eigenvectors"):
        loss.backward()


def test_eig_of_complex_input_matches_finite_differences_on_both_parts():
    rng = onp.random.default_rng(1)
    z = rng.normal(size=(3, 3)) + 1j * rng.normal(size=(3, 3))
    wts = rng.uniform(0.5, 1.5, (3,))

    def loss_np(m):
        return float(onp.sum(wts * onp.abs(onp.linalg.eigvals(m)) ** 2))
    x = np.array(z)
    x.attach_grad()
    with mx.autograd.record():
        w = np.linalg.eigvals(x)
        loss = ((np.real(w) ** 2 + np.imag(w) ** 2) * np.array(wts)).sum()
    loss.backward()
    num = onp.zeros_like(z)
    for idx in onp.ndindex(3, 3):
        for step in (1, 1j):
            up, down = z.copy(), z.copy()
            up[idx] += 1e-6 * step
            down[idx] -= 1e-6 * step
            num[idx] += step * (loss_np(up) - loss_np(down)) / 2e-6
    onp.testing.assert_allclose(x.grad.asnumpy(), num, rtol=1e-6, atol=1e-8)


def test_split_of_an_empty_axis_and_array_split_into_more_parts_than_elements():
    assert [p.shape for p in np.split(np.zeros((0, 2)), 3)] == [(0, 2)] * 3
    parts = np.array_split(np.arange(3.0), 5)
    assert [p.shape for p in parts] == [p.shape for p in onp.array_split(onp.arange(3.0), 5)]


def test_errors_name_the_function_and_argument():
    with pytest.raises(ValueError, match="gradient: axis 0 has 1 points"):
        np.gradient(np.array([1.0]))
    with pytest.raises(ValueError, match="edge_order"):
        np.gradient(np.array([1.0, 2.0, 3.0]), edge_order=3)
    with pytest.raises(ValueError, match="meshgrid: indexing"):
        np.meshgrid(np.array([1.0]), indexing="xz")
    with pytest.raises(ValueError, match="dsplit: only works on arrays of 3"):
        np.dsplit(np.ones((2, 2)), 2)
    with pytest.raises(TypeError, match="select: condlist entries must be boolean"):
        np.select([onp.array([1, 0])], [np.array([1.0, 2.0])])
    with pytest.raises(NotImplementedError, match="lstsq: a has rank 1"):
        np.linalg.lstsq(np.ones((3, 2)), np.ones(3))
    with pytest.raises(ValueError, match="eig: a must be a square"):
        np.linalg.eig(np.ones((2, 3)))
    with pytest.raises(TypeError, match="einsum: axis labels"):
        np.einsum(np.ones(2), ["i"])


def test_argpartition_and_numpy_dispatch():
    a = np.array([3.0, 1.0, 2.0, 0.5])
    idx = onp.argpartition(a, 1)
    assert isinstance(idx, mx.np.ndarray)
    assert set(idx.asnumpy()[:2].tolist()) == {1, 3}
    g = onp.gradient(a)
    assert isinstance(g, mx.np.ndarray)
    w = onp.linalg.eigvals(np.array([[1.0, 0.0], [0.0, 2.0]]))
    onp.testing.assert_allclose(onp.sort(w.asnumpy().real), [1.0, 2.0])


def test_index_builders_make_ranges_and_reject_directives():
    onp.testing.assert_allclose(np.r_[0:1:5j].asnumpy(), onp.r_[0:1:5j])
    onp.testing.assert_array_equal(np.r_[1:7:2].asnumpy(), onp.r_[1:7:2])
    with pytest.raises(NotImplementedError, match="r_: string directives"):
        np.r_["0,2", np.ones(2)]


def test_eig_second_order_matches_the_closed_form():
    # With real eigenvalues, sum(w**2) = trace(A @ A): its gradient is 2 A^T and the
    # derivative of <gradient, V> is 2 V^T.
    a = onp.array([[2.0, 1.0], [0.5, 3.0]])
    v = onp.array([[0.3, -1.2], [0.7, 0.4]])
    x = np.array(a)
    x.attach_grad()
    with mx.autograd.record():
        w, _ = np.linalg.eig(x)
        loss = (np.real(w) ** 2).sum()
        g = mx.autograd.grad(loss, [x], create_graph=True)[0]
        inner = (g * np.array(v)).sum()
    onp.testing.assert_allclose(g.asnumpy(), 2 * a.T, rtol=1e-12, atol=1e-12)
    inner.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), 2 * v.T, rtol=1e-10, atol=1e-10)
    assert mx.list_ops()["eig"]["order"] == "any"
