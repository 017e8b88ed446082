"""Neural-network operations in MXNet's ``npx`` names (``fastgrad.npx``).

Every function here is a table op or a composition of table ops, so it is differentiable to
any order. ``COMPOSITES`` lists the ones that are compositions (checked by
``tests/ops/test_ops.py`` like the table's ops).
"""

import numpy as _onp

from fastgrad._api import _functions as F
from fastgrad._api import _creation
from fastgrad._kernels import _forward as _kernels
from fastgrad._ops import _namespaces
from fastgrad._ops._registry import REGISTRY as _P
from fastgrad._core._state import is_training
from fastgrad.numpy import random as _random
from fastgrad._core._array import ndarray, unwrap, _wrap
from fastgrad._api._update_ops import (sgd_update, sgd_mom_update, nag_mom_update,  # noqa: F401
                                       adam_update, adamw_update, rmsprop_update,
                                       rmspropalex_update, signsgd_update, signum_update,
                                       lamb_update_phase1, lamb_update_phase2, ftrl_update)
from fastgrad._api import _mxnet_slicing as _slicing
from fastgrad.context import gpu, num_gpus, current_device  # noqa: F401  (MXNet's npx names)
from fastgrad._api import _npx_composites as _more
from fastgrad._api import _params_format
from fastgrad.context import cpu as _cpu
from fastgrad._api._npx_composites import (deconvolution, reshape_like, sequence_mask, gather_nd,
                                           scatter_nd)
from fastgrad._api import _rnn

# The ops the table marks npx=True (relu, sigmoid, erf, gamma, ...; SciPy's kernels are
# imported on first use): Note [Generated namespaces] in _namespaces.py.
_TABLE_NAMES = _namespaces.npx_names()
globals().update(_TABLE_NAMES)


def _pair(name, value, default):
    if value is None or (isinstance(value, (tuple, list)) and len(value) == 0):
        return default
    if isinstance(value, (int, _onp.integer)):
        return (int(value), int(value))
    value = tuple(int(v) for v in value)
    if len(value) != 2:
        raise NotImplementedError("npx.%s: only 2-D (NCHW) data is supported, got %d "
                                  "spatial dimensions" % (name, len(value)))
    return value


_CHANNELS_FIRST = (None, "NCW", "NCHW", "NCDHW")
_CHANNELS_LAST = ("NWC", "NHWC", "NDHWC")


def _channels_last(name, layout):
    """Whether ``layout`` puts the channels last (``NWC``, ``NHWC``, ``NDHWC``).

    Note [Channels-last layouts]: MXNet's CPU operators take channels-last data, with
    channels-last weights (``(F, KH, KW, C)`` for a convolution, ``(C, KH, KW, F)`` for a
    transposed one). fastgrad moves the channel axis of the data and the weight to position
    1, computes channels-first and moves the output's channel axis back: the same values,
    differentiable like the rest, at the cost of the copies.
    """
    if layout in _CHANNELS_FIRST:
        return False
    if layout in _CHANNELS_LAST:
        return True
    raise NotImplementedError("npx.%s: unknown layout %r (NCW, NCHW, NCDHW, NWC, NHWC, NDHWC)"
                              % (name, layout))


def _to_channels_first(a):
    return F.moveaxis(a, -1, 1)


def _to_channels_last(a):
    return F.moveaxis(a, 1, -1)


def softmax(data, axis=-1, length=None, temperature=None, use_length=False, dtype=None):
    """Softmax along ``axis``, computed stably (``npx.softmax``).

    Examples
    --------
    >>> import fastgrad as mx
    >>> mx.npx.softmax(mx.np.array([0.0, 0.0]))
    array([0.5, 0.5])
    """
    if use_length or length is not None:
        raise NotImplementedError("npx.softmax: use_length/length are not supported")
    if temperature is not None and temperature != 1.0:
        data = data / temperature
    out = _P["softmax"](data, int(axis))
    return F.astype(out, dtype) if dtype is not None else out


def log_softmax(data, axis=-1, length=None, temperature=None, use_length=False, dtype=None):
    """Log of softmax along ``axis``, computed stably (``npx.log_softmax``)."""
    if use_length or length is not None:
        raise NotImplementedError("npx.log_softmax: use_length/length are not supported")
    if temperature is not None and temperature != 1.0:
        data = data / temperature
    out = _P["log_softmax"](data, int(axis))
    return F.astype(out, dtype) if dtype is not None else out


