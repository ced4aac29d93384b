"""The KIP-848 case studies at full stack: real broker, real members, callbacks on poll threads.

Each test records every member's ``on_assign``/``on_revoke``/``on_lost`` with
``time.monotonic()`` and asserts from that timeline that (1) a partition is revoked by its old
owner before it is assigned to its new one (no two live members own it at once), and (2) the
group converges to an assignment that covers all partitions with sizes differing by at most one.
Where the broker's sticky ``uniform`` assignor makes it exact, it also asserts that only the
partitions the newcomer ends up with moved.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from callback_timeline import (
    Partition,
    all_partitions,
    wait_for_balanced,
)
from child_member import (
    ChildMember,
)
from confluent_kafka.admin import AdminClient, NewPartitions
from consumer_support import (
    CONVERGENCE_S,
    SESSION_TIMEOUT_S,
    ConsumerFactory,
    check_extras,
    make_consumer_fixture,  # noqa: F401 - the make_consumer fixture
    wait_for_stable_epochs,
)
from member_thread import (
    Group,
    MemberThread,
)

from tests.support import (
    wait_until,
)

pytestmark = pytest.mark.integration


def member_config(group_id: str) -> dict[str, object]:
    return {"group.id": group_id, "auto.offset.reset": "earliest", "enable.auto.commit": False}


def join(group: Group, factory: ConsumerFactory, name: str, group_id: str, topic: str) -> float:
    """Start member ``name``; return the time just before it subscribed."""
    at = time.monotonic()
    group.add(MemberThread(name, factory(member_config(group_id)), [topic], group.timeline))
    return at


def revoked_since(group: Group, since: float) -> list[Partition]:
    return [
        part
        for event in group.timeline.events()
        if event.kind == "revoke" and event.at >= since
        for part in event.partitions
    ]


@pytest.mark.timeout(120)
def test_three_members_join_one_by_one_on_three_partitions(
    make_consumer: ConsumerFactory,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    """Case study "Basic": A, B, then C join a 3-partition topic; one partition moves each time."""
    topic = create_topic(partitions=3)
    group_id = unique_name("group")
    everything = all_partitions(topic, 3)
    group = Group()
    try:
        join(group, make_consumer, "A", group_id, topic)
        wait_for_balanced(group.timeline, ["A"], everything)

        joined_b = join(group, make_consumer, "B", group_id, topic)
        after_b = wait_for_balanced(group.timeline, ["A", "B"], everything)
        assert sorted(revoked_since(group, joined_b)) == sorted(after_b["B"]), (
            "only the partition B ends up with may be revoked from A\n" + group.timeline.dump()
        )

        joined_c = join(group, make_consumer, "C", group_id, topic)
        final = wait_for_balanced(group.timeline, ["A", "B", "C"], everything)
        assert sorted(revoked_since(group, joined_c)) == sorted(final["C"]), (
            "only the partition C ends up with may be revoked\n" + group.timeline.dump()
        )
        assert all(len(parts) == 1 for parts in final.values()), final

        consumers = [m.consumer for m in group.members.values()]
        wait_for_stable_epochs(make_consumer, consumers)
        for consumer in consumers:
            check_extras(make_consumer, consumer, state="STABLE")
        assert group.timeline.count("A", ["lost"]) == 0, group.timeline.dump()
    finally:
        group.stop_all()
    group.timeline.assert_revoke_before_assign()
    group.assert_callbacks_on_poll_threads()


@pytest.mark.timeout(120)
def test_third_member_joins_two_members_on_six_partitions(
    make_consumer: ConsumerFactory,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    """Case study "Incremental Revocation & Assignment": A and B each give one partition to C."""
    topic = create_topic(partitions=6)
    group_id = unique_name("group")
    everything = all_partitions(topic, 6)
    group = Group()
    try:
        join(group, make_consumer, "A", group_id, topic)
        join(group, make_consumer, "B", group_id, topic)
        before = wait_for_balanced(group.timeline, ["A", "B"], everything)
        assert sorted(len(p) for p in before.values()) == [3, 3]

        joined_c = join(group, make_consumer, "C", group_id, topic)
        final = wait_for_balanced(group.timeline, ["A", "B", "C"], everything)
        assert all(len(parts) == 2 for parts in final.values()), final
        revoked = revoked_since(group, joined_c)
        assert sorted(revoked) == sorted(final["C"]), group.timeline.dump()
        for name in ("A", "B"):
            assert final[name] <= before[name], (
                f"{name} keeps the rest of what it had (sticky); nothing else moves\n"
                + group.timeline.dump()
            )
        wait_for_stable_epochs(make_consumer, [m.consumer for m in group.members.values()])
    finally:
        group.stop_all()
    group.timeline.assert_revoke_before_assign()
    group.assert_callbacks_on_poll_threads()


@pytest.mark.timeout(150)
def test_killed_member_partitions_move_after_session_timeout(
    make_consumer: ConsumerFactory,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    """Case study "Member Failure": A is SIGKILLed (no leave); after the session timeout B and C
    take its partitions."""
    topic = create_topic(partitions=6)
    group_id = unique_name("group")
    everything = all_partitions(topic, 6)
    group = Group()
    child = ChildMember(
        "A", tmp_path, make_consumer.config_for_child(member_config(group_id)), [topic]
    )
    try:
        wait_until(
            lambda: len(child.owned()) == 6,
            CONVERGENCE_S,
            "A (child) to own all 6",
            details=child.failure_text,
        )
        join(group, make_consumer, "B", group_id, topic)
        join(group, make_consumer, "C", group_id, topic)

        def three_way() -> bool:
            owned = group.timeline.assignment(["B", "C"])
            owned["A"] = child.owned()
            sizes = sorted(len(p) for p in owned.values())
            return sizes == [2, 2, 2] and set().union(*owned.values()) == everything

        wait_until(
            three_way,
            CONVERGENCE_S,
            "a 2/2/2 assignment over A, B, C",
            details=lambda: group.timeline.dump() + "\n" + child.failure_text(),
        )
        assert child.process.poll() is None, "the child member died on its own"
        lost_partitions = child.owned()

        killed_at = child.kill()
        group.timeline.merge_child_events("A", child.events)
        group.timeline.mark_killed("A", killed_at)

        final = wait_for_balanced(
            group.timeline, ["B", "C"], everything, timeout_s=SESSION_TIMEOUT_S + CONVERGENCE_S
        )
        assert sorted(len(p) for p in final.values()) == [3, 3]
        took_over = [
            e.at
            for e in group.timeline.events()
            if e.kind == "assign" and e.member in ("B", "C") and set(e.partitions) & lost_partitions
        ]
        delay = min(took_over) - killed_at
        assert delay >= SESSION_TIMEOUT_S - 2 * 0.5 - 0.5, (
            f"A's partitions moved {delay:.1f}s after the kill: sooner than the session timeout, "
            "so something other than session expiry released them"
        )
        for name in ("B", "C"):
            assert group.timeline.count(name, ["lost", "revoke"], since=killed_at) == 0, (
                f"{name} should only gain partitions\n" + group.timeline.dump()
            )
    finally:
        child.ensure_dead()
        group.stop_all()
    group.timeline.assert_revoke_before_assign()
    group.assert_callbacks_on_poll_threads()


@pytest.mark.timeout(120)
def test_partitions_added_are_picked_up(
    make_consumer: ConsumerFactory,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    """Case study "Partition Added": foo grows from 1 to 4 partitions; A and B end with 2 each."""
    topic = create_topic(partitions=1)
    group_id = unique_name("group")
    group = Group()
    try:
        join(group, make_consumer, "A", group_id, topic)
        join(group, make_consumer, "B", group_id, topic)
        wait_for_balanced(group.timeline, ["A", "B"], all_partitions(topic, 1))
        before = group.timeline.assignment(["A", "B"])

        futures = admin.create_partitions([NewPartitions(topic, 4)], operation_timeout=30)
        futures[topic].result(timeout=30)

        final = wait_for_balanced(group.timeline, ["A", "B"], all_partitions(topic, 4))
        assert sorted(len(p) for p in final.values()) == [2, 2]
        owner_of_0 = next(name for name, parts in before.items() if (topic, 0) in parts)
        assert (topic, 0) in final[owner_of_0], "adding partitions must not move foo-0"
        wait_for_stable_epochs(make_consumer, [m.consumer for m in group.members.values()])
    finally:
        group.stop_all()
    group.timeline.assert_revoke_before_assign()
    group.assert_callbacks_on_poll_threads()
