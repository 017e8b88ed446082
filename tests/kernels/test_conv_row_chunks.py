"""Convolution with its columns gathered a few output rows at a time (Note [Convolution in
row chunks] in ``fastgrad/_kernels/_forward.py``).

The chunk size is lowered so that these small inputs split into several chunks, the last one
smaller; the kernels are checked against the window-view formulation of
``test_conv_pool_fast.py`` and against the unchunked kernels, for data in every memory order
and a single image, ``npx.convolution`` against finite differences in float64 to first and
second order, in float32 against float64, and with mixed dtypes.
"""
import os
import sys

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad._kernels import _forward as K
from fastgrad import autograd, npx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _helpers import assert_close  # noqa: E402
from test_conv_pool_fast import (assert_first_derivatives_match,  # noqa: E402
                                 assert_second_derivatives_match, old_conv2d,
                                 old_conv2d_weight_grad)

CASES = [
    # x shape, w shape, stride, pad, dilate
    ((5, 1, 7, 7), (3, 1, 5, 5), (1, 1), (2, 2), (1, 1)),      # LeNet's first layer, small
    ((5, 3, 6, 5), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1)),
    ((3, 2, 9, 8), (2, 2, 3, 2), (2, 3), (1, 0), (1, 1)),
    ((4, 2, 9, 9), (3, 2, 2, 3), (1, 2), (2, 1), (2, 3)),
]


def out_rows(xs, ws, stride, pad, dilate):
    return K.conv_out_size(xs[2], ws[2], stride[0], pad[0], dilate[0])


