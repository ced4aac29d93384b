"""Churn on the three-broker cluster: member processes (our KIP-848 ``Consumer``) on a replicated
topic while numbered records flow (``acks=all``, idempotent) and a seeded mix of member faults
(kill + restart, leave + join, pauses longer and shorter than the session timeout, an on_revoke
slower than the rebalance timeout) and broker faults (SIGKILL or controlled shutdown + restart, a
broker paused past its session, the coordinator's broker killed) hits them. The run is checked
like ``tests/reliability/test_churn.py``'s and its figures are printed, the recovery times (from
each fault's end until every live member is STABLE with every partition owned once) included.

CI runs the reduced size (8,000 records, 6 faults of which 3 on brokers). The full size
(``KGM_CLUSTER_CHURN_SIZE=full``: 200,000 records, 52 faults of which 22 on brokers) and a
moderate one (``moderate``: 40,000 records, 20 faults of which 10 on brokers) are run by
``python -m benchmarks.cluster_churn``, which also runs the members on confluent-kafka's KIP-848
consumer (``KGM_CLUSTER_CHURN_IMPL=confluent``) as the anchor of the recovery times: those
report no member state, so for them "converged" is every partition owned once, balanced.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cluster_fleet import (
    BROKER_KINDS,
    ClusterChurn,
    cluster_duplicate_causes,
    figures,
    schedule,
)
from confluent_kafka.admin import AdminClient
from offsets_log import broker_order_problems, logged_commits, logged_regressions
from reliability_support import CONVERGE_S, HEARTBEAT_MS, SteadyProducer
from run_checks import check_run

from consumer.testing.real.cluster import LocalCluster

SIZES = {"ci": (8_000, 6, 3), "moderate": (40_000, 20, 10), "full": (200_000, 52, 22)}
SIZE = os.environ.get("KGM_CLUSTER_CHURN_SIZE", "").lower() or "ci"
if SIZE not in SIZES:
    raise ValueError(f"KGM_CLUSTER_CHURN_SIZE must be one of {sorted(SIZES)}, got {SIZE!r}")
FULL = SIZE != "ci"
RECORDS, FAULTS, BROKER_FAULTS = SIZES[SIZE]
#: ``ours`` or ``confluent`` (confluent-kafka's KIP-848 consumer, the anchor).
IMPL = os.environ.get("KGM_CLUSTER_CHURN_IMPL", "ours")
SEED = int(os.environ.get("KGM_RELIABILITY_SEED", "848"))
SLOTS = ("m1", "m2", "m3", "m4")
PARTITIONS = 8
REBALANCE_MS = 5_000
#: Where the full-size run writes its figures (set by ``benchmarks.cluster_churn``).
RESULT_PATH = os.environ.get("KGM_CLUSTER_CHURN_RESULT")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(5400 if FULL else 420)]


def test_cluster_churn(
    cluster: LocalCluster,
    cluster_admin: AdminClient,
    make_cluster_fleet: Callable[..., tuple[Any, Any]],
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    fleet, produced = make_cluster_fleet(
        PARTITIONS, impl=IMPL, config={"max.poll.interval.ms": REBALANCE_MS}
    )
    churn = ClusterChurn(
        fleet, cluster, cluster_admin, tmp_path, SEED, slow_revoke_s=REBALANCE_MS / 1000 + 3
    )
    plan = schedule(FAULTS, BROKER_FAULTS, churn.rng)
    produced.produce(RECORDS // 10)
    for slot in SLOTS:
        churn.spawn(slot)
    fleet.wait_converged(CONVERGE_S * 2)
    producer = SteadyProducer(produced, RECORDS - RECORDS // 10, seconds=len(plan) * 9.0)
    producer.start()
    for number, kind in enumerate(plan, start=1):
        churn.run(kind)
        print(  # noqa: T201 - progress of a long run
            f"fault {number}/{len(plan)} {kind}: STABLE after {churn.to_stable[kind][-1]:.1f} s",
            flush=True,
        )
    producer.finish(900)
    assert producer.done.is_set(), "the producer did not finish"
    unknown_offsets = produced.resolve_unknown_offsets()
    drained = fleet.wait_all_processed(produced, 600)
    fleet.wait_converged()
    fleet.stop_all()
    result = check_run(fleet, produced, rebalance_timeout_ms=REBALANCE_MS)
    # Commits are judged in the broker's order (see offsets_log): a member frozen while its
    # commit's answer was on the way records that commit only when it resumes.
    logged = logged_commits(cluster.bootstrap_servers, fleet.group)
    accepted = [
        (line["topic"], line["partition"], line["offset"])
        for member in fleet.members
        for line in member.view.of_type("commit")
    ]
    problems, reported_late = broker_order_problems(result.problems, accepted, logged)
    causes = cluster_duplicate_causes(fleet, REBALANCE_MS, churn.broker_windows)
    member_times = [t for k, v in churn.to_stable.items() if k not in BROKER_KINDS for t in v]
    broker_times = [t for k, v in churn.to_stable.items() if k in BROKER_KINDS for t in v]
    all_times = member_times + broker_times
    result.extra.update(
        size=SIZE,
        impl=IMPL,
        seed=SEED,
        to_stable_after_member_faults=figures(member_times),
        to_stable_after_broker_faults=figures(broker_times),
        two_heartbeats_s=2 * HEARTBEAT_MS / 1000,
        within_two_heartbeats=f"{sum(t <= 2 * HEARTBEAT_MS / 1000 for t in all_times)}"
        f"/{len(all_times)}",
        coordinator_down_to_stable=figures(churn.coordinator_down_to_stable),
        max_by_kind={k: round(max(v), 1) for k, v in churn.to_stable.items()},
        duplicate_causes=dict(causes),
        drain_s=round(drained, 1),
        producer_pace_cut_s=round(producer.pace_cut_s, 1),
        acked_without_offset=unknown_offsets,
        commits_in_log=len(logged),
        commit_regressions_in_log=len(logged_regressions(logged)),
        commit_regressions_reported_late=reported_late,
        run_s=round(time.monotonic() - started),
        members=len(fleet.members),
    )
    result.faults = dict(churn.done)
    print(result.counts_line("cluster churn"))  # noqa: T201
    if RESULT_PATH:
        Path(RESULT_PATH).write_text(
            json.dumps(
                {
                    "counts": result.counts_line("cluster churn"),
                    "records": result.report.records_produced,
                    "lost": result.report.lost_records,
                    "double_owned": result.report.double_owned,
                    "commit_regressions": len(logged_regressions(logged)),
                    "timeline_commit_regressions": result.report.commit_regressions,
                    "duplicates": result.report.duplicates,
                    "faults": result.faults,
                    "to_stable_s": {
                        k: [round(t, 2) for t in v] for k, v in churn.to_stable.items()
                    },
                    "coordinator_down_to_stable_s": churn.coordinator_down_to_stable,
                    **{k: v for k, v in result.extra.items() if k != "max_by_kind"},
                },
                indent=2,
            )
            + "\n"
        )
    assert sum(churn.done.values()) == FAULTS
    assert sum(churn.done[k] for k in BROKER_KINDS) == BROKER_FAULTS
    assert not problems, "\n".join(problems[:30])
    assert causes.get("unexplained", 0) == 0, causes
