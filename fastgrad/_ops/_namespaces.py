"""The names the derivative table gives the public namespaces (Note [Generated namespaces]).

Note [Generated namespaces]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
An op of the table is public without a line anywhere else. ``fastgrad.np`` holds every op
named as a NumPy function (``np.sin`` is the ``sin`` op) and its NumPy aliases
(``Op(..., aliases=["absolute"])``); ``fastgrad.npx`` holds the ops marked
``Op(..., npx=True)`` (``npx.relu``). Where NumPy's function takes arguments an op does not
(``sum(a, axis=None, dtype=None, out=None, keepdims=False)``), ``_functions.py`` defines a
function of the same name with NumPy's signature, which replaces the op in the namespace;
that function is public because it is defined there. So each namespace's ``__all__`` is the
table's names for it plus the public functions its modules define (``public_names``), and
``tests/namespaces/test_api_surface.py`` checks the result against the committed type stubs.
The legacy ``fastgrad.nd`` keeps MXNet 1.x's fixed list of names and is written out by hand.
"""

import types

import numpy as _np

from fastgrad._ops._derivatives import TABLE
from fastgrad._ops._registry import REGISTRY


def numpy_names():
    """``{name: primitive}`` for ``fastgrad.np``: every op NumPy has a function of the same
    name for, under that name, and every op's ``aliases``."""
    out = {}
    for op in TABLE:
        if callable(getattr(_np, op.name, None)):
            out[op.name] = REGISTRY[op.name]
        for alias in op.aliases:
            out[alias] = REGISTRY[op.name]
    return out


def npx_names():
    """``{name: primitive}`` for ``fastgrad.npx``: the ops marked ``npx=True``."""
    return {op.name: REGISTRY[op.name] for op in TABLE if op.npx}


def public_names(namespace, table_names, modules=()):
    """The sorted public names of a module whose globals are ``namespace``: those of
    ``table_names`` it still binds to the table's op, and the functions it defines (a name
    bound to such a function, like ``concat = concatenate``, counts) or re-exports from the
    ``modules`` named."""
    module = {namespace["__name__"], *modules}
    names = set()
    for name, value in namespace.items():
        if name.startswith("_"):
            continue
        if table_names.get(name) is value:
            names.add(name)
        elif isinstance(value, types.FunctionType) and value.__module__ in module:
            names.add(name)
    return sorted(names)
