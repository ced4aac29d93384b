"""Members on a real three-broker cluster while a broker they depend on is killed (SIGKILL):

* a ``ShareConsumer`` whose partition leader dies follows the partition to its new leader; every
  record (produced with ``acks=all``, idempotent, before and after the kill) is ACCEPTed, or its
  ACCEPT was in flight to the dead leader (reported failed, yet never redelivered: the dead
  leader applied it and only the answer was lost); no record is reported ACCEPTed twice, and
  records held unacknowledged at the kill fail in the commit callback and come back;
* a ``Consumer`` (KIP-848) whose group coordinator dies finds the new coordinator and goes on
  committing: every record arrives, and the committed offsets never go back.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from consumer import Consumer, ShareConsumer
from consumer.testing.real.cluster import LocalCluster
from tests.integration.share_wire_support import set_share_group_configs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

RECORDS = 300
PARTITIONS = 2
#: Bound on the whole consumption, the leader move and its recovery included.
CONSUME_BOUND_S = 120.0


def produce(bootstrap: str, topic: str, numbers: range, partitions: int) -> None:
    """Produce ``v<n>`` for each ``n`` to partition ``n % partitions``, ``acks=all`` and
    idempotent, so a record acknowledged here survives the loss of one replica."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    for number in numbers:
        producer.produce(topic, value=f"v{number}".encode(), partition=number % partitions)
    assert producer.flush(60) == 0, "every record was acknowledged by the in-sync replicas"


