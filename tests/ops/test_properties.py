"""Property tests: random broadcastable shapes and dtypes through binary ops and reductions."""

import numpy as onp
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import assume, given, settings, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from fastgrad import autograd, np  # noqa: E402

BINARY = {
    "add": (np.add, lambda a, b: (onp.ones_like(a * b), onp.ones_like(a * b))),
    "subtract": (np.subtract, lambda a, b: (onp.ones_like(a * b), -onp.ones_like(a * b))),
    "multiply": (np.multiply, lambda a, b: (b * onp.ones_like(a), a * onp.ones_like(b))),
    "divide": (np.divide, lambda a, b: (1 / b * onp.ones_like(a), -a / b ** 2)),
    "maximum": (np.maximum, lambda a, b: ((a >= b) * 1.0, (a < b) * 1.0)),
    "hypot": (np.hypot, lambda a, b: (a / onp.hypot(a, b), b / onp.hypot(a, b))),
}


def _unbroadcast(g, shape):
    while g.ndim > len(shape):
        g = g.sum(0)
    for i, n in enumerate(shape):
        if n == 1 and g.shape[i] != 1:
            g = g.sum(i, keepdims=True)
    return g


values = st.floats(0.5, 2.0) | st.floats(-2.0, -0.5)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(BINARY)),
       shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                max_side=3),
       dtype=st.sampled_from([onp.float32, onp.float64]),
       data=st.data())
def test_binary_ops_gradients_on_broadcast_shapes(name, shapes, dtype, data):
    op, closed = BINARY[name]
    sa, sb = shapes.input_shapes
    a0 = data.draw(hnp.arrays(onp.float64, sa, elements=values))
    b0 = data.draw(hnp.arrays(onp.float64, sb, elements=values))
    if name == "maximum":
        # Keep the inputs apart: the derivative jumps where they meet. (Shifting b by a
        # constant did not: a b drawn 0.25 below a became a tie.)
        apart = onp.abs(onp.broadcast_to(a0, shapes.result_shape)
                        - onp.broadcast_to(b0, shapes.result_shape))
        assume(bool(onp.all(apart > 0.01)))
    a, b = np.array(a0.astype(dtype)), np.array(b0.astype(dtype))
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        y = op(a, b)
    y.backward()
    assert a.grad.dtype == dtype and b.grad.dtype == dtype
    assert a.grad.shape == sa and b.grad.shape == sb
    ga, gb = closed(onp.broadcast_to(a0, shapes.result_shape),
                    onp.broadcast_to(b0, shapes.result_shape))
    tol = 1e-4 if dtype == onp.float32 else 1e-12
    onp.testing.assert_allclose(a.grad.asnumpy(), _unbroadcast(onp.asarray(ga, float), sa),
                                rtol=tol, atol=tol)
    onp.testing.assert_allclose(b.grad.asnumpy(), _unbroadcast(onp.asarray(gb, float), sb),
                                rtol=tol, atol=tol)


def _fd(f, x, eps=1e-6):
    g = onp.zeros_like(x)
    for i in onp.ndindex(x.shape):
        d = onp.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


REDUCTIONS = {
    "sum": (np.sum, onp.sum),
    "mean": (np.mean, onp.mean),
    "max": (np.max, onp.max),
    "prod": (np.prod, onp.prod),
    "var": (np.var, onp.var),
}


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(REDUCTIONS)),
       x0=hnp.arrays(onp.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
                     elements=values, unique=True),
       keepdims=st.booleans(), data=st.data())
def test_reductions_gradients_against_finite_differences(name, x0, keepdims, data):
    fg_fn, np_fn = REDUCTIONS[name]
    axis = data.draw(st.none() | st.integers(-x0.ndim, x0.ndim - 1))
    w0 = data.draw(hnp.arrays(onp.float64, onp.shape(np_fn(x0, axis=axis, keepdims=keepdims)),
                              elements=st.floats(-1, 1)))
    x = np.array(x0)
    x.attach_grad()
    with autograd.record():
        y = (fg_fn(x, axis=axis, keepdims=keepdims) * np.array(w0)).sum()
    y.backward()
    expected = _fd(lambda t: float((np_fn(t, axis=axis, keepdims=keepdims) * w0).sum()), x0)
    onp.testing.assert_allclose(x.grad.asnumpy(), expected, rtol=1e-6, atol=1e-7)
