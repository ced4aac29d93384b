"""Offsets: what is committed, when, and how the results reach the application."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from consumer import Consumer

pytestmark = pytest.mark.integration

TopicMaker = Callable[[int], str]
Namer = Callable[[str], str]


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for number in range(count):
        producer.produce(topic, str(number).encode(), partition=partition)
    assert producer.flush(30) == 0


def poll_records(consumer: Consumer, count: int, timeout_s: float = 30) -> list[Message]:
    records: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count:
        assert time.monotonic() < deadline, f"only {len(records)} of {count} records arrived"
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            records.append(message)
    return records


def committed_offset(consumer: Consumer, topic: str, partition: int = 0) -> int:
    [result] = consumer.committed([TopicPartition(topic, partition)], timeout=30)
    return int(result.offset)


@pytest.fixture
def topic_with_records(
    kafka_bootstrap: str, create_topic: Callable[..., str]
) -> Callable[[int], str]:
    def make(count: int) -> str:
        topic = create_topic(partitions=1)
        produce(kafka_bootstrap, topic, count)
        return topic

    return make


def config(bootstrap: str, group: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        **extra,
    }


def test_async_commit_reports_through_on_commit_on_the_polling_thread(
    kafka_bootstrap: str,
    topic_with_records: Callable[[int], str],
    unique_name: Callable[[str], str],
) -> None:
    topic = topic_with_records(20)
    results: list[tuple[KafkaError | None, list[TopicPartition], str]] = []

    def on_commit(error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        results.append((error, partitions, threading.current_thread().name))

    consumer = Consumer(
        config(kafka_bootstrap, unique_name("g"), **{"enable.auto.commit": False}),
        on_commit=on_commit,
    )
    try:
        consumer.subscribe([topic])
        records = poll_records(consumer, 20)
        assert consumer.commit(asynchronous=True) is None
        deadline = time.monotonic() + 30
        while not results and time.monotonic() < deadline:
            consumer.poll(0.1)
        [(error, partitions, thread_name)] = results
        assert error is None
        assert [(tp.topic, tp.partition, tp.offset) for tp in partitions] == [(topic, 0, 20)]
        assert thread_name == threading.current_thread().name
        assert committed_offset(consumer, topic) == records[-1].offset() + 1
    finally:
        consumer.close()


def test_commit_of_a_message_commits_the_offset_after_it(
    kafka_bootstrap: str,
    topic_with_records: Callable[[int], str],
    unique_name: Callable[[str], str],
) -> None:
    topic = topic_with_records(10)
    consumer = Consumer(config(kafka_bootstrap, unique_name("g"), **{"enable.auto.commit": False}))
    try:
        consumer.subscribe([topic])
        records = poll_records(consumer, 10)
        result = consumer.commit(message=records[3], asynchronous=False)
        assert result is not None
        assert [(tp.partition, tp.offset) for tp in result] == [(0, 4)]
        assert committed_offset(consumer, topic) == 4
    finally:
        consumer.close()


def test_auto_commit_covers_only_records_already_returned(
    kafka_bootstrap: str,
    topic_with_records: Callable[[int], str],
    unique_name: Callable[[str], str],
) -> None:
    topic = topic_with_records(5000)
    group = unique_name("g")
    consumer = Consumer(config(kafka_bootstrap, group, **{"auto.commit.interval.ms": 100}))
    try:
        consumer.subscribe([topic])
        poll_records(consumer, 7)  # librdkafka has prefetched far more than 7 by now
        consumer.pause([TopicPartition(topic, 0)])  # polls keep the member alive, return nothing
        deadline = time.monotonic() + 30
        while committed_offset(consumer, topic) != 7:
            assert time.monotonic() < deadline, "auto-commit did not commit the returned records"
            assert consumer.poll(0.2) is None
        assert committed_offset(consumer, topic) == 7
    finally:
        consumer.close()
    # close() committed exactly what was returned, not what was prefetched.
    probe = Consumer(config(kafka_bootstrap, group))
    try:
        probe.subscribe([topic])
        [first] = poll_records(probe, 1)
        assert first.offset() == 7
    finally:
        probe.close()


def test_stored_offsets_are_what_auto_commit_commits_when_storing_by_hand(
    kafka_bootstrap: str,
    topic_with_records: Callable[[int], str],
    unique_name: Callable[[str], str],
) -> None:
    topic = topic_with_records(30)
    consumer = Consumer(
        config(
            kafka_bootstrap,
            unique_name("g"),
            **{"enable.auto.offset.store": False, "auto.commit.interval.ms": 100},
        )
    )
    try:
        consumer.subscribe([topic])
        records = poll_records(consumer, 30)
        consumer.store_offsets(message=records[11])  # processed up to offset 11 only
        deadline = time.monotonic() + 30
        while committed_offset(consumer, topic) != 12:
            assert time.monotonic() < deadline, "stored offset was not auto-committed"
            consumer.poll(0.2)
    finally:
        consumer.close()


def test_synchronous_commits_from_another_thread_while_polling(
    kafka_bootstrap: str, topic_with_records: TopicMaker, unique_name: Namer
) -> None:
    topic = topic_with_records(200)
    consumer = Consumer(config(kafka_bootstrap, unique_name("g"), **{"enable.auto.commit": False}))
    callbacks: list[str] = []
    stop = threading.Event()
    failures: list[BaseException] = []

    def poll_loop() -> None:
        try:
            while not stop.is_set():
                consumer.poll(0.05)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            failures.append(exc)

    try:
        consumer.subscribe([topic], on_assign=lambda c, ps: callbacks.append("assign"))
        poller = threading.Thread(target=poll_loop, name="poller")
        poller.start()
        deadline = time.monotonic() + 30
        while "assign" not in callbacks:
            assert time.monotonic() < deadline, "never assigned"
            stop.wait(0.05)
        for offset in range(1, 21):  # confluent-kafka's commit is thread-safe; so is ours
            result = consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            assert result is not None
            assert [tp.offset for tp in result] == [offset]
        stop.set()
        poller.join(10)
        assert not failures, failures
        assert committed_offset(consumer, topic) == 20
    finally:
        stop.set()
        consumer.close()


def test_committing_a_partition_after_its_revocation_is_refused(
    kafka_bootstrap: str, create_topic: Callable[..., str], unique_name: Namer
) -> None:
    topic = create_topic(partitions=2)
    group = unique_name("g")
    first = Consumer(config(kafka_bootstrap, group, **{"enable.auto.commit": False}))
    second = Consumer(config(kafka_bootstrap, group, **{"enable.auto.commit": False}))
    revoked: list[int] = []
    try:
        first.subscribe([topic], on_revoke=lambda c, ps: revoked.extend(tp.partition for tp in ps))
        deadline = time.monotonic() + 30
        while len(first.assignment()) != 2:
            assert time.monotonic() < deadline, "first member never got both partitions"
            first.poll(0.1)
        second.subscribe([topic])
        while not revoked:
            assert time.monotonic() < deadline, "no partition was handed over"
            first.poll(0.1)
            second.poll(0.1)
        [gone] = revoked
        with pytest.raises(KafkaException, match="does not own") as caught:
            first.commit(offsets=[TopicPartition(topic, gone, 1100)], asynchronous=False)
        assert f"{topic}-{gone}" in str(caught.value)
        assert committed_offset(second, topic, gone) != 1100, "nothing was sent"
    finally:
        first.close()
        second.close()
