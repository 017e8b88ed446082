"""Tests of the public ``fastgrad.autograd`` API and of differentiation through the
array operations, checked against closed forms and float64 finite differences."""
import math
import os
import re
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fastgrad import autograd, nd, np, npx  # noqa: E402

from _helpers import (  # noqa: E402
    assert_close,
    f64,
    numerical_grad,
    to_numpy,
)

FD_RTOL = 1e-6
FD_ATOL = 1e-7


def _rng(seed=0):
    return onp.random.RandomState(seed)


def _state():
    return (autograd.is_recording(), autograd.is_training())


def check_against_fd(fg_fn, onp_fn, *inputs, head=None):
    """Record ``fg_fn`` on float64 copies of ``inputs``, run backward (with ``head`` as
    head gradient if given) and compare the gradients with finite differences of
    ``sum(head * onp_fn(...))``."""
    inputs = [onp.asarray(a, dtype=onp.float64) for a in inputs]
    xs = [f64(a) for a in inputs]
    for x in xs:
        x.attach_grad()
    with autograd.record():
        y = fg_fn(*xs)
    expected_y = onp.asarray(onp_fn(*inputs))
    assert_close(y, expected_y, rtol=1e-12, atol=1e-12)
    if head is None:
        y.backward()
        ref = onp_fn
    else:
        y.backward(f64(head))

        def ref(*a):
            return onp_fn(*a) * head

    fd = numerical_grad(ref, *inputs)
    for x, g in zip(xs, fd):
        assert x.grad.dtype == onp.float64
        assert_close(x.grad, g, rtol=FD_RTOL, atol=FD_ATOL)
    return xs


# ==========================================================================
# Recording / training state and scopes
# ==========================================================================

class TestScopes:
    def test_default_state_is_not_recording_not_training(self):
        assert autograd.is_recording() is False
        assert autograd.is_training() is False

    def test_record_sets_recording_and_training_and_restores(self):
        with autograd.record():
            assert _state() == (True, True)
        assert _state() == (False, False)

    def test_record_with_train_mode_false(self):
        with autograd.record(train_mode=False):
            assert _state() == (True, False)
        assert _state() == (False, False)

    def test_pause_inside_record(self):
        with autograd.record():
            with autograd.pause():
                assert _state() == (False, False)
            assert _state() == (True, True)
        assert _state() == (False, False)

    def test_pause_with_train_mode_true(self):
        with autograd.record(train_mode=False):
            with autograd.pause(train_mode=True):
                assert _state() == (False, True)
            assert _state() == (True, False)

    def test_train_mode_does_not_change_recording(self):
        with autograd.train_mode():
            assert _state() == (False, True)
        assert _state() == (False, False)
        with autograd.record(train_mode=False):
            with autograd.train_mode():
                assert _state() == (True, True)
            assert _state() == (True, False)

    def test_predict_mode_does_not_change_recording(self):
        with autograd.record():
            with autograd.predict_mode():
                assert _state() == (True, False)
            assert _state() == (True, True)
        autograd.set_training(True)
        with autograd.predict_mode():
            assert _state() == (False, False)
        assert _state() == (False, True)

    def test_deep_nesting_restores_each_level(self):
        seen = []
        with autograd.record():
            seen.append(_state())
            with autograd.predict_mode():
                seen.append(_state())
                with autograd.pause(train_mode=True):
                    seen.append(_state())
                    with autograd.record(train_mode=False):
                        seen.append(_state())
                        with autograd.train_mode():
                            seen.append(_state())
                        seen.append(_state())
                    seen.append(_state())
                seen.append(_state())
            seen.append(_state())
        seen.append(_state())
        assert seen == [
            (True, True),
            (True, False),
            (False, True),
            (True, False),
            (True, True),
            (True, False),
            (False, True),
            (True, False),
            (True, True),
            (False, False),
        ]

    def test_record_inside_record_restores_outer_train_mode(self):
        with autograd.record(train_mode=True):
            with autograd.record(train_mode=False):
                assert _state() == (True, False)
            assert _state() == (True, True)

    def test_scopes_restore_manually_set_state(self):
        autograd.set_training(True)
        with autograd.record(train_mode=False):
            assert _state() == (True, False)
        assert _state() == (False, True)
        autograd.set_recording(True)
        with autograd.pause():
            assert _state() == (False, False)
        assert _state() == (True, True)

    @pytest.mark.parametrize(
        "make_scope",
        [
            lambda: autograd.record(),
            lambda: autograd.record(train_mode=False),
            lambda: autograd.pause(),
            lambda: autograd.pause(train_mode=True),
            lambda: autograd.train_mode(),
            lambda: autograd.predict_mode(),
        ],
        ids=["record", "record_predict", "pause", "pause_train", "train_mode", "predict_mode"],
    )
    @pytest.mark.parametrize("initial", [(False, False), (True, True), (True, False), (False, True)])
    def test_scope_restores_state_on_exception(self, make_scope, initial):
        autograd.set_recording(initial[0])
        autograd.set_training(initial[1])

        class Boom(Exception):
            pass

        with pytest.raises(Boom):
            with make_scope():
                raise Boom()
        assert _state() == initial

    def test_exception_in_inner_scope_restores_outer_scope(self):
        with autograd.record():
            with pytest.raises(KeyError):
                with autograd.pause():
                    with autograd.predict_mode():
                        raise KeyError("inner")
            assert _state() == (True, True)
        assert _state() == (False, False)

    def test_set_recording_returns_previous_state(self):
        assert autograd.set_recording(True) is False
        assert autograd.is_recording() is True
        assert autograd.set_recording(True) is True
        assert autograd.set_recording(False) is True
        assert autograd.set_recording(False) is False
        assert autograd.is_recording() is False

    def test_set_training_returns_previous_state(self):
        assert autograd.set_training(True) is False
        assert autograd.is_training() is True
        assert autograd.set_training(True) is True
        assert autograd.set_training(False) is True
        assert autograd.set_training(False) is False
        assert autograd.is_training() is False

    def test_set_recording_and_training_are_independent(self):
        autograd.set_recording(True)
        assert _state() == (True, False)
        autograd.set_training(True)
        autograd.set_recording(False)
        assert _state() == (False, True)

    def test_set_recording_records_like_record_scope(self):
        x = f64([1.0, 2.0, 3.0])
        x.attach_grad()
        autograd.set_recording(True)
        y = x * x
        autograd.set_recording(False)
        y.backward()
        assert_close(x.grad, [2.0, 4.0, 6.0])


