"""Float32 stays float32 (issue 25): NumPy 2's promotion rules (NEP 50), where a Python number
next to a float32 array does not widen it, for every op of the registry, every public
``fastgrad.np`` function and operator, and ``fastgrad.scipy.special`` / ``stats``, in the
forward, in the first-order gradient and in the second-order one.

A gradient is cast to its input's dtype by the engine, so a rule that widens still hands back
float32; what shows the widening is the recorded gradient (``create_graph=True``), whose
graph then holds float64 nodes. The scans walk those graphs (Note [Weak scalars] in
``_bindings.py``).
"""
import operator
import os
import sys
import warnings

import numpy as onp
import pytest

import fastgrad as mx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import test_ops as T  # noqa: E402
from op_specs import COMPOSITE_SPECS, SPECS  # noqa: E402

WIDE = {onp.dtype("float64"), onp.dtype("complex128")}

# Where fastgrad deliberately differs from NumPy (each documented).
DELIBERATE = {
    # NumPy's eig returns real arrays when every eigenvalue happens to be real (a dtype that
    # depends on the values); fastgrad's, as PyTorch's, is always complex
    "np.linalg.eig", "np.linalg.eigvals",
    # lstsq's rank is a Python int, not NumPy's int32 (not a float promotion)
    "np.linalg.lstsq",
}
# Functions to which NumPy itself passes a Python number as a float64 array (np.asarray), so
# that outer(0.5, x32) is float64 in NumPy too: the public scan below compares them with
# NumPy directly; here their registry ops and composites are not held to float32.
NUMPY_WIDENS = {"convolve", "np.convolve", "np.correlate", "np.meshgrid",
                "np.meshgrid_ij_sparse", "outer", "kron", "tensordot", "dot", "np.polyval"}
# Composites that take only arrays in MXNet: called with a Python number for gamma, beta or
# a bias they reshape it as NumPy does (np.reshape(0.5, ...) is a float64 array).
ARRAYS_ONLY = {"npx.batch_norm", "npx.layer_norm", "npx.instance_norm", "npx.convolution_1d",
               "npx.convolution_3d", "npx.deconvolution"}


def wide_nodes(arrays):
    """The names of the recorded ops with a float64/complex128 output behind ``arrays``."""
    seen, bad = set(), set()
    stack = [a.node for a in arrays if getattr(a, "node", None) is not None]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if any(onp.dtype(d) in WIDE for d in n.output_dtypes):
            bad.add(n.name)
        stack.extend(n.parents_list())
    return sorted(bad)


def _numpy_dtypes(ref, args, params):
    """NumPy's own output dtypes for ``args`` (float32 arrays and Python numbers)."""
    if not str(getattr(ref, "__module__", "")).startswith("numpy"):
        return None
    with warnings.catch_warnings(), onp.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        out = ref(*args, **params)
    return [onp.asarray(o).dtype for o in (out if isinstance(out, (tuple, list)) else [out])]


def _check_orders(arrs, diff, outs, second, what, found):
    """The recorded first- and second-order gradients of ``outs`` in the float32 variables:
    float32, with no float64 node."""
    fouts = [o for o in outs if isinstance(o, mx.np.ndarray) and o.dtype == onp.float32
             and o.node is not None]
    if not diff or not fouts:
        return
    variables = [arrs[i] for i in diff]
    with mx.autograd.record():
        loss = sum((o * 1.5).sum() for o in fouts)
        gs = mx.autograd.grad(loss, variables, create_graph=True, allow_unused=True)
    for g in gs:
        if g.dtype != onp.float32:
            found.append("%s: gradient %s" % (what, g.dtype))
    wide = wide_nodes(gs)
    if wide:
        found.append("%s: first-order gradient computes in float64 in %s" % (what, wide))
    if not second:
        return
    with mx.autograd.record():
        h = [(g * g).sum() for g in gs if g.node is not None]
        if not h:
            return
        g2 = mx.autograd.grad(sum(h), variables, create_graph=True, allow_unused=True)
    wide = wide_nodes(g2)
    if wide:
        found.append("%s: second-order gradient computes in float64 in %s" % (what, wide))


def _scan_spec(name, spec, found):
    for k, case in enumerate(spec.cases):
        c = T.Case(name, spec, case)
        floats = [i for i, v in enumerate(c.values) if onp.asarray(v).dtype.kind == "f"]
        # all float32 arrays; then each float input in turn a Python number (while another
        # float input stays an array)
        variants = [None] + ([i for i in floats if i not in spec.make] if len(floats) > 1
                             else [])
        for scalar in variants:
            if scalar is not None and (name in ARRAYS_ONLY or name in NUMPY_WIDENS
                                       or not onp.size(c.values[scalar])):
                continue
            arrs = c.arrays(c.values, onp.float32)
            if scalar is not None:
                arrs[scalar] = float(onp.asarray(c.values[scalar]).flat[0])
            diff = [i for i in c.diff if i != scalar]
            what = "%s case %d%s" % (name, k, "" if scalar is None else
                                     " with input %d a Python float" % scalar)
            for i in diff:
                arrs[i].attach_grad()
            try:
                with mx.autograd.record():
                    outs = T._as_tuple(c.forward(arrs))
            except Exception:               # a scalar this op does not take
                if scalar is None:
                    raise
                continue
            expected = None
            if scalar is not None:
                raw = [a.asnumpy() if isinstance(a, mx.np.ndarray) else a for a in arrs]
                try:
                    expected = _numpy_dtypes(T._reference(name, spec), raw, case.params)
                except Exception:
                    expected = None
            if expected is not None and any(d in WIDE for d in expected):
                continue                    # NumPy widens too (outer(0.5, x), kron, dot...)
            if not spec.f32:
                continue                    # declared float64 (float_power)
            for o in outs:
                if isinstance(o, mx.np.ndarray) and o.dtype in WIDE:
                    found.append("%s: output %s" % (what, o.dtype))
            wide = wide_nodes([o for o in outs if isinstance(o, mx.np.ndarray)])
            if wide:
                found.append("%s: forward computes in float64 in %s" % (what, wide))
            try:
                _check_orders(arrs, diff, outs, spec.order2, what, found)
            except ValueError as e:
                if "singular vectors" not in str(e):     # complete_basis: by design
                    raise


