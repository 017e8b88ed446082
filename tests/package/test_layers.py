"""The modules of fastgrad import only downward (Note [Layers] in fastgrad/_layers.py), and
the package's folders are its layers.

The imports are read from the source of the clone these tests sit in, not from a running
interpreter (``tools.imports.import_graph``, in tests/tools/): the syntax tree of each ``.py``
file (every ``import`` statement, at any depth, including inside functions, and ``__import__``/
``importlib.import_module`` calls with a literal name), and the ``import`` and ``cimport``
lines of each ``.pyx``/``.pxd`` file.
"""

import ast
import os
import re

import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastgrad import _layers  # noqa: E402
from tools import imports  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "fastgrad")
GRAPH = imports.import_graph(PACKAGE)


def _cycle(graph):
    """One import cycle of ``graph`` as a list of modules, or ``None``."""
    state = {}
    for start in sorted(graph):
        if state.get(start):
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        state[start] = 1
        while stack:
            module, targets = stack[-1]
            for target in targets:
                if state.get(target) == 1:
                    return path[path.index(target):] + [target]
                if not state.get(target):
                    state[target] = 1
                    path.append(target)
                    stack.append((target, iter(sorted(graph.get(target, ())))))
                    break
            else:
                state[module] = 2
                stack.pop()
                path.pop()
    return None


def test_the_reader_sees_lazy_and_cython_imports():
    # The graph is only as good as the parsing: check it on the imports that matter most.
    assert "_core._node" in GRAPH["_core._array"]      # a cimport in _array.pyx
    assert "_core._state" in GRAPH["_core._engine"]    # a cimport in _engine.pyx
    assert "_core._array" in GRAPH["_ops._registry"]
    assert "autograd" in GRAPH[""]                     # the package itself



def test_every_included_file_belongs_to_the_module_that_includes_it():
    # A .pxi file is read as part of the .pyx that includes it (Note [Array parts]); one that
    # no .pyx includes would escape the layer check, and so would its imports.
    included = {path for paths in imports.source_files(PACKAGE).values()
                for path in paths if path.endswith(".pxi")}
    on_disk = {os.path.join(folder, name) for folder, _, names in os.walk(PACKAGE)
               for name in names if name.endswith(".pxi")}
    assert included == on_disk
    parts = [p for p in imports.source_files(PACKAGE)["_core._array"] if p.endswith(".pxi")]
    assert sorted(os.path.basename(p) for p in parts) == [
        "_array_recording.pxi", "_array_tables.pxi", "_array_versions.pxi"]


def test_the_reader_counts_an_included_files_imports_as_its_includers(tmp_path):
    (tmp_path / "probe.pyx").write_text('include "probe_part.pxi"\n')
    (tmp_path / "probe_part.pxi").write_text("from fastgrad._core._node cimport Node\n")
    (tmp_path / "_core").mkdir()
    (tmp_path / "_core" / "_node.pyx").write_text("")
    assert imports.import_graph(str(tmp_path))["probe"] == {"_core._node": "probe_part.pxi:1"}


