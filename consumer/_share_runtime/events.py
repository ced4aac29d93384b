"""What crosses the thread boundary of a share consumer (application <-> background loop)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

from consumer._wire.records import Record
from consumer.errors import ConsumerError
from consumer.share.acknowledgements import AcknowledgeType, TopicIdPartition
from consumer.share.inputs import ShareInput

__all__ = [
    "Acknowledge",
    "AppEvent",
    "Close",
    "Commit",
    "CommitResult",
    "FetchedRecord",
    "RuntimeFailed",
    "ToAppEvent",
]

#: (topic name, partition) -> the error of its acknowledgements, or None when they applied.
CommitResult = dict[tuple[str, int], ConsumerError | None]


@dataclass(frozen=True, slots=True)
class FetchedRecord:
    """One acquired record, ready for the application: names resolved, delivery count attached."""

    topic: str
    partition: TopicIdPartition
    record: Record
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Acknowledge:
    """Application -> background: record these acknowledgements (sent on the next request)."""

    acks: tuple[tuple[TopicIdPartition, int, AcknowledgeType], ...]


@dataclass(frozen=True, slots=True)
class Commit:
    """Application -> background: send every pending acknowledgement now (ShareAcknowledge) and
    complete ``reply`` with the per-partition outcome."""

    reply: Future[CommitResult] = field(default_factory=Future, compare=False)


@dataclass(frozen=True, slots=True)
class Close:
    """Application -> background: send the final acknowledgements, close every share session
    (epoch -1, releasing what is still acquired), leave the group (epoch -1) and stop."""

    reply: Future[None] = field(default_factory=Future, compare=False)


@dataclass(frozen=True, slots=True)
class RuntimeFailed:
    """Background -> application: the loop died or the member reported a fatal error."""

    error: BaseException


AppEvent = ShareInput | Acknowledge | Commit | Close
ToAppEvent = tuple[FetchedRecord, ...] | RuntimeFailed
