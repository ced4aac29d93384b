"""Commands: what the member asks its runtime to do (imperative), returned by ``handle``/``poll``.

Catalogue:

Group coordinator
    :class:`SendHeartbeat` (carries a full :class:`HeartbeatRequest`), :class:`FindCoordinator`,
    :class:`CommitOffsets`, :class:`FetchCommittedOffsets`.
Metadata and partition leaders
    :class:`FetchMetadata` (resolve topic ids to names), :class:`ListStartOffsets` (where the
    reset policy starts new partitions).
Data plane
    :class:`StopFetching` (stop fetching and drop buffered records; answer with
    ``FetchingStopped``), :class:`ApplyAssignment`
    (make the data plane's assignment exactly ``assigned``; answer with ``AssignmentApplied``),
    :class:`StartFetching` (start the partitions waiting for their start offsets, or keep
    them waiting for a follow-up lookup; no answer).
Application thread
    :class:`InvokeOnRevoke` (answer with ``RevocationCompleted``), :class:`InvokeOnAssign` and
    :class:`InvokeOnLost` (answer with ``CallbackCompleted``), :class:`ReportError`,
    :class:`ReportCommitResult`, :class:`ShutDown`.

Commands are executed in list order.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from consumer.member.partitions import TopicPartition, TopicPartitions

#: Epoch sent to join or rejoin.
JOIN_EPOCH = 0
#: Epoch sent by a member leaving the group (dynamic, or static leaving permanently).
LEAVE_EPOCH = -1
#: Epoch sent by a static member leaving temporarily (the broker keeps its assignment).
STATIC_LEAVE_EPOCH = -2
#: ``RebalanceTimeoutMs`` value meaning "unchanged".
UNCHANGED_REBALANCE_TIMEOUT_MS = -1


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """Every ConsumerGroupHeartbeat v1 field; ``None`` (-1 for the timeout) means unchanged."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = UNCHANGED_REBALANCE_TIMEOUT_MS
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: tuple[TopicPartitions, ...] | None = None

    @property
    def is_full(self) -> bool:
        """True when the broker must answer with the assignment (the KIP's "full request")."""
        return (
            self.rebalance_timeout_ms != UNCHANGED_REBALANCE_TIMEOUT_MS
            and (self.subscribed_topic_names is not None or self.subscribed_topic_regex is not None)
            and self.topic_partitions is not None
        )


@dataclass(frozen=True, slots=True)
class SendHeartbeat:
    """Send ``request``; answer with HeartbeatSucceeded/HeartbeatFailed/HeartbeatTransportFailed."""

    request_id: int
    request: HeartbeatRequest

    @property
    def is_leave(self) -> bool:
        """True for a leave heartbeat (epoch -1 or -2), whose answer the member ignores."""
        return self.request.member_epoch < 0


@dataclass(frozen=True, slots=True)
class FindCoordinator:
    """Look up the group coordinator; answer with CoordinatorChanged."""

    group_id: str


@dataclass(frozen=True, slots=True)
class FetchMetadata:
    """Resolve these topic ids to names; answer with MetadataResolved."""

    topic_ids: tuple[uuid.UUID, ...]


class CommitReason(enum.Enum):
    """Why an offset commit is sent."""

    AUTO = "auto"
    PRE_REVOKE = "pre-revoke"
    CLOSE = "close"
    USER = "user"


@dataclass(frozen=True, slots=True)
class CommitOffsets:
    """Send OffsetCommit (v9+) with the member id and epoch; answer with CommitCompleted."""

    request_id: int
    reason: CommitReason
    group_id: str
    member_id: str | None
    member_epoch: int
    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class FetchCommittedOffsets:
    """Send OffsetFetch (v9+, RequireStable) with member id and epoch; answer with
    CommittedOffsetsFetched."""

    request_id: int
    group_id: str
    member_id: str | None
    member_epoch: int
    partitions: tuple[TopicPartition, ...]


