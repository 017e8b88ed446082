"""Build the ops of fastgrad from the derivative table.

Each formula of ``_derivatives.TABLE`` is compiled, once at import, into one named Python
function per op, ``<op>_backward(g, needs, <saved inputs>, <saved shapes>, [result], <params>)``,
which returns one gradient (or ``None``) per input; ``needs`` is a bit mask of the inputs whose
gradient the engine wants. The names a formula reads decide what the op keeps when it is
recorded: an input used by value is saved, one used only as ``x.shape``/``x.ndim`` keeps its
shape, ``result`` keeps the output. The generated source is registered with ``linecache`` so
tracebacks through a rule show the formula.

``build`` makes the primitives of a table and returns them, changing nothing else; this module
builds the derivative table's at its import, and after that the registry is read-only:
``REGISTRY`` is a ``MappingProxyType``. What the primitives need from the layers above (the
graph binding of their rules reads fastgrad's functions) is connected by ``wire`` at start-up
(Note [Bootstrap] in _bootstrap.py).
"""

import ast
import collections
import linecache
import types

import numpy as np

from fastgrad._ops import _bindings, _complex, _derivatives
from fastgrad._core._array import REQUIRED, Primitive
from fastgrad._core._node import Derivative
from fastgrad._ops._derivatives import NONDIFF

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


def _compile(op, names, variadic, pnames, namespace, codes, rules=None, kind=""):
    """The backward function of ``op`` (with ``rules`` instead of its own if given; ``kind``
    names the variant in tracebacks) and what it needs saved; its compiled code for the other
    bindings goes into ``codes`` (Note [Bindings])."""
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
    codes[op.name + kind] = _Codes(code, compile(_bindings.large_source(source), filename,
                                                 "exec"), fname)
    save_inputs = tuple(names.index(n) for n in saved)
    save_shapes = tuple(names.index(n) for n in shapes)
    return fn, save_inputs, save_shapes, uses.result, tuple(diff)


def _kernel(op, names, variadic, pnames):
    """The kernel ``op``'s primitive calls as ``kernel(*inputs, *params)``.

    Note [Kernel calls]
    ~~~~~~~~~~~~~~~~~~~
    A primitive calls its kernel with the inputs, then the parameters, positionally: the
    cheapest call there is, made in C by ``Primitive.apply``. A NumPy routine whose own
    parameters come in that order is the kernel itself (``np.reshape``, ``np.take``). One that
    takes them in another order or by keyword (``np.var(x, axis=, keepdims=, ddof=)``, whose
    third positional parameter is ``dtype``) is given its argument list in the table,
    ``call="x, axis=axis, keepdims=keepdims, ddof=ddof"``, and compiled here into a function
    that takes the positional arguments and makes that call: one Python frame, as a
    hand-written adapter in ``_kernels/_forward.py`` cost, with the call written next to the op
    instead of in a second file. A variadic op's function takes ``*args`` and splits off the
    parameters at the end (``call="xs, axis=axis"`` for ``np.stack``).
    """
    if op.call is None:
        return op.forward
    call = ast.parse("_fg_routine(%s)" % op.call, mode="eval").body
    known = set(names) | set(pnames)
    unknown = {node.id for node in ast.walk(call) if isinstance(node, ast.Name)} \
        - known - {"_fg_routine"}
    if unknown:
        raise ValueError("%s: its call reads %s, which are not its inputs or parameters"
                         % (op.name, sorted(unknown)))
    if variadic:
        split = "    %s = args\n" % (", ".join(["*" + names[0]] + list(pnames))
                                     if pnames else names[0])
        source = "def %s(*args):\n%s    return _fg_routine(%s)\n" % (op.name, split,
                                                                     op.call)
    else:
        source = "def %s(%s):\n    return _fg_routine(%s)\n" % (
            op.name, ", ".join(names + list(pnames)), op.call)
    filename = "<fastgrad kernel of %s>" % op.name
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = {}
    exec(compile(source, filename, "exec"), {"_fg_routine": op.forward}, scope)
    fn = scope[op.name]
    fn.__qualname__ = op.name
    fn.__module__ = "fastgrad._ops._derivatives"
    return fn


def _define(code, fname, namespace):
    scope = {}
    exec(code, namespace, scope)
    fn = scope[fname]
    fn.__qualname__ = fname
    fn.__module__ = "fastgrad._ops._derivatives"
    return fn


