"""Share member states and what each one means, as data.

The names are the Java client's ``MemberState`` values a ``ShareMembershipManager`` goes through
(KIP-932). Which state follows which is the rules table of :mod:`consumer.share.rules`; the
columns (:class:`~consumer.member.states.StateInfo`, shared with the consumer member) say how a
state heartbeats and whether the broker counts the member in the group.
"""

from __future__ import annotations

from consumer.member.machine import KeyEnum
from consumer.member.states import Heartbeats, StateInfo


class ShareState(KeyEnum):
    """The state of a share group member."""

    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    PREPARE_LEAVING = "PREPARE_LEAVING"
    LEAVING = "LEAVING"
    STALE = "STALE"
    FATAL = "FATAL"


S = ShareState
H = Heartbeats

#: The share member's states table.
SHARE_STATES: dict[ShareState, StateInfo] = {
    S.UNSUBSCRIBED: StateInfo(
        H.NONE, False, "Not in the group; no heartbeats. Initial state, and after leaving."
    ),
    S.JOINING: StateInfo(
        H.AT_ONCE,
        True,
        "Sends the join heartbeat (epoch 0, topic names, rack) at once.",
        joins=True,
    ),
    S.RECONCILING: StateInfo(
        H.INTERVAL,
        True,
        "Stops fetching removed partitions (flushing their acknowledgements), then applies the "
        "target; heartbeats on the interval.",
        reconciles=True,
    ),
    S.ACKNOWLEDGING: StateInfo(
        H.AT_ONCE, True, "The target is applied; the next heartbeat goes out at once."
    ),
    S.STABLE: StateInfo(H.INTERVAL, True, "Fetching exactly the target; heartbeats."),
    S.FENCED: StateInfo(
        H.NONE,
        False,
        "The broker dropped the member: it stops fetching and flushes, then rejoins at epoch 0.",
    ),
    S.PREPARE_LEAVING: StateInfo(
        H.INTERVAL, False, "Stops fetching every partition and flushes its acknowledgements."
    ),
    S.LEAVING: StateInfo(
        H.AT_ONCE,
        False,
        "Sends the leave heartbeat (epoch -1) as soon as the coordinator is known.",
        leaves=True,
    ),
    S.STALE: StateInfo(
        H.NONE,
        False,
        "max.poll.interval.ms elapsed: left the group and stopped fetching; rejoins on the next "
        "poll.",
    ),
    S.FATAL: StateInfo(
        H.NONE, False, "A non-retriable error; terminal. The error is reported to the application."
    ),
}
