"""Command line: ``python -m benchmarks.run [--only a,b] [--quick] [--json out.json]``.

Runs each selected workload (all by default) with every implementation that can run here,
interleaved, and prints one table per workload (median, IQR, ratio to the reference column,
first-call time) followed by the goals from the issues, evaluated on this run. Progress and
skip/error reasons go to stderr; the tables go to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time


from ._threads import parse as parse_threads
from ._threads import set_threads, threads_from_argv

if __name__ == "__main__":  # before the imports below pull in numpy
    set_threads(threads_from_argv(sys.argv[1:]))

from .harness import Options, format_results, run_workload, write_json
from .workloads import ALL, BY_NAME


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated workload names: " + ", ".join(BY_NAME))
    ap.add_argument("--skip-impl", default="",
                    help="comma-separated implementation names not to run (e.g. torch,autograd)")
    ap.add_argument("--quick", action="store_true",
                    help="fewer samples and a smaller time budget per slow implementation")
    ap.add_argument("--samples", type=int, help="samples per implementation (default 15, quick 5)")
    ap.add_argument("--budget", type=float,
                    help="max seconds of samples for one slow implementation (default 20, quick 6)")
    ap.add_argument("--threads", type=parse_threads, default=1,
                    help="threads for every system (BLAS, OpenMP, XLA, torch), or 'default' "
                         "(each system's own default: llgrad auto); default 1")
    ap.add_argument("--llgrad-threads", metavar="N,M",
                    help="also run each compiled llgrad slot compiled at these LLGRAD_NUM_THREADS "
                         "counts (slots llgrad@N, interleaved with the rest)")
    ap.add_argument("--ref", default="llgrad", help="reference column for ratios (default llgrad)")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness checks")
    ap.add_argument("--json", metavar="PATH", help="also write every sample to PATH as JSON")
    ap.add_argument("--list", action="store_true", help="list workloads and implementations")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args(argv)

    if args.list:
        for w in ALL:
            print(f"{w.name:15s} {w.description}")
            print(f"{'':15s} impls: {', '.join(i.name for i in w.impls)}")
        return 0

    selected = ALL
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            ap.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
        selected = [BY_NAME[n] for n in names]

    opts = Options.quick() if args.quick else Options()
    if args.samples:
        opts.samples = args.samples
    if args.budget:
        opts.budget = args.budget
    opts.ref = args.ref
    opts.threads = args.threads
    opts.check = not args.no_check
    opts.verbose = not args.quiet
    skip = {s.strip() for s in args.skip_impl.split(",") if s.strip()}

    t0 = time.perf_counter()
    results = []
    counts = [int(n) for n in (args.llgrad_threads or "").split(",") if n.strip()]
    for w in selected:
        if skip:
            w = _without(w, skip)
        if counts:
            w = _at_thread_counts(w, counts)
        res = run_workload(w, opts)
        results.append(res)
        if opts.verbose:   # show each table as soon as it is ready
            print(format_results([res]), file=sys.stderr, flush=True)
    print(format_results(results), end="")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; "
          f"{'quick' if args.quick else 'full'} run, {opts.samples} samples max per implementation")
    if args.json:
        write_json(args.json, results, opts)
        print(f"wrote {args.json}")
    return 0


def _at_thread_counts(w, counts):
    """`w` with a slot llgrad@N beside each llgrad slot, compiled at LLGRAD_NUM_THREADS=N
    (read when a signature is compiled: on the first call)."""
    import dataclasses
    extra = [dataclasses.replace(i, name=f"{i.name}@{n}", setup=_compiled_at(i.setup, n))
             for i in w.impls if i.name.startswith("llgrad") for n in counts]
    return dataclasses.replace(w, impls=list(w.impls) + extra)


def _compiled_at(setup, n):
    def at(inputs):
        import os
        saved = os.environ.get("LLGRAD_NUM_THREADS")
        os.environ["LLGRAD_NUM_THREADS"] = str(n)

        def restore():
            if saved is None:
                os.environ.pop("LLGRAD_NUM_THREADS", None)
            else:
                os.environ["LLGRAD_NUM_THREADS"] = saved
        try:
            fn = setup(inputs)
            first = [True]
        except BaseException:
            restore()
            raise

        def run():
            if first:  # the first call compiles, at n threads
                first.clear()
                try:
                    return fn()
                finally:
                    restore()
            return fn()
        return run
    return at


def _without(w, skip):
    import dataclasses
    return dataclasses.replace(w, impls=[i for i in w.impls if i.name not in skip])


if __name__ == "__main__":
    sys.exit(main())
