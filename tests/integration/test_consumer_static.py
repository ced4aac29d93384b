"""Static membership: a member with ``group.instance.id`` restarts within the session timeout.

Closing a static member sends a "leave but will come back" heartbeat (epoch -2): the broker keeps
its assignment for the session timeout. A new Consumer object with the same instance id that
joins within that window gets the same partitions back, and the rest of the group never notices:
the other member sees no revocation or assignment callback between the close and the moment the
group is stable again (checked with the admin client's group description, not with a sleep).
While the member is away (two seconds, four heartbeat intervals: a dynamic member's partitions
would have moved by then) the broker's description must keep showing its instance id holding
its partitions.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from callback_timeline import (
    CallbackEvent,
    Partition,
    all_partitions,
    wait_for_balanced,
)
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient
from consumer_support import (
    CONVERGENCE_S,
    HEARTBEAT_INTERVAL_S,
    SESSION_TIMEOUT_S,
    ConsumerFactory,
    check_extras,
    make_consumer_fixture,  # noqa: F401 - the make_consumer fixture
)
from member_thread import (
    Group,
    MemberThread,
)

from tests.support import (
    holds_for,
    wait_until,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4
DOWNTIME_S = 4 * HEARTBEAT_INTERVAL_S


def group_settled(admin: AdminClient, group_id: str, members: int) -> bool:
    """The broker sees ``members`` members, each holding exactly its target assignment."""
    description = admin.describe_consumer_groups([group_id])[group_id].result(timeout=10)
    if description.state != ConsumerGroupState.STABLE or len(description.members) != members:
        return False
    for member in description.members:
        current = {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions}
        target = member.target_assignment
        if target is None or current != {
            (tp.topic, tp.partition) for tp in target.topic_partitions
        }:
            return False
    return True


def instance_assignment(admin: AdminClient, group_id: str, instance_id: str) -> set[Partition]:
    """What the broker holds for ``instance_id`` (empty if it is not a member)."""
    description = admin.describe_consumer_groups([group_id])[group_id].result(timeout=10)
    for member in description.members:
        if member.group_instance_id == instance_id:
            return {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions}
    return set()


@pytest.mark.timeout(120)
def test_static_member_restart_gets_same_partitions_without_rebalance(
    make_consumer: ConsumerFactory,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    topic = create_topic(partitions=PARTITIONS)
    group_id = unique_name("group")
    instance_id = unique_name("instance")
    everything = all_partitions(topic, PARTITIONS)
    base = {"group.id": group_id, "auto.offset.reset": "earliest"}
    group = Group()

    def other_callbacks_since(since: float) -> list[CallbackEvent]:
        return [e for e in group.timeline.events("other") if e.at >= since and e.partitions]

    try:
        static = group.add(
            MemberThread(
                "static",
                make_consumer({**base, "group.instance.id": instance_id}),
                [topic],
                group.timeline,
            )
        )
        group.add(MemberThread("other", make_consumer(base), [topic], group.timeline))
        before = wait_for_balanced(group.timeline, ["static", "other"], everything)
        wait_until(lambda: group_settled(admin, group_id, 2), CONVERGENCE_S, "a stable group")
        check_extras(make_consumer, static.consumer, state="STABLE")
        held: set[Partition] = before["static"]

        closed_at = time.monotonic()
        static.stop()  # close(): temporary leave (epoch -2), assignment kept by the broker

        def broker_keeps_the_seat() -> bool:
            seat = instance_assignment(admin, group_id, instance_id)
            return seat == held and not other_callbacks_since(closed_at)

        # The application is down for a while: long enough (4 heartbeat intervals) that a
        # dynamic member's partitions would have moved, short of the session timeout.
        holds_for(
            broker_keeps_the_seat,
            DOWNTIME_S,
            "the broker keeping the static member's partitions while it is away",
            details=group.timeline.dump,
        )
        restarted = group.add(
            MemberThread(
                "restarted",
                make_consumer({**base, "group.instance.id": instance_id}),
                [topic],
                group.timeline,
            )
        )
        wait_until(
            lambda: group.timeline.owned("restarted") == held,
            SESSION_TIMEOUT_S,
            "the restarted member to get its partitions back within the session timeout",
            details=group.timeline.dump,
        )
        assert time.monotonic() - closed_at < SESSION_TIMEOUT_S
        wait_until(lambda: group_settled(admin, group_id, 2), CONVERGENCE_S, "a stable group")
        check_extras(make_consumer, restarted.consumer, state="STABLE")

        assert not other_callbacks_since(closed_at), (
            "the other member must not notice a static restart\n" + group.timeline.dump()
        )
        assert group.timeline.owned("other") == before["other"]
    finally:
        group.stop_all()
    group.timeline.assert_revoke_before_assign()
    group.assert_callbacks_on_poll_threads()
