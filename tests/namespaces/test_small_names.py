"""Small names Gluon code reaches for (issue 24, item 10), as MXNet 1.9.1 has them.

The expected shapes, dtypes and errors are what MXNet 1.9.1 gives for the same calls (run on
the oracle venv); distributions are checked by their moments on seeded draws.
"""

import numpy as onp
import pytest

import fastgrad as mx


def test_np_bool_is_a_dtype():
    assert mx.np.zeros((2,), dtype=mx.np.bool).dtype == onp.bool_
    assert mx.np.array([1, 0], dtype=mx.np.bool).asnumpy().tolist() == [True, False]


@pytest.mark.parametrize("call, shape", [
    (lambda: mx.nd.random.randn(2, 3), (2, 3)),
    (lambda: mx.nd.random.randn(), (1,)),                      # MXNet: no 0-d NDArrays
    (lambda: mx.random.randn(4), (4,)),
    (lambda: mx.random.poisson(), (1,)),
    (lambda: mx.random.poisson(2.0, shape=(2, 3)), (2, 3)),
    (lambda: mx.random.poisson(mx.nd.array([1, 10]), shape=(4,)), (2, 4)),
    (lambda: mx.random.exponential(), (1,)),
    (lambda: mx.random.gamma(mx.nd.array([1, 10]), mx.nd.array([1, 2])), (2,)),
    (lambda: mx.random.negative_binomial(), (1,)),
    (lambda: mx.random.generalized_negative_binomial(3, 0.4, shape=2), (2,)),
    (lambda: mx.random.uniform(mx.nd.array([0, 10]), mx.nd.array([1, 11])), (2,)),
    (lambda: mx.random.uniform(mx.nd.array([0, 10]), mx.nd.array([1, 11]), shape=(3,)), (2, 3)),
    (lambda: mx.random.normal(mx.nd.array([0, 10]), mx.nd.array([1, 1]), shape=2), (2, 2)),
    (lambda: mx.random.randint(0, 3), (1,)),
    (lambda: mx.random.multinomial(mx.nd.array([[0.2, 0.8], [1, 0]])), (2,)),
    (lambda: mx.random.multinomial(mx.nd.array([[0.2, 0.8], [1, 0]]), shape=(3,)), (2, 3)),
    (lambda: mx.random.multinomial(mx.nd.array([0.2, 0.8])), (1,)),
    (lambda: mx.nd.random.uniform_like(mx.nd.zeros((2, 2))), (2, 2)),
    (lambda: mx.nd.random.poisson_like(mx.nd.zeros((2, 2)), lam=3), (2, 2)),
])
def test_samplers_have_mxnets_shapes(call, shape):
    mx.random.seed(0)
    out = call()
    assert isinstance(out, mx.nd.NDArray)
    assert out.shape == shape


def test_samplers_have_mxnets_dtypes():
    assert mx.random.poisson(3, shape=(2,)).dtype == onp.float32
    assert mx.random.randint(0, 3, shape=(2,)).dtype == onp.int32
    assert mx.random.multinomial(mx.nd.array([0.5, 0.5]), shape=2).dtype == onp.int32
    assert mx.nd.random.randn(2, dtype="float64").dtype == onp.float64
    assert mx.nd.random.gamma_like(mx.nd.zeros((2,), dtype="float64")).dtype == onp.float64
    out = mx.nd.zeros((2, 3))
    assert mx.nd.random.uniform(out=out) is out and out.asnumpy().max() > 0


def test_sampler_moments_and_seeding():
    mx.random.seed(3)
    n = 40000
    # MXNet's parameterisations: exponential(scale) but exponential_like(lam);
    # gamma(alpha, beta) with beta the scale; negative_binomial(k, p) counts failures

    def mean(a):
        return float(a.asnumpy().mean())
    assert mean(mx.random.exponential(4.0, shape=n)) == pytest.approx(4, rel=0.03)
    assert mean(mx.nd.random.exponential_like(mx.nd.zeros(n), lam=4.0)) == pytest.approx(
        0.25, rel=0.03)
    assert mean(mx.random.gamma(2.0, 3.0, shape=n)) == pytest.approx(6, rel=0.03)
    assert mean(mx.random.poisson(5.0, shape=n)) == pytest.approx(5, rel=0.03)
    assert mean(mx.random.negative_binomial(3, 0.4, shape=n)) == pytest.approx(3 * 0.6 / 0.4,
                                                                               rel=0.03)
    gnb = mx.random.generalized_negative_binomial(2.0, 0.5, shape=n).asnumpy()
    assert gnb.mean() == pytest.approx(2.0, rel=0.03)
    assert gnb.var() == pytest.approx(2.0 + 0.5 * 4.0, rel=0.06)
    draws, log_probs = mx.random.multinomial(mx.nd.array([[0.2, 0.8], [0.6, 0.4]]), shape=n,
                                             get_prob=True)
    onp.testing.assert_allclose(draws.asnumpy().mean(axis=1), [0.8, 0.4], atol=0.01)
    expected = onp.log(onp.where(draws.asnumpy() == 1, [[0.8], [0.4]], [[0.2], [0.6]]))
    onp.testing.assert_allclose(log_probs.asnumpy(), expected, rtol=1e-6)
    randn = mx.nd.random.randn(n, loc=5, scale=2).asnumpy()
    assert randn.mean() == pytest.approx(5, abs=0.05) and randn.std() == pytest.approx(2, rel=0.02)

    def run():
        mx.random.seed(42)
        return [mx.random.poisson(2.0, shape=5).asnumpy(),
                mx.nd.random.randn(3).asnumpy(),
                mx.random.shuffle(mx.nd.arange(6)).asnumpy()]
    for a, b in zip(run(), run()):
        onp.testing.assert_array_equal(a, b)


