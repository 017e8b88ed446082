"""The inputs that break derivative rules: ties, kinks at zero, repeated eigenvalues and
singular values, ill-conditioned matrices, powers of zero, negative and large bases, empty
and 0-d arrays.

Each value is checked against a closed form, the convention ``docs/guide/edge_cases.rst``
states, or finite differences (``_helpers.central_difference``, Note [Finite-difference
tolerances] in ``test_ops.py``). Where fastgrad's convention differs from PyTorch, JAX or
MXNet 1.9.1 (checked with them, not needed here), the test says so.
"""
import os
import sys
import warnings

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _helpers import assert_fd_close, central_difference, fd_gradient  # noqa: E402

np = mx.np


def grads(f, *values):
    """The gradients of the scalar ``f`` at float64 copies of ``values``."""
    xs = [np.array(onp.asarray(v, dtype=onp.float64)) for v in values]
    for x in xs:
        x.attach_grad()
    with autograd.record():
        out = f(*xs)
    out.backward()
    return [x.grad.asnumpy() for x in xs]


def hessian_vector(f, value, direction):
    """``H v`` of the scalar ``f`` at ``value``, by double backward."""
    x = np.array(onp.asarray(value, dtype=onp.float64))
    x.attach_grad()
    with autograd.record():
        g = autograd.grad(f(x), [x], create_graph=True)[0]
        inner = (g * np.array(direction)).sum()
    inner.backward()
    return x.grad.asnumpy()


# ---------------------------------------------------------------- ties
@pytest.mark.parametrize("reduce,axis", [("max", 1), ("min", 0), ("max", None),
                                         ("nanmax", 1), ("nanmin", None)])
def test_extrema_reductions_split_ties_evenly_by_axis(reduce, axis):
    """edge_cases.rst: the tied values share the gradient evenly (MXNet 1.9.1 gives each tied
    value the whole gradient; PyTorch's amax splits evenly as here)."""
    x = onp.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [3.0, -1.0, 3.0]])
    w = onp.array([1.0, 2.0, 3.0]) if axis is not None else onp.array(1.0)
    (g,) = grads(lambda a: (getattr(np, reduce)(a, axis=axis) * np.array(w)).sum(), x)
    ref = getattr(onp, reduce)(x, axis=axis, keepdims=True)
    tied = (x == ref).astype(float)
    expected = tied / tied.sum(axis=axis, keepdims=True) * (
        onp.expand_dims(w, axis) if axis is not None else w)
    onp.testing.assert_array_equal(g, expected)


def test_maximum_and_minimum_of_an_array_with_itself_are_the_identity():
    x = onp.array([-1.0, 0.0, 2.5])
    for fn in (np.maximum, np.minimum, np.fmax, np.fmin):
        (g,) = grads(lambda a: (fn(a, a) * np.array([1.0, 2.0, 3.0])).sum(), x)
        onp.testing.assert_array_equal(g, [1.0, 2.0, 3.0], err_msg=fn.__name__)
        # piecewise linear: no curvature, at the tie too
        hv = hessian_vector(lambda a: (fn(a, a) ** 2).sum(), x, onp.ones(3))
        onp.testing.assert_allclose(hv, 2 * onp.ones(3), rtol=1e-15, err_msg=fn.__name__)


def test_sort_with_ties_follows_the_stable_order():
    """The gradient of ``sort`` goes back through the stable argsort (as NumPy's order of the
    tied values, and MXNet 1.9.1's gradient): a valid one-sided derivative, and the tied values
    together get the sum of their weights."""
    x = onp.array([1.0, 1.0, 0.0, 1.0, -2.0, 0.0])
    w = onp.arange(1.0, 7.0)
    (g,) = grads(lambda a: (np.sort(a) * np.array(w)).sum(), x)
    expected = onp.empty(6)
    expected[onp.argsort(x, kind="stable")] = w
    onp.testing.assert_array_equal(g, expected)
    for value in (0.0, 1.0):
        tied = x == value
        assert g[tied].sum() == w[onp.sort(x) == value].sum()


