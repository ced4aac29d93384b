"""``poll()`` hands out records taken from librdkafka in batches: against the real broker, what
the application sees is what confluent-kafka's record-by-record ``poll()`` shows.

Once ``poll()`` has taken a batch with ``consume(n, 0)``, librdkafka's positions are past every
record of it, while the application has seen only some. These tests stop in the middle of a
batch (with our consumer they check that records are indeed held) and then read positions,
commit, close, pause, seek, call ``consume()``, or let a second member join, and check that
every record is delivered exactly once and in order, and that positions and commits name the
next record the application will get. With ``KGM_CONSUMER_IMPL=confluent`` the same tests run
against librdkafka's own consumer (no batches held), which is what they are checked against.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, Message, TopicPartition
from consumer_support import (
    ConsumerFactory,
    make_consumer_fixture,
    make_producer,
    produce_numbered,
)

from consumer import Consumer
from consumer.aio import AsyncConsumer
from tests.support import wait_until

pytestmark = pytest.mark.integration

__all__ = ["make_consumer_fixture"]

PARTITIONS = 2
PER_PARTITION = 2_000
RECORDS = PARTITIONS * PER_PARTITION
#: How many records a test takes before it acts in the middle of a batch.
FIRST = 25


@dataclass
class Seen:
    """The records one or more consumers got, per partition, in the order they came."""

    offsets: dict[int, list[int]] = field(default_factory=dict)

    def add(self, message: Message) -> None:
        partition, offset = message.partition(), message.offset()
        assert partition is not None
        assert offset is not None
        self.offsets.setdefault(partition, []).append(offset)

    def last(self, partition: int) -> int | None:
        got = self.offsets.get(partition)
        return got[-1] if got else None

    def count(self) -> int:
        return sum(len(got) for got in self.offsets.values())

    def assert_each_once_in_order(self) -> None:
        """Every record of every partition, once, in offset order."""
        for partition in range(PARTITIONS):
            got = self.offsets.get(partition, [])
            assert got == list(range(PER_PARTITION)), (
                f"partition {partition}: {len(got)} records, "
                f"first out of order at {_first_break(got)}"
            )


def _first_break(got: list[int]) -> int | None:
    for index, offset in enumerate(got):
        if offset != index:
            return index
    return None


@pytest.fixture
def topic(kafka_bootstrap: str, create_topic: Callable[..., str]) -> str:
    """A topic of ``PARTITIONS`` partitions, ``PER_PARTITION`` numbered records each."""
    name = create_topic(partitions=PARTITIONS)
    produce_numbered(make_producer(kafka_bootstrap), name, 0, RECORDS, PARTITIONS)
    return name


@pytest.fixture
def interleaved_topic(kafka_bootstrap: str, create_topic: Callable[..., str]) -> str:
    """As ``topic``, written in small producer batches: read with ``SMALL_FETCHES``,
    librdkafka's queue alternates between the partitions every few dozen records, so a batch
    taken for ``poll()`` holds records of both, whichever of them a rebalance takes away."""
    name = create_topic(partitions=PARTITIONS)
    producer = make_producer(kafka_bootstrap)
    for start in range(0, RECORDS, PARTITIONS * _ROUND):
        produce_numbered(producer, name, start, PARTITIONS * _ROUND, PARTITIONS)
    return name


#: Records per partition in one producer batch of ``interleaved_topic``.
_ROUND = 50
#: Fetches of about one producer batch per partition (see ``interleaved_topic``).
SMALL_FETCHES = {"max.partition.fetch.bytes": 1024}


def _config(group: str, **extra: Any) -> dict[str, Any]:
    return {"group.id": group, "auto.offset.reset": "earliest", **extra}


def _take(consumer: Any, seen: Seen, count: int, timeout_s: float = 30.0) -> None:
    """Poll until ``count`` more records came (events are skipped)."""
    goal = seen.count() + count
    deadline = time.monotonic() + timeout_s
    while seen.count() < goal:
        assert time.monotonic() < deadline, f"{seen.count()} of {goal} records came"
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.add(message)


def _drain(consumer: Any, seen: Seen, timeout_s: float = 30.0) -> None:
    _take(consumer, seen, RECORDS - seen.count(), timeout_s)


def _finish_in(consumer: Any, topic: str, seen: Seen) -> None:
    """``consumer`` (of the same group) subscribes and takes the rest: every record of
    ``topic`` has then come once, in order."""
    consumer.subscribe([topic])
    _drain(consumer, seen)
    seen.assert_each_once_in_order()


def _held(make_consumer: ConsumerFactory, consumer: Any) -> int:
    """How many records our consumer holds from its last batch (confluent's: none)."""
    if not make_consumer.is_ours:
        return 0
    return len(consumer._dataplane.held)  # noqa: SLF001 - the state under test


def _assert_mid_batch(make_consumer: ConsumerFactory, consumer: Any) -> None:
    if make_consumer.is_ours:
        assert _held(make_consumer, consumer) > 0, "no record is held: not in a batch"


def _stopped_mid_batch(make_consumer: ConsumerFactory, topic: str, group: str) -> tuple[Any, Seen]:
    """A member (no auto-commit) subscribed to ``topic`` that has polled ``FIRST`` records
    and, when it is ours, still holds some of its batch."""
    consumer = make_consumer(_config(group, **{"enable.auto.commit": False}))
    consumer.subscribe([topic])
    seen = Seen()
    _take(consumer, seen, FIRST)
    _assert_mid_batch(make_consumer, consumer)
    return consumer, seen


def _positions(consumer: Any, topic: str) -> dict[int, int]:
    parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    return {tp.partition: tp.offset for tp in consumer.position(parts)}


def _expected_positions(seen: Seen) -> dict[int, int]:
    """librdkafka's positions after ``poll()``: past the last record handed out, and
    OFFSET_INVALID where none was."""
    expected = {}
    for partition in range(PARTITIONS):
        last = seen.last(partition)
        expected[partition] = OFFSET_INVALID if last is None else last + 1
    return expected


def test_positions_in_the_middle_of_a_batch_name_the_next_record_polled(
    make_consumer: ConsumerFactory, topic: str, unique_name: Callable[[str], str]
) -> None:
    consumer, seen = _stopped_mid_batch(make_consumer, topic, unique_name("g"))

    positions = _positions(consumer, topic)
    assert positions == _expected_positions(seen)

    _drain(consumer, seen)
    seen.assert_each_once_in_order()
    assert _positions(consumer, topic) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)


