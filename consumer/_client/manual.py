"""Manual assignment: ``assign()`` / ``incremental_assign()`` / ``unassign()`` /
``incremental_unassign()`` called by the application outside rebalance callbacks.

As in confluent-kafka, a consumer that only assigns is not a group member: no member joins, the
data plane fetches the partitions named, and offsets are committed for the group without a
member (member id ``""``, epoch -1), which the broker accepts while the group has no
consumer-protocol members. A partition given without a start offset (``OFFSET_INVALID`` or
``OFFSET_STORED``) starts at the group's committed offset, else where ``auto.offset.reset``
says: the data plane's librdkafka consumer, which has the same ``group.id``, looks it up, as
confluent-kafka's own consumer does. ``enable.auto.commit`` commits the consumed offsets of
manually assigned partitions every ``auto.commit.interval.ms``, when they are unassigned and on
``close()``, with results to ``on_commit``, as librdkafka does.

Mixing with ``subscribe()`` follows librdkafka 2.16 under ``group.protocol=consumer`` (probed,
see ``docs/migrating-from-confluent-kafka.md``): once ``subscribe()`` was called, ``assign()``
and ``unassign()`` fail with ``_STATE`` for the rest of the consumer's life; the incremental
calls keep working on the one current assignment (the group's partitions plus the manual
ones). ``subscribe()`` after ``assign()`` keeps the manual partitions; a group assignment that
names one of them is not fetched and ``poll()`` raises ``_CONFLICT``, as librdkafka does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import OFFSET_INVALID, OFFSET_STORED, KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._client.app_thread import AppThreadServer
from consumer._client.commits import commit_outcome
from consumer._client.dataplane import DataPlane
from consumer._client.errors import ConsumerKafkaException, kafka_exception
from consumer._client.offsets import OffsetBook
from consumer.config import ConsumerConfig
from consumer.member import ReportCommitResult, TopicPartition

__all__ = ["ManualAssignment", "partition_name"]

_log = logging.getLogger("consumer")

#: How long ``close()`` waits for the final auto-commit of manually assigned partitions.
CLOSE_COMMIT_TIMEOUT_S = 10.0


def partition_name(tp: TopicPartition) -> str:
    """``topic [partition]``, as librdkafka names a partition in its errors."""
    return f"{tp.topic} [{tp.partition}]"


def _partitions_of(partitions: object) -> list[KafkaTopicPartition]:
    """``partitions`` checked as confluent-kafka checks it (a list of TopicPartition)."""
    if not isinstance(partitions, list):
        raise TypeError("requires list of TopicPartition")
    for tp in partitions:
        if not isinstance(tp, KafkaTopicPartition):
            raise TypeError("expected cimpl.TopicPartition")
    return partitions


def _duplicate(partitions: Sequence[KafkaTopicPartition]) -> TopicPartition | None:
    seen: set[TopicPartition] = set()
    for tp in partitions:
        key = TopicPartition(tp.topic, tp.partition)
        if key in seen:
            return key
        seen.add(key)
    return None


def start_offset(offset: int) -> int:
    """Where a manually assigned partition starts: the offset given, or (for OFFSET_INVALID
    and OFFSET_STORED) the committed offset, which the data plane looks up itself."""
    return OFFSET_STORED if offset in (OFFSET_INVALID, OFFSET_STORED) else offset


class ManualAssignment:
    """The partitions the application assigned itself, and their auto-commit.

    They are kept in ``server.manual`` (so ``assignment()``, ``commit()`` and
    ``store_offsets()`` see them next to the group's) and fetched by the data plane.
    ``start_runtime`` returns the background runtime, started on first use: it commits.
    """

    def __init__(
        self,
        config: ConsumerConfig,
        dataplane: DataPlane,
        server: AppThreadServer,
        offsets: OffsetBook,
        start_runtime: Callable[[], Any],
    ) -> None:
        self._config = config
        self._dataplane = dataplane
        self._server = server
        self._offsets = offsets
        self._start_runtime = start_runtime
        #: librdkafka's "subscribed once": from then on the assignment is cooperative.
        self.subscribed_once = False
        #: The start offset of each manual partition (``assignment()`` shows it, as librdkafka).
        self.given_offsets: dict[TopicPartition, int] = {}
        #: Offsets last committed (with success) per manually assigned partition.
        self._committed: dict[TopicPartition, int] = {}
        self._next_auto_commit_s = 0.0

    # --- the four calls ---------------------------------------------------------------------

    def assign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Replace the assignment with ``partitions`` (each at its offset, or the committed one)."""
        partitions = _partitions_of(partitions)
        duplicate = _duplicate(partitions)
        if duplicate is not None:
            raise kafka_exception(
                KafkaError._INVALID_ARG,
                f"Failed to set assignment: duplicate {partition_name(duplicate)} in input list",
            )
        if self.subscribed_once:
            raise self._cooperative_refusal("Failed to set assignment")
        self._remove(set(self._server.manual))
        self._add(partitions)

    def unassign(self) -> None:
        """Remove every manually assigned partition."""
        if self.subscribed_once:
            raise self._cooperative_refusal("Failed to remove assignment")
        self._remove(set(self._server.manual))

    def incremental_assign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Add ``partitions`` to the current assignment."""
        partitions = _partitions_of(partitions)
        duplicate = _duplicate(partitions)
        if duplicate is not None:
            raise kafka_exception(
                KafkaError._INVALID_ARG, f"Duplicate {partition_name(duplicate)} in input list"
            )
        current = self._server.assigned()
        for tp in partitions:
            key = TopicPartition(tp.topic, tp.partition)
            if key in current:
                raise kafka_exception(
                    KafkaError._CONFLICT,
                    f"{partition_name(key)} is already part of the current assignment",
                )
        self._add(partitions)

    def incremental_unassign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Remove ``partitions`` (each must be in the current assignment)."""
        partitions = _partitions_of(partitions)
        if not partitions:
            return
        current = self._server.assigned()
        if not current:
            raise kafka_exception(KafkaError._INVALID_ARG, "Can't subtract from empty assignment")
        keys = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
        for key in keys:
            if key not in current:
                raise kafka_exception(
                    KafkaError._INVALID_ARG,
                    f"{partition_name(key)} can't be unassigned since it is not in the current "
                    "assignment",
                )
        group_owned = sorted(key for key in keys if key not in self._server.manual)
        if group_owned:
            # librdkafka stops fetching them while the group still counts them as this
            # member's; ours leaves the group's partitions to the group (see the migration guide).
            raise kafka_exception(
                KafkaError._STATE,
                f"{partition_name(group_owned[0])} was assigned by the consumer group: "
                "its partitions are unassigned by the group (unsubscribe() to give them up)",
            )
        self._remove(set(keys))

    def _cooperative_refusal(self, what: str) -> ConsumerKafkaException:
        return kafka_exception(
            KafkaError._STATE,
            f"{what}: Local: Erroneous state (after subscribe() the assignment may only be "
            "changed with incremental_assign() or incremental_unassign(), as in librdkafka)",
        )

    # --- subscription, polling, close ------------------------------------------------------

    def on_subscribe(self) -> None:
        """``subscribe()`` was called: the group's partitions join the manual ones."""
        self.subscribed_once = True
        self._server.subscribed = True

    def on_unsubscribe(self) -> None:
        """``unsubscribe()`` was called: commits no longer need the group's ownership."""
        self._server.subscribed = False

    def poll(self) -> None:
        """On the polling thread: auto-commit the manual partitions when the interval elapsed."""
        if not self._server.manual or not self._config.enable_auto_commit:
            return
        now_s = self._now_s()
        if now_s < self._next_auto_commit_s:
            return
        self._next_auto_commit_s = now_s + self._config.auto_commit_interval_ms / 1000
        self._auto_commit(self._server.manual)

    def close(self) -> None:
        """Before the consumer closes: commit the manual partitions' consumed offsets
        (under auto-commit), waiting for the answer, as librdkafka's close does."""
        manual = set(self._server.manual)
        if not manual:
            return
        if self._config.enable_auto_commit:
            token = self._auto_commit(manual)
            if token is not None:
                self._wait_for(token)
        self._server.manual.clear()
        self.given_offsets.clear()

    # --- internals ----------------------------------------------------------------------------

    def _now_s(self) -> float:
        """The clock of the auto-commit interval (the testing kit's fake uses simulated time)."""
        return time.monotonic()

    def _add(self, partitions: Sequence[KafkaTopicPartition]) -> None:
        if not partitions:
            return
        starts = {(tp.topic, tp.partition): start_offset(tp.offset) for tp in partitions}
        self._server.manual.update(TopicPartition(t, p) for t, p in starts)
        self.given_offsets.update(
            {TopicPartition(t, p): offset for (t, p), offset in starts.items()}
        )
        self._dataplane.assign(starts)

    def _remove(self, partitions: set[TopicPartition]) -> None:
        if not partitions:
            return
        if self._config.enable_auto_commit:
            self._auto_commit(partitions)  # read before fetching stops, as librdkafka does
        self._dataplane.unassign((tp.topic, tp.partition) for tp in partitions)
        self._server.manual.difference_update(partitions)
        self._offsets.forget(partitions)
        for tp in partitions:
            self._committed.pop(tp, None)
            self.given_offsets.pop(tp, None)

    def _uncommitted(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        consumed = self._offsets.consumed(partitions)
        return {tp: off for tp, off in consumed.items() if self._committed.get(tp) != off}

    def _auto_commit(self, partitions: set[TopicPartition]) -> int | None:
        """Commit the uncommitted consumed offsets of ``partitions`` in the background; the
        token of the commit, or None when there was nothing to commit."""
        chosen = self._uncommitted(partitions)
        if not chosen:
            return None
        self._start_runtime()

        def on_result(result: ReportCommitResult) -> None:
            error, committed = commit_outcome(chosen, result)
            for tp, offset in chosen.items():
                if not result.partition_errors.get(tp) and tp in self._server.manual:
                    self._committed[tp] = offset
            on_commit = self._config.on_commit
            if on_commit is not None:
                on_commit(error, committed)
            elif error is not None:
                (self._server.callbacks.logger or _log).warning("auto-commit failed: %s", error)

        return self._offsets.commit_in_background(self._server, chosen, on_result)

    def _wait_for(self, token: int) -> None:
        logger = self._server.callbacks.logger or _log
        try:
            done = self._server.take_commit_result(token, CLOSE_COMMIT_TIMEOUT_S)
        except ConsumerKafkaException as exc:
            logger.warning("final commit failed: %s", exc)
            return
        if not done:
            self._server.commit_waiters.pop(token, None)
            logger.warning("final commit timed out after %s s", CLOSE_COMMIT_TIMEOUT_S)
