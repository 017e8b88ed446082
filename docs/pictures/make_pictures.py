"""Draw the pictures of the docs: ``python docs/pictures/make_pictures.py``.

Writes, next to this file, the DOT text (``.gv``) and the rendered SVG of
- ``network``: a small two-layer network built with ``fastgrad.sym``, drawn by
  ``fastgrad.viz.plot_network`` with its inferred shapes;
- ``history``: the symbol ``autograd.get_symbol`` makes of a recorded computation.

Note [Committed pictures]
The SVGs are committed rather than drawn by the docs build: the build then needs no Graphviz
programs (which come from the system's packages, not pip) on a reader's or CI's machine, and
the pictures cannot break it. So that they cannot fall behind the code either,
``tests/test_viz_pictures.py`` checks that the committed ``.gv`` files are what this script's
graphs give today; rerun it (it needs ``pip install "fastgrad[viz]"`` and Graphviz) when they
change.
"""

import os
import sys

import numpy

import fastgrad as mx
from fastgrad import autograd, np

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


PICTURES = {"network": network, "history": history}


def main():
    for name, draw in PICTURES.items():
        graph = draw()
        with open(os.path.join(HERE, name + ".gv"), "w") as f:
            f.write(graph.source)
        svg = graph.pipe(format="svg").decode()
        with open(os.path.join(HERE, name + ".svg"), "w") as f:
            f.write(svg)
        print("wrote %s.gv and %s.svg" % (name, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