@pytest.mark.parametrize("commit", ["commit() then close()", "auto-commit on close()"])
def test_a_member_stopped_in_the_middle_of_a_batch_hands_on_from_the_next_record(
    make_consumer: ConsumerFactory,
    topic: str,
    unique_name: Callable[[str], str],
    commit: str,
) -> None:
    group = unique_name("g")
    explicit = commit.startswith("commit()")
    first = make_consumer(_config(group, **{"enable.auto.commit": not explicit}))
    first.subscribe([topic])
    seen = Seen()
    _take(first, seen, FIRST)
    _assert_mid_batch(make_consumer, first)
    expected = {
        p: offset for p, offset in _expected_positions(seen).items() if offset != OFFSET_INVALID
    }
    if explicit:
        # As librdkafka: every assigned partition, OFFSET_INVALID where nothing was consumed.
        committed = first.commit(asynchronous=False)
        assert {tp.partition: tp.offset for tp in committed} == _expected_positions(seen)
    first.close()

    second = make_consumer(_config(group, **{"enable.auto.commit": False}))
    parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    stored = {tp.partition: tp.offset for tp in second.committed(parts, timeout=30)}
    assert {p: o for p, o in stored.items() if o != OFFSET_INVALID} == expected
    _finish_in(second, topic, seen)


def test_a_partition_paused_in_the_middle_of_a_batch_resumes_at_its_next_record(
    make_consumer: ConsumerFactory, topic: str, unique_name: Callable[[str], str]
) -> None:
    consumer, seen = _stopped_mid_batch(make_consumer, topic, unique_name("g"))
    paused = 0 if (seen.last(0) or -1) >= (seen.last(1) or -1) else 1
    before = _positions(consumer, topic)[paused]
    consumer.pause([TopicPartition(topic, paused)])

    # Everything of the other partition comes; nothing of the paused one.
    other = 1 - paused
    goal = PER_PARTITION
    deadline = time.monotonic() + 30
    while len(seen.offsets.get(other, [])) < goal:
        assert time.monotonic() < deadline, "the unpaused partition stalled"
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            assert message.partition() == other, "a record of the paused partition came"
            seen.add(message)
    assert _positions(consumer, topic)[paused] == before, "pausing moved the position"

    consumer.resume([TopicPartition(topic, paused)])
    _drain(consumer, seen)
    seen.assert_each_once_in_order()


def test_a_seek_in_the_middle_of_a_batch_restarts_that_partition_at_the_sought_offset(
    make_consumer: ConsumerFactory, topic: str, unique_name: Callable[[str], str]
) -> None:
    consumer, seen = _stopped_mid_batch(make_consumer, topic, unique_name("g"))
    sought = 0 if seen.last(0) is not None else 1
    last = seen.last(sought)
    assert last is not None
    assert last >= 3
    consumer.seek(TopicPartition(topic, sought, 3))

    # The sought partition starts again at 3 (nothing held before the seek comes); the other
    # one goes on where it was.
    again = Seen()
    deadline = time.monotonic() + 30
    while len(again.offsets.get(sought, [])) < 5:
        assert time.monotonic() < deadline, "no record after the seek"
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            again.add(message)
    assert again.offsets[sought][:5] == [3, 4, 5, 6, 7]
    other = 1 - sought
    continued = again.offsets.get(other, [])
    start = (seen.last(other) or -1) + 1
    assert continued == list(range(start, start + len(continued)))


def test_consume_after_polling_part_of_a_batch_goes_on_from_the_next_record(
    make_consumer: ConsumerFactory, topic: str, unique_name: Callable[[str], str]
) -> None:
    consumer, seen = _stopped_mid_batch(make_consumer, topic, unique_name("g"))

    deadline = time.monotonic() + 30
    while seen.count() < RECORDS:
        assert time.monotonic() < deadline, f"{seen.count()} of {RECORDS} records came"
        for message in consumer.consume(100, 0.5):
            if message.error() is None:
                seen.add(message)
    seen.assert_each_once_in_order()


