"""ConsumerGroupDescribe (key 69): members, epochs and assignments of consumer groups."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from kio.schema.consumer_group_describe import v0, v1
from kio.schema.consumer_group_describe.v0 import response as response_v0
from kio.schema.consumer_group_describe.v1 import response as response_v1
from kio.schema.types import GroupId
from kio.static.protocol import ResponsePayload

from consumer.errors import BrokerError, ProtocolError, error_or_none

from ._by_version import by_version

__all__ = [
    "ConsumerGroupDescribeRequest",
    "DescribedGroup",
    "DescribedMember",
    "build_consumer_group_describe_request",
    "parse_consumer_group_describe_response",
]

ConsumerGroupDescribeRequest: TypeAlias = (
    v0.ConsumerGroupDescribeRequest | v1.ConsumerGroupDescribeRequest
)
_REQUEST_TYPES: Final[Mapping[int, Callable[..., ConsumerGroupDescribeRequest]]] = {
    0: v0.ConsumerGroupDescribeRequest,
    1: v1.ConsumerGroupDescribeRequest,
}
_RESPONSE_CLASSES: Final = (v0.ConsumerGroupDescribeResponse, v1.ConsumerGroupDescribeResponse)


@dataclass(frozen=True, slots=True)
class DescribedMember:
    """One member as the coordinator sees it. Assignments map topic id -> partitions."""

    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: Mapping[uuid.UUID, frozenset[int]]
    target_assignment: Mapping[uuid.UUID, frozenset[int]]
    topic_names_by_id: Mapping[uuid.UUID, str]


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """One described group; ``error`` is set (and the rest empty) when the lookup failed."""

    group_id: str
    error: BrokerError | None
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[DescribedMember, ...]

    def member(self, member_id: str) -> DescribedMember | None:
        """The member with this id, if it is in the group."""
        return next((m for m in self.members if m.member_id == member_id), None)


def build_consumer_group_describe_request(
    version: int, group_ids: Sequence[str], *, include_authorized_operations: bool = False
) -> ConsumerGroupDescribeRequest:
    """A ConsumerGroupDescribe request for ``group_ids`` at ``version`` (0 or 1)."""
    ids = tuple(GroupId(group_id) for group_id in group_ids)
    make_request = by_version("ConsumerGroupDescribe", version, _REQUEST_TYPES)
    return make_request(group_ids=ids, include_authorized_operations=include_authorized_operations)


def parse_consumer_group_describe_response(response: ResponsePayload) -> list[DescribedGroup]:
    """The described groups, each with its own error (errors returned, not raised).

    Raises:
        ProtocolError: ``response`` is not a ConsumerGroupDescribe response.
    """
    if not isinstance(response, _RESPONSE_CLASSES):
        raise ProtocolError(
            f"expected a ConsumerGroupDescribe response, got {type(response).__name__}"
        )
    groups: list[DescribedGroup] = []
    for group in response.groups:
        members = []
        for member in group.members:
            names: dict[uuid.UUID, str] = {}
            members.append(
                DescribedMember(
                    member_id=member.member_id,
                    member_epoch=int(member.member_epoch),
                    instance_id=member.instance_id,
                    rack_id=member.rack_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    subscribed_topic_names=tuple(member.subscribed_topic_names),
                    subscribed_topic_regex=member.subscribed_topic_regex,
                    assignment=_assignment(member.assignment.topic_partitions, names),
                    target_assignment=_assignment(member.target_assignment.topic_partitions, names),
                    topic_names_by_id=names,
                )
            )
        groups.append(
            DescribedGroup(
                group_id=group.group_id,
                error=error_or_none(group.error_code, group.error_message),
                state=group.group_state,
                group_epoch=int(group.group_epoch),
                assignment_epoch=int(group.assignment_epoch),
                assignor_name=group.assignor_name,
                members=tuple(members),
            )
        )
    return groups


def _assignment(
    topics: Sequence[response_v0.TopicPartitions | response_v1.TopicPartitions],
    names: dict[uuid.UUID, str],
) -> dict[uuid.UUID, frozenset[int]]:
    result: dict[uuid.UUID, frozenset[int]] = {}
    for topic in topics:
        if topic.topic_id is None:
            raise ProtocolError("described assignment contains a topic without an id")
        names[topic.topic_id] = topic.topic_name
        result[topic.topic_id] = frozenset(int(p) for p in topic.partitions)
    return result
