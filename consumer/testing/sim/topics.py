"""In-memory topics for the simulated cluster: partition logs of records, offsets from 0."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, Message

__all__ = ["Header", "SimRecord", "SimTopics"]

#: One record header: ``(key, value)``, as confluent-kafka returns them.
Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class SimRecord:
    """One record stored in a partition log."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp_ms: int

    def message(self, delivery_count: int | None = None) -> Message:
        """This record as a ``confluent_kafka.Message`` (with ``delivery_count`` for a share
        consumer's delivery)."""
        # confluent-kafka's Message refuses delivery_count=None: pass it only for a share delivery.
        share: dict[str, Any] = {} if delivery_count is None else {"delivery_count": delivery_count}
        return Message(
            topic=self.topic,
            partition=self.partition,
            offset=self.offset,
            key=self.key,
            value=self.value,
            headers=list(self.headers) or None,
            timestamp=(TIMESTAMP_CREATE_TIME, self.timestamp_ms),
            **share,
        )


@dataclass
class SimTopics:
    """The topics of one simulated cluster: name -> partition logs."""

    logs: dict[str, list[list[SimRecord]]] = field(default_factory=dict)

    def create(self, name: str, partitions: int) -> None:
        """Create ``name`` with ``partitions`` empty logs; refuses an existing name."""
        if name in self.logs:
            raise ValueError(f"topic {name!r} already exists")
        if partitions < 1:
            raise ValueError(f"partitions must be at least 1, got {partitions}")
        self.logs[name] = [[] for _ in range(partitions)]

    def grow(self, name: str, partitions: int) -> None:
        """Grow ``name`` to ``partitions`` partitions (counts only grow)."""
        logs = self._logs(name)
        if partitions <= len(logs):
            raise ValueError(
                f"topic {name!r} has {len(logs)} partitions; partitions must be more than that"
            )
        logs.extend([] for _ in range(partitions - len(logs)))

    def partitions(self, name: str) -> int:
        """How many partitions ``name`` has."""
        return len(self._logs(name))

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp_ms: int,
    ) -> SimRecord:
        """Append one record to ``topic[partition]`` and return it (with its offset)."""
        log = self.log(topic, partition)
        record = SimRecord(topic, partition, len(log), key, value, tuple(headers), timestamp_ms)
        log.append(record)
        return record

    def log(self, topic: str, partition: int) -> list[SimRecord]:
        """The records of ``topic[partition]``."""
        logs = self._logs(topic)
        if not 0 <= partition < len(logs):
            raise ValueError(
                f"partition {partition} of topic {topic!r} does not exist: "
                f"expected 0..{len(logs) - 1}"
            )
        return logs[partition]

    def high_watermark(self, topic: str, partition: int) -> int:
        """The offset the next record of ``topic[partition]`` gets."""
        return len(self.log(topic, partition))

    def _logs(self, name: str) -> list[list[SimRecord]]:
        logs = self.logs.get(name)
        if logs is None:
            known = ", ".join(sorted(self.logs)) or "none"
            raise ValueError(f"unknown topic {name!r}; known topics: {known}")
        return logs
