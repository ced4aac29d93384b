"""ConsumerGroupHeartbeat (key 68): the KIP-848 member heartbeat.

v1 is the version in use (Apache Kafka 4.0+); v0 is a fallback that cannot carry a
subscription regex.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, TypeAlias

from kio.schema.consumer_group_heartbeat import v0, v1
from kio.schema.consumer_group_heartbeat.v0 import request as request_v0
from kio.schema.consumer_group_heartbeat.v1 import request as request_v1
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32
from kio.static.protocol import ResponsePayload

from consumer.errors import BrokerError, ProtocolError, UnsupportedBrokerError, error_or_none

from ._by_version import by_version
from ._units import i32_timedelta_from_ms, ms_from_timedelta

__all__ = [
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "HeartbeatContent",
    "HeartbeatRequestBuilder",
    "HeartbeatResult",
    "OwnedTopicPartitions",
    "build_heartbeat_request",
    "parse_heartbeat_response",
]

ConsumerGroupHeartbeatRequest: TypeAlias = (
    v0.ConsumerGroupHeartbeatRequest | v1.ConsumerGroupHeartbeatRequest
)
ConsumerGroupHeartbeatResponse: TypeAlias = (
    v0.ConsumerGroupHeartbeatResponse | v1.ConsumerGroupHeartbeatResponse
)
_RESPONSE_CLASSES: Final = (v0.ConsumerGroupHeartbeatResponse, v1.ConsumerGroupHeartbeatResponse)
#: Per version: the request class and its owned-partitions entry class.
_REQUEST_TYPES: Final[
    Mapping[int, tuple[Callable[..., ConsumerGroupHeartbeatRequest], Callable[..., object]]]
] = {
    0: (v0.ConsumerGroupHeartbeatRequest, request_v0.TopicPartitions),
    1: (v1.ConsumerGroupHeartbeatRequest, request_v1.TopicPartitions),
}
#: The first version that can carry a subscription regex.
_FIRST_REGEX_VERSION: Final = 1


class OwnedTopicPartitions(Protocol):
    """One entry of a heartbeat's owned partitions: a topic id and partition numbers."""

    @property
    def topic_id(self) -> uuid.UUID: ...
    @property
    def partitions(self) -> Collection[int]: ...


class HeartbeatContent(Protocol):
    """What one heartbeat carries; ``None`` (-1 for the timeout) means "unchanged".

    Any object with these attributes will do: the member core's ``HeartbeatRequest`` is passed
    as it is. ``topic_partitions`` lists the owned partitions by topic id; a join (epoch 0)
    sends an empty sequence.
    """

    @property
    def group_id(self) -> str: ...
    @property
    def member_id(self) -> str: ...
    @property
    def member_epoch(self) -> int: ...
    @property
    def instance_id(self) -> str | None: ...
    @property
    def rack_id(self) -> str | None: ...
    @property
    def rebalance_timeout_ms(self) -> int: ...
    @property
    def subscribed_topic_names(self) -> Sequence[str] | None: ...
    @property
    def subscribed_topic_regex(self) -> str | None: ...
    @property
    def server_assignor(self) -> str | None: ...
    @property
    def topic_partitions(self) -> Sequence[OwnedTopicPartitions] | None: ...


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """A parsed heartbeat response.

    ``assignment`` is None when the broker left it out (no change); otherwise it maps topic id
    to the partitions the member may own now.
    """

    error: BrokerError | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Mapping[uuid.UUID, frozenset[int]] | None
    throttle_time_ms: int = 0


def build_heartbeat_request(
    content: HeartbeatContent, version: int
) -> ConsumerGroupHeartbeatRequest:
    """The ConsumerGroupHeartbeat request carrying ``content`` at ``version`` (0 or 1).

    Raises:
        UnsupportedBrokerError: a subscription regex at v0, which cannot carry it.
        ValueError: an unknown version.
    """
    make_request, make_topic = by_version("ConsumerGroupHeartbeat", version, _REQUEST_TYPES)
    version_fields: dict[str, object] = {}
    if version >= _FIRST_REGEX_VERSION:
        version_fields["subscribed_topic_regex"] = content.subscribed_topic_regex
    elif content.subscribed_topic_regex is not None:
        raise UnsupportedBrokerError(
            "subscribing with a regular expression needs ConsumerGroupHeartbeat v1 "
            "(Apache Kafka 4.0+); this broker only offers v0"
        )
    names = content.subscribed_topic_names
    owned = content.topic_partitions
    return make_request(
        group_id=GroupId(content.group_id),
        member_id=content.member_id,
        member_epoch=i32(content.member_epoch),
        instance_id=content.instance_id,
        rack_id=content.rack_id,
        rebalance_timeout=i32_timedelta_from_ms(content.rebalance_timeout_ms),
        subscribed_topic_names=None if names is None else tuple(TopicName(n) for n in names),
        server_assignor=content.server_assignor,
        topic_partitions=None
        if owned is None
        else tuple(
            make_topic(topic_id=entry.topic_id, partitions=_sorted_i32(entry.partitions))
            for entry in owned
        ),
        **version_fields,
    )


class HeartbeatRequestBuilder:
    """:func:`build_heartbeat_request` that returns the previous request again for equal
    content at the same version.

    An idle member's heartbeats carry the same fields every time (only what changed is sent),
    so the kio request is built once and reused; kio entities are immutable, and so must
    ``content`` be (the member's ``HeartbeatRequest`` is a frozen dataclass).
    """

    __slots__ = ("_content", "_request", "_version")

    def __init__(self) -> None:
        self._content: HeartbeatContent | None = None
        self._version = -1
        self._request: ConsumerGroupHeartbeatRequest | None = None

    def build(self, content: HeartbeatContent, version: int) -> ConsumerGroupHeartbeatRequest:
        """The request carrying ``content`` at ``version`` (raises as
        :func:`build_heartbeat_request` does)."""
        request = self._request
        if request is not None and version == self._version and content == self._content:
            return request
        request = build_heartbeat_request(content, version)
        self._content, self._version, self._request = content, version, request
        return request


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
