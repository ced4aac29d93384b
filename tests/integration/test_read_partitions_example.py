"""``examples/read_partitions.py``, a confluent-kafka manual-assignment program (a tool that
reads given partitions from given offsets, commits, seeks and reads again), runs unchanged on
our ``Consumer`` but for its import line, and prints exactly what it prints on confluent-kafka's.

It runs twice on the same topic, each time with a new group: once as written
(``confluent_kafka.Consumer``) and once with ``Consumer`` imported from ``consumer``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REPO_ROOT = Path(__file__).resolve().parents[2]
PROGRAM = REPO_ROOT / "examples" / "read_partitions.py"
CONFLUENT_IMPORT = "from confluent_kafka import Consumer, KafkaException, TopicPartition\n"
OUR_IMPORT = (
    "from confluent_kafka import KafkaException, TopicPartition\nfrom consumer import Consumer\n"
)
RECORDS_PER_PARTITION = 6
STARTS = ("0:2", "2:0", "1:5")


def run(program: Path, bootstrap: str, group_id: str, topic: str) -> str:
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(program), bootstrap, group_id, topic, *STARTS],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "PYTHONPATH": python_path},
        check=False,
    )
    assert done.returncode == 0, f"{program.name} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_program_prints_the_same_on_both_consumers(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    topic = create_topic(partitions=3)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for partition in range(3):
        for n in range(RECORDS_PER_PARTITION):
            producer.produce(topic, f"p{partition}-{n}".encode(), partition=partition)
    assert producer.flush(30) == 0
    source = PROGRAM.read_text()
    assert source.count(CONFLUENT_IMPORT) == 1, "the program imports Consumer once"
    ours = tmp_path / "read_partitions_ours.py"
    ours.write_text(source.replace(CONFLUENT_IMPORT, OUR_IMPORT))

    printed_by_confluent = run(PROGRAM, kafka_bootstrap, unique_name("group"), topic)
    printed_by_ours = run(ours, kafka_bootstrap, unique_name("group"), topic)

    assert printed_by_ours == printed_by_confluent
    lines = printed_by_ours.splitlines()
    assert lines[:3] == [f"partition {p}: offsets 0..{RECORDS_PER_PARTITION}" for p in range(3)]
    read = [line for line in lines if line.startswith("read ")]
    expected = [
        f"read {p} {n} p{p}-{n}" for p, start in ((0, 2), (1, 5), (2, 0)) for n in range(start, 6)
    ]
    assert read == expected
    assert [line for line in lines if line.startswith("again ")] == [
        f"again 0 {n} p0-{n}" for n in range(2, 6)
    ]
    assert "seek of an unassigned partition: _STATE" in lines
    assert lines[-3:] == [f"committed {p} {RECORDS_PER_PARTITION}" for p in range(3)]
