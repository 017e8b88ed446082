"""``npx.pick``: MXNet's semantics (float labels truncated, clip and wrap), its gradient to any
order, the index as an input of the op, and clear errors.

The expected values below are what MXNet 1.9.1 printed for the same calls
(``mx.nd.pick``; checked side by side while writing this file).
"""

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd, npx
from fastgrad.functional import grad

X = onp.arange(12.0).reshape(3, 4)


@pytest.mark.parametrize("mode, picked, x_grad", [
    ("clip", [1.0, 4.0, 8.0], [[0, 1, 0, 0], [2, 0, 0, 0], [3, 0, 0, 0]]),
    ("wrap", [1.0, 4.0, 11.0], [[0, 1, 0, 0], [2, 0, 0, 0], [0, 0, 0, 3]]),
])
def test_float_labels_truncate_then_clip_or_wrap_as_mxnet(mode, picked, x_grad):
    x = mx.np.array(X)
    x.attach_grad()
    with autograd.record():
        y = npx.pick(x, mx.np.array([1.7, -0.5, -1.0]), axis=1, mode=mode)
        s = (y * mx.np.array([1.0, 2.0, 3.0])).sum()
    s.backward()
    assert y.asnumpy().tolist() == picked
    assert x.grad.asnumpy().tolist() == x_grad


def test_out_of_range_labels_and_keepdims_along_axis_0():
    x = mx.np.array(X)
    far = onp.array([5.0, -5.0, 9.0])
    assert npx.pick(x, far, axis=1, mode="clip").asnumpy().tolist() == [3.0, 4.0, 11.0]
    assert npx.pick(x, far, axis=1, mode="wrap").asnumpy().tolist() == [1.0, 7.0, 9.0]
    out = npx.pick(x, [0, 1, 2, 3], axis=0, keepdims=True)
    assert out.shape == (1, 4) and out.asnumpy().tolist() == [[0.0, 5.0, 10.0, 11.0]]


def test_second_derivative_of_a_linear_pick_is_zeros_and_index_gets_none():
    x = mx.np.array(X)
    idx = mx.np.array([3.0, 0.0, 2.0])
    idx.attach_grad()
    g1 = grad(lambda v: (npx.pick(v, idx) ** 2).sum())
    first = g1(x).asnumpy()
    want = onp.zeros_like(X)
    want[[0, 1, 2], [3, 0, 2]] = 2 * X[[0, 1, 2], [3, 0, 2]]
    assert onp.array_equal(first, want)
    second = grad(lambda v: (g1(v) * mx.np.array(X)).sum())(x).asnumpy()
    want2 = onp.zeros_like(X)
    want2[[0, 1, 2], [3, 0, 2]] = 2 * X[[0, 1, 2], [3, 0, 2]]
    assert onp.array_equal(second, want2)


def test_empty_batch_and_float32():
    x = mx.np.zeros((0, 5), dtype="float32")
    x.attach_grad()
    with autograd.record():
        y = npx.pick(x, onp.zeros(0, dtype=onp.float32))
    y.backward()
    assert y.shape == (0,) and y.dtype == onp.float32
    assert x.grad.shape == (0, 5)


@pytest.mark.parametrize("call, error, words", [
    (lambda: npx.pick(mx.np.array(2.0), mx.np.array(0)), ValueError, "0-d"),
    (lambda: npx.pick(mx.np.array(X), [0, 1, 2], mode="raise"), ValueError, "mode"),
    (lambda: npx.pick(mx.np.array(X), [0, 1, 2], axis=2), ValueError, "axis 2"),
    (lambda: npx.pick(mx.np.array(X), [0, 1]), ValueError, "index has shape (2,)"),
    (lambda: npx.pick(mx.np.array(X), onp.ones(3, dtype=bool)), TypeError, "index"),
    (lambda: npx.pick(mx.np.zeros((3, 0)), [0, 0, 0]), ValueError, "empty"),
])
def test_bad_arguments_raise_naming_pick_and_the_argument(call, error, words):
    with pytest.raises(error, match="npx.pick") as info:
        call()
    assert words in str(info.value)
