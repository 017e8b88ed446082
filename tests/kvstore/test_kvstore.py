"""The KVStore in one process ('local', 'device') and what needs no MPI runtime."""

import os
import subprocess
import sys

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd

nd = mx.nd


def test_local_semantics():
    kv = mx.kv.create("local")
    assert (kv.type, kv.rank, kv.num_workers) == ("local", 0, 1)
    assert mx.kvstore.create("device").type == "device"
    value = nd.array([1.0, 2.0])
    kv.init("w", value)
    value[:] = 0                                  # the store keeps its own copy
    out = nd.zeros((2,))
    kv.pull("w", out=out)
    assert out.asnumpy().tolist() == [1.0, 2.0]
    # a push of several "devices" sums them and replaces the stored value
    kv.push("w", [nd.array([1.0, 1.0]), nd.array([2.0, 3.0]), nd.array([0.5, 0.5])])
    outs = [nd.zeros((2,)), nd.zeros((2,))]
    kv.pull("w", out=outs)
    assert [o.asnumpy().tolist() for o in outs] == [[3.5, 4.5]] * 2
    # keys may be ints; 7 and '7' are different keys; lists of keys
    kv.init([7, "7"], [nd.ones((3,)), nd.zeros((3,))])
    kv.pushpull([7, "7"], [nd.ones((3,)) * 2, nd.ones((3,)) * 4],
                out=[nd.zeros((3,)), nd.zeros((3,))])
    a, b = nd.zeros((3,)), nd.zeros((3,))
    kv.pull([7, "7"], out=[a, b])
    assert a.asnumpy().tolist() == [2.0] * 3 and b.asnumpy().tolist() == [4.0] * 3
    g = nd.ones((3,)) * 5
    kv.pushpull(7, g)                             # no out: into the value
    assert g.asnumpy().tolist() == [5.0] * 3
    big = nd.zeros((6,))
    kv.pushpull(7, [nd.ones((3,)), nd.ones((3,))], out=big[::2])   # a strided out
    assert big.asnumpy().tolist() == [2.0, 0.0, 2.0, 0.0, 2.0, 0.0]
    kv.pull(7, out=a)
    assert a.asnumpy().tolist() == [2.0] * 3
    c = nd.zeros((2,))
    kv.broadcast("b", nd.array([8.0, 9.0]), out=c)
    assert c.asnumpy().tolist() == [8.0, 9.0]


def test_local_updater_and_optimizer_states(tmp_path):
    kv = mx.kv.create("local")
    kv.init(0, nd.zeros((2,), dtype="float64"))
    seen = []

    def update(key, grad, stored):
        seen.append(key)
        stored += grad * 2

    kv._set_updater(update)
    kv.push(0, nd.ones((2,), dtype="float64"))
    out = nd.zeros((2,), dtype="float64")
    kv.pull(0, out=out)
    assert seen == [0] and out.asnumpy().tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="no optimizer"):
        kv.save_optimizer_states(str(tmp_path / "s"))

    kv.set_optimizer(mx.optimizer.Adam(learning_rate=0.1))
    for _ in range(3):
        kv.push(0, nd.array([1.0, -2.0], dtype="float64"))
    path = str(tmp_path / "adam.states")
    kv.save_optimizer_states(path)
    kv.pull(0, out=out)
    after3 = out.asnumpy().copy()
    kv.push(0, nd.array([0.5, 0.5], dtype="float64"))
    kv.pull(0, out=out)
    after4 = out.asnumpy().copy()
    # a second store from the same point with the loaded states takes the same 4th step
    kv2 = mx.kv.create("local")
    kv2.init(0, nd.array(after3, dtype="float64"))
    kv2.set_optimizer(mx.optimizer.Adam(learning_rate=0.1))
    kv2.load_optimizer_states(path)
    kv2._updater.optimizer._index_update_count[0] = 3   # the counts live in the optimizer
    kv2.push(0, nd.array([0.5, 0.5], dtype="float64"))
    kv2.pull(0, out=out)
    onp.testing.assert_array_equal(out.asnumpy(), after4)
    kv.save_optimizer_states(path, dump_optimizer=True)
    kv3 = mx.kv.create("local")
    kv3.set_optimizer(mx.optimizer.SGD())
    kv3.load_optimizer_states(path)
    assert type(kv3._updater.optimizer).__name__ == "Adam"


