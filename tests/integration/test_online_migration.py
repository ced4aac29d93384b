"""Online migration (KIP-848) both ways, with records flowing, against the real broker.

A live classic group of three ``confluent_kafka.Consumer`` members is replaced member by member,
each by graceful close, by three of our consumer-protocol members; those are then replaced the
same way by three classic members built through our facade (``consumer.Consumer`` with
``group.protocol=classic``). With ``range`` that works both ways; a librdkafka
``cooperative-sticky`` group is refused the rolling upgrade by the broker (see that test), is
upgraded offline and downgraded member by member. A producer writes
numbered records the whole time. Every member commits synchronously what it consumed in
``on_revoke``, so with only graceful switches no record is lost or read twice, and no partition
is owned by two members at once (from the callbacks' time line). The group's type, as
``describe_consumer_groups`` reports it, goes CLASSIC -> CONSUMER -> CLASSIC: the session broker
keeps Kafka 4.x's default ``group.consumer.migration.policy=BIDIRECTIONAL`` (an internal config,
which describeConfigs does not list).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from callback_timeline import Timeline, all_partitions, wait_for_balanced
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import ConsumerGroupType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from consumer_support import (
    CONVERGENCE_S,
    duplicates,
    make_producer,
    produce_numbered,
    values_of,
)
from member_thread import MemberThread

from consumer import Consumer
from tests.support import wait_until

pytestmark = pytest.mark.integration

_PARTITIONS = 6
_MEMBERS = 3
#: Records per producer batch and the pause between batches: a steady trickle (~400/s).
_BATCH = 40
_BATCH_PAUSE_S = 0.1


class NumberedProducer:
    """Produces numbered records (value ``str(n)``) in small batches until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._stop = threading.Event()
        self.produced = 0
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="numbered-producer", daemon=True)

    def start(self) -> NumberedProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = make_producer(self._bootstrap)  # released with the thread
        try:
            while not self._stop.is_set():
                produce_numbered(producer, self._topic, self.produced, _BATCH, _PARTITIONS)
                self.produced += _BATCH
                self._stop.wait(_BATCH_PAUSE_S)
        except BaseException as exc:  # noqa: BLE001 - re-raised by stop()
            self._failure = exc

    def stop_quietly(self) -> None:
        self._stop.set()
        self._thread.join(90)

    def stop(self) -> int:
        """Stop after the batch in flight (every record flushed); the number produced."""
        self._stop.set()
        self._thread.join(90)
        assert not self._thread.is_alive(), "the producer did not stop"
        if self._failure is not None:
            raise AssertionError(f"producer failed: {self._failure!r}") from self._failure
        return self.produced


def _commit_revoked(consumer: Any, partitions: list[TopicPartition]) -> None:
    """Commit synchronously the position of each revoked partition that has one."""
    positions = [tp for tp in consumer.position(partitions) if tp.offset >= 0]
    if positions:
        consumer.commit(offsets=positions, asynchronous=False)


def _group_type(admin: AdminClient, group: str) -> ConsumerGroupType:
    described = admin.describe_consumer_groups([group])[group].result(timeout=10)
    group_type: ConsumerGroupType = described.type
    return group_type


class Rollout:
    """The members of one test on one time line; starts, replaces and checks them."""

    def __init__(self, topic: str, admin: AdminClient, group: str) -> None:
        self.topic = topic
        self.admin = admin
        self.group = group
        self.timeline = Timeline()
        self.members: dict[str, MemberThread] = {}
        self.live: list[str] = []
        self.partitions = all_partitions(topic, _PARTITIONS)
        self.producers: list[NumberedProducer] = []

    def add(self, name: str, consumer: Any) -> None:
        member = MemberThread(
            name, consumer, [self.topic], self.timeline, on_revoke_extra=_commit_revoked
        )
        self.members[name] = member.start()
        self.live.append(name)
        wait_for_balanced(self.timeline, self.live, self.partitions)

    def replace(self, old: str, new: str, consumer: Any) -> None:
        """``new`` joins, the group settles, ``old`` closes gracefully, the group settles."""
        self.add(new, consumer)
        self.live.remove(old)
        self.members[old].stop()
        wait_for_balanced(self.timeline, self.live, self.partitions)

    def wait_for_type(self, expected: ConsumerGroupType) -> None:
        wait_until(
            lambda: _group_type(self.admin, self.group) == expected,
            CONVERGENCE_S,
            f"group {self.group} of type {expected.name}",
            details=lambda: f"type is {_group_type(self.admin, self.group)}",
        )

    def producer(self, bootstrap: str) -> NumberedProducer:
        """A numbered producer writing to the topic from now on."""
        self.producers.append(NumberedProducer(bootstrap, self.topic).start())
        return self.producers[-1]

    def stop_leftovers(self) -> None:
        for producer in self.producers:
            producer.stop_quietly()
        for member in self.members.values():
            if member.alive:
                with contextlib.suppress(AssertionError):  # the test has failed already
                    member.stop()

    def stop_all(self) -> None:
        for name in list(self.live):
            self.members[name].stop()
            self.live.remove(name)


@pytest.fixture
def rollouts() -> Iterator[list[Rollout]]:
    """The test's rollouts; whatever a failed test left running is stopped."""
    started: list[Rollout] = []
    yield started
    for rollout in started:
        rollout.stop_leftovers()


