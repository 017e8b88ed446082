"""Start-up: the one place where the layers' upward needs are connected (Note [Bootstrap]).

Note [Bootstrap]
~~~~~~~~~~~~~~~~
Modules import only downward (Note [Layers] in _layers.py), yet a few lower modules need what
a layer above them defines: the array type's operators are the table's primitives (``a + b``
is the ``add`` op) and its methods the NumPy-style functions (``a.sum()``); ``a.backward()`` is
the autograd API; the engine records its sums and casts with the table's primitives; a rule
recorded under ``create_graph`` calls fastgrad's functions; ``Symbol.bind`` makes an executor.
Each such lower module declares what it needs as one keyword-only ``wire(...)`` function
(``_engine.register_primitives`` for the engine) that keeps what it is given, and ``wire``
below, called once by ``fastgrad/__init__.py`` right after it has imported this module (and,
through it, every piece), hands each its pieces, in this order:

1. ``_filled``: the array type, which a filled gradient defers to under ``create_graph``;
2. ``_array``: the table's primitives and ufuncs (``_registry``), the NumPy-style functions
   (``_functions``), NumPy's functions on fastgrad arrays (``_dispatch``), the docstring
   writer (``_docs``), the legacy array class (``ndarray``) and the backward pass
   (``autograd``);
3. ``_engine``: the primitives it records with;
4. ``_registry``: the functions the rules' graph binding reads (Note [Bindings]);
5. ``autograd``: ``get_symbol``'s builder (``symbol._history``);
6. ``symbol._graph``: the JSON writer and reader, the translation to MXNet's ops, the symbol
   op builder, and the executor class.

No module connects itself at its import, so the import order is no contract: every module
imports as if it were alone, and what depends on the wiring runs only once ``wire`` has. A
lower module used before it (by code that runs while ``fastgrad`` is being imported) raises
an error naming what is not connected yet, not an ``AttributeError`` on ``None``. Importing
any submodule (``import fastgrad._core._array``) runs ``fastgrad/__init__.py`` first, so user code
always finds the package wired. ``tests/package/test_layers.py`` checks that the ``wire`` functions
listed in ``_layers.WIRING`` are called here and nowhere else.
"""

from fastgrad._core import _array, _engine
from fastgrad._api import _dispatch, _functions
from fastgrad._ops import _docs, _registry
from fastgrad._kernels import _filled
from fastgrad import autograd, executor, ndarray
from fastgrad.symbol import _api, _graph, _history, _json, _mxnet_json


def wire():
    """Connect every lower module to what the layers above define (Note [Bootstrap]).

    Called once, by ``fastgrad/__init__.py``.
    """
    _filled.wire(array_type=_array.ndarray)
    _array.wire(primitives=_registry.REGISTRY, ufuncs=_registry.UFUNC_OPS,
                functions=_functions, numpy_functions=_dispatch.FUNCS,
                describe=_docs.describe, legacy_array=ndarray.NDArray,
                backward=autograd.backward)
    _engine.register_primitives(_registry.REGISTRY)
    _registry.wire(functions=_functions)
    autograd.wire(symbol_builder=_history.from_history)
    _graph.wire(to_json=_json.to_json, load_json=_json.load_json,
                translate=_mxnet_json.translate, symbol_op=_api.symbol_op,
                executor=executor.Executor)
