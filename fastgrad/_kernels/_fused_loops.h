/* The inner loops of the fused ufuncs (Note [Fused kernels] in _fused.pyx), in C so that the
 * compiler vectorizes their contiguous paths: every loop is NumPy's inner-loop signature,
 * branch-free, with a contiguous path (restrict pointers) and a strided one. Each formula is
 * written with the operations, in the order and the precision, of the table's NumPy
 * composition that it replaces, so results are equal bit for bit (setup.py turns off the
 * contraction of a * b + c into a fused multiply-add for this module). */
#ifndef FASTGRAD_FUSED_LOOPS_H
#define FASTGRAD_FUSED_LOOPS_H

#include <fenv.h>
#include <math.h>
#include <stddef.h>
#include <numpy/npy_common.h>

#if defined(_MSC_VER) && !defined(restrict)
#define restrict __restrict
#endif
/* the contiguous paths stay functions of their own: inlined into the dispatching loop they
 * lose their restrict pointers, and with them their vector code */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && defined(__linux__) \
    && !defined(__AVX2__)
/* and on x86-64 Linux each is compiled twice, for the baseline and for AVX2, the one the
 * processor runs chosen when the module loads (an ifunc): NumPy's own loops are AVX2 */
#define FG_NOINLINE __attribute__((noinline, target_clones("avx2", "default")))
#elif defined(__GNUC__) || defined(__clang__)
#define FG_NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define FG_NOINLINE __declspec(noinline)
#else
#define FG_NOINLINE
#endif

/* maximum_backward(g, x, y): g * 1, 0.5 * g or g * 0 (Note [Ties of maximum]) */
#define FG_TIE(T, x, y) ((T)((x) > (y)) + (T)0.5 * (T)((x) == (y)))

/* The contiguous paths: every operand contiguous, except that the gradient (g) and the
 * second operand (y) may also be one value broadcast (stride 0): the gradient of a sum reaches
 * its op as one value broadcast, and maximum(x, 0) compares with one value. Each is a loop of
 * its own over restrict pointers, which the compiler vectorizes. */
#define FG_MAXIMUM_PATH(NAME, T, YI)                                                    \
static FG_NOINLINE void NAME(npy_intp n, const T *restrict g, const T *restrict x,          \
                             const T *restrict y, T *restrict out) {                        \
    const T y0 = y[0];                                                                      \
    (void)y0;                                                                               \
    for (npy_intp i = 0; i < n; i++) {                                                      \
        T w = FG_TIE(T, x[i], YI);                                                          \
        out[i] = g[i] * w;                                                                  \
    }                                                                                       \
}

/* with one gradient value, the three products g * 1, g * 0.5, g * 0 are made once and each
 * element selects one (the same values, and a select the compiler vectorizes) */
#define FG_MAXIMUM_PATH_G0(NAME, T, YI)                                                     \
static FG_NOINLINE void NAME(npy_intp n, const T *restrict g, const T *restrict x,          \
                             const T *restrict y, T *restrict out) {                        \
    const T y0 = y[0], above = g[0] * (T)1, tie = g[0] * (T)0.5, below = g[0] * (T)0;       \
    (void)y0;                                                                               \
    for (npy_intp i = 0; i < n; i++) {                                                      \
        T xv = x[i], yv = YI;                                                               \
        T v = xv == yv ? tie : below;                                                       \
        out[i] = xv > yv ? above : v;                                                       \
    }                                                                                       \
}

/* Note [Comparisons and the invalid flag]
 * The composition these loops replace, where(x == y, 0.5 * g, g * (x > y)), compares with
 * NumPy's comparison ufuncs, which raise no floating-point flag for a NaN operand ("NumPy
 * does not warn for comparisons involving a NaN", its floating-point error handling page).
 * C's x > y is the signaling comparison: the
 * compiler emits comisd, and for the vector loops cmpltpd (LT_OS); under AVX2 it emits the
 * signaling predicate even for C99's isgreater(x, y), and SSE2 has no quiet ordered vector
 * predicate at all (only ==, !=, ordered, unordered). So the loops keep their vector
 * comparisons and the dispatching loop corrects the flag afterwards, for the whole call:
 * if FE_INVALID was clear on entry and is set on exit, it is cleared and raised again
 * only if one of the loop's own products was inf * 0, i.e. an element with an infinite g and
 * neither x > y nor x == y (quiet tests: isgreaterequal), whose result is NaN. The rescan
 * runs only on calls that raised (a NaN operand or such a product), so the usual call pays
 * two fetestexcept.
 * The flags are then the composition's, but for one case, chosen: with an infinite g at a tie
 * (x == y) the composition raised invalid from the product g * (x > y) = inf * 0 that its
 * where() then discards (its result is 0.5 * g = inf); the kernel computes no such product
 * and raises nothing there: it raises invalid exactly where it makes a NaN from a gradient
 * that was not one (as the composition's kept products do). (Underflow, from 0.5 * g of a
 * subnormal g, is raised where the composition raised it, or not at all: the composition
 * computed 0.5 * g for every element.) */
