"""Group behaviour an application relies on, checked identically on the real ``Consumer``
(against the session broker) and on ``FakeConsumer`` (on a ``SimCluster``): a second member
joining moves partitions incrementally, ``close()`` and ``unsubscribe()`` hand everything to the
member that stays, no partition is owned by two members at once and no member returns records of
a partition it does not own, while records keep arriving.

Each test runs once per backend (``[real]`` and ``[fake]``, see ``conftest.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from tests.behaviour.backends import (
    Backend,
    Member,
    Ownership,
    config,
    partitions_of,
    poll_for,
    poll_until,
    wait_assigned,
)

pytestmark = pytest.mark.timeout(180)


class Feeder:
    """Produces one record (to the next partition in turn) each time it is asked whether
    ``done`` holds while it does not, so records keep arriving while the group rebalances,
    at a pace every member keeps up with."""

    def __init__(self, backend: Backend, topic: str, partitions: int) -> None:
        self.backend, self.topic, self.partitions = backend, topic, partitions
        self.produced = 0

    def until(self, done: Callable[[], bool]) -> Callable[[], bool]:
        def check() -> bool:
            if done():
                return True
            partition = self.produced % self.partitions
            self.backend.produce(self.topic, b"fed", partition=partition)
            self.produced += 1
            return False

        return check


def two_balanced_members(backend: Backend, partitions: int = 4) -> tuple[Member, Member, str]:
    """m1 alone owns every partition, then m2 joins and the group settles two and two, while
    records keep arriving on every partition."""
    topic = backend.create_topic(partitions)
    everything = partitions_of(topic, partitions)
    ownership = Ownership()
    group = backend.unique("group")
    m1 = Member("m1", backend.consumer(config(backend, group)), ownership)
    m1.subscribe([topic])
    wait_assigned(m1, everything)
    m2 = Member("m2", backend.consumer(config(backend, group)), ownership)
    m2.subscribe([topic])
    half = partitions // 2

    def balanced() -> bool:
        return (
            len(m1.owned) == half
            and len(m2.owned) == half
            and m1.owned | m2.owned == everything
            and m1.assignment() == m1.owned
            and m2.assignment() == m2.owned
        )

    feeder = Feeder(backend, topic, partitions)
    poll_until(
        [m1, m2],
        feeder.until(balanced),
        "the group to settle two and two",
        details=lambda: f"m1 {m1.callbacks}\nm2 {m2.callbacks}",
    )
    return m1, m2, topic


def test_second_member_joining_moves_partitions_incrementally(backend: Backend) -> None:
    m1, m2, topic = two_balanced_members(backend)
    everything = partitions_of(topic, 4)

    assert m1.ownership.violations == []
    # No record from a partition outside the member's assignment (after its on_revoke, before
    # its on_assign), although records arrived on every partition throughout.
    assert m1.unowned_records == []
    assert m2.unowned_records == []
    assert m1.records, "m1 returned no record while the group rebalanced"
    assert m1.owned.isdisjoint(m2.owned)
    assert m1.owned | m2.owned == everything
    # Incremental: m1 gives up only what moves and is never re-assigned what it keeps.
    assert m1.calls("assign") == [everything]
    revoked = set().union(*m1.calls("revoke"))
    assert revoked == m2.owned
    assert set().union(*m2.calls("assign")) == m2.owned
    assert m2.calls("revoke") == []
    assert all(c.inside_poll for c in m1.callbacks + m2.callbacks)


def test_close_leaves_and_the_other_member_gets_everything(backend: Backend) -> None:
    m1, m2, topic = two_balanced_members(backend)
    everything = partitions_of(topic, 4)
    leaving = set(m2.owned)

    m2.close()

    assert m2.calls("revoke")[-1] == leaving, "close() runs on_revoke for what it owned"
    assert m2.owned == set()
    feeder = Feeder(backend, topic, 4)
    poll_until(
        [m1],
        feeder.until(lambda: m1.owned == everything and m1.assignment() == everything),
        "m1 to own everything",
        details=lambda: f"m1 {m1.callbacks}",
    )
    assert m1.ownership.violations == []
    assert m1.unowned_records == []
    assert_every_partition_reaches(backend, m1, [m1], topic, b"after-close")


def test_unsubscribe_revokes_everything_and_stops_delivery(backend: Backend) -> None:
    m1, m2, topic = two_balanced_members(backend)
    everything = partitions_of(topic, 4)
    leaving = set(m2.owned)

    m2.consumer.unsubscribe()
    feeder = Feeder(backend, topic, 4)
    poll_until(
        [m1, m2],
        feeder.until(lambda: m2.assignment() == set() and m1.assignment() == everything),
        "m2 to hand everything to m1",
        details=lambda: f"m1 {m1.callbacks}\nm2 {m2.callbacks}",
    )

    assert m2.calls("revoke")[-1] == leaving
    assert m2.owned == set()
    assert m1.owned == everything
    assert m1.ownership.violations == []
    assert_every_partition_reaches(backend, m1, [m1, m2], topic, b"after-unsubscribe")
    # m2 owns nothing now, so any record it returned after its on_revoke is listed here.
    assert m2.unowned_records == [], "an unsubscribed member returned records"
    assert m1.unowned_records == []


def test_commit_in_on_revoke_hands_over_without_redelivery(backend: Backend) -> None:
    """Manual commits: m1 commits what it consumed of a partition in on_revoke, so m2 starts
    there and no record is delivered twice."""
    topic = backend.create_topic(2)
    for n in range(6):
        backend.produce(topic, b"before", partition=n % 2)
    ownership = Ownership()
    group = backend.unique("group")
    manual = config(backend, group, **{"enable.auto.commit": False})
    m1 = Member("m1", backend.consumer(manual), ownership)
    committed_in_revoke: list[list[tuple[int, int]]] = []

    def commit_revoked(consumer: Any, partitions: list[TopicPartition]) -> None:
        # The application's own record of what it processed (see the position() test below).
        done = {m.partition(): m.offset() + 1 for m in m1.records}
        offsets = [TopicPartition(topic, tp.partition, done[tp.partition]) for tp in partitions]
        result = consumer.commit(offsets=offsets, asynchronous=False)
        committed_in_revoke.append(sorted((tp.partition, tp.offset) for tp in result))

    m1.before_revoke = commit_revoked
    m1.subscribe([topic])
    poll_until([m1], lambda: len(m1.records) >= 6, "6 records on m1")
    m2 = Member("m2", backend.consumer(manual), ownership)
    m2.subscribe([topic])
    poll_until(
        [m1, m2],
        lambda: len(m1.owned) == 1 and len(m2.owned) == 1,
        "one partition each",
        details=lambda: f"m1 {m1.callbacks}\nm2 {m2.callbacks}",
    )
    [(_, moved)] = m2.owned
    assert committed_in_revoke == [[(moved, 3)]]

    for partition in (0, 1):
        backend.produce(topic, b"after", partition=partition)
    poll_until([m1, m2], lambda: len(m2.records) >= 1, "the new record on m2")
    poll_for([m1, m2], 0.5)

    assert [(m.partition(), m.offset(), m.value()) for m in m2.records] == [(moved, 3, b"after")]
    assert ownership.violations == []
    assert m1.unowned_records == []


def test_position_inside_on_revoke_is_the_next_offset(backend: Backend) -> None:
    """As confluent-kafka's (librdkafka's) member and Java's: inside on_revoke, position() is
    the next offset of each revoked partition, although fetching stopped before the callback
    (so committing positions there hands the partitions over without a gap)."""
    topic = backend.create_topic(2)
    for n in range(6):
        backend.produce(topic, b"before", partition=n % 2)
    group = backend.unique("group")
    m1 = Member("m1", backend.consumer(config(backend, group)))
    seen: list[list[tuple[int, int]]] = []
    m1.before_revoke = lambda consumer, partitions: seen.append(
        sorted((tp.partition, tp.offset) for tp in consumer.position(partitions))
    )
    m1.subscribe([topic])
    poll_until([m1], lambda: len(m1.records) >= 6, "6 records on m1")
    m2 = Member("m2", backend.consumer(config(backend, group)))
    m2.subscribe([topic])
    poll_until([m1, m2], lambda: len(m2.owned) == 1, "one partition on m2")

    [(_, moved)] = m2.owned
    assert seen == [[(moved, 3)]]


def test_a_busy_member_still_takes_over_a_leaving_members_partitions(backend: Backend) -> None:
    """Records for m1 arrive faster than it polls them (it always has one ready) when m2
    leaves: m1 still receives m2's partitions, as its heartbeats do not wait for the
    application to run out of records."""
    m1, m2, topic = two_balanced_members(backend)
    everything = partitions_of(topic, 4)
    kept = sorted(m1.owned)

    def feed_then(done: Callable[[], bool]) -> Callable[[], bool]:
        def check() -> bool:
            if done():
                return True
            for key in kept:  # two records per poll of m1
                backend.produce(topic, b"busy", partition=key[1])
            return False

        return check

    poll_until([m1], feed_then(lambda: any(m.value() == b"busy" for m in m1.records)), "a record")
    m2.close()
    poll_until(
        [m1],
        feed_then(lambda: m1.owned == everything and m1.assignment() == everything),
        "m1 to own everything while records keep arriving",
        details=lambda: f"m1 {m1.callbacks}",
    )

    assert m1.ownership.violations == []
    assert m1.unowned_records == []


def assert_every_partition_reaches(
    backend: Backend, receiver: Member, pollers: list[Member], topic: str, value: bytes
) -> None:
    """Produce ``value`` to each of the 4 partitions; all of them reach ``receiver``."""
    for partition in range(4):
        backend.produce(topic, value, partition=partition)

    def arrived() -> set[int]:
        return {m.partition() for m in receiver.records if m.value() == value}

    poll_until(pollers, lambda: arrived() == set(range(4)), f"{value!r} on every partition")
