"""Elementwise ufuncs split across threads on large arrays (Note [Parallel kernels]).

Splitting must never change a value: every result here is compared bit for bit with
single-threaded NumPy. No timings.
"""

import os
import subprocess
import sys
import warnings

import numpy as onp
import pytest

import fastgrad  # noqa: F401
from fastgrad._kernels import _large
from fastgrad import autograd
from fastgrad._kernels._large import kernels
from fastgrad import np as fnp
from fastgrad import npx
from fastgrad._kernels._filled import Filled

N = (1 << 18) + 4097          # above the threshold, not a multiple of the chunk alignment

UNARY = [onp.sin, onp.cos, onp.exp, onp.log, onp.sqrt, onp.tanh, onp.negative, onp.square,
         onp.expm1, onp.log1p, onp.arctan, onp.abs, onp.sign]
BINARY = [onp.add, onp.subtract, onp.multiply, onp.divide, onp.power, onp.maximum,
          onp.minimum, onp.greater, onp.less_equal, onp.equal, onp.arctan2, onp.hypot]


@pytest.fixture(autouse=True)
def _two_threads():
    """Split even on a one-core machine, so that the split path is what is tested."""
    old = _large.set_num_threads(2)
    yield
    _large.set_num_threads(old if old else None)


def _same(a, b):
    assert type(a) is type(b) is onp.ndarray
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


