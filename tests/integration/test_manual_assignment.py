"""Manual assignment (``assign()`` without ``subscribe()``) behaves as confluent-kafka's does.

Every test runs twice on the real broker: on ``consumer.Consumer`` (``[ours]``) and on
``confluent_kafka.Consumer`` with ``group.protocol=consumer`` (``[confluent]``, librdkafka
2.16), and asserts the same results on both: a program that assigns partitions at given
offsets, reads, commits (as a non-member: member id "", epoch -1), seeks, pauses, re-assigns and
uses the incremental calls; auto-commit of manual partitions; ``store_offsets``; the broker's
refusal of a non-member commit while the group has consumer-protocol members; and what happens
when ``subscribe()`` and ``assign()`` are mixed (librdkafka's rules, probed and documented in
``docs/migrating-from-confluent-kafka.md``). The first three, which do not depend on the group
protocol, also run ``consumer.Consumer`` with ``group.protocol=classic`` (``[ours-classic]``).
"""

from __future__ import annotations

import time
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
    Producer,
    TopicPartition,
)
from consumer_support import (
    CONVERGENCE_S,
    ConsumerFactory,
    make_consumer_fixture,  # noqa: F401 - the make_consumer fixture
    make_producer,
)

from tests.support import CONFLUENT, OURS, OURS_CLASSIC, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

IMPLS = [pytest.param(OURS, id="ours"), pytest.param(CONFLUENT, id="confluent")]
#: For what does not depend on the group protocol: also our facade with group.protocol=classic.
IMPLS_AND_CLASSIC = [*IMPLS, pytest.param(OURS_CLASSIC, id="ours-classic")]
#: Records per partition produced before the consumer starts.
RECORDS = 10
#: Bound for records (or an error) to arrive; a normal run takes well under a second.
ARRIVAL_S = 20.0

Key = tuple[int, int]  # (partition, offset)


def produce(producer: Producer, topic: str, partition: int, values: Iterable[int]) -> None:
    for n in values:
        producer.produce(topic, f"{partition}-{n}".encode(), partition=partition)
    assert producer.flush(30) == 0, "records were not delivered within 30 s"


def read(consumer: Any, want: Callable[[list[Message]], bool], what: str) -> list[Message]:
    """Poll until ``want(records so far)``; fail after ARRIVAL_S naming ``what``."""
    records: list[Message] = []
    deadline = time.monotonic() + ARRIVAL_S
    while not want(records):
        assert time.monotonic() < deadline, f"timed out waiting for {what}; got {keys(records)}"
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


def committed(consumer: Any, topic: str, partitions: int = 2) -> list[int]:
    result = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    return [tp.offset for tp in result]


def raised(call: Callable[[], object]) -> KafkaError:
    """The ``KafkaError`` of the ``KafkaException`` ``call()`` raises."""
    with pytest.raises(KafkaException) as caught:
        call()
    error = caught.value.args[0]
    assert isinstance(error, KafkaError)
    return error


def pairs(partitions: Iterable[TopicPartition]) -> list[tuple[int, int]]:
    return [(tp.partition, tp.offset) for tp in partitions]


@pytest.fixture
def topic(create_topic: Callable[..., str], kafka_bootstrap: str) -> str:
    """A 2-partition topic holding values ``p-0 .. p-9`` in each partition."""
    name = create_topic(partitions=2)
    producer = make_producer(kafka_bootstrap)
    for partition in (0, 1):
        produce(producer, name, partition, range(RECORDS))
    return name


def manual_config(unique_name: Callable[[str], str], **extra: Any) -> dict[str, Any]:
    return {
        "group.id": unique_name("group"),
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **extra,
    }


