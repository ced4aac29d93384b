"""Member states and the transition table: the single owner of "which state may follow which".

Everything that moves the member from one state to another goes through a trigger listed in
:data:`TRANSITIONS`. The table is data: the ``transitions.Machine`` in :mod:`consumer.member.member`
is built from it and the Mermaid diagram in the docs is rendered from it
(:func:`consumer.member.diagram.render_mermaid`). A transition written as code elsewhere would be
missing from both, so there is none.

Java's names map as RECONCILING = RECONCILE_ASSIGNMENT, ACKNOWLEDGING = ACK_ASSIGNMENT and
PREPARE_LEAVING + LEAVING = UNSUBSCRIBING.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class MemberState(enum.Enum):
    """The state of a consumer group member."""

    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILE_ASSIGNMENT = "RECONCILE_ASSIGNMENT"
    ACK_ASSIGNMENT = "ACK_ASSIGNMENT"
    STABLE = "STABLE"
    FENCED = "FENCED"
    UNSUBSCRIBING = "UNSUBSCRIBING"
    STALE = "STALE"
    FATAL = "FATAL"


class Trigger(enum.Enum):
    """Names of the machine's triggers (verbs)."""

    JOIN = "join"
    RECONCILE = "reconcile"
    ACKNOWLEDGE = "acknowledge"
    SETTLE = "settle"
    FENCE = "fence"
    LEAVE = "leave"
    FINISH_LEAVING = "finish_leaving"
    EXPIRE_POLL_INTERVAL = "expire_poll_interval"
    ABANDON = "abandon"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Transition:
    """One row of the table: ``trigger`` moves the member from ``source`` to ``dest``."""

    trigger: Trigger
    source: MemberState
    dest: MemberState
    when: str


S = MemberState
T = Trigger

#: States in which the broker counts the member as part of the group and it heartbeats.
IN_GROUP_STATES: frozenset[MemberState] = frozenset(
    {S.JOINING, S.RECONCILE_ASSIGNMENT, S.ACK_ASSIGNMENT, S.STABLE}
)
#: States that may accept a new target assignment.
ACCEPTS_ASSIGNMENT_STATES: frozenset[MemberState] = IN_GROUP_STATES
#: States in which heartbeats are sent at all.
HEARTBEATING_STATES: frozenset[MemberState] = IN_GROUP_STATES | {S.UNSUBSCRIBING}

_ASSIGN = "heartbeat response with a target different from the current assignment"

