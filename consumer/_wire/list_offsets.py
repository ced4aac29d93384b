"""ListOffsets (key 2): a partition's earliest or latest offset, asked of its leader.

The member resolves the reset policy's start offsets with it (``auto.offset.reset`` earliest or
latest) before it hands new partitions to the data plane, as Java's consumer resets positions with
ListOffsets. v6-v10 are built (flexible versions; v10 adds the tiered-storage ``timeout``); every
Apache Kafka 4.x broker serves them. ``replica_id`` is always -1 (a consumer, not a follower).
With ``read_committed`` the latest offset is the last stable offset, as librdkafka reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias

from kio.schema.list_offsets.v6 import request as v6
from kio.schema.list_offsets.v6 import response as response_v6
from kio.schema.list_offsets.v7 import request as v7
from kio.schema.list_offsets.v7 import response as response_v7
from kio.schema.list_offsets.v8 import request as v8
from kio.schema.list_offsets.v8 import response as response_v8
from kio.schema.list_offsets.v9 import request as v9
from kio.schema.list_offsets.v9 import response as response_v9
from kio.schema.list_offsets.v10 import request as v10
from kio.schema.list_offsets.v10 import response as response_v10
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64
from kio.static.protocol import ResponsePayload

from consumer.errors import BrokerError, ProtocolError, error_or_none

from ._by_version import by_version
from ._units import i32_timedelta_from_ms

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "ListOffsetsRequest",
    "ListedOffset",
    "build_list_offsets_request",
    "parse_list_offsets_response",
]

#: The timestamp that asks for the log start offset.
EARLIEST_TIMESTAMP: Final = -2
#: The timestamp that asks for the end offset (the last stable offset with read_committed).
LATEST_TIMESTAMP: Final = -1
#: ``replica_id`` of a consumer.
_CONSUMER_REPLICA_ID: Final = -1
#: Isolation levels as the protocol numbers them.
_READ_UNCOMMITTED: Final = 0
_READ_COMMITTED: Final = 1
#: First version with a ``timeout`` field (waits for remote storage; unused by -2 and -1).
_FIRST_TIMEOUT_VERSION: Final = 10

ListOffsetsRequest: TypeAlias = (
    v6.ListOffsetsRequest
    | v7.ListOffsetsRequest
    | v8.ListOffsetsRequest
    | v9.ListOffsetsRequest
    | v10.ListOffsetsRequest
)
_Classes: TypeAlias = tuple[
    Callable[..., ListOffsetsRequest], Callable[..., object], Callable[..., object]
]
_REQUEST_CLASSES: Final[Mapping[int, _Classes]] = {
    number: (module.ListOffsetsRequest, module.ListOffsetsTopic, module.ListOffsetsPartition)
    for number, module in ((6, v6), (7, v7), (8, v8), (9, v9), (10, v10))
}
_RESPONSE_TYPES: Final = (
    response_v6.ListOffsetsResponse,
    response_v7.ListOffsetsResponse,
    response_v8.ListOffsetsResponse,
    response_v9.ListOffsetsResponse,
    response_v10.ListOffsetsResponse,
)


@dataclass(frozen=True, slots=True)
class ListedOffset:
    """One partition's answer: the offset (-1 when the broker found none), or its error."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    error: BrokerError | None


def build_list_offsets_request(
    version: int,
    partitions: Iterable[tuple[str, int]],
    *,
    timestamp: int,
    read_committed: bool,
    timeout_ms: int = 0,
) -> ListOffsetsRequest:
    """A ListOffsets request asking every ``(topic, partition)`` for ``timestamp``.

    ``timestamp`` is :data:`EARLIEST_TIMESTAMP` or :data:`LATEST_TIMESTAMP` (or a time in ms).
    ``timeout_ms`` is sent from v10 on only.

    Raises:
        ValueError: an unsupported version.
    """
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    make_request, make_topic, make_partition = by_version("ListOffsets", version, _REQUEST_CLASSES)
    extra: dict[str, object] = {}
    if version >= _FIRST_TIMEOUT_VERSION:
        extra["timeout"] = i32_timedelta_from_ms(timeout_ms)
    return make_request(
        replica_id=BrokerId(_CONSUMER_REPLICA_ID),
        isolation_level=i8(_READ_COMMITTED if read_committed else _READ_UNCOMMITTED),
        topics=tuple(
            make_topic(
                name=TopicName(topic),
                partitions=tuple(
                    make_partition(partition_index=i32(index), timestamp=i64(timestamp))
                    for index in sorted(indexes)
                ),
            )
            for topic, indexes in sorted(by_topic.items())
        ),
        **extra,
    )


def parse_list_offsets_response(response: ResponsePayload) -> list[ListedOffset]:
    """Every partition's answer (errors are returned per partition, not raised).

    Raises:
        ProtocolError: ``response`` is not a ListOffsets v6-v10 response.
    """
    if not isinstance(response, _RESPONSE_TYPES):
        raise ProtocolError(
            f"expected a ListOffsets v6-v10 response, got {type(response).__name__}"
        )
    return [
        ListedOffset(
            topic=str(topic.name),
            partition=int(partition.partition_index),
            offset=int(partition.offset),
            leader_epoch=int(partition.leader_epoch),
            error=error_or_none(partition.error_code),
        )
        for topic in response.topics
        for partition in topic.partitions
    ]
