"""Executor-resident group members: :func:`run_group_members`.

Each of N Spark tasks is one member of the group (our :class:`consumer.Consumer`, built inside the
task). It polls, runs the user's ``process`` on the records inside the task, then commits the
processed offsets synchronously with its member epoch (and again, if anything is left, in
``on_revoke``). It stops on max runtime, idle time or max records, and always leaves the group and
stops its threads in ``finally``, so a reused Python worker keeps no zombie member. The job
returns a ledger of what each member did, not the records.
"""

from __future__ import annotations

import logging
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException, Message, TopicPartition

from consumer.spark._fetch import to_timestamp
from consumer.spark._spec import GroupSpec, TopicPartitionKey

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_log = logging.getLogger("consumer.spark")

#: One record handed to ``process``.
Record = dict[str, Any]
#: Ledger rows: event is "commit" (offset = committed next offset, records = processed in that
#: batch), "commit_failed", "assign", "revoke" (time = when on_revoke returned) or "lost".
LEDGER_SCHEMA_DDL = (
    "member_id string, task_attempt int, event string, topic string, partition int, "
    "offset long, records long, committed_at timestamp"
)
LedgerRow = tuple[str, int, str, str, int, int | None, int, datetime]


@dataclass(frozen=True)
class MemberTaskSpec:
    """Everything a member task needs; plain values only (it is pickled to executors)."""

    group: GroupSpec
    max_runtime_s: float
    idle_timeout_s: float
    max_records: int | None
    max_batch_records: int = 500
    poll_timeout_s: float = 0.2


def check_cluster(conf: Mapping[str, str], default_parallelism: int, num_members: int) -> None:
    """Refuse speculation; warn when members exceed the task slots.

    A speculative copy of a task would be a second member for the same slot, re-processing its
    records. Members beyond the free slots run one after another, each joining as another
    leaves: constant rebalancing and idle slots.
    """
    if num_members < 1:
        raise ValueError(f"num_members must be >= 1, got {num_members}")
    if str(conf.get("spark.speculation", "false")).strip().lower() == "true":
        raise RuntimeError(
            "run_group_members refuses to run with spark.speculation=true: a speculative task "
            "copy would be a second group member processing the same records"
        )
    if num_members > default_parallelism:
        warnings.warn(
            f"{num_members} group members but only {default_parallelism} task slots "
            "(defaultParallelism): members beyond the slots start only when others finish",
            RuntimeWarning,
            stacklevel=3,
        )


def run_group_members(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    group_id: str,
    topics: list[str] | tuple[str, ...],
    num_members: int,
    process: Callable[[list[Record]], None],
    max_runtime_s: float,
    idle_timeout_s: float,
    max_records: int | None = None,
    consumer_config: Mapping[str, Any] | None = None,
    max_batch_records: int = 500,
) -> DataFrame:
    """Run ``num_members`` group members as Spark tasks; return their ledger DataFrame.

    ``process(records)`` runs inside the task for each polled batch (records are dicts with
    topic, partition, offset, key, value, timestamp, headers); its offsets are committed after
    it returns, so a failure between ``process`` and the commit re-delivers that batch
    (at-least-once: make ``process`` idempotent on (topic, partition, offset)). A member stops
    after ``max_runtime_s``, after ``idle_timeout_s`` without records, or after
    ``max_records`` records (per member). The job runs once, eagerly; the returned ledger
    DataFrame (:data:`LEDGER_SCHEMA_DDL`) is built from its collected rows.
    """
    conf = dict(spark.sparkContext.getConf().getAll())
    runtime_speculation = spark.conf.get("spark.speculation", None)
    if runtime_speculation is not None:
        conf["spark.speculation"] = runtime_speculation
    check_cluster(conf, spark.sparkContext.defaultParallelism, num_members)
    spec = MemberTaskSpec(
        group=GroupSpec.create(
            bootstrap_servers=bootstrap_servers,
            group_id=group_id,
            topics=tuple(topics),
            client_config=consumer_config,
        ),
        max_runtime_s=max_runtime_s,
        idle_timeout_s=idle_timeout_s,
        max_records=max_records,
        max_batch_records=max_batch_records,
    )

    def task(index: int, _: Iterable[int]) -> Iterable[LedgerRow]:
        return iter(run_member(spec, process, index))

    rows = (
        spark.sparkContext.parallelize(range(num_members), num_members)
        .mapPartitionsWithIndex(task)
        .collect()
    )
    return spark.createDataFrame(rows, LEDGER_SCHEMA_DDL)