#: The transition table (trigger, source, destination, condition in words).
TRANSITIONS: tuple[Transition, ...] = (
    Transition(T.JOIN, S.UNSUBSCRIBED, S.JOINING, "subscribed, on the next application poll"),
    Transition(T.JOIN, S.FENCED, S.JOINING, "on_lost completed; rejoin with epoch 0, same id"),
    Transition(T.JOIN, S.STALE, S.JOINING, "application polled again and on_lost completed"),
    Transition(T.RECONCILE, S.JOINING, S.RECONCILE_ASSIGNMENT, _ASSIGN),
    Transition(T.RECONCILE, S.STABLE, S.RECONCILE_ASSIGNMENT, _ASSIGN),
    Transition(T.RECONCILE, S.ACK_ASSIGNMENT, S.RECONCILE_ASSIGNMENT, "ack sent, target differs"),
    Transition(T.RECONCILE, S.RECONCILE_ASSIGNMENT, S.RECONCILE_ASSIGNMENT, "newer target"),
    Transition(T.ACKNOWLEDGE, S.RECONCILE_ASSIGNMENT, S.ACK_ASSIGNMENT, "round or partial ack"),
    Transition(T.SETTLE, S.JOINING, S.STABLE, "response target equals the current assignment"),
    Transition(T.SETTLE, S.RECONCILE_ASSIGNMENT, S.STABLE, "target equals current"),
    Transition(T.SETTLE, S.ACK_ASSIGNMENT, S.STABLE, "ack sent and target equals current"),
    Transition(T.FENCE, S.JOINING, S.FENCED, "FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID"),
    Transition(T.FENCE, S.RECONCILE_ASSIGNMENT, S.FENCED, "fenced, or revocation timed out"),
    Transition(T.FENCE, S.ACK_ASSIGNMENT, S.FENCED, "FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID"),
    Transition(T.FENCE, S.STABLE, S.FENCED, "FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID"),
    Transition(T.FENCE, S.UNSUBSCRIBING, S.UNSUBSCRIBED, "fenced while leaving: no leave sent"),
    Transition(T.LEAVE, S.JOINING, S.UNSUBSCRIBING, "unsubscribe or close"),
    Transition(T.LEAVE, S.RECONCILE_ASSIGNMENT, S.UNSUBSCRIBING, "unsubscribe or close"),
    Transition(T.LEAVE, S.ACK_ASSIGNMENT, S.UNSUBSCRIBING, "unsubscribe or close"),
    Transition(T.LEAVE, S.STABLE, S.UNSUBSCRIBING, "unsubscribe or close"),
    Transition(T.FINISH_LEAVING, S.UNSUBSCRIBING, S.UNSUBSCRIBED, "leave heartbeat sent"),
    Transition(T.EXPIRE_POLL_INTERVAL, S.JOINING, S.STALE, "max.poll.interval.ms elapsed"),
    Transition(T.EXPIRE_POLL_INTERVAL, S.RECONCILE_ASSIGNMENT, S.STALE, "idem"),
    Transition(T.EXPIRE_POLL_INTERVAL, S.ACK_ASSIGNMENT, S.STALE, "idem"),
    Transition(T.EXPIRE_POLL_INTERVAL, S.STABLE, S.STALE, "idem"),
    Transition(T.ABANDON, S.FENCED, S.UNSUBSCRIBED, "unsubscribe or close while out of the group"),
    Transition(T.ABANDON, S.STALE, S.UNSUBSCRIBED, "unsubscribe or close while out of the group"),
    Transition(T.FAIL, S.JOINING, S.FATAL, "non-retriable heartbeat error"),
    Transition(T.FAIL, S.RECONCILE_ASSIGNMENT, S.FATAL, "non-retriable heartbeat error"),
    Transition(T.FAIL, S.ACK_ASSIGNMENT, S.FATAL, "non-retriable heartbeat error"),
    Transition(T.FAIL, S.STABLE, S.FATAL, "non-retriable heartbeat error"),
    Transition(T.FAIL, S.UNSUBSCRIBING, S.FATAL, "non-retriable heartbeat error"),
)

#: One paragraph per state, used by the documentation.
STATE_DESCRIPTIONS: dict[MemberState, str] = {
    S.UNSUBSCRIBED: "Not in the group; no heartbeats. Initial state, and the state after leaving.",
    S.JOINING: "Sends the join heartbeat (epoch 0, full request, empty owned partitions) at once.",
    S.RECONCILE_ASSIGNMENT: "Revokes then assigns to reach the target; heartbeats on interval.",
    S.ACK_ASSIGNMENT: "A round finished; the next heartbeat goes out at once with the owned set.",
    S.STABLE: "Owned assignment equals the target; heartbeats on the interval.",
    S.FENCED: "The broker dropped the member; on_lost runs (no commit), then it rejoins.",
    S.UNSUBSCRIBING: "Commits, runs on_revoke (or on_lost), then sends the leave heartbeat.",
    S.STALE: "max.poll.interval.ms elapsed: left the group, on_lost runs; rejoins on next poll.",
    S.FATAL: "A non-retriable error; terminal. The error is reported to the application.",
}


def machine_transitions() -> list[dict[str, object]]:
    """The table in the list-of-dicts form ``transitions.Machine`` takes."""
    return [
        {"trigger": row.trigger.value, "source": row.source, "dest": row.dest}
        for row in TRANSITIONS
    ]


def allowed_triggers(state: MemberState) -> frozenset[Trigger]:
    """Triggers the table allows from ``state``."""
    return frozenset(row.trigger for row in TRANSITIONS if row.source is state)
