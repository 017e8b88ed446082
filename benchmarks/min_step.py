"""The fastest step time of one workload on fastgrad, for before/after comparisons of builds.

Run with ``python benchmarks/min_step.py WORKLOAD [--seconds 4] [--steps N] [--backend NAME]``:
the workload's fastgrad step (the one ``compare.py`` times; ``--backend`` another of its
fastgrad backends, e.g. ``gluon-fastgrad`` or ``fastgrad-sgd`` on workloads 2 and 8) runs in
batches of ``--steps`` for ``--seconds`` of wall time, and the script prints the fastest
batch's time per step, in microseconds.

A minimum over many batches moves by a few percent between runs where medians move by tens of
percent on a shared machine, so comparing two builds is best done with this script run in
alternating processes, each build's interpreter in turn (``docs/benchmarks.rst`` shows the
loop). Not a test: the number depends on the machine.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads  # noqa: E402


def min_step_seconds(key, seconds, steps=None, backend="fastgrad"):
    """The fastest time per step of workload ``key``'s step on ``backend`` over ``seconds``."""
    workload = workloads.get_workload(key)
    backend = workloads.get_backend(backend)
    backend.load()
    step = workload.build(backend, workload.make_inputs())
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    if steps is None:                           # batches of about 20 ms
        steps = max(1, min(1000, int(0.02 / max(first, 1e-9))))
    for _ in range(2):
        step()
    best = float("inf")
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - t0) / steps)
    return best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workload", help="workload number, as in compare.py (1-9)")
    p.add_argument("--seconds", type=float, default=4.0, help="wall time to measure (default 4)")
    p.add_argument("--steps", type=int, default=None,
                   help="steps per timed batch (default: about 20 ms worth)")
    p.add_argument("--backend", default="fastgrad", choices=workloads.BACKEND_NAMES,
                   help="the backend whose step is timed (default fastgrad)")
    args = p.parse_args(argv)
    print("%.1f" % (min_step_seconds(args.workload, args.seconds, args.steps, args.backend)
                    * 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
