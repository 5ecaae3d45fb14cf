"""What a fuzz run writes: a self-contained reproduction script per failure, and the summary.

A reproduction script is the (minimised) program followed by its inputs and a `__main__`
block that prints plain Python's value next to llgrad's (native and interpreter) and the
gradients next to central differences, so it can be run and pasted into an issue as is.
"""
from __future__ import annotations

import collections
import re

import numpy as np

from tests.fuzz.program import Program
from tests.fuzz.oracle import inputs

_MAIN = '''

if __name__ == "__main__":
    import os
    import llgrad
    from tests.fuzz.oracle import finite_differences
{inputs}
    print("plain Python:", f({call}))
    for mode in ("native", "interp"):
        os.environ["LLGRAD_DISABLE_JIT"] = "1" if mode == "interp" else "0"
        print(f"llgrad {{mode}}:", llgrad.differentiate(f)({call}))
{grad}'''
_GRAD = '''        print(f"  gradient {{mode}}:", llgrad.differentiate(loss, wrt={wrt})
              .value_and_grad({call})[1])
    print("  central differences:", finite_differences(loss, [{call}], list({wrt}), 1e-6))
'''


def literal(v) -> str:
    if isinstance(v, np.ndarray):
        return f"np.array({v.tolist()!r}, dtype=np.{v.dtype.name})"
    return repr(v)


def repro_script(program: Program, outcome: dict, header: str) -> str:
    draw = outcome.get("draw") or 0
    args = inputs(program, draw)
    names = [a.name for a in program.args]
    static = next((a for a in program.args if a.kind == "static"), None)
    lines = [f"    {n} = {literal(args[n])}" for n in names if not static or n != static.name]
    if static:
        lines.append(f"    {static.name} = {static.values[-1]!r}  # also called with "
                     f"{static.values[0]!r} first, on the same compiled function")
    call = ", ".join(names)
    wrt = tuple(names.index(w) for w in program.wrt)
    grad = _GRAD.format(wrt=wrt, call=call) if wrt else ""
    comments = "\n".join("# " + ln for ln in header.splitlines())
    return comments + "\n" + program.source + _MAIN.format(
        inputs="\n".join(lines), call=call, grad=grad)


def slug(key: str) -> str:
    return re.sub(r"[^0-9A-Za-z]+", "_", key).strip("_")[:80]


def summary(results: list[dict], header: str, seconds: float) -> str:
    """Counts by status, failure buckets with their programs, unsupported messages."""
    counts = collections.Counter(r["status"] for r in results)
    checked = sum(r.get("grad") == "checked" for r in results)
    unrolled = sum(r.get("unrolled", 0) > 0 for r in results)
    out = [header, f"{len(results)} programs in {seconds:.0f} s "
                   f"({seconds / max(1, len(results)):.2f} s each)"]
    notes = {"ok": f"gradient checked against finite differences in {checked}; "
                   f"{unrolled} programs had a loop unrolled",
             "invalid": "the generator's fault: plain Python rejected the program",
             "boundary": "no input draw kept every comparison clear of flipping"}
    for st in ("ok", "mismatch", "crash", "unsupported", "segfault", "timeout", "invalid",
               "boundary"):
        out.append(f"  {st:<12}{counts.get(st, 0):>7}   {notes.get(st, '')}".rstrip())
    clean = [r for r in results if r["status"] in ("mismatch", "crash", "unsupported")
             and not r.get("known")]
    out.append(f"failing programs that use no known-bug feature (gen.KNOWN_BUGS): "
               f"{collections.Counter(r['status'] for r in clean).most_common() or 0}")
    buckets = collections.defaultdict(list)
    for r in results:
        for f in r.get("failures", []):
            buckets[f"{f['status']}:{f['kind']}:{f['engine']}"].append(r)
        if r["status"] in ("segfault", "timeout"):
            buckets[r["status"]].append(r)
    if buckets:
        out.append("failures by status:kind:engine (programs; of them using no known-bug "
                   "feature; first of those, else first programs):")
        for key, rs in sorted(buckets.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            fresh = [r["index"] for r in rs if not r.get("known")]
            out.append(f"  {len(rs):>5} {len(fresh):>5}  {key}   "
                       f"{(fresh or [r['index'] for r in rs])[:6]}")
    known = collections.Counter(k for r in results for k in r.get("known", []))
    if known:
        out.append("known-bug features used by failing programs: " +
                   ", ".join(f"{k} {n}" for k, n in known.most_common()))
    invalid = collections.Counter(r.get("note", "")[:100] for r in results
                                  if r["status"] == "invalid")
    if invalid:
        out.append("invalid programs by reason:")
        out += [f"  {n:>5}  {why}" for why, n in invalid.most_common(10)]
    return "\n".join(out)
