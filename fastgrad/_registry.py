"""Build the ops of fastgrad from the derivative table.

Each formula of ``_derivatives.TABLE`` is compiled, once at import, into one named Python
function per op, ``<op>_backward(g, needs, <saved inputs>, <saved shapes>, [result], <params>)``,
which returns one gradient (or ``None``) per input; ``needs`` is a bit mask of the inputs whose
gradient the engine wants. The names a formula reads decide what the op keeps when it is
recorded: an input used by value is saved, one used only as ``x.shape``/``x.ndim`` keeps its
shape, ``result`` keeps the output. The generated source is registered with ``linecache`` so
tracebacks through a rule show the formula.

After import the registry is read-only: ``REGISTRY`` is a ``MappingProxyType``.
"""

import ast
import linecache
import types

import numpy as np

from fastgrad import _array, _bindings, _complex, _derivatives, _engine, _kernels
from fastgrad._array import REQUIRED, Primitive
from fastgrad._node import Derivative
from fastgrad._derivatives import NONDIFF

_META = {"shape": "{}_shape", "ndim": "len({}_shape)"}


def _parse_signature(op):
    inputs, _, params = op.signature.partition(";")
    names = [s.strip() for s in inputs.split(",") if s.strip()]
    variadic = len(names) == 1 and names[0].startswith("*")
    if any(n.startswith("*") for n in names) and not variadic:
        raise ValueError("%s: a variadic input must be the only input" % op.name)
    names = [n.lstrip("*") for n in names]
    reserved = {"g", "needs", "result"} & set(names)
    if reserved:
        raise ValueError("%s: input names %s are reserved for the rule's own arguments"
                         % (op.name, sorted(reserved)))
    # Parameters read like a Python signature: parse them as one, defaults as literals.
    fn = ast.parse("def _(%s): pass" % params).body[0].args
    pnames = [a.arg for a in fn.args]
    defaults = [ast.literal_eval(d) for d in fn.defaults]
    pdefaults = [REQUIRED] * (len(pnames) - len(defaults)) + defaults
    return names, variadic, tuple(pnames), tuple(pdefaults)


class _Uses(ast.NodeTransformer):
    """Find what a formula reads; rewrite ``x.shape``/``x.ndim`` to use a saved shape."""

    def __init__(self, inputs):
        self.inputs = set(inputs)
        self.by_value = set()
        self.by_shape = set()
        self.result = False

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id in self.inputs \
                and node.attr in _META:
            self.by_shape.add(node.value.id)
            return ast.parse(_META[node.attr].format(node.value.id), mode="eval").body
        return self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.inputs:
            self.by_value.add(node.id)
        elif node.id == "result":
            self.result = True
        return node


