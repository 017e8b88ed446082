"""The function transforms of ``fastgrad.functional``: values against closed forms and
finite differences, nesting to any order, argument trees, and the memory ``checkpoint``
saves."""
import gc
import tracemalloc

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import np
from fastgrad.functional import (checkpoint, elementwise_grad, grad, grad_and_aux,
                                 grad_and_loss, hessian, hessian_vector_product, jacobian,
                                 jvp, make_jvp, make_vjp, value_and_grad, vjp)


def A(x):
    """A transform's result as a NumPy array, whichever kind it is."""
    return onp.asarray(x)


def f64(*values):
    return np.array(onp.array(values, dtype=onp.float64))


def numeric_jacobian(f, x, eps=1e-6):
    x = onp.array(x, dtype=onp.float64)
    cols = []
    for idx in onp.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[idx] += eps
        down[idx] -= eps
        cols.append((onp.asarray(f(up)) - onp.asarray(f(down))) / (2 * eps))
    out_shape = onp.shape(f(x))
    return onp.stack(cols, axis=-1).reshape(out_shape + x.shape)


# ---------------------------------------------------------------- grad and nesting
def test_grad_of_sin_to_the_fourth_order_matches_closed_forms():
    x = np.array(0.7, dtype="float64")
    d = np.sin
    expected = [onp.cos(0.7), -onp.sin(0.7), -onp.cos(0.7), onp.sin(0.7)]
    for want in expected:
        d = grad(d)
        assert float(d(x)) == pytest.approx(want, rel=1e-12)


def test_third_derivative_of_a_product_of_ops():
    # f(x) = x^2 exp(x): f''' = exp(x) (x^2 + 6x + 6)
    def f(x):
        return x * x * np.exp(x)
    x = 0.3
    assert float(grad(grad(grad(f)))(x)) == pytest.approx(onp.exp(x) * (x * x + 6 * x + 6),
                                                           rel=1e-12)


def test_grad_of_a_closure_over_an_outer_argument():
    # d/dx [d/dy (x y^2) at y=3] = d/dx (6x) = 6
    def outer(x):
        return grad(lambda y: x * y * y)(3.0)
    assert float(grad(outer)(2.0)) == pytest.approx(6.0)


def test_grad_argnum_and_tuple_argnum():
    def f(x, y):
        return (x * x * y).sum()
    x, y = f64(1.0, 2.0), f64(3.0, 4.0)
    onp.testing.assert_allclose(grad(f, 1)(x, y), [1.0, 4.0])
    gx, gy = grad(f, (0, 1))(x, y)
    onp.testing.assert_allclose(gx, [6.0, 16.0])
    onp.testing.assert_allclose(gy, [1.0, 4.0])
    onp.testing.assert_allclose(grad(f, -1)(x, y), [1.0, 4.0])


def test_grad_keeps_the_structure_of_lists_tuples_and_dicts():
    params = [(f64(1.0, 2.0), f64(0.5)), {"w": f64(3.0)}]

    def loss(p):
        (a, b), d = p
        return (a * a).sum() * b.sum() + d["w"].sum() ** 2
    g = grad(loss)(params)
    assert isinstance(g, list) and isinstance(g[0], tuple) and isinstance(g[1], dict)
    onp.testing.assert_allclose(g[0][0], [1.0, 2.0])
    onp.testing.assert_allclose(g[0][1], [5.0])
    onp.testing.assert_allclose(g[1]["w"], [6.0])


def test_grad_of_python_numbers_and_integers_is_float64():
    assert grad(lambda x: x * x)(3.0).dtype == onp.float64
    g = grad(lambda x: (x * x).sum())(onp.array([1, 2]))
    assert g.dtype == onp.float64
    onp.testing.assert_allclose(g, [2.0, 4.0])


def test_top_level_grad_builds_no_second_graph_and_leaves_input_untouched():
    x = f64(1.0, 2.0)
    g = grad(lambda t: (t ** 3).sum())(x)
    assert g.node is None and x.node is None and x.grad is None


def test_grad_of_a_constant_function_is_zero():
    onp.testing.assert_array_equal(grad(lambda t: 5.0)(f64(1.0, 2.0)), [0, 0])
    onp.testing.assert_array_equal(grad(lambda t: np.array(2.0))(f64(1.0)), [0])


def test_grad_errors_name_the_transform():
    with pytest.raises(TypeError, match="grad.*single number"):
        grad(lambda t: t * 2)(f64(1.0, 2.0))
    with pytest.raises(TypeError, match="argnum 2 is out of range"):
        grad(lambda a, b: a * b, 2)(1.0, 2.0)
    with pytest.raises(TypeError, match="grad: argnum 0 is out of range.* 0 argument"):
        grad(lambda: 1.0)()


def test_grad_inside_record_keeps_history():
    x = f64(0.5)
    x.attach_grad()
    with mx.autograd.record():
        g = grad(lambda t: (np.sin(t) * t).sum())(x)      # sin x + x cos x
        assert g.node is not None
    g.backward()                                          # 2 cos x - x sin x
    onp.testing.assert_allclose(x.grad, 2 * onp.cos(0.5) - 0.5 * onp.sin(0.5))


