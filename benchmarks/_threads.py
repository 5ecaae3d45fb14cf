"""Thread limits for every benchmarked system; imported before numpy, torch or JAX load."""

import os


def threads_from_argv(argv) -> int:
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 1


def set_threads(n: int):
    """Limit every system to ``n`` threads. Must run before numpy/torch/jax are imported.

    The default is 1: on this 2-core machine, PyTorch's OpenMP pool and XLA's thread pool
    oversubscribe the cores under background load (PyTorch's gmm gradient went from ~8 ms on
    one thread to ~150 ms on two), and single-threaded is how ADBench compares AD tools.
    """
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMBA_NUM_THREADS", "LLGRAD_NUM_THREADS"):
        os.environ[var] = str(n)
    if n == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_cpu_multi_thread_eigen" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false"
                                       " intra_op_parallelism_threads=1").strip()