def expected_keys(count: int, partitions: int) -> set[tuple[int, int]]:
    """(partition, offset) of records 0 .. count-1 produced by :func:`produce`."""
    return {(n % partitions, n // partitions) for n in range(count)}


def wait_for_new_leader(cluster: LocalCluster, topic: str, partition: int, old: int) -> int:
    deadline = time.monotonic() + 60
    while (leader := cluster.leader_of(topic, partition)) in (old, -1):
        assert time.monotonic() < deadline, f"{topic}/{partition} still led by {leader}"
        time.sleep(0.2)  # the controller tells no one: ask the metadata again
    return leader


def test_share_consumer_follows_a_killed_partition_leader_and_accepts_every_record_once(
    cluster: LocalCluster,
    cluster_admin: AdminClient,
    replicated_topic: Callable[[int], str],
) -> None:
    topic = replicated_topic(PARTITIONS)
    group_id = f"share-{uuid.uuid4().hex[:10]}"
    set_share_group_configs(
        cluster_admin,
        group_id,
        share_auto_offset_reset="earliest",
        share_record_lock_duration_ms="15000",
    )
    produce(cluster.bootstrap_servers, topic, range(RECORDS // 2), PARTITIONS)
    # (partition, offset) -> error code of each acknowledgement outcome (None: ACCEPTed).
    outcomes: list[tuple[tuple[int, int], int | None]] = []

    def on_commit(offsets: dict[TopicPartition, set[int]], error: KafkaException | None) -> None:
        code = None if error is None else error.args[0].code()
        outcomes.extend(((tp.partition, o), code) for tp, ns in offsets.items() for o in ns)

    deliveries: Counter[tuple[int, int]] = Counter()
    # (partition, offset) -> the delivery counts the broker reported, in order.
    delivery_counts: dict[tuple[int, int], list[int | None]] = {}
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

        def take(messages: list[Message], *, accept: bool = True) -> None:
            for message in messages:
                assert message.error() is None, message.error()
                key = (message.partition(), message.offset())
                deliveries[key] += 1
                delivery_counts.setdefault(key, []).append(message.delivery_count())
                if accept:
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)

        def poll_and_accept() -> None:
            take(list(consumer.poll(0.5)))

        deadline = time.monotonic() + CONSUME_BOUND_S
        while sum(deliveries.values()) < RECORDS // 10:
            assert time.monotonic() < deadline, f"{sum(deliveries.values())} records delivered"
            poll_and_accept()
        # Hold records of partition 0 unacknowledged while its leader dies.
        held: list[Message] = []
        while not held:
            assert time.monotonic() < deadline, "no record of partition 0 arrived"
            batch = list(consumer.poll(0.5))
            held = [m for m in batch if m.partition() == 0]
            take([m for m in batch if m.partition() != 0])
            take(held, accept=False)
        old_leader = cluster.leader_of(topic, 0)
        cluster.kill(old_leader)
        take(held)  # acquired from the dead leader: these ACCEPTs must fail and come back
        held_keys = {(m.partition(), m.offset()) for m in held}
        new_leader = wait_for_new_leader(cluster, topic, 0, old_leader)
        produce(cluster.bootstrap_servers, topic, range(RECORDS // 2, RECORDS), PARTITIONS)

        def accepted() -> set[tuple[int, int]]:
            return {key for key, code in outcomes if code is None}

        def in_doubt() -> set[tuple[int, int]]:
            """Records whose ACCEPT failed and that did not come back: the ACCEPT was in flight
            when the leader died, which may have applied it (only the answer was lost)."""
            failed = {key for key, code in outcomes if code is not None}
            return failed - accepted() - {k for k, n in deliveries.items() if n > 1}

        wanted = expected_keys(RECORDS, PARTITIONS)
        # Done when each record has an outcome: ACCEPTed, or in doubt; the held records, whose
        # ACCEPTs never left the client, must come back and be ACCEPTed.
        while not (wanted <= accepted() | in_doubt() and held_keys <= accepted()):
            missing = sorted(wanted - accepted())
            assert time.monotonic() < deadline, (
                f"{len(accepted())} of {RECORDS} ACCEPTed after leader {old_leader} of "
                f"{topic}/0 was killed (new leader {new_leader}); held at the kill "
                f"{sorted(held_keys)}; not ACCEPTed {missing} with delivery counts "
                f"{[delivery_counts.get(k) for k in missing]} and ACCEPT outcomes "
                f"{[[c for key, c in outcomes if key == k] for k in missing]}; all outcomes "
                f"{Counter(code for _, code in outcomes)}"
            )
            poll_and_accept()
        consumer.commit_sync(30)

    accepted_counts = Counter(key for key, code in outcomes if code is None)
    assert set(accepted_counts) | in_doubt() == wanted, "every record ACCEPTed or in doubt"
    assert max(accepted_counts.values()) == 1, (
        f"ACCEPTed twice: {[k for k, n in accepted_counts.items() if n > 1]}"
    )
    failed = {key for key, code in outcomes if code is not None}
    redelivered = {key for key, count in deliveries.items() if count > 1}
    assert held_keys <= failed, "the ACCEPTs of records held from the dead leader failed"
    assert held_keys <= redelivered, "records never acknowledged to a live leader came back"
    doubtful = in_doubt()
    assert doubtful.isdisjoint(held_keys)
    assert all(delivery_counts[k] == [1] for k in doubtful), "in doubt only after one delivery"
    print(  # noqa: T201 - the figures of the run, for the report
        f"\nshare: leader {old_leader} -> {new_leader}; {sum(deliveries.values())} deliveries "
        f"of {RECORDS} records, {len(held)} held at the kill, {len(redelivered)} redelivered, "
        f"{len(doubtful)} ACCEPTs in doubt (failed in flight, not redelivered); "
        "failed acknowledgements "
        f"{Counter(code for _, code in outcomes if code is not None)}; delivery counts of "
        f"the redelivered {Counter(tuple(delivery_counts[k]) for k in redelivered)}"
    )


def test_consumer_finds_the_new_coordinator_after_its_broker_is_killed(
    cluster: LocalCluster, replicated_topic: Callable[[int], str]
) -> None:
    topic = replicated_topic(PARTITIONS)
    group_id = f"group-{uuid.uuid4().hex[:10]}"
    produce(cluster.bootstrap_servers, topic, range(RECORDS // 2), PARTITIONS)
    seen: Counter[tuple[int, int]] = Counter()
    committed: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    retried_commits: Counter[str] = Counter()
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    deadline = time.monotonic() + CONSUME_BOUND_S

    def commit() -> None:
        """Commit what was consumed; a commit that meets the coordinator's move is retried."""
        while True:
            assert time.monotonic() < deadline, f"commits kept failing: {retried_commits}"
            try:
                results = consumer.commit(asynchronous=False) or []
            except KafkaException as exc:
                error = exc.args[0]
                assert error.retriable(), f"a commit failed for good: {error}"
                retried_commits[error.name()] += 1
                continue
            assert all(tp.error is None for tp in results), results
            for tp in results:
                committed[tp.partition].append(tp.offset)
            return

    def consume_some(count: int) -> None:
        for _ in range(count):
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                seen[(message.partition(), message.offset())] += 1
        if seen:
            commit()

    try:
        consumer.subscribe([topic])
        while len(seen) < RECORDS // 4:
            assert time.monotonic() < deadline, f"{len(seen)} records consumed"
            consume_some(10)
        old_coordinator = cluster.coordinator_of(group_id)
        cluster.kill(old_coordinator)
        produce(cluster.bootstrap_servers, topic, range(RECORDS // 2, RECORDS), PARTITIONS)
        wanted = expected_keys(RECORDS, PARTITIONS)
        while not wanted <= set(seen):
            assert time.monotonic() < deadline, (
                f"{len(set(seen))} of {RECORDS} consumed after coordinator {old_coordinator} "
                f"was killed; commit retries {retried_commits}"
            )
            consume_some(10)
        commit()
        new_coordinator = cluster.coordinator_of(group_id)
        final = consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30
        )
    finally:
        consumer.close()

    assert new_coordinator != old_coordinator
    assert set(seen) == wanted, "only produced records arrived"
    for partition, offsets in committed.items():
        assert offsets == sorted(offsets), f"partition {partition} commits went back: {offsets}"
    assert {tp.partition: tp.offset for tp in final} == {
        p: len([k for k in wanted if k[0] == p]) for p in range(PARTITIONS)
    }, "the last commit covers every record"
    print(  # noqa: T201 - the figures of the run, for the report
        f"\nconsumer: coordinator {old_coordinator} -> {new_coordinator}; "
        f"{sum(seen.values())} deliveries of {RECORDS} records; commit retries "
        f"{dict(retried_commits)}"
    )
