#!/usr/bin/env python
"""Compare fastgrad with hand-written NumPy and other autodiff libraries.

Runs every workload of :mod:`workloads` on every available backend and
prints one table: median time, time per operation (for the op chains), the
ratio to hand-written NumPy and to PyTorch, peak memory, and whether the
gradients agree with the NumPy reference.

Each backend runs in a process of its own (``--in-process``: all in this
one), so that no library's thread pools, spinning after its own work, or
allocator state left by another library, change another's times.

Usage::

    python benchmarks/compare.py [--quick] [--workloads 1,2] [--repeat N]
                                 [--backends numpy,fastgrad] [--markdown]
                                 [--in-process] [--rounds N] [--order workload|backend]
                                 [--targets]
                                 [--mxnet-python PATH] [--python NAME=PATH]
                                 [--keep-blas-env]

``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` are removed from the environment
of the benchmark (this process, before NumPy loads, and the backends'
processes) unless ``--keep-blas-env``; MXNet's process gets
``OPENBLAS_CORETYPE=Haswell``, which its bundled OpenBLAS needs on this
project's machine.

Progress goes to standard error; the machine description and the table go
to standard output.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: Environment variables that cap the threads of BLAS and OpenMP pools, and of fastgrad's
#: kernel threads (which split large elementwise operations).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "FASTGRAD_NUM_THREADS")


def _limit_threads(argv: Sequence[str]) -> None:
    """Apply ``--threads N`` before NumPy, torch or JAX start their pools."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--threads", type=int, default=None)
    n = early.parse_known_args(argv)[0].threads
    if n is not None and n > 0:
        for var in THREAD_VARIABLES:
            os.environ[var] = str(n)
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()


#: Variables that make OpenBLAS pick an older CPU's kernels (set on this project's machines for
#: old OpenBLAS builds); a user's machine does not have them, so benchmarks run without them.
BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

#: Environment of MXNet's process: the OpenBLAS bundled with MXNet 1.9.1 does not recognise
#: the benchmark machine's CPU and needs to be told a core type.
MXNET_ENVIRONMENT = {"OPENBLAS_CORETYPE": "Haswell"}

#: The BLAS overrides removed from this process's environment (name -> former value).
REMOVED_OVERRIDES: dict[str, str] = {}


def _unset_blas_overrides(argv: Sequence[str]) -> None:
    """Remove :data:`BLAS_OVERRIDES` before NumPy loads OpenBLAS (unless ``--keep-blas-env``).

    Only for the benchmark's own processes: the backends' processes inherit the environment
    made here, and a ``--child`` process takes what it is given.
    """
    if "--keep-blas-env" in argv or "--child" in argv:
        return
    for var in BLAS_OVERRIDES:
        if var in os.environ:
            REMOVED_OVERRIDES[var] = os.environ.pop(var)


if __name__ == "__main__":
    _limit_threads(sys.argv[1:])
    _unset_blas_overrides(sys.argv[1:])

import numpy as onp  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads as wl  # noqa: E402

# ---------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------


class PeakRSS:
    """Peak resident-set growth of this process during a block of code.

    Uses Linux's ``/proc/self/clear_refs`` (writing ``5`` resets the
    high-water mark ``VmHWM``) and ``/proc/self/status``.  Before measuring,
    free memory cached by glibc's ``malloc`` is handed back to the system
    (``malloc_trim(0)``) so that reused allocations show up as growth.  Sees
    every allocation, including those of C++ allocators that ``tracemalloc``
    cannot see, but only at page granularity.
    """

    def __init__(self) -> None:
        self.supported = self._reset()
        try:
            self._trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):
            self._trim = None

    @staticmethod
    def _status_kib(key: str) -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
        raise KeyError(key)

    @staticmethod
    def _reset() -> bool:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def start(self) -> int:
        """Trim the heap, reset the high-water mark; return the RSS in bytes."""
        if self._trim is not None:
            self._trim(0)
        self._reset()
        return 1024 * self._status_kib("VmRSS:")

    def peak(self) -> int:
        """Return the high-water mark since :meth:`start`, in bytes."""
        return 1024 * self._status_kib("VmHWM:")


