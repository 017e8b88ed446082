"""Module.fit with kvstore='dist_sync' on 2 MPI ranks equals one process on the whole batch.

Each rank reads half of every batch; rank 1 starts from other parameters (the store
broadcasts rank 0's, as MXNet's _initialize_kvstore). Skipped without mpi4py/mpiexec, as
tests/test_distributed.py."""

import os
import subprocess
import sys
import textwrap

import pytest

from fastgrad.launch import find_mpiexec

try:
    import mpi4py  # noqa: F401
    HAVE_MPI = find_mpiexec() is not None
    WHY = "mpiexec not found"
except ImportError:
    HAVE_MPI, WHY = False, "mpi4py is not installed (pip install \"fastgrad[distributed]\")"

pytestmark = pytest.mark.skipif(not HAVE_MPI, reason=WHY)

PROGRAM = """
    import numpy as onp
    import fastgrad as mx

    rng = onp.random.RandomState(0)
    X = rng.randn(32, 6)
    Y = rng.randint(0, 3, 32).astype("float64")
    INIT = {"fc1_weight": rng.randn(8, 6) * .5, "fc1_bias": rng.randn(8) * .1,
            "fc2_weight": rng.randn(3, 8) * .5, "fc2_bias": rng.randn(3) * .1}

    def net():
        data = mx.sym.var("data")
        h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8, name="fc1"),
                              act_type="tanh")
        return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=3, name="fc2"),
                                    name="softmax")

    def fit(x, y, batch, kvstore, scale):
        it = mx.io.NDArrayIter(mx.nd.array(x, dtype="float64"),
                               mx.nd.array(y, dtype="float64"), batch)
        mod = mx.mod.Module(net())
        args = {k: mx.nd.array(v * scale, dtype="float64") for k, v in INIT.items()}
        mod.fit(it, num_epoch=2, kvstore=kvstore, arg_params=args, optimizer="sgd",
                optimizer_params={"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01})
        return mod, {k: v.asnumpy() for k, v in mod.get_params()[0].items()}

    kv = mx.kv.create("dist_sync")
    rank, n = kv.rank, kv.num_workers
    order = onp.arange(32).reshape(4, 8)[:, rank::n].reshape(-1)
    mod, mine = fit(X[order], Y[order], 4, kv, 1.0 if rank == 0 else 3.0)
    assert mod._update_on_kvstore and mod._optimizer.rescale_grad == 1.0 / 8
    _, whole = fit(X, Y, 8, None, 1.0)
    worst = max(abs(mine[k] - whole[k]).max() for k in whole)
    assert worst < 1e-12, worst
    print("rank %d ok %.1e" % (rank, worst))
"""


def test_dist_sync_fit_equals_one_process(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(PROGRAM))
    proc = subprocess.run([sys.executable, "-m", "fastgrad.launch", "-n", "2", sys.executable,
                           str(prog)], capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, PYTHONUNBUFFERED="1"), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in range(2):
        assert "rank %d ok" % rank in proc.stdout, proc.stdout + proc.stderr
