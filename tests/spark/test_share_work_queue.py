"""The share-group work queue (``share_work_queue``) on Spark tasks against the real broker.

Two tasks on ``local[2]`` (the tier's session: two task slots on this 2-core machine) share a
one-partition topic, more tasks than partitions, and every record is processed and ACCEPTed
once. Failures: a record failing on its first delivery is retried (delivery count 2), a poison
record is REJECTed after ``max_attempts`` and reported, and a task that stops on a
``stop_task_on`` error gives its records to the other task. Without Spark: an exception escaping
the task closes its member, and everything it had not ACCEPTed comes back to the group at once;
a member killed with SIGKILL (an executor lost) gives its records back when their locks expire.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from spark_support import produce_numbered

from consumer import ShareConsumer
from consumer.config import ConfigError
from consumer.spark import (
    configure_share_group,
    share_group_configs,
    share_work_queue,
)
from consumer.spark.work_queue import ShareTaskSpec, run_share_task

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

#: A task's idle time includes joining the group (3-4 s on this loaded machine).
IDLE_TIMEOUT_S = 6.0


def _conf(bootstrap: str, group: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "group.id": group, **extra}


def _attempts(sink: Path) -> list[dict[str, Any]]:
    """Every call of ``process`` the tasks logged: task, offset, key, delivery_count, outcome."""
    assert not (sink / "barrier-timeout").exists(), "a task waited 20 s for the other to start"
    lines: list[dict[str, Any]] = []
    for path in sorted(sink.glob("*.jsonl")):
        with path.open() as handle:
            lines.extend(json.loads(line) for line in handle if line.endswith("\n"))
    return lines


def _make_process(
    sink: Path, outcome_of: Callable[[dict[str, Any]], str], *, tasks_to_wait_for: int = 0
) -> Callable[[dict[str, Any]], None]:
    """``process(record)`` that logs the call to ``sink/<task>.jsonl``, then acts on
    ``outcome_of(record)``: "ok" returns, "fail" raises ValueError, "stop" raises
    ConnectionError (the tests' ``stop_task_on``).

    With ``tasks_to_wait_for``, a task's first call waits (bounded) until that many tasks have
    made theirs, so every task is a member before the records run out: on a loaded machine a
    Python worker can start seconds after the other.
    """

    def process(record: dict[str, Any]) -> None:  # nested: pickled by value to the workers
        from pyspark import TaskContext

        context = TaskContext.get()
        task = context.partitionId() if context is not None else -1
        marker = sink / f"started-{task}"
        if tasks_to_wait_for and not marker.exists():
            marker.touch()
            # Bounded well below the record lock (30 s), which the waiting task's batch holds.
            deadline = time.monotonic() + 20
            while len(list(sink.glob("started-*"))) < tasks_to_wait_for:
                if time.monotonic() > deadline:
                    (sink / "barrier-timeout").touch()
                    raise AssertionError("the other tasks never started")
                time.sleep(0.05)
        outcome = outcome_of(record)
        line = {
            "task": task,
            "offset": record["offset"],
            "key": record["key"].decode(),
            "delivery_count": record["delivery_count"],
            "outcome": outcome,
        }
        with (sink / f"{task}.jsonl").open("a") as handle:
            handle.write(json.dumps(line) + "\n")
        if outcome == "fail":
            raise ValueError(f"cannot process {line['key']}")
        if outcome == "stop":
            raise ConnectionError("this executor lost its scratch service")

    return process


def _leftover(conf: dict[str, Any], topic: str) -> list[int]:
    """Offsets a new member of the group is given before a sentinel produced now (none, if
    every earlier record was ACCEPTed or REJECTed): the sentinel shows the member fetches."""
    producer = Producer({"bootstrap.servers": conf["bootstrap.servers"]})
    producer.produce(topic, key=b"sentinel", value=b"sentinel", partition=0)
    assert producer.flush(30) == 0
    seen: list[tuple[int, bytes | None]] = []
    with ShareConsumer(conf) as late:
        late.subscribe([topic])
        deadline = time.monotonic() + 30
        while not any(key == b"sentinel" for _, key in seen):
            assert time.monotonic() < deadline, f"the sentinel never came: {seen}"
            seen.extend((m.offset() or 0, m.key()) for m in late.poll(0.5))
    return [offset for offset, key in seen if key != b"sentinel"]


def test_arguments_and_configuration_are_checked_naming_the_key() -> None:
    conf = _conf("localhost:9092", "g")
    secret = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "worker",
        "sasl.password": "hunter2-secret",
    }
    good = ShareTaskSpec.create({**conf, **secret}, ["t"], max_attempts=3, idle_timeout_s=1)
    assert good.consumer_config()["share.acknowledgement.mode"] == "explicit"
    assert good.consumer_config()["share.acquire.mode"] == "record_limit"
    assert "hunter2" not in repr(good)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"conf": {**conf, "share.acknowledgement.mode": "implicit"}}, "share.acknowledgement"),
        ({"conf": {**conf, "max.poll.records": 0}}, "max.poll.records"),
        ({"conf": {"bootstrap.servers": "localhost:9092"}}, "group.id"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"idle_timeout_s": 0}, "idle_timeout_s"),
        ({"max_runtime_s": -1}, "max_runtime_s"),
        ({"topics": []}, "topics"),
        ({"stop_task_on": (int,)}, "stop_task_on"),
    ]
    for change, key in cases:
        arguments: dict[str, Any] = {
            "conf": conf,
            "topics": ["t"],
            "max_attempts": 3,
            "idle_timeout_s": 1,
            **change,
        }
        with pytest.raises((ConfigError, ValueError, TypeError), match=key.replace(".", r"\.")):
            ShareTaskSpec.create(arguments.pop("conf"), arguments.pop("topics"), **arguments)
    with pytest.raises(ConfigError, match="group.id"):
        configure_share_group({"bootstrap.servers": "b:1"}, auto_offset_reset="earliest")
    with pytest.raises(ValueError, match="share.auto.offset.reset"):
        configure_share_group(conf, auto_offset_reset="middle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nothing to set"):
        configure_share_group(conf)


def test_configure_share_group_sets_the_group_configs_the_broker_reports(
    kafka_bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    conf = _conf(kafka_bootstrap, unique_name("share"), **{"max.poll.records": 10})
    before = share_group_configs(conf)
    assert before["share.auto.offset.reset"] == "latest", before  # Kafka's default
    assert configure_share_group(
        conf, auto_offset_reset="earliest", delivery_count_limit=3, record_lock_duration_ms=9000
    ) == {
        "share.auto.offset.reset": "earliest",
        "share.delivery.count.limit": "3",
        "share.record.lock.duration.ms": "9000",
    }
    after = share_group_configs(conf)
    assert after["share.auto.offset.reset"] == "earliest"
    assert after["share.delivery.count.limit"] == "3"
    assert after["share.record.lock.duration.ms"] == "9000"
    # More attempts than the broker allows deliveries is refused before any Spark job starts.
    with pytest.raises(ValueError, match=r"share\.delivery\.count\.limit=3"):
        share_work_queue(
            None,  # type: ignore[arg-type]  # never reached
            conf,
            ["t"],
            print,
            tasks=1,
            max_attempts=4,
            idle_timeout_s=1,
            auto_offset_reset=None,
        )


def test_more_tasks_than_partitions_accept_every_record_once(
    spark: Any,
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    records, tasks = 1500, 2
    topic = create_topic(1)
    produce_numbered(kafka_bootstrap, topic, 0, records, 1)  # before the group's first read
    conf = _conf(kafka_bootstrap, unique_name("share"), **{"max.poll.records": 50})

    began = time.monotonic()
    report = share_work_queue(
        spark,
        conf,
        [topic],
        _make_process(tmp_path, lambda record: "ok", tasks_to_wait_for=tasks),
        tasks=tasks,
        max_attempts=3,
        idle_timeout_s=IDLE_TIMEOUT_S,
        auto_offset_reset="earliest",
        max_runtime_s=120,
    )
    print(f"work queue: {records} records, {tasks} tasks, {time.monotonic() - began:.1f} s")

    attempts = _attempts(tmp_path)
    offsets = Counter(line["offset"] for line in attempts)
    assert set(offsets) == set(range(records)), f"{records - len(offsets)} records never processed"
    assert [o for o, n in offsets.items() if n > 1] == [], "records processed twice"
    assert {line["delivery_count"] for line in attempts} == {1}
    assert report.accepted == records
    assert (report.released, report.poison, report.ack_failures, report.stopped) == (0, (), 0, ())
    by_task = Counter(line["task"] for line in attempts)
    assert [task.task for task in report.tasks] == list(range(tasks))
    for task in report.tasks:
        assert task.accepted > 0, f"task {task.task} did no work: {report.tasks}"
        assert task.accepted == by_task[task.task]
        assert task.partitions == ((topic, 0),)  # both tasks worked on the one partition
    assert len({task.member_id for task in report.tasks}) == tasks
    assert _leftover(conf, topic) == [], "a record was not ACCEPTed"


def test_failures_are_retried_a_stopped_task_hands_over_and_poison_is_rejected(
    spark: Any,
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    records, tasks, max_attempts = 600, 2, 3
    flaky, poison, breaker = "40", "120", "500"
    topic = create_topic(1)
    produce_numbered(kafka_bootstrap, topic, 0, records, 1)
    conf = _conf(kafka_bootstrap, unique_name("share"), **{"max.poll.records": 20})

    def outcome_of(record: dict[str, Any]) -> str:
        key, first = record["key"].decode(), record["delivery_count"] == 1
        if key == poison or (key == flaky and first):
            return "fail"
        return "stop" if key == breaker and first else "ok"

    report = share_work_queue(
        spark,
        conf,
        [topic],
        _make_process(tmp_path, outcome_of, tasks_to_wait_for=tasks),
        tasks=tasks,
        max_attempts=max_attempts,
        idle_timeout_s=IDLE_TIMEOUT_S,
        auto_offset_reset="earliest",
        max_runtime_s=120,
        stop_task_on=(ConnectionError,),
    )

    attempts = _attempts(tmp_path)
    by_key: dict[str, list[dict[str, Any]]] = {}
    for line in sorted(attempts, key=lambda line: line["delivery_count"]):  # in time order
        by_key.setdefault(line["key"], []).append(line)
    succeeded = Counter(line["key"] for line in attempts if line["outcome"] == "ok")
    assert set(succeeded) == {str(n) for n in range(records)} - {poison}
    assert [k for k, n in succeeded.items() if n > 1] == [], "a record succeeded twice"
    assert report.accepted == records - 1
    assert report.ack_failures == 0

    # The flaky record: released after its first delivery, processed on its second.
    assert [(a["delivery_count"], a["outcome"]) for a in by_key[flaky]] == [(1, "fail"), (2, "ok")]

    # The poison record: one attempt per delivery up to max_attempts, then REJECTed and reported.
    assert [a["delivery_count"] for a in by_key[poison]] == list(range(1, max_attempts + 1))
    (rejected,) = report.poison
    assert (rejected.topic, rejected.partition, rejected.key) == (topic, 0, poison.encode())
    assert rejected.delivery_count == max_attempts
    assert "cannot process 120" in rejected.error

    # The task that met the breaker stopped; the record came back to the other task.
    (stopped,) = report.stopped
    assert "ConnectionError" in (stopped.stopped_by or "")
    first, second = by_key[breaker]
    assert (first["task"], first["delivery_count"], first["outcome"]) == (stopped.task, 1, "stop")
    assert second["task"] != stopped.task
    assert (second["delivery_count"], second["outcome"]) == (2, "ok")
    assert stopped.released >= 1
    assert _leftover(conf, topic) == [], "a record was neither ACCEPTed nor REJECTed"


def test_an_escaping_exception_closes_the_member_and_nothing_is_lost(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    records, crash_at = 200, 57
    topic = create_topic(1)
    produce_numbered(kafka_bootstrap, topic, 0, records, 1)
    conf = _conf(kafka_bootstrap, unique_name("share"), **{"max.poll.records": 10})
    configure_share_group(conf, auto_offset_reset="earliest")
    spec = ShareTaskSpec.create(conf, [topic], max_attempts=3, idle_timeout_s=IDLE_TIMEOUT_S)
    processed: list[tuple[int, int]] = []

    def crashing(record: dict[str, Any]) -> None:
        processed.append((record["offset"], record["delivery_count"]))
        if record["offset"] == crash_at:
            raise KeyboardInterrupt("the worker is going down")  # not an Exception: escapes

    with pytest.raises(KeyboardInterrupt):
        run_share_task(spec, crashing)
    crashed_run = len(processed)
    report = run_share_task(
        spec, lambda record: processed.append((record["offset"], record["delivery_count"]))
    )

    # Everything up to the crash was ACCEPTed; the crash record and everything else the first
    # member held came back at once (close released them), with delivery count 2.
    first, second = processed[:crashed_run], processed[crashed_run:]
    assert [o for o, _ in first] == list(range(crash_at + 1))
    assert sorted(o for o, _ in second) == list(range(crash_at, records))
    assert dict(second)[crash_at] == 2
    assert report.accepted == records - crash_at


_KILLED_MEMBER = """
import json, os, signal, sys
from consumer.spark.work_queue import ShareTaskSpec, run_share_task

args = json.loads(sys.argv[1])
spec = ShareTaskSpec.create(args["conf"], [args["topic"]], max_attempts=3, idle_timeout_s=20)

def process(record):
    with open(args["log"], "a") as handle:
        handle.write(f"{record['offset']}\\n")
    if record["offset"] == args["kill_at"]:
        os.kill(os.getpid(), signal.SIGKILL)  # the executor is lost: no close, no ack

run_share_task(spec, process)
"""


def test_a_killed_member_gives_its_records_back_when_their_locks_expire(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    records, kill_at = 100, 33
    topic = create_topic(1)
    produce_numbered(kafka_bootstrap, topic, 0, records, 1)
    conf = _conf(kafka_bootstrap, unique_name("share"), **{"max.poll.records": 10})
    configure_share_group(conf, auto_offset_reset="earliest", record_lock_duration_ms=3000)
    log = tmp_path / "killed.log"
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            _KILLED_MEMBER,
            json.dumps({"conf": conf, "topic": topic, "log": str(log), "kill_at": kill_at}),
        ],
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=120,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL
    killed_saw = [int(line) for line in log.read_text().split()]
    assert killed_saw == list(range(kill_at + 1))

    delivered: list[tuple[int, int]] = []
    spec = ShareTaskSpec.create(conf, [topic], max_attempts=3, idle_timeout_s=IDLE_TIMEOUT_S)
    report = run_share_task(
        spec, lambda record: delivered.append((record["offset"], record["delivery_count"]))
    )
    # Its last batch (acknowledged locally, never sent) and whatever else it held come back
    # once their locks expire, with delivery count 2; the earlier batches stay ACCEPTed.
    counts = dict(delivered)
    assert sorted(counts) == list(range(min(counts), records))
    assert min(counts) <= kill_at < min(counts) + 10, "the killed member's batch came back"
    assert counts[kill_at] == 2
    assert len(delivered) == len(counts) == report.accepted