def test_argmax_argmin_and_topk_with_ties_pick_the_first_as_numpy():
    x = onp.array([[1.0, 3.0, 3.0, 2.0], [0.0, 0.0, -1.0, -1.0]])
    a = np.array(x)
    onp.testing.assert_array_equal(np.argmax(a, axis=1).asnumpy(), onp.argmax(x, axis=1))
    onp.testing.assert_array_equal(np.argmin(a, axis=1).asnumpy(), onp.argmin(x, axis=1))
    onp.testing.assert_array_equal(mx.npx.topk(a, k=2, ret_typ="value").asnumpy(),
                                   [[3.0, 3.0], [0.0, 0.0]])
    (g,) = grads(lambda v: (mx.npx.topk(v, k=2, ret_typ="value")
                            * np.array([[1.0, 2.0], [3.0, 4.0]])).sum(), x)
    # The two largest of each row, whichever tied one is taken: the weights land on them.
    onp.testing.assert_array_equal(g.sum(axis=1), [3.0, 7.0])
    assert g[0, 0] == g[0, 3] == 0 and g[1, 2] == g[1, 3] == 0


@pytest.mark.parametrize("kernel,stride,expected", [
    ((2, 2), (2, 2), [[1, 0, 0, 1], [0, 0, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]]),
    ((3, 3), (1, 1), [[0, 0, 0, 0], [0, 0, 0, 0], [2, 2, 0, 0], [0, 0, 0, 0]]),
])
def test_max_pooling_ties_go_to_the_first_maximum_of_each_window(kernel, stride, expected):
    """edge_cases.rst: a window's gradient goes to its first maximum in row-major order, as
    MXNet 1.9.1 and PyTorch (the same values from both)."""
    x = onp.array([[[[1.0, 1.0, 0.0, 2.0], [1.0, 0.0, 2.0, 2.0],
                     [3.0, 3.0, 0.0, 0.0], [3.0, 3.0, 0.0, 0.0]]]])
    (g,) = grads(lambda a: mx.npx.pooling(a, kernel=kernel, stride=stride,
                                          pool_type="max").sum(), x)
    onp.testing.assert_array_equal(g[0, 0], expected)


@pytest.mark.parametrize("fn,expected", [
    (lambda a: np.abs(a), [-1.0, 0.0, 1.0]),                      # edge_cases.rst: 0 at 0
    (lambda a: mx.npx.relu(a), [0.0, 0.0, 1.0]),                  # PyTorch, MXNet: 0 at 0
    (lambda a: mx.npx.leaky_relu(a, slope=0.25), [0.25, 0.25, 1.0]),   # both: slope at 0
    (lambda a: mx.npx.leaky_relu(a, act_type="elu", slope=0.5),        # left slope at 0:
     [0.5 * onp.exp(-0.5), 0.5, 1.0]),                                # PyTorch, MXNet
    (lambda a: mx.npx.leaky_relu(a, act_type="selu"),
     [1.0507009873554805 * 1.6732632423543772 * onp.exp(-0.5),
      1.0507009873554805 * 1.6732632423543772, 1.0507009873554805]),
    (lambda a: np.clip(a, 0.0, 1.0), [0.0, 1.0, 1.0]),            # bounds included (PyTorch,
    (lambda a: np.sign(a) * 3.0, [0.0, 0.0, 0.0]),                # MXNet)
], ids=["abs", "relu", "leaky_relu", "elu", "selu", "clip", "sign"])
def test_kinks_at_zero_follow_the_stated_convention(fn, expected):
    (g,) = grads(lambda a: fn(a).sum(), [-0.5, 0.0, 1.0])
    onp.testing.assert_allclose(g, expected, rtol=1e-15)


# ---------------------------------------------------------------- repeated eigen/singular values
def _with_spectrum(values, rows, cols, seed, symmetric=False):
    rng = onp.random.default_rng(seed)
    u = onp.linalg.qr(rng.normal(size=(rows, len(values))))[0]
    v = u if symmetric else onp.linalg.qr(rng.normal(size=(cols, len(values))))[0]
    return u @ onp.diag(values) @ v.T


SYMMETRIC_WEIGHT = onp.array([[0.3, -1.2, 0.5], [-1.2, 0.8, 2.0], [0.5, 2.0, -0.7]])


