"""``fastgrad.scipy``: the composite functions (distributions, logsumexp, softmax,
multigammaln, convolve modes, Cholesky solves) against SciPy, gradients in every argument
against finite differences, broadcasting, the errors for derivatives without a closed form,
and SciPy imported only on first use."""
import os
import subprocess
import sys

import numpy as onp
import pytest
import scipy.linalg as sla
import scipy.signal as ssig
import scipy.special as ssp
import scipy.stats as sst

import fastgrad as mx
from fastgrad import np
from fastgrad.functional import grad
from fastgrad.scipy import linalg, signal, special, stats

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _helpers import assert_fd_close, central_difference  # noqa: E402

RNG = onp.random.default_rng(0)


def _check(f_fast, f_ref, args, diff=None, rtol=1e-7, atol=1e-8, second=True):
    """Forward equal to the reference; gradient of a weighted sum of the outputs in every
    argument of ``diff`` equal to finite differences (``_helpers.central_difference``, with
    ``assert_fd_close``'s tolerances); and (``second``) the same for the gradient of that
    gradient's sum (second order)."""
    args = [onp.asarray(a, dtype=onp.float64) for a in args]
    diff = range(len(args)) if diff is None else diff
    expected = f_ref(*args)
    got = f_fast(*[np.array(a, dtype=a.dtype) for a in args])
    onp.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-7, atol=1e-10)
    w = RNG.uniform(0.5, 1.5, onp.shape(expected))

    def loss_ref(*a):
        return float(onp.sum(w * f_ref(*a)))

    def fd(f, i, *a):
        values = [onp.array(v) for v in a]
        x = values[i]
        out = onp.zeros(x.shape)
        for idx in onp.ndindex(x.shape):
            orig = x[idx]

            def at(t):
                x[idx] = orig + t
                try:
                    return f(*values)
                finally:
                    x[idx] = orig
            out[idx] = central_difference(at)
        return out

    for i in diff:
        def loss(*a):
            return (f_fast(*a) * np.array(w)).sum()
        g = grad(loss, i)(*[np.array(a) for a in args])
        assert_fd_close(g.asnumpy(), fd(loss_ref, i, *args), "argument %d" % i, rtol, atol)
        if second:
            def gsum(*a):
                return grad(loss, i)(*a).sum()
            g2 = grad(gsum, i)(*[np.array(a) for a in args])

            def gsum_num(*a):
                return float(grad(loss, i)(*[np.array(v) for v in a]).sum())
            assert_fd_close(g2.asnumpy(), fd(gsum_num, i, *args),
                            "second order, argument %d" % i, rtol, atol)


# ---------------------------------------------------------------- import on first use
def test_import_fastgrad_does_not_import_scipy(tmp_path):
    code = ("import sys, fastgrad, fastgrad.scipy.stats\n"
            "assert 'scipy' not in sys.modules, 'imported'\n"
            "fastgrad.scipy.special.gammaln(2.0)\n"
            "assert 'scipy.special' in sys.modules\n")
    # From an empty directory: ``python -c`` puts the working directory first on sys.path, and
    # a checkout's uncompiled package must not shadow the installed one.
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)


# ---------------------------------------------------------------- special
def test_logsumexp_with_b_return_sign_keepdims_and_axis():
    a = RNG.normal(size=(3, 4))
    b = RNG.uniform(-1, 1, (3, 4))
    for axis in (None, 0, 1, (0, 1)):
        for keepdims in (False, True):
            got, sign = special.logsumexp(np.array(a), axis=axis, b=np.array(b),
                                          keepdims=keepdims, return_sign=True)
            want, want_sign = ssp.logsumexp(a, axis=axis, b=b, keepdims=keepdims,
                                            return_sign=True)
            onp.testing.assert_allclose(got.asnumpy(), want, rtol=1e-12)
            onp.testing.assert_array_equal(sign.asnumpy(), want_sign)
    bp = onp.abs(b) + 0.1
    _check(lambda x, y: special.logsumexp(x, axis=1, b=y),
           lambda x, y: ssp.logsumexp(x, axis=1, b=y), [a, bp])
    neg = special.logsumexp(np.array([0.0, 0.0]), b=np.array([-1.0, 0.5]))
    assert onp.isnan(float(neg))          # as SciPy: a negative sum has no log


