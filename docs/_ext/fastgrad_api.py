"""A Sphinx directive that lists a fastgrad namespace from the live package.

``.. fastgrad-namespace:: fastgrad.numpy`` renders a table of every public name of the module:
ops of the derivative table with their inputs, parameters and how often they can be
differentiated (from ``fastgrad.list_ops()``), and functions and classes with the first line
of their docstring, followed by the full docstrings of the functions and classes that have one.
It is built from the installed package, so it cannot fall behind it.

The ops themselves share one type (``Primitive``) and carry no docstring of their own; the
autodoc hook below keeps them out of ``automodule`` output, where the table covers them.
"""

import importlib
import inspect
import types

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


def _public_names(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return sorted(set(names))


def _first_line(obj):
    """The first paragraph of the docstring, on one line."""
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.strip().split("\n\n", 1)[0].split()) if doc.strip() else ""


def _is_op(obj):
    from fastgrad._core._array import Primitive
    return isinstance(obj, Primitive)


def _order(info):
    if not info["differentiable"]:
        return "not differentiable"
    return "any order" if info["order"] == "any" else "to order %s" % info["order"]


class NamespaceTable(SphinxDirective):
    required_arguments = 1
    has_content = False

    def run(self):
        import fastgrad
        modname = self.arguments[0]
        module = importlib.import_module(modname)
        ops = fastgrad.list_ops()
        rows = []
        for name in _public_names(module):
            obj = getattr(module, name, None)
            if isinstance(obj, types.ModuleType):
                kind, text = "module", "``%s``" % obj.__name__
            elif _is_op(obj):
                info = ops.get(obj.name, {})
                params = ", ".join(obj.param_names)
                n_in = "any number of arrays" if obj.n_in < 0 else \
                    "%d array%s" % (obj.n_in, "" if obj.n_in == 1 else "s")
                text = "%s%s; %s" % (n_in, "; parameters " + params if params else "",
                                     _order(info) if info else "")
                if obj.name != name:
                    text = "the ``%s`` op; %s" % (obj.name, text)
                kind = "op"
            elif inspect.isclass(obj):
                kind, text = "class", _first_line(obj)
            elif callable(obj):
                kind, text = "function", _first_line(obj)
            else:
                continue
            rows.append((name, kind, text.replace("|", "\\|")))
        documented = []
        for name in _public_names(module):
            obj = getattr(module, name, None)
            if _is_op(obj) or isinstance(obj, types.ModuleType) or not inspect.getdoc(obj):
                continue
            if inspect.isclass(obj):
                documented += [".. autoclass:: %s.%s" % (modname, name), "   :members:", ""]
            elif callable(obj) and (inspect.isfunction(obj) or inspect.isbuiltin(obj)):
                documented += [".. autofunction:: %s.%s" % (modname, name), ""]
        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 20 10 70", "",
                 "   * - name", "     - kind", "     - summary"]
        for name, kind, text in rows:
            lines += ["   * - ``%s``" % name, "     - %s" % kind, "     - %s" % (text or "")]
        if documented:
            lines += ["", ".. rubric:: Functions and classes", ""] + documented
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source=modname), self.content_offset,
                                container)
        return container.children


def _skip_ops(app, what, name, obj, skip, options):
    if _is_op(obj):
        return True
    return None


def setup(app):
    app.add_directive("fastgrad-namespace", NamespaceTable)
    app.connect("autodoc-skip-member", _skip_ops)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
