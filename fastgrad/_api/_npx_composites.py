"""More of MXNet's ``npx``: 1-D and 3-D convolution and pooling, deconvolution,
``reshape_like``, ``sequence_mask``, ``gather_nd``, ``scatter_nd``.

Note [Convolution in other dimensions]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The table has 2-D convolution and pooling (Note [Convolution layout]). A 1-D one is the 2-D
one on an image of height 1. A 3-D one separates along depth: output plane ``d`` of a
convolution is the sum over the kernel's depth ``k`` of 2-D convolutions of input plane
``d * stride + k * dilate`` with kernel plane ``k``; max and average pooling take the maximum
and mean over the depth window of 2-D pooled planes. Both are compositions of table ops, so
they are exact and differentiable to any order; 3-D costs one 2-D kernel call per output plane
and kernel plane.
"""

import numpy as _onp

from fastgrad._api import _functions as F
from fastgrad._core._array import ndarray, unwrap, _wrap
from fastgrad._ops._registry import REGISTRY as _P


def _tuple(name, what, value, n, default):
    if value is None or (isinstance(value, (tuple, list)) and len(value) == 0):
        return default
    if isinstance(value, (int, _onp.integer)):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ValueError("npx.%s: %s has %d values for %d spatial dimensions"
                         % (name, what, len(value), n))
    return value


def _shape(a):
    return _onp.shape(unwrap(a))


def _add_bias(out, bias, no_bias):
    if bias is None or no_bias:
        return out
    return out + F.reshape(bias, (1, -1) + (1,) * (len(_shape(out)) - 2))


def _plane(x, d):
    return x[:, :, d]


