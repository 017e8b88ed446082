"""The load-aware default of the BLAS's threads: more than one only while the cores are free.

Note [Load-aware BLAS threads]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A matrix product split over two BLAS threads is faster on a quiet machine and many times
slower when another process keeps a core busy (Note [Threads on a busy machine] in
``_threads.py``). So, unless the user chose the BLAS's threads, fastgrad looks at the machine
now and then and gives the BLAS as many threads as there are cores nobody else wants:

* **A probe** reads how many tasks of the whole machine are runnable now (the fourth field of
  ``/proc/loadavg``, "runnable/total"; the kernel's ``nr_running``, ``procs_running`` of
  ``/proc/stat``) and, if that is more than one, how many of this process's own threads are
  (state ``R`` in ``/proc/self/task/*/stat``). The others' count is the machine's minus this
  process's: the BLAS's workers spin for a while after a product, and fastgrad's kernel pool
  may be finishing a job, and neither is a neighbour. (A thread of the program's own that
  computes, a data loader's, is not counted as one either: the policy cannot tell it from a
  BLAS worker, which ``/proc`` does not name.)
* **The decision** (:func:`decide`, a pure function of the readings): the free cores are the
  machine's online CPUs minus the others, and the BLAS gets that many threads, at least one
  and at most the cores this process may use. Fewer threads take effect at once: a neighbour
  is caught by the first probe that sees it. More threads take effect only after
  ``QUIET_PROBES`` probes in a row allowed them, so that a neighbour that runs in bursts (and
  is runnable at only some probes) keeps the BLAS on one thread.
* **When**: a probe runs at most every ``PROBE_INTERVAL`` seconds, from the calling thread, at
  the places that lead to many products: the start of a backward pass (``run_backward``), of
  the Executor's forward and backward replays and of a Gluon block's call, and the convolution
  kernels. Between probes such a call costs one clock reading and a comparison. Not in the
  ``matmul`` and ``dot`` ops' kernels: a Python frame around NumPy's product is a measurable
  part of a small product's overhead (``docs/benchmarks.rst``), and the per-op path pays for
  nothing it does not need; so a forward-only program of plain ``np`` products, outside Gluon,
  keeps the last decision (one thread until a probe has run). Probing from the calling thread,
  between its products, never from a thread of its own, calls the BLAS's setter while none of
  the caller's products runs (OpenBLAS promises nothing about a setter called during a
  product), and costs nothing while the process does no work. **While the program runs another
  Python thread** (one that is not a daemon: a Jupyter kernel's heartbeat and I/O threads are
  daemons and compute nothing) the probe decides one thread without reading the machine, and
  never more: that thread may be inside a product whenever the setter runs (OpenBLAS built with
  OpenMP frees the per-thread buffers of the threads it gives up), and threads that compute
  side by side share the cores already. The setter is then called at most once, to go down to
  one. A program whose products go to NumPy outside fastgrad's ops keeps the last decision
  until fastgrad's next probe.
* **The setter**: threadpoolctl's controllers of the BLAS libraries, found once when the
  policy starts (a scan of the loaded libraries takes milliseconds), and called only when the
  decision changes. If the BLAS's threads are not what the policy last set, someone else set
  them (``threadpoolctl.threadpool_limits`` around a block, NumPy code of the user's): the
  policy leaves them be until they are back to its own.

The policy runs only where it can read ``/proc`` (Linux) and the process may use more than one
core; elsewhere the BLAS keeps one thread, the static default. A BLAS library loaded after the
policy started (SciPy's own OpenBLAS) keeps its own setting.

Consequence for results: OpenBLAS blocks some products differently on one and on two threads
(some with an inner dimension of several hundred, as the 784-wide first layer of an MNIST
MLP), so their last bits depend on the threads, and under this policy on what else the
machine runs (PyTorch's and NumPy's depend on their threads the same way). A program that
needs bit-identical results run to run fixes the threads (``fastgrad.set_num_threads(n)`` or
``OPENBLAS_NUM_THREADS``); the test suite runs with one (``tests/conftest.py``).
"""

import os
import threading
import time

__all__ = ["decide", "read_machine_running", "read_own_running", "start", "stop", "active",
           "probe", "tick", "PROBE_INTERVAL", "QUIET_PROBES"]

#: Seconds between two probes at least.
PROBE_INTERVAL = 0.05

#: Probes in a row that must allow more threads before the BLAS gets them.
QUIET_PROBES = 5


