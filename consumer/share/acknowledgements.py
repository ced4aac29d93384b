"""Acknowledgements of share-group records: types, local bookkeeping and wire batching.

Sans-I/O. The application (or implicit mode) acknowledges each delivered offset once with a
terminal type (ACCEPT, RELEASE, REJECT); RENEW may come first, any number of times, to extend the
lock. GAP is wire-only: it finishes an acquired offset that holds no record. Pending
acknowledgements are grouped per partition into :class:`AcknowledgementBatch` ranges, the shape
ShareFetch and ShareAcknowledge carry: contiguous offsets become one range, with one type when
they agree and one type per offset when they do not.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "AcknowledgeType",
    "AcknowledgementBatch",
    "Acknowledgements",
    "TopicIdPartition",
    "encode_acknowledgements",
]


class TopicIdPartition(NamedTuple):
    """A partition as share RPCs name it: by topic id."""

    topic_id: uuid.UUID
    partition: int


class AcknowledgeType(enum.IntEnum):
    """Acknowledge type bytes of ShareFetch/ShareAcknowledge (ACCEPT=1, RELEASE=2, REJECT=3 as in
    confluent-kafka's ``AcknowledgeType``)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4

    @property
    def is_terminal(self) -> bool:
        """Whether this type finishes the record's delivery (RENEW only extends the lock)."""
        return self is not AcknowledgeType.RENEW


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """Offsets ``first_offset..last_offset`` (inclusive) and their types: one for the whole
    range, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[AcknowledgeType, ...]

    def __post_init__(self) -> None:
        span = self.last_offset - self.first_offset + 1
        if self.first_offset < 0 or span < 1:
            raise ValueError(
                f"acknowledgement range {self.first_offset}..{self.last_offset} is empty "
                "or negative"
            )
        if len(self.types) not in (1, span):
            raise ValueError(
                f"acknowledgement range {self.first_offset}..{self.last_offset} needs 1 type "
                f"or {span}, got {len(self.types)}"
            )

    def type_at(self, offset: int) -> AcknowledgeType:
        """The type this batch gives ``offset``."""
        if not self.first_offset <= offset <= self.last_offset:
            raise ValueError(f"offset {offset} is outside {self.first_offset}..{self.last_offset}")
        return self.types[0] if len(self.types) == 1 else self.types[offset - self.first_offset]

    def offsets(self) -> range:
        """Every offset of the range."""
        return range(self.first_offset, self.last_offset + 1)


def encode_acknowledgements(
    acknowledgements: Mapping[int, AcknowledgeType],
) -> tuple[AcknowledgementBatch, ...]:
    """Offset -> type as sorted, non-overlapping wire batches (contiguous offsets merged)."""
    batches: list[AcknowledgementBatch] = []
    run: list[tuple[int, AcknowledgeType]] = []
    for offset in sorted(acknowledgements):
        if run and offset != run[-1][0] + 1:
            batches.append(_batch(run))
            run = []
        run.append((offset, acknowledgements[offset]))
    if run:
        batches.append(_batch(run))
    return tuple(batches)


def _batch(run: list[tuple[int, AcknowledgeType]]) -> AcknowledgementBatch:
    kinds = tuple(kind for _, kind in run)
    if all(kind is kinds[0] for kind in kinds):
        kinds = kinds[:1]
    return AcknowledgementBatch(run[0][0], run[-1][0], kinds)


class _Runs:
    """One partition's pending acknowledgements as runs ``[first, last, type]``, in arrival
    order. While every run starts after the previous one ends (``ordered``), they are already
    the sorted, disjoint wire shape; an out-of-order add clears ``ordered`` and the runs are
    rebuilt from an offset -> type map (later adds win) when next read."""

    __slots__ = ("ordered", "runs")

    def __init__(self) -> None:
        self.runs: list[list[int]] = []  # [first, last, type]: AcknowledgeType is an int
        self.ordered = True

    def add(self, first: int, last: int, kind: AcknowledgeType) -> None:
        runs = self.runs
        if runs:
            tail = runs[-1]
            if first == tail[1] + 1 and tail[2] is kind:
                tail[1] = last
                return
            if first <= tail[1]:
                self.ordered = False
        runs.append([first, last, kind])

    def by_offset(self) -> dict[int, AcknowledgeType]:
        acks: dict[int, AcknowledgeType] = {}
        for first, last, kind in self.runs:
            acks.update(dict.fromkeys(range(first, last + 1), AcknowledgeType(kind)))
        return acks

    def replace(self, acks: Mapping[int, AcknowledgeType]) -> None:
        self.runs = []
        self.ordered = True
        for offset in sorted(acks):
            self.add(offset, offset, acks[offset])

    def sorted_runs(self) -> list[list[int]]:
        if not self.ordered:
            self.replace(self.by_offset())
        return self.runs

    def batches(self) -> tuple[AcknowledgementBatch, ...]:
        """The wire batches: adjacent runs merge, with one type per offset when types differ."""
        batches: list[AcknowledgementBatch] = []
        group: list[list[int]] = []
        for run in self.sorted_runs():
            if group and run[0] != group[-1][1] + 1:
                batches.append(_merged(group))
                group = []
            group.append(run)
        if group:
            batches.append(_merged(group))
        return tuple(batches)


def _merged(group: list[list[int]]) -> AcknowledgementBatch:
    kinds = {run[2] for run in group}
    if len(kinds) == 1:
        types: tuple[AcknowledgeType, ...] = (AcknowledgeType(group[0][2]),)
    else:
        types = tuple(
            AcknowledgeType(kind) for first, last, kind in group for _ in range(first, last + 1)
        )
    return AcknowledgementBatch(group[0][0], group[-1][1], types)


class Acknowledgements:
    """Pending acknowledgements per partition, until they are taken for a request.

    :meth:`add` refuses a second terminal type for the same delivery (explicit mode's rule, "The
    record cannot be acknowledged") until it is taken; RENEW followed by a terminal type is
    allowed, and a later terminal type replaces a pending RENEW. :meth:`forget` drops a
    delivery's memory (its session was reset), so the offset can be acknowledged again.

    Offsets are kept as runs of consecutive offsets with one type, so acknowledging a fetched
    batch in offset order (or as one :meth:`add_range`) costs O(1) per run, not per offset.
    """

    def __init__(self) -> None:
        self._pending: dict[TopicIdPartition, _Runs] = {}
        self._finished: dict[TopicIdPartition, set[int]] = {}

    def add(self, partition: TopicIdPartition, offset: int, kind: AcknowledgeType) -> None:
        """Record ``kind`` for ``offset``.

        Raises:
            ValueError: a negative offset, or a second terminal type for the same delivery.
        """
        self.add_range(partition, offset, offset, kind)

    def add_range(
        self,
        partition: TopicIdPartition,
        first_offset: int,
        last_offset: int,
        kind: AcknowledgeType,
    ) -> None:
        """Record ``kind`` for every offset of ``first_offset..last_offset`` (inclusive).

        Raises:
            ValueError: a negative or empty range, or an offset of it that already has a
                terminal type (nothing is recorded then).
        """
        if first_offset < 0:
            raise ValueError(f"offset must be >= 0, got {first_offset}")
        if last_offset < first_offset:
            raise ValueError(f"offset range {first_offset}..{last_offset} is empty")
        finished = self._finished.get(partition)
        if finished is None:
            finished = self._finished[partition] = set()
        offsets = range(first_offset, last_offset + 1)
        if finished and not finished.isdisjoint(offsets):
            offset = next(offset for offset in offsets if offset in finished)
            raise ValueError(
                f"offset {offset} of {partition.topic_id}/{partition.partition} was already "
                "acknowledged; a record takes one terminal acknowledgement (ACCEPT, RELEASE, "
                "REJECT)"
            )
        pending = self._pending.get(partition)
        if pending is None:
            pending = self._pending[partition] = _Runs()
        pending.add(first_offset, last_offset, kind)
        if kind is not AcknowledgeType.RENEW:
            if first_offset == last_offset:
                finished.add(first_offset)
            else:
                finished.update(offsets)

    def add_all(
        self, partition: TopicIdPartition, offsets: Iterable[int], kind: AcknowledgeType
    ) -> None:
        """:meth:`add` for several offsets of one partition."""
        for offset in offsets:
            self.add(partition, offset, kind)

    def forget(self, partition: TopicIdPartition, offsets: Iterable[int] | None = None) -> None:
        """Drop pending and finished state for ``offsets`` (None: the whole partition)."""
        if offsets is None:
            self._pending.pop(partition, None)
            self._finished.pop(partition, None)
            return
        pending = self._pending.get(partition)
        acks = pending.by_offset() if pending is not None else {}
        finished = self._finished.get(partition, set())
        for offset in offsets:
            acks.pop(offset, None)
            finished.discard(offset)
        if pending is not None:
            pending.replace(acks)

    def pending_partitions(self) -> frozenset[TopicIdPartition]:
        """Partitions with acknowledgements waiting to be sent."""
        return frozenset(partition for partition, acks in self._pending.items() if acks.runs)

    def has_renew(self, partitions: Iterable[TopicIdPartition] | None = None) -> bool:
        """Whether a pending acknowledgement (of ``partitions``, or any) is a RENEW."""
        chosen = self._pending.keys() if partitions is None else partitions
        renew = AcknowledgeType.RENEW
        for partition in chosen:
            pending = self._pending.get(partition)
            if pending is not None and any(run[2] is renew for run in pending.sorted_runs()):
                return True
        return False

    def take(
        self, partitions: Iterable[TopicIdPartition] | None = None
    ) -> dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]]:
        """Remove and return the pending acknowledgements of ``partitions`` (None: all), as
        wire batches; partitions with none pending are left out."""
        chosen = list(self._pending) if partitions is None else list(partitions)
        taken: dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]] = {}
        for partition in chosen:
            pending = self._pending.pop(partition, None)
            if pending is None or not pending.runs:
                continue
            taken[partition] = pending.batches()
            # Sent offsets are no longer in flight: the caller refuses late acks for them.
            finished = self._finished.get(partition)
            if finished:
                for first, last, _ in pending.runs:
                    finished.difference_update(range(first, last + 1))
        return taken

    def __len__(self) -> int:
        return sum(
            last - first + 1
            for pending in self._pending.values()
            for first, last, _ in pending.sorted_runs()
        )
