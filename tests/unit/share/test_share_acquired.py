"""The acquired-records filter (sans-I/O)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumer._wire import AcquiredRange, CorruptBatch, Record, TimestampType
from consumer.share.acquired import _filter_any, filter_acquired


def rec(offset: int) -> Record:
    return Record(offset, 0, TimestampType.CREATE_TIME, None, str(offset).encode())


def test_only_acquired_offsets_are_delivered_with_their_counts() -> None:
    records = [rec(o) for o in range(10)]
    result = filter_acquired(records, [AcquiredRange(2, 3, 1), AcquiredRange(6, 6, 3)])
    assert [(r.offset, count) for r, count in result.delivered] == [(2, 1), (3, 1), (6, 3)]
    assert result.dropped == 7
    assert result.gaps == ()


def test_acquired_offsets_without_records_are_gaps() -> None:
    # 5 is a transaction marker (no record), 8..9 lie beyond the returned records.
    records = [rec(4), rec(6), rec(7)]
    result = filter_acquired(records, [AcquiredRange(4, 9, 2)])
    assert [r.offset for r, _ in result.delivered] == [4, 6, 7]
    assert result.gaps == (5, 8, 9)


def test_offsets_in_undecodable_batches_are_to_reject_not_gaps() -> None:
    result = filter_acquired(
        [rec(0)], [AcquiredRange(0, 5, 1)], [CorruptBatch(2, 4, "CRC mismatch")]
    )
    assert result.unreadable == (2, 3, 4)
    assert result.gaps == (1, 5)


def test_records_arrive_sorted_and_duplicates_are_reported() -> None:
    result = filter_acquired(
        [rec(3), rec(1), rec(3)], [AcquiredRange(1, 3, 1), AcquiredRange(3, 3, 4)]
    )
    assert [(r.offset, c) for r, c in result.delivered] == [(1, 1), (3, 1)]
    assert result.duplicates == (3,)
    assert result.dropped == 1
    assert result.gaps == (2,)


def test_any_record_type_with_an_offset_works() -> None:
    @dataclass(frozen=True)
    class Mine:
        offset: int

    result = filter_acquired([Mine(1), Mine(2)], [AcquiredRange(2, 2, 1)])
    assert result.delivered == ((Mine(2), 1),)


def test_a_backwards_range_is_refused() -> None:
    with pytest.raises(ValueError, match="ends before it starts"):
        filter_acquired([], [AcquiredRange(5, 4, 1)])


@given(
    st.sets(st.integers(0, 60), max_size=40),
    st.lists(st.tuples(st.integers(0, 70), st.integers(0, 5), st.integers(1, 4)), max_size=6),
    st.lists(st.tuples(st.integers(0, 70), st.integers(0, 5)), max_size=2),
)
def test_the_sorted_fast_path_agrees_with_the_general_one(
    offsets: set[int],
    ranges: list[tuple[int, int, int]],
    corrupt: list[tuple[int, int]],
) -> None:
    # Sorted, disjoint ranges (the fast path's precondition) built from the drawn ones.
    acquired: list[AcquiredRange] = []
    for first, extra, count in sorted(ranges):
        if not acquired or first > acquired[-1].last_offset:
            acquired.append(AcquiredRange(first, first + extra, count))
    records = [rec(o) for o in sorted(offsets)]
    bad = [CorruptBatch(first, first + extra, "CRC") for first, extra in corrupt]
    fast = filter_acquired(records, acquired, bad)
    general = _filter_any(records, acquired, bad)
    assert fast == general
    assert fast == filter_acquired(list(reversed(records)), acquired, bad)  # unsorted: general
