"""The derivative table: every differentiable operation of fastgrad, in one place.

Each entry is ``Op(name, forward, signature, **rules)``:

``forward``
    The NumPy kernel, called as ``forward(*inputs, *params)``, or as ``call`` says.
``signature``
    ``"x, y"`` names the array inputs; ``"x; axis=None, keepdims=False"`` adds parameters
    with defaults; ``"*xs; axis=0"`` takes any number of arrays.
``rules``
    One formula per input: a Python expression giving the gradient with respect to that input
    from ``g`` (the gradient of the output; a tuple for multi-output ops), the inputs, the
    parameters and ``result`` (the output). ``NONDIFF`` marks an input that is not
    differentiable (an index, a condition); an input with no formula has no rule, and
    recording it with a variable raises an error naming the op.
``call``
    How ``forward`` takes the inputs and parameters, when not in the signature's order: its
    argument list, written with their names, as in ``call="x, axis=axis, keepdims=keepdims"``
    for ``np.var``, whose third positional parameter is not ``keepdims``. The registry compiles
    it into the kernel the op calls (Note [Kernel calls] in _registry.py), so a NumPy routine
    needs no adapter function.
``complex``
    Whether the op differentiates complex values (Note [Complex gradients] in _complex.py):
    ``True`` when its formulas, written with ``conj`` where the complex rule needs it, serve
    complex values (checked against finite differences by ``tests/ops/test_ops_complex.py``); a
    dict ``{input: formula}`` for inputs whose complex formula is not the real one with
    ``conj``; omitted when the op is not checked for complex values, so that recording it with a
    complex input or output raises ``NotImplementedError`` naming it.
``deferred``
    A speed hook: ``{"y": "x"}`` says that the gradient for input ``y`` is the product
    ``x.T @ g``, which a backward pass may keep and sum with ``y``'s other such products in
    one (Note [Deferred weight gradients] in _kernels/_forward.py). ``x`` must be saved by the
    rules.

Formulas never unbroadcast or cast: the engine sums every gradient back to its input's shape
and casts it to its dtype (Note [Accumulation] in _engine.pyx). A formula that mentions an input
only as ``x.shape`` or ``x.ndim`` keeps only its shape, not its values. Formulas may call NumPy
functions and the helpers of ``_rules.py`` (Note [Differentiable rules]).
"""

import operator

import numpy as np

from fastgrad._kernels import _forward as K
from fastgrad._ops import _table_complex, _table_ctc, _table_fft, _table_fused, _table_linalg, \
         _table_special

NONDIFF = "<not differentiable>"


class Op:
    """One table entry (see the module docstring)."""

    __slots__ = ("name", "forward", "signature", "rules", "n_out", "differentiable", "ufunc",
                 "order", "views", "zero", "differentiable_outputs", "aliases", "npx",
                 "complex", "call", "deferred")

    def __init__(self, name, forward, signature, n_out=1, differentiable=True, ufunc=None,
                 order=-1, views=False, zero=False, differentiable_outputs=None, aliases=(),
                 npx=False, complex=None, call=None, deferred=None, **rules):
        self.name = name
        self.forward = forward
        self.signature = signature
        self.rules = rules
        self.n_out = n_out
        self.differentiable = differentiable
        self.ufunc = ufunc if ufunc is not None else (
            forward if isinstance(forward, np.ufunc) else None)
        self.order = order
        self.views = views   # the output may be a view of input 0 (Note [Versions])
        self.zero = zero     # the derivative is zero almost everywhere (Note [Zero gradients])
        # Per output, whether it carries a gradient (PyTorch's output_differentiability);
        # None: every output with a float or complex dtype does (Note [Zero gradients]).
        self.differentiable_outputs = differentiable_outputs
        # Where the op is public (Note [Generated namespaces] in _namespaces.py): as
        # fastgrad.np.<name> if NumPy has a function of that name, also under ``aliases``
        # there, and as fastgrad.npx.<name> if ``npx``.
        self.aliases = tuple(aliases)
        self.npx = npx
        # None: not checked for complex values; else {input: formula} replacing the table's
        # for complex values ({} when the formulas serve both: Note [Complex gradients]).
        self.complex = {} if complex is True else (None if complex is False else complex)
        self.call = call     # forward's argument list, if not (*inputs, *params)
        # A speed hook: {input: factor} when the input's gradient is the product
        # factor.T @ g, which a backward pass may defer and sum with the input's other such
        # products in one (Note [Deferred weight gradients] in _kernels/_forward.py).
        self.deferred = dict(deferred) if deferred else None


