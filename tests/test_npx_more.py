"""npx additions of issue 18: the special functions, sequence_mask along axis 1, and the
errors of the 1-D/3-D and transposed convolutions (values and derivatives are checked by the
registry-driven op tests through ``op_specs.py``)."""
import numpy as onp
import pytest
import scipy.special as ssp

from fastgrad import np, npx


def test_gamma_gammaln_digamma_match_scipy():
    x = onp.array([0.5, 1.5, 3.0])
    for name in ("gamma", "gammaln", "digamma"):
        onp.testing.assert_allclose(getattr(npx, name)(np.array(x)).asnumpy(),
                                    getattr(ssp, name)(x), rtol=1e-12)


def test_sequence_mask_with_time_on_axis_one():
    x = onp.arange(12.0).reshape(2, 3, 2)         # batch, time, feature
    got = npx.sequence_mask(np.array(x), np.array([2, 1]), use_sequence_length=True, axis=1)
    want = x.copy()
    want[0, 2:] = 0
    want[1, 1:] = 0
    onp.testing.assert_array_equal(got.asnumpy(), want)
    onp.testing.assert_array_equal(npx.sequence_mask(np.array(x)).asnumpy(), x)


def test_errors_name_the_op_and_argument():
    with pytest.raises(TypeError, match="sequence_mask.*sequence_length"):
        npx.sequence_mask(np.ones((2, 2)), use_sequence_length=True)
    with pytest.raises(NotImplementedError, match="deconvolution: target_shape"):
        npx.deconvolution(np.ones((1, 1, 2, 2)), np.ones((1, 1, 2, 2)), kernel=2,
                          target_shape=(4, 4))
    with pytest.raises(NotImplementedError, match="deconvolution: 1-D and 2-D"):
        npx.deconvolution(np.ones((1, 1, 2, 2, 2)), np.ones((1, 1, 2, 2, 2)), kernel=2)
    with pytest.raises(ValueError, match="deconvolution: data has 2 channels"):
        npx.deconvolution(np.ones((1, 2, 2, 2)), np.ones((1, 1, 2, 2)), kernel=2)
    with pytest.raises(ValueError, match="convolution: kernel has 2 values for 3"):
        npx.convolution(np.ones((1, 1, 3, 3, 3)), np.ones((1, 1, 2, 2, 2)), kernel=(2, 2),
                        no_bias=True)
    with pytest.raises(NotImplementedError, match="count_include_pad=False"):
        npx.pooling(np.ones((1, 1, 3, 3, 3)), kernel=2, pad=1, pool_type="avg",
                    count_include_pad=False)
    with pytest.raises(ValueError, match="reshape_like: cannot reshape"):
        npx.reshape_like(np.ones((5,)), np.ones((2, 3)))


def test_global_pooling_in_one_and_three_dimensions():
    x = onp.random.default_rng(0).normal(size=(2, 3, 4, 2, 3))
    onp.testing.assert_allclose(npx.pooling(np.array(x), global_pool=True).asnumpy(),
                                x.max(axis=(2, 3, 4), keepdims=True))
    y = x[:, :, :, 0, 0]
    onp.testing.assert_allclose(npx.pooling(np.array(y), global_pool=True,
                                            pool_type="avg").asnumpy(),
                                y.mean(axis=2, keepdims=True))
