"""Forward+backward of a 3-layer MLP: a bound symbol against the same model recorded each step.

Run with ``python benchmarks/bench_executor.py [--batch 8] [--hidden 64] [--steps 2000]``.
Prints the time per step of each way, the bound executor's forward and backward alone, and the
ratio of the two ways. Not a test: the numbers depend on the machine.

``--workload 2`` (or 8, 9: the MLP, LeNet and LSTM steps of ``compare.py``) times that
workload's ``fastgrad`` and ``fastgrad-exec`` steps instead, in alternating rounds, after
checking that their gradients agree.
"""

import argparse
import os
import sys
import time

import numpy as onp

import fastgrad as mx


def build_symbol():
    x = mx.sym.var("x")
    h = x
    for i in (1, 2):
        w, b = mx.sym.var("w%d" % i), mx.sym.var("b%d" % i)
        h = mx.sym.relu(mx.sym.matmul(h, w) + b)
    w, b = mx.sym.var("w3"), mx.sym.var("b3")
    out = mx.sym.matmul(h, w) + b
    return mx.sym.mean(mx.sym.square(out))


def imperative_loss(p):
    h = p["x"]
    for i in (1, 2):
        h = mx.npx.relu(mx.np.matmul(h, p["w%d" % i]) + p["b%d" % i])
    out = mx.np.matmul(h, p["w3"]) + p["b3"]
    return mx.np.mean(mx.np.square(out))


def params(batch, din, hidden, dout):
    rng = onp.random.default_rng(0)
    shapes = {"x": (batch, din), "w1": (din, hidden), "b1": (hidden,),
              "w2": (hidden, hidden), "b2": (hidden,), "w3": (hidden, dout), "b3": (dout,)}
    return {k: rng.standard_normal(s).astype(onp.float32) * 0.1 for k, s in shapes.items()}


def time_both(f, g, steps, repeats=5):
    """Best time per call of ``f`` and ``g``, measured in alternating rounds (fair under load)."""
    for _ in range(min(50, steps)):
        f()
        g()
    best_f = best_g = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            f()
        t1 = time.perf_counter()
        for _ in range(steps):
            g()
        t2 = time.perf_counter()
        best_f = min(best_f, (t1 - t0) / steps)
        best_g = min(best_g, (t2 - t1) / steps)
    return best_f, best_g


def compare_workload(key, steps):
    """Time workload ``key``'s imperative and bound-executor steps; print both and the ratio."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import workloads as wl

    work = wl.get_workload(key)
    imperative, bound = wl.get_backend("fastgrad"), wl.get_backend("fastgrad-exec")
    if not work.supports(bound):
        raise SystemExit("workload %s has no bound-executor version (try 2, 8 or 9)" % key)
    imperative.load()
    bound.load()
    inputs = work.make_inputs()
    imperative_step, bound_step = work.build(imperative, inputs), work.build(bound, inputs)
    check = wl.check_gradients([g.asnumpy() for g in bound_step()],
                               [g.asnumpy() for g in imperative_step()], work.rtol)
    if not check.ok:
        raise SystemExit("the executor's gradients differ from the imperative ones: %r" % check)
    t_bound, t_imp = time_both(bound_step, imperative_step, steps)
    print("[%s] %s, forward+backward per step" % (work.key, work.title))
    print("  bound executor : %8.1f us" % (t_bound * 1e6))
    print("  imperative     : %8.1f us" % (t_imp * 1e6))
    print("  bound / imperative : %.2f (speed-up %.2fx)" % (t_bound / t_imp, t_imp / t_bound))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--din", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--dout", type=int, default=10)
    ap.add_argument("--steps", type=int, default=None,
                    help="steps per round (default 2000, with --workload 20)")
    ap.add_argument("--workload", default=None,
                    help="time compare.py's workload 2, 8 or 9 instead of the small MLP")
    args = ap.parse_args()
    if args.workload:
        compare_workload(args.workload, args.steps or 20)
        return
    args.steps = args.steps or 2000
    values = params(args.batch, args.din, args.hidden, args.dout)

    ex = build_symbol().bind(mx.cpu(), {k: mx.np.array(v) for k, v in values.items()},
                             grad_req={k: "write" for k in values if k != "x"})

    def bound_step():
        ex.forward(is_train=True)
        ex.backward()

    arrays = {k: mx.np.array(v) for k, v in values.items()}
    for k, a in arrays.items():
        if k != "x":
            a.attach_grad()

    def imperative_step():
        with mx.autograd.record():
            loss = imperative_loss(arrays)
        loss.backward()

    bound_step()
    imperative_step()
    for k, a in arrays.items():
        if k != "x":
            assert onp.array_equal(ex.grad_dict[k].asnumpy(), a.grad.asnumpy()), k

    t_bound, t_imp = time_both(bound_step, imperative_step, args.steps)
    t_fwd, t_bwd = time_both(lambda: ex.forward(is_train=True), ex.backward, args.steps)
    print("3-layer MLP, batch %d, %d-%d-%d-%d, float32, forward+backward per step"
          % (args.batch, args.din, args.hidden, args.hidden, args.dout))
    print("  bound executor : %8.1f us" % (t_bound * 1e6))
    print("    forward      : %8.1f us" % (t_fwd * 1e6))
    print("    backward     : %8.1f us" % (t_bwd * 1e6))
    print("  imperative     : %8.1f us" % (t_imp * 1e6))
    print("  bound / imperative : %.2f (speed-up %.2fx)" % (t_bound / t_imp, t_imp / t_bound))


if __name__ == "__main__":
    main()
