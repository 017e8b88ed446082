"""Filled gradients: one value over a large shape, kept symbolic (Note [Filled gradients])."""

import numpy as onp
import pytest

from fastgrad import autograd, np
from fastgrad._kernels._filled import MIN_SIZE, Filled, filled

SHAPE = (8, MIN_SIZE // 4)


def test_filled_is_made_only_for_one_value_on_a_large_shape():
    assert isinstance(filled(onp.array(2.0), SHAPE), Filled)
    assert filled(onp.array(2.0), (3,)) is None
    assert filled(onp.ones(2), SHAPE) is None


def test_ufuncs_match_the_broadcast_view_exactly():
    rng = onp.random.default_rng(0)
    y = rng.standard_normal(SHAPE)
    mask = y > 0
    for value in (1.0, -2.5, 0.0):
        f = Filled(onp.array(value), SHAPE)
        view = onp.broadcast_to(onp.array(value), SHAPE)
        for got, expected in [(f * y, view * y), (y * f, y * view), (f / 3, view / 3),
                              (f - y, view - y), (-f, -view), (f * mask, view * mask),
                              (onp.exp(f), onp.exp(view)), (f + f, view + view),
                              (mask * f, mask * view),
                              (onp.where(mask, f, 0), onp.where(mask, view, 0)),
                              (f @ onp.ones((SHAPE[1], 2)), view @ onp.ones((SHAPE[1], 2))),
                              (f[1:3], view[1:3]), (f.reshape(-1), view.reshape(-1)),
                              (f.sum(axis=0), view.sum(axis=0))]:
            got = onp.asarray(got)
            assert got.shape == expected.shape and got.dtype == expected.dtype
            onp.testing.assert_array_equal(got, expected)


def test_one_times_an_array_is_the_array_itself():
    y = onp.ones(SHAPE)
    assert (Filled(onp.array(1.0), SHAPE) * y) is y
    assert (y * Filled(onp.array(1.0), SHAPE)) is y
    assert (Filled(onp.array(2.0), SHAPE) * y) is not y
    # A float32 array times a float64 one is float64: no shortcut.
    y32 = onp.ones(SHAPE, dtype=onp.float32)
    assert (Filled(onp.array(1.0), SHAPE) * y32).dtype == onp.float64


def test_in_place_add_into_an_array():
    acc = onp.zeros(SHAPE)
    acc += Filled(onp.array(3.0), SHAPE)
    onp.testing.assert_array_equal(acc, onp.full(SHAPE, 3.0))


@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
def test_gradients_through_a_large_sum_match_small_ones(dtype):
    """The same function on a large array (Filled) and element by element (views)."""
    rng = onp.random.default_rng(1)
    data = rng.uniform(0.5, 2.0, SHAPE).astype(dtype)

    def run(values):
        x = np.array(values)
        x.attach_grad()
        with autograd.record():
            y = (np.sin(x) * x + np.exp(-x * x) * 2 - x / 3).sum() * 1.5
        y.backward()
        return x.grad.asnumpy()

    big = run(data)
    small = onp.concatenate([run(row[None, :128]) for row in data[:, :128]])
    onp.testing.assert_array_equal(big[:, :128], small)
    assert big.dtype == dtype
    t = data.astype(onp.float64)
    expected = 1.5 * (onp.cos(t) * t + onp.sin(t) - 4 * t * onp.exp(-t * t) - 1 / 3)
    tol = 1e-5 if dtype == onp.float32 else 1e-12
    onp.testing.assert_allclose(big, expected, rtol=tol, atol=tol)


# ---------------------------------------------------------------- create_graph
# The implicit head gradient of a create_graph pass is a Filled of ones, at any size: a rule's
# g * y is then y itself, and g * y does not become a multiply to differentiate again.


def _ops_of(a):
    import json
    text = autograd.get_symbol(a).tojson(layout="fastgrad")
    return [n["op"] for n in json.loads(text)["nodes"]]


def test_create_graph_records_no_multiply_by_the_implicit_ones():
    x = np.array(onp.linspace(-1.0, 1.0, 5))
    x.attach_grad()
    with autograd.record():
        (d,) = autograd.grad(np.sum(np.sin(x) * x), [x], create_graph=True)
    xs = x.asnumpy()
    onp.testing.assert_allclose(d.asnumpy(), onp.sin(xs) + xs * onp.cos(xs), rtol=1e-15)
    # sin(x) + x * cos(x): one multiply (x by cos x), no constant operand anywhere.
    assert sorted(_ops_of(d)) == ["add", "cos", "multiply", "null", "sin"]


def test_a_gradient_that_is_an_input_comes_back_as_a_recorded_copy():
    x = np.array([1.0, 2.0, 3.0])
    w = np.array([2.0, 2.0, 2.0])
    x.attach_grad()
    w.attach_grad()
    with autograd.record():
        (dw,) = autograd.grad(np.sum(x * w), [w], create_graph=True)
        assert dw is not x
        onp.testing.assert_array_equal(dw.asnumpy(), x.asnumpy())
        z = np.sum(dw * x)              # still recorded: x * x
    z.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), 2 * x.asnumpy())
    dw += 1.0                           # the caller's own array: x is left alone
    onp.testing.assert_array_equal(x.asnumpy(), [1.0, 2.0, 3.0])


