"""Reductions over an empty axis: a value (or NumPy's NaN) and a gradient, or an error that
names the function the user called (issue 25)."""
import warnings

import numpy as onp
import pytest

from fastgrad import np, autograd


def value_and_gradient(f, x0):
    x = np.array(x0, dtype="float64")
    x.attach_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # NumPy's mean of nothing
        with autograd.record():
            y = f(x)
        y.backward()
    return y.asnumpy(), x.grad.asnumpy()


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("shape,axis", [((3, 0), 1), ((0, 4), 0), ((0,), None)])
def test_variance_over_an_empty_axis_matches_numpy_and_has_an_empty_gradient(name, shape,
                                                                             axis):
    f = getattr(np, name)
    value, grad = value_and_gradient(lambda x: f(x, axis=axis), onp.zeros(shape))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = getattr(onp, name)(onp.zeros(shape), axis=axis)
    assert onp.array_equal(value, expected, equal_nan=True)
    assert grad.shape == shape


@pytest.mark.parametrize("name", ["var", "std"])
def test_variance_with_ddof_equal_to_the_count_is_nan_with_a_nan_gradient(name):
    value, grad = value_and_gradient(lambda x: getattr(np, name)(x, axis=1, ddof=1),
                                     [[3.0], [5.0]])
    assert onp.isnan(value).all() and onp.isnan(grad).all()


@pytest.mark.parametrize("ord", [1, onp.inf])
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0)])
def test_one_and_inf_norms_of_an_empty_matrix_are_zero(ord, shape):
    value, grad = value_and_gradient(lambda x: np.linalg.norm(x, ord=ord), onp.zeros(shape))
    assert value.shape == () and value == 0.0 and value.dtype == onp.float64
    assert grad.shape == shape


def test_empty_matrix_norm_over_named_axes_keeps_the_other_axes():
    value, grad = value_and_gradient(
        lambda x: np.linalg.norm(x, ord=1, axis=(1, 2), keepdims=True), onp.zeros((2, 0, 3)))
    assert value.shape == (2, 1, 1) and not value.any()
    assert grad.shape == (2, 0, 3)


@pytest.mark.parametrize("ord", [-1, -onp.inf])
def test_minimum_norms_of_an_empty_matrix_raise_naming_norm(ord):
    with pytest.raises(ValueError, match=r"linalg\.norm: ord=.* of an empty matrix"):
        np.linalg.norm(np.zeros((0, 3)), ord=ord)


def test_float32_empty_matrix_norm_stays_float32():
    assert np.linalg.norm(np.zeros((0, 3), dtype="float32"), ord=1).dtype == onp.float32


def test_diff_over_an_empty_axis_and_at_second_order():
    value, grad = value_and_gradient(lambda x: np.diff(x, axis=1).sum(), onp.zeros((3, 0)))
    assert value == 0.0 and grad.shape == (3, 0)
    a = onp.linspace(-1, 1, 12).reshape(3, 4)
    x = np.array(a)
    x.attach_grad()
    with autograd.record():
        gx = autograd.grad(np.diff(np.sin(x), axis=1).sum(), x, create_graph=True)[0]
        (gx * gx).sum().backward()
    # d/dx of sum((cos(x) * c)^2), c = column weights of sum(diff): -1, 0, 0, 1 per row
    c = onp.array([-1.0, 0.0, 0.0, 1.0])
    expected = -2 * onp.cos(a) * onp.sin(a) * c ** 2
    assert onp.allclose(x.grad.asnumpy(), expected, rtol=1e-14, atol=1e-15)
