"""``fastgrad.np.fft``: every transform against NumPy, and its first and second derivatives
against finite differences on the real and the imaginary parts of real and complex inputs
(PyTorch's convention: the gradient of a real loss is dL/da + i dL/db)."""
import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import np

EPS = 1e-6

# (name, input shape, complex input?, keyword arguments)
CASES = [
    ("fft", (6,), False, {}), ("fft", (6,), True, {}), ("fft", (5,), True, {"n": 3}),
    ("fft", (5,), True, {"n": 8, "norm": "ortho"}), ("fft", (3, 4), True, {"axis": 0}),
    ("fft", (4,), False, {"norm": "forward"}),
    ("ifft", (6,), True, {}), ("ifft", (5,), False, {"n": 7, "norm": "forward"}),
    ("fft2", (3, 4), True, {}), ("fft2", (3, 4), False, {"s": (2, 6), "norm": "ortho"}),
    ("ifft2", (2, 3, 4), True, {"axes": (0, 2)}),
    ("fftn", (2, 3, 4), True, {}), ("fftn", (2, 3, 4), False, {"s": (5, 2), "axes": (0, 2)}),
    ("ifftn", (3, 4), True, {"norm": "ortho"}),
    ("rfft", (6,), False, {}), ("rfft", (5,), False, {"n": 8, "norm": "ortho"}),
    ("rfft", (3, 5), False, {"axis": 0, "norm": "forward"}), ("rfft", (7,), False, {"n": 4}),
    ("rfft2", (3, 4), False, {}), ("rfftn", (2, 3, 5), False, {"norm": "ortho"}),
    ("rfftn", (4, 3), False, {"s": (3, 6), "axes": (0, 1)}),
    ("irfft", (4,), True, {}), ("irfft", (4,), True, {"n": 5}),
    ("irfft", (4,), True, {"n": 9, "norm": "ortho"}), ("irfft", (4,), False, {"n": 4}),
    ("irfft", (3, 4), True, {"axis": 0, "norm": "forward"}),
    ("irfft2", (3, 4), True, {}), ("irfftn", (2, 3, 3), True, {"s": (2, 3, 5), "axes": (0, 1, 2)}),
    ("hfft", (4,), True, {}), ("hfft", (4,), True, {"n": 5, "norm": "ortho"}),
    ("ihfft", (6,), False, {}), ("ihfft", (5,), False, {"n": 6, "norm": "forward"}),
    ("fftshift", (5,), False, {}), ("fftshift", (3, 4), True, {"axes": 0}),
    ("ifftshift", (5, 2), False, {}), ("ifftshift", (4,), True, {"axes": (0,)}),
]
IDS = ["%s-%s-%s-%s" % (n, "x".join(map(str, s)), "c" if c else "r",
                         ",".join("%s=%s" % kv for kv in sorted(k.items())))
       for n, s, c, k in CASES]


def _input(shape, is_complex, seed=0):
    rng = onp.random.default_rng(seed)
    x = rng.uniform(-1, 1, shape)
    return x + 1j * rng.uniform(-1, 1, shape) if is_complex else x


def _weights(shape, seed=1):
    rng = onp.random.default_rng(seed)
    return rng.uniform(0.5, 1.5, shape), rng.uniform(0.5, 1.5, shape), rng.uniform(-1, 1, shape)


def _numpy_loss(name, kwargs, z, w):
    out = getattr(onp.fft, name)(z, **kwargs)
    re, im = onp.real(out), onp.imag(out)
    return float(onp.sum(w[0] * re * re + w[1] * im * im + w[2] * re))


def _loss(name, kwargs, z, w):
    """A real loss quadratic in the output, so the second derivative is not trivially 0."""
    out = getattr(np.fft, name)(z, **kwargs)
    re = np.real(out)
    im = np.imag(out)
    return (np.array(w[0]) * re * re + np.array(w[1]) * im * im + np.array(w[2]) * re).sum()


def _numeric_grad(f, z):
    z = onp.array(z)
    g = onp.zeros(z.shape, dtype=z.dtype)
    for idx in onp.ndindex(z.shape):
        steps = (1, 1j) if z.dtype.kind == "c" else (1,)
        for step in steps:
            up, down = z.copy(), z.copy()
            up[idx] += EPS * step
            down[idx] -= EPS * step
            g[idx] += step * (f(up) - f(down)) / (2 * EPS)
    return g


def _grad(name, kwargs, z, w, create_graph=False):
    x = np.array(z, dtype=z.dtype)
    x.attach_grad()
    with mx.autograd.record():
        loss = _loss(name, kwargs, x, w)
        g = mx.autograd.grad(loss, [x], create_graph=create_graph)[0]
    return x, g


