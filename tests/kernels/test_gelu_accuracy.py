"""GELU keeps its relative accuracy for negative arguments, where ``1 + erf`` cancels.

``x * Phi(x)`` is computed with ``Phi(x) = erfc(-x / sqrt(2)) / 2`` (``_kernels/_forward.py``):
the reference is the same closed form in Python's ``math.erfc``, one value at a time.
"""
import math

import numpy as onp
import pytest

from fastgrad import autograd, np, npx
from fastgrad._kernels import _forward as K

POINTS = [-38.0, -20.0, -8.5, -5.0, -3.0, -1.0, -1e-3, 0.0, 1e-3, 0.5, 2.0, 7.0]


def _reference(x):
    return x * 0.5 * math.erfc(-x / math.sqrt(2.0))


@pytest.fixture(params=["scipy", "fallback"])
def erfc_source(request, monkeypatch):
    """Both sources of erfc: SciPy's ufunc and the standard library's, one value at a time."""
    if request.param == "fallback":
        erf, erfinv, _ = K._special_functions()
        monkeypatch.setattr(K, "_special", (erf, erfinv, K._erfc_fallback))
    return request.param


@pytest.mark.parametrize("dtype", [onp.float64, onp.float32])
def test_gelu_is_accurate_for_negative_arguments(erfc_source, dtype):
    """Within ``2 x**2 + 4`` units in the last place: rounding ``-x / sqrt(2)`` (in the kernel and
    in the reference) moves ``erfc`` by ``x**2 / 2`` of them each (its logarithmic slope is
    ``-2z``), and nothing cancels."""
    x = onp.array(POINTS, dtype=dtype)
    got = npx.leaky_relu(np.array(x), act_type="gelu").asnumpy()
    assert got.dtype == dtype
    xs = x.astype(onp.float64)
    expected = onp.array([_reference(v) for v in xs])
    ulp = onp.spacing(onp.abs(expected).astype(dtype)).astype(onp.float64)
    bound = (2 * xs * xs + 4) * ulp + onp.finfo(dtype).tiny       # subnormal results may flush
    assert onp.all(onp.abs(got - expected) <= bound), (got, expected)
    # The cancelling form 0.5 * x * (1 + erf(x / sqrt(2))) gave 0 from -5.5 in float32.
    representable = (xs < 0) & (onp.abs(expected) > onp.finfo(dtype).tiny)
    assert onp.all(got[representable] < 0), got


def test_gelu_at_the_infinities_and_nan_is_the_limit():
    x = onp.array([-onp.inf, onp.inf, onp.nan, -0.0])
    with onp.errstate(all="raise"):
        got = npx.leaky_relu(np.array(x), act_type="gelu").asnumpy()
    assert got[0] == 0 and onp.signbit(got[0])
    assert got[1] == onp.inf and onp.isnan(got[2]) and got[3] == 0


def test_gelu_keeps_integer_inputs_as_float64_and_0d_arrays():
    assert K.gelu(onp.array([1, -2])).dtype == onp.float64
    onp.testing.assert_allclose(K.gelu(onp.array(2.0)), _reference(2.0), rtol=1e-15)


def test_gelu_gradient():
    """``Phi(x) + x * phi(x)``; the rule still forms ``Phi`` as ``(1 + erf) / 2``, whose
    cancellation is hidden for negative ``x`` by the larger ``x * phi(x)`` (docs/ops)."""
    x = np.array(onp.array([-6.0, -2.0, 0.0, 1.5]))
    x.attach_grad()
    with autograd.record():
        y = npx.leaky_relu(x, act_type="gelu")
    y.backward()
    xs = x.asnumpy()
    pdf = onp.exp(-0.5 * xs * xs) / math.sqrt(2 * math.pi)
    cdf = onp.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in xs])
    onp.testing.assert_allclose(x.grad.asnumpy(), cdf + xs * pdf, rtol=1e-10)
