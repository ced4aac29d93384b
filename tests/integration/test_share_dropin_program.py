"""An unchanged confluent-kafka ``ShareConsumer`` program (``examples/share_consumer.py``) runs on
our ``ShareConsumer`` with only its import line changed, against a real Kafka 4.3 broker.

It runs twice on the same topic, each time in a new share group: once as written (confluent-
kafka's ShareConsumer) and once with its import line rewritten to ``from consumer import ...``.
Both runs process the same records (numbers ACCEPTed, the two poison records REJECTed) and print
exactly the same lines.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from subprocess import PIPE, Popen

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from share_consumer_support import REPO_ROOT, share_group

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PROGRAM = REPO_ROOT / "examples" / "share_consumer.py"
CONFLUENT_IMPORT = "from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer\n"
OUR_IMPORT = "from consumer import AcknowledgeType, KafkaException, ShareConsumer\n"
NUMBERS = 60
POISON = (b"not a number", b"")


def start(program: Path, bootstrap: str, topic: str, group_id: str, count: int) -> Popen[str]:
    """Start ``program`` (its stdout and stderr piped)."""
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return Popen(
        [sys.executable, str(program), bootstrap, topic, group_id, str(count)],
        stdout=PIPE,
        stderr=PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": python_path},
    )


def output_of(process: Popen[str]) -> list[str]:
    """The stdout lines of ``process`` once it ended (it must exit 0)."""
    try:
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, f"{process.args!r} exited {process.returncode}: {err[-3000:]}"
    return out.splitlines()


def test_the_example_program_prints_the_same_with_only_its_import_line_changed(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    original = PROGRAM.read_text(encoding="utf-8")
    assert original.count(CONFLUENT_IMPORT) == 1, "the program's import line changed"
    rewritten = tmp_path / "share_consumer.py"
    rewritten.write_text(original.replace(CONFLUENT_IMPORT, OUR_IMPORT), encoding="utf-8")
    changed = [
        (a, b)
        for a, b in zip(original.splitlines(), rewritten.read_text().splitlines(), strict=True)
        if a != b
    ]
    assert changed == [(CONFLUENT_IMPORT.strip(), OUR_IMPORT.strip())]

    topic = create_topic(partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 5})
    values = [str(n).encode() for n in range(NUMBERS)]
    values[17:17] = [POISON[0]]
    values[42:42] = [POISON[1]]
    for index, value in enumerate(values):
        producer.produce(topic, value=value, partition=index % 2)
    assert producer.flush(30) == 0

    # Both at once, each in its own group (they are independent; this halves the wall time).
    runs = [
        start(program, kafka_bootstrap, topic, share_group(admin, unique_name), len(values))
        for program in (PROGRAM, rewritten)
    ]
    theirs, ours = (output_of(process) for process in runs)
    assert theirs[-1] == f"done: {NUMBERS} accepted, {len(POISON)} rejected"
    assert sorted(ours) == sorted(theirs), "the same records, printed the same way"
    # And those are all the records, each once, judged by their value.
    record_lines = [line for line in theirs if line.startswith(f"{topic}[")]
    assert len(record_lines) == len(values)
    assert sorted(line.split(" value=")[1] for line in record_lines) == sorted(
        f"{value!r} {'ACCEPT' if value.isdigit() else 'REJECT'}" for value in values
    )
