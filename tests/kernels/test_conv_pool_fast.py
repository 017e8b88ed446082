"""The im2col convolution and offset-slice pooling kernels (issue 17).

Checks the kernels against the formulation they replaced (a 6-D window view contracted with
``tensordot``, a 6-D ``max`` reduction and ``np.add.at`` at the ``argmax``), kept here as the
reference; ``npx.convolution`` and ``npx.pooling`` against finite differences in float64, to
first and second order; ties, NaN and infinite gradients in max pooling; float32; and the
reuse of im2col buffers (Note [Column buffers] in ``fastgrad/_kernels/_forward.py``).
"""
import os
import sys

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad._kernels import _forward as K
from fastgrad._kernels import _large
from fastgrad import autograd, npx
from fastgrad._core._array import unwrap

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _helpers import assert_close, numerical_grad, to_numpy  # noqa: E402


# ---------------------------------------------------------------- the old formulation
def _old_windows(xp, kernel, stride, dilate):
    kh, kw = kernel
    eh, ew = dilate[0] * (kh - 1) + 1, dilate[1] * (kw - 1) + 1
    win = onp.lib.stride_tricks.sliding_window_view(xp, (eh, ew), axis=(2, 3))
    return win[:, :, ::stride[0], ::stride[1], ::dilate[0], ::dilate[1]]


def _old_pad(x, pad, value=0):
    return onp.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])),
                   constant_values=value)


def old_conv2d(x, w, stride, pad, dilate):
    win = _old_windows(_old_pad(x, pad), w.shape[2:], stride, dilate)
    return onp.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)


def old_conv2d_weight_grad(x, g, stride, pad, dilate, kernel):
    win = _old_windows(_old_pad(x, pad), kernel, stride, dilate)
    return onp.tensordot(g, win, axes=([0, 2, 3], [0, 2, 3]))


def old_conv2d_input_grad(g, w, stride, pad, dilate, x_hw):
    n, _, oh, ow = g.shape
    _, c, kh, kw = w.shape
    out = onp.zeros((n, c, x_hw[0] + 2 * pad[0], x_hw[1] + 2 * pad[1]))
    cols = onp.tensordot(g, w, axes=([1], [0])).transpose(0, 3, 4, 5, 1, 2)
    for i in range(kh):
        for j in range(kw):
            hi, wj = i * dilate[0], j * dilate[1]
            out[:, :, hi:hi + stride[0] * (oh - 1) + 1:stride[0],
                wj:wj + stride[1] * (ow - 1) + 1:stride[1]] += cols[:, :, i, j]
    return out[:, :, pad[0]:pad[0] + x_hw[0], pad[1]:pad[1] + x_hw[1]]


def _old_argmax_key(x, kernel, stride, pad):
    win = _old_windows(_old_pad(x, pad, -onp.inf), kernel, stride, (1, 1))
    n, c, oh, ow, kh, kw = win.shape
    flat = win.reshape(n, c, oh, ow, kh * kw).argmax(axis=-1)
    row = flat // kw + (onp.arange(oh) * stride[0])[:, None]
    col = flat % kw + (onp.arange(ow) * stride[1])[None, :]
    return (onp.arange(n)[:, None, None, None], onp.arange(c)[None, :, None, None], row, col)


def old_max_pool2d(x, kernel, stride, pad):
    return _old_windows(_old_pad(x, pad, -onp.inf), kernel, stride, (1, 1)).max(axis=(4, 5))


def old_max_pool2d_scatter(g, x, kernel, stride, pad):
    n, c, h, w = x.shape
    out = onp.zeros((n, c, h + 2 * pad[0], w + 2 * pad[1]), dtype=g.dtype)
    onp.add.at(out, _old_argmax_key(x, kernel, stride, pad), g)
    return out[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w]


def old_max_pool2d_select(h, x, kernel, stride, pad):
    return _old_pad(h, pad)[_old_argmax_key(x, kernel, stride, pad)]


def old_avg_pool2d(x, kernel, stride, pad):
    return _old_windows(_old_pad(x, pad), kernel, stride, (1, 1)).mean(axis=(4, 5))


CONV_CASES = [
    # x shape, w shape, stride, pad, dilate
    ((2, 1, 7, 7), (3, 1, 5, 5), (1, 1), (2, 2), (1, 1)),      # LeNet's first layer, small
    ((2, 3, 6, 5), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1)),
    ((1, 2, 9, 8), (2, 2, 3, 2), (2, 3), (1, 0), (1, 1)),
    ((2, 2, 9, 9), (3, 2, 2, 3), (1, 2), (2, 1), (2, 3)),
    ((1, 1, 4, 4), (1, 1, 4, 4), (1, 1), (0, 0), (1, 1)),      # one output pixel
]

