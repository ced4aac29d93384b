"""DescribeShareGroupOffsets (key 90): per-partition share-group offsets (KIP-932, KIP-1226).

For each share-partition the group has state for, the coordinator reports the share-partition
start offset (SPSO: every offset below it is finished) and the leader epoch; v1 (Apache Kafka
4.2+) adds the lag (KIP-1226), -1 when unknown. Nothing else is reported: in particular no count
of in-flight (acquired, unacknowledged) records.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from kio.schema.describe_share_group_offsets import v0, v1
from kio.schema.describe_share_group_offsets.v0 import request as request_v0
from kio.schema.describe_share_group_offsets.v1 import request as request_v1
from kio.schema.types import GroupId
from kio.static.protocol import ResponsePayload

from consumer.errors import BrokerError, ProtocolError, error_or_none

from ._by_version import by_version

__all__ = [
    "DescribeShareGroupOffsetsRequest",
    "ShareGroupOffsets",
    "SharePartitionOffset",
    "build_describe_share_group_offsets_request",
    "parse_describe_share_group_offsets_response",
]

DescribeShareGroupOffsetsRequest: TypeAlias = (
    v0.DescribeShareGroupOffsetsRequest | v1.DescribeShareGroupOffsetsRequest
)
_REQUEST_TYPES: Final[Mapping[int, Callable[..., DescribeShareGroupOffsetsRequest]]] = {
    0: v0.DescribeShareGroupOffsetsRequest,
    1: v1.DescribeShareGroupOffsetsRequest,
}
_GROUP_TYPES: Final[Mapping[int, Callable[..., object]]] = {
    0: request_v0.DescribeShareGroupOffsetsRequestGroup,
    1: request_v1.DescribeShareGroupOffsetsRequestGroup,
}
_RESPONSE_CLASSES: Final = (
    v0.DescribeShareGroupOffsetsResponse,
    v1.DescribeShareGroupOffsetsResponse,
)
#: What v1 reports when the broker could not compute the lag (and what v0 implies).
_LAG_UNKNOWN: Final = -1


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    """One share-partition: start offset, leader epoch and lag (None: not reported, v0 or -1),
    or the error the coordinator gave for it."""

    topic: str
    topic_id: uuid.UUID | None
    partition: int
    start_offset: int
    leader_epoch: int
    lag: int | None
    error: BrokerError | None


@dataclass(frozen=True, slots=True)
class ShareGroupOffsets:
    """The offsets of one share group, or the group-level error."""

    group_id: str
    error: BrokerError | None
    partitions: tuple[SharePartitionOffset, ...]


def build_describe_share_group_offsets_request(
    version: int, group_ids: Sequence[str]
) -> DescribeShareGroupOffsetsRequest:
    """A request for every topic-partition of each group in ``group_ids`` (v0 or v1)."""
    make_request = by_version("DescribeShareGroupOffsets", version, _REQUEST_TYPES)
    make_group = _GROUP_TYPES[version]
    groups = tuple(make_group(group_id=GroupId(group_id), topics=None) for group_id in group_ids)
    return make_request(groups=groups)


def parse_describe_share_group_offsets_response(
    response: ResponsePayload,
) -> list[ShareGroupOffsets]:
    """The offsets per group, each with its own errors (returned, not raised).

    Raises:
        ProtocolError: ``response`` is not a DescribeShareGroupOffsets response.
    """
    if not isinstance(response, _RESPONSE_CLASSES):
        raise ProtocolError(
            f"expected a DescribeShareGroupOffsets response, got {type(response).__name__}"
        )
    groups: list[ShareGroupOffsets] = []
    # kio decodes a null array as None: read it as empty.
    for group in response.groups or ():
        partitions = []
        for topic in group.topics or ():
            for partition in topic.partitions or ():
                lag = int(getattr(partition, "lag", _LAG_UNKNOWN))
                partitions.append(
                    SharePartitionOffset(
                        topic=topic.topic_name,
                        topic_id=topic.topic_id,
                        partition=int(partition.partition_index),
                        start_offset=int(partition.start_offset),
                        leader_epoch=int(partition.leader_epoch),
                        lag=None if lag == _LAG_UNKNOWN else lag,
                        error=error_or_none(partition.error_code, partition.error_message),
                    )
                )
        groups.append(
            ShareGroupOffsets(
                group_id=group.group_id,
                error=error_or_none(group.error_code, group.error_message),
                partitions=tuple(partitions),
            )
        )
    return groups
