"""Train a small classifier with fastgrad and check its gradients: ``python -m fastgrad.demo``.

The data are three interleaved spirals generated here (no downloads). A two-layer network is
trained with plain SGD for a few hundred steps, printing the loss as it falls, and the
autograd gradients are then compared with central finite differences in float64.
"""

import argparse
import sys
import time

import numpy as onp

import fastgrad as mx
from fastgrad import autograd, np, npx


def spirals(n_per_class=100, n_classes=3, noise=0.2, seed=0):
    """Points on ``n_classes`` interleaved spiral arms, with integer labels."""
    rng = onp.random.default_rng(seed)
    xs, ys = [], []
    for k in range(n_classes):
        r = onp.linspace(0.05, 1.0, n_per_class)
        t = onp.linspace(k * 4.0, (k + 1) * 4.0, n_per_class) + rng.normal(0, noise, n_per_class)
        xs.append(onp.stack([r * onp.sin(t), r * onp.cos(t)], axis=1))
        ys.append(onp.full(n_per_class, k))
    return onp.concatenate(xs), onp.concatenate(ys)


def init_params(sizes, dtype, seed=1):
    rng = onp.random.default_rng(seed)
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        w = np.array(rng.normal(0, onp.sqrt(2.0 / n_in), (n_in, n_out)).astype(dtype))
        b = np.array(onp.zeros(n_out, dtype=dtype))
        params += [w, b]
    return params


def loss_fn(params, x, y):
    """Mean softmax cross-entropy of a ReLU network (``npx.softmax_cross_entropy`` sums)."""
    h = x
    for i in range(0, len(params) - 2, 2):
        h = npx.relu(h @ params[i] + params[i + 1])
    logits = h @ params[-2] + params[-1]
    return npx.softmax_cross_entropy(logits, y) / len(y)


def gradient_check(params, x, y, n_checks=12, eps=1e-6, seed=2):
    """Largest relative error between autograd and central differences (float64)."""
    params = [np.array(onp.asarray(p).astype(onp.float64)) for p in params]
    x = np.array(onp.asarray(x).astype(onp.float64))
    for p in params:
        p.attach_grad()
    with autograd.record():
        loss = loss_fn(params, x, y)
    loss.backward()
    rng = onp.random.default_rng(seed)
    worst = 0.0
    for _ in range(n_checks):
        k = int(rng.integers(len(params)))
        p = params[k]
        idx = tuple(int(rng.integers(s)) for s in p.shape)
        data = onp.asarray(p)
        old = data[idx]
        data[idx] = old + eps
        up = float(loss_fn(params, x, y))
        data[idx] = old - eps
        down = float(loss_fn(params, x, y))
        data[idx] = old
        numeric = (up - down) / (2 * eps)
        analytic = float(p.grad.asnumpy()[idx])
        worst = max(worst, abs(numeric - analytic) / max(1e-8, abs(numeric) + abs(analytic)))
    return worst


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--hidden", type=int, default=64)
    args = parser.parse_args(argv)

    xs, ys = spirals()
    x = np.array(xs.astype(onp.float32))
    params = init_params([2, args.hidden, args.hidden, 3], onp.float32)
    for p in params:
        p.attach_grad()

    print("fastgrad %s: training a 2-%d-%d-3 ReLU network on %d spiral points"
          % (mx.__version__, args.hidden, args.hidden, len(ys)))
    start = time.perf_counter()
    first = last = None
    for step in range(args.steps + 1):
        with autograd.record():
            loss = loss_fn(params, x, ys)
        loss.backward()
        for p in params:
            p -= args.lr * p.grad
        value = float(loss)
        first = value if first is None else first
        last = value
        if step % (args.steps // 10 or 1) == 0:
            print("  step %4d  loss %.4f" % (step, value))
    elapsed = time.perf_counter() - start
    h = x
    for i in range(0, len(params) - 2, 2):
        h = npx.relu(h @ params[i] + params[i + 1])
    accuracy = float((onp.asarray(h @ params[-2] + params[-1]).argmax(1) == ys).mean())
    print("trained in %.2f s (%.2f ms/step); loss %.4f -> %.4f, training accuracy %.1f%%"
          % (elapsed, 1e3 * elapsed / (args.steps + 1), first, last, 100 * accuracy))

    worst = gradient_check(params, xs, ys)
    ok = worst < 1e-5 and last < first
    print("gradient check (autograd vs central differences, float64): max relative error "
          "%.2e -> %s" % (worst, "passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
