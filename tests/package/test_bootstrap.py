"""Start-up connects the lower modules in one step (Note [Bootstrap] in fastgrad/_bootstrap.py).

Before that step a lower module names what is not connected yet, rather than failing with an
``AttributeError`` on ``None``: checked in a child process that imports ``fastgrad._core._array``
without running the package's ``__init__.py``.
"""

import os
import subprocess
import sys
import textwrap

import fastgrad
from fastgrad._core import _array
from fastgrad import _bootstrap, autograd
from fastgrad._kernels import _filled
from fastgrad._ops import _registry
from fastgrad.symbol import _graph

PACKAGE = os.path.dirname(os.path.abspath(fastgrad.__file__))

# The package as a bare namespace: importing a submodule then runs only that submodule.
UNWIRED = textwrap.dedent("""
    import importlib.util, sys
    import numpy
    spec = importlib.util.spec_from_file_location(
        "fastgrad", %r, submodule_search_locations=[%r])
    sys.modules["fastgrad"] = importlib.util.module_from_spec(spec)
    from fastgrad._core import _array
    a = _array._wrap(numpy.ones(2), _array.ndarray)

    def report(name, thunk):
        try:
            thunk()
        except Exception as exc:
            print(name, type(exc).__name__, str(exc).splitlines()[0])

    report("add", lambda: a + a)
    report("sum", lambda: a.sum())
    report("backward", lambda: a.backward())
    report("ufunc", lambda: numpy.sin(a))
    report("function", lambda: numpy.concatenate([a, a]))
    report("nd", lambda: a.as_nd_ndarray())
""") % (os.path.join(PACKAGE, "__init__.py"), PACKAGE)


def test_an_unwired_array_names_what_is_missing():
    out = subprocess.run([sys.executable, "-c", UNWIRED], capture_output=True, text=True,
                         cwd=os.path.dirname(PACKAGE), timeout=120)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert set(lines) == {"add", "sum", "backward", "ufunc", "function", "nd"}
    expected = {"add": "primitive 'add'", "sum": "fastgrad._api._functions",
                "backward": "fastgrad.autograd", "ufunc": "fastgrad._ops._registry",
                "function": "fastgrad._api._dispatch", "nd": "fastgrad.ndarray.NDArray"}
    for name, text in lines.items():
        assert text.startswith("RuntimeError fastgrad._core._array: "), (name, text)
        assert "not connected yet" in text and expected[name] in text, (name, text)


def test_import_fastgrad_wires_every_lower_module():
    x = fastgrad.np.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = (x * x).sum()
    assert autograd.get_symbol(y).list_arguments()
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0]
    assert _filled.FASTGRAD_ARRAY is _array.ndarray
    assert _array.PRIMITIVES["add"] is _registry.REGISTRY["add"]
    assert _registry.REGISTRY["sin"].backward_graph is not None     # the graph binding
    assert set(_graph._hooks) == {"to_json", "load_json", "translate", "symbol_op", "executor"}


def test_build_returns_what_it_builds_and_changes_no_registry():
    from fastgrad._ops._derivatives import Op
    before = dict(_registry.REGISTRY)
    built = _registry.build([Op("probe_square", lambda x: x * x, "x", x="2 * g * x")])
    assert set(built.primitives) == {"probe_square"} and set(built.codes) == {"probe_square"}
    assert dict(_registry.REGISTRY) == before and "probe_square" not in _array.PRIMITIVES
    assert built.primitives["probe_square"].backward_graph is None
    _registry.graph_rules(built, fastgrad._api._functions)
    assert built.primitives["probe_square"].backward_graph is not None


def test_the_bootstrap_is_what_the_package_runs():
    assert fastgrad._bootstrap is _bootstrap
