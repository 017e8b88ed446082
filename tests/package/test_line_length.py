"""Every hand-written source line of the repository is at most 99 characters long.

The project's style limit, checked here because no linter in the build reads all of these
files (Cython and C among them). The walk covers ``fastgrad/``, ``tests/``, ``benchmarks/`` and
``docs/`` of the clone these tests sit in, and ``setup.py``; it reads ``.py``, ``.pyx``, ``.pxd``,
``.pxi`` and ``.h`` files and skips the generated type stubs (``.pyi``, written by
``python -m tests.tools.stubgen``), build output (``build/``, ``docs/_build/``) and hidden or
virtual-environment folders. A line's length is its number of characters without its newline;
a tab counts as one.
"""

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIMIT = 99
FOLDERS = ("fastgrad", "tests", "benchmarks", "docs")
FILES = ("setup.py",)
SUFFIXES = (".py", ".pyx", ".pxd", ".pxi", ".h")
SKIPPED_FOLDERS = {"build", "_build", "__pycache__", "venv", "env"}


def long_lines(path, limit=LIMIT):
    """``(line number, length)`` of each line of the file ``path`` longer than ``limit``."""
    with open(path, encoding="utf-8", newline="") as f:
        lengths = [len(line.rstrip("\r\n")) for line in f]
    return [(number, length) for number, length in enumerate(lengths, 1) if length > limit]


def _skipped(folder):
    return folder.startswith(".") or folder in SKIPPED_FOLDERS or folder.endswith("venv")


def source_files(root):
    """The files the limit applies to, under ``root``, as paths relative to it."""
    found = [name for name in FILES if os.path.isfile(os.path.join(root, name))]
    for top in FOLDERS:
        for directory, folders, files in os.walk(os.path.join(root, top)):
            folders[:] = sorted(f for f in folders if not _skipped(f))
            found.extend(os.path.relpath(os.path.join(directory, name), root)
                         for name in sorted(files) if name.endswith(SUFFIXES))
    return found


def over_limit(root, limit=LIMIT):
    """``path:line: length`` of every line over ``limit`` in the source files under ``root``."""
    return ["%s:%d: %d" % (path.replace(os.sep, "/"), number, length)
            for path in source_files(root)
            for number, length in long_lines(os.path.join(root, path), limit)]


def test_every_source_line_is_within_the_limit():
    found = over_limit(ROOT)
    assert not found, "lines over %d characters:\n%s" % (LIMIT, "\n".join(found))


def test_the_walk_reads_the_package_tests_benchmarks_docs_and_setup():
    files = set(source_files(ROOT))
    for expected in ("setup.py", "fastgrad/__init__.py", "fastgrad/_core/_engine.pyx",
                     "fastgrad/_core/_array.pxd", "fastgrad/_kernels/_large/pool.h",
                     "tests/package/test_line_length.py", "docs/conf.py"):
        assert expected in files, expected
    assert not any(f.endswith(".pyi") for f in files)


@pytest.mark.parametrize("text, expected", [
    ("x" * 99 + "\n", []),
    ("x" * 100 + "\n", [(1, 100)]),
    ("x" * 100, [(1, 100)]),                     # no newline at the end of the file
    ("a\n" + "x" * 99 + "\r\n" + "y" * 101 + "\r\n", [(3, 101)]),   # CRLF is not counted
    ("\t" * 99 + "\n" + "\t" * 100 + "\n", [(2, 100)]),             # a tab is one character
    ("\u00e9" * 99 + "\n" + "\u00e9" * 100 + "\n", [(2, 100)]),     # characters, not bytes
    ("", []),
])
def test_long_lines_counts_characters(tmp_path, text, expected):
    path = tmp_path / "module.py"
    path.write_bytes(text.encode("utf-8"))
    assert long_lines(str(path)) == expected


def test_over_limit_reports_long_lines_and_skips_generated_and_hidden_files(tmp_path):
    long = "x" * 100 + "\n"

    def write(relative, text=long):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    write("setup.py", "ok\n" + long)
    write("fastgrad/core.pyx", "ok\n" * 5 + long)
    write("fastgrad/sub/kernels.h")
    write("fastgrad/sub/types.pxd", "x" * 99 + "\n")
    write("tests/test_a.py")
    write("benchmarks/run.pxi")
    write("docs/conf.py")
    write("fastgrad/stubs.pyi")                  # generated type stubs
    write("fastgrad/notes.txt")                  # not a source file
    write("build/lib/fastgrad/core.py")          # build output
    write("fastgrad/build/gen.py")
    write("docs/_build/html/_static/x.py")
    write("tests/.hidden/x.py")
    write(".venv/lib/x.py")
    write("benchmarks/venv/x.py")
    write("other/x.py")                          # outside the folders checked
    assert sorted(over_limit(str(tmp_path))) == [
        "benchmarks/run.pxi:1: 100", "docs/conf.py:1: 100", "fastgrad/core.pyx:6: 100",
        "fastgrad/sub/kernels.h:1: 100", "setup.py:2: 100", "tests/test_a.py:1: 100"]