def softmin(data, axis=-1, temperature=None, dtype=None):
    """Softmax of ``-data`` (``npx.softmin``)."""
    return softmax(-data, axis=axis, temperature=temperature, dtype=dtype)


def logsumexp(data, axis=None, keepdims=False):
    """``log(sum(exp(data)))`` over ``axis``, computed stably."""
    return _P["logsumexp"](data, F._axis(axis), bool(keepdims))


def gelu(data, approximation="erf"):
    """Gaussian error linear unit ``x * Phi(x)``; ``approximation='tanh'`` for the tanh form."""
    if approximation == "erf":
        return _P["gelu"](data)
    if approximation == "tanh":
        return _P["gelu_tanh"](data)
    raise ValueError("npx.gelu: approximation must be 'erf' or 'tanh', got %r"
                     % (approximation,))


def leaky_relu(data, gamma=None, act_type="leaky", slope=0.25, lower_bound=0.125,
               upper_bound=0.334, **kwargs):
    """MXNet's LeakyReLU family (``npx.leaky_relu``).

    ``act_type`` is ``'leaky'`` (``slope`` for negative inputs), ``'prelu'`` (a learned
    ``gamma``, broadcast along axis 1), ``'elu'`` (``slope`` is alpha), ``'selu'`` or
    ``'gelu'``.
    """
    if act_type == "leaky":
        return _P["leaky_relu"](data, float(slope))
    if act_type == "prelu":
        if gamma is None:
            raise ValueError("npx.leaky_relu: act_type='prelu' needs gamma")
        nd = _onp.ndim(unwrap(data))
        if _onp.ndim(unwrap(gamma)) == 1 and nd > 1:
            gamma = F.reshape(gamma, (1, -1) + (1,) * (nd - 2))
        return _P["prelu"](data, gamma)
    if act_type == "elu":
        return _P["elu"](data, float(slope))
    if act_type == "selu":
        return _P["selu"](data)
    if act_type == "gelu":
        return _P["gelu"](data)
    raise ValueError("npx.leaky_relu: unknown act_type %r (leaky, prelu, elu, selu, gelu)"
                     % (act_type,))


def activation(data, act_type="relu"):
    """``relu``, ``sigmoid``, ``tanh``, ``softrelu``, ``softsign``, ``log_sigmoid``, ``gelu``
    or ``silu`` of ``data`` (``npx.activation``)."""
    if act_type == "relu":
        return relu(data)
    if act_type == "sigmoid":
        return sigmoid(data)
    if act_type == "tanh":
        return F.tanh(data)
    if act_type == "softrelu":
        return _P["softplus"](data)
    if act_type == "softsign":
        return _P["softsign"](data)
    if act_type == "log_sigmoid":
        return _P["log_sigmoid"](data)
    if act_type == "gelu":
        return _P["gelu"](data)
    if act_type == "silu":
        return _P["silu"](data)
    raise ValueError("npx.activation: unknown act_type %r (relu, sigmoid, tanh, softrelu, "
                     "softsign, log_sigmoid, gelu, silu)" % (act_type,))


def hard_sigmoid(data, alpha=0.2, beta=0.5):
    """``clip(alpha * x + beta, 0, 1)`` (``npx.hard_sigmoid``)."""
    return _P["hard_sigmoid"](data, float(alpha), float(beta))


def smooth_l1(data, scalar=1.0):
    """The smooth L1 (Huber-like) function with ``sigma = scalar`` (``npx.smooth_l1``)."""
    return _P["smooth_l1"](data, float(scalar))


def dropout(data, p=0.5, mode="training", axes=(), cudnn_off=True, **kwargs):
    """Randomly zero elements with probability ``p`` and scale the rest by ``1/(1-p)``.

    Only in training mode (``autograd.is_training()``, or always with ``mode='always'``);
    otherwise the input is returned unchanged.
    """
    if not 0 <= p < 1:
        raise ValueError("npx.dropout: p must be in [0, 1), got %r" % (p,))
    if p == 0 or not (mode == "always" or is_training()):
        return data
    shape = list(_onp.shape(unwrap(data)))
    for a in axes:
        shape[a] = 1
    keep = _random._rng().random(tuple(shape)) >= p
    dtype = _onp.result_type(unwrap(data))
    mask = keep.astype(dtype) / _onp.asarray(1 - p, dtype=dtype)
    return data * mask


rnn = _rnn.make_rnn(dropout)


