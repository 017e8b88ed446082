"""Per-thread autograd state, concurrent independent graphs, and very long or very
wide graphs (no recursion limits)."""
import os
import sys
import threading

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastgrad import autograd, np  # noqa: E402

from _helpers import assert_close, f64, to_numpy  # noqa: E402

JOIN_TIMEOUT = 120


def _run_in_thread(fn):
    """Run ``fn`` in a new thread; return its result or re-raise its exception."""
    box = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(JOIN_TIMEOUT)
    assert not t.is_alive(), "worker thread did not finish"
    if "error" in box:
        raise box["error"]
    return box["result"]


def _run_concurrently(fns):
    """Start one thread per function behind a barrier; return results in order."""
    barrier = threading.Barrier(len(fns))
    results = [None] * len(fns)
    errors = []

    def target(i, fn):
        try:
            barrier.wait()
            results[i] = fn()
        except BaseException as exc:  # noqa: BLE001
            errors.append((i, exc))

    threads = [threading.Thread(target=target, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "worker threads did not finish"
    if errors:
        raise errors[0][1]
    return results


# ==========================================================================
# Per-thread state
# ==========================================================================

def test_new_thread_starts_not_recording_while_main_thread_records():
    with autograd.record():
        assert autograd.is_recording() and autograd.is_training()
        seen = _run_in_thread(lambda: (autograd.is_recording(), autograd.is_training()))
        assert autograd.is_recording() and autograd.is_training()
    assert seen == (False, False)


def test_set_in_thread_returns_thread_local_previous_state():
    """Inside a fresh thread the 'previous state' is False even while the main thread records."""

    def worker():
        prev = (autograd.set_recording(True), autograd.set_training(True))
        now = (autograd.is_recording(), autograd.is_training())
        return prev, now

    with autograd.record():
        prev, now = _run_in_thread(worker)
    assert prev == (False, False)
    assert now == (True, True)


def test_state_set_in_thread_does_not_leak_to_main_thread():
    def worker():
        autograd.set_recording(True)
        autograd.set_training(True)
        return autograd.is_recording(), autograd.is_training()

    assert _run_in_thread(worker) == (True, True)
    assert autograd.is_recording() is False
    assert autograd.is_training() is False


def test_main_thread_state_does_not_leak_into_later_threads():
    autograd.set_recording(True)
    autograd.set_training(True)
    in_thread = _run_in_thread(lambda: (autograd.is_recording(), autograd.is_training()))
    assert in_thread == (False, False)
    assert autograd.is_recording() and autograd.is_training()


def test_ops_in_main_thread_are_not_recorded_while_another_thread_records():
    """A worker sits inside record(); the main thread's ops on a variable stay unrecorded."""
    entered = threading.Event()
    release = threading.Event()
    out = {}

    def worker():
        w = f64([1.0, 2.0])
        w.attach_grad()
        with autograd.record():
            entered.set()
            release.wait(JOIN_TIMEOUT)
            y = w * w
        y.backward()
        out["wgrad"] = to_numpy(w.grad)

    t = threading.Thread(target=worker)
    t.start()
    try:
        assert entered.wait(JOIN_TIMEOUT)
        assert autograd.is_recording() is False
        x = f64([3.0, 4.0])
        x.attach_grad()
        z = x * x
        assert_close(z, [9.0, 16.0])
        with pytest.raises(RuntimeError):
            z.backward()
    finally:
        release.set()
        t.join(JOIN_TIMEOUT)
    assert not t.is_alive()
    assert_close(out["wgrad"], [2.0, 4.0])


def test_record_scope_in_thread_restores_thread_state_on_exception():
    def worker():
        try:
            with autograd.record():
                raise KeyError("x")
        except KeyError:
            pass
        return autograd.is_recording(), autograd.is_training()

    assert _run_in_thread(worker) == (False, False)


# ==========================================================================
# Concurrent independent graphs
# ==========================================================================

N_THREADS = 8


def _thread_job(k, steps=2000):
    """Records a graph of ``steps`` ops on a private variable and checks nothing itself;
    returns the gradient and the inputs for the caller to verify.

    f(x) = sum(sin(x) * k + x**2) computed as a chain that repeatedly adds and subtracts
    the same term, so the graph is long but the closed form stays simple."""
    rng = onp.random.RandomState(100 + k)
    xn = rng.uniform(-1, 1, (16,))
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        acc = np.sin(x) * k + x ** 2
        for _ in range(steps):
            t = np.tanh(x) * 0.5
            acc = acc + t
            acc = acc - t
        y = np.sum(acc)
    y.backward()
    return xn, to_numpy(x.grad), to_numpy(y)


def test_threads_record_and_backward_independent_graphs_concurrently(fast_thread_switching):
    results = _run_concurrently([lambda k=k: _thread_job(k) for k in range(N_THREADS)])
    for k, (xn, g, y) in enumerate(results):
        expected_y = onp.sum(onp.sin(xn) * k + xn ** 2)
        assert_close(y, onp.array(expected_y), rtol=1e-9, atol=1e-9)
        assert_close(g, onp.cos(xn) * k + 2 * xn, rtol=1e-9, atol=1e-9)


def test_threads_use_grad_on_a_shared_variable_concurrently(fast_thread_switching):
    """Every thread builds its own graph from the same variable and asks autograd.grad
    (which leaves .grad alone) for k * cos(x)."""
    xn = onp.linspace(-2, 2, 11)
    x = f64(xn)
    x.attach_grad()

    def job(k):
        out = []
        for _ in range(200):
            with autograd.record():
                y = np.sin(x) * k
            out.append(to_numpy(autograd.grad(y, x)[0]))
        return out

    results = _run_concurrently([lambda k=k: job(k) for k in range(1, N_THREADS + 1)])
    for k, grads in enumerate(results, start=1):
        for g in grads:
            assert_close(g, k * onp.cos(xn), rtol=1e-12, atol=1e-12)
    assert_close(x.grad, onp.zeros_like(xn))


def test_threads_each_with_own_recording_and_train_modes(fast_thread_switching):
    """Half of the threads record in train mode, half in predict mode; each sees its own mode."""

    def job(k):
        train = k % 2 == 0
        xn = onp.arange(1.0, 5.0) * (k + 1)
        x = f64(xn)
        x.attach_grad()
        modes = []
        with autograd.record(train_mode=train):
            for _ in range(200):
                modes.append((autograd.is_recording(), autograd.is_training()))
            y = x * (4.0 if autograd.is_training() else 1.0)
        y.backward()
        return train, modes, to_numpy(x.grad)

    results = _run_concurrently([lambda k=k: job(k) for k in range(N_THREADS)])
    for train, modes, g in results:
        assert set(modes) == {(True, train)}
        assert_close(g, onp.full(4, 4.0 if train else 1.0))


class _Cube(autograd.Function):
    def forward(self, x):
        self.save_for_backward(x)
        return x * x * x

    def backward(self, dy):
        (x,) = self.saved_tensors
        return dy * 3 * x * x


def test_threads_use_custom_functions_and_higher_order_concurrently(fast_thread_switching):
    """Each thread mixes autograd.Function calls with second-order autograd.grad."""

    def job(k):
        xn = onp.linspace(-1.0, 1.0, 7) + 0.1 * k
        x = f64(xn)
        x.attach_grad()
        for _ in range(50):
            with autograd.record():
                y = np.sum(_Cube()(x) * k + np.sin(x))
                g = autograd.grad(y, x, create_graph=True)[0]
            g.backward()
        return xn, to_numpy(g), to_numpy(x.grad)

    results = _run_concurrently([lambda k=k: job(k) for k in range(1, N_THREADS + 1)])
    for k, (xn, g, gg) in enumerate(results, start=1):
        assert_close(g, 3 * k * xn ** 2 + onp.cos(xn), rtol=1e-12, atol=1e-12)
        assert_close(gg, 6 * k * xn - onp.sin(xn), rtol=1e-12, atol=1e-12)


# ==========================================================================
# Scale: long chains and wide fan-in
# ==========================================================================

def test_million_op_chain_backward():
    """y = x * c applied 1,000,000 times: no recursion error, dy/dx = c**1e6."""
    n = 1_000_000
    c = 1.0000001
    x = f64([1.5])
    x.attach_grad()
    with autograd.record():
        y = x
        for _ in range(n):
            y = y * c
    # the sequential product differs from c**n by about n ulps, far below rtol
    expected = onp.power(onp.float64(c), n)
    assert_close(y, onp.array([1.5 * expected]), rtol=1e-8)
    y.backward()
    assert x.grad.dtype == onp.float64
    assert_close(x.grad, onp.array([expected]), rtol=1e-8)


def test_wide_fan_in_accumulates_gradient():
    """One variable used 200,000 times in a running sum has gradient 200,000 (exact in float32)."""
    n = 200_000
    x = np.array([0.5])
    x.attach_grad()
    with autograd.record():
        s = np.zeros((1,))
        for _ in range(n):
            s = s + x
    assert_close(s, onp.array([0.5 * n], dtype=onp.float32), rtol=0, atol=0)
    s.backward()
    assert x.grad.dtype == onp.float32
    assert_close(x.grad, onp.array([float(n)], dtype=onp.float32), rtol=0, atol=0)


def test_dropping_a_long_unused_graph_is_safe():
    """Building a 200,000-op chain and discarding it without backward must not crash;
    autograd keeps working afterwards."""
    x = f64([2.0])
    x.attach_grad()
    with autograd.record():
        y = x
        for _ in range(200_000):
            y = y + 0.0
    assert_close(y, [2.0])
    del y
    with autograd.record():
        z = x * x * x
    z.backward()
    assert_close(x.grad, [12.0])


def test_long_chain_with_grad_function():
    """autograd.grad over a 100,000-op chain of sin/identity pairs."""
    n = 100_000
    xn = onp.array([0.3, -0.4])
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        y = x
        for _ in range(n):
            y = y - 0.5
            y = y + 0.5
        y = np.sin(y)
    g = autograd.grad(y, [x])[0]
    assert_close(g, onp.cos(xn), rtol=1e-9)
    assert_close(x.grad, onp.zeros(2))


def test_fan_in_of_an_intermediate():
    """h = sin(x) used 100,000 times: gradient 100,000 * cos(x)."""
    n = 100_000
    xn = onp.array([0.3, -1.1])
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        h = np.sin(x)
        s = h
        for _ in range(n - 1):
            s = s + h
    s.backward()
    assert_close(x.grad, n * onp.cos(xn), rtol=1e-10)


def test_long_chain_second_derivative():
    """y = x^2 * c^n through a 50,000-op chain; d/dx = 2 c^n x, d2/dx2 = 2 c^n.
    The double backward walks a graph twice as long without recursion."""
    n = 50_000
    c = 1.00001
    xn = onp.array([0.7, -1.3])
    x = f64(xn)
    x.attach_grad()
    with autograd.record():
        y = x * x
        for _ in range(n):
            y = y * c
        g = autograd.grad(y, x, create_graph=True)[0]
    cn = onp.power(onp.float64(c), n)
    assert_close(g, 2 * cn * xn, rtol=1e-9)
    g.backward()
    assert_close(x.grad, onp.full(2, 2 * cn), rtol=1e-9)


def test_backward_in_threads_with_shared_variable():
    w = f64(onp.arange(1.0, 5.0))
    w.attach_grad()
    results = [None] * 6
    errors = []

    def work(i):
        try:
            for _ in range(50):
                res = autograd.grad(_loss(w, i), [w])[0]
            results[i] = res.asnumpy()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def _loss(w, i):
        with autograd.record():
            return (w * w * (i + 1)).sum()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, r in enumerate(results):
        onp.testing.assert_allclose(r, 2 * (i + 1) * onp.arange(1.0, 5.0))
