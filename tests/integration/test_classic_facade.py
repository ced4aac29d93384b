"""What ``consumer.Consumer`` with ``group.protocol=classic`` adds to librdkafka's classic consumer,
against the real broker: callbacks receive our object, the extras (``member_epoch`` as the
generation, ``state``, ``metrics()``, ``memberid()``, ``consumer_group_metadata()``) and
``close()`` leaving the group."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient

from consumer import Consumer, KafkaError, KafkaException
from tests.support import wait_until

pytestmark = pytest.mark.integration

_CONVERGENCE_S = 30.0


def test_a_classic_member_behind_the_facade(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    topic, group = create_topic(partitions=3), unique_name("classic")
    client = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": group,
            "group.protocol": "classic",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    seen: list[tuple[str, Any, int]] = []

    def on_assign(consumer: Any, partitions: list[TopicPartition]) -> None:
        seen.append(("assign", consumer, len(partitions)))

    def on_revoke(consumer: Any, partitions: list[TopicPartition]) -> None:
        seen.append(("revoke", consumer, len(partitions)))

    try:
        assert (client.state, client.member_epoch) == ("UNSUBSCRIBED", -1)
        client.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

        def owns_all() -> bool:
            client.poll(0.1)
            return len(client.assignment()) == 3

        wait_until(owns_all, _CONVERGENCE_S, "the classic member to own the 3 partitions")
        assert [(kind, consumer) for kind, consumer, _ in seen] == [("assign", client)]
        assert client.state == "STABLE"
        generation = client.member_epoch
        assert generation >= 1
        metadata = client.consumer_group_metadata()
        assert struct.unpack_from("=i", metadata, len(b"CGMDv2:"))[0] == generation
        member_id = client.memberid()
        assert member_id
        metrics = client.metrics()
        assert metrics["assigned-partitions"] == 3
        assert metrics["partitions-assigned-total"] == 3
        assert metrics["member-epoch"] == generation

        described = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert described.type == ConsumerGroupType.CLASSIC
        assert [m.member_id for m in described.members] == [member_id]

        with pytest.raises(KafkaException) as refused:
            client.close(group_membership="remain_in_group")
        assert refused.value.args[0].code() == KafkaError._NOT_IMPLEMENTED
        client.close(group_membership="leave_group", timeout=10)
        assert seen[-1] == ("revoke", client, 3)
        left = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert left.members == [], "close() sent LeaveGroup"
    finally:
        client.close()
