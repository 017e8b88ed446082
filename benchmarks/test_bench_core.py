"""pytest-benchmark suite: fastgrad and hand-written NumPy on every workload.

Each test times one forward+backward step of a workload from
:mod:`workloads` with the ``benchmark`` fixture, for one backend, and then
checks the gradients it returned (values, never timing):

* ``[numpy]``: the hand-written gradients agree with a central finite
  difference of the loss (this validates the reference itself);
* ``[fastgrad]``: fastgrad's gradients equal the hand-written NumPy ones
  within the workload's tolerance, with the same shapes and dtypes;
* ``[fastgrad-exec]`` (workloads 2, 8 and 9): the same for the bound ``Executor``;
* ``test_training_step`` (workloads 2 and 8): the whole training steps of ``fastgrad-sgd``
  (hand-written step and SGD), ``gluon-fastgrad`` and ``gluon-fastgrad-hybrid`` (Gluon with
  ``Trainer``, imperative and hybridized) compute the hand-written NumPy gradients and update
  every weight by ``-lr`` times them.

The LeNet and LSTM steps (workloads 8 and 9) run at smaller sizes here (see
:data:`SIZES`), so that the suite stays quick as a CI check; ``compare.py``
times them at full size.

``test_compare_script_runs`` also runs ``compare.py`` briefly, so that the
comparison script keeps working.

Run the timings and keep a history for regression tracking::

    pytest benchmarks/ --benchmark-autosave
    pytest benchmarks/ --benchmark-compare

Run as a quick correctness smoke test (every step runs exactly once)::

    pytest benchmarks/ --benchmark-disable
"""

from __future__ import annotations

import os
import sys

import numpy as onp
import pytest

pytest.importorskip("pytest_benchmark", reason="needs the pytest-benchmark plugin")

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import workloads as wl  # noqa: E402

#: Backends tracked for regressions (``fastgrad-exec`` only where the workload has it).
BACKENDS = ("numpy", "fastgrad", "fastgrad-exec")

#: Smaller sizes of the slower workloads for this suite (workload key -> attributes).
SIZES = {"8": {"batch": 4}, "9": {"steps": 5, "batch": 4}}

#: Largest accepted relative error of the finite-difference check.
FD_TOLERANCE = 1e-4

_reference_cache: dict[str, list[onp.ndarray]] = {}


def _workload(key: str) -> wl.Workload:
    """Workload ``key`` at the sizes of this suite."""
    return wl.get_workload(key).resized(**SIZES.get(key, {}))


def _reference(work: wl.Workload, inputs: dict[str, onp.ndarray]) -> list[onp.ndarray]:
    """Hand-written NumPy gradients of ``work`` (computed once per session)."""
    if work.key not in _reference_cache:
        numpy_backend = wl.get_backend("numpy")
        numpy_backend.load()
        step = work.build(numpy_backend, inputs)
        _reference_cache[work.key] = [numpy_backend.to_numpy(g) for g in step()]
    return _reference_cache[work.key]


def _bench(benchmark, key: str, backend_name: str) -> None:
    """Benchmark workload ``key`` on a backend, then check its gradients.

    Parameters
    ----------
    benchmark : pytest_benchmark.fixture.BenchmarkFixture
        The fixture; when disabled it calls the step once.
    key : str
        Workload number.
    backend_name : str
        One of :data:`BACKENDS`.
    """
    work = _workload(key)
    backend = wl.get_backend(backend_name)
    if not backend.load():
        pytest.fail(f"{backend_name} cannot be imported: {backend.error}")
    inputs = work.make_inputs()
    step = work.build(backend, inputs)

    benchmark.group = f"[{work.key}] {work.title}"
    if work.n_ops:
        benchmark.extra_info["n_ops"] = work.n_ops
    out = benchmark(step)
    backend.block(out)
    grads = work.gradients(backend, out)

    if backend_name == "numpy":
        err = work.finite_difference_error(inputs, grads)
        assert err < FD_TOLERANCE, f"hand-written gradient off by {err:.2e} (finite differences)"
    else:
        expected = _reference(work, inputs)
        check = wl.check_gradients(grads, expected, work.rtol)
        assert check.ok, f"{backend_name} gradients differ from NumPy's: {check}"
        assert not check.note, check.note


WORKLOADS = {
    "op_chain_300": "1",        # 300 small elementwise ops on (16,): per-op tape overhead
    "mlp_step": "2",            # MLP 784-256-256-10 training step, batch 128, float32
    "large_elementwise": "3",   # sum(sin(x) * exp(-x*x) + x*x) on 4e6 float64 values
    "long_chain_100k": "4",     # 100,000-op chain on (1,): deep tape, no recursion
    "fourth_derivative": "5",   # 4th derivative of sum(sin(x) * x) by nested create_graph
    "broadcast_relu": "6",      # sum(relu(x + b)): gradient reduced over a broadcast axis
    "recurrent_tanh": "7",      # 2,000 steps of h = tanh(h @ W): many small matmuls
    "lenet_step": "8",          # LeNet training step (conv, max-pool, dense), float32
    "lstm_step": "9",           # hand-written LSTM, 35 steps (5 here), float32
}


