"""The one error a newcomer meets first: importing fastgrad's uncompiled source tree.

Note [The source tree shadows the installed package]
Python puts the current directory (or a script's directory) first on ``sys.path``, so
``python -m fastgrad.demo``, ``python -c "import fastgrad"`` or a REPL started in a checkout
import the ``fastgrad/`` folder there, not the installed package, and that folder holds Cython
sources but no compiled modules unless they were built in place. ``fastgrad/__init__.py`` turns
the resulting ``ImportError`` into one sentence that says so and what to do; any other
missing module is re-raised as it is.
"""

import os
import re

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def explain(error):
    """An ``ImportError`` explaining ``error`` (a ``ModuleNotFoundError``, or the
    ``ImportError`` of a ``from ... import`` of a module) when it is a compiled module missing
    from the source tree, or ``None`` when ``error`` is about some other module."""
    name = error.name or ""
    imported = re.match(r"cannot import name '(\w+)'", str(error))
    if imported and not isinstance(error, ModuleNotFoundError):
        # ``from fastgrad._core import _array`` names the package, and the module in its text
        name += "." + imported.group(1)
    if not name.startswith("fastgrad."):
        return None
    module = name.split(".", 1)[1]
    if not os.path.exists(os.path.join(PACKAGE_DIR, *module.split(".")) + ".pyx"):
        return None
    return ImportError(
        "fastgrad was imported from its uncompiled source tree %s (the Cython module %s is not "
        "built there), which hides any installed fastgrad: run Python from another directory "
        "(or use the installed scripts, e.g. .venv/bin/fastgrad-demo and .venv/bin/pytest), or "
        "build in place with `pip install -e . --no-build-isolation`." % (PACKAGE_DIR, name),
        name=name)