def _eigh_loss(lib, a):
    """A symmetric function of the double eigenvalue's pair, and the eigenvector of the
    simple eigenvalue 3 only."""
    w, v = lib.linalg.eigh(a)
    top = v[:, 2]
    return (w * lib.array([1.0, 1.0, 3.0])).sum() + (lib.outer(top, top) * SYMMETRIC_WEIGHT).sum()


def test_eigh_at_a_repeated_eigenvalue_when_its_vectors_are_unused():
    """The eigenvalue 1 is double; the loss uses the other eigenvector, whose derivative needs
    only the gap 3 - 1."""
    a = _with_spectrum([1.0, 1.0, 3.0], 3, 3, seed=0, symmetric=True)
    (g,) = grads(lambda m: _eigh_loss(np, m), a)
    (expected,) = fd_gradient(lambda m: _eigh_loss(onp, m), a)   # eigh reads the lower triangle
    assert_fd_close(g, expected, "eigh at a repeated eigenvalue")


def test_eigh_at_a_repeated_eigenvalue_batched():
    """One matrix of the batch has the double eigenvalue, the other not."""
    a = onp.stack([_with_spectrum([1.0, 1.0, 3.0], 3, 3, seed=0, symmetric=True),
                   _with_spectrum([0.5, 1.0, 2.0], 3, 3, seed=1, symmetric=True)])

    def loss(lib, m):
        w, v = lib.linalg.eigh(m)
        top = v[..., :, 2]
        return (w * lib.array([1.0, 1.0, 3.0])).sum() + (top ** 4).sum()

    (g,) = grads(lambda m: loss(np, m), a)
    (expected,) = fd_gradient(lambda m: loss(onp, m), a)
    assert_fd_close(g, expected, "batched eigh")
    # Away from the tie, second order too; at it, the first-order rule itself uses the
    # vectors of the repeated pair (V diag(gw) V^T), so the second order is the error.
    direction = onp.tril(onp.random.default_rng(6).normal(size=a.shape))
    hv = hessian_vector(lambda m: loss(np, m[1]), a, direction)
    expected_hv = central_difference(lambda t: grads(lambda m: loss(np, m[1]),
                                                     a + t * direction)[0])
    assert_fd_close(hv, expected_hv, "eigh, Hessian-vector product")
    with pytest.raises(ValueError, match="eigh.*repeated eigenvalue"):
        hessian_vector(lambda m: loss(np, m), a, direction)


def test_second_order_of_eigenvalues_at_a_repeated_eigenvalue_is_an_error_not_nan():
    """``sum(eigvalsh(A) ** 2)`` at ``2 I``: the first order is exact (the rule needs no
    gaps); the second goes through the eigenvectors, and gave NaN silently before."""
    (g,) = grads(lambda m: (np.linalg.eigvalsh(m) ** 2).sum(), 2 * onp.eye(3))
    onp.testing.assert_allclose(g, 4 * onp.eye(3), atol=1e-14)
    with pytest.raises(ValueError, match="eigh.*repeated eigenvalue"):
        hessian_vector(lambda m: (np.linalg.eigvalsh(m) ** 2).sum(), 2 * onp.eye(3),
                       onp.tril(onp.ones((3, 3))))


@pytest.mark.parametrize("loss", [
    lambda w, v: (v[:, 0] * np.array([1.0, 2.0, 3.0])).sum(),                 # basis-dependent
    lambda w, v: ((v[:, :2] @ v[:, :2].T) * np.array(SYMMETRIC_WEIGHT)).sum(),  # a projector
    lambda w, v: (((v * np.exp(w)) @ v.T) * np.array(SYMMETRIC_WEIGHT)).sum(),  # expm
], ids=["basis", "projector", "matrix-function"])
def test_eigh_loss_that_uses_the_vectors_of_a_repeated_eigenvalue_is_an_error(loss):
    """Note [Repeated eigenvalues] in fastgrad/_ops/_rules.py: the projector and the matrix
    function have gradients, but not ones the rule can tell apart from the outputs' gradients:
    an error instead of the wrong value fastgrad gave before (PyTorch documents NaN or garbage)."""
    a = _with_spectrum([1.0, 1.0, 3.0], 3, 3, seed=0, symmetric=True)
    with pytest.raises(ValueError, match="eigh.*repeated eigenvalue"):
        grads(lambda m: loss(*np.linalg.eigh(m)), a)