#: (workload, backend) pairs: every workload on every backend that runs it.
CASES = [
    (slug, name)
    for slug, key in WORKLOADS.items()
    for name in BACKENDS
    if wl.get_workload(key).supports(wl.get_backend(name))
]


@pytest.mark.parametrize(("workload", "backend"), CASES)
def test_workload(benchmark, workload, backend):
    """One workload on one backend: timed, then its gradients checked (see _bench)."""
    _bench(benchmark, WORKLOADS[workload], backend)


#: The training-step backends that need nothing but fastgrad (Note [Training-step backends] in
#: workloads.py; ``torch-nn`` needs PyTorch, which CI does not install).
TRAINING_BACKENDS = ("fastgrad-sgd", "gluon-fastgrad", "gluon-fastgrad-hybrid")


@pytest.mark.parametrize("backend_name", TRAINING_BACKENDS)
@pytest.mark.parametrize("key", ["2", "8"])
def test_training_step(benchmark, key, backend_name):
    """A whole training step (forward, backward, SGD update) of workload 2 or 8: its first
    call's gradients equal the hand-written NumPy ones (in their layout and scale, see
    ``Workload.gradients``), and every weight moved by ``-SGD_LR`` times its gradient, as the
    hand-written update moves it; then it is timed."""
    work = _workload(key)
    backend = wl.get_backend(backend_name)
    if not backend.load():
        pytest.fail(f"{backend_name} cannot be imported: {backend.error}")
    inputs = work.make_inputs()
    step = work.build(backend, inputs)
    before = [backend.to_numpy(w) for w in step.arrays]
    out = step()
    grads = work.gradients(backend, out)
    check = wl.check_gradients(grads, _reference(work, inputs), work.rtol)
    assert check.ok and not check.note, f"{backend_name} gradients differ from NumPy's: {check}"
    scale = 1.0 / work.batch if getattr(backend, "sums_over_batch", False) else 1.0
    for w0, w1, g in zip(before, step.arrays, out):
        w1, g = backend.to_numpy(w1), backend.to_numpy(g).astype(onp.float64) * scale
        assert w1.dtype == w0.dtype == onp.float32
        expected = w0 - wl.SGD_LR * g
        assert onp.allclose(w1, expected, rtol=1e-6, atol=1e-6 * onp.max(onp.abs(w0))), \
            f"{backend_name}: the update is not w - lr * grad"
        assert not onp.array_equal(w1, w0)

    benchmark.group = f"[{work.key}] {work.title}, training step"
    benchmark(step)


def test_compare_script_gluon(capsys):
    """``compare.py`` runs the Gluon steps beside the hand-written one on workload 2 and
    prints Gluon's ratios to it and hybridized over imperative."""
    import compare

    code = compare.main(
        ["--quick", "--workloads", "2", "--in-process", "--repeat", "1", "--memory", "none",
         "--backends", "numpy,fastgrad-sgd,gluon-fastgrad,gluon-fastgrad-hybrid"])
    out = capsys.readouterr().out
    assert code == 0
    rows = [line.split() for line in out.split("\nmedian:")[0].splitlines()
            if line.startswith(("  numpy ", "  fastgrad-sgd ", "  gluon-fastgrad"))]
    assert [(row[0], row[-2]) for row in rows] == [
        ("numpy", "ref"), ("fastgrad-sgd", "ok"), ("gluon-fastgrad", "ok"),
        ("gluon-fastgrad-hybrid", "ok")], out
    assert "fastgrad Gluon imperative / hand-written step + SGD: [2] " in out
    assert "fastgrad Gluon hybridized / imperative: [2] " in out


def test_compare_script_runs(capsys):
    """``compare.py`` runs end to end and its gradient checks pass (no timing asserted),
    including the bound executor, which runs only on the training steps (here workload 9)."""
    import compare

    code = compare.main(
        ["--quick", "--workloads", "1,5,9", "--backends", "numpy,fastgrad,fastgrad-exec",
         "--repeat", "1", "--memory", "none", "--targets"]
    )
    out = capsys.readouterr().out
    assert code == 0
    tables = out.split("\nmedian:")[0]          # the lines after the tables explain them
    rows = [line.split() for line in tables.splitlines()
            if line.startswith(("  numpy ", "  fastgrad ", "  fastgrad-exec "))]
    assert [(row[0], row[-2]) for row in rows] == [
        ("numpy", "ref"),
        ("fastgrad", "ok"),
        ("numpy", "ref"),
        ("fastgrad", "ok"),
        ("numpy", "ref"),
        ("fastgrad", "ok"),
        ("fastgrad-exec", "ok"),
    ], out
    assert "fastgrad bound Executor / imperative (record + backward): [9] " in out
    assert "Targets of issue 17" in out and "Caveat: --quick" in out


def test_min_step_script_prints_one_step_time(capsys):
    """``min_step.py`` runs a workload's fastgrad step and prints its fastest time per step."""
    import min_step

    assert min_step.main(["5", "--seconds", "0.05", "--steps", "2"]) == 0
    value = float(capsys.readouterr().out.strip())
    assert 0.0 < value < 1e7                    # microseconds per step of a 4th derivative
