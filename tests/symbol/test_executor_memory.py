"""What a bound executor keeps between calls (Note [Slot lifetimes] in ``_plan.pyx``).

An inference plan drops every intermediate right after its last reader, so a chain of ops
holds about one intermediate at a time; a training plan keeps what backward reads, so that
backward can run (again) after one forward.
"""

import tracemalloc

import numpy as onp

import fastgrad as mx
from fastgrad._core._array import unwrap

N = 512                 # one (512, 512) float64 value: 2 MiB
MIB = 1 << 20


def _chain(F, x, steps=12):
    y = x
    for k in range(steps):
        y = F.sin(y) if k % 2 else F.exp(y * 0.5)
    return y


def test_an_inference_plan_holds_about_one_intermediate_at_a_time():
    x = onp.linspace(-1, 1, N * N).reshape(N, N)
    ex = _chain(mx.sym, mx.sym.var("x")).bind(mx.cpu(), {"x": mx.np.array(x)}, grad_req="null")
    out = ex.forward()[0]                        # the output buffer exists from here on
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        out = ex.forward()[0]
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    # 24 values (12 ops, each with its scaling or its result) of 2 MiB each would be 48 MiB
    # if all were kept; a step needs its input and its output alive at once.
    assert peak <= 3 * 2 * MIB, peak / MIB
    onp.testing.assert_allclose(out.asnumpy(), _chain(onp, x), rtol=1e-14)


def test_a_training_plan_keeps_what_backward_reads():
    x = onp.linspace(-1, 1, 24).reshape(4, 6)
    sym = mx.sym.sum(_chain(mx.sym, mx.sym.var("x"), steps=4))
    ex = sym.bind(mx.cpu(), {"x": mx.np.array(x)})
    ex.forward(is_train=True)
    ex.backward()
    first = ex.grad_dict["x"].asnumpy().copy()
    ex.backward()                                # again, from the same forward
    assert onp.array_equal(ex.grad_dict["x"].asnumpy(), first)
    # d/dx by central differences of the NumPy chain
    eps, want = 1e-6, onp.zeros_like(x)
    for i in onp.ndindex(x.shape):
        d = onp.zeros_like(x)
        d[i] = eps
        want[i] = (_chain(onp, x + d, 4).sum() - _chain(onp, x - d, 4).sum()) / (2 * eps)
    onp.testing.assert_allclose(first, want, rtol=1e-7, atol=1e-9)


def test_a_training_plan_drops_what_backward_reads_the_shape_of_only():
    # sin and cos read x alone, and sum and add read nothing of their inputs but shapes: the
    # plan records the shapes and dtypes of sin(x), cos(x) and their sum, and drops those
    # three 2 MiB values during forward (Note [Slot lifetimes]).
    x = onp.linspace(-1, 1, N * N).reshape(N, N)
    v = mx.sym.var("x")
    ex = mx.sym.sum(mx.sym.sin(v) + mx.sym.cos(v)).bind(mx.cpu(), {"x": mx.np.array(x)})
    ex.forward(is_train=True)
    ex.backward()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        ex.forward(is_train=True)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < MIB, held / MIB
    for _ in range(2):                          # backward again, from the same forward
        ex.backward()
        onp.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), onp.cos(x) - onp.sin(x),
                                    rtol=1e-15, atol=1e-16)


def test_a_releasing_backward_needs_a_forward_before_the_next_backward():
    # Plan.backward(release=True), which Gluon's hybridize uses when the tape's pass does not
    # retain the graph, drops what it has read (Note [Slot lifetimes]); a backward after it
    # says so instead of reading dropped values, and a forward makes them again.
    x = onp.linspace(-1, 1, 12).reshape(3, 4)
    v = mx.sym.var("x")
    ex = mx.sym.sum(mx.sym.tanh(mx.sym.exp(v))).bind(mx.cpu(), {"x": mx.np.array(x)})
    want = (1 - onp.tanh(onp.exp(x)) ** 2) * onp.exp(x)
    ex.forward(is_train=True)
    ex._plan.backward(None, True, release=True)
    onp.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), want, rtol=1e-14)
    try:
        ex.backward()
    except RuntimeError as e:
        assert "run forward again" in str(e)
    else:
        raise AssertionError("a backward after a releasing one should raise")
    ex.forward(is_train=True)
    ex.backward()
    onp.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), want, rtol=1e-14)


def _handler_name(a=None):
    from numpy._core.multiarray import get_handler_name
    return get_handler_name() if a is None else get_handler_name(a)


def test_the_plan_allocates_through_the_buffer_cache_and_restores_the_allocator():
    # Note [Slot lifetimes]: forward and backward allocate through the kernels' buffer cache,
    # and the caller's allocator is back afterwards, also when a step raises.
    x = onp.linspace(-1, 1, 2 * N).reshape(2, N)
    sym = mx.sym.sum(mx.sym.exp(mx.sym.var("x")) * 3.0)
    ex = sym.bind(mx.cpu(), {"x": mx.np.array(x)})
    before = _handler_name()
    ex.forward(is_train=True)
    ex.backward()
    assert _handler_name() == before
    grad = unwrap(ex.grad_dict["x"])        # the buffer took the pass's own gradient
    onp.testing.assert_allclose(grad, 3 * onp.exp(x), rtol=1e-15)
    assert _handler_name(grad) == "fastgrad_buffer_cache"
    bad = mx.sym.broadcast_to(mx.sym.var("y"), shape=(3, 5))
    ex2 = bad.bind(mx.cpu(), {"y": mx.np.ones((4, 5))})
    try:
        ex2.forward()
    except Exception:
        pass
    else:
        raise AssertionError("broadcasting (4, 5) to (3, 5) should fail")
    assert _handler_name() == before
