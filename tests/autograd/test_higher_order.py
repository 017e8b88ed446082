"""Higher-order gradients: any order, mixed partials, the nnabla and MXNet examples."""

import math

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd, np, npx


def var(values, dtype=onp.float64):
    x = np.array(onp.asarray(values, dtype=dtype))
    x.attach_grad()
    return x


def nth_grad(f, x, n):
    """The n-th derivative of the elementwise function f at x, by nesting grad."""
    with autograd.record():
        g = f(x)
        for _ in range(n):
            g = autograd.grad(g, [x], create_graph=True)[0]
    return g


def test_tenth_derivative_of_sin_and_its_backward_give_the_eleventh():
    # nnabla's example: d^10 sin = -sin, and one more backward gives -cos.
    xs = onp.linspace(-onp.pi, onp.pi, 9)
    x = var(xs)
    g = nth_grad(np.sin, x, 10)
    onp.testing.assert_allclose(g.asnumpy(), -onp.sin(xs), atol=1e-12)
    g.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), -onp.cos(xs), atol=1e-12)


def _tanh4(t):
    """d^4/dx^4 tanh(x) in terms of t = tanh(x): with d t = 1 - t^2,
    d2 = -2 t (1 - t^2), d3 = (1 - t^2)(6 t^2 - 2), d4 = 8 t (1 - t^2)(2 - 3 t^2)."""
    return 8 * t * (1 - t * t) * (2 - 3 * t * t)


CLOSED_FORMS = {
    # name: (f, 4th derivative, domain)
    "exp": (np.exp, onp.exp, (-1.0, 1.0)),
    "log": (np.log, lambda t: -6.0 / t ** 4, (0.5, 2.0)),
    "x*sin(x)": (lambda t: t * np.sin(t), lambda t: t * onp.sin(t) - 4 * onp.cos(t), (-2, 2)),
    "tanh": (np.tanh, lambda t: _tanh4(onp.tanh(t)), (-1.0, 1.0)),
    "x**3": (lambda t: t ** 3, lambda t: 0 * t, (0.5, 2.0)),
    "sqrt": (np.sqrt, lambda t: -15.0 / 16.0 * t ** -3.5, (0.5, 2.0)),
    "reciprocal": (lambda t: 1 / t, lambda t: 24.0 / t ** 5, (0.5, 2.0)),
    "cos": (np.cos, onp.cos, (-2.0, 2.0)),
}


@pytest.mark.parametrize("name", sorted(CLOSED_FORMS))
def test_fourth_derivative_matches_closed_form(name):
    f, d4, (lo, hi) = CLOSED_FORMS[name]
    xs = onp.linspace(lo, hi, 7)
    expected = d4(xs)
    x = var(xs)
    # x**3's fourth derivative is zero: the third is the constant 6, which has no history.
    with autograd.record():
        g = f(x)
        for _ in range(4):
            g = autograd.grad(g, [x], create_graph=True, allow_unused=True)[0]
    onp.testing.assert_allclose(g.asnumpy(), expected, rtol=1e-10, atol=1e-10)


def test_mxnet_docstring_create_graph_example():
    x = mx.nd.ones((1,))
    x.attach_grad()
    with autograd.record():
        z = mx.nd.elemwise_add(mx.nd.exp(x), x)
    dx = autograd.grad(z, [x], create_graph=True)[0]
    onp.testing.assert_allclose(dx.asnumpy(), [math.e + 1], rtol=1e-6)
    dx.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), [math.e], rtol=1e-6)


def test_second_derivative_of_linear_function_is_zero():
    # A derivative constant in x is still a function of x: zeros, no opt-in (Note [Zero
    # gradients]).
    x = var([1.0, 2.0])
    with autograd.record():
        y = 3 * x + 1
        (g,) = autograd.grad(y, [x], create_graph=True)
    onp.testing.assert_array_equal(g.asnumpy(), [3.0, 3.0])
    (h,) = autograd.grad(g, [x])
    onp.testing.assert_array_equal(h.asnumpy(), [0.0, 0.0])
    (h,) = autograd.grad(g, [x], allow_unused=True)
    onp.testing.assert_array_equal(h.asnumpy(), [0.0, 0.0])


def test_unreached_variable_is_named_unless_opted_in():
    x, y = var([1.0]), var([2.0])
    with autograd.record():
        z = x * 2
    with pytest.raises(ValueError, match="variable 1"):
        autograd.grad(z, [x, y])
    gx, gy = autograd.grad(z, [x, y], allow_unused=True)
    assert gx.asnumpy().tolist() == [2.0] and gy.asnumpy().tolist() == [0.0]


