"""The fused kernels (Note [Fused kernels] in fastgrad/_kernels/_fused.pyx) split over the
kernel pool (Note [Parallel kernels] in fastgrad/_kernels/_large/kernels.pyx): every result
bit for bit the unsplit call's, on sizes around the pool's threshold, for broadcast and
non-contiguous operands, ties, NaN and infinities, float32 and float64, empty and 0-d arrays;
the floating-point flags as one call's; and ``np.maximum(z, 0)``, forward and backward, on the
pool whatever form its ``0`` takes. No timings.
"""

import warnings

import numpy as onp
import pytest

import fastgrad  # noqa: F401
from fastgrad import autograd
from fastgrad import np as fnp
from fastgrad import npx
from fastgrad._kernels import _fused, _large
from fastgrad._kernels._filled import Filled

DTYPES = [onp.float32, onp.float64]
FUSED = [_fused.maximum_backward, _fused.sigmoid_backward, _fused.tanh_backward]


@pytest.fixture(autouse=True)
def _two_threads():
    """Split even on a one-core machine, so that the split path is what is tested."""
    old = _large.set_num_threads(2)
    yield
    _large.set_num_threads(old if old else None)


def _threshold():
    """The size from which the pool runs a fused kernel: they are one pass over memory, so the
    threshold of the cheap ufuncs (Note [Parallel kernels])."""
    return 2 * _large.get_min_size()


def _same(a, b):
    assert type(a) is type(b) is onp.ndarray
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


def _operands(uf, dtype, shape, seed=0):
    """Arguments of ``uf`` with ties (x == y == 0), NaN and infinities among them."""
    rng = onp.random.default_rng(seed)
    g = rng.standard_normal(shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[::5] = 0                               # ties with y == 0
    flat[7::1001] = onp.nan
    flat[11::3001] = onp.inf
    g.reshape(-1)[13::2003] = onp.nan
    if uf is _fused.maximum_backward:
        return g, x, dtype(0)
    return g, x


def _split(uf, *args):
    """``uf(*args)`` through the large-array kernels, and whether the pool ran it."""
    before = _large.pool_calls()
    with onp.errstate(all="ignore"):
        out = _large.apply(uf, *args)
    return out, _large.pool_calls() - before


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uf", FUSED, ids=lambda u: u.__name__)
@pytest.mark.parametrize("offset", [-1, 0, 1, 8192 * 3 + 5])
def test_bit_identical_around_the_threshold(uf, dtype, offset):
    n = _threshold() + offset
    args = _operands(uf, dtype, (n,))
    out, pooled = _split(uf, *args)
    with onp.errstate(all="ignore"):
        _same(out, uf(*args))
    assert pooled == (n >= _threshold())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uf,layout", [(uf, layout) for uf in FUSED
                                       for layout in ["one g", "row g", "column g"]]
                         + [(_fused.maximum_backward, y) for y in ["row y", "0-d y"]],
                         ids=lambda p: getattr(p, "__name__", p))
def test_broadcast_operands_on_the_pool(uf, dtype, layout):
    g, x, *rest = _operands(uf, dtype, (512, 512), seed=1)
    if layout == "one g":
        g = onp.asarray(g[3, 4])                      # a sum's gradient: one value
    elif layout == "row g":
        g = g[:1].copy()
    elif layout == "column g":
        g = g[:, :1].copy()
    elif layout == "row y":
        rest = [x[5].copy()]
    elif layout == "0-d y":
        rest = [onp.asarray(0, dtype)]
    args = (g, x, *rest)
    out, pooled = _split(uf, *args)
    with onp.errstate(all="ignore"):
        _same(out, uf(*args))
    assert pooled == 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["transposed", "strided", "broadcast view"])
def test_non_contiguous_operands_give_the_unsplit_result(dtype, layout):
    g, x, y = _operands(_fused.maximum_backward, dtype, (512, 1024), seed=2)
    if layout == "transposed":
        g, x = g.T, x.T
    elif layout == "strided":
        g, x = g[:, ::2], x[:, ::2]
    else:
        g = onp.broadcast_to(g[:1], g.shape)
    for uf, args in [(_fused.maximum_backward, (g, x, y)), (_fused.sigmoid_backward, (g, x)),
                     (_fused.tanh_backward, (g, x))]:
        out, _ = _split(uf, *args)
        with onp.errstate(all="ignore"):
            _same(out, uf(*args))


