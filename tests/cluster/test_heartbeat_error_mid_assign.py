"""A retriable heartbeat error while ``on_assign`` runs must not release the partitions being
assigned.

Member ``a`` joins a fresh group alone and gets all six partitions; its ``on_assign`` is held
(the fault). Member ``b`` joins, so the coordinator's new target keeps three partitions on ``a``
and marks the other three for revocation: it waits until ``a`` stops reporting them as owned.
Then ``a``'s heartbeats are answered with COORDINATOR_LOAD_IN_PROGRESS for a moment (``a``
reaches the coordinator through its fault proxy), which makes its next heartbeat a full request.
That request used to report only the partitions ``a`` had finished reconciling (none), which the
coordinator takes as the revocation: ``b`` got three partitions while ``a``'s ``on_assign`` for
them still ran, and both read them from the start. The member now reports the partitions it may
still hand to the application (``AssignmentManager.reported_owned``); ``b`` gets them only after
``a`` revoked them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from reliability_support import CONVERGE_S
from run_checks import check_run

from consumer.testing.real.proxied_cluster import ProxiedCluster
from consumer.testing.timeline_events import wall_clock_ms
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 6
CONSUMER_GROUP_HEARTBEAT = 68
COORDINATOR_LOAD_IN_PROGRESS = 14
#: How long ``a``'s on_assign is held after the error ended: several heartbeats of both members
#: (500 ms), so that a wrongly released partition would reach ``b`` meanwhile.
HELD_AFTER_ERROR_S = 2.5


def test_a_heartbeat_error_during_on_assign_releases_nothing_early(
    cluster: ProxiedCluster, make_cluster_fleet: Callable[..., tuple[Any, Any]], tmp_path: Path
) -> None:
    fleet, produced = make_cluster_fleet(PARTITIONS, proxied_slots=("a",))
    produced.produce(600)
    release = tmp_path / "release-a"
    a = fleet.spawn("a", hold_first_assign_file=str(release))
    wait_until(lambda: a.refresh().side_events("assign_hold"), CONVERGE_S, "a's on_assign to start")
    held_from = wall_clock_ms()
    b = fleet.spawn("b")
    wait_until(lambda: b.refresh().state == "STABLE", CONVERGE_S, "b to join")

    proxy = cluster.proxy(cluster.coordinator_of(fleet.group))
    answered = proxy.stats().answered
    proxy.answer_with_error(CONSUMER_GROUP_HEARTBEAT, COORDINATOR_LOAD_IN_PROGRESS)
    try:
        proxy.wait_for(lambda stats: stats.answered > answered, CONVERGE_S)
    finally:
        proxy.heal()
    fleet.fault("load_in_progress", None, held_from, wall_clock_ms())
    time.sleep(HELD_AFTER_ERROR_S)  # the fault itself: a's on_assign still runs
    b_assigned_while_held = [line for line in b.refresh().lines if line["type"] == "assigned"]
    release.touch()

    fleet.wait_converged(CONVERGE_S)
    produced.produce(300)
    fleet.wait_all_processed(produced, 90)
    fleet.stop_all()
    result = check_run(fleet, produced)
    print(result.counts_line("heartbeat error during on_assign"))  # noqa: T201
    assert not b_assigned_while_held, f"b got partitions a was assigning: {b_assigned_while_held}"
    assert not result.problems, "\n".join(result.problems[:30])
    assert result.report.double_owned == 0
    assert result.report.duplicates == 0
