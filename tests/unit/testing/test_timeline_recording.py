"""Timeline recording from member events (the listener of ``Consumer.add_member_listener``),
the new event kinds in JSON lines, and the background loop's opt-in transition reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from consumer import RebalanceEvent, StateTransition
from consumer._bridge.last_poll import LastPoll
from consumer._bridge.member_events import MemberEventSwitch
from consumer._bridge.messages import ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._bridge.settings import ClusterSettings
from consumer._runtime import BackgroundRuntime
from consumer.member import AppPolled, MemberConfig, Subscribed
from consumer.testing import Timeline, TimelineRecorder, check, record
from consumer.testing.timeline_events import (
    Callback,
    EpochChange,
    Ownership,
    StateChange,
)


def _transition(
    previous: str, current: str, epochs: tuple[int, int], at_ms: int
) -> StateTransition:
    return StateTransition(previous, current, "id-1", epochs[0], epochs[1], "X", at_ms)


def _rebalance(kind: str, partitions: list[int], at_ms: int) -> RebalanceEvent:
    pairs = tuple(("t", p) for p in partitions)
    return RebalanceEvent(kind, pairs, "id-1", 3, at_ms)  # type: ignore[arg-type]


def test_the_recorder_turns_member_events_into_timeline_events() -> None:
    timeline = Timeline()
    recorder = TimelineRecorder(timeline, "m1")
    recorder(_transition("UNSUBSCRIBED", "JOINING", (0, 0), 10))
    recorder(_transition("JOINING", "RECONCILE_ASSIGNMENT", (0, 3), 20))
    recorder(_rebalance("assigned", [0, 1], 25))
    recorder(_transition("RECONCILE_ASSIGNMENT", "STABLE", (3, 3), 30))
    recorder(_transition("STABLE", "STABLE", (3, 4), 40))  # epoch only
    recorder(_rebalance("revoked", [1], 50))
    recorder(_rebalance("lost", [0], 60))
    events = timeline.events()
    states = [(e.state, e.epoch, e.at_ms) for e in events if isinstance(e, StateChange)]
    assert states == [
        ("JOINING", 0, 10),
        ("RECONCILE_ASSIGNMENT", 3, 20),
        ("STABLE", 3, 30),
    ]
    assert [(e.epoch, e.at_ms) for e in events if isinstance(e, EpochChange)] == [(3, 20), (4, 40)]
    assert sorted(
        (e.partition, e.owned_from_ms, e.owned_to_ms) for e in events if isinstance(e, Ownership)
    ) == [
        (0, 25, 60),
        (1, 25, 50),
    ]
    callbacks = [(e.kind, e.partitions) for e in events if isinstance(e, Callback)]
    assert callbacks == [("assigned", (0, 1)), ("revoked", (1,)), ("lost", (0,))]


def test_an_empty_assignment_records_no_callback_and_repeats_are_harmless() -> None:
    timeline = Timeline()
    recorder = TimelineRecorder(timeline, "m1")
    recorder(_rebalance("assigned", [], 5))
    recorder(_rebalance("assigned", [2], 6))
    recorder(_rebalance("assigned", [2], 7))  # already owned: no second interval
    recorder(_rebalance("revoked", [3], 8))  # never owned: nothing to close
    events = timeline.events()
    assert [e for e in events if isinstance(e, Ownership)] == [Ownership("m1", "t", 2, 6, None)]
    assert [e.at_ms for e in events if isinstance(e, Callback)] == [6, 7, 8]


def test_record_registers_on_the_consumer_and_stop_unregisters() -> None:
    class FakeConsumer:
        def __init__(self) -> None:
            self.listeners: list[object] = []

        def add_member_listener(self, listener: object) -> None:
            self.listeners.append(listener)

        def remove_member_listener(self, listener: object) -> None:
            self.listeners.remove(listener)

    consumer = FakeConsumer()
    recorder = record(consumer, Timeline(), member="a")  # type: ignore[arg-type]
    assert consumer.listeners == [recorder]
    with pytest.raises(ValueError, match="already attached"):
        recorder.attach(consumer)  # type: ignore[arg-type]
    recorder.stop()
    assert consumer.listeners == []
    with pytest.raises(ValueError, match="member must be a non-empty name"):
        TimelineRecorder(Timeline(), "")


def test_new_events_round_trip_through_json_lines_and_old_lines_stay_readable(
    tmp_path: Path,
) -> None:
    timeline = Timeline()
    timeline.state("a", "STABLE", 5, epoch=7)
    timeline.epoch("a", 7, 5)
    timeline.callback("a", "revoked", "t", [2, 1], 9)
    path = tmp_path / "run.jsonl"
    timeline.write_jsonl(path)
    old = json.dumps({"type": "state", "member": "b", "state": "JOINING", "at_ms": 1})
    with path.open("a", encoding="utf-8") as out:
        out.write(old + "\n")
    again = Timeline()
    assert again.merge_jsonl(path) == 4
    assert again.events() == [
        StateChange("a", "STABLE", 5, 7),
        EpochChange("a", 7, 5),
        Callback("a", "revoked", "t", (2, 1), 9),
        StateChange("b", "JOINING", 1, None),
    ]
    assert check(again).ok


def test_a_callback_of_an_unknown_kind_is_refused_naming_the_kinds() -> None:
    with pytest.raises(ValueError, match="assigned, lost, revoked.*'gone'"):
        Callback("a", "gone", "t", (1,), 0)


def test_member_events_print_as_one_readable_line() -> None:
    assert str(StateTransition("JOINING", "STABLE", "m-1", 0, 4, "TARGET_RECEIVED", 1)) == (
        "m-1 JOINING -> STABLE on TARGET_RECEIVED (epoch 0 -> 4)"
    )
    assert str(_rebalance("revoked", [0, 2], 1)) == "id-1 revoked t[0], t[2] (epoch 3)"


@pytest.mark.parametrize("listening", [True, False])
def test_the_loop_queues_state_transitions_only_while_someone_listens(listening: bool) -> None:
    to_application: ToApplication[ToAppEvent] = ToApplication()
    switch = MemberEventSwitch()
    switch.on = listening
    runtime = BackgroundRuntime(
        MemberConfig(group_id="g"),
        ClusterSettings("127.0.0.1:9", "test-client"),
        ToBackground(),
        to_application,
        last_poll=LastPoll(),
        member_events=switch,
    )
    # Drive the runtime's member by hand (its loop is not started: nothing goes on the wire);
    # the runtime's observer sees every row that fires.
    member = runtime._member
    member.handle(Subscribed(topic_names=("t",)), now_ms=0)
    member.handle(AppPolled(polled_at_ms=0), now_ms=0)
    seen = []
    while (item := to_application.pop()) is not None:
        seen.append(item)
    if listening:
        assert [(t.previous, t.current, t.member_epoch) for t in seen] == [
            ("UNSUBSCRIBED", "JOINING", 0)
        ]
        assert seen[0].member_id == member.member_id
        assert seen[0].reason == "APP_POLLED"
    else:
        assert seen == []
