"""The distributed KVStore's allreduce against raw mpi4py, and the MLP step on 1 and 2 ranks.

Run it (needs ``pip install "fastgrad[distributed]"``)::

    python benchmarks/bench_allreduce.py    # runs itself on 2 ranks, then 1 and 2 for the MLP

or one part on a chosen number of ranks::

    python -m fastgrad.launch -n 2 python benchmarks/bench_allreduce.py --part allreduce
    python -m fastgrad.launch -n 4 python benchmarks/bench_allreduce.py --part mlp

Allreduce: for message sizes from 4 KB to 64 MB (float32), the time of one sum over all ranks
by raw ``comm.Allreduce(send, recv)`` and, on the same buffers, by

* ``horovod``: ``kv.pushpull(key, value, out=out)`` of the ``'horovod'`` store (no stored value:
  the allreduce runs from ``value`` straight into ``out``, plus the store's 16-byte agreement
  check);
* ``verify=False``: the same with the agreement check switched off;
* ``dist_sync``: ``kv.pushpull`` of an ``init``-ed key of the ``'dist_sync'`` store, which also
  keeps the sum as the key's stored value and copies it to ``out`` (two extra copies of the
  message).

Each call is timed between barriers as the slowest rank's time; the table shows the best and the
median call of three interleaved rounds of repeats (the best is the cost without interference
from other processes; the median shows the interference); rank 0 prints. The MLP part
times the data-parallel step of ``examples/train_mlp_distributed.py``-style training of the
benchmarks' MLP (784-256-256-10, global batch 128, float32: forward, backward, ``pushpull`` of
the 6 gradients with SGD in the store).
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as onp

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def _times(fn, comm, repeats):
    """(best, median) of ``repeats`` calls, each the slowest rank's time between barriers."""
    from mpi4py import MPI
    local = onp.empty(repeats)
    for k in range(repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        local[k] = time.perf_counter() - t0
    slowest = onp.empty(repeats)
    comm.Allreduce(local, slowest, op=MPI.MAX)
    return float(slowest.min()), float(onp.median(slowest))


def bench_allreduce(repeat_bytes=256 << 20):
    from mpi4py import MPI
    import fastgrad as mx
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    hv = mx.kv.create("horovod")
    fast = mx.kv.create("horovod")
    fast.verify = False
    ds = mx.kv.create("dist_sync")
    rows = []
    for i, nbytes in enumerate(SIZES):
        n = nbytes // 4
        value = mx.nd.array(onp.random.default_rng(rank).standard_normal(n), dtype="float32")
        out = mx.nd.zeros((n,), dtype="float32")
        send, recv = mx._array.unwrap(value), mx._array.unwrap(out)
        repeats = max(5, min(200, repeat_bytes // nbytes))
        ds.init(i, value)
        calls = [lambda: comm.Allreduce(send, recv, op=MPI.SUM),
                 lambda: hv.pushpull(i, value, out=out),
                 lambda: fast.pushpull(i, value, out=out),
                 lambda: ds.pushpull(i, value, out=out)]
        for fn in calls:
            fn()                                      # warm up buffers and signatures
        # interleave them so that load from other processes hits them alike
        results = [[] for _ in calls]
        for _ in range(3):
            for fn, res in zip(calls, results):
                res.append(_times(fn, comm, repeats))
        t_raw, t_hv, t_fast, t_ds = (min(t) for t in results)
        expect = comm.allreduce(float(send[0]))
        assert abs(float(recv[0]) - expect) <= 1e-5 * max(1.0, abs(expect))
        rows.append((nbytes, t_raw, t_hv, t_fast, t_ds))
    if rank == 0:
        print("allreduce of float32 on %d ranks: best (and median) microseconds per call; "
              "ratio = store / raw of the best" % comm.Get_size())
        print("%7s %20s %20s %6s %20s %6s %20s %6s %9s"
              % ("size", "raw Allreduce", "horovod pushpull", "ratio", "verify=False", "ratio",
                 "dist_sync pushpull", "ratio", "raw GB/s"))
        for nbytes, t_raw, t_hv, t_fast, t_ds in rows:
            cells = ["%7s" % _size(nbytes), "%9.1f (%8.1f)" % (1e6 * t_raw[0], 1e6 * t_raw[1])]
            for t in (t_hv, t_fast, t_ds):
                cells.append("%9.1f (%8.1f) %6.3f" % (1e6 * t[0], 1e6 * t[1], t[0] / t_raw[0]))
            cells.append("%9.2f" % (nbytes / t_raw[0] / 1e9))
            print(" ".join(cells))
        sys.stdout.flush()


def bench_mlp(steps=30, batch=128):
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
    import fastgrad as mx
    from fastgrad import autograd, np
    from train_mlp_distributed import make_data, init_params, loss_fn
    kv = mx.kv.create("dist_sync")
    rank, workers = kv.rank, kv.num_workers
    share = batch // workers
    x_all, y_all = make_data(batch * 4)
    params = init_params()
    keys = list(range(len(params)))
    kv.init(keys, params)
    kv.pull(keys, out=params)
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9))
    for p in params:
        p.attach_grad()

    def step(k):
        lo = (k % 4) * batch + rank * share
        x, y = np.array(x_all[lo:lo + share]), np.array(y_all[lo:lo + share])
        with autograd.record():
            loss = loss_fn(params, x, y, batch)
        loss.backward()
        kv.pushpull(keys, [p.grad for p in params], out=params)

    for k in range(3):
        step(k)
    times = []
    for k in range(steps):
        kv.barrier()
        t0 = time.perf_counter()
        step(k)
        times.append(time.perf_counter() - t0)
    if rank == 0:
        print("MLP step (784-256-256-10, global batch %d, f32) on %d rank(s): median %.2f ms, "
              "min %.2f ms" % (batch, workers, 1e3 * onp.median(times), 1e3 * min(times)))
        sys.stdout.flush()


def _size(nbytes):
    return "%d KB" % (nbytes >> 10) if nbytes < (1 << 20) else "%d MB" % (nbytes >> 20)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["allreduce", "mlp", "all"], default="all")
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args(argv)
    in_job = any(v in os.environ for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"))
    if args.part == "all" and not in_job:
        launch = [sys.executable, "-m", "fastgrad.launch"]
        me = os.path.abspath(__file__)
        for cmd in ([*launch, "-n", "2", sys.executable, me, "--part", "allreduce"],
                    [*launch, "-n", "1", sys.executable, me, "--part", "mlp", "--steps",
                     str(args.steps)],
                    [*launch, "-n", "2", sys.executable, me, "--part", "mlp", "--steps",
                     str(args.steps)]):
            code = subprocess.call(cmd)
            if code:
                return code
        return 0
    if args.part in ("allreduce", "all"):
        bench_allreduce()
    if args.part in ("mlp", "all"):
        bench_mlp(args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
