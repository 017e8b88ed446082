"""The distributed KVStore on 2 MPI ranks (loopback): semantics, equivalence with one process,
failures. Each test runs a small program through ``python -m fastgrad.launch -n 2`` with a
timeout, so a hang fails the test instead of stalling the suite.

Skipped when mpi4py or mpiexec is missing (``pip install "fastgrad[distributed]"``); CI installs
them and checks that they import.
"""

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _helpers import MPI_TIMEOUT as TIMEOUT, expect_ok, requires_mpi, run_ranks  # noqa: E402

pytestmark = requires_mpi

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_data_parallel_sgd_equals_one_process(tmp_path):
    """SGD with momentum and weight decay on 2 ranks, each with half of every batch, gives the
    parameters of one process on the whole batch (float64, 25 steps, within 1e-12)."""
    proc = run_ranks(tmp_path, """
        import numpy as onp
        import fastgrad as mx
        from fastgrad import autograd, np, npx

        rng = onp.random.default_rng(0)
        X = rng.standard_normal((25, 16, 6)); Y = rng.standard_normal((25, 16, 3))
        init = [rng.standard_normal((6, 8)) * 0.5, rng.standard_normal(8) * 0.1,
                rng.standard_normal((8, 3)) * 0.5, rng.standard_normal(3) * 0.1]

        def loss(p, x, y):
            h = np.tanh(np.dot(x, p[0]) + p[1])
            return ((np.dot(h, p[2]) + p[3] - y) ** 2).sum()

        def train(kv, lo, hi):
            params = [np.array(a, dtype="float64") for a in init]
            keys = ["w1", "b1", "w2", "b2"]
            kv.init(keys, params)
            kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.05, momentum=0.9, wd=0.01,
                                              rescale_grad=1.0 / 16))
            for p in params:
                p.attach_grad()
            for step in range(25):
                x, y = np.array(X[step, lo:hi]), np.array(Y[step, lo:hi])
                with autograd.record():
                    l = loss(params, x, y)
                l.backward()
                kv.push(keys, [p.grad for p in params])
                kv.pull(keys, out=params)
            return [p.asnumpy() for p in params]

        dist = mx.kv.create("dist_sync")
        rank = dist.rank
        got = train(dist, 8 * rank, 8 * rank + 8)
        want = train(mx.kv.create("local"), 0, 16)
        err = max(abs(g - w).max() for g, w in zip(got, want))
        moved = max(abs(w - i).max() for w, i in zip(want, init))
        assert moved > 0.1, moved
        assert err <= 1e-12, err
        print("rank %d ok %.3g" % (rank, err))
    """)
    expect_ok(proc)


