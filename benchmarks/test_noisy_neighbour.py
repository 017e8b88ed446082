"""Checks of benchmarks/noisy_neighbour.py: its CPU hog is pinned and always killed, its
table comes from compare.py's results, and a short run reports gradients that agree with
hand-written NumPy's in both phases. No timing assertions."""

from __future__ import annotations

import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import noisy_neighbour as nn  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"),
                                reason="pins the neighbour with sched_setaffinity (Linux)")


def _core():
    return max(os.sched_getaffinity(0))


def test_hog_is_pinned_and_killed_on_error():
    with pytest.raises(KeyboardInterrupt):
        with nn.Hog(_core()) as hog:
            proc = hog.proc
            assert hog.running()
            assert os.sched_getaffinity(proc.pid) == {_core()}
            raise KeyboardInterrupt
    assert proc.poll() is not None          # dead, and reaped
    assert not hog.running()


def test_hog_refuses_a_core_it_may_not_use():
    with pytest.raises(ValueError, match="not among"):
        with nn.Hog(10_000):
            pass


def test_short_run_checks_gradients(capsys):
    # Workload 1 (the per-op chain), two backends, one sample a cell, in both phases; the
    # environment's BLAS variables are kept (tests never change them).
    assert nn.main(["--core", str(_core()), "--workloads", "1", "--backends", "numpy,fastgrad",
                    "--quick", "--repeat", "1", "--budget", "0.01", "--keep-blas-env"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("1 ")]
    assert {r[1] for r in rows} == {"numpy", "fastgrad"}, out
    assert {r[-1] for r in rows} == {"reference", "ok"}, out
