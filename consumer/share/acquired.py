"""Which fetched records this member may deliver: the acquired-records filter. Sans-I/O.

A ShareFetch partition returns whole log batches (``Records``) plus the inclusive offset ranges
this member acquired, each with a delivery count. Only acquired offsets are delivered, each with
its count; records outside every range belong to other members and are dropped. An acquired
offset with no deliverable record (a transaction marker, a compacted or aborted record) is a gap
to acknowledge as GAP; an acquired offset inside a batch that could not be decoded is to be
rejected (REJECT), as the Java client and librdkafka do.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

__all__ = [
    "AcquiredRangeLike",
    "AcquiredRecords",
    "OffsetRangeLike",
    "RecordLike",
    "filter_acquired",
]


class RecordLike(Protocol):
    """Anything with an offset (the wire layer's ``Record`` is one)."""

    @property
    def offset(self) -> int: ...


class AcquiredRangeLike(Protocol):
    """An inclusive acquired range with its delivery count (the wire's ``AcquiredRange``)."""

    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def delivery_count(self) -> int: ...


class OffsetRangeLike(Protocol):
    """An inclusive offset range (the wire's ``CorruptBatch`` is one)."""

    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...


R = TypeVar("R", bound=RecordLike)


@dataclass(frozen=True, slots=True)
class AcquiredRecords(Generic[R]):
    """The outcome of :func:`filter_acquired`.

    ``delivered`` are (record, delivery count) pairs in offset order; ``gaps`` are acquired
    offsets without a record (acknowledge them as GAP); ``unreadable`` are acquired offsets in
    undecodable batches (acknowledge them as REJECT); ``duplicates`` are offsets the broker
    listed in more than one range (the first range's count is used); ``dropped`` counts
    records that were returned but not acquired by this member.
    """

    delivered: tuple[tuple[R, int], ...] = ()
    gaps: tuple[int, ...] = ()
    unreadable: tuple[int, ...] = ()
    duplicates: tuple[int, ...] = ()
    dropped: int = 0


def filter_acquired(
    records: Iterable[R],
    acquired: Sequence[AcquiredRangeLike],
    unreadable: Sequence[OffsetRangeLike] = (),
) -> AcquiredRecords[R]:
    """Keep the records whose offsets are acquired, each with its delivery count.

    Raises:
        ValueError: an acquired range whose last offset is before its first.
    """
    for entry in acquired:
        if entry.last_offset < entry.first_offset:
            raise ValueError(
                f"acquired range {entry.first_offset}..{entry.last_offset} ends before it starts"
            )
    records = list(records)
    offsets = [record.offset for record in records]
    ordered = all(
        before.last_offset < after.first_offset
        for before, after in zip(acquired, acquired[1:], strict=False)
    )
    if ordered and offsets == sorted(set(offsets)):
        return _filter_sorted(records, offsets, acquired, unreadable)
    return _filter_any(records, acquired, unreadable)


def _filter_sorted(
    records: list[R],
    offsets: list[int],
    acquired: Sequence[AcquiredRangeLike],
    unreadable: Sequence[OffsetRangeLike],
) -> AcquiredRecords[R]:
    """The usual case, in O(ranges x log records) plus slicing: records in strictly increasing
    offset order, acquired ranges sorted and disjoint (so nothing is a duplicate)."""
    delivered: list[tuple[R, int]] = []
    missing: list[int] = []
    taken = 0
    for entry in acquired:
        first, last = entry.first_offset, entry.last_offset
        low = bisect.bisect_left(offsets, first, taken)
        high = bisect.bisect_right(offsets, last, low)
        delivered.extend(zip(records[low:high], itertools.repeat(entry.delivery_count)))
        if high - low != last - first + 1:  # some acquired offsets hold no record
            present = set(offsets[low:high])
            missing.extend(offset for offset in range(first, last + 1) if offset not in present)
        taken = high
    bad = {
        offset
        for batch in unreadable
        for offset in missing
        if batch.base_offset <= offset <= batch.last_offset
    }
    return AcquiredRecords(
        delivered=tuple(delivered),
        gaps=tuple(offset for offset in missing if offset not in bad),
        unreadable=tuple(sorted(bad)),
        dropped=len(records) - len(delivered),
    )


def _filter_any(
    records: list[R],
    acquired: Sequence[AcquiredRangeLike],
    unreadable: Sequence[OffsetRangeLike],
) -> AcquiredRecords[R]:
    """Any order, overlapping ranges (duplicates) and repeated records included."""
    counts: dict[int, int] = {}
    duplicates: list[int] = []
    for entry in acquired:
        for offset in range(entry.first_offset, entry.last_offset + 1):
            if offset in counts:
                duplicates.append(offset)
            else:
                counts[offset] = entry.delivery_count
    delivered: list[tuple[R, int]] = []
    seen: set[int] = set()
    dropped = 0
    for record in sorted(records, key=lambda item: item.offset):
        count = counts.get(record.offset)
        if count is None or record.offset in seen:
            dropped += 1
            continue
        seen.add(record.offset)
        delivered.append((record, count))
    bad: list[int] = []
    for batch in unreadable:
        bad.extend(
            offset
            for offset in range(batch.base_offset, batch.last_offset + 1)
            if offset in counts and offset not in seen
        )
    bad_set = set(bad)
    gaps = [offset for offset in sorted(counts) if offset not in seen and offset not in bad_set]
    return AcquiredRecords(
        delivered=tuple(delivered),
        gaps=tuple(gaps),
        unreadable=tuple(sorted(bad_set)),
        duplicates=tuple(duplicates),
        dropped=dropped,
    )
