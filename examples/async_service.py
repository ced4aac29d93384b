"""An asyncio service that consumes with ``AsyncConsumer`` and shuts down gracefully on SIGTERM.

    python examples/async_service.py BOOTSTRAP TOPIC GROUP

Each record is handled by a coroutine; the offsets of handled records are committed every
``COMMIT_EVERY`` records, in ``on_revoke`` (an ``async def``: the rebalance waits for it) and at
shutdown. On SIGTERM (or Ctrl-C) the consuming task is cancelled, which is safe at any point:
a cancelled ``poll()`` loses no record, and a record whose handling was cancelled is not
committed, so it is delivered again after a restart (at-least-once). The service then commits
what it handled and closes the consumer, which leaves the group at once.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

from confluent_kafka import Message, TopicPartition

from consumer.aio import AsyncConsumer

COMMIT_EVERY = 100


class Handled:
    """The next offset to commit per partition: one past the last handled record."""

    def __init__(self) -> None:
        self.next_offsets: dict[tuple[str, int], int] = {}

    def add(self, message: Message) -> None:
        key = (message.topic() or "", message.partition() or 0)
        self.next_offsets[key] = (message.offset() or 0) + 1

    def offsets(self, partitions: list[TopicPartition] | None = None) -> list[TopicPartition]:
        """The offsets to commit (of ``partitions`` only, when given)."""
        wanted = None if partitions is None else {(tp.topic, tp.partition) for tp in partitions}
        return [
            TopicPartition(topic, partition, offset)
            for (topic, partition), offset in sorted(self.next_offsets.items())
            if wanted is None or (topic, partition) in wanted
        ]

    def forget(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.next_offsets.pop((tp.topic, tp.partition), None)


async def handle(message: Message) -> None:
    """Stand-in for the application's work (a database write, an HTTP call, ...)."""
    await asyncio.sleep(0)
    print(f"processed {message.topic()}/{message.partition()}@{message.offset()}", flush=True)


async def consume(consumer: AsyncConsumer, handled: Handled) -> None:
    count = 0
    async for message in consumer:
        if message.error() is not None:
            print(f"consumer error: {message.error()}", file=sys.stderr, flush=True)
            continue
        await handle(message)
        handled.add(message)
        count += 1
        if count % COMMIT_EVERY == 0:
            await consumer.commit(offsets=handled.offsets())


async def run(bootstrap_servers: str, topic: str, group_id: str) -> None:
    consumer = AsyncConsumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    handled = Handled()

    async def on_revoke(c: Any, partitions: list[TopicPartition]) -> None:
        # Still owned here: hand the partitions over with everything handled committed.
        offsets = handled.offsets(partitions)
        if offsets:
            await c.commit(offsets=offsets)
        handled.forget(partitions)

    consumer.subscribe([topic], on_revoke=on_revoke, on_lost=lambda _c, p: handled.forget(p))
    worker = asyncio.create_task(consume(consumer, handled), name="consume")
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, worker.cancel)
    print("started", flush=True)
    try:
        await asyncio.wait({worker})  # returns when the worker ends or is cancelled
        if not worker.cancelled():
            worker.result()  # raises what ended the worker
    finally:
        offsets = handled.offsets()
        if offsets:
            await consumer.commit(offsets=offsets)
        await consumer.close()
        print("stopped", flush=True)


def main(bootstrap_servers: str, topic: str, group_id: str) -> None:
    asyncio.run(run(bootstrap_servers, topic, group_id))


if __name__ == "__main__":
    main(*sys.argv[1:4])
