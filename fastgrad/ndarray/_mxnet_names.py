"""Legacy ``mx.nd`` operators under MXNet 1.x's names and arguments.

Most are a table op under another name; comparisons and logical operators return arrays of
the input's dtype (``1.0``/``0.0``), as MXNet's ``nd`` does, and carry no gradient.
"""

import numpy as _onp

from fastgrad._core._array import unwrap as _unwrap
from fastgrad._api import _functions as F
from fastgrad import numpy_extension as _npx
from fastgrad._api import _mxnet_slicing as _S
from fastgrad._api import _rnn
from fastgrad.base import MXNetValueError
from fastgrad.ndarray import random as _random

__all__ = [
    "reshape", "split", "SliceChannel", "concat", "Concat", "concatenate", "stack", "slice_axis",
    "slice", "slice_like", "flatten", "Flatten", "radians", "degrees", "rcbrt", "squeeze",
    "moveaxis", "nansum", "nanprod", "pad", "hard_sigmoid", "softsign", "equal", "not_equal",
    "greater", "greater_equal", "lesser", "lesser_equal", "broadcast_equal", "broadcast_not_equal",
    "broadcast_greater", "broadcast_greater_equal", "broadcast_lesser",
    "broadcast_lesser_equal", "logical_and", "logical_or", "logical_xor", "logical_not",
    "uniform", "normal", "random_uniform", "random_normal", "random_randint",
    "RNN", "SequenceMask", "SequenceLast", "SequenceReverse",
]


def reshape(data, shape=None, reverse=False, **kwargs):
    """Reshape with MXNet's codes ``0, -1, -2, -3, -4`` and ``reverse`` (``nd.reshape``)."""
    return _S.nd_reshape(data, shape, reverse)


def split(data, num_outputs, axis=1, squeeze_axis=False, **kwargs):
    """Split into ``num_outputs`` equal parts along ``axis`` (default 1, as in MXNet)."""
    return _S.split(data, num_outputs, axis, squeeze_axis)


SliceChannel = split


def concat(*data, dim=1, num_args=None, **kwargs):
    """Join arrays along ``dim`` (default 1, as in MXNet)."""
    return _S.concat(*data, dim=dim, num_args=num_args)


Concat = concat


def stack(*data, axis=0, num_args=None, **kwargs):
    """Join arrays along a new ``axis`` (``nd.stack(a, b, axis=0)``, as MXNet: the arrays
    are positional; a single list of arrays is accepted too, as NumPy's ``stack``)."""
    arrays = list(data[0]) if len(data) == 1 and isinstance(data[0], (list, tuple)) \
        else list(data)
    if num_args is not None and num_args != len(arrays):
        raise MXNetValueError("nd.stack: num_args=%d but %d arrays were given"
                              % (num_args, len(arrays)))
    return F.stack(arrays, axis=axis)


def concatenate(arrays, axis=0, always_copy=True):
    """Join a list of arrays along ``axis`` (``nd.concatenate``)."""
    return F.concatenate(list(arrays), axis=axis)


def slice_axis(data, axis, begin, end):
    """Elements ``begin:end`` along ``axis`` (``nd.slice_axis``)."""
    return _S.slice_axis(data, axis, begin, end, op="nd.slice_axis")


def slice(data, begin, end, step=()):
    """``data[begin[0]:end[0]:step[0], ...]`` over the leading ``len(begin)`` axes
    (``nd.slice``); ``None`` entries take the default, out-of-range bounds are clipped."""
    return _S.slice_begin_end(data, begin, end, step, op="nd.slice")


def slice_like(data, shape_like, axes=()):
    """``data`` cut to the shape of ``shape_like`` along ``axes`` (``nd.slice_like``)."""
    return _S.slice_like(data, shape_like, axes, op="nd.slice_like")


flatten = Flatten = _S.flatten
radians, degrees, rcbrt = F.radians, F.degrees, _npx._P["rcbrt"]
squeeze, moveaxis = F.squeeze, F.moveaxis
hard_sigmoid, softsign = _npx.hard_sigmoid, _npx.softsign


def _full_reduction(x, axis, keepdims):
    return F.reshape(x, (1,)) if axis is None and not keepdims else x


def nansum(data, axis=None, keepdims=False, exclude=False, **kwargs):
    """Sum treating NaN as zero; a full reduction has shape ``(1,)``."""
    return _full_reduction(F.nansum(data, axis=axis, keepdims=keepdims), axis, keepdims)


def nanprod(data, axis=None, keepdims=False, exclude=False, **kwargs):
    """Product treating NaN as one; a full reduction has shape ``(1,)``."""
    return _full_reduction(F.nanprod(data, axis=axis, keepdims=keepdims), axis, keepdims)


