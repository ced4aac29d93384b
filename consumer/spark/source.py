"""``spark.readStream.format("kafka-group")``: a streaming source that is a group member.

Where things run (PySpark 4.x Python Data Source API):

* the driver's streaming runner process (one per query) hosts one KIP-848 member
  (:class:`~consumer.spark._host.MemberHost`): all its partitions are paused, it only keeps
  membership; ``latestOffset`` returns the high watermarks of the owned partitions,
  ``partitions`` plans one task per non-empty range and ``commit(end)`` commits the batch's end
  offsets with the member epoch once Spark has recorded the batch in its checkpoint;
* executors run ``read(partition)`` with assign-mode confluent-kafka fetchers: they never join
  the group and never commit.

A revoked partition is left out of every later batch, and its ``on_revoke`` returns only after
the last batch that included it is committed (bounded by the rebalance timeout), so the next
owner starts exactly where this query stopped.

Offsets (JSON in Spark's offset log) look like
``{"v": 1, "end": {topic: {partition: offset}}, "from": {topic: {partition: offset}}}``:
``end`` is the batch's exclusive end per partition; ``from`` gives the begin offset of partitions
that do not continue from the previous batch (newly acquired ones), so planning is a pure
function of ``(start, end)`` and replays after a failure read the same records.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from consumer.spark._fetch import RECORD_SCHEMA_DDL, RecordRow, read_range
from consumer.spark._host import MemberHost
from consumer.spark._spec import (
    GroupSpec,
    OffsetRange,
    TopicPartitionKey,
    ranges_from_json,
)

_log = logging.getLogger("consumer.spark")

SOURCE_NAME = "kafka-group"
RANGES_SOURCE_NAME = "kafka-group-ranges"
_OFFSET_VERSION = 1
Offsets = dict[TopicPartitionKey, int]


def spec_from_options(options: Mapping[str, str]) -> GroupSpec:
    """Parse the source options (keys are case-insensitive) into a :class:`GroupSpec`."""
    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    bootstrap = lowered.get("kafka.bootstrap.servers")
    group_id = lowered.get("groupid") or lowered.get("group.id")
    if not bootstrap:
        raise ValueError("option 'kafka.bootstrap.servers' is required")
    if not group_id:
        raise ValueError("option 'groupId' is required: the consumer group this query joins")
    if "kafka.group.id" in lowered:
        raise ValueError("set the group with option 'groupId', not 'kafka.group.id'")
    subscribe, pattern = lowered.get("subscribe"), lowered.get("subscribepattern")
    if bool(subscribe) == bool(pattern):
        raise ValueError("give exactly one of the options 'subscribe' or 'subscribePattern'")
    starting = lowered.get("startingoffsets", "earliest").strip().lower()
    if starting not in ("earliest", "latest"):
        raise ValueError(f"startingOffsets must be 'earliest' or 'latest', got {starting!r}")
    passthrough = {
        key[len("kafka.") :]: value
        for key, value in lowered.items()
        if key.startswith("kafka.") and key != "kafka.bootstrap.servers"
    }
    return GroupSpec.create(
        bootstrap_servers=bootstrap,
        group_id=group_id,
        topics=subscribe or (),
        topic_pattern=pattern,
        starting_offsets="earliest" if starting == "earliest" else "latest",
        client_config=passthrough,
    )


def encode_offsets(end: Offsets, begin: Offsets) -> dict[str, Any]:
    """The JSON-able offset Spark stores (deterministic order: equal offsets compare equal)."""

    def nest(flat: Offsets) -> dict[str, dict[str, int]]:
        nested: dict[str, dict[str, int]] = {}
        for topic, partition in sorted(flat):
            nested.setdefault(topic, {})[str(partition)] = flat[(topic, partition)]
        return nested

    return {"v": _OFFSET_VERSION, "end": nest(end), "from": nest(begin)}


def decode_offsets(offset: Mapping[str, Any] | None) -> tuple[Offsets, Offsets]:
    """Inverse of :func:`encode_offsets`: ``(end, begin)``."""
    if not offset:
        return {}, {}

    def flat(nested: Mapping[str, Mapping[str, int]]) -> Offsets:
        return {
            (topic, int(partition)): int(value)
            for topic, partitions in nested.items()
            for partition, value in partitions.items()
        }

    return flat(offset.get("end", {})), flat(offset.get("from", {}))


def plan_ranges(start: Mapping[str, Any], end: Mapping[str, Any]) -> list[OffsetRange]:
    """The non-empty ranges of the batch ``(start, end)``: a pure function of its offsets."""
    previous_end, _ = decode_offsets(start)
    batch_end, begin = decode_offsets(end)
    ranges = []
    for key, stop in sorted(batch_end.items()):
        # A begin override never reaches below the previous batch's end (the planner takes the
        # maximum too), so re-planning a batch against itself yields no range.
        candidates = [v for v in (begin.get(key), previous_end.get(key)) if v is not None]
        first = max(candidates) if candidates else None
        if first is None or stop <= first:
            continue
        ranges.append(OffsetRange(key[0], key[1], first, stop))
    return ranges


class RangePartition(InputPartition):
    """One Spark task: one offset range of one partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