@pytest.mark.parametrize("retain", [True, False])
def test_grad_never_returns_an_array_the_caller_holds(retain):
    x = np.array([1.0, 2.0, 3.0])
    w = np.array([2.0, 2.0, 2.0])
    hg = np.array([0.5, 0.5, 0.5])
    x.attach_grad()
    w.attach_grad()
    with autograd.record():
        (dw,) = autograd.grad(np.sum(x * w), [w], create_graph=True, retain_graph=retain)
        y = x * w
        (dy,) = autograd.grad(y + 0.0, [y], head_grads=hg, create_graph=True,
                              retain_graph=retain)
        d1, d2 = autograd.grad(np.sum(np.sin(x)), [x, x], create_graph=True,
                               retain_graph=retain)
    assert dw is not x and dy is not hg and d1 is not d2
    onp.testing.assert_array_equal(dw.asnumpy(), x.asnumpy())
    onp.testing.assert_array_equal(dy.asnumpy(), hg.asnumpy())
    onp.testing.assert_array_equal(d1.asnumpy(), d2.asnumpy())


@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
def test_create_graph_with_a_non_scalar_head_and_broadcasting(dtype):
    rng = onp.random.default_rng(3)
    xs = rng.uniform(0.5, 1.5, (3, 4)).astype(dtype)
    bs = rng.uniform(0.5, 1.5, 4).astype(dtype)
    x, b = np.array(xs), np.array(bs)
    x.attach_grad()
    b.attach_grad()
    with autograd.record():
        y = np.exp(x * b)                        # non-scalar head: implicit ones
        (db,) = autograd.grad(y, [b], create_graph=True)
        assert db.dtype == dtype and db.shape == (4,)
        onp.testing.assert_allclose(db.asnumpy(), (xs * onp.exp(xs * bs)).sum(0), rtol=1e-5)
        (-db).backward()                         # Filled(-1) * array is a negation
    expected = -(onp.exp(xs * bs) * (1 + xs * bs))  # d/dx of -sum_i x exp(x b)
    onp.testing.assert_allclose(x.grad.asnumpy(), expected, rtol=1e-5)


def test_minus_one_and_other_values_times_a_recorded_array():
    x = np.array([1.0, -2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = x * x
        a = Filled(onp.array(-1.0), (3,)) * y
        b = Filled(onp.array(2.5), (3,)) * y
        c = Filled(onp.array(1.0, dtype=onp.float32), (3,)) * y   # float32 one, float64 y
        assert c is y
        total = np.sum(a + b + c)
    total.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), 2 * x.asnumpy() * (-1 + 2.5 + 1))
    assert a.dtype == b.dtype == onp.float64
