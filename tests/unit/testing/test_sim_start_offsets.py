"""The simulator answers the member's ListStartOffsets from its fake logs, so a FakeConsumer's
data plane is handed absolute start offsets, as the real one is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from consumer.member import ResetPolicy, TopicPartition
from consumer.testing import FakeConsumer, SimCluster

TOPIC = "orders"


def test_start_offset_is_the_log_start_or_end_and_none_for_unknown_partitions() -> None:
    cluster = SimCluster()
    cluster.create_topic(TOPIC, 2)
    for i in range(3):
        cluster.produce(TOPIC, f"v{i}", partition=0)
    assert cluster.start_offset(TopicPartition(TOPIC, 0), ResetPolicy.EARLIEST) == 0
    assert cluster.start_offset(TopicPartition(TOPIC, 0), ResetPolicy.LATEST) == 3
    assert cluster.start_offset(TopicPartition(TOPIC, 1), ResetPolicy.LATEST) == 0
    assert cluster.start_offset(TopicPartition(TOPIC, 2), ResetPolicy.LATEST) is None
    assert cluster.start_offset(TopicPartition("other", 0), ResetPolicy.EARLIEST) is None


def _handed_starts(fake: FakeConsumer) -> list[Mapping[tuple[str, int], int]]:
    """Record what the fake's data plane is asked to assign."""
    calls: list[Mapping[tuple[str, int], int]] = []
    plane: Any = fake._dataplane  # noqa: SLF001 - the test watches the simulated data plane
    original = plane.assign

    def assign(start_offsets: Mapping[tuple[str, int], int]) -> None:
        calls.append(dict(start_offsets))
        original(start_offsets)

    plane.assign = assign
    return calls


@pytest.mark.parametrize(("policy", "expected"), [("earliest", 0), ("latest", 4)])
def test_the_data_plane_is_handed_the_absolute_start(policy: str, expected: int) -> None:
    cluster = SimCluster()
    cluster.create_topic(TOPIC, 1)
    for i in range(4):
        cluster.produce(TOPIC, f"v{i}", partition=0)
    fake = cluster.consumer({"group.id": "g", "auto.offset.reset": policy})
    handed = _handed_starts(fake)
    fake.subscribe([TOPIC])
    for _ in range(10):
        fake.poll(0.5)
    assert handed == [{(TOPIC, 0): expected}]
    fake.close()