def convolution_nd(name, data, weight, bias, kernel, stride, dilate, pad, no_bias):
    """1-D (NCW) or 3-D (NCDHW) convolution (Note [Convolution in other dimensions])."""
    wshape, dshape = _shape(weight), _shape(data)
    n = len(dshape) - 2
    if len(wshape) != n + 2:
        raise ValueError("npx.%s: data %s and weight %s differ in dimensions"
                         % (name, dshape, wshape))
    kernel = _tuple(name, "kernel", kernel, n, tuple(wshape[2:]))
    if kernel != tuple(wshape[2:]):
        raise ValueError("npx.%s: kernel=%s does not match the weight's shape %s"
                         % (name, kernel, wshape))
    if dshape[1] != wshape[1]:
        raise ValueError("npx.%s: data has %d channels, the weight expects %d"
                         % (name, dshape[1], wshape[1]))
    stride = _tuple(name, "stride", stride, n, (1,) * n)
    dilate = _tuple(name, "dilate", dilate, n, (1,) * n)
    pad = _tuple(name, "pad", pad, n, (0,) * n)
    if n == 1:
        out = _P["conv2d"](F.expand_dims(data, 2), F.expand_dims(weight, 2), (1, stride[0]),
                           (0, pad[0]), (1, dilate[0]))
        return _add_bias(F.squeeze(out, 2), bias, no_bias)
    x = F.pad(data, [(0, 0), (0, 0), (pad[0], pad[0]), (0, 0), (0, 0)]) if pad[0] else data
    depth = _shape(x)[2]
    out_depth = (depth - dilate[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    if out_depth < 1:
        raise ValueError("npx.%s: the kernel is deeper than the padded input" % name)
    planes = []
    for od in range(out_depth):
        acc = None
        for kd in range(kernel[0]):
            term = _P["conv2d"](_plane(x, od * stride[0] + kd * dilate[0]), _plane(weight, kd),
                                stride[1:], pad[1:], dilate[1:])
            acc = term if acc is None else acc + term
        planes.append(acc)
    return _add_bias(F.stack(planes, axis=2), bias, no_bias)


def pooling_nd(data, kernel, stride, pad, pool_type, count_include_pad):
    """1-D (NCW) or 3-D (NCDHW) pooling (Note [Convolution in other dimensions])."""
    n = len(_shape(data)) - 2
    kernel = _tuple("pooling", "kernel", kernel, n, None)
    stride = _tuple("pooling", "stride", stride, n, (1,) * n)
    pad = _tuple("pooling", "pad", pad, n, (0,) * n)
    if pool_type not in ("max", "avg", "sum"):
        raise ValueError("npx.pooling: unknown pool_type %r (max, avg, sum)" % (pool_type,))
    if n == 1:
        x = F.expand_dims(data, 2)
        k, s, p = (1, kernel[0]), (1, stride[0]), (0, pad[0])
        if pool_type == "max":
            out = _P["max_pool2d"](x, k, s, p)
        else:
            out = _P["avg_pool2d"](x, k, s, p, bool(count_include_pad) or pool_type == "sum")
            if pool_type == "sum":
                out = out * float(kernel[0])
        return F.squeeze(out, 2)
    if pool_type == "avg" and not count_include_pad and pad[0]:
        return pooling_by_windows(data, kernel, stride, pad, "avg", False, ceil=False)
    fill = -_onp.inf if pool_type == "max" else 0.0
    x = F.pad(data, [(0, 0), (0, 0), (pad[0], pad[0]), (0, 0), (0, 0)], constant_values=fill) \
        if pad[0] else data
    out_depth = (_shape(x)[2] - kernel[0]) // stride[0] + 1
    planes = []
    for od in range(out_depth):
        acc = None
        for kd in range(kernel[0]):
            plane = _plane(x, od * stride[0] + kd)
            if pool_type == "max":
                term = _P["max_pool2d"](plane, kernel[1:], stride[1:], pad[1:])
                acc = term if acc is None else F.maximum(acc, term)
            else:
                term = _P["avg_pool2d"](plane, kernel[1:], stride[1:], pad[1:],
                                        bool(count_include_pad) or pool_type == "sum")
                acc = term if acc is None else acc + term
        if pool_type == "avg":
            acc = acc / float(kernel[0])
        elif pool_type == "sum":
            acc = acc * float(kernel[1] * kernel[2])
        planes.append(acc)
    return F.stack(planes, axis=2)


def pooling_by_windows(data, kernel, stride, pad, pool_type, count_include_pad, ceil):
    """N-D pooling of explicitly padded data with each window's own divisor.

    Note [Pooling windows]: ``ceil=True`` is MXNet's ``pooling_convention='full'``: the
    output length is ``1 + ceil((n + 2 * pad - kernel) / stride)``, so the last windows may
    reach past the padding; those positions are padded too (with ``-inf`` for max pooling,
    zeros otherwise) and never count. An average divides each window's sum by its size
    within the padded data (``count_include_pad``, MXNet's default) or by its number of data
    elements; the divisor of an N-D window is the product of its per-axis lengths. Everything
    is a valid pooling of a padded array, so it is differentiable like the pooling itself.
    """
    dshape = _shape(data)
    spatial = dshape[2:]
    n = len(spatial)
    if ceil:
        out = [-(-(m + 2 * q - k) // s) + 1 for m, q, k, s in zip(spatial, pad, kernel, stride)]
    else:
        out = [(m + 2 * q - k) // s + 1 for m, q, k, s in zip(spatial, pad, kernel, stride)]
    if min(out) < 1:
        raise ValueError("npx.pooling: the kernel %s is larger than the padded data %s"
                         % (tuple(kernel), tuple(spatial)))
    extra = [max((o - 1) * s + k - (m + 2 * q), 0)
             for o, s, k, m, q in zip(out, stride, kernel, spatial, pad)]
    widths = [(0, 0), (0, 0)] + [(q, q + e) for q, e in zip(pad, extra)]
    unpadded = dict(stride=tuple(stride), pad=(0,) * n)
    if pool_type == "max":
        padded = F.pad(data, widths, constant_values=-_onp.inf)
        return _valid_pooling(padded, kernel, "max", **unpadded)
    if pool_type not in ("avg", "sum"):
        raise ValueError("npx.pooling: unknown pool_type %r (max, avg, sum)" % (pool_type,))
    total = _valid_pooling(F.pad(data, widths), kernel, "sum", **unpadded)
    if pool_type == "sum":
        return total
    counts = []
    for m, q, k, s, o in zip(spatial, pad, kernel, stride, out):
        starts = _onp.arange(o) * s - q
        if count_include_pad:
            lo, hi = starts, _onp.minimum(starts + k, m + q)
        else:
            lo, hi = _onp.maximum(starts, 0), _onp.minimum(starts + k, m)
        counts.append(hi - lo)
    divisor = counts[0]
    for c in counts[1:]:
        divisor = _onp.multiply.outer(divisor, c)
    return total / _onp.maximum(divisor, 1).astype(unwrap(data).dtype)


def _valid_pooling(data, kernel, pool_type, stride, pad):
    if len(kernel) == 2:
        if pool_type == "max":
            return _P["max_pool2d"](data, tuple(kernel), stride, pad)
        size = float(kernel[0] * kernel[1])
        return _P["avg_pool2d"](data, tuple(kernel), stride, pad, True) * size
    return pooling_nd(data, kernel, stride, pad, pool_type, True)


def grouped(name, op, data, weight, bias, num_group, without_bias, **kwargs):
    """``op`` (a convolution or deconvolution of one group) applied to each of
    ``num_group`` groups: the data's channels and the weight's first axis split alike, the
    outputs joined along the channels, then the bias added."""
    c, f = _shape(data)[1], _shape(weight)[0]
    g = int(num_group)
    if g < 1 or c % g or f % g:
        raise ValueError("npx.%s: %d input channels and a weight of shape %s do not split into "
                         "num_group=%d groups" % (name, c, _shape(weight), g))
    parts = [op(data[:, i * (c // g):(i + 1) * (c // g)], weight[i * (f // g):(i + 1) * (f // g)],
                **kwargs) for i in range(g)]
    return _add_bias(F.concatenate(parts, axis=1), bias, without_bias)


def grouped_conv2d(data, weight, bias, stride, pad, dilate, no_bias):
    """2-D convolution in groups as one gather and one batched product.

    Note [Grouped convolution]: ``im2col``'s columns have the channels outermost,
    ``(C * KH * KW, N * OH * OW)``, so the rows of group ``i`` are a contiguous block: the
    columns reshaped to ``(G, C/G * KH * KW, N * OH * OW)`` and the weight to
    ``(G, F/G, C/G * KH * KW)`` multiply as one batched ``matmul`` into ``(G, F/G, N * OH *
    OW)``, which is the output's ``(F, N, OH, OW)``. A depthwise convolution (``G = C``, as in
    MobileNet) is then one gather and one product rather than ``C`` convolutions; both ops
    are table ops, so this stays differentiable to any order.
    """
    dshape, wshape = _shape(data), _shape(weight)
    n, c = dshape[0], dshape[1]
    f, kernel = wshape[0], tuple(wshape[2:])
    g = c // wshape[1]
    oh = (dshape[2] + 2 * pad[0] - dilate[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    ow = (dshape[3] + 2 * pad[1] - dilate[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    if oh <= 0 or ow <= 0:
        raise ValueError("npx.convolution: the kernel %s (dilated %s, padded %s) is larger "
                         "than the data's %s" % (kernel, dilate, pad, dshape[2:]))
    cols = _P["im2col"](data, kernel, tuple(stride), tuple(pad), tuple(dilate), False)
    cols = F.reshape(cols, (g, -1, n * oh * ow))
    out = F.matmul(F.reshape(weight, (g, f // g, -1)), cols)
    out = F.transpose(F.reshape(out, (f, n, oh, ow)), (1, 0, 2, 3))
    return _add_bias(out, bias, no_bias)


def _deconv3d(data, weight, stride, pad, dilate, size):
    """3-D transposed convolution (Note [Convolution in other dimensions]): input plane ``i``
    with kernel plane ``k`` lands on output plane ``i * stride + k * dilate - pad``, the
    transpose of the 3-D convolution above."""
    n, fout = _shape(data)[0], _shape(weight)[1]
    planes = [None] * size[0]
    for i in range(_shape(data)[2]):
        for kd in range(_shape(weight)[2]):
            j = i * stride[0] + kd * dilate[0] - pad[0]
            if 0 <= j < size[0]:
                term = _P["conv2d_input_grad"](_plane(data, i), _plane(weight, kd), stride[1:],
                                               pad[1:], dilate[1:], size[1:])
                planes[j] = term if planes[j] is None else planes[j] + term
    dtype = _onp.result_type(unwrap(data), unwrap(weight))
    empty = _wrap(_onp.zeros((n, fout) + tuple(size[1:]), dtype=dtype))
    return F.stack([empty if p is None else p for p in planes], axis=2)


def deconvolution(data, weight, bias=None, kernel=None, stride=None, dilate=None, pad=None,
                  adj=None, target_shape=None, num_filter=None, num_group=1, workspace=None,
                  no_bias=None, cudnn_tune=None, cudnn_off=False, layout=None):
    """Transposed convolution of NCW, NCHW or NCDHW ``data`` with (C, F / num_group, K...)
    ``weight`` (``npx.deconvolution``): the gradient of a convolution with respect to its
    input, so it is differentiable to any order. The output length is
    ``(in - 1) * stride - 2 * pad + dilate * (kernel - 1) + 1 + adj``. With both ``stride``
    and ``dilate`` above 1, MXNet 1.9's own deconvolution is not the transpose of its
    convolution (its convolution's input gradient is); fastgrad's is the transpose.

    Examples
    --------
    >>> import fastgrad as mx
    >>> y = mx.npx.deconvolution(mx.np.ones((1, 1, 3, 3)), mx.np.ones((1, 2, 2, 2)),
    ...                          kernel=(2, 2), stride=(2, 2), num_filter=2)
    >>> y.shape
    (1, 2, 6, 6)
    """
    if layout in ("NWC", "NHWC", "NDHWC"):      # Note [Channels-last layouts]
        return F.moveaxis(deconvolution(
            F.moveaxis(data, -1, 1), F.moveaxis(weight, -1, 1), bias, kernel=kernel,
            stride=stride, dilate=dilate, pad=pad, adj=adj, target_shape=target_shape,
            num_filter=num_filter, num_group=num_group, no_bias=no_bias), 1, -1)
    if layout not in (None, "NCW", "NCHW", "NCDHW"):
        raise NotImplementedError("npx.deconvolution: unknown layout %r (NCW, NCHW, NCDHW, "
                                  "NWC, NHWC, NDHWC)" % (layout,))
    if target_shape:
        raise NotImplementedError("npx.deconvolution: target_shape is not supported; give pad "
                                  "and adj")
    dshape, wshape = _shape(data), _shape(weight)
    n = len(dshape) - 2
    if n not in (1, 2, 3) or len(wshape) != n + 2:
        raise ValueError("npx.deconvolution: data %s and weight %s must be 1-D, 2-D or 3-D "
                         "alike (NCW, NCHW, NCDHW)" % (dshape, wshape))
    if dshape[1] != wshape[0]:
        raise ValueError("npx.deconvolution: data has %d channels, the weight expects %d"
                         % (dshape[1], wshape[0]))
    g = int(num_group)
    if num_filter is not None and int(num_filter) != wshape[1] * g:
        raise ValueError("npx.deconvolution: num_filter=%d but the weight makes %d channels"
                         % (num_filter, wshape[1] * g))
    if g != 1:
        return grouped("deconvolution", deconvolution, data, weight, bias, g, no_bias,
                       kernel=kernel, stride=stride, dilate=dilate, pad=pad, adj=adj,
                       no_bias=True)
    kernel = _tuple("deconvolution", "kernel", kernel, n, tuple(wshape[2:]))
    if kernel != tuple(wshape[2:]):
        raise ValueError("npx.deconvolution: kernel=%s does not match the weight's shape %s"
                         % (kernel, wshape))
    stride = _tuple("deconvolution", "stride", stride, n, (1,) * n)
    dilate = _tuple("deconvolution", "dilate", dilate, n, (1,) * n)
    pad = _tuple("deconvolution", "pad", pad, n, (0,) * n)
    adj = _tuple("deconvolution", "adj", adj, n, (0,) * n)
    size = tuple((dshape[2 + i] - 1) * stride[i] - 2 * pad[i] + dilate[i] * (kernel[i] - 1) + 1
                 + adj[i] for i in range(n))
    if n == 1:
        out = _P["conv2d_input_grad"](F.expand_dims(data, 2), F.expand_dims(weight, 2),
                                      (1, stride[0]), (0, pad[0]), (1, dilate[0]),
                                      (1, size[0]))
        out = F.squeeze(out, 2)
    elif n == 2:
        out = _P["conv2d_input_grad"](data, weight, stride, pad, dilate, size)
    else:
        out = _deconv3d(data, weight, stride, pad, dilate, size)
    return _add_bias(out, bias, no_bias)


def group_norm_per_group(data, gamma, beta, num_groups=1, eps=1e-5, output_mean_var=False):
    """MXNet 1.x's ``GroupNorm``: like ``npx.group_norm`` but with one ``gamma`` and ``beta``
    per group (shape ``(num_groups,)``), as MXNet 1.9.1's operator has them."""
    shape = _shape(data)
    if len(shape) < 2 or shape[1] % int(num_groups):
        raise ValueError("GroupNorm: data of shape %s does not split its channels (axis 1) into "
                         "num_groups=%d groups" % (shape, num_groups))
    g = int(num_groups)
    for what, p in (("gamma", gamma), ("beta", beta)):
        if _shape(p) != (g,):
            raise ValueError("GroupNorm: %s has shape %s, expected (num_groups,) = (%d,)"
                             % (what, _shape(p), g))
    grouped = F.reshape(data, (shape[0], g, -1))
    mean = F.mean(grouped, axis=2, keepdims=True)
    var = F.var(grouped, axis=2, keepdims=True)
    out = (grouped - mean) / F.sqrt(var + eps) * F.reshape(gamma, (1, g, 1)) \
        + F.reshape(beta, (1, g, 1))
    out = F.reshape(out, shape)
    if output_mean_var:
        return out, F.reshape(mean, (shape[0], g)), F.reshape(F.sqrt(var + eps), (shape[0], g))
    return out


def reshape_like(lhs, rhs, lhs_begin=None, lhs_end=None, rhs_begin=None, rhs_end=None):
    """``lhs`` with axes ``lhs_begin:lhs_end`` of its shape replaced by axes
    ``rhs_begin:rhs_end`` of ``rhs``'s (the whole shapes by default; ``npx.reshape_like``)."""
    ls, rs = _shape(lhs), _shape(rhs)
    lb, le = (0 if lhs_begin is None else lhs_begin), (len(ls) if lhs_end is None else lhs_end)
    rb, re = (0 if rhs_begin is None else rhs_begin), (len(rs) if rhs_end is None else rhs_end)
    shape = tuple(ls[:lb]) + tuple(rs[rb:re]) + tuple(ls[le:])
    if int(_onp.prod(shape)) != int(_onp.prod(ls)):
        raise ValueError("npx.reshape_like: cannot reshape %s to %s" % (ls, shape))
    return F.reshape(lhs, shape)


def sequence_mask(data, sequence_length=None, use_sequence_length=False, value=0.0, axis=0):
    """``data`` with the steps at or beyond each sequence's length set to ``value``
    (``npx.sequence_mask``); ``axis`` (0 or 1) is the time axis, the other of the first two
    the batch. Differentiable in ``data`` (zero gradient where masked)."""
    if not use_sequence_length:
        return F.copy(data) if isinstance(data, ndarray) else _wrap(_onp.array(data))
    if sequence_length is None:
        raise TypeError("npx.sequence_mask() needs sequence_length when use_sequence_length "
                        "is True")
    if axis not in (0, 1):
        raise ValueError("npx.sequence_mask: axis must be 0 or 1, got %r" % (axis,))
    shape = _shape(data)
    lengths = _onp.asarray(unwrap(sequence_length)).astype(_onp.int64)
    steps = _onp.arange(shape[axis])
    keep = steps[:, None] < lengths[None, :] if axis == 0 else \
        lengths[:, None] > steps[None, :]
    keep = keep.reshape(keep.shape + (1,) * (len(shape) - 2))
    return F.where(_onp.broadcast_to(keep, shape), data, float(value))


def gather_nd(data, indices):
    """``data[indices[0], indices[1], ...]``: the first ``len(indices)`` axes indexed by the
    rows of ``indices`` (``npx.gather_nd``); differentiable in ``data``."""
    idx = _onp.asarray(unwrap(indices)).astype(_onp.int64)
    return data[tuple(idx)]


def scatter_nd(data, indices, shape):
    """An array of ``shape``, zero except at ``indices`` (rows as in ``gather_nd``), where
    it holds ``data`` (``nd.scatter_nd``); repeated indices add up. Differentiable in
    ``data``."""
    idx = _onp.asarray(unwrap(indices)).astype(_onp.int64)
    data = data if isinstance(data, ndarray) else _wrap(_onp.asarray(data))
    return _P["scatter_add"](data, tuple(idx), tuple(int(s) for s in shape))


__all__ = ["deconvolution", "reshape_like", "sequence_mask", "gather_nd", "scatter_nd"]
COMPOSITES = tuple(__all__)
