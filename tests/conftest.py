"""Test configuration: the suite runs against the installed fastgrad, never the source tree."""

import os
import sys

import numpy as onp
import pytest

import fastgrad

# By default the BLAS's threads follow the machine's load, and OpenBLAS splits products of
# some shapes differently on one and on two threads, in their last bits (Note [Load-aware BLAS
# threads] in fastgrad/_kernels/_blas_policy.py). The suite runs the BLAS on one thread, so
# that no test's bits (the tape's against the Executor's, say) depend on what else the machine
# runs; tests/kernels/test_blas_policy.py turns the policy on where it tests it.
fastgrad._kernels._threads.LOAD_AWARE = False
fastgrad.set_num_threads(None)
# The tests sit in folders that mirror fastgrad's layers (tests/core/, tests/ops/, ...). They
# import the shared modules of tests/ (_helpers, op_specs, tools/) and a few import another
# test file's cases (test_ops's, test_conv_pool_fast's) by name, from whichever folder they
# are in: tests/ and its folders of tests go on sys.path once, here. Test file names are
# unique across the folders, so a name finds one file.
_TESTS = os.path.dirname(os.path.abspath(__file__))
for _folder in [_TESTS] + sorted(
        os.path.join(_TESTS, name) for name in os.listdir(_TESTS)
        if any(f.startswith("test_") for f in
               (os.listdir(os.path.join(_TESTS, name))
                if os.path.isdir(os.path.join(_TESTS, name)) else ()))):
    if _folder not in sys.path:
        sys.path.insert(0, _folder)


def pytest_report_header(config):
    return "fastgrad %s from %s" % (fastgrad.__version__, os.path.dirname(fastgrad.__file__))


@pytest.fixture(autouse=True)
def _fresh_autograd_state():
    """Each test starts not recording, in predict mode, and leaves the state as it found it."""
    from fastgrad import autograd
    prev_r = autograd.set_recording(False)
    prev_t = autograd.set_training(False)
    yield
    autograd.set_recording(prev_r)
    autograd.set_training(prev_t)


@pytest.fixture(autouse=True)
def _numpy_semantics_restored():
    """A test that calls ``npx.set_np()`` (MXNet programs do, at their top) leaves the
    process as it found it: float32 by default, Gluon's Parameters as NDArrays. Without this
    a later test's names, reprs and array types depend on the order the suite runs in."""
    from fastgrad import numpy_extension as npx
    array, shape = npx.is_np_array_requested(), npx._np_shape_requested[0]
    float64 = npx.is_np_default_dtype()
    yield
    npx.reset_np()
    if array or shape or float64:
        npx.set_np(shape=shape or array, array=array, dtype=float64)
        npx._set_np_shape(shape)


@pytest.fixture
def rng():
    return onp.random.default_rng(0)


@pytest.fixture
def fast_thread_switching():
    """Make the interpreter switch threads very often, so that concurrent jobs (recording,
    backward passes) interleave inside their loops."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)