@pytest.mark.parametrize("dtype", DTYPES)
def test_ties_split_evenly_on_the_pool(dtype):
    """Note [Ties of maximum]: where x == y the gradient of maximum(x, y) is split evenly,
    0.5 * g to each operand, whichever thread computes the element; above it all of g, below
    it g * 0 (a signed zero)."""
    n = 4 * _threshold() + 3
    x = onp.zeros(n, dtype)
    x[1::3] = 1
    x[2::3] = -1
    g = onp.full(n, -3, dtype)
    for y in (0, dtype(0), onp.zeros(n, dtype)):
        out, pooled = _split(_fused.maximum_backward, g, x, y)
        assert pooled == 1
        _same(out, onp.where(x == 0, dtype(-1.5), onp.where(x > 0, dtype(-3), dtype(-0.0))))
        assert onp.signbit(out[2::3]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_floating_point_flags_are_one_calls(dtype):
    """Note [Comparisons and the invalid flag], per chunk: NaN operands raise nothing in any
    chunk; an infinite g where x < y raises invalid once, from the worker's chunk too."""
    n = 4 * _threshold()
    g, x = onp.ones(n, dtype), onp.linspace(-1, 1, n).astype(dtype)
    x[::97] = onp.nan
    before = _large.pool_calls()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with onp.errstate(all="raise"):
            out = _large.apply(_fused.maximum_backward, g, x, 0)
    assert _large.pool_calls() == before + 1
    _same(out, _fused.maximum_backward(g, x, 0))
    g[-10] = onp.inf                               # in the last chunk, x < 0 there: inf * 0
    x[-10] = -1
    with onp.errstate(invalid="raise"):
        with pytest.raises(FloatingPointError, match="invalid value encountered in "
                           "maximum_backward"):
            _large.apply(_fused.maximum_backward, g, x, 0)
    with pytest.warns(RuntimeWarning, match="maximum_backward"):
        with onp.errstate(invalid="warn"):
            out = _large.apply(_fused.maximum_backward, g, x, 0)
    with onp.errstate(invalid="ignore"):
        _same(out, _fused.maximum_backward(g, x, 0))


@pytest.mark.parametrize("uf", FUSED, ids=lambda u: u.__name__)
@pytest.mark.parametrize("shape", [(), (0,), (0, 512)], ids=str)
def test_empty_and_0d_are_not_split(uf, shape):
    args = _operands(uf, onp.float64, shape) if shape != () else \
        (onp.asarray(2.0), onp.asarray(0.0)) + ((0,) if uf.nin == 3 else ())
    out, pooled = _split(uf, *args)
    assert pooled == 0
    assert onp.shape(out) == shape
    with onp.errstate(all="ignore"):
        assert onp.array_equal(out, uf(*args), equal_nan=True)


@pytest.mark.parametrize("uf", FUSED, ids=lambda u: u.__name__)
def test_filled_gradient_on_the_pool(uf):
    """A sum's gradient (one value, Note [Filled gradients]) meets a fused kernel: the value
    alone is the operand, on the pool."""
    _, x, *rest = _operands(uf, onp.float64, (512, 512), seed=4)
    g = Filled(onp.float64(-2.0), x.shape)
    before = _large.pool_calls()
    with onp.errstate(all="ignore"):
        out = uf(g, x, *rest)
        expected = uf(onp.float64(-2.0), x, *rest)
    assert _large.pool_calls() == before + 1
    _same(out, expected)


@pytest.mark.parametrize("zero", ["0", "0.0", "float64(0)", "float32(0)", "0-d int", "0-d float",
                                  "fastgrad 0-d"])
def test_maximum_forward_on_the_pool_whatever_the_zero(zero):
    z0 = onp.random.default_rng(5).standard_normal((512, 512))
    z0[::3] = 0
    y = {"0": 0, "0.0": 0.0, "float64(0)": onp.float64(0), "float32(0)": onp.float32(0),
         "0-d int": onp.array(0), "0-d float": onp.array(0.0),
         "fastgrad 0-d": fnp.array(0.0)}[zero]
    before = _large.pool_calls()
    out = fnp.maximum(fnp.array(z0), y).asnumpy()
    assert _large.pool_calls() == before + 1
    raw = y.asnumpy() if isinstance(y, fnp.ndarray) else y
    _same(out, onp.maximum(z0, raw))


def _relu_step(relu, x0, b0):
    x, b = fnp.array(x0), fnp.array(b0)
    x.attach_grad()
    b.attach_grad()
    with autograd.record():
        loss = fnp.sum(relu(x + b))
    loss.backward()
    return x.grad.asnumpy(), b.grad.asnumpy()


@pytest.mark.parametrize("dtype", DTYPES)
def test_maximum_relu_step_equals_one_thread_and_ties_get_half(dtype):
    """Workload 6 with relu as np.maximum(z, 0): the gradients with the pool are those of one
    thread bit for bit; where z == 0 exactly x's gradient is 0.5, where npx.relu's is 0."""
    rng = onp.random.default_rng(6)
    x0 = rng.standard_normal((512, 512)).astype(dtype)
    b0 = rng.standard_normal(512).astype(dtype)
    x0[::4, 7] = -b0[7]                              # z == 0 exactly
    relu = lambda z: fnp.maximum(z, 0)  # noqa: E731
    _relu_step(relu, x0, b0)                         # NumPy's summation order probed once
    before = _large.pool_calls()
    dx, db = _relu_step(relu, x0, b0)
    assert _large.pool_calls() - before == 5         # add, maximum, sum; its gradient, b's
    _large.set_num_threads(1)
    dx1, db1 = _relu_step(relu, x0, b0)
    _large.set_num_threads(2)
    _same(dx, dx1)
    _same(db, db1)
    z = x0 + b0
    _same(dx, onp.where(z > 0, dtype(1), onp.where(z == 0, dtype(0.5), dtype(0))))
    assert (dx[::4, 7] == 0.5).all()
    dx_relu, _ = _relu_step(npx.relu, x0, b0)
    assert (dx_relu[::4, 7] == 0).all()
    onp.testing.assert_allclose(db, dx.sum(axis=0), rtol=1e-5 if dtype == onp.float32 else 1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sigmoid_and_tanh_gradients_on_the_pool_equal_one_thread(dtype):
    x0 = onp.random.default_rng(7).standard_normal((512, 512)).astype(dtype)
    grads = []
    for threads in (2, 1):
        _large.set_num_threads(threads)
        x = fnp.array(x0)
        x.attach_grad()
        before = _large.pool_calls()
        with autograd.record():
            loss = fnp.sum(npx.sigmoid(x) * 3 + fnp.tanh(x))
        loss.backward()
        grads.append(x.grad.asnumpy())
        if threads == 2:
            assert _large.pool_calls() > before
    _same(*grads)
    s, t = 1 / (1 + onp.exp(-x0.astype(onp.float64))), onp.tanh(x0.astype(onp.float64))
    onp.testing.assert_allclose(grads[0], 3 * s * (1 - s) + 1 - t * t,
                                rtol=1e-5 if dtype == onp.float32 else 1e-12, atol=1e-6)
