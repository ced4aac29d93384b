"""Every example in examples/ runs against the real broker and does what its docstring says."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from confluent_kafka import Producer, TopicPartition

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
    load_example("quickstart").main(kafka_bootstrap, topic, unique_name("group"))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(topic)]
    values = sorted(int(re.search(r": b'(\d+)'", line).group(1)) for line in lines)  # type: ignore[union-attr]
    assert values == list(range(300))


def test_manual_commit_commits_everything_it_processed(
    kafka_bootstrap: str, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic, group = create_topic(partitions=3), unique_name("group")
    produce(kafka_bootstrap, topic, 900, 3)
    load_example("manual_commit").main(kafka_bootstrap, topic, group)
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
    topic = create_topic(partitions=2)
    load_example("static_membership").main(
        kafka_bootstrap, topic, unique_name("group"), "instance-1"
    )
    found = re.findall(
        r"incarnation (\d): epoch (\d+), partitions (\[.*\])", capsys.readouterr().out
    )
    assert [f[0] for f in found] == ["1", "2"]
    assert found[0][2] == found[1][2] == "[0, 1]"
    assert int(found[0][1]) >= 1
