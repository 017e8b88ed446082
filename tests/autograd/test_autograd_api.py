"""``autograd.grad`` and ``autograd.Function``, checked against closed forms and float64 finite
differences.

What is recorded and ``backward()`` are in ``tests/core/test_recording.py``, first derivatives
of the array operations in ``tests/ops/test_gradients_fd.py``, higher orders in
``test_higher_order_closed_forms.py`` and ``test_higher_order.py``, the array type in
``tests/core/test_array.py``.
"""

import os
import re
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastgrad import autograd, np  # noqa: E402

from _helpers import assert_close, f64  # noqa: E402


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


def test_variable_listed_twice_in_grad_gets_two_arrays():
    x = f64([1.0, 2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        z = (x * x).sum()
    g1, g2 = autograd.grad([z], [x, x])
    g1[:] = 0.0
    onp.testing.assert_array_equal(g2.asnumpy(), [2.0, 4.0, 6.0])