class CpuContention:
    """CPU time used by *other* processes while this one runs.

    The busy time of all CPUs (from ``/proc/stat``) minus this process's own
    CPU time (all its threads), divided by the wall time: the average number
    of cores that other work took away from the benchmark.
    """

    def __init__(self) -> None:
        self._start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        # user nice system idle iowait irq softirq steal ...: busy = all but idle, iowait
        busy = sum(fields[:8]) - fields[3] - fields[4]
        own = os.times()        # with the backends' processes, once they have ended
        mine = own.user + own.system + own.children_user + own.children_system
        return busy / os.sysconf("SC_CLK_TCK"), mine, time.perf_counter()

    def cores(self) -> float | None:
        """Average number of cores used by other processes since creation."""
        end = self._sample()
        if self._start is None or end is None or end[2] <= self._start[2]:
            return None
        other = (end[0] - self._start[0]) - (end[1] - self._start[1])
        return max(0.0, other / (end[2] - self._start[2]))


#: Average number of cores used by other processes above which timings are
#: flagged as unreliable.
CONTENTION_WARNING = 0.2


@dataclass
class Result:
    """Outcome of one workload on one backend."""

    workload: wl.Workload
    backend: str
    status: str = "ok"  # ok | missing | error | n/a (the backend does not run this workload)
    times: list[float] = field(default_factory=list)
    first_time: float | None = None
    number: int = 1
    peak_bytes: int | None = None
    memory_method: str = ""
    check: wl.GradCheck | None = None
    message: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None


#: Shortest duration of one timing sample, in seconds.
MIN_SAMPLE = 0.02


def _call(step: Callable, backend: wl.Backend):
    out = step()
    backend.block(out)
    return out


def measure(
    result: Result,
    step: Callable,
    backend: wl.Backend,
    reference: Sequence[onp.ndarray] | None,
    repeat: int,
    budget: float,
    rss: PeakRSS,
    memory: str = "auto",
) -> list[onp.ndarray] | None:
    """Warm up, check gradients, time and measure memory for one cell.

    Parameters
    ----------
    result : Result
        Filled in place.
    step : callable
        The workload's step function for ``backend``.
    backend : workloads.Backend
        The backend being measured.
    reference : sequence of numpy.ndarray or None
        NumPy gradients to check against (None for NumPy itself).
    repeat : int
        Maximum number of timing samples.
    budget : float
        Seconds after which no further samples are started (at least three
        are taken unless the warm-up run alone took a third of it).
    rss : PeakRSS
        Peak-RSS probe.
    memory : {"auto", "tracemalloc", "rss", "none"}
        How to measure peak memory, in one extra run after the timed ones;
        ``auto`` uses the backend's :attr:`~workloads.Backend.memory_method`.

    Returns
    -------
    list of numpy.ndarray
        The gradients of the first (warm-up) run.
    """
    gc.collect()
    t0 = time.perf_counter()
    out = _call(step, backend)
    result.first_time = time.perf_counter() - t0
    grads = result.workload.gradients(backend, out)
    if reference is not None:
        result.check = wl.check_gradients(grads, reference, result.workload.rtol)

    # Like timeit: a sample runs the step ``number`` times so that it lasts at
    # least MIN_SAMPLE seconds; the collector runs before each sample, not
    # between the steps of a sample (a full collection evicts the caches).
    # The warm-up may include one-time costs, so calibrate on a second run.
    number = 1
    if result.first_time < budget:
        del out
        t0 = time.perf_counter()
        out = _call(step, backend)
        t_step = time.perf_counter() - t0
        if t_step < MIN_SAMPLE:
            number = min(10_000, math.ceil(MIN_SAMPLE / max(t_step, 1e-9)))
    del out
    result.number = number
    min_runs = 3 if 3 * result.first_time <= budget else 1
    start = time.perf_counter()
    while len(result.times) < repeat:
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(number):
            out = _call(step, backend)
        result.times.append((time.perf_counter() - t0) / number)
        del out
        if len(result.times) >= min_runs and time.perf_counter() - start >= budget:
            break

    method = backend.memory_method if memory == "auto" else memory
    if method == "rss" and not rss.supported:
        method = "none"
    gc.collect()
    if method == "tracemalloc":
        tracemalloc.start()
        try:
            out = _call(step, backend)
            result.peak_bytes = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        del out
    elif method == "rss":
        base = rss.start()
        out = _call(step, backend)
        result.peak_bytes = max(0, rss.peak() - base)
        del out
    result.memory_method = method
    return grads


# ---------------------------------------------------------------------------
# Machine description
# ---------------------------------------------------------------------------


