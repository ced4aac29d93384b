"""The two backends the behaviour tests run on, behind one small protocol.

* :class:`RealBackend`: ``consumer.Consumer`` against the real broker of the test session
  (topics through the admin client, records through ``confluent_kafka.Producer``). With
  ``KGM_CONSUMER_IMPL=confluent`` it builds ``confluent_kafka.Consumer`` instead (as every
  integration test does), which shows where ours differs from librdkafka's member.
* :class:`FakeBackend`: ``consumer.testing.sim.FakeConsumer`` on a fresh ``SimCluster``.

Test bodies only use :class:`Backend` and :class:`Member`, so they are identical for both.
:class:`Member` wraps one consumer: it records the rebalance callbacks (and whether each ran
inside ``poll()``), the records it returned, and checks after every callback that no partition is
owned by two members of the same :class:`Ownership` at once. Waiting is always "poll until a
condition holds", bounded by the total poll time (wall time on the real broker, simulated time
on the fake), never a sleep.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support import build_consumer

__all__ = [
    "DEFAULT_BOUND_S",
    "POLL_SLICE_S",
    "Backend",
    "FakeBackend",
    "Member",
    "Ownership",
    "RealBackend",
    "config",
    "keys_of",
    "partitions_of",
    "poll_for",
    "poll_until",
    "subscribed",
    "wait_assigned",
]

#: The timeout of one ``poll()`` while waiting for a condition.
POLL_SLICE_S = 0.05
#: Default bound, in seconds of idle polling, for a condition to come true.
DEFAULT_BOUND_S = 30.0
#: How many polls in all :func:`poll_until` allows per idle poll of its bound.
BUSY_POLL_FACTOR = 50

Key = tuple[str, int]
Headers = list[tuple[str, bytes]]


class Backend(Protocol):
    """What a behaviour test needs from a cluster: topics, records, consumers, unique names."""

    name: str

    def unique(self, prefix: str) -> str:
        """A name unique to this test (for a group or a topic)."""
        ...

    def create_topic(self, partitions: int = 1) -> str:
        """Create a uniquely named topic with ``partitions`` partitions; return its name."""
        ...

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        """Append one record; it is readable by consumers when this returns."""
        ...

    def consumer(self, config: dict[str, Any]) -> Any:
        """A new consumer for ``config`` (the backend adds what locates its cluster)."""
        ...

    def close(self) -> None:
        """Close every consumer this backend made (teardown)."""
        ...


def _safe_close(consumer: Any) -> None:
    with contextlib.suppress(Exception):  # teardown goes on; the test has already reported
        consumer.close()


class RealBackend:
    """``consumer.Consumer`` on the session broker."""

    name = "real"

    def __init__(self, bootstrap: str, admin: AdminClient, unique: Callable[[str], str]) -> None:
        self._bootstrap = bootstrap
        self._admin = admin
        self._unique = unique
        self._producer: Producer | None = None
        self._made: list[Any] = []

    def unique(self, prefix: str) -> str:
        return self._unique(prefix)

    def create_topic(self, partitions: int = 1) -> str:
        topic = self._unique("topic")
        futures = self._admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
            operation_timeout=30,
        )
        futures[topic].result(timeout=30)
        return topic

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        if self._producer is None:
            self._producer = Producer({"bootstrap.servers": self._bootstrap, "acks": "all"})
        failures: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                failures.append(error)

        extra: dict[str, Any] = {"on_delivery": delivered}
        if partition is not None:
            extra["partition"] = partition
        if headers is not None:
            extra["headers"] = headers
        self._producer.produce(topic, value, key, **extra)
        assert self._producer.flush(30) == 0, "a record was not delivered within 30 s"
        assert not failures, f"delivery failed: {failures}"

    def consumer(self, config: dict[str, Any]) -> Any:
        # Ours unless KGM_CONSUMER_IMPL=confluent (librdkafka's own KIP-848 member, to compare).
        made = build_consumer({"bootstrap.servers": self._bootstrap, **config})
        self._made.append(made)
        return made

    def close(self) -> None:
        for made in self._made:
            _safe_close(made)
        self._producer = None


class FakeBackend:
    """``FakeConsumer`` on a fresh ``SimCluster`` (simulated time: polls cost no wall time)."""

    name = "fake"

    def __init__(self, seed: int = 0) -> None:
        from consumer.testing.sim import SimCluster

        self._cluster = SimCluster(seed=seed)
        self._made: list[Any] = []

    def unique(self, prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    def create_topic(self, partitions: int = 1) -> str:
        topic = self.unique("topic")
        self._cluster.create_topic(topic, partitions)
        return topic

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        self._cluster.produce(topic, value, key=key, partition=partition, headers=headers)

    def consumer(self, config: dict[str, Any]) -> Any:
        made = self._cluster.consumer(dict(config))
        self._made.append(made)
        return made

    def close(self) -> None:
        for made in self._made:
            _safe_close(made)


def keys_of(partitions: Iterable[TopicPartition]) -> set[Key]:
    return {(tp.topic, tp.partition) for tp in partitions}


@dataclass
class Ownership:
    """Who owns what, across the members of one group; fails on a partition owned twice."""

    owners: dict[str, set[Key]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def changed(self, member: str, owned: set[Key]) -> None:
        self.owners[member] = set(owned)
        for other, theirs in self.owners.items():
            both = owned & theirs
            if other != member and both:
                self.violations.append(f"{sorted(both)} owned by {member} and {other} at once")


@dataclass
class Callback:
    """One rebalance callback as the member saw it."""

    kind: str  # "assign", "revoke" or "lost"
    partitions: set[Key]
    inside_poll: bool


class Member:
    """One consumer under test, with its callbacks and records recorded."""

    def __init__(self, name: str, consumer: Any, ownership: Ownership | None = None) -> None:
        self.name = name
        self.consumer = consumer
        self.ownership = ownership if ownership is not None else Ownership()
        self.callbacks: list[Callback] = []
        self.records: list[Message] = []
        self.errors: list[KafkaError] = []
        self.owned: set[Key] = set()
        #: Records returned from a partition the member did not own (by its callbacks) then.
        self.unowned_records: list[tuple[str, int, int]] = []
        #: The application's own work in ``on_revoke`` (while the partitions are still owned).
        self.before_revoke: Callable[[Any, list[TopicPartition]], None] | None = None
        self._in_poll = False

    # --- callbacks ------------------------------------------------------------------------------

    def on_assign(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self._callback("assign", partitions)
        self.owned |= keys_of(partitions)
        self.ownership.changed(self.name, self.owned)

    def on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self._callback("revoke", partitions)
        if self.before_revoke is not None:
            self.before_revoke(consumer, partitions)
        self.owned -= keys_of(partitions)
        self.ownership.changed(self.name, self.owned)

    def on_lost(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self._callback("lost", partitions)
        self.owned -= keys_of(partitions)
        self.ownership.changed(self.name, self.owned)

    def _callback(self, kind: str, partitions: list[TopicPartition]) -> None:
        self.callbacks.append(Callback(kind, keys_of(partitions), self._in_poll))

    def calls(self, kind: str) -> list[set[Key]]:
        """The partition sets of the non-empty callbacks of ``kind``, in order."""
        return [c.partitions for c in self.callbacks if c.kind == kind and c.partitions]

    # --- driving --------------------------------------------------------------------------------

    def subscribe(self, topics: list[str]) -> None:
        self.consumer.subscribe(
            topics, on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost
        )

    def poll_once(self, timeout_s: float = POLL_SLICE_S) -> Message | None:
        """One ``poll()``; a record is kept in :attr:`records`, an error event in :attr:`errors`."""
        self._in_poll = True
        try:
            message = self.consumer.poll(timeout_s)
        finally:
            self._in_poll = False
        if message is None:
            return None
        error = message.error()
        if error is not None:
            self.errors.append(error)
            return None
        self.records.append(message)
        topic, partition = message.topic() or "", message.partition() or 0
        if (topic, partition) not in self.owned:
            self.unowned_records.append((topic, partition, message.offset() or 0))
        return message

    def assignment(self) -> set[Key]:
        return keys_of(self.consumer.assignment())

    def values(self) -> list[bytes | None]:
        return [m.value() for m in self.records]

    def close(self) -> None:
        self._in_poll = True  # close() may serve on_revoke; it counts as the app's call
        try:
            self.consumer.close()
        finally:
            self._in_poll = False


def poll_until(
    members: Sequence[Member],
    condition: Callable[[], object],
    what: str,
    bound_s: float = DEFAULT_BOUND_S,
    details: Callable[[], str] | None = None,
) -> None:
    """Poll every member in turn until ``condition()`` holds.

    The bound is ``bound_s`` of idle polling: only polls that returned nothing count, as each
    of them waited ``POLL_SLICE_S`` (wall time on the real broker, simulated time on the fake,
    where a poll that returns a record takes no time at all). At most ``BUSY_POLL_FACTOR``
    times as many polls run in all, so a stream of records cannot keep the loop going forever.
    """
    idle_budget = max(1, int(bound_s / POLL_SLICE_S))
    idle = total = 0
    while idle < idle_budget and total < idle_budget * BUSY_POLL_FACTOR:
        if condition():
            return
        for member in members:
            total += 1
            if member.poll_once() is None:
                idle += 1
    if condition():
        return
    extra = f"\n{details()}" if details is not None else ""
    raise AssertionError(
        f"{what} did not happen within {bound_s:.0f} s of polling "
        f"({total} polls, {idle} of them idle){extra}"
    )


def poll_for(members: Sequence[Member], duration_s: float) -> None:
    """Poll every member in turn for ``duration_s`` of polls (to show that nothing happens)."""
    for _ in range(max(1, int(duration_s / POLL_SLICE_S / len(members)))):
        for member in members:
            member.poll_once()


# --- shared steps of the behaviour tests ---------------------------------------------------


def config(backend: Backend, group: str | None = None, **extra: Any) -> dict[str, Any]:
    """A consumer configuration: a new group (unless given), earliest reset, ``extra``."""
    return {
        "group.id": group or backend.unique("group"),
        "auto.offset.reset": "earliest",
        **extra,
    }


def subscribed(
    backend: Backend,
    topic: str,
    name: str = "m1",
    ownership: Ownership | None = None,
    **config_extra: Any,
) -> Member:
    """A :class:`Member` on a new consumer, subscribed to ``topic`` (not yet polled)."""
    member = Member(name, backend.consumer(config(backend, **config_extra)), ownership)
    member.subscribe([topic])
    return member


def partitions_of(topic: str, count: int) -> set[Key]:
    """Every partition of ``topic``, as keys."""
    return {(topic, p) for p in range(count)}


def wait_assigned(member: Member, expected: set[Key]) -> None:
    """Poll ``member`` until its callbacks and ``assignment()`` both say it owns ``expected``."""
    poll_until(
        [member],
        lambda: member.owned == expected and member.assignment() == expected,
        f"{member.name} owning {sorted(expected)}",
        details=lambda: f"owned {sorted(member.owned)}, callbacks {member.callbacks}",
    )
