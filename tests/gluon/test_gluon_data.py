"""gluon.data: datasets, samplers and the DataLoader (MXNet 1.9.1's behaviour).

Expected values come from the definitions (index arithmetic) or from MXNet 1.9.1 runs noted
beside them. Tests with worker processes use 2 workers, tiny data and timeouts; the ones
that kill processes run in a child interpreter so that a hang fails instead of stalling.
"""

import os
import signal
import subprocess
import tempfile
import sys
import textwrap
import time
from collections import namedtuple

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import gluon
from fastgrad import numpy_extension as npx

data = gluon.data


# ---------------------------------------------------------------- datasets

def test_array_dataset_items_and_loader():
    X = onp.random.RandomState(0).uniform(size=(10, 20))
    Y = onp.random.RandomState(1).uniform(size=(10,))
    dataset = data.ArrayDataset(X, Y)
    assert len(dataset) == 10
    x, y = dataset[3]
    onp.testing.assert_array_equal(x, X[3])
    assert y == Y[3]
    for i, (bx, by) in enumerate(data.DataLoader(dataset, 2)):
        assert isinstance(bx, mx.nd.NDArray) and isinstance(by, mx.nd.NDArray)
        onp.testing.assert_array_equal(bx.asnumpy(), X[2 * i:2 * i + 2])
        onp.testing.assert_array_equal(by.asnumpy(), Y[2 * i:2 * i + 2])
    single = data.ArrayDataset(X)
    onp.testing.assert_array_equal(single[4], X[4])     # one array: the items themselves
    batches = list(data.DataLoader(single, 4))
    assert [b.shape for b in batches] == [(4, 20), (4, 20), (2, 20)]


def test_array_dataset_mixed_sources_and_1d_ndarray():
    # MXNet turns a 1-D NDArray into NumPy, so its items are NumPy scalars:
    # MXNet 1.9.1 prints ['float32', 'float64', 'int'] for these three items.
    dataset = data.ArrayDataset(mx.nd.arange(4), onp.arange(4.0), [5, 6, 7, 8])
    items = dataset[1]
    assert [type(v).__name__ for v in items] == ["float32", "float64", "int"]
    assert items == (1.0, 1.0, 6)
    two_d = data.ArrayDataset(mx.nd.ones((3, 2)))
    assert isinstance(two_d[0], mx.nd.NDArray) and two_d[0].shape == (2,)


def test_array_dataset_bad_input():
    with pytest.raises(ValueError, match=r"same length.*array\[1\] has 4"):
        data.ArrayDataset(onp.arange(3), onp.arange(4))
    with pytest.raises(ValueError, match="at least 1"):
        data.ArrayDataset()


def test_simple_dataset_and_iteration():
    dataset = data.SimpleDataset(list("abc"))
    assert len(dataset) == 3 and dataset[2] == "c"
    assert list(dataset) == ["a", "b", "c"]


def test_transform_lazy_eager_and_tuples():
    calls = []

    def double(x):
        calls.append(x)
        return 2 * x

    base = data.SimpleDataset([1, 2, 3])
    lazy = base.transform(double)
    assert calls == []
    assert lazy[1] == 4 and calls == [2]
    eager = base.transform(double, lazy=False)
    assert calls == [2, 1, 2, 3]
    assert list(eager) == [2, 4, 6] and isinstance(eager, data.SimpleDataset)
    pairs = data.ArrayDataset([1, 2], [10, 20])
    # a tuple sample is unpacked into the function's arguments
    assert pairs.transform(lambda x, y: x + y)[1] == 22
    assert pairs.transform_first(lambda x: -x)[1] == (-2, 20)
    assert base.transform_first(lambda x: -x)[2] == -3   # a non-tuple sample


