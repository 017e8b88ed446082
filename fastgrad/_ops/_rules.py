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
order. ``tests/ops/test_ops.py`` checks the rules of every op to second order.
"""

import numpy as np

from fastgrad._core._array import PRIMITIVES, ndarray
from fastgrad._kernels._forward import SELU_ALPHA, SELU_SCALE, normalize_axis  # noqa: F401
from fastgrad._kernels._forward import broadcast_to as _broadcast_to, pick_positions
from fastgrad._kernels._filled import Filled
from fastgrad._kernels._filled import filled as _filled


class _Ops:
    """The table's ops by name (``ops.scatter_add``, ``ops.erf``, ...), for the helpers.

    Like the NumPy functions the helpers call, each runs its kernel directly on NumPy values
    and the recorded op on fastgrad arrays. Looked up on first use in ``_array.PRIMITIVES``,
    which start-up fills with the registry's primitives (Note [Bootstrap] in _bootstrap.py;
    the registry compiles these helpers into the rules, so they are imported before it).
    """

    def __getattr__(self, name):
        try:
            prim = PRIMITIVES[name]
        except KeyError:
            raise AttributeError("no op named %r in the derivative table" % name) from None
        kernel = prim.forward

        def call(*args):
            filled = False
            for a in args:
                if isinstance(a, ndarray):
                    return prim(*args)
                filled = filled or type(a) is Filled
            if filled:      # a kernel takes NumPy values (Note [Filled gradients])
                args = tuple(a.view() if type(a) is Filled else a for a in args)
            return kernel(*args)
        call.__name__ = call.__qualname__ = name
        setattr(self, name, call)
        return call


ops = _Ops()

LN2 = 0.6931471805599453
LN10 = 2.302585092994046


def real_float(a):
    """The real floating dtype of ``a`` (float32 for float32 and complex64), float64 when
    ``a`` is not a floating array. Constants a rule makes (identities, counts) take it: a
    float64 constant would widen a float32 gradient (Note [Weak scalars] in _bindings.py)."""
    dt = getattr(a, "dtype", None)
    if dt is None or dt.kind not in "fc":
        return np.float64
    return np.finfo(dt).dtype


def eye_like(n, a):
    """The ``n x n`` identity in the real precision of ``a`` (``real_float``)."""
    return np.eye(n, dtype=real_float(a))


def count_true(mask, axis, like):
    """The number of true elements of ``mask`` along ``axis`` (kept), in the real precision
    of ``like`` (an integer count would widen a float32 quotient to float64)."""
    return np.sum(mask, axis=axis, keepdims=True).astype(real_float(like))


def cj(a):
    """The complex conjugate of ``a``; ``a`` itself when it is real (Note [Complex gradients]
    in _complex.py: helpers serve real and complex values with one text)."""
    if getattr(a, "dtype", None) is not None and a.dtype.kind == "c":
        return np.conjugate(a)
    return a


def complex_sign(x, magnitude):
    """``x / |x|`` (0 where ``x`` is 0): the gradient of ``|x|``, written with differentiable
    ops so that it has derivatives of its own for complex ``x``."""
    zero = magnitude == 0
    return np.where(zero, 0, x / np.where(zero, 1, magnitude))


def sign_of(x):
    """``sign(x)`` for real ``x``; ``x / |x|`` for complex ``x`` (differentiable)."""
    if x.dtype.kind == "c":
        return complex_sign(x, np.abs(x))
    return np.sign(x)


def unreduce(g, shape, axis, keepdims):
    """Broadcast the gradient of a reduction back to the reduced array's ``shape``."""
    if type(g) is Filled:
        return Filled(g.value, shape)          # one value everywhere: still one value
    if not keepdims and axis is not None:
        axes = normalize_axis(axis, len(shape))
        g = g.reshape(tuple(1 if i in axes else n for i, n in enumerate(shape)))
    if isinstance(g, ndarray):
        # Recorded (create_graph). The op itself, not np.broadcast_to: NumPy's dispatch to
        # fastgrad would cost more than the op.
        return ops.broadcast_to(g, tuple(shape))
    whole = _filled(g, shape)                  # Note [Filled gradients]
    return whole if whole is not None else _broadcast_to(g, shape)


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
    count = count_true(hit, axis, x)
    return unreduce(g, shape, axis, keepdims) * hit / count


def transpose_backward(g, axes):
    if axes is None:
        return np.transpose(g)
    return np.transpose(g, tuple(np.argsort([a % len(axes) for a in axes])))


def matmul_backward_x(g, x_shape, y):
    # Methods (y.ndim, y.swapaxes) rather than np.ndim/np.swapaxes: the same on NumPy and
    # fastgrad arrays, without NumPy's dispatch cost on the hot first-order path.
    y = cj(y)
    if y.ndim == 1:
        return g[..., None] * y
    if len(x_shape) == 1:
        return np.matmul(y, g[..., None])[..., 0]
    return np.matmul(g, y.swapaxes(-1, -2))


def matmul_backward_y(g, x, y_shape):
    x = cj(x)
    if x.ndim == 1:
        if len(y_shape) == 1:
            return g * x
        return x[:, None] * g[..., None, :]
    if len(y_shape) == 1:
        return np.matmul(x.swapaxes(-1, -2), g[..., None])[..., 0]
    return np.matmul(x.swapaxes(-1, -2), g)


def split_backward(g, axis):
    return np.concatenate(g, axis=axis)


def concatenate_backward(g, axis, sizes):
    return tuple(np.split(g, np.cumsum(sizes)[:-1].tolist(), axis=axis))


def stack_backward(g, axis):
    n = np.shape(g)[axis]
    return tuple(np.squeeze(p, axis) for p in np.split(g, n, axis=axis))


def nonzero_or_one(x):
    """``x`` with its zeros replaced by 1 (a denominator whose numerator is 0 there)."""
    return np.where(x == 0, 1, x)


