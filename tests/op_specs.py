"""Input domains and NumPy references for every differentiable op, for ``test_ops.py``.

One ``Spec`` per op of the derivative table (keyed by its registry name) and per composite
function of ``fastgrad.npx``/``fastgrad.np`` (keyed ``"npx.name"``/``"np.name"``). A spec
says which inputs to draw (shapes, range, or a maker for structured inputs such as
positive-definite matrices), the parameters of each case, and the NumPy function the forward
must equal. Adding an op to the table needs exactly one entry here.
"""
import itertools
import math

import numpy as onp

import fastgrad as mx
from fastgrad._ops._registry import REGISTRY

_erf = onp.vectorize(math.erf, otypes=[onp.float64])


def _erfinv(y):
    """The inverse of ``math.erf`` by bisection (independent of fastgrad's kernel)."""
    lo, hi = onp.full(onp.shape(y), -6.0), onp.full(onp.shape(y), 6.0)
    for _ in range(80):
        mid = (lo + hi) / 2
        below = _erf(mid) < y
        lo, hi = onp.where(below, mid, lo), onp.where(below, hi, mid)
    return (lo + hi) / 2


class C:
    """One test case: the shapes of the inputs and the op's parameters."""

    def __init__(self, *shapes, **params):
        self.shapes = shapes
        self.params = params


class Spec:
    """How to test one op.

    ``cases``     list of ``C``; ``domain`` ``(lo, hi)`` or one per input;
    ``make``      {input index: f(rng, shape) -> array} for structured inputs;
    ``nondiff``   indices of inputs that are not differentiated (indices, masks);
    ``ref``       NumPy reference ``ref(*inputs, **params)``; default ``numpy.<name>``;
    ``call``      how to call the fastgrad function; default the registry op;
    ``post``      a transform of the outputs applied before comparing (e.g. to remove the sign
                  freedom of eigenvectors), written with operators that work on both kinds;
    ``f32``       whether float32 inputs must give float32 outputs;
    ``order2``    whether to check second (and third) derivatives;
    ``called``    the op that ``call`` runs, when it reaches this one only through another
                  (errors name the op the user called);
    ``rtol``/``atol`` the tolerance of the forward against the reference (derivatives have
                  their own, Note [Finite-difference tolerances] in ``test_ops.py``): fastgrad
                  and NumPy/SciPy agree to about 1e-14 (measured; convolutions, lstsq).
    """

    def __init__(self, cases, domain=(-2.0, 2.0), make=None, nondiff=(), ref=None, call=None,
                 post=None, f32=True, order2=True, rtol=1e-11, atol=1e-12, variadic=False,
                 called=None):
        self.cases = cases
        self.domain = domain
        self.make = make or {}
        self.nondiff = set(nondiff)
        self.ref = ref
        self.call = call
        self.post = post
        self.f32 = f32
        self.order2 = order2
        self.rtol = rtol
        self.atol = atol
        self.variadic = variadic
        self.called = called    # the op ``call`` runs, when it reaches this one through it


# ---------------------------------------------------------------- input makers
def well_conditioned(rng, shape):
    return rng.uniform(-1, 1, shape) + 3 * onp.eye(shape[-2], shape[-1])


def spd(rng, shape):
    a = rng.uniform(-1, 1, shape)
    return a @ onp.swapaxes(a, -1, -2) + shape[-1] * onp.eye(shape[-1])


def with_zero(rng, shape):
    a = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
    a.flat[1] = 0.0
    return a


def with_nan(rng, shape):
    a = rng.uniform(-2, 2, shape)
    a.flat[2] = onp.nan
    return a


def bool_mask(rng, shape):
    return rng.uniform(size=shape) > 0.5


def small_ints(rng, shape):
    return rng.integers(-2, 3, shape)


def away_from_int(rng, shape):
    return rng.integers(0, 3, shape) + rng.uniform(0.1, 0.9, shape)


def negative(rng, shape):
    return rng.uniform(-3.0, -0.3, shape)


def integer_valued(rng, shape):
    return rng.integers(-3, 4, shape).astype(onp.float64)


def zero_to_five_in_pairs(rng, shape):
    """0, 0, 1, 1, ..., 5, 5, 0, ...: every exponent meets one of ``with_zeros``' zeros."""
    n = int(onp.prod(shape))
    return (onp.arange(n) // 2 % 6).astype(onp.float64).reshape(shape)


def with_zeros(rng, shape):
    a = rng.uniform(0.5, 2.0, shape)
    a.flat[::2] = 0.0
    return a


def with_zeros_signed(rng, shape):
    """Every other element 0, the rest in +-(0.5, 1.5); a 0-d input is 0."""
    a = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
    a.flat[::2] = 0.0
    return a


def positive_weights(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def distinct(rng, shape):
    """Values far from ties (max, sort, pooling)."""
    n = int(onp.prod(shape))
    return (rng.permutation(n) * 0.37 + rng.uniform(0, 0.1, n)).reshape(shape) - n * 0.18


# ---------------------------------------------------------------- NumPy references
def _sigmoid(x):
    return 1 / (1 + onp.exp(-x))


def _softplus(x):
    return onp.log1p(onp.exp(-abs(x))) + onp.maximum(x, 0)


def _softmax(x, axis=-1):
    e = onp.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis=-1):
    return onp.log(_softmax(x, axis))


def _logsumexp(x, axis=None, keepdims=False):
    m = onp.max(x, axis=axis, keepdims=True)
    out = onp.log(onp.sum(onp.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else onp.squeeze(out, axis=axis)


def _conv_ref(x, w, stride, pad, dilate):
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    xp = onp.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dilate[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dilate[1] * (kw - 1) - 1) // stride[1] + 1
    out = onp.zeros((n, f, oh, ow), dtype=onp.result_type(x, w))
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    patch = xp[:, :, i * stride[0] + a * dilate[0], j * stride[1] + b * dilate[1]]
                    out[:, :, i, j] += patch @ w[:, :, a, b].T
    return out


def _conv_input_grad_ref(dy, w, stride, pad, dilate, x_hw):
    """The adjoint of ``_conv_ref`` in x: each output position scatters ``dy @ w`` back onto
    the input pixels its window read (padding cut off at the end)."""
    n, c = dy.shape[0], w.shape[1]
    kh, kw = w.shape[2:]
    dxp = onp.zeros((n, c, x_hw[0] + 2 * pad[0], x_hw[1] + 2 * pad[1]),
                    dtype=onp.result_type(dy, w))
    for i in range(dy.shape[2]):
        for j in range(dy.shape[3]):
            for a in range(kh):
                for b in range(kw):
                    dxp[:, :, i * stride[0] + a * dilate[0], j * stride[1] + b * dilate[1]] += \
                        dy[:, :, i, j] @ w[:, :, a, b]
    return dxp[:, :, pad[0]:pad[0] + x_hw[0], pad[1]:pad[1] + x_hw[1]]


def _conv_weight_grad_ref(x, dy, stride, pad, dilate, kernel):
    """The adjoint of ``_conv_ref`` in w: each kernel tap sums ``dy`` times the input pixels
    it met."""
    xp = onp.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    dw = onp.zeros((dy.shape[1], x.shape[1]) + tuple(kernel), dtype=onp.result_type(x, dy))
    for i in range(dy.shape[2]):
        for j in range(dy.shape[3]):
            for a in range(kernel[0]):
                for b in range(kernel[1]):
                    patch = xp[:, :, i * stride[0] + a * dilate[0], j * stride[1] + b * dilate[1]]
                    dw[:, :, a, b] += dy[:, :, i, j].T @ patch
    return dw


def _im2col_ref(x, kernel, stride, pad, dilate, batch_last=False):
    """Row (c, i, j), column (n, oh, ow) (or (oh, ow, n) with ``batch_last``): the padded x
    at that receptive field's (i, j)."""
    n, c, h, w = x.shape
    xp = onp.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dilate[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    ow = (w + 2 * pad[1] - dilate[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    out = onp.zeros((c, kernel[0], kernel[1], n, oh, ow), dtype=x.dtype)
    for a in range(kernel[0]):
        for b in range(kernel[1]):
            for i in range(oh):
                for j in range(ow):
                    out[:, a, b, :, i, j] = xp[:, :, i * stride[0] + a * dilate[0],
                                               j * stride[1] + b * dilate[1]].T
    if batch_last:
        out = out.transpose(0, 1, 2, 4, 5, 3)
    return out.reshape(c * kernel[0] * kernel[1], n * oh * ow)


def _col2im_ref(cols, x_shape, kernel, stride, pad, dilate, batch_last=False):
    """The adjoint of ``_im2col_ref``, by linearity: the transpose of its matrix."""
    size = int(onp.prod(x_shape))
    rows = []
    for k in range(size):
        e = onp.zeros(size)
        e[k] = 1
        rows.append(_im2col_ref(e.reshape(x_shape), kernel, stride, pad, dilate,
                                batch_last).ravel())
    return (onp.array(rows) @ cols.ravel()).reshape(x_shape).astype(cols.dtype)


def _pool_ref(x, kernel, stride, pad, reduce, fill):
    n, c, h, w = x.shape
    xp = onp.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])), constant_values=fill)
    oh = (h + 2 * pad[0] - kernel[0]) // stride[0] + 1
    ow = (w + 2 * pad[1] - kernel[1]) // stride[1] + 1
    out = onp.zeros((n, c, oh, ow), dtype=x.dtype)
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * stride[0]:i * stride[0] + kernel[0],
                     j * stride[1]:j * stride[1] + kernel[1]]
            out[:, :, i, j] = reduce(win.reshape(n, c, -1))
    return out


def _max_pool_ref(x, kernel, stride, pad):
    return _pool_ref(x, kernel, stride, pad, lambda w: w.max(-1), -onp.inf)


def _argmax_mask(x, kernel, stride, pad):
    """mask[n, c, i, j, p, q]: whether x[n, c, p, q] is the maximum of window (i, j)."""
    n, c, h, w = x.shape
    y = _max_pool_ref(x, kernel, stride, pad)
    oh, ow = y.shape[2:]
    mask = onp.zeros((n, c, oh, ow, h, w))
    for i in range(oh):
        for j in range(ow):
            for p in range(h):
                for q in range(w):
                    a, b = p + pad[0] - i * stride[0], q + pad[1] - j * stride[1]
                    if 0 <= a < kernel[0] and 0 <= b < kernel[1]:
                        mask[:, :, i, j, p, q] = x[:, :, p, q] == y[:, :, i, j]
    return mask


def _avg_pool_ref(x, kernel, stride, pad, count_include_pad=True):
    total = _pool_ref(x, kernel, stride, pad, lambda w: w.sum(-1), 0)
    if count_include_pad:
        return total / (kernel[0] * kernel[1])
    return total / _pool_ref(onp.ones_like(x), kernel, stride, pad, lambda w: w.sum(-1), 0)


def _avg_pool_backward_ref(dy, kernel, stride, pad, count_include_pad, x_shape):
    size = int(onp.prod(x_shape))
    cols = []
    for k in range(size):
        e = onp.zeros(size)
        e[k] = 1
        cols.append(_avg_pool_ref(e.reshape(x_shape), kernel, stride, pad,
                                  count_include_pad).ravel())
    return (onp.array(cols) @ dy.ravel()).reshape(x_shape)


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / onp.sqrt(2)))


