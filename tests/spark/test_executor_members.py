"""Executor-resident members: two Spark tasks and one non-Spark member share a group."""

from __future__ import annotations

import json
import os
import threading
import time
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
    high_watermarks,
    ownership_overlaps,
    produce_numbered,
)

from consumer.spark import run_group_members
from tests.support import wait_until

pytestmark = pytest.mark.spark

PARTITIONS = 6
RECORDS = 50_000


def _sink_lines(sink: Path) -> list[dict[str, Any]]:
    lines = []
    for path in sink.glob("*.jsonl"):
        with path.open() as handle:
            lines.extend(json.loads(line) for line in handle if line.endswith("\n"))
    return lines


def _sink_line_count(sink: Path) -> int:
    return sum(path.read_bytes().count(b"\n") for path in sink.glob("*.jsonl"))


def _writers(sink: Path) -> int:
    """How many worker processes have written processed records (one per executor member)."""
    return sum(1 for path in sink.glob("*.jsonl") if path.stat().st_size > 0)


def _make_process(sink: Path) -> Callable[[list[dict[str, Any]]], None]:
    def process(records: list[dict[str, Any]]) -> None:
        # Per-worker-process file (Python workers run one task at a time); simulated work.
        with (sink / f"{os.getpid()}.jsonl").open("a") as handle:
            for r in records:
                handle.write(
                    json.dumps({"p": r["partition"], "o": r["offset"], "n": int(r["value"])}) + "\n"
                )
        # ~2,500 records/s per member: the run lasts long enough for a late second task and
        # the thread member to join while records remain (a fast drain would leave it nothing).
        time.sleep(0.1)

    return process


def test_two_executor_members_and_a_thread_member_share_the_group(
    spark: Any,
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    topic = create_topic(PARTITIONS)
    group = unique_name("group")
    produce_numbered(kafka_bootstrap, topic, 0, RECORDS, PARTITIONS)
    sink = tmp_path / "sink"
    sink.mkdir()

    outcome: dict[str, Any] = {}

    def job() -> None:
        try:
            ledger = run_group_members(
                spark,
                bootstrap_servers=kafka_bootstrap,
                group_id=group,
                topics=[topic],
                num_members=2,
                process=_make_process(sink),
                max_runtime_s=120,
                idle_timeout_s=6,
                max_batch_records=250,
            )
            outcome["ended_at"] = time.time()
            outcome["ledger"] = ledger.selectExpr(
                "*", "unix_micros(committed_at) / 1e6 AS at"
            ).collect()
        except BaseException as exc:  # noqa: BLE001 - re-raised by the test thread
            outcome["error"] = exc

    runner = threading.Thread(target=job, name="run-group-members", daemon=True)
    runner.start()
    # The non-Spark member joins once both executor members are consuming: a task that starts
    # late (a slow Python worker) would otherwise join together with it, and the broker could
    # give the thread member partitions the first executor member had already released.
    wait_until(
        lambda: (_writers(sink) >= 2 and _sink_line_count(sink) >= 5_000) or not runner.is_alive(),
        120,
        "both executor members consuming",
        interval_s=POLL_S,
    )
    assert runner.is_alive(), f"the job ended before the thread member joined: {outcome}"
    member_started = time.time()
    member = ThreadMember(kafka_bootstrap, group, topic).start()
    try:
        runner.join(180)
        assert not runner.is_alive(), "run_group_members did not return"
        if "error" in outcome:
            raise outcome["error"]

        # The reused Python workers run no member thread (probed at once: Spark stops idle
        # workers after a minute).
        def worker_threads(_: Any) -> list[tuple[int, str]]:  # nested: pickled by value
            return [(os.getpid(), thread.name) for thread in threading.enumerate()]

        probe = spark.sparkContext.parallelize(range(4), 4).mapPartitions(worker_threads).collect()
        member_pids = {int(path.stem) for path in sink.glob("*.jsonl")}
        assert member_pids & {pid for pid, _ in probe}, "the probe did not reach a reused worker"
        assert [name for _, name in probe if name == "kafka-group-member"] == []
        # The executor members left: only the thread member remains, and it takes over.
        remaining = [m.member_id for m in group_members(admin, group)]
        assert remaining == [member.member_id], remaining
        ends = high_watermarks(kafka_bootstrap, topic, PARTITIONS)
        assert sum(ends.values()) == RECORDS
        wait_until(
            lambda: committed_offsets(admin, group, topic, PARTITIONS) == ends,
            60,
            "every partition committed to its end",
            interval_s=0.5,
        )
    finally:
        member.stop()

    ledger = outcome["ledger"]
    spark_lines = _sink_lines(sink)
    spark_members = {r["member_id"] for r in ledger if r["event"] == "assign"}
    assert len(spark_members) == 2, "both executor members should have owned partitions"
    assert member.count() > 0, "the thread member should have consumed records"
    joined = [at for at, kind, _ in member.events if kind == "assign"]
    assert joined, "the thread member never got a partition"
    assert min(joined) < outcome["ended_at"], "no hand-over while the job ran"
    handed = [
        r for r in ledger if r["event"] == "revoke" and member_started < r["at"] <= min(joined)
    ]
    later = [
        (round(r["at"], 3), r["member_id"][:8], r["event"], r["partition"])
        for r in sorted(ledger, key=lambda r: r["at"])
        if r["at"] > member_started and r["event"] != "commit"
    ]
    assert handed, (
        "the executor members gave no partition to the joining member: "
        f"thread member started at {member_started:.3f}, its events {member.events[:8]}, "
        f"job ended at {outcome['ended_at']:.3f}, executor events after it started {later}"
    )

    # At least once: every record processed by some member.
    seen = {line["n"] for line in spark_lines} | {int(v) for _, _, v in member.records}
    assert seen == set(range(RECORDS)), f"{RECORDS - len(seen)} records never processed"
    duplicates = len(spark_lines) + member.count() - RECORDS
    print(f"records processed twice: {duplicates}")

    # The ledger accounts for every record the executor members processed.
    committed = sum(r["records"] for r in ledger if r["event"] in ("commit", "commit_failed"))
    assert committed == len(spark_lines)
    for p in range(PARTITIONS):
        # In time order: the ledger concatenates the tasks' own ledgers, so a partition that
        # moved between executor members is not in commit order row by row.
        commits = sorted(
            (r["at"], r["offset"]) for r in ledger if r["event"] == "commit" and r["partition"] == p
        )
        offsets = [offset for _, offset in commits]
        assert offsets == sorted(offsets), f"commits of partition {p} went backwards: {commits}"

    # No partition owned by two members at once.
    events = [(r["at"], r["event"], r["member_id"], r["partition"]) for r in ledger]
    events = [e for e in events if e[1] in ("assign", "revoke", "lost")]
    events += [(at, kind, "thread-member", p) for at, kind, p in member.events]
    assert ownership_overlaps(events) == []

    # Nobody left in the group.
    wait_until(lambda: not group_members(admin, group), 20, "an empty group", interval_s=POLL_S)
