"""A ``ShareConsumer`` through a rolling restart of the three-broker cluster: every broker in turn
shut down (SIGTERM) and restarted, the next one once every replica is back in sync, while
numbered records are produced (``acks=all``, idempotent) after each restart. Every record is
ACCEPTed, or its ACCEPT was in flight to a broker that went down (reported failed, never
redelivered: the old leader applied it); no record is ACCEPTed twice.

Share groups own no partition, so "no partition owned twice" does not apply here.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable

import pytest
from cluster_fleet import wait_fully_replicated
from confluent_kafka import AcknowledgeType, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from test_leader_moves import expected_keys, produce

from consumer import ShareConsumer
from consumer.testing.real.cluster import LocalCluster
from tests.integration.share_wire_support import set_share_group_configs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 2
CHUNK = 100
BOUND_S = 150.0


def test_share_consumer_accepts_every_record_once_through_a_rolling_restart(
    cluster: LocalCluster, cluster_admin: AdminClient, replicated_topic: Callable[[int], str]
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
    records = CHUNK * (1 + len(cluster.broker_ids))
    outcomes: list[tuple[tuple[int, int], int | None]] = []
    lock = threading.Lock()

    def on_commit(offsets: dict[TopicPartition, set[int]], error: KafkaException | None) -> None:
        code = None if error is None else error.args[0].code()
        with lock:
            outcomes.extend(((tp.partition, o), code) for tp, ns in offsets.items() for o in ns)

    restarts_done = threading.Event()
    restart_errors: list[BaseException] = []
    restart_s: list[float] = []

    def roll() -> None:
        try:
            for number, node in enumerate(cluster.broker_ids, start=1):
                started = time.monotonic()
                cluster.stop(node)
                cluster.restart(node)
                wait_fully_replicated(cluster_admin, [topic, "__share_group_state"])
                restart_s.append(time.monotonic() - started)
                numbers = range(number * CHUNK, (number + 1) * CHUNK)
                produce(cluster.bootstrap_servers, topic, numbers, PARTITIONS)
        except BaseException as exc:  # reported by the main thread
            restart_errors.append(exc)
        finally:
            restarts_done.set()

    deliveries: Counter[tuple[int, int]] = Counter()
    with ShareConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group_id,
            "share.acknowledgement.mode": "explicit",
            "max.poll.records": 20,
        }
    ) as consumer:
        consumer.set_acknowledgement_commit_callback(on_commit)
        consumer.subscribe([topic])
        roller = threading.Thread(target=roll, name="rolling-restart", daemon=True)
        roller.start()

        def accepted() -> set[tuple[int, int]]:
            with lock:
                return {key for key, code in outcomes if code is None}

        def in_doubt() -> set[tuple[int, int]]:
            with lock:
                failed = {key for key, code in outcomes if code is not None}
            return failed - accepted() - {k for k, n in deliveries.items() if n > 1}

        wanted = expected_keys(records, PARTITIONS)
        deadline = time.monotonic() + BOUND_S
        while not (restarts_done.is_set() and wanted <= accepted() | in_doubt()):
            assert not restart_errors, restart_errors
            assert time.monotonic() < deadline, (
                f"{len(accepted())} of {records} ACCEPTed, {len(in_doubt())} in doubt; "
                f"restarts done: {restarts_done.is_set()} ({restart_s}); outcomes "
                f"{Counter(code for _, code in outcomes)}"
            )
            for message in consumer.poll(0.5):
                assert message.error() is None, message.error()
                deliveries[(message.partition(), message.offset())] += 1
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        consumer.commit_sync(30)
        roller.join(30)
    assert not restart_errors, restart_errors

    accepted_counts = Counter(key for key, code in outcomes if code is None)
    doubtful = in_doubt()
    assert set(accepted_counts) | doubtful == wanted, "every record ACCEPTed or in doubt"
    assert max(accepted_counts.values()) == 1, (
        f"ACCEPTed twice: {[k for k, n in accepted_counts.items() if n > 1]}"
    )
    assert all(deliveries[k] == 1 for k in doubtful), "in doubt only after one delivery"
    print(  # noqa: T201 - the figures of the run, for the report
        f"\nshare rolling restart: brokers {cluster.broker_ids} restarted in "
        f"{[round(s, 1) for s in restart_s]} s; {sum(deliveries.values())} deliveries of "
        f"{records} records, {sum(1 for n in deliveries.values() if n > 1)} redelivered, "
        f"{len(doubtful)} ACCEPTs in doubt; failed acknowledgements "
        f"{Counter(code for _, code in outcomes if code is not None)}"
    )
