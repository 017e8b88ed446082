"""Pictures of symbol graphs: Graphviz DOT text (``fastgrad.viz``, like ``mx.viz``).

``plot_network`` needs nothing installed: it writes the DOT language itself. When the
``graphviz`` Python package is available (``pip install "fastgrad[viz]"``) it returns a
``graphviz.Source`` that renders to SVG, PNG or PDF, or shows in a notebook, through the
Graphviz programs (installed from the system's packages); without them, rendering raises an
error that says what to install.
"""

import importlib.util

from fastgrad.symbol._graph import Symbol, dfs_nodes, infer, _Unknown
from fastgrad.symbol._ops import VARIABLE, CONSTANT

_COLORS = {"variable": "#8dd3c7", "constant": "#d9d9d9", "primitive": "#fb8072",
           "composite": "#80b1d3", "output": "#fdb462"}
_WEIGHT_SUFFIXES = ("_weight", "_bias", "_gamma", "_beta", "_moving_mean", "_moving_var")


def _quote(text):
    return '"%s"' % str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _attrs(d):
    return "[%s]" % ", ".join("%s=%s" % (k, _quote(v)) for k, v in sorted(d.items()))


class DotGraph:
    """DOT text of a graph, with ``source`` (the text) and ``render`` like ``graphviz``'s.

    Returned by :func:`plot_network` when the ``graphviz`` package is not installed.
    """

    def __init__(self, source, title, save_format):
        self.source = source
        self.name = title
        self.format = save_format

    def __str__(self):
        return self.source

    def __repr__(self):
        return "<DotGraph %r: %d lines>" % (self.name, self.source.count("\n"))

    def save(self, filename=None):
        """Write the DOT text to ``filename`` (default ``<title>.gv``) and return the path."""
        filename = filename or self.name + ".gv"
        with open(filename, "w", encoding="utf-8") as f:
            f.write(self.source)
        return filename

    def render(self, *args, **kwargs):
        raise ImportError("rendering needs the 'graphviz' Python package (pip install "
                          "'fastgrad[viz]') and the Graphviz programs; the DOT text is in "
                          ".source (save it with .save())")


def network_dot(symbol, title="plot", shape=None, dtype=None, node_attrs=None,
                hide_weights=True):
    """The DOT text of ``symbol`` (see :func:`plot_network` for the parameters)."""
    if not isinstance(symbol, Symbol):
        raise TypeError("plot_network: expected a Symbol, got %s" % type(symbol).__name__)
    info = None
    if shape is not None or dtype is not None:
        try:
            info = infer(symbol._entries, {k: tuple(v) for k, v in (shape or {}).items()},
                         dict(dtype or {}), partial=True)
        except _Unknown:
            info = None
    base = {"shape": "box", "fixedsize": "false", "style": "filled"}
    base.update(node_attrs or {})
    nodes = dfs_nodes(symbol._entries)
    hidden = set()
    lines = ["digraph %s {" % _quote(title), "  label=%s;" % _quote(title),
             "  node %s;" % _attrs(base)]
    for n in nodes:
        if n.op == VARIABLE:
            if hide_weights and n.name.endswith(_WEIGHT_SUFFIXES):
                hidden.add(n.id)
                continue
            label, color, shape_ = n.name, _COLORS["variable"], "oval"
        elif n.op == CONSTANT:
            label, color, shape_ = "%s\\nconstant" % n.name, _COLORS["constant"], "note"
        elif "." in n.op:
            label, color, shape_ = "%s\\n%s" % (n.name, n.op), _COLORS["composite"], "box"
        else:
            label, color, shape_ = "%s\\n%s" % (n.name, n.op), _COLORS["primitive"], "box"
        lines.append("  n%d %s;" % (n.id, _attrs({"label": label.replace("\\n", "\n"),
                                                  "fillcolor": color, "shape": shape_})))
    for n in nodes:
        if n.id in hidden:
            continue
        for p, k in n.inputs:
            if p.id in hidden:
                continue
            attrs = {"dir": "back", "arrowtail": "open"}
            if info is not None:
                s, _ = info.get((p.id, k), (None, None))
                if s is not None:
                    attrs["label"] = "x".join(str(d) for d in s) or "scalar"
            lines.append("  n%d -> n%d %s;" % (n.id, p.id, _attrs(attrs)))
    for j, (n, k) in enumerate(symbol._entries):
        lines.append("  out%d %s;" % (j, _attrs({"label": n.output_name(k), "shape": "oval",
                                                 "fillcolor": _COLORS["output"]})))
        lines.append("  out%d -> n%d %s;" % (j, n.id, _attrs({"dir": "back",
                                                             "arrowtail": "open"})))
    lines.append("}")
    return "\n".join(lines) + "\n"


