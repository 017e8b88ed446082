"""Registry-driven tests of every op: forward, first, second and third derivatives, dtypes.

Every differentiable op of ``fastgrad._ops._registry.REGISTRY`` and every composite listed in
``fastgrad.npx.COMPOSITES`` has a spec in ``op_specs.py`` (its input domain and NumPy
reference); this module checks, for each spec and case:

(a) the forward equals the NumPy/SciPy reference;
(b) the gradient of a random weighting of the outputs equals finite differences of the
    reference, in float64;
(c) the Hessian-vector product (the gradient of ``<grad, v>`` with ``create_graph=True``)
    equals finite differences of the first-order gradient along ``v``;
(c') the third derivative along ``v`` (the gradient of ``<Hv, w>`` recorded once more) equals
    finite differences of the Hessian-vector product: what ``list_ops()`` calls order "any";
(d) float32 inputs give float32 outputs and gradients, equal to the float64 ones to float32
    precision.

Note [Finite-difference tolerances]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Derivatives are compared with central differences plus one Richardson step
(``_helpers.central_difference``, step 1e-3), accurate to about 1e-10 relative to the largest
value here (measured over every case: worst 1e-9, logit and ndtri near their poles). The
tolerance is rtol 1e-7 and atol 1e-8 times that largest value, the same for every order, so a
rule that is wrong by 1e-6 relative fails. The specs' own ``rtol``/``atol`` apply to forward
values only.
"""
import os
import sys

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad._ops import _derivatives, _registry
from fastgrad._ops._registry import REGISTRY

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _helpers import assert_fd_close, central_difference, fd_gradient  # noqa: E402
from op_specs import COMPOSITE_SPECS, SPECS  # noqa: E402

ALL_SPECS = dict(SPECS, **COMPOSITE_SPECS)
DIFFERENTIABLE = sorted(name for name, p in REGISTRY.items() if p.differentiable)


# ---------------------------------------------------------------- driving one spec
def _reference(name, spec):
    if spec.ref is not None:
        return spec.ref
    fn = getattr(onp, name, None) or getattr(onp.linalg, name, None)
    assert fn is not None, "spec %r needs a ref" % name
    return fn


def _caller(name, spec):
    if spec.call is not None:
        return spec.call
    prim = REGISTRY[name]
    if spec.variadic:
        return lambda *xs, **p: prim(list(xs), **p)
    return prim


def _inputs(spec, case, rng):
    out = []
    for i, shape in enumerate(case.shapes):
        if i in spec.make:
            out.append(onp.asarray(spec.make[i](rng, shape)))
        else:
            lo, hi = spec.domain[i] if isinstance(spec.domain, list) else spec.domain
            out.append(rng.uniform(lo, hi, shape))
    return out


def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _post(spec, out):
    out = spec.post(out) if spec.post is not None else out
    return _as_tuple(out)


class Case:
    """One spec case, with the weights that make the outputs a scalar loss."""

    def __init__(self, name, spec, case, seed=0):
        self.name, self.spec, self.case = name, spec, case
        rng = onp.random.default_rng(seed)
        self.values = _inputs(spec, case, rng)
        self.diff = [i for i, v in enumerate(self.values)
                     if i not in spec.nondiff and onp.asarray(v).dtype.kind == "f"]
        self.ref = _reference(name, spec)
        self.call = _caller(name, spec)
        expected = _post(spec, self.ref(*self.values, **case.params))
        self.weights = [rng.uniform(0.5, 1.5, onp.shape(e)) for e in expected]
        self.tangent = [rng.uniform(-1, 1, onp.shape(self.values[i])) for i in self.diff]

    def numpy_loss(self, values):
        outs = _post(self.spec, self.ref(*values, **self.case.params))
        return sum(float(onp.sum(onp.asarray(o, dtype=onp.float64) * w))
                   for o, w in zip(outs, self.weights))

    def arrays(self, values, dtype=onp.float64):
        arrs = []
        for i, v in enumerate(values):
            v = onp.asarray(v)
            if v.dtype.kind == "f":
                v = v.astype(dtype)
            arrs.append(mx.np.array(v, dtype=v.dtype))
        return arrs

    def forward(self, arrs):
        return self.call(*arrs, **self.case.params)

    def loss(self, arrs):
        outs = _post(self.spec, self.forward(arrs))
        total = None
        for o, w in zip(outs, self.weights):
            term = (o * mx.np.array(w, dtype=o.dtype)).sum()
            total = term if total is None else total + term
        return total

    def grads(self, values, create_graph=False, dtype=onp.float64):
        arrs = self.arrays(values, dtype)
        if not self.diff:       # an op tested for its forward only (ctc_loss_grad)
            return arrs, []
        for i in self.diff:
            arrs[i].attach_grad()
        with mx.autograd.record():
            loss = self.loss(arrs)
            gs = mx.autograd.grad(loss, [arrs[i] for i in self.diff], create_graph=create_graph,
                                  allow_unused=True)
        return arrs, gs