class ResetPolicy(enum.Enum):
    """Where a partition without a committed offset starts (``auto.offset.reset``)."""

    EARLIEST = "earliest"
    LATEST = "latest"


@dataclass(frozen=True, slots=True)
class ListStartOffsets:
    """Ask the partitions' leaders where ``policy`` starts them (ListOffsets: earliest = the log
    start offset, latest = the end offset, the last stable one with ``read_committed``); answer
    with StartOffsetsListed, leaving out partitions whose lookup failed."""

    request_id: int
    partitions: tuple[TopicPartition, ...]
    policy: ResetPolicy
    read_committed: bool


@dataclass(frozen=True, slots=True)
class StopFetching:
    """Stop fetching these partitions and discard their buffered records.

    Answer with ``FetchingStopped(request_id, consumed_offsets)``: the offsets consumed up to
    the moment fetching stopped. A revocation waits for it before its pre-revoke commit, so the
    commit covers every record the application received and the next owner starts exactly there.
    """

    request_id: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ApplyAssignment:
    """Make the data plane's assignment exactly ``assigned``; answer with AssignmentApplied.

    The ``added`` partitions in ``awaiting_start`` are owned at once but start fetching only at
    ``StartFetching(start_request_id)``: the end of the fetch of their committed offsets, which
    this command does not wait for. Any other added partition starts at the reset policy's
    logical offset. ``on_assign``'s own start offsets win over both.
    """

    request_id: int
    assigned: tuple[TopicPartition, ...]
    added: tuple[TopicPartition, ...]
    removed: tuple[TopicPartition, ...]
    awaiting_start: tuple[TopicPartition, ...] = ()
    start_request_id: int | None = None


@dataclass(frozen=True, slots=True)
class StartFetching:
    """The lookup ``request_id`` ended: start fetching the partitions left waiting for it.

    ``request_id`` is a ``FetchCommittedOffsets`` job (the committed offsets) or a
    ``ListStartOffsets`` request (the reset policy's absolute offsets). The partitions waiting for
    it start at ``offsets``; those absent from ``offsets`` wait for ``then_request_id`` when it is
    set (the ``ListStartOffsets`` of the partitions with nothing committed), else start at the
    reset policy's logical offset. Partitions no longer owned, or no longer waiting (``on_assign``
    chose their start), are left alone. No answer.
    """

    request_id: int
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    then_request_id: int | None = None


@dataclass(frozen=True, slots=True)
class InvokeOnRevoke:
    """Run ``on_revoke(partitions)`` on the application thread; answer with RevocationCompleted."""

    request_id: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class InvokeOnAssign:
    """Run ``on_assign(partitions)`` (invoked even when empty); answer with CallbackCompleted."""

    request_id: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class InvokeOnLost:
    """Run ``on_lost(partitions)`` (never preceded by a commit); answer with CallbackCompleted."""

    request_id: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ReportError:
    """Surface an error to the application (raised from its next ``poll()``).

    ``error_code`` is the Kafka error code, or None for errors that are not broker errors (callback
    failures, timeouts). ``fatal`` errors mean the member is in FATAL state. ``heartbeat``: the
    error came in a heartbeat response (the same code from a commit is another situation).
    """

    error_code: int | None
    error_name: str
    message: str
    fatal: bool
    heartbeat: bool = False


@dataclass(frozen=True, slots=True)
class ReportCommitResult:
    """Outcome of a user commit (``CommitRequested.token``): per-partition error codes, 0 = ok."""

    token: int
    partition_errors: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class ShutDown:
    """Close finished: the runtime may stop (no further commands will follow)."""


Command = (
    SendHeartbeat
    | FindCoordinator
    | FetchMetadata
    | CommitOffsets
    | FetchCommittedOffsets
    | ListStartOffsets
    | StopFetching
    | ApplyAssignment
    | StartFetching
    | InvokeOnRevoke
    | InvokeOnAssign
    | InvokeOnLost
    | ReportError
    | ReportCommitResult
    | ShutDown
)