def test_eigh_near_a_repeated_eigenvalue_is_exact():
    """A gap of 1e-4: the eigenvector term is large but right."""
    a = _with_spectrum([1.0, 1.0 + 1e-4, 3.0], 3, 3, seed=0, symmetric=True)

    def loss(lib, m):
        w, v = lib.linalg.eigh(m)
        return ((v[:, :2] @ v[:, :2].T) * SYMMETRIC_WEIGHT).sum() + (v[:, 0] ** 3).sum()

    (g,) = grads(lambda m: loss(np, m), a)
    (expected,) = fd_gradient(lambda m: loss(onp, m), a, step=1e-7)
    assert_fd_close(g, expected, "eigh near a repeated eigenvalue", rtol=1e-6, atol=1e-6)


def _svd_loss(lib, a):
    """The singular values and the vectors of the simple singular value 0.5 only."""
    u, s, vt = lib.linalg.svd(a, full_matrices=False)
    return (s ** 3).sum() + (lib.outer(u[:, 2], vt[2]) * WEIGHT_43[:a.shape[0], :a.shape[1]]).sum()


WEIGHT_43 = onp.random.default_rng(2).normal(size=(5, 5))


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 5)])
def test_svd_at_a_repeated_singular_value_when_its_vectors_are_unused(shape):
    a = _with_spectrum([2.0, 2.0, 0.5], shape[0], shape[1], seed=1)
    (g,) = grads(lambda m: _svd_loss(np, m), a)
    (expected,) = fd_gradient(lambda m: _svd_loss(onp, m), a)
    assert_fd_close(g, expected, "svd at a repeated singular value")


def test_svd_loss_that_uses_the_vectors_of_a_repeated_singular_value_is_an_error():
    a = _with_spectrum([2.0, 2.0, 0.5], 4, 3, seed=1)
    with pytest.raises(ValueError, match="svd.*repeated singular value"):
        grads(lambda m: (lambda u, s, vt: (u[:, :2] @ vt[:2]).sum())(
            *np.linalg.svd(m, full_matrices=False)), a)


# ---------------------------------------------------------------- ill-conditioned matrices
def _ill_conditioned(n, condition, seed):
    return _with_spectrum(onp.geomspace(1.0, 1.0 / condition, n), n, n, seed)