def _cases(specs):
    return [pytest.param(name, k, id="%s-%d" % (name, k))
            for name, spec in sorted(specs.items()) for k in range(len(spec.cases))]


CASES = _cases(ALL_SPECS)
SECOND = _cases({n: s for n, s in ALL_SPECS.items() if s.order2})


def _close(actual, expected, spec, what, scale=1.0):
    kind = onp.complex128 if onp.iscomplexobj(expected) else onp.float64
    onp.testing.assert_allclose(onp.asarray(actual, dtype=kind),
                                onp.asarray(expected, dtype=kind),
                                rtol=spec.rtol * scale, atol=spec.atol * scale, err_msg=what)


# ---------------------------------------------------------------- coverage
def test_every_differentiable_op_has_a_spec():
    missing = [n for n in DIFFERENTIABLE if n not in SPECS]
    assert not missing, "ops without an input-domain spec in op_specs.py: %s" % missing


def test_every_composite_has_a_spec():
    missing = [n for n in mx.npx.COMPOSITES if "npx." + n not in COMPOSITE_SPECS]
    assert not missing, "npx composites without a spec in op_specs.py: %s" % missing


def test_table_size():
    assert len(DIFFERENTIABLE) >= 150


def test_every_op_claimed_differentiable_to_any_order_has_its_higher_orders_checked():
    """``list_ops()`` reports order "any" for an op whose table entry sets no order limit;
    that claim is what tests (c) and (c') check, so every such op must have a spec with
    ``order2`` on, and an op with a limited order must report it."""
    info = mx.list_ops()
    unchecked = [n for n in DIFFERENTIABLE if info[n]["order"] == "any" and not SPECS[n].order2]
    assert not unchecked, "ops claimed differentiable to any order, never checked: %s" % unchecked
    for name in DIFFERENTIABLE:
        limit = REGISTRY[name].order
        assert info[name]["order"] == ("any" if limit < 0 else limit), name


# ---------------------------------------------------------------- (a) forward
@pytest.mark.parametrize("name,k", CASES)
def test_forward_matches_numpy(name, k):
    spec = ALL_SPECS[name]
    c = Case(name, spec, spec.cases[k])
    expected = _as_tuple(c.ref(*c.values, **c.case.params))
    got = _as_tuple(c.forward(c.arrays(c.values)))
    assert len(got) == len(expected), name
    for g, e in zip(got, expected):
        assert g.shape == onp.shape(e), (name, g.shape, onp.shape(e))
        _close(g.asnumpy(), e, spec, "%s forward" % name)


# ---------------------------------------------------------------- (b) first order
def _numeric_grad(c, i):
    values = [onp.array(v, dtype=onp.float64) if onp.asarray(v).dtype.kind == "f" else v
              for v in c.values]
    x = values[i]
    g = onp.zeros(x.shape)
    for idx in onp.ndindex(x.shape):
        orig = x[idx]

        def loss_at(t):
            x[idx] = orig + t
            try:
                return c.numpy_loss(values)
            finally:
                x[idx] = orig
        g[idx] = central_difference(loss_at)
    return g


