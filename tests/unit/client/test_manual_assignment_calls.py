"""Manual assignment calls check their input and the current assignment as librdkafka does
(no broker needed: absolute start offsets need no metadata, and nothing is read or committed).
What they do against a broker, next to confluent-kafka's own consumer, is in
``tests/integration/test_manual_assignment.py``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_STORED, KafkaError, KafkaException, TopicPartition

from consumer import Consumer

CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "manual-calls"}


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    instance = Consumer(CONFIG)
    yield instance
    instance.close()


def code_of(call: object) -> int:
    assert callable(call)
    with pytest.raises(KafkaException) as caught:
        call()
    error = caught.value.args[0]
    assert isinstance(error, KafkaError)
    return int(error.code())


def pairs(partitions: list[TopicPartition]) -> list[tuple[str, int, int]]:
    return [(tp.topic, tp.partition, tp.offset) for tp in partitions]


def test_assign_replaces_and_the_incremental_calls_add_and_remove(consumer: Consumer) -> None:
    consumer.assign([TopicPartition("t", 0, 5), TopicPartition("t", 1, 7)])
    assert pairs(consumer.assignment()) == [("t", 0, 5), ("t", 1, 7)]
    consumer.assign([TopicPartition("u", 0, 1)])
    assert pairs(consumer.assignment()) == [("u", 0, 1)]
    consumer.incremental_assign([TopicPartition("t", 2, 3)])
    consumer.incremental_unassign([TopicPartition("u", 0)])
    assert pairs(consumer.assignment()) == [("t", 2, 3)]
    consumer.unassign()
    assert consumer.assignment() == []
    consumer.unassign()  # nothing assigned: a no-op, as in librdkafka
    consumer.assign([])
    assert consumer.assignment() == []
    assert consumer.state == "UNSUBSCRIBED", "manual assignment creates no group member"
    assert consumer.memberid() is None


def test_a_partition_without_offset_shows_offset_stored(consumer: Consumer) -> None:
    consumer.incremental_assign([TopicPartition("t", 0, 4)])
    consumer.incremental_assign([TopicPartition("t", 1)])  # from the committed offset
    assert pairs(consumer.assignment()) == [("t", 0, 4), ("t", 1, OFFSET_STORED)]


@pytest.mark.parametrize(
    ("partitions", "match"),
    [
        ("t", "requires list of TopicPartition"),
        ((TopicPartition("t", 0),), "requires list of TopicPartition"),
        ([("t", 0)], "expected cimpl.TopicPartition"),
    ],
)
def test_anything_but_a_list_of_topic_partitions_is_a_type_error(
    consumer: Consumer, partitions: object, match: str
) -> None:
    for call in (consumer.assign, consumer.incremental_assign, consumer.incremental_unassign):
        with pytest.raises(TypeError, match=match):
            call(partitions)  # type: ignore[arg-type]


def test_duplicates_conflicts_and_unknown_partitions_are_refused(consumer: Consumer) -> None:
    twice = [TopicPartition("t", 0, 1), TopicPartition("t", 0, 2)]
    assert code_of(lambda: consumer.assign(twice)) == KafkaError._INVALID_ARG
    assert code_of(lambda: consumer.incremental_assign(twice)) == KafkaError._INVALID_ARG
    one = [TopicPartition("t", 0)]
    assert code_of(lambda: consumer.incremental_unassign(one)) == KafkaError._INVALID_ARG
    consumer.incremental_assign([TopicPartition("t", 0, 1)])
    assert code_of(lambda: consumer.incremental_assign(one)) == KafkaError._CONFLICT
    other = [TopicPartition("t", 1)]
    assert code_of(lambda: consumer.incremental_unassign(other)) == KafkaError._INVALID_ARG
    assert pairs(consumer.assignment()) == [("t", 0, 1)], "a refused call changes nothing"


def test_seek_and_store_offsets_need_an_assigned_partition() -> None:
    consumer = Consumer({**CONFIG, "enable.auto.offset.store": False})
    try:
        unassigned = TopicPartition("t", 3, 1)
        assert code_of(lambda: consumer.seek(unassigned)) == KafkaError._STATE
        assert code_of(lambda: consumer.store_offsets(offsets=[unassigned])) == KafkaError._STATE
        consumer.assign([TopicPartition("t", 3, 0)])
        consumer.store_offsets(offsets=[unassigned])
    finally:
        consumer.close()
