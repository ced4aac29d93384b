"""Member states and what each one means, as data.

Which state follows which, and why, is the rules table of :mod:`consumer.member.rules`. This
module says what a state *is*: whether the member heartbeats in it (and how), whether the broker
counts it as part of the group, whether a reconciliation round runs in it. The managers read these
columns instead of testing for state names.

Java's names map as RECONCILING = RECONCILE_ASSIGNMENT, ACKNOWLEDGING = ACK_ASSIGNMENT and
PREPARE_LEAVING + LEAVING = UNSUBSCRIBING.
"""

from __future__ import annotations

from dataclasses import dataclass

from consumer.member.machine import KeyEnum


class MemberState(KeyEnum):
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


class Heartbeats(KeyEnum):
    """How a state heartbeats."""

    NONE = "no heartbeats"
    INTERVAL = "on the heartbeat interval"
    AT_ONCE = "at once (when nothing is in flight and the backoff allows)"


@dataclass(frozen=True, slots=True)
class StateInfo:
    """The columns of one state.

    Attributes:
        heartbeats: whether and when heartbeats are sent.
        in_group: the broker counts the member in the group: it accepts target assignments,
            auto-commits, and is bound by ``max.poll.interval.ms``.
        joins: heartbeats are join requests (epoch 0, full, rack id, no owned partitions).
        reconciles: a reconciliation round is started whenever none runs.
        leaves: the state's one heartbeat is the leave heartbeat, sent at once (even with another
            heartbeat in flight). The consumer member sends its leave from an effect instead.
        finds_coordinator: a state without heartbeats still looks the coordinator up, so that
            the join heartbeat can go out at once when the application subscribes (Java's and
            librdkafka's members look it up from construction). A failed lookup is not retried
            in the state (the rules say when: at the join). States with heartbeats always look
            it up.
        description: one sentence for the docs.
    """

    heartbeats: Heartbeats
    in_group: bool
    description: str
    joins: bool = False
    reconciles: bool = False
    leaves: bool = False
    finds_coordinator: bool = False


S = MemberState
H = Heartbeats

#: The states table.
STATES: dict[MemberState, StateInfo] = {
    S.UNSUBSCRIBED: StateInfo(
        H.NONE,
        False,
        "Not in the group; no heartbeats, but the coordinator is looked up ahead of a join."
        " Initial state, and after leaving.",
        finds_coordinator=True,
    ),
    S.JOINING: StateInfo(
        H.AT_ONCE,
        True,
        "Sends the join heartbeat (epoch 0, full request, empty owned partitions) at once.",
        joins=True,
    ),
    S.RECONCILE_ASSIGNMENT: StateInfo(
        H.INTERVAL,
        True,
        "Revokes then assigns to reach the target; heartbeats on the interval.",
        reconciles=True,
    ),
    S.ACK_ASSIGNMENT: StateInfo(
        H.AT_ONCE, True, "A round finished; the next heartbeat goes out at once with the owned set."
    ),
    S.STABLE: StateInfo(H.INTERVAL, True, "Owned assignment equals the target; heartbeats."),
    S.FENCED: StateInfo(
        H.NONE, False, "The broker dropped the member; on_lost runs (no commit), then it rejoins."
    ),
    S.UNSUBSCRIBING: StateInfo(
        H.INTERVAL, False, "Commits, runs on_revoke (or on_lost), then sends the leave heartbeat."
    ),
    S.STALE: StateInfo(
        H.NONE,
        False,
        "max.poll.interval.ms elapsed: left the group, on_lost runs; rejoins on the next poll.",
    ),
    S.FATAL: StateInfo(
        H.NONE, False, "A non-retriable error; terminal. The error is reported to the application."
    ),
}

#: States in which the broker counts the member as part of the group.
IN_GROUP_STATES: frozenset[MemberState] = frozenset(s for s, i in STATES.items() if i.in_group)
#: States in which heartbeats are sent at all.
HEARTBEATING_STATES: frozenset[MemberState] = frozenset(
    s for s, i in STATES.items() if i.heartbeats is not H.NONE
)
