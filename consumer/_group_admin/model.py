"""What ``kgm group`` reports, independent of where it came from, and its JSON form.

These frozen dataclasses are the one shape of a listed group and a described group, whatever the
group type; the converters at the bottom build them from the wire layer's parsed responses and
from confluent-kafka's admin results. A field a group type does not have is ``None`` (JSON
``null``); every key is always present, so scripts can rely on the schema of
``docs/howto/inspecting-groups.md``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

from consumer._wire import DescribedGroup, DescribedShareGroup, SharePartitionOffset

__all__ = [
    "CLASSIC",
    "CONSUMER",
    "SHARE",
    "AssignedPartition",
    "GroupDescription",
    "GroupListing",
    "MemberView",
    "PartitionOffsets",
    "classic_group_description",
    "consumer_group_description",
    "share_group_description",
    "with_lag",
]

#: Group types as ListGroups v5 spells them (Apache Kafka 4.x also has "streams").
CONSUMER: Final = "consumer"
CLASSIC: Final = "classic"
SHARE: Final = "share"

#: What librdkafka reports for "no committed offset" (``OFFSET_INVALID``).
_NO_OFFSET: Final = -1001


@dataclass(frozen=True, slots=True)
class GroupListing:
    """One row of ``kgm group list``; ``members`` is None when the group could not be described
    (a type this tool does not describe, or a describe error)."""

    group: str
    type: str
    state: str
    members: int | None

    def to_json(self) -> dict[str, Any]:
        """``{"group", "type", "state", "members"}``."""
        return {
            "group": self.group,
            "type": self.type,
            "state": self.state,
            "members": self.members,
        }


@dataclass(frozen=True, slots=True, order=True)
class AssignedPartition:
    """One partition of an assignment."""

    topic: str
    partition: int

    def to_json(self) -> dict[str, Any]:
        """``{"topic", "partition"}``."""
        return {"topic": self.topic, "partition": self.partition}


@dataclass(frozen=True, slots=True)
class MemberView:
    """One member of a described group. ``target_assignment`` is None where the group type has
    none (share and classic groups); ``instance_id``, ``rack`` and ``member_epoch`` likewise."""

    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    rack: str | None
    member_epoch: int | None
    assignment: tuple[AssignedPartition, ...]
    target_assignment: tuple[AssignedPartition, ...] | None

    def to_json(self) -> dict[str, Any]:
        """The member's keys, assignments as lists of ``{"topic", "partition"}``."""
        target = self.target_assignment
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "client_id": self.client_id,
            "host": self.host,
            "rack": self.rack,
            "member_epoch": self.member_epoch,
            "assignment": [p.to_json() for p in self.assignment],
            "target_assignment": None if target is None else [p.to_json() for p in target],
        }


@dataclass(frozen=True, slots=True, order=True)
class PartitionOffsets:
    """Where a group stands on one partition.

    Share groups: ``start_offset`` (the share-partition start offset), ``leader_epoch`` and, on
    brokers that report it (DescribeShareGroupOffsets v1, Kafka 4.2+), ``lag``. Consumer and
    classic groups: ``committed_offset`` (None: assigned but nothing committed), its
    ``leader_epoch`` and ``lag``: the partition's end offset (high watermark) minus the committed
    offset, None when nothing is committed or the end offset could not be read.
    """

    topic: str
    partition: int
    start_offset: int | None = None
    committed_offset: int | None = None
    leader_epoch: int | None = None
    lag: int | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"topic", "partition", "start_offset", "committed_offset", "leader_epoch", "lag"}``."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "start_offset": self.start_offset,
            "committed_offset": self.committed_offset,
            "leader_epoch": self.leader_epoch,
            "lag": self.lag,
        }


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """The result of ``kgm group describe``. ``members`` is None for a group type this tool does
    not describe (it is still named with its type and state)."""

    group: str
    type: str
    state: str
    group_epoch: int | None
    assignment_epoch: int | None
    assignor: str | None
    members: tuple[MemberView, ...] | None
    partitions: tuple[PartitionOffsets, ...]

    def to_json(self) -> dict[str, Any]:
        """The documented schema (see the module docstring)."""
        return {
            "group": self.group,
            "type": self.type,
            "state": self.state,
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "assignor": self.assignor,
            "members": None if self.members is None else [m.to_json() for m in self.members],
            "partitions": [p.to_json() for p in self.partitions],
        }


# --- converters ---------------------------------------------------------------------------------


