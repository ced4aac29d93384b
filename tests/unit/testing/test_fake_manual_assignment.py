"""FakeConsumer's manual assignment (``assign()`` without ``subscribe()``) gives the results the
real Consumer gives on the broker: the same scenarios and expected values as
``tests/integration/test_manual_assignment.py`` (run there on ``consumer.Consumer`` and on
confluent-kafka), here on a :class:`SimCluster` in simulated time."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    OFFSET_STORED,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from consumer.testing import FakeConsumer, SimCluster

TOPIC = "orders"
RECORDS = 10
#: Simulated seconds a read may take before the test fails.
ARRIVAL_S = 20.0

Key = tuple[int, int]


def produce(cluster: SimCluster, partition: int, values: Iterable[int]) -> None:
    for n in values:
        cluster.produce(TOPIC, f"{partition}-{n}".encode(), partition=partition)


@pytest.fixture
def cluster() -> SimCluster:
    """A 2-partition topic holding values ``p-0 .. p-9`` in each partition."""
    made = SimCluster(seed=0)
    made.create_topic(TOPIC, 2)
    for partition in (0, 1):
        produce(made, partition, range(RECORDS))
    return made


def manual(cluster: SimCluster, **extra: Any) -> FakeConsumer:
    return cluster.consumer(
        {"group.id": "g", "enable.auto.commit": False, "auto.offset.reset": "earliest", **extra}
    )


def read(consumer: FakeConsumer, want: Callable[[list[Message]], bool], what: str) -> list[Message]:
    """Poll until ``want(records so far)``; fail after ARRIVAL_S simulated seconds."""
    records: list[Message] = []
    start_ms = consumer.cluster.clock.now_ms
    while not want(records):
        waited_s = (consumer.cluster.clock.now_ms - start_ms) / 1000
        assert waited_s < ARRIVAL_S, f"timed out waiting for {what}; got {keys(records)}"
        message = consumer.poll(0.1)
        if message is not None:
            assert message.error() is None, f"unexpected error event {message.error()}"
            records.append(message)
    return records


def keys(records: Iterable[Message]) -> list[Key]:
    return [(m.partition() or 0, m.offset() or 0) for m in records]


def of(records: Iterable[Message], partition: int) -> list[int]:
    return [offset for p, offset in keys(records) if p == partition]


def reached(partition: int, last: int) -> Callable[[list[Message]], bool]:
    return lambda records: last in of(records, partition)


def committed(consumer: FakeConsumer, partitions: int = 2) -> list[int]:
    result = consumer.committed([TopicPartition(TOPIC, p) for p in range(partitions)], timeout=30)
    return [tp.offset for tp in result]


def raised(call: Callable[[], object]) -> KafkaError:
    with pytest.raises(KafkaException) as caught:
        call()
    error = caught.value.args[0]
    assert isinstance(error, KafkaError)
    return error


def pairs(partitions: Iterable[TopicPartition] | None) -> list[tuple[int, int]]:
    return [(tp.partition, tp.offset) for tp in partitions or []]


def test_assign_read_commit_seek_reassign(cluster: SimCluster) -> None:
    consumer = manual(cluster)
    tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)

    assert consumer.assignment() == []
    assert raised(lambda: consumer.commit(asynchronous=False)).code() == KafkaError._NO_OFFSET
    assert pairs(consumer.position([tp0])) == [(0, OFFSET_INVALID)]
    assert raised(lambda: consumer.seek(TopicPartition(TOPIC, 0, 1))).code() == KafkaError._STATE

    consumer.assign([TopicPartition(TOPIC, 0, 3), TopicPartition(TOPIC, 1, OFFSET_BEGINNING)])
    assert pairs(consumer.assignment()) == [(0, 3), (1, OFFSET_BEGINNING)]
    records = read(consumer, lambda r: {9} <= set(of(r, 0)) & set(of(r, 1)), "both partitions")
    assert of(records, 0) == list(range(3, 10))
    assert of(records, 1) == list(range(10))
    assert [tp.offset for tp in consumer.position([tp0, tp1])] == [10, 10]
    assert consumer.state == "UNSUBSCRIBED"
    assert consumer.memberid() is None, "no group member is created"

    assert pairs(consumer.commit(asynchronous=False)) == [(0, 10), (1, 10)]
    assert committed(consumer) == [10, 10]
    assert pairs(consumer.commit(offsets=[TopicPartition(TOPIC, 0, 4)], asynchronous=False)) == [
        (0, 4)
    ]
    assert committed(consumer) == [4, 10]

    consumer.seek(TopicPartition(TOPIC, 1, 5))
    assert of(read(consumer, reached(1, 9), "partition 1 from 5"), 1) == list(range(5, 10))
    consumer.pause([tp0])
    consumer.seek(TopicPartition(TOPIC, 0, 8))
    produce(cluster, 1, range(RECORDS, RECORDS + 2))
    while_paused = read(consumer, reached(1, 11), "new records of partition 1")
    assert keys(while_paused) == [(1, 10), (1, 11)], "a paused partition returned records"
    consumer.resume([tp0])
    assert keys(read(consumer, reached(0, 9), "partition 0 after resume")) == [(0, 8), (0, 9)]

    consumer.incremental_unassign([tp1])
    assert pairs(consumer.assignment()) == [(0, 3)]
    assert raised(lambda: consumer.incremental_unassign([tp1])).code() == KafkaError._INVALID_ARG
    consumer.incremental_assign([tp1])
    assert raised(lambda: consumer.incremental_assign([tp1])).code() == KafkaError._CONFLICT
    assert keys(read(consumer, reached(1, 11), "partition 1 from its committed offset")) == [
        (1, 10),
        (1, 11),
    ]

    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_INVALID)])
    assert pairs(consumer.assignment()) == [(0, OFFSET_STORED)]
    assert of(read(consumer, reached(0, 9), "partition 0 from 4"), 0) == list(range(4, 10))
    assert [tp.offset for tp in consumer.position([tp0, tp1])] == [10, OFFSET_INVALID]
    consumer.unassign()
    assert consumer.assignment() == []
    consumer.close()


def test_auto_commit_of_manual_partitions(cluster: SimCluster) -> None:
    results: list[tuple[KafkaError | None, list[tuple[int, int]]]] = []

    def on_commit(error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        results.append((error, pairs(partitions)))

    consumer = manual(
        cluster,
        **{"enable.auto.commit": True, "auto.commit.interval.ms": 200, "on_commit": on_commit},
    )
    consumer.assign([TopicPartition(TOPIC, 0, 2)])
    read(consumer, reached(0, 9), "partition 0")
    for _ in range(10):
        if (None, [(0, 10)]) in results:
            break
        assert consumer.poll(0.1) is None
    assert (None, [(0, 10)]) in results, f"on_commit calls: {results}"
    assert committed(consumer, 1) == [10]
    consumer.close()

    quiet = {"enable.auto.commit": True, "auto.commit.interval.ms": 600_000}
    consumer = manual(cluster, **quiet)
    consumer.assign([TopicPartition(TOPIC, 1, 4)])
    read(consumer, reached(1, 6), "partition 1 up to 6")
    consumer.unassign()
    for _ in range(10):
        if committed(consumer)[1] == 7:
            break
        assert consumer.poll(0.1) is None
    assert committed(consumer)[1] == 7, "the commit of partition 1 on unassign()"
    consumer.assign([TopicPartition(TOPIC, 1, 7)])
    read(consumer, reached(1, 8), "partition 1 up to 8")
    consumer.close()
    assert committed(manual(cluster, **quiet)) == [10, 9], "close() commits the consumed offsets"


def test_store_offsets_commits_what_was_stored(cluster: SimCluster) -> None:
    consumer = manual(cluster, **{"enable.auto.offset.store": False})
    consumer.assign([TopicPartition(TOPIC, 1, 0)])
    records = read(consumer, lambda r: len(r) >= 4, "4 records")
    assert raised(lambda: consumer.commit(asynchronous=False)).code() == KafkaError._NO_OFFSET
    consumer.store_offsets(message=records[1])
    assert pairs(consumer.commit(asynchronous=False)) == [(1, 2)]
    consumer.store_offsets(offsets=[TopicPartition(TOPIC, 1, 3)])
    assert pairs(consumer.commit(asynchronous=False)) == [(1, 3)]
    unassigned = [TopicPartition(TOPIC, 0, 3)]
    assert raised(lambda: consumer.store_offsets(offsets=unassigned)).code() == KafkaError._STATE
    assert committed(consumer) == [OFFSET_INVALID, 3]


def test_commit_without_membership_is_refused_while_the_group_has_members(
    cluster: SimCluster,
) -> None:
    member = manual(cluster)
    member.subscribe([TOPIC])
    read(member, lambda r: len(r) >= 2 * RECORDS, "the member's records")
    assigned = manual(cluster)
    assigned.assign([TopicPartition(TOPIC, 0, 0)])
    read(assigned, lambda r: len(r) >= 1, "one record")
    error = raised(lambda: assigned.commit(asynchronous=False))
    assert error.code() == KafkaError.UNKNOWN_MEMBER_ID, error


def test_subscribe_after_unassign_joins_the_group(cluster: SimCluster) -> None:
    consumer = manual(cluster)
    consumer.assign([TopicPartition(TOPIC, 0, 5)])
    assert of(read(consumer, reached(0, 9), "partition 0 from 5"), 0) == list(range(5, 10))
    consumer.unassign()
    consumer.subscribe([TOPIC])
    records = read(consumer, lambda r: len(r) >= 2 * RECORDS, "every record through the group")
    assert sorted(keys(records)) == [(p, n) for p in (0, 1) for n in range(RECORDS)]
    assert pairs(consumer.assignment()) == [(0, OFFSET_STORED), (1, OFFSET_STORED)]


def test_assign_and_unassign_are_refused_once_subscribed(cluster: SimCluster) -> None:
    consumer = manual(cluster)
    consumer.subscribe([TOPIC])
    read(consumer, lambda r: len(r) >= 2 * RECORDS, "every record through the group")
    tp0 = TopicPartition(TOPIC, 0, 1)
    assert raised(lambda: consumer.assign([tp0])).code() == KafkaError._STATE
    assert raised(consumer.unassign).code() == KafkaError._STATE
    assert raised(lambda: consumer.incremental_assign([tp0])).code() == KafkaError._CONFLICT
    consumer.unsubscribe()
    for _ in range(100):
        if consumer.assignment() == []:
            break
        assert consumer.poll(0.05) is None
    assert consumer.assignment() == [], "the group's partitions revoked after unsubscribe()"
    assert raised(lambda: consumer.assign([tp0])).code() == KafkaError._STATE
    consumer.incremental_assign([TopicPartition(TOPIC, 1, 8)])
    assert keys(read(consumer, reached(1, 9), "partition 1 from 8")) == [(1, 8), (1, 9)]


def test_subscribe_over_a_manual_assignment_conflicts(cluster: SimCluster) -> None:
    consumer = manual(cluster)
    consumer.assign([TopicPartition(TOPIC, 0, 5)])
    assert of(read(consumer, reached(0, 6), "partition 0 from 5"), 0) == [5, 6]
    consumer.subscribe([TOPIC])
    assert pairs(consumer.assignment()) == [(0, 5)], "subscribe() keeps the manual assignment"

    def poll_until_raised() -> None:
        for _ in range(200):
            consumer.poll(0.1)

    with pytest.raises(KafkaException) as caught:
        poll_until_raised()
    assert caught.value.args[0].code() == KafkaError._CONFLICT