def fully_connected(x, weight, bias=None, num_hidden=None, no_bias=False, flatten=True):
    """``x @ weight.T + bias`` (MXNet's FullyConnected; ``weight`` is (num_hidden, in)).

    With ``flatten`` (the default) ``x`` is first made 2-D, ``(x.shape[0], rest)``, whatever
    its number of dimensions (a 1-D input is a batch of one-element rows, as in MXNet).
    """
    shape = _onp.shape(unwrap(x))
    if not shape:
        raise ValueError("npx.fully_connected: the data is 0-d; it needs a batch axis")
    if flatten and len(shape) != 2:
        rest = 1
        for d in shape[1:]:
            rest *= d
        x = F.reshape(x, (shape[0], rest))
    out = F.matmul(x, F.transpose(weight))
    if not no_bias and bias is not None:
        out = out + bias
    return out


def convolution(data, weight, bias=None, kernel=None, stride=None, dilate=None, pad=None,
                num_filter=None, num_group=1, workspace=None, no_bias=False, cudnn_tune=None,
                cudnn_off=False, layout=None):
    """Convolution of NCHW ``data`` with (F, C / num_group, KH, KW) ``weight``
    (``npx.convolution``); NCW and NCDHW data make it 1-D and 3-D, and the channels-last
    layouts (``layout='NHWC'``...) take channels-last data and weights (Note
    [Channels-last layouts]).

    Parameters
    ----------
    data : ndarray, shape (N, C, H, W), (N, C, W) or (N, C, D, H, W)
    weight : ndarray, shape (num_filter, C / num_group, KH, KW) (one kernel axis per
        spatial axis of ``data``)
    bias : ndarray, shape (num_filter,), optional
    kernel, stride, dilate, pad : int or pair of ints
        ``kernel`` must match the weight; ``stride`` and ``dilate`` default to 1, ``pad``
        to 0 (zero padding on both sides).

    The gradients are themselves convolutions (table ops), so this is differentiable to any
    order.

    Examples
    --------
    >>> import fastgrad as mx
    >>> x = mx.np.ones((1, 1, 3, 3))
    >>> w = mx.np.ones((1, 1, 2, 2))
    >>> mx.npx.convolution(x, w, kernel=(2, 2), num_filter=1, no_bias=True).shape
    (1, 1, 2, 2)
    """
    if _channels_last("convolution", layout):
        return _to_channels_last(convolution(
            _to_channels_first(data), _to_channels_first(weight), bias, kernel=kernel,
            stride=stride, dilate=dilate, pad=pad, num_filter=num_filter, num_group=num_group,
            no_bias=no_bias))
    wshape = _onp.shape(unwrap(weight))
    dshape = _onp.shape(unwrap(data))
    if int(num_group) != 1:
        if num_filter is not None and int(num_filter) != wshape[0]:
            raise ValueError("npx.convolution: num_filter=%d but the weight has %d filters"
                             % (num_filter, wshape[0]))
        g = int(num_group)
        if len(dshape) == 4 and len(wshape) == 4 and g > 0 and dshape[1] % g == 0 \
                and wshape[0] % g == 0 and wshape[1] * g == dshape[1]:
            kernel = _pair("convolution", kernel, tuple(wshape[2:]))
            if kernel != tuple(wshape[2:]):
                raise ValueError("npx.convolution: kernel=%s does not match the weight's "
                                 "shape %s" % (kernel, wshape))
            # Note [Grouped convolution] in _npx_composites.py
            return _more.grouped_conv2d(data, weight, bias, _pair("convolution", stride, (1, 1)),
                                        _pair("convolution", pad, (0, 0)),
                                        _pair("convolution", dilate, (1, 1)), no_bias)
        return _more.grouped("convolution", convolution, data, weight, bias, num_group, no_bias,
                             kernel=kernel, stride=stride, dilate=dilate, pad=pad, no_bias=True)
    if len(dshape) in (3, 5):   # 1-D and 3-D (Note [Convolution in other dimensions])
        if num_filter is not None and int(num_filter) != wshape[0]:
            raise ValueError("npx.convolution: num_filter=%d but the weight has %d filters"
                             % (num_filter, wshape[0]))
        return _more.convolution_nd("convolution", data, weight, bias, kernel, stride, dilate,
                                    pad, no_bias)
    if len(dshape) != 4 or len(wshape) != 4:
        raise NotImplementedError("npx.convolution: only 2-D convolution is supported (data "
                                  "%s, weight %s)" % (dshape, wshape))
    kernel = _pair("convolution", kernel, tuple(wshape[2:]))
    if kernel != tuple(wshape[2:]):
        raise ValueError("npx.convolution: kernel=%s does not match the weight's shape %s"
                         % (kernel, wshape))
    if num_filter is not None and int(num_filter) != wshape[0]:
        raise ValueError("npx.convolution: num_filter=%d but the weight has %d filters"
                         % (num_filter, wshape[0]))
    if dshape[1] != wshape[1]:
        raise ValueError("npx.convolution: data has %d channels, the weight expects %d"
                         % (dshape[1], wshape[1]))
    stride = _pair("convolution", stride, (1, 1))
    pad = _pair("convolution", pad, (0, 0))
    dilate = _pair("convolution", dilate, (1, 1))
    # Note [Convolution as recorded ops]: im2col and the product (with the bias added into it
    # in place) are recorded as two nodes rather than as one conv2d node, so that the
    # backward's weight gradient reads the columns the forward built (the product node keeps
    # them) instead of gathering the windows again (Note [Convolution layout] in
    # _kernels/_forward.py). NCHW data whose columns are larger than a chunk is the exception: its
    # columns are gathered a chunk at a time, in the forward and again in the backward, which
    # costs no more than reading the saved columns back (Note [Convolution in row chunks]).
    oh = _kernels.conv_out_size(dshape[2], kernel[0], stride[0], pad[0], dilate[0])
    ow = _kernels.conv_out_size(dshape[3], kernel[1], stride[1], pad[1], dilate[1])
    if oh <= 0 or ow <= 0:
        raise ValueError("npx.convolution: the kernel %s (dilated %s, padded %s) is larger "
                         "than the data's %s" % (kernel, dilate, pad, dshape[2:]))
    with_bias = not no_bias and bias is not None
    if with_bias and _onp.size(unwrap(bias)) != wshape[0]:
        raise ValueError("npx.convolution: bias has shape %s, the weight has %d filters"
                         % (_onp.shape(unwrap(bias)), wshape[0]))
    batch_last = _kernels.batch_innermost(unwrap(data))
    if not batch_last and _kernels.conv_in_chunks(unwrap(data), unwrap(weight), stride, pad,
                                                  dilate):
        # Columns too large for the cache: one node that gathers them in chunks of rows, in
        # the forward and again in the backward (Note [Convolution in row chunks]).
        if with_bias:
            return _P["conv2d_bias"](data, weight, F.reshape(bias, (-1,)), stride, pad, dilate)
        return _P["conv2d"](data, weight, stride, pad, dilate)
    cols = _P["im2col"](data, kernel, stride, pad, dilate, batch_last)
    weight = F.reshape(weight, (wshape[0], -1))
    if with_bias:
        out = _P["conv2d_product_bias"](weight, cols, F.reshape(bias, (-1,)))
    else:
        out = _P["conv2d_product"](weight, cols)
    if batch_last:
        return F.transpose(F.reshape(out, (wshape[0], oh, ow, dshape[0])), (3, 0, 1, 2))
    return F.transpose(F.reshape(out, (wshape[0], dshape[0], oh, ow)), (1, 0, 2, 3))


