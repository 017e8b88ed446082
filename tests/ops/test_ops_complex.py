"""Registry-driven tests of every op that differentiates complex values (complex128).

The ops are found in the registry (``Primitive.complex_mode``; Note [Complex gradients] in
``fastgrad/_ops/_complex.py``) and driven by the specs of ``op_specs.py``, as ``test_ops.py``
drives the real ones. Each differentiable input is given an imaginary part, the outputs are
weighted into the real loss ``L = sum(Re(out * conj(w)))``, and fastgrad's gradients must equal
PyTorch's convention ``dL/da + i dL/db`` computed by central finite differences on the real and
imaginary parts ``a`` and ``b``, to first, second (the Hessian-vector product) and third order. Ops
that are not checked for complex values must refuse them with an error naming the op.
"""
import os
import sys
import warnings

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad._ops._registry import REGISTRY

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import test_ops as base  # noqa: E402
from _helpers import assert_fd_close, central_difference  # noqa: E402
from op_specs import COMPOSITE_SPECS, SPECS  # noqa: E402

COMPLEX = sorted(n for n, p in REGISTRY.items() if p.differentiable and p.complex_mode)
UNCHECKED = sorted(n for n, p in REGISTRY.items() if p.differentiable and not p.complex_mode)


def _complexify(rng, value):
    """``value`` with an imaginary part (zeros stay exact zeros, for the ``with_zero`` specs)."""
    imag = rng.uniform(-0.5, 0.5, onp.shape(value)) * (onp.asarray(value) != 0)
    return onp.asarray(value) + 1j * imag


class ComplexCase(base.Case):
    """A spec case with complex differentiable inputs and complex weights."""

    def __init__(self, name, spec, case, seed=0):
        super().__init__(name, spec, case, seed)
        rng = onp.random.default_rng(seed + 100)
        self.values = [_complexify(rng, v) if i in self.diff else v
                       for i, v in enumerate(self.values)]
        try:
            outs = base._post(spec, self._ref(self.values))
        except TypeError:        # a real-input op (rfftn): NumPy refuses complex values
            self.refused = True
            return
        self.refused = False
        self.weights = [w + 1j * rng.uniform(-1, 1, onp.shape(w))
                        if onp.iscomplexobj(o) else w for w, o in zip(self.weights, outs)]
        self.tangent = [t + 1j * rng.uniform(-1, 1, onp.shape(t)) for t in self.tangent]

    def _ref(self, values):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", onp.exceptions.ComplexWarning)
            return self.ref(*values, **self.case.params)

    def numpy_loss(self, values):
        outs = base._post(self.spec, self._ref(values))
        return sum(float(onp.sum(onp.real(onp.asarray(o) * onp.conj(w))))
                   for o, w in zip(outs, self.weights))

    def arrays(self, values, dtype=None):
        return [mx.np.array(onp.asarray(v), dtype=onp.asarray(v).dtype) for v in values]

    def loss(self, arrs):
        outs = base._post(self.spec, self.forward(arrs))
        total = None
        for o, w in zip(outs, self.weights):
            term = mx.np.real(o * mx.np.array(onp.conj(w))).sum()
            total = term if total is None else total + term
        return total


def _numeric_grad(c, i):
    """``dL/da + i dL/db`` of input ``i`` by finite differences (``central_difference``)."""
    values = [onp.array(v) for v in c.values]
    x = values[i]
    out = onp.zeros(x.shape, dtype=complex)
    for idx in onp.ndindex(x.shape):
        orig = x[idx]
        for direction in (1, 1j):
            def loss_at(t):
                x[idx] = orig + t * direction
                try:
                    return c.numpy_loss(values)
                finally:
                    x[idx] = orig
            out[idx] += direction * central_difference(loss_at)
    return out


def _close(actual, expected, spec, what, scale):
    onp.testing.assert_allclose(onp.asarray(actual), onp.asarray(expected),
                                rtol=spec.rtol * scale, atol=spec.atol * scale, err_msg=what)