def test_filter():
    a = data.SimpleDataset(list(range(100)))
    filtered = a.filter(lambda x: x % 10 == 0)
    assert len(filtered) == 10 and list(filtered) == list(range(0, 100, 10))
    # filtering a transformed dataset sees the transformed samples
    shifted = a.transform(lambda x: x + 1).filter(lambda x: x % 10 == 0)
    assert list(shifted) == list(range(10, 101, 10))


def test_shard_sizes_and_cover():
    a = data.SimpleDataset(list(range(9)))
    shards = [list(a.shard(4, i)) for i in range(4)]
    # the first len % n shards get one more sample (MXNet 1.9.1: [[0,1,2],[3,4],[5,6],[7,8]])
    assert shards == [[0, 1, 2], [3, 4], [5, 6], [7, 8]]
    assert list(data.SimpleDataset([]).shard(2, 1)) == []
    with pytest.raises(ValueError, match="out of range"):
        a.shard(4, 4)
    with pytest.raises(ValueError, match="num_shards"):
        a.shard(0, 0)


def test_take_and_sample():
    a = data.SimpleDataset(list(range(100)))
    assert len(a.take(1000)) == 100 and len(a.take(None)) == 100
    assert list(a.take(10)) == list(range(10))
    assert list(a.transform(lambda x: x * 10).take(3)) == [0, 10, 20]
    assert list(a.sample(data.IntervalSampler(100, 40, rollover=False))) == [0, 40, 80]
    with pytest.raises(TypeError, match="Sampler"):
        a.sample([1, 2])


# ---------------------------------------------------------------- samplers

def test_samplers():
    assert list(data.SequentialSampler(10)) == list(range(10))
    assert list(data.SequentialSampler(3, start=5)) == [5, 6, 7]
    onp.random.seed(0)
    first = list(data.RandomSampler(10))
    assert sorted(first) == list(range(10))
    onp.random.seed(0)
    assert list(data.RandomSampler(10)) == first        # NumPy's global generator
    keep = data.BatchSampler(data.SequentialSampler(10), 3, "keep")
    assert list(keep) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]] and len(keep) == 4
    discard = data.BatchSampler(data.SequentialSampler(10), 3, "discard")
    assert list(discard) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]] and len(discard) == 3
    fsampler = data.FilterSampler(lambda x: x % 3 == 0, list(range(10)))
    assert list(fsampler) == [0, 3, 6, 9] and len(fsampler) == 4


def test_batch_sampler_rollover_carries_indices():
    rollover = data.BatchSampler(data.SequentialSampler(5), 2, "rollover")
    assert len(rollover) == 2
    assert list(rollover) == [[0, 1], [2, 3]]
    assert len(rollover) == 3                  # index 4 waits for the next pass
    assert list(rollover) == [[4, 0], [1, 2], [3, 4]]
    assert list(rollover) == [[0, 1], [2, 3]]


def test_interval_sampler():
    assert list(data.IntervalSampler(13, 3)) == [0, 3, 6, 9, 12, 1, 4, 7, 10, 2, 5, 8, 11]
    no_rollover = data.IntervalSampler(13, 3, rollover=False)
    assert list(no_rollover) == [0, 3, 6, 9, 12] and len(no_rollover) == 5
    with pytest.raises(ValueError, match="interval"):
        data.IntervalSampler(3, 5)


def test_sampler_bad_arguments():
    with pytest.raises(ValueError, match="batch_size"):
        data.BatchSampler(data.SequentialSampler(3), 0)
    with pytest.raises(ValueError, match="last_batch.*'bad'"):
        data.BatchSampler(data.SequentialSampler(3), 2, "bad")
    with pytest.raises(ValueError, match="length"):
        data.SequentialSampler(-1)


# ---------------------------------------------------------------- batchify

batchify = data.dataloader.default_batchify_fn


def _describe(batch):
    if isinstance(batch, list):
        return [_describe(b) for b in batch]
    return type(batch).__name__, batch.shape, str(batch.dtype)


