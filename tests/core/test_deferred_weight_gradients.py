"""A weight shared by many matrix products gets its gradient from one stacked product.

Note [Deferred weight gradients] in ``fastgrad/_kernels/_forward.py``: a first-order pass that
meets ``matmul(x, W)`` with ``W`` a variable that has other consumers still to run keeps ``(x, g)``
and adds ``[x_0; x_1; ...].T @ [g_0; g_1; ...]`` once ``W``'s gradient is complete. These
tests check the values (finite differences in float64, closed forms), that the stacked product
is really what runs (bit for bit against it, which the one-at-a-time sum is not), that every
case the deferral must leave alone still gets the rule's gradient, and that the executor's
replay defers at the same points as the engine (bit for bit against the tape).
"""

import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastgrad as mx  # noqa: E402
from fastgrad import autograd  # noqa: E402
from _helpers import numerical_grad  # noqa: E402


def _rng(seed=0):
    return onp.random.default_rng(seed)


def _recurrent(F, xs, W, U, h0):
    """A small RNN: W is used by every step's input product, U by every recurrent one."""
    h = h0
    for x in xs:
        h = F.tanh(F.matmul(x, W) + F.matmul(h, U))
    return F.sum(h * h)


def _recurrent_values(dtype=onp.float64, steps=5, batch=3, n_in=4, hidden=6, seed=0):
    r = _rng(seed)
    xs = [(0.5 * r.standard_normal((batch, n_in))).astype(dtype) for _ in range(steps)]
    W = (0.5 * r.standard_normal((n_in, hidden))).astype(dtype)
    U = (0.5 * r.standard_normal((hidden, hidden))).astype(dtype)
    h0 = (0.5 * r.standard_normal((batch, hidden))).astype(dtype)
    return xs, W, U, h0


def _numpy_loss(xs, W, U, h0):
    return float(_recurrent(onp, xs, W, U, h0))


def _central(f, v):
    return numerical_grad(f, v)[0]


def _tape_grads(xs, W, U, h0, use_grad=False):
    Wa, Ua, h0a = mx.np.array(W), mx.np.array(U), mx.np.array(h0)
    for a in (Wa, Ua, h0a):
        a.attach_grad()
    with autograd.record():
        loss = _recurrent(mx.np, [mx.np.array(x) for x in xs], Wa, Ua, h0a)
    if use_grad:
        return [g.asnumpy() for g in autograd.grad(loss, [Wa, Ua, h0a])]
    loss.backward()
    return [a.grad.asnumpy() for a in (Wa, Ua, h0a)]


@pytest.mark.parametrize("use_grad", [False, True], ids=["backward", "grad"])
def test_shared_weights_match_central_differences(use_grad):
    xs, W, U, h0 = _recurrent_values()
    gW, gU, gh0 = _tape_grads(xs, W, U, h0, use_grad)
    onp.testing.assert_allclose(gW, _central(lambda w: _numpy_loss(xs, w, U, h0), W),
                                rtol=1e-7, atol=1e-9)
    onp.testing.assert_allclose(gU, _central(lambda u: _numpy_loss(xs, W, u, h0), U),
                                rtol=1e-7, atol=1e-9)
    onp.testing.assert_allclose(gh0, _central(lambda h: _numpy_loss(xs, W, U, h), h0),
                                rtol=1e-7, atol=1e-9)


def _linear_program(dtype, steps, rows, seed=1):
    """loss = sum_t sum((x_t @ W) * c_t), so that W's gradient is exactly sum_t x_t.T @ c_t."""
    r = _rng(seed)
    xs = [r.standard_normal((rows, 5)).astype(dtype) for _ in range(steps)]
    cs = [r.standard_normal((rows, 7)).astype(dtype) for _ in range(steps)]
    W = r.standard_normal((5, 7)).astype(dtype)
    Wa = mx.np.array(W)
    Wa.attach_grad()
    with autograd.record():
        loss = None
        for x, c in zip(xs, cs):
            term = mx.np.sum(mx.np.matmul(mx.np.array(x), Wa) * mx.np.array(c))
            loss = term if loss is None else loss + term
    loss.backward()
    return xs, cs, Wa.grad.asnumpy()


