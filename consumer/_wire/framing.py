"""Kafka frames: a 4-byte big-endian size prefix, a header, and a kio-encoded payload.

Sans-I/O: bytes in, bytes out. The request header version (v1 or v2) and the response header
version (v0 or v1) come from the kio schema of each payload (``__header_schema__``), which also
covers the ApiVersions exception (its response header is always v0).
"""

from __future__ import annotations

import functools
import io
import struct
from typing import Final, TypeVar

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import i16, i32
from kio.static.protocol import (
    Entity,
    RequestHeader,
    RequestPayload,
    ResponseHeader,
    ResponsePayload,
)

from consumer._wire.guard import check_entity_bounds
from consumer.errors import ProtocolError

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "FrameDecoder",
    "decode_request_frame",
    "decode_response_frame",
    "encode_request_frame",
    "encode_response_frame",
    "peek_correlation_id",
    "request_type_for",
    "response_type_for",
]

DEFAULT_MAX_FRAME_BYTES: Final = 100 * 1024 * 1024
"""Largest frame accepted by default (the broker's default ``socket.request.max.bytes``)."""

_SIZE_PREFIX: Final = struct.Struct(">i")
_API_KEY_AND_VERSION: Final = struct.Struct(">hh")

ResponseT = TypeVar("ResponseT", bound=ResponsePayload)
EntityT = TypeVar("EntityT", bound=Entity)
HeaderT = TypeVar("HeaderT", bound=Entity)
PayloadT = TypeVar("PayloadT", bound=Entity)


def _frame(payload_parts: list[bytes]) -> bytes:
    body = b"".join(payload_parts)
    return _SIZE_PREFIX.pack(len(body)) + body


def _encode(entity_type: type[EntityT], entity: EntityT) -> bytes:
    buffer = io.BytesIO()
    entity_writer(entity_type)(buffer, entity)
    return buffer.getvalue()


def encode_request_frame(
    request: RequestPayload, *, correlation_id: int, client_id: str | None
) -> bytes:
    """Encode ``request`` with its request header into one size-prefixed frame."""
    header_type = request.__header_schema__
    header = header_type(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    return _frame([_encode(header_type, header), _encode(type(request), request)])


def encode_response_frame(response: ResponsePayload, *, correlation_id: int) -> bytes:
    """Encode ``response`` with its response header into one size-prefixed frame.

    The broker's side of the exchange; used by test servers and fuzzing.
    """
    header_type = response.__header_schema__
    header = header_type(correlation_id=i32(correlation_id))
    return _frame([_encode(header_type, header), _encode(type(response), response)])


def peek_correlation_id(frame: bytes) -> int:
    """The correlation id of a response frame (without its size prefix).

    Both response header versions start with it, so the frame can be matched to its request
    before the payload type is known.
    """
    if len(frame) < 4:
        raise ProtocolError(f"response frame of {len(frame)} bytes is too short for a header")
    correlation_id: int = _SIZE_PREFIX.unpack_from(frame)[0]
    return correlation_id


def decode_response_frame(
    frame: bytes, response_type: type[ResponseT]
) -> tuple[ResponseHeader, ResponseT]:
    """Decode a response frame (without its size prefix) as ``response_type``.

    Raises:
        ProtocolError: the bytes do not decode as that response, or bytes are left over.
    """
    header_type = response_type.__header_schema__
    return _decode_two(frame, header_type, response_type, "response")


def decode_request_frame(frame: bytes) -> tuple[RequestHeader, RequestPayload]:
    """Decode a request frame (without its size prefix): the broker's side, for tests.

    Raises:
        ProtocolError: unknown API key or version, or undecodable bytes.
    """
    if len(frame) < _API_KEY_AND_VERSION.size:
        raise ProtocolError("request frame too short for an API key and version")
    api_key, api_version = _API_KEY_AND_VERSION.unpack_from(frame)
    request_type = request_type_for(api_key, api_version)
    return _decode_two(frame, request_type.__header_schema__, request_type, "request")


@functools.cache
def request_type_for(api_key: int, api_version: int) -> type[RequestPayload]:
    """The kio request class for an API key and version."""
    try:
        return load_request_schema(i16(api_key), i16(api_version))
    except Exception as error:  # kio raises its own index errors or ImportError here
        raise ProtocolError(f"no request schema for API key {api_key} v{api_version}") from error


@functools.cache
def response_type_for(request_type: type[RequestPayload]) -> type[ResponsePayload]:
    """The kio response class answering ``request_type`` (same API key and version)."""
    return load_response_schema(request_type.__api_key__, request_type.__version__)


def _decode_two(
    frame: bytes, header_type: type[HeaderT], payload_type: type[PayloadT], what: str
) -> tuple[HeaderT, PayloadT]:
    name = getattr(payload_type, "__name__", what)
    version = getattr(payload_type, "__version__", "?")
    # kio's native decoder aborts the process on an absurd length prefix (see guard.py):
    # check every length against the bytes left before it sees the frame.
    try:
        header_end = check_entity_bounds(header_type, frame, 0)
        check_entity_bounds(payload_type, frame, header_end)
    except ProtocolError as error:
        raise ProtocolError(f"could not decode {name} v{version}: {error}") from error
    try:
        header, header_size = entity_reader(header_type)(frame, 0)
        payload, payload_size = entity_reader(payload_type)(frame, header_size)
    except (SerialError, ValueError, TypeError, OverflowError, KeyError, IndexError) as error:
        # kio signals bad input with its SerialError family, but also with ValueError (an
        # error code it does not know), KeyError (an unknown tagged field) and friends.
        raise ProtocolError(f"could not decode {name} v{version}: {error}") from error
    left_over = len(frame) - header_size - payload_size
    if left_over != 0:
        raise ProtocolError(f"{name} v{version} left {left_over} undecoded bytes in its frame")
    return header, payload


class FrameDecoder:
    """Splits a byte stream into frames; accepts chunks of any size, split or merged.

    >>> decoder = FrameDecoder()
    >>> decoder.feed(b"\\x00\\x00\\x00\\x02a")
    []
    >>> decoder.feed(b"b\\x00\\x00\\x00\\x00")
    [b'ab', b'']
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()

    @property
    def buffered_bytes(self) -> int:
        """How many bytes wait for the rest of their frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return every frame now complete (payloads, prefix removed).

        Raises:
            ProtocolError: a size prefix is negative or larger than ``max_frame_bytes`` (the
                peer is probably not a Kafka broker, e.g. an HTTP server).
        """
        self._buffer += data
        frames: list[bytes] = []
        offset = 0
        buffer = self._buffer
        while len(buffer) - offset >= _SIZE_PREFIX.size:
            (size,) = _SIZE_PREFIX.unpack_from(buffer, offset)
            if size < 0 or size > self._max_frame_bytes:
                raise ProtocolError(
                    f"peer sent a frame size of {size} bytes (limit {self._max_frame_bytes}); "
                    f"first bytes {bytes(buffer[offset : offset + 16])!r}; "
                    "is this a Kafka broker?"
                )
            end = offset + _SIZE_PREFIX.size + size
            if end > len(buffer):
                break
            frames.append(bytes(buffer[offset + _SIZE_PREFIX.size : end]))
            offset = end
        if offset:
            del self._buffer[:offset]
        return frames