def plot_network(symbol, title="plot", save_format="pdf", shape=None, dtype=None,
                 node_attrs=None, hide_weights=True):
    """Draw a symbol graph with Graphviz.

    Parameters
    ----------
    symbol : Symbol
    title : str
        The graph's name and label.
    save_format : str
        The format ``render()`` writes (``'pdf'``, ``'png'``, ``'svg'``, ...).
    shape, dtype : dict of str to tuple / dtype, optional
        Argument shapes (and dtypes); when given, edges are labelled with inferred shapes.
    node_attrs : dict, optional
        Graphviz attributes for every node (``{'fontsize': '10'}``).
    hide_weights : bool
        Leave out arguments whose names end like parameters (``_weight``, ``_bias``, ...).

    Returns
    -------
    graphviz.Source or DotGraph
        A ``graphviz.Source`` when the ``graphviz`` package is installed, else a
        :class:`DotGraph`. Both hold the DOT text in ``.source``.

    Examples
    --------
    >>> import fastgrad as mx
    >>> x = mx.sym.var('x')
    >>> dot = mx.viz.plot_network(mx.sym.exp(x, name='e'))
    >>> 'digraph' in dot.source
    True
    """
    source = network_dot(symbol, title, shape, dtype, node_attrs, hide_weights)
    if importlib.util.find_spec("graphviz") is not None:
        return _graphviz_source()(source, filename=title, format=save_format)
    return DotGraph(source, title, save_format)


_MISSING_PROGRAMS = (
    "rendering needs the Graphviz programs ('dot') on PATH, which the 'graphviz' Python "
    "package only drives: install them from your system's packages (apt-get install graphviz, "
    "brew install graphviz, conda install graphviz); the DOT text is in .source")


def _graphviz_source():
    """``graphviz.Source`` that says what to install when the Graphviz programs are missing
    (``render``, ``pipe`` and a notebook's display all end in ``pipe`` or ``render``)."""
    import graphviz

    class Source(graphviz.Source):
        def pipe(self, *args, **kwargs):
            try:
                return super().pipe(*args, **kwargs)
            except graphviz.ExecutableNotFound:
                raise RuntimeError(_MISSING_PROGRAMS) from None

        def render(self, *args, **kwargs):
            try:
                return super().render(*args, **kwargs)
            except graphviz.ExecutableNotFound:
                raise RuntimeError(_MISSING_PROGRAMS) from None

    return Source


def print_summary(symbol, shape=None, line_length=100):
    """Print one line per node: name, op, output shapes (when ``shape`` is given), inputs."""
    info = None
    if shape is not None:
        info = infer(symbol._entries, {k: tuple(v) for k, v in shape.items()}, {},
                     partial=True)
    print("=" * line_length)
    print("%-30s %-20s %-24s %s" % ("name", "op", "output shape", "inputs"))
    print("=" * line_length)
    for n in dfs_nodes(symbol._entries):
        shapes = ""
        if info is not None:
            shapes = ", ".join(str(info.get((n.id, i), (None,))[0])
                               for i in range(n.num_outputs))
        print("%-30s %-20s %-24s %s" % (n.name, n.op, shapes,
                                        ", ".join(p.name for p, _ in n.inputs)))
    print("=" * line_length)
