"""Forward kernels that NumPy does not provide as one function.

Every kernel takes and returns NumPy values (never fastgrad arrays): the recording machinery
unwraps inputs before calling it. Kernels are called as ``kernel(*inputs, *params)``. A NumPy
routine that only takes its arguments in another order or by keyword needs no function here:
its table entry says how to call it (``call=``, Note [Kernel calls] in _registry.py).
"""

import math as _math

import numpy as np

from fastgrad._kernels._blas_policy import tick as _blas_tick
from fastgrad._kernels._large import apply as _large_apply
from fastgrad._kernels._large import cached_empty as _cached_empty
from fastgrad._kernels._large import get_min_size as _large_min_size
from fastgrad._kernels._large import sum_all as _large_sum


def normalize_axis(axis, ndim):
    """``axis`` as a sorted tuple of non-negative ints (``None`` means every axis)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    out = []
    for a in axis:
        a = int(a)
        if not -ndim <= a < max(ndim, 1):
            raise np.exceptions.AxisError(a, ndim)
        out.append(a % ndim if ndim else 0)
    return tuple(sorted(out))


def sum_to(x, shape):
    """Sum ``x`` over its broadcast dimensions so that it has ``shape``.

    The inverse of broadcasting: ``sum_to(broadcast_to(a, s), a.shape)`` adds up the copies.
    A value with fewer dimensions than ``shape`` is broadcast up instead.
    """
    shape = tuple(shape)
    if x.shape == shape:
        return x
    lead = x.ndim - len(shape)
    if lead < 0:
        return broadcast_to(x, shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1)
    if axes:
        x = _add_reduce(x, axis=axes, keepdims=True)
    if lead:
        x = x.reshape(shape)
    if x.shape != shape:
        x = np.broadcast_to(x, shape)
    return x


def broadcast_to(x, shape):
    """``np.broadcast_to``: a read-only view of ``x`` with ``shape``.

    A contiguous array is viewed directly through the ndarray constructor with zero strides
    on the broadcast axes (far cheaper than ``np.broadcast_to`` on small arrays, which every
    ``sum`` backward pays; numbers in docs/benchmarks.rst); anything else goes through NumPy.
    """
    shape = tuple(shape)
    if type(x) is np.ndarray:
        lead = len(shape) - x.ndim
        if lead >= 0:
            strides = [0] * lead
            for d, n, st in zip(x.shape, shape[lead:], x.strides):
                if d == n:
                    strides.append(st)
                elif d == 1:
                    strides.append(0)
                else:
                    return np.broadcast_to(x, shape)  # raises NumPy's error
            try:
                view = np.ndarray(shape, x.dtype, x, 0, tuple(strides))
            except (TypeError, ValueError, BufferError):
                pass  # not exportable as one buffer (e.g. not contiguous)
            else:
                view.flags.writeable = False
                return view
    return np.broadcast_to(x, shape)


_add_reduce = np.add.reduce


def reduce_sum(x, axis, keepdims):
    # np.add.reduce is what np.sum runs, minus two layers of Python.
    if type(x) is np.ndarray:
        if axis is None and x.size >= _large_min_size():
            total = _large_sum(x)               # the same value (Note [Large-array kernels])
            if total is not None:
                return np.full((1,) * x.ndim, total) if keepdims else total
        return _add_reduce(x, axis=axis, keepdims=keepdims)
    return np.sum(x, axis=axis, keepdims=keepdims)


def reduce_mean(x, axis, keepdims):
    # np.mean on a floating array, as NumPy computes it (sum, then divide by the count as an
    # intp), without its Python layers.
    if type(x) is not np.ndarray or x.dtype.kind not in "fc":
        return np.mean(x, axis=axis, keepdims=keepdims)
    count = x.size
    if axis is not None:
        count = 1
        for a in ((axis,) if isinstance(axis, (int, np.integer)) else axis):
            count *= x.shape[a]
    total = _add_reduce(x, axis=axis, keepdims=keepdims)
    if type(total) is np.ndarray:
        return np.true_divide(total, np.intp(count), out=total, casting="unsafe")
    return total.dtype.type(total / np.intp(count))


def _is_basic(key):
    if not isinstance(key, tuple):
        key = (key,)
    return all(k is None or k is Ellipsis or isinstance(k, (int, np.integer, slice)) for k in key)


def scatter_add(g, key, shape):
    """Zeros of ``shape`` with ``g`` added at ``key`` (repeated indices add up)."""
    out = np.zeros(shape, dtype=np.result_type(g))
    if _is_basic(key):
        out[key] = g
    else:
        np.add.at(out, key, g)
    return out


def astype(x, dtype):
    return x.astype(dtype)


def relu(x):
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "f":     # dtype= changes nothing (Note [Large-array kernels])
            return _large_apply(np.maximum, x, 0)
        return np.maximum(x, 0, dtype=x.dtype)
    return np.maximum(x, 0)


def sigmoid(x):
    # Note [Stable sigmoid]: 1/(1+exp(-x)) overflows exp for very negative x; the tanh form
    # is exact and finite everywhere.
    # The three steps after the first write into its result (no temporaries).
    t = np.multiply(x, 0.5)
    if not isinstance(t, np.ndarray):
        return 0.5 * np.tanh(t) + 0.5
    np.tanh(t, out=t)
    t *= 0.5
    t += 0.5
    return t


def split(x, indices, axis):
    # What ``np.split`` does (the same slices of the same bounds), without its Python-level
    # swapaxes round trips: split is on the per-op path of recurrent cells (gates).
    if x.ndim == 0 or not isinstance(indices, (tuple, list)):
        return tuple(np.split(x, indices, axis=axis))      # sections, or NumPy's error
    axis = normalize_axis(axis, x.ndim)[0]
    bounds = (0,) + tuple(indices) + (x.shape[axis],)
    lead = (slice(None),) * axis
    return tuple(x[lead + (slice(start, stop),)] for start, stop in zip(bounds, bounds[1:]))


# ---------------------------------------------------------------- elementwise
def _erf_fallback(x):
    # The standard library's erf, one value at a time (when SciPy is not installed).
    x = np.asarray(x)
    # frompyfunc gives an object array, or a bare Python float for a 0-d input.
    return np.asarray(_erf_scalar(x), dtype=x.dtype if x.dtype.kind == "f" else np.float64)


def _erfc_fallback(x):
    # The standard library's erfc, one value at a time (when SciPy is not installed).
    x = np.asarray(x)
    return np.asarray(_erfc_scalar(x), dtype=x.dtype if x.dtype.kind == "f" else np.float64)


def _erfinv_fallback(y):
    # Newton's method on erf(x) = y from a rational first guess; exact to rounding.
    y = np.asarray(y, dtype=np.result_type(y, np.float32))
    a = 0.147
    ln = np.log1p(-y * y)
    t = 2 / (np.pi * a) + ln / 2
    x = np.sign(y) * np.sqrt(np.sqrt(t * t - ln / a) - t)
    for _ in range(4):
        x = x - (_erf_fallback(x) - y) * (_math.sqrt(_math.pi) / 2) * np.exp(x * x)
    return x


_erf_scalar = np.frompyfunc(_math.erf, 1, 1)
_erfc_scalar = np.frompyfunc(_math.erfc, 1, 1)
_special = None


def _special_functions():
    """``(erf, erfinv, erfc)``: SciPy's ufuncs if SciPy is installed, else the fallbacks above.

    Imported on first use: ``scipy.special`` takes longer to import than all of fastgrad.
    """
    global _special
    if _special is None:
        try:
            from scipy.special import erf as _e, erfc as _ec, erfinv as _ei
        except ImportError:  # SciPy is optional
            _e, _ei, _ec = _erf_fallback, _erfinv_fallback, _erfc_fallback
        _special = (_e, _ei, _ec)
    return _special


def erf(x):
    return _special_functions()[0](x)


def erfinv(x):
    return _special_functions()[1](x)


def sinc_maclaurin(x, k):
    """The ``k``-th derivative of ``sinc`` at 0, in the shape and dtype of ``x``: 0 for odd
    ``k``, ``(-1)**(k/2) * pi**k / (k + 1)`` for even ``k`` (Note [sinc at 0] in _rules.py)."""
    value = 0.0 if k % 2 else (-1) ** (k // 2) * np.pi ** k / (k + 1)
    x = np.asarray(x)
    return np.full(x.shape, value, dtype=x.dtype if x.dtype.kind in "fc" else np.float64)


def _same_dtype(out, x):
    return out.astype(x.dtype, copy=False) if isinstance(x, np.ndarray) \
        and x.dtype.kind == "f" and out.dtype != x.dtype else out


def leaky_relu(x, slope):
    return np.where(x > 0, x, x * _same_dtype(np.asarray(slope), x))


def elu(x, alpha):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def selu(x):
    return SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0)))


SELU_ALPHA = 1.6732632423543772
SELU_SCALE = 1.0507009873554805


def gelu(x):
    # x * Phi(x) with Phi(x) = erfc(-x / sqrt(2)) / 2, not (1 + erf(x / sqrt(2))) / 2: for
    # negative x, 1 + erf cancels (4% off at -5 in float32, 0 from -5.5) where erfc keeps
    # every digit. Below -40, erfc(-x / sqrt(2)) is 0 in every float type, so x's factor is
    # clamped there: at -inf the product is -0, the limit, not -inf * 0.
    x = np.asarray(x)
    return np.maximum(x, -40) * 0.5 * _special_functions()[2](x * -0.7071067811865476)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def softplus(x):
    # log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)). The steps after the
    # first write into its result, as sigmoid's (no temporaries; the same values).
    t = np.abs(x)
    if not (isinstance(t, np.ndarray) and t.dtype.kind == "f"):
        return np.maximum(x, 0) + np.log1p(np.exp(-t))
    np.negative(t, out=t)
    np.exp(t, out=t)
    np.log1p(t, out=t)
    return np.add(np.maximum(x, 0), t, out=t)


def log_sigmoid(x):
    y = softplus(-x)
    return np.negative(y, out=y) if isinstance(y, np.ndarray) and y.dtype.kind == "f" else -y


def softsign(x):
    return x / (1 + np.abs(x))


def silu(x):
    return x * sigmoid(x)


def hard_sigmoid(x, alpha, beta):
    return np.clip(alpha * x + beta, 0, 1)


def smooth_l1(x, sigma):
    s2 = sigma * sigma
    return np.where(np.abs(x) < 1 / s2, 0.5 * s2 * x * x, np.abs(x) - 0.5 / s2)


def rsqrt(x):
    return 1 / np.sqrt(x)


def rcbrt(x):
    return 1 / np.cbrt(x)


def softmax(x, axis):
    if x.size == 0:
        return np.empty_like(x, dtype=np.result_type(x, 0.5))    # as PyTorch: no values
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    e /= np.sum(e, axis=axis, keepdims=True)
    return e


def log_softmax(x, axis):
    if x.size == 0:
        return np.empty_like(x, dtype=np.result_type(x, 0.5))
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def logsumexp(x, axis, keepdims):
    # the log of an empty sum is -inf (the maximum of nothing is taken as -inf)
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf) if x.size == 0 else \
        np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


# ---------------------------------------------------------------- reductions
def norm(x, ord, axis, keepdims):
    if x.size == 0 and ord in (1, -1, np.inf, -np.inf) and (
            (axis is None and x.ndim == 2) or (isinstance(axis, tuple) and len(axis) == 2)):
        return _empty_matrix_norm(x, ord, axis, keepdims)
    return np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)


def _empty_matrix_norm(x, ord, axis, keepdims):
    """The 1 and inf norms of an empty matrix are 0, the largest column or row sum of none
    (NumPy's max of an empty reduction raises); the -1 and -inf norms, minima over none,
    have no value."""
    if ord < 0:
        raise ValueError("fastgrad.linalg.norm: ord=%r of an empty matrix (shape %s) has no "
                         "value: it is the smallest of no column or row sums"
                         % (ord, x.shape))
    axes = normalize_axis((0, 1) if axis is None else axis, x.ndim)
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape) if keepdims or
                  i not in axes)
    return np.zeros(shape, dtype=np.linalg.norm(np.zeros(1, dtype=x.dtype)).dtype)


# ---------------------------------------------------------------- shape and indexing
def diagonal(x, offset, axis1, axis2):
    return np.diagonal(x, offset, axis1, axis2).copy()


def pick_positions(index, shape, axis, mode):
    """``npx.pick``'s positions along ``axis`` of an array of ``shape``: ``index`` truncated
    to integers (MXNet's labels are floats), clipped into range (``mode='clip'``) or wrapped
    around (``'wrap'``), with the picked axis present (length 1)."""
    idx = np.asarray(index)
    if idx.dtype.kind != "i":
        idx = idx.astype(np.intp)
    n = shape[axis]
    idx = np.clip(idx, 0, n - 1) if mode == "clip" else np.mod(idx, n)
    return idx if idx.ndim == len(shape) else np.expand_dims(idx, axis)


def pick_along_axis(x, index, axis, mode, keepdims):
    """``x`` at ``index`` along ``axis`` (``npx.pick``); the index is an input, not a
    parameter, so a traced ``pick`` reads the labels of every step (Note [Composite
    expansion] in ``symbol/_expand.py``)."""
    out = np.take_along_axis(x, pick_positions(index, x.shape, axis, mode), axis)
    return out if keepdims else np.squeeze(out, axis)


# ---------------------------------------------------------------- linear algebra
def slogdet(x):
    sign, logdet = np.linalg.slogdet(x)
    return sign, logdet


def solve(a, b):
    if b.ndim == 1:
        return np.linalg.solve(a, b[..., None])[..., 0]
    return np.linalg.solve(a, b)


def symmetric_part(x):
    """``(x + x^H) / 2``: the symmetric part of a real ``x``, the Hermitian part of a complex
    one (whose diagonal is real, as LAPACK reads it)."""
    xt = np.swapaxes(x, -1, -2)
    return (x + (np.conj(xt) if np.iscomplexobj(x) else xt)) / 2


def cholesky(x):
    return np.linalg.cholesky(symmetric_part(x))


def eigh(x):
    w, v = np.linalg.eigh(symmetric_part(x))
    return w, v


def eigvalsh(x):
    return np.linalg.eigvalsh(symmetric_part(x))


def qr(x):
    q, r = np.linalg.qr(x, mode="reduced")
    return q, r


def svd(x):
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    return u, s, vt


def pinv(x, rtol):
    """The pseudo-inverse, singular values below ``rtol`` times the largest cut off (NumPy's
    default ``rtol``: ``max(M, N) * eps`` of the dtype)."""
    if rtol is None:
        rtol = max(x.shape[-2:]) * np.finfo(np.result_type(x, np.float32)).eps
    return np.linalg.pinv(x, rcond=rtol)


# ---------------------------------------------------------------- convolution and pooling
# Note [Convolution layout]: data is NCHW, weights are (F, C, KH, KW). ``stride``, ``pad`` and
# ``dilate`` are pairs of ints. Convolution is one matrix product over an im2col buffer:
# ``im2col`` copies every receptive field of the (padded) data into the columns of a
# (C*KH*KW, N*OH*OW) matrix, laid out C, KH, KW by N, OH, OW, so that the forward is one sgemm
# ``w.reshape(F, -1) @ cols`` giving (F, N*OH*OW), which is the output in CNHW memory order
# (returned as an NCHW-shaped transposed view: elementwise ops downstream keep that order and
# nothing copies it back). The weight gradient is the one sgemm ``(cols @ g.T).T`` (the
# same product as ``g @ cols.T``, which OpenBLAS runs slower for these shapes) and the
# data gradient the one sgemm ``w.T @ g`` followed by ``col2im``, which adds the KH*KW shifted
# slices of those columns into the padded image (slice adds, no ``np.add.at``). ``im2col`` and
# ``col2im`` are each other's adjoints and both are table ops, so convolution is
# differentiable to any order. When the data has its batch axis innermost in memory (CHWN:
# max pooling leaves its output so), ``batch_last`` orders the columns OH, OW, N instead: the
# gather then copies runs of N contiguous elements, ``col2im`` adds runs of OW*N, and the
# product's rows are the output in FHWN order (several times faster than N, OH, OW order
# for LeNet's second layer); data in NCHW order, like a user's input, keeps N, OH, OW, whose
# gather reads whole rows. ``npx.convolution`` records im2col and the product (with the bias
# added in place) as separate nodes so that the backward reuses the forward's buffer instead
# of gathering the windows again (Note [Convolution as recorded ops] in
# ``numpy_extension.py``); ``conv2d`` and its two adjoints below (used by 1-D/3-D
# convolution, deconvolution, the symbol API, second-order rules, and ``npx.convolution`` of
# NCHW data whose columns exceed a chunk) use the same kernels in one call each, ``conv2d``
# and its weight gradient gathering the columns in chunks of output rows in the batch-last
# order (Note [Convolution in row chunks]). The measurements behind these choices are in
# docs/benchmarks.rst (Numbers behind the kernels' Notes).
def _windows(xp, kernel, stride, dilate):
    kh, kw = kernel
    eh, ew = dilate[0] * (kh - 1) + 1, dilate[1] * (kw - 1) + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (eh, ew), axis=(2, 3))
    return win[:, :, ::stride[0], ::stride[1], ::dilate[0], ::dilate[1]]


def _pad2(x, pad, value=0):
    """NCHW ``x`` padded in H and W with ``value``: what ``np.pad`` gives, made by filling
    and one slice copy (``np.pad``'s Python layers cost more than the copy for small images
    such as LeNet's input)."""
    if pad[0] == 0 and pad[1] == 0:
        return x
    if type(x) is not np.ndarray or x.ndim != 4 or (value != 0 and x.dtype.kind not in "fc"):
        return np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])),
                      constant_values=value)
    n, c, h, w = x.shape
    shape = (n, c, h + 2 * pad[0], w + 2 * pad[1])
    out = np.zeros(shape, dtype=x.dtype) if value == 0 else np.full(shape, value, x.dtype)
    out[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w] = x
    return out


