"""Inputs: what happened (past tense), fed to :meth:`consumer.share.ShareMember.handle`.

Catalogue:

Application side
    :class:`Subscribed`, :class:`~consumer.member.inputs.Unsubscribed`, :class:`AppPolled`,
    :class:`~consumer.member.inputs.PollIntervalExpired`, :class:`CloseRequested`.
Data plane
    :class:`StoppedAndFlushed` (answers ``StopAndFlush``), :class:`ShareAssignmentApplied`
    (answers ``ApplyShareAssignment``).
Network side
    :class:`ShareHeartbeatSucceeded`, :class:`ShareHeartbeatFailed`,
    :class:`~consumer.member.inputs.HeartbeatTransportFailed`,
    :class:`~consumer.member.inputs.CoordinatorChanged`,
    :class:`~consumer.member.inputs.CoordinatorLost`.

Inputs that mean the same for both member kinds are the consumer member's classes.
"""

from __future__ import annotations

from dataclasses import dataclass

from consumer.member.errors import MemberConfigError
from consumer.member.inputs import (
    CoordinatorChanged,
    CoordinatorLost,
    HeartbeatTransportFailed,
    PollIntervalExpired,
    Unsubscribed,
)
from consumer.member.partitions import Assignment

__all__ = [
    "AppPolled",
    "CloseRequested",
    "CoordinatorChanged",
    "CoordinatorLost",
    "HeartbeatTransportFailed",
    "PollIntervalExpired",
    "ShareAssignmentApplied",
    "ShareHeartbeatFailed",
    "ShareHeartbeatSucceeded",
    "ShareInput",
    "StoppedAndFlushed",
    "Subscribed",
    "Unsubscribed",
]


@dataclass(frozen=True, slots=True)
class Subscribed:
    """The application subscribed to these exact topic names (share groups take no regex).

    An empty tuple means "unsubscribe", as in the Java client. Names must be non-empty strings.
    """

    topic_names: tuple[str, ...]

    def __post_init__(self) -> None:
        for name in self.topic_names:
            if not isinstance(name, str) or not name:
                raise MemberConfigError(
                    f"topic_names must be non-empty strings, got {name!r} in {self.topic_names!r}"
                )


@dataclass(frozen=True, slots=True)
class AppPolled:
    """The application called ``poll()``: restarts the max-poll-interval timer.

    ``polled_at_ms`` is when it called, on the member's clock (``None``: when the input is
    handled).
    """

    polled_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class CloseRequested:
    """The application called ``close()``: stop and flush, leave (epoch -1), then ShutDown."""


@dataclass(frozen=True, slots=True)
class StoppedAndFlushed:
    """The data plane stopped fetching the partitions of ``StopAndFlush`` ``request_id`` and
    sent their pending acknowledgements."""

    request_id: int


@dataclass(frozen=True, slots=True)
class ShareAssignmentApplied:
    """The data plane fetches the assignment of ``ApplyShareAssignment`` ``request_id``."""

    request_id: int


@dataclass(frozen=True, slots=True)
class ShareHeartbeatSucceeded:
    """A ShareGroupHeartbeat response without error.

    ``assignment`` is the member's target now, or None for "unchanged since the last response"
    (build one from a topic-id mapping with :func:`~consumer.member.partitions.flatten_assignment`).
    """

    request_id: int
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None = None
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class ShareHeartbeatFailed:
    """A ShareGroupHeartbeat response carrying a non-zero error code."""

    request_id: int
    error_code: int
    error_message: str | None = None


ShareInput = (
    Subscribed
    | Unsubscribed
    | AppPolled
    | PollIntervalExpired
    | CloseRequested
    | StoppedAndFlushed
    | ShareAssignmentApplied
    | ShareHeartbeatSucceeded
    | ShareHeartbeatFailed
    | HeartbeatTransportFailed
    | CoordinatorChanged
    | CoordinatorLost
)

#: Every input type, in catalogue order (used by the exhaustive state x input test).
SHARE_INPUT_TYPES: tuple[type, ...] = (
    Subscribed,
    Unsubscribed,
    AppPolled,
    PollIntervalExpired,
    CloseRequested,
    StoppedAndFlushed,
    ShareAssignmentApplied,
    ShareHeartbeatSucceeded,
    ShareHeartbeatFailed,
    HeartbeatTransportFailed,
    CoordinatorChanged,
    CoordinatorLost,
)
