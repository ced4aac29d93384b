"""Kafka error codes the member reacts to, and what it does for each heartbeat error.

The heartbeat table follows the Java consumer (``AbstractHeartbeatRequestManager.onErrorResponse``):

=================================  ======================  =========================================
error (code)                       action                  effect
=================================  ======================  =========================================
COORDINATOR_LOAD_IN_PROGRESS (14)  RETRY                   backoff, full request next; state kept
COORDINATOR_NOT_AVAILABLE (15)     REDISCOVER_COORDINATOR  FindCoordinator, backoff reset, full next
NOT_COORDINATOR (16)               REDISCOVER_COORDINATOR  same as 15
transport failure                  REDISCOVER_COORDINATOR  FindCoordinator, backoff, full next
UNKNOWN_MEMBER_ID (25)             FENCE                   FENCED, on_lost (no commit), rejoin at 0
FENCED_MEMBER_EPOCH (110)          FENCE                   same as 25, same member id
TOPIC_AUTHORIZATION_FAILED (29)    REPORT                  ReportError(fatal=False), no state change
GROUP_ID_NOT_FOUND (69)            FATAL_UNLESS_LEAVING    ignored while leaving, else FATAL
GROUP_AUTHORIZATION_FAILED (30)    FATAL                   FATAL, on_lost, ReportError(fatal=True)
UNSUPPORTED_VERSION (35)           FATAL                   idem
INVALID_REQUEST (42)               FATAL                   idem
GROUP_MAX_SIZE_REACHED (81)        FATAL                   idem
FENCED_INSTANCE_ID (82)            FATAL                   idem
UNRELEASED_INSTANCE_ID (111)       FATAL                   idem
UNSUPPORTED_ASSIGNOR (112)         FATAL                   idem
INVALID_REGULAR_EXPRESSION (128)   FATAL                   idem
any other code                     FATAL                   idem ("unexpected error")
=================================  ======================  =========================================

Every error also clears the "last sent" memory of the heartbeat manager, so the next heartbeat is a
full request, and counts a failed attempt for the backoff.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kio.schema.errors import ErrorCode as _KioErrorCode

from consumer.errors import kafka_error_name


class ErrorCode(enum.IntEnum):
    """The Kafka error codes the member core acts on, under their upper-case Kafka names.

    Codes and names are kio's (``kio.schema.errors.ErrorCode``, whose names are lower case): each
    value is read from the kio member, each name is its kio name in upper case (a test checks
    both). Every other code is named by :func:`error_name`, from kio too.
    """

    NONE = _KioErrorCode.none
    UNKNOWN_TOPIC_OR_PARTITION = _KioErrorCode.unknown_topic_or_partition
    REQUEST_TIMED_OUT = _KioErrorCode.request_timed_out
    NETWORK_EXCEPTION = _KioErrorCode.network_exception
    COORDINATOR_LOAD_IN_PROGRESS = _KioErrorCode.coordinator_load_in_progress
    COORDINATOR_NOT_AVAILABLE = _KioErrorCode.coordinator_not_available
    NOT_COORDINATOR = _KioErrorCode.not_coordinator
    ILLEGAL_GENERATION = _KioErrorCode.illegal_generation
    UNKNOWN_MEMBER_ID = _KioErrorCode.unknown_member_id
    REBALANCE_IN_PROGRESS = _KioErrorCode.rebalance_in_progress
    TOPIC_AUTHORIZATION_FAILED = _KioErrorCode.topic_authorization_failed
    GROUP_AUTHORIZATION_FAILED = _KioErrorCode.group_authorization_failed
    UNSUPPORTED_VERSION = _KioErrorCode.unsupported_version
    INVALID_REQUEST = _KioErrorCode.invalid_request
    GROUP_ID_NOT_FOUND = _KioErrorCode.group_id_not_found
    GROUP_MAX_SIZE_REACHED = _KioErrorCode.group_max_size_reached
    FENCED_INSTANCE_ID = _KioErrorCode.fenced_instance_id
    UNSTABLE_OFFSET_COMMIT = _KioErrorCode.unstable_offset_commit
    UNKNOWN_TOPIC_ID = _KioErrorCode.unknown_topic_id
    FENCED_MEMBER_EPOCH = _KioErrorCode.fenced_member_epoch
    UNRELEASED_INSTANCE_ID = _KioErrorCode.unreleased_instance_id
    UNSUPPORTED_ASSIGNOR = _KioErrorCode.unsupported_assignor
    STALE_MEMBER_EPOCH = _KioErrorCode.stale_member_epoch
    INVALID_REGULAR_EXPRESSION = _KioErrorCode.invalid_regular_expression


def error_name(code: int) -> str:
    """The upper-case Kafka name of ``code`` (from kio), or ``UNKNOWN_ERROR_<code>`` for codes kio
    does not know."""
    return kafka_error_name(code) or f"UNKNOWN_ERROR_{code}"


class HeartbeatErrorAction(enum.Enum):
    """What the member does when a heartbeat fails with a given error."""

    RETRY = "retry with backoff; state unchanged"
    REDISCOVER_COORDINATOR = "mark the coordinator unknown, look it up again, then retry"
    FENCE = "transition to FENCED, release partitions as lost, rejoin with epoch 0"
    REPORT = "report the error to the application; not fatal, heartbeats continue"
    FATAL_UNLESS_LEAVING = "ignored while leaving the group, otherwise fatal"
    FATAL = "transition to FATAL and report the error to the application"


#: The heartbeat error table, as data. Codes missing from it are FATAL.
HEARTBEAT_ERROR_ACTIONS: dict[ErrorCode, HeartbeatErrorAction] = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: HeartbeatErrorAction.RETRY,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: HeartbeatErrorAction.REDISCOVER_COORDINATOR,
    ErrorCode.NOT_COORDINATOR: HeartbeatErrorAction.REDISCOVER_COORDINATOR,
    ErrorCode.UNKNOWN_MEMBER_ID: HeartbeatErrorAction.FENCE,
    ErrorCode.FENCED_MEMBER_EPOCH: HeartbeatErrorAction.FENCE,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: HeartbeatErrorAction.REPORT,
    ErrorCode.GROUP_ID_NOT_FOUND: HeartbeatErrorAction.FATAL_UNLESS_LEAVING,
    ErrorCode.GROUP_AUTHORIZATION_FAILED: HeartbeatErrorAction.FATAL,
    ErrorCode.UNSUPPORTED_VERSION: HeartbeatErrorAction.FATAL,
    ErrorCode.INVALID_REQUEST: HeartbeatErrorAction.FATAL,
    ErrorCode.GROUP_MAX_SIZE_REACHED: HeartbeatErrorAction.FATAL,
    ErrorCode.FENCED_INSTANCE_ID: HeartbeatErrorAction.FATAL,
    ErrorCode.UNRELEASED_INSTANCE_ID: HeartbeatErrorAction.FATAL,
    ErrorCode.UNSUPPORTED_ASSIGNOR: HeartbeatErrorAction.FATAL,
    ErrorCode.INVALID_REGULAR_EXPRESSION: HeartbeatErrorAction.FATAL,
}


def heartbeat_error_action(
    code: int, table: Mapping[ErrorCode, HeartbeatErrorAction] = HEARTBEAT_ERROR_ACTIONS
) -> HeartbeatErrorAction:
    """Look ``code`` up in ``table`` (by default the consumer member's
    :data:`HEARTBEAT_ERROR_ACTIONS`; another member kind passes its own); codes missing from the
    table are FATAL."""
    try:
        return table[ErrorCode(code)]
    except (ValueError, KeyError):
        return HeartbeatErrorAction.FATAL


#: OffsetCommit / OffsetFetch errors retried with backoff (all commit reasons).
RETRIABLE_OFFSET_ERRORS: frozenset[int] = frozenset(
    {
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
    }
)
