"""The KIP-848 case studies (seed 000), replayed heartbeat by heartbeat.

Each step asserts what the seed's tables show: the group epoch, the target epoch, and for every
member the epoch and partitions the coordinator holds, plus what the member itself believes
(its epoch and the partitions its data plane fetches).

Where the seed's "versions compared" text is garbled, the KIP's rules decide (the coordinator's
``CurrentAssignmentBuilder``): a member whose new partitions are still owned elsewhere moves to the
*target* epoch without them, and a member acknowledging a revocation moves to the target epoch.
Each such place is marked "KIP rule".
"""

from __future__ import annotations

from consumer.member import MemberState
from consumer.testing.sim.coordinator import CoordinatorSim
from consumer.testing.sim.harness import GroupHarness

NO_EXPIRY_MS = 3_600_000


def parts(*numbers: int) -> list[str]:
    return [f"foo-{n}" for n in numbers]


def server(h: GroupHarness, name: str) -> tuple[int, list[str]]:
    epoch, partitions = h.sim.member_assignment(h[name].member.member_id)
    return epoch, [str(p) for p in partitions]


def client(h: GroupHarness, name: str) -> tuple[int, list[str]]:
    driver = h[name]
    return driver.member.member_epoch, sorted(str(p) for p in driver.fetching)


def target(h: GroupHarness, name: str) -> list[str]:
    return [str(p) for p in h.sim.target_assignment(h[name].member.member_id)]


def harness(partitions: int, first_group_epoch: int = 0) -> GroupHarness:
    sim = CoordinatorSim(session_timeout_ms=NO_EXPIRY_MS, group_epoch=first_group_epoch)
    sim.target_epoch = first_group_epoch
    sim.create_topic("foo", partitions)
    return GroupHarness(sim, immediate_heartbeats=False)


def settle(h: GroupHarness) -> None:
    h.run_until(h.all_stable, max_ms=120_000)


def test_members_joining_one_by_one_on_three_partitions() -> None:
    h = harness(3)
    assert (h.sim.group_epoch, h.sim.target_epoch) == (0, 0)

    h.add_member("A")
    exchange = h.heartbeat("A")  # A joins: epoch 1, all partitions at once (nothing to revoke)
    assert exchange.request.member_epoch == 0
    assert (h.sim.group_epoch, h.sim.target_epoch) == (1, 1)
    assert target(h, "A") == parts(0, 1, 2)
    assert exchange.response.member_epoch == 1
    assert server(h, "A") == (1, parts(0, 1, 2))
    assert client(h, "A") == (1, parts(0, 1, 2))
    ack = h.heartbeat("A")  # A acknowledges its new assignment
    assert ack.request.topic_partitions is not None
    assert list(ack.request.topic_partitions[0].partitions) == [0, 1, 2]

    h.add_member("B")
    h.heartbeat("B")
    assert (h.sim.group_epoch, h.sim.target_epoch) == (2, 2)
    assert target(h, "A") == parts(0, 1)
    assert target(h, "B") == parts(2)
    # KIP rule: B moves to the target epoch 2 (the seed's garbled "epoch=1") without foo-2.
    assert server(h, "B") == (2, [])
    assert client(h, "B") == (2, [])

    h.heartbeat("A")  # instructed to revoke foo-2, still at epoch 1
    assert server(h, "A") == (1, parts(0, 1))
    assert client(h, "A") == (1, parts(0, 1))
    h.heartbeat("A")  # acknowledges the revocation: epoch 2
    assert server(h, "A") == (2, parts(0, 1))

    h.heartbeat("B")  # foo-2 is free now
    assert server(h, "B") == (2, parts(2))
    assert client(h, "B") == (2, parts(2))
    h.heartbeat("B")

    h.add_member("C")
    h.heartbeat("C")
    assert (h.sim.group_epoch, h.sim.target_epoch) == (3, 3)
    assert [target(h, m) for m in "ABC"] == [parts(0), parts(2), parts(1)]
    assert server(h, "C") == (3, [])  # epoch 3, but foo-1 is still A's

    h.heartbeat("B")  # nothing to revoke: straight to epoch 3
    assert server(h, "B") == (3, parts(2))
    h.heartbeat("C")  # still waiting for foo-1
    assert server(h, "C") == (3, [])

    h.heartbeat("A")  # revoke foo-1
    assert server(h, "A") == (2, parts(0))
    assert client(h, "A") == (2, parts(0))
    h.heartbeat("A")  # KIP rule: acknowledging moves A to epoch 3 (the seed's table says 2)
    assert server(h, "A") == (3, parts(0))

    h.heartbeat("C")
    assert server(h, "C") == (3, parts(1))
    assert client(h, "C") == (3, parts(1))
    h.heartbeat("C")
    # "All the members have eventually advanced to the group epoch (3)."
    assert [server(h, m) for m in "ABC"] == [(3, parts(0)), (3, parts(2)), (3, parts(1))]
    assert all(h[m].member.state is MemberState.STABLE for m in "ABC")


