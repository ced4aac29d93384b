"""A member's first assignment costs one Metadata request of its topics, against a real broker.

The runtime looks the subscribed topics up by name next to the join heartbeat
(``GroupRequests.resolve_names``). The join heartbeat goes out first on the same connection, and
a broker answers one connection's requests in order, so the first assignment (topics by id)
arrives before that lookup's answer and the member asks for the ids at once. That request used
to be a second Metadata request of the same topics (for 900 partitions, another answer for the
broker to build and the member to parse during a cold join); it now waits for the lookup in
flight (``tests/unit/runtime/test_join_metadata_reuse.py`` covers the cases).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from consumer import Consumer
from consumer._runtime.cluster import ClusterClient
from consumer._runtime.group_requests import GroupRequests
from consumer.member import FetchMetadata
from tests.support import wait_until

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_the_first_assignment_sends_one_metadata_request_of_its_topic(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = create_topic(partitions=12)
    _join_once(kafka_bootstrap, topic, unique_name("warm-up"))
    lock = threading.Lock()
    topic_requests: list[list[str] | list[uuid.UUID]] = []
    id_lookups: list[FetchMetadata] = []
    cluster_metadata = ClusterClient.metadata
    group_metadata = GroupRequests.metadata

    async def recording_cluster_metadata(
        self: ClusterClient, topics: Sequence[str] | Sequence[uuid.UUID] | None = None
    ) -> Any:
        if topics:  # the brokers-only requests (bootstrap, connections) are not counted
            with lock:
                topic_requests.append(list(topics))  # type: ignore[arg-type]
        return await cluster_metadata(self, topics)

    async def recording_id_lookup(self: GroupRequests, command: FetchMetadata) -> Any:
        with lock:
            id_lookups.append(command)
        return await group_metadata(self, command)

    monkeypatch.setattr(ClusterClient, "metadata", recording_cluster_metadata)
    monkeypatch.setattr(GroupRequests, "metadata", recording_id_lookup)
    sent_before_callback: list[list[list[str] | list[uuid.UUID]]] = []
    assigned: list[list[TopicPartition]] = []

    def on_assign(_consumer: Any, partitions: list[TopicPartition]) -> None:
        with lock:
            sent_before_callback.append(list(topic_requests))
        assigned.append(partitions)

    _join_once(kafka_bootstrap, topic, unique_name("group"), on_assign)
    assert sorted(tp.partition for tp in assigned[0]) == list(range(12))
    with lock:
        assert id_lookups, (
            "the join's answer should carry the assignment before the lookup by name answers "
            f"(same connection, answered in order); Metadata requests: {topic_requests}"
        )
        assert sent_before_callback[0] == [[topic]], (
            f"one Metadata request of the topic, by name, before on_assign: {sent_before_callback}"
        )


def _join_once(
    bootstrap: str,
    topic: str,
    group_id: str,
    on_assign: Callable[[Any, list[TopicPartition]], None] | None = None,
) -> None:
    """Join ``group_id`` alone, wait for the first ``on_assign``, close.

    A topic created a moment ago may still be missing from the coordinator's view, so the join
    answer of a group on it can come without partitions: a first group on the topic (a warm-up)
    makes sure the measured join's answer carries them.
    """
    assigned: list[list[TopicPartition]] = []

    def record(consumer: Any, partitions: list[TopicPartition]) -> None:
        if on_assign is not None:
            on_assign(consumer, partitions)
        assigned.append(partitions)

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic], on_assign=record)

        def polled_until_assigned() -> bool:
            consumer.poll(0.1)
            return bool(assigned)

        wait_until(polled_until_assigned, 30.0, f"on_assign in group {group_id}")
    finally:
        consumer.close()
