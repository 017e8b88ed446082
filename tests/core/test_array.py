"""The array type: its basics, the creation functions, and its meeting with NumPy.
"""
import os
import sys

import numpy as onp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastgrad import autograd, nd, np  # noqa: E402

from _helpers import assert_close, f64, to_numpy  # noqa: E402


class TestNumpyInterop:
    def test_asarray_gives_data(self):
        xn = onp.array([[1.5, -2.0], [0.25, 4.0]])
        x = f64(xn)
        a = onp.asarray(x)
        assert isinstance(a, onp.ndarray)
        assert a.dtype == onp.float64
        assert onp.array_equal(a, xn)
        b = onp.asarray(np.array([1, 2, 3]))
        assert b.dtype == onp.float32 and b.tolist() == [1.0, 2.0, 3.0]

    def test_numpy_ufunc_dispatches_and_is_recorded(self):
        xn = onp.array([0.1, 1.2, -2.3])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = onp.sin(x)
        assert isinstance(y, type(x))
        assert_close(y, onp.sin(xn), rtol=1e-15)
        y.backward()
        assert_close(x.grad, onp.cos(xn), rtol=1e-15)

    def test_numpy_functions_compose_with_fastgrad_ops(self):
        xn = onp.array([0.1, 1.2, -2.3])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = onp.sum(onp.exp(x) * np.tanh(x)) + onp.mean(onp.multiply(x, x))
        assert isinstance(y, type(x))
        y.backward()
        t = onp.tanh(xn)
        expected = onp.exp(xn) * t + onp.exp(xn) * (1 - t ** 2) + 2 * xn / 3
        assert_close(x.grad, expected, rtol=1e-12)

    def test_numpy_array_on_the_left_of_an_operator(self):
        xn = onp.array([1.0, 2.0, 3.0])
        cn = onp.array([0.5, -1.0, 2.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = cn * x + cn
        assert isinstance(y, type(x))
        y.backward()
        assert_close(x.grad, cn)

    def test_numpy_maximum_ufunc_is_recorded(self):
        xn = onp.array([-1.0, 0.5, 2.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = onp.maximum(x, 0.25)
        y.backward()
        assert_close(x.grad, [0.0, 1.0, 1.0])


# ==========================================================================
# Array basics and creation functions
# ==========================================================================

class TestArrayBasics:
    def test_attributes(self):
        x = np.array([[1, 2, 3], [4, 5, 6]])
        assert x.shape == (2, 3)
        assert x.ndim == 2
        assert x.size == 6
        assert x.T.shape == (3, 2)
        assert_close(x.T, onp.array([[1, 4], [2, 5], [3, 6]], dtype=onp.float32))
        s = np.sum(x).item()
        assert isinstance(s, float) and s == 21.0

    def test_copy_is_independent(self):
        x = np.array([1.0, 2.0, 3.0])
        c = x.copy()
        c[0] = 100.0
        assert to_numpy(x).tolist() == [1.0, 2.0, 3.0]
        assert to_numpy(c).tolist() == [100.0, 2.0, 3.0]

    def test_copy_inside_record_is_differentiable(self):
        x = f64([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = x.copy() * x
        y.backward()
        assert_close(x.grad, [2.0, 4.0])

    def test_creation_functions(self):
        assert_close(np.zeros((2, 3)), onp.zeros((2, 3)))
        assert_close(np.ones((2,)), onp.ones((2,)))
        assert_close(np.full((2, 2), 7.0), onp.full((2, 2), 7.0))
        assert_close(np.arange(5), onp.arange(5.0))
        assert_close(np.arange(1, 3, 0.5), onp.array([1.0, 1.5, 2.0, 2.5]))
        base = f64(onp.ones((2, 3)))
        z = np.zeros_like(base)
        o = np.ones_like(base)
        assert z.dtype == onp.float64 and o.dtype == onp.float64
        assert_close(z, onp.zeros((2, 3)))
        assert_close(o, onp.ones((2, 3)))
        assert_close(nd.zeros((2, 2)), onp.zeros((2, 2), dtype=onp.float32))
        assert_close(nd.ones((3,)), onp.ones((3,), dtype=onp.float32))

    def test_random_seed_reproducible_and_in_range(self):
        np.random.seed(123)
        a = to_numpy(np.random.uniform(2.0, 5.0, size=(1000,)))
        np.random.seed(123)
        b = to_numpy(np.random.uniform(2.0, 5.0, size=(1000,)))
        assert onp.array_equal(a, b)
        assert a.shape == (1000,)
        assert a.min() >= 2.0 and a.max() < 5.0
        assert abs(a.mean() - 3.5) < 0.15

    def test_random_normal_moments(self):
        np.random.seed(7)
        a = to_numpy(np.random.normal(1.0, 2.0, size=(20000,))).astype(onp.float64)
        assert abs(a.mean() - 1.0) < 0.1
        assert abs(a.std() - 2.0) < 0.1

    def test_nd_random_uniform(self):
        a = nd.random.uniform(shape=(500,))
        assert a.shape == (500,)
        assert a.dtype == onp.float32
        an = to_numpy(a)
        assert an.min() >= 0.0 and an.max() < 1.0
        assert an.std() > 0.1
