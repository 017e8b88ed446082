"""The namespaces hold exactly what the table says (Note [Generated namespaces])."""

import types

import numpy

import fastgrad
from fastgrad._core._array import Primitive
from fastgrad._ops._derivatives import TABLE
from fastgrad._ops._registry import REGISTRY
from fastgrad._api import _functions
from fastgrad._ops import _namespaces


def _primitives_bound(module):
    """``{public name: op name}`` of the names of ``module`` bound to a table op."""
    return {name: value.name for name, value in vars(module).items()
            if not name.startswith("_") and isinstance(value, Primitive)}


def test_every_op_named_as_numpy_is_in_np_as_the_op_or_its_numpy_signature():
    for op in TABLE:
        if not callable(getattr(numpy, op.name, None)):
            continue
        value = getattr(fastgrad.np, op.name)
        assert op.name in fastgrad.np.__all__, op.name
        # Either the op itself or the function of _functions with NumPy's signature.
        assert value is REGISTRY[op.name] or (isinstance(value, types.FunctionType)
                                              and value.__module__.startswith("fastgrad.")), \
            op.name


def test_aliases_are_the_op_itself():
    aliased = [op for op in TABLE if op.aliases]
    assert {"absolute", "true_divide", "conj", "fix", "bitwise_not"} <= {
        a for op in aliased for a in op.aliases}
    for op in aliased:
        for alias in op.aliases:
            assert getattr(fastgrad.np, alias) is getattr(fastgrad.np, op.name), alias
            assert alias in fastgrad.np.__all__


def test_np_binds_no_op_the_table_does_not_put_there():
    table_names = _namespaces.numpy_names()
    for name, op_name in _primitives_bound(fastgrad.np).items():
        assert table_names.get(name) is REGISTRY[op_name], name


def test_npx_holds_the_ops_marked_npx_and_no_other_op():
    marked = {op.name for op in TABLE if op.npx}
    assert {"relu", "sigmoid", "erf", "gamma"} <= marked
    for name in marked:
        assert getattr(fastgrad.npx, name) is REGISTRY[name]
        assert name in fastgrad.npx.__all__
    assert set(_primitives_bound(fastgrad.npx)) == marked


def test_all_lists_the_table_names_and_the_functions_defined_here():
    # _functions defines the NumPy-signature functions and re-exports those of _creation.
    defined = {name for name, value in vars(_functions).items()
               if isinstance(value, types.FunctionType) and not name.startswith("_")
               and value.__module__ in (_functions.__name__, "fastgrad._api._creation")}
    assert {"zeros", "array", "eye", "sum", "reshape", "linspace"} <= defined
    table = set(_namespaces.numpy_names())
    assert defined | table <= set(_functions.__all__) | {"linalg"}
    extra = set(_functions.__all__) - defined - table
    assert extra == {"from_dlpack", "load", "save", "savez", "savez_compressed"}


def test_public_names_skips_private_and_foreign_values():
    namespace = {"__name__": "probe", "_hidden": lambda: 0, "table_op": REGISTRY["sin"],
                 "other_op": REGISTRY["cos"], "imported": numpy.sum}

    def defined():
        pass
    defined.__module__ = "probe"
    namespace["defined"] = defined
    assert _namespaces.public_names(namespace, {"table_op": REGISTRY["sin"]}) == [
        "defined", "table_op"]
