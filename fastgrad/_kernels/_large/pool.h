/* A pool of C threads that run NumPy's own strided inner loops on slices of arrays.
 *
 * Note [Kernel pool]
 * ~~~~~~~~~~~~~~~~~~
 * A large elementwise ufunc call is cut into chunks (Note [Parallel kernels] in kernels.pyx
 * says which calls, and why the results are bit-identical). The loop each chunk runs is the
 * one NumPy itself would run, obtained once per ufunc and dtypes through NumPy's
 * ``ufunc._get_strided_loop`` (the "numpy_1.24_ufunc_call_info" capsule). Only loops that do
 * not need the GIL are used, so the workers here never touch Python: they are plain C
 * threads started with PyThread_start_new_thread, and a chunk costs no GIL hand-off.
 *
 * One job runs at a time (fg_busy; a caller that finds the pool busy runs its chunks
 * itself). The job lives in fg_job_now. fg_state packs the job's generation (high 32 bits)
 * and one bit per chunk claimed (low 32 bits); a thread claims a chunk by compare-and-swap
 * on the whole word, so a claim can only succeed for the current job, and the job's fields
 * are read only after a successful claim. The caller publishes the job by storing a new
 * state, claims chunks too, then waits for fg_done to reach the number of chunks; only then
 * may the next job overwrite fg_job_now. Each thread first claims "its" chunk (thread t,
 * chunk t), so the same slice of a repeatedly used array lands on the same core, then any
 * chunk left: a worker that is asleep costs the caller nothing but its wake-up call.
 *
 * An idle worker never spins: it sleeps on a lock (a futex wait on Linux) that the caller
 * releases when it publishes a job. Spinning bought a few microseconds of wake-up on an idle
 * machine and cost a core's worth of CPU on a busy one, where the spinning worker takes the
 * time slice of the very thread it waits for. The caller claims any chunk still free once
 * its own is done, so a worker slow to wake delays a job by at most its share of the work.
 * Floating-point exception flags are per thread: each chunk clears them, runs, and ORs what
 * it raised into fg_fpe, which the caller reports as NumPy would after one call.
 */
#ifndef FASTGRAD_POOL_H
#define FASTGRAD_POOL_H

#include <Python.h>
#include <pythread.h>
#include <fenv.h>
#include <numpy/npy_common.h>
#include <numpy/ndarraytypes.h>
#include <stdlib.h>
#include <string.h>

#if defined(_MSC_VER)
#  include <windows.h>
typedef volatile LONG64 fg_word;
#  define FG_LOAD(p) InterlockedOr64((p), 0)
#  define FG_STORE(p, v) ((void)InterlockedExchange64((p), (LONG64)(v)))
#  define FG_CAS(p, e, d) \
     (InterlockedCompareExchange64((p), (LONG64)(d), (LONG64)(e)) == (LONG64)(e))
