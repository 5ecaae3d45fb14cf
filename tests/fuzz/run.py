"""The fuzzer's command line: generate and check many programs in worker processes.

    python -m tests.fuzz.run --n 10000 --seed 1 --jobs 2 --out fuzz-out
    python -m tests.fuzz.run --seed 1 --only 1234 --show   # one program, printed and checked

Each worker is a subprocess that checks the program numbers it is sent (one JSON line
each way), so a segfault or an endless loop in compiled code costs one program (counted as
`segfault`/`timeout`), not the run; workers are restarted every RECYCLE programs to bound
memory. After the run, the first `--minimize` programs of every failure bucket are shrunk
(minimize.py), and each failing program is written to OUT/<bucket>/<seed>_<index>.py as a
runnable reproduction (report.py); OUT/summary.txt and OUT/results.jsonl hold the counts and
every outcome.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import time

RECYCLE = 150


def parse_features(spec: str) -> frozenset:
    """`default`, `all`, or either followed by `,+feature` / `,-feature` items."""
    from tests.fuzz.program import DEFAULT_FEATURES, FEATURES
    items = spec.split(",")
    base = {"default": DEFAULT_FEATURES, "all": FEATURES}.get(items[0])
    if base is None:
        base, items = frozenset(), ["+" + i for i in items]
    out = set(base)
    for it in items[1:] if items[0] in ("default", "all") else items:
        name = it.lstrip("+-")
        if name not in FEATURES:
            raise SystemExit(f"unknown feature {name!r}; features: {', '.join(sorted(FEATURES))}")
        (out.discard if it.startswith("-") else out.add)(name)
    return frozenset(out)


# -- the worker ----------------------------------------------------------------------------------
def worker(cfg: dict) -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed goes to stderr, not into the protocol
    from tests.fuzz.gen import generate
    from tests.fuzz.minimize import minimize
    from tests.fuzz.oracle import Failure, check
    features, engines = frozenset(cfg["features"]), tuple(cfg["engines"])
    for _ in range(RECYCLE):
        line = sys.stdin.readline()
        if not line:
            return
        req = json.loads(line)
        if req["index"] in cfg.get("die_on", ()):  # (tests: a worker that segfaults)
            os.kill(os.getpid(), signal.SIGSEGV)
        program = generate(cfg["seed"], req["index"], features)
        if req["op"] == "check":
            out = check(program, engines, fd=cfg["fd"])
            reply = dict(status=out.status, failures=[dataclasses.asdict(f) for f in
                                                      out.failures],
                         grad=out.grad, note=out.note, unrolled=out.unrolled,
                         seconds=round(out.seconds, 3), draw=out.draw, known=out.known)
        else:
            failure = Failure(**req["failure"])
            if "interp" in failure.engine:  # (no LLVM per candidate)
                engines = ("interp",)
            small, tries = minimize(program, failure, engines, budget=cfg["min_budget"])
            out = check(small, engines, fd=cfg["fd"])
            reply = dict(source=small.source, args=[dataclasses.asdict(a) for a in small.args],
                         wrt=small.wrt, tries=tries, draw=out.draw, known=out.known,
                         failures=[dataclasses.asdict(f) for f in out.failures])
        reply["index"] = req["index"]
        proto.write(json.dumps(reply) + "\n")


# -- the pool ------------------------------------------------------------------------------------
class Pool:
    """`jobs` worker subprocesses; `run(requests)` yields (request, reply or None, why)."""

    def __init__(self, cfg: dict, jobs: int, timeout: float):
        self.cfg, self.jobs, self.timeout = cfg, jobs, timeout
        self.sel = selectors.DefaultSelector()
        self.busy: dict = {}  # proc -> (request, start time)

    def spawn(self):
        p = subprocess.Popen([sys.executable, "-m", "tests.fuzz.run", "--worker",
                              json.dumps(self.cfg)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, bufsize=1)
        self.sel.register(p.stdout, selectors.EVENT_READ, p)
        return p

    def retire(self, p) -> None:
        self.sel.unregister(p.stdout)
        if p.poll() is None:
            p.kill()
        p.wait()

    def run(self, requests):
        todo = list(requests)[::-1]
        idle = [self.spawn() for _ in range(min(self.jobs, len(todo)))]
        sent = {id(p): 0 for p in idle}
        while todo or self.busy:
            while idle and todo:
                p = idle.pop()
                if sent.get(id(p), 0) >= RECYCLE:
                    self.retire(p)
                    p = self.spawn()
                req = todo.pop()
                p.stdin.write(json.dumps(req) + "\n")
                sent[id(p)] = sent.get(id(p), 0) + 1
                self.busy[p] = (req, time.monotonic())
            for key, _ in self.sel.select(timeout=1.0):
                p = key.data
                line = p.stdout.readline()
                if p not in self.busy:  # a stray line from an idle worker: not a reply
                    continue
                req, _ = self.busy.pop(p)
                if line:
                    idle.append(p)
                    yield req, json.loads(line), None
                else:  # the worker died on this request: its own exit code, not the kill's
                    try:
                        rc = p.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        rc = None
                    self.retire(p)
                    idle.append(self.spawn())
                    yield req, None, "segfault" if rc == -signal.SIGSEGV else \
                        f"signal {-rc}" if rc is not None and rc < 0 else f"exit {rc}"
            now = time.monotonic()
            for p, (req, t0) in list(self.busy.items()):
                if now - t0 > self.timeout:
                    del self.busy[p]
                    self.retire(p)
                    idle.append(self.spawn())
                    yield req, None, "timeout"
        for p in idle:
            p.stdin.close()
            self.retire(p)


# -- the run -------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="programs to check")
    ap.add_argument("--start", type=int, default=0, help="first program number")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--features", default="all",
                    help="default, all, or either with ,+name / ,-name (see tests/fuzz/gen.py)")
    ap.add_argument("--engines", default="interp,native")
    ap.add_argument("--no-fd", action="store_true", help="skip finite-difference checks")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per program")
    ap.add_argument("--minimize", type=int, default=1, help="programs shrunk per bucket")
    ap.add_argument("--min-budget", type=float, default=150.0, help="seconds per shrink")
    ap.add_argument("--out", default="fuzz-out")
    ap.add_argument("--only", type=int, nargs="*", help="check just these program numbers")
    ap.add_argument("--show", action="store_true", help="print the programs (with --only)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(json.loads(a.worker))
        return 0
    features = parse_features(a.features)
    cfg = dict(seed=a.seed, features=sorted(features), engines=a.engines.split(","),
               fd=not a.no_fd, min_budget=a.min_budget)
    indices = a.only if a.only else list(range(a.start, a.start + a.n))
    if a.show:
        from tests.fuzz.gen import generate
        for i in indices:
            print(f"# program {a.seed}:{i}\n{generate(a.seed, i, features).source}")
    os.makedirs(a.out, exist_ok=True)
    header = (f"llgrad fuzz: seed {a.seed}, programs {indices[0]}..{indices[-1]}, "
              f"engines {a.engines}, features {a.features}")
    t0 = time.time()
    results = check_all(cfg, indices, a)
    seconds = time.time() - t0
    shrink_failures(cfg, results, a)
    from tests.fuzz.report import summary
    text = summary(sorted(results, key=lambda r: r["index"]), header, seconds)
    with open(os.path.join(a.out, "summary.txt"), "w") as fh:
        fh.write(text + "\n")
    print(text)
    return 0 if all(r["status"] in ("ok", "invalid", "boundary", "unsupported")
                    for r in results) else 1


def check_all(cfg: dict, indices: list[int], a) -> list[dict]:
    results, done, t0 = [], 0, time.time()
    pool = Pool(cfg, a.jobs, a.timeout)
    with open(os.path.join(a.out, "results.jsonl"), "w") as log:
        for req, reply, why in pool.run({"op": "check", "index": i} for i in indices):
            if reply is None:
                reply = dict(index=req["index"], status=why.split()[0], failures=[],
                             note=why)
            results.append(reply)
            log.write(json.dumps(reply) + "\n")
            log.flush()
            done += 1
            if reply["status"] not in ("ok", "invalid", "boundary") or done % 100 == 0:
                keys = [f"{f['status']}:{f['kind']}:{f['engine']}" for f in reply["failures"]]
                print(f"[{done}/{len(indices)} {time.time() - t0:.0f}s] {req['index']}: "
                      f"{reply['status']} {' | '.join(keys)[:200]}", flush=True)
    return results


def shrink_failures(cfg: dict, results: list[dict], a) -> None:
    """Shrink the first programs of each bucket; write every failure as a repro script."""
    from tests.fuzz.gen import generate
    from tests.fuzz.program import Arg
    from tests.fuzz.report import repro_script, slug
    features = frozenset(cfg["features"])
    firsts, requests = {}, []
    for r in sorted(results, key=lambda r: r["index"]):
        if r["status"] in ("segfault", "timeout") or r["failures"]:
            key = r["failures"][0] if r["failures"] else None
            name = slug(f"{key['status']}:{key['kind']}:{key['engine']}" if key else r["status"])
            firsts.setdefault(name, []).append(r)
            if key and len(firsts[name]) <= a.minimize:
                requests.append({"op": "minimize", "index": r["index"], "failure": key})
    small = {}
    if requests:
        print(f"shrinking {len(requests)} programs", flush=True)
        pool = Pool(cfg, a.jobs, a.min_budget * 2 + 120)
        for req, reply, why in pool.run(requests):
            if reply is not None:
                small[req["index"]] = reply
    for name, rs in firsts.items():
        os.makedirs(os.path.join(a.out, name), exist_ok=True)
        for r in rs:
            program = generate(a.seed, r["index"], features)
            outcome = r
            s = small.get(r["index"])
            if s is not None:
                program = dataclasses.replace(program, source=s["source"], wrt=s["wrt"],
                                              args=[Arg(**{**x, "shape": tuple(x["shape"]),
                                                           "values": tuple(x["values"])})
                                                    for x in s["args"]])
                outcome = s
            fails = outcome.get("failures") or r["failures"]
            text = "\n".join(
                [f"llgrad fuzzer, seed {a.seed}, program {r['index']}"
                 f"{' (minimised)' if s else ''}: {r['status']}",
                 f"rerun: python -m tests.fuzz.run --seed {a.seed} --only {r['index']} "
                 f"--features {a.features} --show",
                 f"known-bug features it uses: {', '.join(outcome.get('known') or []) or 'none'}"]
                + [f"{f['status']}:{f['kind']}:{f['engine']}\n{f['detail']}" for f in fails]
                + ([r.get("note", "")] if not fails else []))
            path = os.path.join(a.out, name, f"{a.seed}_{r['index']}.py")
            with open(path, "w") as fh:
                fh.write(repro_script(program, outcome, text))


if __name__ == "__main__":
    sys.exit(main())