def test_mixed_partial_derivatives():
    # f = x^2 y^3: d2f/dxdy = 6 x y^2
    x, y = var([1.5]), var([-0.5])
    with autograd.record():
        f = x * x * y * y * y
        (fx,) = autograd.grad(f, [x], create_graph=True)
        (fxy,) = autograd.grad(fx, [y], create_graph=True)
    onp.testing.assert_allclose(fxy.asnumpy(), 6 * 1.5 * 0.25)
    fxy.backward()  # d/dx (6 x y^2) = 6 y^2, d/dy = 12 x y
    onp.testing.assert_allclose(x.grad.asnumpy(), [6 * 0.25])
    onp.testing.assert_allclose(y.grad.asnumpy(), [12 * 1.5 * -0.5])


def test_several_heads_and_variables_with_scalar_and_numpy_head_grads():
    x, y = var([1.0, 2.0]), var([3.0, 4.0])
    with autograd.record():
        a = x * y
        b = np.sin(x)
    gx, gy = autograd.grad([a, b], [x, y], head_grads=[2.0, onp.array([1.0, -1.0])])
    onp.testing.assert_allclose(gx.asnumpy(), 2 * y.asnumpy() + onp.cos([1.0, 2.0]) * [1, -1])
    onp.testing.assert_allclose(gy.asnumpy(), 2 * x.asnumpy())


def test_grad_returns_new_arrays_and_leaves_dot_grad_alone():
    x = var([1.0, 2.0])
    with autograd.record():
        y = (x * x).sum()
    (g,) = autograd.grad(y, [x])
    onp.testing.assert_array_equal(g.asnumpy(), [2.0, 4.0])
    onp.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 0.0])


def test_jacobian_hessian_and_products_against_closed_forms():
    xs = onp.array([0.3, -0.7, 1.1])
    x = np.array(xs)
    f = lambda t: np.sin(t) * t  # noqa: E731 - elementwise
    J = autograd.jacobian(f, x).asnumpy()
    onp.testing.assert_allclose(J, onp.diag(onp.cos(xs) * xs + onp.sin(xs)))
    scalar = lambda t: (t ** 3).sum() + (t[0] * t[1])  # noqa: E731
    H = autograd.hessian(scalar, x).asnumpy()
    expected = onp.diag(6 * xs)
    expected[0, 1] = expected[1, 0] = 1.0
    onp.testing.assert_allclose(H, expected)
    v = onp.array([1.0, 2.0, -1.0])
    onp.testing.assert_allclose(autograd.hvp(scalar, x, np.array(v)).asnumpy(), expected @ v)
    onp.testing.assert_allclose(autograd.jvp(f, x, np.array(v)).asnumpy(),
                                onp.diag(J) * v)
    onp.testing.assert_allclose(autograd.vjp(f, x, np.array(v)).asnumpy(), onp.diag(J) * v)


def test_hessian_of_softmax_cross_entropy_is_symmetric_and_matches_fd():
    rng = onp.random.default_rng(0)
    logits = rng.standard_normal(4)
    label = onp.array([2])

    def loss(t):
        return npx.softmax_cross_entropy(np.reshape(t, (1, 4)), label)

    H = autograd.hessian(loss, np.array(logits)).asnumpy()
    p = onp.exp(logits - logits.max())
    p /= p.sum()
    onp.testing.assert_allclose(H, onp.diag(p) - onp.outer(p, p), atol=1e-12)


def test_higher_order_through_reductions_broadcasting_and_matmul():
    rng = onp.random.default_rng(1)
    A = rng.standard_normal((3, 3))
    xs = rng.standard_normal(3)
    x = var(xs)
    # f = sum(tanh(A x)^2): check the Hessian-vector product against finite differences.
    v = rng.standard_normal(3)

    def grad_at(t):
        tt = var(t)
        with autograd.record():
            f = (np.tanh(np.matmul(np.array(A), tt)) ** 2).sum()
        f.backward()
        return tt.grad.asnumpy()

    with autograd.record():
        f = (np.tanh(np.matmul(np.array(A), x)) ** 2).sum()
        (g,) = autograd.grad(f, [x], create_graph=True)
        (hv,) = autograd.grad((g * np.array(v)).sum(), [x])
    eps = 1e-6
    fd = (grad_at(xs + eps * v) - grad_at(xs - eps * v)) / (2 * eps)
    onp.testing.assert_allclose(hv.asnumpy(), fd, rtol=1e-6, atol=1e-8)


def test_list_ops_reports_every_op_and_its_order():
    ops = mx.list_ops()
    assert ops["sin"] == {"differentiable": True, "order": "any", "inputs": 1, "params": ()}
    assert ops["less"]["differentiable"] is False and ops["less"]["order"] == 0
    assert len(ops) >= 50


