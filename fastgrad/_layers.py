"""The layers of fastgrad: which module may import which (Note [Layers]).

Note [Layers]
~~~~~~~~~~~~~
The modules of ``fastgrad/`` form layers, listed below from the bottom up. A module imports
only modules of its own layer or of layers below it, never above, and the imports inside one
layer form no cycle. Modules of fastgrad are imported at the top of a file, never inside a
function, where an import could hide a cycle (optional dependencies such as SciPy are still
imported on first use). ``tests/package/test_layers.py`` reads every module's imports (the syntax
tree of a ``.py`` file, the ``import``/``cimport`` lines of a ``.pyx``/``.pxd`` and of the
``.pxi`` files a ``.pyx`` includes) and fails on a cycle, an import that goes up, or an import
inside a function.

Where a lower layer needs something that an upper layer defines, the dependency is inverted:
the lower module declares what it needs as one ``wire(...)`` function (the engine's is
``register_primitives``) and ``fastgrad._bootstrap``, in the package layer, hands every lower
module its pieces in one step at start-up, called once by ``fastgrad/__init__.py`` (Note
[Bootstrap] in _bootstrap.py). No module connects itself at its import, so the import order is
no contract. The connections are listed in ``WIRING``, and the test checks that each function
is declared in its module and called from ``_bootstrap`` and nowhere else.

A module not listed here fails the test: a new module takes its place in a layer. (A few
names are listed before they exist, for branches under review: ``present`` tells.)
"""

import ast
import os
import re

PACKAGE = os.path.dirname(os.path.abspath(__file__))

# (layer name, what it holds, its modules: a name ending in ".*" means a whole subpackage)
LAYERS = (
    ("state", "version, errors, devices, per-thread state, tape nodes, symbolic zeros",
     ["_version", "_source_tree", "base", "context", "device", "_state", "_node", "_zeros",
      "_complex", "_anomaly", "_reshape_codes"]),
    ("kernels", "NumPy kernels, fused ufuncs, the thread pool and its split operators, the thread "
     "settings, filled gradients",
     ["_large", "_large.*", "_fused", "_threads", "_filled", "_kernels", "_memo"]),
    ("array", "the array type and the recording path (Primitive.apply), the backward core",
     ["_array", "_engine", "_custom_function"]),
    ("table", "the derivative table, its rule helpers, the registry that compiles it",
     ["_table_complex", "_table_fft", "_table_linalg", "_table_special", "_table_ctc",
      "_table_fused",
      "_derivatives", "_rules", "_bindings", "_registry", "_docs", "_namespaces"]),
    ("functions", "NumPy-signature functions over the primitives, NumPy dispatch, files",
     ["_construction", "_creation", "_functions", "_linalg", "_fft", "_numpy_composites",
      "_npx_composites", "_rnn", "_ctc", "_mxnet_slicing", "_update_ops", "_io", "_params_format",
      "_dispatch", "_image", "_image_files"]),
    ("namespaces", "the public namespaces np, npx, nd, random, scipy",
     ["numpy", "numpy.*", "numpy_extension", "util", "ndarray", "ndarray.*", "random",
      "scipy", "scipy.*", "image", "recordio"]),
    ("autograd", "the autograd API: record, backward, grad, Function, functional transforms",
     ["_derivative_tools", "functional", "autograd"]),
    ("symbol", "symbolic graphs, their JSON formats and the compiled executor",
     ["symbol", "symbol.*", "_plan", "executor", "visualization"]),
    ("tools", "optimizers, key-value stores, the launcher, stubs",
     ["optimizer", "optimizer.*", "kvstore", "kvstore.*", "launch", "_layers"]),
    ("gluon", "initializers, metrics, Gluon's parameters, blocks, layers, losses, Trainer, data",
     ["registry", "initializer", "metric", "gluon", "gluon.*", "io", "io.*", "model",
      "callback", "monitor", "module", "module.*", "test_utils"]),
    ("package", "the package itself, its start-up, its demo and its stub generator",
     ["_bootstrap", "demo", "_stubgen", ""]),
)

# (lower module, the function that connects it, what it is given): every one is called by
# fastgrad._bootstrap.wire and by no other module (Note [Bootstrap] in _bootstrap.py).
WIRING = (
    ("_filled", "wire", "the array type"),
    ("_array", "wire", "the primitives, functions, NumPy dispatch, docs, NDArray, backward"),
    ("_engine", "register_primitives", "the primitives it records with"),
    ("_registry", "wire", "the functions the rules' graph binding reads"),
    ("autograd", "wire", "get_symbol's builder"),
    ("symbol._graph", "wire", "JSON, MXNet translation, symbol ops, the executor"),
)
BOOTSTRAP = "_bootstrap"


