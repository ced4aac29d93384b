"""The core machinery serves a member kind whose states and RPC differ from the consumer's.

A toy share-group-like member: its own states, outcomes and rules table on the shared engine
(``RulesTable``, ``StateCell``), and the shared heartbeat pacing and coordinator discovery of
``HeartbeatRequestManager`` (interval, one request in flight, at-once sends, backoff), with a
request type of its own. Nothing of the consumer member's table is involved.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

from consumer.member import MemberConfig
from consumer.member.heartbeat import HeartbeatRequestManager
from consumer.member.machine import Rule, RulesTable, StateCell
from consumer.member.states import Heartbeats, StateInfo


class ShareState(enum.Enum):
    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    STABLE = "STABLE"
    FENCED = "FENCED"


class ShareOutcome(enum.Enum):
    SUBSCRIBED = "subscribed"
    JOINED = "heartbeat answered"
    FENCED = "fenced"


class ShareEffect(enum.Enum):
    REJOIN = "rejoin at once"


class NoGuard(enum.Enum):
    NEVER = "unused"


T = ShareState
O = ShareOutcome  # noqa: E741
TABLE: RulesTable[ShareState, ShareOutcome, ShareEffect, NoGuard] = RulesTable(
    [
        Rule((T.UNSUBSCRIBED,), O.SUBSCRIBED, T.JOINING),
        Rule((T.JOINING,), O.JOINED, T.STABLE),
        Rule((T.JOINING, T.STABLE), O.FENCED, T.JOINING, (ShareEffect.REJOIN,)),
    ]
)
INFO = {
    T.UNSUBSCRIBED: StateInfo(Heartbeats.NONE, False, "out"),
    T.JOINING: StateInfo(Heartbeats.AT_ONCE, True, "joining", joins=True),
    T.STABLE: StateInfo(Heartbeats.INTERVAL, True, "in"),
    T.FENCED: StateInfo(Heartbeats.NONE, False, "fenced"),
}


@dataclass(frozen=True)
class ShareHeartbeat:
    request_id: int
    member_epoch: int


def test_a_second_table_and_the_shared_pacing_drive_a_different_member() -> None:
    fired: list[str] = []
    cell: StateCell[ShareState, ShareOutcome, ShareEffect, NoGuard] = StateCell(
        T.UNSUBSCRIBED, lambda _previous, rule: fired.append(rule.key)
    )
    ids = iter(range(1, 100))
    pacer = HeartbeatRequestManager(
        MemberConfig(group_id="share", retry_backoff_jitter=0.0),
        random.Random(1),
        lambda: next(ids),
    )
    sent: list[ShareHeartbeat] = []

    def step(outcome: ShareOutcome) -> None:
        rule = TABLE.decide(cell.state, outcome, lambda _guard: False)
        assert rule is not None
        cell.enter(rule)

    def tick(now_ms: int) -> None:
        if pacer.should_request_coordinator(now_ms):
            pacer.on_coordinator_changed()  # the lookup answers at once here
        due = pacer.next_due_ms(INFO[cell.state])
        if due is not None and now_ms >= due:
            request = ShareHeartbeat(next(ids), 0 if INFO[cell.state].joins else 1)
            pacer.mark_sent(request.request_id, now_ms)
            sent.append(request)

    tick(0)
    assert sent == [], "no heartbeats while unsubscribed"
    step(O.SUBSCRIBED)
    tick(0)
    tick(1)
    assert [h.member_epoch for h in sent] == [0], "at once, and one in flight at a time"
    assert pacer.take_answer(sent[-1].request_id)
    pacer.on_success(1_000, 1)
    step(O.JOINED)
    tick(500)
    assert len(sent) == 1, "STABLE waits for the interval"
    tick(1_001)
    assert [h.member_epoch for h in sent] == [0, 1]
    assert pacer.take_answer(sent[-1].request_id)
    pacer.on_failure(1_002, reset_backoff=False)
    step(O.FENCED)
    assert cell.state is T.JOINING
    tick(1_050)
    assert len(sent) == 2, "the error backoff (100 ms) gates the retry"
    tick(1_102)
    assert [h.member_epoch for h in sent] == [0, 1, 0]
    assert fired == ["UNSUBSCRIBED:SUBSCRIBED", "JOINING:JOINED", "JOINING|STABLE:FENCED"]
    assert TABLE.decide(T.FENCED, O.JOINED, lambda _guard: False) is None
