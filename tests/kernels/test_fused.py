"""The fused kernels (Note [Fused kernels] in fastgrad/_kernels/_fused.pyx) against the NumPy
compositions they replace: the same values bit for bit in float32 and float64, at ties, for
zeros, empty and 0-d arrays, broadcast and non-contiguous operands; and the gradients of the
ops whose rules call them (``maximum``, ``minimum``, ``sigmoid``) unchanged, to second order.
The registry-driven tests (tests/op_specs.py) check the kernels as ops to higher orders."""

import warnings

import numpy as onp
import pytest

from fastgrad._kernels import _fused
from fastgrad import autograd, np, npx

DTYPES = [onp.float32, onp.float64]


def _maximum_rule(g, x, y):
    """maximum's former rule, as NumPy composes it (Note [Ties of maximum])."""
    return onp.where(x == y, 0.5 * g, g * (x > y))


def _operands(dtype, shape=(7, 9), seed=0):
    rng = onp.random.default_rng(seed)
    g = rng.standard_normal(shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    x.flat[::4] = 0                         # ties with the constant 0
    return g, x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "broadcast g"])
@pytest.mark.parametrize("y", ["zero", "scalar", "row", "full"])
def test_maximum_backward_equals_the_composition(dtype, layout, y):
    g, x = _operands(dtype)
    if layout == "transposed":
        g, x = g.T, x.T
    elif layout == "strided":
        g, x = g[:, ::2], x[:, ::2]
    elif layout == "broadcast g":
        g = onp.broadcast_to(g[:1, :1], x.shape)
    yv = {"zero": 0, "scalar": 0.25, "row": x[:1], "full": x.copy()}[y]
    if y == "full":
        yv.flat[1::3] += 1
    got = _fused.maximum_backward(g, x, yv)
    assert got.dtype == dtype
    assert onp.array_equal(got, _maximum_rule(g, x, yv))


@pytest.mark.parametrize("dtype", DTYPES)
def test_maximum_backward_special_values(dtype):
    x = onp.array([0, 0, 1, -1, onp.nan, onp.inf, 0], dtype)
    g = onp.array([onp.inf, -2, onp.nan, 3, 1, 5, -0.0], dtype)
    with onp.errstate(invalid="ignore"):
        expected = _maximum_rule(g, x, dtype(0))
        got = _fused.maximum_backward(g, x, 0)
    assert onp.array_equal(got, expected, equal_nan=True)
    assert onp.array_equal(onp.signbit(got), onp.signbit(expected))


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (5,)])
def test_empty_and_0d(shape):
    g, x = onp.ones(shape), onp.zeros(shape)
    assert _fused.maximum_backward(g, x, 0).shape == shape
    assert _fused.sigmoid_backward(g, x).shape == shape
    assert _fused.tanh_backward(g, x).shape == shape


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "strided", "broadcast g"])
def test_sigmoid_and_tanh_backward_equal_the_composition(dtype, layout):
    g, x = _operands(dtype)
    y = onp.tanh(x)
    if layout == "strided":
        g, y = g[::2, ::3], y[::2, ::3]
    elif layout == "broadcast g":
        g = onp.broadcast_to(g[:1, :1], y.shape)
    assert onp.array_equal(_fused.sigmoid_backward(g, y), g * y * (1 - y))
    assert onp.array_equal(_fused.tanh_backward(g, y), g * (1 - y * y))


def test_tanh_backward_complex():
    rng = onp.random.default_rng(3)
    g = rng.standard_normal(6) + 1j * rng.standard_normal(6)
    y = rng.standard_normal(6) + 1j * rng.standard_normal(6)
    onp.testing.assert_allclose(_fused.tanh_backward(g, y), g * (1 - y * y), rtol=1e-13)