def _compile(op, names, variadic, pnames, namespace, rules=None, kind=""):
    """The backward function of ``op`` (with ``rules`` instead of its own if given; ``kind``
    names the variant in tracebacks) and what it needs saved."""
    rules = op.rules if rules is None else rules
    uses = _Uses(names)
    exprs = {}
    diff = []
    for name in names:
        formula = rules.get(name)
        if formula is NONDIFF:
            diff.append(int(Derivative.NOT_DIFFERENTIABLE))
        elif formula is None:
            diff.append(int(Derivative.NO_RULE))
        else:
            diff.append(int(Derivative.HAS_RULE))
            tree = uses.visit(ast.parse(formula, mode="eval"))
            exprs[name] = ast.unparse(ast.fix_missing_locations(tree))
    unknown = set(rules) - set(names)
    if unknown:
        raise ValueError("%s: formulas for unknown inputs %s" % (op.name, sorted(unknown)))
    if not exprs:
        return None, (), (), False, tuple(diff)
    if variadic and uses.by_value:
        raise ValueError("%s: a variadic op's formula may use its inputs' shapes only"
                         % op.name)
    saved = [n for n in names if n in uses.by_value]
    shapes = [n for n in names if n in uses.by_shape and not variadic]
    args = ["g", "needs"] + saved + [n + "_shape" for n in shapes]
    args += ["result"] if uses.result else []
    args += list(pnames)
    fname = "%s_%sbackward" % (op.name, kind)
    # Note [Weak scalars]: a Python number saved as an input takes the gradient's precision.
    # The test costs a float64 pass (the common case) one dtype lookup per rule: a
    # single-output rule looks at the gradient's dtype first and at its saved inputs only
    # when that is narrow. An op of one array input records only when that input is an
    # array with history, so its rule never sees a Python number and gets no test at all.
    weak = ""
    for n in (saved if len(names) > 1 or variadic else ()):
        numeric = op.ufunc is not None or diff[names.index(n)] == int(Derivative.HAS_RULE)
        kinds = "float, complex" + (", int" if numeric else "")
        weak += "    if type(%s) in (%s):\n        %s = weak_scalar(%s, g)\n" % (
            n, kinds, n, n)
    if weak and op.n_out == 1:
        weak = "    if getattr(g, 'dtype', None) in NARROW_DTYPES:\n" + "".join(
            "    " + line + "\n" for line in weak.splitlines())
    # Note [Errors name the op]: the body runs in a try whose handler notes the op and the
    # argument whose formula raised (``rule_error``), unless the message names the op already.
    if variadic:
        body = "        return tuple(%s)\n" % exprs[names[0]]
    elif len(names) == 1:
        body = "        return (%s,)\n" % exprs[names[0]]
    else:
        body = ""
        for i, name in enumerate(names):
            if name in exprs:
                body += ("        _fg_arg = %d\n" % i if body else "") \
                    + "        _fg_%d = (%s) if needs & %d else None\n" % (i, exprs[name], 1 << i)
        body += "        return (%s,)\n" % ", ".join(
            "_fg_%d" % i if name in exprs else "None" for i, name in enumerate(names))
    # (the weak-scalar test inside the try too: reading an odd gradient's dtype may raise)
    weak = "".join("    " + line + "\n" for line in weak.splitlines())
    body = ("    _fg_arg = 0\n    try:\n%s%s    except Exception as _fg_exc:\n"
            "        rule_error(_fg_exc, %r, %r, _fg_arg)\n        raise\n"
            % (weak, body, op.name, tuple(names)))
    source = "def %s(%s):\n%s" % (fname, ", ".join(args), body)
    filename = "<fastgrad %sderivative of %s>" % (kind, op.name)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec")
    fn = _define(code, fname, namespace)
    _SOURCES[op.name + kind] = (code, fname)
    _LARGE_CODE[op.name + kind] = compile(_bindings.large_source(source), filename, "exec")
    save_inputs = tuple(names.index(n) for n in saved)
    save_shapes = tuple(names.index(n) for n in shapes)
    return fn, save_inputs, save_shapes, uses.result, tuple(diff)


def _define(code, fname, namespace):
    scope = {}
    exec(code, namespace, scope)
    fn = scope[fname]
    fn.__qualname__ = fname
    fn.__module__ = "fastgrad._derivatives"
    return fn