class KafkaGroupStreamReader(DataSourceStreamReader):
    """The stream reader; its member is created lazily in the runner, never pickled."""

    def __init__(self, spec: GroupSpec) -> None:
        self.spec = spec
        self._host: MemberHost | None = None
        self.rejected_commits: dict[TopicPartitionKey, str] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_host"] = None
        return state

    def _member(self) -> MemberHost:
        if self._host is None or self._host.closed:
            if self._host is not None:
                _log.warning(
                    "member of %s ended (%r); rejoining", self.spec.group_id, self._host.error
                )
            self._host = MemberHost(self.spec, name=f"kafka-group[{self.spec.group_id}]").start()
        return self._host

    def initialOffset(self) -> dict[str, Any]:
        """Start the member; a new query begins every partition at its committed offset."""
        self._member()
        return encode_offsets({}, {})

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:  # noqa: ARG002
        """High watermarks of the owned partitions that are not being revoked."""
        previous_end, _ = decode_offsets(start)
        end, begin = self._member().plan(previous_end)
        return encode_offsets(end, begin)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One task per non-empty partition range."""
        return [RangePartition(r) for r in plan_ranges(start, end)]

    def read(self, partition: InputPartition) -> Iterator[RecordRow]:
        """Executor side: the records of one range (assign-mode fetcher, no group)."""
        assert isinstance(partition, RangePartition)
        yield from read_range(self.spec.fetcher_config(), partition.offset_range)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark recorded the batch ending at ``end``: commit it to Kafka with the member epoch."""
        batch_end, _ = decode_offsets(end)
        if self._host is None or self._host.closed:
            _log.warning("no live member to commit %s; the next owner re-reads it", batch_end)
            return
        _, rejected = self._host.commit(batch_end)
        if rejected:
            _log.info("not committed (partition moved to another member): %s", rejected)
            self.rejected_commits.update(rejected)

    def stop(self) -> None:
        """The query ended: leave the group (the last batch's offsets stay uncommitted)."""
        if self._host is not None:
            self._host.close()
            self._host = None


class _RecordsDataSource(DataSource):
    """A data source whose rows are Kafka records, registered as ``format(FORMAT)``."""

    FORMAT: ClassVar[str]

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return cls.FORMAT

    def schema(self) -> str:
        """The schema of Spark's Kafka source (without timestampType)."""
        return RECORD_SCHEMA_DDL


class KafkaGroupDataSource(_RecordsDataSource):
    """``format("kafka-group")``: see the module docstring for options and guarantees."""

    FORMAT = SOURCE_NAME

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: ARG002
        """The micro-batch reader (no I/O here: this also runs in the planner process)."""
        return KafkaGroupStreamReader(spec_from_options(self.options))


class RangesReader(DataSourceReader):
    """Batch reader over fixed ranges (used by :func:`consumer.spark.group_snapshot`)."""

    def __init__(self, spec: GroupSpec, ranges: tuple[OffsetRange, ...]) -> None:
        self.spec = spec
        self.ranges = ranges

    def partitions(self) -> Sequence[InputPartition]:
        """One task per range."""
        return [RangePartition(r) for r in self.ranges if r.count > 0]

    def read(self, partition: InputPartition) -> Iterator[RecordRow]:
        """Executor side: the records of one range."""
        assert isinstance(partition, RangePartition)
        yield from read_range(self.spec.fetcher_config(), partition.offset_range)


class KafkaGroupRangesDataSource(_RecordsDataSource):
    """``format("kafka-group-ranges")``: options ``spec`` and ``ranges`` (JSON), for snapshots."""

    FORMAT = RANGES_SOURCE_NAME

    def reader(self, schema: StructType) -> DataSourceReader:  # noqa: ARG002
        """A reader over the frozen ranges."""
        return RangesReader(
            GroupSpec.from_json(self.options["spec"]), ranges_from_json(self.options["ranges"])
        )


def register(spark: SparkSession) -> None:
    """Register ``kafka-group`` (streaming) and ``kafka-group-ranges`` (batch) on ``spark``."""
    if importlib.util.find_spec("pyarrow") is None:
        raise RuntimeError("Python data sources need pyarrow: install kafka-group-member[spark]")
    spark.dataSource.register(KafkaGroupDataSource)
    spark.dataSource.register(KafkaGroupRangesDataSource)
