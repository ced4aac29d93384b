"""ListOffsets (key 2): what the builder puts on the wire and what the parser makes of answers."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v6 import ListOffsetsResponse as ResponseV6
from kio.schema.list_offsets.v10 import ListOffsetsResponse
from kio.schema.list_offsets.v10.response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from kio.schema.metadata.v13 import MetadataResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from consumer._wire import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    SUPPORTED_VERSIONS,
    ApiKey,
    ListedOffset,
    VersionRange,
    build_list_offsets_request,
    decode_response_frame,
    encode_response_frame,
    parse_list_offsets_response,
)
from consumer.errors import BrokerError, ProtocolError


def test_timestamps_are_the_protocols_earliest_and_latest() -> None:
    assert (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP) == (-2, -1)
    assert SUPPORTED_VERSIONS[ApiKey.LIST_OFFSETS] == VersionRange(6, 10)


@pytest.mark.parametrize("version", range(6, 11))
def test_request_groups_partitions_by_topic_as_a_consumer(version: int) -> None:
    request = build_list_offsets_request(
        version,
        [("orders", 2), ("payments", 0), ("orders", 0)],
        timestamp=EARLIEST_TIMESTAMP,
        read_committed=True,
        timeout_ms=1_500,
    )
    assert int(request.__version__) == version
    assert request.replica_id == -1
    assert request.isolation_level == 1
    by_topic = {
        topic.name: [(p.partition_index, p.timestamp) for p in topic.partitions]
        for topic in request.topics
    }
    assert by_topic == {"orders": [(0, -2), (2, -2)], "payments": [(0, -2)]}
    if version >= 10:
        assert request.timeout == datetime.timedelta(milliseconds=1_500)  # type: ignore[union-attr]


def test_read_uncommitted_is_isolation_level_zero() -> None:
    request = build_list_offsets_request(
        9, [("orders", 0)], timestamp=LATEST_TIMESTAMP, read_committed=False
    )
    assert request.isolation_level == 0
    assert request.topics[0].partitions[0].timestamp == -1


def test_an_unsupported_version_is_refused_naming_the_range() -> None:
    with pytest.raises(ValueError, match=r"ListOffsets v5 is not supported \(v6-v10\)"):
        build_list_offsets_request(5, [("orders", 0)], timestamp=-2, read_committed=True)


def _response(*partitions: ListOffsetsPartitionResponse) -> ListOffsetsResponse:
    return ListOffsetsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        topics=(ListOffsetsTopicResponse(name=TopicName("orders"), partitions=partitions),),
    )


def test_response_round_trips_through_a_frame_and_parses_offsets_and_errors() -> None:
    response = _response(
        ListOffsetsPartitionResponse(
            partition_index=i32(0), error_code=ErrorCode.none, offset=i64(120), leader_epoch=i32(3)
        ),
        ListOffsetsPartitionResponse(
            partition_index=i32(1), error_code=ErrorCode.not_leader_or_follower
        ),
    )
    frame = encode_response_frame(response, correlation_id=7)
    _, decoded = decode_response_frame(frame[4:], ListOffsetsResponse)
    assert decoded == response
    listed = parse_list_offsets_response(decoded)
    assert listed[0] == ListedOffset("orders", 0, 120, 3, None)
    assert (listed[1].topic, listed[1].partition, listed[1].offset) == ("orders", 1, -1)
    assert isinstance(listed[1].error, BrokerError)
    assert (listed[1].error.code, listed[1].error.retriable) == (6, True)


def test_every_supported_response_version_parses() -> None:
    response = ResponseV6(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        topics=(),
    )
    assert parse_list_offsets_response(response) == []


def test_another_response_is_a_protocol_error() -> None:
    other = MetadataResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        brokers=(),
        cluster_id=None,
        controller_id=BrokerId(1),
        topics=(),
        error_code=ErrorCode.none,
    )
    with pytest.raises(ProtocolError, match="expected a ListOffsets v6-v10 response"):
        parse_list_offsets_response(other)
