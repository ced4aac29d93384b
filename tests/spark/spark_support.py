"""Helpers of the Spark tier: producing numbered records, bounded waits, a non-Spark member."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from consumer import Consumer

SESSION_TIMEOUT_S = 6.0


def produce_numbered(bootstrap: str, topic: str, first: int, count: int, partitions: int) -> None:
    """Values ``str(n)`` for n in ``[first, first + count)``; record n goes to n % partitions."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for n in range(first, first + count):
        producer.produce(
            topic, value=str(n).encode(), key=str(n).encode(), partition=n % partitions
        )
        if n % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} records not delivered"


#: Each check of a Spark test's conditions is a Spark job or a broker request: poll at this pace.
POLL_S = 0.2


def committed_offsets(
    admin: AdminClient, group: str, topic: str, partitions: int
) -> dict[int, int]:
    """The group's committed offsets (AdminClient), -1001 where none."""
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(partitions)]
    )
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=15)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def group_members(admin: AdminClient, group: str) -> list[Any]:
    """The group's current members (AdminClient ``describe_consumer_groups``)."""
    description = admin.describe_consumer_groups([group])[group].result(timeout=15)
    return list(description.members)


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """High watermark per partition."""
    from confluent_kafka import Consumer as KafkaConsumer

    probe = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        return {
            p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        probe.close()


class ThreadMember:
    """One of our members in a thread of the test process: records what it consumed.

    Commits synchronously after every batch; ``events`` holds (wall time, kind, partition) with
    assign at the start of on_assign and revoke when on_revoke returns.
    """

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.records: list[tuple[int, int, bytes]] = []
        self.events: list[tuple[float, str, int]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self._topic = topic
        self._thread = threading.Thread(target=self._run, name="thread-member", daemon=True)

    def start(self) -> ThreadMember:
        self._thread.start()
        return self

    @property
    def owned(self) -> set[int]:
        with self._lock:
            owned: set[int] = set()
            for _, kind, partition in self.events:
                if kind == "assign":
                    owned.add(partition)
                else:
                    owned.discard(partition)
            return owned

    @property
    def member_id(self) -> str | None:
        return self._consumer.memberid()

    def count(self) -> int:
        with self._lock:
            return len(self.records)

    def _note(self, kind: str, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self.events.extend((time.time(), kind, tp.partition) for tp in partitions)

    def _run(self) -> None:
        consumer = self._consumer
        try:
            consumer.subscribe(
                [self._topic],
                on_assign=lambda c, ps: self._note("assign", ps),
                on_revoke=lambda c, ps: self._note("revoke", ps),
                on_lost=lambda c, ps: self._note("lost", ps),
            )
            while not self._stop.is_set():
                messages = consumer.consume(500, 0.2)
                batch = [m for m in messages if m.error() is None]
                if not batch:
                    continue
                with self._lock:
                    self.records.extend(
                        (m.partition() or 0, m.offset() or 0, m.value() or b"") for m in batch
                    )
                ends: dict[int, int] = {}
                for m in batch:
                    ends[m.partition() or 0] = (m.offset() or 0) + 1
                consumer.commit(
                    offsets=[TopicPartition(self._topic, p, o) for p, o in ends.items()],
                    asynchronous=False,
                )
        except BaseException as exc:  # noqa: BLE001 - surfaced by stop()
            self.error = exc
        finally:
            consumer.close()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "thread member did not stop"
        if self.error is not None:
            raise AssertionError(f"thread member failed: {self.error!r}") from self.error


def ownership_overlaps(events: list[tuple[float, str, str, int]]) -> list[str]:
    """Overlapping ownership intervals from (time, kind, owner, partition) events."""
    intervals: dict[int, list[tuple[float, float, str]]] = {}
    open_at: dict[tuple[str, int], float] = {}
    for at, kind, owner, partition in sorted(events):
        if kind == "assign":
            open_at[(owner, partition)] = at
        elif (owner, partition) in open_at:
            start = open_at.pop((owner, partition))
            intervals.setdefault(partition, []).append((start, at, owner))
    for (owner, partition), start in open_at.items():
        intervals.setdefault(partition, []).append((start, float("inf"), owner))
    problems = []
    for partition, spans in intervals.items():
        spans.sort()
        for (s1, e1, o1), (s2, e2, o2) in zip(spans, spans[1:], strict=False):
            if s2 < e1:
                problems.append(
                    f"partition {partition}: {o1} [{s1}, {e1}] overlaps {o2} [{s2}, {e2}]"
                )
    return problems