def test_default_batchify_types_match_mxnet():
    # each expected value printed by MXNet 1.9.1 for the same call
    assert _describe(batchify([1, 2, 3])) == ("NDArray", (3,), "int64")
    assert _describe(batchify([1.5, 2, 3])) == ("NDArray", (3,), "float64")
    assert _describe(batchify([onp.float32(1), onp.float32(2)])) == ("NDArray", (2,), "float32")
    assert _describe(batchify([(onp.ones(2, onp.uint8), 1), (onp.zeros(2, onp.uint8), 2)])) \
        == [("NDArray", (2, 2), "uint8"), ("NDArray", (2,), "int64")]
    nds = [mx.nd.ones((2,), dtype="int32"), mx.nd.zeros((2,), dtype="int32")]
    assert _describe(batchify(nds)) == ("NDArray", (2, 2), "int32")
    assert _describe(batchify([[1, 2], [3, 4]])) == ("NDArray", (2, 2), "int64")
    onp.testing.assert_array_equal(batchify(nds).asnumpy(), [[1, 1], [0, 0]])


def test_default_batchify_np_arrays_under_set_np():
    npx.set_np()
    try:
        batch = batchify([onp.ones(2), onp.zeros(2)])
        assert type(batch) is mx.np.ndarray
    finally:
        npx.reset_np()
    assert type(batchify([onp.ones(2), onp.zeros(2)])) is mx.nd.NDArray


def test_default_batchify_bad_samples():
    with pytest.raises(ValueError, match=r"different shapes.*\(2,\).*\(3,\)"):
        batchify([onp.ones(2), onp.ones(3)])
    with pytest.raises(TypeError, match="batchify_fn"):
        batchify([{"a": 1}, {"a": 2}])
    with pytest.raises(TypeError, match="batchify_fn"):
        batchify(["a", "b"])
    with pytest.raises(ValueError, match="tuples of different lengths"):
        batchify([(1, 2), (1,)])


# ---------------------------------------------------------------- DataLoader

def _as_lists(loader):
    return [b.asnumpy().tolist() for b in loader]


def test_dataloader_last_batch_modes():
    keep = data.DataLoader(onp.arange(7), 3)
    assert len(keep) == 3 and _as_lists(keep) == [[0, 1, 2], [3, 4, 5], [6]]
    discard = data.DataLoader(onp.arange(7), 3, last_batch="discard")
    assert len(discard) == 2 and _as_lists(discard) == [[0, 1, 2], [3, 4, 5]]
    rollover = data.DataLoader(onp.arange(7), 3, last_batch="rollover")
    assert _as_lists(rollover) == [[0, 1, 2], [3, 4, 5]]
    assert _as_lists(rollover) == [[6, 0, 1], [2, 3, 4]]   # as MXNet 1.9.1


def test_dataloader_iterates_twice_and_shuffles():
    loader = data.DataLoader(onp.arange(10), 4, shuffle=True)
    onp.random.seed(1)
    first = sum(_as_lists(loader), [])
    second = sum(_as_lists(loader), [])
    assert sorted(first) == sorted(second) == list(range(10))
    onp.random.seed(1)
    assert sum(_as_lists(loader), []) == first


def test_dataloader_sampler_and_batch_sampler():
    loader = data.DataLoader(onp.arange(10), 2, sampler=data.IntervalSampler(10, 5))
    assert _as_lists(loader) == [[0, 5], [1, 6], [2, 7], [3, 8], [4, 9]]
    batches = data.BatchSampler(data.SequentialSampler(5), 2)
    loader = data.DataLoader(onp.arange(5) * 10, batch_sampler=batches)
    assert _as_lists(loader) == [[0, 10], [20, 30], [40]] and len(loader) == 3