def conv_out_size(n, k, stride, pad, dilate):
    return (n + 2 * pad - dilate * (k - 1) - 1) // stride + 1


def batch_innermost(x):
    """Whether ``x`` (NCHW) has its batch axis innermost in memory (CHWN order)."""
    return x.ndim == 4 and x.shape[0] > 1 and x.strides[0] < min(x.strides[1:])


def _padded_batch_last(x, pad):
    """NCHW ``x`` zero-padded in H and W, in CHWN memory order whatever its own order (a
    single image needs none: its CHWN and NCHW orders are one)."""
    if pad[0] == 0 and pad[1] == 0 and (x.shape[0] == 1 or batch_innermost(x)):
        return x
    n, c, h, w = x.shape
    shape = (c, h + 2 * pad[0], w + 2 * pad[1], n)
    out = (np.zeros if pad[0] or pad[1] else np.empty)(shape, dtype=x.dtype)
    out = out.transpose(3, 0, 1, 2)
    out[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w] = x
    return out


# Note [Column buffers]: a convolution's columns are megabytes and made again every step.
# glibc returns blocks that large to the operating system when they are freed, so each step
# would page-fault them in again, a large part of the LeNet step's time (docs/benchmarks.rst,
# Numbers behind the kernels' Notes). They are therefore allocated through the
# buffer cache of the large-array kernels (Note [Buffer cache] in ``_large/pool.h``), which
# keeps a freed block and hands it back for a request of the same size. The cache learns that
# a block is free from NumPy freeing the array, so no reference is counted or guessed: a block
# a node, a saved array or a view still holds is simply not free yet.


