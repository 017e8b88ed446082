"""Large kernel buffers reused once nothing refers to them (internal).

Note [Reused buffers]
~~~~~~~~~~~~~~~~~~~~~
A convolution's im2col buffer is megabytes (LeNet's first layer: 5 MB per step). glibc hands
blocks that large back to the operating system when they are freed, so every training step
page-faults its buffers in again: measured on the LeNet step, about 2,400 page faults, a
quarter of its time. ``empty`` keeps the last few such buffers and hands one out again when
nothing but this module refers to it any more: ``sys.getrefcount`` sees every reference,
including the base reference of every view of the buffer, so a buffer still held by a
recorded node, a saved array or a user's variable (through any view) is never reused. Only
kernels that fill the whole buffer before returning it use ``empty``. The lock makes the
check and the hand-out one step when several threads run kernels. At most ``KEEP`` buffers
are kept (the oldest is dropped first), and none smaller than ``MIN_BYTES``, which NumPy's
and glibc's own free lists serve well.
"""

import sys
import threading

import numpy as np

#: How many buffers are kept at most.
KEEP = 8
#: Buffers smaller than this are not kept.
MIN_BYTES = 1 << 20

_lock = threading.Lock()
_kept = []
# References to a free kept buffer that getrefcount sees: the list, the loop variable and
# getrefcount's own argument.
_FREE_REFS = 3
# A free-threaded interpreter defers reference counts: there getrefcount cannot prove a
# buffer free, so nothing is reused.
_REFCOUNTS_EXACT = getattr(sys, "_is_gil_enabled", lambda: True)()


def empty(shape, dtype):
    """An uninitialized array of ``shape`` and ``dtype``, reusing a kept buffer when free."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    if dtype.itemsize * int(np.prod(shape, dtype=np.int64)) < MIN_BYTES:
        return np.empty(shape, dtype=dtype)
    if not _REFCOUNTS_EXACT:
        return np.empty(shape, dtype=dtype)
    with _lock:
        for buf in _kept:
            if buf.shape == shape and buf.dtype == dtype and sys.getrefcount(buf) == _FREE_REFS:
                return buf
        buf = np.empty(shape, dtype=dtype)
        _kept.append(buf)
        if len(_kept) > KEEP:
            del _kept[0]
        return buf


def clear():
    """Drop every kept buffer (their memory is freed once nothing else refers to them)."""
    with _lock:
        del _kept[:]