def test_local_errors_name_the_key():
    kv = mx.kv.create("local")
    kv.init("w", nd.ones((2, 3)))
    with pytest.raises(KeyError, match="key 'missing' was not initialised"):
        kv.push("missing", nd.ones((1,)))
    with pytest.raises(KeyError, match="key 5 was not initialised"):
        kv.pull(5, out=nd.ones((1,)))
    with pytest.raises(ValueError, match=r"key 'w' holds shape \(2, 3\).*shape \(3, 2\)"):
        kv.push("w", nd.ones((3, 2)))
    with pytest.raises(ValueError, match="key 'w' holds .* dtype float32.*float64"):
        kv.pull("w", out=nd.ones((2, 3), dtype="float64"))
    with pytest.raises(ValueError, match="already initialised"):
        kv.init("w", nd.ones((2, 3)))
    with pytest.raises(ValueError, match="3 keys need a list of 3 values"):
        kv.push(["a", "b", "c"], [nd.ones((1,))])
    with pytest.raises(ValueError, match="appears twice"):
        kv.push(["w", "w"], [nd.ones((2, 3))] * 2)
    with pytest.raises(TypeError, match="must be an int or a str"):
        kv.init(2.5, nd.ones((1,)))
    with pytest.raises(TypeError, match="fastgrad array"):
        kv.push("w", onp.ones((2, 3)))
    with pytest.raises(TypeError, match="out is required"):
        kv.pull("w")
    with pytest.raises(NotImplementedError, match="row_sparse"):
        kv.row_sparse_pull("w", out=nd.ones((2, 3)))
    with pytest.raises(NotImplementedError, match="compression is not supported"):
        kv.set_gradient_compression({"type": "2bit"})
    with pytest.raises(TypeError, match="expected an Optimizer"):
        kv.set_optimizer("sgd")
    for name in ("dist_async", "dist_device_async"):
        with pytest.raises(NotImplementedError, match="not supported.*dist_sync"):
            mx.kv.create(name)
    with pytest.raises(ValueError, match="unknown store type 'nope'"):
        mx.kv.create("nope")


def test_push_inside_record_is_not_recorded():
    """The store's arithmetic and the optimizer never enter the tape; writing the new weights
    into an array a recorded graph saved makes that graph's backward refuse (versions)."""
    kv = mx.kv.create("local")
    w = mx.np.array([1.0, 2.0])
    w.attach_grad()
    kv.init(0, w)
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.5))
    with autograd.record():
        y = (w * w).sum()
        kv.pushpull(0, w * 1.0, out=w)          # a value with history, pulled into w
        assert autograd.is_recording()
    onp.testing.assert_allclose(w.asnumpy(), [0.5, 1.0])
    with pytest.raises(RuntimeError, match="modified|written|version|in place|in-place"):
        y.backward()


def test_import_fastgrad_does_not_import_mpi4py(tmp_path):
    # Each python -c runs from an empty directory: it puts the working directory first on
    # sys.path, and a checkout's uncompiled package must not shadow the installed one.
    code = ("import sys, fastgrad as mx; mx.kv.create('local'); "
            "print('mpi4py' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_without_mpi4py_the_error_says_what_to_install(tmp_path):
    """With mpi4py unimportable, creating a distributed store and the launcher say what to
    install."""
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "import fastgrad as mx\n"
            "try:\n"
            "    mx.kv.create('dist_sync')\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "kvstore.create('dist_sync')" in out.stdout
    assert 'pip install "fastgrad[distributed]"' in out.stdout
    env = dict(os.environ, PATH="/nonexistent")
    code = ("import sys; sys.executable = '/nonexistent/python'\n"
            "from fastgrad.launch import main\n"
            "sys.exit(main(['-n', '2', 'python', 'x.py']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, env=env)
    assert out.returncode == 2
    assert "no mpiexec found" in out.stderr and "fastgrad[distributed]" in out.stderr


def test_launcher_thread_share():
    from fastgrad.launch import thread_env
    env = thread_env(2, {"PATH": "/bin"}, 8)
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "4"
    assert thread_env(4, {}, 2)["OMP_NUM_THREADS"] == "1"
    assert thread_env(2, {}, None)["MKL_NUM_THREADS"] == "1"
    mine = thread_env(2, {"MKL_NUM_THREADS": "3"}, 8)      # the user's choice is kept
    assert mine == {"MKL_NUM_THREADS": "3"}


def test_launcher_command_line():
    from fastgrad.launch import command_line
    assert command_line("/x/mpiexec", 3, ["python", "t.py", "--a"]) == [
        "/x/mpiexec", "-n", "3", sys.executable, "t.py", "--a"]
    assert command_line("/x/mpiexec", 2, ["t.py"]) == ["/x/mpiexec", "-n", "2",
                                                        sys.executable, "t.py"]
    assert command_line("mpiexec", 2, ["./prog"], ["-bind-to", "none"]) == [
        "mpiexec", "-bind-to", "none", "-n", "2", "./prog"]
