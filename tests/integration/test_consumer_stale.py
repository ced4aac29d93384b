"""STALE: an application that stops polling for longer than ``max.poll.interval.ms``.

The member must drop out of the group (so another member gets its partitions), call ``on_lost``
(not ``on_revoke``: it no longer owns them when it learns about it) on the thread that calls
``poll()`` next, and then rejoin, after which the group is balanced again.

librdkafka has no separate hook when ``on_lost`` is unset (it then calls ``on_revoke``), so the
test passes ``on_lost`` explicitly. Timing differs by design: Java (and our member) leave the group
as soon as the interval expires; librdkafka stops heartbeating and is evicted after the session
timeout. The bound below covers both.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from consumer_support import (
    CONVERGENCE_S,
    SESSION_TIMEOUT_S,
    ConsumerFactory,
    Group,
    MemberThread,
    all_partitions,
    check_extras,
    make_consumer_fixture,  # noqa: F401 - the make_consumer fixture
    wait_for_balanced,
    wait_until,
)

pytestmark = pytest.mark.integration

MAX_POLL_INTERVAL_MS = 2000


@pytest.mark.timeout(120)
def test_member_that_stops_polling_loses_partitions_and_rejoins(
    make_consumer: ConsumerFactory,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    topic = create_topic(partitions=2)
    group_id = unique_name("group")
    everything = all_partitions(topic, 2)
    base = {"group.id": group_id, "auto.offset.reset": "earliest"}
    group = Group()
    try:
        slow = group.add(
            MemberThread(
                "slow",
                make_consumer({**base, "max.poll.interval.ms": MAX_POLL_INTERVAL_MS}),
                [topic],
                group.timeline,
            )
        )
        group.add(MemberThread("other", make_consumer(base), [topic], group.timeline))
        before = wait_for_balanced(group.timeline, ["slow", "other"], everything)
        held = before["slow"]

        paused_at = time.monotonic()
        slow.pause_polling.set()  # the application is busy elsewhere: no poll() calls
        wait_until(
            lambda: group.timeline.owned("other") == everything,
            MAX_POLL_INTERVAL_MS / 1000 + SESSION_TIMEOUT_S + CONVERGENCE_S,
            "the other member to take over the stale member's partitions",
            details=group.timeline.dump,
        )
        assert time.monotonic() - paused_at >= MAX_POLL_INTERVAL_MS / 1000
        assert group.timeline.count("slow", ["assign", "revoke", "lost"], since=paused_at) == 0, (
            "no callback may run while the application does not poll\n" + group.timeline.dump()
        )
        check_extras(make_consumer, slow.consumer, state="STALE")

        resumed_at = time.monotonic()
        slow.pause_polling.clear()
        wait_until(
            lambda: group.timeline.count("slow", ["lost"], since=resumed_at) > 0,
            CONVERGENCE_S,
            "on_lost on the next poll()",
            details=group.timeline.dump,
        )
        lost = [e for e in group.timeline.events("slow") if e.kind == "lost"]
        assert [set(e.partitions) for e in lost] == [held], group.timeline.dump()
        revoked_late = [
            e for e in group.timeline.events("slow") if e.kind == "revoke" and e.at >= paused_at
        ]
        assert not revoked_late, "lost partitions are reported by on_lost, not on_revoke"

        wait_for_balanced(group.timeline, ["slow", "other"], everything)
        check_extras(make_consumer, slow.consumer)
        group.assert_callbacks_on_poll_threads()
    finally:
        group.stop_all()
    group.timeline.assert_revoke_before_assign(except_lost=True)