def cpu_model() -> str:
    """CPU model name from ``/proc/cpuinfo`` (or :mod:`platform`)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def blas_info() -> str:
    """Name and version of the BLAS NumPy was built with."""
    try:
        blas = onp.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:
        return "unknown BLAS"


def blas_kernel() -> str | None:
    """The BLAS library NumPy loaded, its kernel and threads, from threadpoolctl (if installed)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    # NumPy's own BLAS first (numpy.libs/ in its wheel); torch and others bring their own
    pools.sort(key=lambda p: "numpy" not in p.get("filepath", ""))
    if not pools:
        return "no BLAS loaded"
    p = pools[0]
    arch = f" {p['architecture']} kernel" if p.get("architecture") else ""
    n = p.get("num_threads")
    threads = f"{n} thread{'s' * (n != 1)}"
    return f"{p.get('internal_api', '?')} {p.get('version') or ''}{arch}, {threads}"


def blas_environment() -> str:
    """What this run did with the :data:`BLAS_OVERRIDES` variables."""
    if REMOVED_OVERRIDES:
        was = ", ".join(f"{k}={v}" for k, v in REMOVED_OVERRIDES.items())
        return f"{' and '.join(REMOVED_OVERRIDES)} unset for the benchmark (were {was})"
    kept = [f"{k}={os.environ[k]}" for k in BLAS_OVERRIDES if k in os.environ]
    if kept:
        return f"kept {', '.join(kept)} (--keep-blas-env): NumPy may run an older CPU's kernels"
    return f"{' and '.join(BLAS_OVERRIDES)} not set"


def _thread_setting() -> str:
    limits = [f"{v}={os.environ[v]}" for v in THREAD_VARIABLES if v in os.environ]
    return ", ".join(limits) if limits else "default threads"


def machine_lines(backends: Sequence[wl.Backend]) -> list[str]:
    """Describe the machine and the library versions, one fact per line."""
    n_cpu = os.cpu_count()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = n_cpu
    lines = [
        f"CPU: {cpu_model()}, {n_cpu} logical cores ({usable} usable)",
        f"OS: {platform.system()} {platform.release()} {platform.machine()}",
        f"Python: {platform.python_version()} ({platform.python_implementation()})",
        f"NumPy: {onp.__version__} (BLAS: {blas_info()}, {_thread_setting()})",
        "NumPy's BLAS at run time: "
        f"{blas_kernel() or 'unknown (pip install threadpoolctl to see it)'}",
        f"BLAS environment: {blas_environment()}",
    ]
    for b in backends:
        if b.name == "numpy":
            continue
        if not b.available:
            lines.append(f"{b.label}: missing ({b.error})")
            continue
        extra = ", ".join(f"{k} {v}" for k, v in b.details.items())
        lines.append(f"{b.label}: {b.version}" + (f" ({extra})" if extra else ""))
    return lines


# ---------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------


def _num(value: float) -> str:
    return f"{value:.0f}" if value >= 99.95 else f"{value:.3g}"


def fmt_time(seconds: float | None) -> str:
    """Format a duration with three significant digits."""
    if seconds is None:
        return ""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale * 0.9995:
            return f"{_num(seconds / scale)} {unit}"
    return f"{_num(seconds / 1e-9)} ns"


def fmt_ratio(x: float | None) -> str:
    """Format a time ratio."""
    if x is None:
        return ""
    return f"{x:.2f}x" if x < 10 else f"{x:.3g}x" if x < 1000 else f"{x:.0f}x"


def fmt_bytes(n: int | None, method: str) -> str:
    """Format a byte count with the measuring method's tag."""
    if n is None:
        return "n/a"
    tag = {"tracemalloc": "t", "rss": "r"}.get(method, "?")
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale * 0.9995:
            return f"{_num(n / scale)} {unit} ({tag})"
    return f"{n} B ({tag})"


HEADERS = ("backend", "median", "per op", "vs NumPy", "vs torch", "peak mem", "grads", "runs")


