#!/usr/bin/env python
"""What BLAS threads and fastgrad's kernel threads cost or gain, per size, idle and loaded.

Times ``numpy.matmul`` of float32 ``m x k`` by ``k x n`` products on 1 and on N BLAS threads
(the usable cores), and fastgrad's large-array kernels (an ``add`` and a ``tanh`` of ``size``
elements through ``fastgrad._kernels._large.apply``) on 1 and N threads, alternating the settings
batch by batch in one process so that the machine's load hits both alike. With ``--loaded``
every measurement is made twice: idle, then with a CPU-bound process pinned to one core
(:class:`noisy_neighbour.Hog`). Prints, per size and setting, the minimum and the median of
the batches' time per call; these numbers chose fastgrad's default thread policy (Note
[Threads on a busy machine] in ``fastgrad/_kernels/_threads.py``; the table is in
``docs/benchmarks.rst``).

``--policy`` adds a third BLAS setting, fastgrad's load-aware default (Note [Load-aware BLAS
threads] in ``fastgrad/_kernels/_blas_policy.py``): its probe runs before each product, as
fastgrad's passes run it, and its state carries from one of its batches to the next (the
other settings' batches in between do not count as time it saw). A last column gives the
share of its batches that ran on more than one thread.

Usage::

    python benchmarks/blas_threads.py [--loaded] [--policy] [--batches 15] [--core 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as onp  # noqa: E402

from noisy_neighbour import Hog  # noqa: E402

#: (m, k, n) products: square sweeps and the shapes of workloads 2, 8 and 9.
PRODUCTS = ((16, 16, 16), (32, 32, 32), (64, 64, 64), (96, 96, 96), (128, 128, 128),
            (192, 192, 192), (256, 256, 256), (384, 384, 384), (512, 512, 512),
            (128, 784, 256), (128, 256, 256), (32, 128, 512), (6, 25, 36864),
            (16, 150, 4096), (1024, 1024, 1024))

#: Element counts for the kernel pool.
SIZES = (1 << 16, 1 << 17, 1 << 18, 1 << 20, 1 << 22)


def _batch(fn, seconds=0.01):
    """Time per call of ``fn`` over a batch of about ``seconds``."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = time.perf_counter() - t0
    n = max(1, min(2000, int(seconds / max(one, 1e-9))))
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def sweep(settings, cases, batches):
    """{(case, setting): [time per call of each batch]}, settings alternating per batch."""
    out = {}
    for case, fn in cases:
        for _ in range(batches):
            for name, apply_setting in settings:
                apply_setting()
                out.setdefault((case, name), []).append(_batch(fn))
    return out


class LoadAware:
    """fastgrad's load-aware BLAS threads as a setting of :func:`sweep`: ``apply`` resumes the
    policy where its last batch left it, ``pause`` (run by the other settings) stops it."""

    def __init__(self, controllers):
        from fastgrad._kernels import _blas_policy
        self.policy, self.controllers = _blas_policy, controllers
        self.threads, self.quiet, self.on = 1, 0, False
        self.batches = []                   # the threads at the end of each of its batches

    def apply(self):
        self.policy.start(self.controllers, self.threads)
        self.policy._quiet = self.quiet
        self.on = True

    def pause(self):
        if self.on:
            self.threads, self.quiet = self.policy._threads, self.policy._quiet
            self.batches.append(self.threads)
            self.policy.stop()
            self.on = False


def report(title, times, settings, extra=None):
    names = [n for n, _ in settings]
    print(title)
    print("%-18s" % "size" + "".join("%24s" % ("%s min / median" % n) for n in names)
          + "%12s" % "med ratio" + ("%11s" % ">1 thread" if extra else ""))
    cases = list(dict.fromkeys(c for c, _ in times))
    for case in cases:
        cells = []
        for n in names:
            t = times[(case, n)]
            cells.append("%10.1f / %9.1f us" % (min(t) * 1e6, statistics.median(t) * 1e6))
        ratio = (statistics.median(times[(case, names[1])])
                 / statistics.median(times[(case, names[0])]))
        print("%-18s" % case + "".join("%24s" % c for c in cells) + "%12.2f" % ratio
              + ("%10.0f%%" % (100 * extra[case]) if extra else ""))
    sys.stdout.flush()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loaded", action="store_true", help="also measure with a pinned CPU hog")
    p.add_argument("--batches", type=int, default=15)
    p.add_argument("--core", type=int, default=1, help="the core the hog is pinned to")
    p.add_argument("--skip-pool", action="store_true")
    p.add_argument("--policy", action="store_true",
                   help="also measure fastgrad's load-aware BLAS threads")
    args = p.parse_args(argv)

    import threadpoolctl
    from fastgrad._kernels import _large

    ncores = len(os.sched_getaffinity(0))
    blas = threadpoolctl.ThreadpoolController().select(user_api="blas")
    print("BLAS:", "; ".join("%s %s (%s), %d threads" % (i["internal_api"], i["version"],
                                                         i.get("architecture"), i["num_threads"])
                             for i in blas.info()))
    print("cores:", ncores, " load average:", " ".join("%.2f" % x for x in os.getloadavg()))
    aware = LoadAware(blas.lib_controllers) if args.policy else None
    pause = aware.pause if aware is not None else (lambda: None)
    blas_settings = [("1 thread", lambda: pause() or blas.limit(limits=1) and None),
                     ("%d threads" % ncores,
                      lambda: pause() or blas.limit(limits=ncores) and None)]
    if aware is not None:
        blas_settings.append(("load-aware", aware.apply))
    tick = aware.policy.tick if aware is not None else (lambda: None)
    rng = onp.random.default_rng(0)
    blas_cases = []
    for m, k, n in PRODUCTS:
        a = rng.standard_normal((m, k)).astype(onp.float32)
        b = rng.standard_normal((k, n)).astype(onp.float32)
        blas_cases.append(("%dx%dx%d" % (m, k, n),
                           lambda a=a, b=b: (tick(), onp.matmul(a, b))))
    pool_settings = [("1 thread", lambda: _large.set_num_threads(1) and None),
                     ("%d threads" % ncores, lambda: _large.set_num_threads(ncores) and None)]
    pool_cases = []
    for size in SIZES:
        x = rng.standard_normal(size)
        y = rng.standard_normal(size)
        pool_cases.append(("add %d" % size, lambda x=x, y=y: _large.apply(onp.add, x, y)))
        pool_cases.append(("tanh %d" % size, lambda x=x: _large.apply(onp.tanh, x)))

    phases = [("idle", None)] + ([("loaded", args.core)] if args.loaded else [])
    for phase, core in phases:
        hog = Hog(core) if core is not None else None
        if hog is not None:
            hog.__enter__()
        try:
            if aware is not None:
                aware.batches = []
            times = sweep(blas_settings, blas_cases, args.batches)
            pause()
            shares = None
            if aware is not None:      # its batches, case by case, in sweep's order
                per_case = [aware.batches[i:i + args.batches]
                            for i in range(0, len(aware.batches), args.batches)]
                shares = {case: sum(t > 1 for t in got) / len(got)
                          for (case, _), got in zip(blas_cases, per_case)}
            report("BLAS matmul, float32, %s (load %.2f):" % (phase, os.getloadavg()[0]),
                   times, blas_settings, shares)
            if not args.skip_pool:
                report("fastgrad kernel pool, float64, %s:" % phase,
                       sweep(pool_settings, pool_cases, args.batches), pool_settings)
        finally:
            if hog is not None:
                hog.__exit__(None, None, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
