"""Build fastgrad's Cython extension modules.

Compiler directives are set here, in one place. ``FASTGRAD_DEBUG=1`` builds with bounds,
wraparound and initialization checks on (and C assertions), for running the test suite
against a checked build.
"""

import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("FASTGRAD_DEBUG", "") not in ("", "0")

DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": not DEBUG,
    "embedsignature": True,
    "binding": False,
}

MODULES = ["_state", "_node", "_parallel", "_array", "_engine", "_plan"]

extensions = [
    Extension(
        "fastgrad.%s" % name,
        ["fastgrad/%s.pyx" % name],
        include_dirs=["fastgrad", numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_2_0_API_VERSION")]
        + ([] if DEBUG else [("CYTHON_WITHOUT_ASSERTIONS", None), ("NDEBUG", None)]),
        extra_compile_args=["-O0", "-g"] if DEBUG and os.name != "nt" else [],
    )
    for name in MODULES
]

setup(
    ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES,
                          build_dir="build/cython" if not DEBUG else "build/cython-debug"),
)
