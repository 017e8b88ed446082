"""npx additions of issue 18: the special functions, sequence_mask along axis 1, and the
errors of the 1-D/3-D and transposed convolutions (values and derivatives are checked by the
registry-driven op tests through ``op_specs.py``)."""
import os

import numpy as onp
import pytest
import scipy.special as ssp

from fastgrad import np, npx

from _helpers import FIXTURES


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
    with pytest.raises(ValueError, match="deconvolution: data .* must be 1-D, 2-D or 3-D"):
        npx.deconvolution(np.ones((1, 1, 2, 2)), np.ones((1, 1, 2, 2, 2)), kernel=2)
    with pytest.raises(ValueError, match="deconvolution: data has 2 channels"):
        npx.deconvolution(np.ones((1, 2, 2, 2)), np.ones((1, 1, 2, 2)), kernel=2)
    with pytest.raises(ValueError, match="convolution: kernel has 2 values for 3"):
        npx.convolution(np.ones((1, 1, 3, 3, 3)), np.ones((1, 1, 2, 2, 2)), kernel=(2, 2),
                        no_bias=True)
    with pytest.raises(ValueError, match="convolution: 4 input channels .* num_group=3"):
        npx.convolution(np.ones((1, 4, 3, 3)), np.ones((3, 1, 2, 2)), kernel=2, num_group=3)
    with pytest.raises(ValueError, match="reshape_like: cannot reshape"):
        npx.reshape_like(np.ones((5,)), np.ones((2, 3)))


def _avg_pool3d_reference(x, k, s, p, count_include_pad):
    """Brute-force 3-D average pooling (NumPy loops), each window's divisor its number of data
    elements unless ``count_include_pad``."""
    n = [(x.shape[2 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(3)]
    out = onp.zeros(x.shape[:2] + tuple(n))
    for idx in onp.ndindex(*n):
        lo = [idx[i] * s[i] - p[i] for i in range(3)]
        hi = [lo[i] + k[i] for i in range(3)]
        clo = [max(v, 0) for v in lo]
        chi = [min(hi[i], x.shape[2 + i]) for i in range(3)]
        window = x[:, :, clo[0]:chi[0], clo[1]:chi[1], clo[2]:chi[2]]
        size = onp.prod(k) if count_include_pad else window[0, 0].size
        out[(slice(None), slice(None)) + idx] = window.sum(axis=(2, 3, 4)) / size
    return out


@pytest.mark.parametrize("count_include_pad", [False, True])
def test_3d_average_pooling_with_depth_padding(count_include_pad):
    x = onp.random.default_rng(1).normal(size=(2, 2, 3, 4, 3))
    got = npx.pooling(np.array(x), kernel=(2, 3, 2), stride=(1, 2, 1), pad=(1, 1, 1),
                      pool_type="avg", count_include_pad=count_include_pad)
    onp.testing.assert_allclose(got.asnumpy(), _avg_pool3d_reference(
        x, (2, 3, 2), (1, 2, 1), (1, 1, 1), count_include_pad), rtol=1e-12)


def test_global_pooling_in_one_and_three_dimensions():
    x = onp.random.default_rng(0).normal(size=(2, 3, 4, 2, 3))
    onp.testing.assert_allclose(npx.pooling(np.array(x), global_pool=True).asnumpy(),
                                x.max(axis=(2, 3, 4), keepdims=True))
    y = x[:, :, :, 0, 0]
    onp.testing.assert_allclose(npx.pooling(np.array(y), global_pool=True,
                                            pool_type="avg").asnumpy(),
                                y.mean(axis=2, keepdims=True))


# ---------------------------------------------------------------- against MXNet itself
_FIXTURE = onp.load(os.path.join(FIXTURES, "npx_more.npz"))
_CALLS = {
    "conv1d": lambda x, w, b: npx.convolution(x, w, b, kernel=(3,), stride=(2,), pad=(1,),
                                              num_filter=3),
    "conv3d": lambda x, w, b: npx.convolution(x, w, b, kernel=(2, 3, 2), stride=(2, 1, 1),
                                              pad=(1, 1, 0), dilate=(1, 1, 2), num_filter=2),
    "pool3d_max": lambda x: npx.pooling(x, kernel=(2, 2, 2), stride=(2, 1, 1), pad=(1, 0, 1),
                                        pool_type="max"),
    "pool3d_avg": lambda x: npx.pooling(x, kernel=(3, 2, 2), stride=(1, 1, 1), pad=(1, 1, 0),
                                        pool_type="avg"),
    "pool1d_avg": lambda x: npx.pooling(x, kernel=(2,), stride=(2,), pool_type="avg"),
    "deconv2d": lambda x, w, b: npx.deconvolution(x, w, b, kernel=(2, 3), stride=(2, 1),
                                                  pad=(1, 1), adj=(1, 0), num_filter=3,
                                                  no_bias=False),
    "deconv1d": lambda x, w: npx.deconvolution(x, w, kernel=(3,), stride=(1,), dilate=(2,),
                                               num_filter=1, no_bias=True),
    "sequence_mask0": lambda x: npx.sequence_mask(x, np.array([1, 4, 2]),
                                                  use_sequence_length=True, value=-1.0),
    "sequence_mask1": lambda x: npx.sequence_mask(x, np.array([2, 1]),
                                                  use_sequence_length=True, axis=1),
    "gather_nd": lambda x: npx.gather_nd(x, onp.array([[1, 0, 2, 1], [2, 1, 0, 2]])),
    "reshape_like": lambda x: npx.reshape_like(x, np.ones((3, 4))),
}


@pytest.mark.parametrize("name", sorted(_CALLS))
def test_values_and_gradients_equal_mxnet(name):
    """``tests/fixtures/make_npx_more.py`` recorded MXNet 1.9.1's results."""
    import fastgrad as mx
    n_in = len([k for k in _FIXTURE.files if k.startswith(name + ".in")])
    arrays = [np.array(_FIXTURE["%s.in%d" % (name, k)]) for k in range(n_in)]
    for a in arrays:
        a.attach_grad()
    with mx.autograd.record():
        y = _CALLS[name](*arrays)
        loss = (y * np.array(_FIXTURE[name + ".w"])).sum()
    loss.backward()
    onp.testing.assert_allclose(y.asnumpy(), _FIXTURE[name + ".out"], rtol=1e-10, atol=1e-12)
    for k, a in enumerate(arrays):
        onp.testing.assert_allclose(a.grad.asnumpy(), _FIXTURE["%s.grad%d" % (name, k)],
                                    rtol=1e-10, atol=1e-12, err_msg="input %d" % k)


def test_deconvolution_is_the_transpose_of_mxnets_convolution_with_stride_and_dilation():
    # MXNet 1.9.1's own deconvolution differs here (stride 2 and dilate 2 together); its
    # convolution's input gradient is the transpose, and fastgrad's deconvolution equals it.
    g, w = _FIXTURE["conv_input_grad_s2d2.g"], _FIXTURE["conv_input_grad_s2d2.w"]
    got = npx.deconvolution(np.array(g), np.array(w), kernel=(2,), stride=(2,), dilate=(2,),
                            num_filter=1)
    onp.testing.assert_allclose(got.asnumpy(), _FIXTURE["conv_input_grad_s2d2.out"],
                                rtol=1e-10, atol=1e-12)
