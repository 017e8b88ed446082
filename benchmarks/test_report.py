"""Checks of compare.py's report logic on made-up cells: the targets table, the ratios of the
executor and JAX jit to their imperative paths, pooling rounds, and the environment of the
backends' processes.  No timing is measured or asserted."""

from __future__ import annotations

import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import compare  # noqa: E402
import targets  # noqa: E402
import workloads as wl  # noqa: E402


def _cell(key: str, backend: str, times, peak=None, method="tracemalloc", status="ok"):
    return compare.Result(wl.get_workload(key), backend, status=status, times=list(times),
                          peak_bytes=peak, memory_method=method)


def _row(table, workload_prefix: str, text_part: str):
    (row,) = [r for r in table if r[0].startswith(workload_prefix) and text_part in r[1]]
    return row


def test_targets_ratio_and_verdict():
    results = [
        _cell("8", "numpy", [2.0, 2.0, 2.2]),
        _cell("8", "fastgrad", [1.0, 1.1, 0.9]),   # median 1.0
        _cell("8", "torch", [1.0, 1.0, 1.0]),
        _cell("9", "fastgrad", [0.5]),
        _cell("9", "torch", [0.9]),
    ]
    table = targets.rows(results)
    assert _row(table, "8 (fastgrad/torch)", "PyTorch")[3:] == ("1.00x", "yes")   # at most 1.0
    assert _row(table, "8 (fastgrad/numpy)", "NumPy")[3:] == ("0.50x", "yes")
    assert _row(table, "9 (fastgrad/torch)", "LSTM")[3:] == ("0.56x", "no")        # limit 0.5


def test_strict_target_is_not_met_at_equality():
    results = [_cell("8", "numpy", [1.0]), _cell("8", "fastgrad", [1.0])]
    assert _row(targets.rows(results), "8 (fastgrad/numpy)", "NumPy")[3:] == ("1.00x", "no")


def test_missing_cells_are_never_met():
    results = [_cell("8", "fastgrad", [1.0]), _cell("8", "torch", [], status="missing"),
               _cell("2", "fastgrad", [1.0])]
    table = targets.rows(results)
    assert _row(table, "8 (fastgrad/torch)", "PyTorch")[4] == "not measured (torch did not run)"
    assert _row(table, "2 (fastgrad-exec/fastgrad)", "Executor")[4] == (
        "not measured (fastgrad-exec did not run)")
    assert _row(table, "6 (fastgrad/torch)", "broadcasting")[4] == (
        "not measured (workload not in this run)")


def test_memory_target_uses_peak_bytes_and_names_mixed_methods():
    results = [_cell("4", "fastgrad", [9.0], peak=41, method="tracemalloc"),
               _cell("4", "torch", [1.0], peak=100, method="rss")]
    row = _row(targets.rows(results), "4 (fastgrad/torch, memory)", "memory")
    assert row[3:] == ("0.41x (tracemalloc/rss)", "yes")


def test_executor_target_is_the_inverse_of_the_speedup():
    # 1.3x faster: executor/imperative = 1/1.3 meets it; 1/1.25 does not
    met = [_cell("2", "fastgrad", [1.3]), _cell("2", "fastgrad-exec", [1.0])]
    short = [_cell("2", "fastgrad", [1.25]), _cell("2", "fastgrad-exec", [1.0])]
    assert _row(targets.rows(met), "2 (fastgrad-exec", "Executor")[4] == "yes"
    assert _row(targets.rows(short), "2 (fastgrad-exec", "Executor")[4] == "no"


def test_pair_lines_give_executor_over_imperative():
    results = [_cell("2", "fastgrad", [2.0]), _cell("2", "fastgrad-exec", [1.5]),
               _cell("8", "fastgrad", [4.0]), _cell("8", "fastgrad-exec", [5.0]),
               _cell("9", "fastgrad", [1.0])]
    (line,) = compare.pair_lines(results)
    assert line.endswith(": [2] 0.75x, [8] 1.25x")


def test_merge_rounds_pools_samples_and_keeps_failures():
    first = [_cell("2", "fastgrad", [1.0, 2.0]), _cell("2", "torch", [1.0])]
    second = [_cell("2", "fastgrad", [3.0]), _cell("2", "torch", [], status="error")]
    merged = {r.backend: r for r in compare.merge_rounds([first, second])}
    assert merged["fastgrad"].times == [1.0, 2.0, 3.0]
    assert merged["fastgrad"].median == 2.0
    assert merged["torch"].status == "error"


