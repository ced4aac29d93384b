"""The target assignment of a simulated share group, by the rules of Kafka's ``simple`` assignor.

Kafka's default share assignor (``SimpleAssignor``, KIP-932, balanced since Kafka 4.1) puts
*balance* before *stickiness*:

* each partition is shared by at most ``ceil(members / partitions)`` members, so with more members
  than partitions several members share each partition (6 members on 2 partitions: 3 on each);
* the ``sharing x partitions`` slots are spread over the members so that no two members' counts
  differ by more than one, and every member gets at least one partition when there is any;
* within those bounds a member keeps the partitions it had (topics it no longer subscribes to are
  dropped first), and the free slots of each partition go to the members furthest below their
  count, ties broken by join order.

This is our own implementation of those rules, not a port: Kafka's tie-breaks (hash-map
iteration order) are not reproduced, so the exact member of a partition may differ from a real
broker's; the counts per member and per partition follow the rules above. Members subscribed to
different topic sets are assigned per topic among that topic's subscribers (Kafka's heterogeneous
builder balances across topics as well).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from consumer.member.partitions import TopicIdPartition

__all__ = ["simple_share_assignment"]


def simple_share_assignment(
    members: Sequence[tuple[str, frozenset[str]]],
    topics: Mapping[str, tuple[uuid.UUID, int]],
    previous: Mapping[str, frozenset[TopicIdPartition]],
) -> dict[str, frozenset[TopicIdPartition]]:
    """The target of every member.

    Args:
        members: ``(member id, subscribed topic names)`` in join order.
        topics: the existing topics: name -> (topic id, partition count).
        previous: the current target of each member (kept where the rules allow).
    """
    result: dict[str, set[TopicIdPartition]] = {member_id: set() for member_id, _ in members}
    subscriptions = {member_id: topic_names for member_id, topic_names in members}
    homogeneous = len({names for _, names in members}) <= 1
    groups: list[tuple[list[str], list[TopicIdPartition]]] = []
    if homogeneous and members:
        names = sorted(n for n in members[0][1] if n in topics)
        groups.append(([m for m, _ in members], _partitions(names, topics)))
    else:
        for name in sorted({n for _, names in members for n in names if n in topics}):
            subscribers = [m for m, names in members if name in names]
            groups.append((subscribers, _partitions([name], topics)))
    for member_ids, partitions in groups:
        kept = {
            m: [tp for tp in sorted(previous.get(m, frozenset())) if tp in set(partitions)]
            for m in member_ids
        }
        for member_id, assigned in _balanced(member_ids, partitions, kept).items():
            result[member_id] |= assigned
    return {
        member_id: frozenset(
            tp for tp in assigned if _subscribed(tp, subscriptions[member_id], topics)
        )
        for member_id, assigned in result.items()
    }


def _partitions(
    names: Sequence[str], topics: Mapping[str, tuple[uuid.UUID, int]]
) -> list[TopicIdPartition]:
    return [
        TopicIdPartition(topics[name][0], partition)
        for name in names
        for partition in range(topics[name][1])
    ]


def _subscribed(
    tp: TopicIdPartition, names: frozenset[str], topics: Mapping[str, tuple[uuid.UUID, int]]
) -> bool:
    return any(topics[name][0] == tp.topic_id for name in names if name in topics)


def _balanced(
    member_ids: Sequence[str],
    partitions: Sequence[TopicIdPartition],
    kept: Mapping[str, Sequence[TopicIdPartition]],
) -> dict[str, set[TopicIdPartition]]:
    """Assign ``partitions`` to ``member_ids`` (join order) by the rules of the module docstring."""
    count = len(member_ids)
    assigned: dict[str, set[TopicIdPartition]] = {m: set() for m in member_ids}
    if not partitions or not count:
        return assigned
    sharing = -(-count // len(partitions))
    slots = sharing * len(partitions)
    # Member i gets ceil(slots*(i+1)/count) - ceil(slots*i/count): counts differ by at most one.
    quota = {
        m: -(-slots * (i + 1) // count) - -(-slots * i // count) for i, m in enumerate(member_ids)
    }
    holders: dict[TopicIdPartition, list[str]] = {tp: [] for tp in partitions}
    for member_id in member_ids:  # stickiness, within the balance bounds
        for tp in kept.get(member_id, ()):
            if len(assigned[member_id]) < quota[member_id] and len(holders[tp]) < sharing:
                assigned[member_id].add(tp)
                holders[tp].append(member_id)
    order = {m: i for i, m in enumerate(member_ids)}
    for tp in partitions:  # fill every partition's free slots
        while len(holders[tp]) < sharing:
            free = [m for m in member_ids if m not in holders[tp]]
            if not free:
                break
            best = min(
                free,
                key=lambda m: (
                    len(assigned[m]) - quota[m] >= 0,
                    len(assigned[m]) - quota[m],
                    order[m],
                ),
            )
            if len(assigned[best]) >= quota[best]:
                break
            assigned[best].add(tp)
            holders[tp].append(best)
    for member_id in member_ids:  # a member left empty by a dead end still gets a partition
        if not assigned[member_id]:
            tp = min(partitions, key=lambda p: (len(holders[p]), p))
            assigned[member_id].add(tp)
            holders[tp].append(member_id)
    return assigned
