"""Every error raised from inside an op's derivative rule names the op and the argument
(issue 25, Note [Errors name the op] in ``fastgrad/_ops/_bindings.py``).

Two walks over the registry:

* every compiled rule (first-order, ``create_graph`` and large-array bindings, complex
  variants included) is called with arguments that make any formula fail: the error that
  comes out names ``fastgrad.<op>`` and, for ops of several inputs, the argument;
* every op with a spec is fed inputs that break rules in practice (empty axes, NaN and inf,
  ties, zeros, integer values) through the forward, the gradient and the second derivative:
  whatever raises names the op.
"""
import inspect
import os
import re
import sys
import warnings

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad._ops._registry import REGISTRY

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import test_ops as T  # noqa: E402
from op_specs import SPECS  # noqa: E402


class Poison:
    """An argument every operation on which fails with an error that names nothing."""

    shape = property(lambda self: self._fail())
    ndim = property(lambda self: self._fail())
    dtype = property(lambda self: self._fail())

    def _fail(self, *args, **kwargs):
        raise ArithmeticError("poisoned")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __neg__ = __getitem__ = _fail
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __len__ = _fail
    __array__ = __array_function__ = __array_ufunc__ = __iter__ = __index__ = _fail
    __hash__ = object.__hash__


def _text(exc):
    return " ".join([str(exc)] + [str(n) for n in getattr(exc, "__notes__", ())])


def names_op(exc, name):
    """Whether the error names ``fastgrad.<name>`` (or ``fastgrad.<module>.<name>``, as the
    linear-algebra ops name themselves ``fastgrad.linalg.eigh``)."""
    return re.search(r"fastgrad(\.\w+)*\.%s\b" % re.escape(name), _text(exc)) is not None


def _rules():
    for name, prim in sorted(REGISTRY.items()):
        for kind in ("backward", "backward_graph", "backward_large"):
            fn = getattr(prim, kind, None)
            if fn is not None:
                yield name, kind, fn
        variant = getattr(prim, "complex_variant", None)
        if variant is not None and getattr(variant, "backward", None) is not None:
            yield name, "complex backward", variant.backward


def test_every_rule_notes_its_op_and_argument():
    checked = 0
    bad = []
    for name, kind, fn in _rules():
        params = list(inspect.signature(fn).parameters)
        args = [Poison() if p != "needs" else -1 for p in params]
        try:
            fn(*args)
        except Exception as exc:
            checked += 1
            if not names_op(exc, name):
                bad.append("%s (%s): %r" % (name, kind, exc))
            elif REGISTRY[name].n_in > 1 and "argument" not in _text(exc):
                bad.append("%s (%s) does not name the argument: %s" % (name, kind, _text(exc)))
    assert checked > 300, checked
    assert not bad, "\n".join(bad)


def test_a_rules_error_keeps_its_type_and_message_and_gains_a_note():
    from fastgrad._ops._derivatives import Op
    from fastgrad._ops._registry import build
    ops, _ = build([Op("fails_in_y", onp.add, "x, y", x="g", y="g[5, 5] * y")])
    y = mx.np.array(onp.ones((2, 2)))
    y.attach_grad()
    with mx.autograd.record():
        z = ops["fails_in_y"](y, y).sum()
    with pytest.raises(IndexError, match="out of bounds") as info:
        z.backward()
    assert "in the derivative of fastgrad.fails_in_y with respect to its argument 1 (y)" \
        in info.value.__notes__


# ---------------------------------------------------------------- inputs that break rules
def _variants(values, diff, rng):
    """Inputs that break rules: zeros, NaN, integer values (ties), an empty first axis.
    (inf and 1e300 are left out: LAPACK routines iterate for minutes on them.)"""
    out = []
    for fill in (0.0, onp.nan):
        vs = list(values)
        for i in diff:
            v = onp.array(vs[i], dtype=onp.float64)
            if v.size:
                v.flat[0] = fill
            vs[i] = v
        out.append(vs)
    vs = list(values)
    for i in diff:
        vs[i] = onp.round(onp.asarray(vs[i], dtype=onp.float64))
    out.append(vs)
    vs = list(values)
    for i in diff:                  # an empty first axis
        shape = onp.shape(vs[i])
        if shape:
            vs[i] = onp.zeros((0,) + shape[1:])
    out.append(vs)
    return out


class ForwardError(Exception):
    """An error of the forward: named by the op that raised it (``_annotate``), which is the
    spec's call's, not necessarily the op under test (``imag`` of ``fft(x)``)."""


def _run(call, params, values, diff):
    arrays = [mx.np.array(v, dtype=onp.asarray(v).dtype) if isinstance(v, onp.ndarray) else v
              for v in values]
    variables = [arrays[i] for i in diff]
    for v in variables:
        v.attach_grad()
    with mx.autograd.record():
        try:
            outs = call(*arrays, **params)
        except Exception as exc:
            raise ForwardError(exc) from exc
        outs = [o for o in (outs if isinstance(outs, (tuple, list)) else (outs,))
                if isinstance(o, mx.np.ndarray) and o.dtype.kind in "fc" and o.node is not None]
        if not outs:
            return
        loss = sum((o * o).real.sum() if o.dtype.kind == "c" else (o * o).sum() for o in outs)
        gs = mx.autograd.grad(loss, variables, create_graph=True, allow_unused=True)
        h = [(g * g).sum() for g in gs if g.node is not None and g.dtype.kind == "f"]
        if not h:
            return
    mx.autograd.grad(sum(h), variables, allow_unused=True)


def test_every_op_names_itself_when_inputs_break_its_rules():
    unclear = []
    tried = 0
    for name, spec in sorted(SPECS.items()):
        if name not in REGISTRY or not REGISTRY[name].differentiable:
            continue
        case = spec.cases[0]
        rng = onp.random.default_rng(0)
        values = T._inputs(spec, case, rng)
        diff = [i for i, v in enumerate(values) if i not in spec.nondiff
                and onp.asarray(v).dtype.kind == "f"]
        call = T._caller(name, spec)
        who = spec.called or name
        for vs in _variants(values, [i for i in diff if i not in spec.make], rng):
            tried += 1
            with warnings.catch_warnings(), onp.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                try:
                    _run(call, case.params, vs, diff)
                except ForwardError as exc:
                    if "fastgrad." not in _text(exc.__cause__):
                        unclear.append("%s forward: %s: %s" % (
                            name, type(exc.__cause__).__name__, _text(exc.__cause__)[:200]))
                except Exception as exc:
                    if not names_op(exc, who):
                        unclear.append("%s: %s: %s" % (name, type(exc).__name__,
                                                       _text(exc)[:200]))
    assert tried > 500
    assert not unclear, "\n".join(unclear)