def table_rows(
    results: Sequence[Result],
) -> tuple[list[tuple[str, list[tuple[str, ...]]]], list[str]]:
    """Group results by workload into printable rows and footnotes."""
    by_workload: dict[str, dict[str, Result]] = {}
    order: list[wl.Workload] = []
    for r in results:
        if r.workload.key not in by_workload:
            by_workload[r.workload.key] = {}
            order.append(r.workload)
        by_workload[r.workload.key][r.backend] = r

    groups, notes = [], []
    for work in order:
        cells = by_workload[work.key]
        base = cells.get("numpy")
        torch_r = cells.get("torch")
        t_np = base.median if base else None
        t_torch = torch_r.median if torch_r and torch_r.status == "ok" else None
        rows = []
        for name in wl.BACKEND_NAMES:
            r = cells.get(name)
            if r is None or r.status == "n/a":
                continue
            if r.status != "ok":
                rows.append((name, r.status) + ("",) * (len(HEADERS) - 2))
                if r.status == "error":
                    notes.append(f"[{work.key}] {name}: {r.message}")
                continue
            med = r.median
            per_op = fmt_time(med / work.n_ops) if work.n_ops else ""
            if r.check is None:
                grads = "ref"
            elif r.check.ok:
                grads = "ok"
            else:
                grads = "MISMATCH"
            if r.check is not None and (not r.check.ok or r.check.note):
                notes.append(
                    f"[{work.key}] {name}: gradients {grads.lower()}, max error "
                    f"{r.check.max_error:.2e} (rtol {work.rtol:g})"
                    + (f"; {r.check.note}" if r.check.note else "")
                )
            rows.append(
                (
                    name,
                    fmt_time(med),
                    per_op,
                    fmt_ratio(med / t_np) if t_np else "",
                    fmt_ratio(med / t_torch) if t_torch else "",
                    fmt_bytes(r.peak_bytes, r.memory_method),
                    grads,
                    f"{len(r.times)}x{r.number}" if r.number > 1 else str(len(r.times)),
                )
            )
        groups.append((f"[{work.key}] {work.title}", rows))
    return groups, notes


FOOTER = [
    "median: median over the samples of the wall time of one forward+backward step, after one"
    " warm-up run (fastgrad-sgd, gluon-fastgrad*, torch-nn: a whole training step, with the SGD"
    " update).",
    "per op: median divided by the number of recorded operations (op chains only).",
    "vs NumPy, vs torch: median divided by that of hand-written NumPy, of PyTorch,"
    " on the same workload (below 1 = faster).",
    "peak mem, in one extra run: (t) tracemalloc peak: NumPy buffers and Python"
    " objects, not raw C/C++ allocations; (r) growth of the peak RSS (VmHWM, reset"
    " through /proc/self/clear_refs, after malloc_trim) over the RSS before the run:"
    " all allocations, page-granular; used for torch and JAX, whose allocators"
    " tracemalloc cannot see.",
    "grads: gradients of the warm-up run against the NumPy reference ('ref'): ok or MISMATCH.",
    "runs: number of timing samples (x steps per sample, for steps shorter than"
    f" {MIN_SAMPLE * 1e3:g} ms; the garbage collector runs before each sample).",
]


#: Pairs of backends whose ratio is printed after the table: (faster way, usual way, label).
PAIRS = (
    ("fastgrad-exec", "fastgrad", "fastgrad bound Executor / imperative (record + backward)"),
    ("jax-jit", "jax", "JAX jit / JAX eager"),
    # Note [Training-step backends] in workloads.py: Gluon's own overhead, hybridize's gain
    ("gluon-fastgrad", "fastgrad-sgd", "fastgrad Gluon imperative / hand-written step + SGD"),
    ("gluon-fastgrad-hybrid", "fastgrad-sgd",
     "fastgrad Gluon hybridized / hand-written step + SGD"),
    ("gluon-fastgrad-hybrid", "gluon-fastgrad", "fastgrad Gluon hybridized / imperative"),
    ("gluon-fastgrad", "torch-nn", "fastgrad Gluon imperative / PyTorch nn.Module + optim.SGD"),
    ("gluon-fastgrad-hybrid", "torch-nn",
     "fastgrad Gluon hybridized / PyTorch nn.Module + optim.SGD"),
)


def pair_lines(results: Sequence[Result]) -> list[str]:
    """One line per :data:`PAIRS` entry that ran: the ratio of the medians per workload."""
    cells = {(r.workload.key, r.backend): r for r in results if r.status == "ok"}
    keys = list(dict.fromkeys(r.workload.key for r in results))
    lines = []
    for top, bottom, label in PAIRS:
        parts = [f"[{k}] {fmt_ratio(cells[k, top].median / cells[k, bottom].median)}"
                 for k in keys if (k, top) in cells and (k, bottom) in cells]
        if parts:
            lines.append(f"{label}: " + ", ".join(parts))
    return lines


