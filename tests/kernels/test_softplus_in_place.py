"""softplus and log_sigmoid's kernels compute in their result's buffer (no temporaries):
their values are the composition's, max(x, 0) + log1p(exp(-|x|)) and its negation at -x, bit
for bit, for every float dtype, infinities, NaN, signed zeros, huge values, 0-d, empty,
non-contiguous and integer inputs."""

import numpy as onp
import pytest

from fastgrad._kernels import _forward as K


def _softplus(x):
    return onp.maximum(x, 0) + onp.log1p(onp.exp(-onp.abs(x)))


def _inputs(dtype):
    rng = onp.random.default_rng(7)
    special = [onp.inf, -onp.inf, onp.nan, 0.0, -0.0, 1e-30, -1e-30, 40, -40, 800, -800]
    return onp.concatenate([rng.standard_normal(200) * 20, special]).astype(dtype)


@pytest.mark.parametrize("dtype", [onp.float16, onp.float32, onp.float64])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "0-d", "empty", "scalar"])
def test_equal_to_the_composition_bit_for_bit(dtype, layout):
    x = _inputs(dtype)
    x = {"contiguous": x, "strided": x[::3], "0-d": onp.array(x[5]), "empty": x[:0],
         "scalar": x[5]}[layout]
    with onp.errstate(all="ignore"):
        got, want = K.softplus(x), _softplus(x)
        got_ls, want_ls = K.log_sigmoid(x), -_softplus(-x)
    for a, b in [(got, want), (got_ls, want_ls)]:
        assert onp.asarray(a).dtype == onp.asarray(b).dtype and onp.shape(a) == onp.shape(b)
        assert onp.array_equal(a, b, equal_nan=True)
        assert onp.array_equal(onp.signbit(a), onp.signbit(b))


def test_input_is_not_written():
    x = _inputs(onp.float64)
    before = x.copy()
    K.softplus(x)
    K.log_sigmoid(x)
    assert onp.array_equal(x, before, equal_nan=True)


def test_integer_input_as_before():
    x = onp.arange(-3, 4)
    assert onp.array_equal(K.softplus(x), _softplus(x))
    assert onp.array_equal(K.log_sigmoid(x), -_softplus(-x))
