# Per-thread recording/training flags (see Note [Per-thread state] in _tls.h).

cdef int is_recording_c() noexcept nogil
cdef int is_training_c() noexcept nogil
cdef int is_anomaly_c() noexcept nogil
cdef int set_recording_c(int value) noexcept nogil
cdef int set_training_c(int value) noexcept nogil
cdef int set_anomaly_c(int value) noexcept nogil
cdef object swap_pass_c(object running)