@pytest.mark.parametrize("impl", IMPLS_AND_CLASSIC)
def test_assign_read_commit_seek_reassign(
    impl: str,
    make_consumer: ConsumerFactory,
    topic: str,
    kafka_bootstrap: str,
    unique_name: Callable[[str], str],
) -> None:
    consumer = make_consumer(manual_config(unique_name), impl=impl)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    # Before any assignment: nothing to commit, no position, seek refused.
    assert consumer.assignment() == []
    assert raised(lambda: consumer.commit(asynchronous=False)).code() == KafkaError._NO_OFFSET
    assert pairs(consumer.position([tp0])) == [(0, OFFSET_INVALID)]
    assert raised(lambda: consumer.seek(TopicPartition(topic, 0, 1))).code() == KafkaError._STATE

    # Given offsets: partition 0 from 3, partition 1 from the beginning.
    consumer.assign([TopicPartition(topic, 0, 3), TopicPartition(topic, 1, OFFSET_BEGINNING)])
    assert pairs(consumer.assignment()) == [(0, 3), (1, OFFSET_BEGINNING)]
    records = read(consumer, lambda r: {9} <= set(of(r, 0)) & set(of(r, 1)), "both partitions")
    assert of(records, 0) == list(range(3, 10))
    assert of(records, 1) == list(range(10))
    assert [m.value() for m in records if m.partition() == 0] == [
        f"0-{n}".encode() for n in range(3, 10)
    ]
    assert [tp.offset for tp in consumer.position([tp0, tp1])] == [10, 10]

    # Commits without a group member: the consumed offsets, then explicit ones.
    assert pairs(consumer.commit(asynchronous=False)) == [(0, 10), (1, 10)]
    assert committed(consumer, topic) == [10, 10]
    assert pairs(consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)) == [
        (0, 4)
    ]
    assert committed(consumer, topic) == [4, 10]

    # Seek back, pause one partition while the other receives new records, resume.
    consumer.seek(TopicPartition(topic, 1, 5))
    assert of(read(consumer, reached(1, 9), "partition 1 from 5"), 1) == list(range(5, 10))
    consumer.pause([tp0])
    consumer.seek(TopicPartition(topic, 0, 8))
    produce(make_producer(kafka_bootstrap), topic, 1, range(RECORDS, RECORDS + 2))
    while_paused = read(consumer, reached(1, 11), "new records of partition 1")
    assert keys(while_paused) == [(1, 10), (1, 11)], "a paused partition returned records"
    consumer.resume([tp0])
    assert keys(read(consumer, reached(0, 9), "partition 0 after resume")) == [(0, 8), (0, 9)]

    # Incremental calls: remove partition 1, add it back without an offset (committed: 10).
    consumer.incremental_unassign([tp1])
    assert pairs(consumer.assignment()) == [(0, 3)]
    assert raised(lambda: consumer.incremental_unassign([tp1])).code() == KafkaError._INVALID_ARG
    consumer.incremental_assign([tp1])
    assert raised(lambda: consumer.incremental_assign([tp1])).code() == KafkaError._CONFLICT
    assert keys(read(consumer, reached(1, 11), "partition 1 from its committed offset")) == [
        (1, 10),
        (1, 11),
    ]

    # assign() replaces the assignment: partition 0 alone, from its committed offset (4).
    consumer.assign([TopicPartition(topic, 0, OFFSET_INVALID)])
    assert pairs(consumer.assignment()) == [(0, OFFSET_STORED)], "as librdkafka shows it"
    assert of(read(consumer, reached(0, 9), "partition 0 from 4"), 0) == list(range(4, 10))
    assert [tp.offset for tp in consumer.position([tp0, tp1])] == [10, OFFSET_INVALID]
    consumer.unassign()
    assert consumer.assignment() == []
    consumer.close()


