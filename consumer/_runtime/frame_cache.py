"""Frames an idle member sends and receives over and over, encoded and decoded once.

A STABLE member's heartbeat carries the same fields every time (KIP-848 sends only what
changed), and the coordinator's answer is the same every time too, but for the correlation id.
Encoding and decoding them with kio was a third of an idle member's background CPU. A request
equal to the previous one of its API (and version: different versions are different classes)
reuses that frame with the new correlation id written in; a response frame equal to the previous
one of its type, after the correlation id, reuses the decoded response (kio entities are
immutable). Anything else is encoded or decoded as before, and then remembered.

Metadata responses are remembered once per process, not per connection: the members of one
process ask the same topics' metadata at the same moment (a cold join), each over its own
connection, and get the same bytes back; checking and decoding a 900-partition answer cost each
of them about 6 ms of CPU, and with 50 members in a process those milliseconds queue on one GIL.
"""

from __future__ import annotations

import struct
import threading
from typing import Final

from kio.schema.metadata import v10, v11, v12, v13
from kio.static.protocol import RequestPayload, ResponsePayload

from consumer._wire import decode_response_frame, encode_request_frame

__all__ = ["FrameCache"]

#: Where a request frame's correlation id sits: after the int32 size prefix, the int16 API key
#: and the int16 API version (every request header version starts the same way).
_CORRELATION_ID_OFFSET: Final = 8
_CORRELATION_ID: Final = struct.Struct(">i")
#: A response frame (without its size prefix) starts with its int32 correlation id.
_RESPONSE_BODY_START: Final = 4
#: Response types whose recent decoded answers are shared by every connection of the process.
_SHARED_RESPONSE_TYPES: Final[frozenset[type[ResponsePayload]]] = frozenset(
    {v10.MetadataResponse, v11.MetadataResponse, v12.MetadataResponse, v13.MetadataResponse}
)
#: How many distinct answers of the shared types are remembered: the members of a cold join ask
#: for the brokers only (start) and for their topics at about the same time, so the last answer
#: alone would alternate between those two and hit rarely.
_SHARED_RESPONSES_KEPT: Final = 8
#: (response type, frame body) -> decoded response, oldest first, for the shared types only.
_SHARED_RESPONSES: dict[tuple[type[ResponsePayload], bytes], ResponsePayload] = {}
_SHARED_LOCK: Final = threading.Lock()


class FrameCache:
    """The last request frame per API key and the last decoded response per response type."""

    __slots__ = ("_requests", "_responses")

    def __init__(self) -> None:
        self._requests: dict[int, tuple[RequestPayload, str | None, bytes]] = {}
        self._responses: dict[type[ResponsePayload], tuple[bytes, ResponsePayload]] = {}

    def request_frame(
        self, request: RequestPayload, *, correlation_id: int, client_id: str | None
    ) -> bytes:
        """``encode_request_frame(request, ...)``; an equal request reuses the previous frame."""
        api_key = int(request.__api_key__)
        last = self._requests.get(api_key)
        if last is not None and last[1] == client_id and (last[0] is request or last[0] == request):
            frame = bytearray(last[2])
            _CORRELATION_ID.pack_into(frame, _CORRELATION_ID_OFFSET, correlation_id)
            return bytes(frame)
        frame_bytes = encode_request_frame(
            request, correlation_id=correlation_id, client_id=client_id
        )
        self._requests[api_key] = (request, client_id, frame_bytes)
        return frame_bytes

    def response(self, frame: bytes, response_type: type[ResponsePayload]) -> ResponsePayload:
        """``decode_response_frame(frame, response_type)``'s response, reusing the previous one
        when the frame is the same after its correlation id.

        Raises:
            ProtocolError: the bytes do not decode as that response.
        """
        body = frame[_RESPONSE_BODY_START:]
        if response_type in _SHARED_RESPONSE_TYPES:
            return _shared_response(frame, body, response_type)
        last = self._responses.get(response_type)
        if last is not None and last[0] == body:
            return last[1]
        _, response = decode_response_frame(frame, response_type)
        self._responses[response_type] = (body, response)
        return response


def _shared_response(
    frame: bytes, body: bytes, response_type: type[ResponsePayload]
) -> ResponsePayload:
    """The decoded response of one of the process's recent answers with this body, or a new one
    (decoded outside the lock: two threads may decode the same new body, both results equal)."""
    key = (response_type, body)
    with _SHARED_LOCK:
        known = _SHARED_RESPONSES.get(key)
    if known is not None:
        return known
    _, response = decode_response_frame(frame, response_type)
    with _SHARED_LOCK:
        _SHARED_RESPONSES[key] = response
        while len(_SHARED_RESPONSES) > _SHARED_RESPONSES_KEPT:
            del _SHARED_RESPONSES[next(iter(_SHARED_RESPONSES))]
    return response