@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
def test_the_stacked_product_is_what_runs(dtype):
    xs, cs, got = _linear_program(dtype, steps=12, rows=8)
    # The pass meets the products last step first and stacks them in that order.
    stacked = onp.matmul(onp.concatenate(xs[::-1]).T, onp.concatenate(cs[::-1]))
    assert got.dtype == dtype
    assert onp.array_equal(got, stacked)
    one_at_a_time = sum(x.T @ c for x, c in zip(xs, cs))
    onp.testing.assert_allclose(got, one_at_a_time, rtol=1e-5 if dtype == onp.float32 else 1e-12)


def test_products_with_many_rows_are_not_deferred():
    # Above DEFERRED_MAX_ROWS rows a product runs at BLAS speed on its own.
    from fastgrad._kernels import _forward as _kernels
    rows = _kernels.DEFERRED_MAX_ROWS + 1
    xs, cs, got = _linear_program(onp.float64, steps=3, rows=rows)
    acc = None
    for x, c in list(zip(xs, cs))[::-1]:                # the rule's order, one at a time
        term = onp.matmul(x.swapaxes(-1, -2), c)
        acc = term if acc is None else acc + term
    assert onp.array_equal(got, acc)


def _grad_of(f, *arrays):
    vs = [mx.np.array(a) for a in arrays]
    for v in vs:
        v.attach_grad()
    with autograd.record():
        y = f(*vs)
    y.backward()
    return [v.grad.asnumpy() for v in vs]


