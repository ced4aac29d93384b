"""Hand-built magic v2 record batches for edge cases the real producer does not make on demand
(control and transactional batches, bad CRCs, cut-off batches). Written from the format
description in the Kafka protocol guide; the real-producer vectors in ``data/records`` check
that it and the decoder agree with Kafka."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import cramjam
from crc32c import crc32c


def zigzag(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = encoded & 0x7F
        encoded >>= 7
        if encoded:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(value: bytes | None) -> bytes:
    return zigzag(-1) if value is None else zigzag(len(value)) + value


@dataclass
class Rec:
    offset_delta: int
    key: bytes | None = None
    value: bytes | None = b""
    timestamp_delta: int = 0
    headers: Sequence[tuple[str, bytes | None]] = field(default_factory=tuple)

    def encode(self) -> bytes:
        body = b"\x00" + zigzag(self.timestamp_delta) + zigzag(self.offset_delta)
        body += _field(self.key) + _field(self.value) + zigzag(len(self.headers))
        for name, value in self.headers:
            body += _field(name.encode()) + _field(value)
        return zigzag(len(body)) + body


def compress(codec: int, data: bytes, *, xerial: bool = False) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        if not xerial:
            return bytes(cramjam.snappy.compress_raw(data))
        # xerial framing, in two blocks to prove block joining.
        half = len(data) // 2
        out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        for part in (data[:half], data[half:]):
            block = bytes(cramjam.snappy.compress_raw(part))
            out += struct.pack(">i", len(block)) + block
        return out
    if codec == 3:
        return bytes(cramjam.lz4.compress(data))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(codec)


def batch(
    records: Sequence[Rec],
    *,
    base_offset: int = 0,
    codec: int = 0,
    xerial: bool = False,
    log_append: bool = False,
    transactional: bool = False,
    control: bool = False,
    producer_id: int = -1,
    base_timestamp: int = 1_000,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    magic: int = 2,
    corrupt_crc: bool = False,
    payload: bytes | None = None,
) -> bytes:
    attributes = codec | (8 if log_append else 0) | (16 if transactional else 0)
    attributes |= 32 if control else 0
    if last_offset_delta is None:
        last_offset_delta = max((r.offset_delta for r in records), default=0)
    if max_timestamp is None:
        max_timestamp = base_timestamp + max((r.timestamp_delta for r in records), default=0)
    if payload is None:
        payload = compress(codec, b"".join(r.encode() for r in records), xerial=xerial)
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            0,
            -1,
            len(records),
        )
        + payload
    )
    crc = crc32c(after_crc) ^ (1 if corrupt_crc else 0)
    after_length = struct.pack(">ibI", 0, magic, crc) + after_crc
    return struct.pack(">qi", base_offset, len(after_length)) + after_length


def control_batch(base_offset: int, producer_id: int, *, commit: bool) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    return batch(
        [Rec(0, key=key, value=value)],
        base_offset=base_offset,
        transactional=True,
        control=True,
        producer_id=producer_id,
    )
