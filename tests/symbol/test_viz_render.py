"""Rendering symbol graphs through the optional ``graphviz`` package, and the committed pictures
of the docs.

Rendering needs the ``graphviz`` Python package (``fastgrad[viz]``) and the Graphviz programs;
each test says which it needs and is skipped, with the reason, without it. Without the programs,
rendering must fail with a message saying what to install.
"""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

import fastgrad as mx
from fastgrad import visualization

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PICTURES = os.path.join(ROOT, "docs", "pictures")
HAS_PACKAGE = importlib.util.find_spec("graphviz") is not None
HAS_PROGRAMS = shutil.which("dot") is not None


def _graph():
    x = mx.sym.var("x")
    return mx.viz.plot_network(mx.sym.tanh(mx.sym.exp(x, name="e"), name="t"), title="g")


@pytest.mark.skipif(HAS_PACKAGE, reason="the graphviz package is installed")
def test_without_the_package_render_says_what_to_install():
    graph = _graph()
    assert isinstance(graph, visualization.DotGraph) and "digraph" in graph.source
    with pytest.raises(ImportError, match=r"fastgrad\[viz\]"):
        graph.render()


@pytest.mark.skipif(not HAS_PACKAGE, reason="needs the graphviz package (fastgrad[viz])")
def test_without_the_programs_render_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", os.fspath(tmp_path))   # no 'dot' anywhere
    graph = _graph()
    with pytest.raises(RuntimeError, match="Graphviz programs"):
        graph.pipe(format="svg")
    with pytest.raises(RuntimeError, match="apt-get install graphviz"):
        graph.render(directory=os.fspath(tmp_path), format="png")


@pytest.mark.skipif(not (HAS_PACKAGE and HAS_PROGRAMS),
                    reason="needs the graphviz package (fastgrad[viz]) and Graphviz's 'dot'")
@pytest.mark.parametrize("fmt,magic", [("svg", b"<svg"), ("png", b"\x89PNG")])
def test_render_svg_and_png(tmp_path, fmt, magic):
    graph = _graph()
    path = graph.render(directory=os.fspath(tmp_path), format=fmt)
    with open(path, "rb") as f:
        content = f.read()
    assert magic in content[:400]
    if fmt == "svg":
        text = content.decode()
        assert ">e<" in text and ">t<" in text and ">x<" in text


@pytest.mark.skipif(not os.path.isdir(PICTURES), reason="the docs are not next to the tests")
@pytest.mark.parametrize("name", ["network", "history", "layers"])
def test_committed_pictures_show_what_fastgrad_draws(name):
    # In a fresh process and in the same order as make_pictures.py draws them: node names
    # count from the start of the process.
    code = ("import sys; sys.path.insert(0, %r); import make_pictures; "
            "sources = {k: f().source for k, f in make_pictures.PICTURES.items()}; "
            "sys.stdout.write(sources[%r])" % (PICTURES, name))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=PICTURES)
    assert proc.returncode == 0, proc.stderr
    with open(os.path.join(PICTURES, name + ".gv")) as f:
        assert f.read() == proc.stdout, (
            "docs/pictures/%s.gv is out of date: run python docs/pictures/make_pictures.py"
            % name)
    with open(os.path.join(PICTURES, name + ".svg")) as f:
        assert "<svg" in f.read()
