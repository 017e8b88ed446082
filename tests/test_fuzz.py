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
from fastgrad._registry import REGISTRY

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
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


def test_zz_report_how_many_programs_ran(capsys):
    with capsys.disabled():
        print("\nfuzz programs checked: %s" % RAN)
        for text, program in sorted(ERRORS.items()):
            print("  clear error: %s\n    e.g. %s" % (text, program))
