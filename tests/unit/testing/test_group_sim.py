"""GroupSim: every scenario step, the recorded callbacks and timeline, the verdict, determinism."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer.testing.sim import FakeConsumer, GroupSim, SimulationError
from consumer.testing.sim.steps import (
    add_partitions,
    commit_fails,
    coordinator_moved,
    crash,
    fence,
    join,
    leave,
    network_cut,
    produce,
    stall,
    until_stable,
    wait,
)
from consumer.testing.timeline import Timeline
from consumer.testing.timeline_events import Fault, StateChange

TOPIC = "orders"


class Recorder:
    """A listener that remembers what it was told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, list[int]]] = []
        self.commits: list[tuple[str | None, list[int]]] = []

    def on_assign(self, consumer: FakeConsumer, partitions: list[KafkaTopicPartition]) -> None:
        self.events.append(("assign", [tp.partition for tp in partitions]))

    def on_revoke(self, consumer: FakeConsumer, partitions: list[KafkaTopicPartition]) -> None:
        self.events.append(("revoke", [tp.partition for tp in partitions]))

    def on_lost(self, consumer: FakeConsumer, partitions: list[KafkaTopicPartition]) -> None:
        self.events.append(("lost", [tp.partition for tp in partitions]))

    def on_commit(self, error: KafkaError | None, partitions: list[KafkaTopicPartition]) -> None:
        self.commits.append(
            (None if error is None else error.name(), [tp.partition for tp in partitions])
        )


def group(partitions: int = 6, **kwargs: Any) -> GroupSim:
    return GroupSim({TOPIC: partitions}, listener=Recorder, **kwargs)


def listener(sim: GroupSim, name: str) -> Recorder:
    found = sim.members[name].listener
    assert isinstance(found, Recorder)
    return found


def owned(sim: GroupSim, name: str) -> list[int]:
    return sorted(p for _, p in sim.result().assignments[name])


def test_join_splits_the_partitions_and_runs_each_members_on_assign() -> None:
    sim = group()
    result = sim.run([join("a"), join("b"), join("c"), until_stable()])
    assert result.ok, result.report.summary()
    assert sorted(owned(sim, "a") + owned(sim, "b") + owned(sim, "c")) == list(range(6))
    assert all(len(owned(sim, n)) == 2 for n in "abc")
    for name in "abc":
        assigned = [p for kind, ps in listener(sim, name).events if kind == "assign" for p in ps]
        revoked = [p for kind, ps in listener(sim, name).events if kind == "revoke" for p in ps]
        assert sorted(set(assigned) - set(revoked)) == owned(sim, name)
    assert {c.member for c in result.calls(callback="on_assign")} == {"a", "b", "c"}


def test_leave_revokes_and_hands_the_partitions_over() -> None:
    sim = group()
    result = sim.run([join("a"), join("b"), until_stable(), leave("a"), until_stable()])
    assert result.ok, result.report.summary()
    assert listener(sim, "a").events[-1] == ("revoke", [0, 1, 2])
    assert owned(sim, "b") == list(range(6))
    assert "a" not in result.assignments


def test_crash_runs_no_callback_and_the_others_wait_for_the_session_timeout() -> None:
    sim = group(session_timeout_ms=10_000)
    sim.run([join("a"), join("b"), until_stable()])
    a_events = list(listener(sim, "a").events)
    crashed_at = sim.now_ms
    sim.crash("a")
    took = sim.until_stable()
    assert listener(sim, "a").events == a_events
    assert took >= 10_000  # the coordinator noticed only when the session expired
    assert owned(sim, "b") == list(range(6))
    result = sim.result()
    assert result.ok, result.report.summary()
    assert Fault("kill", "a", crashed_at, crashed_at) in result.timeline.events()


def test_stall_past_max_poll_interval_leads_to_on_lost_and_a_rejoin() -> None:
    sim = group(config={"max.poll.interval.ms": 20_000})
    sim.run([join("a"), join("b"), until_stable()])
    before = list(listener(sim, "a").events)
    result = sim.run([stall("a", 30_000), until_stable()])
    after = listener(sim, "a").events[len(before) :]
    assert after[0] == ("lost", owned_before(before))
    assert any(s.member == "a" and s.state == "STALE" for s in _states(result.timeline))
    assert any(isinstance(e, Fault) and e.kind == "stall" for e in result.timeline.events())
    assert result.ok, result.report.summary()
    assert len(owned(sim, "a")) == 3


def owned_before(events: list[tuple[str, list[int]]]) -> list[int]:
    held: set[int] = set()
    for kind, partitions in events:
        if kind == "assign":
            held |= set(partitions)
        else:
            held -= set(partitions)
    return sorted(held)


def _states(timeline: Timeline) -> list[StateChange]:
    return [e for e in timeline.events() if isinstance(e, StateChange)]


def test_a_stall_shorter_than_max_poll_interval_changes_nothing() -> None:
    sim = group(config={"max.poll.interval.ms": 20_000})
    sim.run([join("a"), join("b"), until_stable()])
    before = list(listener(sim, "a").events)
    sim.run([stall("a", 10_000), wait(1_000)])
    assert listener(sim, "a").events == before


