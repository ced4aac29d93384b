"""The share member's rules: every "in state X, on outcome Y, go to Z and do E" in one table.

The same engine as the consumer member (:mod:`consumer.member.machine`) with a table of its own:
the managers and input handlers of :class:`~consumer.share.ShareMember` report a
:class:`ShareOutcome`, and :data:`SHARE_RULES` decides; a (state, outcome) pair without a row
changes nothing. An effect may report a further outcome, decided the same way.

A *round* changes what the data plane fetches (:data:`SHARE_ROUND_STEPS`): stop fetching the
removed partitions and flush their acknowledgements (STOPPING), then apply the target
(APPLYING). Share groups have no revocation callbacks and no commits, so there is nothing else.

The heartbeat error table (:data:`SHARE_HEARTBEAT_ERROR_ACTIONS`) follows the Java client's
``AbstractHeartbeatRequestManager`` and the ShareGroupHeartbeat schema's error list.

``python -m consumer.member.diagram --write`` renders this table into
``docs/concepts/share-member-state-machine.md``; a test fails when the page is stale, and another
drives every row.
"""

from __future__ import annotations

from dataclasses import dataclass

from consumer.member.errors_table import ErrorCode, HeartbeatErrorAction
from consumer.member.machine import KeyEnum, Rule, RulesTable
from consumer.share.states import SHARE_STATES, ShareState


class ShareOutcome(KeyEnum):
    """What an input or a manager reports; the rules decide what follows."""

    SUBSCRIBED = "the application subscribed (or changed its topic names)"
    UNSUBSCRIBE_REQUESTED = "the application unsubscribed"
    CLOSE_REQUESTED = "the application closes the consumer"
    APP_POLLED = "the application polled"
    POLL_INTERVAL_EXPIRED = "max.poll.interval.ms elapsed without a poll"
    TARGET_RECEIVED = "a heartbeat response was accepted (its target, if any, is set)"
    HEARTBEAT_SENT = "a heartbeat went out"
    LEAVE_SENT = "the leave heartbeat went out"
    TARGET_REACHED = "the data plane already fetches exactly the target"
    ROUND_FINISHED = "the target is applied"
    RELEASED = "every partition is stopped and flushed"
    FENCED = "heartbeat error UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH (for example after the "
    "session timed out)"
    GROUP_GONE = "heartbeat error GROUP_ID_NOT_FOUND"
    FATAL_ERROR = "a non-retriable heartbeat error"
    LOOKUP_FAILED = "the coordinator could not be found or reached"
    LOOKUP_REFUSED = "the coordinator lookup was refused with a non-retriable error"
    LOOKUP_GROUP_GONE = "the coordinator lookup failed with GROUP_ID_NOT_FOUND"


class ShareGuard(KeyEnum):
    """Named conditions a row may require."""

    TARGET_OWNED = "the data plane fetches exactly the target"
    TARGET_NOT_OWNED = "the data plane does not fetch exactly the target"
    RELEASING = "a release round is running"
    POLLED_WHILE_STALE = "the application polled since the member went stale"


class ShareEffect(KeyEnum):
    """Named actions; :class:`consumer.share.effects.ShareMemberEffects` implements each."""

    START_JOINING = "epoch 0 (same member id), forget the assignment, heartbeat at once"
    EXPEDITE_HEARTBEAT = "send the next heartbeat at once (it carries the new topic names)"
    REMEMBER_POLL = "rejoin once the release finishes"
    RELEASE_ALL = "stop fetching every partition and flush its acknowledgements"
    SEND_LEAVE_HEARTBEAT = "send epoch -1 now (if the coordinator is known)"
    END_MEMBERSHIP = "epoch 0, drop the target and any running round"
    REJOIN_IF_SUBSCRIBED = "subscribed again meanwhile (and not closing): join"
    REPORT_POLL_TIMEOUT = "report MAX_POLL_INTERVAL_EXCEEDED"
    REPORT_FATAL = "report the error as fatal; later calls raise it"
    RETRY_LOOKUP = "forget the coordinator; the next lookup waits for the backoff"
    REPORT_UNREACHABLE = "report the coordinator unreachable, once per outage"
    FIND_COORDINATOR = "ask for a coordinator lookup"
    SHUT_DOWN_IF_CLOSING = "finish close()"
    SHUT_DOWN_NOW = "finish close() now"


