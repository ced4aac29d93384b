"""AsyncConsumer without a group (no broker needed): close() ends waiting polls and iteration,
concurrent closes, calls after close, and a commit before subscribe()."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import KafkaException, TopicPartition

from consumer import ConsumerClosedError
from consumer.aio import AsyncConsumer

CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}


async def _next(consumer: AsyncConsumer) -> list[object]:
    return [message async for message in consumer]


@pytest.mark.asyncio
async def test_close_ends_waiting_polls_consumes_and_iteration() -> None:
    consumer = AsyncConsumer(CONFIG)
    polling = asyncio.create_task(consumer.poll(None))
    consuming = asyncio.create_task(consumer.consume(10, timeout=60))
    iterating = asyncio.create_task(_next(consumer))
    await asyncio.sleep(0)  # one step each: they wait (nothing is assigned)
    assert [task.done() for task in (polling, consuming, iterating)] == [False] * 3
    await asyncio.gather(consumer.close(), consumer.close())
    assert await asyncio.wait_for(polling, 5) is None
    assert await asyncio.wait_for(consuming, 5) == []
    assert await asyncio.wait_for(iterating, 5) == []
    for call in (consumer.poll(0), consumer.consume(1, 0), consumer.commit()):
        with pytest.raises(ConsumerClosedError):
            await call
    await consumer.close()  # again: nothing to do


@pytest.mark.asyncio
async def test_poll_times_out_and_a_commit_without_a_broker_times_out() -> None:
    async with AsyncConsumer(CONFIG) as consumer:
        assert await consumer.poll(0.05) is None
        assert await consumer.consume(5, timeout=0.05) == []
        # Without subscribe() the commit goes out as a non-member's (as confluent-kafka's
        # does); nothing listens at the bootstrap address, so it times out.
        with pytest.raises(KafkaException, match="_TIMED_OUT"):
            await consumer.commit(offsets=[TopicPartition("t", 0, 5)])
