"""The catalogue of operations a symbol node can hold.

Note [Symbol ops]
~~~~~~~~~~~~~~~~~
A symbol node runs one of three kinds of operation, named by a string that is also what the
JSON format stores:

``'null'`` / ``'_const'``
    An argument (a variable bound at ``bind``) and a constant value stored in the graph.
a registry name (``'exp'``, ``'matmul'``, ...)
    A primitive of the derivative table. The executor calls its forward kernel and its
    derivative rule directly, in a schedule planned at bind (Notes [Executor plan] and
    [Backward replay] in ``fastgrad/symbol/_plan.pyx``).
``'np.<name>'`` / ``'npx.<name>'`` / ``'mx.<Name>'``
    A public function of ``fastgrad.np``/``fastgrad.npx`` that is a composition of primitives
    (``npx.softmax``, ``np.sum`` with NumPy's signature, ``npx.dropout``). The node keeps the
    call (positional and keyword arguments, with its symbol inputs as placeholders) and the
    executor calls the function on arrays each time, so functions whose result depends on
    values (a dropout mask, a shift by the maximum) stay correct for every input. The
    ``'mx.'`` ops are MXNet 1.x's layer operators (Note [MXNet 1.x operators] in
    ``_legacy.py``).

Nothing is written per op: the primitives come from ``REGISTRY`` and the compositions from the
public names of the two modules, so ops added to the table or to the modules appear here.
The lookup tables are built on first use, after the rest of fastgrad is imported.
"""

import threading
import types

from fastgrad._core._array import Primitive
from fastgrad._ops._registry import REGISTRY
from fastgrad import numpy as numpy_namespace, numpy_extension
from fastgrad.ndarray import image as image_namespace
from fastgrad.symbol import _legacy

VARIABLE = "null"
CONSTANT = "_const"

# Public names that are callables but do not compute arrays from arrays.
_NOT_OPS = frozenset({
    "shape", "ndim", "size", "result_type", "array_equal", "array_equiv", "allclose",
    "seed", "set_np", "reset_np", "is_np_array", "cpu", "gpu", "get_state", "set_state",
    "dtype", "finfo", "iinfo", "ndarray", "set_printoptions", "get_printoptions",
    "save", "load", "load_frombuffer", "waitall", "num_gpus", "current_device",
    "is_np_default_dtype",
})

_lock = threading.Lock()
_composites = None          # 'np.softmax' -> the function


def _walk(prefix, module, out, depth=0):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")]
    for name in names:
        obj = getattr(module, name, None)
        if obj is None or name in _NOT_OPS:
            continue
        if isinstance(obj, types.ModuleType):
            if depth == 0 and obj.__name__.startswith("fastgrad."):
                _walk(prefix + name + ".", obj, out, depth + 1)
            continue
        if isinstance(obj, type) or not callable(obj):
            continue
        out[prefix + name] = obj


def composites():
    """``{'np.name': function}`` for every public composition of ``fastgrad.np``/``npx``."""
    global _composites
    if _composites is None:
        with _lock:
            if _composites is None:
                out = {}
                _walk("np.", numpy_namespace, out)
                _walk("npx.", numpy_extension, out)
                _walk("image.", image_namespace, out)       # sym.image (MXNet's F.image)
                out.update(_legacy.functions())
                _composites = out
    return _composites


def lookup(op_name):
    """What runs ``op_name``: a Primitive, a composite function, or ``None`` if unknown."""
    prim = REGISTRY.get(op_name)
    if prim is not None:
        return prim
    return composites().get(op_name)


def is_primitive(fn):
    return type(fn) is Primitive