POOL_CASES = [
    # x shape, kernel, stride, pad
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0)),        # windows that tile the image
    ((2, 2, 9, 7), (2, 2), (2, 2), (0, 0)),        # a row and a column left over
    ((1, 2, 7, 6), (3, 3), (2, 2), (1, 1)),        # overlapping, padded
    ((2, 2, 6, 7), (3, 2), (1, 2), (1, 0)),
    ((1, 2, 6, 6), (2, 3), (3, 4), (0, 1)),        # gaps between windows
]


@pytest.mark.parametrize("xs, ws, stride, pad, dilate", CONV_CASES)
def test_conv_kernels_match_the_old_formulation(rng, xs, ws, stride, pad, dilate):
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    y = K.conv2d(x, w, stride, pad, dilate)
    assert_close(y, old_conv2d(x, w, stride, pad, dilate), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(y.shape)
    assert_close(K.conv2d_weight_grad(x, g, stride, pad, dilate, ws[2:]),
                 old_conv2d_weight_grad(x, g, stride, pad, dilate, ws[2:]),
                 rtol=1e-12, atol=1e-12)
    assert_close(K.conv2d_input_grad(g, w, stride, pad, dilate, xs[2:]),
                 old_conv2d_input_grad(g, w, stride, pad, dilate, xs[2:]),
                 rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs, ws, stride, pad, dilate", CONV_CASES)
def test_im2col_and_col2im_are_adjoint(rng, xs, ws, stride, pad, dilate):
    x = rng.standard_normal(xs)
    cols = K.im2col(x, ws[2:], stride, pad, dilate)
    c = rng.standard_normal(cols.shape)
    back = K.col2im(c, xs, ws[2:], stride, pad, dilate)
    assert back.shape == xs
    assert abs(onp.sum(cols * c) - onp.sum(x * back)) < 1e-10 * onp.sum(abs(cols * c))


@pytest.mark.parametrize("xs, ws, stride, pad, dilate", CONV_CASES)
def test_batch_last_columns_are_a_reordering_of_the_columns(rng, xs, ws, stride, pad, dilate):
    x = rng.standard_normal(xs)
    chwn = x.transpose(1, 2, 3, 0).copy().transpose(3, 0, 1, 2)      # batch innermost
    assert K.batch_innermost(chwn) == (xs[0] > 1) and not K.batch_innermost(x)
    cols = K.im2col(x, ws[2:], stride, pad, dilate)
    k = cols.shape[0]
    n, oh, ow = xs[0], *old_conv2d(x, onp.ones(ws), stride, pad, dilate).shape[2:]
    expected = cols.reshape(k, n, oh, ow).transpose(0, 2, 3, 1).reshape(k, -1)
    for data in (x, chwn):
        onp.testing.assert_array_equal(K.im2col(data, ws[2:], stride, pad, dilate, True),
                                       expected)
    c = rng.standard_normal(cols.shape)
    c_last = c.reshape(k, n, oh, ow).transpose(0, 2, 3, 1).reshape(k, -1)
    assert_close(K.col2im(c_last, xs, ws[2:], stride, pad, dilate, True),
                 K.col2im(c, xs, ws[2:], stride, pad, dilate), rtol=1e-13, atol=1e-13)


def test_convolution_of_batch_innermost_data_matches_and_differentiates(rng):
    """Max pooling leaves its output CHWN in memory, so a convolution after it takes the
    batch-last path; values and gradients equal those of the NCHW path."""
    x = rng.standard_normal((3, 2, 6, 6))
    w, b = rng.standard_normal((4, 2, 3, 3)), rng.standard_normal(4)
    results = []
    for through_pool in (False, True):
        leaf, wa, ba = mx.np.array(x), mx.np.array(w), mx.np.array(b)
        for a in (leaf, wa, ba):
            a.attach_grad()
        with autograd.record():
            inp = npx.pooling(leaf, kernel=(1, 1), pool_type="max") if through_pool else leaf
            assert K.batch_innermost(unwrap(inp)) == through_pool
            y = _conv(inp, wa, ba, (1, 1), (1, 1), (1, 1))
            loss = (y * y).sum()
        loss.backward()
        results.append([to_numpy(y)] + [to_numpy(a.grad) for a in (leaf, wa, ba)])
    for a, e in zip(*results):
        assert_close(a, e, rtol=1e-12, atol=1e-12)
    expected = numerical_grad(
        lambda x: to_numpy(_conv(npx.pooling(mx.np.array(x), kernel=(1, 1), pool_type="max"),
                                 mx.np.array(w), mx.np.array(b), (1, 1), (1, 1), (1, 1))) ** 2,
        x)[0]
    assert_close(results[1][1], expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("xs, kernel, stride, pad", POOL_CASES)
@pytest.mark.parametrize("values", ["distinct", "ties", "constant", "nan"])
def test_max_pool_kernels_match_the_old_formulation(rng, xs, kernel, stride, pad, values):
    x = rng.standard_normal(xs)
    if values == "ties":
        x = onp.round(x)                   # many windows with two or more maxima
    elif values == "constant":
        x[:] = 0.5                         # every element of every window ties
    elif values == "nan":
        x[0, 0, 1, 1] = onp.nan
        x[-1, -1, -2, 0] = onp.nan
    y = K.max_pool2d(x, kernel, stride, pad)
    onp.testing.assert_array_equal(y, old_max_pool2d(x, kernel, stride, pad))
    g = rng.standard_normal(y.shape)
    assert_close(K.max_pool2d_scatter(g, x, kernel, stride, pad),
                 old_max_pool2d_scatter(g, x, kernel, stride, pad), rtol=1e-14, atol=1e-14)
    h = rng.standard_normal(xs)
    onp.testing.assert_array_equal(K.max_pool2d_select(h, x, kernel, stride, pad),
                                   old_max_pool2d_select(h, x, kernel, stride, pad))


@pytest.mark.parametrize("xs, kernel, stride, pad", POOL_CASES)
@pytest.mark.parametrize("values", ["distinct", "ties", "nan", "inf_gradient"])
def test_max_pool_kernels_on_mixed_memory_layouts(rng, xs, kernel, stride, pad, values):
    """x CNHW in memory (a convolution's output) and g CHWN (a batch-last convolution's
    input gradient), as in the LeNet step: the kernels bring them to one order and must give
    what they give on C-ordered arrays."""
    x = rng.standard_normal(xs)
    if values == "ties":
        x = onp.round(x)
    elif values == "nan":
        x[0, 0, 1, 1] = onp.nan
    x_cnhw = onp.ascontiguousarray(x.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    y = K.max_pool2d(x_cnhw, kernel, stride, pad)
    onp.testing.assert_array_equal(y, old_max_pool2d(x, kernel, stride, pad))
    g = rng.standard_normal(y.shape)
    if values == "inf_gradient":
        g[0, 0, 0, 0], g[-1, -1, -1, -1] = onp.inf, -onp.inf
    g_chwn = onp.ascontiguousarray(g.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    got = K.max_pool2d_scatter(g_chwn, x_cnhw, kernel, stride, pad)
    assert_close(got, old_max_pool2d_scatter(g, x, kernel, stride, pad), rtol=1e-14,
                 atol=1e-14)
    h = rng.standard_normal(xs)
    h_cnhw = onp.ascontiguousarray(h.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    onp.testing.assert_array_equal(K.max_pool2d_select(h_cnhw, x_cnhw, kernel, stride, pad),
                                   old_max_pool2d_select(h, x, kernel, stride, pad))


def test_max_pool_tie_goes_to_the_first_maximum_in_row_major_order():
    x = onp.array([[[[1.0, 3.0, 0.0, 0.0],
                     [3.0, 3.0, 0.0, 0.0]]]])
    g = onp.array([[[[10.0, 20.0]]]])
    out = K.max_pool2d_scatter(g, x, (2, 2), (2, 2), (0, 0))
    onp.testing.assert_array_equal(out, [[[[0.0, 10.0, 20.0, 0.0],
                                           [0.0, 0.0, 0.0, 0.0]]]])


def test_max_pool_scatter_with_infinite_gradient_leaves_other_elements_zero():
    x = onp.arange(16.0).reshape(1, 1, 4, 4)
    g = onp.array([[[[onp.inf, 1.0], [-onp.inf, onp.nan]]]])
    out = K.max_pool2d_scatter(g, x, (2, 2), (2, 2), (0, 0))
    expected = onp.zeros((1, 1, 4, 4))
    expected[0, 0, 1, 1], expected[0, 0, 1, 3] = onp.inf, 1.0
    expected[0, 0, 3, 1], expected[0, 0, 3, 3] = -onp.inf, onp.nan
    onp.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("xs, kernel, stride, pad", POOL_CASES)
def test_avg_pool_matches_the_old_formulation(rng, xs, kernel, stride, pad):
    x = rng.standard_normal(xs)
    assert_close(K.avg_pool2d(x, kernel, stride, pad, True),
                 old_avg_pool2d(x, kernel, stride, pad), rtol=1e-13, atol=1e-14)


# ---------------------------------------------------------------- through npx, with gradients
def _conv(x, w, b, stride, pad, dilate):
    return npx.convolution(x, w, b, kernel=w.shape[2:], stride=stride, pad=pad, dilate=dilate,
                           num_filter=w.shape[0])


def assert_first_derivatives_match(rng, xs, ws, stride, pad, dilate, after_forward=None,
                                   after_backward=None):
    """``npx.convolution``'s gradients in x, w and b against finite differences, and its
    values against the old formulation; ``after_forward``/``after_backward``: checks to run
    between."""
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    args = [mx.np.array(a) for a in (x, w, b)]
    for a in args:
        a.attach_grad()
    with autograd.record():
        y = _conv(*args, stride, pad, dilate)
        loss = (y * y).sum()
    if after_forward is not None:
        after_forward()
    loss.backward()
    if after_backward is not None:
        after_backward()
    expected = numerical_grad(
        lambda *a: to_numpy(_conv(*[mx.np.array(v) for v in a], stride, pad, dilate)) ** 2,
        x, w, b)
    for a, e in zip(args, expected):
        assert_close(a.grad, e, rtol=1e-6, atol=1e-6)
    assert_close(y, old_conv2d(x, w, stride, pad, dilate) + b[None, :, None, None],
                 rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs, ws, stride, pad, dilate", CONV_CASES)
def test_convolution_first_derivatives_match_finite_differences(rng, xs, ws, stride, pad,
                                                                dilate):
    assert_first_derivatives_match(rng, xs, ws, stride, pad, dilate)


def assert_second_derivatives_match(rng, xs, ws, stride, pad, dilate):
    """The derivative of v . grad(loss) of ``npx.convolution`` (in x, w and b) against
    differences of grad(loss)."""
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    vx, vw, vb = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])

    def grads(x, w, b, create_graph=False):
        args = [a if isinstance(a, mx.np.ndarray) else mx.np.array(a) for a in (x, w, b)]
        for a in args:
            a.attach_grad()
        with autograd.record():
            y = _conv(*args, stride, pad, dilate)
            loss = (mx.np.tanh(y) * y).sum()
        return args, autograd.grad(loss, args, create_graph=create_graph)

    args, (gx, gw, gb) = grads(x, w, b, create_graph=True)
    with autograd.record():
        inner = ((gx * mx.np.array(vx)).sum() + (gw * mx.np.array(vw)).sum()
                 + (gb * mx.np.array(vb)).sum())
    second = autograd.grad(inner, args)

    def inner_value(x, w, b):
        _, (gx, gw, gb) = grads(x, w, b)
        return (onp.sum(to_numpy(gx) * vx) + onp.sum(to_numpy(gw) * vw)
                + onp.sum(to_numpy(gb) * vb))

    expected = numerical_grad(inner_value, x, w, b, eps=1e-5)
    for got, e in zip(second, expected):
        assert_close(got, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("xs, ws, stride, pad, dilate", CONV_CASES[:4])
def test_convolution_second_derivatives_match_finite_differences(rng, xs, ws, stride, pad,
                                                                 dilate):
    assert_second_derivatives_match(rng, xs, ws, stride, pad, dilate)


@pytest.mark.parametrize("xs, kernel, stride, pad", POOL_CASES)
def test_max_pooling_derivatives_to_second_order(rng, xs, kernel, stride, pad):
    x = rng.permutation(int(onp.prod(xs))).reshape(xs) * 0.1 + rng.uniform(0, 0.01, xs)
    v = rng.standard_normal(xs)

    def grad_of(x, create_graph=False):
        a = x if isinstance(x, mx.np.ndarray) else mx.np.array(x)
        a.attach_grad()
        with autograd.record():
            y = npx.pooling(a, kernel=kernel, stride=stride, pad=pad, pool_type="max")
            loss = (y * y * y).sum()
        return a, autograd.grad(loss, [a], create_graph=create_graph)[0]

    expected = numerical_grad(
        lambda x: to_numpy(npx.pooling(mx.np.array(x), kernel=kernel, stride=stride, pad=pad,
                                       pool_type="max")) ** 3, x)[0]
    a, gx = grad_of(x, create_graph=True)
    assert_close(gx, expected, rtol=1e-6, atol=1e-6)
    with autograd.record():
        inner = (gx * mx.np.array(v)).sum()
    second = autograd.grad(inner, [a])[0]
    expected2 = numerical_grad(lambda x: onp.sum(to_numpy(grad_of(x)[1]) * v), x, eps=1e-5)[0]
    assert_close(second, expected2, rtol=1e-5, atol=1e-6)


def test_lenet_layers_in_float32_keep_float32_and_match_float64(rng):
    x = rng.standard_normal((4, 1, 12, 12))
    w1, b1 = rng.standard_normal((3, 1, 5, 5)) * 0.3, rng.standard_normal(3)
    w2, b2 = rng.standard_normal((4, 3, 3, 3)) * 0.3, rng.standard_normal(4)

    def run(dtype):
        params = [mx.np.array(a.astype(dtype)) for a in (w1, b1, w2, b2)]
        for p in params:
            p.attach_grad()
        with autograd.record():
            h = npx.relu(_conv(mx.np.array(x.astype(dtype)), params[0], params[1], (1, 1),
                               (2, 2), (1, 1)))
            h = npx.pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max")
            h = npx.relu(_conv(h, params[2], params[3], (1, 1), (0, 0), (1, 1)))
            h = npx.pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max")
            loss = (h * h).sum()
        loss.backward()
        return h, [p.grad for p in params]

    h32, g32 = run(onp.float32)
    h64, g64 = run(onp.float64)
    assert h32.dtype == onp.float32 and all(g.dtype == onp.float32 for g in g32)
    assert_close(h32, h64, rtol=1e-4, atol=1e-4)
    for a, b in zip(g32, g64):
        assert_close(a, b, rtol=1e-3, atol=1e-3)


def test_convolution_rejects_a_kernel_larger_than_the_data():
    with pytest.raises(ValueError, match="npx.convolution: the kernel"):
        npx.convolution(mx.np.ones((1, 1, 3, 3)), mx.np.ones((1, 1, 4, 4)), kernel=(4, 4),
                        num_filter=1, no_bias=True)


# ---------------------------------------------------------------- reused buffers
def test_an_im2col_buffer_is_reused_only_once_nothing_refers_to_it(rng):
    _large.clear_cache()
    x = rng.standard_normal((8, 4, 32, 32))             # columns of 8 MB: kept
    first = K.im2col(x, (3, 3), (1, 1), (1, 1), (1, 1))
    view = first[:5]
    del first
    second = K.im2col(x * 2, (3, 3), (1, 1), (1, 1), (1, 1))
    assert not onp.shares_memory(view, second)          # a view still holds the first
    assert_close(view, K.im2col(x, (3, 3), (1, 1), (1, 1), (1, 1))[:5])
    address = second.__array_interface__["data"][0]
    del second
    third = K.im2col(x, (3, 3), (1, 1), (1, 1), (1, 1))
    assert third.__array_interface__["data"][0] == address     # free again: reused
    del view, third
    _large.clear_cache()


def test_a_recorded_convolution_keeps_its_columns_across_another_step(rng):
    x = mx.np.array(rng.standard_normal((4, 8, 20, 20)))
    w = mx.np.array(rng.standard_normal((2, 8, 3, 3)))
    w.attach_grad()
    with autograd.record():
        loss1 = (_conv(x, w, None, (1, 1), (1, 1), (1, 1)) ** 2).sum()
    with autograd.record():                              # a second graph before backward
        loss2 = (_conv(x * 3, w, None, (1, 1), (1, 1), (1, 1)) ** 2).sum()
    loss1.backward()
    g1 = to_numpy(w.grad).copy()
    loss2.backward()
    expected = old_conv2d_weight_grad(to_numpy(x), 2 * old_conv2d(to_numpy(x), to_numpy(w),
                                                                   (1, 1), (1, 1), (1, 1)),
                                      (1, 1), (1, 1), (1, 1), (3, 3))
    assert_close(g1, expected, rtol=1e-10, atol=1e-9)
    assert_close(w.grad, 9 * expected, rtol=1e-10, atol=1e-8)
    _large.clear_cache()
