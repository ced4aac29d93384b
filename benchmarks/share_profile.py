"""cProfile of our share consumer on one throughput case, both of its threads.

``python -m benchmarks.share_profile [--mode implicit|explicit] [--count N] [--size B]
[--bootstrap HOST:PORT]`` consumes N pre-produced records with one ``consumer.ShareConsumer``
in this process, the same loop as the throughput benchmark, with one ``cProfile.Profile`` on
the application thread and one on the background (asyncio) thread, and prints the functions
with the most own time of each, plus the wall time and rate. The library is not modified: the
background thread's entry point is wrapped here. Without ``--bootstrap`` a local broker is
started.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from benchmarks.common import BrokerSet, set_share_group_configs
from benchmarks.share_throughput import GROUP_CONFIGS
from benchmarks.throughput import Workload, ensure_topic


class _StopAt:
    """Stands in for the parent's pipe: sets ``stop`` once the progress reaches ``count``."""

    def __init__(self, stop: threading.Event, count: int) -> None:
        self.stop, self.count = stop, count

    def send(self, event: Any) -> None:
        if isinstance(event, dict) and int(event.get("n", 0)) >= self.count:
            self.stop.set()


def _profiled_background() -> cProfile.Profile:
    """Wrap ``ShareRuntime._thread_main`` so the background thread runs under a profiler."""
    from consumer._share_runtime.loop import ShareRuntime

    profiler = cProfile.Profile()
    original = ShareRuntime._thread_main

    def thread_main(self: ShareRuntime) -> None:
        profiler.enable()
        try:
            original(self)
        finally:
            profiler.disable()

    ShareRuntime._thread_main = thread_main  # type: ignore[method-assign]
    return profiler


def _top(profiler: cProfile.Profile, limit: int) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(limit)
    return out.getvalue()


def profile_case(bootstrap: str, mode: str, count: int, size: int, limit: int = 25) -> str:
    """Consume ``count`` records of ``size`` B with ``mode`` acks; the two threads' profiles."""
    from benchmarks._share_proc import build, consume

    topic = ensure_topic(bootstrap, Workload(f"{size}B" if size != 1024 else "1KiB", count, size))
    group = f"bench-share-profile-{uuid.uuid4().hex[:8]}"
    set_share_group_configs(bootstrap, group, GROUP_CONFIGS)
    background = _profiled_background()
    spec = {"impl": "ours", "bootstrap": bootstrap, "group": group, "mode": mode}
    consumer: Any = build(spec)
    stop = threading.Event()
    application = cProfile.Profile()
    consumer.subscribe([topic])
    application.enable()
    outcome = consume(consumer, mode == "explicit", stop, _StopAt(stop, count))
    application.disable()
    consumer.close()
    seconds = (outcome["last"] or 0.0) - (outcome["first"] or 0.0)
    return "\n".join(
        [
            f"ours, {mode} acks, {outcome['n']:,} records of {size} B, 1 member: "
            f"{seconds:.2f} s first->last record, {outcome['n'] / seconds:,.0f} records/s "
            f"(under cProfile), {outcome['batches']} batches",
            "",
            "== application thread (poll loop) ==",
            _top(application, limit),
            "== background thread (asyncio loop: member, ShareFetch, decoding) ==",
            _top(background, limit),
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; prints the profiles."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.share_profile")
    parser.add_argument("--mode", choices=("implicit", "explicit"), default="implicit")
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--limit", type=int, default=25)
    args = parser.parse_args(argv)
    brokers = BrokerSet(fast_bootstrap=args.bootstrap)
    try:
        started = time.monotonic()
        print(profile_case(brokers.fast(), args.mode, args.count, args.size, args.limit))
        print(f"(total {time.monotonic() - started:.0f} s)")
    finally:
        brokers.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
