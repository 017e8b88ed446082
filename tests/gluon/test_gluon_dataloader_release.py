"""Dropping a multi-worker DataLoader after one batch of large batches must not hang
(MXNet 1.9.1's test_multi_worker_dataloader_release_pool hung on fastgrad: a worker terminated
while writing a batch left half a message in the result pipe). Run in a child process so a
regression fails on the timeout instead of hanging the suite."""

import subprocess
import tempfile
import sys
import textwrap

CHILD = textwrap.dedent("""
    import numpy as np
    import fastgrad as mx
    rng = np.random.default_rng(0)
    for _ in range(5):
        A = rng.random((400, 4000))            # a batch of 8 rows is 256 KB: over a pipe's buffer
        loader = mx.gluon.data.DataLoader(A, batch_size=8, num_workers=4)
        batches = iter(loader)
        first = next(batches)
        assert first.shape == (8, 4000), first.shape
        assert np.array_equal(first.asnumpy(), A[:8].astype(first.dtype)), "first batch"
        del batches, loader
    print("released")
""")


def test_dropping_a_loader_of_large_batches_after_one_batch_does_not_hang():
    # in the temporary folder: from a checkout's root, python -c would import the source tree
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=120, cwd=tempfile.gettempdir())
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "released"
    assert "Error" not in done.stderr, done.stderr[-2000:]
