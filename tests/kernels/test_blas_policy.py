"""The load-aware BLAS threads (Note [Load-aware BLAS threads] in _kernels/_blas_policy.py):
the decision as a pure function of injected readings, the readers on made-up /proc files, the
policy's switches through set_num_threads and the environment. Values, never speed."""

import threading

import numpy as onp
import pytest
import threadpoolctl

import fastgrad
from fastgrad import autograd
from fastgrad._kernels import _blas_policy as policy
from fastgrad._kernels import _threads

QUIET = policy.QUIET_PROBES


def _run(readings, threads=1, cpus=2, usable=2, quiet_probes=QUIET):
    """The threads after each probe of ``readings``: (machine runnable, own runnable) pairs."""
    quiet, out = 0, []
    for machine, own in readings:
        threads, quiet = policy.decide(machine, own, threads, cpus, usable, quiet, quiet_probes)
        out.append(threads)
    return out


# ------------------------------------------------------------------ the decision

def test_an_idle_machine_gets_a_second_thread_after_enough_quiet_probes():
    assert _run([(1, 1)] * (QUIET + 2)) == [1] * (QUIET - 1) + [2, 2, 2]


def test_a_busy_core_takes_the_second_thread_away_at_the_first_probe():
    # Two threads; a CPU-bound neighbour makes the machine's runnable count 2 (it and us).
    assert _run([(2, 1)], threads=2) == [1]
    # ... and it stays at one while the neighbour runs.
    assert _run([(2, 1)] * (3 * QUIET), threads=1) == [1] * (3 * QUIET)


def test_own_spinning_blas_workers_are_not_neighbours():
    # On two threads the BLAS's worker spins after a product: the machine counts 2 runnable,
    # both ours. Still a quiet machine.
    assert _run([(2, 2)] * 3, threads=2) == [2, 2, 2]
    # Our worker and a neighbour: 3 runnable, 2 ours.
    assert _run([(3, 2)], threads=2) == [1]


def test_own_threads_are_never_neighbours():
    # fastgrad's kernel pool finishing a job, on one BLAS thread: still a quiet machine.
    assert _run([(3, 3)] * QUIET, threads=1)[-1] == 2
    # A reading of our own threads that missed the caller still counts the caller.
    assert _run([(2, 0)], threads=2) == [1]
    assert _run([(1, 0)] * QUIET, threads=1)[-1] == 2


def test_a_neighbour_in_bursts_keeps_one_thread():
    # Runnable at every third probe: never QUIET quiet probes in a row.
    readings = [(2, 1) if i % 3 == 2 else (1, 1) for i in range(10 * QUIET)]
    assert set(_run(readings)) == {1}
    # Once it stops, QUIET quiet probes give the second thread back.
    assert _run(readings[-2:] + [(1, 1)] * QUIET)[-1] == 2


def test_unreadable_proc_means_one_thread():
    assert _run([(None, 1)], threads=2) == [1]
    assert _run([(None, 1)] * (QUIET + 1)) == [1] * (QUIET + 1)


@pytest.mark.parametrize("machine, cpus, usable, expected", [
    (1, 8, 8, 8),        # a quiet 8-core machine: all of them
    (4, 8, 8, 5),        # three neighbours: the five free cores
    (12, 8, 8, 1),       # more neighbours than cores: one thread, never fewer
    (3, 4, 2, 2),        # two neighbours on a 4-core machine, 2 cores allowed to us: 2
    (4, 4, 2, 1),        # three neighbours leave one core free
    (1, 1, 1, 1),        # one core
])
def test_threads_are_the_free_cores_within_the_usable_ones(machine, cpus, usable, expected):
    assert _run([(machine, 1)] * QUIET, cpus=cpus, usable=usable)[-1] == expected


def test_more_threads_wait_for_quiet_probes_but_fewer_do_not():
    # From 8 threads, one neighbour: 7 at once.
    assert _run([(2, 1)], threads=8, cpus=8, usable=8) == [7]
    # From 7, the neighbour gone: 8 only after QUIET probes.
    assert _run([(1, 1)] * QUIET, threads=7, cpus=8, usable=8) == [7] * (QUIET - 1) + [8]


# ------------------------------------------------------------------ the readers

