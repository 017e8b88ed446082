"""Forward kernels that NumPy does not provide as one function.

Every kernel takes and returns NumPy values (never fastgrad arrays): the recording machinery
unwraps inputs before calling it. Kernels are called as ``kernel(*inputs, *params)``.
"""

import math as _math

import numpy as np

from fastgrad._large import apply as _large_apply


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
    on the broadcast axes (a tenth of ``np.broadcast_to``'s cost on small arrays, which every
    ``sum`` backward pays); anything else goes through NumPy.
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


def reduce_prod(x, axis, keepdims):
    return np.prod(x, axis=axis, keepdims=keepdims)


def reduce_max(x, axis, keepdims):
    return np.max(x, axis=axis, keepdims=keepdims)


def reduce_min(x, axis, keepdims):
    return np.min(x, axis=axis, keepdims=keepdims)


def reshape(x, shape):
    return np.reshape(x, shape)


def transpose(x, axes):
    return np.transpose(x, axes)


def swapaxes(x, axis1, axis2):
    return np.swapaxes(x, axis1, axis2)


def expand_dims(x, axis):
    return np.expand_dims(x, axis)


def squeeze(x, axis):
    return np.squeeze(x, axis)


def getitem(x, key):
    return x[key]


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


def copy(x):
    return np.array(x, copy=True)


def where(cond, x, y):
    return np.where(cond, x, y)


def relu(x):
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "f":     # dtype= changes nothing (Note [Large-array kernels])
            return _large_apply(np.maximum, x, 0)
        return np.maximum(x, 0, dtype=x.dtype)
    return np.maximum(x, 0)


def sigmoid(x):
    # Note [Stable sigmoid]: 1/(1+exp(-x)) overflows exp for very negative x; the tanh form
    # is exact and finite everywhere.
    return 0.5 * np.tanh(0.5 * x) + 0.5


def concatenate(*args):
    *xs, axis, _sizes = args
    return np.concatenate(xs, axis=axis)


def stack(*args):
    *xs, axis = args
    return np.stack(xs, axis=axis)


def split(x, indices, axis):
    return tuple(np.split(x, indices, axis=axis))


def clip(x, lo, hi):
    return np.clip(x, lo, hi)


# ---------------------------------------------------------------- elementwise
def _erf_fallback(x):
    # The standard library's erf, one value at a time (when SciPy is not installed).
    x = np.asarray(x)
    # frompyfunc gives an object array, or a bare Python float for a 0-d input.
    return np.asarray(_erf_scalar(x), dtype=x.dtype if x.dtype.kind == "f" else np.float64)


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
_special = None


def _special_functions():
    """``(erf, erfinv)``: SciPy's ufuncs if SciPy is installed, else the fallbacks above.

    Imported on first use: ``scipy.special`` takes longer to import than all of fastgrad.
    """
    global _special
    if _special is None:
        try:
            from scipy.special import erf as _e, erfinv as _ei
        except ImportError:  # SciPy is optional
            _e, _ei = _erf_fallback, _erfinv_fallback
        _special = (_e, _ei)
    return _special


def erf(x):
    return _special_functions()[0](x)


def erfinv(x):
    return _special_functions()[1](x)


def sinc(x):
    return np.sinc(x)


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
    return 0.5 * x * (1 + erf(x * 0.7071067811865476))


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def softplus(x):
    # log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)).
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def log_sigmoid(x):
    return -softplus(-x)


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
def var(x, axis, keepdims, ddof):
    return np.var(x, axis=axis, keepdims=keepdims, ddof=ddof)


def std(x, axis, keepdims, ddof):
    return np.std(x, axis=axis, keepdims=keepdims, ddof=ddof)


def nansum(x, axis, keepdims):
    return np.nansum(x, axis=axis, keepdims=keepdims)


def nanmean(x, axis, keepdims):
    return np.nanmean(x, axis=axis, keepdims=keepdims)