def im2col(x, kernel, stride, pad, dilate, batch_last=False):
    """The receptive fields of NCHW ``x`` as columns: shape (C*KH*KW, N*OH*OW), or
    (C*KH*KW, OH*OW*N) with ``batch_last`` (Note [Convolution layout])."""
    if batch_last:
        win = _windows(_padded_batch_last(x, pad), kernel, stride, dilate)
    else:
        win = _windows(_pad2(x, pad), kernel, stride, dilate)       # N C OH OW KH KW
    n, c, oh, ow, kh, kw = win.shape
    if batch_last:
        cols = _cached_empty((c, kh, kw, oh, ow, n), x.dtype)   # Note [Column buffers]
        cols[...] = win.transpose(1, 4, 5, 2, 3, 0)
    else:
        cols = _cached_empty((c, kh, kw, n, oh, ow), x.dtype)
        cols[...] = win.transpose(1, 4, 5, 0, 2, 3)
    return cols.reshape(c * kh * kw, n * oh * ow)


def col2im(cols, x_shape, kernel, stride, pad, dilate, batch_last=False):
    """The adjoint of ``im2col``: add every column back onto its receptive field."""
    n, c, h, w = x_shape
    kh, kw = kernel
    oh = conv_out_size(h, kh, stride[0], pad[0], dilate[0])
    ow = conv_out_size(w, kw, stride[1], pad[1], dilate[1])
    hp, wp = h + 2 * pad[0], w + 2 * pad[1]
    if batch_last:      # (C, H, W, N): every slice add runs over OW*N contiguous elements
        cols = cols.reshape(c, kh, kw, oh, ow, n)
        out = np.zeros((c, hp, wp, n), dtype=cols.dtype)
    else:
        cols = cols.reshape(c, kh, kw, n, oh, ow)
        out = np.zeros((c, n, hp, wp), dtype=cols.dtype)
    spatial = out.transpose(0, 3, 1, 2) if batch_last else out        # C N H W
    for i in range(kh):
        hi = i * dilate[0]
        for j in range(kw):
            wj = j * dilate[1]
            target = spatial[:, :, hi:hi + stride[0] * (oh - 1) + 1:stride[0],
                             wj:wj + stride[1] * (ow - 1) + 1:stride[1]]
            target += cols[:, i, j].transpose(0, 3, 1, 2) if batch_last else cols[:, i, j]
    return spatial[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w].transpose(1, 0, 2, 3)


