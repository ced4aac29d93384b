"""Pure reconciliation math: resolve topic ids, diff owned against target, name partitions.

No state, no commands: every function maps values to values, so the rules can be tested alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from consumer.member.partitions import TopicIdPartition, TopicPartition, sorted_partitions


@dataclass(frozen=True, slots=True)
class ResolvedTarget:
    """The part of a target whose topic names are known, and the topic ids still unknown."""

    resolved: frozenset[TopicIdPartition]
    unresolved_topic_ids: frozenset[uuid.UUID]


@dataclass(frozen=True, slots=True)
class RoundPlan:
    """What one reconciliation round changes: revoke first, then assign."""

    revoked: frozenset[TopicIdPartition]
    added: frozenset[TopicIdPartition]

    @property
    def is_empty(self) -> bool:
        """True when the round changes nothing."""
        return not self.revoked and not self.added


def resolve_target(
    target: Iterable[TopicIdPartition], topic_names: Mapping[uuid.UUID, str]
) -> ResolvedTarget:
    """Split ``target`` into partitions whose topic name is known and unknown topic ids."""
    resolved: set[TopicIdPartition] = set()
    unresolved: set[uuid.UUID] = set()
    for item in target:
        if item.topic_id in topic_names:
            resolved.add(item)
        else:
            unresolved.add(item.topic_id)
    return ResolvedTarget(frozenset(resolved), frozenset(unresolved))


def plan_round(
    owned: frozenset[TopicIdPartition], resolved: frozenset[TopicIdPartition]
) -> RoundPlan:
    """Partitions to revoke (owned, not in the target) and to add (in the target, not owned)."""
    return RoundPlan(revoked=owned - resolved, added=resolved - owned)


def name_partitions(
    partitions: Iterable[TopicIdPartition], topic_names: Mapping[uuid.UUID, str]
) -> tuple[TopicPartition, ...]:
    """Name each partition (every topic id must be known) and return them sorted."""
    return sorted_partitions(
        TopicPartition(topic_names[item.topic_id], item.partition) for item in partitions
    )


def topic_ids_of(partitions: Iterable[TopicIdPartition]) -> frozenset[uuid.UUID]:
    """The topic ids that occur in ``partitions``."""
    return frozenset(item.topic_id for item in partitions)
