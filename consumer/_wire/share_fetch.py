"""ShareFetch (key 78): fetch acquired records from a share-partition leader (KIP-932).

v1 is stable KIP-932 (Apache Kafka 4.1+); v2 (4.2+) adds the acquire mode (KIP-1206) and RENEW
acknowledgements (KIP-1222). Both carry topic ids only, the member id and the share session epoch
(0 opens a session, -1 closes it), and may piggyback acknowledgements per partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeAlias

from kio.schema.share_fetch import v1, v2
from kio.schema.share_fetch.v1 import request as request_v1
from kio.schema.share_fetch.v2 import request as request_v2
from kio.schema.types import GroupId
from kio.static.primitive import i8, i32, i64
from kio.static.protocol import ResponsePayload

from consumer.errors import BrokerError, ProtocolError, error_or_none

from ._by_version import by_version
from ._units import i32_timedelta_from_ms, ms_from_timedelta
from .metadata import BrokerAddress
from .records import DecodedRecords, decode_record_batches

__all__ = [
    "ACKNOWLEDGE_TYPE_RENEW",
    "AcknowledgementBatchLike",
    "AcquiredRange",
    "LeaderHint",
    "ShareFetchPartition",
    "ShareFetchRequest",
    "ShareFetchResult",
    "build_share_fetch_request",
    "parse_share_fetch_response",
]

ShareFetchRequest: TypeAlias = v1.ShareFetchRequest | v2.ShareFetchRequest
_RESPONSE_CLASSES: Final = (v1.ShareFetchResponse, v2.ShareFetchResponse)
#: Per version: request, topic, partition, acknowledgement batch and forgotten-topic classes.
_REQUEST_TYPES: Final[Mapping[int, tuple[Callable[..., Any], ...]]] = {
    1: (
        v1.ShareFetchRequest,
        request_v1.FetchTopic,
        request_v1.FetchPartition,
        request_v1.AcknowledgementBatch,
        request_v1.ForgottenTopic,
    ),
    2: (
        v2.ShareFetchRequest,
        request_v2.FetchTopic,
        request_v2.FetchPartition,
        request_v2.AcknowledgementBatch,
        request_v2.ForgottenTopic,
    ),
}
#: The acknowledge type byte of RENEW, which needs v2 and ``is_renew_ack``.
ACKNOWLEDGE_TYPE_RENEW: Final = 4
_FIRST_V2_FEATURES: Final = 2
_MAX_ACKNOWLEDGE_TYPE: Final = 4


class AcknowledgementBatchLike(Protocol):
    """An acknowledgement range: one type for all of it, or one type per offset.

    The share core's ``AcknowledgementBatch`` is one; any object with these attributes will do.
    """

    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def types(self) -> Sequence[int]: ...


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """Offsets ``first_offset..last_offset`` (inclusive) acquired with this delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class LeaderHint:
    """A partition's current leader as the broker knows it (-1: unknown)."""

    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class ShareFetchPartition:
    """One partition of a ShareFetch response.

    ``error`` is the fetch error, ``acknowledge_error`` the result of the acknowledgements that
    rode on the request for this partition (None: applied, or none were sent).
    """

    topic_id: uuid.UUID
    partition: int
    error: BrokerError | None
    acknowledge_error: BrokerError | None
    current_leader: LeaderHint | None
    records: DecodedRecords
    acquired: tuple[AcquiredRange, ...]


@dataclass(frozen=True, slots=True)
class ShareFetchResult:
    """A parsed ShareFetch response; ``node_endpoints`` lists leaders named in partition errors."""

    error: BrokerError | None
    acquisition_lock_timeout_ms: int
    partitions: tuple[ShareFetchPartition, ...]
    node_endpoints: Mapping[int, BrokerAddress] = field(default_factory=dict)
    throttle_time_ms: int = 0


def check_acknowledgement_batches(
    batches: Sequence[AcknowledgementBatchLike], version: int, is_renew_ack: bool, api: str
) -> None:
    """Reject batches the broker would refuse: bad ranges, bad types, RENEW where not allowed."""
    for batch in batches:
        span = batch.last_offset - batch.first_offset + 1
        if batch.first_offset < 0 or span < 1:
            raise ValueError(
                f"{api}: acknowledgement range {batch.first_offset}..{batch.last_offset} "
                "is empty or negative"
            )
        if len(batch.types) not in (1, span):
            raise ValueError(
                f"{api}: acknowledgement range {batch.first_offset}..{batch.last_offset} has "
                f"{len(batch.types)} types; it needs 1 or one per offset ({span})"
            )
        for kind in batch.types:
            if not 0 <= kind <= _MAX_ACKNOWLEDGE_TYPE:
                raise ValueError(
                    f"{api}: acknowledge type {kind} is not one of 0 (gap), 1 (accept), "
                    "2 (release), 3 (reject), 4 (renew)"
                )
            if kind == ACKNOWLEDGE_TYPE_RENEW and (
                version < _FIRST_V2_FEATURES or not is_renew_ack
            ):
                raise ValueError(
                    f"{api}: a RENEW acknowledgement needs v2 with is_renew_ack=True "
                    f"(this request is v{version}, is_renew_ack={is_renew_ack})"
                )