# ---------------------------------------------------------------- the other transforms
def test_value_and_grad_and_grad_and_aux():
    v, g = value_and_grad(lambda t: (t ** 3).sum())(f64(1.0, 2.0))
    assert float(v) == 9.0 and v.node is None
    onp.testing.assert_allclose(g, [3.0, 12.0])
    g, aux = grad_and_aux(lambda t: ((t * t).sum(), {"n": 2}))(f64(1.0, 2.0))
    onp.testing.assert_allclose(g, [2.0, 4.0])
    assert aux == {"n": 2}
    with pytest.raises(TypeError, match="grad_and_aux.*pair"):
        grad_and_aux(lambda t: (t * t).sum())(f64(1.0))


def test_elementwise_grad_of_tanh():
    x = onp.linspace(-2, 2, 7)
    onp.testing.assert_allclose(elementwise_grad(np.tanh)(x), 1 - onp.tanh(x) ** 2,
                                rtol=1e-12)
    onp.testing.assert_allclose(elementwise_grad(elementwise_grad(np.tanh))(x),
                                -2 * onp.tanh(x) * (1 - onp.tanh(x) ** 2), rtol=1e-12)


def test_jacobian_against_finite_differences():
    def f(x):
        return np.stack([np.sin(x[0] * x[1]), x[0] ** 2, np.exp(x[1]) * x[2]])
    x = onp.array([0.3, -0.7, 1.1])
    want = numeric_jacobian(lambda v: f(np.array(v)), x)
    onp.testing.assert_allclose(jacobian(f)(x), want, rtol=1e-7, atol=1e-9)


def test_jacobian_of_matrix_function_has_output_then_input_shape():
    a = onp.random.default_rng(0).normal(size=(2, 3))
    j = jacobian(lambda m: np.tanh(m) * 2)(a)
    assert j.shape == (2, 3, 2, 3)
    onp.testing.assert_allclose(
        j.reshape(6, 6), onp.diag(2 * (1 - onp.tanh(a.ravel()) ** 2)), rtol=1e-12)


def test_hessian_and_hessian_vector_product_of_a_quadratic_form_and_a_nonlinear_one():
    rng = onp.random.default_rng(1)
    a = rng.normal(size=(3, 3))
    x = rng.normal(size=3)
    h = hessian(lambda t: np.dot(t, np.dot(np.array(a), t)))(x)
    onp.testing.assert_allclose(h, a + a.T, rtol=1e-12)

    def f(t):
        return np.sum(np.sin(t) * t[0])
    want = numeric_jacobian(lambda v: grad(f)(v), x)
    onp.testing.assert_allclose(hessian(f)(x), want, rtol=1e-6, atol=1e-8)
    v = rng.normal(size=3)
    onp.testing.assert_allclose(hessian_vector_product(f)(x, v), want @ v,
                                rtol=1e-6, atol=1e-8)


def test_grad_of_the_hessian_trace_is_the_third_derivative():
    # f = sum(x^4): H = diag(12 x^2), d/dx trace(H) = 24 x
    def trace_h(t):
        return np.trace(hessian(lambda s: (s ** 4).sum())(t))
    onp.testing.assert_allclose(grad(trace_h)(onp.array([1.0, -2.0])), [24.0, -48.0])


def test_vjp_and_jvp_agree_with_the_jacobian():
    rng = onp.random.default_rng(2)
    x, y = rng.normal(size=3), rng.normal(size=3)

    def f(a, b):
        return np.sin(a) * b + a ** 2

    ja = jacobian(f, 0)(x, y)
    jb = jacobian(f, 1)(x, y)
    ct = rng.normal(size=3)
    out, vjp_fun = vjp(f, x, y)
    onp.testing.assert_allclose(out, onp.sin(x) * y + x ** 2)
    ga, gb = vjp_fun(ct)
    onp.testing.assert_allclose(ga, ct @ ja, rtol=1e-12)
    onp.testing.assert_allclose(gb, ct @ jb, rtol=1e-12)
    ga2, _ = vjp_fun(2 * ct)           # callable again
    onp.testing.assert_allclose(ga2, 2 * ct @ ja, rtol=1e-12)
    ta, tb = rng.normal(size=3), rng.normal(size=3)
    out, t_out = jvp(f, (x, y), (ta, tb))
    onp.testing.assert_allclose(t_out, ja @ ta + jb @ tb, rtol=1e-12)
    vjp_a, value = make_vjp(f, 0)(x, y)
    onp.testing.assert_allclose(vjp_a(ct), ct @ ja, rtol=1e-12)
    value, t_a = make_jvp(f, 0)(x, y)(ta)
    onp.testing.assert_allclose(t_a, ja @ ta, rtol=1e-12)