#  define FG_ADD(p, v) InterlockedExchangeAdd64((p), (LONG64)(v))
#  define FG_OR(p, v) InterlockedOr64((p), (LONG64)(v))
#  define FG_XCHG(p, v) InterlockedExchange64((p), (LONG64)(v))
#  define FG_PAUSE() YieldProcessor()
#  define FG_YIELD() SwitchToThread()
#else
#  include <sched.h>
typedef long long fg_word;
static inline int fg_cas(fg_word *p, fg_word e, fg_word d) {
    return __atomic_compare_exchange_n(p, &e, d, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
#  define FG_LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#  define FG_STORE(p, v) __atomic_store_n((p), (fg_word)(v), __ATOMIC_SEQ_CST)
#  define FG_CAS(p, e, d) fg_cas((p), (fg_word)(e), (fg_word)(d))
#  define FG_ADD(p, v) __atomic_fetch_add((p), (fg_word)(v), __ATOMIC_SEQ_CST)
#  define FG_OR(p, v) __atomic_fetch_or((p), (fg_word)(v), __ATOMIC_SEQ_CST)
#  define FG_XCHG(p, v) __atomic_exchange_n((p), (fg_word)(v), __ATOMIC_SEQ_CST)
#  if defined(__x86_64__) || defined(__i386__)
#    define FG_PAUSE() __builtin_ia32_pause()
#  elif defined(__aarch64__) || defined(__arm__)
#    define FG_PAUSE() __asm__ __volatile__("yield")
#  else
#    define FG_PAUSE() ((void)0)
#  endif
#  define FG_YIELD() sched_yield()
#endif

#define FG_MAX_ARGS 4          /* three inputs (the fused ufuncs' maximum_backward), one output */
#define FG_MAX_THREADS 32          /* one claim bit per chunk, one chunk per thread */

/* NumPy's strided loop, and the leading fields of its "numpy_1.24_ufunc_call_info"
 * capsule (documented with ufunc._get_strided_loop). */
typedef int (*fg_loop_fn)(void *context, char *const *data, const npy_intp *dims,
                          const npy_intp *strides, void *auxdata);
typedef struct {
    fg_loop_fn strided_loop;
    void *context;
    void *auxdata;
    npy_bool requires_pyapi;
    npy_bool no_floatingpoint_errors;
} fg_call_info;

typedef struct {
    fg_loop_fn fn;
    void *context;
    void *auxdata;
} fg_loop;

#define FG_MAX_ODIMS 16

/* One elementwise call: n_outer rows of n_inner elements. Row r is the multi-index of r over
 * odims[0..n_odims) (C order); operand k's element j of that row is at base[k] + the sum of
 * index[d] * outer_stride[k][d] + j * inner_stride[k]. Chunks are ranges of `chunk` rows,
 * or of `chunk` elements when there is one row. loops[t] is thread t's own copy of the loop. */
enum {
    FG_ELEMENTWISE = 0,   /* loops[t] on rows / element ranges, as described above */
    FG_SUM_BLOCKS = 1,    /* a reduce loop per element range [bounds[c], bounds[c+1]) of one
                           * contiguous operand (base[1], inner_stride[1]) into partial[c] */
    FG_SUM_ROWS = 2       /* chunk c: +0, then each row r in [bounds[c], bounds[c+1]) of
                           * base[1] (row stride outer_stride[1][0], n_inner elements) added
                           * in order with the binary loop, into base[0] (chunk 0) or
                           * base[2] (chunk 1) */
};

typedef union {
    double d;
    float f;
    char bytes[16];
} fg_partial;

typedef struct {
    int kind;
    int nargs;
    char *base[FG_MAX_ARGS];
    int n_odims;
    npy_intp odims[FG_MAX_ODIMS];
    npy_intp outer_stride[FG_MAX_ARGS][FG_MAX_ODIMS];
    npy_intp inner_stride[FG_MAX_ARGS];
    npy_intp n_outer;
    npy_intp n_inner;
    npy_intp chunk;
    int nchunks;
    npy_intp bounds[FG_MAX_THREADS + 1];
    fg_partial partial[FG_MAX_THREADS];
    fg_loop loops[FG_MAX_THREADS];
} fg_job;

typedef struct {
    PyThread_type_lock wake;       /* held while the worker may sleep on it */
    fg_word sleeping;
    unsigned long long seen;       /* the last generation it took part in */
    int id;
} fg_worker;

static fg_job fg_job_now;
static fg_word fg_state = 0;
static fg_word fg_done = 0;
static fg_word fg_fpe = 0;
static fg_word fg_failed = 0;
static fg_worker fg_workers[FG_MAX_THREADS];
static int fg_nworkers = 0;
static PyThread_type_lock fg_busy = NULL;

/* NumPy's error bits: divide 1, over 2, under 4, invalid 8. */
static int fg_fpe_bits(void) {
    int raised = fetestexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    return ((raised & FE_DIVBYZERO) ? 1 : 0) | ((raised & FE_OVERFLOW) ? 2 : 0)
         | ((raised & FE_UNDERFLOW) ? 4 : 0) | ((raised & FE_INVALID) ? 8 : 0);
}

/* Run chunk c of job j with thread t's loop; returns the loop's status. */
static int fg_run_chunk(fg_job *j, int c, int t) {
    char *data[FG_MAX_ARGS];
    npy_intp n, lo, hi, r, steps[FG_MAX_ARGS];
    int k, rc = 0;
    const fg_loop *lp = &j->loops[t];
    if (j->kind == FG_SUM_BLOCKS) {
        /* NumPy's reduce loop: out (stride 0) += the pairwise sum of the range. */
        memset(&j->partial[c], 0, sizeof(fg_partial));       /* +0, add's identity */
        data[0] = data[2] = j->partial[c].bytes;
        data[1] = j->base[1] + j->bounds[c] * j->inner_stride[1];
        steps[0] = steps[2] = 0;
        steps[1] = j->inner_stride[1];
        n = j->bounds[c + 1] - j->bounds[c];
        return lp->fn(lp->context, data, &n, steps, lp->auxdata);
    }
    if (j->kind == FG_SUM_ROWS) {
        /* As NumPy reduces leading axes: the identity, then each row added in order. */
        char *target = j->base[c == 0 ? 0 : 2];
        n = j->n_inner;
        memset(target, 0, (size_t)(n * j->inner_stride[0]));
        steps[0] = steps[2] = j->inner_stride[0];
        steps[1] = j->inner_stride[1];
        for (r = j->bounds[c]; r < j->bounds[c + 1] && rc == 0; r++) {
            data[0] = data[2] = target;
            data[1] = j->base[1] + r * j->outer_stride[1][0];
            rc = lp->fn(lp->context, data, &n, steps, lp->auxdata);
        }
        return rc;
    }
    if (j->n_outer == 1) {
        lo = (npy_intp)c * j->chunk;
        hi = lo + j->chunk < j->n_inner ? lo + j->chunk : j->n_inner;
        for (k = 0; k < j->nargs; k++)
            data[k] = j->base[k] + lo * j->inner_stride[k];
        n = hi - lo;
        return lp->fn(lp->context, data, &n, j->inner_stride, lp->auxdata);
    }
    lo = (npy_intp)c * j->chunk;
    hi = lo + j->chunk < j->n_outer ? lo + j->chunk : j->n_outer;
    n = j->n_inner;
    for (r = lo; r < hi && rc == 0; r++) {
        npy_intp rest = r, q;
        int d;
        for (k = 0; k < j->nargs; k++)
            data[k] = j->base[k];
        for (d = j->n_odims - 1; d >= 0; d--) {
            q = rest % j->odims[d];
            rest /= j->odims[d];
            for (k = 0; k < j->nargs; k++)
                data[k] += q * j->outer_stride[k][d];
        }
        rc = lp->fn(lp->context, data, &n, j->inner_stride, lp->auxdata);
    }
    return rc;
}

/* Claim and run chunks of job `gen` until none is left; thread t prefers chunk t. */
static void fg_participate(int t, unsigned long long gen) {
    for (;;) {
        fg_word s = FG_LOAD(&fg_state);
        unsigned long long free_bits;
        int c;
        if (((unsigned long long)s >> 32) != gen)
            return;
        free_bits = ~(unsigned long long)s & 0xFFFFFFFFull;
        if (!free_bits)
            return;
        if (t < 32 && (free_bits >> t) & 1ull) {
            c = t;
        } else {
            c = 0;
            while (!((free_bits >> c) & 1ull))
                c++;
        }
        if (!FG_CAS(&fg_state, s, (unsigned long long)s | (1ull << c)))
            continue;
        feclearexcept(FE_ALL_EXCEPT);
        if (fg_run_chunk(&fg_job_now, c, t) < 0)
            FG_OR(&fg_failed, 1);
        FG_OR(&fg_fpe, fg_fpe_bits());
        FG_ADD(&fg_done, 1);
    }
}

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && defined(__linux__) \
    && !defined(__AVX2__)
/* The pool's own loops below (mask casts, extrema with a scalar): their contiguous paths are
 * functions of their own (inlined, they lose their restrict pointers and their vector code),
 * compiled for the baseline and for AVX2, as _fused_loops.h's are. */
#define FG_VECTOR __attribute__((noinline, target_clones("avx2", "default")))
#elif defined(__GNUC__) || defined(__clang__)
#define FG_VECTOR __attribute__((noinline))
#else
#define FG_VECTOR
#endif
#if defined(_MSC_VER) && !defined(restrict)
#define restrict __restrict
#endif
/* A boolean mask as 0/1 of a float type, in the strided-loop signature (a conversion, for
 * relu's and max's gradient of a filled one; NumPy has no ufunc loop from bool to float). */
static FG_VECTOR void fg_bool_to_double_c(npy_intp n, const npy_bool *restrict src,
                                           double *restrict dst) {
    npy_intp i;
    for (i = 0; i < n; i++)
        dst[i] = (double)(src[i] != 0);
}

static FG_VECTOR void fg_bool_to_float_c(npy_intp n, const npy_bool *restrict src,
                                         float *restrict dst) {
    npy_intp i;
    for (i = 0; i < n; i++)
        dst[i] = (float)(src[i] != 0);
}

static int fg_bool_to_double(void *context, char *const *data, const npy_intp *dims,
                             const npy_intp *strides, void *auxdata) {
    npy_intp i, n = dims[0];
    char *in = data[0], *out = data[1];
    (void)context; (void)auxdata;
    if (strides[0] == 1 && strides[1] == sizeof(double)) {
        fg_bool_to_double_c(n, (const npy_bool *)in, (double *)out);
        return 0;
    }
    for (i = 0; i < n; i++, in += strides[0], out += strides[1])
        *(double *)out = *(npy_bool *)in ? 1.0 : 0.0;
    return 0;
}

static int fg_bool_to_float(void *context, char *const *data, const npy_intp *dims,
                            const npy_intp *strides, void *auxdata) {
    npy_intp i, n = dims[0];
    char *in = data[0], *out = data[1];
    (void)context; (void)auxdata;
    if (strides[0] == 1 && strides[1] == sizeof(float)) {
        fg_bool_to_float_c(n, (const npy_bool *)in, (float *)out);
        return 0;
    }
    for (i = 0; i < n; i++, in += strides[0], out += strides[1])
        *(float *)out = *(npy_bool *)in ? 1.0f : 0.0f;
    return 0;
}

/* maximum and minimum in the strided-loop signature, for one operand a scalar (stride 0),
 * where NumPy's own loop takes a slower strided path: NumPy's value for every pair,
 * isnan(a) ? a : (a > b ? a : b) (minimum: a < b), the second operand on ties of signed
 * zeros, checked against NumPy at first use (Note [Extrema with a scalar] in kernels.pyx).
 * No floating-point flag is left raised, as NumPy's loops clear them for these ufuncs. */
#define FG_EXTREMUM(NAME, T, OP)                                                            \
static FG_VECTOR void NAME##_cs(npy_intp n, const T *restrict a, T b, T *restrict out) {    \
    npy_intp i;                                                                             \
    for (i = 0; i < n; i++) { T v = a[i]; out[i] = v != v ? v : (v OP b ? v : b); }         \
}                                                                                           \
static FG_VECTOR void NAME##_sc(npy_intp n, T a, const T *restrict b, T *restrict out) {    \
    npy_intp i;                                                                             \
    if (a != a) { for (i = 0; i < n; i++) out[i] = a; return; }                             \
    for (i = 0; i < n; i++) { T w = b[i]; out[i] = a OP w ? a : w; }                        \
}                                                                                           \
static int NAME(void *context, char *const *data, const npy_intp *dims,                    \
                const npy_intp *strides, void *auxdata) {                                   \
    npy_intp i, n = dims[0], s = (npy_intp)sizeof(T);                                       \
    char *a = data[0], *b = data[1], *out = data[2];                                        \
    (void)context; (void)auxdata;                                                           \
    if (strides[1] == 0 && strides[0] == s && strides[2] == s) {                            \
        NAME##_cs(n, (const T *)a, *(const T *)b, (T *)out);                                \
    } else if (strides[0] == 0 && strides[1] == s && strides[2] == s) {                     \
        NAME##_sc(n, *(const T *)a, (const T *)b, (T *)out);                                \
    } else {                                                                                \
        for (i = 0; i < n; i++, a += strides[0], b += strides[1], out += strides[2]) {      \
            T v = *(const T *)a, w = *(const T *)b;                                         \
            *(T *)out = v != v ? v : (v OP w ? v : w);                                      \
        }                                                                                   \
    }                                                                                       \
    feclearexcept(FE_ALL_EXCEPT);                                                           \
    return 0;                                                                               \
}

