/* Per-thread autograd flags.
 *
 * Note [Per-thread state]
 * Recording and training are properties of the thread that runs the Python code, as in
 * MXNet and Chainer: a thread that records a graph must not make another thread record.
 * The flags are C thread-local variables so the hot path reads them with one load, no
 * Python-level lookup. They live in this header, included by _state.pyx only; every other
 * module reads them through the functions _state.pxd declares.
 */
#ifndef FASTGRAD_TLS_H
#define FASTGRAD_TLS_H

#if defined(_MSC_VER)
#  define FG_THREAD_LOCAL __declspec(thread)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_THREADS__)
#  define FG_THREAD_LOCAL _Thread_local
#else
#  define FG_THREAD_LOCAL __thread
#endif

static FG_THREAD_LOCAL int fg_recording = 0;
static FG_THREAD_LOCAL int fg_training = 0;
static FG_THREAD_LOCAL int fg_anomaly = 0;
/* The backward pass this thread is running, innermost first (borrowed: the engine sets it
 * for the duration of the pass and restores the outer one after; Note [Pass state]). */
static FG_THREAD_LOCAL void *fg_pass = 0;

#endif