@pytest.mark.parametrize("text, expected", [
    ("0.50 0.40 0.30 3/456 12345\n", 3),
    ("11.93 10.20 9.01 12/1034 99\n", 12),
    ("garbage\n", None),
    ("", None),
    ("0.5 0.4 0.3 x/4 1\n", None),
])
def test_read_machine_running(tmp_path, text, expected):
    path = tmp_path / "loadavg"
    path.write_text(text)
    assert policy.read_machine_running(str(path)) == expected


def test_read_machine_running_of_a_missing_file(tmp_path):
    assert policy.read_machine_running(str(tmp_path / "absent")) is None


def test_read_own_running(tmp_path):
    tasks = {"101": "101 (python) R 1 2 3", "102": "102 (python) S 1 2 3",
             # a thread name with spaces and parentheses: the state follows the last ')'
             "103": "103 (a) S (b) R 1 2 3", "104": "104 (x) S) R 0",
             "105": "105 (worker) D 1"}
    for tid, stat in tasks.items():
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "stat").write_text(stat)
    (tmp_path / "106").mkdir()                # a thread that ended: no stat file
    assert policy.read_own_running(str(tmp_path)) == 3


def test_read_own_running_counts_the_caller_at_least(tmp_path):
    assert policy.read_own_running(str(tmp_path)) == 1
    assert policy.read_own_running(str(tmp_path / "absent")) == 1


# ------------------------------------------------------------------ the switches

def _blas():
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


@pytest.fixture
def load_aware(monkeypatch):
    """The policy on, as outside the test suite, with the machine's readings in ``state``."""
    for var in _threads.BLAS_VARIABLES + ("FASTGRAD_NUM_THREADS",):
        monkeypatch.delenv(var, raising=False)
    state = {"machine": 1, "own": 1, "python_threads": 1}
    monkeypatch.setattr(policy, "read_machine_running", lambda: state["machine"])
    monkeypatch.setattr(policy, "read_own_running", lambda: state["own"])
    monkeypatch.setattr(policy, "_python_threads", lambda: state["python_threads"])
    monkeypatch.setattr(_threads, "LOAD_AWARE", True)
    fastgrad.set_num_threads(None)
    if not policy.active():
        pytest.skip("the policy cannot run here (no BLAS library found or one usable CPU)")
    yield state
    monkeypatch.undo()
    fastgrad.set_num_threads(None)            # as the suite runs: one thread, no policy
    assert not policy.active()


def _quiet_probes():
    for _ in range(QUIET):
        policy.probe()


def test_the_policy_follows_the_load(load_aware):
    assert fastgrad.get_blas_num_threads() == 1          # it starts from one thread
    _quiet_probes()
    most = min(2, policy._usable, policy._cpus)
    assert fastgrad.get_blas_num_threads() == most
    assert set(_blas()) == {most}
    load_aware["machine"] = 2                             # a neighbour
    policy.probe()
    assert fastgrad.get_blas_num_threads() == 1


def test_a_second_python_thread_gets_the_blas_one_thread_and_no_more(load_aware):
    _quiet_probes()
    most = fastgrad.get_blas_num_threads()
    load_aware["python_threads"] = 2                      # idle machine, but a second thread
    policy.probe()
    assert fastgrad.get_blas_num_threads() == 1 and set(_blas()) == {1}
    _quiet_probes()
    assert fastgrad.get_blas_num_threads() == 1
    load_aware["python_threads"] = 1                      # alone again: the cores come back
    _quiet_probes()
    assert fastgrad.get_blas_num_threads() == most


def test_python_threads_counts_the_threads_that_are_not_daemons():
    release = threading.Event()
    threads = [threading.Thread(target=release.wait, args=(30,), daemon=daemon)
               for daemon in (False, True, True)]
    before = policy._python_threads()
    for thread in threads:
        thread.start()
    try:
        assert policy._python_threads() == before + 1
    finally:
        release.set()
        for thread in threads:
            thread.join()
    assert policy._python_threads() == before


def test_set_num_threads_turns_the_policy_off_and_none_back_on(load_aware):
    fastgrad.set_num_threads(2)
    assert not policy.active()
    load_aware["machine"] = 5
    policy.tick()
    assert fastgrad.get_blas_num_threads() == 2           # fixed, whatever the load
    fastgrad.set_num_threads(None)
    assert policy.active()
    assert fastgrad.get_blas_num_threads() == 1


