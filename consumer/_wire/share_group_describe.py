"""ShareGroupDescribe (key 77): epochs, members and assignments of share groups (KIP-932).

v1 is the only version a broker serves (v0 was early access in Apache Kafka 4.0). Share group
members have no instance id and the response carries no target assignment.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kio.schema.share_group_describe import v1
from kio.schema.share_group_describe.v1 import response as response_v1
from kio.schema.types import GroupId
from kio.static.protocol import ResponsePayload

from consumer.errors import BrokerError, ProtocolError, error_or_none

from ._by_version import by_version

__all__ = [
    "DescribedShareGroup",
    "DescribedShareMember",
    "ShareGroupDescribeRequest",
    "build_share_group_describe_request",
    "parse_share_group_describe_response",
]

ShareGroupDescribeRequest = v1.ShareGroupDescribeRequest
_REQUEST_TYPES: Final[Mapping[int, Callable[..., ShareGroupDescribeRequest]]] = {
    1: v1.ShareGroupDescribeRequest,
}


@dataclass(frozen=True, slots=True)
class DescribedShareMember:
    """One share-group member as the coordinator sees it. ``assignment`` maps topic id ->
    partitions; ``topic_names_by_id`` names those topics."""

    member_id: str
    member_epoch: int
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: Mapping[uuid.UUID, frozenset[int]]
    topic_names_by_id: Mapping[uuid.UUID, str]


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    """One described share group; ``error`` is set (and the rest empty) when the lookup failed
    (GROUP_ID_NOT_FOUND also for a group of another type)."""

    group_id: str
    error: BrokerError | None
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[DescribedShareMember, ...]


def build_share_group_describe_request(
    version: int, group_ids: Sequence[str], *, include_authorized_operations: bool = False
) -> ShareGroupDescribeRequest:
    """A ShareGroupDescribe request for ``group_ids`` at ``version`` (1)."""
    make_request = by_version("ShareGroupDescribe", version, _REQUEST_TYPES)
    return make_request(
        group_ids=tuple(GroupId(group_id) for group_id in group_ids),
        include_authorized_operations=include_authorized_operations,
    )


def parse_share_group_describe_response(response: ResponsePayload) -> list[DescribedShareGroup]:
    """The described groups, each with its own error (errors returned, not raised).

    Raises:
        ProtocolError: ``response`` is not a ShareGroupDescribe response, or names an assigned
            topic without its id.
    """
    if not isinstance(response, v1.ShareGroupDescribeResponse):
        raise ProtocolError(
            f"expected a ShareGroupDescribe response, got {type(response).__name__}"
        )
    return [
        DescribedShareGroup(
            group_id=group.group_id,
            error=error_or_none(group.error_code, group.error_message),
            state=group.group_state,
            group_epoch=int(group.group_epoch),
            assignment_epoch=int(group.assignment_epoch),
            assignor_name=group.assignor_name,
            members=tuple(_member(member) for member in group.members or ()),
        )
        for group in response.groups or ()  # kio reads a null array as None
    ]


def _member(member: response_v1.Member) -> DescribedShareMember:
    names: dict[uuid.UUID, str] = {}
    assignment: dict[uuid.UUID, frozenset[int]] = {}
    for topic in member.assignment.topic_partitions or ():
        if topic.topic_id is None:
            raise ProtocolError("described share assignment contains a topic without an id")
        names[topic.topic_id] = topic.topic_name
        assignment[topic.topic_id] = frozenset(int(p) for p in topic.partitions or ())
    return DescribedShareMember(
        member_id=member.member_id,
        member_epoch=int(member.member_epoch),
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(member.subscribed_topic_names or ()),
        assignment=assignment,
        topic_names_by_id=names,
    )