def build(table):
    """Primitives for every entry of ``table``: ``(registry, ufunc map)``."""
    namespace = _bindings.numpy_namespace()     # Note [Bindings]
    registry = {}
    ufuncs = {}
    rules = []      # the keys of _SOURCES/_LARGE_CODE this table compiled
    for op in table:
        if op.name in registry:
            raise ValueError("op %r is defined twice in the derivative table" % op.name)
        names, variadic, pnames, pdefaults = _parse_signature(op)
        # Note [Complex gradients]: the formulas as written serve complex values; without
        # their conj(...) they serve real ones.
        real_rules, has_conj = {}, False
        for key, formula in op.rules.items():
            if formula is not NONDIFF:
                formula, found = _complex.real_formula(formula)
                has_conj = has_conj or found
            real_rules[key] = formula
        fn, save_inputs, save_shapes, save_result, diff = _compile(
            op, names, variadic, pnames, namespace, real_rules)
        n_in = -1 if variadic else len(names)
        prim = Primitive(op.name, op.forward, fn, n_in, op.n_out, pnames, pdefaults,
                         save_inputs, save_shapes, save_result, diff,
                         op.differentiable and fn is not None, op.order, op.views, op.zero,
                         op.differentiable_outputs)
        registry[op.name] = prim
        if (fn is not None and not variadic and op.n_out == 1 and len(names) < 63
                and all(real_rules.get(name) == "g" for name in names)):
            prim._set_passes_g()        # Note [Pass-through rules] in _engine.pyx
        for name, factor in (op.deferred or {}).items():
            # Note [Deferred weight gradients] in _kernels.py
            prim._set_deferred(names.index(name), names.index(factor))
        if fn is not None:
            rules.append(op.name)
        overrides = _complex.COMPLEX_RULES.get(op.name) if fn is not None else None
        if overrides is not None and not (has_conj or overrides):
            prim._set_complex(1)
        elif overrides is not None:
            cfn, *csaves = _compile(op, names, variadic, pnames, namespace,
                                    dict(op.rules, **overrides), "complex_")
            if tuple(csaves) != (save_inputs, save_shapes, save_result, diff):
                raise ValueError("%s: its complex rule must read the same inputs as its real "
                                 "rule" % op.name)
            variant = Primitive(op.name, op.forward, cfn, n_in, op.n_out, pnames, pdefaults,
                                save_inputs, save_shapes, save_result, diff, True, op.order,
                                op.views)
            variant._set_complex(1)
            prim._set_complex(2, variant)
            rules.append(op.name + "complex_")
        if op.ufunc is not None:
            ufuncs[op.ufunc] = prim
        if not hasattr(np, op.name):
            namespace[op.name] = _bindings.dual(prim, op.forward)
    large = _bindings.large_namespace(namespace)
    for name in rules:
        _rule_owner(registry, name)._set_large_rule(
            _define(_LARGE_CODE[name], _SOURCES[name][1], large))
    return registry, ufuncs


def _rule_owner(registry, key):
    """The primitive a compiled rule belongs to: ``key`` is an op's name, or its name followed
    by ``complex_`` for its complex variant (Note [Complex gradients])."""
    if key.endswith("complex_") and key not in registry:
        return registry[key[:-len("complex_")]].complex_variant
    return registry[key]


_SOURCES = {}   # op name -> (compiled rule, function name), for the graph binding
_LARGE_CODE = {}   # op name -> the compiled rule of the large binding (Note [Bindings])
_registry, UFUNC_OPS = build(_derivatives.TABLE)
REGISTRY = types.MappingProxyType(_registry)
# The array type, the engine and the rule helpers read the primitives from tables they own
# (Note [Layers] in _layers.py).
_array.register_primitives(REGISTRY, UFUNC_OPS)
_engine.register_primitives(REGISTRY)


def register_graph_functions(functions):
    """Give every op its rule in the graph binding (Note [Bindings] in _bindings.py). Called
    once by ``functions`` (fastgrad._functions, the module of fastgrad's NumPy-style
    functions) at the end of its import (Note [Layers] in _layers.py)."""
    namespace = _bindings.graph_namespace(functions, _registry, UFUNC_OPS)
    for name, (code, fname) in _SOURCES.items():
        _rule_owner(_registry, name)._set_graph_rule(_define(code, fname, namespace))


def list_ops():
    """Every registered op: ``{name: {'differentiable': bool, 'order': ...}}``.

    ``order`` is ``'any'`` for ops whose derivative rules are themselves built from
    differentiable ops (all of fastgrad's), an int for a limited order, and ``0`` for ops that
    are not differentiable (integer and bool results). A piecewise-constant op (``floor``,
    ``sign``) is differentiable to any order: its derivative is zero (Note [Zero gradients]).
    """
    out = {}
    for name, prim in sorted(REGISTRY.items()):
        if prim.zero:
            out[name] = {"differentiable": True, "order": "any", "inputs": prim.n_in,
                         "params": prim.param_names}
            continue
        if not prim.differentiable:
            order = 0
        else:
            order = "any" if prim.order < 0 else prim.order
        out[name] = {"differentiable": bool(prim.differentiable), "order": order,
                     "inputs": prim.n_in, "params": prim.param_names}
    return out


del _kernels