S = ShareState
O = ShareOutcome  # noqa: E741 - short names keep the table one row per line
G = ShareGuard
E = ShareEffect

IN_GROUP: tuple[ShareState, ...] = tuple(s for s, info in SHARE_STATES.items() if info.in_group)
LEAVING_STATES: tuple[ShareState, ...] = (S.PREPARE_LEAVING, S.LEAVING)
OUT_OF_GROUP: tuple[ShareState, ...] = (S.FENCED, S.STALE)
#: States without heartbeats: a failed lookup only schedules the next one.
_SILENT: tuple[ShareState, ...] = (S.UNSUBSCRIBED, S.FENCED, S.STALE, S.FATAL)

_FAIL = (E.REPORT_FATAL, E.END_MEMBERSHIP, E.RELEASE_ALL, E.SHUT_DOWN_IF_CLOSING)
_FAIL_WHILE_LEAVING = (E.REPORT_FATAL, E.END_MEMBERSHIP, E.SHUT_DOWN_IF_CLOSING)
_LEFT = (E.END_MEMBERSHIP, E.SHUT_DOWN_IF_CLOSING, E.REJOIN_IF_SUBSCRIBED)
_LOOK_AGAIN = (E.RETRY_LOOKUP, E.REPORT_UNREACHABLE, E.FIND_COORDINATOR)

ShareRule = Rule[ShareState, ShareOutcome, ShareEffect, ShareGuard]