def safe_log(x):
    """``log(x)`` where ``x > 0``, zero elsewhere (the derivative of ``a**b`` in ``b``)."""
    if getattr(x, "dtype", None) is not None and x.dtype.kind == "c":
        return np.log(np.where(x == 0, 1, x))
    return np.log(np.where(x > 0, x, 1))


def clip_mask(x, a_min, a_max):
    """Where ``clip`` passes its input through (the gradient is zero where it clips)."""
    inside = np.ones(np.shape(x), dtype=bool)
    if a_min is not None:
        inside = inside & (x >= a_min)
    if a_max is not None:
        inside = inside & (x <= a_max)
    return inside


# ---------------------------------------------------------------- elementwise
SQRT_2_OVER_PI = 0.7978845608028654
INV_SQRT2 = 0.7071067811865476
INV_SQRT_2PI = 0.3989422804014327
TWO_OVER_SQRT_PI = 1.1283791670955126
SQRT_PI_OVER_2 = 0.886226925452758


def sinc_backward(g, x):
    """Gradient of ``sinc(x) = sin(pi x)/(pi x)``: ``(cos(pi x) - sinc(x))/x``, and at 0 the
    op ``sinc_maclaurin`` (Note [sinc at 0]).

    Note [sinc at 0]
    ~~~~~~~~~~~~~~~~
    The formula divides by ``x``; at 0 its value is the limit 0. A constant 0 there would be
    right to first order only: sinc's second derivative at 0 is ``-pi**2/3``, not 0. So at 0
    the rule takes ``sinc_maclaurin(x, 1)``, an op whose value is the k-th derivative of
    sinc at 0 and whose own rule is ``sinc_maclaurin(x, k + 1)``: every order of derivative
    at 0 comes out of its Maclaurin series (as JAX's ``_sinc_maclaurin``). Elsewhere the
    formula branch is taken and differentiated as usual; the branch not taken has a zero
    derivative, since ``safe`` does not depend on ``x`` at 0.
    """
    zero = x == 0
    safe = np.where(zero, 1, x)
    return np.where(zero, g * ops.sinc_maclaurin(x, 1),
                    g * (np.cos(np.pi * safe) - np.sinc(safe)) / safe)


def gelu_backward(g, x):
    """Gradient of ``x * Phi(x)``: ``Phi(x) + x * phi(x)`` (Phi, phi: the normal cdf and pdf)."""
    cdf = 0.5 * (1 + ops.erf(x * INV_SQRT2))
    pdf = np.exp(-0.5 * x * x) * INV_SQRT_2PI
    return g * (cdf + x * pdf)


def gelu_tanh_backward(g, x):
    """Gradient of the tanh approximation of GELU."""
    t = np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
    du = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du)


def silu_backward(g, x):
    s = ops.sigmoid(x)
    return g * (s + x * s * (1 - s))


def softmax_backward(g, result, axis):
    """Gradient of ``softmax``: ``s * (g - sum(g * s))`` along ``axis``."""
    return result * (g - np.sum(g * result, axis=axis, keepdims=True))


def log_softmax_backward(g, result, axis):
    return g - np.exp(result) * np.sum(g, axis=axis, keepdims=True)


# ---------------------------------------------------------------- reductions
def logsumexp_backward(g, x, result, axis, keepdims):
    shape = np.shape(x)
    return unreduce(g, shape, axis, keepdims) * np.exp(x - unreduce(result, shape, axis, keepdims))


def exclusive_cumprod(a):
    """The product of the elements before each one along the last axis (1 for the first)."""
    ones = np.ones_like(a[..., :1])
    return np.cumprod(np.concatenate([ones, a[..., :-1]], axis=-1), axis=-1)


def prod_backward(g, x, result, axis, keepdims):
    """Gradient of ``prod``: the product of all the other elements (exact with zeros).

    Note [prod with zeros]: ``result / x`` divides by zero where an element is zero; the
    product of the other elements is then the product of the elements before times the
    product of the elements after, along the reduced axes flattened into one.
    """
    shape = np.shape(x)
    gu = unreduce(g, shape, axis, keepdims)
    if not np.any(x == 0):
        return gu * cj(unreduce(result, shape, axis, keepdims) / x)
    axes = normalize_axis(axis, len(shape))
    k = len(axes)
    last = tuple(range(len(shape) - k, len(shape)))
    moved = np.moveaxis(x, axes, last)
    flat = np.reshape(moved, np.shape(moved)[:len(shape) - k] + (-1,))
    others = exclusive_cumprod(flat) * np.flip(exclusive_cumprod(np.flip(flat, -1)), -1)
    return gu * cj(np.moveaxis(np.reshape(others, np.shape(moved)), last, axes))


def var_backward(g, x, axis, keepdims, ddof):
    """Gradient of ``var``: ``2 (x - mean) / (n - ddof)``; NaN where ``n == ddof``, as the
    variance itself (an empty axis has no elements to take a gradient for)."""
    shape = np.shape(x)
    centered = x - np.mean(x, axis=axis, keepdims=True)
    dof = reduced_count(shape, axis) - ddof
    return unreduce(g, shape, axis, keepdims) * centered * (2.0 / dof if dof else np.nan)


def std_backward(g, x, result, axis, keepdims, ddof):
    """Gradient of ``std``: ``var``'s over ``2 std``, and 0 where the deviation is 0 (a
    constant or a single element; PyTorch's choice, the subgradient of smallest norm)."""
    zero = result == 0
    return var_backward(np.where(zero, 0, g / (2 * np.where(zero, 1, result))), x, axis,
                        keepdims, ddof)


def nanmean_backward(g, x, axis, keepdims):
    missing = np.isnan(x)
    count = count_true(np.logical_not(missing), axis, x)
    return np.where(missing, 0, unreduce(g, np.shape(x), axis, keepdims) / count)


