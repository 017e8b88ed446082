"""Draw the pictures of the docs: ``python docs/pictures/make_pictures.py [NAME...]``.

Writes, next to this file, the DOT text (``.gv``) and the rendered SVG of
- ``network``: a small two-layer network built with ``fastgrad.sym``, drawn by
  ``fastgrad.viz.plot_network`` with its inferred shapes;
- ``history``: the symbol ``autograd.get_symbol`` makes of a recorded computation;
- ``layers``: the layers of ``fastgrad/`` (``fastgrad/_layers.py``), bottom up, each with its
  folder and the modules the folder holds, and the public modules it holds outside a folder.

Note [Committed pictures]
The SVGs are committed rather than drawn by the docs build: the build then needs no Graphviz
programs (which come from the system's packages, not pip) on a reader's or CI's machine, and
the pictures cannot break it. So that they cannot fall behind the code either,
``tests/symbol/test_viz_render.py`` checks that the committed ``.gv`` files are what this script's
graphs give today; rerun it (it needs ``pip install "fastgrad[viz]"`` and Graphviz) when they
change.
"""

import os
import subprocess
import sys

import numpy

import fastgrad as mx
from fastgrad import _layers, autograd, np

HERE = os.path.dirname(os.path.abspath(__file__))


def network():
    """A 784-128-10 classifier as a symbol, and the shapes to label its edges with."""
    data = mx.sym.var("data")
    hidden = mx.sym.npx.relu(mx.sym.npx.fully_connected(
        data, mx.sym.var("fc1_weight"), mx.sym.var("fc1_bias"), num_hidden=128, name="fc1"),
        name="relu1")
    out = mx.sym.npx.fully_connected(hidden, mx.sym.var("fc2_weight"), mx.sym.var("fc2_bias"),
                                     num_hidden=10, name="fc2")
    net = mx.sym.npx.log_softmax(out, name="log_softmax")
    return mx.viz.plot_network(net, title="network", shape={"data": (32, 784)},
                               hide_weights=False)


def history():
    """The symbol of a recorded computation: y = sum(tanh(x @ w) ** 2)."""
    x = np.array(numpy.ones((4, 3)))
    w = np.array(numpy.full((3, 2), 0.5))
    w.attach_grad()
    with autograd.record():
        y = (np.tanh(x @ w) ** 2).sum()
    return mx.viz.plot_network(autograd.get_symbol(y), title="history")


class _Dot:
    """DOT text with the ``source``/``pipe`` of a ``graphviz.Source``, drawn by ``dot``."""

    def __init__(self, source):
        self.source = source

    def pipe(self, format):
        return subprocess.run(["dot", "-T" + format], input=self.source.encode(),
                              capture_output=True, check=True).stdout


def layers():
    """The layers of fastgrad, bottom up, each with its folder and the modules in it (read
    from the package), then the public modules it holds outside a folder.

    Every module imports only from its own layer and those below it (Note [Layers]), so the
    picture is a stack; an arrow points from a layer to the one below it.
    """
    lines = ["digraph layers {", "  rankdir=BT; ranksep=0.25;",
             '  node [shape=box, style="rounded,filled", fillcolor="#f4f4f4", '
             'fontname="Helvetica", fontsize=10, width=6.5];',
             '  edge [color="#777777", arrowsize=0.6, dir=back];']
    for index, (name, what, members) in enumerate(_layers.LAYERS):
        rows = []
        for folder in (m for m in members if m.startswith("_") and m.endswith("/")):
            rows += _rows(_layers.modules_in(folder), "<b>fastgrad/%s</b> " % folder)
        public = sorted("fastgrad" if m == "" else m for m in members
                        if not (m.startswith("_") and m.endswith("/")) and _layers.present(m))
        rows += _rows(public, "") if public else []
        lines.append("  %s [label=<<b>%d. %s</b>: <i>%s</i><br/>%s>];" % (
            name, index + 1, name, what, "<br/>".join(rows)))
    for (low, _, _), (high, _, _) in zip(_layers.LAYERS, _layers.LAYERS[1:]):
        lines.append("  %s -> %s;" % (low, high))
    lines.append("}")
    return _Dot("\n".join(lines) + "\n")


def _rows(names, head, width=80):
    """``names`` joined by commas in rows of about ``width`` characters, the first row led by
    ``head`` (markup, not counted)."""
    rows, row = [], ""
    for name in names:
        if row and len(row) + len(name) > width:
            rows.append(row)
            row = ""
        row += (", " if row else "") + name
    rows.append(row)
    rows[0] = head + rows[0]
    return rows


PICTURES = {"network": network, "history": history, "layers": layers}


def main(names=()):
    """Draw the pictures named (all by default: ``make_pictures.py layers`` draws one)."""
    for name, draw in PICTURES.items():
        if names and name not in names:
            continue
        graph = draw()
        with open(os.path.join(HERE, name + ".gv"), "w") as f:
            f.write(graph.source)
        svg = graph.pipe(format="svg").decode()
        with open(os.path.join(HERE, name + ".svg"), "w") as f:
            f.write(svg)
        print("wrote %s.gv and %s.svg" % (name, name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