def pooling(data, kernel=None, stride=None, pad=None, pool_type="max",
            pooling_convention="valid", global_pool=False, cudnn_off=False, p_value=None,
            count_include_pad=True, layout=None):
    """Max, average or sum pooling of NCW, NCHW or NCDHW ``data`` (``npx.pooling``;
    channels-last layouts too, Note [Channels-last layouts]).

    ``stride`` defaults to 1 and ``pad`` to 0, as in MXNet; ``global_pool=True`` pools over
    the whole image. Max pooling pads with ``-inf``; average pooling counts padding when
    ``count_include_pad``. ``pooling_convention='full'`` rounds the output length up
    (Note [Pooling windows] in ``_npx_composites.py``).
    """
    if _channels_last("pooling", layout):
        return _to_channels_last(pooling(
            _to_channels_first(data), kernel=kernel, stride=stride, pad=pad,
            pool_type=pool_type, pooling_convention=pooling_convention,
            global_pool=global_pool, count_include_pad=count_include_pad))
    if pooling_convention not in ("valid", "full"):
        raise NotImplementedError("npx.pooling: pooling_convention must be 'valid' or 'full', "
                                  "got %r" % (pooling_convention,))
    nd = _onp.ndim(unwrap(data))
    if pooling_convention == "full" and not global_pool and nd in (3, 4, 5):
        if kernel is None:
            raise ValueError("npx.pooling: kernel is required unless global_pool=True")
        n = nd - 2
        return _more.pooling_by_windows(
            data, _more._tuple("pooling", "kernel", kernel, n, None),
            _more._tuple("pooling", "stride", stride, n, (1,) * n),
            _more._tuple("pooling", "pad", pad, n, (0,) * n), pool_type,
            bool(count_include_pad), ceil=True)
    if nd in (3, 5):            # 1-D and 3-D (Note [Convolution in other dimensions])
        if global_pool:
            reduce = {"max": F.max, "avg": F.mean, "sum": F.sum}.get(pool_type)
            if reduce is None:
                raise ValueError("npx.pooling: unknown pool_type %r (max, avg, sum)"
                                 % (pool_type,))
            return reduce(data, axis=tuple(range(2, nd)), keepdims=True)
        if kernel is None:
            raise ValueError("npx.pooling: kernel is required unless global_pool=True")
        return _more.pooling_nd(data, kernel, stride, pad, pool_type, count_include_pad)
    if nd != 4:
        raise NotImplementedError("npx.pooling: 1-D, 2-D and 3-D data only (NCW, NCHW, "
                                  "NCDHW), got %d dimensions" % nd)
    if global_pool:
        if pool_type == "max":
            return F.max(data, axis=(2, 3), keepdims=True)
        if pool_type == "avg":
            return F.mean(data, axis=(2, 3), keepdims=True)
        if pool_type == "sum":
            return F.sum(data, axis=(2, 3), keepdims=True)
        raise ValueError("npx.pooling: unknown pool_type %r (max, avg, sum)" % (pool_type,))
    if kernel is None:
        raise ValueError("npx.pooling: kernel is required unless global_pool=True")
    kernel = _pair("pooling", kernel, None)
    stride = _pair("pooling", stride, (1, 1))
    pad = _pair("pooling", pad, (0, 0))
    if pool_type == "max":
        return _P["max_pool2d"](data, kernel, stride, pad)
    if pool_type == "avg":
        return _P["avg_pool2d"](data, kernel, stride, pad, bool(count_include_pad))
    if pool_type == "sum":
        return _P["avg_pool2d"](data, kernel, stride, pad, True) * float(kernel[0] * kernel[1])
    raise ValueError("npx.pooling: unknown pool_type %r (max, avg, sum)" % (pool_type,))


