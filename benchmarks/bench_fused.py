"""The fused LSTM cell (Note [The fused LSTM cell] in fastgrad/_table_fused.py) in a training
step: workload 9's LSTM (35 steps, batch 32, 64 -> 128, float32) through ``npx.rnn``, forward
and backward, the fastest of ``--rounds`` rounds of ``--steps`` steps, each round in a fresh
process, alternating between the trees given, so that load on the machine hits both alike.

    python benchmarks/bench_fused.py /work/base /work/wt-fused --rounds 5

With ``--callgrind`` it runs one process per tree under valgrind and prints instructions per
step (the steps only, after warm-up), as ``/work/scratch/cg/count.sh`` does for workloads.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

STEPS, BATCH, N_IN, HIDDEN = 35, 32, 64, 128


def build_step():
    """One forward and backward of npx.rnn's LSTM; returns the step function."""
    import numpy as onp
    from fastgrad import autograd, np, npx

    rng = onp.random.default_rng(9)
    size = 4 * HIDDEN * (N_IN + HIDDEN) + 8 * HIDDEN
    params = np.array((rng.standard_normal(size) * 0.1).astype(onp.float32))
    data = np.array(rng.standard_normal((STEPS, BATCH, N_IN)).astype(onp.float32))
    state = np.zeros((1, BATCH, HIDDEN), dtype=onp.float32)
    params.attach_grad()

    def step():
        with autograd.record():
            out = npx.rnn(data=data, parameters=params, state=state, state_cell=state,
                          state_size=HIDDEN, num_layers=1, mode="lstm")
            loss = (out[-1] * out[-1]).sum()
        loss.backward()
        return params.grad

    return step


def child(steps, callgrind):
    step = build_step()
    for _ in range(3):
        step()
    if callgrind:
        subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())],
                       stdout=subprocess.DEVNULL)
        for _ in range(steps):
            step()
        os._exit(0)
    best = float("inf")
    for _ in range(steps):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    print(best)


def run(tree, args, callgrind=False):
    env = dict(os.environ, PYTHONPATH=tree, OPENBLAS_NUM_THREADS="1",
               FASTGRAD_NUM_THREADS="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", str(args.steps)]
    if not callgrind:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        return float(out.stdout.split()[-1])
    with tempfile.TemporaryDirectory() as tmp:
        profile = os.path.join(tmp, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                        "--callgrind-out-file=" + profile] + cmd + ["--callgrind"], env=env,
                       capture_output=True, check=True)
        report = subprocess.run(["callgrind_annotate", profile], capture_output=True,
                                text=True).stdout
        total = next(line for line in report.splitlines() if "PROGRAM TOTALS" in line)
        return int(total.split()[0].replace(",", "")) / args.steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", help="source trees to compare (PYTHONPATH)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.steps, args.callgrind)
    if args.callgrind:
        for tree in args.trees:
            print("%s: %.1f M instructions/step" % (tree, run(tree, args, True) / 1e6))
        return
    best = {tree: float("inf") for tree in args.trees}
    for _ in range(args.rounds):
        for tree in args.trees:
            best[tree] = min(best[tree], run(tree, args))
    for tree in args.trees:
        print("%s: fastest step %.2f ms" % (tree, best[tree] * 1e3))


if __name__ == "__main__":
    main()