def test_gradient_penalty_through_a_conv_net_matches_finite_differences():
    """nnabla's gradient-penalty example in fastgrad's API: conv, relu, max pooling, fully
    connected and softmax cross-entropy; the penalty on the norms of the parameters'
    gradients is added to the loss and differentiated (second order through every op)."""
    rng = onp.random.default_rng(3)
    data = np.array(rng.standard_normal((2, 1, 6, 6)))
    labels = onp.array([0, 2])
    shapes = {"w": (3, 1, 3, 3), "b": (3,), "fw": (3, 12), "fb": (3,)}
    values = {k: rng.standard_normal(s) * 0.5 for k, s in shapes.items()}
    lam = 0.1

    def total(vals, keep=None):
        params = {k: np.array(v) for k, v in vals.items()}
        for p in params.values():
            p.attach_grad()
        with autograd.record():
            h = npx.convolution(data, params["w"], params["b"], kernel=(3, 3), num_filter=3,
                                pad=(1, 1))
            h = npx.pooling(npx.relu(h), kernel=(3, 3), stride=(3, 3), pool_type="max")
            logits = npx.fully_connected(h, params["fw"], params["fb"], num_hidden=3)
            loss = npx.softmax_cross_entropy(logits, labels)
            grads = autograd.grad(loss, list(params.values()), create_graph=True)
            penalty = sum((g * g).sum() for g in grads)
            objective = loss + lam * penalty
        if keep is not None:
            objective.backward()
            keep.update({k: p.grad.asnumpy() for k, p in params.items()})
        return float(objective)

    analytic = {}
    total(values, analytic)
    eps = 1e-6
    for name, value in values.items():
        numeric = onp.zeros_like(value)
        for idx in onp.ndindex(value.shape):
            up = {k: v.copy() for k, v in values.items()}
            down = {k: v.copy() for k, v in values.items()}
            up[name][idx] += eps
            down[name][idx] -= eps
            numeric[idx] = (total(up) - total(down)) / (2 * eps)
        onp.testing.assert_allclose(analytic[name], numeric, rtol=1e-5, atol=1e-7,
                                    err_msg=name)


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_send_the_gradient_to_the_operand_that_is_not_nan(name):
    f = getattr(np, name)
    x = var([onp.nan, 1.0, 3.0])
    y = var([1.0, onp.nan, 2.0])
    with autograd.record():
        z = f(x, y)
    z.backward()
    pick_x = [0.0, 1.0, 1.0 if name == "fmax" else 0.0]
    onp.testing.assert_array_equal(x.grad.asnumpy(), pick_x)
    onp.testing.assert_array_equal(y.grad.asnumpy(), 1.0 - onp.array(pick_x))


def _op_counts(a):
    import json
    from collections import Counter
    text = autograd.get_symbol(a).tojson(layout="fastgrad")
    return Counter(n["op"] for n in json.loads(text)["nodes"])


def test_a_pass_records_each_unary_op_of_an_array_once():
    """Note [Shared subexpressions]: rules of several nodes asking for cos(x) share one."""
    x = var([0.3, -1.2, 2.0])
    with autograd.record():
        y = np.sin(x) + np.sin(x) * 2.0 + np.sin(x) * 3.0      # three sin nodes of x
        (d,) = autograd.grad(np.sum(y), [x], create_graph=True)
    onp.testing.assert_allclose(d.asnumpy(), 6 * onp.cos(x.asnumpy()), rtol=1e-15)
    assert _op_counts(d)["cos"] == 1
    # Nothing is kept once the pass is over, and the next pass starts afresh.
    import gc
    import weakref
    from fastgrad._ops import _memo
    assert _memo.current() is None
    with autograd.record():
        t = np.sin(x) * 1.0
        (e,) = autograd.grad(np.sum(np.sin(t) + np.sin(t)), [x], create_graph=True)
    probe = weakref.ref(t)
    del t, e
    gc.collect()
    assert probe() is None


class _GradInside(autograd.Function):
    """y = sin(x) * 2, whose backward finds cos(x) by a create_graph pass of its own."""

    def __init__(self, detach):
        super().__init__()
        self.detach = detach

    def forward(self, x):
        self.save_for_backward(x)
        return np.sin(x) * 2

    def backward(self, dy):
        (x,) = self.saved_tensors
        if self.detach:
            x = x.detach()
            x.attach_grad()
        with autograd.record():
            inner = np.sum(np.sin(x) + np.sin(x))        # the inner pass's own memo
        (gx,) = autograd.grad(inner, [x], create_graph=True)
        return dy * gx


def test_a_pass_inside_a_pass_has_its_own_memo_and_nodes():
    x = var([0.5, 1.5])
    with autograd.record():
        y = np.sum(np.cos(x) + _GradInside(detach=True)(x))
    y.backward()
    xs = x.asnumpy()
    onp.testing.assert_allclose(x.grad.asnumpy(), -onp.sin(xs) + 2 * onp.cos(xs), rtol=1e-15)
    from fastgrad._ops import _memo
    assert _memo.current() is None


def test_a_pass_inside_a_pass_may_reach_the_outer_passs_nodes():
    # The inner pass keeps its own state for x's node (Note [Pass state]), so the outer
    # pass's pending gradient for x survives it.
    x = var([0.5, 1.5])
    with autograd.record():
        y = np.sum(np.cos(x) + _GradInside(detach=False)(x))
    y.backward()
    xs = x.asnumpy()
    onp.testing.assert_allclose(x.grad.asnumpy(), -onp.sin(xs) + 2 * onp.cos(xs), rtol=1e-15)