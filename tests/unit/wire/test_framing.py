"""Size-prefixed framing: split and merged chunks, limits, and undecodable bytes."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.consumer_group_heartbeat.v1 import ConsumerGroupHeartbeatResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from consumer._wire import (
    FrameDecoder,
    decode_response_frame,
    encode_response_frame,
    peek_correlation_id,
)
from consumer._wire._units import i32_timedelta_from_ms
from consumer.errors import ProtocolError


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _split(data: bytes, cut_points: list[int]) -> list[bytes]:
    cuts = sorted({min(max(cut, 0), len(data)) for cut in cut_points})
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    cut_points=st.lists(st.integers(min_value=0, max_value=3000), max_size=20),
)
def test_frames_survive_any_chunking(payloads: list[bytes], cut_points: list[int]) -> None:
    stream = b"".join(_frame(p) for p in payloads)
    decoder = FrameDecoder()
    received: list[bytes] = []
    for chunk in _split(stream, cut_points):
        received.extend(decoder.feed(chunk))
    assert received == payloads
    assert decoder.buffered_bytes == 0


def test_byte_by_byte_feeding_yields_frame_only_when_complete() -> None:
    decoder = FrameDecoder()
    data = _frame(b"hello")
    for byte in data[:-1]:
        assert decoder.feed(bytes([byte])) == []
    assert decoder.feed(data[-1:]) == [b"hello"]


def test_merged_frames_come_out_in_order() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(_frame(b"a") + _frame(b"") + _frame(b"bc") + b"\x00\x00") == [
        b"a",
        b"",
        b"bc",
    ]
    assert decoder.buffered_bytes == 2


@pytest.mark.parametrize(
    "garbage",
    [
        b"HTTP/1.1 400 Bad Request\r\n\r\n",
        struct.pack(">i", -5),
        b"\xff\xff\xff\xff",
        struct.pack(">i", 1025) + b"x",
    ],
    ids=["http", "negative", "minus-one", "over-limit"],
)
def test_implausible_sizes_are_protocol_errors(garbage: bytes) -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(ProtocolError, match="Kafka broker"):
        decoder.feed(garbage)


def _heartbeat_response() -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time=i32_timedelta_from_ms(0),
        error_code=ErrorCode.none,
        member_id="m",
        member_epoch=i32(3),
        heartbeat_interval=i32_timedelta_from_ms(500),
    )


def test_correlation_id_is_readable_before_the_payload_type_is_known() -> None:
    frame = encode_response_frame(_heartbeat_response(), correlation_id=77)
    assert peek_correlation_id(frame[4:]) == 77


def test_short_frame_has_no_correlation_id() -> None:
    with pytest.raises(ProtocolError):
        peek_correlation_id(b"\x00\x01")


def test_trailing_bytes_in_a_frame_are_a_protocol_error() -> None:
    frame = encode_response_frame(_heartbeat_response(), correlation_id=1)[4:]
    with pytest.raises(ProtocolError, match="undecoded bytes"):
        decode_response_frame(frame + b"\x00", ConsumerGroupHeartbeatResponse)


def test_truncated_frame_is_a_protocol_error() -> None:
    frame = encode_response_frame(_heartbeat_response(), correlation_id=1)[4:]
    with pytest.raises(ProtocolError, match="could not decode"):
        decode_response_frame(frame[:-3], ConsumerGroupHeartbeatResponse)


@given(st.binary(max_size=64))
def test_random_bytes_decode_or_fail_with_protocol_error(garbage: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_response_frame(garbage, ConsumerGroupHeartbeatResponse)


@given(st.binary(max_size=200), st.integers(min_value=1, max_value=50))
def test_frame_decoder_never_raises_anything_but_protocol_error(data: bytes, step: int) -> None:
    decoder = FrameDecoder(max_frame_bytes=64)
    try:
        for start in range(0, len(data), step):
            for frame in decoder.feed(data[start : start + step]):
                assert len(frame) <= 64
    except ProtocolError:
        pass