def _held_partitions(make_consumer: ConsumerFactory, consumer: Any) -> set[int | None]:
    """The partitions our consumer holds records of (confluent's: none)."""
    if not make_consumer.is_ours:
        return set()
    held = consumer._dataplane.held._queue  # noqa: SLF001 - the state under test
    return {message.partition() for message in list(held)}


def test_a_rebalance_in_the_middle_of_a_batch_loses_and_repeats_nothing(
    make_consumer: ConsumerFactory,
    interleaved_topic: str,
    unique_name: Callable[[str], str],
) -> None:
    group = unique_name("g")
    topic = interleaved_topic
    revoked: list[int] = []
    first = make_consumer(_config(group, **SMALL_FETCHES))
    first.subscribe(
        [topic], on_revoke=lambda _c, parts: revoked.extend(tp.partition for tp in parts)
    )
    seen = Seen()
    _take(first, seen, FIRST)
    if make_consumer.is_ours:
        # Whichever partition the joiner takes, the first member holds records of it.
        while _held_partitions(make_consumer, first) != set(range(PARTITIONS)):
            assert seen.count() < RECORDS // 4, "no batch held records of every partition"
            _take(first, seen, 1)
    held_before = _held_partitions(make_consumer, first)

    second = make_consumer(_config(group, **SMALL_FETCHES))
    second.subscribe([topic])
    if make_consumer.is_ours:
        # The first member does not poll until its member waits for on_revoke, so what it
        # holds when the revocation is served is what it holds now.
        def revocation_waits() -> bool:
            message = second.poll(0.05)
            if message is not None and message.error() is None:
                seen.add(message)
            return bool(first.state != "STABLE")

        wait_until(revocation_waits, 30, "the first member's revocation")
    # Both poll on this thread, one record at a time, until every record came.
    deadline = time.monotonic() + 60
    while seen.count() < RECORDS:
        assert time.monotonic() < deadline, f"{seen.count()} of {RECORDS} records came"
        for member in (first, second):
            message = member.poll(0.01)
            if message is not None and message.error() is None:
                seen.add(message)
    assert revoked, "the joiner took nothing from the first member"
    if make_consumer.is_ours:
        assert set(revoked) <= held_before
    for partition in range(PARTITIONS):
        got = seen.offsets.get(partition, [])
        assert sorted(got) == list(range(PER_PARTITION)), (
            f"partition {partition}: {len(got)} records, {len(got) - len(set(got))} repeated"
        )


def test_unsubscribing_in_the_middle_of_a_batch_hands_out_nothing_held_afterwards(
    make_consumer: ConsumerFactory, topic: str, unique_name: Callable[[str], str]
) -> None:
    group = unique_name("g")
    revoked: list[int] = []
    first = make_consumer(_config(group))
    first.subscribe(
        [topic], on_revoke=lambda _c, parts: revoked.extend(tp.partition for tp in parts)
    )
    seen = Seen()
    _take(first, seen, FIRST)
    _assert_mid_batch(make_consumer, first)

    first.unsubscribe()
    # on_revoke runs in a poll (and commits what was consumed); no record comes after it.
    deadline = time.monotonic() + 10
    while not revoked:
        assert time.monotonic() < deadline, "on_revoke did not run"
        message = first.poll(0.1)
        if message is not None and message.error() is None:
            seen.add(message)
    for _ in range(20):
        message = first.poll(0.05)
        assert message is None or message.error() is not None, "a record after on_revoke"

    _finish_in(make_consumer(_config(group)), topic, seen)


def test_the_async_consumer_stopped_in_the_middle_of_a_batch_commits_its_next_record(
    kafka_bootstrap: str, topic: str, unique_name: Callable[[str], str]
) -> None:
    """``consumer.aio`` takes held records inline (our consumer whatever the tier drives)."""
    settings = {"bootstrap.servers": kafka_bootstrap, **_config(unique_name("g"))}
    settings["enable.auto.commit"] = False
    seen = Seen()

    async def first_member() -> tuple[list[TopicPartition], list[TopicPartition]]:
        async with AsyncConsumer(settings) as consumer:
            consumer.subscribe([topic])
            while seen.count() < FIRST:
                message = await consumer.poll(0.5)
                if message is not None and message.error() is None:
                    seen.add(message)
            assert len(consumer._consumer._dataplane.held) > 0, "no record is held"  # noqa: SLF001
            positions = consumer.position([TopicPartition(topic, p) for p in range(PARTITIONS)])
            committed = await consumer.commit(asynchronous=False)
            assert committed is not None
            return positions, committed

    positions, committed = asyncio.run(first_member())
    expected = _expected_positions(seen)
    assert {tp.partition: tp.offset for tp in positions} == expected
    assert {tp.partition: tp.offset for tp in committed} == expected
    second = Consumer(settings)
    try:
        _finish_in(second, topic, seen)
    finally:
        second.close()