def _configs(bootstrap: str, group: str, strategy: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The consumer-protocol and the classic configuration of one group's members."""
    common = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    classic = {
        **common,
        "group.protocol": "classic",
        "partition.assignment.strategy": strategy,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }
    return common, classic


def _check_every_record_once(rollout: Rollout, producer: NumberedProducer) -> None:
    """Stop producing, wait for the live members to read the rest, stop them, then: no record
    lost, none read twice, no error event, no partition owned by two members at once."""
    produced = producer.stop()

    def consumed() -> list[tuple[int, int, bytes | None]]:
        return [entry for member in rollout.members.values() for entry in member.consumed]

    wait_until(
        lambda: len(values_of(consumed())) >= produced,
        CONVERGENCE_S,
        f"all {produced} records consumed",
        details=lambda: f"{len(values_of(consumed()))} distinct records consumed",
    )
    rollout.stop_all()
    errors = {name: m.errors for name, m in rollout.members.items() if m.errors}
    assert not errors, f"error events: {errors}"
    lost = set(range(produced)) - values_of(consumed())
    assert not lost, f"{len(lost)} of {produced} records lost, e.g. {sorted(lost)[:10]}"
    twice = duplicates((p, o) for p, o, _v in consumed())
    assert not twice, f"{len(twice)} records read more than once, e.g. {list(twice.items())[:10]}"
    rollout.timeline.assert_revoke_before_assign()
    callbacks = len(rollout.timeline.events())
    print(f"{produced} records, {len(rollout.members)} members, {callbacks} callbacks: all once")


def _downgrade_member_by_member(rollout: Rollout, classic: dict[str, Any]) -> None:
    """Replace ``ours-i`` by classic members of our facade; the group ends CLASSIC."""
    for i in range(_MEMBERS):
        rollout.replace(f"ours-{i}", f"back-{i}", Consumer(dict(classic)))
    rollout.wait_for_type(ConsumerGroupType.CLASSIC)


def _failure_of(member: MemberThread) -> BaseException | None:
    """Run ``member`` until its consumer raises; what it raised."""
    try:
        member.start()
        wait_until(lambda: not member.alive, CONVERGENCE_S, f"{member.name} to fail")
        member.stop()
    except AssertionError as failed:
        return failed.__cause__
    raise AssertionError(f"{member.name} stopped without an error")


def test_a_range_group_is_upgraded_member_by_member_and_downgraded_back(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    rollouts: list[Rollout],
) -> None:
    topic = create_topic(partitions=_PARTITIONS)
    group = unique_name("migration")
    ours, classic = _configs(kafka_bootstrap, group, "range")
    rollout = Rollout(topic, admin, group)
    rollouts.append(rollout)
    for i in range(_MEMBERS):
        rollout.add(f"classic-{i}", ConfluentConsumer(dict(classic)))
    rollout.wait_for_type(ConsumerGroupType.CLASSIC)
    producer = rollout.producer(kafka_bootstrap)

    for i in range(_MEMBERS):
        rollout.replace(f"classic-{i}", f"ours-{i}", Consumer(dict(ours)))
        rollout.wait_for_type(ConsumerGroupType.CONSUMER)
    _downgrade_member_by_member(rollout, classic)
    _check_every_record_once(rollout, producer)


def test_a_cooperative_sticky_group_is_refused_a_rolling_upgrade_and_upgraded_offline(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    rollouts: list[Rollout],
) -> None:
    """librdkafka's cooperative-sticky leader echoes each member's subscription userData (its
    previous assignment, from the second generation on) into the assignment; the broker refuses
    to convert a group whose assignments carry userData (KAFKA-18134). So the first member of
    ours fails with a fatal GROUP_ID_NOT_FOUND naming the reason, and the classic group runs on
    untouched. The upgrade is then done offline (every classic member leaves first); the
    downgrade back to cooperative-sticky members works member by member."""
    topic = create_topic(partitions=_PARTITIONS)
    group = unique_name("migration")
    ours, classic = _configs(kafka_bootstrap, group, "cooperative-sticky")
    rollout = Rollout(topic, admin, group)
    rollouts.append(rollout)
    for i in range(_MEMBERS):  # joined one by one: several generations
        rollout.add(f"classic-{i}", ConfluentConsumer(dict(classic)))
    producer = rollout.producer(kafka_bootstrap)

    error = _failure_of(MemberThread("refused", Consumer(dict(ours)), [topic], rollout.timeline))
    assert isinstance(error, KafkaException), repr(error)
    assert error.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
    assert error.args[0].fatal()
    assert "unsupported custom assignor" in error.args[0].str()
    assert _group_type(admin, group) == ConsumerGroupType.CLASSIC
    wait_for_balanced(rollout.timeline, rollout.live, rollout.partitions)

    for i in range(_MEMBERS):  # offline: every classic member leaves, then ours join
        rollout.live.remove(f"classic-{i}")
        rollout.members[f"classic-{i}"].stop()
    for i in range(_MEMBERS):
        rollout.add(f"ours-{i}", Consumer(dict(ours)))
    rollout.wait_for_type(ConsumerGroupType.CONSUMER)
    _downgrade_member_by_member(rollout, classic)
    _check_every_record_once(rollout, producer)
