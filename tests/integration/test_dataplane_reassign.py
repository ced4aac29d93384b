"""A partition the data plane assigns at a logical offset, unassigns at once and assigns again at
an absolute offset starts at that offset, and stays there.

librdkafka 2.16.0 resolves a logical start offset (OFFSET_BEGINNING / OFFSET_END) with a lookup
that outlives ``incremental_unassign``: assigned again at an absolute offset while the lookup is
pending, the partition is moved back to the beginning (or the end) when the lookup lands, about
half a second later. A rebalance does exactly this: a member that joins first is given every
partition of a fresh group (nothing committed: the reset policy's logical offset), loses most
of them a few milliseconds later to members that join right after, and may get one back after
its next owner committed and left. The member then redelivered the next owner's records (the
reliability tier's ``test_graceful_leaves_and_joins`` failed that way about once in 15 runs).
``DataPlane`` now hands librdkafka absolute offsets only (``DataPlane._resolve_logical``); this
test fails on the previous data plane (its first reassignment already delivered 0-299 again
after 166-299). OFFSET_END is resolved the same way; its stale lookup skips records instead, which
this test cannot provoke reliably (it would have to land before the records are read).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Producer

from consumer._client.dataplane import DataPlane

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RECORDS = 300
RESUME_AT = 166
#: How long the stale lookup may take to land after the reassignment (measured: 0.4-0.9 s).
STALE_WINDOW_S = 1.5
#: Between the unassignment and the new assignment (the window where the race was seen).
REASSIGN_AFTER_S = 0.1


def offsets_after_reassignment(bootstrap: str, topic: str, first_start: int) -> list[int]:
    """Assign partition 0 at ``first_start``, unassign it at once, assign it again at
    RESUME_AT; the offsets returned until the end of the stale window after the last record."""
    key = (topic, 0)
    plane = DataPlane({"bootstrap.servers": bootstrap, "group.id": f"reassign-{topic}"})
    try:
        plane.assign({key: first_start})
        plane.unassign([key])
        time.sleep(REASSIGN_AFTER_S)  # the scenario: reassigned 100 ms after the unassignment
        plane.assign({key: RESUME_AT})
        offsets: list[int] = []
        deadline = time.monotonic() + 30
        quiet_until = None
        while time.monotonic() < deadline:
            message = plane.poll(0.05)
            if message is None or message.error() is not None:
                if quiet_until is not None and time.monotonic() >= quiet_until:
                    break
                continue
            offsets.append(message.offset())
            if message.offset() == RECORDS - 1:
                # The last record came: keep polling through the window where a stale lookup
                # would move the partition back (and deliver earlier records again).
                quiet_until = time.monotonic() + STALE_WINDOW_S
        return offsets
    finally:
        plane.close()


def test_a_partition_reassigned_at_once_starts_at_its_new_offset(
    kafka_bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic(partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    expected = list(range(RESUME_AT, RECORDS))
    for attempt in range(5):
        offsets = offsets_after_reassignment(kafka_bootstrap, topic, OFFSET_BEGINNING)
        assert offsets == expected, (
            f"attempt {attempt}: reassigned at {RESUME_AT}, got {len(offsets)} records "
            f"starting {offsets[:3]} (expected {RESUME_AT}..{RECORDS - 1} once)"
        )