@pytest.mark.parametrize("op", ["inv", "solve", "det", "slogdet"])
def test_linear_algebra_at_condition_one_million(op):
    """The derivatives grow as the condition number squared (1e12 here); the differences
    need a step far below the smallest singular value (1e-6): 1e-9. Measured: every element
    within 1.1e-7 of the differences, relative to itself."""
    a = _ill_conditioned(3, 1e6, seed=3)
    rng = onp.random.default_rng(4)
    weight, b = rng.normal(size=(3, 3)), rng.normal(size=(3, 2))

    def loss(lib, m):
        if op == "inv":
            return (lib.linalg.inv(m) * weight).sum()
        if op == "solve":
            return (lib.linalg.solve(m, b) * weight[:, :2]).sum()
        if op == "det":
            return lib.linalg.det(m) * 1e6
        return lib.linalg.slogdet(m)[1]

    (g,) = grads(lambda m: loss(np, m), a)
    (expected,) = fd_gradient(lambda m: loss(onp, m), a, step=1e-9)
    assert_fd_close(g, expected, op, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("op", ["cholesky", "eigh", "inv"])
def test_symmetric_positive_definite_at_condition_one_million(op):
    a = _with_spectrum(onp.geomspace(1.0, 1e-6, 3), 3, 3, seed=7, symmetric=True)
    weight = onp.random.default_rng(8).normal(size=(3, 3))

    def loss(lib, m):
        if op == "cholesky":   # fastgrad's is of the symmetric part (its docstring)
            m = (m + m.T) / 2 if lib is onp else m
            return (lib.linalg.cholesky(m) * onp.tril(weight)).sum()
        if op == "eigh":
            w, v = lib.linalg.eigh(m)
            return (w * onp.array([1.0, 2.0, 3.0])).sum() + ((v * v) @ onp.arange(3.0)).sum()
        return (lib.linalg.inv(m) * weight).sum()

    (g,) = grads(lambda m: loss(np, m), a)
    # Steps far below what the derivative's scale is set by: the smallest eigenvalue (1e-6)
    # for cholesky and inv, the smallest gap (1e-3) for eigh's vectors.
    step = 1e-6 if op == "eigh" else 1e-10
    (expected,) = fd_gradient(lambda m: loss(onp, m), a, step=step)
    assert_fd_close(g, expected, op, rtol=1e-5, atol=1e-9)   # measured: 4e-6 (cholesky)


# ---------------------------------------------------------------- constants and powers
@pytest.mark.parametrize("op", ["std", "var"])
@pytest.mark.parametrize("ddof", [0, 1])
def test_std_and_var_with_one_constant_row(op, ddof):
    """edge_cases.rst: std of a constant has gradient 0 (PyTorch's and MXNet's value), never
    NaN; the other rows keep their derivative."""
    x = onp.array([[1.5, 1.5, 1.5, 1.5], [0.3, -1.0, 2.0, 0.7]])
    w = onp.array([1.0, 2.0])

    def loss(lib, a):
        return (getattr(lib, op)(a, axis=1, ddof=ddof) * w).sum()

    (g,) = grads(lambda a: loss(np, a), x)
    onp.testing.assert_array_equal(g[0], 0.0)
    (expected,) = fd_gradient(lambda row: getattr(onp, op)(row, ddof=ddof) * w[1], x[1])
    assert_fd_close(g[1], expected, op)


def test_std_second_derivative_at_a_constant_is_zero_as_pytorch():
    """std has no second derivative at a constant (its gradient jumps); edge_cases.rst states
    the convention, 0, PyTorch's (JAX gives NaN for both orders)."""
    hv = hessian_vector(lambda a: np.std(a), onp.full(3, 1.5), onp.array([1.0, 2.0, 3.0]))
    onp.testing.assert_array_equal(hv, onp.zeros(3))


def test_var_second_derivative_at_a_constant_is_the_closed_form():
    """var is quadratic: its Hessian is ``2/n (I - 11^T/n)`` everywhere, constants included."""
    v = onp.array([1.0, 2.0, -3.0])
    hv = hessian_vector(lambda a: np.var(a), onp.full(3, 1.5), v)
    onp.testing.assert_allclose(hv, 2 / 3 * (v - v.mean()), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("base,exponent", [
    (0.0, 2.0), (0.0, 3.0), (0.0, 1.0), (-2.0, 3.0), (-1.5, 2.0), (-3.0, -1.0),
    (1e3, 2.5), (1e-3, 0.7), (40.0, -1.5), (5.0, 0.0), (0.0, 0.0)])
def test_power_in_the_base_outside_the_usual_range(base, exponent):
    """``x ** p`` for a constant ``p``: first and second derivatives in closed form at zero,
    negative (integer ``p``) and large bases; ``x ** 0`` has gradient 0 also at 0."""
    (g,) = grads(lambda a: (a ** exponent).sum(), [base])
    d1 = 0.0 if exponent == 0 else exponent * base ** (exponent - 1)
    onp.testing.assert_allclose(g, [d1], rtol=1e-14)
    hv = hessian_vector(lambda a: (a ** exponent).sum(), [base], [1.0])
    d2 = 0.0 if exponent in (0.0, 1.0) else exponent * (exponent - 1) * base ** (exponent - 2)
    onp.testing.assert_allclose(hv, [d2], rtol=1e-14)


def test_power_at_zero_base_with_array_exponents():
    """d/dx at 0: 0 for p > 1, 1 for p = 1, +inf for 0 < p < 1 (the true one-sided values,
    as PyTorch and JAX); d/dp of 0 ** p is 0 for p > 0, its limit (MXNet 1.9.1: NaN)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # 0 ** -0.5 in the rule
        gx, gp = grads(lambda x, p: (x ** p).sum(), [0.0, 0.0, 0.0], [2.0, 1.0, 0.5])
    onp.testing.assert_array_equal(gx, [0.0, 1.0, onp.inf])
    onp.testing.assert_array_equal(gp, [0.0, 0.0, 0.0])


def test_power_at_negative_bases_with_array_exponents():
    """d/dx is exact; d/dp of ``x ** p`` for ``x < 0`` does not exist (``x ** p`` is not real
    off the integers): fastgrad gives 0 there (``safe_log``), where PyTorch, JAX and MXNet
    1.9.1 give NaN."""
    x, p = onp.array([-2.0, -0.5, -3.0]), onp.array([3.0, 2.0, -1.0])
    gx, gp = grads(lambda a, b: (a ** b).sum(), x, p)
    onp.testing.assert_allclose(gx, p * x ** (p - 1), rtol=1e-15)
    onp.testing.assert_array_equal(gp, 0.0)


def test_power_with_large_bases_matches_finite_differences():
    x, p = onp.array([1e3, 250.0, 37.0]), onp.array([2.5, -1.3, 3.7])
    gx, gp = grads(lambda a, b: (a ** b).sum(), x, p)
    onp.testing.assert_allclose(gx, p * x ** (p - 1), rtol=1e-14)
    onp.testing.assert_allclose(gp, x ** p * onp.log(x), rtol=1e-14)


# ---------------------------------------------------------------- empty and 0-d arrays
EMPTY_PROGRAMS = {
    "elementwise": lambda lib, a: (lib.sin(a) * lib.exp(a) + a * a).sum(),
    "broadcast": lambda lib, a: (a * lib.ones((1, 3)) - lib.tanh(a)).sum(),
    "reductions": lambda lib, a: lib.sum(lib.max(a, axis=0) if a.shape[0] else a.sum(axis=0))
    + lib.prod(a, axis=0).sum() + lib.cumsum(a, axis=1).sum(),
    "matmul": lambda lib, a: (lib.matmul(a.T, a) ** 2).sum() + lib.matmul(a, lib.ones(3)).sum(),
    "indexing": lambda lib, a: a[:, 1:].sum() + lib.concatenate([a, a], axis=0).sum(),
}


@pytest.mark.parametrize("name", sorted(EMPTY_PROGRAMS))
def test_empty_arrays_give_empty_or_zero_gradients(name):
    program = EMPTY_PROGRAMS[name]
    x = onp.zeros((0, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # nothing to warn about: no NaN from 0/0
        (g,) = grads(lambda a: program(np, a), x)
    assert g.shape == (0, 3) and g.dtype == onp.float64
    assert float(program(np, np.array(x))) == float(program(onp, x))


@pytest.mark.parametrize("name", sorted(EMPTY_PROGRAMS))
def test_the_same_programs_at_a_non_empty_input(name):
    """The programs above are checked for values where they are not empty."""
    program = EMPTY_PROGRAMS[name]
    x = onp.random.default_rng(5).uniform(-1, 1, (2, 3))
    (g,) = grads(lambda a: program(np, a), x)
    (expected,) = fd_gradient(lambda a: program(onp, a), x)
    assert_fd_close(g, expected, name)


def test_zero_dimensional_arrays_to_second_order():
    x = onp.array(0.7)
    (g,) = grads(lambda a: np.sin(a) * a ** 3 + np.linalg.norm(a), x)
    assert g.shape == ()
    onp.testing.assert_allclose(g, onp.cos(0.7) * 0.7 ** 3 + 3 * onp.sin(0.7) * 0.7 ** 2 + 1,
                                rtol=1e-15)
    hv = hessian_vector(lambda a: np.sin(a) * a ** 3, x, onp.array(1.0))
    assert hv.shape == ()
    onp.testing.assert_allclose(
        hv, -onp.sin(0.7) * 0.7 ** 3 + 6 * onp.cos(0.7) * 0.7 ** 2 + 6 * onp.sin(0.7) * 0.7,
        rtol=1e-14)
