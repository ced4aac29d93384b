"""The group coordinator's broker cut off from two members (its fault proxy blackholed) while
the rest of the cluster, and a third member that reaches the brokers directly, still see it.

The coordinator stays alive and keeps its leaderships, so FindCoordinator on the other brokers
names it again: the cut members cannot rejoin elsewhere. What they do is what Java's and
librdkafka's KIP-848 consumers do: their heartbeats time out, they look the coordinator up again
and retry with backoff, keep their assignment (a member learns of its own expiry only from the
broker) and keep fetching from the leaders they still reach. Cut for a third of the session,
nothing else happens: no callback, no fence. Cut past the session, the coordinator expires them
and gives their partitions to the member that still reaches it; what they processed after that
is refused at commit time (counted as zombie records); once the cut heals they are told they were
fenced (on_lost), rejoin and the group converges. Nothing is lost and no partition is owned by
two live members at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from cluster_fleet import cluster_duplicate_causes, member_errors
from member_processes import MemberProcess
from reliability_support import (
    CONVERGE_S,
    HEARTBEAT_MS,
    LAST_HEARD_SLACK_MS,
    SESSION_MS,
    SteadyProducer,
)
from run_checks import callbacks_of, check_run, states_of

from consumer.testing.real.proxied_cluster import ProxiedCluster
from consumer.testing.timeline_events import wall_clock_ms
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 6
REBALANCE_MS = 5_000
SHORT_CUT_S = SESSION_MS / 3000
#: Past the session: held until the broker has fenced both cut members, at most this long.
LONG_CUT_MAX_S = SESSION_MS / 1000 + 20 * HEARTBEAT_MS / 1000


def test_coordinator_cut_off_from_members_shorter_and_longer_than_the_session(
    cluster: ProxiedCluster, make_cluster_fleet: Callable[..., tuple[Any, Any]]
) -> None:
    fleet, produced = make_cluster_fleet(
        PARTITIONS, proxied_slots=("m1", "m2"), config={"max.poll.interval.ms": REBALANCE_MS}
    )
    produced.produce(600)
    cut = [fleet.spawn("m1"), fleet.spawn("m2")]
    direct = fleet.spawn("m3")
    fleet.wait_converged(CONVERGE_S * 2)
    fleet.wait_all_processed(produced, 60)
    coordinator = cluster.coordinator_of(fleet.group)
    proxy = cluster.proxy(coordinator)

    # A third of the session: the members ride it out.
    short_start = wall_clock_ms()
    proxy.blackhole()
    time.sleep(SHORT_CUT_S)  # the fault itself: held this long
    proxy.heal()
    short_end = wall_clock_ms()
    for member in cut:
        fleet.fault("blackhole", member.name, short_start - LAST_HEARD_SLACK_MS, short_end)
    produced.produce(300)
    fleet.wait_all_processed(produced, 60)
    fleet.wait_converged()
    for member in (*cut, direct):
        assert not callbacks_of(member, short_start), (
            member.name,
            callbacks_of(member, short_start),
        )
        assert "FENCED" not in states_of(member, short_start), states_of(member, short_start)

    # Past the session, with records flowing: fenced, covered by m3, back after the heal.
    producer = SteadyProducer(produced, 1_500, seconds=12.0)
    producer.start()
    long_start = wall_clock_ms()
    proxy.blackhole()

    def fenced_and_covered() -> bool:
        fenced = {name for name, _at, _reason in fleet.broker_fences() if _at >= long_start}
        return {m.name for m in cut} <= fenced and fleet.converged([direct])

    try:
        wait_until(fenced_and_covered, LONG_CUT_MAX_S, "both cut members fenced, m3 owning all")
    finally:
        proxy.heal()
        long_end = wall_clock_ms()
        for member in cut:
            fleet.fault("blackhole", member.name, long_start - LAST_HEARD_SLACK_MS, long_end)
    cut_s = (long_end - long_start) / 1000
    recovered_s = fleet.wait_converged(CONVERGE_S)
    for member in cut:
        wait_until(lambda m=member: lost_after(m, long_start), 10, f"on_lost of {member.name}")

    producer.finish(120)
    assert producer.done.is_set(), "the producer did not finish"
    unknown_offsets = produced.resolve_unknown_offsets()
    fleet.wait_all_processed(produced, 120)
    live_at_end = len(fleet.live())
    surfaced = member_errors(fleet, long_start)
    fleet.stop_all()
    result = check_run(fleet, produced, rebalance_timeout_ms=REBALANCE_MS)
    causes = cluster_duplicate_causes(fleet, REBALANCE_MS, [])
    result.extra.update(
        coordinator=coordinator,
        producer_pace_cut_s=round(producer.pace_cut_s, 1),
        long_cut_s=round(cut_s, 1),
        stable_after_heal_s=round(recovered_s, 1),
        cut_member_states=[states_of(m, long_start) for m in cut],
        surfaced=dict(surfaced),
        duplicate_causes=dict(causes),
        acked_without_offset=unknown_offsets,
    )
    result.faults = dict(fleet.fault_counts)
    print(result.counts_line("coordinator cut off from members"))  # noqa: T201
    assert not result.problems, "\n".join(result.problems[:30])
    assert result.report.lost_records == 0
    assert result.report.double_owned == 0
    assert result.report.commit_regressions == 0
    assert causes.get("unexplained", 0) == 0, causes
    assert live_at_end == 3, "a member process died"


def lost_after(member: MemberProcess, since_ms: int) -> bool:
    """Whether ``member``'s ``on_lost`` started at or after ``since_ms``."""
    return any(e["at_ms"] >= since_ms for e in member.refresh().side_events("lost_start"))
