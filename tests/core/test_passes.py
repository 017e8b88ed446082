"""Per-pass state (Note [Pass state] in ``fastgrad/_core/_engine.pyx``): passes in several threads
at once, a ``Function``'s backward that starts a pass in another thread, nested passes through the
outer graph, two passes over one graph, and the release of a pass's state.

Every wait is bounded: a deadlock fails the test instead of hanging the suite.
"""
import gc
import json
import os
import sys
import threading
import tracemalloc
import weakref

import numpy as onp
import pytest

from fastgrad import autograd, np
from fastgrad._core._state import current_pass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _helpers import SquareFunction as Square  # noqa: E402


TIMEOUT = 60          # seconds any thread or event wait may take before the test fails
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


def var(values):
    x = np.array(onp.asarray(values, dtype=onp.float64))
    x.attach_grad()
    return x


def run_threads(fns):
    """Run each function in a thread of its own, started together; return their results.

    Fails (instead of hanging) if a thread is still running after ``TIMEOUT`` seconds, and
    re-raises the first exception a thread raised.
    """
    barrier = threading.Barrier(len(fns))
    results = [None] * len(fns)
    errors = []

    def target(i, fn):
        try:
            barrier.wait(TIMEOUT)
            results[i] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i, fn), daemon=True)
               for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a thread did not finish: deadlock?"
    if errors:
        raise errors[0]
    return results


def wait(event):
    assert event.wait(TIMEOUT), "timed out waiting for another pass: deadlock?"


# ----- helpers: Functions

class Cube(autograd.Function):
    """x**3, whose backward finds 3 x**2 by differentiating ``Square()(a) * x`` through the
    outer graph: ``a`` (its saved input) is the outer variable ``x`` itself, with its history.
    ``how`` says how: ``grad``, ``backward`` (reading ``x.grad`` after it) or ``thread``
    (``grad`` run in another thread and joined)."""

    def __init__(self, x, how, retain=False):
        super().__init__()
        self.x = x
        self.how = how
        self.retain = retain

    def forward(self, a):
        self.save_for_backward(a)
        return a * a * a

    def backward(self, dy):
        (a,) = self.saved_tensors
        x = self.x
        with autograd.record():
            z = Square()(a) * x
        if self.how == "grad":
            (g,) = autograd.grad(z, [x], retain_graph=self.retain)
        elif self.how == "backward":
            z.backward(retain_graph=self.retain)
            g = x.grad.copy()
        else:
            box = {}

            def work():
                try:
                    box["g"] = autograd.grad(z, [x], retain_graph=self.retain)[0]
                except BaseException as exc:  # noqa: BLE001 - re-raised below
                    box["error"] = exc

            t = threading.Thread(target=work, daemon=True)
            t.start()
            t.join(TIMEOUT)
            assert not t.is_alive(), "the pass in another thread did not finish: deadlock?"
            if "error" in box:
                raise box["error"]
            g = box["g"]
        return dy * g


POINTS = [0.5, -1.5, 2.0, 0.0]


def closed_cube_plus_sin(xs):
    return 3 * xs ** 2 + onp.cos(xs)


# ----- concurrency

def _job(seed, steps=60):
    """A graph of its own: y = sum(sin(w * x) * x + w**2); checks backward and grad."""
    rng = onp.random.default_rng(seed)
    xs = rng.standard_normal(50)
    ws = rng.standard_normal(50)
    for _ in range(steps):
        x = var(xs)
        w = var(ws)
        with autograd.record():
            y = np.sum(np.sin(w * x) * x + w ** 2)
        if seed % 2:
            y.backward()
            gx, gw = x.grad.asnumpy(), w.grad.asnumpy()
        else:
            gx, gw = (a.asnumpy() for a in autograd.grad(y, [x, w]))
        onp.testing.assert_allclose(gx, onp.cos(ws * xs) * ws * xs + onp.sin(ws * xs),
                                    rtol=1e-13, atol=1e-15)
        onp.testing.assert_allclose(gw, onp.cos(ws * xs) * xs * xs + 2 * ws,
                                    rtol=1e-13, atol=1e-15)
        # second order, through the pass's own memo
        x = var(xs)
        with autograd.record():
            y = np.sum(np.sin(x) * np.sin(x))
            (d,) = autograd.grad(y, [x], create_graph=True)
            s = np.sum(d)
        (dd,) = autograd.grad(s, [x])
        onp.testing.assert_allclose(dd.asnumpy(), 2 * onp.cos(2 * xs), rtol=1e-12, atol=1e-14)
    return seed