def test_fence_calls_on_lost_then_the_member_rejoins() -> None:
    sim = group()
    sim.run([join("a"), join("b"), until_stable()])
    held = owned(sim, "a")
    result = sim.run([fence("a"), until_stable()])
    events = listener(sim, "a").events
    lost = [ps for kind, ps in events if kind == "lost"]
    assert lost == [held]
    assert result.ok, result.report.summary()
    assert any(isinstance(e, Fault) and e.kind == "fence" for e in result.timeline.events())
    assert any(s.member == "a" and s.state == "FENCED" for s in _states(result.timeline))
    assert len(owned(sim, "a")) == 3


def test_coordinator_moved_members_find_it_again_and_keep_their_partitions() -> None:
    sim = group()
    sim.run([join("a"), join("b"), until_stable()])
    before = {n: list(listener(sim, n).events) for n in "ab"}
    result = sim.run([coordinator_moved(), wait(15_000), until_stable()])
    assert {n: listener(sim, n).events for n in "ab"} == before
    assert result.ok
    for name in "ab":
        runtime = sim.consumer(name).runtime
        assert runtime is not None
        assert runtime.known_coordinator == 2


def test_add_partitions_assigns_the_new_ones() -> None:
    sim = group(partitions=2)
    sim.run([join("a"), join("b"), until_stable()])
    result = sim.run([add_partitions(TOPIC, 4), until_stable()])
    assert sorted(owned(sim, "a") + owned(sim, "b")) == [0, 1, 2, 3]
    new = [p for n in "ab" for kind, ps in listener(sim, n).events if kind == "assign" for p in ps]
    assert {2, 3} <= set(new)
    assert result.ok


def test_short_network_cut_keeps_the_membership_long_one_loses_it() -> None:
    sim = group(session_timeout_ms=20_000)
    sim.run([join("a"), join("b"), until_stable()])
    sim.run([network_cut("a", 5_000), until_stable()])
    assert [kind for kind, _ in listener(sim, "a").events].count("lost") == 0
    result = sim.run([network_cut("a", 30_000), until_stable()])
    assert [kind for kind, _ in listener(sim, "a").events].count("lost") == 1
    assert result.ok, result.report.summary()


def test_commit_fails_reaches_on_commit_with_the_error() -> None:
    def commit_each(consumer: FakeConsumer) -> None:
        message = consumer.poll(0)
        if message is not None:
            consumer.commit(message=message)

    sim = group(partitions=1, loop=commit_each, config={"enable.auto.commit": False})
    sim.run([join("a"), until_stable(), commit_fails("a", "OFFSET_METADATA_TOO_LARGE")])
    sim.run([produce(TOPIC, "x", count=2), wait(1_000)])
    assert listener(sim, "a").commits == [("OFFSET_METADATA_TOO_LARGE", [0]), (None, [0])]
    assert [c.error for c in sim.result().calls("a", "on_commit")] == [
        "OFFSET_METADATA_TOO_LARGE",
        None,
    ]


def test_commit_fails_rejects_unknown_error_names() -> None:
    sim = group()
    sim.join("a")
    with pytest.raises(SimulationError, match="NOPE"):
        sim.commit_fails("a", "NOPE")


def test_produce_and_wait_process_every_record_through_the_loop() -> None:
    sim = group()
    result = sim.run(
        [join("a"), join("b"), until_stable(), produce(TOPIC, "v", count=30), wait(2_000)]
    )
    assert result.report.records_produced == 30
    assert result.report.records_processed == 30
    assert result.ok


def test_until_stable_fails_with_the_states_when_the_group_cannot_settle() -> None:
    sim = group()
    sim.join("a", loop=lambda consumer: None)  # an application that never polls never joins
    with pytest.raises(SimulationError, match="not stable within 5000 ms.*UNSUBSCRIBED"):
        sim.until_stable(max_ms=5_000)


def test_unknown_member_names_are_refused_naming_the_live_ones() -> None:
    sim = group()
    sim.join("a")
    with pytest.raises(SimulationError, match="live members: a"):
        sim.crash("zed")
    with pytest.raises(SimulationError, match="already in the group"):
        sim.join("a")


def test_a_member_may_rejoin_after_crashing_under_a_new_timeline_name() -> None:
    sim = group(session_timeout_ms=10_000)
    result = sim.run([join("a"), until_stable(), crash("a"), join("a"), until_stable()])
    assert result.ok, result.report.summary()
    assert {e.member for e in _states(result.timeline)} == {"a", "a#2"}


def scenario() -> list[Any]:
    return [
        join("a"),
        join("b"),
        produce(TOPIC, "x", count=20),
        until_stable(),
        join("c"),
        wait(3_000),
        crash("b"),
        until_stable(),
        fence("c"),
        until_stable(),
        produce(TOPIC, "y", count=10),
        wait(3_000),
    ]


def test_same_seed_gives_a_byte_identical_timeline_and_different_seeds_differ() -> None:
    def run(seed: int) -> str:
        return group(seed=seed, session_timeout_ms=10_000).run(scenario()).timeline_jsonl()

    first = run(11)
    assert first == run(11)
    assert len(first.splitlines()) > 50
    assert any(run(seed) != first for seed in (12, 13, 14))


def test_a_long_scenario_costs_milliseconds_of_wall_time() -> None:
    started = time.monotonic()
    sim = group(session_timeout_ms=10_000)
    sim.run(scenario())
    assert sim.now_ms > 20_000
    assert time.monotonic() - started < 2.0
