"""Sphinx configuration for fastgrad's documentation.

The docs document the *installed* fastgrad: build them from an environment where fastgrad is
installed (``pip install ".[docs]"``), not from the source tree, whose compiled modules may be
missing or stale. No network access is needed.

    sphinx-build -W -b html docs docs/_build/html       # the pages
    sphinx-build -W -b doctest docs docs/_build/doctest # every example, run as a test
"""

import os
import sys

import fastgrad

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ext"))

project = "fastgrad"
author = "the fastgrad developers"
copyright = "the fastgrad developers"
version = release = fastgrad.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "fastgrad_api",
]

exclude_patterns = ["_build"]
nitpicky = False
default_role = "py:obj"
highlight_language = "python3"

# Docstrings are NumPy style.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}

# Every example in the docs (pages and docstrings) runs under ``-b doctest``. Each page starts
# from a clean autograd state; the comparison pages run the other frameworks' snippets when
# those are installed. Nothing else is imported here: every example shows its own imports, so
# a reader can paste it, and an example that forgets one fails.
doctest_global_setup = """
import fastgrad as _fastgrad_doctest
_fastgrad_doctest.autograd.set_recording(False)
_fastgrad_doctest.autograd.set_training(False)
try:
    import torch
except ImportError:
    torch = None
try:
    import autograd as hips_autograd
except ImportError:
    hips_autograd = None
"""
doctest_default_flags = (__import__("doctest").ELLIPSIS
                         | __import__("doctest").NORMALIZE_WHITESPACE)

html_theme = "alabaster"
html_title = "fastgrad %s" % release
html_static_path = []
html_theme_options = {
    "description": "Reverse-mode automatic differentiation of NumPy code, "
                   "with MXNet's autograd API",
    "fixed_sidebar": True,
}