def test_threads_run_passes_on_separate_graphs_concurrently(fast_thread_switching):
    assert run_threads([lambda k=k: _job(k) for k in range(4)]) == [0, 1, 2, 3]


class _WaitFor(autograd.Function):
    """Identity whose backward tells ``inside`` and then waits for ``go_on``."""

    def __init__(self, inside, go_on):
        super().__init__()
        self.inside = inside
        self.go_on = go_on

    def forward(self, x):
        return x * 1

    def backward(self, dy):
        self.inside.set()
        wait(self.go_on)
        return dy


def test_a_pass_runs_while_another_threads_pass_is_in_progress():
    """Thread A's pass stops inside a Function's backward until thread B's pass, on another
    graph, has finished: with one lock for all passes this would deadlock."""
    inside, b_done = threading.Event(), threading.Event()
    xa, xb = var([1.0, 2.0]), var([3.0, -1.0])

    def a():
        with autograd.record():
            y = np.sum(_WaitFor(inside, b_done)(xa) * xa)
        y.backward()
        return xa.grad.asnumpy()

    def b():
        wait(inside)
        try:
            with autograd.record():
                y = np.sum(np.exp(xb))
            return autograd.grad(y, [xb])[0].asnumpy()
        finally:
            b_done.set()

    ga, gb = run_threads([a, b])
    onp.testing.assert_allclose(ga, 2 * onp.array([1.0, 2.0]), rtol=1e-15)
    onp.testing.assert_allclose(gb, onp.exp([3.0, -1.0]), rtol=1e-15)


def test_threads_add_into_one_shared_variables_grad():
    """Separate graphs of one variable with grad_req='add', differentiated at the same moment
    by two threads: each pass adds its gradient into the same .grad buffer and none is lost.
    The arrays are large so that NumPy releases the GIL while it adds (without the lock on
    .grad writes, this lost updates in two runs of three)."""
    n, threads, steps = 2_000_000, 2, 8
    ws = onp.linspace(-1.0, 1.0, n)
    w = np.array(ws)
    w.attach_grad(grad_req="add")
    together = threading.Barrier(threads)

    def job(k):
        for _ in range(steps):
            with autograd.record():
                y = np.sum(w * (k + 1.0))
            together.wait(TIMEOUT)
            y.backward()

    run_threads([lambda k=k: job(k) for k in range(threads)])
    total = steps * sum(k + 1.0 for k in range(threads))
    onp.testing.assert_array_equal(w.grad.asnumpy(), onp.full(n, total))


# ----- Function backward starting passes

class _ThreadedSin(autograd.Function):
    """sin(x); the backward computes cos(x) by a grad pass in another thread, joined."""

    def __init__(self, create):
        super().__init__()
        self.create = create

    def forward(self, x):
        self.save_for_backward(x)
        return np.sin(x)

    def backward(self, dy):
        (x,) = self.saved_tensors
        box = {}

        def work():
            try:
                t = x.detach()
                t.attach_grad()
                with autograd.record():
                    s = np.sum(np.sin(t))
                box["g"] = autograd.grad(s, [t])[0]
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                box["error"] = exc

        t = threading.Thread(target=work, daemon=True)
        t.start()
        t.join(TIMEOUT)
        assert not t.is_alive(), "the pass in another thread did not finish: deadlock?"
        if "error" in box:
            raise box["error"]
        return dy * box["g"]


