"""``Consumer.metrics()`` against the real broker: a join, a second member's join and its leave.

Member A joins alone (its first rebalance), B joins (A revokes half of its partitions: A's second
rebalance) and B leaves (A takes them back: its third). After each step the counters must have
moved exactly as the callbacks say, the latencies must be positive and bounded by the step's own
duration, and the ``stats_cb`` JSON must carry the same metrics under ``"group_member"``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from callback_timeline import all_partitions, wait_for_balanced
from confluent_kafka import Producer
from consumer_support import CONVERGENCE_S, produce_numbered
from member_thread import Group, MemberThread

from consumer import Consumer
from consumer._client.metrics import STATS_KEY
from tests.support import wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 4


class StatsSink:
    """Keeps the parsed ``stats_cb`` reports (librdkafka calls it from ``poll()``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reports: list[dict[str, Any]] = []

    def __call__(self, stats_json: str) -> None:
        with self._lock:
            self.reports.append(json.loads(stats_json))

    def latest(self) -> dict[str, Any] | None:
        with self._lock:
            return self.reports[-1] if self.reports else None


def _member(name: str, consumer: Consumer, topic: str, group: Group) -> MemberThread:
    return group.add(MemberThread(name, consumer, [topic], group.timeline))


def _settled(member: MemberThread, partitions: int) -> Callable[[], bool]:
    def check() -> bool:
        values = member.consumer.metrics()
        return member.consumer.state == "STABLE" and values["assigned-partitions"] == partitions

    return check


def test_rebalance_and_heartbeat_metrics_follow_a_join_and_a_leave(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    topic = create_topic(partitions=PARTITIONS)
    group_id = unique_name("metrics")
    produce_numbered(Producer({"bootstrap.servers": kafka_bootstrap}), topic, 0, 40, PARTITIONS)
    stats = StatsSink()
    base = {"bootstrap.servers": kafka_bootstrap, "group.id": group_id}
    a = Consumer(
        {**base, "auto.offset.reset": "earliest", "statistics.interval.ms": 200, "stats_cb": stats}
    )
    before_join = a.metrics()
    assert before_join["rebalance-total"] == 0
    assert before_join["member-epoch"] == 0
    group = Group()
    try:
        started = time.monotonic()
        member_a = _member("a", a, topic, group)
        wait_until(_settled(member_a, PARTITIONS), CONVERGENCE_S, "a to own every partition")
        wait_until(lambda: len(member_a.consumed) == 40, CONVERGENCE_S, "a to read 40 records")
        joined = a.metrics()
        join_s = time.monotonic() - started
        assert joined["rebalance-total"] == 1
        assert 0 < joined["rebalance-latency-max"] <= join_s * 1000
        assert joined["rebalance-latency-avg"] == joined["rebalance-latency-max"]
        assert joined["partitions-assigned-total"] == PARTITIONS
        assert joined["partitions-revoked-total"] == 0
        assert joined["member-epoch"] == a.member_epoch > 0
        assert joined["heartbeat-total"] >= 1
        assert 0 <= joined["last-heartbeat-seconds-ago"] < 5
        assert joined["time-in-state-ms.JOINING"] > 0
        assert joined["failed-rebalance-total"] == 0

        started = time.monotonic()
        b = Consumer({**base})
        member_b = _member("b", b, topic, group)
        wait_for_balanced(group.timeline, ["a", "b"], all_partitions(topic, PARTITIONS))
        wait_until(_settled(member_a, PARTITIONS // 2), CONVERGENCE_S, "a to own half")
        shared = a.metrics()
        share_s = time.monotonic() - started
        assert shared["rebalance-total"] == 2
        assert shared["partitions-revoked-total"] == PARTITIONS // 2
        latest_ms = shared["rebalance-latency-total"] - joined["rebalance-latency-total"]
        assert 0 < latest_ms <= share_s * 1000
        assert shared["commit-total"] >= 1  # the consumed offsets are committed before revoking
        assert shared["member-epoch"] > joined["member-epoch"]

        started = time.monotonic()
        member_b.stop()
        wait_until(_settled(member_a, PARTITIONS), CONVERGENCE_S, "a to own every partition")
        left = a.metrics()
        leave_s = time.monotonic() - started
        assert left["rebalance-total"] == 3
        assert left["partitions-assigned-total"] == PARTITIONS + PARTITIONS // 2
        latest_ms = left["rebalance-latency-total"] - shared["rebalance-latency-total"]
        assert 0 < latest_ms <= leave_s * 1000
        assert left["rebalance-latency-max"] == max(
            joined["rebalance-latency-max"], latest_ms, shared["rebalance-latency-max"]
        )
        assert left["heartbeat-total"] > joined["heartbeat-total"]
        assert left["failed-rebalance-total"] == 0
        after_leave = b.metrics()
        assert after_leave["rebalance-total"] >= 1
        assert after_leave["time-in-state-ms.UNSUBSCRIBED"] > 0  # B is out of the group
        assert after_leave["member-epoch"] == 0

        def reported() -> bool:
            report = stats.latest()
            return report is not None and report[STATS_KEY]["rebalance-total"] == 3

        wait_until(reported, CONVERGENCE_S, "a stats_cb report with the third rebalance")
        report = stats.latest()
        assert report is not None
        assert report["type"] == "consumer"  # librdkafka's own statistics are all still there
        assert report[STATS_KEY]["member-epoch"] == a.member_epoch
    finally:
        for member in group.members.values():
            if member.alive:
                member.stop()