@pytest.fixture
def two_rows_a_chunk(monkeypatch):
    """Chunks of two output rows (the last of one when their number is odd) for float64 data
    of a case, and a list of the chunks gathered."""
    gathered = []
    chunk_columns = K._chunk_columns

    def counting(win, start, stop, dtype, spare):
        gathered.append((start, stop))
        return chunk_columns(win, start, stop, dtype, spare)

    monkeypatch.setattr(K, "_chunk_columns", counting)

    def set_for(xs, ws, stride, pad, dilate):
        ow = K.conv_out_size(xs[3], ws[3], stride[1], pad[1], dilate[1])
        row_bytes = xs[0] * xs[1] * ws[2] * ws[3] * ow * 8
        monkeypatch.setattr(K, "CONV_CHUNK_BYTES", 2 * row_bytes)
        assert len(K.conv_row_chunks(xs, ws, stride, pad, dilate, onp.float64)) \
            == -(-out_rows(xs, ws, stride, pad, dilate) // 2)
        return gathered

    return set_for


def test_row_chunks_cover_the_rows_in_order():
    for n in range(1, 30):
        for per in range(1, n + 3):
            chunks = K._row_chunks(n, K.CONV_CHUNK_BYTES // per)
            assert chunks[0][0] == 0 and chunks[-1][1] == n
            assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
            sizes = [stop - start for start, stop in chunks]
            assert max(sizes) <= per and min(sizes) >= 1
            assert len(set(sizes[:-1])) <= 1 and sizes[-1] <= sizes[0]
            assert len(chunks) == -(-n // per)
    assert K._row_chunks(4, 0) == [(0, 4)]                         # no columns at all
    assert K._row_chunks(3, 10 * K.CONV_CHUNK_BYTES) == [(0, 1), (1, 2), (2, 3)]
    assert K._row_chunks(0, 100) == [(0, 0)]


@pytest.mark.parametrize("xs, ws, stride, pad, dilate", CASES)
def test_chunked_kernels_match_the_window_formulation(rng, two_rows_a_chunk, xs, ws, stride,
                                                      pad, dilate):
    gathered = two_rows_a_chunk(xs, ws, stride, pad, dilate)
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    y = K.conv2d(x, w, stride, pad, dilate)
    assert len(gathered) == -(-out_rows(xs, ws, stride, pad, dilate) // 2) > 1
    assert_close(y, old_conv2d(x, w, stride, pad, dilate), rtol=1e-12, atol=1e-12)
    assert_close(K.conv2d_bias(x, w, b, stride, pad, dilate),
                 old_conv2d(x, w, stride, pad, dilate) + b[None, :, None, None],
                 rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(y.shape)
    assert_close(K.conv2d_weight_grad(x, g, stride, pad, dilate, ws[2:]),
                 old_conv2d_weight_grad(x, g, stride, pad, dilate, ws[2:]),
                 rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs, ws, stride, pad, dilate", CASES[:2])
def test_chunked_forward_is_the_unchunked_product_and_keeps_its_layout(
        rng, monkeypatch, xs, ws, stride, pad, dilate):
    x = rng.standard_normal(xs).astype(onp.float32)
    w = rng.standard_normal(ws).astype(onp.float32)
    whole = K.conv2d(x, w, stride, pad, dilate)
    monkeypatch.setattr(K, "CONV_CHUNK_BYTES", 1)                   # one row a chunk
    chunked = K.conv2d(x, w, stride, pad, dilate)
    assert chunked.dtype == onp.float32 and chunked.shape == whole.shape
    assert chunked.strides == whole.strides
    assert K.batch_innermost(chunked)                              # FHWN memory
    onp.testing.assert_array_equal(chunked, whole)                 # the same dot products


def test_chunked_kernels_promote_mixed_dtypes(rng, monkeypatch):
    monkeypatch.setattr(K, "CONV_CHUNK_BYTES", 1)
    x = rng.standard_normal((3, 2, 5, 5)).astype(onp.float32)
    w = rng.standard_normal((2, 2, 3, 3))
    b = rng.standard_normal(2).astype(onp.float32)
    y = K.conv2d_bias(x, w, b, (1, 1), (1, 1), (1, 1))
    assert y.dtype == onp.float64
    expected = old_conv2d(x.astype(onp.float64), w, (1, 1), (1, 1), (1, 1))
    assert_close(y, expected + b[None, :, None, None], rtol=1e-12, atol=1e-12)
    xi = rng.integers(-3, 4, (3, 2, 5, 5))
    wi = rng.integers(-3, 4, (2, 2, 3, 3))
    yi = K.conv2d(xi, wi, (1, 1), (0, 0), (1, 1))
    assert yi.dtype == xi.dtype
    onp.testing.assert_array_equal(yi, old_conv2d(xi, wi, (1, 1), (0, 0), (1, 1)))
    gi = rng.integers(-3, 4, yi.shape)
    onp.testing.assert_array_equal(K.conv2d_weight_grad(xi, gi, (1, 1), (0, 0), (1, 1), (3, 3)),
                                   old_conv2d_weight_grad(xi, gi, (1, 1), (0, 0), (1, 1),
                                                          (3, 3)))


@pytest.mark.parametrize("xs, ws, stride, pad, dilate", CASES)
def test_chunked_convolution_first_derivatives_match_finite_differences(
        rng, two_rows_a_chunk, xs, ws, stride, pad, dilate):
    gathered = two_rows_a_chunk(xs, ws, stride, pad, dilate)
    chunks = -(-out_rows(xs, ws, stride, pad, dilate) // 2)

    def one_node_gathered_in_chunks():
        assert len(gathered) == chunks

    def gathered_again_for_the_weights():
        assert len(gathered) == 2 * chunks

    assert_first_derivatives_match(rng, xs, ws, stride, pad, dilate,
                                   one_node_gathered_in_chunks, gathered_again_for_the_weights)


@pytest.mark.parametrize("xs, ws, stride, pad, dilate", CASES[:3])
def test_chunked_convolution_second_derivatives_match_finite_differences(
        rng, two_rows_a_chunk, xs, ws, stride, pad, dilate):
    two_rows_a_chunk(xs, ws, stride, pad, dilate)
    assert_second_derivatives_match(rng, xs, ws, stride, pad, dilate)


def test_chunked_convolution_in_float32_matches_float64(rng, monkeypatch):
    """LeNet's first layer in float32, one row a chunk, without a bias and with one."""
    monkeypatch.setattr(K, "CONV_CHUNK_BYTES", 1)
    x, w, b = (rng.standard_normal((3, 1, 12, 12)), rng.standard_normal((4, 1, 5, 5)) * 0.3,
               rng.standard_normal(4))
    results = {}
    for dtype in (onp.float32, onp.float64):
        args = [mx.np.array(a.astype(dtype)) for a in (x, w, b)]
        for a in args:
            a.attach_grad()
        with autograd.record():
            y1 = npx.convolution(args[0], args[1], args[2], kernel=(5, 5), num_filter=4,
                                 pad=(2, 2))
            y2 = npx.convolution(args[0], args[1], kernel=(5, 5), num_filter=4, no_bias=True)
            loss = (npx.relu(y1) ** 2).sum() + (y2 * y2).sum()
        loss.backward()
        results[dtype] = [y1, y2] + [a.grad for a in args]
    for a32, a64 in zip(results[onp.float32], results[onp.float64]):
        assert a32.dtype == onp.float32
        assert_close(a32, a64, rtol=2e-5, atol=2e-4)


@pytest.mark.parametrize("order", ["NCHW", "CNHW", "CHWN"])
@pytest.mark.parametrize("xs", [(3, 2, 7, 6), (1, 2, 7, 6)])      # and a single image
def test_chunked_kernels_take_data_in_any_memory_order(rng, monkeypatch, order, xs):
    monkeypatch.setattr(K, "CONV_CHUNK_BYTES", 1)
    x = rng.standard_normal(xs)
    if order == "CNHW":
        x = onp.ascontiguousarray(x.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    elif order == "CHWN":
        x = onp.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    w, b = rng.standard_normal((3, 2, 3, 2)), rng.standard_normal(3)
    for stride, pad, dilate in [((1, 1), (0, 0), (1, 1)), ((2, 1), (1, 2), (1, 2))]:
        expected = old_conv2d(onp.ascontiguousarray(x), w, stride, pad, dilate)
        assert_close(K.conv2d_bias(x, w, b, stride, pad, dilate),
                     expected + b[None, :, None, None], rtol=1e-12, atol=1e-12)
        g = rng.standard_normal(expected.shape)
        assert_close(K.conv2d_weight_grad(x, g, stride, pad, dilate, (3, 2)),
                     old_conv2d_weight_grad(onp.ascontiguousarray(x), g, stride, pad, dilate,
                                            (3, 2)), rtol=1e-12, atol=1e-12)