# The NumPy-signature functions whose complex path is more than one op of the table: the
# linear algebra that takes complex input through other ops (slogdet through logdet, UPLO and
# upper=True through conjugate transposes, the matrix norms and full SVD through svd).
COMPLEX_COMPOSITES = ["np.linalg.slogdet", "np.linalg.norm_nuc", "np.linalg.norm_2",
                      "np.linalg.pinv", "np.linalg.eigh_upper", "np.linalg.cholesky_upper",
                      "np.linalg.svd_full"]
SPECS = dict(SPECS, **{name: COMPOSITE_SPECS[name] for name in COMPLEX_COMPOSITES})
CASES = [pytest.param(name, k, id="%s-%d" % (name, k))
         for name in COMPLEX + COMPLEX_COMPOSITES for k in range(len(SPECS[name].cases))]
SECOND = [p for p in CASES if SPECS[p.values[0]].order2]


def test_complex_ops_are_the_ones_the_table_declares_complex():
    from fastgrad._ops._derivatives import TABLE
    assert set(COMPLEX) == {op.name for op in TABLE if op.complex is not None}
    assert len(COMPLEX) >= 70


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")   # astype to float
@pytest.mark.parametrize("name,k", CASES)
def test_complex_forward_and_gradient_match_finite_differences(name, k):
    spec = SPECS[name]
    c = ComplexCase(name, spec, spec.cases[k])
    if c.refused:            # then fastgrad refuses them too, with NumPy's error
        with pytest.raises(TypeError):
            c.forward(c.arrays(c.values))
        return
    expected = base._as_tuple(c._ref(c.values))
    got = base._as_tuple(c.forward(c.arrays(c.values)))
    for g, e in zip(got, expected):
        _close(g.asnumpy(), e, spec, "%s complex forward" % name, 1)
    _, grads = c.grads(c.values)
    for i, g in zip(c.diff, grads):
        assert g.dtype == onp.complex128, (name, g.dtype)
        assert_fd_close(g.asnumpy(), _numeric_grad(c, i), "%s d/d(input %d)" % (name, i))


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("name,k", SECOND)
def test_complex_hessian_vector_product_matches_finite_differences(name, k):
    spec = SPECS[name]
    c = ComplexCase(name, spec, spec.cases[k])
    if c.refused:
        pytest.skip("a real-input op: NumPy refuses complex values (checked at first order)")
    base.check_hessian_vector_product(c, lambda g, v: mx.np.real(g * mx.np.conj(v)),
                                      "%s complex Hessian-vector product" % name)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("name,k", SECOND)
def test_complex_third_derivative_matches_finite_differences(name, k):
    spec = SPECS[name]
    c = ComplexCase(name, spec, spec.cases[k])
    if c.refused:
        pytest.skip("a real-input op: NumPy refuses complex values (checked at first order)")
    base.check_third_derivative(c, lambda g, v: mx.np.real(g * mx.np.conj(v)),
                                "%s complex third derivative" % name)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")   # scipy.special kernels
@pytest.mark.parametrize("name", UNCHECKED)
def test_ops_not_checked_for_complex_refuse_complex_values_when_recording(name):
    spec = SPECS[name]
    case = spec.cases[0]
    c = base.Case(name, spec, case)
    if not c.diff:
        pytest.skip("its spec differentiates no input (ctc_loss_grad: its own derivative "
                    "raises), so no complex value is recorded")
    rng = onp.random.default_rng(7)
    values = [_complexify(rng, v) if i in c.diff else v for i, v in enumerate(c.values)]
    arrs = [mx.np.array(onp.asarray(v), dtype=onp.asarray(v).dtype) for v in values]
    for i in c.diff:
        arrs[i].attach_grad()
    with mx.autograd.record():
        try:
            c.forward(arrs)
        except NotImplementedError as exc:
            assert "fastgrad.%s" % (spec.called or name) in str(exc) and "complex" in str(exc)
        except (TypeError, ValueError, onp.linalg.LinAlgError):
            pass        # NumPy's kernel itself refuses complex values
        else:
            pytest.fail("%s accepted complex values under recording" % name)
