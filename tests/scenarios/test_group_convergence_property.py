"""Property: random churn with up to 20 members never double-assigns a partition, and once churn
stops every member becomes STABLE on its target within a bounded number of heartbeats.

Bound (also stated in docs/concepts/member-state-machine.md): once the coordinator has seen the last
membership or partition change (crashed members already expired by the session timeout), every
live member is STABLE on its target after at most 4 heartbeats of its own and within 2 heartbeat
intervals (10 s with the 5 s default), given prompt callbacks and a prompt network (the harness).
Why: a member's first interval heartbeat after the change returns the target - a revocation at its
old epoch, the new epoch with the free partitions, or the new epoch while partitions are still
unreleased. A revoking member acknowledges at once (heartbeat 2), which releases the partitions
within one interval, and its own new partitions come with that answer if free. A member still
waiting gets them on its next interval heartbeat (at most 2 intervals after the change, heartbeat 3)
and acknowledges at once (heartbeat 4).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.member import CloseRequested
from consumer.testing.sim.coordinator import CoordinatorSim
from consumer.testing.sim.harness import GroupHarness

MAX_MEMBERS = 20
MAX_HEARTBEATS_AFTER_CHURN = 4
HEARTBEAT_INTERVAL_MS = 5_000
MAX_MS_AFTER_CHURN = 2 * HEARTBEAT_INTERVAL_MS

operation = st.one_of(
    st.tuples(st.just("join"), st.integers(0, MAX_MEMBERS - 1)),
    st.tuples(st.just("close"), st.integers(0, MAX_MEMBERS - 1)),
    st.tuples(st.just("crash"), st.integers(0, MAX_MEMBERS - 1)),
    st.tuples(st.just("grow"), st.integers(1, 4)),
    st.tuples(st.just("wait"), st.integers(0, 12_000)),
    st.tuples(st.just("hold"), st.integers(0, MAX_MEMBERS - 1)),
    st.tuples(st.just("release"), st.integers(0, MAX_MEMBERS - 1)),
)


def assert_no_double_ownership(h: GroupHarness) -> None:
    """A partition belongs to a member from ApplyAssignment until its revocation completed."""
    owner: dict[object, str] = {}
    for driver in h.drivers.values():
        if not driver.alive:
            continue
        revoking = {tp for cmd in driver.pending_revocations for tp in cmd.partitions}
        for tp in driver.assigned | revoking:
            assert tp not in owner, f"{tp} owned by {owner[tp]} and {driver.name}"
            owner[tp] = driver.name


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    partitions=st.integers(1, 24),
    initial_members=st.integers(1, MAX_MEMBERS),
    operations=st.lists(operation, min_size=1, max_size=40),
    seed=st.integers(0, 1000),
)
def test_churn_never_double_assigns_and_converges(
    partitions: int, initial_members: int, operations: list[tuple[str, int]], seed: int
) -> None:
    sim = CoordinatorSim(heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS)
    sim.create_topic("foo", partitions)
    h = GroupHarness(sim, seed=seed)
    h.observers.append(assert_no_double_ownership)
    count = partitions
    for index in range(initial_members):
        h.add_member(f"m{index}")
        h.run(300)
    for kind, value in operations:
        name = f"m{value}"
        if kind == "join" and name not in h.drivers:
            h.add_member(name)
        elif kind == "close" and name in h.drivers and h[name].alive:
            h.feed(name, CloseRequested())
        elif kind == "crash" and name in h.drivers:
            h.crash(name)
        elif kind == "grow":
            count += value
            sim.add_partitions("foo", count)
        elif kind == "hold" and name in h.drivers:
            h[name].hold_revocations = True  # e.g. a Spark batch not committed yet
        elif kind == "release" and name in h.drivers:
            h[name].hold_revocations = False
            h[name].complete_revocations()
        if (kind, value) != operations[-1]:
            h.run(value if kind == "wait" else 500)
    for driver in h.drivers.values():
        driver.hold_revocations = False
        driver.complete_revocations()
    if not h.live():
        return
    # Churn ends once the coordinator expired every crashed member (session timeout).
    dead = {d.member.member_id for d in h.drivers.values() if not d.alive}
    h.run_until(lambda: not dead & set(sim.members), max_ms=60_000)
    start = {d.name: len(d.exchanges) for d in h.live()}
    elapsed_ms = h.run_until(h.all_stable, max_ms=MAX_MS_AFTER_CHURN)
    used = {d.name: len(d.exchanges) - start[d.name] for d in h.live()}
    assert max(used.values()) <= MAX_HEARTBEATS_AFTER_CHURN, used
    assert elapsed_ms <= MAX_MS_AFTER_CHURN
    assert_no_double_ownership(h)
    owned = sorted(str(tp) for d in h.live() for tp in d.assigned)
    assert owned == sorted(f"foo-{p}" for p in range(count))
