"""Kafka framing for :class:`~consumer.testing.real.proxy.FaultProxy`'s ``answer_with_error``:
both directions of a proxied connection are split into whole frames, and a request the rule
matches is answered by the proxy itself with an error code instead of reaching the broker, as a
coordinator that is still loading its partition would answer it."""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i32Timedelta

from consumer._wire import FrameDecoder, encode_response_frame, request_type_for, response_type_for

#: API keys ``answer_with_error`` can answer: the heartbeats, whose responses carry one
#: top-level error code and nothing that must be right when it is set.
ANSWERABLE_API_KEYS = {68: "ConsumerGroupHeartbeat", 76: "ShareGroupHeartbeat"}

_SIZE = struct.Struct(">i")
_REQUEST_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id


def check_rule(api_key: int, error_code: int) -> tuple[int, ErrorCode]:
    """Validate an ``answer_with_error`` rule; returns it with the error code as kio's enum."""
    if api_key not in ANSWERABLE_API_KEYS:
        raise ValueError(f"api_key must be one of {ANSWERABLE_API_KEYS}, got {api_key!r}")
    try:
        return api_key, ErrorCode(error_code)
    except ValueError:
        raise ValueError(f"error_code {error_code!r} is not a Kafka error code") from None


def error_response(api_key: int, api_version: int, correlation_id: int, code: ErrorCode) -> bytes:
    """A size-prefixed heartbeat response frame that carries only ``code``."""
    response_type: Any = response_type_for(request_type_for(api_key, api_version))
    response = response_type(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=code,
        error_message=None,
        member_id=None,
        member_epoch=i32(-1),
        heartbeat_interval=i32Timedelta.parse(datetime.timedelta(0)),
        assignment=None,
    )
    frame: bytes = encode_response_frame(response, correlation_id=correlation_id)
    return frame


class FramedLink:
    """The two byte streams of one proxied connection, cut into whole frames.

    ``rule()`` is read for every request: ``None``, or ``(api_key, error_code)`` to answer
    requests with that API key with that error.
    """

    def __init__(self, rule: Callable[[], tuple[int, ErrorCode] | None]) -> None:
        self._rule = rule
        self._requests = FrameDecoder()
        self._responses = FrameDecoder()

    def from_client(self, data: bytes) -> tuple[bytes, list[bytes]]:
        """Bytes read from the client -> (whole frames to forward upstream, the answer frames
        to send back to the client)."""
        forward: list[bytes] = []
        answers: list[bytes] = []
        for frame in self._requests.feed(data):
            rule = self._rule()
            if rule is not None and len(frame) >= _REQUEST_HEAD.size:
                api_key, api_version, correlation_id = _REQUEST_HEAD.unpack_from(frame)
                if api_key == rule[0]:
                    answers.append(error_response(api_key, api_version, correlation_id, rule[1]))
                    continue
            forward.append(_SIZE.pack(len(frame)) + frame)
        return b"".join(forward), answers

    def from_upstream(self, data: bytes) -> bytes:
        """Bytes read from the broker -> whole frames to forward to the client."""
        return b"".join(_SIZE.pack(len(frame)) + frame for frame in self._responses.feed(data))
