"""Repeated requests and responses coded once (FrameCache): the bytes must not change."""

from __future__ import annotations

from kio.schema.consumer_group_heartbeat.v1 import ConsumerGroupHeartbeatResponse
from kio.schema.errors import ErrorCode

from consumer._runtime.frame_cache import FrameCache
from consumer._wire import (
    build_heartbeat_request,
    decode_response_frame,
    encode_request_frame,
    encode_response_frame,
)
from consumer._wire._units import i32_timedelta_from_ms
from consumer.member import HeartbeatRequest


def heartbeat(epoch: int) -> object:
    return build_heartbeat_request(
        HeartbeatRequest(group_id="g", member_id="m", member_epoch=epoch), 1
    )


def answer(epoch: int) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time=i32_timedelta_from_ms(0),
        error_code=ErrorCode.none,
        member_id="m",
        member_epoch=epoch,  # type: ignore[arg-type]
        heartbeat_interval=i32_timedelta_from_ms(500),
    )


def test_a_repeated_request_gets_the_same_bytes_as_a_fresh_encoding() -> None:
    cache = FrameCache()
    for correlation_id, epoch in [(0, 5), (1, 5), (2, 5), (3, 6), (4, 6), (70_000, 6)]:
        request = heartbeat(epoch)
        frame = cache.request_frame(request, correlation_id=correlation_id, client_id="c")  # type: ignore[arg-type]
        expected = encode_request_frame(request, correlation_id=correlation_id, client_id="c")  # type: ignore[arg-type]
        assert frame == expected


def test_another_client_id_is_encoded_again() -> None:
    cache = FrameCache()
    request = heartbeat(5)
    cache.request_frame(request, correlation_id=1, client_id="a")  # type: ignore[arg-type]
    frame = cache.request_frame(request, correlation_id=2, client_id="b")  # type: ignore[arg-type]
    assert frame == encode_request_frame(request, correlation_id=2, client_id="b")  # type: ignore[arg-type]


def test_a_repeated_response_decodes_to_an_equal_response() -> None:
    cache = FrameCache()
    for correlation_id, epoch in [(0, 5), (1, 5), (2, 6), (3, 6)]:
        frame = encode_response_frame(answer(epoch), correlation_id=correlation_id)[4:]
        decoded = cache.response(frame, ConsumerGroupHeartbeatResponse)
        assert decoded == decode_response_frame(frame, ConsumerGroupHeartbeatResponse)[1]
        assert decoded.member_epoch == epoch
