"""The messages that cross the thread boundary besides the member's own inputs and commands.

Application -> background (:data:`AppEvent`): every member :class:`~consumer.member.Input`,
:class:`StopLoop`, :class:`FetchCommitted` and :class:`SetSaslCredentials`. Background ->
application (:data:`ToAppEvent`): every member :class:`~consumer.member.Command` meant for the
application thread, :class:`StateChanged`,
:class:`~consumer._bridge.member_events.StateTransition` (only while a member listener is
registered) and :class:`RuntimeFailed`.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

from consumer._bridge.member_events import StateTransition
from consumer.member import Command, Input, MemberState, TopicPartition

__all__ = [
    "AppEvent",
    "FetchCommitted",
    "RuntimeFailed",
    "SetSaslCredentials",
    "StateChanged",
    "StopLoop",
    "ToAppEvent",
]


@dataclass(frozen=True, slots=True)
class StopLoop:
    """Application -> background: stop now (after close, or when abandoning the member)."""


@dataclass(frozen=True, slots=True)
class FetchCommitted:
    """Application -> background: the committed offsets of ``partitions`` (``committed()``).

    The loop sends OffsetFetch with the member's id and epoch, retrying retriable errors until
    ``timeout_s`` has passed, and completes ``reply`` with one offset per partition (-1001 where
    none is committed) or with the error that ended the attempt.
    """

    partitions: tuple[TopicPartition, ...]
    timeout_s: float
    reply: Future[list[int]] = field(default_factory=Future, compare=False)


@dataclass(frozen=True, slots=True)
class SetSaslCredentials:
    """Application -> background: authenticate new connections with this user name and
    password (``set_sasl_credentials()``; connections already authenticated stay open)."""

    username: str
    password: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class StateChanged:
    """Background -> application: the member moved from ``previous`` to ``current``."""

    previous: MemberState
    current: MemberState


@dataclass(frozen=True, slots=True)
class RuntimeFailed:
    """Background -> application: the loop died; ``error`` says why."""

    error: BaseException


AppEvent = Input | StopLoop | FetchCommitted | SetSaslCredentials
ToAppEvent = Command | StateChanged | StateTransition | RuntimeFailed
