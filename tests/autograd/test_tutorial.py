"""The examples of MXNet's autograd tutorial and of the ``mxnet.autograd`` docs,
run with ``import fastgrad as mx`` and checked against the values MXNet prints
(or against closed forms where the example only prints something random).
"""
import math
import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastgrad as mx  # noqa: E402
from fastgrad import autograd, nd, np  # noqa: E402

from _helpers import assert_close, to_numpy  # noqa: E402


def _tutorial_x():
    x = np.array([[1, 2], [3, 4]])
    x.attach_grad()
    return x


# --------------------------------------------------------------------------
# Basic use: f(x) = 2 x^2
# --------------------------------------------------------------------------

def test_tutorial_array_is_float32_and_has_no_grad_before_attach():
    x = np.array([[1, 2], [3, 4]])
    assert x.dtype == onp.float32
    assert x.shape == (2, 2)
    assert x.grad is None
    assert_close(x, onp.array([[1.0, 2.0], [3.0, 4.0]], dtype=onp.float32))


def test_tutorial_attach_grad_gives_zero_gradient_buffer():
    x = _tutorial_x()
    assert x.grad is not None
    assert x.grad.shape == (2, 2)
    assert x.grad.dtype == onp.float32
    assert_close(x.grad, onp.zeros((2, 2), dtype=onp.float32))


def test_tutorial_two_x_squared_gradient():
    x = _tutorial_x()
    with autograd.record():
        y = 2 * x * x
    assert_close(y, onp.array([[2.0, 8.0], [18.0, 32.0]], dtype=onp.float32))
    y.backward()
    assert_close(x.grad, onp.array([[4.0, 8.0], [12.0, 16.0]], dtype=onp.float32), rtol=0, atol=0)


def test_tutorial_backward_of_sum_equals_backward_of_nonscalar():
    x = _tutorial_x()
    with autograd.record():
        y = np.sum(2 * x * x)
    assert y.shape == ()
    assert y.item() == 60.0
    y.backward()
    assert_close(x.grad, onp.array([[4.0, 8.0], [12.0, 16.0]], dtype=onp.float32), rtol=0, atol=0)


def test_tutorial_retain_graph_then_second_backward_then_error():
    """backward(retain_graph=True), then a plain backward, then a third one fails."""
    x = _tutorial_x()
    expected = onp.array([[4.0, 8.0], [12.0, 16.0]], dtype=onp.float32)
    with autograd.record():
        y = np.sum(2 * x * x)
    y.backward(retain_graph=True)
    assert_close(x.grad, expected, rtol=0, atol=0)
    # the graph was retained, so a second backward works (grad_req='write' overwrites)
    y.backward()
    assert_close(x.grad, expected, rtol=0, atol=0)
    # ...but that one freed it
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()
    # the failed call did not corrupt the stored gradient
    assert_close(x.grad, expected, rtol=0, atol=0)


# --------------------------------------------------------------------------
# Train mode vs predict mode, functions that record
# --------------------------------------------------------------------------

def my_first_function(x):
    if autograd.is_training():
        return 4 * x
    return x


def my_second_function(x):
    with autograd.record():
        return 2 * x


def _uniform_x(seed=0):
    np.random.seed(seed)
    x = np.random.uniform(-1, 1, (2, 3))
    x.attach_grad()
    return x


def test_tutorial_random_uniform_shape_and_range():
    x = _uniform_x()
    data = to_numpy(x)
    assert data.shape == (2, 3)
    assert onp.all(data >= -1.0) and onp.all(data < 1.0)
    # seeding makes it reproducible
    assert_close(_uniform_x(), data, rtol=0, atol=0)


def test_tutorial_train_mode_switch_outside_record_is_identity():
    x = _uniform_x()
    y = my_first_function(x)
    assert onp.array_equal(to_numpy(y), to_numpy(x))


def test_tutorial_record_train_mode_false_uses_predict_branch():
    x = _uniform_x()
    with autograd.record(train_mode=False):
        y = my_first_function(x)
    assert onp.array_equal(to_numpy(y), to_numpy(x))
    y.backward()
    assert_close(x.grad, onp.ones((2, 3), dtype=onp.float32), rtol=0, atol=0)


def test_tutorial_record_train_mode_true_uses_training_branch():
    x = _uniform_x()
    with autograd.record(train_mode=True):
        y = my_first_function(x)
    assert_close(y, 4 * to_numpy(x), rtol=1e-6, atol=0)
    y.backward()
    assert_close(x.grad, onp.full((2, 3), 4.0, dtype=onp.float32), rtol=0, atol=0)


