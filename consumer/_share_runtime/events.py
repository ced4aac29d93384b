"""What crosses the thread boundary of a share consumer (application <-> background loop)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import NamedTuple

from consumer._bridge.messages import SetSaslCredentials
from consumer._wire.records import Record
from consumer.errors import ConsumerError
from consumer.share.acknowledgements import AcknowledgeType, TopicIdPartition
from consumer.share.inputs import ShareInput

__all__ = [
    "Acknowledge",
    "AcknowledgementsCompleted",
    "AppEvent",
    "Close",
    "Commit",
    "CommitResult",
    "FetchedRecord",
    "PartitionFailed",
    "RecordSource",
    "RuntimeFailed",
    "SetSaslCredentials",
    "ToAppEvent",
]

#: (topic name, partition) -> the error of its acknowledgements, or None when they applied.
CommitResult = dict[tuple[str, int], ConsumerError | None]


@dataclass(frozen=True, slots=True)
class RecordSource:
    """The share session a record was acquired in: its leader node and that session's
    generation (bumped each time the session is reset). An acknowledgement can only go back
    to the session that acquired the record."""

    node_id: int
    generation: int


class FetchedRecord(NamedTuple):
    """One acquired record, ready for the application: names resolved, delivery count, the
    session it came from and its lock deadline (``time.monotonic()`` seconds; the lock may last
    longer, never shorter) attached. A named tuple: one is built per record fetched."""

    topic: str
    partition: TopicIdPartition
    record: Record
    delivery_count: int
    source: RecordSource = RecordSource(-1, 0)
    lock_deadline_s: float | None = None


@dataclass(frozen=True, slots=True)
class Acknowledge:
    """Application -> background: record these acknowledgements (sent on the next request).
    Each is (partition, offset, type, the session the record came from). ``polled``: the
    application polled too (the member's ``AppPolled``; the fetchers look again), so a poll
    wakes the background loop once."""

    acks: tuple[tuple[TopicIdPartition, int, AcknowledgeType, RecordSource], ...]
    polled: bool = False


@dataclass(frozen=True, slots=True)
class Commit:
    """Application -> background: record ``acks`` (implicit mode's ACCEPTs), then send every
    pending acknowledgement now (ShareAcknowledge) and complete ``reply`` with the per-partition
    outcome."""

    acks: tuple[tuple[TopicIdPartition, int, AcknowledgeType, RecordSource], ...] = ()
    reply: Future[CommitResult] = field(default_factory=Future, compare=False)


@dataclass(frozen=True, slots=True)
class Close:
    """Application -> background: send the final acknowledgements, close every share session
    (epoch -1, releasing what is still acquired), leave the group (epoch -1) and stop."""

    reply: Future[None] = field(default_factory=Future, compare=False)


@dataclass(frozen=True, slots=True)
class AcknowledgementsCompleted:
    """Background -> application: acknowledgements with one outcome (``error`` None: applied).

    ``offsets`` maps (topic name, partition) to the acknowledged offsets (GAPs left out);
    ``lock_deadline_s`` is the renewed lock deadline of RENEWed offsets, when it is known.
    """

    offsets: Mapping[tuple[str, int], frozenset[int]]
    error: ConsumerError | None
    renewed: Mapping[tuple[str, int], frozenset[int]] = field(default_factory=dict)
    lock_deadline_s: float | None = None


@dataclass(frozen=True, slots=True)
class RuntimeFailed:
    """Background -> application: the loop died or the member reported a fatal error."""

    error: BaseException


@dataclass(frozen=True, slots=True)
class PartitionFailed:
    """Background -> application: a partition error to raise from ``poll`` (authorization);
    the consumer goes on."""

    error: ConsumerError


AppEvent = ShareInput | Acknowledge | Commit | Close | SetSaslCredentials
ToAppEvent = tuple[FetchedRecord, ...] | RuntimeFailed | PartitionFailed
