"""ShareFetch and ShareAcknowledge: building requests and parsing responses."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

import pytest
from batch_builder import Rec, batch
from kio.schema.errors import ErrorCode
from kio.schema.share_acknowledge import v1 as ack_v1
from kio.schema.share_acknowledge import v2 as ack_v2
from kio.schema.share_acknowledge.v2 import response as ack_response_v2
from kio.schema.share_fetch import v1 as fetch_v1
from kio.schema.share_fetch import v2 as fetch_v2
from kio.schema.share_fetch.v2 import response as fetch_response_v2
from kio.schema.types import BrokerId
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from consumer._wire import (
    AcquiredRange,
    LeaderHint,
    build_share_acknowledge_request,
    build_share_fetch_request,
    parse_heartbeat_response,
    parse_share_acknowledge_response,
    parse_share_fetch_response,
)
from consumer.errors import ProtocolError
from consumer.share.acknowledgements import AcknowledgementBatch, AcknowledgeType

TOPIC = uuid.UUID(int=7)
ZERO = i32Timedelta.parse(datetime.timedelta(0))


@dataclass(frozen=True)
class RawBatch:
    first_offset: int
    last_offset: int
    types: tuple[int, ...]


def fetch_request(version: int, **overrides: object) -> object:
    fields: dict[str, object] = {
        "group_id": "g",
        "member_id": "m",
        "share_session_epoch": 1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_records": 10,
        "batch_size": 10,
        "topics": {TOPIC: {0: ()}},
    }
    fields.update(overrides)
    return build_share_fetch_request(version, **fields)  # type: ignore[arg-type]


def test_a_fetch_request_carries_session_limits_and_piggybacked_acknowledgements() -> None:
    acks = (AcknowledgementBatch(2, 4, (AcknowledgeType.ACCEPT,)),)
    request = fetch_request(
        2,
        share_session_epoch=5,
        max_wait_ms=250,
        topics={TOPIC: {1: acks, 0: ()}},
        forgotten={TOPIC: {3}, uuid.UUID(int=9): set()},
        acquire_mode=1,
    )
    assert isinstance(request, fetch_v2.ShareFetchRequest)
    assert (request.group_id, request.member_id, request.share_session_epoch) == ("g", "m", 5)
    assert request.max_wait == datetime.timedelta(milliseconds=250)
    assert (request.max_records, request.batch_size, request.share_acquire_mode) == (10, 10, 1)
    [topic] = request.topics
    assert [p.partition_index for p in topic.partitions] == [0, 1]
    [batch_entry] = topic.partitions[1].acknowledgement_batches
    assert (batch_entry.first_offset, batch_entry.last_offset) == (2, 4)
    assert batch_entry.acknowledge_types == (1,)
    [forgotten] = request.forgotten_topics_data
    assert (forgotten.topic_id, forgotten.partitions) == (TOPIC, (3,))


def test_v1_cannot_carry_v2_features() -> None:
    renew = {TOPIC: {0: (RawBatch(1, 1, (4,)),)}}
    with pytest.raises(ValueError, match="v1 has no acquire mode"):
        fetch_request(1, acquire_mode=1)
    with pytest.raises(ValueError, match="RENEW acknowledgement needs v2"):
        fetch_request(2, topics=renew)
    assert isinstance(fetch_request(2, topics=renew, is_renew_ack=True), fetch_v2.ShareFetchRequest)
    assert isinstance(fetch_request(1), fetch_v1.ShareFetchRequest)
    with pytest.raises(ValueError, match=r"ShareFetch v3 is not supported \(v1-v2\)"):
        fetch_request(3)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (RawBatch(5, 4, (1,)), "empty or negative"),
        (RawBatch(1, 3, (1, 2)), "has 2 types; it needs 1 or one per offset"),
        (RawBatch(1, 1, (9,)), "acknowledge type 9 is not one of"),
    ],
)
def test_bad_acknowledgement_ranges_are_refused(entry: RawBatch, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fetch_request(2, topics={TOPIC: {0: (entry,)}})
    with pytest.raises(ValueError, match=message):
        build_share_acknowledge_request(
            2, group_id="g", member_id="m", share_session_epoch=1, topics={TOPIC: {0: (entry,)}}
        )


def test_share_acknowledge_requests() -> None:
    acks = {TOPIC: {0: (AcknowledgementBatch(0, 1, (AcknowledgeType.RELEASE,)),)}}
    request = build_share_acknowledge_request(
        1, group_id="g", member_id="m", share_session_epoch=-1, topics=acks
    )
    assert isinstance(request, ack_v1.ShareAcknowledgeRequest)
    assert request.share_session_epoch == -1
    assert request.topics[0].partitions[0].acknowledgement_batches[0].acknowledge_types == (2,)
    with pytest.raises(ValueError, match="epoch 0"):
        build_share_acknowledge_request(
            2, group_id="g", member_id="m", share_session_epoch=0, topics=acks
        )
    with pytest.raises(ValueError, match="v1 cannot carry RENEW"):
        build_share_acknowledge_request(
            1, group_id="g", member_id="m", share_session_epoch=3, topics={}, is_renew_ack=True
        )


def _fetch_partition(index: int, **fields: object) -> fetch_response_v2.PartitionData:
    values: dict[str, object] = {
        "partition_index": i32(index),
        "error_code": ErrorCode.none,
        "acknowledge_error_code": i16(0),
        "current_leader": fetch_response_v2.LeaderIdAndEpoch(
            leader_id=i32(-1), leader_epoch=i32(-1)
        ),
        "records": Records(b""),
        "acquired_records": (),
    }
    values.update(fields)
    return fetch_response_v2.PartitionData(**values)  # type: ignore[arg-type]


def test_a_fetch_response_parses_records_ranges_errors_and_leaders() -> None:
    records = batch([Rec(0, value=b"a"), Rec(1, value=b"b"), Rec(2, value=b"c")], base_offset=10)
    response = fetch_v2.ShareFetchResponse(
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        acquisition_lock_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        responses=(
            fetch_response_v2.ShareFetchableTopicResponse(
                topic_id=TOPIC,
                partitions=(
                    _fetch_partition(
                        0,
                        records=Records(records),
                        acquired_records=(
                            fetch_response_v2.AcquiredRecords(
                                first_offset=i64(10), last_offset=i64(11), delivery_count=i16(1)
                            ),
                            fetch_response_v2.AcquiredRecords(
                                first_offset=i64(12), last_offset=i64(12), delivery_count=i16(3)
                            ),
                        ),
                        acknowledge_error_code=i16(int(ErrorCode.invalid_record_state)),
                    ),
                    _fetch_partition(
                        1,
                        error_code=ErrorCode.not_leader_or_follower,
                        current_leader=fetch_response_v2.LeaderIdAndEpoch(
                            leader_id=i32(2), leader_epoch=i32(5)
                        ),
                    ),
                ),
            ),
        ),
        node_endpoints=(
            fetch_response_v2.NodeEndpoint(
                node_id=BrokerId(2), host="broker-2", port=i32(9093), rack="r1"
            ),
        ),
    )
    result = parse_share_fetch_response(response)
    assert result.error is None
    assert result.acquisition_lock_timeout_ms == 30_000
    first, second = result.partitions
    assert (first.topic_id, first.partition, first.error) == (TOPIC, 0, None)
    assert first.acquired == (AcquiredRange(10, 11, 1), AcquiredRange(12, 12, 3))
    assert [r.value for r in first.records.records] == [b"a", b"b", b"c"]
    assert first.acknowledge_error is not None
    assert first.acknowledge_error.name == "INVALID_RECORD_STATE"
    assert first.current_leader is None
    assert second.error is not None
    assert second.error.name == "NOT_LEADER_OR_FOLLOWER"
    assert second.current_leader == LeaderHint(2, 5)
    assert result.node_endpoints[2].host == "broker-2"
    assert (result.node_endpoints[2].port, result.node_endpoints[2].rack) == (9093, "r1")


def test_a_top_level_fetch_error_is_returned() -> None:
    response = fetch_v1.ShareFetchResponse(
        throttle_time=ZERO,
        error_code=ErrorCode.invalid_share_session_epoch,
        acquisition_lock_timeout=ZERO,
        responses=(),
        node_endpoints=(),
    )
    result = parse_share_fetch_response(response)
    assert result.error is not None
    assert result.error.name == "INVALID_SHARE_SESSION_EPOCH"
    assert result.error.retriable
    assert result.partitions == ()


def test_acknowledge_responses_v1_and_v2() -> None:
    partition = ack_response_v2.PartitionData(
        partition_index=i32(0),
        error_code=ErrorCode.invalid_record_state,
        current_leader=ack_response_v2.LeaderIdAndEpoch(leader_id=i32(1), leader_epoch=i32(0)),
    )
    v2_response = ack_v2.ShareAcknowledgeResponse(
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        acquisition_lock_timeout=i32Timedelta.parse(datetime.timedelta(seconds=15)),
        responses=(
            ack_response_v2.ShareAcknowledgeTopicResponse(topic_id=TOPIC, partitions=(partition,)),
        ),
        node_endpoints=(),
    )
    result = parse_share_acknowledge_response(v2_response)
    assert result.acquisition_lock_timeout_ms == 15_000
    [entry] = result.partitions
    assert (entry.topic_id, entry.partition, entry.current_leader) == (TOPIC, 0, LeaderHint(1, 0))
    assert entry.error is not None
    assert entry.error.name == "INVALID_RECORD_STATE"
    v1_response = ack_v1.ShareAcknowledgeResponse(
        throttle_time=ZERO,
        error_code=ErrorCode.share_session_not_found,
        responses=(),
        node_endpoints=(),
    )
    result = parse_share_acknowledge_response(v1_response)
    assert result.acquisition_lock_timeout_ms is None
    assert result.error is not None
    assert result.error.name == "SHARE_SESSION_NOT_FOUND"


def test_parsers_refuse_other_responses() -> None:
    response = ack_v1.ShareAcknowledgeResponse(
        throttle_time=ZERO, error_code=ErrorCode.none, responses=(), node_endpoints=()
    )
    with pytest.raises(ProtocolError, match="expected a ShareFetch response"):
        parse_share_fetch_response(response)
    with pytest.raises(ProtocolError, match="expected a ConsumerGroupHeartbeat"):
        parse_heartbeat_response(response)
    fetch = fetch_v1.ShareFetchResponse(
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        acquisition_lock_timeout=ZERO,
        responses=(),
        node_endpoints=(),
    )
    with pytest.raises(ProtocolError, match="expected a ShareAcknowledge response"):
        parse_share_acknowledge_response(fetch)


def test_null_arrays_from_a_mangled_frame_parse_as_empty() -> None:
    # kio decodes a null array as None even where the schema forbids it (found by the fuzzer).
    fetch = fetch_v1.ShareFetchResponse(
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        acquisition_lock_timeout=ZERO,
        responses=None,  # type: ignore[arg-type]
        node_endpoints=None,  # type: ignore[arg-type]
    )
    assert parse_share_fetch_response(fetch).partitions == ()
    ack = ack_v1.ShareAcknowledgeResponse(
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        responses=(ack_response_v2.ShareAcknowledgeTopicResponse(topic_id=TOPIC, partitions=None),),  # type: ignore[arg-type]
        node_endpoints=None,  # type: ignore[arg-type]
    )
    assert parse_share_acknowledge_response(ack).partitions == ()
