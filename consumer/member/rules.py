"""The consumer member's rules: every "in state X, on outcome Y, go to Z and do E" in one table.

The managers and the member's input handlers never choose a next state: they report an
:class:`Outcome`, and :data:`RULES` decides. A (state, outcome) pair without a row changes nothing.
Guards are named conditions read by the member (:class:`Guard`); effects are named actions the
member runs in order (:class:`Effect`); an effect may report a further outcome (for example a
release with nothing to release finishes at once), which is decided the same way.

A reconciliation *round* runs through declared phases (:data:`ROUND_STEPS`, :data:`PHASES`):
rounds run in RECONCILE_ASSIGNMENT, and release rounds (revoke or lose everything) in
UNSUBSCRIBING, FENCED, STALE and FATAL, so phases are a second table rather than sub-states.

``python -m consumer.member.diagram --write`` renders both tables into
``docs/concepts/member-state-machine.md``; a test fails when the page is stale, and another drives
every row.
"""

from __future__ import annotations

from dataclasses import dataclass

from consumer.member.errors_table import HeartbeatErrorAction
from consumer.member.machine import KeyEnum, Rule, RulesTable
from consumer.member.states import IN_GROUP_STATES, MemberState


class Outcome(KeyEnum):
    """What an input or a manager reports; the rules decide what follows."""

    SUBSCRIBED = "the application subscribed"
    UNSUBSCRIBE_REQUESTED = "the application unsubscribed"
    CLOSE_REQUESTED = "the application closes the consumer"
    APP_POLLED = "the application polled"
    POLL_INTERVAL_EXPIRED = "max.poll.interval.ms elapsed without a poll"
    TARGET_RECEIVED = "a heartbeat response was accepted (its target, if any, is set)"
    HEARTBEAT_SENT = "a heartbeat carrying the owned partitions went out"
    TARGET_REACHED = "the owned assignment is the target"
    TARGET_EPOCH_ADVANCED = "the owned partitions already match a newer target"
    ROUND_FINISHED = "a reconciliation round finished"
    ROUND_TIMED_OUT = "a revocation was not completed within the rebalance timeout"
    RELEASED = "every owned partition was revoked or lost"
    FENCED = "heartbeat error FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID"
    GROUP_GONE = "heartbeat error GROUP_ID_NOT_FOUND"
    FATAL_ERROR = "a non-retriable heartbeat error"
    LOOKUP_FAILED = "the coordinator could not be found or reached"
    LOOKUP_REFUSED = "the coordinator lookup was refused with a non-retriable error"
    LOOKUP_GROUP_GONE = "the coordinator lookup failed with GROUP_ID_NOT_FOUND"
    EARLY_LOOKUP_FAILED = "a lookup asked for before the member heartbeats failed after it started"


class Guard(KeyEnum):
    """Named conditions a row may require."""

    JOIN_PENDING = "a subscription waits for the first poll"
    TARGET_OWNED = "the owned assignment is the whole target"
    TARGET_NOT_OWNED = "the owned assignment is not the target"
    RELEASING = "a release round is running"
    POLLED_WHILE_STALE = "the application polled since the member went stale"


class Effect(KeyEnum):
    """Named actions; :class:`consumer.member.member.Member` implements each."""

    MARK_JOIN_PENDING = "join on the next poll"
    START_JOINING = "epoch 0, forget the assignment, heartbeat at once"
    REMEMBER_POLL = "rejoin once the release finishes"
    RELEASE_FOR_LEAVE = "commit, then revoke everything (lose it if never assigned)"
    RELEASE_AS_LOST = "stop fetching, on_lost (no commit)"
    SEND_LEAVE_HEARTBEAT = "send epoch -1 (-2 for a static member)"
    END_MEMBERSHIP = "epoch 0, drop group commits and fetches, stop auto-commit"
    FORGET_ASSIGNMENT = "forget target, owned partitions and topic names"
    RESET_AUTO_COMMIT_TIMER = "a new auto-commit interval starts"
    REPORT_POLL_TIMEOUT = "report MAX_POLL_INTERVAL_EXCEEDED"
    REPORT_FATAL = "report the error as fatal; later calls raise it"
    RETRY_LOOKUP = "forget the coordinator; the next lookup waits for the backoff"
    LOOK_UP_AT_JOIN = "look the coordinator up again only when the member joins"
    LOOK_UP_AGAIN_NOW = "forget the lookup; the next one goes out now, without backoff"
    REPORT_UNREACHABLE = "report the coordinator unreachable, once per outage"
    FIND_COORDINATOR = "ask for a coordinator lookup"
    SHUT_DOWN_IF_CLOSING = "finish close()"
    SHUT_DOWN_NOW = "finish close() now"


