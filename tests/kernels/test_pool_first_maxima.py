"""Which element of a max-pooling window gets the gradient (Note [First maxima by running
maxima] in ``fastgrad/_kernels/_forward.py``).

The masks of ``_first_maxima`` are checked against a window-by-window reference (the first
maximum in row-major window order, or the first NaN when the window has one), on the inputs
that make the choice hard: ties of relu's zeros, a window that is all one value, NaN first,
last or twice in a window, NaN beside infinities, -inf padding, overlapping windows and
windows of one offset; in float32 and float64, and with the data in NCHW, CNHW (a
convolution's output) and CHWN (a batch-last convolution's input) memory orders.
"""
import itertools

import numpy as onp
import pytest

from fastgrad._kernels import _forward as K

CASES = [
    # x shape, kernel, stride, pad
    ((3, 2, 6, 6), (2, 2), (2, 2), (0, 0)),        # LeNet's pooling: windows that tile
    ((2, 2, 7, 6), (3, 3), (1, 1), (1, 1)),        # overlapping, padded with -inf
    ((2, 3, 5, 7), (1, 3), (1, 2), (0, 1)),        # one row per window
    ((2, 2, 6, 4), (3, 1), (2, 1), (1, 0)),        # one column per window
    ((2, 2, 4, 5), (1, 1), (1, 1), (0, 0)),        # one offset: every window is its maximum
]


def reference_first_maxima(x, kernel, stride, pad):
    """(KH*KW, N, C, OH, OW) booleans: True at the window's first maximum, or first NaN."""
    xp = onp.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])),
                 constant_values=-onp.inf)
    n, c, hp, wp = xp.shape
    oh, ow = (hp - kernel[0]) // stride[0] + 1, (wp - kernel[1]) // stride[1] + 1
    hits = onp.zeros((kernel[0] * kernel[1], n, c, oh, ow), dtype=bool)
    for b, ch, r, s in itertools.product(range(n), range(c), range(oh), range(ow)):
        window = xp[b, ch, r * stride[0]:r * stride[0] + kernel[0],
                    s * stride[1]:s * stride[1] + kernel[1]].ravel()
        nans = onp.flatnonzero(onp.isnan(window))
        first = nans[0] if nans.size else onp.flatnonzero(window == window.max())[0]
        hits[first, b, ch, r, s] = True
    return hits


def in_order(x, order):
    if order == "NCHW":
        return onp.ascontiguousarray(x)
    if order == "CNHW":
        return onp.ascontiguousarray(x.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    return onp.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)


def values_of(kind, shape, rng, dtype):
    x = rng.standard_normal(shape)
    if kind == "relu_ties":
        x = onp.maximum(onp.round(x), 0)       # most windows hold two or more zeros
    elif kind == "constant":
        x[:] = 0.25
    elif kind == "nan":
        x = onp.round(x)
        x.flat[::7] = onp.nan                  # NaN first, last, twice in some windows
        x.flat[3::11] = onp.inf
        x.flat[5::13] = -onp.inf
    elif kind == "infinities":
        x = onp.where(x > 0.5, onp.inf, onp.where(x < -0.5, -onp.inf, 0.0))
    return x.astype(dtype)


@pytest.mark.parametrize("xs, kernel, stride, pad", CASES)
@pytest.mark.parametrize("kind", ["distinct", "relu_ties", "constant", "nan", "infinities"])
@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
@pytest.mark.parametrize("order", ["NCHW", "CNHW", "CHWN"])
def test_first_maxima_mark_the_first_maximum_of_every_window(rng, xs, kernel, stride, pad,
                                                             kind, dtype, order):
    x = values_of(kind, xs, rng, dtype)
    expected = reference_first_maxima(x, kernel, stride, pad)
    xp = K._pad2(in_order(x, order), pad, -onp.inf)
    slices = K._offset_slices(kernel, stride, expected.shape[3:])
    hits = K._first_maxima(xp, slices)
    assert len(hits) == len(slices)
    for got, want in zip(hits, expected):
        assert got.dtype == bool
        onp.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["relu_ties", "nan"])
@pytest.mark.parametrize("order", ["NCHW", "CNHW", "CHWN"])
def test_scatter_routes_each_gradient_to_the_first_maximum(rng, kind, order):
    """The scatter and select built on the masks, with an infinite and a NaN gradient: each
    window's gradient lands on one element and nothing else is touched."""
    xs, kernel, stride, pad = (3, 2, 6, 6), (2, 2), (2, 2), (0, 0)
    x = values_of(kind, xs, rng, onp.float64)
    expected_hits = reference_first_maxima(x, kernel, stride, pad)
    g = rng.standard_normal(expected_hits.shape[1:])
    g[0, 0, 0, 0], g[1, 1, 2, 2], g[2, 0, 1, 2] = onp.inf, -onp.inf, onp.nan
    expected = onp.zeros(xs)
    for k, (i, j) in enumerate(itertools.product(range(2), range(2))):
        expected[:, :, i::2, j::2][expected_hits[k]] = g[expected_hits[k]]
    got = K.max_pool2d_scatter(g, in_order(x, order), kernel, stride, pad)
    onp.testing.assert_array_equal(got, expected)
    h = rng.standard_normal(xs)
    picked = K.max_pool2d_select(in_order(h, order), in_order(x, order), kernel, stride, pad)
    want = sum(onp.where(expected_hits[k], h[:, :, i::2, j::2], 0.0)
               for k, (i, j) in enumerate(itertools.product(range(2), range(2))))
    onp.testing.assert_array_equal(picked, want)


@pytest.mark.parametrize("order", ["CNHW", "CHWN"])
def test_first_maxima_masks_keep_the_memory_order_of_the_data(rng, order):
    """Every mask has the memory order of the data's slices, so that the products with them
    walk all operands alike (Note [First maxima by running maxima])."""
    x = in_order(onp.maximum(rng.standard_normal((4, 3, 8, 8)), 0), order)
    slices = K._offset_slices((2, 2), (2, 2), (4, 4))
    like = onp.empty_like(x[slices[0]])
    for hit in K._first_maxima(x, slices):
        assert hit.strides == tuple(s // like.itemsize for s in like.strides)