CASES = {
    # name: (function of fastgrad/NumPy arrays, input arrays): cases the deferral must get right
    # or leave alone.
    "weight_also_used_elementwise": (
        lambda x1, x2, W: (mx.np if isinstance(W, mx.np.ndarray) else onp).sum(
            (x1 @ W) ** 2) + (x2 @ W).sum() + (W * W).sum(),
        [(3, 4), (2, 4), (4, 5)]),
    "weight_as_both_operands": (
        lambda W: ((W @ W) ** 2).sum() + (W @ W @ W).sum(), [(4, 4)]),
    "vector_times_weight": (
        lambda x1, x2, W: ((x1 @ W) ** 2).sum() + (x2 @ W).sum(), [(4,), (4,), (4, 3)]),
    "batched_3d": (
        lambda x1, x2, W: ((x1 @ W) ** 2).sum() + (x2 @ W).sum(), [(2, 3, 4), (2, 3, 4), (4, 5)]),
    "weight_on_the_left": (
        lambda W, y1, y2: ((W @ y1) ** 2).sum() + (W @ y2).sum(), [(3, 4), (4, 2), (4, 5)]),
    "single_use": (lambda x, W: ((x @ W) ** 2).sum(), [(3, 4), (4, 5)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cases_match_central_differences(name):
    f, shapes = CASES[name]
    r = _rng(7)
    arrays = [r.standard_normal(s) for s in shapes]
    got = _grad_of(f, *arrays)
    for k, a in enumerate(arrays):
        def fk(v, k=k):
            args = list(arrays)
            args[k] = v
            return float(f(*args))
        onp.testing.assert_allclose(got[k], _central(fk, a), rtol=1e-7, atol=1e-8,
                                    err_msg="%s input %d" % (name, k))


def test_mixed_dtypes_are_not_deferred_and_cast_back():
    # x float32, W float64: the products are float64; W's gradient stays float64 and x's float32.
    r = _rng(3)
    x1, x2 = r.standard_normal((3, 4)).astype(onp.float32), r.standard_normal((2, 4)).astype(
        onp.float32)
    W = r.standard_normal((4, 5))
    g1, g2, gW = _grad_of(lambda a, b, w: ((a @ w) ** 2).sum() + (b @ w).sum(), x1, x2, W)
    assert (g1.dtype, g2.dtype, gW.dtype) == (onp.float32, onp.float32, onp.float64)
    want = 2 * x1.astype(onp.float64).T @ (x1.astype(onp.float64) @ W) + x2.astype(
        onp.float64).T @ onp.ones((2, 5))
    onp.testing.assert_allclose(gW, want, rtol=1e-12)


def test_complex_weights_are_not_deferred():
    r = _rng(4)
    xs = [r.standard_normal((3, 2)) + 1j * r.standard_normal((3, 2)) for _ in range(3)]
    W = r.standard_normal((2, 2)) + 1j * r.standard_normal((2, 2))
    Wa = mx.np.array(W)
    Wa.attach_grad()
    with autograd.record():
        loss = None
        for x in xs:
            z = mx.np.matmul(mx.np.array(x), Wa)
            term = mx.np.sum(mx.np.real(z * mx.np.conj(z)))
            loss = term if loss is None else loss + term
    loss.backward()
    # d/dW sum |x W|^2 with fastgrad's complex convention (the conjugate Wirtinger
    # derivative times 2): 2 x^H (x W).
    want = sum(2 * x.conj().T @ (x @ W) for x in xs)
    onp.testing.assert_allclose(Wa.grad.asnumpy(), want, rtol=1e-12)


def test_second_order_through_shared_weights():
    # create_graph records the rules as usual: the Hessian-vector product of the RNN loss
    # against central differences of its gradient.
    xs, W, U, h0 = _recurrent_values(steps=3, seed=2)
    v = _rng(9).standard_normal(W.shape)
    Wa = mx.np.array(W)
    Wa.attach_grad()
    with autograd.record():
        loss = _recurrent(mx.np, [mx.np.array(x) for x in xs], Wa, mx.np.array(U),
                          mx.np.array(h0))
        (gW,) = autograd.grad(loss, [Wa], create_graph=True)
        dot = mx.np.sum(gW * mx.np.array(v))
    dot.backward()

    def grad_at(w):
        return _tape_grads(xs, w, U, h0)[0]
    eps = 1e-5
    want = (grad_at(W + eps * v) - grad_at(W - eps * v)) / (2 * eps)
    onp.testing.assert_allclose(Wa.grad.asnumpy(), want, rtol=1e-6, atol=1e-8)


def test_retain_graph_backward_twice_adds_the_same_gradient():
    xs, W, U, h0 = _recurrent_values(seed=5)
    Wa = mx.np.array(W)
    Wa.attach_grad(grad_req="add")
    with autograd.record():
        loss = _recurrent(mx.np, [mx.np.array(x) for x in xs], Wa, mx.np.array(U),
                          mx.np.array(h0))
    loss.backward(retain_graph=True)
    once = Wa.grad.asnumpy().copy()
    loss.backward()
    onp.testing.assert_allclose(Wa.grad.asnumpy(), 2 * once, rtol=1e-14)
    onp.testing.assert_allclose(once, _tape_grads(xs, W, U, h0)[0], rtol=1e-14)


def test_an_input_changed_in_place_after_recording_is_still_an_error():
    r = _rng(6)
    x1, x2 = mx.np.array(r.standard_normal((3, 4))), mx.np.array(r.standard_normal((3, 4)))
    W = mx.np.array(r.standard_normal((4, 5)))
    W.attach_grad()
    with autograd.record():
        loss = mx.np.sum(mx.np.matmul(x1, W)) + mx.np.sum(mx.np.matmul(x2, W))
    x2[:] = 0
    with pytest.raises(Exception, match="matmul"):
        loss.backward()


def test_anomaly_mode_gets_the_same_gradient():
    xs, W, U, h0 = _recurrent_values(seed=8)
    plain = _tape_grads(xs, W, U, h0)
    with autograd.detect_anomaly():
        checked = _tape_grads(xs, W, U, h0)
    for a, b in zip(plain, checked):
        onp.testing.assert_allclose(a, b, rtol=1e-13)


@pytest.mark.parametrize("dtype", [onp.float32, onp.float64])
def test_executor_defers_where_the_engine_does(dtype):
    xs, W, U, h0 = _recurrent_values(dtype, steps=6, seed=11)
    names = ["x%d" % t for t in range(len(xs))]
    sym = _recurrent(mx.sym, [mx.sym.var(n) for n in names], mx.sym.var("W"), mx.sym.var("U"),
                     mx.sym.var("h0"))
    args = {n: mx.np.array(x) for n, x in zip(names, xs)}
    args.update(W=mx.np.array(W), U=mx.np.array(U), h0=mx.np.array(h0))
    reqs = {n: "null" for n in names}
    reqs.update(W="write", U="write", h0="write")
    ex = sym.bind(mx.cpu(), args, grad_req=reqs)
    want = _tape_grads(xs, W, U, h0)
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward()
        for name, w in zip(("W", "U", "h0"), want):
            assert onp.array_equal(ex.grad_dict[name].asnumpy(), w), name
