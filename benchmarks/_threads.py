"""Thread limits for every benchmarked system; imported before numpy, torch or JAX load."""

import os

DEFAULT = "default"


def threads_from_argv(argv) -> int | str:
    """The value of `--threads N` (or `--threads default`) in argv; 1 when absent."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return parse(argv[i + 1])
        if a.startswith("--threads="):
            return parse(a.split("=", 1)[1])
    return 1


def parse(text: str) -> int | str:
    """A positive thread count, or "default" (every system left at its own default)."""
    if text.strip().lower() == DEFAULT:
        return DEFAULT
    n = int(text)
    if n < 1:
        raise ValueError(f"--threads {text}: give a positive number or 'default'")
    return n


def set_threads(n: int | str):
    """Limit every system to ``n`` threads. Must run before numpy/torch/jax are imported.

    The default is 1: on this 2-core machine, PyTorch's OpenMP pool and XLA's thread pool
    oversubscribe the cores under background load (PyTorch's gmm gradient went from ~8 ms on
    one thread to ~150 ms on two), and single-threaded is how ADBench compares AD tools.
    ``"default"`` sets nothing: llgrad's LLGRAD_NUM_THREADS (unset: auto, the usable cores),
    OpenBLAS, PyTorch and XLA each take their own default (issue 16's "faster than JAX and
    PyTorch run with their default threading").
    """
    if n == DEFAULT:
        return
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMBA_NUM_THREADS", "LLGRAD_NUM_THREADS"):
        os.environ[var] = str(n)
    if n == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_cpu_multi_thread_eigen" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false"
                                       " intra_op_parallelism_threads=1").strip()