def test_function_backward_joins_a_pass_in_another_thread():
    xs = onp.array([0.1, 0.7, -2.0])
    x = var(xs)
    with autograd.record():
        y = np.sum(_ThreadedSin(False)(x) * 2 + x * x)
    y.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), 2 * onp.cos(xs) + 2 * xs, rtol=1e-15)
    # the same inside grad(), twice in a row (nothing left claimed by the first)
    for _ in range(2):
        with autograd.record():
            y = np.sum(_ThreadedSin(False)(x) * 3)
        (g,) = autograd.grad(y, [x])
        onp.testing.assert_allclose(g.asnumpy(), 3 * onp.cos(xs), rtol=1e-15)


def test_function_backward_runs_a_pass_through_the_outer_graph_in_another_thread():
    xs = onp.array(POINTS)
    x = var(xs)
    with autograd.record():
        y = np.sum(Cube(x, "thread")(x) + np.sin(x))
    y.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), closed_cube_plus_sin(xs), rtol=1e-14)


# ----- nested passes through the outer graph

def test_grad_inside_backward_through_the_outer_graph_matches_mxnet():
    with open(os.path.join(FIXTURES, "mxnet_nested_function.json")) as f:
        ref = json.load(f)
    xs = onp.array(ref["x"])
    x = var(xs)
    with autograd.record():
        y = np.sum(Cube(x, "grad")(x) + np.sin(x))
    y.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), ref["grad"], rtol=1e-14, atol=0)
    onp.testing.assert_allclose(x.grad.asnumpy(), closed_cube_plus_sin(xs), rtol=1e-14)


def test_grad_inside_grad_through_the_outer_graph():
    xs = onp.array(POINTS)
    x = var(xs)
    with autograd.record():
        y = np.sum(Cube(x, "grad")(x) * np.exp(x))
    (g,) = autograd.grad(y, [x])
    onp.testing.assert_allclose(g.asnumpy(), (3 * xs ** 2 + xs ** 3) * onp.exp(xs), rtol=1e-14)


@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_backward_inside_backward_writes_the_outer_variable(grad_req):
    """The inner backward() writes x.grad = 3x^2 when it finishes; the outer pass writes
    (write) or adds (add) its own 3x^2 + cos(x) when it reaches x."""
    xs = onp.array(POINTS)
    x = var(xs)
    x.attach_grad(grad_req=grad_req)
    with autograd.record():
        y = np.sum(Cube(x, "backward")(x) + np.sin(x))
    y.backward()
    outer = closed_cube_plus_sin(xs)
    expected = outer if grad_req == "write" else outer + 3 * xs ** 2
    onp.testing.assert_allclose(x.grad.asnumpy(), expected, rtol=1e-14)


def test_backward_inside_backward_writes_a_variable_only_the_inner_pass_reaches():
    xs, ws = onp.array([0.3, -0.8]), onp.array([2.0, 5.0])
    x, w = var(xs), var(ws)

    class ScaleByInnerGrad(autograd.Function):
        def forward(self, a):
            self.save_for_backward(a)
            return a * 1

        def backward(self, dy):
            (a,) = self.saved_tensors
            with autograd.record():
                z = np.sum(np.sin(w) * a)           # a is x, with its history
            z.backward()
            return dy * (1 + 0 * a)

    with autograd.record():
        y = np.sum(ScaleByInnerGrad()(x) * x)
    y.backward()
    onp.testing.assert_allclose(w.grad.asnumpy(), onp.cos(ws) * xs, rtol=1e-15)
    onp.testing.assert_allclose(x.grad.asnumpy(), 2 * xs, rtol=1e-15)