def test_tutorial_function_that_records_itself():
    """A ``return`` inside ``with record()`` still records and still leaves the scope."""
    x = _uniform_x()
    y = my_second_function(x)
    assert not autograd.is_recording()
    assert not autograd.is_training()
    y.backward()
    assert_close(x.grad, onp.full((2, 3), 2.0, dtype=onp.float32), rtol=0, atol=0)


def test_tutorial_combining_recording_functions():
    x = _uniform_x()
    y = my_second_function(x)
    with autograd.record():
        z = my_second_function(y) + 2
    assert_close(z, 4 * to_numpy(x) + 2, rtol=1e-6, atol=1e-6)
    z.backward()
    assert_close(x.grad, onp.full((2, 3), 4.0, dtype=onp.float32), rtol=0, atol=0)


# --------------------------------------------------------------------------
# Control flow: doubling loop and a data dependent branch
# --------------------------------------------------------------------------

def doubling_f(a):
    b = a * 2
    while np.abs(b).sum() < 1000:
        b = b * 2
    if b.sum() >= 0:
        c = b[0]
    else:
        c = b[1]
    return c


def _doublings(a):
    """Number k with c = 2**k * a[i], computed with NumPy."""
    b = a * 2
    k = 1
    while onp.abs(b).sum() < 1000:
        b = b * 2
        k += 1
    return k


def test_tutorial_doubling_loop_random_input_picks_first_element():
    """uniform(size=2) is non-negative, so ``b.sum() >= 0`` and ``c = b[0]``:
    ``a.grad == c / a`` is exactly ``[True, False]``."""
    np.random.seed(1)
    a = np.random.uniform(size=2)
    a.attach_grad()
    with autograd.record():
        c = doubling_f(a)
    c.backward()
    a_np = to_numpy(a)
    assert onp.all(a_np > 0)
    k = _doublings(a_np)
    assert_close(a.grad, onp.array([2.0 ** k, 0.0], dtype=a_np.dtype), rtol=0, atol=0)
    result = to_numpy(a.grad == c / a)
    assert result.dtype == onp.bool_
    assert result.tolist() == [True, False]


def test_tutorial_doubling_loop_negative_input_picks_second_element():
    a = np.array([-0.3, -0.05])
    a.attach_grad()
    with autograd.record():
        c = doubling_f(a)
    c.backward()
    k = _doublings(onp.array([-0.3, -0.05], dtype=onp.float32))
    assert_close(c, onp.float32(-0.05) * onp.float32(2.0 ** k), rtol=0, atol=0)
    assert_close(a.grad, onp.array([0.0, 2.0 ** k], dtype=onp.float32), rtol=0, atol=0)
    assert to_numpy(a.grad == c / a).tolist() == [False, True]


# --------------------------------------------------------------------------
# attach_grad on an intermediate inside record()
# --------------------------------------------------------------------------

def test_tutorial_attach_grad_on_intermediate_keeps_history():
    x = _uniform_x()
    with autograd.record():
        y = 3 * x
        y.attach_grad()
        z = 4 * y + 2 * x
    z.backward()
    assert_close(x.grad, onp.full((2, 3), 14.0, dtype=onp.float32), rtol=0, atol=0)
    assert_close(y.grad, onp.full((2, 3), 4.0, dtype=onp.float32), rtol=0, atol=0)


def test_tutorial_without_attach_on_intermediate():
    x = _uniform_x()
    with autograd.record():
        y = 3 * x
        z = 4 * y + 2 * x
    z.backward()
    assert_close(x.grad, onp.full((2, 3), 14.0, dtype=onp.float32), rtol=0, atol=0)
    assert y.grad is None


# --------------------------------------------------------------------------
# The autograd.grad docstring example (create_graph=True)
# --------------------------------------------------------------------------

def test_docs_grad_create_graph_example():
    """z = exp(x) + x: dz/dx = exp(x) + 1 (3.71828 at x = 1); differentiating
    that again gives exp(x) (2.71828), which lands in ``x.grad``."""
    x = nd.ones((1,))
    x.attach_grad()
    with autograd.record():
        z = nd.elemwise_add(nd.exp(x), x)
    dx = autograd.grad(z, [x], create_graph=True)
    assert isinstance(dx, list) and len(dx) == 1
    assert dx[0].shape == (1,)
    assert dx[0].dtype == onp.float32
    assert_close(dx[0], onp.array([math.e + 1.0], dtype=onp.float32), rtol=1e-6)
    # grad() leaves x.grad alone
    assert_close(x.grad, onp.zeros((1,), dtype=onp.float32), rtol=0, atol=0)
    dx[0].backward()
    assert x.grad.dtype == onp.float32
    assert_close(x.grad, onp.array([math.e], dtype=onp.float32), rtol=1e-6)