def test_dataloader_argument_errors():
    with pytest.raises(ValueError, match="batch_size must be specified"):
        data.DataLoader(onp.arange(3))
    with pytest.raises(ValueError, match="shuffle must not be specified"):
        data.DataLoader(onp.arange(3), 1, shuffle=True, sampler=data.SequentialSampler(3))
    with pytest.raises(ValueError, match="must not be specified if batch_sampler"):
        data.DataLoader(onp.arange(3), 1,
                        batch_sampler=data.BatchSampler(data.SequentialSampler(3), 1))
    with pytest.raises(ValueError, match="last_batch"):
        data.DataLoader(onp.arange(3), 1, last_batch="drop")
    with pytest.raises(ValueError, match="timeout"):
        data.DataLoader(onp.arange(3), 1, timeout=0)


def test_dataloader_custom_batchify_and_list_dataset():
    samples = [([1, 2], 0), ([3, 4], 1)]
    for workers in (0, 2):
        loader = data.DataLoader(samples, batch_size=1, num_workers=workers, timeout=30)
        got = [(d.asnumpy().tolist(), l.asnumpy().tolist()) for d, l in loader]
        assert got == [([[1, 2]], [0]), ([[3, 4]], [1])]
    loader = data.DataLoader(onp.arange(4), 2, batchify_fn=lambda xs: [int(x) for x in xs])
    assert list(loader) == [[0, 1], [2, 3]]


