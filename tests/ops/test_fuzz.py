"""Differential fuzzing: random programs of table ops against finite differences.

Hypothesis (seeded: ``derandomize=True``) draws programs of 1 to 6 steps over two inputs of
broadcastable random shapes (0-d, size-1 and empty axes included). Each step applies an op of
the registry, found by its signature and its spec in ``op_specs.py``: elementwise unary and
binary ops, reductions (with and without ``keepdims``), ops along an axis, and joining values
with ``stack``/``concatenate``. Before an op, its operand is mapped smoothly into the op's
domain (``lo + (hi - lo) * (0.05 + 0.45 * (1 + tanh(v + 0.3)))``, itself table ops), so every value
stays where the op is smooth and finite. Input values come from a NumPy generator seeded by
the program, so ties and other non-smooth points have probability zero.

Checked for every program:

* float64: the gradient along a random direction equals the central difference of the loss,
  and the Hessian-vector product (double backward) equals the central difference of the
  gradient;
* complex128 (ops checked for complex values only): the same on the real and imaginary parts,
  in PyTorch's convention (Note [Complex gradients]);
* float32: gradients are float32 and agree with the float64 ones.

Either the results are right or the program raises an exception that names a fastgrad op.

Random values never land on a rule's special points (exact zeros, ties, p == 0); every op is
also checked *at* them and over empty axes, mixed second derivatives of two-input ops
included (Note [Fuzzing the special points], below; ``FASTGRAD_FUZZ_SPECIAL=full`` for every
point).

Note [Fuzzed construction and casts]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Programs also build values with ``np.array([a, b])`` (history through construction) and cast
through integer and bool dtypes (whose derivative is zero), besides the float casts. Either can
be switched off with ``FASTGRAD_FUZZ_CONSTRUCTION=0`` / ``FASTGRAD_FUZZ_CASTS=0`` to narrow down
a failure.
"""
import os
import sys

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad._ops._registry import REGISTRY

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import op_specs  # noqa: E402
from op_specs import SPECS  # noqa: E402

np = mx.np
LIST_CONSTRUCTION = os.environ.get("FASTGRAD_FUZZ_CONSTRUCTION", "1") != "0"
INTEGER_CASTS = os.environ.get("FASTGRAD_FUZZ_CASTS", "1") != "0"
PROGRAMS = int(os.environ.get("FASTGRAD_FUZZ_PROGRAMS", "2000"))   # float64; others scale

RAN = {"float64": 0, "complex128": 0, "float32": 0}
ERRORS = {}     # the clear errors programs met, one example each (printed at the end)


# ---------------------------------------------------------------- ops from the registry
def _domains(spec, n):
    d = spec.domain
    return list(d) if isinstance(d, list) else [d] * n


def _keeps_shape(prim):
    """Whether an op along an axis keeps its input's shape (cumsum, softmax; not squeeze)."""
    try:
        return prim(onp.ones((2, 3)) * 0.5, 1).shape == (2, 3)
    except Exception:
        return False


def _ops():
    unary, binary, reduce, along = [], [], [], []
    for name, prim in sorted(REGISTRY.items()):
        spec = SPECS.get(name)
        if spec is None or not prim.differentiable or spec.make or spec.nondiff:
            continue
        if spec.cases is op_specs.UNARY and prim.n_in == 1:
            unary.append((name, _domains(spec, 1)))
        elif spec.cases is op_specs.BINARY and prim.n_in == 2:
            binary.append((name, _domains(spec, 2)))
        elif prim.n_in == 1 and prim.param_names == ("axis", "keepdims") or \
                prim.param_names == ("axis", "keepdims", "ddof"):
            reduce.append((name, _domains(spec, 1)))
        elif prim.n_in == 1 and prim.param_names == ("axis",) and _keeps_shape(prim):
            along.append((name, _domains(spec, 1)))
    return unary, binary, reduce, along


UNARY, BINARY, REDUCE, ALONG = _ops()


def _complex_ok(entry):
    return REGISTRY[entry[0]].complex_mode != 0


C_UNARY, C_BINARY = [e for e in UNARY if _complex_ok(e)], [e for e in BINARY if _complex_ok(e)]
C_REDUCE, C_ALONG = [e for e in REDUCE if _complex_ok(e)], [e for e in ALONG if _complex_ok(e)]


def test_the_fuzzer_draws_from_every_category():
    assert len(UNARY) >= 30 and len(BINARY) >= 10 and len(REDUCE) >= 8 and len(ALONG) >= 4
    assert len(C_UNARY) >= 20 and len(C_BINARY) >= 4 and len(C_REDUCE) >= 4


# ---------------------------------------------------------------- programs
@st.composite
def shapes(draw):
    ndim = draw(st.integers(0, 3))
    dims = st.sampled_from([1, 2, 3, 0]) if draw(st.integers(0, 9)) == 0 else \
        st.sampled_from([1, 2, 3])
    base = tuple(draw(dims) for _ in range(ndim))
    # the second input: a suffix of the first, with some axes of length 1
    keep = draw(st.integers(0, ndim))
    other = tuple(1 if draw(st.booleans()) else n for n in base[ndim - keep:])
    return base, other