def cumsum_backward(g, axis):
    """Gradient of ``cumsum``: the cumulative sum from the end."""
    return np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)


def cumprod_backward(g, x, result, axis):
    """Gradient of ``cumprod``, exact with zeros in O(n) memory (Note [prod with zeros]).

    Before the first zero of a line, ``x_i`` divides out of the later products; at the first
    zero the gradient is the reversed cumulative sum of ``g`` times the products with that
    zero left out; after it every product still holds the first zero, so the gradient is 0
    (as a value; under ``create_graph`` it is that zero times the gradient of the products
    without it, recursively, so that it has the right derivatives).
    """
    if not np.any(x == 0):
        return cumsum_backward(g * cj(result), axis) / cj(x)
    zero = x == 0
    seen = np.cumsum(zero, axis=axis)             # zeros up to and including each element
    first = zero & (seen == 1)
    before = cumsum_backward(g * cj(result), axis) / cj(np.where(zero, 1, x))
    x1 = np.where(first, 1, x)
    without_first = np.cumprod(x1, axis=axis)
    at_first = cumsum_backward(g * cj(without_first), axis)
    after = 0
    if isinstance(x, ndarray):
        # create_graph: after the first zero the gradient is that zero times the gradient of
        # the products that leave it out, whose derivative in the zero the next order needs.
        pivot = np.sum(np.where(first, x, 0), axis=axis, keepdims=True)
        after = cj(pivot) * cumprod_backward(g, x1, without_first, axis)
    return np.where(seen == 0, before, np.where(first, at_first, after))


def average_backward_a(g, w, axis, keepdims):
    shape = np.shape(w)
    return unreduce(g, shape, axis, keepdims) * w / np.sum(w, axis=axis, keepdims=True)


def average_backward_w(g, a, w, result, axis, keepdims):
    shape = np.shape(w)
    centered = a - unreduce(result, shape, axis, keepdims)
    return unreduce(g, shape, axis, keepdims) * centered / np.sum(w, axis=axis, keepdims=True)


def norm_backward(g, x, result, ord, axis, keepdims):
    """Gradient of ``linalg.norm`` for the vector norms and the Frobenius, 1 and inf matrix
    norms (the spectral and nuclear norms are compositions of ``svd``)."""
    shape = np.shape(x)
    nd = len(shape)
    if axis is None:
        axes = tuple(range(nd))
    else:
        axes = tuple(a % nd for a in ((axis,) if isinstance(axis, int) else axis))
    gu = unreduce(g, shape, axes, keepdims)
    ru = unreduce(result, shape, axes, keepdims)
    matrix = len(axes) == 2 and (axis is not None or ord is not None)
    if matrix and ord not in (None, "fro"):
        if 0 in shape:
            return gu * x          # an empty matrix's norm is 0 whatever x holds
        sum_axis, other = (axes[0], axes[1]) if ord in (1, -1) else (axes[1], axes[0])
        sums = np.sum(np.abs(x), axis=sum_axis, keepdims=True)
        best = np.max(sums, axis=other, keepdims=True) if ord > 0 else \
            np.min(sums, axis=other, keepdims=True)
        hit = sums == best
        return gu * sign_of(x) * hit / count_true(hit, other, x)
    if ord is None or ord == 2 or ord == "fro":
        return gu * x / nonzero_or_one(ru)       # 0 at the zero vector, as PyTorch
    if ord == np.inf or ord == -np.inf:
        hit = np.abs(x) == ru
        return gu * sign_of(x) * hit / count_true(hit, axes, x)
    if ord == 1:
        return gu * sign_of(x)
    if ord == 0:
        return gu * 0
    # Note [Norms at zero]
    # ~~~~~~~~~~~~~~~~~~~~
    # The slope is sign(x) * (|x| / r) ** (ord - 1). At the zero vector (r == 0) it is 0 / 0,
    # and for ord < 1 a zero component makes it 0 * inf. fastgrad returns 0 in both places,
    # as for ord=2 and abs at 0: for 0 < ord < 1 the norm has no derivative in a zero
    # component (0 is the symmetric choice), and for ord < 0 a zero component makes the
    # norm 0 in a neighbourhood of that point along every other component.
    flat = (x == 0) | (ru == 0)
    ratio = np.where(flat, 1, np.abs(x)) / nonzero_or_one(ru)
    return np.where(flat, 0, gu * sign_of(x) * ratio ** (ord - 1))


# ---------------------------------------------------------------- shape and indexing
def moveaxis_backward(g, source, destination):
    return np.moveaxis(g, destination, source)


def tile_backward(g, shape, reps):
    """Gradient of ``tile``: add up the copies."""
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    nd = max(len(shape), len(reps))
    full = (1,) * (nd - len(shape)) + tuple(shape)
    reps = (1,) * (nd - len(reps)) + reps
    split = []
    for r, n in zip(reps, full):
        split += [r, n]
    return np.reshape(np.sum(np.reshape(g, tuple(split)), axis=tuple(range(0, 2 * nd, 2))),
                      shape)


def repeat_backward(g, shape, repeats, axis):
    """Gradient of ``repeat``: add up the repetitions of every element."""
    work = (reduced_count(shape, None),) if axis is None else tuple(shape)
    ax = 0 if axis is None else axis % len(work)
    n = work[ax]
    if isinstance(repeats, int):
        split = work[:ax] + (n, repeats) + work[ax + 1:]
        out = np.sum(np.reshape(g, split), axis=ax + 1)
    else:
        index = np.repeat(np.arange(n), repeats)
        out = ops.scatter_add(g, (slice(None),) * ax + (index,), work)
    return np.reshape(out, shape)


def roll_backward(g, shift, axis):
    back = -shift if isinstance(shift, int) else tuple(-s for s in shift)
    return np.roll(g, back, axis)