FG_EXTREMUM(fg_maximum_d, double, >)
FG_EXTREMUM(fg_maximum_f, float, >)
FG_EXTREMUM(fg_minimum_d, double, <)
FG_EXTREMUM(fg_minimum_f, float, <)

static void fg_worker_main(void *arg) {
    fg_worker *w = (fg_worker *)arg;
    unsigned long long seen = w->seen;
    for (;;) {
        unsigned long long g;
        while ((g = (unsigned long long)FG_LOAD(&fg_state) >> 32) == seen) {
            /* Sleep at once, never spin (Note [Kernel pool]). */
            FG_STORE(&w->sleeping, 1);
            if (((unsigned long long)FG_LOAD(&fg_state) >> 32) != seen) {
                /* A job came while going to sleep. If the caller saw us asleep, it has
                 * released (or will release) the lock: take that release. */
                if (FG_XCHG(&w->sleeping, 0) == 0)
                    PyThread_acquire_lock(w->wake, WAIT_LOCK);
                continue;
            }
            PyThread_acquire_lock(w->wake, WAIT_LOCK);
        }
        seen = g;
        fg_participate(w->id, g);
    }
}

/* Make the pool's lock (once, and again after fork). Call with the GIL held. */
static int fg_pool_init(void) {
    if (fg_busy == NULL) {
        fg_busy = PyThread_allocate_lock();
        if (fg_busy == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

/* Start workers 1..n (thread 0 is the caller). Call with the GIL and the pool held, so
 * that no job is running: a new worker starts from the current generation, and a job's
 * loops cover every worker that can claim its chunks. Returns the number of workers
 * running, or -1 with a Python exception set. */
static int fg_pool_start(int n) {
    int i;
    if (n > FG_MAX_THREADS - 1)
        n = FG_MAX_THREADS - 1;
    for (i = fg_nworkers; i < n; i++) {
        fg_worker *w = &fg_workers[i + 1];
        w->id = i + 1;
        w->sleeping = 0;
        w->seen = (unsigned long long)FG_LOAD(&fg_state) >> 32;
        w->wake = PyThread_allocate_lock();
        if (w->wake == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        PyThread_acquire_lock(w->wake, WAIT_LOCK);
        if (PyThread_start_new_thread(fg_worker_main, w) == PYTHREAD_INVALID_THREAD_ID) {
            PyThread_free_lock(w->wake);
            PyErr_SetString(PyExc_RuntimeError, "fastgrad: could not start a kernel thread");
            return -1;
        }
        fg_nworkers = i + 1;
    }
    return fg_nworkers;
}

/* After fork() the child has no workers: forget them (their locks are leaked). */
static void fg_pool_after_fork(void) {
    fg_nworkers = 0;
    fg_busy = NULL;
}

/* Take the pool for one job without waiting; 0 if another thread is using it. */
static int fg_pool_acquire(void) {
    return fg_busy != NULL && PyThread_acquire_lock(fg_busy, NOWAIT_LOCK);
}

static void fg_pool_release(void) {
    PyThread_release_lock(fg_busy);
}

/* Run fg_job_now with the workers; the caller (holding the pool, not the GIL) is thread 0.
 * Returns the NumPy error bits raised, or -1 if a loop failed. */
static int fg_pool_run(void) {
    unsigned long long gen = ((unsigned long long)FG_LOAD(&fg_state) >> 32) + 1;
    int nch = fg_job_now.nchunks, i;
    unsigned long long unused = nch >= 32 ? 0ull
                              : (0xFFFFFFFFull & ~((1ull << nch) - 1ull));
    long spins = 0;
    gen &= 0xFFFFFFFFull;
    FG_STORE(&fg_done, 0);
    FG_STORE(&fg_fpe, 0);
    FG_STORE(&fg_failed, 0);
    FG_STORE(&fg_state, (fg_word)((gen << 32) | unused));
    for (i = 1; i <= fg_nworkers; i++) {
        if (FG_XCHG(&fg_workers[i].sleeping, 0))
            PyThread_release_lock(fg_workers[i].wake);
    }
    fg_participate(0, gen);
    while (FG_LOAD(&fg_done) < nch) {
        if (++spins % 1024 == 0)
            FG_YIELD();
        else
            FG_PAUSE();
    }
    return FG_LOAD(&fg_failed) ? -1 : (int)FG_LOAD(&fg_fpe);
}

/* Note [Buffer cache]
 * ~~~~~~~~~~~~~~~~~~~
 * The outputs of the pool's calls are allocated through a NumPy memory handler (set only
 * around those allocations; an array frees through the handler it was made with) that
 * keeps a few freed blocks of at least FG_CACHE_MIN bytes, up to fg_cache_limit bytes in
 * all, and hands one back for a request of exactly its size. A training step makes and
 * drops arrays of the same sizes every time; without the cache, glibc may return their
 * memory to the system after each step, and every step then page-faults it back in, from
 * two threads at once (measured: an add on a 512x512 float64 array took 450 us instead of
 * 70 us). Each block carries its size in a 64-byte header, so a block is only ever reused
 * for its own size whatever size NumPy reports when freeing it. */
#define FG_CACHE_MIN (256 * 1024)
#define FG_CACHE_SLOTS 16
#define FG_HEADER 64

static struct { char *raw; size_t n; } fg_cache[FG_CACHE_SLOTS];
static int fg_cache_count = 0;
static size_t fg_cache_bytes = 0;
static size_t fg_cache_limit = (size_t)64 << 20;
static fg_word fg_cache_lock = 0;

static void fg_cache_acquire(void) {
    while (!FG_CAS(&fg_cache_lock, 0, 1))
        FG_PAUSE();
}

static void fg_cache_release(void) {
    FG_STORE(&fg_cache_lock, 0);
}

static void *fg_block(char *raw, size_t n) {
    if (raw == NULL)
        return NULL;
    *(size_t *)raw = n;
    return raw + FG_HEADER;
}

static void *fg_cache_malloc(void *ctx, size_t n) {
    int i;
    (void)ctx;
    if (n >= FG_CACHE_MIN) {
        char *raw = NULL;
        fg_cache_acquire();
        for (i = fg_cache_count - 1; i >= 0; i--) {
            if (fg_cache[i].n == n) {
                raw = fg_cache[i].raw;
                fg_cache[i] = fg_cache[--fg_cache_count];
                fg_cache_bytes -= n;
                break;
            }
        }
        fg_cache_release();
        if (raw != NULL)
            return raw + FG_HEADER;
    }
    if (n > (size_t)-1 - FG_HEADER)
        return NULL;
    return fg_block((char *)malloc(n + FG_HEADER), n);
}

static void *fg_cache_calloc(void *ctx, size_t nelem, size_t elsize) {
    size_t n;
    (void)ctx;
    if (elsize && nelem > ((size_t)-1 - FG_HEADER) / elsize)
        return NULL;
    n = nelem * elsize;
    return fg_block((char *)calloc(1, n + FG_HEADER), n);
}

static void *fg_cache_realloc(void *ctx, void *p, size_t n) {
    (void)ctx;
    if (p == NULL)
        return fg_cache_malloc(ctx, n);
    if (n > (size_t)-1 - FG_HEADER)
        return NULL;
    return fg_block((char *)realloc((char *)p - FG_HEADER, n + FG_HEADER), n);
}

static void fg_cache_free(void *ctx, void *p, size_t size) {
    char *raw;
    size_t n;
    (void)ctx; (void)size;
    if (p == NULL)
        return;
    raw = (char *)p - FG_HEADER;
    n = *(size_t *)raw;
    if (n >= FG_CACHE_MIN) {
        int kept = 0;
        fg_cache_acquire();
        if (fg_cache_count < FG_CACHE_SLOTS && fg_cache_bytes + n <= fg_cache_limit) {
            fg_cache[fg_cache_count].raw = raw;
            fg_cache[fg_cache_count].n = n;
            fg_cache_count++;
            fg_cache_bytes += n;
            kept = 1;
        }
        fg_cache_release();
        if (kept)
            return;
    }
    free(raw);
}

/* Free every cached block; returns the bytes released. */
static size_t fg_cache_clear(void) {
    size_t released;
    fg_cache_acquire();
    released = fg_cache_bytes;
    while (fg_cache_count > 0) {
        fg_cache_count--;
        free(fg_cache[fg_cache_count].raw);
    }
    fg_cache_bytes = 0;
    fg_cache_release();
    return released;
}

static PyDataMem_Handler fg_mem_handler = {
    "fastgrad_buffer_cache",
    1,
    {NULL, fg_cache_malloc, fg_cache_calloc, fg_cache_realloc, fg_cache_free}
};

#endif
