"""maximum and minimum with one operand a single value on the kernel pool (Note [Extrema with a
scalar] in fastgrad/_kernels/_large/kernels.pyx): NumPy's values bit for bit, for NaNs of
either sign and payload, infinities, signed zeros and subnormals, either operand the scalar,
whatever form the scalar takes, and no floating-point error where NumPy raises none. Where the
probe finds NumPy computing otherwise (another platform), the pool runs NumPy's own loop: the
values asserted here are NumPy's either way. No timings.
"""

import platform
import sys
import warnings

import numpy as onp
import pytest

import fastgrad  # noqa: F401
from fastgrad._kernels import _large
from fastgrad._kernels._large import kernels

DTYPES = [onp.float32, onp.float64]
UFUNCS = [onp.maximum, onp.minimum]


@pytest.fixture(autouse=True)
def _two_threads():
    """Split even on a one-core machine, so that the split path is what is tested."""
    old = _large.set_num_threads(2)
    yield
    _large.set_num_threads(old if old else None)


def _specials(dtype):
    """NaNs (both signs, another payload), infinities, signed zeros, a subnormal, others."""
    bits = onp.int32 if dtype == onp.float32 else onp.int64
    values = onp.array([onp.nan, -onp.nan, onp.inf, -onp.inf, 0.0, -0.0, 1.0, -1.0,
                        onp.finfo(dtype).smallest_subnormal, -2.5, 3.0, 0.0, 0.0], dtype)
    values[11:] = values[0]
    values[11:].view(bits)[...] |= 777
    values[12] = -values[12]
    return values


def _large_array(dtype, seed=0):
    n = 2 * _large.get_min_size() * 2 + 4099          # two chunks, a ragged end
    rng = onp.random.default_rng(seed)
    x = rng.standard_normal(n).astype(dtype)
    x[::3] = onp.resize(_specials(dtype), x[::3].size)
    return x


def _same(a, b):
    assert type(a) is type(b) is onp.ndarray
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.machine() == "x86_64"),
                    reason="the probe's answer is known for NumPy 2.0 and 2.4 on x86-64 Linux")
def test_numpys_extrema_are_the_loops_on_x86_64_linux():
    """NumPy's SIMD loops compute isnan(a) ? a : (a > b ? a : b) there: the probe must say so,
    or the pool's own loop is never used."""
    assert kernels.extrema_exact() is True


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uf", UFUNCS, ids=lambda u: u.__name__)
@pytest.mark.parametrize("first", [False, True], ids=["array first", "scalar first"])
def test_every_special_pair_is_numpys(uf, dtype, first):
    x = _large_array(dtype)
    for s in _specials(dtype):
        for scalar in (onp.asarray(s), dtype(s)):
            args = (scalar, x) if first else (x, scalar)
            before = _large.pool_calls()
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with onp.errstate(all="raise"):
                    got = _large.apply(uf, *args)
                    expected = uf(*args)
            assert _large.pool_calls() == before + 1
            _same(got, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("zero", [0, 0.0, -0.0, onp.int64(0), onp.array(0), onp.array(-0.0),
                                  "broadcast (1, 1)"], ids=repr)
def test_relu_zero_in_any_form(dtype, zero):
    x = _large_array(dtype, seed=1)[:258 * 1031].reshape(258, 1031)
    if isinstance(zero, str):
        zero = onp.zeros((1, 1), dtype)
    before = _large.pool_calls()
    got = _large.apply(onp.maximum, x, zero)
    expected = onp.maximum(x, zero)
    # an int64 NumPy scalar or 0-d array makes a float32 array float64: NumPy casts it first
    assert _large.pool_calls() == before + (expected.dtype == x.dtype)
    _same(got, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_two_arrays_and_other_dtypes_keep_numpys_loop(dtype):
    x, y = _large_array(dtype, seed=2), _large_array(dtype, seed=3)[::-1].copy()
    _same(_large.apply(onp.maximum, x, y), onp.maximum(x, y))
    xi = onp.arange(600_000, dtype=onp.int64) - 300_000
    _same(_large.apply(onp.maximum, xi, 7), onp.maximum(xi, 7))
    _same(_large.apply(onp.fmax, x, 0.0), onp.fmax(x, 0.0))


def test_into_an_owned_temporary():
    """An operand the rule owns takes the result (Note [Owned temporaries]): the loop reads
    and writes the same elements."""
    x = _large_array(onp.float64, seed=4)
    outer = _large.rule_begin()
    try:
        shifted = _large.op_add(x, 0.25)
        got = _large.Split(onp.minimum)(shifted, 0.5)
    finally:
        _large.rule_end(outer)
    assert got is shifted
    _same(got, onp.minimum(x + 0.25, 0.5))