def pad_backward(g, shape, pad_width):
    """Gradient of constant ``pad``: the part of ``g`` that covers the original array."""
    return g[tuple(slice(before, before + n) for (before, _), n in zip(pad_width, shape))]


def diagonal_backward(g, shape, offset, axis1, axis2):
    """Gradient of ``diagonal``: ``g`` placed on the diagonal of zeros of ``shape``."""
    nd = len(shape)
    a1, a2 = axis1 % nd, axis2 % nd
    others = tuple(shape[d] for d in range(nd) if d not in (a1, a2))
    k = np.shape(g)[-1]
    rows = np.arange(k) + max(-offset, 0)
    cols = np.arange(k) + max(offset, 0)
    full = ops.scatter_add(g, (Ellipsis, rows, cols), others + (shape[a1], shape[a2]))
    return np.moveaxis(full, (nd - 2, nd - 1), (a1, a2))


def diag_backward(g, shape, k):
    if len(shape) == 1:
        return np.diagonal(g, k)
    return diagonal_backward(g, shape, k, 0, 1)


def trace_backward(g, shape, offset, axis1, axis2):
    n1, n2 = shape[axis1], shape[axis2]
    k = max(0, min(n1 - max(-offset, 0), n2 - max(offset, 0)))
    spread = np.broadcast_to(np.expand_dims(g, -1), np.shape(g) + (k,))
    return diagonal_backward(spread, shape, offset, axis1, axis2)


def take_backward(g, shape, indices, axis):
    """Gradient of ``take``: ``g`` added at the taken positions (repeats add up)."""
    if 0 in tuple(shape):
        return np.zeros(shape, dtype=g.dtype)     # nothing taken from an empty array
    if axis is None:
        return np.reshape(ops.scatter_add(g, indices, (reduced_count(shape, None),)), shape)
    return ops.scatter_add(g, (slice(None),) * (axis % len(shape)) + (indices,), shape)


def along_key(indices, axis, shape):
    """The advanced-indexing key that takes ``indices`` along ``axis`` of an array of
    ``shape`` (``a[along_key(i, axis, a.shape)] == take_along_axis(a, i, axis)``)."""
    indices = np.asarray(indices)
    nd = len(shape)
    key = []
    for d in range(nd):
        if d == axis:
            key.append(indices)
        else:
            view = [1] * nd
            view[d] = indices.shape[d]
            key.append(np.arange(indices.shape[d]).reshape(view))
    return tuple(key)


def take_along_axis_backward(g, shape, indices, axis):
    return ops.scatter_add(g, along_key(indices, axis, shape), shape)


def pick_backward(g, shape, index, axis, mode, keepdims):
    """Gradient of ``pick``: ``g`` added at the picked positions (clipped or wrapped)."""
    positions = pick_positions(_numeric(index), shape, axis, mode)
    if not keepdims:
        g = np.expand_dims(g, axis)
    return ops.scatter_add(g, along_key(positions, axis, shape), shape)


def sort_backward(g, x, axis):
    """Gradient of ``sort``: every element gets the gradient of the place it was sorted to."""
    order = np.asarray(np.argsort(np.asarray(x), axis=axis, kind="stable"))
    return ops.scatter_add(g, along_key(order, axis % np.ndim(x), np.shape(x)), np.shape(x))


def diff_backward(g, x_shape, n, axis):
    """Gradient of ``diff``: ``n`` times the negated difference of the zero-padded gradient.
    An axis shorter than ``n`` gives an empty difference (NumPy's), whose gradient is zeros
    of the input's shape (the padding would give ``n`` elements)."""
    if x_shape[axis] < n:
        return np.zeros(x_shape, dtype=g.dtype)
    for _ in range(n):
        width = [(0, 0)] * np.ndim(g)
        width[axis] = (1, 1)
        g = -np.diff(np.pad(g, width), axis=axis)
    return g


# ---------------------------------------------------------------- linear algebra
def tensordot_backward_x(g, y, x_ndim, axes):
    """Gradient of ``tensordot`` in its first argument (``axes`` a pair of int tuples)."""
    ax, ay = axes
    y = cj(y)
    fx = [d for d in range(x_ndim) if d not in ax]
    fy = [d for d in range(np.ndim(y)) if d not in ay]
    r = np.tensordot(g, y, axes=(list(range(len(fx), len(fx) + len(fy))), fy))
    held = fx + [ax[ay.index(a)] for a in sorted(ay)]
    return np.transpose(r, tuple(held.index(d) for d in range(x_ndim)))


def tensordot_backward_y(g, x, y_ndim, axes):
    ax, ay = axes
    x = cj(x)
    fx = [d for d in range(np.ndim(x)) if d not in ax]
    fy = [d for d in range(y_ndim) if d not in ay]
    r = np.tensordot(x, g, axes=(fx, list(range(len(fx)))))
    held = [ay[ax.index(a)] for a in sorted(ax)] + fy
    return np.transpose(r, tuple(held.index(d) for d in range(y_ndim)))


def dot_axes(x_ndim, y_ndim):
    """``numpy.dot`` as a ``tensordot``: the last axis of ``x`` with the second-to-last of
    ``y``."""
    return (x_ndim - 1,), (max(y_ndim - 2, 0),)


def dot_backward_x(g, x_ndim, y):
    return tensordot_backward_x(g, y, x_ndim, dot_axes(x_ndim, np.ndim(y)))


def dot_backward_y(g, x, y_ndim):
    return tensordot_backward_y(g, x, y_ndim, dot_axes(np.ndim(x), y_ndim))


