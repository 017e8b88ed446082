"""Data-parallel training of the benchmarks' MLP (784-256-256-10) with a KVStore and an optimizer.

Run on two ranks (``pip install "fastgrad[distributed]"`` first)::

    python -m fastgrad.launch -n 2 python examples/train_mlp_distributed.py

or in one process with ``--kvstore local``. Every rank takes its share of each global batch,
computes the gradients of its part of the loss, and ``kv.pushpull`` sums them over the ranks;
the store runs SGD with momentum on the sum and writes the new weights back into every rank's
parameters, so all ranks hold the same model. The data is a synthetic classification task (the
labels of a fixed random "teacher" network), so the loss falls. Rank 0 prints it.
"""

import argparse
import time

import numpy as onp

import fastgrad as mx
from fastgrad import autograd, np, npx

SIZES = (784, 256, 256, 10)


def make_data(n, seed=0):
    """Inputs and the labels a fixed random two-layer teacher gives them."""
    rng = onp.random.default_rng(seed)
    x = rng.standard_normal((n, SIZES[0])).astype(onp.float32)
    teacher = rng.standard_normal((SIZES[0], SIZES[-1])).astype(onp.float32)
    labels = onp.argmax(onp.tanh(x @ teacher), axis=1)
    return x, onp.eye(SIZES[-1], dtype=onp.float32)[labels]


def init_params(seed=1):
    rng = onp.random.default_rng(seed)
    params = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        params.append(np.array(rng.standard_normal((n_in, n_out)) * onp.sqrt(2.0 / n_in),
                               dtype="float32"))
        params.append(np.zeros(n_out, dtype="float32"))
    return params


def loss_fn(params, x, onehot, global_batch):
    """This rank's part of the mean cross-entropy over the global batch."""
    w1, b1, w2, b2, w3, b3 = params
    h = npx.relu(np.dot(x, w1) + b1)
    h = npx.relu(np.dot(h, w2) + b2)
    logp = npx.log_softmax(np.dot(h, w3) + b3)
    return -(logp * onehot).sum() / global_batch


def train(kvstore="dist_sync", steps=30, batch=128, lr=0.1, log_every=5, data_size=4096):
    kv = mx.kv.create(kvstore)
    rank, workers = kv.rank, kv.num_workers
    loss_sum = mx.kv.create("horovod") if workers > 1 else None   # a plain allreduce
    if batch % workers:
        raise ValueError("the batch (%d) must split evenly over %d workers" % (batch, workers))
    x_all, y_all = make_data(data_size)
    params = init_params()
    keys = list(range(len(params)))
    kv.init(keys, params)                        # every rank starts from rank 0's weights
    kv.pull(keys, out=params)
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=lr, momentum=0.9, wd=1e-4))
    for p in params:
        p.attach_grad()
    share = batch // workers
    losses, start = [], time.perf_counter()
    for step in range(steps):
        lo = (step * batch) % (data_size - batch + 1) + rank * share
        x, y = np.array(x_all[lo:lo + share]), np.array(y_all[lo:lo + share])
        with autograd.record():
            loss = loss_fn(params, x, y, batch)
        loss.backward()
        # sum the gradients over the ranks; the store updates the weights and returns them
        kv.pushpull(keys, [p.grad for p in params], out=params)
        total = np.array([float(loss)], dtype="float64")
        if loss_sum is not None:                 # the global loss, for printing only
            loss_sum.pushpull("loss", total)
        losses.append(float(total[0]))
        if rank == 0 and (step % log_every == 0 or step == steps - 1):
            print("step %3d  loss %.4f" % (step, losses[-1]), flush=True)
    elapsed = time.perf_counter() - start
    if rank == 0:
        print("%d steps on %d rank(s): %.1f ms per step" % (steps, workers,
                                                             1e3 * elapsed / steps))
    return losses


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kvstore", default="dist_sync")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args(argv)
    losses = train(args.kvstore, args.steps, args.batch, args.lr)
    first, last = onp.mean(losses[:3]), onp.mean(losses[-3:])
    if last >= first:
        raise SystemExit("the loss did not fall: %.4f -> %.4f" % (first, last))


if __name__ == "__main__":
    main()
