"""What a name in a derivative formula means: the namespaces rules run in (internal).

Note [Bindings]
~~~~~~~~~~~~~~~
A formula of the derivative table is one text; ``_registry`` compiles it into one function
per *binding*, by executing the compiled rule in one of the namespaces this module defines.
The names a formula reads (``cos``, ``multiply``, ``sum_to``, the helpers of ``_rules.py``)
mean, under each binding:

========  ===========================================  =========================================
binding   a name means                                 used for
========  ===========================================  =========================================
numpy     NumPy's function of that name; a table op    a first-order pass (``Primitive.backward``)
          NumPy lacks is its kernel on NumPy values
          (``dual``); helpers of ``_rules.py`` and
          the table sections
graph     fastgrad's recorded op of that name: a       ``create_graph=True``
          ufunc's op, the ``fastgrad.numpy``           (``Primitive.backward_graph``)
          function, the table op; unary elementwise
          ops remember their result within the pass
          (Note [Shared subexpressions] in _memo.py)
large     as numpy, but elementwise ufuncs (NumPy's    a first-order pass on a node whose
          and the table's fused kernels) and the       gradient is a large array
          operators ``+ - * / -x < <= > >= == !=``     (``Primitive.backward_large``)
          go through the large-array kernels (Note
          [Large-array kernels] in _large)
========  ===========================================  =========================================

Operators are not names: under the numpy and graph bindings ``a * b`` is the operands' own
operator (NumPy's, or fastgrad's, which records). For the large binding they are written as
calls (``_large_op_mul(a, b)``) by ``large_source``, the one place a formula's text is
rewritten; that binding therefore runs a second compiled code of the same text, whose body also
opens the scope in which the binding owns the temporaries it makes (Note [Owned temporaries] in
``_large/kernels.pyx``). Which binding runs is decided in one place, the engine's rule call
(``_call_rule`` in ``_engine.pyx``): ``backward_graph`` under ``create_graph``, else
``backward_large`` when the gradient is large, else ``backward``.
"""

import ast
import copy
import re

import numpy as np

from fastgrad._ops import _derivatives, _memo, _rules
from fastgrad._kernels import _large
from fastgrad._core._array import ndarray


# The gradient dtypes that make weak_scalar convert (Note [Weak scalars]).
NARROW_DTYPES = frozenset(map(np.dtype, ("float16", "float32", "complex64")))


def weak_scalar(x, g):
    """A Python number ``x`` that a rule reads as an input, in the precision of the gradient
    ``g`` when that is single or half.

    Note [Weak scalars]
    ~~~~~~~~~~~~~~~~~~~
    NumPy 2 (NEP 50) and PyTorch treat a Python number next to an array as weak: ``x * 0.5``
    of a float32 ``x`` is float32. An op's kernel gets the Python number itself and follows
    NumPy, but a rule may compute with the number alone first (``safe_log(0.5)``,
    ``copysign(1, y)``), which NumPy does in float64 and returns as a float64 NumPy scalar,
    no longer weak: the gradient came out float64 (cast back by the engine, and a float64
    subgraph under ``create_graph``). So a compiled rule (``_registry._compile``) first gives
    a Python float or complex input (an int too where the input has a rule or the op is a
    ufunc, so never an index) the precision of the gradient when that is float32, float16 or
    complex64, the precision the forward computed in; a float64 gradient leaves it alone. The
    per-op path pays for this only where it can matter: a single-output rule tests the
    gradient's dtype once before its inputs, and a rule of one array input (which records
    only when that input is an array) has no test.
    ``tests/ops/test_float32_promotion.py`` scans every op for gradients that widen."""
    if type(g) is tuple or type(g) is list:
        g = next((e for e in g if e is not None), None)
    dt = getattr(g, "dtype", None)
    if dt is None or dt.itemsize >= (16 if dt.kind == "c" else 8):
        return x
    if dt.kind == "c":
        return np.complex64(x) if type(x) is complex else np.float32(x)
    if dt.kind == "f" and type(x) is not complex:
        return dt.type(x)
    return x


def rule_error(exc, op, names, k):
    """Note the op and the argument on an error raised by a derivative rule.

    Note [Errors name the op]
    ~~~~~~~~~~~~~~~~~~~~~~~~~
    An error raised inside a rule (NumPy's broadcast error, an IndexError of a scatter, a
    helper op's own error) would name nothing the user called. Every compiled rule
    (``_registry._compile``) therefore runs its formulas in a ``try`` whose handler adds a note,
    ``in the derivative of fastgrad.<op> with respect to its argument k (name)``, before the
    error propagates unchanged (its type and message are the original's), as the forward's
    errors get ``in fastgrad.<op>(...)`` (``_annotate`` in ``_array_recording.pxi``). A message
    that names the op already (``fastgrad.eigh``, or its public ``fastgrad.linalg.eigh``) gets
    no note. ``tests/ops/test_error_names.py`` checks every op."""
    text = " ".join([str(exc)] + [str(n) for n in getattr(exc, "__notes__", ())])
    if re.search(r"fastgrad\.(?:\w+\.)*%s\b" % re.escape(op), text):
        return          # fastgrad.eigh, or the public name fastgrad.linalg.eigh
    try:
        exc.add_note("in the derivative of fastgrad.%s with respect to its argument %d (%s)"
                     % (op, k, names[k] if k < len(names) else names[-1]))
    except AttributeError:      # Python < 3.11: no notes
        pass