@pytest.mark.parametrize("name,k", CASES)
def test_gradient_matches_finite_differences(name, k):
    spec = ALL_SPECS[name]
    c = Case(name, spec, spec.cases[k])
    _, grads = c.grads(c.values)
    for i, g in zip(c.diff, grads):
        assert g.dtype == onp.float64
        assert_fd_close(g.asnumpy(), _numeric_grad(c, i), "%s d/d(input %d)" % (name, i))


# ---------------------------------------------------------------- (c) second order
@pytest.mark.parametrize("name,k", SECOND)
def test_hessian_vector_product_matches_finite_differences(name, k):
    spec = ALL_SPECS[name]
    check_hessian_vector_product(Case(name, spec, spec.cases[k]), lambda g, v: g * v,
                                 "%s Hessian-vector product" % name)


def _shifted(c, t):
    values = list(c.values)
    for i, v in zip(c.diff, c.tangent):
        values[i] = values[i] + t * v
    return values


def _hessian_vector(c, values, inner, create_graph):
    """The variables and ``d/dx sum(inner(grad, tangent))`` at ``values``."""
    arrs, grads = c.grads(values, create_graph=True)
    with mx.autograd.record():
        h = None
        for g, v in zip(grads, c.tangent):
            term = inner(g, mx.np.array(v)).sum()
            h = term if h is None else h + term
    variables = [arrs[i] for i in c.diff]
    if h.node is None:
        return variables, [mx.np.zeros(onp.shape(v)) for v in c.tangent]
    with mx.autograd.record():
        hv = mx.autograd.grad(h, variables, create_graph=create_graph, allow_unused=True)
    return variables, hv


def check_hessian_vector_product(c, inner, what):
    """The derivative of ``sum(inner(gradient, tangent))`` (recorded with create_graph) against
    finite differences of the gradients along the case's tangent (Note [Finite-difference
    tolerances])."""
    _, hv = _hessian_vector(c, c.values, inner, create_graph=False)

    def gradients_at(t):
        return onp.concatenate([onp.ravel(g.asnumpy()) for g in c.grads(_shifted(c, t))[1]])

    expected = central_difference(gradients_at)
    start = 0
    for i, got in zip(c.diff, hv):
        size = int(onp.prod(got.shape))
        assert_fd_close(got.asnumpy().ravel(), expected[start:start + size],
                        "%s, input %d" % (what, i))
        start += size


@pytest.mark.parametrize("name,k", SECOND)
def test_third_derivative_matches_finite_differences(name, k):
    spec = ALL_SPECS[name]
    check_third_derivative(Case(name, spec, spec.cases[k]), lambda g, v: g * v,
                           "%s third derivative" % name)


def _numeric_inner(a, b):
    """``sum(real(a * conj(b)))``: the NumPy value of the ``inner`` of the checks."""
    return float(onp.sum(onp.real(onp.asarray(a) * onp.conj(b))))


