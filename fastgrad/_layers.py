"""The layers of fastgrad: which module may import which (Note [Layers]).

Note [Layers]
~~~~~~~~~~~~~
The modules of ``fastgrad/`` form layers, listed below from the bottom up, and the folders
show them: a layer is a folder of the package (``_core/``, ``_ops/``, ...) plus, for the
layers that hold public modules, those modules at the import paths users know
(``fastgrad.numpy``, ``fastgrad.autograd``, ...). A module imports only modules of its own
layer or of layers below it, never above, and the imports inside one layer form no cycle.
Modules of fastgrad are imported at the top of a file, never inside a function, where an
import could hide a cycle (optional dependencies such as SciPy are still imported on first
use). ``tests/package/test_layers.py`` reads every module's imports from the source tree
(with ``tests/tools/imports.py``: the syntax tree of a ``.py`` file, the
``import``/``cimport`` lines of a ``.pyx``/``.pxd`` and of the ``.pxi`` files a ``.pyx``
includes) and fails on a cycle, an import that goes up, an import inside a function, or a
module that no layer holds.

Where a lower layer needs something that an upper layer defines, the dependency is inverted:
the lower module declares what it needs as one ``wire(...)`` function (the engine's is
``register_primitives``) and ``fastgrad._bootstrap``, in the package layer, hands every lower
module its pieces in one step at start-up, called once by ``fastgrad/__init__.py`` (Note
[Bootstrap] in _bootstrap.py). No module connects itself at its import, so the import order is
no contract. The connections are listed in ``WIRING``, and the test checks that each function
is declared in its module and called from ``_bootstrap`` and nowhere else.

This module is data: the rule's statement, kept in the package beside the code it governs
(and cited from it). The tools that check it (the import reader, the stub generator) are not
part of the runtime and live in ``tests/tools/``.
"""

import os

PACKAGE = os.path.dirname(os.path.abspath(__file__))

# (layer name, what it holds, its members). A member ending in "/" is a folder of the package
# with everything in it (a private layer folder, or a public subpackage); any other member is
# one module outside a folder: a public module at the path users import, or the package's own.
LAYERS = (
    ("base", "version, errors, devices",
     ["_version", "base", "context", "device"]),
    ("kernels", "forward kernels, the thread pool and its split operators, filled gradients",
     ["_kernels/"]),
    ("core", "the Cython tape runtime: state, nodes, zeros, the array type and its recording "
     "path, the backward engine", ["_core/"]),
    ("ops", "the derivative table, its rule helpers, bindings, the registry that compiles it",
     ["_ops/"]),
    ("api", "NumPy-signature functions over the primitives, NumPy dispatch, files",
     ["_api/"]),
    ("namespaces", "the public namespaces np, npx, nd, random, scipy, image, recordio",
     ["numpy/", "numpy_extension", "util", "ndarray/", "random", "scipy/", "image",
      "recordio"]),
    ("autograd", "the autograd API: record, backward, grad, Function, functional transforms",
     ["_autograd/", "functional", "autograd"]),
    ("symbol", "symbolic graphs, their JSON formats, the compiled executor and its plan",
     ["symbol/", "executor", "visualization"]),
    ("tools", "optimizers, key-value stores, the launcher",
     ["optimizer/", "kvstore/", "launch"]),
    ("gluon", "initializers, metrics, Gluon's parameters, blocks, layers, losses, Trainer, data",
     ["registry", "initializer", "metric", "gluon/", "io/", "model", "callback", "monitor",
      "module/", "test_utils"]),
    ("package", "the package itself, its demo, the layers' statement",
     ["", "_source_tree", "_bootstrap", "_layers", "demo"]),
)

# (lower module, the function that connects it, what it is given): every one is called by
# fastgrad._bootstrap.wire and by no other module (Note [Bootstrap] in _bootstrap.py).
WIRING = (
    ("_kernels._filled", "wire", "the array type"),
    ("_core._array", "wire", "the primitives, functions, NumPy dispatch, docs, NDArray, backward"),
    ("_core._engine", "register_primitives", "the primitives it records with"),
    ("_ops._registry", "wire", "the functions the rules' graph binding reads"),
    ("autograd", "wire", "get_symbol's builder"),
    ("symbol._graph", "wire", "JSON, MXNet translation, symbol ops, the executor"),
)
BOOTSTRAP = "_bootstrap"

_MODULE_SUFFIXES = (".py", ".pyx", ".so", ".pyd")


def present(member, package=PACKAGE):
    """Whether the member ``member`` of ``LAYERS`` (a folder, or a module) is in the package:
    as source, as a compiled extension or as a folder."""
    if member == "":
        return True
    path = os.path.join(package, *member.rstrip("/").split("."))
    if member.endswith("/"):
        return os.path.isdir(path)
    folder, name = os.path.split(path)
    return os.path.isdir(folder) and any(
        f.split(".")[0] == name and f.endswith(_MODULE_SUFFIXES) for f in os.listdir(folder))


def modules_in(member, package=PACKAGE):
    """The modules a folder member holds, as names relative to the folder (``['_array',
    ...]``, subpackages as ``'_large/'``), read from the package; ``[]`` for a module."""
    if not member.endswith("/"):
        return []
    folder = os.path.join(package, member.rstrip("/"))
    names = set()
    for name in os.listdir(folder):
        full = os.path.join(folder, name)
        if os.path.isdir(full) and os.path.exists(os.path.join(full, "__init__.py")):
            names.add(name + "/")
        elif name.endswith(_MODULE_SUFFIXES) and not name.startswith("__init__."):
            names.add(name.split(".")[0])
    return sorted(names)


def layer_of(module):
    """The index in ``LAYERS`` of ``module`` (a dotted name relative to ``fastgrad``, ``""``
    for the package itself), or ``None`` if no layer holds it."""
    for index, (_, _, members) in enumerate(LAYERS):
        for member in members:
            if member.endswith("/"):
                folder = member[:-1]
                if module == folder or module.startswith(folder + "."):
                    return index
            elif module == member:
                return index
    return None