#: The share member's rules table.
SHARE_RULES: RulesTable[ShareState, ShareOutcome, ShareEffect, ShareGuard] = RulesTable(
    [
        # --- the application ------------------------------------------------------------------
        Rule((S.UNSUBSCRIBED,), O.SUBSCRIBED, S.JOINING, (E.START_JOINING,),
             when="subscribe(): join at once with epoch 0"),
        Rule(IN_GROUP, O.SUBSCRIBED, None, (E.EXPEDITE_HEARTBEAT,),
             when="new topic names: heartbeat at once"),
        Rule((S.STALE,), O.APP_POLLED, None, (E.REMEMBER_POLL,), G.RELEASING,
             when="polled while the flush is pending: rejoin after it"),
        Rule((S.STALE,), O.APP_POLLED, S.JOINING, (E.START_JOINING,),
             when="polled again: rejoin with epoch 0, same member id"),
        Rule(IN_GROUP, O.UNSUBSCRIBE_REQUESTED, S.PREPARE_LEAVING, (E.RELEASE_ALL,),
             when="unsubscribe(): stop and flush, then leave"),
        Rule(OUT_OF_GROUP, O.UNSUBSCRIBE_REQUESTED, S.UNSUBSCRIBED,
             when="unsubscribe() while out of the group"),
        Rule(IN_GROUP, O.CLOSE_REQUESTED, S.PREPARE_LEAVING, (E.RELEASE_ALL,),
             when="close(): stop and flush, leave, then shut down"),
        Rule(OUT_OF_GROUP, O.CLOSE_REQUESTED, S.UNSUBSCRIBED, (E.SHUT_DOWN_NOW,),
             when="close() while out of the group"),
        Rule((S.UNSUBSCRIBED, S.FATAL), O.CLOSE_REQUESTED, None, (E.SHUT_DOWN_NOW,),
             when="close() with nothing to leave"),
        Rule(IN_GROUP, O.POLL_INTERVAL_EXPIRED, S.STALE,
             (E.REPORT_POLL_TIMEOUT, E.SEND_LEAVE_HEARTBEAT, E.END_MEMBERSHIP, E.RELEASE_ALL),
             when="no poll within max.poll.interval.ms: leave, stop and flush"),
        # --- heartbeats -----------------------------------------------------------------------
        Rule((S.JOINING,), O.TARGET_RECEIVED, S.RECONCILING,
             when="joined: reconcile (with nothing to change, on to STABLE at once)"),
        Rule((S.STABLE,), O.TARGET_RECEIVED, S.RECONCILING, (), G.TARGET_NOT_OWNED,
             when="a new target"),
        Rule((S.ACKNOWLEDGING,), O.HEARTBEAT_SENT, S.STABLE, (), G.TARGET_OWNED,
             when="acknowledged; the target is fetched"),
        Rule((S.ACKNOWLEDGING,), O.HEARTBEAT_SENT, S.RECONCILING,
             when="acknowledged; a newer target waits"),
        Rule((S.LEAVING,), O.LEAVE_SENT, S.UNSUBSCRIBED, _LEFT,
             when="left the group"),
        Rule(IN_GROUP, O.FENCED, S.FENCED, (E.END_MEMBERSHIP, E.RELEASE_ALL),
             when="dropped by the broker (e.g. session timeout): stop, flush, then rejoin"),
        Rule(LEAVING_STATES, O.FENCED, S.UNSUBSCRIBED, _LEFT,
             when="dropped while leaving: no leave heartbeat needed"),
        Rule(LEAVING_STATES, O.GROUP_GONE, S.UNSUBSCRIBED, _LEFT,
             when="the group is gone while leaving: nothing to leave"),
        Rule(IN_GROUP, O.GROUP_GONE, S.FATAL, _FAIL, when="GROUP_ID_NOT_FOUND"),
        Rule(IN_GROUP, O.FATAL_ERROR, S.FATAL, _FAIL, when="non-retriable heartbeat error"),
        Rule(LEAVING_STATES, O.FATAL_ERROR, S.FATAL, _FAIL_WHILE_LEAVING,
             when="non-retriable error while leaving"),
        # --- the coordinator lookup -----------------------------------------------------------
        Rule(IN_GROUP, O.LOOKUP_REFUSED, S.FATAL, _FAIL, when="lookup refused (e.g. auth)"),
        Rule(LEAVING_STATES, O.LOOKUP_REFUSED, S.FATAL, _FAIL_WHILE_LEAVING,
             when="lookup refused while leaving"),
        Rule(IN_GROUP, O.LOOKUP_GROUP_GONE, S.FATAL, _FAIL, when="lookup: GROUP_ID_NOT_FOUND"),
        Rule(LEAVING_STATES, O.LOOKUP_GROUP_GONE, None, _LOOK_AGAIN,
             when="keep looking while leaving"),
        Rule((*IN_GROUP, *LEAVING_STATES), O.LOOKUP_FAILED, None, _LOOK_AGAIN,
             when="look up again after backoff"),
        Rule(_SILENT, O.LOOKUP_FAILED, None, (E.RETRY_LOOKUP,), when="no heartbeats: just wait"),
        Rule(_SILENT, O.LOOKUP_REFUSED, None, (E.RETRY_LOOKUP,), when="no heartbeats: just wait"),
        Rule(_SILENT, O.LOOKUP_GROUP_GONE, None, (E.RETRY_LOOKUP,),
             when="no heartbeats: just wait"),
        # --- rounds ---------------------------------------------------------------------------
        Rule((S.RECONCILING,), O.TARGET_REACHED, S.STABLE,
             when="nothing to change: the target is fetched"),
        Rule((S.RECONCILING,), O.ROUND_FINISHED, S.ACKNOWLEDGING,
             when="stopped and flushed the removed, applied the target: acknowledge"),
        Rule((S.PREPARE_LEAVING,), O.RELEASED, S.LEAVING,
             when="flushed: send the leave heartbeat"),
        Rule((S.FENCED,), O.RELEASED, S.JOINING, (E.START_JOINING,),
             when="flushed: rejoin with epoch 0, same member id"),
        Rule((S.STALE,), O.RELEASED, S.JOINING, (E.START_JOINING,), G.POLLED_WHILE_STALE,
             when="flushed and the application polled again"),
    ]
)  # fmt: skip


