"""How many threads fastgrad runs on: its kernel pool and the BLAS.

``fastgrad.set_num_threads``/``get_num_threads`` (named as ``torch.set_num_threads``; MXNet
had no such function, only the environment variables ``OMP_NUM_THREADS`` and
``MXNET_CPU_WORKER_NTHREADS``) and ``get_blas_num_threads``.

Note [Threads on a busy machine]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
fastgrad computes on two kinds of threads: its own kernel pool, which splits large
elementwise ufuncs (Note [Large-array kernels] in ``_large/__init__.py``), and the BLAS's
threads, which split the matrix products NumPy hands to OpenBLAS, MKL or BLIS. Both split a
call into slices and wait for the slowest. When another process keeps a core busy, the
thread of one slice waits for a time slice of the scheduler while the others wait for it: a
product that takes microseconds takes milliseconds, and a training step made of hundreds of
them becomes tens of times slower. A BLAS thread that spins while it waits takes the time
slice of the very thread it waits for.

So fastgrad's defaults are the ones that survive a busy core:

* The BLAS runs on **one thread** whenever another process wants a core, and on as many as
  the cores nobody else wants otherwise: the load-aware policy of Note [Load-aware BLAS
  threads] in ``_blas_policy.py`` looks at the machine now and then and sets the BLAS's
  threads to match. Measured per product size, extra BLAS threads gained on a quiet machine
  and lost many times that on a busy one at every size of the products a small model makes
  (``docs/benchmarks.rst``, "Threads on a busy machine"); the policy takes the gain without
  the loss. Where it cannot run (no ``/proc``, one usable core) the BLAS keeps one thread.
  The environment turns the policy off: ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``,
  ``MKL_NUM_THREADS`` or ``BLIS_NUM_THREADS`` leave the BLAS as they set it,
  ``FASTGRAD_NUM_THREADS`` sets it; so does ``set_num_threads(n)``, and
  ``set_num_threads(None)`` turns the policy back on. ``get_blas_num_threads`` says what the
  BLAS runs on now, the policy's last decision while it runs.
* The kernel pool keeps one thread per usable core: its workers sleep when idle, never spin,
  and the calling thread takes any slice still unclaimed once its own is done (Note [Kernel
  pool] in ``_large/pool.h``), so a slow worker delays a call by at most its own slice.

``set_num_threads(n)`` sets both to ``n``, through `threadpoolctl`_ for the BLAS: it finds the
BLAS libraries loaded in the process, whichever they are, and calls each one's own setter.
The limit is process-wide, as the BLAS's own setting is: NumPy code outside fastgrad's
operations runs with it too. A BLAS library loaded after the call (SciPy's own OpenBLAS,
loaded on first use of ``scipy.linalg``) keeps its own setting; call ``set_num_threads``
again after loading it.

.. _threadpoolctl: https://github.com/joblib/threadpoolctl
"""

import operator
import os

import threadpoolctl

from fastgrad._kernels import _blas_policy, _large

__all__ = ["set_num_threads", "get_num_threads", "get_blas_num_threads", "BLAS_VARIABLES",
           "DEFAULT_BLAS_THREADS"]

#: Environment variables by which a user sets the BLAS's threads; fastgrad then leaves them be.
BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                  "BLIS_NUM_THREADS")

#: The BLAS's threads when neither the environment nor ``set_num_threads`` chose them and
#: the load-aware policy does not run (or has not yet seen the machine quiet).
DEFAULT_BLAS_THREADS = 1

#: Whether the defaults include the load-aware policy (Note [Load-aware BLAS threads]). The
#: test suite turns it off, so that no result's last bits depend on the machine's load.
LOAD_AWARE = True


def _check(n, name):
    """``n`` as a positive int, or an error that names the function."""
    if isinstance(n, bool):
        raise TypeError("%s: the number of threads must be an int, not a bool (%r)" % (name, n))
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError("%s: the number of threads must be an int, not %s (%r)"
                        % (name, type(n).__name__, n)) from None
    if n < 1:
        raise ValueError("%s: the number of threads must be at least 1, got %d" % (name, n))
    return n


def _blas_libraries():
    """threadpoolctl's controllers of the BLAS libraries loaded now."""
    return threadpoolctl.ThreadpoolController().select(user_api="blas").lib_controllers


def _set_blas(n):
    _blas_policy.stop()
    for lib in _blas_libraries():
        lib.set_num_threads(n)
        # threadpoolctl >= 3.6 lets only the thread that first set OpenBLAS's threads set them
        # again, until it clears that: clear it, so that a user's threadpool_limits in another
        # thread still works.
        clear = getattr(type(lib), "clear_controlling_thread", None)
        if clear is not None:
            clear()


