"""``consumer.aio.AsyncConsumer`` against the real broker: records, commits, callbacks on the
event loop, a rebalance while the loop is busy, and cancelled polls that lose nothing."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Message, TopicPartition
from consumer_support import make_producer, produce_numbered

from consumer import Consumer, ConsumerClosedError
from consumer.aio import AsyncConsumer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

Record = tuple[int, int, int]  # partition, offset, value


def config(bootstrap: str, group: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        **extra,
    }


def record_of(message: Message) -> Record:
    assert message.error() is None, message.error()
    return message.partition() or 0, message.offset() or 0, int(message.value() or b"")


async def poll_records(consumer: AsyncConsumer, count: int, timeout_s: float) -> list[Record]:
    """Poll until ``count`` records came, failing after ``timeout_s``."""
    records: list[Record] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count:
        assert time.monotonic() < deadline, f"{len(records)} of {count} records in {timeout_s} s"
        message = await consumer.poll(0.5)
        if message is not None:
            records.append(record_of(message))
    return records


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        probe.subscribe([topic])  # committed() speaks for the group through a member
        result = probe.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
        return [tp.offset for tp in result]
    finally:
        probe.close()


async def test_async_for_consume_and_commit_then_async_with_closes(
    kafka_bootstrap: str, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic, group = create_topic(partitions=3), unique_name("group")
    produce_numbered(make_producer(kafka_bootstrap), topic, 0, 300, 3)
    settings = config(kafka_bootstrap, group, **{"enable.auto.commit": False})
    records: list[Record] = []
    async with AsyncConsumer(settings) as consumer:
        consumer.subscribe([topic])
        batch = await consumer.consume(50, timeout=30)
        records.extend(record_of(m) for m in batch)
        assert 1 <= len(batch) <= 50
        async for message in consumer:
            records.append(record_of(message))
            if len(records) == 300:
                break
        committed = await consumer.commit()
        assert sorted((tp.partition, tp.offset) for tp in committed or []) == [
            (0, 100),
            (1, 100),
            (2, 100),
        ]
        parts = [TopicPartition(topic, p) for p in range(3)]
        assert [tp.offset for tp in await consumer.committed(parts, timeout=10)] == [100] * 3
        assert consumer.state == "STABLE"
    assert sorted(value for _p, _o, value in records) == list(range(300))
    with pytest.raises(ConsumerClosedError):
        await consumer.poll(0)
    # The member left the group on close: a new member of the group starts where it committed.
    assert committed_offsets(kafka_bootstrap, group, topic, 3) == [100, 100, 100]


async def test_callbacks_plain_and_async_run_on_the_loop_before_records(
    kafka_bootstrap: str, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic, group = create_topic(partitions=2), unique_name("group")
    produce_numbered(make_producer(kafka_bootstrap), topic, 0, 100, 2)
    loop_thread = threading.get_ident()
    events: list[str] = []

    async def on_assign(consumer: AsyncConsumer, partitions: list[TopicPartition]) -> None:
        assert threading.get_ident() == loop_thread
        events.append("assign started")
        await asyncio.sleep(0.2)  # a slow coroutine: the rebalance waits for it
        assert consumer.assignment() == [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        events.append("assign done")

    async def on_revoke(consumer: AsyncConsumer, partitions: list[TopicPartition]) -> None:
        assert threading.get_ident() == loop_thread
        # Inside on_revoke the partitions are still owned: commit their positions, awaited.
        await consumer.commit(offsets=consumer.position(partitions))
        events.append(f"revoked {len(partitions)}")

    settings = config(kafka_bootstrap, group, **{"enable.auto.commit": False})
    consumer = AsyncConsumer(settings)
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    first = await consumer.poll(30)
    assert first is not None
    events.append("first record")
    records = [record_of(first), *await poll_records(consumer, 99, 30)]
    await consumer.close()
    assert events == ["assign started", "assign done", "first record", "revoked 2"]
    assert sorted(value for _p, _o, value in records) == list(range(100))
    assert committed_offsets(kafka_bootstrap, group, topic, 2) == [50, 50]


async def test_cancelled_polls_lose_no_record(
    kafka_bootstrap: str, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic, group = create_topic(partitions=2), unique_name("group")
    producer = make_producer(kafka_bootstrap)
    assign_started, assign_may_finish = asyncio.Event(), asyncio.Event()

    async def on_assign(_consumer: AsyncConsumer, _partitions: list[TopicPartition]) -> None:
        assign_started.set()
        await assign_may_finish.wait()

    async with AsyncConsumer(config(kafka_bootstrap, group)) as consumer:
        consumer.subscribe([topic], on_assign=on_assign)
        # A poll cancelled while the async on_assign is parked: the callback goes on, and the
        # next poll completes the rebalance.
        task = asyncio.create_task(consumer.poll(30))
        await asyncio.wait_for(assign_started.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assign_may_finish.set()
        assert await consumer.poll(0.5) is None
        assert len(consumer.assignment()) == 2

        # One record at a time: first a poll that waits for it (none is there yet) is
        # cancelled; then polls are started and cancelled at random moments until one returns
        # it, so cancellations hit polls before, while and after they take the record.
        rng = random.Random(848)
        records: list[Record] = []
        cancelled = 0
        deadline = time.monotonic() + 60
        for value in range(200):
            waiting = asyncio.create_task(consumer.poll(5))
            await asyncio.sleep(0)  # its first step: no record, so it waits on the loop
            assert waiting.cancel(), f"the poll before record {value} returned {waiting!r}"
            with pytest.raises(asyncio.CancelledError):
                await waiting
            producer.produce(topic, str(value).encode(), partition=value % 2)
            assert producer.flush(10) == 0
            while len(records) <= value:
                assert time.monotonic() < deadline, f"{len(records)} records, {cancelled} cancels"
                task = asyncio.create_task(consumer.poll(5))
                await asyncio.sleep(rng.choice((0, 0.0005, 0.001, 0.002, 0.005, 0.02)))
                if task.cancel():
                    try:
                        message = await task
                    except asyncio.CancelledError:
                        cancelled += 1
                        continue
                else:
                    message = task.result()
                if message is not None:
                    records.append(record_of(message))
        assert [value for _p, _o, value in records] == list(range(200))
        assert cancelled > 0
        assert await consumer.poll(0.2) is None  # nothing more: no record came twice
        assert consumer.state == "STABLE"


async def test_rebalance_while_the_loop_is_busy(
    kafka_bootstrap: str, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic, group = create_topic(partitions=4), unique_name("group")
    producer = make_producer(kafka_bootstrap)
    produce_numbered(producer, topic, 0, 400, 4)
    loop_thread = threading.get_ident()
    callbacks: list[tuple[str, int, bool]] = []

    def on_assign(_consumer: AsyncConsumer, partitions: list[TopicPartition]) -> None:
        callbacks.append(("assign", len(partitions), threading.get_ident() == loop_thread))

    async def on_revoke(_consumer: AsyncConsumer, partitions: list[TopicPartition]) -> None:
        callbacks.append(("revoke", len(partitions), threading.get_ident() == loop_thread))

    first: list[Record] = []
    second: list[Record] = []
    second_stop = threading.Event()

    def second_member() -> None:
        member = Consumer(config(kafka_bootstrap, group))
        member.subscribe([topic])
        try:
            while not second_stop.is_set():
                message = member.poll(0.1)
                if message is not None:
                    second.append(record_of(message))
        finally:
            member.close()

    async with AsyncConsumer(config(kafka_bootstrap, group)) as consumer:
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        first.extend(await poll_records(consumer, 20, 30))
        assert len(consumer.assignment()) == 4
        thread = threading.Thread(target=second_member, name="second member")
        thread.start()
        try:
            # Each record takes 5 ms of CPU on the loop thread (the loop is blocked), and a
            # slow coroutine yields 5 ms more, while the second member joins.
            deadline = time.monotonic() + 40
            while len(first) + len(second) < 400 or len(consumer.assignment()) != 2:
                assert time.monotonic() < deadline, (
                    f"{len(first)} + {len(second)} records, assignment {consumer.assignment()}"
                )
                message = await consumer.poll(0.1)
                if message is not None:
                    first.append(record_of(message))
                    busy_until = time.monotonic() + 0.005
                    while time.monotonic() < busy_until:
                        pass
                    await asyncio.sleep(0.005)
        finally:
            second_stop.set()
            await asyncio.to_thread(thread.join, 30)
    assert ("revoke", 2, True) in callbacks
    assert all(on_loop for _kind, _count, on_loop in callbacks)
    assert second, "the second member got no record"
    counts = Counter(value for _p, _o, value in first + second)
    assert sorted(counts) == list(range(400))
    assert [value for value, n in counts.items() if n > 1] == []


async def test_polls_take_the_fast_path_and_still_the_full_path_every_budget(
    kafka_bootstrap: str, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    """``poll()`` runs ``Consumer.poll``'s fast path inline; the full path's duties (liveness,
    consumed offsets, the background's events: the full path itself, or the budget's renewal)
    must still run once per ``FAST_POLL_BUDGET`` records. Counted where the poll is stamped."""
    from consumer._client.polling import FAST_POLL_BUDGET

    total = 16 * FAST_POLL_BUDGET
    topic, group = create_topic(partitions=1), unique_name("group")
    produce_numbered(make_producer(kafka_bootstrap), topic, 0, total, 1)
    async with AsyncConsumer(config(kafka_bootstrap, group)) as consumer:
        consumer.subscribe([topic])
        records = await poll_records(consumer, 1, 60)  # joined, records flowing
        full_polls = 0
        sync = consumer._consumer
        signal_poll = sync._signal_poll

        def counting() -> None:
            nonlocal full_polls
            full_polls += 1
            signal_poll()

        sync._signal_poll = counting  # type: ignore[method-assign]
        records += await poll_records(consumer, total - 1, 60)
        assert [value for _p, _o, value in records] == list(range(total))
        # At least one full poll per budget after the first record; far fewer than one per record.
        assert total // FAST_POLL_BUDGET - 1 <= full_polls < total // 4, full_polls
