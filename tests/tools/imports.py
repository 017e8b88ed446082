"""Read the imports of fastgrad's modules from their source (Note [Layers] in
fastgrad/_layers.py): what ``tests/package/test_layers.py`` checks the layers with.

A developer tool, not part of the runtime package: it reads a source tree (a clone's
``fastgrad/`` folder, or any folder laid out like it), never a running interpreter.
"""

import ast
import os
import re

SOURCE_SUFFIXES = (".py", ".pyx", ".pxd")


def _module_name(path, package):
    """``'symbol._graph'`` for fastgrad/symbol/_graph.py, ``''`` for fastgrad/__init__.py."""
    rel = os.path.relpath(path, package)
    rel = re.sub(r"\.(py|pyx|pxd)$", "", rel).replace(os.sep, ".")
    if rel == "__init__":
        return ""
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


_INCLUDE = re.compile(r'^include\s+"([\w.]+\.pxi)"', re.M)


def source_files(package):
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


def import_graph(package):
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
