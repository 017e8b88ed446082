"""``real``, ``imag``, ``angle`` and ``real_if_close`` on complex inputs: values against NumPy
and gradients against finite differences on both parts (PyTorch's convention)."""
import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import np

Z = onp.array([0.5 + 1.2j, -1.0 + 0.3j, 0.7 - 0.9j, -0.4 - 1.1j])


def _grad(f, z):
    x = np.array(z, dtype=z.dtype)
    x.attach_grad()
    with mx.autograd.record():
        loss = f(x)
    loss.backward()
    return x.grad.asnumpy()


def _numeric(f, z, eps=1e-6):
    g = onp.zeros_like(z)
    for i in range(z.size):
        for step in (1, 1j):
            up, down = z.copy(), z.copy()
            up[i] += eps * step
            down[i] -= eps * step
            g[i] += step * (f(up) - f(down)) / (2 * eps)
    return g


@pytest.mark.parametrize("name", ["real", "imag", "angle"])
def test_part_functions_match_numpy_and_finite_differences(name):
    w = onp.array([0.5, 1.5, -1.0, 2.0])
    fg, fn = getattr(np, name), getattr(onp, name)
    onp.testing.assert_allclose(fg(np.array(Z)).asnumpy(), fn(Z), rtol=1e-12)
    got = _grad(lambda x: (fg(x) * fg(x) * np.array(w)).sum(), Z)
    want = _numeric(lambda z: float(onp.sum(fn(z) ** 2 * w)), Z)
    onp.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


def test_angle_in_degrees_and_of_real_input():
    onp.testing.assert_allclose(np.angle(np.array(Z), deg=True).asnumpy(),
                                onp.angle(Z, deg=True), rtol=1e-12)
    x = np.array([-2.0, 0.0, 3.0])
    x.attach_grad()
    with mx.autograd.record():
        a = np.angle(x)
        assert a.node is None           # piecewise constant: no history
    onp.testing.assert_allclose(a.asnumpy(), onp.angle([-2.0, 0.0, 3.0]))


def test_imag_of_real_input_is_a_constant_zero():
    x = np.array([1.0, 2.0])
    x.attach_grad()
    with mx.autograd.record():
        y = np.imag(x)
    assert y.node is None and onp.all(y.asnumpy() == 0)


def test_real_if_close_drops_tiny_imaginary_parts_only():
    near = np.array(onp.array([1.0 + 1e-20j, 2.0 + 0j]))
    out = np.real_if_close(near)
    assert out.dtype == onp.float64
    onp.testing.assert_array_equal(out.asnumpy(), [1.0, 2.0])
    far = np.array(Z)
    assert np.real_if_close(far).dtype == onp.complex128
    assert onp.real_if_close(far).dtype == onp.complex128     # dispatches to fastgrad
    z = np.array(onp.array([1.5 + 0j, -2.0 + 0j]))
    z.attach_grad()
    with mx.autograd.record():
        loss = (np.real_if_close(z) ** 2).sum()
    loss.backward()
    onp.testing.assert_allclose(z.grad.asnumpy(), [3.0, -4.0])


def test_numpy_part_functions_dispatch():
    x = np.array(Z)
    assert isinstance(onp.imag(x), mx.np.ndarray)
    assert isinstance(onp.angle(x), mx.np.ndarray)
