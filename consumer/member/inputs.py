"""Inputs: things that happened, fed to :meth:`consumer.member.Member.handle` (past tense).

Catalogue (``request_id`` always echoes the id of the command that asked for the work; an input
whose request id the member does not wait for any more is ignored, so late answers are harmless):

Application side
    :class:`Subscribed` (topic names or a broker-side RE2J regex), :class:`Unsubscribed`,
    :class:`AppPolled` (optionally with consumed offsets), :class:`ConsumedOffsetsReported`,
    :class:`CommitRequested` (explicit user commit), :class:`PollIntervalExpired`,
    :class:`CloseRequested`.
Callbacks and data plane
    :class:`FetchingStopped` (answers ``StopFetching``), :class:`RevocationCompleted` (answers
    ``InvokeOnRevoke``; may arrive late, for example after a
    Spark batch commit), :class:`CallbackCompleted` (answers ``InvokeOnAssign`` / ``InvokeOnLost``),
    :class:`AssignmentApplied` (answers ``ApplyAssignment``).
Network side
    :class:`HeartbeatSucceeded`, :class:`HeartbeatFailed`, :class:`HeartbeatTransportFailed`,
    :class:`CoordinatorChanged`, :class:`CoordinatorLost`, :class:`MetadataResolved`,
    :class:`CommitCompleted`, :class:`CommittedOffsetsFetched`, :class:`StartOffsetsListed`.

Transport failures of OffsetCommit / OffsetFetch are reported as ``error_code=13``
(NETWORK_EXCEPTION), which the member retries.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from consumer.member.errors import MemberConfigError
from consumer.member.partitions import Assignment, TopicPartition


class CloseOption(enum.Enum):
    """KIP-1092 close options: whether a closing member leaves the group."""

    DEFAULT = "default"  # dynamic member leaves (-1), static member leaves temporarily (-2)
    LEAVE_GROUP = "leave_group"  # leave permanently (-1) even for static members
    REMAIN_IN_GROUP = "remain_in_group"  # dynamic: no leave heartbeat; static: -2


# --- application side -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subscribed:
    """The application subscribed to topic names or to one broker-side RE2J regex.

    Exactly one of ``topic_names`` / ``topic_regex`` is set. An empty name list means "unsubscribe",
    as in the Java client.
    """

    topic_names: tuple[str, ...] | None = None
    topic_regex: str | None = None

    def __post_init__(self) -> None:
        if (self.topic_names is None) == (self.topic_regex is None):
            raise MemberConfigError("Subscribed needs exactly one of topic_names / topic_regex")
        if self.topic_regex is not None and not self.topic_regex:
            raise MemberConfigError("topic_regex must be non-empty")


@dataclass(frozen=True, slots=True)
class Unsubscribed:
    """The application called ``unsubscribe()``: revoke (with commit), then leave the group."""


@dataclass(frozen=True, slots=True)
class AppPolled:
    """The application called ``poll()``; resets the max-poll-interval timer.

    ``consumed_offsets`` optionally reports the next offsets to consume (what auto-commit commits).
    ``polled_at_ms`` is when the application called ``poll()``, on the member's clock (``None``:
    when the input is handled). As in the Java client, the timer restarts at that call, not at
    the moment the report reaches the member.
    """

    consumed_offsets: Mapping[TopicPartition, int] | None = None
    polled_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ConsumedOffsetsReported:
    """The application consumed up to these offsets (next offset to read, per partition)."""

    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class CommitRequested:
    """An explicit user commit; ``offsets=None`` commits everything consumed so far.

    The outcome comes back as :class:`~consumer.member.commands.ReportCommitResult` with ``token``.
    ``timeout_ms`` bounds its retries (default: the member's ``user_commit_timeout_ms``); a
    synchronous caller passes the time it waits, so nothing is sent after it gave up.
    """

    token: int
    offsets: Mapping[TopicPartition, int] | None = None
    timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class PollIntervalExpired:
    """The runtime noticed ``max.poll.interval.ms`` elapsed (``poll()`` also detects it itself)."""


@dataclass(frozen=True, slots=True)
class CloseRequested:
    """The application called ``close()``: commit, revoke, leave, then :class:`ShutDown`."""

    option: CloseOption = CloseOption.DEFAULT


# --- callbacks and data plane -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchingStopped:
    """The data plane stopped fetching (answers ``StopFetching``).

    ``consumed_offsets`` are the next offsets to read of the stopped partitions, taken when
    fetching stopped: exactly what the application received, so what a pre-revoke commit commits.
    """

    request_id: int
    consumed_offsets: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RevocationCompleted:
    """The revocation asked by ``InvokeOnRevoke`` is complete (callback ran, data committed)."""

    request_id: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class CallbackCompleted:
    """``InvokeOnAssign`` or ``InvokeOnLost`` finished; ``error`` holds a failure description."""

    request_id: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class AssignmentApplied:
    """The data plane applied the assignment of ``ApplyAssignment`` ``request_id``."""

    request_id: int


# --- network side -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeartbeatSucceeded:
    """A ConsumerGroupHeartbeat response without error.

    ``assignment`` is the target the member may use now, or None for "unchanged since the last
    response" (build one from a topic-id mapping with
    :func:`~consumer.member.partitions.flatten_assignment`).
    """

    request_id: int
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None = None
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatFailed:
    """A ConsumerGroupHeartbeat response carrying a non-zero error code."""

    request_id: int
    error_code: int
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatTransportFailed:
    """A ConsumerGroupHeartbeat request got no response (disconnect, timeout)."""

    request_id: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CoordinatorChanged:
    """The group coordinator is now known to be broker ``coordinator_id``."""

    coordinator_id: int


@dataclass(frozen=True, slots=True)
class CoordinatorLost:
    """The coordinator is unknown or unreachable (a lookup failed, or its connection is gone).

    ``error_code`` is the broker's error when the lookup itself was refused (for example
    GROUP_AUTHORIZATION_FAILED, or SASL_AUTHENTICATION_FAILED on connect); the member applies the
    heartbeat error table to it. ``None`` means a transport problem: look up again after backoff.
    """

    reason: str = ""
    error_code: int | None = None


@dataclass(frozen=True, slots=True)
class MetadataResolved:
    """Metadata learned names for these topic ids (ids it could not find are simply absent)."""

    topic_names: Mapping[uuid.UUID, str]


@dataclass(frozen=True, slots=True)
class CommitCompleted:
    """An OffsetCommit response: a request-level error and per-partition error codes (0 = ok)."""

    request_id: int
    partition_errors: Mapping[TopicPartition, int] = field(default_factory=dict)
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class CommittedOffsetsFetched:
    """An OffsetFetch response: committed offsets (None = nothing committed) and errors."""

    request_id: int
    offsets: Mapping[TopicPartition, int | None] = field(default_factory=dict)
    error_code: int = 0
    partition_errors: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StartOffsetsListed:
    """Answers ``ListStartOffsets``: the absolute start offset of each partition whose lookup
    succeeded (a partition left out starts at the reset policy's logical offset)."""

    request_id: int
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)


#: Every input type, in catalogue order (used by the exhaustive state x input test).
Input = (
    Subscribed
    | Unsubscribed
    | AppPolled
    | ConsumedOffsetsReported
    | FetchingStopped
    | CommitRequested
    | PollIntervalExpired
    | CloseRequested
    | RevocationCompleted
    | CallbackCompleted
    | AssignmentApplied
    | HeartbeatSucceeded
    | HeartbeatFailed
    | HeartbeatTransportFailed
    | CoordinatorChanged
    | CoordinatorLost
    | MetadataResolved
    | CommitCompleted
    | CommittedOffsetsFetched
    | StartOffsetsListed
)

INPUT_TYPES: tuple[type, ...] = (
    Subscribed,
    Unsubscribed,
    AppPolled,
    ConsumedOffsetsReported,
    CommitRequested,
    PollIntervalExpired,
    CloseRequested,
    FetchingStopped,
    RevocationCompleted,
    CallbackCompleted,
    AssignmentApplied,
    HeartbeatSucceeded,
    HeartbeatFailed,
    HeartbeatTransportFailed,
    CoordinatorChanged,
    CoordinatorLost,
    MetadataResolved,
    CommitCompleted,
    CommittedOffsetsFetched,
    StartOffsetsListed,
)