def render_text(groups, notes, lines_before: Sequence[str]) -> str:
    widths = [len(h) for h in HEADERS]
    for _, rows in groups:
        for row in rows:
            widths = [max(w, len(c)) for w, c in zip(widths, row)]
    out = list(lines_before) + [""]
    header = "  ".join(
        h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(HEADERS, widths))
    )
    for title, rows in groups:
        out.append(title)
        out.append("  " + header)
        for row in rows:
            out.append(
                "  "
                + "  ".join(
                    c.ljust(w) if i == 0 else c.rjust(w)
                    for i, (c, w) in enumerate(zip(row, widths))
                ).rstrip()
            )
        out.append("")
    for item in FOOTER:
        out += textwrap.wrap(item, width=88, subsequent_indent="  ")
    if notes:
        out += ["", "Notes:"] + [f"  {n}" for n in notes]
    return "\n".join(out)


def render_markdown(groups, notes, lines_before: Sequence[str]) -> str:
    out = [f"- {line}" for line in lines_before] + [""]
    out.append("| workload | " + " | ".join(HEADERS) + " |")
    out.append("|---|" + "|".join("---" if i == 0 else "---:" for i in range(len(HEADERS))) + "|")
    for title, rows in groups:
        for i, row in enumerate(rows):
            label = title if i == 0 else ""
            out.append(f"| {label} | " + " | ".join(row) + " |")
    out.append("")
    out += [f"- {item}" for item in FOOTER]
    if notes:
        out += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller problems and fewer runs (< 30 s)")
    p.add_argument(
        "--workloads", default="", help="comma-separated workload numbers, e.g. 1,2 (default: all)"
    )
    p.add_argument(
        "--backends",
        default="",
        help=f"comma-separated backends among {','.join(wl.BACKEND_NAMES)} (default: all; "
        "numpy always runs as the reference)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="maximum timing samples per cell (default 10, quick 3)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds of timing per cell before stopping (default 2, quick 0.25)",
    )
    p.add_argument(
        "--memory",
        choices=("auto", "tracemalloc", "rss", "none"),
        default="auto",
        help=("peak-memory method: auto = tracemalloc for numpy/fastgrad/autograd, "
              "RSS for torch/jax"),
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="cap BLAS/OpenMP/torch/XLA/fastgrad threads (sets OMP_NUM_THREADS, "
        "FASTGRAD_NUM_THREADS etc.; default: libraries' defaults)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure everything this many times and pool the samples of each cell "
        "(default 1); see --order",
    )
    p.add_argument(
        "--order",
        choices=("workload", "backend"),
        default="workload",
        help="workload (default): all backends on one workload, one process each, then the "
        "next workload, so a ratio's two medians are measured seconds apart; backend: one "
        "process per backend for every workload (Note [Workload-major order])",
    )
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--chart", default=None, metavar="FILE",
                   help="also draw the ratios to NumPy as a chart (.svg, .png; needs matplotlib)")
    p.add_argument(
        "--in-process",
        action="store_true",
        help="run every backend in this process (default: one process per backend)",
    )
    p.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="BACKEND=PATH",
        help="run BACKEND's process with the Python interpreter PATH (repeatable), e.g. "
        "torch=/opt/venv/bin/python; default: this interpreter",
    )
    p.add_argument(
        "--mxnet-python",
        default=None,
        metavar="PATH",
        help="the interpreter of a virtual environment with MXNet 1.9 (it needs numpy<1.24); "
        "short for --python mxnet=PATH. Its process gets "
        + ", ".join(f"{k}={v}" for k, v in MXNET_ENVIRONMENT.items()),
    )
    p.add_argument(
        "--keep-blas-env",
        action="store_true",
        help=f"keep {' and '.join(BLAS_OVERRIDES)} (by default they are unset for the benchmark)",
    )
    p.add_argument(
        "--targets",
        action="store_true",
        help="after the table, print issue 17's performance targets with the ratios measured",
    )
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.pythons = {}
    for item in args.python + ([f"mxnet={args.mxnet_python}"] if args.mxnet_python else []):
        name, sep, path = item.partition("=")
        if not sep or name not in wl.BACKEND_NAMES or not path:
            p.error("--python takes BACKEND=PATH with BACKEND among "
                    f"{', '.join(wl.BACKEND_NAMES)}, not {item!r}")
        args.pythons[name] = path
    if args.pythons and args.in_process:
        p.error("--python and --mxnet-python need a process per backend (drop --in-process)")
    args.workloads = [k.strip() for k in args.workloads.split(",") if k.strip()]
    for key in args.workloads:
        try:
            wl.get_workload(key)
        except ValueError as exc:
            p.error(str(exc))
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(args.backends) - set(wl.BACKEND_NAMES))
    if unknown:
        p.error(f"unknown backend(s) {', '.join(unknown)}; "
                f"choose from {', '.join(wl.BACKEND_NAMES)}")
    if args.repeat is None:
        args.repeat = 3 if args.quick else 10
    if args.budget is None:
        args.budget = 0.25 if args.quick else 2.0
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def reference_gradients(works: Sequence[wl.Workload]) -> dict[str, list[onp.ndarray]]:
    """The hand-written NumPy gradients of each workload (one untimed run each)."""
    numpy_backend = wl.get_backend("numpy")
    numpy_backend.load()
    out = {}
    for w in works:
        grads = _call(w.build(numpy_backend, w.make_inputs()), numpy_backend)
        out[w.key] = [numpy_backend.to_numpy(g) for g in grads]
    return out


