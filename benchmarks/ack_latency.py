"""Ack latency: from a heartbeat response carrying a new assignment to our acknowledging heartbeat.

Measured without modifying the library: ``GroupRequests.heartbeat`` (and ``heartbeat_soon``,
its task-free path, and ``fetch_committed``) are wrapped in this process only. For each member, a
response whose assignment differs from the last one it received starts a clock; the next
heartbeat request of that member that carries ``topic_partitions`` (the owned partitions: the
ack) stops it. ``sdk_ms`` subtracts the time spent in the round's OffsetFetch and ListOffsets
round trips in between (broker time, not SDK time); ``total_ms`` is the
whole interval, including the on_assign/on_revoke callbacks served by the polling thread.

Assignments change because members join (N members subscribe at once) and because the topic
grows (partitions are added step by step, each step a new target assignment for the group).

``python -m benchmarks ack_latency`` measures 1 and 50 members;
``python -m benchmarks.ack_latency --members 1,50,100,200 [--repeat N] [--bootstrap HOST:PORT]``
any member counts (N members: 2N partitions, then 10 steps of N more), into the same result file.
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.cimpl import NewPartitions

from benchmarks.common import (
    DEFAULT_RESULTS_DIR,
    FAST_HEARTBEAT_MS,
    BrokerSet,
    admin_client,
    create_topic,
    log,
    machine_facts,
    percentile,
    summary,
    wait_for,
    write_result,
)
from consumer import Consumer
from consumer._runtime.group_requests import GroupRequests
from consumer.member import HeartbeatSucceeded


@dataclass
class _MemberClock:
    last_assignment: Any = None
    pending_since: float | None = None
    fetch_s: float = 0.0


@dataclass
class AckRecorder:
    """Samples of (total_ms, sdk_ms), filled by the wrapped request methods."""

    members: dict[int, _MemberClock] = field(default_factory=dict)
    samples: list[tuple[float, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def clock(self, requests: GroupRequests) -> _MemberClock:
        with self.lock:
            return self.members.setdefault(id(requests), _MemberClock())

    def pending(self) -> int:
        """Members that received an assignment they have not acknowledged yet."""
        with self.lock:
            return sum(clock.pending_since is not None for clock in self.members.values())

    def snapshot(self) -> list[tuple[float, float]]:
        """The samples so far (later ones, e.g. heartbeats during close(), are not kept)."""
        with self.lock:
            return list(self.samples)


@contextmanager
def recording() -> Iterator[AckRecorder]:
    """Wrap ``GroupRequests.heartbeat`` / ``fetch_committed`` for the duration of the block."""
    recorder = AckRecorder()
    original_heartbeat = GroupRequests.heartbeat
    original_fetch = GroupRequests.fetch_committed

    def on_sent(clock: _MemberClock, command: Any) -> None:
        if (
            clock.pending_since is not None
            and command.request.topic_partitions is not None
            and command.request.member_epoch >= 0
        ):
            total = time.monotonic() - clock.pending_since
            with recorder.lock:
                recorder.samples.append((total * 1000, max(0.0, total - clock.fetch_s) * 1000))
            clock.pending_since = None

    def on_answer(clock: _MemberClock, answer: Any) -> None:
        if (
            isinstance(answer, HeartbeatSucceeded)
            and answer.assignment is not None
            and answer.assignment != clock.last_assignment
        ):
            clock.last_assignment = answer.assignment
            clock.pending_since = time.monotonic()
            clock.fetch_s = 0.0

    # *args/**kwargs: robust to extra parameters the runtime may pass (e.g. a timeout).
    async def heartbeat(self: GroupRequests, command: Any, *args: Any, **kwargs: Any) -> Any:
        clock = recorder.clock(self)
        on_sent(clock, command)
        answer = await original_heartbeat(self, command, *args, **kwargs)
        on_answer(clock, answer)
        return answer

    # The task-free path of an idle member's heartbeats (answered through a callback).
    original_soon = getattr(GroupRequests, "heartbeat_soon", None)

    def heartbeat_soon(
        self: GroupRequests, command: Any, timeout_ms: Any, answered: Any, *rest: Any
    ) -> Any:
        clock = recorder.clock(self)
        on_sent(clock, command)

        def record_then_answer(answer: Any) -> None:
            on_answer(clock, answer)
            answered(answer)

        assert original_soon is not None
        return original_soon(self, command, timeout_ms, record_then_answer, *rest)

    def broker_round_trip(original: Any) -> Any:
        """``original`` (an awaited request of the round), its time counted as the broker's."""

        async def timed(self: GroupRequests, command: Any, *args: Any, **kwargs: Any) -> Any:
            clock = recorder.clock(self)
            start = time.monotonic()
            try:
                return await original(self, command, *args, **kwargs)
            finally:
                if clock.pending_since is not None:
                    clock.fetch_s += time.monotonic() - start

        return timed

    # ListOffsets of the round's LISTING_OFFSETS phase (absent from older trees).
    original_list = getattr(GroupRequests, "list_start_offsets", None)
    GroupRequests.heartbeat = heartbeat  # type: ignore[method-assign]
    GroupRequests.fetch_committed = broker_round_trip(original_fetch)  # type: ignore[method-assign]
    if original_list is not None:
        GroupRequests.list_start_offsets = broker_round_trip(original_list)  # type: ignore[method-assign]
    if original_soon is not None:
        GroupRequests.heartbeat_soon = heartbeat_soon  # type: ignore[method-assign,assignment]
    try:
        yield recorder
    finally:
        if original_soon is not None:
            GroupRequests.heartbeat_soon = original_soon  # type: ignore[method-assign]
        GroupRequests.heartbeat = original_heartbeat  # type: ignore[method-assign]
        GroupRequests.fetch_committed = original_fetch  # type: ignore[method-assign]
        if original_list is not None:
            GroupRequests.list_start_offsets = original_list  # type: ignore[method-assign]