S = MemberState
O = Outcome  # noqa: E741 - short names keep the table one row per line
G = Guard
E = Effect

IN_GROUP: tuple[MemberState, ...] = tuple(s for s in MemberState if s in IN_GROUP_STATES)
OUT_OF_GROUP: tuple[MemberState, ...] = (S.FENCED, S.STALE)
#: States without heartbeats: a failed lookup only schedules the next one.
_SILENT: tuple[MemberState, ...] = (S.FENCED, S.STALE, S.FATAL)

_LEAVE_NOW = (E.END_MEMBERSHIP, E.FORGET_ASSIGNMENT, E.SHUT_DOWN_IF_CLOSING)
_FAIL = (E.REPORT_FATAL, E.END_MEMBERSHIP, E.RELEASE_AS_LOST, E.SHUT_DOWN_IF_CLOSING)
_FAIL_WHILE_LEAVING = (E.REPORT_FATAL, E.END_MEMBERSHIP, E.SHUT_DOWN_IF_CLOSING)
_LOSE = (E.END_MEMBERSHIP, E.RELEASE_AS_LOST)
#: Dropped by the broker before the leave completed: the partitions still held are lost.
_DROPPED_WHILE_LEAVING = (*_LOSE, E.SHUT_DOWN_IF_CLOSING)
_LOOK_AGAIN = (E.RETRY_LOOKUP, E.REPORT_UNREACHABLE, E.FIND_COORDINATOR)
#: The lookup ahead of a join failed: not retried (an idle consumer with a wrong address makes
#: one attempt), not reported; START_JOINING looks up at once, as a member that never looked.
_LOOK_UP_AT_JOIN = (E.RETRY_LOOKUP, E.LOOK_UP_AT_JOIN)

MemberRule = Rule[MemberState, Outcome, Effect, Guard]

