#!/usr/bin/env python
"""The workloads of ``compare.py`` on an idle machine and next to a busy neighbour.

Each round measures every workload on every backend twice, as ``compare.py`` does (each
backend in a fresh process, workload by workload): once with the machine as it is, then
with a CPU-bound process (a Python ``while True: pass``, as ``taskset -c CORE python -c
"while True: pass"`` makes) pinned to one core for the whole phase. The neighbour is killed
when its phase ends, also on Ctrl-C or an error. The table gives, per workload and backend,
the idle and loaded medians, their ratio (loaded/idle: 1 is a library that shares the
machine gracefully), the spread of each phase (median/minimum of a step), and whether the
gradients of both phases agree with hand-written NumPy's (compare.py's check).

Usage::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/noisy_neighbour.py \\
        --workloads 2,8,9 --backends numpy,fastgrad,fastgrad-exec,torch --rounds 3 \\
        [--core 1] [--python torch=/path/to/venv/bin/python] [compare.py's other options]

Options this script does not know go to ``compare.py``'s parser (``--workloads``,
``--backends``, ``--rounds``, ``--repeat``, ``--budget``, ``--python``, ``--quick``...;
peak memory is not measured unless ``--memory`` asks). Progress goes to standard error, the
machine and the table to standard output.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

#: The neighbour: one core's worth of pure CPU work, no memory traffic.
HOG_CODE = "while True: pass"


class Hog:
    """A CPU-bound process pinned to ``core`` while the ``with`` block runs.

    The process is started on entering and killed on leaving, whatever ends the block
    (an exception, ``KeyboardInterrupt``); it also dies with this process's session if
    both are killed by a signal that skips ``__exit__``, since it is started in our process
    group.
    """

    def __init__(self, core: int = 1) -> None:
        self.core = core
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Hog":
        cores = os.sched_getaffinity(0)
        if self.core not in cores:
            raise ValueError(f"core {self.core} is not among this process's cores "
                             f"{sorted(cores)}")
        core = self.core

        def pin() -> None:          # in the child, before it runs the loop
            os.sched_setaffinity(0, {core})

        self.proc = subprocess.Popen([sys.executable, "-c", HOG_CODE], preexec_fn=pin,
                                     stdin=subprocess.DEVNULL)
        time.sleep(0.2)             # let it start and reach the loop
        if self.proc.poll() is not None:
            raise RuntimeError(f"the CPU hog exited at once (code {self.proc.returncode})")
        return self

    def __exit__(self, *exc) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def _split(argv: Sequence[str] | None):
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--core", type=int, default=1,
                     help="the core the CPU-bound neighbour is pinned to (default 1)")
    args, rest = own.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        print(__doc__)
        own.print_help()
        sys.exit(0)
    if not any(a == "--memory" or a.startswith("--memory=") for a in rest):
        rest = list(rest) + ["--memory", "none"]
    return args, rest


def spread(times: Sequence[float]) -> float | None:
    """Median over minimum of one cell's samples."""
    return statistics.median(times) / min(times) if times else None


def _check(r) -> str:
    if r.backend == "numpy":
        return "reference"
    if r.check is None:
        return "-"
    return "ok" if r.check.ok else "WRONG"


def rows(idle, loaded) -> list[tuple]:
    """(workload, backend, idle median, loaded median, loaded/idle, idle spread, loaded
    spread, gradients) per cell measured in both phases; gradients are "ok" when both
    phases' gradients agree with hand-written NumPy's."""
    loaded_by = {(r.workload.key, r.backend): r for r in loaded}
    out = []
    for r in idle:
        other = loaded_by.get((r.workload.key, r.backend))
        if other is None or r.status != "ok" or other.status != "ok":
            continue
        ratio = other.median / r.median if r.median else None
        checks = {_check(r), _check(other)}
        out.append((r.workload.key, r.backend, r.median, other.median, ratio,
                    spread(r.times), spread(other.times),
                    checks.pop() if len(checks) == 1 else "WRONG"))
    return out


def render(table, head: Sequence[str], markdown: bool, compare) -> str:
    header = ("workload", "backend", "idle median", "loaded median", "loaded/idle",
              "idle med/min", "loaded med/min", "gradients")
    body = [(w, b, compare.fmt_time(i), compare.fmt_time(l), compare.fmt_ratio(q),
             "%.2f" % si, "%.2f" % sl, g) for w, b, i, l, q, si, sl, g in table]
    lines = list(head) + [""]
    if markdown:
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        lines += ["| " + " | ".join(row) + " |" for row in body]
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
        for row in [header] + body:
            lines.append("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    mine, rest = _split(sys.argv[1:] if argv is None else argv)
    import compare                      # after the arguments: --help needs no NumPy
    compare._unset_blas_overrides(rest)  # for the backends' processes
    args = compare.parse_args(rest)
    if args.in_process:
        raise SystemExit("noisy_neighbour.py runs each backend in a process of its own; "
                         "drop --in-process")
    wl = compare.wl
    chosen = [wl.get_workload(k) for k in args.workloads] if args.workloads else wl.WORKLOADS
    works = [w.scaled(args.quick) for w in chosen]
    names = args.backends or list(wl.BACKEND_NAMES)
    names = ["numpy"] + [n for n in wl.BACKEND_NAMES if n in names and n != "numpy"]
    backends = [b for b in (wl.get_backend(n) for n in names)
                if any(w.supports(b) for w in works)]
    idle_rounds, loaded_rounds = [], []
    started = time.perf_counter()
    load = []
    for k in range(args.rounds):
        compare.log(f"round {k + 1}/{args.rounds}: idle")
        load.append(os.getloadavg()[0])
        idle_rounds.append(compare._measure_apart(backends, works, args, k))
        compare.log(f"round {k + 1}/{args.rounds}: a CPU-bound process pinned to core "
                    f"{mine.core}")
        with Hog(mine.core) as hog:
            loaded_rounds.append(compare._measure_apart(backends, works, args, k))
            if not hog.running():
                raise RuntimeError("the CPU hog died during the loaded phase")
        load.append(os.getloadavg()[0])
    table = rows(compare.merge_rounds(idle_rounds), compare.merge_rounds(loaded_rounds))
    head = compare.machine_lines(backends)
    head.append(f"Run: {args.rounds} rounds, each idle then with `python -c \"{HOG_CODE}\"` "
                f"pinned to core {mine.core}; at most {args.repeat} samples or "
                f"{args.budget:g} s per cell; wall time {time.perf_counter() - started:.0f} s; "
                f"1-minute load average {min(load):.1f} to {max(load):.1f} on "
                f"{len(os.sched_getaffinity(0))} usable cores")
    print(render(table, head, args.markdown, compare))
    return 0


if __name__ == "__main__":
    sys.exit(main())
