"""The remaining ``Consumer`` methods, the same test on ``confluent_kafka.Consumer``
(``group.protocol=consumer``), ``consumer.Consumer`` and ``consumer.Consumer`` with
``group.protocol=classic`` (none depends on the protocol) against the real broker: ``pause`` /
``resume``, ``seek``, ``offsets_for_times``, ``cluster_id``, ``list_topics``,
``get_watermark_offsets`` and ``unsubscribe``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_END, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.consumer_support import CONVERGENCE_S, ConsumerFactory
from tests.support import CONFLUENT, OURS, OURS_CLASSIC, holds_for, wait_until

pytestmark = pytest.mark.integration

_RECORDS = 10
#: Base of the record timestamps offsets_for_times looks up: record i is at base + i s. An hour
#: ago: far older timestamps would let the broker's retention delete the records mid-test.
_BASE_MS = int(time.time() * 1000) - 3_600_000


@pytest.fixture(params=[CONFLUENT, OURS, OURS_CLASSIC])
def make(request: pytest.FixtureRequest, kafka_bootstrap: str) -> Iterator[ConsumerFactory]:
    factory = ConsumerFactory(kafka_bootstrap, request.param)
    try:
        yield factory
    finally:
        factory.close_all()


def _produce(bootstrap: str, topic: str, count: int = _RECORDS, start: int = 0) -> None:
    """Values ``start..start+count-1`` to partition 0, value i timestamped
    ``_BASE_MS + i * 1000``."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        producer.produce(topic, str(i).encode(), partition=0, timestamp=_BASE_MS + i * 1000)
    assert producer.flush(30) == 0


def _subscribed(make: ConsumerFactory, topic: str, group: str | None = None) -> Any:
    """A consumer subscribed to ``topic`` (in ``group``, default a new one)."""
    client = make(
        {
            "group.id": group or f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    client.subscribe([topic])
    return client


def _member(make: ConsumerFactory, topic: str, group: str | None = None) -> Any:
    """A subscribed consumer owning ``topic``'s partition; use it on an empty topic (records
    polled while waiting for the assignment are dropped)."""
    client = _subscribed(make, topic, group)

    def assigned() -> bool:
        client.poll(0.1)
        return bool(client.assignment())

    wait_until(assigned, CONVERGENCE_S, f"{make.impl}: an assignment of {topic}")
    return client


def _read(client: Any, count: int, timeout_s: float = 20.0) -> list[tuple[int, int]]:
    """The next ``count`` records as ``(offset, value)``."""
    read: list[tuple[int, int]] = []

    def enough() -> bool:
        message = client.poll(0.2)
        if message is not None and message.error() is None:
            read.append((message.offset(), int(message.value())))
        return len(read) >= count

    wait_until(enough, timeout_s, f"{count} records", lambda: f"read {read}")
    return read


def test_pause_holds_records_back_and_resume_delivers_them(
    make: ConsumerFactory, kafka_bootstrap: str, create_topic: Any
) -> None:
    topic = create_topic(partitions=1)
    _produce(kafka_bootstrap, topic, count=1)
    client = _subscribed(make, topic)
    assert _read(client, 1) == [(0, 0)]  # the partition is being fetched
    client.pause([TopicPartition(topic, 0)])
    _produce(kafka_bootstrap, topic, start=1)

    def nothing_delivered() -> bool:
        message = client.poll(0.1)
        return message is None or message.error() is not None

    holds_for(nothing_delivered, 1.5, "no record while paused")
    client.resume([TopicPartition(topic, 0)])
    assert _read(client, _RECORDS) == [(i, i) for i in range(1, _RECORDS + 1)]


def test_seek_rereads_from_the_given_offset(
    make: ConsumerFactory, kafka_bootstrap: str, create_topic: Any
) -> None:
    topic = create_topic(partitions=1)
    _produce(kafka_bootstrap, topic)
    client = _subscribed(make, topic)
    assert _read(client, _RECORDS) == [(i, i) for i in range(_RECORDS)]
    client.seek(TopicPartition(topic, 0, 3))
    assert _read(client, 2) == [(3, 3), (4, 4)]
    assert [tp.offset for tp in client.position([TopicPartition(topic, 0)])] == [5]


def test_offsets_for_times_finds_the_first_record_at_or_after_a_timestamp(
    make: ConsumerFactory, kafka_bootstrap: str, create_topic: Any
) -> None:
    topic = create_topic(partitions=1)
    _produce(kafka_bootstrap, topic)
    client = make({"group.id": "g"})
    queries = [
        TopicPartition(topic, 0, _BASE_MS + 3_500),  # between records 3 and 4
        TopicPartition(topic, 0, _BASE_MS),  # exactly record 0
    ]
    found = [client.offsets_for_times([q], timeout=10)[0].offset for q in queries]
    assert found == [4, 0]
    later = client.offsets_for_times([TopicPartition(topic, 0, _BASE_MS + 60_000)], timeout=10)
    assert [tp.offset for tp in later] == [OFFSET_END]


def test_cluster_id_and_list_topics_describe_the_cluster(
    make: ConsumerFactory, admin: AdminClient, create_topic: Any
) -> None:
    topic = create_topic(partitions=3)
    client = make({"group.id": "g"})
    expected_id = admin.list_topics(timeout=10).cluster_id
    assert expected_id
    assert client.cluster_id(timeout=10) == expected_id
    one = client.list_topics(topic, timeout=10)
    assert one.cluster_id == expected_id
    assert sorted(one.topics[topic].partitions) == [0, 1, 2]
    assert one.topics[topic].error is None
    assert topic in client.list_topics(timeout=10).topics


def test_get_watermark_offsets_from_the_broker_and_from_the_cache(
    make: ConsumerFactory, kafka_bootstrap: str, create_topic: Any
) -> None:
    topic = create_topic(partitions=1)
    _produce(kafka_bootstrap, topic)
    client = _subscribed(make, topic)
    assert client.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, _RECORDS)
    _read(client, _RECORDS)  # fetching fills librdkafka's cache of the high watermark

    def cached_high() -> bool:
        low_high = client.get_watermark_offsets(TopicPartition(topic, 0), cached=True)
        return low_high is not None and low_high[1] == _RECORDS

    wait_until(cached_high, 10.0, "the cached high watermark")


def test_unsubscribe_leaves_the_group_and_the_consumer_can_subscribe_again(
    make: ConsumerFactory, admin: AdminClient, create_topic: Any
) -> None:
    topic = create_topic(partitions=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    client = _member(make, topic, group)
    client.unsubscribe()

    def left() -> bool:
        client.poll(0.1)
        described = admin.describe_consumer_groups([group])[group].result(timeout=10)
        return not client.assignment() and not described.members

    wait_until(left, CONVERGENCE_S, f"{make.impl}: out of the group after unsubscribe()")
    client.subscribe([topic])
    started = time.monotonic()

    def assigned_again() -> bool:
        client.poll(0.1)
        return bool(client.assignment())

    wait_until(assigned_again, CONVERGENCE_S, f"{make.impl}: assigned again after subscribe()")
    assert time.monotonic() - started < CONVERGENCE_S