#: The consumer member's rules table.
RULES: RulesTable[MemberState, Outcome, Effect, Guard] = RulesTable(
    [
        # --- the application ------------------------------------------------------------------
        Rule((S.UNSUBSCRIBED, S.UNSUBSCRIBING), O.SUBSCRIBED, None, (E.MARK_JOIN_PENDING,),
             when="join at the next poll (as Java since KAFKA-17154)"),
        Rule((S.UNSUBSCRIBED,), O.APP_POLLED, None, (), G.RELEASING,
             when="on_lost of the last membership still pending: join after it"),
        Rule((S.UNSUBSCRIBED,), O.APP_POLLED, S.JOINING, (E.START_JOINING,), G.JOIN_PENDING,
             when="first poll after subscribe"),
        Rule((S.STALE,), O.APP_POLLED, None, (E.REMEMBER_POLL,), G.RELEASING,
             when="polled again while on_lost is pending: rejoin after it"),
        Rule((S.STALE,), O.APP_POLLED, S.JOINING, (E.START_JOINING,),
             when="polled again: rejoin with epoch 0, same member id"),
        Rule(IN_GROUP, O.UNSUBSCRIBE_REQUESTED, S.UNSUBSCRIBING, (E.RELEASE_FOR_LEAVE,),
             when="unsubscribe(): commit, on_revoke, then leave"),
        Rule(OUT_OF_GROUP, O.UNSUBSCRIBE_REQUESTED, S.UNSUBSCRIBED,
             when="unsubscribe() while out of the group"),
        Rule(IN_GROUP, O.CLOSE_REQUESTED, S.UNSUBSCRIBING, (E.RELEASE_FOR_LEAVE,),
             when="close(): commit, on_revoke, leave, then shut down"),
        Rule(OUT_OF_GROUP, O.CLOSE_REQUESTED, S.UNSUBSCRIBED, (E.SHUT_DOWN_NOW,),
             when="close() while out of the group"),
        Rule((S.UNSUBSCRIBED, S.FATAL), O.CLOSE_REQUESTED, None, (E.SHUT_DOWN_NOW,),
             when="close() with nothing to leave"),
        Rule(IN_GROUP, O.POLL_INTERVAL_EXPIRED, S.STALE,
             (E.REPORT_POLL_TIMEOUT, E.SEND_LEAVE_HEARTBEAT, *_LOSE),
             when="no poll within max.poll.interval.ms: leave, on_lost"),
        # --- heartbeat responses --------------------------------------------------------------
        Rule((S.JOINING,), O.TARGET_RECEIVED, S.STABLE, (), G.TARGET_OWNED,
             when="joined with nothing to reconcile"),
        Rule((S.JOINING,), O.TARGET_RECEIVED, S.RECONCILE_ASSIGNMENT,
             when="joined; the target differs from the owned assignment"),
        Rule((S.STABLE,), O.TARGET_RECEIVED, S.RECONCILE_ASSIGNMENT, (), G.TARGET_NOT_OWNED,
             when="a new target"),
        Rule((S.ACK_ASSIGNMENT,), O.HEARTBEAT_SENT, S.STABLE, (), G.TARGET_OWNED,
             when="ack sent; the target is owned"),
        Rule((S.ACK_ASSIGNMENT,), O.HEARTBEAT_SENT, S.RECONCILE_ASSIGNMENT,
             when="ack sent; a newer target waits"),
        Rule(IN_GROUP, O.FENCED, S.FENCED, _LOSE,
             when="fenced: on_lost (no commit), then rejoin"),
        Rule((S.UNSUBSCRIBING,), O.FENCED, S.UNSUBSCRIBED, _DROPPED_WHILE_LEAVING,
             when="fenced while leaving: on_lost, no leave heartbeat needed"),
        Rule((S.UNSUBSCRIBING,), O.GROUP_GONE, S.UNSUBSCRIBED, _DROPPED_WHILE_LEAVING,
             when="the group is gone while leaving: on_lost, nothing to leave"),
        Rule(IN_GROUP, O.GROUP_GONE, S.FATAL, _FAIL, when="GROUP_ID_NOT_FOUND"),
        Rule(IN_GROUP, O.FATAL_ERROR, S.FATAL, _FAIL, when="non-retriable heartbeat error"),
        Rule((S.UNSUBSCRIBING,), O.FATAL_ERROR, S.FATAL, _FAIL_WHILE_LEAVING,
             when="non-retriable error while leaving"),
        # --- the coordinator lookup -----------------------------------------------------------
        Rule(IN_GROUP, O.LOOKUP_REFUSED, S.FATAL, _FAIL, when="lookup refused (e.g. auth)"),
        Rule((S.UNSUBSCRIBING,), O.LOOKUP_REFUSED, S.FATAL, _FAIL_WHILE_LEAVING,
             when="lookup refused while leaving"),
        Rule(IN_GROUP, O.LOOKUP_GROUP_GONE, S.FATAL, _FAIL, when="lookup: GROUP_ID_NOT_FOUND"),
        Rule((S.UNSUBSCRIBING,), O.LOOKUP_GROUP_GONE, None, _LOOK_AGAIN,
             when="keep looking while leaving"),
        Rule((*IN_GROUP, S.UNSUBSCRIBING), O.LOOKUP_FAILED, None, _LOOK_AGAIN,
             when="look up again after backoff"),
        Rule((S.UNSUBSCRIBED,), O.LOOKUP_FAILED, None, _LOOK_UP_AT_JOIN,
             when="the lookup ahead of a join failed: look up at the join"),
        Rule((S.UNSUBSCRIBED,), O.LOOKUP_REFUSED, None, _LOOK_UP_AT_JOIN,
             when="refused ahead of a join: the join's lookup decides"),
        Rule((S.UNSUBSCRIBED,), O.LOOKUP_GROUP_GONE, None, _LOOK_UP_AT_JOIN,
             when="refused ahead of a join: the join's lookup decides"),
        Rule((*IN_GROUP, S.UNSUBSCRIBING), O.EARLY_LOOKUP_FAILED, None,
             (E.LOOK_UP_AGAIN_NOW, E.FIND_COORDINATOR),
             when="made before the join (e.g. old credentials): the join's own lookup decides"),
        Rule(_SILENT, O.LOOKUP_FAILED, None, (E.RETRY_LOOKUP,), when="no heartbeats: just wait"),
        Rule(_SILENT, O.LOOKUP_REFUSED, None, (E.RETRY_LOOKUP,), when="no heartbeats: just wait"),
        Rule(_SILENT, O.LOOKUP_GROUP_GONE, None, (E.RETRY_LOOKUP,),
             when="no heartbeats: just wait"),
        # --- reconciliation and release rounds ------------------------------------------------
        Rule((S.RECONCILE_ASSIGNMENT,), O.TARGET_REACHED, S.STABLE,
             when="nothing to reconcile: the target is owned"),
        Rule((S.RECONCILE_ASSIGNMENT,), O.TARGET_EPOCH_ADVANCED, S.ACK_ASSIGNMENT,
             when="owned partitions unchanged but the target is newer (or partly unresolved)"),
        Rule((S.RECONCILE_ASSIGNMENT,), O.ROUND_FINISHED, S.ACK_ASSIGNMENT,
             (E.RESET_AUTO_COMMIT_TIMER,), when="revoked, then assigned: acknowledge"),
        Rule((S.RECONCILE_ASSIGNMENT,), O.ROUND_TIMED_OUT, S.FENCED, _LOSE,
             when="on_revoke not completed within the rebalance timeout"),
        Rule((S.UNSUBSCRIBING,), O.RELEASED, S.UNSUBSCRIBED,
             (E.SEND_LEAVE_HEARTBEAT, *_LEAVE_NOW), when="revoked: send the leave heartbeat"),
        Rule((S.FENCED,), O.RELEASED, S.JOINING, (E.START_JOINING,),
             when="on_lost completed: rejoin with epoch 0, same member id"),
        Rule((S.STALE,), O.RELEASED, S.JOINING, (E.START_JOINING,), G.POLLED_WHILE_STALE,
             when="on_lost completed and the application polled again"),
    ]
)  # fmt: skip


