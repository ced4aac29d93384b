"""An idle STABLE member's ``poll()`` waits in long slices, and a rebalance still reaches it.

librdkafka's poll cannot be woken from another thread, so ``poll()`` waits in slices. While the
member is STABLE with nothing in flight, the background promises quiet until its next timer
(``consumer._bridge.quiet``) and ``poll()`` waits up to 250 ms at a time instead of 10 ms; a
heartbeat in flight ends the promise, so an assignment change in its answer is served as fast
as before. This drives our ``Consumer`` (the slices are ours; confluent's poll has none).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from consumer_support import CONVERGENCE_S

from consumer import Consumer
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

IDLE_S = 3.0


def poll_for(consumer: Consumer, seconds: float) -> None:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        assert consumer.poll(min(left, 0.5)) is None


def test_an_idle_stable_member_waits_in_long_slices_and_still_rebalances(
    kafka_bootstrap: str, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic = create_topic(partitions=2)
    group = unique_name("idle")
    config = {"bootstrap.servers": kafka_bootstrap, "group.id": group}
    first = Consumer(config)
    second = Consumer(config)
    revoked: list[list[int]] = []
    try:
        first.subscribe(
            [topic], on_revoke=lambda _c, parts: revoked.append([p.partition for p in parts])
        )
        wait_until(
            lambda: (
                first.poll(0.1) is None and first.state == "STABLE" and len(first.assignment()) == 2
            ),
            CONVERGENCE_S,
            "the first member STABLE with both partitions",
        )

        waits: list[float] = []
        dataplane: Any = first._dataplane  # noqa: SLF001 - counting librdkafka waits
        real_poll = dataplane.poll

        def counted_poll(timeout_s: float) -> Any:
            waits.append(timeout_s)
            return real_poll(timeout_s)

        dataplane.poll = counted_poll
        poll_for(first, IDLE_S)
        # With 10 ms slices every wait is short. Now the waits up to each heartbeat (every
        # 500 ms here) are long, and only those while a heartbeat is in flight (a few ms, more
        # on a loaded machine) are short: most of the idle time is spent in long waits.
        long_s = sum(w for w in waits if w >= 0.05)
        shown = [round(w, 3) for w in waits]
        assert long_s >= IDLE_S / 2, f"{long_s:.2f} s of {IDLE_S} s in long waits: {shown}"
        assert max(waits) >= 0.2, shown

        # A second member joins while the first sits in poll(): the first gives one partition
        # up (on_revoke on its thread) and both settle on one partition each.
        second.subscribe([topic])

        def balanced() -> bool:
            first.poll(0.1)
            second.poll(0.1)
            return (
                len(first.assignment()) == 1
                and len(second.assignment()) == 1
                and first.state == second.state == "STABLE"
            )

        wait_until(balanced, CONVERGENCE_S, "one partition each", interval_s=0)
        assert [len(parts) for parts in revoked] == [1], revoked
    finally:
        second.close()
        first.close()
