"""Consumers under uvloop, in a child process (``test_event_loop_libraries.py``).

The event-loop policy must be set before the process's first consumer starts the shared
background loop, so each mode runs in a fresh interpreter:

* ``install``: ``uvloop.install()`` first. Every loop the process creates is a uvloop loop: the
  background loop of ``Consumer`` and ``AsyncConsumer``, the share member's loop, the
  application's ``asyncio.run``. A ``Consumer``, an ``AsyncConsumer`` and a ``ShareConsumer``
  each read the topic in their own group and commit (the share consumer acknowledges).
* ``run``: ``uvloop.run(main())``. Only the application's loop is uvloop; an ``AsyncConsumer``
  reads and commits from it, its background loop is asyncio's.

It prints one JSON line: the loop classes it saw, what each consumer read and committed, and the
error records the ``asyncio`` logger received (an exception in a loop callback is logged there
and otherwise invisible: a consumer whose connections fail that way just never gets
partitions).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from typing import Any

import uvloop
from confluent_kafka import TopicPartition

from consumer import Consumer, ShareConsumer
from consumer._runtime import shared_loop
from consumer.aio import AsyncConsumer

READ_TIMEOUT_S = 30.0


class ErrorRecords(logging.Handler):
    """Keeps the message of every ERROR record the ``asyncio`` logger emits."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def background_loop_class() -> str:
    """The class of the shared background loop (a consumer of the process holds it open)."""
    current = shared_loop._current  # noqa: SLF001 - which loop the runtime made
    assert current is not None, "no background loop is running"
    return type(current.loop).__name__


def committed_sum(consumer: Consumer, topic: str, partitions: int) -> int:
    committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
    return sum(max(0, tp.offset) for tp in committed)


def group_config(spec: dict[str, Any], suffix: str) -> dict[str, Any]:
    """A consumer of a group of its own (``suffix``) reading from the start, committing itself."""
    return {
        "bootstrap.servers": spec["bootstrap"],
        "group.id": spec["group"] + suffix,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }


def read_with_consumer(spec: dict[str, Any]) -> dict[str, Any]:
    consumer = Consumer(group_config(spec, "-sync"))
    try:
        consumer.subscribe([spec["topic"]])
        values: set[bytes] = set()
        end = time.monotonic() + READ_TIMEOUT_S
        while len(values) < spec["records"] and time.monotonic() < end:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(message.value())
        loop_class = background_loop_class()
        consumer.commit(asynchronous=False)
        committed = committed_sum(consumer, spec["topic"], spec["partitions"])
    finally:
        consumer.close()
    return {"read": len(values), "committed": committed, "background_loop": loop_class}


async def read_with_async_consumer(spec: dict[str, Any], suffix: str) -> dict[str, Any]:
    consumer = AsyncConsumer(group_config(spec, suffix))
    try:
        consumer.subscribe([spec["topic"]])
        values: set[bytes] = set()
        end = time.monotonic() + READ_TIMEOUT_S
        while len(values) < spec["records"] and time.monotonic() < end:
            message = await consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(message.value())
        loop_class = background_loop_class()
        await consumer.commit(asynchronous=False)
        partitions = [TopicPartition(spec["topic"], p) for p in range(spec["partitions"])]
        committed = sum(max(0, tp.offset) for tp in await consumer.committed(partitions, 10))
    finally:
        await consumer.close()
    return {
        "read": len(values),
        "committed": committed,
        "background_loop": loop_class,
        "application_loop": type(asyncio.get_running_loop()).__name__,
    }


def read_with_share_consumer(spec: dict[str, Any]) -> dict[str, Any]:
    consumer = ShareConsumer({"bootstrap.servers": spec["bootstrap"], "group.id": spec["share"]})
    try:
        consumer.subscribe([spec["topic"]])
        values: set[bytes] = set()
        end = time.monotonic() + READ_TIMEOUT_S
        while len(values) < spec["records"] and time.monotonic() < end:
            for message in consumer.poll(0.5):
                if message.error() is None:
                    values.add(message.value())
        consumer.commit_sync()
    finally:
        consumer.close()
    return {"read": len(values)}


def main() -> None:
    spec = json.loads(sys.argv[1])
    errors = ErrorRecords()
    logging.getLogger("asyncio").addHandler(errors)
    result: dict[str, Any] = {}
    if spec["mode"] == "install":
        uvloop.install()
        result["new_event_loop"] = type(asyncio.new_event_loop()).__name__
        result["consumer"] = read_with_consumer(spec)
        result["async_consumer"] = asyncio.run(read_with_async_consumer(spec, "-async"))
        result["share_consumer"] = read_with_share_consumer(spec)
    else:
        result["async_consumer"] = uvloop.run(read_with_async_consumer(spec, "-uvrun"))
    result["asyncio_errors"] = errors.messages
    print(json.dumps(result))


if __name__ == "__main__":
    main()
