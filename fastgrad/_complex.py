"""Which ops differentiate complex values, and how (read by ``_registry.build``).

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
conjugate of a real value is itself: the real pass keeps its speed). Ops listed in
``COMPLEX_RULES`` were checked against finite differences on the real and imaginary parts to
second order (``tests/test_ops.py``); their value there replaces formulas whose complex form is
not the real one with ``conj`` (``abs``: ``sign`` of a complex number has a derivative). An op
that is not listed raises ``NotImplementedError`` naming it when it is recorded with a complex
input or output, rather than differentiating with a rule nobody checked.
"""

import ast

# op name -> {input: formula used for complex values instead of the table's}. Every op listed
# here is checked for complex128 by tests/test_ops.py.
COMPLEX_RULES = {
    # arithmetic and elementwise functions
    "add": {}, "subtract": {}, "multiply": {}, "divide": {}, "power": {}, "negative": {},
    "positive": {}, "square": {}, "reciprocal": {}, "sqrt": {},
    "exp": {}, "expm1": {}, "exp2": {}, "log": {}, "log1p": {}, "log2": {}, "log10": {},
    "sin": {}, "cos": {}, "tan": {}, "arcsin": {}, "arccos": {}, "arctan": {},
    "sinh": {}, "cosh": {}, "tanh": {}, "arcsinh": {}, "arctanh": {},
    "conjugate": {}, "real": {}, "imag": {}, "nan_to_num": {},
    "abs": {"x": "g * complex_sign(x, abs(x))"},
    # erf and erfc are entire: conj of the same derivative (Note [Complex gradients])
    "erf": {}, "erfc": {},
    # sqrt(x - 1) sqrt(x + 1), not sqrt(x * x - 1): NumPy's branch of arccosh, whose
    # derivative the latter gets wrong by a sign where Re x < 0
    "arccosh": {"x": "g / conj(sqrt(x - 1) * sqrt(x + 1))"},
    # reductions
    "sum": {}, "mean": {}, "prod": {}, "var": {}, "std": {}, "nansum": {}, "nanmean": {},
    "cumsum": {}, "nancumsum": {}, "cumprod": {}, "norm": {},
    # NumPy orders complex values lexicographically (real part, then imaginary part): the
    # gradient goes to the selected (max, min, clip) or permuted (sort) elements, as for real
    "max": {}, "min": {}, "nanmax": {}, "nanmin": {}, "sort": {}, "clip": {},
    # shape and indexing
    "reshape": {}, "transpose": {}, "swapaxes": {}, "moveaxis": {}, "expand_dims": {},
    "squeeze": {}, "broadcast_to": {}, "sum_to": {}, "getitem": {}, "scatter_add": {},
    "take": {}, "take_along_axis": {}, "where": {}, "concatenate": {}, "stack": {},
    "split": {}, "tile": {}, "repeat": {}, "flip": {}, "roll": {}, "rot90": {}, "pad": {},
    "diag": {}, "diagonal": {}, "trace": {}, "triu": {}, "tril": {}, "diff": {},
    # linear algebra
    "matmul": {}, "dot": {}, "tensordot": {}, "einsum": {}, "einsum2": {}, "outer": {},
    "kron": {}, "cross": {}, "convolve": {}, "inv": {}, "det": {}, "solve": {},
    # decompositions: PyTorch's complex rules (Note [Complex decompositions] in _rules.py);
    # eigh, eigvalsh and cholesky factor the Hermitian part of the input
    "svd": {}, "eigh": {}, "eigvalsh": {}, "qr": {}, "cholesky": {}, "pinv": {},
    # slogdet's complex sign is differentiable, which its op declares it is not (real sign):
    # linalg.slogdet takes complex input through logdet (Note [Complex slogdet])
    "logdet": {},
    # dtype and copies
    "astype": {}, "copy": {},
    # sections of the table written for complex values from the start (_table_complex,
    # _table_fft, _table_linalg), in this convention; checked here too
    # (to_complex and times_i were written for real inputs: their complex ones need g itself
    # and -i g, whose real parts are the real rules, so the engine's cast serves both)
    "to_complex": {"x": "g"}, "times_i": {"x": "-1j * g"}, "fftn_c2c": {}, "rfftn": {}, "irfftn": {}, "eig": {},
    "complete_basis": {},
}


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
