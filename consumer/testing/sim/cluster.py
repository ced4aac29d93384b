"""``SimCluster``: a whole simulated Kafka cluster for :class:`FakeConsumer` instances.

One :class:`~consumer.testing.sim.ManualClock`, one :class:`~consumer.testing.sim.CoordinatorSim`
per consumer group, in-memory topics, and one seeded ``random.Random`` that drives every random
choice (member ids, backoff jitter, the order in which members run at an instant). Nothing here
does I/O, starts a thread or reads the wall clock: the same seed gives the same run.

:meth:`SimCluster.advance` moves time like Kafka Streams' ``advanceWallClockTime``: every member's
due background work (heartbeats, reconciliation steps, timers) runs at each instant on the way, in
a seed-determined order. Application callbacks never run there: they run inside the consumer's
``poll()`` / ``consume()``, on the caller's thread, as with the real client.

Everything the cluster sees goes to :attr:`SimCluster.timeline` (a
:class:`~consumer.testing.timeline.Timeline` on the simulated clock, the same schema as real runs)
and every application callback to :attr:`SimCluster.callbacks`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from consumer.member import MemberState, ResetPolicy, TopicPartition
from consumer.testing.sim.clock import ManualClock
from consumer.testing.sim.coordinator import CoordinatorSim
from consumer.testing.sim.topics import Header, SimRecord, SimTopics
from consumer.testing.timeline import Timeline

if TYPE_CHECKING:
    from consumer.testing.sim.fake_consumer import FakeConsumer

__all__ = ["CallbackCall", "SimCluster"]

#: States in which the member has let go of its partitions as lost (no more ownership).
_LOSING_STATES = frozenset({MemberState.STALE, MemberState.FENCED, MemberState.FATAL})
#: How far an infinite ``poll()`` may move the simulated clock before it returns None.
INFINITE_POLL_LIMIT_MS = 3_600_000


#: Rebalance callbacks as the timeline names them.
_CALLBACK_KINDS = {"on_assign": "assigned", "on_revoke": "revoked", "on_lost": "lost"}


@dataclass(frozen=True)
class CallbackCall:
    """One application callback the simulation ran, with its arguments.

    ``callback`` is ``on_assign``, ``on_revoke``, ``on_lost`` or ``on_commit``; ``partitions``
    are ``(topic, partition, offset)`` (offset -1001 for rebalance callbacks); ``error`` is the
    ``on_commit`` error's name (None when it succeeded or for rebalance callbacks).
    """

    member: str
    callback: str
    at_ms: int
    partitions: tuple[tuple[str, int, int], ...]
    error: str | None = None


class SimCluster:
    """A simulated cluster (see the module docstring).

    Args:
        seed: drives every random choice of the run.
        session_timeout_ms: the coordinators' ``group.consumer.session.timeout.ms``.
        heartbeat_interval_ms: the coordinators' ``group.consumer.heartbeat.interval.ms``.
        start_ms: the clock's first value.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 5_000,
        start_ms: int = 0,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = ManualClock(start_ms)
        self.topics = SimTopics()
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.timeline = Timeline(clock_ms=lambda: self.clock.now_ms)
        self.callbacks: list[CallbackCall] = []
        #: Broker id of the group coordinator (every group's); see :meth:`move_coordinator`.
        self.coordinator_id = 1
        #: When False, ``poll()`` never moves the clock (a :class:`GroupSim` owns time then).
        self.poll_advances_clock = True
        #: Simulated time a ``poll()`` / ``consume()`` that returns records takes (when
        #: ``poll_advances_clock``), so a member that always has a record ready still lets its
        #: background work (heartbeats, reconciliation) run, as a real member's thread does.
        self.poll_cost_ms = 1
        self._groups: dict[str, CoordinatorSim] = {}
        self._consumers: dict[str, FakeConsumer] = {}

    # --- topics and records -----------------------------------------------------------------

    def create_topic(self, name: str, partitions: int) -> None:
        """Create topic ``name`` with ``partitions`` partitions."""
        self.topics.create(name, partitions)
        for group in self._groups.values():
            group.create_topic(name, partitions)

    def add_partitions(self, topic: str, partitions: int) -> None:
        """Grow ``topic`` to ``partitions`` partitions (coordinators bump their group epoch)."""
        self.topics.grow(topic, partitions)
        for group in self._groups.values():
            group.add_partitions(topic, partitions)

    def produce(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        partition: int | None = None,
        headers: Sequence[Header] | Mapping[str, bytes | None] | None = None,
        timestamp_ms: int | None = None,
    ) -> SimRecord:
        """Append one record; returns it with its partition and offset.

        Without ``partition``, a keyed record goes to a partition chosen by its key (stable for
        the run), an unkeyed one to a partition drawn from the seeded random source.
        """
        key_bytes = _as_bytes(key)
        count = self.topics.partitions(topic)
        if partition is None:
            if key_bytes is None:
                partition = self.rng.randrange(count)
            else:
                partition = int.from_bytes(key_bytes, "big") % count
        header_list = list(headers.items()) if isinstance(headers, Mapping) else headers or []
        record = self.topics.append(
            topic,
            partition,
            key_bytes,
            _as_bytes(value),
            header_list,
            self.clock.now_ms if timestamp_ms is None else timestamp_ms,
        )
        self.timeline.produced(topic, partition, [record.offset], self.clock.now_ms)
        return record

    # --- groups and consumers ---------------------------------------------------------------

    def start_offset(self, partition: TopicPartition, policy: ResetPolicy) -> int | None:
        """Where ``policy`` starts ``partition`` (ListOffsets): the log start (0, the fake logs
        keep every record) or the end; None for a partition that does not exist."""
        if partition.topic not in self.topics.logs:
            return None
        if not 0 <= partition.partition < self.topics.partitions(partition.topic):
            return None
        if policy is ResetPolicy.EARLIEST:
            return 0
        return self.topics.high_watermark(partition.topic, partition.partition)

    def group(self, group_id: str) -> CoordinatorSim:
        """The simulated coordinator of ``group_id`` (created, with every topic, on first use)."""
        coordinator = self._groups.get(group_id)
        if coordinator is None:
            coordinator = CoordinatorSim(
                group_id=group_id,
                heartbeat_interval_ms=self.heartbeat_interval_ms,
                session_timeout_ms=self.session_timeout_ms,
            )
            for name, logs in self.topics.logs.items():
                coordinator.create_topic(name, len(logs))
            self._groups[group_id] = coordinator
        return coordinator

    def consumer(self, config: Mapping[str, Any], *, name: str | None = None) -> FakeConsumer:
        """A new :class:`~consumer.testing.sim.FakeConsumer` on this cluster.

        ``config`` is a ``consumer.Consumer`` configuration (``bootstrap.servers`` may be left
        out); ``name`` labels it in the timeline (default ``consumer-1``, ``consumer-2``...).
        """
        from consumer.testing.sim.fake_consumer import FakeConsumer

        return FakeConsumer(dict(config), cluster=self, name=name)

    def register(self, consumer: FakeConsumer) -> str:
        """Give ``consumer`` a unique name (used by :class:`FakeConsumer`)."""
        name = consumer.name or f"consumer-{len(self._consumers) + 1}"
        if name in self._consumers:
            raise ValueError(f"a consumer named {name!r} already exists in this cluster")
        self._consumers[name] = consumer
        return name

    def consumers(self) -> dict[str, FakeConsumer]:
        """Every consumer created on this cluster, by name."""
        return dict(self._consumers)

    def move_coordinator(self) -> None:
        """Move every group's coordinator to another broker: requests to the old one get
        NOT_COORDINATOR, and members look the coordinator up again."""
        self.coordinator_id += 1

    # --- time -------------------------------------------------------------------------------

    def run_due(self) -> None:
        """Run every member's work due now (in a seed-determined order) until all are quiet."""
        now = self.clock.now_ms
        for _ in range(10_000):
            for coordinator in self._groups.values():
                coordinator.expire(now)
            runtimes = [c.runtime for c in self._consumers.values() if c.runtime is not None]
            self.rng.shuffle(runtimes)
            did = False
            for runtime in runtimes:
                did = runtime.run_due() or did
            if not did:
                return
        raise RuntimeError(f"the simulated group did not settle at {now} ms")  # pragma: no cover

    def next_due_ms(self) -> int | None:
        """The earliest time any member or coordinator has something to do."""
        times = [
            c.runtime.next_deadline_ms
            for c in self._consumers.values()
            if c.runtime is not None and c.runtime.next_deadline_ms is not None
        ]
        times += [t for g in self._groups.values() if (t := g.next_expiry_ms()) is not None]
        return min(times) if times else None

    def advance_to(self, end_ms: int) -> None:
        """Move the clock to ``end_ms``, running every member's due work at each instant."""
        while True:
            self.run_due()
            now = self.clock.now_ms
            if now >= end_ms:
                return
            due = self.next_due_ms()
            self.clock.advance_to(end_ms if due is None else min(max(due, now + 1), end_ms))

    def step_towards(self, deadline_ms: int) -> None:
        """Move the clock to the next instant anything is due, but not past ``deadline_ms``."""
        now = self.clock.now_ms
        due = self.next_due_ms()
        self.advance_to(deadline_ms if due is None else min(max(due, now + 1), deadline_ms))

    def run_until(self, done: Callable[[], bool], deadline_ms: int) -> bool:
        """Run due work, moving time, until ``done()`` or ``deadline_ms``; returns ``done()``."""
        while True:
            self.run_due()
            if done():
                return True
            if self.clock.now_ms >= deadline_ms:
                return False
            self.step_towards(deadline_ms)

    def advance(self, ms: int) -> None:
        """Move the clock ``ms`` forward (see :meth:`advance_to`)."""
        if ms < 0:
            raise ValueError(f"ms must be >= 0, got {ms}")
        self.advance_to(self.clock.now_ms + ms)

    # --- hooks for the consumers' runtimes --------------------------------------------------

    def state_changed(
        self, name: str, previous: MemberState, current: MemberState, at_ms: int
    ) -> None:
        """Record a member's state change; a member that lost its partitions no longer owns them."""
        self.timeline.state(name, current.name, at_ms)
        if current in _LOSING_STATES:
            self._consumers[name].ownership.lose_all(at_ms)

    def epoch_changed(self, name: str, member_epoch: int, at_ms: int) -> None:
        """Record a member's epoch move."""
        self.timeline.epoch(name, member_epoch, at_ms)

    def committed(self, name: str, offsets: dict[TopicPartition, int], at_ms: int) -> None:
        """Record commits the coordinator accepted."""
        for tp, offset in sorted(offsets.items()):
            self.timeline.commit(name, tp.topic, tp.partition, offset, at_ms)

    def record_callback(self, call: CallbackCall) -> None:
        """Record one application callback (rebalance callbacks also as timeline markers)."""
        self.callbacks.append(call)
        kind = _CALLBACK_KINDS.get(call.callback)
        if kind is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition, _ in call.partitions:
                by_topic.setdefault(topic, []).append(partition)
            for topic, partitions in sorted(by_topic.items()):
                self.timeline.callback(call.member, kind, topic, sorted(partitions), call.at_ms)


def _as_bytes(value: bytes | str | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return value.encode("utf-8")
