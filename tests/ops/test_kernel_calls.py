"""A table entry says how its NumPy routine takes its arguments (``call=``): the registry
compiles the call, and ``_kernels/_forward.py`` holds no adapter that only reorders or renames them
(Note [Kernel calls] in fastgrad/_ops/_registry.py)."""

import ast
import glob
import os

import numpy as onp
import pytest

import fastgrad
from fastgrad._ops import _registry
from fastgrad._ops._derivatives import TABLE, Op

PACKAGE = os.path.dirname(os.path.abspath(fastgrad.__file__))
# _kernels/_forward.py and the table's sections (Note [Table sections]), which hold kernels too.
KERNEL_FILES = [os.path.join(PACKAGE, "_kernels", "_forward.py")] + sorted(
    glob.glob(os.path.join(PACKAGE, "_ops", "_table_*.py")))


def test_the_kernel_files_are_found():
    """The folders moved once under this test and it checked nothing: never again."""
    assert all(os.path.isfile(path) for path in KERNEL_FILES)
    assert len(KERNEL_FILES) > 5, KERNEL_FILES


def _only_passes_its_arguments(fn):
    """Whether ``fn`` is ``return np.<routine>(<its parameters, by position or keyword,
    and constants>)``."""
    body = [s for s in fn.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return False
    call = body[0].value
    func = call.func if isinstance(call, ast.Call) else None
    while isinstance(func, ast.Attribute):
        func = func.value
    if not (isinstance(func, ast.Name) and func.id in ("np", "_np")):
        return False
    params = {a.arg for a in fn.args.args}
    values = list(call.args) + [k.value for k in call.keywords]
    return all(isinstance(v, ast.Constant) or (isinstance(v, ast.Name) and v.id in params)
               for v in values)


# Kernels that look like adapters and are not: np.matmul is a ufunc, so as a kernel it would
# make conv2d_product the op NumPy's matmul dispatches to (Op.ufunc).
KERNELS_NOT_ADAPTERS = {"conv2d_product"}


@pytest.mark.parametrize("path", KERNEL_FILES, ids=os.path.basename)
def test_kernels_hold_no_positional_adapter(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    adapters = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)
                and _only_passes_its_arguments(node) and node.name not in KERNELS_NOT_ADAPTERS]
    assert not adapters, ("adapters that only pass their arguments to NumPy: %s; give the "
                          "table entry call= instead" % adapters)


def test_the_checker_sees_an_adapter():
    fn = ast.parse("def var(x, axis, keepdims):\n    return np.var(x, axis=axis, "
                   "keepdims=keepdims)\n").body[0]
    kernel = ast.parse("def f(x):\n    return np.where(x > 0, x, 0)\n").body[0]
    assert _only_passes_its_arguments(fn) and not _only_passes_its_arguments(kernel)


def test_a_call_is_compiled_into_the_kernel():
    entry = Op("probe_var", onp.var, "x; axis=None, keepdims=False, ddof=0",
               call="x, axis=axis, keepdims=keepdims, ddof=ddof", x="g")
    prim = _registry.build([entry])[0]["probe_var"]
    x = onp.arange(12.0).reshape(3, 4)
    assert prim.forward(x, 1, True, 1).tolist() == onp.var(x, 1, keepdims=True, ddof=1).tolist()
    assert prim.forward.__name__ == "probe_var"
    assert fastgrad.np.var(fastgrad.np.array(x), axis=0).asnumpy().tolist() == \
        onp.var(x, axis=0).tolist()


def test_a_variadic_call_gets_the_arrays_as_one_sequence():
    entry = Op("probe_stack", onp.stack, "*xs; axis=0", call="xs, axis=axis", xs="g")
    prim = _registry.build([entry])[0]["probe_stack"]
    assert prim.forward(onp.ones(2), onp.zeros(2), 1).tolist() == [[1, 0], [1, 0]]


def test_a_call_reads_only_inputs_and_parameters():
    entry = Op("probe_bad", onp.var, "x; axis=None", call="x, axis=axes", x="g")
    with pytest.raises(ValueError, match="probe_bad.*axes"):
        _registry.build([entry])


def test_an_entry_without_call_keeps_its_routine_as_the_kernel():
    by_name = {op.name: op for op in TABLE}
    assert _registry.REGISTRY["reshape"].forward is by_name["reshape"].forward is onp.reshape
    assert by_name["var"].call is not None
    assert _registry.REGISTRY["var"].forward is not onp.var