@st.composite
def programs(draw, kind):
    unary, binary, reduce, along = (C_UNARY, C_BINARY, C_REDUCE, C_ALONG) \
        if kind == "complex128" else (UNARY, BINARY, REDUCE, ALONG)
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        what = draw(st.sampled_from(["unary"] * 4 + ["binary"] * 3 + ["reduce", "along",
                                                                       "join", "cast", "shape",
                                                                       "shape"]))
        if what == "unary":
            steps.append(("unary", draw(st.sampled_from(unary))))
        elif what == "binary":
            steps.append(("binary", draw(st.sampled_from(binary)), draw(st.integers(0, 9))))
        elif what == "reduce" and reduce:
            steps.append(("reduce", draw(st.sampled_from(reduce)), draw(st.integers(-3, 3)),
                          draw(st.booleans())))
        elif what == "along" and along:
            steps.append(("along", draw(st.sampled_from(along)), draw(st.integers(-3, 3))))
        elif what == "join":
            how = ["stack", "concatenate"] + (["array"] if LIST_CONSTRUCTION else [])
            steps.append(("join", draw(st.sampled_from(how)), draw(st.integers(0, 9))))
        elif what == "shape":
            names = sorted(n for n in SHAPE_STEPS
                           if kind != "complex128" or REGISTRY[n].complex_mode)
            steps.append(("shape", draw(st.sampled_from(names)),
                          draw(st.integers(0, 9))))
        elif what == "cast" and kind != "complex128":
            # a float32 round trip inside a float64 program would defeat finite differences
            casts = ["float64"] + (["float32"] if kind == "float32" else []) \
                + (["int64", "bool"] if INTEGER_CASTS else [])
            steps.append(("cast", draw(st.sampled_from(casts))))
    return draw(shapes()), steps, draw(st.integers(0, 2 ** 32 - 1))


def squash(v, domain):
    """``v`` mapped smoothly into the open interval ``domain`` (the real part for complex
    ``v``, whose imaginary part is kept within +-0.4)."""
    lo, hi = domain
    # Shifted so that an exact 0 (x - x, log_softmax over one element) does not map to 0,
    # where arctan2 and hypot have no derivative.
    if v.dtype.kind == "c":
        re = lo + (hi - lo) * (0.05 + 0.45 * (1 + np.tanh(np.real(v) + 0.3)))
        return re + 0.4j * np.tanh(np.imag(v))
    return lo + (hi - lo) * (0.05 + 0.45 * (1 + np.tanh(v + 0.3)))


def _axis(v, axis):
    return None if v.ndim == 0 or axis is None else axis % v.ndim


def _partner(values, v, pick):
    """The index of a value among ``values`` that broadcasts with ``v`` (the last, which is
    ``v`` or ``x``, if none)."""
    fits = [i for i, u in enumerate(values) if _broadcasts(u.shape, v.shape)]
    return fits[pick % len(fits)] if fits else len(values) - 1


def _broadcasts(a, b):
    try:
        onp.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


def _clip(v, pick):
    return np.clip(v, -0.5 - pick / 10, 0.5 + pick / 10)


def _where(v, pick):
    return np.where(v > pick / 10 - 0.5, v, 0.5 * v * v)


def _getitem(v, pick):
    if v.ndim == 0:
        return v[None]
    keys = [(slice(None, None, -1),), (0,), (Ellipsis, None), (onp.array([0, 0]),)]
    if v.dtype.kind != "c":
        keys.append((v > 0.2,))
    return v[keys[pick % len(keys)]]


def _matmul(v, pick):
    if v.ndim == 0:
        return v * v
    m = onp.random.default_rng(pick).uniform(-1, 1, (v.shape[-1], 2))
    return np.matmul(v, np.array(m).astype(v.dtype))


# Structural steps: the op of the registry each one records, and how it is called.
SHAPE_STEPS = {
    "transpose": lambda v, pick: np.transpose(v),
    "flip": lambda v, pick: np.flip(v, pick % v.ndim) if v.ndim else v,
    "reshape": lambda v, pick: np.reshape(v, (-1,)),
    "getitem": _getitem,
    "matmul": _matmul,
    "clip": _clip,
    "where": _where,
    "tile": lambda v, pick: np.tile(v, (1 + pick % 2,)),
    "roll": lambda v, pick: np.roll(v, pick, axis=None),
    "repeat": lambda v, pick: np.repeat(v, 1 + pick % 2),
    "diff": lambda v, pick: np.diff(v) if v.ndim and v.shape[-1] > 1 else v,
}


def test_structural_steps_are_table_ops():
    assert set(SHAPE_STEPS) <= {n for n, p in REGISTRY.items() if p.differentiable}


def ramp(v):
    """``v`` plus a small fixed ramp: breaks the constant rows that broadcasting makes, where
    ``std`` and ``norm`` have a kink."""
    return v + np.array(0.05 * onp.arange(v.size).reshape(v.shape)).astype(v.dtype)


