"""Recording a real group into a timeline: two ``consumer.Consumer`` members, a join and a leave.

Each member polls on its own thread and is recorded with ``consumer.testing.record`` (its member
listener), so the timeline holds what the members themselves reported: state changes with
epochs, epoch moves, rebalance callbacks and ownership. Records produced and processed go into
the same timeline, and the invariant checker must find nothing wrong with the run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer

from consumer import Consumer, RebalanceEvent, StateTransition
from consumer.testing import Timeline, check, plot, record
from consumer.testing.timeline_events import (
    Callback,
    EpochChange,
    Ownership,
    Processed,
    StateChange,
)
from tests.support import wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 6
SETTLE_S = 30.0


class RecordedMember:
    """A consumer polling on its own thread, recorded into ``timeline`` as ``name``."""

    def __init__(self, name: str, consumer: Consumer, topic: str, timeline: Timeline) -> None:
        self.name, self.consumer, self.topic, self.timeline = name, consumer, topic, timeline
        self.events: list[StateTransition | RebalanceEvent] = []
        self.threads: set[str] = set()
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    def _seen(self, event: StateTransition | RebalanceEvent) -> None:
        self.events.append(event)
        self.threads.add(threading.current_thread().name)

    def start(self) -> RecordedMember:
        record(self.consumer, self.timeline, member=self.name)
        self.consumer.add_member_listener(self._seen)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.consumer.subscribe([self.topic])
            while not self._stop.is_set():
                message = self.consumer.poll(0.1)
                if message is not None and message.error() is None:
                    self.timeline.processed(
                        self.name, self.topic, message.partition(), message.offset()
                    )
            self.consumer.close()  # leaves the group; on_revoke runs on this thread
        except BaseException as exc:  # noqa: BLE001 - re-raised by stop()
            self.failure = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{self.name} did not close within 30 s"
        if self.failure is not None:
            raise self.failure


def _owned_now(timeline: Timeline) -> dict[str, set[int]]:
    owned: dict[str, set[int]] = {}
    for event in timeline.events():
        if isinstance(event, Ownership) and event.owned_to_ms is None:
            owned.setdefault(event.member, set()).add(event.partition)
    return owned


def _produce(bootstrap: str, topic: str, count: int, timeline: Timeline) -> None:
    failures: list[KafkaError] = []

    def delivered(err: KafkaError | None, message: Message) -> None:
        if err is not None:
            failures.append(err)
        else:
            timeline.produced(topic, message.partition(), [message.offset()])

    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(count):
        producer.produce(topic, str(n).encode(), partition=n % PARTITIONS, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert not failures, failures


def test_a_join_and_a_leave_recorded_from_two_real_members(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    topic = create_topic(partitions=PARTITIONS)
    group = unique_name("timeline")
    timeline = Timeline()
    _produce(kafka_bootstrap, topic, 60, timeline)

    def member(name: str) -> RecordedMember:
        config = {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
        }
        return RecordedMember(name, Consumer(config), topic, timeline)

    def owned_is(expected: dict[str, int]) -> Callable[[], bool]:
        def holds() -> bool:
            owned = _owned_now(timeline)
            return {m: len(p) for m, p in owned.items() if p} == expected

        return holds

    first = member("m1").start()
    second: RecordedMember | None = None
    try:
        wait_until(owned_is({"m1": PARTITIONS}), SETTLE_S, "m1 to own every partition")
        second = member("m2").start()
        wait_until(
            owned_is({"m1": 3, "m2": 3}),
            SETTLE_S,
            "the partitions to be shared",
            details=lambda: str(_owned_now(timeline)),
        )
        wait_until(lambda: second.consumer.state == "STABLE", SETTLE_S, "m2 to be STABLE")
        _produce(kafka_bootstrap, topic, 60, timeline)
        second.stop()  # m2 leaves
        wait_until(
            owned_is({"m1": PARTITIONS}),
            SETTLE_S,
            "m1 to take every partition back",
            details=lambda: str(_owned_now(timeline)),
        )
        wait_until(
            lambda: sum(isinstance(e, Processed) for e in timeline.events()) >= 120,
            SETTLE_S,
            "every record to be processed",
        )
    finally:
        first.stop()
        if second is not None and second._thread.is_alive():
            second.stop()

    events = timeline.events()
    states = {
        name: [e.state for e in events if isinstance(e, StateChange) and e.member == name]
        for name in ("m1", "m2")
    }
    for name, seen in states.items():
        assert seen[0] == "JOINING", (name, seen)
        assert "STABLE" in seen, (name, seen)
        assert seen[-2:] == ["UNSUBSCRIBING", "UNSUBSCRIBED"], (name, seen)
    stable_epochs = [e.epoch for e in events if isinstance(e, StateChange) and e.state == "STABLE"]
    assert stable_epochs
    assert all(epoch is not None and epoch > 0 for epoch in stable_epochs)
    m1_epochs = [e.epoch for e in events if isinstance(e, EpochChange) and e.member == "m1"]
    assert len(m1_epochs) >= 3, m1_epochs  # joined, m2 joined, m2 left (then 0 on leaving)
    assert m1_epochs[:-1] == sorted(m1_epochs[:-1])
    assert m1_epochs[-1] == 0
    callbacks = {(e.member, e.kind) for e in events if isinstance(e, Callback)}
    assert {
        ("m1", "assigned"),
        ("m1", "revoked"),
        ("m2", "assigned"),
        ("m2", "revoked"),
    } <= callbacks
    owners = {e.member for e in events if isinstance(e, Ownership)}
    assert owners == {"m1", "m2"}
    # The listener runs on the polling thread only (rebalance events and state transitions).
    assert first.threads == {"member-m1"}
    assert second is not None
    assert second.threads == {"member-m2"}
    assert any(isinstance(e, StateTransition) for e in first.events)
    assert any(isinstance(e, RebalanceEvent) and e.kind == "revoked" for e in first.events)

    report = check(timeline)
    report.raise_for_violations()
    assert report.records_produced == 120
    assert report.lost_records == 0

    # The recorded run survives JSON lines and plots.
    path = tmp_path / "run.jsonl"
    timeline.write_jsonl(path)
    again = Timeline()
    again.merge_jsonl(path)
    assert check(again).ok
    image = plot(again, tmp_path / "run.png")
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