def _update_running(stat, value, momentum):
    # MXNet's momentum parameter is a C float: float64 statistics move by float32(momentum)
    momentum = float(_onp.float32(momentum))
    new = momentum * _onp.asarray(unwrap(stat)) + (1 - momentum) * _onp.asarray(unwrap(value))
    if isinstance(stat, ndarray):
        stat[...] = new.astype(stat.dtype)
    else:
        stat[...] = new


def batch_norm(x, gamma, beta, running_mean, running_var, eps=1e-3, momentum=0.9,
               fix_gamma=True, use_global_stats=False, output_mean_var=False, axis=1,
               cudnn_off=False, **kwargs):
    """Batch normalization (``npx.batch_norm``), MXNet's semantics.

    In training mode (``autograd.is_training()``) the batch mean and (biased) variance over
    every axis but ``axis`` normalize ``x``, and ``running_mean``/``running_var`` are updated
    in place: ``running = momentum * running + (1 - momentum) * batch``. In predict mode, or
    with ``use_global_stats=True``, the running statistics are used and left alone.
    ``fix_gamma=True`` (MXNet's default) treats ``gamma`` as ones, and in training mode
    writes ones into it, as MXNet's operator does (so a Gluon ``BatchNorm(scale=False)``
    saves ``gamma`` as ones after training, as in MXNet). ``output_mean_var=True`` also
    returns the mean and the inverse standard deviation ``1 / sqrt(var + eps)`` used.
    """
    if fix_gamma and is_training():
        raw = unwrap(gamma)
        if isinstance(raw, _onp.ndarray) and raw.flags.writeable:
            raw[...] = 1
    nd = _onp.ndim(unwrap(x))
    axis = int(axis) % nd
    red = tuple(d for d in range(nd) if d != axis)
    view = tuple(-1 if d == axis else 1 for d in range(nd))
    if is_training() and not use_global_stats:
        mean = F.mean(x, axis=red, keepdims=True)
        var = F.var(x, axis=red, keepdims=True)
        _update_running(running_mean, F.reshape(mean, (-1,)), momentum)
        _update_running(running_var, F.reshape(var, (-1,)), momentum)
    else:
        mean = F.reshape(running_mean, view)
        var = F.reshape(running_var, view)
    out = (x - mean) / F.sqrt(var + eps)
    if not fix_gamma:
        out = out * F.reshape(gamma, view)
    out = out + F.reshape(beta, view)
    if output_mean_var:
        # MXNet's second extra output is the inverse standard deviation 1/sqrt(var + eps)
        # (checked against MXNet 1.9.1 in training, predict and use_global_stats modes).
        return out, F.reshape(mean, (-1,)), F.reshape(1 / F.sqrt(var + eps), (-1,))
    return out