def run_cells(
    backends: Sequence[wl.Backend],
    works: Sequence[wl.Workload],
    args: argparse.Namespace,
    reference: dict[str, list[onp.ndarray]] | None = None,
) -> list[Result]:
    """Measure every workload on every backend, backend by backend.

    Running one library's cells together keeps thread pools of two libraries
    from interleaving.  NumPy runs first: its gradients are the reference,
    unless ``reference`` gives them.
    """
    rss = PeakRSS()
    inputs = {w.key: w.make_inputs() for w in works}
    reference = {} if reference is None else dict(reference)
    results: list[Result] = []
    for b in backends:
        for i, w in enumerate(works, 1):
            r = Result(w, b.name)
            results.append(r)
            if not w.supports(b):
                r.status = "n/a"
                continue
            if not b.available:
                r.status = "missing"
                continue
            if b.name != "numpy" and w.key not in reference:
                r.status, r.message = "error", "no NumPy reference"
                continue
            # Progress: which cell runs and how far this backend is ("[3/7]"); on a terminal
            # the line is shown while the cell runs and then overwritten by its result.
            where = f"  {b.name:9s} [{i}/{len(works)}] workload {w.key} {w.slug:18s}"
            if sys.stderr.isatty():
                print(where + " running...", end="\r", file=sys.stderr, flush=True)
            cell_start = time.perf_counter()
            try:
                step = w.build(b, inputs[w.key])
                grads = measure(r, step, b, reference.get(w.key), args.repeat, args.budget, rss,
                                args.memory)
                if b.name == "numpy":
                    reference[w.key] = grads
                del step
            except Exception as exc:
                r.status = "error"
                r.times = []
                r.message = error_message(exc)
            log(
                where + " "
                + (f"{fmt_time(r.median)} median of {len(r.times)}" if r.status == "ok"
                   else r.status)
                + (f"  {r.message}" if r.message else "")
                + f"  ({time.perf_counter() - cell_start:.1f} s)"
            )
            gc.collect()
    return results


def _describe_blas(b: wl.Backend) -> None:
    """Add the BLAS facts of this process that concern backend ``b`` to its details."""
    kernel = blas_kernel()
    if kernel and b.name in ("numpy", "fastgrad", "fastgrad-exec", "fastgrad-sgd",
                             "gluon-fastgrad", "gluon-fastgrad-hybrid", "autograd"):
        b.details["BLAS"] = kernel
        policy = sys.modules.get("fastgrad._kernels._blas_policy")
        if policy is not None and getattr(policy, "active", lambda: False)():
            # The threads above are the policy's first decision; they follow the load.
            b.details["BLAS"] = kernel + " now, load-aware"
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    if b.name == "mxnet" and coretype:
        b.details["kept"] = (f"OPENBLAS_CORETYPE={coretype}: its bundled OpenBLAS does not "
                             f"recognise this CPU without it")
    elif coretype:
        b.details["kept"] = f"OPENBLAS_CORETYPE={coretype}"


