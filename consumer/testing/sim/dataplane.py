"""The simulated data plane of a :class:`~consumer.testing.sim.FakeConsumer`.

It plays the part librdkafka plays in assign mode for :class:`consumer.Consumer`: it fetches the
partitions it is given from their start offsets (absolute, or OFFSET_BEGINNING / OFFSET_END /
OFFSET_STORED as the reset policy maps them), hands out records one at a time as
``confluent_kafka.Message`` objects, keeps each partition's position (the next offset to return),
and honours pause, resume and seek. Records come from the cluster's in-memory logs, partition by
partition in turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    KafkaError,
    Message,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._client.errors import kafka_exception
from consumer.testing.sim.topics import SimTopics

__all__ = ["SimDataPlane"]

TopicPartitionKey = tuple[str, int]


class SimDataPlane:
    """Positions and fetching of the partitions assigned to one fake consumer."""

    def __init__(self, topics: SimTopics) -> None:
        self._topics = topics
        #: Next offset to return per assigned partition (None: no valid position, reset error).
        self._positions: dict[TopicPartitionKey, int | None] = {}
        #: What the application has seen: set by a returned record or a seek (as librdkafka's).
        self._app_positions: dict[TopicPartitionKey, int] = {}
        self._paused: set[TopicPartitionKey] = set()
        self._reset_errors_due: list[TopicPartitionKey] = []
        self._turn = 0

    @property
    def has_assignment(self) -> bool:
        """True when at least one partition is assigned."""
        return bool(self._positions)

    @property
    def assigned(self) -> frozenset[TopicPartitionKey]:
        """The partitions records are fetched for."""
        return frozenset(self._positions)

    def assign(self, start_offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Start fetching each partition at its offset (absolute or logical)."""
        for key, offset in start_offsets.items():
            if key in self._positions:
                continue
            self._positions[key] = self._resolve(key, offset)

    def _resolve(self, key: TopicPartitionKey, offset: int) -> int | None:
        if offset == OFFSET_BEGINNING:
            return 0
        if offset == OFFSET_END:
            return self._topics.high_watermark(*key)
        if offset >= 0:
            return offset
        self._reset_errors_due.append(key)  # OFFSET_STORED with auto.offset.reset=error
        return None

    def unassign(self, partitions: Iterable[TopicPartitionKey]) -> None:
        """Stop fetching these partitions (their positions and pause state are dropped)."""
        for key in partitions:
            self._positions.pop(key, None)
            self._app_positions.pop(key, None)
            self._paused.discard(key)

    def positions(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """The offset after the last record returned (or the last seek), per partition.

        As librdkafka's: a partition from which nothing was returned yet has no position.
        """
        return {key: self._app_positions[key] for key in partitions if key in self._app_positions}

    def pause(self, partitions: Sequence[KafkaTopicPartition]) -> None:
        """Stop returning records of these partitions until :meth:`resume`."""
        self._paused.update((tp.topic, tp.partition) for tp in partitions)

    def resume(self, partitions: Sequence[KafkaTopicPartition]) -> None:
        """Resume partitions paused with :meth:`pause`."""
        self._paused.difference_update((tp.topic, tp.partition) for tp in partitions)

    def seek(self, partition: KafkaTopicPartition) -> None:
        """Move the position of an assigned partition (absolute or logical offset)."""
        key = (partition.topic, partition.partition)
        if key not in self._positions:
            raise kafka_exception(  # the real consumer's error (librdkafka's)
                KafkaError._STATE,
                f"Failed to seek to offset {partition.offset}: Local: Erroneous state",
            )
        if partition.offset < 0 and partition.offset not in (OFFSET_BEGINNING, OFFSET_END):
            raise kafka_exception(
                KafkaError._INVALID_ARG,
                f"seek() needs an absolute offset, OFFSET_BEGINNING or OFFSET_END, "
                f"got {partition.offset}",
            )
        position = self._resolve(key, partition.offset)
        self._positions[key] = position
        if position is not None:
            self._app_positions[key] = position

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """Low and high watermark of a partition (the logs are never truncated: low is 0)."""
        return 0, self._topics.high_watermark(topic, partition)

    def ready(self) -> bool:
        """True when :meth:`next_message` would return something now."""
        return bool(self._reset_errors_due) or any(self._available(key) for key in self._positions)

    def _available(self, key: TopicPartitionKey) -> bool:
        position = self._positions.get(key)
        return (
            key not in self._paused
            and position is not None
            and position < self._topics.high_watermark(*key)
        )

    def next_message(self) -> Message | None:
        """The next record (partitions take turns), a reset error, or None when none is ready."""
        if self._reset_errors_due:
            topic, partition = self._reset_errors_due.pop(0)
            error = KafkaError(
                KafkaError._AUTO_OFFSET_RESET,
                f"no committed offset for {topic}[{partition}] and auto.offset.reset=error",
            )
            return Message(topic=topic, partition=partition, error=error)
        keys = sorted(self._positions)
        for step in range(len(keys)):
            key = keys[(self._turn + step) % len(keys)]
            if self._available(key):
                self._turn = (self._turn + step + 1) % len(keys)
                return self._take(key)
        return None

    def _take(self, key: TopicPartitionKey) -> Message:
        position = self._positions[key]
        assert position is not None
        record = self._topics.log(*key)[position]
        self._positions[key] = position + 1
        self._app_positions[key] = position + 1
        return record.message()
