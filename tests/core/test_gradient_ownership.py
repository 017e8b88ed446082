"""Which gradient buffers a backward pass may write in place (Note [Gradient buffer ownership]).

The pass adds into a buffer only when it allocated it and has not handed it out. Every case
below shares one gradient array between two places (two consumers, a user's Function, a
``grad`` result, the caller's head gradient): a pass that added in place into it would corrupt
the other holder. Each test checks the values against closed forms and that what the user
holds is unchanged, on the tape and, where it applies, on the executor.
"""

import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastgrad as mx  # noqa: E402


def _arr(values):
    a = mx.np.array(onp.asarray(values, dtype=onp.float64))
    a.attach_grad()
    return a


X0 = onp.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
C0 = onp.array([[2.0, 3.0, -1.0], [0.5, -2.0, 4.0]])


@pytest.mark.parametrize("b_first", [False, True])
def test_an_identity_gradient_reaching_two_consumers_is_not_written_in_place(b_first):
    # add hands one array to both inputs; reshape passes a view of it on. Each of a, b, x
    # then gets more contributions, which must not be added into the shared array (in either
    # order of delivery).
    x = _arr(X0)
    with mx.autograd.record():
        a = x * 2.0
        b = x * 3.0
        s = b + a if b_first else a + b  # d/da = d/db = the same g
        r = mx.np.reshape(s, (6,))       # g reaches s as a view of r's gradient
        y = mx.np.sum(r * mx.np.array(C0.reshape(6))) + mx.np.sum(a * a) + mx.np.sum(b)
    y.backward()
    # dy/da = C + 2a, dy/db = C + 1
    want = 2.0 * (C0 + 4.0 * X0) + 3.0 * (C0 + 1.0)
    onp.testing.assert_allclose(x.grad.asnumpy(), want, rtol=1e-14)


def test_the_same_on_the_executor():
    xs, cs = mx.sym.var("x"), mx.sym.var("c")
    a = xs * 2.0
    b = xs * 3.0
    r = mx.sym.reshape(a + b, (6,))
    y = mx.sym.sum(r * mx.sym.reshape(cs, (6,))) + mx.sym.sum(a * a) + mx.sym.sum(b)
    ex = y.bind(mx.cpu(), {"x": mx.np.array(X0), "c": mx.np.array(C0)},
                grad_req={"x": "write", "c": "null"})
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward()
        want = 2.0 * (C0 + 4.0 * X0) + 3.0 * (C0 + 1.0)
        onp.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), want, rtol=1e-14)


class KeepsItsGradient(mx.autograd.Function):
    """The identity, whose backward keeps the gradient it received and returns it."""

    def forward(self, x):
        return x * 1.0

    def backward(self, dy):
        self.kept = dy
        self.kept_copy = dy.asnumpy().copy()
        return dy


def test_a_function_that_keeps_its_gradient_sees_it_unchanged():
    x = _arr(X0)
    f = KeepsItsGradient()
    with mx.autograd.record():
        u = x * mx.np.array(C0)          # a fresh array: the pass owns u's gradient
        v = f(u)
        y = mx.np.sum(v * v) + mx.np.sum(u * 3.0)
    y.backward()
    # dy/du = 2u + 3, through f and directly; f kept 2u.
    u0 = X0 * C0
    onp.testing.assert_array_equal(f.kept.asnumpy(), f.kept_copy)
    onp.testing.assert_allclose(f.kept_copy, 2.0 * u0, rtol=1e-15)
    onp.testing.assert_allclose(x.grad.asnumpy(), (2.0 * u0 + 3.0) * C0, rtol=1e-14)


class ReturnsAKeptArray(mx.autograd.Function):
    """``y = 2 x``, whose backward returns an array it keeps (and reuses)."""

    def forward(self, x):
        self.buf = mx.np.zeros(x.shape)
        return 2.0 * x

    def backward(self, dy):
        self.buf[:] = 2.0 * dy.asnumpy()
        return self.buf


def test_an_array_a_function_returns_and_keeps_is_not_written_in_place():
    x = _arr(X0)
    f = ReturnsAKeptArray()
    with mx.autograd.record():
        y = mx.np.sum(f(x) * mx.np.array(C0)) + mx.np.sum(x * x)
    y.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), 2.0 * C0 + 2.0 * X0, rtol=1e-15)
    onp.testing.assert_allclose(f.buf.asnumpy(), 2.0 * C0, rtol=1e-15)


def test_grad_results_are_the_callers_even_when_they_flow_on():
    # h = x + 0 passes h's gradient on to x unchanged; x has a second contribution. The
    # returned gradient of h must not be the array x's gradient was accumulated into.
    x = _arr(X0)
    with mx.autograd.record():
        h = x + 0.0
        y = mx.np.sum(h * mx.np.array(C0)) + mx.np.sum(x * x)
    gh, gx, gx2 = mx.autograd.grad(y, [h, x, x], create_graph=False, retain_graph=True)
    onp.testing.assert_allclose(gh.asnumpy(), C0, rtol=1e-15)
    onp.testing.assert_allclose(gx.asnumpy(), C0 + 2.0 * X0, rtol=1e-15)
    assert not onp.shares_memory(gx.asnumpy(), gx2.asnumpy())
    assert not onp.shares_memory(gh.asnumpy(), gx.asnumpy())
    # The caller owns them: writing into one changes no other, and a new pass adds its own.
    gx[:] = 0.0
    onp.testing.assert_allclose(gx2.asnumpy(), C0 + 2.0 * X0, rtol=1e-15)
    onp.testing.assert_allclose(gh.asnumpy(), C0, rtol=1e-15)
    y.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), C0 + 2.0 * X0, rtol=1e-15)
    onp.testing.assert_allclose(gh.asnumpy(), C0, rtol=1e-15)