def error_message(exc: BaseException) -> str:
    """One line for the table's notes: the exception's type and the last line of its message.

    The last line, because some libraries (MXNet) put a C++ traceback before the reason.
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[-1][:200] if lines else ""
    return text if text.startswith(type(exc).__name__) else f"{type(exc).__name__}: {text}"


def _measure_here(backends: Sequence[wl.Backend], works, args, reference=None) -> list[Result]:
    for b in backends:
        b.load()
        log(f"{b.name}: " + (f"{b.version}" if b.available else f"missing ({b.error})"))
        if b.available:
            _describe_blas(b)
    # Objects that exist now (the imported libraries) are moved out of the
    # collector's reach, so that the collections before each sample only
    # scan what the workloads create, and take microseconds, not 0.1 s.
    gc.collect()
    gc.freeze()
    try:
        return run_cells(backends, works, args, reference)
    finally:
        gc.unfreeze()


def _result_to_dict(r: Result) -> dict:
    check = None if r.check is None else [r.check.ok, r.check.max_error, r.check.note]
    return {"workload": r.workload.key, "backend": r.backend, "status": r.status,
            "times": r.times, "first_time": r.first_time, "number": r.number,
            "peak_bytes": r.peak_bytes, "memory_method": r.memory_method,
            "check": check, "message": r.message}


def _result_from_dict(d: dict, works: Sequence[wl.Workload]) -> Result:
    work = next(w for w in works if w.key == d["workload"])
    r = Result(work, d["backend"], status=d["status"], times=list(d["times"]),
               first_time=d["first_time"], number=d["number"], peak_bytes=d["peak_bytes"],
               memory_method=d["memory_method"], message=d["message"])
    if d["check"] is not None:
        ok, err, note = d["check"]
        r.check = wl.GradCheck(ok, float(err), note)
    return r


def child_main(args: argparse.Namespace, works: Sequence[wl.Workload]) -> int:
    """``--child NAME``: measure one backend, print its results as JSON."""
    b = wl.get_backend(args.child)
    works = [w for w in works if w.supports(b)]
    reference = None if b.name == "numpy" or not b.load() else reference_gradients(works)
    results = _measure_here([b], works, args, reference)
    json.dump({"available": b.available, "error": b.error, "version": b.version,
               "details": b.details, "results": [_result_to_dict(r) for r in results]},
              sys.stdout)
    return 0


def _child_argv(args: argparse.Namespace, name: str, keys: Sequence[str]) -> list[str]:
    argv = [args.pythons.get(name, sys.executable), os.path.abspath(__file__), "--child", name,
            "--repeat", str(args.repeat), "--budget", repr(args.budget), "--memory", args.memory,
            "--workloads", ",".join(keys)]
    if args.quick:
        argv.append("--quick")
    return argv


def _run_child(b: wl.Backend, mine: Sequence[wl.Workload], args) -> list[Result]:
    """Measure ``mine`` on backend ``b`` in a fresh Python process; records in ``b`` whether
    the backend is available and its version."""
    argv = _child_argv(args, b.name, [w.key for w in mine])
    env = dict(os.environ)
    if b.name == "mxnet":
        env.update(MXNET_ENVIRONMENT)
    if not os.path.isfile(argv[0]):
        b._state, b.error = False, f"no interpreter {argv[0]}"
        return [Result(w, b.name, status="missing") for w in mine]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, text=True, env=env)
    try:
        data = json.loads(proc.stdout) if proc.returncode == 0 else None
    except ValueError:
        data = None
    if data is None:
        b._state, b.error = False, f"its benchmark process failed (exit code {proc.returncode})"
        return [Result(w, b.name, status="error", message=b.error) for w in mine]
    b._state, b.error, b.version = data["available"], data["error"], data["version"]
    b.details = dict(data["details"])
    return [_result_from_dict(d, mine) for d in data["results"]]


def _measure_apart(backends: Sequence[wl.Backend], works, args, round_index=0) -> list[Result]:
    """Every backend in fresh Python processes (progress on our standard error).

    Note [Workload-major order]: this machine's speed drifts by up to 2x over minutes, and
    a target is a ratio of two backends' medians on one workload. With ``--order workload``
    (the default) every backend measures one workload, each in its own process, before the
    next workload starts, so the two medians of a ratio are taken seconds apart instead of
    the whole run apart; odd rounds take the backends in reverse order, so that no backend
    always runs first. ``--order backend`` runs one process per backend for all workloads
    (fewer process starts, but a ratio then spans the run).
    """
    results: list[Result] = []
    if args.order == "backend":
        for i, b in enumerate(backends, 1):
            mine = [w for w in works if w.supports(b)]
            if mine:
                where = "" if b.name not in args.pythons else f" ({args.pythons[b.name]})"
                log(f"backend {i}/{len(backends)}: {b.name}, {len(mine)} workloads in a "
                    f"fresh process{where}")
                results += _run_child(b, mine, args)
        return results
    order = list(backends) if round_index % 2 == 0 else list(reversed(backends))
    for i, w in enumerate(works, 1):
        for b in order:
            if not w.supports(b):
                continue
            if b._state is False and b.error and not b.error.startswith("its benchmark"):
                results.append(Result(w, b.name, status="missing"))   # not installed
                continue
            log(f"workload {i}/{len(works)} ({w.key}): {b.name} in a fresh process")
            results += _run_child(b, [w], args)
    return results


def merge_rounds(rounds: Sequence[Sequence[Result]]) -> list[Result]:
    """One result per cell from several rounds: the samples of all rounds pooled.

    The median then is over every sample of every round, so that a slow period of the machine
    during one round moves it less.  A cell that failed in any round keeps that round's
    status and message; the gradient check and the memory are the first round's.
    """
    merged: dict[tuple[str, str], Result] = {}
    for results in rounds:
        for r in results:
            key = (r.workload.key, r.backend)
            first = merged.get(key)
            if first is None:
                merged[key] = r
            elif r.status != "ok" and first.status == "ok":
                merged[key] = r
            elif first.status == "ok":
                first.times = first.times + r.times
    return list(merged.values())


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = [wl.get_workload(k) for k in args.workloads] if args.workloads else wl.WORKLOADS
    works = [w.scaled(args.quick) for w in chosen]
    if args.child:
        return child_main(args, works)
    names = args.backends or list(wl.BACKEND_NAMES)
    names = ["numpy"] + [n for n in wl.BACKEND_NAMES if n in names and n != "numpy"]
    backends = [wl.get_backend(n) for n in names]

    backends = [b for b in backends if any(w.supports(b) for w in works)]

    contention = CpuContention()
    started = time.perf_counter()
    rounds = []
    for k in range(args.rounds):
        if args.rounds > 1:
            log(f"round {k + 1}/{args.rounds}")
        rounds.append(_measure_here(backends, works, args) if args.in_process
                      else _measure_apart(backends, works, args, k))
    results = merge_rounds(rounds)
    log(f"total {time.perf_counter() - started:.1f} s")

    others = contention.cores()
    head = machine_lines(backends)
    run = "--quick, " if args.quick else ""
    run += f"{args.rounds} rounds pooled, " if args.rounds > 1 else ""
    run += f"at most {args.repeat} samples or {args.budget:g} s per cell, "
    run += f"wall time {time.perf_counter() - started:.0f} s"
    if others is not None:
        run += f", other processes used {others:.2f} cores on average"
    head.append(f"Run: {run}")
    if others is not None and others > CONTENTION_WARNING:
        head.append("Warning: other processes competed for the CPU during the run; "
                    "timings are unreliable.")
    groups, notes = table_rows(results)
    render = render_markdown if args.markdown else render_text
    print(render(groups, notes, head))
    pairs = pair_lines(results)
    if pairs:
        print("\nRatios of medians (below 1: the first is faster):")
        print("\n".join(("- " if args.markdown else "  ") + line for line in pairs))
    if args.targets:
        import targets
        caveats = []
        if args.quick:
            caveats.append("--quick shrinks workloads 3, 4, 7, 8 and 9; the targets are about "
                           "their full sizes")
        if others is not None and others > CONTENTION_WARNING:
            caveats.append(f"other processes used {others:.2f} cores on average: the ratios "
                           "are unreliable")
        print("\n" + targets.render(results, markdown=args.markdown, caveats=caveats))
    if args.chart:
        try:
            import chart
            run_line = next((h for h in head if h.startswith("Run:")), "")
            log(f"chart: {chart.write_chart(results, args.chart, run_line)}")
        except ImportError as exc:
            log(f"--chart needs matplotlib ({exc}): pip install matplotlib")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
