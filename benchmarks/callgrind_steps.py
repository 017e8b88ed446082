"""Steps of one workload under callgrind, for instruction counts that a loaded machine does
not change.

Run as::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 FASTGRAD_NUM_THREADS=1 \\
        valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=cg.out \\
        python benchmarks/callgrind_steps.py WORKLOAD [BACKEND] [STEPS]
    callgrind_annotate cg.out | grep "PROGRAM TOTALS"      # divide by STEPS

The script builds the workload's step on the backend (``benchmarks/workloads.py``; default
``fastgrad``), runs three warm-up steps with callgrind's instrumentation off, switches it on
for its own process (``callgrind_control -i on``), runs ``STEPS`` steps (default 3) and exits
at once, so the count is of the steps alone. Not a test; needs valgrind.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads  # noqa: E402


def main(argv):
    key = argv[0]
    backend_name = argv[1] if len(argv) > 1 else "fastgrad"
    steps = int(argv[2]) if len(argv) > 2 else 3
    workload = workloads.get_workload(key)
    backend = workloads.get_backend(backend_name)
    backend.load()
    step = workload.build(backend, workload.make_inputs())
    for _ in range(3):
        step()
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())],
                   stdout=subprocess.DEVNULL, check=True)
    for _ in range(steps):
        step()
    sys.stdout.flush()
    os._exit(0)         # no interpreter shutdown in the count


if __name__ == "__main__":
    main(sys.argv[1:])
