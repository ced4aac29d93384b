"""The member looks its coordinator up when the consumer is built, against a real broker.

Java's AsyncKafkaConsumer (its CoordinatorRequestManager) and librdkafka find the coordinator
from construction whenever a group id is set, so their join heartbeat leaves as soon as the
application subscribes. Ours does the same (benchmarks/analysis.md, session 10): the lookup and
the coordinator's connection happen before ``subscribe()``, the join heartbeat after it needs
neither, and a consumer that never subscribes (or only assigns) sends no heartbeat and still
closes at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from consumer import Consumer
from consumer._runtime.background import BackgroundRuntime
from consumer._runtime.group_requests import GroupRequests
from consumer.member import CoordinatorChanged, SendHeartbeat
from tests.support import holds_for, wait_until

pytestmark = pytest.mark.integration

#: A consumer that never subscribed closes without waiting for the network (its loop stops at
#: once); far below the 5 s a stopping loop may wait for requests it drains.
QUICK_CLOSE_S = 2.0


class GroupTraffic:
    """What the member's runtime sent to the group coordinator, in order, with times."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, float, Any]] = []

    def record(self, kind: str, detail: Any) -> None:
        with self.lock:
            self.events.append((kind, time.monotonic(), detail))

    def kinds(self) -> list[str]:
        with self.lock:
            return [kind for kind, _, _ in self.events]

    def of(self, kind: str) -> list[tuple[float, Any]]:
        with self.lock:
            return [(at, detail) for k, at, detail in self.events if k == kind]


@pytest.fixture
def traffic(monkeypatch: pytest.MonkeyPatch) -> GroupTraffic:
    recorded = GroupTraffic()
    find_coordinator = GroupRequests.find_coordinator
    heartbeat = GroupRequests.heartbeat

    async def recording_lookup(self: GroupRequests) -> Any:
        recorded.record("lookup-sent", None)
        answer = await find_coordinator(self)
        recorded.record("lookup-answered", answer)
        recorded.record("connections", sorted(self._cluster._connections))
        return answer

    async def recording_heartbeat(self: GroupRequests, command: SendHeartbeat, *a: Any) -> Any:
        recorded.record("heartbeat", command.request.member_epoch)
        recorded.record("connections", sorted(self._cluster._connections))
        return await heartbeat(self, command, *a)

    heartbeat_soon = GroupRequests.heartbeat_soon

    def recording_heartbeat_soon(self: GroupRequests, command: SendHeartbeat, *a: Any) -> bool:
        # The task-free path (an open coordinator connection): recorded when it sent.
        connections = sorted(self._cluster._connections)
        sent = heartbeat_soon(self, command, *a)
        if sent:
            recorded.record("heartbeat", command.request.member_epoch)
            recorded.record("connections", connections)
        return sent

    monkeypatch.setattr(GroupRequests, "find_coordinator", recording_lookup)
    monkeypatch.setattr(GroupRequests, "heartbeat", recording_heartbeat)
    monkeypatch.setattr(GroupRequests, "heartbeat_soon", recording_heartbeat_soon)
    return recorded


def found(traffic: GroupTraffic) -> bool:
    return any(
        isinstance(answer, CoordinatorChanged) for _, answer in traffic.of("lookup-answered")
    )


def member_runtime(consumer: Consumer) -> BackgroundRuntime:
    """The consumer's member runtime (its task on the process's shared loop)."""
    runtime = consumer._runtime  # noqa: SLF001
    assert isinstance(runtime, BackgroundRuntime), "started when the consumer was built"
    return runtime


@pytest.mark.timeout(120)
def test_the_coordinator_is_found_before_subscribe_and_the_join_needs_no_lookup(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    traffic: GroupTraffic,
) -> None:
    topic = create_topic(partitions=3)
    config = {"bootstrap.servers": kafka_bootstrap, "group.id": unique_name("group")}
    assigned: list[list[TopicPartition]] = []
    consumer = Consumer(config)
    try:
        wait_until(lambda: found(traffic), 30.0, "the coordinator lookup ahead of subscribe()")
        holds_for(
            lambda: traffic.of("heartbeat") == [],
            1.5,
            "no heartbeat before subscribe() (the broker's heartbeat interval is 0.5 s)",
            lambda: str(traffic.kinds()),
        )
        assert consumer.state == "UNSUBSCRIBED"
        assert consumer.memberid() is None
        lookups_before = len(traffic.of("lookup-sent"))
        subscribed_at = time.monotonic()
        consumer.subscribe([topic], on_assign=lambda _c, parts: assigned.append(parts))

        def polled_until_assigned() -> bool:
            consumer.poll(0.1)
            return bool(assigned)

        wait_until(polled_until_assigned, 30.0, "on_assign after subscribe()")
        (join_at, join_epoch), *_ = traffic.of("heartbeat")
        assert join_epoch == 0, "the first heartbeat is the join"
        assert join_at >= subscribed_at
        assert len(traffic.of("lookup-sent")) == lookups_before, (
            f"the join used the coordinator found at construction: {traffic.kinds()}"
        )
        (_, open_after_lookup), (_, open_at_join), *_ = traffic.of("connections")
        assert open_after_lookup, "the lookup connected to the coordinator"
        assert open_at_join == open_after_lookup, "the join used the connection opened early"
        assert sorted(tp.partition for tp in assigned[0]) == [0, 1, 2]
        assert consumer.memberid() is not None
    finally:
        consumer.close()


@pytest.mark.timeout(120)
def test_a_consumer_closed_without_subscribing_sends_no_heartbeat_and_leaves_no_task(
    kafka_bootstrap: str, unique_name: Callable[[str], str], traffic: GroupTraffic
) -> None:
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": unique_name("group")})
    runtime = member_runtime(consumer)
    wait_until(lambda: found(traffic), 30.0, "the coordinator lookup")
    assert consumer.poll(0.2) is None
    started = time.monotonic()
    consumer.close()
    closed_s = time.monotonic() - started
    assert closed_s < QUICK_CLOSE_S, f"close() took {closed_s:.2f} s"
    assert runtime.finished, "the runtime's task ended with close()"
    assert traffic.of("heartbeat") == [], f"no heartbeat, not even a leave: {traffic.kinds()}"


@pytest.mark.timeout(120)
def test_manual_assignment_commits_without_a_heartbeat(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    traffic: GroupTraffic,
) -> None:
    topic = create_topic(partitions=1)
    config = {
        "bootstrap.servers": kafka_bootstrap,
        "group.id": unique_name("group"),
        "enable.auto.commit": False,
    }
    consumer = Consumer(config)
    runtime = member_runtime(consumer)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        result = consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
        assert result is not None
        assert [(tp.partition, tp.offset, tp.error) for tp in result] == [(0, 7, None)]
        (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        assert committed.offset == 7
        assert consumer.state == "UNSUBSCRIBED"
    finally:
        consumer.close()
    assert runtime.finished
    assert traffic.of("heartbeat") == [], f"manual assignment is no membership: {traffic.kinds()}"
