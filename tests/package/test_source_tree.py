"""Importing fastgrad's uncompiled source tree fails with one sentence saying why and what to do.

The test copies the package's Python and Cython sources (never the compiled modules) into a
fresh directory, as a checkout has them, and imports ``fastgrad`` with that directory first on
``sys.path``, as ``python -m fastgrad.demo`` run from a checkout's root does.
"""

import os
import shutil
import subprocess
import sys

import fastgrad

SOURCE_SUFFIXES = (".py", ".pyx", ".pxd", ".pyi", ".h")


def _uncompiled_copy(root):
    package = os.path.dirname(os.path.abspath(fastgrad.__file__))
    for directory, _, files in os.walk(package):
        if "__pycache__" in directory:
            continue
        target = os.path.join(root, "fastgrad", os.path.relpath(directory, package))
        os.makedirs(target, exist_ok=True)
        for name in files:
            if name.endswith(SOURCE_SUFFIXES):
                shutil.copy(os.path.join(directory, name), target)
    return os.path.join(root, "fastgrad")


# An editable install's import hook would find the compiled modules of the developer's own
# tree for the copied package's submodules; a user's plain install has no such hook.
WITHOUT_EDITABLE_HOOKS = ("import sys; "
                          "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in "
                          "repr(f).lower()]; ")


def _run(cwd, code):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, "-c", WITHOUT_EDITABLE_HOOKS + code], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def test_import_from_uncompiled_source_tree_explains_itself(tmp_path):
    package = _uncompiled_copy(tmp_path)
    proc = _run(tmp_path, "import fastgrad")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: fastgrad was imported from its uncompiled source tree "
                           + package), proc.stderr
    assert "pip install -e . --no-build-isolation" in last and "another directory" in last
    # One sentence: the explanation replaces the ModuleNotFoundError instead of chaining to it.
    assert "ModuleNotFoundError" not in proc.stderr, proc.stderr


def test_running_the_demo_module_from_a_checkout_root_explains_itself(tmp_path):
    _uncompiled_copy(tmp_path)
    # What ``python -m fastgrad.demo`` does, with the current directory first on sys.path.
    proc = _run(tmp_path, "import runpy; sys.path.insert(0, ''); "
                "runpy.run_module('fastgrad.demo', run_name='__main__', alter_sys=True)")
    assert proc.returncode != 0
    assert "fastgrad was imported from its uncompiled source tree" in proc.stderr, proc.stderr


def test_other_missing_modules_are_not_disguised(tmp_path):
    # A missing dependency is reported as itself: only fastgrad's own compiled modules get the
    # source-tree explanation.
    from fastgrad import _source_tree
    error = ModuleNotFoundError("No module named 'scipy'", name="scipy")
    assert _source_tree.explain(error) is None
    error = ModuleNotFoundError("No module named 'fastgrad.nothing'", name="fastgrad.nothing")
    assert _source_tree.explain(error) is None
    error = ModuleNotFoundError("No module named 'fastgrad._core._engine'",
                                name="fastgrad._core._engine")
    assert "fastgrad._core._engine" in str(_source_tree.explain(error))
