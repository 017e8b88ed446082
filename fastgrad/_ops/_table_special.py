"""The SciPy section of the derivative table (Note [Table sections] in _derivatives.py):
special functions, N-dimensional convolution and matrix functions.

Note [SciPy on first use]
~~~~~~~~~~~~~~~~~~~~~~~~~
SciPy is an optional dependency (``pip install fastgrad[scipy]``) and ``import fastgrad``
must not import it: the entries here are registered at import like every op, but their
kernels look SciPy up when they first run (``_scipy``), which is also where a missing SciPy
is reported, naming the op. The kernels take and return NumPy arrays; SciPy's functions are
ufuncs, so broadcasting is theirs.

An input with no closed-form derivative (the order of ``polygamma``, ``iv``, ``jv``; the
shape parameter of ``gammainc``; ``betainc``'s ``a`` and ``b``) has no rule: recording it
with a variable raises ``NotImplementedError`` naming the op and the argument, while the
other inputs stay differentiable.
"""

import importlib

import numpy as np

_MODULES = {}


def _scipy(name):
    """``scipy.<name>``, imported on first use (Note [SciPy on first use])."""
    module = _MODULES.get(name)
    if module is None:
        try:
            module = importlib.import_module("scipy." + name)
        except ImportError as e:
            raise ImportError("fastgrad.scipy needs SciPy: pip install 'fastgrad[scipy]' "
                              "(%s)" % e) from None
        _MODULES[name] = module
    return module


def _special(fname):
    def kernel(*args):
        return getattr(_scipy("special"), fname)(*args)
    kernel.__name__ = fname
    return kernel


