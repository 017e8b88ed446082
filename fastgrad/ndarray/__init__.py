"""Legacy NDArray names used by MXNet autograd code (``fastgrad.nd``).

``NDArray`` is a fastgrad array whose full reductions have shape ``(1,)`` (MXNet 1.x
semantics) and whose repr is MXNet's. Everything else is ``fastgrad.np``.
"""

import numpy as _onp

from fastgrad._core._array import ndarray as _base, _wrap, unwrap
from fastgrad._api import _functions as F
from fastgrad._api._linalg import linalg as _np_linalg
from fastgrad import numpy_extension as _npx
from fastgrad._api import _npx_composites
from fastgrad.ndarray import random  # noqa: F401
from fastgrad.ndarray import image  # noqa: F401
from fastgrad.ndarray import sparse  # noqa: F401
from fastgrad.ndarray.sparse import _STORAGE_TYPE_STR_TO_ID, _STORAGE_TYPE_ID_TO_STR  # noqa: F401
from fastgrad._api._update_ops import (sgd_update, sgd_mom_update, nag_mom_update,  # noqa: F401
                                       adam_update, adamw_update, rmsprop_update,
                                       rmspropalex_update, signsgd_update, signum_update,
                                       lamb_update_phase1, lamb_update_phase2, ftrl_update)
from fastgrad._api import _mxnet_slicing as _slicing
from fastgrad._api._ctc import CTCLoss  # noqa: F401
from fastgrad._api import _params_format
from fastgrad.context import check_device


class NDArray(_base):
    """A legacy-API array (``mx.nd.NDArray``)."""

    __slots__ = ()

    def __repr__(self):
        return "\n%s\n<NDArray %s @cpu(0)>" % (unwrap(self), "x".join(map(str, self.shape)))

    # print(x) shows the same text as repr(x), as MXNet's NDArray (which has no __str__).
    __str__ = __repr__

    def asscalar(self):
        if self.size != 1:
            raise ValueError("asscalar: the array has %d elements, not 1" % self.size)
        return unwrap(self).reshape(()).item()

    # Reductions as methods follow nd's convention too: a full reduction has shape (1,).
    def sum(self, axis=None, keepdims=False, **kwargs):
        return sum(self, axis=axis, keepdims=keepdims, **kwargs)

    def mean(self, axis=None, keepdims=False, **kwargs):
        return mean(self, axis=axis, keepdims=keepdims, **kwargs)

    def max(self, axis=None, keepdims=False, **kwargs):
        return max(self, axis=axis, keepdims=keepdims, **kwargs)

    def min(self, axis=None, keepdims=False, **kwargs):
        return min(self, axis=axis, keepdims=keepdims, **kwargs)

    def prod(self, axis=None, keepdims=False, **kwargs):
        return _full_reduction(F.prod(self, axis=axis, keepdims=keepdims), axis, keepdims)

    def norm(self, ord=None, axis=None, keepdims=False):
        return _full_reduction(_np_linalg.norm(self, ord=ord, axis=axis, keepdims=keepdims), axis,
                               keepdims)

    # MXNet 1.x's shape methods (fastgrad._api._mxnet_slicing).
    def reshape(self, *shape, **kwargs):
        """Reshape with MXNet's codes ``0, -1, -2, -3, -4``; ``reverse=True`` reads right to
        left (Note [Reshape codes])."""
        reverse = kwargs.pop("reverse", False)
        if "shape" in kwargs:
            shape = kwargs.pop("shape")
        elif len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        if kwargs:
            raise TypeError("NDArray.reshape: unexpected argument(s) %s" % ", ".join(kwargs))
        return _slicing.nd_reshape(self, shape, reverse, op="NDArray.reshape")

    def squeeze(self, axis=None, inplace=False):
        """Drop axes of length one (all, or ``axis``). MXNet's ``inplace=True`` returns a view
        sharing this array's memory; the values and shape are the same either way."""
        return _base.squeeze(self, axis=axis)

    def flatten(self, inplace=False):
        """Collapse every axis but the first (MXNet's ``flatten``, not NumPy's ``ravel``)."""
        return _slicing.flatten(self)

    def split(self, num_outputs, axis=1, squeeze_axis=False):
        return _slicing.split(self, num_outputs, axis, squeeze_axis, op="NDArray.split")

    def slice_axis(self, axis, begin, end):
        return _slicing.slice_axis(self, axis, begin, end, op="NDArray.slice_axis")

    def slice(self, begin, end, step=()):
        return _slicing.slice_begin_end(self, begin, end, step, op="NDArray.slice")


