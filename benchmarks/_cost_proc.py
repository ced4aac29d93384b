"""N idle members in this process; prints RSS and CPU measured over a steady-state window.

``python -m benchmarks._cost_proc '<json spec>'`` with ``impl`` (``ours`` or ``confluent-848``),
``members`` (0 = the baseline: just the imports), ``bootstrap``, ``topic`` (one partition per
member, no records: the members only heartbeat), ``warmup_s`` and ``window_s``. Each member has
its own thread calling ``poll(1.0)``, as an application waiting for records would.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from typing import Any

import psutil
from confluent_kafka import Consumer as ConfluentConsumer

from consumer import Consumer as OurConsumer


def main(spec: dict[str, Any]) -> dict[str, Any]:
    """Build, settle, measure; returns the measurement."""
    members = int(spec["members"])
    if spec.get("quiet_max_s") is not None:  # what-if experiments only (benchmarks.whatif)
        import consumer._client.polling as module

        module._QUIET_POLL_SLICE_MAX_S = float(spec["quiet_max_s"])
    group = f"bench-cost-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap.servers": spec["bootstrap"], "group.id": group}
    consumers: list[Any] = []
    for _ in range(members):
        if spec["impl"] == "ours":
            consumers.append(OurConsumer(config))
        else:
            consumers.append(ConfluentConsumer({**config, "group.protocol": "consumer"}))
    stop = threading.Event()

    def loop(consumer: Any) -> None:
        while not stop.is_set():
            consumer.poll(1.0)

    owned: dict[int, int] = {}  # member index -> owned partitions, from the callbacks

    def tracker(index: int) -> tuple[Any, Any]:
        def on_assign(_c: Any, partitions: list[Any]) -> None:
            owned[index] = owned.get(index, 0) + len(partitions)

        def on_revoke(_c: Any, partitions: list[Any]) -> None:
            owned[index] = owned.get(index, 0) - len(partitions)

        return on_assign, on_revoke

    # Ownership is read from the callbacks: confluent's assignment() called from another thread
    # than the one in poll() can block indefinitely.
    for index, consumer in enumerate(consumers):
        on_assign, on_revoke = tracker(index)
        consumer.subscribe([spec["topic"]], on_assign=on_assign, on_revoke=on_revoke)
    threads = [threading.Thread(target=loop, args=(c,), daemon=True) for c in consumers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60 + members
    settle_start = time.monotonic()
    while sum(owned.values()) < members:  # bounded predicate wait
        if time.monotonic() > deadline:
            raise TimeoutError("members did not settle")
        time.sleep(0.1)
    settle_s = time.monotonic() - settle_start
    time.sleep(float(spec["warmup_s"]))  # let start-up work finish before the window
    process = psutil.Process()
    # Nanosecond process CPU (every thread): psutil's cpu_times() counts 10 ms clock ticks,
    # i.e. 0.05 % of a core over a 20 s window, as large as one idle member's whole cost.
    cpu0 = time.process_time()
    wall0 = time.monotonic()
    time.sleep(float(spec["window_s"]))  # the measurement window itself
    cpu1 = time.process_time()
    wall = time.monotonic() - wall0
    rss = process.memory_info().rss
    threads_count = process.num_threads()
    stop.set()
    for thread in threads:
        thread.join(5)
    for consumer in consumers:
        consumer.close()
    cpu_s = cpu1 - cpu0
    return {
        "impl": spec["impl"],
        "members": members,
        "rss_mb": rss / 2**20,
        "cpu_pct": 100 * cpu_s / wall,
        "window_s": wall,
        "threads": threads_count,
        "settle_s": settle_s,
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
