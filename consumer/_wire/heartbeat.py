"""ConsumerGroupHeartbeat (key 68): the KIP-848 member heartbeat.

v1 is the version in use (Apache Kafka 4.0+); v0 is a fallback that cannot carry a
subscription regex.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from kio.schema.consumer_group_heartbeat import v0, v1
from kio.schema.consumer_group_heartbeat.v0 import request as request_v0
from kio.schema.consumer_group_heartbeat.v1 import request as request_v1
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32
from kio.static.protocol import ResponsePayload

from consumer.errors import KafkaError, ProtocolError, UnsupportedBrokerError, error_or_none

from ._units import i32_timedelta_from_ms, ms_from_timedelta

__all__ = [
    "LEAVE_GROUP_EPOCH",
    "LEAVE_GROUP_STATIC_EPOCH",
    "HeartbeatFields",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "HeartbeatResult",
    "build_heartbeat_request",
    "parse_heartbeat_response",
]

HeartbeatRequest: TypeAlias = v0.ConsumerGroupHeartbeatRequest | v1.ConsumerGroupHeartbeatRequest
HeartbeatResponse: TypeAlias = v0.ConsumerGroupHeartbeatResponse | v1.ConsumerGroupHeartbeatResponse
_RESPONSE_CLASSES: Final = (v0.ConsumerGroupHeartbeatResponse, v1.ConsumerGroupHeartbeatResponse)

LEAVE_GROUP_EPOCH: Final = -1
"""Member epoch that leaves the group."""
LEAVE_GROUP_STATIC_EPOCH: Final = -2
"""Member epoch of a static member leaving temporarily."""


@dataclass(frozen=True, slots=True)
class HeartbeatFields:
    """What one heartbeat carries. ``None`` means "unchanged since the last heartbeat".

    ``owned_partitions`` maps topic id -> partition numbers; a join (epoch 0) sends an empty
    mapping.
    """

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned_partitions: Mapping[uuid.UUID, Collection[int]] | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """A parsed heartbeat response.

    ``assignment`` is None when the broker left it out (no change); otherwise it maps topic id
    to the partitions the member may own now.
    """

    error: KafkaError | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Mapping[uuid.UUID, frozenset[int]] | None
    throttle_time_ms: int = 0


def build_heartbeat_request(fields: HeartbeatFields, version: int) -> HeartbeatRequest:
    """The ConsumerGroupHeartbeat request for ``fields`` at ``version`` (0 or 1).

    Raises:
        UnsupportedBrokerError: a subscription regex at v0, which cannot carry it.
        ValueError: an unknown version.
    """
    names = (
        None
        if fields.subscribed_topic_names is None
        else tuple(TopicName(name) for name in fields.subscribed_topic_names)
    )
    rebalance_timeout = i32_timedelta_from_ms(fields.rebalance_timeout_ms)
    match version:
        case 1:
            return v1.ConsumerGroupHeartbeatRequest(
                group_id=GroupId(fields.group_id),
                member_id=fields.member_id,
                member_epoch=i32(fields.member_epoch),
                instance_id=fields.instance_id,
                rack_id=fields.rack_id,
                rebalance_timeout=rebalance_timeout,
                subscribed_topic_names=names,
                subscribed_topic_regex=fields.subscribed_topic_regex,
                server_assignor=fields.server_assignor,
                topic_partitions=None
                if fields.owned_partitions is None
                else tuple(
                    request_v1.TopicPartitions(
                        topic_id=topic_id, partitions=_sorted_i32(partitions)
                    )
                    for topic_id, partitions in fields.owned_partitions.items()
                ),
            )
        case 0:
            if fields.subscribed_topic_regex is not None:
                raise UnsupportedBrokerError(
                    "subscribing with a regular expression needs ConsumerGroupHeartbeat v1 "
                    "(Apache Kafka 4.0+); this broker only offers v0"
                )
            return v0.ConsumerGroupHeartbeatRequest(
                group_id=GroupId(fields.group_id),
                member_id=fields.member_id,
                member_epoch=i32(fields.member_epoch),
                instance_id=fields.instance_id,
                rack_id=fields.rack_id,
                rebalance_timeout=rebalance_timeout,
                subscribed_topic_names=names,
                server_assignor=fields.server_assignor,
                topic_partitions=None
                if fields.owned_partitions is None
                else tuple(
                    request_v0.TopicPartitions(
                        topic_id=topic_id, partitions=_sorted_i32(partitions)
                    )
                    for topic_id, partitions in fields.owned_partitions.items()
                ),
            )
    raise ValueError(f"ConsumerGroupHeartbeat v{version} is not supported (v0-v1)")


def _sorted_i32(partitions: Collection[int]) -> tuple[i32, ...]:
    return tuple(i32(partition) for partition in sorted(partitions))


def parse_heartbeat_response(response: ResponsePayload) -> HeartbeatResult:
    """The typed result of a ConsumerGroupHeartbeat response (errors are returned, not raised).

    Raises:
        ProtocolError: ``response`` is not a ConsumerGroupHeartbeat response, or its assignment
            names a topic without an id.
    """
    if not isinstance(response, _RESPONSE_CLASSES):
        raise ProtocolError(
            f"expected a ConsumerGroupHeartbeat response, got {type(response).__name__}"
        )
    assignment: dict[uuid.UUID, frozenset[int]] | None = None
    if response.assignment is not None:
        assignment = {}
        for entry in response.assignment.topic_partitions:
            if entry.topic_id is None:
                raise ProtocolError("heartbeat assignment contains a topic without an id")
            assignment[entry.topic_id] = frozenset(int(p) for p in entry.partitions)
    return HeartbeatResult(
        error=error_or_none(response.error_code, response.error_message),
        member_id=response.member_id,
        member_epoch=int(response.member_epoch),
        heartbeat_interval_ms=ms_from_timedelta(response.heartbeat_interval),
        assignment=assignment,
        throttle_time_ms=ms_from_timedelta(response.throttle_time),
    )
