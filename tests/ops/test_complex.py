"""Complex gradients: PyTorch's convention, value by value.

Regression tests of issue 12 (the imaginary part of ``real(z * conj(z))`` was lost, complex
``abs`` had no second derivative) and a comparison with gradients PyTorch computed
(``tests/fixtures/complex_torch.npz``, made by ``tests/fixtures/gen_complex_torch.py``).
Every op's complex rule is checked against finite differences in ``test_ops_complex.py``.
"""
import os

import numpy as onp
import pytest

import fastgrad as mx

from _helpers import FIXTURES

np = mx.np
FIXTURE = os.path.join(FIXTURES, "complex_torch.npz")

LOSSES = {
 "sin": lambda z, w, A: np.real(np.sin(z)).sum() + np.imag(np.sin(z)).sum(),
 "exp_log": lambda z, w, A: np.real(np.exp(z) * np.log(w)).sum(),
 "mul_conj": lambda z, w, A: np.imag(z * np.conj(w)).sum(),
 "abs": lambda z, w, A: np.abs(z).sum(),
 "abs2": lambda z, w, A: (np.abs(z) ** 3).sum(),
 "div_pow": lambda z, w, A: np.real((z / w) ** 2.5).sum(),
 "sqrt_tanh": lambda z, w, A: np.abs(np.sqrt(z) * np.tanh(w)).sum(),
 "arcsin": lambda z, w, A: np.imag(np.arcsin(z * 0.5)).sum(),
 "var_std": lambda z, w, A: np.var(z) + np.std(w),
 "norm": lambda z, w, A: np.linalg.norm(z) + np.linalg.norm(w, 1),
 "matmul": lambda z, w, A: np.abs(A @ z).sum() + np.real(z @ A @ w),
 "inv": lambda z, w, A: np.real(np.linalg.inv(A) @ z).sum(),
 "det": lambda z, w, A: np.imag(np.linalg.det(A)) + np.abs(np.linalg.det(A)),
 "solve": lambda z, w, A: np.abs(np.linalg.solve(A, w)).sum(),
 "prod_cumsum": lambda z, w, A: np.real(np.prod(z)) + np.imag(np.cumsum(w, axis=0)).sum(),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_complex_gradients_equal_pytorchs(name):
    data = onp.load(FIXTURE)
    xs = [np.array(data[k]) for k in "zwA"]
    for x in xs:
        x.attach_grad()
    with mx.autograd.record():
        loss = LOSSES[name](*xs)
    loss.backward()
    for k, x in zip("zwA", xs):
        onp.testing.assert_allclose(x.grad.asnumpy(), data[name + "/" + k], rtol=1e-12,
                                    atol=1e-12, err_msg="%s d/d%s" % (name, k))


def test_real_of_z_times_its_conjugate():
    z = np.array([0.2 + 0.7j, -0.5 + 0.3j])
    z.attach_grad()
    with mx.autograd.record():
        loss = np.real(z * np.conj(z)).sum()          # a^2 + b^2
    loss.backward()
    onp.testing.assert_allclose(z.grad.asnumpy(), [0.4 + 1.4j, -1.0 + 0.6j], rtol=1e-15)


def test_gradient_descent_on_a_complex_variable():
    target = 3 + 4j
    z = np.array([0j])
    z.attach_grad()
    for _ in range(60):
        with mx.autograd.record():
            loss = (np.abs(z - target) ** 2).sum()
        loss.backward()
        z -= 0.25 * z.grad
    onp.testing.assert_allclose(z.asnumpy(), [target], rtol=1e-12)


def test_complex_abs_has_a_second_derivative():
    z0 = onp.array([0.2 + 0.7j, -0.5 + 0.3j])
    z = np.array(z0)
    z.attach_grad()
    with mx.autograd.record():
        g = mx.autograd.grad(np.abs(z).sum(), [z], create_graph=True)[0]     # z / |z|
        h = np.real(g).sum()
    h.backward()
    onp.testing.assert_allclose(g.asnumpy(), z0 / abs(z0), rtol=1e-15)
    # d/da (a / r) + i d/db (a / r) = (b^2 - i a b) / r^3
    a, b, r = z0.real, z0.imag, abs(z0)
    onp.testing.assert_allclose(z.grad.asnumpy(), (b * b - 1j * a * b) / r ** 3, rtol=1e-14)


def test_abs_at_complex_zero_has_gradient_zero():
    z = np.array([0j, 3 + 4j])
    z.attach_grad()
    with mx.autograd.record():
        loss = np.abs(z).sum()
    loss.backward()
    onp.testing.assert_allclose(z.grad.asnumpy(), [0, 0.6 + 0.8j])


def test_real_input_meeting_complex_values_keeps_the_real_part():
    x = np.array([2.0, -1.0], dtype="float64")
    x.attach_grad()
    with mx.autograd.record():
        loss = np.imag(np.exp(1j * x)).sum()            # sin(x)
    loss.backward()
    assert x.grad.dtype == onp.float64
    onp.testing.assert_allclose(x.grad.asnumpy(), onp.cos([2.0, -1.0]), rtol=1e-15)


def test_casts_between_real_and_complex():
    x = np.array([1.5, -0.5], dtype="float64")
    x.attach_grad()
    with mx.autograd.record():
        z = x.astype("complex128") * (1 + 2j)           # real part x, imaginary part 2x
        loss = (np.real(z) + 3 * np.imag(z)).sum()
    loss.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), [7.0, 7.0])


def test_real_and_imag_of_a_real_array():
    x = np.array([1.0, 2.0])
    x.attach_grad()
    with mx.autograd.record():
        loss = (np.real(x) * 3 + np.imag(x)).sum()
    assert np.imag(x).asnumpy().tolist() == [0.0, 0.0]
    loss.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), [3.0, 3.0])


def test_complex_head_gradient():
    z = np.array([1 + 1j, 2 - 1j])
    z.attach_grad()
    with mx.autograd.record():
        y = z * z
    y.backward(np.array([1j, 1.0 + 0j]))
    # grad = g * conj(2 z)
    onp.testing.assert_allclose(z.grad.asnumpy(), onp.array([1j, 1.0]) * onp.conj(
        2 * onp.array([1 + 1j, 2 - 1j])), rtol=1e-15)


@pytest.mark.parametrize("call", [lambda z: np.maximum(z, z), lambda z: np.fmax(z, z),
                                  lambda z: mx.npx.sigmoid(z), lambda z: mx.npx.relu(z)])
def test_ops_not_checked_for_complex_values_say_so(call):
    z = np.array([1 + 1j, 2 - 1j])
    z.attach_grad()
    with mx.autograd.record():
        with pytest.raises((NotImplementedError, TypeError), match="fastgrad|complex"):
            call(z)
    call(z)            # without recording, the forward is NumPy's


def test_real_imag_and_conj_methods():
    z = np.array([1 + 2j, -3 + 0.5j])
    z.attach_grad()
    with mx.autograd.record():
        loss = (z.real * 2 + z.imag * 5).sum() + np.real(z.conj() * 1j).sum()
    assert z.real.shape == (2,) and z.conjugate().asnumpy()[0] == 1 - 2j
    loss.backward()
    # Re(conj(z) i) = b: d/da 0, d/db 1
    onp.testing.assert_allclose(z.grad.asnumpy(), [2 + 6j, 2 + 6j])
