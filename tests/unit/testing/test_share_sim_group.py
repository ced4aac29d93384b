"""The simulated share group coordinator and its ``simple`` assignor rules (KIP-932)."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest

from consumer.member.partitions import TopicIdPartition
from consumer.share.commands import ShareHeartbeatRequest
from consumer.testing.sim import ShareCoordinatorSim, ShareHeartbeatReply, simple_share_assignment
from consumer.testing.sim.share_coordinator import topic_id_of

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)


def assign(
    members: list[str],
    partitions: int,
    previous: dict[str, frozenset[TopicIdPartition]] | None = None,
) -> dict[str, frozenset[TopicIdPartition]]:
    return simple_share_assignment(
        [(m, frozenset({"t"})) for m in members], {"t": (T, partitions)}, previous or {}
    )


def per_partition(result: dict[str, frozenset[TopicIdPartition]]) -> Counter[int]:
    return Counter(tp.partition for assigned in result.values() for tp in assigned)


@pytest.mark.parametrize(
    ("members", "partitions", "sharing"),
    [(6, 2, 3), (5, 2, 3), (3, 2, 2), (2, 2, 1), (1, 3, 1), (4, 3, 2), (7, 1, 7)],
)
def test_every_member_gets_partitions_and_sharing_is_balanced(
    members: int, partitions: int, sharing: int
) -> None:
    ids = [f"m{i}" for i in range(members)]
    result = assign(ids, partitions)
    counts = [len(result[m]) for m in ids]
    assert min(counts) >= 1, result
    assert max(counts) - min(counts) <= 1, counts
    assert set(per_partition(result)) == set(range(partitions))
    assert max(per_partition(result).values()) <= sharing


def test_six_members_on_two_partitions_share_three_each() -> None:
    result = assign([f"m{i}" for i in range(6)], 2)
    assert all(len(assigned) == 1 for assigned in result.values())
    assert per_partition(result) == Counter({0: 3, 1: 3})


def test_fewer_members_than_partitions_split_them() -> None:
    result = assign(["a", "b"], 5)
    assert sorted(len(v) for v in result.values()) == [2, 3]
    assert per_partition(result) == Counter({p: 1 for p in range(5)})


def test_members_keep_their_partitions_when_a_member_joins() -> None:
    before = assign(["a", "b"], 4)
    after = assign(["a", "b", "c"], 4, before)
    assert len(after["c"]) >= 1
    for member in ("a", "b"):
        assert after[member] <= before[member]  # nothing moves between the old members
    assert per_partition(after) == Counter({p: 1 for p in range(4)})


def test_heterogeneous_subscriptions_assign_each_topic_among_its_subscribers() -> None:
    result = simple_share_assignment(
        [("a", frozenset({"t"})), ("b", frozenset({"u"})), ("c", frozenset({"t", "u"}))],
        {"t": (T, 1), "u": (U, 1)},
        {},
    )
    assert {tp.topic_id for tp in result["a"]} == {T}
    assert {tp.topic_id for tp in result["b"]} == {U}
    assert all(result[m] for m in "abc")


def join(
    sim: ShareCoordinatorSim, member: str, now_ms: int = 0, topics: tuple[str, ...] = ("t",)
) -> ShareHeartbeatReply:
    return sim.heartbeat(ShareHeartbeatRequest("g", member, 0, None, topics), now_ms)


def beat(sim: ShareCoordinatorSim, member: str, epoch: int, now_ms: int) -> ShareHeartbeatReply:
    return sim.heartbeat(ShareHeartbeatRequest("g", member, epoch), now_ms)


def coordinator() -> ShareCoordinatorSim:
    sim = ShareCoordinatorSim(group_id="g", session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
    sim.create_topic("t", 2)
    return sim


def test_join_gives_the_group_epoch_and_the_assignment_then_others_move_on_their_heartbeat() -> (
    None
):
    sim = coordinator()
    first = join(sim, "a")
    assert (first.error_code, first.member_epoch, first.heartbeat_interval_ms) == (0, 1, 1_000)
    assert first.assignment == {TopicIdPartition(topic_id_of("t"), p) for p in (0, 1)}
    second = join(sim, "b", 10)
    assert second.member_epoch == 2
    assert second.assignment is not None
    assert len(second.assignment) == 1
    unchanged = beat(sim, "b", 2, 20)
    assert unchanged.member_epoch == 2
    assert unchanged.assignment is None
    moved = beat(sim, "a", 1, 30)
    assert moved.member_epoch == 2
    assert moved.assignment is not None
    assert moved.assignment.isdisjoint(second.assignment)


def test_a_wrong_epoch_is_fenced_and_an_unknown_member_is_told_so() -> None:
    sim = coordinator()
    join(sim, "a")
    assert beat(sim, "a", 7, 1).error_code == 110  # FENCED_MEMBER_EPOCH
    assert beat(sim, "nobody", 1, 1).error_code == 25  # UNKNOWN_MEMBER_ID
    assert sim.heartbeat(ShareHeartbeatRequest("g", "c", 0), 1).error_code == 42  # no topics
    assert sim.heartbeat(ShareHeartbeatRequest("g", "", 0, None, ("t",)), 1).error_code == 42


def test_a_silent_member_is_removed_after_the_session_timeout_and_may_rejoin() -> None:
    sim = coordinator()
    join(sim, "a")
    join(sim, "b")
    for now in range(1_000, 10_000, 1_000):
        assert beat(sim, "a", sim.members["a"].epoch, now).error_code == 0
    assert sim.next_expiry_ms() == 10_000
    assert sim.expire(10_000) == ["b"]
    assert sim.removed_members == ["b"]
    assert beat(sim, "b", 2, 10_001).error_code == 25
    rejoined = join(sim, "b", 10_002)
    assert rejoined.error_code == 0
    assert rejoined.member_epoch == sim.group_epoch


def test_leave_removes_the_member_and_reassigns_its_partitions() -> None:
    sim = coordinator()
    join(sim, "a")
    join(sim, "b")
    left = beat(sim, "b", 2, 5)
    assert left.error_code == 0
    assert sim.heartbeat(ShareHeartbeatRequest("g", "b", -1), 6).member_epoch == -1
    assert "b" not in sim.members
    after = beat(sim, "a", 1, 7)
    assert after.member_epoch == 3
    assert after.assignment is not None
    assert len(after.assignment) == 2


def test_a_new_subscribed_topic_and_new_partitions_bump_the_epoch() -> None:
    sim = coordinator()
    join(sim, "a", topics=("t", "later"))
    epoch = sim.group_epoch
    sim.create_topic("later", 1)
    assert sim.group_epoch == epoch + 1
    sim.add_partitions("t", 3)
    assert sim.group_epoch == epoch + 2
    assert len(sim.target["a"]) == 4
    sim.create_topic("unrelated", 1)
    assert sim.group_epoch == epoch + 2


@pytest.mark.parametrize("seed", range(20))
def test_balance_holds_through_random_joins_and_leaves(seed: int) -> None:
    rng = random.Random(seed)
    partitions = rng.randint(1, 6)
    members: list[str] = []
    target: dict[str, frozenset[TopicIdPartition]] = {}
    for step in range(30):
        if members and rng.random() < 0.4:
            members.remove(rng.choice(members))
        else:
            members.append(f"m{step}")
        target = assign(members, partitions, target)
        if not members:
            continue
        counts = [len(target[m]) for m in members]
        sharing = -(-len(members) // partitions)
        assert min(counts) >= 1, (step, target)
        assert max(counts) - min(counts) <= 1, (step, counts)
        assert set(per_partition(target)) == set(range(partitions)), (step, target)
        assert max(per_partition(target).values()) <= sharing, (step, target)
