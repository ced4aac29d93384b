"""Where the partitions a group assignment adds start fetching, on the application thread.

A new partition starts where ``on_assign`` said (``incremental_assign`` with an offset), else at
its committed offset, else where the reset policy says. The member fetches the committed offsets
on its background loop and does not hold the assignment (nor its ack) for them
(``ApplyAssignment.awaiting_start``): such a partition is owned at once and starts fetching when
``StartFetching`` brings its offset. With nothing committed and a reset policy of earliest or
latest, that ``StartFetching`` names a follow-up lookup of the policy's absolute offset
(``then_request_id``), and the partition waits for that one's ``StartFetching`` instead.
librdkafka is handed absolute offsets only on that path: its own lookup of a logical offset can
outlive ``incremental_unassign`` and move a later fetch back (see ``consumer._client.dataplane``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

from consumer.member import ApplyAssignment, StartFetching, TopicPartition

#: (topic, partition): the data plane's key.
PartitionKey = tuple[str, int]


class StartOffsets:
    """The start offsets of a group assignment's new partitions, and those still waiting."""

    def __init__(self, reset_start: Callable[[], int]) -> None:
        #: The reset policy's logical offset (OFFSET_BEGINNING, OFFSET_END or OFFSET_STORED).
        self._reset_start = reset_start
        #: Partition -> the ListStartOffsets request whose answer it waits for.
        self._awaiting: dict[PartitionKey, int] = {}

    @property
    def awaiting(self) -> Mapping[PartitionKey, int]:
        """The partitions owned but not fetched yet, with the lookup each waits for."""
        return self._awaiting

    def choose(
        self, command: ApplyAssignment, overrides: Mapping[PartitionKey, int]
    ) -> dict[PartitionKey, int]:
        """Where each added partition starts now; those waiting for a lookup are kept back."""
        waiting = set(command.awaiting_start) if command.start_request_id is not None else set()
        starts: dict[PartitionKey, int] = {}
        for tp in command.added:
            key = (tp.topic, tp.partition)
            self._awaiting.pop(key, None)
            if key in overrides:
                starts[key] = overrides[key]
            elif tp in waiting and command.start_request_id is not None:
                self._awaiting[key] = command.start_request_id
            else:
                starts[key] = self._reset_start()
        return starts

    def answered(
        self, command: StartFetching, owned: Collection[TopicPartition]
    ) -> dict[PartitionKey, int]:
        """The partitions of lookup ``command.request_id`` still waiting and owned, with their
        start: the offset found, else (no follow-up lookup) the reset policy's logical offset.
        Those without an offset wait for ``command.then_request_id`` when it is set."""
        starts: dict[PartitionKey, int] = {}
        done = [key for key, waits_for in self._awaiting.items() if waits_for == command.request_id]
        for key in done:
            del self._awaiting[key]
            tp = TopicPartition(*key)
            if tp not in owned:
                continue
            offset = command.offsets.get(tp)
            if offset is not None:
                starts[key] = offset
            elif command.then_request_id is not None:
                self._awaiting[key] = command.then_request_id
            else:
                starts[key] = self._reset_start()
        return starts

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions no longer owned (revoked, lost) wait for nothing."""
        for tp in partitions:
            self._awaiting.pop((tp.topic, tp.partition), None)