def array(source_array, ctx=None, dtype=None):
    """An NDArray: float32 unless ``dtype`` is given or ``source_array`` is a fastgrad array
    (then its dtype), as in MXNet."""
    check_device(ctx)
    if dtype is None:
        dtype = source_array.dtype if isinstance(source_array, _base) else _onp.float32
    return _wrap(_onp.array(unwrap(source_array), dtype=dtype), NDArray)


def _shape(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


def zeros(shape, ctx=None, dtype=None, **kwargs):
    """An NDArray of zeros (``mx.nd.zeros``); float32 unless ``dtype`` is given."""
    check_device(ctx)
    return _wrap(_onp.zeros(_shape(shape), dtype=dtype or _onp.float32), NDArray)


def ones(shape, ctx=None, dtype=None, **kwargs):
    """An NDArray of ones (``mx.nd.ones``); float32 unless ``dtype`` is given."""
    check_device(ctx)
    return _wrap(_onp.ones(_shape(shape), dtype=dtype or _onp.float32), NDArray)


def full(shape, val, ctx=None, dtype=None, **kwargs):
    """An NDArray filled with ``val`` (``mx.nd.full``); float32 unless ``dtype`` is given."""
    check_device(ctx)
    return _wrap(_onp.full(_shape(shape), val, dtype=dtype or _onp.float32), NDArray)


def empty(shape, ctx=None, dtype=None):
    """An uninitialized NDArray (``mx.nd.empty``); float32 unless ``dtype`` is given."""
    check_device(ctx)
    return _wrap(_onp.empty(_shape(shape), dtype=dtype or _onp.float32), NDArray)


def arange(start, stop=None, step=1.0, repeat=1, ctx=None, dtype=None):
    """Evenly spaced values in ``[start, stop)``, each repeated ``repeat`` times
    (``mx.nd.arange``)."""
    check_device(ctx)
    return _wrap(_onp.repeat(_onp.arange(start, stop, step, dtype=dtype or _onp.float32),
                             repeat), NDArray)


def zeros_like(data):
    """An NDArray of zeros with the shape and dtype of ``data`` (``mx.nd.zeros_like``)."""
    return _wrap(_onp.zeros_like(unwrap(data)), NDArray)


def ones_like(data):
    """An NDArray of ones with the shape and dtype of ``data`` (``mx.nd.ones_like``)."""
    return _wrap(_onp.ones_like(unwrap(data)), NDArray)


def _full_reduction(x, axis, keepdims):
    if axis is None and not keepdims:
        return F.reshape(x, (1,))
    return x


def sum(data, axis=None, keepdims=False, exclude=False, **kwargs):
    """Sum over ``axis``; a full reduction has shape ``(1,)``."""
    axis = _exclude(data, axis, exclude)
    return _full_reduction(F.sum(data, axis=axis, keepdims=keepdims), axis, keepdims)


def mean(data, axis=None, keepdims=False, exclude=False, **kwargs):
    """Mean over ``axis``; a full reduction has shape ``(1,)``."""
    axis = _exclude(data, axis, exclude)
    return _full_reduction(F.mean(data, axis=axis, keepdims=keepdims), axis, keepdims)


def max(data, axis=None, keepdims=False, exclude=False, **kwargs):
    """Maximum over ``axis``; a full reduction has shape ``(1,)``."""
    axis = _exclude(data, axis, exclude)
    return _full_reduction(F.max(data, axis=axis, keepdims=keepdims), axis, keepdims)


def min(data, axis=None, keepdims=False, exclude=False, **kwargs):
    """Minimum over ``axis``; a full reduction has shape ``(1,)``."""
    axis = _exclude(data, axis, exclude)
    return _full_reduction(F.min(data, axis=axis, keepdims=keepdims), axis, keepdims)


def _exclude(data, axis, exclude):
    if not exclude or axis is None:
        return axis
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = _onp.ndim(unwrap(data))
    bad = [a for a in axes if not -nd <= a < nd]
    if bad:     # MXNet refuses them too; wrapping would keep another axis silently
        raise ValueError("exclude=True: axis %s is out of range for data with %d dimensions"
                         % (bad[0] if len(bad) == 1 else tuple(bad), nd))
    axes = {a % nd for a in axes}
    return tuple(a for a in range(nd) if a not in axes)


def dot(lhs, rhs, transpose_a=False, transpose_b=False, forward_stype=None):
    """Matrix product, optionally of transposes (``nd.dot(a, b, transpose_b=True)``)."""
    if transpose_a:
        lhs = F.transpose(lhs)
    if transpose_b:
        rhs = F.transpose(rhs)
    return F.dot(lhs, rhs)


def elemwise_add(lhs, rhs):
    """``lhs + rhs`` for arrays of the same shape."""
    _same_shape("elemwise_add", lhs, rhs)
    return F.add(lhs, rhs)


def elemwise_sub(lhs, rhs):
    """``lhs - rhs`` for arrays of the same shape (no broadcasting), differentiable
    (``mx.nd.elemwise_sub``)."""
    _same_shape("elemwise_sub", lhs, rhs)
    return F.subtract(lhs, rhs)


def elemwise_mul(lhs, rhs):
    """``lhs * rhs`` for arrays of the same shape (no broadcasting), differentiable
    (``mx.nd.elemwise_mul``)."""
    _same_shape("elemwise_mul", lhs, rhs)
    return F.multiply(lhs, rhs)


def elemwise_div(lhs, rhs):
    """``lhs / rhs`` for arrays of the same shape (no broadcasting), differentiable
    (``mx.nd.elemwise_div``)."""
    _same_shape("elemwise_div", lhs, rhs)
    return F.divide(lhs, rhs)


def _same_shape(name, a, b):
    sa, sb = _onp.shape(unwrap(a)), _onp.shape(unwrap(b))
    if sa != sb:
        raise ValueError("nd.%s: the arguments have shapes %s and %s; elemwise ops need equal "
                         "shapes (use broadcast_add or +)" % (name, sa, sb))


def _broadcast_op(fn, name):
    def op(lhs, rhs, out=None, **kwargs):
        # MXNet accepts and ignores attributes these operators do not have (its own
        # test_loss.py calls broadcast_maximum(a, b, axis=1)); the value does not depend on them
        if out is not None:
            raise TypeError("nd.%s: out= is not supported; use the returned array" % name)
        return fn(lhs, rhs)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = "MXNet's ``nd.%s``: NumPy's broadcasting ``%s``, differentiable." % (
        name, fn.__name__)
    return op


broadcast_add = _broadcast_op(F.add, "broadcast_add")
broadcast_sub = _broadcast_op(F.subtract, "broadcast_sub")
broadcast_mul = _broadcast_op(F.multiply, "broadcast_mul")
broadcast_div = _broadcast_op(F.divide, "broadcast_div")
broadcast_maximum = _broadcast_op(F.maximum, "broadcast_maximum")
broadcast_minimum = _broadcast_op(F.minimum, "broadcast_minimum")
add, subtract, multiply, divide = F.add, F.subtract, F.multiply, F.divide
exp, log, sin, cos, tan, tanh = F.exp, F.log, F.sin, F.cos, F.tan, F.tanh
sqrt, square, abs, negative = F.sqrt, F.square, F.abs, F.negative
maximum, minimum, power, reciprocal = F.maximum, F.minimum, F.power, F.reciprocal
sign, floor, ceil = F.sign, F.floor, F.ceil
reshape, transpose, swapaxes, expand_dims = F.reshape, F.transpose, F.swapaxes, F.expand_dims
broadcast_to, clip, concat = F.broadcast_to, F.clip, F.concatenate


def where(condition, x, y, **kwargs):
    """``x`` where ``condition`` is nonzero, else ``y`` (``nd.where``). As in MXNet, a 1-D
    ``condition`` of length ``x.shape[0]`` for a multi-dimensional ``x`` selects whole rows."""
    cshape, xshape = _onp.shape(unwrap(condition)), _onp.shape(unwrap(x))
    if len(cshape) == 1 and len(xshape) > 1 and cshape[0] == xshape[0]:
        condition = F.reshape(condition, cshape + (1,) * (len(xshape) - 1))
    return F.where(condition, x, y)
stack, split = F.stack, F.split
relu, sigmoid = _npx.relu, _npx.sigmoid
softmax, log_softmax, one_hot, pick = _npx.softmax, _npx.log_softmax, _npx.one_hot, _npx.pick


def Activation(data, act_type="relu", name=None, **kwargs):
    """``relu``, ``sigmoid``, ``tanh``, ``softrelu``, ``softsign``, ... of ``data``
    (``nd.Activation``); see ``npx.activation``."""
    return _npx.activation(data, act_type=act_type)


def FullyConnected(data, weight, bias=None, num_hidden=None, no_bias=False, flatten=True,
                   name=None, **kwargs):
    """``data @ weight.T + bias``, flattening ``data`` to 2-D first unless ``flatten=False``,
    differentiable (``mx.nd.FullyConnected``)."""
    return _npx.fully_connected(data, weight, bias, num_hidden, no_bias, flatten)


def identity(data, name=None, **kwargs):
    """A copy of ``data`` (``nd.identity``), differentiable."""
    return F.copy(data)


def Dropout(data, p=0.5, mode="training", axes=(), **kwargs):
    """Dropout that masks and scales only in training mode (``nd.Dropout``)."""
    return _npx.dropout(data, p=p, mode=mode, axes=axes)


def waitall():
    """Accepted for MXNet compatibility (fastgrad computes eagerly)."""


def reset_arrays(*data, num_arrays=None):
    """Set every array of ``data`` to zero in place (``nd.reset_arrays``, which MXNet's
    ``ParameterDict.zero_grad`` uses); ``num_arrays``, when given, must be ``len(data)``."""
    if num_arrays is not None and num_arrays != len(data):
        raise ValueError("nd.reset_arrays: num_arrays=%r but %d arrays were given"
                         % (num_arrays, len(data)))
    for array in data:
        if not isinstance(array, _base):
            raise TypeError("nd.reset_arrays: expected arrays, got %s" % type(array).__name__)
        array[...] = 0


# ---------------------------------------------------------------- more legacy operator names
prod, cumsum, norm = F.prod, F.cumsum, _np_linalg.norm
log1p, expm1, log2, log10, cbrt, rsqrt = F.log1p, F.expm1, F.log2, F.log10, F.cbrt, \
    _npx._P["rsqrt"]
arcsin, arccos, arctan, sinh, cosh = F.arcsin, F.arccos, F.arctan, F.sinh, F.cosh
arcsinh, arccosh, arctanh = F.arcsinh, F.arccosh, F.arctanh
round, rint, trunc, fix = F.round, F.rint, F.trunc, F.fix
flip, tile, repeat, take, diag = F.flip, F.tile, F.repeat, F.take, F.diag
erf, erfinv, smooth_l1, log_softmax, softmin = _npx.erf, _npx.erfinv, _npx.smooth_l1, \
    _npx.log_softmax, _npx.softmin
batch_dot, topk = _npx.batch_dot, _npx.topk
argmax, argmin, argsort, sort = F.argmax, F.argmin, F.argsort, F.sort
ctc_loss = CTCLoss


def Embedding(data, weight, input_dim=None, output_dim=None, dtype="float32",
              sparse_grad=False, name=None, **kwargs):
    """Rows of ``weight`` at the indices ``data`` (``nd.Embedding``): float indices are
    truncated and out-of-range ones clipped, as in MXNet; see ``npx.embedding``."""
    wshape = _onp.shape(unwrap(weight))
    if input_dim is not None and output_dim is not None and \
            wshape != (int(input_dim), int(output_dim)):
        raise ValueError("nd.Embedding: the weight has shape %s, not (input_dim, output_dim) = "
                         "(%d, %d)" % (wshape, input_dim, output_dim))
    return _npx.embedding(data, weight)


def Convolution(data, weight, bias=None, kernel=None, stride=None, dilate=None, pad=None,
                num_filter=None, num_group=1, no_bias=False, layout=None, name=None,
                **kwargs):
    """Convolution of NCW, NCHW or NCDHW data, in ``num_group`` groups
    (``nd.Convolution``); see ``npx.convolution``."""
    return _npx.convolution(data, weight, None if no_bias else bias, kernel=kernel,
                            stride=stride, dilate=dilate, pad=pad, num_filter=num_filter,
                            num_group=num_group, no_bias=no_bias, layout=layout)


def Deconvolution(data, weight, bias=None, kernel=None, stride=None, dilate=None, pad=None,
                  adj=None, target_shape=None, num_filter=None, num_group=1, no_bias=True,
                  layout=None, name=None, **kwargs):
    """Transposed convolution of NCW, NCHW or NCDHW data (``nd.Deconvolution``; no bias
    unless ``no_bias=False``, MXNet's default); see ``npx.deconvolution``."""
    return _npx.deconvolution(data, weight, None if no_bias else bias, kernel=kernel,
                              stride=stride, dilate=dilate, pad=pad, adj=adj,
                              target_shape=target_shape, num_filter=num_filter,
                              num_group=num_group, no_bias=no_bias, layout=layout)


def Pooling(data, kernel=None, pool_type="max", global_pool=False, stride=None, pad=None,
            pooling_convention="valid", count_include_pad=None, layout=None, name=None,
            **kwargs):
    """Max/avg/sum pooling of NCW, NCHW or NCDHW data (``nd.Pooling``); see
    ``npx.pooling``."""
    return _npx.pooling(data, kernel=kernel, stride=stride, pad=pad, pool_type=pool_type,
                        pooling_convention=pooling_convention, global_pool=global_pool,
                        count_include_pad=True if count_include_pad is None
                        else count_include_pad, layout=layout)


def BatchNorm(data, gamma, beta, moving_mean, moving_var, eps=1e-3, momentum=0.9,
              fix_gamma=True, use_global_stats=False, output_mean_var=False, axis=1,
              **kwargs):
    """Batch normalization (``nd.BatchNorm``); see ``npx.batch_norm``."""
    return _npx.batch_norm(data, gamma, beta, moving_mean, moving_var, eps=eps,
                           momentum=momentum, fix_gamma=fix_gamma,
                           use_global_stats=use_global_stats, output_mean_var=output_mean_var,
                           axis=axis)


def LayerNorm(data, gamma, beta, axis=-1, eps=1e-5, output_mean_var=False, name=None,
              **kwargs):
    """Layer normalization (``nd.LayerNorm``); see ``npx.layer_norm``."""
    return _npx.layer_norm(data, gamma, beta, axis=axis, eps=eps,
                           output_mean_var=output_mean_var)


def GroupNorm(data, gamma, beta, num_groups=1, eps=1e-5, output_mean_var=False, name=None,
              **kwargs):
    """MXNet 1.x's group normalization (``nd.GroupNorm``): the channels of NC... ``data``
    split into ``num_groups`` groups, each normalized over its channels and positions, then
    scaled and shifted by its group's ``gamma`` and ``beta`` (shape ``(num_groups,)``)."""
    return _npx_composites.group_norm_per_group(data, gamma, beta, num_groups=num_groups, eps=eps,
                                  output_mean_var=output_mean_var)


def InstanceNorm(data, gamma, beta, eps=1e-3, name=None, **kwargs):
    """Instance normalization (``nd.InstanceNorm``); see ``npx.instance_norm``."""
    return _npx.instance_norm(data, gamma, beta, eps=eps)


def LeakyReLU(data, gamma=None, act_type="leaky", slope=0.25, **kwargs):
    """MXNet's LeakyReLU family (``nd.LeakyReLU``); see ``npx.leaky_relu``."""
    return _npx.leaky_relu(data, gamma, act_type=act_type, slope=slope)


def softmax_cross_entropy(data, label):
    """The softmax cross-entropy summed over the batch, shape ``(1,)`` (MXNet 1.x)."""
    return F.reshape(_npx.softmax_cross_entropy(data, label), (1,))


def SoftmaxOutput(data, label=None, grad_scale=1.0, **kwargs):
    """Softmax along the last axis (``nd.SoftmaxOutput``'s forward).

    MXNet's SoftmaxOutput replaces the gradient by ``softmax - one_hot(label)``; here the
    output is an ordinary softmax, so differentiate a loss such as ``softmax_cross_entropy``
    instead to get that gradient.
    """
    return _npx.softmax(data, axis=-1)


# MXNet 1.x's names and arguments for the rest (reshape codes, split, concat, slice_axis, ...).
from fastgrad.ndarray._mxnet_names import *  # noqa: E402,F401,F403

# MXNet's mx.nd.np / mx.nd.npx (mxnet.ndarray.numpy, .numpy_extension): the NumPy-style
# namespaces, which a hybrid_forward reaches as F.np / F.npx when F is mx.nd.
from fastgrad import numpy as np  # noqa: E402
npx = _npx

# ``mxnet.ndarray.ndarray`` (the module that defines MXNet's NDArray) is this package here.
import sys as _sys  # noqa: E402
_sys.modules[__name__ + ".ndarray"] = _sys.modules[__name__]


def save(fname, data):
    """Save an array, a list of arrays or a dict of str to arrays to ``fname`` in MXNet 1.x's
    ``.params`` format (MXNet's ``nd.load`` reads it; see ``fastgrad/_api/_params_format.py``).
    Scalars and empty arrays need ``npx.save``."""
    _params_format.save(fname, data, numpy_shape=False, what="nd.save")


def load(fname):
    """Load a ``.params`` file written by MXNet or fastgrad: a list of ``NDArray``, or a dict
    when the file names its arrays."""
    return _params_format.wrap_all(_params_format.load(fname), NDArray)


def load_frombuffer(buf):
    """:func:`load` from the bytes of a file."""
    return _params_format.wrap_all(_params_format.loads(buf), NDArray)