def test_kvstore_methods(tmp_path):
    """init (rank 0's value), push (sum over devices and workers), pull, pushpull, broadcast,
    int and str keys, lists of keys, fusion buckets, set_optimizer, optimizer states, barrier,
    and the errors."""
    proc = run_ranks(tmp_path, """
        import pickle
        import numpy as onp
        import fastgrad as mx
        nd = mx.nd

        def check(a, b):
            onp.testing.assert_array_equal(a.asnumpy() if hasattr(a, "asnumpy") else a, b)

        def raises(exc, text, fn, *args, **kwargs):
            try:
                fn(*args, **kwargs)
            except exc as e:
                assert text in str(e), str(e)
            else:
                raise AssertionError("no %s from %s" % (exc.__name__, fn))

        kv = mx.kv.create("dist_sync")
        r, n = kv.rank, kv.num_workers
        assert (kv.type, n) == ("dist_sync", 2) and r in (0, 1)
        assert kv.is_capable("optimizer")

        # init takes rank 0's value; int and str keys are distinct
        kv.init(3, nd.ones((2, 3)) * (r + 5))
        kv.init("3", nd.ones((2, 3)) * (r + 7))
        out = nd.zeros((2, 3)); kv.pull(3, out=out); check(out, 5)
        kv.pull("3", out=out); check(out, 7)

        # push sums over the devices of a rank and over the ranks; the sum replaces the value
        kv.push(3, [nd.ones((2, 3)) * (r + 1), nd.ones((2, 3))])   # rank 0: 1+1, rank 1: 2+1
        outs = [nd.zeros((2, 3)), nd.zeros((2, 3))]
        kv.pull(3, out=outs); check(outs[0], 5); check(outs[1], 5)

        # lists of keys, pushpull into out and into value
        keys = ["a", "b", "c"]
        kv.init(keys, [nd.zeros((4,)), nd.zeros((2, 2)), nd.zeros((1,), dtype="float64")])
        vals = [nd.ones((4,)) * (r + 1), nd.ones((2, 2)) * 10 * (r + 1),
                nd.ones((1,), dtype="float64") * 0.5]
        outs = [nd.zeros((4,)), nd.zeros((2, 2)), nd.zeros((1,), dtype="float64")]
        kv.pushpull(keys, vals, out=outs)
        check(outs[0], 3); check(outs[1], 30); check(outs[2], 1.0)
        check(vals[0], r + 1)                       # the pushed values are left alone
        kv.pushpull(keys, vals)                     # no out: the result goes into value
        check(vals[0], 3); check(vals[1], 30)

        # broadcast: rank 0's value to everyone's out
        b = nd.zeros((3,))
        kv.broadcast("bc", nd.array([1, 2, 3]) * (r + 1), out=b)
        check(b, [1, 2, 3])

        # many small keys fuse into buckets; a bucket limit smaller than some keys still works
        for bucket in (0, 64, 1 << 20):
            kv.bucket_bytes = bucket
            ks = ["s%d_%d" % (bucket, i) for i in range(20)]
            kv.init(ks, [nd.zeros((i + 1,), dtype="float64") for i in range(20)])
            vs = [nd.arange(i + 1, dtype="float64") * (r + 1) for i in range(20)]
            kv.pushpull(ks, vs)
            for i, v in enumerate(vs):
                check(v, onp.arange(i + 1) * 3)

        # fusion counted: 20 small keys make one data allreduce (plus the agreement check);
        # a key above the bucket size is reduced from the pushed array's own buffer
        class Counting:
            def __init__(self, comm):
                self.comm, self.calls = comm, []
            def Allreduce(self, send, recv, op):
                self.calls.append((send, recv))
                return self.comm.Allreduce(send, recv, op=op)
            def __getattr__(self, name):
                return getattr(self.comm, name)
        fused = mx.kv.create("dist_device_sync", bucket_bytes=1 << 16)
        assert fused.type == "dist_device_sync" and fused.bucket_bytes == 1 << 16
        fused._comm = counter = Counting(fused._comm)
        ks = list(range(20))
        fused.init(ks, [nd.zeros((8,)) for _ in ks])
        vs = [nd.ones((8,)) * (r + 1) for _ in ks]
        counter.calls.clear()
        fused.pushpull(ks, vs)
        assert len(counter.calls) == 2, len(counter.calls)     # the check and one bucket
        for v in vs:
            check(v, 3)
        big = nd.ones((1 << 15,)) * (r + 1)                     # 128 KB > the 64 KB bucket
        fused.init("big", nd.zeros((1 << 15,)))
        counter.calls.clear()
        fused.push("big", big)
        sent = [c for c in counter.calls if getattr(c[0], "size", 0) == 1 << 15]
        assert len(sent) == 1 and sent[0][0] is mx._core._array.unwrap(big)
        o = nd.zeros((1 << 15,)); fused.pull("big", out=o); check(o, 3)

        # set_optimizer: the store runs SGD on the summed gradient, identically everywhere
        kv.init(100, nd.ones((3,), dtype="float64"))
        kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.5, momentum=0.5))
        w = nd.zeros((3,), dtype="float64")
        kv.pushpull(100, nd.ones((3,), dtype="float64") * (r + 1), out=w)   # sum 3
        check(w, 1 - 0.5 * 3)
        path = "states_%d.bin" % r
        kv.save_optimizer_states(path)
        # mom = 0.5 * -1.5 - 0.5 * 2 = -1.75 (the gradients sum to 2)
        kv.pushpull(100, nd.ones((3,), dtype="float64"), out=w)
        check(w, -0.5 - 1.75)
        kv.pushpull(100, nd.ones((3,), dtype="float64"), out=w)   # mom -1.875
        check(w, -2.25 - 1.875)
        kv.load_optimizer_states(path)              # back to the momentum after step 1
        kv.pushpull(100, nd.ones((3,), dtype="float64"), out=w)   # mom -1.75 again
        check(w, -4.125 - 1.75)
        kv.save_optimizer_states(path, dump_optimizer=True)
        states, opt = pickle.loads(open(path, "rb").read())
        assert type(opt).__name__ == "SGD"

        # without the per-call agreement check the sums are the same
        plain = mx.kv.create("dist_sync")
        plain.verify = False
        plain.init("z", nd.zeros((4,)))
        v = nd.ones((4,)) * (r + 1)
        plain.pushpull("z", v)
        check(v, 3)
        kv.barrier()

        # errors, raised on every rank before any communication
        raises(KeyError, "'nope'", kv.push, "nope", nd.ones((1,)))
        raises(KeyError, "'nope'", kv.pull, "nope", out=nd.ones((1,)))
        raises(ValueError, "key 3 holds shape (2, 3)", kv.push, 3, nd.ones((3, 2)))
        raises(ValueError, "dtype", kv.push, 3, nd.ones((2, 3), dtype="float64"))
        raises(ValueError, "already initialised", kv.init, 3, nd.ones((2, 3)))
        raises(NotImplementedError, "row_sparse", kv.row_sparse_pull, 3, out=out)
        raises(NotImplementedError, "compression", kv.set_gradient_compression,
               {"type": "2bit", "threshold": 0.5})
        raises(NotImplementedError, "dist_sync", mx.kv.create, "dist_async")
        raises(TypeError, "key", kv.push, 1.5, nd.ones((1,)))

        # the 'horovod' store: pushpull and broadcast without init, nothing stored
        hv = mx.kv.create("horovod")
        assert hv.type == "horovod" and not hv.is_capable("optimizer")
        g = nd.ones((5,)) * (r + 1)
        hv.pushpull("g", g); check(g, 3)
        o = nd.zeros((5,)); hv.pushpull(["g"], [nd.ones((5,))], out=[o]); check(o, 2)
        hv.broadcast("p", nd.ones((2,)) * (r + 4), out=o[:2]); check(o[:2], 4)
        raises(NotImplementedError, "keeps no values", hv.push, "g", g)
        raises(NotImplementedError, "keeps no values", hv.set_optimizer,
               mx.optimizer.SGD())
        print("rank %d ok" % r)
    """)
    expect_ok(proc)


