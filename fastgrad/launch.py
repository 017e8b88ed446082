"""Start a program on N MPI ranks: ``python -m fastgrad.launch -n N COMMAND...``.

The counterpart of MXNet's ``tools/launch.py -n N python train.py``: runs ``COMMAND`` N times
through the MPI runtime's ``mpiexec`` (the one next to this Python, as the ``mpich`` wheel of
``fastgrad[distributed]`` installs it, else the first on ``PATH``). A ``COMMAND`` that starts
with ``python`` (or ``python3``) or with a ``.py`` file is run with this Python. The exit
status is ``mpiexec``'s: non-zero if any rank failed (a rank's uncaught exception aborts the
job, see Note [MPI store]).

Unless ``OMP_NUM_THREADS`` (or ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``) is set, each rank
gets its share of the machine's cores for BLAS threads (see ``thread_env``).

On a cluster, launch with the scheduler instead (``srun python train.py``, or the cluster's
``mpiexec``); fastgrad needs nothing but mpi4py built against that MPI.
"""

import argparse
import os
import shutil
import subprocess
import sys

from fastgrad.kvstore.mpi import INSTALL_HINT

__all__ = ["find_mpiexec", "command_line", "thread_env", "main"]

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def find_mpiexec():
    """The path of ``mpiexec``: beside this interpreter first, then on ``PATH``; or None."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    return shutil.which("mpiexec")


def command_line(mpiexec, n, command, extra=()):
    """The ``mpiexec`` command line that runs ``command`` on ``n`` ranks."""
    command = list(command)
    if command and command[0] in ("python", "python3"):
        command[0] = sys.executable
    elif command and command[0].endswith(".py"):
        command.insert(0, sys.executable)
    return [mpiexec, *extra, "-n", str(n), *command]


def thread_env(n, environ, cpus):
    """``environ`` with the BLAS/OpenMP thread count set to each rank's share of ``cpus``.

    N ranks on one machine each running a BLAS with a thread per core oversubscribe it many
    times over (and MPICH's ranks spin while they wait), which can make a step ten times
    slower; so, unless the user set one of ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` or
    ``MKL_NUM_THREADS``, each rank gets ``cpus // n`` threads (at least 1).
    """
    env = dict(environ)
    if not any(v in env for v in THREAD_VARS):
        share = str(max(1, (cpus or 1) // n))
        for v in THREAD_VARS:
            env[v] = share
    return env


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m fastgrad.launch",
        description="Run COMMAND on N MPI ranks (for fastgrad's 'dist_sync' KVStore).")
    parser.add_argument("-n", "--num-workers", type=int, required=True, metavar="N",
                        help="the number of ranks (worker processes)")
    parser.add_argument("--mpiexec-arg", action="append", default=[], metavar="ARG",
                        help="an extra argument for mpiexec (repeatable)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the program and its arguments, e.g. python train.py")
    args = parser.parse_args(argv)
    if args.num_workers < 1:
        parser.error("-n must be at least 1")
    if not args.command:
        parser.error("give the command to run, e.g. python -m fastgrad.launch -n 2 "
                     "python train.py")
    mpiexec = find_mpiexec()
    if mpiexec is None:
        sys.stderr.write("fastgrad.launch: no mpiexec found (beside %s or on PATH).\n%s\n"
                         % (sys.executable, INSTALL_HINT))
        return 2
    try:
        return subprocess.call(command_line(mpiexec, args.num_workers, args.command,
                                            args.mpiexec_arg),
                               env=thread_env(args.num_workers, os.environ, os.cpu_count()))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
