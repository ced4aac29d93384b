"""The fast paths of ``consume()`` (full batches taken straight from librdkafka) and ``poll()``
(records taken straight from librdkafka, the budget renewed every ``FAST_POLL_BUDGET`` records)
against the real broker: a member that consumes without a pause for longer than
``max.poll.interval.ms`` stays in the group, and auto-commit still follows what it consumed.

While records flow and the background has nothing for the application, ``consume()`` skips its
full turn (serving the background, stamping the poll, reporting consumed offsets) for at most
``FAST_CONSUME_WINDOW_S``, and ``poll()`` replaces it by the budget's renewal (the same duties
without the waits). Without those bounds the member would see no poll for the whole run and
leave the group after ``max.poll.interval.ms`` (``on_lost``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import TopicPartition
from consumer_support import make_producer, produce_numbered

from consumer import Consumer
from tests.support import wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 3
RECORDS = 300_000
BATCH = 100
MAX_POLL_INTERVAL_MS = 2000
#: The application's work per batch: keeps the run longer than max.poll.interval.ms.
WORK_PER_BATCH_S = 0.001


@dataclass
class FastMember:
    """A subscribed member over a topic of ``RECORDS`` numbered records, and its callbacks."""

    consumer: Consumer
    topic: str
    callbacks: list[str]

    def ends(self) -> dict[int, int]:
        """Each partition's log end offset."""
        return {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}

    def committed(self) -> dict[int, int]:
        """The group's committed offset of each partition."""
        parts = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
        return {tp.partition: tp.offset for tp in self.consumer.committed(parts, timeout=5)}

    def wait_committed_to_the_end(self, what: str) -> None:
        """Wait until auto-commit has committed every partition up to its end."""
        wait_until(
            lambda: self.committed() == self.ends(),
            10,
            f"auto-commit of every {what} record",
            details=lambda: f"committed {self.committed()}, expected {self.ends()}",
        )


@pytest.fixture
def fast_member(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> Iterator[FastMember]:
    """A member with auto-commit every 100 ms and ``max.poll.interval.ms`` of 2 s, subscribed."""
    topic = create_topic(partitions=PARTITIONS)
    producer = make_producer(kafka_bootstrap)
    produce_numbered(producer, topic, 0, RECORDS, PARTITIONS)
    callbacks: list[str] = []
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": unique_name("group"),
            "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 100,
            "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
            # librdkafka keeps every record it fetched queued, so batches come back full
            "queued.min.messages": 10_000_000,
        }
    )
    try:
        consumer.subscribe(
            [topic],
            on_assign=lambda _c, parts: callbacks.append(f"assign {len(parts)}"),
            on_revoke=lambda _c, parts: callbacks.append(f"revoke {len(parts)}"),
            on_lost=lambda _c, parts: callbacks.append(f"lost {len(parts)}"),
        )
        yield FastMember(consumer, topic, callbacks)
    finally:
        consumer.close()


@pytest.mark.timeout(120)
def test_full_batches_for_longer_than_the_poll_interval_keep_the_member_and_its_commits(
    fast_member: FastMember,
) -> None:
    consumer, callbacks = fast_member.consumer, fast_member.callbacks
    consumed, full, calls, first_s = 0, 0, 0, None
    while consumed < RECORDS:
        batch = consumer.consume(BATCH, 1.0)
        calls += 1
        full += len(batch) == BATCH
        good = sum(1 for message in batch if message.error() is None)
        if good and first_s is None:
            first_s = time.monotonic()
            epoch = consumer.member_epoch
        consumed += good
        time.sleep(WORK_PER_BATCH_S)
    assert first_s is not None
    took_s = time.monotonic() - first_s
    assert took_s > 1.5 * MAX_POLL_INTERVAL_MS / 1000, (
        f"consumed in {took_s:.1f} s: too fast to test max.poll.interval.ms"
    )
    assert full >= 0.9 * calls, f"only {full} of {calls} batches were full"
    assert callbacks == [f"assign {PARTITIONS}"], callbacks
    assert consumer.state == "STABLE"
    assert consumer.member_epoch == epoch

    # The records of the last calls are reported on the next one, as with poll().
    assert consumer.consume(BATCH, 0.2) == []
    fast_member.wait_committed_to_the_end("consumed")


@pytest.mark.timeout(120)
def test_polling_records_for_longer_than_the_poll_interval_keeps_the_member_and_its_commits(
    fast_member: FastMember,
) -> None:
    consumer, callbacks, topic = fast_member.consumer, fast_member.callbacks, fast_member.topic
    consumed, first_s = 0, None
    last: dict[int, int] = {}
    while consumed < RECORDS:
        message = consumer.poll(1.0)
        if message is None or message.error() is not None:
            continue
        if first_s is None:
            first_s = time.monotonic()
            epoch = consumer.member_epoch
        partition, offset = message.partition(), message.offset()
        assert partition is not None
        assert offset is not None
        assert offset == last.get(partition, -1) + 1, f"partition {partition} skipped"
        last[partition] = offset
        consumed += 1
        if consumed % BATCH == 0:
            time.sleep(WORK_PER_BATCH_S)
    assert first_s is not None
    took_s = time.monotonic() - first_s
    assert took_s > 1.5 * MAX_POLL_INTERVAL_MS / 1000, (
        f"consumed in {took_s:.1f} s: too fast to test max.poll.interval.ms"
    )
    assert callbacks == [f"assign {PARTITIONS}"], callbacks
    assert consumer.state == "STABLE"
    assert consumer.member_epoch == epoch
    ends = fast_member.ends()
    assert consumer.position([TopicPartition(topic, p) for p in range(PARTITIONS)]) == [
        TopicPartition(topic, p, ends[p]) for p in range(PARTITIONS)
    ]

    assert consumer.poll(0.2) is None  # reports the last records, as any poll does
    fast_member.wait_committed_to_the_end("polled")
