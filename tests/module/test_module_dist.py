"""Module.fit with kvstore='dist_sync' on 2 MPI ranks equals one process on the whole batch.

Each rank reads half of every batch; rank 1 starts from other parameters (the store
broadcasts rank 0's, as MXNet's _initialize_kvstore). Skipped without mpi4py/mpiexec, as
tests/kvstore/test_distributed.py."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _helpers import expect_ok, requires_mpi, run_ranks  # noqa: E402

pytestmark = requires_mpi

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
    expect_ok(run_ranks(tmp_path, PROGRAM))