@pytest.mark.parametrize("var", _threads.BLAS_VARIABLES)
def test_the_blas_variables_turn_the_policy_off(load_aware, monkeypatch, var):
    monkeypatch.setenv(var, "2")
    fastgrad.set_num_threads(None)
    assert not policy.active()


def test_fastgrad_num_threads_turns_the_policy_off(load_aware, monkeypatch):
    monkeypatch.setenv("FASTGRAD_NUM_THREADS", "1")
    fastgrad.set_num_threads(None)
    assert not policy.active()
    assert fastgrad.get_blas_num_threads() == 1


def test_unreadable_proc_at_start_keeps_the_static_default(load_aware, monkeypatch):
    monkeypatch.setattr(policy, "read_machine_running", lambda: None)
    fastgrad.set_num_threads(None)
    assert not policy.active()
    assert fastgrad.get_blas_num_threads() == _threads.DEFAULT_BLAS_THREADS


def test_the_policy_leaves_a_users_limit_alone(load_aware):
    with threadpoolctl.threadpool_limits(limits=3, user_api="blas"):
        _quiet_probes()
        assert set(_blas()) == {3}
        load_aware["machine"] = 4
        policy.probe()
        assert set(_blas()) == {3}
    assert fastgrad.get_blas_num_threads() == 1           # back to the policy's own
    load_aware["machine"] = 1
    _quiet_probes()
    assert fastgrad.get_blas_num_threads() == min(2, policy._usable, policy._cpus)


def test_a_backward_pass_probes(load_aware, monkeypatch):
    x = fastgrad.np.array(onp.arange(9.0).reshape(3, 3))
    x.attach_grad()
    with autograd.record():
        y = (x * x).sum()
    monkeypatch.setattr(policy, "_next", 0.0)
    y.backward()
    assert policy._next > 0.0
    onp.testing.assert_array_equal(x.grad.asnumpy(), 2 * onp.arange(9.0).reshape(3, 3))


def test_a_gluon_block_probes_outside_recording(load_aware, monkeypatch):
    net = fastgrad.gluon.nn.Dense(4, in_units=3)
    net.initialize()
    x = fastgrad.nd.array(onp.arange(6.0).reshape(2, 3))
    for hybridize in (False, True):
        if hybridize:
            net.hybridize()
        monkeypatch.setattr(policy, "_next", 0.0)
        out = net(x)
        assert policy._next > 0.0
        expected = x.asnumpy() @ net.weight.data().asnumpy().T + net.bias.data().asnumpy()
        onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-6)


def test_the_product_ops_do_not_probe(load_aware, monkeypatch):
    """The per-op path pays for no probe: backward passes and blocks do it."""
    a = fastgrad.np.array(onp.arange(6.0).reshape(2, 3))
    b = fastgrad.np.array(onp.arange(12.0).reshape(3, 4))
    monkeypatch.setattr(policy, "_next", 0.0)
    for product in (lambda: a @ b, lambda: fastgrad.np.dot(a, b)):
        onp.testing.assert_array_equal(product().asnumpy(), a.asnumpy() @ b.asnumpy())
    assert policy._next == 0.0


def test_the_executor_probes(load_aware, monkeypatch):
    x = fastgrad.sym.var("x")
    ex = (x * x).sum().simple_bind(fastgrad.cpu(), x=(2, 2))
    for run in (lambda: ex.forward(is_train=True), lambda: ex.backward()):
        monkeypatch.setattr(policy, "_next", 0.0)
        run()
        assert policy._next > 0.0


def test_a_convolution_probes(load_aware, monkeypatch):
    from fastgrad._kernels import _forward
    monkeypatch.setattr(policy, "_next", 0.0)
    x = onp.arange(2 * 1 * 4 * 4, dtype=onp.float64).reshape(2, 1, 4, 4)
    w = onp.ones((1, 1, 2, 2))
    y = _forward.conv2d(x, w, (1, 1), (0, 0), (1, 1))
    assert policy._next > 0.0
    onp.testing.assert_array_equal(y[0, 0, 0], [10.0, 14.0, 18.0])