class CommittedOffsetLike(Protocol):
    """A committed offset as confluent-kafka's ``TopicPartition`` carries it."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def leader_epoch(self) -> int | None: ...


def _partitions(
    assignment: Mapping[uuid.UUID, Iterable[int]], names: Mapping[uuid.UUID, str]
) -> tuple[AssignedPartition, ...]:
    return tuple(
        sorted(
            AssignedPartition(names.get(topic_id, str(topic_id)), partition)
            for topic_id, partitions in assignment.items()
            for partition in partitions
        )
    )


def share_group_description(
    group: DescribedShareGroup, offsets: Sequence[SharePartitionOffset]
) -> GroupDescription:
    """A share group from ShareGroupDescribe and DescribeShareGroupOffsets (members have no
    instance id and no target assignment: the broker reports none)."""
    members = tuple(
        MemberView(
            member_id=member.member_id,
            instance_id=None,
            client_id=member.client_id,
            host=member.client_host,
            rack=member.rack_id,
            member_epoch=member.member_epoch,
            assignment=_partitions(member.assignment, member.topic_names_by_id),
            target_assignment=None,
        )
        for member in group.members
    )
    partitions = tuple(
        sorted(
            PartitionOffsets(
                topic=offset.topic,
                partition=offset.partition,
                start_offset=offset.start_offset,
                leader_epoch=offset.leader_epoch,
                lag=offset.lag,
            )
            for offset in offsets
        )
    )
    return GroupDescription(
        group=group.group_id,
        type=SHARE,
        state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor=group.assignor_name,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
        partitions=partitions,
    )


def consumer_group_description(
    group: DescribedGroup, committed: Sequence[CommittedOffsetLike]
) -> GroupDescription:
    """A KIP-848 consumer group from ConsumerGroupDescribe and its committed offsets."""
    members = tuple(
        MemberView(
            member_id=member.member_id,
            instance_id=member.instance_id,
            client_id=member.client_id,
            host=member.client_host,
            rack=member.rack_id,
            member_epoch=member.member_epoch,
            assignment=_partitions(member.assignment, member.topic_names_by_id),
            target_assignment=_partitions(member.target_assignment, member.topic_names_by_id),
        )
        for member in group.members
    )
    return GroupDescription(
        group=group.group_id,
        type=CONSUMER,
        state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor=group.assignor_name,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
        partitions=committed_partitions(members, committed),
    )


class ClassicMemberLike(Protocol):
    """A member as confluent-kafka's ``MemberDescription`` carries it."""

    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None

    @property
    def assignment(self) -> Any: ...


def classic_group_description(
    group_id: str,
    state: str,
    members: Sequence[ClassicMemberLike],
    committed: Sequence[CommittedOffsetLike],
    *,
    assignor: str | None,
) -> GroupDescription:
    """A classic group from confluent-kafka's ``describe_consumer_groups`` (DescribeGroups) and
    its committed offsets; ``state`` as ListGroups spells it. Classic groups have no epochs."""
    views = tuple(
        MemberView(
            member_id=member.member_id,
            instance_id=member.group_instance_id,
            client_id=member.client_id,
            host=member.host,
            rack=None,
            member_epoch=None,
            assignment=tuple(
                sorted(
                    AssignedPartition(tp.topic, tp.partition)
                    for tp in member.assignment.topic_partitions
                )
            ),
            target_assignment=None,
        )
        for member in members
    )
    return GroupDescription(
        group=group_id,
        type=CLASSIC,
        state=state,
        group_epoch=None,
        assignment_epoch=None,
        assignor=assignor or None,
        members=tuple(sorted(views, key=lambda m: m.member_id)),
        partitions=committed_partitions(views, committed),
    )


def committed_partitions(
    members: Iterable[MemberView], committed: Iterable[CommittedOffsetLike]
) -> tuple[PartitionOffsets, ...]:
    """One row per partition the group has committed or has assigned (committed offset None)."""
    rows: dict[tuple[str, int], PartitionOffsets] = {}
    for member in members:
        for assigned in member.assignment:
            key = (assigned.topic, assigned.partition)
            rows[key] = PartitionOffsets(assigned.topic, assigned.partition)
    for entry in committed:
        if entry.offset == _NO_OFFSET:
            continue
        rows[(entry.topic, entry.partition)] = PartitionOffsets(
            topic=entry.topic,
            partition=entry.partition,
            committed_offset=entry.offset,
            leader_epoch=entry.leader_epoch,
        )
    return tuple(sorted(rows.values()))


def with_lag(
    description: GroupDescription, end_offsets: Mapping[tuple[str, int], int]
) -> GroupDescription:
    """``description`` with the lag of each committed partition: ``end_offsets[(topic,
    partition)]`` minus the committed offset (never below 0; a partition without a commit or
    without an end offset keeps ``lag`` None). Share groups come with the broker's lag as is."""
    if description.type == SHARE:
        return description
    rows = []
    for row in description.partitions:
        end = end_offsets.get((row.topic, row.partition))
        if row.committed_offset is not None and end is not None and end >= 0:
            row = replace(row, lag=max(0, end - row.committed_offset))
        rows.append(row)
    return replace(description, partitions=tuple(rows))