@pytest.mark.parametrize("impl", IMPLS_AND_CLASSIC)
def test_auto_commit_of_manual_partitions(
    impl: str,
    make_consumer: ConsumerFactory,
    topic: str,
    unique_name: Callable[[str], str],
) -> None:
    config = manual_config(unique_name, **{"enable.auto.commit": True})
    results: list[tuple[KafkaError | None, list[tuple[int, int]]]] = []

    def on_commit(error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        results.append((error, pairs(partitions)))

    # On the interval: the consumed offsets are committed while polling goes on.
    consumer = make_consumer(
        {**config, "auto.commit.interval.ms": 200, "on_commit": on_commit}, impl=impl
    )
    consumer.assign([TopicPartition(topic, 0, 2)])
    read(consumer, reached(0, 9), "partition 0")
    wait_until(
        lambda: consumer.poll(0.05) is None and (None, [(0, 10)]) in results,
        ARRIVAL_S,
        "an auto-commit of offset 10 reported to on_commit",
        details=lambda: f"on_commit calls: {results}",
    )
    assert committed(consumer, topic, 1) == [10]
    consumer.close()

    # On unassign() and on close(): with an interval too long to fire.
    quiet = {**config, "auto.commit.interval.ms": 600_000}
    consumer = make_consumer(quiet, impl=impl)
    consumer.assign([TopicPartition(topic, 1, 4)])
    read(consumer, reached(1, 6), "partition 1 up to 6")
    consumer.unassign()
    wait_until(
        lambda: consumer.poll(0.05) is None and committed(consumer, topic)[1] == 7,
        ARRIVAL_S,
        "the commit of partition 1 on unassign()",
    )
    consumer.assign([TopicPartition(topic, 1, 7)])
    read(consumer, reached(1, 8), "partition 1 up to 8")
    consumer.close()
    reader = make_consumer(quiet, impl=impl)
    assert committed(reader, topic) == [10, 9], "close() commits the consumed offsets"


@pytest.mark.parametrize("impl", IMPLS_AND_CLASSIC)
def test_store_offsets_commits_what_was_stored(
    impl: str,
    make_consumer: ConsumerFactory,
    topic: str,
    unique_name: Callable[[str], str],
) -> None:
    config = manual_config(unique_name, **{"enable.auto.offset.store": False})
    consumer = make_consumer(config, impl=impl)
    consumer.assign([TopicPartition(topic, 1, 0)])
    records = read(consumer, lambda r: len(r) >= 4, "4 records")
    assert raised(lambda: consumer.commit(asynchronous=False)).code() == KafkaError._NO_OFFSET
    consumer.store_offsets(message=records[1])
    assert pairs(consumer.commit(asynchronous=False)) == [(1, 2)]
    consumer.store_offsets(offsets=[TopicPartition(topic, 1, 3)])
    assert pairs(consumer.commit(asynchronous=False)) == [(1, 3)]
    unassigned = [TopicPartition(topic, 0, 3)]
    assert raised(lambda: consumer.store_offsets(offsets=unassigned)).code() == KafkaError._STATE
    assert committed(consumer, topic) == [OFFSET_INVALID, 3]


@pytest.mark.parametrize("impl", IMPLS)
def test_commit_without_membership_is_refused_while_the_group_has_members(
    impl: str,
    make_consumer: ConsumerFactory,
    topic: str,
    unique_name: Callable[[str], str],
) -> None:
    config = manual_config(unique_name)
    member = make_consumer(config, impl=impl)
    member.subscribe([topic])
    read(member, lambda r: len(r) >= 2 * RECORDS, "the member's records")
    assigned = make_consumer(config, impl=impl)
    assigned.assign([TopicPartition(topic, 0, 0)])
    read(assigned, lambda r: len(r) >= 1, "one record")
    error = raised(lambda: assigned.commit(asynchronous=False))
    assert error.code() == KafkaError.UNKNOWN_MEMBER_ID, error


@pytest.mark.parametrize("impl", IMPLS)
def test_subscribe_after_unassign_joins_the_group(
    impl: str,
    make_consumer: ConsumerFactory,
    topic: str,
    unique_name: Callable[[str], str],
) -> None:
    consumer = make_consumer(manual_config(unique_name), impl=impl)
    consumer.assign([TopicPartition(topic, 0, 5)])
    assert of(read(consumer, reached(0, 9), "partition 0 from 5"), 0) == list(range(5, 10))
    consumer.unassign()
    consumer.subscribe([topic])
    records = read(consumer, lambda r: len(r) >= 2 * RECORDS, "every record through the group")
    assert sorted(keys(records)) == [(p, n) for p in (0, 1) for n in range(RECORDS)]
    assert pairs(consumer.assignment()) == [(0, OFFSET_STORED), (1, OFFSET_STORED)]


@pytest.mark.parametrize("impl", IMPLS)
def test_assign_and_unassign_are_refused_once_subscribed(
    impl: str,
    make_consumer: ConsumerFactory,
    topic: str,
    unique_name: Callable[[str], str],
) -> None:
    consumer = make_consumer(manual_config(unique_name), impl=impl)
    consumer.subscribe([topic])
    read(consumer, lambda r: len(r) >= 2 * RECORDS, "every record through the group")
    tp0 = TopicPartition(topic, 0, 1)
    assert raised(lambda: consumer.assign([tp0])).code() == KafkaError._STATE
    assert raised(consumer.unassign).code() == KafkaError._STATE
    assert raised(lambda: consumer.incremental_assign([tp0])).code() == KafkaError._CONFLICT
    consumer.unsubscribe()
    wait_until(
        lambda: consumer.poll(0.05) is None and consumer.assignment() == [],
        CONVERGENCE_S,
        "the group's partitions revoked after unsubscribe()",
    )
    # Still refused (librdkafka: the assignment stays cooperative); the incremental calls work.
    assert raised(lambda: consumer.assign([tp0])).code() == KafkaError._STATE
    consumer.incremental_assign([TopicPartition(topic, 1, 8)])
    assert keys(read(consumer, reached(1, 9), "partition 1 from 8")) == [(1, 8), (1, 9)]


@pytest.mark.parametrize("impl", IMPLS)
def test_subscribe_over_a_manual_assignment_conflicts(
    impl: str,
    make_consumer: ConsumerFactory,
    topic: str,
    unique_name: Callable[[str], str],
) -> None:
    consumer = make_consumer(manual_config(unique_name), impl=impl)
    consumer.assign([TopicPartition(topic, 0, 5)])
    assert of(read(consumer, reached(0, 6), "partition 0 from 5"), 0) == [5, 6]
    consumer.subscribe([topic])
    assert pairs(consumer.assignment()) == [(0, 5)], "subscribe() keeps the manual assignment"
    # The group gives this only member both partitions, one of them already assigned by hand:
    # that assignment is not applied and poll() raises _CONFLICT; until then the manual
    # partition keeps flowing from where it was.
    returned: list[Message] = []

    def poll_until_raised() -> None:
        deadline = time.monotonic() + CONVERGENCE_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None:
                returned.append(message)

    with pytest.raises(KafkaException) as caught:
        poll_until_raised()
    assert caught.value.args[0].code() == KafkaError._CONFLICT
    assert f"{topic} [0] is already part of the current assignment" in str(caught.value)
    assert keys(returned) == [(0, n) for n in range(7, 7 + len(returned))]
