"""ShareGroupHeartbeat v1: the share core's requests in, typed results out, bytes through kio."""

from __future__ import annotations

import io
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.share_group_heartbeat.v1 import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kio.schema.share_group_heartbeat.v1.response import Assignment, TopicPartitions
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from consumer._wire import (
    SUPPORTED_VERSIONS,
    ApiKey,
    VersionRange,
    decode_request_frame,
    decode_response_frame,
    encode_request_frame,
    encode_response_frame,
    negotiate_versions,
)
from consumer._wire._units import i32_timedelta_from_ms
from consumer._wire.share_heartbeat import (
    build_share_heartbeat_request,
    parse_share_heartbeat_response,
)
from consumer._wire.versions import KIP932_MISSING_MESSAGE
from consumer.errors import ProtocolError, UnknownMemberIdError, UnsupportedBrokerError
from consumer.member.partitions import TopicIdPartition, flatten_assignment
from consumer.share import ShareHeartbeatRequest, ShareHeartbeatSucceeded

TOPIC_A = uuid.UUID("0b8c1d5e-2f3a-4b6c-8d9e-0f1a2b3c4d5e")
TOPIC_B = uuid.UUID("9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a")


def _round_trip_request(request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatRequest:
    buffer = io.BytesIO()
    entity_writer(ShareGroupHeartbeatRequest)(buffer, request)
    data = buffer.getvalue()
    decoded, size = entity_reader(ShareGroupHeartbeatRequest)(data, 0)
    assert size == len(data)
    return decoded


def test_a_join_carries_every_field_and_survives_the_bytes() -> None:
    join = ShareHeartbeatRequest("sg", "AAAAAAAAAAAAAAAAAAAAAA", 0, "rack-a", ("a", "b"))
    request = build_share_heartbeat_request(join)
    assert request.__api_key__ == 76
    assert request.__version__ == 1
    decoded = _round_trip_request(request)
    assert decoded.group_id == "sg"
    assert decoded.member_id == "AAAAAAAAAAAAAAAAAAAAAA"
    assert decoded.member_epoch == 0
    assert decoded.rack_id == "rack-a"
    assert decoded.subscribed_topic_names == ("a", "b")


def test_a_delta_leaves_the_unchanged_fields_null_and_a_leave_is_epoch_minus_one() -> None:
    delta = _round_trip_request(build_share_heartbeat_request(ShareHeartbeatRequest("sg", "m", 5)))
    assert (delta.member_epoch, delta.rack_id, delta.subscribed_topic_names) == (5, None, None)
    leave = _round_trip_request(build_share_heartbeat_request(ShareHeartbeatRequest("sg", "m", -1)))
    assert leave.member_epoch == -1


def test_a_whole_frame_round_trips() -> None:
    request = build_share_heartbeat_request(ShareHeartbeatRequest("sg", "m", 0, None, ("t",)))
    frame = encode_request_frame(request, correlation_id=77, client_id="c")
    header, decoded = decode_request_frame(frame[4:])
    assert (header.request_api_key, header.request_api_version) == (76, 1)
    assert decoded == request


def test_only_version_one_exists() -> None:
    with pytest.raises(ValueError, match="ShareGroupHeartbeat v0 is not supported"):
        build_share_heartbeat_request(ShareHeartbeatRequest("sg", "m", 0), 0)


def _response(**changes: object) -> ShareGroupHeartbeatResponse:
    fields: dict[str, object] = {
        "throttle_time": i32_timedelta_from_ms(0),
        "error_code": ErrorCode.none,
        "member_id": "m",
        "member_epoch": i32(3),
        "heartbeat_interval": i32_timedelta_from_ms(500),
        "assignment": Assignment(
            topic_partitions=(
                TopicPartitions(topic_id=TOPIC_A, partitions=(i32(1), i32(0))),
                TopicPartitions(topic_id=TOPIC_B, partitions=()),
            )
        ),
    }
    fields.update(changes)
    return ShareGroupHeartbeatResponse(**fields)  # type: ignore[arg-type]


def _through_bytes(response: ShareGroupHeartbeatResponse) -> ShareGroupHeartbeatResponse:
    frame = encode_response_frame(response, correlation_id=5)
    _, decoded = decode_response_frame(frame[4:], ShareGroupHeartbeatResponse)
    assert isinstance(decoded, ShareGroupHeartbeatResponse)
    return decoded


def test_a_response_parses_into_the_core_input() -> None:
    result = parse_share_heartbeat_response(_through_bytes(_response()))
    assert result.error is None
    assert (result.member_id, result.member_epoch, result.heartbeat_interval_ms) == ("m", 3, 500)
    assert result.assignment == {TOPIC_A: frozenset({0, 1}), TOPIC_B: frozenset()}
    assert result.assignment is not None
    succeeded = ShareHeartbeatSucceeded(
        request_id=1,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=flatten_assignment(result.assignment),
        member_id=result.member_id,
    )
    assert succeeded.assignment == {TopicIdPartition(TOPIC_A, 0), TopicIdPartition(TOPIC_A, 1)}


def test_no_assignment_means_unchanged() -> None:
    result = parse_share_heartbeat_response(_through_bytes(_response(assignment=None)))
    assert result.assignment is None


def test_an_error_becomes_a_typed_error_with_the_broker_message() -> None:
    response = _response(error_code=ErrorCode.unknown_member_id, error_message="gone")
    result = parse_share_heartbeat_response(_through_bytes(response))
    assert isinstance(result.error, UnknownMemberIdError)
    assert result.error.code == 25
    assert result.error.broker_message == "gone"


def test_malformed_or_foreign_responses_are_protocol_errors() -> None:
    nameless = _response(
        assignment=Assignment(topic_partitions=(TopicPartitions(topic_id=None, partitions=()),))
    )
    with pytest.raises(ProtocolError, match="without an id"):
        parse_share_heartbeat_response(nameless)
    with pytest.raises(ProtocolError, match="expected a ShareGroupHeartbeat response"):
        parse_share_heartbeat_response(object())  # type: ignore[arg-type]


def test_negotiation_picks_v1_and_names_kip932_when_missing() -> None:
    assert SUPPORTED_VERSIONS[ApiKey.SHARE_GROUP_HEARTBEAT] == VersionRange(1, 1)
    negotiated = negotiate_versions({76: VersionRange(1, 1)})
    assert negotiated.version_for(ApiKey.SHARE_GROUP_HEARTBEAT) == 1
    for advertised in ({}, {76: VersionRange(0, 0)}):
        with pytest.raises(UnsupportedBrokerError, match="KIP-932") as error:
            negotiate_versions(advertised).version_for(ApiKey.SHARE_GROUP_HEARTBEAT)
        assert str(error.value).startswith(KIP932_MISSING_MESSAGE)