def pad(data, mode="constant", pad_width=None, constant_value=0.0, **kwargs):
    """MXNet's ``nd.pad``: ``pad_width`` is flat, two values per axis."""
    if pad_width is None:
        raise TypeError("nd.pad: missing pad_width")
    flat = [int(w) for w in pad_width]
    if len(flat) != 2 * _onp.ndim(_unwrap(data)):
        raise MXNetValueError("nd.pad: pad_width needs two values per axis (%d), got %d"
                              % (2 * _onp.ndim(_unwrap(data)), len(flat)))
    return F.pad(data, [flat[i:i + 2] for i in range(0, len(flat), 2)], mode=mode,
                 constant_values=constant_value)


def _as_dtype_of(fn, name):
    def compare(lhs, rhs=None):
        out = fn(lhs) if rhs is None else fn(lhs, rhs)
        ref = lhs if hasattr(lhs, "dtype") else rhs
        return F.astype(out, ref.dtype) if hasattr(ref, "dtype") else out
    compare.__name__ = name
    compare.__doc__ = ("``%s`` as MXNet's ``nd`` computes it: ``1``/``0`` in the input's dtype."
                       % name)
    return compare


equal = broadcast_equal = _as_dtype_of(F.equal, "equal")
not_equal = broadcast_not_equal = _as_dtype_of(F.not_equal, "not_equal")
greater = broadcast_greater = _as_dtype_of(F.greater, "greater")
greater_equal = broadcast_greater_equal = _as_dtype_of(F.greater_equal, "greater_equal")
lesser = broadcast_lesser = _as_dtype_of(F.less, "lesser")
lesser_equal = broadcast_lesser_equal = _as_dtype_of(F.less_equal, "lesser_equal")
logical_and = _as_dtype_of(F.logical_and, "logical_and")
logical_or = _as_dtype_of(F.logical_or, "logical_or")
logical_xor = _as_dtype_of(F.logical_xor, "logical_xor")
logical_not = _as_dtype_of(F.logical_not, "logical_not")


def uniform(low=0, high=1, shape=(), dtype=None, ctx=None, out=None, **kwargs):
    """``nd.uniform``/``nd.random_uniform``: samples from ``[low, high)`` (float32)."""
    return _random.uniform(low, high, shape=shape, dtype=dtype, ctx=ctx, out=out)


def normal(loc=0, scale=1, shape=(), dtype=None, ctx=None, out=None, **kwargs):
    """``nd.normal``/``nd.random_normal``: normal samples (float32)."""
    return _random.normal(loc, scale, shape=shape, dtype=dtype, ctx=ctx, out=out)


def random_randint(low, high, shape=(), dtype=None, ctx=None, out=None, **kwargs):
    """``nd.random_randint``: integers from ``[low, high)`` (int32)."""
    return _random.randint(low, high, shape=shape, dtype=dtype, ctx=ctx, out=out)


random_uniform, random_normal = uniform, normal


def rnn_input_names(mode, use_sequence_length):
    """The inputs of MXNet's ``RNN`` operator in order: which of them exist depends on the
    mode and on ``use_sequence_length`` (as in MXNet's operator registry)."""
    return (["data", "parameters", "state"] + (["state_cell"] if mode == "lstm" else []) +
            (["sequence_length"] if use_sequence_length else []))


def RNN(*inputs, **kwargs):
    """MXNet 1.x's fused recurrent operator (``nd.RNN``): ``npx.rnn`` with its inputs
    ``data, parameters, state[, state_cell][, sequence_length]`` by position (the optional
    ones present by ``mode`` and ``use_sequence_length``) or by name."""
    kwargs.pop("name", None)
    kwargs.pop("out", None)
    names = rnn_input_names(kwargs.get("mode"), kwargs.get("use_sequence_length", False))
    if len(inputs) > len(names):
        raise TypeError("nd.RNN: mode=%r takes at most %d inputs (%s), %d given"
                        % (kwargs.get("mode"), len(names), ", ".join(names), len(inputs)))
    for n, x in zip(names, inputs):
        if n in kwargs:
            raise TypeError("nd.RNN got multiple values for input %r" % n)
        kwargs[n] = x
    return _npx.rnn(**kwargs)


def SequenceMask(data, sequence_length=None, use_sequence_length=False, value=0.0, axis=0,
                 **kwargs):
    """Steps at or past each sequence's length set to ``value`` (``nd.SequenceMask``)."""
    return _npx.sequence_mask(data, sequence_length, use_sequence_length, value, axis)


def SequenceLast(data, sequence_length=None, use_sequence_length=False, axis=0, **kwargs):
    """The last valid step of each sequence (``nd.SequenceLast``)."""
    return _rnn.sequence_last(data, sequence_length, use_sequence_length, axis)


def SequenceReverse(data, sequence_length=None, use_sequence_length=False, axis=0, **kwargs):
    """Each sequence's valid steps reversed (``nd.SequenceReverse``; time is axis 0)."""
    return _rnn.sequence_reverse(data, sequence_length, use_sequence_length, axis)
