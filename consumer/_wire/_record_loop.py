"""The records inside one decompressed batch payload (magic v2), with their varints. Sans-I/O.

Split from :mod:`consumer._wire.records` (which reads the batches around them) because this
loop runs once per record of every fetch and is written for speed: see :func:`read_records`.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["Record", "RecordDecodeError", "TimestampType", "read_records"]


class TimestampType(enum.IntEnum):
    """What a record's timestamp means (batch attribute bit 3)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class RecordDecodeError(ValueError):
    """A batch's bytes are not what its header promises (reported as a corrupt batch)."""


Headers = tuple[tuple[str, bytes | None], ...]


class Record(NamedTuple):
    """One data record: ``value`` is None for a tombstone, header values may be None too.

    A named tuple rather than a frozen dataclass: one is built per record fetched, and a frozen
    dataclass costs several times as much to build.
    """

    offset: int
    timestamp_ms: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


def _varint_at(data: bytes, position: int) -> tuple[int, int]:
    """The zig-zag varint at ``position`` (any length up to 10 bytes) and the position after it.

    The record loop inlines the 1- and 2-byte cases; this is the general one.
    """
    value, shift = 0, 0
    size = len(data)
    while True:
        if position >= size:
            raise RecordDecodeError("record varint runs past the batch")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), position
        shift += 7
        if shift > 63:
            raise RecordDecodeError("record varint longer than 10 bytes")


def _headers_at(data: bytes, position: int, count: int) -> tuple[Headers, int]:
    """``count`` record headers from ``position``, and the position after them."""
    if count < 0:
        raise RecordDecodeError(f"negative header count {count}")
    size = len(data)
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        byte = data[position] if position < size else 0x80
        if byte < 0x80:
            length = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            length, position = _varint_at(data, position)
        if length < 0:
            raise RecordDecodeError("record header without a key")
        end = position + length
        if end > size:
            raise RecordDecodeError(f"record field of {length} bytes runs past the batch")
        try:
            name = data[position:end].decode("utf-8")
        except UnicodeDecodeError as error:
            raise RecordDecodeError(f"record header key is not UTF-8: {error}") from None
        byte = data[end] if end < size else 0x80
        if byte < 0x80:
            length = (byte >> 1) ^ -(byte & 1)
            position = end + 1
        else:
            length, position = _varint_at(data, end)
        value: bytes | None = None
        if length >= 0:
            end = position + length
            if end > size:
                raise RecordDecodeError(f"record field of {length} bytes runs past the batch")
            value = data[position:end]
            position = end
        headers.append((name, value))
    return tuple(headers), position


def read_records(
    payload: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    timestamp_type: TimestampType,
) -> list[Record]:
    """The ``count`` records of one decompressed batch payload.

    This loop runs once per record of every fetch, so it is written for speed: the zig-zag
    varints are decoded inline when they are 1 or 2 bytes long (record and value lengths of up
    to 8 KiB, offset and timestamp deltas below 8,192) and by :func:`_varint_at` otherwise, and
    records are built with ``tuple.__new__``. Reading past the payload shows up as an
    ``IndexError`` of ``payload[position]``, turned into :class:`RecordDecodeError`.
    """
    if count < 0:
        raise RecordDecodeError(f"negative record count {count}")
    data = payload
    size = len(data)
    records: list[Record] = []
    append = records.append
    new = tuple.__new__
    log_append = timestamp_type is TimestampType.LOG_APPEND_TIME
    no_headers: Headers = ()
    position = 0
    try:
        for _ in range(count):
            # Record length.
            byte = data[position]
            if byte < 0x80:
                length = (byte >> 1) ^ -(byte & 1)
                position += 1
            elif data[position + 1] < 0x80:
                length = (byte & 0x7F) | (data[position + 1] << 7)
                length = (length >> 1) ^ -(length & 1)
                position += 2
            else:
                length, position = _varint_at(data, position)
            start = position
            # Attributes (unused), then the timestamp delta.
            byte = data[position + 1]
            if byte < 0x80:
                timestamp_delta = (byte >> 1) ^ -(byte & 1)
                position += 2
            elif data[position + 2] < 0x80:
                timestamp_delta = (byte & 0x7F) | (data[position + 2] << 7)
                timestamp_delta = (timestamp_delta >> 1) ^ -(timestamp_delta & 1)
                position += 3
            else:
                timestamp_delta, position = _varint_at(data, position + 1)
            # Offset delta.
            byte = data[position]
            if byte < 0x80:
                offset_delta = (byte >> 1) ^ -(byte & 1)
                position += 1
            elif data[position + 1] < 0x80:
                offset_delta = (byte & 0x7F) | (data[position + 1] << 7)
                offset_delta = (offset_delta >> 1) ^ -(offset_delta & 1)
                position += 2
            else:
                offset_delta, position = _varint_at(data, position)
            # Key: usually absent (zig-zag -1 is the single byte 0x01).
            byte = data[position]
            if byte == 0x01:
                key: bytes | None = None
                position += 1
            else:
                if byte < 0x80:
                    field = (byte >> 1) ^ -(byte & 1)
                    position += 1
                else:
                    field, position = _varint_at(data, position)
                if field < 0:
                    key = None
                else:
                    end = position + field
                    if end > size:
                        raise RecordDecodeError(
                            f"record field of {field} bytes runs past the batch"
                        )
                    key = data[position:end]
                    position = end
            # Value.
            byte = data[position]
            if byte < 0x80:
                field = (byte >> 1) ^ -(byte & 1)
                position += 1
            elif data[position + 1] < 0x80:
                field = (byte & 0x7F) | (data[position + 1] << 7)
                field = (field >> 1) ^ -(field & 1)
                position += 2
            else:
                field, position = _varint_at(data, position)
            if field < 0:
                value: bytes | None = None
            else:
                end = position + field
                if end > size:
                    raise RecordDecodeError(f"record field of {field} bytes runs past the batch")
                value = data[position:end]
                position = end
            # Headers: usually none (the single byte 0x00).
            byte = data[position]
            if byte == 0x00:
                headers = no_headers
                position += 1
            else:
                header_count, position = _varint_at(data, position)
                headers, position = _headers_at(data, position, header_count)
            if position - start != length:
                raise RecordDecodeError(f"record length {length} does not match its fields")
            append(
                new(
                    Record,
                    (
                        base_offset + offset_delta,
                        max_timestamp if log_append else base_timestamp + timestamp_delta,
                        timestamp_type,
                        key,
                        value,
                        headers,
                    ),
                )
            )
    except IndexError:
        raise RecordDecodeError("record varint runs past the batch") from None
    if position != size:
        raise RecordDecodeError(f"{size - position} bytes left after the records")
    return records
