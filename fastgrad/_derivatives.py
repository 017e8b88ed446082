"""The derivative table: every differentiable operation of fastgrad, in one place.

Each entry is ``Op(name, forward, signature, **rules)``:

``forward``
    The NumPy kernel, called as ``forward(*inputs, *params)``.
``signature``
    ``"x, y"`` names the array inputs; ``"x; axis=None, keepdims=False"`` adds parameters
    with defaults; ``"*xs; axis=0"`` takes any number of arrays.
``rules``
    One formula per input: a Python expression giving the gradient with respect to that input
    from ``g`` (the gradient of the output; a tuple for multi-output ops), the inputs, the
    parameters and ``result`` (the output). ``NONDIFF`` marks an input that is not
    differentiable (an index, a condition); an input with no formula has no rule, and
    recording it with a variable raises an error naming the op.

Formulas never unbroadcast or cast: the engine sums every gradient back to its input's shape
and casts it to its dtype (Note [Accumulation] in _engine.pyx). A formula that mentions an input
only as ``x.shape`` or ``x.ndim`` keeps only its shape, not its values. Formulas may call NumPy
functions and the helpers of ``_rules.py`` (Note [Differentiable rules]).
"""

import numpy as np

from fastgrad import _kernels as K

NONDIFF = "<not differentiable>"


class Op:
    """One table entry (see the module docstring)."""

    __slots__ = ("name", "forward", "signature", "rules", "n_out", "differentiable", "ufunc",
                 "order")

    def __init__(self, name, forward, signature, n_out=1, differentiable=True, ufunc=None,
                 order=-1, **rules):
        self.name = name
        self.forward = forward
        self.signature = signature
        self.rules = rules
        self.n_out = n_out
        self.differentiable = differentiable
        self.ufunc = ufunc if ufunc is not None else (
            forward if isinstance(forward, np.ufunc) else None)
        self.order = order


def nondiff(name, forward, signature):
    """An operation whose output is never recorded (comparisons, rounding, argmax, ...)."""
    return Op(name, forward, signature, differentiable=False)