#define FG_MAXIMUM_BACKWARD(NAME, T)                                                        \
FG_MAXIMUM_PATH(NAME##_cc, T, y[i])                                                         \
FG_MAXIMUM_PATH(NAME##_c0, T, y0)                                                         \
FG_MAXIMUM_PATH_G0(NAME##_0c, T, y[i])                                                         \
FG_MAXIMUM_PATH_G0(NAME##_00, T, y0)                                                         \
/* (Note [Comparisons and the invalid flag]) FE_INVALID, raised by the loop, cleared, and    \
 * raised again if some element's product was inf * 0 */                                   \
static void NAME##_invalid(char **args, npy_intp const *dims, npy_intp const *steps) {     \
    char *g = args[0], *x = args[1], *y = args[2];                                          \
    feclearexcept(FE_INVALID);                                                              \
    for (npy_intp i = 0; i < dims[0]; i++) {                                                \
        T gv = *(T *)g, xv = *(T *)x, yv = *(T *)y;                                         \
        if (isinf(gv) && !isgreaterequal(xv, yv)) {                                         \
            feraiseexcept(FE_INVALID);                                                      \
            return;                                                                         \
        }                                                                                   \
        g += steps[0]; x += steps[1]; y += steps[2];                                        \
    }                                                                                       \
}                                                                                           \
static void NAME(char **args, npy_intp const *dims, npy_intp const *steps, void *data) {   \
    npy_intp n = dims[0], s = sizeof(T);                                                    \
    char *g = args[0], *x = args[1], *y = args[2], *out = args[3];                          \
    int invalid = fetestexcept(FE_INVALID);                                                 \
    if (steps[1] == s && steps[3] == s && (steps[0] == s || steps[0] == 0)                  \
            && (steps[2] == s || steps[2] == 0)) {                                          \
        if (steps[0] == s)                                                                  \
            (steps[2] == s ? NAME##_cc : NAME##_c0)((n), (T *)g, (T *)x, (T *)y, (T *)out);  \
        else                                                                                \
            (steps[2] == s ? NAME##_0c : NAME##_00)((n), (T *)g, (T *)x, (T *)y, (T *)out);  \
    }                                                                                       \
    else {                                                                                  \
        for (npy_intp i = 0; i < n; i++) {                                                  \
            T w = FG_TIE(T, *(T *)x, *(T *)y);  /* (a statement of its own: no branch) */  \
            *(T *)out = *(T *)g * w;                                                        \
            g += steps[0]; x += steps[1]; y += steps[2]; out += steps[3];                   \
        }                                                                                   \
    }                                                                                       \
    if (!invalid && fetestexcept(FE_INVALID))                                               \
        NAME##_invalid(args, dims, steps);                                                  \
}

/* a binary formula f(g, y) of the gradient and the op's output (g contiguous or one value) */
#define FG_BINARY_PATH(NAME, T, GI, EXPR)                                                   \
static FG_NOINLINE void NAME(npy_intp n, const T *restrict g, const T *restrict y,          \
                             T *restrict out) {                                             \
    for (npy_intp i = 0; i < n; i++) { T gv = g[GI], yv = y[i]; out[i] = EXPR; }            \
}

#define FG_BINARY(NAME, T, EXPR)                                                            \
FG_BINARY_PATH(NAME##_c, T, i, EXPR)                                                        \
FG_BINARY_PATH(NAME##_0, T, 0, EXPR)                                                        \
static void NAME(char **args, npy_intp const *dims, npy_intp const *steps, void *data) {   \
    npy_intp n = dims[0], s = sizeof(T);                                                    \
    char *g = args[0], *y = args[1], *out = args[2];                                        \
    if ((steps[0] == s || steps[0] == 0) && steps[1] == s && steps[2] == s) {               \
        (steps[0] == s ? NAME##_c : NAME##_0)(n, (T *)g, (T *)y, (T *)out);                 \
        return;                                                                             \
    }                                                                                       \
    for (npy_intp i = 0; i < n; i++) {                                                      \
        T gv = *(T *)g, yv = *(T *)y; *(T *)out = EXPR;                                     \
        g += steps[0]; y += steps[1]; out += steps[2];                                      \
    }                                                                                       \
}

FG_MAXIMUM_BACKWARD(fg_maximum_backward_f, float)
FG_MAXIMUM_BACKWARD(fg_maximum_backward_d, double)
/* sigmoid: g * y * (1 - y), i.e. (g * y) * (1 - y) */
FG_BINARY(fg_sigmoid_backward_f, float, (gv * yv) * ((float)1 - yv))
FG_BINARY(fg_sigmoid_backward_d, double, (gv * yv) * ((double)1 - yv))
/* tanh: g * (1 - y * y) */
FG_BINARY(fg_tanh_backward_f, float, gv * ((float)1 - yv * yv))
FG_BINARY(fg_tanh_backward_d, double, gv * ((double)1 - yv * yv))

#endif
