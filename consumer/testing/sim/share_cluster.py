"""``ShareSimCluster``: a simulated cluster for :class:`FakeShareConsumer` instances (KIP-932).

One :class:`~consumer.testing.sim.ManualClock`, in-memory topics, and per share group a
:class:`~consumer.testing.sim.share_coordinator.ShareCoordinatorSim` and its
:class:`~consumer.testing.sim.share_partitions.SharePartitionsSim`; one seeded ``random.Random``
drives every random choice (member ids, backoff jitter, the order in which members run at an
instant, the partition of an unkeyed record). Nothing here does I/O, starts a thread or reads the
wall clock: the same seed gives the same run.

:meth:`ShareSimCluster.advance` moves time like Kafka Streams' ``advanceWallClockTime``: every
member's due background work (heartbeats, assignment changes) runs at each instant on the way,
sessions of silent members expire and record locks run out. Call it from the code under test to
stand for time spent processing (a record whose processing outlasts its lock is redelivered).

Group configs are set as on a real broker (IncrementalAlterConfigs on the GROUP resource) with
:meth:`ShareSimCluster.set_group_config`; ``share.auto.offset.reset`` defaults to ``latest`` as in
Kafka, so records produced before a partition is first read are not delivered unless it is set to
``earliest`` first.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from consumer.testing.sim.clock import ManualClock
from consumer.testing.sim.share_coordinator import ShareCoordinatorSim
from consumer.testing.sim.share_partitions import (
    RecordState,
    SharePartitionsSim,
)
from consumer.testing.sim.topics import Header, SimRecord, SimTopics

if TYPE_CHECKING:
    from consumer.testing.sim.fake_share_consumer import FakeShareConsumer

__all__ = ["ShareSimCluster"]

#: How far an infinite ``poll()`` may move the simulated clock before it returns nothing.
INFINITE_POLL_LIMIT_MS: Final = 3_600_000
_SETTINGS_KEYS: Final = {
    "share.record.lock.duration.ms": "record_lock_duration_ms",
    "share.delivery.count.limit": "delivery_count_limit",
    "share.auto.offset.reset": "start_offset_reset",
    "share.partition.max.record.locks": "max_record_locks",
}
_COORDINATOR_KEYS: Final = {
    "share.session.timeout.ms": "session_timeout_ms",
    "share.heartbeat.interval.ms": "heartbeat_interval_ms",
}


class ShareSimCluster:
    """A simulated cluster with share groups (see the module docstring).

    Args:
        seed: drives every random choice of the run.
        session_timeout_ms: default ``share.session.timeout.ms`` of new groups.
        heartbeat_interval_ms: default ``share.heartbeat.interval.ms`` of new groups.
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
        #: When False, ``poll()`` never moves the clock (the test moves it with :meth:`advance`).
        self.poll_advances_clock = True
        self._coordinators: dict[str, ShareCoordinatorSim] = {}
        self._partitions: dict[str, SharePartitionsSim] = {}
        self._consumers: dict[str, FakeShareConsumer] = {}

    # --- topics and records -----------------------------------------------------------------

    def create_topic(self, name: str, partitions: int) -> None:
        """Create topic ``name`` with ``partitions`` partitions."""
        self.topics.create(name, partitions)
        for coordinator in self._coordinators.values():
            coordinator.create_topic(name, partitions)

    def add_partitions(self, topic: str, partitions: int) -> None:
        """Grow ``topic`` to ``partitions`` partitions (groups reading it are reassigned)."""
        self.topics.grow(topic, partitions)
        for coordinator in self._coordinators.values():
            coordinator.add_partitions(topic, partitions)

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
        key_bytes = key.encode() if isinstance(key, str) else key
        count = self.topics.partitions(topic)
        if partition is None:
            if key_bytes is None:
                partition = self.rng.randrange(count)
            else:
                partition = int.from_bytes(key_bytes, "big") % count
        header_list = list(headers.items()) if isinstance(headers, Mapping) else headers or []
        return self.topics.append(
            topic,
            partition,
            key_bytes,
            value.encode() if isinstance(value, str) else value,
            header_list,
            self.clock.now_ms if timestamp_ms is None else timestamp_ms,
        )

    # --- share groups -----------------------------------------------------------------------

    def group(self, group_id: str) -> ShareCoordinatorSim:
        """The simulated coordinator of share group ``group_id`` (created on first use)."""
        coordinator = self._coordinators.get(group_id)
        if coordinator is None:
            coordinator = ShareCoordinatorSim(
                group_id=group_id,
                heartbeat_interval_ms=self.heartbeat_interval_ms,
                session_timeout_ms=self.session_timeout_ms,
            )
            for name, logs in self.topics.logs.items():
                coordinator.create_topic(name, len(logs))
            self._coordinators[group_id] = coordinator
        return coordinator

    def share_partitions(self, group_id: str) -> SharePartitionsSim:
        """The share-partitions (per-record states) of share group ``group_id``."""
        found = self._partitions.get(group_id)
        if found is None:
            found = SharePartitionsSim(self.topics)
            self._partitions[group_id] = found
        return found

    def record_state(
        self, group_id: str, topic: str, partition: int, offset: int
    ) -> tuple[RecordState, int]:
        """``(state, delivery count)`` of one record for share group ``group_id``, now."""
        partitions = self.share_partitions(group_id)
        partitions.expire(self.clock.now_ms)
        found = partitions.partitions.get((topic, partition))
        return (RecordState.AVAILABLE, 0) if found is None else found.state(offset)

    def set_group_config(self, group_id: str, configs: Mapping[str, object]) -> None:
        """Set share group configs as IncrementalAlterConfigs would (values may be strings).

        Keys: ``share.record.lock.duration.ms``, ``share.delivery.count.limit``,
        ``share.auto.offset.reset`` (``earliest``/``latest``; it applies to partitions the group
        has not read yet), ``share.partition.max.record.locks``, ``share.session.timeout.ms``,
        ``share.heartbeat.interval.ms``.

        Raises:
            ValueError: an unknown key, or a value that is not allowed (the message names both).
        """
        settings = self.share_partitions(group_id).settings
        coordinator = self.group(group_id)
        checked: dict[str, object] = {}
        for key, raw in configs.items():
            if key not in _SETTINGS_KEYS and key not in _COORDINATOR_KEYS:
                known = ", ".join(sorted([*_SETTINGS_KEYS, *_COORDINATOR_KEYS]))
                raise ValueError(f"unknown share group config {key!r}; known: {known}")
            value: object = raw
            if key != "share.auto.offset.reset":
                try:
                    if isinstance(raw, bool):
                        raise TypeError
                    value = int(str(raw))
                except (TypeError, ValueError):
                    raise ValueError(f"{key} must be a positive integer, got {raw!r}") from None
                if not isinstance(value, int) or value < 1:
                    raise ValueError(f"{key} must be a positive integer, got {raw!r}")
            checked[key] = value
        changes: dict[str, Any] = {
            attr: checked[key] for key, attr in _SETTINGS_KEYS.items() if key in checked
        }
        candidate = dataclasses.replace(settings, **changes)  # validates the combination
        for attr in _SETTINGS_KEYS.values():
            setattr(settings, attr, getattr(candidate, attr))
        for key, attr in _COORDINATOR_KEYS.items():
            if key in checked:
                setattr(coordinator, attr, checked[key])

    # --- consumers --------------------------------------------------------------------------

    def share_consumer(
        self, config: Mapping[str, Any], *, name: str | None = None
    ) -> FakeShareConsumer:
        """A new :class:`~consumer.testing.sim.FakeShareConsumer` on this cluster.

        ``config`` is a ``consumer.ShareConsumer`` configuration (``bootstrap.servers`` may be
        left out); ``name`` labels it (default ``share-consumer-1``, ``share-consumer-2``...).
        """
        from consumer.testing.sim.fake_share_consumer import FakeShareConsumer

        return FakeShareConsumer(dict(config), cluster=self, name=name)

    def register(self, consumer: FakeShareConsumer, name: str | None) -> str:
        """Give ``consumer`` a unique name (used by :class:`FakeShareConsumer`)."""
        chosen = name or f"share-consumer-{len(self._consumers) + 1}"
        if chosen in self._consumers:
            raise ValueError(f"a share consumer named {chosen!r} already exists in this cluster")
        self._consumers[chosen] = consumer
        return chosen

    def consumers(self) -> dict[str, FakeShareConsumer]:
        """Every share consumer created on this cluster, by name."""
        return dict(self._consumers)

    # --- time -------------------------------------------------------------------------------

    def run_due(self) -> None:
        """Run every member's work due now (in a seed-determined order) until all are quiet."""
        now = self.clock.now_ms
        for _ in range(10_000):
            for coordinator in self._coordinators.values():
                coordinator.expire(now)
            for partitions in self._partitions.values():
                partitions.expire(now)
            runtimes = [c.runtime for c in self._consumers.values() if not c.runtime.finished]
            self.rng.shuffle(runtimes)
            did = False
            for runtime in runtimes:
                did = runtime.run_due() or did
            if not did:
                return
        raise RuntimeError(
            f"the simulated share group did not settle at {now} ms"
        )  # pragma: no cover

    def next_due_ms(self) -> int | None:
        """The earliest time a member, a session or a record lock has something due."""
        times = [
            c.runtime.next_deadline_ms
            for c in self._consumers.values()
            if not c.runtime.finished and c.runtime.next_deadline_ms is not None
        ]
        times += [t for c in self._coordinators.values() if (t := c.next_expiry_ms()) is not None]
        times += [
            t for p in self._partitions.values() if (t := p.next_lock_deadline_ms()) is not None
        ]
        return min(times) if times else None

    def advance_to(self, end_ms: int) -> None:
        """Move the clock to ``end_ms``, running everything due at each instant on the way."""
        while True:
            self.run_due()
            now = self.clock.now_ms
            if now >= end_ms:
                return
            due = self.next_due_ms()
            self.clock.advance_to(end_ms if due is None else min(max(due, now + 1), end_ms))

    def advance(self, ms: int) -> None:
        """Move the clock ``ms`` forward (see :meth:`advance_to`)."""
        if ms < 0:
            raise ValueError(f"ms must be >= 0, got {ms}")
        self.advance_to(self.clock.now_ms + ms)

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