def einsum_backward(g, operands, subscripts, i):
    """Gradient of ``einsum`` (explicit ``'ab,bc->ac'`` subscripts without ellipses) in operand
    ``i``: the einsum of ``g`` with the other operands into its subscript, then broadcast along
    the letters that only it has."""
    inputs, output = subscripts.split("->")
    inputs = inputs.split(",")
    sub = inputs[i]
    if len(set(sub)) != len(sub):
        raise NotImplementedError(
            "fastgrad.einsum: no derivative for operand %d of %r, whose subscript repeats a "
            "letter (take a diagonal with numpy.diagonal first)" % (i, subscripts))
    others = [s for j, s in enumerate(inputs) if j != i]
    seen = set(output).union(*others)
    kept = "".join(c for c in sub if c in seen)
    spec = ",".join([output] + others) + "->" + kept
    r = np.einsum(spec, g, *[cj(o) for j, o in enumerate(operands) if j != i])
    if kept != sub:
        shape = np.shape(operands[i])
        r = np.reshape(r, tuple(shape[k] if c in seen else 1 for k, c in enumerate(sub)))
        r = np.broadcast_to(r, shape)
    return r


def outer_backward_x(g, x_shape, y):
    return np.reshape(np.matmul(g, np.reshape(cj(y), (-1,))), x_shape)


def outer_backward_y(g, x, y_shape):
    return np.reshape(np.matmul(np.reshape(cj(x), (-1,)), g), y_shape)


def _kron_layout(x_shape, y_shape):
    nd = max(len(x_shape), len(y_shape))
    xs = (1,) * (nd - len(x_shape)) + tuple(x_shape)
    ys = (1,) * (nd - len(y_shape)) + tuple(y_shape)
    return nd, xs, ys


def kron_backward_x(g, x_shape, y):
    """Gradient of ``kron`` in ``x``: ``g`` seen as blocks, each contracted with ``y``."""
    nd, xs, ys = _kron_layout(x_shape, np.shape(y))
    blocks = np.reshape(g, tuple(n for pair in zip(xs, ys) for n in pair))
    yb = np.reshape(cj(y), tuple(n for m in ys for n in (1, m)))
    return np.reshape(np.sum(blocks * yb, axis=tuple(range(1, 2 * nd, 2))), x_shape)


def kron_backward_y(g, x, y_shape):
    nd, xs, ys = _kron_layout(np.shape(x), y_shape)
    blocks = np.reshape(g, tuple(n for pair in zip(xs, ys) for n in pair))
    xb = np.reshape(cj(x), tuple(n for m in xs for n in (m, 1)))
    return np.reshape(np.sum(blocks * xb, axis=tuple(range(0, 2 * nd, 2))), y_shape)


def convolve_backward_x(g, x_shape, y):
    """Gradient of the full convolution in ``x``: correlate ``g`` with ``y``."""
    m = np.shape(y)[0]
    return np.convolve(g, np.flip(cj(y), 0))[m - 1:m - 1 + x_shape[0]]


def convolve_backward_y(g, x, y_shape):
    n = np.shape(x)[0]
    return np.convolve(g, np.flip(cj(x), 0))[n - 1:n - 1 + y_shape[0]]


def mT(a):
    """The matrix transpose of a stack of matrices."""
    return np.swapaxes(a, -1, -2)


def mH(a):
    """The conjugate transpose of a stack of matrices (the transpose of real ones)."""
    return np.swapaxes(cj(a), -1, -2)


def inv_backward(g, result):
    return -np.matmul(mH(result), np.matmul(g, mH(result)))


def det_backward(g, x, result):
    """Gradient of ``det``: ``g * conj(cofactor matrix)``; ``det(x) inv(x)^T`` when ``x`` is
    invertible, the cofactors by another route when it is singular (Note [det at singular
    matrices])."""
    try:
        return np.expand_dims(g * cj(result), (-1, -2)) * mH(np.linalg.inv(x))
    except np.linalg.LinAlgError:
        return np.expand_dims(g, (-1, -2)) * cj(cofactors(x))


# Above this many elements of the stack of minors (``n**4`` for an ``n x n`` matrix), the
# recorded cofactors of a singular matrix are refused rather than built (Note [det at singular
# matrices]): 2**22 complex values are 64 MB.
MINORS_LIMIT = 1 << 22


def cofactors(x):
    """The cofactor matrix ``adj(x)^T`` of a (stack of) square matrices, singular or not.

    Note [det at singular matrices]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    ``det(x) inv(x)^T`` is ``0 * inf`` at a singular matrix, whose cofactors are finite (the
    gradient of ``det`` exists everywhere). In an ordinary backward pass they come from the
    SVD ``x = U diag(s) V^H``: ``adj(x) = det(U) det(V^H) V diag(p) U^H`` where ``p_i`` is the
    product of the other singular values (exclusive products, no division by a zero ``s_i``).
    That route is exact in value but not as a formula to differentiate again: the SVD's own
    derivative divides by the zero singular value for complex input, and by the gaps of
    repeated zero ones. Under ``create_graph`` (``x`` recorded) the cofactors are therefore
    the signed determinants of the ``(n-1) x (n-1)`` minors, taken with ``det`` itself: a
    polynomial in ``x`` that is exact at singular matrices, real or complex, whose derivatives
    are ``det``'s own (at a singular minor, this route again). It holds ``n**4`` values: above
    ``MINORS_LIMIT`` a real ``x`` takes the recorded SVD route (differentiable where the
    singular values are distinct) and a complex one is refused with an error naming ``det``.
    """
    if isinstance(x, ndarray) and (x.dtype.kind == "c" or minors_size(x) <= MINORS_LIMIT):
        return cofactors_by_minors(x)
    u, s, vh = np.linalg.svd(x)
    before = exclusive_cumprod(s)
    after = np.flip(exclusive_cumprod(np.flip(s, -1)), -1)
    phase = np.linalg.det(u) * np.linalg.det(vh)
    adj = np.matmul(mH(vh) * np.expand_dims(before * after, -2), mH(u))
    return mT(adj * np.expand_dims(phase, (-1, -2)))


