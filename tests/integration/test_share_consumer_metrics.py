"""``ShareConsumer.metrics()`` against the real broker: a member joins a share group, is
assigned both partitions, heartbeats, acknowledges records (piggybacked on the next poll, then
by ``commit_sync()``) and one REJECT; the counters and latencies say so."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient
from share_consumer_support import CallbackLog, number_of, produce, share_group
from share_consumer_support import share_config as config

from consumer import AcknowledgeType, ShareConsumer
from consumer.member.metrics import STATE_TIME_PREFIX
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

#: Heartbeat interval of the session broker's share groups (``fast_share_group_settings``).
HEARTBEAT_INTERVAL_S = 0.5


def test_metrics_count_heartbeats_states_assignment_and_acknowledgements(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    topic = create_topic(partitions=2)
    group_id = share_group(admin, unique_name)
    produce(kafka_bootstrap, topic, 10, partitions=2)
    consumer = ShareConsumer(
        config(kafka_bootstrap, group_id, **{"share.acknowledgement.mode": "explicit"})
    )
    outcomes = CallbackLog()
    consumer.set_acknowledgement_commit_callback(outcomes)
    before = consumer.metrics()
    assert before["heartbeat-total"] == 0
    assert before["member-epoch"] == 0
    assert before[STATE_TIME_PREFIX + "STABLE"] == 0
    try:
        consumer.subscribe([topic])
        received = 0

        def acknowledge_each_poll() -> bool:
            nonlocal received
            for record in consumer.poll(0.5):
                reject = number_of(record) == 9
                consumer.acknowledge(
                    record, AcknowledgeType.REJECT if reject else AcknowledgeType.ACCEPT
                )
                received += 1
            return received == 10

        wait_until(acknowledge_each_poll, 30, "10 records polled and acknowledged")
        committed = consumer.commit_sync(30)
        assert all(error is None for error in committed.values()), committed
        wait_until(
            lambda: consumer.metrics()["heartbeat-total"] >= 4,
            10 * HEARTBEAT_INTERVAL_S,
            "four heartbeat responses",
        )
        metrics = consumer.metrics()
    finally:
        consumer.close()

    assert metrics["assigned-partitions"] == 2
    assert metrics["member-epoch"] > 0
    assert metrics[STATE_TIME_PREFIX + "STABLE"] > 0
    assert metrics[STATE_TIME_PREFIX + "JOINING"] > 0
    assert metrics["state-transitions-total"] >= 3  # JOINING, RECONCILING, ..., STABLE
    assert metrics["rebalance-total"] >= 1
    assert 0 < metrics["rebalance-latency-max"] < 30_000
    assert metrics["heartbeat-rate"] > 0
    assert 0 < metrics["heartbeat-response-time-max"] < 10_000
    assert 0 <= metrics["last-heartbeat-seconds-ago"] < 5
    # Every record's acknowledgement got an outcome: nine ACCEPTs and a REJECT, none failed.
    assert metrics["acknowledgement-send-total"] == 10, outcomes.calls
    assert metrics["acknowledgement-error-total"] == 0
    assert metrics["acknowledgement-send-rate"] > 0
    assert metrics["commit-total"] == 1
    assert 0 < metrics["commit-latency-max"] < 30_000
    assert metrics["commit-latency-avg"] == metrics["commit-latency-max"]
    assert set(metrics) >= {STATE_TIME_PREFIX + s for s in ("UNSUBSCRIBED", "FENCED", "FATAL")}
