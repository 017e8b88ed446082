"""The committed ``.pyi`` stubs are what ``python -m tests.tools.stubgen`` writes today, and the
docstrings and signatures of every op come from the derivative table.

Every op is discovered from the registry, every public name from the modules, so names added
later (new ops, MXNet's names) are checked without touching this file.
"""

import inspect
import types

import numpy as onp
import pytest

import fastgrad as mx
from tools import stubgen as _stubgen
from fastgrad._core._array import Primitive
from fastgrad._ops._derivatives import TABLE
from fastgrad._ops._registry import REGISTRY

PUBLIC = [mx.np, mx.npx, mx.nd, mx.autograd, mx.sym]


def _public_callables():
    for module in PUBLIC:
        names = getattr(module, "__all__", None) or [n for n in vars(module)
                                                    if not n.startswith("_")]
        for name in sorted(set(names)):
            obj = getattr(module, name)
            if callable(obj) and not isinstance(obj, types.ModuleType):
                yield "%s.%s" % (module.__name__, name), obj


def test_committed_stubs_are_up_to_date():
    stale = _stubgen.outdated()
    assert not stale, ("stubs out of date: %s; run python -m tests.tools.stubgen and commit them"
                       % stale)


@pytest.mark.parametrize("qualname,obj", list(_public_callables()), ids=lambda v: str(v)[:60])
def test_every_public_callable_has_a_docstring_and_a_signature(qualname, obj):
    doc = inspect.getdoc(obj)
    assert doc and len(doc.split()) >= 4, "%s has no real docstring" % qualname
    if not isinstance(obj, type):
        inspect.signature(obj)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_op_docstring_and_signature_come_from_the_table(name):
    prim = REGISTRY[name]
    sig = inspect.signature(prim)
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind is p.POSITIONAL_ONLY]
    assert len(positional) == (1 if prim.n_in < 0 else prim.n_in)
    assert tuple(p.name for p in params[len(positional):]) == prim.param_names
    doc = prim.__doc__
    assert "Derivative\n----------" in doc and "Parameters\n----------" in doc
    # A real summary: NumPy's, fastgrad._ops._docs.SUMMARIES' or the kernel's docstring.
    assert "derivative table" not in doc.splitlines()[0], (
        "%s has no summary: add one to SUMMARIES in fastgrad/_ops/_docs.py" % name)
    for p in params:
        assert p.name in doc
    if not prim.differentiable:
        assert "Not differentiable" in doc
    elif prim.order < 0:
        assert "any order" in doc
    else:
        assert "to order %d" % prim.order in doc
    op = next((o for o in TABLE if o.name == name), None)
    if op is not None and prim.differentiable:
        for rule in op.rules.values():
            if rule != "<not differentiable>":
                assert " ".join(rule.split()) in doc


def test_help_shows_numpys_summary_derivative_and_signature():
    import pydoc
    text = pydoc.render_doc(mx.np.sin, renderer=pydoc.plaintext)
    assert "sin(x, /)" in text
    assert "Trigonometric sine, element-wise." in text
    rule = next(o for o in TABLE if o.name == "sin").rules["x"]
    assert "d/dx: %s" % rule in text and "any order" in text
    # Still the op: recorded, differentiable, and a Primitive.
    assert isinstance(mx.np.sin, Primitive) and mx.np.sin.__name__ == "sin"
    assert Primitive.__doc__.startswith("A differentiable operation")


@pytest.mark.parametrize("keyword", ["out", "where", "casting", "order", "dtype", "subok"])
def test_numpy_only_keywords_raise_a_type_error_naming_them_and_the_op(keyword):
    x = mx.np.array([0.5, 1.0])
    with pytest.raises(TypeError, match=r"fastgrad\.sin\(\) does not support NumPy's %s= "
                       % keyword):
        mx.np.sin(x, **{keyword: None})
    with pytest.raises(TypeError, match=r"fastgrad\.add\(\) does not support NumPy's %s= "
                       % keyword):
        mx.np.add(x, x, **{keyword: None})


def test_unknown_keywords_still_name_the_keyword_and_the_op():
    with pytest.raises(TypeError, match=r"fastgrad\.sin\(\) got an unexpected keyword "
                                        r"argument 'bogus'"):
        mx.np.sin(mx.np.array([1.0]), bogus=1)


def test_primitive_as_class_attribute_is_not_bound():
    # __get__ (which makes pydoc document an op as a routine) returns the op unchanged.
    class Holder:
        op = mx.np.sin
    assert Holder.op is mx.np.sin and Holder().op is mx.np.sin
    onp.testing.assert_allclose(Holder().op(mx.np.array([0.5])).asnumpy(), onp.sin([0.5]),
                                rtol=1e-6)
