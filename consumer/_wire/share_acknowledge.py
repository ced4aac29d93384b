"""ShareAcknowledge (key 79): acknowledge acquired records without fetching (KIP-932).

Used for ``commit_sync``/``commit_async``, for acknowledgements when no fetch is due, and to
close a share session (epoch -1). It shares the session's epoch sequence with ShareFetch and is
illegal at epoch 0. v2 (Apache Kafka 4.2+) adds RENEW and returns the acquisition lock timeout.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from kio.schema.share_acknowledge import v1, v2
from kio.schema.share_acknowledge.v1 import request as request_v1
from kio.schema.share_acknowledge.v2 import request as request_v2
from kio.schema.types import GroupId
from kio.static.primitive import i8, i32, i64
from kio.static.protocol import ResponsePayload

from consumer.errors import BrokerError, ProtocolError, error_or_none

from ._by_version import by_version
from ._units import ms_from_timedelta
from .metadata import BrokerAddress
from .share_fetch import (
    AcknowledgementBatchLike,
    LeaderHint,
    check_acknowledgement_batches,
    leader_hint,
    node_endpoints,
)

__all__ = [
    "ShareAcknowledgePartition",
    "ShareAcknowledgeRequest",
    "ShareAcknowledgeResult",
    "build_share_acknowledge_request",
    "parse_share_acknowledge_response",
]

ShareAcknowledgeRequest: TypeAlias = v1.ShareAcknowledgeRequest | v2.ShareAcknowledgeRequest
_RESPONSE_CLASSES: Final = (v1.ShareAcknowledgeResponse, v2.ShareAcknowledgeResponse)
_REQUEST_TYPES: Final[Mapping[int, tuple[Callable[..., Any], ...]]] = {
    1: (
        v1.ShareAcknowledgeRequest,
        request_v1.AcknowledgeTopic,
        request_v1.AcknowledgePartition,
        request_v1.AcknowledgementBatch,
    ),
    2: (
        v2.ShareAcknowledgeRequest,
        request_v2.AcknowledgeTopic,
        request_v2.AcknowledgePartition,
        request_v2.AcknowledgementBatch,
    ),
}
_FIRST_V2_FEATURES: Final = 2


@dataclass(frozen=True, slots=True)
class ShareAcknowledgePartition:
    """The outcome of one partition's acknowledgements (``error`` None: applied)."""

    topic_id: uuid.UUID
    partition: int
    error: BrokerError | None
    current_leader: LeaderHint | None


@dataclass(frozen=True, slots=True)
class ShareAcknowledgeResult:
    """A parsed ShareAcknowledge response.

    ``acquisition_lock_timeout_ms`` is None at v1, which does not return it.
    """

    error: BrokerError | None
    partitions: tuple[ShareAcknowledgePartition, ...]
    acquisition_lock_timeout_ms: int | None = None
    node_endpoints: Mapping[int, BrokerAddress] = field(default_factory=dict)
    throttle_time_ms: int = 0


def build_share_acknowledge_request(
    version: int,
    *,
    group_id: str,
    member_id: str,
    share_session_epoch: int,
    topics: Mapping[uuid.UUID, Mapping[int, Sequence[AcknowledgementBatchLike]]],
    is_renew_ack: bool = False,
) -> ShareAcknowledgeRequest:
    """The ShareAcknowledge request at ``version`` (1 or 2).

    Raises:
        ValueError: an unknown version, epoch 0 (the broker refuses it: a session is opened
            by a ShareFetch), RENEW at v1, or an acknowledgement range the broker would refuse.
    """
    make_request, make_topic, make_partition, make_batch = by_version(
        "ShareAcknowledge", version, _REQUEST_TYPES
    )
    if share_session_epoch == 0:
        raise ValueError(
            "ShareAcknowledge cannot be sent at share session epoch 0: open the session with "
            "a ShareFetch first"
        )
    version_fields: dict[str, object] = {}
    if version >= _FIRST_V2_FEATURES:
        version_fields["is_renew_ack"] = is_renew_ack
    elif is_renew_ack:
        raise ValueError("ShareAcknowledge v1 cannot carry RENEW (it needs v2, Apache Kafka 4.2+)")
    topic_entries = []
    for topic_id, partitions in topics.items():
        partition_entries = []
        for partition, batches in sorted(partitions.items()):
            check_acknowledgement_batches(batches, version, is_renew_ack, "ShareAcknowledge")
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
        topics=tuple(topic_entries),
        **version_fields,
    )


def parse_share_acknowledge_response(response: ResponsePayload) -> ShareAcknowledgeResult:
    """The typed result of a ShareAcknowledge response (errors are returned, not raised).

    Raises:
        ProtocolError: ``response`` is not a ShareAcknowledge response, or names a topic
            without an id.
    """
    if not isinstance(response, _RESPONSE_CLASSES):
        raise ProtocolError(f"expected a ShareAcknowledge response, got {type(response).__name__}")
    partitions: list[ShareAcknowledgePartition] = []
    # kio decodes a null array as None even where the schema forbids null: treat it as empty.
    for topic in response.responses or ():
        if topic.topic_id is None:
            raise ProtocolError("ShareAcknowledge response contains a topic without an id")
        for entry in topic.partitions or ():
            partitions.append(
                ShareAcknowledgePartition(
                    topic_id=topic.topic_id,
                    partition=int(entry.partition_index),
                    error=error_or_none(entry.error_code, entry.error_message),
                    current_leader=leader_hint(entry.current_leader),
                )
            )
    lock_timeout_ms: int | None = None
    if isinstance(response, v2.ShareAcknowledgeResponse):
        lock_timeout_ms = ms_from_timedelta(response.acquisition_lock_timeout)
    return ShareAcknowledgeResult(
        error=error_or_none(response.error_code, response.error_message),
        partitions=tuple(partitions),
        acquisition_lock_timeout_ms=lock_timeout_ms,
        node_endpoints=node_endpoints(response.node_endpoints or ()),
        throttle_time_ms=ms_from_timedelta(response.throttle_time),
    )
