"""First derivatives of the array operations against float64 finite differences: elementwise ops,
scalars on either side, broadcasting, reductions, shape ops, matmul, indexing, dtypes.
"""
import math
import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastgrad import autograd, nd, np, npx  # noqa: E402

from _helpers import assert_close, f64, numerical_grad  # noqa: E402


FD_RTOL = 1e-6


FD_ATOL = 1e-7


def _rng(seed=0):
    return onp.random.RandomState(seed)


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
    ("negative", np.negative, onp.negative, lambda a: -onp.ones_like(a),
     lambda r, s: r.uniform(-2, 2, s)),
    ("relu", npx.relu, lambda a: onp.maximum(a, 0), lambda a: (a > 0).astype(onp.float64),
     _away_from_zero),
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


@pytest.mark.parametrize("fg_fn,onp_fn,sampler", [b[1:] for b in BINARY],
                         ids=[b[0] for b in BINARY])
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
        xn, yn = rng.uniform(-1, 1, (3, 1)), rng.uniform(-1, 1, (1, 4))
        wn = rng.uniform(-1, 1, (3, 4))
        x, y = check_against_fd(lambda a, b: a * b, onp.multiply, xn, yn, head=wn)
        assert_close(x.grad, onp.sum(wn * yn, axis=1, keepdims=True), rtol=1e-12)
        assert_close(y.grad, onp.sum(wn * xn, axis=0, keepdims=True), rtol=1e-12)

    def test_broadcast_vector_against_3d(self):
        rng = _rng(10)
        vn, tn = rng.uniform(-1, 1, (4,)), rng.uniform(-1, 1, (2, 3, 4))
        v, t = check_against_fd(lambda a, b: np.sin(a * b - a),
                                lambda a, b: onp.sin(a * b - a), vn, tn)
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
        assert_close(nd.sum(b, axis=1, keepdims=True),
                     onp.array([[3.0], [7.0]], dtype=onp.float32))

    def test_nd_full_reduction_backward(self):
        b = nd.array([[1, 2], [3, 4]])
        b.attach_grad()
        with autograd.record():
            t = nd.sum(b * b)
        assert t.shape == (1,)
        t.backward()
        assert b.grad.dtype == onp.float32
        assert_close(b.grad, onp.array([[2.0, 4.0], [6.0, 8.0]], dtype=onp.float32),
                     rtol=0, atol=0)


class TestShapeAndLinearAlgebra:
    def test_matmul_gradient(self):
        rng = _rng(13)
        an, bn = rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (3, 4))
        wn = rng.uniform(-1, 1, (2, 4))
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
# Higher-order derivatives (float64, closed forms)
# ==========================================================================

def _fg_int_array(values):
    return np.array(onp.array(values, dtype=onp.int64))


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
