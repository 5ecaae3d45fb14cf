"""Issue 2's entry point: ``python -m benchmarks.eager_overhead [--quick] [--json PATH]``.

The same as ``python -m benchmarks.run --only eager_overhead,mlp_step``: llgrad's eager
per-op overhead (1,000 chained scalar ops, forward + backward) and a 784-128-10 MLP training
step, beside PyTorch eager, HIPS autograd, JAX and a hand-written numpy floor, with ratios.
The workloads themselves live in ``benchmarks/workloads/eager.py``.
"""

import sys

if __name__ == "__main__":
    from ._threads import set_threads, threads_from_argv
    set_threads(threads_from_argv(sys.argv[1:]))   # before numpy is imported
    from . import run
    argv = sys.argv[1:]
    if not any(a == "--only" or a.startswith("--only=") for a in argv):
        argv = ["--only", "eager_overhead,mlp_step"] + argv
    sys.exit(run.main(argv))
