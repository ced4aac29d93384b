"""Fetch stalls in a throughput run, and runs compared at the same number of stalls.

With librdkafka's default prefetch a partition whose local queue passed ``queued.min.messages``
or ``queued.max.messages.kbytes`` waits ``fetch.queue.backoff.ms`` (1 s) before its next fetch,
even once the application has emptied the queue (``benchmarks.fetch_stalls``; analysis,
session 15). A drain then spans a whole number of those pauses, and its rate falls into one of a
few modes, one per number of stalls: a median over runs of one way is a median over a mixture.

:class:`StallMarks` finds the stalls of one drain: a gap of more than :data:`STALL_S` between
two marks. A ``consume(n)`` drain marks every batch; a ``poll()`` drain marks its first record and
every :data:`POLL_MARK_EVERY` th, so that reading the clock costs the per-record loop one bit test
(the gap between marks then includes at most that many records' work, well under a millisecond).
Each run reports its stalls, their total, and its *busy rate*: records over the run's time less
its stalls, the rate of the client while records were there to take. :func:`by_stalls` groups a
call shape's runs by their number of stalls, so ways compare mode against mode.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.common import ratio, summary

__all__ = ["POLL_MARK_EVERY", "STALL_S", "StallMarks", "by_stalls", "run_figures"]

#: A gap between two marks longer than this is a stall (librdkafka's backoff is 1 s; a record
#: batch of the busy path comes every few milliseconds at most).
STALL_S = 0.05
#: A poll() drain marks every this many records (a power of two: ``count & (N - 1)``).
POLL_MARK_EVERY = 64


class StallMarks:
    """The marks of one drain: when the first came, the last, and the stalls between them."""

    __slots__ = ("first_s", "last_s", "stalls_s")

    def __init__(self) -> None:
        self.first_s: float | None = None
        self.last_s = 0.0
        self.stalls_s: list[float] = []

    def mark(self) -> None:
        """Records came just now."""
        now_s = time.monotonic()
        if self.first_s is None:
            self.first_s = now_s
        elif now_s - self.last_s > STALL_S:
            self.stalls_s.append(now_s - self.last_s)
        self.last_s = now_s


def run_figures(
    impl: str,
    *,
    count: int,
    total: int,
    size: int,
    start_s: float,
    assigned_s: float,
    end_s: float,
    marks: StallMarks,
) -> dict[str, Any]:
    """One run's result: rates from the assignment to the last record (whole, steady from the
    first record, busy without the stalls) and the stalls."""
    rate = ratio(count, end_s - assigned_s)
    first = marks.first_s
    stalled_s = sum(marks.stalls_s)
    return {
        "impl": impl,
        "consumed": count,
        "expected": total,
        "records_per_s": rate,
        "steady_records_per_s": ratio(max(count - 1, 0), end_s - first) if first else 0.0,
        "busy_records_per_s": ratio(count, end_s - assigned_s - stalled_s),
        "stalls": len(marks.stalls_s),
        "stalled_s": stalled_s,
        "stalls_s": [round(s, 3) for s in marks.stalls_s],
        "mb_per_s": rate * size / 1e6,
        "assigned_s": assigned_s - start_s,
        "first_record_s": (first - start_s) if first is not None else None,
        "total_s": end_s - start_s,
    }


def by_stalls(runs: Sequence[Mapping[str, Any]], shapes: Mapping[str, Sequence[str]]) -> Any:
    """Per call shape (``shapes``: its ways, the first the base) and number of stalls: each
    way's runs (summary of their rates) and its ratio of medians to the base way with the same
    number of stalls (absent when either has no run with that many)."""
    table: dict[str, dict[str, Any]] = {}
    for shape, ways in shapes.items():
        mine = [r for r in runs if r["impl"] in ways and "stalls" in r]
        counts = sorted({int(r["stalls"]) for r in mine})
        rows: dict[str, Any] = {}
        for stalls in counts:
            stats = {
                way: summary(
                    [
                        r["records_per_s"]
                        for r in mine
                        if r["impl"] == way and int(r["stalls"]) == stalls
                    ]
                )
                for way in ways
            }
            base = float(stats[ways[0]]["median"]) if stats[ways[0]]["n"] else 0.0
            rows[str(stalls)] = {
                "stats": stats,
                "ratios": {
                    way: ratio(float(stats[way]["median"]), base)
                    for way in ways[1:]
                    if base and stats[way]["n"]
                },
            }
        table[shape] = rows
    return table