def test_other_dtypes_are_numpys_errors():
    with pytest.raises(TypeError, match="maximum_backward"):
        _fused.maximum_backward(onp.ones(2, complex), onp.ones(2), 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("relu", ["maximum(z, 0)", "maximum(0, z)", "minimum(-z, 0)"])
def test_relu_idiom_gradients_to_second_order(dtype, relu):
    """The tie at the constant gets half the gradient, as maximum's rule always gave."""
    z0 = onp.array([[-1.5, 0.0, 2.0], [0.0, 0.5, -0.25]], dtype)
    z = np.array(z0)
    z.attach_grad()
    with autograd.record():
        m = {"maximum(z, 0)": lambda: np.maximum(z, 0), "maximum(0, z)": lambda: np.maximum(0, z),
             "minimum(-z, 0)": lambda: -np.minimum(-z, 0)}[relu]()
        loss = (m * m * m).sum()
        (dz,) = autograd.grad(loss, [z], create_graph=True)
        total = dz.sum()
    (d2,) = autograd.grad(total, [z])
    tie = onp.where(z0 == 0, 0.5, (z0 > 0).astype(dtype))
    assert dz.dtype == dtype and d2.dtype == dtype
    onp.testing.assert_array_equal(dz.asnumpy(), 3 * onp.maximum(z0, 0) ** 2 * tie)
    onp.testing.assert_allclose(d2.asnumpy(), 6 * onp.maximum(z0, 0) * tie * tie, rtol=1e-6)


def test_float16_gradient_keeps_its_dtype():
    z = np.array(onp.array([-1, 0, 2], onp.float16))
    z.attach_grad()
    with autograd.record():
        loss = np.maximum(z, 0).sum()
    loss.backward()
    assert z.grad.dtype == onp.float16
    onp.testing.assert_array_equal(z.grad.asnumpy(), [0, 0.5, 1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_sigmoid_gradient_unchanged(dtype):
    x0 = onp.linspace(-3, 3, 13).astype(dtype)
    x = np.array(x0)
    x.attach_grad()
    with autograd.record():
        y = npx.sigmoid(x)
        (dx,) = autograd.grad((y * x).sum(), [x], create_graph=True)
        total = dx.sum()
    (d2,) = autograd.grad(total, [x])
    s = y.asnumpy()
    onp.testing.assert_array_equal(dx.asnumpy(), x0 * s * (1 - s) + s)
    expected = 2 * s * (1 - s) + x0 * s * (1 - s) * (1 - 2 * s)
    onp.testing.assert_allclose(d2.asnumpy(), expected, rtol=1e-5 if dtype == onp.float32
                                else 1e-12, atol=1e-7)


def _raised(f):
    """The floating-point errors f() raises, one at a time, under np.errstate(all='raise')."""
    raised = set()
    for kind in ("invalid", "divide", "over", "under"):
        with onp.errstate(**{"all": "ignore", kind: "raise"}):
            try:
                f()
            except FloatingPointError:
                raised.add(kind)
    return raised


# every pair of these: NaN, infinities, signed zeros, ties, x above and below y
_SPECIAL = [onp.nan, -onp.inf, onp.inf, -0.0, 0.0, 1.0, -2.5]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("g", [1.5, -0.0, onp.inf, -onp.inf, onp.nan])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "broadcast g", "scalar y"])
def test_extrema_gradients_with_nan_inf_and_signed_zeros(dtype, g, layout):
    """Note [Comparisons and the invalid flag]: with NaN (or inf, or -0.0) among the operands,
    the gradients of maximum and minimum equal the composition's bit for bit, and the kernel
    raises no floating-point error where the composition raised none (its comparisons are
    quiet); invalid where the kernel's product is inf * 0 (a NaN made from an infinite g), as
    the composition's; the one case where they differ is an infinite g at a tie, where only
    the composition raised, from the product its where() discards."""
    xs, ys = onp.meshgrid(onp.array(_SPECIAL, dtype), onp.array(_SPECIAL, dtype))
    x, y = onp.tile(xs.ravel(), 3), onp.tile(ys.ravel(), 3)     # long enough for the vector loop
    cases = [(x, dtype(v)) for v in _SPECIAL] if layout == "scalar y" else [(x, y)]
    for x, y in cases:
        gv = onp.full(x.shape, g, dtype)
        if layout == "strided":
            x, y, gv = (onp.repeat(v, 2)[::2] for v in (x, y, gv))
        elif layout == "broadcast g":
            gv = onp.broadcast_to(dtype(g), x.shape)
        for a, b in [(x, y), (y, x)]:     # maximum's two gradients, and minimum's (swapped)
            with onp.errstate(all="ignore"):
                expected = _maximum_rule(gv, a, b)
                got = _fused.maximum_backward(gv, a, b)
            assert got.dtype == dtype
            assert onp.array_equal(got, expected, equal_nan=True)
            assert onp.array_equal(onp.signbit(got), onp.signbit(expected))
            old = _raised(lambda: _maximum_rule(gv, a, b))
            new = _raised(lambda: _fused.maximum_backward(gv, a, b))
            made_nan = bool(onp.any(onp.isinf(gv) & ~(a >= b)))
            assert new == ({"invalid"} if made_nan else set())
            assert new <= old
            assert old - new <= ({"invalid"} if onp.any(onp.isinf(gv) & (a == b)) else set())
            if not old:
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    with onp.errstate(all="raise"):
                        _fused.maximum_backward(gv, a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_extrema_gradients_with_nan_raise_nothing(dtype, op):
    """np.maximum / np.minimum with NaN in either operand: the gradients are the composition's
    and no warning is emitted, under warnings 'error' and np.errstate(all='raise')."""
    x0 = onp.array([onp.nan, 1, 2, -0.0, onp.inf, 3, onp.nan, -onp.inf, 0.0] * 3, dtype)
    y0 = onp.array([0, onp.nan, 2, 0.0, onp.inf, -1, onp.nan, 5, -0.0] * 3, dtype)
    g0 = onp.linspace(-2, 2, x0.size).astype(dtype)
    x, y = np.array(x0), np.array(y0)
    x.attach_grad()
    y.attach_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with onp.errstate(all="raise"):
            with autograd.record():
                z = getattr(np, op)(x, y)
            z.backward(np.array(g0))
            with onp.errstate(all="ignore"):   # the rules of _derivatives.py
                dx, dy = (_maximum_rule(g0, x0, y0), _maximum_rule(g0, y0, x0))[::(
                    1 if op == "maximum" else -1)]
    assert onp.array_equal(x.grad.asnumpy(), dx)
    assert onp.array_equal(onp.signbit(x.grad.asnumpy()), onp.signbit(dx))
    assert onp.array_equal(y.grad.asnumpy(), dy)
    assert onp.array_equal(onp.signbit(y.grad.asnumpy()), onp.signbit(dy))
