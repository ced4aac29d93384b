"""Every example in examples/ runs against the real broker and does what its docstring says."""

from __future__ import annotations

import importlib.util
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from consumer import Consumer

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for number in range(count):
        producer.produce(topic, str(number).encode(), partition=number % partitions)
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        probe.subscribe([topic])  # committed() speaks for the group through a member
        result = probe.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
        return [tp.offset for tp in result]
    finally:
        probe.close()


def test_quickstart_prints_every_record(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = create_topic(partitions=3)
    produce(kafka_bootstrap, topic, 300, 3)
    load_example("quickstart").main(kafka_bootstrap, topic, unique_name("group"), max_records=300)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(topic)]
    values = sorted(int(re.search(r": b'(\d+)'", line).group(1)) for line in lines)  # type: ignore[union-attr]
    assert values == list(range(300))


def test_manual_commit_commits_everything_it_processed(
    kafka_bootstrap: str, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic, group = create_topic(partitions=3), unique_name("group")
    produce(kafka_bootstrap, topic, 900, 3)
    load_example("manual_commit").main(kafka_bootstrap, topic, group, max_records=900)
    assert committed(kafka_bootstrap, group, topic, 3) == [300, 300, 300]


def test_rebalance_listener_reports_assignment_and_states(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = create_topic(partitions=2)
    load_example("rebalance_listener").main(
        kafka_bootstrap, topic, unique_name("group"), run_seconds=3.0
    )
    out = capsys.readouterr().out
    assert out.startswith("state UNSUBSCRIBED -> JOINING")
    # The join answer may carry nothing yet (JOINING -> STABLE) before the partitions arrive.
    assert out.index("-> RECONCILE_ASSIGNMENT") < out.index("assigned: [0, 1]")
    assert "-> STABLE" in out
    # close() revokes before the member leaves.
    assert out.index("revoked: [0, 1]") < out.index("state UNSUBSCRIBING -> UNSUBSCRIBED")


def test_static_membership_gets_the_same_partitions_back(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic, group = create_topic(partitions=2), unique_name("group")
    produce(kafka_bootstrap, topic, 20, 2)
    example = load_example("static_membership")
    runs = []
    for _ in range(2):  # the same instance id, restarted within the session timeout
        example.main(kafka_bootstrap, topic, group, "instance-1", max_records=10)
        runs.append(capsys.readouterr().out)
    assigned = [
        re.findall(r"instance-1: assigned (\[.*\]) at member epoch (\d+)", out) for out in runs
    ]
    assert [[partitions for partitions, _ in found] for found in assigned] == [["[0, 1]"]] * 2
    assert int(assigned[0][0][1]) >= 1
    assert all("instance-1: stopped after 10 records" in out for out in runs), runs
    # Each incarnation committed what it consumed when it closed: 20 records, all of them.
    assert sum(committed(kafka_bootstrap, group, topic, 2)) == 20


def test_quickstart_as_a_service_shuts_down_gracefully_on_sigterm(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    """Run as a process with no record limit, it consumes until SIGTERM; then it exits 0, having
    committed everything it printed and left the group (no member remains)."""
    topic, group = create_topic(partitions=3), unique_name("group")
    produce(kafka_bootstrap, topic, 300, 3)
    command = [sys.executable, str(EXAMPLES / "quickstart.py"), kafka_bootstrap, topic, group]
    environment = {**os.environ, "PYTHONPATH": str(EXAMPLES.parent)}
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    ) as process:
        stdout, stderr_stream = process.stdout, process.stderr
        assert stdout is not None
        assert stderr_stream is not None
        reader = threading.Thread(target=lambda: [lines.put(line) for line in stdout])
        reader.start()
        try:
            deadline = time.monotonic() + 60
            while sum(line.startswith(f"{topic}[") for line in seen) < 300:
                remaining = deadline - time.monotonic()
                assert remaining > 0, "too few records printed:\n" + "".join(seen[-20:])
                seen.append(lines.get(timeout=remaining))
            assert process.poll() is None, "without a limit the example runs until stopped"
            process.send_signal(signal.SIGTERM)
            exit_code = process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            reader.join(10)
            stderr = stderr_stream.read()
    while not lines.empty():
        seen.append(lines.get())
    assert exit_code == 0, stderr[-3000:]
    assert seen[-1] == "stopped after 300 records\n", seen[-5:]
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert described.members == [], "close() left the group"
    assert committed(kafka_bootstrap, group, topic, 3) == [100, 100, 100]
