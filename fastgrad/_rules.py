"""Helpers for the derivative formulas of ``_derivatives.py``.

Every helper is written with NumPy functions and operators only. Called on NumPy arrays (an
ordinary backward pass) they run NumPy directly; called on fastgrad arrays (``create_graph``)
NumPy hands each call to fastgrad through ``__array_function__``/``__array_ufunc__``, so the
helper is recorded and can be differentiated again. See Note [Differentiable rules].

Note [Differentiable rules]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
A derivative rule is one implementation that serves both passes: at full speed on NumPy
arrays, and recorded on fastgrad arrays. Every function a rule calls must therefore be an op
of the table itself (with its own rule), which is what makes every op differentiable to any
order. ``tests/test_ops.py`` checks the rules of every op to second order.
"""

import numpy as np

from fastgrad._kernels import normalize_axis


def unreduce(g, shape, axis, keepdims):
    """Broadcast the gradient of a reduction back to the reduced array's ``shape``."""
    if not keepdims and axis is not None:
        axes = normalize_axis(axis, len(shape))
        g = np.reshape(g, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return np.broadcast_to(g, shape)


def reduced_count(shape, axis):
    axes = normalize_axis(axis, len(shape))
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def mean_backward(g, shape, axis, keepdims):
    return unreduce(g, shape, axis, keepdims) / reduced_count(shape, axis)


def minmax_backward(g, x, result, axis, keepdims):
    """Gradient of ``max``/``min``: shared equally among the elements that attain it."""
    shape = np.shape(x)
    hit = x == unreduce(result, shape, axis, keepdims)
    count = np.sum(hit, axis=axis, keepdims=True)
    return unreduce(g, shape, axis, keepdims) * hit / count


def prod_backward(g, x, result, axis, keepdims):
    """Gradient of ``prod`` (exact when no element is zero, see Note [prod with zeros])."""
    # Note [prod with zeros]: result / x divides by zero when an element is zero; the product
    # of the other elements is then computed directly along the reduced axes.
    shape = np.shape(x)
    if np.all(np.asarray(x) != 0):
        return unreduce(g * result, shape, axis, keepdims) / x
    axes = normalize_axis(axis, len(shape))
    moved = np.moveaxis(x, axes, tuple(range(-len(axes), 0)))
    flat = np.reshape(moved, np.shape(moved)[:len(shape) - len(axes)] + (-1,))
    n = np.shape(flat)[-1]
    ones = np.ones(np.shape(flat)[:-1] + (1,), dtype=np.result_type(flat))
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.flip(np.cumprod(np.concatenate([ones, np.flip(flat, -1)[..., :-1]], axis=-1),
                               axis=-1), -1)
    others = np.reshape(left * right, np.shape(moved))
    others = np.moveaxis(others, tuple(range(-len(axes), 0)), axes)
    del n
    return unreduce(g, shape, axis, keepdims) * others


def transpose_backward(g, axes):
    if axes is None:
        return np.transpose(g)
    return np.transpose(g, tuple(np.argsort([a % len(axes) for a in axes])))


def matmul_backward_x(g, x_shape, y):
    if np.ndim(y) == 1:
        return np.expand_dims(g, -1) * y
    if len(x_shape) == 1:
        return np.matmul(y, np.expand_dims(g, -1))[..., 0]
    return np.matmul(g, np.swapaxes(y, -1, -2))


def matmul_backward_y(g, x, y_shape):
    if np.ndim(x) == 1:
        if len(y_shape) == 1:
            return g * x
        return np.expand_dims(x, -1) * np.expand_dims(g, -2)
    if len(y_shape) == 1:
        return np.matmul(np.swapaxes(x, -1, -2), np.expand_dims(g, -1))[..., 0]
    return np.matmul(np.swapaxes(x, -1, -2), g)


def split_backward(g, axis):
    return np.concatenate(g, axis=axis)


def concatenate_backward(g, axis, sizes):
    return tuple(np.split(g, np.cumsum(sizes)[:-1].tolist(), axis=axis))


def stack_backward(g, axis):
    n = np.shape(g)[axis]
    return tuple(np.squeeze(p, axis) for p in np.split(g, n, axis=axis))


def safe_log(x):
    """``log(x)`` where ``x > 0``, zero elsewhere (the derivative of ``a**b`` in ``b``)."""
    return np.log(np.where(x > 0, x, 1))


def clip_mask(x, a_min, a_max):
    """Where ``clip`` passes its input through (the gradient is zero where it clips)."""
    inside = np.ones(np.shape(x), dtype=bool)
    if a_min is not None:
        inside = inside & (x >= a_min)
    if a_max is not None:
        inside = inside & (x <= a_max)
    return inside
