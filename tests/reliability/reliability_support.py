"""Helpers of the reliability tier: the tier's timing constants, the producer of the run's
records and the broker restart (imported as a plain module by the tests). The member processes
are in ``member_processes``, the group under test in ``fleet`` and the checks in ``run_checks``.

Times are wall-clock milliseconds (:func:`consumer.testing.timeline_events.wall_clock_ms`)
everywhere, so the events of the test process and of every member process line up.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from consumer.testing.real.broker import LocalBroker
from consumer.testing.timeline import Timeline
from consumer.testing.timeline_events import (
    wall_clock_ms,
)

#: Broker group settings (``consumer.testing.real.broker.fast_group_settings``).
HEARTBEAT_MS = 500
SESSION_MS = 6_000
#: The broker's session timer restarts at the last heartbeat it received, up to one interval
#: (plus a little transit) before a fault cut the member off: isolating faults are recorded as
#: starting that much earlier, so the checker cuts the member's ownership when the broker could.
LAST_HEARD_SLACK_MS = HEARTBEAT_MS + 100
#: Bound for a group to be STABLE and balanced again after a membership change.
CONVERGE_S = 30.0


class ProducedLog:
    """Numbered records produced through the broker's direct listener (no proxy), with the
    partition and offset the broker acknowledged for each: value ``n`` goes to ``n % P``."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.acked: dict[tuple[int, int], int] = {}  # (partition, offset) -> value
        self.failures: list[str] = []
        self.next_value = 0
        self._lock = threading.Lock()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 20,
                "acks": "all",
                "enable.idempotence": True,
                "queue.buffering.max.messages": 1_000_000,
                "message.timeout.ms": 300_000,
            }
        )

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failures.append(str(err))
            return
        value = int(msg.value() or b"-1")
        with self._lock:
            self.acked[(msg.partition() or 0, msg.offset() or 0)] = value

    def produce(self, count: int, flush: bool = True) -> None:
        for _ in range(count):
            n = self.next_value
            self.next_value += 1
            while True:
                try:
                    self.producer.produce(
                        self.topic,
                        str(n).encode(),
                        partition=n % self.partitions,
                        on_delivery=self._delivered,
                    )
                    break
                except BufferError:
                    self.producer.poll(0.05)
            if n % 500 == 0:
                self.producer.poll(0)
        if flush:
            self.flush()

    def flush(self, timeout_s: float = 120.0) -> None:
        remaining = self.producer.flush(timeout_s)
        assert remaining == 0, f"{remaining} records not acknowledged within {timeout_s} s"
        assert not self.failures, f"delivery failures: {self.failures[:5]}"

    def keys(self) -> set[tuple[int, int]]:
        with self._lock:
            return set(self.acked)

    def record_into(self, timeline: Timeline) -> None:
        by_partition: dict[int, list[int]] = defaultdict(list)
        with self._lock:
            for partition, offset in self.acked:
                by_partition[partition].append(offset)
        for partition, offsets in by_partition.items():
            timeline.produced(self.topic, partition, offsets, at_ms=0)


class SteadyProducer(threading.Thread):
    """Produces ``total`` records at an even pace over ``seconds`` (background thread);
    :meth:`finish` sends what is left at once (the faults it fed are over)."""

    def __init__(self, log: ProducedLog, total: int, seconds: float) -> None:
        super().__init__(name="steady-producer", daemon=True)
        self.log = log
        self.total = total
        self.seconds = seconds
        self.done = threading.Event()
        self._unpaced = threading.Event()
        self._start = time.monotonic()
        #: Seconds of pace :meth:`finish` cut (what waiting for the producer would have cost).
        self.pace_cut_s = 0.0

    def finish(self, timeout_s: float) -> None:
        """Stop pacing: produce the records still due at once, and wait (at most
        ``timeout_s``) until every one is acknowledged."""
        self.pace_cut_s = max(0.0, self._start + self.seconds - time.monotonic())
        self._unpaced.set()
        self.join(timeout_s)

    def run(self) -> None:
        start = self._start = time.monotonic()
        chunk = max(1, self.total // max(1, int(self.seconds * 10)))
        sent = 0
        while sent < self.total:
            count = min(chunk, self.total - sent)
            self.log.produce(count, flush=False)
            sent += count
            self.log.producer.poll(0)
            due = start + self.seconds * sent / self.total
            pause = due - time.monotonic()
            if pause > 0:
                self._unpaced.wait(pause)  # pacing of the workload, not a wait for a condition
        self.log.flush(300.0)
        self.done.set()


def create_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)], operation_timeout=30
    )
    futures[topic].result(timeout=30)


def relaunch_broker(broker: LocalBroker, *, hard: bool) -> tuple[int, int]:
    """Stop the broker (SIGKILL when ``hard``, else SIGTERM) and start it again on the same
    data, ports and settings (:meth:`LocalBroker.restart`); return the wall-clock (down, up)
    milliseconds."""
    down = wall_clock_ms()
    broker.restart(hard=hard)
    return down, wall_clock_ms()