def numpy_namespace():
    """NumPy's names with the rule helpers: the numpy binding (without the table's own ops,
    which ``_registry.build`` adds with ``dual`` as it creates them)."""
    # NumPy's own namespace as loaded (dir() + getattr would import its lazy submodules:
    # f2py, testing, ...). Formulas use no lazy submodule but linalg, imported here.
    ns = {k: v for k, v in vars(np).items() if not k.startswith("_")}
    ns["linalg"] = np.linalg
    ns.update({k: v for k, v in vars(_rules).items() if not k.startswith("_")})
    for section in _derivatives.SECTIONS:   # Note [Table sections] in _derivatives.py
        ns.update(section.HELPERS)
    ns["len"] = len
    ns["tuple"] = tuple
    ns["weak_scalar"] = weak_scalar
    ns["NARROW_DTYPES"] = NARROW_DTYPES
    ns["rule_error"] = rule_error
    return ns


def dual(prim, kernel):
    """A table op NumPy lacks, in the numpy binding: ``kernel`` on NumPy values, the recorded
    op on fastgrad arrays (a rule's helper may be called under ``create_graph`` too)."""
    def call(*args):
        if any(isinstance(a, ndarray) for a in args):
            return prim(*args)
        return kernel(*args)
    call.__name__ = prim.name
    call.dual_kernel = kernel         # for the large binding (large_namespace)
    return call


def graph_namespace(functions, registry, ufunc_ops):
    """The graph binding: every name a formula reads that fastgrad records, bound to
    fastgrad's op. ``functions`` is the module of fastgrad's NumPy-style functions,
    ``registry`` the table's ops by name, ``ufunc_ops`` the op of each ufunc."""
    ns = numpy_namespace()
    for ufunc, prim in ufunc_ops.items():
        if ns.get(ufunc.__name__) is ufunc:
            ns[ufunc.__name__] = prim
    for name in functions.__all__:
        value = ns.get(name)
        if value is not None and not isinstance(value, np.ufunc) and callable(value):
            ns[name] = getattr(functions, name)
    for name, prim in registry.items():
        if not hasattr(np, name):
            ns[name] = prim
    for ufunc, prim in ufunc_ops.items():
        if ufunc.nin == 1 and ufunc.nout == 1 and ns.get(ufunc.__name__) is not None:
            ns[ufunc.__name__] = _memo.memoized(prim)
    return ns


_LARGE_BINOPS = {ast.Add: "op_add", ast.Sub: "op_sub", ast.Mult: "op_mul", ast.Div: "op_div"}
_LARGE_CMPOPS = {ast.Gt: "op_gt", ast.GtE: "op_ge", ast.Lt: "op_lt", ast.LtE: "op_le",
                 ast.Eq: "op_eq", ast.NotEq: "op_ne"}


def large_namespace(numpy_ns):
    """The large binding, from the numpy binding's namespace ``numpy_ns`` (with the table's
    ops): elementwise ufuncs and the operators' functions through the large-array kernels."""
    ns = dict(numpy_ns)
    for k, v in numpy_ns.items():
        # a table op NumPy lacks whose kernel is a ufunc (the fused kernels of _fused.pyx) is
        # split too: a rule of this binding is given NumPy values, never fastgrad arrays
        v = getattr(v, "dual_kernel", v)
        if isinstance(v, np.ufunc) and v.signature is None and v.nout == 1 and v.nin <= 3:
            ns[k] = _large.Split(v)
    for name in set(_LARGE_BINOPS.values()) | set(_LARGE_CMPOPS.values()) | {"op_neg"}:
        ns["_large_" + name] = getattr(_large, name)
    ns["_large_rule_begin"] = _large.rule_begin
    ns["_large_rule_end"] = _large.rule_end
    return ns


class _Operators(ast.NodeTransformer):
    """Write a rule's ``a * b``, ``-a``, ``a > b``... as calls of the large binding's
    operator functions, and run its body in a scope of owned temporaries (Note [Owned
    temporaries] in ``_large/kernels.pyx``)."""

    _SCOPED = ast.parse(
        "_large_outer = _large_rule_begin()\n"
        "try:\n"
        "    pass\n"
        "finally:\n"
        "    _large_rule_end(_large_outer)\n").body

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        begin, scoped = copy.deepcopy(self._SCOPED)
        scoped.body = node.body
        node.body = [begin, scoped]
        return node

    def _call(self, name, args):
        return ast.Call(func=ast.Name(id="_large_" + name, ctx=ast.Load()), args=args,
                        keywords=[])

    def visit_BinOp(self, node):
        self.generic_visit(node)
        name = _LARGE_BINOPS.get(type(node.op))
        return self._call(name, [node.left, node.right]) if name else node

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        return self._call("op_neg", [node.operand]) if isinstance(node.op, ast.USub) else node

    def visit_Compare(self, node):
        self.generic_visit(node)
        name = _LARGE_CMPOPS.get(type(node.ops[0])) if len(node.ops) == 1 else None
        return self._call(name, [node.left, node.comparators[0]]) if name else node


def large_source(source):
    """The module AST of a rule's ``source`` for the large binding: operators as calls."""
    return ast.fix_missing_locations(_Operators().visit(ast.parse(source)))