class _Poller:
    """One thread per member, calling ``poll(0.1)`` as an application would."""

    def __init__(self, consumers: list[Consumer]) -> None:
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._loop, args=(c,), daemon=True) for c in consumers
        ]
        for thread in self.threads:
            thread.start()

    def _loop(self, consumer: Consumer) -> None:
        while not self.stop.is_set():
            consumer.poll(0.1)

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)


def _settled(consumers: list[Consumer], partitions: int) -> bool:
    owned = 0
    for consumer in consumers:
        if consumer.state != "STABLE":
            return False
        owned += len(consumer.assignment())
    return owned == partitions


def run_case(bootstrap: str, members: int, partitions: int, steps: int, grow: int) -> list[Any]:
    """``members`` members join a ``partitions``-partition topic, then it grows ``steps`` times."""
    topic = f"bench-ack-{members}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    admin = admin_client(bootstrap)
    rng = random.Random(members)
    timeout_s = 60 + members
    with recording() as recorder:
        group = f"bench-ack-{uuid.uuid4().hex[:8]}"
        consumers = [
            Consumer({"bootstrap.servers": bootstrap, "group.id": group}) for _ in range(members)
        ]
        poller = _Poller(consumers)
        try:
            for consumer in consumers:
                consumer.subscribe([topic])
            wait_for(lambda: _settled(consumers, partitions), timeout_s, "the group to settle")
            total = partitions
            for _ in range(steps):
                time.sleep(rng.uniform(0, FAST_HEARTBEAT_MS / 1000))  # random phase, see docs
                total += grow
                admin.create_partitions([NewPartitions(topic, total)])[topic].result(30)
                wait_for(
                    lambda n=total: _settled(consumers, n),  # type: ignore[misc]
                    timeout_s,
                    f"the group to own {total} partitions",
                )
            # An assignment that arrives after the last check is acknowledged as usual, but only
            # while the polling threads still serve its callbacks: wait for those acks before
            # stopping them, or close() would record the next interval heartbeat as the ack.
            wait_for(lambda: recorder.pending() == 0, timeout_s, "every received assignment's ack")
            samples = recorder.snapshot()
        finally:
            poller.join()
            for consumer in consumers:
                consumer.close()
            # A 200-member case grows its topic to 2,200 partitions: keeping every case's topic
            # ran a local broker out of file descriptors within one --repeat 3 run.
            admin.delete_topics([topic], operation_timeout=30)[topic].result(60)
        return samples


def run(bootstrap: str, size: str, repeat: int, members: list[int] | None = None) -> dict[str, Any]:
    """The ack-latency benchmark for 1 and many members; returns the JSON-ready result.

    ``members`` overrides the member counts of the full size (see the module docstring).
    """
    cases = [(1, 8, 20, 4), (50, 100, 10, 50)] if size == "full" else [(1, 4, 3, 2), (5, 10, 2, 5)]
    if members is not None:
        cases = [(1, 8, 20, 4) if n == 1 else (n, 2 * n, 10, n) for n in members]
    result: dict[str, Any] = {"target_p99_ms": 50.0, "cases": {}}
    for members, partitions, steps, grow in cases:
        samples: list[tuple[float, float]] = []
        for rep in range(repeat):
            got = run_case(bootstrap, members, partitions, steps, grow)
            samples.extend(got)
            log(f"ack latency {members} member(s) rep {rep}: {len(got)} samples")
        totals = [s[0] for s in samples]
        sdk = [s[1] for s in samples]
        result["cases"][str(members)] = {
            "members": members,
            "partitions": partitions,
            "growth_steps": steps,
            "growth_per_step": grow,
            "samples": len(samples),
            "total_ms": {
                "p50": percentile(totals, 0.5),
                "p99": percentile(totals, 0.99),
                **summary(totals),
            },
            "sdk_ms": {"p50": percentile(sdk, 0.5), "p99": percentile(sdk, 0.99), **summary(sdk)},
            "raw_total_ms": [round(v, 3) for v in totals],
        }
    return result


def main() -> int:
    """Entry point: the member counts given, one result file (``ack_latency.json``)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ack_latency")
    parser.add_argument("--members", default="1,50,100,200", help="comma-separated counts")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    args = parser.parse_args()
    try:
        members = [int(n) for n in args.members.split(",")]
    except ValueError:
        parser.error(f"--members: expected comma-separated integers, got {args.members!r}")
    if any(n < 1 for n in members):
        parser.error(f"--members: every count must be at least 1, got {args.members!r}")
    brokers = BrokerSet(fast_bootstrap=args.bootstrap)
    started = time.time()
    load = list(os.getloadavg())
    try:
        result = run(brokers.fast(), "full", args.repeat, members)
    finally:
        brokers.close()
    payload = {
        "benchmark": "ack_latency",
        "size": "full",
        "repeat": args.repeat,
        "command": (
            f"python -m benchmarks.ack_latency --members {args.members} --repeat {args.repeat}"
        ),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": time.time() - started,
        "loadavg_before": load,
        "loadavg_after": list(os.getloadavg()),
        "machine": machine_facts(),
        "external_broker": args.bootstrap is not None,
        "result": result,
    }
    log(f"wrote {write_result(DEFAULT_RESULTS_DIR, 'ack_latency', payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