TABLE = [
    # ------------------------------------------------------------ arithmetic
    Op("add", np.add, "x, y", x="g", y="g"),
    Op("subtract", np.subtract, "x, y", x="g", y="-g"),
    Op("multiply", np.multiply, "x, y", x="g * y", y="g * x"),
    Op("divide", np.divide, "x, y", x="g / y", y="-g * x / (y * y)"),
    Op("power", np.power, "x, y",
       x="g * y * x ** (y - 1)", y="g * result * safe_log(x)"),
    Op("negative", np.negative, "x", x="-g"),
    Op("positive", np.positive, "x", x="g"),
    Op("mod", np.mod, "x, y", x="g", y="-g * floor_divide(x, y)"),
    Op("maximum", np.maximum, "x, y", x="g * (x >= y)", y="g * (x < y)"),
    Op("minimum", np.minimum, "x, y", x="g * (x <= y)", y="g * (x > y)"),

    # ------------------------------------------------------------ elementwise unary
    Op("exp", np.exp, "x", x="g * result"),
    Op("log", np.log, "x", x="g / x"),
    Op("sin", np.sin, "x", x="g * cos(x)"),
    Op("cos", np.cos, "x", x="-g * sin(x)"),
    Op("tan", np.tan, "x", x="g * (1 + result * result)"),
    Op("tanh", np.tanh, "x", x="g * (1 - result * result)"),
    Op("sqrt", np.sqrt, "x", x="g / (2 * result)"),
    Op("square", np.square, "x", x="g * 2 * x"),
    Op("abs", np.absolute, "x", x="g * sign(x)"),
    Op("reciprocal", np.reciprocal, "x", x="-g * result * result"),
    Op("relu", K.relu, "x", x="g * (x > 0)"),
    Op("sigmoid", K.sigmoid, "x", x="g * result * (1 - result)"),

    # ------------------------------------------------------------ reductions
    Op("sum", K.reduce_sum, "x; axis=None, keepdims=False",
       x="unreduce(g, x.shape, axis, keepdims)"),
    Op("mean", K.reduce_mean, "x; axis=None, keepdims=False",
       x="mean_backward(g, x.shape, axis, keepdims)"),
    Op("max", K.reduce_max, "x; axis=None, keepdims=False",
       x="minmax_backward(g, x, result, axis, keepdims)"),
    Op("min", K.reduce_min, "x; axis=None, keepdims=False",
       x="minmax_backward(g, x, result, axis, keepdims)"),

    # ------------------------------------------------------------ shape and indexing
    Op("reshape", K.reshape, "x; shape", x="reshape(g, x.shape)"),
    Op("transpose", K.transpose, "x; axes=None", x="transpose_backward(g, axes)"),
    Op("swapaxes", K.swapaxes, "x; axis1, axis2", x="swapaxes(g, axis1, axis2)"),
    Op("expand_dims", K.expand_dims, "x; axis", x="reshape(g, x.shape)"),
    Op("squeeze", K.squeeze, "x; axis=None", x="reshape(g, x.shape)"),
    Op("broadcast_to", K.broadcast_to, "x; shape", x="sum_to(g, x.shape)"),
    Op("sum_to", K.sum_to, "x; shape", x="broadcast_to(g, x.shape)"),
    Op("getitem", K.getitem, "x; key", x="scatter_add(g, key, x.shape)"),
    Op("scatter_add", K.scatter_add, "v; key, shape", v="g[key]"),
    Op("where", K.where, "condition, x, y", condition=NONDIFF,
       x="where(condition, g, 0)", y="where(condition, 0, g)"),
    Op("concatenate", K.concatenate, "*xs; axis=0, sizes=None",
       xs="concatenate_backward(g, axis, sizes)"),
    Op("stack", K.stack, "*xs; axis=0", xs="stack_backward(g, axis)"),
    Op("split", K.split, "x; indices, axis=0", n_out=-1, x="split_backward(g, axis)"),
    Op("clip", K.clip, "x; a_min=None, a_max=None",
       x="g * clip_mask(x, a_min, a_max)"),

    # ------------------------------------------------------------ linear algebra
    Op("matmul", np.matmul, "x, y",
       x="matmul_backward_x(g, x.shape, y)", y="matmul_backward_y(g, x, y.shape)"),

    # ------------------------------------------------------------ dtype and copies
    Op("astype", K.astype, "x; dtype", x="g"),
    Op("copy", K.copy, "x", x="g"),

    # ------------------------------------------------------------ not differentiable
    nondiff("sign", np.sign, "x"),
    nondiff("floor", np.floor, "x"),
    nondiff("ceil", np.ceil, "x"),
    nondiff("floor_divide", np.floor_divide, "x, y"),
    nondiff("equal", np.equal, "x, y"),
    nondiff("not_equal", np.not_equal, "x, y"),
    nondiff("less", np.less, "x, y"),
    nondiff("less_equal", np.less_equal, "x, y"),
    nondiff("greater", np.greater, "x, y"),
    nondiff("greater_equal", np.greater_equal, "x, y"),
    nondiff("logical_not", np.logical_not, "x"),
    nondiff("logical_and", np.logical_and, "x, y"),
    nondiff("logical_or", np.logical_or, "x, y"),
    nondiff("isnan", np.isnan, "x"),
    nondiff("isinf", np.isinf, "x"),
    nondiff("isfinite", np.isfinite, "x"),
    nondiff("invert", np.invert, "x"),
    nondiff("bitwise_and", np.bitwise_and, "x, y"),
    nondiff("bitwise_or", np.bitwise_or, "x, y"),
    nondiff("bitwise_xor", np.bitwise_xor, "x, y"),
]