def test_inner_pass_through_an_outer_intermediate_and_create_graph():
    """The inner pass runs an outer graph node (h = x * x) with retain_graph=True; the outer
    pass runs it again afterwards; at second order everything is still recorded."""
    xs = onp.array([0.4, 1.1, -0.7])
    x = var(xs)

    class TimesH(autograd.Function):
        """f(h) = h**2 with h = x*x recorded outside; backward finds df/dx by an inner pass
        through h's node and divides by dh/dx = 2x, i.e. returns 2h."""

        def forward(self, h):
            self.save_for_backward(h)
            return h * h

        def backward(self, dh):
            (h,) = self.saved_tensors
            with autograd.record():
                z = np.sum(h * h)
            create = autograd.is_recording()
            (gx,) = autograd.grad(z, [x], retain_graph=True, create_graph=create)
            return dh * gx / (2 * x)

    with autograd.record():
        h = x * x
        y = np.sum(TimesH()(h) + np.sin(x))                     # x**4 + sin x
        (d,) = autograd.grad(y, [x], create_graph=True)
        s = np.sum(d)
    onp.testing.assert_allclose(d.asnumpy(), 4 * xs ** 3 + onp.cos(xs), rtol=1e-14)
    (dd,) = autograd.grad(s, [x])
    onp.testing.assert_allclose(dd.asnumpy(), 12 * xs ** 2 - onp.sin(xs), rtol=1e-13)


def test_inner_pass_that_frees_an_outer_node_makes_the_outer_pass_raise_clearly():
    x = var([0.4, 1.1])

    class FreesH(autograd.Function):
        def forward(self, h):
            self.save_for_backward(h)
            return h * 2

        def backward(self, dh):
            (h,) = self.saved_tensors
            with autograd.record():
                z = np.sum(h * 3)
            autograd.grad(z, [x])          # no retain_graph: frees h's node (x * x)
            return dh * 2

    with autograd.record():
        h = x * x
        y = np.sum(FreesH()(h))
    with pytest.raises(RuntimeError, match=r"fastgrad\.multiply .*already freed.*retain_graph"):
        y.backward()


def test_a_function_whose_backward_differentiates_its_own_node_raises_clearly():
    x = var([0.5, 2.0])

    class SelfReferential(autograd.Function):
        def forward(self, a):
            out = a * 2
            self.save_for_backward(out)
            return out

        def backward(self, dy):
            (out,) = self.saved_tensors           # comes back with this node's history
            with autograd.record():
                z = np.sum(out * out)
            autograd.grad(z, [x])
            return dy * 2

    with autograd.record():
        y = np.sum(SelfReferential()(x))
    with pytest.raises(RuntimeError, match=r"SelfReferential: the backward of this Function "
                                           r"call is already running"):
        y.backward()


# ----- one graph, two passes at once

def test_two_threads_differentiate_one_retained_graph(fast_thread_switching):
    xs = onp.linspace(-2.0, 2.0, 40)
    x = var(xs)
    with autograd.record():
        y = np.sum(np.tanh(x) * np.exp(-x * x) + x ** 3)
    expected = ((1 - onp.tanh(xs) ** 2) * onp.exp(-xs * xs)
                - 2 * xs * onp.tanh(xs) * onp.exp(-xs * xs) + 3 * xs ** 2)

    def job():
        for _ in range(80):
            (g,) = autograd.grad(y, [x], retain_graph=True)
            onp.testing.assert_allclose(g.asnumpy(), expected, rtol=1e-13, atol=1e-15)
        return True

    assert run_threads([job, job, job]) == [True, True, True]


def test_two_passes_over_one_graph_that_free_it_give_one_right_result_or_a_clear_error():
    """Two threads, each with its own head over one recorded h, differentiate without
    retain_graph at the same time: a pass that reaches a node the other freed raises the usual
    error; a pass that finishes has the right gradient."""
    xs = onp.array([0.3, -1.2, 2.5])
    x = var(xs)
    both_walked = threading.Barrier(2)

    with autograd.record():
        h = np.sin(x) * x                        # the nodes both passes will run
    outcomes = []

    def job():
        with autograd.record():
            y = np.sum(h * 2)                   # each thread its own head over h
        both_walked.wait(TIMEOUT)
        try:
            (g,) = autograd.grad(y, [x])
            outcomes.append(("ok", g.asnumpy()))
        except RuntimeError as err:
            outcomes.append(("error", str(err)))
        return True

    run_threads([job, job])
    oks = [o[1] for o in outcomes if o[0] == "ok"]
    errors = [o[1] for o in outcomes if o[0] == "error"]
    assert len(oks) + len(errors) == 2 and len(oks) >= 1
    for g in oks:
        onp.testing.assert_allclose(g, 2 * (onp.cos(xs) * xs + onp.sin(xs)), rtol=1e-14)
    for message in errors:
        assert "already freed" in message and "retain_graph=True" in message


