"""The data plane: a librdkafka consumer used only to fetch records of partitions we assign.

The librdkafka consumer comes from :mod:`consumer._client.librdkafka`. It never subscribes and
never commits: the member does that with its epoch (or, for manually assigned partitions, as a
non-member). Partitions are added and removed with ``incremental_assign`` /
``incremental_unassign`` at explicit start offsets: the committed offset the member fetched, or
the absolute beginning/end the reset policy names, which the member looked up with ListOffsets
on the background loop (``StartFetching``; see ``consumer._client.start_offsets``), so the group
path makes no lookup on the application thread. Logical offsets still come here when that lookup
failed, from ``on_assign``'s own ``incremental_assign`` and from manual assignment; they are
resolved first (see ``DataPlane._resolve_logical``). librdkafka never consults a group for the
member's partitions; only a manually assigned partition given without an offset starts at
``OFFSET_STORED``, which librdkafka resolves with an OffsetFetch, as confluent-kafka does.

librdkafka refuses to create a consumer without a ``group.id`` even in assign mode; the group id
it is given is the member's, but it neither joins that group nor commits to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from consumer._client.errors import kafka_exception
from consumer._client.held import HeldRecords
from consumer._client.librdkafka import assign_mode_consumer

#: Logical start positions a reset policy maps to.
START_AT_BEGINNING = OFFSET_BEGINNING
START_AT_END = OFFSET_END

TopicPartitionKey = tuple[str, int]
#: Bound of the one metadata request that warms a new topic (see DataPlane._warm_metadata).
_METADATA_WARMUP_TIMEOUT_S = 5.0
#: Bound of the ListOffsets that turns logical start offsets into absolute ones (see
#: DataPlane._resolve_logical); past it the logical offsets go to librdkafka as they are.
_RESOLVE_TIMEOUT_S = 2.0
_LOGICAL_STARTS = frozenset({START_AT_BEGINNING, START_AT_END})


class DataPlane:
    """A thin adapter over ``confluent_kafka.Consumer`` in incremental assign mode.

    ``config`` is the librdkafka dict of the data plane, already validated; auto-commit and
    offset storing are forced off here whatever it says.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._consumer = assign_mode_consumer(config)
        #: Records taken in a batch for ``poll()`` and not handed out yet: every method below
        #: that hands out records, reads positions or changes what is fetched accounts for them.
        self.held = HeldRecords(self._consumer.consume)
        self._assigned: set[TopicPartitionKey] = set()
        self._topics_with_metadata: set[str] = set()
        self._closed = False

    @property
    def has_assignment(self) -> bool:
        """True when at least one partition is fetched (cheap: no copy)."""
        return bool(self._assigned)

    @property
    def assigned(self) -> frozenset[TopicPartitionKey]:
        """The partitions records are currently fetched for."""
        return frozenset(self._assigned)

    def assign(self, start_offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Start fetching each partition at its offset (absolute, or START_AT_*)."""
        partitions = [
            TopicPartition(topic, partition, offset)
            for (topic, partition), offset in start_offsets.items()
            if (topic, partition) not in self._assigned
        ]
        self._warm_metadata(tp.topic for tp in partitions if tp.offset < 0)
        self._resolve_logical([tp for tp in partitions if tp.offset in _LOGICAL_STARTS])
        if partitions:
            self._consumer.incremental_assign(partitions)
            for tp in partitions:
                self._assigned.add((tp.topic, tp.partition))
                self.held.note_start((tp.topic, tp.partition), tp.offset)

    def _resolve_logical(self, partitions: list[TopicPartition]) -> None:
        """Replace OFFSET_BEGINNING / OFFSET_END by the absolute offsets they stand for now.

        librdkafka resolves a logical start offset with a ListOffsets of its own, and that
        lookup outlives ``incremental_unassign``: when a partition is unassigned before it
        finishes (a rebalance that moves it on at once) and assigned again later at an absolute
        offset (the committed offset its next owner left), the stale lookup lands about half
        a second later and moves the fetch back to the beginning (or the end). Records are
        then redelivered (or skipped) on a clean handover; librdkafka 2.16.0, reproduced by
        ``tests/integration/test_dataplane_reassign.py``. An absolute offset needs no lookup.
        One ListOffsets for all of them (earliest: -2, latest: -1, at the data plane's
        isolation level, as librdkafka's own reset uses); on an error the logical offsets stay.

        It blocks the application thread (p50 152 ms with 50 data planes in one process), so
        the group path does not come here: the member's round resolves the reset policy's
        offsets on the background loop. This is the fallback for a failed lookup, for logical
        offsets given in ``on_assign`` and for manual assignment.
        """
        if not partitions:
            return
        query = [TopicPartition(tp.topic, tp.partition, tp.offset) for tp in partitions]
        try:
            found = self._consumer.offsets_for_times(query, timeout=_RESOLVE_TIMEOUT_S)
        except KafkaException:
            return
        resolved = {
            (tp.topic, tp.partition): tp.offset
            for tp in found
            if tp.error is None and tp.offset >= 0
        }
        for tp in partitions:
            offset = resolved.get((tp.topic, tp.partition))
            if offset is not None:
                tp.offset = offset

    def _warm_metadata(self, topics: Iterable[str]) -> None:
        """Fetch metadata once for topics about to start at a logical offset.

        In assign mode librdkafka resolves OFFSET_BEGINNING/END only once it knows the
        partition's leader, and nothing has asked for the topic's metadata yet: the first
        record then waits for a ~500 ms retry (measured in docs/benchmarks.md). One metadata
        request per new topic (~60 ms cold, then cached) removes that wait.
        """
        for topic in set(topics) - self._topics_with_metadata:
            try:
                self._consumer.list_topics(topic, timeout=_METADATA_WARMUP_TIMEOUT_S)
            except KafkaException:
                continue  # a warm-up only: librdkafka still resolves the offset on its own
            self._topics_with_metadata.add(topic)

    def unassign(self, partitions: Iterable[TopicPartitionKey]) -> None:
        """Stop fetching these partitions; librdkafka drops what it had prefetched for them."""
        owned = [key for key in partitions if key in self._assigned]
        if owned:
            self.held.drop(owned)
            self._consumer.incremental_unassign([TopicPartition(t, p) for t, p in owned])
            self._assigned.difference_update(owned)

    def poll(self, timeout_s: float) -> Message | None:
        """The next held record, else one record or event from librdkafka, or ``None`` after
        ``timeout_s`` (a wait takes one record: a batch would wait until it is full)."""
        if len(self.held):
            return self.held.take()
        return self._consumer.poll(timeout_s)

    def poll_events(self) -> Message | None:
        """librdkafka's ``poll(0)`` for its callbacks and events while ``poll()`` takes no
        record; ``None`` while records are held (nothing may overtake them)."""
        if len(self.held):
            return None
        return self._consumer.poll(0)

    def take_now(self) -> Message | None:
        """The next held record, else the first of a batch of what librdkafka holds now, or
        ``None`` when it holds nothing (no wait)."""
        return self.held.take_or_fetch()

    def consume(self, num_messages: int, timeout_s: float) -> list[Message]:
        """Up to ``num_messages`` records, held ones first, waiting at most ``timeout_s``
        (not at all when records were held)."""
        if not len(self.held):
            return self._consumer.consume(num_messages, timeout_s)
        messages = self.held.take_up_to(num_messages)
        if len(messages) < num_messages:
            messages.extend(self._consumer.consume(num_messages - len(messages), 0))
        return messages

    def positions(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Offset of the next record to return to the application, per partition (>= 0 only).

        librdkafka advances a partition's position when a record leaves it for the application;
        records taken in a batch but still held are not the application's yet, so a partition
        with held records is at the first of them. These are the offsets safe to commit.
        """
        keys = [key for key in partitions if key in self._assigned]
        if not keys:
            return {}
        result = self._consumer.position([TopicPartition(t, p) for t, p in keys])
        known = {(tp.topic, tp.partition): tp.offset for tp in result if tp.offset >= 0}
        return self.held.lower(known, keys)

    def pause(self, partitions: Sequence[TopicPartition]) -> None:
        """Stop returning records of these partitions until :meth:`resume` (held ones too)."""
        self._consumer.pause(list(partitions))
        self.held.set_aside((tp.topic, tp.partition) for tp in partitions)

    def resume(self, partitions: Sequence[TopicPartition]) -> None:
        """Resume partitions paused with :meth:`pause`; their held records come first."""
        self._consumer.resume(list(partitions))
        self.held.give_back((tp.topic, tp.partition) for tp in partitions)

    def seek(self, partition: TopicPartition) -> None:
        """Move the fetch position of an assigned partition (``_STATE`` for any other one,
        as confluent-kafka's consumer says)."""
        if (partition.topic, partition.partition) not in self._assigned:
            raise kafka_exception(
                KafkaError._STATE,
                f"Failed to seek to offset {partition.offset}: Local: Erroneous state",
            )
        self._consumer.seek(partition)
        key = (partition.topic, partition.partition)
        self.held.drop([key])
        self.held.note_start(key, partition.offset)

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout_s: float | None, cached: bool
    ) -> tuple[int, int] | None:
        """Low and high watermark of a partition (as ``confluent_kafka.Consumer`` returns)."""
        if timeout_s is None:
            return self._consumer.get_watermark_offsets(partition, cached=cached)
        return self._consumer.get_watermark_offsets(partition, timeout=timeout_s, cached=cached)

    def cluster_id(self, timeout_s: float) -> str | None:
        """The cluster id librdkafka learned from metadata."""
        cluster_id: str | None = self._consumer.cluster_id(timeout_s)
        return cluster_id

    def list_topics(self, topic: str | None, timeout_s: float) -> Any:
        """Cluster metadata (``confluent_kafka.admin.ClusterMetadata``)."""
        return self._consumer.list_topics(topic, timeout=timeout_s)

    def offsets_for_times(self, partitions: Sequence[TopicPartition], timeout_s: float) -> Any:
        """Earliest offsets whose timestamps are at or after the given ones."""
        return self._consumer.offsets_for_times(list(partitions), timeout=timeout_s)

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """librdkafka's ``set_sasl_credentials``: for its connections opened from now on."""
        self._consumer.set_sasl_credentials(username, password)

    def close(self) -> None:
        """Stop fetching and release librdkafka's resources (idempotent)."""
        if not self._closed:
            self._closed = True
            self._assigned.clear()
            self.held.clear()
            self._consumer.close()
