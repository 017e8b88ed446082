"""Differentiability follows output dtypes: casts, integer and bool results, integer functions.

Issue 12, item 1 (Note [Zero gradients] in fastgrad/_core/_zeros.py). Every value is a closed form
or a float64 finite difference.
"""

import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastgrad import autograd, np  # noqa: E402

from _helpers import assert_close, variable as var  # noqa: E402


X = [0.0, 1.5, -2.0]


# ---------------------------------------------------------------- item 1: casts and dtypes
def test_cast_to_integer_has_zero_derivative():
    x = var(X)
    with autograd.record():
        y = (x.astype("int64") * 2.5).sum()
    y.backward()
    assert_close(x.grad, onp.zeros(3))
    assert float(y) == (onp.array(X).astype("int64") * 2.5).sum()


def test_cast_to_bool_mask_times_x():
    x = var(X)
    with autograd.record():
        y = (x.astype(bool) * x).sum()
    y.backward()
    assert_close(x.grad, [0.0, 1.0, 1.0])


def test_sum_with_integer_dtype_has_zero_derivative():
    x = var(X)
    with autograd.record():
        y = np.sum(1.5 * x, dtype="int64")
    assert y.dtype == onp.int64 and int(y) == onp.sum(1.5 * onp.array(X), dtype="int64")
    y.backward()
    assert_close(x.grad, onp.zeros(3))


def test_integer_and_bool_results_are_zero_nodes():
    x = var(X)
    with autograd.record():
        for r in (x > 0, x.astype("int32"), np.isnan(x), np.floor_divide(x, 1).astype(int)):
            assert r.node is not None and not r.node.carries_gradient
        f = x.astype("float32")
    assert f.node.carries_gradient


def test_comparison_head_gives_zeros_as_mxnet():
    x = var(X)
    with autograd.record():
        y = (x > 0).sum()
    y.backward()
    assert_close(x.grad, onp.zeros(3))


def test_integer_ops_on_integer_variables_carry_gradients_as_mxnet():
    k = np.array(onp.array([1, 2, 3], dtype="int32"))
    k.attach_grad()
    with autograd.record():
        y = k * k + 2 * k
    assert y.node.carries_gradient
    y.backward()
    assert k.grad.dtype == onp.int32 and k.grad.asnumpy().tolist() == [4, 6, 8]


def test_integer_variable_cast_to_float_passes_gradient():
    # MXNet: x int64 variable, y = sum(2.5 * float(x)) gives x.grad == 2 (cast to int64).
    n = np.array(onp.array([1, 2], dtype="int64"))
    n.attach_grad()
    with autograd.record():
        y = (n.astype("float64") * 2.5).sum()
    y.backward()
    assert n.grad.dtype == onp.int64
    assert n.grad.asnumpy().tolist() == [2, 2]


def test_bool_arrays_cannot_be_variables():
    with pytest.raises(TypeError, match="bool"):
        np.array(onp.array([True])).attach_grad()


def test_float_cast_chain_keeps_gradient():
    x = var([0.3, -1.2])
    with autograd.record():
        y = (x.astype("float32").astype("float64") ** 2).sum()
    y.backward()
    assert_close(x.grad, 2 * onp.array([0.3, -1.2], dtype="float32").astype("float64"),
                 rtol=1e-6)


# ---------------------------------------------------------------- integer results of functions
@pytest.mark.parametrize("name,fn", [
    ("argmax", lambda v: np.argmax(v)), ("argmin", lambda v: np.argmin(v)),
    ("argsort", lambda v: np.argsort(v)), ("nonzero", lambda v: np.nonzero(v)[0]),
    ("flatnonzero", np.flatnonzero), ("argwhere", np.argwhere),
    ("count_nonzero", np.count_nonzero), ("searchsorted", lambda v: np.searchsorted(v, 0.7)),
    ("isclose", lambda v: np.isclose(v, 0.5)), ("all", np.all), ("any", np.any),
])
def test_integer_results_reach_their_inputs_with_zero_gradient(name, fn):
    x = var([0.5, 1.5, -2.0, 0.25])
    with autograd.record():
        r = fn(x)
        y = (r * 1.0).sum()
    assert r.node is not None and not r.node.carries_gradient
    assert_close(autograd.grad(y, [x])[0], onp.zeros(4))


def test_unique_values_are_a_recorded_selection():
    xv = onp.array([0.5, 1.5, 0.5, -2.0])
    x = var(xv)
    with autograd.record():
        u, first, counts = np.unique(x, return_index=True, return_counts=True)
        y = (u * u * counts).sum()
    assert u.asnumpy().tolist() == [-2.0, 0.5, 1.5]
    assert first.asnumpy().tolist() == [3, 0, 1] and counts.asnumpy().tolist() == [1, 2, 1]
    # d/dx of sum(u_k^2 c_k), u_k = x[first_k]: 2 x c at each first occurrence
    assert_close(autograd.grad(y, [x])[0], [2 * 0.5 * 2, 2 * 1.5, 0.0, 2 * -2.0])


def test_bincount_is_differentiable_in_its_weights():
    w = var([1.0, 2.0, 3.0, 4.0])
    idx = onp.array([0, 2, 2, 1])
    with autograd.record():
        b = np.bincount(np.array(idx), w, minlength=4)
        y = (b * np.array(onp.array([1.0, 10.0, 100.0, 1000.0]))).sum()
    assert_close(b, onp.bincount(idx, [1.0, 2.0, 3.0, 4.0], minlength=4))
    assert_close(autograd.grad(y, [w])[0], [1.0, 100.0, 100.0, 10.0])


def test_histogram_counts_carry_no_gradient_and_float_results_raise():
    x = var([0.5, 1.5, -2.0])
    with autograd.record():
        h, edges = np.histogram(x, bins=3, range=(-3, 3))
        assert not h.node.carries_gradient
        with pytest.raises(NotImplementedError, match="histogram"):
            np.histogram(x)
    h, edges = np.histogram(x.detach())
    assert h.asnumpy().sum() == 3


def test_a_reached_variable_with_zero_gradient_allocates_nothing_until_read():
    # Note [Zero gradients]: the zero stays symbolic in the lazy .grad buffer.
    x = var([0.4, 1.6])
    with autograd.record():
        y = np.floor(x).sum()
    y.backward()
    assert_close(x.grad, [0.0, 0.0])
    x.grad[...] = 5.0                # an existing buffer is overwritten with zeros
    with autograd.record():
        y = np.floor(x).sum()
    y.backward()
    assert_close(x.grad, [0.0, 0.0])


def test_writing_float_values_into_an_integer_array_cuts_their_gradient():
    # The write truncates y to integers: a cast whose derivative is zero. The float part of
    # the same head still gets its gradient.
    k = np.array(onp.arange(6, dtype=onp.int32))
    y = np.array(onp.array([0.25, 1.75]))
    y.attach_grad()
    with autograd.record():
        k[1:3] = y
        loss = (k * 2.0).sum() + (y * y).sum()
    loss.backward()
    onp.testing.assert_array_equal(k.asnumpy(), [0, 0, 1, 3, 4, 5])
    onp.testing.assert_allclose(y.grad.asnumpy(), [0.5, 3.5], rtol=0, atol=0)