def nondiff(name, forward, signature, **options):
    """An operation with integer or bool results (comparisons, tests, bitwise ops): recorded
    only for what it depends on, it never carries a gradient (Note [Zero gradients])."""
    return Op(name, forward, signature, differentiable=False, **options)


def zero(name, forward, signature, **options):
    """A piecewise-constant operation (rounding, ``sign``): its derivative is zero wherever it
    exists, so it is recorded with a symbolic zero rule (Note [Zero gradients])."""
    return Op(name, forward, signature, zero=True, **options)


TABLE = [
    # ------------------------------------------------------------ arithmetic
    Op("add", np.add, "x, y", x="g", y="g", complex=True),
    Op("subtract", np.subtract, "x, y", x="g", y="-g", complex=True),
    Op("multiply", np.multiply, "x, y", x="g * conj(y)", y="g * conj(x)", complex=True),
    Op("divide", np.divide, "x, y", x="g / conj(y)", y="-g * conj(x / (y * y))",
       aliases=["true_divide"], complex=True),
    # Note [The slope of a power]: y * x ** (y - 1), whose derivative in y is the mixed
    # second derivative; only at x == 0 the exponent is y - (y != 0), so that 0 ** 0 gives a
    # slope of 0 instead of 0 * inf.
    Op("power", np.power, "x, y",
       x="g * conj(y * x ** where(x == 0, y - (y != 0), y - 1))",
       y="g * conj(result * safe_log(x))", complex=True),
    Op("negative", np.negative, "x", x="-g", complex=True),
    Op("positive", np.positive, "x", x="g", complex=True),
    Op("mod", np.mod, "x, y", x="g", y="-g * floor_divide(x, y)", aliases=["remainder"]),
    Op("fmod", np.fmod, "x, y", x="g", y="-g * trunc(x / y)"),
    # At ties the gradient is split evenly, as the max/min reductions split it; one pass of
    # a fused kernel (Note [Ties of maximum] in _table_fused.py).
    Op("maximum", np.maximum, "x, y",
       x="maximum_backward(g, x, y)", y="maximum_backward(g, y, x)"),
    Op("minimum", np.minimum, "x, y",
       x="maximum_backward(g, y, x)", y="maximum_backward(g, x, y)"),
    # fmax/fmin return the operand that is not NaN: the gradient goes where the value came from.
    Op("fmax", np.fmax, "x, y", x="where(x == y, 0.5 * g, g * ((x > y) | isnan(y)))",
       y="where(x == y, 0.5 * g, g * ((x < y) | isnan(x)))"),
    Op("fmin", np.fmin, "x, y", x="where(x == y, 0.5 * g, g * ((x < y) | isnan(y)))",
       y="where(x == y, 0.5 * g, g * ((x > y) | isnan(x)))"),
    # No derivative at the origin: 0 there, as abs and norm (masked, never 0 / 0).
    Op("hypot", np.hypot, "x, y", x="g * x / where(result == 0, 1, result)",
       y="g * y / where(result == 0, 1, result)"),
    Op("arctan2", np.arctan2, "x, y",
       x="g * y / nonzero_or_one(x * x + y * y)", y="-g * x / nonzero_or_one(x * x + y * y)",
       aliases=["atan2"]),
    Op("logaddexp", np.logaddexp, "x, y",
       x="g * exp(x - result)", y="g * exp(y - result)"),
    Op("logaddexp2", np.logaddexp2, "x, y",
       x="g * exp2(x - result)", y="g * exp2(y - result)"),
    Op("copysign", np.copysign, "x, y", x="g * sign(x) * copysign(1, y)", y=NONDIFF),
    Op("ldexp", np.ldexp, "x, y", x="g * exp2(y)", y=NONDIFF),
    # As power's (Note [The slope of a power]): the exponent y - (y != 0) only at x == 0, so
    # that d2/dxdy at y == 0 is 1/x (the fuzzer's special points found it: issue 25).
    Op("float_power", np.float_power, "x, y",
       x="g * y * float_power(x, where(x == 0, y - (y != 0), y - 1))",
       y="g * result * safe_log(x)"),
    Op("modf", np.modf, "x", n_out=2, x="g[0]"),

    # ------------------------------------------------------------ elementwise unary
    Op("exp", np.exp, "x", x="g * conj(result)", complex=True),
    Op("expm1", np.expm1, "x", x="g * conj(result + 1)", complex=True),
    Op("exp2", np.exp2, "x", x="g * conj(result) * LN2", complex=True),
    Op("log", np.log, "x", x="g / conj(x)", complex=True),
    Op("log1p", np.log1p, "x", x="g / conj(1 + x)", complex=True),
    Op("log2", np.log2, "x", x="g / (conj(x) * LN2)", complex=True),
    Op("log10", np.log10, "x", x="g / (conj(x) * LN10)", complex=True),
    Op("sqrt", np.sqrt, "x", x="g / (2 * conj(result))", complex=True),
    Op("cbrt", np.cbrt, "x", x="g / (3 * result * result)"),
    Op("square", np.square, "x", x="g * 2 * conj(x)", complex=True),
    Op("reciprocal", np.reciprocal, "x", x="-g * conj(result * result)", complex=True),
    Op("rsqrt", K.rsqrt, "x", x="-0.5 * g * result * result * result"),
    Op("rcbrt", K.rcbrt, "x", x="-g * result / (3 * x)"),
    # sign(x) of a complex x has a derivative, which abs's does not: the complex rule divides.
    Op("abs", np.absolute, "x", x="g * sign(x)", aliases=["absolute"],
       complex={"x": "g * complex_sign(x, abs(x))"}),
    Op("fabs", np.fabs, "x", x="g * sign(x)"),
    Op("sin", np.sin, "x", x="g * conj(cos(x))", complex=True),
    Op("cos", np.cos, "x", x="g * negative(conj(sin(x)))", complex=True),
    Op("tan", np.tan, "x", x="g * conj(1 + result * result)", complex=True),
    Op("arcsin", np.arcsin, "x", x="g / conj(sqrt(1 - x * x))", aliases=["asin"], complex=True),
    Op("arccos", np.arccos, "x", x="-g / conj(sqrt(1 - x * x))", aliases=["acos"], complex=True),
    Op("arctan", np.arctan, "x", x="g / conj(1 + x * x)", aliases=["atan"], complex=True),
    Op("sinh", np.sinh, "x", x="g * conj(cosh(x))", complex=True),
    Op("cosh", np.cosh, "x", x="g * conj(sinh(x))", complex=True),
    Op("tanh", np.tanh, "x", x="g * conj(1 - result * result)", complex=True),
    Op("arcsinh", np.arcsinh, "x", x="g / conj(sqrt(x * x + 1))", aliases=["asinh"], complex=True),
    # For complex values sqrt(x - 1) sqrt(x + 1), not sqrt(x * x - 1): NumPy's branch of
    # arccosh, whose derivative the latter gets wrong by a sign where Re x < 0.
    Op("arccosh", np.arccosh, "x", x="g / sqrt(x * x - 1)", aliases=["acosh"],
       complex={"x": "g / conj(sqrt(x - 1) * sqrt(x + 1))"}),
    Op("arctanh", np.arctanh, "x", x="g / conj(1 - x * x)", aliases=["atanh"], complex=True),
    Op("deg2rad", np.deg2rad, "x", x="g * (pi / 180)"),
    Op("rad2deg", np.rad2deg, "x", x="g * (180 / pi)"),
    Op("radians", np.radians, "x", x="g * (pi / 180)"),
    Op("degrees", np.degrees, "x", x="g * (180 / pi)"),
    Op("conjugate", np.conjugate, "x", x="conj(g)", aliases=["conj"], complex=True),
    Op("real", K.real, "x", views=True,
       x="g", complex=True),
    Op("nan_to_num", np.nan_to_num, "x; nan=0.0, posinf=None, neginf=None",
       call="x, nan=nan, posinf=posinf, neginf=neginf",
       x="g * isfinite(x)", complex=True),
    Op("sinc", np.sinc, "x", x="sinc_backward(g, x)"),
    # The k-th derivative of sinc at 0, which sinc's rule selects there (Note [sinc at 0]).
    Op("sinc_maclaurin", K.sinc_maclaurin, "x; k=0", x="g * sinc_maclaurin(x, k + 1)"),
    # erf (and erfc) are entire: conj of the same derivative (Note [Complex gradients]).
    Op("erf", K.erf, "x", x="g * TWO_OVER_SQRT_PI * conj(exp(-x * x))", npx=True, complex=True),
    Op("erfinv", K.erfinv, "x", x="g * SQRT_PI_OVER_2 * exp(result * result)", npx=True),

    # ------------------------------------------------------------ activations
    Op("relu", K.relu, "x", x="g * (x > 0)", npx=True),
    Op("sigmoid", K.sigmoid, "x", x="sigmoid_backward(g, result)", npx=True),
    Op("leaky_relu", K.leaky_relu, "x; slope=0.25", x="where(x > 0, g, g * slope)"),
    Op("prelu", K.prelu, "x, alpha",
       x="where(x > 0, g, g * alpha)", alpha="where(x > 0, 0, g * x)"),
    Op("elu", K.elu, "x; alpha=1.0", x="where(x > 0, g, g * (result + alpha))"),
    Op("selu", K.selu, "x",
       x="where(x > 0, g * SELU_SCALE, g * (result + SELU_SCALE * SELU_ALPHA))"),
    Op("gelu", K.gelu, "x", x="gelu_backward(g, x)"),
    Op("gelu_tanh", K.gelu_tanh, "x", x="gelu_tanh_backward(g, x)"),
    Op("softplus", K.softplus, "x", x="g * sigmoid(x)"),
    Op("log_sigmoid", K.log_sigmoid, "x", x="g * sigmoid(-x)", npx=True),
    Op("softsign", K.softsign, "x", x="g / square(1 + abs(x))", npx=True),
    Op("silu", K.silu, "x", x="silu_backward(g, x)", npx=True),
    Op("hard_sigmoid", K.hard_sigmoid, "x; alpha=0.2, beta=0.5",
       x="g * alpha * ((result > 0) & (result < 1))"),
    Op("smooth_l1", K.smooth_l1, "x; sigma=1.0",
       x="g * where(abs(x) < 1 / (sigma * sigma), sigma * sigma * x, sign(x))"),
    Op("softmax", K.softmax, "x; axis=-1", x="softmax_backward(g, result, axis)"),
    Op("log_softmax", K.log_softmax, "x; axis=-1", x="log_softmax_backward(g, result, axis)"),

    # ------------------------------------------------------------ reductions
    # NumPy orders complex values lexicographically (real part, then imaginary part): the
    # gradient goes to the selected (max, min, clip) or permuted (sort) elements, as for real.
    Op("sum", K.reduce_sum, "x; axis=None, keepdims=False",
       x="unreduce(g, x.shape, axis, keepdims)", complex=True),
    Op("mean", K.reduce_mean, "x; axis=None, keepdims=False",
       x="mean_backward(g, x.shape, axis, keepdims)", complex=True),
    Op("prod", np.prod, "x; axis=None, keepdims=False", call="x, axis=axis, keepdims=keepdims",
       x="prod_backward(g, x, result, axis, keepdims)", complex=True),
    Op("max", np.max, "x; axis=None, keepdims=False", call="x, axis=axis, keepdims=keepdims",
       x="minmax_backward(g, x, result, axis, keepdims)", complex=True),
    Op("min", np.min, "x; axis=None, keepdims=False", call="x, axis=axis, keepdims=keepdims",
       x="minmax_backward(g, x, result, axis, keepdims)", complex=True),
    Op("var", np.var, "x; axis=None, keepdims=False, ddof=0",
       call="x, axis=axis, keepdims=keepdims, ddof=ddof",
       x="var_backward(g, x, axis, keepdims, ddof)", complex=True),
    Op("std", np.std, "x; axis=None, keepdims=False, ddof=0",
       call="x, axis=axis, keepdims=keepdims, ddof=ddof",
       x="std_backward(g, x, result, axis, keepdims, ddof)", complex=True),
    Op("nansum", np.nansum, "x; axis=None, keepdims=False", call="x, axis=axis, keepdims=keepdims",
       x="where(isnan(x), 0, unreduce(g, x.shape, axis, keepdims))", complex=True),
    Op("nanmean", np.nanmean, "x; axis=None, keepdims=False",
       call="x, axis=axis, keepdims=keepdims",
       x="nanmean_backward(g, x, axis, keepdims)", complex=True),
    Op("nanmax", np.nanmax, "x; axis=None, keepdims=False", call="x, axis=axis, keepdims=keepdims",
       x="minmax_backward(g, x, result, axis, keepdims)", complex=True),
    Op("nanmin", np.nanmin, "x; axis=None, keepdims=False", call="x, axis=axis, keepdims=keepdims",
       x="minmax_backward(g, x, result, axis, keepdims)", complex=True),
    Op("nanprod", np.nanprod, "x; axis=None, keepdims=False",
       call="x, axis=axis, keepdims=keepdims",
       x="where(isnan(x), 0, prod_backward(g, nan_to_num(x, nan=1.0), result, axis, keepdims))"),
    Op("nancumsum", np.nancumsum, "x; axis",
       x="where(isnan(x), 0, cumsum_backward(g, axis))", complex=True),
    Op("nancumprod", np.nancumprod, "x; axis",
       x="where(isnan(x), 0, cumprod_backward(g, nan_to_num(x, nan=1.0), result, axis))"),
    Op("logsumexp", K.logsumexp, "x; axis=None, keepdims=False",
       x="logsumexp_backward(g, x, result, axis, keepdims)"),
    Op("cumsum", np.cumsum, "x; axis", x="cumsum_backward(g, axis)", complex=True),
    Op("cumprod", np.cumprod, "x; axis", x="cumprod_backward(g, x, result, axis)", complex=True),
    Op("average", np.average, "a, w; axis=None, keepdims=False",
       call="a, axis=axis, weights=w, keepdims=keepdims",
       a="average_backward_a(g, w, axis, keepdims)",
       w="average_backward_w(g, a, w, result, axis, keepdims)"),
    Op("norm", K.norm, "x; ord=None, axis=None, keepdims=False",
       x="norm_backward(g, x, result, ord, axis, keepdims)", complex=True),

    # ------------------------------------------------------------ shape and indexing
    Op("reshape", np.reshape, "x; shape", views=True,
       x="reshape(g, x.shape)", complex=True),
    Op("transpose", np.transpose, "x; axes=None", views=True,
       x="transpose_backward(g, axes)", complex=True),
    Op("swapaxes", np.swapaxes, "x; axis1, axis2", views=True,
       x="swapaxes(g, axis1, axis2)", complex=True),
    Op("moveaxis", np.moveaxis, "x; source, destination", views=True,
       x="moveaxis_backward(g, source, destination)", complex=True),
    Op("expand_dims", np.expand_dims, "x; axis", views=True,
       x="reshape(g, x.shape)", complex=True),
    Op("squeeze", np.squeeze, "x; axis=None", views=True,
       x="reshape(g, x.shape)", complex=True),
    Op("broadcast_to", K.broadcast_to, "x; shape", views=True,
       x="sum_to(g, x.shape)", complex=True),
    Op("sum_to", K.sum_to, "x; shape", x="broadcast_to(g, x.shape)", complex=True),
    Op("getitem", operator.getitem, "x; key", views=True,
       x="scatter_add(g, key, x.shape)", complex=True),
    Op("scatter_add", K.scatter_add, "v; key, shape", v="g[key]", complex=True),
    Op("take", np.take, "x; indices, axis=None", x="take_backward(g, x.shape, indices, axis)",
       complex=True),
    Op("take_along_axis", np.take_along_axis, "x; indices, axis",
       x="take_along_axis_backward(g, x.shape, indices, axis)", complex=True),
    Op("pick_along_axis", K.pick_along_axis, "x, index; axis, mode, keepdims", index=NONDIFF,
       x="pick_backward(g, x.shape, index, axis, mode, keepdims)"),
    Op("where", np.where, "condition, x, y", condition=NONDIFF,
       x="where(condition, g, 0)", y="where(condition, 0, g)", complex=True),
    Op("concatenate", np.concatenate, "*xs; axis=0, sizes=None", call="xs, axis=axis",
       xs="concatenate_backward(g, axis, sizes)", complex=True),
    Op("stack", np.stack, "*xs; axis=0",
       call="xs, axis=axis", xs="stack_backward(g, axis)", complex=True),
    Op("split", K.split, "x; indices, axis=0", views=True,
       n_out=-1, x="split_backward(g, axis)", complex=True),
    Op("clip", np.clip, "x; a_min=None, a_max=None",
       x="g * clip_mask(x, a_min, a_max)", complex=True),
    Op("tile", np.tile, "x; reps", x="tile_backward(g, x.shape, reps)", complex=True),
    Op("repeat", np.repeat, "x; repeats, axis=None",
       x="repeat_backward(g, x.shape, repeats, axis)", complex=True),
    Op("flip", np.flip, "x; axis=None", views=True,
       x="flip(g, axis)", complex=True),
    Op("roll", np.roll, "x; shift, axis=None", x="roll_backward(g, shift, axis)", complex=True),
    Op("rot90", np.rot90, "x; k=1, axes=(0, 1)", views=True,
       x="rot90(g, -k, axes)", complex=True),
    Op("pad", np.pad, "x; pad_width, constant_values=0",
       call="x, pad_width, mode='constant', constant_values=constant_values",
       x="pad_backward(g, x.shape, pad_width)", complex=True),
    Op("diag", np.diag, "v; k=0", v="diag_backward(g, v.shape, k)", complex=True),
    Op("diagonal", K.diagonal, "x; offset=0, axis1=0, axis2=1", views=True,
       x="diagonal_backward(g, x.shape, offset, axis1, axis2)", complex=True),
    Op("trace", np.trace, "x; offset=0, axis1=0, axis2=1",
       x="trace_backward(g, x.shape, offset, axis1, axis2)", complex=True),
    Op("triu", np.triu, "x; k=0", x="triu(g, k)", complex=True),
    Op("tril", np.tril, "x; k=0", x="tril(g, k)", complex=True),
    Op("sort", np.sort, "x; axis=-1", x="sort_backward(g, x, axis)", complex=True),
    Op("diff", np.diff, "x; n=1, axis=-1", x="diff_backward(g, x.shape, n, axis)", complex=True),

    # ------------------------------------------------------------ linear algebra
    # y's gradient is x.T @ g, for 2-D operands: a pass may stack it with y's other such
    # products into one (Note [Deferred weight gradients] in _kernels/_forward.py).
    Op("matmul", np.matmul, "x, y",
       x="matmul_backward_x(g, x.shape, y)", y="matmul_backward_y(g, x, y.shape)",
       deferred={"y": "x"}, complex=True),
    Op("dot", np.dot, "x, y", x="dot_backward_x(g, x.ndim, y)", y="dot_backward_y(g, x, y.ndim)",
       complex=True),
    Op("tensordot", np.tensordot, "x, y; axes",
       x="tensordot_backward_x(g, y, x.ndim, axes)", y="tensordot_backward_y(g, x, y.ndim, axes)",
       complex=True),
    Op("einsum", np.einsum, "x; subscripts",
       call="subscripts, x", x="einsum_backward(g, (x,), subscripts, 0)",
       complex=True),
    Op("einsum2", np.einsum, "x, y; subscripts", call="subscripts, x, y",
       x="einsum_backward(g, (x, y), subscripts, 0)",
       y="einsum_backward(g, (x, y), subscripts, 1)", complex=True),
    Op("outer", np.outer, "x, y",
       x="outer_backward_x(g, x.shape, y)", y="outer_backward_y(g, x, y.shape)", complex=True),
    Op("kron", np.kron, "x, y",
       x="kron_backward_x(g, x.shape, y)", y="kron_backward_y(g, x, y.shape)", complex=True),
    Op("cross", np.cross, "x, y; axis=-1",
       call="x, y, axis=axis", x="cross(conj(y), g, axis=axis)",
       y="cross(g, conj(x), axis=axis)", complex=True),
    Op("convolve", np.convolve, "x, y",
       x="convolve_backward_x(g, x.shape, y)", y="convolve_backward_y(g, x, y.shape)",
       complex=True),
    Op("inv", np.linalg.inv, "x", x="inv_backward(g, result)", complex=True),
    Op("det", np.linalg.det, "x", x="det_backward(g, x, result)", complex=True),
    Op("slogdet", K.slogdet, "x", n_out=2, differentiable_outputs=(False, True),
       x="slogdet_backward(g, x)"),
    Op("solve", K.solve, "a, b",
       a="solve_backward_a(g, a, b.ndim, result)", b="solve_backward_b(g, a, b.ndim)",
       complex=True),
    # Decompositions follow PyTorch's complex rules (Note [Complex decompositions] in
    # _rules.py); cholesky, eigh and eigvalsh factor the Hermitian part of the input.
    Op("cholesky", K.cholesky, "x", x="cholesky_backward(g, result)", complex=True),
    Op("eigh", K.eigh, "x", n_out=2, x="eigh_backward(g, result)", complex=True),
    Op("eigvalsh", K.eigvalsh, "x", x="eigvalsh_backward(g, x)", complex=True),
    Op("qr", K.qr, "x", n_out=2, x="qr_backward(g, result)", complex=True),
    Op("svd", K.svd, "x", n_out=3, x="svd_backward(g, result)", complex=True),
    Op("pinv", K.pinv, "x; rtol=None", x="pinv_backward(g, x, result)", complex=True),

    # ------------------------------------------------------------ convolution and pooling
    # Each backward kernel is an op whose rules refer back (Note [Convolution layout]).
    Op("conv2d", K.conv2d, "x, w; stride, pad, dilate",
       x="conv2d_input_grad(g, w, stride, pad, dilate, x.shape[2:])",
       w="conv2d_weight_grad(x, g, stride, pad, dilate, w.shape[2:])"),
    Op("conv2d_input_grad", K.conv2d_input_grad, "dy, w; stride, pad, dilate, x_hw",
       dy="conv2d(g, w, stride, pad, dilate)",
       w="conv2d_weight_grad(g, dy, stride, pad, dilate, w.shape[2:])"),
    Op("conv2d_weight_grad", K.conv2d_weight_grad, "x, dy; stride, pad, dilate, kernel",
       x="conv2d_input_grad(dy, g, stride, pad, dilate, x.shape[2:])",
       dy="conv2d(x, g, stride, pad, dilate)"),
    # conv2d with its bias, for data whose columns span several chunks (Note [Convolution in
    # row chunks]).
    Op("conv2d_bias", K.conv2d_bias, "x, w, b; stride, pad, dilate",
       x="conv2d_input_grad(g, w, stride, pad, dilate, x.shape[2:])",
       w="conv2d_weight_grad(x, g, stride, pad, dilate, w.shape[2:])",
       b="sum(g, axis=(0, 2, 3))"),
    Op("im2col", K.im2col, "x; kernel, stride, pad, dilate, batch_last=False",
       x="col2im(g, x.shape, kernel, stride, pad, dilate, batch_last)"),
    Op("col2im", K.col2im, "cols; x_shape, kernel, stride, pad, dilate, batch_last=False",
       cols="im2col(g, kernel, stride, pad, dilate, batch_last)"),
    # The weight gradient as (cols @ g.T).T rather than matmul's g @ cols.T: the same product,
    # which OpenBLAS runs faster for these shapes (few filters, long rows; Note [Convolution
    # layout]).
    Op("conv2d_product", K.conv2d_product, "w, cols",
       w="swapaxes(matmul(cols, swapaxes(g, 0, 1)), 0, 1)",
       cols="matmul(swapaxes(w, 0, 1), g)"),
    Op("conv2d_product_bias", K.conv2d_product_bias, "w, cols, b",
       w="swapaxes(matmul(cols, swapaxes(g, 0, 1)), 0, 1)",
       cols="matmul(swapaxes(w, 0, 1), g)", b="sum(g, axis=1)"),
    Op("max_pool2d", K.max_pool2d, "x; kernel, stride, pad",
       x="max_pool2d_scatter(g, x, kernel, stride, pad)"),
    Op("max_pool2d_scatter", K.max_pool2d_scatter, "dy, x; kernel, stride, pad",
       dy="max_pool2d_select(g, x, kernel, stride, pad)", x=NONDIFF),
    Op("max_pool2d_select", K.max_pool2d_select, "h, x; kernel, stride, pad",
       h="max_pool2d_scatter(g, x, kernel, stride, pad)", x=NONDIFF),
    Op("avg_pool2d", K.avg_pool2d, "x; kernel, stride, pad, count_include_pad=True",
       x="avg_pool2d_backward(g, kernel, stride, pad, count_include_pad, x.shape)"),
    Op("avg_pool2d_backward", K.avg_pool2d_backward,
       "dy; kernel, stride, pad, count_include_pad, x_shape",
       dy="avg_pool2d(g, kernel, stride, pad, count_include_pad)"),

    # ------------------------------------------------------------ dtype and copies
    Op("astype", K.astype, "x; dtype", x="g", complex=True),
    Op("copy", np.array, "x", call="x, copy=True", x="g", complex=True),

    # ------------------------------------------------------------ derivative zero
    zero("sign", np.sign, "x"),
    zero("floor", np.floor, "x"),
    zero("ceil", np.ceil, "x"),
    zero("trunc", np.trunc, "x", aliases=["fix"]),
    zero("rint", np.rint, "x"),
    zero("round", np.round, "x; decimals=0"),
    zero("heaviside", np.heaviside, "x, y"),
    zero("floor_divide", np.floor_divide, "x, y"),

    # ------------------------------------------------------------ integer and bool results
    nondiff("signbit", np.signbit, "x"),
    nondiff("equal", np.equal, "x, y"),
    nondiff("not_equal", np.not_equal, "x, y"),
    nondiff("less", np.less, "x, y"),
    nondiff("less_equal", np.less_equal, "x, y"),
    nondiff("greater", np.greater, "x, y"),
    nondiff("greater_equal", np.greater_equal, "x, y"),
    nondiff("logical_not", np.logical_not, "x"),
    nondiff("logical_and", np.logical_and, "x, y"),
    nondiff("logical_or", np.logical_or, "x, y"),
    nondiff("logical_xor", np.logical_xor, "x, y"),
    nondiff("isnan", np.isnan, "x"),
    nondiff("isinf", np.isinf, "x"),
    nondiff("isfinite", np.isfinite, "x"),
    nondiff("invert", np.invert, "x", aliases=["bitwise_not"]),
    nondiff("bitwise_and", np.bitwise_and, "x, y"),
    nondiff("bitwise_or", np.bitwise_or, "x, y"),
    nondiff("bitwise_xor", np.bitwise_xor, "x, y"),
    nondiff("left_shift", np.left_shift, "x, y"),
    nondiff("right_shift", np.right_shift, "x, y"),
    nondiff("gcd", np.gcd, "x, y"),
    nondiff("lcm", np.lcm, "x, y"),
]

# ------------------------------------------------------------ sections in modules of their own
# Note [Table sections]
# ~~~~~~~~~~~~~~~~~~~~~
# A family of ops with kernels and rule helpers of its own (complex parts, FFTs, SciPy's
# special functions) lives in a module ``_table_<family>.py``: its ``entries(Op, NONDIFF)``
# returns its entries, which join TABLE here, so TABLE stays the one list of every op; its
# ``HELPERS`` join the names rule formulas can use (``_bindings.numpy_namespace``). The modules
# import only NumPy (SciPy on first use) and the state layer, never this one.
SECTIONS = (_table_complex, _table_fft, _table_linalg, _table_special, _table_ctc, _table_fused)
for _section in SECTIONS:
    TABLE += _section.entries(Op, NONDIFF)