def _nchw_to_rows(g):
    """NCHW ``g`` as (F, N*OH*OW) rows, the layout of ``conv2d``'s product."""
    n, f, oh, ow = g.shape
    return g.transpose(1, 0, 2, 3).reshape(f, n * oh * ow)


def conv2d_product(w, cols):
    """(F, C*KH*KW) weights times im2col's columns: the convolution as (F, N*OH*OW) rows."""
    return np.matmul(w, cols)


def _plus_row_bias(rows, b):
    """(F, M) ``rows`` plus the (F,) bias ``b`` on every row, added in place when the dtype
    allows."""
    dtype = np.result_type(rows, b)
    if rows.dtype != dtype:
        rows = rows.astype(dtype)
    rows += b[:, None]
    return rows


def conv2d_product_bias(w, cols, b):
    """``conv2d_product`` plus the (F,) bias on every row, added into the product in place."""
    return _plus_row_bias(np.matmul(w, cols), b)


# Note [Convolution in row chunks]: the columns of a convolution over many images are
# megabytes (LeNet's first layer), beyond the L2 cache, and its products have few rows (6
# filters): im2col writes them out and the product reads them back from the L3 cache or
# memory, and both run at its speed, not at the speed of the arithmetic.
# ``conv2d`` and ``conv2d_weight_grad`` therefore gather the columns of a few output rows at a
# time (at most CONV_CHUNK_BYTES of them) into one cached buffer (Note [Column buffers]) and
# run the product on those while they are still in the L2 cache: the forward writes each
# chunk's product into its columns of the output, the weight gradient adds the chunks'
# products up. The columns are im2col's ``batch_last`` ones (OH, OW, N; Note [Convolution
# layout]), gathered from the data brought to CHWN order once (with its padding), so that a
# chunk of rows is one contiguous block of columns, the gather copies runs of OW*N elements,
# and the output is in FHWN order, where the relu and 2x2 max pooling after it walk runs of
# N contiguous elements instead of every other one. The forward's values are the unchunked
# product's (each output is the same dot product); the weight gradient sums the rows in
# chunks, a change of rounding only. CONV_CHUNK_BYTES sits in the middle of the range of
# chunk sizes that ran fastest for LeNet's first layer, away from the size where the chunk,
# its product and BLAS's packed blocks no longer fit in the L2 cache; chunks of rows beat
# chunks of whole images (the order before this one) for the convolution and for the max
# pooling after it (the measurements: docs/benchmarks.rst, Numbers behind the kernels'
# Notes). The weight gradient with its own gather costs no more than the product with the
# forward's saved columns did, so ``npx.convolution`` records a convolution of NCHW data
# whose columns span more than one chunk as one ``conv2d`` node that gathers again in the
# backward (Note [Convolution as recorded ops] in ``numpy_extension.py``). Data with the batch
# already innermost keeps the two recorded ops: LeNet's second layer, 16 filters over
# 150-long columns, is bound by its arithmetic (its products run near the core's peak)
# rather than by the columns' traffic, and gathering again would cost more than it saves.
CONV_CHUNK_BYTES = 384 << 10