def _env_threads():
    """``FASTGRAD_NUM_THREADS`` as a positive int, or None if it is not set."""
    value = os.environ.get("FASTGRAD_NUM_THREADS", "").strip()
    if not value:
        return None
    try:
        return _check(int(value), "FASTGRAD_NUM_THREADS")
    except (TypeError, ValueError):
        raise ValueError("FASTGRAD_NUM_THREADS must be a positive integer, not %r"
                         % value) from None


def _default_blas_threads():
    """The BLAS's threads by default, or None to leave the BLAS as the environment set it."""
    if any(os.environ.get(var, "").strip() for var in BLAS_VARIABLES):
        return None
    n = _env_threads()
    return DEFAULT_BLAS_THREADS if n is None else n


def set_num_threads(n: int | None) -> None:
    """Run fastgrad's kernels and the BLAS on ``n`` threads.

    ``n`` threads split fastgrad's large elementwise operations (its kernel pool) and the
    matrix products, decompositions and other calls NumPy makes to its BLAS (OpenBLAS, MKL or
    BLIS, set through threadpoolctl). The setting is process-wide, as the BLAS's is. ``1``
    runs everything on the calling thread.

    By default the kernel pool has one thread per usable core and the BLAS one thread while
    another process wants a core, more while the cores are free (Note [Threads on a busy
    machine]; the environment variables ``FASTGRAD_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS``,
    ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``BLIS_NUM_THREADS`` change the defaults).
    ``n`` fixes the BLAS's threads whatever the load; ``None`` returns to the defaults.

    Parameters
    ----------
    n : int or None
        The number of threads, at least 1; ``None`` for the defaults.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        ``n`` is not an int (a bool is not taken for one).
    ValueError
        ``n`` is less than 1.

    See Also
    --------
    get_num_threads, get_blas_num_threads

    Examples
    --------
    >>> import fastgrad
    >>> fastgrad.set_num_threads(1)
    >>> fastgrad.get_num_threads(), fastgrad.get_blas_num_threads()
    (1, 1)
    >>> fastgrad.set_num_threads(None)       # back to the defaults
    """
    if n is None:
        _large.set_num_threads(None)
        _apply_blas_defaults(_default_blas_threads())
        return
    n = _check(n, "fastgrad.set_num_threads")
    _large.set_num_threads(n)
    _set_blas(n)


def get_num_threads() -> int:
    """The number of threads of fastgrad's kernel pool.

    ``set_num_threads(n)`` makes it ``n``; by default it is ``FASTGRAD_NUM_THREADS`` or the
    number of cores this process may use. The BLAS's threads are
    :func:`get_blas_num_threads`.

    Returns
    -------
    int

    Examples
    --------
    >>> import fastgrad
    >>> fastgrad.get_num_threads() >= 1
    True
    """
    return _large.get_num_threads()


def get_blas_num_threads() -> int | None:
    """The number of threads of the BLAS NumPy calls (the largest, if several are loaded).

    Under the default load-aware policy this is its last decision: one while another process
    wants a core, more while the cores are free (Note [Threads on a busy machine]); it changes
    as the machine's load does. ``set_num_threads(n)`` or the environment fix it.

    Returns
    -------
    int or None
        ``None`` if threadpoolctl finds no BLAS library in the process.

    Examples
    --------
    >>> import fastgrad
    >>> fastgrad.set_num_threads(1)
    >>> fastgrad.get_blas_num_threads()
    1
    >>> fastgrad.set_num_threads(None)
    """
    counts = [lib.num_threads for lib in _blas_libraries()]
    counts = [c for c in counts if c is not None]
    return max(counts) if counts else None


def _apply_blas_defaults(blas):
    """The BLAS's defaults: ``blas`` threads (None: the environment's) or, for the default
    number and with ``LOAD_AWARE``, the load-aware policy from one thread."""
    _blas_policy.stop()
    if blas is None:
        return
    if LOAD_AWARE and blas == DEFAULT_BLAS_THREADS and _env_threads() is None:
        if _blas_policy.start(_blas_libraries(), blas):
            return
    _set_blas(blas)


def _apply_defaults():
    """The BLAS's default threads, once, when fastgrad is imported. An invalid
    ``FASTGRAD_NUM_THREADS`` is reported where the kernel pool reads it, on first use."""
    try:
        blas = _default_blas_threads()
    except ValueError:
        return
    _apply_blas_defaults(blas)


_apply_defaults()
