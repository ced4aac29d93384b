"""The bounds check that keeps absurd length prefixes away from kio's native decoder."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.consumer_group_heartbeat.v1.response import (
    Assignment,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.response import MetadataResponse
from kio.static.primitive import i32, i32Timedelta

from consumer._wire import decode_response_frame, encode_response_frame
from consumer._wire.guard import check_entity_bounds
from consumer.errors import ProtocolError


def heartbeat_frame(assignment: Assignment | None) -> bytes:
    response = ConsumerGroupHeartbeatResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=ErrorCode.none,
        error_message=None,
        member_id="m",
        member_epoch=i32(3),
        heartbeat_interval=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        assignment=assignment,
    )
    return encode_response_frame(response, correlation_id=1)[4:]


def test_valid_frames_pass_with_and_without_a_nullable_struct() -> None:
    with_assignment = Assignment(
        topic_partitions=(TopicPartitions(topic_id=uuid.uuid4(), partitions=(0, 1, 2)),)  # type: ignore[arg-type]
    )
    for assignment in (None, with_assignment):
        frame = heartbeat_frame(assignment)
        header_end = check_entity_bounds(ConsumerGroupHeartbeatResponse.__header_schema__, frame)
        assert check_entity_bounds(ConsumerGroupHeartbeatResponse, frame, header_end) == len(frame)
        _, decoded = decode_response_frame(frame, ConsumerGroupHeartbeatResponse)
        assert decoded.assignment == assignment


def test_an_array_longer_than_the_frame_is_refused_before_decoding() -> None:
    frame = bytearray(heartbeat_frame(Assignment(topic_partitions=())))
    # The last bytes are: compact array length (1 = empty), the struct's and response's tagged
    # field counts. Claim 2**28 elements instead.
    frame[-3:-2] = b"\x81\x80\x80\x80\x01"
    with pytest.raises(ProtocolError, match="array of 268435456 elements"):
        decode_response_frame(bytes(frame), ConsumerGroupHeartbeatResponse)


@pytest.mark.parametrize("cut", [1, 5, 17])
def test_truncated_frames_are_refused(cut: int) -> None:
    frame = heartbeat_frame(None)
    with pytest.raises(ProtocolError, match="could not decode ConsumerGroupHeartbeatResponse"):
        decode_response_frame(frame[:-cut], ConsumerGroupHeartbeatResponse)


def test_a_string_longer_than_the_frame_is_refused() -> None:
    # MetadataResponse v12 body: throttle (4), brokers compact array of one, node id (4), host
    # compact string whose length claims far more than is there.
    body = b"\x00\x00\x00\x00" + b"\x02" + b"\x00\x00\x00\x01" + b"\xff\xff\x03"
    header = b"\x00\x00\x00\x01\x00"  # correlation id 1, no tagged fields
    with pytest.raises(ProtocolError, match="claims"):
        check_entity_bounds(MetadataResponse, header + body, len(header))