def run(program, x, y):
    """The program's final value, from the fastgrad arrays ``x`` and ``y``."""
    _, steps, _ = program
    values = [x, y]
    v, current = x, 0
    for step in steps:
        if step[0] == "unary":
            (name, (dom,)) = step[1]
            v = REGISTRY[name](squash(v, dom))
        elif step[0] == "binary":
            (name, (dx, dy)) = step[1]
            other = values[_partner(values, v, step[2])]
            v = REGISTRY[name](squash(v, dx), squash(other, dy))
        elif step[0] == "reduce":
            (name, (dom,)) = step[1]
            axis = _axis(v, step[2] if step[2] != 3 else None)
            if v.size == 0 and name not in ("sum", "nansum", "prod", "nanprod"):
                continue        # max/mean of nothing: NumPy's error or NaN, not a gradient
            v = REGISTRY[name](squash(ramp(v), dom), axis, step[3])
        elif step[0] == "along":
            (name, (dom,)) = step[1]
            if v.ndim == 0:
                continue
            v = REGISTRY[name](squash(ramp(v), dom), _axis(v, step[2]))
        elif step[0] == "join":
            k = _partner(values, v, step[2])
            # not two copies of one value: their std would sit at a kink
            other = 0.5 * v + 0.25 if k == current else values[k]
            other = np.broadcast_to(other, onp.broadcast_shapes(other.shape, v.shape))
            v = np.broadcast_to(v, other.shape)
            if step[1] == "stack":
                v = np.stack([v, other])
            elif step[1] == "concatenate":
                v = np.concatenate([v, other], axis=0) if v.ndim else np.stack([v, other])
            else:
                v = np.array([v, other])
        elif step[0] == "shape":
            v = SHAPE_STEPS[step[1]](v, step[2])
        elif step[0] == "cast":
            if not (step[1] == "float32" and x.dtype == onp.float64):
                v = v.astype(step[1]).astype(x.dtype)   # (skipped in a float32 program's
                #                                          float64 reference)
        values.append(v)
        current = len(values) - 1
    return v


def make_inputs(program, dtype):
    (sx, sy), _, seed = program
    rng = onp.random.default_rng(seed)
    x, y = rng.uniform(-1.5, 1.5, sx), rng.uniform(-1.5, 1.5, sy)
    if dtype == "complex128":
        x = x + 1j * rng.uniform(-1, 1, sx)
        y = y + 1j * rng.uniform(-1, 1, sy)
    return x, y, rng


class Evaluated:
    """The loss ``sum(Re(out * conj(w)))`` of a program, its gradients, and its numbers."""

    def __init__(self, program, x0, y0, weights, dtype):
        self.program, self.weights, self.dtype = program, weights, dtype
        self.x0, self.y0 = x0, y0

    def loss(self, x, y):
        out = run(self.program, x, y)
        w = self.weights(out.shape, out.dtype)
        return np.real(out * np.array(onp.conj(w)).astype(out.dtype)).sum() \
            if out.dtype.kind == "c" else (out * np.array(w).astype(out.dtype)).sum()

    def value(self, xv, yv):
        return float(self.loss(np.array(xv), np.array(yv)).asnumpy())

    def grads(self, xv, yv, create_graph=False):
        x, y = np.array(xv, dtype=self.dtype), np.array(yv, dtype=self.dtype)
        x.attach_grad()
        y.attach_grad()
        with mx.autograd.record():
            loss = self.loss(x, y)
            if loss.node is None:      # nothing of x or y reached the loss
                return x, y, None
            gs = mx.autograd.grad(loss, [x, y], create_graph=create_graph, allow_unused=True)
        return x, y, gs


def _weights(rng):
    cache = {}

    def weights(shape, dtype):
        key = (shape, dtype.kind)
        if key not in cache:
            w = rng.uniform(0.5, 1.5, shape)
            if dtype.kind == "c":
                w = w + 1j * rng.uniform(-1, 1, shape)
            cache[key] = w
        return cache[key]
    return weights


def _as_np(g, like):
    return onp.zeros(onp.shape(like), dtype=like.dtype) if g is None else g.asnumpy()


def inner(g, v):
    """The real inner product ``Re(sum(conj(g) v))``: the derivative along ``v``."""
    return float(onp.real(onp.sum(onp.conj(g) * v)))