def layer_norm(data, gamma, beta, axis=-1, eps=1e-5, output_mean_var=False):
    """Layer normalization over ``axis`` with scale ``gamma`` and shift ``beta``
    (``npx.layer_norm``)."""
    nd = _onp.ndim(unwrap(data))
    axis = int(axis) % nd
    view = tuple(-1 if d == axis else 1 for d in range(nd))
    mean = F.mean(data, axis=axis, keepdims=True)
    var = F.var(data, axis=axis, keepdims=True)
    out = (data - mean) / F.sqrt(var + eps) * F.reshape(gamma, view) + F.reshape(beta, view)
    if output_mean_var:
        return out, mean, F.sqrt(var + eps)
    return out


def group_norm(data, gamma, beta, num_groups=1, eps=1e-5, output_mean_var=False):
    """Group normalization of NC... ``data``: channels split into ``num_groups`` groups
    (``npx.group_norm``); ``gamma``/``beta`` have one value per channel."""
    shape = _onp.shape(unwrap(data))
    n, c = shape[0], shape[1]
    if c % num_groups:
        raise ValueError("npx.group_norm: %d channels do not split into %d groups"
                         % (c, num_groups))
    grouped = F.reshape(data, (n, num_groups, -1))
    mean = F.mean(grouped, axis=2, keepdims=True)
    var = F.var(grouped, axis=2, keepdims=True)
    out = F.reshape((grouped - mean) / F.sqrt(var + eps), shape)
    view = (1, c) + (1,) * (len(shape) - 2)
    out = out * F.reshape(gamma, view) + F.reshape(beta, view)
    if output_mean_var:
        return out, mean, F.sqrt(var + eps)
    return out


def instance_norm(data, gamma, beta, eps=1e-3):
    """Instance normalization: each sample's channel normalized over its spatial axes."""
    nd = _onp.ndim(unwrap(data))
    red = tuple(range(2, nd))
    mean = F.mean(data, axis=red, keepdims=True)
    var = F.var(data, axis=red, keepdims=True)
    view = (1, -1) + (1,) * (nd - 2)
    return (data - mean) / F.sqrt(var + eps) * F.reshape(gamma, view) + F.reshape(beta, view)


def l2_normalization(data, eps=1e-10, mode="instance"):
    """Divide by the L2 norm over every axis but the first (``mode='instance'``), axis 1
    (``'channel'``) or axes 2+ (``'spatial'``)."""
    nd = _onp.ndim(unwrap(data))
    red = {"instance": tuple(range(1, nd)), "channel": (1,),
           "spatial": tuple(range(2, nd))}.get(mode)
    if red is None:
        raise ValueError("npx.l2_normalization: unknown mode %r" % (mode,))
    return data / F.sqrt(F.sum(data * data, axis=red, keepdims=True) + eps)


def embedding(data, weight, input_dim=None, output_dim=None, dtype="float32",
              sparse_grad=False):
    """Rows of ``weight`` at the indices ``data`` (``npx.embedding``); the gradient adds up
    at repeated indices. As in MXNet, float indices (the usual dtype of a batch) are
    truncated and indices out of range are clipped."""
    idx = _onp.asarray(unwrap(data))
    if idx.dtype.kind == "f":
        idx = idx.astype(_onp.int64)
    elif idx.dtype.kind not in "iu":
        raise TypeError("npx.embedding: indices must be integers or floats, got %s" % idx.dtype)
    return F.take(weight, idx, axis=0, mode="clip")