def check_third_derivative(c, inner, what):
    """``d/dt <H(x + t v) v, w>`` at 0 (``w`` the reversed tangent, ``<a, b>`` the sum of
    ``inner(a, b)``), recorded twice over, against finite differences of the Hessian-vector
    product."""
    other = [onp.flip(v) for v in c.tangent]
    variables, hv = _hessian_vector(c, c.values, inner, create_graph=True)
    with mx.autograd.record():
        t = None
        for h, w in zip(hv, other):
            term = inner(h, mx.np.array(w)).sum()
            t = term if t is None else t + term
    if t.node is None:
        got = 0.0
    else:
        third = mx.autograd.grad(t, variables, allow_unused=True)
        got = sum(_numeric_inner(g.asnumpy(), v) for g, v in zip(third, c.tangent))

    def projected_hv_at(step):
        _, h = _hessian_vector(c, _shifted(c, step), inner, create_graph=False)
        return sum(_numeric_inner(g.asnumpy(), w) for g, w in zip(h, other))

    expected = central_difference(projected_hv_at)
    # Three derivatives deep the difference's error grows (1e-8 relative at logit's pole).
    assert_fd_close(onp.float64(got), onp.float64(expected), what, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- (d) float32
@pytest.mark.parametrize("name,k", CASES)
def test_float32_in_float32_out(name, k):
    """float32 in, float32 out, and the values those of float64 to float32 precision (worst
    case measured: 3e-6 of the largest value, betainc)."""
    spec = ALL_SPECS[name]
    c = Case(name, spec, spec.cases[k])
    arrs, grads = c.grads(c.values, dtype=onp.float32)
    outs = _as_tuple(c.forward(arrs))
    if spec.f32:
        for out in outs:
            if out.dtype.kind == "f":
                assert out.dtype == onp.float32, (name, out.dtype)
    for g in grads:
        assert g.dtype == onp.float32, (name, g.dtype)
    _, grads64 = c.grads(c.values)
    outs64 = _as_tuple(c.forward(c.arrays(c.values)))
    for what, got, expected in [("output", o, e) for o, e in zip(outs, outs64)] \
            + [("gradient", g, e) for g, e in zip(grads, grads64)]:
        got, expected = got.asnumpy(), expected.asnumpy()
        kind = onp.complex128 if onp.iscomplexobj(expected) else onp.float64
        assert_fd_close(got.astype(kind), expected, "%s float32 %s" % (name, what),
                        rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- (e) missing rules
def test_op_without_a_rule_raises_when_recorded():
    table = [_derivatives.Op("half_rule", onp.add, "x, y", x="g")]
    registry, _ = _registry.build(table)
    prim = registry["half_rule"]
    x = mx.np.array([1.0, 2.0])
    y = mx.np.array([3.0, 4.0])
    x.attach_grad()
    y.attach_grad()
    with mx.autograd.record():
        prim(x, 1.0)           # the input without a rule is a constant: fine
        with pytest.raises(NotImplementedError, match="half_rule.*argument 1"):
            prim(x, y)
    assert prim(x, y).node is None   # not recording: nothing to differentiate


# ---------------------------------------------------------------- non-differentiable ops
NONDIFF_CALLS = {
    "sign": lambda x: mx.np.sign(x), "floor": mx.np.floor, "ceil": mx.np.ceil,
    "trunc": mx.np.trunc, "rint": mx.np.rint, "round": lambda x: mx.np.round(x, 1),
    "argmax": lambda x: mx.np.argmax(x, axis=1), "argmin": mx.np.argmin,
    "argsort": mx.np.argsort, "greater": lambda x: x > 0, "equal": lambda x: x == x,
    "isnan": mx.np.isnan, "isfinite": mx.np.isfinite, "signbit": mx.np.signbit,
    "nonzero": lambda x: mx.np.nonzero(x > 0)[0], "count_nonzero": mx.np.count_nonzero,
    "one_hot": lambda x: mx.npx.one_hot(mx.np.argmax(x, axis=1), 4),
    "floor_divide": lambda x: x // 0.5, "heaviside": lambda x: mx.np.heaviside(x, 0.5),
    "logical_xor": lambda x: mx.np.logical_xor(x > 0, x > 1),
    "topk_indices": lambda x: mx.npx.topk(x, k=2),
}


@pytest.mark.parametrize("name", sorted(NONDIFF_CALLS))
def test_non_differentiable_ops_carry_no_gradient_and_keep_the_graph(name):
    x = mx.np.array(onp.random.default_rng(0).uniform(-2, 2, (3, 4)))
    x.attach_grad()
    with mx.autograd.record():
        y = mx.np.sin(x)
        z = NONDIFF_CALLS[name](y)
        # No history, or a zero node kept only for reach (Note [Zero gradients]).
        assert z.node is None or not z.node.carries_gradient
        loss = (y * 2).sum() + onp.asarray(z).sum() * 0
    loss.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), 2 * onp.cos(x.asnumpy()))


