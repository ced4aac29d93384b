"""A ``ShareConsumer`` whose share-group coordinator answers COORDINATOR_LOAD_IN_PROGRESS for a
while: the consumer reaches the brokers through their fault proxies, and the coordinator's proxy
answers every ShareGroupHeartbeat itself with that error for half the session timeout, without
forwarding it, while numbered records are produced. The heartbeat error is retriable and must
surface nowhere; the consumer keeps fetching and acknowledging from the partition leaders (which
are not the coordinator's business), and every record is ACCEPTed exactly once.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from reliability_support import SESSION_MS
from test_leader_moves import expected_keys, produce

from consumer import ShareConsumer
from consumer.testing.real.proxied_cluster import ProxiedCluster
from tests.integration.share_wire_support import set_share_group_configs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 2
CHUNK = 100
BOUND_S = 90.0
SHARE_GROUP_HEARTBEAT = 76
COORDINATOR_LOAD_IN_PROGRESS = 14
LOADING_S = SESSION_MS / 2000


def test_share_consumer_rides_out_a_coordinator_answering_load_in_progress(
    cluster: ProxiedCluster, cluster_admin: AdminClient, replicated_topic: Callable[[int], str]
) -> None:
    topic = replicated_topic(PARTITIONS)
    group_id = f"share-{uuid.uuid4().hex[:10]}"
    set_share_group_configs(
        cluster_admin,
        group_id,
        share_auto_offset_reset="earliest",
        share_record_lock_duration_ms="15000",
    )
    produce(cluster.bootstrap_servers, topic, range(CHUNK), PARTITIONS)
    outcomes: list[tuple[tuple[int, int], int | None]] = []
    lock = threading.Lock()

    def on_commit(offsets: dict[TopicPartition, set[int]], error: KafkaException | None) -> None:
        code = None if error is None else error.args[0].code()
        with lock:
            outcomes.extend(((tp.partition, o), code) for tp, ns in offsets.items() for o in ns)

    def accepted() -> Counter[tuple[int, int]]:
        with lock:
            return Counter(key for key, code in outcomes if code is None)

    deliveries: Counter[tuple[int, int]] = Counter()
    with ShareConsumer(
        {
            "bootstrap.servers": cluster.member_bootstrap_servers,
            "group.id": group_id,
            "share.acknowledgement.mode": "explicit",
            "max.poll.records": 20,
        }
    ) as consumer:
        consumer.set_acknowledgement_commit_callback(on_commit)
        consumer.subscribe([topic])

        def consume_until(count: int, what: str) -> None:
            wanted = expected_keys(count, PARTITIONS)
            deadline = time.monotonic() + BOUND_S
            while not wanted <= set(accepted()):
                assert time.monotonic() < deadline, (
                    f"{what}: {len(set(accepted()) & wanted)} of {count} ACCEPTed; outcomes "
                    f"{Counter(code for _, code in outcomes)}"
                )
                for message in consumer.poll(0.5):
                    assert message.error() is None, message.error()
                    deliveries[(message.partition(), message.offset())] += 1
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                consumer.commit_async()

        consume_until(CHUNK, "before the fault")
        proxy = cluster.proxy(cluster.coordinator_of(group_id))
        answered_before = proxy.stats().answered
        proxy.answer_with_error(SHARE_GROUP_HEARTBEAT, COORDINATOR_LOAD_IN_PROGRESS)
        loading_until = time.monotonic() + LOADING_S
        produce(cluster.bootstrap_servers, topic, range(CHUNK, 2 * CHUNK), PARTITIONS)
        during = 0
        while time.monotonic() < loading_until:
            for message in consumer.poll(0.2):
                assert message.error() is None, message.error()
                deliveries[(message.partition(), message.offset())] += 1
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                during += 1
            consumer.commit_async()
        proxy.heal()
        answered = proxy.stats().answered - answered_before
        produce(cluster.bootstrap_servers, topic, range(2 * CHUNK, 3 * CHUNK), PARTITIONS)
        consume_until(3 * CHUNK, "after the fault")
        consumer.commit_sync(30)

    counts = accepted()
    failed = Counter(code for _, code in outcomes if code is not None)
    print(  # noqa: T201 - the figures of the run, for the report
        f"\nshare coordinator loading {LOADING_S} s: {answered} heartbeats answered with "
        f"COORDINATOR_LOAD_IN_PROGRESS, {during} records delivered meanwhile; "
        f"{sum(deliveries.values())} deliveries of {3 * CHUNK} records; failed acknowledgements "
        f"{dict(failed)}"
    )
    assert set(counts) == expected_keys(3 * CHUNK, PARTITIONS), "every record ACCEPTed"
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1]
    assert not failed, f"acknowledgements failed: {failed}"
    assert answered >= 1, "the consumer's heartbeats reached the answering proxy"
    assert during > 0, "the consumer kept fetching while the coordinator loaded"
