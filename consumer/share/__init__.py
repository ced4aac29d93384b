"""The sans-I/O core of a KIP-932 share group member: the second member kind on the rules engine.

A :class:`ShareMember` is driven like the consumer group :class:`~consumer.member.Member`:
``handle(input, now_ms) -> list[command]`` and ``poll(now_ms) -> (commands, next_deadline_ms)``.
It never reads a clock, sleeps, locks or does I/O. It reuses the consumer member's generic
machinery (the rules engine of :mod:`consumer.member.machine`, heartbeat pacing and coordinator
discovery of :mod:`consumer.member.pacing`, the error-action shape of
:mod:`consumer.member.errors_table`) with states, rules and requests of its own.

Inputs (:mod:`consumer.share.inputs`):
    Subscribed, Unsubscribed, AppPolled, PollIntervalExpired, CloseRequested, StoppedAndFlushed,
    ShareAssignmentApplied, ShareHeartbeatSucceeded, ShareHeartbeatFailed,
    HeartbeatTransportFailed, CoordinatorChanged, CoordinatorLost.

Commands (:mod:`consumer.share.commands`):
    SendShareHeartbeat (with a ShareHeartbeatRequest), FindCoordinator, StopAndFlush,
    ApplyShareAssignment, ReportError, ShutDown.

States are in :mod:`consumer.share.states`; every transition is a row of
:data:`~consumer.share.rules.SHARE_RULES`, rendered in
``docs/concepts/share-member-state-machine.md``.
"""

from consumer.share.assignment import ShareAssignmentManager
from consumer.share.commands import (
    ApplyShareAssignment,
    SendShareHeartbeat,
    ShareCommand,
    ShareHeartbeatRequest,
    StopAndFlush,
)
from consumer.share.config import ShareMemberConfig
from consumer.share.heartbeat import ShareHeartbeatManager
from consumer.share.inputs import (
    AppPolled,
    CloseRequested,
    ShareAssignmentApplied,
    ShareHeartbeatFailed,
    ShareHeartbeatSucceeded,
    ShareInput,
    StoppedAndFlushed,
    Subscribed,
)
from consumer.share.member import ShareMember
from consumer.share.rules import (
    SHARE_HEARTBEAT_ERROR_ACTIONS,
    SHARE_RULES,
    ShareEffect,
    ShareGuard,
    ShareOutcome,
)
from consumer.share.states import SHARE_STATES, ShareState

__all__ = [
    "AppPolled",
    "ApplyShareAssignment",
    "CloseRequested",
    "SHARE_HEARTBEAT_ERROR_ACTIONS",
    "SHARE_RULES",
    "SHARE_STATES",
    "SendShareHeartbeat",
    "ShareAssignmentApplied",
    "ShareAssignmentManager",
    "ShareCommand",
    "ShareEffect",
    "ShareGuard",
    "ShareHeartbeatFailed",
    "ShareHeartbeatManager",
    "ShareHeartbeatRequest",
    "ShareHeartbeatSucceeded",
    "ShareInput",
    "ShareMember",
    "ShareMemberConfig",
    "ShareOutcome",
    "ShareState",
    "StopAndFlush",
    "StoppedAndFlushed",
    "Subscribed",
]