def present(member, package=PACKAGE):
    """Whether the module (or, for ``name.*``, the subpackage) ``member`` of ``LAYERS`` is in
    the package: as source, as a compiled extension or as a folder."""
    if member == "":
        return True
    path = os.path.join(package, *member.rstrip(".*").split("."))
    if os.path.isdir(path):
        return True
    folder, name = os.path.split(path)
    return os.path.isdir(folder) and any(
        f.split(".")[0] == name and f.endswith((".py", ".pyx", ".so", ".pyd"))
        for f in os.listdir(folder))


def layer_of(module):
    """The index in ``LAYERS`` of ``module`` (a name relative to ``fastgrad``, ``""`` for the
    package itself), or ``None`` if it is not listed."""
    for index, (_, _, members) in enumerate(LAYERS):
        for member in members:
            if module == member or (member.endswith(".*") and
                                    module.startswith(member[:-1])):
                return index
    return None


# ------------------------------------------------------------ reading the imports
SOURCE_SUFFIXES = (".py", ".pyx", ".pxd")


def _module_name(path, package):
    """``'symbol._graph'`` for fastgrad/symbol/_graph.py, ``''`` for fastgrad/__init__.py."""
    rel = os.path.relpath(path, package)
    rel = re.sub(r"\.(py|pyx|pxd)$", "", rel).replace(os.sep, ".")
    if rel == "__init__":
        return ""
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


_INCLUDE = re.compile(r'^include\s+"([\w.]+\.pxi)"', re.M)


def source_files(package=PACKAGE):
    """``{module: [its source files]}``. A ``.pxi`` file is part of the ``.pyx`` that
    includes it (Note [Array parts] in _array.pyx): its imports count as that module's."""
    files = {}
    for folder, dirs, names in os.walk(package):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
        for name in sorted(names):
            if name.endswith(SOURCE_SUFFIXES) and not name.endswith(".pyi"):
                path = os.path.join(folder, name)
                files.setdefault(_module_name(path, package), []).append(path)
                if name.endswith(".pyx"):
                    text = open(path, encoding="utf-8").read()
                    files[_module_name(path, package)] += [
                        os.path.join(folder, part) for part in _INCLUDE.findall(text)]
    return files


def python_imports(path, module):
    """``[(absolute dotted name, line)]`` of every import in the Python file ``path``."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    is_package = os.path.basename(path) == "__init__.py"
    package = ("fastgrad." + module if module else "fastgrad").split(".")
    if not is_package:
        package = package[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[:len(package) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            found += [(base + "." + alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args \
                and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) \
                and (getattr(node.func, "id", None) == "__import__"
                     or getattr(node.func, "attr", None) == "import_module"):
            found.append((node.args[0].value, node.lineno))
    return found


_CYTHON_IMPORT = re.compile(r"\s*(?:from\s+([\w.]+)\s+c?import\s+(.+)|c?import\s+([\w.,\s]+))")


def cython_imports(path):
    """``[(absolute dotted name, line)]`` of the import and cimport lines of ``path``."""
    found = []
    lines = open(path, encoding="utf-8").read().splitlines()
    for number, line in enumerate(lines, 1):
        match = _CYTHON_IMPORT.match(line)
        if not match:
            continue
        if match.group(1):
            names = match.group(2).split("#")[0]
            index = number
            while names.rstrip().endswith(("(", ",", "\\")) and index < len(lines):
                names += " " + lines[index].split("#")[0]   # a continued name list
                index += 1
            for name in re.split(r"[\s,()\\]+", names):
                if name and name != "as" and name.isidentifier():
                    found.append((match.group(1) + "." + name, number))
        else:
            for name in match.group(3).split(","):
                if name.split():
                    found.append((name.split()[0], number))
    return found


def _resolve(dotted, modules):
    """The fastgrad module ``dotted`` names (an imported module, or a module whose attribute
    it names), relative to the package, or ``None`` if it is outside fastgrad."""
    if dotted != "fastgrad" and not dotted.startswith("fastgrad."):
        return None
    name = dotted[len("fastgrad."):] if dotted != "fastgrad" else ""
    while name not in modules:
        if "." not in name:
            return "" if name else ""
        name = name.rpartition(".")[0]
    return name


def import_graph(package=PACKAGE):
    """``{module: {imported module: 'file:line' of its first import}}`` over every module of
    the package in the directory ``package`` (this one by default)."""
    files = source_files(package)
    graph = {}
    for module, paths in files.items():
        edges = graph.setdefault(module, {})
        for path in paths:
            found = python_imports(path, module) if path.endswith(".py") \
                else cython_imports(path)
            for dotted, line in found:
                target = _resolve(dotted, files)
                if target is not None and target != module:
                    edges.setdefault(target, "%s:%d" % (os.path.relpath(path, package), line))
    return graph
