"""Record batches (magic v2) as a fetch response's ``records`` bytes carry them. Sans-I/O.

kio 0.6.5 reads uncompressed batches only (and truncates timestamps to whole seconds), so this
module decodes the batch format itself: header fields with :mod:`struct`, the CRC-32C with
``crc32c``, the payload of every producer codec with ``cramjam`` (one maintained native library
that covers gzip, snappy, lz4 frames and zstd), and the records with their varints.

What the broker may legitimately send, and what comes back for it:

* data batches, compressed or not: their records, each with its offset, timestamp (create time,
  or the batch's log-append time), key, value (``None`` for a tombstone) and headers;
* control batches (transaction markers): no records, reported in
  :attr:`DecodedRecords.control_batches` with their marker type;
* a batch cut short at the end (the broker stops at its byte limit mid-batch): ignored, its size
  reported in :attr:`DecodedRecords.truncated_bytes`;
* a batch that fails its CRC, names an unknown codec or does not decompress: reported in
  :attr:`DecodedRecords.corrupt_batches` with its offset range, so a share consumer can reject
  those offsets; decoding goes on with the next batch.

Snappy comes in two framings: librdkafka writes raw snappy blocks, the Java producer (and the
broker when it recompresses) writes xerial ``SnappyOutputStream`` frames; both are read.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import cramjam
from crc32c import crc32c

from ._record_loop import Record, RecordDecodeError, TimestampType, read_records

__all__ = [
    "AbortedTransaction",
    "Compression",
    "ControlType",
    "CorruptBatch",
    "DecodedRecords",
    "Record",
    "RecordBatch",
    "TimestampType",
    "decode_record_batches",
    "drop_aborted",
]

#: base offset (int64) + batch length (int32): what precedes the length-counted part.
_LOG_OVERHEAD: Final = 12
#: partition leader epoch .. record count: the fixed part the batch length counts.
_HEADER: Final = struct.Struct(">ibIhiqqqhii")
_MAGIC_OFFSET: Final = _LOG_OVERHEAD + 4
_CRC_END: Final = _MAGIC_OFFSET + 1 + 4
_PREFIX: Final = struct.Struct(">qi")
_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER_BYTES: Final = 16
_INT32: Final = struct.Struct(">i")
_CONTROL_KEY: Final = struct.Struct(">hh")

_COMPRESSION_MASK: Final = 0x07
_TIMESTAMP_TYPE_BIT: Final = 0x08
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20


class Compression(enum.IntEnum):
    """The codec of a batch (its attribute bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class ControlType(enum.IntEnum):
    """The marker a control record carries (its key's type field)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """One decoded batch; ``records`` is empty for a control batch (see ``control_type``)."""

    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    compression: Compression
    timestamp_type: TimestampType
    is_transactional: bool
    is_control: bool
    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_timestamp_ms: int
    max_timestamp_ms: int
    records: tuple[Record, ...]
    control_type: ControlType | None = None


@dataclass(frozen=True, slots=True)
class CorruptBatch:
    """A batch that could not be decoded: the offsets it covers and why."""

    base_offset: int
    last_offset: int
    reason: str


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """One entry of a (classic) fetch response's aborted-transactions list."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class DecodedRecords:
    """Everything found in one ``records`` field."""

    batches: tuple[RecordBatch, ...] = ()
    corrupt_batches: tuple[CorruptBatch, ...] = ()
    truncated_bytes: int = 0

    @property
    def records(self) -> tuple[Record, ...]:
        """The data records of every data batch, in offset order."""
        return tuple(record for batch in self.batches for record in batch.records)

    @property
    def control_batches(self) -> tuple[RecordBatch, ...]:
        """The control (transaction marker) batches, skipped by :attr:`records`."""
        return tuple(batch for batch in self.batches if batch.is_control)


def decode_record_batches(data: bytes | None, *, verify_crc: bool = True) -> DecodedRecords:
    """Decode every complete batch in ``data`` (a fetch response's ``records``; None is empty).

    Never raises for bad batch contents: a batch that fails is listed in ``corrupt_batches``.
    """
    if not data:
        return DecodedRecords()
    view = memoryview(data)
    batches: list[RecordBatch] = []
    corrupt: list[CorruptBatch] = []
    position = 0
    while len(view) - position >= _LOG_OVERHEAD:
        base_offset, batch_length = _PREFIX.unpack_from(view, position)
        end = position + _LOG_OVERHEAD + batch_length
        if batch_length < _HEADER.size:
            # The length itself is bad, so the next batch cannot be found: stop here.
            reason = f"batch length {batch_length} is shorter than a batch header"
            corrupt.append(CorruptBatch(base_offset, base_offset, reason))
            position = len(view)
            break
        if end > len(view):
            break  # a partial batch at the end: the broker's byte limit cut it
        try:
            batches.append(_decode_batch(view[position:end], verify_crc))
        except RecordDecodeError as error:
            corrupt.append(_corrupt(view[position:end], base_offset, str(error)))
        position = end
    return DecodedRecords(tuple(batches), tuple(corrupt), len(view) - position)


def _corrupt(batch: memoryview, base_offset: int, reason: str) -> CorruptBatch:
    last_offset = base_offset
    if len(batch) >= _LOG_OVERHEAD + _HEADER.size:
        last_offset = base_offset + _HEADER.unpack_from(batch, _LOG_OVERHEAD)[4]
    return CorruptBatch(base_offset, last_offset, reason)


def _decode_batch(batch: memoryview, verify_crc: bool) -> RecordBatch:
    if len(batch) < _LOG_OVERHEAD + _HEADER.size:
        raise RecordDecodeError(f"batch of {len(batch)} bytes is shorter than a batch header")
    base_offset, _ = _PREFIX.unpack_from(batch, 0)
    (
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _HEADER.unpack_from(batch, _LOG_OVERHEAD)
    if magic != 2:
        raise RecordDecodeError(f"record batch magic {magic} is not supported (only v2)")
    if verify_crc and crc & 0xFFFFFFFF != crc32c(batch[_CRC_END:]):
        raise RecordDecodeError("record batch CRC-32C mismatch")
    codec_bits = attributes & _COMPRESSION_MASK
    try:
        compression = Compression(codec_bits)
    except ValueError:
        raise RecordDecodeError(f"unknown compression codec {codec_bits}") from None
    timestamp_type = TimestampType(1 if attributes & _TIMESTAMP_TYPE_BIT else 0)
    is_control = bool(attributes & _CONTROL_BIT)
    payload = _decompress(compression, batch[_LOG_OVERHEAD + _HEADER.size :])
    records = read_records(
        payload, count, base_offset, base_timestamp, max_timestamp, timestamp_type
    )
    control_type: ControlType | None = None
    if is_control:
        control_type = _control_type(records)
        records = []
    return RecordBatch(
        base_offset=base_offset,
        last_offset=base_offset + last_offset_delta,
        partition_leader_epoch=leader_epoch,
        compression=compression,
        timestamp_type=timestamp_type,
        is_transactional=bool(attributes & _TRANSACTIONAL_BIT),
        is_control=is_control,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_timestamp_ms=base_timestamp,
        max_timestamp_ms=max_timestamp,
        records=tuple(records),
        control_type=control_type,
    )


def _control_type(records: Sequence[Record]) -> ControlType | None:
    if not records or records[0].key is None or len(records[0].key) < _CONTROL_KEY.size:
        return None
    _, marker = _CONTROL_KEY.unpack_from(records[0].key)
    try:
        return ControlType(marker)
    except ValueError:
        return None


def _decompress(compression: Compression, payload: memoryview) -> bytes:
    try:
        if compression is Compression.NONE:
            return bytes(payload)
        if compression is Compression.GZIP:
            return bytes(cramjam.gzip.decompress(payload))
        if compression is Compression.SNAPPY:
            return _snappy(payload)
        if compression is Compression.LZ4:
            return bytes(cramjam.lz4.decompress(payload))
        return bytes(cramjam.zstd.decompress(payload))
    except cramjam.DecompressionError as error:
        raise RecordDecodeError(f"{compression.name.lower()} payload: {error}") from error


def _snappy(payload: memoryview) -> bytes:
    if bytes(payload[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(payload))
    # xerial framing: 16-byte header, then blocks of (int32 length, raw snappy block).
    parts: list[bytes] = []
    position = _XERIAL_HEADER_BYTES
    while position < len(payload):
        if len(payload) - position < _INT32.size:
            raise RecordDecodeError("xerial snappy block length cut short")
        (length,) = _INT32.unpack_from(payload, position)
        position += _INT32.size
        if length < 0 or position + length > len(payload):
            raise RecordDecodeError(f"xerial snappy block of {length} bytes overruns the batch")
        parts.append(bytes(cramjam.snappy.decompress_raw(payload[position : position + length])))
        position += length
    return b"".join(parts)


def drop_aborted(
    batches: Iterable[RecordBatch], aborted: Iterable[AbortedTransaction]
) -> list[RecordBatch]:
    """The batches a ``read_committed`` reader keeps, given a fetch's aborted transactions.

    This is the classic Fetch rule (ShareFetch has no aborted list: there the broker applies the
    group's ``share.isolation.level`` and never lists aborted records as acquired). A
    transactional data batch is dropped while its producer has an aborted transaction that
    started at or before it and has not yet met its ABORT marker; control batches are dropped.
    """
    pending = sorted(aborted, key=lambda entry: entry.first_offset)
    open_aborts: set[int] = set()
    kept: list[RecordBatch] = []
    index = 0
    for batch in batches:
        while index < len(pending) and pending[index].first_offset <= batch.last_offset:
            open_aborts.add(pending[index].producer_id)
            index += 1
        if batch.is_control:
            if batch.control_type is ControlType.ABORT:
                open_aborts.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in open_aborts:
            continue
        kept.append(batch)
    return kept