def rgamma_taylor(x, k):
    """The ``k``-th derivative of ``rgamma`` (1/Gamma) at the pole ``x = -n`` of Gamma
    (``n = 0, 1, ...``), in the shape and dtype of ``x``; 0 where ``x`` is not one. rgamma's
    rule selects it there (Note [rgamma at the poles]).

    Note [rgamma at the poles]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~
    1/Gamma is entire, but its rule ``-result * digamma(x)`` is ``0 * inf`` at ``x = -n``.
    There the rule takes ``rgamma_taylor(x, 1)``, an op whose value is the k-th derivative
    at the pole and whose own rule is ``rgamma_taylor(x, k + 1)`` (as ``sinc_maclaurin``,
    Note [sinc at 0] in _rules.py), so every order is exact. The coefficients come from the
    reflection formula: with ``x = -n + t``,
    ``1/Gamma(x) = (-1)**n n! * (sin(pi t)/pi) * exp(L(t))``, where
    ``L(t) = log(Gamma(n + 1 - t)/n!) = sum_j (-1)**j psi^(j-1)(n + 1) t**j / j!``
    (``psi^(j-1)`` the polygamma functions); ``exp`` of the series by the usual recurrence.
    So ``rgamma'(-n) = (-1)**n n!`` and ``rgamma''(-n) = -2 (-1)**n n! digamma(n + 1)``.
    """
    special = _scipy("special")
    x = np.asarray(x)
    wide = x.astype(np.float64)
    pole = (wide <= 0) & (wide == np.floor(wide))
    out = np.zeros(wide.shape)
    for n in np.unique(-wide[pole]):
        # L's coefficients a_j, j = 1..k
        a = [0.0] + [(-1) ** j * float(special.polygamma(j - 1, n + 1)) / _factorial(j)
                     for j in range(1, k + 1)]
        e = [1.0]
        for m in range(1, k + 1):
            e.append(sum(j * a[j] * e[m - j] for j in range(1, m + 1)) / m)
        # sin(pi t)/pi = sum over odd i of (-1)**((i-1)/2) pi**(i-1) t**i / i!
        c = sum((-1) ** ((i - 1) // 2) * np.pi ** (i - 1) / _factorial(i) * e[k - i]
                for i in range(1, k + 1, 2))
        with np.errstate(over="ignore", invalid="ignore"):
            value = c * _factorial(k) * (-1) ** int(n) * special.gamma(n + 1) if c else 0.0
        out[wide == -n] = value
    return out.astype(x.dtype if x.dtype.kind == "f" else np.float64, copy=False)


def _factorial(j):
    return float(np.prod(np.arange(1, j + 1, dtype=np.float64)))


def _same_float(out, *inputs):
    """SciPy's result in the floating dtype of the inputs (float32 stays float32); a complex
    result (of complex inputs) stays complex, never cast to real."""
    out = np.asarray(out)
    if out.dtype.kind == "c":
        return out
    # Python numbers are weak (NEP 50, Note [Weak scalars] in _bindings.py): they do not
    # widen a float32 array's result.
    arrays = [a for a in inputs if type(a) not in (float, int, bool)]
    floats = [np.asarray(a).dtype for a in arrays if np.asarray(a).dtype.kind == "f"]
    dtype = np.result_type(*floats) if floats else np.float64
    return out.astype(dtype, copy=False)


def _special_float(fname):
    def kernel(*args):
        return _same_float(getattr(_scipy("special"), fname)(*args), *args)
    kernel.__name__ = fname
    return kernel


def i0(x):
    return _same_float(np.i0(x), x)


def convolve_full(x, y):
    return _same_float(_scipy("signal").convolve(x, y, mode="full", method="direct"), x, y)


def convolve_valid(x, y):
    return _same_float(_scipy("signal").convolve(x, y, mode="valid", method="direct"), x, y)


def solve_triangular(a, b, lower, trans, unit_diagonal):
    return _same_float(_scipy("linalg").solve_triangular(
        a, b, lower=lower, trans=trans, unit_diagonal=unit_diagonal), a, b)


def expm(a):
    return _same_float(_scipy("linalg").expm(a), a)


def sqrtm(a):
    out = _scipy("linalg").sqrtm(a)
    if np.iscomplexobj(out) and not np.iscomplexobj(a):
        if np.abs(out.imag).max() > 1e-8 * max(np.abs(out.real).max(), 1.0):
            raise ValueError("fastgrad.scipy.linalg.sqrtm: the matrix has no real square root "
                             "(negative eigenvalues); pass a complex matrix")
        out = out.real
    return _same_float(out, a)


def sylvester(a, b, q):
    """The ``y`` with ``a y + y b = q``."""
    return _same_float(_scipy("linalg").solve_sylvester(a, b, q), a, b, q)


# Note [log_ndtr's slope]: d/dx log_ndtr(x) = phi(x) / Phi(x). As ``exp(-x*x/2 - log_ndtr(x))``
# in the input's dtype it cancels two numbers near x*x/2 whose difference is about log(-x):
# float32 keeps 24 bits of x*x/2, so at x = -1000 (x*x/2 = 5e5, spacing 1/32) the slope came
# out 1.4% off. ``log_ndtr_slope`` computes it in float64 (exact to ~1e-13 relative down to
# x = -40) and below x = -40 from the asymptotic series of the Mills ratio,
# phi/Phi(-t) = t / (1 - 1/t^2 + 3/t^4 - 15/t^6 + ...), whose truncation error there is
# below 1e-17; the result is cast back to x's dtype. Its own derivative -s * (x + s) (s the
# slope) still cancels x against s for very negative x, so in float32 the second derivative
# is accurate only for x above about -100.
_MILLS_SERIES = (1.0, -1.0, 3.0, -15.0, 105.0, -945.0, 10395.0, -135135.0)


def log_ndtr_slope(x):
    """``phi(x) / Phi(x)``, the derivative of ``log_ndtr`` (Note [log_ndtr's slope])."""
    x = np.asarray(x)
    wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    with np.errstate(over="ignore", under="ignore"):
        slope = np.exp(-0.5 * wide * wide - _scipy("special").log_ndtr(wide)) / np.sqrt(2 * np.pi)
    if wide.dtype.kind == "f":
        far = wide < -40.0
        if far.any():
            t = -wide[far]
            u = 1.0 / (t * t)
            series = np.zeros_like(t)
            for coefficient in reversed(_MILLS_SERIES):
                series = series * u + coefficient
            slope[far] = t / series
    return _same_float(slope, x)


# ---------------------------------------------------------------- rule helpers
def ndim_flip(x):
    """``x`` reversed along every axis."""
    return np.flip(x, axis=tuple(range(np.ndim(x))))


def triangle(x, lower, unit_diagonal):
    """The lower (or upper) triangle of ``x``, without the diagonal if it is implicit."""
    if lower:
        return np.tril(x, -1 if unit_diagonal else 0)
    return np.triu(x, 1 if unit_diagonal else 0)


def outer_last(u, v):
    """``u v^T`` for matrices, ``outer(u, v)`` for vectors."""
    if np.ndim(u) == 1:
        return np.multiply(np.reshape(u, (-1, 1)), np.reshape(v, (1, -1)))
    return np.matmul(u, np.swapaxes(v, -1, -2))


def expm_backward_block(g, a):
    """``[[a^T, g], [0, a^T]]``: the upper-right block of its exponential is the adjoint of
    expm's Fréchet derivative at ``a`` applied to ``g``."""
    at = np.swapaxes(a, -1, -2)
    top = np.concatenate([at, g], axis=-1)
    bottom = np.concatenate([np.zeros_like(g), at], axis=-1)
    return np.concatenate([top, bottom], axis=-2)


HELPERS = {"ndim_flip": ndim_flip, "triangle": triangle, "outer_last": outer_last,
           "expm_backward_block": expm_backward_block, "SQRT_2PI": float(np.sqrt(2 * np.pi))}


def entries(Op, NONDIFF):
    S = _special_float
    return [
        # ------------------------------------------------ gamma family
        Op("gamma", S("gamma"), "x", x="g * result * digamma(x)", npx=True),
        Op("gammaln", S("gammaln"), "x", x="g * digamma(x)", npx=True),
        # At the poles of Gamma the rule takes rgamma_taylor (Note [rgamma at the poles]);
        # elsewhere x stands in for a point away from them, whose branch is not taken.
        Op("rgamma", S("rgamma"), "x",
           x="where((x <= 0) & (x == floor(x)), g * rgamma_taylor(x, 1), -g * rgamma("
             "where((x <= 0) & (x == floor(x)), 0.5, x)) * digamma(where((x <= 0) & "
             "(x == floor(x)), 0.5, x)))"),
        Op("rgamma_taylor", rgamma_taylor, "x; k=1", x="g * rgamma_taylor(x, k + 1)"),
        Op("digamma", S("digamma"), "x", x="g * polygamma(1, x)", npx=True),
        # The order n has no derivative: no rule (an error if it is a variable).
        Op("polygamma", S("polygamma"), "n, x", x="g * polygamma(n + 1, x)"),
        Op("beta", S("beta"), "a, b",
           a="g * result * (digamma(a) - digamma(a + b))",
           b="g * result * (digamma(b) - digamma(a + b))"),
        Op("betaln", S("betaln"), "a, b",
           a="g * (digamma(a) - digamma(a + b))", b="g * (digamma(b) - digamma(a + b))"),
        # Regularized incomplete gamma and beta: differentiable in x only.
        # x ** (a - 1) as power, whose rule is exact at x == 0 to every order (Note [The
        # slope of a power]); exp((a - 1) * log(x)) gave NaN there (0 * inf).
        Op("gammainc", S("gammainc"), "a, x",
           x="g * power(x, a - 1) * exp(-x - gammaln(a))"),
        Op("gammaincc", S("gammaincc"), "a, x",
           x="-g * power(x, a - 1) * exp(-x - gammaln(a))"),
        Op("betainc", S("betainc"), "a, b, x",
           x="g * exp((a - 1) * log(x) + (b - 1) * log1p(-x) - betaln(a, b))"),

        # Student's t distribution function; the degrees of freedom have no rule.
        Op("stdtr", S("stdtr"), "df, t",
           t="g * exp(gammaln((df + 1) / 2) - gammaln(df / 2) - 0.5 * log(df * pi) "
             "- (df + 1) / 2 * log1p(t * t / df))"),

        # ------------------------------------------------ error function and normal law
        Op("erfc", S("erfc"), "x", x="-g * TWO_OVER_SQRT_PI * conj(exp(-x * x))", complex=True),
        Op("erfcinv", S("erfcinv"), "x", x="-g * SQRT_PI_OVER_2 * exp(result * result)"),
        Op("ndtr", S("ndtr"), "x", x="g * exp(-0.5 * x * x) / SQRT_2PI"),
        Op("log_ndtr", S("log_ndtr"), "x", x="g * log_ndtr_slope(x)"),
        Op("log_ndtr_slope", log_ndtr_slope, "x", x="-g * result * (x + result)"),
        Op("ndtri", S("ndtri"), "x", x="g * SQRT_2PI * exp(0.5 * result * result)"),
        Op("logit", S("logit"), "x", x="g / (x * (1 - x))"),
        Op("xlogy", S("xlogy"), "x, y", x="g * log(y)", y="g * x / y"),
        Op("xlog1py", S("xlog1py"), "x, y", x="g * log1p(y)", y="g * x / (1 + y)"),

        # ------------------------------------------------ Bessel functions
        # I_v' = (I_{v-1} + I_{v+1}) / 2, J_v' = (J_{v-1} - J_{v+1}) / 2, the same for Y_v;
        # the order v has no rule.
        Op("iv", S("iv"), "v, x", x="g * (iv(v - 1, x) + iv(v + 1, x)) / 2"),
        Op("ive", S("ive"), "v, x",
           x="g * ((ive(v - 1, x) + ive(v + 1, x)) / 2 - sign(x) * result)"),
        Op("jv", S("jv"), "v, x", x="g * (jv(v - 1, x) - jv(v + 1, x)) / 2"),
        Op("yv", S("yv"), "v, x", x="g * (yv(v - 1, x) - yv(v + 1, x)) / 2"),
        # NumPy's own i0 (fastgrad.np.i0 needs no SciPy).
        Op("i0", i0, "x", x="g * i1(x)"),
        Op("i1", S("i1"), "x", x="g * (i0(x) + iv(2, x)) / 2"),
        Op("i0e", S("i0e"), "x", x="g * (i1e(x) - sign(x) * result)"),
        Op("i1e", S("i1e"), "x", x="g * ((i0e(x) + ive(2, x)) / 2 - sign(x) * result)"),
        Op("j0", S("j0"), "x", x="-g * j1(x)"),
        Op("j1", S("j1"), "x", x="g * (j0(x) - jv(2, x)) / 2"),
        Op("y0", S("y0"), "x", x="-g * y1(x)"),
        Op("y1", S("y1"), "x", x="g * (y0(x) - yv(2, x)) / 2"),

        # ------------------------------------------------ signal and linear algebra
        # Note: valid mode expects x at least as large as y along every axis (the wrapper
        # orders them; convolution commutes).
        Op("convolve_full", convolve_full, "x, y",
           x="convolve_valid(g, ndim_flip(y))", y="convolve_valid(g, ndim_flip(x))"),
        Op("convolve_valid", convolve_valid, "x, y",
           x="convolve_full(g, ndim_flip(y))", y="convolve_valid(ndim_flip(x), g)"),
        Op("solve_triangular", solve_triangular, "a, b; lower, trans, unit_diagonal",
           b="solve_triangular(a, g, lower, 1 - trans, unit_diagonal)",
           a="-triangle(outer_last(solve_triangular(a, g, lower, 1 - trans, unit_diagonal), "
             "result) if trans == 0 else outer_last(result, solve_triangular(a, g, lower, "
             "1 - trans, unit_diagonal)), lower, unit_diagonal)"),
        Op("expm", expm, "a",
           a="expm(expm_backward_block(g, a))[..., :a.shape[-1], a.shape[-1]:]"),
        Op("sqrtm", sqrtm, "a",
           a="sylvester(swapaxes(result, -1, -2), swapaxes(result, -1, -2), g)"),
        # a y + y b = q; the adjoint solves a^T z + z b^T = g.
        Op("sylvester", sylvester, "a, b, q",
           q="sylvester(swapaxes(a, -1, -2), swapaxes(b, -1, -2), g)",
           a="-outer_last(sylvester(swapaxes(a, -1, -2), swapaxes(b, -1, -2), g), result)",
           b="-matmul(swapaxes(result, -1, -2), "
             "sylvester(swapaxes(a, -1, -2), swapaxes(b, -1, -2), g))"),
    ]