# ---------------------------------------------------------------- NumPy interop
def test_numpy_functions_dispatch_and_record():
    def program(lib, x):
        return lib.sum(lib.cumsum(lib.sin(x), axis=1)) + lib.linalg.det(x) \
            + lib.trace(lib.tensordot(x, x, 1)) + lib.einsum("ij->", lib.tile(x, 2))

    xv = onp.array([[1.0, 2.0], [3.0, 4.0]])
    x = mx.np.array(xv)
    x.attach_grad()
    with mx.autograd.record():
        y = program(onp, x)          # NumPy's functions, given a fastgrad array
    assert isinstance(y, mx.np.ndarray) and y.node is not None
    onp.testing.assert_allclose(y.asnumpy(), program(onp, xv), rtol=1e-13)
    y.backward()
    expected, = fd_gradient(lambda a: program(onp, a), xv)
    assert_fd_close(x.grad.asnumpy(), expected, "gradient through NumPy's dispatch")


def test_every_numpy_named_function_is_dispatched():
    from fastgrad._api._dispatch import FUNCS
    for name in mx.np.__all__:
        ref = getattr(onp, name, None)
        if callable(ref) and not isinstance(ref, (onp.ufunc, type)):
            assert ref in FUNCS, "numpy.%s is implemented but not dispatched" % name


def test_unsupported_numpy_function_raises_type_error_naming_it():
    x = mx.np.array([3.0, 1.0, 2.0])
    with pytest.raises(TypeError, match="lexsort"):
        onp.lexsort(x)
    with pytest.raises(TypeError, match="spacing"):
        onp.spacing(x)


# ---------------------------------------------------------------- behaviour in depth
def test_batch_norm_updates_running_statistics_only_in_training():
    rng = onp.random.default_rng(1)
    x = mx.np.array(rng.normal(2.0, 3.0, (8, 3, 2, 2)))
    gamma, beta = mx.np.ones((3,)), mx.np.zeros((3,))
    rm, rv = mx.np.zeros((3,)), mx.np.ones((3,))
    out = mx.npx.batch_norm(x, gamma, beta, rm, rv)         # predict mode: running stats
    onp.testing.assert_allclose(out.asnumpy(), x.asnumpy() / onp.sqrt(1 + 1e-3), rtol=1e-5)
    onp.testing.assert_array_equal(rm.asnumpy(), 0)
    with mx.autograd.train_mode():
        mx.npx.batch_norm(x, gamma, beta, rm, rv, momentum=0.9)
    batch_mean = x.asnumpy().mean(axis=(0, 2, 3))
    onp.testing.assert_allclose(rm.asnumpy(), 0.1 * batch_mean, rtol=1e-5)


def test_max_pool_with_padding_and_conv_double_backward_through_network():
    rng = onp.random.default_rng(2)
    x = mx.np.array(rng.normal(size=(2, 1, 6, 6)))
    wv = rng.normal(size=(2, 1, 3, 3))

    def penalty_and_gradient(w_values, create_graph):
        w = mx.np.array(w_values)
        w.attach_grad()
        with mx.autograd.record():
            y = mx.npx.pooling(mx.np.tanh(mx.npx.convolution(x, w, kernel=3, pad=1,
                                                             no_bias=True)),
                               kernel=2, stride=2, pad=1)
            gw = mx.autograd.grad((y * y).sum(), [w], create_graph=create_graph)[0]
            penalty = (gw * gw).sum()
        if create_graph:
            penalty.backward()
        return float(penalty.asnumpy()), w.grad

    _, double_backward = penalty_and_gradient(wv, create_graph=True)
    expected, = fd_gradient(lambda w: penalty_and_gradient(w, create_graph=False)[0], wv)
    assert_fd_close(double_backward.asnumpy(), expected, "gradient of the gradient penalty")
