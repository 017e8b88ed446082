"""What is recorded: the recording and training scopes, ``grad_req`` and ``mark_variables``, head
gradients and ``backward()``'s errors, dropout in train mode, ``detach``, in-place writes.
"""
import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastgrad import autograd, np, npx  # noqa: E402

from _helpers import assert_close, f64, to_numpy  # noqa: E402


def _state():
    return (autograd.is_recording(), autograd.is_training())


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
    @pytest.mark.parametrize("initial",
                             [(False, False), (True, True), (True, False), (False, True)])
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