def decide(machine_running, own_running, threads, cpus, usable, quiet, quiet_probes=QUIET_PROBES):
    """The BLAS's threads after one probe, and the new count of quiet probes in a row.

    Parameters
    ----------
    machine_running : int or None
        Runnable tasks of the whole machine, this process's included; ``None`` if unreadable.
    own_running : int
        Runnable threads of this process, the calling thread included (read only when
        ``machine_running`` is more than 1; pass 1 otherwise).
    threads : int
        The BLAS's threads now.
    cpus : int
        The machine's online CPUs.
    usable : int
        The CPUs this process may run on.
    quiet : int
        Probes in a row, before this one, that allowed more than ``threads``.
    quiet_probes : int
        Probes in a row that must allow more threads before they are given.

    Returns
    -------
    (int, int)
        The threads to use and the count of quiet probes to carry to the next probe.
    """
    if machine_running is None:
        return 1, 0
    others = max(machine_running - max(own_running, 1), 0)
    want = max(1, min(usable, cpus - others))
    if want < threads:
        return want, 0
    if want == threads:
        return threads, 0
    if quiet + 1 >= quiet_probes:
        return want, 0
    return threads, quiet + 1


def read_machine_running(path="/proc/loadavg"):
    """Runnable tasks of the machine now (``/proc/loadavg``'s "runnable/total"), or None."""
    try:
        with open(path, "rb") as f:
            return int(f.read().split()[3].split(b"/")[0])
    except (OSError, IndexError, ValueError):
        return None


def read_own_running(folder="/proc/self/task"):
    """Runnable threads of this process (state ``R``), at least 1: the caller runs."""
    count = 0
    try:
        tids = os.listdir(folder)
    except OSError:
        return 1
    for tid in tids:
        try:
            with open("%s/%s/stat" % (folder, tid), "rb") as f:
                stat = f.read()
        except OSError:
            continue                          # the thread ended since the listing
        # "tid (comm) S ...": the name may hold spaces and parentheses, the state follows
        # the last ')'.
        if stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] == b"R":
            count += 1
    return max(count, 1)


# The policy's state: the next probe's time (infinite while the policy is off, so that
# ``tick`` is one clock reading and one comparison), the BLAS's controllers, the threads it
# last set, the quiet probes in a row, the machine's CPUs and the process's.
_next = float("inf")
_controllers = ()
_threads = 1
_quiet = 0
_cpus = 1
_usable = 1
_monotonic = time.monotonic


def _python_threads():
    """The Python threads that are not daemons, the calling one included."""
    return sum(1 for thread in threading.enumerate() if not thread.daemon)


def _set(controllers, n):
    for lib in controllers:
        lib.set_num_threads(n)
        # As in _threads._set_blas: threadpoolctl >= 3.6 lets only the thread that first set
        # OpenBLAS's threads set them again until that thread clears it.
        clear = getattr(type(lib), "clear_controlling_thread", None)
        if clear is not None:
            clear()


def _current(controllers):
    counts = [lib.num_threads for lib in controllers]
    counts = [c for c in counts if c is not None]
    return max(counts) if counts else None


def start(controllers, threads=1, cpus=None, usable=None):
    """Run the policy on ``controllers`` (threadpoolctl's), starting from ``threads``.

    Returns whether it runs: not without a controller, a readable ``/proc`` and more than one
    usable CPU; then the BLAS is left on ``threads``.
    """
    global _next, _controllers, _threads, _quiet, _cpus, _usable
    stop()
    if cpus is None:
        cpus = os.cpu_count() or 1
    if usable is None:
        usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    controllers = tuple(controllers)
    _set(controllers, threads)
    if (not controllers or min(cpus, usable) < 2 or read_machine_running() is None):
        return False
    _controllers, _threads, _quiet, _cpus, _usable = controllers, threads, 0, cpus, usable
    _next = 0.0
    return True


def stop():
    """Stop the policy; the BLAS keeps the threads it has."""
    global _next, _controllers
    _next = float("inf")
    _controllers = ()


def active():
    """Whether the policy runs."""
    return _next != float("inf")


def probe(now=None):
    """One probe: read the machine, decide, set the BLAS if the decision changed.

    Returns the BLAS's threads the policy decided.
    """
    global _next, _threads, _quiet
    _next = (_monotonic() if now is None else now) + PROBE_INTERVAL
    if _current(_controllers) != _threads:
        return _threads                       # someone else holds the BLAS for now
    if _python_threads() > 1:
        threads, _quiet = 1, 0                # other threads: the setter stays out of their way
    else:
        machine = read_machine_running()
        own = read_own_running() if machine is not None and machine > 1 else 1
        threads, _quiet = decide(machine, own, _threads, _cpus, _usable, _quiet)
    if threads != _threads:
        _set(_controllers, threads)
        _threads = threads
    return threads


def tick():
    """Probe if the last probe is ``PROBE_INTERVAL`` seconds old (and the policy runs)."""
    now = _monotonic()
    if now >= _next:
        probe(now)