# --- heartbeat errors ---------------------------------------------------------------------------

A = HeartbeatErrorAction

#: The share heartbeat error table, as data. Codes missing from it are FATAL.
SHARE_HEARTBEAT_ERROR_ACTIONS: dict[ErrorCode, HeartbeatErrorAction] = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: A.RETRY,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: A.REDISCOVER_COORDINATOR,
    ErrorCode.NOT_COORDINATOR: A.REDISCOVER_COORDINATOR,
    ErrorCode.UNKNOWN_MEMBER_ID: A.FENCE,
    ErrorCode.FENCED_MEMBER_EPOCH: A.FENCE,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: A.REPORT,
    ErrorCode.GROUP_ID_NOT_FOUND: A.FATAL_UNLESS_LEAVING,
    ErrorCode.GROUP_AUTHORIZATION_FAILED: A.FATAL,
    ErrorCode.UNSUPPORTED_VERSION: A.FATAL,
    ErrorCode.INVALID_REQUEST: A.FATAL,
    ErrorCode.GROUP_MAX_SIZE_REACHED: A.FATAL,
}

#: Heartbeat error actions that are outcomes for the rules; the others (retry, rediscover,
#: report) keep the state.
SHARE_HEARTBEAT_ERROR_OUTCOMES: dict[HeartbeatErrorAction, ShareOutcome] = {
    A.FENCE: ShareOutcome.FENCED,
    A.FATAL_UNLESS_LEAVING: ShareOutcome.GROUP_GONE,
    A.FATAL: ShareOutcome.FATAL_ERROR,
}
#: The same for an error code that refused a coordinator lookup (others: LOOKUP_FAILED).
SHARE_LOOKUP_ERROR_OUTCOMES: dict[HeartbeatErrorAction, ShareOutcome] = {
    A.FATAL_UNLESS_LEAVING: ShareOutcome.LOOKUP_GROUP_GONE,
    A.FATAL: ShareOutcome.LOOKUP_REFUSED,
}


# --- rounds -------------------------------------------------------------------------------------


class ShareRoundKind(KeyEnum):
    """What a round does."""

    RECONCILE = "reconcile"
    RELEASE = "release"


class ShareRoundPhase(KeyEnum):
    """The step a running round is in: each waits for one answer from the data plane."""

    STOPPING = "stopping"
    APPLYING = "applying"


@dataclass(frozen=True, slots=True)
class SharePhaseInfo:
    """One row of the phases table."""

    sends: str
    waits_for: str
    skipped_when: str | None


P = ShareRoundPhase

#: The phases table.
SHARE_PHASES: dict[ShareRoundPhase, SharePhaseInfo] = {
    P.STOPPING: SharePhaseInfo("StopAndFlush", "StoppedAndFlushed", "no partition is removed"),
    P.APPLYING: SharePhaseInfo("ApplyShareAssignment", "ShareAssignmentApplied", None),
}

#: The phases each kind of round goes through, in order (a round ends after its last phase).
SHARE_ROUND_STEPS: dict[ShareRoundKind, tuple[ShareRoundPhase, ...]] = {
    ShareRoundKind.RECONCILE: (P.STOPPING, P.APPLYING),
    ShareRoundKind.RELEASE: (P.STOPPING,),
}

#: The outcome a finished round reports.
SHARE_ROUND_OUTCOMES: dict[ShareRoundKind, ShareOutcome] = {
    ShareRoundKind.RECONCILE: ShareOutcome.ROUND_FINISHED,
    ShareRoundKind.RELEASE: ShareOutcome.RELEASED,
}