def test_shuffle_permutes_the_first_axis_of_a_copy():
    data = mx.nd.array([[0, 0], [1, 1], [2, 2], [3, 3]])
    out = mx.random.shuffle(data)
    assert out is not data
    assert data.asnumpy()[:, 0].tolist() == [0, 1, 2, 3]
    assert sorted(out.asnumpy()[:, 0].tolist()) == [0, 1, 2, 3]
    assert (out.asnumpy()[:, 0] == out.asnumpy()[:, 1]).all()


def test_sampler_errors():
    with pytest.raises(TypeError, match="gamma: distribution parameters must all have the "
                       "same type"):
        mx.random.gamma(mx.nd.array([1.0]), 2.0)
    with pytest.raises(ValueError, match="one shape"):
        mx.random.normal(mx.nd.array([0, 1]), mx.nd.array([1, 1, 1]))
    with pytest.raises(ValueError, match="multinomial: data must have a last axis"):
        mx.random.multinomial(mx.nd.array(1.0))


def test_symbol_as_np_and_nd_ndarray():
    x = mx.sym.var("x")
    y = (x.as_np_ndarray() * 2).as_nd_ndarray()
    assert y.list_arguments() == ["x"]
    out = y.eval(x=mx.nd.array([1.0, 2.0]))[0]
    assert out.asnumpy().tolist() == [2.0, 4.0]


@pytest.mark.parametrize("make", [mx.nd.array, mx.np.array])
def test_float_and_int_of_a_one_element_array(make):
    # MXNet 1.9.1: mx.np arrays of one element convert; NDArray has no __float__ there, so
    # fastgrad's NDArray does more than MXNet's (nothing that runs on MXNet changes)
    assert float(make([1.5])) == 1.5
    assert int(make([[2.7]])) == 2
    assert complex(make([1.5])) == 1.5 + 0j
    assert float(mx.np.array(2.5)) == 2.5
    for bad in ([1.5, 2.0], []):
        with pytest.raises(TypeError, match="only size-1 arrays can be converted to Python "
                           "scalars"):
            float(make(bad))
        with pytest.raises(TypeError, match="only size-1 arrays"):
            int(make(bad))


@pytest.mark.parametrize("make, kind", [(mx.nd.array, mx.nd.NDArray),
                                        (mx.np.array, mx.np.ndarray)])
def test_grad_with_create_graph_keeps_the_array_type(make, kind):
    x = make([1.0, 2.0])
    x.attach_grad()
    with mx.autograd.record():
        y = (x * x * x).sum()
        first = mx.autograd.grad(y, [x], create_graph=True, retain_graph=True)
        total = first[0].sum()
    assert type(first[0]) is kind
    assert first[0].asnumpy().tolist() == [3.0, 12.0]
    total.backward()                              # the gradient is still differentiable
    assert x.grad.asnumpy().tolist() == [6.0, 12.0]
    with mx.autograd.record():
        y = (x * x).sum()
    plain = mx.autograd.grad(y, x)
    assert type(plain[0]) is kind


@pytest.mark.parametrize("sample", [
    lambda out: mx.np.random.uniform(-1, 1, out.shape, out=out),
    lambda out: mx.np.random.uniform(-1, 1, out=out),
    lambda out: mx.np.random.normal(0, 1, out=out),
    lambda out: mx.nd.random.uniform(-1, 1, out.shape, out=out),
    lambda out: mx.random.normal(0, 1, out=out),
])
@pytest.mark.parametrize("make", [mx.np.zeros, mx.nd.zeros])
def test_samplers_fill_out_in_place(sample, make):
    # MXNet's initializers call e.g. np.random.uniform(-s, s, arr.shape, out=arr)
    mx.random.seed(1)
    out = make((3, 4), dtype="float64")
    assert sample(out) is out
    assert out.dtype == onp.float64 and (out.asnumpy() != 0).all()
    with pytest.raises(ValueError, match="out has shape"):
        mx.np.random.uniform(0, 1, (2, 2), out=out)


def test_np_genfromtxt(tmp_path):
    # D2L's get_data_ch11 reads its data with mx.np.genfromtxt(path, dtype=np.float32,
    # delimiter='\t'); MXNet 1.9.1 wraps NumPy's genfromtxt and keeps NumPy's dtype.
    path = tmp_path / "rows.dat"
    path.write_text("1\t2.5\n-3\t4\n")
    a = mx.np.genfromtxt(str(path), dtype=mx.np.float32, delimiter="\t")
    assert isinstance(a, mx.np.ndarray) and a.dtype == onp.float32
    assert a.asnumpy().tolist() == [[1.0, 2.5], [-3.0, 4.0]]
    b = mx.np.genfromtxt(str(path), delimiter="\t", ctx=mx.cpu())
    assert b.dtype == onp.float64 and b.shape == (2, 2)