def test_docs_grad_create_graph_example_backward_on_list():
    """The docstring calls backward on the list grad() returns: autograd.backward takes lists."""
    x = nd.ones((1,))
    x.attach_grad()
    with autograd.record():
        z = nd.elemwise_add(nd.exp(x), x)
    dx = autograd.grad(z, [x], create_graph=True)
    autograd.backward(dx)
    assert_close(x.grad, onp.array([math.e], dtype=onp.float32), rtol=1e-6)


# --------------------------------------------------------------------------
# autograd.Function examples
# --------------------------------------------------------------------------

class TestFunctionExamples:
    """Custom differentiation with ``autograd.Function`` (tutorial and docs examples)."""

    def test_tutorial_custom_operation_returns_custom_gradients(self):
        """The tutorial's op returns the inputs themselves as their 'gradients'."""
        np.random.seed(2)
        x = np.random.uniform(-1, 1, (2, 3))
        y = np.random.uniform(-1, 1, (2, 3))
        x.attach_grad()
        y.attach_grad()

        class MyFirstCustomOperation(autograd.Function):
            def __init__(self):
                super().__init__()

            def forward(self, x_in, y_in):
                return 2 * x_in, 2 * x_in * y_in, 2 * y_in

            def backward(self, dx, dxy, dy):
                return x, y

        with autograd.record():
            op = MyFirstCustomOperation()
            z1, z2, z3 = op(x, y)
            out = z1 + z2 + z3
        xn, yn = to_numpy(x), to_numpy(y)
        assert_close(z1, 2 * xn, rtol=1e-6, atol=1e-7)
        assert_close(z2, 2 * xn * yn, rtol=1e-6, atol=1e-7)
        assert_close(z3, 2 * yn, rtol=1e-6, atol=1e-7)
        assert_close(out, 2 * xn + 2 * xn * yn + 2 * yn, rtol=1e-5, atol=1e-6)
        out.backward()
        assert onp.array_equal(to_numpy(x.grad), xn)
        assert onp.array_equal(to_numpy(y.grad), yn)
        # the gradients are copies, not the variables themselves
        assert x.grad is not x and y.grad is not y
        assert onp.array_equal(to_numpy(x), xn)

    @staticmethod
    def _sigmoid_class(use_head_grad):
        class sigmoid(mx.autograd.Function):
            def forward(self, x):
                y = 1 / (1 + mx.nd.exp(-x))
                self.save_for_backward(y)
                return y

            def backward(self, dy):
                (y,) = self.saved_tensors
                if use_head_grad:
                    return dy * y * (1 - y)
                return y * (1 - y)

        return sigmoid

    @pytest.mark.parametrize("use_head_grad", [True, False], ids=["docs_page", "source_docstring"])
    def test_docs_stable_sigmoid(self, use_head_grad):
        func = self._sigmoid_class(use_head_grad)()
        x = mx.nd.random.uniform(shape=(10,))
        x.attach_grad()
        with mx.autograd.record():
            m = func(x)
        m.backward()
        dx = x.grad.asnumpy()
        xn = x.asnumpy().astype(onp.float64)
        assert onp.all(xn >= 0) and onp.all(xn < 1)
        s = 1.0 / (1.0 + onp.exp(-xn))
        assert_close(m, s.astype(onp.float32), rtol=1e-6, atol=1e-7)
        assert dx.dtype == onp.float32
        onp.testing.assert_allclose(dx, s * (1 - s), rtol=1e-5, atol=1e-7)

    def test_docs_stable_sigmoid_uses_head_gradient(self):
        func = self._sigmoid_class(True)()
        x = mx.nd.array([-2.0, -0.5, 0.0, 0.5, 3.0])
        x.attach_grad()
        head = onp.array([1.0, 2.0, -1.0, 0.5, 4.0], dtype=onp.float32)
        with mx.autograd.record():
            m = func(x)
        m.backward(mx.nd.array(head))
        xn = onp.array([-2.0, -0.5, 0.0, 0.5, 3.0])
        s = 1.0 / (1.0 + onp.exp(-xn))
        onp.testing.assert_allclose(x.grad.asnumpy(), head * s * (1 - s), rtol=1e-5, atol=1e-7)
