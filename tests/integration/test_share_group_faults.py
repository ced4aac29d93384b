"""``consumer.ShareConsumer`` members that die or freeze, against a real Kafka 4.3 broker.

A member process SIGKILLed while it holds records acknowledges nothing; the records come back to
the surviving member with delivery count 2. When the kernel closes the dead process's sockets (a
plain kill on one host) the broker drops its share session and releases them at once, long
before their lock would expire. When its connections stay open and silent (its host lost; here a
forked keeper process holds the sockets) nobody releases them: they come back only when their
acquisition lock (the group's ``share.record.lock.duration.ms``) expires, not before.

A member process SIGSTOPped for
longer than the broker's ``group.share.session.timeout.ms`` is removed by the coordinator and its
partitions go to the other member; after SIGCONT it stops fetching, rejoins with its member id
(a new member epoch, seen with ShareGroupDescribe) and consumes again.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from confluent_kafka.admin import AdminClient
from share_consumer_support import (
    PollingMember,
    ShareChildren,
    ShareConsumers,
    broker_config,
    describe_share_group,
    produce,
    share_children_fixture,  # noqa: F401 - the share_children fixture
    share_config,
    share_consumers_fixture,  # noqa: F401 - the share_consumers fixture
    share_group,
)

from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

#: Time between the broker acquiring a record and the child's poll() returning it; the lower
#: bound on a redelivery at lock expiry is the lock duration minus this.
HANDOFF_MARGIN_S = 0.5
#: How late after the lock's expiry the survivor may get the records (its fetch long-polls).
EXPIRY_SLACK_S = 10.0


@dataclass(frozen=True)
class KillTimes:
    """``time.monotonic()`` stamps of one SIGKILL run."""

    acquired_at: float  # the holder's poll() returned the records
    survivor_assigned_at: float  # ShareGroupDescribe showed the survivor with the partition
    killed_at: float
    redelivered_at: float  # the survivor's first poll() with one of them


def kill_holder_and_collect(
    kafka_bootstrap: str,
    topic: str,
    group_id: str,
    share_consumers: ShareConsumers,
    share_children: ShareChildren,
    *,
    keep_connections: bool,
) -> KillTimes:
    """A child holds records 0..9 of ``topic`` and is SIGKILLed once a survivor is assigned
    the partition; all ten must come back to the survivor with delivery count 2."""
    produce(kafka_bootstrap, topic, 10)
    holder = share_children.start(
        "holder",
        {
            "config": share_config(kafka_bootstrap, group_id),
            "topics": [topic],
            "mode": "hold",
            "hold_count": 10,
            "keep_connections": keep_connections,
        },
    )
    wait_until(lambda: holder.events("held"), 30, "the child holding 10 records", holder.details)
    keeper = holder.events("held")[0]["keeper"]
    if keeper is not None:
        share_children.adopt(keeper)
    received = holder.records()
    acquired_at = min(mono for mono, _ in received)
    assert sorted((r[1], r[3]) for _, r in received) == [(o, 1) for o in range(10)]

    survivor = PollingMember("survivor", share_consumers(group_id), [topic]).start()
    survivor_id = survivor.consumer.memberid()

    def survivor_assigned() -> bool:
        member = describe_share_group(kafka_bootstrap, group_id).get(survivor_id)
        return member is not None and (topic, 0) in member.partitions

    wait_until(survivor_assigned, 30, "the survivor assigned the partition", interval_s=0.1)
    assigned_at = time.monotonic()
    assert survivor.received() == [], "the held records went nowhere while their holder lived"

    killed_at = holder.signal(signal.SIGKILL)
    holder.process.wait(timeout=10)
    wait_until(
        lambda: len(survivor.received()) >= 10,
        30,
        "the killed member's records at the survivor",
        lambda: f"survivor got {survivor.received()} errors {survivor.errors}",
    )
    survivor.stop()
    back = survivor.received()
    assert survivor.errors == []
    assert sorted((d.offset, d.delivery_count) for d in back) == [(o, 2) for o in range(10)]
    return KillTimes(acquired_at, assigned_at, killed_at, min(d.at_mono for d in back))


def test_records_of_a_killed_member_are_released_when_its_connections_close(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    share_consumers: ShareConsumers,
    share_children: ShareChildren,
) -> None:
    """The kernel closes a killed process's sockets; the broker then drops its share session
    and releases what it held at once (delivery count 2), long before the 15 s lock expires."""
    lock_s = 15.0
    topic = create_topic(partitions=1)
    group_id = share_group(
        admin, unique_name, share_record_lock_duration_ms=str(int(lock_s * 1000))
    )
    run = kill_holder_and_collect(
        kafka_bootstrap, topic, group_id, share_consumers, share_children, keep_connections=False
    )
    after_kill_s = run.redelivered_at - run.killed_at
    assert after_kill_s < 5.0, f"redelivered {after_kill_s:.2f} s after the kill"
    held_s = run.redelivered_at - run.acquired_at
    assert held_s < lock_s - 5.0, f"redelivered {held_s:.2f} s after acquisition: expired?"


def test_records_of_a_killed_member_come_back_after_their_lock_expires(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    share_consumers: ShareConsumers,
    share_children: ShareChildren,
) -> None:
    """Killed with its connections left open (its host lost): nobody releases the records, so
    they come back only when their acquisition lock expires, not before."""
    lock_s = 4.0
    topic = create_topic(partitions=1)
    group_id = share_group(
        admin, unique_name, share_record_lock_duration_ms=str(int(lock_s * 1000))
    )
    run = kill_holder_and_collect(
        kafka_bootstrap, topic, group_id, share_consumers, share_children, keep_connections=True
    )
    # The survivor was in place (and the holder dead) well before the lock could expire, so a
    # redelivery at the kill would have been seen.
    assigned_s = run.survivor_assigned_at - run.acquired_at
    killed_s = run.killed_at - run.acquired_at
    assert max(assigned_s, killed_s) < lock_s - 1.0, (
        f"survivor assigned {assigned_s:.2f} s and kill {killed_s:.2f} s after the acquisition: "
        "too late to tell lock expiry from release"
    )
    waited_s = run.redelivered_at - run.acquired_at
    assert waited_s >= lock_s - HANDOFF_MARGIN_S, (
        f"redelivered {waited_s:.2f} s after acquisition (kill at {killed_s:.2f} s), before "
        f"the {lock_s} s lock could expire"
    )
    assert waited_s <= lock_s + EXPIRY_SLACK_S, f"redelivered only after {waited_s:.2f} s"


def test_a_member_paused_past_the_session_timeout_is_removed_and_rejoins(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    share_consumers: ShareConsumers,
    share_children: ShareChildren,
) -> None:
    session_timeout_s = int(broker_config(admin, "group.share.session.timeout.ms")) / 1000
    heartbeat_s = int(broker_config(admin, "group.share.heartbeat.interval.ms")) / 1000
    topic = create_topic(partitions=2)
    group_id = share_group(admin, unique_name, share_record_lock_duration_ms="3000")
    produce(kafka_bootstrap, topic, 40, partitions=2)
    paused = share_children.start(
        "paused",
        {
            "config": share_config(kafka_bootstrap, group_id, **{"max.poll.records": 5}),
            "topics": [topic],
            "mode": "consume",
        },
    )
    wait_until(paused.records, 30, "the child consuming", paused.details)
    paused_id = paused.member_id()
    assert paused_id is not None
    other = PollingMember("other", share_consumers(group_id), [topic]).start()
    other_id = other.consumer.memberid()

    def group() -> str:
        return f"group: {describe_share_group(kafka_bootstrap, group_id)}\n{paused.details()}"

    def both_assigned() -> bool:
        members = describe_share_group(kafka_bootstrap, group_id)
        return all(
            member_id in members and members[member_id].partitions
            for member_id in (paused_id, other_id)
        )

    wait_until(both_assigned, 30, "both members assigned", group, interval_s=0.2)
    before = describe_share_group(kafka_bootstrap, group_id)[paused_id]

    stopped_at = paused.signal(signal.SIGSTOP)

    def paused_removed() -> bool:
        members = describe_share_group(kafka_bootstrap, group_id)
        return paused_id not in members

    removed_after_s = wait_until(
        paused_removed, session_timeout_s + 15, "the paused member removed", group, interval_s=0.2
    )
    # The coordinator counts from the last heartbeat, at most one interval before the stop.
    assert removed_after_s >= session_timeout_s - heartbeat_s - 0.5, (
        f"removed {removed_after_s:.2f} s after the stop, before the {session_timeout_s} s "
        "session timeout"
    )
    wait_until(
        lambda: (
            describe_share_group(kafka_bootstrap, group_id)[other_id].partitions
            >= before.partitions
        ),
        30,
        "the paused member's partitions at the other member",
        group,
        interval_s=0.2,
    )
    assert paused.events(None)[-1]["mono"] < stopped_at, "the stopped child wrote nothing"

    continued_at = paused.signal(signal.SIGCONT)

    def rejoined() -> bool:
        member = describe_share_group(kafka_bootstrap, group_id).get(paused_id)
        return member is not None and member.member_epoch > 0 and bool(member.partitions)

    wait_until(rejoined, 30, "the paused member back in the group", group, interval_s=0.2)
    after = describe_share_group(kafka_bootstrap, group_id)[paused_id]
    assert after.member_epoch > before.member_epoch, (before, after)

    # Share groups have no revocation: until the other member's next heartbeat tells it that
    # it lost a partition (and its fetch in flight returns), it may still acquire that
    # partition's new records, legitimately. So new records keep coming, in small batches,
    # until the rejoined member gets some.
    next_number = 1000

    def paused_consumed_new_records() -> bool:
        nonlocal next_number
        if any(mono > continued_at and int(r[2][1:]) >= 1000 for mono, r in paused.records()):
            return True
        produce(kafka_bootstrap, topic, 10, start=next_number, partitions=2, batch_records=5)
        next_number += 10
        return False

    def group_and_other() -> str:
        taken = Counter(d.partition for d in other.received() if d.number >= 1000)
        return f"{group()}\nnew records the other member got, by partition: {dict(taken)}"

    wait_until(
        paused_consumed_new_records,
        30,
        "the rejoined member consuming new records",
        group_and_other,
        interval_s=0.3,
    )
    other.stop()
    assert other.errors == []

    # After SIGCONT: the member stopped fetching everything it had (told by the fenced
    # heartbeat) and fetched nothing until its new assignment was applied.
    late = [e for e in paused.events() if e["mono"] > continued_at]
    stops = [i for i, e in enumerate(late) if e["kind"] == "dp_stop" and e["remaining"] == []]
    assert stops, f"no stop of the old assignment after SIGCONT: {late[:20]}"
    assigns = [i for i, e in enumerate(late) if e["kind"] == "dp_assign" and i > stops[0]]
    assert assigns, f"no new assignment after the stop: {late[:40]}"
    between = late[stops[0] + 1 : assigns[0]]
    fetching = [e for e in between if e["kind"] == "dp_fetch" and e["partitions"]]
    assert fetching == [], f"fetched between the stop and the new assignment: {fetching}"
