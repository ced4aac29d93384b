"""``consumer.ShareConsumer`` against a real Kafka 4.3 broker (share groups, KIP-932).

Three consumers share a topic in implicit mode and every record is delivered exactly once;
explicit mode redelivers a RELEASEd record (delivery count 2) and never a REJECTed one, and
refuses to poll while records are unacknowledged; close releases held records at once (a second
member gets them long before the group's lock duration) and leaves the group.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import IllegalStateException, Message, TopicPartition
from confluent_kafka.admin import AdminClient
from share_consumer_support import LOCK_DURATION_MS, poll_until, produce, share_group
from share_consumer_support import share_config as config

from consumer import AcknowledgeType, ShareConsumer
from consumer._runtime.cluster import ClusterClient
from consumer._wire.share_heartbeat import (
    build_share_heartbeat_request,
    parse_share_heartbeat_response,
)
from consumer.share import ShareHeartbeatRequest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

UNKNOWN_MEMBER_ID = 25


@pytest.fixture
def consumers() -> Iterator[list[ShareConsumer]]:
    made: list[ShareConsumer] = []
    yield made
    for consumer in made:
        consumer.close()


def test_three_implicit_members_accept_every_record_exactly_once(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    consumers: list[ShareConsumer],
) -> None:
    topic = create_topic(partitions=2)
    group_id = share_group(admin, unique_name)
    total = 600
    for _ in range(3):
        consumer = ShareConsumer(config(kafka_bootstrap, group_id, **{"max.poll.records": 20}))
        consumer.subscribe([topic])
        consumers.append(consumer)
    deliveries: Counter[tuple[int, int]] = Counter()
    by_member: Counter[int] = Counter()
    counts: Counter[int | None] = Counter()
    produced = 0
    deadline = time.monotonic() + 60
    while len(deliveries) < total:
        assert time.monotonic() < deadline, f"{len(deliveries)} of {total} delivered"
        if produced < total:  # a trickle, so every member is in the group while records flow
            produce(kafka_bootstrap, topic, 50, start=produced, partitions=2)
            produced += 50
        for index, consumer in enumerate(consumers):
            for message in consumer.poll(0.2):
                assert message.error() is None
                deliveries[(message.partition(), message.offset())] += 1
                by_member[index] += 1
                counts[message.delivery_count()] += 1
    for consumer in consumers:
        consumer.close()  # ACCEPTs the last poll's records
    assert sum(deliveries.values()) == total, "no record twice"
    assert set(deliveries.values()) == {1}
    assert counts == Counter({1: total}), "every delivery was the first"
    assert len(by_member) > 1, f"one member got everything: {by_member}"

    # Accepted means finished: a new member of the group finds nothing left.
    late = ShareConsumer(config(kafka_bootstrap, group_id))
    consumers.append(late)
    late.subscribe([topic])
    leftover: list[Message] = []
    end = time.monotonic() + 5
    while time.monotonic() < end:
        leftover.extend(late.poll(0.5))
    assert leftover == []


def test_explicit_release_redelivers_reject_never_and_poll_refuses_unacknowledged(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    consumers: list[ShareConsumer],
) -> None:
    topic = create_topic(partitions=1)
    group_id = share_group(admin, unique_name)
    produce(kafka_bootstrap, topic, 3)
    consumer = ShareConsumer(
        config(kafka_bootstrap, group_id, **{"share.acknowledgement.mode": "explicit"})
    )
    consumers.append(consumer)
    consumer.subscribe([topic])
    first = poll_until(consumer, lambda got: len(got) >= 3)
    assert [(m.offset(), m.value(), m.delivery_count()) for m in first] == [
        (0, b"v0", 1),
        (1, b"v1", 1),
        (2, b"v2", 1),
    ]
    with pytest.raises(IllegalStateException, match="3 records from previous poll"):
        consumer.poll(0.1)
    consumer.acknowledge(first[0], AcknowledgeType.ACCEPT)
    consumer.acknowledge(first[1], AcknowledgeType.RELEASE)
    consumer.acknowledge_offset(topic, 0, 2, AcknowledgeType.REJECT)
    with pytest.raises(IllegalStateException, match="not in flight"):
        consumer.acknowledge(first[0], AcknowledgeType.ACCEPT)

    again = poll_until(consumer, lambda got: len(got) >= 1)
    assert [(m.offset(), m.delivery_count()) for m in again] == [(1, 2)]
    consumer.acknowledge(again[0], AcknowledgeType.ACCEPT)
    assert consumer.commit_sync(30) == {TopicPartition(topic, 0): None}

    later: list[Message] = []
    end = time.monotonic() + 3
    while time.monotonic() < end:
        later.extend(consumer.poll(0.5))
    assert later == [], "ACCEPTed and REJECTed records are finished"


async def heartbeat_error(bootstrap: str, group_id: str, member_id: str) -> int | None:
    async with ClusterClient(bootstrap) as cluster:
        request = ShareHeartbeatRequest(group_id, member_id, 1)
        response = await cluster.coordinator_request(
            group_id, build_share_heartbeat_request(request)
        )
        error = parse_share_heartbeat_response(response).error
        return None if error is None else error.code


def test_close_releases_held_records_at_once_and_leaves(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    consumers: list[ShareConsumer],
) -> None:
    topic = create_topic(partitions=1)
    group_id = share_group(admin, unique_name)
    produce(kafka_bootstrap, topic, 5)
    explicit = {"share.acknowledgement.mode": "explicit"}
    holder = ShareConsumer(config(kafka_bootstrap, group_id, **explicit))
    consumers.append(holder)
    holder.subscribe([topic])
    held = poll_until(holder, lambda got: len(got) >= 5)
    assert {m.delivery_count() for m in held} == {1}

    with pytest.raises(IllegalStateException):
        holder.acknowledge(Message(topic=topic, partition=0, offset=99))
    member_id = holder.memberid()
    closed_at = time.monotonic()
    holder.close()  # nothing acknowledged: closing the session releases all five
    with pytest.raises(IllegalStateException, match="closed"):
        holder.poll(0.1)

    taker = ShareConsumer(config(kafka_bootstrap, group_id, **explicit))
    consumers.append(taker)
    taker.subscribe([topic])
    back = poll_until(taker, lambda got: len(got) >= 5, bound_s=20)
    waited_s = time.monotonic() - closed_at
    assert sorted(m.offset() for m in back) == [0, 1, 2, 3, 4]
    assert {m.delivery_count() for m in back} == {2}
    assert waited_s < LOCK_DURATION_MS / 1000 / 2, "released at close, not at lock expiry"
    for message in back:
        taker.acknowledge(message)

    error = asyncio.run(heartbeat_error(kafka_bootstrap, group_id, member_id))
    assert error == UNKNOWN_MEMBER_ID, "the closed member left the group"


def test_implicit_mode_refuses_acknowledge(
    kafka_bootstrap: str, unique_name: Callable[[str], str], consumers: list[ShareConsumer]
) -> None:
    consumer = ShareConsumer(config(kafka_bootstrap, unique_name("share")))
    consumers.append(consumer)
    with pytest.raises(IllegalStateException, match="explicit"):
        consumer.acknowledge(Message(topic="t", partition=0, offset=0))
    with pytest.raises(IllegalStateException, match="not subscribed"):
        consumer.poll(0)
