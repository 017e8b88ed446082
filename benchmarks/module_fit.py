"""Module.fit against a hand-written executor loop, per batch, in one process.

Run with ``python benchmarks/module_fit.py [--rounds 40] [--batches 5]`` (for benchmarks, unset
``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE``); ``--backend mxnet`` runs the same script on
MXNet 1.9.1 (``import mxnet as mx``). The network is workload 2's MLP (784-256-256-10,
ReLU, ``SoftmaxOutput``, batch 128, float32) trained with SGD (learning rate 0.01): Module.fit
on an ``NDArrayIter`` of ``--batches`` batches (with its accuracy metric, and with none:
``eval_metric=mx.metric.CompositeEvalMetric()``), and the loop a user would write on a
``simple_bind`` executor (copy the batch in, forward, backward, the optimizer's updater on
each parameter; gradients for the parameters only, as Module binds). The three run in
alternation, one epoch at a time, ``--rounds`` times; the script prints the fastest wall and
process CPU time per batch of each and their ratios to the loop (on a loaded machine, run
with ``OPENBLAS_NUM_THREADS=1`` and read the CPU times). Not a test: the numbers depend on
the machine and its load.
"""

import argparse
import importlib
import time

import numpy as np


def network(mx):
    data = mx.sym.var("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=256, name="fc1"),
                          act_type="relu")
    h = mx.sym.Activation(mx.sym.FullyConnected(h, num_hidden=256, name="fc2"),
                          act_type="relu")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=10, name="fc3"),
                                name="softmax")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--backend", default="fastgrad", choices=["fastgrad", "mxnet"])
    args = p.parse_args(argv)
    mx = importlib.import_module(args.backend)
    rng = np.random.default_rng(0)
    n = 128 * args.batches
    X = rng.standard_normal((n, 784)).astype(np.float32)
    Y = rng.integers(0, 10, n).astype(np.float32)
    sizes = {"fc1_weight": (256, 784), "fc2_weight": (256, 256), "fc3_weight": (10, 256)}
    start = {}
    for name, shape in sizes.items():
        start[name] = mx.nd.array(rng.standard_normal(shape).astype(np.float32)
                                  * np.float32(np.sqrt(2.0 / shape[1])))
        start[name.replace("weight", "bias")] = mx.nd.zeros(shape[0])
    optimizer_params = {"learning_rate": 0.01}

    def fit_epoch(metric):
        mod = mx.mod.Module(network(mx))
        train = mx.io.NDArrayIter(X, Y, batch_size=128)
        mod.fit(train, num_epoch=1, arg_params=start, optimizer_params=optimizer_params,
                eval_metric=metric())                                   # warm-up epoch
        state = {"epoch": 1}

        def epoch():
            train.reset()
            mod.fit(train, begin_epoch=state["epoch"], num_epoch=state["epoch"] + 1,
                    eval_metric=metric(), optimizer_params=optimizer_params)
            state["epoch"] += 1
        return epoch

    def loop_epoch():
        reqs = {k: "write" for k in start}
        ex = network(mx).simple_bind(mx.cpu(), data=(128, 784), softmax_label=(128,),
                                     grad_req=reqs)
        for name, value in start.items():
            ex.arg_dict[name][:] = value
        opt = mx.optimizer.create("sgd", rescale_grad=1.0 / 128, **optimizer_params)
        updater = mx.optimizer.get_updater(opt)
        names = [k for k in ex.arg_dict if k not in ("data", "softmax_label")]
        batches = [(mx.nd.array(X[i:i + 128]), mx.nd.array(Y[i:i + 128]))
                   for i in range(0, n, 128)]

        def epoch():
            for x, y in batches:
                ex.arg_dict["data"][:] = x
                ex.arg_dict["softmax_label"][:] = y
                ex.forward(is_train=True)
                ex.backward()
                for i, name in enumerate(names):
                    updater(i, ex.grad_dict[name], ex.arg_dict[name])
            ex.outputs[0].wait_to_read()
        epoch()
        return epoch

    import logging
    import warnings
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore")         # fit on an initialized module warns, as MXNet
    runs = {"hand-written executor loop": loop_epoch(),
            "Module.fit, no metric": fit_epoch(lambda: mx.metric.CompositeEvalMetric()),
            "Module.fit, accuracy": fit_epoch(lambda: "acc")}
    wall = {k: [] for k in runs}
    cpu = {k: [] for k in runs}
    for _ in range(args.rounds):
        for key, epoch in runs.items():
            t, c = time.perf_counter(), time.process_time()
            epoch()
            mx.nd.waitall()                 # MXNet runs asynchronously
            wall[key].append((time.perf_counter() - t) / args.batches)
            cpu[key].append((time.process_time() - c) / args.batches)
    loop_wall = min(wall["hand-written executor loop"])
    loop_cpu = min(cpu["hand-written executor loop"])
    for key in runs:
        print("%s: %-27s wall %6.2f ms/batch (x%.3f), CPU %6.2f ms/batch (x%.3f)"
              % (args.backend, key, min(wall[key]) * 1e3, min(wall[key]) / loop_wall,
                 min(cpu[key]) * 1e3, min(cpu[key]) / loop_cpu))


if __name__ == "__main__":
    main()