def _batch_norm_ref(x, gamma, beta):
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True)
    return (x - mean) / onp.sqrt(var + 1e-3) * gamma.reshape(1, -1, 1, 1) \
        + beta.reshape(1, -1, 1, 1)


def _layer_norm_ref(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / onp.sqrt(var + 1e-5) * gamma + beta


def _eigvec_post(outs):
    """Eigenvalues, and eigenvectors free of their sign (real) or phase (complex): each
    column times the conjugate of its first element."""
    w, v = outs
    return w, v * v[..., :1, :].conj()


def _svd_post(outs):
    """Singular values, the singular vectors free of their sign (phase), and products of the
    first elements of ``u[:, j]`` and ``vh[j, :]``, which are phase-free only together (so
    that a complex loss exercises the term of svd's rule that only joint freedom needs)."""
    u, s, vt = outs
    return (u * u[..., :1, :].conj(), s, vt * vt[..., :, :1].conj(),
            u[..., :1, :] * vt[..., :, :1].swapaxes(-1, -2))


def _herm(x):
    """The Hermitian (real: symmetric) part, which eigh, eigvalsh and cholesky factor."""
    return (x + onp.conj(onp.swapaxes(x, -1, -2))) / 2


def _bn_call(x, gamma, beta):
    rm = mx.np.zeros((x.shape[1],), dtype=x.dtype)
    rv = mx.np.ones((x.shape[1],), dtype=x.dtype)
    with mx.autograd.train_mode():
        return mx.npx.batch_norm(x, gamma, beta, rm, rv, fix_gamma=False)


def _dropout_call(x):
    mx.npx.seed(3)
    return mx.npx.dropout(x, p=0.5, mode="always")


def _dropout_ref(x):
    mx.npx.seed(3)
    from fastgrad.numpy import random
    keep = random._rng().random(x.shape) >= 0.5
    return x * keep / 0.5


def _split_ref(x, indices, axis=0):
    return tuple(onp.split(x, indices, axis=axis))


# ---------------------------------------------------------------- the specs
UNARY = [C((3, 4)), C(()), C((0, 3))]
BINARY = [C((3, 4), (3, 4)), C((3, 1), (4,)), C((), (2, 3)), C((0, 3), (3,))]
REDUCE = [C((3, 4)), C((3, 4), axis=1), C((2, 3, 2), axis=(0, 2), keepdims=True),
          C((0, 3), axis=1), C((4,), axis=0, keepdims=True)]
MATMUL = [C((3, 4), (4, 2)), C((4,), (4, 2)), C((2, 3, 4), (4,)), C((2, 1, 3, 4), (3, 4, 2))]
POS = (0.3, 3.0)
UNIT = (-0.9, 0.9)

SPECS = {}


def _unary(names, domain=(-2.0, 2.0), **kw):
    for name in names.split():
        SPECS[name] = Spec(UNARY, domain=domain, **kw)


def _binary(names, domain=(-2.0, 2.0), **kw):
    for name in names.split():
        SPECS[name] = Spec(BINARY, domain=domain, **kw)


_binary("add subtract multiply maximum minimum fmax fmin hypot arctan2 logaddexp logaddexp2")
_binary("divide", domain=[(-2, 2), (0.5, 2)])
_binary("power", domain=[(0.5, 2), (-1.5, 1.5)])
_binary("float_power", domain=[(0.5, 2), (-1.5, 1.5)], f32=False)
# Bases outside (0.5, 2): large ones; negative ones and zero with integer exponents (the
# exponent is then not differentiated: x ** y is not real off the integers for x < 0).
_power = lambda x, y: REGISTRY["power"](x, y)  # noqa: E731
SPECS["power_large_base"] = Spec([C((3, 4), (3, 4)), C((5,), ())], domain=[(2, 40), (-2.5, 2.5)],
                                 ref=onp.power, call=_power)
SPECS["power_negative_base"] = Spec([C((3, 4), (3, 4))], make={0: negative, 1: integer_valued},
                                    nondiff={1}, ref=onp.power, call=_power)
SPECS["power_zero_base"] = Spec([C((3, 4), (3, 4))], make={0: with_zeros, 1: zero_to_five_in_pairs},
                                nondiff={1}, ref=onp.power, call=_power)
_binary("mod fmod", domain=[(0.2, 4), (1.05, 1.45)])
_binary("copysign", nondiff={1})
SPECS["ldexp"] = Spec(BINARY, make={1: small_ints}, nondiff={1})
_unary("negative positive exp expm1 exp2 square sin cos arctan sinh cosh tanh arcsinh "
       "deg2rad rad2deg radians degrees abs fabs conjugate real imag nan_to_num sinc")
# sinc_maclaurin is only ever taken at 0, by sinc's rule (Note [sinc at 0]): it is checked
# through sinc at inputs that hold zeros, to third order.
SPECS["sinc_maclaurin"] = Spec([C((3, 4)), C(())], make={0: with_zeros_signed},
                               ref=onp.sinc, call=lambda x: mx.np.sinc(x), called="sinc")
_unary("log log2 log10 sqrt cbrt reciprocal", domain=POS)
_unary("log1p", domain=(-0.5, 2))
_unary("tan", domain=(-1.2, 1.2))
_unary("arcsin arccos arctanh", domain=UNIT)
SPECS["erfinv"] = Spec(UNARY, domain=UNIT, ref=_erfinv)
_unary("arccosh", domain=(1.2, 3))
SPECS["rsqrt"] = Spec(UNARY, domain=POS, ref=lambda x: 1 / onp.sqrt(x))
SPECS["rcbrt"] = Spec(UNARY, domain=POS, ref=lambda x: 1 / onp.cbrt(x))
_unary("erf", ref=lambda x: _ssp.erf(x) if onp.iscomplexobj(x) else _erf(x))
SPECS["modf"] = Spec(UNARY, make={0: away_from_int}, post=lambda outs: outs[0],
                     ref=lambda x: onp.modf(x))
SPECS["relu"] = Spec(UNARY, ref=lambda x: onp.maximum(x, 0))
# The fused kernels of the rules (Note [Fused kernels] in fastgrad/_kernels/_fused.pyx), checked as ops
# against the NumPy compositions they replace (float32 and float64, broadcasting, 0-d, empty).
SPECS["maximum_backward"] = Spec(
    [C((3, 4), (3, 4), (3, 4)), C((3, 1), (4,), ()), C((), (2, 3), (3,)), C((0, 3), (3,), ())],
    nondiff=(1, 2), ref=lambda dz, x, y: onp.where(x == y, 0.5 * dz, dz * (x > y)), rtol=0,
    atol=0)
SPECS["sigmoid_backward"] = Spec(BINARY, domain=[(-2.0, 2.0), (0.05, 0.95)],
                                 ref=lambda dy, y: dy * y * (1 - y), rtol=0, atol=0)
SPECS["tanh_backward"] = Spec(BINARY, domain=[(-2.0, 2.0), (-0.95, 0.95)],
                              ref=lambda dy, y: dy * (1 - y * y), rtol=0, atol=0)


SPECS["sigmoid"] = Spec(UNARY, ref=_sigmoid)
SPECS["leaky_relu"] = Spec([C((3, 4)), C((5,), slope=0.1)],
                           ref=lambda x, slope=0.25: onp.where(x > 0, x, slope * x))
SPECS["prelu"] = Spec([C((3, 4), (4,)), C((2, 3), ())],
                      ref=lambda x, a: onp.where(x > 0, x, a * x))
SPECS["elu"] = Spec([C((3, 4)), C((5,), alpha=0.5)],
                    ref=lambda x, alpha=1.0: onp.where(x > 0, x, alpha * (onp.exp(x) - 1)))
SPECS["selu"] = Spec(UNARY, ref=lambda x: 1.0507009873554805 * onp.where(
    x > 0, x, 1.6732632423543772 * (onp.exp(x) - 1)))
SPECS["gelu"] = Spec(UNARY, ref=_gelu)
SPECS["gelu_tanh"] = Spec(UNARY, ref=lambda x: 0.5 * x * (1 + onp.tanh(
    onp.sqrt(2 / onp.pi) * (x + 0.044715 * x ** 3))))
SPECS["softplus"] = Spec(UNARY, ref=_softplus)
SPECS["log_sigmoid"] = Spec(UNARY, ref=lambda x: onp.log(_sigmoid(x)))
SPECS["softsign"] = Spec(UNARY, ref=lambda x: x / (1 + abs(x)))
SPECS["silu"] = Spec(UNARY, ref=lambda x: x * _sigmoid(x))
SPECS["hard_sigmoid"] = Spec([C((3, 4), alpha=0.3, beta=0.4)], domain=(-4, 4),
                             ref=lambda x, alpha, beta: onp.clip(alpha * x + beta, 0, 1))
SPECS["smooth_l1"] = Spec([C((3, 4)), C((5,), sigma=2.0)], domain=(-3, 3),
                          ref=lambda x, sigma=1.0: onp.where(
                              abs(x) < 1 / sigma ** 2, 0.5 * (sigma * x) ** 2,
                              abs(x) - 0.5 / sigma ** 2))
SPECS["softmax"] = Spec([C((3, 4)), C((3, 4), axis=0)], ref=_softmax)
SPECS["log_softmax"] = Spec([C((3, 4)), C((3, 4), axis=0)], ref=_log_softmax)

# reductions
for _name in "sum mean max min nansum nanmean nanmax nanmin logsumexp".split():
    SPECS[_name] = Spec(REDUCE, make={0: distinct} if "max" in _name or "min" in _name else None)
SPECS["logsumexp"].ref = _logsumexp
SPECS["prod"] = Spec(REDUCE + [C((3, 4), axis=1)], domain=(0.5, 1.5))
SPECS["prod_zero"] = Spec([C((3, 4), axis=1), C((3, 4))], make={0: with_zero},
                          ref=lambda x, **p: onp.prod(x, **p),
                          call=lambda x, **p: mx.np.prod(x, **p))
SPECS["nanprod"] = Spec(REDUCE, domain=(0.5, 1.5))
SPECS["nan_sum_with_nan"] = Spec([C((3, 4), axis=1)], make={0: with_nan},
                                 ref=lambda x, **p: onp.nansum(x, **p),
                                 call=lambda x, **p: mx.np.nansum(x, **p))
SPECS["var"] = Spec(REDUCE + [C((3, 4), axis=0, ddof=1)])
SPECS["std"] = Spec(REDUCE + [C((3, 4), axis=0, ddof=1)])
for _name in "cumsum cumprod nancumsum nancumprod".split():
    SPECS[_name] = Spec([C((3, 4), axis=1), C((5,), axis=0)], domain=(0.5, 1.5))
SPECS["cumprod_zero"] = Spec([C((3, 4), axis=1), C((5,), axis=0)], make={0: with_zero},
                             ref=lambda x, axis: onp.cumprod(x, axis=axis),
                             call=lambda x, axis: mx.np.cumprod(x, axis=axis))
SPECS["average"] = Spec([C((3, 4), (3, 4), axis=1), C((3, 4), (3, 4)),
                         C((2, 3), (2, 3), axis=0, keepdims=True)],
                        make={1: positive_weights},
                        ref=lambda a, w, axis=None, keepdims=False: onp.average(
                            a, axis=axis, weights=w, keepdims=keepdims))
SPECS["norm"] = Spec([C((5,)), C((5,), ord=1, axis=0), C((5,), ord=3, axis=0),
                      C((5,), ord=onp.inf, axis=0), C((3, 4), axis=1, keepdims=True),
                      C((3, 4), ord="fro", axis=(0, 1)), C((3, 4), ord=1, axis=(0, 1)),
                      C((3, 4), ord=onp.inf, axis=(1, 0))], make={0: distinct},
                     ref=lambda x, ord=None, axis=None, keepdims=False: onp.linalg.norm(
                         x, ord, axis, keepdims))

# shape and indexing
# numpy.reshape takes shape= only from NumPy 2.1 on; the reference passes it by position.
SPECS["reshape"] = Spec([C((3, 4), shape=(2, 6)), C((6,), shape=(3, -1))],
                       ref=lambda a, shape: onp.reshape(a, shape))
SPECS["transpose"] = Spec([C((3, 4)), C((2, 3, 4), axes=(1, 2, 0))])
SPECS["swapaxes"] = Spec([C((2, 3, 4), axis1=0, axis2=2)])
SPECS["moveaxis"] = Spec([C((2, 3, 4), source=(0,), destination=(2,))])
SPECS["expand_dims"] = Spec([C((3, 4), axis=1), C((3,), axis=(0, 2))])
SPECS["squeeze"] = Spec([C((3, 1, 4)), C((1, 3, 1), axis=0)])
SPECS["broadcast_to"] = Spec([C((3, 1), shape=(2, 3, 4))])
SPECS["sum_to"] = Spec([C((2, 3, 4), shape=(3, 1))],
                       ref=lambda x, shape: x.sum(axis=(0, 2)).reshape(shape))
SPECS["getitem"] = Spec([C((4, 5), key=(slice(1, 3), 2)), C((4, 5), key=(onp.array([0, 2, 2]),)),
                         C((4, 5), key=(onp.arange(20).reshape(4, 5) % 3 == 0,)),
                         C((3, 4), key=(Ellipsis, None, slice(None, None, -2)))],
                        ref=lambda x, key: x[key])
SPECS["scatter_add"] = Spec([C((3,), key=(onp.array([0, 2, 2]),), shape=(4,)),
                             C((2, 2), key=(slice(1, 3), slice(0, 2)), shape=(4, 3))],
                            ref=lambda v, key, shape: _scatter_ref(v, key, shape))
SPECS["take"] = Spec([C((5, 3), indices=onp.array([0, 2, 2, 4]), axis=0),
                      C((5, 3), indices=onp.array([[1, 0], [7, 7]]), axis=None),
                      C((2, 5), indices=onp.array(3), axis=1)])
SPECS["take_along_axis"] = Spec([C((3, 4), indices=onp.array([[0, 1], [3, 3], [2, 0]]),
                                   axis=1)])


def _labels(rng, shape):
    # float labels as MXNet passes them, some out of range (clipped or wrapped)
    return rng.integers(-2, 7, shape).astype(onp.float32)


def _pick_ref(x, index, axis, mode, keepdims):
    idx = index.astype(onp.intp)
    n = x.shape[axis]
    idx = onp.clip(idx, 0, n - 1) if mode == "clip" else idx % n
    out = onp.take_along_axis(x, onp.expand_dims(idx, axis) if idx.ndim < x.ndim else idx, axis)
    return out if keepdims else onp.squeeze(out, axis)


SPECS["pick_along_axis"] = Spec([C((3, 4), (3,), axis=1, mode="clip", keepdims=False),
                      C((3, 4), (4,), axis=0, mode="wrap", keepdims=True),
                      C((2, 5, 3), (2, 1, 3), axis=1, mode="clip", keepdims=False)],
                     make={1: _labels}, nondiff={1}, ref=_pick_ref)
SPECS["where"] = Spec([C((3, 4), (3, 4), (3, 4)), C((3, 4), (4,), ())], make={0: bool_mask},
                      nondiff={0})
SPECS["concatenate"] = Spec([C((2, 3), (4, 3), axis=0, sizes=(2, 4)),
                             C((2, 3), (2, 1), axis=1, sizes=(3, 1))], variadic=True,
                            ref=lambda *xs, axis, sizes: onp.concatenate(xs, axis=axis))
SPECS["stack"] = Spec([C((2, 3), (2, 3), axis=0), C((3,), (3,), (3,), axis=1)],
                      variadic=True, ref=lambda *xs, axis: onp.stack(xs, axis=axis))
SPECS["split"] = Spec([C((6, 3), indices=(2, 4), axis=0), C((2, 5), indices=(1,), axis=1)],
                      ref=_split_ref)
SPECS["clip"] = Spec([C((3, 4), a_min=-1.0, a_max=1.0), C((5,), a_min=0.0)],
                     ref=lambda x, a_min=None, a_max=None: onp.clip(x, a_min, a_max))
SPECS["tile"] = Spec([C((2, 3), reps=(2, 1)), C((3,), reps=(2, 2))])
SPECS["repeat"] = Spec([C((2, 3), repeats=2, axis=1), C((3,), repeats=(1, 0, 3), axis=0),
                        C((2, 2), repeats=2)])
SPECS["flip"] = Spec([C((3, 4)), C((3, 4), axis=(1,))])
SPECS["roll"] = Spec([C((3, 4), shift=1), C((3, 4), shift=(1, -2), axis=(0, 1))])
SPECS["rot90"] = Spec([C((3, 4)), C((2, 3, 4), k=3, axes=(1, 2))])
SPECS["pad"] = Spec([C((3, 4), pad_width=((1, 0), (2, 1)), constant_values=0.5)])
SPECS["diag"] = Spec([C((3,)), C((3,), k=1), C((3, 4), k=-1), C((4, 3))])
SPECS["diagonal"] = Spec([C((3, 4)), C((2, 3, 4), offset=1, axis1=2, axis2=0)])
SPECS["trace"] = Spec([C((3, 4)), C((2, 3, 4), offset=-1, axis1=1, axis2=2)])
SPECS["triu"] = Spec([C((3, 4)), C((2, 3, 3), k=1)])
SPECS["tril"] = Spec([C((3, 4)), C((2, 3, 3), k=-1)])
SPECS["sort"] = Spec([C((3, 4)), C((3, 4), axis=0)], make={0: distinct})
SPECS["diff"] = Spec([C((3, 5)), C((4, 3), n=2, axis=0)])

# linear algebra
SPECS["matmul"] = Spec(MATMUL)
SPECS["dot"] = Spec([C((3, 4), (4,)), C((3, 4), (4, 2)), C((2, 3), (4, 3, 2))])
SPECS["tensordot"] = Spec([C((3, 4, 5), (4, 5, 2), axes=((1, 2), (0, 1))),
                           C((3, 4), (5, 3), axes=((0,), (1,))), C((2,), (3,), axes=((), ()))])
SPECS["einsum"] = Spec([C((3, 4), subscripts="ij->ji"), C((3, 4), subscripts="ij->"),
                        C((2, 3, 4), subscripts="ijk->ki")],
                       ref=lambda x, subscripts: onp.einsum(subscripts, x))
SPECS["einsum2"] = Spec([C((3, 4), (4, 2), subscripts="ij,jk->ik"),
                         C((3,), (4,), subscripts="i,j->ij"),
                         C((3, 4), (3, 4), subscripts="ij,ij->"),
                         C((3, 4), (5,), subscripts="ij,k->ik")],
                        ref=lambda x, y, subscripts: onp.einsum(subscripts, x, y))
SPECS["outer"] = Spec([C((3,), (4,)), C((2, 2), (3,))])
SPECS["kron"] = Spec([C((2, 3), (3, 2)), C((2,), (3,)), C((2, 2), (3,))])
SPECS["cross"] = Spec([C((3,), (3,)), C((4, 3), (3,))])
SPECS["convolve"] = Spec([C((5,), (3,)), C((2,), (4,))],
                         ref=lambda x, y: onp.convolve(x, y, "full"))
SPECS["inv"] = Spec([C((3, 3)), C((2, 3, 3))], make={0: well_conditioned},
                    ref=onp.linalg.inv)
SPECS["det"] = Spec([C((3, 3)), C((2, 3, 3))], make={0: well_conditioned},
                    ref=onp.linalg.det)
SPECS["slogdet"] = Spec([C((3, 3)), C((2, 3, 3))], make={0: well_conditioned},
                        ref=lambda x: tuple(onp.linalg.slogdet(x)))
SPECS["logdet"] = Spec([C((3, 3)), C((2, 3, 3))], make={0: well_conditioned},
                       ref=lambda x: onp.log(onp.linalg.det(x)))
SPECS["solve"] = Spec([C((3, 3), (3,)), C((3, 3), (3, 2)), C((2, 3, 3), (2, 3, 2))],
                      make={0: well_conditioned},
                      ref=lambda a, b: onp.linalg.solve(a, b))
SPECS["cholesky"] = Spec([C((3, 3)), C((2, 3, 3))], make={0: spd},
                         ref=lambda x: onp.linalg.cholesky(_herm(x)))
SPECS["eigh"] = Spec([C((3, 3)), C((2, 4, 4))], post=_eigvec_post,
                     ref=lambda x: tuple(onp.linalg.eigh(_herm(x))))
SPECS["eigvalsh"] = Spec([C((3, 3)), C((2, 4, 4))],
                         ref=lambda x: onp.linalg.eigvalsh(_herm(x)))
SPECS["qr"] = Spec([C((4, 3)), C((3, 3))], make={0: well_conditioned},
                   ref=lambda x: tuple(onp.linalg.qr(x)))
SPECS["pinv"] = Spec([C((4, 3)), C((3, 4)), C((2, 3, 3)), C((3, 3), rtol=1e-3)],
                    make={0: well_conditioned},
                    ref=lambda x, rtol=None: onp.linalg.pinv(x) if rtol is None
                    else onp.linalg.pinv(x, rtol=rtol))
SPECS["svd"] = Spec([C((4, 3)), C((3, 4)), C((3, 3))], post=_svd_post,
                    ref=lambda x: tuple(onp.linalg.svd(x, full_matrices=False)))

# convolution and pooling
_CONV = [C((2, 2, 4, 4), (3, 2, 3, 3), stride=(1, 1), pad=(1, 1), dilate=(1, 1)),
         C((1, 2, 6, 5), (2, 2, 2, 2), stride=(2, 1), pad=(0, 1), dilate=(2, 1))]
SPECS["conv2d"] = Spec(_CONV, ref=_conv_ref)
SPECS["conv2d_bias"] = Spec(
    [C((2, 2, 4, 4), (3, 2, 3, 3), (3,), stride=(1, 1), pad=(1, 1), dilate=(1, 1)),
     C((1, 2, 6, 5), (2, 2, 2, 2), (2,), stride=(2, 1), pad=(0, 1), dilate=(2, 1))],
    ref=lambda x, w, b, stride, pad, dilate: _conv_ref(x, w, stride, pad, dilate)
    + b[None, :, None, None])
SPECS["conv2d_input_grad"] = Spec(
    [C((2, 3, 4, 4), (3, 2, 3, 3), stride=(1, 1), pad=(1, 1), dilate=(1, 1), x_hw=(4, 4)),
     C((1, 2, 2, 6), (2, 2, 2, 2), stride=(2, 1), pad=(0, 1), dilate=(2, 1), x_hw=(6, 5))],
    ref=_conv_input_grad_ref)
SPECS["conv2d_weight_grad"] = Spec(
    [C((2, 2, 4, 4), (2, 3, 4, 4), stride=(1, 1), pad=(1, 1), dilate=(1, 1), kernel=(3, 3)),
     C((1, 2, 6, 5), (1, 2, 2, 6), stride=(2, 1), pad=(0, 1), dilate=(2, 1), kernel=(2, 2))],
    ref=_conv_weight_grad_ref)
SPECS["im2col"] = Spec(
    [C((2, 2, 4, 4), kernel=(3, 3), stride=(1, 1), pad=(1, 1), dilate=(1, 1)),
     C((1, 2, 6, 5), kernel=(2, 2), stride=(2, 1), pad=(0, 1), dilate=(2, 1)),
     C((2, 2, 6, 5), kernel=(2, 3), stride=(2, 1), pad=(1, 1), dilate=(1, 2),
       batch_last=True)],
    ref=_im2col_ref)
SPECS["conv2d_product"] = Spec([C((3, 4), (4, 5)), C((1, 6), (6, 2))], ref=onp.matmul)
SPECS["conv2d_product_bias"] = Spec([C((3, 4), (4, 5), (3,)), C((1, 6), (6, 2), (1,))],
                                   ref=lambda w, cols, b: w @ cols + b[:, None])
SPECS["col2im"] = Spec(
    [C((18, 32), x_shape=(2, 2, 4, 4), kernel=(3, 3), stride=(1, 1), pad=(1, 1),
       dilate=(1, 1)),
     C((8, 12), x_shape=(1, 2, 6, 5), kernel=(2, 2), stride=(2, 1), pad=(0, 1), dilate=(2, 1)),
     C((12, 24), x_shape=(2, 2, 6, 5), kernel=(2, 3), stride=(2, 1), pad=(1, 1), dilate=(1, 2),
       batch_last=True)],
    ref=_col2im_ref)
_POOL = [C((2, 2, 4, 4), kernel=(2, 2), stride=(2, 2), pad=(0, 0)),
         C((1, 2, 5, 4), kernel=(3, 2), stride=(1, 2), pad=(1, 1))]
SPECS["max_pool2d"] = Spec(_POOL, make={0: distinct}, ref=_max_pool_ref)
SPECS["max_pool2d_scatter"] = Spec(
    [C((2, 2, 2, 2), (2, 2, 4, 4), kernel=(2, 2), stride=(2, 2), pad=(0, 0)),
     C((1, 2, 5, 3), (1, 2, 5, 4), kernel=(3, 2), stride=(1, 2), pad=(1, 1))],
    make={1: distinct}, nondiff={1},
    ref=lambda dy, x, **p: onp.einsum("ncij,ncijpq->ncpq", dy, _argmax_mask(x, **p)))
SPECS["max_pool2d_select"] = Spec(
    [C((2, 2, 4, 4), (2, 2, 4, 4), kernel=(2, 2), stride=(2, 2), pad=(0, 0)),
     C((1, 2, 5, 4), (1, 2, 5, 4), kernel=(3, 2), stride=(1, 2), pad=(1, 1))],
    make={1: distinct}, nondiff={1},
    ref=lambda h, x, **p: onp.einsum("ncpq,ncijpq->ncij", h, _argmax_mask(x, **p)))
SPECS["avg_pool2d"] = Spec(_POOL + [C((1, 2, 5, 4), kernel=(3, 2), stride=(1, 2), pad=(1, 1),
                                      count_include_pad=False)], ref=_avg_pool_ref)
SPECS["avg_pool2d_backward"] = Spec(
    [C((2, 2, 2, 2), kernel=(2, 2), stride=(2, 2), pad=(0, 0), count_include_pad=True,
       x_shape=(2, 2, 4, 4)),
     C((1, 2, 5, 3), kernel=(3, 2), stride=(1, 2), pad=(1, 1), count_include_pad=False,
       x_shape=(1, 2, 5, 4))], ref=_avg_pool_backward_ref)

SPECS["astype"] = Spec([C((3, 4), dtype=onp.dtype("float64"))], f32=False,
                       ref=lambda x, dtype: x.astype(dtype))
SPECS["copy"] = Spec(UNARY, ref=onp.copy)


def _scatter_ref(v, key, shape):
    out = onp.zeros(shape, dtype=onp.result_type(v, onp.float64))
    onp.add.at(out, key, v)
    return out


# ---------------------------------------------------------------- composites
npx, np_ = mx.npx, mx.np
COMPOSITE_SPECS = {
    "npx.softmin": Spec([C((3, 4))], call=npx.softmin, ref=lambda x: _softmax(-x)),
    "npx.activation": Spec([C((3, 4))], call=lambda x: npx.activation(x, "softrelu"),
                           ref=_softplus),
    "npx.dropout": Spec([C((4, 5))], call=_dropout_call, ref=_dropout_ref, f32=False),
    "npx.fully_connected": Spec([C((2, 3, 2), (4, 6), (4,))],
                                call=lambda x, w, b: npx.fully_connected(x, w, b, num_hidden=4),
                                ref=lambda x, w, b: x.reshape(2, -1) @ w.T + b),
    "npx.convolution": Spec([C((2, 2, 5, 5), (3, 2, 3, 3), (3,))],
                            call=lambda x, w, b: npx.convolution(x, w, b, kernel=(3, 3),
                                                                 stride=2, pad=1, num_filter=3),
                            ref=lambda x, w, b: _conv_ref(x, w, (2, 2), (1, 1), (1, 1))
                            + b.reshape(1, -1, 1, 1)),
    "npx.pooling": Spec([C((2, 3, 4, 4))], call=lambda x: npx.pooling(x, pool_type="avg",
                                                                      global_pool=True),
                        ref=lambda x: x.mean(axis=(2, 3), keepdims=True)),
    "npx.batch_norm": Spec([C((4, 3, 2, 2), (3,), (3,))], call=_bn_call, ref=_batch_norm_ref),
    "npx.layer_norm": Spec([C((3, 5), (5,), (5,))], call=npx.layer_norm, ref=_layer_norm_ref),
    "npx.group_norm": Spec([C((2, 4, 3), (4,), (4,))],
                           call=lambda x, g, b: npx.group_norm(x, g, b, num_groups=2),
                           ref=lambda x, g, b: (
                               (x.reshape(2, 2, -1) - x.reshape(2, 2, -1).mean(-1, keepdims=True))
                               / onp.sqrt(x.reshape(2, 2, -1).var(-1, keepdims=True) + 1e-5)
                           ).reshape(x.shape) * g.reshape(1, -1, 1) + b.reshape(1, -1, 1)),
    "npx.instance_norm": Spec([C((2, 3, 4), (3,), (3,))], call=npx.instance_norm,
                              ref=lambda x, g, b: (x - x.mean(-1, keepdims=True))
                              / onp.sqrt(x.var(-1, keepdims=True) + 1e-3)
                              * g.reshape(1, -1, 1) + b.reshape(1, -1, 1)),
    "npx.l2_normalization": Spec([C((3, 4))], call=npx.l2_normalization,
                                 ref=lambda x: x / onp.sqrt((x * x).sum(1, keepdims=True)
                                                            + 1e-10)),
    "npx.embedding": Spec([C((5, 3))], call=lambda w: npx.embedding(onp.array([[0, 4], [4, 2]]),
                                                                     w),
                          ref=lambda w: w[onp.array([[0, 4], [4, 2]])]),
    "npx.pick": Spec([C((3, 4))], call=lambda x: npx.pick(x, onp.array([0, 3, 3])),
                     ref=lambda x: x[onp.arange(3), [0, 3, 3]]),
    "npx.softmax_cross_entropy": Spec(
        [C((3, 4))], call=lambda x: npx.softmax_cross_entropy(x, onp.array([1, 0, 3])),
        ref=lambda x: -_log_softmax(x)[onp.arange(3), [1, 0, 3]].sum()),
    "npx.batch_flatten": Spec([C((2, 3, 2))], call=npx.batch_flatten,
                              ref=lambda x: x.reshape(2, -1)),
    "npx.batch_dot": Spec([C((2, 3, 4), (2, 2, 4))],
                          call=lambda a, b: npx.batch_dot(a, b, transpose_b=True),
                          ref=lambda a, b: a @ onp.swapaxes(b, 1, 2)),
    "npx.topk": Spec([C((3, 5))], make={0: distinct},
                     call=lambda x: npx.topk(x, k=2, ret_typ="value"),
                     ref=lambda x: -onp.sort(-x, axis=-1)[:, :2]),
    "np.median": Spec([C((3, 4), axis=1), C((5,))], make={0: distinct},
                      call=np_.median, ref=onp.median),
    "np.quantile": Spec([C((3, 5), axis=1)], make={0: distinct},
                        call=lambda x, axis: np_.quantile(x, [0.3, 0.8], axis=axis),
                        ref=lambda x, axis: onp.quantile(x, [0.3, 0.8], axis=axis)),
    "np.correlate": Spec([C((5,), (3,), mode="same"), C((2,), (4,), mode="same"),
                          C((5,), (3,), mode="valid")], call=np_.correlate, ref=onp.correlate),
    "np.convolve": Spec([C((5,), (3,), mode="same"), C((2,), (5,), mode="same")],
                        call=np_.convolve, ref=onp.convolve),
    "np.trapezoid": Spec([C((3, 4))], call=np_.trapezoid, ref=onp.trapezoid),
    "np.polyval": Spec([C((3,), (4,))], call=np_.polyval, ref=onp.polyval),
    "np.einsum3": Spec([C((2, 3), (3, 4), (4,))],
                       call=lambda a, b, c: np_.einsum("ij,jk,k->i", a, b, c),
                       ref=lambda a, b, c: onp.einsum("ij,jk,k->i", a, b, c)),
    "np.einsum_ellipsis": Spec([C((2, 3, 4), (4, 2))],
                               call=lambda a, b: np_.einsum("...ij,jk", a, b),
                               ref=lambda a, b: onp.einsum("...ij,jk", a, b)),
    "np.linalg.norm_2": Spec([C((3, 4))], call=lambda x: np_.linalg.norm(x, 2),
                             ref=lambda x: onp.linalg.norm(x, 2)),
    "np.linalg.norm_nuc": Spec([C((3, 4))], call=lambda x: np_.linalg.norm(x, "nuc"),
                               ref=lambda x: onp.linalg.norm(x, "nuc")),
    "np.linalg.pinv": Spec([C((4, 3))], make={0: well_conditioned}, call=np_.linalg.pinv,
                           ref=onp.linalg.pinv),
    "np.linalg.slogdet": Spec([C((3, 3)), C((2, 3, 3))], make={0: well_conditioned},
                              call=np_.linalg.slogdet, ref=lambda x: tuple(onp.linalg.slogdet(x))),
    "np.linalg.eigh_upper": Spec([C((3, 3))],
                                 call=lambda x: _eigvec_post(np_.linalg.eigh(x, UPLO="U")),
                                 ref=lambda x: _eigvec_post(onp.linalg.eigh(x, UPLO="U"))),
    "np.linalg.cholesky_upper": Spec([C((3, 3))], make={0: spd},
                                     call=lambda x: np_.linalg.cholesky(x, upper=True),
                                     ref=lambda x: onp.linalg.cholesky(_herm(x), upper=True)),
    "np.linalg.matrix_power": Spec([C((3, 3))], call=lambda a: np_.linalg.matrix_power(a, 3),
                                   ref=lambda a: onp.linalg.matrix_power(a, 3)),
    "np.inner": Spec([C((2, 3), (4, 3))], call=np_.inner, ref=onp.inner),
    "np.vdot": Spec([C((2, 3), (2, 3))], call=np_.vdot, ref=onp.vdot),
    "np.ptp": Spec([C((3, 4), axis=1)], make={0: distinct}, call=np_.ptp, ref=onp.ptp),
    "np.hstack": Spec([C((2, 3), (2, 1))], call=lambda a, b: np_.hstack([a, b]),
                      ref=lambda a, b: onp.hstack([a, b])),
    "np.vstack": Spec([C((3,), (2, 3))], call=lambda a, b: np_.vstack([a, b]),
                      ref=lambda a, b: onp.vstack([a, b])),
    "np.average_1d_weights": Spec([C((3, 4), (4,))], make={1: positive_weights},
                                  call=lambda a, w: np_.average(a, axis=1, weights=w),
                                  ref=lambda a, w: onp.average(a, axis=1, weights=w)),
}


# ---------------------------------------------------------------- complex parts and FFTs
# Complex values are made inside the call (to_complex, or an FFT of a real input) and split
# back into real and imaginary parts by ``post``; test_fft.py differentiates complex inputs
# along both parts.
_P_ = REGISTRY
_parts = (lambda out: (onp.real(out), onp.imag(out)))
SPECS["to_complex"] = Spec([C((3, 4))], post=_parts, ref=lambda x: x.astype(complex))
SPECS["times_i"] = Spec([C((3, 4))], post=_parts, ref=lambda x: 1j * x)
SPECS["imag"] = Spec([C((5,))], call=lambda x: _P_["imag"](
    _P_["fftn_c2c"](_P_["to_complex"](x), (0,), "backward", False)),
    ref=lambda x: onp.imag(onp.fft.fft(x)))
SPECS["fftn_c2c"] = Spec(
    [C((6,), axes=(0,), norm="backward", inverse=False),
     C((3, 4), axes=(0, 1), norm="ortho", inverse=True),
     C((2, 3, 4), axes=(2, 0), norm="forward", inverse=False)],
    call=lambda x, **p: _P_["fftn_c2c"](_P_["to_complex"](x), **p), post=_parts,
    ref=lambda x, axes, norm, inverse: (onp.fft.ifftn if inverse else onp.fft.fftn)(
        x, axes=axes, norm=norm))
SPECS["rfftn"] = Spec(
    [C((6,), axes=(0,), norm="backward"), C((3, 5), axes=(0, 1), norm="ortho"),
     C((4, 3), axes=(1, 0), norm="forward")], post=_parts,
    ref=lambda x, axes, norm: onp.fft.rfftn(x, axes=axes, norm=norm))
SPECS["irfftn"] = Spec(
    [C((4,), axes=(0,), n=6, norm="backward"), C((4,), axes=(0,), n=7, norm="ortho"),
     C((3, 3), axes=(0, 1), n=5, norm="forward")],
    call=lambda x, **p: _P_["irfftn"](_P_["to_complex"](x), **p),
    ref=lambda x, axes, n, norm: onp.fft.irfftn(
        x, s=[x.shape[a] for a in axes[:-1]] + [n], axes=axes, norm=norm))


# ---------------------------------------------------------------- SciPy (fastgrad.scipy)
import scipy.linalg as _sla  # noqa: E402
import scipy.signal as _ssig  # noqa: E402
import scipy.special as _ssp  # noqa: E402


def _orders(rng, shape):
    return rng.integers(0, 3, shape)


def _signed_away_from_zero(rng, shape):
    return rng.uniform(0.2, 2.0, shape) * rng.choice([-1, 1], shape)


def _triangular(lower):
    def make(rng, shape):
        a = rng.uniform(-1, 1, shape) + 3 * onp.eye(shape[0])
        return onp.tril(a) if lower else onp.triu(a)
    return make


def _special(names, domain=(0.5, 3.0), cases=None, **kw):
    for name in names.split():
        SPECS[name] = Spec(cases or [C((3, 4)), C(())], domain=domain,
                           ref=getattr(_ssp, name), **kw)


_special("gamma gammaln rgamma digamma")


def _with_gamma_poles(rng, shape):
    """Every other element a pole of Gamma (0, -1, -2, -3), the rest in (0.5, 3); a 0-d
    input is a pole."""
    a = rng.uniform(0.5, 3.0, shape)
    a.flat[::2] = -rng.integers(0, 4, a.flat[::2].shape).astype(float)
    return a


# rgamma_taylor is only ever taken at the poles of Gamma, by rgamma's rule (Note [rgamma at
# the poles]): it is checked through rgamma at inputs that hold poles.
SPECS["rgamma_taylor"] = Spec([C((3, 4)), C(())], make={0: _with_gamma_poles},
                              ref=_ssp.rgamma, call=lambda x: REGISTRY["rgamma"](x),
                              called="rgamma")
_special("beta betaln", cases=[C((3, 4), (4,))])
_special("erfc j0 j1", domain=(-2.0, 2.0))
_special("erfcinv", domain=(0.1, 1.9))
_special("ndtr", domain=(-2.0, 2.0))
_special("log_ndtr", domain=(-3.0, 3.0))
SPECS["log_ndtr_slope"] = Spec([C((3, 4)), C(())], domain=(-3.0, 3.0),
                               ref=lambda x: onp.exp(-0.5 * x * x - _ssp.log_ndtr(x)) / math.sqrt(2 * math.pi))
_special("ndtri logit", domain=(0.1, 0.9))
_special("y0 y1", domain=(0.5, 3.0))
_special("i0 i1", domain=(-2.0, 2.0))
SPECS["i0"].ref = onp.i0
SPECS["i0e"] = Spec([C((3, 4))], make={0: _signed_away_from_zero}, ref=_ssp.i0e)
SPECS["i1e"] = Spec([C((3, 4))], make={0: _signed_away_from_zero}, ref=_ssp.i1e)
SPECS["xlogy"] = Spec([C((3, 4), (4,))], domain=[(-2, 2), (0.5, 2)], ref=_ssp.xlogy)
SPECS["xlog1py"] = Spec([C((3, 4), (4,))], domain=[(-2, 2), (-0.5, 2)], ref=_ssp.xlog1py)
SPECS["polygamma"] = Spec([C((3, 4), (3, 4))], make={0: _orders}, domain=(0.5, 3.0),
                          ref=_ssp.polygamma)
for _name in ("iv", "jv", "yv"):
    SPECS[_name] = Spec([C((3, 4), (3, 4)), C((4,), ())], make={0: _orders},
                        domain=(0.5, 3.0), ref=getattr(_ssp, _name))
SPECS["ive"] = Spec([C((3, 4), (3, 4))], make={0: _orders, 1: _signed_away_from_zero},
                    ref=_ssp.ive)
SPECS["gammainc"] = Spec([C((3, 4), (3, 4)), C((), (5,))], domain=[(0.5, 3), (0.2, 3)],
                         nondiff={0}, ref=_ssp.gammainc)
SPECS["gammaincc"] = Spec([C((3, 4), (3, 4))], domain=[(0.5, 3), (0.2, 3)], nondiff={0},
                          ref=_ssp.gammaincc)
SPECS["betainc"] = Spec([C((3, 4), (4,), (3, 4))], domain=[(0.5, 3), (0.5, 3), (0.1, 0.9)],
                        nondiff={0, 1}, ref=_ssp.betainc)
SPECS["stdtr"] = Spec([C((3, 4), (3, 4))], domain=[(1, 5), (-2, 2)], nondiff={0},
                      ref=_ssp.stdtr)
SPECS["convolve_full"] = Spec([C((5,), (3,)), C((3, 4), (2, 3))],
                              ref=lambda x, y: _ssig.convolve(x, y, mode="full"))
SPECS["convolve_valid"] = Spec([C((5,), (3,)), C((4, 5), (2, 3)), C((2, 3, 4), (1, 2, 2))],
                               ref=lambda x, y: _ssig.convolve(x, y, mode="valid"))
def _solve_triangular_ref(a, b, lower, trans, unit_diagonal):
    return _sla.solve_triangular(a, b, lower=lower, trans=trans, unit_diagonal=unit_diagonal)


SPECS["solve_triangular"] = Spec(
    [C((3, 3), (3,), lower=True, trans=0, unit_diagonal=False),
     C((3, 3), (3, 2), lower=True, trans=1, unit_diagonal=False),
     C((4, 4), (4, 2), lower=True, trans=0, unit_diagonal=True)],
    make={0: _triangular(True)}, ref=_solve_triangular_ref)
SPECS["solve_triangular_upper"] = Spec(
    [C((3, 3), (3, 2), lower=False, trans=1, unit_diagonal=False)],
    make={0: _triangular(False)}, ref=_solve_triangular_ref,
    call=lambda a, b, **p: REGISTRY["solve_triangular"](a, b, **p))
SPECS["expm"] = Spec([C((3, 3)), C((2, 2, 2))], domain=(-1, 1), ref=_sla.expm)
SPECS["sqrtm"] = Spec([C((3, 3))], make={0: spd}, ref=lambda a: _sla.sqrtm(a).real)
SPECS["sylvester"] = Spec([C((3, 3), (2, 2), (3, 2))],
                          make={0: well_conditioned, 1: well_conditioned},
                          ref=_sla.solve_sylvester)


# ---------------------------------------------------------------- more of NumPy
def _eig_parts(out):
    w, v = out
    return onp.real(w), onp.imag(w), onp.real(v) ** 2 + onp.imag(v) ** 2


def _complete_ref(u):
    q = onp.linalg.qr(u, mode="complete")[0]
    return onp.concatenate([u, q[..., u.shape[-1]:]], axis=-1)


def _orthonormal_columns(rng, shape):
    return onp.linalg.qr(rng.uniform(-1, 1, shape))[0]


SPECS["eig"] = Spec([C((3, 3)), C((2, 4, 4))], post=_eig_parts,
                    ref=lambda x: onp.linalg.eig(x))
# Only the given columns are differentiable: the weights of the loss on the completed ones
# are zero through ``post``.
SPECS["complete_basis"] = Spec([C((4, 2))], make={0: _orthonormal_columns},
                               post=lambda out: out[..., :2] * 1.0, ref=_complete_ref)
COMPOSITE_SPECS.update({
    "np.gradient": Spec([C((5,)), C((4, 3))], call=np_.gradient, ref=onp.gradient),
    "np.gradient_edge2_coords": Spec(
        [C((5, 3))], call=lambda f: np_.gradient(f, onp.array([0., 0.5, 1.5, 1.7, 3.0]), 2.0,
                                                 edge_order=2),
        ref=lambda f: onp.gradient(f, onp.array([0., 0.5, 1.5, 1.7, 3.0]), 2.0,
                                   edge_order=2)),
    "np.partition": Spec([C((3, 5))], make={0: distinct},
                         call=lambda a: np_.partition(a, 2, axis=1),
                         ref=lambda a: onp.partition(a, 2, axis=1)),
    "np.select": Spec([C((4,), (4,), ())],
                      call=lambda a, b, d: np_.select([onp.array([1, 0, 0, 1], bool),
                                                       onp.array([1, 1, 0, 0], bool)], [a, b], d),
                      ref=lambda a, b, d: onp.select([onp.array([1, 0, 0, 1], bool),
                                                      onp.array([1, 1, 0, 0], bool)], [a, b], d)),
    "np.meshgrid": Spec([C((3,), (2,))], call=lambda x, y: tuple(np_.meshgrid(x, y)),
                        ref=lambda x, y: tuple(onp.meshgrid(x, y))),
    "np.meshgrid_ij_sparse": Spec([C((3,), (2,), (4,))],
                                  call=lambda x, y, z: tuple(np_.meshgrid(x, y, z, indexing="ij",
                                                                          sparse=True)),
                                  ref=lambda x, y, z: tuple(onp.meshgrid(x, y, z, indexing="ij",
                                                                         sparse=True))),
    "np.dsplit": Spec([C((2, 2, 6))], call=lambda a: tuple(np_.dsplit(a, 3)),
                      ref=lambda a: tuple(onp.dsplit(a, 3))),
    "np.linalg.eigvals": Spec([C((3, 3))], call=np_.linalg.eigvals,
                              post=lambda w: (onp.real(w), onp.imag(w)),
                              ref=onp.linalg.eigvals),
    "np.linalg.lstsq": Spec([C((5, 3), (5, 2))], call=lambda a, b: np_.linalg.lstsq(a, b)[:2],
                            ref=lambda a, b: onp.linalg.lstsq(a, b)[:2]),
    "np.linalg.svd_full": Spec([C((4, 2)), C((2, 3))],
                               call=lambda a: _svd_used(np_.linalg.svd(a)),
                               ref=lambda a: _svd_used(onp.linalg.svd(a))),
    "np.einsum_interleaved": Spec([C((2, 3), (3, 4))],
                                  call=lambda a, b: np_.einsum(a, [0, 1], b, [1, 2], [0, 2]),
                                  ref=lambda a, b: onp.einsum(a, [0, 1], b, [1, 2], [0, 2])),
    "np.einsum_trace": Spec([C((3, 3))], call=lambda a: np_.einsum("ii->", a),
                            ref=lambda a: onp.einsum("ii->", a)),
    "np.einsum_diagonal_repeated": Spec([C((2, 2, 3))], call=lambda a: np_.einsum("iij->j", a),
                                        ref=lambda a: onp.einsum("iij->j", a)),
})


def _svd_used(usv):
    """The parts of a full SVD that are unique: singular values, and the products of the
    leading singular vectors (sign-free)."""
    u, s, vh = usv
    k = s.shape[-1]
    return s, u[..., :k] @ vh[..., :k, :]


# ---------------------------------------------------------------- npx: other dimensions
import itertools as _it  # noqa: E402


def _conv_nd_ref(x, w, stride, pad, dilate):
    """Direct N-d cross-correlation (MXNet's convolution), by loops over output positions."""
    n = x.ndim - 2
    xp = onp.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    k = w.shape[2:]
    out_shape = [(xp.shape[2 + i] - dilate[i] * (k[i] - 1) - 1) // stride[i] + 1
                 for i in range(n)]
    out = onp.zeros((x.shape[0], w.shape[0]) + tuple(out_shape))
    for pos in _it.product(*[range(s) for s in out_shape]):
        window = xp[(slice(None), slice(None)) + tuple(
            slice(pos[i] * stride[i], pos[i] * stride[i] + dilate[i] * (k[i] - 1) + 1,
                  dilate[i]) for i in range(n))]
        axes = list(range(1, n + 2))
        out[(slice(None), slice(None)) + pos] = onp.tensordot(window, w, (axes, axes))
    return out


def _pool_nd_ref(x, kernel, stride, pad, kind):
    n = x.ndim - 2
    fill = -onp.inf if kind == "max" else 0.0
    xp = onp.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad], constant_values=fill)
    out_shape = [(xp.shape[2 + i] - kernel[i]) // stride[i] + 1 for i in range(n)]
    out = onp.zeros(x.shape[:2] + tuple(out_shape))
    axes = tuple(range(2, 2 + n))
    for pos in _it.product(*[range(s) for s in out_shape]):
        window = xp[(slice(None), slice(None)) + tuple(
            slice(pos[i] * stride[i], pos[i] * stride[i] + kernel[i]) for i in range(n))]
        out[(slice(None), slice(None)) + pos] = (window.max(axis=axes) if kind == "max"
                                                 else window.mean(axis=axes))
    return out


def _deconv_ref(x, w, stride, pad, dilate, adj):
    """Transposed convolution by scattering each input element's contribution."""
    n = x.ndim - 2
    k = w.shape[2:]
    full = [(x.shape[2 + i] - 1) * stride[i] + dilate[i] * (k[i] - 1) + 1 + adj[i]
            for i in range(n)]
    out = onp.zeros((x.shape[0], w.shape[1]) + tuple(full))
    for pos in _it.product(*[range(s) for s in x.shape[2:]]):
        for kp in _it.product(*[range(s) for s in k]):
            at = tuple(pos[i] * stride[i] + kp[i] * dilate[i] for i in range(n))
            out[(slice(None), slice(None)) + at] += onp.einsum(
                "nc,cf->nf", x[(slice(None), slice(None)) + pos],
                w[(slice(None), slice(None)) + kp])
    return out[(slice(None), slice(None)) + tuple(slice(p, f - p) for p, f in zip(pad, full))]


_GATHER_IDX = onp.array([[1, 0, 2, 1], [2, 1, 0, 2]])
COMPOSITE_SPECS.update({
    "npx.convolution_1d": Spec(
        [C((2, 2, 7), (3, 2, 3), (3,))],
        call=lambda x, w, b: npx.convolution(x, w, b, kernel=(3,), stride=2, pad=1, dilate=1,
                                             num_filter=3),
        ref=lambda x, w, b: _conv_nd_ref(x, w, (2,), (1,), (1,)) + b.reshape(1, -1, 1)),
    "npx.convolution_3d": Spec(
        [C((1, 2, 4, 4, 3), (2, 2, 2, 3, 2), (2,))],
        call=lambda x, w, b: npx.convolution(x, w, b, kernel=(2, 3, 2), stride=(2, 1, 1),
                                             pad=(1, 1, 0), dilate=(1, 1, 2), num_filter=2),
        ref=lambda x, w, b: _conv_nd_ref(x, w, (2, 1, 1), (1, 1, 0), (1, 1, 2))
        + b.reshape(1, -1, 1, 1, 1)),
    "npx.pooling_1d_max": Spec([C((2, 2, 7))], make={0: distinct},
                               call=lambda x: npx.pooling(x, kernel=3, stride=2, pad=1),
                               ref=lambda x: _pool_nd_ref(x, (3,), (2,), (1,), "max")),
    "npx.pooling_3d_max": Spec([C((1, 2, 4, 4, 3))], make={0: distinct},
                               call=lambda x: npx.pooling(x, kernel=(2, 2, 2), stride=(2, 1, 1),
                                                          pad=(1, 0, 1)),
                               ref=lambda x: _pool_nd_ref(x, (2, 2, 2), (2, 1, 1), (1, 0, 1),
                                                          "max")),
    "npx.pooling_3d_avg": Spec([C((1, 2, 4, 3, 3))],
                               call=lambda x: npx.pooling(x, kernel=(3, 2, 2), stride=1,
                                                          pad=(1, 1, 0), pool_type="avg"),
                               ref=lambda x: _pool_nd_ref(x, (3, 2, 2), (1, 1, 1), (1, 1, 0),
                                                          "avg")),
    "npx.pooling_1d_sum": Spec([C((2, 3, 6))],
                               call=lambda x: npx.pooling(x, kernel=2, stride=2,
                                                          pool_type="sum"),
                               ref=lambda x: 2 * _pool_nd_ref(x, (2,), (2,), (0,), "avg")),
    "npx.deconvolution": Spec(
        [C((1, 2, 3, 3), (2, 3, 2, 3), (3,))],
        call=lambda x, w, b: npx.deconvolution(x, w, b, kernel=(2, 3), stride=(2, 1),
                                               pad=(1, 1), adj=(1, 0), num_filter=3),
        ref=lambda x, w, b: _deconv_ref(x, w, (2, 1), (1, 1), (1, 1), (1, 0))
        + b.reshape(1, -1, 1, 1)),
    "npx.deconvolution_1d": Spec(
        [C((2, 2, 4), (2, 1, 3))],
        call=lambda x, w: npx.deconvolution(x, w, kernel=3, stride=2, dilate=2),
        ref=lambda x, w: _deconv_ref(x, w, (2,), (0,), (2,), (0,))),
    "npx.reshape_like": Spec([C((6, 2), (3, 4))], nondiff={1},
                             call=lambda a, b: npx.reshape_like(a, b),
                             ref=lambda a, b: a.reshape(b.shape)),
    "npx.sequence_mask": Spec([C((4, 3, 2))],
                              call=lambda x: npx.sequence_mask(x, onp.array([1, 4, 2]), True,
                                                               value=-1.0),
                              ref=lambda x: onp.where(
                                  (onp.arange(4)[:, None] < onp.array([1, 4, 2]))[..., None],
                                  x, -1.0)),
    "npx.gather_nd": Spec([C((3, 4, 2))], call=lambda x: npx.gather_nd(x, _GATHER_IDX),
                          ref=lambda x: x[tuple(_GATHER_IDX)]),
    "npx.scatter_nd": Spec([C((4, 2))],
                           call=lambda v: npx.scatter_nd(v, _GATHER_IDX, (3, 4, 2)),
                           ref=lambda v: _scatter_ref(v, tuple(_GATHER_IDX), (3, 4, 2))),
})
COMPOSITE_SPECS.update({
    # the range and the number are float64/int64, which promote the result as in NumPy
    "np.r_": Spec([C((3,), (2,))], f32=False, call=lambda a, b: np_.r_[a, 0.5, b * 2, 0:2],
                  ref=lambda a, b: onp.r_[a, 0.5, b * 2, 0:2]),
    "np.c_": Spec([C((3,), (3, 2))], call=lambda a, b: np_.c_[a, b],
                  ref=lambda a, b: onp.c_[a, b]),
})


# ---------------------------------------------------------------- npx.rnn
def _lstm_bi_ref(x, params, h0, c0, hidden=3):
    """One bidirectional LSTM layer in NumPy, MXNet's parameter layout."""
    steps, _, size = x.shape
    g = 4 * hidden
    sizes = [g * size, g * hidden] * 2
    cuts = onp.cumsum(sizes)
    wx = [params[0:cuts[0]].reshape(g, size), params[cuts[1]:cuts[2]].reshape(g, size)]
    wh = [params[cuts[0]:cuts[1]].reshape(g, hidden), params[cuts[2]:cuts[3]].reshape(g, hidden)]
    b = params[cuts[3]:]
    bx = [b[0:g], b[2 * g:3 * g]]
    bh = [b[g:2 * g], b[3 * g:4 * g]]
    outs = []
    for d in range(2):
        h, c = h0[d], c0[d]
        hs = [None] * steps
        for t in (range(steps) if d == 0 else range(steps - 1, -1, -1)):
            z = x[t] @ wx[d].T + bx[d] + h @ wh[d].T + bh[d]
            i, f, gg, o = onp.split(z, 4, axis=-1)
            c = _sigmoid(f) * c + _sigmoid(i) * onp.tanh(gg)
            h = _sigmoid(o) * onp.tanh(c)
            hs[t] = h
        outs.append(onp.stack(hs))
    return onp.concatenate(outs, axis=-1)


COMPOSITE_SPECS["npx.rnn"] = Spec(
    [C((3, 2, 2), (2 * (12 * 2 + 12 * 3 + 24),), (2, 2, 3), (2, 2, 3))], domain=(-1, 1),
    call=lambda x, p, h, c: npx.rnn(x, p, h, c, mode="lstm", state_size=3, num_layers=1,
                                    bidirectional=True),
    ref=_lstm_bi_ref)


# ---------------------------------------------------------------- CTC (Note [CTC loss])
def _ctc_brute_force(data, label, data_lengths, label_lengths, blank_label="first"):
    """``(loss per sample, d loss / d data)`` by enumerating every alignment path of every
    sample: independent of the alpha-beta recursion it checks (tiny shapes only)."""
    steps, batch, classes = data.shape
    blank = 0 if blank_label == "first" else classes - 1
    pad = 0 if blank_label == "first" else -1
    y = _softmax(onp.asarray(data, dtype=onp.float64), axis=-1)
    loss, grad = onp.zeros(batch), onp.zeros((steps, batch, classes))
    for n in range(batch):
        t_n = steps if data_lengths[n] < 0 else int(data_lengths[n])
        row = [int(v) for v in label[n]]
        l_n = int(label_lengths[n]) if label_lengths[n] >= 0 else \
            (row.index(pad) if pad in row else len(row))
        target = row[:l_n]
        p, occ = 0.0, onp.zeros((t_n, classes))
        for path in itertools.product(range(classes), repeat=t_n):
            collapsed = [k for i, k in enumerate(path) if i == 0 or k != path[i - 1]]
            if [k for k in collapsed if k != blank] != target:
                continue
            prob = onp.prod([y[t, n, k] for t, k in enumerate(path)])
            p += prob
            for t, k in enumerate(path):
                occ[t, k] += prob
        loss[n] = -onp.log(p) if p > 0 else onp.inf
        if p > 0:
            grad[:t_n, n] = y[:t_n, n] - occ / p
    return loss, grad


def _ctc_labels(rng, shape):
    # sample 0: a repeated symbol (needs a blank between), sample 1: padded after one symbol
    return onp.array([[1, 1, 2][:shape[1]], [2, 0, 0][:shape[1]]], dtype=onp.float64)


def _ctc_labels_last(rng, shape):
    return onp.array([[0, 1], [1, -1]], dtype=onp.float64)


def _ctc_lengths(*values):
    return lambda rng, shape: onp.array(values, dtype=onp.float64)


_CTC_SHAPES = ((4, 2, 3), (2, 2), (2,), (2,))
# the op's forward is the loss; ctc_loss_grad's forward is its derivative, checked exactly
# against the enumeration; its own derivative raises (list_ops order 0), so it has no input
# to differentiate here
SPECS["ctc_loss"] = Spec(
    [C(*_CTC_SHAPES, blank_label="first")],
    make={1: _ctc_labels, 2: _ctc_lengths(4, 3), 3: _ctc_lengths(-1, -1)}, nondiff={1, 2, 3},
    ref=lambda *a, **p: _ctc_brute_force(*a, **p)[0], order2=False)
SPECS["ctc_loss_last_blank"] = Spec(
    [C(*_CTC_SHAPES, blank_label="last")],
    make={1: _ctc_labels_last, 2: _ctc_lengths(-1, 2), 3: _ctc_lengths(2, -1)},
    nondiff={1, 2, 3}, ref=lambda *a, **p: _ctc_brute_force(*a, **p)[0],
    call=lambda *a, **p: REGISTRY["ctc_loss"](*a, **p), order2=False)
SPECS["ctc_loss_grad"] = Spec(
    [C(*_CTC_SHAPES, blank_label="first")],
    make={1: _ctc_labels, 2: _ctc_lengths(4, 3), 3: _ctc_lengths(-1, 1)},
    nondiff={0, 1, 2, 3}, ref=lambda *a, **p: _ctc_brute_force(*a, **p)[1], order2=False)
