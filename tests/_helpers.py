"""Small helpers shared by the autograd tests.

Everything here works on plain NumPy arrays (imported as ``onp``) so that the
reference values never go through fastgrad itself. At the end: running a test's program
on MPI ranks (the distributed tests).
"""
import os
import subprocess
import sys
import textwrap

import numpy as onp
import pytest

import fastgrad as mx

#: The folder of the committed fixtures (each with the script that made it).
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def to_numpy(a):
    """Return the data of a fastgrad array (or anything array-like) as a NumPy array."""
    if hasattr(a, "asnumpy"):
        return a.asnumpy()
    return onp.asarray(a)


def f64(values):
    """A float64 fastgrad ``np`` array holding ``values``."""
    return mx.np.array(onp.asarray(values, dtype=onp.float64))


def variable(values, dtype=onp.float64):
    """A fastgrad ``np`` array holding ``values`` (float64 unless ``dtype``), gradient attached."""
    x = mx.np.array(onp.asarray(values, dtype=dtype))
    x.attach_grad()
    return x


def assert_close(actual, expected, rtol=1e-7, atol=1e-9):
    """``numpy.testing.assert_allclose`` that also accepts fastgrad arrays."""
    actual = to_numpy(actual)
    expected = to_numpy(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    onp.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def numerical_grad(f, *args, eps=1e-6):
    """Central finite differences of ``sum(f(*args))`` with respect to every argument.

    ``f`` takes and returns NumPy arrays; the arguments are converted to float64.
    Returns a list with one gradient array (same shape as the argument) per argument.
    """
    args = [onp.array(a, dtype=onp.float64) for a in args]

    def total(*a):
        return float(onp.sum(f(*a)))

    grads = []
    for a in args:
        g = onp.zeros_like(a)
        for idx in onp.ndindex(a.shape):
            orig = a[idx]
            a[idx] = orig + eps
            f_plus = total(*args)
            a[idx] = orig - eps
            f_minus = total(*args)
            a[idx] = orig
            g[idx] = (f_plus - f_minus) / (2.0 * eps)
        grads.append(g)
    return grads


def central_difference(phi, step=1e-3):
    """The derivative of ``phi`` at 0 by central differences with one Richardson step.

    ``phi(t)`` returns a float or an array. The error is O(step**4) in the fifth derivative
    plus rounding of about ``1e-16 * |phi| / step``: with the default step, about 1e-10
    relative for the smooth functions of the tests (a plain central difference with step
    1e-6 is good to only ~1e-8, and its tolerances hide real errors).
    """
    wide = (phi(step) - phi(-step)) / (2.0 * step)
    narrow = (phi(step / 2) - phi(-step / 2)) / step
    return (4.0 * narrow - wide) / 3.0


def fd_tolerance(expected, rtol=1e-7, atol=1e-8):
    """``(rtol, atol)`` for comparing with ``central_difference``: ``atol`` scales with the
    largest expected magnitude (the rounding error of the difference does too)."""
    scale = max(1.0, float(onp.max(onp.abs(expected)))) if onp.size(expected) else 1.0
    return rtol, atol * scale


def assert_fd_close(actual, expected, what="", rtol=1e-7, atol=1e-8):
    """Compare a derivative with its ``central_difference`` estimate, tightly."""
    actual, expected = to_numpy(actual), to_numpy(expected)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    rtol, atol = fd_tolerance(expected, rtol, atol)
    onp.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def fd_gradient(f, *args, step=1e-3):
    """``central_difference`` gradients of the scalar ``f(*args)`` (NumPy in, float out), one
    array per argument, element by element."""
    args = [onp.array(a, dtype=onp.float64) for a in args]
    grads = []
    for a in args:
        g = onp.zeros_like(a)
        for idx in onp.ndindex(a.shape):
            orig = a[idx]

            def phi(t):
                a[idx] = orig + t
                try:
                    return float(onp.sum(f(*args)))
                finally:
                    a[idx] = orig
            g[idx] = central_difference(phi, step)
        grads.append(g)
    return grads


class SquareFunction(mx.autograd.Function):
    """``x * x`` as a custom Function that saves its input (for tests of Functions)."""

    def forward(self, x):
        self.save_for_backward(x)
        return x * x

    def backward(self, dy):
        (x,) = self.saved_tensors
        return 2 * x * dy


# ------------------------------------------------------------ programs on 2 MPI ranks
MPI_TIMEOUT = 180


def _mpi_missing():
    """Why programs cannot run on MPI ranks here (mpi4py or mpiexec missing), or ``None``."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install \"fastgrad[distributed]\")"
    from fastgrad.launch import find_mpiexec
    return "mpiexec not found" if find_mpiexec() is None else None


MPI_MISSING = _mpi_missing()
# ``pytestmark = requires_mpi`` in a module of tests that run programs on MPI ranks.
requires_mpi = pytest.mark.skipif(MPI_MISSING is not None, reason=MPI_MISSING or "")


def run_ranks(tmp_path, source, n=2, timeout=MPI_TIMEOUT, args=()):
    """Run ``source`` (dedented) on ``n`` ranks through ``python -m fastgrad.launch``, with a
    timeout so that a hang fails the test; the completed process (output captured)."""
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "fastgrad.launch", "-n", str(n),
                           sys.executable, str(prog), *args],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=str(tmp_path))


def expect_ok(proc, n=2):
    """The ranks' program exited 0 and every rank printed ``rank <r> ok``."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for r in range(n):
        assert "rank %d ok" % r in proc.stdout, proc.stdout + proc.stderr