def _record(message: Message) -> Record:
    return {
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "key": message.key(),
        "value": message.value(),
        "timestamp": to_timestamp(message),
        "headers": message.headers(),
    }


def _now() -> datetime:
    return datetime.now(tz=UTC)


def run_member(
    spec: MemberTaskSpec, process: Callable[[list[Record]], None], index: int = 0
) -> list[LedgerRow]:
    """One member's whole life (runs inside a Spark task; usable without Spark too)."""
    from consumer import Consumer

    attempt = _task_attempt()
    if attempt > 0:
        _log.warning(
            "member task %d is attempt %d: the previous attempt's last batch may be processed "
            "again (its commit may not have happened)",
            index,
            attempt,
        )
    member_id = f"unjoined-{uuid.uuid4().hex[:8]}"
    ledger: list[LedgerRow] = []
    pending: dict[TopicPartitionKey, tuple[int, int]] = {}  # processed, not yet committed

    def note(event: str, key: TopicPartitionKey, offset: int | None, records: int) -> None:
        ledger.append((member_id, attempt, event, key[0], key[1], offset, records, _now()))

    def commit(consumer: Consumer, keys: list[TopicPartitionKey]) -> None:
        offsets = {key: pending[key] for key in keys if key in pending}
        if not offsets:
            return
        partitions = [TopicPartition(t, p, o) for (t, p), (o, _) in sorted(offsets.items())]
        try:
            consumer.commit(offsets=partitions, asynchronous=False)
        except KafkaException as exc:
            _log.warning("member %s: commit of %s failed: %s", member_id, offsets, exc)
            for key, (offset, count) in offsets.items():
                note("commit_failed", key, offset, count)
            return
        for key, (offset, count) in offsets.items():
            pending.pop(key, None)
            note("commit", key, offset, count)

    def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            note("assign", (tp.topic, tp.partition), None, 0)

    def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        commit(consumer, keys)
        for key in keys:
            pending.pop(key, None)
            note("revoke", key, None, 0)

    def on_lost(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            pending.pop((tp.topic, tp.partition), None)
            note("lost", (tp.topic, tp.partition), None, 0)

    consumer = Consumer(spec.group.member_config())
    try:
        consumer.subscribe(
            spec.group.subscription, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost
        )
        member_id = consumer.memberid() or member_id
        started = last_record = time.monotonic()
        total = 0
        while True:
            now = time.monotonic()
            if now - started >= spec.max_runtime_s or now - last_record >= spec.idle_timeout_s:
                break
            if spec.max_records is not None and total >= spec.max_records:
                break
            wanted = spec.max_batch_records
            if spec.max_records is not None:
                wanted = max(1, min(wanted, spec.max_records - total))
            messages = consumer.consume(wanted, spec.poll_timeout_s)
            member_id = consumer.memberid() or member_id
            records = []
            for message in messages:
                error = message.error()
                if error is not None:
                    _log.warning("member %s: fetch error %s", member_id, error)
                    continue
                records.append(_record(message))
            if not records:
                continue
            last_record = time.monotonic()
            process(records)
            total += len(records)
            for record in records:
                key = (record["topic"], record["partition"])
                _, count = pending.get(key, (0, 0))
                pending[key] = (record["offset"] + 1, count + 1)
            commit(consumer, list(pending))
    finally:
        # Leave the group (on_revoke commits anything left) and stop every thread of the member.
        consumer.close()
    return ledger


def _task_attempt() -> int:
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover
        return 0
    context = TaskContext.get()
    return context.attemptNumber() if context is not None else 0