def check(program, dtype):
    x0, y0, rng = make_inputs(program, "complex128" if dtype == "complex128" else "float64")
    weights = _weights(rng)
    vx = rng.uniform(-1, 1, x0.shape) + (1j * rng.uniform(-1, 1, x0.shape)
                                          if dtype == "complex128" else 0)
    vy = rng.uniform(-1, 1, y0.shape) + (1j * rng.uniform(-1, 1, y0.shape)
                                          if dtype == "complex128" else 0)
    ev = Evaluated(program, x0, y0, weights, "complex128" if dtype == "complex128"
                   else "float64")
    try:
        x, y, gs = ev.grads(x0, y0, create_graph=True)
    except Exception as exc:      # a clear error names the op
        text = " ".join([str(exc)] + list(getattr(exc, "__notes__", [])))
        assert "fastgrad" in text, "unclear error %r in %s" % (exc, program)
        ERRORS[type(exc).__name__ + ": " + text[:120]] = program
        return
    RAN[dtype] += 1
    if gs is None:
        return
    gx, gy = _as_np(gs[0], x0), _as_np(gs[1], y0)
    assert onp.all(onp.isfinite(gx)) and onp.all(onp.isfinite(gy)), program
    # first order: directional derivative
    eps = 1e-6
    fd = (ev.value(x0 + eps * vx, y0 + eps * vy) - ev.value(x0 - eps * vx, y0 - eps * vy)) \
        / (2 * eps)
    an = inner(gx, vx) + inner(gy, vy)
    assert abs(fd - an) <= 1e-5 * (1 + abs(fd)), (fd, an, program)
    if dtype == "float32":
        x32, y32, gs32 = Evaluated(program, x0, y0, weights, "float32").grads(x0, y0)
        for g32, g64 in zip(gs32, (gx, gy)):
            if g32 is None:
                continue
            assert g32.dtype == onp.float32, program
            onp.testing.assert_allclose(g32.asnumpy(), g64, rtol=2e-2,
                                        atol=2e-2 * (1 + onp.abs(g64).max(initial=0)),
                                        err_msg=str(program))
        return
    # second order: Hessian-vector product against differences of the gradient
    with mx.autograd.record():
        h = None
        for g, v in zip(gs, (vx, vy)):
            if g is not None:
                term = np.real(g * np.array(onp.conj(v))).sum() if g.dtype.kind == "c" \
                    else (g * np.array(v)).sum()
                h = term if h is None else h + term
    if h is None or h.node is None:
        hx, hy = onp.zeros_like(x0), onp.zeros_like(y0)
    else:
        hs = mx.autograd.grad(h, [x, y], allow_unused=True)
        hx, hy = _as_np(hs[0], x0), _as_np(hs[1], y0)
    e2 = 1e-5
    up = ev.grads(x0 + e2 * vx, y0 + e2 * vy)[2]
    down = ev.grads(x0 - e2 * vx, y0 - e2 * vy)[2]
    for k, got in enumerate((hx, hy)):
        like = (x0, y0)[k]
        expected = (_as_np(up[k], like) - _as_np(down[k], like)) / (2 * e2)
        onp.testing.assert_allclose(got, expected, rtol=1e-4,
                                    atol=1e-4 * (1 + onp.abs(expected).max(initial=0)),
                                    err_msg="Hessian-vector product of %s" % (program,))


_SETTINGS = dict(derandomize=True, deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))


@settings(max_examples=PROGRAMS, **_SETTINGS)
@given(programs("float64"))
def test_float64_programs_match_finite_differences(program):
    check(program, "float64")