def test_rank_raising_aborts_the_job(tmp_path):
    """An exception on rank 1 ends both ranks (rank 0 is waiting in a collective) with a
    non-zero status and rank 1's traceback."""
    proc = run_ranks(tmp_path, """
        import fastgrad as mx
        kv = mx.kv.create("dist_sync")
        if kv.rank == 1:
            raise RuntimeError("rank one broke")
        kv.barrier()                 # rank 0 would wait here forever
        print("rank 0 passed the barrier")
    """, timeout=60)
    output = "exit status %d\nstdout:\n%s\nstderr:\n%s" % (proc.returncode, proc.stdout,
                                                            proc.stderr)
    assert proc.returncode != 0, output
    assert "rank one broke" in proc.stderr and "rank 1 raised" in proc.stderr, output
    assert "passed the barrier" not in proc.stdout, output


@pytest.mark.parametrize("kind", ["shape", "key", "dtype"])
def test_mismatch_across_ranks_names_the_key(tmp_path, kind):
    """Ranks that init different shapes, keys or dtypes get an error naming them, on every rank,
    instead of reducing mismatched buffers or hanging."""
    proc = run_ranks(tmp_path, """
        import sys
        import fastgrad as mx
        kv = mx.kv.create("dist_sync")
        r = kv.rank
        kind = sys.argv[1]
        shape = (3,) if kind != "shape" or r == 0 else (4,)
        key = "weight" if kind != "key" or r == 0 else "bias"
        dtype = "float32" if kind != "dtype" or r == 0 else "float64"
        try:
            kv.init(key, mx.nd.ones(shape, dtype=dtype))
        except ValueError as e:
            with open("error_%d.txt" % r, "w") as f:
                f.write(str(e))
        kv.init("ok", mx.nd.ones((2,)))          # the store still works afterwards
        kv.push("ok", mx.nd.ones((2,)))
        out = mx.nd.zeros((2,)); kv.pull("ok", out=out)
        assert out.asnumpy().tolist() == [2.0, 2.0]
        print("rank %d ok" % r)
    """, args=(kind,))
    expect_ok(proc)
    for r in range(2):
        message = (tmp_path / ("error_%d.txt" % r)).read_text()
        assert "'weight'" in message and "disagree" in message, message
        if kind == "shape":
            assert "(3,)" in message and "(4,)" in message, message
        if kind == "key":
            assert "'bias'" in message, message
        if kind == "dtype":
            assert "float64" in message and "float32" in message, message


def test_example_trains_the_mlp_on_two_ranks(tmp_path):
    """examples/train_mlp_distributed.py: the loss falls; the ranks agree."""
    example = os.path.join(ROOT, "examples", "train_mlp_distributed.py")
    if not os.path.exists(example):
        pytest.skip("the examples/ directory is not shipped here")
    proc = run_ranks(tmp_path, open(example).read(), args=("--steps", "12"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    losses = [float(ln.split()[-1]) for ln in proc.stdout.splitlines()
              if ln.startswith("step")]
    assert len(losses) >= 3 and losses[-1] < losses[0], proc.stdout
    assert "on 2 rank(s)" in proc.stdout


def test_one_rank_dist_sync_without_launcher(tmp_path):
    """A 'dist_sync' store in a plain process is a job of one rank."""
    code = ("import fastgrad as mx; kv = mx.kv.create('dist_sync'); "
            "kv.init(0, mx.nd.ones((2,))); kv.push(0, mx.nd.ones((2,)) * 3); "
            "o = mx.nd.zeros((2,)); kv.pull(0, out=o); print(kv.num_workers, o.asnumpy())")
    # From an empty directory: python -c puts the working directory first on sys.path.
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "[3.", "3.]"]