def test_a_second_pass_reaching_a_running_function_backward_raises_clearly():
    """Thread A's pass is inside a Function's backward; thread B's pass over the same
    (retained) graph reaches that node: B raises, A finishes with the right gradient."""
    inside, b_done = threading.Event(), threading.Event()
    x = var([1.0, -2.0])
    with autograd.record():
        y = np.sum(_WaitFor(inside, b_done)(x) * x)

    def a():
        return autograd.grad(y, [x], retain_graph=True)[0].asnumpy()

    def b():
        wait(inside)
        try:
            autograd.grad(y, [x], retain_graph=True)
        except RuntimeError as err:
            return str(err)
        finally:
            b_done.set()
        return "no error"

    ga, message = run_threads([a, b])
    onp.testing.assert_allclose(ga, 2 * onp.array([1.0, -2.0]), rtol=1e-15)
    assert "_WaitFor: the backward of this Function call is already running" in message
    # once A is done the graph can be differentiated again
    onp.testing.assert_allclose(autograd.grad(y, [x])[0].asnumpy(), [2.0, -4.0], rtol=1e-15)


# ----- release

class _Spy(autograd.Function):
    """Identity that keeps a weak reference to the pass running its backward."""

    passes = []

    def forward(self, x):
        return x * 1

    def backward(self, dy):
        running = current_pass()
        assert running is not None
        _Spy.passes.append(weakref.ref(running))
        return dy


@pytest.mark.parametrize("create", [False, True])
def test_a_pass_is_released_when_it_ends(create):
    _Spy.passes = []
    x = var([1.0, 2.0])
    with autograd.record():
        y = np.sum(np.sin(_Spy()(x)))
        (g,) = autograd.grad(y, [x], create_graph=create)
    onp.testing.assert_allclose(g.asnumpy(), onp.cos([1.0, 2.0]), rtol=1e-15)
    assert current_pass() is None
    del g
    gc.collect()
    assert len(_Spy.passes) == 1 and _Spy.passes[0]() is None


def test_a_pass_that_raises_is_released_and_leaves_the_graph_usable():
    _Spy.passes = []
    x = var([1.0, 2.0])

    class Fails(autograd.Function):
        def forward(self, a):
            return a * 1

        def backward(self, dy):
            raise ValueError("boom")

    with autograd.record():
        bad = np.sum(Fails()(_Spy()(x)))
        good = np.sum(_Spy()(x) * 3)
    with pytest.raises(ValueError, match="boom"):
        bad.backward()
    assert current_pass() is None
    good.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), [3.0, 3.0], rtol=1e-15)
    gc.collect()
    assert all(ref() is None for ref in _Spy.passes)


def test_pass_state_does_not_accumulate_over_many_nested_and_threaded_passes():
    xs = onp.array(POINTS)

    def step():
        x = var(xs)
        with autograd.record():
            y = np.sum(Cube(x, "grad")(x) + np.sin(x))
        y.backward()
        x2 = var(xs)
        with autograd.record():
            y2 = np.sum(_ThreadedSin(False)(x2))
        y2.backward()

    for _ in range(20):
        step()
    gc.collect()
    tracemalloc.start()
    try:
        step()
        gc.collect()
        first = tracemalloc.get_traced_memory()[0]
        for _ in range(200):
            step()
        gc.collect()
        second = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert second - first < 64 * 1024, "pass state leaks: %d bytes" % (second - first)


def test_error_in_backward_leaves_the_engine_usable():
    class Broken(autograd.Function):
        def forward(self, x):
            return x * 1

        def backward(self, dy):
            raise KeyError("boom")

    x = var([1.0, 2.0])
    with autograd.record():
        y = (Broken()(x) + x * x).sum()
    with pytest.raises(KeyError, match="boom"):
        y.backward()
    with autograd.record():
        z = (x * 3).sum()
    z.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), [3.0, 3.0])