def cumsum(x, axis):
    return np.cumsum(x, axis=axis)


def cumprod(x, axis):
    return np.cumprod(x, axis=axis)


def average(a, w, axis, keepdims):
    return np.average(a, axis=axis, weights=w, keepdims=keepdims)


def norm(x, ord, axis, keepdims):
    return np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)


# ---------------------------------------------------------------- shape and indexing
def moveaxis(x, source, destination):
    return np.moveaxis(x, source, destination)


def tile(x, reps):
    return np.tile(x, reps)


def repeat(x, repeats, axis):
    return np.repeat(x, repeats, axis=axis)


def flip(x, axis):
    return np.flip(x, axis)


def roll(x, shift, axis):
    return np.roll(x, shift, axis)


def rot90(x, k, axes):
    return np.rot90(x, k, axes)


def pad(x, pad_width, constant_values):
    return np.pad(x, pad_width, mode="constant", constant_values=constant_values)


def diag(v, k):
    return np.diag(v, k)


def diagonal(x, offset, axis1, axis2):
    return np.diagonal(x, offset, axis1, axis2).copy()


def trace(x, offset, axis1, axis2):
    return np.trace(x, offset, axis1, axis2)


def triu(x, k):
    return np.triu(x, k)


def tril(x, k):
    return np.tril(x, k)


def take(x, indices, axis):
    return np.take(x, indices, axis=axis)


def take_along_axis(x, indices, axis):
    return np.take_along_axis(x, indices, axis)


def sort(x, axis):
    return np.sort(x, axis=axis)


def diff(x, n, axis):
    return np.diff(x, n=n, axis=axis)


# ---------------------------------------------------------------- linear algebra
def dot(x, y):
    return np.dot(x, y)


def tensordot(x, y, axes):
    return np.tensordot(x, y, axes)


def einsum(*args):
    *operands, subscripts = args
    return np.einsum(subscripts, *operands, optimize=len(operands) > 2)


def outer(x, y):
    return np.outer(x, y)


def kron(x, y):
    return np.kron(x, y)


def cross(x, y, axis):
    return np.cross(x, y, axis=axis)


def convolve(x, y):
    """The full discrete linear convolution of two 1-D arrays."""
    return np.convolve(x, y, "full")


def inv(x):
    return np.linalg.inv(x)


def det(x):
    return np.linalg.det(x)


def slogdet(x):
    sign, logdet = np.linalg.slogdet(x)
    return sign, logdet


def solve(a, b):
    if b.ndim == 1:
        return np.linalg.solve(a, b[..., None])[..., 0]
    return np.linalg.solve(a, b)


def symmetric_part(x):
    return (x + np.swapaxes(x, -1, -2)) / 2


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
# ``dilate`` are pairs of ints. The forward gathers the receptive fields with
# ``sliding_window_view`` (a view, no copy) and contracts them with the weights in one
# ``tensordot``; the two backward kernels are the adjoints of that map, one in the data and one
# in the weights, and are table ops themselves so that convolution is differentiable to any
# order.
def _windows(xp, kernel, stride, dilate):
    kh, kw = kernel
    eh, ew = dilate[0] * (kh - 1) + 1, dilate[1] * (kw - 1) + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (eh, ew), axis=(2, 3))
    return win[:, :, ::stride[0], ::stride[1], ::dilate[0], ::dilate[1]]


def _pad2(x, pad, value=0):
    if pad[0] == 0 and pad[1] == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])),
                  constant_values=value)


def conv_out_size(n, k, stride, pad, dilate):
    return (n + 2 * pad - dilate * (k - 1) - 1) // stride + 1


def conv2d(x, w, stride, pad, dilate):
    win = _windows(_pad2(x, pad), w.shape[2:], stride, dilate)      # N C OH OW KH KW
    out = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3]))         # N OH OW F
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


