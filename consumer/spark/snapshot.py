"""Batch snapshots with commit-after-write: :func:`group_snapshot`.

The driver joins the group with one member (:class:`~consumer.spark._host.MemberHost`), waits
until it is STABLE, and freezes its owned ranges ``[committed or reset offset, high watermark)``.
Executors read those ranges with assign-mode fetchers (batch data source
``kafka-group-ranges``). Offsets are committed only by :meth:`GroupSnapshot.commit`, which the
user calls after the write succeeded; revocations of frozen partitions are held until then (or
until the rebalance timeout is close). Leaving the context always closes the member.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from consumer.spark._host import MemberHost
from consumer.spark._spec import (
    GroupSpec,
    OffsetRange,
    StartingOffsets,
    TopicPartitionKey,
    ranges_to_json,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_log = logging.getLogger("consumer.spark")


@dataclass
class CommitResult:
    """What :meth:`GroupSnapshot.commit` did, per partition."""

    committed: dict[TopicPartitionKey, int] = field(default_factory=dict)
    rejected: dict[TopicPartitionKey, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every range was committed."""
        return not self.rejected


class GroupSnapshot:
    """The frozen ranges of one member; see :func:`group_snapshot`."""

    def __init__(
        self,
        spark: SparkSession,
        spec: GroupSpec,
        host: MemberHost,
        ranges: tuple[OffsetRange, ...],
    ) -> None:
        self._spark = spark
        self.spec = spec
        self._host = host
        #: The ranges this snapshot covers (empty ones included), fixed at entry.
        self.ranges = ranges
        self.frozen_at = time.monotonic()
        self.result: CommitResult | None = None

    @property
    def member_id(self) -> str | None:
        """The member id of the snapshot's member."""
        return self._host.member_id

    @property
    def record_count(self) -> int:
        """Number of offsets covered (records, unless compacted)."""
        return sum(r.count for r in self.ranges)

    def dataframe(self) -> DataFrame:
        """The records of the frozen ranges (deterministic: recomputing reads the same ranges)."""
        return (
            self._spark.read.format("kafka-group-ranges")
            .option("spec", self.spec.to_json())
            .option("ranges", ranges_to_json(self.ranges))
            .load()
        )

    def commit(self, timeout_s: float | None = None) -> CommitResult:
        """Commit every range's end with the member epoch; call only after a successful write.

        Ranges whose partition was taken away meanwhile (rebalance deadline, fencing) are
        returned in ``rejected``: another member will read them again (at-least-once).
        """
        if self.result is not None:
            return self.result
        elapsed = time.monotonic() - self.frozen_at
        if elapsed > self.spec.rebalance_timeout_s / 2:
            _log.warning(
                "snapshot commit %.0f s after freezing; more than half the rebalance timeout "
                "(%.0f s): revocations may have been released before this commit",
                elapsed,
                self.spec.rebalance_timeout_s,
            )
        offsets = {r.key: r.end for r in self.ranges if r.count > 0}
        committed, rejected = self._host.commit(offsets, timeout_s)
        result = CommitResult(committed=committed, rejected=rejected)
        # Ranges at or below the committed offset need no request but are done all the same.
        for key, offset in offsets.items():
            if key not in committed and key not in rejected:
                result.committed[key] = offset
        self.result = result
        return result


@contextlib.contextmanager
def group_snapshot(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    group_id: str,
    topics: list[str] | tuple[str, ...] = (),
    topic_pattern: str | None = None,
    starting_offsets: StartingOffsets = "earliest",
    consumer_config: Mapping[str, Any] | None = None,
    assignment_timeout_s: float = 30.0,
) -> Iterator[GroupSnapshot]:
    """Join ``group_id``, freeze the owned ranges, yield a :class:`GroupSnapshot`.

    ::

        with group_snapshot(spark, bootstrap_servers=bs, group_id="g", topics=["t"]) as snap:
            snap.dataframe().write.mode("append").parquet(out)
            snap.commit()          # only after the write succeeded

    Partitions without a committed offset start at ``starting_offsets``. With ``topic_pattern``
    it also waits (up to ``assignment_timeout_s``) for the broker to resolve the regex.
    Leaving the context closes the member; nothing is committed unless
    :meth:`GroupSnapshot.commit` was called.
    """
    from consumer.spark.source import register

    register(spark)
    spec = GroupSpec.create(
        bootstrap_servers=bootstrap_servers,
        group_id=group_id,
        topics=tuple(topics),
        topic_pattern=topic_pattern,
        starting_offsets=starting_offsets,
        client_config=consumer_config,
    )
    host = MemberHost(spec, name=f"kafka-group-snapshot[{group_id}]")
    try:
        host.start(assignment_timeout_s)
        host.wait_stable(assignment_timeout_s)
        if topic_pattern is not None:
            # The broker resolves a regex after the join: the member is first STABLE with
            # nothing, then reconciles the matched partitions.
            host.wait_for(lambda: bool(host.owned) and host.state == "STABLE", assignment_timeout_s)
        end, begin = host.plan({})
        ranges = tuple(
            OffsetRange(topic, partition, begin.get((topic, partition), stop), stop)
            for (topic, partition), stop in sorted(end.items())
        )
        yield GroupSnapshot(spark, spec, host, ranges)
    finally:
        host.close()
