"""gluon.Trainer with ``kvstore='dist_sync'`` on 2 MPI ranks: data-parallel training equals
one process on the whole batch. Each program runs through ``python -m fastgrad.launch -n 2``
with a timeout, so a hang fails the test instead of stalling the suite.

Skipped when mpi4py or mpiexec is missing (``pip install "fastgrad[distributed]"``), as
tests/kvstore/test_distributed.py.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _helpers import expect_ok, requires_mpi, run_ranks  # noqa: E402

pytestmark = requires_mpi

PROGRAM = """
import sys
import numpy as onp
import fastgrad as mx
from fastgrad import autograd, gluon
from fastgrad.gluon import nn

optimizer, options, update_on_kvstore = sys.argv[1], eval(sys.argv[2]), eval(sys.argv[3])
kind = sys.argv[4]
STEPS, BATCH = 8, 16
rng = onp.random.default_rng(0)
X = rng.standard_normal((STEPS, BATCH, 6)); Y = rng.standard_normal((STEPS, BATCH, 3))


def make_net(seed):
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="tanh", in_units=6, dtype="float64"),
            nn.Dense(3, in_units=8, dtype="float64"))
    net.initialize(mx.init.Normal(0.5))
    values = onp.random.default_rng(seed)
    for name, p in sorted(net.collect_params().items()):
        p.set_data(mx.nd.array(values.standard_normal(p.shape) * 0.5, dtype="float64"))
    return net


def train(net, trainer, lo, hi):
    for step in range(STEPS):
        x = mx.nd.array(X[step, lo:hi], dtype="float64")
        y = mx.nd.array(Y[step, lo:hi], dtype="float64")
        with autograd.record():
            loss = ((net(x) - y) ** 2).sum()
        loss.backward()
        trainer.step(BATCH)            # the batch over all workers
    return values(net)


def values(net):
    # in the order the layers were added (the two nets' names differ: dense0_ vs dense2_)
    return [p.data().asnumpy() for p in net.collect_params().values()]


kv = mx.kv.create(kind)
rank, n = kv.rank, kv.num_workers
assert n == 2
net = make_net(seed=100)
trainer = gluon.Trainer(net.collect_params(), optimizer, dict(options), kvstore=kv,
                        update_on_kvstore=update_on_kvstore)
half = BATCH // n
got = train(net, trainer, rank * half, (rank + 1) * half)
assert trainer._kvstore is kv
if kind == "horovod":      # a store that only sums: the Trainer's updater runs the optimizer
    assert not trainer._distributed and trainer._update_on_kvstore is False
else:
    assert trainer._distributed
    assert trainer._update_on_kvstore is (update_on_kvstore is not False)

reference_net = make_net(seed=100)
reference = gluon.Trainer(reference_net.collect_params(), optimizer, dict(options))
expect = train(reference_net, reference, 0, BATCH)
assert reference._kvstore is None
assert len(got) == len(expect) == 4
worst = max(float(onp.abs(g - e).max()) for g, e in zip(got, expect))
scale = max(float(onp.abs(e).max()) for e in expect)
assert worst <= 1e-12 * max(scale, 1.0), (rank, worst)
start = values(make_net(seed=100))
assert min(float(onp.abs(g - s).max()) for g, s in zip(got, start)) > 1e-3, "nothing trained"

if kind != "horovod" and update_on_kvstore is not False:
    try:
        trainer.step(BATCH // 2)
    except UserWarning as e:
        assert "batch_size" in str(e)
    else:
        raise AssertionError("a changed batch_size with update_on_kvstore went unnoticed")
if kind != "horovod":
    try:
        trainer._reset_kvstore()
    except RuntimeError as e:
        assert "Cannot reset distributed KVStore" in str(e)
    else:
        raise AssertionError("reset of a distributed store went through")

# Rank 1 starting from other weights: the first step broadcasts rank 0's weights (after that
# step's gradients were computed, as in MXNet), so from then on the ranks hold the same
# weights, bit for bit.
from mpi4py import MPI
other = make_net(seed=100 + 7 * rank)
trainer = gluon.Trainer(other.collect_params(), optimizer, dict(options),
                        kvstore=mx.kv.create(kind), update_on_kvstore=update_on_kvstore)
mine = train(other, trainer, rank * half, (rank + 1) * half)
theirs = MPI.COMM_WORLD.allgather(mine)
assert all(onp.array_equal(a, b) for a, b in zip(theirs[0], theirs[1])), rank
print("rank %d ok" % rank, flush=True)
"""


@pytest.mark.parametrize("kind,optimizer,options,update_on_kvstore", [
    ("dist_sync", "sgd", {"learning_rate": 0.05, "momentum": 0.9, "wd": 0.01}, None),
    ("dist_sync", "sgd", {"learning_rate": 0.05, "momentum": 0.9, "wd": 0.01}, False),
    ("dist_device_sync", "adam", {"learning_rate": 0.01, "wd": 0.001}, None),
    ("horovod", "nag", {"learning_rate": 0.05, "momentum": 0.9, "wd": 0.01}, None),
])
def test_dist_sync_trainer_equals_one_process_on_the_whole_batch(tmp_path, kind, optimizer,
                                                                 options, update_on_kvstore):
    """float64, 8 steps of a 2-layer MLP, half of each batch per rank: every parameter
    equals the 1-process run within 1e-12 on both ranks; a rank started from other weights
    gets rank 0's at the first step."""
    proc = run_ranks(tmp_path, PROGRAM,
                     args=(optimizer, repr(options), repr(update_on_kvstore), kind))
    expect_ok(proc)
