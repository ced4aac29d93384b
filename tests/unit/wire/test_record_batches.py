"""Record batch decoding: real-producer vectors for every codec, and hand-built edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest
from batch_builder import Rec, batch, control_batch
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer._wire import (
    AbortedTransaction,
    Compression,
    ControlType,
    TimestampType,
    decode_record_batches,
    drop_aborted,
)

VECTORS = Path(__file__).parent / "data" / "records"
#: (offset delta, timestamp delta, key, value, headers) of one hand-built record.
Row = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def _expected_vector_records() -> list[tuple[int, bytes | None, bytes | None, list[object], int]]:
    """What ``tests/integration/test_share_wire.py`` produces (and these vectors hold)."""
    rows: list[tuple[int, bytes | None, bytes | None, list[object], int]] = [
        (
            i,
            f"key-{i}".encode(),
            (f"value-{i}-" + "x" * 200).encode(),
            [("h-index", str(i).encode()), ("h-null", None), ("h-index", b"again")],
            1_700_000_000_000 + i,
        )
        for i in range(20)
    ]
    rows.append((20, b"tombstone", None, [], 1_700_000_000_100))
    rows.append((21, None, b"no-key", [], 1_700_000_000_101))
    return rows


VECTOR_CASES = {
    "none-by-producer": Compression.NONE,
    "gzip-by-producer": Compression.GZIP,
    "snappy-by-producer": Compression.SNAPPY,
    "lz4-by-producer": Compression.LZ4,
    "zstd-by-producer": Compression.ZSTD,
    "gzip-by-broker": Compression.GZIP,
    "snappy-by-broker": Compression.SNAPPY,
    "lz4-by-broker": Compression.LZ4,
    "zstd-by-broker": Compression.ZSTD,
}


@pytest.mark.parametrize(("name", "codec"), VECTOR_CASES.items(), ids=list(VECTOR_CASES))
def test_real_producer_batches_decode_for_every_codec(name: str, codec: Compression) -> None:
    data = (VECTORS / f"{name}-0.bin").read_bytes()
    decoded = decode_record_batches(data)
    assert decoded.corrupt_batches == ()
    assert decoded.truncated_bytes == 0
    assert {b.compression for b in decoded.batches} == {codec}
    got = [(r.offset, r.key, r.value, list(r.headers), r.timestamp_ms) for r in decoded.records]
    assert got == _expected_vector_records()
    assert {r.timestamp_type for r in decoded.records} == {TimestampType.CREATE_TIME}


def test_the_broker_writes_xerial_snappy_and_librdkafka_raw_snappy() -> None:
    assert b"\x82SNAPPY\x00" in (VECTORS / "snappy-by-broker-0.bin").read_bytes()
    assert b"\x82SNAPPY\x00" not in (VECTORS / "snappy-by-producer-0.bin").read_bytes()


def test_a_real_batch_cut_anywhere_is_ignored_after_the_whole_batches() -> None:
    one = (VECTORS / "zstd-by-producer-0.bin").read_bytes()
    whole = decode_record_batches(one)
    assert len(whole.batches) == 1
    data = one + one  # the same batch twice stands for a second batch
    for cut in range(len(one), len(data)):
        decoded = decode_record_batches(data[:cut])
        assert decoded.corrupt_batches == ()
        assert decoded.batches == whole.batches
        assert decoded.truncated_bytes == cut - len(one)
    for cut in range(1, len(one)):
        assert decode_record_batches(one[:cut]).batches == ()


CODECS = [(codec, False) for codec in Compression] + [(Compression.SNAPPY, True)]


@pytest.mark.parametrize(
    ("codec", "xerial"), CODECS, ids=[f"{c.name}{'-xerial' if x else ''}" for c, x in CODECS]
)
def test_hand_built_batches_decode_with_every_codec(codec: Compression, xerial: bool) -> None:
    records = [
        Rec(0, key=b"k", value=b"v" * 300, headers=[("a", b"1")]),
        Rec(1, key=None, value=None, timestamp_delta=5),
        Rec(3, key=b"gap-before", value=b"", timestamp_delta=7, headers=[("n", None)]),
    ]
    decoded = decode_record_batches(batch(records, base_offset=40, codec=codec, xerial=xerial))
    [only] = decoded.batches
    assert only.compression is codec
    assert (only.base_offset, only.last_offset) == (40, 43)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp_ms) for r in only.records] == [
        (40, b"k", b"v" * 300, (("a", b"1"),), 1_000),
        (41, None, None, (), 1_005),
        (43, b"gap-before", b"", (("n", None),), 1_007),
    ]


def test_log_append_time_gives_every_record_the_batch_max_timestamp() -> None:
    data = batch([Rec(0), Rec(1, timestamp_delta=9)], log_append=True, max_timestamp=77_000)
    records = decode_record_batches(data).records
    assert [(r.timestamp_ms, r.timestamp_type) for r in records] == [
        (77_000, TimestampType.LOG_APPEND_TIME),
        (77_000, TimestampType.LOG_APPEND_TIME),
    ]


def test_control_batches_are_skipped_and_reported_with_their_marker() -> None:
    data = (
        batch([Rec(0, value=b"a"), Rec(1, value=b"b")], transactional=True, producer_id=7)
        + control_batch(2, 7, commit=True)
        + batch([Rec(0, value=b"c")], base_offset=3)
    )
    decoded = decode_record_batches(data)
    assert [r.value for r in decoded.records] == [b"a", b"b", b"c"]
    [marker] = decoded.control_batches
    assert (marker.base_offset, marker.control_type, marker.records) == (2, ControlType.COMMIT, ())
    assert decoded.batches[0].is_transactional


def test_read_committed_drops_aborted_transactions_until_their_marker() -> None:
    data = (
        batch([Rec(0, value=b"aborted")], base_offset=0, transactional=True, producer_id=5)
        + batch([Rec(0, value=b"plain")], base_offset=1)
        + batch([Rec(0, value=b"other-pid")], base_offset=2, transactional=True, producer_id=6)
        + control_batch(3, 5, commit=False)
        + batch([Rec(0, value=b"after")], base_offset=4, transactional=True, producer_id=5)
    )
    batches = decode_record_batches(data).batches
    kept = drop_aborted(batches, [AbortedTransaction(producer_id=5, first_offset=0)])
    assert [r.value for b in kept for r in b.records] == [b"plain", b"other-pid", b"after"]
    assert [r.value for b in drop_aborted(batches, []) for r in b.records] == [
        b"aborted",
        b"plain",
        b"other-pid",
        b"after",
    ]


def test_a_partial_trailing_batch_is_ignored_and_measured() -> None:
    whole = batch([Rec(0, value=b"x")])
    cut = batch([Rec(0, value=b"y")], base_offset=1)[:-3]
    decoded = decode_record_batches(whole + cut)
    assert [r.value for r in decoded.records] == [b"x"]
    assert decoded.truncated_bytes == len(cut)
    assert decode_record_batches(whole + b"\x00" * 5).truncated_bytes == 5


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (batch([Rec(0)], base_offset=9, corrupt_crc=True), "CRC"),
        (batch([Rec(0)], base_offset=9, codec=3, payload=b"not lz4 at all"), "lz4"),
        (batch([Rec(0)], base_offset=9, codec=1, payload=b"not gzip"), "gzip"),
        (batch([Rec(0)], base_offset=9, magic=1), "magic 1"),
        (batch([Rec(0)], base_offset=9, codec=0, payload=b"\x7f"), "runs past"),
        (batch([Rec(0)], base_offset=9, codec=5, payload=b""), "codec 5"),
    ],
    ids=["crc", "lz4", "gzip", "magic", "short-record", "codec"],
)
def test_a_corrupt_batch_is_reported_and_the_next_one_still_decodes(
    bad: bytes, reason: str
) -> None:
    good = batch([Rec(0, value=b"fine")], base_offset=10)
    decoded = decode_record_batches(bad + good)
    [corrupt] = decoded.corrupt_batches
    assert (corrupt.base_offset, corrupt.last_offset) == (9, 9)
    assert reason in corrupt.reason
    assert [r.value for r in decoded.records] == [b"fine"]


def test_a_bad_batch_length_stops_decoding() -> None:
    data = batch([Rec(0)])[:8] + (5).to_bytes(4, "big") + b"\x00" * 40
    decoded = decode_record_batches(data)
    assert decoded.batches == ()
    assert "shorter than a batch header" in decoded.corrupt_batches[0].reason


def test_nothing_decodes_to_nothing() -> None:
    assert decode_record_batches(None).batches == ()
    assert decode_record_batches(b"").records == ()


# The record loop decodes 1- and 2-byte varints inline and longer ones in a helper: records
# whose fields straddle those sizes (and the 0x01 / 0x00 single bytes of an absent key and of
# no headers) must decode exactly as they were encoded.
VARINT_EDGES = [0, 1, 63, 64, 8191, 8192]
_field_bytes = st.one_of(
    st.none(),
    st.sampled_from([0, 1, 63, 64, 65, 8191, 8192]).map(lambda n: b"v" * n),
    st.binary(max_size=80),
)
_records = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=2**31 - 1),  # offset delta
        st.one_of(st.sampled_from([-(2**40), -8193, -65, -64, -1]), st.integers(0, 2**40)),
        _field_bytes,  # key
        _field_bytes,  # value
        st.lists(st.tuples(st.text(max_size=70), _field_bytes), max_size=3),
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda row: row[0],
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(_records)
def test_records_decode_exactly_as_encoded_across_varint_sizes(rows: list[Row]) -> None:
    rows = sorted(rows)
    records = [Rec(d, key=k, value=v, timestamp_delta=t, headers=h) for d, t, k, v, h in rows]
    [decoded] = decode_record_batches(batch(records, base_offset=5)).batches
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in decoded.records] == [
        (5 + d, 1_000 + t, k, v, tuple(h)) for d, t, k, v, h in rows
    ]


@pytest.mark.parametrize("size", VARINT_EDGES)
def test_a_field_length_at_a_varint_boundary_decodes(size: int) -> None:
    records = [
        Rec(size, key=b"k" * size, value=b"v" * size, timestamp_delta=-size, headers=[("h", None)]),
        Rec(size + 1, key=None, value=None, timestamp_delta=size),
    ]
    [decoded] = decode_record_batches(batch(records)).batches
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in decoded.records] == [
        (size, 1_000 - size, b"k" * size, b"v" * size, (("h", None),)),
        (size + 1, 1_000 + size, None, None, ()),
    ]


def test_a_payload_cut_anywhere_is_a_corrupt_batch_never_an_exception() -> None:
    records = [
        Rec(0, key=b"k" * 70, value=b"v" * 9000, headers=[("name", b"x" * 70), ("n", None)]),
        Rec(1, value=None),
    ]
    payload = b"".join(r.encode() for r in records)
    for cut in range(len(payload)):
        decoded = decode_record_batches(batch(records, payload=payload[:cut]) + batch([Rec(0)]))
        [corrupt] = decoded.corrupt_batches
        assert ("runs past" in corrupt.reason) or ("does not match" in corrupt.reason), cut
        assert len(decoded.batches) == 1


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (b"\x02\x00\x00\x00\x01\x01\x00", "record length 1 does not match"),
        (b"\x0e\x00\x00\x00\x01\x01\x02\x01", "record header without a key"),
        (b"\x12\x00\x00\x00\x01\x01\x02\x02\xff\x01", "header key is not UTF-8"),
        (b"\x0c\x00\x00\x00\x01\x01\x01", "negative header count -1"),
        (b"\x0a\x00" + b"\xff" * 10, "longer than 10 bytes"),
    ],
    ids=["length-mismatch", "header-null-key", "header-not-utf8", "negative-headers", "varint"],
)
def test_malformed_records_are_reported_with_their_reason(record: bytes, reason: str) -> None:
    [corrupt] = decode_record_batches(batch([Rec(0)], payload=record)).corrupt_batches
    assert reason in corrupt.reason
