"""The application-thread side of a :class:`~consumer.testing.sim.FakeConsumer`.

:class:`SimAppServer` *is* the real consumer's
:class:`~consumer._client.app_thread.AppThreadServer` (the same code runs the user's callbacks,
applies assignment changes and reports completions), with one hook around every event so the
simulation can record partition ownership the way real runs record it: a partition is owned from
the moment ``on_assign`` starts and until ``on_revoke`` / ``on_lost`` returns, or until the member
itself lets go of it as lost (STALE, FENCED), whichever comes first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._bridge.messages import ToAppEvent
from consumer._client.app_thread import AppThreadServer, RebalanceCallback
from consumer.member import InvokeOnAssign, InvokeOnLost, InvokeOnRevoke, TopicPartition
from consumer.testing.sim.cluster import CallbackCall
from consumer.testing.timeline import Timeline

__all__ = ["OwnershipRecorder", "SimAppServer", "recorded_callback", "recorded_on_commit"]


@dataclass
class OwnershipRecorder:
    """Opens and closes one member's ownership intervals in the cluster's timeline."""

    member: str
    timeline: Timeline
    clock_ms: Callable[[], int]
    owned: set[TopicPartition] = field(default_factory=set)

    def assigned(self, partitions: Iterable[TopicPartition]) -> None:
        """``on_assign`` starts for ``partitions``."""
        for tp in sorted(set(partitions) - self.owned):
            self.owned.add(tp)
            self.timeline.assigned(self.member, tp.topic, tp.partition, self.clock_ms())

    def released(self, partitions: Iterable[TopicPartition]) -> None:
        """``on_revoke`` / ``on_lost`` returned for ``partitions``."""
        for tp in sorted(set(partitions) & self.owned):
            self.owned.discard(tp)
            self.timeline.revoked(self.member, tp.topic, tp.partition, self.clock_ms())

    def lose_all(self, at_ms: int) -> None:
        """The member let go of everything it owned (lost, at ``at_ms``)."""
        for tp in sorted(self.owned):
            self.timeline.revoked(self.member, tp.topic, tp.partition, at_ms)
        self.owned.clear()


@dataclass
class SimAppServer(AppThreadServer):
    """The real application-thread server, with ownership recorded around its events."""

    recorder: OwnershipRecorder | None = None

    def _execute(self, event: ToAppEvent) -> None:
        recorder = self.recorder
        if recorder is not None and isinstance(event, InvokeOnAssign):
            recorder.assigned(event.partitions)
        super()._execute(event)
        if recorder is not None and isinstance(event, InvokeOnRevoke | InvokeOnLost):
            recorder.released(event.partitions)


def recorded_callback(
    callback: RebalanceCallback | None,
    kind: str,
    member: str,
    clock_ms: Callable[[], int],
    record: Callable[[CallbackCall], None],
) -> RebalanceCallback | None:
    """``callback`` wrapped so each call is recorded first (None stays None)."""
    if callback is None:
        return None
    user_callback = callback

    def wrapper(consumer: Any, partitions: list[KafkaTopicPartition]) -> None:
        named = tuple((tp.topic, tp.partition, tp.offset) for tp in partitions)
        record(CallbackCall(member, kind, clock_ms(), named))
        user_callback(consumer, partitions)

    return wrapper


def recorded_on_commit(
    on_commit: Callable[..., object] | None,
    member: str,
    clock_ms: Callable[[], int],
    record: Callable[[CallbackCall], None],
) -> Callable[[KafkaError | None, list[KafkaTopicPartition]], None] | None:
    """The ``on_commit`` config callback wrapped so each call is recorded first."""
    if on_commit is None:
        return None
    user_callback = on_commit

    def wrapper(error: KafkaError | None, partitions: list[KafkaTopicPartition]) -> None:
        named = tuple((tp.topic, tp.partition, tp.offset) for tp in partitions)
        name = None if error is None else error.name()
        record(CallbackCall(member, "on_commit", clock_ms(), named, name))
        user_callback(error, partitions)

    return wrapper
