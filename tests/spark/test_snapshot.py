"""Batch snapshot: write, then commit; the next snapshot starts there; a failed write commits
nothing."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from spark_support import POLL_S, committed_offsets, group_members, produce_numbered

from consumer.spark import group_snapshot
from tests.support import wait_until

pytestmark = pytest.mark.spark

PARTITIONS = 2


def _offsets_of(spark: Any, path: Path) -> list[tuple[int, int]]:
    rows = spark.read.parquet(str(path)).select("partition", "offset").collect()
    return sorted((r["partition"], r["offset"]) for r in rows)


def test_snapshot_write_commit_then_resume_and_failed_write_commits_nothing(
    spark: Any,
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    topic = create_topic(PARTITIONS)
    group = unique_name("group")
    produce_numbered(kafka_bootstrap, topic, 0, 100, PARTITIONS)
    out = tmp_path / "out"
    args = {"bootstrap_servers": kafka_bootstrap, "group_id": group, "topics": [topic]}

    # 1. Snapshot, write, commit: the group's offsets are the ends of the ranges.
    with group_snapshot(spark, **args) as snap:
        assert snap.member_id
        assert {(r.partition, r.start, r.end) for r in snap.ranges} == {(0, 0, 50), (1, 0, 50)}
        df = snap.dataframe()
        assert df.columns == [
            "key",
            "value",
            "topic",
            "partition",
            "offset",
            "timestamp",
            "headers",
        ]
        df.write.mode("append").parquet(str(out))
        result = snap.commit()
        assert result.ok, result.rejected
    assert committed_offsets(admin, group, topic, PARTITIONS) == {0: 50, 1: 50}
    first = _offsets_of(spark, out)
    assert first == sorted((p, o) for p in range(PARTITIONS) for o in range(50))
    values = {int(r["value"]) for r in spark.read.parquet(str(out)).select("value").collect()}
    assert values == set(range(100))

    # 2. More records; the second snapshot starts where the first committed.
    produce_numbered(kafka_bootstrap, topic, 100, 40, PARTITIONS)
    with group_snapshot(spark, **args) as snap:
        assert {(r.partition, r.start, r.end) for r in snap.ranges} == {(0, 50, 70), (1, 50, 70)}
        snap.dataframe().write.mode("append").parquet(str(out))
        assert snap.commit().ok
    assert committed_offsets(admin, group, topic, PARTITIONS) == {0: 70, 1: 70}
    offsets = _offsets_of(spark, out)
    assert offsets == sorted((p, o) for p in range(PARTITIONS) for o in range(70)), "gap or dup"

    # 3. A write that fails: the context is left by the exception, nothing is committed.
    produce_numbered(kafka_bootstrap, topic, 140, 20, PARTITIONS)

    def failing_write(snap_df: Any) -> None:
        def explode(row: Any) -> None:
            raise RuntimeError("sink failure on purpose")

        snap_df.foreach(explode)

    def snapshot_with_failing_write() -> None:
        with group_snapshot(spark, **args) as snap:
            assert {(r.start, r.end) for r in snap.ranges} == {(70, 80)}
            failing_write(snap.dataframe())
            snap.commit()  # never reached

    with pytest.raises(Exception, match="sink failure on purpose"):
        snapshot_with_failing_write()
    assert committed_offsets(admin, group, topic, PARTITIONS) == {0: 70, 1: 70}

    # The member left when the context closed.
    wait_until(
        lambda: not group_members(admin, group),
        15,
        "the snapshot member to leave",
        interval_s=POLL_S,
    )

    # 4. The uncommitted records are still there for the next snapshot.
    with group_snapshot(spark, **args) as snap:
        assert {(r.start, r.end) for r in snap.ranges} == {(70, 80)}
        assert snap.dataframe().count() == 20


def test_snapshot_subscribes_by_broker_side_regex(
    spark: Any,
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    topic = create_topic(PARTITIONS)
    produce_numbered(kafka_bootstrap, topic, 0, 10, PARTITIONS)
    with group_snapshot(
        spark,
        bootstrap_servers=kafka_bootstrap,
        group_id=unique_name("group"),
        topic_pattern=re.escape(topic),
    ) as snap:
        assert {(r.topic, r.partition, r.start, r.end) for r in snap.ranges} == {
            (topic, 0, 0, 5),
            (topic, 1, 0, 5),
        }
        assert sorted(int(r["value"]) for r in snap.dataframe().collect()) == list(range(10))
