"""An idle share member's heartbeats do not wait behind its ShareFetch long polls (real broker).

A broker answers the requests of one connection in order, and a ShareFetch with nothing to
return waits up to ``fetch.max.wait.ms`` (500 ms) before it is answered. The share runtime
therefore sends coordinator requests (heartbeats) over a connection of their own: with the
coordinator's connection shared with the fetches, an idle member's heartbeats took 420-490 ms
each (median 446 ms, measured); on their own connection they take a few milliseconds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient
from share_consumer_support import share_config, share_group

from consumer import ShareConsumer
from consumer._share_runtime.loop import ShareRuntime
from consumer.share import SendShareHeartbeat, ShareInput

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

#: Heartbeats to time once the member fetches (the first ones join before any fetch).
STEADY_HEARTBEATS = 8
JOINING_HEARTBEATS = 3


def test_heartbeats_of_an_idle_member_do_not_queue_behind_fetch_long_polls(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = create_topic(partitions=1)  # empty: every ShareFetch of the member long-polls
    group_id = share_group(admin, unique_name)
    round_trips_s: list[float] = []
    heartbeat = ShareRuntime._heartbeat

    async def timed(
        runtime: ShareRuntime, request_id: int, command: SendShareHeartbeat
    ) -> ShareInput | None:
        started = time.monotonic()
        try:
            return await heartbeat(runtime, request_id, command)
        finally:
            round_trips_s.append(time.monotonic() - started)

    monkeypatch.setattr(ShareRuntime, "_heartbeat", timed)
    consumer = ShareConsumer(share_config(kafka_bootstrap, group_id))
    consumer.subscribe([topic])
    try:
        wanted = JOINING_HEARTBEATS + STEADY_HEARTBEATS
        deadline = time.monotonic() + 45
        while len(round_trips_s) < wanted:
            assert time.monotonic() < deadline, f"{len(round_trips_s)} of {wanted} heartbeats"
            assert len(consumer.poll(0.2)) == 0
    finally:
        consumer.close()
    steady_ms = sorted(round(s * 1000, 1) for s in round_trips_s[JOINING_HEARTBEATS:])
    assert statistics.median(steady_ms) < 100, f"heartbeat round trips (ms): {steady_ms}"