def test_jvp_nests_under_grad():
    # d/dx of (d/dx sin(x)*v) = -sin(x) v
    def directional(x):
        return jvp(np.sin, (x,), (np.array(2.0, dtype="float64"),))[1]
    assert float(grad(directional)(0.4)) == pytest.approx(-2 * onp.sin(0.4), rel=1e-12)


# ---------------------------------------------------------------- MXNet 1.x
def test_grad_and_loss_returns_a_list_and_the_outputs():
    x, y = f64(2.0, 3.0), f64(5.0, 7.0)
    grads, loss = grad_and_loss(lambda a, b: a * b)(x, y)
    onp.testing.assert_allclose(loss, [10.0, 21.0])
    onp.testing.assert_allclose(grads[0], [5.0, 7.0])
    onp.testing.assert_allclose(grads[1], [2.0, 3.0])
    grads, _ = mx.autograd.grad_and_loss(lambda a, b: (a * a * b).sum(), 0)(x, y)
    assert len(grads) == 1
    onp.testing.assert_allclose(grads[0], [20.0, 42.0])
    with pytest.raises(TypeError, match="grad_and_loss: argument 0 must be a fastgrad array"):
        grad_and_loss(lambda a: a)(1.0)


# ---------------------------------------------------------------- checkpoint
def _block(x):
    for _ in range(8):
        x = np.tanh(x) * 1.5 + np.sin(x)
    return x


def test_checkpoint_gives_the_same_gradients_to_second_order():
    rng = onp.random.default_rng(3)
    x = rng.normal(size=(4,))

    def loss(block):
        return lambda t: (block(t) ** 2).sum()
    plain = grad(loss(_block))(x)
    ck = grad(loss(checkpoint(_block)))(x)
    onp.testing.assert_allclose(ck, plain, rtol=1e-12)
    h_plain = hessian(loss(_block))(x)
    h_ck = hessian(loss(checkpoint(_block)))(x)
    onp.testing.assert_allclose(h_ck, h_plain, rtol=1e-10)


def test_checkpoint_with_constant_arguments_and_several_outputs():
    def two(x, scale, y):
        return x * scale * y, np.sin(x)
    f = checkpoint(two)
    x, y = f64(0.5, 1.0), f64(2.0, 3.0)
    x.attach_grad()
    y.attach_grad()
    with mx.autograd.record():
        a, b = f(x, 3.0, y)
        loss = (a + b).sum()
    loss.backward()
    onp.testing.assert_allclose(x.grad, 3 * y + onp.cos(x))
    onp.testing.assert_allclose(y.grad, 3 * x)


def _retained_bytes(block, x):
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        with mx.autograd.record():
            y = block(x)
            loss = (y * y).sum()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    loss.backward()
    return held


def test_checkpoint_keeps_only_inputs_and_outputs_while_recording():
    x = np.array(onp.random.default_rng(4).normal(size=200_000))   # 1.6 MB
    x.attach_grad()
    plain = _retained_bytes(_block, x)
    g_plain = x.grad.copy()
    ck = _retained_bytes(checkpoint(_block), x)
    onp.testing.assert_allclose(x.grad, g_plain, rtol=1e-12)
    # Without checkpoint the 8 layers keep at least one 1.6 MB buffer each; with it, the
    # graph holds the output (and the loss's copy of it) only.
    assert plain > 8 * x.nbytes
    assert ck < 3 * x.nbytes


def test_checkpoint_outside_record_is_the_plain_function():
    x = f64(0.2)
    onp.testing.assert_allclose(checkpoint(_block)(x), _block(x))


def test_checkpoint_differentiates_to_the_fourth_order():
    d = checkpoint(np.sin)
    for want in [onp.cos(0.5), -onp.sin(0.5), -onp.cos(0.5), onp.sin(0.5)]:
        d = grad(d)
        assert float(d(0.5)) == pytest.approx(want, rel=1e-12)


def test_results_follow_the_kind_of_the_arguments():
    # NumPy in, NumPy out (HIPS autograd code, scipy.optimize); fastgrad in, fastgrad out.
    v, g = value_and_grad(lambda t: (t ** 2).sum())(onp.array([1.0, 2.0]))
    assert type(v) is onp.float64 and type(g) is onp.ndarray
    assert type(grad(lambda t: t * t)(3.0)) is onp.float64
    assert isinstance(grad(lambda t: (t * t).sum())(f64(1.0)), mx.np.ndarray)
    assert type(jacobian(np.sin)(onp.array([1.0]))) is onp.ndarray
    assert isinstance(jacobian(np.sin)(f64(1.0)), mx.np.ndarray)


def test_scipy_optimize_minimize_with_value_and_grad():
    scipy_optimize = pytest.importorskip("scipy.optimize")

    def rosenbrock(p):
        return (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2
    res = scipy_optimize.minimize(value_and_grad(rosenbrock), onp.array([-1.0, 1.5]),
                                  jac=True, method="BFGS")
    onp.testing.assert_allclose(res.x, [1.0, 1.0], rtol=1e-4)
