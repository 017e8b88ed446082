"""The modules of fastgrad import only downward (Note [Layers] in fastgrad/_layers.py).

The imports are read from the source, not from a running interpreter: the syntax tree of each
``.py`` file (every ``import`` statement, at any depth, including inside functions, and
``__import__``/``importlib.import_module`` calls with a literal name), and the ``import`` and
``cimport`` lines of each ``.pyx``/``.pxd`` file.
"""

import ast
import os
import re

import pytest

from fastgrad import _layers

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fastgrad")
SOURCE_SUFFIXES = (".py", ".pyx", ".pxd")


def _module_name(path):
    """``'symbol._graph'`` for fastgrad/symbol/_graph.py, ``''`` for fastgrad/__init__.py."""
    rel = os.path.relpath(path, PACKAGE)
    rel = re.sub(r"\.(py|pyx|pxd)$", "", rel).replace(os.sep, ".")
    if rel == "__init__":
        return ""
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def _source_files():
    files = {}
    for folder, dirs, names in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
        for name in sorted(names):
            if name.endswith(SOURCE_SUFFIXES) and not name.endswith(".pyi"):
                path = os.path.join(folder, name)
                files.setdefault(_module_name(path), []).append(path)
    return files


def _python_imports(path, module):
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


def _cython_imports(path):
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


def import_graph():
    """``{module: {imported module: first line}}`` over every fastgrad module."""
    files = _source_files()
    graph = {}
    for module, paths in files.items():
        edges = graph.setdefault(module, {})
        for path in paths:
            found = _python_imports(path, module) if path.endswith(".py") \
                else _cython_imports(path)
            for dotted, line in found:
                target = _resolve(dotted, files)
                if target is not None and target != module:
                    edges.setdefault(target, "%s:%d" % (os.path.relpath(path, PACKAGE), line))
    return graph


GRAPH = import_graph()


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
    assert "_node" in GRAPH["_array"]                  # a cimport in _array.pyx
    assert "_state" in GRAPH["_engine"]                # a cimport in _engine.pyx
    assert "_array" in GRAPH["_registry"]
    assert "autograd" in GRAPH[""]                     # the package itself
    source = "def f():\n    from fastgrad import autograd\n    import fastgrad.symbol._graph\n"
    tree_imports = [name for name, _ in _python_imports_from_text(source)]
    assert tree_imports == ["fastgrad.autograd", "fastgrad.symbol._graph"]


def _python_imports_from_text(text, tmp=[]):
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text)
    try:
        return sorted(_python_imports(f.name, "probe"))
    finally:
        os.unlink(f.name)


def test_cycle_finder_finds_a_cycle_and_accepts_a_tree():
    assert _cycle({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b": 1, "c": 1}, "b": {"c": 1}, "c": {}}) is None


def test_every_module_has_a_layer():
    missing = sorted(m or "fastgrad (the package)" for m in GRAPH if _layers.layer_of(m) is None)
    assert not missing, "modules in no layer of fastgrad/_layers.py: %s" % missing


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


def _calls_of(function_name):
    """The modules whose source calls ``function_name`` (as an attribute, or a name imported
    with or without a leading underscore)."""
    call = re.compile(r"^(?!\s*(?:c?p?def) ).*(?:\.|\b_?)%s\(" % function_name, re.M)
    callers = set()
    for module, paths in _source_files().items():
        for path in paths:
            if call.search(open(path, encoding="utf-8").read()):
                callers.add(module)
    return callers


@pytest.mark.parametrize("owner, function, caller", _layers.REGISTRATIONS)
def test_each_registration_is_made_by_the_module_that_defines_the_thing(owner, function, caller):
    text = "".join(open(p, encoding="utf-8").read() for p in _source_files()[owner])
    assert re.search(r"^(c?p?def|def) %s\(" % function, text, re.M), \
        "%s does not declare %s" % (owner, function)
    assert _layers.layer_of(caller) >= _layers.layer_of(owner)
    assert _calls_of(function) == {caller}


def test_the_package_connects_nothing():
    text = open(os.path.join(PACKAGE, "__init__.py"), encoding="utf-8").read()
    assert not re.search(r"\.(install|register)\w*\(", text)
