"""FakeShareConsumer: the ShareConsumer API on the real ShareMember and a simulated share group."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from confluent_kafka import (
    AcknowledgeType,
    IllegalStateException,
    KafkaException,
    Messages,
    TopicPartition,
)

import consumer
from consumer.config import ConfigError
from consumer.testing import FakeShareConsumer, RecordState, ShareSimCluster

TOPIC = "orders"
Ack = dict[TopicPartition, set[int]]


def cluster_with(
    partitions: int = 1, records: int = 0, seed: int = 0, **group: object
) -> ShareSimCluster:
    cluster = ShareSimCluster(seed=seed)
    cluster.create_topic(TOPIC, partitions)
    cluster.set_group_config("g", {"share.auto.offset.reset": "earliest", **group})
    for i in range(records):
        cluster.produce(TOPIC, f"v{i}", partition=i % partitions)
    return cluster


def config(**extra: Any) -> dict[str, Any]:
    return {"group.id": "g", **extra}


def seen(messages: Messages) -> list[tuple[int, int, int | None]]:
    return [(m.partition() or 0, m.offset() or 0, m.delivery_count()) for m in messages]


def test_every_public_method_of_the_real_share_consumer_exists_with_its_parameters() -> None:
    for name, method in inspect.getmembers(consumer.ShareConsumer):
        if name.startswith("_") and name not in ("__enter__", "__exit__"):
            continue
        fake = getattr(FakeShareConsumer, name, None)
        assert fake is not None, f"FakeShareConsumer lacks {name}"
        if callable(method) and not isinstance(method, type):
            real_params = list(inspect.signature(method).parameters)
            assert list(inspect.signature(fake).parameters)[: len(real_params)] == real_params, name


def test_implicit_mode_accepts_the_previous_poll_and_refuses_acknowledge() -> None:
    cluster = cluster_with(records=3)
    fake = cluster.share_consumer(config(**{"max.poll.records": 2}))
    fake.subscribe([TOPIC])
    first = fake.poll(1.0)
    assert isinstance(first, Messages)
    assert seen(first) == [(0, 0, 1), (0, 1, 1)]
    with pytest.raises(IllegalStateException, match="explicit"):
        fake.acknowledge(first[0])
    assert seen(fake.poll(1.0)) == [(0, 2, 1)]
    assert cluster.record_state("g", TOPIC, 0, 1) == (RecordState.ACKNOWLEDGED, 1)
    assert cluster.record_state("g", TOPIC, 0, 2) == (RecordState.ACQUIRED, 1)
    assert fake.commit_sync() == {TopicPartition(TOPIC, 0): None}
    assert cluster.record_state("g", TOPIC, 0, 2) == (RecordState.ACKNOWLEDGED, 1)
    assert fake.commit_sync() == {}


def test_explicit_mode_needs_every_record_acknowledged_before_the_next_poll() -> None:
    cluster = cluster_with(records=3)
    fake = cluster.share_consumer(config(**{"share.acknowledgement.mode": "explicit"}))
    fake.subscribe([TOPIC])
    batch = fake.poll(1.0)
    assert len(batch) == 3
    fake.acknowledge(batch[0])
    fake.acknowledge(batch[1], AcknowledgeType.RELEASE)
    with pytest.raises(IllegalStateException, match="1 records from previous poll"):
        fake.poll(1.0)
    with pytest.raises(IllegalStateException, match="not in flight"):
        fake.acknowledge(batch[0])
    with pytest.raises(ValueError, match="ack_type"):
        fake.acknowledge_offset(TOPIC, 0, 2, 9)
    with pytest.raises(TypeError, match="ack_type"):
        fake.acknowledge_offset(TOPIC, 0, 2, "ACCEPT")  # type: ignore[arg-type]
    fake.acknowledge_offset(TOPIC, 0, 2, AcknowledgeType.REJECT)
    assert seen(fake.poll(1.0)) == [(0, 1, 2)]  # the RELEASEd record comes back
    assert cluster.record_state("g", TOPIC, 0, 0) == (RecordState.ACKNOWLEDGED, 1)
    assert cluster.record_state("g", TOPIC, 0, 2) == (RecordState.ARCHIVED, 1)


def test_poll_before_subscribe_and_after_close_raise_illegal_state() -> None:
    fake = cluster_with().share_consumer(config())
    with pytest.raises(IllegalStateException, match="not subscribed"):
        fake.poll(0)
    fake.subscribe([TOPIC])
    assert fake.subscription() == [TOPIC]
    fake.subscribe([])
    assert fake.subscription() == []
    with pytest.raises(ValueError, match="duplicate"):
        fake.subscribe([TOPIC, TOPIC])
    with pytest.raises(TypeError):
        fake.subscribe(TOPIC)
    fake.close()
    fake.close()
    with pytest.raises(IllegalStateException, match="closed"):
        fake.poll(0)


def test_the_configuration_is_checked_like_the_real_one() -> None:
    cluster = cluster_with()
    with pytest.raises(ConfigError, match="share.acknowledgement.mode"):
        cluster.share_consumer(config(**{"share.acknowledgement.mode": "auto"}))
    with pytest.raises(ConfigError, match="max.poll.records"):
        cluster.share_consumer(config(**{"max.poll.records": 0}))
    with pytest.raises(ValueError, match="share.delivery.count.limit"):
        cluster.set_group_config("g", {"share.delivery.count.limit": "zero"})
    with pytest.raises(ValueError, match="unknown share group config"):
        cluster.set_group_config("g", {"share.lock.ms": 1})


def test_the_callback_gets_each_partitions_outcome_on_the_polling_thread() -> None:
    cluster = cluster_with(partitions=2, records=4)
    fake = cluster.share_consumer(config())
    calls: list[tuple[Ack, KafkaException | None]] = []
    fake.set_acknowledgement_commit_callback(lambda offsets, error: calls.append((offsets, error)))
    fake.subscribe([TOPIC])
    fake.poll(1.0)
    assert calls == []
    fake.commit_async()
    assert calls == []  # delivered by the next poll, commit_sync or close
    fake.poll(0)
    assert calls == [
        ({TopicPartition(TOPIC, 0): {0, 1}}, None),
        ({TopicPartition(TOPIC, 1): {0, 1}}, None),
    ]

    def misuse(offsets: Ack, error: KafkaException | None) -> None:
        fake.poll(0)

    cluster.produce(TOPIC, "x", partition=0)
    fake.set_acknowledgement_commit_callback(misuse)
    fake.poll(1.0)
    with pytest.raises(IllegalStateException, match="callback"):
        fake.commit_sync()
    with pytest.raises(TypeError):
        fake.set_acknowledgement_commit_callback(42)


def test_processing_longer_than_the_lock_redelivers_and_the_late_accept_fails() -> None:
    cluster = cluster_with(records=1, **{"share.record.lock.duration.ms": 15_000})
    slow = cluster.share_consumer(config(), name="slow")
    other = cluster.share_consumer(config(), name="other")
    errors: list[KafkaException | None] = []
    slow.set_acknowledgement_commit_callback(lambda offsets, error: errors.append(error))
    slow.subscribe([TOPIC])
    other.subscribe([TOPIC])
    assert seen(slow.poll(1.0)) == [(0, 0, 1)]
    cluster.advance(20_000)  # processing takes longer than the lock
    assert cluster.record_state("g", TOPIC, 0, 0) == (RecordState.AVAILABLE, 1)
    assert seen(other.poll(1.0)) == [(0, 0, 2)]
    slow.commit_sync()
    assert len(errors) == 1
    assert errors[0] is not None
    assert errors[0].args[0].name() == "INVALID_RECORD_STATE"
    other.commit_sync()
    assert cluster.record_state("g", TOPIC, 0, 0) == (RecordState.ACKNOWLEDGED, 2)


def test_the_lock_deadline_of_a_record_in_flight_is_on_the_simulated_clock() -> None:
    cluster = cluster_with(records=2, **{"share.record.lock.duration.ms": 15_000})
    member = cluster.share_consumer(config(**{"share.acknowledgement.mode": "explicit"}))
    member.subscribe([TOPIC])
    assert member.acquisition_lock_timeout_ms() is None, "nothing acquired yet"
    first, second = member.poll(1.0)
    acquired_s = cluster.clock.now_ms / 1000
    assert member.acquisition_lock_timeout_ms() == 15_000
    assert member.acquisition_lock_deadline(first) == acquired_s + 15
    member.acknowledge(first)
    with pytest.raises(IllegalStateException, match="not in flight"):
        member.acquisition_lock_deadline(first)
    assert member.acquisition_lock_deadline(second) == acquired_s + 15


def test_renew_extends_the_lock_and_the_record_still_needs_a_final_acknowledgement() -> None:
    cluster = cluster_with(records=1, **{"share.record.lock.duration.ms": 15_000})
    slow = cluster.share_consumer(config(**{"share.acknowledgement.mode": "explicit"}), name="slow")
    other = cluster.share_consumer(config(), name="other")
    slow.subscribe([TOPIC])
    other.subscribe([TOPIC])
    (record,) = slow.poll(1.0)
    cluster.advance(10_000)
    slow.acknowledge(record, consumer.SHARE_ACKNOWLEDGE_TYPE_RENEW)
    with pytest.raises(IllegalStateException, match="1 records from previous poll"):
        slow.poll(1.0)  # a renewed record is still in flight
    assert slow.commit_sync() == {TopicPartition(TOPIC, 0): None}
    renewed_s = cluster.clock.now_ms / 1000
    assert slow.acquisition_lock_deadline(record) == renewed_s + 15
    cluster.advance(10_000)  # past the first lock, inside the renewed one
    assert cluster.record_state("g", TOPIC, 0, 0) == (RecordState.ACQUIRED, 1)
    assert seen(other.poll(1.0)) == []
    slow.acknowledge(record)
    slow.commit_sync()
    assert cluster.record_state("g", TOPIC, 0, 0) == (RecordState.ACKNOWLEDGED, 1)


def test_a_poison_record_is_archived_at_the_delivery_count_limit() -> None:
    cluster = cluster_with(records=2, **{"share.delivery.count.limit": 3})
    fake = cluster.share_consumer(config(**{"share.acknowledgement.mode": "explicit"}))
    fake.subscribe([TOPIC])
    counts: list[int | None] = []
    for _ in range(6):
        for message in fake.poll(1.0):
            if message.value() == b"v0":
                counts.append(message.delivery_count())
                fake.acknowledge(message, AcknowledgeType.RELEASE)
            else:
                fake.acknowledge(message)
    assert counts == [1, 2, 3]
    assert cluster.record_state("g", TOPIC, 0, 0) == (RecordState.ARCHIVED, 3)
    assert cluster.record_state("g", TOPIC, 0, 1) == (RecordState.ACKNOWLEDGED, 1)


def test_six_members_on_two_partitions_share_them_three_by_three() -> None:
    cluster = cluster_with(partitions=2, records=12)
    fakes = [cluster.share_consumer(config()) for _ in range(6)]
    for fake in fakes:
        fake.subscribe([TOPIC])
    cluster.advance(10_000)  # every member heartbeats and takes its target
    epochs = {fake.member_epoch for fake in fakes}
    assert epochs == {cluster.group("g").group_epoch}
    owners = [fake.assignment() for fake in fakes]
    assert all(len(assigned) == 1 for assigned in owners)
    assert sorted(a[0].partition for a in owners) == [0, 0, 0, 1, 1, 1]
    delivered = [seen(fake.poll(0.5)) for fake in fakes]
    offsets = sorted((p, o) for batch in delivered for p, o, _ in batch)
    assert offsets == sorted((i % 2, i // 2) for i in range(12))  # each record exactly once


def test_a_member_that_misses_heartbeats_is_removed_and_rejoins() -> None:
    cluster = cluster_with(partitions=2)
    stays, drops = cluster.share_consumer(config()), cluster.share_consumer(config())
    stays.subscribe([TOPIC])
    drops.subscribe([TOPIC])
    cluster.advance(10_000)
    assert len(stays.assignment()) == 1
    assert len(drops.assignment()) == 1
    drops.drop_heartbeats(50_000)
    cluster.advance(46_000)
    group = cluster.group("g")
    assert group.removed_members == [drops.memberid()]
    cluster.advance(5_000)
    assert len(stays.assignment()) == 2
    cluster.advance(10_000)  # the heartbeats go through again: UNKNOWN_MEMBER_ID, rejoin at 0
    assert drops.memberid() in group.members
    assert drops.state == "STABLE"
    assert drops.member_epoch == group.group_epoch
    cluster.advance(10_000)
    assert len(stays.assignment()) == 1
    assert len(drops.assignment()) == 1


def test_close_releases_at_once_and_a_crash_holds_records_until_the_locks_expire() -> None:
    cluster = cluster_with(records=2, **{"share.record.lock.duration.ms": 30_000})
    closing = cluster.share_consumer(config(**{"share.acknowledgement.mode": "explicit"}))
    closing.subscribe([TOPIC])
    assert len(closing.poll(1.0)) == 2
    closing.close()
    assert cluster.record_state("g", TOPIC, 0, 0) == (RecordState.AVAILABLE, 1)
    vanishing = cluster.share_consumer(config(**{"share.acknowledgement.mode": "explicit"}))
    vanishing.subscribe([TOPIC])
    assert seen(vanishing.poll(1.0)) == [(0, 0, 2), (0, 1, 2)]
    vanishing.crash(connections_closed=False)  # the host is gone: nobody closes its sessions
    with pytest.raises(IllegalStateException, match="closed"):
        vanishing.poll(0)
    later = cluster.share_consumer(config())
    later.subscribe([TOPIC])
    started = cluster.clock.now_ms
    assert seen(later.poll(60.0)) == [(0, 0, 3), (0, 1, 3)]
    assert cluster.clock.now_ms - started >= 29_000  # the locks had to run out first


def test_a_killed_process_has_its_records_released_when_its_connections_close() -> None:
    cluster = cluster_with(records=2, **{"share.record.lock.duration.ms": 60_000})
    killed = cluster.share_consumer(config(**{"share.acknowledgement.mode": "explicit"}))
    killed.subscribe([TOPIC])
    assert len(killed.poll(1.0)) == 2
    killed.crash()
    taker = cluster.share_consumer(config())
    taker.subscribe([TOPIC])
    started = cluster.clock.now_ms
    assert seen(taker.poll(60.0)) == [(0, 0, 2), (0, 1, 2)]
    assert cluster.clock.now_ms - started < 60_000
    assert killed.memberid() in cluster.group("g").members  # until its session times out
    cluster.advance(46_000)
    assert killed.memberid() not in cluster.group("g").members


def test_latest_by_default_skips_records_produced_before_the_first_read() -> None:
    cluster = ShareSimCluster()
    cluster.create_topic(TOPIC, 1)
    cluster.produce(TOPIC, "before")
    fake = cluster.share_consumer(config())
    fake.subscribe([TOPIC])
    assert len(fake.poll(1.0)) == 0
    cluster.produce(TOPIC, "after")
    assert [m.value() for m in fake.poll(1.0)] == [b"after"]


def test_the_same_seed_gives_the_same_run() -> None:
    def run(seed: int) -> tuple[list[str], list[tuple[int, str, int, int, int | None]]]:
        cluster = ShareSimCluster(seed=seed)
        cluster.create_topic(TOPIC, 2)
        cluster.set_group_config("g", {"share.auto.offset.reset": "earliest"})
        for i in range(20):
            cluster.produce(TOPIC, f"v{i}")  # unkeyed: the partition comes from the seed
        fakes = [cluster.share_consumer(config(**{"max.poll.records": 3})) for _ in range(3)]
        log: list[tuple[int, str, int, int, int | None]] = []
        for fake in fakes:
            fake.subscribe([TOPIC])
        for _ in range(8):
            for fake in fakes:
                for m in fake.poll(0.5):
                    log.append(
                        (
                            cluster.clock.now_ms,
                            fake.name,
                            m.partition() or 0,
                            m.offset() or 0,
                            m.delivery_count(),
                        )
                    )
        return [f.memberid() for f in fakes], log

    first = run(7)
    assert first == run(7)
    assert len(first[1]) == 20
    assert run(8) != first


def test_a_member_that_stops_polling_leaves_and_rejoins_on_its_next_poll() -> None:
    cluster = cluster_with(partitions=2)
    stalls = cluster.share_consumer(config(**{"max.poll.interval.ms": 10_000}))
    other = cluster.share_consumer(config())
    stalls.subscribe([TOPIC])
    other.subscribe([TOPIC])
    cluster.advance(6_000)
    assert len(stalls.assignment()) == 1
    cluster.advance(10_000)  # no poll for longer than max.poll.interval.ms
    assert stalls.state == "STALE"
    assert stalls.assignment() == []
    assert stalls.memberid() not in cluster.group("g").members
    cluster.advance(5_000)
    assert len(other.assignment()) == 2
    stalls.poll(0.1)
    cluster.advance(6_000)
    assert stalls.state == "STABLE"
    assert len(stalls.assignment()) == 1


def test_unsubscribe_leaves_the_group_and_its_partitions_go_to_the_others() -> None:
    cluster = cluster_with(partitions=2)
    leaving, staying = cluster.share_consumer(config()), cluster.share_consumer(config())
    leaving.subscribe([TOPIC])
    staying.subscribe([TOPIC])
    cluster.advance(6_000)
    leaving.unsubscribe()
    assert leaving.memberid() not in cluster.group("g").members
    assert leaving.state == "UNSUBSCRIBED"
    cluster.advance(6_000)
    assert len(staying.assignment()) == 2


def test_metrics_count_heartbeats_assignments_and_acknowledgements_on_simulated_time() -> None:
    cluster = cluster_with(partitions=2, records=4)
    fake = cluster.share_consumer(config())
    before = fake.metrics()
    assert before["heartbeat-total"] == 0
    assert before["acknowledgement-send-total"] == 0
    fake.subscribe([TOPIC])
    delivered = 0
    for _ in range(10):
        delivered += len(fake.poll(1.0))
        if delivered == 4:
            break
    assert delivered == 4
    assert fake.commit_sync() != {}
    after = fake.metrics()
    assert after["heartbeat-total"] >= 1
    assert after["assigned-partitions"] == 2
    assert after["member-epoch"] >= 1
    assert after["acknowledgement-send-total"] == 4
    assert after["acknowledgement-error-total"] == 0
    assert after["commit-total"] >= 1
    assert after["state-transitions-total"] >= 2
    assert set(after) == set(before)
