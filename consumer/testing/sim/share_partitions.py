"""Simulated share-partitions: the per-record state a share-partition leader keeps (KIP-932).

Each record of a partition read by a share group is, for that group:

* ``AVAILABLE``: may be acquired by any member;
* ``ACQUIRED``: locked by one member until a deadline on the simulated clock
  (``share.record.lock.duration.ms``); its delivery count went up by one when it was acquired;
* ``ACKNOWLEDGED``: ACCEPTed, done;
* ``ARCHIVED``: REJECTed, or released (RELEASE, lock expiry, session close) once its delivery
  count reached ``share.delivery.count.limit``; never delivered again.

RELEASE, lock expiry and the closing of the holder's share session put a record back to AVAILABLE
(or ARCHIVED at the limit) without lowering its delivery count (as Kafka does since KAFKA-19972: a
record released by a closing consumer comes back with count 2, which
``tests/integration/test_share_consumer.py`` shows on Kafka 4.3); RENEW extends the lock. An
acknowledgement of a record the member does not hold (never acquired, acknowledged already, or its
lock expired) fails with INVALID_RECORD_STATE (121), as on the broker. The first fetch of a
partition fixes its start offset from ``share.auto.offset.reset`` (``latest`` by default, as in
Kafka: records produced before are not delivered; ``earliest``: from offset 0). Lock expiry is
applied whenever the partition is read, at the current simulated time, which gives the same outcome
as a timer.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from consumer.share.acknowledgements import AcknowledgeType
from consumer.testing.sim.topics import SimRecord, SimTopics

__all__ = [
    "INVALID_RECORD_STATE",
    "RecordState",
    "SharePartitionSim",
    "ShareGroupSettings",
    "SharePartitionsSim",
]

#: Kafka's INVALID_RECORD_STATE error code.
INVALID_RECORD_STATE: Final = 121
_RESETS: Final = ("earliest", "latest")


class RecordState(enum.Enum):
    """The broker-side state of one record for one share group."""

    AVAILABLE = "available"
    ACQUIRED = "acquired"
    ACKNOWLEDGED = "acknowledged"
    ARCHIVED = "archived"


@dataclass(slots=True)
class _InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: int | None = None


@dataclass(slots=True)
class ShareGroupSettings:
    """The group configs a share-partition reads (Kafka's names and defaults).

    Attributes:
        record_lock_duration_ms: ``share.record.lock.duration.ms``.
        delivery_count_limit: ``share.delivery.count.limit``.
        start_offset_reset: ``share.auto.offset.reset``: ``earliest`` or ``latest``.
        max_record_locks: ``group.share.partition.max.record.locks``: records one partition
            may have ACQUIRED at once (fetches acquire nothing more until some are finished).
    """

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    start_offset_reset: str = "latest"
    max_record_locks: int = 2_000

    def __post_init__(self) -> None:
        if self.start_offset_reset not in _RESETS:
            raise ValueError(
                "share.auto.offset.reset must be 'earliest' or 'latest', "
                f"got {self.start_offset_reset!r}"
            )
        for key, value in (
            ("share.record.lock.duration.ms", self.record_lock_duration_ms),
            ("share.delivery.count.limit", self.delivery_count_limit),
            ("group.share.partition.max.record.locks", self.max_record_locks),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")


@dataclass
class SharePartitionSim:
    """One partition as one share group sees it (see the module docstring)."""

    topic: str
    partition: int
    start_offset: int
    settings: ShareGroupSettings
    records: dict[int, _InFlight] = field(default_factory=dict)

    def state(self, offset: int) -> tuple[RecordState, int]:
        """``(state, delivery count)`` of the record at ``offset``."""
        entry = self.records.get(offset)
        if entry is None:
            return RecordState.AVAILABLE, 0
        return entry.state, entry.delivery_count

    def holder(self, offset: int) -> str | None:
        """The member holding the record at ``offset`` (None unless ACQUIRED)."""
        entry = self.records.get(offset)
        return None if entry is None else entry.member_id

    def lock_deadline_ms(self, offset: int) -> int | None:
        """When the lock of the record at ``offset`` expires (None unless ACQUIRED)."""
        entry = self.records.get(offset)
        return None if entry is None else entry.lock_deadline_ms

    def expire(self, now_ms: int) -> None:
        """Release every record whose lock deadline has passed."""
        for entry in self.records.values():
            if entry.lock_deadline_ms is not None and entry.lock_deadline_ms <= now_ms:
                self._release(entry)

    def acquire(
        self, member_id: str, log: list[SimRecord], max_records: int, now_ms: int
    ) -> list[tuple[SimRecord, int]]:
        """Acquire up to ``max_records`` AVAILABLE records (lowest offsets first) for
        ``member_id``; returns each with its delivery count."""
        self.expire(now_ms)
        held = sum(1 for e in self.records.values() if e.state is RecordState.ACQUIRED)
        room = min(max_records, self.settings.max_record_locks - held)
        acquired: list[tuple[SimRecord, int]] = []
        for offset in range(self.start_offset, len(log)):
            if len(acquired) >= room:
                break
            entry = self.records.setdefault(offset, _InFlight(RecordState.AVAILABLE))
            if entry.state is not RecordState.AVAILABLE:
                continue
            entry.state = RecordState.ACQUIRED
            entry.delivery_count += 1
            entry.member_id = member_id
            entry.lock_deadline_ms = now_ms + self.settings.record_lock_duration_ms
            acquired.append((log[offset], entry.delivery_count))
        return acquired

    def acknowledge(
        self, member_id: str, offset: int, ack_type: AcknowledgeType, now_ms: int
    ) -> int | None:
        """Apply one acknowledgement; returns None, or INVALID_RECORD_STATE when ``member_id``
        does not hold the record."""
        self.expire(now_ms)
        entry = self.records.get(offset)
        if entry is None or entry.state is not RecordState.ACQUIRED or entry.member_id != member_id:
            return INVALID_RECORD_STATE
        match ack_type:
            case AcknowledgeType.ACCEPT:
                self._finish(entry, RecordState.ACKNOWLEDGED)
            case AcknowledgeType.REJECT:
                self._finish(entry, RecordState.ARCHIVED)
            case AcknowledgeType.RELEASE:
                self._release(entry)
            case AcknowledgeType.RENEW:
                entry.lock_deadline_ms = now_ms + self.settings.record_lock_duration_ms
            case _:
                return INVALID_RECORD_STATE
        return None

    def release_member(self, member_id: str, now_ms: int) -> None:
        """Release what ``member_id`` holds (its share session closed)."""
        self.expire(now_ms)
        for entry in self.records.values():
            if entry.state is RecordState.ACQUIRED and entry.member_id == member_id:
                self._release(entry)

    def _release(self, entry: _InFlight) -> None:
        if entry.delivery_count >= self.settings.delivery_count_limit:
            self._finish(entry, RecordState.ARCHIVED)
        else:
            self._finish(entry, RecordState.AVAILABLE)

    @staticmethod
    def _finish(entry: _InFlight, state: RecordState) -> None:
        entry.state = state
        entry.member_id = None
        entry.lock_deadline_ms = None


@dataclass
class SharePartitionsSim:
    """Every share-partition of one share group, created on first fetch."""

    topics: SimTopics
    settings: ShareGroupSettings = field(default_factory=ShareGroupSettings)
    partitions: dict[tuple[str, int], SharePartitionSim] = field(default_factory=dict)

    def partition(self, topic: str, partition: int) -> SharePartitionSim:
        """The share-partition of ``topic[partition]`` (initialized now if it is new)."""
        key = (topic, partition)
        found = self.partitions.get(key)
        if found is None:
            log = self.topics.log(topic, partition)
            start = 0 if self.settings.start_offset_reset == "earliest" else len(log)
            found = SharePartitionSim(topic, partition, start, self.settings)
            self.partitions[key] = found
        return found

    def acquire(
        self, member_id: str, topic: str, partition: int, max_records: int, now_ms: int
    ) -> list[tuple[SimRecord, int]]:
        """See :meth:`SharePartitionSim.acquire`."""
        log = self.topics.log(topic, partition)
        return self.partition(topic, partition).acquire(member_id, log, max_records, now_ms)

    def acknowledge(
        self,
        member_id: str,
        topic: str,
        partition: int,
        offset: int,
        ack_type: AcknowledgeType,
        now_ms: int,
    ) -> int | None:
        """See :meth:`SharePartitionSim.acknowledge`."""
        found = self.partitions.get((topic, partition))
        if found is None:
            return INVALID_RECORD_STATE
        return found.acknowledge(member_id, offset, ack_type, now_ms)

    def release_member(self, member_id: str, now_ms: int) -> None:
        """Release every record ``member_id`` holds in this group (its sessions closed)."""
        for found in self:
            found.release_member(member_id, now_ms)

    def expire(self, now_ms: int) -> None:
        """Apply lock expiry everywhere at ``now_ms``."""
        for found in self:
            found.expire(now_ms)

    def next_lock_deadline_ms(self) -> int | None:
        """The earliest lock deadline of the group (None when nothing is acquired)."""
        deadlines = [
            e.lock_deadline_ms
            for found in self
            for e in found.records.values()
            if e.lock_deadline_ms is not None
        ]
        return min(deadlines) if deadlines else None

    def __iter__(self) -> Iterator[SharePartitionSim]:
        return iter([self.partitions[key] for key in sorted(self.partitions)])