def conv2d_input_grad(g, w, stride, pad, dilate, x_hw):
    """The adjoint of ``conv2d`` in its data: scatter ``g`` back through the weights."""
    n, _, oh, ow = g.shape
    _, c, kh, kw = w.shape
    hp, wp = x_hw[0] + 2 * pad[0], x_hw[1] + 2 * pad[1]
    out = np.zeros((n, c, hp, wp), dtype=np.result_type(g, w))
    # cols[n, oh, ow, c, kh, kw]: each output position's contribution to its receptive field
    cols = np.tensordot(g, w, axes=([1], [0])).transpose(0, 3, 4, 5, 1, 2)
    for i in range(kh):
        hi = i * dilate[0]
        for j in range(kw):
            wj = j * dilate[1]
            out[:, :, hi:hi + stride[0] * (oh - 1) + 1:stride[0],
                wj:wj + stride[1] * (ow - 1) + 1:stride[1]] += cols[:, :, i, j]
    return out[:, :, pad[0]:pad[0] + x_hw[0], pad[1]:pad[1] + x_hw[1]]


def conv2d_weight_grad(x, g, stride, pad, dilate, kernel):
    """The adjoint of ``conv2d`` in its weights: correlate the data with ``g``."""
    win = _windows(_pad2(x, pad), kernel, stride, dilate)           # N C OH OW KH KW
    return np.tensordot(g, win, axes=([0, 2, 3], [0, 2, 3]))        # F C KH KW


def _pool_windows(x, kernel, stride, pad, value):
    return _windows(_pad2(x, pad, value), kernel, stride, (1, 1))


def max_pool2d(x, kernel, stride, pad):
    return _pool_windows(x, kernel, stride, pad, -np.inf).max(axis=(4, 5))


def _argmax_key(x, kernel, stride, pad):
    """Index arrays into the padded ``x`` at the maximum of every pooling window."""
    win = _pool_windows(x, kernel, stride, pad, -np.inf)
    n, c, oh, ow, kh, kw = win.shape
    flat = win.reshape(n, c, oh, ow, kh * kw).argmax(axis=-1)
    row = flat // kw + (np.arange(oh) * stride[0])[:, None]
    col = flat % kw + (np.arange(ow) * stride[1])[None, :]
    return (np.arange(n)[:, None, None, None], np.arange(c)[None, :, None, None], row, col)


def max_pool2d_scatter(g, x, kernel, stride, pad):
    """``g`` added at the position of each window's maximum of ``x`` (max pooling's adjoint)."""
    n, c, h, w = x.shape
    out = np.zeros((n, c, h + 2 * pad[0], w + 2 * pad[1]), dtype=g.dtype)
    np.add.at(out, _argmax_key(x, kernel, stride, pad), g)
    return out[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w]


def max_pool2d_select(h, x, kernel, stride, pad):
    """``h`` at the position of each window's maximum of ``x``."""
    return _pad2(h, pad)[_argmax_key(x, kernel, stride, pad)]


def avg_pool2d(x, kernel, stride, pad, count_include_pad):
    total = _pool_windows(x, kernel, stride, pad, 0).sum(axis=(4, 5))
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


# ---------------------------------------------------------------- more elementwise and NaN-aware
def real(x):
    return np.array(np.real(x), copy=True)


def nan_to_num(x, nan, posinf, neginf):
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def prelu(x, alpha):
    return np.where(x > 0, x, x * alpha)


def nanmax(x, axis, keepdims):
    return np.nanmax(x, axis=axis, keepdims=keepdims)


def nanmin(x, axis, keepdims):
    return np.nanmin(x, axis=axis, keepdims=keepdims)


def nanprod(x, axis, keepdims):
    return np.nanprod(x, axis=axis, keepdims=keepdims)


def nancumsum(x, axis):
    return np.nancumsum(x, axis=axis)


def nancumprod(x, axis):
    return np.nancumprod(x, axis=axis)
