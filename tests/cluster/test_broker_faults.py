"""A KIP-848 group of member processes (our ``Consumer``) on the three-broker cluster while
numbered records flow (``acks=all``, idempotent) and the brokers fail under it:

* a rolling restart: every broker in turn shut down (SIGTERM, a controlled shutdown) and
  restarted, the next one only once every replica is back in sync;
* the group coordinator's broker killed (SIGKILL): the members find the new coordinator, which
  first loads the group from ``__consumer_offsets`` (answering COORDINATOR_LOAD_IN_PROGRESS
  meanwhile), while the broker stays down; then it is restarted;
* the coordinator's broker paused (SIGSTOP) past the broker session timeout, so the controller
  fences it and the coordinator moves, then resumed.

After each fault the time until every live member is STABLE with every partition owned once is
measured and printed. The run is checked like the reliability tier's: nothing lost, no partition
owned by two live members at once, no commit going back, every duplicate explained.

The controller failover is ``test_controller_failover.py``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cluster_fleet import (
    BROKER_PAUSE_S,
    ClusterChurn,
    cluster_duplicate_causes,
    coordinator_loads,
    figures,
    member_errors,
)
from confluent_kafka.admin import AdminClient
from reliability_support import CONVERGE_S, SteadyProducer
from run_checks import check_run

from consumer.testing.real.cluster import LocalCluster
from consumer.testing.timeline_events import wall_clock_ms

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

PARTITIONS = 6
SLOTS = ("m1", "m2", "m3")
RECORDS = 6_000
REBALANCE_MS = 5_000


def test_consumer_group_through_rolling_restart_coordinator_kill_and_broker_pause(
    cluster: LocalCluster,
    cluster_admin: AdminClient,
    make_cluster_fleet: Callable[..., tuple[Any, Any]],
    tmp_path: Path,
) -> None:
    fleet, produced = make_cluster_fleet(PARTITIONS, config={"max.poll.interval.ms": REBALANCE_MS})
    faults = ClusterChurn(fleet, cluster, cluster_admin, tmp_path, 848, slow_revoke_s=0)
    produced.produce(RECORDS // 4)
    for slot in SLOTS:
        faults.spawn(slot)
    fleet.wait_converged(CONVERGE_S * 2)
    producer = SteadyProducer(produced, RECORDS - RECORDS // 4, seconds=60.0)
    producer.start()

    rolling = [faults.broker_fault("broker_stop", node) for node in cluster.broker_ids]
    print(f"\nrolling restart: STABLE after {[round(s, 1) for s in rolling]} s")  # noqa: T201

    since = wall_clock_ms()
    old_coordinator = cluster.coordinator_of(fleet.group)
    after_restart = faults.broker_fault("coordinator_kill", old_coordinator)
    new_coordinator = cluster.coordinator_of(fleet.group)
    loads = coordinator_loads(cluster, since)
    seen = member_errors(fleet, since)
    print(  # noqa: T201 - the figures of the run, for the report
        f"coordinator kill: broker {old_coordinator} -> {new_coordinator}; STABLE "
        f"{faults.coordinator_down_to_stable[-1]:.1f} s after the kill (broker down), "
        f"{after_restart:.1f} s after its restart; loads {loads}; members surfaced {dict(seen)}"
    )

    paused = cluster.coordinator_of(fleet.group)
    after_pause = faults.broker_fault("broker_pause", paused)
    print(  # noqa: T201
        f"coordinator broker {paused} paused {BROKER_PAUSE_S} s: "
        f"STABLE {after_pause:.1f} s after resume; "
        f"coordinator now {cluster.coordinator_of(fleet.group)}"
    )

    producer.finish(300)
    assert producer.done.is_set(), "the producer did not finish"
    unknown_offsets = produced.resolve_unknown_offsets()
    fleet.wait_all_processed(produced, 120)
    fleet.wait_converged()
    fleet.stop_all()
    result = check_run(fleet, produced, rebalance_timeout_ms=REBALANCE_MS)
    causes = cluster_duplicate_causes(fleet, REBALANCE_MS, faults.broker_windows)
    times = [t for values in faults.to_stable.values() for t in values]
    result.extra.update(
        to_stable_median_max=figures(times),
        producer_pace_cut_s=round(producer.pace_cut_s, 1),
        duplicate_causes=dict(causes),
        acked_without_offset=unknown_offsets,
    )
    result.faults = dict(faults.done)
    print(result.counts_line("cluster broker faults"))  # noqa: T201
    assert not result.problems, "\n".join(result.problems[:30])
    assert result.report.lost_records == 0
    assert result.report.double_owned == 0
    assert result.report.commit_regressions == 0
    assert causes.get("unexplained", 0) == 0, causes
    assert new_coordinator != old_coordinator
    assert any("__consumer_offsets" in line for line in loads), "a new coordinator loaded"
    assert sum(faults.done.values()) == len(cluster.broker_ids) + 2
