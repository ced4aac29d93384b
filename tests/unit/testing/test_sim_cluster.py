"""SimCluster's topics, records, clock and errors, and the simulation's own verdict checks."""

from __future__ import annotations

import pytest

from consumer.testing import SimCluster, Timeline
from consumer.testing.sim import verdict
from consumer.testing.sim.verdict import COMMIT_BY_NON_OWNER, RECORD_AFTER_RELEASE


def test_records_get_offsets_per_partition_and_keys_pick_a_stable_partition() -> None:
    cluster = SimCluster(seed=4)
    cluster.create_topic("t", 3)
    first = cluster.produce("t", "a", key="customer-1")
    again = cluster.produce("t", "b", key="customer-1")
    assert first.partition == again.partition
    assert (first.offset, again.offset) == (0, 1)
    pinned = cluster.produce("t", b"c", partition=2, headers=[("h", b"v")], timestamp_ms=9)
    assert (pinned.partition, pinned.headers, pinned.timestamp_ms) == (2, (("h", b"v"),), 9)
    assert cluster.topics.high_watermark("t", 2) == pinned.offset + 1


def test_unkeyed_records_spread_by_the_seed() -> None:
    def partitions(seed: int) -> list[int]:
        cluster = SimCluster(seed=seed)
        cluster.create_topic("t", 4)
        return [cluster.produce("t", "x").partition for _ in range(20)]

    assert partitions(1) == partitions(1)
    assert len(set(partitions(1))) > 1
    assert partitions(1) != partitions(2)


def test_topic_errors_name_the_bad_value_and_what_is_allowed() -> None:
    cluster = SimCluster()
    cluster.create_topic("t", 2)
    with pytest.raises(ValueError, match="'t' already exists"):
        cluster.create_topic("t", 2)
    with pytest.raises(ValueError, match="at least 1"):
        cluster.create_topic("u", 0)
    with pytest.raises(ValueError, match="unknown topic 'nope'; known topics: t"):
        cluster.produce("nope", "x")
    with pytest.raises(ValueError, match=r"partition 5 .* expected 0\.\.1"):
        cluster.produce("t", "x", partition=5)
    with pytest.raises(ValueError, match="must be more than"):
        cluster.add_partitions("t", 2)
    with pytest.raises(ValueError, match="ms must be >= 0"):
        cluster.advance(-1)


def test_add_partitions_reaches_every_group_coordinator() -> None:
    cluster = SimCluster()
    cluster.create_topic("t", 1)
    group = cluster.group("g")
    epoch = group.group_epoch
    fake = cluster.consumer({"group.id": "g"})
    fake.subscribe(["t"])
    fake.poll(0.5)
    cluster.add_partitions("t", 3)
    assert group.group_epoch > epoch + 1
    for _ in range(20):
        fake.poll(0.5)
    assert [tp.partition for tp in fake.assignment()] == [0, 1, 2]


def test_consumer_names_are_unique() -> None:
    cluster = SimCluster()
    cluster.consumer({"group.id": "g"}, name="x")
    with pytest.raises(ValueError, match="'x' already exists"):
        cluster.consumer({"group.id": "g"}, name="x")
    assert sorted(cluster.consumers()) == ["x"]
    assert cluster.consumer({"group.id": "g"}).name == "consumer-2"


def test_advance_without_members_just_moves_the_clock() -> None:
    cluster = SimCluster(start_ms=1_000)
    cluster.advance(500)
    assert cluster.clock.now_ms == 1_500


def test_verdict_flags_a_commit_by_a_member_that_did_not_own_the_partition() -> None:
    timeline = Timeline()
    timeline.assigned("a", "t", 0, 0)
    timeline.commit("a", "t", 0, 5, 10)
    timeline.revoked("a", "t", 0, 20)
    assert verdict(timeline).ok
    timeline.commit("a", "t", 0, 6, 30)
    report = verdict(timeline)
    assert report.invariants_broken() == {COMMIT_BY_NON_OWNER}
    assert "a committed t[0] offset 6 at 30" in report.summary()


def test_verdict_flags_a_record_handed_out_after_its_partition_was_released() -> None:
    timeline = Timeline()
    timeline.produced("t", 0, [0, 1], 0)
    timeline.assigned("a", "t", 0, 0)
    timeline.processed("a", "t", 0, 0, 5)
    timeline.revoked("a", "t", 0, 10)
    timeline.assigned("b", "t", 0, 10)
    timeline.processed("a", "t", 0, 1, 11)
    report = verdict(timeline)
    assert report.invariants_broken() == {RECORD_AFTER_RELEASE}
    assert "a received t[0] offset 1 at 11" in report.summary()