def test_error_message_keeps_the_reason_after_a_traceback():
    exc = RuntimeError("Traceback (most recent call last):\n  File x.cc\nOperator y is "
                       "non-differentiable")
    assert compare.error_message(exc) == "RuntimeError: Operator y is non-differentiable"


def test_unknown_backend_interpreter_is_refused():
    with pytest.raises(SystemExit):
        compare.parse_args(["--python", "tensorflow=/usr/bin/python"])
    args = compare.parse_args(["--mxnet-python", "/opt/mx/bin/python",
                               "--python", "torch=/opt/t/bin/python"])
    assert args.pythons == {"mxnet": "/opt/mx/bin/python", "torch": "/opt/t/bin/python"}
    assert compare._child_argv(args, "mxnet", ["8"])[0] == "/opt/mx/bin/python"
    argv = compare._child_argv(args, "fastgrad", ["8", "9"])
    assert argv[0] == sys.executable
    assert argv[argv.index("--workloads") + 1] == "8,9"


def test_workload_major_order_alternates_and_skips_a_missing_backend(monkeypatch):
    # Note [Workload-major order]: all backends on one workload, then the next; odd rounds
    # reverse the backends; a backend found missing is not started again.
    calls = []

    def fake_child(b, mine, args):
        calls.append((b.name, [w.key for w in mine]))
        if b.name == "torch":
            b._state, b.error = False, "No module named 'torch'"
            return [compare.Result(w, b.name, status="missing") for w in mine]
        b._state, b.error = True, None
        return [compare.Result(w, b.name, times=[1.0]) for w in mine]

    monkeypatch.setattr(compare, "_run_child", fake_child)
    args = compare.parse_args(["--workloads", "1,6", "--backends", "numpy,fastgrad,torch"])
    works = [wl.get_workload(k) for k in args.workloads]
    backends = [wl.get_backend(n) for n in ("numpy", "fastgrad", "torch")]
    first = compare._measure_apart(backends, works, args, 0)
    assert calls == [("numpy", ["1"]), ("fastgrad", ["1"]), ("torch", ["1"]),
                     ("numpy", ["6"]), ("fastgrad", ["6"])]
    assert [(r.workload.key, r.backend, r.status) for r in first][-1] == ("6", "torch", "missing")
    calls.clear()
    for b in backends:
        b._state, b.error = None, None
    compare._measure_apart(backends, works, args, 1)
    assert [c[0] for c in calls[:3]] == ["torch", "fastgrad", "numpy"]
    calls.clear()
    args = compare.parse_args(["--workloads", "1,6", "--order", "backend"])
    for b in backends:
        b._state, b.error = None, None
    compare._measure_apart(backends, works, args, 0)
    assert calls[:2] == [("numpy", ["1", "6"]), ("fastgrad", ["1", "6"])]


def test_blas_overrides_are_removed_only_for_the_benchmark(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "512")
    monkeypatch.setattr(compare, "REMOVED_OVERRIDES", {})
    compare._unset_blas_overrides(["--child", "numpy"])      # a child keeps what it is given
    assert os.environ["OPENBLAS_CORETYPE"] == "Haswell"
    compare._unset_blas_overrides(["--keep-blas-env"])
    assert os.environ["OPENBLAS_L2_SIZE"] == "512"
    compare._unset_blas_overrides([])
    assert "OPENBLAS_CORETYPE" not in os.environ and "OPENBLAS_L2_SIZE" not in os.environ
    assert compare.REMOVED_OVERRIDES == {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512"}
    assert compare.blas_environment().startswith("OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset")


def test_workloads_8_and_9_are_measured_on_the_executor_and_jit_only_where_defined():
    executor, jit = wl.get_backend("fastgrad-exec"), wl.get_backend("jax-jit")
    on_exec = [w.key for w in wl.WORKLOADS if w.supports(executor)]
    on_jit = [w.key for w in wl.WORKLOADS if w.supports(jit)]
    assert on_exec == ["2", "3", "8", "9"] and on_jit == ["2", "8", "9"]


def test_caveats_follow_the_targets_table():
    results = [_cell("8", "fastgrad", [1.0]), _cell("8", "torch", [2.0])]
    text = targets.render(results, caveats=["--quick sizes"])
    assert text.splitlines()[-1] == "  Caveat: --quick sizes"
    assert "| 8 (fastgrad/torch) | LeNet step no slower than PyTorch | 4.7x | 0.50x | yes |" in (
        targets.render(results, markdown=True))