def pick(data, index, axis=-1, mode="clip", keepdims=False):
    """``data`` at ``index`` along ``axis`` (``npx.pick``), e.g. the score of each label.

    ``mode`` is ``'clip'`` or ``'wrap'`` for out-of-range indices.
    """
    shape = _onp.shape(unwrap(data))
    if not shape:
        raise ValueError("npx.pick: data is 0-d; it needs an axis to pick along")
    if mode not in ("clip", "wrap"):
        raise ValueError("npx.pick: mode must be 'clip' or 'wrap', got %r" % (mode,))
    if not -len(shape) <= int(axis) < len(shape):
        raise ValueError("npx.pick: axis %d is out of range for data of shape %s"
                         % (axis, shape))
    axis = int(axis) % len(shape)
    if not isinstance(index, ndarray):
        index = _onp.asarray(index)
    idx = unwrap(index)
    if idx.dtype.kind not in "iuf":
        raise TypeError("npx.pick: index must hold integers or floats, got %s" % idx.dtype)
    rest = shape[:axis] + shape[axis + 1:]
    if idx.shape != rest and idx.shape != shape[:axis] + (1,) + shape[axis + 1:]:
        raise ValueError("npx.pick: index has shape %s; data of shape %s needs %s along "
                         "axis %d" % (idx.shape, shape, rest, axis))
    if shape[axis] == 0 and idx.size:
        raise ValueError("npx.pick: axis %d of data is empty, there is nothing to pick"
                         % axis)
    return _P["pick_along_axis"](data, index, axis, mode, bool(keepdims))


def one_hot(indices, depth, on_value=1.0, off_value=0.0, dtype="float32"):
    """One-hot encoding of integer ``indices`` (not differentiable)."""
    idx = _onp.asarray(unwrap(indices)).astype(_onp.int64)
    out = _onp.full(idx.shape + (depth,), off_value, dtype=dtype)
    valid = (idx >= 0) & (idx < depth)
    _onp.put_along_axis(out, _onp.where(valid, idx, 0)[..., None],
                        _onp.where(valid, on_value, off_value)[..., None].astype(dtype), axis=-1)
    return _wrap(out)


def softmax_cross_entropy(data, label, axis=-1, sparse_label=True):
    """The softmax cross-entropy of ``data`` (logits) and ``label`` summed over the batch
    (MXNet's ``softmax_cross_entropy``); ``label`` holds class indices, or probabilities
    with ``sparse_label=False``."""
    logp = log_softmax(data, axis=axis)
    if sparse_label:
        nll = -pick(logp, label, axis=axis)
    else:
        nll = -F.sum(logp * label, axis=axis)
    return F.sum(nll)


def batch_flatten(data):
    """Collapse every axis but the first (``npx.batch_flatten``)."""
    return F.reshape(data, (_onp.shape(unwrap(data))[0], -1))


def batch_dot(a, b, transpose_a=False, transpose_b=False):
    """Batched matrix product of 3-D arrays (``npx.batch_dot``)."""
    if transpose_a:
        a = F.swapaxes(a, -1, -2)
    if transpose_b:
        b = F.swapaxes(b, -1, -2)
    return F.matmul(a, b)


def topk(data, axis=-1, k=1, ret_typ="indices", is_ascend=False, dtype="float32"):
    """The ``k`` largest (or smallest) elements along ``axis`` (``npx.topk``); the values
    are differentiable, the indices are not. ``ret_typ`` is ``'value'``, ``'indices'``,
    ``'both'`` or ``'mask'``."""
    raw = _onp.asarray(unwrap(data))
    order = _onp.argsort(raw if is_ascend else -raw, axis=axis, kind="stable")
    idx = _onp.take(order, _onp.arange(k), axis=axis)
    if ret_typ == "indices":
        return _wrap(idx.astype(dtype))
    if ret_typ == "mask":
        mask = _onp.zeros(raw.shape, dtype=raw.dtype)
        _onp.put_along_axis(mask, idx, 1, axis=axis)
        return _wrap(mask)
    values = F.take_along_axis(data, idx, axis)
    if ret_typ == "value":
        return values
    if ret_typ == "both":
        return values, _wrap(idx.astype(dtype))
    raise ValueError("npx.topk: unknown ret_typ %r" % (ret_typ,))


def seed(s):
    """Seed the random generator of ``fastgrad.np.random`` (``npx.random.seed``)."""
    _random.seed(s)


# Whether the program called set_np(array=True) (and not reset_np() since): Gluon's
# Parameters then hold mx.np arrays rather than NDArrays, as in MXNet (Note [Parameter array
# type] in fastgrad/gluon/parameter.py). fastgrad's arrays have NumPy semantics either way.
_np_array_requested = [False]
# Whether the program asked for NumPy shape semantics (set_np(shape=True), mx.set_np_shape,
# mx.np_shape()): fastgrad's shapes are NumPy's either way; MXNet's mx.is_np_shape() reports
# the request, and Gluon's unknown dimension is then -1 rather than 0.
_np_shape_requested = [False]


def _set_np_array(active):
    """Set the NumPy-array request of :func:`is_np_array_requested`; return the previous one
    (``mx.util.np_array`` scopes use it)."""
    previous, _np_array_requested[0] = _np_array_requested[0], bool(active)
    return previous


