"""MXNet's shape operators that NumPy spells differently: ``reshape`` with MXNet's codes,
``slice_axis``, ``slice_like``, ``split``/``concat`` with MXNet's arguments, ``flatten``.

Each resolves its MXNet arguments to one table op (``reshape``, ``getitem``, ``split``,
``concatenate``), so it is recorded and differentiable like that op.
"""

from math import prod as _prod

import numpy as _np

from fastgrad._core._array import unwrap as _unwrap
from fastgrad._api import _functions as F
from fastgrad._api._reshape_codes import legacy_shape, npx_shape
from fastgrad.base import MXNetValueError

__all__ = ["nd_reshape", "npx_reshape", "slice_axis", "slice_begin_end", "begin_end_key",
           "slice_like", "split", "concat", "flatten"]


def _shape_of(a):
    return _np.shape(_unwrap(a))


def nd_reshape(data, shape=None, reverse=False, op="nd.reshape"):
    """``data`` reshaped with MXNet 1.x's codes (``0, -1, -2, -3, -4``; Note [Reshape codes])."""
    if shape is None:
        raise TypeError("%s: missing the target shape" % op)
    return F.reshape(data, legacy_shape(_shape_of(data), shape, reverse, op))


def npx_reshape(a, newshape, reverse=False, order="C"):
    """``a`` reshaped with MXNet 2's codes (``-1`` to ``-6``; Note [Reshape codes])."""
    if order != "C":
        raise ValueError("npx.reshape: only order='C' is supported, got %r" % (order,))
    return F.reshape(a, npx_shape(_shape_of(a), newshape, reverse))


def _axis(axis, ndim, op):
    if not -ndim <= axis < ndim:
        raise MXNetValueError("%s: axis %d is out of range for an array with %d dimensions"
                              % (op, axis, ndim))
    return axis % ndim


def slice_axis(data, axis, begin, end, op="slice_axis"):
    """Elements ``begin:end`` along ``axis`` (``end=None``: to the end; negatives count from
    the end), as MXNet's ``slice_axis``; an empty or out-of-range slice is an error."""
    shape = _shape_of(data)
    axis = _axis(int(axis), len(shape), op)
    n = shape[axis]
    b = int(begin) + n if int(begin) < 0 else int(begin)
    e = n if end is None else (int(end) + n if int(end) < 0 else int(end))
    if not 0 <= b < e <= n:
        raise MXNetValueError("%s: begin=%r, end=%r select nothing from axis %d of size %d"
                              % (op, begin, end, axis, n))
    return data[(slice(None),) * axis + (slice(b, e),)]


def slice_begin_end(data, begin, end, step=(), op="slice"):
    """``data[b0:e0:s0, b1:e1:s1, ...]`` for the leading ``len(begin)`` axes, as MXNet's
    ``slice``: ``None`` entries take the default, negatives count from the end and bounds
    outside the axis are clipped (what MXNet 1.9.1 gives, checked), an empty range is empty."""
    key = begin_end_key(begin, end, step, op)
    ndim = len(_shape_of(data))
    if len(key) > ndim:
        raise MXNetValueError("%s: begin %r has more entries than data has dimensions (%d)"
                              % (op, tuple(begin), ndim))
    return data[key]


def begin_end_key(begin, end, step=(), op="slice"):
    """The NumPy index (a tuple of slices) of MXNet's ``slice(begin, end, step)``."""
    begin, end = tuple(begin), tuple(end)
    step = tuple(step) if step is not None else ()
    if len(begin) != len(end) or (step and len(step) != len(begin)):
        raise MXNetValueError("%s: begin %r, end %r and step %r must have the same length"
                              % (op, begin, end, step))
    steps = step or (None,) * len(begin)
    if any(s == 0 for s in steps):
        raise MXNetValueError("%s: step %r has a zero entry" % (op, step))

    def bound(v):
        return None if v is None else int(v)
    return tuple(slice(bound(b), bound(e), bound(s)) for b, e, s in zip(begin, end, steps))


def slice_like(data, shape_like, axes=(), op="slice_like"):
    """The leading part of ``data`` with the shape of ``shape_like`` along ``axes`` (all axes
    when empty), as MXNet's ``slice_like``."""
    shape, like = _shape_of(data), _shape_of(shape_like)
    if not axes:
        if len(like) != len(shape):
            raise MXNetValueError("%s: data has %d dimensions but shape_like has %d; pass axes="
                                  % (op, len(shape), len(like)))
        axes = range(len(shape))
    elif isinstance(axes, int):
        axes = (axes,)
    key = [slice(None)] * len(shape)
    for ax in axes:
        ax = _axis(int(ax), len(shape), op)
        if ax >= len(like):
            raise MXNetValueError("%s: axis %d is out of range for shape_like of shape %s"
                                  % (op, ax, like))
        if like[ax] > shape[ax]:
            raise MXNetValueError("%s: shape_like is larger than data along axis %d (%d > %d)"
                                  % (op, ax, like[ax], shape[ax]))
        key[ax] = slice(0, like[ax])
    return data[tuple(key)]


def split(data, num_outputs, axis=1, squeeze_axis=False, op="nd.split"):
    """``num_outputs`` equal parts along ``axis`` (MXNet's ``split``/``SliceChannel``): a list,
    or the array itself when ``num_outputs`` is 1; ``squeeze_axis`` drops the split axis,
    which must then have size ``num_outputs``."""
    shape = _shape_of(data)
    axis = _axis(int(axis), len(shape), op)
    num_outputs = int(num_outputs)
    if num_outputs < 1 or shape[axis] % num_outputs:
        raise MXNetValueError("%s: cannot split axis %d of size %d into %d equal parts"
                              % (op, axis, shape[axis], num_outputs))
    if squeeze_axis and shape[axis] != num_outputs:
        raise MXNetValueError("%s: squeeze_axis needs axis %d to have size num_outputs=%d, "
                              "not %d" % (op, axis, num_outputs, shape[axis]))
    parts = F.split(data, num_outputs, axis=axis)
    if squeeze_axis:
        parts = [F.squeeze(p, axis=axis) for p in parts]
    parts = list(parts)
    return parts[0] if num_outputs == 1 else parts


def concat(*data, dim=1, num_args=None, op="nd.concat"):
    """Join arrays along ``dim`` (MXNet's ``concat``; note MXNet's default ``dim=1``)."""
    if len(data) == 1 and isinstance(data[0], (list, tuple)):
        data = tuple(data[0])
    if not data:
        raise MXNetValueError("%s: needs at least one array" % op)
    if num_args is not None and int(num_args) != len(data):
        raise MXNetValueError("%s: num_args=%d but %d arrays were given"
                              % (op, num_args, len(data)))
    return F.concatenate(list(data), axis=dim)


def flatten(data):
    """Collapse every axis but the first: shape ``(d0, d1*...*dk)`` (MXNet's ``flatten``)."""
    shape = _shape_of(data)
    if not shape:
        return F.reshape(data, (1, 1))
    return F.reshape(data, (shape[0], _prod(shape[1:])))