@pytest.mark.parametrize("name,shape,is_complex,kwargs", CASES, ids=IDS)
def test_forward_matches_numpy_in_float64_and_single_precision(name, shape, is_complex, kwargs):
    z = _input(shape, is_complex)
    expected = getattr(onp.fft, name)(z, **kwargs)
    got = getattr(np.fft, name)(np.array(z, dtype=z.dtype), **kwargs)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    onp.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-12, atol=1e-12)
    single = z.astype(onp.complex64 if is_complex else onp.float32)
    got32 = getattr(np.fft, name)(np.array(single, dtype=single.dtype), **kwargs)
    assert got32.dtype in (onp.float32, onp.complex64)
    onp.testing.assert_allclose(got32.asnumpy(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,shape,is_complex,kwargs", CASES, ids=IDS)
def test_gradient_matches_finite_differences_on_both_parts(name, shape, is_complex, kwargs):
    z = _input(shape, is_complex)
    w_shape = getattr(onp.fft, name)(z, **kwargs).shape
    w = _weights(w_shape)
    _, g = _grad(name, kwargs, z, w)
    assert g.dtype == z.dtype
    expected = _numeric_grad(lambda v: _numpy_loss(name, kwargs, v, w), z)
    onp.testing.assert_allclose(g.asnumpy(), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name,shape,is_complex,kwargs", CASES, ids=IDS)
def test_hessian_vector_product_matches_finite_differences(name, shape, is_complex, kwargs):
    z = _input(shape, is_complex)
    w = _weights(getattr(onp.fft, name)(z, **kwargs).shape)
    v = _input(shape, is_complex, seed=5)
    x, g = _grad(name, kwargs, z, w, create_graph=True)
    with mx.autograd.record():
        # the real inner product <g, v> of the gradient, as a vector of R^2n, with v
        inner = (np.real(g) * np.array(onp.real(v))).sum()
        if is_complex:
            inner = inner + (np.imag(g) * np.array(onp.imag(v))).sum()
    hv = mx.autograd.grad(inner, [x])[0].asnumpy()
    up = _grad(name, kwargs, z + 1e-5 * v, w)[1].asnumpy()
    down = _grad(name, kwargs, z - 1e-5 * v, w)[1].asnumpy()
    onp.testing.assert_allclose(hv, (up - down) / 2e-5, rtol=1e-5, atol=1e-6)


def test_numpy_fft_functions_dispatch_to_fastgrad_and_record():
    x = np.array([1.0, 2.0, 0.5, -1.0], dtype="float64")
    x.attach_grad()
    with mx.autograd.record():
        y = onp.fft.rfft(x)
        assert isinstance(y, mx.np.ndarray) and y.node is not None
        loss = onp.real(onp.fft.irfft(y * y)).sum()
    loss.backward()
    # irfft(rfft(x)^2) is the circular self-convolution; its sum is sum(x)^2
    onp.testing.assert_allclose(x.grad.asnumpy(), 2 * onp.sum(x.asnumpy()) * onp.ones(4))


def test_rfft_of_complex_input_and_bad_norm_raise_naming_the_function_and_argument():
    with pytest.raises(TypeError, match="rfft: the input a must be real"):
        np.fft.rfft(np.array(onp.ones(3) + 1j))
    with pytest.raises(ValueError, match="fft.fft: norm must be one of"):
        np.fft.fft(np.array([1.0]), norm="unitary")
    with pytest.raises(TypeError, match="fft"):
        np.fft.fft()
    with pytest.raises(ValueError, match="invalid number of data points"):
        np.fft.fft(np.array([1.0, 2.0]), n=0)


def test_fft_of_an_integer_array_is_complex128_like_numpy():
    got = np.fft.fft(onp.array([1, 2, 3]))
    assert got.dtype == onp.complex128
    onp.testing.assert_allclose(got.asnumpy(), onp.fft.fft([1, 2, 3]))
    assert np.fft.fftshift(onp.arange(5)).dtype == onp.arange(5).dtype


def test_fftfreq_matches_numpy():
    onp.testing.assert_array_equal(np.fft.fftfreq(5, 0.1).asnumpy(), onp.fft.fftfreq(5, 0.1))
    onp.testing.assert_array_equal(np.fft.rfftfreq(6).asnumpy(), onp.fft.rfftfreq(6))


def test_third_order_through_fft_matches_closed_form():
    # L = sum |fft(x)|^4 / N^3 ... use a 1-element check: d^3/dx^3 of |fft([x, 1])[0]|^4
    from fastgrad.functional import grad

    def f(x):
        z = np.fft.fft(np.stack([x, np.array(1.0, dtype="float64")]))
        a = np.real(z[0])
        return a ** 4            # (x + 1)^4: third derivative 24 (x + 1)
    assert float(grad(grad(grad(f)))(0.5)) == pytest.approx(36.0)
