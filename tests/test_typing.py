"""Type checkers see fastgrad's API: mypy accepts a small typed user program.

The program, ``tests/typing/example_user.py``, is checked against the installed fastgrad, whose
compiled modules are described by ``.pyi`` stubs and which ships ``py.typed``. Skipped when mypy
is not installed (CI installs it, so there it always runs).
"""

import os
import subprocess
import sys

import pytest

pytest.importorskip("mypy", reason="needs mypy")

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "typing", "example_user.py")


def _mypy(tmp_path):
    # Run from an empty directory so mypy resolves ``fastgrad`` to the installed package (with
    # its stubs and py.typed), never to a source tree next to the tests.
    import fastgrad
    home = os.path.dirname(os.path.dirname(os.path.abspath(fastgrad.__file__)))
    if os.path.basename(home) not in ("site-packages", "dist-packages"):
        pytest.skip("fastgrad is not installed as a package (an editable install or a source "
                    "tree): mypy sees only installed packages through py.typed")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--warn-unused-ignores",
         "--cache-dir", os.fspath(tmp_path / "cache"), EXAMPLE],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    errors = [line for line in proc.stdout.splitlines() if ": error: " in line]
    return proc, errors


def test_mypy_accepts_typed_user_code(tmp_path):
    proc, errors = _mypy(tmp_path)
    assert proc.returncode == 0 and not errors, proc.stdout + proc.stderr


def test_example_runs():
    proc = subprocess.run([sys.executable, EXAMPLE], capture_output=True, text=True,
                          timeout=120, cwd=os.path.dirname(EXAMPLE))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[-0.47942555]" in proc.stdout
