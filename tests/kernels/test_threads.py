"""fastgrad.set_num_threads / get_num_threads: fastgrad's kernel pool and the BLAS
(Note [Threads on a busy machine] in _threads.py). Values and errors, never speed."""

import os
import subprocess
import sys

import numpy as onp
import pytest
import threadpoolctl

import fastgrad
from fastgrad._kernels import _large


def _blas_threads():
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


@pytest.fixture(autouse=True)
def _restore_defaults():
    yield
    fastgrad.set_num_threads(None)


def test_exported():
    assert fastgrad.set_num_threads is fastgrad._kernels._threads.set_num_threads
    assert fastgrad.get_num_threads is fastgrad._kernels._threads.get_num_threads
    for name in ("set_num_threads", "get_num_threads", "get_blas_num_threads"):
        assert name in fastgrad.__all__


@pytest.mark.parametrize("n", [1, 2, 3])
def test_sets_the_pool_and_the_blas(n):
    fastgrad.set_num_threads(n)
    assert fastgrad.get_num_threads() == n
    assert _large.get_num_threads() == n
    if not _blas_threads():
        pytest.skip("threadpoolctl finds no BLAS library")
    assert set(_blas_threads()) == {n}
    assert fastgrad.get_blas_num_threads() == n


def test_numpy_integers_are_taken():
    fastgrad.set_num_threads(onp.int64(2))
    assert fastgrad.get_num_threads() == 2


def test_none_restores_the_defaults():
    fastgrad.set_num_threads(3)
    fastgrad.set_num_threads(None)
    assert fastgrad.get_num_threads() == _large.kernels._default_threads()
    blas = fastgrad._kernels._threads._default_blas_threads()
    if blas is not None and _blas_threads():
        assert set(_blas_threads()) == {blas}


@pytest.mark.parametrize("bad, error, words", [
    (0, ValueError, "at least 1, got 0"),
    (-2, ValueError, "at least 1, got -2"),
    (True, TypeError, "not a bool"),
    (False, TypeError, "not a bool"),
    (2.0, TypeError, "not float"),
    ("2", TypeError, "not str"),
])
def test_bad_numbers(bad, error, words):
    fastgrad.set_num_threads(2)
    with pytest.raises(error, match="fastgrad.set_num_threads") as info:
        fastgrad.set_num_threads(bad)
    assert words in str(info.value)
    assert fastgrad.get_num_threads() == 2          # unchanged


def _python(code, env, tmp_path):
    # From an empty directory, so that a source tree does not shadow the package under test.
    env = dict(env)
    paths = [os.path.dirname(os.path.dirname(fastgrad.__file__))]
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p and os.path.isabs(p)])
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in fastgrad._kernels._threads.BLAS_VARIABLES and k != "FASTGRAD_NUM_THREADS"}
    env.update(extra)
    return env


REPORT = ("import numpy, threadpoolctl, fastgrad\n"
          "b = [i['num_threads'] for i in threadpoolctl.threadpool_info()\n"
          "     if i['user_api'] == 'blas']\n"
          "print(sorted(set(b)), fastgrad.get_num_threads())\n")


@pytest.mark.parametrize("env, blas, pool", [
    ({}, [1], None),                                 # the default: one BLAS thread
    ({"FASTGRAD_NUM_THREADS": "3"}, [3], 3),         # both
    ({"OPENBLAS_NUM_THREADS": "2"}, [2], None),      # the user's BLAS setting is kept
    ({"OMP_NUM_THREADS": "2", "FASTGRAD_NUM_THREADS": "3"}, [2], 3),
])
def test_defaults_at_import(tmp_path, env, blas, pool):
    out = _python(REPORT, _clean_env(**env), tmp_path)
    assert out.returncode == 0, out.stderr
    found, threads = out.stdout.split("]")
    found = [int(x) for x in found.strip("[ ").split(",") if x.strip()]
    if not found:
        pytest.skip("threadpoolctl finds no BLAS library")
    if "OPENBLAS_NUM_THREADS" in env or "OMP_NUM_THREADS" in env:
        # OpenBLAS reads them; another BLAS may not: only check that fastgrad left it alone
        # when the BLAS is OpenBLAS.
        info = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
        if not all(i["internal_api"] == "openblas" for i in info):
            return
    assert found == blas
    if pool is not None:
        assert int(threads) == pool


def test_idle_pool_workers_sleep(tmp_path):
    """Once a job is done the pool's workers sleep (Note [Kernel pool]): the process uses next
    to no CPU time while its main thread sleeps. A spinning worker would use about as much CPU
    time as the sleep's wall time."""
    code = ("import time, numpy, fastgrad\n"
            "from fastgrad._kernels import _large\n"
            "_large.set_num_threads(2)\n"
            "x = numpy.random.default_rng(0).random(1 << 20)\n"
            "calls = _large.pool_calls()\n"
            "for _ in range(20):\n"
            "    _large.apply(numpy.add, x, x)\n"
            "assert _large.pool_calls() > calls, 'the pool did not run'\n"
            "cpu0, wall0 = time.process_time(), time.perf_counter()\n"
            "time.sleep(1.0)\n"
            "print(time.process_time() - cpu0, time.perf_counter() - wall0)\n")
    out = _python(code, _clean_env(), tmp_path)
    assert out.returncode == 0, out.stderr
    cpu, wall = map(float, out.stdout.split())
    assert cpu < 0.25 * wall, "the idle pool used %.3f s of CPU in %.3f s" % (cpu, wall)