def test_incremental_revocation_and_assignment_with_six_partitions() -> None:
    h = harness(6, first_group_epoch=19)
    h.add_member("A")
    settle(h)
    h.add_member("B")
    settle(h)
    assert (h.sim.group_epoch, h.sim.target_epoch) == (21, 21)
    assert server(h, "A") == (21, parts(0, 1, 2))
    assert server(h, "B") == (21, parts(3, 4, 5))

    h.add_member("C")
    h.heartbeat("C")  # C joins: epoch 22, no partitions yet (they are not revoked)
    assert (h.sim.group_epoch, h.sim.target_epoch) == (22, 22)
    assert [target(h, m) for m in "ABC"] == [parts(0, 1), parts(3, 4), parts(2, 5)]
    assert server(h, "C") == (22, [])

    h.heartbeat("A")  # instructed to revoke foo-2
    assert server(h, "A") == (21, parts(0, 1))
    h.heartbeat("B")  # instructed to revoke foo-5
    assert server(h, "B") == (21, parts(3, 4))
    h.heartbeat("C")  # no change for C
    assert server(h, "C") == (22, [])

    h.heartbeat("A")  # acknowledges: epoch 22
    assert server(h, "A") == (22, parts(0, 1))
    assert client(h, "A") == (22, parts(0, 1))

    h.heartbeat("C")  # gets foo-2, which is free, but not foo-5
    assert server(h, "C") == (22, parts(2))
    assert client(h, "C") == (22, parts(2))
    h.heartbeat("C")  # acks foo-2

    h.heartbeat("B")  # acknowledges: epoch 22
    assert server(h, "B") == (22, parts(3, 4))

    h.heartbeat("C")  # gets foo-2 and foo-5
    assert server(h, "C") == (22, parts(2, 5))
    assert client(h, "C") == (22, parts(2, 5))


def test_member_failure_redistributes_its_partitions() -> None:
    h = harness(6, first_group_epoch=19)
    for name in "ABC":
        h.add_member(name)
        settle(h)
    assert [server(h, m) for m in "ABC"] == [
        (22, parts(0, 1)),
        (22, parts(3, 4)),
        (22, parts(2, 5)),
    ]
    h.sim.session_timeout_ms = 45_000
    h.crash("A")  # A fails to heartbeat; B and C keep heartbeating on their interval
    a_id = h["A"].member.member_id
    h.run_until(lambda: a_id not in h.sim.members, max_ms=60_000)
    assert h.sim.group_epoch == 23
    b_epoch, b_parts = server(h, "B")
    # The target is computed at once; B and C may already have heartbeated meanwhile.
    assert h.sim.target_epoch == 23
    assert target(h, "B") == parts(0, 3, 4)
    assert target(h, "C") == parts(1, 2, 5)
    assert b_epoch in (22, 23)

    h.heartbeat("B")
    h.heartbeat("C")
    assert server(h, "B") == (23, parts(0, 3, 4))
    assert server(h, "C") == (23, parts(1, 2, 5))
    assert client(h, "B") == (23, parts(0, 3, 4))
    assert client(h, "C") == (23, parts(1, 2, 5))
    assert b_parts in (parts(3, 4), parts(0, 3, 4))


def test_partition_added_goes_to_the_member_without_partitions() -> None:
    h = harness(1, first_group_epoch=20)
    h.add_member("A")
    settle(h)
    h.add_member("B")
    settle(h)
    assert (h.sim.group_epoch, h.sim.target_epoch) == (22, 22)
    assert server(h, "A") == (22, parts(0))
    assert server(h, "B") == (22, [])

    h.sim.add_partitions("foo", 2)  # the coordinator detects foo-1 and bumps the group epoch
    assert (h.sim.group_epoch, h.sim.target_epoch) == (23, 22)

    h.heartbeat("A")  # the new target is computed; A keeps foo-0 and moves to epoch 23
    assert h.sim.target_epoch == 23
    assert target(h, "A") == parts(0)
    assert target(h, "B") == parts(1)
    assert server(h, "A") == (23, parts(0))
    # KIP rule: the seed's final table is garbled (it mixes in members of case 1); B gets foo-1.
    h.heartbeat("B")
    assert server(h, "B") == (23, parts(1))
    assert client(h, "B") == (23, parts(1))
    h.heartbeat("B")
    assert client(h, "A") == (23, parts(0))