def _data(dtype, shape=(N,), seed=0):
    rng = onp.random.default_rng(seed)
    return rng.uniform(-3, 3, size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
@pytest.mark.parametrize("uf", UNARY, ids=lambda u: u.__name__)
def test_unary_bit_identical(uf, dtype):
    x = _data(dtype)
    with onp.errstate(all="ignore"):
        _same(_large.apply(uf, x), uf(x))


@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
@pytest.mark.parametrize("uf", BINARY, ids=lambda u: u.__name__)
def test_binary_bit_identical(uf, dtype):
    x, y = _data(dtype, seed=1), _data(dtype, seed=2)
    cases = [(x, y), (x, 2.5), (0.5, y), (x, 3), (x, onp.float64(1.5)), (x, onp.float32(1.5)),
             (x, onp.array(0.25, dtype)), (x, onp.broadcast_to(onp.array(0.75, dtype), x.shape)),
             (x.reshape(512, -1) if N % 512 == 0 else x, y.reshape(512, -1) if N % 512 == 0
              else y)]
    for args in cases:
        with onp.errstate(all="ignore"):
            _same(_large.apply(uf, *args), uf(*args))


def test_2d_and_bool_operands():
    x = _data(onp.float64, shape=(700, 600))
    mask = x > 0
    _same(_large.apply(onp.multiply, x, mask), x * mask)
    _same(_large.apply(onp.greater, x, 0), x > 0)


def test_in_place_accumulation_is_exact():
    acc, g = _data(onp.float64, seed=3), _data(onp.float64, seed=4)
    expected = acc + g
    _same(_large.apply(onp.add, acc, g), expected)
    # the engine adds gradients into a buffer it owns: the same values as on one thread
    def grad():
        x = fnp.array(_data(onp.float64, seed=5))
        x.attach_grad()
        with autograd.record():
            y = fnp.sum(fnp.sin(x) + fnp.cos(x) + x * x)
        y.backward()
        return x.grad.asnumpy()

    g2 = grad()
    _large.set_num_threads(1)
    _same(g2, grad())


@pytest.mark.parametrize("args", [
    lambda: (_data(onp.float64, (512, 600)), _data(onp.float64, (600,))),       # broadcasting
    lambda: (_data(onp.float64, (600, 1024))[:, ::2], 1.0),                    # strided
    lambda: (_data(onp.float64, (1000, 700)).T, 1.0),                          # Fortran order
    lambda: (_data(onp.float64, (100,)), 2.0),                                 # small
    lambda: (_data(onp.float64).astype(onp.complex128), 2.0),                  # complex
    lambda: (_data(onp.float64), [1.0]),                                       # a list
])
def test_fallbacks_give_numpy_results(args):
    a = args()
    _same(onp.asarray(_large.apply(onp.multiply, *a)), onp.multiply(*a))


def test_floating_point_warnings_follow_errstate():
    x = -_data(onp.float64) - 1.0            # every log is invalid
    x[0] = 0.0                               # and one divides by zero
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _large.apply(onp.log, x)
    msgs = [str(w.message) for w in caught]
    assert msgs == ["divide by zero encountered in log", "invalid value encountered in log"]
    assert all(w.filename == __file__ for w in caught)
    with onp.errstate(invalid="raise"):     # as NumPy: warn for divide, then raise
        with pytest.warns(RuntimeWarning, match="divide by zero encountered in log"):
            with pytest.raises(FloatingPointError, match="invalid value encountered in log"):
                _large.apply(onp.log, x)
    with onp.errstate(all="ignore"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _large.apply(onp.log, x)
    y = onp.ones(N)
    y[-1] = -1.0                             # only the last chunk (a worker's) is invalid
    with onp.errstate(invalid="raise"):
        with pytest.raises(FloatingPointError):
            _large.apply(onp.sqrt, y)


def test_floating_point_errors_through_fastgrad():
    x = fnp.array(-onp.ones(N))
    with onp.errstate(invalid="raise"):
        with pytest.raises(FloatingPointError):
            fnp.log(x)
    with pytest.warns(RuntimeWarning, match="invalid value encountered in sqrt"):
        fnp.sqrt(x)


def test_errcall_mode_is_not_split():
    seen = []
    x = -_data(onp.float64) - 1.0
    with onp.errstate(all="call", call=lambda *a: seen.append(a)):
        _large.apply(onp.log, x)
    assert seen and seen[0][0] == "invalid value"


@pytest.mark.parametrize("where", [0, -1], ids=["caller's chunk", "worker's chunk"])
def test_exceptions_propagate(where):
    # Integer powers check their exponents inside the loop: the error comes from one chunk.
    a = onp.full(N, 2, dtype=onp.int64)
    b = onp.ones(N, dtype=onp.int64)
    b[where] = -1
    with pytest.raises(ValueError, match="negative integer powers"):
        _large.apply(onp.power, a, b)
    b[where] = 1
    _same(_large.apply(onp.power, a, b), onp.power(a, b))


def test_errors_are_numpys():
    x = _data(onp.float64)
    with pytest.raises(TypeError):
        _large.apply(onp.add, x, "a")
    with pytest.raises(TypeError):
        fnp.bitwise_and(fnp.array(x), 1)


def test_threshold_and_thread_count():
    assert _large.get_num_threads() == 2
    old = _large.set_min_size(1 << 30)
    try:
        _same(_large.apply(onp.sin, _data(onp.float64)), onp.sin(_data(onp.float64)))
    finally:
        _large.set_min_size(old)
    with pytest.raises(ValueError):
        _large.set_num_threads(0)


def _loss(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(-x * x) + x * x + npx.relu(x) * fnp.tanh(x) / 3.0)


def _grad(x0):
    x = fnp.array(x0)
    x.attach_grad()
    with autograd.record():
        y = _loss(x)
    y.backward()
    return y.asnumpy(), x.grad.asnumpy()


@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
def test_gradients_unchanged(dtype):
    x0 = _data(dtype)
    y2, g2 = _grad(x0)
    _large.set_num_threads(1)
    y1, g1 = _grad(x0)
    _same(g2, g1)
    assert y1 == y2


def test_create_graph_unchanged():
    x0 = _data(onp.float64)

    def second():
        x = fnp.array(x0)
        x.attach_grad()
        with autograd.record():
            y = fnp.sum(fnp.sin(x) * x)
            (d,) = autograd.grad(y, [x], create_graph=True)
            z = fnp.sum(d * d)
        z.backward()
        return x.grad.asnumpy()

    a = second()
    _large.set_num_threads(1)
    _same(a, second())


def _python(code, env, tmp_path):
    # From an empty directory: ``python -c`` puts the working directory first on sys.path, and
    # the source tree's uncompiled package must not shadow the installed one.
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)


def test_env_var_one_disables_splitting(tmp_path):
    code = ("import numpy, fastgrad\n"
            "from fastgrad._kernels import _large as P\n"
            "from fastgrad import np as fnp\n"
            "assert P.get_num_threads() == 1\n"
            "x = numpy.random.default_rng(0).random(1 << 19)\n"
            "fnp.sin(fnp.array(x))\n"
            "import threading\n"
            "assert not [t for t in threading.enumerate() if t.name.startswith('fastgrad')]\n"
            "print('ok')\n")
    env = dict(os.environ, FASTGRAD_NUM_THREADS="1")
    out = _python(code, env, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_env_var_invalid(tmp_path):
    code = "from fastgrad._kernels import _large as P\nP.get_num_threads()\n"
    env = dict(os.environ, FASTGRAD_NUM_THREADS="zero")
    out = _python(code, env, tmp_path)
    assert out.returncode != 0 and "FASTGRAD_NUM_THREADS" in out.stderr


def test_operators_never_write_an_operand():
    """No operand becomes the output, named or temporary (the result is a fresh buffer)."""
    x = _data(onp.float64)
    g = onp.broadcast_to(onp.array(2.0), x.shape)
    y = onp.cos(x)
    before = y.copy()
    r = _large.op_mul(g, y)
    assert r is not y and not onp.shares_memory(r, y)
    _same(y, before)
    _same(r, g * before)
    t = onp.cos(x)
    r = _large.op_sub(t, x)
    assert r is not t
    _same(t, onp.cos(x))
    _same(r, onp.cos(x) - x)
    t = onp.cos(x)
    r = _large.op_neg(t)
    assert r is not t
    _same(r, -onp.cos(x))
    _same(_large.op_mul(g, onp.cos(x)), g * onp.cos(x))


# ---------------------------------------------------------------- the kernel pool
# Float and bool calls whose operands need no cast run NumPy's own inner loop on C threads
# (Note [Kernel pool]); broadcast operands are cut into rows.

BROADCASTS = [((1100, 512), (512,)), ((1100, 512), (1100, 1)), ((1100, 512), (1, 512)),
              ((5, 220, 512), (512,)), ((5, 220, 512), (220, 1)), ((1100, 512), ()),
              ((2, 3, 4, 46, 512), (512,)), ((2, 3, 4, 46, 512), (4, 1, 512))]


@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("uf", [onp.add, onp.multiply, onp.arctan2, onp.power, onp.greater,
                                onp.maximum], ids=lambda u: u.__name__)
def test_broadcast_operands_bit_identical_on_the_pool(uf, shapes, dtype):
    x = _data(dtype, shapes[0], seed=3)
    b = _data(dtype, shapes[1], seed=4)
    before = _large.pool_calls()
    with onp.errstate(all="ignore"):
        _same(_large.apply(uf, x, b), uf(x, b))
        _same(_large.apply(uf, b, x), uf(b, x))
    assert _large.pool_calls() == before + 2


def test_scalars_take_the_loops_dtype_and_casts_are_left_to_numpy():
    x = _data(onp.float32, (600_000,))
    before = _large.pool_calls()
    for args in [(x, 2.5), (x, 3), (x, True), (x, onp.float32(0.5))]:
        _same(_large.apply(onp.multiply, *args), onp.multiply(*args))
    assert _large.pool_calls() == before + 4
    # A float64 scalar or array makes NumPy cast x: another path, the same values.
    for args in [(x, onp.float64(0.5)), (x, x.astype(onp.float64)), (x > 0, x)]:
        _same(_large.apply(onp.multiply, *args), onp.multiply(*args))
    assert _large.pool_calls() == before + 4


def test_results_are_fresh_and_named_arrays_untouched():
    x, y = _data(onp.float64, (600_000,), seed=5), _data(onp.float64, (600_000,), seed=6)
    expected = x + y
    out = onp.empty_like(x)
    before = _large.pool_calls()
    _same(_large.op_add(x, y), expected)              # names: never overwritten
    assert _large.pool_calls() == before + 1
    acc = x.copy()
    t = acc.copy()
    r = _large.op_add(t, y)
    assert r is not t
    _same(t, x)                                          # a temporary is not written either
    _large.apply(onp.add, acc, y)
    _same(acc, x)                                        # a named array is never written
    onp.add(x, y, out=out)
    _same(out, expected)


def test_warning_raised_in_the_worker_chunk():
    x = _data(onp.float64, seed=7)
    x[: N // 2] = onp.abs(x[: N // 2]) + 1.0             # negatives only in the worker's half
    x[-1] = -1.0
    with pytest.warns(RuntimeWarning, match="invalid value encountered in log"):
        _large.apply(onp.log, x)
    with onp.errstate(invalid="raise"), pytest.raises(FloatingPointError):
        _large.apply(onp.log, x)


def test_concurrent_callers_get_their_own_results():
    import threading
    inputs = [_data(onp.float64, seed=10 + i) for i in range(4)]
    results = [None] * 4

    def work(i):
        for _ in range(20):
            results[i] = _large.apply(onp.sin, inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        _same(results[i], onp.sin(inputs[i]))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_pool_works_in_a_forked_child(tmp_path):
    code = (
        "import os, numpy as np\n"
        "from fastgrad._kernels import _large\n"
        "_large.set_num_threads(2)\n"
        "x = np.random.default_rng(0).uniform(-3, 3, %d)\n"
        "_large.apply(np.sin, x)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    ok = _large.apply(np.sin, x).tobytes() == np.sin(x).tobytes()\n"
        "    os._exit(0 if ok and _large.pool_calls() == 2 else 1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "raise SystemExit(os.waitstatus_to_exitcode(status))\n" % N)
    out = _python(code, dict(os.environ), tmp_path)
    assert out.returncode == 0, out.stderr


# ---------------------------------------------------------------- reductions and casts


@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
@pytest.mark.parametrize("shape", [(N,), (512, 512), (3, 700, 129), (1 << 20,)], ids=str)
def test_full_sum_is_numpys_bit_for_bit(shape, dtype):
    rng = onp.random.default_rng(20)
    x = (rng.standard_normal(shape) * onp.exp(rng.standard_normal(shape) * 4)).astype(dtype)
    pairwise = kernels.numpy_sums_pairwise()    # its check, on first use, calls the pool too
    before = _large.pool_calls()
    got = _large.sum_all(x)
    expected = onp.add.reduce(x, axis=None)
    if not pairwise:                            # NumPy 2.0 (Note [NumPy's summation order])
        assert got is None
    else:
        assert type(got) is type(expected) and got.tobytes() == expected.tobytes()
        assert _large.pool_calls() == before + 1
    # Through fastgrad's sum, keepdims or not.
    for keepdims in (False, True):
        r = fnp.sum(fnp.array(x), keepdims=keepdims).asnumpy()
        e = onp.sum(x, keepdims=keepdims)
        assert r.shape == onp.shape(e) and r.tobytes() == onp.asarray(e).tobytes()


def test_full_sum_zeros_and_overflow_as_numpy():
    if not kernels.numpy_sums_pairwise():
        pytest.skip("this NumPy does not sum pairwise over the whole array: sum_all declines")
    z = onp.full(N, -0.0)
    assert _large.sum_all(z).tobytes() == onp.add.reduce(z, axis=None).tobytes()
    big = onp.full(N, 1e308)
    with pytest.warns(RuntimeWarning, match="overflow encountered in reduce"):
        assert _large.sum_all(big) == onp.inf
    with onp.errstate(over="raise"), pytest.raises(FloatingPointError):
        _large.sum_all(big)
    # Not for it: small, integer, or not contiguous.
    assert _large.sum_all(onp.ones(100)) is None
    assert _large.sum_all(onp.ones(N, dtype=onp.int64)) is None
    assert _large.sum_all(onp.ones((2, N))[:, ::2]) is None


@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
@pytest.mark.parametrize("shape,nlead", [((512, 512), 1), ((3, 200, 512), 2),
                                         ((1001, 300), 1), ((7, 40000), 1)], ids=str)
def test_row_sums_are_two_halves_on_any_number_of_threads(shape, nlead, dtype):
    """Note [Row sums]: NumPy's sum of each half of the rows, then their sum."""
    rng = onp.random.default_rng(21)
    x = (rng.standard_normal(shape) * onp.exp(rng.standard_normal(shape) * 3)).astype(dtype)
    rows = int(onp.prod(shape[:nlead]))
    flat = x.reshape(rows, -1)
    expected = (onp.add.reduce(flat[: rows // 2], axis=0)
                + onp.add.reduce(flat[rows // 2:], axis=0)).reshape(shape[nlead:])
    two = _large.sum_rows(x, nlead)
    _large.set_num_threads(1)
    one = _large.sum_rows(x, nlead)
    _large.set_num_threads(2)
    _same(two, expected)
    _same(one, expected)
    onp.testing.assert_allclose(two, x.sum(axis=tuple(range(nlead))),
                                rtol=1e-5 if dtype == onp.float32 else 1e-12,
                                atol=1e-5 * float(onp.abs(x).max()))


def test_row_sums_only_for_large_wide_float_arrays():
    assert _large.sum_rows(onp.ones((4, 100)), 1) is None          # small
    assert _large.sum_rows(onp.ones((2000, 100)), 1) is None       # narrow rows
    assert _large.sum_rows(onp.ones((1, 300000)), 1) is None       # one row
    assert _large.sum_rows(onp.ones((600, 512), dtype=onp.int64), 1) is None


def test_bias_gradient_uses_the_row_sums():
    rng = onp.random.default_rng(22)
    xs, bs = rng.standard_normal((600, 512)), rng.standard_normal(512)
    x, b = fnp.array(xs), fnp.array(bs)
    b.attach_grad()
    with autograd.record():
        y = fnp.sum(fnp.sin(x + b))
    y.backward()
    g = onp.cos(xs + bs)
    _same(b.grad.asnumpy(), onp.add.reduce(g[:300], axis=0) + onp.add.reduce(g[300:], axis=0))


@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
def test_mask_cast_exact(dtype):
    m = _data(onp.float64, (700, 512), seed=23) > 0
    m[0, 0] = True
    before = _large.pool_calls()
    _same(_large.cast_mask(m, dtype), m.astype(dtype))
    assert _large.pool_calls() == before + 1
    assert _large.cast_mask(m, onp.int32) is None
    assert _large.cast_mask(m[:, ::2], dtype) is None


def test_buffer_cache_reuses_blocks_and_respects_its_limit():
    _large.clear_cache()
    assert _large.cached_bytes() == 0
    x = _data(onp.float64, (600_000,), seed=24)
    a = _large.apply(onp.add, x, 1.0)
    address = a.ctypes.data
    assert a.flags.owndata and a.flags.writeable
    del a                                           # back to the cache
    assert _large.cached_bytes() == x.nbytes
    b = _large.apply(onp.add, x, 2.0)            # the same block again
    assert b.ctypes.data == address and _large.cached_bytes() == 0
    _same(b, x + 2.0)
    old = _large.set_cache_limit(0)              # keep nothing
    try:
        del b
        assert _large.cached_bytes() == 0
    finally:
        _large.set_cache_limit(old)
    with pytest.raises(ValueError):
        _large.set_cache_limit(-1)
    # Arrays of other sizes and user arrays never come from it.
    c = _large.apply(onp.add, x[:-8192], 1.0)
    del c
    assert _large.clear_cache() == (x.size - 8192) * 8


# ---------------------------------------------------------------- owned temporaries


def _in_rule(fn):
    """Run ``fn`` in the scope of a large-binding rule (Note [Owned temporaries])."""
    outer = _large.rule_begin()
    try:
        return fn()
    finally:
        _large.rule_end(outer)


def test_a_temporary_of_the_rule_takes_the_result():
    x = _data(onp.float64, (600_000,), seed=30)
    g = _data(onp.float64, (600_000,), seed=31)
    g0 = g.copy()

    def rule():
        t = _large.Split(onp.cos)(x)
        return t, _large.op_mul(g, t)

    t, r = _in_rule(rule)
    assert r is t                       # the temporary became the output, as NumPy's elision
    _same(r, g0 * onp.cos(x))
    _same(g, g0)


def test_arrays_made_outside_the_rule_are_never_written():
    x = _data(onp.float64, (600_000,), seed=32)
    y = onp.cos(x)                      # made before the rule: a name of the rule
    y0 = y.copy()
    one = Filled(onp.float64(1.0), x.shape)

    def rule():
        same = _large.op_mul(one, y)    # Filled's 1 * y hands y itself back
        assert same is y
        return _large.op_mul(same, 2.0)

    r = _in_rule(rule)
    assert r is not y
    _same(y, y0)
    _same(r, y0 * 2.0)
    # Outside any rule nothing is owned, so nothing is reused either.
    t = onp.cos(x)
    assert _large.op_mul(t, 2.0) is not t
    _same(t, onp.cos(x))


def test_a_returned_result_is_not_reused_by_the_next_rule():
    x = _data(onp.float64, (600_000,), seed=33)
    first = _in_rule(lambda: _large.op_mul(x, 3.0))
    kept = first.copy()
    second = _in_rule(lambda: _large.op_add(first, 1.0))
    assert second is not first
    _same(first, kept)
    _same(second, kept + 1.0)


def test_rule_scopes_belong_to_their_thread():
    import threading
    x = _data(onp.float64, (600_000,), seed=34)
    made = {}
    ready, done = threading.Event(), threading.Event()

    def other():
        def rule():
            made["t"] = _large.Split(onp.sin)(x)       # owned by this thread's rule
            ready.set()
            done.wait(10)
        _in_rule(rule)

    worker = threading.Thread(target=other)
    worker.start()
    assert ready.wait(10)
    t = made["t"]
    t0 = t.copy()
    r = _in_rule(lambda: _large.op_mul(t, 2.0))     # this thread's rule does not own t
    done.set()
    worker.join()
    assert r is not t
    _same(t, t0)
    _same(r, t0 * 2.0)


# ---------------------------------------------------------------- switching kernels off


@pytest.mark.parametrize("name", _large.KERNELS)
def test_each_kernel_can_be_switched_off_alone(name):
    """Every kernel off in turn: the same values, and the kernel switched off makes no call."""
    x = _data(onp.float64, (700, 512), seed=40)
    b = _data(onp.float64, (512,), seed=41)
    m = x > 0
    try:
        assert _large.disable([name]) == []
        before = _large.pool_calls()
        if name == "apply":
            _same(_large.apply(onp.sin, x), onp.sin(x))
            assert _large.pool_calls() == before
        elif name == "sum_all":
            assert _large.sum_all(x) is None
        elif name == "cast_mask":
            assert _large.cast_mask(m, onp.float64) is None
        elif name == "sum_rows":
            assert _large.sum_rows(x, 1) is None
        # Gradients of a large broadcast (elementwise, both accumulations, the large rule,
        # the row sum) are those of the kernels all on, except for sum_rows's own order.
        xs, bs = fnp.array(x), fnp.array(b)
        xs.attach_grad()
        bs.attach_grad()
        with autograd.record():
            y = fnp.sin(xs + bs) * xs + xs * xs
        y.backward()
        got = (xs.grad.asnumpy(), bs.grad.asnumpy())
        assert _large.disable() == [name]
        with autograd.record():
            y = fnp.sin(xs + bs) * xs + xs * xs
        y.backward()
        _same(got[0], xs.grad.asnumpy())
        if name != "sum_rows":
            _same(got[1], bs.grad.asnumpy())
        else:
            onp.testing.assert_allclose(got[1], bs.grad.asnumpy(), rtol=1e-12)
    finally:
        _large.disable()


def test_disable_names_the_kernels():
    with pytest.raises(ValueError, match="unknown kernel 'threads'"):
        _large.disable(["threads"])
    assert _large.disable() == []