SPEC_GROUPS = {n: s for n, s in sorted(dict(SPECS, **COMPOSITE_SPECS).items())}


def test_every_op_keeps_float32_with_python_numbers_to_second_order():
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, spec in SPEC_GROUPS.items():
            _scan_spec(name, spec, found)
    assert not found, "\n".join(found)


# ---------------------------------------------------------------- public functions
def _patterns(a):
    return [("f(a)", (a,)), ("f(a, 0.5)", (a, 0.5)), ("f(0.5, a)", (0.5, a)),
            ("f(a, 2)", (a, 2)), ("f(a, a)", (a, a)), ("f(a, 1.5, 2.5)", (a, 1.5, 2.5)),
            ("f(a, a, 0.5)", (a, a, 0.5))]


def _dtypes(r):
    if isinstance(r, (tuple, list)):
        return tuple(_dtypes(x) for x in r)
    return str(getattr(r, "dtype", type(r).__name__))


def _public_functions():
    import scipy.special as ssp
    import fastgrad.scipy.special as fsp
    out = []
    for name in sorted(mx.np.__all__):
        ref, fn = getattr(onp, name, None), getattr(mx.np, name, None)
        if callable(ref) and callable(fn) and not isinstance(ref, type):
            out.append(("np." + name, ref, fn))
    for mod in ("linalg", "fft"):
        for name in sorted(dir(getattr(mx.np, mod))):
            ref = getattr(getattr(onp, mod), name, None)
            fn = getattr(getattr(mx.np, mod), name, None)
            if not name.startswith("_") and callable(ref) and callable(fn):
                out.append(("np.%s.%s" % (mod, name), ref, fn))
    for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
        op = getattr(operator, name)
        out.append(("operator." + name, op, op))
    for name in sorted(n for n in dir(fsp) if not n.startswith("_")):
        ref, fn = getattr(ssp, name, None), getattr(fsp, name)
        if callable(ref) and callable(fn) and not isinstance(ref, type):
            out.append(("scipy.special." + name, ref, fn))
    return [f for f in out if f[0] not in DELIBERATE]


def test_public_functions_follow_numpys_promotion_to_second_order():
    """Each public function (and operator) called with float32 arrays and Python numbers:
    where NumPy (SciPy) keeps float32, fastgrad does, and its recorded gradients of first and
    second order compute in float32."""
    pytest.importorskip("scipy")
    base = onp.random.default_rng(0).uniform(0.2, 0.9, (3, 3)).astype(onp.float32) \
        + onp.eye(3, dtype=onp.float32)
    found = []
    with warnings.catch_warnings(), onp.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for label, ref, fn in _public_functions():
            for pattern, args in _patterns(base.copy()):
                try:
                    want = _dtypes(ref(*args))
                except Exception:
                    continue
                if "float32" not in want and "complex64" not in want:
                    continue
                variables = []
                call = []
                for a in args:
                    if isinstance(a, onp.ndarray):
                        v = mx.np.array(a.copy())
                        v.attach_grad()
                        variables.append(v)
                        call.append(v)
                    else:
                        call.append(a)
                try:
                    with mx.autograd.record():
                        got = fn(*call)
                except Exception:
                    continue                # fastgrad does not take this call
                what = "%s %s" % (label, pattern)
                if _dtypes(got) != want:
                    found.append("%s: NumPy gives %s, fastgrad %s" % (what, want, _dtypes(got)))
                    continue
                outs = list(got) if isinstance(got, (tuple, list)) else [got]
                try:
                    _orders_of(variables, outs, what, found)
                except (ValueError, NotImplementedError, mx.base.MXNetError):
                    pass                    # not differentiable here (rank, ties...)
    assert not found, "\n".join(found)


def _orders_of(variables, outs, what, found):
    _check_orders(variables, list(range(len(variables))), outs, True, what, found)


def test_scipy_stats_keep_float32_with_python_parameters():
    pytest.importorskip("scipy")
    from fastgrad.scipy import stats
    x = mx.np.array(onp.array([0.3, 0.6, 0.9], dtype=onp.float32))
    calls = {
        "norm.logpdf": lambda x: stats.norm.logpdf(x, 0.5, 1.5),
        "norm.cdf": lambda x: stats.norm.cdf(x, 0.5, 1.5),
        "t.logpdf": lambda x: stats.t.logpdf(x, 3.0, 0.5, 1.5),
        "gamma.logpdf": lambda x: stats.gamma.logpdf(x, 2.0),
        "beta.logpdf": lambda x: stats.beta.logpdf(x, 2.0, 3.0),
        "chi2.logpdf": lambda x: stats.chi2.logpdf(x, 3.0),
    }
    found = []
    for label, call in calls.items():
        v = mx.np.array(x.asnumpy())
        v.attach_grad()
        with mx.autograd.record():
            out = call(v)
        if out.dtype != onp.float32:
            found.append("%s: output %s" % (label, out.dtype))
            continue
        _orders_of([v], [out], label, found)
    assert not found, "\n".join(found)