def minors_size(x):
    """How many values the stack of minors of ``x`` holds (``n**4`` per matrix)."""
    shape = np.shape(x)
    return shape[-1] ** 4 * int(np.prod(shape[:-2], dtype=np.int64))


def cofactors_by_minors(x):
    """``cofactors(x)`` as signed determinants of minors, recorded (differentiable)."""
    n = np.shape(x)[-1]
    if n == 1:
        return np.ones_like(x)
    size = minors_size(x)
    if size > MINORS_LIMIT:
        raise NotImplementedError(
            "fastgrad.linalg.det: the derivative of det's gradient at a singular complex "
            "%d x %d matrix (create_graph=True) is computed from its %d minors, %d values, "
            "more than the limit of %d; differentiate at a non-singular matrix or once only"
            % (n, n, n * n, size, MINORS_LIMIT))
    keep = np.array([[j for j in range(n) if j != i] for i in range(n)])   # (n, n - 1)
    rows = keep[:, None, :, None]
    cols = keep[None, :, None, :]
    minors = x[(Ellipsis, rows, cols)]                  # (..., n, n, n - 1, n - 1)
    signs = (-1.0) ** np.add.outer(np.arange(n), np.arange(n))
    return np.linalg.det(minors) * signs


def pinv_backward(g, x, result):
    """Gradient of the pseudo-inverse ``P`` of ``A`` (Golub and Pereyra; exact where the rank
    is locally constant, which includes rank-deficient ``A`` along perturbations that keep
    its rank): ``-P^H G P^H + (I - A P) G^H P P^H + P^H P G^H (I - P A)``."""
    ph, gh = mH(result), mH(g)
    m, n = np.shape(x)[-2], np.shape(x)[-1]
    left = eye_like(m, result) - np.matmul(x, result)
    right = eye_like(n, result) - np.matmul(result, x)
    return (-np.matmul(ph, np.matmul(g, ph))
            + np.matmul(left, np.matmul(gh, np.matmul(result, ph)))
            + np.matmul(np.matmul(ph, result), np.matmul(gh, right)))


def slogdet_backward(g, x):
    """Gradient of ``log|det x|``: ``inv(x)^H`` (the sign carries no gradient for real ``x``:
    it is locally constant)."""
    return np.expand_dims(g[1], (-1, -2)) * mH(np.linalg.inv(x))


def solve_backward_b(g, a, b_ndim):
    if b_ndim == 1:
        return np.linalg.solve(mH(a), np.expand_dims(g, -1))[..., 0]
    return np.linalg.solve(mH(a), g)


def solve_backward_a(g, a, b_ndim, result):
    gb = solve_backward_b(g, a, b_ndim)
    if b_ndim == 1:
        return -np.expand_dims(gb, -1) * np.expand_dims(cj(result), -2)
    return -np.matmul(gb, mH(result))


def hermitize(a):
    """The Hermitian part ``(a + a^H) / 2`` (the symmetric part of a real ``a``): the gradient
    in ``x`` of a function of ``(x + x^H) / 2`` from its gradient there."""
    return (a + mH(a)) / 2


def real_part(a):
    """``real(a)`` for complex ``a``; ``a`` itself when it is real (as ``cj``)."""
    if getattr(a, "dtype", None) is not None and a.dtype.kind == "c":
        return np.real(a)
    return a


def refuse_phase(op, imag_diag, scale):
    """Raise when ``imag_diag`` (the imaginary part of ``diag(V^H gV)``, for svd the sum of
    ``U``'s and ``V``'s) is not zero: the loss then depends on the phase of the complex
    eigenvectors (singular vectors), which the decomposition leaves free, and has no gradient
    (PyTorch raises the same; Note [Complex decompositions])."""
    d = np.abs(_numeric(imag_diag))
    if d.size and d.max() > 1e-6 * max(1.0, float(np.max(np.abs(_numeric(scale))))):
        what = "eigenvectors" if op == "eigh" else "singular vectors"
        raise ValueError(
            "fastgrad.linalg.%s: the loss depends on the phase of the complex %s, which %s "
            "does not define (each may be multiplied by any e^(i phi)); its gradient is "
            "undefined. Use phase-free quantities such as v * conj(v[0])" % (op, what, op))


def cholesky_backward(g, result):
    """Gradient of the Cholesky factor ``L`` of the Hermitian (real: symmetric) part of the
    input: ``herm(L^-H Phi(L^H g) L^-1)``, with ``Phi`` the lower triangle with its diagonal
    halved (PyTorch's ``cholesky_backward``)."""
    n = np.shape(result)[-1]
    m = np.matmul(mH(result), g)
    phi = np.tril(m) - 0.5 * m * eye_like(n, m)
    linv = np.linalg.inv(result)
    return hermitize(np.matmul(mH(linv), np.matmul(phi, linv)))


def absent(g):
    """Whether ``g`` is the gradient of an output nothing used: ``None``, or zeros with no
    history. Rules leave out its terms, which matters where they are ``0 * inf`` (the
    eigenvector term of ``eigh`` at repeated eigenvalues)."""
    if g is None:
        return True
    if isinstance(g, ndarray):
        return g.node is None and not np.any(g.asnumpy())
    if type(g) is Filled:
        return g.unit == 0 and not np.any(g.value)
    return not np.any(g)


def _numeric(a):
    """The values of ``a`` as a NumPy array (a recorded array's data, never recorded)."""
    return a.asnumpy() if isinstance(a, ndarray) else np.asarray(a)


