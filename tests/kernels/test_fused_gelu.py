"""The fused gelu kernels (Note [Fused gelu] in fastgrad/_kernels/_fused.pyx) against gelu and
its derivative computed in 90-digit decimal arithmetic, within the error bounds the Note
gives; at infinities, NaN, huge and tiny values without floating-point warnings; on empty,
0-d, broadcast and strided operands; and through every public spelling of gelu, with its
second derivative. The registry-driven tests (tests/op_specs.py) check ``gelu`` and
``gelu_backward`` as ops against finite differences to second order."""

import decimal
import warnings
from decimal import Decimal

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd, gluon, np, npx
from fastgrad._kernels import _fused

DTYPES = [onp.float32, onp.float64]
PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459")


def _normal_cdf_pdf(x, prec=90):
    """Phi(x) and phi(x) of the float ``x`` in ``prec``-digit decimals: erf's Maclaurin series,
    whose terms (at most about exp(x * x / 2), 1e31 for |x| <= 12) cost no more digits than the
    60 to spare; pi is given to 63 digits."""
    with decimal.localcontext() as ctx:
        ctx.prec = prec
        xd = Decimal(float(x))
        z = xd / Decimal(2).sqrt()
        term = total = z
        n = 0
        while True:
            n += 1
            term = -term * z * z / n
            total += term / (2 * n + 1)
            if abs(term) < Decimal(10) ** -prec:
                break
        cdf = (1 + 2 * total / PI.sqrt()) / 2
        pdf = (-xd * xd / 2).exp() / (2 * PI).sqrt()
        return +cdf, +pdf


def _ulps(value, reference, scale, dtype):
    """|value - reference| in units in the last place of ``scale`` in ``dtype``."""
    scale = abs(float(scale))
    unit = float(onp.spacing(dtype(scale))) if scale else float(
        onp.finfo(dtype).smallest_subnormal)
    return float(abs(Decimal(float(value)) - reference)) / unit


POINTS = onp.concatenate([onp.linspace(-12, 8, 201), [-0.7518, 1e-8, -1e-8, 1e-300, -1e-300]])


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_and_its_gradient_within_their_error_bounds(dtype):
    """float64: within 2 x^2 + 4 ulp (erfc's relative condition number at -x / sqrt(2) is
    x^2, and the argument is rounded); float32: the double value rounded once, within half
    an ulp and a hair. The gradient's error is in ulp of Phi(x) + |x| phi(x), the size of
    its two terms (the gradient itself is 0 near x = -0.75)."""
    x = POINTS.astype(dtype)
    x = x[(x == 0) == (POINTS == 0)]            # 1e-300 is 0 in float32
    value, gradient = _fused.gelu(x), _fused.gelu_backward(dtype(1), x)
    assert value.dtype == gradient.dtype == dtype
    for v, y, d in zip(x, value, gradient):
        cdf, pdf = _normal_cdf_pdf(v)
        xd = Decimal(float(v))
        bound = 2 * float(v) ** 2 + 4 if dtype == onp.float64 else 0.501
        assert _ulps(y, xd * cdf, xd * cdf, dtype) <= bound, v
        assert _ulps(d, cdf + xd * pdf, cdf + abs(xd) * pdf, dtype) <= bound, v


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_keeps_its_relative_accuracy_where_the_erf_form_is_zero(dtype):
    """0.5 * x * (1 + erf(x / sqrt(2))) is 0 from about x = -8.4 (float64) or -5.5 (float32);
    the erfc form keeps gelu's sign and size down to where it underflows."""
    x = onp.array([-6.0, -8.5, -12.0, -30.0], dtype)
    y = _fused.gelu(x)
    for v, yv in zip(x, y):
        if float(v) < -12:
            continue                            # past the decimal series' range
        cdf, _ = _normal_cdf_pdf(v)
        assert yv < 0 and _ulps(yv, Decimal(float(v)) * cdf, yv, dtype) <= 2 * float(v) ** 2 + 4
    assert y[-1] < 0 if dtype == onp.float64 else y[-1] == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values_raise_no_warning(dtype):
    big = onp.finfo(dtype).max
    x = onp.array([onp.inf, -onp.inf, onp.nan, big, -big, 0.0, -0.0, 50, -50], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with onp.errstate(over="raise", invalid="raise", divide="raise"):
            y = _fused.gelu(x)
            d = _fused.gelu_backward(dtype(1), x)
    onp.testing.assert_array_equal(y, [onp.inf, -0.0, onp.nan, big, -0.0, 0, -0.0, 50, -0.0])
    assert list(onp.signbit(y[[1, 4, 6, 8]])) == [True] * 4
    onp.testing.assert_array_equal(d, [1, 0, onp.nan, 1, 0, 0.5, 0.5, 1, 0])


@pytest.mark.parametrize("shape", [(), (0,), (0, 3)])
def test_empty_and_0d(shape):
    x = onp.full(shape, 0.5)
    assert _fused.gelu(x).shape == shape
    assert _fused.gelu_backward(onp.ones(shape), x).shape == shape
    y = npx.gelu(np.array(x))
    assert y.shape == shape


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_and_strided_operands(dtype):
    rng = onp.random.default_rng(5)
    x = rng.standard_normal((6, 8)).astype(dtype)
    g = rng.standard_normal((1, 8)).astype(dtype)
    full = _fused.gelu_backward(onp.broadcast_to(g, x.shape).copy(), x)
    onp.testing.assert_array_equal(_fused.gelu_backward(g, x), full)
    onp.testing.assert_array_equal(_fused.gelu_backward(g[:, ::2], x[::2, ::2]),
                                   full[::2, ::2])
    onp.testing.assert_array_equal(_fused.gelu(x.T), _fused.gelu(x).T)
    assert _fused.gelu_backward(dtype(2), x).dtype == dtype


def test_other_dtypes_are_numpys_errors():
    with pytest.raises(TypeError, match="gelu"):
        _fused.gelu(onp.ones(2, complex))


SPELLINGS = {
    "npx.gelu": lambda x: npx.gelu(x),
    "npx.leaky_relu": lambda x: npx.leaky_relu(x, act_type="gelu"),
    "npx.activation": lambda x: npx.activation(x, act_type="gelu"),
    "nd.LeakyReLU": lambda x: mx.nd.LeakyReLU(x.as_nd_ndarray(), act_type="gelu"),
    "gluon nn.GELU": lambda x: gluon.nn.GELU()(x),
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_public_spellings_use_the_kernels_to_second_order(spelling):
    """gelu's value and gradient are the kernels'; the second derivative is
    phi(x) * (2 - x^2), from gelu_backward's rule."""
    x0 = onp.array([-9.0, -2.5, -0.75, 0.0, 0.3, 1.0, 4.0])
    x = np.array(x0)
    x.attach_grad()
    with autograd.record():
        y = SPELLINGS[spelling](x)
        (dx,) = autograd.grad(y.sum(), [x], create_graph=True)
        total = dx.sum()
    total.backward()
    onp.testing.assert_array_equal(y.asnumpy(), _fused.gelu(x0))
    onp.testing.assert_array_equal(dx.asnumpy(), _fused.gelu_backward(1.0, x0))
    pdf = onp.exp(-0.5 * x0 * x0) / onp.sqrt(2 * onp.pi)
    onp.testing.assert_allclose(x.grad.asnumpy(), pdf * (2 - x0 * x0), rtol=1e-14, atol=0)
