"""The active KRaft controller killed while a KIP-848 group (our ``Consumer`` in member
processes) consumes numbered records (``acks=all``, idempotent) and rebalances: a third member is
joining when the controller dies, and a partition's leader broker dies while the quorum has no
leader, so the new leader can only be elected by the next controller.

The group coordinator lives on a broker, so a controller failover alone does not touch the
group: the join completes while the quorum elects a new leader (about 2 s: the followers' fetch
timeout plus one election). The leader move does wait for it. What must hold: the quorum elects
another controller, the killed one rejoins as a voter after its restart, nothing is lost, no
partition is owned by two live members at once, no commit goes back, every duplicate is
explained, and all three members end STABLE with every partition owned once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from cluster_fleet import cluster_duplicate_causes, wait_fully_replicated
from confluent_kafka.admin import AdminClient
from reliability_support import CONVERGE_S, SteadyProducer
from run_checks import check_run

from consumer.testing.real.cluster import LocalCluster
from consumer.testing.timeline_events import wall_clock_ms
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 6
RECORDS = 3_000
REBALANCE_MS = 5_000


def wait_new_controller(cluster: LocalCluster, old: int, timeout_s: float = 30.0) -> int:
    """The node id of the controller that leads the quorum after ``old`` (once there is one)."""
    elected: list[int] = []

    def another() -> bool:
        elected[:] = [cluster.active_controller()]
        return elected[0] not in (-1, old)

    wait_until(another, timeout_s, f"a controller other than {old} to lead", lambda: str(elected))
    return elected[0]


def test_group_through_active_controller_kill_with_a_join_and_a_leader_kill(
    cluster: LocalCluster,
    cluster_admin: AdminClient,
    make_cluster_fleet: Callable[..., tuple[Any, Any]],
) -> None:
    assert len(cluster.controller_ids) == 3, "the tier's cluster runs a quorum of 3 controllers"
    fleet, produced = make_cluster_fleet(PARTITIONS, config={"max.poll.interval.ms": REBALANCE_MS})
    produced.produce(RECORDS // 3)
    for slot in ("m1", "m2"):
        fleet.spawn(slot)
    fleet.wait_converged(CONVERGE_S * 2)
    producer = SteadyProducer(produced, RECORDS - RECORDS // 3, seconds=10.0)
    producer.start()

    coordinator = cluster.coordinator_of(fleet.group)
    victim_broker = next(
        cluster.leader_of(fleet.topic, p)
        for p in range(PARTITIONS)
        if cluster.leader_of(fleet.topic, p) != coordinator
    )
    led = [p for p in range(PARTITIONS) if cluster.leader_of(fleet.topic, p) == victim_broker]
    joiner = fleet.spawn("m3")
    wait_until(lambda: joiner.refresh().states, 60, "m3 to start joining", fleet.describe)

    old_controller = cluster.active_controller()
    down = wall_clock_ms()
    killed = time.monotonic()
    cluster.kill(old_controller)
    cluster.kill(victim_broker)
    new_controller = wait_new_controller(cluster, old_controller)
    failover_s = time.monotonic() - killed
    wait_until(
        lambda: all(cluster.leader_of(fleet.topic, p) not in (-1, victim_broker) for p in led),
        30,
        f"new leaders for partitions {led} of broker {victim_broker}",
    )
    leaders_moved_s = time.monotonic() - killed
    converged_down_s = fleet.wait_converged(CONVERGE_S)

    with ThreadPoolExecutor(2) as pool:  # both JVMs start at once, as after a power cut
        for restarted in pool.map(cluster.restart, (old_controller, victim_broker)):
            assert restarted is None
    up = wall_clock_ms()
    fleet.fault("controller_kill", None, down, up)
    fleet.fault("broker_kill", None, down, up)
    converged_up_s = fleet.wait_converged(CONVERGE_S)
    quorum_after = cluster.active_controller()

    producer.finish(120)
    assert producer.done.is_set(), "the producer did not finish"
    unknown_offsets = produced.resolve_unknown_offsets()
    fleet.wait_all_processed(produced, 120)
    wait_fully_replicated(cluster_admin, [fleet.topic])
    live_at_end = len(fleet.live())
    fleet.stop_all()
    result = check_run(fleet, produced, rebalance_timeout_ms=REBALANCE_MS)
    windows = [("controller_kill", down, up), ("broker_kill", down, up)]
    causes = cluster_duplicate_causes(fleet, REBALANCE_MS, windows)
    result.extra.update(
        controller=f"{old_controller}->{new_controller} in {failover_s:.1f} s",
        leaders_moved_s=round(leaders_moved_s, 1),
        producer_pace_cut_s=round(producer.pace_cut_s, 1),
        stable_while_down_s=round(converged_down_s, 1),
        stable_after_restart_s=round(converged_up_s, 1),
        duplicate_causes=dict(causes),
        fences=[f"{name}: {reason}" for name, _at, reason in fleet.broker_fences()],
        acked_without_offset=unknown_offsets,
    )
    result.faults = dict(fleet.fault_counts)
    print(result.counts_line("controller failover"))  # noqa: T201
    assert not result.problems, "\n".join(result.problems[:30])
    assert result.report.lost_records == 0
    assert result.report.double_owned == 0
    assert result.report.commit_regressions == 0
    assert causes.get("unexplained", 0) == 0, causes
    assert quorum_after in cluster.controller_ids, f"the quorum has no leader: {quorum_after}"
    assert live_at_end == 3, "a member process died"
