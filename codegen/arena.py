"""First-fit placement of temporaries in one workspace, by liveness (plan.py's allocator).

`Arena.alloc(size, until)` places a block at the lowest offset where it fits between the
blocks still live; `Arena.expire(t)` frees the blocks whose last use is at or before unit `t`.
Free space is kept as a sorted list of gaps below the highest live block, so a placement
costs the number of gaps (not the number of live blocks, as a scan of the live blocks did:
quadratic in a long program, whose saved forward values all stay live for its backward).
"""
from __future__ import annotations

import bisect
import heapq


class Arena:
    def __init__(self):
        self.size = 0            # the high-water mark: the workspace bytes needed
        self._top = 0            # the end of the highest live block
        self._starts: list = []  # free gaps below _top, sorted: starts and matching ends
        self._ends: list = []
        self._expiry: list = []  # heap of (last use, offset, size)

    def alloc(self, size: int, until: int) -> int:
        """The offset of a new block of `size` bytes, live until unit `until` (inclusive)."""
        for k, (s, e) in enumerate(zip(self._starts, self._ends)):
            if e - s >= size:
                off = s
                if e - s == size:
                    del self._starts[k], self._ends[k]
                else:
                    self._starts[k] = s + size
                break
        else:
            off = self._top
            self._top += size
            self.size = max(self.size, self._top)
        heapq.heappush(self._expiry, (until, off, size))
        return off

    def expire(self, t: int) -> None:
        """Free every block whose last use is at or before unit `t`."""
        while self._expiry and self._expiry[0][0] <= t:
            _, off, size = heapq.heappop(self._expiry)
            self._free(off, off + size)

    def _free(self, s: int, e: int) -> None:
        k = bisect.bisect_left(self._starts, s)
        if k < len(self._starts) and self._starts[k] == e:  # merge with the gap after
            e = self._ends[k]
            del self._starts[k], self._ends[k]
        if k > 0 and self._ends[k - 1] == s:  # ... and the one before
            k -= 1
            s = self._starts[k]
            del self._starts[k], self._ends[k]
        if e == self._top:  # the highest block: the top comes down to the gap's start
            self._top = s
        else:
            self._starts.insert(k, s)
            self._ends.insert(k, e)
