"""Smoke test that runs INSIDE a fresh virtual environment holding only the built wheel.

``wheel_smoke.py`` copies this file to a folder outside the source tree and runs it with the
venv's interpreter: ``python smoke_inside.py --bootstrap HOST:PORT --extra none|spark|testing``.
It uses nothing from the repository. Every check raises on failure; the last line printed is
``smoke ok: ...`` when all passed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

DISTRIBUTION = "kafka-group-member"
RECORDS = 20
PARTITIONS = 2


def check_installed_copy(source_tree: Path | None) -> None:
    """``consumer`` is imported from the venv's site-packages, never from the source tree."""
    import consumer

    where = Path(consumer.__file__).resolve()
    assert Path(sys.prefix).resolve() in where.parents, f"consumer imported from {where}"
    if source_tree is not None:
        assert source_tree not in where.parents, f"consumer imported from the source tree {where}"
    assert consumer.__version__ == importlib.metadata.version(DISTRIBUTION)
    pom = Path(consumer.__file__).with_name("testing") / "real" / "kafka-pom.xml"
    assert pom.is_file(), f"the Maven pom is not inside the installed package ({pom})"


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(30)


def produce(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for number in range(RECORDS):
        producer.produce(topic, value=str(number).encode(), partition=number % PARTITIONS)
    assert producer.flush(30) == 0, "records left unsent"


def consume_commit_round_trip(bootstrap: str) -> None:
    """Produce, consume every record with ``consumer.Consumer``, commit, read the commit back."""
    from confluent_kafka import TopicPartition

    from consumer import Consumer

    topic, group = f"smoke-{uuid.uuid4().hex[:8]}", f"smoke-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    produce(bootstrap, topic)
    member = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        member.subscribe([topic])
        seen: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while sum(seen.values()) < RECORDS:
            assert time.monotonic() < deadline, f"consumed {seen} of {RECORDS} records"
            message = member.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            partition = message.partition()
            assert partition is not None, "a record without a partition"
            seen[partition] = seen.get(partition, 0) + 1
        member.commit(asynchronous=False)
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed = {tp.partition: tp.offset for tp in member.committed(partitions, timeout=30)}
        assert committed == seen, f"committed {committed}, consumed {seen}"
    finally:
        member.close()
    print(f"round trip: {RECORDS} records consumed and committed on {topic}", flush=True)


def check_pytest_plugin(workdir: Path) -> None:
    """The pytest plugin is found through its ``pytest11`` entry point (the ``testing`` extra)."""
    ours = [
        ep
        for ep in importlib.metadata.entry_points(group="pytest11")
        if ep.dist is not None and ep.dist.name == DISTRIBUTION
    ]
    assert ours, "the wheel declares no pytest11 entry point"
    names = ", ".join(repr(ep.name) for ep in ours)
    test_file = workdir / "test_plugin_found.py"
    test_file.write_text(
        "def test_plugin_registered(pytestconfig):\n"
        f"    for name in ({names},):\n"
        "        assert pytestconfig.pluginmanager.has_plugin(name), name\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    print(f"pytest plugin: entry point(s) {names} loaded by pytest", flush=True)


def spark_job(bootstrap: str) -> None:
    """A batch snapshot of a group through Spark, committed after the count."""
    from consumer.spark import group_snapshot, local_session

    topic, group = f"smoke-spark-{uuid.uuid4().hex[:8]}", f"smoke-spark-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    produce(bootstrap, topic)
    spark = local_session("kgm-wheel-smoke")
    try:
        with group_snapshot(
            spark, bootstrap_servers=bootstrap, group_id=group, topics=[topic]
        ) as snapshot:
            rows = snapshot.dataframe().count()
            assert rows == RECORDS, f"Spark read {rows} records, expected {RECORDS}"
            result = snapshot.commit()
            assert result.ok, f"commit rejected: {result.rejected}"
    finally:
        spark.stop()
    print(f"spark: snapshot of {RECORDS} records counted and committed", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--extra", choices=["none", "spark", "testing"], required=True)
    parser.add_argument("--source-tree", type=Path, default=None)
    args = parser.parse_args()
    assert "PYTHONPATH" not in os.environ, "PYTHONPATH would let the source tree leak in"
    check_installed_copy(args.source_tree.resolve() if args.source_tree else None)
    consume_commit_round_trip(args.bootstrap)
    if args.extra == "testing":
        import consumer.testing.real.security  # noqa: F401  (needs the extra's cryptography)

        with tempfile.TemporaryDirectory(prefix="kgm-plugin-") as folder:
            check_pytest_plugin(Path(folder))
    if args.extra == "spark":
        spark_job(args.bootstrap)
    print(f"smoke ok: extra={args.extra}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
