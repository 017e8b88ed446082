"""Build fastgrad's Cython extension modules.

Compiler directives are set here, in one place. ``FASTGRAD_DEBUG=1`` builds with bounds,
wraparound and initialization checks on (and C assertions), for running the test suite
against a checked build.
"""

import hashlib
import os

import Cython
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

BUILD_DIR = "build/cython-debug" if DEBUG else "build/cython"


# Note [Rebuilding only what changed]
# ``pip install .`` builds in an isolated environment that pip creates afresh each time, so the
# Cython it installs there is always newer than the C files of the previous build, and Cython's
# own check (by modification times, counting its bundled .pxd files) would regenerate the C of
# every module that cimports one, and the compiler would then recompile them all: installing
# ``".[test]"`` after ``"."`` took a minute for nothing. The C files depend only on the sources
# below, the Cython and NumPy versions and the directives, so a digest of those decides: when it
# is the one recorded with the C files, they are used as they are, and setuptools skips the
# modules whose compiled file is newer than its C file.
def _sources_digest():
    digest = hashlib.sha256(repr((Cython.__version__, numpy.__version__, DIRECTIVES)).encode())
    for name in sorted(os.listdir("fastgrad")):
        if name.endswith((".pyx", ".pxd", ".h")):
            with open(os.path.join("fastgrad", name), "rb") as source:
                digest.update(name.encode() + b"\0" + source.read())
    return digest.hexdigest()


def _extensions():
    digest, stamp = _sources_digest(), os.path.join(BUILD_DIR, "sources.sha256")
    generated = [os.path.join(BUILD_DIR, "fastgrad", "%s.c" % name) for name in MODULES]
    if os.path.exists(stamp) and all(map(os.path.exists, generated)):
        with open(stamp) as recorded:
            if recorded.read() == digest:
                for extension, c_file in zip(extensions, generated):
                    extension.sources = [c_file]
                return extensions
    compiled = cythonize(extensions, compiler_directives=DIRECTIVES, build_dir=BUILD_DIR)
    with open(stamp, "w") as recorded:
        recorded.write(digest)
    return compiled


setup(ext_modules=_extensions())
