"""What the application sees of the loop's member (MemberPublisher): every move is published,
and an idle member's unchanged turns queue nothing."""

from __future__ import annotations

import random

from consumer._bridge.member_events import MemberEventSwitch, StateTransition
from consumer._bridge.messages import StateChanged, ToAppEvent
from consumer._bridge.queues import ToApplication
from consumer._runtime.metrics import MetricsRecorder
from consumer._runtime.publishing import MemberPublisher
from consumer.member import (
    AppPolled,
    CoordinatorChanged,
    HeartbeatSucceeded,
    Member,
    MemberConfig,
    MemberState,
    SendHeartbeat,
    Subscribed,
)


class _Rig:
    """A member wired to a publisher as the background loop wires them, driven by hand."""

    def __init__(self) -> None:
        self.now_ms = 0
        self.queue: ToApplication[ToAppEvent] = ToApplication()
        self.switch = MemberEventSwitch()
        self.switch.on = True
        metrics = MetricsRecorder(lambda: self.now_ms, MemberState.UNSUBSCRIBED)
        self.member = Member(
            MemberConfig(group_id="g"),
            random.Random(3),
            on_transition=lambda _previous, rule: self.publisher.row_fired(self.member, rule),
        )
        self.publisher = MemberPublisher(self.member, metrics, self.queue, self.switch)

    def feed(self, event: object) -> list[object]:
        self.member.handle(event, self.now_ms)  # type: ignore[arg-type]
        self.publisher.publish(self.member)
        commands, _ = self.member.poll(self.now_ms)
        self.publisher.publish(self.member)
        return list(commands)

    def drained(self) -> list[ToAppEvent]:
        events = []
        while (event := self.queue.pop()) is not None:
            events.append(event)
        return events

    def heartbeat(self) -> SendHeartbeat:
        self.now_ms += 5_000
        commands, _ = self.member.poll(self.now_ms)
        self.publisher.publish(self.member)
        return next(c for c in commands if isinstance(c, SendHeartbeat))


def _stable_rig() -> tuple[_Rig, SendHeartbeat]:
    rig = _Rig()
    rig.feed(Subscribed(topic_names=("foo",)))
    rig.feed(AppPolled())
    commands = rig.feed(CoordinatorChanged(1))
    join = next(c for c in commands if isinstance(c, SendHeartbeat))
    rig.feed(HeartbeatSucceeded(join.request_id, 1, 5_000, frozenset(), "m"))
    assert rig.member.state is MemberState.STABLE
    return rig, join


def test_every_state_move_reaches_the_application() -> None:
    rig, _ = _stable_rig()
    events = rig.drained()
    changes = [(e.previous, e.current) for e in events if isinstance(e, StateChanged)]
    assert changes == [
        (MemberState.UNSUBSCRIBED, MemberState.JOINING),
        (MemberState.JOINING, MemberState.STABLE),
    ]
    transitions = [e for e in events if isinstance(e, StateTransition)]
    assert [t.current for t in transitions] == ["JOINING", "STABLE"]
    assert rig.publisher.state is MemberState.STABLE
    assert rig.publisher.member_epoch == 1


def test_an_unchanged_heartbeat_answer_queues_nothing() -> None:
    rig, _ = _stable_rig()
    rig.drained()
    for _ in range(3):
        heartbeat = rig.heartbeat()
        rig.feed(HeartbeatSucceeded(heartbeat.request_id, 1, 5_000, None, "m"))
    assert rig.drained() == []
    assert rig.publisher.state is MemberState.STABLE
    assert rig.publisher.member_epoch == 1


def test_an_epoch_that_moves_outside_any_row_is_still_reported() -> None:
    rig, _ = _stable_rig()
    rig.drained()
    heartbeat = rig.heartbeat()
    rig.feed(HeartbeatSucceeded(heartbeat.request_id, 2, 5_000, None, "m"))
    events = rig.drained()
    assert not any(isinstance(e, StateChanged) for e in events)
    transitions = [e for e in events if isinstance(e, StateTransition)]
    assert [(t.previous_epoch, t.member_epoch, t.reason) for t in transitions] == [(1, 2, None)]
    assert rig.publisher.member_epoch == 2