def _row_chunks(rows, row_bytes):
    """``(start, stop)`` ranges of output rows whose columns take at most CONV_CHUNK_BYTES
    (one row at least), of equal sizes but the last."""
    per = max(1, CONV_CHUNK_BYTES // max(row_bytes, 1))
    if per >= rows:
        return [(0, rows)]
    size = -(-rows // -(-rows // per))      # the fewest chunks, as even as they come
    return [(start, min(start + size, rows)) for start in range(0, rows, size)]


def conv_row_chunks(x_shape, w_shape, stride, pad, dilate, dtype):
    """The output-row ranges ``conv2d`` gathers its columns in (Note [Convolution in row
    chunks])."""
    oh = conv_out_size(x_shape[2], w_shape[2], stride[0], pad[0], dilate[0])
    ow = conv_out_size(x_shape[3], w_shape[3], stride[1], pad[1], dilate[1])
    row_bytes = (x_shape[0] * x_shape[1] * w_shape[2] * w_shape[3] * max(ow, 0)
                 * np.dtype(dtype).itemsize)
    return _row_chunks(max(oh, 0), row_bytes)


def conv_in_chunks(x, w, stride, pad, dilate):
    """Whether ``conv2d`` gathers the columns of ``x`` in more than one chunk of rows."""
    dtype = np.result_type(getattr(x, "dtype", np.float64), getattr(w, "dtype", np.float64))
    return len(conv_row_chunks(np.shape(x), np.shape(w), stride, pad, dilate, dtype)) > 1


def _chunk_columns(win, start, stop, dtype, spare):
    """Output rows ``start:stop`` of the window view ``win`` (N C OH OW KH KW, batch innermost
    in memory) as im2col's ``batch_last`` columns, in a cached buffer; ``spare``: a buffer of
    the right size from the previous chunk, or None."""
    n, c, _, ow, kh, kw = win.shape
    shape = (c, kh, kw, stop - start, ow, n)
    cols = spare if spare is not None and spare.shape == shape else _cached_empty(shape, dtype)
    cols[...] = win[:, :, start:stop].transpose(1, 4, 5, 2, 3, 0)
    return cols


def conv2d(x, w, stride, pad, dilate):
    """The convolution of NCHW ``x`` with (F, C, KH, KW) ``w``: an NCHW-shaped view of FHWN
    memory, made in chunks of output rows (Note [Convolution in row chunks])."""
    return _conv2d(x, w, None, stride, pad, dilate)


def conv2d_bias(x, w, b, stride, pad, dilate):
    """``conv2d`` plus the (F,) bias ``b`` on every filter's output, added in place."""
    return _conv2d(x, w, b, stride, pad, dilate)


def _conv2d(x, w, b, stride, pad, dilate):
    _blas_tick()                # Note [Load-aware BLAS threads] in _blas_policy.py
    win = _windows(_padded_batch_last(x, pad), w.shape[2:], stride, dilate)
    n, c, oh, ow, kh, kw = win.shape
    f = w.shape[0]
    dtype = np.result_type(x, w)
    wm = w.reshape(f, -1).astype(dtype, copy=False)
    chunks = conv_row_chunks(x.shape, w.shape, stride, pad, dilate, dtype)
    if len(chunks) == 1:
        cols = _chunk_columns(win, 0, oh, dtype, None)
        y2d = np.matmul(wm, cols.reshape(c * kh * kw, oh * ow * n))
    else:
        y2d = np.empty((f, oh * ow * n), dtype)
        cols = None
        for start, stop in chunks:
            cols = _chunk_columns(win, start, stop, dtype, cols)
            np.matmul(wm, cols.reshape(c * kh * kw, -1),
                      out=y2d[:, start * ow * n:stop * ow * n])
    if b is not None:
        y2d = _plus_row_bias(y2d, b)
    return y2d.reshape(f, oh, ow, n).transpose(3, 0, 1, 2)


def conv2d_input_grad(g, w, stride, pad, dilate, x_hw):
    """The adjoint of ``conv2d`` in its data: one product with the weights, then ``col2im``."""
    _blas_tick()
    n = g.shape[0]
    f, c, kh, kw = w.shape
    dtype = np.result_type(g, w)
    dcols = np.matmul(w.reshape(f, -1).T.astype(dtype, copy=False),
                      _nchw_to_rows(g).astype(dtype, copy=False))
    return col2im(dcols, (n, c) + tuple(x_hw), (kh, kw), stride, pad, dilate)


def conv2d_weight_grad(x, g, stride, pad, dilate, kernel):
    """The adjoint of ``conv2d`` in its weights: ``g`` times the data's columns, gathered in
    chunks of output rows (Note [Convolution in row chunks])."""
    _blas_tick()
    win = _windows(_padded_batch_last(x, pad), kernel, stride, dilate)
    n, c, oh, ow, kh, kw = win.shape
    f = g.shape[1]
    dtype = np.result_type(x, g)
    # g's rows in F, OH, OW, N order: a view of conv2d's own output layout.
    rows = g.transpose(1, 2, 3, 0).reshape(f, oh * ow * n).astype(dtype, copy=False)
    # (cols @ g.T).T: the orientation OpenBLAS runs fastest (Note [Convolution layout]).
    dw = None
    cols = None
    for start, stop in conv_row_chunks(x.shape, (f, c) + tuple(kernel), stride, pad, dilate,
                                       dtype):
        cols = _chunk_columns(win, start, stop, dtype, cols)
        part = np.matmul(cols.reshape(c * kh * kw, -1), rows[:, start * ow * n:stop * ow * n].T)
        dw = part if dw is None else np.add(dw, part, out=dw)
    return dw.T.reshape((f, c) + tuple(kernel))


# Note [Max pooling by offsets]: a pooling window has KH*KW offsets (i, j); the elements at
# offset (i, j) of all windows form one strided slice of the padded data. The maximum is the
# elementwise maximum of those KH*KW slices (KH*KW - 1 ufunc calls over whole arrays, no 6-D
# reduction). The gradient goes to one element per window, the first maximum in row-major
# order within the window (what ``argmax`` picks; MXNet and PyTorch also route a tie to one
# element), and a window whose maximum is NaN routes it to its first NaN. ``_first_maxima``
# gives, per offset, the mask of windows whose first maximum sits there (Note [First maxima by
# running maxima]), and the scatter adds ``g`` times that mask into the offset's slice: slice
# adds, no ``np.add.at`` (overlapping windows add into shared elements correctly, since one
# slice never holds an element twice; windows that do not overlap write the product straight
# into the slice).
#
# Note [First maxima by running maxima]: let m_k be the running maximum of a window's first
# k + 1 offsets (``np.maximum``, which propagates NaN) and top = m_last its maximum. m_k ==
# top exactly when one of offsets 0..k holds the maximum, so "m_k == top" is false up to the
# first maximum and true from it on, and the first maximum is at the k where it turns true:
# offset 0 where m_0 == top, offset k where m_k == top and not m_(k-1) == top (a ``greater``
# of two masks), the last offset where m_(last-1) != top. With a NaN in a window, m_k is NaN
# from its first NaN on and top is NaN: "m_k == top or m_k is NaN" turns true at the first
# NaN, which therefore gets the gradient. For a 2x2 window that is three maxima, three
# comparisons and three boolean ufuncs (the previous formulation compared every offset with
# the maximum, counted the hits, and on ties, which relu's zeros make common, resolved them
# with seven more ufuncs). Every mask is made by ufuncs over operands in ``xp``'s memory order,
# so they all share it (a mask in another order made each product with it several times
# slower).
def _offset_slices(kernel, stride, out_hw):
    oh, ow = max(out_hw[0], 0), max(out_hw[1], 0)
    return [(slice(None), slice(None), slice(i, i + stride[0] * (oh - 1) + 1 if oh else i,
                                             stride[0]),
             slice(j, j + stride[1] * (ow - 1) + 1 if ow else j, stride[1]))
            for i in range(kernel[0]) for j in range(kernel[1])]


def _pool_windows(x, kernel, stride, pad, value):
    return _windows(_pad2(x, pad, value), kernel, stride, (1, 1))


def _pool_out_hw(shape, kernel, stride, pad):
    return ((shape[2] + 2 * pad[0] - kernel[0]) // stride[0] + 1,
            (shape[3] + 2 * pad[1] - kernel[1]) // stride[1] + 1)


def _slice_maxima(xp, slices):
    """The elementwise maximum of ``xp``'s offset slices, in ``xp``'s memory order: every
    ufunc then walks all its operands in the same order (mixing layouts made max pooling
    several times slower on the LeNet step)."""
    if len(slices) == 1:
        return xp[slices[0]].copy(order="K")
    top = np.maximum(xp[slices[0]], xp[slices[1]])
    for key in slices[2:]:
        np.maximum(top, xp[key], out=top)
    return top


def _max_of_slices(xp, slices):
    # The result is CHWN in memory: a convolution that reads it then gathers its columns
    # with the batch innermost (Note [Convolution layout]).
    top = _slice_maxima(xp, slices)
    n, c, oh, ow = top.shape
    out = np.empty((c, oh, ow, n), dtype=top.dtype).transpose(3, 0, 1, 2)
    out[...] = top
    return out


def max_pool2d(x, kernel, stride, pad):
    xp = _pad2(x, pad, -np.inf)
    return _max_of_slices(xp, _offset_slices(kernel, stride,
                                             _pool_out_hw(x.shape, kernel, stride, pad)))


def _first_maxima(xp, slices):
    """Per offset, the windows whose first maximum (or first NaN) is at that offset (Note
    [First maxima by running maxima])."""
    if len(slices) == 1:
        return [np.ones(xp[slices[0]].shape, dtype=bool)]
    running = [xp[slices[0]], np.maximum(xp[slices[0]], xp[slices[1]])]
    for key in slices[2:]:
        running.append(np.maximum(running[-1], xp[key]))
    top = running.pop()
    nan = top.dtype.kind in "fc" and bool(np.isnan(top).any())
    reached = []
    for partial in running:
        at_top = np.equal(partial, top)
        if nan:
            at_top |= np.isnan(partial)
        reached.append(at_top)
    hits = [reached[0]]
    for k in range(1, len(reached)):
        hits.append(np.greater(reached[k], reached[k - 1]))
    hits.append(np.logical_not(reached[-1]))
    return hits


def _all_finite(g):
    return g.dtype.kind not in "fc" or bool(np.isfinite(g).all())


def _in_layout_of(g, like):
    """``g`` with the memory order of ``like`` (same shape), copied only if it differs."""
    if g.strides == like.strides or g.size <= 1:
        return g
    out = np.empty_like(like, dtype=g.dtype)
    out[...] = g
    return out


def _masked(g, mask, out=None, finite=None):
    """``g`` where ``mask``, else 0 (a product unless ``g`` has an infinity or NaN);
    ``finite``: whether ``g`` is known to be all finite (None: check)."""
    if not (_all_finite(g) if finite is None else finite):
        picked = np.where(mask, g, np.zeros((), dtype=g.dtype))
        if out is None:
            return picked
        out[...] = picked
        return out
    return np.multiply(g, mask, out=out)


def max_pool2d_scatter(g, x, kernel, stride, pad):
    """``g`` added at the position of each window's maximum of ``x`` (max pooling's adjoint)."""
    n, c, h, w = x.shape
    xp = _pad2(x, pad, -np.inf)
    slices = _offset_slices(kernel, stride, g.shape[2:])
    # In x's memory order (a convolution's output is CNHW in memory; Note [Convolution
    # layout]), so that relu's backward and the product's reshape need no copy; g is brought
    # to that order once, so that every product below walks its operands alike.
    disjoint = stride[0] >= kernel[0] and stride[1] >= kernel[1]
    tiled = (disjoint and stride[0] == kernel[0] and stride[1] == kernel[1]
             and g.shape[2] * kernel[0] == xp.shape[2] and g.shape[3] * kernel[1] == xp.shape[3])
    # Windows that tile the padded data write every element once: no zeros needed.
    out = (np.empty_like if tiled else np.zeros_like)(xp, dtype=g.dtype)
    if slices:
        g = _in_layout_of(g, xp[slices[0]])
    finite = _all_finite(g)
    for key, first in zip(slices, _first_maxima(xp, slices)):
        if disjoint:
            _masked(g, first, out=out[key], finite=finite)
        else:
            out[key] += _masked(g, first, finite=finite)
    return out[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w]


def max_pool2d_select(h, x, kernel, stride, pad):
    """``h`` at the position of each window's maximum of ``x``."""
    xp = _pad2(x, pad, -np.inf)
    slices = _offset_slices(kernel, stride, _pool_out_hw(x.shape, kernel, stride, pad))
    hp = _pad2(h, pad)
    finite = _all_finite(hp)
    out = None
    for key, first in zip(slices, _first_maxima(xp, slices)):
        term = _masked(hp[key], first, finite=finite)
        out = term if out is None else np.add(out, term, out=out)
    return out


def avg_pool2d(x, kernel, stride, pad, count_include_pad):
    if x.dtype.kind not in "fc":     # integers: sum in NumPy's wider accumulator
        total = _pool_windows(x, kernel, stride, pad, 0).sum(axis=(4, 5))
        return total / pool_counts(x.shape, kernel, stride, pad, count_include_pad,
                                   total.dtype)
    out_hw = _pool_out_hw(x.shape, kernel, stride, pad)
    xp = _pad2(x, pad, 0)
    total = None
    for key in _offset_slices(kernel, stride, out_hw):
        total = xp[key].copy() if total is None else np.add(total, xp[key], out=total)
    return total / pool_counts(x.shape, kernel, stride, pad, count_include_pad, total.dtype)


def pool_counts(shape, kernel, stride, pad, count_include_pad, dtype):
    """How many elements each average-pooling window divides by."""
    if count_include_pad or (pad[0] == 0 and pad[1] == 0):
        return np.asarray(kernel[0] * kernel[1], dtype=dtype)
    ones = np.ones((1, 1) + tuple(shape[2:]), dtype=dtype)
    return _pool_windows(ones, kernel, stride, pad, 0).sum(axis=(4, 5))


def avg_pool2d_backward(g, kernel, stride, pad, count_include_pad, x_shape):
    """The adjoint of ``avg_pool2d``: every window spreads its gradient over its elements."""
    n, c, h, w = x_shape
    g = g / pool_counts(x_shape, kernel, stride, pad, count_include_pad, g.dtype)
    out = np.zeros((n, c, h + 2 * pad[0], w + 2 * pad[1]), dtype=g.dtype)
    oh, ow = g.shape[2:]
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            out[:, :, i:i + stride[0] * (oh - 1) + 1:stride[0],
                j:j + stride[1] * (ow - 1) + 1:stride[1]] += g
    return out[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w]


# ---------------------------------------------------------------- more elementwise
def real(x):
    return np.array(np.real(x), copy=True)


def prelu(x, alpha):
    return np.where(x > 0, x, x * alpha)


# Note [Deferred weight gradients]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A weight used by many matrix products (an RNN's weights, once per time step) gets one
# gradient contribution x_t.T @ g_t from each. Made one at a time, they are many small
# products whose rows (the batch) are too few for BLAS to run at speed, and as many
# additions of a whole weight-sized array. Their sum is one product of the rows stacked:
# sum_t x_t.T @ g_t == [x_0; x_1; ...].T @ [g_0; g_1; ...]. An op declares such a product in
# the derivative table (``Op("matmul", ..., deferred={"y": "x"})``: y's gradient is x.T @ g),
# and a backward pass that meets a 2-D one whose y is a variable with more consumers still to
# come keeps (x_t, g_t) in its gradient buffer instead of running the rule for it, and makes
# the one product when the variable's gradient is taken (``GradientBuffer.defer`` and
# ``take`` in ``_engine.pyx``; the executor's replay calls them at the same points). It pays
# on RNN weights (docs/benchmarks.rst, "Numbers behind the engine's Notes"). Only first-order
# passes defer (under create_graph the rule is recorded as usual), only real floating
# dtypes that all agree (no casts to decide), and only products with at most
# DEFERRED_MAX_ROWS rows, where the stacked product pays; a contribution is summed in a
# different order than one at a time, which changes the result by rounding only. The
# stacked operands come from the buffer cache (Note [Column buffers]): allocated with
# malloc they page-fault in at every step. Two variables fed the same gradients (an RNN's
# input and recurrent weights) stack them once per pass (``memo``).

DEFERRED_MAX_ROWS = 256


def _stacked_rows(arrays, memo):
    """The 2-D ``arrays`` stacked along their rows, into a cached buffer; reused from ``memo``
    for the same arrays in the same order."""
    key = tuple([id(a) for a in arrays])
    hit = memo.get(key)
    if hit is not None:
        return hit[1]
    rows = 0
    for a in arrays:
        rows += a.shape[0]
    out = _cached_empty((rows, arrays[0].shape[1]), arrays[0].dtype)
    np.concatenate(arrays, axis=0, out=out)
    memo[key] = (arrays, out)           # the arrays stay alive while their ids are keys
    return out


def summed_weight_gradients(xs, gs, memo):
    """``sum(x.T @ g for x, g in zip(xs, gs))`` as one product of the stacked rows (Note
    [Deferred weight gradients]); ``memo``: a dict that lives as long as the pass."""
    if len(xs) == 1:
        return np.matmul(xs[0].swapaxes(-1, -2), gs[0])
    return np.matmul(_stacked_rows(xs, memo).T, _stacked_rows(gs, memo))