def test_grad_results_accumulated_into_a_new_pass_stay_unchanged():
    x = _arr(X0)
    with mx.autograd.record():
        y = mx.np.sum(mx.np.sin(x))
    (g,) = mx.autograd.grad(y, [x])
    g_copy = g.asnumpy().copy()
    # g becomes the head gradient of a pass whose identity ops hand it to two consumers.
    with mx.autograd.record():
        z = x + x
        w = mx.np.reshape(z, (3, 2))
    w.backward(mx.np.reshape(g, (3, 2)))
    onp.testing.assert_array_equal(g.asnumpy(), g_copy)
    onp.testing.assert_allclose(x.grad.asnumpy(), 2.0 * onp.cos(X0), rtol=1e-15)


def test_views_of_the_head_gradient_are_never_written():
    x = _arr(X0)
    head = onp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    hg = mx.np.array(head)
    with mx.autograd.record():
        t = mx.np.transpose(mx.np.reshape(x, (2, 3)))     # views of the head gradient flow back
        y = t + mx.np.transpose(x) * 2.0 + t
    y.backward(hg)
    onp.testing.assert_array_equal(hg.asnumpy(), head)
    onp.testing.assert_allclose(x.grad.asnumpy(), 4.0 * head.T, rtol=1e-15)
    # x.grad holds an array of its own, not the head gradient's memory.
    assert not onp.shares_memory(x.grad.asnumpy(), hg.asnumpy())


def test_views_of_the_head_gradient_on_the_executor():
    xs = mx.sym.var("x")
    t = mx.sym.transpose(mx.sym.reshape(xs, (2, 3)))
    ex = (t + mx.sym.transpose(xs) * 2.0 + t).bind(mx.cpu(), {"x": mx.np.array(X0)})
    head = onp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    hg = mx.np.array(head)
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward(hg)
        onp.testing.assert_array_equal(hg.asnumpy(), head)
        onp.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), 4.0 * head.T, rtol=1e-15)


def test_a_variable_grad_buffer_is_not_the_pass_s_shared_gradient():
    # y = x0 + x1: both variables receive the same array; each .grad must be its own.
    x0, x1 = _arr(X0), _arr(C0)
    with mx.autograd.record():
        y = mx.np.sum((x0 + x1) * 3.0)
    y.backward()
    assert not onp.shares_memory(x0.grad.asnumpy(), x1.grad.asnumpy())
    x0.grad[:] = 0.0
    onp.testing.assert_allclose(x1.grad.asnumpy(), onp.full((2, 3), 3.0), rtol=0)


def test_a_gradient_passed_on_to_one_input_is_added_into_only_when_nobody_else_holds_it():
    # t's gradient (2t, the pass's own) is passed on by add to h alone; h gets a second
    # contribution. grad() also returns t's gradient, so it must not be added into.
    x = _arr(X0)
    with mx.autograd.record():
        h = mx.npx.relu(x)
        t = h + 1.0
        y = mx.np.sum(t * t) + mx.np.sum(h * 3.0)
    gt, gh, gx = mx.autograd.grad(y, [t, h, x], retain_graph=True)
    h0 = onp.maximum(X0, 0.0)
    onp.testing.assert_allclose(gt.asnumpy(), 2.0 * (h0 + 1.0), rtol=1e-15)
    onp.testing.assert_allclose(gh.asnumpy(), 2.0 * (h0 + 1.0) + 3.0, rtol=1e-15)
    onp.testing.assert_allclose(gx.asnumpy(), (2.0 * (h0 + 1.0) + 3.0) * (X0 > 0), rtol=1e-15)
    y.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), (2.0 * (h0 + 1.0) + 3.0) * (X0 > 0),
                                rtol=1e-15)


def test_a_broadcast_add_passes_its_gradient_to_the_full_size_input():
    # add hands g to x (kept as it is: the pass may make it x.grad) and to b (summed).
    x = _arr(X0)
    b = _arr(C0[0])
    with mx.autograd.record():
        y = mx.np.sum(mx.npx.relu(x + b) * 2.0)
    y.backward()
    active = (X0 + C0[0]) > 0
    onp.testing.assert_allclose(x.grad.asnumpy(), 2.0 * active, rtol=0)
    onp.testing.assert_allclose(b.grad.asnumpy(), 2.0 * active.sum(0), rtol=0)
    assert not onp.shares_memory(x.grad.asnumpy(), b.grad.asnumpy())


def test_in_place_accumulation_never_touches_an_array_someone_else_holds():
    class Keep(mx.autograd.Function):
        def forward(self, x):
            return x * 1

        def backward(self, dy):
            self.kept = dy * 2
            self.snapshot = self.kept.asnumpy()
            return self.kept

    x = mx.np.array([1.0, 2.0])
    x.attach_grad()
    with mx.autograd.record():
        fn = Keep()
        y = (fn(x) + x * 3 + mx.np.sin(x)).sum()
    y.backward()
    onp.testing.assert_array_equal(fn.kept.asnumpy(), fn.snapshot)
    onp.testing.assert_allclose(x.grad.asnumpy(), 5 + onp.cos([1.0, 2.0]))
