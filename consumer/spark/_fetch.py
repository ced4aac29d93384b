"""Executor side: read an offset range with an assign-mode ``confluent_kafka.Consumer``.

A fetcher never subscribes and never commits, so it never joins the group and needs no member
epoch. Python workers are reused across tasks, so fetchers are cached per worker by
configuration (as Spark's JVM Kafka source pools its consumers); a task retry drops the cached
fetcher first. No pyspark import at module level: this also runs in plain Python.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from consumer._client.librdkafka import LibrdkafkaConsumer, assign_mode_consumer
from consumer.spark._spec import OffsetRange

_log = logging.getLogger("consumer.spark")

#: The schema of every DataFrame of records, as Spark's own Kafka source (without timestampType).
RECORD_SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, headers array<struct<key: string, value: binary>>"
)
RecordRow = tuple[
    bytes | None,
    bytes | None,
    str,
    int,
    int,
    datetime | None,
    list[tuple[str, bytes | None]] | None,
]

_CACHE_SIZE = 4
_cache: OrderedDict[str, LibrdkafkaConsumer] = OrderedDict()
_cache_lock = threading.Lock()


def _cache_key(config: Mapping[str, Any]) -> str:
    return json.dumps(sorted((k, repr(v)) for k, v in config.items()))


def _retried_task() -> bool:
    try:
        from pyspark import TaskContext  # lazy: only inside a Spark task
    except ImportError:  # pragma: no cover - pyspark is part of the spark extra
        return False
    context = TaskContext.get()
    return context is not None and context.attemptNumber() > 0


def acquire_fetcher(config: Mapping[str, Any]) -> LibrdkafkaConsumer:
    """A cached assign-mode consumer for ``config`` (a fresh one in a retried task)."""
    key = _cache_key(config)
    with _cache_lock:
        fetcher = _cache.pop(key, None)
        if fetcher is not None and _retried_task():
            fetcher.close()
            fetcher = None
    return fetcher if fetcher is not None else assign_mode_consumer(config)


def release_fetcher(config: Mapping[str, Any], fetcher: LibrdkafkaConsumer) -> None:
    """Return a fetcher to the cache (closing the least recently used beyond the limit)."""
    key = _cache_key(config)
    evicted: list[LibrdkafkaConsumer] = []
    with _cache_lock:
        previous = _cache.pop(key, None)
        if previous is not None:
            evicted.append(previous)
        _cache[key] = fetcher
        while len(_cache) > _CACHE_SIZE:
            evicted.append(_cache.popitem(last=False)[1])
    for old in evicted:
        old.close()


def close_cached_fetchers() -> None:
    """Close every cached fetcher of this process."""
    with _cache_lock:
        fetchers = list(_cache.values())
        _cache.clear()
    for fetcher in fetchers:
        fetcher.close()


def to_timestamp(message: Message) -> datetime | None:
    """The record timestamp as an aware UTC datetime (None when the record has none)."""
    kind, value = message.timestamp()
    if kind == 0 or value is None or value < 0:  # TIMESTAMP_NOT_AVAILABLE
        return None
    return datetime.fromtimestamp(value / 1000, tz=UTC)


def _headers(headers: Any) -> list[tuple[str, bytes | None]] | None:
    if headers is None:
        return None
    result: list[tuple[str, bytes | None]] = []
    for key, value in headers:
        result.append((str(key), value.encode() if isinstance(value, str) else value))
    return result


def to_row(message: Message) -> RecordRow:
    """One record as a row of :data:`RECORD_SCHEMA_DDL`."""
    headers = message.headers()
    return (
        message.key(),
        message.value(),
        message.topic() or "",
        message.partition() or 0,
        message.offset() or 0,
        to_timestamp(message),
        _headers(headers),
    )


def read_range(
    config: Mapping[str, Any],
    offset_range: OffsetRange,
    *,
    batch_size: int = 5000,
    stall_timeout_s: float = 60.0,
) -> Iterator[RecordRow]:
    """Yield the records of ``offset_range`` in offset order, then stop.

    Stops at ``end`` even when offsets have gaps (compaction): the fetch position, not the last
    record, decides. Raises ``TimeoutError`` when no progress is made for ``stall_timeout_s``
    (for example when the range ends past the records that still exist).
    """
    if offset_range.count == 0:
        return
    fetcher = acquire_fetcher(config)
    healthy = False
    tp = TopicPartition(offset_range.topic, offset_range.partition, offset_range.start)
    fetcher.assign([tp])
    try:
        position = offset_range.start
        last_progress = time.monotonic()
        while position < offset_range.end:
            wanted = min(batch_size, offset_range.end - position)
            messages = fetcher.consume(wanted, 1.0)
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(error)
                offset = message.offset() or 0
                if offset >= offset_range.end:
                    position = offset_range.end
                    break
                position = offset + 1
                yield to_row(message)
            if messages:
                last_progress = time.monotonic()
                continue
            (current,) = fetcher.position([TopicPartition(tp.topic, tp.partition)])
            if current.offset >= offset_range.end:
                break
            if time.monotonic() - last_progress > stall_timeout_s:
                raise TimeoutError(
                    f"no records of {offset_range} for {stall_timeout_s} s (at offset {position})"
                )
        healthy = True
    finally:
        try:
            fetcher.unassign()
        except KafkaException:
            healthy = False
        if healthy:
            release_fetcher(config, fetcher)
        else:
            fetcher.close()