def build_share_fetch_request(
    version: int,
    *,
    group_id: str,
    member_id: str,
    share_session_epoch: int,
    max_wait_ms: int,
    min_bytes: int,
    max_records: int,
    batch_size: int,
    topics: Mapping[uuid.UUID, Mapping[int, Sequence[AcknowledgementBatchLike]]],
    forgotten: Mapping[uuid.UUID, Collection[int]] | None = None,
    max_bytes: int = 0x7FFFFFFF,
    acquire_mode: int = 0,
    is_renew_ack: bool = False,
) -> ShareFetchRequest:
    """The ShareFetch request at ``version`` (1 or 2).

    ``topics`` maps topic id -> partition -> acknowledgements to piggyback (empty: fetch only);
    ``forgotten`` lists partitions to drop from the session.

    Raises:
        ValueError: an unknown version, a v2-only feature at v1 (acquire mode 1, RENEW), or an
            acknowledgement range the broker would refuse.
    """
    make_request, make_topic, make_partition, make_batch, make_forgotten = by_version(
        "ShareFetch", version, _REQUEST_TYPES
    )
    version_fields: dict[str, object] = {}
    if version >= _FIRST_V2_FEATURES:
        version_fields = {"share_acquire_mode": i8(acquire_mode), "is_renew_ack": is_renew_ack}
    elif acquire_mode != 0 or is_renew_ack:
        raise ValueError(
            "ShareFetch v1 has no acquire mode or RENEW acknowledgements (they need v2, "
            f"Apache Kafka 4.2+); got acquire_mode={acquire_mode}, is_renew_ack={is_renew_ack}"
        )
    if acquire_mode not in (0, 1):
        raise ValueError(
            f"acquire_mode must be 0 (batch_optimized) or 1 (record_limit), got {acquire_mode}"
        )
    topic_entries = []
    for topic_id, partitions in topics.items():
        partition_entries = []
        for partition, batches in sorted(partitions.items()):
            check_acknowledgement_batches(batches, version, is_renew_ack, "ShareFetch")
            partition_entries.append(
                make_partition(
                    partition_index=i32(partition),
                    acknowledgement_batches=tuple(
                        make_batch(
                            first_offset=i64(batch.first_offset),
                            last_offset=i64(batch.last_offset),
                            acknowledge_types=tuple(i8(kind) for kind in batch.types),
                        )
                        for batch in batches
                    ),
                )
            )
        topic_entries.append(make_topic(topic_id=topic_id, partitions=tuple(partition_entries)))
    return make_request(  # type: ignore[no-any-return]
        group_id=GroupId(group_id),
        member_id=member_id,
        share_session_epoch=i32(share_session_epoch),
        max_wait=i32_timedelta_from_ms(max_wait_ms),
        min_bytes=i32(min_bytes),
        max_bytes=i32(max_bytes),
        max_records=i32(max_records),
        batch_size=i32(batch_size),
        topics=tuple(topic_entries),
        forgotten_topics_data=tuple(
            make_forgotten(topic_id=topic_id, partitions=tuple(i32(p) for p in sorted(numbers)))
            for topic_id, numbers in (forgotten or {}).items()
            if numbers
        ),
        **version_fields,
    )


def leader_hint(current_leader: Any) -> LeaderHint | None:
    """Our ``LeaderHint`` from a kio ``LeaderIdAndEpoch`` (None when the leader is unknown)."""
    leader_id = int(current_leader.leader_id)
    if leader_id < 0:
        return None
    return LeaderHint(leader_id, int(current_leader.leader_epoch))


def node_endpoints(entries: Sequence[Any]) -> dict[int, BrokerAddress]:
    """Node id -> address from a share response's ``node_endpoints``."""
    return {
        int(entry.node_id): BrokerAddress(
            int(entry.node_id), entry.host, int(entry.port), entry.rack
        )
        for entry in entries
    }


def parse_share_fetch_response(response: ResponsePayload) -> ShareFetchResult:
    """The typed result of a ShareFetch response (errors are returned, not raised).

    Raises:
        ProtocolError: ``response`` is not a ShareFetch response, or names a topic without id.
    """
    if not isinstance(response, _RESPONSE_CLASSES):
        raise ProtocolError(f"expected a ShareFetch response, got {type(response).__name__}")
    partitions: list[ShareFetchPartition] = []
    # kio decodes a null array as None even where the schema forbids null: treat it as empty.
    for topic in response.responses or ():
        if topic.topic_id is None:
            raise ProtocolError("ShareFetch response contains a topic without an id")
        for entry in topic.partitions or ():
            partitions.append(
                ShareFetchPartition(
                    topic_id=topic.topic_id,
                    partition=int(entry.partition_index),
                    error=error_or_none(entry.error_code, entry.error_message),
                    acknowledge_error=error_or_none(
                        int(entry.acknowledge_error_code), entry.acknowledge_error_message
                    ),
                    current_leader=leader_hint(entry.current_leader),
                    records=decode_record_batches(entry.records),
                    acquired=tuple(
                        AcquiredRange(
                            int(acquired.first_offset),
                            int(acquired.last_offset),
                            int(acquired.delivery_count),
                        )
                        for acquired in entry.acquired_records or ()
                    ),
                )
            )
    return ShareFetchResult(
        error=error_or_none(response.error_code, response.error_message),
        acquisition_lock_timeout_ms=ms_from_timedelta(response.acquisition_lock_timeout),
        partitions=tuple(partitions),
        node_endpoints=node_endpoints(response.node_endpoints or ()),
        throttle_time_ms=ms_from_timedelta(response.throttle_time),
    )
