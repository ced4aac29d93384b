"""What a share consumer does about a partition's ShareFetch/ShareAcknowledge error. Sans-I/O.

The rules follow the Java 4.3 client (``ShareFetchCollector``, ``ShareConsumeRequestManager``):
a leader change fails the partition's in-flight acknowledgements (they cannot move to another
session) and moves fetching to the new leader, using the response's ``CurrentLeader`` and
``NodeEndpoints`` when given; an unknown topic or partition asks for metadata; authorization
failures surface to the application; a corrupt message becomes a record error. Errors are named
as Kafka names them (``BrokerError.name``), so this module needs no wire types.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from consumer.share.acknowledgements import TopicIdPartition

__all__ = [
    "LeaderChange",
    "PartitionAction",
    "action_for_partition_error",
    "leader_after_move",
    "leaders_after_hints",
]


class PartitionAction(enum.Enum):
    """The reaction to one partition error."""

    MOVE_TO_LEADER = "move_to_leader"
    """Fail the partition's acknowledgements; fetch from the new (hinted or looked-up) leader."""
    REFRESH_METADATA = "refresh_metadata"
    """The topic or partition is unknown here: refresh metadata, keep the partition pending."""
    SURFACE = "surface"
    """Raise to the application (authorization)."""
    RECORD_ERROR = "record_error"
    """Hand the application a record error for the partition (corrupt data)."""
    RETRY = "retry"
    """Transient: fetch again after the retry backoff."""
    FAIL_ACKNOWLEDGEMENTS = "fail_acknowledgements"
    """The acknowledgements failed for good (e.g. the lock expired); report them failed."""


_ACTIONS: Final[Mapping[str, PartitionAction]] = {
    "NOT_LEADER_OR_FOLLOWER": PartitionAction.MOVE_TO_LEADER,
    "FENCED_LEADER_EPOCH": PartitionAction.MOVE_TO_LEADER,
    "UNKNOWN_TOPIC_OR_PARTITION": PartitionAction.REFRESH_METADATA,
    "UNKNOWN_TOPIC_ID": PartitionAction.REFRESH_METADATA,
    "TOPIC_AUTHORIZATION_FAILED": PartitionAction.SURFACE,
    "GROUP_AUTHORIZATION_FAILED": PartitionAction.SURFACE,
    "CORRUPT_MESSAGE": PartitionAction.RECORD_ERROR,
    "INVALID_RECORD_STATE": PartitionAction.FAIL_ACKNOWLEDGEMENTS,
    "INVALID_REQUEST": PartitionAction.FAIL_ACKNOWLEDGEMENTS,
}


def action_for_partition_error(name: str, *, retriable: bool = True) -> PartitionAction:
    """The action for the error called ``name``; unlisted errors are retried when Kafka calls
    them retriable and surfaced otherwise."""
    action = _ACTIONS.get(name)
    if action is not None:
        return action
    return PartitionAction.RETRY if retriable else PartitionAction.SURFACE


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """A partition's leader as an error response names it (``CurrentLeader``)."""

    partition: TopicIdPartition
    leader_id: int
    leader_epoch: int


def leaders_after_hints(
    leaders: Mapping[TopicIdPartition, int],
    changes: Iterable[LeaderChange],
    known_nodes: Iterable[int],
) -> tuple[dict[TopicIdPartition, int], frozenset[TopicIdPartition]]:
    """Apply leader hints: a hinted leader the client knows (from metadata or the response's
    ``NodeEndpoints``) replaces the old one; any other moved partition loses its leader and is
    returned as needing metadata."""
    nodes = frozenset(known_nodes)
    updated = dict(leaders)
    unknown: set[TopicIdPartition] = set()
    for change in changes:
        if change.leader_id >= 0 and change.leader_id in nodes:
            updated[change.partition] = change.leader_id
        else:
            updated.pop(change.partition, None)
            unknown.add(change.partition)
    return updated, frozenset(unknown)


def leader_after_move(
    from_node: int, hint: LeaderChange | None, known_nodes: Iterable[int]
) -> int | None:
    """Where to fetch a partition from after a MOVE_TO_LEADER error on ``from_node``: the
    hinted leader (``CurrentLeader``) when it names another node the client knows (from
    metadata or the response's ``NodeEndpoints``); None when metadata must say."""
    if hint is None or hint.leader_id < 0 or hint.leader_id == from_node:
        return None
    return hint.leader_id if hint.leader_id in frozenset(known_nodes) else None
