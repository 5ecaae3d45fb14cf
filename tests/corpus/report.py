"""`python -m tests.corpus.report [names...]`: one line per corpus program: ok or the error,
first-call and warm-call times, the path and any warnings."""
import sys
import traceback

from tests.corpus.check import run
from tests.corpus.programs import PROGRAMS


def main(argv):
    sel = [p for p in PROGRAMS if not argv or p.name in argv]
    ok = 0
    for p in sel:
        try:
            r = run(p)
        except Exception as e:  # noqa: BLE001 - a report, not a test
            tb = traceback.extract_tb(e.__traceback__)[-1]
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:150]
            print(f"FAIL {p.name:34s} {msg}  [{tb.filename.split('/')[-1]}:{tb.lineno}]")
            continue
        ok += 1
        w = f" warnings: {r['warnings']}" if r["warnings"] else ""
        print(f"ok   {p.name:34s} first {r['first']*1e3:7.0f} ms  again {r['again']*1e6:8.0f} us"
              f"  {r['path'][:40]}{w}")
    print(f"{ok}/{len(sel)} ok")


if __name__ == "__main__":
    main(sys.argv[1:])
