"""``format("kafka-group")``: exactly once across a stop/restart with a checkpoint; a non-Spark
member takes partitions over without a gap, and duplicates appear only where the guide says."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from spark_support import (
    POLL_S,
    ThreadMember,
    committed_offsets,
    group_members,
    produce_numbered,
)

from tests.support import wait_until

pytestmark = pytest.mark.spark

PARTITIONS = 4
WAIT_S = 90.0


def _start_query(spark: Any, bootstrap: str, group: str, topic: str, out: Path, ck: Path) -> Any:
    df = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("groupId", group)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    return (
        df.selectExpr("partition", "offset", "CAST(value AS STRING) AS number")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ck))
        .trigger(processingTime="500 milliseconds")
        .start()
    )


def _rows(spark: Any, out: Path) -> list[tuple[int, int, int]]:
    """(partition, offset, number) of every row the file sink committed (its metadata log)."""
    if not (out / "_spark_metadata").exists():
        return []
    try:
        rows = spark.read.parquet(str(out)).collect()
    except Exception as exc:  # noqa: BLE001 - no committed file yet
        if "UNABLE_TO_INFER_SCHEMA" in str(exc) or "PATH_NOT_FOUND" in str(exc):
            return []
        raise
    return [(r["partition"], r["offset"], int(r["number"])) for r in rows]


def _alive(query: Any) -> None:
    error = query.exception()
    if error is not None:
        raise AssertionError(f"query failed: {error}")


def test_stream_restart_exactly_once_and_handover_to_another_member(
    spark: Any,
    tier_metrics: Any,
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    topic = create_topic(PARTITIONS)
    group = unique_name("group")
    out, ck = tmp_path / "out", tmp_path / "checkpoint"

    def numbers() -> list[int]:
        return [n for _, _, n in _rows(spark, out)]

    # 1. Run, stop, produce more, restart from the checkpoint: every record exactly once.
    produce_numbered(kafka_bootstrap, topic, 0, 2000, PARTITIONS)
    query = _start_query(spark, kafka_bootstrap, group, topic, out, ck)

    def has(count: int) -> Callable[[], bool]:
        def check() -> bool:
            _alive(query)
            return len(numbers()) >= count

        return check

    wait_until(has(2000), WAIT_S, "2000 rows from the first run", interval_s=POLL_S)
    query.stop()
    tier_metrics.add_batches("stream-run-1", query.recentProgress)
    produce_numbered(kafka_bootstrap, topic, 2000, 1000, PARTITIONS)
    query = _start_query(spark, kafka_bootstrap, group, topic, out, ck)
    wait_until(has(3000), WAIT_S, "3000 rows after the restart", interval_s=POLL_S)
    assert sorted(numbers()) == list(range(3000)), "not exactly once across stop/restart"

    # 2. A non-Spark member joins: the query releases its partitions only after committing them.
    member = ThreadMember(kafka_bootstrap, group, topic).start()
    try:
        wait_until(
            lambda: len(member.owned) == PARTITIONS // 2,
            WAIT_S,
            "a balanced group",
            interval_s=POLL_S,
        )
        produce_numbered(kafka_bootstrap, topic, 3000, 2000, PARTITIONS)

        def union() -> Counter[int]:
            _alive(query)
            with member._lock:
                theirs = [int(v) for _, _, v in member.records]
            return Counter(numbers()) + Counter(theirs)

        wait_until(
            lambda: set(union()) >= set(range(5000)), WAIT_S, "all 5000 records", interval_s=POLL_S
        )
        both = union()
        assert set(both) == set(range(5000)), "gap"
        duplicates = {n: c for n, c in both.items() if c > 1}
        # Graceful hand-over (guide, "duplicates"): on_revoke waited for the batch's commit, so
        # the new owner started exactly where the query stopped: no duplicate.
        assert duplicates == {}, f"duplicates after a graceful hand-over: {len(duplicates)}"
        handed_over = sorted(p for _, kind, p in member.events if kind == "assign")
        assert len(handed_over) == PARTITIONS // 2

        # 3. A clean stop leaves the query's last batch uncommitted (Spark commits a batch when
        # it plans the next one): the next owner reads it again. The test predicts exactly those
        # records from the committed offsets and the sink, then checks the duplicates match.
        query_partitions = set(range(PARTITIONS)) - member.owned
        committed = committed_offsets(admin, group, topic, PARTITIONS)
        sink_end: dict[int, int] = {}
        for p, o, _ in _rows(spark, out):
            sink_end[p] = max(sink_end.get(p, 0), o + 1)
        expected = {
            (p, o)
            for p in query_partitions
            for o in range(max(committed[p], 0), sink_end.get(p, 0))
        }
        query.stop()
        tier_metrics.add_batches("stream-run-2", query.recentProgress)
        produce_numbered(kafka_bootstrap, topic, 5000, 400, PARTITIONS)
        wait_until(
            lambda: member.owned == set(range(PARTITIONS)),
            WAIT_S,
            "the full hand-over",
            interval_s=POLL_S,
        )
        wait_until(
            lambda: set(union()) >= set(range(5400)), WAIT_S, "all 5400 records", interval_s=POLL_S
        )
    finally:
        member.stop()

    ours = {(p, o) for p, o, _ in _rows(spark, out)}
    theirs = Counter((p, o) for p, o, _ in member.records)
    assert all(c == 1 for c in theirs.values()), "the thread member read a record twice"
    assert Counter(p_o for p_o in ours) == Counter(set(ours)), "the sink holds a record twice"
    duplicated = ours & set(theirs)
    print(f"clean-stop duplicates: {len(duplicated)} (predicted {len(expected)})")
    assert duplicated == expected, "duplicates other than the uncommitted last batch"
    assert len(ours) + len(theirs) - len(duplicated) == 5400
    wait_until(
        lambda: not group_members(admin, group),
        20,
        "an empty group after the test",
        interval_s=POLL_S,
    )
