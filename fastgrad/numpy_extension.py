"""Neural-network operations in MXNet's ``npx`` names (``fastgrad.npx``).

Ops here are compositions of the table's primitives (or primitives themselves), so they are
differentiable to any order.
"""

import numpy as _onp

from fastgrad import _functions as F
from fastgrad._registry import REGISTRY as _P
from fastgrad._state import is_training
from fastgrad.numpy import random as _random
from fastgrad._array import ndarray, unwrap, _wrap

relu = _P["relu"]
sigmoid = _P["sigmoid"]


def softmax(data, axis=-1, length=None, temperature=None, use_length=False, dtype=None):
    """Softmax along ``axis``, computed stably (the maximum is subtracted first)."""
    if temperature is not None and temperature != 1.0:
        data = data / temperature
    shifted = data - _onp.max(unwrap(data), axis=axis, keepdims=True)
    e = F.exp(shifted)
    return e / F.sum(e, axis=axis, keepdims=True)


def log_softmax(data, axis=-1, length=None, temperature=None, use_length=False, dtype=None):
    """Log of softmax along ``axis``, computed stably (log-sum-exp)."""
    if temperature is not None and temperature != 1.0:
        data = data / temperature
    shifted = data - _onp.max(unwrap(data), axis=axis, keepdims=True)
    return shifted - F.log(F.sum(F.exp(shifted), axis=axis, keepdims=True))


def activation(data, act_type="relu"):
    """``relu``, ``sigmoid``, ``tanh``, ``softrelu`` or ``softsign`` of ``data``."""
    if act_type == "relu":
        return relu(data)
    if act_type == "sigmoid":
        return sigmoid(data)
    if act_type == "tanh":
        return F.tanh(data)
    if act_type == "softrelu":
        return F.log(1 + F.exp(-F.abs(data))) + relu(data)
    if act_type == "softsign":
        return data / (1 + F.abs(data))
    raise ValueError("npx.activation: unknown act_type %r (relu, sigmoid, tanh, softrelu, "
                     "softsign)" % (act_type,))


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


def fully_connected(x, weight, bias=None, num_hidden=None, no_bias=False, flatten=True):
    """``x @ weight.T + bias`` (MXNet's FullyConnected; ``weight`` is (num_hidden, in))."""
    if flatten and _onp.ndim(unwrap(x)) > 2:
        x = F.reshape(x, (_onp.shape(unwrap(x))[0], -1))
    out = F.matmul(x, F.transpose(weight))
    if not no_bias and bias is not None:
        out = out + bias
    return out


def pick(data, index, axis=-1, keepdims=False, mode="clip"):
    """``data`` at ``index`` along ``axis`` (e.g. the score of each label)."""
    idx = _onp.asarray(unwrap(index)).astype(_onp.int64)
    n = _onp.shape(unwrap(data))[axis]
    idx = _onp.clip(idx, 0, n - 1) if mode == "clip" else idx % n
    idx = _onp.expand_dims(idx, axis)
    out = data[_take_along_key(_onp.shape(unwrap(data)), idx, axis)]
    return out if keepdims else F.squeeze(out, axis)


def _take_along_key(shape, idx, axis):
    axis = axis % len(shape)
    key = []
    for d in range(len(shape)):
        if d == axis:
            key.append(idx)
        else:
            s = [1] * len(shape)
            s[d] = shape[d]
            key.append(_onp.arange(shape[d]).reshape(s))
    return tuple(key)


def one_hot(indices, depth, on_value=1.0, off_value=0.0, dtype="float32"):
    """One-hot encoding of integer ``indices`` (not differentiable)."""
    idx = _onp.asarray(unwrap(indices)).astype(_onp.int64)
    out = _onp.full(idx.shape + (depth,), off_value, dtype=dtype)
    _onp.put_along_axis(out, idx[..., None], on_value, axis=-1)
    return _wrap(out)


def softmax_cross_entropy(data, label, axis=-1, sparse_label=True):
    """Mean over the batch of ``-log softmax(data)[label]``."""
    logp = log_softmax(data, axis=axis)
    if sparse_label:
        nll = -pick(logp, label, axis=axis)
    else:
        nll = -F.sum(logp * label, axis=axis)
    return F.mean(nll)


def seed(s):
    _random.seed(s)


def set_np(shape=True, array=True, dtype=False):
    """Accepted for MXNet compatibility: fastgrad always has NumPy semantics."""


def reset_np():
    """Accepted for MXNet compatibility."""


def is_np_array():
    return True


def cpu(device_id=0):
    from fastgrad.context import cpu as _cpu
    return _cpu(device_id)


__all__ = ["relu", "sigmoid", "softmax", "log_softmax", "activation", "dropout",
           "fully_connected", "pick", "one_hot", "softmax_cross_entropy", "seed", "set_np",
           "reset_np", "is_np_array"]
