"""How the table's formulas serve complex values (used by ``_registry.build``).

Note [Complex gradients]
~~~~~~~~~~~~~~~~~~~~~~~~
fastgrad follows PyTorch's convention. For a real loss ``L`` and a complex ``z = a + ib``, the
gradient is ``dL/da + i dL/db``, so ``z -= lr * z.grad`` descends. A rule receives ``g`` in the
same convention for its output and returns it for each input; for a holomorphic ``f`` (``sin``,
``exp``, ``multiply``...) that is ``g * conj(f'(z))``, and a linear map (``matmul``, ``dot``,
``solve``...) passes ``g`` through its conjugate transpose. Rules whose output is real (``abs``,
``var``, ``norm``) give the gradient of that real function of ``a`` and ``b``, written as a
complex number. A real input that meets a complex gradient keeps its real part (the engine's
cast, Note [Accumulation]).

The table's formulas are written for both kinds of values, with ``conj`` where the complex rule
needs it. ``_registry`` compiles each such formula twice: as written, for nodes with a complex
input or output, and with every ``conj(...)`` replaced by its argument, for real nodes (the
conjugate of a real value is itself: the real pass keeps its speed). An op declares in the
table that it differentiates complex values, ``Op(..., complex=True)``, once its rules were
checked against finite differences on the real and imaginary parts to second order
(``tests/ops/test_ops_complex.py``); ``complex={input: formula}`` replaces a formula whose complex
form is not the real one with ``conj`` (``abs``: ``sign`` of a complex number has a
derivative). An op that declares nothing raises ``NotImplementedError`` naming it when it is
recorded with a complex input or output, rather than differentiating with a rule nobody
checked.
"""

import ast


class _StripConj(ast.NodeTransformer):
    """``conj(e)`` -> ``e``: the rule for real values."""

    found = False

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "conj" and len(node.args) == 1:
            self.found = True
            return node.args[0]
        return node


def real_formula(formula):
    """``formula`` with every ``conj(...)`` replaced by its argument, and whether it had one."""
    strip = _StripConj()
    tree = strip.visit(ast.parse(formula, mode="eval"))
    return ast.unparse(ast.fix_missing_locations(tree)), strip.found