def test_softmax_log_softmax_over_all_elements_and_an_axis():
    x = RNG.normal(size=(3, 4))
    for axis in (None, 0, 1):
        _check(lambda t: special.softmax(t, axis=axis), lambda t: ssp.softmax(t, axis=axis),
               [x], second=False)
        _check(lambda t: special.log_softmax(t, axis=axis),
               lambda t: ssp.log_softmax(t, axis=axis), [x], second=False)


def test_multigammaln_and_jn_yn_expit():
    a = RNG.uniform(2.0, 4.0, (5,))
    _check(lambda t: special.multigammaln(t, 3), lambda t: ssp.multigammaln(t, 3), [a])
    with pytest.raises(ValueError, match="multigammaln: a must be larger"):
        special.multigammaln(np.array([0.5]), 3)
    x = RNG.uniform(0.5, 3, (4,))
    _check(lambda t: special.jn(2, t), lambda t: ssp.jn(2, t), [x])
    _check(lambda t: special.yn(1, t), lambda t: ssp.yn(1, t), [x])
    _check(special.expit, ssp.expit, [x])
    onp.testing.assert_array_equal(special.gammasgn(np.array([-0.5, 1.5])).asnumpy(),
                                   ssp.gammasgn([-0.5, 1.5]))


@pytest.mark.parametrize("call,arg", [
    (lambda a, x: special.gammainc(a, x), 0), (lambda a, x: special.gammaincc(a, x), 0),
    (lambda n, x: special.polygamma(n, x), 0), (lambda v, x: special.iv(v, x), 0),
    (lambda df, x: special.stdtr(df, x), 0)])
def test_arguments_without_closed_form_derivative_raise_naming_op_and_argument(call, arg):
    a = np.array([1.5, 2.0])
    x = np.array([0.5, 1.0])
    a.attach_grad()
    x.attach_grad()
    with mx.autograd.record():
        call(onp.array([1.0, 2.0]), x)          # constant first argument: fine
        with pytest.raises(NotImplementedError, match=r"argument 0"):
            call(a, x)


def test_missing_arguments_raise_type_error_naming_them():
    with pytest.raises(TypeError, match="x"):
        stats.norm.logpdf()
    with pytest.raises(TypeError, match="df"):
        stats.t.logpdf(np.array([1.0]))
    with pytest.raises(TypeError, match="in2"):
        signal.convolve(np.array([1.0]))


# ---------------------------------------------------------------- stats
X = RNG.uniform(0.2, 0.8, (2, 3))
LOC = RNG.uniform(-0.1, 0.1, (3,))
SCALE = RNG.uniform(0.8, 1.3, (2, 1))