class TestWhatIsRecorded:
    def test_pause_inside_record_treats_value_as_constant(self):
        """z = y * c with y = x^2 and c = y computed under pause(): dz/dx = 2x * x^2 = 2x^3
        (it would be 4x^3 if c were recorded)."""
        xn = onp.array([0.5, 1.5, -2.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = x * x
            with autograd.pause():
                c = y * 1.0
            z = y * c
        z.backward()
        assert_close(x.grad, 2 * xn ** 3)

    def test_ops_outside_record_have_no_history(self):
        x = f64([1.0, 2.0])
        x.attach_grad()
        y = x * 2
        assert_close(y, [2.0, 4.0])
        with pytest.raises(RuntimeError):
            y.backward()
        assert_close(x.grad, [0.0, 0.0])

    def test_arrays_not_depending_on_a_variable_are_not_recorded(self):
        with autograd.record():
            c = np.ones((3,)) * 2
        assert_close(c, onp.full(3, 2.0, dtype=onp.float32))
        with pytest.raises(RuntimeError):
            c.backward()

    def test_unattached_input_gets_no_gradient(self):
        x = f64([1.0, 2.0])
        w = f64([3.0, 4.0])
        x.attach_grad()
        with autograd.record():
            y = x * w
        y.backward()
        assert_close(x.grad, [3.0, 4.0])
        assert w.grad is None


# ==========================================================================
# grad_req and mark_variables
# ==========================================================================

class TestGradReq:
    def test_write_overwrites(self):
        xn = onp.array([1.0, -2.0, 3.0])
        x = f64(xn)
        x.attach_grad(grad_req="write")
        with autograd.record():
            y = 3 * x
        y.backward()
        assert_close(x.grad, [3.0, 3.0, 3.0])
        with autograd.record():
            y = x * x
        y.backward()
        assert_close(x.grad, 2 * xn)

    def test_default_grad_req_is_write(self):
        x = f64([1.0, 2.0])
        x.attach_grad()
        for _ in range(3):
            with autograd.record():
                y = 5 * x
            y.backward()
        assert_close(x.grad, [5.0, 5.0])

    def test_add_accumulates_across_backward_calls(self):
        xn = onp.array([1.0, -2.0, 3.0])
        x = f64(xn)
        x.attach_grad(grad_req="add")
        with autograd.record():
            y = 3 * x
        y.backward()
        assert_close(x.grad, [3.0, 3.0, 3.0])
        with autograd.record():
            y = x * x
        y.backward()
        assert_close(x.grad, 3.0 + 2 * xn)
        with autograd.record():
            y = np.sin(x)
        y.backward()
        assert_close(x.grad, 3.0 + 2 * xn + onp.cos(xn), rtol=1e-12)

    def test_add_with_retained_graph_accumulates_same_gradient(self):
        xn = onp.array([0.5, 2.0])
        x = f64(xn)
        x.attach_grad(grad_req="add")
        with autograd.record():
            y = x ** 3
        y.backward(retain_graph=True)
        y.backward(retain_graph=True)
        y.backward()
        assert_close(x.grad, 3 * 3 * xn ** 2)

    def test_null_leaves_grad_unchanged(self):
        x = f64([1.0, 2.0, 3.0])
        w = f64([4.0, 5.0, 6.0])
        x.attach_grad(grad_req="null")
        w.attach_grad()
        with autograd.record():
            y = x * w
        y.backward()
        assert_close(x.grad, [0.0, 0.0, 0.0])
        assert_close(w.grad, [1.0, 2.0, 3.0])

    def test_reattach_gives_fresh_zero_gradient(self):
        x = f64([1.0, 2.0])
        x.attach_grad(grad_req="add")
        with autograd.record():
            y = 7 * x
        y.backward()
        assert_close(x.grad, [7.0, 7.0])
        x.attach_grad(grad_req="add")
        assert_close(x.grad, [0.0, 0.0])
        with autograd.record():
            y = 2 * x
        y.backward()
        assert_close(x.grad, [2.0, 2.0])

    @pytest.mark.parametrize("bad", ["bogus", "Write", "accumulate", ""])
    def test_unknown_grad_req_raises_value_error(self, bad):
        x = f64([1.0])
        with pytest.raises(ValueError):
            x.attach_grad(grad_req=bad)


class TestMarkVariables:
    def test_single_variable_and_gradient(self):
        xn = onp.array([1.0, 2.0, -3.0])
        x = f64(xn)
        gx = f64([0.0, 0.0, 0.0])
        autograd.mark_variables(x, gx)
        assert x.grad is gx
        with autograd.record():
            y = x * x
        y.backward()
        assert_close(gx, 2 * xn)
        assert x.grad is gx

    def test_lists_of_variables_and_gradients(self):
        xn = onp.array([1.0, 2.0])
        wn = onp.array([-1.5, 0.5])
        x, w = f64(xn), f64(wn)
        gx, gw = f64([0.0, 0.0]), f64([0.0, 0.0])
        autograd.mark_variables([x, w], [gx, gw])
        assert x.grad is gx and w.grad is gw
        with autograd.record():
            y = x * w + np.exp(w)
        y.backward()
        assert_close(gx, wn)
        assert_close(gw, xn + onp.exp(wn), rtol=1e-12)

    def test_list_of_grad_reqs(self):
        xn = onp.array([1.0, 2.0])
        x, w, v = f64(xn), f64(xn), f64(xn)
        gx = f64([10.0, 10.0])
        gw = f64([10.0, 10.0])
        gv = f64([10.0, 10.0])
        autograd.mark_variables([x, w, v], [gx, gw, gv], grad_reqs=["write", "add", "null"])
        for _ in range(2):
            with autograd.record():
                y = 2 * x + 3 * w + 4 * v
            y.backward()
        assert_close(gx, [2.0, 2.0])
        assert_close(gw, [16.0, 16.0])
        assert_close(gv, [10.0, 10.0])

    def test_string_grad_reqs_applies_to_all(self):
        x, w = f64([1.0]), f64([2.0])
        gx, gw = f64([0.0]), f64([0.0])
        autograd.mark_variables([x, w], [gx, gw], grad_reqs="add")
        for _ in range(3):
            with autograd.record():
                y = x * w
            y.backward()
        assert_close(gx, [6.0])
        assert_close(gw, [3.0])

    def test_unknown_grad_req_raises_value_error(self):
        x = f64([1.0])
        with pytest.raises(ValueError):
            autograd.mark_variables(x, f64([0.0]), grad_reqs="sometimes")


# ==========================================================================
# Head gradients and backward()
# ==========================================================================

class TestHeadGradients:
    def _setup(self):
        xn = onp.array([1.0, -2.0, 0.5])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = x * x
        return xn, x, y

    def test_nonscalar_head_means_backward_of_sum(self):
        xn, x, y = self._setup()
        y.backward()
        assert_close(x.grad, 2 * xn)

    def test_array_head_gradient(self):
        xn, x, y = self._setup()
        y.backward(f64([1.0, 2.0, 3.0]))
        assert_close(x.grad, 2 * xn * onp.array([1.0, 2.0, 3.0]))

    def test_array_head_gradient_through_autograd_backward(self):
        xn, x, y = self._setup()
        autograd.backward(y, head_grads=f64([1.0, 2.0, 3.0]))
        assert_close(x.grad, 2 * xn * onp.array([1.0, 2.0, 3.0]))

    def test_numpy_head_gradient(self):
        xn, x, y = self._setup()
        autograd.backward(y, head_grads=onp.array([0.5, -1.0, 4.0]))
        assert_close(x.grad, 2 * xn * onp.array([0.5, -1.0, 4.0]))

    def test_numpy_out_grad_on_array_backward(self):
        xn, x, y = self._setup()
        y.backward(out_grad=onp.array([0.5, -1.0, 4.0]))
        assert_close(x.grad, 2 * xn * onp.array([0.5, -1.0, 4.0]))

    @pytest.mark.parametrize("scalar", [2, 2.5, -1.0])
    def test_scalar_head_gradient(self, scalar):
        xn, x, y = self._setup()
        autograd.backward(y, head_grads=scalar)
        assert_close(x.grad, 2 * xn * scalar)

    def test_scalar_head_gradient_for_0d_head(self):
        xn = onp.array([1.0, -2.0, 0.5])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = np.sum(x * x)
        assert y.shape == ()
        autograd.backward(y, head_grads=3.0)
        assert_close(x.grad, 6 * xn)

    @pytest.mark.parametrize("shape", [(2,), (4,), (3, 3), (1, 3)])
    def test_wrong_shape_head_gradient_raises_value_error(self, shape):
        xn, x, y = self._setup()
        with pytest.raises(ValueError):
            autograd.backward(y, head_grads=f64(onp.ones(shape)))
        with pytest.raises(ValueError):
            y.backward(f64(onp.ones(shape)))
        assert_close(x.grad, [0.0, 0.0, 0.0])

    def test_wrong_shape_numpy_head_gradient_raises_value_error(self):
        xn, x, y = self._setup()
        with pytest.raises(ValueError):
            autograd.backward(y, head_grads=onp.ones((2,)))

    def test_list_of_heads_sums_their_gradients(self):
        xn = onp.array([0.3, -1.2])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y1 = x * x
            y2 = np.sin(x)
        autograd.backward([y1, y2], head_grads=[f64([1.0, 2.0]), f64([3.0, -1.0])])
        expected = 2 * xn * onp.array([1.0, 2.0]) + onp.cos(xn) * onp.array([3.0, -1.0])
        assert_close(x.grad, expected, rtol=1e-12)

    def test_list_of_heads_without_head_grads(self):
        xn = onp.array([0.3, -1.2])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y1 = x * x
            y2 = np.sum(np.exp(x))
        autograd.backward([y1, y2])
        assert_close(x.grad, 2 * xn + onp.exp(xn), rtol=1e-12)

    def test_none_entry_in_head_grads_means_ones(self):
        xn = onp.array([0.3, -1.2])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y1 = x * x
            y2 = 3 * x
        autograd.backward([y1, y2], head_grads=[None, f64([2.0, 2.0])])
        assert_close(x.grad, 2 * xn + 6.0)


class TestBackwardErrors:
    def test_second_backward_raises_runtime_error_mentioning_retain_graph(self):
        x = f64([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = np.exp(x) * x
        y.backward()
        first = to_numpy(x.grad).copy()
        with pytest.raises(RuntimeError, match="retain_graph"):
            y.backward()
        assert_close(x.grad, first)
        assert_close(first, onp.exp([1.0, 2.0]) * (1 + onp.array([1.0, 2.0])), rtol=1e-12)

    def test_second_autograd_backward_raises(self):
        x = f64([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = x * x
        autograd.backward(y)
        with pytest.raises(RuntimeError, match="retain_graph"):
            autograd.backward(y)

    def test_retain_graph_allows_repeated_backward(self):
        xn = onp.array([1.0, 2.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = np.sin(x) * x
        expected = onp.cos(xn) * xn + onp.sin(xn)
        for _ in range(3):
            autograd.backward(y, retain_graph=True)
            assert_close(x.grad, expected, rtol=1e-12)
        y.backward()
        assert_close(x.grad, expected, rtol=1e-12)
        with pytest.raises(RuntimeError, match="retain_graph"):
            y.backward()

    def test_backward_after_grad_without_retain_graph_raises(self):
        x = f64([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = x * x
        g = autograd.grad(y, x)[0]
        assert_close(g, [2.0, 4.0])
        with pytest.raises(RuntimeError, match="retain_graph"):
            y.backward()

    def test_backward_without_history_raises_runtime_error(self):
        z = np.ones((2,))
        with pytest.raises(RuntimeError):
            z.backward()
        x = f64([1.0, 2.0])
        x.attach_grad()
        w = x * 2  # computed outside record(): no history
        with pytest.raises(RuntimeError):
            autograd.backward(w)
        assert_close(x.grad, [0.0, 0.0])


# ==========================================================================
# Elementwise ops against finite differences
# ==========================================================================

def _away_from_zero(rng, shape, lo=0.2, hi=2.0):
    return rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def _sigmoid(a):
    return 1.0 / (1.0 + onp.exp(-a))


# (id, fastgrad function, numpy function, first derivative, input sampler)
UNARY = [
    ("exp", np.exp, onp.exp, onp.exp, lambda r, s: r.uniform(-2, 2, s)),
    ("log", np.log, onp.log, lambda a: 1 / a, lambda r, s: r.uniform(0.2, 3, s)),
    ("sin", np.sin, onp.sin, onp.cos, lambda r, s: r.uniform(-3, 3, s)),
    ("cos", np.cos, onp.cos, lambda a: -onp.sin(a), lambda r, s: r.uniform(-3, 3, s)),
    ("tanh", np.tanh, onp.tanh, lambda a: 1 - onp.tanh(a) ** 2, lambda r, s: r.uniform(-2, 2, s)),
    ("sqrt", np.sqrt, onp.sqrt, lambda a: 0.5 / onp.sqrt(a), lambda r, s: r.uniform(0.2, 3, s)),
    ("square", np.square, onp.square, lambda a: 2 * a, lambda r, s: r.uniform(-2, 2, s)),
    ("abs", np.abs, onp.abs, onp.sign, _away_from_zero),
    ("negative", np.negative, onp.negative, lambda a: -onp.ones_like(a), lambda r, s: r.uniform(-2, 2, s)),
    ("relu", npx.relu, lambda a: onp.maximum(a, 0), lambda a: (a > 0).astype(onp.float64), _away_from_zero),
    ("sigmoid", npx.sigmoid, _sigmoid, lambda a: _sigmoid(a) * (1 - _sigmoid(a)),
     lambda r, s: r.uniform(-3, 3, s)),
]


@pytest.mark.parametrize(
    "fg_fn,onp_fn,d1,sampler", [u[1:] for u in UNARY], ids=[u[0] for u in UNARY]
)
def test_unary_op_gradient(fg_fn, onp_fn, d1, sampler):
    xn = sampler(_rng(3), (2, 3))
    (x,) = check_against_fd(fg_fn, onp_fn, xn)
    assert_close(x.grad, d1(xn), rtol=1e-12, atol=1e-12)


# (id, fastgrad function, numpy function, sampler for the pair of inputs)
def _pair(lo, hi):
    return lambda r, s: (r.uniform(lo, hi, s), r.uniform(lo, hi, s))


def _pair_no_ties(r, s):
    a = r.uniform(-2, 2, s)
    return a, a + r.choice([-0.5, 0.5], s)


BINARY = [
    ("add", np.add, onp.add, _pair(-2, 2)),
    ("subtract", np.subtract, onp.subtract, _pair(-2, 2)),
    ("multiply", np.multiply, onp.multiply, _pair(-2, 2)),
    ("divide", np.divide, onp.divide, _pair(0.3, 2)),
    ("power", np.power, onp.power, _pair(0.3, 2)),
    ("maximum", np.maximum, onp.maximum, _pair_no_ties),
    ("minimum", np.minimum, onp.minimum, _pair_no_ties),
    ("op_add", lambda a, b: a + b, onp.add, _pair(-2, 2)),
    ("op_sub", lambda a, b: a - b, onp.subtract, _pair(-2, 2)),
    ("op_mul", lambda a, b: a * b, onp.multiply, _pair(-2, 2)),
    ("op_div", lambda a, b: a / b, onp.divide, _pair(0.3, 2)),
    ("op_pow", lambda a, b: a ** b, onp.power, _pair(0.3, 2)),
]


@pytest.mark.parametrize("fg_fn,onp_fn,sampler", [b[1:] for b in BINARY], ids=[b[0] for b in BINARY])
def test_binary_op_gradient(fg_fn, onp_fn, sampler):
    an, bn = sampler(_rng(4), (3, 2))
    check_against_fd(fg_fn, onp_fn, an, bn)


SCALAR_OPS = [
    ("x_plus_2", lambda a: a + 2, lambda a: onp.ones_like(a)),
    ("2_plus_x", lambda a: 2 + a, lambda a: onp.ones_like(a)),
    ("x_minus_2", lambda a: a - 2, lambda a: onp.ones_like(a)),
    ("2_minus_x", lambda a: 2 - a, lambda a: -onp.ones_like(a)),
    ("x_times_3", lambda a: a * 3, lambda a: 3 * onp.ones_like(a)),
    ("3_times_x", lambda a: 3 * a, lambda a: 3 * onp.ones_like(a)),
    ("x_div_4", lambda a: a / 4, lambda a: 0.25 * onp.ones_like(a)),
    ("4_div_x", lambda a: 4 / a, lambda a: -4 / a ** 2),
    ("x_pow_3", lambda a: a ** 3, lambda a: 3 * a ** 2),
    ("x_pow_half", lambda a: a ** 0.5, lambda a: 0.5 / onp.sqrt(a)),
    ("2_pow_x", lambda a: 2 ** a, lambda a: 2 ** a * math.log(2)),
    ("neg_x", lambda a: -a, lambda a: -onp.ones_like(a)),
    ("chain", lambda a: (1 - a) * (a + 0.5) / 2, lambda a: (0.5 - 2 * a) / 2),
]


@pytest.mark.parametrize("fn,d1", [s[1:] for s in SCALAR_OPS], ids=[s[0] for s in SCALAR_OPS])
def test_scalar_on_either_side_gradient(fn, d1):
    xn = _rng(5).uniform(0.3, 2.0, (4,))
    (x,) = check_against_fd(fn, fn, xn)
    assert_close(x.grad, d1(xn), rtol=1e-12, atol=1e-12)


def test_composite_function_against_finite_differences():
    rng = _rng(6)
    an = rng.uniform(-1, 1, (3, 4))
    bn = rng.uniform(0.5, 1.5, (4, 2))
    cn = rng.uniform(-1, 1, (2,))

    def fg(a, b, c):
        h = np.tanh(np.matmul(a, b) + c)
        return np.sum(np.square(h) * np.exp(-np.abs(c)) / np.sqrt(b[0] + 1.0), axis=0)

    def ref(a, b, c):
        h = onp.tanh(onp.matmul(a, b) + c)
        return onp.sum(onp.square(h) * onp.exp(-onp.abs(c)) / onp.sqrt(b[0] + 1.0), axis=0)

    check_against_fd(fg, ref, an, bn, cn, head=onp.array([0.7, -1.3]))


# ==========================================================================
# Broadcasting, reductions, shape ops, matmul
# ==========================================================================

class TestBroadcastingAndReductions:
    def test_broadcast_add_sum(self):
        xn = _rng(7).uniform(-1, 1, (3, 1))
        yn = _rng(8).uniform(-1, 1, (1, 4))
        x, y = f64(xn), f64(yn)
        x.attach_grad()
        y.attach_grad()
        with autograd.record():
            z = np.sum(x + y)
        z.backward()
        assert x.grad.shape == (3, 1) and y.grad.shape == (1, 4)
        assert_close(x.grad, onp.full((3, 1), 4.0))
        assert_close(y.grad, onp.full((1, 4), 3.0))
        check_against_fd(lambda a, b: np.sum(a + b), lambda a, b: onp.sum(a + b), xn, yn)

    def test_broadcast_multiply_with_head_gradient(self):
        rng = _rng(9)
        xn, yn, wn = rng.uniform(-1, 1, (3, 1)), rng.uniform(-1, 1, (1, 4)), rng.uniform(-1, 1, (3, 4))
        x, y = check_against_fd(lambda a, b: a * b, onp.multiply, xn, yn, head=wn)
        assert_close(x.grad, onp.sum(wn * yn, axis=1, keepdims=True), rtol=1e-12)
        assert_close(y.grad, onp.sum(wn * xn, axis=0, keepdims=True), rtol=1e-12)

    def test_broadcast_vector_against_3d(self):
        rng = _rng(10)
        vn, tn = rng.uniform(-1, 1, (4,)), rng.uniform(-1, 1, (2, 3, 4))
        v, t = check_against_fd(lambda a, b: np.sin(a * b - a), lambda a, b: onp.sin(a * b - a), vn, tn)
        assert v.grad.shape == (4,)
        assert_close(v.grad, onp.sum(onp.cos(vn * tn - vn) * (tn - 1), axis=(0, 1)), rtol=1e-12)

    def test_broadcast_0d_against_matrix(self):
        sn, mn = onp.array(1.5), _rng(11).uniform(-1, 1, (2, 3))
        s, m = check_against_fd(lambda a, b: a * b + a, lambda a, b: a * b + a, sn, mn)
        assert s.grad.shape == ()
        assert_close(s.grad, onp.array(onp.sum(mn) + 6), rtol=1e-12)

    @pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, (0, 2)])
    @pytest.mark.parametrize("keepdims", [False, True])
    @pytest.mark.parametrize("reduction", ["sum", "mean"])
    def test_reduction_axis_keepdims(self, reduction, axis, keepdims):
        rng = _rng(12)
        xn = rng.uniform(-1, 1, (2, 3, 4))
        onp_red = getattr(onp, reduction)
        fg_red = getattr(np, reduction)
        out_shape = onp_red(xn, axis=axis, keepdims=keepdims).shape
        wn = rng.uniform(-1, 1, out_shape)
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = fg_red(x * x, axis=axis, keepdims=keepdims)
        assert y.shape == out_shape
        assert_close(y, onp_red(xn * xn, axis=axis, keepdims=keepdims), rtol=1e-12)
        y.backward(f64(wn))
        # closed form: broadcast the head gradient back over the reduced axes
        wk = wn if keepdims else onp.expand_dims(wn, axis if axis is not None else (0, 1, 2))
        count = xn.size // max(1, int(onp.prod(out_shape))) if reduction == "mean" else 1
        assert_close(x.grad, 2 * xn * wk / count, rtol=1e-12)
        fd = numerical_grad(lambda a: onp_red(a * a, axis=axis, keepdims=keepdims) * wn, xn)[0]
        assert_close(x.grad, fd, rtol=FD_RTOL, atol=FD_ATOL)

    def test_mean_keepdims_tutorial_style(self):
        """mean over an axis of length 3 equals sum times 1/3."""
        x = f64(onp.arange(6.0).reshape(3, 2))
        x.attach_grad()
        with autograd.record():
            y = np.mean(x, axis=0)
        assert_close(y, [2.0, 3.0])
        y.backward()
        assert_close(x.grad, onp.full((3, 2), 1.0 / 3.0), rtol=1e-15)

    def test_full_reduction_shapes_np_vs_nd(self):
        a = np.array([[1, 2], [3, 4]])
        s = np.sum(a)
        assert s.shape == ()
        assert s.item() == 10.0
        b = nd.array([[1, 2], [3, 4]])
        t = nd.sum(b)
        assert t.shape == (1,)
        assert_close(t, onp.array([10.0], dtype=onp.float32))
        assert nd.sum(b, axis=1, keepdims=True).shape == (2, 1)
        assert_close(nd.sum(b, axis=1, keepdims=True), onp.array([[3.0], [7.0]], dtype=onp.float32))

    def test_nd_full_reduction_backward(self):
        b = nd.array([[1, 2], [3, 4]])
        b.attach_grad()
        with autograd.record():
            t = nd.sum(b * b)
        assert t.shape == (1,)
        t.backward()
        assert b.grad.dtype == onp.float32
        assert_close(b.grad, onp.array([[2.0, 4.0], [6.0, 8.0]], dtype=onp.float32), rtol=0, atol=0)


class TestShapeAndLinearAlgebra:
    def test_matmul_gradient(self):
        rng = _rng(13)
        an, bn, wn = rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (2, 4))
        a, b = check_against_fd(np.matmul, onp.matmul, an, bn, head=wn)
        assert_close(a.grad, wn @ bn.T, rtol=1e-12)
        assert_close(b.grad, an.T @ wn, rtol=1e-12)

    def test_matmul_operator_and_dot(self):
        rng = _rng(14)
        an, bn = rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (3, 4))
        check_against_fd(lambda a, b: a @ b, onp.matmul, an, bn)
        check_against_fd(np.dot, onp.dot, an, bn)

    def test_dot_of_vectors(self):
        rng = _rng(15)
        un, vn = rng.uniform(-1, 1, (5,)), rng.uniform(-1, 1, (5,))
        u, v = check_against_fd(np.dot, onp.dot, un, vn)
        assert_close(u.grad, vn)
        assert_close(v.grad, un)

    @pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
    def test_nd_dot_transpose_flags(self, ta, tb):
        rng = _rng(16)
        an = rng.uniform(-1, 1, (3, 2) if ta else (2, 3))
        bn = rng.uniform(-1, 1, (4, 3) if tb else (3, 4))
        wn = rng.uniform(-1, 1, (2, 4))
        a = nd.array(an, dtype=onp.float64)
        b = nd.array(bn, dtype=onp.float64)
        a.attach_grad()
        b.attach_grad()
        with autograd.record():
            c = nd.dot(a, b, transpose_a=ta, transpose_b=tb)
        A = an.T if ta else an
        B = bn.T if tb else bn
        assert_close(c, A @ B, rtol=1e-12)
        c.backward(nd.array(wn, dtype=onp.float64))
        dA = wn @ B.T
        dB = A.T @ wn
        assert_close(a.grad, dA.T if ta else dA, rtol=1e-12)
        assert_close(b.grad, dB.T if tb else dB, rtol=1e-12)

    def test_reshape_and_transpose_gradients(self):
        rng = _rng(17)
        xn = rng.uniform(-1, 1, (2, 3))
        w6 = rng.uniform(-1, 1, (6,))
        w32 = rng.uniform(-1, 1, (3, 2))
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = np.sum(x.reshape(6) * f64(w6)) + np.sum(x.T * f64(w32)) \
                + np.sum(np.reshape(x, (3, -1)) ** 2) + np.sum(np.transpose(x, (1, 0)) * f64(w32))
        y.backward()
        expected = w6.reshape(2, 3) + w32.T + 2 * xn + w32.T
        assert_close(x.grad, expected, rtol=1e-12)

    def test_reshape_method_with_tuple_and_minus_one(self):
        xn = onp.arange(12.0).reshape(3, 4)
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = x.reshape((2, -1)) * f64(onp.arange(12.0).reshape(2, 6))
        assert y.shape == (2, 6)
        y.backward()
        assert_close(x.grad, onp.arange(12.0).reshape(3, 4))


# ==========================================================================
# dtypes
# ==========================================================================

class TestDtypes:
    def test_array_constructors_dtypes(self):
        assert np.array([[1, 2], [3, 4]]).dtype == onp.float32
        assert np.array([1.5, 2.5]).dtype == onp.float32
        assert np.array(onp.array([1.0, 2.0])).dtype == onp.float64
        assert np.array(onp.array([1, 2], dtype=onp.int64)).dtype == onp.int64
        assert nd.array([1, 2]).dtype == onp.float32
        assert nd.array([1, 2], dtype=onp.float64).dtype == onp.float64
        assert nd.array(onp.array([1.0, 2.0]), dtype=onp.float64).dtype == onp.float64

    @pytest.mark.parametrize("src_dtype", [onp.float64, onp.float16, onp.int64])
    def test_nd_array_of_numpy_array_is_float32_without_dtype(self, src_dtype):
        """Like MXNet's ``nd.array``: float32 unless ``dtype=`` is given, whatever the source."""
        a = nd.array(onp.array([1, 2], dtype=src_dtype))
        assert a.dtype == onp.float32
        assert_close(a, onp.array([1.0, 2.0], dtype=onp.float32))

    @pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
    def test_attached_gradient_has_variable_dtype(self, dtype):
        x = np.array(onp.array([1.0, 2.0], dtype=dtype))
        x.attach_grad()
        assert x.grad.dtype == dtype
        with autograd.record():
            y = np.exp(x) * 2
        y.backward()
        assert x.grad.dtype == dtype
        assert_close(x.grad, 2 * onp.exp(onp.array([1.0, 2.0], dtype=dtype)), rtol=1e-6)

    def test_float32_variable_mixed_with_float64_constant(self):
        x = np.array([1.0, 2.0, 3.0])
        assert x.dtype == onp.float32
        c = f64([0.1, 0.2, 0.3])
        x.attach_grad()
        with autograd.record():
            y = x * c
        y.backward()
        assert x.grad.dtype == onp.float32
        assert_close(x.grad, onp.array([0.1, 0.2, 0.3], dtype=onp.float32), rtol=1e-7)

    def test_float32_variable_mixed_with_numpy_float64_constant(self):
        x = np.array([1.0, 2.0, 3.0])
        x.attach_grad()
        with autograd.record():
            y = np.sum(x * onp.array([0.5, 1.5, 2.5]))
        y.backward()
        assert x.grad.dtype == onp.float32
        assert_close(x.grad, onp.array([0.5, 1.5, 2.5], dtype=onp.float32))

    def test_python_scalar_keeps_float32(self):
        x = np.array([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = 0.1 * x + 2.5
        assert y.dtype == onp.float32
        y.backward()
        assert x.grad.dtype == onp.float32
        assert_close(x.grad, onp.full(2, 0.1, dtype=onp.float32))

    def test_astype_is_differentiable_and_gradient_keeps_variable_dtype(self):
        x = np.array([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = x.astype(onp.float64) ** 2
        assert y.dtype == onp.float64
        y.backward()
        assert x.grad.dtype == onp.float32
        assert_close(x.grad, onp.array([2.0, 4.0], dtype=onp.float32))

    def test_grad_result_has_variable_dtype(self):
        x = np.array([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = x * f64([3.0, 4.0])
        g = autograd.grad(y, x)[0]
        assert g.dtype == onp.float32
        assert_close(g, onp.array([3.0, 4.0], dtype=onp.float32))


# ==========================================================================
# autograd.grad
# ==========================================================================

class TestGrad:
    def test_single_variable_returns_list_as_mxnet(self):
        xn = onp.array([0.5, -1.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = x ** 3
        gs = autograd.grad(y, x)
        assert isinstance(gs, list) and len(gs) == 1
        assert gs[0].shape == (2,)
        assert_close(gs[0], 3 * xn ** 2)

    def test_list_of_variables_returns_list_in_order(self):
        xn, wn = onp.array([0.5, -1.0]), onp.array([2.0, 3.0])
        x, w = f64(xn), f64(wn)
        x.attach_grad()
        w.attach_grad()
        with autograd.record():
            y = x * x * w
        gs = autograd.grad(y, [w, x])
        assert isinstance(gs, list) and len(gs) == 2
        assert_close(gs[0], xn * xn)
        assert_close(gs[1], 2 * xn * wn)

    def test_list_with_one_variable_returns_list(self):
        x = f64([1.0])
        x.attach_grad()
        with autograd.record():
            y = x * 4
        gs = autograd.grad(y, [x])
        assert isinstance(gs, list) and len(gs) == 1
        assert_close(gs[0], [4.0])

    def test_grad_leaves_dot_grad_alone(self):
        xn = onp.array([1.0, 2.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = 3 * x
        y.backward()
        assert_close(x.grad, [3.0, 3.0])
        with autograd.record():
            y = x * x
        g = autograd.grad(y, [x])[0]
        assert_close(g, 2 * xn)
        assert_close(x.grad, [3.0, 3.0])
        assert g is not x.grad

    def test_grad_does_not_accumulate_into_add_buffer(self):
        x = f64([1.0, 2.0])
        x.attach_grad(grad_req="add")
        with autograd.record():
            y = 5 * x
        g = autograd.grad(y, x)[0]
        assert_close(g, [5.0, 5.0])
        assert_close(x.grad, [0.0, 0.0])

    def test_grad_with_head_grads(self):
        xn = onp.array([1.0, 2.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = x * x
        g = autograd.grad(y, x, head_grads=f64([3.0, -1.0]))[0]
        assert_close(g, 2 * xn * onp.array([3.0, -1.0]))

    def test_grad_with_numpy_and_scalar_head_grads(self):
        xn = onp.array([1.0, 2.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = x * x
        g = autograd.grad(y, x, head_grads=onp.array([0.5, 2.0]), retain_graph=True)[0]
        assert_close(g, 2 * xn * onp.array([0.5, 2.0]))
        g = autograd.grad(y, x, head_grads=4.0)[0]
        assert_close(g, 8 * xn)

    def test_grad_wrong_shape_head_grad_raises_value_error(self):
        x = f64([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = x * x
        with pytest.raises(ValueError):
            autograd.grad(y, x, head_grads=f64([1.0, 2.0, 3.0]))[0]

    def test_grad_of_several_heads(self):
        xn = onp.array([0.2, 0.7])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y1 = np.sin(x)
            y2 = np.sum(x * x)
        g = autograd.grad([y1, y2], [x])[0]
        assert_close(g, onp.cos(xn) + 2 * xn, rtol=1e-12)

    def test_unused_variable_raises_value_error_naming_it(self):
        x, w, u = f64([1.0]), f64([2.0]), f64([3.0, 4.0])
        for v in (x, w, u):
            v.attach_grad()
        with autograd.record():
            y = x * w
        with pytest.raises(ValueError) as info:
            autograd.grad(y, [x, w, u])
        assert re.search(r"\b2\b", str(info.value)), str(info.value)

    def test_allow_unused_gives_zeros(self):
        xn = onp.array([1.0, 2.0])
        x, u = f64(xn), f64(onp.ones((2, 3)))
        x.attach_grad()
        u.attach_grad()
        with autograd.record():
            y = x * x
        gx, gu = autograd.grad(y, [x, u], allow_unused=True)
        assert_close(gx, 2 * xn)
        assert gu.shape == (2, 3)
        assert gu.dtype == onp.float64
        assert_close(gu, onp.zeros((2, 3)))

    def test_retain_graph_defaults_to_false_without_create_graph(self):
        x = f64([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = x * x
        autograd.grad(y, x)[0]
        with pytest.raises(RuntimeError, match="retain_graph"):
            autograd.grad(y, x)[0]

    def test_retain_graph_true_allows_second_grad(self):
        xn = onp.array([1.0, 2.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = x * x
        g1 = autograd.grad(y, x, retain_graph=True)[0]
        g2 = autograd.grad(y, x)[0]
        assert_close(g1, 2 * xn)
        assert_close(g2, 2 * xn)

    def test_retain_graph_defaults_to_create_graph(self):
        xn = onp.array([1.0, 2.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = x ** 3
        g1 = autograd.grad(y, x, create_graph=True)[0]
        g2 = autograd.grad(y, x)[0]  # the first call retained the graph
        assert_close(g1, 3 * xn ** 2)
        assert_close(g2, 3 * xn ** 2)

    def test_explicit_retain_graph_false_with_create_graph_frees_graph(self):
        xn = onp.array([1.0, 2.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = x ** 3
        g = autograd.grad(y, x, create_graph=True, retain_graph=False)[0]
        assert_close(g, 3 * xn ** 2)
        with pytest.raises(RuntimeError, match="retain_graph"):
            y.backward()

    def test_gradient_penalty_style_create_graph(self):
        """loss = sum(g^2) with g = d/dx sum(x^3) = 3x^2, so dloss/dx = 36 x^3."""
        xn = onp.array([0.5, -1.0, 2.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = np.sum(x ** 3)
            g = autograd.grad(y, x, create_graph=True)[0]
            loss = np.sum(g * g)
        assert_close(loss, onp.sum(9 * xn ** 4))
        loss.backward()
        assert_close(x.grad, 36 * xn ** 3)

    def test_mixed_second_partials(self):
        """f = sum(x^2 y^3): d/dx f = 2 x y^3; its derivatives: d/dx = 2 y^3, d/dy = 6 x y^2."""
        xn, yn = onp.array([0.5, -1.5]), onp.array([1.2, 0.3])
        x, y = f64(xn), f64(yn)
        x.attach_grad()
        y.attach_grad()
        with autograd.record():
            f = np.sum(x ** 2 * y ** 3)
            gx = autograd.grad(f, [x], create_graph=True)[0]
        assert_close(gx, 2 * xn * yn ** 3)
        gx.backward()
        assert_close(x.grad, 2 * yn ** 3)
        assert_close(y.grad, 6 * xn * yn ** 2)


# ==========================================================================
# Higher-order derivatives (float64, closed forms)
# ==========================================================================

def _t(a):
    return onp.tanh(a)


# (id, function, derivatives 1..4 as closed forms; None if the 4th is not checked)
HIGHER = [
    ("sin", np.sin, [onp.cos, lambda a: -onp.sin(a), lambda a: -onp.cos(a), onp.sin]),
    ("cube", lambda a: a ** 3, [lambda a: 3 * a ** 2, lambda a: 6 * a, lambda a: 6 + 0 * a, None]),
    ("power3", lambda a: np.power(a, 3), [lambda a: 3 * a ** 2, lambda a: 6 * a, lambda a: 6 + 0 * a, None]),
    ("exp", np.exp, [onp.exp, onp.exp, onp.exp, onp.exp]),
    ("tanh", np.tanh, [
        lambda a: 1 - _t(a) ** 2,
        lambda a: -2 * _t(a) * (1 - _t(a) ** 2),
        lambda a: -2 * (1 - _t(a) ** 2) * (1 - 3 * _t(a) ** 2),
        lambda a: 8 * _t(a) * (1 - _t(a) ** 2) * (2 - 3 * _t(a) ** 2),
    ]),
]


@pytest.mark.parametrize("fn,derivs", [h[1:] for h in HIGHER], ids=[h[0] for h in HIGHER])
def test_third_order_derivatives(fn, derivs):
    xn = onp.array([-1.3, -0.4, 0.25, 0.9, 1.7])
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        d = fn(x)
        results = []
        for _ in range(3):
            d = autograd.grad(d, x, create_graph=True)[0]
            results.append(d)
    for order, (got, closed) in enumerate(zip(results, derivs[:3]), start=1):
        assert got.dtype == onp.float64, order
        assert_close(got, closed(xn), rtol=1e-10, atol=1e-12)
    if derivs[3] is not None:
        results[-1].backward()
        assert_close(x.grad, derivs[3](xn), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fn,derivs", [h[1:] for h in HIGHER], ids=[h[0] for h in HIGHER])
def test_second_order_via_grad_outside_record(fn, derivs):
    """create_graph=True records the gradient even when called outside record()."""
    xn = onp.array([-0.8, 0.3, 1.1])
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        y = fn(x)
    d1 = autograd.grad(y, [x], create_graph=True)[0]
    assert_close(d1, derivs[0](xn), rtol=1e-12, atol=1e-12)
    d1.backward()
    assert_close(x.grad, derivs[1](xn), rtol=1e-12, atol=1e-12)


SECOND = [
    ("log", np.log, lambda a: 1 / a, lambda a: -1 / a ** 2, (0.3, 2.0)),
    ("cos", np.cos, lambda a: -onp.sin(a), lambda a: -onp.cos(a), (-2.0, 2.0)),
    ("sqrt", np.sqrt, lambda a: 0.5 * a ** -0.5, lambda a: -0.25 * a ** -1.5, (0.3, 2.0)),
    ("square", np.square, lambda a: 2 * a, lambda a: 2 + 0 * a, (-2.0, 2.0)),
    ("sigmoid", npx.sigmoid, lambda a: _sigmoid(a) * (1 - _sigmoid(a)),
     lambda a: _sigmoid(a) * (1 - _sigmoid(a)) * (1 - 2 * _sigmoid(a)), (-3.0, 3.0)),
    ("reciprocal", lambda a: 1 / a, lambda a: -1 / a ** 2, lambda a: 2 / a ** 3, (0.3, 2.0)),
    ("x_times_sin_x", lambda a: a * np.sin(a), lambda a: onp.sin(a) + a * onp.cos(a),
     lambda a: 2 * onp.cos(a) - a * onp.sin(a), (-2.0, 2.0)),
]


@pytest.mark.parametrize("fn,d1,d2,domain", [s[1:] for s in SECOND], ids=[s[0] for s in SECOND])
def test_second_order_derivatives(fn, d1, d2, domain):
    xn = _rng(18).uniform(domain[0], domain[1], (6,))
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        y = fn(x)
        g = autograd.grad(y, x, create_graph=True)[0]
    assert_close(g, d1(xn), rtol=1e-12, atol=1e-12)
    g.backward()
    assert_close(x.grad, d2(xn), rtol=1e-10, atol=1e-12)


def test_tenth_derivative_of_sin():
    """nnabla's example: the 10th derivative of sin is -sin; one more backward gives -cos."""
    xn = _rng(19).randn(2, 2)
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        d = np.sin(x)
        for _ in range(10):
            d = autograd.grad(d, x, create_graph=True)[0]
    assert_close(d, -onp.sin(xn), rtol=1e-10, atol=1e-12)
    d.backward()
    assert_close(x.grad, -onp.cos(xn), rtol=1e-10, atol=1e-12)


_W42 = onp.linspace(-1.0, 1.0, 8).reshape(4, 2)
_REP = onp.array([0, 2, 0, 1])

# scalar functions of a (3, 4) float64 array, built from several ops each
HVP_FUNCTIONS = [
    ("matmul_cube", lambda x: np.sum(np.matmul(x, f64(_W42)) ** 3)),
    ("mean_keepdims", lambda x: np.sum(np.mean(x * x, axis=1, keepdims=True) * x)),
    ("rational", lambda x: np.sum(x / (1 + x * x))),
    ("power_both_sides", lambda x: np.sum(np.power(np.abs(x) + 1, x))),
    ("gram_tanh", lambda x: np.sum(np.tanh(x.T @ x))),
    ("dot_square", lambda x: np.sum(np.dot(x, x.T) ** 2)),
    ("reshape_sigmoid_sqrt",
     lambda x: np.sum(npx.sigmoid(x.reshape(2, 6)) * np.sqrt(x * x + 1).reshape(2, 6))),
    ("max_min", lambda x: np.sum(np.maximum(x, 0.1) ** 2 * np.minimum(x, 0.2))),
    ("broadcast_row", lambda x: np.sum((x + x[0:1]) ** 3)),
    ("logsumexp", lambda x: np.sum(np.log(np.sum(np.exp(x), axis=0)))),
    ("index_repeats", lambda x: np.sum(x[_fg_int_array(_REP)] ** 3) + np.sum(np.exp(x[x > 0]))),
    ("transpose_cos", lambda x: np.sum(np.cos(np.transpose(x)) * np.transpose(x) ** 2)),
]


def _fg_int_array(values):
    return np.array(onp.array(values, dtype=onp.int64))


def _fg_gradient(fn, xn):
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        y = fn(x)
    return to_numpy(autograd.grad(y, x)[0])


@pytest.mark.parametrize("fn", [h[1] for h in HVP_FUNCTIONS], ids=[h[0] for h in HVP_FUNCTIONS])
def test_hessian_vector_product_matches_finite_differences_of_gradient(fn):
    """Double backward: d/dx sum(grad f(x) * v) = H v, compared with central differences of
    the first-order gradient (itself checked elsewhere)."""
    rng = _rng(21)
    # stay away from the kinks of abs/maximum/minimum and from x == 0 (x > 0 mask)
    xn = rng.uniform(0.25, 0.9, (3, 4)) * rng.choice([-1.0, 1.0], (3, 4))
    xn[xn > 0] += 0.05
    vn = rng.uniform(-1, 1, (3, 4))
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        y = fn(x)
        g = autograd.grad(y, x, create_graph=True)[0]
        h = np.sum(g * f64(vn))
    assert_close(g, _fg_gradient(fn, xn), rtol=1e-12, atol=1e-12)
    fd_g = numerical_grad(lambda a: fn(f64(a)).asnumpy(), xn)[0]
    assert_close(g, fd_g, rtol=1e-6, atol=1e-6)
    h.backward()
    fd_hv = numerical_grad(lambda a: _fg_gradient(fn, a) * vn, xn, eps=1e-5)[0]
    assert_close(x.grad, fd_hv, rtol=1e-5, atol=1e-6)


# ==========================================================================
# dropout and train mode
# ==========================================================================

class TestDropout:
    def _x(self, n=2000):
        xn = onp.arange(1.0, n + 1.0)
        x = f64(xn)
        x.attach_grad()
        return xn, x

    def test_identity_outside_any_scope(self):
        xn, x = self._x()
        y = npx.dropout(x, p=0.5)
        assert onp.array_equal(to_numpy(y), xn)

    def test_identity_when_recording_in_predict_mode(self):
        xn, x = self._x()
        with autograd.record(train_mode=False):
            y = npx.dropout(x, p=0.5)
        assert onp.array_equal(to_numpy(y), xn)
        y.backward()
        assert_close(x.grad, onp.ones_like(xn))

    def test_identity_in_predict_mode_scope_inside_record(self):
        xn, x = self._x()
        with autograd.record():
            with autograd.predict_mode():
                y = npx.dropout(x, p=0.5)
        assert onp.array_equal(to_numpy(y), xn)
        y.backward()
        assert_close(x.grad, onp.ones_like(xn))

    @pytest.mark.parametrize("p", [0.5, 0.2, 0.8])
    def test_train_mode_masks_and_scales(self, p):
        xn, x = self._x()
        with autograd.record():
            y = npx.dropout(x, p=p)
        yn = to_numpy(y)
        kept = yn != 0
        # every entry is either dropped or scaled by 1/(1-p)
        onp.testing.assert_allclose(yn[kept], xn[kept] / (1 - p), rtol=1e-12)
        frac_dropped = 1.0 - kept.mean()
        assert abs(frac_dropped - p) < 0.06, frac_dropped
        y.backward()
        assert_close(x.grad, kept / (1 - p), rtol=1e-12)

    def test_train_mode_scope_without_recording_masks(self):
        xn, _ = self._x()
        with autograd.train_mode():
            y = npx.dropout(f64(xn), p=0.5)
        yn = to_numpy(y)
        kept = yn != 0
        assert 0 < kept.sum() < xn.size
        onp.testing.assert_allclose(yn[kept], 2 * xn[kept], rtol=1e-12)

    def test_set_training_controls_dropout(self):
        xn, _ = self._x()
        autograd.set_training(True)
        yn = to_numpy(npx.dropout(f64(xn), p=0.5))
        autograd.set_training(False)
        zn = to_numpy(npx.dropout(f64(xn), p=0.5))
        assert 0 < (yn == 0).sum() < xn.size
        assert onp.array_equal(zn, xn)


# ==========================================================================
# Indexing
# ==========================================================================

INDEXES = [
    ("int", lambda xn: (1, 1)),
    ("negative_int", lambda xn: (-1, -1)),
    ("slice", lambda xn: (slice(1, 3), slice(1, 3))),
    ("step_slice", lambda xn: ((slice(None, None, 2), slice(1, None)),) * 2),
    ("column", lambda xn: ((slice(None), 2),) * 2),
    ("int_array_repeats", lambda xn: (_fg_int_array([0, 2, 0, 0]), onp.array([0, 2, 0, 0]))),
    ("numpy_int_array", lambda xn: (onp.array([3, 1, 3]), onp.array([3, 1, 3]))),
    ("list", lambda xn: ([2, 2, 1], [2, 2, 1])),
    ("pair_of_int_arrays", lambda xn: ((onp.array([0, 1, 1]), onp.array([4, 4, 0])),) * 2),
    ("bool_mask", lambda xn: (f64(xn) > 0, xn > 0)),
    ("numpy_bool_mask", lambda xn: (xn > 0,) * 2),
    ("row_bool_mask", lambda xn: (onp.array([True, False, True, True]),) * 2),
]


@pytest.mark.parametrize("make_index", [i[1] for i in INDEXES], ids=[i[0] for i in INDEXES])
def test_indexing_gradient(make_index):
    xn = _rng(20).uniform(-1, 1, (4, 5))
    fg_idx, onp_idx = make_index(xn)
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        sel = x[fg_idx]
        y = np.sin(sel) + sel * sel
    assert_close(sel, xn[onp_idx], rtol=0, atol=0)
    y.backward()
    fd = numerical_grad(lambda a: onp.sin(a[onp_idx]) + a[onp_idx] ** 2, xn)[0]
    assert_close(x.grad, fd, rtol=FD_RTOL, atol=FD_ATOL)


def test_integer_array_index_with_repeats_accumulates():
    x = f64([10.0, 20.0, 30.0])
    x.attach_grad()
    with autograd.record():
        y = x[_fg_int_array([0, 2, 0, 0])]
    assert_close(y, [10.0, 30.0, 10.0, 10.0])
    y.backward(f64([1.0, 2.0, 4.0, 8.0]))
    assert_close(x.grad, [13.0, 0.0, 2.0])


def test_bool_mask_selects_and_routes_gradient():
    xn = onp.array([[-1.0, 2.0], [3.0, -4.0]])
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        y = x[x > 0]
    assert_close(y, [2.0, 3.0])
    y.backward(f64([5.0, 7.0]))
    assert_close(x.grad, [[0.0, 5.0], [7.0, 0.0]])


# ==========================================================================
# NumPy interop
# ==========================================================================

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
# detach and comparisons
# ==========================================================================

class TestDetachAndComparisons:
    def test_detach_stops_gradient(self):
        """z = detach(x^2) * x: dz/dx = x^2 (not 3x^2)."""
        xn = onp.array([0.5, -1.5, 2.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = x * x
            z = y.detach() * x
        assert_close(z, xn ** 3)
        z.backward()
        assert_close(x.grad, xn ** 2)

    def test_detached_array_has_no_history(self):
        x = f64([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = (x * 3).detach()
        assert_close(y, [3.0, 6.0])
        with pytest.raises(RuntimeError):
            y.backward()

    def test_comparisons_values_and_dtype(self):
        xn = onp.array([-1.0, 0.0, 2.0, 3.0])
        x = f64(xn)
        for fg, ref in [
            (x > 0, xn > 0),
            (x >= 0, xn >= 0),
            (x < 2, xn < 2),
            (x <= 2, xn <= 2),
            (x == 3, xn == 3),
            (x != 3, xn != 3),
            (x > f64([0.0, 0.0, 5.0, 1.0]), xn > onp.array([0.0, 0.0, 5.0, 1.0])),
        ]:
            got = to_numpy(fg)
            assert got.dtype == onp.bool_
            assert got.tolist() == ref.tolist()

    def test_comparisons_are_not_differentiable(self):
        xn = onp.array([-1.0, 0.5, 2.0, 3.0])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            m = x > 1
            z = x * m
        m.backward(retain_graph=True)        # recorded for reach only: zeros (MXNet)
        assert_close(x.grad, onp.zeros(4))
        z.backward()
        assert_close(x.grad, (xn > 1).astype(onp.float64))


# ==========================================================================
# In-place writes
# ==========================================================================

class TestInPlaceWrites:
    def test_inplace_arithmetic_on_recorded_array_raises_inside_record(self):
        x = f64([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = x * 2
            with pytest.raises(RuntimeError):
                y += 1
        assert_close(y, [2.0, 4.0])
        y.backward()
        assert_close(x.grad, [2.0, 2.0])

    def test_assignment_into_recorded_array_is_recorded_inside_record(self):
        """y[k] = v on an intermediate is part of the graph (MXNet, PyTorch): the overwritten
        part of y gets no gradient, v gets the gradient at k."""
        x = f64([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = x * 2
            y[:1] = 0.0
        assert_close(y, [0.0, 4.0])
        y.backward()
        assert_close(x.grad, [0.0, 2.0])

    def test_modifying_a_saved_array_then_backward_raises(self):
        """y = x * w saves w; changing w afterwards must not give a silently wrong gradient."""
        x = f64([1.0, 2.0])
        x.attach_grad()
        w = f64([3.0, 4.0])
        with autograd.record():
            y = x * w
        w[:] = 5.0
        assert_close(w, [5.0, 5.0])
        with pytest.raises(RuntimeError):
            y.backward()
        assert_close(x.grad, [0.0, 0.0])

    def test_modifying_a_copy_keeps_gradient_correct(self):
        x = f64([1.0, 2.0])
        x.attach_grad()
        w = f64([3.0, 4.0])
        with autograd.record():
            y = x * w.copy()
        w[:] = 5.0
        y.backward()
        assert_close(x.grad, [3.0, 4.0])

    def test_inplace_write_on_unrecorded_array_is_allowed_inside_record(self):
        c = f64([1.0, 2.0])
        with autograd.record():
            c += 1
            c[0] = 10.0
        assert_close(c, [10.0, 3.0])


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


# ==========================================================================
# autograd.Function
# ==========================================================================

class TestFunction:
    """Custom differentiation with ``autograd.Function``."""

    def test_several_inputs_and_outputs(self):
        class ProdAndSum(autograd.Function):
            def forward(self, a, b):
                self.save_for_backward(a, b)
                return a * b, a + b

            def backward(self, dprod, dsum):
                a, b = self.saved_tensors
                return dprod * b + dsum, dprod * a + dsum

        an, bn = onp.array([1.0, 2.0]), onp.array([-3.0, 0.5])
        a, b = f64(an), f64(bn)
        a.attach_grad()
        b.attach_grad()
        with autograd.record():
            p, s = ProdAndSum()(a, b)
            out = 2 * p + 3 * s
        assert_close(p, an * bn)
        assert_close(s, an + bn)
        out.backward()
        assert_close(a.grad, 2 * bn + 3)
        assert_close(b.grad, 2 * an + 3)

    def test_function_between_recorded_ops(self):
        class Cube(autograd.Function):
            def forward(self, x):
                self.save_for_backward(x)
                return x * x * x

            def backward(self, dy):
                (x,) = self.saved_tensors
                return dy * 3 * x * x

        xn = onp.array([0.3, -0.7, 1.1])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = np.sum(np.sin(Cube()(2 * x)))
        y.backward()
        assert_close(x.grad, onp.cos(8 * xn ** 3) * 24 * xn ** 2, rtol=1e-12)

    def test_backward_written_with_fastgrad_ops_is_differentiable(self):
        class Cube(autograd.Function):
            def forward(self, x):
                self.save_for_backward(x)
                return x * x * x

            def backward(self, dy):
                (x,) = self.saved_tensors
                return dy * 3 * x * x

        xn = onp.array([0.3, -0.7, 1.1])
        x = f64(xn)
        x.attach_grad()
        with autograd.record():
            y = Cube()(x)
            g = autograd.grad(y, x, create_graph=True)[0]
        assert_close(g, 3 * xn ** 2)
        g.backward()
        assert_close(x.grad, 6 * xn)

    def test_add_grad_req_accumulates(self):
        class Twice(autograd.Function):
            def forward(self, x):
                return 2 * x

            def backward(self, dy):
                return 2 * dy

        x = f64([1.0, 2.0])
        x.attach_grad(grad_req="add")
        for _ in range(3):
            with autograd.record():
                y = Twice()(x)
            y.backward()
        assert_close(x.grad, [6.0, 6.0])

    def test_error_in_backward_reaches_caller(self):
        class Broken(autograd.Function):
            def forward(self, x):
                return x * 1

            def backward(self, dy):
                raise ZeroDivisionError("custom backward failed")

        x = f64([1.0])
        x.attach_grad()
        with autograd.record():
            y = Broken()(x)
        with pytest.raises(ZeroDivisionError, match="custom backward failed"):
            y.backward()

    def test_outside_record_returns_outputs_without_history(self):
        class Twice(autograd.Function):
            def forward(self, x):
                return 2 * x

            def backward(self, dy):
                return 2 * dy

        x = f64([1.0, 2.0])
        x.attach_grad()
        y = Twice()(x)
        assert_close(y, [2.0, 4.0])
        with pytest.raises(RuntimeError):
            y.backward()

    def test_wrong_number_of_returned_gradients_is_an_error(self):
        class TooMany(autograd.Function):
            def forward(self, x):
                return x * 2

            def backward(self, dy):
                return dy * 2, dy

        x = f64([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = TooMany()(x)
        with pytest.raises(ValueError):
            y.backward()
        assert_close(x.grad, [0.0, 0.0])

    def test_wrong_shape_of_returned_gradient_is_an_error(self):
        class BadShape(autograd.Function):
            def forward(self, x):
                return x * 2

            def backward(self, dy):
                return np.ones((3,), dtype=onp.float64)

        x = f64([1.0, 2.0])
        x.attach_grad()
        with autograd.record():
            y = BadShape()(x)
        with pytest.raises(ValueError):
            y.backward()
        assert_close(x.grad, [0.0, 0.0])

    def test_instance_can_be_called_only_once(self):
        class Twice(autograd.Function):
            def forward(self, x):
                return 2 * x

            def backward(self, dy):
                return 2 * dy

        f = Twice()
        x = f64([1.0])
        assert_close(f(x), [2.0])
        # MXNet asserts; either way the second call must fail loudly
        with pytest.raises((RuntimeError, AssertionError), match="once"):
            f(x)