def repeated_pairs(values):
    """``mask[..., i, j]``: whether ``values[..., i]`` and ``values[..., j]`` (``i != j``) are
    equal to rounding, ``|v_i - v_j| <= 1000 eps max|v|`` (Note [Repeated eigenvalues])."""
    v = _numeric(values)
    k = v.shape[-1]
    eps = np.finfo(v.dtype).eps if v.dtype.kind in "fc" else np.finfo(np.float64).eps
    scale = np.max(np.abs(v), axis=-1, keepdims=True) if k else np.zeros(v.shape)
    tol = np.expand_dims(1000 * eps * scale, -1)
    close = np.abs(np.expand_dims(v, -2) - np.expand_dims(v, -1)) <= tol
    return close & ~np.eye(k, dtype=bool)


def refuse_repeated(op, repeated, *vector_grads):
    """Raise when the loss uses a vector of a repeated eigenvalue (singular value) of ``op``:
    a pair in ``repeated`` whose column of any of ``vector_grads`` is not zero. Returns
    ``repeated`` (whose pairs then contribute nothing; Note [Repeated eigenvalues])."""
    if not np.any(repeated):
        return repeated
    used = np.zeros(repeated.shape[:-1], dtype=bool)
    for grad in vector_grads:
        if not absent(grad):
            used = used | np.any(_numeric(grad) != 0, axis=-2)
    if np.any(repeated & (np.expand_dims(used, -1) | np.expand_dims(used, -2))):
        what = "eigenvalue" if op == "eigh" else "singular value"
        raise ValueError(
            "fastgrad.linalg.%s: the loss uses the %s vectors of a repeated %s, whose "
            "gradient the %s values and vectors do not determine (they are any basis of a "
            "subspace); use only the %ss there, or break the tie" % (
                op, "eigen" if op == "eigh" else "singular", what, op, what))
    return repeated


# Note [Repeated eigenvalues]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The eigenvector term of eigh's gradient is ``(M[i, j] - M[j, i]) / (2 (w[j] - w[i]))`` after
# symmetrizing (``M = V^T gV``). At a repeated eigenvalue both parts vanish and the term is a
# limit that depends on how the loss changes as the eigenvalues split, which the gradients of
# the outputs at the point do not tell: ``sum(S * V exp(w) V^T)`` (a matrix function) and
# ``exp(mean(w)) * sum(S * P)`` (``P`` the projector on the repeated pair's subspace) give the
# same ``gw`` and ``M`` there and have different gradients. Evaluating the term divides
# rounding noise by a gap of 1e-16 and gave a silently wrong gradient (found by
# tests/ops/test_breaking_inputs.py); it is now an error. A function of the eigenvalues alone
# needs no ``F`` and is fine, and so is a loss that uses no vector of the repeated pair (its
# term is exactly 0, kept out of ``F``). svd is the same (``s[j]^2 - s[i]^2``, the columns of
# U and of V). Pairs count as repeated within 1000 eps of the largest value: NumPy's eigenvalues
# of an exactly repeated one spread over 20 eps for a 200 x 200 matrix, and at gaps below
# 1000 eps the term is not resolved to better than 0.1% anyway.
def eigh_backward(g, result):
    """Gradient of ``eigh`` of the Hermitian (real: symmetric) part of the input:
    ``V (diag(gw) + F * (V^H gV)) V^H`` with ``F[i, j] = 1 / (w[j] - w[i])``, made Hermitian.
    Without an eigenvector gradient the ``F`` term is left out, so a function of the
    eigenvalues alone is differentiable at repeated eigenvalues too; with one, repeated
    eigenvalues are an error (Note [Repeated eigenvalues]), and so is, for complex input, a
    loss that depends on the eigenvectors' phase (Note [Complex decompositions])."""
    gw, gv = g
    w, v = result
    n = np.shape(w)[-1]
    inner = np.expand_dims(gw, -1) * eye_like(n, w) if not absent(gw) else None
    if not absent(gv):
        skip = np.eye(n, dtype=bool) | refuse_repeated("eigh", repeated_pairs(w), gv)
        gaps = np.expand_dims(w, -2) - np.expand_dims(w, -1)
        f = np.where(skip, 0, 1 / np.where(skip, 1, gaps))
        vhgv = np.matmul(mH(v), gv)
        if vhgv.dtype.kind == "c":
            refuse_phase("eigh", np.imag(np.diagonal(_numeric(vhgv), 0, -2, -1)), vhgv)
        term = f * vhgv
        inner = term if inner is None else inner + term
    if inner is None:
        return np.zeros_like(v)
    return hermitize(np.matmul(v, np.matmul(inner, mH(v))))


def eigvalsh_backward(g, x):
    v = ops.eigh(x)[1]
    return np.matmul(v * np.expand_dims(g, -2), mH(v))


def qr_backward(g, result):
    """Gradient of the reduced QR decomposition (``R`` with a real diagonal, as LAPACK's) of a
    matrix with at least as many rows as columns: ``(gQ + Q copyltu(M)) R^-H`` with
    ``M = R gR^H - gQ^H Q`` and ``copyltu(M)`` the Hermitian matrix with ``M``'s strict lower
    triangle and the real part of its diagonal (PyTorch's ``linalg_qr_backward``)."""
    gq, gr = g
    q, r = result
    m = np.matmul(r, mH(gr)) - np.matmul(mH(gq), q)
    low = np.tril(m, -1)
    copyltu = low + mH(low) + real_part(m) * eye_like(np.shape(m)[-1], m)
    b = gq + np.matmul(q, copyltu)
    return mH(np.linalg.solve(r, mH(b)))