#: Heartbeat error actions (:mod:`consumer.member.errors_table`) that are outcomes for the rules;
#: the others (retry, rediscover, report) keep the state.
HEARTBEAT_ERROR_OUTCOMES: dict[HeartbeatErrorAction, Outcome] = {
    HeartbeatErrorAction.FENCE: Outcome.FENCED,
    HeartbeatErrorAction.FATAL_UNLESS_LEAVING: Outcome.GROUP_GONE,
    HeartbeatErrorAction.FATAL: Outcome.FATAL_ERROR,
}
#: The same for an error code that refused a coordinator lookup (others: LOOKUP_FAILED).
LOOKUP_ERROR_OUTCOMES: dict[HeartbeatErrorAction, Outcome] = {
    HeartbeatErrorAction.FATAL_UNLESS_LEAVING: Outcome.LOOKUP_GROUP_GONE,
    HeartbeatErrorAction.FATAL: Outcome.LOOKUP_REFUSED,
}


# --- reconciliation rounds --------------------------------------------------------------------


class RoundKind(KeyEnum):
    """What a round does."""

    RECONCILE = "reconcile"
    REVOKE_ALL = "revoke-all"
    LOSE_ALL = "lose-all"


class RoundPhase(KeyEnum):
    """The step a running round is in: each waits for one answer."""

    STOPPING = "stopping"
    COMMITTING = "committing"
    REVOKING = "revoking"
    LOSING = "losing"
    ASSIGNING = "assigning"


class Skip(KeyEnum):
    """Why a phase may be skipped."""

    NOTHING_REVOKED = "no partition is revoked"
    NOTHING_TO_COMMIT = "auto-commit is off, or every revoked offset is committed"


@dataclass(frozen=True, slots=True)
class PhaseInfo:
    """One row of the phases table."""

    sends: str
    waits_for: str
    skipped_when: Skip | None
    bounded: bool  # bounded by the rebalance timeout (past it, the round times out)


P = RoundPhase

#: The phases table.
PHASES: dict[RoundPhase, PhaseInfo] = {
    P.STOPPING: PhaseInfo("StopFetching", "FetchingStopped", Skip.NOTHING_REVOKED, True),
    P.COMMITTING: PhaseInfo(
        "CommitOffsets (pre-revoke or close)", "the commit to end", Skip.NOTHING_TO_COMMIT, False
    ),
    P.REVOKING: PhaseInfo("InvokeOnRevoke", "RevocationCompleted", Skip.NOTHING_REVOKED, True),
    P.LOSING: PhaseInfo(
        "StopFetching, InvokeOnLost", "CallbackCompleted", Skip.NOTHING_REVOKED, False
    ),
    # The committed-offsets fetch of the added partitions goes out with ApplyAssignment and
    # is not waited for (as Java's member, which acknowledges before positions are initialised).
    P.ASSIGNING: PhaseInfo(
        "ApplyAssignment, InvokeOnAssign (and FetchCommittedOffsets, not waited for)",
        "AssignmentApplied and CallbackCompleted",
        None,
        False,
    ),
}

#: The phases each kind of round goes through, in order (a round ends after its last phase).
ROUND_STEPS: dict[RoundKind, tuple[RoundPhase, ...]] = {
    RoundKind.RECONCILE: (P.STOPPING, P.COMMITTING, P.REVOKING, P.ASSIGNING),
    RoundKind.REVOKE_ALL: (P.STOPPING, P.COMMITTING, P.REVOKING),
    RoundKind.LOSE_ALL: (P.LOSING,),
}

#: The outcome a finished round reports.
ROUND_OUTCOMES: dict[RoundKind, Outcome] = {
    RoundKind.RECONCILE: Outcome.ROUND_FINISHED,
    RoundKind.REVOKE_ALL: Outcome.RELEASED,
    RoundKind.LOSE_ALL: Outcome.RELEASED,
}