def test_the_reader_sees_imports_inside_functions_and_relative_ones(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("def f():\n    from fastgrad import autograd\n"
                    "    import fastgrad.symbol._graph\n    from . import _state\n"
                    "    __import__('fastgrad.symbol._plan')\n")
    found = sorted(name for name, _ in imports.python_imports(str(path), "symbol._probe"))
    assert found == ["fastgrad.autograd", "fastgrad.symbol._graph", "fastgrad.symbol._plan",
                     "fastgrad.symbol._state"]


def test_the_reader_sees_continued_cimport_lines(tmp_path):
    path = tmp_path / "probe.pyx"
    path.write_text("from fastgrad._core._array cimport (ndarray,\n    wrap)\n"
                    "cimport fastgrad._core._node\n"
                    "    from fastgrad._core._engine import run_backward\n")
    assert sorted(imports.cython_imports(str(path))) == [
        ("fastgrad._core._array.ndarray", 1), ("fastgrad._core._array.wrap", 1),
        ("fastgrad._core._engine.run_backward", 4), ("fastgrad._core._node", 3)]


def test_cycle_finder_finds_a_cycle_and_accepts_a_tree():
    assert _cycle({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b": 1, "c": 1}, "b": {"c": 1}, "c": {}}) is None


def test_every_module_has_a_layer():
    missing = sorted(m or "fastgrad (the package)" for m in GRAPH if _layers.layer_of(m) is None)
    assert not missing, "modules in no layer of fastgrad/_layers.py: %s" % missing


def test_the_folders_are_the_layers():
    # Every folder and module at the top of the package is a member of one layer, and every
    # member but those listed ahead of the branches that add them exists: a new module goes
    # into a layer's folder, or, if it is public, into LAYERS by name.
    members = [m for _, _, ms in _layers.LAYERS for m in ms]
    assert len(members) == len(set(members))
    top = set()
    for name in os.listdir(PACKAGE):
        full = os.path.join(PACKAGE, name)
        if os.path.isdir(full) and os.path.exists(os.path.join(full, "__init__.py")):
            top.add(name + "/")
        elif name.endswith((".py", ".pyx", ".so", ".pyd")) and not name.startswith("__init__"):
            top.add(name.split(".")[0])
    assert not top - set(members), "not in a layer of fastgrad/_layers.py: %s" % sorted(
        top - set(members))
    folders = [m for m in members if m.endswith("/") and m.startswith("_")]
    assert all(_layers.present(m) and _layers.modules_in(m) for m in folders)
    assert _layers.LAYERS[_layers.layer_of("_core._engine")][0] == "core"
    assert "_engine" in _layers.modules_in("_core/")


def test_the_runtime_package_holds_no_developer_tools():
    # The import reader and the stub generator are tools of the clone (tests/tools/), not
    # modules a user's program could import.
    for name in ("_stubgen", "imports"):
        assert not _layers.present(name)


def test_no_import_cycle():
    cycle = _cycle(GRAPH)
    assert cycle is None, "import cycle: %s" % " -> ".join(
        "%s (%s)" % (m or "fastgrad", GRAPH[m].get(n, "")) for m, n in zip(cycle, cycle[1:]))


def test_imports_go_only_downward():
    upward = []
    for module, edges in sorted(GRAPH.items()):
        own = _layers.layer_of(module)
        for target, where in sorted(edges.items()):
            theirs = _layers.layer_of(target)
            if own is not None and theirs is not None and theirs > own:
                upward.append("%s (layer %s) imports %s (layer %s) at %s" % (
                    module or "fastgrad", _layers.LAYERS[own][0], target or "fastgrad",
                    _layers.LAYERS[theirs][0], where))
    assert not upward, "imports that go up:\n" + "\n".join(upward)


def _calls_of(owner, function_name):
    """The modules whose source calls ``function_name`` of the module ``owner``: as an
    attribute of the module (``_array.wire(...)``), or as a name imported from it with or
    without a leading underscore. Read from the call nodes of a ``.py`` file, the code lines
    (not ``def``/``cpdef``, not comments) of a ``.pyx``/``.pxi``/``.pxd`` file."""
    alias = owner.rpartition(".")[2]
    call = re.compile(r"^(?!\s*(?:c?p?def) |\s*#).*(?:\b%s\.|[^.\w]_?)%s\("
                      % (alias, function_name), re.M)
    callers = set()
    for module, paths in imports.source_files(PACKAGE).items():
        for path in paths:
            text = open(path, encoding="utf-8").read()
            if not path.endswith(".py"):
                found = call.search(text)
            else:
                found = False
                for node in ast.walk(ast.parse(text)):
                    if not isinstance(node, ast.Call):
                        continue
                    func = node.func
                    if isinstance(func, ast.Attribute):
                        found = found or (func.attr == function_name and
                                          getattr(func.value, "id", None) == alias)
                    elif isinstance(func, ast.Name):
                        found = found or func.id in (function_name, "_" + function_name)
            if found:
                callers.add(module)
    return callers


def _source_of(module):
    return "".join(open(p, encoding="utf-8").read() for p in imports.source_files(PACKAGE)[module])


@pytest.mark.parametrize("owner, function, what", _layers.WIRING)
def test_each_connection_is_declared_below_and_made_by_the_bootstrap(owner, function, what):
    assert re.search(r"^(c?p?def|def) %s\(" % function, _source_of(owner), re.M), \
        "%s does not declare %s" % (owner, function)
    assert _layers.layer_of(_layers.BOOTSTRAP) >= _layers.layer_of(owner)
    assert _calls_of(owner, function) == {_layers.BOOTSTRAP}


def _wire_calls():
    """``[(module alias, function)]`` of the calls in ``_bootstrap.wire``, in order."""
    tree = ast.parse(_source_of(_layers.BOOTSTRAP))
    wire = next(node for node in tree.body
                if isinstance(node, ast.FunctionDef) and node.name == "wire")
    return [(node.value.func.value.id, node.value.func.attr) for node in wire.body
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)]


def test_the_bootstrap_makes_every_connection_once_in_the_listed_order():
    assert _wire_calls() == [(owner.rpartition(".")[2], function)
                             for owner, function, _ in _layers.WIRING]


def test_no_module_connects_itself_at_import():
    # A registration on a module's last lines made the import order a contract: only the
    # bootstrap connects (Note [Bootstrap]).
    found = []
    for module, paths in imports.source_files(PACKAGE).items():
        for path in paths:
            if module in (_layers.BOOTSTRAP, ""):
                continue        # the bootstrap, and the package that runs it
            text = open(path, encoding="utf-8").read()
            if not path.endswith(".py"):    # a statement at the top level of Cython code
                found += ["%s:%d" % (os.path.relpath(path, PACKAGE), number)
                          for number, line in enumerate(text.splitlines(), 1)
                          if re.match(r"[\w.]+\.(?:wire|register\w*|install\w*)\(", line)]
                continue
            for node in ast.parse(text).body:
                call = node.value if isinstance(node, ast.Expr) else None
                name = getattr(getattr(call, "func", None), "attr", "")
                if isinstance(call, ast.Call) and (name == "wire" or
                                                   name.startswith(("register", "install"))):
                    found.append("%s:%d" % (os.path.relpath(path, PACKAGE), node.lineno))
    assert not found, "modules that connect themselves at import: %s" % found


def test_the_package_wires_once_through_the_bootstrap():
    text = open(os.path.join(PACKAGE, "__init__.py"), encoding="utf-8").read()
    assert re.findall(r"\.(?:install|register|wire)\w*\(", text) == [".wire("]
    assert re.search(r"^_bootstrap\.wire\(\)$", text, re.M)


def test_no_function_imports_a_module_of_fastgrad():
    # An import inside a function is how a cycle hides; with the layers there is no reason
    # left for one (optional dependencies such as SciPy or mpi4py are not fastgrad's modules).
    lazy = []
    for module, paths in imports.source_files(PACKAGE).items():
        for path in paths:
            text = open(path, encoding="utf-8").read()
            if path.endswith(".py"):
                for node in ast.walk(ast.parse(text)):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        lazy += ["%s:%d" % (os.path.relpath(path, PACKAGE), inner.lineno)
                                 for inner in ast.walk(node)
                                 if isinstance(inner, (ast.Import, ast.ImportFrom))
                                 and any(name.startswith("fastgrad") for name, _ in
                                         _imported_names(inner))]
            else:
                lazy += ["%s:%d" % (os.path.relpath(path, PACKAGE), number)
                         for number, line in enumerate(text.splitlines(), 1)
                         if re.match(r"\s+(from|c?import)\s+fastgrad", line)]
    assert not lazy, "imports inside functions: %s" % lazy


def _imported_names(node):
    if isinstance(node, ast.Import):
        return [(alias.name, node.lineno) for alias in node.names]
    return [("fastgrad" if node.level else node.module or "", node.lineno)]
