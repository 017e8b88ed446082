"""Gluon training steps, imperative against hybridized, in one process.

Run with ``python benchmarks/gluon_hybridize.py [--net mlp|lenet] [--rounds 30] [--steps 20]``
(for benchmarks, unset ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE``; on a shared machine
``FASTGRAD_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1`` steadies the numbers). The network is
workload 2's MLP (784-256-256-10, batch 128, float32) or workload 8's LeNet (batch 64, 1x28x28)
written with ``gluon.nn`` and trained with ``gluon.Trainer('sgd')`` on
``SoftmaxCrossEntropyLoss``; the two nets start from the same weights. The two steps run in
alternation, ``--steps`` at a time, ``--rounds`` times, and the script prints the fastest time
per step of each (wall and process CPU time) and their ratio.
Not a test: the numbers depend on the machine and its load.
"""

import argparse
import time

import numpy as np

import fastgrad as mx
from fastgrad import autograd, gluon
from fastgrad.gluon import nn


def build(kind, seed):
    mx.random.seed(seed)
    net = nn.HybridSequential()
    with net.name_scope():
        if kind == "lenet":
            net.add(nn.Conv2D(6, 5, activation="relu"), nn.MaxPool2D(2),
                    nn.Conv2D(16, 5, activation="relu"), nn.MaxPool2D(2),
                    nn.Dense(120, activation="relu"), nn.Dense(84, activation="relu"),
                    nn.Dense(10))
        else:
            net.add(nn.Dense(256, activation="relu"), nn.Dense(256, activation="relu"),
                    nn.Dense(10))
    net.initialize(mx.init.Xavier())
    return net


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--net", choices=("mlp", "lenet"), default="mlp")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    batch = 64 if args.net == "lenet" else 128
    shape = (batch, 1, 28, 28) if args.net == "lenet" else (batch, 784)
    X = mx.nd.array(rng.standard_normal(shape).astype(np.float32))
    y = mx.nd.array(rng.integers(0, 10, batch).astype(np.float32))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    nets = {"imperative": build(args.net, 0), "hybridized": build(args.net, 0)}
    for net in nets.values():
        net(X)                                  # deferred shapes
    for p_a, p_b in zip(nets["imperative"].collect_params().values(),
                        nets["hybridized"].collect_params().values()):
        p_b.set_data(p_a.data())
    nets["hybridized"].hybridize()
    trainers = {k: gluon.Trainer(n.collect_params(), "sgd", {"learning_rate": 0.01})
                for k, n in nets.items()}

    def step(key):
        net = nets[key]
        with autograd.record():
            loss = loss_fn(net(X), y)
        loss.backward()
        trainers[key].step(batch)

    for key in nets:
        for _ in range(5):
            step(key)
    wall = {k: float("inf") for k in nets}
    cpu = {k: float("inf") for k in nets}
    for _ in range(args.rounds):
        for key in nets:
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                step(key)
            wall[key] = min(wall[key], (time.perf_counter() - w0) / args.steps)
            cpu[key] = min(cpu[key], (time.process_time() - c0) / args.steps)
    for key in nets:
        print("%-11s wall %8.1f us   cpu %8.1f us" % (key, wall[key] * 1e6, cpu[key] * 1e6))
    print("hybridized / imperative: wall %.3f, cpu %.3f"
          % (wall["hybridized"] / wall["imperative"], cpu["hybridized"] / cpu["imperative"]))


if __name__ == "__main__":
    main()
