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
from callback_timeline import (
    all_partitions,
    wait_for_balanced,
)
from consumer_support import (
    CONVERGENCE_S,
    SESSION_TIMEOUT_S,
    ConsumerFactory,
    check_extras,
    make_consumer_fixture,  # noqa: F401 - the make_consumer fixture
)
from member_thread import (
    Group,
    MemberThread,
)

from tests.support import OURS, wait_until

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


@pytest.mark.timeout(60)
def test_poll_interval_counts_from_the_last_poll_call(
    make_consumer: ConsumerFactory,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    """As in Java: the member leaves ``max.poll.interval.ms`` after the last ``poll()`` call.

    The consumer reports polls to its member at most every quarter interval; the member must
    still count from the last call itself, never from an earlier report, or it leaves early.
    """
    topic = create_topic(partitions=1)
    consumer = make_consumer(
        {
            "group.id": unique_name("group"),
            "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
            "auto.offset.reset": "earliest",
        },
        impl=OURS,
    )
    consumer.subscribe([topic])
    wait_until(
        lambda: consumer.poll(0.05) is None and consumer.state == "STABLE",
        CONVERGENCE_S,
        "the member to be STABLE",
    )
    # Poll for a while (reports go out at their own pace), then stop right after one call.
    polled_until = time.monotonic() + 1.3
    while True:
        last_call = time.monotonic()
        consumer.poll(0.01)
        if last_call >= polled_until:
            break
    wait_until(
        lambda: consumer.state == "STALE",
        MAX_POLL_INTERVAL_MS / 1000 + CONVERGENCE_S,
        "the member to leave after max.poll.interval.ms",
        interval_s=0.005,
    )
    left_after_s = time.monotonic() - last_call
    # The member's clock counts whole milliseconds: the call and its timestamp may differ by 1 ms.
    assert left_after_s >= MAX_POLL_INTERVAL_MS / 1000 - 0.002, (
        f"left the group {left_after_s:.3f} s after the last poll() call, "
        f"before max.poll.interval.ms ({MAX_POLL_INTERVAL_MS} ms)"
    )