class _FullDataset(data.Dataset):
    """Sample i is an NDArray of ten i's (MXNet's test_multi_worker)."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        return mx.nd.full((10,), i)


@pytest.mark.parametrize("thread_pool", [False, True])
@pytest.mark.parametrize("auto_reload", [False, True])
def test_dataloader_workers_in_order(thread_pool, auto_reload):
    loader = data.DataLoader(_FullDataset(), batch_size=1, num_workers=2,
                             thread_pool=thread_pool, auto_reload=auto_reload, timeout=30)
    for _ in range(2):                                   # two passes over one pool
        count = 0
        for i, batch in enumerate(loader):
            assert isinstance(batch, mx.nd.NDArray) and batch.shape == (1, 10)
            assert (batch.asnumpy() == i).all()
            count += 1
        assert count == 12


def test_dataloader_workers_shapes_keep_and_structures():
    loader = data.DataLoader(data.ArrayDataset(onp.ones((9, 3, 2))), batch_size=4,
                             num_workers=2, last_batch="keep", timeout=30)
    assert [b.shape for b in loader] == [(4, 3, 2), (4, 3, 2), (1, 3, 2)]

    def batchify_structure(samples):
        return {"pair": (mx.nd.array([s for s in samples]), [s * 2 for s in samples]),
                "np": mx.np.array(samples)}

    loader = data.DataLoader(onp.arange(4), 2, num_workers=2, batchify_fn=batchify_structure,
                             timeout=30)
    first = next(iter(loader))
    assert type(first["pair"]) is tuple
    assert type(first["pair"][0]) is mx.nd.NDArray and type(first["np"]) is mx.np.ndarray
    assert first["pair"][0].asnumpy().tolist() == [0, 1] and first["pair"][1] == [0, 2]


def test_shipping_keeps_structures_and_array_types():
    # what a worker sends back (NumPy data + array type) and how the main process rebuilds it
    from fastgrad.gluon.data import dataloader
    Pair = namedtuple("Pair", "x y")
    batch = [Pair(mx.nd.ones(2), mx.np.zeros(3)), {"k": (mx.nd.ones(1), 5)}, "label"]
    shipped = dataloader._ship(batch)
    assert type(shipped[0].x.data) is onp.ndarray
    back = dataloader._unship(shipped)
    assert type(back[0]) is Pair and type(back[0].x) is mx.nd.NDArray
    assert type(back[0].y) is mx.np.ndarray and back[0].y.shape == (3,)
    assert type(back[1]["k"][0]) is mx.nd.NDArray and back[1]["k"][1] == 5
    assert back[2] == "label"


def test_dataloader_worker_processes_are_other_processes():
    loader = data.DataLoader(data.SimpleDataset(list(range(6))).transform(lambda _: os.getpid()),
                             batch_size=1, num_workers=2, timeout=30)
    pids = {int(b.asnumpy()[0]) for b in loader}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_dataloader_np_arrays_under_set_np_with_workers():
    npx.set_np()
    try:
        loader = data.DataLoader(onp.arange(4.0), 2, num_workers=2, timeout=30)
        assert all(type(b) is mx.np.ndarray for b in loader)
    finally:
        npx.reset_np()


def _raise_on_five(x):
    if x == 5:
        raise KeyError("sample five is broken")
    return x


@pytest.mark.parametrize("thread_pool", [False, True])
def test_worker_exception_reaches_main_process(thread_pool):
    dataset = data.SimpleDataset(list(range(8))).transform(_raise_on_five)
    loader = data.DataLoader(dataset, batch_size=2, num_workers=2, thread_pool=thread_pool,
                             timeout=30)
    got = []
    start = time.time()
    with pytest.raises(KeyError, match="sample five is broken") as info:
        for batch in loader:
            got.append(batch.asnumpy().tolist())
    assert time.time() - start < 20
    assert got == [[0, 1], [2, 3]]
    assert any("[4, 5]" in note for note in getattr(info.value, "__notes__", []))
    if not thread_pool:
        # the worker's traceback travels with the exception
        assert "_raise_on_five" in str(info.value.__cause__)
    # the loader still works for a dataset pass that does not touch the broken sample
    assert _as_lists(data.DataLoader(dataset.take(4), 2, num_workers=2, timeout=30)) \
        == [[0, 1], [2, 3]]


# A child runs in the system's temporary folder: ``python -c`` puts its working directory
# first on sys.path, and from a checkout's root that would import the uncompiled source tree
# instead of the installed fastgrad (Note [The source tree shadows the installed package]).
CHILD_CWD = tempfile.gettempdir()


def _run_child(source, timeout=60):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(source)],
                          capture_output=True, text=True, timeout=timeout, cwd=CHILD_CWD)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:        # a zombie is dead: it only waits for its parent to read its status
        with open("/proc/%d/stat" % pid) as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_dead(pids, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def test_dead_worker_raises_instead_of_hanging():
    result = _run_child("""
        import os, time
        import numpy as np
        from fastgrad import gluon
        def die(x):
            if x == 3:
                os._exit(7)
            return x
        ds = gluon.data.SimpleDataset(list(range(6))).transform(die)
        loader = gluon.data.DataLoader(ds, batch_size=1, num_workers=2, timeout=30)
        start = time.time()
        try:
            for b in loader:
                pass
        except RuntimeError as e:
            print("RAISED", round(time.time() - start), e)
        again = [b.asnumpy().tolist() for b in
                 gluon.data.DataLoader(ds.take(2), 1, num_workers=2, timeout=30)]
        print("AGAIN", again)
    """)
    assert result.returncode == 0, result.stderr
    assert "RAISED" in result.stdout and "exited unexpectedly" in result.stdout
    assert int(result.stdout.split("RAISED")[1].split()[0]) < 20
    assert "AGAIN [[0], [1]]" in result.stdout


def test_worker_dead_before_the_next_request_raises_the_same_error():
    """The pool broke between two batches: submitting the next request is what fails."""
    result = _run_child("""
        import time
        from fastgrad import gluon
        ds = gluon.data.SimpleDataset(list(range(8)))
        loader = gluon.data.DataLoader(ds, batch_size=1, num_workers=2, timeout=30)
        batches = iter(loader)
        next(batches)
        pool = loader._pool
        for process in list(pool._processes.values()):
            process.kill()
        deadline = time.time() + 20
        while not pool._broken and time.time() < deadline:
            time.sleep(0.01)
        try:
            for b in batches:
                pass
        except RuntimeError as e:
            print("RAISED", type(e.__cause__).__name__, e)
        print("AGAIN", [b.asnumpy().tolist() for b in
                        gluon.data.DataLoader(ds.take(2), 1, num_workers=2, timeout=30)])
    """)
    assert result.returncode == 0, result.stderr
    assert "RAISED BrokenProcessPool DataLoader: a worker process exited" in result.stdout
    assert "AGAIN [[0], [1]]" in result.stdout


def test_worker_timeout():
    loader = data.DataLoader(data.SimpleDataset([0, 1]).transform(lambda x: time.sleep(3) or x),
                             batch_size=1, num_workers=1, thread_pool=True, timeout=0.2)
    with pytest.raises(TimeoutError, match="timeout=0.2"):
        list(loader)


def test_no_orphaned_workers_after_exit_or_kill():
    source = """
        import os, sys, time
        from fastgrad import gluon
        ds = gluon.data.SimpleDataset(list(range(4))).transform(lambda _: os.getpid())
        loader = gluon.data.DataLoader(ds, batch_size=1, num_workers=2, timeout=30)
        pids = sorted({int(b.asnumpy()[0]) for b in loader})
        print(" ".join(map(str, pids)), flush=True)
        if sys.argv[-1] == "hang":
            time.sleep(60)
    """
    # 1. a normal exit shuts the pool down
    result = _run_child(source)
    assert result.returncode == 0, result.stderr
    assert _wait_dead([int(p) for p in result.stdout.split()]) == []
    # 2. a main process killed with SIGKILL leaves no worker behind
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(source), "hang"],
                             stdout=subprocess.PIPE, text=True, cwd=CHILD_CWD)
    try:
        pids = [int(p) for p in child.stdout.readline().split()]
        assert pids and all(_alive(p) for p in pids)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert _wait_dead(pids) == []


def test_pin_memory_is_accepted():
    loader = data.DataLoader(onp.arange(4.0), 2, pin_memory=True, pin_device_id=0)
    assert all(b.context == mx.cpu() for b in loader)


def test_iterator_scope_keeps_pool_alive():
    # MXNet's test_dataloader_scope: the iterator outlives the DataLoader object
    iterator = iter(data.DataLoader(mx.nd.ones(5), batch_size=2, num_workers=1,
                                    batchify_fn=lambda a: a, timeout=30))
    assert next(iterator) is not None


class _UnpicklableError(Exception):
    """An exception that cannot be pickled (it holds a lock)."""

    def __init__(self, message):
        super().__init__(message)
        import threading
        self.lock = threading.Lock()


def _raise_unpicklable(x):
    if x == 3:
        raise _UnpicklableError("sample three")
    return x


def test_unpicklable_worker_exception_keeps_message_and_traceback():
    dataset = data.SimpleDataset(list(range(6))).transform(_raise_unpicklable)
    loader = data.DataLoader(dataset, batch_size=2, num_workers=2, timeout=30)
    with pytest.raises(RuntimeError) as info:
        list(loader)
    message = str(info.value)
    assert "_UnpicklableError: sample three" in message
    assert "_raise_unpicklable" in message          # the worker's traceback


def _stuck_on_one(x):
    if x == 1:
        time.sleep(600)
    return x


def test_deleting_a_loader_stops_stuck_workers_at_once():
    import multiprocessing
    before = set(p.pid for p in multiprocessing.active_children())
    loader = data.DataLoader(data.SimpleDataset(list(range(4))).transform(_stuck_on_one),
                             batch_size=1, num_workers=2, timeout=30)
    iterator = iter(loader)
    assert next(iterator).asnumpy().tolist() == [0]
    workers = set(p.pid for p in multiprocessing.active_children()) - before
    assert len(workers) == 2
    start = time.time()
    del iterator, loader
    assert time.time() - start < 5
    assert _wait_dead(sorted(workers)) == []
