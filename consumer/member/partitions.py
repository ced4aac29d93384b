"""Partition value types shared by inputs, commands and the reconciliation math.

Two spellings of a partition exist on purpose:

* :class:`TopicIdPartition` is what the group coordinator speaks (``ConsumerGroupHeartbeat`` carries
  topic ids, never names);
* :class:`TopicPartition` is what the application and the data plane speak (topic names).

The member resolves ids to names through metadata before it hands a partition to the application.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A partition named by topic name, as the application and the data plane know it."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True, order=True)
class TopicIdPartition:
    """A partition named by topic id, as the group coordinator knows it."""

    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    """One entry of the heartbeat's ``TopicPartitions`` array: a topic id and its partitions."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]


#: An assignment, as the coordinator gives it: single partitions by topic id. The one shape of
#: a target from the heartbeat response to the reconciliation (names are resolved once, there).
Assignment = frozenset[TopicIdPartition]
#: A topic-id keyed mapping of partition numbers (what the wire and tests write).
AssignmentMap = Mapping[uuid.UUID, Iterable[int]]


def flatten_assignment(assignment: AssignmentMap) -> Assignment:
    """Build an :data:`Assignment` from topic id -> partitions (duplicates collapse, negative
    partition numbers are dropped)."""
    return frozenset(
        TopicIdPartition(topic_id, partition)
        for topic_id, partitions in assignment.items()
        for partition in partitions
        if partition >= 0
    )


def group_by_topic(partitions: Iterable[TopicIdPartition]) -> tuple[TopicPartitions, ...]:
    """Group single partitions into wire entries, sorted by topic id then partition."""
    by_topic: dict[uuid.UUID, list[int]] = {}
    for item in partitions:
        by_topic.setdefault(item.topic_id, []).append(item.partition)
    return tuple(
        TopicPartitions(topic_id, tuple(sorted(by_topic[topic_id])))
        for topic_id in sorted(by_topic, key=str)
    )


#: The sort key of a :class:`TopicPartition`: the same order as the dataclass's own, compared in
#: C (sorting 900 partitions with the generated ``__lt__`` cost ~2 ms, 22,000 Python calls).
partition_order = operator.attrgetter("topic", "partition")


def sorted_partitions(partitions: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    """Return partitions as a sorted tuple (the form every command carries)."""
    return tuple(sorted(partitions, key=partition_order))
