"""A new partition with nothing committed starts at the absolute offset the reset policy names,
looked up by the member's round (ListOffsets on the background loop), never on the application
thread.

``auto.offset.reset=earliest`` on a partition whose log start is past 0 (records deleted) hands
the data plane the log start offset, not OFFSET_BEGINNING (-2), and records start there;
``latest`` hands it the end offset; with ``isolation.level=read_committed`` (librdkafka's
default) the end is the last stable offset, so an open transaction's records are not skipped
once it commits. The data plane's librdkafka consumer is wrapped to prove the group path calls
neither ``offsets_for_times`` (the blocking lookup that cost the 50-member ack tail) nor
``list_topics``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from consumer import Consumer
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

#: Records produced before the group starts, and the log start after the deletion.
PRODUCED = 20
DELETED_BEFORE = 12


class RecordingLibrdkafka:
    """Wraps the data plane's librdkafka consumer: remembers what the group path asks of it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.assigned: list[tuple[str, int, int]] = []
        self.lookups: list[str] = []

    def incremental_assign(self, partitions: list[KafkaTopicPartition]) -> None:
        self.assigned += [(tp.topic, tp.partition, tp.offset) for tp in partitions]
        self._inner.incremental_assign(partitions)

    def offsets_for_times(self, *args: Any, **kwargs: Any) -> Any:
        self.lookups.append("offsets_for_times")
        return self._inner.offsets_for_times(*args, **kwargs)

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        self.lookups.append("list_topics")
        return self._inner.list_topics(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture
def readers() -> Iterator[list[Reader]]:
    opened: list[Reader] = []
    yield opened
    for reader in opened:
        reader.consumer.close()


def produce(bootstrap: str, topic: str, count: int, first: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(first, first + count):
        producer.produce(topic, str(i).encode(), partition=0)
    assert producer.flush(30) == 0


class Reader:
    """A consumer, its recorded data plane, and every record its polls returned."""

    def __init__(self, bootstrap: str, group_id: str, **settings: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, **settings})
        plane = self.consumer._dataplane  # noqa: SLF001 - the test watches the data plane
        self.recorder = RecordingLibrdkafka(plane._consumer)  # noqa: SLF001
        plane._consumer = self.recorder  # noqa: SLF001
        self.records: list[Message] = []

    def poll_once(self) -> None:
        message = self.consumer.poll(0.05)
        if message is not None and message.error() is None:
            self.records.append(message)

    def assigned_offset(self, topic: str) -> int:
        """Poll until the data plane is handed partition 0 of ``topic``; its start offset."""

        def handed() -> bool:
            self.poll_once()
            return any(t == topic and p == 0 for t, p, _ in self.recorder.assigned)

        details = lambda: str(self.recorder.assigned)  # noqa: E731
        wait_until(handed, 60, f"{topic}[0] handed to the data plane", details)
        return next(o for t, p, o in self.recorder.assigned if t == topic and p == 0)

    def first_record(self) -> Message:
        """The first record polled (waits for one)."""

        def came() -> bool:
            self.poll_once()
            return bool(self.records)

        wait_until(came, 60, "a record")
        return self.records[0]


def test_earliest_starts_at_the_log_start_offset_looked_up_off_the_app_thread(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    readers: list[Reader],
) -> None:
    topic = create_topic(partitions=1)
    produce(kafka_bootstrap, topic, PRODUCED)
    deleted = admin.delete_records([KafkaTopicPartition(topic, 0, DELETED_BEFORE)])
    for future in deleted.values():
        assert future.result(30).low_watermark == DELETED_BEFORE  # the new log start offset
    reader = Reader(kafka_bootstrap, unique_name("group"), **{"auto.offset.reset": "earliest"})
    readers.append(reader)
    reader.consumer.subscribe([topic])
    assert reader.assigned_offset(topic) == DELETED_BEFORE  # absolute, not -2
    assert reader.first_record().offset() == DELETED_BEFORE
    assert reader.recorder.lookups == []


def test_latest_starts_at_the_end_offset(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    readers: list[Reader],
) -> None:
    topic = create_topic(partitions=1)
    produce(kafka_bootstrap, topic, PRODUCED)
    reader = Reader(kafka_bootstrap, unique_name("group"), **{"auto.offset.reset": "latest"})
    readers.append(reader)
    reader.consumer.subscribe([topic])
    assert reader.assigned_offset(topic) == PRODUCED  # absolute, not -1
    produce(kafka_bootstrap, topic, 3, first=PRODUCED)
    message = reader.first_record()
    assert (message.offset(), message.value()) == (PRODUCED, str(PRODUCED).encode())
    assert reader.recorder.lookups == []


def test_latest_with_read_committed_is_the_last_stable_offset(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    readers: list[Reader],
) -> None:
    topic = create_topic(partitions=1)
    produce(kafka_bootstrap, topic, PRODUCED)
    transactional = Producer(
        {"bootstrap.servers": kafka_bootstrap, "transactional.id": unique_name("tx")}
    )
    transactional.init_transactions(30)
    transactional.begin_transaction()
    for i in range(5):
        transactional.produce(topic, f"tx-{i}".encode(), partition=0)
    assert transactional.flush(30) == 0  # written, not committed: the stable offset stays
    latest = {"auto.offset.reset": "latest"}
    committed = Reader(
        kafka_bootstrap, unique_name("committed"), **latest, **{"isolation.level": "read_committed"}
    )
    uncommitted = Reader(
        kafka_bootstrap,
        unique_name("uncommitted"),
        **latest,
        **{"isolation.level": "read_uncommitted"},
    )
    readers += [committed, uncommitted]
    committed.consumer.subscribe([topic])
    uncommitted.consumer.subscribe([topic])
    assert committed.assigned_offset(topic) == PRODUCED  # the last stable offset
    assert uncommitted.assigned_offset(topic) == PRODUCED + 5  # the end, past the open records
    transactional.commit_transaction(30)
    message = committed.first_record()
    assert (message.offset(), message.value()) == (PRODUCED, b"tx-0")
    assert committed.recorder.lookups == uncommitted.recorder.lookups == []