# Note [Complex decompositions]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The complex rules of eigh, svd, qr and cholesky are PyTorch's (FunctionsManual.cpp:
# linalg_eig_backward with is_hermitian, svd_backward, linalg_qr_backward,
# cholesky_backward), written with ``mH``/``cj`` so that one text serves real input too.
# A complex eigenvector (singular vector) is defined up to a phase: ``V -> V diag(e^(i phi))``
# (for svd ``U`` and ``V`` together). A loss that depends on that phase has no gradient; it
# shows as a non-zero imaginary part of ``diag(V^H gV)`` (for svd of
# ``diag(U^H gU) + diag(V^H gV)``) and is an error, as in PyTorch and fastgrad's ``eig``. A
# phase-free loss (``|v|``, ``v * conj(v[0])``, ``U diag(s) V^H``) may still have a
# non-zero imaginary part of ``diag(U^H gU)`` alone; svd's rule then adds
# ``i Im(diag(U^H gU)) / s`` to the diagonal of its core, as PyTorch's does (at an exactly
# zero ``s`` it is 0 / 0 with a limit the gradients at the point do not give, so a loss that
# uses the vectors of a complex matrix there is an error; PyTorch assumes full rank). QR is unique
# with LAPACK's real diagonal of ``R`` and Cholesky with a real positive diagonal of ``L``;
# their rules keep the real part of the diagonal terms accordingly. Repeated eigenvalues and
# singular values are refused exactly as for real input (Note [Repeated eigenvalues]).
def svd_backward(g, result):
    """Gradient of the reduced SVD ``A = U diag(s) V^H`` (distinct non-zero singular values;
    for complex input a loss free of the singular vectors' phase, Note [Complex
    decompositions])."""
    gu, gs, gvt = g
    u, s, vt = result
    if absent(gu) and absent(gvt):
        # Only the singular values are used: no 1/(s_j^2 - s_i^2), no 1/s, so repeated and
        # zero singular values are fine (norm 'nuc' and 2 of any matrix).
        return np.matmul(u * np.expand_dims(gs, -2), vt)
    v, gv = mH(vt), mH(gvt)
    m, n = np.shape(u)[-2], np.shape(v)[-2]
    k = np.shape(s)[-1]
    eye = np.eye(k, dtype=bool)
    s2 = s * s
    skip = eye | refuse_repeated("svd", repeated_pairs(s), gu, gv)  # Note [Repeated eigenvalues]
    gaps = np.expand_dims(s2, -2) - np.expand_dims(s2, -1)           # s_j^2 - s_i^2
    f = np.where(skip, 0, 1 / np.where(skip, 1, gaps))
    su = np.matmul(mH(u), gu)
    sv = np.matmul(mH(v), gv)
    srow = np.expand_dims(s, -2)
    scol = np.expand_dims(s, -1)
    core = (f * (su - mH(su))) * srow + np.expand_dims(gs, -1) * eye_like(k, s) \
        + scol * (f * (sv - mH(sv)))
    if su.dtype.kind == "c":
        du = np.imag(np.diagonal(_numeric(su), 0, -2, -1))
        dv = np.imag(np.diagonal(_numeric(sv), 0, -2, -1))
        refuse_phase("svd", du + dv, np.concatenate([_numeric(su), _numeric(sv)], -1))
        if np.any(_numeric(s) == 0):
            # The term below is 0 / 0 there, and its limit is not in the gradients at the
            # point (U diag(s) V^H needs i Im(u_k^H W v_k), 0 would be wrong): no value.
            raise ValueError(
                "fastgrad.linalg.svd: the loss uses the singular vectors of a complex matrix "
                "with a zero singular value, where they have no derivative (their phases are "
                "free one by one); use the singular values only, or a full-rank matrix")
        # i Im(diag(U^H gU)) / s on the diagonal (Note [Complex decompositions])
        core = core + np.where(eye, su - mH(su), 0) / (2 * scol)
    out = np.matmul(u, np.matmul(core, vt))
    if m > k:
        proj = gu - np.matmul(u, su)
        out = out + np.matmul(proj * _used_inverse(s, gu, "U"), vt)
    if n > k:
        proj = gv - np.matmul(v, sv)
        out = out + np.matmul(u * _used_inverse(s, gv, "V"), mH(proj))
    return out


def _used_inverse(s, grad, which):
    """``1 / s`` as a row, for the terms of a non-square svd's gradient that leave the span of
    ``U`` (``V``): 0 in the columns of ``grad`` the loss does not use, whose terms are exactly
    0 (not ``0 / 0``: Note [Zero singular values]), and an error at a zero ``s`` whose column
    is used.

    Note [Zero singular values]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~~
    For a non-square matrix the gradient has the terms ``(I - U U^H) gU diag(1/s) V^H`` and
    ``U diag(1/s) ((I - V V^H) gV)^H``, linear in each column of ``gU`` (``gV``). The
    gradient of ``norm(a, 2) = s[0]`` is ``u_0 v_0^H``; differentiating it again gives a
    ``gU`` and ``gV`` whose only non-zero column is the first, at every point (the
    selection of ``s[0]`` is constant). Dividing the other, exactly zero, columns by a zero
    singular value of a rank-deficient matrix gave ``0 / 0``, a NaN second derivative,
    although ``s[0]`` is smooth wherever it is simple. Those columns now contribute their
    exact 0. A loss that does use the vector of a zero singular value of a non-square
    matrix has no derivative there (the vector is not differentiable: ``s`` behaves as
    ``|t|``), and that is an error, never a NaN.
    """
    zero = _numeric(s) == 0
    if not np.any(zero):
        return np.expand_dims(1 / s, -2)
    used = np.zeros(zero.shape, dtype=bool) if absent(grad) \
        else np.any(_numeric(grad) != 0, axis=-2)
    if np.any(zero & used):
        raise ValueError(
            "fastgrad.linalg.svd: the loss uses the singular vectors (columns of %s) of a zero "
            "singular value of a non-square matrix, which have no derivative there (the "
            "singular value behaves as |t|); use a full-rank matrix, or a function of the "
            "nonzero singular values only (norm(a, 2) of a matrix whose largest singular "
            "value is simple is fine)" % which)
    return np.expand_dims(np.where(zero, 0, 1 / np.where(zero, 1, s)), -2)
