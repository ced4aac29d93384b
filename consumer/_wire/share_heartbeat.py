"""ShareGroupHeartbeat (key 76): the KIP-932 share group member heartbeat.

v1 is the only version (v0 was early access in Apache Kafka 4.0 and was removed in 4.1). The
request takes any object shaped like :class:`ShareHeartbeatContent` (the share core's
``ShareHeartbeatRequest`` is passed as it is); the response becomes a
:class:`ShareHeartbeatResult` whose fields map one to one onto the share core's
``ShareHeartbeatSucceeded`` / ``ShareHeartbeatFailed`` inputs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from kio.schema.share_group_heartbeat import v1
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32
from kio.static.protocol import ResponsePayload

from consumer.errors import BrokerError, ProtocolError, error_or_none

from ._by_version import by_version
from ._units import ms_from_timedelta

__all__ = [
    "ShareGroupHeartbeatRequest",
    "ShareHeartbeatContent",
    "ShareHeartbeatResult",
    "build_share_heartbeat_request",
    "parse_share_heartbeat_response",
]

ShareGroupHeartbeatRequest = v1.ShareGroupHeartbeatRequest
_REQUEST_TYPES: Final[Mapping[int, Callable[..., ShareGroupHeartbeatRequest]]] = {
    1: v1.ShareGroupHeartbeatRequest,
}


class ShareHeartbeatContent(Protocol):
    """What one share heartbeat carries; ``None`` means "unchanged since the last heartbeat"."""

    @property
    def group_id(self) -> str: ...
    @property
    def member_id(self) -> str: ...
    @property
    def member_epoch(self) -> int: ...
    @property
    def rack_id(self) -> str | None: ...
    @property
    def subscribed_topic_names(self) -> Sequence[str] | None: ...


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    """A parsed share heartbeat response.

    ``assignment`` is None when the broker left it out (no change); otherwise it maps topic id
    to the partitions the member is assigned now.
    """

    error: BrokerError | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Mapping[uuid.UUID, frozenset[int]] | None
    throttle_time_ms: int = 0


def build_share_heartbeat_request(
    content: ShareHeartbeatContent, version: int = 1
) -> ShareGroupHeartbeatRequest:
    """The ShareGroupHeartbeat request carrying ``content`` at ``version`` (only 1 exists).

    Raises:
        ValueError: an unknown version.
    """
    make_request = by_version("ShareGroupHeartbeat", version, _REQUEST_TYPES)
    names = content.subscribed_topic_names
    return make_request(
        group_id=GroupId(content.group_id),
        member_id=content.member_id,
        member_epoch=i32(content.member_epoch),
        rack_id=content.rack_id,
        subscribed_topic_names=None if names is None else tuple(TopicName(n) for n in names),
    )


def parse_share_heartbeat_response(response: ResponsePayload) -> ShareHeartbeatResult:
    """The typed result of a ShareGroupHeartbeat response (errors are returned, not raised).

    Raises:
        ProtocolError: ``response`` is not a ShareGroupHeartbeat response, or its assignment
            names a topic without an id.
    """
    if not isinstance(response, v1.ShareGroupHeartbeatResponse):
        raise ProtocolError(
            f"expected a ShareGroupHeartbeat response, got {type(response).__name__}"
        )
    assignment: dict[uuid.UUID, frozenset[int]] | None = None
    if response.assignment is not None:
        assignment = {}
        for entry in response.assignment.topic_partitions:
            if entry.topic_id is None:
                raise ProtocolError("share heartbeat assignment contains a topic without an id")
            assignment[entry.topic_id] = assignment.get(entry.topic_id, frozenset()) | frozenset(
                int(p) for p in entry.partitions
            )
    return ShareHeartbeatResult(
        error=error_or_none(response.error_code, response.error_message),
        member_id=response.member_id,
        member_epoch=int(response.member_epoch),
        heartbeat_interval_ms=ms_from_timedelta(response.heartbeat_interval),
        assignment=assignment,
        throttle_time_ms=ms_from_timedelta(response.throttle_time),
    )
