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
    # Signatures in the form CPython reads (__text_signature__): inspect.signature works on
    # the compiled functions (autograd.is_recording, ...) as on Python ones.
    "embedsignature.format": "clinic",
    "binding": False,
}

# NPY_TARGET_VERSION: the oldest NumPy the extensions run on, the floor in pyproject.toml
# (numpy>=2.0). NumPy's headers hide whatever C API is newer than the target (a build against
# NumPy 2.4 headers that used a 2.1 function would fail to compile, not fail on 2.0 at import),
# and the default target of NumPy 2.0's own headers is 1.19, which hides
# PyDataMem_SetHandler (1.22): kernels.pyx then compiled to a call of an undefined symbol and
# "import fastgrad" failed when built against NumPy 2.0.0.
MACROS = [("NPY_NO_DEPRECATED_API", "NPY_2_0_API_VERSION"),
          ("NPY_TARGET_VERSION", "NPY_2_0_API_VERSION")] \
    + ([] if DEBUG else [("CYTHON_WITHOUT_ASSERTIONS", None), ("NDEBUG", None)])

# Dotted names below fastgrad; "_core._array" is fastgrad/_core/_array.pyx.
MODULES = ["_core._state", "_core._node", "_kernels._large.kernels", "_kernels._fused",
           "_core._array", "_core._engine", "symbol._plan"]

extensions = [
    Extension(
        "fastgrad.%s" % name,
        ["fastgrad/%s.pyx" % name.replace(".", "/")],
        include_dirs=["fastgrad/_core", "fastgrad/_kernels", "fastgrad/_kernels/_large",
                      numpy.get_include()],
        define_macros=MACROS,
        extra_compile_args=(["-O0", "-g"] if DEBUG and os.name != "nt" else [])
        # the fused kernels equal NumPy's composition bit for bit only without contracting
        # a * b + c into one rounding (Note [Fused kernels] in fastgrad/_kernels/_fused.pyx)
        + (["-ffp-contract=off"] if name == "_kernels._fused" and os.name != "nt" else []),
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
# below, the Cython and NumPy versions, the directives and the macros, so digests of those
# decide: when both are the ones recorded with the C files, the C files are used as they are,
# and setuptools skips the modules whose compiled file is newer than its C file. When the
# sources changed, Cython regenerates the modules they touch; when the versions, directives or
# macros changed (which modification times cannot show), it regenerates every module.
def _digests():
    config = hashlib.sha256(
        repr((Cython.__version__, numpy.__version__, DIRECTIVES, MACROS)).encode())
    sources = hashlib.sha256()
    for folder, _, names in sorted(os.walk("fastgrad")):
        for name in sorted(names):
            if name.endswith((".pyx", ".pxd", ".pxi", ".h")):
                path = os.path.join(folder, name)
                with open(path, "rb") as source:
                    sources.update(path.replace(os.sep, "/").encode() + b"\0"
                                   + source.read())
    return "%s %s\n" % (config.hexdigest(), sources.hexdigest())


def _extensions():
    digests, stamp = _digests(), os.path.join(BUILD_DIR, "sources.sha256")
    generated = [os.path.join(BUILD_DIR, "fastgrad", *name.split(".")[:-1],
                              "%s.c" % name.split(".")[-1]) for name in MODULES]
    recorded = ""
    if os.path.exists(stamp) and all(map(os.path.exists, generated)):
        with open(stamp) as file:
            recorded = file.read()
    if recorded == digests:
        for extension, c_file in zip(extensions, generated):
            extension.sources = [c_file]
        return extensions
    compiled = cythonize(extensions, compiler_directives=DIRECTIVES, build_dir=BUILD_DIR,
                         force=recorded.split(" ")[0] != digests.split(" ")[0])
    os.makedirs(BUILD_DIR, exist_ok=True)
    with open(stamp, "w") as file:
        file.write(digests)
    return compiled


setup(ext_modules=_extensions())
