"""Writes into arrays a graph saved are caught by version counters, views included."""

import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastgrad import autograd, np  # noqa: E402

from _helpers import assert_close, variable as var  # noqa: E402


# ---------------------------------------------------------------- in-place mutation (versions)

def test_inplace_on_saved_input_then_backward_raises_naming_the_op():
    x = var([1.0, 2.0])
    w = np.array(onp.array([3.0, 4.0]))
    w.attach_grad()
    with autograd.record():
        y = (x * w).sum()
    w += 1.0  # outside record: allowed, but multiply saved w
    with pytest.raises(RuntimeError, match="multiply.*modified in place"):
        y.backward()


def test_inplace_on_saved_result_then_backward_raises():
    x = var([0.5, 1.0])
    with autograd.record():
        y = np.exp(x)  # exp's rule reads its result
    y[0] = 10.0
    with pytest.raises(RuntimeError, match="exp.*modified in place"):
        y.backward()


def test_inplace_on_unsaved_input_is_harmless():
    x = var([1.0, 2.0])
    c = np.array(onp.array([5.0, 6.0]))
    with autograd.record():
        y = (x + c).sum()  # add saves nothing
    c += 1.0
    y.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), [1.0, 1.0])


def test_inplace_inside_record_on_graph_array_raises():
    x = var([1.0, 2.0])
    with autograd.record():
        y = x * 2
        with pytest.raises(RuntimeError, match="in-place"):
            y += 1
        with pytest.raises(RuntimeError, match="in-place"):
            x[0] = 3.0          # a variable; y[0] = 3.0 is recorded (test_mxnet_compat)
        with pytest.raises(RuntimeError, match="in-place"):
            x *= 2


def test_parameter_update_outside_record_is_allowed():
    x = var([1.0, 2.0])
    for _ in range(3):
        with autograd.record():
            y = (x * x).sum()
        y.backward()
        x -= 0.1 * x.grad
    onp.testing.assert_allclose(x.asnumpy(), onp.array([1.0, 2.0]) * 0.8 ** 3)


# ---------------------------------------------------------------- views share versions

def _saved_view_base_written():
    x = var([1.0, 2.0])
    with autograd.record():
        v = x[0:1]
        z = (v * v).sum()
    x[0] = 100.0
    return z


def _saved_base_view_written():
    x = var([1.0, 2.0])
    with autograd.record():
        z = (x * x).sum()
    v = x[0:1]
    v[:] = 100.0
    return z


def _saved_base_transpose_written():
    x = np.array(onp.array([[1.0, 2.0]]))
    x.attach_grad()
    with autograd.record():
        z = (x * x).sum()
    x.T[0] = 100.0
    return z


def _saved_result_view_written():
    x = var([1.0, 2.0])
    with autograd.record():
        y = np.exp(x)
        z = y.sum()
    y.reshape((2, 1))[0] = 5.0
    return z


def _saved_base_detached_alias_written():
    x = var([1.0, 2.0])
    with autograd.record():
        z = (x * x).sum()
    d = x.detach()
    d += 1.0
    return z


@pytest.mark.parametrize("make", [
    _saved_view_base_written, _saved_base_view_written, _saved_base_transpose_written,
    _saved_result_view_written, _saved_base_detached_alias_written])
def test_writes_through_views_are_caught(make):
    """Views made by fastgrad share their memory's version (Note [Versions])."""
    z = make()
    with pytest.raises(RuntimeError, match="modified in place"):
        z.backward()


def test_writing_a_copy_is_not_mistaken_for_a_view():
    x = var([1.0, 2.0, 3.0])
    with autograd.record():
        z = (x * x).sum()
    c = x[onp.array([0, 2])]   # advanced indexing copies
    c[0] = 50.0
    r = x.reshape((3, 1)) + 0
    r[0] = 5.0
    z.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 4.0, 6.0])


# ---------------------------------------------------------------- item 6: Function saves
class _Mul(autograd.Function):
    def forward(self, x, w):
        self.save_for_backward(x, w)
        return x * w

    def backward(self, dy):
        x, w = self.saved_tensors
        return dy * w, dy * x


def test_function_saved_tensor_modified_in_place_raises():
    x, w = var([1.0, 2.0]), var([3.0, 4.0])
    with autograd.record():
        y = _Mul()(x, w)
    w += 10
    with pytest.raises(RuntimeError, match="_Mul: saved tensor 1 .*modified in place"):
        y.backward()


def test_function_saved_tensor_untouched_gives_right_gradient():
    x, w = var([1.0, 2.0]), var([3.0, 4.0])
    with autograd.record():
        y = _Mul()(x, w)
    y.backward()
    assert_close(x.grad, [3.0, 4.0])
    assert_close(w.grad, [1.0, 2.0])


def test_function_saved_view_written_through_the_base_raises():
    x, w = var([1.0, 2.0]), var([3.0, 4.0])
    with autograd.record():
        y = _Mul()(x, w)
    w.T[0] = 5.0                     # a view of the saved w shares its version cell
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()
