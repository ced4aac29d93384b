"""The data-plane side of assignment changes, run by :class:`~consumer._client.app_thread.
AppThreadServer` on the application thread: stop fetching revoked partitions (keeping their
positions for ``on_revoke``), apply a new assignment and start fetching its partitions at their
start offsets (the committed offset, the listed one, one chosen in ``on_assign``, or the reset
policy's logical offset).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED, KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._bridge.messages import AppEvent
from consumer._bridge.queues import ToBackground
from consumer._client.dataplane import DataPlane
from consumer._client.errors import kafka_exception
from consumer._client.start_offsets import StartOffsets
from consumer.member import (
    ApplyAssignment,
    AssignmentApplied,
    FetchingStopped,
    TopicPartition,
)

__all__ = ["FetchChanges"]


class FetchChanges:
    """Base of ``AppThreadServer``: what an assignment change does to the data plane."""

    dataplane: DataPlane
    to_background: ToBackground[AppEvent]
    auto_offset_reset: str
    consumed_offsets: Callable[[Iterable[TopicPartition]], dict[TopicPartition, int]]
    owned: set[TopicPartition]
    manual: set[TopicPartition]
    assign_overrides: dict[tuple[str, int], int] | None
    _pending_apply: ApplyAssignment | None
    _pending_errors: collections.deque[BaseException]
    stopped_positions: dict[tuple[str, int], int]
    start_offsets: StartOffsets

    def positions(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """``position()``: the data plane's positions, else those kept for a pending revoke."""
        wanted = list(keys)
        known = self.dataplane.positions(wanted)
        for key in wanted:
            if key not in known and key in self.stopped_positions:
                known[key] = self.stopped_positions[key]
        return known

    def choose_start_offsets(self, partitions: Iterable[KafkaTopicPartition]) -> None:
        """``incremental_assign()`` inside ``on_assign``: where the new partitions start (an
        absolute offset, OFFSET_BEGINNING or OFFSET_END); ignored in other callbacks."""
        overrides = self.assign_overrides
        if overrides is None:
            return  # another callback: the member owns the assignment
        for tp in partitions:
            if tp.offset >= 0 or tp.offset in (OFFSET_BEGINNING, OFFSET_END):
                overrides[(tp.topic, tp.partition)] = tp.offset

    def seek_waiting(self, partition: KafkaTopicPartition) -> bool:
        """``seek()`` of a partition owned but not fetched yet (waiting for its committed or
        reset offset): it starts at the sought offset now, and the lookup's answer no longer
        moves it. False for any other partition or offset (the data plane's ``seek`` decides).
        """
        tp = TopicPartition(partition.topic, partition.partition)
        key = (tp.topic, tp.partition)
        offset = partition.offset
        if key not in self.start_offsets.awaiting or tp not in self.owned:
            return False
        if offset < 0 and offset not in (OFFSET_BEGINNING, OFFSET_END):
            return False
        self.start_offsets.forget([tp])
        self._start_fetching({key: offset})
        return True

    def _stop_fetching(self, request_id: int, partitions: Iterable[TopicPartition]) -> None:
        partitions = tuple(partitions)
        # Read on the thread that receives records, right before fetching stops: the offsets
        # cover exactly the records already returned, so the pre-revoke commit hands the
        # partitions over without a gap and without a duplicate.
        offsets = self.consumed_offsets(partitions)
        keys = [(tp.topic, tp.partition) for tp in partitions]
        self.stopped_positions.update(self.dataplane.positions(keys))
        self.dataplane.unassign(keys)
        # A partition stopped while it waits for its start offset must not start when that
        # answer comes: it is being revoked (its pre-revoke commit is computed now).
        self.start_offsets.forget(partitions)
        self.to_background.put(FetchingStopped(request_id, offsets))

    def _forget_stopped(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.stopped_positions.pop((tp.topic, tp.partition), None)

    def _apply(self, command: ApplyAssignment) -> None:
        """Remove revoked partitions now; add new ones after ``on_assign`` (which follows).

        The member owns the new assignment from now on (``assignment()`` and commits inside
        ``on_assign`` see it); only the data plane waits for ``on_assign``'s start offsets.
        """
        self.dataplane.unassign((tp.topic, tp.partition) for tp in command.removed)
        self.start_offsets.forget(command.removed)
        self.owned = set(command.assigned)
        self._pending_apply = command

    def _finish_apply(self, overrides: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Complete the pending assignment change; return where each new partition starts.

        The member is told at once: ownership does not wait for the data plane, nor for the
        committed offsets or the reset policy's start offsets (partitions waiting for them
        start at ``StartFetching``:
        see :mod:`consumer._client.start_offsets`). Java acknowledges the same way, before
        positions are resolved.
        """
        command, self._pending_apply = self._pending_apply, None
        if command is None:
            return {}
        starts = self.start_offsets.choose(command, overrides)
        self.owned = set(command.assigned)
        self.to_background.put(AssignmentApplied(command.request_id))
        return starts

    def _start_fetching(self, starts: dict[tuple[str, int], int]) -> None:
        if not starts:
            return
        clash = sorted(key for key in starts if TopicPartition(*key) in self.manual)
        if clash:
            # As librdkafka: a group assignment naming a manually assigned partition (assign()
            # then subscribe()) is not applied, and poll() raises _CONFLICT.
            topic, partition = clash[0]
            self._pending_errors.append(
                kafka_exception(
                    KafkaError._CONFLICT,
                    f"{topic} [{partition}] is already part of the current assignment",
                )
            )
            return
        self.dataplane.assign(starts)

    def _reset_start(self) -> int:
        if self.auto_offset_reset == "earliest":
            return OFFSET_BEGINNING
        if self.auto_offset_reset == "latest":
            return OFFSET_END
        # "error": let librdkafka look for a stored offset and raise its reset error.
        return OFFSET_STORED