@settings(max_examples=max(PROGRAMS // 2, 1), **_SETTINGS)
@given(programs("complex128"))
def test_complex128_programs_match_finite_differences(program):
    check(program, "complex128")


@settings(max_examples=max(PROGRAMS // 4, 1), **_SETTINGS)
@given(programs("float32"))
def test_float32_programs_agree_with_float64(program):
    check(program, "float32")


# ---------------------------------------------------------------- special points
# Note [Fuzzing the special points]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Random programs never meet the points where a rule has a branch (sinc at 0, x ** p at
# p == 0, a norm at the zero vector, max at a tie): values drawn from a continuous law hit them
# with probability zero, and that is where the three silently wrong derivatives of issue 25
# were. So every op with a spec is also evaluated *at* such points: inputs with exact zeros,
# ones and ties (every pair of a grid of special values for two-input ops; zero vectors, one
# zero, all-equal values for the others), and the empty axes of every op along an axis. At
# each point where the forward is finite:
#
# * the gradient and the Hessian-vector product are never NaN, and a raised error names
#   ``fastgrad.<op>``;
# * along a random direction where the op is smooth there (the one-sided differences of the
#   loss, of the gradient, agree), the gradient and the Hessian-vector product equal central
#   differences: sinc's second derivative at 0, power's mixed one at p == 0;
# * for two-input ops the mixed second derivatives agree, ``w^T H_yx u == u^T H_xy w`` (the
#   Hessian is symmetric), where the op is smooth;
# * with an empty axis, the forward equals NumPy's, or both raise (fastgrad's error naming
#   the op), and the first and second derivatives compute.
#
# FASTGRAD_FUZZ_SPECIAL=full takes every point of the grid (a few thousand) and every spec
# case; the default takes a seeded sample, a few seconds.

import warnings  # noqa: E402

import test_ops as _T  # noqa: E402

SPECIAL_FULL = os.environ.get("FASTGRAD_FUZZ_SPECIAL", "") == "full"
GRID = [0.0, 1.0, -1.0, 0.5, -0.5, 2.0]
SPECIAL_FOUND = []      # what the special-point checks met (printed by the report)


def _float_outputs(out):
    return [o for o in (out if isinstance(out, (tuple, list)) else (out,))
            if isinstance(o, mx.np.ndarray) and o.dtype.kind == "f"]


class Point:
    """One op at one input point: its loss ``sum(w * out)`` and derivatives there."""

    def __init__(self, name, call, values, diff, seed=0, order2=True):
        self.name, self.call, self.diff, self.order2 = name, call, list(diff), order2
        self.values = [onp.array(v, dtype=onp.float64) if onp.asarray(v).dtype.kind == "f"
                       else v for v in values]
        rng = onp.random.default_rng(seed)
        self.rng = rng
        self.w = None
        self.tangent = [rng.uniform(-1, 1, onp.shape(self.values[i])) for i in self.diff]

    def _arrays(self, values):
        return [mx.np.array(v, dtype=onp.asarray(v).dtype) if isinstance(v, onp.ndarray)
                else v for v in values]

    def loss(self, arrays):
        outs = _float_outputs(self.call(*arrays))
        if self.w is None:
            self.w = [self.rng.uniform(0.5, 1.5, o.shape) for o in outs]
        total = None
        for o, w in zip(outs, self.w):
            term = (o * mx.np.array(w)).sum()
            total = term if total is None else total + term
        return total

    def value(self, values):
        with warnings.catch_warnings(), onp.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            total = self.loss(self._arrays(values))
        return onp.nan if total is None else float(total.asnumpy())

    def shifted(self, t, which=None):
        values = list(self.values)
        for k, (i, v) in enumerate(zip(self.diff, self.tangent)):
            if which is None or which == k:
                values[i] = values[i] + t * v
        return values

    def grads(self, values, create_graph=False):
        arrays = self._arrays(values)
        variables = [arrays[i] for i in self.diff]
        for v in variables:
            v.attach_grad()
        with warnings.catch_warnings(), onp.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            with mx.autograd.record():
                loss = self.loss(arrays)
                if loss is None or loss.node is None:
                    return variables, None
                gs = mx.autograd.grad(loss, variables, create_graph=create_graph,
                                      allow_unused=True)
        return variables, gs


def _flat(gs):
    return onp.concatenate([onp.ravel(g.asnumpy()) for g in gs]) if gs else onp.zeros(0)


def _smooth(fp, f0, fm, h, fp2=None, fm2=None):
    """Whether one-sided differences agree: ``fp``, ``f0``, ``fm`` at ``+h, 0, -h`` (and the
    central differences at ``h`` and ``h / 2``, from ``fp2``, ``fm2``, which tells a jump
    through the midpoint, sign at 0, from a slope)."""
    fwd, bwd = (fp - f0) / h, (f0 - fm) / h
    if not (onp.all(onp.isfinite(fwd)) and onp.all(onp.isfinite(bwd))):
        return False
    scale = 1 + onp.max(onp.abs(fwd), initial=0) + onp.max(onp.abs(bwd), initial=0)
    if onp.max(onp.abs(fwd - bwd), initial=0) > 1e-3 * scale:
        return False
    if fp2 is None:
        return True
    half = (fp2 - fm2) / h
    return onp.max(onp.abs(half - (fp - fm) / (2 * h)), initial=0) <= 1e-3 * scale


def _clear(exc, name):
    text = " ".join([str(exc)] + list(getattr(exc, "__notes__", [])))
    return "fastgrad" in text


def check_point(p, found, mixed=False):
    """The checks of Note [Fuzzing the special points] at one point; findings to ``found``."""
    where = "%s at %s" % (p.name, [onp.asarray(v).tolist() for v in p.values])
    try:
        f0 = p.value(p.values)
    except Exception:
        return                      # outside the op's domain (its errors: test_error_names)
    if not onp.isfinite(f0) or not p.diff:
        return
    try:
        variables, gs = p.grads(p.values, create_graph=True)
    except Exception as exc:
        if not _clear(exc, p.name):
            found.append("%s: unclear error in the gradient: %r" % (where, exc))
        return
    if gs is None:
        return
    g = _flat(gs)
    if onp.any(onp.isnan(g)):
        found.append("%s: NaN gradient %s" % (where, g.tolist()))
        return
    v = onp.concatenate([onp.ravel(t) for t in p.tangent])
    h = 1e-4
    fp, fm = p.value(p.shifted(h)), p.value(p.shifted(-h))
    fp2, fm2 = p.value(p.shifted(h / 2)), p.value(p.shifted(-h / 2))
    if _smooth(onp.float64(fp), onp.float64(f0), onp.float64(fm), h, onp.float64(fp2),
               onp.float64(fm2)) and onp.all(onp.isfinite(g)):
        e = 1e-6
        fd = (p.value(p.shifted(e)) - p.value(p.shifted(-e))) / (2 * e)
        if abs(fd - g @ v) > 1e-5 * (1 + abs(fd)):
            found.append("%s: gradient %r, finite differences %r" % (where, g @ v, fd))
            return
    if not onp.all(onp.isfinite(g)) or not p.order2:
        return              # an infinite slope (sqrt at 0), or an op differentiable once
    # second order along the tangent
    with warnings.catch_warnings(), onp.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            with mx.autograd.record():
                inner = None
                for gk, t in zip(gs, p.tangent):
                    term = (gk * mx.np.array(t)).sum()
                    inner = term if inner is None else inner + term
            hv = _flat(mx.autograd.grad(inner, variables, allow_unused=True)) \
                if inner is not None and inner.node is not None else onp.zeros_like(g)
        except Exception as exc:
            if not _clear(exc, p.name):
                found.append("%s: unclear error in the second derivative: %r" % (where, exc))
            return
    if onp.any(onp.isnan(hv)):
        found.append("%s: NaN second derivative %s" % (where, hv.tolist()))
        return
    try:
        gp, gm = _flat(p.grads(p.shifted(h))[1] or []), _flat(p.grads(p.shifted(-h))[1] or [])
        gp2 = _flat(p.grads(p.shifted(h / 2))[1] or [])
        gm2 = _flat(p.grads(p.shifted(-h / 2))[1] or [])
    except Exception:
        return
    if any(a.shape != g.shape for a in (gp, gm, gp2, gm2)) \
            or not _smooth(gp, g, gm, h, gp2, gm2):
        return                      # a kink of the gradient: no second derivative to check
    central = (gp - gm) / (2 * h)
    scale = 1 + onp.max(onp.abs(central), initial=0)
    if onp.max(onp.abs(hv - central), initial=0) > 1e-4 * scale:
        found.append("%s: Hessian-vector product %s, finite differences %s"
                     % (where, hv.tolist(), central.tolist()))
        return
    if mixed and len(p.diff) == 2:
        _check_symmetry(p, where, found)


def _check_symmetry(p, where, found):
    """``w^T H_yx u == u^T H_xy w`` for the two inputs (u, w their tangents)."""
    u, w = p.tangent
    with warnings.catch_warnings(), onp.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        (x, y), (gx, gy) = p.grads(p.values, create_graph=True)
        with mx.autograd.record():
            a = (gx * mx.np.array(u)).sum()
            b = (gy * mx.np.array(w)).sum()
        hyx = mx.autograd.grad(a, [y], allow_unused=True, retain_graph=True)[0].asnumpy() \
            if a.node is not None else onp.zeros(onp.shape(w))
        hxy = mx.autograd.grad(b, [x], allow_unused=True)[0].asnumpy() \
            if b.node is not None else onp.zeros(onp.shape(u))
    left, right = float(onp.sum(hyx * w)), float(onp.sum(hxy * u))
    if abs(left - right) > 1e-6 * (1 + abs(left) + abs(right)):
        found.append("%s: mixed derivatives differ, d/dy(u.dL/dx).w = %r, d/dx(w.dL/dy).u = %r"
                     % (where, left, right))


def _sample(items, n, seed):
    if SPECIAL_FULL or len(items) <= n:
        return items
    rng = onp.random.default_rng(seed)
    return [items[i] for i in sorted(rng.choice(len(items), n, replace=False))]


def _elementwise():
    unary = sorted(n for n, p in REGISTRY.items() if p.differentiable and n in SPECS
                   and SPECS[n].cases is op_specs.UNARY and p.n_in == 1)
    binary = sorted(n for n, p in REGISTRY.items() if p.differentiable and n in SPECS
                    and SPECS[n].cases is op_specs.BINARY and p.n_in == 2)
    return unary, binary


def special_unary_points(found, per_op=None):
    unary, _ = _elementwise()
    for name in unary:
        spec = SPECS[name]
        points = GRID if per_op is None else _sample(GRID, per_op, len(name))
        for s in points:
            values = [onp.array([s, s])]    # a tie too (for the ops along an axis)
            diff = [] if 0 in spec.nondiff else [0]
            check_point(Point(name, _T._caller(name, spec), values, diff,
                              order2=spec.order2), found)


def special_binary_points(found, per_op=None):
    _, binary = _elementwise()
    pairs = [(a, b) for a in GRID for b in GRID]
    for name in binary:
        spec = SPECS[name]
        diff = [i for i in (0, 1) if i not in spec.nondiff and i not in spec.make]
        for a, b in (pairs if per_op is None else _sample(pairs, per_op, len(name))):
            check_point(Point(name, _T._caller(name, spec), [onp.array([a]), onp.array([b])],
                              diff, seed=7, order2=spec.order2), found, mixed=True)


def _patterns(shape, rng):
    """Inputs of ``shape`` with exact zeros, ones and ties."""
    n = int(onp.prod(shape))
    one_zero = rng.uniform(0.5, 1.5, shape)
    if n:
        one_zero.flat[0] = 0.0
    ties = onp.full(shape, 0.75)
    pairs = (onp.arange(n) % 2 * 0.5 + 0.5).reshape(shape)     # 0.5, 1, 0.5, 1, ...
    return [onp.zeros(shape), one_zero, ties, pairs, onp.ones(shape)]


def special_structured_points(found, per_op=None):
    """Every other op with a spec (reductions, norms, ops along an axis, linear algebra):
    each float input in turn replaced by zeros, one zero, ties, pairs of ties, ones."""
    unary, binary = _elementwise()
    skip = set(unary) | set(binary)
    all_specs = dict(SPECS, **COMPOSITE_SPECS_)
    for name in sorted(all_specs):
        spec = all_specs[name]
        if name in skip or (name in REGISTRY and not REGISTRY[name].differentiable):
            continue
        cases = list(enumerate(spec.cases))
        for k, case in (cases if SPECIAL_FULL else cases[:1]):
            rng = onp.random.default_rng(k)
            base = _T._inputs(spec, case, rng)
            diff = [i for i, v in enumerate(base) if i not in spec.nondiff
                    and onp.asarray(v).dtype.kind == "f"]
            call = _T._caller(name, spec)
            jobs = []
            for i in diff:
                if i in spec.make:
                    continue
                for pat in _patterns(onp.shape(base[i]), rng):
                    values = list(base)
                    values[i] = pat
                    jobs.append(values)
            if per_op is not None:
                jobs = _sample(jobs, per_op, len(name) + k)
            for values in jobs:
                check_point(Point(name, lambda *a, _c=call, _p=case.params: _c(*a, **_p),
                                  values, diff, seed=k, order2=spec.order2), found)


from op_specs import COMPOSITE_SPECS as COMPOSITE_SPECS_  # noqa: E402


# ---------------------------------------------------------------- empty axes
def _axis_ops():
    """The ops of the registry with an ``axis`` parameter and a spec: reductions, ``diff``,
    cumulative ops, softmax, norms, sorts..."""
    out = []
    for name, prim in sorted(REGISTRY.items()):
        spec = SPECS.get(name)
        if spec is None or not prim.differentiable or "axis" not in (prim.param_names or ()):
            continue
        if prim.n_in != 1 or spec.make or spec.variadic:
            continue
        out.append(name)
    return out


EMPTY_SHAPES = [(0,), (0, 3), (3, 0), (2, 0, 3)]


def empty_axis_cases(name):
    spec = SPECS[name]
    prim = REGISTRY[name]
    params = dict(spec.cases[0].params)
    out = []
    default = dict(zip(prim.param_names, prim.param_defaults)).get("axis")
    required = type(default).__name__ == "_Required" or repr(default) == "<required>"
    for shape in EMPTY_SHAPES:
        for axis in ([] if required else [None]) + list(range(-len(shape), len(shape))):
            p = dict(params, axis=axis)
            if name == "norm" and axis is None and p.get("ord") not in (None, "fro") \
                    and len(shape) > 2:
                continue
            if name == "norm" and axis is None and p.get("ord") is not None:
                p["axis"] = axis = (0, 1) if len(shape) == 2 else 0
            if "keepdims" in prim.param_names:
                for keep in (False, True):
                    out.append((shape, dict(p, keepdims=keep)))
            else:
                out.append((shape, p))
    return out


def check_empty(name, shape, params, found):
    spec = SPECS[name]
    prim = REGISTRY[name]
    ref = _T._reference(name, spec)
    x0 = onp.zeros(shape)
    where = "%s of shape %s with %s" % (name, shape, params)
    with warnings.catch_warnings(), onp.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            expected = ref(x0, **params)
            ref_error = None
        except Exception as exc:
            ref_error = exc
        x = mx.np.array(x0)
        x.attach_grad()
        try:
            with mx.autograd.record():
                out = prim(x, **params)
        except Exception as exc:
            if ref_error is None:
                found.append("%s: raises %r where NumPy computes" % (where, exc))
            elif "fastgrad.%s" % name not in " ".join(
                    [str(exc)] + list(getattr(exc, "__notes__", []))):
                found.append("%s: the error does not name fastgrad.%s: %r" % (where, name, exc))
            return
        if ref_error is not None:
            return                  # fastgrad computes where NumPy refuses: fine
        for got, want in zip(_as_tuple(out), _as_tuple(expected)):
            if got.shape != onp.shape(want) or not onp.allclose(
                    got.asnumpy(), want, equal_nan=True):
                found.append("%s: %s, NumPy %s" % (where, got.asnumpy().tolist(),
                                                   onp.asarray(want).tolist()))
                return
        try:
            with mx.autograd.record():
                outs = _float_outputs(out)
                loss = sum((o * o).sum() for o in outs)
                g = mx.autograd.grad(loss, [x], create_graph=True, allow_unused=True)[0]
                inner = (g * g).sum() + loss
            g2 = mx.autograd.grad(inner, [x], allow_unused=True)[0]
        except Exception as exc:
            found.append("%s: derivative raises %r" % (where, exc))
            return
        if g.shape != shape or g2.shape != shape:
            found.append("%s: gradient shapes %s, %s" % (where, g.shape, g2.shape))


def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def empty_axes(found):
    for name in _axis_ops():
        for shape, params in empty_axis_cases(name):
            check_empty(name, shape, params, found)


# ---------------------------------------------------------------- the tests
# Found by these checks and not fixed yet: none. Fixed (closed forms in
# tests/ops/test_special_points.py): rgamma at 0, -1, ... (Note [rgamma at the poles]),
# gammainc/gammaincc at x = 0 (their rules use power, exact at 0), norm(ord=2) of a
# rank-deficient matrix (Note [Zero singular values]).
KNOWN_SPECIAL = ()


def _report(found, what):
    SPECIAL_FOUND.extend(found)
    found = [f for f in found if not f.startswith(KNOWN_SPECIAL)]
    assert not found, "%s:\n%s" % (what, "\n".join(found[:40]))


def test_second_derivatives_at_special_points_of_unary_ops():
    found = []
    special_unary_points(found, per_op=None if SPECIAL_FULL else 3)
    _report(found, "unary ops at 0, +-1, +-0.5, 2")


def test_mixed_derivatives_of_two_input_ops_at_special_points():
    found = []
    special_binary_points(found, per_op=None if SPECIAL_FULL else 6)
    _report(found, "two-input ops on a grid of special values (ties included)")


def test_ops_at_zero_vectors_ties_and_ones():
    found = []
    special_structured_points(found, per_op=None if SPECIAL_FULL else 2)
    _report(found, "ops at zeros, one zero, ties and ones")


def test_every_op_along_an_axis_over_empty_axes():
    found = []
    empty_axes(found)
    _report(found, "empty axes")


def test_zz_report_how_many_programs_ran(capsys):
    with capsys.disabled():
        print("\nfuzz programs checked: %s" % RAN)
        for text in SPECIAL_FOUND:
            print("  special point: %s" % text[:200])
        for text, program in sorted(ERRORS.items()):
            print("  clear error: %s\n    e.g. %s" % (text, program))


def test_the_special_point_checks_find_the_three_bugs_of_issue_25():
    """The rules as they were before issue 25, compiled beside the table: the checks above
    report each (Note [Fuzzing the special points])."""
    from fastgrad._ops._derivatives import Op
    from fastgrad._ops._registry import build
    old, _ = build([
        Op("old_power", onp.power, "x, y", x="g * y * x ** (y - (y != 0))",
           y="g * result * safe_log(x)"),
        Op("old_sinc", onp.sinc, "x",
           x="where(x == 0, 0, g * (cos(pi * where(x == 0, 1, x)) - sinc(where(x == 0, 1, x)))"
             " / where(x == 0, 1, x))"),
        Op("old_norm", lambda x, ord: onp.asarray(onp.linalg.norm(x, ord)), "x; ord",
           x="g * sign(x) * (abs(x) / result) ** (ord - 1)"),
    ])
    found = []
    check_point(Point("old_power", old["old_power"], [onp.array([2.0]), onp.array([0.0])],
                      [0, 1], seed=7), found, mixed=True)
    check_point(Point("old_sinc", old["old_sinc"], [onp.array([0.0, 0.0])], [0]), found)
    for ord_ in (3, 0.5):
        check_point(Point("old_norm", lambda x, _o=ord_: old["old_norm"](x, _o),
                          [onp.array([0.0, 1.5, -0.7])], [0]), found)
    check_point(Point("old_norm", lambda x: old["old_norm"](x, 3), [onp.zeros(3)], [0]), found)
    text = "\n".join(found)
    assert "old_power at [[2.0], [0.0]]: Hessian-vector product" in text, text
    assert "old_sinc at [[0.0, 0.0]]: Hessian-vector product" in text, text
    assert text.count("old_norm at") == 2 and "NaN gradient" in text, text   # ord 0.5, 0
    # and today's rules pass the same checks
    found = []
    check_point(Point("power", REGISTRY["power"], [onp.array([2.0]), onp.array([0.0])],
                      [0, 1], seed=7), found, mixed=True)
    check_point(Point("sinc", REGISTRY["sinc"], [onp.array([0.0, 0.0])], [0]), found)
    check_point(Point("norm", lambda x: REGISTRY["norm"](x, 0.5), [onp.array([0.0, 1.5, -0.7])],
                      [0]), found)
    assert not found, found


def test_found_by_the_scans_of_issue_25():
    """What the float32 scan and the empty axes met: ``take`` (and so ``median``) under
    ``create_graph`` when the head gradient is one value everywhere (a helper op was handed
    the lazily filled gradient), ``take`` and ``repeat`` along a negative axis, ``diff`` along
    an axis shorter than ``n``, ``float_power``'s mixed second derivative at y == 0."""
    x = np.array(onp.array([3.0, 1.0, 2.0, 5.0, 4.0]))
    x.attach_grad()
    with mx.autograd.record():
        g = mx.autograd.grad(np.median(x) * 1.5, [x], create_graph=True)[0]
    assert g.asnumpy().tolist() == [1.5, 0, 0, 0, 0]
    m = np.array(onp.arange(12.0).reshape(3, 4))
    m.attach_grad()
    with mx.autograd.record():
        loss = (REGISTRY["take"](m, onp.array([0, 3, 3]), -1) * 2).sum() \
            + (REGISTRY["repeat"](m, 2, -2) * 3).sum()
    loss.backward()
    onp.testing.assert_array_equal(m.grad.asnumpy(),
                                   6 + onp.array([2, 0, 0, 4] * 3).reshape(3, 4))
    for shape, n in [((0, 3), 1), ((2,), 3)]:
        v = np.array(onp.ones(shape))
        v.attach_grad()
        with mx.autograd.record():
            d = np.diff(v, n=n, axis=0)
            gv = mx.autograd.grad((d * d).sum(), [v], create_graph=True)[0]
            h = (gv * gv).sum() + (d * d).sum()
        assert mx.autograd.grad(h, [v])[0].shape == shape
    # d2/dxdy of float_power(x, y) at y = 0 is 1/x
    a, b = np.array(onp.array([2.0])), np.array(onp.array([0.0]))
    a.attach_grad()
    b.attach_grad()
    with mx.autograd.record():
        ga = mx.autograd.grad(np.float_power(a, b).sum(), [a], create_graph=True)[0].sum()
    assert float(mx.autograd.grad(ga, [b])[0].asnumpy()[0]) == 0.5
