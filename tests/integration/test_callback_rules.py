"""Real rebalance callbacks: what they may and may not do."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition

from consumer import CallbackMisuseError, Consumer

pytestmark = pytest.mark.integration


def poll_until(consumer: Consumer, predicate: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        consumer.poll(0.1)


def poll_for(consumer: Consumer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(0.1)


def test_poll_inside_on_assign_is_refused_and_raised_from_poll(
    kafka_bootstrap: str, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic = create_topic(partitions=1)
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": unique_name("g")})
    seen: list[BaseException] = []

    def on_assign(c: Any, partitions: list[TopicPartition]) -> None:
        try:
            c.poll(0)
        except CallbackMisuseError as exc:
            seen.append(exc)
            raise

    try:
        consumer.subscribe([topic], on_assign=on_assign)
        with pytest.raises(CallbackMisuseError, match="rebalance callback"):
            poll_for(consumer, 30)
        assert len(seen) == 1
        # The callback's failure is reported, not fatal: the member still reaches STABLE.
        poll_until(consumer, lambda: consumer.state == "STABLE", 30)
        assert [tp.partition for tp in consumer.assignment()] == [0]
    finally:
        consumer.close()


def test_incremental_assign_in_on_assign_chooses_start_offsets(
    kafka_bootstrap: str, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic = create_topic(partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for number in range(10):
        producer.produce(topic, str(number).encode(), partition=0)
    producer.flush(30)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": unique_name("g"),
            "auto.offset.reset": "earliest",
        }
    )

    def on_assign(c: Any, partitions: list[TopicPartition]) -> None:
        # As with confluent-kafka: choose where each partition starts (here offset 7).
        c.incremental_assign([TopicPartition(tp.topic, tp.partition, 7) for tp in partitions])

    try:
        consumer.subscribe([topic], on_assign=on_assign)
        deadline, message = time.monotonic() + 30, None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.2)
        assert message is not None
        assert (message.offset(), message.value()) == (7, b"7"), "not earliest, but offset 7"
    finally:
        consumer.close()