# A rule's compiled code for the graph and large bindings (Note [Bindings]), and its name.
_Codes = collections.namedtuple("_Codes", "graph large name")

class Built(collections.namedtuple("Built", "primitives ufuncs")):
    """What ``build`` makes of a table: the pair ``(primitives, ufuncs)``, ``{name:
    Primitive}`` and ``{NumPy ufunc: Primitive}``, and ``codes``, ``{rule key: _Codes}``, each
    compiled rule for ``graph_rules`` (a key is an op's name, or its name followed by
    ``complex_`` for its complex variant)."""

    def __new__(cls, primitives, ufuncs, codes):
        built = super().__new__(cls, primitives, ufuncs)
        built.codes = codes
        return built


def build(table):
    """The primitives of every entry of ``table``, as a ``Built``.

    Nothing outside what it returns changes, but ``linecache``, which keeps each rule's
    generated source for tracebacks. The primitives have their numpy and large bindings; the
    graph binding, which reads the functions of a layer above, is given by ``graph_rules``.
    """
    namespace = _bindings.numpy_namespace()     # Note [Bindings]
    registry = {}
    ufuncs = {}
    codes = {}
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
            op, names, variadic, pnames, namespace, codes, real_rules)
        n_in = -1 if variadic else len(names)
        kernel = _kernel(op, names, variadic, pnames)
        prim = Primitive(op.name, kernel, fn, n_in, op.n_out, pnames, pdefaults,
                         save_inputs, save_shapes, save_result, diff,
                         op.differentiable and fn is not None, op.order, op.views, op.zero,
                         op.differentiable_outputs)
        registry[op.name] = prim
        if (fn is not None and not variadic and op.n_out == 1 and len(names) < 63
                and all(real_rules.get(name) == "g" for name in names)):
            prim._set_passes_g()        # Note [Pass-through rules] in _engine.pyx
        for name, factor in (op.deferred or {}).items():
            # Note [Deferred weight gradients] in _kernels/_forward.py
            prim._set_deferred(names.index(name), names.index(factor))
        overrides = op.complex if fn is not None else None
        if overrides is not None and not (has_conj or overrides):
            prim._set_complex(1)
        elif overrides is not None:
            cfn, *csaves = _compile(op, names, variadic, pnames, namespace, codes,
                                    dict(op.rules, **overrides), "complex_")
            if tuple(csaves) != (save_inputs, save_shapes, save_result, diff):
                raise ValueError("%s: its complex rule must read the same inputs as its real "
                                 "rule" % op.name)
            variant = Primitive(op.name, kernel, cfn, n_in, op.n_out, pnames, pdefaults,
                                save_inputs, save_shapes, save_result, diff, True, op.order,
                                op.views)
            variant._set_complex(1)
            prim._set_complex(2, variant)
        if op.ufunc is not None:
            ufuncs[op.ufunc] = prim
        if not hasattr(np, op.name):
            namespace[op.name] = _bindings.dual(prim, kernel)
    large = _bindings.large_namespace(namespace)
    for key, code in codes.items():
        _rule_owner(registry, key)._set_large_rule(_define(code.large, code.name, large))
    return Built(registry, ufuncs, codes)


def _rule_owner(registry, key):
    """The primitive a compiled rule belongs to: ``key`` is an op's name, or its name followed
    by ``complex_`` for its complex variant (Note [Complex gradients])."""
    if key.endswith("complex_") and key not in registry:
        return registry[key[:-len("complex_")]].complex_variant
    return registry[key]


def graph_rules(built, functions):
    """Give every primitive of ``built`` its rule in the graph binding (Note [Bindings] in
    _bindings.py), whose names are ``functions``' (the module of fastgrad's NumPy-style
    functions), the ufuncs' primitives and the table's ops."""
    namespace = _bindings.graph_namespace(functions, built.primitives, built.ufuncs)
    for key, code in built.codes.items():
        _rule_owner(built.primitives, key)._set_graph_rule(
            _define(code.graph, code.name, namespace))


_BUILT = build(_derivatives.TABLE)
REGISTRY = types.MappingProxyType(_BUILT.primitives)
UFUNC_OPS = _BUILT.ufuncs


def wire(*, functions):
    """Connect the table's primitives to the layer above: their rules' graph binding reads
    ``functions`` (fastgrad._api._functions). Called once, by ``fastgrad._bootstrap.wire`` at
    start-up (Note [Bootstrap] in _bootstrap.py)."""
    graph_rules(_BUILT, functions)


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