def _set_np_shape(active):
    """Set the NumPy-shape request (``mx.is_np_shape()``); return the previous one."""
    previous, _np_shape_requested[0] = _np_shape_requested[0], bool(active)
    return previous


def set_np(shape=True, array=True, dtype=False):
    """fastgrad always has NumPy semantics; ``dtype=True`` makes float64 the default float
    type of new arrays (``np.array([1, 2])``, ``np.zeros``, ``np.random``), as in MXNet, and
    ``dtype=False`` restores float32. ``array=True`` also makes Gluon's Parameters hold
    ``mx.np`` arrays (as MXNet's ``set_np``), see :func:`is_np_array_requested`."""
    if array and not shape:
        raise ValueError("npx.set_np: NumPy Shape semantics is required in using NumPy "
                         "array semantics (array=True needs shape=True)")
    _creation.set_default_float(_onp.float64 if dtype else _onp.float32)
    _np_array_requested[0] = bool(array)
    _np_shape_requested[0] = bool(shape)


def reset_np():
    """Back to MXNet's defaults: float32 is the default float type again, and Gluon's
    Parameters hold NDArrays."""
    _creation.set_default_float(_onp.float32)
    _np_array_requested[0] = False
    _np_shape_requested[0] = False


def is_np_array_requested():
    """Whether ``set_np(array=True)`` is in effect: MXNet's Gluon then makes ``mx.np`` arrays
    where it would make NDArrays (Parameters, loaded parameter files)."""
    return _np_array_requested[0]


def is_np_default_dtype():
    """Whether new arrays default to float64 (after ``set_np(dtype=True)``)."""
    return _creation.default_float() is _onp.float64


def is_np_array():
    """Always ``True``: fastgrad's arrays have NumPy's semantics (MXNet's
    ``npx.is_np_array``)."""
    return True


def cpu(device_id=0):
    """The CPU context, ``fastgrad.cpu(device_id)`` (MXNet's ``npx.cpu``)."""
    return _cpu(device_id)


reshape = _slicing.npx_reshape          # MXNet 2's reshape codes (Note [Reshape codes])


def slice_like(data, shape_like, axes=()):
    """``data`` cut to the shape of ``shape_like`` along ``axes`` (``npx.slice_like``)."""
    return _slicing.slice_like(data, shape_like, axes, op="npx.slice_like")


def waitall():
    """Accepted for MXNet compatibility (fastgrad computes eagerly)."""


COMPOSITES = ("softmin", "activation", "dropout", "fully_connected", "convolution", "pooling",
              "batch_norm", "layer_norm", "group_norm", "instance_norm", "l2_normalization",
              "embedding", "pick", "softmax_cross_entropy", "batch_flatten", "batch_dot",
              "topk")
"""The functions here that are compositions of table ops rather than one op."""

COMPOSITES += _more.COMPOSITES + ("rnn",)


def save(file, arr):
    """Save an array, a list of arrays or a dict of str to arrays to ``file`` in MXNet's
    ``.params`` format with NumPy shapes, as MXNet's ``npx.save`` (scalars and empty arrays
    allowed; see ``fastgrad/_api/_params_format.py``)."""
    _params_format.save(file, arr, numpy_shape=True, what="npx.save")


def load(file):
    """Load a ``.params`` file written by MXNet (``npx.save``, ``nd.save``, Gluon) or
    fastgrad: a list of arrays, or a dict when the file names them."""
    return _params_format.wrap_all(_params_format.load(file), ndarray)


# Defined last: the name is Python's builtin slice, which no code of this module may need after.
def slice(a, begin, end, step=None):  # noqa: A001 -- MXNet's npx.slice
    """``a[begin[0]:end[0]:step[0], ...]`` over the leading ``len(begin)`` axes
    (``npx.slice``): ``None`` entries take the default, out-of-range bounds are clipped."""
    return _slicing.slice_begin_end(a, begin, end, () if step is None else step,
                                    op="npx.slice")


# The table's names and the public functions defined here (Note [Generated namespaces]), and
# the functions imported from the modules below that MXNet's npx has.
__all__ = _namespaces.public_names(globals(), _TABLE_NAMES)
__all__ += ["gpu", "num_gpus", "current_device", "reshape", "rnn"] + _more.__all__
__all__ += ["sgd_update", "sgd_mom_update", "nag_mom_update", "adam_update", "adamw_update",
            "rmsprop_update", "rmspropalex_update", "signsgd_update", "signum_update",
            "lamb_update_phase1", "lamb_update_phase2", "ftrl_update"]