@pytest.mark.parametrize("fn", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"])
def test_norm_in_value_loc_and_scale_with_broadcasting(fn):
    _check(getattr(stats.norm, fn), getattr(sst.norm, fn), [X * 3 - 1, LOC, SCALE])


@pytest.mark.parametrize("fn", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"])
def test_t_in_value_loc_and_scale_and_pdf_in_df(fn):
    df = RNG.uniform(2, 6, (3,))
    diff = [0, 1, 2, 3] if "pdf" in fn else [0, 2, 3]
    _check(getattr(stats.t, fn), getattr(sst.t, fn), [X * 3 - 1, df, LOC, SCALE], diff=diff)


@pytest.mark.parametrize("fn", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"])
def test_gamma_and_chi2(fn):
    a = RNG.uniform(1.5, 3, (3,))
    diff = [0, 1, 2, 3] if "pdf" in fn else [0, 2, 3]
    _check(getattr(stats.gamma, fn), getattr(sst.gamma, fn), [X * 3, a, LOC, SCALE],
           diff=diff)
    _check(getattr(stats.chi2, fn), getattr(sst.chi2, fn), [X * 3, a * 2, LOC, SCALE],
           diff=diff)


@pytest.mark.parametrize("fn", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"])
def test_beta(fn):
    a, b = RNG.uniform(1.5, 3, (3,)), RNG.uniform(1.5, 3, (2, 1))
    diff = [0, 1, 2, 3, 4] if "pdf" in fn else [0, 3, 4]
    _check(getattr(stats.beta, fn), getattr(sst.beta, fn),
           [X * 0.8, a, b, LOC * 0.5, SCALE + 0.5], diff=diff)


def test_outside_the_support_values_are_zero_and_gradients_finite():
    x = np.array([-1.0, 0.5, 2.0])
    x.attach_grad()
    with mx.autograd.record():
        lp = stats.gamma.logpdf(x, 2.0)
        c = stats.beta.cdf(x, 2.0, 3.0)
        loss = (stats.gamma.pdf(x, 2.0) + c).sum()
    onp.testing.assert_allclose(lp.asnumpy(), sst.gamma.logpdf([-1.0, 0.5, 2.0], 2.0))
    onp.testing.assert_allclose(c.asnumpy(), sst.beta.cdf([-1.0, 0.5, 2.0], 2.0, 3.0))
    loss.backward()
    assert x.grad.asnumpy()[0] == 0          # below both supports
    inside = onp.array([0.5, 2.0])           # beta.cdf is 1 above its support: derivative 0
    expected = sst.gamma.pdf(inside, 2.0) * (1.0 / inside - 1.0) \
        + onp.where(inside < 1, sst.beta.pdf(inside, 2.0, 3.0), 0.0)
    onp.testing.assert_allclose(x.grad.asnumpy()[1:], expected, rtol=1e-6)   # float32


@pytest.mark.parametrize("fn", ["logpmf", "pmf", "cdf", "logcdf", "sf", "logsf"])
def test_poisson_in_mu_with_broadcasting_and_non_integer_counts(fn):
    # a non-integer count has probability 0: its log is -inf, whose differences are NaN
    k = onp.array([[0.0, 1.0, 3.0], [2.0, 5.0, 1.0 if fn.startswith("log") else 1.5]])
    mu = RNG.uniform(0.5, 4, (3,))
    _check(lambda m: getattr(stats.poisson, fn)(k, m), lambda m: getattr(sst.poisson, fn)(k, m),
           [mu])


def test_multivariate_normal_in_x_mean_and_cov():
    d = 3
    a = RNG.normal(size=(d, d))
    cov = a @ a.T + d * onp.eye(d)
    x = RNG.normal(size=(4, d))
    mean = RNG.normal(size=d)

    def sym(f):
        return lambda x, m, c: f(x, m, (c + c.T) / 2)
    _check(sym(stats.multivariate_normal.logpdf), sym(sst.multivariate_normal.logpdf),
           [x, mean, cov])
    _check(stats.multivariate_normal.pdf, sst.multivariate_normal.pdf, [x[0], mean, cov],
           diff=[0, 1])
    onp.testing.assert_allclose(
        stats.multivariate_normal.logpdf(np.array(x), cov=2.0).asnumpy(),
        sst.multivariate_normal.logpdf(x, mean=onp.zeros(d), cov=2.0 * onp.eye(d)))
    one = stats.multivariate_normal.logpdf(np.array(x[:1]), np.array(mean), np.array(cov))
    assert one.shape == () == onp.shape(sst.multivariate_normal.logpdf(x[:1], mean, cov))
    with pytest.raises(NotImplementedError, match="multivariate_normal.cdf"):
        stats.multivariate_normal.cdf(np.array(x))


def test_dirichlet_in_x_and_alpha():
    alpha = RNG.uniform(1, 3, (3,))
    x = RNG.uniform(0.2, 1, (3, 4))
    x = x / x.sum(0)
    _check(stats.dirichlet.logpdf, sst.dirichlet.logpdf, [x, alpha], diff=[1])
    _check(stats.dirichlet.pdf, sst.dirichlet.pdf, [x[:, 0], alpha], diff=[1])
    # in x along the simplex: the gradient equals alpha - 1 over x
    g = grad(lambda t: stats.dirichlet.logpdf(t, np.array(alpha)).sum())(x)
    onp.testing.assert_allclose(g, (alpha[:, None] - 1) / x, rtol=1e-12)
    with pytest.raises(ValueError, match="simplex"):
        stats.dirichlet.logpdf(np.array([0.5, 0.6, 0.1]), np.array(alpha))


# ---------------------------------------------------------------- signal and linalg
@pytest.mark.parametrize("mode", ["full", "valid", "same"])
@pytest.mark.parametrize("shapes", [((6,), (3,)), ((3,), (5,)), ((4, 5), (2, 3)),
                                    ((2, 3, 4), (2, 2, 3))])
def test_convolve_modes_in_any_dimension(mode, shapes):
    a, b = RNG.normal(size=shapes[0]), RNG.normal(size=shapes[1])
    _check(lambda x, y: signal.convolve(x, y, mode=mode),
           lambda x, y: ssig.convolve(x, y, mode=mode), [a, b])


def test_correlate_and_bad_modes():
    a, b = RNG.normal(size=(5,)), RNG.normal(size=(3,))
    _check(lambda x, y: signal.correlate(x, y, mode="same"),
           lambda x, y: ssig.correlate(x, y, mode="same"), [a, b], second=False)
    with pytest.raises(ValueError, match="mode must be"):
        signal.convolve(np.array(a), np.array(b), mode="circular")
    with pytest.raises(ValueError, match="at least as large"):
        signal.convolve(np.array(onp.ones((2, 4))), np.array(onp.ones((3, 2))), mode="valid")


def test_cho_factor_cho_solve_and_cholesky():
    a = RNG.normal(size=(3, 3))
    spd = a @ a.T + 3 * onp.eye(3)
    b = RNG.normal(size=(3, 2))
    for lower in (False, True):
        def solve(m, r):
            return linalg.cho_solve(linalg.cho_factor((m + m.T) / 2, lower=lower), r)
        _check(solve, lambda m, r: sla.cho_solve(sla.cho_factor((m + m.T) / 2, lower=lower), r),
               [spd, b])
        onp.testing.assert_allclose(linalg.cholesky(np.array(spd), lower=lower).asnumpy(),
                                    sla.cholesky(spd, lower=lower), rtol=1e-12)


def test_solve_triangular_trans_letters_and_shape_errors():
    a = onp.triu(RNG.normal(size=(3, 3))) + 3 * onp.eye(3)
    b = RNG.normal(size=(3,))
    for trans in ("N", "T", "C", 2):
        onp.testing.assert_allclose(
            linalg.solve_triangular(np.array(a), np.array(b), trans=trans).asnumpy(),
            sla.solve_triangular(a, b, trans=trans), rtol=1e-12)
    with pytest.raises(ValueError, match="must have 3 rows"):
        linalg.solve_triangular(np.array(a), np.array(onp.ones(4)))


def test_expm_and_sqrtm_third_order_along_a_direction():
    a = RNG.uniform(-0.5, 0.5, (2, 2))
    d = RNG.uniform(-1, 1, (2, 2))

    def f(t):
        return linalg.expm(np.array(a) + t * np.array(d)).sum()
    # d^3/dt^3 of sum(expm(a + t d)) at 0, by finite differences of the second derivative
    f2 = grad(grad(f))

    def f3_num(t, h=1e-4):
        return (float(f2(t + h)) - float(f2(t - h))) / (2 * h)
    assert float(grad(f2)(0.0)) == pytest.approx(f3_num(0.0), rel=1e-5)
    s = a @ a.T + 2 * onp.eye(2)
    onp.testing.assert_allclose(linalg.sqrtm(np.array(s)).asnumpy(), sla.sqrtm(s).real,
                                rtol=1e-10)


@pytest.mark.parametrize("name, sign", [("erf", 1.0), ("erfc", -1.0)])
def test_complex_erf_and_erfc_are_differentiable_with_the_conjugate_convention(name, sign):
    """erf is entire: for a real loss Re(sum erf(z)) the gradient is conj(erf'(z)), erf'(z) =
    2/sqrt(pi) exp(-z^2), PyTorch's convention (Note [Complex gradients])."""
    z = onp.array([0.5 + 0.5j, -1.2 + 0.3j])
    x = np.array(z)
    x.attach_grad()
    with mx.autograd.record():
        out = getattr(special, name)(x)
        loss = np.real(out).sum()
    loss.backward()
    onp.testing.assert_allclose(onp.asarray(out), getattr(ssp, name)(z), rtol=1e-14)
    expected = onp.conj(sign * 2 / onp.sqrt(onp.pi) * onp.exp(-z * z))
    onp.testing.assert_allclose(x.grad.asnumpy(), expected, rtol=1e-14)


@pytest.mark.parametrize("name", ["gamma", "digamma"])
def test_complex_input_gives_scipys_complex_value_and_refuses_to_differentiate(name):
    # A complex value is never cast to real in the forward; differentiating it raises, since
    # these rules are not checked for complex values (Note [Complex gradients]).
    z = onp.array([0.5 + 0.5j, -1.2 + 0.3j])
    out = getattr(special, name)(np.array(z))
    onp.testing.assert_allclose(onp.asarray(out), getattr(ssp, name)(z), rtol=1e-14)
    x = np.array(z)
    x.attach_grad()
    with pytest.raises(NotImplementedError, match=name):
        with mx.autograd.record():
            getattr(special, name)(x)


@pytest.mark.parametrize("dtype, rtol", [(onp.float64, 1e-9), (onp.float32, 3e-7)])
def test_log_ndtr_slope_far_in_the_lower_tail(dtype, rtol):
    # Note [log_ndtr's slope]: computed in the input's dtype, exp(-x*x/2 - log_ndtr(x)) was
    # 1.4% off in float32 at x = -1000. The reference: in the far tail a central difference
    # of SciPy's float64 log_ndtr (the slope is nearly linear there, and rounding over the
    # step is below 1e-10 relative); elsewhere the closed form in float64.
    far = onp.array([-1e4, -1000.0, -100.0, -40.5, -40.0])
    near = onp.array([-39.5, -10.0, 0.0, 5.0, 30.0])
    h = 1e-3
    expected = onp.concatenate([
        (ssp.log_ndtr(far + h) - ssp.log_ndtr(far - h)) / (2 * h),
        onp.exp(-0.5 * near * near - ssp.log_ndtr(near)) / onp.sqrt(2 * onp.pi)])
    x = np.array(onp.concatenate([far, near]).astype(dtype))
    got = grad(lambda v: special.log_ndtr(v).sum())(x)
    assert got.dtype == dtype
    # float32 underflows the slope at x = 30 (1.5e-196) to 0
    onp.testing.assert_allclose(got.asnumpy(), expected, rtol=rtol,
                                atol=onp.finfo(dtype).tiny)


def test_log_ndtr_second_derivative_across_the_series_switch():
    # d2/dx2 log_ndtr = -s (x + s), s the slope; continuous where the slope changes method
    points = onp.array([-40.0 - 1e-7, -40.0, -40.0 + 1e-7, -30.0, -2.0, 0.5])
    x = np.array(points)
    second = grad(lambda v: grad(lambda w: special.log_ndtr(w).sum())(v).sum())(x).asnumpy()
    h = 1e-4
    slope = lambda p: onp.exp(-0.5 * p * p - ssp.log_ndtr(p)) / onp.sqrt(2 * onp.pi)
    expected = (slope(points + h) - slope(points - h)) / (2 * h)
    onp.testing.assert_allclose(second, expected, rtol=1e-6)
