"""Per-thread autograd state: is the current thread recording, is it training.

See Note [Per-thread state] in ``_tls.h``.
"""

cdef extern from "_tls.h":
    int fg_recording
    int fg_training
    int fg_anomaly
    void *fg_pass


cdef int is_recording_c() noexcept nogil:
    return fg_recording


cdef int is_training_c() noexcept nogil:
    return fg_training


cdef int is_anomaly_c() noexcept nogil:
    return fg_anomaly


cdef int set_recording_c(int value) noexcept nogil:
    global fg_recording
    cdef int prev = fg_recording
    fg_recording = value
    return prev


cdef int set_training_c(int value) noexcept nogil:
    global fg_training
    cdef int prev = fg_training
    fg_training = value
    return prev


cdef int set_anomaly_c(int value) noexcept nogil:
    global fg_anomaly
    cdef int prev = fg_anomaly
    fg_anomaly = value
    return prev


def is_recording():
    """Return whether the current thread is recording operations for autograd."""
    return bool(fg_recording)


def is_training():
    """Return whether the current thread is in training mode (dropout, batch norm)."""
    return bool(fg_training)


def set_recording(bint is_recording):
    """Set whether the current thread records operations; return the previous state."""
    global fg_recording
    cdef int prev = fg_recording
    fg_recording = is_recording
    return bool(prev)


def set_training(bint train_mode):
    """Set whether the current thread is in training mode; return the previous state."""
    global fg_training
    cdef int prev = fg_training
    fg_training = train_mode
    return bool(prev)


def is_anomaly_enabled():
    """Return whether anomaly detection is on in the current thread."""
    return bool(fg_anomaly)


def set_anomaly_enabled(bint enabled):
    """Turn anomaly detection on or off in the current thread; return the previous state."""
    global fg_anomaly
    cdef int prev = fg_anomaly
    fg_anomaly = enabled
    return bool(prev)


cdef object swap_pass_c(object running):
    """Make ``running`` (a backward pass, or None) this thread's current pass; return the
    previous one. The pointer is borrowed: the engine keeps the pass alive while it is set."""
    global fg_pass
    prev = <object>fg_pass if fg_pass != NULL else None
    fg_pass = <void *>running if running is not None else NULL
    return prev


def current_pass():
    """The backward pass this thread is running (innermost), or None (internal)."""
    return <object>fg_pass if fg_pass != NULL else None
